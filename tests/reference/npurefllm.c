/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: double-precision reference of the transformer core
 * (npurefllm.h says what it computes) */
#include "npurefllm.h"

#include <core/models/npullm.h>
#include <core/formats/npumxfp4.h>
#include <core/formats/npuquants.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double *
to_double (const float *f, gsize n)
{
  double *d = g_new (double, n);
  gsize i;

  for (i = 0; i < n; i++)
    d[i] = f[i];
  return d;
}

/* A matrix's exact values in the type the file stores (npuquants.h's
 * decoders, held to ggml's arithmetic by tests/unit/test-quants.c), as
 * the runtime multiplies it */
static double *
ref_matrix (NpuGguf * gguf, const gchar * name)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (gguf, name);
  gsize k, rows, row_bytes, r;
  float *f;
  double *d;

  g_assert_nonnull (t);
  k = t->ne[0];
  rows = t->ne[1];
  row_bytes = npu_quants_row_bytes (t->type, k);
  g_assert_cmpuint (row_bytes, >, 0);
  f = g_new (float, k * rows);
  for (r = 0; r < rows; r++)
    g_assert_true (npu_quants_dequantize_row (t->type, t->data +
            r * row_bytes, f + r * k, k));
  d = to_double (f, k * rows);
  g_free (f);
  return d;
}

/* A 3-D MXFP4 expert tensor, every expert, as stored */
static double *
ref_experts (NpuGguf * gguf, const gchar * name)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (gguf, name);
  gsize n;
  float *f;
  double *d;

  g_assert_nonnull (t);
  g_assert_cmpint (t->type, ==, NPU_GGML_TYPE_MXFP4);
  n = t->ne[0] * t->ne[1] * t->ne[2];
  f = g_new (float, n);
  npu_mxfp4_dequantize ((const NpuBlockMxfp4 *) t->data, f, n);
  d = to_double (f, n);
  g_free (f);
  return d;
}

/* A 2-D F32 tensor (the router, the experts' biases) */
static double *
ref_f32_2d (NpuGguf * gguf, const gchar * name)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (gguf, name);

  g_assert_nonnull (t);
  g_assert_cmpint (t->type, ==, NPU_GGML_TYPE_F32);
  return to_double ((const float *) t->data, t->ne[0] * t->ne[1]);
}

static double *
ref_vector (NpuGguf * gguf, const gchar * name)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (gguf, name);

  if (!t)
    return NULL;
  g_assert_cmpint (t->type, ==, NPU_GGML_TYPE_F32);
  return to_double ((const float *) t->data, t->ne[0]);
}

/* token_embd in its own type: the embedding rows are not converted */
static double *
ref_embeddings (NpuGguf * gguf)
{
  return ref_matrix (gguf, "token_embd.weight");
}

/* The logits' matrix: output.weight, or token_embd when tied */
static double *
ref_output (NpuGguf * gguf)
{
  return ref_matrix (gguf, npu_gguf_find_tensor (gguf, "output.weight") ?
      "output.weight" : "token_embd.weight");
}

/* gpt-oss: the experts whole, the router, every bias and the sinks; the
 * even layers slide (gpt-oss's pattern, stated here, not read) */
