/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: decoder-only transformer (llama, qwen2, qwen3, gpt-oss) over
 * MXFP4 weights
 *
 * The compute core of the npullm element: hyper-parameters from GGUF
 * metadata under llama.cpp's key names, weights through a lookup callback
 * (a GGUF mapping, or the tensors the `weights` pad receives), a forward
 * pass in F32 activations whose matrix products go through
 * npu_matmul_mxfp4(), a KV cache allocated once per context and run as a
 * ring with attention sinks (StreamingLLM), and the samplers.
 * docs/llm-core.md describes the semantics and the measured figures.
 *
 * Threads: a model is immutable once loaded and may serve several
 * contexts; a context is used by one task at a time.  The eval functions
 * take the running NpuTask (or NULL to run on the calling thread) and
 * spread matrix products and attention over the task's threads.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_LLM_H__
#define __NPU_LLM_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/device/npubackend.h"
#include "core/formats/npugguf.h"
#include "core/device/nputensorview.h"
#include "core/formats/npukvtype.h"
#include "core/cpu/npumatmul.h"
#include "core/device/npubytes.h"

G_BEGIN_DECLS

#define NPU_LLM_ERROR (npu_llm_error_quark ())
NPU_API
GQuark npu_llm_error_quark (void);

typedef enum
{
  NPU_LLM_ERROR_UNSUPPORTED,    /* architecture, RoPE scaling, tensor type */
  NPU_LLM_ERROR_MISSING,        /* metadata key or tensor absent */
  NPU_LLM_ERROR_SHAPE,          /* tensor shape, inconsistent parameters */
  NPU_LLM_ERROR_INVALID,        /* bad argument: token id, sampler value */
  NPU_LLM_ERROR_CONTEXT_FULL,   /* cache full and streaming disabled */
} NpuLlmError;

typedef enum
{
  NPU_LLM_ARCH_LLAMA,
  NPU_LLM_ARCH_QWEN2,
  NPU_LLM_ARCH_QWEN3,
  NPU_LLM_ARCH_GPT_OSS,         /* llama.cpp's LLM_ARCH_OPENAI_MOE */
  NPU_LLM_ARCH_GEMMA3,          /* llama.cpp's gemma3 (the iswa graph) */
} NpuLlmArch;

/* llama.cpp's LLAMA_ROPE_TYPE_NORM (rotate adjacent pairs x[2i], x[2i+1])
 * and LLAMA_ROPE_TYPE_NEOX (rotate x[i], x[i + n_rot/2]) */
typedef enum
{
  NPU_LLM_ROPE_NORM,
  NPU_LLM_ROPE_NEOX,
} NpuLlmRopeType;

/**
 * NpuLlmHParams:
 *
 * Filled by npu_llm_hparams_from_gguf() from the file's metadata; anyone
 * who has the values another way may fill it by hand.  @n_vocab is set by
 * the model from token_embd's ne[1] (0 here is fine).
 */
