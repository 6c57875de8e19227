/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: completion fences over sync_file fds and eventfds
 *
 * An eventfd fence is signalled by writing to it and is never read back, so
 * it stays readable (POLLIN) for every poller, like a signalled sync_file.
 * Callbacks on eventfd fences run in the thread that signals them; sync_file
 * fences are signalled by the kernel, so one watcher thread per process polls
 * those that have callbacks.  A merge of sync_files is a real sync_file
 * (SYNC_IOC_MERGE) that a device can consume; any other merge is an eventfd
 * fence signalled when its last input signals.
 */
/* for ppoll() */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "npufence.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <linux/sync_file.h>

struct _NpuFence
{
  gint ref_count;
  NpuFenceKind kind;
  int fd;

  GMutex lock;
  gboolean signalled;
  GError *error;
  GSList *callbacks;            /* FenceCallback, in reverse order */
  gboolean watched;
};

typedef struct
{
  NpuFenceFunc func;
  gpointer user_data;
} FenceCallback;

/* Spelled out: an indenter turns G_DEFINE_QUARK's dashed name into
 * "npu - fence - error - quark", which then becomes the domain's string. */
GQuark
npu_fence_error_quark (void)
{
  static GQuark quark = 0;
  GQuark q = g_atomic_int_get (&quark);

  /* Atomic: the first callers may race here. */
  if (G_UNLIKELY (q == 0)) {
    q = g_quark_from_static_string ("npu-fence-error-quark");
    g_atomic_int_set (&quark, q);
  }
  return q;
}

static void fence_watch (NpuFence * fence);
static GSList *mark_signalled_locked (NpuFence * fence, GError * error);
static void run_callbacks (NpuFence * fence, GSList * callbacks);

static NpuFence *
fence_new (NpuFenceKind kind, int fd)
{
  NpuFence *fence = g_new0 (NpuFence, 1);

  fence->ref_count = 1;
  fence->kind = kind;
  fence->fd = fd;
  g_mutex_init (&fence->lock);
  return fence;
}

static int
new_eventfd (void)
{
  int fd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);

  /* Out of fds is the only way this fails; nothing sensible can go on. */
  if (fd < 0)
    g_error ("npu fence: eventfd() failed: %s", g_strerror (errno));
  return fd;
}

/**
 * npu_fence_new:
 *
 * Returns: (transfer full): an unsignalled fence backed by an eventfd, to be
 * signalled with npu_fence_signal() or npu_fence_signal_error().
 */
NpuFence *
npu_fence_new (void)
{
  return fence_new (NPU_FENCE_KIND_EVENTFD, new_eventfd ());
}

/**
 * npu_fence_new_signalled:
 *
 * Returns: (transfer full): a fence that is already signalled.
 */
NpuFence *
npu_fence_new_signalled (void)
{
  NpuFence *fence = npu_fence_new ();

  npu_fence_signal (fence);
  return fence;
}

/**
 * npu_fence_new_sync_file:
 * @fd: (transfer full): a sync_file fd
 *
 * Wraps a kernel sync_file (a DRM syncobj export, a dma-buf's exported
 * fence).  The fence owns @fd and closes it when freed.
 *
 * Returns: (transfer full): the fence, or %NULL if @fd is negative.
 */
NpuFence *
npu_fence_new_sync_file (int fd)
{
  g_return_val_if_fail (fd >= 0, NULL);

  return fence_new (NPU_FENCE_KIND_SYNC_FILE, fd);
}

NpuFence *
npu_fence_ref (NpuFence * fence)
{
  g_return_val_if_fail (fence != NULL, NULL);

  g_atomic_int_inc (&fence->ref_count);
  return fence;
}

void
npu_fence_unref (NpuFence * fence)
{
  GSList *callbacks = NULL;

  g_return_if_fail (fence != NULL);

  if (!g_atomic_int_dec_and_test (&fence->ref_count))
    return;

  /* A kernel fence with callbacks is referenced by the watcher, so only an
   * eventfd fence can get here with callbacks pending.  Nobody can signal it
   * any more: fail those callbacks now, or a merge or a task waiting on it
   * would never complete nor be freed. */
  g_mutex_lock (&fence->lock);
  if (fence->callbacks)
    callbacks = mark_signalled_locked (fence, g_error_new (NPU_FENCE_ERROR,
            NPU_FENCE_ERROR_CANCELLED,
            "fence (fd %d) was dropped without being signalled", fence->fd));
  g_mutex_unlock (&fence->lock);
  run_callbacks (fence, callbacks);

  close (fence->fd);
  g_clear_error (&fence->error);
  g_mutex_clear (&fence->lock);
  g_free (fence);
}

NpuFenceKind
npu_fence_get_kind (NpuFence * fence)
{
  return fence->kind;
}

