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
#include <string.h>

#include "core/formats/npumxfp4.h"
#include "core/formats/npugguf.h"
#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__F16C__)
#include "npuhsum-avx.h"
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

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

/* An empty asm that takes @v in a vector register: the value is loaded
 * once there and used from it ("x": SSE/AVX registers, "w": AArch64's
 * SIMD registers) */
#if defined(__x86_64__) || defined(__i386__)
#define KEEP_IN_REGISTER(v) __asm__ ("" : "+x" (v))
#elif defined(__aarch64__)
#define KEEP_IN_REGISTER(v) __asm__ ("" : "+w" (v))
#else
#define KEEP_IN_REGISTER(v) (void) 0
#endif

float NAME (npu_typed_dot) (const float *w, const float *x, gsize n);
void NAME (npu_typed_f16_row) (const guint8 * src, float *dst, gsize n);
void NAME (npu_typed_dot4x3) (const float *w, gsize stride, const float *x0,
    const float *x1, const float *x2, gsize n, float *out);
void NAME (npu_typed_bf16_row) (const guint8 * src, float *dst, gsize n);
void NAME (npu_typed_dot4) (const float *w, gsize stride, const float *x,
    gsize n, float *out);
gboolean NAME (npu_typed_dot4_half) (guint32 type, const guint8 * w,
    gsize stride, const float *x, gsize n, float *out);

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

/* out[r] = sum of w[r * stride + i] * x[i] for i < n, r < 4: four weight
 * rows against one activation column, each x vector loaded once for the
 * four (a quarter of the activation traffic of four npu_typed_dot ()) */
void NAME (npu_typed_dot4) (const float *w, gsize stride, const float *x,
    gsize n, float *out)
{
  const float *w0 = w, *w1 = w + stride, *w2 = w + 2 * stride,
      *w3 = w + 3 * stride;
  vf a0 = { 0 }, a1 = { 0 }, a2 = { 0 }, a3 = { 0 };
  float t0 = 0.0f, t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
  gsize i = 0;

  for (; i + VN <= n; i += VN) {
    vf xv = load (x + i);

    a0 += load (w0 + i) * xv;
    a1 += load (w1 + i) * xv;
    a2 += load (w2 + i) * xv;
    a3 += load (w3 + i) * xv;
  }
  for (; i < n; i++) {
    t0 += w0[i] * x[i];
    t1 += w1[i] * x[i];
    t2 += w2[i] * x[i];
    t3 += w3[i] * x[i];
  }
  out[0] = hsum (a0) + t0;
  out[1] = hsum (a1) + t1;
  out[2] = hsum (a2) + t2;
  out[3] = hsum (a3) + t3;
}

#if defined(__aarch64__)
/* 8 halves at @p widened to two float vectors: fcvtl/fcvtl2 for F16,
 * ushll/ushll2 by 16 for BF16 (both exact) */
static inline void
half8_neon (gboolean bf16, const guint8 * p, float32x4_t * lo, float32x4_t * hi)
{
  const uint8x16_t b = vld1q_u8 (p);

  if (bf16) {
    const uint16x8_t u = vreinterpretq_u16_u8 (b);

    *lo = vreinterpretq_f32_u32 (vshll_n_u16 (vget_low_u16 (u), 16));
    *hi = vreinterpretq_f32_u32 (vshll_high_n_u16 (u, 16));
  } else {
    const float16x8_t h = vreinterpretq_f16_u8 (b);

    *lo = vcvt_f32_f16 (vget_low_f16 (h));
    *hi = vcvt_high_f32_f16 (h);
  }
}
#endif

/* @n little-endian halves at @src (any alignment) as floats: vcvtph2ps
 * where the level has it (exact, as the core's npu_f16_to_f32 (), which
 * converts the rest) */
void NAME (npu_typed_f16_row) (const guint8 * src, float *dst, gsize n)
{
  gsize i = 0;

#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps (dst + i, _mm512_cvtph_ps (_mm256_loadu_si256
            ((const __m256i *) (src + 2 * i))));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps (dst + i, _mm256_cvtph_ps (_mm_loadu_si128
            ((const __m128i *) (src + 2 * i))));
