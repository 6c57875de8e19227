/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 x int8 and Q8_0 x int8 kernels for AVX2 + FMA (+ F16C)
 *
 * Built with -mavx2 -mfma -mf16c; only called when the CPU has them.  One ymm
 * holds
 * 2 blocks (one per 128-bit lane, low nibbles then high nibbles), decoded by
 * vpshufb into unsigned 2 * P + 12.  Without VNNI the products go through
 * vpmaddubsw (u8 x s8 -> pairs summed to s16: at most 2 * 24 * 127, and two
 * of those added stay below 2^15) and vpmaddwd by ones to int32.  Scales come
 * from a 256-entry table, broadcast straight from memory.
 *
 * Q8_0 weights: one ymm holds one block's 32 codes, multiplied as ggml's
 * vec_dot_q8_0_q8_0 does: vpmaddubsw takes |w| (unsigned) and x with w's
 * sign (vpsignb), pairs of products at most 2 * 128 * 127 < 2^15, then
 * vpmaddwd by ones gives 8 int32 lanes of 4 products each, scaled by
 * d_w d_x (the F16 d_w widened by vcvtph2ps).
 */
#include "npumatmul-private.h"

#include <immintrin.h>
#include <string.h>

/* Micro tile: 16 ymm registers hold RM * CM accumulators, RM decoded rows
 * (3 registers each) and the activations */
#define RM 2
#define CM 2

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

/* Software prefetch distance along the weights, as in the AVX-512 kernel */
#define PF_DIST 4096

static const guint8 lut_bytes[16] = {
  12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0
};

typedef struct
{
  __m256i lo, hi;
  __m256 s;
} Decoded;

static ALWAYS_INLINE Decoded
decode (__m256i qs, const float *s0, const float *s1)
{
  const __m256i lut =
      _mm256_broadcastsi128_si256 (_mm_loadu_si128 ((const __m128i *)
          lut_bytes));
  const __m256i m4 = _mm256_set1_epi8 (0x0F);
  Decoded d;

  d.lo = _mm256_shuffle_epi8 (lut, _mm256_and_si256 (qs, m4));
  d.hi = _mm256_shuffle_epi8 (lut,
      _mm256_and_si256 (_mm256_srli_epi16 (qs, 4), m4));
  d.s = _mm256_insertf128_ps (_mm256_castps128_ps256 (_mm_broadcast_ss (s0)),
      _mm_broadcast_ss (s1), 1);
  return d;
}

/* 2 ggml blocks at @p (34 bytes) */
static ALWAYS_INLINE Decoded
load_blocks (const guint8 * p)
{
  return decode (_mm256_loadu2_m128i ((const __m128i *) (p + 18),
          (const __m128i *) (p + 1)), &npu_matmul_e8m0_table[p[0]],
      &npu_matmul_e8m0_table[p[17]]);
}

static ALWAYS_INLINE Decoded
load_split (const guint8 * nib, const guint8 * e)
{
  return decode (_mm256_load_si256 ((const __m256i *) nib),
      &npu_matmul_e8m0_table[e[0]], &npu_matmul_e8m0_table[e[1]]);
}

/* Half @h (blocks 2h, 2h + 1) of a group */
static ALWAYS_INLINE void
half_step (const Decoded * wd, const guint8 * xp, gsize xstride, int h,
    __m256 acc[RM][CM], const int R, const int C)
{
  const __m256i ones = _mm256_set1_epi16 (1);
  int i, j;

  for (j = 0; j < C; j++) {
    const guint8 *xg = xp + j * xstride;
    const __m256i xlo = _mm256_load_si256 ((const __m256i *) (xg + 32 * h));
    const __m256i xhi =
        _mm256_load_si256 ((const __m256i *) (xg + 64 + 32 * h));
    const __m256i corr =
        _mm256_load_si256 ((const __m256i *) (xg + 128 + 32 * h));
    const __m256 dx = _mm256_load_ps ((const float *) (xg + 192 + 32 * h));

    for (i = 0; i < R; i++) {
      __m256i s16 = _mm256_add_epi16 (_mm256_maddubs_epi16 (wd[i].lo, xlo),
          _mm256_maddubs_epi16 (wd[i].hi, xhi));
      __m256i t = _mm256_add_epi32 (_mm256_madd_epi16 (s16, ones), corr);

      acc[i][j] = _mm256_fmadd_ps (_mm256_cvtepi32_ps (t),
          _mm256_mul_ps (wd[i].s, dx), acc[i][j]);
    }
  }
}

