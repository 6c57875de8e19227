/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the panel GEMMs on AVX-512 VNNI: MXFP4 weights decoded once per
 * tile into the dot product's operand order, quantised activations
 * broadcast from their natural order
 *
 * Built with the AVX-512 kernels' flags; only called when the CPU has
 * them.  Two GEMMs share every loop here and differ only in the width of
 * their integer codes (the template parameter @cb, code bytes):
 *
 *  - fast (cb = 1): int8 activations, d = max|x| / 127 per block of 32;
 *    weights decoded to unsigned 2P + 12 (0..24) for vpdpbusd (unsigned x
 *    signed); each accumulator starts at the block's -12 sum(q), which
 *    removes the +12.  One zmm of panel holds 16 rows x 4 consecutive k.
 *  - accurate (cb = 2): int16 activations, d = max|x| / 32767 per block,
 *    15 bits and a sign where the fast GEMM keeps 7; weights decoded to
 *    signed int16 2P for vpdpwssd (signed x signed, no bias).  One zmm
 *    holds 16 rows x 2 consecutive k.  vpdpwssd makes 32 multiply-adds an
 *    instruction where an F32 FMA makes 16, so this replaces the F32 GEMM
 *    (weights decoded to F32) where it measures faster (docs/kernels.md).
 *
 * An E2M1 value times two is an integer from -12 to 12, so the decoded
 * weights are exact, and a block's 32 products sum exactly in int32
 * (|sum| <= 32 x 24 x 127 or 32 x 12 x 32767, both < 2^24, so the
 * conversion to F32 is exact too).  The block's scales, 2^(e-127) / 2 of
 * the weights and d of the activations, are applied in F32 once per
 * block, outside the integer sum.
 *
 * The weights of 32 rows and the whole k are decoded once per tile (32 cb
 * bytes a row and block, in L2) and the activations stay in their natural
 * order, so one broadcast dword is 4 / cb consecutive codes of one
 * activation row.  The micro kernel keeps 2 x 6 int32 accumulators (32
 * rows x 6 activation rows) through a block, 8 cb steps of 12 dot
 * products, then 12 conversions, 12 multiplies and 12 FMAs into 12 F32
 * accumulators.
 */
#include "npumatmul-private.h"
#include "npuquantblock-avx512.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

/* Weight rows of a panel, activation rows of a micro kernel */
#define PANEL_ROWS 32
#define PANEL_NR 6
/* Panel bytes of one block: 8 cb steps, each 2 zmm (rows 0..15 and
 * 16..31) */
#define PANEL_BLOCK_BYTES(cb) (8 * (cb) * 128)

G_STATIC_ASSERT (NPU_PANEL_SCRATCH (1, 1) ==
    PANEL_BLOCK_BYTES (1) + PANEL_ROWS * sizeof (float));
G_STATIC_ASSERT (NPU_PANEL_SCRATCH (1, 2) ==
    PANEL_BLOCK_BYTES (2) + PANEL_ROWS * sizeof (float));

/* 2P + 12 of the E2M1 codes 0..15, for vpdpbusd's unsigned operand, and
 * 2P signed (widened to int16 after the lookup), each repeated in every
 * 128-bit lane for vpshufb */
#define E2M1_X2_U8_LANE \
  12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0
#define E2M1_X2_S8_LANE \
  0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12
static const guint8 e2m1_x2_u8[64] __attribute__((aligned (64))) = {
  E2M1_X2_U8_LANE, E2M1_X2_U8_LANE, E2M1_X2_U8_LANE, E2M1_X2_U8_LANE
};

