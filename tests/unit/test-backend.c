/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the CPU backend (compute core, GLib only) */
#include <core/device/npubackend.h>

#include <dirent.h>
#include <string.h>
#include <unistd.h>

/* Long enough that a lost wakeup fails the test rather than hanging it,
 * short enough for valgrind. */
#define LONG_TIMEOUT_US (20 * G_USEC_PER_SEC)

#define TEST_ERROR (test_error_quark ())
static GQuark
test_error_quark (void)
{
  return g_quark_from_static_string ("npu-test-error-quark");
}

static guint
count_dir (const gchar * path)
{
  DIR *dir = opendir (path);
  struct dirent *d;
  guint n = 0;

  g_assert_nonnull (dir);
  while ((d = readdir (dir)))
    if (d->d_name[0] != '.')
      n++;
  closedir (dir);
  return n;
}

/* Threads and fds of the process: a device that is never freed keeps its
 * threads, a fence that is never freed its fd. */
static guint
count_threads (void)
{
  return count_dir ("/proc/self/task");
}

static guint
count_fds (void)
{
  return count_dir ("/proc/self/fd");
}

/* Waits (boundedly) for the thread count to drop back: a device freed from
 * another thread may take a moment to join its threads, and a joined
 * thread may still be listed in /proc/self/task for a moment (the joiner
 * is woken when the thread clears its id, before it is gone: seen under
 * qemu-user, where the emulator's own thread exit comes after). */
static guint
settled_threads (guint expect)
{
  gint64 end = g_get_monotonic_time () + LONG_TIMEOUT_US;
  guint n;

  while ((n = count_threads ()) != expect && g_get_monotonic_time () < end)
    g_usleep (1000);
  return n;
}

static void
assert_fence_ok (NpuFence * fence)
{
  GError *error = NULL;

  g_assert_true (npu_fence_wait (fence, LONG_TIMEOUT_US, &error));
  g_assert_no_error (error);
}

/* Asserts the fence fails with @domain/@code and a message holding each of
 * the NULL-terminated strings. */
static void
assert_fence_error (NpuFence * fence, GQuark domain, gint code, ...)
{
  GError *error = NULL;
  const gchar *s;
  va_list args;

  g_assert_false (npu_fence_wait (fence, LONG_TIMEOUT_US, &error));
  g_assert_error (error, domain, code);
  va_start (args, code);
  while ((s = va_arg (args, const gchar *))) {
    if (!strstr (error->message, s))
      g_error ("\"%s\" not in error message \"%s\"", s, error->message);
  }
  va_end (args);
  g_error_free (error);
}

/* ------------------------------------------------------------------------
 * A task that records what happened to it
 */
typedef struct
{
  gint ran;                     /* times func ran */
  gint destroyed;               /* times destroy ran */
  gint64 run_time;              /* when func ran */
  gint run_seq;                 /* position among all runs */
  GThread *thread;
  guint n_threads;
  gboolean cancelled;
  /* What to do */
  gboolean fail;
  gboolean fail_silently;
  gboolean set_error_but_succeed;
  gint sleep_us;
} Rec;

static gint run_counter;

static gboolean
rec_func (NpuTask * task, gpointer user_data, GError ** error)
{
  Rec *rec = user_data;

  /* Nothing frees the data before the task is over. */
  g_assert_cmpint (g_atomic_int_get (&rec->destroyed), ==, 0);
  rec->run_time = g_get_monotonic_time ();
  rec->run_seq = g_atomic_int_add (&run_counter, 1);
  rec->thread = g_thread_self ();
  rec->n_threads = npu_task_get_n_threads (task);
  rec->cancelled = npu_task_is_cancelled (task);
  if (rec->sleep_us)
    g_usleep (rec->sleep_us);
  g_atomic_int_inc (&rec->ran);
  if (rec->fail) {
    g_set_error (error, TEST_ERROR, 11, "matmul %s", "overflowed");
    return FALSE;
  }
  if (rec->fail_silently)
    return FALSE;
  if (rec->set_error_but_succeed)
    g_set_error (error, TEST_ERROR, 12, "ignored");
  return TRUE;
}

static void
rec_destroy (gpointer user_data)
{
  Rec *rec = user_data;

  g_atomic_int_inc (&rec->destroyed);
}

static NpuFence *
submit_rec (NpuQueue * queue, Rec * rec, NpuFence * const *in, guint n_in)
{
  NpuFence *fence = npu_queue_submit (queue, rec_func, rec, rec_destroy, in,
      n_in);

  g_assert_nonnull (fence);
  return fence;
}

/* ------------------------------------------------------------------------
 * Devices
 */
static void
test_cpu_count (void)
{
  long n = sysconf (_SC_NPROCESSORS_ONLN);

  g_assert_cmpint (n, >, 0);
  g_assert_cmpuint (npu_cpu_count (), ==, (guint) n);
}

static void
test_device_threads (void)
{
  guint counts[] = { 1, 2, 4, 0 };
  guint i, base = count_threads ();

  for (i = 0; i < G_N_ELEMENTS (counts); i++) {
    guint want = counts[i] ? counts[i] : npu_cpu_count ();
    NpuDevice *device = npu_device_new_cpu (counts[i]);
    NpuQueue *queue;
    NpuFence *fence;
    gchar *num = g_strdup_printf ("%u thread", want);
    Rec rec = { 0, };

    g_assert_cmpuint (npu_device_get_n_threads (device), ==, want);
    g_assert_nonnull (strstr (npu_device_get_name (device), num));
    /* A dispatcher and n - 1 helpers. */
    g_assert_cmpuint (count_threads (), ==, base + want);

    queue = npu_queue_new (device, "q");
    g_assert_true (npu_queue_get_device (queue) == device);
    fence = submit_rec (queue, &rec, NULL, 0);
    assert_fence_ok (fence);
    g_assert_cmpint (rec.ran, ==, 1);
    g_assert_cmpint (rec.destroyed, ==, 1);
    g_assert_cmpuint (rec.n_threads, ==, want);
    g_assert_false (rec.cancelled);
    /* Run by the device, not by the submitter. */
    g_assert_true (rec.thread != g_thread_self ());
    npu_fence_unref (fence);
    npu_queue_free (queue);
    npu_device_unref (device);
    g_assert_cmpuint (settled_threads (base), ==, base);
    g_free (num);
  }
}

/* Opening by name: "cpu" and "auto" are the shared CPU device of
 * npu_device_get_cpu(); "vulkan" and "vulkan:N" the process's Vulkan
 * device of that index, where the build and the machine have one; anything
 * else is unknown.  Each failure by its code and message. */
