/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: decoder-only transformer (llama, qwen2, qwen3, gpt-oss):
 * loading and forward pass
 *
 * Per layer (llama.cpp's llm_build_llama / llm_build_qwen2 / qwen3):
 *
 *   h   = x + Wo . attn (rope (Wq . n1 + bq), rope (Wk . n1 + bk), Wv . n1 + bv)
 *   out = h + Wdown . (silu (Wgate . n2) * (Wup . n2))
 *
 * with n1 = rmsnorm (x) * attn_norm, n2 = rmsnorm (h) * ffn_norm, then
 * logits = Wout . (rmsnorm (x) * output_norm).  Qwen3 has no biases and
 * normalises each head of q and k before RoPE: q_h = rmsnorm (q_h) *
 * attn_q_norm (head_dim weights shared by the heads, the same epsilon),
 * and likewise k_h with attn_k_norm.
 *
 * gpt-oss (llama.cpp's llm_build_openai_moe): biases on q, k, v and o;
 * n2 = rmsnorm (h) * post_attention_norm; the feed-forward is a mixture of
 * experts (npullm-private.h); each query head has a learned sink logit, one
 * more term in its softmax's denominator with no value; on the sliding
 * layers (hp.swa_period) a query sees only the last n_swa positions, its
 * own included (llama.cpp's LLAMA_SWA_TYPE_STANDARD mask), inside what
 * the cache keeps; RoPE is NEOX with YaRN scaling.
 *
 * KV cache and positions (docs/llm-core.md): slot of absolute position a is
 * a for the n_sink sinks, n_sink + (a - n_sink) mod W after them, with
 * W = n_ctx - n_sink; the cache is written in place and never moves.
 * StreamingLLM gives every token its position inside the cache, not in the
 * stream.  RoPE scores depend only on the difference of the two positions,
 * and inside the window the cache-relative difference equals the absolute
 * one, so keys are stored rotated at their absolute position and never
 * touched again; only the sinks need the query rotated at its
 * cache-relative position (n_ctx - 1 once the cache is full), which costs
 * one more rotation of the query, not a pass over the cache.  Angles are
 * computed in double, so positions stay exact over days of stream.
 */
#include "npullm.h"
#include "npullm-private.h"
#include "core/cpu/npuattention.h"
#include "core/device/npuhugemem.h"
#include "core/cpu/npumatmul.h"
#include "core/cpu/npuweightmatrix.h"
#include "core/formats/npuquants.h"
#include "core/formats/npuhfmodel.h"
#include "core/formats/npumxfp4.h"
#include "core/cpu/npuvecmath.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK (npu - llm - error - quark, npu_llm_error);

/* A weight matrix in the type the file stores, read where the file has
 * it (MXFP4 repacked with NPU_LLM_LOAD_REPACK): npuweightmatrix.h */
typedef NpuWeightMatrix Matrix;

typedef struct
{
  const float *attn_norm, *ffn_norm;
  const float *bq, *bk, *bv, *bo;       /* NULL when absent */
  const float *q_norm, *k_norm; /* qwen3's, gemma3's per-head norms */
  /* gemma3: on the attention's and the feed-forward's outputs, before
   * they join the residual stream; else NULL */
  const float *post_attn_norm, *post_ffn_norm;
  const float *sinks;           /* gpt-oss: n_head logits, else NULL */
  gboolean swa;                 /* attends to the last n_swa positions */
  Matrix wq, wk, wv, wo, wgate, wup, wdown;     /* dense: gate, up, down */
  NpuLlmMoe moe;                /* gpt-oss: the experts */
} Layer;

struct _NpuLlmModel
{
  NpuLlmHParams hp;
  NpuGguf *gguf;                /* npu_llm_model_new_from_file() only: */
  NpuHfModel *hf;               /* the file or directory it read */

  NpuTensorView tok_embd;
  gsize embd_row_bytes;
  const float *output_norm;
  /* The logits' matrix: output.weight, or token_embd for a tied model,
   * in its own type like every matrix (a Q8_0 one by npu_matmul_q8_0(),
   * as llama.cpp computes the logits of its MXFP4 files) */
  Matrix output;
  const float *rope_freqs;      /* optional rope_freqs.weight [n_rot / 2] */
  double *inv_freq;             /* n_rot / 2 angular frequencies */
  double rope_mscale;           /* YaRN's factor on cos and sin (else 1) */
  double *inv_freq_swa;         /* the sliding layers' (gemma3), or NULL */
  float attn_scale;             /* on q . k */

  Layer *layers;
  NpuLlmLoadFlags flags;
  guint64 decode_bytes;
  guint64 owned_bytes;          /* repacked copies (NPU_LLM_LOAD_REPACK) */
};

struct _NpuLlmContext
{
  NpuLlmModel *model;
  NpuLlmContextParams p;
  guint window;                 /* n_ctx - n_sink */
  guint q_dim, kv_dim;
  gsize kv_row;                 /* bytes of a batch row (kv_dim values) */
  gsize head_row;               /* bytes of one KV head's part of a row */
  gsize k_head;                 /* bytes of one KV head's keys in k_cache */
  gsize k_bytes, v_bytes;       /* of k_cache, of v_cache */

  guint64 n_past;
  guint64 n_past_max;           /* the most n_past reached since the reset */
  NpuLlmStats stats;

  /* per layer, per KV head, n_ctx rows of head_dim values in p.kv_type
   * (head-major: a head's rows are contiguous, so the attention of one
   * head reads one sequential run, which the hardware prefetchers stream;
   * on huge pages, so a walk over them does not miss the TLB); the keys
   * in tiles of NPU_KV_TILE_ROWS slots (npukvtype.h; n_ctx rounded up to
   * whole tiles), which the kernel reads with no horizontal sums */
  guint8 *k_cache, *v_cache;
  /* the chunk's k and v rows in p.kv_type (ctx->k and ctx->v for F32) */
  guint8 *k_st, *v_st;

  /* scratch, n_batch rows each */
  float *x, *xn, *q, *qr, *k, *v, *att, *tmp, *gate, *up;
  float *scores;                /* n_head x n_ctx */
  float *rope_abs, *rope_rel;   /* n_batch x n_rot (cos, sin pairs) */
  float *rope_abs_swa, *rope_rel_swa;   /* the sliding layers' (gemma3) */
  float *logits;                /* (all_logits ? n_batch : 1) x n_vocab */
  gsize n_logits;               /* rows valid in @logits */
  NpuLlmMoeScratch moe;         /* a mixture of experts' (else unused) */
  gboolean rel_needed;
};

/* ------------------------------------------------------------------------
 * Hyper-parameters
 */

static gboolean
get_u32_req (const NpuGguf * gguf, const gchar * arch, const gchar * key,
    guint * out, GError ** error)
{
  gchar *name = g_strdup_printf ("%s.%s", arch, key);
  guint32 v;
  GError *err = NULL;
  gboolean ok = npu_gguf_get_u32 (gguf, name, &v, &err);

  if (!ok) {
    g_set_error (error, NPU_LLM_ERROR,
        g_error_matches (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_NOT_FOUND) ?
        NPU_LLM_ERROR_MISSING : NPU_LLM_ERROR_SHAPE,
        "metadata key '%s': %s", name, err->message);
    g_error_free (err);
  } else if (v == 0) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "metadata key '%s' is 0", name);
    ok = FALSE;
  } else {
    *out = v;
  }
  g_free (name);
  return ok;
}

/* Optional key: absent leaves *out alone; present but unusable is an
 * error (a silent default would hide a broken file). */
static gboolean
get_u32_opt (const NpuGguf * gguf, const gchar * arch, const gchar * key,
    guint * out, GError ** error)
{
  gchar *name = g_strdup_printf ("%s.%s", arch, key);
  gboolean ok = TRUE;

  if (npu_gguf_find (gguf, name)) {
    guint32 v;
    GError *err = NULL;

    if (!npu_gguf_get_u32 (gguf, name, &v, &err)) {
      g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
          "metadata key '%s': %s", name, err->message);
      g_error_free (err);
      ok = FALSE;
    } else {
      *out = v;
    }
  }
  g_free (name);
  return ok;
}

static gboolean
get_f32_opt (const NpuGguf * gguf, const gchar * arch, const gchar * key,
    gboolean required, gfloat * out, gboolean * found, GError ** error)
{
  gchar *name = g_strdup_printf ("%s.%s", arch, key);
  gboolean ok = TRUE;

  if (found)
    *found = FALSE;
  if (npu_gguf_find (gguf, name)) {
    gfloat v;
    GError *err = NULL;

    if (!npu_gguf_get_f32 (gguf, name, &v, &err)) {
      g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
          "metadata key '%s': %s", name, err->message);
      g_error_free (err);
      ok = FALSE;
    } else if (!isfinite (v)) {
      g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
          "metadata key '%s' is not finite", name);
      ok = FALSE;
    } else {
      *out = v;
      if (found)
        *found = TRUE;
    }
  } else if (required) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_MISSING,
        "metadata key '%s' not found", name);
    ok = FALSE;
  }
  g_free (name);
  return ok;
}

/* general.architecture, which sets @h's arch and RoPE type.  Returns: the
 * architecture's name (the prefix of its keys), or %NULL with @error set */
static const gchar *
get_arch (const NpuGguf * gguf, NpuLlmHParams * h, GError ** error)
{
  const gchar *arch;
  GError *err = NULL;

  arch = npu_gguf_get_string (gguf, "general.architecture", NULL, &err);
  if (!arch) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_MISSING,
        "general.architecture: %s", err->message);
    g_error_free (err);
    return NULL;
  }
  if (strcmp (arch, "llama") == 0) {
    h->arch = NPU_LLM_ARCH_LLAMA;
    h->rope_type = NPU_LLM_ROPE_NORM;
  } else if (strcmp (arch, "qwen2") == 0) {
    h->arch = NPU_LLM_ARCH_QWEN2;
    h->rope_type = NPU_LLM_ROPE_NEOX;
  } else if (strcmp (arch, "qwen3") == 0) {
    h->arch = NPU_LLM_ARCH_QWEN3;
    h->rope_type = NPU_LLM_ROPE_NEOX;
  } else if (strcmp (arch, "gpt-oss") == 0) {
    h->arch = NPU_LLM_ARCH_GPT_OSS;
    h->rope_type = NPU_LLM_ROPE_NEOX;
  } else if (strcmp (arch, "gemma3") == 0) {
    h->arch = NPU_LLM_ARCH_GEMMA3;
    h->rope_type = NPU_LLM_ROPE_NEOX;
  } else {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "unsupported architecture '%s' (supported: llama, qwen2, qwen3, "
        "gpt-oss, gemma3)", arch);
    return NULL;
  }
  return arch;
}

