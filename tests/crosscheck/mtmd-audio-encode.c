/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: one audio file through llama.cpp's multimodal
 * library (libmtmd, tools/mtmd), the reference side of audio.sh
 *
 *   mtmd-audio-encode -m TEXT.gguf --mmproj MMPROJ.gguf --audio FILE.wav
 *       [-o OUT.f32] [-t THREADS] [--repeat N]
 *
 * What llama-mtmd-cli --audio does up to the embeddings, through mtmd's
 * public API only: the text model is loaded (mtmd checks the projector's
 * width against it), the WAV decoded by mtmd's helper (miniaudio, to
 * 16 kHz mono float), mtmd_tokenize() cuts it into 30 s windows and
 * computes each one's Whisper log-mel (mtmd-audio.cpp), and
 * mtmd_encode_chunk() runs the encoder and projector (clip.cpp) on the
 * CPU, in F32 with flash attention off, so that the attention is computed
 * as ours is.  OUT.f32 gets the embeddings of every audio chunk in order,
 * n_tokens rows of n_embd floats each.
 *
 * Prints "chunks: C", "tokens: N" (of the first chunk), "embd: D" and
 * "encode: T ms (best of R, H threads)": the best of --repeat encodes of
 * the first chunk (a run includes building the graph, as every
 * mtmd_encode_chunk() does; the log-mel is not in it).
 *
 * Built against a llama.cpp build by build-llamacpp.sh; not part of the
 * meson build.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"
#include "mtmd.h"
#include "mtmd-helper.h"

static void
log_cb (enum ggml_log_level level, const char *text, void *user_data)
{
  (void) user_data;
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)
    fputs (text, stderr);
}

static int
usage (const char *argv0)
{
  fprintf (stderr, "usage: %s -m TEXT.gguf --mmproj MMPROJ.gguf --audio "
      "FILE.wav [-o OUT.f32] [-t THREADS] [--repeat N]\n", argv0);
  return 2;
}

