/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npuvisiontok element tests
 *
 * The tokens the element gives for a frame are compared with the
 * double-precision references of the preprocessing and of the encoder
 * (tests/reference/, also used by tests/unit/test-visionprep.c and
 * test-vit.c), whatever the format, size, strides, colorimetry and memory,
 * read in place; and the element must fail clearly on bad input.
 */
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <glib/gstdio.h>
#include <gst/video/video.h>
#include <gst/allocators/allocators.h>

#include "npucheck.h"
#include <npu/npu.h>
#include <core/npuvit.h>
#include <core/npuvisionprep.h>
#include <core/npumatmul.h>
#include <core/npugguf.h>
#include "../reference/npurefvision.h"
#include "../reference/npurefvit.h"
#include "../tools/npumodelgen.h"

static gchar *tmpdir, *text_path, *mmproj_path;

static void
setup (void)
{
  NpuTextModelParams tp;
  NpuMmprojParams mp;
  GError *error = NULL;

  npu_check_load_plugins ();
  tmpdir = g_dir_make_tmp ("npuvisiontok-XXXXXX", NULL);
  text_path = g_build_filename (tmpdir, "text.gguf", NULL);
  mmproj_path = g_build_filename (tmpdir, "mmproj.gguf", NULL);
  fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_QWEN2, "tiny",
          &error));
  fail_unless (npu_model_gen_write_text (&tp, text_path, NULL, &error));
  fail_unless (npu_model_gen_mmproj_preset (&mp, NPU_MODEL_PROJECTOR_MLP,
          "tiny", &error));
  fail_unless (npu_model_gen_write_mmproj (&mp, text_path, mmproj_path, NULL,
          &error), "%s", error ? error->message : "");
}

static void
teardown (void)
{
  g_unlink (text_path);
  g_unlink (mmproj_path);
  g_rmdir (tmpdir);
  g_free (text_path);
  g_free (mmproj_path);
  g_free (tmpdir);
}

static NpuPixelFormat
to_npu (GstVideoFormat f)
{
  switch (f) {
    case GST_VIDEO_FORMAT_NV12:
      return NPU_PIXEL_FORMAT_NV12;
    case GST_VIDEO_FORMAT_I420:
      return NPU_PIXEL_FORMAT_I420;
    case GST_VIDEO_FORMAT_YUY2:
      return NPU_PIXEL_FORMAT_YUY2;
    case GST_VIDEO_FORMAT_RGB:
      return NPU_PIXEL_FORMAT_RGB;
    case GST_VIDEO_FORMAT_BGR:
      return NPU_PIXEL_FORMAT_BGR;
    case GST_VIDEO_FORMAT_RGBA:
      return NPU_PIXEL_FORMAT_RGBA;
    case GST_VIDEO_FORMAT_BGRA:
      return NPU_PIXEL_FORMAT_BGRA;
    case GST_VIDEO_FORMAT_RGBx:
      return NPU_PIXEL_FORMAT_RGBX;
    case GST_VIDEO_FORMAT_BGRx:
      return NPU_PIXEL_FORMAT_BGRX;
    case GST_VIDEO_FORMAT_GRAY8:
      return NPU_PIXEL_FORMAT_GRAY8;
    default:
      return NPU_PIXEL_FORMAT_UNKNOWN;
  }
}

/* A frame with deterministic content, laid out with @extra bytes of
 * padding per row (odd strides), in memory made by @fd_alloc (fd memory,
 * as a camera's dma-buf would arrive) or system memory. */
