/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: answering prompts with a language model
 *
 * Everything npullm does between "a prompt arrived" and "text came out",
 * without GStreamer types: the chat template, tokenisation, splicing media
 * embeddings in where the model expects them, evaluation on the backend
 * (one task per step, so a flush cancels between steps), sampling, stop
 * strings, and UTF-8-safe streaming of the answer.
 */
#ifndef __NPU_LLM_SESSION_H__
#define __NPU_LLM_SESSION_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/device/npubackend.h"
#include "core/formats/npugguf.h"
#include "npullm.h"
#include "core/text/nputokenizer.h"
#include "core/text/npuchat.h"
#include "core/text/npuharmony.h"
#include "npupace.h"

G_BEGIN_DECLS

#define NPU_LLM_SESSION_ERROR (npu_llm_session_error_quark ())
NPU_API
GQuark npu_llm_session_error_quark (void);

typedef enum
{
  NPU_LLM_SESSION_ERROR_PROMPT,         /* prompt longer than the context */
  NPU_LLM_SESSION_ERROR_MEDIA,          /* media rows of the wrong width */
  NPU_LLM_SESSION_ERROR_CANCELLED,      /* the queue was flushed */
} NpuLlmSessionError;

typedef struct
{
  guint n_ctx;                  /* 0: the model's, at most 4096 */
  guint n_sink;                 /* attention sinks kept when sliding */
  NpuKvType kv_type;            /* the KV cache's storage (F16) */
  NpuMatmulPrecision precision; /* of the matrix products (FAST) */
  guint max_tokens;             /* per answer */
  gboolean keep_context;        /* one conversation across answers */
  gchar *system_prompt;         /* NULL: the template's default */
  gchar *chat_template;         /* NULL/"auto", "none", a family, or custom */
  gchar **stop;                 /* extra stop strings, NULL-terminated */
  NpuLlmSamplerParams sampler;
  /* 0: decode as fast as possible; else paced to this many tokens a
   * second with the fewest threads that hold it (npupace.h) */
  gdouble pace_rate;
} NpuLlmSessionParams;

/* Embeddings of one image or audio clip, n_rows x n_embd F32, spliced into
 * the prompt in order, before the user's text.  An image's rows are
 * wrapped in the tokens the vocabulary has for images (Idefics3/SmolVLM:
 * "\n\n<fake_token_around_image><global-img>" ... "<fake_token_around_image>",
 * as llama.cpp's mtmd wraps its overview image); a vocabulary without
 * them gets the rows alone. */
typedef struct
{
  const float *rows;
  guint n_rows;
  gboolean image;               /* from a vision encoder */
} NpuLlmMedia;

typedef struct
{
  gint64 prompt_us;             /* prefill (time to first token) */
  gint64 decode_us;
  guint n_prompt;
  guint n_reused;               /* prompt tokens whose cache rows the last
                                 * answer left (not evaluated again) */
  guint n_context;              /* tokens of earlier turns the answer
                                 * attends to (keep_context) */
  guint n_generated;
  guint n_decoded;              /* tokens evaluated after the prompt (the
                                 * last one generated may not be) */
  NpuBytes prompt_bytes;        /* moved by the prompt's evaluation */
  NpuBytes decode_bytes;        /* by the n_decoded tokens' (npullm.h) */
  gdouble pace_rate;            /* tokens/s the decode was paced at, or 0 */
  guint decode_threads;         /* the last token's threads */
  gint64 paced_sleep_us;        /* slept between tokens to hold the pace */
  gboolean hit_eog;
  gboolean hit_stop;
  gboolean hit_max;
} NpuLlmAnswerStats;

/* Receives each piece of the answer as it is generated: whole UTF-8
 * characters only.  Returns FALSE to stop generating. */
typedef gboolean (*NpuLlmTextFunc) (const gchar * text, gsize len,
    gpointer user_data);

typedef struct _NpuLlmSession NpuLlmSession;

NPU_API
void npu_llm_session_params_init (NpuLlmSessionParams * params);
NPU_API
void npu_llm_session_params_clear (NpuLlmSessionParams * params);

NPU_API
NpuLlmSession *npu_llm_session_new (const NpuGguf * gguf,
    NpuLlmModel * model, const NpuLlmSessionParams * params, GError ** error);
NPU_API
void npu_llm_session_free (NpuLlmSession * session);

NPU_API
const NpuTokenizer *npu_llm_session_get_tokenizer (NpuLlmSession * session);
NPU_API
const gchar *npu_llm_session_get_template_name (NpuLlmSession * session);
NPU_API
guint npu_llm_session_get_n_embd (NpuLlmSession * session);
/* The tokens an image's rows go between (none when the vocabulary has no
 * image tokens); the arrays belong to the session */
NPU_API
void npu_llm_session_get_image_wrapping (NpuLlmSession * session,
    const gint32 ** open, guint * n_open, const gint32 ** close,
    guint * n_close);
NPU_API
void npu_llm_session_set_max_tokens (NpuLlmSession * session,
    guint max_tokens);
NPU_API
void npu_llm_session_set_keep_context (NpuLlmSession * session,
    gboolean keep_context);
NPU_API
void npu_llm_session_set_pace (NpuLlmSession * session,
    gdouble tokens_per_second);
NPU_API
void npu_llm_session_set_flushing (NpuLlmSession * session,
    gboolean flushing);
/* The context's counters: the cache and scratch sizes, allocations,
 * tokens evicted from the window */
NPU_API
void npu_llm_session_get_context_stats (NpuLlmSession * session,
    NpuLlmStats * stats);

NPU_API
gboolean npu_llm_session_answer (NpuLlmSession * session, NpuQueue * queue,
    const gchar * user, const NpuLlmMedia * media, guint n_media,
    NpuLlmTextFunc emit, gpointer user_data, NpuLlmAnswerStats * stats,
    GError ** error);

/* Inside @emit: the harmony channel of the text (a harmony answer hands
 * on its final channel and its analysis, each piece of one; other
 * families: always NPU_HARMONY_FINAL) */
NPU_API
NpuHarmonyChannel npu_llm_session_get_emit_channel (NpuLlmSession * session);

G_END_DECLS

#endif /* __NPU_LLM_SESSION_H__ */