static ALWAYS_INLINE float
hsum (__m256 v)
{
  __m128 s = _mm_add_ps (_mm256_castps256_ps128 (v),
      _mm256_extractf128_ps (v, 1));

  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  s = _mm_add_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}

static ALWAYS_INLINE void
micro (const NpuMxfp4Matrix * w, gsize r, const NpuQ8Act * xq, gsize c,
    float *y, gsize ldy, const int R, const int C, const gboolean split)
{
  __m256 acc[RM][CM];
  Decoded wd[RM];
  const gsize nb = w->n_blocks;
  const gsize n_full = split ? xq->n_groups : nb / 4;
  const guint8 *xp = xq->data + c * xq->row_stride;
  gsize g;
  int i, j, h;

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      acc[i][j] = _mm256_setzero_ps ();

  for (g = 0; g < n_full; g++) {
    for (h = 0; h < 2; h++) {
      for (i = 0; i < R; i++) {
        if (split) {
          const guint8 *nib = w->nibbles + ((r + i) * w->stride + 4 * g +
              2 * h) * 16;

          if (h == 0)
            _mm_prefetch ((const char *) nib + PF_DIST, _MM_HINT_T0);
          wd[i] = load_split (nib, w->scales + (r + i) * w->stride + 4 * g +
              2 * h);
        } else {
          const guint8 *p = (const guint8 *) (w->blocks + (r + i) * nb +
              4 * g + 2 * h);

          _mm_prefetch ((const char *) p + PF_DIST, _MM_HINT_T0);
          wd[i] = load_blocks (p);
        }
      }
      half_step (wd, xp + g * NPU_Q8_GROUP_BYTES, xq->row_stride, h, acc, R, C);
    }
  }

  if (!split && n_full < xq->n_groups) {
    /* 1 to 3 trailing blocks, copied to a zeroed group */
    guint8 buf[RM][4 * sizeof (NpuBlockMxfp4)];

    for (h = 0; h < 2; h++) {
      for (i = 0; i < R; i++) {
        if (h == 0) {
          memset (buf[i], 0, sizeof (buf[i]));
          memcpy (buf[i], w->blocks + (r + i) * nb + 4 * n_full,
              (nb - 4 * n_full) * sizeof (NpuBlockMxfp4));
        }
        wd[i] = load_blocks (buf[i] + h * 2 * sizeof (NpuBlockMxfp4));
      }
      half_step (wd, xp + n_full * NPU_Q8_GROUP_BYTES, xq->row_stride, h,
          acc, R, C);
    }
  }

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      y[(c + j) * ldy + r + i] = hsum (acc[i][j]);
}

#define MICRO_CASES(R, split) \
  switch (cc) { \
    case 1: micro (w, r, xq, c, y, ldy, R, 1, split); break; \
    default: micro (w, r, xq, c, y, ldy, R, 2, split); break; \
  }

void
npu_mxfp4_tile_avx2 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy)
{
  gsize c, r;

  G_STATIC_ASSERT (CM == 2);
  for (c = c0; c < c1; c += CM) {
    const gsize cc = MIN (CM, c1 - c);

    if (cc == 1) {
      /* GEMV: one sequential stream per thread (see the AVX-512 kernel) */
      for (r = r0; r < r1; r++) {
        if (w->layout == NPU_MXFP4_LAYOUT_SPLIT)
          micro (w, r, xq, c, y, ldy, 1, 1, TRUE);
        else
          micro (w, r, xq, c, y, ldy, 1, 1, FALSE);
      }
    } else if (w->layout == NPU_MXFP4_LAYOUT_SPLIT) {
      for (r = r0; r + RM <= r1; r += RM)
        MICRO_CASES (RM, TRUE);
      for (; r < r1; r++)
        MICRO_CASES (1, TRUE);
    } else {
      for (r = r0; r + RM <= r1; r += RM)
        MICRO_CASES (RM, FALSE);
      for (; r < r1; r++)
        MICRO_CASES (1, FALSE);
    }
  }
}

/* ------------------------------------------------------------------------
 * Q8_0 weights
 */
typedef struct
{
  __m256i w, aw;                /* codes and |codes| */
  __m256 s;                     /* d_w in every lane */
} Q8Decoded;

