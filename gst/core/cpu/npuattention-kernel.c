/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: softmax attention of the query rows that share a key/value head
 *
 * Written with GCC's vector extensions, sixteen floats to a vector, and
 * built once per x86 ISA level with its -m flags (meson.build; NPU_ATTN_ISA
 * names the copy, npuattention.c picks one): one zmm per vector with
 * AVX-512, two ymm with AVX2, four xmm otherwise or on NEON.
 * Auto-vectorising the plain loops gave scalar code for the dot products
 * and kept the output in memory.
 *
 * With grouped-query attention several query heads read the same key and
 * value rows.  Taking them one by one read every row once per query head:
 * at a depth of 2048 tokens the 1B llama's 4 query heads per KV head made
 * the cache reads ~4x its size, and decode fell from 40 to 18 tokens/s
 * (2 threads).  Here up to four queries go through each row while it is in
 * registers, and the softmax's exponentials are vectorised too.
 *
 * With AVX-512, heads of up to 64 values (a multiple of 16; the common 64)
 * take one pass over the rows, sixteen at a time (attend_online()): the
 * block's sixteen scores of a query come out as one vector (the row
 * products folded together pairwise, 15 two-vector shuffles instead of a
 * horizontal sum per row), the softmax runs online (the running maximum
 * rescales the sums when it grows), and the block's value rows are added
 * while its key rows are still in cache.  Other heads and levels take two passes
 * (scores, then values).
 *
 * Rows stored in F16 or Q8_0 (a KV cache of half or about a quarter the
 * bytes) are widened to F32 sixteen values at a time as they are loaded
 * (F16 by the CPU's conversion where the level has one): the cache is
 * never copied wider.  Every function below takes the type as a constant,
 * so each type gets its own loops.
 */
#include "npuattention-private.h"

#include <math.h>
#include <string.h>
#if defined(__F16C__) || defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
/* The neon copy (meson.build: NPU_ATTN_NEON): the loads widened by the
 * AArch64 baseline's own instructions (fcvtl from F16, sxtl from int8)
 * and the horizontal sums by faddp, where the generic copy widens F16
 * with integer arithmetic and sums by shuffles of the 16-float vector */
#if defined(NPU_ATTN_NEON)
#if !defined(__aarch64__)
#error "NPU_ATTN_NEON is the aarch64 copy"
#endif
#include <arm_neon.h>
#endif

#ifndef NPU_ATTN_ISA
#error "NPU_ATTN_ISA names the copy: build this file through meson.build"
#endif
#define KERNEL_NAME2(isa) npu_attention_rows_##isa
#define KERNEL_NAME(isa) KERNEL_NAME2 (isa)

typedef float v16sf __attribute__((vector_size (64)));
typedef gint32 v16si __attribute__((vector_size (64)));

/* Lane swaps of the horizontal reductions: each brings the upper half of
 * the lanes still live onto the lower half. __builtin_shufflevector (GCC
 * 12 and clang) rather than GCC's own __builtin_shuffle, so that clang
 * builds this file too. */
#define HALVE8(v) __builtin_shufflevector (v, v, 8, 9, 10, 11, 12, 13, 14, \
      15, 0, 1, 2, 3, 4, 5, 6, 7)
#define HALVE4(v) __builtin_shufflevector (v, v, 4, 5, 6, 7, 0, 1, 2, 3, 8, \
      9, 10, 11, 12, 13, 14, 15)
#define HALVE2(v) __builtin_shufflevector (v, v, 2, 3, 0, 1, 4, 5, 6, 7, 8, \
      9, 10, 11, 12, 13, 14, 15)
#define HALVE1(v) __builtin_shufflevector (v, v, 1, 0, 2, 3, 4, 5, 6, 7, 8, \
      9, 10, 11, 12, 13, 14, 15)
typedef guint16 v16hu __attribute__((vector_size (32)));
typedef gint8 v16qi __attribute__((vector_size (16)));

/* The 64-byte vectors only pass between static inline functions of this
 * file, never across an ABI boundary, so GCC's note that their calling
 * convention differs with and without AVX-512 does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

/* load16(), store16() and exp16() (e^x for the softmax's
 * scores minus their maximum, x <= 0; within ~3 ulp, flushed to 0 below
 * -87.3, NaN stays NaN) */
#define NPU_VEXP_F32 v16sf
#define NPU_VEXP_I32 v16si
#define NPU_VEXP_NAME(f) f##16
#include "npuvexp-private.h"

/* Queries per pass over the rows: 4 x 4 value accumulators of a 64-wide
 * column chunk are 16 zmm, half the AVX-512 register file. */
#define MAX_NQ 4

/* Rows ahead to prefetch: four 16-row blocks, 8 KiB of F16 keys and as
 * much of values for a head of 64.  One block ahead (the distance before)
 * left the loads of keys and values waiting on memory for a quarter of
 * the kernel's cycles at depth 2048 (perf, AVX-512): a block computes in
 * about the time one memory access takes. */
#define PF_AHEAD 64

/* The two passes (AVX2 and below) prefetch keys 8 rows ahead and leave the
 * values to the hardware: prefetching both 64 rows ahead there measured
 * slower at AVX2 (bench-attention, one run: F16 50.7 against 46.6 ms,
 * Q8_0 74.9 against 59.3), a kernel bound by its arithmetic. */
#define PF_ROWS 8

/* Rows of a one-pass block, and of a key tile (NPU_KV_TILE_ROWS) */
#define BLOCK 16
G_STATIC_ASSERT (BLOCK == NPU_KV_TILE_ROWS);

/* Bytes of @n values stored as @T (npu_kv_row_bytes(), inlined) */
static ALWAYS_INLINE gsize
kv_bytes (gsize n, const NpuKvType T)
{
  if (T == NPU_KV_F16)
    return n * 2;
  if (T == NPU_KV_Q8_0)
    return n / NPU_KV_Q8_0_BLOCK * NPU_KV_Q8_0_BYTES;
  return n * 4;
}

static ALWAYS_INLINE const guint8 *
kv_row (const void *base, gsize stride, gsize r, const NpuKvType T)
{
  return (const guint8 *) base + r * kv_bytes (stride, T);
}

static ALWAYS_INLINE void
prefetch_row (const guint8 * p, guint n, const NpuKvType T)
{
  gsize c, b = kv_bytes (n, T);

  for (c = 0; c < b; c += 64)
    __builtin_prefetch (p + c);
}

/* @n bytes from @p, a line at a time */
static ALWAYS_INLINE void
prefetch_run (const guint8 * p, gsize n)
{
  const guintptr p0 = (guintptr) p & ~(guintptr) 63;
  const gsize len = (guintptr) p + n - p0;
  gsize b;

  for (b = 0; b < len; b += 64)
    __builtin_prefetch ((const void *) (p0 + b));
}

/* Rows [r, r + n) of a span's keys, and of its values if @values: one run
 * of cache lines where the rows are contiguous (npullm's head-major cache:
 * stride = hd), else row by row */