static GstBuffer *
make_frame (const GstVideoInfo * info, guint extra, GstAllocator * fd_alloc,
    guint seed, GstVideoInfo * laid_out)
{
  GstVideoInfo l = *info;
  gsize offset = 0, size;
  GstBuffer *buf;
  GstMapInfo map;
  guint p, i;

  for (p = 0; p < GST_VIDEO_INFO_N_PLANES (info); p++) {
    guint h = GST_VIDEO_FORMAT_INFO_SCALE_HEIGHT (info->finfo, p,
        GST_VIDEO_INFO_HEIGHT (info));
    l.stride[p] = info->stride[p] + extra;
    l.offset[p] = offset;
    offset += (gsize) l.stride[p] * h + 7;
  }
  size = offset;
  if (fd_alloc) {
    int fd = memfd_create ("frame", MFD_CLOEXEC);
    fail_unless (fd >= 0 && ftruncate (fd, size) == 0);
    buf = gst_buffer_new ();
    gst_buffer_append_memory (buf, gst_fd_allocator_alloc (fd_alloc, fd,
            size, GST_FD_MEMORY_FLAG_NONE));
  } else {
    buf = gst_buffer_new_allocate (NULL, size, NULL);
  }
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_WRITE));
  for (i = 0; i < size; i++)
    map.data[i] = (i * 131 + seed * 17 + (i / 7) * 3) & 0xff;
  gst_buffer_unmap (buf, &map);
  gst_buffer_add_video_meta_full (buf, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_INFO_FORMAT (info), GST_VIDEO_INFO_WIDTH (info),
      GST_VIDEO_INFO_HEIGHT (info), GST_VIDEO_INFO_N_PLANES (info),
      l.offset, l.stride);
  *laid_out = l;
  return buf;
}

/* What the element must give for @buf, from the double-precision
 * references of the preprocessing and of the encoder (tests/reference/),
 * which share no code with the element or the core's fast paths. */
static gdouble *
reference_tokens (NpuVit * vit, const GstVideoInfo * info,
    const GstVideoInfo * laid_out, GstBuffer * buf, gboolean letterbox,
    gsize * n_floats)
{
  NpuVisionPrepParams p;
  NpuRefFrame fr = { 0, };
  NpuRefLookup lk = { 0, };
  NpuGguf *gguf;
  gfloat mean[3], std[3];
  gdouble *chw, *patches, *out;
  guint i, rect[4];
  GstMapInfo map;

  npu_vision_prep_params_init (&p);
  p.format = to_npu (GST_VIDEO_INFO_FORMAT (info));
  p.width = GST_VIDEO_INFO_WIDTH (info);
  p.height = GST_VIDEO_INFO_HEIGHT (info);
  /* What the caps say (gst_video_info_set_format() picks BT.601 limited
   * range for SD YUV, BT.709 for HD, full range for RGB) */
  p.matrix = info->colorimetry.matrix == GST_VIDEO_COLOR_MATRIX_BT709 ?
      NPU_COLOR_MATRIX_BT709 :
      info->colorimetry.matrix == GST_VIDEO_COLOR_MATRIX_BT2020 ?
      NPU_COLOR_MATRIX_BT2020 : NPU_COLOR_MATRIX_BT601;
  p.range = info->colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255 ?
      NPU_COLOR_RANGE_FULL : NPU_COLOR_RANGE_LIMITED;
  p.crop_width = p.width;
  p.crop_height = p.height;
  p.out_width = p.out_height = npu_vit_get_image_size (vit);
  p.mode = letterbox ? NPU_VISION_PREP_LETTERBOX : NPU_VISION_PREP_STRETCH;
  npu_vit_get_mean_std (vit, mean, std);
  for (i = 0; i < 3; i++) {
    p.mean[i] = mean[i];
    p.std[i] = std[i];
    /* docs/npuvisiontok.md: the bars are the model's mean colour */
    p.fill_rgb[i] = mean[i] * 255.0;
  }

  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  fr.format = p.format;
  fr.width = p.width;
  fr.height = p.height;
  for (i = 0; i < GST_VIDEO_INFO_N_PLANES (info); i++) {
    fr.planes[i] = map.data + laid_out->offset[i];
    fr.strides[i] = laid_out->stride[i];
  }
  chw = npu_ref_vision_prep (&fr, &p, rect);
  gst_buffer_unmap (buf, &map);
  patches = npu_ref_patchify (chw, p.out_width, p.out_height,
      npu_vit_get_patch_size (vit));

  gguf = npu_gguf_open (mmproj_path, NULL);
  fail_unless (gguf != NULL);
  lk.gguf = gguf;
  *n_floats = (gsize) npu_vit_get_n_tokens (vit) * npu_vit_get_out_dim (vit);
  out = g_new (gdouble, *n_floats);
  npu_ref_vit_encode (&lk, patches, FALSE, out);
  npu_gguf_free (gguf);
  g_free (chw);
  g_free (patches);
  return out;
}