typedef struct
{
  NpuLlmArch arch;
  guint n_embd;                 /* <arch>.embedding_length */
  guint n_layer;                /* <arch>.block_count */
  guint n_ff;                   /* <arch>.feed_forward_length */
  guint n_head;                 /* <arch>.attention.head_count */
  guint n_head_kv;              /* <arch>.attention.head_count_kv (default n_head) */
  guint head_dim;               /* <arch>.attention.key_length (default n_embd / n_head) */
  guint n_rot;                  /* <arch>.rope.dimension_count (default head_dim) */
  guint n_ctx_train;            /* <arch>.context_length */
  guint n_vocab;                /* token_embd ne[1] */
  gfloat rms_eps;               /* <arch>.attention.layer_norm_rms_epsilon */
  gfloat rope_freq_base;        /* <arch>.rope.freq_base (default 10000) */
  gfloat rope_freq_scale;       /* 1 / <arch>.rope.scaling.factor */
  NpuLlmRopeType rope_type;     /* from the architecture, as llama.cpp */

  /* YaRN (<arch>.rope.scaling.type "yarn"), as ggml's rope_yarn() with
   * ext_factor 1: each frequency blends its interpolated (times
   * rope_freq_scale) and original value by a ramp between the dimensions
   * where beta_fast and beta_slow rotations fit in yarn_orig_ctx, and
   * cos and sin are scaled by rope_attn_factor (1 + 0.1 ln (1 /
   * rope_freq_scale)) */
  gboolean rope_yarn;
  guint yarn_orig_ctx;          /* rope.scaling.original_context_length
                                 * (default context_length) */
  gfloat yarn_beta_fast;        /* rope.scaling.yarn_beta_fast (32) */
  gfloat yarn_beta_slow;        /* rope.scaling.yarn_beta_slow (1) */
  gfloat rope_attn_factor;      /* rope.scaling.attn_factor (1) */

  /* gpt-oss: a mixture of experts in place of the dense feed-forward
   * (0 experts: dense), attention sinks, and a sliding window on the
   * layers il with il % swa_period < swa_period - 1 (llama.cpp's
   * set_swa_pattern(): with the period 2 of gpt-oss, the even layers) */
  guint n_expert;               /* <arch>.expert_count */
  guint n_expert_used;          /* <arch>.expert_used_count */
  guint n_ff_exp;               /* <arch>.expert_feed_forward_length */
  guint n_swa;                  /* <arch>.attention.sliding_window (0: none) */
  guint swa_period;             /* <arch>.attention.sliding_window_pattern
                                 * (2) */

  /* gemma3: the sliding layers' RoPE base (llama.cpp's
   * rope_freq_base_train_swa, 10000, scale 1; 0: the same RoPE on every
   * layer), and the queries' scale (0: 1 / sqrt (head_dim)) */
  gfloat rope_freq_base_swa;
  gfloat attn_scale;
} NpuLlmHParams;

NPU_API
gboolean npu_llm_hparams_from_gguf (const NpuGguf * gguf,
    NpuLlmHParams * hp, GError ** error);

typedef struct _NpuLlmModel NpuLlmModel;
typedef struct _NpuLlmContext NpuLlmContext;

/**
 * NpuLlmLoadFlags:
 * @NPU_LLM_LOAD_IN_PLACE: MXFP4 matrices are read where the lookup put
 *   them (ggml's block layout): no copy, the data must outlive the model
 * @NPU_LLM_LOAD_REPACK: every MXFP4 matrix is repacked once into the
 *   kernels' split layout (npu_mxfp4_matrix_repack(): still 4.25 bits a
 *   weight, so a private copy the size of the weights; their source may
 *   then go away, not token_embd's nor a Q8_0 output's, read in place).
 *   Decoding is measurably faster (docs/llm-core.md).  gpt-oss's experts
 *   are read in place whatever the flags: a private copy of them would be
 *   the size of the file, where a token reads only the few it is routed
 *   to (their source must outlive the model).
 */
typedef enum
{
  NPU_LLM_LOAD_IN_PLACE = 0,
  NPU_LLM_LOAD_REPACK = 1 << 0,
} NpuLlmLoadFlags;

/* Every weight matrix is read in the type the tensor stores, where
 * @lookup's views point (they must outlive the model): F32, F16, BF16,
 * Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K or MXFP4
 * (npuweightmatrix.h); nothing is converted.  NPU_LLM_LOAD_REPACK repacks
 * the MXFP4 ones into the split layout, a copy the model owns.
 * token_embd is any of these types too (rows decoded one token at a
 * time); with no output.weight the logits use token_embd.  A type with no
 * decoder, or rows that are not whole blocks, is an error that names the
 * tensor.  @hp is copied. */
NPU_API
NpuLlmModel *npu_llm_model_new (const NpuLlmHParams * hp,
    NpuTensorLookup lookup, gpointer user_data, NpuLlmLoadFlags flags,
    GError ** error);
/* Opens (maps) the GGUF file and keeps it open for the model's life.
 * @path may also be a Hugging Face gpt-oss directory (its config.json, its
 * index or a shard: npu_hf_model_is_hf_path()), read in place as
 * npuhfmodel.h says. */
NPU_API
NpuLlmModel *npu_llm_model_new_from_file (const gchar * path,
    NpuLlmLoadFlags flags, GError ** error);
/* Of a model from npu_llm_model_new_from_file(): the metadata its
 * tokenizer and chat template come from (the GGUF file's, or the one a
 * directory's JSON files make); NULL for npu_llm_model_new() */
