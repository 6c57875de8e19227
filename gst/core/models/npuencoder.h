/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the pieces the transformer encoders share (internal to the core)
 *
 * The vision encoder (npuvit.c) and the audio encoder (npuaudioenc.c) run
 * the same pre-norm block of llama.cpp's build_vit (LayerNorm, multi-head
 * attention over all positions, LayerNorm, two-matrix FFN) and read their
 * weights from an mmproj the same way: these are those pieces, once.
 *
 * Weights: every 2-D matrix is MXFP4 (used in place when the file has it,
 * converted once by the OCP rules otherwise); vectors are F32 copies.
 * Kernels: each row (token) is computed by one thread in a fixed order,
 * so results do not depend on the number of threads.
 */
#ifndef __NPU_ENCODER_H__
#define __NPU_ENCODER_H__

#include <glib.h>
#include "core/device/npubackend.h"
#include "core/device/npuops.h"
#include "core/formats/npugguf.h"
#include "core/cpu/npumatmul.h"
#include "core/cpu/npuweightmatrix.h"
#include "core/device/npubytes.h"
#include "npuviterror.h"

G_BEGIN_DECLS

typedef enum
{
  NPU_ENC_ACT_NONE,
  NPU_ENC_ACT_GELU,             /* tanh form, ggml_gelu */
  NPU_ENC_ACT_GELU_QUICK,       /* x sigmoid (1.702 x), ggml_gelu_quick */
  NPU_ENC_ACT_SILU,             /* x sigmoid (x), ggml_silu */
  NPU_ENC_ACT_GELU_ERF,         /* 0.5 x (1 + erf (x / sqrt 2)), ggml_gelu_erf */
} NpuEncAct;

/* The weight types an encoder's matrices may have (npuquants.h), as its
 * errors list them */
#define NPU_ENC_MATRIX_TYPES "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, " \
  "q4_K, q5_K, q6_K, mxfp4"


/* One pre-norm block; k_b may be NULL (Whisper has no key bias) */
typedef struct
{
  float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
  NpuWeightMatrix q, k, v, o, up, down;
  float *q_b, *k_b, *v_b, *o_b, *up_b, *down_b;
} NpuEncLayer;

/* Where tensors come from while an encoder is built, and what it owns */
typedef struct
{
  const gchar *name;            /* error prefix */
  const NpuGguf *gguf;
  NpuTensorLookup lookup;
  gpointer user_data;
  gsize owned_bytes, borrowed_bytes;
} NpuEncLoader;

/* @lookup NULL: the tensors of @gguf */
G_GNUC_INTERNAL
void npu_enc_loader_init (NpuEncLoader * ld, const NpuGguf * gguf,
    NpuTensorLookup lookup, gpointer user_data, const gchar * name);
/* Finds @tname and checks its shape against @e0..@e3 (1 for unused
 * dimensions).  Returns FALSE with @error unset if it is absent and not
 * @required. */
G_GNUC_INTERNAL
gboolean npu_enc_get_tensor (NpuEncLoader * ld, const gchar * tname,
    gboolean required, guint64 e0, guint64 e1, guint64 e2, guint64 e3,
    NpuTensorView * view, GError ** error);
G_GNUC_INTERNAL
gboolean npu_enc_unsupported_type (NpuEncLoader * ld, const gchar * tname,
    guint32 type, const gchar * allowed, GError ** error);
/* An F32 copy of a view of @n elements (F32, F16 or BF16) */
G_GNUC_INTERNAL
float *npu_enc_to_f32 (NpuEncLoader * ld, const gchar * tname,
    const NpuTensorView * view, gsize n, GError ** error);
/* 1-D tensor of @n elements as F32; NULL (error unset) if absent and not
 * @required */
G_GNUC_INTERNAL
float *npu_enc_get_vector (NpuEncLoader * ld, const gchar * tname,
    gboolean required, guint64 n, GError ** error);
/* A view of a rows x k matrix as MXFP4: in place, or converted once */
G_GNUC_INTERNAL
gboolean npu_enc_view_to_matrix (NpuEncLoader * ld, const gchar * tname,
    const NpuTensorView * view, guint64 rows, guint64 k,
    NpuWeightMatrix * mat, GError ** error);