static GstFlowReturn
push (GstElement * src, GstBuffer * buf)
{
  GstFlowReturn flow;

  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  return flow;
}

/* One frame through appsrc ! npuvisiontok ! appsink */
typedef struct
{
  GstVideoFormat format;
  guint width, height;
  guint extra;                  /* padding bytes per row: odd strides */
  gboolean fd_memory;           /* fd memory, as a camera's dma-buf */
  gboolean dmabuf_caps;         /* video/x-raw(memory:DMABuf) */
  gboolean letterbox;
  GstVideoColorMatrix matrix;   /* with full range; 0: set_format()'s */
} FrameCase;

/* Tolerances, on max |y - y_ref| / rms (y_ref) of the tokens:
 *  - scalar matmul path: the preprocessing is within 1e-4 (absolute, on
 *    normalised values) of its reference and typically ~1e-6
 *    (tests/unit/test-visionprep.c), the encoder within ~1e-6 of its
 *    reference (tests/unit/test-vit.c); through the tiny encoder that is
 *    measured at ~1e-6 of the rms.  Bound 1e-4: a wrong pixel, plane,
 *    stride, chroma sample or colour matrix moves tokens by percents.
 *  - int8 paths, with the element's default precision=accurate (int8
 *    activations plus their int8 residual): the bound of
 *    tests/unit/test-vit.c for that precision, 2e-3 (0.15, the int8
 *    bound, / 254 is 6e-4 per product; with precision=fast these frames
 *    measured 5-7 %). */
static void
check_frame (const FrameCase * fc)
{
  GstAllocator *fd_alloc = fc->fd_memory ? gst_fd_allocator_new () : NULL;
  NpuVit *vit = npu_vit_new_from_file (mmproj_path, NULL);
  gboolean q8 = g_strcmp0 (npu_matmul_get_isa (), "scalar") != 0;
  GstVideoInfo info, laid_out;
  GstCaps *caps;
  gchar *caps_str, *desc;
  GstElement *pipeline, *src, *sink, *tok;
  GstBuffer *frame;
  GstSample *sample = NULL;
  GstMapInfo map;
  gdouble *want, err;
  gsize n;
  guint64 copied;
  GstNpuTokensMeta *tmeta;

  fail_unless (vit != NULL);
  gst_video_info_set_format (&info, fc->format, fc->width, fc->height);
  if (fc->matrix) {
    info.colorimetry.matrix = fc->matrix;
    info.colorimetry.range = GST_VIDEO_COLOR_RANGE_0_255;
  }
  caps = gst_video_info_to_caps (&info);
  if (fc->dmabuf_caps)
    gst_caps_set_features (caps, 0,
        gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_DMABUF, NULL));
  caps_str = gst_caps_to_string (caps);
  desc = g_strdup_printf ("appsrc name=src format=time caps=\"%s\" ! "
      "npuvisiontok name=tok model=%s letterbox=%s ! "
      "appsink name=sink sync=false", caps_str, mmproj_path,
      fc->letterbox ? "true" : "false");
  pipeline = gst_parse_launch (desc, NULL);
  fail_unless (pipeline != NULL);
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  frame = make_frame (&info, fc->extra, fd_alloc, fc->format, &laid_out);
  want = reference_tokens (vit, &info, &laid_out, frame, fc->letterbox, &n);
  GST_BUFFER_PTS (frame) = 5 * GST_SECOND;
  fail_unless_equals_int (push (src, frame), GST_FLOW_OK);
  gst_buffer_unref (frame);
  g_signal_emit_by_name (sink, "pull-sample", &sample);
  fail_unless (sample != NULL);

  frame = gst_sample_get_buffer (sample);
  tmeta = gst_buffer_get_npu_tokens_meta (frame);
  fail_unless (tmeta != NULL);
  fail_unless_equals_int (tmeta->n_tokens, npu_vit_get_n_tokens (vit));
  fail_unless_equals_int (tmeta->dim, npu_vit_get_out_dim (vit));
  fail_unless_equals_uint64 (tmeta->source_pts, 5 * GST_SECOND);
  fail_unless (gst_buffer_get_npu_fence_meta (frame) != NULL);
  fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (frame, 0)));
  /* Maps wait for the encoder's fence. */
  fail_unless (gst_buffer_map (frame, &map, GST_MAP_READ));
  fail_unless_equals_uint64 (map.size, n * sizeof (gfloat));
  fail_unless (npu_ref_error_over_rms ((const gfloat *) map.data, want, n,
          &err), "tokens not finite, or an all-zero reference");
  GST_INFO ("%s %ux%u%s matrix %d [%s]: max err / rms %.2e",
      gst_video_format_to_string (fc->format), fc->width, fc->height,
      fc->letterbox ? " letterbox" : "", fc->matrix, npu_matmul_get_isa (),
      err);
  fail_unless (err <= (q8 ? 2e-3 : 1e-4), "%s %ux%u [%s]: max err / rms %g",
      gst_video_format_to_string (fc->format), fc->width, fc->height,
      npu_matmul_get_isa (), err);
  gst_buffer_unmap (frame, &map);
  gst_sample_unref (sample);

  g_object_get (tok, "bytes-copied", &copied, NULL);
  fail_unless_equals_uint64 (copied, 0);

  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (tok);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  gst_caps_unref (caps);
  g_free (caps_str);
  g_free (desc);
  g_free (want);
  npu_vit_free (vit);
  if (fd_alloc)
    gst_object_unref (fd_alloc);
}

