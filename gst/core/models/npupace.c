/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: decode paced to a target rate with the fewest threads
 * (npupace.h) */
#include "npupace.h"

struct _NpuPace
{
  gint64 period_ns;
  guint max_threads;
  guint samples;
  /* calibration: the count being timed, its tokens so far and their sum */
  guint threads;
  guint n_timed;
  gint64 sum_ns;
  gint64 *mean_ns;              /* per thread count, index threads - 1 */
  gboolean calibrated;
  gint64 deadline_ns;           /* when the next token is due; 0 if none */
};

NpuPace *
npu_pace_new (gdouble tokens_per_second, guint max_threads,
    guint samples_per_count)
{
  NpuPace *pace;

  g_return_val_if_fail (tokens_per_second > 0.0, NULL);
  g_return_val_if_fail (max_threads >= 1, NULL);
  g_return_val_if_fail (samples_per_count >= 1, NULL);

  pace = g_new0 (NpuPace, 1);
  pace->period_ns = (gint64) (1e9 / tokens_per_second + 0.5);
  pace->max_threads = max_threads;
  pace->samples = samples_per_count;
  pace->threads = 1;
  pace->mean_ns = g_new0 (gint64, max_threads);
  return pace;
}

void
npu_pace_free (NpuPace * pace)
{
  if (!pace)
    return;
  g_free (pace->mean_ns);
  g_free (pace);
}

guint
npu_pace_get_threads (NpuPace * pace)
{
  return pace->threads;
}

gboolean
npu_pace_is_calibrated (NpuPace * pace)
{
  return pace->calibrated;
}

/* The fewest threads whose mean holds the period, else the fastest */
static guint
choose (NpuPace * pace)
{
  guint t, fastest = 1;

  for (t = 1; t <= pace->max_threads; t++) {
    if (pace->mean_ns[t - 1] <= pace->period_ns)
      return t;
    if (pace->mean_ns[t - 1] < pace->mean_ns[fastest - 1])
      fastest = t;
  }
  return fastest;
}

static void
calibrate (NpuPace * pace, gint64 took_ns)
{
  pace->sum_ns += took_ns;
  if (++pace->n_timed < pace->samples)
    return;
  pace->mean_ns[pace->threads - 1] = pace->sum_ns / pace->n_timed;
  pace->n_timed = 0;
  pace->sum_ns = 0;
  /* A count that already holds the period ends the search: more threads
   * would only be faster than needed. */
  if (pace->mean_ns[pace->threads - 1] <= pace->period_ns
      || pace->threads == pace->max_threads) {
    pace->threads = choose (pace);
    pace->calibrated = TRUE;
  } else {
    pace->threads++;
  }
}

void
npu_pace_restart (NpuPace * pace)
{
  pace->deadline_ns = 0;
}

/* Returns the nanoseconds to sleep after a token that ran from @start_ns
 * to @end_ns, before the next one is started. */
gint64
npu_pace_token_done (NpuPace * pace, gint64 start_ns, gint64 end_ns)
{
  g_return_val_if_fail (end_ns >= start_ns, 0);

  if (!pace->calibrated)
    calibrate (pace, end_ns - start_ns);

  if (pace->deadline_ns == 0)
    pace->deadline_ns = start_ns;
  pace->deadline_ns += pace->period_ns;
  if (pace->deadline_ns <= end_ns) {
    /* Late: the next token is due one period from now, not at once. */
    pace->deadline_ns = end_ns;
    return 0;
  }
  return pace->deadline_ns - end_ns;
}
