/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 and Q8_0 matrix kernels against double-precision references
 *
 * Every path this CPU has (scalar, avx2, avx512, asimd, neon, neon-i8mm), on
 * both weight layouts, with no task and inside tasks on 1 and 2 threads,
 * on random shapes from a fixed seed.  Tolerances are the bounds in npumatmul.h,
 * evaluated per output:
 *
 *  - scalar (exact F32): a block's 32 products are summed, scaled by a power
 *    of two (exact) and added to the row sum, so each product passes at most
 *    32 + k/32 roundings: |err| <= (k/32 + 34) 2^-24 sum |w x|.
 *  - int8 paths: activation rounding sum |w| d (1/2 + 2^-17), with
 *    d = max|x| / 127 of the element's block, plus the F32 accumulation
 *    (k/32 + 4) 2^-24 sum |w| (|x| + d); and, since random activations
 *    stay far from the worst case of that bound, within the second term
 *    alone of a model of their quantisation (the codes computed here, their
 *    products summed in double), as the int16 GEMM below.
 *  - int8 paths, accurate precision (activations and their residual):
 *    sum |w| d (1/508 + 2^-16) + 2 (k/32 + 6) 2^-24 sum |w| (|x| + d), 254x
 *    tighter in its first term.
 *  - avx512, accurate precision, n > 4 (the int16 GEMM: exact weights as
 *    int16 2P, activations int16 per block, d16 = max|x| / 32767):
 *    sum |w| d16 (1/2 + 2^-9) + (k/32 + 4) 2^-24 sum |w| (|x| + d16).
 *  - avx512 with npu_matmul_set_accurate_gemm_int16 (FALSE), and avx2,
 *    accurate precision, n > 4 (the F32 GEMM: exact weights, F32
 *    activations, chunks of 128 k summed apart): (128 + ceil(k/128))
 *    2^-24 sum |w x|.
 *
 * Q8_0 weights (the output matrix of llama.cpp's MXFP4 files) the same way,
 * against a reference of their own below, with npumatmul.h's Q8_0 bounds
 * (the accurate precision's first term 254x tighter, as for MXFP4).
 *
 * A one-token product (n = 1) on a path with a GEMV kernel (avx512) runs
 * with each count of row streams (1, 2, 4, 8): the runs' split and their
 * leftover rows differ with it.
 */
#include <core/cpu/npumatmul.h>
#include <core/cpu/npumatmul-testing.h>
#include "tests/npucompare.h"
#include <core/formats/npugguf.h>

#include <math.h>
#include <string.h>

static const gchar *const all_isas[] = { "scalar", "avx2", "avx512",
  "asimd", "neon", "neon-i8mm"
};

/* The GEMV kernel's row streams a one-token product is checked with; 0 is
 * the library's choice by thread count (4 each on the 2-thread device, 8
 * on one thread), first, and restored after each loop over them */
static const guint gemv_stream_counts[] = { 0, 8, 4, 2, 1 };

/* How many stream counts to check @n activation rows with on @isa */
static guint
n_stream_counts (const gchar * isa, gsize n)
{
  return n == 1 && g_str_equal (isa, "avx512") ?
      G_N_ELEMENTS (gemv_stream_counts) : 1;
}

/* ------------------------------------------------------------------------ */

static void
random_weights (GRand * rand, NpuBlockMxfp4 * blocks, gsize n_blocks,
    gint e_lo, gint e_hi)
{
  gsize b;
  guint j;

  for (b = 0; b < n_blocks; b++) {
    blocks[b].e = (guint8) g_rand_int_range (rand, e_lo, e_hi + 1);
    for (j = 0; j < 16; j++)
      blocks[b].qs[j] = (guint8) g_rand_int_range (rand, 0, 256);
  }
}

/* Activations scaled by 2^x_exp, with some blocks much larger or smaller
 * than the rest, and some exact zeros. */
static void
random_activations (GRand * rand, float *x, gsize n, gint x_exp)
{
  gsize i;
  float block_scale = 1.0f;

  for (i = 0; i < n; i++) {
    if (i % 32 == 0)
      block_scale = ldexpf (1.0f, g_rand_int_range (rand, -6, 7));
    if (g_rand_int_range (rand, 0, 50) == 0)
      x[i] = 0.0f;
    else
      x[i] = ldexpf ((float) g_rand_double_range (rand, -1.0, 1.0), x_exp) *
          block_scale;
  }
}

static double
weight_value (const NpuBlockMxfp4 * blk, guint j)
{
  static const double mag[8] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };
  guint code = j < 16 ? blk->qs[j] & 0xF : blk->qs[j - 16] >> 4;
  double v = mag[code & 7] * ldexp (1.0, blk->e - 127);

  return (code & 8) ? -v : v;
}

/* Per output, the accurate F32 GEMM's bound: each product passes at most
 * 128 roundings in its chunk of 128 k and one per later chunk */
static void
compute_f32_bounds (const NpuBlockMxfp4 * blocks, gsize rows, gsize k,
    const float *x, gsize n, double *bound)
{
  gsize nb = k / 32, c, r, j;

  for (c = 0; c < n; c++) {
    for (r = 0; r < rows; r++) {
      double mag = 0.0;

      for (j = 0; j < k; j++)
        mag += fabs (weight_value (&blocks[r * nb + j / 32], j % 32) *
            x[c * k + j]);
      bound[c * rows + r] = (128 + (nb + 3) / 4) * ldexp (mag, -24) *
          (1.0 + 1e-3);
    }
  }
}

/* Per output, the accurate int16 GEMM's bound: each activation is off by
 * at most d16 (1/2 + 2^-9), d16 = max|x| / 32767 of its block (x / d16
 * correctly rounded, |x / d16| <= 32767 < 2^15, then rounded to an
 * integer); each block's int32 sum is exact, and takes one rounding for
 * the scales' product and one in the FMA of the block loop */
static void
compute_q16_bounds (const NpuBlockMxfp4 * blocks, gsize rows, gsize k,
    const float *x, gsize n, double *bound)
{
  gsize nb = k / 32, c, r, b, j;

  for (c = 0; c < n; c++) {
    for (r = 0; r < rows; r++) {
      double quant = 0.0, mag = 0.0;

      for (b = 0; b < nb; b++) {
        const float *xb = x + c * k + b * 32;
        double amax = 0.0, d;

        for (j = 0; j < 32; j++)
          amax = MAX (amax, fabs (xb[j]));
        d = amax / 32767.0;
        for (j = 0; j < 32; j++) {
          double aw = fabs (weight_value (&blocks[r * nb + b], j));

          quant += aw * d * (0.5 + ldexp (1.0, -9));
          mag += aw * (fabs (xb[j]) + d);
        }
      }
      bound[c * rows + r] = quant * (1.0 + 1e-6) +
          (nb + 4) * ldexp (mag, -24);
    }
  }
}

/* Per output, what an int8 (@qmax 127) or the int16 GEMM (@qmax 32767)
 * computes before its F32 work: each block quantised as its bound says (d
 * = max|x| / qmax and x / d in F32, rounded to the nearest integer, ties
 * to even), the products of the codes and the weights summed in double;
 * @bound: the F32 work's share of the bounds above, (k/32 + 4) 2^-24 sum
 * |w| (|x| + d).  Holding a kernel to this catches a quantiser that keeps
 * fewer bits than it claims, or a scale a little off (0.1 %), which random
 * activations do not bring near the worst case of the bound. */
static void
compute_quant_model (const NpuBlockMxfp4 * blocks, gsize rows, gsize k,
    const float *x, gsize n, float qmax, double *model, double *bound)
{
  gsize nb = k / 32, c, r, b, j;
  float *dq = g_new (float, k);
  double *d16 = g_new (double, nb);

  for (c = 0; c < n; c++) {
    for (b = 0; b < nb; b++) {
      const float *xb = x + c * k + b * 32;
      float amax = 0.0f, d;

      for (j = 0; j < 32; j++)
        amax = MAX (amax, fabsf (xb[j]));
      d = amax / qmax;
      d16[b] = amax / (double) qmax;
      for (j = 0; j < 32; j++)
        dq[b * 32 + j] = amax == 0.0f ? 0.0f :
            d * CLAMP (rintf (xb[j] / d), -qmax, qmax);
    }
    for (r = 0; r < rows; r++) {
      double sum = 0.0, mag = 0.0;

      for (j = 0; j < k; j++) {
        double w = weight_value (&blocks[r * nb + j / 32], j % 32);

        sum += w * dq[j];
        mag += fabs (w) * (fabs (x[c * k + j]) + d16[j / 32]);
      }
      model[c * rows + r] = sum;
      bound[c * rows + r] = (nb + 4) * ldexp (mag, -24) * (1.0 + 1e-3) +
          fabs (sum) * ldexp (1.0, -24);
    }
  }
  g_free (dq);
  g_free (d16);
}

/* Per output: the bound of the path */
static void
compute_bounds (const NpuBlockMxfp4 * blocks, gsize rows, gsize k,
    const float *x, gsize n, gboolean exact, gboolean accurate,
    double *bound)
{
  gsize nb = k / 32, c, r, b, j;

  for (c = 0; c < n; c++) {
    for (r = 0; r < rows; r++) {
      double quant = 0.0, mag = 0.0;

      for (b = 0; b < nb; b++) {
        const float *xb = x + c * k + b * 32;
        double amax = 0.0, d;

        for (j = 0; j < 32; j++)
          amax = MAX (amax, fabs (xb[j]));
        d = amax / 127.0;
        for (j = 0; j < 32; j++) {
          double aw = fabs (weight_value (&blocks[r * nb + b], j));

          quant += aw * d * (accurate ? 1.0 / 508 + ldexp (1.0, -16) :
              0.5 + ldexp (1.0, -17));
          mag += aw * (fabs (xb[j]) + (exact ? 0.0 : d));
        }
      }
      if (exact)
        bound[c * rows + r] = (nb + 34) * ldexp (mag, -24);
      else if (accurate)
        bound[c * rows + r] = quant * (1.0 + 1e-6) +
            2 * (nb + 6) * ldexp (mag, -24);
      else
        bound[c * rows + r] = quant * (1.0 + 1e-6) +
            (nb + 4) * ldexp (mag, -24);
    }
  }
}

/* ------------------------------------------------------------------------ */

typedef struct
{
  const NpuMxfp4Matrix *w;
  const float *x;
  gsize n;
  float *y;
} MatmulCall;

/* The precision run_matmul() asks for */
static NpuMatmulPrecision precision = NPU_MATMUL_PRECISION_FAST;

static gboolean
matmul_task (NpuTask * task, gpointer user_data, GError ** error)
{
  MatmulCall *call = user_data;

  npu_matmul_mxfp4_with_precision (task, call->w, call->x, call->n, call->y,
      precision);
  return TRUE;
}

/* Runs the product with no task (@device NULL) or in a task on @device */
static void
run_matmul (NpuDevice * device, const NpuMxfp4Matrix * w, const float *x,
    gsize n, float *y)
{
  MatmulCall call = { w, x, n, y };
  NpuQueue *queue;
  NpuFence *fence;
  GError *error = NULL;

  if (!device) {
    npu_matmul_mxfp4_with_precision (NULL, w, x, n, y, precision);
    return;
  }
  queue = npu_queue_new (device, "matmul");
  fence = npu_queue_submit (queue, matmul_task, &call, NULL, NULL, 0);
  g_assert_true (npu_fence_wait (fence, -1, &error));
  g_assert_no_error (error);
  npu_fence_unref (fence);
  npu_queue_free (queue);
}

typedef struct
{
  gsize rows, k, n;
  gint e_lo, e_hi;              /* weight scale codes */
  gint x_exp;                   /* activations around 2^x_exp */
} Shape;

static guint n_checked;

static void
check_shape (GRand * rand, const Shape * s, NpuDevice ** devices,
    guint n_devices)
{
  gsize nb = s->k / 32, i;
  NpuBlockMxfp4 *blocks = g_new (NpuBlockMxfp4, s->rows * nb);
  float *x = g_new (float, s->n * s->k);
  float *ref = g_new (float, s->n * s->rows);
  float *y = g_new (float, s->n * s->rows);
  double *bound_exact = g_new (double, s->n * s->rows);
  double *bound_q8 = g_new (double, s->n * s->rows);
  double *bound_acc = g_new (double, s->n * s->rows);
  double *bound_f32 = g_new (double, s->n * s->rows);
  double *bound_q16 = g_new (double, s->n * s->rows);
  double *model_q16 = g_new (double, s->n * s->rows);
  double *bound_model_q16 = g_new (double, s->n * s->rows);
  double *model_q8 = g_new (double, s->n * s->rows);
  double *bound_model_q8 = g_new (double, s->n * s->rows);
  NpuMxfp4Matrix mats[2];
  guint a, l, d, p, pn, st, g;

  random_weights (rand, blocks, s->rows * nb, s->e_lo, s->e_hi);
  random_activations (rand, x, s->n * s->k, s->x_exp);
  npu_matmul_mxfp4_ref (blocks, s->rows, s->k, x, s->n, ref);
  compute_bounds (blocks, s->rows, s->k, x, s->n, TRUE, FALSE, bound_exact);
  compute_bounds (blocks, s->rows, s->k, x, s->n, FALSE, FALSE, bound_q8);
  compute_bounds (blocks, s->rows, s->k, x, s->n, FALSE, TRUE, bound_acc);
  compute_f32_bounds (blocks, s->rows, s->k, x, s->n, bound_f32);
  compute_q16_bounds (blocks, s->rows, s->k, x, s->n, bound_q16);
  compute_quant_model (blocks, s->rows, s->k, x, s->n, 32767.0f, model_q16,
      bound_model_q16);
  compute_quant_model (blocks, s->rows, s->k, x, s->n, 127.0f, model_q8,
      bound_model_q8);
  npu_mxfp4_matrix_init_view (&mats[0], blocks, s->rows, s->k);
  npu_mxfp4_matrix_repack (&mats[1], blocks, s->rows, s->k);

  /* pn = 1: avx512's GEMMs on the tile kernels instead of the panel ones;
   * g = 1: avx512's accurate GEMM on the F32 panels instead of the int16
   * ones */
  for (a = 0; a < 8 * G_N_ELEMENTS (all_isas); a++) {
    gboolean exact = a / 8 == 0;
    const gchar *isa = all_isas[a / 8];
    gboolean avx512 = g_str_equal (isa, "avx512");
    gboolean panels_here = s->n > 4 && (avx512 || g_str_equal (isa, "avx2"));
    const double *bound;

    p = a % 2;
    pn = (a / 2) % 2;
    g = (a / 4) % 2;
    if ((pn && !panels_here) || (g && !(avx512 && p && panels_here && !pn))
        || !npu_matmul_set_isa (isa))
      continue;
    npu_matmul_set_gemm_panels (!pn);
    npu_matmul_set_accurate_gemm_int16 (!g);
    precision = p ? NPU_MATMUL_PRECISION_ACCURATE : NPU_MATMUL_PRECISION_FAST;
    bound = exact ? bound_exact : p ? bound_acc : bound_q8;
    /* the accurate GEMM of the panels: int16 on avx512, F32 on avx2 and
     * on avx512 with g = 1, each with its own bound */
    if (p && panels_here && !pn)
      bound = avx512 && !g ? bound_q16 : bound_f32;
    for (st = 0; st < n_stream_counts (isa, s->n); st++) {
      npu_matmul_set_gemv_streams (gemv_stream_counts[st]);
      for (l = 0; l < 2; l++) {
        for (d = 0; d <= n_devices; d++) {
          for (i = 0; i < s->n * s->rows; i++)
            y[i] = NAN;
          run_matmul (d == 0 ? NULL : devices[d - 1], &mats[l], x, s->n, y);
          for (i = 0; i < s->n * s->rows; i++) {
            /* The reference is a double rounded to float. */
            double tol = bound[i] + fabs (ref[i]) * ldexp (1.0, -24);

            if (!npu_within (fabs ((double) y[i] - ref[i]), tol))
              g_error ("%s%s%s%s layout %u device %u streams %u: %"
                  G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT
                  ", output %" G_GSIZE_FORMAT ": %.9g, reference %.9g, "
                  "bound %.3g", isa, p ? " accurate" : "",
                  pn ? " tiles" : "", g ? " f32" : "", l, d,
                  gemv_stream_counts[st], s->rows, s->k, s->n, i, y[i],
                  ref[i], tol);
            /* the int16 GEMM: also against its quantisation's model */
            if (p && panels_here && !pn && avx512 && !g &&
                !npu_within (fabs ((double) y[i] - model_q16[i]),
                    bound_model_q16[i]))
              g_error ("avx512 accurate int16 layout %u device %u: %"
                  G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT
                  ", output %" G_GSIZE_FORMAT ": %.9g, model %.9g, bound "
                  "%.3g", l, d, s->rows, s->k, s->n, i, y[i], model_q16[i],
                  bound_model_q16[i]);
            /* every fast int8 kernel: against its quantisation's model */
            if (!exact && !p &&
                !npu_within (fabs ((double) y[i] - model_q8[i]),
                    bound_model_q8[i]))
              g_error ("%s%s int8 layout %u device %u: %" G_GSIZE_FORMAT
                  " x %" G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT ", output %"
                  G_GSIZE_FORMAT ": %.9g, model %.9g, bound %.3g", isa,
                  pn ? " tiles" : "", l, d, s->rows, s->k, s->n, i, y[i],
                  model_q8[i], bound_model_q8[i]);
          }
          n_checked++;
        }
      }
    }
    npu_matmul_set_gemv_streams (gemv_stream_counts[0]);
  }
  npu_matmul_set_accurate_gemm_int16 (TRUE);

  npu_mxfp4_matrix_clear (&mats[0]);
  npu_mxfp4_matrix_clear (&mats[1]);
  g_free (blocks);
  g_free (x);
  g_free (ref);
  g_free (y);
  g_free (bound_exact);
  g_free (bound_q8);
  g_free (bound_acc);
  g_free (bound_f32);
  g_free (bound_q16);
  g_free (model_q16);
  g_free (bound_model_q16);
  g_free (model_q8);
  g_free (bound_model_q8);
  npu_matmul_set_gemm_panels (TRUE);
  precision = NPU_MATMUL_PRECISION_FAST;
}

static void
restore_isa (const gchar * isa)
{
  g_assert_true (npu_matmul_set_isa (isa));
}

/* ------------------------------------------------------------------------ */

static void
test_isas (void)
{
  guint a, n = 0;

  g_test_message ("default path: %s", npu_matmul_get_isa ());
  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    gboolean ok;
    gchar *saved = g_strdup (npu_matmul_get_isa ());

    ok = npu_matmul_set_isa (all_isas[a]);
    g_test_message ("%s: %s", all_isas[a], ok ? "available" : "not here");
    if (ok) {
      g_assert_cmpstr (npu_matmul_get_isa (), ==, all_isas[a]);
      n++;
    }
    restore_isa (saved);
    g_free (saved);
  }
  g_assert_false (npu_matmul_set_isa ("no-such-isa"));
  g_assert_cmpuint (n, >=, 1);
#if defined(__x86_64__)
  /* The build machine class: a path beyond scalar must be found, unless
   * NPU_CPU_ISA caps the paths at scalar. */
  if (__builtin_cpu_supports ("avx2") && __builtin_cpu_supports ("fma") &&
      g_strcmp0 (g_getenv ("NPU_CPU_ISA"), "scalar") != 0)
    g_assert_cmpstr (npu_matmul_get_isa (), !=, "scalar");
#endif
}

