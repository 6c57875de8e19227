/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GstVideoInfo from either form of dma-buf video caps */
#ifndef __GST_NPU_VIDEO_INFO_H__
#define __GST_NPU_VIDEO_INFO_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

GST_NPU_API
gboolean gst_npu_video_info_from_caps (GstVideoInfo * info,
    const GstCaps * caps);

G_END_DECLS

#endif /* __GST_NPU_VIDEO_INFO_H__ */
