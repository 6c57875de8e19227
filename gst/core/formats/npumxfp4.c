/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 codec (OCP Microscaling Formats v1.0)
 *
 * See npumxfp4.h for the format and the edge-case rules, docs/mxfp4.md for
 * the reasoning.  Everything here is exact integer/bit work plus float
 * multiplications by powers of two, which are exact in the range used, so
 * results do not depend on compiler flags or the FPU rounding mode.
 */
#include "npumxfp4.h"

#include <string.h>

#define QK NPU_MXFP4_BLOCK_SIZE

static inline guint32
f32_bits (float f)
{
  guint32 u;

  memcpy (&u, &f, sizeof (u));
  return u;
}

static inline float
bits_f32 (guint32 u)
{
  float f;

  memcpy (&f, &u, sizeof (f));
  return f;
}

/* Values of the 16 E2M1 codes: sign bit 3, then magnitude index
 * 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6.  Code 8 is a true -0 (the spec's E2M1
 * has signed zero). */
static const float e2m1_values[16] = {
  0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

/* Round to the nearest E2M1 code, ties to even, saturating.
 *
 * The magnitude index is the number of decision points |p| lies above.  The
 * decision points are the midpoints 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5; at a
 * midpoint the even neighbour (mantissa bit 0: indices 0, 2, 4, 6) wins, so
 * the test is '>' where the even code lies below the midpoint and '>=' where
 * it lies above.  Everything above 5 counts to 7 (= 6.0): saturation comes
 * for free, Inf included.  NaN fails every comparison and gives a signed
 * zero; blocks never get here with NaN.
 *
 * Seven compares and adds with no branch, so the block loop vectorises. */
static inline guint8
e2m1_encode (float p)
{
  guint32 u = f32_bits (p);
  float a = bits_f32 (u & 0x7fffffffu);
  guint32 m;

  m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f)
      + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);

  return (guint8) (m | ((u >> 28) & 0x8u));
}

/* One block of 32 F32 values. */
static inline void
quantize_block (const float *x, NpuBlockMxfp4 * b)
{
  guint32 amax = 0;
  guint32 biased;
  guint32 e;
  float inv_scale;
  guint8 codes[QK];
  guint i;

  /* Max of |V| on the bit patterns: for non-negative IEEE floats the integer
   * order is the numeric order, Inf is 0x7f800000 and every NaN is above it,
   * so one integer max finds the block max and spots Inf/NaN together. */
  for (i = 0; i < QK; i++) {
    guint32 a = f32_bits (x[i]) & 0x7fffffffu;
    amax = a > amax ? a : amax;
  }

  if (G_UNLIKELY (amax >= 0x7f800000u)) {
    /* NaN or Inf: NaN scale, the whole block is NaN.  qs zeroed so the
     * bytes written are deterministic. */
    b->e = NPU_E8M0_NAN;
    memset (b->qs, 0, sizeof (b->qs));
    return;
  }

  /* For a normal max with biased exponent E, floor(log2(max)) = E - 127
   * exactly, so shared_exp = E - 129 and the E8M0 code is E - 2.  Zero and
   * subnormal maxima (E = 0) have floor(log2) <= -127, which like E = 1
   * clamps to shared_exp = -127, code 0.  The upper clamp (127, code 254)
   * is out of reach: E <= 254 gives code <= 252. */
  biased = amax >> 23;
  e = biased > 2 ? biased - 2 : 0;
  b->e = (guint8) e;

  /* 1/X = 2^(127 - e), a normal float for every e in [0, 252].  V * 2^k is
   * exact unless the product underflows, and then it is far below the first
   * decision point (0.25), so P = V/X is exact wherever it matters. */
  inv_scale = bits_f32 ((254u - e) << 23);

  for (i = 0; i < QK; i++)
    codes[i] = e2m1_encode (x[i] * inv_scale);

  for (i = 0; i < QK / 2; i++)
    b->qs[i] = (guint8) (codes[i] | (codes[i + QK / 2] << 4));
}

void
npu_mxfp4_quantize_f32 (const float *src, NpuBlockMxfp4 * dst, gsize n)
{
  gsize i, nb;

  g_return_if_fail (n % QK == 0);
  g_return_if_fail (n == 0 || (src != NULL && dst != NULL));

  nb = n / QK;
  for (i = 0; i < nb; i++)
    quantize_block (src + i * QK, dst + i);
}

float
npu_f16_to_f32 (guint16 h)
{
  guint32 sign = (guint32) (h & 0x8000u) << 16;
  guint32 em = h & 0x7fffu;
  float mag;

  if (G_UNLIKELY (em >= 0x7c00u)) {
    /* Inf, or NaN with its payload moved to the top of the F32 mantissa */
    return bits_f32 (sign | 0x7f800000u | ((em & 0x3ffu) << 13));
  }

  /* Put the half's exponent and mantissa fields at the F32 positions and
   * rebias by multiplying by 2^(127-15).  Normal halves become normal floats
   * 2^(E-15) * 1.m; subnormal halves land as F32 subnormals m * 2^-136 and
   * come out as m * 2^-24.  Both products are exact. */
  mag = bits_f32 (em << 13) * 0x1p112f;

  return bits_f32 (f32_bits (mag) | sign);
}

