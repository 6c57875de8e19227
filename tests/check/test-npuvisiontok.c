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

#include <gst/check/gstharness.h>
#include "npucheck.h"
#include "npuencodercheck.h"
#include "npuinputwatch.h"
#include <npu/npu.h>
#include <core/models/npuvit.h>
#include <core/cpu/npuvisionprep.h>
#include <core/cpu/npumatmul.h>
#include <core/formats/npugguf.h>
#include "../reference/npurefvision.h"
#include "../reference/npurefvit.h"
#include "../npucompare.h"
#include "../tools/npumodelgen.h"
#include "../npuencbytes.h"

static gchar *tmpdir, *text_path, *mmproj_path;
/* what the test asked the generator for: the reference's sizes */
static NpuTextModelParams tp;
static NpuMmprojParams mp;

/* The mean and standard deviation the generator writes for an MLP (LLaVA)
 * projector: OpenAI CLIP's, as the real LLaVA mmproj files carry them */
static const gdouble clip_mean[3] = { 0.48145466, 0.4578275, 0.40821073 };
static const gdouble clip_std[3] = { 0.26862954, 0.26130258, 0.27577711 };

/* Tokens of one frame: a patch grid of image_size / patch on a side (no
 * merging in an MLP projector), each of the text model's width */
#define REF_N_TOKENS ((mp.image_size / mp.patch) * (mp.image_size / mp.patch))
#define REF_DIM (tp.dim)