static const GstVideoFormat all_formats[] = {
  GST_VIDEO_FORMAT_NV12, GST_VIDEO_FORMAT_I420, GST_VIDEO_FORMAT_YUY2,
  GST_VIDEO_FORMAT_RGB, GST_VIDEO_FORMAT_BGR, GST_VIDEO_FORMAT_RGBA,
  GST_VIDEO_FORMAT_BGRA, GST_VIDEO_FORMAT_RGBx, GST_VIDEO_FORMAT_BGRx,
  GST_VIDEO_FORMAT_GRAY8,
};

/* On the exact (scalar) matmul path, so that the tokens are held to the
 * tight bound: the matmul path is a process-wide setting of the core,
 * which the element shares with this test. */
GST_START_TEST (test_every_format)
{
  gchar *isa = g_strdup (npu_matmul_get_isa ());
  guint i;

  fail_unless (npu_matmul_set_isa ("scalar"));
  for (i = 0; i < G_N_ELEMENTS (all_formats); i++) {
    FrameCase plain = { all_formats[i], 320, 240, 0, FALSE, FALSE, FALSE, 0 };
    /* odd sizes, odd strides, fd memory under DMABuf caps */
    FrameCase odd = { all_formats[i], 321, 241, 13, TRUE, TRUE, FALSE, 0 };

    /* Under valgrind the odd-size case alone covers the same code. */
    if (!g_getenv ("NPU_UNDER_VALGRIND"))
      check_frame (&plain);
    check_frame (&odd);
  }
  fail_unless (npu_matmul_set_isa (isa));
  g_free (isa);
}

GST_END_TEST;

/* The caps' colorimetry and the letterbox property reach the
 * preprocessing; the fast kernels this CPU has stay within their bounds. */
GST_START_TEST (test_colorimetry_letterbox_fast_kernels)
{
  gchar *isa = g_strdup (npu_matmul_get_isa ());
  FrameCase c[] = {
    {GST_VIDEO_FORMAT_NV12, 320, 240, 0, FALSE, FALSE, FALSE,
        GST_VIDEO_COLOR_MATRIX_BT709},
    {GST_VIDEO_FORMAT_YUY2, 322, 180, 6, TRUE, FALSE, TRUE, 0},
    {GST_VIDEO_FORMAT_I420, 161, 243, 3, FALSE, TRUE, TRUE,
        GST_VIDEO_COLOR_MATRIX_BT709},
    {GST_VIDEO_FORMAT_NV12, 322, 182, 2, TRUE, TRUE, FALSE,
        GST_VIDEO_COLOR_MATRIX_BT2020},
  };
  guint i;

  fail_unless (npu_matmul_set_isa ("scalar"));
  for (i = 0; i < G_N_ELEMENTS (c); i++)
    check_frame (&c[i]);
  fail_unless (npu_matmul_set_isa (isa));
  for (i = 0; i < G_N_ELEMENTS (c); i++)
    check_frame (&c[i]);
  g_free (isa);
}

