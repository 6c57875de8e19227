/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the operation table: what the models ask of a device
 *
 * An NpuOps is a list of operations recorded once against device buffers
 * and byte offsets, never host pointers, and run as one task on a queue of
 * the device as often as wanted (docs/device-seam.md).  The CPU device
 * runs each operation with the CPU kernels on its threads; the Vulkan
 * device records the list into one command buffer at the first run and
 * replays it.  Every argument is checked when it is recorded: a buffer of
 * another device, a range outside its buffer, a misaligned offset and a
 * shape the device cannot run each fail there with a message, so a run
 * fails only for what the device itself reports.
 *
 * Values are F32 unless said otherwise; a row-major matrix of n rows of k
 * values has row c at c * k.  Offsets are bytes and multiples of 4 (the
 * quantised weights may start at any byte).
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_OPS_H__
#define __NPU_OPS_H__

#include <glib.h>
#include "npuapi.h"
#include "npubackend.h"
#include "npubuffer.h"
#include "core/formats/npukvtype.h"

G_BEGIN_DECLS typedef struct _NpuOps NpuOps;

/**
 * NpuOpAct:
 * @NPU_OP_ACT_NONE: the identity
 * @NPU_OP_ACT_GELU: the tanh form (ggml_gelu)
 * @NPU_OP_ACT_GELU_QUICK: x sigmoid (1.702 x) (ggml_gelu_quick)
 * @NPU_OP_ACT_SILU: x sigmoid (x)
 * @NPU_OP_ACT_GELU_ERF: 0.5 x (1 + erf (x / sqrt 2)) (ggml_gelu_erf)
 */
typedef enum
{
  NPU_OP_ACT_NONE,
  NPU_OP_ACT_GELU,
  NPU_OP_ACT_GELU_QUICK,
  NPU_OP_ACT_SILU,
  NPU_OP_ACT_GELU_ERF,
} NpuOpAct;

/**
 * NpuOpWeight:
 * @NPU_OP_WEIGHT_F32: rows of k floats
 * @NPU_OP_WEIGHT_F16: rows of k IEEE binary16 (k even)
 * @NPU_OP_WEIGHT_Q8_0: ggml's block_q8_0 (34 bytes per 32 values)
 * @NPU_OP_WEIGHT_MXFP4: ggml's block_mxfp4 (17 bytes per 32 values)
 * @NPU_OP_WEIGHT_BF16: rows of k bfloat16
 * @NPU_OP_WEIGHT_Q4_0: ggml's block_q4_0 (18 bytes per 32 values)
 * @NPU_OP_WEIGHT_Q4_1: ggml's block_q4_1 (20 bytes per 32 values)
 * @NPU_OP_WEIGHT_Q5_0: ggml's block_q5_0 (22 bytes per 32 values)
 * @NPU_OP_WEIGHT_Q5_1: ggml's block_q5_1 (24 bytes per 32 values)
 * @NPU_OP_WEIGHT_Q4_K: ggml's block_q4_K (144 bytes per 256 values)
 * @NPU_OP_WEIGHT_Q5_K: ggml's block_q5_K (176 bytes per 256 values)
 * @NPU_OP_WEIGHT_Q6_K: ggml's block_q6_K (210 bytes per 256 values)
 *
 * Every type but F32 and F16 may start at any byte of its buffer; k is a
 * whole number of the type's blocks.
 */
typedef enum
{
  NPU_OP_WEIGHT_F32,
  NPU_OP_WEIGHT_F16,
  NPU_OP_WEIGHT_Q8_0,
  NPU_OP_WEIGHT_MXFP4,
  NPU_OP_WEIGHT_BF16,
  NPU_OP_WEIGHT_Q4_0,
  NPU_OP_WEIGHT_Q4_1,
  NPU_OP_WEIGHT_Q5_0,
  NPU_OP_WEIGHT_Q5_1,
  NPU_OP_WEIGHT_Q4_K,
  NPU_OP_WEIGHT_Q5_K,
  NPU_OP_WEIGHT_Q6_K,
} NpuOpWeight;

/* The ggml type (npugguf.h's NPU_GGML_TYPE_*) an NpuOpWeight stores, and
 * back: FALSE for a ggml type the operation table does not multiply */
NPU_API guint32 npu_op_weight_get_ggml_type (NpuOpWeight type);
NPU_API
    gboolean npu_op_weight_from_ggml_type (guint32 ggml_type,
    NpuOpWeight * type);

NPU_API NpuOps *npu_ops_new (NpuDevice * device);
NPU_API void npu_ops_free (NpuOps * ops);
NPU_API guint npu_ops_get_length (NpuOps * ops);

/* y (n x rows) = x (n x k) times the transpose of w (rows x k, @type):
 * y[c * rows + r] = sum_j w[r][j] x[c * k + j]; k a multiple of 32 for
 * the quantised types.  The CPU uses its accurate products
 * (NPU_MATMUL_PRECISION_ACCURATE), other devices F32 arithmetic. */
NPU_API
    gboolean npu_ops_mul_mat (NpuOps * ops, NpuOpWeight type, NpuBuffer * w,
    gsize w_offset, gsize rows, gsize k, NpuBuffer * x, gsize x_offset,
    gsize n, NpuBuffer * y, gsize y_offset, GError ** error);
/* y[c][i] = x[c][i] w[i] / sqrt (mean_i x[c][i]^2 + eps), n rows of dim */
NPU_API
    gboolean npu_ops_rms_norm (NpuOps * ops, NpuBuffer * x, gsize x_offset,
    NpuBuffer * w, gsize w_offset, NpuBuffer * y, gsize y_offset, gsize dim,
    gsize n, float eps, GError ** error);
