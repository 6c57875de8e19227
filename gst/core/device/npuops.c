/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the operation table: recording, checking, submitting
 *
 * See npuops.h.  GLib only, no GStreamer types.
 */
#include "npuops-private.h"
#include "npubuffer-private.h"
#include "core/formats/npugguf.h"
#include "core/formats/npuquants.h"

#include <string.h>

static const gchar *const op_names[] = {
  "mul_mat", "rms_norm", "softmax", "silu_mul", "gelu", "add", "rope",
  "attention", "layer_norm", "bias_act", "gather_rows", "im2col3",
};

NpuOps *
npu_ops_new (NpuDevice * device)
{
  NpuOps *ops = g_new0 (NpuOps, 1);

  ops->device = npu_device_ref (device);
  ops->ops = g_array_new (FALSE, TRUE, sizeof (NpuOp));
  return ops;
}

void
npu_ops_free (NpuOps * ops)
{
  guint i, j;

  if (!ops)
    return;
  if (ops->engine_program_free)
    ops->engine_program_free (ops->engine_program);
  for (i = 0; i < ops->ops->len; i++) {
    NpuOp *op = &g_array_index (ops->ops, NpuOp, i);

    for (j = 0; j < op->n_args; j++)
      npu_buffer_unref (op->args[j].buffer);
  }
  g_array_unref (ops->ops);
  npu_device_unref (ops->device);
  g_free (ops);
}

guint
npu_ops_get_length (NpuOps * ops)
{
  return ops->ops->len;
}

/* Sets @arg to @size bytes of @buffer at @offset, or fails naming the
 * operation and the argument. */
static gboolean
set_arg (NpuOps * ops, NpuOp * op, const gchar * what, NpuBuffer * buffer,
    gsize offset, guint64 size, gboolean any_byte, GError ** error)
{
  const gchar *name = op_names[op->kind];

  if (!buffer) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "%s: no buffer for %s", name, what);
    return FALSE;
  }
  if (npu_buffer_get_device (buffer) != ops->device) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "%s: the %s buffer belongs to %s, not to %s", name, what,
        npu_device_get_name (npu_buffer_get_device (buffer)),
        npu_device_get_name (ops->device));
    return FALSE;
  }
  if (size == 0 || offset > npu_buffer_get_size (buffer) ||
      size > npu_buffer_get_size (buffer) - offset) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "%s: %s needs %" G_GUINT64_FORMAT " bytes at offset %" G_GSIZE_FORMAT
        ", outside its %" G_GSIZE_FORMAT "-byte buffer", name, what, size,
        offset, npu_buffer_get_size (buffer));
    return FALSE;
  }
  if (!any_byte && offset % 4 != 0) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "%s: %s at offset %" G_GSIZE_FORMAT " is not at a multiple of 4 bytes",
        name, what, offset);
    return FALSE;
  }
  op->args[op->n_args].buffer = buffer;
  op->args[op->n_args].offset = offset;
  op->args[op->n_args].size = size;
  op->n_args++;
  return TRUE;
}

/* Appends @op once every argument is set, taking its references, or fails
 * if the device cannot run it. */
static gboolean
append (NpuOps * ops, NpuOp * op, GError ** error)
{
  guint i;

  g_return_val_if_fail (ops->engine_program == NULL, FALSE);
#if NPU_HAVE_VULKAN
  if (g_str_equal (npu_device_get_kind (ops->device), "vulkan") &&
      !npu_vulkan_op_check (ops->device, op, error))
    return FALSE;
#endif
  for (i = 0; i < op->n_args; i++)
    npu_buffer_ref (op->args[i].buffer);
  g_array_append_val (ops->ops, *op);
  return TRUE;
}

static gboolean
nonzero (NpuOpKind kind, const gchar * what, gsize v, GError ** error)
{
  if (v > 0 && v <= G_MAXUINT32)
    return TRUE;
  g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
      "%s: %s is %" G_GSIZE_FORMAT " (1 to 2^32 - 1)", op_names[kind], what, v);
  return FALSE;
}

