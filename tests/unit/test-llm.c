/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the transformer core against a plain double-precision reference
 *
 * Tiny llama, qwen2 and qwen3 models are written with the model generator (MXFP4
 * block weights, Q8_0 token_embd / output as llama.cpp's MXFP4 files have
 * them), and the same model is evaluated with straightforward loops in
 * double (tests/reference/npurefllm.c): weights dequantised with the
 * codec, the Q8_0 output matrix (or token_embd for a tied model) with its
 * exact values, as the runtime keeps it in Q8_0, other types converted to
 * MXFP4 by the codec as the runtime documents, attention computed from
 * un-rotated keys with RoPE applied at each token's position inside the
 * cache (the StreamingLLM rule), so the runtime's shortcut (keys rotated
 * once at their absolute position) is checked, not copied.
 *
 * Tolerances, as max |logit - ref| / (max ref - min ref) over the vocabulary:
 *  - scalar kernels (exact F32 products): 1e-4.  Only F32 rounding of
 *    activations separates runtime and reference; measured ~1e-6.
 *  - int8 kernels (avx2/avx512/neon): 3e-2.  npumatmul.h bounds the error
 *    of each product by sum |w| d/2 with d = max|x|/127 of the block: for
 *    Gaussian-like activations (max ~ 2.5 rms over 32) that is a relative
 *    rms error of about 2.5 / (254 sqrt 3) ~ 0.6% per product; a logit
 *    goes through ~8 chained products (2 layers x attention and FFN, plus
 *    the output) and the errors add in quadrature, ~1.5% rms; the largest
 *    of 1024 logits is ~3.5 sigma away but measured against a range of ~6
 *    sigma, giving ~1%.  We allow 3x that.
 *
 * KV cache types (the tests above use F32; /llm/kv-type/ the others, with
 * scalar kernels so that only the cache's rounding separates runtime and
 * reference): each stored key and value is off by at most 2^-11 relative
 * (F16) or max|block| / 254 (Q8_0, ~0.4 % of a block's largest value);
 * a score moves by about that times |q| |k|, a logit by its share through
 * two layers.  Measured / allowed: F16 2.2e-4 / 1e-3, Q8_0 5.4e-3 / 2e-2.
 */
#include <core/models/npullm.h>
#include <core/models/npullm-private.h>
#include <core/cpu/npumatmul.h>
#include <core/formats/npumxfp4.h>
#include <core/formats/npuggufwriter.h>
#include "tests/tools/npumodelgen.h"
#include "tests/npucompare.h"
#include "tests/npullmeval.h"
#include "tests/reference/npurefllm.h"

#include <malloc.h>
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#define TOL_SCALAR 1e-4
#define TOL_INT8 3e-2
#define TOL_KV_F16 1e-3
#define TOL_KV_Q8_0 2e-2

/* The cache type and matmul precision of the contexts new_ctx() makes,
 * and the bound of the scalar kernels with that cache type */
static NpuKvType kv_type = NPU_KV_F32;
static NpuMatmulPrecision precision = NPU_MATMUL_PRECISION_FAST;

static double
tol_scalar (void)
{
  switch (kv_type) {
    case NPU_KV_F16:
      return TOL_KV_F16;
    case NPU_KV_Q8_0:
      return TOL_KV_Q8_0;
    default:
      return TOL_SCALAR;
  }
}

static NpuDevice *device;
static NpuQueue *queue;
static gchar *tmpdir;

/* ------------------------------------------------------------------------
 * Running evals inside tasks, as the element will
 */

static void
run_eval (NpuLlmContext * ctx, const gint32 * tokens, const float *embd,
    gsize n)
{
  npu_test_eval_on_queue (queue, ctx, tokens, embd, n);
}

/* max |a - ref| relative to the reference's range; NaN stays NaN */
static double
rel_diff (const float *a, const double *ref, guint n)
{
  return npu_rel_diff (a, ref, n);
}

static double
rel_diff_f (const float *a, const float *b, guint n)
{
  double *d = g_new (double, n), r;
  guint i;

  for (i = 0; i < n; i++)
    d[i] = b[i];
  r = rel_diff (a, d, n);
  g_free (d);
  return r;
}

static gint32
argmax_f (const float *l, guint n)
{
  guint i, b = 0;

  for (i = 1; i < n; i++)
    if (l[i] > l[b])
      b = i;
  return b;
}

/* ------------------------------------------------------------------------
 * Models
 */

typedef struct
{
  const gchar *name;
  NpuModelArch arch;
  guint kv_heads;
  gboolean tied;
  guint32 wtype;
  guint heads;                  /* 0: the preset's (4, heads of 16) */
  guint dim;                    /* 0: the preset's (64) */
} ModelConfig;

static const ModelConfig configs[] = {
  {"llama-gqa-untied", NPU_MODEL_ARCH_LLAMA, 2, FALSE, NPU_GGML_TYPE_MXFP4},
  {"qwen2-gqa-tied", NPU_MODEL_ARCH_QWEN2, 2, TRUE, NPU_GGML_TYPE_MXFP4},
  {"llama-mqa-tied", NPU_MODEL_ARCH_LLAMA, 1, TRUE, NPU_GGML_TYPE_MXFP4},
  {"qwen2-mha-untied", NPU_MODEL_ARCH_QWEN2, 4, FALSE, NPU_GGML_TYPE_MXFP4},
  {"llama-f32", NPU_MODEL_ARCH_LLAMA, 2, FALSE, NPU_GGML_TYPE_F32},
  /* heads of 32, which a Q8_0 cache needs */
  {"qwen2-mqa-hd32", NPU_MODEL_ARCH_QWEN2, 1, FALSE, NPU_GGML_TYPE_MXFP4, 2},
  /* qwen3: per-head q/k norms, no biases, heads of 32 (the preset's
   * head_dim) on a dim of 64, so q and o are 128 wide, not square */
  {"qwen3-gqa-tied", NPU_MODEL_ARCH_QWEN3, 2, TRUE, NPU_GGML_TYPE_MXFP4},
  {"qwen3-mha-untied", NPU_MODEL_ARCH_QWEN3, 4, FALSE, NPU_GGML_TYPE_MXFP4},
  /* the other stored types, each multiplied as stored (after the
   * entries other tests name by index) */
  {"llama-f16", NPU_MODEL_ARCH_LLAMA, 2, FALSE, NPU_GGML_TYPE_F16},
  {"qwen2-bf16-tied", NPU_MODEL_ARCH_QWEN2, 2, TRUE, NPU_GGML_TYPE_BF16},
  {"qwen3-q8_0", NPU_MODEL_ARCH_QWEN3, 2, FALSE, NPU_GGML_TYPE_Q8_0},
  {"llama-q4_0", NPU_MODEL_ARCH_LLAMA, 2, FALSE, NPU_GGML_TYPE_Q4_0},
  {"qwen2-q4_1-tied", NPU_MODEL_ARCH_QWEN2, 2, TRUE, NPU_GGML_TYPE_Q4_1},
  {"llama-q5_0", NPU_MODEL_ARCH_LLAMA, 1, FALSE, NPU_GGML_TYPE_Q5_0},
  {"qwen2-q5_1", NPU_MODEL_ARCH_QWEN2, 2, FALSE, NPU_GGML_TYPE_Q5_1},
  /* the K-quants on a dim of 256 (whole super-blocks): ffn_down's rows
   * of ff = 192 take llama-quantize's fallback (Q5_0, Q5_1, Q8_0), as in
   * users' files */
  {"llama-q4_k", NPU_MODEL_ARCH_LLAMA, 2, FALSE, NPU_GGML_TYPE_Q4_K, 0, 256},
  {"qwen2-q5_k-tied", NPU_MODEL_ARCH_QWEN2, 2, TRUE, NPU_GGML_TYPE_Q5_K, 0,
      256},
  {"qwen3-q6_k", NPU_MODEL_ARCH_QWEN3, 2, FALSE, NPU_GGML_TYPE_Q6_K, 0, 256},
  /* gemma3: six layers, five sliding over 8 positions (the prompt is 20)
   * with RoPE base 10000, one global; q/k and post norms, GeGLU, the
   * tokens' rows scaled by sqrt (dim), heads of 32 on a dim of 64 */
  {"gemma3-gqa-tied", NPU_MODEL_ARCH_GEMMA3, 2, TRUE, NPU_GGML_TYPE_MXFP4},
  {"gemma3-mqa-tied", NPU_MODEL_ARCH_GEMMA3, 1, TRUE, NPU_GGML_TYPE_MXFP4},
  /* gpt-oss: 8 experts of which 4 per token, sinks, the even layer
   * sliding over 128 positions, YaRN, biases, heads of 32 on a dim of 64 */
  {"gpt-oss-gqa", NPU_MODEL_ARCH_GPT_OSS, 2, FALSE, NPU_GGML_TYPE_MXFP4},
  {"gpt-oss-mqa", NPU_MODEL_ARCH_GPT_OSS, 1, FALSE, NPU_GGML_TYPE_MXFP4},
};

typedef struct
{
  const ModelConfig *cfg;
  gchar *path;
  NpuGguf *gguf;
  NpuLlmModel *model;
  NpuRefLlm ref;
} TestModel;

static void
test_model_open_full (TestModel * tm, const ModelConfig * cfg,
    NpuLlmLoadFlags flags)
{
  NpuTextModelParams p;
  GError *error = NULL;

  tm->cfg = cfg;
  g_assert_true (npu_model_gen_text_preset (&p, cfg->arch, "tiny", &error));
  p.n_kv_heads = cfg->kv_heads;
  if (cfg->heads)
    p.n_heads = cfg->heads;
  if (cfg->dim)
    p.dim = cfg->dim;
  p.tied = cfg->tied;
  p.wtype = cfg->wtype;
  p.seed = 7;
  /* neither the presets' nor the loader's defaults (1e-5/1e-6, 10000/1e6):
   * a loader that ignored the file's values would not match the
   * reference */
  p.rms_eps = cfg->arch == NPU_MODEL_ARCH_LLAMA ? 2e-3f : 4e-4f;
  p.rope_base = cfg->arch == NPU_MODEL_ARCH_LLAMA ? 500.0f : 3000.0f;
  tm->path = g_build_filename (tmpdir, cfg->name, NULL);
  g_assert_true (npu_model_gen_write_text (&p, tm->path, NULL, &error));
  tm->model = npu_llm_model_new_from_file (tm->path, flags, &error);
  g_assert_no_error (error);
  tm->gguf = npu_gguf_open (tm->path, &error);
  g_assert_no_error (error);
  npu_ref_llm_load (&tm->ref, tm->gguf, &p);
}

static void
test_model_open (TestModel * tm, const ModelConfig * cfg)
{
  test_model_open_full (tm, cfg, NPU_LLM_LOAD_IN_PLACE);
}

static void
test_model_close (TestModel * tm)
{
  npu_ref_llm_clear (&tm->ref);
  npu_llm_model_free (tm->model);
  npu_gguf_free (tm->gguf);
  g_unlink (tm->path);
  g_free (tm->path);
}

static NpuLlmContext *
new_ctx (NpuLlmModel * model, guint n_ctx, guint n_batch, guint n_sink,
    gboolean all_logits)
{
  NpuLlmContextParams p;
  NpuLlmContext *ctx;
  GError *error = NULL;

  npu_llm_context_params_init (&p);
  p.n_ctx = n_ctx;
  p.n_batch = n_batch;
  p.n_sink = n_sink;
  p.all_logits = all_logits;
  p.kv_type = kv_type;
  p.precision = precision;
  ctx = npu_llm_context_new (model, &p, &error);
  g_assert_no_error (error);
  return ctx;
}

#define PROMPT_LEN 20

static void
make_prompt (gint32 * tokens, guint n, guint vocab)
{
  guint i;

  for (i = 0; i < n; i++)
    tokens[i] = (gint32) ((i * 37u + 11u) % vocab);
}

static const gchar *native_isa;

/* Weight bytes a decoded token reads, from the file: each layer matrix as
 * the runtime holds it (17 bytes per block, rows padded to 4 blocks when
 * repacked), the output (or tied token_embd) as stored if Q8_0, else the
 * same way, and one embedding row */
static guint64
expected_decode_bytes (NpuGguf * gguf, gboolean repacked)
{
  const NpuGgufTensor *embd = npu_gguf_find_tensor (gguf, "token_embd.weight");
  const NpuGgufTensor *out = npu_gguf_find_tensor (gguf, "output.weight");
  guint64 sum = embd->n_bytes / embd->ne[1], used = 0;
  guint i;

  npu_gguf_get_u32 (gguf, "gpt-oss.expert_used_count", (guint32 *) & used,
      NULL);
  if (!out)
    out = embd;
  for (i = 0; i < npu_gguf_n_tensors (gguf); i++) {
    const NpuGgufTensor *t = npu_gguf_get_tensor (gguf, i);
    gboolean is_out = strcmp (t->name, out->name) == 0;
    guint64 nb = t->ne[0] / 32;

    /* gpt-oss: the experts a token is routed to, never repacked, and the
     * F32 router; the experts' biases are not matrices */
    if (strstr (t->name, "_exps.weight")) {
      sum += t->n_bytes / t->ne[2] * used;
    } else if (strstr (t->name, "ffn_gate_inp.weight")) {
      sum += t->n_bytes;
    } else if (g_str_has_suffix (t->name, ".bias")) {
      /* nothing */
    } else if ((is_out || (g_str_has_prefix (t->name, "blk.") &&
                t->n_dims == 2)) && t->type == NPU_GGML_TYPE_MXFP4) {
      if (repacked)
        nb = (nb + 3) / 4 * 4;
      sum += t->ne[1] * nb * sizeof (NpuBlockMxfp4);
    } else if (is_out || (g_str_has_prefix (t->name, "blk.") &&
            t->n_dims == 2)) {
      /* every other type as stored */
      sum += t->n_bytes;
    }
  }
  return sum;
}

/* A mixture of experts picks its top k: where two router logits are
 * closer than the int8 rounding of the router's input moves them (FAST
 * precision), the runtime may route a token otherwise than the reference
 * and its logits jump by that expert's share.  Such a row may exceed the
 * bound, up to TOL_FLIP, only if the reference's own margin in some layer
 * was below FLIP_GAP (measured: a flip at a margin of 0.098, router
 * logits of a spread of ~2), and at most MAX_FLIPS rows of a run may. */
#define FLIP_GAP 0.25
#define TOL_FLIP 0.25
#define MAX_FLIPS 3
static guint n_flips;

static gboolean
routing_flip (const NpuRefLlmRun * run, double d, double tol)
{
  if (d <= tol || run->r->n_expert == 0)
    return FALSE;
  g_assert_cmpfloat (run->min_gap, <, FLIP_GAP);
  g_assert_cmpfloat (d, <=, TOL_FLIP);
  n_flips++;
  return TRUE;
}

/* Prefill PROMPT_LEN tokens in one batch, compare every row; then 5
 * greedy steps, the runtime's choice fed to both, which must be the
 * reference's or within @tol of it.  Returns the largest difference. */
static double
reference_run (TestModel * tm, double tol)
{
  NpuLlmContext *ctx;
  NpuRefLlmRun run;
  gint32 prompt[PROMPT_LEN], tok;
  double *ref_logits, worst = 0, d;
  guint V = tm->ref.vocab, i, step;
  gboolean flipped = FALSE;

  ref_logits = g_new (double, V);
  n_flips = 0;
  make_prompt (prompt, PROMPT_LEN, V);
  ctx = new_ctx (tm->model, 64, 32, 4, TRUE);
  npu_ref_llm_run_init (&run, &tm->ref, 64, 4, 64);
  run_eval (ctx, prompt, NULL, PROMPT_LEN);
  for (i = 0; i < PROMPT_LEN; i++) {
    npu_ref_llm_step_token (&run, prompt[i], ref_logits);
    d = rel_diff (npu_llm_get_logits_ith (ctx, i), ref_logits, V);
    /* (the last row's flip excuses the first greedy choice) */
    flipped = routing_flip (&run, d, tol);
    if (!flipped)
      worst = npu_err_max (worst, d);
  }
  for (step = 0; step < 5; step++) {
    const float *l = npu_llm_get_logits (ctx);
    double mx = -INFINITY, mn = INFINITY;

    tok = argmax_f (l, V);
    /* The runtime's choice is the reference's, or within tolerance of
     * it (two near-equal logits may swap under int8 rounding) */
    for (i = 0; i < V; i++) {
      mx = MAX (mx, ref_logits[i]);
      mn = MIN (mn, ref_logits[i]);
    }
    g_assert_true (flipped || ref_logits[tok] >= mx - tol * (mx - mn));
    run_eval (ctx, &tok, NULL, 1);
    npu_ref_llm_step_token (&run, tok, ref_logits);
    d = rel_diff (npu_llm_get_logits (ctx), ref_logits, V);
    flipped = routing_flip (&run, d, tol);
    if (!flipped)
      worst = npu_err_max (worst, d);
  }
  g_assert_cmpuint (n_flips, <=, MAX_FLIPS);
  npu_ref_llm_run_clear (&run);
  npu_llm_context_free (ctx);
  g_free (ref_logits);
  return worst;
}

static void
test_reference (gconstpointer data)
{
  const ModelConfig *cfg = data;
  static const gchar *const isas[] = { "scalar", "avx2", "avx512", "asimd",
    "neon"
  };
  guint ii;

  /* every kernel path this CPU has, on both weight layouts */
  for (ii = 0; ii < 2 * G_N_ELEMENTS (isas); ii++) {
    NpuLlmLoadFlags flags = ii & 1 ? NPU_LLM_LOAD_REPACK :
        NPU_LLM_LOAD_IN_PLACE;
    const gchar *isa = isas[ii / 2];
    TestModel tm;
    double worst, tol;

    if (!npu_matmul_set_isa (isas[ii / 2]))
      continue;
    tol = ii / 2 == 0 ? TOL_SCALAR : TOL_INT8;
    test_model_open_full (&tm, cfg, flags);
    g_assert_cmpuint (npu_llm_model_get_hparams (tm.model)->n_vocab, ==,
        tm.ref.vocab);
    worst = reference_run (&tm, tol);
    g_test_message ("%s on %s, %s: max |diff| / range = %.3g (bound %g; "
        "%u rows past it at a routing near-tie)", cfg->name, isa,
        flags ? "repacked" : "in place", worst, tol, n_flips);
    g_assert_true (worst <= tol);
    /* every matrix read where the file has it, whatever its type: the
     * model holds weights of its own only when asked to repack MXFP4 */
    if (cfg->wtype == NPU_GGML_TYPE_MXFP4 && flags)
      g_assert_cmpuint (npu_llm_model_get_converted_bytes (tm.model), >, 0);
    else
      g_assert_cmpuint (npu_llm_model_get_converted_bytes (tm.model), ==, 0);
    g_assert_cmpuint (npu_llm_model_get_decode_bytes (tm.model), ==,
        expected_decode_bytes (tm.gguf, flags != 0));
    test_model_close (&tm);
  }
  g_assert_true (npu_matmul_set_isa (native_isa));
}

/* One batch of PROMPT_LEN == the same tokens one at a time */
static void
test_batch_vs_decode (void)
{
  TestModel tm;
  NpuLlmContext *a, *b;
  gint32 prompt[PROMPT_LEN];
  double worst = 0;
  guint V, i;
  NpuLlmStats st;

  test_model_open (&tm, &configs[0]);
  V = tm.ref.vocab;
  make_prompt (prompt, PROMPT_LEN, V);
  a = new_ctx (tm.model, 64, 32, 4, TRUE);
  b = new_ctx (tm.model, 64, 32, 4, FALSE);
  run_eval (a, prompt, NULL, PROMPT_LEN);
  for (i = 0; i < PROMPT_LEN; i++) {
    run_eval (b, &prompt[i], NULL, 1);
    worst = npu_err_max (worst, rel_diff_f (npu_llm_get_logits_ith (a, i),
            npu_llm_get_logits (b), V));
  }
  g_test_message ("batch vs decode (%s): max |diff| / range = %.3g",
      npu_matmul_get_isa (), worst);
  /* Same quantised activations, only the kernels' summation order differs */
  g_assert_cmpfloat (worst, <=, 1e-5);

  npu_llm_context_get_stats (a, &st);
  g_assert_cmpuint (st.n_prefill, ==, PROMPT_LEN);
  g_assert_cmpuint (st.n_decode, ==, 0);
  npu_llm_context_get_stats (b, &st);
  g_assert_cmpuint (st.n_prefill, ==, 0);
  g_assert_cmpuint (st.n_decode, ==, PROMPT_LEN);
  g_assert_cmpuint (npu_llm_context_get_n_past (b), ==, PROMPT_LEN);

  /* reset: the same prompt again gives the same logits */
  npu_llm_context_reset (a);
  g_assert_null (npu_llm_get_logits (a));
  run_eval (a, prompt, NULL, PROMPT_LEN);
  g_assert_cmpfloat (rel_diff_f (npu_llm_get_logits (a),
          npu_llm_get_logits (b), V), <=, 1e-5);

  npu_llm_context_free (a);
  npu_llm_context_free (b);
  test_model_close (&tm);
}

/* Media embeddings spliced between text tokens */
static void
test_embeddings (void)
{
  TestModel tm;
  NpuLlmContext *ctx, *ctx2;
  NpuRefLlmRun run;
  gint32 prompt[PROMPT_LEN];
  guint V, dim, i, j;
  float *embd;
  double *ref_logits, *row, worst;
  GRand *rand = g_rand_new_with_seed (3);

  g_assert_true (npu_matmul_set_isa ("scalar"));
  test_model_open (&tm, &configs[1]);
  V = tm.ref.vocab;
  dim = tm.ref.dim;
  make_prompt (prompt, PROMPT_LEN, V);
  embd = g_new (float, 6 * dim);
  row = g_new (double, dim);
  for (i = 0; i < 6 * dim; i++)
    embd[i] = (float) g_rand_double_range (rand, -0.5, 0.5);
  ref_logits = g_new (double, V);

  ctx = new_ctx (tm.model, 64, 32, 4, FALSE);
  npu_ref_llm_run_init (&run, &tm.ref, 64, 4, 64);
  run_eval (ctx, prompt, NULL, 5);
  run_eval (ctx, NULL, embd, 6);
  run_eval (ctx, prompt + 5, NULL, 5);
  for (i = 0; i < 5; i++)
    npu_ref_llm_step_token (&run, prompt[i], ref_logits);
  for (i = 0; i < 6; i++) {
    for (j = 0; j < dim; j++)
      row[j] = embd[i * dim + j];
    npu_ref_llm_step (&run, row, ref_logits);
  }
  for (i = 5; i < 10; i++)
    npu_ref_llm_step_token (&run, prompt[i], ref_logits);
  worst = rel_diff (npu_llm_get_logits (ctx), ref_logits, V);
  g_test_message ("embeddings spliced: %.3g", worst);
  g_assert_cmpfloat (worst, <=, TOL_SCALAR);

  /* a token's own embedding row given as an embedding == the token */
  ctx2 = new_ctx (tm.model, 64, 32, 4, FALSE);
  npu_llm_context_reset (ctx);
  for (i = 0; i < 3; i++)
    for (j = 0; j < dim; j++)
      embd[i * dim + j] = (float) tm.ref.tok[(gsize) prompt[i] * dim + j];
  run_eval (ctx, prompt, NULL, 3);
  run_eval (ctx2, NULL, embd, 3);
  g_assert_cmpmem (npu_llm_get_logits (ctx), V * sizeof (float),
      npu_llm_get_logits (ctx2), V * sizeof (float));

  npu_llm_context_free (ctx);
  npu_llm_context_free (ctx2);
  npu_ref_llm_run_clear (&run);
  g_free (embd);
  g_free (row);
  g_free (ref_logits);
  g_rand_free (rand);
  test_model_close (&tm);
  g_assert_true (npu_matmul_set_isa (native_isa));
}

/* Past the context length: sinks + window, in chunks that cross the
 * eviction point, in one chunk longer than the window, and token by token */
static void
check_sliding (TestModel * tm, guint n_ctx, guint n_sink, guint n_batch,
    guint first_chunk, guint total)
{
  NpuLlmContext *ctx;
  NpuRefLlmRun run;
  gint32 *tokens = g_new (gint32, total);
  guint V = tm->ref.vocab, i;
  double *ref_logits = g_new (double, V), worst = 0;
  NpuLlmStats st;

  make_prompt (tokens, total, V);
  ctx = new_ctx (tm->model, n_ctx, n_batch, n_sink,
      first_chunk <= n_batch);
  npu_ref_llm_run_init (&run, &tm->ref, n_ctx, n_sink, total);
  run_eval (ctx, tokens, NULL, first_chunk);
  for (i = 0; i < first_chunk; i++) {
    npu_ref_llm_step_token (&run, tokens[i], ref_logits);
    if (first_chunk <= n_batch)
      worst = npu_err_max (worst, rel_diff (npu_llm_get_logits_ith (ctx, i),
              ref_logits, V));
  }
  worst = npu_err_max (worst, rel_diff (npu_llm_get_logits (ctx), ref_logits, V));
  for (; i < total; i++) {
    run_eval (ctx, &tokens[i], NULL, 1);
    npu_ref_llm_step_token (&run, tokens[i], ref_logits);
    worst = npu_err_max (worst, rel_diff (npu_llm_get_logits (ctx), ref_logits, V));
  }
  g_test_message ("sliding %s n_ctx %u sinks %u batch %u first %u total %u: "
      "%.3g", npu_kv_type_name (kv_type), n_ctx, n_sink, n_batch,
      first_chunk, total, worst);
  g_assert_true (worst <= tol_scalar ());
  npu_llm_context_get_stats (ctx, &st);
  g_assert_cmpuint (st.n_evicted, ==, total - n_ctx);
  g_assert_cmpuint (npu_llm_context_get_n_cached (ctx), ==, n_ctx - 1);

  npu_ref_llm_run_clear (&run);
  npu_llm_context_free (ctx);
  g_free (tokens);
  g_free (ref_logits);
}

static void
test_sliding (void)
{
  guint c;

  g_assert_true (npu_matmul_set_isa ("scalar"));
  for (c = 0; c < 2; c++) {
    TestModel tm;

    test_model_open (&tm, &configs[c]);
    /* prefill chunks of 8 cross the eviction point (n_ctx 16) */
    check_sliding (&tm, 16, 4, 8, 20, 60);
    /* one 40-token chunk, longer than the whole cache */
    check_sliding (&tm, 16, 4, 64, 40, 50);
    /* no sinks: a plain sliding window */
    check_sliding (&tm, 12, 0, 5, 13, 40);
    test_model_close (&tm);
  }
  g_assert_true (npu_matmul_set_isa (native_isa));
}

/* The cache in F16 and Q8_0 (scalar kernels): the reference run and the
 * sliding window within the type's bound, a batch equal to the same
 * tokens one at a time, the cache's size, and Q8_0 refused for heads that
 * are not a multiple of 32 */
static void
test_kv_type (gconstpointer data)
{
  static const guint cfgs[] = { 0, 1, 5 };
  guint c;

  g_assert_true (npu_matmul_set_isa ("scalar"));
  kv_type = GPOINTER_TO_INT (data);
  for (c = 0; c < G_N_ELEMENTS (cfgs); c++) {
    const ModelConfig *cfg = &configs[cfgs[c]];
    TestModel tm;
    const NpuLlmHParams *hp;
    NpuLlmContext *a, *b;
    NpuLlmStats st;
    gint32 prompt[PROMPT_LEN];
    double worst, diff = 0;
    gsize kv_dim, row;
    guint i;

    test_model_open (&tm, cfg);
    hp = npu_llm_model_get_hparams (tm.model);
    kv_dim = hp->n_head_kv * hp->head_dim;
    if (kv_type == NPU_KV_Q8_0 && hp->head_dim % 32 != 0) {
      NpuLlmContextParams p;
      GError *error = NULL;

      npu_llm_context_params_init (&p);
      p.kv_type = kv_type;
      g_assert_null (npu_llm_context_new (tm.model, &p, &error));
      g_assert_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID);
      g_assert_nonnull (strstr (error->message, "multiple of 32"));
      g_clear_error (&error);
      test_model_close (&tm);
      continue;
    }

    worst = reference_run (&tm, tol_scalar ());
    g_test_message ("%s, kv %s: max |diff| / range = %.3g (bound %g)",
        cfg->name, npu_kv_type_name (kv_type), worst, tol_scalar ());
    g_assert_true (worst <= tol_scalar ());
    check_sliding (&tm, 16, 4, 8, 20, 60);

    /* the chunk's own rows are read in the cache's type too */
    make_prompt (prompt, PROMPT_LEN, tm.ref.vocab);
    a = new_ctx (tm.model, 64, 32, 4, TRUE);
    b = new_ctx (tm.model, 64, 32, 4, FALSE);
    run_eval (a, prompt, NULL, PROMPT_LEN);
    for (i = 0; i < PROMPT_LEN; i++) {
      run_eval (b, &prompt[i], NULL, 1);
      diff = MAX (diff, rel_diff_f (npu_llm_get_logits_ith (a, i),
              npu_llm_get_logits (b), tm.ref.vocab));
    }
    g_assert_true (diff <= 1e-5);

    /* K and V, every layer, n_ctx rows */
    row = kv_type == NPU_KV_F16 ? kv_dim * 2 : kv_dim / 32 * 34;
    npu_llm_context_get_stats (a, &st);
    g_assert_cmpuint (st.kv_bytes, ==, 2 * hp->n_layer * 64 * row);
    npu_llm_context_free (a);
    npu_llm_context_free (b);
    test_model_close (&tm);
  }
  kv_type = NPU_KV_F32;
  g_assert_true (npu_matmul_set_isa (native_isa));
}

