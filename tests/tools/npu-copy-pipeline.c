/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* npu-copy-pipeline: the bytes a frame moves through the multi-hop copy
 * pipeline the seed article describes, for docs/cost.md
 *
 *   npu-copy-pipeline [--width 1280] [--height 720] [--format NV12]
 *                     [--size 224] [--frames 30]
 *
 * The pipeline a vision runtime is usually fed by:
 *   videotestsrc ! FORMAT,WxH ! videoconvert ! RGB ! videoscale
 *     ! RGB,SIZExSIZE ! appsink
 * and the application then does what a runtime's input does: it copies
 * the sample out (gst_buffer_extract(), as a runtime takes its own input
 * tensor) and normalises it into a float32 planar tensor.  Pad probes on
 * every element's source pad see each buffer written; a stage reads its
 * input buffer and writes its output one, so the figures per frame are
 * the buffers' sizes (an upper bound for the scaler's read: a bilinear
 * downscale need not read every row).  Run it under the copy counter
 * (LD_PRELOAD=libnpu-copycount.so) to see which of those moves are
 * memcpy calls.  A developer tool that prints figures, not a test.
 */
#include <gst/gst.h>
#include <gst/app/gstappsink.h>

#include <stdio.h>
#include <string.h>

#define N_STAGES 3

typedef struct
{
  const gchar *name;
  guint64 written;              /* bytes of the buffers it pushed */
  guint n;
} Stage;

static GstPadProbeReturn
count_buffer (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Stage *st = data;

  st->written += gst_buffer_get_size (GST_PAD_PROBE_INFO_BUFFER (info));
  st->n++;
  return GST_PAD_PROBE_OK;
}

/* What the runtime's input does with a sample: a copy of its own, then
 * the float tensor (mean 0.5, std 0.5, channels planar) */
static void
feed_runtime (GstSample * sample, guint8 * copy, float *tensor, guint size)
{
  GstBuffer *buf = gst_sample_get_buffer (sample);
  gsize n = (gsize) size * size * 3, i;

  gst_buffer_extract (buf, 0, copy, n);
  for (i = 0; i < (gsize) size * size; i++) {
    tensor[i] = copy[3 * i] / 127.5f - 1.0f;
    tensor[size * size + i] = copy[3 * i + 1] / 127.5f - 1.0f;
    tensor[2 * size * size + i] = copy[3 * i + 2] / 127.5f - 1.0f;
  }
}

static void
print_row (const gchar * stage, gdouble read, gdouble written, guint n)
{
  printf ("%-34s %12.0f %12.0f\n", stage, read / n, written / n);
}

int
main (int argc, char **argv)
{
  gint width = 1280, height = 720, size = 224, frames = 30;
  gchar *format = NULL, *desc;
  GOptionEntry entries[] = {
    {"width", 0, 0, G_OPTION_ARG_INT, &width, "Frame width", "W"},
    {"height", 0, 0, G_OPTION_ARG_INT, &height, "Frame height", "H"},
    {"format", 0, 0, G_OPTION_ARG_STRING, &format, "Camera format", "F"},
    {"size", 0, 0, G_OPTION_ARG_INT, &size, "Model input side", "S"},
    {"frames", 0, 0, G_OPTION_ARG_INT, &frames, "Frames", "N"},
    {NULL}
  };
  Stage stages[N_STAGES] = { {"src"}, {"convert"}, {"scale"} };
  GOptionContext *opts = g_option_context_new ("- the copy pipeline's bytes");
  GError *error = NULL;
  GstElement *pipeline, *sink;
  GstSample *sample;
  guint8 *copy;
  float *tensor;
  guint i, n = 0;
  guint64 in_bytes, rgb_bytes, out_bytes, tensor_bytes, total;

  g_option_context_add_main_entries (opts, entries, NULL);
  g_option_context_add_group (opts, gst_init_get_option_group ());
  if (!g_option_context_parse (opts, &argc, &argv, &error))
    g_error ("%s", error->message);
  g_option_context_free (opts);
  if (width <= 0 || height <= 0 || size <= 0 || frames <= 0)
    g_error ("--width, --height, --size and --frames must be positive");

  desc = g_strdup_printf ("videotestsrc name=src num-buffers=%d "
      "pattern=ball ! video/x-raw,format=%s,width=%d,height=%d "
      "! videoconvert name=convert ! video/x-raw,format=RGB "
      "! videoscale name=scale ! video/x-raw,width=%d,height=%d "
      "! appsink name=sink sync=false", frames, format ? format : "NV12",
      width, height, size, size);
  pipeline = gst_parse_launch (desc, &error);
  if (!pipeline)
    g_error ("%s", error->message);
  for (i = 0; i < N_STAGES; i++) {
    GstElement *e = gst_bin_get_by_name (GST_BIN (pipeline), stages[i].name);
    GstPad *pad = gst_element_get_static_pad (e, "src");

    gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, count_buffer,
        &stages[i], NULL);
    gst_object_unref (pad);
    gst_object_unref (e);
  }
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  copy = g_malloc ((gsize) size * size * 3);
  tensor = g_new (float, (gsize) size * size * 3);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  while ((sample = gst_app_sink_pull_sample (GST_APP_SINK (sink)))) {
    feed_runtime (sample, copy, tensor, size);
    gst_sample_unref (sample);
    n++;
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  if (n == 0 || stages[0].n != n)
    g_error ("%u frames reached the application, %u left the source", n,
        stages[0].n);

  in_bytes = stages[0].written;
  rgb_bytes = stages[1].written;
  out_bytes = stages[2].written;
  tensor_bytes = (guint64) n * size * size * 3 * sizeof (float);
  printf ("%s: %d x %d %s to %d x %d RGB, then float32, %u frames\n",
      desc, width, height, format ? format : "NV12", size, size, n);
  printf ("%-34s %12s %12s\n", "bytes a frame", "read", "written");
  print_row ("camera (videotestsrc)", 0, in_bytes, n);
  print_row ("videoconvert to RGB", in_bytes, rgb_bytes, n);
  print_row ("videoscale", rgb_bytes, out_bytes, n);
  print_row ("appsink to the runtime's copy", out_bytes, out_bytes, n);
  print_row ("the runtime's float tensor", out_bytes, tensor_bytes, n);
  /* the camera's write, then each stage's read and write */
  total = 2 * in_bytes + 2 * rgb_bytes + 4 * out_bytes + tensor_bytes;
  printf ("%-34s %12.0f\n", "in all, read and written", (gdouble) total / n);

  g_free (copy);
  g_free (tensor);
  g_free (desc);
  g_free (format);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return 0;
}