NPU_API
const NpuGguf *npu_llm_model_get_metadata (const NpuLlmModel * model);
NPU_API
void npu_llm_model_free (NpuLlmModel * model);
NPU_API
const NpuLlmHParams *npu_llm_model_get_hparams (const NpuLlmModel * model);
/* Weight bytes one decoded token reads: every matrix, once, plus one
 * embedding row (the roofline's numerator); of a mixture of experts, the
 * n_expert_used experts a token is routed to in each layer */
NPU_API
guint64 npu_llm_model_get_decode_bytes (const NpuLlmModel * model);
/* Bytes of weights the model holds in its own memory rather than where
 * the file has them: the repacked MXFP4 copies of NPU_LLM_LOAD_REPACK.
 * Values are never converted, so a model loaded in place holds none: 0
 * whatever the file's types. */
NPU_API
guint64 npu_llm_model_get_converted_bytes (const NpuLlmModel * model);

/**
 * NpuLlmContextParams:
 * @n_ctx: KV cache capacity in tokens (0 = the model's context_length)
 * @n_batch: most tokens per forward step; longer inputs are split (64)
 * @n_sink: tokens kept at the start when the cache slides (4)
 * @streaming: when the cache is full, evict the oldest token after the
 *   sinks (TRUE, default) or fail with NPU_LLM_ERROR_CONTEXT_FULL
 * @all_logits: keep the logits of every token of the last eval (needs
 *   n <= @n_batch per eval); else only the last token's are computed
 * @kv_type: how the cache stores keys and values (NPU_KV_F16, default:
 *   half of F32's bytes; NPU_KV_Q8_0: 34 bytes per 32 values, needs a
 *   head size that is a multiple of 32; NPU_KV_F32).  npukvtype.h gives
 *   each type's error; attention reads the cache in its type.
 * @precision: activations of the layer matrices' products (npumatmul.h):
 *   NPU_MATMUL_PRECISION_FAST (int8, as llama.cpp; default) or
 *   NPU_MATMUL_PRECISION_ACCURATE (int8 plus its int8 residual, ~16 bits),
 *   for every product including the logits'.
 */
typedef struct
{
  guint n_ctx;
  guint n_batch;
  guint n_sink;
  gboolean streaming;
  gboolean all_logits;
  NpuKvType kv_type;
  NpuMatmulPrecision precision;
} NpuLlmContextParams;

typedef struct
{
  guint64 n_prefill;            /* tokens evaluated in calls of n > 1 */
  guint64 n_decode;             /* calls of n = 1 */
  guint64 n_evicted;            /* tokens dropped from the window */
  guint n_allocs;               /* allocations the context ever made */
  gsize kv_bytes;               /* the cache (K and V, every layer) */
  gsize scratch_bytes;          /* activations, scores, logits */
  /* Bytes the evaluations moved since the context was made, counted by
   * the forward pass where it does the work (npubytes.h); a caller takes
   * the difference over one eval for a token's or a prompt's:
   * - weights: each matrix a chunk multiplies by, once a chunk, in the
   *   layout it is read in (MXFP4: 17 bytes per 32 weights; a Q8_0 logits
   *   matrix: 34 per 32), the F32 norms, biases and sinks (4 bytes a
   *   value), and each token's row of token_embd in the file's type;
   * - kv-cache: read, the rows attention reads from the cache (keys and
   *   values, every layer, in the cache's type: 2 L n_kv S b_kv for a
   *   token at position S attending to all S); written, the chunk's rows
   *   stored (2 L n_kv hd b_kv a token);
   * - activations: the F32 rows into and out of each product and of the
   *   attention (its query, its output, and the chunk's own K/V rows,
   *   read from scratch in the cache's type), the logits written;
   * - tokens: the token ids (4 bytes each) or the F32 embedding rows a
   *   caller hands in. */
  NpuBytes bytes;
} NpuLlmStats;

NPU_API
void npu_llm_context_params_init (NpuLlmContextParams * params);
NPU_API
NpuLlmContext *npu_llm_context_new (NpuLlmModel * model,
    const NpuLlmContextParams * params, GError ** error);