static ALWAYS_INLINE Q8Decoded
q8_0_decode (const NpuBlockQ8_0 * blk)
{
  Q8Decoded d;

  d.w = _mm256_loadu_si256 ((const __m256i *) blk->qs);
  d.aw = _mm256_sign_epi8 (d.w, d.w);
  d.s = _mm256_cvtph_ps (_mm_set1_epi16 ((short) (blk->d[0] | blk->d[1] << 8)));
  return d;
}

/* Block @h of a pair: R decoded weight rows times C activation rows */
static ALWAYS_INLINE void
q8_0_step (const Q8Decoded * wd, const guint8 * xp, gsize xstride, int h,
    __m256 acc[RM][CM], const int R, const int C)
{
  const __m256i ones = _mm256_set1_epi16 (1);
  int i, j;

  for (j = 0; j < C; j++) {
    const guint8 *xg = xp + j * xstride;
    const __m256i x = _mm256_load_si256 ((const __m256i *) (xg + 32 * h));
    const __m256 dx = _mm256_load_ps ((const float *) (xg + 64 + 32 * h));

    for (i = 0; i < R; i++) {
      const __m256i s16 = _mm256_maddubs_epi16 (wd[i].aw,
          _mm256_sign_epi8 (x, wd[i].w));
      const __m256i t = _mm256_madd_epi16 (s16, ones);

      acc[i][j] = _mm256_fmadd_ps (_mm256_cvtepi32_ps (t),
          _mm256_mul_ps (wd[i].s, dx), acc[i][j]);
    }
  }
}

static ALWAYS_INLINE void
q8_0_micro (const NpuBlockQ8_0 * w, gsize nb, gsize r, const NpuQ8Act * xq,
    gsize c, float *y, gsize ldy, const int R, const int C)
{
  __m256 acc[RM][CM];
  Q8Decoded wd[RM];
  const guint8 *xp = xq->data + c * xq->row_stride;
  gsize b;
  int i, j;

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      acc[i][j] = _mm256_setzero_ps ();

  for (b = 0; b < nb; b++) {
    for (i = 0; i < R; i++) {
      const NpuBlockQ8_0 *blk = w + (r + i) * nb + b;

      if (b % 2 == 0)
        _mm_prefetch ((const char *) blk + PF_DIST, _MM_HINT_T0);
      wd[i] = q8_0_decode (blk);
    }
    q8_0_step (wd, xp + b / 2 * NPU_Q8_0_PAIR_BYTES, xq->row_stride, b % 2,
        acc, R, C);
  }

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      y[(c + j) * ldy + r + i] = hsum (acc[i][j]);
}

void
npu_q8_0_tile_avx2 (const NpuBlockQ8_0 * w, gsize nb, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy)
{
  gsize c, r;

  G_STATIC_ASSERT (CM == 2);
  for (c = c0; c < c1; c += CM) {
    if (c + 1 == c1) {
      /* GEMV: one sequential stream per thread */
      for (r = r0; r < r1; r++)
        q8_0_micro (w, nb, r, xq, c, y, ldy, 1, 1);
    } else {
      for (r = r0; r + RM <= r1; r += RM)
        q8_0_micro (w, nb, r, xq, c, y, ldy, RM, CM);
      for (; r < r1; r++)
        q8_0_micro (w, nb, r, xq, c, y, ldy, 1, CM);
    }
  }
}

/* ------------------------------------------------------------------------
 * Accurate GEMM: exact F32 activations, MXFP4 weights decoded to F32, as
 * npumatmul-avx512.c's (which explains the panel, the chunks and the
 * division by 4), with 16 rows (2 ymm) x 6 activation rows: 12 of the 16
 * registers accumulate, 12 FMAs for 2 loads and 6 broadcasts per k.  The
 * panel of 16 rows x 128 k (8 KiB) is decoded by table, one weight at a
 * time: each decoded weight then serves up to 192 activation rows.
 */
#define F32_PANEL_ROWS 16
#define F32_PANEL_BLOCKS 4
#define F32_NR 6
#define F32_PANEL_SCALE 0.25f

