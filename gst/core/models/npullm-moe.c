/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the mixture-of-experts feed-forward of gpt-oss (npullm-private.h
 * says what it computes) */
#include "npullm-private.h"
#include "core/cpu/npumatmul.h"
#include "core/formats/npumxfp4.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Loading
 */

static const gchar *
type_name (guint32 type)
{
  const gchar *name = npu_ggml_type_name (type);

  return name ? name : "unknown";
}

/* Tensor @name with exactly the shape [ne0, ne1, ne2] (ne2 1: 2-D) */
static gboolean
find (NpuTensorLookup lookup, gpointer user_data, const gchar * name,
    guint64 ne0, guint64 ne1, guint64 ne2, NpuTensorView * v, GError ** error)
{
  memset (v, 0, sizeof (*v));
  if (!lookup (name, v, user_data) || !v->data) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_MISSING,
        "tensor '%s' not found", name);
    return FALSE;
  }
  if (v->ne[0] != ne0 || v->ne[1] != ne1 || v->ne[2] != ne2 || v->ne[3] != 1) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "tensor '%s' has shape [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
        ", %" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "], expected [%"
        G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
        "] (embedding_length, expert_feed_forward_length and expert_count)",
        name, v->ne[0], v->ne[1], v->ne[2], v->ne[3], ne0, ne1, ne2);
    return FALSE;
  }
  return TRUE;
}

/* F32 biases [ne0, ne1] */
static gboolean
load_bias (NpuTensorLookup lookup, gpointer user_data, const gchar * name,
    guint64 ne0, guint64 ne1, const float **out, GError ** error)
{
  NpuTensorView v;

  if (!find (lookup, user_data, name, ne0, ne1, 1, &v, error))
    return FALSE;
  if (v.type != NPU_GGML_TYPE_F32) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "tensor '%s' has type %s, expected f32", name, type_name (v.type));
    return FALSE;
  }
  if (!npu_llm_check_view_size (name, &v, ne0 * ne1 * sizeof (float), error))
    return FALSE;
  *out = v.data;
  return TRUE;
}

/* The router's [n_embd, n_expert] matrix: F32 in place, F16 and BF16
 * widened once (n_expert x n_embd floats, 368 KiB a layer at 20 B) */
static gboolean
load_router (NpuLlmMoe * moe, NpuTensorLookup lookup, gpointer user_data,
    const gchar * name, GError ** error)
{
  NpuTensorView v;
  gsize n = (gsize) moe->n_embd * moe->n_expert, i;

  memset (&v, 0, sizeof (v));
  if (lookup (name, &v, user_data) && v.data && v.ne[0] == moe->n_embd &&
      v.ne[1] != moe->n_expert && v.ne[2] == 1 && v.ne[3] == 1) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "tensor '%s' routes to %" G_GUINT64_FORMAT " experts, but "
        "expert_count is %u", name, v.ne[1], moe->n_expert);
    return FALSE;
  }
  if (!find (lookup, user_data, name, moe->n_embd, moe->n_expert, 1, &v, error))
    return FALSE;
  if (v.type == NPU_GGML_TYPE_F32) {
    if (!npu_llm_check_view_size (name, &v, n * sizeof (float), error))
      return FALSE;
    moe->router = v.data;
    return TRUE;
  }
  if (v.type != NPU_GGML_TYPE_F16 && v.type != NPU_GGML_TYPE_BF16) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "tensor '%s' has type %s (a router must be f32, f16 or bf16)", name,
        type_name (v.type));
    return FALSE;
  }
  if (!npu_llm_check_view_size (name, &v, n * 2, error))
    return FALSE;
  moe->router_owned = g_new (float, n);
  for (i = 0; i < n; i++) {
    guint16 h;

    memcpy (&h, (const guint8 *) v.data + 2 * i, 2);
    moe->router_owned[i] = v.type == NPU_GGML_TYPE_F16 ?
        npu_f16_to_f32 (h) : npu_bf16_to_f32 (h);
  }
  moe->router = moe->router_owned;
  return TRUE;
}

