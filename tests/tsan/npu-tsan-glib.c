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

static void (*real_lock) (GMutex *);
static gboolean (*real_trylock) (GMutex *);
static void (*real_unlock) (GMutex *);
static void (*real_wait) (GCond *, GMutex *);
static gboolean (*real_wait_until) (GCond *, GMutex *, gint64);

static gpointer
real (const char *name)
{
  gpointer f = dlsym (RTLD_NEXT, name);

  if (!f) {
    fprintf (stderr, "npu-tsan-glib: no %s in GLib\n", name);
    abort ();
  }
  return f;
}

/* Resolved once at load, before any thread: a lookup at the first call
 * would itself race. */
__attribute__ ((constructor))
     static void resolve (void)
{
  real_lock = real ("g_mutex_lock");
  real_trylock = real ("g_mutex_trylock");
  real_unlock = real ("g_mutex_unlock");
  real_wait = real ("g_cond_wait");
  real_wait_until = real ("g_cond_wait_until");
}

void
g_mutex_lock (GMutex * mutex)
{
  real_lock (mutex);
  __tsan_acquire (mutex);
}

gboolean
g_mutex_trylock (GMutex * mutex)
{
  gboolean locked;

  locked = real_trylock (mutex);
  if (locked)
    __tsan_acquire (mutex);
  return locked;
}

void
g_mutex_unlock (GMutex * mutex)
{

  __tsan_release (mutex);
  real_unlock (mutex);
}

void
g_cond_wait (GCond * cond, GMutex * mutex)
{

  __tsan_release (mutex);
  real_wait (cond, mutex);
  __tsan_acquire (mutex);
}

gboolean
g_cond_wait_until (GCond * cond, GMutex * mutex, gint64 end_time)
{
  gboolean woken;

  __tsan_release (mutex);
  woken = real_wait_until (cond, mutex, end_time);
  __tsan_acquire (mutex);
  return woken;
}
