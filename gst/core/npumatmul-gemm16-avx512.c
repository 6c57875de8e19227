/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the accurate GEMM on AVX-512 VNNI: int16 activations, MXFP4
 * weights decoded to int16, vpdpwssd
 *
 * Built with the AVX-512 kernels' flags; only called when the CPU has
 * them.  An E2M1 value times two is an integer from -12 to 12, so a
 * weight decoded to int16 2P is exact.  Each block of 32 activations is
 * quantised to int16 with its own F32 scale (d = max|x| / 32767, q =
 * round (x / d)): 15 bits and a sign where the fast GEMM keeps 7.  A
 * block's 32 products 2P q then sum exactly in int32 (|sum| <= 32 x 12 x
 * 32767 < 2^24, so the conversion to F32 is exact too), and the block's
 * scales, 2^(e-127) / 2 of the weights and d of the activations, are
 * applied in F32 once per block, outside the integer sum.
 *
 * vpdpwssd makes 32 multiply-adds an instruction where an F32 FMA makes
 * 16, so this replaces the F32 GEMM (weights decoded to F32) where it
 * measures faster (docs/kernels.md).  The layout follows the fast int8
 * GEMM (npumatmul-avx512.c): the weights of 32 rows and the whole k are
 * decoded once per tile into vpdpwssd's operand order, one zmm holding 16
 * rows x 2 consecutive k as int16 pairs (2 KiB a block of 32 rows, 64
 * KiB at k = 1024, in L2), and the activations stay in their natural
 * order, so one broadcast dword is 2 consecutive codes of one activation
 * row.  The micro kernel keeps 2 x 6 int32 accumulators (32 rows x 6
 * activation rows) through a block, 16 steps of 12 vpdpwssd, then 12
 * conversions, 12 multiplies and 12 FMAs into 12 F32 accumulators: 36
 * float instructions for 192 vpdpwssd.
 */
#include "npumatmul-private.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

#define GEMM16_ROWS 32
#define GEMM16_NR 6
/* Panel bytes of one block: 16 steps of 2 k, each 2 zmm (rows 0..15 and
 * 16..31, 2 int16 per row) */
#define GEMM16_BLOCK_BYTES (16 * 128)

G_STATIC_ASSERT (NPU_GEMM16_SCRATCH (1) ==
    GEMM16_BLOCK_BYTES + GEMM16_ROWS * sizeof (float));

/* 2P of the E2M1 codes 0..15, signed, repeated in each 128-bit lane for
 * vpshufb */