static ALWAYS_INLINE void
prefetch_rows (const NpuAttnSpan * sp, guint r, guint n, guint hd,
    const gboolean values, const NpuKvType T)
{
  const gsize rb = kv_bytes (sp->stride, T);
  const guint8 *k = (const guint8 *) sp->k + r * rb;
  const guint8 *v = (const guint8 *) sp->v + r * rb;
  guint j;

  if (sp->stride == hd) {
    const guintptr k0 = (guintptr) k & ~(guintptr) 63;
    const guintptr v0 = (guintptr) v & ~(guintptr) 63;
    const gsize len = (guintptr) k + n * rb - k0;
    gsize b;

    for (b = 0; b < len; b += 64) {
      __builtin_prefetch ((const void *) (k0 + b));
      if (values)
        __builtin_prefetch ((const void *) (v0 + b));
    }
    return;
  }
  for (j = 0; j < n; j++) {
    prefetch_row (k + j * rb, hd, T);
    if (values)
      prefetch_row (v + j * rb, hd, T);
  }
}

/* Lines [i n / steps, (i + 1) n / steps) of the @n lines from @p (none
 * if @p is NULL): a run prefetched a share at a time, one share a step of
 * the loop that reads the current block, instead of all at once */
static ALWAYS_INLINE void
prefetch_share (const guint8 * p, gsize n, guint i, const guint steps)
{
  gsize l;

  if (p == NULL)
    return;
  for (l = i * n / steps; l < (i + 1) * n / steps; l++)
    __builtin_prefetch (p + 64 * l);
}

#if defined(NPU_ATTN_NEON)
/* Four 4-float quarters as one 16-float vector, and back (the NEON
 * paths; GCC splits a 16-float vector into four q-register parts, so
 * these are moves between those parts, where it keeps them in registers) */
static ALWAYS_INLINE v16sf
v16sf_from_quarters (float32x4_t a, float32x4_t b, float32x4_t c, float32x4_t d)
{
  v16sf r;

  memcpy (&r, &a, 16);
  memcpy ((guint8 *) & r + 16, &b, 16);
  memcpy ((guint8 *) & r + 32, &c, 16);
  memcpy ((guint8 *) & r + 48, &d, 16);
  return r;
}

static ALWAYS_INLINE float32x4_t
v16sf_quarter (v16sf v, const guint i)
{
  float32x4_t r;

  memcpy (&r, (const guint8 *) &v + 16 * i, 16);
  return r;
}
#endif

#if defined(__AVX__)
/* Two 8-float halves as one 16-float vector (AVX2 and F16C paths) */
static ALWAYS_INLINE v16sf
v16sf_from_halves (__m256 lo, __m256 hi)
{
  v16sf r;

  memcpy (&r, &lo, sizeof (lo));
  memcpy ((guint8 *) & r + sizeof (lo), &hi, sizeof (hi));
  return r;
}
#endif

/* IEEE binary16 to F32 (as npu_f16_to_f32()): the exponent and mantissa
 * fields moved to F32's positions and rebiased by a multiplication by
 * 2^112, exact for normal and subnormal halves; Inf and NaN get F32's
 * all-ones exponent */
static ALWAYS_INLINE v16sf
half16 (const guint8 * p)
{
#if defined(__AVX512F__)
  return (v16sf) _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) p));
#elif defined(__F16C__)
  __m256 lo = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) p));
  __m256 hi = _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (p + 16)));
  return v16sf_from_halves (lo, hi);
#elif defined(NPU_ATTN_NEON)
  /* fcvtl, fcvtl2: the IEEE conversion, subnormals, Inf and NaN
   * included (AArch64's FPCR.AHP is 0 on Linux) */
  const float16x8_t lo = vreinterpretq_f16_u16 (vld1q_u16 ((const guint16 *)
          p));
  const float16x8_t hi = vreinterpretq_f16_u16 (vld1q_u16 ((const guint16 *)
          (p + 16)));

  return v16sf_from_quarters (vcvt_f32_f16 (vget_low_f16 (lo)),
      vcvt_high_f32_f16 (lo), vcvt_f32_f16 (vget_low_f16 (hi)),
      vcvt_high_f32_f16 (hi));
#else
  v16hu h;
  v16si x, em, special;

  memcpy (&h, p, sizeof (h));
  x = __builtin_convertvector (h, v16si);
  em = (x & 0x7fff) << 13;
  special = (x & 0x7c00) == 0x7c00;
  em = ((v16si) ((v16sf) em * 0x1p112f) & ~special) |
      ((em | 0x7f800000) & special);
  return (v16sf) (em | ((x & 0x8000) << 16));
#endif
}

static ALWAYS_INLINE float
half1 (const guint8 * p)
{
#if defined(__F16C__)
  return _cvtsh_ss ((unsigned short) (p[0] | p[1] << 8));
#elif defined(NPU_ATTN_NEON)
  __fp16 h;

  /* one fcvt */
  memcpy (&h, p, 2);
  return (float) h;
#else
  guint32 x = p[0] | (guint32) p[1] << 8, em = (x & 0x7fff) << 13;
  float f;

  if ((x & 0x7c00) == 0x7c00)
    em |= 0x7f800000;
  else {
    memcpy (&f, &em, 4);
    f *= 0x1p112f;
    memcpy (&em, &f, 4);
  }
  em |= (x & 0x8000) << 16;
  memcpy (&f, &em, 4);
  return f;
#endif
}

/* Sixteen int8 as F32: vpmovsxbd where the level has it (GCC turned the
 * generic conversion into a byte-by-byte shift sequence, which made a
 * Q8_0 cache the slowest of the three at depth) */
static ALWAYS_INLINE v16sf
int8x16 (const guint8 * p)
{
#if defined(__AVX512F__)
  return (v16sf)
      _mm512_cvtepi32_ps (_mm512_cvtepi8_epi32 (_mm_loadu_si128 ((const
                  __m128i *) p)));
#elif defined(__AVX2__)
  __m256 lo = _mm256_cvtepi32_ps (_mm256_cvtepi8_epi32 (_mm_loadl_epi64 ((const
                  __m128i *) p)));
  __m256 hi = _mm256_cvtepi32_ps (_mm256_cvtepi8_epi32 (_mm_loadl_epi64 ((const
                  __m128i *) (p + 8))));
  return v16sf_from_halves (lo, hi);
#elif defined(NPU_ATTN_NEON)
  /* sxtl, sxtl2 twice, then scvtf */
  const int8x16_t b = vld1q_s8 ((const gint8 *) p);
  const int16x8_t lo = vmovl_s8 (vget_low_s8 (b)), hi = vmovl_high_s8 (b);

  return v16sf_from_quarters (vcvtq_f32_s32 (vmovl_s16 (vget_low_s16 (lo))),
      vcvtq_f32_s32 (vmovl_high_s16 (lo)),
      vcvtq_f32_s32 (vmovl_s16 (vget_low_s16 (hi))),
      vcvtq_f32_s32 (vmovl_high_s16 (hi)));
#else
  v16qi q;

  memcpy (&q, p, sizeof (q));
  return __builtin_convertvector (__builtin_convertvector (q, v16si), v16sf);
#endif
}

/* Values [c, c + 16) of a row, c a multiple of 16 */
static ALWAYS_INLINE v16sf
load_kv16 (const guint8 * row, gsize c, const NpuKvType T)
{
  if (T == NPU_KV_F16)
    return half16 (row + 2 * c);
  if (T == NPU_KV_Q8_0) {
    const guint8 *blk = row + c / NPU_KV_Q8_0_BLOCK * NPU_KV_Q8_0_BYTES;

    return int8x16 (blk + 2 + c % NPU_KV_Q8_0_BLOCK) * half1 (blk);
  }
  return load16 ((const float *) row + c);
}