static void
load_gpt_oss_layer (const NpuRefLlm * r, NpuRefLlmLayer * l, NpuGguf * gguf,
    guint il)
{
  gchar name[64];

#define N(s) (g_snprintf (name, sizeof (name), "blk.%u." s, il), name)
  l->swa = il % 2 == 0;
  l->ffn_norm = ref_vector (gguf, N ("post_attention_norm.weight"));
  l->bq = ref_vector (gguf, N ("attn_q.bias"));
  l->bk = ref_vector (gguf, N ("attn_k.bias"));
  l->bv = ref_vector (gguf, N ("attn_v.bias"));
  l->bo = ref_vector (gguf, N ("attn_output.bias"));
  l->sinks = ref_vector (gguf, N ("attn_sinks.weight"));
  g_assert_true (l->bq && l->bk && l->bv && l->bo && l->sinks);
  l->wq = ref_matrix (gguf, N ("attn_q.weight"));
  l->wk = ref_matrix (gguf, N ("attn_k.weight"));
  l->wv = ref_matrix (gguf, N ("attn_v.weight"));
  l->wo = ref_matrix (gguf, N ("attn_output.weight"));
  l->router = ref_f32_2d (gguf, N ("ffn_gate_inp.weight"));
  l->router_b = ref_vector (gguf, N ("ffn_gate_inp.bias"));
  l->wg = ref_experts (gguf, N ("ffn_gate_exps.weight"));
  l->wu = ref_experts (gguf, N ("ffn_up_exps.weight"));
  l->wd = ref_experts (gguf, N ("ffn_down_exps.weight"));
  l->bg = ref_f32_2d (gguf, N ("ffn_gate_exps.bias"));
  l->bu = ref_f32_2d (gguf, N ("ffn_up_exps.bias"));
  l->bd = ref_f32_2d (gguf, N ("ffn_down_exps.bias"));
#undef N
  (void) r;
}

/* The hyper-parameters come from @p, what the test asked the generator to
 * write, not from the loader under test; the loader must agree with them */
void
npu_ref_llm_load (NpuRefLlm * r, NpuGguf * gguf, const NpuTextModelParams * p)
{
  NpuLlmHParams hp;
  GError *error = NULL;
  guint il;

  r->dim = p->dim;
  r->ff = p->ff;
  r->n_head = p->n_heads;
  r->n_kv = p->n_kv_heads;
  /* qwen3 states its head size, which need not be dim / heads */
  r->hd = p->head_dim ? p->head_dim : p->dim / p->n_heads;
  r->n_rot = r->hd;             /* the generator writes full rotary */
  r->n_layer = p->n_layers;
  r->neox = p->arch != NPU_MODEL_ARCH_LLAMA;
  r->gemma3 = p->arch == NPU_MODEL_ARCH_GEMMA3;
  r->qk_norm = p->arch == NPU_MODEL_ARCH_QWEN3 || r->gemma3;
  r->eps = p->rms_eps;
  r->base = p->rope_base;
  r->n_expert = p->n_experts;
  r->n_used = p->n_experts_used;
  r->n_swa = p->sliding_window;
  r->yarn_factor = p->yarn_factor;
  r->yarn_orig_ctx = p->yarn_orig_ctx;

  g_assert_true (npu_llm_hparams_from_gguf (gguf, &hp, &error));
  g_assert_cmpuint (hp.n_embd, ==, r->dim);
  g_assert_cmpuint (hp.n_ff, ==, r->ff);
  g_assert_cmpuint (hp.n_head, ==, r->n_head);
  g_assert_cmpuint (hp.n_head_kv, ==, r->n_kv);
  g_assert_cmpuint (hp.head_dim, ==, r->hd);
  g_assert_cmpuint (hp.n_rot, ==, r->n_rot);
  g_assert_cmpuint (hp.n_layer, ==, r->n_layer);
  g_assert_cmpint (hp.rope_type, ==, r->neox ? NPU_LLM_ROPE_NEOX :
      NPU_LLM_ROPE_NORM);
  g_assert_cmpfloat (hp.rms_eps, ==, (float) r->eps);
  g_assert_cmpfloat (hp.rope_freq_base, ==, (float) r->base);
  g_assert_cmpuint (hp.n_expert, ==, r->n_expert);
  g_assert_cmpuint (hp.n_expert_used, ==, r->n_used);
  g_assert_cmpuint (hp.n_swa, ==, r->n_swa);
  g_assert_cmpint (hp.rope_yarn, ==, r->yarn_factor != 0.0);
  r->vocab = npu_gguf_find_tensor (gguf, "token_embd.weight")->ne[1];
  r->tok = ref_embeddings (gguf);
  r->out = ref_output (gguf);
  r->out_norm = ref_vector (gguf, "output_norm.weight");
  r->L = g_new0 (NpuRefLlmLayer, r->n_layer);
  for (il = 0; il < r->n_layer; il++) {
    NpuRefLlmLayer *l = &r->L[il];
    gchar name[64];

#define N(s) (g_snprintf (name, sizeof (name), "blk.%u." s, il), name)
    l->attn_norm = ref_vector (gguf, N ("attn_norm.weight"));
    if (r->n_expert) {
      load_gpt_oss_layer (r, l, gguf, il);
      continue;
    }
    l->ffn_norm = ref_vector (gguf, N ("ffn_norm.weight"));
    l->bq = ref_vector (gguf, N ("attn_q.bias"));
    l->bk = ref_vector (gguf, N ("attn_k.bias"));
    l->bv = ref_vector (gguf, N ("attn_v.bias"));
    l->q_norm = ref_vector (gguf, N ("attn_q_norm.weight"));
    l->k_norm = ref_vector (gguf, N ("attn_k_norm.weight"));
    if (r->gemma3) {
      /* llama.cpp's set_swa_pattern (6): the sixth of each six is global */
      l->swa = il % 6 < 5;
      l->post_attn_norm = ref_vector (gguf, N ("post_attention_norm.weight"));
      l->post_ffn_norm = ref_vector (gguf, N ("post_ffw_norm.weight"));
      g_assert_true (l->post_attn_norm && l->post_ffn_norm);
    }
    g_assert_true (!r->qk_norm || (l->q_norm && l->k_norm));
    g_assert_true (!r->qk_norm || !(l->bq || l->bk || l->bv));
    l->wq = ref_matrix (gguf, N ("attn_q.weight"));
    l->wk = ref_matrix (gguf, N ("attn_k.weight"));
    l->wv = ref_matrix (gguf, N ("attn_v.weight"));
    l->wo = ref_matrix (gguf, N ("attn_output.weight"));
    l->wg = ref_matrix (gguf, N ("ffn_gate.weight"));
    l->wu = ref_matrix (gguf, N ("ffn_up.weight"));
    l->wd = ref_matrix (gguf, N ("ffn_down.weight"));
#undef N
  }
}

