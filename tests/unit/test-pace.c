/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the decode pacer (npupace.h) with an injected
 * clock: a fake decoder whose token time depends on its thread count */
#include <core/models/npupace.h>

#define MS G_GINT64_CONSTANT (1000000)

/* Runs @n tokens on the fake clock @now; returns the last token's end and
 * stores every token's start in @starts (when not NULL) */
static gint64
run (NpuPace * pace, const gint64 * took_by_threads, guint n, gint64 * now,
    gint64 * starts)
{
  guint i;
  gint64 end = 0;

  for (i = 0; i < n; i++) {
    gint64 start = *now;

    if (starts)
      starts[i] = start;
    end = start + took_by_threads[npu_pace_get_threads (pace) - 1];
    *now = end + npu_pace_token_done (pace, start, end);
  }
  return end;
}

/* 10 tokens/s: 1 and 2 threads are too slow, 3 hold 100 ms, so 4 are never
 * tried; then a token starts every 100 ms exactly */
static void
test_fewest (void)
{
  const gint64 took[4] = { 250 * MS, 130 * MS, 90 * MS, 70 * MS };
  NpuPace *pace = npu_pace_new (10.0, 4, 2);
  gint64 now = 0, starts[20];
  guint i;

  g_assert_cmpuint (npu_pace_get_threads (pace), ==, 1);
  run (pace, took, 2, &now, NULL);
  g_assert_false (npu_pace_is_calibrated (pace));
  g_assert_cmpuint (npu_pace_get_threads (pace), ==, 2);
  run (pace, took, 4, &now, NULL);
  g_assert_true (npu_pace_is_calibrated (pace));
  g_assert_cmpuint (npu_pace_get_threads (pace), ==, 3);

  run (pace, took, 20, &now, starts);
  for (i = 1; i < 20; i++)
    g_assert_cmpint (starts[i] - starts[i - 1], ==, 100 * MS);
  g_assert_cmpuint (npu_pace_get_threads (pace), ==, 3);
  npu_pace_free (pace);
}

/* 100 tokens/s: no count holds 10 ms; the fastest (3 threads, since 4
 * contend) is kept, and no token sleeps */
static void
test_none_holds (void)
{
  const gint64 took[4] = { 50 * MS, 30 * MS, 20 * MS, 25 * MS };
  NpuPace *pace = npu_pace_new (100.0, 4, 1);
  gint64 now = 0, starts[8];
  guint i;

  run (pace, took, 4, &now, NULL);
  g_assert_true (npu_pace_is_calibrated (pace));
  g_assert_cmpuint (npu_pace_get_threads (pace), ==, 3);
  run (pace, took, 8, &now, starts);
  for (i = 1; i < 8; i++)
    g_assert_cmpint (starts[i] - starts[i - 1], ==, 20 * MS);
  npu_pace_free (pace);
}

/* Sleeps fill the period; a late token does not make the next ones rush */
static void
test_sleep (void)
{
  NpuPace *pace = npu_pace_new (10.0, 1, 1);

  g_assert_cmpint (npu_pace_token_done (pace, 0, 90 * MS), ==, 10 * MS);
  g_assert_cmpint (npu_pace_token_done (pace, 100 * MS, 190 * MS), ==,
      10 * MS);
  /* 150 ms: late by 50 ms, no sleep, the next is due 100 ms after it ends */
  g_assert_cmpint (npu_pace_token_done (pace, 200 * MS, 350 * MS), ==, 0);
  g_assert_cmpint (npu_pace_token_done (pace, 350 * MS, 440 * MS), ==,
      10 * MS);
  g_assert_cmpint (npu_pace_token_done (pace, 450 * MS, 460 * MS), ==,
      90 * MS);
  npu_pace_free (pace);
}

/* An answer after a pause starts its deadlines afresh: its first token
 * is due a period after it started, not at once as a late one would be */
static void
test_restart (void)
{
  NpuPace *pace = npu_pace_new (10.0, 1, 1);

  g_assert_cmpint (npu_pace_token_done (pace, 0, 90 * MS), ==, 10 * MS);
  npu_pace_restart (pace);
  g_assert_cmpint (npu_pace_token_done (pace, 2000 * MS, 2090 * MS), ==,
      10 * MS);
  g_assert_cmpint (npu_pace_token_done (pace, 2100 * MS, 2150 * MS), ==,
      50 * MS);
  npu_pace_free (pace);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/pace/fewest", test_fewest);
  g_test_add_func ("/pace/none-holds", test_none_holds);
  g_test_add_func ("/pace/sleep", test_sleep);
  g_test_add_func ("/pace/restart", test_restart);
  return g_test_run ();
}