static const guint32 weight_ggml_types[] = {
  [NPU_OP_WEIGHT_F32] = NPU_GGML_TYPE_F32,
  [NPU_OP_WEIGHT_F16] = NPU_GGML_TYPE_F16,
  [NPU_OP_WEIGHT_Q8_0] = NPU_GGML_TYPE_Q8_0,
  [NPU_OP_WEIGHT_MXFP4] = NPU_GGML_TYPE_MXFP4,
  [NPU_OP_WEIGHT_BF16] = NPU_GGML_TYPE_BF16,
  [NPU_OP_WEIGHT_Q4_0] = NPU_GGML_TYPE_Q4_0,
  [NPU_OP_WEIGHT_Q4_1] = NPU_GGML_TYPE_Q4_1,
  [NPU_OP_WEIGHT_Q5_0] = NPU_GGML_TYPE_Q5_0,
  [NPU_OP_WEIGHT_Q5_1] = NPU_GGML_TYPE_Q5_1,
  [NPU_OP_WEIGHT_Q4_K] = NPU_GGML_TYPE_Q4_K,
  [NPU_OP_WEIGHT_Q5_K] = NPU_GGML_TYPE_Q5_K,
  [NPU_OP_WEIGHT_Q6_K] = NPU_GGML_TYPE_Q6_K,
};

guint32
npu_op_weight_get_ggml_type (NpuOpWeight type)
{
  g_return_val_if_fail (type <= NPU_OP_WEIGHT_Q6_K, NPU_GGML_TYPE_F32);
  return weight_ggml_types[type];
}

gboolean
npu_op_weight_from_ggml_type (guint32 ggml_type, NpuOpWeight * type)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (weight_ggml_types); i++)
    if (weight_ggml_types[i] == ggml_type) {
      *type = (NpuOpWeight) i;
      return TRUE;
    }
  return FALSE;
}

gboolean
npu_ops_mul_mat (NpuOps * ops, NpuOpWeight type, NpuBuffer * w,
    gsize w_offset, gsize rows, gsize k, NpuBuffer * x, gsize x_offset,
    gsize n, NpuBuffer * y, gsize y_offset, GError ** error)
{
  NpuOp op = { NPU_OP_MUL_MAT };
  guint32 ggml_type;
  /* F16 is read as words on the devices; every other type at any byte */
  gboolean any_byte;
  guint block = 0;

  g_return_val_if_fail (type <= NPU_OP_WEIGHT_Q6_K, FALSE);
  ggml_type = weight_ggml_types[type];
  any_byte = type != NPU_OP_WEIGHT_F32 && type != NPU_OP_WEIGHT_F16;
  if (!nonzero (op.kind, "rows", rows, error) ||
      !nonzero (op.kind, "k", k, error) || !nonzero (op.kind, "n", n, error))
    return FALSE;
  npu_ggml_type_info (ggml_type, &block, NULL);
  /* F16 rows are read two values a word */
  if (type == NPU_OP_WEIGHT_F16)
    block = 2;
  if (k % block != 0) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "mul_mat: k = %" G_GSIZE_FORMAT " is not a multiple of %u (%s)", k,
        block, npu_ggml_type_name (ggml_type));
    return FALSE;
  }
  op.weight = type;
  op.n[0] = rows;
  op.n[1] = k;
  op.n[2] = n;
  return set_arg (ops, &op, "w", w, w_offset,
      (guint64) rows * npu_quants_row_bytes (ggml_type, k), any_byte, error)
      && set_arg (ops, &op, "x", x, x_offset, (guint64) n * k * 4, FALSE,
      error) && set_arg (ops, &op, "y", y, y_offset, (guint64) n * rows * 4,
      FALSE, error) && append (ops, &op, error);
}

gboolean
npu_ops_rms_norm (NpuOps * ops, NpuBuffer * x, gsize x_offset, NpuBuffer * w,
    gsize w_offset, NpuBuffer * y, gsize y_offset, gsize dim, gsize n,
    float eps, GError ** error)
{
  NpuOp op = { NPU_OP_RMS_NORM };

  if (!nonzero (op.kind, "dim", dim, error) ||
      !nonzero (op.kind, "n", n, error))
    return FALSE;
  op.n[0] = dim;
  op.n[1] = n;
  op.f[0] = eps;
  return set_arg (ops, &op, "x", x, x_offset, (guint64) n * dim * 4, FALSE,
      error) && set_arg (ops, &op, "w", w, w_offset, (guint64) dim * 4, FALSE,
      error) && set_arg (ops, &op, "y", y, y_offset, (guint64) n * dim * 4,
      FALSE, error) && append (ops, &op, error);
}

