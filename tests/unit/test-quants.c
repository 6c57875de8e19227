/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: ggml's weight types (npuquants.h) against an independent decoder
 *
 * The reference below is written from the block layouts of ggml-common.h,
 * value by value rather than loop by loop: for the k-th value of a block it
 * finds the bits of its code, its scale and its offset, and computes
 * scale * code + offset in double.  The core decodes in F32 with ggml's
 * operations; for every type those are exact but for at most one rounding
 * (a half times a 6- or 7-bit scale times a code of at most 6 bits fits
 * F32's 24-bit significand), so each decoded value must be the double
 * reference rounded to F32, bit for bit.  Blocks are random bytes with
 * random finite scales, normal and subnormal.
 */
#include <core/formats/npuquants.h>
#include <core/formats/npugguf.h>
#include <core/formats/npumxfp4.h>

#include <math.h>
#include <string.h>

#define N_BLOCKS 400

/* ------------------------------------------------------------------------ */
/* Independent reference                                                     */

/* IEEE half from its fields, in double */
static double
ref_half (const guint8 * p)
{
  guint h = p[0] | (p[1] << 8);
  guint s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e ? ldexp (1024 + m, (int) e - 25) : ldexp (m, -24);

  g_assert_cmpuint (e, <, 31);  /* the blocks hold finite scales */
  return s ? -v : v;
}

/* Nibble k (0..31) of 16 bytes: the low nibbles are values 0-15, the high
 * ones 16-31 */
static guint
ref_nibble (const guint8 * qs, guint k)
{
  return k < 16 ? qs[k] & 15 : qs[k - 16] >> 4;
}

/* Bit k of a little-endian 32-bit field */
static guint
ref_bit32 (const guint8 * p, guint k)
{
  return (p[k / 8] >> (k % 8)) & 1;
}

/* The 6-bit scale (@want_min FALSE) or min of sub-block s of Q4_K / Q5_K:
 * 12 bytes, bytes 0-3 hold the scales of 0-3 in their low 6 bits, bytes
 * 4-7 the mins of 0-3; sub-blocks 4-7 have their low 4 bits in bytes 8-11
 * (scale in the low nibble, min in the high one) and their top 2 bits in
 * the top 2 bits of bytes 0-3 (scales) and 4-7 (mins) */
static guint
ref_k4_field (const guint8 * sc, guint s, gboolean want_min)
{
  guint base = want_min ? 4 : 0;

  if (s < 4)
    return sc[base + s] & 63;
  return (want_min ? sc[8 + s - 4] >> 4 : sc[8 + s - 4] & 15)
      | ((sc[base + s - 4] >> 6) << 4);
}

/* The k-th value of a block of @type, in double (before rounding) */
static double
ref_value (guint32 type, const guint8 * b, guint k)
{
  switch (type) {
    case NPU_GGML_TYPE_Q4_0:
      return ref_half (b) * ((double) ref_nibble (b + 2, k) - 8);
    case NPU_GGML_TYPE_Q4_1:
      return ref_half (b) * ref_nibble (b + 4, k) + ref_half (b + 2);
    case NPU_GGML_TYPE_Q5_0:
      return ref_half (b) * ((double) (ref_nibble (b + 6, k)
              + 16 * ref_bit32 (b + 2, k)) - 16);
    case NPU_GGML_TYPE_Q5_1:
      return ref_half (b) * (ref_nibble (b + 8, k) + 16 * ref_bit32 (b + 4,
              k)) + ref_half (b + 2);
    case NPU_GGML_TYPE_Q8_0:
      return ref_half (b) * (gint8) b[2 + k];
    case NPU_GGML_TYPE_Q4_K:
    case NPU_GGML_TYPE_Q5_K:{
      /* sub-block s of 32; pairs of sub-blocks share 32 bytes of nibbles,
       * the even one in the low nibbles; Q5_K's fifth bit of value k is
       * bit s of qh[k % 32] */
      guint s = k / 32, q;
      const guint8 *qs = b + (type == NPU_GGML_TYPE_Q4_K ? 16 : 48);
      guint8 byte = qs[32 * (s / 2) + k % 32];

      q = s % 2 ? byte >> 4 : byte & 15;
      if (type == NPU_GGML_TYPE_Q5_K)
        q += 16 * ((b[16 + k % 32] >> s) & 1);
      return ref_half (b) * ref_k4_field (b + 4, s, FALSE) * q
          - ref_half (b + 2) * ref_k4_field (b + 4, s, TRUE);
    }
    case NPU_GGML_TYPE_Q6_K:{
      /* halves of 128; in each, runs t = 0..3 of 32: the low 4 bits in
       * ql[64 h + 32 (t % 2) + l] (low nibble for t < 2), the top 2 in
       * bits 2t, 2t+1 of qh[32 h + l]; one int8 scale a 16 values, the
       * run's scales 2t and 2t + 1 of the half's 8 */
      guint h = k / 128, t = (k % 128) / 32, l = k % 32;
      guint8 lo = b[64 * h + 32 * (t % 2) + l];
      guint q = (t < 2 ? lo & 15 : lo >> 4)
          | (((b[128 + 32 * h + l] >> (2 * t)) & 3) << 4);
      gint8 sc = (gint8) b[192 + 8 * h + 2 * t + l / 16];

      return ref_half (b + 208) * sc * ((double) q - 32);
    }
    default:
      g_assert_not_reached ();
  }
  return 0;
}

/* ------------------------------------------------------------------------ */

typedef struct
{
  guint32 type;
  guint block;
  guint bytes;
  guint half_at[2];             /* offsets of the block's f16 scales */
  guint n_halves;
} QuantType;

static const QuantType quant_types[] = {
  {NPU_GGML_TYPE_Q4_0, 32, 18, {0}, 1},
  {NPU_GGML_TYPE_Q4_1, 32, 20, {0, 2}, 2},
  {NPU_GGML_TYPE_Q5_0, 32, 22, {0}, 1},
  {NPU_GGML_TYPE_Q5_1, 32, 24, {0, 2}, 2},
  {NPU_GGML_TYPE_Q8_0, 32, 34, {0}, 1},
  {NPU_GGML_TYPE_Q4_K, 256, 144, {0, 2}, 2},
  {NPU_GGML_TYPE_Q5_K, 256, 176, {0, 2}, 2},
  {NPU_GGML_TYPE_Q6_K, 256, 210, {208}, 1},
};

/* A random finite half: mostly normal (exponents 1-30), one in eight
 * subnormal */
static void
random_half (GRand * rng, guint8 * p)
{
  guint e = g_rand_int_range (rng, 0, 8) == 0 ? 0 :
      (guint) g_rand_int_range (rng, 1, 31);
  guint h = (g_rand_int (rng) & 0x8000) | (e << 10) | (g_rand_int (rng) & 1023);

  p[0] = h & 0xff;
  p[1] = h >> 8;
}

static guint8 *
random_blocks (GRand * rng, const QuantType * t, guint n_blocks)
{
  guint8 *b = g_malloc (n_blocks * t->bytes);
  guint i, j;

  for (i = 0; i < n_blocks * t->bytes; i++)
    b[i] = g_rand_int (rng) & 0xff;
  for (i = 0; i < n_blocks; i++)
    for (j = 0; j < t->n_halves; j++)
      random_half (rng, b + i * t->bytes + t->half_at[j]);
  return b;
}

/* Every value of random blocks of every type: the double reference
 * rounded to F32, bit for bit */
static void
test_decode_exact (void)
{
  GRand *rng = g_rand_new_with_seed (41);
  guint i, k;

  for (i = 0; i < G_N_ELEMENTS (quant_types); i++) {
    const QuantType *t = &quant_types[i];
    guint n = N_BLOCKS * t->block, n_zero = 0;
    guint8 *b = random_blocks (rng, t, N_BLOCKS);
    float *y = g_new (float, n);

    g_assert_true (npu_quants_dequantize_row (t->type, b, y, n));
    for (k = 0; k < n; k++) {
      float want = (float) ref_value (t->type, b + k / t->block * t->bytes,
          k % t->block);

      if (memcmp (&want, &y[k], sizeof (float)) != 0)
        g_error ("%s: value %u is %.9g, want %.9g",
            npu_ggml_type_name (t->type), k, y[k], want);
      n_zero += y[k] == 0.0f;
    }
    /* the blocks are not degenerate: most values are not zero */
    g_assert_cmpuint (n_zero, <, n / 4);
    g_free (y);
    g_free (b);
  }
  g_rand_free (rng);
}

/* The dot product against the reference's values times x, in double */
static void
test_dot_row (void)
{
  GRand *rng = g_rand_new_with_seed (42);
  guint i, k;

  for (i = 0; i < G_N_ELEMENTS (quant_types); i++) {
    const QuantType *t = &quant_types[i];
    guint n = 8 * t->block;
    guint8 *b = random_blocks (rng, t, 8);
    float *x = g_new (float, n);
    double want = 0, mag = 0, got;

    for (k = 0; k < n; k++)
      x[k] = (float) g_rand_double_range (rng, -2.0, 2.0);
    for (k = 0; k < n; k++) {
      double v = (float) ref_value (t->type, b + k / t->block * t->bytes,
          k % t->block);

      want += v * x[k];
      mag += fabs (v * x[k]);
    }
    got = npu_quants_dot_row (t->type, b, x, n);
    /* the same terms summed in the same order in double */
    g_assert_cmpfloat (fabs (got - want), <=, 1e-15 * mag);
    g_free (x);
    g_free (b);
  }
  g_rand_free (rng);
}

/* F32, F16, BF16 and MXFP4 rows are their elementwise conversions */
static void
test_float_rows (void)
{
  const guint8 f16[4] = { 0x00, 0x3c, 0x01, 0x80 };     /* 1.0, -2^-24 */
  const guint8 bf16[4] = { 0x80, 0x3f, 0xc0, 0xff };    /* 1.0, NaN */
  const float f32[2] = { 1.5f, -0.0f };
  NpuBlockMxfp4 mx;
  float y[32], want[32];
  guint i;

  g_assert_true (npu_quants_dequantize_row (NPU_GGML_TYPE_F16, f16, y, 2));
  g_assert_cmpfloat (y[0], ==, 1.0f);
  g_assert_cmpfloat (y[1], ==, -ldexpf (1.0f, -24));
  g_assert_true (npu_quants_dequantize_row (NPU_GGML_TYPE_BF16, bf16, y, 2));
  g_assert_cmpfloat (y[0], ==, 1.0f);
  g_assert_true (isnan (y[1]));
  g_assert_true (npu_quants_dequantize_row (NPU_GGML_TYPE_F32, f32, y, 2));
  g_assert_cmpfloat (y[0], ==, 1.5f);
  g_assert_true (signbit (y[1]) && y[1] == 0.0f);

  mx.e = 125;
  for (i = 0; i < 16; i++)
    mx.qs[i] = (guint8) (i | ((15 - i) << 4));
  npu_mxfp4_dequantize (&mx, want, 32);
  g_assert_true (npu_quants_dequantize_row (NPU_GGML_TYPE_MXFP4, &mx, y, 32));
  g_assert_cmpmem (y, sizeof (y), want, sizeof (want));
}

/* Row sizes agree with the GGUF reader's table; a row that is not whole
 * blocks, or a type without a decoder, is refused */
static void
test_sizes_and_refusals (void)
{
  static const guint32 supported[] = {
    NPU_GGML_TYPE_F32, NPU_GGML_TYPE_F16, NPU_GGML_TYPE_BF16,
    NPU_GGML_TYPE_Q4_0, NPU_GGML_TYPE_Q4_1, NPU_GGML_TYPE_Q5_0,
    NPU_GGML_TYPE_Q5_1, NPU_GGML_TYPE_Q8_0, NPU_GGML_TYPE_Q4_K,
    NPU_GGML_TYPE_Q5_K, NPU_GGML_TYPE_Q6_K, NPU_GGML_TYPE_MXFP4,
  };
  guint8 zero[256] = { 0 };
  float y[256];
  guint i;

  for (i = 0; i < G_N_ELEMENTS (supported); i++) {
    guint block;
    gsize bytes;

    g_assert_true (npu_quants_supported (supported[i]));
    g_assert_true (npu_ggml_type_info (supported[i], &block, &bytes));
    g_assert_cmpuint (npu_quants_row_bytes (supported[i], 4 * 256), ==,
        4 * 256 / block * bytes);
    if (block > 1) {
      g_assert_cmpuint (npu_quants_row_bytes (supported[i], block + 1), ==, 0);
      g_assert_false (npu_quants_dequantize_row (supported[i], zero, y,
              block + 1));
      g_assert_true (isnan (npu_quants_dot_row (supported[i], zero, y,
                  block + 1)));
    }
  }
  g_assert_false (npu_quants_supported (NPU_GGML_TYPE_Q2_K));
  g_assert_false (npu_quants_supported (NPU_GGML_TYPE_IQ4_XS));
  g_assert_cmpuint (npu_quants_row_bytes (NPU_GGML_TYPE_Q3_K, 256), ==, 0);
  g_assert_false (npu_quants_dequantize_row (NPU_GGML_TYPE_Q2_K, zero, y, 256));
}

/* A scale that is NaN or Inf in the file makes its block's values NaN or
 * +-Inf (0 x Inf is NaN), as in ggml: the documented result, no trap */
static void
test_nonfinite_scale (void)
{
  guint8 b[18] = { 0x00, 0x7c };        /* Q4_0, d = +Inf, codes 0 */
  float y[32];

  b[2] = 0x98;                  /* values 0 and 16: codes 8 (0) and 9 (+1) */
  g_assert_true (npu_quants_dequantize_row (NPU_GGML_TYPE_Q4_0, b, y, 32));
  g_assert_true (isnan (y[0]));
  g_assert_true (isinf (y[16]) && y[16] > 0);
  g_assert_true (isinf (y[1]) && y[1] < 0);     /* code 0: -8 x Inf */
  b[1] = 0x7e;                  /* NaN */
  g_assert_true (npu_quants_dequantize_row (NPU_GGML_TYPE_Q4_0, b, y, 32));
  g_assert_true (isnan (y[5]));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/quants/decode-exact", test_decode_exact);
  g_test_add_func ("/quants/dot-row", test_dot_row);
  g_test_add_func ("/quants/float-rows", test_float_rows);
  g_test_add_func ("/quants/sizes-and-refusals", test_sizes_and_refusals);
  g_test_add_func ("/quants/nonfinite-scale", test_nonfinite_scale);
  return g_test_run ();
}
