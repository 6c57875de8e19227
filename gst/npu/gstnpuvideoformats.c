/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the video formats npuvisiontok reads, and their caps
 *
 * GStreamer 1.22 negotiates dma-bufs as video/x-raw(memory:DMABuf) with a
 * plain format; 1.24 added a second form for them, format=DMA_DRM with
 * drm-format="<DRM fourcc>[:<modifier>]".  Both name the same layouts, so
 * the table below carries each layout's names in all three vocabularies
 * (GstVideoFormat, NpuPixelFormat, DRM fourcc) and the caps code never
 * spells a mapping out anywhere else.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuvideoformats.h"

#include <gst/allocators/allocators.h>

/* DRM fourccs as drm_fourcc.h's fourcc_code() builds them: the first
 * character in the lowest byte, which is also GST_MAKE_FOURCC's order.
 * Spelled out so that building does not need libdrm; the check test
 * compares every row with drm_fourcc.h wherever libdrm is installed. */
#define DRM_FOURCC(a, b, c, d) GST_MAKE_FOURCC (a, b, c, d)
/* drm_fourcc.h: plain rows, no tiling, no compression */
#define NPU_DRM_FORMAT_MOD_LINEAR G_GUINT64_CONSTANT (0)

/* The pairs are GStreamer's own (gst_video_dma_drm_fourcc_from_format(),
 * 1.24+).  DRM names list a little-endian word's components from its top
 * bits, GStreamer's list the bytes in memory order: hence GStreamer's RGB
 * is DRM's BGR888 and RGBx its XBGR8888.
 * GRAY8 = R8 is ours: GStreamer's map has no GRAY8 in 1.24 (nor, as far as
 * known, 1.26; later versions add this very pair); R8 is DRM's 8-bit
 * single-channel plane. */
/* *INDENT-OFF* */
static const GstNpuVideoFormat video_formats[] = {
  {GST_VIDEO_FORMAT_NV12, NPU_PIXEL_FORMAT_NV12,
      DRM_FOURCC ('N', 'V', '1', '2')},               /* DRM_FORMAT_NV12 */
  {GST_VIDEO_FORMAT_I420, NPU_PIXEL_FORMAT_I420,
      DRM_FOURCC ('Y', 'U', '1', '2')},               /* DRM_FORMAT_YUV420 */
  {GST_VIDEO_FORMAT_YUY2, NPU_PIXEL_FORMAT_YUY2,
      DRM_FOURCC ('Y', 'U', 'Y', 'V')},               /* DRM_FORMAT_YUYV */
  {GST_VIDEO_FORMAT_RGB, NPU_PIXEL_FORMAT_RGB,
      DRM_FOURCC ('B', 'G', '2', '4')},               /* DRM_FORMAT_BGR888 */
  {GST_VIDEO_FORMAT_BGR, NPU_PIXEL_FORMAT_BGR,
      DRM_FOURCC ('R', 'G', '2', '4')},               /* DRM_FORMAT_RGB888 */
  {GST_VIDEO_FORMAT_RGBA, NPU_PIXEL_FORMAT_RGBA,
      DRM_FOURCC ('A', 'B', '2', '4')},               /* DRM_FORMAT_ABGR8888 */
  {GST_VIDEO_FORMAT_BGRA, NPU_PIXEL_FORMAT_BGRA,
      DRM_FOURCC ('A', 'R', '2', '4')},               /* DRM_FORMAT_ARGB8888 */
  {GST_VIDEO_FORMAT_RGBx, NPU_PIXEL_FORMAT_RGBX,
      DRM_FOURCC ('X', 'B', '2', '4')},               /* DRM_FORMAT_XBGR8888 */
  {GST_VIDEO_FORMAT_BGRx, NPU_PIXEL_FORMAT_BGRX,
      DRM_FOURCC ('X', 'R', '2', '4')},               /* DRM_FORMAT_XRGB8888 */
  {GST_VIDEO_FORMAT_GRAY8, NPU_PIXEL_FORMAT_GRAY8,
      DRM_FOURCC ('R', '8', ' ', ' ')},               /* DRM_FORMAT_R8 */
};
/* *INDENT-ON* */