/* A linear layer's weight, ggml ne = [k, rows] */
G_GNUC_INTERNAL
gboolean npu_enc_get_matrix (NpuEncLoader * ld, const gchar * tname,
    guint64 k, guint64 rows, NpuWeightMatrix * mat, GError ** error);
G_GNUC_INTERNAL
gboolean npu_enc_get_u32_key (NpuEncLoader * ld, const gchar * key,
    guint32 * value, GError ** error);
/* <prefix>.weight and .bias of @dim; both absent is fine when !@required */
G_GNUC_INTERNAL
gboolean npu_enc_get_norm (NpuEncLoader * ld, const gchar * prefix,
    gboolean required, guint dim, float **w, float **b, GError ** error);
/* Block @il of "<prefix>.blk.N.*".  The key bias is required if
 * @k_bias_required, else used when present.  @legacy_ffn_swap: swap
 * ffn_up and ffn_down back when ffn_down's ne[0] is dim, as clip.cpp does
 * for the vision projectors of old converters. */
G_GNUC_INTERNAL
gboolean npu_enc_load_layer (NpuEncLoader * ld, const gchar * prefix,
    guint il, guint dim, guint ff, gboolean k_bias_required,
    gboolean legacy_ffn_swap, NpuEncLayer * l, GError ** error);
G_GNUC_INTERNAL
void npu_enc_layer_clear (NpuEncLayer * l);

/* The blocks' shape and scratch, allocated once */
typedef struct
{
  guint dim, ff, n_heads, head_dim;
  gfloat eps;
  NpuEncAct act;
  NpuMatmulPrecision precision; /* of every product of the encoder */
  guint n_max;                  /* positions the scratch holds */
  float *h, *q, *k, *v, *att, *ffb;
  float *scores;                /* n_score_rows rows of n_max */
  guint n_score_rows;
  gsize scratch_bytes;
  /* what the encoder moved, a running count (npubytes.h): the kernels
   * below add to it where they run */
  NpuBytes bytes;
} NpuEncBlocks;

/* dim, ff, n_heads, head_dim, eps and act set; FALSE if out of memory */
G_GNUC_INTERNAL
gboolean npu_enc_blocks_alloc (NpuEncBlocks * b, guint n_max);
G_GNUC_INTERNAL
void npu_enc_blocks_clear (NpuEncBlocks * b);
/* Grows the score rows once if @task has more threads than the machine
 * has CPUs */
G_GNUC_INTERNAL
void npu_enc_blocks_fit_task (NpuEncBlocks * b, NpuTask * task);
/* x (n rows of dim) += attn_out (MHA (LN1 (x))); x += ffn_down (act
 * (ffn_up (LN2 (x)))), n <= n_max */
G_GNUC_INTERNAL
void npu_enc_block_forward (NpuEncBlocks * b, const NpuEncLayer * l,
    NpuTask * task, float *x, gsize n);

/* Row kernels, spread over @task's threads (NULL: the calling thread).
 * Each adds to @bytes what it moves: its weights once, in the layout they
 * are read in (a vector in F32, a matrix in MXFP4 or F32), and its F32
 * rows in and out (activations). */
G_GNUC_INTERNAL
void npu_enc_bias_act (NpuTask * task, float *y, gsize rows, gsize cols,
    const float *b, NpuEncAct act, NpuBytes * bytes);
/* ggml_norm, then * w + b; dst may be src */
G_GNUC_INTERNAL
void npu_enc_layernorm (NpuTask * task, float *dst, const float *src,
    gsize rows, gsize cols, gfloat eps, const float *w, const float *b,
    NpuBytes * bytes);
/* y[c][r] = sum_j w[r][j] x[c][j], F32 weights */
G_GNUC_INTERNAL
void npu_enc_gemm_f32 (NpuTask * task, const float *w, gsize rows, gsize k,
    const float *x, gsize n, float *y, NpuBytes * bytes);
G_GNUC_INTERNAL
void npu_enc_matmul (NpuTask * task, const NpuWeightMatrix * m, const float *x,
    gsize n, float *y, NpuMatmulPrecision precision, NpuBytes * bytes);
