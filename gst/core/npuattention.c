/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: softmax attention of the query rows that share a key/value head
 *
 * Written with GCC's vector extensions, sixteen floats to a vector, and
 * compiled once per x86 ISA level (npu_attention_rows() picks the one
 * npucpu.h allows): one zmm per vector with AVX-512, two ymm with AVX2,
 * four xmm otherwise or on NEON.  Auto-vectorising the plain loops gave scalar
 * code for the dot products and kept the output in memory.
 *
 * With grouped-query attention several query heads read the same key and
 * value rows.  Taking them one by one read every row once per query head:
 * at a depth of 2048 tokens the 1B llama's 4 query heads per KV head made
 * the cache reads ~4x its size, and decode fell from 40 to 18 tokens/s
 * (2 threads).  Here up to four queries go through each row while it is in
 * registers, and the softmax's exponentials are vectorised too.
 *
 * Rows stored in F16 or Q8_0 (a KV cache of half or about a quarter the
 * bytes) are widened to F32 sixteen values at a time as they are loaded:
 * the cache is never copied wider.  Every function below takes the type as
 * a constant, so each type gets its own loops.
 */
#include "npuattention.h"
#include "npucpu.h"

#include <math.h>
#include <string.h>

typedef float v16sf __attribute__((vector_size (64)));
typedef gint32 v16si __attribute__((vector_size (64)));
typedef guint16 v16hu __attribute__((vector_size (32)));
typedef gint8 v16qi __attribute__((vector_size (16)));

/* The 64-byte vectors only pass between static inline functions of this
 * file, never across an ABI boundary, so GCC's note that their calling
 * convention differs with and without AVX-512 does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

/* Queries per pass over the rows: 4 x 4 value accumulators of a 64-wide
 * column chunk are 16 zmm, half the AVX-512 register file. */
#define MAX_NQ 4

/* Rows ahead to prefetch.  KV cache rows of one head are a few hundred
 * bytes a few KiB apart (the other heads' columns between them), a stride
 * the hardware prefetchers follow poorly. */
#define PF_ROWS 8

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

/* IEEE binary16 to F32 (as npu_f16_to_f32()): the exponent and mantissa
 * fields moved to F32's positions and rebiased by a multiplication by
 * 2^112, exact for normal and subnormal halves; Inf and NaN get F32's
 * all-ones exponent */
static ALWAYS_INLINE v16sf
half16 (const guint8 * p)
{
  v16hu h;
  v16si x, em, special;

  memcpy (&h, p, sizeof (h));
  x = __builtin_convertvector (h, v16si);
  em = (x & 0x7fff) << 13;
  special = (x & 0x7c00) == 0x7c00;
  em = ((v16si) ((v16sf) em * 0x1p112f) & ~special) |
      ((em | 0x7f800000) & special);
  return (v16sf) (em | ((x & 0x8000) << 16));
}

static ALWAYS_INLINE float
half1 (const guint8 * p)
{
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
}

