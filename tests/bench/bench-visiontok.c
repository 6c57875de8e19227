/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu benchmark: preprocessing a camera frame for a vision encoder
 *
 * Our fused path (one pass from the NV12 frame, read in place, to the
 * encoder's normalised patches) against what a user would otherwise write:
 *
 *   appsrc ! videoconvert ! videoscale ! video/x-raw,format=RGB,width=S,height=S ! appsink
 *
 * followed by normalisation and patchify in application code.  Both on one
 * thread, same frames, same output.  Prints frames/s and the bytes each
 * path writes besides its output (intermediate images: copies of the frame).
 *
 * Usage: bench-visiontok [FRAMES]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gst/gst.h>
#include <gst/video/video.h>
#include <core/cpu/npuvisionprep.h>

#define W 1280
#define H 720
#define PATCH 14

static const gdouble mean[3] = { 0.48145466, 0.4578275, 0.40821073 };
static const gdouble stdv[3] = { 0.26862954, 0.26130258, 0.27577711 };

static double
fused (const guint8 * frame, guint size, guint n)
{
  NpuVisionPrepParams p;
  NpuVisionPrepPlan *plan;
  const guint8 *planes[2] = { frame, frame + W * H };
  gssize strides[2] = { W, W };
  gfloat *out;
  gint64 t0;
  guint i;

  npu_vision_prep_params_init (&p);
  p.format = NPU_PIXEL_FORMAT_NV12;
  p.width = W;
  p.height = H;
  p.matrix = NPU_COLOR_MATRIX_BT709;
  p.crop_width = W;
  p.crop_height = H;
  p.out_width = p.out_height = size;
  for (i = 0; i < 3; i++) {
    p.mean[i] = mean[i];
    p.std[i] = stdv[i];
  }
  p.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
  p.patch_size = size % PATCH ? 16 : PATCH;
  plan = npu_vision_prep_plan_new (&p, NULL);
  out = g_new (gfloat, npu_vision_prep_plan_get_n_floats (plan));
  npu_vision_prep_run (plan, planes, strides, out, NULL);
  t0 = g_get_monotonic_time ();
  for (i = 0; i < n; i++)
    npu_vision_prep_run (plan, planes, strides, out, NULL);
  t0 = g_get_monotonic_time () - t0;
  g_free (out);
  npu_vision_prep_plan_free (plan);
  return n * 1e6 / t0;
}

/* The usual application code after appsink: RGB bytes to normalised
 * patches. */
static void
normalise_patchify (const guint8 * rgb, gint stride, guint size, guint patch,
    gfloat * out)
{
  guint py, px, c, y, x, k = 0;

  for (py = 0; py < size / patch; py++)
    for (px = 0; px < size / patch; px++)
      for (c = 0; c < 3; c++)
        for (y = 0; y < patch; y++)
          for (x = 0; x < patch; x++) {
            guint8 v = rgb[(py * patch + y) * stride + (px * patch + x) * 3 +
                c];
            out[k++] = (v / 255.0f - mean[c]) / stdv[c];
          }
}

static double
gstreamer_path (const guint8 * frame, guint size, guint n)
{
  gchar *desc = g_strdup_printf ("appsrc name=src format=time "
      "caps=video/x-raw,format=NV12,width=%d,height=%d,framerate=30/1,"
      "colorimetry=bt709 ! videoconvert ! videoscale ! "
      "video/x-raw,format=RGB,width=%u,height=%u ! appsink name=sink "
      "sync=false", W, H, size, size);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  guint patch = size % PATCH ? 16 : PATCH;
  gfloat *out = g_new (gfloat, 3 * size * size);
  gint64 t0 = 0;
  guint i;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (i = 0; i < n + 1; i++) {
    GstBuffer *buf = gst_buffer_new_wrapped_full (GST_MEMORY_FLAG_READONLY,
        (gpointer) frame, W * H * 3 / 2, 0, W * H * 3 / 2, NULL, NULL);
    GstSample *sample = NULL;
    GstFlowReturn flow;
    GstVideoFrame vf;
    GstVideoInfo info;

    if (i == 1)
      t0 = g_get_monotonic_time ();     /* after the first (negotiation) */
    GST_BUFFER_PTS (buf) = i * GST_SECOND / 30;
    g_signal_emit_by_name (src, "push-buffer", buf, &flow);
    gst_buffer_unref (buf);
    g_signal_emit_by_name (sink, "pull-sample", &sample);
    gst_video_info_from_caps (&info, gst_sample_get_caps (sample));
    gst_video_frame_map (&vf, &info, gst_sample_get_buffer (sample),
        GST_MAP_READ);
    normalise_patchify (GST_VIDEO_FRAME_PLANE_DATA (&vf, 0),
        GST_VIDEO_FRAME_PLANE_STRIDE (&vf, 0), size, patch, out);
    gst_video_frame_unmap (&vf);
    gst_sample_unref (sample);
  }
  t0 = g_get_monotonic_time () - t0;
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (out);
  g_free (desc);
  return n * 1e6 / t0;
}

int
main (int argc, char **argv)
{
  guint n = argc > 1 ? atoi (argv[1]) : 100;
  const guint sizes[] = { 224, 384 };
  guint8 *frame = g_malloc (W * H * 3 / 2);
  guint i, s;

  gst_init (&argc, &argv);
  for (i = 0; i < W * H * 3 / 2; i++)
    frame[i] = (i * 7 + i / W * 3) & 0xff;

  printf ("1280x720 NV12 -> SxS normalised patches, 1 thread, %u frames\n",
      n);
  printf ("%-5s %16s %20s %8s   %s\n", "S", "fused frames/s",
      "videoconvert+scale", "speedup", "bytes copied per frame (ours / "
      "theirs)");
  for (s = 0; s < G_N_ELEMENTS (sizes); s++) {
    double a = fused (frame, sizes[s], n);
    double b = gstreamer_path (frame, sizes[s], n);
    /* theirs: the full-size RGB frame videoconvert writes, and the scaled
     * RGB frame videoscale writes; ours: nothing but the output. */
    guint64 theirs = (guint64) W * H * 3 + (guint64) sizes[s] * sizes[s] * 3;

    printf ("%-5u %16.1f %20.1f %7.1fx   0 / %" G_GUINT64_FORMAT "\n",
        sizes[s], a, b, a / b, theirs);
  }
  g_free (frame);
  return 0;
}
