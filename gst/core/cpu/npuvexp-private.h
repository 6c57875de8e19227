/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a vector exponential, and the loads and stores around it, for
 * one vector type of GCC's vector extensions
 *
 * The attention kernel (softmax numerators, sixteen floats a vector) and
 * the SiLU of npuvecmath-kernel.c (a vector the width of the level's
 * registers) use the same exponential; this header writes it once.  It is
 * a template: the file that includes it names the types and the names
 * first, and may include it once, e.g.
 *
 *   #define NPU_VEXP_F32 v16sf          (a vector of floats)
 *   #define NPU_VEXP_I32 v16si          (as many gint32)
 *   #define NPU_VEXP_NAME(f) f##16      (load16, store16, select16, exp16)
 *   #include "npuvexp-private.h"
 *
 * All functions are static and always inlined: the vectors never cross an
 * ABI boundary.
 */
#ifdef __NPU_VEXP_PRIVATE_H__
#error "npuvexp-private.h defines static functions: include it once a file"
#endif
#define __NPU_VEXP_PRIVATE_H__

#if !defined(NPU_VEXP_F32) || !defined(NPU_VEXP_I32) || !defined(NPU_VEXP_NAME)
#error "define NPU_VEXP_F32, NPU_VEXP_I32 and NPU_VEXP_NAME before including"
#endif

#include <glib.h>
#include <math.h>
#include <string.h>

#define NPU_VEXP_INLINE inline __attribute__ ((always_inline))

static NPU_VEXP_INLINE NPU_VEXP_F32
NPU_VEXP_NAME (load) (const float *p)
{
  NPU_VEXP_F32 v;

  memcpy (&v, p, sizeof (v));
  return v;
}

static NPU_VEXP_INLINE void
NPU_VEXP_NAME (store) (float *p, NPU_VEXP_F32 v)
{
  memcpy (p, &v, sizeof (v));
}

/* a where @mask is all ones, b where it is zero */
static NPU_VEXP_INLINE NPU_VEXP_F32
NPU_VEXP_NAME (select) (NPU_VEXP_I32 mask, NPU_VEXP_F32 a, NPU_VEXP_F32 b)
{
  return (NPU_VEXP_F32) (((NPU_VEXP_I32) a & mask) | ((NPU_VEXP_I32) b &
          ~mask));
}

/* e^x within ~3 ulp of the exact value for -87.3 <= x <= 88.37: x = n ln2
 * + r, |r| <= ln2 / 2, e^r by its degree-6 Taylor polynomial (truncation
 * below 1.2e-7 relative), 2^n put into the exponent bits.  Below -87.3
 * the result is flushed to 0 (it would be subnormal; for a softmax, a
 * weight of less than 2^-126 beside the maximum's 1).  A NaN stays NaN.
 * Above 88.37 (where n would be 128) the result is +inf when @big_inf
 * (SiLU's e^-g, against a true value of at least 2.4e38); without it,
 * for callers whose x is never above 0 (scores minus their maximum), that
 * range is left out and the compare costs nothing. */
static NPU_VEXP_INLINE NPU_VEXP_F32
NPU_VEXP_NAME (exp) (NPU_VEXP_F32 x, const gboolean big_inf)
{
  const NPU_VEXP_F32 zero = { 0, };
  /* all ones where x < -87.3 (never for NaN) */
  const NPU_VEXP_I32 small = x < zero - 87.3f;
  const NPU_VEXP_I32 big = big_inf ? x > zero + 88.37f : (NPU_VEXP_I32) zero;
  NPU_VEXP_F32 n, r, p;
  NPU_VEXP_I32 e;

  x = NPU_VEXP_NAME (select) (small | big, zero, x);
  n = x * 1.44269504088896341f;
  /* round to nearest: the magic add works for |n| < 2^22 */
  n = (n + 12582912.0f) - 12582912.0f;
  r = x - n * 0.693145751953125f;       /* ln2's high part, exact product */
  r = r - n * 1.42860682030941723e-6f;  /* and its low part */
  p = r * (1.0f / 720.0f) + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  e = (__builtin_convertvector (n, NPU_VEXP_I32) + 127) << 23;
  p *= (NPU_VEXP_F32) e;
  p = (NPU_VEXP_F32) ((NPU_VEXP_I32) p & ~small);
  if (big_inf)
    p = NPU_VEXP_NAME (select) (big, zero + INFINITY, p);
  return p;
}
