/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: double-precision reference of the Whisper log-mel
 *
 * Written from the definitions (Slaney's mel scale as librosa has it, a
 * direct DFT, the periodic Hann window) and from what llama.cpp's
 * mtmd-audio.cpp does around them (200 samples reflected before the clip,
 * zeros after, the 2^-24 floor, the maximum over every frame that sees
 * the clip and the silence after it, max - 8, (x + 4) / 4).  Shares no
 * code with gst/npu/gstnpulogmel.c.
 */
#include "npureflogmel.h"

#include <math.h>

static double
ref_hz_to_mel (double hz)
{
  /* Slaney (librosa's default): 3 mels per 200 Hz up to 1 kHz, then
   * 27 mels per factor of 6.4 */
  if (hz < 1000.0)
    return hz / (200.0 / 3.0);
  return 15.0 + 27.0 * log (hz / 1000.0) / log (6.4);
}

static double
ref_mel_to_hz (double mel)
{
  if (mel < 15.0)
    return mel * (200.0 / 3.0);
  return 1000.0 * pow (6.4, (mel - 15.0) / 27.0);
}

/* sample j of the padded clip: s[200 - j] for j < 200, then the clip */
static double
ref_padded (const float *s, size_t n, long j)
{
  long i = j < 200 ? 200 - j : j - 200;

  return i < (long) n ? s[i] : 0.0;
}

/* log10 mel energies of frame t, n_mels values */
static void
ref_frame (const float *s, size_t n, long t, guint n_mels, double *out)
{
  double x[400], power[201], hz[130], cs[400], sn[400];
  guint k, m;
  long j;

  g_assert (n_mels <= 128);
  /* exp(-2 pi i kj / 400) depends on kj mod 400 only */
  for (j = 0; j < 400; j++) {
    cs[j] = cos (2.0 * M_PI * j / 400.0);
    sn[j] = sin (2.0 * M_PI * j / 400.0);
  }

  for (j = 0; j < 400; j++)
    x[j] = ref_padded (s, n, t * 160 + j) * 0.5 * (1.0 - cos (2.0 * M_PI * j
            / 400.0));
  for (k = 0; k <= 200; k++) {
    double re = 0.0, im = 0.0;

    for (j = 0; j < 400; j++) {
      re += x[j] * cs[(k * j) % 400];
      im -= x[j] * sn[(k * j) % 400];
    }
    power[k] = re * re + im * im;
  }
  for (m = 0; m < n_mels + 2; m++)
    hz[m] = ref_mel_to_hz (ref_hz_to_mel (8000.0) * m / (n_mels + 1));
  for (m = 0; m < n_mels; m++) {
    double sum = 0.0;

    for (k = 0; k <= 200; k++) {
      double f = k * 40.0, w = 0.0;

      if (f >= hz[m] && f <= hz[m + 1])
        w = (f - hz[m]) / (hz[m + 1] - hz[m]);
      else if (f > hz[m + 1] && f <= hz[m + 2])
        w = (hz[m + 2] - f) / (hz[m + 2] - hz[m + 1]);
      sum += power[k] * w * 2.0 / (hz[m + 2] - hz[m]);
    }
    out[m] = log10 (MAX (sum, 5.960464477539063e-08));
  }
}

double *
npu_ref_log_mel (const float *s, size_t n, guint n_frames, guint n_mels)
{
  double *mel = g_new (double, (gsize) n_mels * n_frames), col[128];
  double mmax = log10 (5.960464477539063e-08);
  guint t, m;

  /* every frame that sees a sample, then the silence after the clip */
  for (t = 0; t * 160 < n + 200 || t < n_frames; t++) {
    ref_frame (s, n, t, n_mels, col);
    for (m = 0; m < n_mels; m++) {
      mmax = MAX (mmax, col[m]);
      if (t < n_frames)
        mel[m * n_frames + t] = col[m];
    }
  }
  for (t = 0; t < (guint) n_mels * n_frames; t++)
    mel[t] = (MAX (mel[t], mmax - 8.0) + 4.0) / 4.0;
  return mel;
}

