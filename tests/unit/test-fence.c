/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the completion fences (compute core, GLib only)
 *
 * Real sync_files need sw_sync or a DRM device, which a stock Debian kernel
 * does not give an unprivileged test; they are tested in a VM.  Here a
 * "sync_file" fence wraps an eventfd, which the fence code treats as a
 * foreign pollable fd (SYNC_IOC_FILE_INFO fails on it): signalled once
 * readable.  That still drives the watcher thread and the kernel-fence paths.
 */
#include <core/device/npufence.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

/* Long enough that a missing wakeup fails the test rather than hanging it,
 * short enough for valgrind. */
#define LONG_TIMEOUT_US (10 * G_USEC_PER_SEC)

#define TEST_ERROR (test_error_quark ())
static GQuark
test_error_quark (void)
{
  return g_quark_from_static_string ("npu-test-error-quark");
}

static gboolean
fd_readable (int fd)
{
  struct pollfd p = { fd, POLLIN, 0 };
  int r = poll (&p, 1, 0);

  g_assert_cmpint (r, >=, 0);
  /* A pollable fd never reports POLLNVAL/POLLERR here. */
  g_assert_false (p.revents & (POLLNVAL | POLLERR));
  return r == 1 && (p.revents & POLLIN);
}

static gboolean
fd_is_open (int fd)
{
  return fcntl (fd, F_GETFD) >= 0 || errno != EBADF;
}

static guint
count_open_fds (void)
{
  DIR *dir = opendir ("/proc/self/fd");
  struct dirent *d;
  guint n = 0;

  g_assert_nonnull (dir);
  while ((d = readdir (dir)))
    if (d->d_name[0] != '.')
      n++;
  closedir (dir);
  return n;
}

/* ------------------------------------------------------------------------
 * Callback recording, safe from any thread
 */
#define MAX_CALLS 64

typedef struct
{
  GMutex lock;
  GCond cond;
  guint n_calls;
  gint order[MAX_CALLS];
  GThread *thread[MAX_CALLS];
  GQuark domain[MAX_CALLS];
  gint code[MAX_CALLS];
  gchar *message[MAX_CALLS];
  NpuFence *fence[MAX_CALLS];
} Recorder;

typedef struct
{
  Recorder *rec;
  gint id;
} RecordArg;

static void
recorder_init (Recorder * rec)
{
  memset (rec, 0, sizeof (*rec));
  g_mutex_init (&rec->lock);
  g_cond_init (&rec->cond);
}

static void
recorder_clear (Recorder * rec)
{
  guint i;

  for (i = 0; i < rec->n_calls; i++)
    g_free (rec->message[i]);
  g_mutex_clear (&rec->lock);
  g_cond_clear (&rec->cond);
}

static void
record_cb (NpuFence * fence, const GError * error, gpointer user_data)
{
  RecordArg *arg = user_data;
  Recorder *rec = arg->rec;

  g_mutex_lock (&rec->lock);
  g_assert_cmpuint (rec->n_calls, <, MAX_CALLS);
  rec->order[rec->n_calls] = arg->id;
  rec->thread[rec->n_calls] = g_thread_self ();
  rec->fence[rec->n_calls] = fence;
  if (error) {
    rec->domain[rec->n_calls] = error->domain;
    rec->code[rec->n_calls] = error->code;
    rec->message[rec->n_calls] = g_strdup (error->message);
  }
  rec->n_calls++;
  g_cond_broadcast (&rec->cond);
  g_mutex_unlock (&rec->lock);
}

/* Waits until @n calls were recorded; fails rather than hang. */
static void
recorder_wait (Recorder * rec, guint n)
{
  gint64 end = g_get_monotonic_time () + LONG_TIMEOUT_US;

  g_mutex_lock (&rec->lock);
  while (rec->n_calls < n)
    if (!g_cond_wait_until (&rec->cond, &rec->lock, end))
      break;
  g_assert_cmpuint (rec->n_calls, ==, n);
  g_mutex_unlock (&rec->lock);
}

static guint
recorder_n_calls (Recorder * rec)
{
  guint n;

  g_mutex_lock (&rec->lock);
  n = rec->n_calls;
  g_mutex_unlock (&rec->lock);
  return n;
}

/* ------------------------------------------------------------------------
 * Basics
 */
static void
test_new (void)
{
  NpuFence *fence = npu_fence_new ();
  GError *error = NULL;
  int fd;

  g_assert_nonnull (fence);
  g_assert_cmpint (npu_fence_get_kind (fence), ==, NPU_FENCE_KIND_EVENTFD);
  fd = npu_fence_get_fd (fence);
  g_assert_cmpint (fd, >=, 0);
  g_assert_false (fd_readable (fd));
  g_assert_false (npu_fence_is_signalled (fence));
  g_assert_false (npu_fence_get_result (fence, &error));
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "not signalled"));
  g_clear_error (&error);
  /* A zero timeout polls. */
  g_assert_false (npu_fence_wait (fence, 0, &error));
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT);
  g_clear_error (&error);
  g_assert_false (fd_readable (fd));
  npu_fence_unref (fence);
  g_assert_false (fd_is_open (fd));
}

