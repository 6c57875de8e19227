/* gst-npu: MXFP4 matrix kernels against the double-precision reference
 *
 * Every path this CPU has (scalar, avx2, avx512, neon), on both weight
 * layouts, with no task and inside tasks on 1 and 2 threads, on random
 * shapes from a fixed seed.  Tolerances are the bounds in npumatmul.h,
 * evaluated per output:
 *
 *  - scalar (exact F32): a block's 32 products are summed, scaled by a power
 *    of two (exact) and added to the row sum, so each product passes at most
 *    32 + k/32 roundings: |err| <= (k/32 + 34) 2^-24 sum |w x|.
 *  - int8 paths: activation rounding sum |w| d (1/2 + 2^-17), with
 *    d = max|x| / 127 of the element's block, plus the F32 accumulation
 *    (k/32 + 4) 2^-24 sum |w| (|x| + d).
 */
#include "core/npumatmul.h"

#include <math.h>
#include <string.h>

static const gchar *const all_isas[] = { "scalar", "avx2", "avx512", "neon" };

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

/* Per output: the bound of the path */
static void
compute_bounds (const NpuBlockMxfp4 * blocks, gsize rows, gsize k,
    const float *x, gsize n, gboolean exact, double *bound)
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

          quant += aw * d * (0.5 + ldexp (1.0, -17));
          mag += aw * (fabs (xb[j]) + (exact ? 0.0 : d));
        }
      }
      if (exact)
        bound[c * rows + r] = (nb + 34) * ldexp (mag, -24);
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

static gboolean
matmul_task (NpuTask * task, gpointer user_data, GError ** error)
{
  MatmulCall *call = user_data;

  npu_matmul_mxfp4 (task, call->w, call->x, call->n, call->y);
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
    npu_matmul_mxfp4 (NULL, w, x, n, y);
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
  NpuMxfp4Matrix mats[2];
  guint a, l, d;

  random_weights (rand, blocks, s->rows * nb, s->e_lo, s->e_hi);
  random_activations (rand, x, s->n * s->k, s->x_exp);
  npu_matmul_mxfp4_ref (blocks, s->rows, s->k, x, s->n, ref);
  compute_bounds (blocks, s->rows, s->k, x, s->n, TRUE, bound_exact);
  compute_bounds (blocks, s->rows, s->k, x, s->n, FALSE, bound_q8);
  npu_mxfp4_matrix_init_view (&mats[0], blocks, s->rows, s->k);
  npu_mxfp4_matrix_repack (&mats[1], blocks, s->rows, s->k);

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    gboolean exact = a == 0;
    const double *bound = exact ? bound_exact : bound_q8;

    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    for (l = 0; l < 2; l++) {
      for (d = 0; d <= n_devices; d++) {
        for (i = 0; i < s->n * s->rows; i++)
          y[i] = NAN;
        run_matmul (d == 0 ? NULL : devices[d - 1], &mats[l], x, s->n, y);
        for (i = 0; i < s->n * s->rows; i++) {
          /* The reference is a double rounded to float. */
          double tol = bound[i] + fabs (ref[i]) * ldexp (1.0, -24);

          if (!(fabs ((double) y[i] - ref[i]) <= tol))
            g_error ("%s layout %u device %u: %" G_GSIZE_FORMAT " x %"
                G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT ", output %"
                G_GSIZE_FORMAT ": %.9g, reference %.9g, bound %.3g",
                all_isas[a], l, d, s->rows, s->k, s->n, i, y[i], ref[i], tol);
        }
        n_checked++;
      }
    }
  }

  npu_mxfp4_matrix_clear (&mats[0]);
  npu_mxfp4_matrix_clear (&mats[1]);
  g_free (blocks);
  g_free (x);
  g_free (ref);
  g_free (y);
  g_free (bound_exact);
  g_free (bound_q8);
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
  /* The build machine class: a path beyond scalar must be found. */
  if (__builtin_cpu_supports ("avx2") && __builtin_cpu_supports ("fma"))
    g_assert_cmpstr (npu_matmul_get_isa (), !=, "scalar");
