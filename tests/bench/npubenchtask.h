/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu benchmarks: one task on a queue, waited for, the way every
 * benchmark runs its work on the device's threads (a task is where
 * npu_task_parallel_for() can spread it, as the elements do).
 */
#ifndef NPU_BENCH_TASK_H
#define NPU_BENCH_TASK_H

#include <core/device/npubackend.h>
#include <core/device/npufence.h>

#include <stdio.h>
#include <stdlib.h>

/* Runs @func (@data) as one task on @queue and waits for its fence.  A
 * benchmark has nothing to measure after a failed task, so one ends the
 * program with the task's error.  Returns the wall-clock seconds from
 * submission to the fence signalling. */
static inline double
npu_bench_run_task (NpuQueue * queue, NpuTaskFunc func, gpointer data)
{
  gint64 t0 = g_get_monotonic_time ();
  NpuFence *fence = npu_queue_submit (queue, func, data, NULL, NULL, 0);
  GError *error = NULL;

  if (!npu_fence_wait (fence, -1, &error)) {
    fprintf (stderr, "benchmark task failed: %s\n",
        error ? error->message : "no error given");
    exit (1);
  }
  npu_fence_unref (fence);
  return (g_get_monotonic_time () - t0) / 1e6;
}

#endif /* NPU_BENCH_TASK_H */
