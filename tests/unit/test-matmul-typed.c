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
 *
 * npu_weight_matrix_*(), the models' matrices: every type read where it
 * is stored (MXFP4 also repacked), each product against the same
 * reference within its kernel's documented bound (npumatmul.h).
 */
#include <core/cpu/npumatmul.h>
#include <core/cpu/npuweightmatrix.h>
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
  "scalar", "avx2", "avx512", "asimd", "neon", "neon-i8mm",
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

/* The offset in a block of its f16 scale @field (0: d, 1: m or dmin), or
 * -1 when the type has no such field */
static gint
scale_offset (guint32 type, guint field)
{
  switch (type) {
    case NPU_GGML_TYPE_Q4_0:
    case NPU_GGML_TYPE_Q5_0:
    case NPU_GGML_TYPE_Q8_0:
      return field == 0 ? 0 : -1;
    case NPU_GGML_TYPE_Q4_1:
    case NPU_GGML_TYPE_Q5_1:
    case NPU_GGML_TYPE_Q4_K:
    case NPU_GGML_TYPE_Q5_K:
      return field * 2;
    case NPU_GGML_TYPE_Q6_K:
      return field == 0 ? 208 : -1;
    default:
      return -1;
  }
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
      gsize bytes, n_blocks;

      g_assert_true (npu_ggml_type_info (type, NULL, &bytes));
      n_blocks = rows * row_bytes / bytes;

      for (j = 0; j < n_blocks; j++) {
        guint8 *b = w + j * bytes;

        random_half (rng, b + scale_offset (type, 0));
        if (scale_offset (type, 1) >= 0)
          random_half (rng, b + scale_offset (type, 1));
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

/* @func (@data) without a task, or in a task on @dev */
static void
run (NpuDevice * dev, NpuTaskFunc func, gpointer data)
{
  NpuQueue *queue;
  NpuFence *fence;
  GError *error = NULL;

  if (!dev) {
    func (NULL, data, NULL);
    return;
  }
  queue = npu_queue_new (dev, "typed");
  fence = npu_queue_submit (queue, func, data, NULL, NULL, 0);
  g_assert_true (npu_fence_wait (fence, -1, &error));
  g_assert_no_error (error);
  npu_fence_unref (fence);
  npu_queue_free (queue);
}

typedef struct
{
  guint32 type;
  const guint8 *w;
  gsize rows, k;
  const float *x;
  gsize n;
  float *y;
  NpuMatmulPrecision precision;
} BlocksCall;

static gboolean
blocks_task (NpuTask * task, gpointer data, GError ** error)
{
  BlocksCall *c = data;

  g_assert_true (npu_matmul_blocks (task, c->type, c->w, c->rows, c->k, c->x,
          c->n, c->y, c->precision));
  return TRUE;
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
  run (dev, call_task, &call);
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

/* npu_matmul_blocks()'s bound (npumatmul.h) for one output */
static double
blocks_bound (guint32 type, NpuMatmulPrecision precision, const float *row,
    const float *x, gsize k)
{
  double u = ldexp (1, -24), act = 0, acc = 0;
  /* the activations' groups: the type's block, 256 for the K-quants
   * (Q8_K), else 32 */
  guint group = 0;
  gsize j, b;

  g_assert_true (npu_ggml_type_info (type, &group, NULL));

  for (b = 0; b < k; b += 32) {
    double d = 0, a = 0;

    for (j = b / group * group; j < b / group * group + group; j++)
      d = MAX (d, fabs (x[j]));
    for (j = b; j < b + 32; j++)
      a = MAX (a, fabs (row[j]));
    d /= 127;
    for (j = b; j < b + 32; j++) {
      act += fabs (row[j]) * d;
      acc += (fabs (row[j]) + 4 * a) * (fabs (x[j]) + d);
    }
  }
  if (precision == NPU_MATMUL_PRECISION_FAST)
    return act * (0.5 + ldexp (1, -17)) + (k / 8.0 + 8) * u * acc;
  return act * (1.0 / 508 + ldexp (1, -16)) + 2 * (k / 8.0 + 8) * u * acc;
}

/* The bound npumatmul.h states for npu_weight_matrix_mul() of row @r by
 * column @c: MXFP4 and Q8_0 quantise the activations per block of 32
 * (FAST: half of d = max|x| / 127; ACCURATE: the residual's, d / 508, and
 * twice the accumulation), the other types the F32 inner product's */
static double
weight_bound (guint32 type, NpuMatmulPrecision precision, const float *row,
    const float *x, gsize k)
{
  double u = ldexp (1, -24), mag = 0, act = 0, acc = 0;
  gsize j, b;

  for (j = 0; j < k; j++)
    mag += fabs ((double) row[j] * x[j]);
  /* the block types on the integer products but on the scalar path */
  if (npu_matmul_blocks_supported (type) &&
      strcmp (npu_matmul_get_isa (), "scalar") != 0)
    return blocks_bound (type, precision, row, x, k);
  if (type != NPU_GGML_TYPE_MXFP4 && type != NPU_GGML_TYPE_Q8_0)
    return (k + 1) * u / (1 - (k + 1) * u) * mag;
  for (b = 0; b < k; b += 32) {
    double d = 0;

    for (j = b; j < b + 32; j++)
      d = MAX (d, fabs (x[j]));
    d /= 127;
    for (j = b; j < b + 32; j++) {
      act += fabs (row[j]) * d;
      acc += fabs (row[j]) * (fabs (x[j]) + d);
    }
  }
  if (precision == NPU_MATMUL_PRECISION_FAST)
    return act * (0.5 + ldexp (1, -17)) + (k / 32 + 6) * u * acc;
  return act * (1.0 / 508 + ldexp (1, -16)) + 2 * (k / 32 + 6) * u * acc;
}

/* Output @v of @type's row at @src times the @k activations @x against
 * the reference, within the bound of its kernel; @row a scratch row;
 * @what says where it stands in the failure message */
static void
check_output (guint32 type, NpuMatmulPrecision precision, const guint8 * src,
    const float *x, gsize k, float *row, double v, const gchar * what,
    gsize c, gsize r)
{
  double ref, bound;

  g_assert_true (npu_quants_dequantize_row (type, src, row, k));
  ref = npu_quants_dot_row (type, src, x, k);
  bound = weight_bound (type, precision, row, x, k);
  if (!(fabs (v - ref) <= bound))
    g_error ("%s on %s, %s%s: y[%zu][%zu] = %.9g, reference %.9g (bound "
        "%.3g)", npu_ggml_type_name (type), npu_matmul_get_isa (),
        precision ? "accurate" : "fast", what, c, r, v, ref, bound);
}

static void
check_weight_product (const NpuWeightMatrix * m, const guint8 * w,
    const float *x, gsize n, const float *y, NpuMatmulPrecision precision)
{
  float *row = g_new (float, m->k);
  gsize r, c;

  for (r = 0; r < m->rows; r++)
    for (c = 0; c < n; c++)
      check_output (m->type, precision, w + r * m->row_bytes, x + c * m->k,
          m->k, row, y[c * m->rows + r], "", c, r);
  g_free (row);
}

/* Each type read where it is stored, nothing owned; MXFP4 repacked on
 * request; single and grouped products within their bound */
static void
test_weight_matrix (void)
{
  GRand *rng = g_rand_new_with_seed (44);
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  guint a, t, p;

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    for (t = 0; t < G_N_ELEMENTS (types); t++)
      for (p = 0; p < 3; p++) {
        guint32 type = types[t];
        gsize k = 512, rows = 7, n = p == 2 ? 6 : 2, j;
        NpuMatmulPrecision prec = p ? NPU_MATMUL_PRECISION_ACCURATE :
            NPU_MATMUL_PRECISION_FAST;
        gboolean repack = type == NPU_GGML_TYPE_MXFP4 && p == 1;
        guint8 *w[2] = { random_matrix (rng, type, rows, k),
          random_matrix (rng, type, rows, k)
        };
        NpuWeightMatrix m[2];
        const NpuWeightMatrix *pm[2] = { &m[0], &m[1] };
        float *x = g_new (float, n * k), *y[2];

        for (j = 0; j < 2; j++) {
          g_assert_true (npu_weight_matrix_init (&m[j], type, w[j], rows, k,
                  repack));
          y[j] = g_new (float, n * rows);
          if (repack) {
            g_assert_cmpuint (npu_weight_matrix_get_owned_size (&m[j]), >, 0);
          } else {
            g_assert_cmpuint (npu_weight_matrix_get_owned_size (&m[j]), ==, 0);
            g_assert_cmpuint (npu_weight_matrix_get_size (&m[j]), ==,
                rows * npu_quants_row_bytes (type, k));
            g_assert_true (type == NPU_GGML_TYPE_MXFP4 ?
                (const guint8 *) m[j].m.blocks == w[j] : m[j].data == w[j]);
          }
        }
        for (j = 0; j < n * k; j++)
          x[j] = (float) g_rand_double_range (rng, -1, 1);
        npu_weight_matrix_mul (NULL, &m[0], x, n, y[0], prec);
        check_weight_product (&m[0], w[0], x, n, y[0], prec);
        npu_weight_matrix_mul_multi (NULL, pm, 2, x, n, y, prec);
        for (j = 0; j < 2; j++) {
          check_weight_product (&m[j], w[j], x, n, y[j], prec);
          npu_weight_matrix_clear (&m[j]);
          g_free (y[j]);
          g_free (w[j]);
        }
        g_free (x);
      }
  }
  g_assert_true (npu_matmul_set_isa (saved));
  g_free (saved);
  g_rand_free (rng);
}

/* The block types' integer products at every level, both precisions,
 * random blocks and shapes, with and without two threads */
static void
test_blocks (void)
{
  GRand *rng = g_rand_new_with_seed (45);
  NpuDevice *two = npu_device_new_cpu (2);
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  guint a, t, s, checked = 0;

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    for (t = 0; t < G_N_ELEMENTS (types); t++) {
      guint block = 0;

      if (!npu_matmul_blocks_supported (types[t]))
        continue;
      g_assert_true (npu_ggml_type_info (types[t], &block, NULL));
      for (s = 0; s < 4; s++) {
        NpuMatmulPrecision prec = s % 2 ? NPU_MATMUL_PRECISION_ACCURATE :
            NPU_MATMUL_PRECISION_FAST;
        gsize k = block * g_rand_int_range (rng, 1, block == 32 ? 40 : 6);
        gsize rows = g_rand_int_range (rng, 1, 20);
        /* up to two groups of columns and a partial one */
        gsize n = s < 2 ? g_rand_int_range (rng, 1, 4) : 9;
        guint8 *w = random_matrix (rng, types[t], rows, k);
        gsize row_bytes = npu_quants_row_bytes (types[t], k), r, c, j;
        float *x = g_new (float, n * k), *y = g_new (float, n * rows);
        float *row = g_new (float, k);
        BlocksCall call = { types[t], w, rows, k, x, n, y, prec };

        for (j = 0; j < n * k; j++)
          x[j] = (float) g_rand_double_range (rng, -1, 1);
        run (s == 3 ? two : NULL, blocks_task, &call);
        for (r = 0; r < rows; r++) {
          const guint8 *src = w + r * row_bytes;

          g_assert_true (npu_quants_dequantize_row (types[t], src, row, k));
          for (c = 0; c < n; c++) {
            double ref = npu_quants_dot_row (types[t], src, x + c * k, k);
            double bound = blocks_bound (types[t], prec, row, x + c * k, k);

            if (!(fabs (y[c * rows + r] - ref) <= bound))
              g_error ("%s on %s, %s, %zu x %zu, n %zu: y[%zu][%zu] = "
                  "%.9g, reference %.9g (bound %.3g)",
                  npu_ggml_type_name (types[t]), npu_matmul_get_isa (),
                  prec ? "accurate" : "fast", rows, k, n, c, r,
                  y[c * rows + r], ref, bound);
            checked++;
          }
        }
        g_free (row);
        g_free (y);
        g_free (x);
        g_free (w);
      }
    }
  }
  g_test_message ("%u outputs checked", checked);
  /* refused: another type, partial blocks */
  {
    float xx[256] = { 0 }, yy[1] = { 7 };
    guint8 ww[256] = { 0 };

    g_assert_false (npu_matmul_blocks (NULL, NPU_GGML_TYPE_F16, ww, 1, 32,
            xx, 1, yy, NPU_MATMUL_PRECISION_FAST));
    g_assert_false (npu_matmul_blocks (NULL, NPU_GGML_TYPE_Q4_K, ww, 1, 32,
            xx, 1, yy, NPU_MATMUL_PRECISION_FAST));
    g_assert_cmpfloat (yy[0], ==, 7);
  }
  g_assert_true (npu_matmul_set_isa (saved));
  g_free (saved);
  npu_device_unref (two);
  g_rand_free (rng);
}

/* A NaN or infinite scale (a NaN E8M0 for MXFP4, a NaN or infinite
 * element for F32, F16 and BF16) in one block of a row makes that row's
 * outputs non-finite in every column, as the exact decode does (NaN, or
 * +-Inf, or NaN where an infinite scale meets a zero code), at every
 * level and precision, and leaves every other row within its bound: no
 * lane, tile or claim shares it with a neighbour. */
static void
test_special_scales (void)
{
  GRand *rng = g_rand_new_with_seed (46);
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  /* little-endian bytes */
  static const guint8 half_nan[2] = { 0x00, 0x7e };
  static const guint8 half_inf[2] = { 0x00, 0x7c };
  static const guint8 bf16_nan[2] = { 0xc0, 0x7f };
  static const guint8 bf16_inf[2] = { 0x80, 0x7f };
  static const guint8 f32_nan[4] = { 0x00, 0x00, 0xc0, 0x7f };
  static const guint8 f32_inf[4] = { 0x00, 0x00, 0x80, 0x7f };
  guint a, t, p, checked = 0;

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    for (t = 0; t < G_N_ELEMENTS (types); t++)
      for (p = 0; p < 2; p++) {
        guint32 type = types[t];
        gsize k = 512, rows = 11, n = p ? 5 : 1, row_bytes, r, c, j;
        NpuMatmulPrecision prec = p ? NPU_MATMUL_PRECISION_ACCURATE :
            NPU_MATMUL_PRECISION_FAST;
        guint8 *w = random_matrix (rng, type, rows, k);
        gboolean special[11] = { FALSE, };
        float *x = g_new (float, n * k), *y = g_new (float, n * rows);
        float *row = g_new (float, k);
        NpuWeightMatrix m;
        gsize block_bytes, last;
        guint block;

        g_assert_true (npu_ggml_type_info (type, &block, &block_bytes));
        row_bytes = npu_quants_row_bytes (type, k);
        /* the last block of rows 2, 5 (and 8), so that the claims, tiles
         * and column groups all see a special row beside plain ones */
        last = row_bytes - block_bytes;
        switch (type) {
          case NPU_GGML_TYPE_F32:
            memcpy (w + 2 * row_bytes + last, f32_nan, 4);
            memcpy (w + 5 * row_bytes + last, f32_inf, 4);
            break;
          case NPU_GGML_TYPE_F16:
            memcpy (w + 2 * row_bytes + last, half_nan, 2);
            memcpy (w + 5 * row_bytes + last, half_inf, 2);
            break;
          case NPU_GGML_TYPE_BF16:
            memcpy (w + 2 * row_bytes + last, bf16_nan, 2);
            memcpy (w + 5 * row_bytes + last, bf16_inf, 2);
            break;
          case NPU_GGML_TYPE_MXFP4:
            w[2 * row_bytes + last] = 0xff;
            break;
          default:
            memcpy (w + 2 * row_bytes + last + scale_offset (type, 0),
                half_nan, 2);
            memcpy (w + 5 * row_bytes + last + scale_offset (type, 0),
                half_inf, 2);
            if (scale_offset (type, 1) >= 0)
              memcpy (w + 8 * row_bytes + last + scale_offset (type, 1),
                  half_nan, 2);
            break;
        }
        for (r = 0; r < rows; r++) {
          g_assert_true (npu_quants_dequantize_row (type, w + r * row_bytes,
                  row, k));
          for (j = 0; j < k; j++)
            special[r] |= !isfinite (row[j]);
        }
        for (j = 0; j < n * k; j++)
          x[j] = (float) g_rand_double_range (rng, -1, 1);
        g_assert_true (npu_weight_matrix_init (&m, type, w, rows, k,
                type == NPU_GGML_TYPE_MXFP4 && p));
        npu_weight_matrix_mul (NULL, &m, x, n, y, prec);
        for (r = 0; r < rows; r++)
          for (c = 0; c < n; c++) {
            double v = y[c * rows + r];

            if (special[r]) {
              if (isfinite (v))
                g_error ("%s on %s, %s: row %zu has a special scale, "
                    "y[%zu] = %.9g is finite", npu_ggml_type_name (type),
                    npu_matmul_get_isa (), prec ? "accurate" : "fast", r, c, v);
            } else {
              check_output (type, prec, w + r * row_bytes, x + c * k, k, row,
                  v, ", a plain row beside special ones", c, r);
            }
            checked++;
          }
        g_assert_true (special[2]);
        npu_weight_matrix_clear (&m);
        g_free (row);
        g_free (y);
        g_free (x);
        g_free (w);
      }
  }
  g_test_message ("%u outputs checked", checked);
  g_assert_true (npu_matmul_set_isa (saved));
  g_free (saved);
  g_rand_free (rng);
}