/* YaRN's keys besides the factor, with llama.cpp's defaults */
static gboolean
get_yarn (const NpuGguf * gguf, const gchar * arch, NpuLlmHParams * h,
    GError ** error)
{
  h->yarn_orig_ctx = h->n_ctx_train;
  h->yarn_beta_fast = 32.0f;
  h->yarn_beta_slow = 1.0f;
  h->rope_attn_factor = 1.0f;
  if (!get_u32_opt (gguf, arch, "rope.scaling.original_context_length",
          &h->yarn_orig_ctx, error)
      || !get_f32_opt (gguf, arch, "rope.scaling.yarn_beta_fast", FALSE,
          &h->yarn_beta_fast, NULL, error)
      || !get_f32_opt (gguf, arch, "rope.scaling.yarn_beta_slow", FALSE,
          &h->yarn_beta_slow, NULL, error)
      || !get_f32_opt (gguf, arch, "rope.scaling.attn_factor", FALSE,
          &h->rope_attn_factor, NULL, error))
    return FALSE;
  if (h->yarn_orig_ctx == 0 || !(h->yarn_beta_fast > 0.0f) ||
      !(h->yarn_beta_slow > 0.0f) || !(h->rope_attn_factor > 0.0f)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "%s: YaRN original context %u, beta_fast %g, beta_slow %g or "
        "attn_factor %g out of range", arch, h->yarn_orig_ctx,
        h->yarn_beta_fast, h->yarn_beta_slow, h->rope_attn_factor);
    return FALSE;
  }
  return TRUE;
}

static gboolean
get_rope_scaling (const NpuGguf * gguf, const gchar * arch,
    NpuLlmHParams * h, GError ** error)
{
  gchar *key;
  const gchar *scaling = NULL;
  gfloat factor = 0.0f;
  gboolean have_factor = FALSE;
  GError *err = NULL;

  /* RoPE scaling, as llama.cpp reads it: the type defaults to linear, the
   * factor comes from rope.scaling.factor or the older rope.scale_linear;
   * a factor of 0 or none means no scaling. */
  key = g_strdup_printf ("%s.rope.scaling.type", arch);
  if (npu_gguf_find (gguf, key)) {
    scaling = npu_gguf_get_string (gguf, key, NULL, &err);
    if (!scaling) {
      g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
          "metadata key '%s': %s", key, err->message);
      g_error_free (err);
      g_free (key);
      return FALSE;
    }
  }
  g_free (key);
  if (!get_f32_opt (gguf, arch, "rope.scaling.factor", FALSE, &factor,
          &have_factor, error))
    return FALSE;
  if (!have_factor && !get_f32_opt (gguf, arch, "rope.scale_linear", FALSE,
          &factor, &have_factor, error))
    return FALSE;
  h->rope_freq_scale = 1.0f;
  h->rope_yarn = scaling && strcmp (scaling, "yarn") == 0;
  if (h->rope_yarn && !get_yarn (gguf, arch, h, error))
    return FALSE;
  if (scaling && strcmp (scaling, "none") == 0) {
    /* nothing */
  } else if (scaling && strcmp (scaling, "linear") != 0 && !h->rope_yarn) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "unsupported %s.rope.scaling.type '%s' (supported: none, linear, "
        "yarn)", arch, scaling);
    return FALSE;
  } else if (have_factor && factor != 0.0f) {
    if (factor < 0.0f) {
      g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
          "%s.rope.scaling.factor %g is negative", arch, factor);
      return FALSE;
    }
    h->rope_freq_scale = 1.0f / factor;
  }
  return TRUE;
}

/* gpt-oss's experts and sliding window.  feed_forward_length is what the
 * converter copies from intermediate_size, the experts' width; n_ff is
 * taken from the expert key, which llama.cpp reads. */
static gboolean
get_moe (const NpuGguf * gguf, const gchar * arch, NpuLlmHParams * h,
    GError ** error)
{
  h->swa_period = 2;
  if (!get_u32_req (gguf, arch, "expert_count", &h->n_expert, error) ||
      !get_u32_req (gguf, arch, "expert_used_count", &h->n_expert_used,
          error) ||
      !get_u32_req (gguf, arch, "expert_feed_forward_length", &h->n_ff_exp,
          error) ||
      !get_u32_req (gguf, arch, "attention.sliding_window", &h->n_swa, error)
      || !get_u32_opt (gguf, arch, "attention.sliding_window_pattern",
          &h->swa_period, error))
    return FALSE;
  if (h->n_expert_used > h->n_expert) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "%s.expert_used_count %u exceeds expert_count %u", arch,
        h->n_expert_used, h->n_expert);
    return FALSE;
  }
  h->n_ff = h->n_ff_exp;
  return TRUE;
}

/* Gemma 3 as llama.cpp reads it: the sliding window on five layers of
 * six (set_swa_pattern (6), a fixed pattern, not a key), their RoPE base
 * 10000 with no scaling, the file's base and scaling on the others, and
 * the queries scaled by 1 / sqrt (head_dim), or by 1 / sqrt (n_embd /
 * n_head) for the 27 B (62 layers; gemma_pytorch's query_pre_attn_scalar).
 * A file without a sliding window is the non-iswa graph, which softcaps
 * the logits: not supported. */
static gboolean
get_gemma3 (const NpuGguf * gguf, const gchar * arch, NpuLlmHParams * h,
    GError ** error)
{
  if (!get_u32_opt (gguf, arch, "attention.sliding_window", &h->n_swa, error))
    return FALSE;
  if (h->n_swa == 0) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "%s without attention.sliding_window (the softcapped, unwindowed "
        "graph) is not supported", arch);
    return FALSE;
  }
  h->swa_period = 6;
  h->rope_freq_base_swa = 10000.0f;
  h->attn_scale = 1.0f / sqrtf ((float) (h->n_layer == 62 ?
          h->n_embd / h->n_head : h->head_dim));
  return TRUE;
}

/* The checks between the heads, RoPE and norm keys, once all are read */
static gboolean
check_head_and_rope (const gchar * arch, const NpuLlmHParams * h,
    GError ** error)
{
  if (h->n_head_kv == 0 || h->n_head % h->n_head_kv != 0) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "%s.attention.head_count %u is not a multiple of head_count_kv %u",
        arch, h->n_head, h->n_head_kv);
    return FALSE;
  }
  if (h->n_rot == 0 || h->n_rot > h->head_dim || h->n_rot % 2 != 0) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "%s.rope.dimension_count %u is not an even number <= the head size "
        "%u", arch, h->n_rot, h->head_dim);
    return FALSE;
  }
  if (!(h->rms_eps >= 0.0f) || !(h->rope_freq_base > 0.0f)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "%s: rms epsilon %g or rope.freq_base %g out of range", arch,
        h->rms_eps, h->rope_freq_base);
    return FALSE;
  }
  return TRUE;
}

gboolean
npu_llm_hparams_from_gguf (const NpuGguf * gguf, NpuLlmHParams * hp,
    GError ** error)
{
  const gchar *arch;
  NpuLlmHParams h = { 0, };
  guint value_length = 0;

  arch = get_arch (gguf, &h, error);
  if (!arch)
    return FALSE;


  if (!get_u32_req (gguf, arch, "embedding_length", &h.n_embd, error) ||
      !get_u32_req (gguf, arch, "block_count", &h.n_layer, error) ||
      !get_u32_req (gguf, arch, "attention.head_count", &h.n_head, error) ||
      !get_u32_req (gguf, arch, "context_length", &h.n_ctx_train, error))
    return FALSE;
  if (h.arch == NPU_LLM_ARCH_GPT_OSS) {
    if (!get_moe (gguf, arch, &h, error))
      return FALSE;
  } else if (!get_u32_req (gguf, arch, "feed_forward_length", &h.n_ff, error)) {
    return FALSE;
  }
  h.n_head_kv = h.n_head;
  if (!get_u32_opt (gguf, arch, "attention.head_count_kv", &h.n_head_kv, error))
    return FALSE;
  /* The head size defaults to n_embd / n_head; a file that states it
   * (qwen3, whose q and o project n_head * head_dim, not n_embd) need not
   * divide evenly, as llama.cpp reads it */
  h.head_dim = G_MAXUINT;
  if (!get_u32_opt (gguf, arch, "attention.key_length", &h.head_dim, error))
    return FALSE;
  if (h.head_dim == G_MAXUINT) {
    if (h.n_embd % h.n_head != 0) {
      g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
          "%s.embedding_length %u is not a multiple of head_count %u", arch,
          h.n_embd, h.n_head);
      return FALSE;
    }
    h.head_dim = h.n_embd / h.n_head;
  }
  value_length = h.head_dim;
  if (!get_u32_opt (gguf, arch, "attention.value_length", &value_length, error))
    return FALSE;
  if (value_length != h.head_dim) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "%s.attention.value_length %u differs from key_length %u", arch,
        value_length, h.head_dim);
    return FALSE;
  }
  h.n_rot = h.head_dim;
  if (!get_u32_opt (gguf, arch, "rope.dimension_count", &h.n_rot, error))
    return FALSE;

  if (!get_f32_opt (gguf, arch, "attention.layer_norm_rms_epsilon", TRUE,
          &h.rms_eps, NULL, error))
    return FALSE;
  h.rope_freq_base = 10000.0f;
  if (!get_f32_opt (gguf, arch, "rope.freq_base", FALSE, &h.rope_freq_base,
          NULL, error))
    return FALSE;

  if (!get_rope_scaling (gguf, arch, &h, error))
    return FALSE;
  if (h.arch == NPU_LLM_ARCH_GEMMA3 && !get_gemma3 (gguf, arch, &h, error))
    return FALSE;

  if (!check_head_and_rope (arch, &h, error))
    return FALSE;
  *hp = h;
  return TRUE;
}

