/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: one clip through npuaudiotok's log-mel and the
 * core's audio encoder, timed as mtmd-audio-encode (the llama.cpp side,
 * audio.sh) times llama.cpp's
 *
 *   npu-audio-encode MMPROJ.gguf --audio CLIP.f32 [-o OUT.f32]
 *       [--threads T] [--repeat N] [--precision accurate|fast]
 *       [--reference REF.f32 [--tol REL]] [--f64]
 *
 * CLIP.f32 is 16 kHz mono little-endian floats, up to 30 s: the samples
 * llama.cpp's WAV decoder gives for the WAV of audio.sh.  Its log-mel
 * window (3000 frames, gst_npu_log_mel_compute(), what npuaudiotok feeds
 * the encoder for a clip of that length) is encoded in a task on a CPU
 * device of T threads and the n_tokens x out_dim embeddings are written to
 * OUT.f32.  --precision sets the activations of the matrix products as
 * npuaudiotok's property does: accurate (the default, ~16 bits) or fast
 * (int8, as llama.cpp's Q8_0).
 *
 * Prints "tokens: N", "embd: D" and "encode: T ms (best of R, H threads)",
 * the same lines as mtmd-audio-encode; the time is npu_audio_enc_encode()'s
 * alone (the log-mel is not in it, as it is not on llama.cpp's side).
 *
 * --reference compares the embeddings with llama.cpp's
 * (mtmd-audio-encode's -o), --f64 both with the test suite's
 * double-precision reference of the encoder (tests/reference/npurefaudio.h,
 * the stored weights decoded exactly) on the same log-mel, as
 * npuencodetool.h says.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>

#include <core/models/npuaudioenc.h>
#include <core/cpu/npumatmul.h>
#include <npu/npu.h>
#include "tests/reference/npurefaudio.h"
#include "npuencodetool.h"

typedef struct
{
  NpuAudioEnc *enc;
  const float *mel;
  guint n_frames;
  float *out;
  gint64 us;                    /* npu_audio_enc_encode()'s time */
} Job;

/* What the float64 evaluation checks against the encoder */
typedef struct
{
  guint n_frames, n_tokens;
} F64Shape;

static gchar *opt_precision = NULL;

static const GOptionEntry entries[] = {
  {"precision", 0, 0, G_OPTION_ARG_STRING, &opt_precision,
      "Activations: accurate (default) or fast (int8)", "P"},
  {NULL}
};

static gboolean
job_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Job *job = user_data;
  gint64 t0 = g_get_monotonic_time ();
  gboolean ok;

  ok = npu_audio_enc_encode (job->enc, task, job->mel, job->n_frames,
      job->out, error);
  job->us = g_get_monotonic_time () - t0;
  return ok;
}

/* The test suite's double-precision encoder on the same log-mel */
static gboolean
encode_f64 (const NpuRefLookup * lk, const double *mel, double *out,
    gpointer data, GError ** error)
{
  const F64Shape *shape = data;
  guint n_tokens = npu_ref_audio_encode (lk, mel, shape->n_frames, FALSE,
      out);

  if (n_tokens != shape->n_tokens) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "the float64 "
        "reference made %u tokens, the encoder %u", n_tokens, shape->n_tokens);
    return FALSE;
  }
  return TRUE;
}

int
main (int argc, char **argv)
{
  NpuEncodeToolOptions opts;
  GError *error = NULL;
  NpuAudioEnc *enc = NULL;
  GstNpuLogMel *lm = NULL;
  gchar *pcm = NULL;
  float *mel = NULL, *out = NULL;
  gsize len, n_out;
  guint n_frames, n_tokens, out_dim;
  gint64 best = -1;
  Job job = { 0, };
  F64Shape f64_shape;
  gboolean pass = TRUE;
  int ret = 1;

  if (!npu_encode_tool_parse (&opts, &argc, &argv, "MMPROJ.gguf - encode "
          "one clip with npuaudiotok's log-mel and the core's audio encoder",
          "audio", "16 kHz mono F32 samples, up to 30 s", entries))
    return 2;
  if (opt_precision && g_strcmp0 (opt_precision, "fast") != 0
      && g_strcmp0 (opt_precision, "accurate") != 0) {
    g_printerr ("--precision is accurate or fast\n");
    npu_encode_tool_options_clear (&opts);
    g_free (opt_precision);
    return 2;
  }

  enc = npu_audio_enc_new_from_file (opts.model, &error);
  if (!enc)
    goto out;
  npu_audio_enc_set_precision (enc, g_strcmp0 (opt_precision, "fast") == 0 ?
      NPU_MATMUL_PRECISION_FAST : NPU_MATMUL_PRECISION_ACCURATE);
  n_frames = npu_audio_enc_get_max_frames (enc);
  if (!g_file_get_contents (opts.input, &pcm, &len, &error))
    goto out;
  if (len % sizeof (float) != 0
      || len / sizeof (float) > (gsize) n_frames * GST_NPU_LOG_MEL_HOP) {
    g_set_error (&error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "'%s' is not up to %u 16 kHz float samples", opts.input,
        n_frames * GST_NPU_LOG_MEL_HOP);
    goto out;
  }
  lm = gst_npu_log_mel_new (npu_audio_enc_get_n_mels (enc));
  mel = g_new (float, (gsize) npu_audio_enc_get_n_mels (enc) * n_frames);
  /* floats as stored: the machine is little-endian (x86-64, aarch64) */
  gst_npu_log_mel_compute (lm, (const float *) pcm, len / sizeof (float),
      n_frames, mel);
  n_tokens = npu_audio_enc_get_n_tokens (enc, n_frames);
  out_dim = npu_audio_enc_get_out_dim (enc);
  n_out = (gsize) n_tokens *out_dim;
  out = g_new (float, n_out);

  job.enc = enc;
  job.mel = mel;
  job.n_frames = n_frames;
  job.out = out;
  if (!npu_encode_tool_run (&opts, "npu-audio-encode", job_task, &job,
          &job.us, &best, &error))
    goto out;
  printf ("model: %s (%u blocks, dim %u, %s), %s, kernels %s\n", opts.model,
      npu_audio_enc_get_n_layers (enc), npu_audio_enc_get_dim (enc),
      npu_audio_enc_get_projector (enc) == NPU_AUDIO_PROJECTOR_QWEN2A ?
      "qwen2a" : "ultravox", npu_audio_enc_get_precision (enc) ==
      NPU_MATMUL_PRECISION_FAST ? "fast" : "accurate", npu_matmul_get_isa ());
  if (!npu_encode_tool_report (&opts, out, n_tokens, out_dim, best, &error))
    goto out;

  f64_shape.n_frames = n_frames;
  f64_shape.n_tokens = n_tokens;
  if (!npu_encode_tool_compare (&opts, out, n_tokens, out_dim, mel,
          (gsize) npu_audio_enc_get_n_mels (enc) * n_frames, encode_f64,
          &f64_shape, &pass, &error))
    goto out;
  ret = pass ? 0 : 1;

out:
  if (error) {
    g_printerr ("npu-audio-encode: %s\n", error->message);
    g_error_free (error);
    ret = 1;
  }
  if (enc)
    npu_audio_enc_free (enc);
  if (lm)
    gst_npu_log_mel_free (lm);
  g_free (pcm);
  g_free (mel);
  g_free (out);
  g_free (opt_precision);
  npu_encode_tool_options_clear (&opts);
  return ret;
}