GST_END_TEST;

GST_START_TEST (test_videotestsrc_writes_npu_memory)
{
  gchar *desc = g_strdup_printf ("videotestsrc num-buffers=4 ! "
      "video/x-raw,format=NV12,width=640,height=480 ! identity name=id ! "
      "npuvisiontok name=tok model=%s ! fakesink", mmproj_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  GstMessage *msg;
  guint64 processed, copied;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS);
  gst_message_unref (msg);
  g_object_get (tok, "frames-processed", &processed, "bytes-copied", &copied,
      NULL);
  fail_unless_equals_uint64 (processed, 4);
  fail_unless_equals_uint64 (copied, 0);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (tok);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

static GstPadProbeReturn
check_npu_memory (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER (info);

  /* Upstream drew the frame straight into our pool's memory. */
  fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (buf, 0)));
  (*(guint *) data)++;
  return GST_PAD_PROBE_OK;
}

GST_START_TEST (test_upstream_uses_npu_pool)
{
  gchar *desc = g_strdup_printf ("videotestsrc num-buffers=3 ! "
      "video/x-raw,format=I420,width=321,height=241 ! "
      "npuvisiontok name=tok model=%s ! fakesink", mmproj_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  GstPad *pad = gst_element_get_static_pad (tok, "sink");
  GstMessage *msg;
  guint seen = 0;

  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, check_npu_memory,
      &seen, NULL);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS);
  gst_message_unref (msg);
  fail_unless_equals_int (seen, 3);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pad);
  gst_object_unref (tok);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

/* appsrc hands frames on from its own thread: wait until npuvisiontok has
 * seen them all (its drop count says so) before the device is released. */
static void
wait_for_drops (GstElement * tok, guint64 want)
{
  gint64 end = g_get_monotonic_time () + 120 * G_USEC_PER_SEC;
  guint64 dropped = 0;

  while (g_get_monotonic_time () < end) {
    g_object_get (tok, "frames-dropped", &dropped, NULL);
    if (dropped >= want)
      return;
    g_usleep (5000);
  }
  fail_unless_equals_uint64 (dropped, want);
}

static gboolean
block_task (NpuTask * task, gpointer data, GError ** error)
{
  return npu_fence_wait (data, 30 * G_USEC_PER_SEC, error);
}