gboolean
npu_ops_layer_norm (NpuOps * ops, NpuBuffer * x, gsize x_offset,
    NpuBuffer * w, gsize w_offset, NpuBuffer * b, gsize b_offset,
    NpuBuffer * y, gsize y_offset, gsize dim, gsize n, float eps,
    GError ** error)
{
  NpuOp op = { NPU_OP_LAYER_NORM };

  if (!nonzero (op.kind, "dim", dim, error) ||
      !nonzero (op.kind, "n", n, error))
    return FALSE;
  op.n[0] = dim;
  op.n[1] = n;
  op.f[0] = eps;
  return set_arg (ops, &op, "x", x, x_offset, (guint64) n * dim * 4, FALSE,
      error) && set_arg (ops, &op, "w", w, w_offset, (guint64) dim * 4, FALSE,
      error) && set_arg (ops, &op, "b", b, b_offset, (guint64) dim * 4, FALSE,
      error) && set_arg (ops, &op, "y", y, y_offset, (guint64) n * dim * 4,
      FALSE, error) && append (ops, &op, error);
}

gboolean
npu_ops_bias_act (NpuOps * ops, NpuBuffer * y, gsize y_offset,
    NpuBuffer * bias, gsize b_offset, gsize rows, gsize cols, NpuOpAct act,
    GError ** error)
{
  NpuOp op = { NPU_OP_BIAS_ACT };

  if (!nonzero (op.kind, "rows", rows, error) ||
      !nonzero (op.kind, "cols", cols, error))
    return FALSE;
  if (act > NPU_OP_ACT_GELU_ERF || (guint64) rows * cols > G_MAXUINT32) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "bias_act: activation %d unknown or %" G_GSIZE_FORMAT " x %"
        G_GSIZE_FORMAT " values too many", act, rows, cols);
    return FALSE;
  }
  op.act = act;
  op.n[0] = rows;
  op.n[1] = cols;
  op.n[2] = bias != NULL;
  return set_arg (ops, &op, "y", y, y_offset, (guint64) rows * cols * 4,
      FALSE, error) && (!bias || set_arg (ops, &op, "the bias", bias,
          b_offset, (guint64) cols * 4, FALSE, error)) &&
      append (ops, &op, error);
}

gboolean
npu_ops_gather_rows (NpuOps * ops, NpuBuffer * src, gsize s_offset,
    gsize n_src, NpuBuffer * idx, gsize i_offset, NpuBuffer * dst,
    gsize d_offset, gsize n_out, gsize dim, GError ** error)
{
  NpuOp op = { NPU_OP_GATHER };
  const gint32 *index;
  gsize i;

  if (!nonzero (op.kind, "n_src", n_src, error) ||
      !nonzero (op.kind, "n_out", n_out, error) ||
      !nonzero (op.kind, "dim", dim, error))
    return FALSE;
  op.n[0] = n_out;
  op.n[1] = dim;
  if (!set_arg (ops, &op, "src", src, s_offset, (guint64) n_src * dim * 4,
          FALSE, error) ||
      !set_arg (ops, &op, "idx", idx, i_offset, (guint64) n_out * 4, FALSE,
          error) ||
      !set_arg (ops, &op, "dst", dst, d_offset, (guint64) n_out * dim * 4,
          FALSE, error))
    return FALSE;
  /* the indices are read now: a kernel must not read outside src */
  index = (const gint32 *) (npu_buffer_get_data (idx) + i_offset);
  for (i = 0; i < n_out; i++)
    if (index[i] >= (gint64) n_src) {
      g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
          "gather_rows: index %" G_GSIZE_FORMAT " is %d, past the %"
          G_GSIZE_FORMAT " source rows", i, index[i], n_src);
      return FALSE;
    }
  return append (ops, &op, error);
}

gboolean
npu_ops_softmax (NpuOps * ops, NpuBuffer * x, gsize x_offset, gsize dim,
    gsize n, GError ** error)
{
  NpuOp op = { NPU_OP_SOFTMAX };

  if (!nonzero (op.kind, "dim", dim, error) ||
      !nonzero (op.kind, "n", n, error))
    return FALSE;
  op.n[0] = dim;
  op.n[1] = n;
  return set_arg (ops, &op, "x", x, x_offset, (guint64) n * dim * 4, FALSE,
      error) && append (ops, &op, error);
}

