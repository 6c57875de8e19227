/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 codec against an independent reference
 *
 * The reference below shares no code or method with the codec: it works in
 * double precision, finds the scale exponent by walking powers of two,
 * decodes E2M1 codes from their bit fields and picks each element by
 * exhaustive search over all 16 codes with an explicit tie-to-even rule.
 * Every comparison is byte-exact on the 17-byte blocks.
 *
 * A second independent decoder is written the way ggml decodes block_mxfp4
 * (doubled int8 table, scale 2^(e-128) built from bits), to show that blocks
 * we write read back as the same values in llama.cpp.
 */
#include <core/formats/npumxfp4.h>

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#define QK NPU_MXFP4_BLOCK_SIZE
#define N_RANDOM_BLOCKS 100000

/* ------------------------------------------------------------------------ */
/* Independent reference                                                     */

static guint32
fbits (float f)
{
  guint32 u;

  memcpy (&u, &f, 4);
  return u;
}

static float
bitsf (guint32 u)
{
  float f;

  memcpy (&f, &u, 4);
  return f;
}

/* E2M1 from the bit fields: bias 1, subnormal when the exponent field is 0 */
static double
ref_e2m1_value (guint code)
{
  guint s = (code >> 3) & 1, ex = (code >> 1) & 3, m = code & 1;
  double mag;

  if (ex == 0)
    mag = m * 0.5;
  else
    mag = ldexp (1.0 + m * 0.5, (int) ex - 1);
  return s ? -mag : mag;
}

/* Nearest of the 16 codes to p.  Equal distance: the code with mantissa
 * bit 0 (ties to even); still equal (only +0 / -0): the sign of p. */