GST_START_TEST (test_drop_newest_counts)
{
  gchar *desc = g_strdup_printf ("appsrc name=src format=time "
      "caps=video/x-raw,format=GRAY8,width=64,height=64,framerate=30/1 ! "
      "npuvisiontok name=tok model=%s max-inflight=1 policy=drop-newest ! "
      "fakesink", mmproj_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  /* Keep the shared CPU device busy so the first frame stays in flight. */
  NpuQueue *q = npu_queue_new (npu_device_get_cpu (0), "blocker");
  NpuFence *gate = npu_fence_new (), *blocked;
  GstVideoInfo info, l;
  GstMessage *msg;
  guint64 processed, dropped;
  guint i;

  npu_device_unref (npu_queue_get_device (q));
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  blocked = npu_queue_submit (q, block_task, gate, NULL, NULL, 0);
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_GRAY8, 64, 64);
  for (i = 0; i < 10; i++) {
    GstBuffer *b = make_frame (&info, 0, NULL, i, &l);
    GST_BUFFER_PTS (b) = i * GST_SECOND / 30;
    fail_unless_equals_int (push (src, b), GST_FLOW_OK);
    gst_buffer_unref (b);
  }
  wait_for_drops (tok, 9);
  npu_fence_signal (gate);
  fail_unless (npu_fence_wait (blocked, -1, NULL));
  g_signal_emit_by_name (src, "end-of-stream", &i);
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS);
  gst_message_unref (msg);
  g_object_get (tok, "frames-processed", &processed, "frames-dropped",
      &dropped, NULL);
  fail_unless_equals_uint64 (processed, 1);
  fail_unless_equals_uint64 (dropped, 9);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  npu_fence_unref (gate);
  npu_fence_unref (blocked);
  npu_queue_free (q);
  gst_object_unref (src);
  gst_object_unref (tok);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_drop_oldest_cancels)
{
  gchar *desc = g_strdup_printf ("appsrc name=src format=time "
      "caps=video/x-raw,format=GRAY8,width=64,height=64,framerate=30/1 ! "
      "npuvisiontok name=tok model=%s max-inflight=2 policy=drop-oldest ! "
      "appsink name=sink sync=false max-buffers=0", mmproj_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  NpuQueue *q = npu_queue_new (npu_device_get_cpu (0), "blocker");
  NpuFence *gate = npu_fence_new (), *blocked;
  GstVideoInfo info, l;
  guint64 processed, dropped;
  guint i, n_ok = 0, n_cancelled = 0;
  GstFlowReturn flow;

  npu_device_unref (npu_queue_get_device (q));
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  /* Hold the shared CPU device: every frame stays queued, so each new one
   * past the second cancels the oldest. */
  blocked = npu_queue_submit (q, block_task, gate, NULL, NULL, 0);
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_GRAY8, 64, 64);
  for (i = 0; i < 10; i++) {
    GstBuffer *b = make_frame (&info, 0, NULL, i, &l);
    GST_BUFFER_PTS (b) = i * GST_SECOND / 30;
    fail_unless_equals_int (push (src, b), GST_FLOW_OK);
    gst_buffer_unref (b);
  }
  wait_for_drops (tok, 8);
  npu_fence_signal (gate);
  fail_unless (npu_fence_wait (blocked, -1, NULL));
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  for (i = 0; i < 10; i++) {
    GstSample *sample = NULL;
    GError *err = NULL;

    g_signal_emit_by_name (sink, "pull-sample", &sample);
    fail_unless (sample != NULL);
    if (gst_npu_buffer_wait (gst_sample_get_buffer (sample), -1, &err)) {
      n_ok++;
    } else {
      fail_unless (g_error_matches (err, NPU_FENCE_ERROR,
              NPU_FENCE_ERROR_CANCELLED), "%s", err->message);
      n_cancelled++;
      g_error_free (err);
    }
    gst_sample_unref (sample);
  }
  g_object_get (tok, "frames-processed", &processed, "frames-dropped",
      &dropped, NULL);
  /* The two newest are encoded; the eight before them were cancelled. */
  fail_unless_equals_int (n_ok, 2);
  fail_unless_equals_int (n_cancelled, 8);
  fail_unless_equals_uint64 (processed, 2);
  fail_unless_equals_uint64 (dropped, 8);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  npu_fence_unref (gate);
  npu_fence_unref (blocked);
  npu_queue_free (q);
  gst_object_unref (src);
  gst_object_unref (tok);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

static gchar *
run_expect_error (const gchar * desc)
{
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstMessage *msg;
  GError *err = NULL;
  gchar *text;

  fail_unless (pipeline != NULL);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR);
  gst_message_parse_error (msg, &err, NULL);
  text = g_strdup (err->message);
  g_error_free (err);
  gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pipeline);
  return text;
}