static const gint8 e2m1_x2_bytes[64] __attribute__((aligned (64))) = {
  0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
  0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
  0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
  0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

/* vpshufb controls moving bytes 0 and 1 (first pair) or 2 and 3 (second
 * pair) of each dword into the high bytes of its two words, the low bytes
 * zeroed (0x80): an arithmetic shift right by 8 then sign-extends them to
 * int16.  Indices are within each 128-bit lane. */
#define PAIR_CTL(d, a, b) 0x80, 4 * (d) + (a), 0x80, 4 * (d) + (b)
#define PAIR_CTL_LANE(a, b) \
  PAIR_CTL (0, a, b), PAIR_CTL (1, a, b), PAIR_CTL (2, a, b), \
  PAIR_CTL (3, a, b)
static const guint8 pair_lo_ctl[64] __attribute__((aligned (64))) = {
  PAIR_CTL_LANE (0, 1), PAIR_CTL_LANE (0, 1), PAIR_CTL_LANE (0, 1),
  PAIR_CTL_LANE (0, 1)
};

static const guint8 pair_hi_ctl[64] __attribute__((aligned (64))) = {
  PAIR_CTL_LANE (2, 3), PAIR_CTL_LANE (2, 3), PAIR_CTL_LANE (2, 3),
  PAIR_CTL_LANE (2, 3)
};

/* ------------------------------------------------------------------------
 * Activations: int16 per block of 32
 *
 * d = max|x| / 32767 and x / d are correctly rounded divisions, then
 * rounded to the nearest integer (ties to even): |x - d q| <= d (1/2 +
 * 32767 x 2^-24), and |x / d| rounds to at most 32767.  A block with a NaN
 * or an Inf gets codes 0 and a NaN scale, so every output it meets is
 * NaN; an all-zero block gets scale 0.
 */
static ALWAYS_INLINE void
quantize_block_q16 (const float *x, gint16 * q, float *dx)
{
  const __m512 a0 = _mm512_loadu_ps (x);
  const __m512 a1 = _mm512_loadu_ps (x + 16);
  const __m512 amax = _mm512_max_ps (_mm512_abs_ps (a0), _mm512_abs_ps (a1));
  /* not finite: a NaN (unordered) or an Inf (above the largest float) */
  const __mmask16 bad = _mm512_cmp_ps_mask (_mm512_abs_ps (a0),
      _mm512_set1_ps (G_MAXFLOAT), _CMP_NLE_UQ) |
      _mm512_cmp_ps_mask (_mm512_abs_ps (a1), _mm512_set1_ps (G_MAXFLOAT),
      _CMP_NLE_UQ);
  const float m = _mm512_reduce_max_ps (amax);
  __m512 vd;
  float d;

  if (bad || m == 0.0f) {
    _mm512_storeu_si512 (q, _mm512_setzero_si512 ());
    *dx = bad ? NAN : 0.0f;
    return;
  }
  d = m / 32767.0f;
  vd = _mm512_set1_ps (d);
  _mm256_storeu_si256 ((__m256i *) q,
      _mm512_cvtsepi32_epi16 (_mm512_cvtps_epi32 (_mm512_div_ps (a0, vd))));
  _mm256_storeu_si256 ((__m256i *) (q + 16),
      _mm512_cvtsepi32_epi16 (_mm512_cvtps_epi32 (_mm512_div_ps (a1, vd))));
  *dx = d;
}

void
npu_quantize_row_q16_avx512 (const float *x, gsize nb, guint8 * row,
    gsize dx_offset)
{
  float *dx = (float *) (row + dx_offset);
  gsize b;

  for (b = 0; b < nb; b++)
    quantize_block_q16 (x + 32 * b, (gint16 *) row + 32 * b, dx + b);
}

/* ------------------------------------------------------------------------
 * Weights: the panel of 32 rows
 */

/* Rows [r, r + valid) of @w into @panel (per block b, step t: rows 0..15
 * at b * GEMM16_BLOCK_BYTES + t * 128, rows 16..31 64 bytes on, each row
 * a dword of k = 2t, 2t + 1 as int16 2P) and @scales (per block, the 32
 * rows' 2^(e-127) / 2; a NaN scale stays NaN).  Rows past @valid are zero
 * with scale 0. */
static void
gemm16_decode_panel (const NpuMxfp4Matrix * w, gsize r, gsize valid,
    guint8 * panel, float *scales)
{
  const __m512i lut = _mm512_load_si512 (e2m1_x2_bytes);
  const __m512i ctl_lo = _mm512_load_si512 (pair_lo_ctl);
  const __m512i ctl_hi = _mm512_load_si512 (pair_hi_ctl);
  const __m512i low4 = _mm512_set1_epi8 (0x0F);
  const gboolean split = w->layout == NPU_MXFP4_LAYOUT_SPLIT;
  const gsize row_bytes = split ? w->stride * 16 : w->n_blocks * 17;
  const __m512i offs = _mm512_mullo_epi32 (_mm512_set_epi32 (15, 14, 13, 12,
          11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32 ((int) row_bytes));
  const gsize nb = w->n_blocks;
  gsize v, b, i;

  for (v = 0; v < GEMM16_ROWS / 16; v++) {
    const gsize rv = r + 16 * v;
    const gsize nv = valid > 16 * v ? MIN (16, valid - 16 * v) : 0;
    const __mmask16 m = (__mmask16) ((1u << nv) - 1);

    for (b = 0; b < nb; b++) {
      guint8 *pb = panel + b * GEMM16_BLOCK_BYTES + 64 * v;
      const guint8 *qs;
      int t;

      for (i = 0; i < 16; i++) {
        guint8 e = 0;

        if (i < nv)
          e = split ? w->scales[(rv + i) * w->stride + b] :
              w->blocks[(rv + i) * nb + b].e;
        scales[b * GEMM16_ROWS + 16 * v + i] =
            i < nv ? npu_matmul_e8m0_table[e] * 0.5f : 0.0f;
      }
      if (nv == 0) {
        for (t = 0; t < 16; t++)
          _mm512_store_si512 (pb + t * 128, _mm512_setzero_si512 ());
        continue;
      }
      qs = split ? w->nibbles + (rv * w->stride + b) * 16 :
          (const guint8 *) (w->blocks + rv * nb + b) + 1;
      for (t = 0; t < 4; t++) {
        /* bytes 4t..4t+3 of 16 rows: low nibbles are k = 4t..4t+3, high
         * nibbles k = 16 + 4t..; rows past @valid gather zeros */
        const __m512i g = _mm512_mask_i32gather_epi32 (_mm512_setzero_si512 (),
            m, offs, qs + 4 * t, 1);
        const __m512i lo = _mm512_shuffle_epi8 (lut, _mm512_and_si512 (g,
                low4));
        const __m512i hi = _mm512_shuffle_epi8 (lut,
            _mm512_and_si512 (_mm512_srli_epi16 (g, 4), low4));

        _mm512_store_si512 (pb + (2 * t) * 128,
            _mm512_srai_epi16 (_mm512_shuffle_epi8 (lo, ctl_lo), 8));
        _mm512_store_si512 (pb + (2 * t + 1) * 128,
            _mm512_srai_epi16 (_mm512_shuffle_epi8 (lo, ctl_hi), 8));
        _mm512_store_si512 (pb + (8 + 2 * t) * 128,
            _mm512_srai_epi16 (_mm512_shuffle_epi8 (hi, ctl_lo), 8));
        _mm512_store_si512 (pb + (8 + 2 * t + 1) * 128,
            _mm512_srai_epi16 (_mm512_shuffle_epi8 (hi, ctl_hi), 8));
      }
    }
  }
}

/* ------------------------------------------------------------------------
 * The micro kernel: 32 rows x C activation rows, the whole k
 */
static ALWAYS_INLINE void
gemm16_micro (const guint8 * panel, const float *scales, gsize nb,
    const NpuQ16Rows * xq, gsize c, float *y, gsize ldy, const __mmask16 * m,
    const int C)
{
  __m512 accf[2][GEMM16_NR];
  const guint8 *xr[GEMM16_NR];
  gsize b;
  int v, j, t;

  for (j = 0; j < C; j++) {
    xr[j] = xq->data + (c + j) * xq->row_stride;
    for (v = 0; v < 2; v++)
      accf[v][j] = _mm512_setzero_ps ();
  }
  for (b = 0; b < nb; b++) {
    const guint8 *pb = panel + b * GEMM16_BLOCK_BYTES;
    __m512i acc[2][GEMM16_NR];
    __m512 s0, s1;

    for (j = 0; j < C; j++) {
      acc[0][j] = _mm512_setzero_si512 ();
      acc[1][j] = _mm512_setzero_si512 ();
    }
#pragma GCC unroll 16
    for (t = 0; t < 16; t++) {
      const __m512i w0 = _mm512_load_si512 (pb + t * 128);
      const __m512i w1 = _mm512_load_si512 (pb + t * 128 + 64);

      for (j = 0; j < C; j++) {
        gint32 q2;
        __m512i xb;

        memcpy (&q2, xr[j] + b * 64 + 4 * t, 4);
        xb = _mm512_set1_epi32 (q2);
        acc[0][j] = _mm512_dpwssd_epi32 (acc[0][j], w0, xb);
        acc[1][j] = _mm512_dpwssd_epi32 (acc[1][j], w1, xb);
      }
    }
    s0 = _mm512_load_ps (scales + b * GEMM16_ROWS);
    s1 = _mm512_load_ps (scales + b * GEMM16_ROWS + 16);
    for (j = 0; j < C; j++) {
      const __m512 d = _mm512_set1_ps (((const float *) (xr[j] +
                  xq->dx_offset))[b]);

      accf[0][j] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (acc[0][j]),
          _mm512_mul_ps (s0, d), accf[0][j]);
      accf[1][j] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (acc[1][j]),
          _mm512_mul_ps (s1, d), accf[1][j]);
    }
  }
  for (j = 0; j < C; j++)
    for (v = 0; v < 2; v++)
      _mm512_mask_storeu_ps (y + (c + j) * ldy + 16 * v, m[v], accf[v][j]);
}

