/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the CPU device's side of the operation table
 *
 * Each recorded operation (device/npuops-private.h) run with the CPU
 * kernels, on the running task's threads: the MXFP4 and Q8_0 products at
 * their accurate precision, the encoders' F32 product, layer norm and
 * bias-and-activation, the vector maths' RMS norm and SiLU, the attention
 * kernel over the KV rows in place.  What has no kernel of its own yet
 * (the F16 product, softmax, GELU, add, RoPE, gathering rows) is plain C
 * here, with the models' own formulas.
 *
 * GLib only, no GStreamer types.
 */
#include "core/device/npuops-private.h"
#include "core/device/npubuffer-private.h"
#include "core/cpu/npumatmul.h"
#include "core/cpu/npuweightmatrix.h"
#include "core/cpu/npuvecmath.h"
#include "core/cpu/npuattention.h"
#include "core/formats/npumxfp4.h"
#include "core/models/npuencoder.h"

#include <math.h>
#include <string.h>

static inline float *
arg_f32 (const NpuOp * op, guint i)
{
  return (float *) (npu_buffer_get_data (op->args[i].buffer) +
      op->args[i].offset);
}

static inline const guint8 *
arg_bytes (const NpuOp * op, guint i)
{
  return npu_buffer_get_data (op->args[i].buffer) + op->args[i].offset;
}

typedef struct
{
  const NpuOp *op;
} Job;

static void
mul_f16_rows (gsize start, gsize end, guint worker, gpointer user_data)
{
  const NpuOp *op = ((Job *) user_data)->op;
  gsize rows = op->n[0], k = op->n[1], n = op->n[2], r, c, j;
  const guint16 *w = (const guint16 *) arg_bytes (op, 0);
  const float *x = arg_f32 (op, 1);
  float *y = arg_f32 (op, 2);

  for (r = start; r < end; r++)
    for (c = 0; c < n; c++) {
      float s = 0.0f;

      for (j = 0; j < k; j++)
        s += npu_f16_to_f32 (w[r * k + j]) * x[c * k + j];
      y[c * rows + r] = s;
    }
}

static void
mul_mat (NpuTask * task, const NpuOp * op)
{
  gsize rows = op->n[0], k = op->n[1], n = op->n[2];
  NpuMxfp4Matrix m;
  Job job = { op };

  switch (op->weight) {
    case NPU_OP_WEIGHT_MXFP4:
      npu_mxfp4_matrix_init_view (&m, (const NpuBlockMxfp4 *) arg_bytes (op,
              0), rows, k);
      npu_matmul_mxfp4_with_precision (task, &m, arg_f32 (op, 1), n,
          arg_f32 (op, 2), NPU_MATMUL_PRECISION_ACCURATE);
      npu_mxfp4_matrix_clear (&m);
      break;
    case NPU_OP_WEIGHT_Q8_0:
      npu_matmul_q8_0_with_precision (task,
          (const NpuBlockQ8_0 *) arg_bytes (op, 0), rows, k, arg_f32 (op, 1),
          n, arg_f32 (op, 2), NPU_MATMUL_PRECISION_ACCURATE);
      break;
    case NPU_OP_WEIGHT_F32:
      npu_enc_gemm_f32 (task, arg_f32 (op, 0), rows, k, arg_f32 (op, 1), n,
          arg_f32 (op, 2), NULL);
      break;
    case NPU_OP_WEIGHT_F16:
      npu_task_parallel_for (task, rows, 16, mul_f16_rows, &job);
      break;
    default:{
      /* BF16 and the 4-, 5- and 6-bit types, read in place as the models'
       * matrices are (npuweightmatrix.h); npu_ops_mul_mat() checked the
       * shape */
      NpuWeightMatrix wm;
      gboolean ok = npu_weight_matrix_init (&wm,
          npu_op_weight_get_ggml_type (op->weight), arg_bytes (op, 0), rows,
          k, FALSE);

      g_assert (ok);
      npu_weight_matrix_mul (task, &wm, arg_f32 (op, 1), n, arg_f32 (op, 2),
          NPU_MATMUL_PRECISION_ACCURATE);
      npu_weight_matrix_clear (&wm);
      break;
    }
  }
}