static void
test_device_open (void)
{
  static const gchar *const vulkan[] = { "vulkan:12" };
  static const gchar *const unknown[] = { "", "gpu", "CPU", "cpu:1",
    "vulkan:", "vulkan:x", "vulkan:1a", "vulkan0", "autox"
  };
  NpuDevice *shared = npu_device_get_cpu (2);
  NpuDevice *dev;
  GError *error = NULL;
  gchar *msg;
  guint i;

  dev = npu_device_open ("cpu", 2, &error);
  g_assert_no_error (error);
  g_assert_true (dev == shared);
  npu_device_unref (dev);
  dev = npu_device_open ("auto", 2, &error);
  g_assert_no_error (error);
  g_assert_true (dev == shared);
  npu_device_unref (dev);
  dev = npu_device_open (NULL, 0, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (npu_device_get_n_threads (dev), ==, npu_cpu_count ());
  npu_device_unref (dev);

  /* "vulkan" is "vulkan:0", one device shared by both names; where the
   * build or the machine has none, both fail as not found */
  dev = npu_device_open ("vulkan", 2, &error);
  if (dev) {
    NpuDevice *again = npu_device_open ("vulkan:0", 1, &error);

    g_assert_no_error (error);
    g_assert_true (again == dev);
    g_assert_cmpstr (npu_device_get_kind (dev), ==, "vulkan");
    g_assert_true (g_str_has_prefix (npu_device_get_name (dev), "vulkan:0 ("));
    npu_device_unref (again);
    npu_device_unref (dev);
  } else {
    g_assert_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_NOT_FOUND);
    g_clear_error (&error);
  }
  g_assert_cmpstr (npu_device_get_kind (shared), ==, "cpu");
  for (i = 0; i < G_N_ELEMENTS (vulkan); i++) {
    g_assert_null (npu_device_open (vulkan[i], 2, &error));
    g_assert_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_NOT_FOUND);
    msg = g_strdup_printf ("Device \"%s\": ", vulkan[i]);
    g_assert_true (g_str_has_prefix (error->message, msg));
    if (!strstr (error->message, "this build has no Vulkan backend") &&
        !strstr (error->message, "Vulkan: no device 12 ("))
      g_error ("unexpected message: %s", error->message);
    g_free (msg);
    g_clear_error (&error);
  }
  for (i = 0; i < G_N_ELEMENTS (unknown); i++) {
    g_assert_null (npu_device_open (unknown[i], 2, &error));
    g_assert_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_NOT_FOUND);
    msg = g_strdup_printf ("Unknown device \"%s\" (known names: cpu, "
        "vulkan, vulkan:N, auto)", unknown[i]);
    g_assert_cmpstr (error->message, ==, msg);
    g_free (msg);
    g_clear_error (&error);
  }
  /* and no error asked for: NULL, nothing to free */
  g_assert_null (npu_device_open ("gpu", 2, NULL));
  npu_device_unref (shared);
}

static void
test_device_get_cpu (void)
{
  guint base = count_threads ();
  NpuDevice *a = npu_device_get_cpu (2);
  NpuDevice *b = npu_device_get_cpu (2);
  NpuDevice *c = npu_device_get_cpu (3);
  NpuDevice *own = npu_device_new_cpu (2);
  NpuDevice *d0 = npu_device_get_cpu (0);
  NpuDevice *dn = npu_device_get_cpu (npu_cpu_count ());
  NpuQueue *queue;
  NpuFence *fence;
  Rec rec = { 0, };

  g_assert_true (a == b);
  g_assert_true (a != c);
  g_assert_true (own != a);
  g_assert_true (d0 == dn);
  g_assert_cmpuint (npu_device_get_n_threads (a), ==, 2);
  g_assert_cmpuint (npu_device_get_n_threads (c), ==, 3);
  g_assert_cmpuint (npu_device_get_n_threads (d0), ==, npu_cpu_count ());

  /* Shared for as long as someone holds it. */
  npu_device_unref (a);
  a = npu_device_get_cpu (2);
  g_assert_true (a == b);
  queue = npu_queue_new (a, "shared");
  npu_device_unref (a);
  npu_device_unref (b);
  a = npu_device_get_cpu (2);
  g_assert_true (a == npu_queue_get_device (queue));
  fence = submit_rec (queue, &rec, NULL, 0);
  assert_fence_ok (fence);
  npu_fence_unref (fence);
  npu_queue_free (queue);
  npu_device_unref (a);

  npu_device_unref (c);
  npu_device_unref (own);
  npu_device_unref (d0);
  npu_device_unref (dn);
  /* All gone, threads joined. */
  g_assert_cmpuint (settled_threads (base), ==, base);

  /* And a new one comes up when asked again. */
  a = npu_device_get_cpu (2);
  queue = npu_queue_new (a, "again");
  memset (&rec, 0, sizeof (rec));
  fence = submit_rec (queue, &rec, NULL, 0);
  assert_fence_ok (fence);
  npu_fence_unref (fence);
  npu_queue_free (queue);
  npu_device_unref (a);
  g_assert_cmpuint (settled_threads (base), ==, base);
}

static gpointer
get_cpu_thread (gpointer data)
{
  guint i;

  for (i = 0; i < 200; i++) {
    NpuDevice *d = npu_device_get_cpu (1 + i % 2);

    g_assert_cmpuint (npu_device_get_n_threads (d), ==, 1 + i % 2);
    npu_device_unref (d);
  }
  return NULL;
}

/* Getting and dropping the shared device from several threads: a dying
 * device must never be handed out. */
static void
test_device_get_cpu_threads (void)
{
  GThread *threads[4];
  guint i, base = count_threads ();

  for (i = 0; i < G_N_ELEMENTS (threads); i++)
    threads[i] = g_thread_new ("getter", get_cpu_thread, NULL);
  for (i = 0; i < G_N_ELEMENTS (threads); i++)
    g_thread_join (threads[i]);
  g_assert_cmpuint (settled_threads (base), ==, base);
}

/* ------------------------------------------------------------------------
 * Tasks
 */
static void
test_task_runs (void)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "runner");
  Rec recs[20];
  NpuFence *fences[20];
  guint i;

  memset (recs, 0, sizeof (recs));
  g_atomic_int_set (&run_counter, 0);
  for (i = 0; i < 20; i++)
    fences[i] = submit_rec (queue, &recs[i], NULL, 0);
  for (i = 0; i < 20; i++) {
    assert_fence_ok (fences[i]);
    /* The data was released before the fence signalled. */
    g_assert_cmpint (g_atomic_int_get (&recs[i].destroyed), ==, 1);
    g_assert_cmpint (recs[i].ran, ==, 1);
    /* No inputs: ready at once, run in submission order. */
    g_assert_cmpint (recs[i].run_seq, ==, i);
    npu_fence_unref (fences[i]);
  }
  g_assert_cmpuint (npu_queue_get_n_pending (queue), ==, 0);

  /* A NULL destroy notify is fine. */
  memset (&recs[0], 0, sizeof (recs[0]));
  fences[0] = npu_queue_submit (queue, rec_func, &recs[0], NULL, NULL, 0);
  assert_fence_ok (fences[0]);
  g_assert_cmpint (recs[0].ran, ==, 1);
  g_assert_cmpint (recs[0].destroyed, ==, 0);
  npu_fence_unref (fences[0]);

  npu_queue_free (queue);
  npu_device_unref (device);
}

