/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the CPU backend
 *
 * One dispatcher thread per device runs ready tasks in order; a task spreads
 * its work over the device's helper threads with npu_task_parallel_for(),
 * the dispatcher taking part.  Helpers spin briefly before sleeping, because
 * a transformer layer issues parallel loops back to back and a futex wake
 * per loop would cost more than the loop on small shapes.
 */
#include "npubackend.h"
#include "npubackend-private.h"
#include "npuevents.h"

#include <stdlib.h>

#include <string.h>
#include <unistd.h>

/* How long a thread spins for the next loop (a helper) or for the helpers
 * to finish theirs (the dispatcher) before it sleeps.  A decoded token's
 * loops follow each other within a few microseconds on a free core, so
 * 30 us covers them (1.1 B llama, two threads: 5 % of the helper's waits
 * end asleep).  Longer waits mean the other thread lost its core, and
 * spinning through them takes CPU time from the thread that has the work:
 * the earlier bound, 20000 pauses (0.37 ms at the 19 ns a pause takes on
 * the Xeon we measure on), decoded about 0.7x as fast on a loaded 2-core
 * machine, and no faster on a free one (docs/kernels.md).  In time rather
 * than pauses, as a pause takes 10 to 140 cycles depending on the CPU. */
#define SPIN_MICROSECONDS 30
/* pauses between two looks at the clock */
#define SPIN_CLOCK_EVERY 16
#define INPUT_FAILED ": an input of this task failed: "

typedef enum
{
  TASK_WAITING,                 /* for its input fences */
  TASK_READY,                   /* in the device's ready queue */
  TASK_RUNNING,
  TASK_DONE,
} TaskState;

struct _NpuTask
{
  gint ref_count;               /* the queue's list + each pending input */
  NpuQueue *queue;              /* valid while the task is not done */
  NpuDevice *device;            /* referenced: input callbacks may outlive the queue */
  NpuTaskFunc func;
  gpointer user_data;
  GDestroyNotify destroy;
  NpuFence *out_fence;
  GList *link;                  /* in queue->tasks while not done */

  TaskState state;
  guint n_waiting;
  GError *input_error;
  gint cancelled;

  /* for npuevents.h: set at submit, the id only while a handler is set */
  const gchar *label;           /* static, or NULL: the queue's name */
  guint64 tag;
  guint64 event_id;
  NpuBytes *bytes;              /* npu_task_report_bytes(), with a handler */

  guint n_threads;              /* the device's, or the queue's cap */
};

struct _NpuQueue
{
  NpuDevice *device;
  gchar *name;
  GQueue tasks;                 /* not yet done, submission order */
  guint n_running;              /* popped by the dispatcher, not finished */
  guint64 tag;                  /* atomic: what the next tasks carry */
  guint max_threads;            /* atomic: 0, or the next tasks' cap */
};

typedef struct
{
  NpuParallelFunc func;
  gpointer user_data;
  gsize n;
  gsize grain;
  gsize n_slices;
  gsize next;                   /* next slice index, atomically claimed */
  guint n_workers;              /* workers 0 .. n_workers - 1 take part */
} ParallelJob;

struct _NpuDevice
{
  gint ref_count;
  guint n_threads;
  gchar *name;
  /* a device of another engine (npubackend-private.h): its dispatcher runs
   * host tasks and hands the engine its work; NULL for the CPU */
  const gchar *kind;
  gchar *engine_key;
  gpointer engine;
  GDestroyNotify engine_free;

  GMutex lock;                  /* everything below but the parallel job */
  GCond cond;
  GQueue ready;
  gboolean quit;
  GThread *dispatcher;

  GThread **helpers;            /* n_threads - 1 */
  GMutex job_lock;
  GCond job_cond;
  GCond job_done_cond;
  ParallelJob *job;
  /* Atomics, see helper_thread() */
  guint job_generation;         /* bumped for every job */
  guint job_busy;               /* helpers that may be using the job */
  guint helpers_sleeping;       /* changed under job_lock */
  gboolean dispatcher_sleeping; /* under job_lock */
  gboolean helpers_quit;        /* under job_lock, unlike quit */
  /* Helpers numbered from here on sit out the running task (its queue's
   * thread cap) asleep on limit_cond, neither spinning nor woken for each
   * loop.  Atomic; written by the dispatcher, under job_lock */
  guint n_active;
  GCond limit_cond;
};

/* Spelled out, as G_DEFINE_QUARK's dashed name does not survive indent. */
GQuark
npu_backend_error_quark (void)
{
  static GQuark quark = 0;
  GQuark q = g_atomic_int_get (&quark);

  /* Atomic: the first callers may race here. */
  if (G_UNLIKELY (q == 0)) {
    q = g_quark_from_static_string ("npu-backend-error-quark");
    g_atomic_int_set (&quark, q);
  }
  return q;
}