static void
setup (void)
{
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
  /* Under valgrind (NPU_UNDER_VALGRIND) the encoder sees 112 x 112 images
   * (8 x 8 patches) instead of 224 x 224 (16 x 16): the same layers, the
   * same kernels, the preprocessing's same scaling from every frame size,
   * a quarter of the patches; the encode of each frame, and the double
   * reference beside it, is nearly all of this test's time there.  The
   * tokens are still held to the reference, by the same bounds. */
  if (g_getenv ("NPU_UNDER_VALGRIND"))
    mp.image_size = 112;
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

/* The patches of @buf at @out_width x @out_height (patch @patch, CLIP's
 * mean and std), from the double-precision reference of the
 * preprocessing */
static gdouble *
reference_patches (const GstVideoInfo * info,
    const GstVideoInfo * laid_out, GstBuffer * buf, gboolean letterbox,
    guint out_width, guint out_height, guint patch)
{
  NpuVisionPrepParams p;
  NpuRefFrame fr = { 0, };
  gdouble *chw, *patches;
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
  p.out_width = out_width;
  p.out_height = out_height;
  p.mode = letterbox ? NPU_VISION_PREP_LETTERBOX : NPU_VISION_PREP_STRETCH;
  for (i = 0; i < 3; i++) {
    p.mean[i] = clip_mean[i];
    p.std[i] = clip_std[i];
    /* docs/npuvisiontok.md: the bars are the model's mean colour */
    p.fill_rgb[i] = clip_mean[i] * 255.0;
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
  patches = npu_ref_patchify (chw, p.out_width, p.out_height, patch);
  g_free (chw);
  return patches;
}

/* What the element must give for @buf, from the double-precision
 * references of the preprocessing and of the encoder (tests/reference/),
 * which share no code with the element or the core's fast paths. */
static gdouble *
reference_tokens (const GstVideoInfo * info,
    const GstVideoInfo * laid_out, GstBuffer * buf, gboolean letterbox,
    gsize * n_floats)
{
  NpuRefLookup lk = { 0, };
  NpuGguf *gguf;
  gdouble *patches = reference_patches (info, laid_out, buf, letterbox,
      mp.image_size, mp.image_size, mp.patch), *out;

  gguf = npu_gguf_open (mmproj_path, NULL);
  fail_unless (gguf != NULL);
  lk.gguf = gguf;
  *n_floats = (gsize) REF_N_TOKENS * REF_DIM;
  out = g_new (gdouble, *n_floats);
  npu_ref_vit_encode (&lk, patches, FALSE, out);
  npu_gguf_free (gguf);
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
  gint dmabuf_caps;             /* video/x-raw(memory:DMABuf): 1 with the
                                 * format, 2 as DMA_DRM (1.24+) */
  gboolean letterbox;
  GstVideoColorMatrix matrix;   /* with full range; 0: set_format()'s */
  gboolean split;               /* two memories, split inside plane 0 */
} FrameCase;

/* Bytes of plane @p from its first byte to its last. */
static gsize
plane_extent (const GstVideoInfo * laid_out, guint p)
{
  const GstVideoFormatInfo *f = laid_out->finfo;

  return (gsize) laid_out->stride[p] * (GST_VIDEO_FORMAT_INFO_SCALE_HEIGHT (f,
          p, GST_VIDEO_INFO_HEIGHT (laid_out)) - 1) +
      GST_VIDEO_FORMAT_INFO_SCALE_WIDTH (f, p,
      GST_VIDEO_INFO_WIDTH (laid_out)) * GST_VIDEO_FORMAT_INFO_PSTRIDE (f, p);
}

/* The same bytes as @buf, as two memories (shares of its one memory) split
 * in the middle of plane 0's rows. */
static GstBuffer *
split_in_two (GstBuffer * buf, const GstVideoInfo * laid_out)
{
  GstMemory *mem = gst_buffer_peek_memory (buf, 0);
  gsize cut = laid_out->offset[0] + plane_extent (laid_out, 0) / 2;
  GstBuffer *two = gst_buffer_new ();

  fail_unless_equals_int (gst_buffer_n_memory (buf), 1);
  gst_buffer_append_memory (two, gst_memory_share (mem, 0, cut));
  gst_buffer_append_memory (two, gst_memory_share (mem, cut,
          mem->size - cut));
  /* the video meta is tagged "memory": not copied to new memories */
  gst_buffer_add_video_meta_full (two, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_INFO_FORMAT (laid_out), GST_VIDEO_INFO_WIDTH (laid_out),
      GST_VIDEO_INFO_HEIGHT (laid_out), GST_VIDEO_INFO_N_PLANES (laid_out),
      (gsize *) laid_out->offset, (gint *) laid_out->stride);
  gst_buffer_unref (buf);
  return two;
}
/* The drm-format GStreamer 1.24+ writes for a linear frame of each format:
 * DRM fourccs as drm_fourcc.h names them (GStreamer's byte-order names are
 * DRM's word-order names reversed: RGB = BG24, RGBA = AB24). */
#if GST_CHECK_VERSION(1, 24, 0)
static const gchar *
drm_format_of (GstVideoFormat f)
{
  switch (f) {
    case GST_VIDEO_FORMAT_NV12:
      return "NV12";
    case GST_VIDEO_FORMAT_I420:
      return "YU12";
    case GST_VIDEO_FORMAT_YUY2:
      return "YUYV";
    case GST_VIDEO_FORMAT_RGB:
      return "BG24";
    case GST_VIDEO_FORMAT_BGR:
      return "RG24";
    case GST_VIDEO_FORMAT_RGBA:
      return "AB24";
    case GST_VIDEO_FORMAT_BGRA:
      return "AR24";
    case GST_VIDEO_FORMAT_RGBx:
      return "XB24";
    case GST_VIDEO_FORMAT_BGRx:
      return "XR24";
    case GST_VIDEO_FORMAT_GRAY8:
      return "R8  ";
    default:
      return NULL;
  }
}
#endif

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
  gboolean q8 = g_strcmp0 (npu_matmul_get_isa (), "scalar") != 0;
  GstVideoInfo info, laid_out;
  GstCaps *caps;
  gchar *desc;
  GstElement *pipeline, *src, *sink, *tok;
  GstBuffer *frame, *pushed;
  GstSample *sample = NULL;
  GstMapInfo map;
  gdouble *want, err;
  gsize n;
  guint64 copied;
  GstNpuTokensMeta *tmeta;
  NpuInputWatch *watch;

  gst_video_info_set_format (&info, fc->format, fc->width, fc->height);
  if (fc->matrix) {
    info.colorimetry.matrix = fc->matrix;
    info.colorimetry.range = GST_VIDEO_COLOR_RANGE_0_255;
  }
  caps = gst_video_info_to_caps (&info);
  if (fc->dmabuf_caps)
    gst_caps_set_features (caps, 0,
        gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_DMABUF, NULL));
#if GST_CHECK_VERSION(1, 24, 0)
  if (fc->dmabuf_caps == 2)
    gst_caps_set_simple (caps, "format", G_TYPE_STRING, "DMA_DRM",
        "drm-format", G_TYPE_STRING, drm_format_of (fc->format), NULL);
#endif
  /* The caps are set on appsrc, not written into the description: a
   * drm-format such as "R8  " would need quoting inside quotes. */
  desc = g_strdup_printf ("appsrc name=src format=time ! "
      "npuvisiontok name=tok model=%s letterbox=%s ! "
      "appsink name=sink sync=false", mmproj_path,
      fc->letterbox ? "true" : "false");
  pipeline = gst_parse_launch (desc, NULL);
  fail_unless (pipeline != NULL);
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  g_object_set (src, "caps", caps, NULL);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  frame = make_frame (&info, fc->extra, fd_alloc, fc->format, &laid_out);
  want = reference_tokens (&info, &laid_out, frame, fc->letterbox, &n);
  /* after the reference: gst_buffer_map() of a writable buffer would merge
   * its memories back into one */
  if (fc->split)
    frame = split_in_two (frame, &laid_out);
  GST_BUFFER_PTS (frame) = 5 * GST_SECOND;
  /* Where the preprocessing reads must be the memory pushed here. */
  watch = npu_input_watch_start ();
  npu_input_watch_add_buffer (watch, frame);
  fail_unless_equals_int (push (src, frame), GST_FLOW_OK);
  g_signal_emit_by_name (sink, "pull-sample", &sample);
  fail_unless (sample != NULL);

  /* kept until the reads are checked, so that its memory stays where it
   * was noted */
  pushed = frame;
  frame = gst_sample_get_buffer (sample);
  tmeta = gst_buffer_get_npu_tokens_meta (frame);
  fail_unless (tmeta != NULL);
  fail_unless_equals_int (tmeta->n_tokens, REF_N_TOKENS);
  fail_unless_equals_int (tmeta->dim, REF_DIM);
  fail_unless_equals_uint64 (tmeta->source_pts, 5 * GST_SECOND);
  fail_unless (gst_buffer_get_npu_fence_meta (frame) != NULL);
  fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (frame, 0)));
  /* Maps wait for the encoder's fence. */
  fail_unless (gst_buffer_map (frame, &map, GST_MAP_READ));
  fail_unless_equals_uint64 (map.size, n * sizeof (gfloat));
  g_object_get (tok, "bytes-copied", &copied, NULL);
  if (fc->split) {
    /* Plane 0 straddles the memories: gathered into a copy, counted, and
     * read there; the other planes in place. */
    fail_unless_equals_uint64 (copied, plane_extent (&laid_out, 0));
    fail_unless_equals_int (npu_input_watch_n_reads (watch),
        GST_VIDEO_INFO_N_PLANES (&info));
    fail_unless_equals_int (npu_input_watch_n_outside (watch, NULL), 1);
  } else {
    fail_unless_equals_uint64 (copied, 0);
    npu_input_watch_assert_in_place (watch, GST_VIDEO_INFO_N_PLANES (&info));
  }
  npu_input_watch_stop (watch);
  gst_buffer_unref (pushed);
  fail_unless (npu_ref_error_over_rms ((const gfloat *) map.data, want, n,
          &err), "tokens not finite, or an all-zero reference");
  GST_INFO ("%s %ux%u%s matrix %d [%s]: max err / rms %.2e",
      gst_video_format_to_string (fc->format), fc->width, fc->height,
      fc->letterbox ? " letterbox" : "", fc->matrix, npu_matmul_get_isa (),
      err);
  fail_unless (npu_within (err, q8 ? 2e-3 : 1e-4),
      "%s %ux%u [%s]: max err / rms %g",
      gst_video_format_to_string (fc->format), fc->width, fc->height,
      npu_matmul_get_isa (), err);
  gst_buffer_unmap (frame, &map);
  gst_sample_unref (sample);

  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (tok);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  gst_caps_unref (caps);
  g_free (desc);
  g_free (want);
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
    FrameCase plain = { all_formats[i], 320, 240, 0, FALSE, 0, FALSE, 0 };
    /* odd sizes, odd strides, fd memory under DMABuf caps */
    FrameCase odd = { all_formats[i], 321, 241, 13, TRUE, 1, FALSE, 0 };

    /* Under valgrind the odd-size case alone covers the same code, and
     * of the packed RGB formats one of three bytes (RGB) and one of four
     * (BGRx): the core reads all six with one loop whose pixel size and
     * byte offsets are the format's only difference, and the element
     * hands every format on the same way (one plane). */
    if (g_getenv ("NPU_UNDER_VALGRIND")) {
      if (all_formats[i] == GST_VIDEO_FORMAT_BGR
          || all_formats[i] == GST_VIDEO_FORMAT_RGBA
          || all_formats[i] == GST_VIDEO_FORMAT_BGRA
          || all_formats[i] == GST_VIDEO_FORMAT_RGBx)
        continue;
    } else {
      check_frame (&plain);
    }
    check_frame (&odd);
  }
  fail_unless (npu_matmul_set_isa (isa));
  g_free (isa);
}

GST_END_TEST;

#if GST_CHECK_VERSION(1, 24, 0)
/* GStreamer 1.24+: the sink template offers every format as DMA_DRM with
 * its linear DRM fourcc, after the classic dma-buf caps. */