void
npu_ref_llm_clear (NpuRefLlm * r)
{
  guint il;

  for (il = 0; il < r->n_layer; il++) {
    NpuRefLlmLayer *l = &r->L[il];

    g_free (l->attn_norm);
    g_free (l->ffn_norm);
    g_free (l->bq);
    g_free (l->bk);
    g_free (l->bv);
    g_free (l->q_norm);
    g_free (l->k_norm);
    g_free (l->post_attn_norm);
    g_free (l->post_ffn_norm);
    g_free (l->wq);
    g_free (l->wk);
    g_free (l->wv);
    g_free (l->wo);
    g_free (l->wg);
    g_free (l->wu);
    g_free (l->wd);
    g_free (l->bo);
    g_free (l->sinks);
    g_free (l->router);
    g_free (l->router_b);
    g_free (l->bg);
    g_free (l->bu);
    g_free (l->bd);
  }
  g_free (r->L);
  g_free (r->tok);
  g_free (r->out);
  g_free (r->out_norm);
}

/* y[rows] = W[rows x k] x (+ b) */
static void
matvec (const double *w, const double *b, const double *x, guint rows,
    guint k, double *y)
{
  guint r, j;

  for (r = 0; r < rows; r++) {
    double s = b ? b[r] : 0.0;

    for (j = 0; j < k; j++)
      s += w[(gsize) r * k + j] * x[j];
    y[r] = s;
  }
}

static void
rmsnorm (const double *x, const double *w, guint n, double eps, double *y)
{
  double ss = 0;
  guint i;

  for (i = 0; i < n; i++)
    ss += x[i] * x[i];
  ss = 1.0 / sqrt (ss / n + eps);
  for (i = 0; i < n; i++)
    y[i] = x[i] * ss * w[i];
}