#endif
}

static void
test_random_shapes_run (void)
{
  static const gsize ns[] = { 1, 2, 3, 7, 33, 512 };
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

  /* tests/cross/run-neon.sh sets this where the emulator cannot start
   * threads: every product then runs without a task only. */
  if (g_getenv ("NPU_TEST_NO_THREADS"))
    n_devices = 0;
  for (i = 0; i < n_devices; i++)
    devices[i] = npu_device_new_cpu (i + 1);

  for (f = 0; f < G_N_ELEMENTS (fixed); f++) {
    for (i = 0; i < G_N_ELEMENTS (ns); i++) {
      Shape s = fixed[f];

      /* n = 512 only where the reference stays quick */
      if (ns[i] == 512 && s.rows * s.k > 40000)
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

/* A NaN scale poisons its row; zero activations and zero weights give
 * exact zeros; a non-finite activation makes the outputs non-finite. */
static void
test_special_values (void)
{
  const gsize rows = 6, k = 96, nb = 3;
  NpuBlockMxfp4 blocks[6 * 3];
  float x[2 * 96], y[2 * 6];
  NpuMxfp4Matrix m;
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  GRand *rand = g_rand_new_with_seed (7);
  guint a, r, c;

  random_weights (rand, blocks, rows * nb, 120, 130);
  blocks[1 * nb + 2].e = NPU_E8M0_NAN;  /* row 1 */
  memset (blocks[2 * nb].qs, 0, 16);    /* row 2: all zero weights */
  memset (blocks[2 * nb + 1].qs, 0x88, 16);     /* -0 codes */
  memset (blocks[2 * nb + 2].qs, 0, 16);
  for (c = 0; c < 2 * k; c++)
    x[c] = (float) g_rand_double_range (rand, -4.0, 4.0);
  x[k + 40] = INFINITY;         /* second activation row, block 1 */
  npu_mxfp4_matrix_init_view (&m, blocks, rows, k);

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    npu_matmul_mxfp4 (NULL, &m, x, 2, y);
    for (r = 0; r < rows; r++) {
      if (r == 1)
        g_assert_true (isnan (y[r]));
      else
        g_assert_true (isfinite (y[r]));
      g_assert_false (isfinite (y[rows + r]) && r != 2);
    }
    g_assert_cmpfloat (y[2], ==, 0.0f);
  }
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

  npu_matmul_mxfp4_multi (task, a->w, a->n_w, a->x, a->n, a->y);
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

  for (m = 0; m < 3; m++) {
    blocks[m] = g_new (NpuBlockMxfp4, rows[m] * k / 32);
    random_weights (rand, blocks[m], rows[m] * k / 32, 110, 135);
  }
  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    for (layout = 0; layout < 2; layout++)
      for (threads = 1; threads <= 2; threads++)
        for (n = 1; n <= 5; n += 2) {
          NpuDevice *dev = npu_device_new_cpu (threads);
          NpuQueue *q = npu_queue_new (dev, "multi");
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
          f = npu_queue_submit (q, multi_task, &args, NULL, NULL, 0);
          g_assert_true (npu_fence_wait (f, -1, NULL));
          npu_fence_unref (f);
          for (m = 0; m < 3; m++) {
            want = g_new (float, n * rows[m]);
            npu_matmul_mxfp4 (NULL, &mats[m], x, n, want);
            for (i = 0; i < n * rows[m]; i++)
              g_assert_cmpfloat (ys[m][i], ==, want[i]);
            g_free (want);
            g_free (ys[m]);
            npu_mxfp4_matrix_clear (&mats[m]);
          }
          g_free (x);
          npu_queue_free (q);
          npu_device_unref (dev);
        }
  }
  restore_isa (saved);
  g_free (saved);
  for (m = 0; m < 3; m++)
    g_free (blocks[m]);
  g_rand_free (rand);
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

  return g_test_run ();
}