GST_START_TEST (test_dma_drm_template)
{
  GstElementFactory *f = gst_element_factory_find ("npuvisiontok");
  GstCaps *templ = NULL, *want;
  const GList *l;
  GString *str = g_string_new ("video/x-raw(memory:DMABuf), "
      "format=(string)DMA_DRM, drm-format=(string){ ");
  guint i;

  fail_unless (f != NULL);
  for (l = gst_element_factory_get_static_pad_templates (f); l; l = l->next) {
    GstStaticPadTemplate *t = l->data;

    if (g_strcmp0 (t->name_template, "sink") == 0)
      templ = gst_static_caps_get (&t->static_caps);
  }
  fail_unless (templ != NULL);
  for (i = 0; i < G_N_ELEMENTS (all_formats); i++)
    g_string_append_printf (str, "%s\"%s\"", i ? ", " : "",
        drm_format_of (all_formats[i]));
  g_string_append (str, " }, width=(int)[ 1, 2147483647 ], "
      "height=(int)[ 1, 2147483647 ], framerate=(fraction)[ 0/1, 2147483647/1 ]");
  want = gst_caps_from_string (str->str);
  fail_unless (want != NULL, "%s", str->str);
  {
    gchar *t = gst_caps_to_string (templ);

    fail_unless (gst_caps_is_subset (want, templ), "%s\nnot in\n%s",
        str->str, t);
    g_free (t);
  }
  /* each fourcc once, in its own structure: nothing but linear */
  for (i = 0; i < gst_caps_get_size (templ); i++) {
    const gchar *fmt = gst_structure_get_string (gst_caps_get_structure
        (templ, i), "format");

    if (g_strcmp0 (fmt, "DMA_DRM") == 0)
      fail_unless (gst_structure_is_equal (gst_caps_get_structure (templ, i),
              gst_caps_get_structure (want, 0)), "structure %u", i);
  }
  gst_caps_unref (want);
  gst_caps_unref (templ);
  g_string_free (str, TRUE);
  gst_object_unref (f);
}

GST_END_TEST;

/* Frames under DMA_DRM caps give the reference's tokens, as the classic
 * form does, with odd strides taken from the GstVideoMeta. */
GST_START_TEST (test_dma_drm_every_format)
{
  gchar *isa = g_strdup (npu_matmul_get_isa ());
  guint i;

  fail_unless (npu_matmul_set_isa ("scalar"));
  for (i = 0; i < G_N_ELEMENTS (all_formats); i++) {
    FrameCase drm = { all_formats[i], 321, 241, 13, TRUE, 2, FALSE, 0 };

    /* Under valgrind, NV12 and GRAY8 (the one fourcc outside GStreamer's
     * map) cover the same code. */
    if (g_getenv ("NPU_UNDER_VALGRIND") && all_formats[i] !=
        GST_VIDEO_FORMAT_NV12 && all_formats[i] != GST_VIDEO_FORMAT_GRAY8)
      continue;
    check_frame (&drm);
  }
  fail_unless (npu_matmul_set_isa (isa));
  g_free (isa);
}

GST_END_TEST;

/* A tiled or compressed modifier, or a fourcc the element does not read, is
 * refused when the caps arrive, with a message that says why. */
GST_START_TEST (test_dma_drm_refusals)
{
  static const struct
  {
    const gchar *drm_format;
    const gchar *says[3];
  } cases[] = {
    /* I915_FORMAT_MOD_X_TILED */
    {"NV12:0x0100000000000001", {"Unsupported DRM modifier "
                "0x0100000000000001", "tiled or compressed", "linear"}},
    /* AFBC 16x16, sparse (ARM) */
    {"AB24:0x0800000000000011", {"0x0800000000000011", "tiled or compressed",
            NULL}},
    {"NV21", {"Unsupported DRM format NV21", "NV12, YU12, YUYV", "R8"}},
  };
  GstPad *pad;
  GstElement *tok;
  guint i, j;

  tok = gst_element_factory_make ("npuvisiontok", NULL);
  pad = gst_element_get_static_pad (tok, "sink");
  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    gchar *desc, *msg, *caps_str;
    GstCaps *caps;

    caps_str = g_strdup_printf ("video/x-raw(memory:DMABuf),format=DMA_DRM,"
        "drm-format=%s,width=64,height=64,framerate=30/1",
        cases[i].drm_format);
    caps = gst_caps_from_string (caps_str);
    fail_unless (caps != NULL);
    fail_if (gst_pad_query_accept_caps (pad, caps), "%s", caps_str);
    gst_caps_unref (caps);

    desc = g_strdup_printf ("appsrc name=src format=time caps=\"%s\" ! "
        "npuvisiontok model=%s ! fakesink", caps_str, mmproj_path);
    {
      GstElement *pipeline = gst_parse_launch (desc, NULL);
      GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
      GstBuffer *b = gst_buffer_new_allocate (NULL, 64 * 64 * 4, NULL);

      gst_element_set_state (pipeline, GST_STATE_PLAYING);
      push (src, b);
      gst_buffer_unref (b);
      msg = npu_check_wait_error (pipeline, 60 * GST_SECOND);
      gst_element_set_state (pipeline, GST_STATE_NULL);
      gst_object_unref (src);
      gst_object_unref (pipeline);
    }
    for (j = 0; j < G_N_ELEMENTS (cases[i].says) && cases[i].says[j]; j++)
      fail_unless (strstr (msg, cases[i].says[j]) != NULL, "%s: %s",
          cases[i].drm_format, msg);
    g_free (msg);
    g_free (desc);
    g_free (caps_str);
  }

  /* the linear form of the same layout is accepted */
  {
    GstCaps *caps = gst_caps_from_string ("video/x-raw(memory:DMABuf),"
        "format=DMA_DRM,drm-format=NV12,width=64,height=64,framerate=30/1");

    fail_unless (gst_pad_query_accept_caps (pad, caps));
    gst_caps_unref (caps);
  }
  gst_object_unref (pad);
  gst_object_unref (tok);
}

GST_END_TEST;

/* The pool proposed under DMA_DRM caps (v4l2src io-mode=dmabuf-import
 * configures it with those caps) gives NPU memory laid out as the frame:
 * NV12 planes with the video meta, and accepts the caps back in its config. */
