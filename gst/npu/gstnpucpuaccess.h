/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the rules of CPU access to NPU memory
 *
 * The lowest layer of libgstnpu: the allocator, the import cache, the pool
 * and the fence meta all stand on it, and it uses none of them.
 */
#ifndef __GST_NPU_CPU_ACCESS_H__
#define __GST_NPU_CPU_ACCESS_H__

#include <glib.h>
#include <npu/gstnpuapi.h>

G_BEGIN_DECLS

GST_NPU_API
gint64 gst_npu_fence_timeout_us (void);

G_END_DECLS

#endif /* __GST_NPU_CPU_ACCESS_H__ */