static void
test_random_shapes_run (void)
{
  /* 200: one accurate F32 column tile above 192; 512: three */
  static const gsize ns[] = { 1, 2, 3, 7, 33, 200, 512 };
  static const Shape fixed[] = {
    /* k not a multiple of 128 or 256, rows not a multiple of any tile */
    {1, 32, 1, 120, 130, 0},
    {5, 96, 1, 120, 130, 0},
    {67, 288, 1, 118, 134, 0},
    {130, 160, 1, 120, 130, 0},
    {64, 4128, 1, 120, 130, 0},
    {3, 4096, 1, 120, 130, 0},
    /* scales across the range: tiny, huge, and a wide mix within rows;
     * activations chosen so the products stay normal floats */
    {33, 224, 1, 0, 12, 100},
    {33, 224, 1, 1, 1, 110},
    {33, 224, 1, 240, 254, -100},
    {33, 224, 1, 100, 154, 0},
  };
  GRand *rand = g_rand_new_with_seed (20240611);
  NpuDevice *devices[2] = { NULL, NULL };
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  guint f, i, n_devices = 2;

  /* set where an emulator cannot start threads (docs/testing.md, the
   * aarch64 suites): every product then runs without a task only. */
  if (g_getenv ("NPU_TEST_NO_THREADS"))
    n_devices = 0;
  for (i = 0; i < n_devices; i++)
    devices[i] = npu_device_new_cpu (i + 1);

  for (f = 0; f < G_N_ELEMENTS (fixed); f++) {
    for (i = 0; i < G_N_ELEMENTS (ns); i++) {
      Shape s = fixed[f];

      /* n = 200, 512 only where the reference stays quick */
      if (ns[i] >= 200 && s.rows * s.k > 40000)
        continue;
      s.n = ns[i];
      check_shape (rand, &s, devices, n_devices);
    }
  }
  for (f = 0; f < 12; f++) {
    Shape s;

    s.rows = g_rand_int_range (rand, 1, 200);
    s.k = 32 * g_rand_int_range (rand, 1, 40);
    s.n = ns[g_rand_int_range (rand, 0, G_N_ELEMENTS (ns) - 1)];
    s.e_lo = g_rand_int_range (rand, 110, 127);
    s.e_hi = s.e_lo + g_rand_int_range (rand, 0, 12);
    s.x_exp = g_rand_int_range (rand, -8, 8);
    check_shape (rand, &s, devices, n_devices);
  }
  g_test_message ("%u products checked", n_checked);

  for (i = 0; i < n_devices; i++)
    npu_device_unref (devices[i]);
  g_rand_free (rand);
  restore_isa (saved);
  g_free (saved);
}

