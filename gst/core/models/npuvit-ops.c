/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the vision encoder built for a device
 *
 * npu_vit_encode()'s graph (npuvit.c) recorded as operations of the seam:
 * the patch embedding, class token and positions, the blocks
 * (npuencoder-ops.c), the norms, and the projector, with Idefics3's pixel
 * shuffle as a gather of rows by an index table made here once.
 *
 * GLib only, no GStreamer types.
 */
#include "npuvit-private.h"

#include <string.h>

struct _NpuVitProgram
{
  NpuVit *vit;
  NpuEncDevBlocks d;
  NpuBuffer *input, *x, *proj, *output, *index;
  NpuOps *ops;
};

/* pixel_shuffle() of npuvit.c as source rows: output row (token, yi, xi)
 * of dim values is patch row (s ty + yi) side + (s tx + xi), or zeros
 * beyond the grid */
static gint32 *
shuffle_index (const NpuVit * vit, gsize * n)
{
  guint s = vit->scale, g = vit->grid, side = vit->side;
  guint ty, tx, yi, xi;
  gint32 *idx;
  gsize i = 0;

  *n = (gsize) g *g * s * s;
  idx = g_new (gint32, *n);
  for (ty = 0; ty < g; ty++)
    for (tx = 0; tx < g; tx++)
      for (yi = 0; yi < s; yi++)
        for (xi = 0; xi < s; xi++) {
          guint py = ty * s + yi, px = tx * s + xi;

          idx[i++] = py < side && px < side ? (gint32) (py * side + px) : -1;
        }
  return idx;
}

/* patch embedding, class token, positions, pre-norm */
static gboolean
record_input (NpuVitProgram * prog, GError ** error)
{
  NpuVit *vit = prog->vit;
  NpuEncDevBlocks *d = &prog->d;
  gsize dim = vit->dim, np = vit->n_patches, n = vit->n_pos;
  gsize xp = (gsize) vit->first * dim * sizeof (float);
  NpuBuffer *w, *cls, *pos;
  static const gint32 zero = 0;

  if (vit->patch_mxfp4) {
    if (!npu_enc_record_matmul (d, prog->ops, &vit->patch_w, prog->input, 0,
            np, prog->x, xp, error))
      return FALSE;
  } else if (!(w = npu_enc_dev_weight (d, vit->patch_w32,
              dim * vit->patch_dim * sizeof (float), error)) ||
      !npu_enc_dev_count (d, (guint64) dim * vit->patch_dim * 4,
          (guint64) np * vit->patch_dim * 4, (guint64) np * dim * 4) ||
      !npu_ops_mul_mat (prog->ops, NPU_OP_WEIGHT_F32, w, 0, dim,
          vit->patch_dim, prog->input, 0, np, prog->x, xp, error))
    return FALSE;
  if (vit->class_embd) {
    if (!(cls = npu_enc_dev_weight (d, vit->class_embd, dim * sizeof (float),
                error)) ||
        !(prog->index = npu_enc_dev_index (d->device, &zero, 1, error)) ||
        !npu_enc_dev_count (d, dim * 4, 0, dim * 4) ||
        !npu_ops_gather_rows (prog->ops, cls, 0, 1, prog->index, 0, prog->x,
            0, 1, dim, error))
      return FALSE;
  }
  if (!npu_enc_record_bias_act (d, prog->ops, prog->x, xp, np, dim,
          vit->patch_b, NPU_ENC_ACT_NONE, error) ||
      !(pos = npu_enc_dev_weight (d, vit->pos, n * dim * sizeof (float),
              error)) ||
      !npu_enc_dev_count (d, n * dim * 4, n * dim * 4, n * dim * 4) ||
      !npu_ops_add (prog->ops, prog->x, 0, pos, 0, prog->x, 0, n * dim, error))
    return FALSE;
  return !vit->pre_ln_w || npu_enc_record_layernorm (d, prog->ops, prog->x,
      0, prog->x, 0, n, dim, vit->blocks.eps, vit->pre_ln_w, vit->pre_ln_b,
      error);
}

static gboolean
record_projector (NpuVitProgram * prog, GError ** error)
{
  NpuVit *vit = prog->vit;
  NpuEncDevBlocks *d = &prog->d;
  gsize np = vit->n_patches, n_idx;
  gsize xp = (gsize) vit->first * vit->dim * sizeof (float);
  NpuBuffer *shuffle;
  gint32 *idx;
  gboolean ok;

  if (vit->projector == NPU_VIT_PROJECTOR_MLP)
    return npu_enc_record_matmul (d, prog->ops, &vit->mm0, prog->x, xp, np,
        prog->proj, 0, error) &&
        npu_enc_record_bias_act (d, prog->ops, prog->proj, 0, np,
        vit->out_dim, vit->mm0_b, NPU_ENC_ACT_GELU, error) &&
        npu_enc_record_matmul (d, prog->ops, &vit->mm2, prog->proj, 0, np,
        prog->output, 0, error) &&
        npu_enc_record_bias_act (d, prog->ops, prog->output, 0, np,
        vit->out_dim, vit->mm2_b, NPU_ENC_ACT_NONE, error);

  idx = shuffle_index (vit, &n_idx);
  shuffle = npu_enc_dev_index (d->device, idx, n_idx, error);
  g_free (idx);
  if (!shuffle)
    return FALSE;
  npu_enc_dev_count (d, 0, (guint64) np * vit->dim * 4,
      (guint64) n_idx * vit->dim * 4);
  ok = npu_ops_gather_rows (prog->ops, prog->x, xp, np, shuffle, 0,
      prog->proj, 0, n_idx, vit->dim, error) &&
      npu_enc_record_matmul (d, prog->ops, &vit->fc, prog->proj, 0,
      vit->n_tokens, prog->output, 0, error);
  /* the operation holds its own reference */
  npu_buffer_unref (shuffle);
  return ok;
}