GST_START_TEST (test_dma_drm_pool)
{
  GstElement *tok = gst_element_factory_make ("npuvisiontok", NULL);
  GstPad *pad = gst_element_get_static_pad (tok, "sink");
  GstCaps *caps = gst_caps_from_string ("video/x-raw(memory:DMABuf),"
      "format=DMA_DRM,drm-format=NV12,width=322,height=242,framerate=30/1");
  GstQuery *query = gst_query_new_allocation (caps, TRUE);
  GstBufferPool *pool = NULL;
  GstStructure *config;
  GstBuffer *buf = NULL;
  GstVideoMeta *vmeta;
  guint size, min, max;

  g_object_set (tok, "model", mmproj_path, NULL);
  /* ALLOCATION is serialized: the pad must be active (not flushing) */
  fail_unless (gst_pad_set_active (pad, TRUE));
  fail_unless (gst_pad_query (pad, query));
  fail_unless (gst_query_get_n_allocation_pools (query) >= 1);
  gst_query_parse_nth_allocation_pool (query, 0, &pool, &size, &min, &max);
  fail_unless (pool != NULL);
  /* 322x242 NV12: a 322-byte Y plane of 242 rows and a 322-byte UV plane
   * of 121 rows at least */
  fail_unless (size >= 322 * 242 + 322 * 121, "%u", size);
  fail_unless (gst_query_find_allocation_meta (query, GST_VIDEO_META_API_TYPE,
          NULL));

  /* as v4l2src does: its own caps back into the config */
  config = gst_buffer_pool_get_config (pool);
  gst_buffer_pool_config_set_params (config, caps, size, min, max);
  gst_buffer_pool_config_add_option (config,
      GST_BUFFER_POOL_OPTION_VIDEO_META);
  fail_unless (gst_buffer_pool_set_config (pool, config));
  fail_unless (gst_buffer_pool_set_active (pool, TRUE));
  fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf, NULL),
      GST_FLOW_OK);
  fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (buf, 0)));
  vmeta = gst_buffer_get_video_meta (buf);
  fail_unless (vmeta != NULL);
  fail_unless_equals_int (vmeta->format, GST_VIDEO_FORMAT_NV12);
  fail_unless_equals_int (vmeta->n_planes, 2);
  fail_unless_equals_int (vmeta->width, 322);
  fail_unless_equals_int (vmeta->height, 242);
  fail_unless (vmeta->stride[0] >= 322 && vmeta->stride[1] >= 322);
  fail_unless (vmeta->offset[1] >= (gsize) vmeta->stride[0] * 242);
  fail_unless (gst_buffer_get_size (buf) >= vmeta->offset[1] +
      (gsize) vmeta->stride[1] * 121);
  gst_buffer_unref (buf);
  fail_unless (gst_buffer_pool_set_active (pool, FALSE));

  /* a tiled modifier has no plane layout: no pool, no crash */
  {
    GstCaps *tiled = gst_caps_from_string ("video/x-raw(memory:DMABuf),"
        "format=DMA_DRM,drm-format=NV12:0x0100000000000001,width=322,"
        "height=242,framerate=30/1");
    GstQuery *q = gst_query_new_allocation (tiled, TRUE);

    gst_pad_query (pad, q);
    fail_unless_equals_int (gst_query_get_n_allocation_pools (q), 0);
    gst_query_unref (q);
    gst_caps_unref (tiled);
  }

  fail_unless (gst_pad_set_active (pad, FALSE));
  gst_object_unref (pool);
  gst_query_unref (query);
  gst_caps_unref (caps);
  gst_object_unref (pad);
  gst_object_unref (tok);
}

GST_END_TEST;
#endif

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
  /* Under valgrind each frame runs once: the even ones on the scalar
   * matmul path, the odd ones on the fast kernels (AVX2 there, valgrind
   * has no AVX-512), so that each path still meets a stretched and a
   * letterboxed frame; the memory and the preprocessing do not
   * depend on the matmul path, so the second run of a frame reads and
   * writes nothing new. */
  gboolean once = g_getenv ("NPU_UNDER_VALGRIND") != NULL;
  guint i;

  fail_unless (npu_matmul_set_isa ("scalar"));
  for (i = 0; i < G_N_ELEMENTS (c); i++)
    if (!once || i % 2 == 0)
      check_frame (&c[i]);
  fail_unless (npu_matmul_set_isa (isa));
  for (i = 0; i < G_N_ELEMENTS (c); i++)
    if (!once || i % 2 == 1)
      check_frame (&c[i]);
  g_free (isa);
}

GST_END_TEST;

/* A plane that starts in one memory and ends in the next cannot be read in
 * place: the element gathers it, reads the copy, counts its bytes in
 * bytes-copied, and still gives the reference's tokens. */
GST_START_TEST (test_plane_across_memories_copied)
{
  gchar *isa = g_strdup (npu_matmul_get_isa ());
  FrameCase c[] = {
    {GST_VIDEO_FORMAT_NV12, 320, 240, 0, FALSE, FALSE, FALSE, 0, TRUE},
    {GST_VIDEO_FORMAT_RGBA, 161, 83, 5, FALSE, FALSE, FALSE, 0, TRUE},
  };
  guint i;

  fail_unless (npu_matmul_set_isa ("scalar"));
  for (i = 0; i < G_N_ELEMENTS (c); i++)
    check_frame (&c[i]);
  fail_unless (npu_matmul_set_isa (isa));
  g_free (isa);
}

GST_END_TEST;

/* The minimum latency answered by @tok's @pad_name pad (src: ours; sink:
 * upstream's, through the peer). */
static GstClockTime
query_latency (GstElement * tok, const gchar * pad_name)
{
  GstPad *pad = gst_element_get_static_pad (tok, pad_name);
  GstQuery *q = gst_query_new_latency ();
  GstClockTime min, max;
  gboolean live;

  fail_unless (g_str_equal (pad_name, "src") ? gst_pad_query (pad, q) :
      gst_pad_peer_query (pad, q));
  gst_query_parse_latency (q, &live, &min, &max);
  gst_query_unref (q);
  gst_object_unref (pad);
  return min;
}

/* The npuvisiontok-stats message after each frame: the frame's bytes its
 * preprocess reads (NV12: w h 3 / 2), the file's weights once a frame
 * (tests/npuencbytes.h), its tokens, the sums and the estimate at the
 * pj-per-bit asked for */