/* ------------------------------------------------------------------------
 * Loading
 */

static const gchar *
type_name (guint32 type)
{
  const gchar *name = npu_ggml_type_name (type);

  return name ? name : "unknown";
}

static gboolean
lookup_tensor (NpuTensorLookup lookup, gpointer user_data,
    const gchar * name, gboolean required, guint64 ne0, guint64 ne1,
    NpuTensorView * view, gboolean * found, GError ** error)
{
  NpuTensorView v = { 0, };

  *found = FALSE;
  if (!lookup (name, &v, user_data) || !v.data) {
    if (required) {
      g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_MISSING,
          "tensor '%s' not found", name);
      return FALSE;
    }
    return TRUE;
  }
  /* ne1 == 0: any number of rows (token_embd's vocabulary) */
  if (v.ne[0] != ne0 || (ne1 != 0 && v.ne[1] != ne1) || v.ne[1] == 0 ||
      v.ne[2] != 1 || v.ne[3] != 1) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "tensor '%s' has shape [%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
        ", %" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "], expected [%"
        G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "]", name, v.ne[0], v.ne[1],
        v.ne[2], v.ne[3], ne0, ne1);
    return FALSE;
  }
  *view = v;
  *found = TRUE;
  return TRUE;
}

/* A view's bytes must cover its shape: a weights pad or a lookup of a
 * test may hand a short buffer (a GGUF mapping is checked at open); a size
 * of 0 is unknown (npullm-private.h) */
gboolean
npu_llm_check_view_size (const gchar * name, const NpuTensorView * v,
    gsize need, GError ** error)
{
  if (v->size != 0 && v->size < need) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "tensor '%s' is truncated: %" G_GSIZE_FORMAT " bytes where its shape "
        "needs %" G_GSIZE_FORMAT, name, v->size, need);
    return FALSE;
  }
  return TRUE;
}

/* 1-D F32 vector of @n elements */
static gboolean
load_vector (NpuTensorLookup lookup, gpointer user_data,
    const gchar * name, gboolean required, guint64 n, const float **out,
    GError ** error)
{
  NpuTensorView v;
  gboolean found;

  *out = NULL;
  if (!lookup_tensor (lookup, user_data, name, required, n, 1, &v, &found,
          error))
    return FALSE;
  if (!found)
    return TRUE;
  if (v.type != NPU_GGML_TYPE_F32) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "tensor '%s' has type %s, expected f32", name, type_name (v.type));
    return FALSE;
  }
  if (!npu_llm_check_view_size (name, &v, n * sizeof (float), error))
    return FALSE;
  *out = v.data;
  return TRUE;
}

/* A view as the model's matrix, in the type it is stored in: nothing is
 * converted; MXFP4 is repacked (a copy the model owns) only when the
 * caller asked for NPU_LLM_LOAD_REPACK */
static gboolean
matrix_from_view (NpuLlmModel * model, const gchar * name,
    const NpuTensorView * v, Matrix * mat, GError ** error)
{
  gsize k = v->ne[0], rows = v->ne[1], row_bytes;
  guint block = 1;

  if (!npu_quants_supported (v->type)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "tensor '%s' has type %s (matrices must be f32, f16, bf16, q4_0, "
        "q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K or mxfp4)", name,
        type_name (v->type));
    return FALSE;
  }
  row_bytes = npu_quants_row_bytes (v->type, k);
  if (row_bytes == 0) {
    npu_ggml_type_info (v->type, &block, NULL);
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "tensor '%s': row length %" G_GSIZE_FORMAT " is not a whole number "
        "of %s blocks of %u", name, k, type_name (v->type), block);
    return FALSE;
  }
  if (!npu_llm_check_view_size (name, v, rows * row_bytes, error))
    return FALSE;
  npu_weight_matrix_init (mat, v->type, v->data, rows, k,
      (model->flags & NPU_LLM_LOAD_REPACK) != 0);
  model->owned_bytes += npu_weight_matrix_get_owned_size (mat);
  return TRUE;
}

static gboolean
load_matrix (NpuLlmModel * model, NpuTensorLookup lookup,
    gpointer user_data, const gchar * name, guint64 ne0, guint64 ne1,
    Matrix * mat, GError ** error)
{
  NpuTensorView v;
  gboolean found;

  if (!lookup_tensor (lookup, user_data, name, TRUE, ne0, ne1, &v, &found,
          error))
    return FALSE;
  if (!matrix_from_view (model, name, &v, mat, error))
    return FALSE;
  model->decode_bytes += npu_weight_matrix_get_size (mat);
  return TRUE;
}

static void
matrix_clear (Matrix * mat)
{
  npu_weight_matrix_clear (mat);
}

static gboolean
check_hparams (const NpuLlmHParams * hp, GError ** error)
{
  if (hp->n_embd == 0 || hp->n_layer == 0 || hp->n_ff == 0 ||
      hp->n_head == 0 || hp->n_head_kv == 0 || hp->head_dim == 0 ||
      hp->n_head % hp->n_head_kv != 0 || hp->n_rot == 0 || hp->n_rot % 2 ||
      hp->n_rot > hp->head_dim || hp->n_ctx_train == 0 ||
      (hp->arch == NPU_LLM_ARCH_GPT_OSS) != (hp->n_expert > 0) ||
      (hp->n_expert > 0 && (hp->n_expert_used == 0 || hp->n_ff_exp == 0 ||
              hp->n_expert_used > hp->n_expert))) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "inconsistent hyper-parameters (embd %u, layers %u, ff %u, heads "
        "%u/%u, head size %u, rot %u, ctx %u, experts %u/%u of %u)",
        hp->n_embd, hp->n_layer, hp->n_ff, hp->n_head, hp->n_head_kv,
        hp->head_dim, hp->n_rot, hp->n_ctx_train, hp->n_expert_used,
        hp->n_expert, hp->n_ff_exp);
    return FALSE;
  }
  return TRUE;
}

static gboolean
load_token_embd (NpuLlmModel * model, NpuTensorLookup lookup,
    gpointer user_data, GError ** error)
{
  NpuLlmHParams *hp = &model->hp;
  gboolean found;
  guint block;

  /* token_embd: any number of rows (the vocabulary), one of the types we
   * can decode a row of */
  if (!lookup_tensor (lookup, user_data, "token_embd.weight", TRUE,
          hp->n_embd, 0, &model->tok_embd, &found, error))
    return FALSE;
  if (!npu_quants_supported (model->tok_embd.type)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_UNSUPPORTED,
        "tensor 'token_embd.weight' has type %s (supported: f32, f16, "
        "bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, mxfp4)",
        type_name (model->tok_embd.type));
    return FALSE;
  }
  if (model->tok_embd.ne[1] > G_MAXINT32) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "tensor 'token_embd.weight': %" G_GUINT64_FORMAT " tokens",
        model->tok_embd.ne[1]);
    return FALSE;
  }
  model->embd_row_bytes = npu_quants_row_bytes (model->tok_embd.type,
      hp->n_embd);
  if (model->embd_row_bytes == 0) {
    npu_ggml_type_info (model->tok_embd.type, &block, NULL);
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_SHAPE,
        "tensor 'token_embd.weight': row length %u is not a whole number "
        "of %s blocks of %u", hp->n_embd, type_name (model->tok_embd.type),
        block);
    return FALSE;
  }
  if (!npu_llm_check_view_size ("token_embd.weight", &model->tok_embd,
          model->embd_row_bytes * model->tok_embd.ne[1], error))
    return FALSE;
  hp->n_vocab = (guint) model->tok_embd.ne[1];
  return TRUE;
}

/* output_norm and the logits' matrix */
static gboolean
load_output (NpuLlmModel * model, NpuTensorLookup lookup, gpointer user_data,
    GError ** error)
{
  NpuLlmHParams *hp = &model->hp;
  NpuTensorView v;
  gboolean found;

  if (!load_vector (lookup, user_data, "output_norm.weight", TRUE,
          hp->n_embd, &model->output_norm, error))
    return FALSE;
  if (!lookup_tensor (lookup, user_data, "output.weight", FALSE, hp->n_embd,
          hp->n_vocab, &v, &found, error))
    return FALSE;
  /* Tied output: the logits are token_embd . x, as llama.cpp does when a
   * file has no output.weight */
  {
    const gchar *name = found ? "output.weight" : "token_embd.weight";
    const NpuTensorView *out = found ? &v : &model->tok_embd;

    if (!matrix_from_view (model, name, out, &model->output, error))
      return FALSE;
    model->decode_bytes += npu_weight_matrix_get_size (&model->output);
  }
  model->decode_bytes += model->embd_row_bytes;
  return TRUE;
}

/* ggml_rope_yarn_corr_dim(): the dimension whose rotation turns @n_rot
 * times over the original context */
static double
yarn_corr_dim (const NpuLlmHParams * hp, double n_rot)
{
  return hp->n_rot * log (hp->yarn_orig_ctx / (n_rot * 2.0 * G_PI)) /
      (2.0 * log ((double) hp->rope_freq_base));
}

/* YaRN (ggml's rope_yarn() with ext_factor 1, what llama.cpp sets for a
 * yarn file): pair i's angle blends the interpolated and the original
 * frequency, theta = theta_interp (1 - ramp) + theta_extrap ramp, with
 * theta_interp = freq_scale theta_extrap; the blend is linear in the
 * position, so it folds into the frequency.  cos and sin are scaled by
 * attn_factor (1 + 0.1 ln (1 / freq_scale)). */
