/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the rows of npu_matmul_blocks() (npumatmul-blocks.c)
 *
 * Built once per level with that level's -m flags (meson.build;
 * NPU_BLOCKS_ISA names the copy).  A row is read a unit at a time (a
 * super-block of 256 values for the K-quants, a block of 32 for the
 * others) and unpacked into int8 codes q, two scales a block of 32 (one
 * per half: Q6_K's scales cover 16 values) and an offset a block, so
 * that every type's value is
 *
 *   w = s_h q + o     (s_h the scale of the half, o the block's offset)
 *
 * with the scales and offsets computed as ggml's dequantize_row_*() does
 * (d * sc and dmin * m: exact products of a half and a 6- or 8-bit
 * integer).  The unit's codes are then dotted with each column's int8
 * activation codes (npumatmul-blocks.c quantised them, d_b a block), 32
 * at a time:
 *
 *   y += d_b (s_0 sum_{16} q x + s_1 sum_{16} q x) + o d_b sum_{32} x
 *
 * the integer sums exact, the last one precomputed per block (exact in
 * F32: at most 32 x 127).  The AVX2, AVX-512 and neon copies do this in
 * registers for every type, a row's codes unpacked once for up to four
 * columns (FUSED: maddubs/madd, |x| <= 127 and |q| <= 32 so that no int16
 * sum saturates; vpdpbusd with AVX-512 VNNI; sdot, signed by signed, on
 * NEON); the baseline copy unpacks each unit into a buffer in plain C and
 * dots it in a plain loop.
 */
#include <glib.h>
#include <string.h>

#include "core/formats/npugguf.h"
#include "core/formats/npumxfp4.h"
#if defined(__AVX2__)
#include <immintrin.h>
#include "npuhsum-avx.h"
#endif
#if defined(__ARM_FEATURE_DOTPROD)
#include <arm_neon.h>
#endif

#ifndef NPU_BLOCKS_ISA
#error "NPU_BLOCKS_ISA names the copy: build this file through meson.build"
#endif

#define NAME3(f, isa) f##_##isa
#define NAME2(f, isa) NAME3 (f, isa)
#define NAME(f) NAME2 (f, NPU_BLOCKS_ISA)

/* The most column passes a call takes (npumatmul-blocks.c) */
#define MAX_PASSES 16

/* The copies with fused row dots (AVX2, AVX-512, NEON with the dot
 * product); the baseline copy unpacks each unit into a buffer */
#if defined(__AVX2__) || defined(__ARM_FEATURE_DOTPROD)
#define FUSED 1
#endif

void NAME (npu_blocks_rows) (guint32 type, const guint8 * w, gsize row_bytes,
    gsize r0, gsize r1, gsize k, const gint8 * qx, const float *dx,
    const float *xsum, guint n_cols, guint n_passes, gsize col_stride,
    float *y, gsize y_stride);

static inline float
half_to_float (const guint8 * p)
{
  guint16 h = p[0] | (p[1] << 8);

#if defined(__F16C__)
  return _cvtsh_ss (h);
#else
  return npu_f16_to_f32 (h);
#endif
}

#ifndef FUSED
/* One unit unpacked: codes, two scales and one offset per block of 32 */
typedef struct
{
  gint8 q[256] __attribute__((aligned (32)));
  float s[16];
  float o[8];
} Unit;

/* Q4_0, Q4_1, Q5_0, Q5_1: one block of 32 (ggml's block_q4_0 ...) */
static void
unpack_32 (guint32 type, const guint8 * b, Unit * u)
{
  gboolean has_min = type == NPU_GGML_TYPE_Q4_1 || type == NPU_GGML_TYPE_Q5_1;
  gboolean five = type == NPU_GGML_TYPE_Q5_0 || type == NPU_GGML_TYPE_Q5_1;
  const guint8 *qs = b + (has_min ? 4 : 2) + (five ? 4 : 0);
  /* the unsigned codes are centred by 8 or 16 where the type has no min */
  gint bias = has_min ? 0 : (five ? 16 : 8);
  guint32 qh = 0;
  guint j;

  u->s[0] = u->s[1] = half_to_float (b);
  u->o[0] = has_min ? half_to_float (b + 2) : 0.0f;
  if (five) {
    const guint8 *h = b + (has_min ? 4 : 2);

    qh = h[0] | (h[1] << 8) | (h[2] << 16) | ((guint32) h[3] << 24);
  }
  for (j = 0; j < 16; j++) {
    gint lo = qs[j] & 0xf, hi = qs[j] >> 4;

    if (five) {
      lo |= ((qh >> j) & 1) << 4;
      hi |= ((qh >> (j + 16)) & 1) << 4;
    }
    u->q[j] = lo - bias;
    u->q[j + 16] = hi - bias;
  }
}

/* ggml's get_scale_min_k4(): sub-block @j's 6-bit scale and min */
static inline void
scale_min_k4 (guint j, const guint8 * q, guint * sc, guint * m)
{
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

/* Q4_K (@five FALSE) or Q5_K: d, dmin, scales[12], (qh[32],) qs[128] */
static void
unpack_q45_k (const guint8 * b, gboolean five, Unit * u)
{
  float d = half_to_float (b), dmin = half_to_float (b + 2);
  const guint8 *scales = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
  guint j, l;

  for (j = 0; j < 8; j++) {
    guint sc, m;

    scale_min_k4 (j, scales, &sc, &m);
    u->s[2 * j] = u->s[2 * j + 1] = d * sc;
    u->o[j] = -(dmin * m);
  }
  /* sub-blocks 2c and 2c + 1 share qs[32 c ..]: low nibbles, then high;
   * Q5_K's fifth bit of sub-block j is bit j of qh[l] */
  for (j = 0; j < 4; j++)
    for (l = 0; l < 32; l++) {
      u->q[64 * j + l] = qs[32 * j + l] & 0xf;
      u->q[64 * j + 32 + l] = qs[32 * j + l] >> 4;
    }
  if (five)
    for (j = 0; j < 8; j++)
      for (l = 0; l < 32; l++)
        u->q[32 * j + l] |= ((qh[l] >> j) & 1) << 4;
}

/* Q6_K: ql[128], qh[64], int8 scales[16], d (ggml's dequantize_row_q6_K) */
static void
unpack_q6_k (const guint8 * b, Unit * u)
{
  const guint8 *ql = b, *qh = b + 128;
  const gint8 *sc = (const gint8 *) (b + 192);
  float d = half_to_float (b + 208);
  guint h, l;

  for (h = 0; h < 16; h++)
    u->s[h] = d * sc[h];
  for (h = 0; h < 8; h++)
    u->o[h] = 0.0f;
  for (h = 0; h < 2; h++) {
    const guint8 *L = ql + 64 * h, *H = qh + 32 * h;
    gint8 *q = u->q + 128 * h;
    for (l = 0; l < 32; l++) {
      q[l] = (gint8) ((L[l] & 0xf) | ((H[l] & 3) << 4)) - 32;
      q[l + 32] = (gint8) ((L[l + 32] & 0xf) | (((H[l] >> 2) & 3) << 4)) - 32;
      q[l + 64] = (gint8) ((L[l] >> 4) | (((H[l] >> 4) & 3) << 4)) - 32;
      q[l + 96] = (gint8) ((L[l + 32] >> 4) | (((H[l] >> 6) & 3) << 4)) - 32;
    }
  }
}

typedef float Acc;

static inline Acc
acc_zero (void)
{
  return 0.0f;
}

static inline Acc
acc_block (Acc acc, const gint8 * q, const gint8 * x, float s0, float s1,
    float d)
{
  gint32 i0 = 0, i1 = 0;
  guint j;

  for (j = 0; j < 16; j++) {
    i0 += q[j] * x[j];
    i1 += q[16 + j] * x[16 + j];
  }
  return acc + (s0 * d) * (float) i0 + (s1 * d) * (float) i1;
}

static inline float
acc_sum (Acc a)
{
  return a;
}

static void
unpack (guint32 type, const guint8 * b, Unit * u)
{
  switch (type) {
    case NPU_GGML_TYPE_Q4_K:
      unpack_q45_k (b, FALSE, u);
      break;
    case NPU_GGML_TYPE_Q5_K:
      unpack_q45_k (b, TRUE, u);
      break;
    case NPU_GGML_TYPE_Q6_K:
      unpack_q6_k (b, u);
      break;
    default:
      unpack_32 (type, b, u);
      break;
  }
}

#endif /* !FUSED */

/* Up to 4 columns of activations (or passes of one): their codes, block
 * scales and block code sums; each row's codes are unpacked once for all */
#define MAX_FUSED 4
typedef struct
{
  const gint8 *qx[MAX_FUSED];
  const float *dx[MAX_FUSED], *xsum[MAX_FUSED];
} Cols;

#ifdef FUSED
/* A Q4_K or Q5_K super-block's 12 bytes of 6-bit scales and mins at @q as
 * 8 scale bytes, then 8 min bytes, in @t (ggml's get_scale_min_k4() for
 * all eight at once, as ggml's SIMD dots do) */
static inline void
k4_scales_mins (const guint8 * q, guint32 t[4])
{
  guint32 m;

  memcpy (t, q, 12);
  t[3] = ((t[2] >> 4) & 0x0f0f0f0f) | (((t[1] >> 6) & 0x03030303) << 4);
  m = t[1] & 0x3f3f3f3f;
  t[1] = (t[2] & 0x0f0f0f0f) | (((t[0] >> 6) & 0x03030303) << 4);
  t[2] = m;
  t[0] &= 0x3f3f3f3f;
}
#endif

#if defined(__AVX2__)
/* The fused row dots of the AVX2 and AVX-512 levels, ggml's
 * ggml_vec_dot_*_q8_* in form: the codes are unpacked in registers and
 * multiplied at once, the K-quants' 6- or 8-bit scales applied to the
 * integer sums (vpmaddwd), one float scale a super-block (the activations
 * of a K-quant are quantised per 256: npumatmul-blocks.c).  The same
 * values and the same integer sums as the unpacking path; only the F32
 * roundings of the scales' products fall elsewhere, within the bound. */

/* The int16 scale @i of @scales (8 of them, in both halves) in every
 * lane: a byte shuffle, no trip through a general register */
static inline __m256i
scale_lanes (__m256i scales, guint i)
{
  return _mm256_shuffle_epi8 (scales,
      _mm256_set1_epi16 ((gint16) (((2 * i + 1) << 8) | (2 * i))));
}

/* @acc + the products of @a's and @b's int16 lanes summed in pairs to
 * int32: one vpdpwssd on the avx512 level (VNNI), where AVX2 takes a
 * vpmaddwd and an add; the same integers */
static inline __m256i
madd_add (__m256i acc, __m256i a, __m256i b)
{
#if defined(__AVX512VNNI__)
  return _mm256_dpwssd_epi32 (acc, a, b);
#else
  return _mm256_add_epi32 (acc, _mm256_madd_epi16 (a, b));
#endif
}

/* @acc + sc_2c (q . x) + sc_2c+1 (q . x) of sub-blocks 2c (@lo, the low
 * nibbles) and 2c + 1 (@hi) of a K-quant super-block, in 8 int32 lanes */
static inline __m256i
k_pair (__m256i acc, __m256i lo, __m256i hi, const gint8 * x,
    __m256i scales, guint c)
{
  __m256i pl = _mm256_maddubs_epi16 (lo,
      _mm256_loadu_si256 ((const __m256i *) x));
  __m256i ph = _mm256_maddubs_epi16 (hi,
      _mm256_loadu_si256 ((const __m256i *) (x + 32)));

  acc = madd_add (acc, pl, scale_lanes (scales, 2 * c));
  return madd_add (acc, ph, scale_lanes (scales, 2 * c + 1));
}

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* A Q4_K (@five FALSE) or Q5_K row times @nc columns: codes 0..15
 * (0..31) unsigned, so maddubs takes them as they are (a pair at most
 * 2 x 31 x 127) */
static ALWAYS_INLINE void
dot_q45_k (const guint8 * row, gsize k, gboolean five, const Cols * cols,
    guint nc, float *out)
{
  const __m256i m4 = _mm256_set1_epi8 (0xf), m1 = _mm256_set1_epi8 (1);
  gsize bytes = five ? 176 : 144, i;
  __m256 acc[MAX_FUSED], accm[MAX_FUSED];
  guint c;

  for (c = 0; c < nc; c++)
    acc[c] = accm[c] = _mm256_setzero_ps ();
  for (i = 0; i < k / 256; i++) {
    const guint8 *b = row + i * bytes, *qh = b + 16;
    const guint8 *qs = b + (five ? 48 : 16);
    float d = half_to_float (b), dmin = half_to_float (b + 2);
    __m256i sumi[MAX_FUSED];
    __m256i h = five ? _mm256_loadu_si256 ((const __m256i *) qh) :
        _mm256_setzero_si256 ();
    guint32 t[4];
    const guint8 *sc = (const guint8 *) t;
    __m256i scales;
    __m256 mins;
    guint j;

    k4_scales_mins (b + 4, t);
    mins = _mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (_mm_loadl_epi64
            ((const __m128i *) (sc + 8))));
    scales = _mm256_broadcastsi128_si256 (_mm_cvtepu8_epi16 (_mm_loadl_epi64
            ((const __m128i *) sc)));
    for (c = 0; c < nc; c++) {
      /* mins . the blocks' code sums, in 8 lanes */
      accm[c] = _mm256_fmadd_ps (_mm256_set1_ps (dmin * cols->dx[c][8 * i]),
          _mm256_mul_ps (mins, _mm256_loadu_ps (cols->xsum[c] + 8 * i)),
          accm[c]);
      sumi[c] = _mm256_setzero_si256 ();
    }
    for (j = 0; j < 4; j++) {
      __m256i v = _mm256_loadu_si256 ((const __m256i *) (qs + 32 * j));
      __m256i lo = _mm256_and_si256 (v, m4);
      __m256i hi = _mm256_and_si256 (_mm256_srli_epi16 (v, 4), m4);

      if (five) {
        lo = _mm256_or_si256 (lo,
            _mm256_slli_epi16 (_mm256_and_si256 (h, m1), 4));
        h = _mm256_srli_epi16 (h, 1);
        hi = _mm256_or_si256 (hi,
            _mm256_slli_epi16 (_mm256_and_si256 (h, m1), 4));
        h = _mm256_srli_epi16 (h, 1);
      }
      for (c = 0; c < nc; c++)
        sumi[c] = k_pair (sumi[c], lo, hi, cols->qx[c] + 256 * i + 64 * j,
            scales, j);
    }
    for (c = 0; c < nc; c++)
      acc[c] = _mm256_fmadd_ps (_mm256_set1_ps (d * cols->dx[c][8 * i]),
          _mm256_cvtepi32_ps (sumi[c]), acc[c]);
  }
  for (c = 0; c < nc; c++)
    out[c] = npu_hsum_m256 (acc[c]) - npu_hsum_m256 (accm[c]);
}

/* |x| times q with x's sign, summed in pairs to int16 (|q| <= 32) */
static inline __m256i
signed_pairs (__m256i q, __m256i x)
{
  return _mm256_maddubs_epi16 (_mm256_sign_epi8 (x, x),
      _mm256_sign_epi8 (q, x));
}

/* A Q6_K row: codes q - 32, int8 scales a group of 16 (int16 lanes 0-7
 * of a pair sum hold the first 16 bytes, lanes 8-15 the next) */
static ALWAYS_INLINE void
dot_q6_k (const guint8 * row, gsize k, const Cols * cols, guint nc, float *out)
{
  const __m256i m4 = _mm256_set1_epi8 (0xf), m3 = _mm256_set1_epi8 (3);
  const __m256i c32 = _mm256_set1_epi8 (32);
  __m256 acc[MAX_FUSED];
  gsize i;
  guint c;

  for (c = 0; c < nc; c++)
    acc[c] = _mm256_setzero_ps ();

  for (i = 0; i < k / 256; i++) {
    const guint8 *b = row + i * 210;
    const guint8 *sc = b + 192;
    float d = half_to_float (b + 208);
    __m256i sumi[MAX_FUSED];
    guint h, g;

    for (c = 0; c < nc; c++)
      sumi[c] = _mm256_setzero_si256 ();

    for (h = 0; h < 2; h++) {
      const guint8 *L = b + 64 * h, *H = b + 128 + 32 * h;
      __m256i l0 = _mm256_loadu_si256 ((const __m256i *) L);
      __m256i l1 = _mm256_loadu_si256 ((const __m256i *) (L + 32));
      __m256i hb = _mm256_loadu_si256 ((const __m256i *) H);
      /* the half's 8 scales as int16, in both 128-bit lanes */
      __m256i s8 = _mm256_broadcastsi128_si256 (_mm_cvtepi8_epi16
          (_mm_loadl_epi64 ((const __m128i *) (sc + 8 * h))));
      __m256i q[4];

      q[0] = _mm256_or_si256 (_mm256_and_si256 (l0, m4),
          _mm256_slli_epi16 (_mm256_and_si256 (hb, m3), 4));
      q[1] = _mm256_or_si256 (_mm256_and_si256 (l1, m4),
          _mm256_slli_epi16 (_mm256_and_si256 (_mm256_srli_epi16 (hb, 2),
                  m3), 4));
      q[2] = _mm256_or_si256 (_mm256_and_si256 (_mm256_srli_epi16 (l0, 4),
              m4), _mm256_slli_epi16 (_mm256_and_si256 (_mm256_srli_epi16
                  (hb, 4), m3), 4));
      q[3] = _mm256_or_si256 (_mm256_and_si256 (_mm256_srli_epi16 (l1, 4),
              m4), _mm256_slli_epi16 (_mm256_and_si256 (_mm256_srli_epi16
                  (hb, 6), m3), 4));
      /* group g takes scale 2g in the low lane, 2g + 1 in the high */
      for (g = 0; g < 4; g++) {
        __m256i pick = _mm256_setr_m128i (_mm_set1_epi16 ((gint16)
                (((4 * g + 1) << 8) | (4 * g))), _mm_set1_epi16 ((gint16)
                (((4 * g + 3) << 8) | (4 * g + 2))));
        __m256i qg = _mm256_sub_epi8 (q[g], c32);
        __m256i sg = _mm256_shuffle_epi8 (s8, pick);

        for (c = 0; c < nc; c++) {
          __m256i p = signed_pairs (qg, _mm256_loadu_si256 ((const __m256i *)
                  (cols->qx[c] + 256 * i + 128 * h + 32 * g)));

          sumi[c] = madd_add (sumi[c], p, sg);
        }
      }
    }
    for (c = 0; c < nc; c++)
      acc[c] = _mm256_fmadd_ps (_mm256_set1_ps (d * cols->dx[c][8 * i]),
          _mm256_cvtepi32_ps (sumi[c]), acc[c]);
  }
  for (c = 0; c < nc; c++)
    out[c] = npu_hsum_m256 (acc[c]);
}

/* A Q4_0 (@five FALSE) or Q5_0 row: codes q - 8 (q - 16), a block of 32
 * a float scale; with @has_min a Q4_1 or Q5_1 row: codes q as they are
 * and an offset m a block, whose term is m d_b times the block's code sum
 * (@xsum) */
static float
dot_q45_0 (const guint8 * row, gsize k, gboolean five, gboolean has_min,
    const gint8 * qx, const float *dx, const float *xsum)
{
  const __m256i m4 = _mm256_set1_epi8 (0xf);
  const __m256i bias = _mm256_set1_epi8 (has_min ? 0 : five ? 16 : 8);
  /* bit j of qh to byte j's 0x10: byte j of the shuffled word holds
   * qh's byte j / 8, and the mask picks bit j % 8 */
  const __m256i spread = _mm256_setr_epi8 (0, 0, 0, 0, 0, 0, 0, 0,
      1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bits = _mm256_set1_epi64x (0x8040201008040201);
  gsize head = has_min ? 4 : 2, bytes = head + (five ? 20 : 16), i;
  __m256 acc = _mm256_setzero_ps ();
  float off = 0.0f;

  for (i = 0; i < k / 32; i++) {
    const guint8 *b = row + i * bytes, *qs = b + head + (five ? 4 : 0);
    __m128i v = _mm_loadu_si128 ((const __m128i *) qs);
    __m256i q = _mm256_and_si256 (_mm256_setr_m128i (v,
            _mm_srli_epi16 (v, 4)), m4);
    __m256i p;

    if (five) {
      guint32 qh;
      __m256i hb;

      memcpy (&qh, b + head, 4);
      hb = _mm256_shuffle_epi8 (_mm256_set1_epi32 ((gint32) qh), spread);
      hb = _mm256_cmpeq_epi8 (_mm256_and_si256 (hb, bits), bits);
      q = _mm256_or_si256 (q, _mm256_and_si256 (hb, _mm256_set1_epi8 (16)));
    }
    q = _mm256_sub_epi8 (q, bias);
    p = _mm256_madd_epi16 (signed_pairs (q,
            _mm256_loadu_si256 ((const __m256i *) (qx + 32 * i))),
        _mm256_set1_epi16 (1));
    acc = _mm256_fmadd_ps (_mm256_set1_ps (half_to_float (b) * dx[i]),
        _mm256_cvtepi32_ps (p), acc);
    if (has_min)
      off += (half_to_float (b + 2) * dx[i]) * xsum[i];
  }
  return npu_hsum_m256 (acc) + off;
}

#elif defined(__ARM_FEATURE_DOTPROD)
/* The fused row dots of the neon copy, ggml's NEON
 * ggml_vec_dot_*_q8_* in form: the codes unpacked in registers, sdot
 * (signed codes by signed activations, 4 products a lane, exact), the
 * K-quants' scales applied to each half's int32 sums by mla. */

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* sdot of the 32 codes @q0, @q1 with 32 activations at @x, in 4 lanes */
static inline int32x4_t
dot32 (int8x16_t q0, int8x16_t q1, const gint8 * x)
{
  return vdotq_s32 (vdotq_s32 (vdupq_n_s32 (0), q0, vld1q_s8 (x)), q1,
      vld1q_s8 (x + 16));
}

/* A Q4_K (@five FALSE) or Q5_K row times @nc columns */
static ALWAYS_INLINE void
dot_q45_k (const guint8 * row, gsize k, gboolean five, const Cols * cols,
    guint nc, float *out)
{
  const uint8x16_t m4 = vdupq_n_u8 (0xf), m1 = vdupq_n_u8 (1);
  gsize bytes = five ? 176 : 144, i;
  float32x4_t acc[MAX_FUSED], accm[MAX_FUSED];
  guint c;

  for (c = 0; c < nc; c++)
    acc[c] = accm[c] = vdupq_n_f32 (0.0f);
  for (i = 0; i < k / 256; i++) {
    const guint8 *b = row + i * bytes, *qh = b + 16;
    const guint8 *qs = b + (five ? 48 : 16);
    float d = half_to_float (b), dmin = half_to_float (b + 2);
    int32x4_t sumi[MAX_FUSED];
    uint8x16_t h0 = vdupq_n_u8 (0), h1 = vdupq_n_u8 (0);
    guint32 t[4];
    const guint8 *sc = (const guint8 *) t;
    float32x4_t mins0, mins1;
    uint16x8_t mins;
    guint j;

    k4_scales_mins (b + 4, t);
    mins = vmovl_u8 (vld1_u8 (sc + 8));
    mins0 = vcvtq_f32_u32 (vmovl_u16 (vget_low_u16 (mins)));
    mins1 = vcvtq_f32_u32 (vmovl_u16 (vget_high_u16 (mins)));
    if (five) {
      h0 = vld1q_u8 (qh);
      h1 = vld1q_u8 (qh + 16);
    }
    for (c = 0; c < nc; c++) {
      /* mins . the blocks' code sums */
      float32x4_t ms = vmulq_f32 (mins0, vld1q_f32 (cols->xsum[c] + 8 * i));

      ms = vfmaq_f32 (ms, mins1, vld1q_f32 (cols->xsum[c] + 8 * i + 4));
      accm[c] = vfmaq_n_f32 (accm[c], ms, dmin * cols->dx[c][8 * i]);
      sumi[c] = vdupq_n_s32 (0);
    }
    for (j = 0; j < 4; j++) {
      uint8x16_t v0 = vld1q_u8 (qs + 32 * j), v1 = vld1q_u8 (qs + 32 * j + 16);
      uint8x16_t lo0 = vandq_u8 (v0, m4), lo1 = vandq_u8 (v1, m4);
      uint8x16_t hi0 = vshrq_n_u8 (v0, 4), hi1 = vshrq_n_u8 (v1, 4);

      if (five) {
        lo0 = vorrq_u8 (lo0, vshlq_n_u8 (vandq_u8 (h0, m1), 4));
        lo1 = vorrq_u8 (lo1, vshlq_n_u8 (vandq_u8 (h1, m1), 4));
        h0 = vshrq_n_u8 (h0, 1);
        h1 = vshrq_n_u8 (h1, 1);
        hi0 = vorrq_u8 (hi0, vshlq_n_u8 (vandq_u8 (h0, m1), 4));
        hi1 = vorrq_u8 (hi1, vshlq_n_u8 (vandq_u8 (h1, m1), 4));
        h0 = vshrq_n_u8 (h0, 1);
        h1 = vshrq_n_u8 (h1, 1);
      }
      for (c = 0; c < nc; c++) {
        const gint8 *x = cols->qx[c] + 256 * i + 64 * j;

        /* codes 0..31: as signed bytes they are the same values */
        sumi[c] = vmlaq_n_s32 (sumi[c], dot32 (vreinterpretq_s8_u8 (lo0),
                vreinterpretq_s8_u8 (lo1), x), sc[2 * j]);
        sumi[c] = vmlaq_n_s32 (sumi[c], dot32 (vreinterpretq_s8_u8 (hi0),
                vreinterpretq_s8_u8 (hi1), x + 32), sc[2 * j + 1]);
      }
    }
    for (c = 0; c < nc; c++)
      acc[c] = vfmaq_n_f32 (acc[c], vcvtq_f32_s32 (sumi[c]),
          d * cols->dx[c][8 * i]);
  }
  for (c = 0; c < nc; c++)
    out[c] = vaddvq_f32 (acc[c]) - vaddvq_f32 (accm[c]);
}

/* A Q6_K row: codes q - 32, int8 scales a group of 16 */
static ALWAYS_INLINE void
dot_q6_k (const guint8 * row, gsize k, const Cols * cols, guint nc, float *out)
{
  const uint8x16_t m4 = vdupq_n_u8 (0xf), m3 = vdupq_n_u8 (3);
  const int8x16_t c32 = vdupq_n_s8 (32);
  float32x4_t acc[MAX_FUSED];
  gsize i;
  guint c;

  for (c = 0; c < nc; c++)
    acc[c] = vdupq_n_f32 (0.0f);
  for (i = 0; i < k / 256; i++) {
    const guint8 *b = row + i * 210;
    const gint8 *sc = (const gint8 *) (b + 192);
    float d = half_to_float (b + 208);
    int32x4_t sumi[MAX_FUSED];
    guint h, g, l;

    for (c = 0; c < nc; c++)
      sumi[c] = vdupq_n_s32 (0);
    for (h = 0; h < 2; h++) {
      const guint8 *L = b + 64 * h, *H = b + 128 + 32 * h;
      /* [g][half]: value 32 g + 16 half + l of the 128 */
      int8x16_t q[4][2];

      for (l = 0; l < 2; l++) {
        uint8x16_t l0 = vld1q_u8 (L + 16 * l), l1 = vld1q_u8 (L + 32 + 16 * l);
        uint8x16_t hb = vld1q_u8 (H + 16 * l);

        q[0][l] = vreinterpretq_s8_u8 (vorrq_u8 (vandq_u8 (l0, m4),
                vshlq_n_u8 (vandq_u8 (hb, m3), 4)));
        q[1][l] = vreinterpretq_s8_u8 (vorrq_u8 (vandq_u8 (l1, m4),
                vshlq_n_u8 (vandq_u8 (vshrq_n_u8 (hb, 2), m3), 4)));
        q[2][l] = vreinterpretq_s8_u8 (vorrq_u8 (vshrq_n_u8 (l0, 4),
                vshlq_n_u8 (vandq_u8 (vshrq_n_u8 (hb, 4), m3), 4)));
        q[3][l] = vreinterpretq_s8_u8 (vorrq_u8 (vshrq_n_u8 (l1, 4),
                vshlq_n_u8 (vshrq_n_u8 (hb, 6), 4)));
      }
      for (g = 0; g < 4; g++) {
        int8x16_t qa = vsubq_s8 (q[g][0], c32), qb = vsubq_s8 (q[g][1], c32);

        for (c = 0; c < nc; c++) {
          const gint8 *x = cols->qx[c] + 256 * i + 128 * h + 32 * g;

          sumi[c] = vmlaq_n_s32 (sumi[c], vdotq_s32 (vdupq_n_s32 (0), qa,
                  vld1q_s8 (x)), sc[8 * h + 2 * g]);
          sumi[c] = vmlaq_n_s32 (sumi[c], vdotq_s32 (vdupq_n_s32 (0), qb,
                  vld1q_s8 (x + 16)), sc[8 * h + 2 * g + 1]);
        }
      }
    }
    for (c = 0; c < nc; c++)
      acc[c] = vfmaq_n_f32 (acc[c], vcvtq_f32_s32 (sumi[c]),
          d * cols->dx[c][8 * i]);
  }
  for (c = 0; c < nc; c++)
    out[c] = vaddvq_f32 (acc[c]);
}

/* A Q4_0 (@five FALSE) or Q5_0 row: codes q - 8 (q - 16), a block of 32
 * a float scale; Q5_0's fifth bits spread to bytes by a bit test; with
 * @has_min a Q4_1 or Q5_1 row (as the AVX2 copy) */
static float
dot_q45_0 (const guint8 * row, gsize k, gboolean five, gboolean has_min,
    const gint8 * qx, const float *dx, const float *xsum)
{
  static const guint8 bit_of[16] = { 1, 2, 4, 8, 16, 32, 64, 128,
    1, 2, 4, 8, 16, 32, 64, 128
  };
  const uint8x16_t m4 = vdupq_n_u8 (0xf), bits = vld1q_u8 (bit_of);
  const uint8x16_t m16 = vdupq_n_u8 (16);
  const int8x16_t bias = vdupq_n_s8 (has_min ? 0 : five ? 16 : 8);
  gsize head = has_min ? 4 : 2, bytes = head + (five ? 20 : 16), i;
  float32x4_t acc = vdupq_n_f32 (0.0f);
  float off = 0.0f;

  for (i = 0; i < k / 32; i++) {
    const guint8 *b = row + i * bytes, *qs = b + head + (five ? 4 : 0);
    uint8x16_t v = vld1q_u8 (qs);
    uint8x16_t lo = vandq_u8 (v, m4), hi = vshrq_n_u8 (v, 4);

    if (five) {
      const guint8 *qh = b + head;
      uint8x16_t blo = vcombine_u8 (vdup_n_u8 (qh[0]), vdup_n_u8 (qh[1]));
      uint8x16_t bhi = vcombine_u8 (vdup_n_u8 (qh[2]), vdup_n_u8 (qh[3]));

      lo = vorrq_u8 (lo, vandq_u8 (vtstq_u8 (blo, bits), m16));
      hi = vorrq_u8 (hi, vandq_u8 (vtstq_u8 (bhi, bits), m16));
    }
    acc = vfmaq_n_f32 (acc, vcvtq_f32_s32 (dot32 (vsubq_s8
                (vreinterpretq_s8_u8 (lo), bias), vsubq_s8 (vreinterpretq_s8_u8
                    (hi), bias), qx + 32 * i)), half_to_float (b) * dx[i]);
    if (has_min)
      off += (half_to_float (b + 2) * dx[i]) * xsum[i];
  }
  return vaddvq_f32 (acc) + off;
}
#endif

#ifdef FUSED
/* One K-quant row times @nc <= MAX_FUSED columns, @nc a constant after
 * inlining (fused_dots ()) */
static ALWAYS_INLINE void
k_dots (guint32 type, const guint8 * row, gsize k, const Cols * cols,
    guint nc, float *out)
{
  if (type == NPU_GGML_TYPE_Q6_K)
    dot_q6_k (row, k, cols, nc, out);
  else
    dot_q45_k (row, k, type == NPU_GGML_TYPE_Q5_K, cols, nc, out);
}

/* A row of @type times @nc columns, where this level has a fused dot */
static void
fused_dots (guint32 type, const guint8 * row, gsize k, const Cols * cols,
    guint nc, float *out)
{
  guint c;

  switch (type) {
    case NPU_GGML_TYPE_Q4_K:
    case NPU_GGML_TYPE_Q5_K:
    case NPU_GGML_TYPE_Q6_K:
      switch (nc) {
        case 1:
          k_dots (type, row, k, cols, 1, out);
          break;
        case 2:
          k_dots (type, row, k, cols, 2, out);
          break;
        case 3:
          k_dots (type, row, k, cols, 3, out);
          break;
        default:
          k_dots (type, row, k, cols, 4, out);
          break;
      }
      break;
    default:
      for (c = 0; c < nc; c++)
        out[c] = dot_q45_0 (row, k, type == NPU_GGML_TYPE_Q5_0 ||
            type == NPU_GGML_TYPE_Q5_1, type == NPU_GGML_TYPE_Q4_1 ||
            type == NPU_GGML_TYPE_Q5_1, cols->qx[c], cols->dx[c],
            cols->xsum[c]);
      break;
  }
}
#endif /* FUSED */

/* Rows [r0, r1) of the rows x k matrix @w (@row_bytes a row) times
 * @n_cols columns of activation codes: column c's pass p has its codes at
 * qx + (p n_cols + c) col_stride, its block scales and code sums at
 * (p n_cols + c) col_stride / 32 in @dx and @xsum; the passes are summed
 * into y[c y_stride + r] */
void
NAME (npu_blocks_rows) (guint32 type, const guint8 * w, gsize row_bytes,
    gsize r0, gsize r1, gsize k, const gint8 * qx, const float *dx,
    const float *xsum, guint n_cols, guint n_passes, gsize col_stride,
    float *y, gsize y_stride)
{
  guint n = n_cols * n_passes, c;
  gsize r;
#ifdef FUSED
  /* each row's codes unpacked in registers once for up to MAX_FUSED
   * column passes */
  g_assert (n <= MAX_PASSES);
  for (r = r0; r < r1; r++) {
    float part[MAX_PASSES];

    for (c = 0; c < n; c += MAX_FUSED) {
      guint nc = MIN (MAX_FUSED, n - c), i;
      Cols cols;

      for (i = 0; i < nc; i++) {
        gsize at = (c + i) * col_stride;

        cols.qx[i] = qx + at;
        cols.dx[i] = dx + at / 32;
        cols.xsum[i] = xsum + at / 32;
      }
      fused_dots (type, w + r * row_bytes, k, &cols, nc, part + c);
    }
    for (c = 0; c < n_cols; c++) {
      float v = 0.0f;
      guint p;

      for (p = 0; p < n_passes; p++)
        v += part[p * n_cols + c];
      y[c * y_stride + r] = v;
    }
  }
#else
  /* the types whose blocks have an offset (a min) */
  gboolean offsets = type == NPU_GGML_TYPE_Q4_1 ||
      type == NPU_GGML_TYPE_Q5_1 || type == NPU_GGML_TYPE_Q4_K ||
      type == NPU_GGML_TYPE_Q5_K;
  /* a unit is the type's block: 256 values (the K-quants) or 32 */
  guint unit = 32, nb, b;
  gsize unit_bytes, u0;

  g_assert (n <= MAX_PASSES);
  npu_ggml_type_info (type, &unit, NULL);
  nb = unit / 32;
  unit_bytes = row_bytes / (k / unit);
  for (r = r0; r < r1; r++) {
    const guint8 *row = w + r * row_bytes;
    Unit u;
    Acc acc[MAX_PASSES];
    /* the offsets' terms, one lane per block of the unit (summed at the
     * end, so the loop below is element-wise and vectorises) */
    float off[MAX_PASSES][8];

    for (c = 0; c < n; c++) {
      acc[c] = acc_zero ();
      for (b = 0; b < 8; b++)
        off[c][b] = 0.0f;
    }
    for (u0 = 0; u0 < k; u0 += unit) {
      unpack (type, row + (u0 / unit) * unit_bytes, &u);
      for (c = 0; c < n; c++) {
        const gint8 *x = qx + c * col_stride + u0;
        const float *d = dx + (c * col_stride + u0) / 32;
        const float *s = xsum + (c * col_stride + u0) / 32;

        for (b = 0; b < nb; b++)
          acc[c] = acc_block (acc[c], u.q + 32 * b, x + 32 * b, u.s[2 * b],
              u.s[2 * b + 1], d[b]);
        if (offsets)
          for (b = 0; b < nb; b++)
            off[c][b] += (u.o[b] * d[b]) * s[b];
      }
    }
    for (c = 0; c < n_cols; c++) {
      float v = 0.0f;
      guint p;

      for (p = 0; p < n_passes; p++) {
        guint i = p * n_cols + c;

        v += acc_sum (acc[i]);
        for (b = 0; b < 8; b++)
          v += off[i][b];
      }
      y[c * y_stride + r] = v;
    }
  }
#endif
}