/* Value c of a row (the columns past the last multiple of 16) */
static ALWAYS_INLINE float
kv_at (const guint8 * row, gsize c, const NpuKvType T)
{
  if (T == NPU_KV_F16)
    return half1 (row + 2 * c);
  if (T == NPU_KV_Q8_0) {
    const guint8 *blk = row + c / NPU_KV_Q8_0_BLOCK * NPU_KV_Q8_0_BYTES;

    return half1 (blk) * (gint8) blk[2 + c % NPU_KV_Q8_0_BLOCK];
  }
  return ((const float *) row)[c];
}

/* Value d of the sixteen rows of a key tile of @hd-value rows
 * (npukvtype.h); for Q8_0 the int8 codes, the scale left to the block's
 * sum (tile_dots()) */
static ALWAYS_INLINE v16sf
tile_load16 (const guint8 * tile, gsize d, gsize hd, const NpuKvType T)
{
  if (T == NPU_KV_F16)
    return half16 (tile + 2 * BLOCK * d);
  if (T == NPU_KV_Q8_0)
    return int8x16 (tile + hd / NPU_KV_Q8_0_BLOCK * 2 * BLOCK + BLOCK * d);
  return load16 ((const float *) tile + BLOCK * d);
}

#if defined(__AVX512F__)
#define SPLIT_SUMS 1
#else
#define SPLIT_SUMS 0
#endif

/* Dot products of NQ queries (@q_stride floats apart) with the sixteen
 * rows of a key tile, a vector per query in @sc: per value d of the head
 * one column vector, multiplied by each query's d-th value (a broadcast
 * from memory), in two sums per query so that eight chains of
 * multiply-adds are in flight.  Q8_0 sums each block of 32 values in
 * integers' units and multiplies the sum by the rows' block scales. */
static ALWAYS_INLINE void
tile_dots (const float *q, gsize q_stride, const guint8 * tile, guint hd,
    const guint8 * pf, v16sf * sc, const guint NQ, const NpuKvType T)
{
  const gsize pf_lines = (BLOCK * kv_bytes (hd, T) + 63) / 64;
  const v16sf zero = { 0, };
  const guint run = T == NPU_KV_Q8_0 ? NPU_KV_Q8_0_BLOCK : hd;
  v16sf a0[MAX_NQ], a1[MAX_NQ];
  guint i, d, b;

  for (i = 0; i < NQ; i++)
    sc[i] = zero;
  for (b = 0; b < hd / run; b++) {
    const guint d0 = b * run;

    for (i = 0; i < NQ; i++)
      a0[i] = a1[i] = zero;
    for (d = d0; d + 2 <= d0 + run; d += 2) {
      const v16sf k0 = tile_load16 (tile, d, hd, T);
      const v16sf k1 = tile_load16 (tile, d + 1, hd, T);

      prefetch_share (pf, pf_lines, d / 2, hd / 2);
      for (i = 0; i < NQ; i++) {
        a0[i] += q[i * q_stride + d] * k0;
        /* two sums a query where a vector is one register; with two ymm
         * per vector one sum already gives eight chains for four
         * queries, and two spilled (AVX2: F16 61 against 49 ms with key
         * rows) */
        if (SPLIT_SUMS)
          a1[i] += q[i * q_stride + d + 1] * k1;
        else
          a0[i] += q[i * q_stride + d + 1] * k1;
      }
    }
    if (run % 2) {
      const v16sf k0 = tile_load16 (tile, d0 + run - 1, hd, T);

      for (i = 0; i < NQ; i++)
        a0[i] += q[i * q_stride + d0 + run - 1] * k0;
    }
    if (T == NPU_KV_Q8_0) {
      const v16sf s = half16 (tile + 2 * BLOCK * b);

      for (i = 0; i < NQ; i++)
        sc[i] += (a0[i] + a1[i]) * s;
    } else {
      for (i = 0; i < NQ; i++)
        sc[i] = a0[i] + a1[i];
    }
  }
}

static ALWAYS_INLINE float
hsum16 (v16sf v)
{
#if defined(NPU_ATTN_NEON)
  /* the quarters added, then faddp twice (vaddvq_f32) */
  return vaddvq_f32 (vaddq_f32 (vaddq_f32 (v16sf_quarter (v, 0),
              v16sf_quarter (v, 1)), vaddq_f32 (v16sf_quarter (v, 2),
              v16sf_quarter (v, 3))));
#else
  v += HALVE8 (v);
  v += HALVE4 (v);
  v += HALVE2 (v);
  v += HALVE1 (v);
  return v[0];
#endif
}

/* Softmax numerators of @m scores in place (minus @mx); returns their sum */
static ALWAYS_INLINE float
exp_row (float *s, guint m, float mx)
{
  v16sf acc = { 0, };
  float sum = 0.0f;
  guint j = 0;

  for (; j + 16 <= m; j += 16) {
    v16sf e = exp16 (load16 (s + j) - mx, FALSE);

    store16 (s + j, e);
    acc += e;
  }
  if (j < m) {
    float t[16];
    guint i;

    for (i = 0; i < 16; i++)
      t[i] = j + i < m ? s[j + i] - mx : -INFINITY;
    store16 (t, exp16 (load16 (t), FALSE));
    for (i = 0; j + i < m; i++) {
      s[j + i] = t[i];
      sum += t[i];
    }
  }
  return sum + hsum16 (acc);
}

/* scores_pass() for one span when the head is at most 64 wide and a
 * multiple of 16 (the common 64): the queries stay in registers, so a row
 * costs its own loads only */
static ALWAYS_INLINE guint
scores_span_short (const NpuAttnSpan * sp, guint hd, gsize q_stride,
    float scale, float *scores, gsize ss, guint m, float *mx, const guint NQ,
    const NpuKvType T)
{
  const v16sf zero = { 0, };
  v16sf q0[MAX_NQ], q1[MAX_NQ], q2[MAX_NQ], q3[MAX_NQ];
  guint r, i;

  for (i = 0; i < NQ; i++) {
    const float *q = sp->q + i * q_stride;

    q0[i] = load16 (q);
    q1[i] = hd > 16 ? load16 (q + 16) : zero;
    q2[i] = hd > 32 ? load16 (q + 32) : zero;
    q3[i] = hd > 48 ? load16 (q + 48) : zero;
  }
  for (r = 0; r < sp->n; r++, m++) {
    const guint8 *k = kv_row (sp->k, sp->stride, r, T);
    const v16sf k0 = load_kv16 (k, 0, T);
    const v16sf k1 = hd > 16 ? load_kv16 (k, 16, T) : zero;
    const v16sf k2 = hd > 32 ? load_kv16 (k, 32, T) : zero;
    const v16sf k3 = hd > 48 ? load_kv16 (k, 48, T) : zero;

    if (r + PF_ROWS < sp->n)
      prefetch_row (kv_row (sp->k, sp->stride, r + PF_ROWS, T), hd, T);
    for (i = 0; i < NQ; i++) {
      float v = hsum16 (q0[i] * k0 + q1[i] * k1 + q2[i] * k2 +
          q3[i] * k3) * scale;

      scores[i * ss + m] = v;
      mx[i] = MAX (mx[i], v);
    }
  }
  return m;
}

/* scores_pass() for one span whose keys are in tiles: a tile's sixteen
 * scores of a query at once (tile_dots()), those of the span's rows kept */