/* Accurate precision on the int8 paths: activations with their int8
 * residual, a per-product bound 254 times the int8 one's first term
 * (npumatmul.h), so TOL_INT8 / 254 plus the scalar rounding */
#define TOL_ACCURATE (TOL_INT8 / 254 + TOL_SCALAR)

static void
test_precision_accurate (void)
{
  static const gchar *const isas[] = { "avx2", "avx512", "asimd", "neon" };
  guint a, c;

  precision = NPU_MATMUL_PRECISION_ACCURATE;
  for (a = 0; a < G_N_ELEMENTS (isas); a++) {
    if (!npu_matmul_set_isa (isas[a]))
      continue;
    for (c = 0; c < G_N_ELEMENTS (configs); c++) {
      TestModel tm;
      double worst;

      test_model_open_full (&tm, &configs[c], NPU_LLM_LOAD_REPACK);
      worst = reference_run (&tm, TOL_ACCURATE);
      g_test_message ("%s on %s, accurate: max |diff| / range = %.3g "
          "(bound %.3g)", configs[c].name, isas[a], worst, TOL_ACCURATE);
      g_assert_true (worst <= TOL_ACCURATE);
      test_model_close (&tm);
    }
  }
  precision = NPU_MATMUL_PRECISION_FAST;
  g_assert_true (npu_matmul_set_isa (native_isa));
}

