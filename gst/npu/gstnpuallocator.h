/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: NPU memory
 *
 * One allocator for every element of the set.  It tries, in order:
 *   1. a DMA-BUF heap: the one named by the "heap" property, else by the
 *      GST_NPU_DMA_HEAP environment variable, else "system" (a name under
 *      /dev/dma_heap or an absolute path);
 *   2. /dev/udmabuf over a sealed memfd (GST_NPU_UDMABUF_DEVICE overrides the
 *      node's path);
 *   3. a plain memfd.
 * Memory from 1 and 2 is GstDmaBufMemory (gst_is_dmabuf_memory() is TRUE),
 * from 3 GstFdMemory.  Sizes are rounded up to whole pages; the mapping is
 * page aligned, so rows and tensors placed at multiples of 128 bytes stay
 * aligned.  The mapping is made once and kept for the memory's life.
 *
 * Mapping NPU memory first waits for the fence the producer attached to it
 * (gst_npu_memory_set_fence()), so a consumer that maps never sees
 * unfinished data.  The wait gives up after GST_NPU_FENCE_TIMEOUT_MS
 * milliseconds (default 10000) and the map fails with the reason logged.
 */
#ifndef __GST_NPU_ALLOCATOR_H__
#define __GST_NPU_ALLOCATOR_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <gst/allocators/allocators.h>
#include <core/device/npufence.h>

G_BEGIN_DECLS

/**
 * GstNpuMemoryPath:
 * @GST_NPU_MEMORY_PATH_DMA_HEAP: a DMA-BUF heap
 * @GST_NPU_MEMORY_PATH_UDMABUF: a udmabuf made from a sealed memfd
 * @GST_NPU_MEMORY_PATH_MEMFD: a plain memfd (fd memory, not a dma-buf)
 */
typedef enum
{
  GST_NPU_MEMORY_PATH_DMA_HEAP,
  GST_NPU_MEMORY_PATH_UDMABUF,
  GST_NPU_MEMORY_PATH_MEMFD,
} GstNpuMemoryPath;

/* Name under which the default NPU allocator is registered. */
#define GST_ALLOCATOR_NPU "NpuMemory"

/* Rows and tensors start at multiples of this many bytes. */
#define GST_NPU_ALIGN 128

#define GST_TYPE_NPU_MEMORY_PATH (gst_npu_memory_path_get_type ())
GST_NPU_API
GType gst_npu_memory_path_get_type (void);
GST_NPU_API
const gchar *gst_npu_memory_path_to_string (GstNpuMemoryPath path);

/* The allocator comes in two GTypes because GStreamer decides "dma-buf or
 * not" by the allocator's type: GstNpuDmaBufAllocator (a GstDmaBufAllocator)
 * serves paths 1 and 2, GstNpuFdAllocator (a GstFdAllocator) path 3.  Use
 * the functions below rather than the types. */
#define GST_TYPE_NPU_DMABUF_ALLOCATOR (gst_npu_dmabuf_allocator_get_type ())
#define GST_TYPE_NPU_FD_ALLOCATOR (gst_npu_fd_allocator_get_type ())
GST_NPU_API
GType gst_npu_dmabuf_allocator_get_type (void);
GST_NPU_API
GType gst_npu_fd_allocator_get_type (void);

GST_NPU_API
GstAllocator *gst_npu_allocator_new (const gchar * heap);
GST_NPU_API
GstAllocator *gst_npu_allocator_get_default (void);
GST_NPU_API
gboolean gst_is_npu_allocator (GstAllocator * allocator);
GST_NPU_API
GstNpuMemoryPath gst_npu_allocator_get_path (GstAllocator * allocator);
GST_NPU_API
const gchar *gst_npu_allocator_get_device (GstAllocator * allocator);

GST_NPU_API
gboolean gst_is_npu_memory (GstMemory * mem);
GST_NPU_API
void gst_npu_memory_set_fence (GstMemory * mem, NpuFence * fence);
GST_NPU_API
NpuFence *gst_npu_memory_get_fence (GstMemory * mem);
GST_NPU_API
gboolean gst_npu_memory_wait (GstMemory * mem, gint64 timeout_us,
    GError ** error);

GST_NPU_API
guint8 *gst_npu_memory_begin_cpu_write (GstMemory * mem);
GST_NPU_API
void gst_npu_memory_end_cpu_write (GstMemory * mem);

G_END_DECLS

#endif /* __GST_NPU_ALLOCATOR_H__ */