static void
yarn_frequencies (NpuLlmModel * model)
{
  const NpuLlmHParams *hp = &model->hp;
  double lo = MAX (0.0, floor (yarn_corr_dim (hp, hp->yarn_beta_fast)));
  double hi = MIN (hp->n_rot - 1.0, ceil (yarn_corr_dim (hp,
              hp->yarn_beta_slow)));
  double scale = hp->rope_freq_scale;
  guint i;

  for (i = 0; i < hp->n_rot / 2; i++) {
    double y = (i - lo) / MAX (0.001, hi - lo);
    double ramp = 1.0 - CLAMP (y, 0.0, 1.0);
    double extrap = model->inv_freq[i] / scale;

    model->inv_freq[i] = extrap * (scale * (1.0 - ramp) + ramp);
  }
  model->rope_mscale = hp->rope_attn_factor * (1.0 + 0.1 * log (1.0 / scale));
}

static gboolean
load_rope (NpuLlmModel * model, NpuTensorLookup lookup, gpointer user_data,
    GError ** error)
{
  NpuLlmHParams *hp = &model->hp;
  guint i;

  /* Llama 3's per-frequency RoPE factors, optional (llama.cpp divides each
   * frequency by its factor) */
  if (!load_vector (lookup, user_data, "rope_freqs.weight", FALSE,
          hp->n_rot / 2, &model->rope_freqs, error))
    return FALSE;
  model->inv_freq = g_new (double, hp->n_rot / 2);
  model->rope_mscale = 1.0;
  for (i = 0; i < hp->n_rot / 2; i++) {
    double f = pow ((double) hp->rope_freq_base, -2.0 * i / hp->n_rot);

    if (model->rope_freqs)
      f /= model->rope_freqs[i];
    model->inv_freq[i] = f * hp->rope_freq_scale;
  }
  if (hp->rope_yarn)
    yarn_frequencies (model);
  /* gemma3's sliding layers: their own base, neither scaled nor factored */
  if (hp->rope_freq_base_swa > 0.0f) {
    model->inv_freq_swa = g_new (double, hp->n_rot / 2);
    for (i = 0; i < hp->n_rot / 2; i++)
      model->inv_freq_swa[i] = pow ((double) hp->rope_freq_base_swa,
          -2.0 * i / hp->n_rot);
  }
  model->attn_scale = hp->attn_scale > 0.0f ? hp->attn_scale :
      1.0f / sqrtf ((float) hp->head_dim);
  return TRUE;
}

/* gpt-oss's layer: q/k/v/o with their biases, the sinks, the experts,
 * post_attention_norm in ffn_norm's place */
static gboolean
load_layer_gpt_oss (NpuLlmModel * model, NpuTensorLookup lookup,
    gpointer user_data, guint il, GError ** error)
{
  const NpuLlmHParams *hp = &model->hp;
  guint q_dim = hp->n_head * hp->head_dim;
  guint kv_dim = hp->n_head_kv * hp->head_dim;
  Layer *l = &model->layers[il];
  guint64 expert_bytes = 0;
  gchar name[64];

  l->swa = hp->n_swa > 0 && (hp->swa_period == 0 ||
      il % hp->swa_period < hp->swa_period - 1);
#define NAME(s) (g_snprintf (name, sizeof (name), "blk.%u." s, il), name)
  if (!load_vector (lookup, user_data, NAME ("attn_norm.weight"), TRUE,
          hp->n_embd, &l->attn_norm, error) ||
      !load_vector (lookup, user_data, NAME ("post_attention_norm.weight"),
          TRUE, hp->n_embd, &l->ffn_norm, error) ||
      !load_vector (lookup, user_data, NAME ("attn_q.bias"), TRUE, q_dim,
          &l->bq, error) ||
      !load_vector (lookup, user_data, NAME ("attn_k.bias"), TRUE, kv_dim,
          &l->bk, error) ||
      !load_vector (lookup, user_data, NAME ("attn_v.bias"), TRUE, kv_dim,
          &l->bv, error) ||
      !load_vector (lookup, user_data, NAME ("attn_output.bias"), TRUE,
          hp->n_embd, &l->bo, error) ||
      !load_vector (lookup, user_data, NAME ("attn_sinks.weight"), TRUE,
          hp->n_head, &l->sinks, error) ||
      !load_matrix (model, lookup, user_data, NAME ("attn_q.weight"),
          hp->n_embd, q_dim, &l->wq, error) ||
      !load_matrix (model, lookup, user_data, NAME ("attn_k.weight"),
          hp->n_embd, kv_dim, &l->wk, error) ||
      !load_matrix (model, lookup, user_data, NAME ("attn_v.weight"),
          hp->n_embd, kv_dim, &l->wv, error) ||
      !load_matrix (model, lookup, user_data, NAME ("attn_output.weight"),
          q_dim, hp->n_embd, &l->wo, error) ||
      !npu_llm_moe_load (&l->moe, hp, lookup, user_data, il, &expert_bytes,
          error))
    return FALSE;
#undef NAME
  /* a token reads the experts it is routed to, and the router */
  model->decode_bytes += hp->n_expert_used * expert_bytes +
      (guint64) hp->n_expert * hp->n_embd * sizeof (float);
  return TRUE;
}

static gboolean
load_layer (NpuLlmModel * model, NpuTensorLookup lookup, gpointer user_data,
    guint il, GError ** error)
{
  const NpuLlmHParams *hp = &model->hp;
  gboolean is_qwen2 = hp->arch == NPU_LLM_ARCH_QWEN2;
  gboolean is_gemma3 = hp->arch == NPU_LLM_ARCH_GEMMA3;
  /* per-head q/k norms */
  gboolean qk_norm = hp->arch == NPU_LLM_ARCH_QWEN3 || is_gemma3;
  guint q_dim = hp->n_head * hp->head_dim;
  guint kv_dim = hp->n_head_kv * hp->head_dim;
  Layer *l = &model->layers[il];
  gchar name[64];

  if (hp->arch == NPU_LLM_ARCH_GPT_OSS)
    return load_layer_gpt_oss (model, lookup, user_data, il, error);
#define NAME(s) (g_snprintf (name, sizeof (name), "blk.%u." s, il), name)
  if (!load_vector (lookup, user_data, NAME ("attn_norm.weight"), TRUE,
          hp->n_embd, &l->attn_norm, error) ||
      !load_vector (lookup, user_data, NAME ("ffn_norm.weight"), TRUE,
          hp->n_embd, &l->ffn_norm, error) ||
      !load_vector (lookup, user_data, NAME ("attn_q.bias"), is_qwen2,
          q_dim, &l->bq, error) ||
      !load_vector (lookup, user_data, NAME ("attn_k.bias"), is_qwen2,
          kv_dim, &l->bk, error) ||
      !load_vector (lookup, user_data, NAME ("attn_v.bias"), is_qwen2,
          kv_dim, &l->bv, error) ||
      !load_vector (lookup, user_data, NAME ("attn_output.bias"), FALSE,
          hp->n_embd, &l->bo, error) ||
      (qk_norm && (!load_vector (lookup, user_data,
                  NAME ("attn_q_norm.weight"), TRUE, hp->head_dim,
                  &l->q_norm, error) ||
              !load_vector (lookup, user_data, NAME ("attn_k_norm.weight"),
                  TRUE, hp->head_dim, &l->k_norm, error))) ||
      !load_matrix (model, lookup, user_data, NAME ("attn_q.weight"),
          hp->n_embd, q_dim, &l->wq, error) ||
      !load_matrix (model, lookup, user_data, NAME ("attn_k.weight"),
          hp->n_embd, kv_dim, &l->wk, error) ||
      !load_matrix (model, lookup, user_data, NAME ("attn_v.weight"),
          hp->n_embd, kv_dim, &l->wv, error) ||
      !load_matrix (model, lookup, user_data, NAME ("attn_output.weight"),
          q_dim, hp->n_embd, &l->wo, error) ||
      !load_matrix (model, lookup, user_data, NAME ("ffn_gate.weight"),
          hp->n_embd, hp->n_ff, &l->wgate, error) ||
      !load_matrix (model, lookup, user_data, NAME ("ffn_up.weight"),
          hp->n_embd, hp->n_ff, &l->wup, error) ||
      !load_matrix (model, lookup, user_data, NAME ("ffn_down.weight"),
          hp->n_ff, hp->n_embd, &l->wdown, error) ||
      (is_gemma3 && (!load_vector (lookup, user_data,
                  NAME ("post_attention_norm.weight"), TRUE, hp->n_embd,
                  &l->post_attn_norm, error) ||
              !load_vector (lookup, user_data, NAME ("post_ffw_norm.weight"),
                  TRUE, hp->n_embd, &l->post_ffn_norm, error))))
    return FALSE;
#undef NAME
  l->swa = is_gemma3 && il % hp->swa_period < hp->swa_period - 1;
  return TRUE;
}

NpuLlmModel *
npu_llm_model_new (const NpuLlmHParams * params, NpuTensorLookup lookup,
    gpointer user_data, NpuLlmLoadFlags flags, GError ** error)
{
  NpuLlmModel *model;
  guint il;

  g_return_val_if_fail (params != NULL && lookup != NULL, NULL);

  if (!check_hparams (params, error))
    return NULL;
  model = g_new0 (NpuLlmModel, 1);
  model->hp = *params;
  model->flags = flags;
  if (!load_token_embd (model, lookup, user_data, error)
      || !load_output (model, lookup, user_data, error)
      || !load_rope (model, lookup, user_data, error))
    goto fail;
  model->layers = g_new0 (Layer, model->hp.n_layer);
  for (il = 0; il < model->hp.n_layer; il++) {
    if (!load_layer (model, lookup, user_data, il, error))
      goto fail;
  }
  return model;

fail:
  npu_llm_model_free (model);
  return NULL;
}

/* A Hugging Face directory: its metadata and tensors as GGUF ones */
static NpuLlmModel *
model_new_from_hf (const gchar * path, NpuLlmLoadFlags flags, GError ** error)
{
  NpuHfModel *hf = npu_hf_model_open (path, error);
  NpuLlmHParams hp;
  NpuLlmModel *model = NULL;

  if (!hf)
    return NULL;
  if (npu_llm_hparams_from_gguf (npu_hf_model_get_metadata (hf), &hp, error))
    model = npu_llm_model_new (&hp, npu_hf_model_lookup, hf, flags, error);
  if (!model) {
    npu_hf_model_free (hf);
    return NULL;
  }
  model->hf = hf;
  return model;
}