/* A NaN in one activation column and an Inf in another make every output
 * of those columns non-finite, for every type, level and precision (an
 * int8 path gives the group they are in a NaN scale; a quantiser that let
 * a later element replace the NaN in its max gave finite outputs), and
 * leave the other column within its bound. */
static void
test_special_activations (void)
{
  GRand *rng = g_rand_new_with_seed (47);
  gchar *saved = g_strdup (npu_matmul_get_isa ());
  guint a, t, p, checked = 0;

  for (a = 0; a < G_N_ELEMENTS (all_isas); a++) {
    if (!npu_matmul_set_isa (all_isas[a]))
      continue;
    for (t = 0; t < G_N_ELEMENTS (types); t++)
      for (p = 0; p < 2; p++) {
        guint32 type = types[t];
        gsize k = 512, rows = 9, n = 3, row_bytes, r, c, j;
        NpuMatmulPrecision prec = p ? NPU_MATMUL_PRECISION_ACCURATE :
            NPU_MATMUL_PRECISION_FAST;
        guint8 *w = random_matrix (rng, type, rows, k);
        float *x = g_new (float, n * k), *y = g_new (float, n * rows);
        float *row = g_new (float, k);
        NpuWeightMatrix m;

        row_bytes = npu_quants_row_bytes (type, k);
        for (j = 0; j < n * k; j++)
          x[j] = (float) g_rand_double_range (rng, -1, 1);
        /* a NaN early in its group (a max taken on from there drops it),
         * an Inf in the last block */
        x[k + 3] = NAN;
        x[2 * k + k - 5] = INFINITY;
        g_assert_true (npu_weight_matrix_init (&m, type, w, rows, k,
                type == NPU_GGML_TYPE_MXFP4 && p));
        npu_weight_matrix_mul (NULL, &m, x, n, y, prec);
        for (r = 0; r < rows; r++)
          for (c = 0; c < n; c++) {
            double v = y[c * rows + r];

            if (c > 0) {
              if (isfinite (v))
                g_error ("%s on %s, %s: column %zu has a %s, y[%zu] = %.9g "
                    "is finite", npu_ggml_type_name (type),
                    npu_matmul_get_isa (), prec ? "accurate" : "fast", c,
                    c == 1 ? "NaN" : "Inf", r, v);
            } else {
              check_output (type, prec, w + r * row_bytes, x, k, row, v,
                  ", a plain column beside special ones", c, r);
            }
            checked++;
          }
        npu_weight_matrix_clear (&m);
        g_free (row);
        g_free (y);
        g_free (x);
        g_free (w);
      }
  }
  g_test_message ("%u outputs checked", checked);
  g_assert_true (npu_matmul_set_isa (saved));
  g_free (saved);
  g_rand_free (rng);
}