void
npu_mxfp4_tile_gemm16_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ16Rows * xq, gsize c0, gsize c1, float *y, gsize ldy,
    guint8 * scratch)
{
  const gsize nb = w->n_blocks;
  guint8 *panel = scratch;
  float *scales = (float *) (scratch + nb * GEMM16_BLOCK_BYTES);
  gsize r, c;

  for (r = r0; r < r1; r += GEMM16_ROWS) {
    const gsize valid = MIN (GEMM16_ROWS, r1 - r);
    __mmask16 m[2];
    int v;

    for (v = 0; v < 2; v++) {
      gsize nv = valid > 16u * v ? MIN (16, valid - 16u * v) : 0;

      m[v] = (__mmask16) ((1u << nv) - 1);
    }
    gemm16_decode_panel (w, r, valid, panel, scales);
    for (c = c0; c < c1; c += GEMM16_NR) {
      float *yr = y + r;

      switch (MIN (GEMM16_NR, c1 - c)) {
        case 1:
          gemm16_micro (panel, scales, nb, xq, c, yr, ldy, m, 1);
          break;
        case 2:
          gemm16_micro (panel, scales, nb, xq, c, yr, ldy, m, 2);
          break;
        case 3:
          gemm16_micro (panel, scales, nb, xq, c, yr, ldy, m, 3);
          break;
        case 4:
          gemm16_micro (panel, scales, nb, xq, c, yr, ldy, m, 4);
          break;
        case 5:
          gemm16_micro (panel, scales, nb, xq, c, yr, ldy, m, 5);
          break;
        default:
          gemm16_micro (panel, scales, nb, xq, c, yr, ldy, m, 6);
          break;
      }
    }
  }
}
