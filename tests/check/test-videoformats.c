/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npuvisiontok's format table and caps (gstnpuvideoformats.c)
 *
 * The table is compiled into this test.  What it is checked against is
 * written out here, independently: the caps the element is documented to
 * take, the pixel format each GstVideoFormat is, and, where libdrm is
 * installed, the DRM fourccs of drm_fourcc.h paired as GStreamer 1.24+
 * pairs them (gst_video_dma_drm_fourcc_from_format()), so that the
 * DMA_DRM caps form cannot be added with a mismatched fourcc.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>
#include <gst/gst.h>
#include <gst/check/gstcheck.h>
#include <gst/video/video.h>
#include <gst/allocators/allocators.h>

#include <npu/gstnpuvideoformats.h>

#ifdef HAVE_LIBDRM
#include <drm_fourcc.h>
#endif

/* docs/npuvisiontok.md: both memory kinds, these formats, nothing else. */
#define FORMATS "{ (string)NV12, (string)I420, (string)YUY2, (string)RGB, " \
    "(string)BGR, (string)RGBA, (string)BGRA, (string)RGBx, (string)BGRx, " \
    "(string)GRAY8 }"
#define RANGES "width=(int)[ 1, 2147483647 ], " \
    "height=(int)[ 1, 2147483647 ], framerate=(fraction)[ 0/1, 2147483647/1 ]"
#if GST_CHECK_VERSION(1, 24, 0)
/* 1.24+: the DMA_DRM form too, each layout's linear DRM fourcc */
#define DRM_FORMATS "{ (string)NV12, (string)YU12, (string)YUYV, " \
    "(string)BG24, (string)RG24, (string)AB24, (string)AR24, (string)XB24, " \
    "(string)XR24, (string)\"R8\\ \\ \" }"
#define EXPECTED_CAPS \
    "video/x-raw(memory:DMABuf), format=(string)" FORMATS ", " RANGES "; " \
    "video/x-raw(memory:DMABuf), format=(string)DMA_DRM, " RANGES ", " \
    "drm-format=(string)" DRM_FORMATS "; " \
    "video/x-raw, format=(string)" FORMATS ", " RANGES
#define N_STRUCTURES 3
#else
#define EXPECTED_CAPS \
    "video/x-raw(memory:DMABuf), format=(string)" FORMATS ", " RANGES "; " \
    "video/x-raw, format=(string)" FORMATS ", " RANGES
#define N_STRUCTURES 2
#endif

typedef struct
{
  const gchar *name;
  NpuPixelFormat pixel_format;
  const gchar *drm_format;      /* drm-format as GStreamer 1.24+ writes it */
} Expected;

/* NpuPixelFormat's byte orders are GStreamer's (core/cpu/npuvisionprep.h).
 * DRM names read a little-endian word from its top byte: GStreamer's RGB
 * (R first in memory) is DRM's BGR888 "BG24", RGBx is XBGR8888 "XB24". */
static const Expected expected[] = {
  {"NV12", NPU_PIXEL_FORMAT_NV12, "NV12"},
  {"I420", NPU_PIXEL_FORMAT_I420, "YU12"},
  {"YUY2", NPU_PIXEL_FORMAT_YUY2, "YUYV"},
  {"RGB", NPU_PIXEL_FORMAT_RGB, "BG24"},
  {"BGR", NPU_PIXEL_FORMAT_BGR, "RG24"},
  {"RGBA", NPU_PIXEL_FORMAT_RGBA, "AB24"},
  {"BGRA", NPU_PIXEL_FORMAT_BGRA, "AR24"},
  {"RGBx", NPU_PIXEL_FORMAT_RGBX, "XB24"},
  {"BGRx", NPU_PIXEL_FORMAT_BGRX, "XR24"},
  {"GRAY8", NPU_PIXEL_FORMAT_GRAY8, "R8  "},
};

static const Expected *
find_expected (const gchar * name)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (expected); i++) {
    if (strcmp (expected[i].name, name) == 0)
      return &expected[i];
  }
  return NULL;
}

static GstCaps *
frame_caps (GstVideoFormat format, gboolean dmabuf)
{
  GstVideoInfo info;
  GstCaps *caps;

  fail_unless (gst_video_info_set_format (&info, format, 321, 241));
  GST_VIDEO_INFO_FPS_N (&info) = 30;
  GST_VIDEO_INFO_FPS_D (&info) = 1;
  caps = gst_video_info_to_caps (&info);
  if (dmabuf)
    gst_caps_set_features (caps, 0,
        gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_DMABUF, NULL));
  return caps;
}