/* Values [c, c + 16) of a row, c a multiple of 16 */
static ALWAYS_INLINE v16sf
load_kv16 (const guint8 * row, gsize c, const NpuKvType T)
{
  if (T == NPU_KV_F16)
    return half16 (row + 2 * c);
  if (T == NPU_KV_Q8_0) {
    const guint8 *blk = row + c / NPU_KV_Q8_0_BLOCK * NPU_KV_Q8_0_BYTES;
    v16qi q;

    memcpy (&q, blk + 2 + c % NPU_KV_Q8_0_BLOCK, sizeof (q));
    return __builtin_convertvector (__builtin_convertvector (q, v16si),
        v16sf) * half1 (blk);
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

static ALWAYS_INLINE float
hsum16 (v16sf v)
{
  const v16si h8 = { 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7 };
  const v16si h4 = { 4, 5, 6, 7, 0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15 };
  const v16si h2 = { 2, 3, 0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };
  const v16si h1 = { 1, 0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

  v += __builtin_shuffle (v, h8);
  v += __builtin_shuffle (v, h4);
  v += __builtin_shuffle (v, h2);
  v += __builtin_shuffle (v, h1);
  return v[0];
}

/* e^x for x <= 0 (scores minus their maximum), within ~2 ulp of expf:
 * x = n ln2 + r, |r| <= ln2 / 2, e^r by its degree-6 Taylor polynomial
 * (truncation below 1.2e-7 relative), 2^n put into the exponent bits.
 * Below -87.3 the result would be subnormal: it is flushed to 0, a weight
 * of less than 2^-126 beside the maximum's 1.  A NaN stays NaN. */
static ALWAYS_INLINE v16sf
exp16 (v16sf x)
{
  const v16sf zero = { 0, }, lo = zero - 87.3f;
  const v16si small = x < lo;   /* all ones where x < lo (never for NaN) */
  v16sf n, r, p;
  v16si e;

  x = (v16sf) (((v16si) x & ~small) | ((v16si) lo & small));
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
  return (v16sf) ((v16si) p & ~small);
}

/* Softmax numerators of @m scores in place (minus @mx); returns their sum */
static ALWAYS_INLINE float
exp_row (float *s, guint m, float mx)
{
  v16sf acc = { 0, };
  float sum = 0.0f;
  guint j = 0;

  for (; j + 16 <= m; j += 16) {
    v16sf e = exp16 (load16 (s + j) - mx);

    store16 (s + j, e);
    acc += e;
  }
  if (j < m) {
    float t[16];
    guint i;

    for (i = 0; i < 16; i++)
      t[i] = j + i < m ? s[j + i] - mx : -INFINITY;
    store16 (t, exp16 (load16 (t)));
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

static ALWAYS_INLINE void
attend (const NpuAttnSpan * spans, guint n_spans, guint hd, gsize q_stride,
    float scale, float *scores, gsize ss, float *out, gsize out_stride,
    const guint NQ, const NpuKvType T)
{
  float mx[MAX_NQ], inv[MAX_NQ];
  guint s, i, m = 0;

  for (s = 0; s < n_spans; s++)
    m += spans[s].n;
  scores_pass (spans, n_spans, hd, q_stride, scale, scores, ss, mx, NQ, T);
  for (i = 0; i < NQ; i++)
    inv[i] = 1.0f / exp_row (scores + i * ss, m, mx[i]);
  values_pass (spans, n_spans, hd, scores, ss, inv, out, out_stride, NQ, T);
}

/* One pass of up to MAX_NQ queries, over rows of type T */
static ALWAYS_INLINE void
attend_nq (const NpuAttnSpan * sp, guint n_spans, guint hd, gsize q_stride,
    float scale, float *sc, gsize ss, float *o, gsize out_stride, guint nq,
    const NpuKvType T)
{
  switch (nq) {
    case 1:
      attend (sp, n_spans, hd, q_stride, scale, sc, ss, o, out_stride, 1, T);
      break;
    case 2:
      attend (sp, n_spans, hd, q_stride, scale, sc, ss, o, out_stride, 2, T);
      break;
    case 3:
      attend (sp, n_spans, hd, q_stride, scale, sc, ss, o, out_stride, 3, T);
      break;
    default:
      attend (sp, n_spans, hd, q_stride, scale, sc, ss, o, out_stride, 4, T);
      break;
  }
}

static ALWAYS_INLINE void
attention_rows (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, float *scores, gsize ss,
    float *out, gsize out_stride)
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
        attend_nq (sp, n_spans, hd, q_stride, scale, sc, ss, o, out_stride, k,
            NPU_KV_F16);
        break;
      case NPU_KV_Q8_0:
        attend_nq (sp, n_spans, hd, q_stride, scale, sc, ss, o, out_stride, k,
            NPU_KV_Q8_0);
        break;
      default:
        attend_nq (sp, n_spans, hd, q_stride, scale, sc, ss, o, out_stride, k,
            NPU_KV_F32);
        break;
    }
  }
}

/* One copy of the whole computation per level: everything above is inlined
 * into each, so the vectors are lowered for that level's registers. */
static void
attention_rows_default (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, float *scores, gsize ss,
    float *out, gsize out_stride)
{
  attention_rows (spans, n_spans, hd, nq, q_stride, scale, scores, ss, out,
      out_stride);
}

#if defined(__x86_64__)
#define TARGET_AVX2 __attribute__ ((target ("avx2")))
#define TARGET_AVX512 __attribute__ ((target ("avx512f")))

static TARGET_AVX2 void
attention_rows_avx2 (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, float *scores, gsize ss,
    float *out, gsize out_stride)
{
  attention_rows (spans, n_spans, hd, nq, q_stride, scale, scores, ss, out,
      out_stride);
}

static TARGET_AVX512 void
attention_rows_avx512 (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, float *scores, gsize ss,
    float *out, gsize out_stride)
{
  attention_rows (spans, n_spans, hd, nq, q_stride, scale, scores, ss, out,
      out_stride);
}
#endif

void
npu_attention_rows (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, float *scores, gsize ss,
    float *out, gsize out_stride)
{
#if defined(__x86_64__)
  if (npu_cpu_has (NPU_CPU_AVX512F)) {
    attention_rows_avx512 (spans, n_spans, hd, nq, q_stride, scale, scores,
        ss, out, out_stride);
    return;
  }
  if (npu_cpu_has (NPU_CPU_AVX2)) {
    attention_rows_avx2 (spans, n_spans, hd, nq, q_stride, scale, scores, ss,
        out, out_stride);
    return;
  }
#endif
  attention_rows_default (spans, n_spans, hd, nq, q_stride, scale, scores, ss,
      out, out_stride);
}