GST_START_TEST (test_bad_models_and_frames)
{
  gchar *desc, *msg;

  desc = g_strdup_printf ("videotestsrc num-buffers=1 ! npuvisiontok "
      "model=%s ! fakesink", text_path);
  msg = run_expect_error (desc);
  fail_unless (strstr (msg, "not a usable vision encoder"), "%s", msg);
  g_free (msg);
  g_free (desc);

  msg = run_expect_error ("videotestsrc num-buffers=1 ! npuvisiontok "
      "model=/nonexistent/mmproj.gguf ! fakesink");
  fail_unless (strstr (msg, "not found"), "%s", msg);
  g_free (msg);

  /* A frame smaller than its caps say. */
  desc = g_strdup_printf ("appsrc name=src num-buffers=1 format=time "
      "caps=video/x-raw,format=NV12,width=64,height=64,framerate=30/1 ! "
      "npuvisiontok model=%s ! fakesink", mmproj_path);
  {
    GstElement *pipeline = gst_parse_launch (desc, NULL);
    GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
    GstBuffer *b = gst_buffer_new_allocate (NULL, 100, NULL);
    GstMessage *m;
    GError *err = NULL;

    gst_element_set_state (pipeline, GST_STATE_PLAYING);
    push (src, b);
    gst_buffer_unref (b);
    m = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
        60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    fail_unless (m && GST_MESSAGE_TYPE (m) == GST_MESSAGE_ERROR);
    gst_message_parse_error (m, &err, NULL);
    fail_unless (strstr (err->message, "smaller than its caps"), "%s",
        err->message);
    g_error_free (err);
    gst_message_unref (m);
    gst_element_set_state (pipeline, GST_STATE_NULL);
    gst_object_unref (src);
    gst_object_unref (pipeline);
  }
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_state_changes_in_flight)
{
  gchar *desc = g_strdup_printf ("videotestsrc is-live=false ! "
      "video/x-raw,format=NV12,width=1280,height=720 ! "
      "npuvisiontok model=%s max-inflight=3 ! fakesink", mmproj_path);
  guint i;

  for (i = 0; i < 4; i++) {
    GstElement *pipeline = gst_parse_launch (desc, NULL);
    gst_element_set_state (pipeline, GST_STATE_PLAYING);
    g_usleep (10000 * i);
    if (i % 2)
      gst_element_seek_simple (pipeline, GST_FORMAT_TIME,
          GST_SEEK_FLAG_FLUSH, 0);
    gst_element_set_state (pipeline, GST_STATE_NULL);
    gst_object_unref (pipeline);
  }
  g_free (desc);
}

GST_END_TEST;

static GBytes *
first_tokens (const gchar * desc)
{
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  GstSample *sample = NULL;
  GstMapInfo map;
  GBytes *bytes;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  g_signal_emit_by_name (sink, "pull-sample", &sample);
  fail_unless (sample != NULL);
  fail_unless (gst_buffer_map (gst_sample_get_buffer (sample), &map,
          GST_MAP_READ));
  bytes = g_bytes_new (map.data, map.size);
  gst_buffer_unmap (gst_sample_get_buffer (sample), &map);
  gst_sample_unref (sample);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return bytes;
}

GST_START_TEST (test_weights_pad_same_tokens)
{
  /* convert="": the tensors arrive as stored, as the model property reads
   * them, so the tokens must be identical. */
  gchar *a = g_strdup_printf ("videotestsrc num-buffers=1 pattern=ball ! "
      "video/x-raw,format=NV12,width=320,height=240 ! npuvisiontok model=%s "
      "! appsink name=sink sync=false", mmproj_path);
  gchar *b = g_strdup_printf ("mxfp4weights location=%s convert=\"\" ! "
      "vt.weights videotestsrc num-buffers=1 pattern=ball ! "
      "video/x-raw,format=NV12,width=320,height=240 ! npuvisiontok name=vt ! "
      "appsink name=sink sync=false", mmproj_path);
  GBytes *ta = first_tokens (a), *tb = first_tokens (b);

  fail_unless (g_bytes_get_size (ta) > 0);
  fail_unless (g_bytes_equal (ta, tb));
  g_bytes_unref (ta);
  g_bytes_unref (tb);
  g_free (a);
  g_free (b);
}

GST_END_TEST;

static Suite *
npuvisiontok_suite (void)
{
  Suite *s = suite_create ("npuvisiontok");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_set_timeout (tc, 120);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_every_format);
  tcase_add_test (tc, test_colorimetry_letterbox_fast_kernels);
  tcase_add_test (tc, test_videotestsrc_writes_npu_memory);
  tcase_add_test (tc, test_upstream_uses_npu_pool);
  tcase_add_test (tc, test_drop_newest_counts);
  tcase_add_test (tc, test_drop_oldest_cancels);
  tcase_add_test (tc, test_bad_models_and_frames);
  tcase_add_test (tc, test_state_changes_in_flight);
  tcase_add_test (tc, test_weights_pad_same_tokens);
  return s;
}

GST_CHECK_MAIN (npuvisiontok);