static void
test_signal (void)
{
  NpuFence *fence = npu_fence_new ();
  GError *error = NULL;
  int fd = npu_fence_get_fd (fence);

  npu_fence_signal (fence);
  g_assert_true (fd_readable (fd));
  g_assert_true (npu_fence_is_signalled (fence));
  g_assert_true (npu_fence_wait (fence, -1, &error));
  g_assert_no_error (error);
  g_assert_true (npu_fence_wait (fence, 0, &error));
  g_assert_no_error (error);
  g_assert_true (npu_fence_get_result (fence, &error));
  g_assert_no_error (error);
  /* Never read back: still readable for the next poller. */
  g_assert_true (fd_readable (fd));
  /* NULL error pointers are fine. */
  g_assert_true (npu_fence_wait (fence, 0, NULL));
  npu_fence_unref (fence);

  fence = npu_fence_new_signalled ();
  g_assert_cmpint (npu_fence_get_kind (fence), ==, NPU_FENCE_KIND_EVENTFD);
  g_assert_true (npu_fence_is_signalled (fence));
  g_assert_true (fd_readable (npu_fence_get_fd (fence)));
  g_assert_true (npu_fence_wait (fence, 0, &error));
  g_assert_no_error (error);
  npu_fence_unref (fence);
}

static void
test_signal_error (void)
{
  NpuFence *fence = npu_fence_new ();
  GError *error = NULL;

  npu_fence_signal_error (fence, g_error_new (TEST_ERROR, 7, "kernel %s",
          "exploded"));
  g_assert_true (fd_readable (npu_fence_get_fd (fence)));
  g_assert_true (npu_fence_is_signalled (fence));
  g_assert_false (npu_fence_wait (fence, 0, &error));
  g_assert_error (error, TEST_ERROR, 7);
  g_assert_cmpstr (error->message, ==, "kernel exploded");
  g_clear_error (&error);
  g_assert_false (npu_fence_get_result (fence, &error));
  g_assert_error (error, TEST_ERROR, 7);
  g_clear_error (&error);
  /* Failing without asking for the error is fine too. */
  g_assert_false (npu_fence_wait (fence, -1, NULL));
  npu_fence_unref (fence);
}

static void
test_refcount (void)
{
  NpuFence *fence = npu_fence_new ();
  int fd = npu_fence_get_fd (fence);

  g_assert_true (npu_fence_ref (fence) == fence);
  g_assert_true (npu_fence_ref (fence) == fence);
  npu_fence_unref (fence);
  npu_fence_unref (fence);
  /* One reference left: the fd is still the fence's. */
  g_assert_true (fd_is_open (fd));
  npu_fence_signal (fence);
  g_assert_true (fd_readable (fd));
  npu_fence_unref (fence);
  g_assert_false (fd_is_open (fd));

  /* g_autoptr support */
  {
    g_autoptr (NpuFence) f = npu_fence_new_signalled ();

    fd = npu_fence_get_fd (f);
    g_assert_true (npu_fence_is_signalled (f));
  }
  g_assert_false (fd_is_open (fd));
}

static void
test_double_signal (void)
{
  NpuFence *fence;
  GError *error = NULL;
  Recorder rec;
  RecordArg arg;

  recorder_init (&rec);
  arg.rec = &rec;
  arg.id = 1;

  /* Success first: a later error is dropped (and freed: valgrind). */
  fence = npu_fence_new ();
  npu_fence_add_callback (fence, record_cb, &arg);
  npu_fence_signal (fence);
  npu_fence_signal (fence);
  npu_fence_signal_error (fence, g_error_new (TEST_ERROR, 1, "late"));
  g_assert_true (npu_fence_wait (fence, 0, &error));
  g_assert_no_error (error);
  g_assert_true (fd_readable (npu_fence_get_fd (fence)));
  npu_fence_unref (fence);
  g_assert_cmpuint (rec.n_calls, ==, 1);
  g_assert_null (rec.message[0]);

  /* Error first: it stands, against a later success or error. */
  fence = npu_fence_new ();
  npu_fence_add_callback (fence, record_cb, &arg);
  npu_fence_signal_error (fence, g_error_new (TEST_ERROR, 2, "first"));
  npu_fence_signal (fence);
  npu_fence_signal_error (fence, g_error_new (TEST_ERROR, 3, "second"));
  g_assert_false (npu_fence_wait (fence, 0, &error));
  g_assert_error (error, TEST_ERROR, 2);
  g_assert_cmpstr (error->message, ==, "first");
  g_clear_error (&error);
  npu_fence_unref (fence);
  g_assert_cmpuint (rec.n_calls, ==, 2);
  g_assert_cmpint (rec.code[1], ==, 2);
  g_assert_cmpstr (rec.message[1], ==, "first");

  recorder_clear (&rec);
}

/* ------------------------------------------------------------------------
 * Waiting
 */
