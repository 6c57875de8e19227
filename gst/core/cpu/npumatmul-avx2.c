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
#include "npuhsum-avx.h"

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
      y[(c + j) * ldy + r + i] = npu_hsum_m256 (acc[i][j]);
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
      y[(c + j) * ldy + r + i] = npu_hsum_m256 (acc[i][j]);
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
 * division by 4), with 16 rows (2 ymm) x 5 activation rows: 10 of the 16
 * registers accumulate, 10 FMAs for 2 loads and 5 broadcasts per k (see
 * f32_micro() for why not 6).  Per chunk of 128 k, each panel of 16 rows
 * x 128 k (8 KiB) is decoded 8 rows at a time: vpgatherdd of 4 nibble
 * bytes per row, vpermps looks up the magnitude (it reads the low 3 bits
 * of each index), and the nibble's bit 3 is shifted into the sign.  Each
 * decoded weight then serves up to 240 activation rows (a column tile,
 * npumatmul.c).
 */
#define F32_PANEL_ROWS 16
#define F32_PANEL_BLOCKS 4
#define F32_KC (32 * F32_PANEL_BLOCKS)
#define F32_NR 5
#define F32_PANEL_SCALE 0.25f

static const float e2m1_mag_f32[8] __attribute__((aligned (32))) = {
  0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
};

/* Weights of rows [r, r + valid) and blocks [b0, b0 + nbc) into
 * panel[kk * 16 + row], divided by 4; rows past @valid are zero. */
static void
f32_decode_panel (const NpuMxfp4Matrix * w, gsize r, gsize valid, gsize b0,
    gsize nbc, float *panel)
{
  const __m256 lut = _mm256_load_ps (e2m1_mag_f32);
  const __m256i sign = _mm256_set1_epi32 ((int) 0x80000000u);
  const gboolean split = w->layout == NPU_MXFP4_LAYOUT_SPLIT;
  const gsize row_bytes = split ? w->stride * 16 : w->n_blocks * 17;
  const __m256i offs = _mm256_mullo_epi32 (_mm256_set_epi32 (7, 6, 5, 4, 3,
          2, 1, 0), _mm256_set1_epi32 ((int) row_bytes));
  gsize v, b, i;

  for (v = 0; v < F32_PANEL_ROWS / 8; v++) {
    const gsize rv = r + 8 * v;
    const gsize nv = valid > 8 * v ? MIN (8, valid - 8 * v) : 0;
    gint32 lanes[8];
    __m256i m;

    for (i = 0; i < 8; i++)
      lanes[i] = i < nv ? -1 : 0;
    m = _mm256_loadu_si256 ((const __m256i *) lanes);
    for (b = 0; b < nbc; b++) {
      const guint8 *qs;
      float sc[8] __attribute__((aligned (32)));
      __m256 s;
      int t, u;

      if (nv == 0) {
        for (i = 0; i < 32; i++)
          _mm256_store_ps (panel + ((b * 32 + i) * F32_PANEL_ROWS + 8 * v),
              _mm256_setzero_ps ());
        continue;
      }
      /* NaN scales stay NaN (the table's entry 255), so their rows are */
      for (i = 0; i < 8; i++) {
        guint8 e = 0;

        if (i < nv)
          e = split ? w->scales[(rv + i) * w->stride + b0 + b] :
              w->blocks[(rv + i) * w->n_blocks + b0 + b].e;
        sc[i] = i < nv ? npu_matmul_e8m0_table[e] * F32_PANEL_SCALE : 0.0f;
      }
      s = _mm256_load_ps (sc);
      qs = split ? w->nibbles + (rv * w->stride + b0 + b) * 16 :
          (const guint8 *) (w->blocks + rv * w->n_blocks + b0 + b) + 1;
      for (t = 0; t < 4; t++) {
        /* bytes 4t..4t+3 of each row's 16: elements 4t + u (low nibbles)
         * and 16 + 4t + u (high nibbles) */
        const __m256i g = _mm256_mask_i32gather_epi32 (_mm256_setzero_si256 (),
            (const int *) (qs + 4 * t), offs, m, 1);

        for (u = 0; u < 4; u++) {
          const gsize j = 4 * t + u;
          __m256 lo = _mm256_permutevar8x32_ps (lut, _mm256_srli_epi32 (g,
                  8 * u));
          __m256 hi = _mm256_permutevar8x32_ps (lut, _mm256_srli_epi32 (g,
                  8 * u + 4));

          lo = _mm256_xor_ps (lo, _mm256_castsi256_ps (_mm256_and_si256
                  (_mm256_slli_epi32 (g, 28 - 8 * u), sign)));
          hi = _mm256_xor_ps (hi, _mm256_castsi256_ps (_mm256_and_si256
                  (_mm256_slli_epi32 (g, 24 - 8 * u), sign)));
          _mm256_store_ps (panel + ((b * 32 + j) * F32_PANEL_ROWS + 8 * v),
              _mm256_mul_ps (lo, s));
          _mm256_store_ps (panel + ((b * 32 + 16 + j) * F32_PANEL_ROWS +
                  8 * v), _mm256_mul_ps (hi, s));
        }
      }
    }
  }
}