NPU_API
void npu_llm_context_free (NpuLlmContext * ctx);
/* Forget every token; keeps the memory (no allocation) */
NPU_API
void npu_llm_context_reset (NpuLlmContext * ctx);

/* Append @n tokens (ids < n_vocab) / @n rows of n_embd F32 embeddings
 * (spliced-in vision or audio tokens) at the next positions.  On error
 * the context is unchanged. */
NPU_API
gboolean npu_llm_eval_tokens (NpuLlmContext * ctx, NpuTask * task,
    const gint32 * tokens, gsize n, GError ** error);
NPU_API
gboolean npu_llm_eval_embeddings (NpuLlmContext * ctx, NpuTask * task,
    const float *embd, gsize n, GError ** error);

/* n_vocab logits of the last token evaluated (NULL before any eval) */
NPU_API
const float *npu_llm_get_logits (NpuLlmContext * ctx);
/* Logits of token @i of the last eval; NULL unless all_logits */
NPU_API
const float *npu_llm_get_logits_ith (NpuLlmContext * ctx, gsize i);
/* Forget every token from position @n_past on, keeping the first ones
 * (a prompt prefix shared by the next answer).  Possible only while the
 * cache has never slid since the reset and @n_past <= n_past; returns
 * FALSE (context unchanged) otherwise.  The logits are gone until the
 * next eval. */
NPU_API
gboolean npu_llm_context_truncate (NpuLlmContext * ctx, guint64 n_past);
/* Absolute position of the next token (tokens seen since the reset) */
NPU_API
guint64 npu_llm_context_get_n_past (NpuLlmContext * ctx);
/* Tokens the next query attends to besides itself (<= n_ctx - 1) */
NPU_API
guint npu_llm_context_get_n_cached (NpuLlmContext * ctx);
NPU_API
void npu_llm_context_get_stats (NpuLlmContext * ctx, NpuLlmStats * stats);

/* ------------------------------------------------------------------------
 * Sampling (npullm-sample.c)
 *
 * Applied in llama.cpp's default order: repetition penalty, top-k, top-p,
 * min-p, temperature, then a draw.  temperature 0 is greedy: the penalty
 * still applies, then argmax (lowest id on ties).
 */

/**
 * NpuLlmSamplerParams:
 * @temperature: >= 0; 0 = greedy (0.8)
 * @top_k: keep the k most likely; 0 = all (40)
 * @top_p: keep the smallest set whose probability reaches p, in (0, 1];
 *   1 = off (0.95)
 * @min_p: drop tokens below min_p x the top probability, in [0, 1];
 *   0 = off (0.05)
 * @repeat_penalty: > 0; 1 = off (1.0).  A logit of a token among the last
 *   @repeat_last_n accepted ones is divided by it if positive, multiplied
 *   if negative (llama.cpp's rule)
 * @repeat_last_n: history length for the penalty (64)
 * @seed: the PRNG's seed: same seed, same logits, same tokens
 */
typedef struct
{
  gfloat temperature;
  guint top_k;
  gfloat top_p;
  gfloat min_p;
  gfloat repeat_penalty;
  guint repeat_last_n;
  guint64 seed;
} NpuLlmSamplerParams;

typedef struct _NpuLlmSampler NpuLlmSampler;

NPU_API
void npu_llm_sampler_params_init (NpuLlmSamplerParams * params);
/* Validates every parameter (NPU_LLM_ERROR_INVALID naming it); allocates
 * all its buffers here, so sampling never allocates */
NPU_API
NpuLlmSampler *npu_llm_sampler_new (const NpuLlmSamplerParams * params,
    guint n_vocab, GError ** error);
NPU_API
void npu_llm_sampler_free (NpuLlmSampler * sampler);
/* Picks a token from @logits (n_vocab values, not modified) */
NPU_API
gint32 npu_llm_sampler_sample (NpuLlmSampler * sampler, const float *logits);
/* Adds @token to the penalty history (prompt tokens too, as llama.cpp) */
NPU_API
void npu_llm_sampler_accept (NpuLlmSampler * sampler, gint32 token);
/* Clears the history and reseeds */
NPU_API
void npu_llm_sampler_reset (NpuLlmSampler * sampler);

G_END_DECLS

#endif /* __NPU_LLM_H__ */