static void
check_timeout (gint64 timeout_us, const gchar * expect_in_message)
{
  NpuFence *fence = npu_fence_new ();
  GError *error = NULL;
  gint64 start, elapsed;

  start = g_get_monotonic_time ();
  g_assert_false (npu_fence_wait (fence, timeout_us, &error));
  elapsed = g_get_monotonic_time () - start;
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, expect_in_message));
  g_assert_nonnull (strstr (error->message, "did not signal"));
  /* Not (much) earlier than asked; not much later either, but leave room
   * for a loaded machine or valgrind. */
  g_assert_cmpint (elapsed, >=, timeout_us);
  g_assert_cmpint (elapsed, <, timeout_us + 2 * G_USEC_PER_SEC);
  g_clear_error (&error);
  g_assert_false (npu_fence_is_signalled (fence));
  npu_fence_unref (fence);
}

static void
test_wait_timeout (void)
{
  check_timeout (100 * 1000, "100 ms");
  check_timeout (20 * 1000, "20 ms");
  /* Sub-millisecond timeouts are not reported as "0 ms". */
  check_timeout (500, "500 us");
  check_timeout (0, "0 ms");
}

typedef struct
{
  NpuFence *fence;
  guint delay_us;
  GError *error;                /* to signal with, or NULL */
} SignalLater;

static gpointer
signal_later_thread (gpointer data)
{
  SignalLater *sl = data;

  g_usleep (sl->delay_us);
  if (sl->error)
    npu_fence_signal_error (sl->fence, sl->error);
  else
    npu_fence_signal (sl->fence);
  return NULL;
}

static void
test_wait_signalled_later (void)
{
  NpuFence *fence = npu_fence_new ();
  SignalLater sl = { fence, 50 * 1000, NULL };
  GError *error = NULL;
  GThread *thread;
  gint64 start, elapsed;

  start = g_get_monotonic_time ();
  thread = g_thread_new ("signaller", signal_later_thread, &sl);
  g_assert_true (npu_fence_wait (fence, LONG_TIMEOUT_US, &error));
  elapsed = g_get_monotonic_time () - start;
  g_assert_no_error (error);
  g_assert_cmpint (elapsed, >=, sl.delay_us);
  g_thread_join (thread);
  npu_fence_unref (fence);

  /* Wait for ever: returns when signalled. */
  fence = npu_fence_new ();
  sl.fence = fence;
  sl.delay_us = 20 * 1000;
  thread = g_thread_new ("signaller", signal_later_thread, &sl);
  g_assert_true (npu_fence_wait (fence, -1, &error));
  g_assert_no_error (error);
  g_thread_join (thread);
  npu_fence_unref (fence);
}

typedef struct
{
  NpuFence *fence;
  gint64 timeout_us;
  gboolean ok;
  GError *error;
} Waiter;

static gpointer
waiter_thread (gpointer data)
{
  Waiter *w = data;

  w->ok = npu_fence_wait (w->fence, w->timeout_us, &w->error);
  return NULL;
}

#define N_WAITERS 16

static void
run_waiters (NpuFence * fence, GError * signal_with, Waiter * waiters)
{
  GThread *threads[N_WAITERS];
  SignalLater sl = { fence, 30 * 1000, signal_with };
  GThread *signaller;
  guint i;

  for (i = 0; i < N_WAITERS; i++) {
    waiters[i].fence = fence;
    /* Half wait for ever, half with a timeout they will not reach. */
    waiters[i].timeout_us = i % 2 ? -1 : LONG_TIMEOUT_US;
    waiters[i].ok = FALSE;
    waiters[i].error = NULL;
    threads[i] = g_thread_new ("waiter", waiter_thread, &waiters[i]);
  }
  signaller = g_thread_new ("signaller", signal_later_thread, &sl);
  for (i = 0; i < N_WAITERS; i++)
    g_thread_join (threads[i]);
  g_thread_join (signaller);
}

static void
test_wait_many_threads (void)
{
  NpuFence *fence = npu_fence_new ();
  Waiter waiters[N_WAITERS];
  guint i;

  run_waiters (fence, NULL, waiters);
  for (i = 0; i < N_WAITERS; i++) {
    g_assert_true (waiters[i].ok);
    g_assert_no_error (waiters[i].error);
  }
  npu_fence_unref (fence);
}

static void
test_signal_error_many_waiters (void)
{
  NpuFence *fence = npu_fence_new ();
  Waiter waiters[N_WAITERS];
  guint i, j;

  run_waiters (fence, g_error_new (TEST_ERROR, 42, "out of tensor cores"),
      waiters);
  for (i = 0; i < N_WAITERS; i++) {
    g_assert_false (waiters[i].ok);
    g_assert_error (waiters[i].error, TEST_ERROR, 42);
    g_assert_cmpstr (waiters[i].error->message, ==, "out of tensor cores");
    /* Each waiter owns its own copy. */
    for (j = 0; j < i; j++)
      g_assert_true (waiters[i].error != waiters[j].error);
  }
  for (i = 0; i < N_WAITERS; i++)
    g_clear_error (&waiters[i].error);
  npu_fence_unref (fence);
}

/* ------------------------------------------------------------------------
 * Callbacks
 */
static void
count_cb (NpuFence * fence, const GError * error, gpointer user_data)
{
  g_atomic_int_inc ((gint *) user_data);
}

/* Waits (boundedly) until a count_cb() counter reaches @n. */
static void
wait_count (gint * counter, gint n)
{
  gint64 end = g_get_monotonic_time () + LONG_TIMEOUT_US;

  while (g_atomic_int_get (counter) < n && g_get_monotonic_time () < end)
    g_usleep (100);
  g_assert_cmpint (g_atomic_int_get (counter), ==, n);
}

