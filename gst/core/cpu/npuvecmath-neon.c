/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: SiLU and RMS norm in AArch64 NEON intrinsics (npuvecmath.h)
 *
 * The "generic" copy of npuvecmath-kernel.c already becomes 4-lane NEON
 * code on aarch64 (GCC's vector extensions), but it keeps what suits x86:
 * the magic-number rounding, a true division per SiLU, one vector at a
 * time.  This copy takes Advanced SIMD's own forms, all in the AArch64
 * baseline (no -march flag): frintn and fcvtzs for n, fused multiply-adds
 * through the polynomial, and 1 / (1 + e^-g) as frecpe with two
 * Newton-Raphson steps (frecps), which pipeline where fdiv does not (on
 * Cortex-A53/A55 a 4-lane fdiv blocks its unit for some 10-20 cycles), two
 * vectors a step.  The exponential is npuvexp-private.h's: same reduction,
 * same degree-6 polynomial, same flush below -87.3 and +inf above 88.37.
 *
 * Error of the SiLU: e^-g within ~3 ulp, the reciprocal of 1 + e^-g
 * within ~2 ulp (frecpe's 8 bits, squared twice), two products: under
 * 8 x 2^-24 = 2^-21 relative, inside the header's 2^-20.  Where 1 + e^-g
 * is +inf, frecpe gives +0 and frecps (inf, 0) is 2 by definition, so the
 * reciprocal stays 0 and silu is -0 (g finite) or NaN (g = -inf), as the
 * formula has it.
 */
#include "npuvecmath.h"

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

/* e^x, as npuvexp-private.h's expv (x, big_inf = TRUE) */
static ALWAYS_INLINE float32x4_t
exp4 (float32x4_t x)
{
  const uint32x4_t small = vcltq_f32 (x, vdupq_n_f32 (-87.3f));
  const uint32x4_t big = vcgtq_f32 (x, vdupq_n_f32 (88.37f));
  float32x4_t n, r, p;
  int32x4_t e;

  x = vbslq_f32 (vorrq_u32 (small, big), vdupq_n_f32 (0.0f), x);
  /* round to nearest, ties to even, as the magic add does */
  n = vrndnq_f32 (vmulq_n_f32 (x, 1.44269504088896341f));
  /* ln2's high part (n times it is exact) and its low part */
  r = vfmsq_f32 (x, n, vdupq_n_f32 (0.693145751953125f));
  r = vfmsq_f32 (r, n, vdupq_n_f32 (1.42860682030941723e-6f));
  p = vfmaq_f32 (vdupq_n_f32 (1.0f / 120.0f), r, vdupq_n_f32 (1.0f / 720.0f));
  p = vfmaq_f32 (vdupq_n_f32 (1.0f / 24.0f), p, r);
  p = vfmaq_f32 (vdupq_n_f32 (1.0f / 6.0f), p, r);
  p = vfmaq_f32 (vdupq_n_f32 (0.5f), p, r);
  p = vfmaq_f32 (vdupq_n_f32 (1.0f), p, r);
  p = vfmaq_f32 (vdupq_n_f32 (1.0f), p, r);
  /* 2^n into the exponent bits; n is an integer in [-126, 127] here, and
   * 0 for a NaN x (whose p is NaN already) */
  e = vshlq_n_s32 (vaddq_s32 (vcvtq_s32_f32 (n), vdupq_n_s32 (127)), 23);
  p = vmulq_f32 (p, vreinterpretq_f32_s32 (e));
  p = vreinterpretq_f32_u32 (vbicq_u32 (vreinterpretq_u32_f32 (p), small));
  return vbslq_f32 (big, vdupq_n_f32 (INFINITY), p);
}

static ALWAYS_INLINE float32x4_t
silu_mul4 (float32x4_t g, float32x4_t u)
{
  float32x4_t d = vaddq_f32 (vdupq_n_f32 (1.0f), exp4 (vnegq_f32 (g)));
  float32x4_t q = vrecpeq_f32 (d);

  q = vmulq_f32 (q, vrecpsq_f32 (d, q));
  q = vmulq_f32 (q, vrecpsq_f32 (d, q));
  return vmulq_f32 (vmulq_f32 (g, q), u);
}

void
npu_silu_mul_neon (const float *gate, const float *up, float *out, gsize n)
{
  gsize i = 0;

  for (; i + 8 <= n; i += 8) {
    float32x4_t a = silu_mul4 (vld1q_f32 (gate + i), vld1q_f32 (up + i));
    float32x4_t b = silu_mul4 (vld1q_f32 (gate + i + 4),
        vld1q_f32 (up + i + 4));

    vst1q_f32 (out + i, a);
    vst1q_f32 (out + i + 4, b);
  }
  for (; i + 4 <= n; i += 4)
    vst1q_f32 (out + i, silu_mul4 (vld1q_f32 (gate + i), vld1q_f32 (up + i)));
  if (i < n) {
    /* the last partial vector through the same lanes, so that an element's
     * result never depends on where it sits */
    float g[4] = { 0, }, u[4] = { 0, }, o[4];

    memcpy (g, gate + i, (n - i) * sizeof (float));
    memcpy (u, up + i, (n - i) * sizeof (float));
    vst1q_f32 (o, silu_mul4 (vld1q_f32 (g), vld1q_f32 (u)));
    memcpy (out + i, o, (n - i) * sizeof (float));
  }
}

/* The squares of 4 floats into two accumulators of 2 doubles: each square
 * is exact in double, so the fused multiply-add rounds once, as an add */
static ALWAYS_INLINE void
add_squares4 (const float *x, float64x2_t * lo, float64x2_t * hi)
{
  float32x4_t v = vld1q_f32 (x);
  float64x2_t a = vcvt_f64_f32 (vget_low_f32 (v));
  float64x2_t b = vcvt_high_f64_f32 (v);

  *lo = vfmaq_f64 (*lo, a, a);
  *hi = vfmaq_f64 (*hi, b, b);
}

void
npu_rms_norm_neon (const float *x, const float *w, float *out, gsize n,
    float eps)
{
  float64x2_t s0 = vdupq_n_f64 (0.0), s1 = s0, s2 = s0, s3 = s0;
  double ss;
  float scale;
  gsize i = 0;

  /* four chains of double adds: their latency, not the loads, would
   * bound a single one */
  for (; i + 8 <= n; i += 8) {
    add_squares4 (x + i, &s0, &s1);
    add_squares4 (x + i + 4, &s2, &s3);
  }
  for (; i + 4 <= n; i += 4)
    add_squares4 (x + i, &s0, &s1);
  ss = vaddvq_f64 (vaddq_f64 (vaddq_f64 (s0, s2), vaddq_f64 (s1, s3)));
  for (; i < n; i++)
    ss += (double) x[i] * x[i];
  scale = (float) (1.0 / sqrt (ss / n + eps));

  /* (x s) w: two roundings, in this order on every level; two vectors a
   * step halve the loop's own instructions */
  for (i = 0; i + 8 <= n; i += 8) {
    float32x4_t a = vmulq_n_f32 (vld1q_f32 (x + i), scale);
    float32x4_t b = vmulq_n_f32 (vld1q_f32 (x + i + 4), scale);

    vst1q_f32 (out + i, vmulq_f32 (a, vld1q_f32 (w + i)));
    vst1q_f32 (out + i + 4, vmulq_f32 (b, vld1q_f32 (w + i + 4)));
  }
  for (; i + 4 <= n; i += 4)
    vst1q_f32 (out + i, vmulq_f32 (vmulq_n_f32 (vld1q_f32 (x + i), scale),
            vld1q_f32 (w + i)));
  for (; i < n; i++)
    out[i] = x[i] * scale * w[i];
}