/* @bytes += a product's: @weights, @n rows of @k in and of @rows out */
/* The last kernel's output is the tokens another element reads: its @n
 * bytes, counted as activations written, become %NPU_BYTES_TOKENS */
G_GNUC_INTERNAL
void npu_enc_count_as_tokens (NpuBytes * bytes, guint64 n);
G_GNUC_INTERNAL
void npu_enc_count_product (NpuBytes * bytes, guint64 weights, gsize n,
    gsize k, gsize rows);
G_GNUC_INTERNAL
void npu_enc_run_parallel (NpuTask * task, gsize n, gsize grain,
    NpuParallelFunc func, gpointer data);

/* ------------------------------------------------------------------------
 * The same blocks recorded as device operations (npuencoder-ops.c)
 */

/* The weights an encoder's program reads, each host array imported once
 * as a read-only device buffer (in place where the device can import
 * it), and its scratch as device buffers */
typedef struct
{
  NpuDevice *device;
  GHashTable *weights;          /* host address -> NpuBuffer */
  NpuBuffer *h, *q, *k, *v, *att, *ffb;
  gsize bytes_copied;           /* of the weights that were not imported */
  /* what one submit of the program moves, counted as the operations are
   * recorded (the recording functions below and npu_enc_dev_count()) */
  NpuBytes bytes;
} NpuEncDevBlocks;

/* Adds to what one submit moves: @weights bytes of weights read, @read
 * and @written bytes of activations; returns TRUE (for chains of
 * recording calls) */
G_GNUC_INTERNAL
gboolean npu_enc_dev_count (NpuEncDevBlocks * d, guint64 weights,
    guint64 read, guint64 written);

/* A device buffer holding the @n int32 @values (the index tables of
 * npu_ops_gather_rows()) */
G_GNUC_INTERNAL
NpuBuffer *npu_enc_dev_index (NpuDevice * device, const gint32 * values,
    gsize n, GError ** error);
/* The device's buffer over @size bytes at @data, made at the first call */
G_GNUC_INTERNAL
NpuBuffer *npu_enc_dev_weight (NpuEncDevBlocks * d, gconstpointer data,
    gsize size, GError ** error);
G_GNUC_INTERNAL
gboolean npu_enc_dev_blocks_init (NpuEncDevBlocks * d, NpuDevice * device,
    const NpuEncBlocks * b, GError ** error);
G_GNUC_INTERNAL
void npu_enc_dev_blocks_clear (NpuEncDevBlocks * d);
/* Records y (n rows) = m x (n rows): x and y at byte offsets of their
 * buffers */
G_GNUC_INTERNAL
gboolean npu_enc_record_matmul (NpuEncDevBlocks * d, NpuOps * ops,
    const NpuWeightMatrix * m, NpuBuffer * x, gsize x_offset, gsize n,
    NpuBuffer * y, gsize y_offset, GError ** error);
/* Records y += bias, then the activation, on rows x cols; @b may be NULL */
G_GNUC_INTERNAL
gboolean npu_enc_record_bias_act (NpuEncDevBlocks * d, NpuOps * ops,
    NpuBuffer * y, gsize y_offset, gsize rows, gsize cols, const float *b,
    NpuEncAct act, GError ** error);
/* Records npu_enc_layernorm (dst, src) */
G_GNUC_INTERNAL
gboolean npu_enc_record_layernorm (NpuEncDevBlocks * d, NpuOps * ops,
    NpuBuffer * dst, gsize d_offset, NpuBuffer * src, gsize s_offset,
    gsize rows, gsize cols, gfloat eps, const float *w, const float *b,
    GError ** error);
/* Records npu_enc_block_forward (b, l, x) for x (n rows of dim) at
 * @x_offset of @x */
G_GNUC_INTERNAL
gboolean npu_enc_record_block (NpuEncDevBlocks * d, NpuOps * ops,
    const NpuEncBlocks * b, const NpuEncLayer * l, NpuBuffer * x,
    gsize x_offset, gsize n, GError ** error);

G_END_DECLS

#endif /* __NPU_ENCODER_H__ */