static void
test_callbacks (void)
{
  NpuFence *fence = npu_fence_new ();
  Recorder rec;
  RecordArg args[6];
  guint i;

  recorder_init (&rec);
  for (i = 0; i < G_N_ELEMENTS (args); i++) {
    args[i].rec = &rec;
    args[i].id = i;
  }
  for (i = 0; i < 5; i++)
    npu_fence_add_callback (fence, record_cb, &args[i]);
  g_assert_cmpuint (rec.n_calls, ==, 0);

  npu_fence_signal (fence);
  /* Each once, in registration order, in the signalling thread, with the
   * fence and no error. */
  g_assert_cmpuint (rec.n_calls, ==, 5);
  for (i = 0; i < 5; i++) {
    g_assert_cmpint (rec.order[i], ==, i);
    g_assert_true (rec.thread[i] == g_thread_self ());
    g_assert_true (rec.fence[i] == fence);
    g_assert_null (rec.message[i]);
  }

  /* Signalling again runs nothing. */
  npu_fence_signal (fence);
  g_assert_cmpuint (rec.n_calls, ==, 5);

  /* Already signalled: runs at once, before add_callback returns. */
  npu_fence_add_callback (fence, record_cb, &args[5]);
  g_assert_cmpuint (rec.n_calls, ==, 6);
  g_assert_cmpint (rec.order[5], ==, 5);
  g_assert_true (rec.thread[5] == g_thread_self ());

  npu_fence_unref (fence);
  g_assert_cmpuint (rec.n_calls, ==, 6);
  recorder_clear (&rec);
}

static void
test_callbacks_error (void)
{
  NpuFence *fence = npu_fence_new ();
  SignalLater sl = { fence, 10 * 1000, NULL };
  Recorder rec;
  RecordArg args[4];
  GThread *thread;
  guint i;

  recorder_init (&rec);
  for (i = 0; i < G_N_ELEMENTS (args); i++) {
    args[i].rec = &rec;
    args[i].id = i;
  }
  for (i = 0; i < 3; i++)
    npu_fence_add_callback (fence, record_cb, &args[i]);
  sl.error = g_error_new (TEST_ERROR, 5, "bad weights");
  thread = g_thread_ref (g_thread_new ("signaller", signal_later_thread,
          &sl));
  g_thread_join (thread);

  g_assert_cmpuint (rec.n_calls, ==, 3);
  for (i = 0; i < 3; i++) {
    g_assert_cmpint (rec.order[i], ==, i);
    /* Run by the thread that signalled, not by us. */
    g_assert_true (rec.thread[i] == thread);
    g_assert_cmpuint (rec.domain[i], ==, TEST_ERROR);
    g_assert_cmpint (rec.code[i], ==, 5);
    g_assert_cmpstr (rec.message[i], ==, "bad weights");
  }
  npu_fence_add_callback (fence, record_cb, &args[3]);
  g_assert_cmpuint (rec.n_calls, ==, 4);
  g_assert_cmpint (rec.code[3], ==, 5);
  g_assert_cmpstr (rec.message[3], ==, "bad weights");

  npu_fence_unref (fence);
  g_thread_unref (thread);
  recorder_clear (&rec);
}

/* Dropping the last reference to a fence that can no longer be signalled
 * must not leave its callbacks (a merge, a task) waiting for ever. */
static void
test_callbacks_abandoned (void)
{
  NpuFence *fence = npu_fence_new ();
  Recorder rec;
  RecordArg arg;

  recorder_init (&rec);
  arg.rec = &rec;
  arg.id = 0;
  npu_fence_add_callback (fence, record_cb, &arg);
  npu_fence_add_callback (fence, record_cb, &arg);
  npu_fence_unref (fence);
  g_assert_cmpuint (rec.n_calls, ==, 2);
  g_assert_cmpuint (rec.domain[0], ==, NPU_FENCE_ERROR);
  g_assert_cmpint (rec.code[0], ==, NPU_FENCE_ERROR_CANCELLED);
  g_assert_nonnull (strstr (rec.message[0], "dropped without being"));
  g_assert_cmpstr (rec.message[1], ==, rec.message[0]);
  recorder_clear (&rec);
}

typedef struct
{
  NpuFence *fence;
  gint *counts;
  guint n;
} AddArgs;


static gpointer
add_callbacks_thread (gpointer data)
{
  AddArgs *a = data;
  guint i;

  for (i = 0; i < a->n; i++)
    npu_fence_add_callback (a->fence, count_cb, &a->counts[i]);
  return NULL;
}

/* Callbacks added while another thread signals: each runs exactly once,
 * whether it was added before or after. */