/* A prompt prefix kept (npu_llm_context_truncate()) and a new suffix
 * evaluated after it give the logits of the whole new prompt from a fresh
 * context; refused once the cache has slid */
static void
test_truncate (void)
{
  TestModel tm;
  NpuLlmContext *a, *b;
  gint32 p1[PROMPT_LEN], p2[PROMPT_LEN];
  guint V, i;
  double diff;

  test_model_open (&tm, &configs[0]);
  V = tm.ref.vocab;
  make_prompt (p1, PROMPT_LEN, V);
  memcpy (p2, p1, sizeof (p1));
  for (i = 12; i < PROMPT_LEN; i++)
    p2[i] = (p1[i] + 5) % V;
  a = new_ctx (tm.model, 64, 32, 4, FALSE);
  b = new_ctx (tm.model, 64, 32, 4, FALSE);
  run_eval (a, p1, NULL, PROMPT_LEN);
  run_eval (a, p1, NULL, 3);    /* an answer after the prompt */
  g_assert_false (npu_llm_context_truncate (a, PROMPT_LEN + 4));
  g_assert_true (npu_llm_context_truncate (a, 12));
  g_assert_null (npu_llm_get_logits (a));
  g_assert_cmpuint (npu_llm_context_get_n_past (a), ==, 12);
  run_eval (a, p2 + 12, NULL, PROMPT_LEN - 12);
  run_eval (b, p2, NULL, PROMPT_LEN);
  /* the kept prefix's keys are read from the cache's tiles, the fresh
   * context's from its batch rows: only the summation order differs */
  diff = rel_diff_f (npu_llm_get_logits (a), npu_llm_get_logits (b), V);
  g_test_message ("truncated and continued vs fresh: max |diff| / range = "
      "%.3g", diff);
  g_assert_true (npu_within (diff, 1e-5));
  npu_llm_context_free (a);

  /* past n_ctx the first slots were overwritten: no truncation */
  a = new_ctx (tm.model, 16, 8, 4, FALSE);
  run_eval (a, p1, NULL, 16);
  g_assert_true (npu_llm_context_truncate (a, 10));
  run_eval (a, p1, NULL, 10);
  g_assert_false (npu_llm_context_truncate (a, 5));
  g_assert_cmpuint (npu_llm_context_get_n_past (a), ==, 20);
  npu_llm_context_reset (a);
  run_eval (a, p1, NULL, 6);
  g_assert_true (npu_llm_context_truncate (a, 5));
  npu_llm_context_free (a);
  npu_llm_context_free (b);
  test_model_close (&tm);
}

