/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the compute device API (CPU backend)
 *
 * A device owns worker threads.  Work is submitted to a queue (one per
 * element, say) as a task with input fences; submit returns the task's
 * output fence at once.  A task runs when all its input fences have
 * signalled; if one of them failed, the task does not run and its fence
 * carries that error.  A task that fails reports a GError, which whoever
 * waits on its fence receives.  Flushing a queue cancels its pending tasks
 * (their fences fail with NPU_FENCE_ERROR_CANCELLED), asks the running one to
 * stop and waits until nothing of the queue is running.
 *
 * Cancellation has one code end to end: NPU_FENCE_ERROR_CANCELLED is what a
 * fence fails with when its task was cancelled before it ran, when it
 * failed after a flush asked it to stop (whatever error it returned), and
 * when an input it waited for was cancelled.  Consumers skip such results;
 * any other error is a failure.
 *
 * Tasks run one at a time per device, in the order they become ready; a task
 * spreads its own work over all the device's threads (or its queue's cap)
 * with npu_task_parallel_for().  On a machine with a few cores, one operation on
 * every core beats several operations each on one.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_BACKEND_H__
#define __NPU_BACKEND_H__

#include <glib.h>
#include "npuapi.h"
#include "npufence.h"
#include "npuevents.h"

G_BEGIN_DECLS

typedef struct _NpuDevice NpuDevice;
typedef struct _NpuQueue NpuQueue;
typedef struct _NpuTask NpuTask;

/* Returns FALSE and sets @error on failure. */
typedef gboolean (*NpuTaskFunc) (NpuTask * task, gpointer user_data,
    GError ** error);
/* One slice [start, end) of a parallel loop, run on worker @worker. */
typedef void (*NpuParallelFunc) (gsize start, gsize end, guint worker,
    gpointer user_data);
/* One claimed run [start, end) of npu_task_parallel_claims(). */
typedef void (*NpuClaimFunc) (gsize start, gsize end, gpointer user_data);

NPU_API
guint npu_cpu_count (void);

NPU_API
NpuDevice *npu_device_new_cpu (guint n_threads);
NPU_API
NpuDevice *npu_device_get_cpu (guint n_threads);
/* Opens a device by name: "cpu" (the process's shared CPU device with
 * @n_threads worker threads, 0 for one per online CPU, as
 * npu_device_get_cpu()), "vulkan" or "vulkan:N" (the Vulkan device of that
 * index), or "auto" (NULL is "auto": today the CPU, the one engine
 * built).  @n_threads is the CPU device's only; other engines ignore it.
 * A name that is not an engine of this build fails with
 * NPU_BACKEND_ERROR_NOT_FOUND and a message that says so.  "cpu" and
 * "auto" never fail. */
NPU_API
NpuDevice *npu_device_open (const gchar * name, guint n_threads,
    GError ** error);
NPU_API
NpuDevice *npu_device_ref (NpuDevice * device);
NPU_API
void npu_device_unref (NpuDevice * device);
NPU_API
guint npu_device_get_n_threads (NpuDevice * device);
NPU_API
const gchar *npu_device_get_name (NpuDevice * device);
/* "cpu" or "vulkan": the engine behind @device */
NPU_API
const gchar *npu_device_get_kind (NpuDevice * device);

NPU_API
NpuQueue *npu_queue_new (NpuDevice * device, const gchar * name);
NPU_API
void npu_queue_free (NpuQueue * queue);
NPU_API
NpuDevice *npu_queue_get_device (NpuQueue * queue);
NPU_API
NpuFence *npu_queue_submit (NpuQueue * queue, NpuTaskFunc func,
    gpointer user_data, GDestroyNotify destroy,
    NpuFence * const *in_fences, guint n_in_fences);
NPU_API
NpuFence *npu_queue_submit_labelled (NpuQueue * queue, const gchar * label,
    NpuTaskFunc func, gpointer user_data, GDestroyNotify destroy,
    NpuFence * const *in_fences, guint n_in_fences);
NPU_API
void npu_queue_set_tag (NpuQueue * queue, guint64 tag);
NPU_API
void npu_queue_set_max_threads (NpuQueue * queue, guint max_threads);
NPU_API
void npu_queue_flush (NpuQueue * queue);
NPU_API
gboolean npu_queue_cancel (NpuQueue * queue, NpuFence * fence);
NPU_API
guint npu_queue_get_n_pending (NpuQueue * queue);

NPU_API
gboolean npu_task_is_cancelled (NpuTask * task);
NPU_API
guint npu_task_get_n_threads (NpuTask * task);
/* Adds @bytes to what @task's finish event carries (npuevents.h); nothing
 * without an event handler.  From the task's own function. */
NPU_API
void npu_task_report_bytes (NpuTask * task, const NpuBytes * bytes);
NPU_API
void npu_task_parallel_for (NpuTask * task, gsize n, gsize grain,
    NpuParallelFunc func, gpointer user_data);
/* Items [0, @n) claimed guided by the task's threads: each claim takes
 * 1 / (@share x threads) of the items still left, at least @min_claim,
 * and a task of one thread takes them all at once; @func runs each claim
 * on the thread that made it.  So the runs each thread streams stay long
 * (a product's rows read as few long streams) and a thread that comes late
 * still finds work, where equal slices would leave it the last one whole.
 * @task may be NULL: one claim of everything on this thread. */
NPU_API
void npu_task_parallel_claims (NpuTask * task, gsize n, gsize min_claim,
    guint share, NpuClaimFunc func, gpointer user_data);

/**
 * NpuBackendError:
 * @NPU_BACKEND_ERROR_FAILED: a task failed (its message says why)
 * @NPU_BACKEND_ERROR_NOT_FOUND: no such device in this build or machine
 */
typedef enum
{
  NPU_BACKEND_ERROR_FAILED,
  NPU_BACKEND_ERROR_NOT_FOUND,
} NpuBackendError;

#define NPU_BACKEND_ERROR (npu_backend_error_quark ())
NPU_API
GQuark npu_backend_error_quark (void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (NpuDevice, npu_device_unref)

G_END_DECLS

#endif /* __NPU_BACKEND_H__ */
