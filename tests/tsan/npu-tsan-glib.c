/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GLib's mutexes made visible to ThreadSanitizer
 *
 * GLib on Linux implements GMutex and GCond on futexes of its own, not on
 * pthread mutexes, and is not built with -fsanitize=thread: ThreadSanitizer
 * sees neither the lock nor the unlock, and reports every access guarded by
 * a GMutex (ours, and GstObject's lock) as a data race.  Preloaded into a
 * ThreadSanitizer run (LD_PRELOAD, tests/run.sh), this library wraps
 * g_mutex_lock/trylock/unlock and g_cond_wait/wait_until, calls GLib's own
 * (dlsym RTLD_NEXT) and tells ThreadSanitizer of the happens-before edges
 * they make: an unlock releases the mutex, a lock acquires it.  It adds no
 * locking of its own; GRecMutex, GRWLock, thread creation and joins go
 * through pthreads, which ThreadSanitizer already intercepts.
 */
#include <glib.h>
#include <sanitizer/tsan_interface.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static gpointer real_lock, real_trylock, real_unlock, real_wait,
    real_wait_until;

/* GLib's own function @name, looked up at the first call (GObject's and
 * GStreamer's constructors lock mutexes before ours could run).  Atomic:
 * threads may race to the first call, and the answer is the same. */
static gpointer
real (gpointer * slot, const char *name)
{
  gpointer f = __atomic_load_n (slot, __ATOMIC_ACQUIRE);

  if (!f) {
    f = dlsym (RTLD_NEXT, name);
    if (!f) {
      fprintf (stderr, "npu-tsan-glib: no %s in GLib\n", name);
      abort ();
    }
    __atomic_store_n (slot, f, __ATOMIC_RELEASE);
  }
  return f;
}

void
g_mutex_lock (GMutex * mutex)
{
  ((void (*)(GMutex *)) real (&real_lock, "g_mutex_lock")) (mutex);
  __tsan_acquire (mutex);
}

gboolean
g_mutex_trylock (GMutex * mutex)
{
  gboolean locked;

  locked = ((gboolean (*)(GMutex *)) real (&real_trylock,
          "g_mutex_trylock")) (mutex);
  if (locked)
    __tsan_acquire (mutex);
  return locked;
}

void
g_mutex_unlock (GMutex * mutex)
{

  __tsan_release (mutex);
  ((void (*)(GMutex *)) real (&real_unlock, "g_mutex_unlock")) (mutex);
}

void
g_cond_wait (GCond * cond, GMutex * mutex)
{

  __tsan_release (mutex);
  ((void (*)(GCond *, GMutex *)) real (&real_wait, "g_cond_wait")) (cond,
      mutex);
  __tsan_acquire (mutex);
}

gboolean
g_cond_wait_until (GCond * cond, GMutex * mutex, gint64 end_time)
{
  gboolean woken;

  __tsan_release (mutex);
  woken = ((gboolean (*)(GCond *, GMutex *, gint64)) real (&real_wait_until,
          "g_cond_wait_until")) (cond, mutex, end_time);
  __tsan_acquire (mutex);
  return woken;
}

/* GThreadPool (GstTaskPool's threads) hands work over through a GAsyncQueue
 * whose lock GLib takes internally, out of this library's reach: the push
 * releases, and the pool's thread acquires before it runs the work, one
 * sync object for all pools (coarser than the real edges, never missing
 * one). */
static gint pool_sync;

typedef struct
{
  GFunc func;
  gpointer user_data;
} PoolFunc;

static void
pool_trampoline (gpointer data, gpointer user_data)
{
  PoolFunc *pf = user_data;

  __tsan_acquire (&pool_sync);
  pf->func (data, pf->user_data);
}

/* The PoolFunc lives as long as the process: a pool does not say when it
 * is freed, and these are a few bytes in a test run. */
GThreadPool *
g_thread_pool_new (GFunc func, gpointer user_data, gint max_threads,
    gboolean exclusive, GError ** error)
{
  static gpointer real_new;
  PoolFunc *pf = g_new (PoolFunc, 1);

  pf->func = func;
  pf->user_data = user_data;
  __tsan_release (&pool_sync);
  return ((GThreadPool * (*)(GFunc, gpointer, gint, gboolean, GError **))
      real (&real_new, "g_thread_pool_new")) (pool_trampoline, pf,
      max_threads, exclusive, error);
}

gboolean
g_thread_pool_push (GThreadPool * pool, gpointer data, GError ** error)
{
  static gpointer real_push;

  __tsan_release (&pool_sync);
  return ((gboolean (*)(GThreadPool *, gpointer, GError **))
      real (&real_push, "g_thread_pool_push")) (pool, data, error);
}
