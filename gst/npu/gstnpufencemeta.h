/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a fence riding on a buffer
 *
 * Modelled on GstGLSyncMeta, tied to no GL context.  A producer that pushes
 * a buffer before its contents are computed attaches the task's fence; an
 * NPU-aware consumer passes it to its own task as a dependency instead of
 * waiting on the CPU.  Every other consumer is covered by NPU memory's map,
 * which waits on the same fence (gst_buffer_add_npu_fence_meta() sets it on
 * the buffer's NPU memories too).
 *
 * The meta's API carries the "memory" tag: the fence describes the memory's
 * contents, so GStreamer keeps the meta on copies that share the memory and
 * drops it when the memory is replaced (GstBaseTransform, partial copies),
 * where it no longer means anything.
 */
#ifndef __GST_NPU_FENCE_META_H__
#define __GST_NPU_FENCE_META_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <core/device/npufence.h>
#include <npu/gstnpucpuaccess.h>

G_BEGIN_DECLS

#define GST_NPU_FENCE_META_API_TYPE (gst_npu_fence_meta_api_get_type ())
#define GST_NPU_FENCE_META_INFO (gst_npu_fence_meta_get_info ())

typedef struct _GstNpuFenceMeta GstNpuFenceMeta;

/**
 * GstNpuFenceMeta:
 * @meta: the parent #GstMeta
 * @fence: the fence that signals when the buffer's memory holds its data
 */
struct _GstNpuFenceMeta
{
  GstMeta meta;

  NpuFence *fence;

  /*< private > */
  GstBuffer *buffer;            /* the buffer the meta is on, not a ref */
};

GST_NPU_API
GType gst_npu_fence_meta_api_get_type (void);
GST_NPU_API
const GstMetaInfo *gst_npu_fence_meta_get_info (void);

#define gst_buffer_get_npu_fence_meta(b) \
  ((GstNpuFenceMeta *) gst_buffer_get_meta ((b), GST_NPU_FENCE_META_API_TYPE))

GST_NPU_API
GstNpuFenceMeta *gst_buffer_add_npu_fence_meta (GstBuffer * buffer,
    NpuFence * fence);
GST_NPU_API
void gst_npu_fence_meta_chain (GstNpuFenceMeta * meta, NpuFence * fence);

GST_NPU_API
NpuFence *gst_npu_buffer_get_fence (GstBuffer * buffer);
GST_NPU_API
gboolean gst_npu_buffer_wait (GstBuffer * buffer, gint64 timeout_us,
    GError ** error);

G_END_DECLS

#endif /* __GST_NPU_FENCE_META_H__ */