GST_START_TEST (test_sink_caps)
{
  GstCaps *caps = gst_npu_video_formats_sink_caps ();
  GstCaps *want = gst_caps_from_string (EXPECTED_CAPS);
  GstElementFactory *factory;
  GstElement *element;
  GstCaps *templ;
  GstPad *pad;
  const GList *l;
  gboolean found = FALSE;
  gchar *str, *want_str;

  fail_unless (want != NULL);
  {
    gchar *got = gst_caps_to_string (caps);

    fail_unless (gst_caps_is_strictly_equal (caps, want), "sink caps %s", got);
    g_free (got);
  }
  /* even the field order, as gst-inspect-1.0 shows it */
  str = gst_caps_to_string (caps);
  want_str = gst_caps_to_string (want);
  fail_unless_equals_string (str, want_str);
  g_free (str);
  g_free (want_str);
  /* DMABuf first (the order is the preference), then system memory. */
  fail_unless_equals_int (gst_caps_get_size (caps), N_STRUCTURES);
  fail_unless (gst_caps_features_contains (gst_caps_get_features (caps, 0),
          GST_CAPS_FEATURE_MEMORY_DMABUF));
  fail_unless (gst_caps_features_contains (gst_caps_get_features (caps,
              N_STRUCTURES - 2), GST_CAPS_FEATURE_MEMORY_DMABUF));
  fail_unless (gst_caps_features_is_equal (gst_caps_get_features (caps,
              N_STRUCTURES - 1), GST_CAPS_FEATURES_MEMORY_SYSTEM_MEMORY));

  /* The element's template (as registered, and on an instance's pad) is
   * the table's. */
  factory = gst_element_factory_find ("npuvisiontok");
  fail_unless (factory != NULL);
  for (l = gst_element_factory_get_static_pad_templates (factory); l;
      l = l->next) {
    GstStaticPadTemplate *t = l->data;

    if (strcmp (t->name_template, "sink") != 0)
      continue;
    templ = gst_static_pad_template_get_caps (t);
    fail_unless (gst_caps_is_strictly_equal (templ, want),
        "registered %" GST_PTR_FORMAT, templ);
    gst_caps_unref (templ);
    found = TRUE;
  }
  fail_unless (found);
  gst_object_unref (factory);

  element = gst_element_factory_make ("npuvisiontok", NULL);
  fail_unless (element != NULL);
  pad = gst_element_get_static_pad (element, "sink");
  templ = gst_pad_get_pad_template_caps (pad);
  fail_unless (gst_caps_is_strictly_equal (templ, want),
      "pad %" GST_PTR_FORMAT, templ);
  gst_caps_unref (templ);
  gst_object_unref (pad);
  gst_object_unref (element);

  gst_caps_unref (want);
  gst_caps_unref (caps);
}

GST_END_TEST;

/* Every raw format GStreamer knows, in both memory kinds: the template
 * takes exactly the ten. */
GST_START_TEST (test_sink_caps_nothing_else)
{
  GstCaps *caps = gst_npu_video_formats_sink_caps ();
  const GstVideoFormat *all;
  guint n_all, i, n_taken = 0;
  gint dmabuf;

  all = gst_video_formats_raw (&n_all);
  for (i = 0; i < n_all; i++) {
    const gchar *name = gst_video_format_to_string (all[i]);

    for (dmabuf = 0; dmabuf < 2; dmabuf++) {
      GstCaps *frame = frame_caps (all[i], dmabuf);
      gboolean want = find_expected (name) != NULL;

      fail_unless (gst_caps_can_intersect (caps, frame) == want,
          "%s%s: %s", name, dmabuf ? " (DMABuf)" : "",
          want ? "refused" : "accepted");
      n_taken += want;
      gst_caps_unref (frame);
    }
  }
  fail_unless_equals_int (n_taken, 2 * G_N_ELEMENTS (expected));
  gst_caps_unref (caps);
}

GST_END_TEST;

GST_START_TEST (test_parse)
{
  guint i;
  gint dmabuf;

  for (i = 0; i < G_N_ELEMENTS (expected); i++) {
    GstVideoFormat vf = gst_video_format_from_string (expected[i].name);

    for (dmabuf = 0; dmabuf < 2; dmabuf++) {
      GstCaps *caps = frame_caps (vf, dmabuf);
      GstVideoInfo want, info;
      NpuPixelFormat format = NPU_PIXEL_FORMAT_UNKNOWN;
      GError *error = NULL;

      fail_unless (gst_video_info_from_caps (&want, caps));
      fail_unless (gst_npu_video_formats_parse (caps, &info, &format,
              &error), "%s: %s", expected[i].name,
          error ? error->message : "no error");
      fail_unless (error == NULL);
      fail_unless_equals_int (format, expected[i].pixel_format);
      fail_unless_equals_int (GST_VIDEO_INFO_FORMAT (&info), vf);
      fail_unless (gst_video_info_is_equal (&info, &want), "%s",
          expected[i].name);
      gst_caps_unref (caps);
    }
  }
}

