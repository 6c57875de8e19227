/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the pieces the transformer encoders share (npuencoder.h)
 *
 * Moved out of npuvit.c when the audio encoder came, unchanged but for the
 * parameters that were the NpuVit's.
 */
#include "npuencoder.h"
#include "core/formats/npuquants.h"
#include "core/cpu/npuattention.h"
#include "core/formats/npumxfp4.h"

#include <math.h>
#include <string.h>

/* Queries per attention work item: enough work per item to amortise the
 * dispatch, small enough to spread a few heads over many threads. */
#define ATTN_QUERY_BLOCK 16
/* Queries that go through the keys and values together
 * (npu_attention_rows() reads each row once per four) */
#define ATTN_NQ 4

/* npu_bytes_read() / _write() for the kernels below, whose @bytes may be
 * NULL (the CPU device's operations, npuops-cpu.c, count nothing) */
static inline void
count_read (NpuBytes * bytes, NpuBytesKind kind, guint64 n)
{
  if (bytes)
    npu_bytes_read (bytes, kind, n);
}

static inline void
count_write (NpuBytes * bytes, NpuBytesKind kind, guint64 n)
{
  if (bytes)
    npu_bytes_write (bytes, kind, n);
}

/* ------------------------------------------------------------------------
 * Loading
 */
static gchar *
format_ne (const guint64 * ne)
{
  guint n = NPU_TENSOR_MAX_DIMS;

  while (n > 1 && ne[n - 1] == 1)
    n--;
  switch (n) {
    case 1:
      return g_strdup_printf ("[%" G_GUINT64_FORMAT "]", ne[0]);
    case 2:
      return g_strdup_printf ("[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
          "]", ne[0], ne[1]);
    case 3:
      return g_strdup_printf ("[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
          ", %" G_GUINT64_FORMAT "]", ne[0], ne[1], ne[2]);
    default:
      return g_strdup_printf ("[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
          ", %" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "]", ne[0], ne[1],
          ne[2], ne[3]);
  }
}

/* Finds @tname and checks its shape against @e0..@e3 (1 for unused
 * dimensions).  Returns FALSE with @error unset if it is absent and not
 * @required. */
gboolean
npu_enc_get_tensor (NpuEncLoader * ld, const gchar * tname, gboolean required,
    guint64 e0, guint64 e1, guint64 e2, guint64 e3, NpuTensorView * view,
    GError ** error)
{
  guint64 want[NPU_TENSOR_MAX_DIMS] = { e0, e1, e2, e3 };
  guint i;

  memset (view, 0, sizeof (*view));
  if (!ld->lookup (tname, view, ld->user_data)) {
    if (required)
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
          "%s: tensor %s is missing", ld->name, tname);
    return FALSE;
  }
  for (i = view->n_dims; i < NPU_TENSOR_MAX_DIMS; i++)
    view->ne[i] = 1;
  for (i = 0; i < NPU_TENSOR_MAX_DIMS; i++) {
    if (view->ne[i] != want[i]) {
      gchar *has = format_ne (view->ne), *exp = format_ne (want);

      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: tensor %s has ne %s, expected %s", ld->name, tname, has, exp);
      g_free (has);
      g_free (exp);
      return FALSE;
    }
  }
  if (!view->data) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: tensor %s has no data", ld->name, tname);
    return FALSE;
  }
  return TRUE;
}

gboolean
npu_enc_unsupported_type (NpuEncLoader * ld, const gchar * tname, guint32 type,
    const gchar * allowed, GError ** error)
{
  const gchar *tn = npu_ggml_type_name (type);

  g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
      "%s: tensor %s has type %s, not one of %s", ld->name, tname,
      tn ? tn : "(unknown)", allowed);
  return FALSE;
}