/* The same in a GEMM (n > 4), on every GEMM kernel of each path: fast
 * and accurate, panels (avx512: int16 and F32 accurate) and tiles.  A NaN
 * scale poisons its weight row in every activation row, an Inf or a NaN
 * activation its activation row; zero weights give exact zeros. */
static void
test_special_values_gemm (void)
{
  const gsize rows = 37, k = 160, nb = 5, n = 9;
  NpuBlockMxfp4 blocks[37 * 5];
  float x[9 * 160], y[9 * 37];
  NpuMxfp4Matrix mats[2];
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  GRand *rand = g_rand_new_with_seed (11);
  guint a, r, c, l, v;

  random_weights (rand, blocks, rows * nb, 120, 130);
  blocks[1 * nb + 4].e = NPU_E8M0_NAN;  /* row 1 */
  blocks[33 * nb].e = NPU_E8M0_NAN;     /* row 33, in the second 32 */
  for (c = 0; c < nb; c++)      /* row 2: zero weights, +0 and -0 */
    memset (blocks[2 * nb + c].qs, c % 2 ? 0x88 : 0, 16);
  for (c = 0; c < n * k; c++)
    x[c] = (float) g_rand_double_range (rand, -4.0, 4.0);
  x[1 * k + 40] = INFINITY;     /* activation row 1, block 1 */
  x[5 * k + 33] = NAN;          /* row 5, block 1, not its largest */
  x[5 * k + 34] = 100.0f;
  npu_mxfp4_matrix_init_view (&mats[0], blocks, rows, k);
  npu_mxfp4_matrix_repack (&mats[1], blocks, rows, k);

  /* v: fast / accurate, panels / tiles, int16 / F32 accurate panels */
  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    for (v = 0; v < 8; v++) {
      const gboolean panels = v % 4 < 2;
      const gboolean exact_zero = a == 0 || (panels && (v % 2 == 1 ||
              g_str_equal (all_isas[a], "avx512")));

      npu_matmul_set_gemm_panels (panels);
      npu_matmul_set_accurate_gemm_int16 (v < 4);
      for (l = 0; l < 2; l++) {
        for (c = 0; c < n * rows; c++)
          y[c] = 0.0f;
        npu_matmul_mxfp4_with_precision (NULL, &mats[l], x, n, y,
            v % 2 ? NPU_MATMUL_PRECISION_ACCURATE :
            NPU_MATMUL_PRECISION_FAST);
        for (c = 0; c < n; c++) {
          for (r = 0; r < rows; r++) {
            const float o = y[c * rows + r];

            if (c == 1 || c == 5) {
              if (r != 2 && isfinite (o))
                g_error ("%s variant %u layout %u: output %u of a "
                    "non-finite activation row %u is %g", all_isas[a], v, l,
                    r, c, o);
            } else if (r == 1 || r == 33) {
              if (!isnan (o))
                g_error ("%s variant %u layout %u: row %u of a NaN scale, "
                    "activation row %u: %g", all_isas[a], v, l, r, c, o);
            } else if (r == 2) {
              /* exactly 0 where a block's sum stays in one lane; the tile
               * kernels take their 2P + 12 bias off per block but add
               * the lanes in F32, which may leave a rounding */
              if (exact_zero ? o != 0.0f : !isfinite (o))
                g_error ("%s variant %u layout %u: zero weights, activation "
                    "row %u: %g", all_isas[a], v, l, c, o);
            } else if (!isfinite (o)) {
              g_error ("%s variant %u layout %u: output %u, activation row "
                  "%u is %g", all_isas[a], v, l, r, c, o);
            }
          }
        }
      }
    }
  }
  npu_matmul_set_gemm_panels (TRUE);
  npu_matmul_set_accurate_gemm_int16 (TRUE);

  npu_mxfp4_matrix_clear (&mats[0]);
  npu_mxfp4_matrix_clear (&mats[1]);
  g_rand_free (rand);
  restore_isa (saved);
  g_free (saved);
}