GST_START_TEST (test_stats_bytes)
{
  gchar *desc = g_strdup_printf ("videotestsrc num-buffers=3 ! "
      "video/x-raw,format=NV12,width=320,height=240 ! "
      "npuvisiontok model=%s pj-per-bit=3 ! fakesink", mmproj_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GPtrArray *stats = npu_check_collect_stats (pipeline, "npuvisiontok-stats");
  guint64 weights = npu_ref_encoder_weight_bytes (mmproj_path, "", 0);
  guint i;

  fail_unless_equals_int (stats->len, 3);
  npu_check_stats_sums (stats, 3.0);
  for (i = 0; i < stats->len; i++) {
    const GstStructure *s = g_ptr_array_index (stats, i);

    fail_unless_equals_uint64 (npu_stats_u64 (s, "bytes-frame-read"),
        320 * 240 * 3 / 2);
    fail_unless_equals_uint64 (npu_stats_u64 (s, "bytes-frame-written"), 0);
    fail_unless_equals_uint64 (npu_stats_u64 (s, "bytes-weights-read"),
        weights);
    fail_unless_equals_uint64 (npu_stats_u64 (s, "bytes-tokens-written"),
        (guint64) REF_N_TOKENS * REF_DIM * 4);
    fail_unless_equals_uint64 (npu_stats_u64 (s, "bytes-kv-cache-read"), 0);
    fail_unless_equals_uint64 (npu_stats_u64 (s, "pts"),
        gst_util_uint64_scale (i, GST_SECOND, 30));
  }
  g_ptr_array_unref (stats);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_videotestsrc_writes_npu_memory)
{
  gchar *desc = g_strdup_printf ("videotestsrc num-buffers=4 ! "
      "video/x-raw,format=NV12,width=640,height=480 ! identity name=id ! "
      "npuvisiontok name=tok model=%s ! fakesink", mmproj_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  guint64 processed, copied;
  GstClockTime up, lat1, lat3;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  npu_check_wait_eos (pipeline, 60 * GST_SECOND);
  g_object_get (tok, "frames-processed", &processed, "bytes-copied", &copied,
      NULL);
  fail_unless_equals_uint64 (processed, 4);
  fail_unless_equals_uint64 (copied, 0);

  /* The latency query adds max-inflight times the last encode time: with
   * no frame coming any more (EOS), 3 frames in flight add 3 times what
   * 1 adds to upstream's latency. */
  up = query_latency (tok, "sink");
  g_object_set (tok, "max-inflight", 1, NULL);
  lat1 = query_latency (tok, "src");
  g_object_set (tok, "max-inflight", 3, NULL);
  lat3 = query_latency (tok, "src");
  fail_unless (lat1 > up);
  fail_unless_equals_uint64 (lat3 - up, 3 * (lat1 - up));
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (tok);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

typedef struct
{
  guint seen;
  NpuInputWatch *watch;
} PoolProbe;

static GstPadProbeReturn
check_npu_memory (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER (info);
  PoolProbe *probe = data;

  /* Upstream drew the frame straight into our pool's memory... */
  fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (buf, 0)));
  /* ...and that memory is where the preprocessing must read. */
  npu_input_watch_add_buffer (probe->watch, buf);
  probe->seen++;
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
  PoolProbe probe = { 0, npu_input_watch_start () };

  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, check_npu_memory,
      &probe, NULL);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  npu_check_wait_eos (pipeline, 60 * GST_SECOND);
  fail_unless_equals_int (probe.seen, 3);
  /* I420: three planes a frame */
  npu_input_watch_assert_in_place (probe.watch, 3 * 3);
  npu_input_watch_stop (probe.watch);
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

/* policy=block back-pressures upstream once max-inflight frames are being
 * encoded; a flush releases the blocked push (FLUSHING) and cancels the
 * frames in flight (their token buffers, already pushed, fail as
 * cancelled); after the flush the element encodes again. */
GST_START_TEST (test_block_and_flush_in_flight)
{
  GstElement *tok = gst_element_factory_make ("npuvisiontok", NULL);
  GstHarness *h;
  NpuDeviceHold *hold = npu_device_hold_new ();
  GstVideoInfo info, l;
  GstBuffer *out[2], *b;
  NpuPushThread *bp;
  GError *err = NULL;
  guint64 processed;
  guint i;

  g_object_set (tok, "model", mmproj_path, "max-inflight", 2, NULL);
  gst_util_set_object_arg (G_OBJECT (tok), "policy", "block");
  h = gst_harness_new_with_element (tok, "sink", "src");
  gst_harness_set_src_caps_str (h,
      "video/x-raw,format=GRAY8,width=64,height=64,framerate=30/1");
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_GRAY8, 64, 64);
  /* the shared CPU device is held: frames stay in flight */
  npu_device_hold (hold);
  for (i = 0; i < 2; i++) {
    b = make_frame (&info, 0, NULL, i, &l);
    fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
    out[i] = gst_harness_pull (h);
    fail_unless (out[i] != NULL);
  }
  bp = npu_push_thread_start_buffer (h, make_frame (&info, 0, NULL, 2, &l));
  /* The third waits: nothing can let it through while the device is
   * held, so "still waiting after 300 ms" cannot be a timing accident. */
  g_usleep (300 * 1000);
  fail_if (npu_push_thread_is_done (bp));

  fail_unless (gst_harness_push_event (h, gst_event_new_flush_start ()));
  fail_unless_equals_int (npu_push_thread_finish (bp), GST_FLOW_FLUSHING);
  for (i = 0; i < 2; i++) {
    fail_if (gst_npu_buffer_wait (out[i], 10 * G_USEC_PER_SEC, &err));
    fail_unless (g_error_matches (err, NPU_FENCE_ERROR,
            NPU_FENCE_ERROR_CANCELLED), "%s", err->message);
    g_clear_error (&err);
    gst_buffer_unref (out[i]);
  }
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  npu_device_release (hold);

  /* encoding again after the flush */
  gst_harness_set_src_caps_str (h,
      "video/x-raw,format=GRAY8,width=64,height=64,framerate=30/1");
  b = make_frame (&info, 0, NULL, 3, &l);
  fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
  out[0] = gst_harness_pull (h);
  fail_unless (gst_npu_buffer_wait (out[0], 30 * G_USEC_PER_SEC, &err), "%s",
      err ? err->message : "");
  gst_buffer_unref (out[0]);
  g_object_get (tok, "frames-processed", &processed, NULL);
  fail_unless_equals_uint64 (processed, 1);

  gst_harness_teardown (h);
  gst_object_unref (tok);
  npu_device_hold_free (hold);
}

GST_END_TEST;

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
  NpuDeviceHold *hold = npu_device_hold_new ();
  GstVideoInfo info, l;
  GstMessage *msg;
  guint64 processed, dropped;
  guint i, n_qos = 0;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  npu_device_hold (hold);
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_GRAY8, 64, 64);
  for (i = 0; i < 10; i++) {
    GstBuffer *b = make_frame (&info, 0, NULL, i, &l);
    GST_BUFFER_PTS (b) = i * GST_SECOND / 30;
    fail_unless_equals_int (push (src, b), GST_FLOW_OK);
    gst_buffer_unref (b);
  }
  wait_for_drops (tok, 9);
  npu_device_release (hold);
  g_signal_emit_by_name (src, "end-of-stream", &i);
  /* every drop is posted as QoS, with the frame's PTS and the counts */
  while ((msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
              60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR |
              GST_MESSAGE_QOS)) && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_QOS) {
    GstFormat fmt;
    guint64 qprocessed, qdropped, ts;

    gst_message_parse_qos (msg, NULL, NULL, NULL, &ts, NULL);
    gst_message_parse_qos_stats (msg, &fmt, &qprocessed, &qdropped);
    n_qos++;
    fail_unless_equals_int (fmt, GST_FORMAT_BUFFERS);
    fail_unless_equals_uint64 (qdropped, n_qos);
    /* frame 0 is the one in flight; drops are frames 1..9 */
    fail_unless_equals_uint64 (ts, n_qos * GST_SECOND / 30);
    gst_message_unref (msg);
  }
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS);
  gst_message_unref (msg);
  fail_unless_equals_int (n_qos, 9);
  g_object_get (tok, "frames-processed", &processed, "frames-dropped",
      &dropped, NULL);
  fail_unless_equals_uint64 (processed, 1);
  fail_unless_equals_uint64 (dropped, 9);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  npu_device_hold_free (hold);
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
  NpuDeviceHold *hold = npu_device_hold_new ();
  GstVideoInfo info, l;
  guint64 processed, dropped;
  guint i, n_ok = 0, n_cancelled = 0;
  GstFlowReturn flow;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  /* Hold the shared CPU device: every frame stays queued, so each new one
   * past the second cancels the oldest. */
  npu_device_hold (hold);
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_GRAY8, 64, 64);
  for (i = 0; i < 10; i++) {
    GstBuffer *b = make_frame (&info, 0, NULL, i, &l);
    GST_BUFFER_PTS (b) = i * GST_SECOND / 30;
    fail_unless_equals_int (push (src, b), GST_FLOW_OK);
    gst_buffer_unref (b);
  }
  wait_for_drops (tok, 8);
  npu_device_release (hold);
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
  npu_device_hold_free (hold);
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
  gchar *text;

  fail_unless (pipeline != NULL);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  text = npu_check_wait_error (pipeline, 60 * GST_SECOND);
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

    gst_element_set_state (pipeline, GST_STATE_PLAYING);
    push (src, b);
    gst_buffer_unref (b);
    msg = npu_check_wait_error (pipeline, 60 * GST_SECOND);
    fail_unless (strstr (msg, "smaller than its caps"), "%s", msg);
    g_free (msg);
    gst_element_set_state (pipeline, GST_STATE_NULL);
    gst_object_unref (src);
    gst_object_unref (pipeline);
  }
  g_free (desc);
}