/**
 * npu_cpu_count:
 *
 * Returns: the number of online CPUs (at least 1).
 */
guint
npu_cpu_count (void)
{
  long n = sysconf (_SC_NPROCESSORS_ONLN);

  return n > 0 ? (guint) n : 1;
}

/* ------------------------------------------------------------------------
 * Parallel loops
 */
static void
run_job_slices (ParallelJob * job, guint worker)
{
  /* Claim slice indices, not offsets: every thread claims once past the
   * end, and offsets near G_MAXSIZE would wrap round to the start. */
  for (;;) {
    gsize slice = __atomic_fetch_add (&job->next, 1, __ATOMIC_RELAXED);
    gsize start;

    if (slice >= job->n_slices)
      break;
    start = slice * job->grain;
    job->func (start, start + MIN (job->grain, job->n - start), worker,
        job->user_data);
  }
}

static inline void
cpu_relax (void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause ();
#elif defined(__aarch64__)
  __asm__ __volatile__ ("yield");
#endif
}

/* Spins until *@word is @value (@until_equal) or is not, for at most
 * SPIN_MICROSECONDS; the clock is read only once the wait has lasted
 * SPIN_CLOCK_EVERY pauses.  Returns whether the condition was met. */
static gboolean
spin_on (const guint * word, guint value, gboolean until_equal)
{
  gint64 end = 0;
  guint i;

  for (i = 1;; i++) {
    if ((__atomic_load_n (word, __ATOMIC_SEQ_CST) == value) == until_equal)
      return TRUE;
    cpu_relax ();
    if (i % SPIN_CLOCK_EVERY == 0) {
      gint64 now = g_get_monotonic_time ();

      if (end == 0)
        end = now + SPIN_MICROSECONDS;
      else if (now >= end)
        return FALSE;
    }
  }
}

/* The hand-over of a parallel loop takes no lock on the way in or out:
 * with GLib's mutex a helper that found the dispatcher inside its
 * critical section slept in the kernel and came back tens of
 * microseconds later, after most of the loop's slices were gone.  The
 * locks are only for going to sleep, after spinning SPIN_MICROSECONDS,
 * and for waking a sleeper.
 *
 * Claiming a job: a helper counts itself in job_busy *before* it reads
 * the job pointer, and the dispatcher clears the pointer *before* it
 * waits for job_busy to drop to zero (all sequentially consistent), so a
 * helper that read the pointer is always waited for, and one that came
 * too late reads NULL and counts itself out. */
static gpointer
helper_thread (gpointer data)
{
  NpuDevice *device = data;
  guint worker, seen;

  g_mutex_lock (&device->job_lock);
  /* Helpers are numbered 1..n-1 in start order; the dispatcher is 0. */
  for (worker = 1; worker < device->n_threads; worker++)
    if (device->helpers[worker - 1] == g_thread_self ())
      break;
  g_mutex_unlock (&device->job_lock);
  /* Not the current generation: a helper scheduled late must still look
   * at a job published before it got here. */
  seen = 0;

  for (;;) {
    ParallelJob *job;

    if (worker >= __atomic_load_n (&device->n_active, __ATOMIC_SEQ_CST)) {
      g_mutex_lock (&device->job_lock);
      while (worker >= __atomic_load_n (&device->n_active, __ATOMIC_SEQ_CST)
          && !device->helpers_quit)
        g_cond_wait (&device->limit_cond, &device->job_lock);
      if (device->helpers_quit) {
        g_mutex_unlock (&device->job_lock);
        break;
      }
      g_mutex_unlock (&device->job_lock);
      /* the loops published while this helper sat out are closed or will
       * say it is not one of their workers */
      seen = __atomic_load_n (&device->job_generation, __ATOMIC_SEQ_CST);
    }
    if (!spin_on (&device->job_generation, seen, FALSE)) {
      g_mutex_lock (&device->job_lock);
      __atomic_add_fetch (&device->helpers_sleeping, 1, __ATOMIC_SEQ_CST);
      while (__atomic_load_n (&device->job_generation, __ATOMIC_SEQ_CST) ==
          seen && !device->helpers_quit)
        g_cond_wait (&device->job_cond, &device->job_lock);
      __atomic_sub_fetch (&device->helpers_sleeping, 1, __ATOMIC_SEQ_CST);
      if (device->helpers_quit) {
        g_mutex_unlock (&device->job_lock);
        break;
      }
      g_mutex_unlock (&device->job_lock);
    }
    seen = __atomic_load_n (&device->job_generation, __ATOMIC_SEQ_CST);

    __atomic_add_fetch (&device->job_busy, 1, __ATOMIC_SEQ_CST);
    /* NULL if the loop was over before this helper came round to it. */
    job = __atomic_load_n (&device->job, __ATOMIC_SEQ_CST);
    /* a helper beyond the task's cap that had not gone to sleep yet */
    if (job && worker < job->n_workers)
      run_job_slices (job, worker);
    if (__atomic_sub_fetch (&device->job_busy, 1, __ATOMIC_SEQ_CST) == 0) {
      g_mutex_lock (&device->job_lock);
      if (device->dispatcher_sleeping)
        g_cond_signal (&device->job_done_cond);
      g_mutex_unlock (&device->job_lock);
    }
  }
  return NULL;
}