static void
test_callbacks_race (void)
{
  guint round;

  for (round = 0; round < 200; round++) {
    NpuFence *fence = npu_fence_new ();
    gint counts[2][50];
    AddArgs a[2];
    GThread *threads[2];
    guint i, t;

    memset (counts, 0, sizeof (counts));
    for (t = 0; t < 2; t++) {
      a[t].fence = fence;
      a[t].counts = counts[t];
      a[t].n = G_N_ELEMENTS (counts[t]);
      threads[t] = g_thread_new ("adder", add_callbacks_thread, &a[t]);
    }
    if (round % 2)
      g_thread_yield ();
    npu_fence_signal (fence);
    for (t = 0; t < 2; t++)
      g_thread_join (threads[t]);
    for (t = 0; t < 2; t++)
      for (i = 0; i < G_N_ELEMENTS (counts[t]); i++)
        g_assert_cmpint (counts[t][i], ==, 1);
    npu_fence_unref (fence);
  }
}

/* ------------------------------------------------------------------------
 * Merging
 */
static void
check_merge (guint n, gboolean with_errors)
{
  NpuFence **fences = g_new (NpuFence *, n);
  guint *perm = g_new (guint, n);
  NpuFence *merged;
  GError *error = NULL;
  Recorder rec;
  RecordArg arg;
  gint first_err_code = -1;
  guint i;

  recorder_init (&rec);
  arg.rec = &rec;
  arg.id = 0;
  for (i = 0; i < n; i++) {
    fences[i] = npu_fence_new ();
    perm[i] = i;
  }
  /* Signal in a random order. */
  for (i = n; i > 1; i--) {
    guint j = g_test_rand_int_range (0, i), tmp = perm[i - 1];

    perm[i - 1] = perm[j];
    perm[j] = tmp;
  }

  merged = npu_fence_merge (fences, n);
  g_assert_cmpint (npu_fence_get_kind (merged), ==, NPU_FENCE_KIND_MERGED);
  npu_fence_add_callback (merged, record_cb, &arg);
  for (i = 0; i < n; i++) {
    g_assert_false (npu_fence_is_signalled (merged));
    g_assert_false (fd_readable (npu_fence_get_fd (merged)));
    g_assert_cmpuint (rec.n_calls, ==, 0);
    /* Inputs signalled 2nd and 4th fail, with codes of their place. */
    if (with_errors && (i == 1 || i == 3)) {
      if (first_err_code < 0)
        first_err_code = 100 + i;
      npu_fence_signal_error (fences[perm[i]], g_error_new (TEST_ERROR,
              100 + i, "input %u failed", perm[i]));
    } else {
      npu_fence_signal (fences[perm[i]]);
    }
  }
  g_assert_true (npu_fence_is_signalled (merged));
  g_assert_true (fd_readable (npu_fence_get_fd (merged)));
  g_assert_cmpuint (rec.n_calls, ==, 1);
  if (first_err_code >= 0) {
    gchar *expect = g_strdup_printf ("input %u failed", perm[1]);

    g_assert_false (npu_fence_wait (merged, 0, &error));
    g_assert_error (error, TEST_ERROR, first_err_code);
    g_assert_cmpstr (error->message, ==, expect);
    g_assert_cmpint (rec.code[0], ==, first_err_code);
    g_clear_error (&error);
    g_free (expect);
  } else {
    g_assert_true (npu_fence_wait (merged, 0, &error));
    g_assert_no_error (error);
    g_assert_null (rec.message[0]);
  }
  npu_fence_unref (merged);
  for (i = 0; i < n; i++)
    npu_fence_unref (fences[i]);
  g_free (fences);
  g_free (perm);
  recorder_clear (&rec);
}

static void
test_merge (void)
{
  guint sizes[] = { 2, 3, 5, 17, 64 };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (sizes); i++) {
    check_merge (sizes[i], FALSE);
    check_merge (sizes[i], TRUE);
  }
}

static void
test_merge_0_and_1 (void)
{
  NpuFence *fence, *merged;
  GError *error = NULL;

  merged = npu_fence_merge (NULL, 0);
  g_assert_nonnull (merged);
  g_assert_true (npu_fence_is_signalled (merged));
  g_assert_true (fd_readable (npu_fence_get_fd (merged)));
  g_assert_true (npu_fence_wait (merged, 0, &error));
  g_assert_no_error (error);
  npu_fence_unref (merged);

  /* One fence merges to itself. */
  fence = npu_fence_new ();
  merged = npu_fence_merge (&fence, 1);
  g_assert_true (merged == fence);
  npu_fence_unref (fence);
  /* The merge holds its own reference. */
  g_assert_true (fd_is_open (npu_fence_get_fd (merged)));
  g_assert_false (npu_fence_is_signalled (merged));
  npu_fence_signal_error (merged, g_error_new (TEST_ERROR, 3, "solo"));
  g_assert_false (npu_fence_wait (merged, 0, &error));
  g_assert_error (error, TEST_ERROR, 3);
  g_clear_error (&error);
  npu_fence_unref (merged);
}