static ALWAYS_INLINE guint
scores_span_tiled (const NpuAttnSpan * sp, guint hd, gsize q_stride,
    float scale, float *scores, gsize ss, guint m, float *mx, const guint NQ,
    const NpuKvType T)
{
  const gsize tb = BLOCK * kv_bytes (hd, T);
  const guint first = sp->k_row, end = sp->k_row + sp->n;
  const guint8 *tile = sp->k;
  const v16sf zero = { 0, };
  v16sf sc[MAX_NQ], mv[MAX_NQ];
  guint t0, i, j;

  for (i = 0; i < NQ; i++)
    mv[i] = zero - INFINITY;

  for (t0 = 0; t0 < end; t0 += BLOCK, tile += tb) {
    const guint j0 = MAX (first, t0) - t0, j1 = MIN (end - t0, BLOCK);

    if (t0 + BLOCK * (PF_ROWS / BLOCK + 1) < end)
      prefetch_run (tile + (PF_ROWS / BLOCK + 1) * tb, tb);
    tile_dots (sp->q, q_stride, tile, hd, NULL, sc, NQ, T);
    for (i = 0; i < NQ; i++) {
      const v16sf v = sc[i] * scale;

      /* a whole tile as a vector (lane by lane, the extractions from two
       * ymm made the AVX2 level slower than with key rows) */
      if (j0 == 0 && j1 == BLOCK) {
        const v16si gt = v > mv[i];

        store16 (scores + i * ss + m, v);
        mv[i] = (v16sf) (((v16si) v & gt) | ((v16si) mv[i] & ~gt));
        continue;
      }
      for (j = j0; j < j1; j++) {
        scores[i * ss + m + j - j0] = v[j];
        mx[i] = MAX (mx[i], v[j]);
      }
    }
    m += j1 - j0;
  }
  for (i = 0; i < NQ; i++)
    for (j = 0; j < BLOCK; j++)
      mx[i] = MAX (mx[i], mv[i][j]);
  return m;
}

/* Scores of NQ queries against every row, in @scores rows of @ss floats;
 * the maximum of each query's row in @mx */
static ALWAYS_INLINE void
scores_pass (const NpuAttnSpan * spans, guint n_spans, guint hd,
    gsize q_stride, float scale, float *scores, gsize ss, float *mx,
    const guint NQ, const NpuKvType T)
{
  const guint hv = hd / 16 * 16;
  guint s, r, i, c, m = 0;

  for (i = 0; i < NQ; i++)
    mx[i] = -INFINITY;
  for (s = 0; s < n_spans; s++) {
    const NpuAttnSpan *sp = &spans[s];

    if (sp->k_tiled) {
      m = scores_span_tiled (sp, hd, q_stride, scale, scores, ss, m, mx, NQ, T);
      continue;
    }
    if (hv == hd && hd <= 64) {
      m = scores_span_short (sp, hd, q_stride, scale, scores, ss, m, mx, NQ, T);
      continue;
    }
    for (r = 0; r < sp->n; r++, m++) {
      const guint8 *k = kv_row (sp->k, sp->stride, r, T);
      v16sf acc[MAX_NQ];
      float tail[MAX_NQ];

      for (i = 0; i < NQ; i++) {
        acc[i] = (v16sf) {
        0,};
        tail[i] = 0.0f;
      }
      for (c = 0; c < hv; c += 16) {
        const v16sf kc = load_kv16 (k, c, T);

        for (i = 0; i < NQ; i++)
          acc[i] += load16 (sp->q + i * q_stride + c) * kc;
      }
      for (c = hv; c < hd; c++) {
        const float kc = kv_at (k, c, T);

        for (i = 0; i < NQ; i++)
          tail[i] += sp->q[i * q_stride + c] * kc;
      }
      for (i = 0; i < NQ; i++) {
        float v = (hsum16 (acc[i]) + tail[i]) * scale;

        scores[i * ss + m] = v;
        mx[i] = MAX (mx[i], v);
      }
    }
  }
}

/* out_i = sum_j p_ij v_j / sum_i for NQ queries */
static ALWAYS_INLINE void
values_pass (const NpuAttnSpan * spans, guint n_spans, guint hd,
    const float *scores, gsize ss, const float *inv, float *out,
    gsize out_stride, const guint NQ, const NpuKvType T)
{
  const guint hv = hd / 16 * 16;
  guint s, r, i, j, d0, d;

  /* 64 columns at a time, in accumulators that stay in registers over
   * every row */
  for (d0 = 0; d0 < hv; d0 += 64) {
    const guint w = MIN (64, hv - d0);
    v16sf a[MAX_NQ][4];

    for (i = 0; i < NQ; i++)
      a[i][0] = a[i][1] = a[i][2] = a[i][3] = (v16sf) {
      0,};
    j = 0;
    for (s = 0; s < n_spans; s++) {
      const NpuAttnSpan *sp = &spans[s];

      for (r = 0; r < sp->n; r++, j++) {
        const guint8 *v = kv_row (sp->v, sp->stride, r, T);
        const v16sf v0 = load_kv16 (v, d0, T);


        if (w > 48) {
          const v16sf v1 = load_kv16 (v, d0 + 16, T);
          const v16sf v2 = load_kv16 (v, d0 + 32, T);
          const v16sf v3 = load_kv16 (v, d0 + 48, T);

          for (i = 0; i < NQ; i++) {
            const float p = scores[i * ss + j];

            a[i][0] += p * v0;
            a[i][1] += p * v1;
            a[i][2] += p * v2;
            a[i][3] += p * v3;
          }
        } else {
          for (i = 0; i < NQ; i++) {
            const float p = scores[i * ss + j];

            a[i][0] += p * v0;
            if (w > 16)
              a[i][1] += p * load_kv16 (v, d0 + 16, T);
            if (w > 32)
              a[i][2] += p * load_kv16 (v, d0 + 32, T);
          }
        }
      }
    }
    for (i = 0; i < NQ; i++) {
      float *o = out + i * out_stride + d0;

      store16 (o, a[i][0] * inv[i]);
      if (w > 16)
        store16 (o + 16, a[i][1] * inv[i]);
      if (w > 32)
        store16 (o + 32, a[i][2] * inv[i]);
      if (w > 48)
        store16 (o + 48, a[i][3] * inv[i]);
    }
  }
  for (d = hv; d < hd; d++) {
    for (i = 0; i < NQ; i++) {
      float o = 0.0f;

      j = 0;
      for (s = 0; s < n_spans; s++)
        for (r = 0; r < spans[s].n; r++, j++)
          o += scores[i * ss + j] * kv_at (kv_row (spans[s].v,
                  spans[s].stride, r, T), d, T);
      out[i * out_stride + d] = o * inv[i];
    }
  }
}

/* e^(sink - m): a sink logit's share of a softmax whose scores were taken
 * relative to their maximum m (0 with no sink) */
static inline float
sink_term (const float *sinks, guint i, float m)
{
  return sinks ? expf (sinks[i] - m) : 0.0f;
}