static void
softmax_rows (float *x, gsize dim, gsize n)
{
  gsize c, i;

  for (c = 0; c < n; c++) {
    float *row = x + c * dim, m = row[0];
    double s = 0.0;

    for (i = 1; i < dim; i++)
      m = MAX (m, row[i]);
    for (i = 0; i < dim; i++) {
      row[i] = expf (row[i] - m);
      s += row[i];
    }
    for (i = 0; i < dim; i++)
      row[i] = (float) (row[i] / s);
  }
}

static void
rope_rows (const NpuOp * op)
{
  gsize n_tok = op->n[0], n_heads = op->n[1], hd = op->n[2], half =
      op->n[3] / 2, t, h, i;
  gboolean neox = op->n[5] != 0;
  float *x = arg_f32 (op, 0);

  for (t = 0; t < n_tok; t++)
    for (i = 0; i < half; i++) {
      /* as the decoder does: the angle in double, cos and sin rounded */
      double a = (double) (op->n[4] + t) * op->f[1] *
          pow (op->f[0], -2.0 * i / op->n[3]);
      float c = (float) cos (a), s = (float) sin (a);

      for (h = 0; h < n_heads; h++) {
        float *row = x + (t * n_heads + h) * hd;
        gsize i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        float x0 = row[i0], x1 = row[i1];

        row[i0] = x0 * c - x1 * s;
        row[i1] = x0 * s + x1 * c;
      }
    }
}

/* NpuOpAct and NpuEncAct name the same functions, in their own orders */
static NpuEncAct
enc_act (NpuOpAct act)
{
  switch (act) {
    case NPU_OP_ACT_GELU:
      return NPU_ENC_ACT_GELU;
    case NPU_OP_ACT_GELU_QUICK:
      return NPU_ENC_ACT_GELU_QUICK;
    case NPU_OP_ACT_SILU:
      return NPU_ENC_ACT_SILU;
    case NPU_OP_ACT_GELU_ERF:
      return NPU_ENC_ACT_GELU_ERF;
    case NPU_OP_ACT_NONE:
    default:
      return NPU_ENC_ACT_NONE;
  }
}

static void
gather_rows (const NpuOp * op)
{
  gsize n_out = op->n[0], dim = op->n[1], i;
  const gint32 *idx = (const gint32 *) arg_bytes (op, 1);
  const float *src = arg_f32 (op, 0);
  float *dst = arg_f32 (op, 2);

  for (i = 0; i < n_out; i++)
    if (idx[i] < 0)
      memset (dst + i * dim, 0, dim * sizeof (float));
    else
      memcpy (dst + i * dim, src + (gsize) idx[i] * dim, dim * sizeof (float));
}

static void
im2col3 (const NpuOp * op)
{
  gsize n_out = op->n[0], in = op->n[1], n_in = op->n[2], t, i, k;
  const float *src = arg_f32 (op, 0);
  float *dst = arg_f32 (op, 1);

  for (t = 0; t < n_out; t++)
    for (i = 0; i < in; i++)
      for (k = 0; k < 3; k++) {
        gint64 p = (gint64) (t * op->n[3] + k) - 1;

        dst[(t * in + i) * 3 + k] = p < 0 || p >= (gint64) n_in ? 0.0f :
            src[op->n[4] ? i * n_in + p : p * in + i];
      }
}