/**
 * npu_task_parallel_for:
 * @n: the loop runs over [0, @n)
 * @grain: slices are this many iterations (at least 1)
 *
 * Runs @func over [0, @n) in slices on the task's threads (the device's,
 * or fewer under npu_queue_set_max_threads()) and returns when every slice
 * is done; @func's worker is below npu_task_get_n_threads().  Only for use
 * inside a task.
 */
void
npu_task_parallel_for (NpuTask * task, gsize n, gsize grain,
    NpuParallelFunc func, gpointer user_data)
{
  NpuDevice *device = task->device;
  ParallelJob job = { func, user_data, n, MAX (grain, 1), 0, 0,
    task->n_threads
  };

  if (n == 0)
    return;
  job.n_slices = n / job.grain + (n % job.grain != 0);
  if (task->n_threads == 1 || job.n_slices == 1) {
    /* Still in slices of @grain: a kernel may size its scratch by it. */
    run_job_slices (&job, 0);
    return;
  }

  __atomic_store_n (&device->job, &job, __ATOMIC_SEQ_CST);
  __atomic_add_fetch (&device->job_generation, 1, __ATOMIC_SEQ_CST);
  /* A helper counts itself asleep before it looks at the generation one
   * last time, under job_lock: it either sees the new generation or is
   * counted here and woken. */
  if (__atomic_load_n (&device->helpers_sleeping, __ATOMIC_SEQ_CST) > 0) {
    g_mutex_lock (&device->job_lock);
    g_cond_broadcast (&device->job_cond);
    g_mutex_unlock (&device->job_lock);
  }

  run_job_slices (&job, 0);

  /* Every slice is claimed: close the job to helpers yet to come round to
   * it (one descheduled helper must not stall every loop for a time
   * slice), and wait only for those that took it, as they use @job, which
   * lives in this stack frame.  They finish their last slice within
   * microseconds: spin for that before sleeping. */
  __atomic_store_n (&device->job, NULL, __ATOMIC_SEQ_CST);
  if (spin_on (&device->job_busy, 0, TRUE))
    return;
  g_mutex_lock (&device->job_lock);
  device->dispatcher_sleeping = TRUE;
  while (__atomic_load_n (&device->job_busy, __ATOMIC_SEQ_CST) > 0)
    g_cond_wait (&device->job_done_cond, &device->job_lock);
  device->dispatcher_sleeping = FALSE;
  g_mutex_unlock (&device->job_lock);
}

typedef struct
{
  NpuClaimFunc func;
  gpointer user_data;
  gsize n, min_claim, share;
  guint n_threads;
  gsize next;                   /* the first unclaimed item (atomic) */
} Claims;

/* One slice per thread: claims runs until none is left */
static void
claims_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Claims *c = data;
  gsize a = __atomic_load_n (&c->next, __ATOMIC_RELAXED);

  while (a < c->n) {
    gsize len = c->n_threads == 1 ? c->n - a :
        MAX (c->min_claim, (c->n - a) / (c->share * c->n_threads));
    gsize b = MIN (c->n, a + len);

    /* on failure a is reloaded with the item another thread left */
    if (__atomic_compare_exchange_n (&c->next, &a, b, FALSE,
            __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
      c->func (a, b, c->user_data);
      a = __atomic_load_n (&c->next, __ATOMIC_RELAXED);
    }
  }
}

void
npu_task_parallel_claims (NpuTask * task, gsize n, gsize min_claim,
    guint share, NpuClaimFunc func, gpointer user_data)
{
  Claims c = { func, user_data, n, MAX (min_claim, 1), MAX (share, 1), 1, 0 };

  if (n == 0)
    return;
  if (!task) {
    func (0, n, user_data);
    return;
  }
  c.n_threads = task->n_threads;
  npu_task_parallel_for (task, c.n_threads, 1, claims_slice, &c);
}

gboolean
npu_task_is_cancelled (NpuTask * task)
{
  return g_atomic_int_get (&task->cancelled);
}

/**
 * npu_task_get_n_threads:
 *
 * Returns: how many threads npu_task_parallel_for() runs @task's loops on:
 * the device's, or its queue's cap (npu_queue_set_max_threads())
 */
guint
npu_task_get_n_threads (NpuTask * task)
{
  return task->n_threads;
}