static ALWAYS_INLINE void
attend (const NpuAttnSpan * spans, guint n_spans, guint hd, gsize q_stride,
    float scale, const float *sinks, float *scores, gsize ss, float *out,
    gsize out_stride, const guint NQ, const NpuKvType T)
{
  float mx[MAX_NQ], inv[MAX_NQ];
  guint s, i, m = 0;

  for (s = 0; s < n_spans; s++)
    m += spans[s].n;
  scores_pass (spans, n_spans, hd, q_stride, scale, scores, ss, mx, NQ, T);
  for (i = 0; i < NQ; i++)
    inv[i] = 1.0f / (exp_row (scores + i * ss, m, mx[i]) +
        sink_term (sinks, i, mx[i]));
  values_pass (spans, n_spans, hd, scores, ss, inv, out, out_stride, NQ, T);
}

/* ------------------------------------------------------------------------
 * One pass, sixteen rows at a time (heads of 16, 32, 48 or 64 values)
 */

/* Sum of each half (group of 8), quarter, eighth, pair of lanes of a and b
 * side by side: folding two vectors that each hold the partial sums of
 * 2^k rows gives one vector with half as many partials of 2^(k+1) rows,
 * in row order.  Four levels turn the sixteen rows' product vectors into
 * their sixteen dot products. */
/* The four levels of the transposing reduction: lanes of @a and @b
 * (indices 16..31 are @b's) paired so that each sum halves the vectors
 * still to add. __builtin_shufflevector, not GCC's __builtin_shuffle,
 * so that clang builds it too: its indices must be constants, hence a
 * macro per level rather than a table. */
#define FOLD_LO0 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define FOLD_HI0 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define FOLD_LO1 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27
#define FOLD_HI1 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31
#define FOLD_LO2 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29
#define FOLD_HI2 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31
#define FOLD_LO3 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30
#define FOLD_HI3 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31
#define FOLD(a, b, lo, hi) \
  (__builtin_shufflevector (a, b, lo) + __builtin_shufflevector (a, b, hi))

static ALWAYS_INLINE v16sf
fold (v16sf a, v16sf b, const guint level)
{
  switch (level) {
    case 0:
      return FOLD (a, b, FOLD_LO0, FOLD_HI0);
    case 1:
      return FOLD (a, b, FOLD_LO1, FOLD_HI1);
    case 2:
      return FOLD (a, b, FOLD_LO2, FOLD_HI2);
    default:
      return FOLD (a, b, FOLD_LO3, FOLD_HI3);
  }
}

static ALWAYS_INLINE v16sf
vmax16 (v16sf a, v16sf b)
{
  const v16si gt = a > b;

  /* written out: through select16() GCC 12 made this blend (and the two
   * below) two xors instead of one masked move */
  return (v16sf) (((v16si) a & gt) | ((v16si) b & ~gt));
}

/* The largest lane, by halving (the scalar chain of 15 compares was a
 * tenth of the one-pass kernel's instructions) */
static ALWAYS_INLINE float
hmax16 (v16sf v)
{
  v = vmax16 (v, HALVE8 (v));
  v = vmax16 (v, HALVE4 (v));
  v = vmax16 (v, HALVE2 (v));
  v = vmax16 (v, HALVE1 (v));
  return v[0];
}

/* Whether a lane of @v is above @m (NaN lanes are not) */
static ALWAYS_INLINE gboolean
any_above (v16sf v, float m)
{
#if defined(__AVX512F__)
  return _mm512_cmp_ps_mask ((__m512) v, _mm512_set1_ps (m), _CMP_GT_OQ) != 0;
#else
  const v16si gt = v > m;
  guint j;

  for (j = 0; j < 16; j++)
    if (gt[j])
      return TRUE;
  return FALSE;
#endif
}

/* Scores of one query (its NC vectors @q, already scaled) against the
 * sixteen F32 rows @kr[] */
static ALWAYS_INLINE v16sf
block_dots (const v16sf * q, const float *const *kr, const guint NC)
{
  v16sf l1[8], l2[4], l3[2];
  guint r, c;

  for (r = 0; r < BLOCK; r += 2) {
    v16sf a = q[0] * load16 (kr[r]), b = q[0] * load16 (kr[r + 1]);

    for (c = 1; c < NC; c++) {
      a += q[c] * load16 (kr[r] + 16 * c);
      b += q[c] * load16 (kr[r + 1] + 16 * c);
    }
    l1[r / 2] = fold (a, b, 0);
  }
  for (r = 0; r < 4; r++)
    l2[r] = fold (l1[2 * r], l1[2 * r + 1], 1);
  for (r = 0; r < 2; r++)
    l3[r] = fold (l2[2 * r], l2[2 * r + 1], 2);
  return fold (l3[0], l3[1], 3);
}

/* The running state of the one-pass softmax of NQ queries: per query the
 * running maximum m, the sum of e^(s - m) (lanes of l) and the value sums
 * acc (NC vectors), rescaled by e^(m_old - m) whenever a block raises m.
 * Kept apart from the arrays in memory (Online) so that the compiler
 * keeps them in registers: inside one struct with those, it kept the
 * sums in memory, a load and a store per multiply-add. */
typedef struct
{
  v16sf acc[MAX_NQ][4], l[MAX_NQ];
  float m[MAX_NQ];
} OnlineSums;

/* The block's softmax numerators (read by the value rows as broadcasts)
 * and the queries, times the scale (read by tile_dots() as broadcasts) */
typedef struct
{
  float p[MAX_NQ][BLOCK] __attribute__((aligned (64)));
  float qs[MAX_NQ][64] __attribute__((aligned (64)));
  /* Q8_0 key tiles at the VNNI level (tile_dots_q8()): the scaled
   * queries in int8 codes, and per block of 32 values the codes' scale
   * and -128 times the codes' sum */
  gint8 q8[MAX_NQ][64] __attribute__((aligned (64)));
  float qd[MAX_NQ][2];
  gint32 qoff[MAX_NQ][2];
} Online;

#if defined(__AVX512VNNI__) && defined(__AVX512VBMI__) && \
    defined(__AVX512BW__)
#define Q8_VNNI 1
#else
#define Q8_VNNI 0
#endif

#if Q8_VNNI
/* Block maxima below this are taken as zero: 127 / max must not
 * overflow, and such a query contributes nothing a score can show */
#define Q8_TINY 0x1p-60f

/* The scaled queries @st->qs of NQ queries, NB blocks of 32 values each,
 * to int8 codes as Q8_0 stores keys: per block d = max|x| / 127 and code
 * rint (x * (127 / max|x|)), so |x - d code| <= max|x| (1/254 + 2^-21)
 * (the half step and three F32 roundings); a block with a NaN gets a NaN
 * scale, so that its scores are NaN as with F32 queries */
static ALWAYS_INLINE void
quantize_queries (Online * st, const guint NQ, const guint NB)
{
  guint i, b;

  for (i = 0; i < NQ; i++) {
    for (b = 0; b < NB; b++) {
      const float *x = st->qs[i] + 32 * b;
      const __m512 x0 = _mm512_loadu_ps (x), x1 = _mm512_loadu_ps (x + 16);
      const float amax = _mm512_reduce_max_ps (_mm512_max_ps (_mm512_abs_ps
              (x0), _mm512_abs_ps (x1)));
      const __mmask16 nan = _mm512_cmp_ps_mask (x0, x0, _CMP_UNORD_Q) |
          _mm512_cmp_ps_mask (x1, x1, _CMP_UNORD_Q);
      const gboolean zero = !(amax >= Q8_TINY);
      const __m512 inv = _mm512_set1_ps (zero ? 0.0f : 127.0f / amax);
      const __m512i c0 = _mm512_cvtps_epi32 (_mm512_mul_ps (x0, inv));
      const __m512i c1 = _mm512_cvtps_epi32 (_mm512_mul_ps (x1, inv));

      _mm_storeu_si128 ((__m128i *) (st->q8[i] + 32 * b),
          _mm512_cvtsepi32_epi8 (c0));
      _mm_storeu_si128 ((__m128i *) (st->q8[i] + 32 * b + 16),
          _mm512_cvtsepi32_epi8 (c1));
      st->qd[i][b] = nan ? NAN : zero ? 0.0f : amax / 127.0f;
      st->qoff[i][b] = nan ? 0 :
          -128 * _mm512_reduce_add_epi32 (_mm512_add_epi32 (c0, c1));
    }
  }
}

