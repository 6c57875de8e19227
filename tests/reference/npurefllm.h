/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: double-precision reference of the transformer core
 *
 * A model file written by the model generator, evaluated with plain loops
 * in double: every matrix, the embeddings and the output (or token_embd
 * when tied) with the exact values of the type the file stores, as the
 * runtime reads them; attention computed from un-rotated keys with RoPE applied at
 * each token's position inside the cache (the StreamingLLM rule), so the
 * runtime's shortcut (keys rotated once at their absolute position) is
 * checked, not copied.  Qwen3: no biases, each head of q and k
 * RMS-normed with its head_dim weights before RoPE (the keys stored
 * normed, un-rotated).  gpt-oss: q/k/v/o biases, post_attention_norm
 * before the mixture of experts (router logits in double, the top k by a
 * sort, value descending then index ascending, softmax over those k; each
 * expert's gate clamped above at 7, its up to [-7, 7], gate sigmoid
 * (1.702 gate) (up + 1), biases on all three products), one sink logit
 * per head added to each softmax's denominator, the even layers seeing
 * only the last sliding_window positions, YaRN angles and magnitude
 * computed per pair as ggml's rope_yarn() states them.
 * tests/unit/test-llm.c holds the core to it;
 * tests/unit/test-llmsplice.c the answering session's prompts.
 */
#ifndef __NPU_REF_LLM_H__
#define __NPU_REF_LLM_H__

#include <core/formats/npugguf.h>
#include "tests/tools/npumodelgen.h"

G_BEGIN_DECLS typedef struct
{
  double *attn_norm, *ffn_norm, *bq, *bk, *bv;
  double *q_norm, *k_norm;      /* qwen3's per-head norms, head_dim each */
  double *wq, *wk, *wv, *wo, *wg, *wu, *wd;
  /* gpt-oss: wg, wu, wd hold every expert ([E][ff][dim], [E][dim][ff]) */
  double *bo, *sinks, *router, *router_b, *bg, *bu, *bd;
  double *post_attn_norm, *post_ffn_norm;       /* gemma3's, dim each */
  gboolean swa;
} NpuRefLlmLayer;

typedef struct
{
  guint dim, ff, n_head, n_kv, hd, n_rot, n_layer, vocab;
  gboolean neox;
  gboolean qk_norm;             /* qwen3, gemma3: q and k heads RMS-normed */
  /* gemma3: tokens' rows times sqrt (dim), the blocks' outputs normed,
   * GeGLU, five sliding layers of six with RoPE base 10000 */
  gboolean gemma3;
  guint n_expert, n_used, n_swa;        /* gpt-oss; 0 otherwise */
  double yarn_factor, yarn_orig_ctx;    /* 0: no YaRN */
  double eps, base;
  double *tok, *out, *out_norm; /* token_embd [vocab][dim], output */
  NpuRefLlmLayer *L;
} NpuRefLlm;

/* The hyper-parameters come from @p, what the test asked the generator to
 * write, not from the loader under test; the loader must agree with them
 * (asserted).  The weights are read from @gguf. */
void npu_ref_llm_load (NpuRefLlm * r, NpuGguf * gguf,
    const NpuTextModelParams * p);
void npu_ref_llm_clear (NpuRefLlm * r);

/* One stream through the reference: every key and value ever produced,
 * un-rotated; which of them a query sees is decided per query */
typedef struct
{
  const NpuRefLlm *r;
  guint n_ctx, n_sink;
  guint cap;
  double **K, **V;              /* per layer: cap x kv_dim */
  guint n_past;
  /* gpt-oss: the smallest margin, over the layers of the last step,
   * between the last router logit selected and the first one not (a
   * runtime whose router input is off by more may route otherwise) */
  double min_gap;
} NpuRefLlmRun;

/* A stream of at most @cap tokens through a cache of @n_ctx rows, the
 * first @n_sink of which are kept when it slides */
void npu_ref_llm_run_init (NpuRefLlmRun * run, const NpuRefLlm * r,
    guint n_ctx, guint n_sink, guint cap);
void npu_ref_llm_run_clear (NpuRefLlmRun * run);

/* Feeds one embedding row (dim values) at the next position; @logits gets
 * vocab values */
void npu_ref_llm_step (NpuRefLlmRun * run, const double *embd, double *logits);
/* gpt-oss's mixture of experts of layer @l on the normed @xn (dim), into
 * @y (dim); returns the margin between the last router logit selected
 * and the first one not (INFINITY when every expert is used) */
double npu_ref_llm_moe (const NpuRefLlm * r, const NpuRefLlmLayer * l,
    const double *xn, double *y);
/* The same with token @token's embedding row */
void npu_ref_llm_step_token (NpuRefLlmRun * run, gint32 token, double *logits);

G_END_DECLS
#endif /* __NPU_REF_LLM_H__ */
