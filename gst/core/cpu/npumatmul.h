/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 weight matrix times F32 activations
 *
 *   Y[n x rows] = X[n x k] . W^T,   W: rows x k MXFP4 (k a multiple of 32)
 *
 * n = 1 is a decode step (GEMV, bound by the memory bandwidth of the
 * weights), n > 1 a prefill (GEMM, bound by arithmetic).  X and Y are
 * row-major F32: activation row c is x[c * k ...], its output y[c * rows ...].
 *
 * Two paths, chosen at run time from the CPU's features (docs/kernels.md):
 *
 *  - "scalar": exact.  Weights decoded to F32, activations used as F32;
 *    matches the double-precision reference to float rounding.
 *  - "avx2", "avx512" (VNNI + VBMI), "neon" (dotprod), "neon-i8mm" (smmla
 *    for two activation rows and more): each activation block
 *    of 32 is quantised to int8 with its own scale d = max|x| / 127 (as
 *    llama.cpp's Q8_0 does, with an F32 scale), and the weight nibbles are
 *    decoded to int8 by table lookup, so the dot products run on integer
 *    dot-product instructions.  The error bound, per output, is
 *
 *      |y - y_ref| <= sum_j |w_j| * d_b(j) * (1/2 + 2^-17)
 *                     + (k/32 + 4) * 2^-24 * sum_j |w_j| * (|x_j| + d_b(j))
 *
 *    (the first term is the activation rounding, at most max|x|/254 per
 *    element of the block; the second is F32 accumulation across blocks).
 *    It is far below the error of the 4-bit weights themselves.  The x86
 *    kernels feed the weights to the unsigned x signed instructions as
 *    2 P + 12; the +12 is taken off in the same int32 lanes (each starts at
 *    -3 times its block's code sum), so every block's integer sum is exact
 *    2 P . q, at most 12 * 127 * 32 < 2^24 in magnitude, and its
 *    conversion to F32 exact: the bias adds no term to the bound.
 *
 * Accurate precision (the *_with_precision() functions with
 * NPU_MATMUL_PRECISION_ACCURATE): the int8 paths quantise each activation
 * block twice, x = d q + r, then r = d' q' + r' with d' = max|r| / 127 <=
 * d / 254, and run both code rows through the same int8 kernels (the
 * weights are decoded once for both; a GEMM does twice the integer work, a
 * GEMV reads the weights once for both).  The activations then carry about
 * 16 bits: per output
 *
 *      |y - y_ref| <= sum_j |w_j| * d_b(j) * (1/508 + 2^-16)
 *                     + 2 (k/32 + 6) * 2^-24 * sum_j |w_j| * (|x_j| + d_b(j))
 *
 *    (the residual's rounding, at most max|x| / 64516 per element; the
 *    2^-16 covers the F32 rounding of the residual and of d' and d; the
 *    accumulation term counts both passes and their sum).  The scalar path
 *    is exact whatever the precision.  The same bound holds for Q8_0
 *    weights.  On "avx512" a one-token product (n = 1) sums the two
 *    passes in its kernel, block by block (t d / 2 + t' d' / 2, then
 *    scaled by the weights' power of two into one accumulator), within
 *    the same bound.
 *
 *    On "avx512", an accurate product of n > 4 activation rows (a GEMM:
 *    encoders, prefill) quantises each activation block to int16 instead,
 *    d16 = max|x| / 32767, q = round (x / d16), and multiplies the codes
 *    with the weights decoded to int16 2P (exact) by vpdpwssd; each
 *    block's int32 sum is exact and its scales are applied in F32, so
 *
 *      |y - y_ref| <= sum_j |w_j| * d16_b(j) * (1/2 + 2^-9)
 *                     + (k/32 + 4) * 2^-24 * sum_j |w_j| * (|x_j| + d16_b(j))
 *
 *    (x / d16 is correctly rounded and at most 32767 < 2^15; the second
 *    term as for the int8 paths; d16 and its product with the weights'
 *    scale must be normal floats), at most max|x| / 65534 per element
 *    (15 bits and a sign), within the int8 + residual bound above.
 *    On "avx2" (and on "avx512" through npumatmul-testing.h's switch) the
 *    accurate GEMM does not quantise at all: the weights are decoded to
 *    F32 (exact: an E2M1 value times a power of two) into panels of 16
 *    (avx512: 64) rows x 128 k, and multiplied with the F32 activations by
 *    FMAs, each chunk of 128 k summed apart and then added to the output,
 *    so
 *
 *      |y - y_ref| <= (128 + ceil(k/128)) * 2^-24 * sum_j |w_j x_j|
 *
 *    (while the products stay normal floats), which is within the bound
 *    above for every k up to 16384: sum |w_j| d_b / 508 >= sum |w_j x_j| /
 *    64516.  On avx512 the fast GEMM (n > 4) decodes 32-row panels once
 *    per tile and blocks over 6 activation rows; same quantisation, same
 *    bound as the int8 paths above (docs/kernels.md).
 *
 * The path is the best level npucpu.h allows: NPU_CPU_ISA=scalar|avx2|
 * avx512|asimd|neon|neon-i8mm in the environment caps it (read once; an
 * unavailable one falls back to scalar with a warning),
 * npu_matmul_set_isa() forces one.
 *
 * Non-finite values: a NaN scale (e = 0xFF) or a NaN/Inf activation makes
 * the affected outputs non-finite (NaN in the int8 paths).
 *
 * Q8_0 weights (npu_matmul_q8_0(): ggml's block_q8_0, an F16 scale and 32
 * int8 values, as llama.cpp keeps the output matrix of its MXFP4 files) go
 * through the same paths: "scalar" multiplies the exactly decoded weights
 * with F32 activations, the int8 paths quantise the activations as above and
 * multiply int8 by int8, as llama.cpp's vec_dot_q8_0_q8_0.  Per output, with
 * w_j = d_w q_j the weights and d_b = max|x| / 127 of element j's activation
 * block:
 *
 *      |y - y_ref| <= sum_j |w_j| * d_b(j) * (1/2 + 2^-17)
 *                     + (k/32 + 6) * 2^-24 * sum_j |w_j| * (|x_j| + d_b(j))
 *
 *    (activation rounding as above; the int32 partial sums are exact, and
 *    each of them, scaled, takes one rounding for d_w d_x, at most k/32 in
 *    the F32 accumulation and 4 in the final horizontal sum, plus one for
 *    second-order terms).  The scalar path is bound like MXFP4's:
 *    |y - y_ref| <= (k/32 + 34) * 2^-24 * sum_j |w_j x_j|.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_MATMUL_H__
#define __NPU_MATMUL_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/device/npubackend.h"
#include "core/formats/npumxfp4.h"
#include "core/device/nputensorview.h"

G_BEGIN_DECLS

/**
 * NpuMxfp4Layout:
 * @NPU_MXFP4_LAYOUT_BLOCKS: ggml's block_mxfp4 array, row after row, used
 *   in place (e.g. straight from a GGUF mapping)
 * @NPU_MXFP4_LAYOUT_SPLIT: repacked at load time, still 4.25 bits a weight:
 *   per row, the E8M0 scales in one array and the 16-byte nibble groups in
 *   another (64-byte aligned), rows padded to a multiple of 4 blocks with
 *   zero blocks, so that a 64-byte load is 4 whole blocks
 */
typedef enum
{
  NPU_MXFP4_LAYOUT_BLOCKS,
  NPU_MXFP4_LAYOUT_SPLIT,
} NpuMxfp4Layout;

/**
 * NpuMxfp4Matrix:
 *
 * A rows x k MXFP4 weight matrix.  Fill it with npu_mxfp4_matrix_init_view()
 * or npu_mxfp4_matrix_repack(); release with npu_mxfp4_matrix_clear().
 * Read-only once initialised: many threads may multiply with it at once.
 */
typedef struct
{
  gsize rows;
  gsize k;
  gsize n_blocks;               /* k / 32 */
  NpuMxfp4Layout layout;

  /* NPU_MXFP4_LAYOUT_BLOCKS: rows * n_blocks blocks, not owned */
  const NpuBlockMxfp4 *blocks;

  /* NPU_MXFP4_LAYOUT_SPLIT: stride blocks per row (n_blocks rounded up to
   * 4); scales[r * stride + b]; nibbles + (r * stride + b) * 16 */
  gsize stride;
  const guint8 *scales;
  const guint8 *nibbles;
  /* SPLIT: whether any scale is NaN (0xFF), found at repack, so that a
   * GEMV looks for one in each row only where there can be one */
  gboolean nan_scales;

  gpointer owned;               /* freed by npu_mxfp4_matrix_clear() */
  gsize owned_size;             /* > 0: owned is on huge pages */
} NpuMxfp4Matrix;

NPU_API
void npu_mxfp4_matrix_init_view (NpuMxfp4Matrix * m,
    const NpuBlockMxfp4 * blocks, gsize rows, gsize k);
NPU_API
void npu_mxfp4_matrix_repack (NpuMxfp4Matrix * m,
    const NpuBlockMxfp4 * blocks, gsize rows, gsize k);
NPU_API
void npu_mxfp4_matrix_clear (NpuMxfp4Matrix * m);
/* Bytes of weight data the matrix reads for one full product */
NPU_API
gsize npu_mxfp4_matrix_get_size (const NpuMxfp4Matrix * m);

/* y[c * rows + r] = sum_j w[r][j] * x[c * k + j] for c < n.  @task may be
 * NULL (runs on the calling thread); otherwise it must be the running task
 * and the work is spread over its device's threads. */
NPU_API
void npu_matmul_mxfp4 (NpuTask * task, const NpuMxfp4Matrix * w,
    const float *x, gsize n, float *y);

/**
 * NpuMatmulPrecision:
 * @NPU_MATMUL_PRECISION_FAST: int8 activations (error ~ max|x| / 254 per
 *   element of a block), what llama.cpp does
 * @NPU_MATMUL_PRECISION_ACCURATE: int8 activations plus their int8
 *   residual, ~16 bits (error ~ max|x| / 64516 per element), twice the
 *   integer work; a GEMM (n > 4) uses int16 activations on avx512 (error
 *   ~ max|x| / 65534 per element) and F32 ones on avx2
 *
 * Ignored by the scalar path, which is exact.
 */
typedef enum
{
  NPU_MATMUL_PRECISION_FAST,
  NPU_MATMUL_PRECISION_ACCURATE,
} NpuMatmulPrecision;

/* npu_matmul_mxfp4() (which is FAST) with a choice of precision */
NPU_API
void npu_matmul_mxfp4_with_precision (NpuTask * task,
    const NpuMxfp4Matrix * w, const float *x, gsize n, float *y,
    NpuMatmulPrecision precision);

#define NPU_MATMUL_MAX_MULTI 4
NPU_API
void npu_matmul_mxfp4_multi (NpuTask * task,
    const NpuMxfp4Matrix * const *w, guint n_w, const float *x, gsize n,
    float *const *y);
NPU_API
void npu_matmul_mxfp4_multi_with_precision (NpuTask * task,
    const NpuMxfp4Matrix * const *w, guint n_w, const float *x, gsize n,
    float *const *y, NpuMatmulPrecision precision);

/**
 * NpuBlockQ8_0:
 * @d: the scale, IEEE binary16, little-endian
 * @qs: 32 values; element j is d * qs[j]
 *
 * ggml's block_q8_0 byte for byte (NPU_Q8_0_BLOCK_BYTES), so a GGUF Q8_0
 * tensor is an array of these.  No alignment is needed: a GGUF file may
 * align its tensors to 1 byte.
 */
typedef struct
{
  guint8 d[2];
  gint8 qs[32];
} NpuBlockQ8_0;

G_STATIC_ASSERT (sizeof (NpuBlockQ8_0) == NPU_Q8_0_BLOCK_BYTES);

/* y[c * rows + r] = sum_j w[r][j] * x[c * k + j] for c < n, @w rows x k
 * (k a multiple of 32) in ggml's layout, read in place.  @task as for
 * npu_matmul_mxfp4(); the path is the one npu_matmul_get_isa() names. */
NPU_API
void npu_matmul_q8_0 (NpuTask * task, const NpuBlockQ8_0 * w, gsize rows,
    gsize k, const float *x, gsize n, float *y);
NPU_API
void npu_matmul_q8_0_with_precision (NpuTask * task, const NpuBlockQ8_0 * w,
    gsize rows, gsize k, const float *x, gsize n, float *y,
    NpuMatmulPrecision precision);

/* y[c * rows + r] = sum_j w[r][j] * x[c * k + j] for c < n, @w a rows x k
 * matrix of the ggml @type (any type npu_quants_supported() names: F32,
 * F16, BF16, the 4-, 5- and 8-bit block types, Q4_K, Q5_K, Q6_K, MXFP4)
 * in ggml's layout, read in place, each row's values decoded exactly as
 * ggml decodes them and multiplied by the F32 activations in F32
 * (npumatmul-typed.c).  FALSE, with nothing written, when the type has no
 * decoder or k is not a whole number of its blocks.  @task as for
 * npu_matmul_mxfp4(); the dot products are the path npu_matmul_get_isa()
 * names. */
NPU_API
gboolean npu_matmul_typed (NpuTask * task, guint32 type, const void *w,
    gsize rows, gsize k, const float *x, gsize n, float *y);

/* TRUE for the types npu_matmul_blocks() multiplies: Q4_0, Q4_1, Q5_0,
 * Q5_1, Q4_K, Q5_K, Q6_K */
NPU_API
gboolean npu_matmul_blocks_supported (guint32 type);

/* y[c * rows + r] = sum_j w[r][j] * x[c * k + j] for c < n, @w a rows x k
 * matrix of one of those types in ggml's layout, read in place, on
 * integer dot products (npumatmul-blocks.c): each activation block of 32
 * quantised to int8 with d_b = max|x| / 127 (FAST), or to that and the
 * int8 code of its residual (ACCURATE), each row unpacked to int8 codes,
 * two scales and an offset a block, w = s q + o, the scales and offsets
 * as ggml computes them.  Per output, with A_b the largest |w| of
 * element j's block (the offsets and the scaled codes are at most 3 A_b
 * and 4 A_b, so the F32 roundings of their terms are bounded by it):
 *
 *   FAST:      |y - y_ref| <= sum_j |w_j| d_b(j) (1/2 + 2^-17)
 *                  + (k/8 + 8) 2^-24 sum_j (|w_j| + 4 A_b(j)) (|x_j| + d_b(j))
 *   ACCURATE:  |y - y_ref| <= sum_j |w_j| d_b(j) (1/508 + 2^-16)
 *                  + 2 (k/8 + 8) 2^-24 sum_j (|w_j| + 4 A_b(j)) (|x_j| + d_b(j))
 *
 * FALSE, with nothing written, for another type, rows that are not whole
 * blocks or k above 16384.  @task as for npu_matmul_mxfp4(); the level's
 * copy of the kernel is the one npu_matmul_get_isa() names (the baseline
 * copy on the scalar path, which NpuWeightMatrix does not use it on). */
NPU_API
gboolean npu_matmul_blocks (NpuTask * task, guint32 type, const void *w,
    gsize rows, gsize k, const float *x, gsize n, float *y,
    NpuMatmulPrecision precision);

/* "scalar", "avx2", "avx512", "neon" or "neon-i8mm": the path npu_matmul_mxfp4(),
 * npu_matmul_q8_0() and npu_matmul_typed() use */
NPU_API
const gchar *npu_matmul_get_isa (void);

/* For tests and benchmarks: force a path by name.  Returns FALSE (and
 * keeps the current one) if this build, this CPU or NPU_CPU_ISA's cap
 * lacks it.
 * Not thread-safe against concurrent multiplications. */
NPU_API
gboolean npu_matmul_set_isa (const gchar * name);

G_END_DECLS

#endif /* __NPU_MATMUL_H__ */
