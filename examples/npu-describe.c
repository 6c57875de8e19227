/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu example: a camera (or test source) described by a language model
 *
 * Builds, from an application, the pipeline a user would write on the
 * command line:
 *
 *   SOURCE ! npuvisiontok model=MMPROJ ! llm.vision
 *   npullm name=llm model=TEXT prompt=PROMPT ! appsink
 *
 * and prints the text as it streams in, with the timestamp of the frame
 * each answer is about, then the model's statistics.
 *
 * Usage: npu-describe TEXT.gguf MMPROJ.gguf [PROMPT] [SOURCE]
 *   SOURCE defaults to "videotestsrc num-buffers=3"; a camera is
 *   "v4l2src io-mode=dmabuf num-buffers=30".
 */
#include <stdio.h>

#include <gst/gst.h>
#include <gst/app/app.h>

static void
print_stats (GstMessage * msg)
{
  const GstStructure *s = gst_message_get_structure (msg);
  gdouble ttft = 0, prefill = 0, decode = 0;

  /* a message without generated-tokens counts media only (a flush, the
   * end of the stream): no answer's figures */
  if (!s || !gst_structure_has_name (s, "npullm-stats") ||
      !gst_structure_has_field (s, "generated-tokens"))
    return;
  gst_structure_get_double (s, "ttft-ms", &ttft);
  gst_structure_get_double (s, "prefill-tps", &prefill);
  gst_structure_get_double (s, "decode-tps", &decode);
  printf ("\n[time to first token %.1f ms, prefill %.0f tok/s, decode %.1f "
      "tok/s]\n", ttft, prefill, decode);
}

int
main (int argc, char **argv)
{
  const gchar *prompt = argc > 3 ? argv[3] : "Describe what you see.";
  const gchar *source = argc > 4 ? argv[4] :
      "videotestsrc num-buffers=3 ! video/x-raw,format=NV12,width=640,height=480";
  GstElement *pipeline, *sink;
  GstClockTime last_pts = GST_CLOCK_TIME_NONE;
  GError *error = NULL;
  gchar *desc;
  GstBus *bus;
  gboolean failed = FALSE;

  gst_init (&argc, &argv);
  if (argc < 3) {
    fprintf (stderr, "usage: %s TEXT.gguf MMPROJ.gguf [PROMPT] [SOURCE]\n",
        argv[0]);
    return 2;
  }
  desc = g_strdup_printf ("%s ! npuvisiontok model=\"%s\" ! llm.vision "
      "npullm name=llm model=\"%s\" prompt=\"%s\" max-tokens=32 "
      "temperature=0.7 seed=1 ! "
      "appsink name=sink sync=false", source, argv[2], argv[1], prompt);
  pipeline = gst_parse_launch (desc, &error);
  g_free (desc);
  if (!pipeline) {
    fprintf (stderr, "cannot build the pipeline: %s\n", error->message);
    return 1;
  }
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  bus = gst_element_get_bus (pipeline);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  for (;;) {
    GstSample *sample = gst_app_sink_try_pull_sample (GST_APP_SINK (sink),
        100 * GST_MSECOND);
    GstMessage *msg;

    if (sample) {
      GstBuffer *buf = gst_sample_get_buffer (sample);
      GstMapInfo map;

      if (GST_BUFFER_PTS (buf) != last_pts) {
        last_pts = GST_BUFFER_PTS (buf);
        printf ("\n[frame at %" GST_TIME_FORMAT "] ", GST_TIME_ARGS (last_pts));
      }
      if (gst_buffer_map (buf, &map, GST_MAP_READ)) {
        fwrite (map.data, 1, map.size, stdout);
        fflush (stdout);
        gst_buffer_unmap (buf, &map);
      }
      gst_sample_unref (sample);
    }
    while ((msg = gst_bus_pop (bus))) {
      if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ELEMENT)
        print_stats (msg);
      else if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
        GError *err = NULL;
        gst_message_parse_error (msg, &err, NULL);
        fprintf (stderr, "\nerror: %s\n", err->message);
        g_error_free (err);
        failed = TRUE;
      }
      gst_message_unref (msg);
    }
    if (failed || gst_app_sink_is_eos (GST_APP_SINK (sink)))
      break;
  }
  printf ("\n");
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return failed ? 1 : 0;
}