/* 500 decode steps, wrapping the ring many times, allocate nothing */
static void
test_no_alloc (void)
{
  TestModel tm;
  NpuLlmContext *ctx;
  NpuLlmStats st0, st1;
  struct mallinfo2 m0, m1;
  gint32 tok = 5;
  guint i;
  glong growth;

  test_model_open (&tm, &configs[0]);
  ctx = new_ctx (tm.model, 64, 16, 4, FALSE);
  for (i = 0; i < 20; i++) {
    run_eval (ctx, &tok, NULL, 1);
    tok = argmax_f (npu_llm_get_logits (ctx), tm.ref.vocab);
  }
  npu_llm_context_get_stats (ctx, &st0);
  m0 = mallinfo2 ();
  for (i = 0; i < 500; i++) {
    run_eval (ctx, &tok, NULL, 1);
    tok = argmax_f (npu_llm_get_logits (ctx), tm.ref.vocab);
  }
  m1 = mallinfo2 ();
  npu_llm_context_get_stats (ctx, &st1);
  growth = (glong) m1.uordblks - (glong) m0.uordblks;
  g_test_message ("heap in use: %zu -> %zu bytes over 500 steps "
      "(KV cache %zu bytes, scratch %zu, %u allocations)", m0.uordblks,
      m1.uordblks, st1.kv_bytes, st1.scratch_bytes, st1.n_allocs);
  g_assert_cmpuint (st1.n_allocs, ==, st0.n_allocs);
  g_assert_cmpint (ABS (growth), <=, 4096);
  g_assert_cmpuint (st1.n_decode, ==, 520);
  g_assert_cmpuint (st1.n_evicted, ==, 520 - 64);
  npu_llm_context_free (ctx);
  test_model_close (&tm);
}

/* ------------------------------------------------------------------------
 * Errors
 */

typedef struct
{
  NpuGguf *gguf;
  const gchar *hide;            /* report as absent */
  const gchar *reshape;         /* report with ne[1] + 1 */
  const gchar *retype;          /* report as @as_type (0: Q2_K, which has
                                 * no decoder here) */
  const gchar *shorten;         /* report one block fewer bytes */
  const gchar *regroup;         /* report with ne[2] + 1 */
  guint32 as_type;
} Doctor;

static gboolean
doctor_lookup (const gchar * name, NpuTensorView * out, gpointer user_data)
{
  Doctor *d = user_data;
  const NpuGgufTensor *t = npu_gguf_find_tensor (d->gguf, name);
  guint i;

  if (!t || (d->hide && strcmp (name, d->hide) == 0))
    return FALSE;
  out->type = t->type;
  for (i = 0; i < 4; i++)
    out->ne[i] = t->ne[i];
  out->data = t->data;
  if (d->reshape && strcmp (name, d->reshape) == 0)
    out->ne[1] += 1;
  if (d->retype && strcmp (name, d->retype) == 0)
    out->type = d->as_type ? d->as_type : NPU_GGML_TYPE_Q2_K;
  out->size = t->n_bytes;
  if (d->shorten && strcmp (name, d->shorten) == 0)
    out->size -= sizeof (NpuBlockMxfp4);
  if (d->regroup && strcmp (name, d->regroup) == 0)
    out->ne[2] += 1;
  return TRUE;
}

static void
expect_doctored_error (TestModel * tm, const Doctor * doc, gint code,
    const gchar * text)
{
  Doctor d = *doc;
  NpuLlmHParams hp;
  NpuLlmModel *m;
  GError *error = NULL;

  d.gguf = tm->gguf;
  g_assert_true (npu_llm_hparams_from_gguf (tm->gguf, &hp, NULL));
  m = npu_llm_model_new (&hp, doctor_lookup, &d, NPU_LLM_LOAD_IN_PLACE,
      &error);
  g_assert_null (m);
  g_assert_error (error, NPU_LLM_ERROR, code);
  if (!strstr (error->message, text))
    g_error ("'%s' does not contain '%s'", error->message, text);
  g_clear_error (&error);
}