static void
attention_heads (gsize start, gsize end, guint worker, gpointer user_data)
{
  const NpuOp *op = ((Job *) user_data)->op;
  gsize n_heads = op->n[1], n_kv = op->n[2], hd = op->n[3], pos0 = op->n[4];
  gsize group = n_heads / n_kv, kv_row = n_kv * hd, t, g;
  gsize head_bytes = npu_kv_row_bytes (op->kv_type, hd);
  const float *q = arg_f32 (op, 0);
  float *out = arg_f32 (op, 3);
  float *scores = g_new (float, group * (pos0 + op->n[0]));

  /* one job a (query row, KV head): the group's query heads share its rows */
  for (g = start; g < end; g++) {
    NpuAttnSpan span = { 0 };

    t = g / n_kv;
    span.q = q + (t * n_heads + (g % n_kv) * group) * hd;
    span.k = arg_bytes (op, 1) + (g % n_kv) * head_bytes;
    span.v = arg_bytes (op, 2) + (g % n_kv) * head_bytes;
    /* npu_attention_rows counts the stride in values, whatever the type */
    span.stride = kv_row;
    span.n = op->n[5] ? pos0 + t + 1 : pos0 + op->n[0];
    span.type = op->kv_type;
    npu_attention_rows (&span, 1, hd, group, hd, op->f[0], scores,
        pos0 + op->n[0], out + (t * n_heads + (g % n_kv) * group) * hd, hd);
  }
  g_free (scores);
}

void
npu_ops_cpu_run (NpuTask * task, const NpuOp * op)
{
  gsize i;
  Job job = { op };

  switch (op->kind) {
    case NPU_OP_MUL_MAT:
      mul_mat (task, op);
      break;
    case NPU_OP_RMS_NORM:
      for (i = 0; i < op->n[1]; i++)
        npu_rms_norm (arg_f32 (op, 0) + i * op->n[0], arg_f32 (op, 1),
            arg_f32 (op, 2) + i * op->n[0], op->n[0], op->f[0]);
      break;
    case NPU_OP_SOFTMAX:
      softmax_rows (arg_f32 (op, 0), op->n[0], op->n[1]);
      break;
    case NPU_OP_SILU_MUL:
      npu_silu_mul (arg_f32 (op, 0), arg_f32 (op, 1), arg_f32 (op, 2),
          op->n[0]);
      break;
    case NPU_OP_GELU:
      for (i = 0; i < op->n[0]; i++) {
        float x = arg_f32 (op, 0)[i];

        arg_f32 (op, 1)[i] = 0.5f * x * (1.0f +
            tanhf (0.7978845608028654f * (x + 0.044715f * x * x * x)));
      }
      break;
    case NPU_OP_ADD:
      if (op->f[0] == 1.0f && op->f[1] == 1.0f)
        for (i = 0; i < op->n[0]; i++)
          arg_f32 (op, 2)[i] = arg_f32 (op, 0)[i] + arg_f32 (op, 1)[i];
      else
        for (i = 0; i < op->n[0]; i++)
          arg_f32 (op, 2)[i] = op->f[0] * arg_f32 (op, 0)[i] +
              op->f[1] * arg_f32 (op, 1)[i];
      break;
    case NPU_OP_IM2COL3:
      im2col3 (op);
      break;
    case NPU_OP_ROPE:
      rope_rows (op);
      break;
    case NPU_OP_ATTENTION:
      npu_task_parallel_for (task, op->n[0] * op->n[2], 1, attention_heads,
          &job);
      break;
    case NPU_OP_LAYER_NORM:
      npu_enc_layernorm (task, arg_f32 (op, 3), arg_f32 (op, 0), op->n[1],
          op->n[0], op->f[0], arg_f32 (op, 1), arg_f32 (op, 2), NULL);
      break;
    case NPU_OP_BIAS_ACT:
      npu_enc_bias_act (task, arg_f32 (op, 0), op->n[0], op->n[1],
          op->n[2] ? arg_f32 (op, 1) : NULL, enc_act (op->act), NULL);
      break;
    case NPU_OP_GATHER:
      gather_rows (op);
      break;
  }
}
