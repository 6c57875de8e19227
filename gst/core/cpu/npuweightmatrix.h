/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a model's weight matrix in the type its file stores
 *
 * The one place where a weight matrix of any stored ggml type becomes what
 * the CPU kernels multiply: the language model and the encoders load their
 * matrices through npu_weight_matrix_init() and multiply them with
 * npu_weight_matrix_mul().  Nothing is converted: the rows are read where
 * the file (or the weights pad's memory) has them, by the kernel of their
 * type:
 *
 *  - MXFP4: npu_matmul_mxfp4_with_precision(), in place or, when the
 *    caller asks for it, repacked into the split layout (the same 4.25
 *    bits a weight, in memory the matrix owns: npumatmul.h);
 *  - Q8_0: npu_matmul_q8_0_with_precision() (int8 activations as llama.cpp
 *    for FAST, int8 plus its residual, ~16 bits, for ACCURATE);
 *  - Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: npu_matmul_blocks(), on
 *    integer dot products (int8 activations as llama.cpp's Q8_0 / Q8_K
 *    for FAST, with their int8 residual for ACCURATE), except on the
 *    scalar path (exact) and for an ACCURATE product of more than 4
 *    columns (an encoder's GEMM: F32 activations), which take
 *    npu_matmul_typed();
 *  - F32, F16, BF16: npu_matmul_typed(), each row decoded exactly and
 *    multiplied by the F32 activations whatever the precision.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_WEIGHT_MATRIX_H__
#define __NPU_WEIGHT_MATRIX_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/cpu/npumatmul.h"

G_BEGIN_DECLS

/**
 * NpuWeightMatrix:
 * @type: the ggml type the rows are stored in
 * @rows: output rows
 * @k: values per row (a whole number of the type's blocks)
 * @row_bytes: stored bytes of one row
 * @data: the stored rows, row after row, not owned (every type but MXFP4)
 * @m: MXFP4: the matrix over the stored blocks, or their repacked copy
 *
 * Read-only once initialised: many threads may multiply with it at once.
 */
typedef struct
{
  guint32 type;
  gsize rows, k, row_bytes;
  const guint8 *data;
  NpuMxfp4Matrix m;
} NpuWeightMatrix;

/* A rows x k matrix of @type at @data (ggml's layout, the bytes must
 * outlive @w); MXFP4 repacked if @repack_mxfp4.  Returns FALSE, @w
 * untouched, if npuquants.h has no decoder for @type or k is not a whole
 * number of its blocks: the caller words the error (the tensor's name is
 * its to give). */
NPU_API
gboolean npu_weight_matrix_init (NpuWeightMatrix * w, guint32 type,
    const void *data, gsize rows, gsize k, gboolean repack_mxfp4);
NPU_API
void npu_weight_matrix_clear (NpuWeightMatrix * w);

/* Bytes of weight data one full product reads (the stored bytes, or the
 * repacked copy's with its padding) */
NPU_API
gsize npu_weight_matrix_get_size (const NpuWeightMatrix * w);
/* Bytes the matrix holds in its own memory: a repacked copy's, else 0 */
NPU_API
gsize npu_weight_matrix_get_owned_size (const NpuWeightMatrix * w);

/* y[c * rows + r] = sum_j w[r][j] * x[c * k + j] for c < n.  @task as for
 * npu_matmul_mxfp4().  The bound is the type's kernel's (npumatmul.h). */
NPU_API
void npu_weight_matrix_mul (NpuTask * task, const NpuWeightMatrix * w,
    const float *x, gsize n, float *y, NpuMatmulPrecision precision);

/* y[i] = w[i] x for @n_w <= NPU_MATMUL_MAX_MULTI matrices of the same k:
 * MXFP4 ones in one pass over the activations (npu_matmul_mxfp4_multi()),
 * any other mix one after the other, with the same results */
NPU_API
void npu_weight_matrix_mul_multi (NpuTask * task,
    const NpuWeightMatrix * const *w, guint n_w, const float *x, gsize n,
    float *const *y, NpuMatmulPrecision precision);

G_END_DECLS

#endif /* __NPU_WEIGHT_MATRIX_H__ */