NpuLlmModel *
npu_llm_model_new_from_file (const gchar * path, NpuLlmLoadFlags flags,
    GError ** error)
{
  NpuGguf *gguf;
  NpuLlmHParams hp;
  NpuLlmModel *model;
  GError *err = NULL;

  if (npu_hf_model_is_hf_path (path)) {
    model = model_new_from_hf (path, flags, &err);
    gguf = NULL;
  } else {
    gguf = npu_gguf_open (path, error);
    if (!gguf)
      return NULL;
    model = npu_llm_hparams_from_gguf (gguf, &hp, &err) ?
        npu_llm_model_new (&hp, npu_gguf_lookup_view, gguf, flags, &err) : NULL;
  }
  if (!model) {
    gchar *base = g_path_get_basename (path);

    g_set_error (error, err->domain, err->code, "%s: %s", base, err->message);
    g_free (base);
    g_error_free (err);
    if (gguf)
      npu_gguf_free (gguf);
    return NULL;
  }
  model->gguf = gguf;
  return model;
}

const NpuGguf *
npu_llm_model_get_metadata (const NpuLlmModel * model)
{
  g_return_val_if_fail (model != NULL, NULL);
  if (model->hf)
    return npu_hf_model_get_metadata (model->hf);
  return model->gguf;
}

void
npu_llm_model_free (NpuLlmModel * model)
{
  guint il;

  if (!model)
    return;
  if (model->layers) {
    for (il = 0; il < model->hp.n_layer; il++) {
      Layer *l = &model->layers[il];

      matrix_clear (&l->wq);
      matrix_clear (&l->wk);
      matrix_clear (&l->wv);
      matrix_clear (&l->wo);
      matrix_clear (&l->wgate);
      matrix_clear (&l->wup);
      matrix_clear (&l->wdown);
      npu_llm_moe_clear (&l->moe);
    }
    g_free (model->layers);
  }
  matrix_clear (&model->output);
  g_free (model->inv_freq);
  g_free (model->inv_freq_swa);
  if (model->gguf)
    npu_gguf_free (model->gguf);
  npu_hf_model_free (model->hf);
  g_free (model);
}

const NpuLlmHParams *
npu_llm_model_get_hparams (const NpuLlmModel * model)
{
  return &model->hp;
}

guint64
npu_llm_model_get_decode_bytes (const NpuLlmModel * model)
{
  return model->decode_bytes;
}

guint64
npu_llm_model_get_converted_bytes (const NpuLlmModel * model)
{
  return model->owned_bytes;
}

/* ------------------------------------------------------------------------
 * Context
 */

void
npu_llm_context_params_init (NpuLlmContextParams * params)
{
  params->n_ctx = 0;
  params->n_batch = 64;
  params->n_sink = 4;
  params->streaming = TRUE;
  params->all_logits = FALSE;
  params->kv_type = NPU_KV_F16;
  params->precision = NPU_MATMUL_PRECISION_FAST;
}

static gpointer
ctx_alloc_bytes (NpuLlmContext * ctx, gsize n_bytes, gsize * counter)
{
  ctx->stats.n_allocs++;
  *counter += n_bytes;
  return g_malloc0 (MAX (n_bytes, 1));
}

/* ctx_alloc_bytes() on transparent huge pages (free with npu_huge_free()) */
static guint8 *
ctx_alloc_huge (NpuLlmContext * ctx, gsize n_bytes, gsize * counter)
{
  ctx->stats.n_allocs++;
  *counter += n_bytes;
  return npu_huge_alloc0 (MAX (n_bytes, 1));
}

static float *
ctx_alloc (NpuLlmContext * ctx, gsize n_floats, gsize * counter)
{
  return ctx_alloc_bytes (ctx, n_floats * sizeof (float), counter);
}

NpuLlmContext *
npu_llm_context_new (NpuLlmModel * model, const NpuLlmContextParams * params,
    GError ** error)
{
  const NpuLlmHParams *hp = &model->hp;
  NpuLlmContextParams p;
  NpuLlmContext *ctx;
  gsize nb, kv, *scratch;

  if (params)
    p = *params;
  else
    npu_llm_context_params_init (&p);
  if (p.n_ctx == 0)
    p.n_ctx = hp->n_ctx_train;
  if (p.n_batch == 0 || p.n_batch > 65536) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "n_batch %u out of range [1, 65536]", p.n_batch);
    return NULL;
  }
  if (p.n_ctx < 2 || p.n_ctx > (1u << 24)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "n_ctx %u out of range [2, 16777216]", p.n_ctx);
    return NULL;
  }
  if (p.n_sink >= p.n_ctx) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "n_sink %u must be smaller than n_ctx %u", p.n_sink, p.n_ctx);
    return NULL;
  }
  if ((guint) p.precision > NPU_MATMUL_PRECISION_ACCURATE) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "precision %d is not fast (0) or accurate (1)", p.precision);
    return NULL;
  }
  if (!npu_kv_type_name (p.kv_type)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "kv_type %d is not a KV cache type (f32, f16, q8_0)", p.kv_type);
    return NULL;
  }
  /* a head's columns must start on a Q8_0 block */
  if (p.kv_type == NPU_KV_Q8_0 && hp->head_dim % NPU_KV_Q8_0_BLOCK != 0) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "kv_type q8_0 needs a head size that is a multiple of 32 "
        "(this model's is %u)", hp->head_dim);
    return NULL;
  }

  ctx = g_new0 (NpuLlmContext, 1);
  ctx->model = model;
  ctx->p = p;
  ctx->window = p.n_ctx - p.n_sink;
  ctx->q_dim = hp->n_head * hp->head_dim;
  ctx->kv_dim = hp->n_head_kv * hp->head_dim;
  nb = p.n_batch;
  ctx->kv_row = npu_kv_row_bytes (p.kv_type, ctx->kv_dim);
  ctx->head_row = npu_kv_row_bytes (p.kv_type, hp->head_dim);
  ctx->k_head = (p.n_ctx + NPU_KV_TILE_ROWS - 1) / NPU_KV_TILE_ROWS *
      npu_kv_tile_bytes (p.kv_type, hp->head_dim);
  kv = (gsize) hp->n_layer * p.n_ctx * ctx->kv_row;
  ctx->v_bytes = kv;
  ctx->k_bytes = (gsize) hp->n_layer * hp->n_head_kv * ctx->k_head;
  scratch = &ctx->stats.scratch_bytes;

  /* Everything the forward pass touches is allocated here, once */
  ctx->k_cache = ctx_alloc_huge (ctx, ctx->k_bytes, &ctx->stats.kv_bytes);
  ctx->v_cache = ctx_alloc_huge (ctx, kv, &ctx->stats.kv_bytes);
  ctx->x = ctx_alloc (ctx, nb * hp->n_embd, scratch);
  ctx->xn = ctx_alloc (ctx, nb * hp->n_embd, scratch);
  ctx->tmp = ctx_alloc (ctx, nb * hp->n_embd, scratch);
  ctx->q = ctx_alloc (ctx, nb * ctx->q_dim, scratch);
  ctx->qr = ctx_alloc (ctx, nb * ctx->q_dim, scratch);
  ctx->att = ctx_alloc (ctx, nb * ctx->q_dim, scratch);
  ctx->k = ctx_alloc (ctx, nb * ctx->kv_dim, scratch);
  ctx->v = ctx_alloc (ctx, nb * ctx->kv_dim, scratch);
  if (p.kv_type == NPU_KV_F32) {
    ctx->k_st = (guint8 *) ctx->k;
    ctx->v_st = (guint8 *) ctx->v;
  } else {
    ctx->k_st = ctx_alloc_bytes (ctx, nb * ctx->kv_row, scratch);
    ctx->v_st = ctx_alloc_bytes (ctx, nb * ctx->kv_row, scratch);
  }
  ctx->gate = ctx_alloc (ctx, nb * hp->n_ff, scratch);
  ctx->up = ctx_alloc (ctx, nb * hp->n_ff, scratch);
  ctx->scores = ctx_alloc (ctx, (gsize) hp->n_head * p.n_ctx, scratch);
  ctx->rope_abs = ctx_alloc (ctx, nb * hp->n_rot, scratch);
  ctx->rope_rel = ctx_alloc (ctx, nb * hp->n_rot, scratch);
  if (model->inv_freq_swa) {
    ctx->rope_abs_swa = ctx_alloc (ctx, nb * hp->n_rot, scratch);
    ctx->rope_rel_swa = ctx_alloc (ctx, nb * hp->n_rot, scratch);
  }
  ctx->logits = ctx_alloc (ctx, (p.all_logits ? nb : 1) * hp->n_vocab, scratch);
  if (hp->n_expert > 0) {
    ctx->stats.n_allocs += 9;
    *scratch += npu_llm_moe_scratch_init (&ctx->moe, hp, nb);
  }
  return ctx;
}

void
npu_llm_context_free (NpuLlmContext * ctx)
{
  if (!ctx)
    return;
  npu_huge_free (ctx->k_cache, MAX (ctx->k_bytes, 1));
  npu_huge_free (ctx->v_cache, MAX (ctx->v_bytes, 1));
  g_free (ctx->x);
  g_free (ctx->xn);
  g_free (ctx->tmp);
  g_free (ctx->q);
  g_free (ctx->qr);
  g_free (ctx->att);
  g_free (ctx->k);
  g_free (ctx->v);
  if (ctx->k_st != (guint8 *) ctx->k) {
    g_free (ctx->k_st);
    g_free (ctx->v_st);
  }
  g_free (ctx->gate);
  g_free (ctx->up);
  g_free (ctx->scores);
  g_free (ctx->rope_abs);
  g_free (ctx->rope_rel);
  g_free (ctx->rope_abs_swa);
  g_free (ctx->rope_rel_swa);
  g_free (ctx->logits);
  npu_llm_moe_scratch_clear (&ctx->moe);
  g_free (ctx);
}

void
npu_llm_context_reset (NpuLlmContext * ctx)
{
  /* The cache needs no clearing: a slot is only read after it is written */
  ctx->n_past = 0;
  ctx->n_past_max = 0;
  ctx->n_logits = 0;
}

