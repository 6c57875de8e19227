/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what npumatmul.c shares with its per-ISA kernel files
 *
 * Each npumatmul-<isa>.c is built with its own -m flags, so nothing here may
 * be an inline function using vector types.
 */
#ifndef __NPU_MATMUL_PRIVATE_H__
#define __NPU_MATMUL_PRIVATE_H__

#include "npumatmul.h"

G_BEGIN_DECLS

/* Activations quantised for the int8 paths.  Per activation row, one
 * 256-byte group per 4 weight blocks (128 elements), 64-byte aligned:
 *
 *   gint8   lo[64]     elements 0..15 of block i at lo[16 i ...]
 *   gint8   hi[64]     elements 16..31 of block i at hi[16 i ...]
 *   gint32  corr[16]   -3 * sum of block i's 32 codes, in lanes 4i..4i+3
 *   float   dx[16]     d_i / 2, in lanes 4i..4i+3
 *
 * lo / hi follow the weights' nibble order (low nibbles are elements 0..15),
 * so one 16-byte lane of weights meets its activations without a shuffle.
 * x86 weights are decoded to unsigned int8 2 * P + 12 (0..24) for
 * vpdpbusd / vpmaddubsw (unsigned x signed); the four lanes of corr add up to
 * -12 * sum(q), which removes the +12.  dx halves d because the table holds
 * 2 * P.  Blocks past k are zero. */
#define NPU_Q8_GROUP_BYTES 256

/* Activations quantised for the Q8_0 int8 paths: per activation row, one
 * 192-byte pair per 2 blocks, 64-byte aligned:
 *
 *   gint8   q[64]      block 2i at q[0 ...], block 2i + 1 at q[32 ...]
 *   float   dx[16]     d of block 2i in lanes 0..7, of 2i + 1 in 8..15
 *   gint32  corr[16]   -128 * (q[4l] + q[4l + 1] + q[4l + 2] + q[4l + 3])
 *                      in lane l
 *
 * A 64-byte load then holds 2 blocks, the codes in the order of the
 * weights', and the scales come spread over each block's 8 int32 lanes of
 * a 512-bit (or its 4 lanes of a 128-bit) dot product.  corr is for
 * vpdpbusd (unsigned x signed), which takes the weights as w + 128: it
 * starts each lane at minus the bias of that lane's own 4 products, so
 * every lane ends as their exact sum.  A block past k is zero. */
#define NPU_Q8_0_PAIR_BYTES 192

typedef struct
{
  gsize n;                      /* activation rows */
  gsize n_groups;               /* ceil (n_blocks / 4), or for Q8_0 pairs
                                 * ceil (n_blocks / 2) */
  gsize row_stride;             /* bytes: n_groups * group bytes */
  guint8 *data;
} NpuQ8Act;

/* Activations quantised for the panel GEMMs' broadcasts (fast: int8
 * codes; accurate: int16 codes): per activation row (row_stride bytes, a
 * multiple of 64), the codes in their natural order (nb * 32 of them, one
 * broadcast dword = 4 / code_bytes consecutive k), then at dx_offset the
 * F32 scale d of each block, then, for int8 codes only, at corr_offset
 * each block's -12 * sum(q) (the fast GEMM's weights enter as 2 P + 12).
 * Per block of 32: d = max|x| / qmax (127 or 32767), q = round (x / d). */
typedef struct
{
  gsize n;
  gsize row_stride;
  gsize dx_offset, corr_offset;
  guint8 *data;
} NpuPanelRows;

/* Bytes of scratch a panel GEMM needs for @nb blocks: a panel of 32 rows
 * (32 x 32 codes of @code_bytes per block) and its 32 scales per block */
#define NPU_PANEL_SCRATCH(nb, code_bytes) \
  ((nb) * (32 * 32 * (code_bytes) + 32 * 4))

/* One panel GEMM: @quantize_row puts one activation row @x of @nb blocks
 * at @row in @layout's order; @tile computes Y[c][r] for r in [r0, r1), c
 * in [c0, c1): y[c * ldy + r], with @scratch NPU_PANEL_SCRATCH (nb,
 * code_bytes) bytes, 64-byte aligned, the calling worker's own. */
typedef void (*NpuPanelQuantizeRowFunc) (const float *x, gsize nb,
    guint8 * row, const NpuPanelRows * layout);
typedef void (*NpuMxfp4PanelTileFunc) (const NpuMxfp4Matrix * w, gsize r0,
    gsize r1, const NpuPanelRows * xq, gsize c0, gsize c1, float *y,
    gsize ldy, guint8 * scratch);

typedef struct
{
  guint code_bytes;             /* 1: int8 codes, 2: int16 */
  NpuPanelQuantizeRowFunc quantize_row;
  NpuMxfp4PanelTileFunc tile;
} NpuPanelGemm;

/* The fast (int8, vpdpbusd) and accurate (int16, vpdpwssd) panel GEMMs */
void npu_mxfp4_tile_gemm8_avx512 (const NpuMxfp4Matrix * w, gsize r0,
    gsize r1, const NpuPanelRows * xq, gsize c0, gsize c1, float *y,
    gsize ldy, guint8 * scratch);