/* An F32 copy of a view of @n elements (F32, F16 or BF16) */
float *
npu_enc_to_f32 (NpuEncLoader * ld, const gchar * tname,
    const NpuTensorView * view, gsize n, GError ** error)
{
  float *dst;

  if (view->type != NPU_GGML_TYPE_F32 && view->type != NPU_GGML_TYPE_F16
      && view->type != NPU_GGML_TYPE_BF16) {
    npu_enc_unsupported_type (ld, tname, view->type, "f32, f16, bf16", error);
    return NULL;
  }
  dst = g_new (float, n);
  ld->owned_bytes += n * sizeof (float);
  /* the element types have blocks of one: never refused */
  npu_quants_dequantize_row (view->type, view->data, dst, n);
  return dst;
}

/* 1-D tensor of @n elements as F32; NULL (error unset) if absent and not
 * @required */
float *
npu_enc_get_vector (NpuEncLoader * ld, const gchar * tname, gboolean required,
    guint64 n, GError ** error)
{
  NpuTensorView view;

  if (!npu_enc_get_tensor (ld, tname, required, n, 1, 1, 1, &view, error))
    return NULL;
  return npu_enc_to_f32 (ld, tname, &view, n, error);
}

/* Turns a view of a rows x k matrix (ne = [k, rows], or k spread over the
 * inner dimensions) into the encoder's matrix, read in place in the type
 * the file holds (npuweightmatrix.h).  Nothing is converted. */
gboolean
npu_enc_view_to_matrix (NpuEncLoader * ld, const gchar * tname,
    const NpuTensorView * view, guint64 rows, guint64 k,
    NpuWeightMatrix * mat, GError ** error)
{
  guint block = 1;

  memset (mat, 0, sizeof (*mat));
  if (!npu_quants_supported (view->type))
    return npu_enc_unsupported_type (ld, tname, view->type,
        NPU_ENC_MATRIX_TYPES, error);
  if (!npu_weight_matrix_init (mat, view->type, view->data, rows, k, FALSE)) {
    npu_ggml_type_info (view->type, &block, NULL);
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: tensor %s: rows of %" G_GUINT64_FORMAT " elements are not "
        "whole %s blocks of %u", ld->name, tname, k,
        npu_ggml_type_name (view->type), block);
    return FALSE;
  }
  ld->borrowed_bytes += rows * mat->row_bytes;
  return TRUE;
}

/* A linear layer's weight, ggml ne = [k, rows] */
gboolean
npu_enc_get_matrix (NpuEncLoader * ld, const gchar * tname, guint64 k,
    guint64 rows, NpuWeightMatrix * mat, GError ** error)
{
  NpuTensorView view;

  return npu_enc_get_tensor (ld, tname, TRUE, k, rows, 1, 1, &view, error)
      && npu_enc_view_to_matrix (ld, tname, &view, rows, k, mat, error);
}

gboolean
npu_enc_get_u32_key (NpuEncLoader * ld, const gchar * key, guint32 * value,
    GError ** error)
{
  GError *err = NULL;

  if (npu_gguf_get_u32 (ld->gguf, key, value, &err))
    return TRUE;
  g_set_error (error, NPU_VIT_ERROR, err->code == NPU_GGUF_ERROR_NOT_FOUND ?
      NPU_VIT_ERROR_MISSING : NPU_VIT_ERROR_SHAPE, "%s: %s", ld->name,
      err->message);
  g_error_free (err);
  return FALSE;
}

/* A weight/bias pair of norms; both absent is fine when !@required */
gboolean
npu_enc_get_norm (NpuEncLoader * ld, const gchar * prefix, gboolean required,
    guint dim, float **w, float **b, GError ** error)
{
  gchar *wn = g_strconcat (prefix, ".weight", NULL);
  gchar *bn = g_strconcat (prefix, ".bias", NULL);
  gboolean ok = TRUE;

  *w = npu_enc_get_vector (ld, wn, required, dim, error);
  if (!*w)
    ok = !(error && *error);
  if (ok && *w) {
    *b = npu_enc_get_vector (ld, bn, TRUE, dim, error);
    ok = *b != NULL;
  }
  g_free (wn);
  g_free (bn);
  return ok;
}