/* y[j * ldy + 0..15] (+)= sum over kk < kc of panel[kk][..] x[j * ldx + kk]
 * for j < C; @lanes (16 of -1 or 0) masks the rows.  The masks are loaded
 * after the loop, not held in registers through it: 10 accumulators, 2
 * weight vectors and a broadcast leave 3 of the 16 ymm free, so no
 * accumulator goes to the stack (with 6 activation rows, 12 accumulators
 * and the masks, GCC spilled two, and every k waited on their store and
 * reload: 45 % of the FMA peak instead of 75-80 %). */
static ALWAYS_INLINE void
f32_micro (const float *panel, gsize kc, const float *x, gsize ldx,
    float *y, gsize ldy, const gint32 * lanes, gboolean first, const int C)
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
  for (v = 0; v < 2; v++) {
    const __m256i m = _mm256_loadu_si256 ((const __m256i *) (lanes + 8 * v));

    for (j = 0; j < C; j++) {
      float *yp = y + j * ldy + 8 * v;
      __m256 r = _mm256_mul_ps (acc[v][j],
          _mm256_set1_ps (1.0f / F32_PANEL_SCALE));

      if (!first)
        r = _mm256_add_ps (_mm256_maskload_ps (yp, m), r);
      _mm256_maskstore_ps (yp, m, r);
    }
  }
}

void
npu_mxfp4_tile_f32_avx2 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const float *x, gsize c0, gsize c1, float *y, gsize ldy)
{
  float panel[F32_KC * F32_PANEL_ROWS] __attribute__((aligned (32)));
  const gsize k = w->k, nb = w->n_blocks;
  gsize r, b0, c;

  for (b0 = 0; b0 < nb; b0 += F32_PANEL_BLOCKS) {
    const gsize nbc = MIN (F32_PANEL_BLOCKS, nb - b0), kc = 32 * nbc;
    const gboolean first = b0 == 0;

    for (r = r0; r < r1; r += F32_PANEL_ROWS) {
      const gsize valid = MIN (F32_PANEL_ROWS, r1 - r);
      gint32 m[F32_PANEL_ROWS];
      gsize i;

      for (i = 0; i < F32_PANEL_ROWS; i++)
        m[i] = i < valid ? -1 : 0;
      f32_decode_panel (w, r, valid, b0, nbc, panel);
      for (c = c0; c < c1; c += F32_NR) {
        const float *xc = x + c * k + b0 * 32;
        float *yc = y + c * ldy + r;

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
          default:
            f32_micro (panel, kc, xc, k, yc, ldy, m, first, 5);
            break;
        }
      }
    }
  }
}
