/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: sounds rendered by GStreamer, turned into the log-mel window
 * npuaudiotok gives its encoder
 *
 *   npu-render-audio --mels M --frames F -o out.f32 < specs
 *
 * Each line of specs is a gst-launch description of a source that ends by
 * itself, e.g.
 *
 *   audiotestsrc wave=sine freq=440 num-buffers=10 samplesperbuffer=1600 !
 *       audio/x-raw,format=S16LE,rate=16000,channels=1
 *   filesrc location=yes.wav ! wavparse
 *
 * The tool runs "<line> ! appsink" and feeds every buffer through the
 * element's own front end (gst/npu/gstnpuaudiofrontend.c: down-mix and
 * resampling to 16 kHz, the caps parsed by the same call), pushes the
 * resampler's tail out at EOS as the element does, and computes the
 * element's log-mel (gst/npu/gstnpulogmel.c) of the clip for a window of F
 * frames: what npuaudiotok vad=false encodes for a clip no longer than
 * one window.  M rows of F floats per line are appended to out.f32 in
 * host order, and the clip's length in 16 kHz samples is printed, one
 * line each, so training sees what the element gives the encoder
 * (tests/train/train.py).  A clip longer than the window is an error:
 * the element would cut it into two chunks.
 *
 * audiotestsrc wave=ticks leaves the frame where a tick starts unwritten
 * (stale memory): the tool writes 0 there, as test-trained-audio does with
 * the same rule (tests/npuaudioticks.h), so the model learns the ticks
 * GStreamer means, the same in every run.
 */
#include <gst/gst.h>
#include <gst/app/gstappsink.h>
#include <gst/audio/audio.h>
#include <stdio.h>
#include <string.h>

#include <npu/gstnpuaudiofrontend.h>
#include <npu/gstnpulogmel.h>
#include "tests/npuaudioticks.h"

/* The clip at 16 kHz, as the element's open chunk holds it */
typedef struct
{
  GstAudioInfo info;
  GstNpuAudioFrontend *fe;
  GArray *samples;              /* gfloat */
  guint64 n_in;                 /* input frames converted */
} Clip;

static void
clip_convert (Clip * c, gconstpointer data, gsize n_frames, gsize keep_max)
{
  gsize n = gst_npu_audio_frontend_get_out_frames (c->fe, n_frames);
  guint old = c->samples->len;

  g_array_set_size (c->samples, old + n);
  n = gst_npu_audio_frontend_convert (c->fe, data, n_frames,
      &g_array_index (c->samples, gfloat, old));
  g_array_set_size (c->samples, old + MIN (n, keep_max));
  if (data)
    c->n_in += n_frames;
}

/* As the element's drain(): the resampler's tail, pushed out with
 * silence, only as far as the real input is owed samples. */
static void
clip_drain (Clip * c)
{
  gsize latency = gst_npu_audio_frontend_get_latency (c->fe);
  guint64 owed;

  if (latency == 0 || c->n_in == 0)
    return;
  owed = gst_util_uint64_scale (c->n_in, GST_NPU_LOG_MEL_SAMPLE_RATE,
      GST_AUDIO_INFO_RATE (&c->info));
  clip_convert (c, NULL, latency,
      owed > c->samples->len ? owed - c->samples->len : 0);
}

