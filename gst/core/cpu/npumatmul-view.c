/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a tensor view as an MXFP4 matrix (npu_mxfp4_matrix_from_view(),
 * declared in npumatmul.h beside the other matrix constructors)
 *
 * The one place where a model's weight matrix of any stored type becomes
 * what the kernels multiply: the language model, the vision encoder and the
 * encoders after them all load their matrices through it.
 */
#include "npumatmul.h"
#include "core/formats/npugguf.h"

gboolean
npu_mxfp4_matrix_from_view (NpuMxfp4Matrix * m, const NpuTensorView * view,
    gsize rows, gsize k, gboolean repack)
{
  gsize n = rows * k;
  NpuBlockMxfp4 *blocks;

  g_return_val_if_fail (m != NULL && view != NULL, FALSE);

  if (k % NPU_MXFP4_BLOCK_SIZE != 0)
    return FALSE;
  if (view->type == NPU_GGML_TYPE_MXFP4) {
    if (repack)
      npu_mxfp4_matrix_repack (m, view->data, rows, k);
    else
      npu_mxfp4_matrix_init_view (m, view->data, rows, k);
    return TRUE;
  }
  switch (view->type) {
    case NPU_GGML_TYPE_F32:
    case NPU_GGML_TYPE_F16:
    case NPU_GGML_TYPE_BF16:
    case NPU_GGML_TYPE_Q8_0:
      break;
    default:
      return FALSE;
  }
  /* g_aligned_alloc: npu_mxfp4_matrix_clear() frees what it owns with
   * g_aligned_free() */
  blocks = g_aligned_alloc (MAX (n / NPU_MXFP4_BLOCK_SIZE, 1),
      sizeof (NpuBlockMxfp4), 64);
  switch (view->type) {
    case NPU_GGML_TYPE_F32:
      npu_mxfp4_quantize_f32 (view->data, blocks, n);
      break;
    case NPU_GGML_TYPE_F16:
      npu_mxfp4_quantize_f16 (view->data, blocks, n);
      break;
    case NPU_GGML_TYPE_BF16:
      npu_mxfp4_quantize_bf16 (view->data, blocks, n);
      break;
    default:
      npu_mxfp4_quantize_q8_0 (view->data, blocks, n);
      break;
  }
  if (repack) {
    npu_mxfp4_matrix_repack (m, blocks, rows, k);
    g_aligned_free (blocks);
  } else {
    npu_mxfp4_matrix_init_view (m, blocks, rows, k);
    m->owned = blocks;
  }
  return TRUE;
}