static void
test_merge_signalled_inputs (void)
{
  NpuFence *fences[3], *merged, *nested[2], *outer;
  GError *error = NULL;
  guint i;

  /* All inputs already done: the merge is signalled on return. */
  for (i = 0; i < 3; i++)
    fences[i] = npu_fence_new_signalled ();
  merged = npu_fence_merge (fences, 3);
  g_assert_true (npu_fence_is_signalled (merged));
  g_assert_true (npu_fence_wait (merged, 0, &error));
  g_assert_no_error (error);
  npu_fence_unref (merged);
  for (i = 0; i < 3; i++)
    npu_fence_unref (fences[i]);

  /* Merges of merges, inputs dropped by the caller before they signal:
   * the merge keeps what it needs. */
  for (i = 0; i < 3; i++)
    fences[i] = npu_fence_new ();
  nested[0] = npu_fence_merge (fences, 2);
  nested[1] = npu_fence_merge (&fences[1], 2);
  outer = npu_fence_merge (nested, 2);
  npu_fence_unref (nested[0]);
  npu_fence_unref (nested[1]);
  npu_fence_signal (fences[2]);
  npu_fence_signal (fences[0]);
  g_assert_false (npu_fence_is_signalled (outer));
  npu_fence_signal (fences[1]);
  g_assert_true (npu_fence_is_signalled (outer));
  g_assert_true (npu_fence_wait (outer, 0, &error));
  g_assert_no_error (error);
  npu_fence_unref (outer);
  for (i = 0; i < 3; i++)
    npu_fence_unref (fences[i]);
}

/* An input dropped unsignalled fails the merge instead of leaving it (and
 * its eventfd) pending for ever. */
static void
test_merge_abandoned_input (void)
{
  NpuFence *fences[2], *merged;
  GError *error = NULL;

  fences[0] = npu_fence_new ();
  fences[1] = npu_fence_new ();
  merged = npu_fence_merge (fences, 2);
  npu_fence_signal (fences[0]);
  npu_fence_unref (fences[0]);
  g_assert_false (npu_fence_is_signalled (merged));
  npu_fence_unref (fences[1]);
  g_assert_true (npu_fence_is_signalled (merged));
  g_assert_false (npu_fence_wait (merged, 0, &error));
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED);
  g_assert_nonnull (strstr (error->message, "dropped"));
  g_clear_error (&error);
  npu_fence_unref (merged);
}

static void
test_merge_threads (void)
{
  /* Inputs signalled from several threads at once. */
  guint round;

  for (round = 0; round < 50; round++) {
    NpuFence *fences[8], *merged;
    SignalLater sl[8];
    GThread *threads[8];
    GError *error = NULL;
    guint i;

    for (i = 0; i < 8; i++)
      fences[i] = npu_fence_new ();
    merged = npu_fence_merge (fences, 8);
    for (i = 0; i < 8; i++) {
      sl[i].fence = fences[i];
      sl[i].delay_us = 0;
      sl[i].error = i == 5 ? g_error_new (TEST_ERROR, 5, "five") : NULL;
      threads[i] = g_thread_new ("signaller", signal_later_thread, &sl[i]);
    }
    g_assert_false (npu_fence_wait (merged, LONG_TIMEOUT_US, &error));
    g_assert_error (error, TEST_ERROR, 5);
    g_clear_error (&error);
    for (i = 0; i < 8; i++) {
      g_thread_join (threads[i]);
      npu_fence_unref (fences[i]);
    }
    npu_fence_unref (merged);
  }
}

/* ------------------------------------------------------------------------
 * Kernel fences, stood in for by a foreign pollable fd
 */
static NpuFence *
new_foreign_fence (int *efd)
{
  NpuFence *fence;

  *efd = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  g_assert_cmpint (*efd, >=, 0);
  /* The fence takes its own fd; we keep one to signal through. */
  fence = npu_fence_new_sync_file (dup (*efd));
  g_assert_nonnull (fence);
  return fence;
}

static void
foreign_signal (int efd)
{
  g_assert_cmpint (eventfd_write (efd, 1), ==, 0);
}

static void
test_sync_file_basic (void)
{
  NpuFence *fence;
  GError *error = NULL;
  int efd, fd;

  fence = new_foreign_fence (&efd);
  g_assert_cmpint (npu_fence_get_kind (fence), ==, NPU_FENCE_KIND_SYNC_FILE);
  fd = npu_fence_get_fd (fence);
  g_assert_cmpint (fd, >=, 0);
  g_assert_cmpint (fd, !=, efd);
  g_assert_false (npu_fence_is_signalled (fence));
  g_assert_false (fd_readable (fd));

  g_assert_false (npu_fence_wait (fence, 20 * 1000, &error));
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (error->message, "sync_file"));
  g_assert_nonnull (strstr (error->message, "20 ms"));
  g_clear_error (&error);
  g_assert_false (npu_fence_get_result (fence, &error));
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT);
  g_clear_error (&error);

  foreign_signal (efd);
  g_assert_true (npu_fence_is_signalled (fence));
  g_assert_true (npu_fence_wait (fence, 0, &error));
  g_assert_no_error (error);
  g_assert_true (npu_fence_get_result (fence, &error));
  g_assert_no_error (error);

  /* The fence owns (and closes) the fd it was given, not ours. */
  npu_fence_unref (fence);
  g_assert_false (fd_is_open (fd));
  g_assert_true (fd_is_open (efd));
  close (efd);
}

/* A critical, expected in this process rather than trapped in a child: a
 * child would be this program started again, which an emulator without
 * binfmt_misc (the aarch64 suite under qemu-user) cannot start. */
