/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the Whisper log-mel spectrogram, as llama.cpp's audio models
 * expect it
 *
 * What llama.cpp's Whisper preprocessor (tools/mtmd/mtmd-audio.cpp) makes
 * of a clip of 16 kHz samples, frame for frame:
 *
 * - the clip is preceded by 200 samples reflected about its first sample
 *   (s[200], s[199], ..., s[1]) and followed by zeros;
 * - frame i is the 400 samples from i * 160 of that padded signal, times a
 *   periodic Hann window, through a 400-point real FFT (gstreamer-fft's
 *   kiss_fft; 400 = 2^4 5^2), power |X_k|^2 for k = 0..200;
 * - Slaney mel filters (librosa's default: Slaney scale, area normalised,
 *   0 Hz to 8 kHz), floored at 2^-24 (llama.cpp's mel_floor), log10;
 * - the maximum over the clip's frames, silence after it included, less 8
 *   is the floor, then (x + 4) / 4.
 *
 * llama.cpp always appends 30 s of silence before taking the maximum, so
 * the maximum here includes the floor value and the few frames past the
 * window that still see the clip's last samples.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpulogmel.h"

#include <math.h>
#include <string.h>
#include <gst/fft/gstfftf32.h>

#define N_BINS (GST_NPU_LOG_MEL_N_FFT / 2 + 1)
#define REFLECT (GST_NPU_LOG_MEL_N_FFT / 2)
/* llama.cpp's filter_params.mel_floor (2^-24), not Whisper's 1e-10 */
#define MEL_FLOOR 5.960464477539063e-08f

struct _GstNpuLogMel
{
  guint n_mels;
  GstFFTF32 *fft;
  gfloat window[GST_NPU_LOG_MEL_N_FFT];
  gfloat *filters;              /* n_mels rows of N_BINS */
  guint *first, *end;           /* the non-zero bins of each filter */
  gfloat frame[GST_NPU_LOG_MEL_N_FFT];
  GstFFTF32Complex spectrum[N_BINS];
  gfloat power[N_BINS];
};

static gdouble
hz_to_mel (gdouble hz)
{
  /* Slaney: linear below 1 kHz, logarithmic above */
  return hz < 1000.0 ? hz * 3.0 / 200.0 :
      15.0 + log (hz / 1000.0) / (log (6.4) / 27.0);
}

static gdouble
mel_to_hz (gdouble mel)
{
  return mel < 15.0 ? mel * 200.0 / 3.0 :
      1000.0 * exp ((mel - 15.0) * (log (6.4) / 27.0));
}

static void
make_filters (GstNpuLogMel * lm)
{
  const gdouble fmax = GST_NPU_LOG_MEL_SAMPLE_RATE / 2.0;
  const gdouble bin_hz = (gdouble) GST_NPU_LOG_MEL_SAMPLE_RATE /
      GST_NPU_LOG_MEL_N_FFT;
  gdouble *hz = g_new (gdouble, lm->n_mels + 2);
  guint m, k;

  for (m = 0; m < lm->n_mels + 2; m++)
    hz[m] = mel_to_hz (hz_to_mel (fmax) * m / (lm->n_mels + 1));

  for (m = 0; m < lm->n_mels; m++) {
    gdouble left = hz[m], centre = hz[m + 1], right = hz[m + 2];
    gdouble enorm = 2.0 / MAX (1e-30, right - left);

    lm->first[m] = N_BINS;
    lm->end[m] = 0;
    for (k = 0; k < N_BINS; k++) {
      gdouble f = k * bin_hz, w = 0.0;

      if (f >= left && f <= centre)
        w = (f - left) / MAX (1e-30, centre - left);
      else if (f > centre && f <= right)
        w = (right - f) / MAX (1e-30, right - centre);
      lm->filters[m * N_BINS + k] = (gfloat) (w * enorm);
      if (w != 0.0) {
        lm->first[m] = MIN (lm->first[m], k);
        lm->end[m] = k + 1;
      }
    }
    if (lm->end[m] == 0)
      lm->first[m] = 0;
  }
  g_free (hz);
}

/**
 * gst_npu_log_mel_new:
 * @n_mels: mel bins (80 or 128 for Whisper-style encoders)
 *
 * Returns: (transfer full): a log-mel calculator; not thread-safe.
 */
GstNpuLogMel *
gst_npu_log_mel_new (guint n_mels)
{
  GstNpuLogMel *lm;
  guint i;

  g_return_val_if_fail (n_mels > 0 && n_mels <= 512, NULL);

  lm = g_new0 (GstNpuLogMel, 1);
  lm->n_mels = n_mels;
  lm->fft = gst_fft_f32_new (GST_NPU_LOG_MEL_N_FFT, FALSE);
  /* periodic Hann, as torch.hann_window(400) and llama.cpp */
  for (i = 0; i < GST_NPU_LOG_MEL_N_FFT; i++)
    lm->window[i] = (gfloat) (0.5 * (1.0 - cos (2.0 * G_PI * i /
                GST_NPU_LOG_MEL_N_FFT)));
  lm->filters = g_new (gfloat, (gsize) n_mels * N_BINS);
  lm->first = g_new (guint, n_mels);
  lm->end = g_new (guint, n_mels);
  make_filters (lm);
  return lm;
}

void
gst_npu_log_mel_free (GstNpuLogMel * lm)
{
  if (!lm)
    return;
  gst_fft_f32_free (lm->fft);
  g_free (lm->filters);
  g_free (lm->first);
  g_free (lm->end);
  g_free (lm);
}

guint
gst_npu_log_mel_get_n_mels (const GstNpuLogMel * lm)
{
  return lm->n_mels;
}

/* Sample j of the padded clip: reflected head, the clip, then zeros. */
static inline gfloat
padded_sample (const gfloat * s, gsize n, gsize j)
{
  gsize i = j < REFLECT ? REFLECT - j : j - REFLECT;

  return i < n ? s[i] : 0.0f;
}

/* log10 of frame @t's mel energies into @out (stride @stride). */
static void
frame_log_mel (GstNpuLogMel * lm, const gfloat * s, gsize n, gsize t,
    gfloat * out, gsize stride)
{
  gsize start = t * GST_NPU_LOG_MEL_HOP;
  guint j, m, k;

  if (start >= REFLECT && start - REFLECT + GST_NPU_LOG_MEL_N_FFT <= n) {
    const gfloat *p = s + start - REFLECT;

    for (j = 0; j < GST_NPU_LOG_MEL_N_FFT; j++)
      lm->frame[j] = lm->window[j] * p[j];
  } else {
    for (j = 0; j < GST_NPU_LOG_MEL_N_FFT; j++)
      lm->frame[j] = lm->window[j] * padded_sample (s, n, start + j);
  }
  gst_fft_f32_fft (lm->fft, lm->frame, lm->spectrum);
  for (k = 0; k < N_BINS; k++)
    lm->power[k] = lm->spectrum[k].r * lm->spectrum[k].r +
        lm->spectrum[k].i * lm->spectrum[k].i;

  for (m = 0; m < lm->n_mels; m++) {
    const gfloat *f = lm->filters + (gsize) m * N_BINS;
    gdouble sum = 0.0;

    for (k = lm->first[m]; k < lm->end[m]; k++)
      sum += lm->power[k] * f[k];
    out[m * stride] = (gfloat) log10 (MAX (sum, (gdouble) MEL_FLOOR));
  }
}

/**
 * gst_npu_log_mel_compute:
 * @lm: the calculator
 * @samples: the clip, 16 kHz mono
 * @n_samples: its length (shorter than the window: zeros follow)
 * @n_frames: frames wanted (3000 for a 30 s window)
 * @mel: (out caller-allocates): n_mels rows of @n_frames floats
 *
 * The normalised log-mel of the clip as llama.cpp computes it for a clip
 * of @n_samples samples (its first @n_frames frames).
 */
void
gst_npu_log_mel_compute (GstNpuLogMel * lm, const gfloat * samples,
    gsize n_samples, guint n_frames, gfloat * mel)
{
  /* frames whose window still sees a sample of the clip */
  gsize n_seen = (n_samples + REFLECT + GST_NPU_LOG_MEL_HOP - 1) /
      GST_NPU_LOG_MEL_HOP;
  gfloat mmax = log10f (MEL_FLOOR), extra[512];
  gsize t, i, total = (gsize) lm->n_mels * n_frames;

  for (t = 0; t < n_frames; t++)
    frame_log_mel (lm, samples, n_samples, t, mel + t, n_frames);
  for (i = 0; i < total; i++)
    mmax = MAX (mmax, mel[i]);
  /* the frames past the window that llama.cpp's maximum also sees */
  for (t = n_frames; t < n_seen; t++) {
    guint m;

    frame_log_mel (lm, samples, n_samples, t, extra, 1);
    for (m = 0; m < lm->n_mels; m++)
      mmax = MAX (mmax, extra[m]);
  }

  mmax -= 8.0f;
  for (i = 0; i < total; i++)
    mel[i] = (MAX (mel[i], mmax) + 4.0f) / 4.0f;
}

/**
 * gst_npu_log_mel_compute_counted:
 * @bytes: (nullable): adds what the computation moved: the clip's
 *   samples, each read once (%NPU_BYTES_FRAME; the overlapping windows
 *   read them again from cache), and the log-mel it writes
 *   (%NPU_BYTES_ACTIVATIONS)
 *
 * gst_npu_log_mel_compute(), counting its bytes.
 */
void
gst_npu_log_mel_compute_counted (GstNpuLogMel * lm, const gfloat * samples,
    gsize n_samples, guint n_frames, gfloat * mel, NpuBytes * bytes)
{
  gst_npu_log_mel_compute (lm, samples, n_samples, n_frames, mel);
  if (!bytes)
    return;
  npu_bytes_read (bytes, NPU_BYTES_FRAME, (guint64) n_samples *
      sizeof (gfloat));
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) lm->n_mels *
      n_frames * sizeof (gfloat));
}