static void
test_task_inputs (void)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "inputs");
  NpuFence *in[3], *out;
  gint64 last_signal = 0;
  Rec rec = { 0, };
  guint i;

  for (i = 0; i < 3; i++)
    in[i] = npu_fence_new ();
  out = submit_rec (queue, &rec, in, 3);
  g_assert_cmpuint (npu_queue_get_n_pending (queue), ==, 1);
  /* Signal in an odd order; the task must wait for the last. */
  npu_fence_signal (in[1]);
  npu_fence_signal (in[2]);
  g_usleep (30 * 1000);
  g_assert_cmpint (g_atomic_int_get (&rec.ran), ==, 0);
  g_assert_false (npu_fence_is_signalled (out));
  last_signal = g_get_monotonic_time ();
  npu_fence_signal (in[0]);
  assert_fence_ok (out);
  g_assert_cmpint (rec.ran, ==, 1);
  g_assert_cmpint (rec.run_time, >=, last_signal);
  g_assert_cmpuint (npu_queue_get_n_pending (queue), ==, 0);
  npu_fence_unref (out);
  for (i = 0; i < 3; i++)
    npu_fence_unref (in[i]);

  /* Inputs signalled before submission: runs straight away. */
  memset (&rec, 0, sizeof (rec));
  in[0] = npu_fence_new_signalled ();
  in[1] = npu_fence_new_signalled ();
  out = submit_rec (queue, &rec, in, 2);
  assert_fence_ok (out);
  g_assert_cmpint (rec.ran, ==, 1);
  npu_fence_unref (out);
  npu_fence_unref (in[0]);
  npu_fence_unref (in[1]);

  npu_queue_free (queue);
  npu_device_unref (device);
}

/* Chains through task fences, across queues and devices: every task runs
 * after the ones it depends on, even when submitted in the other order
 * relative to readiness. */
static void
test_task_chain (void)
{
  NpuDevice *d1 = npu_device_new_cpu (1);
  NpuDevice *d2 = npu_device_new_cpu (2);
  NpuQueue *qa = npu_queue_new (d1, "a");
  NpuQueue *qb = npu_queue_new (d2, "b");
  NpuFence *gate = npu_fence_new ();
  NpuFence *f[4], *in2[2];
  Rec recs[5];
  guint i;

  memset (recs, 0, sizeof (recs));
  recs[0].sleep_us = 20 * 1000;
  f[0] = submit_rec (qa, &recs[0], &gate, 1);
  f[1] = submit_rec (qb, &recs[1], &f[0], 1);
  in2[0] = f[1];
  in2[1] = f[0];
  f[2] = submit_rec (qa, &recs[2], in2, 2);
  /* Independent of the gate: runs first although submitted last. */
  f[3] = submit_rec (qb, &recs[3], NULL, 0);
  assert_fence_ok (f[3]);
  g_assert_cmpint (g_atomic_int_get (&recs[0].ran), ==, 0);

  npu_fence_signal (gate);
  assert_fence_ok (f[2]);
  for (i = 0; i < 3; i++)
    g_assert_cmpint (recs[i].ran, ==, 1);
  /* Ran after its input's task had finished (it slept 20 ms). */
  g_assert_cmpint (recs[1].run_time, >=, recs[0].run_time + 20 * 1000);
  g_assert_cmpint (recs[2].run_time, >=, recs[1].run_time);
  g_assert_cmpint (recs[3].run_time, <, recs[0].run_time);
  for (i = 0; i < 4; i++)
    npu_fence_unref (f[i]);
  npu_fence_unref (gate);
  npu_queue_free (qa);
  npu_queue_free (qb);
  npu_device_unref (d1);
  npu_device_unref (d2);
}

static void
test_task_input_failed (void)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "consumer");
  NpuFence *in[2], *out, *out2;
  Rec rec = { 0, }, rec2 = { 0, };

  in[0] = npu_fence_new ();
  in[1] = npu_fence_new ();
  out = submit_rec (queue, &rec, in, 2);
  /* A task downstream of the failed one fails too. */
  out2 = submit_rec (queue, &rec2, &out, 1);
  npu_fence_signal_error (in[1], g_error_new (TEST_ERROR, 3,
          "decoder broke"));
  g_usleep (10 * 1000);
  /* Still waiting for the other input. */
  g_assert_false (npu_fence_is_signalled (out));
  npu_fence_signal (in[0]);

  assert_fence_error (out, NPU_FENCE_ERROR, NPU_FENCE_ERROR_FAILED,
      "consumer", "input", "decoder broke", NULL);
  assert_fence_error (out2, NPU_FENCE_ERROR, NPU_FENCE_ERROR_FAILED,
      "decoder broke", NULL);
  g_assert_cmpint (rec.ran, ==, 0);
  g_assert_cmpint (rec2.ran, ==, 0);
  g_assert_cmpint (rec.destroyed, ==, 1);
  g_assert_cmpint (rec2.destroyed, ==, 1);
  npu_fence_unref (out);
  npu_fence_unref (out2);
  npu_fence_unref (in[0]);
  npu_fence_unref (in[1]);
  npu_queue_free (queue);
  npu_device_unref (device);
}

static void
test_task_error (void)
{
  NpuDevice *device = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (device, "matmul0");
  NpuFence *out;
  Rec rec = { 0, };

  rec.fail = TRUE;
  out = submit_rec (queue, &rec, NULL, 0);
  /* The task's own error, untouched. */
  assert_fence_error (out, TEST_ERROR, 11, "matmul overflowed", NULL);
  g_assert_cmpint (rec.ran, ==, 1);
  g_assert_cmpint (rec.destroyed, ==, 1);
  npu_fence_unref (out);

  /* FALSE without an error: a generic one naming the queue. */
  memset (&rec, 0, sizeof (rec));
  rec.fail_silently = TRUE;
  out = submit_rec (queue, &rec, NULL, 0);
  assert_fence_error (out, NPU_FENCE_ERROR, NPU_FENCE_ERROR_FAILED,
      "matmul0", "failed without saying why", NULL);
  g_assert_cmpint (rec.destroyed, ==, 1);
  npu_fence_unref (out);

  /* TRUE with a stray error: success, and the error is freed (valgrind). */
  memset (&rec, 0, sizeof (rec));
  rec.set_error_but_succeed = TRUE;
  out = submit_rec (queue, &rec, NULL, 0);
  assert_fence_ok (out);
  npu_fence_unref (out);

  npu_queue_free (queue);
  npu_device_unref (device);
}