/**
 * npu_fence_get_fd:
 *
 * Returns: the fence's fd, owned by the fence: poll it for POLLIN to learn
 * that the fence has signalled.
 */
int
npu_fence_get_fd (NpuFence * fence)
{
  g_return_val_if_fail (fence != NULL, -1);

  return fence->fd;
}

/* Marks the fence signalled with @error (taken) and returns the callbacks to
 * run, in registration order.  Called with the lock held. */
static GSList *
mark_signalled_locked (NpuFence * fence, GError * error)
{
  GSList *callbacks;

  if (fence->signalled) {
    g_clear_error (&error);
    return NULL;
  }
  fence->signalled = TRUE;
  fence->error = error;
  callbacks = g_slist_reverse (fence->callbacks);
  fence->callbacks = NULL;
  return callbacks;
}

static void
run_callbacks (NpuFence * fence, GSList * callbacks)
{
  GSList *l;

  for (l = callbacks; l; l = l->next) {
    FenceCallback *cb = l->data;

    cb->func (fence, fence->error, cb->user_data);
    g_free (cb);
  }
  g_slist_free (callbacks);
}

/* Reads a sync_file's status; TRUE when it has signalled (with or without
 * an error). */
static gboolean
sync_file_status (int fd, GError ** error)
{
  struct sync_file_info info;

  memset (&info, 0, sizeof (info));
  if (ioctl (fd, SYNC_IOC_FILE_INFO, &info) < 0) {
    /* Not a sync_file after all (an fd someone else signals by POLLIN). */
    struct pollfd p = { fd, POLLIN, 0 };
    return poll (&p, 1, 0) == 1;
  }
  if (info.status < 0)
    g_set_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_FAILED,
        "sync_file fence signalled with error %d (%s)", info.status,
        g_strerror (-info.status));
  return info.status != 0;
}

/* For fences the kernel signals: notices that it has and runs callbacks. */
static gboolean
fence_poll_kernel (NpuFence * fence)
{
  GError *error = NULL;
  GSList *callbacks;
  struct pollfd p = { fence->fd, POLLIN, 0 };

  if (poll (&p, 1, 0) != 1)
    return FALSE;
  if (fence->kind == NPU_FENCE_KIND_SYNC_FILE
      && !sync_file_status (fence->fd, &error))
    return FALSE;

  g_mutex_lock (&fence->lock);
  if (fence->kind != NPU_FENCE_KIND_SYNC_FILE && !fence->signalled) {
    /* An eventfd is readable only once npu_fence_signal() ran; it marks the
     * fence itself, so just wait for that to finish. */
    g_mutex_unlock (&fence->lock);
    g_clear_error (&error);
    return FALSE;
  }
  callbacks = mark_signalled_locked (fence, error);
  g_mutex_unlock (&fence->lock);
  run_callbacks (fence, callbacks);
  return TRUE;
}

static void
fence_signal_take (NpuFence * fence, GError * error)
{
  GSList *callbacks;
  eventfd_t one = 1;

  g_return_if_fail (fence->kind != NPU_FENCE_KIND_SYNC_FILE);

  g_mutex_lock (&fence->lock);
  callbacks = mark_signalled_locked (fence, error);
  g_mutex_unlock (&fence->lock);

  /* Make the fd readable last: a thread woken by poll() finds the result
   * already recorded. */
  if (eventfd_write (fence->fd, one) < 0)
    g_warning ("npu fence: eventfd write failed: %s", g_strerror (errno));
  run_callbacks (fence, callbacks);
}

/**
 * npu_fence_signal:
 *
 * Signals an eventfd fence: its work is done and its data valid.  Signalling
 * twice is harmless; the first result stands.
 */
void
npu_fence_signal (NpuFence * fence)
{
  g_return_if_fail (fence != NULL);

  fence_signal_take (fence, NULL);
}

/**
 * npu_fence_signal_error:
 * @error: (transfer full): why the work failed
 *
 * Signals an eventfd fence whose work failed.  Every waiter receives a copy
 * of @error.
 */
void
npu_fence_signal_error (NpuFence * fence, GError * error)
{
  g_return_if_fail (fence != NULL);
  g_return_if_fail (error != NULL);

  if (fence->kind == NPU_FENCE_KIND_SYNC_FILE) {
    /* The error is ours to free even when the call is refused. */
    g_error_free (error);
    g_return_if_fail (fence->kind != NPU_FENCE_KIND_SYNC_FILE);
  }
  fence_signal_take (fence, error);
}