static gboolean
record (NpuVitProgram * prog, GError ** error)
{
  NpuVit *vit = prog->vit;
  guint il;

  if (!record_input (prog, error))
    return FALSE;
  for (il = 0; il < vit->n_layers; il++)
    if (!npu_enc_record_block (&prog->d, prog->ops, &vit->blocks,
            &vit->layers[il], prog->x, 0, vit->n_pos, error))
      return FALSE;
  if (vit->post_ln_w && !npu_enc_record_layernorm (&prog->d, prog->ops,
          prog->x, 0, prog->x, 0, vit->n_pos, vit->dim, vit->blocks.eps,
          vit->post_ln_w, vit->post_ln_b, error))
    return FALSE;
  if (!record_projector (prog, error))
    return FALSE;
  npu_enc_count_as_tokens (&prog->d.bytes, (guint64) vit->n_tokens *
      vit->out_dim * 4);
  return TRUE;
}

NpuVitProgram *
npu_vit_program_new (NpuVit * vit, NpuDevice * device, GError ** error)
{
  NpuVitProgram *prog;
  gsize proj;

  g_return_val_if_fail (vit != NULL && device != NULL, NULL);
  if (vit->qwen.layers || vit->projector == NPU_VIT_PROJECTOR_GEMMA3) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "vision encoder on %s: the %s has no device program yet (it runs "
        "in npu_vit_encode () on the CPU)", npu_device_get_name (device),
        vit->qwen.layers ? "Qwen merger" : "gemma3 projector");
    return NULL;
  }

  prog = g_new0 (NpuVitProgram, 1);
  prog->vit = vit;
  prog->ops = npu_ops_new (device);
  if (vit->projector == NPU_VIT_PROJECTOR_MLP)
    proj = (gsize) vit->n_patches * vit->out_dim;
  else
    proj = (gsize) vit->n_tokens * vit->dim * vit->scale * vit->scale;
  if (!npu_enc_dev_blocks_init (&prog->d, device, &vit->blocks, error) ||
      !(prog->input = npu_buffer_new (device, (gsize) vit->n_patches *
              vit->patch_dim * sizeof (float), error)) ||
      !(prog->x = npu_buffer_new (device, (gsize) vit->n_pos * vit->dim *
              sizeof (float), error)) ||
      !(prog->proj = npu_buffer_new (device, proj * sizeof (float), error)) ||
      !(prog->output = npu_buffer_new (device, (gsize) vit->n_tokens *
              vit->out_dim * sizeof (float), error)) || !record (prog, error)) {
    g_prefix_error (error, "vision encoder on %s: ",
        npu_device_get_name (device));
    npu_vit_program_free (prog);
    return NULL;
  }
  return prog;
}

void
npu_vit_program_free (NpuVitProgram * prog)
{
  if (!prog)
    return;
  /* the operations first: they hold references on the buffers */
  npu_ops_free (prog->ops);
  g_clear_pointer (&prog->input, npu_buffer_unref);
  g_clear_pointer (&prog->x, npu_buffer_unref);
  g_clear_pointer (&prog->proj, npu_buffer_unref);
  g_clear_pointer (&prog->output, npu_buffer_unref);
  g_clear_pointer (&prog->index, npu_buffer_unref);
  npu_enc_dev_blocks_clear (&prog->d);
  g_free (prog);
}

NpuBuffer *
npu_vit_program_get_input (NpuVitProgram * prog)
{
  return prog->input;
}

NpuBuffer *
npu_vit_program_get_output (NpuVitProgram * prog)
{
  return prog->output;
}

NpuFence *
npu_vit_program_submit (NpuVitProgram * prog, NpuQueue * queue,
    NpuFence * const *in_fences, guint n_in_fences)
{
  return npu_ops_submit (prog->ops, queue, in_fences, n_in_fences);
}

void
npu_vit_program_get_bytes (NpuVitProgram * prog, NpuBytes * bytes)
{
  g_return_if_fail (prog != NULL && bytes != NULL);

  *bytes = prog->d.bytes;
}

gsize
npu_vit_program_get_bytes_copied (NpuVitProgram * prog)
{
  return prog->d.bytes_copied;
}
