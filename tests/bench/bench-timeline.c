/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what the npu-timeline tracer costs a task
 *
 *   build/tests/bench/bench-timeline [ROUNDS]
 *
 * Runs empty tasks (submitted, run on a one-thread CPU device, waited for)
 * first without a tracer, then with GST_TRACERS="npu-timeline(...)"
 * recording them (submit, start and finish events, a tag each, written to
 * a file in /tmp), each in a fresh child process, and prints the median
 * time of a task in each.  The difference is what recording costs one
 * task; a frame through npuvisiontok and npullm is a few tasks and pad
 * slices (docs/cost.md).
 */
#include <gst/gst.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <core/device/npubackend.h>
#include "npubenchstats.h"

#define TASKS 20000

static gboolean
empty_task (NpuTask * task, gpointer user_data, GError ** error)
{
  return TRUE;
}

/* The child: @rounds medians of TASKS tasks, microseconds a task, written
 * to @fd */
static void
child (guint rounds, int fd)
{
  NpuDevice *device = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (device, "bench");
  double *t = g_new (double, rounds), m;
  guint r, i;

  for (r = 0; r < rounds; r++) {
    gint64 t0 = g_get_monotonic_time ();

    for (i = 0; i < TASKS; i++) {
      NpuFence *f;

      npu_queue_set_tag (queue, i * G_GUINT64_CONSTANT (33333333));
      f = npu_queue_submit_labelled (queue, "empty", empty_task, NULL, NULL,
          NULL, 0);
      npu_fence_wait (f, -1, NULL);
      npu_fence_unref (f);
    }
    t[r] = (double) (g_get_monotonic_time () - t0) / TASKS;
  }
  m = npu_bench_median (t, rounds);
  if (write (fd, &m, sizeof m) != sizeof m)
    _exit (1);
  npu_queue_free (queue);
  npu_device_unref (device);
  g_free (t);
}

static double
run (guint rounds, const gchar * tracers)
{
  int fds[2];
  pid_t pid;
  double m = -1;
  int status;

  if (pipe (fds) != 0)
    abort ();
  pid = fork ();
  if (pid == 0) {
    close (fds[0]);
    if (tracers)
      g_setenv ("GST_TRACERS", tracers, TRUE);
    else
      g_unsetenv ("GST_TRACERS");
    gst_init (NULL, NULL);
    child (rounds, fds[1]);
    gst_deinit ();
    _exit (0);
  }
  close (fds[1]);
  if (read (fds[0], &m, sizeof m) != sizeof m)
    m = -1;
  close (fds[0]);
  waitpid (pid, &status, 0);
  return m;
}

int
main (int argc, char **argv)
{
  guint rounds = argc > 1 ? (guint) g_ascii_strtoull (argv[1], NULL, 10) : 7;
  gchar *path = g_build_filename (g_get_tmp_dir (), "bench-timeline.json",
      NULL);
  gchar *tracers = g_strdup_printf ("npu-timeline(file=%s)", path);
  double off, on;
  GStatBuf st;

  rounds = MAX (rounds, 1);
  off = run (rounds, NULL);
  on = run (rounds, tracers);
  if (off < 0 || on < 0 || g_stat (path, &st) != 0) {
    g_printerr ("bench-timeline: a run failed (is the plugin on "
        "GST_PLUGIN_PATH?)\n");
    return 1;
  }
  g_print ("empty task, no tracer:        %.2f us (median of %u rounds "
      "of %u)\n", off, rounds, TASKS);
  g_print ("empty task, npu-timeline on:  %.2f us (+%.2f us; %.0f bytes of "
      "trace a task)\n", on, on - off, (double) st.st_size / (rounds * TASKS));
  g_unlink (path);
  g_free (path);
  g_free (tracers);
  return 0;
}