/**
 * npu_task_report_bytes:
 * @task: the running task
 * @bytes: bytes the task moved (npubytes.h), counted by its code
 *
 * Adds @bytes to the count @task's %NPU_EVENT_TASK_FINISH event carries.
 * Without an event handler this is the one relaxed load of
 * npu_events_enabled(): nothing is kept.  Only from the task's function.
 */
void
npu_task_report_bytes (NpuTask * task, const NpuBytes * bytes)
{
  g_return_if_fail (task != NULL && bytes != NULL);

  if (!npu_events_enabled ())
    return;
  if (!task->bytes)
    task->bytes = g_new0 (NpuBytes, 1);
  npu_bytes_add (task->bytes, bytes);
}

/* Before @task runs, on the dispatcher: the helpers beyond its thread count
 * go to sleep, and those it needs again are woken */
static void
set_active_threads (NpuDevice * device, NpuTask * task)
{
  guint now = __atomic_load_n (&device->n_active, __ATOMIC_SEQ_CST);

  if (task->n_threads == now)
    return;
  g_mutex_lock (&device->job_lock);
  __atomic_store_n (&device->n_active, task->n_threads, __ATOMIC_SEQ_CST);
  if (task->n_threads > now)
    g_cond_broadcast (&device->limit_cond);
  g_mutex_unlock (&device->job_lock);
}

/* ------------------------------------------------------------------------
 * Tasks
 */

/* The slow half of task_event(): a handler is set. */
static void
task_event_emit (NpuTask * task, NpuEventKind kind, gboolean failed)
{
  static guint64 last_id;
  NpuEvent ev = { 0, };

  /* A task submitted before the handler was set gets its id late. */
  if (task->event_id == 0)
    task->event_id = __atomic_add_fetch (&last_id, 1, __ATOMIC_RELAXED);
  ev.kind = kind;
  ev.time_ns = npu_events_now_ns ();
  ev.thread = npu_events_thread_id ();
  ev.task_id = task->event_id;
  ev.queue = task->queue->name;
  ev.label = task->label ? task->label : task->queue->name;
  ev.device = task->device->name;
  ev.tag = task->tag;
  ev.failed = failed;
  ev.bytes = kind == NPU_EVENT_TASK_FINISH ? task->bytes : NULL;
  npu_events_emit_ (&ev);
}

/* Reports @kind of @task to the event handler.  Without one this is the
 * one relaxed atomic load of npu_events_enabled(), on the path of every
 * task. */
static inline void
task_event (NpuTask * task, NpuEventKind kind, gboolean failed)
{
  if (npu_events_enabled ())
    task_event_emit (task, kind, failed);
}

static void
task_unref (NpuTask * task)
{
  if (!g_atomic_int_dec_and_test (&task->ref_count))
    return;
  g_clear_error (&task->input_error);
  g_free (task->bytes);
  npu_fence_unref (task->out_fence);
  npu_device_unref (task->device);
  g_free (task);
}

/* Called with the device lock held: takes the task out of its queue and
 * returns it for task_complete() outside the lock. */
static void
task_retire_locked (NpuTask * task)
{
  task->state = TASK_DONE;
  g_queue_delete_link (&task->queue->tasks, task->link);
  task->link = NULL;
}

/* Outside any lock: frees the user data, then signals the out fence, so
 * that a waiter finds the task's resources released. */
static void
task_complete (NpuTask * task, GError * error)
{
  NpuFence *fence = npu_fence_ref (task->out_fence);

  /* before the fence signals: whoever waits for it sees the task over */
  task_event (task, NPU_EVENT_TASK_FINISH, error != NULL);
  if (task->destroy)
    task->destroy (task->user_data);
  task->user_data = NULL;
  task_unref (task);
  if (error)
    npu_fence_signal_error (fence, error);
  else
    npu_fence_signal (fence);
  npu_fence_unref (fence);
}

static void
task_input_done (NpuFence * input, const GError * error, gpointer user_data)
{
  NpuTask *task = user_data;
  NpuDevice *device = task->device;

  g_mutex_lock (&device->lock);
  if (error && !task->input_error)
    task->input_error = g_error_copy (error);
  if (--task->n_waiting == 0 && task->state == TASK_WAITING) {
    task->state = TASK_READY;
    g_queue_push_tail (&device->ready, task);
    g_cond_broadcast (&device->cond);
  }
  g_mutex_unlock (&device->lock);
  task_unref (task);
}

/* A task that a flush stopped while it ran fails with
 * NPU_FENCE_ERROR_CANCELLED whatever its function reported (an encoder's
 * own domain, say): one code for "cancelled", wherever it happened, so
 * that consumers skip the result rather than treat it as a failure.
 * Takes @error. */
static GError *
cancelled_error (NpuQueue * queue, GError * error)
{
  GError *c;

  if (g_error_matches (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED))
    return error;
  c = g_error_new (NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
      "%s: task cancelled while it ran: %s", queue->name, error->message);
  g_error_free (error);
  return c;
}