/* y[c][i] = (x[c][i] - mean_c) / sqrt (var_c + eps) w[i] + b[i] (ggml_norm
 * with a weight and a bias); @y may be @x */
NPU_API
    gboolean npu_ops_layer_norm (NpuOps * ops, NpuBuffer * x, gsize x_offset,
    NpuBuffer * w, gsize w_offset, NpuBuffer * b, gsize b_offset,
    NpuBuffer * y, gsize y_offset, gsize dim, gsize n, float eps,
    GError ** error);
/* y[r][c] = act (y[r][c] + bias[c]) in place, rows x cols; @bias may be
 * NULL */
NPU_API
    gboolean npu_ops_bias_act (NpuOps * ops, NpuBuffer * y, gsize y_offset,
    NpuBuffer * bias, gsize b_offset, gsize rows, gsize cols, NpuOpAct act,
    GError ** error);
/* dst row i = src row idx[i] for i < n_out, rows of dim values; idx is
 * int32, a negative index gives a row of zeros; every index < n_src */
NPU_API
    gboolean npu_ops_gather_rows (NpuOps * ops, NpuBuffer * src, gsize s_offset,
    gsize n_src, NpuBuffer * idx, gsize i_offset, NpuBuffer * dst,
    gsize d_offset, gsize n_out, gsize dim, GError ** error);
/* each of n rows of dim values replaced by its softmax */
NPU_API
    gboolean npu_ops_softmax (NpuOps * ops, NpuBuffer * x, gsize x_offset,
    gsize dim, gsize n, GError ** error);
/* out[i] = silu (gate[i]) up[i] for i < count */
NPU_API
    gboolean npu_ops_silu_mul (NpuOps * ops, NpuBuffer * gate, gsize g_offset,
    NpuBuffer * up, gsize u_offset, NpuBuffer * out, gsize o_offset,
    gsize count, GError ** error);
/* y[i] = gelu (x[i]), the tanh form (ggml_gelu) */
NPU_API
    gboolean npu_ops_gelu (NpuOps * ops, NpuBuffer * x, gsize x_offset,
    NpuBuffer * y, gsize y_offset, gsize count, GError ** error);
/* out[i] = a[i] + b[i] */
NPU_API
    gboolean npu_ops_add (NpuOps * ops, NpuBuffer * a, gsize a_offset,
    NpuBuffer * b, gsize b_offset, NpuBuffer * out, gsize o_offset,
    gsize count, GError ** error);
/* out[i] = alpha a[i] + beta b[i] */
NPU_API
    gboolean npu_ops_add_scaled (NpuOps * ops, NpuBuffer * a, gsize a_offset,
    float alpha, NpuBuffer * b, gsize b_offset, float beta, NpuBuffer * out,
    gsize o_offset, gsize count, GError ** error);
/* The input rows of a kernel-3, padding-1 convolution of @in channels
 * over @n_in positions with @stride: dst (n_out rows of 3 in) [t][i * 3 +
 * k] = src (position stride t + k - 1, channel i), zero outside the
 * input; @src channel major (src[i * n_in + p]) or position major
 * (src[p * in + i]) */
NPU_API
    gboolean npu_ops_im2col3 (NpuOps * ops, NpuBuffer * src, gsize s_offset,
    gsize n_in, gsize in, gboolean channel_major, gsize stride,
    NpuBuffer * dst, gsize d_offset, gsize n_out, GError ** error);
/* Rotary positions in place on n_tok rows of n_heads heads of head_dim
 * values: the first n_rot values of each head turn by pos * freq_scale *
 * base^(-2i / n_rot), pos = pos0 + the row; pairs (2i, 2i + 1), or
 * (i, i + n_rot / 2) with @neox (qwen2, qwen3). */
NPU_API
    gboolean npu_ops_rope (NpuOps * ops, NpuBuffer * x, gsize x_offset,
    gsize n_tok, gsize n_heads, gsize head_dim, gsize n_rot, gsize pos0,
    float base, float freq_scale, gboolean neox, GError ** error);
/* Attention of n_q query rows (n_heads heads of head_dim) at positions
 * pos0 .. pos0 + n_q - 1 over a KV cache whose rows 0 .. pos0 + n_q - 1
 * hold n_kv heads of head_dim values in @kv_type (n_heads a multiple of
 * n_kv: query head h reads KV head h / (n_heads / n_kv)):
 * out[t][h] = sum_j softmax_j (scale q[t][h] . k[j]) v[j], for j <= pos0 +
 * t where @causal, else for every row (an encoder). */
NPU_API
    gboolean npu_ops_attention (NpuOps * ops, NpuBuffer * q, gsize q_offset,
    NpuBuffer * k, gsize k_offset, NpuBuffer * v, gsize v_offset,
    NpuKvType kv_type, NpuBuffer * out, gsize o_offset, gsize n_q,
    gsize n_heads, gsize n_kv, gsize head_dim, gsize pos0, gboolean causal,
    float scale, GError ** error);

/* Runs the list as one task of @queue (a queue of the ops' device) after
 * @in_fences; returns its fence, which fails with the device's message. */
NPU_API
    NpuFence * npu_ops_submit (NpuOps * ops, NpuQueue * queue,
    NpuFence * const *in_fences, guint n_in_fences);

G_END_DECLS
#endif /* __NPU_OPS_H__ */