/* Tasks of a device never overlap, whatever their queue. */
static gint overlap_running;
static gint overlap_max;

static gboolean
overlap_func (NpuTask * task, gpointer user_data, GError ** error)
{
  gint now = g_atomic_int_add (&overlap_running, 1) + 1;

  if (now > g_atomic_int_get (&overlap_max))
    g_atomic_int_set (&overlap_max, now);
  g_usleep (200);
  g_atomic_int_add (&overlap_running, -1);
  return TRUE;
}

static void
test_task_one_at_a_time (void)
{
  NpuDevice *device = npu_device_new_cpu (4);
  NpuQueue *queues[3];
  NpuFence *fences[60];
  guint i;

  g_atomic_int_set (&overlap_max, 0);
  for (i = 0; i < 3; i++)
    queues[i] = npu_queue_new (device, "q");
  for (i = 0; i < 60; i++)
    fences[i] = npu_queue_submit (queues[i % 3], overlap_func, NULL, NULL,
        NULL, 0);
  for (i = 0; i < 60; i++) {
    assert_fence_ok (fences[i]);
    npu_fence_unref (fences[i]);
  }
  g_assert_cmpint (overlap_max, ==, 1);
  for (i = 0; i < 3; i++)
    npu_queue_free (queues[i]);
  npu_device_unref (device);
}

/* ------------------------------------------------------------------------
 * Flushing
 */
static void
test_flush_pending (void)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "flushed");
  NpuFence *gate = npu_fence_new ();
  NpuFence *f[6];
  Rec recs[6];
  guint i;

  memset (recs, 0, sizeof (recs));
  /* Waiting on the gate, on each other, and one whose input failed. */
  f[0] = submit_rec (queue, &recs[0], &gate, 1);
  f[1] = submit_rec (queue, &recs[1], &f[0], 1);
  f[2] = submit_rec (queue, &recs[2], &gate, 1);
  f[3] = submit_rec (queue, &recs[3], f, 3);
  f[4] = submit_rec (queue, &recs[4], &gate, 1);
  f[5] = submit_rec (queue, &recs[5], &f[4], 1);
  g_assert_cmpuint (npu_queue_get_n_pending (queue), ==, 6);

  npu_queue_flush (queue);
  g_assert_cmpuint (npu_queue_get_n_pending (queue), ==, 0);
  for (i = 0; i < 6; i++) {
    /* Flush returns with everything settled: no waiting needed. */
    g_assert_true (npu_fence_is_signalled (f[i]));
    assert_fence_error (f[i], NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
        "flushed", "cancelled", NULL);
    g_assert_cmpint (recs[i].destroyed, ==, 1);
  }

  /* The gate opening later runs nothing and frees nothing twice. */
  npu_fence_signal (gate);
  g_usleep (20 * 1000);
  for (i = 0; i < 6; i++) {
    g_assert_cmpint (g_atomic_int_get (&recs[i].ran), ==, 0);
    g_assert_cmpint (g_atomic_int_get (&recs[i].destroyed), ==, 1);
    npu_fence_unref (f[i]);
  }
  npu_fence_unref (gate);

  /* Flushing an empty queue is a no-op; submitting afterwards works. */
  npu_queue_flush (queue);
  memset (recs, 0, sizeof (recs));
  f[0] = submit_rec (queue, &recs[0], NULL, 0);
  assert_fence_ok (f[0]);
  g_assert_cmpint (recs[0].ran, ==, 1);
  g_assert_false (recs[0].cancelled);
  npu_fence_unref (f[0]);

  npu_queue_free (queue);
  npu_device_unref (device);
}

/* Cancelling one task: only that one, only before it runs. */
static void
test_cancel_one (void)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "cancelling");
  NpuFence *gate = npu_fence_new ();
  NpuFence *f[3];
  Rec recs[3];
  guint i;

  memset (recs, 0, sizeof (recs));
  for (i = 0; i < 3; i++)
    f[i] = submit_rec (queue, &recs[i], &gate, 1);
  g_assert_true (npu_queue_cancel (queue, f[1]));
  g_assert_true (npu_fence_is_signalled (f[1]));
  assert_fence_error (f[1], NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
      "cancelling", "cancelled", NULL);
  g_assert_cmpint (recs[1].destroyed, ==, 1);
  /* Twice, or a fence of another queue: nothing to cancel. */
  g_assert_false (npu_queue_cancel (queue, f[1]));
  g_assert_false (npu_queue_cancel (queue, gate));

  npu_fence_signal (gate);
  assert_fence_ok (f[0]);
  assert_fence_ok (f[2]);
  g_assert_cmpint (recs[0].ran, ==, 1);
  g_assert_cmpint (recs[1].ran, ==, 0);
  g_assert_cmpint (recs[2].ran, ==, 1);
  /* A finished task cannot be cancelled. */
  g_assert_false (npu_queue_cancel (queue, f[0]));
  for (i = 0; i < 3; i++) {
    g_assert_cmpint (recs[i].destroyed, ==, 1);
    npu_fence_unref (f[i]);
  }
  npu_fence_unref (gate);
  npu_queue_free (queue);
  npu_device_unref (device);
}

typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean started;
  gint finished;
  gint destroyed;
  gboolean saw_cancel;
} LongTask;

static gboolean
long_func (NpuTask * task, gpointer user_data, GError ** error)
{
  LongTask *lt = user_data;
  gint64 end = g_get_monotonic_time () + LONG_TIMEOUT_US;

  g_assert_false (npu_task_is_cancelled (task));
  g_mutex_lock (&lt->lock);
  lt->started = TRUE;
  g_cond_broadcast (&lt->cond);
  g_mutex_unlock (&lt->lock);

  /* Work in small steps, checking for a flush between them. */
  while (!npu_task_is_cancelled (task) && g_get_monotonic_time () < end)
    g_usleep (1000);
  lt->saw_cancel = npu_task_is_cancelled (task);
  /* Make the flush wait for us a little longer. */
  g_usleep (20 * 1000);
  g_atomic_int_set (&lt->finished, 1);
  /* In its own error domain, as the encoders' errors are: the backend,
   * not each task, gives cancellation its one code */
  g_set_error (error, g_quark_from_static_string ("long-task-error"), 7,
      "stopped early");
  return FALSE;
}

static void
long_destroy (gpointer user_data)
{
  LongTask *lt = user_data;

  g_atomic_int_inc (&lt->destroyed);
}

