/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the MXFP4 x int8 product with the int8 matrix multiply
 * (ARMv8.6 I8MM, smmla) for several activation rows at once (prefill,
 * encoders)
 *
 * Built with -march=armv8.2-a+dotprod+i8mm; only called when the CPU
 * reports HWCAP2_I8MM (the neon-i8mm level, npucpu.h).  smmla multiplies
 * a 2x8 int8 matrix by the transpose of another into the 2x2 int32 sums
 * of a q register: with two weight rows' 8 values side by side in one
 * and two activation rows' in the other, four smmla give the 2x2 block
 * of a 32-value block's dot products, each an exact int32 sum, where
 * sdot needs eight (two per output) and a horizontal sum at the end.
 *
 * The weights' nibbles are decoded by tbl to signed 2 P, as in the sdot
 * kernel (npumatmul-neon.c); zip1 / zip2 of 64-bit halves put two rows'
 * values side by side.  The micro tile is up to 4 weight rows by 4
 * activation rows, in pairs; an odd last row or column goes to the sdot
 * kernel, and so does a single activation row (a one-token product, where
 * half of each smmla would be wasted).
 */
#include "npumatmul-private.h"

#include <arm_neon.h>

#define ALWAYS_INLINE inline __attribute__ ((always_inline))

/* Pairs of weight rows and of activation rows in the micro tile */
#define RP 2
#define CP 2

static const gint8 lut_bytes[16] = {
  0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12
};

/* The two halves of @a and @b side by side: [a0..7, b0..7] (@hi FALSE)
 * or [a8..15, b8..15] */
static ALWAYS_INLINE int8x16_t
pair8 (int8x16_t a, int8x16_t b, const gboolean hi)
{
  const int64x2_t a64 = vreinterpretq_s64_s8 (a);
  const int64x2_t b64 = vreinterpretq_s64_s8 (b);

  return vreinterpretq_s8_s64 (hi ? vzip2q_s64 (a64, b64) :
      vzip1q_s64 (a64, b64));
}

/* Weight row @r's block @b: its 16 nibble bytes and its scale byte */
static ALWAYS_INLINE const guint8 *
w_block (const NpuMxfp4Matrix * w, gsize r, gsize b, guint8 * e,
    const gboolean split)
{
  if (split) {
    *e = w->scales[r * w->stride + b];
    return w->nibbles + (r * w->stride + b) * 16;
  }
  *e = w->blocks[r * w->n_blocks + b].e;
  return w->blocks[r * w->n_blocks + b].qs;
}