/* One [k, rows, n_expert] MXFP4 tensor as n_expert views of rows x k */
static gboolean
load_experts (NpuLlmMoe * moe, NpuTensorLookup lookup, gpointer user_data,
    const gchar * name, guint64 k, guint64 rows, guint which,
    NpuMxfp4Matrix ** out, GError ** error)
{
  NpuTensorView v;
  gsize per = (gsize) rows * (k / NPU_MXFP4_BLOCK_SIZE);
  guint e;

  if (!find (lookup, user_data, name, k, rows, moe->n_expert, &v, error))
    return FALSE;
  if (v.type != NPU_GGML_TYPE_MXFP4) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "tensor '%s' has type %s (expert tensors must be mxfp4: they are "
        "read in place)", name, type_name (v.type));
    return FALSE;
  }
  if (k % NPU_MXFP4_BLOCK_SIZE != 0) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "tensor '%s': row length %" G_GUINT64_FORMAT " is not a multiple of "
        "32", name, k);
    return FALSE;
  }
  if (!npu_llm_check_view_size (name, &v,
          per * moe->n_expert * sizeof (NpuBlockMxfp4), error))
    return FALSE;
  moe->prepare[which] = v.prepare;
  moe->prepare_data[which] = v.prepare_data;
  *out = g_new0 (NpuMxfp4Matrix, moe->n_expert);
  for (e = 0; e < moe->n_expert; e++)
    npu_mxfp4_matrix_init_view (&(*out)[e],
        (const NpuBlockMxfp4 *) v.data + e * per, rows, k);
  return TRUE;
}

gboolean
npu_llm_moe_load (NpuLlmMoe * moe, const NpuLlmHParams * hp,
    NpuTensorLookup lookup, gpointer user_data, guint il,
    guint64 * expert_bytes, GError ** error)
{
  guint E = hp->n_expert, D = hp->n_embd, F = hp->n_ff_exp;
  gchar name[64];
  gboolean ok;

  memset (moe, 0, sizeof (*moe));
  moe->n_expert = E;
  moe->n_used = hp->n_expert_used;
  moe->n_embd = D;
  moe->n_ff = F;
#define NAME(s) (g_snprintf (name, sizeof (name), "blk.%u." s, il), name)
  ok = load_router (moe, lookup, user_data, NAME ("ffn_gate_inp.weight"), error)
      && load_bias (lookup, user_data, NAME ("ffn_gate_inp.bias"), E, 1,
      &moe->router_b, error)
      && load_experts (moe, lookup, user_data, NAME ("ffn_gate_exps.weight"),
      D, F, 0, &moe->gate, error)
      && load_experts (moe, lookup, user_data, NAME ("ffn_up_exps.weight"),
      D, F, 1, &moe->up, error)
      && load_experts (moe, lookup, user_data, NAME ("ffn_down_exps.weight"),
      F, D, 2, &moe->down, error)
      && load_bias (lookup, user_data, NAME ("ffn_gate_exps.bias"), F, E,
      &moe->gate_b, error)
      && load_bias (lookup, user_data, NAME ("ffn_up_exps.bias"), F, E,
      &moe->up_b, error)
      && load_bias (lookup, user_data, NAME ("ffn_down_exps.bias"), D, E,
      &moe->down_b, error);
#undef NAME
  if (ok && expert_bytes)
    *expert_bytes = npu_mxfp4_matrix_get_size (&moe->gate[0]) +
        npu_mxfp4_matrix_get_size (&moe->up[0]) +
        npu_mxfp4_matrix_get_size (&moe->down[0]);
  return ok;
}

void
npu_llm_moe_clear (NpuLlmMoe * moe)
{
  /* the views own nothing; only their arrays are ours */
  g_free (moe->gate);
  g_free (moe->up);
  g_free (moe->down);
  g_free (moe->router_owned);
  memset (moe, 0, sizeof (*moe));
}