static gpointer
dispatcher_thread (gpointer data)
{
  NpuDevice *device = data;

  g_mutex_lock (&device->lock);
  for (;;) {
    NpuTask *task;
    NpuQueue *queue;
    GError *error = NULL;
    gboolean ok;

    while (!device->quit && g_queue_is_empty (&device->ready))
      g_cond_wait (&device->cond, &device->lock);
    if (device->quit && g_queue_is_empty (&device->ready))
      break;

    task = g_queue_pop_head (&device->ready);
    queue = task->queue;
    /* Counted as running until task_complete() is over, failed input or
     * not: a flush must not return (nor the queue, and with it perhaps the
     * last device reference, go away) while the task's destroy notify has
     * yet to run here. */
    task->state = TASK_RUNNING;
    queue->n_running++;

    if (task->input_error) {
      /* An input failed: the data this task would read is not there.  Name
       * the first failure, not every task it went through, or a failure
       * passed down a long chain (a decode loop) grows a message as long as
       * the chain. */
      const gchar *why = task->input_error->message;
      const gchar *nested = strstr (why, INPUT_FAILED);

      if (nested)
        why = nested + strlen (INPUT_FAILED);
      /* An input that was cancelled cancels this task too: the code says
       * so, so that a consumer can tell dropped work from broken work */
      error = g_error_new (NPU_FENCE_ERROR,
          g_error_matches (task->input_error, NPU_FENCE_ERROR,
              NPU_FENCE_ERROR_CANCELLED) ? NPU_FENCE_ERROR_CANCELLED :
          NPU_FENCE_ERROR_FAILED, "%s" INPUT_FAILED "%s", queue->name, why);
    } else {
      g_mutex_unlock (&device->lock);
      set_active_threads (device, task);
      task_event (task, NPU_EVENT_TASK_START, FALSE);
      ok = task->func (task, task->user_data, &error);
      if (!ok && !error)
        error = g_error_new (NPU_FENCE_ERROR, NPU_FENCE_ERROR_FAILED,
            "%s: task failed without saying why", queue->name);
      else if (ok)
        g_clear_error (&error);
      g_mutex_lock (&device->lock);
      if (error && g_atomic_int_get (&task->cancelled))
        error = cancelled_error (queue, error);
    }

    task_retire_locked (task);
    g_mutex_unlock (&device->lock);
    task_complete (task, error);
    g_mutex_lock (&device->lock);
    queue->n_running--;
    g_cond_broadcast (&device->cond);
  }
  g_mutex_unlock (&device->lock);
  return NULL;
}

/* ------------------------------------------------------------------------
 * Devices
 */

/**
 * npu_device_new_cpu:
 * @n_threads: worker threads, or 0 for one per online CPU
 *
 * Returns: (transfer full): a new CPU device with its own threads.
 */
NpuDevice *
npu_device_new_cpu (guint n_threads)
{
  NpuDevice *device = g_new0 (NpuDevice, 1);
  guint i;

  if (n_threads == 0)
    n_threads = npu_cpu_count ();

  device->ref_count = 1;
  device->n_threads = n_threads;
  device->name = g_strdup_printf ("cpu (%u thread%s)", n_threads,
      n_threads == 1 ? "" : "s");
  g_mutex_init (&device->lock);
  g_cond_init (&device->cond);
  g_queue_init (&device->ready);
  g_mutex_init (&device->job_lock);
  g_cond_init (&device->job_cond);
  g_cond_init (&device->job_done_cond);
  g_cond_init (&device->limit_cond);
  device->n_active = n_threads;

  device->helpers = g_new0 (GThread *, MAX (n_threads - 1, 1));
  g_mutex_lock (&device->job_lock);
  for (i = 0; i + 1 < n_threads; i++)
    device->helpers[i] = g_thread_new ("npu-cpu-helper", helper_thread, device);
  g_mutex_unlock (&device->job_lock);
  device->dispatcher = g_thread_new ("npu-cpu", dispatcher_thread, device);
  return device;
}

static GMutex shared_lock;
static GHashTable *shared_devices;      /* n_threads -> NpuDevice (weak) */
static GHashTable *shared_engines;      /* engine key -> NpuDevice (weak) */

/**
 * npu_device_get_cpu:
 * @n_threads: worker threads, or 0 for one per online CPU
 *
 * Returns: (transfer full): the process's CPU device with that many
 * threads, shared by every caller asking for the same count, so that
 * elements in one pipeline do not fight over the cores.
 */
NpuDevice *
npu_device_get_cpu (guint n_threads)
{
  NpuDevice *device;

  if (n_threads == 0)
    n_threads = npu_cpu_count ();

  g_mutex_lock (&shared_lock);
  if (!shared_devices)
    shared_devices = g_hash_table_new (NULL, NULL);
  device = g_hash_table_lookup (shared_devices, GUINT_TO_POINTER (n_threads));
  if (device)
    npu_device_ref (device);
  else {
    device = npu_device_new_cpu (n_threads);
    g_hash_table_insert (shared_devices, GUINT_TO_POINTER (n_threads), device);
  }
  g_mutex_unlock (&shared_lock);
  return device;
}

