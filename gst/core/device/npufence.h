/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: completion fences over sync_file fds and eventfds
 *
 * A fence is a pollable fd with sync_file semantics: POLLIN means signalled.
 * Real sync_files (a DRM syncobj export, a dma-buf's exported fence) are used
 * as they are; where the kernel gives none, an eventfd stands in.  The CPU
 * backend signals eventfd fences; a fence may also carry the error of the
 * task that produced it, which every waiter receives.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_FENCE_H__
#define __NPU_FENCE_H__

#include <glib.h>
#include "npuapi.h"

G_BEGIN_DECLS

#define NPU_FENCE_ERROR (npu_fence_error_quark ())
NPU_API
GQuark npu_fence_error_quark (void);

/**
 * NpuFenceError:
 * @NPU_FENCE_ERROR_TIMEOUT: the fence did not signal within the timeout
 * @NPU_FENCE_ERROR_FAILED: the work behind the fence failed (message says why)
 * @NPU_FENCE_ERROR_CANCELLED: the work behind the fence was cancelled (flush)
 * @NPU_FENCE_ERROR_SYSTEM: a system call on the fence fd failed
 */
typedef enum
{
  NPU_FENCE_ERROR_TIMEOUT,
  NPU_FENCE_ERROR_FAILED,
  NPU_FENCE_ERROR_CANCELLED,
  NPU_FENCE_ERROR_SYSTEM,
} NpuFenceError;

typedef enum
{
  NPU_FENCE_KIND_EVENTFD,
  NPU_FENCE_KIND_SYNC_FILE,
  NPU_FENCE_KIND_MERGED,
} NpuFenceKind;

typedef struct _NpuFence NpuFence;

/* Called once, from whichever thread sees the fence signal (possibly the
 * caller of npu_fence_add_callback() if it is already signalled).  @error is
 * NULL on success and owned by the fence.  If the last reference to an
 * unsignalled fence is dropped, nothing can signal it any more: its pending
 * callbacks then run at once with NPU_FENCE_ERROR_CANCELLED, and must not
 * take a reference to the dying fence. */
typedef void (*NpuFenceFunc) (NpuFence * fence, const GError * error,
    gpointer user_data);

NPU_API
NpuFence *npu_fence_new (void);
NPU_API
NpuFence *npu_fence_new_signalled (void);
NPU_API
NpuFence *npu_fence_new_sync_file (int fd);
NPU_API
NpuFence *npu_fence_merge (NpuFence ** fences, guint n_fences);

NPU_API
NpuFence *npu_fence_ref (NpuFence * fence);
NPU_API
void npu_fence_unref (NpuFence * fence);

NPU_API
void npu_fence_signal (NpuFence * fence);
NPU_API
void npu_fence_signal_error (NpuFence * fence, GError * error);

NPU_API
NpuFenceKind npu_fence_get_kind (NpuFence * fence);
NPU_API
int npu_fence_get_fd (NpuFence * fence);
NPU_API
gboolean npu_fence_is_signalled (NpuFence * fence);
NPU_API
gboolean npu_fence_wait (NpuFence * fence, gint64 timeout_us, GError ** error);
NPU_API
gboolean npu_fence_get_result (NpuFence * fence, GError ** error);
NPU_API
void npu_fence_add_callback (NpuFence * fence, NpuFenceFunc func,
    gpointer user_data);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (NpuFence, npu_fence_unref)

G_END_DECLS

#endif /* __NPU_FENCE_H__ */