/* A NaN scale poisons its row; zero activations and zero weights give
 * exact zeros; a non-finite activation makes the outputs non-finite, a NaN
 * in the middle of a block included. */
static void
test_special_values (void)
{
  const gsize rows = 6, k = 96, nb = 3;
  NpuBlockMxfp4 blocks[6 * 3];
  float x[3 * 96], y[3 * 6], x1[96];
  NpuMxfp4Matrix m, split;
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  GRand *rand = g_rand_new_with_seed (7);
  guint a, r, c, l;

  random_weights (rand, blocks, rows * nb, 120, 130);
  blocks[1 * nb + 2].e = NPU_E8M0_NAN;  /* row 1 */
  /* that block's weights all 1.0 (code 2) and the first activation row
   * positive there (below): a scale taken as Inf makes the row +Inf, not
   * NaN, so the row is NaN only where the NaN scale is looked for */
  memset (blocks[1 * nb + 2].qs, 0x22, 16);
  memset (blocks[2 * nb].qs, 0, 16);    /* row 2: all zero weights */
  memset (blocks[2 * nb + 1].qs, 0x88, 16);     /* -0 codes */
  memset (blocks[2 * nb + 2].qs, 0, 16);
  for (c = 0; c < 3 * k; c++)
    x[c] = (float) g_rand_double_range (rand, -4.0, 4.0);
  x[k + 40] = INFINITY;         /* second activation row, block 1 */
  x[2 * k + 33] = NAN;          /* third row, block 1, not its largest */
  x[2 * k + 34] = 100.0f;
  npu_mxfp4_matrix_init_view (&m, blocks, rows, k);

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    npu_matmul_mxfp4 (NULL, &m, x, 3, y);
    for (r = 0; r < rows; r++) {
      if (r == 1)
        g_assert_true (isnan (y[r]));
      else
        g_assert_true (isfinite (y[r]));
      g_assert_false (isfinite (y[rows + r]) && r != 2);
      g_assert_false (isfinite (y[2 * rows + r]) && r != 2);
    }
    g_assert_cmpfloat (y[2], ==, 0.0f);
  }
  /* One row (the GEMV) in both layouts and precisions: the split layout
   * looks for a NaN scale only in a matrix whose repack found one, and
   * without the look the NaN scale's row comes out +Inf, not NaN */
  for (c = 0; c < k; c++)
    x1[c] = c / 32 == 2 ? fabsf (x[c]) + 0.5f : x[c];
  npu_mxfp4_matrix_repack (&split, blocks, rows, k);
  g_assert_true (split.nan_scales);
  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    for (l = 0; l < 4; l++) {
      npu_matmul_mxfp4_with_precision (NULL, l % 2 ? &split : &m, x1, 1, y,
          l < 2 ? NPU_MATMUL_PRECISION_FAST : NPU_MATMUL_PRECISION_ACCURATE);
      for (r = 0; r < rows; r++)
        if (r == 1 ? !isnan (y[r]) : !isfinite (y[r]))
          g_error ("%s layout %u precision %u: row %u is %g", all_isas[a],
              l % 2, l / 2, r, y[r]);
    }
  }
  npu_mxfp4_matrix_clear (&split);
  /* All-zero activations */
  memset (x, 0, sizeof (x));
  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    npu_matmul_mxfp4 (NULL, &m, x, 1, y);
    for (r = 0; r < rows; r++)
      if (r != 1)
        g_assert_cmpfloat (y[r], ==, 0.0f);
  }

  npu_mxfp4_matrix_clear (&m);
  g_rand_free (rand);
  restore_isa (saved);
  g_free (saved);
}

