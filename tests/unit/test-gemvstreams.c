/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the GEMV stream count chosen by measurement
 * (npugemvstreams.h): the trials are timed GEMVs stood in for by sleeps
 * whose length the test sets per stream count, so the right choice is
 * known. */
#include "core/cpu/npugemvstreams.h"

#define BIG (4 * NPU_GEMV_STREAMS_MIN_BYTES)

/* One trial of @bytes on @threads that takes @us_of[streams] */
static guint
trial (guint threads, gsize bytes, const guint * us_of)
{
  NpuGemvStreamsTrial t;

  npu_gemv_streams_begin (&t, threads, bytes);
  g_assert_true (t.streams == 1 || t.streams == 2 || t.streams == 4 ||
      t.streams == 8);
  g_usleep (us_of[t.streams]);
  npu_gemv_streams_end (&t);
  return t.streams;
}

/* The fastest count is kept once each has had its trials, and only
 * then; every count is tried the same number of times */
static void
test_picks_fastest (void)
{
  guint us_of[9] = { 0, 3000, 1000, 0, 2000, 0, 0, 0, 4000 };
  guint seen[9] = { 0, };
  guint i;

  npu_gemv_streams_reset ();
  for (i = 0; i < 4 * NPU_GEMV_STREAMS_TRIALS; i++) {
    g_assert_cmpuint (npu_gemv_streams_get_chosen (1), ==, 0);
    seen[trial (1, BIG, us_of)]++;
  }
  g_assert_cmpuint (seen[1], ==, NPU_GEMV_STREAMS_TRIALS);
  g_assert_cmpuint (seen[2], ==, NPU_GEMV_STREAMS_TRIALS);
  g_assert_cmpuint (seen[4], ==, NPU_GEMV_STREAMS_TRIALS);
  g_assert_cmpuint (seen[8], ==, NPU_GEMV_STREAMS_TRIALS);
  g_assert_cmpuint (npu_gemv_streams_get_chosen (1), ==, 2);
  /* kept from then on */
  for (i = 0; i < 8; i++)
    g_assert_cmpuint (trial (1, BIG, us_of), ==, 2);
  /* another thread count measures for itself */
  g_assert_cmpuint (npu_gemv_streams_get_chosen (2), ==, 0);
}

/* GEMVs too small to time keep the default and count for nothing; a
 * thread count measures apart from the others */
static void
test_small_and_per_threads (void)
{
  /* 8 the fastest */
  guint slow8[9] = { 0, 1500, 1500, 0, 1500, 0, 0, 0, 500 };
  guint i;

  npu_gemv_streams_reset ();
  for (i = 0; i < 200; i++) {
    NpuGemvStreamsTrial t;

    npu_gemv_streams_begin (&t, 1, NPU_GEMV_STREAMS_MIN_BYTES - 1);
    g_assert_cmpuint (t.streams, ==, 8);
    npu_gemv_streams_end (&t);
    npu_gemv_streams_begin (&t, 3, 1000);
    g_assert_cmpuint (t.streams, ==, 4);
    npu_gemv_streams_end (&t);
  }
  g_assert_cmpuint (npu_gemv_streams_get_chosen (1), ==, 0);
  for (i = 0; i < 4 * NPU_GEMV_STREAMS_TRIALS; i++)
    trial (2, BIG, slow8);
  g_assert_cmpuint (npu_gemv_streams_get_chosen (2), ==, 8);
  g_assert_cmpuint (npu_gemv_streams_get_chosen (1), ==, 0);
  npu_gemv_streams_reset ();
  g_assert_cmpuint (npu_gemv_streams_get_chosen (2), ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gemv-streams/picks-fastest", test_picks_fastest);
  g_test_add_func ("/gemv-streams/small-and-per-threads",
      test_small_and_per_threads);
  return g_test_run ();
}