gboolean
npu_llm_context_truncate (NpuLlmContext * ctx, guint64 n_past)
{
  /* Position a < n_ctx lives in slot a: while no position at or past
   * n_ctx was written since the reset, the first n_past rows are intact */
  if (n_past > ctx->n_past || ctx->n_past_max > ctx->p.n_ctx)
    return FALSE;
  ctx->n_past = n_past;
  ctx->n_logits = 0;
  return TRUE;
}

guint64
npu_llm_context_get_n_past (NpuLlmContext * ctx)
{
  return ctx->n_past;
}

guint
npu_llm_context_get_n_cached (NpuLlmContext * ctx)
{
  return (guint) MIN (ctx->n_past, (guint64) ctx->p.n_ctx - 1);
}

void
npu_llm_context_get_stats (NpuLlmContext * ctx, NpuLlmStats * stats)
{
  *stats = ctx->stats;
}

const float *
npu_llm_get_logits (NpuLlmContext * ctx)
{
  if (ctx->n_logits == 0)
    return NULL;
  return ctx->logits + (ctx->n_logits - 1) * ctx->model->hp.n_vocab;
}

const float *
npu_llm_get_logits_ith (NpuLlmContext * ctx, gsize i)
{
  if (!ctx->p.all_logits || i >= ctx->n_logits)
    return NULL;
  return ctx->logits + i * ctx->model->hp.n_vocab;
}

/* ------------------------------------------------------------------------
 * Forward pass
 */

static inline gsize
cache_slot (const NpuLlmContext * ctx, guint64 pos)
{
  if (pos < ctx->p.n_sink)
    return (gsize) pos;
  return ctx->p.n_sink + (gsize) ((pos - ctx->p.n_sink) % ctx->window);
}

/* Dot product with sixteen partial sums, so the compiler can keep them in
 * vector lanes (one zmm, two ymm or four xmm) without reassociating a
 * single sum */
static inline float
dot (const float *a, const float *b, guint n)
{
  float acc[16] = { 0, };
  float s = 0.0f;
  guint i = 0, j;

  for (; i + 16 <= n; i += 16)
    for (j = 0; j < 16; j++)
      acc[j] += a[i + j] * b[i + j];
  for (; i < n; i++)
    acc[i % 16] += a[i] * b[i];
  for (j = 0; j < 16; j++)
    s += acc[j];
  return s;
}

/* cos/sin of every rotated pair at @pos, in double then rounded: the
 * model's frequencies, or the sliding layers' (@swa, gemma3) */
static void
rope_table (const NpuLlmModel * model, gboolean swa, guint64 pos, float *cs)
{
  guint i, half = model->hp.n_rot / 2;
  const double *inv_freq = swa ? model->inv_freq_swa : model->inv_freq;
  double mscale = swa ? 1.0 : model->rope_mscale;

  for (i = 0; i < half; i++) {
    double a = (double) pos * inv_freq[i];

    cs[2 * i] = (float) (cos (a) * mscale);
    cs[2 * i + 1] = (float) (sin (a) * mscale);
  }
}

/* Rotate the first n_rot values of each of @n_heads heads of one row */
static void
rope_apply (const NpuLlmModel * model, float *row, guint n_heads,
    const float *cs)
{
  const NpuLlmHParams *hp = &model->hp;
  guint h, i, half = hp->n_rot / 2;

  for (h = 0; h < n_heads; h++) {
    float *x = row + (gsize) h * hp->head_dim;

    for (i = 0; i < half; i++) {
      float c = cs[2 * i], s = cs[2 * i + 1];
      guint i0, i1;
      float x0, x1;

      if (hp->rope_type == NPU_LLM_ROPE_NORM) {
        i0 = 2 * i;
        i1 = 2 * i + 1;
      } else {
        i0 = i;
        i1 = i + half;
      }
      x0 = x[i0];
      x1 = x[i1];
      x[i0] = x0 * c - x1 * s;
      x[i1] = x0 * s + x1 * c;
    }
  }
}

/* Qwen3's q/k norm: each head_dim slice of @n rows of @n_heads heads,
 * in place, before RoPE (llama.cpp's build_norm on the [head_dim, n_head,
 * n_tokens] view) */
static void
head_norm (const NpuLlmHParams * hp, float *y, const float *w, gsize n,
    guint n_heads)
{
  gsize r;

  if (!w)
    return;
  for (r = 0; r < n * n_heads; r++)
    npu_rms_norm (y + r * hp->head_dim, w, y + r * hp->head_dim,
        hp->head_dim, hp->rms_eps);
}

static void
add_bias (float *y, const float *b, gsize n, guint dim)
{
  gsize t;
  guint i;

  if (!b)
    return;
  for (t = 0; t < n; t++)
    for (i = 0; i < dim; i++)
      y[t * dim + i] += b[i];
}

typedef struct
{
  NpuLlmContext *ctx;
  guint layer;
  guint64 p0;                   /* position of the chunk's first token */
  gsize n;
  /* rows of one KV head attended to, from the cache and from the chunk's
   * own rows (added to by every worker, relaxed) */
  guint64 cache_rows, chunk_rows;
} AttnJob;

/* ------------------------------------------------------------------------
 * Bytes moved (npubytes.h; what is counted: NpuLlmStats in npullm.h)
 */

/* @nw products of @n rows by matrices sharing their input (read once) */
static void
count_products (NpuLlmContext * ctx, const Matrix * const *w, guint nw, gsize n)
{
  NpuBytes *b = &ctx->stats.bytes;
  guint i;

  npu_bytes_read (b, NPU_BYTES_ACTIVATIONS, (guint64) n * w[0]->k * 4);
  for (i = 0; i < nw; i++) {
    npu_bytes_read (b, NPU_BYTES_WEIGHTS, npu_weight_matrix_get_size (w[i]));
    npu_bytes_write (b, NPU_BYTES_ACTIVATIONS, (guint64) n * w[i]->rows * 4);
  }
}

static void
count_product (NpuLlmContext * ctx, const Matrix * w, gsize n)
{
  count_products (ctx, &w, 1, n);
}

/* An F32 vector of the model (a norm, a bias, the sinks), if present */
static void
count_vector (NpuLlmContext * ctx, const float *v, gsize n)
{
  if (v)
    npu_bytes_read (&ctx->stats.bytes, NPU_BYTES_WEIGHTS, (guint64) n * 4);
}

/* Rows [r, r + n) of a K/V pair of buffers in the cache's type: one
 * head's rows in the cache (@stride head_dim values), or whole rows of
 * the batch (@stride kv_dim) */
static inline guint
add_span (const NpuLlmContext * ctx, NpuAttnSpan * sp, const float *q,
    const guint8 * k, const guint8 * v, guint stride, gsize r, guint64 n)
{
  gsize rb = npu_kv_row_bytes (ctx->p.kv_type, stride);

  sp->q = q;
  sp->k = k + r * rb;
  sp->v = v + r * rb;
  sp->stride = stride;
  sp->n = (guint) n;
  sp->type = ctx->p.kv_type;
  sp->k_tiled = FALSE;
  sp->k_row = 0;
  return 1;
}

/* Slots [s, s + n) of one head in the cache: its key tiles from @kt, its
 * value rows from @vc */
static inline guint
add_cache_span (const NpuLlmContext * ctx, NpuAttnSpan * sp, const float *q,
    const guint8 * kt, const guint8 * vc, gsize s, guint64 n)
{
  guint hd = ctx->model->hp.head_dim;

  add_span (ctx, sp, q, kt, vc, hd, s, n);
  sp->k = kt + s / NPU_KV_TILE_ROWS * npu_kv_tile_bytes (ctx->p.kv_type, hd);
  sp->k_tiled = TRUE;
  sp->k_row = s % NPU_KV_TILE_ROWS;
  return 1;
}

/* The cache rows of positions [a0, a1) of one head (key tiles from @kc,
 * value rows from @vc), all in the window part of the ring, as at most
 * two runs of slots (the ring may wrap inside) */
static guint
window_spans (const NpuLlmContext * ctx, guint64 a0, guint64 a1,
    const float *q, const guint8 * kc, const guint8 * vc, NpuAttnSpan * out)
{
  gsize s0, n, n1;

  if (a1 <= a0)
    return 0;
  s0 = cache_slot (ctx, a0);
  n = (gsize) (a1 - a0);
  n1 = MIN (n, ctx->p.n_ctx - s0);
  add_cache_span (ctx, &out[0], q, kc, vc, s0, n1);
  if (n1 == n)
    return 1;
  return 1 + add_cache_span (ctx, &out[1], q, kc, vc, ctx->p.n_sink, n - n1);
}

/* Query row @t of the chunk, for the @gqa query heads of KV head @g: they
 * attend to the sinks and to the window ending at the row's position.
 * Keys before the chunk come from the cache, the chunk's own from the
 * batch buffers (the cache is written after, so slots this chunk will
 * overwrite are still readable here).  @sc: gqa rows of n_ctx scores. */
