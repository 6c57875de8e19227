/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: Gemma 3's vision projector ("gemma3"), on the CPU
 *
 * After the SigLIP encoder (npuvit.c, the same blocks as LLaVA's and
 * SmolVLM's), llama.cpp's clip_graph_siglip (tools/mtmd/models/siglip.cpp)
 * for PROJECTOR_TYPE_GEMMA3:
 *
 *   - the patches, a side x side grid in raster order, are averaged over
 *     n x n squares (ggml_pool_2d, AVG, kernel and stride n, no padding:
 *     a last row or column of fewer than n patches is left out), n being
 *     clip.vision.projector.scale_factor or 4 (every Gemma 3 size): 896 px
 *     at patch 14 is 64 x 64 patches, 16 x 16 = 256 tokens;
 *   - each pooled row is RMS-normed (the encoder's epsilon) and scaled by
 *     mm.soft_emb_norm.weight (the converter has added Gemma's 1);
 *   - then projected by mm.input_projection.weight, which the converter
 *     writes as Hugging Face holds it, ne = [text dim, vision dim]: the
 *     transpose of a linear layer's; it is transposed once here, into
 *     F32 (the file's F32, F16 or BF16 values exactly).
 *
 * No device program yet: npu_vit_program_new() refuses this projector.
 */
#include "npuvit-private.h"
#include "core/cpu/npuvecmath.h"

#include <string.h>

#define DEFAULT_POOL 4

/* mm.input_projection.weight, ne = [out, dim], as rows of dim */
static gboolean
load_input_projection (NpuVit * vit, NpuEncLoader * ld, GError ** error)
{
  const gchar *tname = "mm.input_projection.weight";
  NpuTensorView view;
  float *w;
  guint r, c;

  memset (&view, 0, sizeof (view));
  if (!ld->lookup (tname, &view, ld->user_data)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: tensor %s is missing", ld->name, tname);
    return FALSE;
  }
  vit->out_dim = view.n_dims == 2 ? view.ne[0] : 0;
  if (!vit->out_dim || vit->out_dim > (1u << 20) || view.ne[1] != vit->dim) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: %s is [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "], expected "
        "[text dim, %u]", ld->name, tname, (guint64) view.ne[0],
        (guint64) view.ne[1], vit->dim);
    return FALSE;
  }
  w = npu_enc_to_f32 (ld, tname, &view, (gsize) vit->out_dim * vit->dim, error);
  if (!w)
    return FALSE;
  vit->gemma_proj = g_new (float, (gsize) vit->out_dim * vit->dim);
  for (r = 0; r < vit->out_dim; r++)
    for (c = 0; c < vit->dim; c++)
      vit->gemma_proj[(gsize) r * vit->dim + c] =
          w[(gsize) c * vit->out_dim + r];
  g_free (w);
  return TRUE;
}

gboolean
npu_vit_gemma3_load (NpuVit * vit, NpuEncLoader * ld, GError ** error)
{
  guint32 pool = DEFAULT_POOL;

  /* clip.cpp reads the factor when present (its tiny test model has its
   * own), else 4 */
  if (npu_gguf_find (ld->gguf, "clip.vision.projector.scale_factor") &&
      !npu_enc_get_u32_key (ld, "clip.vision.projector.scale_factor", &pool,
          error))
    return FALSE;
  if (pool < 1 || pool > vit->side) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: gemma3 pooling needs a factor between 1 and %u "
        "(clip.vision.projector.scale_factor), not %u", ld->name, vit->side,
        pool);
    return FALSE;
  }
  vit->scale = pool;
  vit->grid = vit->side / pool;
  vit->n_tokens = vit->grid * vit->grid;
  vit->gemma_norm = npu_enc_get_vector (ld, "mm.soft_emb_norm.weight", TRUE,
      vit->dim, error);
  return vit->gemma_norm && load_input_projection (vit, ld, error);
}

void
npu_vit_gemma3_clear (NpuVit * vit)
{
  g_clear_pointer (&vit->gemma_norm, g_free);
  g_clear_pointer (&vit->gemma_proj, g_free);
}

/* @patches (side x side rows of dim) averaged over pool x pool squares
 * into @pooled (grid x grid rows), in ggml_pool_2d's order of sums */
static void
average_pool (const NpuVit * vit, const float *patches, float *pooled)
{
  guint n = vit->scale, dim = vit->dim, ty, tx, y, x, c;
  float inv = 1.0f / (float) (n * n);

  for (ty = 0; ty < vit->grid; ty++)
    for (tx = 0; tx < vit->grid; tx++) {
      float *out = pooled + ((gsize) ty * vit->grid + tx) * dim;

      memset (out, 0, dim * sizeof (float));
      for (y = 0; y < n; y++)
        for (x = 0; x < n; x++) {
          const float *p = patches + ((gsize) (ty * n + y) * vit->side +
              tx * n + x) * dim;

          for (c = 0; c < dim; c++)
            out[c] += p[c];
        }
      for (c = 0; c < dim; c++)
        out[c] *= inv;
    }
}

/* The bytes it moves go to the encoder's counter (npubytes.h), as the
 * other projectors': the patches read and the pooled rows written, the
 * norm's weights and rows, then the product's */
void
npu_vit_gemma3_project (NpuVit * vit, NpuTask * task, const float *patches,
    float *out)
{
  NpuBytes *b = &vit->blocks.bytes;
  guint64 pooled = (guint64) vit->n_tokens * vit->dim * 4;
  guint t;

  average_pool (vit, patches, vit->proj);
  npu_bytes_read (b, NPU_BYTES_ACTIVATIONS, (guint64) vit->grid * vit->scale *
      vit->grid * vit->scale * vit->dim * 4);
  npu_bytes_write (b, NPU_BYTES_ACTIVATIONS, pooled);
  for (t = 0; t < vit->n_tokens; t++) {
    float *row = vit->proj + (gsize) t * vit->dim;

    npu_rms_norm (row, vit->gemma_norm, row, vit->dim, vit->blocks.eps);
  }
  npu_bytes_read (b, NPU_BYTES_WEIGHTS, (guint64) vit->dim * 4);
  npu_bytes_read (b, NPU_BYTES_ACTIVATIONS, pooled);
  npu_bytes_write (b, NPU_BYTES_ACTIVATIONS, pooled);
  npu_enc_gemm_f32 (task, vit->gemma_proj, vit->out_dim, vit->dim,
      vit->proj, vit->n_tokens, out, b);
}
