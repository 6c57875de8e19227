/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the encoders' blocks recorded as device operations
 *
 * The same pre-norm block as npu_enc_block_forward() (npuencoder.c), as a
 * list of operations of the seam (core/device/npuops.h) against device
 * buffers, so that any device runs it: the weights are the encoder's own
 * arrays (the file's MXFP4 blocks in place, or its converted copies),
 * each imported once as a read-only buffer; the scratch lives on the
 * device.  Every product is an F32 one on the device (the CPU device's
 * accurate products); see npuops.h.
 *
 * GLib only, no GStreamer types.
 */
#include "npuencoder.h"

#include <math.h>
#include <string.h>

NpuBuffer *
npu_enc_dev_weight (NpuEncDevBlocks * d, gconstpointer data, gsize size,
    GError ** error)
{
  NpuBuffer *buf = g_hash_table_lookup (d->weights, data);

  if (buf)
    return buf;
  /* the encoder owns the array and outlives its programs: no notify */
  buf = npu_buffer_import_host (d->device, (gpointer) data, size, TRUE, NULL,
      NULL, error);
  if (!buf)
    return NULL;
  d->bytes_copied += npu_buffer_get_bytes_copied (buf);
  g_hash_table_insert (d->weights, (gpointer) data, buf);
  return buf;
}

gboolean
npu_enc_dev_count (NpuEncDevBlocks * d, guint64 weights, guint64 read,
    guint64 written)
{
  npu_bytes_read (&d->bytes, NPU_BYTES_WEIGHTS, weights);
  npu_bytes_read (&d->bytes, NPU_BYTES_ACTIVATIONS, read);
  npu_bytes_write (&d->bytes, NPU_BYTES_ACTIVATIONS, written);
  return TRUE;
}

NpuBuffer *
npu_enc_dev_index (NpuDevice * device, const gint32 * values, gsize n,
    GError ** error)
{
  NpuBuffer *buf = npu_buffer_new (device, n * sizeof (gint32), error);
  gpointer p;

  if (!buf)
    return NULL;
  p = npu_buffer_map (buf, NPU_BUFFER_MAP_WRITE, error);
  if (!p) {
    npu_buffer_unref (buf);
    return NULL;
  }
  memcpy (p, values, n * sizeof (gint32));
  npu_buffer_unmap (buf);
  return buf;
}

static NpuBuffer *
scratch (NpuDevice * device, gsize floats, GError ** error)
{
  return npu_buffer_new (device, MAX (floats, 1) * sizeof (float), error);
}

gboolean
npu_enc_dev_blocks_init (NpuEncDevBlocks * d, NpuDevice * device,
    const NpuEncBlocks * b, GError ** error)
{
  gsize nd = (gsize) b->n_max * b->dim;

  memset (d, 0, sizeof (*d));
  d->device = npu_device_ref (device);
  d->weights = g_hash_table_new_full (NULL, NULL, NULL,
      (GDestroyNotify) npu_buffer_unref);
  return (d->h = scratch (device, nd, error)) &&
      (d->q = scratch (device, nd, error)) &&
      (d->k = scratch (device, nd, error)) &&
      (d->v = scratch (device, nd, error)) &&
      (d->att = scratch (device, nd, error)) &&
      (d->ffb = scratch (device, (gsize) b->n_max * b->ff, error));
}

void
npu_enc_dev_blocks_clear (NpuEncDevBlocks * d)
{
  if (d->weights)
    g_hash_table_unref (d->weights);
  g_clear_pointer (&d->h, npu_buffer_unref);
  g_clear_pointer (&d->q, npu_buffer_unref);
  g_clear_pointer (&d->k, npu_buffer_unref);
  g_clear_pointer (&d->v, npu_buffer_unref);
  g_clear_pointer (&d->att, npu_buffer_unref);
  g_clear_pointer (&d->ffb, npu_buffer_unref);
  g_clear_pointer (&d->device, npu_device_unref);
  d->weights = NULL;
}

gboolean
npu_enc_record_matmul (NpuEncDevBlocks * d, NpuOps * ops,
    const NpuWeightMatrix * m, NpuBuffer * x, gsize x_offset, gsize n,
    NpuBuffer * y, gsize y_offset, GError ** error)
{
  gconstpointer data = m->type == NPU_GGML_TYPE_MXFP4 ?
      (gconstpointer) m->m.blocks : (gconstpointer) m->data;
  NpuOpWeight wt;
  NpuBuffer *w;

  /* The operation table multiplies every type a matrix may hold as
   * stored; a matrix of a type it lacked would have to be converted,
   * which changes the model: that is the user's choice (mxfp4weights),
   * not the program's */
  if (!npu_op_weight_from_ggml_type (m->type, &wt)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "the device programs do not multiply %s weights: run the encoder "
        "without a device program, or convert the weights with mxfp4weights",
        npu_ggml_type_name (m->type));
    return FALSE;
  }
  /* the encoders' MXFP4 matrices keep ggml's block layout (never
   * repacked) */
  g_return_val_if_fail (m->type != NPU_GGML_TYPE_MXFP4 ||
      m->m.layout == NPU_MXFP4_LAYOUT_BLOCKS, FALSE);
  npu_enc_count_product (&d->bytes, m->rows * m->row_bytes, n, m->k, m->rows);
  w = npu_enc_dev_weight (d, data, m->rows * m->row_bytes, error);
  return w && npu_ops_mul_mat (ops, wt, w, 0, m->rows, m->k, x, x_offset, n,
      y, y_offset, error);
}

