/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what the task events (npuevents.h) cost
 *
 *   build/tests/bench/bench-events [ROUNDS]
 *
 * Prints the median time of one empty task (submitted, run on a one-thread
 * CPU device, waited for) without an event handler and with a handler that
 * does nothing, and the time of one npu_events_stage() call without a
 * handler (the relaxed load and the branch the elements pay).  The figure
 * without a handler is the backend's own cost of a task: the hook adds one
 * load to it.
 */
#include <core/device/npubackend.h>
#include <core/device/npuevents.h>
#include "npubenchstats.h"

#define TASKS 20000
#define STAGES 100000000

static gboolean
empty_task (NpuTask * task, gpointer user_data, GError ** error)
{
  return TRUE;
}

static void
no_op (const NpuEvent * event, gpointer user_data)
{
  (*(guint64 *) user_data)++;
}

/* microseconds per task */
static double
time_tasks (NpuQueue * queue)
{
  gint64 t0 = g_get_monotonic_time ();
  guint i;

  for (i = 0; i < TASKS; i++) {
    NpuFence *f = npu_queue_submit (queue, empty_task, NULL, NULL, NULL, 0);

    npu_fence_wait (f, -1, NULL);
    npu_fence_unref (f);
  }
  return (double) (g_get_monotonic_time () - t0) / TASKS;
}

/* nanoseconds per call */
static double
time_stages (void)
{
  gint64 t0 = g_get_monotonic_time ();
  guint i;

  for (i = 0; i < STAGES; i++) {
    npu_events_stage (i & 1, "stage", i);
    /* keeps the loop a loop */
    __asm__ __volatile__ ("":::"memory");
  }
  return (double) (g_get_monotonic_time () - t0) * 1000.0 / STAGES;
}

int
main (int argc, char **argv)
{
  guint rounds = argc > 1 ? (guint) g_ascii_strtoull (argv[1], NULL, 10) : 7;
  NpuDevice *device = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (device, "bench");
  double *off = g_new (double, MAX (rounds, 1));
  double *on = g_new (double, MAX (rounds, 1));
  double *stage = g_new (double, MAX (rounds, 1));
  guint64 n_events = 0;
  guint r;

  rounds = MAX (rounds, 1);
  time_tasks (queue);           /* warm up */
  for (r = 0; r < rounds; r++) {
    off[r] = time_tasks (queue);
    stage[r] = time_stages ();
    npu_events_set_handler (no_op, &n_events);
    on[r] = time_tasks (queue);
    npu_events_set_handler (NULL, NULL);
  }
  g_print ("empty task, no handler:        %.2f us (median of %u rounds "
      "of %u)\n", npu_bench_median (off, rounds), rounds, TASKS);
  g_print ("empty task, no-op handler:     %.2f us (%" G_GUINT64_FORMAT
      " events)\n", npu_bench_median (on, rounds), n_events);
  g_print ("npu_events_stage, no handler:  %.2f ns a call\n",
      npu_bench_median (stage, rounds));
  npu_queue_free (queue);
  npu_device_unref (device);
  g_free (off);
  g_free (on);
  g_free (stage);
  return 0;
}