GST_END_TEST;

/* The colorimetry, which the preprocessing's conversion follows, comes
 * through as the caps say. */
GST_START_TEST (test_parse_colorimetry)
{
  /* 1:3:5:1 is full range, BT.709 matrix, transfer and primaries */
  GstCaps *caps = gst_caps_from_string ("video/x-raw(memory:DMABuf), "
      "format=NV12, width=64, height=48, framerate=30/1, "
      "colorimetry=(string)1:3:5:1");
  GstVideoInfo info;
  NpuPixelFormat format;

  fail_unless (gst_npu_video_formats_parse (caps, &info, &format, NULL));
  fail_unless_equals_int (format, NPU_PIXEL_FORMAT_NV12);
  fail_unless_equals_int (info.colorimetry.range, GST_VIDEO_COLOR_RANGE_0_255);
  fail_unless_equals_int (info.colorimetry.matrix,
      GST_VIDEO_COLOR_MATRIX_BT709);
  fail_unless_equals_int (GST_VIDEO_INFO_WIDTH (&info), 64);
  fail_unless_equals_int (GST_VIDEO_INFO_HEIGHT (&info), 48);
  gst_caps_unref (caps);
}

GST_END_TEST;

static void
check_parse_fails (GstCaps * caps, const gchar * what, const gchar * also)
{
  GstVideoInfo info;
  NpuPixelFormat format = NPU_PIXEL_FORMAT_UNKNOWN;
  GError *error = NULL;

  gst_video_info_init (&info);
  fail_if (gst_npu_video_formats_parse (caps, &info, &format, &error));
  fail_unless (error != NULL);
  fail_unless (g_error_matches (error, GST_CORE_ERROR,
          GST_CORE_ERROR_NEGOTIATION), "%s", error->message);
  fail_unless (strstr (error->message, what) != NULL, "%s", error->message);
  if (also)
    fail_unless (strstr (error->message, also) != NULL, "%s",
        error->message);
  /* nothing written on failure */
  fail_unless_equals_int (format, NPU_PIXEL_FORMAT_UNKNOWN);
  fail_unless_equals_int (GST_VIDEO_INFO_FORMAT (&info),
      GST_VIDEO_FORMAT_UNKNOWN);
  g_error_free (error);
  /* and a NULL error is allowed */
  fail_if (gst_npu_video_formats_parse (caps, &info, &format, NULL));
}

GST_START_TEST (test_parse_unsupported)
{
  GstCaps *caps;
  gint dmabuf;

  for (dmabuf = 0; dmabuf < 2; dmabuf++) {
    caps = frame_caps (GST_VIDEO_FORMAT_NV21, dmabuf);
    check_parse_fails (caps, "Unsupported video format NV21",
        "NV12, I420, YUY2, RGB, BGR, RGBA, BGRA, RGBx, BGRx, GRAY8");
    gst_caps_unref (caps);
  }

  /* not fixed: an error, not a critical from gst_video_info_from_caps() */
  caps = gst_npu_video_formats_sink_caps ();
  check_parse_fails (caps, "Invalid video caps", "video/x-raw");
  gst_caps_unref (caps);

  caps = gst_caps_from_string ("video/x-raw, width=64, height=64");
  check_parse_fails (caps, "Invalid video caps", NULL);
  gst_caps_unref (caps);

  caps = gst_caps_new_empty ();
  check_parse_fails (caps, "Invalid video caps", NULL);
  gst_caps_unref (caps);
}

GST_END_TEST;