static const gint8 e2m1_x2_s8[64] __attribute__((aligned (64))) = {
  E2M1_X2_S8_LANE, E2M1_X2_S8_LANE, E2M1_X2_S8_LANE, E2M1_X2_S8_LANE
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
 * Activations, per block of 32: npu_quantize_block_avx512()
 * (npuquantblock-avx512.h), the GEMV's arithmetic too
 */
static ALWAYS_INLINE float
quantize_block (const float *x, float qmax, __m512i * q0, __m512i * q1)
{
  return npu_quantize_block_avx512 (_mm512_loadu_ps (x),
      _mm512_loadu_ps (x + 16), qmax, q0, q1);
}

/* int8 codes: the row's codes at @row, its scales at row + dx_offset,
 * each block's -12 sum(q) at row + corr_offset; the same codes and scales
 * as npumatmul.c's scalar quantiser, 16 elements an instruction */
void
npu_quantize_row_q8_avx512 (const float *x, gsize nb, guint8 * row,
    const NpuPanelRows * layout)
{
  float *dx = (float *) (row + layout->dx_offset);
  gint32 *corr = (gint32 *) (row + layout->corr_offset);
  gsize b;

  for (b = 0; b < nb; b++) {
    gint8 *q = (gint8 *) row + 32 * b;
    __m512i q0, q1;

    dx[b] = quantize_block (x + 32 * b, 127.0f, &q0, &q1);
    corr[b] = -12 * _mm512_reduce_add_epi32 (_mm512_add_epi32 (q0, q1));
    _mm_storeu_si128 ((__m128i *) q, _mm512_cvtepi32_epi8 (q0));
    _mm_storeu_si128 ((__m128i *) (q + 16), _mm512_cvtepi32_epi8 (q1));
  }
}

/* int16 codes: the row's codes at @row, its scales at row + dx_offset */
void
npu_quantize_row_q16_avx512 (const float *x, gsize nb, guint8 * row,
    const NpuPanelRows * layout)
{
  float *dx = (float *) (row + layout->dx_offset);
  gsize b;

  for (b = 0; b < nb; b++) {
    gint16 *q = (gint16 *) row + 32 * b;
    __m512i q0, q1;

    dx[b] = quantize_block (x + 32 * b, 32767.0f, &q0, &q1);
    _mm256_storeu_si256 ((__m256i *) q, _mm512_cvtsepi32_epi16 (q0));
    _mm256_storeu_si256 ((__m256i *) (q + 16), _mm512_cvtsepi32_epi16 (q1));
  }
}

/* ------------------------------------------------------------------------
 * Weights: the panel of 32 rows
 *
 * Rows [r, r + valid) of @w into @panel (per block b, step t: rows 0..15
 * at b * PANEL_BLOCK_BYTES (cb) + t * 128, rows 16..31 64 bytes on, each
 * row a dword of 4 / cb consecutive k) and @scales (per block, the 32
 * rows' 2^(e-127) / 2; a NaN scale stays NaN).  Rows past @valid have
 * scale 0 (and weights 0, or 12 from gathered zero bytes).
 */

/* Words k = 2i, 2i + 1 of the int16 panel from the bytes 2P of @x (4
 * consecutive k a dword): the first pair at @p, the second a step on */
static ALWAYS_INLINE void
store_int16_pairs (guint8 * p, __m512i x, __m512i ctl_lo, __m512i ctl_hi)
{
  _mm512_store_si512 (p, _mm512_srai_epi16 (_mm512_shuffle_epi8 (x, ctl_lo),
          8));
  _mm512_store_si512 (p + 128,
      _mm512_srai_epi16 (_mm512_shuffle_epi8 (x, ctl_hi), 8));
}

static ALWAYS_INLINE void
panel_decode (const NpuMxfp4Matrix * w, gsize r, gsize valid, guint8 * panel,
    float *scales, const int cb)
{
  const __m512i lut = _mm512_load_si512 (cb == 1 ? (const void *) e2m1_x2_u8
      : (const void *) e2m1_x2_s8);
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

  for (v = 0; v < PANEL_ROWS / 16; v++) {
    const gsize rv = r + 16 * v;
    const gsize nv = valid > 16 * v ? MIN (16, valid - 16 * v) : 0;
    const __mmask16 m = (__mmask16) ((1u << nv) - 1);

    for (b = 0; b < nb; b++) {
      guint8 *pb = panel + b * PANEL_BLOCK_BYTES (cb) + 64 * v;
      const guint8 *qs;
      int t;

      for (i = 0; i < 16; i++) {
        guint8 e = 0;

        if (i < nv)
          e = split ? w->scales[(rv + i) * w->stride + b] :
              w->blocks[(rv + i) * nb + b].e;
        scales[b * PANEL_ROWS + 16 * v + i] =
            i < nv ? npu_matmul_e8m0_table[e] * 0.5f : 0.0f;
      }
      if (nv == 0) {
        for (t = 0; t < 8 * cb; t++)
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

        if (cb == 1) {
          _mm512_store_si512 (pb + t * 128, lo);
          _mm512_store_si512 (pb + (t + 4) * 128, hi);
        } else {
          store_int16_pairs (pb + (2 * t) * 128, lo, ctl_lo, ctl_hi);
          store_int16_pairs (pb + (8 + 2 * t) * 128, hi, ctl_lo, ctl_hi);
        }
      }
    }
  }
}

/* ------------------------------------------------------------------------
 * The micro kernel: 32 rows x C activation rows, the whole k
 *
 * The step loop is unrolled: left as a loop, GCC 12 copied each of the
 * integer accumulators to another register and back every step (twice
 * the instructions of the products).
 */
static ALWAYS_INLINE void
panel_micro (const guint8 * panel, const float *scales, gsize nb,
    const NpuPanelRows * xq, gsize c, float *y, gsize ldy,
    const __mmask16 * m, const int C, const int cb)
{
  __m512 accf[2][PANEL_NR];
  const guint8 *xr[PANEL_NR];
  gsize b;
  int v, j, t;

  for (j = 0; j < C; j++) {
    xr[j] = xq->data + (c + j) * xq->row_stride;
    for (v = 0; v < 2; v++)
      accf[v][j] = _mm512_setzero_ps ();
  }
  for (b = 0; b < nb; b++) {
    const guint8 *pb = panel + b * PANEL_BLOCK_BYTES (cb);
    __m512i acc[2][PANEL_NR];
    __m512 s0, s1;

    for (j = 0; j < C; j++) {
      /* the fast GEMM's weights are 2P + 12: start at -12 sum(q) */
      const __m512i init = cb == 1 ?
          _mm512_set1_epi32 (((const gint32 *) (xr[j] +
                  xq->corr_offset))[b]) : _mm512_setzero_si512 ();

      acc[0][j] = init;
      acc[1][j] = init;
    }
#pragma GCC unroll 16
    for (t = 0; t < 8 * cb; t++) {
      const __m512i w0 = _mm512_load_si512 (pb + t * 128);
      const __m512i w1 = _mm512_load_si512 (pb + t * 128 + 64);

      for (j = 0; j < C; j++) {
        gint32 q;
        __m512i xb;

        memcpy (&q, xr[j] + b * 32 * cb + 4 * t, 4);
        xb = _mm512_set1_epi32 (q);
        if (cb == 1) {
          acc[0][j] = _mm512_dpbusd_epi32 (acc[0][j], w0, xb);
          acc[1][j] = _mm512_dpbusd_epi32 (acc[1][j], w1, xb);
        } else {
          acc[0][j] = _mm512_dpwssd_epi32 (acc[0][j], w0, xb);
          acc[1][j] = _mm512_dpwssd_epi32 (acc[1][j], w1, xb);
        }
      }
    }
    s0 = _mm512_load_ps (scales + b * PANEL_ROWS);
    s1 = _mm512_load_ps (scales + b * PANEL_ROWS + 16);
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

/* ------------------------------------------------------------------------
 * A tile: panels of 32 rows over [r0, r1), each times activation rows
 * [c0, c1) in micro kernels of 6
 */
static ALWAYS_INLINE void
panel_tile (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuPanelRows * xq, gsize c0, gsize c1, float *y, gsize ldy,
    guint8 * scratch, const int cb)
{
  const gsize nb = w->n_blocks;
  guint8 *panel = scratch;
  float *scales = (float *) (scratch + nb * PANEL_BLOCK_BYTES (cb));
  gsize r, c;

  for (r = r0; r < r1; r += PANEL_ROWS) {
    const gsize valid = MIN (PANEL_ROWS, r1 - r);
    __mmask16 m[2];
    int v;

    for (v = 0; v < 2; v++) {
      gsize nv = valid > 16u * v ? MIN (16, valid - 16u * v) : 0;

      m[v] = (__mmask16) ((1u << nv) - 1);
    }
    panel_decode (w, r, valid, panel, scales, cb);
    for (c = c0; c < c1; c += PANEL_NR) {
      float *yr = y + r;

      switch (MIN (PANEL_NR, c1 - c)) {
        case 1:
          panel_micro (panel, scales, nb, xq, c, yr, ldy, m, 1, cb);
          break;
        case 2:
          panel_micro (panel, scales, nb, xq, c, yr, ldy, m, 2, cb);
          break;
        case 3:
          panel_micro (panel, scales, nb, xq, c, yr, ldy, m, 3, cb);
          break;
        case 4:
          panel_micro (panel, scales, nb, xq, c, yr, ldy, m, 4, cb);
          break;
        case 5:
          panel_micro (panel, scales, nb, xq, c, yr, ldy, m, 5, cb);
          break;
        default:
          panel_micro (panel, scales, nb, xq, c, yr, ldy, m, 6, cb);
          break;
      }
    }
  }
}

void
npu_mxfp4_tile_gemm8_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuPanelRows * xq, gsize c0, gsize c1, float *y, gsize ldy,
    guint8 * scratch)
{
  panel_tile (w, r0, r1, xq, c0, c1, y, ldy, scratch, 1);
}

void
npu_mxfp4_tile_gemm16_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuPanelRows * xq, gsize c0, gsize c1, float *y, gsize ldy,
    guint8 * scratch)
{
  panel_tile (w, r0, r1, xq, c0, c1, y, ldy, scratch, 2);
}