/**
 * npu_device_get_engine_device:
 * @key: names the engine's device, "vulkan:0" say
 * @create: makes the engine's state for @key (called under a lock, once
 *   per live device)
 *
 * The process's device of another engine for @key, shared like the CPU
 * device: one per key while anyone holds it.  Its one dispatcher thread
 * runs the tasks of its queues in order; @create's result is freed by
 * @engine_free when the last reference goes.
 *
 * Returns: (transfer full) (nullable): the device, or NULL with @error set
 * by @create
 */
NpuDevice *
npu_device_get_engine_device (const gchar * key, const gchar * kind,
    NpuEngineCreateFunc create, gpointer user_data,
    GDestroyNotify engine_free, GError ** error)
{
  NpuDevice *device;
  gchar *name = NULL;
  gpointer engine;

  g_mutex_lock (&shared_lock);
  if (!shared_engines)
    shared_engines = g_hash_table_new (g_str_hash, g_str_equal);
  device = g_hash_table_lookup (shared_engines, key);
  if (device) {
    npu_device_ref (device);
    g_mutex_unlock (&shared_lock);
    return device;
  }
  engine = create (key, user_data, &name, error);
  if (!engine) {
    g_mutex_unlock (&shared_lock);
    return NULL;
  }
  device = npu_device_new_cpu (1);
  g_free (device->name);
  device->name = name;
  device->kind = kind;
  device->engine_key = g_strdup (key);
  device->engine = engine;
  device->engine_free = engine_free;
  g_hash_table_insert (shared_engines, device->engine_key, device);
  g_mutex_unlock (&shared_lock);
  return device;
}

const gchar *
npu_device_get_kind (NpuDevice * device)
{
  return device->kind ? device->kind : "cpu";
}

gpointer
npu_device_get_engine (NpuDevice * device)
{
  return device->engine;
}

/* TRUE if @name is "vulkan" or "vulkan:" followed by a decimal index */
static gboolean
is_vulkan_name (const gchar * name)
{
  const gchar *p;

  if (!g_str_has_prefix (name, "vulkan"))
    return FALSE;
  p = name + strlen ("vulkan");
  if (*p == '\0')
    return TRUE;
  if (*p++ != ':' || *p == '\0')
    return FALSE;
  for (; *p; p++)
    if (!g_ascii_isdigit (*p))
      return FALSE;
  return TRUE;
}

/**
 * npu_device_open:
 * @name: (nullable): "cpu", "vulkan", "vulkan:N" or "auto" (NULL: "auto")
 * @n_threads: the CPU device's worker threads, or 0 for one per online CPU
 * @error: where a name that is no engine of this build is reported
 *
 * The one way the elements and libgstnpu get a device, so that a second
 * engine is one more name here rather than a change in each caller.
 * "auto" is the CPU until a measured rule says which stage goes where.
 *
 * Returns: (transfer full) (nullable): the device, or NULL with @error set
 */
NpuDevice *
npu_device_open (const gchar * name, guint n_threads, GError ** error)
{
  if (name == NULL || g_str_equal (name, "auto") || g_str_equal (name, "cpu"))
    return npu_device_get_cpu (n_threads);
  if (is_vulkan_name (name)) {
#if NPU_HAVE_VULKAN
    const gchar *index = strchr (name, ':');

    return npu_vulkan_device_open (index ? atoi (index + 1) : 0, error);
#else
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_NOT_FOUND,
        "Device \"%s\": this build has no Vulkan backend (build with "
        "libvulkan-dev and glslc installed)", name);
    return NULL;
#endif
  }
  g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_NOT_FOUND,
      "Unknown device \"%s\" (known names: cpu, vulkan, vulkan:N, auto)", name);
  return NULL;
}

NpuDevice *
npu_device_ref (NpuDevice * device)
{
  g_atomic_int_inc (&device->ref_count);
  return device;
}

