/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what the operation table reads of a buffer (internal)
 */
#ifndef __NPU_BUFFER_PRIVATE_H__
#define __NPU_BUFFER_PRIVATE_H__

#include "npubuffer.h"

G_BEGIN_DECLS

/* the host address of the buffer's first byte (every engine's buffers are
 * host-visible today) */
G_GNUC_INTERNAL
guint8 *npu_buffer_get_data (NpuBuffer * buffer);
/* the engine's buffer (NULL on the CPU) and where the NpuBuffer's first
 * byte lies in it */
G_GNUC_INTERNAL
gpointer npu_buffer_get_engine_buffer (NpuBuffer * buffer, gsize * offset);

G_END_DECLS

#endif /* __NPU_BUFFER_PRIVATE_H__ */