/* The reference decodes the way the codec does. */
static void
test_reference_matches_codec (void)
{
  const gsize rows = 9, k = 320, nb = 10;
  NpuBlockMxfp4 blocks[9 * 10];
  float x[320], y[9], w[320];
  GRand *rand = g_rand_new_with_seed (11);
  gsize r, j;

  random_weights (rand, blocks, rows * nb, 100, 150);
  for (j = 0; j < k; j++)
    x[j] = (float) g_rand_double_range (rand, -1.0, 1.0);
  npu_matmul_mxfp4_ref (blocks, rows, k, x, 1, y);
  for (r = 0; r < rows; r++) {
    double sum = 0.0;

    npu_mxfp4_dequantize (blocks + r * nb, w, k);
    for (j = 0; j < k; j++)
      sum += (double) w[j] * x[j];
    /* same products, summed in another order */
    g_assert_cmpfloat (fabs (y[r] - sum), <=, fabs (sum) * ldexp (1.0, -23));
  }
  g_rand_free (rand);
}

/* Several matrices in one pass give exactly what one call each gives,
 * on every path, in both layouts, with 1 and 2 threads. */
typedef struct
{
  const NpuMxfp4Matrix *const *w;
  guint n_w;
  const float *x;
  gsize n;
  float *const *y;
} MultiArgs;

static gboolean
multi_task (NpuTask * task, gpointer data, GError ** error)
{
  MultiArgs *a = data;

  npu_matmul_mxfp4_multi_with_precision (task, a->w, a->n_w, a->x, a->n,
      a->y, precision);
  return TRUE;
}

