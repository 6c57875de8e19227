/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the bytes-moved counters and their energy
 * estimate (npubytes.h) */
#include <core/device/npubytes.h>

#include <math.h>

/* Reads and writes land in their own kind and direction only, and a sum
 * of parts is the sum of each kind */
static void
test_count (void)
{
  NpuBytes token, frame, sum;
  guint k;

  npu_bytes_clear (&token);
  npu_bytes_clear (&frame);
  npu_bytes_clear (&sum);
  /* One 4096 x 4096 MXFP4 matrix, 17 bytes a block of 32 */
  npu_bytes_read (&token, NPU_BYTES_WEIGHTS, 4096 * 4096 / 32 * 17);
  npu_bytes_read (&token, NPU_BYTES_KV, 1000);
  npu_bytes_write (&token, NPU_BYTES_KV, 24);
  /* A 640 x 480 RGBA frame */
  npu_bytes_read (&frame, NPU_BYTES_FRAME, 640 * 480 * 4);
  npu_bytes_write (&frame, NPU_BYTES_ACTIVATIONS, 7);

  g_assert_cmpuint (token.read[NPU_BYTES_WEIGHTS], ==, 8912896);
  g_assert_cmpuint (token.written[NPU_BYTES_WEIGHTS], ==, 0);
  g_assert_cmpuint (token.read[NPU_BYTES_KV], ==, 1000);
  g_assert_cmpuint (token.written[NPU_BYTES_KV], ==, 24);
  g_assert_cmpuint (npu_bytes_total (&token), ==, 8912896 + 1024);
  g_assert_cmpuint (npu_bytes_total (&frame), ==, 1228807);

  npu_bytes_add (&sum, &token);
  npu_bytes_add (&sum, &frame);
  npu_bytes_add (&sum, &token);
  for (k = 0; k < NPU_BYTES_N_KINDS; k++) {
    g_assert_cmpuint (sum.read[k], ==, 2 * token.read[k] + frame.read[k]);
    g_assert_cmpuint (sum.written[k], ==,
        2 * token.written[k] + frame.written[k]);
  }
  g_assert_cmpuint (npu_bytes_total (&sum), ==,
      2 * (8912896 + 1024) + 1228807);
  /* what the running sum gained over the last token is that token */
  {
    NpuBytes before = sum, gained;

    npu_bytes_add (&sum, &token);
    npu_bytes_diff (&gained, &sum, &before);
    g_assert_cmpmem (&gained, sizeof gained, &token, sizeof token);
  }
}

/* 1 MiB at 5 pJ/bit is 1048576 x 8 x 5e-12 J = 41.94304 uJ; none at all
 * costs nothing, and the default is the middle of the seed's 3-7 pJ/bit */
static void
test_joules (void)
{
  NpuBytes b;

  npu_bytes_clear (&b);
  g_assert_cmpfloat (npu_bytes_estimate_joules (&b, 5.0), ==, 0.0);
  npu_bytes_read (&b, NPU_BYTES_WEIGHTS, 524288);
  npu_bytes_write (&b, NPU_BYTES_ACTIVATIONS, 524288);
  g_assert_cmpfloat (fabs (npu_bytes_estimate_joules (&b, 5.0) -
          41.94304e-6), <, 1e-15);
  g_assert_cmpfloat (fabs (npu_bytes_estimate_joules (&b, 3.0) -
          25.165824e-6), <, 1e-15);
  g_assert_cmpfloat (NPU_BYTES_DEFAULT_PJ_PER_BIT, >=, 3.0);
  g_assert_cmpfloat (NPU_BYTES_DEFAULT_PJ_PER_BIT, <=, 7.0);
}

/* The names the stats and the trace use, one a kind, none shared */
static void
test_names (void)
{
  guint k, j;

  g_assert_cmpstr (npu_bytes_kind_name (NPU_BYTES_KV), ==, "kv-cache");
  for (k = 0; k < NPU_BYTES_N_KINDS; k++) {
    g_assert_nonnull (npu_bytes_kind_name (k));
    for (j = 0; j < k; j++)
      g_assert_cmpstr (npu_bytes_kind_name (k), !=, npu_bytes_kind_name (j));
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/bytes/count", test_count);
  g_test_add_func ("/bytes/joules", test_joules);
  g_test_add_func ("/bytes/names", test_names);
  return g_test_run ();
}