static void
test_flush_running (void)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "busy");
  NpuQueue *other = npu_queue_new (device, "other");
  NpuFence *running, *behind, *ready, *other_f, *other_dep;
  Rec rec_behind = { 0, }, rec_ready = { 0, }, rec_other = { 0, };
  Rec rec_other_dep = { 0, };
  LongTask lt;
  gint64 end = g_get_monotonic_time () + LONG_TIMEOUT_US;

  memset (&lt, 0, sizeof (lt));
  g_mutex_init (&lt.lock);
  g_cond_init (&lt.cond);

  running = npu_queue_submit (queue, long_func, &lt, long_destroy, NULL, 0);
  g_mutex_lock (&lt.lock);
  while (!lt.started)
    g_assert_true (g_cond_wait_until (&lt.cond, &lt.lock, end));
  g_mutex_unlock (&lt.lock);

  /* One waiting on the running task, one ready but behind it, and one of
   * another queue that the flush must leave alone. */
  behind = submit_rec (queue, &rec_behind, &running, 1);
  ready = submit_rec (queue, &rec_ready, NULL, 0);
  other_f = submit_rec (other, &rec_other, NULL, 0);
  /* and one of the other queue waiting on the running task */
  other_dep = submit_rec (other, &rec_other_dep, &running, 1);
  g_assert_cmpuint (npu_queue_get_n_pending (queue), ==, 3);

  npu_queue_flush (queue);
  /* It waited for the running task to end, and told it to stop. */
  g_assert_cmpint (g_atomic_int_get (&lt.finished), ==, 1);
  g_assert_true (lt.saw_cancel);
  g_assert_cmpint (g_atomic_int_get (&lt.destroyed), ==, 1);
  g_assert_cmpuint (npu_queue_get_n_pending (queue), ==, 0);

  /* Its own error becomes the one cancellation code, its message kept */
  assert_fence_error (running, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
      "busy", "cancelled while it ran", "stopped early", NULL);
  /* A task whose input was cancelled did not run and is cancelled too */
  assert_fence_error (other_dep, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
      "other", "an input of this task failed", "stopped early", NULL);
  g_assert_cmpint (rec_other_dep.ran, ==, 0);
  g_assert_cmpint (rec_other_dep.destroyed, ==, 1);
  g_assert_true (npu_fence_is_signalled (behind));
  g_assert_true (npu_fence_is_signalled (ready));
  assert_fence_error (behind, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
      "busy", "flush", NULL);
  assert_fence_error (ready, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
      "busy", "flush", NULL);
  g_assert_cmpint (rec_behind.ran, ==, 0);
  g_assert_cmpint (rec_ready.ran, ==, 0);
  g_assert_cmpint (rec_behind.destroyed, ==, 1);
  g_assert_cmpint (rec_ready.destroyed, ==, 1);

  assert_fence_ok (other_f);
  g_assert_cmpint (rec_other.ran, ==, 1);
  g_assert_false (rec_other.cancelled);

  /* Work submitted after the flush runs, uncancelled. */
  memset (&rec_ready, 0, sizeof (rec_ready));
  npu_fence_unref (ready);
  ready = submit_rec (queue, &rec_ready, NULL, 0);
  assert_fence_ok (ready);
  g_assert_cmpint (rec_ready.ran, ==, 1);
  g_assert_false (rec_ready.cancelled);

  npu_fence_unref (running);
  npu_fence_unref (behind);
  npu_fence_unref (ready);
  npu_fence_unref (other_f);
  npu_fence_unref (other_dep);
  npu_queue_free (queue);
  npu_queue_free (other);
  npu_device_unref (device);
  g_mutex_clear (&lt.lock);
  g_cond_clear (&lt.cond);
}

/* Freeing a queue whose tasks wait on a fence nobody signals neither hangs
 * nor leaks: the tasks are cancelled and their data freed at once, and the
 * device goes away once that fence does. */
static void
test_free_queue_pending (void)
{
  guint base_threads = count_threads ();
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "doomed");
  NpuFence *never = npu_fence_new ();
  NpuFence *later = npu_fence_new ();
  NpuFence *f[4];
  Rec recs[4];
  gint64 start;
  guint i;

  memset (recs, 0, sizeof (recs));
  f[0] = submit_rec (queue, &recs[0], &never, 1);
  f[1] = submit_rec (queue, &recs[1], &f[0], 1);
  f[2] = submit_rec (queue, &recs[2], &later, 1);
  f[3] = submit_rec (queue, &recs[3], &never, 1);

  /* Dropping the device first: the queue holds it. */
  npu_device_unref (device);
  start = g_get_monotonic_time ();
  npu_queue_free (queue);
  g_assert_cmpint (g_get_monotonic_time () - start, <, G_USEC_PER_SEC);
  for (i = 0; i < 4; i++) {
    g_assert_cmpint (recs[i].destroyed, ==, 1);
    assert_fence_error (f[i], NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
        "doomed", NULL);
    npu_fence_unref (f[i]);
  }

  /* A late signal reaches tasks that are long gone: nothing runs. */
  npu_fence_signal (later);
  npu_fence_unref (later);
  /* The never-signalled fence going away releases the last tasks, and with
   * them the device and its threads. */
  npu_fence_unref (never);
  g_assert_cmpuint (settled_threads (base_threads), ==, base_threads);
  for (i = 0; i < 4; i++) {
    g_assert_cmpint (recs[i].ran, ==, 0);
    g_assert_cmpint (recs[i].destroyed, ==, 1);
  }
}

/* ------------------------------------------------------------------------
 * Parallel loops
 */
typedef struct
{
  gsize n;
  gsize grain;
  guint n_threads;
  gint *hits;                   /* per index, when n is small */
  GMutex lock;
  GArray *slices;               /* gsize pairs, when n is huge */
  gint bad_worker;
  gint bad_slice;
  gint n_slices;
} ParCheck;

static void
par_func (gsize start, gsize end, guint worker, gpointer user_data)
{
  ParCheck *pc = user_data;
  gsize i;

  if (worker >= pc->n_threads)
    g_atomic_int_inc (&pc->bad_worker);
  if (start >= end || end > pc->n || end - start > MAX (pc->grain, 1))
    g_atomic_int_inc (&pc->bad_slice);
  g_atomic_int_inc (&pc->n_slices);
  if (pc->hits) {
    for (i = start; i < end; i++)
      g_atomic_int_inc (&pc->hits[i]);
  } else {
    gsize pair[2] = { start, end };

    g_mutex_lock (&pc->lock);
    g_array_append_vals (pc->slices, pair, 2);
    g_mutex_unlock (&pc->lock);
  }
}

static gint
cmp_gsize (gconstpointer a, gconstpointer b)
{
  gsize x = *(const gsize *) a, y = *(const gsize *) b;

  return x < y ? -1 : x > y;
}

