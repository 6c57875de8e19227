/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npu_matmul_typed() at every ISA level against the reference
 *
 * Every type npuquants.h decodes, random blocks (random bytes, random
 * finite scales), random shapes: each output against
 * npu_quants_dot_row(), the row's exact values times the activations
 * summed in double.  The product sums the same F32 products in F32, in
 * another order on the vector paths, so the bound is the inner product's
 * forward error bound, |y - ref| <= gamma_(k+1) sum_j |w_j x_j| with
 * gamma_m = m u / (1 - m u), u = 2^-24: it holds for every order of
 * summation, with or without fused multiply-adds, and cannot fail by
 * chance.  Run without a task and in a task on two threads.
 */
#include <core/cpu/npumatmul.h>
#include <core/device/npubackend.h>
#include <core/formats/npugguf.h>
#include <core/formats/npuquants.h>

#include <math.h>
#include <string.h>

static const guint32 types[] = {
  NPU_GGML_TYPE_F32, NPU_GGML_TYPE_F16, NPU_GGML_TYPE_BF16,
  NPU_GGML_TYPE_Q4_0, NPU_GGML_TYPE_Q4_1, NPU_GGML_TYPE_Q5_0,
  NPU_GGML_TYPE_Q5_1, NPU_GGML_TYPE_Q8_0, NPU_GGML_TYPE_Q4_K,
  NPU_GGML_TYPE_Q5_K, NPU_GGML_TYPE_Q6_K, NPU_GGML_TYPE_MXFP4,
};

static const gchar *const all_isas[] = {
  "scalar", "avx2", "avx512", "neon", "neon-i8mm",
};

/* A random finite IEEE half in [2^-10, 2^5) times a random sign, little
 * endian at @p */
static void
random_half (GRand * rng, guint8 * p)
{
  guint h = (g_rand_int (rng) & 0x8000) |
      ((guint) g_rand_int_range (rng, 5, 20) << 10) | (g_rand_int (rng) & 1023);

  p[0] = h & 0xff;
  p[1] = h >> 8;
}

/* @rows rows of @k values of @type: random bytes; the scales (every f16
 * field of the block types), and every element of F32, F16 and BF16
 * rows, random finite numbers */
static guint8 *
random_matrix (GRand * rng, guint32 type, gsize rows, gsize k)
{
  gsize row_bytes = npu_quants_row_bytes (type, k), i, j;
  guint8 *w = g_malloc (rows * row_bytes);

  for (i = 0; i < rows * row_bytes; i++)
    w[i] = g_rand_int (rng) & 0xff;
  switch (type) {
    case NPU_GGML_TYPE_F32:
      for (i = 0; i < rows * k; i++) {
        float v = (float) g_rand_double_range (rng, -2, 2);
        memcpy (w + 4 * i, &v, 4);
      }
      break;
    case NPU_GGML_TYPE_F16:
      for (i = 0; i < rows * k; i++)
        random_half (rng, w + 2 * i);
      break;
    case NPU_GGML_TYPE_BF16:
      for (i = 0; i < rows * k; i++) {
        /* exponent 120..134: finite, of order one */
        guint h = (g_rand_int (rng) & 0x807f) |
            ((guint) g_rand_int_range (rng, 120, 135) << 7);
        w[2 * i] = h & 0xff;
        w[2 * i + 1] = h >> 8;
      }
      break;
    case NPU_GGML_TYPE_MXFP4:
      for (i = 0; i < rows * k / 32; i++)       /* scales 2^-8 .. 2^7 */
        w[17 * i] = (guint8) g_rand_int_range (rng, 119, 135);
      break;
    default:{
      /* the f16 fields: d (and m or dmin) first, Q6_K's d last */
      gsize bytes = npu_quants_row_bytes (type, 256) / (256 /
          (type == NPU_GGML_TYPE_Q4_K || type == NPU_GGML_TYPE_Q5_K ||
              type == NPU_GGML_TYPE_Q6_K ? 256 : 32));
      gsize n_blocks = rows * row_bytes / bytes;

      for (j = 0; j < n_blocks; j++) {
        guint8 *b = w + j * bytes;

        if (type == NPU_GGML_TYPE_Q6_K) {
          random_half (rng, b + 208);
          continue;
        }
        random_half (rng, b);
        if (type == NPU_GGML_TYPE_Q4_1 || type == NPU_GGML_TYPE_Q5_1 ||
            type == NPU_GGML_TYPE_Q4_K || type == NPU_GGML_TYPE_Q5_K)
          random_half (rng, b + 2);
      }
      break;
    }
  }
  return w;
}

typedef struct
{
  guint32 type;
  const guint8 *w;
  gsize rows, k, n;
  const float *x;
  float *y;
} Call;

static gboolean
call_task (NpuTask * task, gpointer data, GError ** error)
{
  Call *c = data;

  g_assert_true (npu_matmul_typed (task, c->type, c->w, c->rows, c->k, c->x,
          c->n, c->y));
  return TRUE;
}