static void
test_multi (void)
{
  static const gsize rows[3] = { 96, 33, 130 };
  GRand *rand = g_rand_new_with_seed (11);
  gsize k = 288, n, i;
  guint a, m, threads, layout;
  NpuBlockMxfp4 *blocks[3];
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  /* 0: without a task only, where an emulator cannot start threads
   * (NPU_TEST_NO_THREADS, docs/testing.md) */
  guint max_threads = g_getenv ("NPU_TEST_NO_THREADS") ? 0 : 2;

  for (m = 0; m < 3; m++) {
    blocks[m] = g_new (NpuBlockMxfp4, rows[m] * k / 32);
    random_weights (rand, blocks[m], rows[m] * k / 32, 110, 135);
  }
  for (a = 0; a < 2 * G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a / 2]))
      continue;
    precision = a % 2 ? NPU_MATMUL_PRECISION_ACCURATE :
        NPU_MATMUL_PRECISION_FAST;
    for (layout = 0; layout < 2; layout++)
      for (threads = max_threads ? 1 : 0; threads <= max_threads; threads++)
        for (n = 1; n <= 5; n += 2) {
          NpuDevice *dev = threads ? npu_device_new_cpu (threads) : NULL;
          NpuQueue *q = threads ? npu_queue_new (dev, "multi") : NULL;
          NpuMxfp4Matrix mats[3];
          const NpuMxfp4Matrix *wp[3];
          float *x = g_new (float, n * k), *ys[3], *want;
          MultiArgs args = { wp, 3, x, n, ys };
          NpuFence *f;

          random_activations (rand, x, n * k, 0);
          for (m = 0; m < 3; m++) {
            if (layout)
              npu_mxfp4_matrix_repack (&mats[m], blocks[m], rows[m], k);
            else
              npu_mxfp4_matrix_init_view (&mats[m], blocks[m], rows[m], k);
            wp[m] = &mats[m];
            ys[m] = g_new (float, n * rows[m]);
          }
          if (q) {
            f = npu_queue_submit (q, multi_task, &args, NULL, NULL, 0);
            g_assert_true (npu_fence_wait (f, -1, NULL));
            npu_fence_unref (f);
          } else {
            npu_matmul_mxfp4_multi_with_precision (NULL, wp, 3, x, n, ys,
                precision);
          }
          for (m = 0; m < 3; m++) {
            want = g_new (float, n * rows[m]);
            npu_matmul_mxfp4_with_precision (NULL, &mats[m], x, n, want,
                precision);
            for (i = 0; i < n * rows[m]; i++)
              g_assert_cmpfloat (ys[m][i], ==, want[i]);
            g_free (want);
            g_free (ys[m]);
            npu_mxfp4_matrix_clear (&mats[m]);
          }
          g_free (x);
          if (q) {
            npu_queue_free (q);
            npu_device_unref (dev);
          }
        }
  }
  precision = NPU_MATMUL_PRECISION_FAST;
  restore_isa (saved);
  g_free (saved);
  for (m = 0; m < 3; m++)
    g_free (blocks[m]);
  g_rand_free (rand);
}

/* ------------------------------------------------------------------------
 * Q8_0 weights
 *
 * The reference is written here: each weight decoded from the F16 bits by
 * ldexp (not by the codec the runtime uses), products and sums in double.
 * Per output, with w_j = d q_j and d_b = max|x| / 127 of x_j's block, the
 * tolerance is:
 *
 *  - scalar: the weights are exact in F32 (11-bit significand times an
 *    8-bit integer), so only F32 arithmetic separates it from the reference.
 *    Each product w_j x_j takes one rounding, then at most 31 sums inside
 *    its block and k/32 across blocks: with u = 2^-24,
 *      |y - ref| <= gamma_(k/32 + 32) sum |w x| <= (k/32 + 34) u sum |w x|
 *    (gamma_m = m u / (1 - m u) is below (m + 1) u for m u < 2^-12).
 *  - int8 paths: x_j is replaced by d q with |x_j - d q| <= d_b (1/2 +
 *    2^-17) (npumatmul.h), so the exact sum of the quantised products is
 *    within sum |w_j| d_b (1/2 + 2^-17) of the reference; the F32 d the
 *    quantiser uses may exceed d_b by a rounding, covered by a factor
 *    1 + 1e-6.  The int32 partial sums (4 or 8 products, < 2^21) and their
 *    conversion are exact.  Each partial sum times d_w d_x takes one
 *    rounding for d_w d_x, one per F32 accumulation step (at most k/32) and
 *    at most 4 in the horizontal sum; the terms add up to at most
 *    sum |w_j| |d q_j| <= sum |w_j| (|x_j| + d_b), so
 *      |y - exact| <= (k/32 + 6) u sum |w_j| (|x_j| + d_b)
 *    (one more rounding than counted, for the gamma as above).
 *  - plus |ref| 2^-24: the reference is a double rounded to float.
 *
 * d_w d_x must be a normal float for the second bound: the scale and
 * activation ranges below keep it so while reaching the F16 extremes.
 */

static double
ref_f16 (guint16 h)
{
  gint e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v = e == 0 ? ldexp (m, -24) : ldexp (1024 + m, e - 25);

  return (h & 0x8000) ? -v : v;
}

static guint16
q8_0_d_bits (const NpuBlockQ8_0 * blk)
{
  return (guint16) (blk->d[0] | blk->d[1] << 8);
}

static double
q8_0_weight (const NpuBlockQ8_0 * blk, guint j)
{
  return ref_f16 (q8_0_d_bits (blk)) * blk->qs[j];
}

/* Scales with F16 exponent fields in [f_lo, f_hi] (0: subnormal, 30: the
 * largest), some negative; about one block in 16 all zero by its scale,
 * one in 16 by its codes; codes over the whole int8 range, -128 included
 * (ggml's quantiser never writes it, a file may hold it). */
static void
random_q8_0_weights (GRand * rand, NpuBlockQ8_0 * blocks, gsize n_blocks,
    gint f_lo, gint f_hi)
{
  gsize b;
  guint j;

  for (b = 0; b < n_blocks; b++) {
    guint16 h = (guint16) (g_rand_int_range (rand, f_lo, f_hi + 1) << 10 |
        g_rand_int_range (rand, 0, 1024));
    gint kind = g_rand_int_range (rand, 0, 16);

    if (g_rand_int_range (rand, 0, 8) == 0)
      h |= 0x8000;
    if (kind == 0)
      h &= 0x8000;
    blocks[b].d[0] = h & 0xFF;
    blocks[b].d[1] = h >> 8;
    for (j = 0; j < 32; j++)
      blocks[b].qs[j] = kind == 1 ? 0 : (gint8) g_rand_int_range (rand, -128,
          128);
  }
}

static void
ref_q8_0 (const NpuBlockQ8_0 * blocks, gsize rows, gsize k, const float *x,
    gsize n, float *y)
{
  gsize nb = k / 32, c, r, j;

  for (c = 0; c < n; c++) {
    for (r = 0; r < rows; r++) {
      double sum = 0.0;

      for (j = 0; j < k; j++)
        sum += q8_0_weight (&blocks[r * nb + j / 32], j % 32) * x[c * k + j];
      y[c * rows + r] = (float) sum;
    }
  }
}