void
npu_device_unref (NpuDevice * device)
{
  guint i;

  g_return_if_fail (device != NULL);

  /* The shared table holds no reference, so take the lock to keep a
   * concurrent npu_device_get_cpu() from reviving a dying device. */
  g_mutex_lock (&shared_lock);
  if (!g_atomic_int_dec_and_test (&device->ref_count)) {
    g_mutex_unlock (&shared_lock);
    return;
  }
  if (shared_devices && g_hash_table_lookup (shared_devices,
          GUINT_TO_POINTER (device->n_threads)) == device)
    g_hash_table_remove (shared_devices, GUINT_TO_POINTER (device->n_threads));
  if (device->engine_key && shared_engines &&
      g_hash_table_lookup (shared_engines, device->engine_key) == device)
    g_hash_table_remove (shared_engines, device->engine_key);
  g_mutex_unlock (&shared_lock);

  g_mutex_lock (&device->lock);
  device->quit = TRUE;
  g_cond_broadcast (&device->cond);
  g_mutex_unlock (&device->lock);
  g_thread_join (device->dispatcher);

  g_mutex_lock (&device->job_lock);
  device->helpers_quit = TRUE;
  g_cond_broadcast (&device->job_cond);
  g_cond_broadcast (&device->limit_cond);
  g_mutex_unlock (&device->job_lock);
  for (i = 0; i + 1 < device->n_threads; i++)
    g_thread_join (device->helpers[i]);

  if (device->engine_free)
    device->engine_free (device->engine);
  g_free (device->engine_key);
  g_free (device->helpers);
  g_mutex_clear (&device->lock);
  g_cond_clear (&device->cond);
  g_mutex_clear (&device->job_lock);
  g_cond_clear (&device->job_cond);
  g_cond_clear (&device->job_done_cond);
  g_cond_clear (&device->limit_cond);
  g_free (device->name);
  g_free (device);
}

guint
npu_device_get_n_threads (NpuDevice * device)
{
  return device->n_threads;
}

const gchar *
npu_device_get_name (NpuDevice * device)
{
  return device->name;
}

/* ------------------------------------------------------------------------
 * Queues
 */

/**
 * npu_queue_new:
 * @name: names the queue in error messages (an element's name, say)
 *
 * Returns: (transfer full): a queue of work for @device.
 */
NpuQueue *
npu_queue_new (NpuDevice * device, const gchar * name)
{
  NpuQueue *queue = g_new0 (NpuQueue, 1);

  queue->device = npu_device_ref (device);
  g_queue_init (&queue->tasks);
  queue->name = g_strdup (name ? name : "npu-queue");
  queue->tag = NPU_EVENT_NO_TAG;
  return queue;
}

/**
 * npu_queue_set_max_threads:
 * @max_threads: the most threads the tasks submitted from now on spread
 *   their loops over, or 0 for all the device's
 *
 * Caps the tasks of @queue below the device's thread count, so that the
 * other cores stay idle while they run (a decode paced to a rate needs
 * fewer): the helper threads left out sleep, they do not spin.  Other
 * queues' tasks on the same device keep their own count.  A device of
 * another engine runs its work on its own hardware and ignores the cap.
 */
void
npu_queue_set_max_threads (NpuQueue * queue, guint max_threads)
{
  __atomic_store_n (&queue->max_threads, max_threads, __ATOMIC_RELAXED);
}

/**
 * npu_queue_free:
 *
 * Cancels what is still pending (see npu_queue_flush()) and frees the queue.
 */
void
npu_queue_free (NpuQueue * queue)
{
  if (!queue)
    return;
  npu_queue_flush (queue);
  npu_device_unref (queue->device);
  g_free (queue->name);
  g_free (queue);
}

NpuDevice *
npu_queue_get_device (NpuQueue * queue)
{
  return queue->device;
}

/**
 * npu_queue_set_tag:
 * @tag: what the tasks submitted from now on carry in their events
 *   (npuevents.h), or %NPU_EVENT_NO_TAG
 *
 * Names the media the next tasks work on (a frame's PTS, say), for a
 * timeline to tie them to it.  The tag is the queue's, not the thread's:
 * meant for a queue whose tasks one thread submits.
 */
void
npu_queue_set_tag (NpuQueue * queue, guint64 tag)
{
  __atomic_store_n (&queue->tag, tag, __ATOMIC_RELAXED);
}

/**
 * npu_queue_submit:
 * @func: the work; returns FALSE and sets its error on failure
 * @destroy: (nullable): frees @user_data once the task is over, whether it
 *   ran, failed or was cancelled, before its fence signals
 * @in_fences: (array length=n_in_fences): fences the task waits for
 *
 * Returns: (transfer full): the task's fence.  It signals when the task is
 * done; it fails with the task's error, with an input's error (the task
 * does not run), or with NPU_FENCE_ERROR_CANCELLED when the queue is
 * flushed first.
 */
NpuFence *
npu_queue_submit (NpuQueue * queue, NpuTaskFunc func, gpointer user_data,
    GDestroyNotify destroy, NpuFence * const *in_fences, guint n_in_fences)
{
  return npu_queue_submit_labelled (queue, NULL, func, user_data, destroy,
      in_fences, n_in_fences);
}

/**
 * npu_queue_submit_labelled:
 * @label: (nullable): a static string that says what the task does
 *   ("encode", "prefill"...), for its events (npuevents.h); NULL: the
 *   queue's name
 *
 * As npu_queue_submit().
 *
 * Returns: (transfer full): the task's fence.
 */