static void
expect_model_error (TestModel * tm, const gchar * hide, const gchar * reshape,
    const gchar * retype, gint code, const gchar * text)
{
  Doctor d = { tm->gguf, hide, reshape, retype, NULL, NULL };
  NpuLlmHParams hp;
  NpuLlmModel *m;
  GError *error = NULL;

  g_assert_true (npu_llm_hparams_from_gguf (tm->gguf, &hp, NULL));
  m = npu_llm_model_new (&hp, doctor_lookup, &d, NPU_LLM_LOAD_IN_PLACE,
      &error);
  g_assert_null (m);
  g_assert_error (error, NPU_LLM_ERROR, code);
  if (!strstr (error->message, text))
    g_error ("'%s' does not contain '%s'", error->message, text);
  g_clear_error (&error);
}

static NpuGguf *
meta_gguf (const gchar * arch, const gchar * scaling, gfloat factor,
    gboolean drop_eps, GBytes ** bytes)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  gchar key[128];
  NpuGguf *g;

#define K(s) (g_snprintf (key, sizeof (key), "%s." s, arch), key)
  npu_gguf_writer_add_string (w, "general.architecture", arch, -1, NULL);
  npu_gguf_writer_add_u32 (w, K ("context_length"), 256, NULL);
  npu_gguf_writer_add_u32 (w, K ("embedding_length"), 64, NULL);
  npu_gguf_writer_add_u32 (w, K ("block_count"), 2, NULL);
  npu_gguf_writer_add_u32 (w, K ("feed_forward_length"), 128, NULL);
  npu_gguf_writer_add_u32 (w, K ("attention.head_count"), 4, NULL);
  npu_gguf_writer_add_u32 (w, K ("attention.head_count_kv"), 2, NULL);
  if (!drop_eps)
    npu_gguf_writer_add_f32 (w, K ("attention.layer_norm_rms_epsilon"), 1e-5f,
        NULL);
  if (scaling)
    npu_gguf_writer_add_string (w, K ("rope.scaling.type"), scaling, -1, NULL);
  if (factor > 0)
    npu_gguf_writer_add_f32 (w, K ("rope.scaling.factor"), factor, NULL);
#undef K
  *bytes = npu_gguf_writer_write_bytes (w, NULL);
  npu_gguf_writer_free (w);
  g = npu_gguf_open_bytes (g_bytes_get_data (*bytes, NULL),
      g_bytes_get_size (*bytes), NULL);
  g_assert_nonnull (g);
  return g;
}

static void
expect_hparams (const gchar * arch, const gchar * scaling, gfloat factor,
    gboolean drop_eps, gint code, const gchar * text, NpuLlmHParams * out)
{
  GBytes *bytes;
  NpuGguf *g = meta_gguf (arch, scaling, factor, drop_eps, &bytes);
  NpuLlmHParams hp;
  GError *error = NULL;
  gboolean ok = npu_llm_hparams_from_gguf (g, &hp, &error);

  if (text) {
    g_assert_false (ok);
    g_assert_error (error, NPU_LLM_ERROR, code);
    if (!strstr (error->message, text))
      g_error ("'%s' does not contain '%s'", error->message, text);
    g_clear_error (&error);
  } else {
    g_assert_no_error (error);
    *out = hp;
  }
  npu_gguf_free (g);
  g_bytes_unref (bytes);
}

static void
test_errors (void)
{
  TestModel tm, tq;
  NpuLlmHParams hp;
  NpuLlmContext *ctx;
  NpuLlmContextParams cp;
  GError *error = NULL;
  gint32 bad = 100000, toks[8] = { 0, };

  expect_hparams ("mamba", NULL, 0, FALSE, NPU_LLM_ERROR_UNSUPPORTED,
      "unsupported architecture 'mamba' (supported: llama, qwen2, qwen3, "
      "gpt-oss, gemma3)", NULL);
  expect_hparams ("llama", "longrope", 4, FALSE, NPU_LLM_ERROR_UNSUPPORTED,
      "rope.scaling.type 'longrope'", NULL);
  /* YaRN, for any architecture as llama.cpp reads it: the original
   * context defaults to context_length, the betas to 32 and 1 */
  expect_hparams ("llama", "yarn", 4, FALSE, 0, NULL, &hp);
  g_assert_true (hp.rope_yarn);
  g_assert_cmpfloat (hp.rope_freq_scale, ==, 0.25f);
  g_assert_cmpuint (hp.yarn_orig_ctx, ==, 256);
  g_assert_cmpfloat (hp.yarn_beta_fast, ==, 32.0f);
  g_assert_cmpfloat (hp.yarn_beta_slow, ==, 1.0f);
  /* gpt-oss without its expert keys */
  expect_hparams ("gpt-oss", NULL, 0, FALSE, NPU_LLM_ERROR_MISSING,
      "gpt-oss.expert_count", NULL);
  expect_hparams ("llama", NULL, 0, TRUE, NPU_LLM_ERROR_MISSING,
      "llama.attention.layer_norm_rms_epsilon", NULL);
  expect_hparams ("qwen2", "linear", 4, FALSE, 0, NULL, &hp);
  g_assert_cmpfloat (hp.rope_freq_scale, ==, 0.25f);
  g_assert_cmpint (hp.rope_type, ==, NPU_LLM_ROPE_NEOX);
  g_assert_cmpuint (hp.n_head_kv, ==, 2);
  g_assert_cmpuint (hp.n_rot, ==, 16);
  expect_hparams ("llama", NULL, 2, FALSE, 0, NULL, &hp);
  g_assert_cmpfloat (hp.rope_freq_scale, ==, 0.5f);
  g_assert_cmpint (hp.rope_type, ==, NPU_LLM_ROPE_NORM);
  g_assert_cmpfloat (hp.rope_freq_base, ==, 10000.0f);
  expect_hparams ("qwen3", NULL, 0, FALSE, 0, NULL, &hp);
  g_assert_cmpint (hp.arch, ==, NPU_LLM_ARCH_QWEN3);
  g_assert_cmpint (hp.rope_type, ==, NPU_LLM_ROPE_NEOX);

  test_model_open (&tm, &configs[0]);
  expect_model_error (&tm, "blk.1.ffn_up.weight", NULL, NULL,
      NPU_LLM_ERROR_MISSING, "tensor 'blk.1.ffn_up.weight' not found");
  expect_model_error (&tm, NULL, "blk.0.attn_k.weight", NULL,
      NPU_LLM_ERROR_SHAPE, "tensor 'blk.0.attn_k.weight' has shape [64, 33");
  expect_model_error (&tm, NULL, NULL, "blk.0.ffn_down.weight",
      NPU_LLM_ERROR_UNSUPPORTED, "'blk.0.ffn_down.weight' has type q2_K");
  expect_model_error (&tm, NULL, NULL, "token_embd.weight",
      NPU_LLM_ERROR_UNSUPPORTED, "'token_embd.weight' has type q2_K");
  {
    /* a short buffer (a weights pad's) for a matrix, the embeddings and a
     * norm: named, never read past */
    static const gchar *const shortened[] = { "blk.0.attn_q.weight",
      "token_embd.weight", "output.weight", "blk.1.ffn_norm.weight"
    };
    guint s;

    for (s = 0; s < G_N_ELEMENTS (shortened); s++) {
      Doctor d = { tm.gguf, NULL, NULL, NULL, shortened[s], NULL, 0 };
      gchar *want = g_strdup_printf ("tensor '%s' is truncated",
          shortened[s]);

      expect_doctored_error (&tm, &d, NPU_LLM_ERROR_SHAPE, want);
      g_free (want);
    }
  }
  {
    /* a type we read, but rows (ff = 192) that are not whole blocks */
    Doctor d = { tm.gguf, NULL, NULL, "blk.0.ffn_down.weight", NULL, NULL,
      NPU_GGML_TYPE_Q4_K
    };
    expect_doctored_error (&tm, &d, NPU_LLM_ERROR_SHAPE,
        "tensor 'blk.0.ffn_down.weight': row length 192 is not a whole "
        "number of q4_K blocks of 256");
  }
  expect_model_error (&tm, "output_norm.weight", NULL, NULL,
      NPU_LLM_ERROR_MISSING, "output_norm.weight");

  /* bad input to a context */
  ctx = new_ctx (tm.model, 8, 4, 2, FALSE);
  g_assert_false (npu_llm_eval_tokens (ctx, NULL, &bad, 1, &error));
  g_assert_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID);
  g_assert_nonnull (strstr (error->message, "token 100000"));
  g_clear_error (&error);
  g_assert_cmpuint (npu_llm_context_get_n_past (ctx), ==, 0);
  npu_llm_context_free (ctx);

  npu_llm_context_params_init (&cp);
  cp.n_ctx = 8;
  cp.streaming = FALSE;
  ctx = npu_llm_context_new (tm.model, &cp, &error);
  g_assert_no_error (error);
  g_assert_true (npu_llm_eval_tokens (ctx, NULL, toks, 6, &error));
  g_assert_false (npu_llm_eval_tokens (ctx, NULL, toks, 3, &error));
  g_assert_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_CONTEXT_FULL);
  g_clear_error (&error);
  g_assert_true (npu_llm_eval_tokens (ctx, NULL, toks, 2, &error));
  npu_llm_context_free (ctx);

  cp.n_ctx = 8;
  cp.n_sink = 8;
  g_assert_null (npu_llm_context_new (tm.model, &cp, &error));
  g_assert_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID);
  g_clear_error (&error);
  test_model_close (&tm);

  /* qwen2 needs its q/k/v biases */
  test_model_open (&tq, &configs[1]);
  expect_model_error (&tq, "blk.0.attn_v.bias", NULL, NULL,
      NPU_LLM_ERROR_MISSING, "tensor 'blk.0.attn_v.bias' not found");
  test_model_close (&tq);

  /* qwen3 needs both per-head norms, of head_dim (32) weights */
  test_model_open (&tq, &configs[6]);
  expect_model_error (&tq, "blk.1.attn_k_norm.weight", NULL, NULL,
      NPU_LLM_ERROR_MISSING, "tensor 'blk.1.attn_k_norm.weight' not found");
  expect_model_error (&tq, NULL, "blk.0.attn_q_norm.weight", NULL,
      NPU_LLM_ERROR_SHAPE, "tensor 'blk.0.attn_q_norm.weight' has shape");
  test_model_close (&tq);

  /* the file path: errors name the file */
  g_assert_null (npu_llm_model_new_from_file ("/nonexistent/model.gguf",
          NPU_LLM_LOAD_IN_PLACE, &error));
  g_assert_nonnull (error);
  g_clear_error (&error);
}