/**
 * gst_npu_video_formats_get:
 * @n_formats: (out): number of rows
 *
 * Returns: the table, in the order the caps list the formats.
 */
const GstNpuVideoFormat *
gst_npu_video_formats_get (guint * n_formats)
{
  *n_formats = G_N_ELEMENTS (video_formats);
  return video_formats;
}

/**
 * gst_npu_video_formats_from_video_format:
 *
 * Returns: (nullable): the row of @format, %NULL if it is not read.
 */
const GstNpuVideoFormat *
gst_npu_video_formats_from_video_format (GstVideoFormat format)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (video_formats); i++) {
    if (video_formats[i].video_format == format)
      return &video_formats[i];
  }
  return NULL;
}

/**
 * gst_npu_video_formats_from_drm_fourcc:
 * @fourcc: a DRM_FORMAT_*, the layout of a linear (untiled) buffer
 *
 * Returns: (nullable): the row of @fourcc, %NULL if it is not read.
 */
const GstNpuVideoFormat *
gst_npu_video_formats_from_drm_fourcc (guint32 fourcc)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (video_formats); i++) {
    if (video_formats[i].drm_fourcc == fourcc)
      return &video_formats[i];
  }
  return NULL;
}

/**
 * gst_npu_video_formats_to_drm_fourcc:
 *
 * Returns: the DRM fourcc of @format, 0 (DRM_FORMAT_INVALID) if it is not
 *   read.
 */
guint32
gst_npu_video_formats_to_drm_fourcc (NpuPixelFormat format)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (video_formats); i++) {
    if (video_formats[i].pixel_format == format)
      return video_formats[i].drm_fourcc;
  }
  return 0;
}

/* video/x-raw with @formats at any size and rate, fields in the order
 * GST_VIDEO_CAPS_MAKE() writes them (what the static template had). */
static GstStructure *
raw_structure (const GValue * formats)
{
  GstStructure *s = gst_structure_new_empty ("video/x-raw");

  gst_structure_set_value (s, "format", formats);
  gst_structure_set (s, "width", GST_TYPE_INT_RANGE, 1, G_MAXINT,
      "height", GST_TYPE_INT_RANGE, 1, G_MAXINT,
      "framerate", GST_TYPE_FRACTION_RANGE, 0, 1, G_MAXINT, 1, NULL);
  return s;
}

#if GST_CHECK_VERSION(1, 24, 0)
/* video/x-raw, format=DMA_DRM, drm-format={ the table's fourccs }: what
 * gst_video_dma_drm_fourcc_to_string() writes for a linear buffer. */
static GstStructure *
dma_drm_structure (void)
{
  GValue formats = G_VALUE_INIT, drm = G_VALUE_INIT;
  GstStructure *s;
  guint i;

  g_value_init (&drm, G_TYPE_STRING);
  g_value_set_static_string (&drm, "DMA_DRM");
  s = raw_structure (&drm);
  g_value_unset (&drm);

  g_value_init (&formats, GST_TYPE_LIST);
  for (i = 0; i < G_N_ELEMENTS (video_formats); i++) {
    GValue v = G_VALUE_INIT;

    g_value_init (&v, G_TYPE_STRING);
    g_value_take_string (&v,
        gst_video_dma_drm_fourcc_to_string (video_formats[i].drm_fourcc,
            NPU_DRM_FORMAT_MOD_LINEAR));
    gst_value_list_append_and_take_value (&formats, &v);
  }
  gst_structure_set_value (s, "drm-format", &formats);
  g_value_unset (&formats);
  return s;
}
#endif

/**
 * gst_npu_video_formats_sink_caps:
 *
 * The sink template's caps: video/x-raw(memory:DMABuf) with the table's
 * formats, on GStreamer 1.24+ video/x-raw(memory:DMABuf) with
 * format=DMA_DRM and the table's DRM fourccs (linear only), then
 * video/x-raw, each at any size and frame rate.
 *
 * Returns: (transfer full): the caps
 */