void npu_mxfp4_tile_gemm16_avx512 (const NpuMxfp4Matrix * w, gsize r0,
    gsize r1, const NpuPanelRows * xq, gsize c0, gsize c1, float *y,
    gsize ldy, guint8 * scratch);
void npu_quantize_row_q8_avx512 (const float *x, gsize nb, guint8 * row,
    const NpuPanelRows * layout);
void npu_quantize_row_q16_avx512 (const float *x, gsize nb, guint8 * row,
    const NpuPanelRows * layout);

/* Y[c][r] for r in [r0, r1), c in [c0, c1): y[c * ldy + r] */
typedef void (*NpuMxfp4TileFunc) (const NpuMxfp4Matrix * w, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);

void npu_mxfp4_tile_avx2 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);
void npu_mxfp4_tile_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);
void npu_mxfp4_tile_neon (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);
/* the same without sdot (npumatmul-neon.c built without the dot product) */
void npu_mxfp4_tile_asimd (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);
/* smmla for pairs of weight and activation rows, the sdot kernel for the
 * odd ones (npumatmul-neon-i8mm.c) */
void npu_mxfp4_tile_neon_i8mm (const NpuMxfp4Matrix * w, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);

/* One activation row of @nb blocks into the MXFP4 kernels' layout above
 * (@n_groups groups at @dst), as npumatmul.c's quantiser does; with
 * @dst_residual, the codes of its residual too (the accurate precision's
 * second row) */
void npu_quantize_row_avx512 (const float *x, gsize nb, gsize n_groups,
    guint8 * dst, guint8 * dst_residual);

/* A GEMV of one token over weight rows [r0, r1): y[r] from activation
 * row @c of @xq, or with @accurate from rows c and c + 1 (the codes and
 * their residuals), summed.  The rows are read as @streams (1, 2, 4 or 8)
 * sequential runs side by side. */
typedef void (*NpuMxfp4GemvFunc) (const NpuMxfp4Matrix * w, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c, gboolean accurate, float *y,
    guint streams);

void npu_mxfp4_gemv_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const NpuQ8Act * xq, gsize c, gboolean accurate, float *y, guint streams);

/* The same for Q8_0 weights (rows x nb blocks) */
typedef void (*NpuQ8_0GemvFunc) (const NpuBlockQ8_0 * w, gsize nb, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c, gboolean accurate, float *y,
    guint streams);

void npu_q8_0_gemv_avx512 (const NpuBlockQ8_0 * w, gsize nb, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c, gboolean accurate, float *y,
    guint streams);

/* The accurate GEMM: Y[c][r] for r in [r0, r1), c in [c0, c1) from F32
 * activations x[c * k ...] (not quantised) and the weights decoded to F32
 * (exact): y[c * ldy + r] */
typedef void (*NpuMxfp4F32TileFunc) (const NpuMxfp4Matrix * w, gsize r0,
    gsize r1, const float *x, gsize c0, gsize c1, float *y, gsize ldy);

void npu_mxfp4_tile_f32_avx512 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const float *x, gsize c0, gsize c1, float *y, gsize ldy);
void npu_mxfp4_tile_f32_avx2 (const NpuMxfp4Matrix * w, gsize r0, gsize r1,
    const float *x, gsize c0, gsize c1, float *y, gsize ldy);

/* Y[c][r] for r in [r0, r1), c in [c0, c1) of the rows x (n_blocks * 32)
 * Q8_0 matrix @w: y[c * ldy + r] */
typedef void (*NpuQ8_0TileFunc) (const NpuBlockQ8_0 * w, gsize n_blocks,
    gsize r0, gsize r1, const NpuQ8Act * xq, gsize c0, gsize c1, float *y,
    gsize ldy);

void npu_q8_0_tile_avx2 (const NpuBlockQ8_0 * w, gsize n_blocks, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);
void npu_q8_0_tile_avx512 (const NpuBlockQ8_0 * w, gsize n_blocks, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);
void npu_q8_0_tile_neon (const NpuBlockQ8_0 * w, gsize n_blocks, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);
void npu_q8_0_tile_asimd (const NpuBlockQ8_0 * w, gsize n_blocks, gsize r0,
    gsize r1, const NpuQ8Act * xq, gsize c0, gsize c1, float *y, gsize ldy);

/* 2^(e - 127) as a float (e = 0 is the subnormal 2^-127, 0xFF is NaN),
 * filled before any kernel runs */
extern float npu_matmul_e8m0_table[256];

/* @len values of @x (a block of 32, or a K-quant's group of 256) as int8
 * codes into @q with one scale, returned: d = max|x| / 127 and q = round
 * (x / d), so |q| <= 127 and |x - d q| <= d (1/2 + 2^-17) (the division is
 * correctly rounded).  All zeros give d = 0; a NaN or an Inf among them
 * gives codes 0 and d = NaN, so that every output they meet is NaN.  The
 * scalar quantiser of every int8 path (npumatmul.c, npumatmul-blocks.c);
 * the SIMD copies follow it. */
float npu_q8_quantize_group (const float *x, gsize len, gint8 * q);

G_END_DECLS

#endif /* __NPU_MATMUL_PRIVATE_H__ */