/* Byte 4 j + t of a regrouped vector is byte 16 t + j of four key values
 * of a tile's sixteen rows (npukvtype.h: value d of row j at 16 d + j):
 * lane j then holds row j's four values, as vpdpbusd wants them */
static const guint8 q8_regroup[64] __attribute__((aligned (64))) = {
  0, 16, 32, 48, 1, 17, 33, 49, 2, 18, 34, 50, 3, 19, 35, 51,
  4, 20, 36, 52, 5, 21, 37, 53, 6, 22, 38, 54, 7, 23, 39, 55,
  8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58, 11, 27, 43, 59,
  12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63,
};

/* tile_dots() of a Q8_0 tile in integers: per block of 32 values, the
 * tile's codes regrouped four values a row a lane and offset by 128
 * (vpdpbusd multiplies unsigned by signed bytes), then eight vpdpbusd a
 * query against its codes, four at a time broadcast; the offset's
 * 128 sum(codes) is where the sum starts from (@st->qoff), so the int32
 * sum is exactly sum(key code x query code).  That sum (|s| <= 32 x 127
 * x 127, exact in F32) times the rows' block scales and the query's
 * block scale adds to the score. */
static ALWAYS_INLINE void
tile_dots_q8 (const Online * st, const guint8 * tile, guint hd,
    const guint8 * pf, v16sf * sc, const guint NQ)
{
  const guint nb = hd / NPU_KV_Q8_0_BLOCK;
  const gsize pf_lines = (BLOCK * kv_bytes (hd, NPU_KV_Q8_0) + 63) / 64;
  const guint8 *codes = tile + nb * 2 * BLOCK;
  const __m512i idx = _mm512_load_si512 ((const void *) q8_regroup);
  const __m512i bias = _mm512_set1_epi8 ((char) 0x80);
  const v16sf zero = { 0, };
  guint i, g, b;

  for (i = 0; i < NQ; i++)
    sc[i] = zero;
  for (b = 0; b < nb; b++) {
    const v16sf ks = half16 (tile + 2 * BLOCK * b);
    __m512i k[8];

    for (g = 0; g < 8; g++) {
      prefetch_share (pf, pf_lines, 8 * b + g, 8 * nb);
      k[g] = _mm512_xor_si512 (_mm512_permutexvar_epi8 (idx,
              _mm512_loadu_si512 ((const void *) (codes + 512 * b +
                      64 * g))), bias);
    }
    for (i = 0; i < NQ; i++) {
      const gint32 *qw = (const gint32 *) (st->q8[i] + 32 * b);
      /* two sums, so that eight chains are in flight for four queries */
      __m512i a0 = _mm512_set1_epi32 (st->qoff[i][b]);
      __m512i a1 = _mm512_setzero_si512 ();

      for (g = 0; g < 8; g += 2) {
        a0 = _mm512_dpbusd_epi32 (a0, k[g], _mm512_set1_epi32 (qw[g]));
        a1 = _mm512_dpbusd_epi32 (a1, k[g + 1], _mm512_set1_epi32 (qw[g + 1]));
      }
      sc[i] += (v16sf) _mm512_cvtepi32_ps (_mm512_add_epi32 (a0, a1)) *
          (ks * st->qd[i][b]);
    }
  }
}
#endif

/* The value sums @acc of NQ queries (NC vectors each) plus the value rows
 * of lanes [j0, j1) (the first at @v, @rb bytes apart) weighted by @p:
 * the sums in named variables for the loop, as GCC kept an array of them
 * in memory (a load and a store around every multiply-add) */
#define VR_DECL(i) \
  v16sf a##i##0 = NQ > i ? acc[i][0] : zero; \
  v16sf a##i##1 = NQ > i && NC > 1 ? acc[i][1] : zero; \
  v16sf a##i##2 = NQ > i && NC > 2 ? acc[i][2] : zero; \
  v16sf a##i##3 = NQ > i && NC > 3 ? acc[i][3] : zero
#define VR_ADD(i) \
  if (NQ > i) { \
    const float p##i = p[i][j]; \
    a##i##0 += p##i * v0; \
    if (NC > 1) a##i##1 += p##i * v1; \
    if (NC > 2) a##i##2 += p##i * v2; \
    if (NC > 3) a##i##3 += p##i * v3; \
  }
#define VR_STORE(i) \
  if (NQ > i) { \
    acc[i][0] = a##i##0; \
    if (NC > 1) acc[i][1] = a##i##1; \
    if (NC > 2) acc[i][2] = a##i##2; \
    if (NC > 3) acc[i][3] = a##i##3; \
  }

static ALWAYS_INLINE void
value_rows (v16sf acc[MAX_NQ][4], const float p[MAX_NQ][BLOCK],
    const guint8 * v, gsize rb, const guint8 * pf, guint j0, guint j1,
    const guint NQ, const guint NC, const NpuKvType T)
{
  const gsize pf_lines = (BLOCK * rb + 63) / 64;
  const v16sf zero = { 0, };
  VR_DECL (0);
  VR_DECL (1);
  VR_DECL (2);
  VR_DECL (3);
  guint j;

  for (j = j0; j < j1; j++) {
    const guint8 *vj = v + (j - j0) * rb;
    const v16sf v0 = load_kv16 (vj, 0, T);
    const v16sf v1 = NC > 1 ? load_kv16 (vj, 16, T) : zero;
    const v16sf v2 = NC > 2 ? load_kv16 (vj, 32, T) : zero;
    const v16sf v3 = NC > 3 ? load_kv16 (vj, 48, T) : zero;

    prefetch_share (pf, pf_lines, j, BLOCK);
    VR_ADD (0);
    VR_ADD (1);
    VR_ADD (2);
    VR_ADD (3);
  }
  VR_STORE (0);
  VR_STORE (1);
  VR_STORE (2);
  VR_STORE (3);
}

/* One block's scores @sc of each query (lanes outside [j0, j1) already
 * -inf) into @st, and the value rows of lanes [j0, j1), the first at @v,
 * @rb bytes apart, into its sums */
