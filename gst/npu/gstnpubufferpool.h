/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a buffer pool of NPU memory
 *
 * Buffers are one NPU memory each.  For video caps the pool lays out planes
 * with strides and plane offsets at multiples of 128 bytes (and honours
 * GST_BUFFER_POOL_OPTION_VIDEO_ALIGNMENT on top) and adds a GstVideoMeta when
 * GST_BUFFER_POOL_OPTION_VIDEO_META is set.  For any other caps (tensors,
 * audio) buffers are the configured size.
 */
#ifndef __GST_NPU_BUFFER_POOL_H__
#define __GST_NPU_BUFFER_POOL_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

#define GST_TYPE_NPU_BUFFER_POOL (gst_npu_buffer_pool_get_type ())
GST_NPU_API
G_DECLARE_FINAL_TYPE (GstNpuBufferPool, gst_npu_buffer_pool, GST,
    NPU_BUFFER_POOL, GstBufferPool)

GST_NPU_API
GstBufferPool *gst_npu_buffer_pool_new (GstAllocator * allocator);
GST_NPU_API
gboolean gst_npu_buffer_pool_get_video_info (GstBufferPool * pool,
    GstVideoInfo * info);

G_END_DECLS

#endif /* __GST_NPU_BUFFER_POOL_H__ */