gboolean
npu_fence_is_signalled (NpuFence * fence)
{
  gboolean signalled;

  g_return_val_if_fail (fence != NULL, FALSE);

  g_mutex_lock (&fence->lock);
  signalled = fence->signalled;
  g_mutex_unlock (&fence->lock);
  if (signalled)
    return TRUE;
  if (fence->kind == NPU_FENCE_KIND_SYNC_FILE)
    return fence_poll_kernel (fence);
  return FALSE;
}

/**
 * npu_fence_get_result:
 *
 * Returns: %TRUE if the fence signalled successfully; %FALSE with @error set
 * if its work failed or was cancelled, or if it has not signalled yet.
 */
gboolean
npu_fence_get_result (NpuFence * fence, GError ** error)
{
  gboolean ok;

  g_return_val_if_fail (fence != NULL, FALSE);

  if (!npu_fence_is_signalled (fence)) {
    g_set_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT,
        "fence (fd %d) has not signalled yet", fence->fd);
    return FALSE;
  }
  g_mutex_lock (&fence->lock);
  ok = fence->error == NULL;
  if (!ok && error)
    *error = g_error_copy (fence->error);
  g_mutex_unlock (&fence->lock);
  return ok;
}

/**
 * npu_fence_wait:
 * @timeout_us: how long to wait in microseconds, or -1 for ever
 *
 * Waits until the fence signals.
 *
 * Returns: %TRUE if it signalled successfully; %FALSE with @error set to
 * NPU_FENCE_ERROR_TIMEOUT if it did not signal in time, or to the error of
 * the work behind the fence.
 */
gboolean
npu_fence_wait (NpuFence * fence, gint64 timeout_us, GError ** error)
{
  gint64 deadline = 0;

  g_return_val_if_fail (fence != NULL, FALSE);

  if (timeout_us >= 0)
    deadline = g_get_monotonic_time () + timeout_us;

  while (!npu_fence_is_signalled (fence)) {
    struct pollfd p = { fence->fd, POLLIN, 0 };
    struct timespec ts, *tsp = NULL;
    int r;

    if (timeout_us >= 0) {
      gint64 left = deadline - g_get_monotonic_time ();

      if (left <= 0) {
        /* Whole milliseconds read best; a shorter timeout would print as
         * "0 ms", so give those in microseconds. */
        gboolean ms = timeout_us % 1000 == 0;

        g_set_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT,
            "fence (%s fd %d) did not signal within %" G_GINT64_FORMAT
            " %s", fence->kind == NPU_FENCE_KIND_SYNC_FILE ? "sync_file" :
            "eventfd", fence->fd, ms ? timeout_us / 1000 : timeout_us,
            ms ? "ms" : "us");
        return FALSE;
      }
      ts.tv_sec = left / G_USEC_PER_SEC;
      ts.tv_nsec = (left % G_USEC_PER_SEC) * 1000;
      tsp = &ts;
    }
    r = ppoll (&p, 1, tsp, NULL);
    if (r < 0 && errno != EINTR) {
      g_set_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_SYSTEM,
          "poll on fence fd %d failed: %s", fence->fd, g_strerror (errno));
      return FALSE;
    }
    /* An eventfd turns readable just after its result is recorded, so the
     * loop's check sees it; a sync_file is read by fence_poll_kernel(). */
  }
  return npu_fence_get_result (fence, error);
}

/**
 * npu_fence_add_callback:
 *
 * Calls @func once when the fence signals: at once, in this thread, if it
 * already has; else in the thread that signals it (eventfd fences) or in the
 * fence watcher thread (kernel fences).  @func must not block.
 */
void
npu_fence_add_callback (NpuFence * fence, NpuFenceFunc func, gpointer user_data)
{
  FenceCallback *cb;
  gboolean now, watch = FALSE;

  g_return_if_fail (fence != NULL && func != NULL);

  if (fence->kind == NPU_FENCE_KIND_SYNC_FILE)
    fence_poll_kernel (fence);

  cb = g_new (FenceCallback, 1);
  cb->func = func;
  cb->user_data = user_data;

  g_mutex_lock (&fence->lock);
  now = fence->signalled;
  if (!now) {
    fence->callbacks = g_slist_prepend (fence->callbacks, cb);
    if (fence->kind == NPU_FENCE_KIND_SYNC_FILE && !fence->watched) {
      fence->watched = TRUE;
      watch = TRUE;
    }
  }
  g_mutex_unlock (&fence->lock);

  if (now) {
    func (fence, fence->error, user_data);
    g_free (cb);
  } else if (watch) {
    fence_watch (fence);
  }
}

/* ------------------------------------------------------------------------
 * The watcher: one thread polling the kernel fences that have callbacks.
 */
static GMutex watch_lock;
static GPtrArray *watch_fences; /* NpuFence, each referenced */
static int watch_wake_fd = -1;

