/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 x int8 and Q8_0 x int8 kernels for AArch64 NEON, with
 * the dot-product extension (ARMv8.2 SDOT) and without it
 *
 * Built twice (meson.build): with -march=armv8.2-a+dotprod as the neon
 * level's kernels (npu_*_tile_neon, only called when the CPU reports
 * asimddp), and with the baseline flags as the asimd level's
 * (npu_*_tile_asimd, any aarch64 CPU: the Cortex-A53, A55 and A72 have no
 * sdot).  There each pair of sdot becomes smull/smlal into 8 int16 lanes
 * and a pairwise widening add into 4 int32 lanes, as ggml's
 * ggml_vdotq_s32 () does: each int16 lane holds two products of at most
 * 127 x 128 (Q8_0's code -128 times an activation code, |q| <= 127), so
 * at most 32512, no overflow; the lanes hold other partial sums than
 * sdot's, and the block's sum over them is the same integer.
 *
 * One q register holds one block's 16 nibble bytes; tbl decodes
 * the low and high nibbles to signed 2 * P (sdot is signed x signed, so the
 * +12 bias and its correction that x86 needs are not used), two sdot give the
 * block's sum in 4 int32 lanes, which are converted and scaled by
 * 2^(e-127) * d / 2.  Blocks are processed one at a time, so k needs no
 * multiple of 4 blocks and the ggml layout needs no tail copy.
 *
 * Q8_0 weights: two q registers hold a block's 32 codes, which meet the
 * activations in two sdot (signed x signed, no sign trick), as ggml's
 * vec_dot_q8_0_q8_0; the block's sum, in 4 int32 lanes, is scaled by
 * d_w d_x (the F16 d_w widened by fcvtl).
 */
#include "npumatmul-private.h"

#include <arm_neon.h>

#if defined(__ARM_FEATURE_DOTPROD)
#define TILE_NAME(f) f##_neon
#else
#define TILE_NAME(f) f##_asimd
#endif

/* sum of a[i] b[i] + c[i] d[i], i < 16, in 4 int32 lanes (which lane
 * holds which products differs between the two builds) */
static inline int32x4_t
dot2_s8 (int8x16_t a, int8x16_t b, int8x16_t c, int8x16_t d)
{
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32 (vdotq_s32 (vdupq_n_s32 (0), a, b), c, d);
#else
  int16x8_t lo = vmull_s8 (vget_low_s8 (a), vget_low_s8 (b));
  int16x8_t hi = vmull_high_s8 (a, b);

  lo = vmlal_s8 (lo, vget_low_s8 (c), vget_low_s8 (d));
  hi = vmlal_high_s8 (hi, c, d);
  return vpadalq_s16 (vpaddlq_s16 (lo), hi);
#endif
}

#define RM 2
#define CM 2

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

static const gint8 lut_bytes[16] = {
  0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12
};

static ALWAYS_INLINE void
micro (const NpuMxfp4Matrix * w, gsize r, const NpuQ8Act * xq, gsize c,
    float *y, gsize ldy, const int R, const int C, const gboolean split)
{
  const int8x16_t lut = vld1q_s8 (lut_bytes);
  const uint8x16_t m4 = vdupq_n_u8 (0x0F);
  const gsize nb = w->n_blocks;
  const guint8 *xp = xq->data + c * xq->row_stride;
  float32x4_t acc[RM][CM];
  int8x16_t wlo[RM], whi[RM];
  float32x4_t sw[RM];
  gsize b;
  int i, j;

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      acc[i][j] = vdupq_n_f32 (0.0f);

  for (b = 0; b < nb; b++) {
    const gsize xoff = (b / 4) * NPU_Q8_GROUP_BYTES + (b % 4) * 16;

    for (i = 0; i < R; i++) {
      const guint8 *qs;
      guint8 e;
      uint8x16_t q;

      if (split) {
        qs = w->nibbles + ((r + i) * w->stride + b) * 16;
        e = w->scales[(r + i) * w->stride + b];
      } else {
        qs = w->blocks[(r + i) * nb + b].qs;
        e = w->blocks[(r + i) * nb + b].e;
      }
      __builtin_prefetch (qs + 4096);
      q = vld1q_u8 (qs);
      wlo[i] = vqtbl1q_s8 (lut, vandq_u8 (q, m4));
      whi[i] = vqtbl1q_s8 (lut, vshrq_n_u8 (q, 4));
      sw[i] = vdupq_n_f32 (npu_matmul_e8m0_table[e]);
    }
    for (j = 0; j < C; j++) {
      const guint8 *xg = xp + j * xq->row_stride + xoff;
      const int8x16_t xlo = vld1q_s8 ((const gint8 *) xg);
      const int8x16_t xhi = vld1q_s8 ((const gint8 *) (xg + 64));
      /* dx of block b % 4, 4 equal lanes */
      const float32x4_t dx = vld1q_f32 ((const float *) (xg + 192));

      for (i = 0; i < R; i++) {
        const int32x4_t t = dot2_s8 (wlo[i], xlo, whi[i], xhi);

        acc[i][j] = vfmaq_f32 (acc[i][j], vcvtq_f32_s32 (t),
            vmulq_f32 (sw[i], dx));
      }
    }
  }

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      y[(c + j) * ldy + r + i] = vaddvq_f32 (acc[i][j]);
}

#define MICRO_CASES(R, split) \
  switch (cc) { \
    case 1: micro (w, r, xq, c, y, ldy, R, 1, split); break; \
    default: micro (w, r, xq, c, y, ldy, R, 2, split); break; \
  }

void
TILE_NAME (npu_mxfp4_tile) (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy)
{
  gsize c, r;

  G_STATIC_ASSERT (CM == 2);
  for (c = c0; c < c1; c += CM) {
    const gsize cc = MIN (CM, c1 - c);

    if (w->layout == NPU_MXFP4_LAYOUT_SPLIT) {
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
static ALWAYS_INLINE void
q8_0_micro (const NpuBlockQ8_0 * w, gsize nb, gsize r, const NpuQ8Act * xq,
    gsize c, float *y, gsize ldy, const int R, const int C)
{
  const guint8 *xp = xq->data + c * xq->row_stride;
  float32x4_t acc[RM][CM];
  int8x16_t wlo[RM], whi[RM];
  float32x4_t sw[RM];
  gsize b;
  int i, j;

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      acc[i][j] = vdupq_n_f32 (0.0f);

  for (b = 0; b < nb; b++) {
    /* block b % 2 of its pair: codes at 32 (b % 2), scale lanes at
     * 64 + 32 (b % 2) */
    const gsize xoff = (b / 2) * NPU_Q8_0_PAIR_BYTES + (b % 2) * 32;

    for (i = 0; i < R; i++) {
      const NpuBlockQ8_0 *blk = w + (r + i) * nb + b;
      const uint16x4_t d = vdup_n_u16 ((guint16) (blk->d[0] | blk->d[1] << 8));

      __builtin_prefetch ((const guint8 *) blk + 4096);
      wlo[i] = vld1q_s8 (blk->qs);
      whi[i] = vld1q_s8 (blk->qs + 16);
      sw[i] = vcvt_f32_f16 (vreinterpret_f16_u16 (d));
    }
    for (j = 0; j < C; j++) {
      const guint8 *xg = xp + j * xq->row_stride + xoff;
      const int8x16_t xlo = vld1q_s8 ((const gint8 *) xg);
      const int8x16_t xhi = vld1q_s8 ((const gint8 *) (xg + 16));
      const float32x4_t dx = vld1q_f32 ((const float *) (xg + 64));

      for (i = 0; i < R; i++) {
        const int32x4_t t = dot2_s8 (wlo[i], xlo, whi[i], xhi);

        acc[i][j] = vfmaq_f32 (acc[i][j], vcvtq_f32_s32 (t),
            vmulq_f32 (sw[i], dx));
      }
    }
  }

  for (i = 0; i < R; i++)
    for (j = 0; j < C; j++)
      y[(c + j) * ldy + r + i] = vaddvq_f32 (acc[i][j]);
}

void
TILE_NAME (npu_q8_0_tile) (const NpuBlockQ8_0 * w, gsize nb, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy)
{
  gsize c, r;

  G_STATIC_ASSERT (CM == 2);
  for (c = c0; c < c1; c += CM) {
    if (c + 1 == c1) {
      for (r = r0; r + RM <= r1; r += RM)
        q8_0_micro (w, nb, r, xq, c, y, ldy, RM, 1);
      for (; r < r1; r++)
        q8_0_micro (w, nb, r, xq, c, y, ldy, 1, 1);
    } else {
      for (r = r0; r + RM <= r1; r += RM)
        q8_0_micro (w, nb, r, xq, c, y, ldy, RM, CM);
      for (; r < r1; r++)
        q8_0_micro (w, nb, r, xq, c, y, ldy, 1, CM);
    }
  }
}