gboolean
npu_enc_load_layer (NpuEncLoader * ld, const gchar * prefix, guint il,
    guint dim, guint ff, gboolean k_bias_required, gboolean legacy_ffn_swap,
    NpuEncLayer * l, GError ** error)
{
  gchar *p = g_strdup_printf ("%s.blk.%u", prefix, il);
  gchar *n[12];
  gboolean ok, swapped;
  guint i;

  n[0] = g_strconcat (p, ".ln1", NULL);
  n[1] = g_strconcat (p, ".ln2", NULL);
  n[2] = g_strconcat (p, ".attn_q.weight", NULL);
  n[3] = g_strconcat (p, ".attn_q.bias", NULL);
  n[4] = g_strconcat (p, ".attn_k.weight", NULL);
  n[5] = g_strconcat (p, ".attn_k.bias", NULL);
  n[6] = g_strconcat (p, ".attn_v.weight", NULL);
  n[7] = g_strconcat (p, ".attn_v.bias", NULL);
  n[8] = g_strconcat (p, ".attn_out.weight", NULL);
  n[9] = g_strconcat (p, ".attn_out.bias", NULL);
  n[10] = g_strconcat (p, ".ffn_up.weight", NULL);
  n[11] = g_strconcat (p, ".ffn_down.weight", NULL);
  /* llama.cpp's legacy CLIP/LLaVA converter names fc1 (dim -> ff)
   * "ffn_down" and fc2 "ffn_up"; clip.cpp swaps them back when ffn_down's
   * ne[0] is the vision dim, and so do we (same rule, so the two agree
   * even when ff = dim).  Only for the projector types clip.cpp does it
   * for (@legacy_ffn_swap). */
  {
    NpuTensorView view;

    swapped = legacy_ffn_swap && ld->lookup (n[11], &view, ld->user_data)
        && view.ne[0] == dim;
    if (swapped) {
      gchar *tmp = n[10];

      n[10] = n[11];
      n[11] = tmp;
    }
  }

  ok = npu_enc_get_norm (ld, n[0], TRUE, dim, &l->ln1_w, &l->ln1_b, error)
      && npu_enc_get_norm (ld, n[1], TRUE, dim, &l->ln2_w, &l->ln2_b, error)
      && npu_enc_get_matrix (ld, n[2], dim, dim, &l->q, error)
      && (l->q_b = npu_enc_get_vector (ld, n[3], TRUE, dim, error))
      && npu_enc_get_matrix (ld, n[4], dim, dim, &l->k, error)
      && ((l->k_b = npu_enc_get_vector (ld, n[5], k_bias_required, dim,
              error)) || !(error && *error))
      && npu_enc_get_matrix (ld, n[6], dim, dim, &l->v, error)
      && (l->v_b = npu_enc_get_vector (ld, n[7], TRUE, dim, error))
      && npu_enc_get_matrix (ld, n[8], dim, dim, &l->o, error)
      && (l->o_b = npu_enc_get_vector (ld, n[9], TRUE, dim, error))
      && npu_enc_get_matrix (ld, n[10], dim, ff, &l->up, error)
      && npu_enc_get_matrix (ld, n[11], ff, dim, &l->down, error);
  if (ok) {
    gchar *ub = g_strconcat (p, swapped ? ".ffn_down.bias" : ".ffn_up.bias",
        NULL);
    gchar *db = g_strconcat (p, swapped ? ".ffn_up.bias" : ".ffn_down.bias",
        NULL);

    ok = (l->up_b = npu_enc_get_vector (ld, ub, TRUE, ff, error))
        && (l->down_b = npu_enc_get_vector (ld, db, TRUE, dim, error));
    g_free (ub);
    g_free (db);
  }
  /* A gated FFN (ffn_gate) is another graph: refuse it rather than
   * silently ignore a tensor. */
  if (ok) {
    NpuTensorView view;
    gchar *gn = g_strconcat (p, ".ffn_gate.weight", NULL);

    if (ld->lookup (gn, &view, ld->user_data)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
          "%s: tensor %s: gated feed-forward blocks are not supported",
          ld->name, gn);
      ok = FALSE;
    }
    g_free (gn);
  }
  for (i = 0; i < G_N_ELEMENTS (n); i++)
    g_free (n[i]);
  g_free (p);
  return ok;
}

