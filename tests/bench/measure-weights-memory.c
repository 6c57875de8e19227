/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: resident memory of a model loaded through mxfp4weights
 *
 * Runs `mxfp4weights location=FILE ! appsink`, keeps every tensor buffer
 * (as a consumer such as npullm does), reads every byte of each, and prints
 * the process's memory from /proc/self/status against the bytes pushed:
 * a model already in MXFP4 should cost its mapped file pages and little
 * else; a converted one its MXFP4 bytes (17/32 per converted weight).
 *
 * Usage: measure-weights-memory MODEL.gguf
 */
#include <stdio.h>
#include <string.h>

#include <gst/gst.h>
#include <npu/npu.h>

static void
print_status (const gchar * label)
{
  gchar *status = NULL;
  gchar **lines, **l;

  g_file_get_contents ("/proc/self/status", &status, NULL, NULL);
  lines = g_strsplit (status ? status : "", "\n", -1);
  printf ("%s:", label);
  for (l = lines; *l; l++)
    if (g_str_has_prefix (*l, "VmHWM") || g_str_has_prefix (*l, "VmRSS") ||
        g_str_has_prefix (*l, "RssAnon") || g_str_has_prefix (*l, "RssFile")
        || g_str_has_prefix (*l, "RssShmem")) {
      gchar **kv = g_strsplit (*l, ":", 2);
      printf (" %s %s", kv[0], g_strstrip (kv[1]));
      g_strfreev (kv);
    }
  printf ("\n");
  g_strfreev (lines);
  g_free (status);
}

int
main (int argc, char **argv)
{
  GstElement *pipeline, *sink, *src;
  GPtrArray *kept;
  GError *error = NULL;
  guint64 total = 0, converted_weights = 0, checksum = 0;
  guint64 mapped, converted;
  gchar *desc;

  gst_init (&argc, &argv);
  if (argc != 2) {
    fprintf (stderr, "usage: %s MODEL\n", argv[0]);
    return 2;
  }
  desc = g_strdup_printf ("mxfp4weights name=w location=\"%s\" ! "
      "appsink name=sink sync=false max-buffers=0", argv[1]);
  pipeline = gst_parse_launch (desc, &error);
  g_free (desc);
  if (!pipeline) {
    fprintf (stderr, "%s\n", error->message);
    return 1;
  }
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  src = gst_bin_get_by_name (GST_BIN (pipeline), "w");
  print_status ("before");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  kept = g_ptr_array_new_with_free_func ((GDestroyNotify) gst_buffer_unref);
  for (;;) {
    GstSample *sample = NULL;
    GstBuffer *buf;
    GstMapInfo map;
    GstNpuTensorMeta *meta;
    gsize i;

    g_signal_emit_by_name (sink, "pull-sample", &sample);
    if (!sample)
      break;
    buf = gst_sample_get_buffer (sample);
    meta = gst_buffer_get_npu_tensor_meta (buf);
    if (gst_buffer_map (buf, &map, GST_MAP_READ)) {
      /* Touch every page, as a consumer's kernels will. */
      for (i = 0; i < map.size; i += 4096)
        checksum += map.data[i];
      total += map.size;
      gst_buffer_unmap (buf, &map);
    }
    if (meta && g_strcmp0 (meta->type_name, meta->source_type_name) != 0)
      converted_weights += meta->ne[0] * meta->ne[1] * meta->ne[2] *
          meta->ne[3];
    g_ptr_array_add (kept, gst_buffer_ref (buf));
    gst_sample_unref (sample);
  }
  g_object_get (src, "bytes-mapped", &mapped, "bytes-converted", &converted,
      NULL);
  printf ("tensors: %u, bytes pushed: %" G_GUINT64_FORMAT " (mapped from the "
      "file: %" G_GUINT64_FORMAT ", converted to MXFP4: %" G_GUINT64_FORMAT
      " for %" G_GUINT64_FORMAT " weights = %.4f bytes/weight)\n", kept->len,
      total, mapped, converted, converted_weights,
      converted_weights ? (double) converted / converted_weights : 0.0);
  print_status ("all tensors held and read");
  printf ("(checksum %" G_GUINT64_FORMAT ")\n", checksum);

  g_ptr_array_unref (kept);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return 0;
}