static guint
ref_nearest_code (double p)
{
  guint best = 0, c;
  double best_d = INFINITY;

  for (c = 0; c < 16; c++) {
    double d = fabs (p - ref_e2m1_value (c));
    gboolean better;

    if (d < best_d)
      better = TRUE;
    else if (d > best_d)
      better = FALSE;
    else if ((c & 1) != (best & 1))
      better = (c & 1) == 0;
    else
      better = ((c >> 3) & 1) == (guint) (signbit (p) ? 1 : 0);
    if (better) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

/* The spec's conversion on exact double inputs: 17 output bytes */
static void
ref_quantize_block (const double *v, guint8 out[17])
{
  double amax = 0.0, p2, x;
  int s, shared, i;
  guint8 codes[QK];

  for (i = 0; i < QK; i++) {
    if (isnan (v[i]) || isinf (v[i])) {
      memset (out, 0, 17);
      out[0] = 0xFF;
      return;
    }
    amax = MAX (amax, fabs (v[i]));
  }

  if (amax == 0.0) {
    shared = -127;              /* log2(0) = -inf, clamped */
  } else {
    /* largest s with 2^s <= amax, by walking powers of two */
    p2 = 1.0;
    s = 0;
    while (p2 > amax) {
      p2 /= 2;
      s--;
    }
    while (p2 * 2 <= amax) {
      p2 *= 2;
      s++;
    }
    shared = CLAMP (s - 2, -127, 127);
  }
  x = ldexp (1.0, shared);

  for (i = 0; i < QK; i++)
    codes[i] = (guint8) ref_nearest_code (v[i] / x);

  out[0] = (guint8) (shared + 127);
  for (i = 0; i < QK / 2; i++)
    out[1 + i] = (guint8) (codes[i] | (codes[i + QK / 2] << 4));
}

static double
ref_f16 (guint16 h)
{
  int s = h >> 15, ex = (h >> 10) & 31, m = h & 1023;
  double mag;

  if (ex == 31)
    mag = m ? NAN : INFINITY;
  else if (ex == 0)
    mag = ldexp (m, -24);
  else
    mag = ldexp (1024 + m, ex - 25);
  return s ? -mag : mag;
}

static double
ref_bf16 (guint16 h)
{
  int s = h >> 15, ex = (h >> 7) & 255, m = h & 127;
  double mag;

  if (ex == 255)
    mag = m ? NAN : INFINITY;
  else if (ex == 0)
    mag = ldexp (m, -133);
  else
    mag = ldexp (128 + m, ex - 134);
  return s ? -mag : mag;
}

/* ------------------------------------------------------------------------ */
/* ggml-style decoder (as ggml-quants.c dequantize_row_mxfp4 reads bytes)    */

static const gint8 ggml_kvalues[16] = {
  0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

static float
ggml_style_e8m0_half (guint8 x)
{
  guint32 bits;

  if (x < 2)
    bits = 0x00200000u << x;
  else
    bits = (guint32) (x - 1) << 23;
  return bitsf (bits);
}

static void
ggml_style_dequantize (const guint8 *bytes, float *y, gsize n)
{
  gsize i, nb = n / QK;
  int j;

  for (i = 0; i < nb; i++) {
    const guint8 *b = bytes + i * 17;
    const float d = ggml_style_e8m0_half (b[0]);

    for (j = 0; j < QK / 2; j++) {
      const gint8 x0 = ggml_kvalues[b[1 + j] & 0x0F];
      const gint8 x1 = ggml_kvalues[b[1 + j] >> 4];

      y[i * QK + j] = x0 * d;
      y[i * QK + j + QK / 2] = x1 * d;
    }
  }
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static void
dump_block (const char *what, const guint8 *b)
{
  GString *s = g_string_new (NULL);
  int i;

  g_string_append_printf (s, "%s: e=%02x qs=", what, b[0]);
  for (i = 0; i < 16; i++)
    g_string_append_printf (s, "%02x", b[1 + i]);
  g_printerr ("%s\n", s->str);
  g_string_free (s, TRUE);
}

/* Quantise 32 F32 values with the codec and the reference, compare bytes */
static void
check_f32_block (const float *v, const char *what)
{
  NpuBlockMxfp4 got;
  guint8 want[17];
  double dv[QK];
  int i;

  for (i = 0; i < QK; i++)
    dv[i] = v[i];
  npu_mxfp4_quantize_f32 (v, &got, QK);
  ref_quantize_block (dv, want);
  if (memcmp (&got, want, 17) != 0) {
    for (i = 0; i < QK; i++)
      g_printerr ("v[%d] = %a (%08x)\n", i, v[i], fbits (v[i]));
    dump_block ("got ", (const guint8 *) &got);
    dump_block ("want", want);
    g_error ("%s: codec and reference differ", what);
  }
}

static void
fill_block (float *v, float value)
{
  int i;

  for (i = 0; i < QK; i++)
    v[i] = value;
}

static guint
code_at (const NpuBlockMxfp4 *b, int i)
{
  return i < QK / 2 ? b->qs[i] & 0xF : b->qs[i - QK / 2] >> 4;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */

static void
test_layout (void)
{
  NpuBlockMxfp4 b;
  float v[QK];
  int i;

  g_assert_cmpuint (sizeof (NpuBlockMxfp4), ==, 17);
  g_assert_cmpuint (offsetof (NpuBlockMxfp4, e), ==, 0);
  g_assert_cmpuint (offsetof (NpuBlockMxfp4, qs), ==, 1);

  /* X = 1 (max 6 -> shared_exp 0): element j < 16 gets code j and element
   * j + 16 code 15 - j, so qs[j] must be j | (15 - j) << 4 */
  for (i = 0; i < QK; i++)
    v[i] = (float) ref_e2m1_value (i < 16 ? (guint) i : (guint) (31 - i));
  npu_mxfp4_quantize_f32 (v, &b, QK);
  g_assert_cmpuint (b.e, ==, 127);
  for (i = 0; i < 16; i++)
    g_assert_cmpuint (b.qs[i], ==, (guint) (i | ((15 - i) << 4)));
}

static void
test_e2m1_codes (void)
{
  guint c;

  for (c = 0; c < 16; c++) {
    float f = npu_e2m1_to_float ((guint8) c);

    /* value and sign bit (code 8 is -0) */
    g_assert_cmpfloat (f, ==, ref_e2m1_value (c));
    g_assert_cmpint (!!signbit (f), ==, (c >> 3) & 1);
    g_assert_cmpuint (npu_float_to_e2m1 (f), ==, c);
    /* the upper bits of the argument are ignored */
    g_assert_cmpfloat (npu_e2m1_to_float ((guint8) (c | 0xF0)), ==, f);
  }
  /* saturation and non-finite elements */
  g_assert_cmpuint (npu_float_to_e2m1 (7.0f), ==, 0x7);
  g_assert_cmpuint (npu_float_to_e2m1 (1e30f), ==, 0x7);
  g_assert_cmpuint (npu_float_to_e2m1 (-1e30f), ==, 0xF);
  g_assert_cmpuint (npu_float_to_e2m1 (INFINITY), ==, 0x7);
  g_assert_cmpuint (npu_float_to_e2m1 (-INFINITY), ==, 0xF);
  g_assert_cmpuint (npu_float_to_e2m1 (NAN), ==, 0x0);
  g_assert_cmpuint (npu_float_to_e2m1 (-NAN), ==, 0x8);
  g_assert_cmpuint (npu_float_to_e2m1 (-1e-30f), ==, 0x8);
}

static void
test_e8m0 (void)
{
  int e;

  for (e = 0; e < 255; e++)
    g_assert_cmpfloat (npu_e8m0_to_float ((guint8) e), ==, ldexp (1.0,
            e - 127));
  g_assert_true (isnan (npu_e8m0_to_float (0xFF)));
  g_assert_cmphex (fbits (npu_e8m0_to_float (0)), ==, 0x00400000);
}

/* Each tie point, both signs, and one ulp either side, at several scales
 * (including e = 0 where the elements are F32 subnormals) */
static void
test_ties (void)
{
  static const float ties[7] = { 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f };
  /* expected magnitude index: at the tie (even neighbour), below, above */
  static const guint at[7] = { 0, 2, 2, 4, 4, 6, 6 };
  static const guint below[7] = { 0, 1, 2, 3, 4, 5, 6 };
  static const guint above[7] = { 1, 2, 3, 4, 5, 6, 7 };
  static const int scales[] = { -127, -126, -100, -3, 0, 1, 7, 100, 125 };
  guint t, k;
  int si;

  for (t = 0; t < 7; t++) {
    float lo = nextafterf (ties[t], 0.0f), hi = nextafterf (ties[t], 10.0f);

    g_assert_cmpuint (npu_float_to_e2m1 (ties[t]), ==, at[t]);
    g_assert_cmpuint (npu_float_to_e2m1 (-ties[t]), ==, at[t] | 8);
    g_assert_cmpuint (npu_float_to_e2m1 (lo), ==, below[t]);
    g_assert_cmpuint (npu_float_to_e2m1 (-lo), ==, below[t] | 8);
    g_assert_cmpuint (npu_float_to_e2m1 (hi), ==, above[t]);
    g_assert_cmpuint (npu_float_to_e2m1 (-hi), ==, above[t] | 8);
  }

  for (si = 0; si < (int) G_N_ELEMENTS (scales); si++) {
    float x = ldexpf (1.0f, scales[si]);

    for (t = 0; t < 7; t++) {
      float v[QK];
      NpuBlockMxfp4 b;
      float tie = ties[t] * x;

      /* element 0 = 6 X pins the scale to X */
      fill_block (v, 0.0f);
      v[0] = 6.0f * x;
      v[1] = tie;
      v[2] = -tie;
      v[3] = nextafterf (tie, 0.0f);
      v[4] = -nextafterf (tie, 0.0f);
      v[5] = nextafterf (tie, INFINITY);
      v[6] = -nextafterf (tie, INFINITY);
      /* same again in the high nibbles */
      for (k = 1; k < 7; k++)
        v[16 + k] = v[k];
      check_f32_block (v, "ties");

      npu_mxfp4_quantize_f32 (v, &b, QK);
      g_assert_cmpuint (b.e, ==, scales[si] + 127);
      for (k = 0; k < 2; k++) {
        int o = k * 16;

        g_assert_cmpuint (code_at (&b, o + 1), ==, at[t]);
        g_assert_cmpuint (code_at (&b, o + 2), ==, at[t] | 8);
        /* at e = 0 the elements are subnormal and their ulp is 2^-22 of
         * X: still fine enough to fall on either side of the tie */
        g_assert_cmpuint (code_at (&b, o + 3), ==, below[t]);
        g_assert_cmpuint (code_at (&b, o + 4), ==, below[t] | 8);
        g_assert_cmpuint (code_at (&b, o + 5), ==, above[t]);
        g_assert_cmpuint (code_at (&b, o + 6), ==, above[t] | 8);
      }
    }
  }
}

/* Block max one ulp either side of every power of two: the scale must step
 * exactly at 2^k */
static void
test_pow2_boundaries (void)
{
  int k;

  for (k = -149; k <= 127; k++) {
    float m = ldexpf (1.0f, k);
    float cands[3];
    int c;

    cands[0] = nextafterf (m, 0.0f);
    cands[1] = m;
    cands[2] = nextafterf (m, INFINITY);
    for (c = 0; c < 3; c++) {
      float v[QK];
      NpuBlockMxfp4 b;
      int fl = c == 0 ? k - 1 : k;      /* floor(log2(max)) */
      int i;

      if (cands[c] == 0.0f)
        continue;
      /* max last, smaller values before it, both signs */
      for (i = 0; i < QK; i++)
        v[i] = (i & 1 ? -1.0f : 1.0f) * cands[c] * ((float) i / QK);
      v[QK - 1] = -cands[c];
      check_f32_block (v, "pow2 boundary");
      npu_mxfp4_quantize_f32 (v, &b, QK);
      g_assert_cmpuint (b.e, ==, (guint) CLAMP (fl - 2 + 127, 0, 254));
    }
  }
}

static void
test_extremes (void)
{
  float v[QK];
  NpuBlockMxfp4 b;
  float back[QK];

  /* Largest float: shared_exp 125, the element rounds up to 8 and
   * saturates to 6.  The upper E8M0 clamp (127) is unreachable. */
  fill_block (v, 0.0f);
  v[0] = FLT_MAX;
  v[1] = -FLT_MAX;
  v[2] = FLT_MAX / 3;
  check_f32_block (v, "FLT_MAX");
  npu_mxfp4_quantize_f32 (v, &b, QK);
  g_assert_cmpuint (b.e, ==, 252);
  g_assert_cmpuint (code_at (&b, 0), ==, 0x7);
  g_assert_cmpuint (code_at (&b, 1), ==, 0xF);
  npu_mxfp4_dequantize (&b, back, QK);
  g_assert_cmpfloat (back[0], ==, 6.0 * ldexp (1.0, 125));

  /* FLT_MIN = 2^-126: shared_exp would be -128, clamped to -127; the
   * element is 2 X. */
  fill_block (v, 0.0f);
  v[0] = FLT_MIN;
  check_f32_block (v, "FLT_MIN");
  npu_mxfp4_quantize_f32 (v, &b, QK);
  g_assert_cmpuint (b.e, ==, 0);
  g_assert_cmpuint (code_at (&b, 0), ==, 0x4);

  /* Subnormal inputs keep their value: 2^-128 = 0.5 X, 3 * 2^-129 is a
   * tie (0.75) to 1.0, the largest subnormal rounds to 2, the smallest
   * subnormal to zero keeping its sign */
  fill_block (v, 0.0f);
  v[0] = ldexpf (1.0f, -128);
  v[1] = 3.0f * ldexpf (1.0f, -129);
  v[2] = bitsf (0x007fffff);
  v[3] = -bitsf (0x00000001);
  v[4] = ldexpf (1.0f, -129);   /* 0.25: tie to 0 */
  v[5] = nextafterf (ldexpf (1.0f, -129), 1.0f);
  check_f32_block (v, "subnormals");
  npu_mxfp4_quantize_f32 (v, &b, QK);
  g_assert_cmpuint (b.e, ==, 0);
  g_assert_cmpuint (code_at (&b, 0), ==, 0x1);
  g_assert_cmpuint (code_at (&b, 1), ==, 0x2);
  g_assert_cmpuint (code_at (&b, 2), ==, 0x4);
  g_assert_cmpuint (code_at (&b, 3), ==, 0x8);
  g_assert_cmpuint (code_at (&b, 4), ==, 0x0);
  g_assert_cmpuint (code_at (&b, 5), ==, 0x1);
  npu_mxfp4_dequantize (&b, back, QK);
  g_assert_cmpfloat (back[0], ==, ldexpf (1.0f, -128));
  g_assert_cmphex (fbits (back[3]), ==, 0x80000000);

  /* Only subnormals, the smallest: clamped scale, everything to zero */
  fill_block (v, bitsf (0x00000001));
  check_f32_block (v, "FLT_TRUE_MIN");

  /* Lowest unclamped scale: max 1.5 * 2^-125 has shared_exp -127 */
  fill_block (v, 0.0f);
  v[7] = 6.0f * ldexpf (1.0f, -127);
  check_f32_block (v, "lowest scale");

  /* Tiny values next to a huge one vanish (no subnormal trouble in V/X) */
  fill_block (v, bitsf (0x00000003));
  v[0] = 1e38f;
  v[31] = -1e-38f;
  check_f32_block (v, "huge and tiny");
}

static void
test_zeros (void)
{
  float v[QK], back[QK];
  NpuBlockMxfp4 b;
  int i;

  fill_block (v, 0.0f);
  check_f32_block (v, "+0");
  npu_mxfp4_quantize_f32 (v, &b, QK);
  g_assert_cmpuint (b.e, ==, 0);
  for (i = 0; i < 16; i++)
    g_assert_cmpuint (b.qs[i], ==, 0x00);
  npu_mxfp4_dequantize (&b, back, QK);
  for (i = 0; i < QK; i++)
    g_assert_cmphex (fbits (back[i]), ==, 0x00000000);

  fill_block (v, -0.0f);
  check_f32_block (v, "-0");
  npu_mxfp4_quantize_f32 (v, &b, QK);
  g_assert_cmpuint (b.e, ==, 0);
  for (i = 0; i < 16; i++)
    g_assert_cmpuint (b.qs[i], ==, 0x88);
  npu_mxfp4_dequantize (&b, back, QK);
  for (i = 0; i < QK; i++)
    g_assert_cmphex (fbits (back[i]), ==, 0x80000000);

  for (i = 0; i < QK; i++)
    v[i] = i % 3 ? 0.0f : -0.0f;
  check_f32_block (v, "+-0");
  npu_mxfp4_quantize_f32 (v, &b, QK);
  npu_mxfp4_dequantize (&b, back, QK);
  for (i = 0; i < QK; i++)
    g_assert_cmphex (fbits (back[i]), ==, fbits (v[i]));

  /* -0 next to non-zero values keeps its sign too */
  fill_block (v, -0.0f);
  v[9] = 1.0f;
  check_f32_block (v, "-0 with 1");
  npu_mxfp4_quantize_f32 (v, &b, QK);
  g_assert_cmpuint (code_at (&b, 0), ==, 0x8);
}

static void
test_nan_inf (void)
{
  static const guint32 specials[] = {
    0x7fc00000, 0xffc00000, 0x7f800001, 0x7fffffff, 0x7f800000, 0xff800000,
  };
  float v[QK], back[QK];
  NpuBlockMxfp4 b;
  guint s;
  int pos, i;

  for (s = 0; s < G_N_ELEMENTS (specials); s++) {
    for (pos = 0; pos < QK; pos++) {
      for (i = 0; i < QK; i++)
        v[i] = (float) (i - 16) * 0.37f;
      v[pos] = bitsf (specials[s]);
      check_f32_block (v, "nan/inf");
      npu_mxfp4_quantize_f32 (v, &b, QK);
      g_assert_cmpuint (b.e, ==, 0xFF);
      for (i = 0; i < 16; i++)
        g_assert_cmpuint (b.qs[i], ==, 0);
      npu_mxfp4_dequantize (&b, back, QK);
      for (i = 0; i < QK; i++)
        g_assert_true (isnan (back[i]));
    }
  }

  /* A NaN scale decodes to NaN whatever the element codes */
  b.e = 0xFF;
  for (i = 0; i < 16; i++)
    b.qs[i] = (guint8) (i * 17);
  npu_mxfp4_dequantize (&b, back, QK);
  for (i = 0; i < QK; i++)
    g_assert_true (isnan (back[i]));

  /* Inf/NaN through the other source types */
  {
    guint16 h[QK];
    guint8 q[NPU_Q8_0_BLOCK_BYTES];
    guint16 d;

    for (i = 0; i < QK; i++)
      h[i] = 0x3c00;
    h[5] = 0x7c00;              /* F16 +Inf */
    npu_mxfp4_quantize_f16 (h, &b, QK);
    g_assert_cmpuint (b.e, ==, 0xFF);
    h[5] = 0x7f80;              /* BF16 +Inf */
    npu_mxfp4_quantize_bf16 (h, &b, QK);
    g_assert_cmpuint (b.e, ==, 0xFF);

    /* Q8_0 with an Inf d: Inf * q and Inf * 0 = NaN */
    memset (q, 0, sizeof (q));
    d = 0x7c00;
    memcpy (q, &d, 2);
    q[2 + 3] = 5;
    npu_mxfp4_quantize_q8_0 (q, &b, QK);
    g_assert_cmpuint (b.e, ==, 0xFF);
  }
}

/* Decode then re-encode: a block holding a +-6 element pins its own scale,
 * so it must come back byte-identical, for every scale F32 can decode to */
static void
test_roundtrip_run (void)
{
  GRand *r = g_rand_new_with_seed (42);
  int e, rep, i;


  for (e = 0; e <= 252; e++) {
    for (rep = 0; rep < 8; rep++) {
      NpuBlockMxfp4 b, b2;
      float y[QK];

      b.e = (guint8) e;
      for (i = 0; i < 16; i++)
        b.qs[i] = (guint8) g_rand_int_range (r, 0, 256);
      /* one element +-6 */
      i = g_rand_int_range (r, 0, 16);
      b.qs[i] = (guint8) ((b.qs[i] & 0xF0) | (rep & 1 ? 0xF : 0x7));
      npu_mxfp4_dequantize (&b, y, QK);
      npu_mxfp4_quantize_f32 (y, &b2, QK);
      if (memcmp (&b, &b2, 17) != 0) {
        dump_block ("orig", (const guint8 *) &b);
        dump_block ("back", (const guint8 *) &b2);
        g_error ("round trip failed at e=%d", e);
      }
    }
  }
  g_rand_free (r);
}

static void
test_f16_bf16_exhaustive_run (void)
{
  guint h;


  for (h = 0; h < 65536; h++) {
    double want = ref_f16 ((guint16) h);
    float got = npu_f16_to_f32 ((guint16) h);

    if (isnan (want)) {
      g_assert_true (isnan (got));
    } else {
      g_assert_cmpfloat (got, ==, want);
      g_assert_cmpint (!!signbit (got), ==, !!signbit (want));
    }

    want = ref_bf16 ((guint16) h);
    got = npu_bf16_to_f32 ((guint16) h);
    if (isnan (want)) {
      g_assert_true (isnan (got));
    } else {
      g_assert_cmpfloat (got, ==, want);
      g_assert_cmpint (!!signbit (got), ==, !!signbit (want));
    }
  }
}

/* ---- random blocks ---- */

static guint32
rand_exp_bits (GRand *r, int base, int spread)
{
  /* finite F32 with biased exponent in [base - spread, base], clamped to
   * [0, 254] (0 = subnormal / zero) */
  /* (CLAMP and MAX evaluate their argument more than once: draw first) */
  int ex = base - g_rand_int_range (r, 0, spread + 1);

  ex = CLAMP (ex, 0, 254);

  return ((guint32) g_rand_boolean (r) << 31) | ((guint32) ex << 23)
      | (g_rand_int (r) & 0x7fffff);
}

static void
random_f32_block (GRand *r, float *v)
{
  int kind = g_rand_int_range (r, 0, 100);
  int i;

  if (kind < 40) {
    /* spread of magnitudes anywhere in the F32 range */
    int base = g_rand_int_range (r, 0, 255);
    int spread = g_rand_int_range (r, 0, 30);

    for (i = 0; i < QK; i++)
      v[i] = bitsf (rand_exp_bits (r, base, spread));
  } else if (kind < 70) {
    /* values on or next to the E2M1 grid and its midpoints: ties galore */
    int shared = g_rand_int_range (r, -127, 126);
    float x = ldexpf (1.0f, shared);

    for (i = 0; i < QK; i++) {
      float t = (float) g_rand_int_range (r, -28, 29) * 0.25f * x;
      int nudge = g_rand_int_range (r, 0, 4);

      if (nudge == 1)
        t = nextafterf (t, INFINITY);
      else if (nudge == 2)
        t = nextafterf (t, -INFINITY);
      v[i] = t;
    }
  } else if (kind < 90) {
    /* weight-like: sum of uniforms at a random scale */
    float sc = ldexpf (1.0f, g_rand_int_range (r, -20, 5));

    for (i = 0; i < QK; i++)
      v[i] = (float) (g_rand_double_range (r, -1, 1) + g_rand_double_range (r,
              -1, 1)) * sc;
  } else if (kind < 99) {
    /* arbitrary finite bit patterns, zeros and subnormals included */
    for (i = 0; i < QK; i++) {
      guint32 u = g_rand_int (r);

      if ((u & 0x7f800000) == 0x7f800000)
        u &= 0xbfffffff;
      if (g_rand_int_range (r, 0, 8) == 0)
        u &= 0x807fffff;        /* subnormal or zero */
      v[i] = bitsf (u);
    }
  } else {
    /* occasionally non-finite */
    for (i = 0; i < QK; i++)
      v[i] = (float) g_rand_double_range (r, -4, 4);
    v[g_rand_int_range (r, 0, QK)] =
        bitsf (0x7f800000 | (g_rand_int (r) & 0x807fffff));
  }
}

static void
test_random_f32_run (void)
{
  GRand *r = g_rand_new_with_seed (0x5eed);
  float *src = g_new (float, (gsize) N_RANDOM_BLOCKS * QK);
  NpuBlockMxfp4 *got = g_new (NpuBlockMxfp4, N_RANDOM_BLOCKS);
  float *y = g_new (float, (gsize) N_RANDOM_BLOCKS * QK);
  float *yg = g_new (float, (gsize) N_RANDOM_BLOCKS * QK);
  gsize i;
  int j;


  for (i = 0; i < N_RANDOM_BLOCKS; i++)
    random_f32_block (r, src + i * QK);
  /* whole buffer in one call: block stepping is part of what is tested */
  npu_mxfp4_quantize_f32 (src, got, (gsize) N_RANDOM_BLOCKS * QK);

  for (i = 0; i < N_RANDOM_BLOCKS; i++) {
    guint8 want[17];
    double dv[QK];

    for (j = 0; j < QK; j++)
      dv[j] = src[i * QK + j];
    ref_quantize_block (dv, want);
    if (memcmp (&got[i], want, 17) != 0) {
      for (j = 0; j < QK; j++)
        g_printerr ("v[%d] = %a\n", j, src[i * QK + j]);
      dump_block ("got ", (const guint8 *) &got[i]);
      dump_block ("want", want);
      g_error ("random F32 block %" G_GSIZE_FORMAT " differs", i);
    }
  }

  /* and what we wrote reads back identically the ggml way (NaN-scale
   * blocks excluded: ggml has no NaN scale) */
  npu_mxfp4_dequantize (got, y, (gsize) N_RANDOM_BLOCKS * QK);
  ggml_style_dequantize ((const guint8 *) got, yg,
      (gsize) N_RANDOM_BLOCKS * QK);
  for (i = 0; i < (gsize) N_RANDOM_BLOCKS * QK; i++) {
    if (got[i / QK].e == 0xFF)
      continue;
    g_assert_cmpfloat (y[i], ==, yg[i]);
  }

  g_free (src);
  g_free (got);
  g_free (y);
  g_free (yg);
  g_rand_free (r);
}

static guint16
random_half_bits (GRand *r, int exp_bits, int mant_bits, int kind)
{
  guint emax = (1u << exp_bits) - 1;
  guint ex, m;

  if (kind < 90) {
    /* any finite value */
    ex = g_rand_int_range (r, 0, emax);
  } else {
    ex = g_rand_int_range (r, 0, 3);    /* zero / subnormal / smallest */
  }
  m = g_rand_int (r) & ((1u << mant_bits) - 1);
  return (guint16) (((guint) g_rand_boolean (r) << 15) | (ex << mant_bits) | m);
}

static void
test_random_16bit (gconstpointer data)
{
  gboolean bf16 = GPOINTER_TO_INT (data);
  int exp_bits = bf16 ? 8 : 5, mant_bits = bf16 ? 7 : 10;
  GRand *r = g_rand_new_with_seed (bf16 ? 0xbf16 : 0xf16);
  guint16 *src = g_new (guint16, (gsize) N_RANDOM_BLOCKS * QK);
  NpuBlockMxfp4 *got = g_new (NpuBlockMxfp4, N_RANDOM_BLOCKS);
  gsize i;
  int j;

  for (i = 0; i < N_RANDOM_BLOCKS; i++) {
    int kind = g_rand_int_range (r, 0, 100);
    /* a block-wide exponent window so scales vary but stay meaningful */
    int hi = g_rand_int_range (r, 1, (1 << exp_bits) - 1);

    for (j = 0; j < QK; j++) {
      guint16 h;

      if (kind < 50) {
        int ex = hi - g_rand_int_range (r, 0, 6);

        ex = MAX (ex, 0);

        h = (guint16) (((guint) g_rand_boolean (r) << 15)
            | ((guint) ex << mant_bits)
            | (g_rand_int (r) & ((1u << mant_bits) - 1)));
      } else {
        h = random_half_bits (r, exp_bits, mant_bits, kind);
      }
      src[i * QK + j] = h;
    }
    if (kind == 99)             /* sometimes Inf or NaN */
      src[i * QK + g_rand_int_range (r, 0, QK)] = (guint16)
          ((((1u << exp_bits) - 1) << mant_bits) | (g_rand_int (r) & 0x8001));
  }

  if (bf16)
    npu_mxfp4_quantize_bf16 (src, got, (gsize) N_RANDOM_BLOCKS * QK);
  else
    npu_mxfp4_quantize_f16 (src, got, (gsize) N_RANDOM_BLOCKS * QK);

  for (i = 0; i < N_RANDOM_BLOCKS; i++) {
    guint8 want[17];
    double dv[QK];

    for (j = 0; j < QK; j++)
      dv[j] = bf16 ? ref_bf16 (src[i * QK + j]) : ref_f16 (src[i * QK + j]);
    ref_quantize_block (dv, want);
    if (memcmp (&got[i], want, 17) != 0) {
      for (j = 0; j < QK; j++)
        g_printerr ("h[%d] = %04x\n", j, src[i * QK + j]);
      dump_block ("got ", (const guint8 *) &got[i]);
      dump_block ("want", want);
      g_error ("random %s block %" G_GSIZE_FORMAT " differs",
          bf16 ? "BF16" : "F16", i);
    }
  }

  g_free (src);
  g_free (got);
  g_rand_free (r);
}

static void
test_random_q8_0_run (void)
{
  GRand *r = g_rand_new_with_seed (0x0080);
  guint8 *src = g_malloc ((gsize) N_RANDOM_BLOCKS * NPU_Q8_0_BLOCK_BYTES);
  NpuBlockMxfp4 *got = g_new (NpuBlockMxfp4, N_RANDOM_BLOCKS);
  gsize i;
  int j;


  for (i = 0; i < N_RANDOM_BLOCKS; i++) {
    guint8 *b = src + i * NPU_Q8_0_BLOCK_BYTES;
    int kind = g_rand_int_range (r, 0, 100);
    guint16 d;

    if (kind < 70)              /* typical positive scales */
      d = (guint16) (g_rand_int_range (r, 0x0400, 0x3c00));
    else if (kind < 90)         /* any finite, any sign */
      d = (guint16) (g_rand_int (r) & 0xfbff);
    else if (kind < 98)         /* zero and subnormal d */
      d = (guint16) (g_rand_int (r) & 0x83ff);
    else                        /* Inf / NaN d */
      d = (guint16) (0x7c00 | (g_rand_int (r) & 0x8201));
    memcpy (b, &d, 2);
    for (j = 0; j < QK; j++)
      b[2 + j] = (guint8) g_rand_int_range (r, 0, 256);
    if (kind % 7 == 0)          /* all-zero quants now and then */
      memset (b + 2, 0, QK);
  }

  npu_mxfp4_quantize_q8_0 (src, got, (gsize) N_RANDOM_BLOCKS * QK);

  for (i = 0; i < N_RANDOM_BLOCKS; i++) {
    const guint8 *b = src + i * NPU_Q8_0_BLOCK_BYTES;
    guint8 want[17];
    double dv[QK], d;
    guint16 dh;

    memcpy (&dh, b, 2);
    d = ref_f16 (dh);
    for (j = 0; j < QK; j++)
      dv[j] = d * (gint8) b[2 + j];
    ref_quantize_block (dv, want);
    if (memcmp (&got[i], want, 17) != 0) {
      g_printerr ("d = %04x\n", dh);
      dump_block ("got ", (const guint8 *) &got[i]);
      dump_block ("want", want);
      g_error ("random Q8_0 block %" G_GSIZE_FORMAT " differs", i);
    }
  }

  g_free (src);
  g_free (got);
  g_rand_free (r);
}

/* Every (e, code) pair decodes identically to ggml's reading of the same
 * bytes, except what ggml cannot express: e = 0xFF (NaN for us, rejected by
 * ggml's validator) and code 8 (-0 for us, +0 in ggml's int8 table). */
static void
test_ggml_equivalence (void)
{
  int e, byte, i;

  for (e = 0; e < 255; e++) {
    for (byte = 0; byte < 256; byte++) {
      NpuBlockMxfp4 b;
      float y[QK], yg[QK];

      b.e = (guint8) e;
      memset (b.qs, byte, sizeof (b.qs));
      npu_mxfp4_dequantize (&b, y, QK);
      ggml_style_dequantize ((const guint8 *) &b, yg, QK);
      for (i = 0; i < QK; i++) {
        guint code = code_at (&b, i);

        /* also against the exact double value X * P (may overflow to Inf
         * for e >= 253, in both) */
        g_assert_cmpfloat (y[i], ==, (float) (ldexp (1.0, e - 127) *
                ref_e2m1_value (code)));
        if (code == 8) {
          g_assert_cmphex (fbits (y[i]), ==, 0x80000000);
          g_assert_cmphex (fbits (yg[i]), ==, 0x00000000);
        } else {
          g_assert_cmphex (fbits (y[i]), ==, fbits (yg[i]));
        }
      }
    }
  }
}

static void
test_f16_bf16_exhaustive (void)
{
  if (g_getenv ("NPU_UNDER_VALGRIND")) {
    /* The same code runs on smaller inputs in the other cases. */
    g_test_skip ("too slow under valgrind");
    return;
  }
  test_f16_bf16_exhaustive_run ();
}

static void
test_random_f32 (void)
{
  if (g_getenv ("NPU_UNDER_VALGRIND")) {
    /* The same code runs on smaller inputs in the other cases. */
    g_test_skip ("too slow under valgrind");
    return;
  }
  test_random_f32_run ();
}

static void
test_random_q8_0 (void)
{
  if (g_getenv ("NPU_UNDER_VALGRIND")) {
    /* The same code runs on smaller inputs in the other cases. */
    g_test_skip ("too slow under valgrind");
    return;
  }
  test_random_q8_0_run ();
}

static void
test_roundtrip (void)
{
  if (g_getenv ("NPU_UNDER_VALGRIND")) {
    /* The same code runs on smaller inputs in the other cases. */
    g_test_skip ("too slow under valgrind");
    return;
  }
  test_roundtrip_run ();
}

/* ggml's dequantize_row_q8_0, checked against values written out here:
 * block 0 has d = 0.5 (f16 0x3800) and q = j - 16, block 1 d = -1.0
 * (0xbc00) and q = 127, -127, 0, 1, ... ; the scale is read unaligned. */
static void
test_q8_0_dequantize (void)
{
  guint8 raw[1 + 2 * NPU_Q8_0_BLOCK_BYTES];
  guint8 *src = raw + 1;
  float out[2 * QK];
  guint j;

  src[0] = 0x00;
  src[1] = 0x38;
  for (j = 0; j < QK; j++)
    src[2 + j] = (guint8) (gint8) ((gint) j - 16);
  src[NPU_Q8_0_BLOCK_BYTES] = 0x00;
  src[NPU_Q8_0_BLOCK_BYTES + 1] = 0xbc;
  for (j = 0; j < QK; j++)
    src[NPU_Q8_0_BLOCK_BYTES + 2 + j] = (guint8) (gint8) (j == 0 ? 127 :
        j == 1 ? -127 : (gint) j - 2);

  npu_q8_0_dequantize (src, out, 2 * QK);
  for (j = 0; j < QK; j++) {
    double want0 = 0.5 * ((double) j - 16.0);
    double want1 = -1.0 * (j == 0 ? 127.0 : j == 1 ? -127.0 : (double) j - 2);

    if (!(fabs (out[j] - want0) <= 0.0))
      g_error ("block 0 element %u: %g, expected %g", j, out[j], want0);
    if (!(fabs (out[QK + j] - want1) <= 0.0))
      g_error ("block 1 element %u: %g, expected %g", j, out[QK + j], want1);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/mxfp4/layout", test_layout);
  g_test_add_func ("/mxfp4/e2m1-codes", test_e2m1_codes);
  g_test_add_func ("/mxfp4/e8m0", test_e8m0);
  g_test_add_func ("/mxfp4/ties", test_ties);
  g_test_add_func ("/mxfp4/pow2-boundaries", test_pow2_boundaries);
  g_test_add_func ("/mxfp4/extremes", test_extremes);
  g_test_add_func ("/mxfp4/zeros", test_zeros);
  g_test_add_func ("/mxfp4/nan-inf", test_nan_inf);
  g_test_add_func ("/mxfp4/roundtrip", test_roundtrip);
  g_test_add_func ("/mxfp4/f16-bf16-exhaustive", test_f16_bf16_exhaustive);
  g_test_add_func ("/mxfp4/random-f32", test_random_f32);
  g_test_add_data_func ("/mxfp4/random-f16", GINT_TO_POINTER (FALSE),
      test_random_16bit);
  g_test_add_data_func ("/mxfp4/random-bf16", GINT_TO_POINTER (TRUE),
      test_random_16bit);
  g_test_add_func ("/mxfp4/random-q8_0", test_random_q8_0);
  g_test_add_func ("/mxfp4/ggml-equivalence", test_ggml_equivalence);
  g_test_add_func ("/mxfp4/q8_0-dequantize", test_q8_0_dequantize);

  return g_test_run ();
}