static void
attend_group (AttnJob * job, guint g, gsize t, float *sc)
{
  NpuLlmContext *ctx = job->ctx;
  const NpuLlmHParams *hp = &ctx->model->hp;
  guint hd = hp->head_dim, gqa = hp->n_head / hp->n_head_kv;
  guint64 n_sink = ctx->p.n_sink, n_ctx = ctx->p.n_ctx, p0 = job->p0;
  /* the head's rows in the cache, and its first column in a batch row (a
   * Q8_0 head starts on a block: checked at creation) */
  gsize off = npu_kv_row_bytes (ctx->p.kv_type, (gsize) g * hd);
  gsize head = (gsize) job->layer * hp->n_head_kv + g;
  const guint8 *kc = ctx->k_cache + head * ctx->k_head;
  const guint8 *vc = ctx->v_cache + head * n_ctx * ctx->head_row;
  const guint8 *kb = ctx->k_st + off, *vb = ctx->v_st + off;
  guint kv_dim = ctx->kv_dim;
  gsize q_off = t * ctx->q_dim + (gsize) g * gqa * hd;
  guint64 pt = p0 + t, lo, nsk, a;
  const float *qa = ctx->q + q_off;
  const float *qs = (pt >= n_ctx) ? ctx->qr + q_off : qa;
  const Layer *l = &ctx->model->layers[job->layer];
  guint64 s0 = 0;
  NpuAttnSpan spans[5];
  guint n_spans = 0;

  /* retained: the sinks [0, nsk) and the window [lo, pt]; a sliding
   * layer sees only what of them lies in [s0, pt], its last n_swa
   * positions (the cache keeps more for the other layers) */
  nsk = MIN (n_sink, pt + 1);
  lo = pt + 1 >= ctx->window ? pt + 1 - ctx->window : 0;
  lo = MAX (lo, nsk);
  if (l->swa && pt + 1 > hp->n_swa) {
    s0 = pt + 1 - hp->n_swa;
    lo = MAX (lo, s0);
  }

  /* sinks in the cache (slot = position), then in the chunk */
  a = MIN (nsk, p0);
  if (a > s0)
    n_spans += add_cache_span (ctx, &spans[n_spans], qs, kc, vc, s0, a - s0);
  a = MAX (p0, s0);
  if (nsk > a)
    n_spans += add_span (ctx, &spans[n_spans], qs, kb, vb, kv_dim, a - p0,
        nsk - a);
  /* the window: in the cache up to the chunk, then in the chunk */
  n_spans += window_spans (ctx, lo, MIN (pt + 1, p0), qa, kc, vc,
      &spans[n_spans]);
  a = MAX (lo, p0);
  if (pt + 1 > a)
    n_spans += add_span (ctx, &spans[n_spans], qa, kb, vb, kv_dim, a - p0,
        pt + 1 - a);

  {
    guint64 cached = 0, own = 0;
    guint i;

    for (i = 0; i < n_spans; i++) {
      if (spans[i].k_tiled)
        cached += spans[i].n;
      else
        own += spans[i].n;
    }
    __atomic_fetch_add (&job->cache_rows, cached, __ATOMIC_RELAXED);
    __atomic_fetch_add (&job->chunk_rows, own, __ATOMIC_RELAXED);
  }
  /* the group's query heads are adjacent in the row: every key and value
   * row is read once for all of them */
  npu_attention_rows_sinks (spans, n_spans, hd, gqa, hd,
      ctx->model->attn_scale, l->sinks ? l->sinks + g * gqa : NULL, sc,
      n_ctx, ctx->att + q_off, hd);
}

/* Items (row, KV head), each on the score rows of the worker running it */
static void
attn_slice_rows (gsize start, gsize end, guint worker, gpointer user_data)
{
  AttnJob *job = user_data;
  const NpuLlmHParams *hp = &job->ctx->model->hp;
  guint n_kv = hp->n_head_kv, gqa = hp->n_head / n_kv;
  float *sc = job->ctx->scores + (gsize) worker * gqa * job->ctx->p.n_ctx;
  gsize i;

  for (i = start; i < end; i++)
    attend_group (job, i % n_kv, i / n_kv, sc);
}

/* Items KV heads, every row of the chunk, on the head's own score rows */
static void
attn_slice_heads (gsize start, gsize end, guint worker, gpointer user_data)
{
  AttnJob *job = user_data;
  const NpuLlmHParams *hp = &job->ctx->model->hp;
  guint gqa = hp->n_head / hp->n_head_kv;
  gsize g, t;

  for (g = start; g < end; g++)
    for (t = 0; t < job->n; t++)
      attend_group (job, g, t, job->ctx->scores + g * gqa * job->ctx->p.n_ctx);
}

static void
run_attention (NpuLlmContext * ctx, NpuTask * task, guint layer, guint64 p0,
    gsize n)
{
  AttnJob job = { ctx, layer, p0, n, 0, 0 };
  const NpuLlmHParams *hp = &ctx->model->hp;
  guint n_kv = hp->n_head_kv;
  guint64 row = npu_kv_row_bytes (ctx->p.kv_type, hp->head_dim);
  NpuBytes *b = &ctx->stats.bytes;

  /* The score rows (n_head of them, allocated with the context) hold one
   * group of gqa rows per KV head: with no more threads than KV heads each
   * worker has a group of its own and the (row, head) items balance any
   * chunk; with more, each KV head's group is its own and the heads are
   * the items. */
  if (!task)
    attn_slice_heads (0, n_kv, 0, &job);
  else if (npu_task_get_n_threads (task) <= n_kv)
    npu_task_parallel_for (task, n * n_kv, 1, attn_slice_rows, &job);
  else
    npu_task_parallel_for (task, n_kv, 1, attn_slice_heads, &job);

  /* a key row and a value row for each row attended to, of each head */
  npu_bytes_read (b, NPU_BYTES_KV, job.cache_rows * 2 * row);
  npu_bytes_read (b, NPU_BYTES_ACTIVATIONS, job.chunk_rows * 2 * row +
      (guint64) n * ctx->q_dim * 4);
  npu_bytes_write (b, NPU_BYTES_ACTIVATIONS, (guint64) n * ctx->q_dim * 4);
  count_vector (ctx, ctx->model->layers[layer].sinks, hp->n_head);
}

/* The chunk's @n rows (in ctx->k_st, ctx->v_st) into layer @il's ring,
 * in place, each head's part into its rows (its key into its slot's place
 * in a tile); the last write to a slot wins, as the newest token is the
 * one to keep */
static void
cache_store (NpuLlmContext * ctx, guint il, guint64 p0, gsize n)
{
  const NpuLlmHParams *hp = &ctx->model->hp;
  gsize layer_off = (gsize) il * ctx->p.n_ctx * ctx->kv_row;
  gsize tb = npu_kv_tile_bytes (ctx->p.kv_type, hp->head_dim);
  gsize t;

  for (t = 0; t < n; t++) {
    gsize s = cache_slot (ctx, p0 + t), hr = ctx->head_row;
    guint g;

    for (g = 0; g < hp->n_head_kv; g++) {
      gsize dst = layer_off + ((gsize) g * ctx->p.n_ctx + s) * hr;
      guint8 *kt = ctx->k_cache + ((gsize) il * hp->n_head_kv + g) *
          ctx->k_head + s / NPU_KV_TILE_ROWS * tb;

      npu_kv_tile_put (ctx->p.kv_type, hp->head_dim,
          ctx->k_st + t * ctx->kv_row + g * hr, kt, s % NPU_KV_TILE_ROWS);
      memcpy (ctx->v_cache + dst, ctx->v_st + t * ctx->kv_row + g * hr, hr);
    }
  }
  npu_bytes_write (&ctx->stats.bytes, NPU_BYTES_KV,
      (guint64) n * hp->n_head_kv * 2 * npu_kv_row_bytes (ctx->p.kv_type,
          hp->head_dim));
}

/* ctx->tmp = Wdown . (silu (Wgate . xn) * (Wup . xn)) for @n rows */
/* gemma3's GeGLU: gate = gelu (gate) up, ggml_gelu's tanh form (scalar:
 * no vector copy yet) */
static void
gelu_mul (float *gate, const float *up, gsize n)
{
  gsize i;

  for (i = 0; i < n; i++) {
    float x = gate[i];

    gate[i] = 0.5f * x * (1.0f + tanhf (0.79788456080286535587989211986876f *
            x * (1.0f + 0.044715f * x * x))) * up[i];
  }
}

static void
dense_ffn (NpuLlmContext * ctx, NpuTask * task, const Layer * l, gsize n,
    guint ff)
{
  const Matrix *w[2] = { &l->wgate, &l->wup };
  float *const y[2] = { ctx->gate, ctx->up };

  npu_weight_matrix_mul_multi (task, w, 2, ctx->xn, n, y, ctx->p.precision);
  count_products (ctx, w, 2, n);
  if (ctx->model->hp.arch == NPU_LLM_ARCH_GEMMA3)
    gelu_mul (ctx->gate, ctx->up, n * ff);
  else
    /* in vectors: with a scalar expf this loop took 25 us a layer of
     * the 1.1 B llama, on one thread while the others waited
     * (npuvecmath.h) */
    npu_silu_mul (ctx->gate, ctx->up, ctx->gate, n * ff);
  npu_weight_matrix_mul (task, &l->wdown, ctx->gate, n, ctx->tmp,
      ctx->p.precision);
  count_product (ctx, &l->wdown, n);
}

/* gemma3's norm of a block's output, in place, before the residual */
static void
post_norm (NpuLlmContext * ctx, const float *w, float *y, gsize n)
{
  guint dim = ctx->model->hp.n_embd;
  gsize t;

  if (!w)
    return;
  for (t = 0; t < n; t++)
    npu_rms_norm (y + t * dim, w, y + t * dim, dim, ctx->model->hp.rms_eps);
  count_vector (ctx, w, dim);
}

/* Rotation tables for the chunk, shared by every layer and head (and the
 * sliding layers' own, gemma3); @rel: the streaming window's too */
static void
chunk_rope_tables (NpuLlmContext * ctx, guint64 p0, gsize n, gboolean rel)
{
  const NpuLlmModel *model = ctx->model;
  guint n_rot = model->hp.n_rot, swa;
  gsize t;

  for (swa = 0; swa < (model->inv_freq_swa ? 2u : 1u); swa++) {
    float *abs_t = swa ? ctx->rope_abs_swa : ctx->rope_abs;
    float *rel_t = swa ? ctx->rope_rel_swa : ctx->rope_rel;

    for (t = 0; t < n; t++) {
      rope_table (model, swa, p0 + t, abs_t + t * n_rot);
      if (rel)
        rope_table (model, swa, MIN (p0 + t, (guint64) ctx->p.n_ctx - 1),
            rel_t + t * n_rot);
    }
  }
}

/* q, k and v of the chunk's normed rows (ctx->xn), with their biases and
 * head norms, rotated (@rel: ctx->qr too), k and v in the cache's type */
