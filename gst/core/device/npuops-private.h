/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the recorded form of an NpuOps, read by each engine (internal)
 */
#ifndef __NPU_OPS_PRIVATE_H__
#define __NPU_OPS_PRIVATE_H__

#include "npuops.h"
#include "npubackend-private.h"

G_BEGIN_DECLS

typedef enum
{
  NPU_OP_MUL_MAT,
  NPU_OP_RMS_NORM,
  NPU_OP_SOFTMAX,
  NPU_OP_SILU_MUL,
  NPU_OP_GELU,
  NPU_OP_ADD,
  NPU_OP_ROPE,
  NPU_OP_ATTENTION,
  NPU_OP_LAYER_NORM,
  NPU_OP_BIAS_ACT,
  NPU_OP_GATHER,
  NPU_OP_IM2COL3,
} NpuOpKind;

#define NPU_OP_MAX_ARGS 4

typedef struct
{
  NpuBuffer *buffer;            /* a reference */
  gsize offset;
  gsize size;                   /* bytes the operation touches */
} NpuOpArg;

/* One operation.  The sizes in @n are the header's, in its order:
 *   MUL_MAT: rows, k, n;  RMS_NORM: dim, n;  SOFTMAX: dim, n;
 *   SILU_MUL, GELU, ADD: count;  ROPE: n_tok, n_heads, head_dim, n_rot,
 *   pos0, neox;  ATTENTION: n_q, n_heads, n_kv, head_dim, pos0, causal;
 *   LAYER_NORM: dim, n;  BIAS_ACT: rows, cols, has_bias;  GATHER: n_out,
 *   dim;  IM2COL3: n_out, in, n_in, stride, channel_major
 * and @f: RMS_NORM, LAYER_NORM: eps;  ROPE: base, freq_scale;  ATTENTION:
 * scale;  ADD: alpha, beta. */
typedef struct
{
  NpuOpKind kind;
  NpuOpArg args[NPU_OP_MAX_ARGS];
  guint n_args;
  NpuOpWeight weight;           /* MUL_MAT */
  NpuKvType kv_type;            /* ATTENTION */
  NpuOpAct act;                 /* BIAS_ACT */
  gsize n[6];
  float f[2];
} NpuOp;

struct _NpuOps
{
  NpuDevice *device;
  GArray *ops;                  /* of NpuOp */
  /* the engine's recorded form (a Vulkan program), made at the first run */
  gpointer engine_program;
  GDestroyNotify engine_program_free;
};

/* cpu/npuops-cpu.c: one operation on the CPU device's threads */
G_GNUC_INTERNAL
void npu_ops_cpu_run (NpuTask * task, const NpuOp * op);

#if NPU_HAVE_VULKAN
/* npuvulkan.c: records @ops on its first call, then runs it */
G_GNUC_INTERNAL
gboolean npu_vulkan_ops_run (NpuOps * ops, GError ** error);
/* FALSE with a message if the Vulkan device cannot run @op */
G_GNUC_INTERNAL
gboolean npu_vulkan_op_check (NpuDevice * device, const NpuOp * op,
    GError ** error);
#endif

G_END_DECLS

#endif /* __NPU_OPS_PRIVATE_H__ */