static void
test_sync_file_refuse (void)
{
  g_test_expect_message ("NpuCore", G_LOG_LEVEL_CRITICAL, "*fd >= 0*");
  g_assert_null (npu_fence_new_sync_file (-1));
  g_test_assert_expected_messages ();
}

static void
test_sync_file_wait_thread (void)
{
  NpuFence *fence;
  Waiter waiters[4];
  GThread *threads[4];
  int efd;
  guint i;

  fence = new_foreign_fence (&efd);
  for (i = 0; i < 4; i++) {
    waiters[i].fence = fence;
    waiters[i].timeout_us = i % 2 ? -1 : LONG_TIMEOUT_US;
    waiters[i].error = NULL;
    threads[i] = g_thread_new ("waiter", waiter_thread, &waiters[i]);
  }
  g_usleep (20 * 1000);
  foreign_signal (efd);
  for (i = 0; i < 4; i++) {
    g_thread_join (threads[i]);
    g_assert_true (waiters[i].ok);
    g_assert_no_error (waiters[i].error);
  }
  npu_fence_unref (fence);
  close (efd);
}

static void
test_sync_file_callbacks (void)
{
  NpuFence *fence;
  Recorder rec;
  RecordArg args[5];
  int efd;
  guint i;

  recorder_init (&rec);
  for (i = 0; i < G_N_ELEMENTS (args); i++) {
    args[i].rec = &rec;
    args[i].id = i;
  }
  fence = new_foreign_fence (&efd);
  for (i = 0; i < 4; i++)
    npu_fence_add_callback (fence, record_cb, &args[i]);
  /* Dropping our reference: the watcher keeps the fence until it signals. */
  npu_fence_unref (fence);
  g_usleep (20 * 1000);
  g_assert_cmpuint (recorder_n_calls (&rec), ==, 0);

  foreign_signal (efd);
  recorder_wait (&rec, 4);
  g_mutex_lock (&rec.lock);
  for (i = 0; i < 4; i++) {
    g_assert_cmpint (rec.order[i], ==, i);
    /* The watcher thread ran them. */
    g_assert_true (rec.thread[i] != g_thread_self ());
    g_assert_true (rec.thread[i] == rec.thread[0]);
    g_assert_null (rec.message[i]);
  }
  g_mutex_unlock (&rec.lock);
  /* Nothing runs twice. */
  g_usleep (20 * 1000);
  g_assert_cmpuint (recorder_n_calls (&rec), ==, 4);
  close (efd);

  /* Signalled before the callback is added: it runs at once, here. */
  fence = new_foreign_fence (&efd);
  foreign_signal (efd);
  npu_fence_add_callback (fence, record_cb, &args[4]);
  g_assert_cmpuint (recorder_n_calls (&rec), ==, 5);
  g_assert_true (rec.thread[4] == g_thread_self ());
  npu_fence_unref (fence);
  close (efd);

  recorder_clear (&rec);
}

/* Many kernel fences watched at once, signalled in random order. */
static void
test_sync_file_many_watched (void)
{
  enum { N = 40 };
  NpuFence *fences[N];
  int efds[N];
  Recorder rec;
  RecordArg args[N];
  guint i;

  recorder_init (&rec);
  for (i = 0; i < N; i++) {
    fences[i] = new_foreign_fence (&efds[i]);
    args[i].rec = &rec;
    args[i].id = i;
    npu_fence_add_callback (fences[i], record_cb, &args[i]);
  }
  for (i = 0; i < N; i++) {
    guint k = (i * 7) % N;      /* 7 is prime to 40: a permutation */

    foreign_signal (efds[k]);
    recorder_wait (&rec, i + 1);
    g_assert_cmpint (rec.order[i], ==, k);
  }
  for (i = 0; i < N; i++) {
    g_assert_true (npu_fence_is_signalled (fences[i]));
    npu_fence_unref (fences[i]);
    close (efds[i]);
  }
  recorder_clear (&rec);
}

static void
test_sync_file_merge (void)
{
  NpuFence *fences[3], *merged;
  GError *error = NULL;
  int efds[2];

  /* Only (stand-in) sync_files: the kernel refuses SYNC_IOC_MERGE on them,
   * so the merge falls back to an eventfd fence fed by the watcher. */
  fences[0] = new_foreign_fence (&efds[0]);
  fences[1] = new_foreign_fence (&efds[1]);
  merged = npu_fence_merge (fences, 2);
  g_assert_cmpint (npu_fence_get_kind (merged), ==, NPU_FENCE_KIND_MERGED);
  foreign_signal (efds[1]);
  g_assert_false (npu_fence_wait (merged, 20 * 1000, &error));
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT);
  g_clear_error (&error);
  foreign_signal (efds[0]);
  g_assert_true (npu_fence_wait (merged, LONG_TIMEOUT_US, &error));
  g_assert_no_error (error);
  npu_fence_unref (merged);
  npu_fence_unref (fences[0]);
  npu_fence_unref (fences[1]);
  close (efds[0]);
  close (efds[1]);

  /* Mixed with an eventfd fence that fails. */
  fences[0] = new_foreign_fence (&efds[0]);
  fences[1] = npu_fence_new ();
  fences[2] = new_foreign_fence (&efds[1]);
  merged = npu_fence_merge (fences, 3);
  g_assert_cmpint (npu_fence_get_kind (merged), ==, NPU_FENCE_KIND_MERGED);
  npu_fence_signal_error (fences[1], g_error_new (TEST_ERROR, 9, "nine"));
  foreign_signal (efds[0]);
  g_assert_false (npu_fence_wait (merged, 20 * 1000, &error));
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT);
  g_clear_error (&error);
  foreign_signal (efds[1]);
  g_assert_false (npu_fence_wait (merged, LONG_TIMEOUT_US, &error));
  g_assert_error (error, TEST_ERROR, 9);
  g_assert_cmpstr (error->message, ==, "nine");
  g_clear_error (&error);
  npu_fence_unref (merged);
  npu_fence_unref (fences[0]);
  npu_fence_unref (fences[1]);
  npu_fence_unref (fences[2]);
  close (efds[0]);
  close (efds[1]);
}