/* A type with no decoder, a row of partial blocks: refused, untouched */
static void
test_weight_matrix_refusals (void)
{
  guint8 w[512] = { 0 };
  NpuWeightMatrix m, untouched;

  memset (&untouched, 0xa5, sizeof (untouched));
  m = untouched;
  g_assert_false (npu_weight_matrix_init (&m, NPU_GGML_TYPE_Q2_K, w, 1, 256,
          FALSE));
  g_assert_false (npu_weight_matrix_init (&m, NPU_GGML_TYPE_Q6_K, w, 1, 128,
          FALSE));
  g_assert_false (npu_weight_matrix_init (&m, NPU_GGML_TYPE_MXFP4, w, 1, 48,
          TRUE));
  g_assert_cmpmem (&m, sizeof (m), &untouched, sizeof (untouched));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/matmul-typed/every-type-and-level",
      test_every_type_and_level);
  g_test_add_func ("/matmul-typed/refusals", test_refusals);
  g_test_add_func ("/matmul-typed/weight-matrix", test_weight_matrix);
  g_test_add_func ("/matmul-typed/blocks", test_blocks);
  g_test_add_func ("/matmul-typed/weight-matrix-refusals",
      test_weight_matrix_refusals);
  g_test_add_func ("/matmul-typed/special-scales", test_special_scales);
  g_test_add_func ("/matmul-typed/special-activations",
      test_special_activations);
  return g_test_run ();
}