static void
par_check_run (NpuTask * task, gsize n, gsize grain)
{
  ParCheck pc;
  guint n_threads = npu_task_get_n_threads (task);
  gsize i, g = MAX (grain, 1);
  gboolean small = n <= 200000;

  memset (&pc, 0, sizeof (pc));
  pc.n = n;
  pc.grain = grain;
  pc.n_threads = n_threads;
  g_mutex_init (&pc.lock);
  if (small)
    pc.hits = g_new0 (gint, MAX (n, 1));
  else
    pc.slices = g_array_new (FALSE, FALSE, sizeof (gsize));

  npu_task_parallel_for (task, n, grain, par_func, &pc);

  if (pc.bad_worker || pc.bad_slice)
    g_error ("n %" G_GSIZE_FORMAT " grain %" G_GSIZE_FORMAT " threads %u: "
        "%d bad workers, %d bad slices", n, grain, n_threads, pc.bad_worker,
        pc.bad_slice);
  if (small) {
    for (i = 0; i < n; i++)
      if (pc.hits[i] != 1)
        g_error ("n %" G_GSIZE_FORMAT " grain %" G_GSIZE_FORMAT " threads "
            "%u: index %" G_GSIZE_FORMAT " run %d times", n, grain,
            n_threads, i, pc.hits[i]);
    g_free (pc.hits);
  } else {
    /* Slices tile [0, n) exactly. */
    gsize *s, expect = n / g + (n % g != 0);

    g_array_sort (pc.slices, cmp_gsize);
    s = (gsize *) pc.slices->data;
    if (pc.slices->len != 2 * expect)
      g_error ("n %" G_GSIZE_FORMAT " grain %" G_GSIZE_FORMAT ": %u slices,"
          " expected %" G_GSIZE_FORMAT, n, grain, pc.slices->len / 2,
          expect);
    g_assert_cmpuint (s[0], ==, 0);
    for (i = 0; i + 1 < expect; i++)
      g_assert_cmpuint (s[2 * i + 1], ==, s[2 * i + 2]);
    g_assert_cmpuint (s[2 * expect - 1], ==, n);
    g_array_free (pc.slices, TRUE);
  }
  g_mutex_clear (&pc.lock);
}

static gboolean
par_task (NpuTask * task, gpointer user_data, GError ** error)
{
  static const gsize ns[] = { 0, 1, 2, 3, 7, 63, 64, 65, 1000, 100003 };
  static const gsize grains[] = { 0, 1, 3, 64, 1000, 1 << 20 };
  guint i, j;

  for (i = 0; i < G_N_ELEMENTS (ns); i++)
    for (j = 0; j < G_N_ELEMENTS (grains); j++)
      par_check_run (task, ns[i], grains[j]);

  /* Huge loops, checked by their slices: offsets near G_MAXSIZE must not
   * wrap round. */
  par_check_run (task, G_MAXSIZE, G_MAXSIZE / 4 + 1);
  par_check_run (task, G_MAXSIZE, G_MAXSIZE / 2);
  par_check_run (task, G_MAXSIZE - 1, (gsize) 1 << 62);
  par_check_run (task, G_MAXSIZE, G_MAXSIZE / 1000);
  par_check_run (task, (gsize) 1 << 40, (gsize) 1 << 30);
  return TRUE;
}

/* @func as one task on a CPU device of each of the @n thread @counts
 * (0: one a CPU), checked to end without error */
static void
run_task_on_cpus (NpuTaskFunc func, const guint * counts, guint n)
{
  guint i;

  for (i = 0; i < n; i++) {
    NpuDevice *device = npu_device_new_cpu (counts[i]);
    NpuQueue *queue = npu_queue_new (device, "task");
    NpuFence *fence = npu_queue_submit (queue, func, NULL, NULL, NULL, 0);

    assert_fence_ok (fence);
    npu_fence_unref (fence);
    npu_queue_free (queue);
    npu_device_unref (device);
  }
}

static void
test_parallel_for (void)
{
  const guint counts[] = { 1, 2, 4, 0 };

  run_task_on_cpus (par_task, counts, G_N_ELEMENTS (counts));
}

static void
sum_func (gsize start, gsize end, guint worker, gpointer user_data)
{
  gsize i, s = 0;

  for (i = start; i < end; i++)
    s += i;
  __atomic_fetch_add ((gsize *) user_data, s, __ATOMIC_RELAXED);
}

/* Back-to-back loops, as a transformer layer issues them. */
static gboolean
many_loops_task (NpuTask * task, gpointer user_data, GError ** error)
{
  guint i;

  for (i = 0; i < 3000; i++) {
    gsize sum = 0, n = 1 + i % 300;

    npu_task_parallel_for (task, n, 1 + i % 7, sum_func, &sum);
    g_assert_cmpuint (sum, ==, n * (n - 1) / 2);
  }
  return TRUE;
}

/* Which workers took part in a loop of slow slices (each sleeps, so that
 * every awake helper gets round to one) */
static void
mark_worker (gsize start, gsize end, guint worker, gpointer user_data)
{
  gint *seen = user_data;

  g_usleep (2000);
  if (worker < 32)
    g_atomic_int_or ((guint *) seen, 1u << worker);
  else
    g_atomic_int_or ((guint *) seen, 1u << 31);
}

typedef struct
{
  guint n_threads;
  guint workers;                /* bit per worker that ran a slice */
} CapRun;

static gboolean
cap_task (NpuTask * task, gpointer user_data, GError ** error)
{
  CapRun *run = user_data;

  run->n_threads = npu_task_get_n_threads (task);
  npu_task_parallel_for (task, 64, 1, mark_worker, &run->workers);
  /* and every loop shape stays on the task's workers (par_check_run) */
  par_task (task, NULL, error);
  return TRUE;
}

static CapRun
run_capped (NpuQueue * queue)
{
  CapRun run = { 0, 0 };
  NpuFence *fence = npu_queue_submit (queue, cap_task, &run, NULL, NULL, 0);

  assert_fence_ok (fence);
  npu_fence_unref (fence);
  return run;
}

/* npu_queue_set_max_threads: a capped queue's loops run on workers below
 * the cap; the next queue's task has every thread back (the helpers that
 * sat out are woken); another queue is not capped */