#elif defined(__aarch64__)
  /* fcvtl/fcvtl2: Advanced SIMD has them on every aarch64 CPU */
  for (; i + 8 <= n; i += 8) {
    float32x4_t lo, hi;

    half8_neon (FALSE, src + 2 * i, &lo, &hi);
    vst1q_f32 (dst + i, lo);
    vst1q_f32 (dst + i + 4, hi);
  }
#endif
  for (; i < n; i++)
    dst[i] = npu_f16_to_f32 ((guint16) (src[2 * i] | (src[2 * i + 1] << 8)));
}

/* @n little-endian bfloat16 at @src as floats: the 16 bits on top of a
 * float's 32 (a loop the compiler vectorises) */
void NAME (npu_typed_bf16_row) (const guint8 * src, float *dst, gsize n)
{
  gsize i;

  for (i = 0; i < n; i++) {
    guint32 u = ((guint32) src[2 * i] | ((guint32) src[2 * i + 1] << 8)) << 16;

    memcpy (dst + i, &u, 4);
  }
}

/* out[c * 4 + r] = the dot product of weight row r (r < 4, rows @stride
 * floats apart) with activation column c (c < 3: @x0, @x1, @x2): each
 * weight vector loaded once for three columns and each activation vector
 * once for four rows, twelve accumulators: seven loads to twelve FMAs,
 * so the FMAs, not the loads, set the pace */
void NAME (npu_typed_dot4x3) (const float *w, gsize stride, const float *x0,
    const float *x1, const float *x2, gsize n, float *out)
{
  vf a[12] = {{0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}};
  float t[12] = { 0 };
  gsize i = 0;
  guint r;

  for (; i + VN <= n; i += VN) {
    vf u = load (x0 + i), v = load (x1 + i), z = load (x2 + i);

    for (r = 0; r < 4; r++) {
      vf wr = load (w + r * stride + i);

      /* in a register: else the compiler folds the load into each of
       * the three FMAs, three loads where one does */
      KEEP_IN_REGISTER (wr);
      a[r] += wr * u;
      a[4 + r] += wr * v;
      a[8 + r] += wr * z;
    }
  }
  for (; i < n; i++)
    for (r = 0; r < 4; r++) {
      t[r] += w[r * stride + i] * x0[i];
      t[4 + r] += w[r * stride + i] * x1[i];
      t[8 + r] += w[r * stride + i] * x2[i];
    }
  for (r = 0; r < 12; r++)
    out[r] = hsum (a[r]) + t[r];
}

#if defined(__F16C__)
#define HW 8
#define HLOAD(p) (bf16 ? _mm256_castsi256_ps (_mm256_slli_epi32 \
    (_mm256_cvtepu16_epi32 (_mm_loadu_si128 ((const __m128i *) (p))), 16)) : \
    _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (p))))
/* The sum of the first *@done halves of row @p times x[i], *@done the
 * largest multiple of 8 <= @n.  On x86, four accumulators of 8 lanes. */
static inline float
dot_half_row (gboolean bf16, const guint8 * p, const float *x, gsize n,
    gsize * done)
{
  __m256 a[4] = { _mm256_setzero_ps (), _mm256_setzero_ps (),
    _mm256_setzero_ps (), _mm256_setzero_ps ()
  };
  gsize i;
  guint c;

  for (i = 0; i + 4 * HW <= n; i += 4 * HW)
    for (c = 0; c < 4; c++)
      a[c] = _mm256_fmadd_ps (HLOAD (p + 2 * (i + c * HW)),
          _mm256_loadu_ps (x + i + c * HW), a[c]);
  for (; i + HW <= n; i += HW)
    a[0] = _mm256_fmadd_ps (HLOAD (p + 2 * i), _mm256_loadu_ps (x + i), a[0]);
  *done = i;
  return npu_hsum_m256 (_mm256_add_ps (_mm256_add_ps (a[0], a[1]),
          _mm256_add_ps (a[2], a[3])));
}