static gboolean
render (const gchar * source, Clip * c, GError ** error)
{
  gchar *desc = g_strdup_printf ("%s ! appsink name=sink sync=false", source);
  GstElement *pipeline = gst_parse_launch (desc, error);
  GstElement *sink;
  GstSample *sample;
  gboolean ok = TRUE;

  g_free (desc);
  if (!pipeline)
    return FALSE;
  npu_audio_ticks_complete (pipeline);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  if (gst_element_set_state (pipeline, GST_STATE_PLAYING)
      == GST_STATE_CHANGE_FAILURE)
    goto failed;
  while ((sample = gst_app_sink_pull_sample (GST_APP_SINK (sink)))) {
    GstBuffer *buf = gst_sample_get_buffer (sample);
    GstMapInfo map;

    if (!c->fe) {
      if (!gst_npu_audio_frontend_parse_caps (gst_sample_get_caps (sample),
              &c->info, error)
          || !(c->fe = gst_npu_audio_frontend_new (&c->info,
                  GST_NPU_LOG_MEL_SAMPLE_RATE, error))) {
        gst_sample_unref (sample);
        ok = FALSE;
        break;
      }
    }
    if (gst_buffer_map (buf, &map, GST_MAP_READ)) {
      clip_convert (c, map.data, map.size / GST_AUDIO_INFO_BPF (&c->info),
          G_MAXSIZE);
      gst_buffer_unmap (buf, &map);
    }
    gst_sample_unref (sample);
  }
  if (ok && !gst_app_sink_is_eos (GST_APP_SINK (sink)))
    goto failed;
  if (ok && !c->fe) {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_FAILED,
        "%s gave no audio", source);
    ok = FALSE;
  }
  if (ok)
    clip_drain (c);
out:
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return ok;

  /* ERRORS */
failed:
  {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_FAILED,
        "could not render %s", source);
    ok = FALSE;
    goto out;
  }
}

static gboolean
run_line (const gchar * line, GstNpuLogMel * lm, guint frames, FILE * out,
    GError ** error)
{
  Clip c = { 0 };
  gsize n_mel = (gsize) gst_npu_log_mel_get_n_mels (lm) * frames;
  gfloat *mel = NULL;
  gboolean ok;

  c.samples = g_array_new (FALSE, FALSE, sizeof (gfloat));
  ok = render (line, &c, error);
  if (ok && c.samples->len > (gsize) frames * GST_NPU_LOG_MEL_HOP) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "%s: %u samples at 16 kHz, longer than the window of %u frames",
        line, c.samples->len, frames);
    ok = FALSE;
  }
  if (ok) {
    mel = g_new (gfloat, n_mel);
    gst_npu_log_mel_compute (lm, (const gfloat *) c.samples->data,
        c.samples->len, frames, mel);
    ok = fwrite (mel, sizeof (gfloat), n_mel, out) == n_mel;
    if (!ok)
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_IO, "write failed");
    else
      g_print ("%u\n", c.samples->len);
  }
  g_free (mel);
  if (c.fe)
    gst_npu_audio_frontend_free (c.fe);
  g_array_unref (c.samples);
  return ok;
}

int
main (int argc, char **argv)
{
  gchar *output = NULL, line[4096];
  gint n_mels = 80, frames = 100;
  GOptionEntry entries[] = {
    {"mels", 0, 0, G_OPTION_ARG_INT, &n_mels, "mel bins (80 or 128)", "M"},
    {"frames", 0, 0, G_OPTION_ARG_INT, &frames,
        "mel frames of the window (100 a second)", "F"},
    {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "float32 output",
        "FILE"},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("< specs");
  GError *error = NULL;
  GstNpuLogMel *lm;
  FILE *out;
  guint n = 0;
  int ret = 0;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || !output
      || (n_mels != 80 && n_mels != 128) || frames <= 0 || frames % 2
      || frames > 3000) {
    g_printerr ("%s\n", error ? error->message :
        "need -o, --mels 80 or 128 and an even --frames up to 3000");
    return 2;
  }
  g_option_context_free (ctx);
  out = fopen (output, "wb");
  if (!out) {
    g_printerr ("cannot create %s\n", output);
    return 1;
  }
  lm = gst_npu_log_mel_new (n_mels);
  while (fgets (line, sizeof (line), stdin)) {
    g_strstrip (line);
    if (!*line || *line == '#')
      continue;
    if (!run_line (line, lm, frames, out, &error)) {
      g_printerr ("clip %u: %s\n", n, error->message);
      g_clear_error (&error);
      ret = 1;
      break;
    }
    n++;
  }
  gst_npu_log_mel_free (lm);
  if (fclose (out) != 0 && ret == 0) {
    g_printerr ("writing %s failed\n", output);
    ret = 1;
  }
  g_free (output);
  return ret;
}