static ALWAYS_INLINE void
online_block (Online * st, OnlineSums * z, v16sf * sc, const guint8 * v,
    gsize rb, const guint8 * pf, guint j0, guint j1, const guint NQ,
    const guint NC, const NpuKvType T)
{
  guint i, c;

  for (i = 0; i < NQ; i++) {
    v16sf e;

    /* The block's maximum only where some lane is above the running one
     * (one compare instead of the four halvings of hmax16(): past the
     * first blocks the maximum seldom grows), so the sums are rescaled
     * exactly when they were before, by the same factor */
    if (any_above (sc[i], z->m[i])) {
      const float bm = hmax16 (sc[i]);
      /* exp of a (-inf, 0] difference: e^-inf is 0 on the first block */
      const float f = expf (z->m[i] - bm);

      for (c = 0; c < NC; c++)
        z->acc[i][c] *= f;
      z->l[i] *= f;
      z->m[i] = bm;
    }
    /* a NaN score stays NaN here, and so do the sums */
    e = exp16 (sc[i] - z->m[i], FALSE);
    z->l[i] += e;
    store16 (st->p[i], e);
  }
  value_rows (z->acc, st->p, v, rb, pf, j0, j1, NQ, NC, T);
}

/* A span whose keys are rows like its values, sixteen rows at a time:
 * the block's sixteen dot products of a query come out as one vector by
 * folding the rows' product vectors (block_dots()) */
static ALWAYS_INLINE void
online_span_rows (Online * st, OnlineSums * z, const NpuAttnSpan * sp,
    const guint NQ, const guint NC, const NpuKvType T)
{
  v16sf q[MAX_NQ][4], sc[MAX_NQ];
  float kbuf[T == NPU_KV_F32 ? 1 : BLOCK][16 * NC]
      __attribute__((aligned (64)));
  const float *kr[BLOCK];
  const gsize rb = kv_bytes (sp->stride, T);
  guint r, i, j, c;

  for (i = 0; i < NQ; i++)
    for (c = 0; c < NC; c++) {
#if Q8_VNNI
      /* the query as the key tiles' integer scores round it, so that a
       * batch's own rows score as they will from the cache */
      if (T == NPU_KV_Q8_0 && NC % 2 == 0) {
        q[i][c] = (v16sf) _mm512_cvtepi32_ps (_mm512_cvtepi8_epi32
            (_mm_loadu_si128 ((const __m128i *) (st->q8[i] + 16 * c)))) *
            st->qd[i][c / 2];
        continue;
      }
#endif
      q[i][c] = load16 (st->qs[i] + 16 * c);
    }
  /* the span's first blocks (the later ones PF_AHEAD rows ahead) */
  prefetch_rows (sp, 0, MIN (PF_AHEAD, sp->n), 16 * NC, TRUE, T);
  for (r = 0; r < sp->n; r += BLOCK) {
    const guint nr = MIN (BLOCK, sp->n - r);
    const guint8 *k = (const guint8 *) sp->k + r * rb;

    if (r + PF_AHEAD < sp->n)
      prefetch_rows (sp, r + PF_AHEAD, MIN (BLOCK, sp->n - r - PF_AHEAD),
          16 * NC, TRUE, T);
    /* rows past the span's end repeat its first (their scores are
     * masked below) */
    for (j = 0; j < BLOCK; j++) {
      const guint8 *kj = k + (j < nr ? j : 0) * rb;

      if (T == NPU_KV_F32) {
        kr[j] = (const float *) kj;
      } else {
        for (c = 0; c < NC; c++)
          store16 (kbuf[j] + 16 * c, load_kv16 (kj, 16 * c, T));
        kr[j] = kbuf[j];
      }
    }
    for (i = 0; i < NQ; i++) {
      sc[i] = block_dots (q[i], kr, NC);
      for (j = nr; j < BLOCK; j++)
        sc[i][j] = -INFINITY;
    }
    online_block (st, z, sc, (const guint8 *) sp->v + r * rb, rb, NULL, 0, nr,
        NQ, NC, T);
  }
}

/* A span whose keys are in tiles (npukvtype.h): a tile's sixteen dot
 * products of a query are hd multiply-adds of its column vectors by the
 * query's values, with no fold.  The rows before the span's first in its
 * first tile and past its last in its last tile are read (a tile is whole
 * in memory) and their scores masked. */
static ALWAYS_INLINE void
online_span_tiled (Online * st, OnlineSums * z, const NpuAttnSpan * sp,
    const guint NQ, const guint NC, const NpuKvType T)
{
  const guint hd = 16 * NC;
  const gsize tb = BLOCK * kv_bytes (hd, T), rb = kv_bytes (sp->stride, T);
  const v16si lane = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
  const v16sf zero = { 0, }, ninf = zero - INFINITY;
  const guint first = sp->k_row, end = sp->k_row + sp->n;
  const guint n_tiles = (end + BLOCK - 1) / BLOCK, pf = PF_AHEAD / BLOCK;
  guint t, i;

  /* the span's first tiles and value rows; the later ones pf tiles
   * ahead, a line at a time as the current tile's columns and value
   * rows are read (prefetch_share()).  Issued all at once at the start
   * of each block, the 64 lines filled the line-fill buffers and the
   * prefetches themselves stalled: 45 % of the F16 kernel's samples at
   * depth 2048 from memory (perf); spread, the kernel took 5.02 against
   * 6.10 ms (bench-attention, median of five alternating rounds), and 2
   * or 8 tiles ahead measured no better than 4.  Walking two or four
   * parts of the span interleaved, for more streams in flight, measured
   * slower, and so did prefetching into L2 only (both with the
   * prefetches issued a block at a time). */
  prefetch_run (sp->k, MIN (pf, n_tiles) * tb);
  prefetch_run (sp->v, MIN (PF_AHEAD, sp->n) * rb);
  for (t = 0; t < n_tiles; t++) {
    const guint t0 = t * BLOCK;
    const guint j0 = MAX (first, t0) - t0, j1 = MIN (end - t0, BLOCK);
    const guint8 *tile = (const guint8 *) sp->k + t * tb;
    const guint8 *vrow = (const guint8 *) sp->v + (t0 + j0 - first) * rb;
    const gboolean ahead = t + pf < n_tiles;
    const guint8 *kpf = ahead ? tile + pf * tb : NULL;
    const guint8 *vpf = ahead ? vrow + (pf * BLOCK - j0) * rb : NULL;
    v16sf sc[MAX_NQ];

#if Q8_VNNI
    if (T == NPU_KV_Q8_0)
      tile_dots_q8 (st, tile, hd, kpf, sc, NQ);
    else
#endif
      tile_dots (st->qs[0], 64, tile, hd, kpf, sc, NQ, T);
    if (j0 > 0 || j1 < BLOCK) {
      const v16si in = (lane >= (gint) j0) & (lane < (gint) j1);

      for (i = 0; i < NQ; i++)
        sc[i] = (v16sf) (((v16si) sc[i] & in) | ((v16si) ninf & ~in));
    }
    online_block (st, z, sc, vrow, rb, vpf, j0, j1, NQ, NC, T);
  }
}

/* Softmax-weighted sums of NQ queries over every row of @spans, in one
 * pass (Online) */