static gboolean
elementwise (NpuOps * ops, NpuOpKind kind, NpuBuffer * a, gsize a_offset,
    NpuBuffer * b, gsize b_offset, NpuBuffer * out, gsize o_offset,
    gsize count, GError ** error)
{
  NpuOp op = { kind };

  if (!nonzero (kind, "count", count, error))
    return FALSE;
  op.n[0] = count;
  op.f[0] = op.f[1] = 1.0f;
  return set_arg (ops, &op, "the first input", a, a_offset, count * 4,
      FALSE, error) && (!b || set_arg (ops, &op, "the second input", b,
          b_offset, count * 4, FALSE, error)) &&
      set_arg (ops, &op, "the output", out, o_offset, count * 4, FALSE, error)
      && append (ops, &op, error);
}

gboolean
npu_ops_silu_mul (NpuOps * ops, NpuBuffer * gate, gsize g_offset,
    NpuBuffer * up, gsize u_offset, NpuBuffer * out, gsize o_offset,
    gsize count, GError ** error)
{
  g_return_val_if_fail (up != NULL, FALSE);
  return elementwise (ops, NPU_OP_SILU_MUL, gate, g_offset, up, u_offset, out,
      o_offset, count, error);
}

gboolean
npu_ops_gelu (NpuOps * ops, NpuBuffer * x, gsize x_offset, NpuBuffer * y,
    gsize y_offset, gsize count, GError ** error)
{
  return elementwise (ops, NPU_OP_GELU, x, x_offset, NULL, 0, y, y_offset,
      count, error);
}

gboolean
npu_ops_add (NpuOps * ops, NpuBuffer * a, gsize a_offset, NpuBuffer * b,
    gsize b_offset, NpuBuffer * out, gsize o_offset, gsize count,
    GError ** error)
{
  g_return_val_if_fail (b != NULL, FALSE);
  return elementwise (ops, NPU_OP_ADD, a, a_offset, b, b_offset, out,
      o_offset, count, error);
}

gboolean
npu_ops_add_scaled (NpuOps * ops, NpuBuffer * a, gsize a_offset, float alpha,
    NpuBuffer * b, gsize b_offset, float beta, NpuBuffer * out,
    gsize o_offset, gsize count, GError ** error)
{
  NpuOp op = { NPU_OP_ADD };

  g_return_val_if_fail (b != NULL, FALSE);
  if (!nonzero (op.kind, "count", count, error))
    return FALSE;
  op.n[0] = count;
  op.f[0] = alpha;
  op.f[1] = beta;
  return set_arg (ops, &op, "the first input", a, a_offset, count * 4,
      FALSE, error) && set_arg (ops, &op, "the second input", b, b_offset,
      count * 4, FALSE, error) && set_arg (ops, &op, "the output", out,
      o_offset, count * 4, FALSE, error) && append (ops, &op, error);
}

gboolean
npu_ops_im2col3 (NpuOps * ops, NpuBuffer * src, gsize s_offset, gsize n_in,
    gsize in, gboolean channel_major, gsize stride, NpuBuffer * dst,
    gsize d_offset, gsize n_out, GError ** error)
{
  NpuOp op = { NPU_OP_IM2COL3 };

  if (!nonzero (op.kind, "n_in", n_in, error) ||
      !nonzero (op.kind, "in", in, error) ||
      !nonzero (op.kind, "stride", stride, error) ||
      !nonzero (op.kind, "n_out", n_out, error))
    return FALSE;
  if ((guint64) n_out * in * 3 > G_MAXUINT32 ||
      (guint64) (n_out - 1) * stride > n_in) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "im2col3: %" G_GSIZE_FORMAT " output rows at stride %" G_GSIZE_FORMAT
        " do not fit %" G_GSIZE_FORMAT " input positions", n_out, stride, n_in);
    return FALSE;
  }
  op.n[0] = n_out;
  op.n[1] = in;
  op.n[2] = n_in;
  op.n[3] = stride;
  op.n[4] = channel_major != FALSE;
  return set_arg (ops, &op, "src", src, s_offset, (guint64) n_in * in * 4,
      FALSE, error) && set_arg (ops, &op, "dst", dst, d_offset,
      (guint64) n_out * in * 3 * 4, FALSE, error) && append (ops, &op, error);
}

