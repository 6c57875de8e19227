/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: throughput of the MXFP4 quantiser (one core)
 *
 * Not built by meson; see docs/mxfp4.md for the command line.  Reports the
 * best of several passes over a buffer larger than the caches, in MB/s of
 * source data read (10^6 bytes), so F32 and 16-bit sources are comparable
 * with the load-time cost of converting a model file.
 *
 * Usage: bench-mxfp4-quant [million-elements (default 16)] [passes (5)]
 */
#include <core/formats/npumxfp4.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*QuantFunc) (const void *src, NpuBlockMxfp4 *dst, gsize n);

static void
quant_f32 (const void *src, NpuBlockMxfp4 *dst, gsize n)
{
  npu_mxfp4_quantize_f32 (src, dst, n);
}

static void
quant_f16 (const void *src, NpuBlockMxfp4 *dst, gsize n)
{
  npu_mxfp4_quantize_f16 (src, dst, n);
}

static void
quant_bf16 (const void *src, NpuBlockMxfp4 *dst, gsize n)
{
  npu_mxfp4_quantize_bf16 (src, dst, n);
}

static void
quant_q8_0 (const void *src, NpuBlockMxfp4 *dst, gsize n)
{
  npu_mxfp4_quantize_q8_0 (src, dst, n);
}

static double
best_seconds (QuantFunc func, const void *src, NpuBlockMxfp4 *dst, gsize n,
    guint passes)
{
  double best = G_MAXDOUBLE;
  guint p;

  for (p = 0; p < passes; p++) {
    gint64 t0 = g_get_monotonic_time ();
    double s;

    func (src, dst, n);
    s = (g_get_monotonic_time () - t0) / 1e6;
    best = MIN (best, s);
  }
  return best;
}

int
main (int argc, char **argv)
{
  gsize n = (argc > 1 ? (gsize) atol (argv[1]) : 16) * 1000 * 1000;
  guint passes = argc > 2 ? (guint) atoi (argv[2]) : 5;
  GRand *rand = g_rand_new_with_seed (1234);
  float *f32;
  guint16 *f16, *bf16;
  guint8 *q8;
  NpuBlockMxfp4 *dst;
  float *back;
  gsize i, nb;
  double s;
  guint32 check = 0;

  n -= n % NPU_MXFP4_BLOCK_SIZE;
  nb = n / NPU_MXFP4_BLOCK_SIZE;
  f32 = g_new (float, n);
  f16 = g_new (guint16, n);
  bf16 = g_new (guint16, n);
  q8 = g_malloc (nb * NPU_Q8_0_BLOCK_BYTES);
  dst = g_new (NpuBlockMxfp4, nb);
  back = g_new (float, n);

  /* Weight-like data: roughly normal, with a block-to-block spread of
   * magnitudes so the scale varies */
  for (i = 0; i < n; i++) {
    double v = g_rand_double_range (rand, -1, 1) + g_rand_double_range (rand,
        -1, 1) + g_rand_double_range (rand, -1, 1);
    guint32 u;

    if (i % NPU_MXFP4_BLOCK_SIZE == 0)
      v *= 4;
    f32[i] = (float) (v * 0.02);
    memcpy (&u, &f32[i], 4);
    bf16[i] = (guint16) (u >> 16);
    /* an F16 with the same leading bits: plenty for a benchmark */
    f16[i] = (guint16) (((u >> 16) & 0x8000) | 0x2000 | ((u >> 13) & 0x3ff));
  }
  for (i = 0; i < nb; i++) {
    guint8 *b = q8 + i * NPU_Q8_0_BLOCK_BYTES;
    guint16 d = 0x1c00;           /* 2^-8 */
    guint j;

    memcpy (b, &d, 2);
    for (j = 0; j < NPU_MXFP4_BLOCK_SIZE; j++)
      b[2 + j] = (guint8) g_rand_int_range (rand, -127, 128);
  }

  printf ("%" G_GSIZE_FORMAT " elements, best of %u passes\n", n, passes);

  s = best_seconds (quant_f32, f32, dst, n, passes);
  printf ("quantize f32 : %8.1f MB/s in, %8.1f Melem/s\n",
      n * 4 / s / 1e6, n / s / 1e6);
  s = best_seconds (quant_f16, f16, dst, n, passes);
  printf ("quantize f16 : %8.1f MB/s in, %8.1f Melem/s\n",
      n * 2 / s / 1e6, n / s / 1e6);
  s = best_seconds (quant_bf16, bf16, dst, n, passes);
  printf ("quantize bf16: %8.1f MB/s in, %8.1f Melem/s\n",
      n * 2 / s / 1e6, n / s / 1e6);
  s = best_seconds (quant_q8_0, q8, dst, n, passes);
  printf ("quantize q8_0: %8.1f MB/s in, %8.1f Melem/s\n",
      nb * NPU_Q8_0_BLOCK_BYTES / s / 1e6, n / s / 1e6);

  {
    double best = G_MAXDOUBLE;
    guint p;

    npu_mxfp4_quantize_f32 (f32, dst, n);
    for (p = 0; p < passes; p++) {
      gint64 t0 = g_get_monotonic_time ();
      double sec;

      npu_mxfp4_dequantize (dst, back, n);
      sec = (g_get_monotonic_time () - t0) / 1e6;
      best = MIN (best, sec);
    }
    printf ("dequantize   : %8.1f MB/s out, %8.1f Melem/s\n",
        n * 4 / best / 1e6, n / best / 1e6);
  }

  /* keep the work observable */
  for (i = 0; i < nb; i++)
    check = check * 31 + dst[i].e + dst[i].qs[i % 16];
  printf ("checksum %08x\n", check);

  g_free (f32);
  g_free (f16);
  g_free (bf16);
  g_free (q8);
  g_free (dst);
  g_free (back);
  g_rand_free (rand);
  return 0;
}