static ALWAYS_INLINE void
attend_online (const NpuAttnSpan * spans, guint n_spans, gsize q_stride,
    float scale, const float *sinks, float *out, gsize out_stride,
    const guint NQ, const guint NC, const NpuKvType T)
{
  const v16sf zero = { 0, };
  Online st;
  OnlineSums z;
  guint s, i, c;

  for (i = 0; i < NQ; i++) {
    for (c = 0; c < NC; c++)
      z.acc[i][c] = zero;
    z.l[i] = zero;
    z.m[i] = -INFINITY;
  }
  for (s = 0; s < n_spans; s++) {
    const NpuAttnSpan *sp = &spans[s];

    /* the sinks' span may use other queries (npullm's rotation) */
    if (s == 0 || sp->q != spans[s - 1].q) {
      for (i = 0; i < NQ; i++)
        for (c = 0; c < NC; c++)
          store16 (st.qs[i] + 16 * c,
              load16 (sp->q + i * q_stride + 16 * c) * scale);
#if Q8_VNNI
      /* (a Q8_0 head is whole blocks: the odd NC are never called) */
      if (T == NPU_KV_Q8_0 && NC % 2 == 0)
        quantize_queries (&st, NQ, NC / 2);
#endif
    }
    if (sp->k_tiled)
      online_span_tiled (&st, &z, sp, NQ, NC, T);
    else
      online_span_rows (&st, &z, sp, NQ, NC, T);
  }
  for (i = 0; i < NQ; i++) {
    const float inv = 1.0f / (hsum16 (z.l[i]) + sink_term (sinks, i,
            z.m[i]));

    for (c = 0; c < NC; c++)
      store16 (out + i * out_stride + 16 * c, z.acc[i][c] * inv);
  }
}

/* attend_online() of each count of queries, head size and type as a
 * function of its own: inlined into one large function, GCC kept the
 * value sums of the hot loops in memory (a load and a store around every
 * multiply-add); alone, each gets the register file to itself. */
typedef void (*OnlineFn) (const NpuAttnSpan * sp, guint n_spans,
    gsize q_stride, float scale, const float *sinks, float *o,
    gsize out_stride);

#define ONLINE_FN(NQ, NC, T) \
static __attribute__((noinline)) void \
attend_online_##NQ##_##NC##_##T (const NpuAttnSpan * sp, guint n_spans, \
    gsize q_stride, float scale, const float *sinks, float *o, \
    gsize out_stride) \
{ \
  attend_online (sp, n_spans, q_stride, scale, sinks, o, out_stride, NQ, \
      NC, T); \
}
#define ONLINE_FNS_NQ(NQ, T) \
  ONLINE_FN (NQ, 1, T) ONLINE_FN (NQ, 2, T) ONLINE_FN (NQ, 3, T) \
  ONLINE_FN (NQ, 4, T)
#define ONLINE_FNS(T) \
  ONLINE_FNS_NQ (1, T) ONLINE_FNS_NQ (2, T) ONLINE_FNS_NQ (3, T) \
  ONLINE_FNS_NQ (4, T)
#define ONLINE_ROW(NQ, T) \
  { attend_online_##NQ##_1_##T, attend_online_##NQ##_2_##T, \
    attend_online_##NQ##_3_##T, attend_online_##NQ##_4_##T }
#define ONLINE_TABLE(T) \
  { ONLINE_ROW (1, T), ONLINE_ROW (2, T), ONLINE_ROW (3, T), \
    ONLINE_ROW (4, T) }

#if defined(__AVX512F__)
ONLINE_FNS (NPU_KV_F32)
    ONLINE_FNS (NPU_KV_F16)
    ONLINE_FNS (NPU_KV_Q8_0)
/* [type][queries - 1][head / 16 - 1] */
     static const OnlineFn online_fns[3][MAX_NQ][4] = {
       ONLINE_TABLE (NPU_KV_F32),
       ONLINE_TABLE (NPU_KV_F16),
       ONLINE_TABLE (NPU_KV_Q8_0),
     };
#endif

/* attend_online() where the head allows it, else the two passes */
static ALWAYS_INLINE void
attend_best (const NpuAttnSpan * sp, guint n_spans, guint hd,
    gsize q_stride, float scale, const float *sinks, float *sc, gsize ss,
    float *o, gsize out_stride, const guint NQ, const NpuKvType T)
{
  /* Only where a vector is one register: with AVX2 (two ymm) and below,
   * GCC splits the folds' two-vector shuffles into long sequences and the
   * one pass measured slower than the two (bench-attention, avx2: F32
   * 71 against 65 ms, Q8_0 103 against 81) */
#if defined(__AVX512F__)
  if (hd % 16 == 0 && hd <= 64)
    online_fns[T][NQ - 1][hd / 16 - 1] (sp, n_spans, q_stride, scale, sinks,
        o, out_stride);
  else
#endif
    attend (sp, n_spans, hd, q_stride, scale, sinks, sc, ss, o, out_stride,
        NQ, T);
}

/* One pass of up to MAX_NQ queries, over rows of type T */
static ALWAYS_INLINE void
attend_nq (const NpuAttnSpan * sp, guint n_spans, guint hd, gsize q_stride,
    float scale, const float *sinks, float *sc, gsize ss, float *o,
    gsize out_stride, guint nq, const NpuKvType T)
{
  switch (nq) {
    case 1:
      attend_best (sp, n_spans, hd, q_stride, scale, sinks, sc, ss, o,
          out_stride, 1, T);
      break;
    case 2:
      attend_best (sp, n_spans, hd, q_stride, scale, sinks, sc, ss, o,
          out_stride, 2, T);
      break;
    case 3:
      attend_best (sp, n_spans, hd, q_stride, scale, sinks, sc, ss, o,
          out_stride, 3, T);
      break;
    default:
      attend_best (sp, n_spans, hd, q_stride, scale, sinks, sc, ss, o,
          out_stride, 4, T);
      break;
  }
}

static ALWAYS_INLINE void
attention_rows (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, const float *sinks, float *scores,
    gsize ss, float *out, gsize out_stride)
{
  const NpuKvType type = spans[0].type;
  guint q0, s;

  g_return_if_fail (n_spans >= 1 && n_spans <= NPU_ATTN_MAX_SPANS);
  for (s = 1; s < n_spans; s++)
    g_return_if_fail (spans[s].type == type);
  g_return_if_fail (type != NPU_KV_Q8_0 || hd % NPU_KV_Q8_0_BLOCK == 0);

  for (q0 = 0; q0 < nq; q0 += MAX_NQ) {
    NpuAttnSpan sub[NPU_ATTN_MAX_SPANS];
    const NpuAttnSpan *sp = spans;
    float *sc = scores + q0 * ss, *o = out + q0 * out_stride;
    const float *sk = sinks ? sinks + q0 : NULL;
    guint k = MIN (nq - q0, MAX_NQ);

    /* later passes: the same rows, the next queries */
    if (q0 > 0) {
      for (s = 0; s < n_spans; s++) {
        sub[s] = spans[s];
        sub[s].q += q0 * q_stride;
      }
      sp = sub;
    }
    switch (type) {
      case NPU_KV_F16:
        attend_nq (sp, n_spans, hd, q_stride, scale, sk, sc, ss, o,
            out_stride, k, NPU_KV_F16);
        break;
      case NPU_KV_Q8_0:
        attend_nq (sp, n_spans, hd, q_stride, scale, sk, sc, ss, o,
            out_stride, k, NPU_KV_Q8_0);
        break;
      default:
        attend_nq (sp, n_spans, hd, q_stride, scale, sk, sc, ss, o,
            out_stride, k, NPU_KV_F32);
        break;
    }
  }
}

void
KERNEL_NAME (NPU_ATTN_ISA) (const NpuAttnSpan * spans, guint n_spans,
    guint hd, guint nq, gsize q_stride, float scale, const float *sinks,
    float *scores, gsize ss, float *out, gsize out_stride)
{
  attention_rows (spans, n_spans, hd, nq, q_stride, scale, sinks, scores, ss,
      out, out_stride);
}
