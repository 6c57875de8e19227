/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: task events (see npuevents.h) */
#include "npuevents.h"

#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

NpuEventFunc npu_events_handler_ = NULL;
static gpointer handler_data;

/**
 * npu_events_set_handler:
 * @func: (nullable): receives every event from now on; NULL stops them
 * @user_data: passed to @func
 *
 * Sets the process's one handler.  It is meant to be set once (a tracer
 * does when it is created) and cleared at most once: an event already on
 * its way may still reach the old handler after it was cleared, so the
 * handler's data must outlive the call that clears it.  Setting a second
 * handler while one is set is refused.
 */
void
npu_events_set_handler (NpuEventFunc func, gpointer user_data)
{
  if (func && __atomic_load_n (&npu_events_handler_, __ATOMIC_ACQUIRE)) {
    g_critical ("npu_events_set_handler: a handler is already set");
    return;
  }
  if (!func) {
    __atomic_store_n (&npu_events_handler_, NULL, __ATOMIC_RELEASE);
    return;
  }
  /* The data first: an emitter that sees the function with acquire
   * ordering sees its data too. */
  __atomic_store_n (&handler_data, user_data, __ATOMIC_RELAXED);
  __atomic_store_n (&npu_events_handler_, func, __ATOMIC_RELEASE);
}

/**
 * npu_events_now_ns:
 *
 * Returns: CLOCK_MONOTONIC in nanoseconds, the events' clock (GStreamer's
 * tracers read the same clock).
 */
gint64
npu_events_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (gint64) ts.tv_sec * G_GINT64_CONSTANT (1000000000) + ts.tv_nsec;
}

/**
 * npu_events_thread_id:
 *
 * Returns: the kernel's id of the calling thread, the one `top -H` and
 * perf show, which names a lane in a timeline.
 */
gint64
npu_events_thread_id (void)
{
  return (gint64) syscall (SYS_gettid);
}

/* The slow path, once npu_events_enabled() said a handler is set: the
 * handler may have been cleared since, so it is loaded again. */
void
npu_events_emit_ (const NpuEvent * event)
{
  NpuEventFunc func = __atomic_load_n (&npu_events_handler_,
      __ATOMIC_ACQUIRE);

  if (func)
    func (event, __atomic_load_n (&handler_data, __ATOMIC_RELAXED));
}

void
npu_events_stage_ (NpuEventKind kind, const gchar * label, guint64 tag)
{
  NpuEvent ev = { 0, };

  ev.kind = kind;
  ev.time_ns = npu_events_now_ns ();
  ev.thread = npu_events_thread_id ();
  ev.label = label;
  ev.tag = tag;
  npu_events_emit_ (&ev);
}