/* ------------------------------------------------------------------------
 * gpt-oss
 */

/* the last two (gpt-oss's) */
#define GPT_OSS_CFG (&configs[G_N_ELEMENTS (configs) - 2])

/* @total tokens into a cache that never slides, in calls of @n_batch, every
 * row against the reference: the sliding layer's window of 128 and the
 * sinks past it, chunks that straddle its edge */
static void
check_window (TestModel * tm, guint n_ctx, guint n_batch, guint total)
{
  NpuLlmContext *ctx = new_ctx (tm->model, n_ctx, n_batch, 4, TRUE);
  NpuRefLlmRun run;
  gint32 *tokens = g_new (gint32, total);
  guint V = tm->ref.vocab, i, done;
  double *ref_logits = g_new (double, V), worst = 0, past = 0;

  make_prompt (tokens, total, V);
  npu_ref_llm_run_init (&run, &tm->ref, n_ctx, 4, total);
  for (done = 0; done < total; done += n_batch) {
    guint n = MIN (n_batch, total - done);

    run_eval (ctx, tokens + done, NULL, n);
    for (i = 0; i < n; i++) {
      double d;

      npu_ref_llm_step_token (&run, tokens[done + i], ref_logits);
      d = rel_diff (npu_llm_get_logits_ith (ctx, i), ref_logits, V);
      worst = npu_err_max (worst, d);
      if (done + i >= tm->ref.n_swa)
        past = npu_err_max (past, d);
    }
  }
  g_test_message ("window: n_ctx %u batch %u total %u: %.3g (past the "
      "window %.3g)", n_ctx, n_batch, total, worst, past);
  g_assert_true (worst <= tol_scalar ());
  npu_ref_llm_run_clear (&run);
  npu_llm_context_free (ctx);
  g_free (tokens);
  g_free (ref_logits);
}

/* Past the sliding window (128) on scalar kernels: a cache that holds
 * everything, then one that slides itself (StreamingLLM sinks and ring)
 * under the layer's window.  Under valgrind (NPU_UNDER_VALGRIND), where
 * the whole test took 90 s, the reference's libm calls most of it: one
 * configuration, 140 tokens (still 12 past the window, in chunks that
 * straddle its edge), the sliding caches left to the native run. */
static void
test_gpt_oss_window (void)
{
  gboolean vg = g_getenv ("NPU_UNDER_VALGRIND") != NULL;
  guint c;

  g_assert_true (npu_matmul_set_isa ("scalar"));
  for (c = 0; c < (vg ? 1 : 2); c++) {
    TestModel tm;

    test_model_open (&tm, GPT_OSS_CFG + c);
    g_assert_cmpuint (tm.ref.n_swa, ==, 128);
    check_window (&tm, 256, 40, vg ? 140 : 170);
    if (!vg) {
      check_sliding (&tm, 150, 4, 64, 64, 200);
      check_sliding (&tm, 140, 0, 48, 130, 170);
    }
    test_model_close (&tm);
  }
  g_assert_true (npu_matmul_set_isa (native_isa));
}

#define MOE_D 64
#define MOE_F 32
#define MOE_E 8
#define MOE_K 4

typedef struct
{
  float router[MOE_E * MOE_D], router_b[MOE_E];
  NpuBlockMxfp4 gate[MOE_E * MOE_F * MOE_D / 32];
  NpuBlockMxfp4 up[MOE_E * MOE_F * MOE_D / 32];
  NpuBlockMxfp4 down[MOE_E * MOE_D * MOE_F / 32];
  float bg[MOE_E * MOE_F], bu[MOE_E * MOE_F], bd[MOE_E * MOE_D];
} MoeWeights;

static gboolean
moe_lookup (const gchar * name, NpuTensorView * out, gpointer user_data)
{
  MoeWeights *m = user_data;
  guint64 ne[3] = { MOE_D, MOE_E, 1 };
  guint32 type = NPU_GGML_TYPE_F32;
  gconstpointer data = NULL;
  gsize size = 0;

#define IS(s) (strcmp (name, "blk.0." s) == 0)
#define SET(p, a, b, c) (data = p, size = sizeof (p), ne[0] = a, ne[1] = b, \
    ne[2] = c)
  if (IS ("ffn_gate_inp.weight"))
    SET (m->router, MOE_D, MOE_E, 1);
  else if (IS ("ffn_gate_inp.bias"))
    SET (m->router_b, MOE_E, 1, 1);
  else if (IS ("ffn_gate_exps.bias"))
    SET (m->bg, MOE_F, MOE_E, 1);
  else if (IS ("ffn_up_exps.bias"))
    SET (m->bu, MOE_F, MOE_E, 1);
  else if (IS ("ffn_down_exps.bias"))
    SET (m->bd, MOE_D, MOE_E, 1);
  else {
    type = NPU_GGML_TYPE_MXFP4;
    if (IS ("ffn_gate_exps.weight"))
      SET (m->gate, MOE_D, MOE_F, MOE_E);
    else if (IS ("ffn_up_exps.weight"))
      SET (m->up, MOE_D, MOE_F, MOE_E);
    else if (IS ("ffn_down_exps.weight"))
      SET (m->down, MOE_F, MOE_D, MOE_E);
    else
      return FALSE;
  }
#undef SET
#undef IS
  npu_tensor_view_init (out, type, ne[2] > 1 ? 3 : ne[1] > 1 ? 2 : 1, ne,
      data, size);
  return TRUE;
}

static double *
dequant (const NpuBlockMxfp4 * b, gsize n)
{
  float *f = g_new (float, n);
  double *d = g_new (double, n);
  gsize i;

  npu_mxfp4_dequantize (b, f, n);
  for (i = 0; i < n; i++)
    d[i] = f[i];
  g_free (f);
  return d;
}

static double *
widen (const float *f, gsize n)
{
  double *d = g_new (double, n);
  gsize i;

  for (i = 0; i < n; i++)
    d[i] = f[i];
  return d;
}

static void
moe_random (MoeWeights * m, GRand * rng, double gain)
{
  float *w = g_new (float, MOE_E * MOE_F * MOE_D);
  guint i;

  for (i = 0; i < MOE_E * MOE_D; i++)
    m->router[i] = g_rand_double_range (rng, -0.3, 0.3);
  for (i = 0; i < MOE_E; i++)
    m->router_b[i] = g_rand_double_range (rng, -1, 1);
  for (i = 0; i < MOE_E * MOE_F; i++) {
    m->bg[i] = g_rand_double_range (rng, -1, 1);
    m->bu[i] = g_rand_double_range (rng, -1, 1);
  }
  for (i = 0; i < MOE_E * MOE_D; i++)
    m->bd[i] = g_rand_double_range (rng, -1, 1);
  for (i = 0; i < MOE_E * MOE_F * MOE_D; i++)
    w[i] = g_rand_double_range (rng, -gain, gain);
  npu_mxfp4_quantize_f32 (w, m->gate, MOE_E * MOE_F * MOE_D);
  for (i = 0; i < MOE_E * MOE_F * MOE_D; i++)
    w[i] = g_rand_double_range (rng, -gain, gain);
  npu_mxfp4_quantize_f32 (w, m->up, MOE_E * MOE_F * MOE_D);
  for (i = 0; i < MOE_E * MOE_F * MOE_D; i++)
    w[i] = g_rand_double_range (rng, -0.2, 0.2);
  npu_mxfp4_quantize_f32 (w, m->down, MOE_E * MOE_F * MOE_D);
  g_free (w);
}

/* The layer on @n rows of @x against npu_ref_llm_moe(); returns how many
 * gate and up values of the selected experts the clamp at 7 cut */