/* ------------------------------------------------------------------------
 * Leaks
 */
#define N_LEAK_ROUNDS 10000

/* Waits (boundedly) for the watcher to drop the fences it still holds. */
static guint
settled_fd_count (guint expect)
{
  gint64 end = g_get_monotonic_time () + LONG_TIMEOUT_US;
  guint n;

  while ((n = count_open_fds ()) != expect && g_get_monotonic_time () < end)
    g_usleep (1000);
  return n;
}

static void
test_no_fd_leak (void)
{
  NpuFence *warm;
  gint calls = 0;
  guint before, i;
  int efd;

  /* Start the watcher (and its wake fd, which lives for the process). */
  warm = new_foreign_fence (&efd);
  npu_fence_add_callback (warm, count_cb, &calls);
  foreign_signal (efd);
  wait_count (&calls, 1);
  npu_fence_unref (warm);
  close (efd);
  g_usleep (10 * 1000);

  before = count_open_fds ();
  for (i = 0; i < N_LEAK_ROUNDS; i++) {
    NpuFence *f[3], *merged, *merged2;

    f[0] = npu_fence_new ();
    f[1] = npu_fence_new_signalled ();
    f[2] = npu_fence_new ();
    merged = npu_fence_merge (f, 3);
    merged2 = npu_fence_merge (f, 2);
    npu_fence_signal (f[0]);
    if (i % 2)
      npu_fence_signal_error (f[2], g_error_new (TEST_ERROR, 1, "x"));
    npu_fence_unref (f[0]);
    npu_fence_unref (f[1]);
    /* Every other round, dropped without a signal. */
    npu_fence_unref (f[2]);
    g_assert_true (npu_fence_is_signalled (merged));
    g_assert_true (npu_fence_is_signalled (merged2));
    npu_fence_unref (merged);
    npu_fence_unref (merged2);

    /* And a stand-in sync_file, now and then through the watcher. */
    f[0] = new_foreign_fence (&efd);
    if (i % 10 == 0) {
      npu_fence_add_callback (f[0], count_cb, &calls);
      foreign_signal (efd);
      wait_count (&calls, 2 + i / 10);
    }
    npu_fence_unref (f[0]);
    close (efd);
  }
  g_assert_cmpuint (settled_fd_count (before), ==, before);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/fence/new", test_new);
  g_test_add_func ("/fence/signal", test_signal);
  g_test_add_func ("/fence/signal-error", test_signal_error);
  g_test_add_func ("/fence/refcount", test_refcount);
  g_test_add_func ("/fence/double-signal", test_double_signal);
  g_test_add_func ("/fence/wait-timeout", test_wait_timeout);
  g_test_add_func ("/fence/wait-signalled-later", test_wait_signalled_later);
  g_test_add_func ("/fence/wait-many-threads", test_wait_many_threads);
  g_test_add_func ("/fence/signal-error-many-waiters",
      test_signal_error_many_waiters);
  g_test_add_func ("/fence/callbacks", test_callbacks);
  g_test_add_func ("/fence/callbacks-error", test_callbacks_error);
  g_test_add_func ("/fence/callbacks-abandoned", test_callbacks_abandoned);
  g_test_add_func ("/fence/callbacks-race", test_callbacks_race);
  g_test_add_func ("/fence/merge", test_merge);
  g_test_add_func ("/fence/merge-0-and-1", test_merge_0_and_1);
  g_test_add_func ("/fence/merge-signalled-inputs",
      test_merge_signalled_inputs);
  g_test_add_func ("/fence/merge-abandoned-input", test_merge_abandoned_input);
  g_test_add_func ("/fence/merge-threads", test_merge_threads);
  g_test_add_func ("/fence/sync-file/basic", test_sync_file_basic);
  g_test_add_func ("/fence/sync-file/refuse", test_sync_file_refuse);
  g_test_add_func ("/fence/sync-file/wait-thread", test_sync_file_wait_thread);
  g_test_add_func ("/fence/sync-file/callbacks", test_sync_file_callbacks);
  g_test_add_func ("/fence/sync-file/many-watched",
      test_sync_file_many_watched);
  g_test_add_func ("/fence/sync-file/merge", test_sync_file_merge);
  g_test_add_func ("/fence/no-fd-leak", test_no_fd_leak);

  return g_test_run ();
}
