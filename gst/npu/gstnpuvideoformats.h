/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the video formats npuvisiontok reads, and their caps
 *
 * One table maps each supported GstVideoFormat to the preprocessing's
 * NpuPixelFormat and to its DRM fourcc (linear layout).  The sink template
 * is built from it and every caps-to-GstVideoInfo conversion goes through
 * gst_npu_video_formats_parse(), so adding the GStreamer 1.24+ form of
 * dma-buf caps (format=DMA_DRM, drm-format=<fourcc>) touches this file
 * only.
 */
#ifndef __GST_NPU_VIDEO_FORMATS_H__
#define __GST_NPU_VIDEO_FORMATS_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <gst/video/video.h>
#include <core/cpu/npuvisionprep.h>

G_BEGIN_DECLS

/**
 * GstNpuVideoFormat:
 * @video_format: the format in GStreamer's caps
 * @pixel_format: the same layout for the preprocessing
 * @drm_fourcc: the same layout as a DRM_FORMAT_* (drm_fourcc.h), with the
 *   linear modifier: what GStreamer 1.24+ puts in drm-format
 */
typedef struct
{
  GstVideoFormat video_format;
  NpuPixelFormat pixel_format;
  guint32 drm_fourcc;
} GstNpuVideoFormat;

GST_NPU_API
const GstNpuVideoFormat *gst_npu_video_formats_get (guint * n_formats);

GST_NPU_API
const GstNpuVideoFormat *gst_npu_video_formats_from_video_format
    (GstVideoFormat format);
GST_NPU_API
const GstNpuVideoFormat *gst_npu_video_formats_from_drm_fourcc (guint32
    fourcc);
GST_NPU_API
guint32 gst_npu_video_formats_to_drm_fourcc (NpuPixelFormat format);

GST_NPU_API
GstCaps *gst_npu_video_formats_sink_caps (void);

GST_NPU_API
gboolean gst_npu_video_formats_parse (GstCaps * caps, GstVideoInfo * info,
    NpuPixelFormat * format, GError ** error);

GST_NPU_API
void gst_npu_video_formats_colorimetry (const GstVideoInfo * info,
    NpuColorMatrix * matrix, NpuColorRange * range);

G_END_DECLS

#endif /* __GST_NPU_VIDEO_FORMATS_H__ */