static void
run (NpuDevice * dev, Call * c)
{
  NpuQueue *queue;
  NpuFence *fence;
  GError *error = NULL;

  if (!dev) {
    call_task (NULL, c, NULL);
    return;
  }
  queue = npu_queue_new (dev, "typed");
  fence = npu_queue_submit (queue, call_task, c, NULL, NULL, 0);
  g_assert_true (npu_fence_wait (fence, -1, &error));
  g_assert_no_error (error);
  npu_fence_unref (fence);
  npu_queue_free (queue);
}

/* Every output of one product against the reference, within the bound */
static void
check_product (GRand * rng, NpuDevice * dev, guint32 type, gsize rows,
    gsize k, gsize n)
{
  guint8 *w = random_matrix (rng, type, rows, k);
  gsize row_bytes = npu_quants_row_bytes (type, k), r, c, j;
  float *x = g_new (float, n * k), *y = g_new (float, n * rows);
  float *row = g_new (float, k);
  Call call = { type, w, rows, k, n, x, y };

  for (j = 0; j < n * k; j++)
    x[j] = (float) g_rand_double_range (rng, -1, 1);
  for (j = 0; j < n * rows; j++)
    y[j] = NAN;
  run (dev, &call);
  for (r = 0; r < rows; r++) {
    g_assert_true (npu_quants_dequantize_row (type, w + r * row_bytes, row, k));
    for (c = 0; c < n; c++) {
      double ref = npu_quants_dot_row (type, w + r * row_bytes, x + c * k, k);
      double mag = 0, u = ldexp (1, -24), m = k + 1;

      for (j = 0; j < k; j++)
        mag += fabs ((double) row[j] * x[c * k + j]);
      if (!(fabs (y[c * rows + r] - ref) <= m * u / (1 - m * u) * mag))
        g_error ("%s on %s, %zu x %zu, n %zu: y[%zu][%zu] = %.9g, reference "
            "%.9g (bound %.3g)", npu_ggml_type_name (type),
            npu_matmul_get_isa (), rows, k, n, c, r, y[c * rows + r], ref,
            m * u / (1 - m * u) * mag);
    }
  }
  g_free (row);
  g_free (y);
  g_free (x);
  g_free (w);
}

static void
test_every_type_and_level (void)
{
  GRand *rng = g_rand_new_with_seed (43);
  NpuDevice *two = npu_device_new_cpu (2);
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  guint levels = 0, a, t, s;

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    levels++;
    for (t = 0; t < G_N_ELEMENTS (types); t++) {
      guint block = 0;

      g_assert_true (npu_ggml_type_info (types[t], &block, NULL));

      for (s = 0; s < 4; s++) {
        gsize k = block * g_rand_int_range (rng, 1, 24);
        gsize rows = g_rand_int_range (rng, 1, 40);
        gsize n = g_rand_int_range (rng, 1, 6);

        /* then two shapes that reach every branch: 9 rows (two groups of
         * four and one row alone) by 5 columns (three together, two
         * alone); k five of the decoder's chunks of 1024 and a partial
         * one, and k short with a tail past the last whole vector where
         * the block allows (37 values of the 1-value types) */
        if (s == 0 || s == 1) {
          rows = 9;
          n = 5;
          k = s == 0 ? block * (5 * 1024 / block) + block :
              block == 1 ? 37 : block * 3;
        }
        check_product (rng, s % 2 ? two : NULL, types[t], rows, k, n);
      }
    }
  }
  g_assert_true (npu_matmul_set_isa (saved));
  g_test_message ("%u levels", levels);
  g_assert_cmpuint (levels, >=, 1);
  g_free (saved);
  npu_device_unref (two);
  g_rand_free (rng);
}

/* Refusals: no decoder, a row that is not whole blocks; nothing written */
static void
test_refusals (void)
{
  guint8 w[256] = { 0 };
  float x[256] = { 0 }, y[4] = { 7, 7, 7, 7 };

  g_assert_false (npu_matmul_typed (NULL, NPU_GGML_TYPE_Q2_K, w, 1, 256, x,
          1, y));
  g_assert_false (npu_matmul_typed (NULL, NPU_GGML_TYPE_Q4_K, w, 1, 32, x,
          1, y));
  g_assert_false (npu_matmul_typed (NULL, NPU_GGML_TYPE_Q4_0, w, 1, 33, x,
          1, y));
  g_assert_cmpfloat (y[0], ==, 7);
  /* an empty row: zeros */
  g_assert_true (npu_matmul_typed (NULL, NPU_GGML_TYPE_F16, w, 2, 0, x, 2, y));
  g_assert_cmpfloat (y[0], ==, 0);
  g_assert_cmpfloat (y[3], ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/matmul-typed/every-type-and-level",
      test_every_type_and_level);
  g_test_add_func ("/matmul-typed/refusals", test_refusals);
  return g_test_run ();
}
