/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: device-owned buffers
 *
 * A buffer is memory a device can work on: allocated by it, or imported
 * from a dma-buf (or any mappable) fd at an offset, or from a host range.
 * It holds its device, and, when imported from an fd, its mapping, which
 * keeps the file referenced: the caller may close its fd at once.  The CPU
 * device maps an fd with mmap (the offset split into its page-aligned part
 * and the rest) and wraps a host range without a copy; another engine will
 * import the same fd or range into its own memory (docs/device-seam.md).
 * Refcounted; the last unref unmaps and calls the host range's
 * destroy notify.  Map and unmap bracket host access.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_BUFFER_H__
#define __NPU_BUFFER_H__

#include <glib.h>
#include "npuapi.h"
#include "npubackend.h"

G_BEGIN_DECLS

typedef struct _NpuBuffer NpuBuffer;

/**
 * NpuBufferMapFlags:
 * @NPU_BUFFER_MAP_READ: the host reads
 * @NPU_BUFFER_MAP_WRITE: the host writes (fails on a read-only buffer)
 */
typedef enum
{
  NPU_BUFFER_MAP_READ = 1 << 0,
  NPU_BUFFER_MAP_WRITE = 1 << 1,
} NpuBufferMapFlags;

/* @size zero-filled bytes the device can read and write. */
NPU_API
NpuBuffer *npu_buffer_new (NpuDevice * device, gsize size, GError ** error);

/* The bytes [@offset, @offset + @size) of what @fd refers to (a dma-buf,
 * a memfd, a file); read-only where @fd was opened read-only.  Fails with
 * NPU_BACKEND_ERROR_FAILED and a message for a bad fd, an empty range and a
 * range outside the fd's size. */
NPU_API
NpuBuffer *npu_buffer_import_fd (NpuDevice * device, int fd, gsize offset,
    gsize size, GError ** error);

/* @size bytes at @data, not copied; @destroy (nullable) is called with
 * @user_data when the buffer is freed.  @read_only: mapping for writing
 * fails. */
NPU_API
NpuBuffer *npu_buffer_import_host (NpuDevice * device, gpointer data,
    gsize size, gboolean read_only, GDestroyNotify destroy,
    gpointer user_data, GError ** error);

NPU_API
NpuBuffer *npu_buffer_ref (NpuBuffer * buffer);
NPU_API
void npu_buffer_unref (NpuBuffer * buffer);

NPU_API
gsize npu_buffer_get_size (NpuBuffer * buffer);
NPU_API
NpuDevice *npu_buffer_get_device (NpuBuffer * buffer);
NPU_API
gboolean npu_buffer_is_read_only (NpuBuffer * buffer);

/* The buffer's bytes for the host, until npu_buffer_unmap(); maps nest.
 * NULL with @error set for a write map of a read-only buffer. */
NPU_API
gpointer npu_buffer_map (NpuBuffer * buffer, NpuBufferMapFlags flags,
    GError ** error);
NPU_API
void npu_buffer_unmap (NpuBuffer * buffer);
NPU_API
gsize npu_buffer_get_bytes_copied (NpuBuffer * buffer);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (NpuBuffer, npu_buffer_unref)

G_END_DECLS

#endif /* __NPU_BUFFER_H__ */
