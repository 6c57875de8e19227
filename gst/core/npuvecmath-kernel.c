/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: SiLU and RMS norm in vectors (npuvecmath.h)
 *
 * Written with GCC's vector extensions, sixteen floats to a vector, and
 * built once per x86 ISA level with its -m flags (meson.build; NPU_VEC_ISA
 * names the copy): one zmm per vector with AVX-512, two ymm with AVX2,
 * four xmm otherwise or on NEON.  A last partial vector goes through the
 * same code on a padded copy, so an element's result never depends on
 * where it sits in the array.
 */
#include "npuvecmath.h"

#include <math.h>
#include <string.h>

#ifndef NPU_VEC_ISA
#error "NPU_VEC_ISA names the copy: build this file through meson.build"
#endif
#define NAME3(f, isa) f##_##isa
#define NAME2(f, isa) NAME3 (f, isa)
#define NAME(f) NAME2 (f, NPU_VEC_ISA)

typedef float v16sf __attribute__((vector_size (64)));
typedef gint32 v16si __attribute__((vector_size (64)));
typedef float v8sf __attribute__((vector_size (32)));
typedef double v8df __attribute__((vector_size (64)));

/* The wide vectors only pass between static inline functions of this
 * file, never across an ABI boundary. */
#pragma GCC diagnostic ignored "-Wpsabi"

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

static ALWAYS_INLINE v16sf
load16 (const float *p)
{
  v16sf v;

  memcpy (&v, p, sizeof (v));
  return v;
}

static ALWAYS_INLINE void
store16 (float *p, v16sf v)
{
  memcpy (p, &v, sizeof (v));
}

static ALWAYS_INLINE v16sf
select16 (v16si mask, v16sf a, v16sf b)
{
  return (v16sf) (((v16si) a & mask) | ((v16si) b & ~mask));
}

/* e^x within ~3 ulp of the exact value for -87.3 <= x <= 88.37: x = n ln2
 * + r, |r| <= ln2 / 2, e^r by its degree-6 Taylor polynomial (truncation
 * below 1.2e-7 relative), 2^n put into the exponent bits.  Below -87.3 the
 * result is flushed to 0 (it would be subnormal); above 88.37 (where n
 * would be 128) it is +inf, against a true value of at least 2.4e38.  A
 * NaN stays NaN. */
static ALWAYS_INLINE v16sf
exp16 (v16sf x)
{
  const v16sf zero = { 0, };
  const v16si small = x < zero - 87.3f, big = x > zero + 88.37f;
  const v16sf inf = zero + INFINITY;
  v16sf n, r, p;
  v16si e;

  x = select16 (small | big, zero, x);
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
  e = (__builtin_convertvector (n, v16si) + 127) << 23;
  p *= (v16sf) e;
  p = select16 (small, zero, p);
  return select16 (big, inf, p);
}

static ALWAYS_INLINE v16sf
silu_mul16 (v16sf g, v16sf u)
{
  const v16sf one = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };

  return g / (one + exp16 (-g)) * u;
}

void
NAME (npu_silu_mul) (const float *gate, const float *up, float *out, gsize n)
{
  gsize i = 0;

  for (; i + 16 <= n; i += 16)
    store16 (out + i, silu_mul16 (load16 (gate + i), load16 (up + i)));
  if (i < n) {
    float g[16] = { 0, }, u[16] = { 0, }, o[16];

    memcpy (g, gate + i, (n - i) * sizeof (float));
    memcpy (u, up + i, (n - i) * sizeof (float));
    store16 (o, silu_mul16 (load16 (g), load16 (u)));
    memcpy (out + i, o, (n - i) * sizeof (float));
  }
}

/* The squares of 16 floats added to two vectors of 8 doubles (exact
 * products; the sums round in double) */
static ALWAYS_INLINE void
add_squares16 (const float *x, v8df * lo, v8df * hi)
{
  v8sf a, b;
  v8df da, db;

  memcpy (&a, x, sizeof (a));
  memcpy (&b, x + 8, sizeof (b));
  da = __builtin_convertvector (a, v8df);
  db = __builtin_convertvector (b, v8df);
  *lo += da * da;
  *hi += db * db;
}

void
NAME (npu_rms_norm) (const float *x, const float *w, float *out, gsize n,
    float eps)
{
  v8df lo = { 0, }, hi = { 0, };
  double ss = 0.0;
  float scale;
  gsize i = 0;
  guint j;

  for (; i + 16 <= n; i += 16)
    add_squares16 (x + i, &lo, &hi);
  lo += hi;
  for (j = 0; j < 8; j++)
    ss += lo[j];
  for (; i < n; i++)
    ss += (double) x[i] * x[i];
  scale = (float) (1.0 / sqrt (ss / n + eps));

  /* (x s) w: two roundings, in this order on every level */
  for (i = 0; i + 16 <= n; i += 16)
    store16 (out + i, load16 (x + i) * scale * load16 (w + i));
  for (; i < n; i++)
    out[i] = x[i] * scale * w[i];
}
