/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: task events, for a timeline of what the backend ran
 *
 * One process-wide handler, set once by whoever records a timeline (the
 * npu-timeline tracer), receives an event when a task is submitted, when
 * it starts on a worker thread and when it finishes, with the queue's
 * name, the task's label, the device, the thread and a 64-bit tag that
 * the submitter chose (a frame's PTS, say), so that a recorder can tie the
 * task to the media it worked on.  Code that knows of finer stages than a
 * task (a model's preprocess inside an encode task) reports them with
 * npu_events_stage().
 *
 * Without a handler, an event costs the caller one relaxed atomic load of
 * the handler pointer and a branch (npu_events_enabled()): no clock is
 * read, no thread id looked up, nothing allocated.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_EVENTS_H__
#define __NPU_EVENTS_H__

#include <glib.h>
#include "npuapi.h"
#include "npubytes.h"

G_BEGIN_DECLS

/* A tag that names no media: what tasks carry unless their queue's tag was
 * set (npu_queue_set_tag()).  GStreamer's GST_CLOCK_TIME_NONE, so that a
 * buffer's PTS can be a tag as it is. */
#define NPU_EVENT_NO_TAG G_MAXUINT64

/**
 * NpuEventKind:
 * @NPU_EVENT_TASK_SUBMIT: npu_queue_submit() returned the task's fence
 *   (on the submitting thread)
 * @NPU_EVENT_TASK_START: the task's function is called (on the worker)
 * @NPU_EVENT_TASK_FINISH: the task is over: ran, failed, or was cancelled
 *   before it ran (@failed says whether its fence fails); on the worker,
 *   or on the thread that cancelled it
 * @NPU_EVENT_STAGE_BEGIN: a stage inside a task began (npu_events_stage())
 * @NPU_EVENT_STAGE_END: that stage ended
 */
typedef enum
{
  NPU_EVENT_TASK_SUBMIT,
  NPU_EVENT_TASK_START,
  NPU_EVENT_TASK_FINISH,
  NPU_EVENT_STAGE_BEGIN,
  NPU_EVENT_STAGE_END,
} NpuEventKind;

/**
 * NpuEvent:
 * @kind: what happened
 * @time_ns: CLOCK_MONOTONIC, in nanoseconds
 * @thread: the kernel's id of the thread it happened on (gettid())
 * @task_id: the task's number, unique in the process, the same in its
 *   submit, start and finish events (0 for a stage outside a task)
 * @queue: the queue's name (an element's, say); NULL for a stage
 * @label: what the task or stage does ("encode", "prefill", "token"...),
 *   a static string; for a task without one, the queue's name
 * @device: the device's name ("cpu (2 threads)"); NULL for a stage
 * @tag: the submitter's tag, or %NPU_EVENT_NO_TAG
 * @failed: for %NPU_EVENT_TASK_FINISH, whether the task's fence fails
 * @bytes: for %NPU_EVENT_TASK_FINISH, the bytes the task reported moving
 *   (npu_task_report_bytes()), or NULL where it reported none
 *
 * The strings are valid during the handler's call only.
 */
typedef struct
{
  NpuEventKind kind;
  gint64 time_ns;
  gint64 thread;
  guint64 task_id;
  const gchar *queue;
  const gchar *label;
  const gchar *device;
  guint64 tag;
  gboolean failed;
  const NpuBytes *bytes;
} NpuEvent;

/* Called on the thread the event happened on, with no lock of the
 * backend's held; it must be thread-safe and quick (it is on the path of
 * every task). */
typedef void (*NpuEventFunc) (const NpuEvent * event, gpointer user_data);

NPU_API
void npu_events_set_handler (NpuEventFunc func, gpointer user_data);

NPU_API
gint64 npu_events_now_ns (void);
NPU_API
gint64 npu_events_thread_id (void);

/* The handler pointer; not for direct use. */
NPU_API NpuEventFunc npu_events_handler_;

/**
 * npu_events_enabled:
 *
 * Returns: whether a handler is set.  One relaxed atomic load: callers test
 * it before they gather what an event needs.
 */
static inline gboolean
npu_events_enabled (void)
{
  return G_UNLIKELY (__atomic_load_n (&npu_events_handler_,
          __ATOMIC_RELAXED) != NULL);
}

NPU_API
void npu_events_emit_ (const NpuEvent * event);

NPU_API
void npu_events_stage_ (NpuEventKind kind, const gchar * label, guint64 tag);

/**
 * npu_events_stage:
 * @begin: %TRUE where the stage begins, %FALSE where it ends
 * @label: (not nullable): a static string naming the stage
 * @tag: the media it works on, or %NPU_EVENT_NO_TAG
 *
 * Reports the beginning or end of a stage on the calling thread.  Free
 * (one relaxed load) when no handler is set.
 */
static inline void
npu_events_stage (gboolean begin, const gchar * label, guint64 tag)
{
  if (npu_events_enabled ())
    npu_events_stage_ (begin ? NPU_EVENT_STAGE_BEGIN : NPU_EVENT_STAGE_END,
        label, tag);
}

G_END_DECLS

#endif /* __NPU_EVENTS_H__ */