static void
test_parallel_for_capped (void)
{
  NpuDevice *device = npu_device_new_cpu (4);
  NpuQueue *capped = npu_queue_new (device, "capped");
  NpuQueue *free_q = npu_queue_new (device, "free");
  CapRun run;

  npu_queue_set_max_threads (capped, 2);
  run = run_capped (capped);
  g_assert_cmpuint (run.n_threads, ==, 2);
  g_assert_cmpuint (run.workers & ~3u, ==, 0);

  run = run_capped (free_q);
  g_assert_cmpuint (run.n_threads, ==, 4);
  /* more than the two workers the last task had: the two that slept came
   * back (64 slices of 2 ms give each of them time to) */
  g_assert_cmpuint (g_bit_nth_lsf (run.workers & ~3u, -1), >=, 2);

  npu_queue_set_max_threads (capped, 1);
  run = run_capped (capped);
  g_assert_cmpuint (run.n_threads, ==, 1);
  g_assert_cmpuint (run.workers, ==, 1);

  /* a cap above the device's count is the device's */
  npu_queue_set_max_threads (capped, 64);
  run = run_capped (capped);
  g_assert_cmpuint (run.n_threads, ==, 4);
  npu_queue_set_max_threads (capped, 0);
  run = run_capped (capped);
  g_assert_cmpuint (run.n_threads, ==, 4);

  npu_queue_free (capped);
  npu_queue_free (free_q);
  npu_device_unref (device);
}

static void
test_parallel_for_back_to_back (void)
{
  NpuDevice *device = npu_device_new_cpu (4);
  NpuQueue *queue = npu_queue_new (device, "loops");
  NpuFence *fences[3];
  guint i;

  for (i = 0; i < 3; i++)
    fences[i] = npu_queue_submit (queue, many_loops_task, NULL, NULL, NULL,
        0);
  for (i = 0; i < 3; i++) {
    assert_fence_ok (fences[i]);
    npu_fence_unref (fences[i]);
  }
  npu_queue_free (queue);
  npu_device_unref (device);
}

static gboolean
one_loop_task (NpuTask * task, gpointer user_data, GError ** error)
{
  gsize sum = 0;

  npu_task_parallel_for (task, 1000, 10, sum_func, &sum);
  g_assert_cmpuint (sum, ==, 1000 * 999 / 2);
  return TRUE;
}

/* A loop issued the moment a device is up: helpers that have not started
 * yet must still take part in it. */
static void
test_parallel_for_fresh_device (void)
{
  guint i, rounds = g_test_slow () ? 1000 : 100;

  for (i = 0; i < rounds; i++) {
    NpuDevice *device = npu_device_new_cpu (2 + i % 3);
    NpuQueue *queue = npu_queue_new (device, "fresh");
    NpuFence *fence = npu_queue_submit (queue, one_loop_task, NULL, NULL,
        NULL, 0);

    assert_fence_ok (fence);
    npu_fence_unref (fence);
    npu_queue_free (queue);
    npu_device_unref (device);
  }
}

/* Loops with a pause before each, longer than the helpers spin
 * (npubackend.c's SPIN_MICROSECONDS, 30 us): each loop finds the helpers
 * asleep, and they must be woken and take their part in it. */
#define WAKE_ROUNDS 20
#define WAKE_SLICES 64

typedef struct
{
  gint ran[WAKE_SLICES];
  gint by_worker[4];            /* slices run by each worker */
} WakeLoop;

static void
wake_slice (gsize start, gsize end, guint worker, gpointer user_data)
{
  WakeLoop *w = user_data;
  gsize i;

  g_assert_cmpuint (worker, <, G_N_ELEMENTS (w->by_worker));
  for (i = start; i < end; i++)
    __atomic_fetch_add (&w->ran[i], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add (&w->by_worker[worker], 1, __ATOMIC_RELAXED);
  /* long enough for a woken helper to come round to the loop */
  g_usleep (100);
}

static gboolean
wake_task (NpuTask * task, gpointer user_data, GError ** error)
{
  guint n_threads = npu_task_get_n_threads (task), r, i, w;
  guint took_part[4] = { 0 };

  for (r = 0; r < WAKE_ROUNDS; r++) {
    WakeLoop loop;

    memset (&loop, 0, sizeof (loop));
    g_usleep (2000);
    npu_task_parallel_for (task, WAKE_SLICES, 1, wake_slice, &loop);
    for (i = 0; i < WAKE_SLICES; i++)
      if (loop.ran[i] != 1)
        g_error ("%u threads, round %u: slice %u ran %d times", n_threads, r,
            i, loop.ran[i]);
    for (w = 0; w < n_threads; w++)
      took_part[w] += loop.by_worker[w] > 0;
  }
  /* Asleep helpers that were never woken leave every slice to the task's
   * thread: each helper must have run slices in some of the rounds. */
  for (w = 1; w < n_threads; w++)
    if (took_part[w] == 0)
      g_error ("%u threads: helper %u took part in none of %u loops issued "
          "after a pause", n_threads, w, WAKE_ROUNDS);
  return TRUE;
}

static void
test_parallel_for_after_pause (void)
{
  const guint counts[] = { 2, 4 };

  run_task_on_cpus (wake_task, counts, G_N_ELEMENTS (counts));
}

/* ------------------------------------------------------------------------
 * Stress
 */
#define N_STRESS 10000
#define MAX_DEPS 3

typedef struct
{
  gint id;
  guint n_deps;
  gint deps[MAX_DEPS];
  gboolean fail;                /* fails by itself */
  gboolean expect_fail;         /* fails, or an input (transitively) did */
  gint ran;
  gint done;                    /* set when it ran to the end */
  gint destroyed;
} StressTask;

static StressTask *stress_tasks;

static gboolean
stress_func (NpuTask * task, gpointer user_data, GError ** error)
{
  StressTask *t = user_data;
  guint i;

  g_atomic_int_inc (&t->ran);
  /* Every input has finished, successfully (or we would not run). */
  for (i = 0; i < t->n_deps; i++) {
    StressTask *dep = &stress_tasks[t->deps[i]];

    if (!g_atomic_int_get (&dep->done) || dep->expect_fail)
      g_error ("task %d ran before (or despite) its input %d", t->id,
          dep->id);
  }
  if (t->fail) {
    g_set_error (error, TEST_ERROR, 1000 + t->id, "stress task %d failed",
        t->id);
    return FALSE;
  }
  g_atomic_int_set (&t->done, 1);
  return TRUE;
}

static void
stress_destroy (gpointer user_data)
{
  StressTask *t = user_data;

  g_atomic_int_inc (&t->destroyed);
}

static void
test_stress (void)
{
  guint base_threads = count_threads (), base_fds = count_fds ();
  NpuDevice *d1 = npu_device_new_cpu (2);
  NpuDevice *d2 = npu_device_new_cpu (1);
  NpuQueue *queues[3];
  NpuFence **fences = g_new0 (NpuFence *, N_STRESS);
  GRand *rand = g_rand_new_with_seed (g_test_rand_int ());
  guint i, j, n_failed = 0;

  queues[0] = npu_queue_new (d1, "s0");
  queues[1] = npu_queue_new (d1, "s1");
  queues[2] = npu_queue_new (d2, "s2");
  stress_tasks = g_new0 (StressTask, N_STRESS);

  for (i = 0; i < N_STRESS; i++) {
    StressTask *t = &stress_tasks[i];
    NpuFence *in[MAX_DEPS];

    t->id = i;
    t->n_deps = i == 0 ? 0 : g_rand_int_range (rand, 0, MAX_DEPS + 1);
    /* Mostly recent tasks, so that long chains form. */
    for (j = 0; j < t->n_deps; j++) {
      gint back = g_rand_int_range (rand, 1, MIN (i, 50) + 1);

      t->deps[j] = i - back;
      in[j] = fences[t->deps[j]];
      if (stress_tasks[t->deps[j]].expect_fail)
        t->expect_fail = TRUE;
    }
    /* Failures spread to nearly everything after them: keep them to the
     * tail, so most of the run checks ordering of successful tasks. */
    t->fail = i >= N_STRESS - N_STRESS / 10
        && g_rand_int_range (rand, 0, 100) == 0;
    if (t->fail)
      t->expect_fail = TRUE;
    fences[i] = npu_queue_submit (queues[g_rand_int_range (rand, 0, 3)],
        stress_func, t, stress_destroy, in, t->n_deps);
  }

  for (i = 0; i < N_STRESS; i++) {
    StressTask *t = &stress_tasks[i];
    GError *error = NULL;
    gboolean ok = npu_fence_wait (fences[i], LONG_TIMEOUT_US, &error);

    if (error && error->domain == NPU_FENCE_ERROR
        && error->code == NPU_FENCE_ERROR_TIMEOUT)
      g_error ("task %d: %s", t->id, error->message);
    g_assert_cmpint (ok, ==, !t->expect_fail);
    g_assert_cmpint (g_atomic_int_get (&t->destroyed), ==, 1);
    if (t->fail) {
      /* Its own error, unless an input failed first. */
      g_assert_cmpint (t->ran, <=, 1);
      if (t->ran)
        g_assert_error (error, TEST_ERROR, 1000 + t->id);
    } else if (t->expect_fail) {
      g_assert_cmpint (t->ran, ==, 0);
      g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_FAILED);
      g_assert_nonnull (strstr (error->message, "stress task"));
      /* Names the first failure, not every hop: stays short. */
      g_assert_cmpuint (strlen (error->message), <, 100);
    } else {
      g_assert_cmpint (t->ran, ==, 1);
    }
    n_failed += !ok;
    g_clear_error (&error);
  }
  g_test_message ("%u of %u tasks failed", n_failed, N_STRESS);
  for (i = 0; i < 3; i++)
    g_assert_cmpuint (npu_queue_get_n_pending (queues[i]), ==, 0);

  for (i = 0; i < N_STRESS; i++)
    npu_fence_unref (fences[i]);
  for (i = 0; i < 3; i++)
    npu_queue_free (queues[i]);
  npu_device_unref (d1);
  npu_device_unref (d2);
  g_assert_cmpuint (settled_threads (base_threads), ==, base_threads);
  g_assert_cmpuint (count_fds (), ==, base_fds);
  g_free (fences);
  g_free (stress_tasks);
  stress_tasks = NULL;
  g_rand_free (rand);
}

