/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: audio encoder time per chunk (docs/audio-encoder.md)
 *
 * Writes a generated audio mmproj (tiny or base = Whisper-base preset,
 * qwen2a or ultravox) to a temporary file, or takes one, and reports the
 * best and median encode time of one chunk of mel frames (3000 = 30 s,
 * what llama.cpp encodes) over several runs inside a task on an N-thread
 * CPU device, with the matmul path in use, and the real-time factor
 * (audio seconds per second of compute).  A program that prints figures,
 * not a test.
 *
 * Usage: bench-audioenc [--size tiny|base] [--projector qwen2a|ultravox]
 *                  [--type f32|f16|q8_0|mxfp4] [--mels 80|128]
 *                  [--text-dim D] [--frames N] [--threads N] [--runs R]
 *                  [--model mmproj.gguf]
 */
#include <core/models/npuaudioenc.h>
#include <core/cpu/npumatmul.h>
#include "tests/bench/npubenchstats.h"
#include "tests/bench/npubenchtask.h"
#include "tests/tools/npumodelgen.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct
{
  NpuAudioEnc *enc;
  const float *mel;
  guint n_frames;
  float *out;
  guint runs;
  gdouble *times;
} Bench;

static gboolean
bench_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Bench *b = user_data;
  guint r;

  /* one warm-up run: first touches of the scratch buffers */
  if (!npu_audio_enc_encode (b->enc, task, b->mel, b->n_frames, b->out, error))
    return FALSE;
  for (r = 0; r < b->runs; r++) {
    gint64 t0 = g_get_monotonic_time ();

    if (!npu_audio_enc_encode (b->enc, task, b->mel, b->n_frames, b->out,
            error))
      return FALSE;
    b->times[r] = (g_get_monotonic_time () - t0) / 1e3;
  }
  return TRUE;
}

int
main (int argc, char **argv)
{
  gchar *size = NULL, *proj = NULL, *type = NULL, *model = NULL;
  gint threads = 0, runs = 5, text_dim = 2048, mels = 128, frames = 3000;
  GOptionEntry entries[] = {
    {"size", 0, 0, G_OPTION_ARG_STRING, &size, "tiny, base", NULL},
    {"projector", 0, 0, G_OPTION_ARG_STRING, &proj, "qwen2a, ultravox",
        NULL},
    {"type", 0, 0, G_OPTION_ARG_STRING, &type, "weight type (mxfp4)", NULL},
    {"mels", 0, 0, G_OPTION_ARG_INT, &mels, "mel bins (128)", NULL},
    {"text-dim", 0, 0, G_OPTION_ARG_INT, &text_dim, "projector output",
        NULL},
    {"frames", 0, 0, G_OPTION_ARG_INT, &frames, "mel frames (3000 = 30 s)",
        NULL},
    {"threads", 0, 0, G_OPTION_ARG_INT, &threads, "0: one per CPU", NULL},
    {"runs", 0, 0, G_OPTION_ARG_INT, &runs, "timed runs", NULL},
    {"model", 0, 0, G_OPTION_ARG_FILENAME, &model, "existing mmproj", NULL},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("- audio encoder timing");
  GError *error = NULL;
  gchar *tmp = NULL;
  NpuDevice *dev;
  NpuQueue *queue;
  Bench b = { 0, };
  float *mel;
  gsize n_in, i, owned, borrowed, scratch;
  gint64 t0;
  gdouble load_ms, audio_s;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error)) {
    fprintf (stderr, "%s\n", error->message);
    return 2;
  }
  g_option_context_free (ctx);
  runs = CLAMP (runs, 1, 1000);

  if (!model) {
    NpuAudioMmprojParams ap;
    gint wt = npu_model_gen_parse_type (type ? type : "mxfp4");

    if (wt < 0 || !npu_model_gen_audio_preset (&ap,
            g_strcmp0 (proj, "ultravox") == 0 ?
            NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX :
            NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, size ? size : "base", &error)) {
      fprintf (stderr, "%s\n", error ? error->message : "unknown --type");
      return 2;
    }
    ap.wtype = wt;
    ap.text_dim = text_dim;
    ap.n_mels = mels;
    tmp = g_build_filename (g_get_tmp_dir (), "bench-audioenc-mmproj.gguf",
        NULL);
    if (!npu_model_gen_write_audio_mmproj (&ap, NULL, tmp, NULL, &error)) {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
    model = g_strdup (tmp);
  }

  t0 = g_get_monotonic_time ();
  b.enc = npu_audio_enc_new_from_file (model, &error);
  load_ms = (g_get_monotonic_time () - t0) / 1e3;
  if (!b.enc) {
    fprintf (stderr, "%s\n", error->message);
    return 1;
  }
  if (npu_audio_enc_get_n_tokens (b.enc, frames) == 0) {
    fprintf (stderr, "--frames must be even, 2 to %u\n",
        npu_audio_enc_get_max_frames (b.enc));
    return 2;
  }
  b.n_frames = frames;
  n_in = (gsize) npu_audio_enc_get_n_mels (b.enc) * frames;
  mel = g_new (float, n_in);
  /* a normalised log-mel's range, about [-0.8, 1.2] */
  for (i = 0; i < n_in; i++)
    mel[i] = (float) ((i * 2654435761u) % 2001) / 1000.0f - 0.8f;
  b.mel = mel;
  b.out = g_new (float, (gsize) npu_audio_enc_get_n_tokens (b.enc, frames) *
      npu_audio_enc_get_out_dim (b.enc));
  b.runs = runs;
  b.times = g_new (gdouble, runs);

  dev = npu_device_new_cpu (threads);
  queue = npu_queue_new (dev, "bench-audioenc");
  npu_bench_run_task (queue, bench_task, &b);
  qsort (b.times, runs, sizeof (gdouble), npu_bench_cmp_double);
  npu_audio_enc_get_memory (b.enc, &owned, &borrowed, &scratch);
  /* 10 ms a mel frame */
  audio_s = frames / 100.0;

  printf ("model %s: %s, %u layers x %u, %u mels, %u frames -> %u tokens "
      "x %u\n", model, npu_audio_enc_get_projector (b.enc) ==
      NPU_AUDIO_PROJECTOR_QWEN2A ? "qwen2a" : "ultravox",
      npu_audio_enc_get_n_layers (b.enc), npu_audio_enc_get_dim (b.enc),
      npu_audio_enc_get_n_mels (b.enc), frames,
      npu_audio_enc_get_n_tokens (b.enc, frames),
      npu_audio_enc_get_out_dim (b.enc));
  printf ("load %.1f ms; weights %.2f MiB converted + %.2f MiB in place, "
      "scratch %.2f MiB\n", load_ms, owned / 1048576.0, borrowed / 1048576.0,
      scratch / 1048576.0);
  printf ("encode %.1f s of audio, %u threads, matmul %s: best %.1f ms, "
      "median %.1f ms (%d runs), %.1fx real time\n", audio_s,
      npu_device_get_n_threads (dev), npu_matmul_get_isa (), b.times[0],
      npu_bench_median (b.times, runs), runs, audio_s * 1000.0 / b.times[0]);

  npu_queue_free (queue);
  npu_device_unref (dev);
  npu_audio_enc_free (b.enc);
  g_free (mel);
  g_free (b.out);
  g_free (b.times);
  if (tmp)
    g_unlink (tmp);
  g_free (tmp);
  g_free (model);
  g_free (size);
  g_free (proj);
  g_free (type);
  return 0;
}
