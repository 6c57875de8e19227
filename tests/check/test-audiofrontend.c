/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the audio front end: log-mel and resampler
 *
 * The log-mel is compared with a double-precision evaluation written
 * from the definitions (tests/reference/npureflogmel.c: (direct DFT, Slaney filters, periodic Hann, the
 * reflect padding and normalisation of llama.cpp's mtmd-audio.cpp), which
 * shares no code with gstnpulogmel.c.  The resampler is held to what
 * docs/npuaudiotok.md states: a sine keeps its frequency, phase and level,
 * and a tone above the output's Nyquist frequency leaves less than
 * -120 dB behind (the filter's stated stop-band attenuation).
 */
#include <math.h>
#include <string.h>

#include "npucheck.h"
#include <npu/npu.h>
#include "../reference/npureflogmel.h"

static float *
test_clip (size_t n, guint seed)
{
  float *s = g_new (float, n);
  GRand *rand = g_rand_new_with_seed (seed);
  size_t i;

  /* a chirp, two tones and a little noise: energy in many mel bins */
  for (i = 0; i < n; i++) {
    double t = i / 16000.0;

    s[i] = 0.3 * sin (2 * M_PI * (200.0 + 900.0 * t) * t) +
        0.2 * sin (2 * M_PI * 3150.0 * t) + 0.05 * sin (2 * M_PI * 7200.0 * t)
        + 0.01 * g_rand_double_range (rand, -1.0, 1.0);
  }
  g_rand_free (rand);
  return s;
}

static void
check_log_mel (guint n_mels, size_t n_samples, guint n_frames,
    gboolean loud_end)
{
  float *s = test_clip (n_samples, n_mels + n_samples);
  GstNpuLogMel *lm = gst_npu_log_mel_new (n_mels);
  float *mel = g_new (float, (gsize) n_mels * n_frames);
  double *ref = npu_ref_log_mel (s, n_samples, n_frames, n_mels), err = 0.0;
  gsize i;

  /* the loudest frame after the window: the maximum must see it */
  for (i = n_samples - MIN (n_samples, 100); loud_end && i < n_samples; i++)
    s[i] *= 30.0f;
  if (loud_end) {
    g_free (ref);
    ref = npu_ref_log_mel (s, n_samples, n_frames, n_mels);
  }
  gst_npu_log_mel_compute (lm, s, n_samples, n_frames, mel);
  for (i = 0; i < (gsize) n_mels * n_frames; i++) {
    double d = fabs (mel[i] - ref[i]);

    /* a NaN, once in err, stays there and fails the check below */
    if (isnan (d) || d > err)
      err = d;
  }
  GST_INFO ("%u mels, %zu samples, %u frames: max error %g", n_mels,
      n_samples, n_frames, err);
  /* float FFT and filters against double: measured up to 2.6e-5 */
  fail_unless (err <= 1e-4, "%u mels, %zu samples, %u frames: error %g",
      n_mels, n_samples, n_frames, err);

  gst_npu_log_mel_free (lm);
  g_free (s);
  g_free (mel);
  g_free (ref);
}

GST_START_TEST (test_log_mel_reference)
{
  /* a short clip in a longer window (EOS's partial chunk) */
  check_log_mel (80, 16000 + 37, 200, FALSE);
  /* a window exactly full: the frames after it count in the maximum */
  check_log_mel (128, 24000, 150, FALSE);
  check_log_mel (80, 24000, 150, TRUE);
  /* shorter than the reflection (llama.cpp pads to 201 samples first) */
  check_log_mel (80, 150, 10, FALSE);
}

GST_END_TEST;

/* Constants of the Whisper front end any implementation must agree on. */
GST_START_TEST (test_log_mel_silence)
{
  GstNpuLogMel *lm = gst_npu_log_mel_new (80);
  float *s = g_new0 (float, 16000), *mel = g_new (float, 80 * 100);
  guint i;

  /* all floor: log10(2^-24) = -7.2247, (x + 4) / 4 = -0.80618 */
  gst_npu_log_mel_compute (lm, s, 16000, 100, mel);
  for (i = 0; i < 80 * 100; i++)
    fail_unless (fabsf (mel[i] - -0.806180f) <= 1e-5, "%u: %f", i, mel[i]);
  gst_npu_log_mel_free (lm);
  g_free (s);
  g_free (mel);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * The resampler and down-mix
 */
static GstNpuAudioFrontend *
make_frontend (const gchar * caps_str)
{
  GstCaps *caps = gst_caps_from_string (caps_str);
  GstAudioInfo info;
  GError *error = NULL;
  GstNpuAudioFrontend *fe;

  fail_unless (gst_npu_audio_frontend_parse_caps (caps, &info, &error),
      "%s", error ? error->message : "");
  fe = gst_npu_audio_frontend_new (&info, 16000, &error);
  fail_unless (fe != NULL, "%s", error ? error->message : "");
  gst_caps_unref (caps);
  return fe;
}

/* Converts @n_in frames fed in blocks of @block, then drains; returns
 * the output (exactly @n_in * 16000 / rate samples, aligned). */
static float *
convert_all (GstNpuAudioFrontend * fe, const guint8 * in, gsize n_in,
    gsize bpf, gsize block, gsize * n_out)
{
  gsize cap = n_in + 4096, n = 0, off, lat;
  float *out = g_new (float, cap);

  for (off = 0; off < n_in; off += block) {
    gsize k = MIN (block, n_in - off);

    fail_unless (n + gst_npu_audio_frontend_get_out_frames (fe, k) <= cap);
    n += gst_npu_audio_frontend_convert (fe, in + off * bpf, k, out + n);
  }
  lat = gst_npu_audio_frontend_get_latency (fe);
  fail_unless (n + gst_npu_audio_frontend_get_out_frames (fe, lat) <= cap);
  n += gst_npu_audio_frontend_convert (fe, NULL, lat, out + n);
  *n_out = n;
  return out;
}

/* Least-squares amplitude and phase of a @freq sine in @x[from..to),
 * and the rms of what is left. */
static void
fit_sine (const float *x, gsize from, gsize to, double freq, double *amp,
    double *phase, double *resid)
{
  double sc = 0, ss = 0, cc = 0, xs = 0, xc = 0, det, a, b, r = 0;
  gsize i;

  for (i = from; i < to; i++) {
    double w = 2 * M_PI * freq * i / 16000.0;

    ss += sin (w) * sin (w);
    cc += cos (w) * cos (w);
    sc += sin (w) * cos (w);
    xs += x[i] * sin (w);
    xc += x[i] * cos (w);
  }
  det = ss * cc - sc * sc;
  a = (xs * cc - xc * sc) / det;
  b = (xc * ss - xs * sc) / det;
  for (i = from; i < to; i++) {
    double w = 2 * M_PI * freq * i / 16000.0, e = x[i] - a * sin (w) -
        b * cos (w);

    r += e * e;
  }
  *amp = sqrt (a * a + b * b);
  *phase = atan2 (b, a);
  *resid = sqrt (r / (to - from));
}

static double
db (double x)
{
  return 20.0 * log10 (x);
}

GST_START_TEST (test_resampler_sine)
{
  /* 1 kHz at -6 dBFS, phase 0, 44.1 kHz stereo S16LE (both channels) */
  const gsize n_in = 44100;
  gint16 *pcm = g_new (gint16, n_in * 2);
  GstNpuAudioFrontend *fe = make_frontend ("audio/x-raw,format=S16LE,"
      "layout=interleaved,rate=44100,channels=2,channel-mask=(bitmask)0x3");
  double amp, phase, resid;
  gsize i, n_out;
  float *out;

  for (i = 0; i < n_in; i++)
    pcm[2 * i] = pcm[2 * i + 1] = (gint16) lrint (16384.0 * sin (2 * M_PI *
            1000.0 * i / 44100.0));
  out = convert_all (fe, (guint8 *) pcm, n_in, 4, 441, &n_out);
  /* a second of input is a second of output */
  fail_unless (n_out >= 16000 - 1 && n_out <= 16000 + 1, "%zu", n_out);
  /* away from the edges, where the filter sees the silence around */
  fit_sine (out, 1000, n_out - 1000, 1000.0, &amp, &phase, &resid);
  GST_INFO ("1 kHz: level %.4f dB, phase %.2e rad, residual %.1f dB",
      db (amp / 0.5), phase, db (resid / (0.5 * M_SQRT1_2)));
  fail_unless (fabs (db (amp / 0.5)) <= 0.01, "level off by %f dB",
      db (amp / 0.5));
  /* same time base: output sample k is at k / 16000 s, give or take
   * GstAudioResampler's fixed delay of 1/16 of an input sample (measured
   * 0.023 output samples, 1.4 us) */
  fail_unless (fabs (phase) / (2 * M_PI * 1000.0) * 16000.0 <= 0.05,
      "delay of %g samples", -phase / (2 * M_PI * 1000.0) * 16000.0);
  /* what is not the sine is S16's quantisation noise (-98 dB) */
  fail_unless (db (resid / (0.5 * M_SQRT1_2)) <= -85.0, "residual %f dB",
      db (resid / (0.5 * M_SQRT1_2)));

  gst_npu_audio_frontend_free (fe);
  g_free (out);
  g_free (pcm);
}

GST_END_TEST;

GST_START_TEST (test_resampler_aliasing)
{
  /* 12 kHz at 0 dBFS, 44.1 kHz F32LE: above 8 kHz, it must not fold
   * down to 4 kHz */
  const gsize n_in = 44100;
  float *pcm = g_new (float, n_in);
  GstNpuAudioFrontend *fe = make_frontend ("audio/x-raw,format=F32LE,"
      "layout=interleaved,rate=44100,channels=1");
  double rms = 0;
  gsize i, n_out;
  float *out;

  for (i = 0; i < n_in; i++)
    pcm[i] = sin (2 * M_PI * 12000.0 * i / 44100.0);
  out = convert_all (fe, (guint8 *) pcm, n_in, 4, 4410, &n_out);
  for (i = 1000; i < n_out - 1000; i++)
    rms += (double) out[i] * out[i];
  rms = sqrt (rms / (n_out - 2000));
  GST_INFO ("12 kHz at 44.1 kHz: %.1f dB left", db (rms / M_SQRT1_2));
  fail_unless (db (rms / M_SQRT1_2) <= -120.0, "%f dB", db (rms / M_SQRT1_2));

  gst_npu_audio_frontend_free (fe);
  g_free (out);
  g_free (pcm);
}

GST_END_TEST;

GST_START_TEST (test_downmix_mean)
{
  /* 6 channels without a channel-mask, S32LE at 48 kHz: mono is the mean
   * (0.6 + 0.2 + 0 + 0 - 0.2 + 0.4) / 6 = 1/6 of the sine */
  static const double gain[6] = { 0.6, 0.2, 0.0, 0.0, -0.2, 0.4 };
  const gsize n_in = 48000;
  gint32 *pcm = g_new (gint32, n_in * 6);
  GstNpuAudioFrontend *fe = make_frontend ("audio/x-raw,format=S32LE,"
      "layout=interleaved,rate=48000,channels=6");
  double amp, phase, resid;
  gsize i, n_out;
  guint c;
  float *out;

  for (i = 0; i < n_in; i++)
    for (c = 0; c < 6; c++)
      pcm[i * 6 + c] = (gint32) lrint (gain[c] * 2147483647.0 * sin (2 * M_PI
              * 440.0 * i / 48000.0));
  out = convert_all (fe, (guint8 *) pcm, n_in, 24, 480, &n_out);
  fit_sine (out, 1000, n_out - 1000, 440.0, &amp, &phase, &resid);
  fail_unless (fabs (amp - 1.0 / 6.0) <= 1e-4, "amplitude %f", amp);
  fail_unless (resid <= 1e-4, "residual %g", resid);

  gst_npu_audio_frontend_free (fe);
  g_free (out);
  g_free (pcm);
}

GST_END_TEST;

GST_START_TEST (test_16k_mono_is_exact)
{
  /* the model's own rate and one channel: the samples, unchanged */
  float *pcm = test_clip (16000, 7), *out;
  GstNpuAudioFrontend *fe = make_frontend ("audio/x-raw,format=F32LE,"
      "layout=interleaved,rate=16000,channels=1");
  gsize n_out;

  fail_unless_equals_int (gst_npu_audio_frontend_get_latency (fe), 0);
  out = convert_all (fe, (guint8 *) pcm, 16000, 4, 160, &n_out);
  fail_unless_equals_int (n_out, 16000);
  fail_unless (memcmp (out, pcm, 16000 * sizeof (float)) == 0);
  gst_npu_audio_frontend_free (fe);
  g_free (out);
  g_free (pcm);
}

GST_END_TEST;

GST_START_TEST (test_bad_caps)
{
  static const gchar *bad[] = {
    "audio/x-raw,format=S24LE,layout=interleaved,rate=16000,channels=1",
    "audio/x-raw,format=S16LE,layout=non-interleaved,rate=16000,channels=1",
    "audio/x-raw,format=S16LE,layout=interleaved,rate=96000,channels=1",
    "audio/x-raw,format=S16LE,layout=interleaved,rate=16000,channels=9",
    "video/x-raw,format=RGB,width=2,height=2",
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    GstCaps *caps = gst_caps_from_string (bad[i]);
    GstAudioInfo info;
    GError *error = NULL;

    fail_if (gst_npu_audio_frontend_parse_caps (caps, &info, &error), "%s",
        bad[i]);
    fail_unless (error != NULL);
    fail_unless (strstr (error->message, "npuaudiotok takes interleaved "
            "S16LE, S32LE or F32LE audio, 1 to 8 channels, 8000 to 48000 "
            "Hz") != NULL, "%s", error->message);
    g_error_free (error);
    gst_caps_unref (caps);
  }
}

GST_END_TEST;

static Suite *
audiofrontend_suite (void)
{
  Suite *s = suite_create ("audiofrontend");
  TCase *tc = tcase_create ("general");

  tcase_set_timeout (tc, 120);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_log_mel_reference);
  tcase_add_test (tc, test_log_mel_silence);
  tcase_add_test (tc, test_resampler_sine);
  tcase_add_test (tc, test_resampler_aliasing);
  tcase_add_test (tc, test_downmix_mean);
  tcase_add_test (tc, test_16k_mono_is_exact);
  tcase_add_test (tc, test_bad_caps);
  return s;
}

GST_CHECK_MAIN (audiofrontend);
