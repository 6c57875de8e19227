/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 x int8 and Q8_0 x int8 kernels for AVX-512 (F, BW, VNNI,
 * VBMI)
 *
 * Built with -mavx512f -mavx512bw -mavx512vnni -mavx512vbmi -mfma; only
 * called when the CPU has them.  One zmm holds 4 blocks: the 64 nibble
 * bytes, split into low and high nibbles (elements 0..15 and 16..31 of each
 * block, one block per 128-bit lane), decoded by vpermb into unsigned
 * 2 * P + 12 and multiplied with the int8 activations by vpdpbusd.  Each
 * 128-bit lane then holds one block's sum in 4 int32 lanes, which are
 * converted and scaled by 2^(e-127) * d / 2 into F32 accumulators.
 *
 * The ggml layout is read in place: two overlapping 64-byte loads cover the
 * 68 bytes of 4 blocks and one vpermt2b gathers the 64 nibble bytes, so the
 * 17-byte stride costs one shuffle per 128 weights.
 *
 * Q8_0 weights (34-byte blocks) go 2 blocks to a zmm the same way: two
 * overlapping 64-byte loads cover their 68 bytes, one vpermt2b gathers the
 * 64 codes, one vpermw spreads the two F16 scales over 8 words each for
 * vcvtph2ps.  vpdpbusd multiplies unsigned by signed bytes: the weights
 * enter as w + 128 (one vpxor with 0x80), and each lane starts at the
 * quantiser's -128 times the sum of its own 4 activation codes, so it ends
 * as the exact sum of its 4 products w x.  ggml's sign trick (|w| times x
 * with w's sign: vpabsb, vpmovb2m, then a masked vpsubb per activation row)
 * ran ~10 % slower in an in-cache GEMV and ~18 % slower in a GEMM, where
 * the masked vpsubb is one more instruction per 64 weights and activation
 * row.  Each block's dot product sits in 8 int32 lanes, scaled by d_w d_x
 * into F32 accumulators.
 */
#include "npumatmul-private.h"
#include "npuquantblock-avx512.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* Micro tile: RM weight rows by CM activation rows, RM * CM accumulators */
#define RM 4
#define CM 4
/* Rows per micro tile in a GEMV: one, so each thread reads one sequential
 * stream (4 interleaved rows measured ~20 % slower from DRAM) */
#define GEMV_RM 1

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

/* Software prefetch distance in bytes along the weights.  One thread needs
 * about bandwidth x latency = 13 GB/s x ~150 ns = 2 KiB in flight to stream
 * from DRAM, more than the hardware prefetchers keep on their own when rows
 * are only 2 KiB long (k = 4096); 1 KiB ahead reached ~60 % of the read
 * bandwidth in a GEMV, 4 KiB ~95 % (docs/kernels.md). */
#ifndef PF_DIST
#define PF_DIST 4096
#endif
/* The one-token GEMV's distance, on each of its 8 streams: 8 x 2 KiB in
 * flight is already more than the memory's bandwidth x latency, and at
 * 4 KiB the prefetched lines of 8 streams (32 KiB) fill most of L1 and
 * evict each other before use.  1B llama decode, one thread, in one run
 * (alternating), share of bench-llm's read limit: 4 KiB 69 %, 2 KiB
 * 73 %; with the scales prefetched (below) and npumatmul.c's longer
 * claims, 4 KiB 69 %, 2 KiB 79 %.  1 KiB measured the same as 2 KiB. */
#define GEMV_PF_DIST 2048
/* Rows ahead of the current one whose scales a GEMV stream prefetches (a
 * row's scales are a separate array in the split layout, and a stream's
 * 8 .. 64 rows of them are too short a run for the hardware prefetcher
 * to follow among 8 streams of nibbles): two rows, the time of about one
 * memory latency at k = 2048 */
#define GEMV_SCALES_AHEAD 2

static const guint8 lut_bytes[16] = {
  12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0
};

/* vpermt2b indices gathering qs of 4 ggml blocks from p[0..63] (0..63) and
 * p[4..67] (64..127) */
static const guint8 idx_qs_bytes[64] __attribute__((aligned (64))) = {
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
  18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
  35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
  52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 124, 125, 126, 127
};

/* vpermb indices putting block i's scale byte into the low byte of dwords
 * 4i..4i+3 (the other bytes are zeroed by the mask) */
static const guint8 idx_e_bytes[64] __attribute__((aligned (64))) = {
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17, 17,
  34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34,
  51, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51, 51
};

static const guint8 idx_e4_bytes[64] __attribute__((aligned (64))) = {
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
  2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
  3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3
};

#define LOW_BYTES_OF_DWORDS 0x1111111111111111ULL

typedef struct
{
  __m512i lo, hi;               /* 2P + 12 of elements 0..15 / 16..31 */
  __m512 s;                     /* 2^(e-127) per block, 4 lanes each */
  __m512i ed;                   /* e per block, 4 lanes each */
} Decoded;

/* @qs: 64 nibble bytes to 2P + 12 of elements 0..15 (@lo) and 16..31
 * (@hi) of each block */
static ALWAYS_INLINE void
decode_nibbles (__m512i qs, __m512i * lo, __m512i * hi)
{
  /* vpermb indexes with 6 bits: with the 16-entry table repeated 4 times,
   * bits 4..5 of the index do not matter, so the low nibbles need no mask
   * and the high ones only a 16-bit shift (which brings in bits of the
   * neighbouring byte, above bit 3). */
  const __m512i lut =
      _mm512_broadcast_i32x4 (_mm_loadu_si128 ((const __m128i *) lut_bytes));

  *lo = _mm512_permutexvar_epi8 (qs, lut);
  *hi = _mm512_permutexvar_epi8 (_mm512_srli_epi16 (qs, 4), lut);
}

