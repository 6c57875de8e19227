/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the dot products of npu_matmul_typed() (npumatmul-typed.c)
 *
 * Built once per level with that level's -m flags (meson.build;
 * NPU_TYPED_ISA names the copy), a vector type of the level's width written
 * with GCC's vector extensions: vfmadd on AVX2 and AVX-512 (-mfma), fmla
 * on aarch64, mul and add in two steps on baseline x86.  Four accumulators
 * keep the FMA pipes busy; they and the tail are summed at the end, so the
 * result is a sum of the same products in another order than the scalar
 * path's: within the inner-product bound gamma_n sum |w x| of it.
 */
#include <glib.h>

#ifndef NPU_TYPED_ISA
#error "NPU_TYPED_ISA names the copy: build this file through meson.build"
#endif

#define NAME3(f, isa) f##_##isa
#define NAME2(f, isa) NAME3 (f, isa)
#define NAME(f) NAME2 (f, NPU_TYPED_ISA)

#if defined(__AVX512F__)
#define VB 64
#elif defined(__AVX2__)
#define VB 32
#else
#define VB 16
#endif
#define VN (VB / 4)

typedef float vf __attribute__((vector_size (VB), aligned (4)));

float NAME (npu_typed_dot) (const float *w, const float *x, gsize n);

static inline vf
load (const float *p)
{
  vf v;

  __builtin_memcpy (&v, p, sizeof (v));
  return v;
}

static inline float
hsum (vf v)
{
  float s = 0.0f;
  guint i;

  for (i = 0; i < VN; i++)
    s += v[i];
  return s;
}

/* sum of w[i] * x[i] for i < n */
float NAME (npu_typed_dot) (const float *w, const float *x, gsize n)
{
  vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
  float tail = 0.0f;
  gsize i = 0;

  for (; i + 4 * VN <= n; i += 4 * VN) {
    a0 += load (w + i) * load (x + i);
    a1 += load (w + i + VN) * load (x + i + VN);
    a2 += load (w + i + 2 * VN) * load (x + i + 2 * VN);
    a3 += load (w + i + 3 * VN) * load (x + i + 3 * VN);
  }
  for (; i + VN <= n; i += VN)
    a0 += load (w + i) * load (x + i);
  for (; i < n; i++)
    tail += w[i] * x[i];
  return hsum ((a0 + a1) + (a2 + a3)) + tail;
}