GST_END_TEST;

/* Caps the element refuses are sent again before every buffer (sticky
 * events): the refusal says why once, on the bus, and each push after
 * fails as not negotiated without posting the same error again */
GST_START_TEST (test_refused_caps_posted_once)
{
  GstElement *tok = gst_element_factory_make ("npuvisiontok", NULL);
  GstBus *bus = gst_bus_new ();
  GstHarness *h;
  GstMessage *msg;
  GError *err = NULL;
  guint i, n_errors = 0;

  g_object_set (tok, "model", mmproj_path, NULL);
  gst_element_set_bus (tok, bus);
  h = gst_harness_new_with_element (tok, "sink", "src");
  gst_harness_set_src_caps_str (h,
      "video/x-raw,format=GRAY8,width=40000,height=2,framerate=30/1");
  for (i = 0; i < 3; i++)
    fail_unless_equals_int (gst_harness_push (h,
            gst_buffer_new_allocate (NULL, 80000, NULL)),
        GST_FLOW_NOT_NEGOTIATED);
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR))) {
    if (n_errors++ == 0) {
      gst_message_parse_error (msg, &err, NULL);
      fail_unless (strstr (err->message, "40000x2"), "%s", err->message);
      g_clear_error (&err);
    }
    gst_message_unref (msg);
  }
  fail_unless_equals_int (n_errors, 1);
  gst_harness_teardown (h);
  gst_element_set_bus (tok, NULL);
  gst_object_unref (bus);
  gst_object_unref (tok);
}

GST_END_TEST;

/* Seeks and shutdowns while frames are being encoded: each state change
 * succeeds (none hangs: CK's timeout would fail the test), and the flushing
 * seek is accepted with frames in flight. */