/* YaRN's correction dimension: where a pair turns @rot times over the
 * original context, n_rot ln (orig / (2 pi rot)) / (2 ln base) */
static double
yarn_dim (const NpuRefLlm * r, double rot)
{
  return r->n_rot * log (r->yarn_orig_ctx / (2.0 * M_PI * rot)) /
      (2.0 * log (r->base));
}

/* Pair i's angle at @pos and the magnitude of cos and sin: plain RoPE, or
 * YaRN with ext_factor 1, beta_fast 32, beta_slow 1 (ggml's rope_yarn()) */
static double
rope_angle (const NpuRefLlm * r, gboolean swa, guint i, double pos,
    double *mscale)
{
  double extrap, interp, lo, hi;
  double y, ramp;

  *mscale = 1.0;
  /* gemma3's sliding layers turn at base 10000, unscaled */
  if (swa && r->gemma3)
    return pos * pow (10000.0, -2.0 * i / r->n_rot);
  extrap = pos * pow (r->base, -2.0 * i / r->n_rot);
  if (r->yarn_factor == 0.0)
    return extrap;
  interp = extrap / r->yarn_factor;
  lo = MAX (0.0, floor (yarn_dim (r, 32.0)));
  hi = MIN (r->n_rot - 1.0, ceil (yarn_dim (r, 1.0)));
  y = (i - lo) / MAX (0.001, hi - lo);
  ramp = 1.0 - MIN (1.0, MAX (0.0, y));
  *mscale = 1.0 + 0.1 * log (r->yarn_factor);
  return interp * (1.0 - ramp) + extrap * ramp;
}

static void
rope (const NpuRefLlm * r, gboolean swa, double *x, double pos)
{
  guint i, half = r->n_rot / 2;

  for (i = 0; i < half; i++) {
    double m, a = rope_angle (r, swa, i, pos, &m);
    guint i0 = r->neox ? i : 2 * i, i1 = r->neox ? i + half : 2 * i + 1;
    double x0 = x[i0], x1 = x[i1];

    x[i0] = m * (x0 * cos (a) - x1 * sin (a));
    x[i1] = m * (x0 * sin (a) + x1 * cos (a));
  }
}

typedef struct
{
  double v;
  guint e;
} Ranked;

/* value descending, then index ascending: a tie goes to the lower one */
static int
rank_cmp (const void *a, const void *b)
{
  const Ranked *x = a, *y = b;

  if (x->v != y->v)
    return x->v > y->v ? -1 : 1;
  return x->e < y->e ? -1 : x->e > y->e;
}

double
npu_ref_llm_moe (const NpuRefLlm * r, const NpuRefLlmLayer * l,
    const double *xn, double *y)
{
  guint E = r->n_expert, D = r->dim, F = r->ff, e, j, i;
  Ranked *rk = g_new (Ranked, E);
  double *g = g_new (double, F), *u = g_new (double, F);
  double *t = g_new (double, D), sum = 0.0, gap;

  for (e = 0; e < E; e++) {
    matvec (l->router + (gsize) e * D, l->router_b + e, xn, 1, D, &rk[e].v);
    rk[e].e = e;
  }
  qsort (rk, E, sizeof (Ranked), rank_cmp);
  for (j = 0; j < r->n_used; j++)
    sum += exp (rk[j].v - rk[0].v);
  memset (y, 0, D * sizeof (double));
  for (j = 0; j < r->n_used; j++) {
    double w = exp (rk[j].v - rk[0].v) / sum;

    e = rk[j].e;
    matvec (l->wg + (gsize) e * F * D, l->bg + (gsize) e * F, xn, F, D, g);
    matvec (l->wu + (gsize) e * F * D, l->bu + (gsize) e * F, xn, F, D, u);
    for (i = 0; i < F; i++) {
      double a = MIN (g[i], 7.0), b = MAX (-7.0, MIN (u[i], 7.0));

      g[i] = a / (1.0 + exp (-1.702 * a)) * (b + 1.0);
    }
    matvec (l->wd + (gsize) e * D * F, l->bd + (gsize) e * D, g, D, F, t);
    for (i = 0; i < D; i++)
      y[i] += w * t[i];
  }
  gap = r->n_used < E ? rk[r->n_used - 1].v - rk[r->n_used].v : INFINITY;
  g_free (rk);
  g_free (g);
  g_free (u);
  g_free (t);
  return gap;
}