/* ------------------------------------------------------------------------
 * Scratch
 */

gsize
npu_llm_moe_scratch_init (NpuLlmMoeScratch * s, const NpuLlmHParams * hp,
    gsize n_batch)
{
  gsize nb = n_batch, used = (gsize) nb * hp->n_expert_used;

  s->n_batch = nb;
  s->logits = g_new0 (float, nb * hp->n_expert);
  s->sel = g_new0 (guint, used);
  s->w = g_new0 (float, used);
  s->rows = g_new0 (guint, nb);
  s->wrow = g_new0 (float, nb);
  s->xe = g_new0 (float, nb * hp->n_embd);
  s->ye = g_new0 (float, nb * hp->n_embd);
  s->gate = g_new0 (float, nb * hp->n_ff_exp);
  s->up = g_new0 (float, nb * hp->n_ff_exp);
  return (nb * hp->n_expert + 2 * used + 2 * nb * (gsize) hp->n_embd +
      2 * nb * (gsize) hp->n_ff_exp) * sizeof (float) + 2 * nb * 4;
}

void
npu_llm_moe_scratch_clear (NpuLlmMoeScratch * s)
{
  g_free (s->logits);
  g_free (s->sel);
  g_free (s->w);
  g_free (s->rows);
  g_free (s->wrow);
  g_free (s->xe);
  g_free (s->ye);
  g_free (s->gate);
  g_free (s->up);
  memset (s, 0, sizeof (*s));
}

/* ------------------------------------------------------------------------
 * Forward
 */

/* Selects the n_used largest of @l (ties: the lower index first, as a
 * strict comparison in index order gives) and their softmax weights */
static void
top_k_softmax (const float *l, guint n_expert, guint k, guint * sel, float *w)
{
  guint j, e;
  double mx, sum = 0.0;

  for (j = 0; j < k; j++) {
    gint best = -1;

    for (e = 0; e < n_expert; e++) {
      guint q;
      gboolean taken = FALSE;

      for (q = 0; q < j; q++)
        taken |= sel[q] == e;
      if (!taken && (best < 0 || l[e] > l[best]))
        best = (gint) e;
    }
    sel[j] = (guint) best;
  }
  /* the first one selected is the largest */
  mx = l[sel[0]];
  for (j = 0; j < k; j++)
    sum += exp ((double) l[sel[j]] - mx);
  for (j = 0; j < k; j++)
    w[j] = (float) (exp ((double) l[sel[j]] - mx) / sum);
}

void
npu_llm_moe_route (const NpuLlmMoe * moe, const float *x, gsize n,
    NpuLlmMoeScratch * s)
{
  gsize t;
  guint e, j;

  for (t = 0; t < n; t++) {
    const float *xr = x + t * moe->n_embd;
    float *l = s->logits + t * moe->n_expert;

    for (e = 0; e < moe->n_expert; e++) {
      const float *r = moe->router + (gsize) e * moe->n_embd;
      double acc = moe->router_b[e];

      for (j = 0; j < moe->n_embd; j++)
        acc += (double) r[j] * xr[j];
      l[e] = (float) acc;
    }
    top_k_softmax (l, moe->n_expert, moe->n_used, s->sel + t * moe->n_used,
        s->w + t * moe->n_used);
  }
}

/* gate <- min (gate + bg, 7) sigmoid (1.702 ...) (clamp (up + bu) + 1),
 * for @n rows of n_ff */
static void
swiglu_oai (float *gate, const float *up, const float *bg, const float *bu,
    gsize n, guint n_ff)
{
  const float lim = NPU_LLM_MOE_SWIGLU_LIMIT;
  gsize t;
  guint i;

  for (t = 0; t < n; t++) {
    float *g = gate + t * n_ff;
    const float *u = up + t * n_ff;

    for (i = 0; i < n_ff; i++) {
      float a = MIN (g[i] + bg[i], lim);
      float b = CLAMP (u[i] + bu[i], -lim, lim);

      g[i] = a / (1.0f + expf (-NPU_LLM_MOE_SWIGLU_ALPHA * a)) * (b + 1.0f);
    }
  }
}