GST_START_TEST (test_state_changes_in_flight)
{
  gchar *desc = g_strdup_printf ("videotestsrc is-live=false ! "
      "video/x-raw,format=NV12,width=1280,height=720 ! "
      "npuvisiontok name=tok model=%s max-inflight=3 ! fakesink",
      mmproj_path);
  /* Under valgrind, the first two rounds: a stop, and a flushing seek
   * then a stop, with frames in flight; the later rounds only wait longer
   * before the same two. */
  guint i, n = g_getenv ("NPU_UNDER_VALGRIND") ? 2 : 4;

  for (i = 0; i < n; i++) {
    GstElement *pipeline = gst_parse_launch (desc, NULL);
    GstElement *tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
    gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
    guint64 processed = 0;

    fail_unless (gst_element_set_state (pipeline, GST_STATE_PLAYING) !=
        GST_STATE_CHANGE_FAILURE);
    /* frames are flowing: at least one encoded, more in flight */
    while (processed == 0 && g_get_monotonic_time () < end) {
      g_usleep (2000);
      g_object_get (tok, "frames-processed", &processed, NULL);
    }
    fail_unless (processed > 0, "no frame encoded in 60 s");
    g_usleep (5000 * i);
    if (i % 2)
      fail_unless (gst_element_seek_simple (pipeline, GST_FORMAT_TIME,
              GST_SEEK_FLAG_FLUSH, 0));
    fail_unless_equals_int (gst_element_set_state (pipeline,
            GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
    gst_object_unref (tok);
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
  /* bounded: a pipeline that fails (weights the element refuses) posts an
   * error and never a sample */
  g_signal_emit_by_name (sink, "try-pull-sample", 60 * GST_SECOND, &sample);
  if (!sample) {
    GstMessage *msg = gst_bus_pop_filtered (GST_ELEMENT_BUS (pipeline),
        GST_MESSAGE_ERROR);
    GError *err = NULL;

    if (msg)
      gst_message_parse_error (msg, &err, NULL);
    fail ("no tokens from \"%s\": %s", desc, err ? err->message :
        "no error either");
  }
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
  /* The documented pipeline, mxfp4weights' default convert="*": the
   * blocks' and projector's F32 matrices arrive in MXFP4, a change of the
   * model the user asked for (the model property reads them as stored);
   * the position table and the patch kernel stay as stored (the encoder
   * refuses them in MXFP4).  Other tokens. */
  gchar *c = g_strdup_printf ("mxfp4weights location=%s ! "
      "vt.weights videotestsrc num-buffers=1 pattern=ball ! "
      "video/x-raw,format=NV12,width=320,height=240 ! npuvisiontok name=vt ! "
      "appsink name=sink sync=false", mmproj_path);
  GBytes *ta = first_tokens (a), *tb = first_tokens (b), *tc = first_tokens (c);

  fail_unless (g_bytes_get_size (ta) > 0);
  fail_unless (g_bytes_equal (ta, tb));
  fail_unless_equals_int (g_bytes_get_size (tc), g_bytes_get_size (ta));
  fail_unless (!g_bytes_equal (ta, tc));
  g_bytes_unref (ta);
  g_bytes_unref (tb);
  g_bytes_unref (tc);
  g_free (a);
  g_free (b);
  g_free (c);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Caps changes while frames are in flight
 */
typedef struct
{
  GstVideoFormat format;
  guint width, height;
  gboolean fd_memory;           /* fd memory under memory:DMABuf caps */
} CapsStep;

/* size, format and memory change at every step */
static const CapsStep caps_steps[] = {
  {GST_VIDEO_FORMAT_GRAY8, 64, 64, FALSE},
  {GST_VIDEO_FORMAT_NV12, 96, 72, FALSE},
  {GST_VIDEO_FORMAT_RGBA, 40, 30, TRUE},
  {GST_VIDEO_FORMAT_I420, 128, 96, FALSE},
};

#define FRAMES_PER_STEP 2

static GstCaps *
step_caps (const CapsStep * st, GstVideoInfo * info)
{
  GstCaps *caps;

  gst_video_info_set_format (info, st->format, st->width, st->height);
  caps = gst_video_info_to_caps (info);
  if (st->fd_memory)
    gst_caps_set_features (caps, 0,
        gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_DMABUF, NULL));
  return caps;
}

static GstBuffer *
step_frame (const CapsStep * st, GstAllocator * fd_alloc, guint seed)
{
  GstVideoInfo info, l;
  GstBuffer *buf;

  gst_video_info_set_format (&info, st->format, st->width, st->height);
  buf = make_frame (&info, 3, st->fd_memory ? fd_alloc : NULL, seed, &l);
  GST_BUFFER_PTS (buf) = seed * GST_SECOND / 30;
  return buf;
}

static GBytes *
tokens_of (GstBuffer * out)
{
  GstMapInfo map;
  GBytes *bytes;

  /* the map waits for the encode */
  fail_unless (gst_buffer_map (out, &map, GST_MAP_READ));
  bytes = g_bytes_new (map.data, map.size);
  gst_buffer_unmap (out, &map);
  gst_buffer_unref (out);
  return bytes;
}

/* The tokens a fresh element gives for step @s's frames. */
static GBytes **
fresh_tokens (guint s, GstAllocator * fd_alloc)
{
  GstElement *tok = gst_element_factory_make ("npuvisiontok", NULL);
  GstHarness *h;
  GBytes **out = g_new0 (GBytes *, FRAMES_PER_STEP);
  GstVideoInfo info;
  guint i;

  g_object_set (tok, "model", mmproj_path, NULL);
  h = gst_harness_new_with_element (tok, "sink", "src");
  gst_harness_set_src_caps (h, step_caps (&caps_steps[s], &info));
  for (i = 0; i < FRAMES_PER_STEP; i++) {
    fail_unless_equals_int (gst_harness_push (h, step_frame (&caps_steps[s],
                fd_alloc, s * 10 + i)), GST_FLOW_OK);
    out[i] = tokens_of (gst_harness_pull (h));
  }
  gst_harness_teardown (h);
  gst_object_unref (tok);
  return out;
}

/* Size, format and memory change every two frames while those two are
 * still being encoded (the shared CPU device is held, so they cannot have
 * finished): the caps event waits for them, they finish with what they
 * were submitted with, and every frame's tokens equal those a fresh
 * element gives for the same caps and frame.  Under valgrind or ASan a
 * read of the freed preprocess plan or patch scratch is reported. */
GST_START_TEST (test_caps_change_in_flight)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  NpuDeviceHold *hold = npu_device_hold_new ();
  GstElement *tok = gst_element_factory_make ("npuvisiontok", NULL);
  GstHarness *h;
  GstBuffer *out[FRAMES_PER_STEP];
  GstVideoInfo info;
  guint s, i, n_early = 0;

  g_object_set (tok, "model", mmproj_path, "max-inflight", FRAMES_PER_STEP,
      NULL);
  h = gst_harness_new_with_element (tok, "sink", "src");
  gst_harness_set_src_caps (h, step_caps (&caps_steps[0], &info));
  for (s = 0; s < G_N_ELEMENTS (caps_steps); s++) {
    GBytes **want = fresh_tokens (s, fd_alloc);
    NpuPushThread *cp = NULL;

    npu_device_hold (hold);
    for (i = 0; i < FRAMES_PER_STEP; i++) {
      fail_unless_equals_int (gst_harness_push (h, step_frame (&caps_steps[s],
                  fd_alloc, s * 10 + i)), GST_FLOW_OK);
      out[i] = gst_harness_pull (h);
    }
    if (s + 1 < G_N_ELEMENTS (caps_steps)) {
      GstCaps *caps = step_caps (&caps_steps[s + 1], &info);

      cp = npu_push_thread_start_event (h, gst_event_new_caps (caps));
      gst_caps_unref (caps);
      /* nothing can finish the frames while the device is held */
      g_usleep (300 * 1000);
      n_early += npu_push_thread_is_done (cp);
    }
    npu_device_release (hold);
    if (cp)
      fail_unless (npu_push_thread_finish (cp) == GST_FLOW_OK,
          "caps %u refused", s + 1);
    for (i = 0; i < FRAMES_PER_STEP; i++) {
      GBytes *got = tokens_of (out[i]);

      fail_unless (g_bytes_equal (got, want[i]),
          "step %u frame %u: tokens differ from a fresh element's", s, i);
      g_bytes_unref (got);
      g_bytes_unref (want[i]);
    }
    g_free (want);
  }
  /* after the tokens: a wrong order shows as what it read first */
  fail_unless_equals_int (n_early, 0);
  gst_harness_teardown (h);
  gst_object_unref (tok);
  npu_device_hold_free (hold);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

/* A Qwen2.5-VL mmproj (window attention, 2 x 2 merger) through the
 * element on the CPU: the element's tokens against the core's encoder
 * (held to a double-precision reference by tests/unit/test-vit-qwen.c) on
 * the patches of the double-precision preprocessing reference at
 * @out_width x @out_height, the size the element must have resized a
 * @width x @height frame to.  Checks the element's side: the size, mean
 * and std, the merged token count and grid in the meta, the text width.
 * Bounds as check_frame's.  @src's caps are set here: a new size is a caps
 * change. */
typedef struct
{
  GstElement *src, *sink, *tok;
  const gchar *path;
} QwenPipe;

static void
check_qwen_frame (const QwenPipe * qp, guint width, guint height,
    guint out_width, guint out_height, guint seed)
{
  gboolean q8 = g_strcmp0 (npu_matmul_get_isa (), "scalar") != 0;
  guint tw = out_width / 28, th = out_height / 28;
  GError *error = NULL;
  GstVideoInfo info, laid_out;
  GstBuffer *frame;
  GstSample *sample = NULL;
  GstNpuTokensMeta *tmeta;
  GstMapInfo map;
  GstCaps *caps;
  NpuGguf *gguf;
  NpuVit *vit;
  gdouble *patches, *want, err;
  gfloat *fpatches, *got;
  gint precision;
  gsize n, np, i;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, width, height);
  caps = gst_video_info_to_caps (&info);
  g_object_set (qp->src, "caps", caps, NULL);
  gst_caps_unref (caps);
  frame = make_frame (&info, 3, NULL, seed, &laid_out);
  patches = reference_patches (&info, &laid_out, frame, FALSE, out_width,
      out_height, 14);
  GST_BUFFER_PTS (frame) = seed * GST_SECOND;
  /* the push-buffer signal takes a reference of its own */
  fail_unless_equals_int (push (qp->src, frame), GST_FLOW_OK);
  gst_buffer_unref (frame);
  g_signal_emit_by_name (qp->sink, "pull-sample", &sample);
  fail_unless (sample != NULL);
  frame = gst_sample_get_buffer (sample);
  tmeta = gst_buffer_get_npu_tokens_meta (frame);
  fail_unless (tmeta != NULL);
  fail_unless_equals_int (tmeta->n_tokens, tw * th);
  fail_unless_equals_int (tmeta->grid_width, tw);
  fail_unless_equals_int (tmeta->grid_height, th);
  fail_unless_equals_int (tmeta->dim, tp.dim);

  /* the core's encoder on the reference patches, at the element's
   * precision and on the grid of the size this test expects */
  gguf = npu_gguf_open (qp->path, &error);
  fail_unless (gguf != NULL);
  vit = npu_vit_new (gguf, NULL, NULL, &error);
  fail_unless (vit != NULL, "%s", error ? error->message : "");
  fail_unless (npu_vit_set_patch_grid (vit, out_height / 14, out_width / 14,
          &error), "%s", error ? error->message : "");
  g_object_get (qp->tok, "precision", &precision, NULL);
  npu_vit_set_precision (vit, (NpuMatmulPrecision) precision);
  np = (gsize) npu_vit_get_n_patches (vit) * npu_vit_get_patch_dim (vit);
  n = (gsize) tmeta->n_tokens * tmeta->dim;
  fpatches = g_new (gfloat, np);
  for (i = 0; i < np; i++)
    fpatches[i] = (gfloat) patches[i];
  got = g_new (gfloat, n);
  fail_unless (npu_vit_encode (vit, NULL, fpatches, got, &error));
  want = g_new (gdouble, n);
  for (i = 0; i < n; i++)
    want[i] = got[i];

  fail_unless (gst_buffer_map (frame, &map, GST_MAP_READ));
  fail_unless_equals_uint64 (map.size, n * sizeof (gfloat));
  fail_unless (npu_ref_error_over_rms ((const gfloat *) map.data, want, n,
          &err), "tokens not finite, or an all-zero reference");
  GST_INFO ("qwen2.5vl %ux%u -> %ux%u [%s]: max err / rms %.2e", width,
      height, out_width, out_height, npu_matmul_get_isa (), err);
  fail_unless (npu_within (err, q8 ? 2e-3 : 1e-4),
      "qwen2.5vl %ux%u [%s]: max err / rms %g", width, height,
      npu_matmul_get_isa (), err);
  gst_buffer_unmap (frame, &map);
  gst_sample_unref (sample);

  npu_vit_free (vit);
  npu_gguf_free (gguf);
  g_free (fpatches);
  g_free (got);
  g_free (want);
  g_free (patches);
}

/* appsrc ! npuvisiontok model=<a tiny Qwen2.5-VL mmproj> @props !
 * appsink, playing */
static GstElement *
qwen_pipeline (QwenPipe * qp, const gchar * props)
{
  NpuMmprojParams qm;
  GError *error = NULL;
  GstElement *pipeline;
  gchar *desc;

  fail_unless (npu_model_gen_mmproj_preset (&qm,
          NPU_MODEL_PROJECTOR_QWEN25VL, "tiny", &error));
  /* the generator's default: the 168-pixel square the file says */
  fail_unless_equals_int (qm.image_size, 168);
  fail_unless (npu_model_gen_write_mmproj (&qm, text_path, qp->path, NULL,
          &error), "%s", error ? error->message : "");
  desc = g_strdup_printf ("appsrc name=src format=time ! "
      "npuvisiontok name=tok model=%s %s ! appsink name=sink sync=false",
      qp->path, props);
  pipeline = gst_parse_launch (desc, NULL);
  g_free (desc);
  fail_unless (pipeline != NULL);
  qp->src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  qp->sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  qp->tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  return pipeline;
}

static void
qwen_pipeline_free (GstElement * pipeline, QwenPipe * qp)
{
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (qp->tok);
  gst_object_unref (qp->src);
  gst_object_unref (qp->sink);
  gst_object_unref (pipeline);
  g_unlink (qp->path);
}

/* max-pixels=0: the file's square, 168 / 28 = 6 tokens a side, whatever
 * the frame's shape */
GST_START_TEST (test_qwen25vl_frame)
{
  gchar *path = g_build_filename (tmpdir, "qwen.gguf", NULL);
  QwenPipe qp = { NULL, NULL, NULL, path };
  GstElement *pipeline = qwen_pipeline (&qp, "max-pixels=0");

  check_qwen_frame (&qp, 200, 150, 168, 168, 7);
  qwen_pipeline_free (pipeline, &qp);
  g_free (path);
}

GST_END_TEST;

/* Native resolution with Qwen's default min / max pixels: each frame at
 * the size Qwen2VLImageProcessor's smart_resize gives, worked here by
 * hand (sides to the nearest multiple of 28, the product within
 * 56 * 56 .. 28 * 28 * 1280):
 *   320 x 240: 320 / 28 = 11.4 -> 11, 240 / 28 = 8.6 -> 9: 308 x 252,
 *              11 x 9 tokens;
 *   160 x 120: 5.7 -> 6, 4.3 -> 4: 168 x 112, 6 x 4 tokens;
 *   40 x 30:   1.4 -> 1, 1.07 -> 1 is 784 pixels, under 3136: scaled by
 *              sqrt (3136 / 1200) = 1.617, 40 1.617 / 28 = 2.3 -> 3,
 *              30 1.617 / 28 = 1.7 -> 2: 84 x 56, 3 x 2 tokens.
 * Each frame size is a caps change on the running pipeline, and the
 * tokens follow it; then min-pixels above max-pixels is refused with its
 * reason. */
GST_START_TEST (test_qwen25vl_native_resolution)
{
  gchar *path = g_build_filename (tmpdir, "qwen-native.gguf", NULL);
  QwenPipe qp = { NULL, NULL, NULL, path };
  GstElement *pipeline = qwen_pipeline (&qp, "");
  guint min_px, max_px;
  GstBus *bus;
  GstMessage *msg;
  GError *error = NULL;
  GstCaps *caps;
  GstVideoInfo info, laid_out;
  GstBuffer *frame;

  g_object_get (qp.tok, "min-pixels", &min_px, "max-pixels", &max_px, NULL);
  fail_unless_equals_int (min_px, 56 * 56);
  fail_unless_equals_int (max_px, 28 * 28 * 1280);
  check_qwen_frame (&qp, 320, 240, 308, 252, 1);
  check_qwen_frame (&qp, 160, 120, 168, 112, 2);
  check_qwen_frame (&qp, 40, 30, 84, 56, 3);
  check_qwen_frame (&qp, 320, 240, 308, 252, 4);
  qwen_pipeline_free (pipeline, &qp);

  /* min above max: an error that says so when the caps come */
  pipeline = qwen_pipeline (&qp, "min-pixels=500000 max-pixels=400000");
  bus = gst_element_get_bus (pipeline);
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_RGB, 320, 240);
  caps = gst_video_info_to_caps (&info);
  g_object_set (qp.src, "caps", caps, NULL);
  gst_caps_unref (caps);
  frame = make_frame (&info, 0, NULL, 1, &laid_out);
  push (qp.src, frame);
  gst_buffer_unref (frame);
  msg = gst_bus_timed_pop_filtered (bus, 10 * GST_SECOND, GST_MESSAGE_ERROR);
  fail_unless (msg != NULL);
  gst_message_parse_error (msg, &error, NULL);
  fail_unless (strstr (error->message, "Cannot fit RGB 320x240 frames to "
          "the Qwen vision encoder: min-pixels 500000 is more than "
          "max-pixels 400000") != NULL, "%s", error->message);
  g_error_free (error);
  gst_message_unref (msg);
  gst_object_unref (bus);
  qwen_pipeline_free (pipeline, &qp);
  g_free (path);
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
#if GST_CHECK_VERSION(1, 24, 0)
  tcase_add_test (tc, test_dma_drm_template);
  tcase_add_test (tc, test_dma_drm_every_format);
  tcase_add_test (tc, test_dma_drm_refusals);
  tcase_add_test (tc, test_dma_drm_pool);
#endif
  tcase_add_test (tc, test_colorimetry_letterbox_fast_kernels);
  tcase_add_test (tc, test_plane_across_memories_copied);
  tcase_add_test (tc, test_videotestsrc_writes_npu_memory);
  tcase_add_test (tc, test_stats_bytes);
  tcase_add_test (tc, test_upstream_uses_npu_pool);
  tcase_add_test (tc, test_block_and_flush_in_flight);
  tcase_add_test (tc, test_drop_newest_counts);
  tcase_add_test (tc, test_drop_oldest_cancels);
  tcase_add_test (tc, test_bad_models_and_frames);
  tcase_add_test (tc, test_state_changes_in_flight);
  tcase_add_test (tc, test_weights_pad_same_tokens);
  tcase_add_test (tc, test_caps_change_in_flight);
  tcase_add_test (tc, test_refused_caps_posted_once);
  tcase_add_test (tc, test_qwen25vl_frame);
  tcase_add_test (tc, test_qwen25vl_native_resolution);
  return s;
}

GST_CHECK_MAIN (npuvisiontok);