static void
q8_0_bounds (const NpuBlockQ8_0 * blocks, gsize rows, gsize k,
    const float *x, gsize n, gboolean exact, gboolean accurate,
    double *bound)
{
  gsize nb = k / 32, c, r, b, j;

  for (c = 0; c < n; c++) {
    for (r = 0; r < rows; r++) {
      double quant = 0.0, mag = 0.0, ref = 0.0;

      for (b = 0; b < nb; b++) {
        const float *xb = x + c * k + b * 32;
        double amax = 0.0, d;

        for (j = 0; j < 32; j++)
          amax = MAX (amax, fabs (xb[j]));
        d = amax / 127.0;
        for (j = 0; j < 32; j++) {
          double w = q8_0_weight (&blocks[r * nb + b], j);

          quant += fabs (w) * d * (accurate ? 1.0 / 508 + ldexp (1.0, -16) :
              0.5 + ldexp (1.0, -17));
          mag += fabs (w) * (fabs (xb[j]) + (exact ? 0.0 : d));
          ref += w * xb[j];
        }
      }
      if (exact)
        bound[c * rows + r] = (nb + 34) * ldexp (mag, -24);
      else if (accurate)
        bound[c * rows + r] = quant * (1.0 + 1e-6) +
            2 * (nb + 6) * ldexp (mag, -24);
      else
        bound[c * rows + r] = quant * (1.0 + 1e-6) +
            (nb + 6) * ldexp (mag, -24);
      bound[c * rows + r] += fabs (ref) * ldexp (1.0, -24);
    }
  }
}

typedef struct
{
  const NpuBlockQ8_0 *w;
  gsize rows, k;
  const float *x;
  gsize n;
  float *y;
} Q8_0Call;

static gboolean
q8_0_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Q8_0Call *call = user_data;

  npu_matmul_q8_0_with_precision (task, call->w, call->rows, call->k,
      call->x, call->n, call->y, precision);
  return TRUE;
}

/* With no task (@device NULL) or in a task on @device */
static void
run_q8_0 (NpuDevice * device, const NpuBlockQ8_0 * w, gsize rows, gsize k,
    const float *x, gsize n, float *y)
{
  Q8_0Call call = { w, rows, k, x, n, y };
  NpuQueue *queue;
  NpuFence *fence;
  GError *error = NULL;

  if (!device) {
    npu_matmul_q8_0_with_precision (NULL, w, rows, k, x, n, y, precision);
    return;
  }
  queue = npu_queue_new (device, "q8_0");
  fence = npu_queue_submit (queue, q8_0_task, &call, NULL, NULL, 0);
  g_assert_true (npu_fence_wait (fence, -1, &error));
  g_assert_no_error (error);
  npu_fence_unref (fence);
  npu_queue_free (queue);
}

typedef struct
{
  gsize rows, k, n;
  gint f_lo, f_hi;              /* F16 exponent fields of the scales */
  gint x_exp;                   /* activations around 2^x_exp */
} Q8_0Shape;

static guint n_q8_0_checked;

/* Every path against the reference; on each path, the same bytes with no
 * task and on 1 and 2 threads. */
static void
check_q8_0_shape (GRand * rand, const Q8_0Shape * s, NpuDevice ** devices,
    guint n_devices)
{
  gsize nb = s->k / 32, n_out = s->n * s->rows, i;
  NpuBlockQ8_0 *blocks = g_new (NpuBlockQ8_0, s->rows * nb);
  float *x = g_new (float, s->n * s->k);
  float *ref = g_new (float, n_out);
  float *y = g_new (float, n_out);
  float *first = g_new (float, n_out);
  double *bound_exact = g_new (double, n_out);
  double *bound_q8 = g_new (double, n_out);
  double *bound_acc = g_new (double, n_out);
  guint a, d, st;

  random_q8_0_weights (rand, blocks, s->rows * nb, s->f_lo, s->f_hi);
  random_activations (rand, x, s->n * s->k, s->x_exp);
  ref_q8_0 (blocks, s->rows, s->k, x, s->n, ref);
  q8_0_bounds (blocks, s->rows, s->k, x, s->n, TRUE, FALSE, bound_exact);
  q8_0_bounds (blocks, s->rows, s->k, x, s->n, FALSE, FALSE, bound_q8);
  q8_0_bounds (blocks, s->rows, s->k, x, s->n, FALSE, TRUE, bound_acc);

  /* a: the path, and fast (even) or accurate (odd) */
  for (a = 0; a < 2 * G_N_ELEMENTS (all_isas); a++) {
    const gchar *isa = all_isas[a / 2];
    const double *bound = a / 2 == 0 ? bound_exact : a % 2 ? bound_acc :
        bound_q8;

    if (!npu_matmul_set_isa (isa))
      continue;
    precision = a % 2 ? NPU_MATMUL_PRECISION_ACCURATE :
        NPU_MATMUL_PRECISION_FAST;
    for (st = 0; st < n_stream_counts (isa, s->n); st++) {
      npu_matmul_set_gemv_streams (gemv_stream_counts[st]);
      for (d = 0; d <= n_devices; d++) {
        for (i = 0; i < n_out; i++)
          y[i] = NAN;
        run_q8_0 (d == 0 ? NULL : devices[d - 1], blocks, s->rows, s->k, x,
            s->n, y);
        for (i = 0; i < n_out; i++) {
          if (!npu_within (fabs ((double) y[i] - ref[i]), bound[i]))
            g_error ("q8_0 %s%s device %u streams %u: %" G_GSIZE_FORMAT
                " x %" G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT ", output %"
                G_GSIZE_FORMAT ": %.9g, reference %.9g, bound %.3g", isa,
                a % 2 ? " accurate" : "", d, gemv_stream_counts[st], s->rows,
                s->k, s->n, i, y[i], ref[i], bound[i]);
        }
        if (d == 0)
          memcpy (first, y, n_out * sizeof (float));
        else if (memcmp (first, y, n_out * sizeof (float)) != 0)
          g_error ("q8_0 %s: %u thread(s) differ from no task", isa, d);
        n_q8_0_checked++;
      }
    }
    npu_matmul_set_gemv_streams (gemv_stream_counts[0]);
  }
  precision = NPU_MATMUL_PRECISION_FAST;

  g_free (blocks);
  g_free (x);
  g_free (ref);
  g_free (y);
  g_free (first);
  g_free (bound_exact);
  g_free (bound_q8);
  g_free (bound_acc);
}