void
npu_ref_llm_run_init (NpuRefLlmRun * run, const NpuRefLlm * r, guint n_ctx,
    guint n_sink, guint cap)
{
  guint il;

  run->r = r;
  run->n_ctx = n_ctx;
  run->n_sink = n_sink;
  run->cap = cap;
  run->n_past = 0;
  run->K = g_new (double *, r->n_layer);
  run->V = g_new (double *, r->n_layer);
  for (il = 0; il < r->n_layer; il++) {
    run->K[il] = g_new0 (double, (gsize) cap * r->n_kv * r->hd);
    run->V[il] = g_new0 (double, (gsize) cap * r->n_kv * r->hd);
  }
}

void
npu_ref_llm_run_clear (NpuRefLlmRun * run)
{
  guint il;

  for (il = 0; il < run->r->n_layer; il++) {
    g_free (run->K[il]);
    g_free (run->V[il]);
  }
  g_free (run->K);
  g_free (run->V);
}

/* Feed one embedding row; @logits gets vocab values */
void
npu_ref_llm_step (NpuRefLlmRun * run, const double *embd, double *logits)
{
  const NpuRefLlm *r = run->r;
  guint dim = r->dim, kvd = r->n_kv * r->hd, qd = r->n_head * r->hd;
  guint P = run->n_past, W = run->n_ctx - run->n_sink, il, h, i, d, a;
  double *x = g_new (double, dim), *xn = g_new (double, dim);
  double *q = g_new (double, qd), *att = g_new (double, qd);
  double *tmp = g_new (double, MAX (dim, r->ff));
  double *g = g_new (double, r->ff), *u = g_new (double, r->ff);
  double *sc = g_new (double, P + 1), *qh = g_new (double, r->hd);
  double *kh = g_new (double, r->hd);
  guint *ret = g_new (guint, P + 1), n_ret = 0;
  /* gemma_pytorch's query_pre_attn_scalar: n_embd / n_head for the 27 B */
  double qk_scale = 1.0 / sqrt (r->gemma3 && r->n_layer == 62 ?
      (double) r->dim / r->n_head : (double) r->hd);

  g_assert_cmpuint (P, <, run->cap);
  /* The tokens this query sees, in cache order: the sinks, then the
   * window of the last W positions ending at itself */
  for (a = 0; a <= P; a++)
    if (a < run->n_sink || a + W > P)
      ret[n_ret++] = a;
  g_assert_cmpuint (n_ret, <=, run->n_ctx);
  run->min_gap = INFINITY;

  memcpy (x, embd, dim * sizeof (double));
  for (il = 0; il < r->n_layer; il++) {
    const NpuRefLlmLayer *l = &r->L[il];

    rmsnorm (x, l->attn_norm, dim, r->eps, xn);
    matvec (l->wq, l->bq, xn, qd, dim, q);
    matvec (l->wk, l->bk, xn, kvd, dim, run->K[il] + (gsize) P * kvd);
    matvec (l->wv, l->bv, xn, kvd, dim, run->V[il] + (gsize) P * kvd);
    if (r->qk_norm) {
      double *k = run->K[il] + (gsize) P * kvd;

      for (h = 0; h < r->n_head; h++)
        rmsnorm (q + h * r->hd, l->q_norm, r->hd, r->eps, q + h * r->hd);
      for (h = 0; h < r->n_kv; h++)
        rmsnorm (k + h * r->hd, l->k_norm, r->hd, r->eps, k + h * r->hd);
    }

    for (h = 0; h < r->n_head; h++) {
      guint gk = h / (r->n_head / r->n_kv);
      double mx = -INFINITY, sum = 0;

      memcpy (qh, q + h * r->hd, r->hd * sizeof (double));
      rope (r, l->swa, qh, n_ret - 1);
      for (i = 0; i < n_ret; i++) {
        double s = 0;

        /* a sliding layer: only the last n_swa positions (P - a < n_swa) */
        if (l->swa && P - ret[i] >= r->n_swa) {
          sc[i] = -INFINITY;
          continue;
        }
        memcpy (kh, run->K[il] + (gsize) ret[i] * kvd + gk * r->hd,
            r->hd * sizeof (double));
        rope (r, l->swa, kh, i);
        for (d = 0; d < r->hd; d++)
          s += qh[d] * kh[d];
        sc[i] = s * qk_scale;
        mx = MAX (mx, sc[i]);
      }
      /* the sink: one more logit in the denominator, with no value */
      if (l->sinks)
        mx = MAX (mx, l->sinks[h]);
      for (i = 0; i < n_ret; i++) {
        sc[i] = exp (sc[i] - mx);
        sum += sc[i];
      }
      if (l->sinks)
        sum += exp (l->sinks[h] - mx);
      for (d = 0; d < r->hd; d++) {
        double s = 0;

        for (i = 0; i < n_ret; i++)
          s += sc[i] / sum * run->V[il][(gsize) ret[i] * kvd + gk * r->hd + d];
        att[h * r->hd + d] = s;
      }
    }
    matvec (l->wo, l->bo, att, dim, qd, tmp);
    if (l->post_attn_norm)
      rmsnorm (tmp, l->post_attn_norm, dim, r->eps, tmp);
    for (i = 0; i < dim; i++)
      x[i] += tmp[i];

    rmsnorm (x, l->ffn_norm, dim, r->eps, xn);
    if (r->n_expert) {
      run->min_gap = MIN (run->min_gap, npu_ref_llm_moe (r, l, xn, tmp));
    } else {
      matvec (l->wg, NULL, xn, r->ff, dim, g);
      matvec (l->wu, NULL, xn, r->ff, dim, u);
      for (i = 0; i < r->ff; i++)
        g[i] = (r->gemma3 ? 0.5 * g[i] * (1.0 + tanh (sqrt (2.0 / M_PI) *
                    (g[i] + 0.044715 * g[i] * g[i] * g[i]))) :
            g[i] / (1.0 + exp (-g[i]))) * u[i];
      matvec (l->wd, NULL, g, dim, r->ff, tmp);
    }
    if (l->post_ffn_norm)
      rmsnorm (tmp, l->post_ffn_norm, dim, r->eps, tmp);
    for (i = 0; i < dim; i++)
      x[i] += tmp[i];
  }
  rmsnorm (x, r->out_norm, dim, r->eps, xn);
  matvec (r->out, NULL, xn, r->vocab, dim, logits);
  run->n_past++;

  g_free (x);
  g_free (xn);
  g_free (q);
  g_free (att);
  g_free (tmp);
  g_free (g);
  g_free (u);
  g_free (sc);
  g_free (qh);
  g_free (kh);
  g_free (ret);
}

void
npu_ref_llm_step_token (NpuRefLlmRun * run, gint32 token, double *logits)
{
  const NpuRefLlm *r = run->r;
  double *row = g_memdup2 (r->tok + (gsize) token * r->dim,
      r->dim * sizeof (double));
  guint i;

  /* gemma3 scales a token's row, not media embeddings (step) */
  if (r->gemma3)
    for (i = 0; i < r->dim; i++)
      row[i] *= sqrt ((double) r->dim);
  npu_ref_llm_step (run, row, logits);
  g_free (row);
}