static guint
moe_check (MoeWeights * m, const float *x, guint n, const guint * want_sel)
{
  NpuLlmHParams hp = { 0, };
  NpuLlmMoe moe;
  NpuLlmMoeScratch s;
  NpuBytes bytes = { {0}, {0} };
  NpuRefLlm r = { 0, };
  NpuRefLlmLayer l = { 0, };
  GError *error = NULL;
  float *y = g_new (float, n * MOE_D);
  double yr[MOE_D], xd[MOE_D];
  guint t, i, j, clamped = 0;

  hp.arch = NPU_LLM_ARCH_GPT_OSS;
  hp.n_embd = r.dim = MOE_D;
  hp.n_ff_exp = r.ff = MOE_F;
  hp.n_expert = r.n_expert = MOE_E;
  hp.n_expert_used = r.n_used = MOE_K;
  g_assert_true (npu_llm_moe_load (&moe, &hp, moe_lookup, m, 0, NULL,
          &error));
  g_assert_no_error (error);
  npu_llm_moe_scratch_init (&s, &hp, n);
  npu_llm_moe_forward (&moe, NULL, NPU_MATMUL_PRECISION_FAST, x, n, y, &s,
      &bytes);
  l.router = widen (m->router, MOE_E * MOE_D);
  l.router_b = widen (m->router_b, MOE_E);
  l.bg = widen (m->bg, MOE_E * MOE_F);
  l.bu = widen (m->bu, MOE_E * MOE_F);
  l.bd = widen (m->bd, MOE_E * MOE_D);
  l.wg = dequant (m->gate, MOE_E * MOE_F * MOE_D);
  l.wu = dequant (m->up, MOE_E * MOE_F * MOE_D);
  l.wd = dequant (m->down, MOE_E * MOE_F * MOE_D);
  for (t = 0; t < n; t++) {
    double mx = 0, err = 0;

    for (i = 0; i < MOE_D; i++)
      xd[i] = x[t * MOE_D + i];
    npu_ref_llm_moe (&r, &l, xd, yr);
    for (i = 0; i < MOE_D; i++) {
      mx = MAX (mx, fabs (yr[i]));
      err = MAX (err, fabs (y[t * MOE_D + i] - yr[i]));
    }
    g_assert_cmpfloat (err, <=, 1e-5 * mx);
    if (want_sel)
      for (j = 0; j < MOE_K; j++)
        g_assert_cmpuint (s.sel[t * MOE_K + j], ==, want_sel[j]);
    /* the pre-activations of the experts it chose, in double */
    for (j = 0; j < MOE_K; j++) {
      guint e = s.sel[t * MOE_K + j], f;

      for (f = 0; f < MOE_F; f++) {
        double g = l.bg[e * MOE_F + f], u = l.bu[e * MOE_F + f];

        for (i = 0; i < MOE_D; i++) {
          g += l.wg[((gsize) e * MOE_F + f) * MOE_D + i] * xd[i];
          u += l.wu[((gsize) e * MOE_F + f) * MOE_D + i] * xd[i];
        }
        clamped += (g > 7.0) + (fabs (u) > 7.0);
      }
    }
  }
  g_free (l.router);
  g_free (l.router_b);
  g_free (l.bg);
  g_free (l.bu);
  g_free (l.bd);
  g_free (l.wg);
  g_free (l.wu);
  g_free (l.wd);
  npu_llm_moe_scratch_clear (&s);
  npu_llm_moe_clear (&moe);
  g_free (y);
  return clamped;
}

/* The mixture of experts alone, scalar kernels (exact F32 products)
 * against the double reference: routing ties, biases, the clamp, rows
 * that share experts in one product */
static void
test_gpt_oss_moe (void)
{
  MoeWeights *m = g_new0 (MoeWeights, 1);
  GRand *rng = g_rand_new_with_seed (27);
  float x[3 * MOE_D];
  static const float tie_b[MOE_E] = { 1, 3, 3, 0, 3, 3, 3, 2 };
  static const guint tie_sel[MOE_K] = { 1, 2, 4, 5 };
  guint i, clamped;

  g_assert_true (npu_matmul_set_isa ("scalar"));
  moe_random (m, rng, 0.4);
  for (i = 0; i < 3 * MOE_D; i++)
    x[i] = g_rand_double_range (rng, -1, 1);
  /* ties: no router weights, five experts at the same logit; the four
   * lowest win, with equal weights */
  memset (m->router, 0, sizeof (m->router));
  memcpy (m->router_b, tie_b, sizeof (tie_b));
  moe_check (m, x, 3, tie_sel);
  /* random routing, three rows at once (some experts shared) */
  moe_random (m, rng, 0.4);
  clamped = moe_check (m, x, 3, NULL);
  g_test_message ("gain 0.4: %u values clamped", clamped);
  /* weights large enough that the clamp at 7 cuts many gate and up
   * values: checked to happen, not assumed */
  moe_random (m, rng, 2.0);
  clamped = moe_check (m, x, 3, NULL);
  g_test_message ("gain 2: %u values clamped", clamped);
  g_assert_cmpuint (clamped, >, 3 * MOE_K * MOE_F / 8);
  g_rand_free (rng);
  g_free (m);
  g_assert_true (npu_matmul_set_isa (native_isa));
}

/* Bad gpt-oss files: errors name the tensor */
static void
test_gpt_oss_errors (void)
{
  TestModel tm;
  Doctor d = { 0, };
  const NpuGgufTensor *t;
  GError *error = NULL;
  gchar *cut;
  gsize end;

  test_model_open (&tm, GPT_OSS_CFG);
  /* experts whose shapes disagree: up's rows, down's expert count */
  d.reshape = "blk.1.ffn_up_exps.weight";
  expect_doctored_error (&tm, &d, NPU_LLM_ERROR_SHAPE,
      "tensor 'blk.1.ffn_up_exps.weight' has shape [64, 65, 8, 1], "
      "expected [64, 64, 8]");
  d.reshape = NULL;
  d.regroup = "blk.0.ffn_down_exps.weight";
  expect_doctored_error (&tm, &d, NPU_LLM_ERROR_SHAPE,
      "tensor 'blk.0.ffn_down_exps.weight' has shape [64, 64, 9, 1]");
  d.regroup = NULL;
  /* a router of another expert count */
  d.reshape = "blk.0.ffn_gate_inp.weight";
  expect_doctored_error (&tm, &d, NPU_LLM_ERROR_SHAPE,
      "tensor 'blk.0.ffn_gate_inp.weight' routes to 9 experts, but "
      "expert_count is 8");
  d.reshape = NULL;
  /* a truncated expert tensor (a weights pad's short buffer) */
  d.shorten = "blk.1.ffn_gate_exps.weight";
  expect_doctored_error (&tm, &d, NPU_LLM_ERROR_SHAPE,
      "tensor 'blk.1.ffn_gate_exps.weight' is truncated: 17391 bytes where "
      "its shape needs 17408");
  d.shorten = NULL;
  d.retype = "blk.0.ffn_up_exps.weight";
  expect_doctored_error (&tm, &d, NPU_LLM_ERROR_UNSUPPORTED,
      "tensor 'blk.0.ffn_up_exps.weight' has type q2_K (expert tensors "
      "must be mxfp4");
  d.retype = NULL;
  d.hide = "blk.1.attn_sinks.weight";
  expect_doctored_error (&tm, &d, NPU_LLM_ERROR_MISSING,
      "tensor 'blk.1.attn_sinks.weight' not found");
  d.hide = "blk.0.ffn_down_exps.bias";
  expect_doctored_error (&tm, &d, NPU_LLM_ERROR_MISSING,
      "tensor 'blk.0.ffn_down_exps.bias' not found");

  /* a truncated file: cut in the middle of the last layer's down experts */
  t = npu_gguf_find_tensor (tm.gguf, "blk.1.ffn_down_exps.weight");
  end = t->offset + t->n_bytes / 2;
  cut = g_build_filename (tmpdir, "gpt-oss-cut.gguf", NULL);
  {
    gchar *bytes;
    gsize len;

    g_assert_true (g_file_get_contents (tm.path, &bytes, &len, NULL));
    g_assert_cmpuint (end, <, len);
    g_assert_true (g_file_set_contents (cut, bytes, end, NULL));
    g_free (bytes);
  }
  g_assert_null (npu_llm_model_new_from_file (cut, NPU_LLM_LOAD_IN_PLACE,
          &error));
  g_assert_nonnull (error);
  if (!strstr (error->message, "'blk.1.ffn_down_exps.weight'"))
    g_error ("'%s' does not name the tensor", error->message);
  g_test_message ("%s", error->message);
  g_clear_error (&error);
  g_unlink (cut);
  g_free (cut);
  test_model_close (&tm);
}

/* ------------------------------------------------------------------------
 * Sampling
 */

static NpuLlmSampler *
new_sampler (gfloat temp, guint top_k, gfloat top_p, gfloat min_p,
    gfloat penalty, guint64 seed, guint n_vocab)
{
  NpuLlmSamplerParams p;
  NpuLlmSampler *s;
  GError *error = NULL;

  npu_llm_sampler_params_init (&p);
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = penalty;
  p.seed = seed;
  s = npu_llm_sampler_new (&p, n_vocab, &error);
  g_assert_no_error (error);
  return s;
}