#undef HLOAD
#undef HW
#elif defined(__aarch64__)
/* four accumulators of 4 lanes (fcvtl is one operation a vector) */
static inline float
dot_half_row (gboolean bf16, const guint8 * p, const float *x, gsize n,
    gsize * done)
{
  float32x4_t a[4] = { vdupq_n_f32 (0.0f), vdupq_n_f32 (0.0f),
    vdupq_n_f32 (0.0f), vdupq_n_f32 (0.0f)
  };
  float32x4_t lo, hi;
  gsize i = 0;

  for (; i + 16 <= n; i += 16) {
    half8_neon (bf16, p + 2 * i, &lo, &hi);
    a[0] = vfmaq_f32 (a[0], lo, vld1q_f32 (x + i));
    a[1] = vfmaq_f32 (a[1], hi, vld1q_f32 (x + i + 4));
    half8_neon (bf16, p + 2 * i + 16, &lo, &hi);
    a[2] = vfmaq_f32 (a[2], lo, vld1q_f32 (x + i + 8));
    a[3] = vfmaq_f32 (a[3], hi, vld1q_f32 (x + i + 12));
  }
  for (; i + 8 <= n; i += 8) {
    half8_neon (bf16, p + 2 * i, &lo, &hi);
    a[0] = vfmaq_f32 (a[0], lo, vld1q_f32 (x + i));
    a[1] = vfmaq_f32 (a[1], hi, vld1q_f32 (x + i + 4));
  }
  *done = i;
  return vaddvq_f32 (vaddq_f32 (vaddq_f32 (a[0], a[1]),
          vaddq_f32 (a[2], a[3])));
}
#endif

/* out[r] = sum of row r's @n halves (F16, or BF16 with @type BF16) times
 * x[i], r < 4, rows @stride bytes apart: each vector of halves widened in
 * a register (vcvtph2ps, or a shift for BF16: exact) and multiplied at
 * once, no trip through a decoded row (a one-token product reads each
 * weight once, so the store and load of a decode buffer were half its
 * work).  One row at a time, four accumulators of 8 lanes, on the
 * AVX-512 level too: measured on the F16 1.1 B llama, one thread, an AMD
 * EPYC (Zen 4), 7.7 tok/s with the four rows interleaved in 16 lanes
 * (four streams, one accumulator each), 8.5 a row at a time in 16 lanes
 * with two accumulators, 7.7 with four, 8.6-9.0 in 8 lanes with four or
 * eight (AVX2 alike): the 512-bit vcvtph2ps is two operations there, and
 * a single stream is what the prefetchers follow best.  On aarch64, fcvtl
 * (F16) or a shift (BF16) and fmla, 4 lanes.  FALSE where the level has
 * no such copy (the caller decodes). */
gboolean NAME (npu_typed_dot4_half) (guint32 type, const guint8 * w,
    gsize stride, const float *x, gsize n, float *out)
{
#if defined(__F16C__) || defined(__aarch64__)
  gboolean bf16 = type == NPU_GGML_TYPE_BF16;
  float t[4] = { 0, 0, 0, 0 }, s[4];
  gsize i = 0;
  guint r;

  if (type != NPU_GGML_TYPE_F16 && !bf16)
    return FALSE;
  for (r = 0; r < 4; r++)
    s[r] = dot_half_row (bf16, w + r * stride, x, n, &i);
  for (; i < n; i++)
    for (r = 0; r < 4; r++) {
      const guint8 *p = w + r * stride + 2 * i;
      guint16 h = p[0] | (p[1] << 8);
      guint32 u = (guint32) h << 16;
      float v;

      if (bf16)
        memcpy (&v, &u, 4);
      else
        v = npu_f16_to_f32 (h);
      t[r] += v * x[i];
    }
  for (r = 0; r < 4; r++)
    out[r] = s[r] + t[r];
  return TRUE;
#else
  return FALSE;
#endif
}