static gpointer
watcher_thread (gpointer unused)
{
  GArray *pfds = g_array_new (FALSE, TRUE, sizeof (struct pollfd));
  GPtrArray *polled = g_ptr_array_new ();

  for (;;) {
    struct pollfd wake = { watch_wake_fd, POLLIN, 0 };
    guint i;

    g_array_set_size (pfds, 0);
    g_ptr_array_set_size (polled, 0);
    g_array_append_val (pfds, wake);
    g_mutex_lock (&watch_lock);
    for (i = 0; i < watch_fences->len; i++) {
      NpuFence *f = g_ptr_array_index (watch_fences, i);
      struct pollfd p = { f->fd, POLLIN, 0 };

      g_array_append_val (pfds, p);
      g_ptr_array_add (polled, f);
    }
    g_mutex_unlock (&watch_lock);

    if (poll ((struct pollfd *) pfds->data, pfds->len, -1) < 0)
      continue;
    if (g_array_index (pfds, struct pollfd, 0).revents)
    {
      eventfd_t v;
      eventfd_read (watch_wake_fd, &v);
    }
    for (i = 1; i < pfds->len; i++) {
      NpuFence *f = g_ptr_array_index (polled, i - 1);

      if (!g_array_index (pfds, struct pollfd, i).revents)
          continue;
      if (!fence_poll_kernel (f) && !npu_fence_is_signalled (f))
        continue;
      g_mutex_lock (&watch_lock);
      g_ptr_array_remove_fast (watch_fences, f);
      g_mutex_unlock (&watch_lock);
      npu_fence_unref (f);
    }
  }
  return NULL;
}

static void
fence_watch (NpuFence * fence)
{
  static gsize started = 0;

  if (g_once_init_enter (&started)) {
    watch_fences = g_ptr_array_new ();
    watch_wake_fd = new_eventfd ();
    g_thread_unref (g_thread_new ("npu-fence-watch", watcher_thread, NULL));
    g_once_init_leave (&started, 1);
  }
  g_mutex_lock (&watch_lock);
  g_ptr_array_add (watch_fences, npu_fence_ref (fence));
  g_mutex_unlock (&watch_lock);
  eventfd_write (watch_wake_fd, 1);
}

/* ------------------------------------------------------------------------
 * Merging
 */
typedef struct
{
  NpuFence *merged;
  gint pending;
  GMutex lock;
  GError *error;
} MergeState;

static void
merge_input_done (NpuFence * input, const GError * error, gpointer user_data)
{
  MergeState *state = user_data;
  gboolean last;

  g_mutex_lock (&state->lock);
  if (error && !state->error)
    state->error = g_error_copy (error);
  last = --state->pending == 0;
  g_mutex_unlock (&state->lock);

  if (!last)
    return;
  if (state->error)
    npu_fence_signal_error (state->merged, state->error);
  else
    npu_fence_signal (state->merged);
  npu_fence_unref (state->merged);
  g_mutex_clear (&state->lock);
  g_free (state);
}

/**
 * npu_fence_merge:
 * @fences: (array length=n_fences): the fences to wait for
 *
 * Returns: (transfer full): a fence that signals when all of @fences have;
 * it fails with the first error among them.  Merging only sync_files gives a
 * real sync_file.
 */
NpuFence *
npu_fence_merge (NpuFence ** fences, guint n_fences)
{
  MergeState *state;
  NpuFence *merged;
  gboolean all_sync_files = TRUE;
  guint i;

  if (n_fences == 0)
    return npu_fence_new_signalled ();
  if (n_fences == 1)
    return npu_fence_ref (fences[0]);

  for (i = 0; i < n_fences; i++)
    all_sync_files &= fences[i]->kind == NPU_FENCE_KIND_SYNC_FILE;

  if (all_sync_files) {
    int fd = dup (fences[0]->fd);

    for (i = 1; i < n_fences && fd >= 0; i++) {
      struct sync_merge_data data;

      memset (&data, 0, sizeof (data));
      g_strlcpy (data.name, "npu-merge", sizeof (data.name));
      data.fd2 = fences[i]->fd;
      if (ioctl (fd, SYNC_IOC_MERGE, &data) < 0) {
        close (fd);
        fd = -1;
        break;
      }
      close (fd);
      fd = data.fence;
    }
    if (fd >= 0)
      return npu_fence_new_sync_file (fd);
    /* The kernel refused: fall back to merging ourselves. */
  }

  merged = fence_new (NPU_FENCE_KIND_MERGED, new_eventfd ());
  state = g_new0 (MergeState, 1);
  state->merged = npu_fence_ref (merged);
  state->pending = n_fences;
  g_mutex_init (&state->lock);
  for (i = 0; i < n_fences; i++)
    npu_fence_add_callback (fences[i], merge_input_done, state);
  return merged;
}