GstCaps *
gst_npu_video_formats_sink_caps (void)
{
  GValue formats = G_VALUE_INIT;
  GstCaps *caps = gst_caps_new_empty ();
  guint i;

  g_value_init (&formats, GST_TYPE_LIST);
  for (i = 0; i < G_N_ELEMENTS (video_formats); i++) {
    GValue v = G_VALUE_INIT;

    g_value_init (&v, G_TYPE_STRING);
    g_value_set_static_string (&v,
        gst_video_format_to_string (video_formats[i].video_format));
    gst_value_list_append_and_take_value (&formats, &v);
  }

  /* dma-buf memory first: caps order is preference order, and a dma-buf
   * is read in place through its fd. */
  gst_caps_append_structure_full (caps, raw_structure (&formats),
      gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_DMABUF, NULL));
#if GST_CHECK_VERSION(1, 24, 0)
  /* GStreamer 1.24+ elements send dma-bufs only in this form: each row's
   * DRM fourcc, linear (no modifier in the string). */
  gst_caps_append_structure_full (caps, dma_drm_structure (),
      gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_DMABUF, NULL));
#endif
  gst_caps_append_structure (caps, raw_structure (&formats));
  g_value_unset (&formats);
  return caps;
}

static gchar *
supported_names (void)
{
  GString *s = g_string_new (NULL);
  guint i;

  for (i = 0; i < G_N_ELEMENTS (video_formats); i++) {
    g_string_append_printf (s, "%s%s", i ? ", " : "",
        gst_video_format_to_string (video_formats[i].video_format));
  }
  return g_string_free (s, FALSE);
}

#if GST_CHECK_VERSION(1, 24, 0)
static gchar *
supported_drm_names (void)
{
  GString *s = g_string_new (NULL);
  guint i;

  for (i = 0; i < G_N_ELEMENTS (video_formats); i++) {
    g_string_append_printf (s, "%s%" GST_FOURCC_FORMAT, i ? ", " : "",
        GST_FOURCC_ARGS (video_formats[i].drm_fourcc));
  }
  return g_string_free (s, FALSE);
}
#endif

/**
 * gst_npu_video_formats_parse:
 * @caps: fixed caps from the sink pad
 * @info: (out): the frames' layout, colorimetry and rate
 * @format: (out): the layout for the preprocessing
 * @error: why @caps cannot be read (GST_CORE_ERROR_NEGOTIATION)
 *
 * The one place caps become a #GstVideoInfo and a pixel format.  @info and
 * @format are only written on success.
 *
 * Returns: %TRUE if @caps describe frames the element reads.
 */