/* The table against the expectations, and the lookups both ways. */
GST_START_TEST (test_table)
{
  const GstNpuVideoFormat *rows;
  guint n, i, j;

  rows = gst_npu_video_formats_get (&n);
  fail_unless_equals_int (n, G_N_ELEMENTS (expected));
  for (i = 0; i < n; i++) {
    gchar drm_format[5];

    /* in the caps' order */
    fail_unless_equals_string (gst_video_format_to_string
        (rows[i].video_format), expected[i].name);
    fail_unless_equals_int (rows[i].pixel_format, expected[i].pixel_format);
    g_snprintf (drm_format, sizeof (drm_format), "%" GST_FOURCC_FORMAT,
        GST_FOURCC_ARGS (rows[i].drm_fourcc));
    fail_unless_equals_string (drm_format, expected[i].drm_format);

    fail_unless (gst_npu_video_formats_from_video_format
        (rows[i].video_format) == &rows[i]);
    fail_unless (gst_npu_video_formats_from_drm_fourcc (rows[i].drm_fourcc)
        == &rows[i]);
    fail_unless_equals_int (gst_npu_video_formats_to_drm_fourcc
        (rows[i].pixel_format), rows[i].drm_fourcc);

    /* one row per name in each column, or a lookup would hide one */
    for (j = 0; j < i; j++) {
      fail_if (rows[j].video_format == rows[i].video_format);
      fail_if (rows[j].pixel_format == rows[i].pixel_format);
      fail_if (rows[j].drm_fourcc == rows[i].drm_fourcc);
    }
  }

  fail_unless (gst_npu_video_formats_from_video_format
      (GST_VIDEO_FORMAT_NV21) == NULL);
  fail_unless (gst_npu_video_formats_from_video_format
      (GST_VIDEO_FORMAT_UNKNOWN) == NULL);
  fail_unless (gst_npu_video_formats_from_drm_fourcc (0) == NULL);
  fail_unless (gst_npu_video_formats_from_drm_fourcc (GST_MAKE_FOURCC ('N',
              'V', '2', '1')) == NULL);
  fail_unless_equals_int (gst_npu_video_formats_to_drm_fourcc
      (NPU_PIXEL_FORMAT_UNKNOWN), 0);
}

GST_END_TEST;

#ifdef HAVE_LIBDRM
/* The pairs of GStreamer's gst_video_dma_drm_fourcc_from_format() (1.24+,
 * video-info-dma.c), in drm_fourcc.h's names.  GRAY8 = R8 is not among
 * them in 1.24 (nor, as far as known, 1.26); R8 is DRM's single 8-bit
 * channel and what later GStreamer maps GRAY8 to. */
GST_START_TEST (test_drm_fourccs)
{
  static const struct
  {
    GstVideoFormat format;
    guint32 fourcc;
  } drm[] = {
    {GST_VIDEO_FORMAT_NV12, DRM_FORMAT_NV12},
    {GST_VIDEO_FORMAT_I420, DRM_FORMAT_YUV420},
    {GST_VIDEO_FORMAT_YUY2, DRM_FORMAT_YUYV},
    {GST_VIDEO_FORMAT_RGB, DRM_FORMAT_BGR888},
    {GST_VIDEO_FORMAT_BGR, DRM_FORMAT_RGB888},
    {GST_VIDEO_FORMAT_RGBA, DRM_FORMAT_ABGR8888},
    {GST_VIDEO_FORMAT_BGRA, DRM_FORMAT_ARGB8888},
    {GST_VIDEO_FORMAT_RGBx, DRM_FORMAT_XBGR8888},
    {GST_VIDEO_FORMAT_BGRx, DRM_FORMAT_XRGB8888},
    {GST_VIDEO_FORMAT_GRAY8, DRM_FORMAT_R8},
  };
  guint n, i;

  gst_npu_video_formats_get (&n);
  fail_unless_equals_int (n, G_N_ELEMENTS (drm));
  for (i = 0; i < G_N_ELEMENTS (drm); i++) {
    const GstNpuVideoFormat *row =
        gst_npu_video_formats_from_video_format (drm[i].format);

    fail_unless (row != NULL, "%s",
        gst_video_format_to_string (drm[i].format));
    fail_unless (row->drm_fourcc == drm[i].fourcc,
        "%s: table has %" GST_FOURCC_FORMAT ", drm_fourcc.h %"
        GST_FOURCC_FORMAT, gst_video_format_to_string (drm[i].format),
        GST_FOURCC_ARGS (row->drm_fourcc), GST_FOURCC_ARGS (drm[i].fourcc));
    fail_unless (gst_npu_video_formats_from_drm_fourcc (drm[i].fourcc) ==
        row);
  }
  fail_unless_equals_int (gst_npu_video_formats_to_drm_fourcc
      (NPU_PIXEL_FORMAT_UNKNOWN), DRM_FORMAT_INVALID);
  fail_unless (gst_npu_video_formats_from_drm_fourcc (DRM_FORMAT_NV21) ==
      NULL);
}

GST_END_TEST;
#endif

static Suite *
videoformats_suite (void)
{
  Suite *s = suite_create ("npuvideoformats");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_sink_caps);
  tcase_add_test (tc, test_sink_caps_nothing_else);
  tcase_add_test (tc, test_parse);
  tcase_add_test (tc, test_parse_colorimetry);
  tcase_add_test (tc, test_parse_unsupported);
  tcase_add_test (tc, test_table);
#ifdef HAVE_LIBDRM
  tcase_add_test (tc, test_drm_fourccs);
#endif
  return s;
}

GST_CHECK_MAIN (videoformats);