static void
attn_qkv (NpuLlmContext * ctx, NpuTask * task, const Layer * l, gsize n,
    gboolean rel)
{
  const NpuLlmModel *model = ctx->model;
  const NpuLlmHParams *hp = &model->hp;
  gboolean swa_rope = l->swa && model->inv_freq_swa;
  const float *rope_abs = swa_rope ? ctx->rope_abs_swa : ctx->rope_abs;
  const float *rope_rel = swa_rope ? ctx->rope_rel_swa : ctx->rope_rel;
  gsize t;
  {
    /* One pass over q, k and v: the activations are quantised once and
     * the three matrices stream as one read. */
    const Matrix *w[3] = { &l->wq, &l->wk, &l->wv };
    float *const y[3] = { ctx->q, ctx->k, ctx->v };

    npu_weight_matrix_mul_multi (task, w, 3, ctx->xn, n, y, ctx->p.precision);
    count_products (ctx, w, 3, n);
  }
  add_bias (ctx->q, l->bq, n, ctx->q_dim);
  add_bias (ctx->k, l->bk, n, ctx->kv_dim);
  add_bias (ctx->v, l->bv, n, ctx->kv_dim);
  head_norm (hp, ctx->q, l->q_norm, n, hp->n_head);
  head_norm (hp, ctx->k, l->k_norm, n, hp->n_head_kv);
  count_vector (ctx, l->bq, ctx->q_dim);
  count_vector (ctx, l->bk, ctx->kv_dim);
  count_vector (ctx, l->bv, ctx->kv_dim);
  count_vector (ctx, l->q_norm, hp->head_dim);
  count_vector (ctx, l->k_norm, hp->head_dim);
  for (t = 0; t < n; t++) {
    float *qrow = ctx->q + t * ctx->q_dim;

    if (rel) {
      float *qr = ctx->qr + t * ctx->q_dim;

      memcpy (qr, qrow, ctx->q_dim * sizeof (float));
      rope_apply (model, qr, hp->n_head, rope_rel + t * hp->n_rot);
    }
    rope_apply (model, qrow, hp->n_head, rope_abs + t * hp->n_rot);
    rope_apply (model, ctx->k + t * ctx->kv_dim, hp->n_head_kv,
        rope_abs + t * hp->n_rot);
  }
  /* The chunk's keys and values in the cache's type, before attention:
   * its queries read their own chunk's rows as later ones will read
   * them from the cache, so a batch gives what one token at a time
   * gives */
  if (ctx->p.kv_type != NPU_KV_F32) {
    for (t = 0; t < n; t++) {
      npu_kv_encode_row (ctx->p.kv_type, ctx->k + t * ctx->kv_dim,
          ctx->kv_dim, ctx->k_st + t * ctx->kv_row);
      npu_kv_encode_row (ctx->p.kv_type, ctx->v + t * ctx->kv_dim,
          ctx->kv_dim, ctx->v_st + t * ctx->kv_row);
    }
  }
}

/* x += the attention block of layer @il over the chunk */
static void
attn_block (NpuLlmContext * ctx, NpuTask * task, guint il, guint64 p0,
    gsize n, gboolean rel)
{
  const NpuLlmHParams *hp = &ctx->model->hp;
  const Layer *l = &ctx->model->layers[il];
  guint dim = hp->n_embd;
  gsize t, i;

  for (t = 0; t < n; t++)
    npu_rms_norm (ctx->x + t * dim, l->attn_norm, ctx->xn + t * dim, dim,
        hp->rms_eps);
  count_vector (ctx, l->attn_norm, dim);
  attn_qkv (ctx, task, l, n, rel);

  run_attention (ctx, task, il, p0, n);

  cache_store (ctx, il, p0, n);

  npu_weight_matrix_mul (task, &l->wo, ctx->att, n, ctx->tmp, ctx->p.precision);
  count_product (ctx, &l->wo, n);
  add_bias (ctx->tmp, l->bo, n, dim);
  count_vector (ctx, l->bo, dim);
  post_norm (ctx, l->post_attn_norm, ctx->tmp, n);
  for (i = 0; i < n * dim; i++)
    ctx->x[i] += ctx->tmp[i];
}

/* x += the feed-forward block (dense or the experts) of @l */
static void
ffn_block (NpuLlmContext * ctx, NpuTask * task, const Layer * l, gsize n)
{
  const NpuLlmHParams *hp = &ctx->model->hp;
  guint dim = hp->n_embd;
  gsize t, i;

  for (t = 0; t < n; t++)
    npu_rms_norm (ctx->x + t * dim, l->ffn_norm, ctx->xn + t * dim, dim,
        hp->rms_eps);
  count_vector (ctx, l->ffn_norm, dim);
  if (hp->n_expert > 0)
    npu_llm_moe_forward (&l->moe, task, ctx->p.precision, ctx->xn, n,
        ctx->tmp, &ctx->moe, &ctx->stats.bytes);
  else
    dense_ffn (ctx, task, l, n, hp->n_ff);
  post_norm (ctx, l->post_ffn_norm, ctx->tmp, n);
  for (i = 0; i < n * dim; i++)
    ctx->x[i] += ctx->tmp[i];
}

/* One chunk of @n <= n_batch rows already in ctx->x, at positions p0.. */
static void
forward_chunk (NpuLlmContext * ctx, NpuTask * task, guint64 p0, gsize n)
{
  const NpuLlmModel *model = ctx->model;
  const NpuLlmHParams *hp = &model->hp;
  guint dim = hp->n_embd, il;
  gsize t, n_out;
  gboolean rel = ctx->p.n_sink > 0 && p0 + n > ctx->p.n_ctx;

  chunk_rope_tables (ctx, p0, n, rel);
  for (il = 0; il < hp->n_layer; il++) {
    attn_block (ctx, task, il, p0, n, rel);
    ffn_block (ctx, task, &model->layers[il], n);
  }

  /* Logits: every row, or the last one only */
  n_out = ctx->p.all_logits ? n : 1;
  for (t = 0; t < n_out; t++) {
    gsize src = n - n_out + t;

    npu_rms_norm (ctx->x + src * dim, model->output_norm, ctx->xn + t * dim,
        dim, hp->rms_eps);
  }
  count_vector (ctx, model->output_norm, dim);
  npu_weight_matrix_mul (task, &model->output, ctx->xn, n_out, ctx->logits,
      ctx->p.precision);
  count_product (ctx, &model->output, n_out);
  ctx->n_logits = n_out;
}

static void
embed_token (const NpuLlmModel * model, gint32 token, float *out)
{
  const NpuTensorView *e = &model->tok_embd;
  guint dim = model->hp.n_embd;
  const guint8 *row = (const guint8 *) e->data +
      (gsize) token * model->embd_row_bytes;

  /* the loader checked the type and the row length */
  gboolean ok = npu_quants_dequantize_row (e->type, row, out, dim);

  g_assert (ok);
}

static void
scale_row (float *row, guint n, float scale)
{
  guint i;

  for (i = 0; i < n; i++)
    row[i] *= scale;
}

static gboolean
eval_common (NpuLlmContext * ctx, NpuTask * task, const gint32 * tokens,
    const float *embd, gsize n, GError ** error)
{
  const NpuLlmHParams *hp = &ctx->model->hp;
  gsize i, done;

  if (n == 0)
    return TRUE;
  if (tokens) {
    for (i = 0; i < n; i++) {
      if (tokens[i] < 0 || (guint) tokens[i] >= hp->n_vocab) {
        g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
            "token %d (index %" G_GSIZE_FORMAT ") is not in the vocabulary "
            "of %u tokens", tokens[i], i, hp->n_vocab);
        return FALSE;
      }
    }
  }
  if (ctx->p.all_logits && n > ctx->p.n_batch) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "all_logits: %" G_GSIZE_FORMAT " tokens exceed n_batch %u", n,
        ctx->p.n_batch);
    return FALSE;
  }
  if (!ctx->p.streaming && ctx->n_past + n > ctx->p.n_ctx) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_CONTEXT_FULL,
        "context full: %" G_GUINT64_FORMAT " + %" G_GSIZE_FORMAT
        " tokens exceed n_ctx %u and streaming is off", ctx->n_past, n,
        ctx->p.n_ctx);
    return FALSE;
  }

  for (done = 0; done < n;) {
    gsize m = MIN (n - done, (gsize) ctx->p.n_batch);
    guint64 p0 = ctx->n_past;

    for (i = 0; i < m; i++) {
      float *row = ctx->x + i * hp->n_embd;

      if (tokens) {
        embed_token (ctx->model, tokens[done + i], row);
        /* gemma3 scales the tokens' rows, not media embeddings */
        if (hp->arch == NPU_LLM_ARCH_GEMMA3)
          scale_row (row, hp->n_embd, sqrtf ((float) hp->n_embd));
        npu_bytes_read (&ctx->stats.bytes, NPU_BYTES_TOKENS, 4);
        npu_bytes_read (&ctx->stats.bytes, NPU_BYTES_WEIGHTS,
            ctx->model->embd_row_bytes);
      } else {
        memcpy (row, embd + (done + i) * hp->n_embd,
            hp->n_embd * sizeof (float));
        npu_bytes_read (&ctx->stats.bytes, NPU_BYTES_TOKENS,
            (guint64) hp->n_embd * 4);
      }
    }
    forward_chunk (ctx, task, p0, m);
    /* Tokens pushed out of the window by this chunk */
    if (p0 + m > ctx->p.n_ctx)
      ctx->stats.n_evicted += p0 + m - MAX (p0, (guint64) ctx->p.n_ctx);
    ctx->n_past += m;
    ctx->n_past_max = MAX (ctx->n_past_max, ctx->n_past);
    done += m;
  }
  if (n == 1)
    ctx->stats.n_decode++;
  else
    ctx->stats.n_prefill += n;
  return TRUE;
}

gboolean
npu_llm_eval_tokens (NpuLlmContext * ctx, NpuTask * task,
    const gint32 * tokens, gsize n, GError ** error)
{
  g_return_val_if_fail (ctx != NULL && (tokens != NULL || n == 0), FALSE);
  return eval_common (ctx, task, tokens, NULL, n, error);
}

gboolean
npu_llm_eval_embeddings (NpuLlmContext * ctx, NpuTask * task,
    const float *embd, gsize n, GError ** error)
{
  g_return_val_if_fail (ctx != NULL && (embd != NULL || n == 0), FALSE);
  return eval_common (ctx, task, NULL, embd, n, error);
}