gboolean
gst_npu_video_formats_parse (GstCaps * caps, GstVideoInfo * info,
    NpuPixelFormat * format, GError ** error)
{
  const GstNpuVideoFormat *row;
  GstVideoInfo parsed;
#if GST_CHECK_VERSION(1, 24, 0)
  const gchar *drm_format = NULL;
  guint64 modifier = 0;
#endif

  g_return_val_if_fail (GST_IS_CAPS (caps), FALSE);
  g_return_val_if_fail (info != NULL, FALSE);
  g_return_val_if_fail (format != NULL, FALSE);
  g_return_val_if_fail (error == NULL || *error == NULL, FALSE);

#if GST_CHECK_VERSION(1, 24, 0)
  /* gst_video_info_from_caps() does not turn format=DMA_DRM into a plain
   * format.  The row comes from our table rather than from
   * gst_video_info_dma_drm_to_video_info(), whose map (GStreamer's) has no
   * GRAY8 = R8; the caps are then read as the same caps in the classic
   * form, so that both forms give the same GstVideoInfo. */
  if (gst_video_is_dma_drm_caps (caps)) {
    GstStructure *s = gst_caps_get_structure (caps, 0);
    guint32 fourcc;
    GstCaps *plain;
    gboolean ok;

    drm_format = gst_structure_get_string (s, "drm-format");
    if (!drm_format)
      goto invalid;
    fourcc = gst_video_dma_drm_fourcc_from_string (drm_format, &modifier);
    if (fourcc == 0)
      goto invalid;
    /* The preprocessing reads plain rows: a tiled or compressed layout
     * would be misread, not rejected later. */
    if (modifier != NPU_DRM_FORMAT_MOD_LINEAR)
      goto not_linear;
    row = gst_npu_video_formats_from_drm_fourcc (fourcc);
    if (!row)
      goto unsupported_drm;
    plain = gst_caps_copy (caps);
    s = gst_caps_get_structure (plain, 0);
    gst_structure_set (s, "format", G_TYPE_STRING,
        gst_video_format_to_string (row->video_format), NULL);
    gst_structure_remove_field (s, "drm-format");
    ok = gst_video_info_from_caps (&parsed, plain);
    gst_caps_unref (plain);
    if (!ok)
      goto invalid;
    *info = parsed;
    *format = row->pixel_format;
    return TRUE;
  }
#endif

  /* gst_video_info_from_caps() takes fixed caps only (a critical
   * otherwise); caps events are fixed, but this is also public API. */
  if (!gst_caps_is_fixed (caps) || !gst_video_info_from_caps (&parsed, caps))
    goto invalid;

  row = gst_npu_video_formats_from_video_format (GST_VIDEO_INFO_FORMAT
      (&parsed));
  if (!row)
    goto unsupported;

  *info = parsed;
  *format = row->pixel_format;
  return TRUE;

  /* ERRORS */
invalid:
  {
    gchar *str = gst_caps_to_string (caps);

    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION,
        "Invalid video caps: %s", str);
    g_free (str);
    return FALSE;
  }
#if GST_CHECK_VERSION(1, 24, 0)
not_linear:
  {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION,
        "Unsupported DRM modifier 0x%016" G_GINT64_MODIFIER "x in "
        "drm-format=%s: frames are read as plain rows, tiled or compressed "
        "layouts are not read (only the linear modifier is)", modifier,
        drm_format);
    return FALSE;
  }
unsupported_drm:
  {
    gchar *names = supported_drm_names ();

    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION,
        "Unsupported DRM format %s (supported: %s)", drm_format, names);
    g_free (names);
    return FALSE;
  }
#endif
unsupported:
  {
    gchar *names = supported_names ();

    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_NEGOTIATION,
        "Unsupported video format %s (supported: %s)",
        GST_VIDEO_INFO_NAME (&parsed), names);
    g_free (names);
    return FALSE;
  }
}

/**
 * gst_npu_video_formats_colorimetry:
 * @info: parsed caps
 * @matrix: (out): the Y'CbCr matrix the caps name
 * @range: (out): their quantisation range
 *
 * The colorimetry of @info for the preprocessing.  Every matrix GStreamer
 * names has its own; an unknown one is BT.601 and an unknown range is
 * limited (studio) range, as for most cameras' Y'CbCr.  Neither matters
 * for RGB and GRAY8 frames but their range.
 */
void
gst_npu_video_formats_colorimetry (const GstVideoInfo * info,
    NpuColorMatrix * matrix, NpuColorRange * range)
{
  switch (info->colorimetry.matrix) {
    case GST_VIDEO_COLOR_MATRIX_BT709:
      *matrix = NPU_COLOR_MATRIX_BT709;
      break;
    case GST_VIDEO_COLOR_MATRIX_BT2020:
      *matrix = NPU_COLOR_MATRIX_BT2020;
      break;
    case GST_VIDEO_COLOR_MATRIX_SMPTE240M:
      *matrix = NPU_COLOR_MATRIX_SMPTE240M;
      break;
    case GST_VIDEO_COLOR_MATRIX_FCC:
      *matrix = NPU_COLOR_MATRIX_FCC;
      break;
    default:
      *matrix = NPU_COLOR_MATRIX_BT601;
      break;
  }
  *range = info->colorimetry.range == GST_VIDEO_COLOR_RANGE_0_255 ?
      NPU_COLOR_RANGE_FULL : NPU_COLOR_RANGE_LIMITED;
}