/* Y for weight rows [r, r + 2 RN) and activation rows [c, c + 2 CN) */
static ALWAYS_INLINE void
micro (const NpuMxfp4Matrix * w, gsize r, const NpuQ8Act * xq, gsize c,
    float *y, gsize ldy, const int RN, const int CN, const gboolean split)
{
  const int8x16_t lut = vld1q_s8 (lut_bytes);
  const uint8x16_t m4 = vdupq_n_u8 (0x0F);
  const gsize nb = w->n_blocks;
  const guint8 *xp = xq->data + c * xq->row_stride;
  float32x4_t acc[RP][CP];
  gsize b;
  int i, j, h;

  for (i = 0; i < RN; i++)
    for (j = 0; j < CN; j++)
      acc[i][j] = vdupq_n_f32 (0.0f);

  for (b = 0; b < nb; b++) {
    const gsize xoff = (b / 4) * NPU_Q8_GROUP_BYTES + (b % 4) * 16;
    /* [row 2i, row 2i + 1] x (lo 0..7, lo 8..15, hi 0..7, hi 8..15) */
    int8x16_t wp[RP][4], xpr[CP][4];
    /* the rows' scales as [s0, s0, s1, s1], the columns' as
     * [d0, d1, d0, d1]: lane 2 a + b of smmla's result is row a, column b */
    float32x4_t sw[RP], dx[CP];

    for (i = 0; i < RN; i++) {
      int8x16_t lo[2], hi[2];
      float s[2];

      for (h = 0; h < 2; h++) {
        guint8 e;
        const guint8 *qs = w_block (w, r + 2 * i + h, b, &e, split);
        const uint8x16_t q = vld1q_u8 (qs);

        __builtin_prefetch (qs + 4096);
        lo[h] = vqtbl1q_s8 (lut, vandq_u8 (q, m4));
        hi[h] = vqtbl1q_s8 (lut, vshrq_n_u8 (q, 4));
        s[h] = npu_matmul_e8m0_table[e];
      }
      wp[i][0] = pair8 (lo[0], lo[1], FALSE);
      wp[i][1] = pair8 (lo[0], lo[1], TRUE);
      wp[i][2] = pair8 (hi[0], hi[1], FALSE);
      wp[i][3] = pair8 (hi[0], hi[1], TRUE);
      sw[i] = vcombine_f32 (vdup_n_f32 (s[0]), vdup_n_f32 (s[1]));
    }
    for (j = 0; j < CN; j++) {
      const guint8 *x0 = xp + 2 * j * xq->row_stride + xoff;
      const guint8 *x1 = x0 + xq->row_stride;
      const int8x16_t lo0 = vld1q_s8 ((const gint8 *) x0);
      const int8x16_t lo1 = vld1q_s8 ((const gint8 *) x1);
      const int8x16_t hi0 = vld1q_s8 ((const gint8 *) (x0 + 64));
      const int8x16_t hi1 = vld1q_s8 ((const gint8 *) (x1 + 64));

      xpr[j][0] = pair8 (lo0, lo1, FALSE);
      xpr[j][1] = pair8 (lo0, lo1, TRUE);
      xpr[j][2] = pair8 (hi0, hi1, FALSE);
      xpr[j][3] = pair8 (hi0, hi1, TRUE);
      /* d / 2 of block b % 4 in 4 equal lanes of each row */
      dx[j] = vtrn1q_f32 (vld1q_f32 ((const float *) (x0 + 192)),
          vld1q_f32 ((const float *) (x1 + 192)));
    }
    for (i = 0; i < RN; i++) {
      for (j = 0; j < CN; j++) {
        int32x4_t t = vmmlaq_s32 (vdupq_n_s32 (0), wp[i][0], xpr[j][0]);

        t = vmmlaq_s32 (t, wp[i][1], xpr[j][1]);
        t = vmmlaq_s32 (t, wp[i][2], xpr[j][2]);
        t = vmmlaq_s32 (t, wp[i][3], xpr[j][3]);
        acc[i][j] = vfmaq_f32 (acc[i][j], vcvtq_f32_s32 (t),
            vmulq_f32 (sw[i], dx[j]));
      }
    }
  }

  for (i = 0; i < RN; i++)
    for (j = 0; j < CN; j++) {
      float *o = y + (c + 2 * j) * ldy + r + 2 * i;

      o[0] = vgetq_lane_f32 (acc[i][j], 0);
      o[ldy] = vgetq_lane_f32 (acc[i][j], 1);
      o[1] = vgetq_lane_f32 (acc[i][j], 2);
      o[ldy + 1] = vgetq_lane_f32 (acc[i][j], 3);
    }
}

#define MICRO_CASES(RN, split) \
  switch (cn) { \
    case 1: micro (w, r, xq, c, y, ldy, RN, 1, split); break; \
    default: micro (w, r, xq, c, y, ldy, RN, CP, split); break; \
  }

/* Rows [r0, r0 + 2 n_pairs) by columns [c0, c1), c1 - c0 even */
static void
tile_pairs (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy,
    const gboolean split)
{
  gsize c, r;

  for (c = c0; c < c1; c += 2 * CP) {
    const gsize cn = MIN (CP, (c1 - c) / 2);

    for (r = r0; r + 2 * RP <= r1; r += 2 * RP)
      MICRO_CASES (RP, split);
    for (; r + 2 <= r1; r += 2)
      MICRO_CASES (1, split);
  }
}

void
npu_mxfp4_tile_neon_i8mm (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy)
{
  const gsize c_even = c0 + (c1 - c0) / 2 * 2;
  const gsize r_even = r0 + (r1 - r0) / 2 * 2;

  if (c_even > c0 && r_even > r0) {
    if (w->layout == NPU_MXFP4_LAYOUT_SPLIT)
      tile_pairs (w, r0, r_even, xq, c0, c_even, y, ldy, TRUE);
    else
      tile_pairs (w, r0, r_even, xq, c0, c_even, y, ldy, FALSE);
  }
  /* the odd last weight row of the column pairs, and the odd last column
   * (or a single one) with every row: the sdot kernel */
  if (r_even < r1 && c_even > c0)
    npu_mxfp4_tile_neon (w, r_even, r1, xq, c0, c_even, y, ldy);
  if (c_even < c1)
    npu_mxfp4_tile_neon (w, r0, r1, xq, c_even, c1, y, ldy);
}