gboolean
npu_ops_rope (NpuOps * ops, NpuBuffer * x, gsize x_offset, gsize n_tok,
    gsize n_heads, gsize head_dim, gsize n_rot, gsize pos0, float base,
    float freq_scale, gboolean neox, GError ** error)
{
  NpuOp op = { NPU_OP_ROPE };

  if (!nonzero (op.kind, "n_tok", n_tok, error) ||
      !nonzero (op.kind, "n_heads", n_heads, error) ||
      !nonzero (op.kind, "head_dim", head_dim, error) ||
      !nonzero (op.kind, "n_rot", n_rot, error))
    return FALSE;
  if (n_rot % 2 != 0 || n_rot > head_dim || !(base > 0.0f) ||
      pos0 + n_tok > G_MAXUINT32) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "rope: n_rot %" G_GSIZE_FORMAT " is not even and <= the head size %"
        G_GSIZE_FORMAT ", or the base %g or the positions are out of range",
        n_rot, head_dim, base);
    return FALSE;
  }
  op.n[0] = n_tok;
  op.n[1] = n_heads;
  op.n[2] = head_dim;
  op.n[3] = n_rot;
  op.n[4] = pos0;
  op.n[5] = neox != FALSE;
  op.f[0] = base;
  op.f[1] = freq_scale;
  return set_arg (ops, &op, "x", x, x_offset,
      (guint64) n_tok * n_heads * head_dim * 4, FALSE, error) &&
      append (ops, &op, error);
}

gboolean
npu_ops_attention (NpuOps * ops, NpuBuffer * q, gsize q_offset, NpuBuffer * k,
    gsize k_offset, NpuBuffer * v, gsize v_offset, NpuKvType kv_type,
    NpuBuffer * out, gsize o_offset, gsize n_q, gsize n_heads, gsize n_kv,
    gsize head_dim, gsize pos0, gboolean causal, float scale, GError ** error)
{
  NpuOp op = { NPU_OP_ATTENTION };
  guint64 row, kv_bytes;

  if (!nonzero (op.kind, "n_q", n_q, error) ||
      !nonzero (op.kind, "n_heads", n_heads, error) ||
      !nonzero (op.kind, "n_kv", n_kv, error) ||
      !nonzero (op.kind, "head_dim", head_dim, error))
    return FALSE;
  if (n_heads % n_kv != 0 || (kv_type == NPU_KV_Q8_0 && head_dim % 32 != 0) ||
      kv_type > NPU_KV_Q8_0) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "attention: %" G_GSIZE_FORMAT " query heads are not a multiple of %"
        G_GSIZE_FORMAT " KV heads, or the KV type %d does not fit a head of %"
        G_GSIZE_FORMAT, n_heads, n_kv, kv_type, head_dim);
    return FALSE;
  }
  op.kv_type = kv_type;
  op.n[0] = n_q;
  op.n[1] = n_heads;
  op.n[2] = n_kv;
  op.n[3] = head_dim;
  op.n[4] = pos0;
  op.n[5] = causal != FALSE;
  op.f[0] = scale;
  row = npu_kv_row_bytes (kv_type, (gsize) n_kv * head_dim);
  kv_bytes = row * (pos0 + n_q);
  return set_arg (ops, &op, "q", q, q_offset,
      (guint64) n_q * n_heads * head_dim * 4, FALSE, error) &&
      set_arg (ops, &op, "the keys", k, k_offset, kv_bytes, FALSE, error) &&
      set_arg (ops, &op, "the values", v, v_offset, kv_bytes, FALSE, error) &&
      set_arg (ops, &op, "out", out, o_offset,
      (guint64) n_q * n_heads * head_dim * 4, FALSE, error) &&
      append (ops, &op, error);
}

static gboolean
run_task (NpuTask * task, gpointer user_data, GError ** error)
{
  NpuOps *ops = user_data;
  guint i;

#if NPU_HAVE_VULKAN
  if (g_str_equal (npu_device_get_kind (ops->device), "vulkan"))
    return npu_vulkan_ops_run (ops, error);
#endif
  for (i = 0; i < ops->ops->len && !npu_task_is_cancelled (task); i++)
    npu_ops_cpu_run (task, &g_array_index (ops->ops, NpuOp, i));
  return TRUE;
}

NpuFence *
npu_ops_submit (NpuOps * ops, NpuQueue * queue, NpuFence * const *in_fences,
    guint n_in_fences)
{
  g_return_val_if_fail (npu_queue_get_device (queue) == ops->device, NULL);
  return npu_queue_submit (queue, run_task, ops, NULL, in_fences, n_in_fences);
}
