/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: one image through llama.cpp's vision encoder
 * (tools/mtmd/clip.cpp), the reference side of npu-vit-encode.c
 *
 *   clip-encode -m MMPROJ.gguf --image IMAGE.f32 [-o OUT.f32] [-t THREADS]
 *       [--repeat N]
 *
 * IMAGE.f32 is the encoder's exact input: a square image of side S as raw
 * little-endian floats, S rows of S pixels of 3 values (R, G, B), already
 * resized to the file's image size and normalised with its mean and std
 * (clip_image_f32's layout).  No preprocessing is done here, so both
 * runtimes see the same numbers.  clip_image_encode() runs on the CPU in
 * F32 with flash attention off (llama.cpp's default is "auto"), so that
 * the attention is computed as ours is; OUT.f32 gets the embeddings,
 * n_tokens rows of n_embd floats.
 *
 * Prints "tokens: N", "embd: D" and "encode: T ms (best of R, H threads)"
 * (the best of --repeat runs; a run includes building the graph, as every
 * clip_image_encode() call does), the same lines as npu-vit-encode.
 *
 * clip.h and clip-impl.h are llama.cpp's internal headers (mtmd's public
 * API takes bitmaps and preprocesses them itself); built against a
 * llama.cpp build by build-llamacpp.sh, not part of the meson build.
 */
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "clip.h"
#include "clip-impl.h"

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
  fprintf (stderr, "usage: %s -m MMPROJ.gguf --image IMAGE.f32 [-o OUT.f32] "
      "[-t THREADS] [--repeat N]\n", argv0);
  return 2;
}

static bool
read_image (const char *path, std::vector<float> &buf, int *side)
{
  FILE *f = fopen (path, "rb");
  long len;
  int s;

  if (!f)
    return false;
  if (fseek (f, 0, SEEK_END) != 0 || (len = ftell (f)) < 0
      || fseek (f, 0, SEEK_SET) != 0 || len % 12 != 0) {
    fclose (f);
    return false;
  }
  for (s = 1; (long) s * s * 12 < len; s++);
  if ((long) s * s * 12 != len) {
    fclose (f);
    return false;
  }
  buf.resize ((size_t) len / 4);
  /* floats as stored: the machine is little-endian (x86-64, aarch64) */
  if (fread (buf.data (), 4, buf.size (), f) != buf.size ()) {
    fclose (f);
    return false;
  }
  fclose (f);
  *side = s;
  return true;
}

int
main (int argc, char **argv)
{
  const char *model_path = NULL, *image_path = NULL, *out_path = NULL;
  int n_threads = 1, repeat = 1, side = 0, i;
  std::vector<float> pixels, embd;
  clip_context_params cp;
  clip_init_result res;
  clip_ctx *ctx;
  clip_image_f32 img;
  double best = -1;
  int n_tokens, n_embd;

  for (i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

    if (!v)
      return usage (argv[0]);
    if (strcmp (a, "-m") == 0)
      model_path = v;
    else if (strcmp (a, "--image") == 0)
      image_path = v;
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
  if (!model_path || !image_path || n_threads < 1 || repeat < 1)
    return usage (argv[0]);

  if (!read_image (image_path, pixels, &side)) {
    fprintf (stderr, "clip-encode: '%s' is not a square S x S x 3 F32 "
        "image\n", image_path);
    return 1;
  }

  mtmd_log_set (log_cb, NULL);
  memset (&cp, 0, sizeof (cp));
  cp.use_gpu = false;
  cp.device = NULL;
  cp.flash_attn_type = CLIP_FLASH_ATTN_TYPE_DISABLED;
  cp.image_min_tokens = -1;
  cp.image_max_tokens = -1;
  cp.warmup = false;
  res = clip_init (model_path, cp);
  ctx = res.ctx_v;
  if (!ctx) {
    fprintf (stderr, "clip-encode: cannot load '%s' (no vision encoder?)\n",
        model_path);
    return 1;
  }

  img.set_size ({side, side}, false, false);
  img.cpy_buf (pixels);
  n_tokens = clip_n_output_tokens (ctx, &img);
  n_embd = clip_n_mmproj_embd (ctx);
  /* clip_encode() fills the caller's buffer, which must have the size */
  embd.resize ((size_t) n_tokens * n_embd);

  for (i = 0; i < repeat; i++) {
    auto t0 = std::chrono::steady_clock::now ();
    double ms;

    if (!clip_image_encode (ctx, n_threads, &img, embd)) {
      fprintf (stderr, "clip-encode: clip_image_encode failed\n");
      return 1;
    }
    ms = std::chrono::duration<double, std::milli>
        (std::chrono::steady_clock::now () - t0).count ();
    if (best < 0 || ms < best)
      best = ms;
  }
  if (embd.size () != (size_t) n_tokens * n_embd) {
    fprintf (stderr, "clip-encode: %zu floats out, expected %d x %d\n",
        embd.size (), n_tokens, n_embd);
    return 1;
  }
  printf ("model: %s (llama.cpp clip, %dx%d image)\n", model_path, side,
      side);
  printf ("tokens: %d\n", n_tokens);
  printf ("embd: %d\n", n_embd);
  printf ("encode: %.1f ms (best of %d, %d thread%s)\n", best, repeat,
      n_threads, n_threads > 1 ? "s" : "");

  if (out_path) {
    FILE *f = fopen (out_path, "wb");
    bool ok = f && fwrite (embd.data (), 4, embd.size (), f) == embd.size ();

    if (f && fclose (f) != 0)
      ok = false;
    if (!ok) {
      fprintf (stderr, "clip-encode: cannot write '%s'\n", out_path);
      return 1;
    }
  }
  clip_free (ctx);
  if (res.ctx_a)
    clip_free (res.ctx_a);
  if (res.ctx_gen_a)
    clip_free (res.ctx_gen_a);
  return 0;
}