static NpuOpAct
op_act (NpuEncAct act)
{
  switch (act) {
    case NPU_ENC_ACT_GELU:
      return NPU_OP_ACT_GELU;
    case NPU_ENC_ACT_GELU_QUICK:
      return NPU_OP_ACT_GELU_QUICK;
    case NPU_ENC_ACT_SILU:
      return NPU_OP_ACT_SILU;
    case NPU_ENC_ACT_GELU_ERF:
      return NPU_OP_ACT_GELU_ERF;
    case NPU_ENC_ACT_NONE:
    default:
      return NPU_OP_ACT_NONE;
  }
}

gboolean
npu_enc_record_bias_act (NpuEncDevBlocks * d, NpuOps * ops, NpuBuffer * y,
    gsize y_offset, gsize rows, gsize cols, const float *b, NpuEncAct act,
    GError ** error)
{
  NpuBuffer *bb = NULL;

  if (!b && act == NPU_ENC_ACT_NONE)
    return TRUE;
  npu_enc_dev_count (d, b ? (guint64) cols * 4 : 0, (guint64) rows * cols * 4,
      (guint64) rows * cols * 4);
  if (b && !(bb = npu_enc_dev_weight (d, b, cols * sizeof (float), error)))
    return FALSE;
  return npu_ops_bias_act (ops, y, y_offset, bb, 0, rows, cols, op_act (act),
      error);
}

gboolean
npu_enc_record_layernorm (NpuEncDevBlocks * d, NpuOps * ops, NpuBuffer * dst,
    gsize d_offset, NpuBuffer * src, gsize s_offset, gsize rows, gsize cols,
    gfloat eps, const float *w, const float *b, GError ** error)
{
  NpuBuffer *wb = npu_enc_dev_weight (d, w, cols * sizeof (float), error);
  NpuBuffer *bb = wb ? npu_enc_dev_weight (d, b, cols * sizeof (float),
      error) : NULL;

  npu_enc_dev_count (d, (guint64) cols * 8, (guint64) rows * cols * 4,
      (guint64) rows * cols * 4);

  return bb && npu_ops_layer_norm (ops, src, s_offset, wb, 0, bb, 0, dst,
      d_offset, cols, rows, eps, error);
}

/* x += out (bias already in out) */
static gboolean
record_residual (NpuEncDevBlocks * d, NpuOps * ops, NpuBuffer * x,
    gsize x_offset, NpuBuffer * out, const float *b, gsize n, gsize dim,
    GError ** error)
{
  return npu_enc_record_bias_act (d, ops, out, 0, n, dim, b,
      NPU_ENC_ACT_NONE, error) &&
      npu_enc_dev_count (d, 0, (guint64) n * dim * 8, (guint64) n * dim * 4)
      && npu_ops_add (ops, x, x_offset, out, 0, x, x_offset, n * dim, error);
}

gboolean
npu_enc_record_block (NpuEncDevBlocks * d, NpuOps * ops,
    const NpuEncBlocks * b, const NpuEncLayer * l, NpuBuffer * x,
    gsize x_offset, gsize n, GError ** error)
{
  gsize dim = b->dim;

  g_return_val_if_fail (n <= b->n_max, FALSE);

  /* x += attn_out (MHA (LN1 (x))) */
  return npu_enc_record_layernorm (d, ops, d->h, 0, x, x_offset, n, dim,
      b->eps, l->ln1_w, l->ln1_b, error) &&
      npu_enc_record_matmul (d, ops, &l->q, d->h, 0, n, d->q, 0, error) &&
      npu_enc_record_matmul (d, ops, &l->k, d->h, 0, n, d->k, 0, error) &&
      npu_enc_record_matmul (d, ops, &l->v, d->h, 0, n, d->v, 0, error) &&
      npu_enc_record_bias_act (d, ops, d->q, 0, n, dim, l->q_b,
      NPU_ENC_ACT_NONE, error) &&
      npu_enc_record_bias_act (d, ops, d->k, 0, n, dim, l->k_b,
      NPU_ENC_ACT_NONE, error) &&
      npu_enc_record_bias_act (d, ops, d->v, 0, n, dim, l->v_b,
      NPU_ENC_ACT_NONE, error) &&
      /* q, k and v read once each, the heads' outputs written */
      npu_enc_dev_count (d, 0, (guint64) 3 * n * dim * 4,
      (guint64) n * dim * 4) &&
      npu_ops_attention (ops, d->q, 0, d->k, 0, d->v, 0, NPU_KV_F32, d->att,
      0, n, b->n_heads, b->n_heads, b->head_dim, 0, FALSE,
      1.0f / sqrtf ((float) b->head_dim), error) &&
      npu_enc_record_matmul (d, ops, &l->o, d->att, 0, n, d->h, 0, error) &&
      record_residual (d, ops, x, x_offset, d->h, l->o_b, n, dim, error) &&
      /* x += ffn_down (act (ffn_up (LN2 (x)))) */
      npu_enc_record_layernorm (d, ops, d->h, 0, x, x_offset, n, dim,
      b->eps, l->ln2_w, l->ln2_b, error) &&
      npu_enc_record_matmul (d, ops, &l->up, d->h, 0, n, d->ffb, 0, error) &&
      npu_enc_record_bias_act (d, ops, d->ffb, 0, n, b->ff, l->up_b, b->act,
      error) &&
      npu_enc_record_matmul (d, ops, &l->down, d->ffb, 0, n, d->h, 0, error)
      && record_residual (d, ops, x, x_offset, d->h, l->down_b, n, dim, error);
}