/* 2^(e-127) of the E8M0 scale e in each dword: e << 23 is that for
 * 1 <= e <= 254; e = 0 must give the subnormal 2^-127 (0x00400000, the
 * max below).  e = 255 gives Inf here; the callers make such a row NaN
 * (tracked per group or checked per row), which costs one instruction per
 * group rather than two. */
static ALWAYS_INLINE __m512
e8m0_scale (__m512i e)
{
  __m512i bits = _mm512_slli_epi32 (e, 23);

  bits = _mm512_max_epu32 (bits, _mm512_set1_epi32 (0x00400000));
  return _mm512_castsi512_ps (bits);
}

/* @qs: 64 nibble bytes, @ed: scale byte in the low byte of each dword */
static ALWAYS_INLINE Decoded
decode (__m512i qs, __m512i ed)
{
  Decoded d;

  decode_nibbles (qs, &d.lo, &d.hi);
  d.s = e8m0_scale (ed);
  d.ed = ed;
  return d;
}

/* 4 ggml blocks at @p, 68 bytes readable */
static ALWAYS_INLINE Decoded
load_blocks (const guint8 * p)
{
  const __m512i a = _mm512_loadu_si512 (p);
  const __m512i b = _mm512_loadu_si512 (p + 4);
  const __m512i qs = _mm512_permutex2var_epi8 (a,
      _mm512_load_si512 (idx_qs_bytes), b);
  const __m512i ed = _mm512_maskz_permutexvar_epi8 (LOW_BYTES_OF_DWORDS,
      _mm512_load_si512 (idx_e_bytes), a);

  return decode (qs, ed);
}

/* 4 split-layout blocks: 64 aligned nibble bytes and 4 scale bytes */
static ALWAYS_INLINE Decoded
load_split (const guint8 * nib, const guint8 * e)
{
  guint32 e4;

  memcpy (&e4, e, 4);
  return decode (_mm512_load_si512 (nib),
      _mm512_maskz_permutexvar_epi8 (LOW_BYTES_OF_DWORDS,
          _mm512_load_si512 (idx_e4_bytes),
          _mm512_castsi128_si512 (_mm_cvtsi32_si128 ((int) e4))));
}

/* One group of 4 blocks: R decoded weight rows times C activation rows */
static ALWAYS_INLINE void
group_step (const Decoded * wd, const guint8 * xp, gsize xstride,
    __m512 acc[RM][CM], const int R, const int C)
{
  int i, j;

  for (j = 0; j < C; j++) {
    const guint8 *xg = xp + j * xstride;
    const __m512i xlo = _mm512_load_si512 (xg);
    const __m512i xhi = _mm512_load_si512 (xg + 64);
    const __m512i corr = _mm512_load_si512 (xg + 128);
    const __m512 dx = _mm512_load_ps (xg + 192);

    for (i = 0; i < R; i++) {
      __m512i t = _mm512_dpbusd_epi32 (corr, wd[i].lo, xlo);

      t = _mm512_dpbusd_epi32 (t, wd[i].hi, xhi);
      acc[i][j] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (t),
          _mm512_mul_ps (wd[i].s, dx), acc[i][j]);
    }
  }
}

static ALWAYS_INLINE void
micro (const NpuMxfp4Matrix * w, gsize r, const NpuQ8Act * xq, gsize c,
    float *y, gsize ldy, const int R, const int C, const gboolean split)
{
  __m512 acc[RM][CM];
  __m512i emax[RM];
  Decoded wd[RM];
  const gsize nb = w->n_blocks;
  const gsize n_full = split ? xq->n_groups : nb / 4;
  const guint8 *xp = xq->data + c * xq->row_stride;
  gsize g;
  int i, j;

  for (i = 0; i < R; i++) {
    emax[i] = _mm512_setzero_si512 ();
    for (j = 0; j < C; j++)
      acc[i][j] = _mm512_setzero_ps ();
  }

  for (g = 0; g < n_full; g++) {
    for (i = 0; i < R; i++) {
      if (split) {
        const guint8 *nib = w->nibbles + ((r + i) * w->stride + 4 * g) * 16;

        _mm_prefetch ((const char *) nib + PF_DIST, _MM_HINT_T0);
        wd[i] = load_split (nib, w->scales + (r + i) * w->stride + 4 * g);
      } else {
        const guint8 *p = (const guint8 *) (w->blocks + (r + i) * nb + 4 * g);

        _mm_prefetch ((const char *) p + PF_DIST, _MM_HINT_T0);
        wd[i] = load_blocks (p);
      }
      emax[i] = _mm512_max_epu32 (emax[i], wd[i].ed);
    }
    group_step (wd, xp + g * NPU_Q8_GROUP_BYTES, xq->row_stride, acc, R, C);
  }

  if (!split && n_full < xq->n_groups) {
    /* 1 to 3 trailing blocks: copied to a zeroed group, whose zero blocks
     * meet zero activations. */
    guint8 buf[RM][4 * sizeof (NpuBlockMxfp4)];

    for (i = 0; i < R; i++) {
      memset (buf[i], 0, sizeof (buf[i]));
      memcpy (buf[i], w->blocks + (r + i) * nb + 4 * n_full,
          (nb - 4 * n_full) * sizeof (NpuBlockMxfp4));
      wd[i] = load_blocks (buf[i]);
      emax[i] = _mm512_max_epu32 (emax[i], wd[i].ed);
    }
    group_step (wd, xp + n_full * NPU_Q8_GROUP_BYTES, xq->row_stride, acc,
        R, C);
  }

  for (i = 0; i < R; i++) {
    /* A NaN scale in the row: NaN, as the reference gives */
    gboolean nan_row = _mm512_reduce_max_epu32 (emax[i]) == NPU_E8M0_NAN;

    for (j = 0; j < C; j++)
      y[(c + j) * ldy + r + i] =
          nan_row ? NAN : _mm512_reduce_add_ps (acc[i][j]);
  }
}