typedef struct
{
  NpuEncBlocks *blocks;
  gsize n;                      /* attention: positions */
  gfloat eps;
  /* row operations */
  float *dst;
  const float *src;
  const float *w, *b;
  gsize cols;
  NpuEncAct act;
  /* F32 product */
  const float *x;
  gsize k, rows;
} Job;

void
npu_enc_run_parallel (NpuTask * task, gsize n, gsize grain,
    NpuParallelFunc func, gpointer data)
{
  if (task)
    npu_task_parallel_for (task, n, grain, func, data);
  else if (n > 0)
    func (0, n, 0, data);
}

/* Rows per slice for cheap element-wise work: ~16k elements */
static gsize
row_grain (gsize cols)
{
  return MAX (1, 16384 / MAX (cols, 1));
}

static inline float
activate (NpuEncAct act, float x)
{
  switch (act) {
    case NPU_ENC_ACT_GELU:
      /* ggml_gelu: the tanh approximation, with ggml's constants */
      return 0.5f * x * (1.0f + tanhf (0.79788456080286535587989211986876f *
              x * (1.0f + 0.044715f * x * x)));
    case NPU_ENC_ACT_GELU_QUICK:
      return x / (1.0f + expf (-1.702f * x));
    case NPU_ENC_ACT_SILU:
      return x / (1.0f + expf (-x));
    case NPU_ENC_ACT_GELU_ERF:
      /* ggml_gelu_erf */
      return 0.5f * x * (1.0f + erff (x * 0.70710678118654752440f));
    default:
      return x;
  }
}

/* dst[r] = act (dst[r] + b) */
static void
bias_act_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c;

  for (r = start; r < end; r++) {
    float *y = job->dst + r * job->cols;

    if (job->b)
      for (c = 0; c < job->cols; c++)
        y[c] += job->b[c];
    if (job->act != NPU_ENC_ACT_NONE)
      for (c = 0; c < job->cols; c++)
        y[c] = activate (job->act, y[c]);
  }
}

void
npu_enc_bias_act (NpuTask * task, float *y, gsize rows, gsize cols,
    const float *b, NpuEncAct act, NpuBytes * bytes)
{
  Job job = { 0, };

  if (b)
    count_read (bytes, NPU_BYTES_WEIGHTS, (guint64) cols * 4);
  count_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 4);
  count_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 4);

  job.dst = y;
  job.cols = cols;
  job.b = b;
  job.act = act;
  npu_enc_run_parallel (task, rows, row_grain (cols), bias_act_slice, &job);
}

/* dst[r] += src[r] + b: the residual stream */
static void
residual_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c;

  for (r = start; r < end; r++) {
    float *x = job->dst + r * job->cols;
    const float *y = job->src + r * job->cols;

    for (c = 0; c < job->cols; c++)
      x[c] += y[c] + job->b[c];
  }
}

static void
residual (NpuTask * task, float *x, const float *y, const float *b,
    gsize rows, gsize cols, NpuBytes * bytes)
{
  Job job = { 0, };

  count_read (bytes, NPU_BYTES_WEIGHTS, (guint64) cols * 4);
  count_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 8);
  count_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 4);

  job.dst = x;
  job.src = y;
  job.b = b;
  job.cols = cols;
  npu_enc_run_parallel (task, rows, row_grain (cols), residual_slice, &job);
}