NpuFence *
npu_queue_submit_labelled (NpuQueue * queue, const gchar * label,
    NpuTaskFunc func, gpointer user_data, GDestroyNotify destroy,
    NpuFence * const *in_fences, guint n_in_fences)
{
  NpuDevice *device = queue->device;
  NpuTask *task = g_new0 (NpuTask, 1);
  NpuFence *out;
  guint i;

  task->ref_count = 1 + n_in_fences;
  task->queue = queue;
  task->device = npu_device_ref (device);
  task->func = func;
  task->user_data = user_data;
  task->destroy = destroy;
  task->out_fence = npu_fence_new ();
  task->state = TASK_WAITING;
  /* One extra count, dropped below, so the task cannot become ready while
   * its inputs are still being registered. */
  task->n_waiting = n_in_fences + 1;
  task->label = label;
  task->tag = __atomic_load_n (&queue->tag, __ATOMIC_RELAXED);
  task->n_threads = __atomic_load_n (&queue->max_threads, __ATOMIC_RELAXED);
  if (task->n_threads == 0 || task->n_threads > device->n_threads)
    task->n_threads = device->n_threads;
  out = npu_fence_ref (task->out_fence);
  /* before the task can start, so that the events come in order */
  task_event (task, NPU_EVENT_TASK_SUBMIT, FALSE);

  g_mutex_lock (&device->lock);
  g_queue_push_tail (&queue->tasks, task);
  task->link = queue->tasks.tail;
  g_mutex_unlock (&device->lock);

  for (i = 0; i < n_in_fences; i++)
    npu_fence_add_callback (in_fences[i], task_input_done, task);

  g_atomic_int_inc (&task->ref_count);
  task_input_done (NULL, NULL, task);
  return out;
}

/**
 * npu_queue_flush:
 *
 * Cancels every task of @queue that has not started (its fence fails with
 * NPU_FENCE_ERROR_CANCELLED and its data is freed), marks a running one as
 * cancelled (npu_task_is_cancelled()) and waits for it to end.  Tasks
 * submitted afterwards run normally.  Not to be called from a task.
 */
void
npu_queue_flush (NpuQueue * queue)
{
  NpuDevice *device = queue->device;
  GList *l, *cancelled = NULL;

  g_mutex_lock (&device->lock);
  for (l = queue->tasks.head; l; l = l->next) {
    NpuTask *task = l->data;

    g_atomic_int_set (&task->cancelled, 1);
    if (task->state == TASK_READY)
      g_queue_remove (&device->ready, task);
    if (task->state != TASK_RUNNING)
      cancelled = g_list_prepend (cancelled, task);
  }
  for (l = cancelled; l; l = l->next)
    task_retire_locked (l->data);
  g_mutex_unlock (&device->lock);

  cancelled = g_list_reverse (cancelled);
  for (l = cancelled; l; l = l->next)
    task_complete (l->data, g_error_new (NPU_FENCE_ERROR,
            NPU_FENCE_ERROR_CANCELLED, "%s: task cancelled by a flush",
            queue->name));
  g_list_free (cancelled);

  g_mutex_lock (&device->lock);
  while (queue->n_running > 0)
    g_cond_wait (&device->cond, &device->lock);
  g_mutex_unlock (&device->lock);
}

/**
 * npu_queue_cancel:
 * @fence: the fence npu_queue_submit() returned for the task
 *
 * Cancels one task of @queue that has not started: its data is freed and
 * its fence fails with NPU_FENCE_ERROR_CANCELLED.  A running or finished
 * task is left alone.
 *
 * Returns: %TRUE if the task was cancelled.
 */
gboolean
npu_queue_cancel (NpuQueue * queue, NpuFence * fence)
{
  NpuDevice *device = queue->device;
  NpuTask *found = NULL;
  GList *l;

  g_mutex_lock (&device->lock);
  for (l = queue->tasks.head; l; l = l->next) {
    NpuTask *task = l->data;

    if (task->out_fence != fence)
      continue;
    if (task->state == TASK_WAITING || task->state == TASK_READY) {
      g_atomic_int_set (&task->cancelled, 1);
      if (task->state == TASK_READY)
        g_queue_remove (&device->ready, task);
      task_retire_locked (task);
      found = task;
    }
    break;
  }
  g_mutex_unlock (&device->lock);

  if (found)
    task_complete (found, g_error_new (NPU_FENCE_ERROR,
            NPU_FENCE_ERROR_CANCELLED, "%s: task cancelled before it ran",
            queue->name));
  return found != NULL;
}

/**
 * npu_queue_get_n_pending:
 *
 * Returns: tasks submitted to @queue that have not finished.
 */
guint
npu_queue_get_n_pending (NpuQueue * queue)
{
  guint n;

  g_mutex_lock (&queue->device->lock);
  n = queue->tasks.length;
  g_mutex_unlock (&queue->device->lock);
  return n;
}