/* Flushes racing with tasks becoming ready and running: every task ends
 * exactly once, one way or the other. */
static void
test_stress_flush (void)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "racy");
  guint round, i;

  for (round = 0; round < 100; round++) {
    NpuFence *gate = npu_fence_new ();
    NpuFence *f[20];
    Rec recs[20];

    memset (recs, 0, sizeof (recs));
    for (i = 0; i < 20; i++) {
      recs[i].sleep_us = i % 5 == 0 ? 500 : 0;
      f[i] = submit_rec (queue, &recs[i], i % 2 ? &gate : NULL, i % 2);
    }
    npu_fence_signal (gate);
    if (round % 3)
      g_usleep (round * 10);
    npu_queue_flush (queue);
    for (i = 0; i < 20; i++) {
      GError *error = NULL;

      g_assert_true (npu_fence_is_signalled (f[i]));
      g_assert_cmpint (recs[i].destroyed, ==, 1);
      if (npu_fence_get_result (f[i], &error)) {
        g_assert_cmpint (recs[i].ran, ==, 1);
      } else {
        g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED);
        g_assert_cmpint (recs[i].ran, ==, 0);
        g_clear_error (&error);
      }
      npu_fence_unref (f[i]);
    }
    npu_fence_unref (gate);
  }
  npu_queue_free (queue);
  npu_device_unref (device);
}

static gpointer
nop_thread (gpointer data)
{
  return NULL;
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  /* the validation layer checks the Vulkan calls in the plain run; under
   * valgrind it only multiplies the time */
  if (g_getenv ("NPU_UNDER_VALGRIND"))
    g_setenv ("NPU_VULKAN_VALIDATION", "0", TRUE);
  /* Tests count the process's threads: let a sanitizer or the C library
   * start whatever helper thread they start with the first thread. */
  g_thread_join (g_thread_new ("warm-up", nop_thread, NULL));

  g_test_add_func ("/backend/cpu-count", test_cpu_count);
  g_test_add_func ("/backend/device/threads", test_device_threads);
  g_test_add_func ("/backend/device/get-cpu", test_device_get_cpu);
  g_test_add_func ("/backend/device/open", test_device_open);
  g_test_add_func ("/backend/device/get-cpu-threads",
      test_device_get_cpu_threads);
  g_test_add_func ("/backend/task/runs", test_task_runs);
  g_test_add_func ("/backend/task/inputs", test_task_inputs);
  g_test_add_func ("/backend/task/chain", test_task_chain);
  g_test_add_func ("/backend/task/input-failed", test_task_input_failed);
  g_test_add_func ("/backend/task/error", test_task_error);
  g_test_add_func ("/backend/task/one-at-a-time", test_task_one_at_a_time);
  g_test_add_func ("/backend/flush/pending", test_flush_pending);
  g_test_add_func ("/backend/flush/running", test_flush_running);
  g_test_add_func ("/backend/flush/free-queue-pending",
      test_free_queue_pending);
  g_test_add_func ("/backend/parallel-for/coverage", test_parallel_for);
  g_test_add_func ("/backend/parallel-for/capped", test_parallel_for_capped);
  g_test_add_func ("/backend/parallel-for/back-to-back",
      test_parallel_for_back_to_back);
  g_test_add_func ("/backend/parallel-for/fresh-device",
      test_parallel_for_fresh_device);
  g_test_add_func ("/backend/parallel-for/after-pause",
      test_parallel_for_after_pause);
  g_test_add_func ("/backend/stress/dependencies", test_stress);
  g_test_add_func ("/backend/stress/flush", test_stress_flush);
  g_test_add_func ("/backend/cancel-one", test_cancel_one);

  return g_test_run ();
}