/* ggml_norm then weight and bias: (x - mean) / sqrt (var + eps) * w + b,
 * the biased variance; sums in double as ggml does.  dst may be src. */
static void
layernorm_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c, n = job->cols;
  float eps = job->eps;

  for (r = start; r < end; r++) {
    const float *x = job->src + r * n;
    float *y = job->dst + r * n;
    double sum = 0.0, sum2 = 0.0;
    float mean, scale;

    for (c = 0; c < n; c++)
      sum += x[c];
    mean = (float) (sum / n);
    for (c = 0; c < n; c++) {
      float d = x[c] - mean;

      sum2 += (double) d *d;
    }
    scale = (float) (1.0 / sqrt (sum2 / n + eps));
    for (c = 0; c < n; c++)
      y[c] = (x[c] - mean) * scale * job->w[c] + job->b[c];
  }
}

void
npu_enc_layernorm (NpuTask * task, float *dst, const float *src, gsize rows,
    gsize cols, gfloat eps, const float *w, const float *b, NpuBytes * bytes)
{
  Job job = { 0, };

  count_read (bytes, NPU_BYTES_WEIGHTS, (guint64) cols * 8);
  count_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 4);
  count_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 4);

  job.eps = eps;
  job.dst = dst;
  job.src = src;
  job.w = w;
  job.b = b;
  job.cols = cols;
  npu_enc_run_parallel (task, rows, row_grain (cols), layernorm_slice, &job);
}

/* Plain F32 product for the patch embedding when MXFP4 cannot hold it:
 * y[c][r] = sum_j w[r][j] x[c][j].  Four patches at a time share each
 * weight row load; eight partial sums per patch keep the loop free of a
 * serial dependency so the compiler can vectorise it. */
#define GEMM_COLS 4

static void
gemm_f32_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize k = job->k, rows = job->rows, c0, r, j, i, l;

  for (c0 = start; c0 < end; c0 += GEMM_COLS) {
    gsize nc = MIN (GEMM_COLS, end - c0);

    for (r = 0; r < rows; r++) {
      const float *w = job->w + r * k;
      float acc[GEMM_COLS][8] = { {0,}, };

      for (i = 0; i < nc; i++) {
        const float *x = job->x + (c0 + i) * k;

        for (j = 0; j + 8 <= k; j += 8)
          for (l = 0; l < 8; l++)
            acc[i][l] += w[j + l] * x[j + l];
        for (; j < k; j++)
          acc[i][0] += w[j] * x[j];
      }
      for (i = 0; i < nc; i++) {
        float s = ((acc[i][0] + acc[i][1]) + (acc[i][2] + acc[i][3])) +
            ((acc[i][4] + acc[i][5]) + (acc[i][6] + acc[i][7]));

        job->dst[(c0 + i) * rows + r] = s;
      }
    }
  }
}

void
npu_enc_count_as_tokens (NpuBytes * bytes, guint64 n)
{
  g_return_if_fail (bytes->written[NPU_BYTES_ACTIVATIONS] >= n);

  bytes->written[NPU_BYTES_ACTIVATIONS] -= n;
  bytes->written[NPU_BYTES_TOKENS] += n;
}

void
npu_enc_count_product (NpuBytes * bytes, guint64 weights, gsize n, gsize k,
    gsize rows)
{
  count_read (bytes, NPU_BYTES_WEIGHTS, weights);
  count_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * k * 4);
  count_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * rows * 4);
}

void
npu_enc_gemm_f32 (NpuTask * task, const float *w, gsize rows, gsize k,
    const float *x, gsize n, float *y, NpuBytes * bytes)
{
  Job job = { 0, };

  npu_enc_count_product (bytes, (guint64) rows * k * 4, n, k, rows);

  job.w = w;
  job.rows = rows;
  job.k = k;
  job.x = x;
  job.dst = y;
  /* slices are whole groups of GEMM_COLS patches */
  npu_enc_run_parallel (task, n, GEMM_COLS * 2, gemm_f32_slice, &job);
}