static void
test_sample_basic (void)
{
  GRand *rand = g_rand_new_with_seed (11);
  guint V = 1000, i, j, differ = 0;
  float *l = g_new (float, V);
  NpuLlmSampler *a, *b, *c, *greedy, *k1;

  a = new_sampler (0.8f, 40, 0.95f, 0.05f, 1.1f, 42, V);
  b = new_sampler (0.8f, 40, 0.95f, 0.05f, 1.1f, 42, V);
  c = new_sampler (0.8f, 40, 0.95f, 0.05f, 1.1f, 43, V);
  greedy = new_sampler (0.0f, 0, 1.0f, 0.0f, 1.0f, 1, V);
  k1 = new_sampler (1.5f, 1, 1.0f, 0.0f, 1.0f, 1, V);
  for (i = 0; i < 300; i++) {
    gint32 ta, tb, tc;

    for (j = 0; j < V; j++)
      l[j] = (float) g_rand_double_range (rand, -4, 4);
    ta = npu_llm_sampler_sample (a, l);
    tb = npu_llm_sampler_sample (b, l);
    tc = npu_llm_sampler_sample (c, l);
    npu_llm_sampler_accept (a, ta);
    npu_llm_sampler_accept (b, tb);
    npu_llm_sampler_accept (c, tc);
    g_assert_cmpint (ta, ==, tb);
    differ += ta != tc;
    g_assert_cmpint (npu_llm_sampler_sample (greedy, l), ==,
        argmax_f (l, V));
    g_assert_cmpint (npu_llm_sampler_sample (k1, l), ==, argmax_f (l, V));
  }
  g_assert_cmpuint (differ, >, 100);

  /* reset: the same sequence again */
  npu_llm_sampler_reset (a);
  npu_llm_sampler_reset (b);
  for (j = 0; j < V; j++)
    l[j] = (float) g_rand_double_range (rand, -1, 1);
  for (i = 0; i < 50; i++) {
    gint32 t = npu_llm_sampler_sample (a, l);

    npu_llm_sampler_accept (a, t);
    npu_llm_sampler_accept (b, npu_llm_sampler_sample (b, l));
  }
  npu_llm_sampler_reset (a);
  npu_llm_sampler_reset (b);
  for (i = 0; i < 50; i++) {
    gint32 t = npu_llm_sampler_sample (a, l);

    g_assert_cmpint (t, ==, npu_llm_sampler_sample (b, l));
    npu_llm_sampler_accept (a, t);
    npu_llm_sampler_accept (b, t);
  }

  npu_llm_sampler_free (a);
  npu_llm_sampler_free (b);
  npu_llm_sampler_free (c);
  npu_llm_sampler_free (greedy);
  npu_llm_sampler_free (k1);
  g_free (l);
  g_rand_free (rand);
}

static void
test_sample_penalty (void)
{
  float pos[4] = { 3.0f, 2.9f, -1.0f, -1.05f };
  float neg[3] = { -1.0f, -1.1f, -5.0f };
  NpuLlmSampler *s = new_sampler (0.0f, 0, 1.0f, 0.0f, 1.2f, 0, 4);
  NpuLlmSampler *t = new_sampler (0.0f, 0, 1.0f, 0.0f, 1.2f, 0, 3);
  guint i;

  g_assert_cmpint (npu_llm_sampler_sample (s, pos), ==, 0);
  /* positive logit divided: 3.0 / 1.2 = 2.5 < 2.9; twice in the history
   * still counts once (2.5, not 2.08) */
  npu_llm_sampler_accept (s, 0);
  npu_llm_sampler_accept (s, 0);
  g_assert_cmpint (npu_llm_sampler_sample (s, pos), ==, 1);
  /* 2.9 / 1.2 = 2.42 < 2.5 */
  npu_llm_sampler_accept (s, 1);
  g_assert_cmpint (npu_llm_sampler_sample (s, pos), ==, 0);
  /* out of the last 64: no penalty */
  for (i = 0; i < 64; i++)
    npu_llm_sampler_accept (s, 3);
  g_assert_cmpint (npu_llm_sampler_sample (s, pos), ==, 0);
  /* negative logit multiplied: -1.0 * 1.2 = -1.2 < -1.1 */
  npu_llm_sampler_accept (t, 0);
  g_assert_cmpint (npu_llm_sampler_sample (t, neg), ==, 1);
  npu_llm_sampler_free (s);
  npu_llm_sampler_free (t);
}

/* The probabilities the chain should give, worked out independently:
 * logits sorted descending, untempered softmax for top-p and min-p */
static void
expected_probs (const float *l, guint V, gfloat temp, guint top_k,
    gfloat top_p, gfloat min_p, double *p)
{
  guint i, keep = (top_k > 0 && top_k < V) ? top_k : V;
  double sum = 0, cum = 0;

  /* l is sorted descending in the test: a prefix is the top set */
  for (i = 0; i < keep; i++)
    sum += exp (l[i] - l[0]);
  if (top_p < 1.0f) {
    for (i = 0; i < keep; i++) {
      cum += exp (l[i] - l[0]) / sum;
      if (cum >= top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  sum = 0;
  for (i = 0; i < V; i++) {
    gboolean in = i < keep && exp (l[i] - l[0]) >= min_p;

    p[i] = in ? exp ((l[i] - l[0]) / temp) : 0;
    sum += p[i];
  }
  for (i = 0; i < V; i++)
    p[i] /= sum;
}

static void
test_sample_distribution (void)
{
  /* chi-square critical values at p = 0.001 for 1..7 degrees of freedom */
  static const double crit[8] = { 0, 10.83, 13.82, 16.27, 18.47, 20.52,
    22.46, 24.32
  };
  static const float l[8] = { 2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f,
    -3.0f
  };
  static const struct
  {
    gfloat temp;
    guint top_k;
    gfloat top_p, min_p;
  } cases[] = {
    {1.0f, 0, 1.0f, 0.0f},
    {0.7f, 5, 1.0f, 0.0f},
    {1.3f, 0, 0.8f, 0.0f},
    {1.0f, 0, 1.0f, 0.2f},
    {2.0f, 6, 0.9f, 0.1f},
  };
  const guint N = 100000;
  guint c, i;

  for (c = 0; c < G_N_ELEMENTS (cases); c++) {
    NpuLlmSampler *s = new_sampler (cases[c].temp, cases[c].top_k,
        cases[c].top_p, cases[c].min_p, 1.0f, 1234 + c, 8);
    guint counts[8] = { 0, }, df = 0;
    double p[8], chi2 = 0;

    expected_probs (l, 8, cases[c].temp, cases[c].top_k, cases[c].top_p,
        cases[c].min_p, p);
    for (i = 0; i < N; i++)
      counts[npu_llm_sampler_sample (s, l)]++;
    for (i = 0; i < 8; i++) {
      if (p[i] == 0) {
        g_assert_cmpuint (counts[i], ==, 0);
        continue;
      }
      chi2 += (counts[i] - N * p[i]) * (counts[i] - N * p[i]) / (N * p[i]);
      df++;
    }
    df--;
    g_test_message ("case %u: chi2 %.2f with %u degrees of freedom "
        "(critical %.2f)", c, chi2, df, crit[df]);
    g_assert_cmpuint (df, >=, 1);
    g_assert_cmpfloat (chi2, <, crit[df]);
    npu_llm_sampler_free (s);
  }
}

static void
expect_sampler_error (NpuLlmSamplerParams * p, const gchar * text)
{
  GError *error = NULL;

  g_assert_null (npu_llm_sampler_new (p, 100, &error));
  g_assert_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID);
  if (!strstr (error->message, text))
    g_error ("'%s' does not contain '%s'", error->message, text);
  g_clear_error (&error);
  npu_llm_sampler_params_init (p);
}

static void
test_sample_params (void)
{
  NpuLlmSamplerParams p;

  npu_llm_sampler_params_init (&p);
  p.temperature = -1;
  expect_sampler_error (&p, "temperature -1");
  p.temperature = NAN;
  expect_sampler_error (&p, "temperature");
  p.top_p = 0;
  expect_sampler_error (&p, "top-p 0");
  p.top_p = 1.5f;
  expect_sampler_error (&p, "top-p 1.5");
  p.min_p = -0.1f;
  expect_sampler_error (&p, "min-p");
  p.min_p = 2;
  expect_sampler_error (&p, "min-p 2");
  p.repeat_penalty = 0;
  expect_sampler_error (&p, "repeat penalty 0");
  p.repeat_penalty = INFINITY;
  expect_sampler_error (&p, "repeat penalty");
}

int
main (int argc, char **argv)
{
  GError *error = NULL;
  guint c;
  int ret;

  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("test-llm-XXXXXX", &error);
  g_assert_no_error (error);
  device = npu_device_new_cpu (2);
  queue = npu_queue_new (device, "test-llm");
  native_isa = npu_matmul_get_isa ();

  for (c = 0; c < G_N_ELEMENTS (configs); c++) {
    gchar *path = g_strdup_printf ("/llm/reference/%s", configs[c].name);

    g_test_add_data_func (path, &configs[c], test_reference);
    g_free (path);
  }
  g_test_add_func ("/llm/batch-vs-decode", test_batch_vs_decode);
  g_test_add_func ("/llm/embeddings", test_embeddings);
  g_test_add_func ("/llm/sliding-window", test_sliding);
  g_test_add_func ("/llm/precision/accurate", test_precision_accurate);
  g_test_add_func ("/llm/truncate", test_truncate);
  g_test_add_data_func ("/llm/kv-type/f16", GINT_TO_POINTER (NPU_KV_F16),
      test_kv_type);
  g_test_add_data_func ("/llm/kv-type/q8_0", GINT_TO_POINTER (NPU_KV_Q8_0),
      test_kv_type);
  g_test_add_func ("/llm/no-alloc-per-token", test_no_alloc);
  g_test_add_func ("/llm/errors", test_errors);
  g_test_add_func ("/llm/gpt-oss/window", test_gpt_oss_window);
  g_test_add_func ("/llm/gpt-oss/moe", test_gpt_oss_moe);
  g_test_add_func ("/llm/gpt-oss/errors", test_gpt_oss_errors);
  g_test_add_func ("/llm/sample/basic", test_sample_basic);
  g_test_add_func ("/llm/sample/penalty", test_sample_penalty);
  g_test_add_func ("/llm/sample/distribution", test_sample_distribution);
  g_test_add_func ("/llm/sample/params", test_sample_params);
  ret = g_test_run ();

  npu_queue_free (queue);
  npu_device_unref (device);
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return ret;
}
