/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: answering ALLOCATION queries with NPU memory */
#ifndef __GST_NPU_ALLOCATION_H__
#define __GST_NPU_ALLOCATION_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>

G_BEGIN_DECLS

GST_NPU_API
gboolean gst_npu_propose_allocation (GstQuery * query,
    GstAllocator * allocator, guint min_buffers, guint max_buffers);

G_END_DECLS

#endif /* __GST_NPU_ALLOCATION_H__ */