/* Multi-head attention over all tokens, no mask.  Work items are
 * (head, block of ATTN_QUERY_BLOCK queries), so a few heads still spread
 * over many threads. */
static void
attention_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  NpuEncBlocks *vit = job->blocks;
  gsize n = job->n, hd = vit->head_dim, dim = vit->dim;
  gsize n_qblocks = (n + ATTN_QUERY_BLOCK - 1) / ATTN_QUERY_BLOCK;
  float scale = 1.0f / sqrtf ((float) hd);
  float *s = vit->scores + (gsize) worker * ATTN_NQ * n;
  gsize item, i;

  for (item = start; item < end; item++) {
    gsize head = item / n_qblocks, qb = item % n_qblocks;
    gsize i0 = qb * ATTN_QUERY_BLOCK, i1 = MIN (i0 + ATTN_QUERY_BLOCK, n);
    gsize off = head * hd;

    for (i = i0; i < i1; i += ATTN_NQ) {
      NpuAttnSpan all = { vit->q + i * dim + off, vit->k + off, vit->v + off,
        dim, (guint) n
      };

      /* consecutive tokens' queries of this head are dim floats apart */
      npu_attention_rows (&all, 1, hd, MIN (ATTN_NQ, i1 - i), dim, scale, s,
          n, vit->att + i * dim + off, dim);
    }
  }
}

static void
attention (NpuEncBlocks * vit, NpuTask * task, gsize n)
{
  Job job = { 0, };
  gsize n_qblocks = (n + ATTN_QUERY_BLOCK - 1) / ATTN_QUERY_BLOCK;

  /* q, k and v once each (a block of queries rereads k and v, from
   * cache), the heads' outputs once */
  count_read (&vit->bytes, NPU_BYTES_ACTIVATIONS,
      (guint64) 3 * n * vit->dim * 4);
  count_write (&vit->bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * vit->dim * 4);

  job.blocks = vit;
  job.n = n;
  npu_enc_run_parallel (task, vit->n_heads * n_qblocks, 1, attention_slice,
      &job);
}

void
npu_enc_matmul (NpuTask * task, const NpuWeightMatrix * m, const float *x,
    gsize n, float *y, NpuMatmulPrecision precision, NpuBytes * bytes)
{
  /* the matrix as it is read: its stored bytes */
  npu_enc_count_product (bytes, npu_weight_matrix_get_size (m), n, m->k,
      m->rows);
  npu_weight_matrix_mul (task, m, x, n, y, precision);
}


void
npu_enc_loader_init (NpuEncLoader * ld, const NpuGguf * gguf,
    NpuTensorLookup lookup, gpointer user_data, const gchar * name)
{
  memset (ld, 0, sizeof (*ld));
  ld->name = name;
  ld->gguf = gguf;
  ld->lookup = lookup ? lookup : npu_gguf_lookup_view;
  ld->user_data = lookup ? user_data : (gpointer) gguf;
}

void
npu_enc_layer_clear (NpuEncLayer * l)
{
  g_free (l->ln1_w);
  g_free (l->ln1_b);
  g_free (l->ln2_w);
  g_free (l->ln2_b);
  npu_weight_matrix_clear (&l->q);
  npu_weight_matrix_clear (&l->k);
  npu_weight_matrix_clear (&l->v);
  npu_weight_matrix_clear (&l->o);
  npu_weight_matrix_clear (&l->up);
  npu_weight_matrix_clear (&l->down);
  g_free (l->q_b);
  g_free (l->k_b);
  g_free (l->v_b);
  g_free (l->o_b);
  g_free (l->up_b);
  g_free (l->down_b);
  memset (l, 0, sizeof (*l));
}

/* ------------------------------------------------------------------------
 * Blocks
 */