float
npu_bf16_to_f32 (guint16 h)
{
  /* BF16 is the top half of an F32 */
  return bits_f32 ((guint32) h << 16);
}

/* Quantises @n 16-bit floats, a block at a time, each widened to F32 by
 * @widen (exact for F16 and BF16) and then quantised as F32 is.  Inlined
 * into its two callers, so @widen is a direct call. */
static inline void
quantize_16bit (const guint16 * src, float (*widen) (guint16),
    NpuBlockMxfp4 * dst, gsize n)
{
  gsize i, nb = n / QK;
  float buf[QK];
  guint j;

  for (i = 0; i < nb; i++) {
    for (j = 0; j < QK; j++)
      buf[j] = widen (src[i * QK + j]);
    quantize_block (buf, dst + i);
  }
}

void
npu_mxfp4_quantize_f16 (const guint16 * src, NpuBlockMxfp4 * dst, gsize n)
{
  g_return_if_fail (n % QK == 0);
  g_return_if_fail (n == 0 || (src != NULL && dst != NULL));

  quantize_16bit (src, npu_f16_to_f32, dst, n);
}

void
npu_mxfp4_quantize_bf16 (const guint16 * src, NpuBlockMxfp4 * dst, gsize n)
{
  g_return_if_fail (n % QK == 0);
  g_return_if_fail (n == 0 || (src != NULL && dst != NULL));

  quantize_16bit (src, npu_bf16_to_f32, dst, n);
}

void
npu_q8_0_dequantize (const void *src, float *dst, gsize n)
{
  const guint8 *p = src;
  gsize i, nb;
  guint j;

  g_return_if_fail (n % QK == 0);
  g_return_if_fail (n == 0 || (src != NULL && dst != NULL));

  nb = n / QK;
  for (i = 0; i < nb; i++, p += NPU_Q8_0_BLOCK_BYTES) {
    guint16 dh;
    float d;

    /* block_q8_0 is 34 bytes, so d is not 4-byte aligned in an array of
     * blocks; memcpy reads it in host order like ggml's struct access. */
    memcpy (&dh, p, sizeof (dh));
    d = npu_f16_to_f32 (dh);

    /* ggml dequantises as qs[j] * d in F32.  An 11-bit by 8-bit product
     * always fits F32's 24 bits, so this is the exact value too. */
    for (j = 0; j < QK; j++)
      dst[i * QK + j] = (float) (gint8) p[2 + j] * d;
  }
}

void
npu_mxfp4_quantize_q8_0 (const void *src, NpuBlockMxfp4 * dst, gsize n)
{
  const guint8 *p = src;
  gsize i, nb;
  float buf[QK];

  g_return_if_fail (n % QK == 0);
  g_return_if_fail (n == 0 || (src != NULL && dst != NULL));

  nb = n / QK;
  for (i = 0; i < nb; i++, p += NPU_Q8_0_BLOCK_BYTES) {
    npu_q8_0_dequantize (p, buf, QK);
    quantize_block (buf, dst + i);
  }
}

float
npu_e8m0_to_float (guint8 e)
{
  if (G_UNLIKELY (e == NPU_E8M0_NAN))
    return bits_f32 (0x7fc00000u);
  /* 2^-127 is below F32's normal range: the subnormal with the top
   * mantissa bit set. */
  if (e == 0)
    return bits_f32 (0x00400000u);
  return bits_f32 ((guint32) e << 23);
}

float
npu_e2m1_to_float (guint8 code)
{
  return e2m1_values[code & 0xf];
}

guint8
npu_float_to_e2m1 (float v)
{
  return e2m1_encode (v);
}

void
npu_mxfp4_dequantize (const NpuBlockMxfp4 * src, float *dst, gsize n)
{
  gsize i, nb;
  guint j;

  g_return_if_fail (n % QK == 0);
  g_return_if_fail (n == 0 || (src != NULL && dst != NULL));

  nb = n / QK;
  for (i = 0; i < nb; i++) {
    const NpuBlockMxfp4 *b = src + i;
    float *y = dst + i * QK;
    /* X * P: exact for every code and e <= 252; for e >= 253 the large
     * codes overflow to +-Inf, as they do in ggml.  A NaN scale makes every
     * product NaN, which is the spec's "whole block is NaN". */
    float x = npu_e8m0_to_float (b->e);

    for (j = 0; j < QK / 2; j++) {
      y[j] = x * e2m1_values[b->qs[j] & 0xf];
      y[j + QK / 2] = x * e2m1_values[b->qs[j] >> 4];
    }
  }
}

void
npu_mxfp4_block_from_gpt_oss (const guint8 * codes, guint8 scale,
    NpuBlockMxfp4 * dst)
{
  guint j;

  dst->e = scale;
  for (j = 0; j < 16; j++) {
    guint lo = (j & 1) ? codes[j / 2] >> 4 : codes[j / 2] & 0x0F;
    guint hi = (j & 1) ? codes[8 + j / 2] >> 4 : codes[8 + j / 2] & 0x0F;

    dst->qs[j] = lo | hi << 4;
  }
}