/* The bytes expert @e moves over @c rows: its three matrices and three
 * biases once, the products' F32 rows in and out */
static void
count_expert (const NpuLlmMoe * moe, guint e, gsize c, NpuBytes * bytes)
{
  guint64 D = moe->n_embd, F = moe->n_ff;

  npu_bytes_read (bytes, NPU_BYTES_WEIGHTS,
      npu_mxfp4_matrix_get_size (&moe->gate[e]) +
      npu_mxfp4_matrix_get_size (&moe->up[e]) +
      npu_mxfp4_matrix_get_size (&moe->down[e]) + (2 * F + D) * 4);
  /* gate and up read the rows once (one pass), down reads the gate */
  npu_bytes_read (bytes, NPU_BYTES_ACTIVATIONS, c * (D + F) * 4);
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, c * (2 * F + D) * 4);
}

/* Expert @e over the @c rows of s->xe routed to it; adds each row's
 * output, times its weight, to its row of @out */
static void
run_expert (const NpuLlmMoe * moe, NpuTask * task, NpuMatmulPrecision prec,
    guint e, gsize c, float *out, NpuLlmMoeScratch * s)
{
  const NpuMxfp4Matrix *w[2] = { &moe->gate[e], &moe->up[e] };
  float *const y[2] = { s->gate, s->up };
  const float *bd = moe->down_b + (gsize) e * moe->n_embd;
  gsize r;
  guint i;

  for (i = 0; i < 3; i++)
    if (moe->prepare[i])
      moe->prepare[i] (moe->prepare_data[i], e);
  npu_matmul_mxfp4_multi_with_precision (task, w, 2, s->xe, c, y, prec);
  swiglu_oai (s->gate, s->up, moe->gate_b + (gsize) e * moe->n_ff,
      moe->up_b + (gsize) e * moe->n_ff, c, moe->n_ff);
  npu_matmul_mxfp4_with_precision (task, &moe->down[e], s->gate, c, s->ye,
      prec);
  for (r = 0; r < c; r++) {
    float *o = out + (gsize) s->rows[r] * moe->n_embd;
    const float *ye = s->ye + r * moe->n_embd;
    float wt = s->wrow[r];

    for (i = 0; i < moe->n_embd; i++)
      o[i] += wt * (ye[i] + bd[i]);
  }
}

void
npu_llm_moe_forward (const NpuLlmMoe * moe, NpuTask * task,
    NpuMatmulPrecision precision, const float *x, gsize n, float *out,
    NpuLlmMoeScratch * s, NpuBytes * bytes)
{
  gsize D = moe->n_embd, t;
  guint e, j;

  g_return_if_fail (n <= s->n_batch);
  npu_llm_moe_route (moe, x, n, s);
  /* the router (F32) and its bias */
  npu_bytes_read (bytes, NPU_BYTES_WEIGHTS,
      (guint64) moe->n_expert * (D + 1) * 4);
  memset (out, 0, n * D * sizeof (float));
  /* expert by expert, the rows routed to it gathered into one product
   * (llama.cpp's mul_mat_id): a prefill reads each expert once per
   * chunk, not once per token */
  for (e = 0; e < moe->n_expert; e++) {
    gsize c = 0;

    for (t = 0; t < n; t++) {
      for (j = 0; j < moe->n_used; j++) {
        if (s->sel[t * moe->n_used + j] != e)
          continue;
        s->rows[c] = (guint) t;
        s->wrow[c] = s->w[t * moe->n_used + j];
        memcpy (s->xe + c * D, x + t * D, D * sizeof (float));
        c++;
      }
    }
    if (c > 0) {
      run_expert (moe, task, precision, e, c, out, s);
      count_expert (moe, e, c, bytes);
    }
  }
}
