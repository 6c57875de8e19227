/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GstVideoInfo from either form of dma-buf video caps
 *
 * GStreamer 1.24 added a second form of dma-buf caps,
 * video/x-raw(memory:DMABuf), format=DMA_DRM, drm-format="<fourcc>[:<mod>]",
 * which gst_video_info_from_caps() does not turn into a frame layout.  The
 * NPU pool and the allocation answer need the layout (plane sizes, video
 * meta) whichever form upstream negotiated: v4l2src in dmabuf-import mode
 * configures the pool it was proposed with its own, DMA_DRM, caps.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuvideoinfo.h"

#if GST_CHECK_VERSION(1, 24, 0)
#include <gst/video/video-info-dma.h>

/* drm_fourcc.h's values, so that the library does not need libdrm. */
#define NPU_DRM_FORMAT_MOD_LINEAR 0
#define NPU_DRM_FORMAT_R8 GST_MAKE_FOURCC ('R', '8', ' ', ' ')

static gboolean
dma_drm_to_video_info (GstVideoInfo * info, const GstCaps * caps)
{
  const GstStructure *s = gst_caps_get_structure (caps, 0);
  const gchar *drm_format = gst_structure_get_string (s, "drm-format");
  GstVideoFormat format;
  guint64 modifier = 0;
  guint32 fourcc;
  GstCaps *plain;
  gboolean ok;

  if (!drm_format)
    return FALSE;
  fourcc = gst_video_dma_drm_fourcc_from_string (drm_format, &modifier);
  /* Only plain rows can be described by a GstVideoInfo. */
  if (fourcc == 0 || modifier != NPU_DRM_FORMAT_MOD_LINEAR)
    return FALSE;
  format = gst_video_dma_drm_fourcc_to_format (fourcc);
  /* GStreamer's own map has no 8-bit grey (1.24, 1.26). */
  if (format == GST_VIDEO_FORMAT_UNKNOWN && fourcc == NPU_DRM_FORMAT_R8)
    format = GST_VIDEO_FORMAT_GRAY8;
  if (format == GST_VIDEO_FORMAT_UNKNOWN)
    return FALSE;

  plain = gst_caps_copy (caps);
  gst_structure_set (gst_caps_get_structure (plain, 0), "format",
      G_TYPE_STRING, gst_video_format_to_string (format), NULL);
  gst_structure_remove_field (gst_caps_get_structure (plain, 0), "drm-format");
  ok = gst_video_info_from_caps (info, plain);
  gst_caps_unref (plain);
  return ok;
}
#endif

/**
 * gst_npu_video_info_from_caps:
 * @info: (out): the layout of the frames
 * @caps: fixed video caps
 *
 * gst_video_info_from_caps(), and on GStreamer 1.24+ also the DMA_DRM form
 * of dma-buf caps with a linear modifier, which describes the same layout
 * as the plain format of the same DRM fourcc.  Tiled and compressed
 * modifiers have no #GstVideoInfo layout and give %FALSE.
 *
 * Returns: %TRUE if @info was filled.
 */
gboolean
gst_npu_video_info_from_caps (GstVideoInfo * info, const GstCaps * caps)
{
  g_return_val_if_fail (info != NULL, FALSE);
  g_return_val_if_fail (GST_IS_CAPS (caps), FALSE);

  if (!gst_caps_is_fixed (caps))
    return FALSE;
#if GST_CHECK_VERSION(1, 24, 0)
  if (gst_video_is_dma_drm_caps (caps))
    return dma_drm_to_video_info (info, caps);
#endif
  return gst_video_info_from_caps (info, caps);
}