gboolean
npu_enc_blocks_alloc (NpuEncBlocks * b, guint n_max)
{
  gsize n = n_max, d = b->dim;

  b->n_max = n_max;
  b->h = g_try_new (float, n * d);
  b->q = g_try_new (float, n * d);
  b->k = g_try_new (float, n * d);
  b->v = g_try_new (float, n * d);
  b->att = g_try_new (float, n * d);
  b->ffb = g_try_new (float, n * b->ff);
  /* ATTN_NQ score rows per thread the machine has; a task on more
   * threads grows them once (npu_enc_blocks_fit_task) */
  b->n_score_rows = npu_cpu_count ();
  b->scores = g_try_new (float, (gsize) b->n_score_rows * ATTN_NQ * n);
  b->scratch_bytes = sizeof (float) * (5 * n * d + n * b->ff +
      (gsize) b->n_score_rows * ATTN_NQ * n);
  return b->h && b->q && b->k && b->v && b->att && b->ffb && b->scores;
}

void
npu_enc_blocks_clear (NpuEncBlocks * b)
{
  g_free (b->h);
  g_free (b->q);
  g_free (b->k);
  g_free (b->v);
  g_free (b->att);
  g_free (b->ffb);
  g_free (b->scores);
  b->h = b->q = b->k = b->v = b->att = b->ffb = b->scores = NULL;
}

void
npu_enc_blocks_fit_task (NpuEncBlocks * b, NpuTask * task)
{
  guint threads = task ? npu_task_get_n_threads (task) : 1;

  if (threads > b->n_score_rows) {
    g_free (b->scores);
    b->scores = g_new (float, (gsize) threads * ATTN_NQ * b->n_max);
    b->scratch_bytes += (gsize) (threads - b->n_score_rows) * ATTN_NQ *
        b->n_max * sizeof (float);
    b->n_score_rows = threads;
  }
}

void
npu_enc_block_forward (NpuEncBlocks * b, const NpuEncLayer * l,
    NpuTask * task, float *x, gsize n)
{
  gsize dim = b->dim;

  g_return_if_fail (n <= b->n_max);

  /* x += attn_out (MHA (LN1 (x))) */
  npu_enc_layernorm (task, b->h, x, n, dim, b->eps, l->ln1_w, l->ln1_b,
      &b->bytes);
  npu_enc_matmul (task, &l->q, b->h, n, b->q, b->precision, &b->bytes);
  npu_enc_matmul (task, &l->k, b->h, n, b->k, b->precision, &b->bytes);
  npu_enc_matmul (task, &l->v, b->h, n, b->v, b->precision, &b->bytes);
  npu_enc_bias_act (task, b->q, n, dim, l->q_b, NPU_ENC_ACT_NONE, &b->bytes);
  if (l->k_b)
    npu_enc_bias_act (task, b->k, n, dim, l->k_b, NPU_ENC_ACT_NONE, &b->bytes);
  npu_enc_bias_act (task, b->v, n, dim, l->v_b, NPU_ENC_ACT_NONE, &b->bytes);
  attention (b, task, n);
  npu_enc_matmul (task, &l->o, b->att, n, b->h, b->precision, &b->bytes);
  residual (task, x, b->h, l->o_b, n, dim, &b->bytes);

  /* x += ffn_down (act (ffn_up (LN2 (x)))) */
  npu_enc_layernorm (task, b->h, x, n, dim, b->eps, l->ln2_w, l->ln2_b,
      &b->bytes);
  npu_enc_matmul (task, &l->up, b->h, n, b->ffb, b->precision, &b->bytes);
  npu_enc_bias_act (task, b->ffb, n, b->ff, l->up_b, b->act, &b->bytes);
  npu_enc_matmul (task, &l->down, b->ffb, n, b->h, b->precision, &b->bytes);
  residual (task, x, b->h, l->down_b, n, dim, &b->bytes);
}