static const float e2m1_f32[16] = {
  0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

static void
f32_decode_panel (const NpuMxfp4Matrix * w, gsize r, gsize valid, gsize b0,
    gsize nbc, float *panel)
{
  const gboolean split = w->layout == NPU_MXFP4_LAYOUT_SPLIT;
  gsize i, b, j;

  for (i = 0; i < F32_PANEL_ROWS; i++) {
    for (b = 0; b < nbc; b++) {
      const guint8 *qs;
      float s;

      if (i >= valid) {
        for (j = 0; j < 32; j++)
          panel[(b * 32 + j) * F32_PANEL_ROWS + i] = 0.0f;
        continue;
      }
      if (split) {
        qs = w->nibbles + ((r + i) * w->stride + b0 + b) * 16;
        s = npu_matmul_e8m0_table[w->scales[(r + i) * w->stride + b0 + b]];
      } else {
        const NpuBlockMxfp4 *blk = &w->blocks[(r + i) * w->n_blocks + b0 + b];

        qs = blk->qs;
        s = npu_matmul_e8m0_table[blk->e];
      }
      /* NaN scales stay NaN, so their rows are */
      s *= F32_PANEL_SCALE;
      for (j = 0; j < 16; j++) {
        panel[(b * 32 + j) * F32_PANEL_ROWS + i] = e2m1_f32[qs[j] & 0xF] * s;
        panel[(b * 32 + 16 + j) * F32_PANEL_ROWS + i] =
            e2m1_f32[qs[j] >> 4] * s;
      }
    }
  }
}

static ALWAYS_INLINE void
f32_micro (const float *panel, gsize kc, const float *x, gsize ldx,
    float *y, gsize ldy, const __m256i * m, gboolean first, const int C)
{
  __m256 acc[2][F32_NR];
  gsize kk;
  int v, j;

  for (v = 0; v < 2; v++)
    for (j = 0; j < C; j++)
      acc[v][j] = _mm256_setzero_ps ();
  for (kk = 0; kk < kc; kk++) {
    const float *p = panel + kk * F32_PANEL_ROWS;
    const __m256 w0 = _mm256_load_ps (p);
    const __m256 w1 = _mm256_load_ps (p + 8);

    for (j = 0; j < C; j++) {
      const __m256 xb = _mm256_broadcast_ss (x + j * ldx + kk);

      acc[0][j] = _mm256_fmadd_ps (w0, xb, acc[0][j]);
      acc[1][j] = _mm256_fmadd_ps (w1, xb, acc[1][j]);
    }
  }
  for (j = 0; j < C; j++) {
    for (v = 0; v < 2; v++) {
      float *yp = y + j * ldy + 8 * v;
      __m256 r = _mm256_mul_ps (acc[v][j],
          _mm256_set1_ps (1.0f / F32_PANEL_SCALE));

      if (!first)
        r = _mm256_add_ps (_mm256_maskload_ps (yp, m[v]), r);
      _mm256_maskstore_ps (yp, m[v], r);
    }
  }
}

void
npu_mxfp4_tile_f32_avx2 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const float *x, gsize c0, gsize c1, float *y, gsize ldy)
{
  float panel[F32_PANEL_BLOCKS * 32 * F32_PANEL_ROWS]
      __attribute__((aligned (32)));
  const gsize k = w->k, nb = w->n_blocks;
  gsize r, b0, c;

  for (r = r0; r < r1; r += F32_PANEL_ROWS) {
    const gsize valid = MIN (F32_PANEL_ROWS, r1 - r);
    __m256i m[2];
    int v, i;

    for (v = 0; v < 2; v++) {
      gint32 lanes[8];

      for (i = 0; i < 8; i++)
        lanes[i] = 8u * v + i < valid ? -1 : 0;
      m[v] = _mm256_loadu_si256 ((const __m256i *) lanes);
    }
    for (b0 = 0; b0 < nb; b0 += F32_PANEL_BLOCKS) {
      const gsize nbc = MIN (F32_PANEL_BLOCKS, nb - b0), kc = 32 * nbc;

      f32_decode_panel (w, r, valid, b0, nbc, panel);
      for (c = c0; c < c1; c += F32_NR) {
        const float *xc = x + c * k + b0 * 32;
        float *yc = y + c * ldy + r;
        const gboolean first = b0 == 0;

        switch (MIN (F32_NR, c1 - c)) {
          case 1:
            f32_micro (panel, kc, xc, k, yc, ldy, m, first, 1);
            break;
          case 2:
            f32_micro (panel, kc, xc, k, yc, ldy, m, first, 2);
            break;
          case 3:
            f32_micro (panel, kc, xc, k, yc, ldy, m, first, 3);
            break;
          case 4:
            f32_micro (panel, kc, xc, k, yc, ldy, m, first, 4);
            break;
          case 5:
            f32_micro (panel, kc, xc, k, yc, ldy, m, first, 5);
            break;
          default:
            f32_micro (panel, kc, xc, k, yc, ldy, m, first, 6);
            break;
        }
      }
    }
  }
}
