/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: SiLU and RMS norm in vectors (npuvecmath.h)
 *
 * Written with GCC's vector extensions and built once per x86 ISA level
 * with its -m flags (meson.build; NPU_VEC_ISA names the copy), a vector
 * the width of the level's registers: 16 floats with AVX-512, 8 with
 * AVX2, 4 otherwise or on NEON.  (Sixteen floats on AVX2, as the
 * attention kernel has them, made GCC 12 compare the lanes one by one:
 * the SiLU ran at half the speed of a scalar expf loop.)  A last partial
 * vector goes through the same code on a padded copy, so an element's
 * result never depends on where it sits in the array.
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

#if defined(__AVX512F__)
#define VB 64
#elif defined(__AVX2__)
#define VB 32
#else
#define VB 16
#endif
/* floats a vector */
#define VN (VB / 4)

typedef float v_f32 __attribute__((vector_size (VB)));
typedef gint32 v_i32 __attribute__((vector_size (VB)));
/* half a vector's floats, widened to a vector of doubles */
typedef float v_f32h __attribute__((vector_size (VB / 2)));
typedef double v_f64 __attribute__((vector_size (VB)));

/* The wide vectors only pass between static inline functions of this
 * file, never across an ABI boundary. */
#pragma GCC diagnostic ignored "-Wpsabi"

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

/* loadv(), storev(), selectv() and expv() (e^x within ~3 ulp for
 * -87.3 <= x <= 88.37, 0 below, +inf above, NaN stays NaN) */
#define NPU_VEXP_F32 v_f32
#define NPU_VEXP_I32 v_i32
#define NPU_VEXP_NAME(f) f##v
#include "npuvexp-private.h"

static ALWAYS_INLINE v_f32
silu_mulv (v_f32 g, v_f32 u)
{
  const v_f32 zero = { 0, };

  return g / ((zero + 1.0f) + expv (-g, TRUE)) * u;
}

void
NAME (npu_silu_mul) (const float *gate, const float *up, float *out, gsize n)
{
  gsize i = 0;

  for (; i + VN <= n; i += VN)
    storev (out + i, silu_mulv (loadv (gate + i), loadv (up + i)));
  if (i < n) {
    float g[VN] = { 0, }, u[VN] = { 0, }, o[VN];

    memcpy (g, gate + i, (n - i) * sizeof (float));
    memcpy (u, up + i, (n - i) * sizeof (float));
    storev (o, silu_mulv (loadv (g), loadv (u)));
    memcpy (out + i, o, (n - i) * sizeof (float));
  }
}

static ALWAYS_INLINE v_f64
zero_f64 (void)
{
  v_f64 z = { 0, };

  return z;
}

/* The squares of VN floats added to two vectors of VN / 2 doubles (exact
 * products; the sums round in double) */
static ALWAYS_INLINE void
add_squares (const float *x, v_f64 * lo, v_f64 * hi)
{
  v_f32h a, b;
  v_f64 da, db;

  memcpy (&a, x, sizeof (a));
  memcpy (&b, x + VN / 2, sizeof (b));
  da = __builtin_convertvector (a, v_f64);
  db = __builtin_convertvector (b, v_f64);
  *lo += da * da;
  *hi += db * db;
}

void
NAME (npu_rms_norm) (const float *x, const float *w, float *out, gsize n,
    float eps)
{
  v_f64 lo = zero_f64 (), hi = zero_f64 ();
  double ss = 0.0;
  float scale;
  gsize i = 0;
  guint j;

  for (; i + VN <= n; i += VN)
    add_squares (x + i, &lo, &hi);
  lo += hi;
  for (j = 0; j < VN / 2; j++)
    ss += lo[j];
  for (; i < n; i++)
    ss += (double) x[i] * x[i];
  scale = (float) (1.0 / sqrt (ss / n + eps));

  /* (x s) w: two roundings, in this order on every level */
  for (i = 0; i + VN <= n; i += VN)
    storev (out + i, loadv (x + i) * scale * loadv (w + i));
  for (; i < n; i++)
    out[i] = x[i] * scale * w[i];
}