static void
test_q8_0_shapes (void)
{
  static const gsize ns[] = { 1, 2, 3, 5, 7, 33, 130 };
  static const Q8_0Shape fixed[] = {
    /* k a multiple of 32 but not of 64 or 128 (an odd number of blocks
     * leaves the AVX-512 kernel a lone block), odd row counts */
    {1, 32, 1, 10, 20, 0},
    {5, 96, 1, 10, 20, 0},
    {67, 288, 1, 8, 22, 0},
    {131, 160, 1, 12, 18, 0},
    {33, 2080, 1, 10, 20, 0},
    {3, 4128, 1, 10, 20, 0},
    /* the F16 extremes: subnormal and smallest normal scales against large
     * activations, the largest against small ones, and both mixed in a row
     * against moderate ones */
    {33, 224, 1, 0, 1, 40},
    {33, 224, 1, 30, 30, -40},
    {33, 224, 1, 0, 30, 0},
  };
  GRand *rand = g_rand_new_with_seed (20250301);
  NpuDevice *devices[2] = { NULL, NULL };
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  /* Under valgrind only the smaller products: the kernels' tails and
   * threading are the same, the reference's loops much shorter */
  gsize max_size = g_getenv ("NPU_UNDER_VALGRIND") ? 20000 : G_MAXSIZE;
  guint f, i, n_devices = 2;

  if (g_getenv ("NPU_TEST_NO_THREADS"))
    n_devices = 0;
  for (i = 0; i < n_devices; i++)
    devices[i] = npu_device_new_cpu (i + 1);

  for (f = 0; f < G_N_ELEMENTS (fixed); f++) {
    for (i = 0; i < G_N_ELEMENTS (ns); i++) {
      Q8_0Shape s = fixed[f];

      /* n > 4 is the GEMM path; keep the reference quick */
      if (ns[i] > 7 && s.rows * s.k > 40000)
        continue;
      s.n = ns[i];
      if (s.rows * s.k * s.n <= max_size)
        check_q8_0_shape (rand, &s, devices, n_devices);
    }
  }
  for (f = 0; f < 12; f++) {
    Q8_0Shape s;

    s.rows = g_rand_int_range (rand, 1, 200);
    s.k = 32 * g_rand_int_range (rand, 1, 40);
    s.n = ns[g_rand_int_range (rand, 0, G_N_ELEMENTS (ns))];
    s.f_lo = g_rand_int_range (rand, 5, 20);
    s.f_hi = s.f_lo + g_rand_int_range (rand, 0, 8);
    s.x_exp = g_rand_int_range (rand, -8, 8);
    if (s.rows * s.k * s.n <= max_size)
      check_q8_0_shape (rand, &s, devices, n_devices);
  }
  g_test_message ("%u Q8_0 products checked", n_q8_0_checked);

  for (i = 0; i < n_devices; i++)
    npu_device_unref (devices[i]);
  g_rand_free (rand);
  restore_isa (saved);
  g_free (saved);
}

/* A non-finite scale or activation makes its outputs non-finite, a NaN in
 * the middle of a block included; zero scales, codes or activations give
 * exact zeros. */
static void
test_q8_0_special_values (void)
{
  const gsize rows = 6, k = 96, nb = 3;
  NpuBlockQ8_0 blocks[6 * 3];
  float x[3 * 96], y[3 * 6];
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  GRand *rand = g_rand_new_with_seed (5);
  guint a, r, c;

  random_q8_0_weights (rand, blocks, rows * nb, 10, 20);
  blocks[1 * nb + 2].d[0] = 0x00;       /* row 1: an Inf scale */
  blocks[1 * nb + 2].d[1] = 0x7C;
  blocks[3 * nb + 0].d[0] = 0x01;       /* row 3: a NaN scale */
  blocks[3 * nb + 0].d[1] = 0x7E;
  for (c = 0; c < nb; c++) {
    blocks[2 * nb + c].d[0] = 0;        /* row 2: zero scales */
    blocks[2 * nb + c].d[1] = 0;
    memset (blocks[4 * nb + c].qs, 0, 32);      /* row 4: zero codes */
  }
  for (c = 0; c < 3 * k; c++)
    x[c] = (float) g_rand_double_range (rand, -4.0, 4.0);
  x[k + 40] = INFINITY;         /* second activation row, block 1 */
  x[2 * k + 33] = NAN;          /* third row, block 1, not its largest */
  x[2 * k + 34] = 100.0f;

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    npu_matmul_q8_0 (NULL, blocks, rows, k, x, 3, y);
    for (r = 0; r < rows; r++) {
      if (r == 1 || r == 3)
        g_assert_false (isfinite (y[r]));
      else
        g_assert_true (isfinite (y[r]));
      for (c = 1; c < 3; c++)
        if (r != 2 && r != 4)
          g_assert_false (isfinite (y[c * rows + r]));
    }
    g_assert_cmpfloat (y[2], ==, 0.0f);
    g_assert_cmpfloat (y[4], ==, 0.0f);
  }
  /* All-zero activations */
  memset (x, 0, sizeof (x));
  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    npu_matmul_q8_0 (NULL, blocks, rows, k, x, 1, y);
    for (r = 0; r < rows; r++)
      if (r != 1 && r != 3)
        g_assert_cmpfloat (y[r], ==, 0.0f);
  }

  g_rand_free (rand);
  restore_isa (saved);
  g_free (saved);
}

static void
test_random_shapes (void)
{
  if (g_getenv ("NPU_UNDER_VALGRIND")) {
    /* The same code runs on smaller inputs in the other cases. */
    g_test_skip ("too slow under valgrind");
    return;
  }
  test_random_shapes_run ();
}


int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/matmul/isas", test_isas);
  g_test_add_func ("/matmul/reference-matches-codec",
      test_reference_matches_codec);
  g_test_add_func ("/matmul/random-shapes", test_random_shapes);
  g_test_add_func ("/matmul/multi", test_multi);
  g_test_add_func ("/matmul/special-values", test_special_values);
  g_test_add_func ("/matmul/special-values-gemm", test_special_values_gemm);
  g_test_add_func ("/matmul/q8_0/random-shapes", test_q8_0_shapes);
  g_test_add_func ("/matmul/q8_0/special-values", test_q8_0_special_values);

  return g_test_run ();
}