#define MICRO_CASES(R, split) \
  switch (cc) { \
    case 1: micro (w, r, xq, c, y, ldy, R, 1, split); break; \
    case 2: micro (w, r, xq, c, y, ldy, R, 2, split); break; \
    case 3: micro (w, r, xq, c, y, ldy, R, 3, split); break; \
    default: micro (w, r, xq, c, y, ldy, R, 4, split); break; \
  }

void
npu_mxfp4_tile_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy)
{
  gsize c, r;

  G_STATIC_ASSERT (CM == 4);
  if (c1 - c0 > 1 && c1 - c0 <= 2 * CM) {
    /* A GEMV of 2 to 8 activation rows (n <= 4 tokens, or the accurate
     * precision's codes and residuals of n <= 4): one weight row at a
     * time as for one activation row, so each thread still reads one
     * sequential stream; 4 interleaved rows made the accurate decode
     * 13-16 % slower than the fast one (docs/kernels.md) */
    for (r = r0; r < r1; r++) {
      for (c = c0; c < c1; c += CM) {
        const gsize cc = MIN (CM, c1 - c);

        if (w->layout == NPU_MXFP4_LAYOUT_SPLIT) {
          MICRO_CASES (1, TRUE);
        } else {
          MICRO_CASES (1, FALSE);
        }
      }
    }
    return;
  }
  for (c = c0; c < c1; c += CM) {
    const gsize cc = MIN (CM, c1 - c);

    if (cc == 1) {
      /* GEMV: no reuse of decoded weights, and one sequential stream per
       * thread is what the hardware prefetcher follows best */
      for (r = r0; r + GEMV_RM <= r1; r += GEMV_RM) {
        if (w->layout == NPU_MXFP4_LAYOUT_SPLIT)
          micro (w, r, xq, c, y, ldy, GEMV_RM, 1, TRUE);
        else
          micro (w, r, xq, c, y, ldy, GEMV_RM, 1, FALSE);
      }
      for (; r < r1; r++) {
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
 * GEMV (one token): several streams of rows at once
 *
 * A decode step reads every weight once and does little with it, so its
 * pace is the memory's.  One thread reading one sequential stream gets
 * about half of what the memory gives it: bench-llm's read limit is best
 * with 4 to 8 streams read side by side (docs/llm-core.md).  So the rows
 * [r0, r1) are cut into S equal runs, and each step takes the next row of
 * every run: S sequential streams, one accumulator chain per row.  The
 * activations of a group are loaded once for the S rows.
 *
 * The accurate precision's two activation rows (codes and residuals) are
 * multiplied with each weight group as it is decoded, and both products go
 * into the row's one accumulator: the output is the sum, so no second pass
 * adds the two halves.  Their two block sums share the weights' scale, so
 * they are combined first (t d + t' d', one multiply and one FMA) and
 * scaled once (one FMA): 4 vector operations after the integer products,
 * where scaling each apart takes 6.  Per lane that is one rounding more
 * per group than the fast path, within npumatmul.h's accurate bound.
 *
 * The split layout keeps a row's scales apart from its nibbles: a NaN
 * scale (0xFF) is looked for there once per row, after the row's sum,
 * rather than tracked group by group as the ggml layout needs, and only in
 * a matrix whose repack found one (NpuMxfp4Matrix.nan_scales).
 */
#define GEMV_MAX_STREAMS 8
/* Whether the fast precision's split-layout rows decode the scales of 4
 * groups at once (gemv_split_chunk()).  The accurate precision's two
 * activation rows keep the group by group path: there, loading both rows'
 * activations again for each weight row (8 loads a group) measured ~5 %
 * slower in L2. */
#ifndef GEMV_SCALES_AT_ONCE
#define GEMV_SCALES_AT_ONCE 1
#endif

/* Whether any of the @nb scales at @e is NaN (0xFF) */
static ALWAYS_INLINE gboolean
has_nan_scale (const guint8 * e, gsize nb)
{
  const __m512i nan = _mm512_set1_epi8 ((char) NPU_E8M0_NAN);
  __mmask64 hit = 0;
  gsize b;

  for (b = 0; b < nb; b += 64) {
    const __mmask64 m = nb - b >= 64 ? ~(__mmask64) 0 :
        ((__mmask64) 1 << (nb - b)) - 1;

    hit |= _mm512_mask_cmpeq_epi8_mask (m, _mm512_maskz_loadu_epi8 (m,
            e + b), nan);
  }
  return hit != 0;
}

/* The scales of split-layout row @row, if the matrix has it (a prefetch
 * of any address is harmless, but past the array it is wasted) */
static ALWAYS_INLINE void
prefetch_scales (const NpuMxfp4Matrix * w, gsize row)
{
  const guint8 *e = w->scales + row * w->stride;
  gsize o;

  if (row >= w->rows)
    return;
  for (o = 0; o < w->stride; o += 64)
    _mm_prefetch ((const char *) e + o, _MM_HINT_T0);
}

/* vpermps indices spreading one float per block of 4 groups (16 blocks)
 * over the 4 int32 lanes that hold each block's sum in group m */
static const gint32 idx_spread[4][16] __attribute__((aligned (64))) = {
  {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
  {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
  {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
  {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15}
};

/* vpermt2ps indices taking lane 4i (block i's d / 2) of two groups' dx */
static const gint32 idx_compact[16] __attribute__((aligned (64))) = {
  0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28
};

/* The activations' d / 2 of the 16 blocks of the 4 groups at @xg */
static ALWAYS_INLINE __m512
compact_dx (const guint8 * xg)
{
  const __m512i idx = _mm512_load_si512 (idx_compact);
  const __m512 a = _mm512_permutex2var_ps (_mm512_load_ps (xg + 192), idx,
      _mm512_load_ps (xg + NPU_Q8_GROUP_BYTES + 192));
  const __m512 b = _mm512_permutex2var_ps (_mm512_load_ps (xg +
          2 * NPU_Q8_GROUP_BYTES + 192), idx,
      _mm512_load_ps (xg + 3 * NPU_Q8_GROUP_BYTES + 192));

  return _mm512_shuffle_f32x4 (a, b, 0x44);
}

/* 2^(e-127) of the 16 split-layout scale bytes at @e, as decode() does it
 * for 4 (e = 255 gives Inf: the caller makes such a row NaN) */
static ALWAYS_INLINE __m512
split_scales16 (const guint8 * e)
{
  const __m128i e16 = _mm_loadu_si128 ((const __m128i *) e);

  return e8m0_scale (_mm512_cvtepu8_epi32 (e16));
}

/* Groups g .. g + 3 of the split-layout rows r + i rs (i < S) times one
 * activation row (the fast precision) into their accumulators.  The 16
 * scales of a row's 4 groups are decoded at once and multiplied with the
 * activations' 16 block scales, then
 * spread over a group's lanes by one vpermps: per group and row, 1 vector
 * operation where decoding 4 scales per group took 5 (load into a vector,
 * vpermb, shift, max, multiply).  The products and their order of
 * addition are the same as gemv_micro()'s group by group path: the same
 * result, bit for bit. */
static ALWAYS_INLINE void
gemv_split_chunk (const NpuMxfp4Matrix * w, gsize r, gsize rs,
    const guint8 * xg, gsize g, __m512 * acc, const int S)
{
  const __m512 dxc = compact_dx (xg);
  int i, m;

  for (i = 0; i < S; i++) {
    const gsize row = r + i * rs;
    const guint8 *nib = w->nibbles + (row * w->stride + 4 * g) * 16;
    const __m512 s = split_scales16 (w->scales + row * w->stride + 4 * g);
    const __m512 ps = _mm512_mul_ps (s, dxc);

    for (m = 0; m < 4; m++) {
      const guint8 *xm = xg + m * NPU_Q8_GROUP_BYTES;
      const __m512 sm =
          _mm512_permutexvar_ps (_mm512_load_si512 (idx_spread[m]), ps);
      __m512i lo, hi, t;

      _mm_prefetch ((const char *) nib + 64 * m + GEMV_PF_DIST, _MM_HINT_T0);
      decode_nibbles (_mm512_load_si512 (nib + 64 * m), &lo, &hi);
      t = _mm512_dpbusd_epi32 (_mm512_load_si512 (xm + 128), lo,
          _mm512_load_si512 (xm));
      t = _mm512_dpbusd_epi32 (t, hi, _mm512_load_si512 (xm + 64));
      acc[i] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (t), sm, acc[i]);
    }
  }
}

static ALWAYS_INLINE void
gemv_micro (const NpuMxfp4Matrix * w, gsize r, gsize rs, const NpuQ8Act * xq,
    gsize c, float *y, const int S, const int C, const gboolean split)
{
  __m512 acc[GEMV_MAX_STREAMS];
  __m512i emax[GEMV_MAX_STREAMS];
  const gsize nb = w->n_blocks;
  const gsize n_full = split ? xq->n_groups : nb / 4;
  const guint8 *xp = xq->data + c * xq->row_stride;
  const gsize xs = xq->row_stride;
  gsize g;
  int i, j;

  for (i = 0; i < S; i++) {
    emax[i] = _mm512_setzero_si512 ();
    acc[i] = _mm512_setzero_ps ();
    if (split)
      prefetch_scales (w, r + i * rs + GEMV_SCALES_AHEAD);
  }

  g = 0;
  if (split && C == 1 && GEMV_SCALES_AT_ONCE) {
    for (; g + 4 <= n_full; g += 4)
      gemv_split_chunk (w, r, rs, xp + g * NPU_Q8_GROUP_BYTES, g, acc, S);
  }
  for (; g < n_full + (!split && n_full < xq->n_groups); g++) {
    const guint8 *xg = xp + g * NPU_Q8_GROUP_BYTES;
    __m512i xlo[2], xhi[2], corr[2];
    __m512 dx[2];

    for (j = 0; j < C; j++) {
      xlo[j] = _mm512_load_si512 (xg + j * xs);
      xhi[j] = _mm512_load_si512 (xg + j * xs + 64);
      corr[j] = _mm512_load_si512 (xg + j * xs + 128);
      dx[j] = _mm512_load_ps (xg + j * xs + 192);
    }
    for (i = 0; i < S; i++) {
      const gsize row = r + i * rs;
      Decoded wd;

      if (G_UNLIKELY (g == n_full)) {
        /* 1 to 3 trailing ggml blocks, copied to a zeroed group whose
         * zero blocks meet zero activations */
        guint8 buf[4 * sizeof (NpuBlockMxfp4)];

        memset (buf, 0, sizeof (buf));
        memcpy (buf, w->blocks + row * nb + 4 * n_full,
            (nb - 4 * n_full) * sizeof (NpuBlockMxfp4));
        wd = load_blocks (buf);
      } else if (split) {
        const guint8 *nib = w->nibbles + (row * w->stride + 4 * g) * 16;

        _mm_prefetch ((const char *) nib + GEMV_PF_DIST, _MM_HINT_T0);
        wd = load_split (nib, w->scales + row * w->stride + 4 * g);
      } else {
        const guint8 *p = (const guint8 *) (w->blocks + row * nb + 4 * g);

        _mm_prefetch ((const char *) p + GEMV_PF_DIST, _MM_HINT_T0);
        wd = load_blocks (p);
      }
      if (!split)
        emax[i] = _mm512_max_epu32 (emax[i], wd.ed);
      if (C == 1) {
        __m512i t = _mm512_dpbusd_epi32 (corr[0], wd.lo, xlo[0]);

        t = _mm512_dpbusd_epi32 (t, wd.hi, xhi[0]);
        acc[i] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (t),
            _mm512_mul_ps (wd.s, dx[0]), acc[i]);
      } else {
        __m512i t0 = _mm512_dpbusd_epi32 (corr[0], wd.lo, xlo[0]);
        __m512i t1 = _mm512_dpbusd_epi32 (corr[1], wd.lo, xlo[1]);
        __m512 f;

        t0 = _mm512_dpbusd_epi32 (t0, wd.hi, xhi[0]);
        t1 = _mm512_dpbusd_epi32 (t1, wd.hi, xhi[1]);
        f = _mm512_fmadd_ps (_mm512_cvtepi32_ps (t0), dx[0],
            _mm512_mul_ps (_mm512_cvtepi32_ps (t1), dx[1]));
        acc[i] = _mm512_fmadd_ps (f, wd.s, acc[i]);
      }
    }
  }

  for (i = 0; i < S; i++) {
    const gsize row = r + i * rs;
    /* A NaN scale in the row: NaN, as the reference gives */
    gboolean nan_row = split ? w->nan_scales &&
        has_nan_scale (w->scales + row * w->stride, nb) :
        _mm512_reduce_max_epu32 (emax[i]) == NPU_E8M0_NAN;

    y[row] = nan_row ? NAN : _mm512_reduce_add_ps (acc[i]);
  }
}

static ALWAYS_INLINE void
gemv_runs (const NpuMxfp4Matrix * w, gsize r0, gsize r1, const NpuQ8Act * xq,
    gsize c, float *y, const int S, const int C, const gboolean split)
{
  const gsize run = (r1 - r0) / S;
  gsize r;

  for (r = r0; r < r0 + run; r++)
    gemv_micro (w, r, run, xq, c, y, S, C, split);
  for (r = r0 + S * run; r < r1; r++)
    gemv_micro (w, r, 1, xq, c, y, 1, C, split);
}

#define GEMV_STREAM_CASES(C, split) \
  switch (streams) { \
    case 1: gemv_runs (w, r0, r1, xq, c, y, 1, C, split); break; \
    case 2: gemv_runs (w, r0, r1, xq, c, y, 2, C, split); break; \
    case 4: gemv_runs (w, r0, r1, xq, c, y, 4, C, split); break; \
    default: gemv_runs (w, r0, r1, xq, c, y, 8, C, split); break; \
  }

void
npu_mxfp4_gemv_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c, gboolean accurate, float *y, guint streams)
{
  const gboolean split = w->layout == NPU_MXFP4_LAYOUT_SPLIT;

  if (accurate && split) {
    GEMV_STREAM_CASES (2, TRUE);
  } else if (accurate) {
    GEMV_STREAM_CASES (2, FALSE);
  } else if (split) {
    GEMV_STREAM_CASES (1, TRUE);
  } else {
    GEMV_STREAM_CASES (1, FALSE);
  }
}

/* ------------------------------------------------------------------------
 * The activation quantiser of the MXFP4 kernels (npumatmul-private.h's
 * group layout), one block of 32 in two zmm: the same operations as
 * npumatmul.c's quantize_block() (d = max|x| / 127 and x / d correctly
 * rounded, then rounded to the nearest integer, ties to even), so the same
 * codes, 16 elements at a time.  A decode step quantises every matrix's
 * activations on one thread, between the parallel products.
 */

/* Block @i of the group at @grp: its codes, correction and scale */
static ALWAYS_INLINE void
store_block (guint8 * grp, int i, __m512i q0, __m512i q1, float d)
{
  const gint32 qsum = _mm512_reduce_add_epi32 (_mm512_add_epi32 (q0, q1));
  gint32 *corr = (gint32 *) (grp + 128);
  float *dx = (float *) (grp + 192);
  int j;

  _mm_store_si128 ((__m128i *) (grp + 16 * i), _mm512_cvtepi32_epi8 (q0));
  _mm_store_si128 ((__m128i *) (grp + 64 + 16 * i), _mm512_cvtepi32_epi8 (q1));
  for (j = 0; j < 4; j++) {
    corr[4 * i + j] = -3 * qsum;
    dx[4 * i + j] = d * 0.5f;
  }
}

void
npu_quantize_row_avx512 (const float *x, gsize nb, gsize n_groups,
    guint8 * dst, guint8 * dst_residual)
{
  gsize g;
  int i;

  for (g = 0; g < n_groups; g++) {
    guint8 *grp = dst + g * NPU_Q8_GROUP_BYTES;
    guint8 *grp_r = dst_residual ? dst_residual + g * NPU_Q8_GROUP_BYTES : NULL;

    for (i = 0; i < 4; i++) {
      const gsize b = g * 4 + i;
      __m512 a0, a1;
      __m512i q0, q1;
      float d;

      if (b >= nb) {
        /* padding: zero codes against zero weights */
        store_block (grp, i, _mm512_setzero_si512 (), _mm512_setzero_si512 (),
            0.0f);
        if (grp_r)
          store_block (grp_r, i, _mm512_setzero_si512 (),
              _mm512_setzero_si512 (), 0.0f);
        continue;
      }
      a0 = _mm512_loadu_ps (x + 32 * b);
      a1 = _mm512_loadu_ps (x + 32 * b + 16);
      d = npu_quantize_block_avx512 (a0, a1, 127.0f, &q0, &q1);
      store_block (grp, i, q0, q1, d);
      if (grp_r) {
        /* x - d q with one rounding (an FMA), where npumatmul.c's
         * residual_row() rounds the product and the difference: at least
         * as close, within npumatmul.h's 2^-16 for this rounding.  A
         * block that is not finite keeps its values. */
        if (isfinite (d)) {
          const __m512 vd = _mm512_set1_ps (d);

          a0 = _mm512_fnmadd_ps (vd, _mm512_cvtepi32_ps (q0), a0);
          a1 = _mm512_fnmadd_ps (vd, _mm512_cvtepi32_ps (q1), a1);
        }
        d = npu_quantize_block_avx512 (a0, a1, 127.0f, &q0, &q1);
        store_block (grp_r, i, q0, q1, d);
      }
    }
  }
}

/* ------------------------------------------------------------------------
 * Q8_0 weights
 */

/* vpermt2b indices gathering the codes of 2 blocks from p[0..63] (0..63)
 * and p[4..67] (64..127): p[2..33], then p[36..67] */
static const guint8 idx_q8_0_qs_bytes[64] __attribute__((aligned (64))) = {
  2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
  18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33,
  96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
  112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126,
  127
};

/* vpermw indices: the scale of block 0 (word 0) into words 0..7, that of
 * block 1 (word 17, bytes 34..35) into words 8..15 */
static const guint16 idx_q8_0_d_words[32] __attribute__((aligned (64))) = {
  0, 0, 0, 0, 0, 0, 0, 0, 17, 17, 17, 17, 17, 17, 17, 17,
};

/* Bytes of the 2 blocks a step reads, and a lone last block's */
#define Q8_0_PAIR_W_BYTES (2 * sizeof (NpuBlockQ8_0))
#define Q8_0_ONE_BLOCK_MASK \
  ((G_GUINT64_CONSTANT (1) << sizeof (NpuBlockQ8_0)) - 1)

typedef struct
{
  __m512i wu;                   /* w + 128, unsigned */
  __m512 s;                     /* d_w, 8 lanes per block */
} Q8Decoded;

/* @a: bytes 0..63 of 2 blocks, @b: bytes 4..67 */
static ALWAYS_INLINE Q8Decoded
q8_0_decode (__m512i a, __m512i b)
{
  const __m512i w = _mm512_permutex2var_epi8 (a,
      _mm512_load_si512 (idx_q8_0_qs_bytes), b);
  const __m512i dw =
      _mm512_permutexvar_epi16 (_mm512_load_si512 (idx_q8_0_d_words), a);
  Q8Decoded d;

  d.wu = _mm512_xor_si512 (w, _mm512_set1_epi8 ((char) 0x80));
  d.s = _mm512_cvtph_ps (_mm512_castsi512_si256 (dw));
  return d;
}

/* One pair of blocks: R decoded weight rows times C activation rows */
static ALWAYS_INLINE void
q8_0_step (const Q8Decoded * wd, const guint8 * xp, gsize xstride,
    __m512 acc[RM][CM], const int R, const int C)
{
  int i, j;

  for (j = 0; j < C; j++) {
    const guint8 *xg = xp + j * xstride;
    const __m512i x = _mm512_load_si512 (xg);
    const __m512 dx = _mm512_load_ps (xg + 64);
    const __m512i corr = _mm512_load_si512 (xg + 128);

    for (i = 0; i < R; i++) {
      const __m512i t = _mm512_dpbusd_epi32 (corr, wd[i].wu, x);

      acc[i][j] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (t),
          _mm512_mul_ps (wd[i].s, dx), acc[i][j]);
    }
  }
}

static ALWAYS_INLINE void
q8_0_micro (const NpuBlockQ8_0 * w, gsize nb, gsize r, const NpuQ8Act * xq,
    gsize c, float *y, gsize ldy, const int R, const int C)
{
  __m512 acc[RM][CM];
  Q8Decoded wd[RM];
  const gsize row_bytes = nb * sizeof (NpuBlockQ8_0);
  const guint8 *w0 = (const guint8 *) (w + r * nb);
  const guint8 *xp = xq->data + c * xq->row_stride;
  const gsize n_full = nb / 2;
  gsize p;
  int i, j;

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      acc[i][j] = _mm512_setzero_ps ();

  for (p = 0; p < n_full; p++) {
    for (i = 0; i < R; i++) {
      const guint8 *wp = w0 + i * row_bytes + p * Q8_0_PAIR_W_BYTES;

      _mm_prefetch ((const char *) wp + PF_DIST, _MM_HINT_T0);
      wd[i] = q8_0_decode (_mm512_loadu_si512 (wp),
          _mm512_loadu_si512 (wp + 4));
    }
    q8_0_step (wd, xp + p * NPU_Q8_0_PAIR_BYTES, xq->row_stride, acc, R, C);
  }

  if (nb % 2) {
    /* A lone last block: a masked load (which cannot fault past the row)
     * leaves the second block's scale and codes 0, against zero
     * activations (whose corr is 0 too). */
    for (i = 0; i < R; i++)
      wd[i] = q8_0_decode (_mm512_maskz_loadu_epi8 (Q8_0_ONE_BLOCK_MASK,
              w0 + i * row_bytes + n_full * Q8_0_PAIR_W_BYTES),
          _mm512_setzero_si512 ());
    q8_0_step (wd, xp + n_full * NPU_Q8_0_PAIR_BYTES, xq->row_stride, acc,
        R, C);
  }

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      y[(c + j) * ldy + r + i] = _mm512_reduce_add_ps (acc[i][j]);
}

#define Q8_0_MICRO_CASES(R) \
  switch (cc) { \
    case 2: q8_0_micro (w, nb, r, xq, c, y, ldy, R, 2); break; \
    case 3: q8_0_micro (w, nb, r, xq, c, y, ldy, R, 3); break; \
    default: q8_0_micro (w, nb, r, xq, c, y, ldy, R, 4); break; \
  }

void
npu_q8_0_tile_avx512 (const NpuBlockQ8_0 * w, gsize nb, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy)
{
  gsize c, r;

  G_STATIC_ASSERT (CM == 4);
  for (c = c0; c < c1; c += CM) {
    const gsize cc = MIN (CM, c1 - c);

    if (cc == 1) {
      /* GEMV: one sequential stream per thread, as for MXFP4 */
      for (r = r0; r < r1; r++)
        q8_0_micro (w, nb, r, xq, c, y, ldy, 1, 1);
    } else {
      for (r = r0; r + RM <= r1; r += RM)
        Q8_0_MICRO_CASES (RM);
      for (; r < r1; r++)
        Q8_0_MICRO_CASES (1);
    }
  }
}

/* A one-token GEMV of Q8_0 weights, as the MXFP4 one above: the rows
 * [r0, r1) read as S sequential runs side by side, the accurate
 * precision's codes and residuals multiplied with each pair of blocks as
 * it is decoded and summed into one accumulator (their block sums
 * combined, then scaled once by d_w). */
static ALWAYS_INLINE void
q8_0_gemv_micro (const NpuBlockQ8_0 * w, gsize nb, gsize r, gsize rs,
    const NpuQ8Act * xq, gsize c, float *y, const int S, const int C)
{
  __m512 acc[GEMV_MAX_STREAMS];
  const gsize row_bytes = nb * sizeof (NpuBlockQ8_0);
  const guint8 *w0 = (const guint8 *) (w + r * nb);
  const guint8 *xp = xq->data + c * xq->row_stride;
  const gsize xs = xq->row_stride;
  const gsize n_pairs = (nb + 1) / 2;
  gsize p;
  int i, j;

  for (i = 0; i < S; i++)
    acc[i] = _mm512_setzero_ps ();

  for (p = 0; p < n_pairs; p++) {
    const guint8 *xg = xp + p * NPU_Q8_0_PAIR_BYTES;
    __m512i x[2], corr[2];
    __m512 dx[2];

    for (j = 0; j < C; j++) {
      x[j] = _mm512_load_si512 (xg + j * xs);
      dx[j] = _mm512_load_ps (xg + j * xs + 64);
      corr[j] = _mm512_load_si512 (xg + j * xs + 128);
    }
    for (i = 0; i < S; i++) {
      const guint8 *wp = w0 + i * rs * row_bytes + p * Q8_0_PAIR_W_BYTES;
      Q8Decoded wd;

      if (G_UNLIKELY (2 * p + 1 == nb)) {
        /* a lone last block, as in q8_0_micro() */
        wd = q8_0_decode (_mm512_maskz_loadu_epi8 (Q8_0_ONE_BLOCK_MASK, wp),
            _mm512_setzero_si512 ());
      } else {
        _mm_prefetch ((const char *) wp + GEMV_PF_DIST, _MM_HINT_T0);
        wd = q8_0_decode (_mm512_loadu_si512 (wp), _mm512_loadu_si512 (wp + 4));
      }
      if (C == 1) {
        const __m512i t = _mm512_dpbusd_epi32 (corr[0], wd.wu, x[0]);

        acc[i] = _mm512_fmadd_ps (_mm512_cvtepi32_ps (t),
            _mm512_mul_ps (wd.s, dx[0]), acc[i]);
      } else {
        const __m512i t0 = _mm512_dpbusd_epi32 (corr[0], wd.wu, x[0]);
        const __m512i t1 = _mm512_dpbusd_epi32 (corr[1], wd.wu, x[1]);
        const __m512 f = _mm512_fmadd_ps (_mm512_cvtepi32_ps (t0), dx[0],
            _mm512_mul_ps (_mm512_cvtepi32_ps (t1), dx[1]));

        acc[i] = _mm512_fmadd_ps (f, wd.s, acc[i]);
      }
    }
  }

  for (i = 0; i < S; i++)
    y[r + i * rs] = _mm512_reduce_add_ps (acc[i]);
}

static ALWAYS_INLINE void
q8_0_gemv_runs (const NpuBlockQ8_0 * w, gsize nb, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c, float *y, const int S, const int C)
{
  const gsize run = (r1 - r0) / S;
  gsize r;

  for (r = r0; r < r0 + run; r++)
    q8_0_gemv_micro (w, nb, r, run, xq, c, y, S, C);
  for (r = r0 + S * run; r < r1; r++)
    q8_0_gemv_micro (w, nb, r, 1, xq, c, y, 1, C);
}

#define Q8_0_GEMV_STREAM_CASES(C) \
  switch (streams) { \
    case 1: q8_0_gemv_runs (w, nb, r0, r1, xq, c, y, 1, C); break; \
    case 2: q8_0_gemv_runs (w, nb, r0, r1, xq, c, y, 2, C); break; \
    case 4: q8_0_gemv_runs (w, nb, r0, r1, xq, c, y, 4, C); break; \
    default: q8_0_gemv_runs (w, nb, r0, r1, xq, c, y, 8, C); break; \
  }

void
npu_q8_0_gemv_avx512 (const NpuBlockQ8_0 * w, gsize nb, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c, gboolean accurate, float *y, guint streams)
{
  if (accurate) {
    Q8_0_GEMV_STREAM_CASES (2);
  } else {
    Q8_0_GEMV_STREAM_CASES (1);
  }
}

/* ------------------------------------------------------------------------
 * Accurate GEMM: exact F32 activations, MXFP4 weights decoded to F32
 *
 * An E2M1 value times its power-of-two scale is exact in F32, so a weight
 * decoded to F32 carries no error and the activations need no
 * quantisation: the only roundings are those of the F32 FMAs.  The
 * weights of 64 rows x 128 k (4 blocks) are decoded into a panel of 32 KiB
 * (L1), transposed so that one zmm holds 16 rows at one k; the kernel then
 * broadcasts one activation and makes 4 FMAs with it, over 6 activation
 * rows at once (24 accumulators), which is 24 FMAs for 4 loads and 6
 * broadcasts per k: the FMA ports, not the decode, set the pace.  Each
 * chunk of 128 k is summed into zeroed accumulators and then added to y,
 * so an output takes at most 128 + ceil(k / 128) roundings
 * (npumatmul.h).  The panel holds the weights divided by 4, which is
 * exact for every E8M0 scale (the smallest, 0.5 x 2^-129, is a multiple of
 * 2^-149), while the largest, 6 x 2^127, would overflow F32; each chunk's
 * sum is multiplied by 4 (exact) as it is added to y.  The decode gathers, for 16 rows at once, 4 nibble bytes
 * per row (vpgatherdd), and vpermps looks the nibbles up: it reads the low
 * 4 bits of each index, so neither nibble needs a mask, only a shift.
 */
#define F32_PANEL_ROWS 64
#define F32_PANEL_BLOCKS 4
#define F32_NR 6
#define F32_PANEL_SCALE 0.25f

static const float e2m1_f32[16] __attribute__((aligned (64))) = {
  0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

/* Weights of rows [r, r + valid) and blocks [b0, b0 + nbc) into
 * panel[kk * 64 + row]; rows past @valid are zero. */
static void
f32_decode_panel (const NpuMxfp4Matrix * w, gsize r, gsize valid, gsize b0,
    gsize nbc, float *panel)
{
  const __m512 lut = _mm512_load_ps (e2m1_f32);
  const gboolean split = w->layout == NPU_MXFP4_LAYOUT_SPLIT;
  const gsize row_bytes = split ? w->stride * 16 : w->n_blocks * 17;
  const __m512i offs = _mm512_mullo_epi32 (_mm512_set_epi32 (15, 14, 13, 12,
          11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
      _mm512_set1_epi32 ((int) row_bytes));
  gsize v, b, i;

  for (v = 0; v < F32_PANEL_ROWS / 16; v++) {
    const gsize rv = r + 16 * v;
    const gsize nv = valid > 16 * v ? MIN (16, valid - 16 * v) : 0;
    const __mmask16 m = (__mmask16) ((1u << nv) - 1);

    for (b = 0; b < nbc; b++) {
      const guint8 *qs;
      float sc[16] __attribute__((aligned (64)));
      __m512 s;
      int t, u;

      /* NaN scales stay NaN (the table's entry 255), so their rows are */
      for (i = 0; i < 16; i++) {
        guint8 e = 0;

        if (i < nv)
          e = split ? w->scales[(rv + i) * w->stride + b0 + b] :
              w->blocks[(rv + i) * w->n_blocks + b0 + b].e;
        sc[i] = i < nv ? npu_matmul_e8m0_table[e] * F32_PANEL_SCALE : 0.0f;
      }
      if (nv == 0) {
        for (i = 0; i < 32; i++)
          _mm512_store_ps (panel + ((b * 32 + i) * F32_PANEL_ROWS + 16 * v),
              _mm512_setzero_ps ());
        continue;
      }
      s = _mm512_load_ps (sc);
      qs = split ? w->nibbles + (rv * w->stride + b0 + b) * 16 :
          (const guint8 *) (w->blocks + rv * w->n_blocks + b0 + b) + 1;
      for (t = 0; t < 4; t++) {
        const __m512i g = _mm512_mask_i32gather_epi32 (_mm512_setzero_si512 (),
            m, offs, qs + 4 * t, 1);

        for (u = 0; u < 4; u++) {
          const gsize j = 4 * t + u;
          const __m512 lo = _mm512_permutexvar_ps (_mm512_srli_epi32 (g,
                  8 * u), lut);
          const __m512 hi = _mm512_permutexvar_ps (_mm512_srli_epi32 (g,
                  8 * u + 4), lut);

          _mm512_store_ps (panel + ((b * 32 + j) * F32_PANEL_ROWS + 16 * v),
              _mm512_mul_ps (lo, s));
          _mm512_store_ps (panel + ((b * 32 + 16 + j) * F32_PANEL_ROWS +
                  16 * v), _mm512_mul_ps (hi, s));
        }
      }
    }
  }
}

/* y[j * ldy + 0..63] (+)= sum over kk < kc of panel[kk][..] x[j * ldx + kk]
 * for j < C; @m masks the rows of each of the 4 vectors */
static ALWAYS_INLINE void
f32_micro (const float *panel, gsize kc, const float *x, gsize ldx,
    float *y, gsize ldy, const __mmask16 * m, gboolean first, const int C)
{
  __m512 acc[4][F32_NR];
  gsize kk;
  int v, j;

  for (v = 0; v < 4; v++)
    for (j = 0; j < C; j++)
      acc[v][j] = _mm512_setzero_ps ();
  for (kk = 0; kk < kc; kk++) {
    const float *p = panel + kk * F32_PANEL_ROWS;
    const __m512 w0 = _mm512_load_ps (p);
    const __m512 w1 = _mm512_load_ps (p + 16);
    const __m512 w2 = _mm512_load_ps (p + 32);
    const __m512 w3 = _mm512_load_ps (p + 48);

    for (j = 0; j < C; j++) {
      const __m512 xb = _mm512_set1_ps (x[j * ldx + kk]);

      acc[0][j] = _mm512_fmadd_ps (w0, xb, acc[0][j]);
      acc[1][j] = _mm512_fmadd_ps (w1, xb, acc[1][j]);
      acc[2][j] = _mm512_fmadd_ps (w2, xb, acc[2][j]);
      acc[3][j] = _mm512_fmadd_ps (w3, xb, acc[3][j]);
    }
  }
  for (j = 0; j < C; j++) {
    for (v = 0; v < 4; v++) {
      float *yp = y + j * ldy + 16 * v;
      __m512 r = _mm512_mul_ps (acc[v][j],
          _mm512_set1_ps (1.0f / F32_PANEL_SCALE));

      if (!first)
        r = _mm512_add_ps (_mm512_maskz_loadu_ps (m[v], yp), r);
      _mm512_mask_storeu_ps (yp, m[v], r);
    }
  }
}

void
npu_mxfp4_tile_f32_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const float *x, gsize c0, gsize c1, float *y, gsize ldy)
{
  float panel[F32_PANEL_BLOCKS * 32 * F32_PANEL_ROWS]
      __attribute__((aligned (64)));
  const gsize k = w->k, nb = w->n_blocks;
  gsize r, b0, c;

  for (r = r0; r < r1; r += F32_PANEL_ROWS) {
    const gsize valid = MIN (F32_PANEL_ROWS, r1 - r);
    __mmask16 m[4];
    int v;

    for (v = 0; v < 4; v++) {
      gsize nv = valid > 16u * v ? MIN (16, valid - 16u * v) : 0;

      m[v] = (__mmask16) ((1u << nv) - 1);
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