static double
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int
main (int argc, char **argv)
{
  const char *model_path = NULL, *mmproj_path = NULL, *audio_path = NULL;
  const char *out_path = NULL;
  int n_threads = 1, repeat = 1, i, ret = 1;
  struct llama_model_params mp;
  struct llama_model *model = NULL;
  struct mtmd_context_params cp;
  mtmd_context *ctx = NULL;
  struct mtmd_helper_bitmap_wrapper bw = { NULL, NULL };
  mtmd_input_chunks *chunks = NULL;
  mtmd_input_text text;
  const mtmd_bitmap *bitmaps[1];
  FILE *out = NULL;
  size_t c, n_chunks = 0, n_audio = 0, first_tokens = 0;
  int n_embd;
  double best = -1;

  for (i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

    if (!v)
      return usage (argv[0]);
    if (strcmp (a, "-m") == 0)
      model_path = v;
    else if (strcmp (a, "--mmproj") == 0)
      mmproj_path = v;
    else if (strcmp (a, "--audio") == 0)
      audio_path = v;
    else if (strcmp (a, "-o") == 0)
      out_path = v;
    else if (strcmp (a, "-t") == 0)
      n_threads = atoi (v);
    else if (strcmp (a, "--repeat") == 0)
      repeat = atoi (v);
    else
      return usage (argv[0]);
    i++;
  }
  if (!model_path || !mmproj_path || !audio_path || n_threads < 1
      || repeat < 1)
    return usage (argv[0]);

  llama_log_set (log_cb, NULL);
  mtmd_helper_log_set (log_cb, NULL);
  llama_backend_init ();
  mp = llama_model_default_params ();
  mp.n_gpu_layers = 0;
  model = llama_model_load_from_file (model_path, mp);
  if (!model) {
    fprintf (stderr, "mtmd-audio-encode: cannot load '%s'\n", model_path);
    goto done;
  }
  cp = mtmd_context_params_default ();
  cp.use_gpu = false;
  cp.print_timings = false;
  cp.n_threads = n_threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.warmup = false;
  ctx = mtmd_init_from_file (mmproj_path, model, cp);
  if (!ctx || !mtmd_support_audio (ctx)) {
    fprintf (stderr, "mtmd-audio-encode: '%s' is not an audio mmproj for "
        "'%s'\n", mmproj_path, model_path);
    goto done;
  }
  bw = mtmd_helper_bitmap_init_from_file (ctx, audio_path, false,
      mtmd_helper_init_opt_default ());
  if (!bw.bitmap || !mtmd_bitmap_is_audio (bw.bitmap)) {
    fprintf (stderr, "mtmd-audio-encode: cannot decode '%s' as audio\n",
        audio_path);
    goto done;
  }
  /* the marker alone: the audio chunks and, around them, the projector's
   * begin and end strings as text chunks */
  text.text = mtmd_default_marker ();
  text.text_len = strlen (text.text);
  text.add_special = false;
  text.parse_special = true;
  bitmaps[0] = bw.bitmap;
  chunks = mtmd_input_chunks_init ();
  if (mtmd_tokenize (ctx, chunks, &text, bitmaps, 1) != 0) {
    fprintf (stderr, "mtmd-audio-encode: mtmd_tokenize failed\n");
    goto done;
  }
  n_embd = llama_model_n_embd (model);
  n_chunks = mtmd_input_chunks_size (chunks);
  if (out_path && !(out = fopen (out_path, "wb"))) {
    fprintf (stderr, "mtmd-audio-encode: cannot write '%s'\n", out_path);
    goto done;
  }
  for (c = 0; c < n_chunks; c++) {
    const mtmd_input_chunk *chunk = mtmd_input_chunks_get (chunks, c);
    size_t n_tok = mtmd_input_chunk_get_n_tokens (chunk);
    int r, runs = n_audio == 0 ? repeat : 1;

    if (mtmd_input_chunk_get_type (chunk) != MTMD_INPUT_CHUNK_TYPE_AUDIO)
      continue;
    for (r = 0; r < runs; r++) {
      double t0 = now_ms (), ms;

      if (mtmd_encode_chunk (ctx, chunk) != 0) {
        fprintf (stderr, "mtmd-audio-encode: mtmd_encode_chunk failed\n");
        goto done;
      }
      ms = now_ms () - t0;
      if (n_audio == 0 && (best < 0 || ms < best))
        best = ms;
    }
    if (n_audio == 0)
      first_tokens = n_tok;
    if (out && fwrite (mtmd_get_output_embd (ctx), sizeof (float),
            n_tok * n_embd, out) != n_tok * n_embd) {
      fprintf (stderr, "mtmd-audio-encode: cannot write '%s'\n", out_path);
      goto done;
    }
    n_audio++;
  }
  if (n_audio == 0) {
    fprintf (stderr, "mtmd-audio-encode: no audio chunk\n");
    goto done;
  }
  if (out) {
    int err = fclose (out);

    out = NULL;
    if (err != 0) {
      fprintf (stderr, "mtmd-audio-encode: cannot write '%s'\n", out_path);
      goto done;
    }
  }
  printf ("model: %s (llama.cpp mtmd, %s)\n", mmproj_path, audio_path);
  printf ("chunks: %zu\n", n_audio);
  printf ("tokens: %zu\n", first_tokens);
  printf ("embd: %d\n", n_embd);
  printf ("encode: %.1f ms (best of %d, %d thread%s)\n", best, repeat,
      n_threads, n_threads > 1 ? "s" : "");
  ret = 0;

done:
  if (out)
    fclose (out);
  if (chunks)
    mtmd_input_chunks_free (chunks);
  if (bw.bitmap)
    mtmd_bitmap_free (bw.bitmap);
  if (ctx)
    mtmd_free (ctx);
  if (model)
    llama_model_free (model);
  llama_backend_free ();
  return ret;
}
