/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a model's weight matrix in the type its file stores
 * (npuweightmatrix.h says which kernel reads which type) */
#include "npuweightmatrix.h"
#include "core/formats/npugguf.h"
#include "core/formats/npuquants.h"

#include <string.h>

gboolean
npu_weight_matrix_init (NpuWeightMatrix * w, guint32 type, const void *data,
    gsize rows, gsize k, gboolean repack_mxfp4)
{
  gsize row_bytes;

  g_return_val_if_fail (w != NULL, FALSE);

  if (!npu_quants_supported (type))
    return FALSE;
  row_bytes = npu_quants_row_bytes (type, k);
  if (row_bytes == 0)
    return FALSE;
  memset (w, 0, sizeof (*w));
  w->type = type;
  w->rows = rows;
  w->k = k;
  w->row_bytes = row_bytes;
  if (type != NPU_GGML_TYPE_MXFP4)
    w->data = data;
  else if (repack_mxfp4)
    npu_mxfp4_matrix_repack (&w->m, data, rows, k);
  else
    npu_mxfp4_matrix_init_view (&w->m, data, rows, k);
  return TRUE;
}

void
npu_weight_matrix_clear (NpuWeightMatrix * w)
{
  npu_mxfp4_matrix_clear (&w->m);
}

gsize
npu_weight_matrix_get_size (const NpuWeightMatrix * w)
{
  if (w->type == NPU_GGML_TYPE_MXFP4)
    return npu_mxfp4_matrix_get_size (&w->m);
  return w->rows * w->row_bytes;
}

gsize
npu_weight_matrix_get_owned_size (const NpuWeightMatrix * w)
{
  return w->m.owned ? npu_mxfp4_matrix_get_size (&w->m) : 0;
}

void
npu_weight_matrix_mul (NpuTask * task, const NpuWeightMatrix * w,
    const float *x, gsize n, float *y, NpuMatmulPrecision precision)
{
  gboolean ok;

  switch (w->type) {
    case NPU_GGML_TYPE_MXFP4:
      npu_matmul_mxfp4_with_precision (task, &w->m, x, n, y, precision);
      break;
    case NPU_GGML_TYPE_Q8_0:
      npu_matmul_q8_0_with_precision (task, (const NpuBlockQ8_0 *) w->data,
          w->rows, w->k, x, n, y, precision);
      break;
    default:
      /* the block types on integer dot products, as llama.cpp, but on the
       * scalar path (exact) and for an accurate GEMM (F32 activations:
       * the encoders' products stay exact) */
      if (strcmp (npu_matmul_get_isa (), "scalar") != 0 &&
          (precision == NPU_MATMUL_PRECISION_FAST || n <= 4) &&
          npu_matmul_blocks (task, w->type, w->data, w->rows, w->k, x, n, y,
              precision))
        break;
      ok = npu_matmul_typed (task, w->type, w->data, w->rows, w->k, x, n, y);
      /* npu_weight_matrix_init() checked the type and the shape */
      g_assert (ok);
      break;
  }
}

void
npu_weight_matrix_mul_multi (NpuTask * task,
    const NpuWeightMatrix * const *w, guint n_w, const float *x, gsize n,
    float *const *y, NpuMatmulPrecision precision)
{
  const NpuMxfp4Matrix *m[NPU_MATMUL_MAX_MULTI];
  guint i;

  g_return_if_fail (n_w > 0 && n_w <= NPU_MATMUL_MAX_MULTI);

  for (i = 0; i < n_w && w[i]->type == NPU_GGML_TYPE_MXFP4; i++)
    m[i] = &w[i]->m;
  if (i == n_w) {
    npu_matmul_mxfp4_multi_with_precision (task, m, n_w, x, n, y, precision);
    return;
  }
  for (i = 0; i < n_w; i++)
    npu_weight_matrix_mul (task, w[i], x, n, y[i], precision);
}
