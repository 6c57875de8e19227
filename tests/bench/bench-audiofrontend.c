/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: speed of npuaudiotok's front end
 *
 * 30 s of audio (a chunk) through the down-mix + resampler to 16 kHz mono,
 * fed in 10 ms buffers, then the Whisper log-mel of the 3000-frame window,
 * on one thread.  Prints each stage's time as a multiple of real time (best
 * of several passes), for the input formats a microphone or a file gives.
 *
 * Usage: bench-audiofrontend [passes (5)]
 */
#include <npu/npu.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define SECONDS 30

static double
bench_convert (const gchar * caps_str, gint rate, gint channels,
    GstAudioFormat fmt, guint passes, gfloat * out)
{
  GstCaps *caps = gst_caps_from_string (caps_str);
  GstAudioInfo info;
  const GstAudioFormatInfo *finfo = gst_audio_format_get_info (fmt);
  gsize n = (gsize) rate * SECONDS, bpf = finfo->width / 8 * channels, i;
  guint8 *pcm = g_malloc (n * bpf);
  gfloat *f32 = g_new (gfloat, n * channels);
  double best = G_MAXDOUBLE;
  guint p;

  for (i = 0; i < n * channels; i++)
    f32[i] = 0.5 * sin (2 * M_PI * 440.0 * (i / channels) / rate);
  /* the same sine in the format under test */
  {
    gpointer dst[1] = { pcm }, src[1] = {
    f32};
    GstAudioInfo fi, ti;
    GstAudioConverter *c;

    gst_audio_info_set_format (&fi, GST_AUDIO_FORMAT_F32, rate, channels,
        NULL);
    gst_audio_info_set_format (&ti, fmt, rate, channels, NULL);
    c = gst_audio_converter_new (0, &fi, &ti, NULL);
    gst_audio_converter_samples (c, 0, src, n, dst, n);
    gst_audio_converter_free (c);
  }
  g_assert (gst_npu_audio_frontend_parse_caps (caps, &info, NULL));
  for (p = 0; p < passes; p++) {
    GstNpuAudioFrontend *fe = gst_npu_audio_frontend_new (&info, 16000, NULL);
    gsize off, block = rate / 100, got = 0;
    gint64 t0 = g_get_monotonic_time ();
    double t;

    for (off = 0; off < n; off += block)
      got += gst_npu_audio_frontend_convert (fe, pcm + off * bpf,
          MIN (block, n - off), out + MIN (got, 16000 * SECONDS - 4000));
    t = (g_get_monotonic_time () - t0) / 1e6;
    best = MIN (best, t);
    gst_npu_audio_frontend_free (fe);
  }
  printf ("%-44s %8.2f ms  %7.0fx real time\n", caps_str + 12, best * 1e3,
      SECONDS / best);
  gst_caps_unref (caps);
  g_free (pcm);
  g_free (f32);
  return best;
}

int
main (int argc, char **argv)
{
  guint passes = argc > 1 ? atoi (argv[1]) : 5, p, m;
  gsize n = 16000 * SECONDS;
  gfloat *out = g_new0 (gfloat, n + 8000);
  static const guint mels[] = { 80, 128 };

  gst_init (&argc, &argv);
  printf ("down-mix + resample, %d s in 10 ms buffers, one thread:\n",
      SECONDS);
  bench_convert ("audio/x-raw,format=F32LE,layout=interleaved,rate=16000,"
      "channels=1", 16000, 1, GST_AUDIO_FORMAT_F32LE, passes, out);
  bench_convert ("audio/x-raw,format=S16LE,layout=interleaved,rate=16000,"
      "channels=1", 16000, 1, GST_AUDIO_FORMAT_S16LE, passes, out);
  bench_convert ("audio/x-raw,format=S16LE,layout=interleaved,rate=44100,"
      "channels=2", 44100, 2, GST_AUDIO_FORMAT_S16LE, passes, out);
  bench_convert ("audio/x-raw,format=S32LE,layout=interleaved,rate=48000,"
      "channels=2", 48000, 2, GST_AUDIO_FORMAT_S32LE, passes, out);
  bench_convert ("audio/x-raw,format=F32LE,layout=interleaved,rate=48000,"
      "channels=6", 48000, 6, GST_AUDIO_FORMAT_F32LE, passes, out);

  printf ("log-mel of a %d s window (3000 frames), one thread:\n", SECONDS);
  for (m = 0; m < G_N_ELEMENTS (mels); m++) {
    GstNpuLogMel *lm = gst_npu_log_mel_new (mels[m]);
    gfloat *mel = g_new (gfloat, (gsize) mels[m] * 3000);
    double best = G_MAXDOUBLE;

    for (p = 0; p < passes; p++) {
      gint64 t0 = g_get_monotonic_time ();

      gst_npu_log_mel_compute (lm, out, n, 3000, mel);
      best = MIN (best, (g_get_monotonic_time () - t0) / 1e6);
    }
    printf ("%3u mels %40s %8.2f ms  %7.0fx real time\n", mels[m], "",
        best * 1e3, SECONDS / best);
    g_free (mel);
    gst_npu_log_mel_free (lm);
  }
  g_free (out);
  return 0;
}
