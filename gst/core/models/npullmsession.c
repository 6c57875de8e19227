/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: answering prompts with a language model */
#include "npullmsession.h"
#include "npullmsession-testing.h"
#include "core/text/npuharmony.h"

#include <string.h>

/* Marks where media rows go in the formatted prompt; a control character
 * no template or user text carries. */
#define MEDIA_MARKER "\x01media\x01"

struct _NpuLlmSession
{
  NpuTokenizer *tokenizer;
  NpuChatTemplate *tmpl;
  NpuLlmModel *model;           /* owned */
  NpuLlmContext *ctx;
  NpuLlmSampler *sampler;
  NpuLlmSessionParams params;
  guint n_embd;
  /* The prompt tokens before the media (or the whole text prompt) of the
   * last answer, whose keys and values the context still holds at
   * positions [0, n_prefix): the next answer starts from their common
   * prefix (a system prompt, the template's head) */
  gint32 *prefix;
  gsize n_prefix;
  /* keep_context: the context holds the conversation so far, and the next
   * answer goes on from it; the last token of the last answer when it was
   * generated but not evaluated (the answer stopped at max-tokens or a
   * stop string), else NPU_TOKEN_NULL (it ended at an end-of-generation
   * token, which the next turn's text writes itself) */
  gboolean in_conversation;
  gint32 unevaluated;
  /* The tokens an image's rows go between (Idefics3's wrapping), none
   * when the vocabulary lacks them */
  gint32 image_open[3];
  guint n_image_open;
  gint32 image_close[1];
  guint n_image_close;
  /* the channel of the text being handed to emit (harmony answers) */
  NpuHarmonyChannel emit_channel;
  /* tests only: the tokens every answer starts with instead of sampled
   * ones (NPU_LLM_FORCE_ANSWER) */
  gint32 *forced;
  gsize n_forced;
  /* decode paced to params.pace_rate: made at the first paced answer, for
   * its queue's device, and kept (its calibration with it) until the rate
   * changes */
  NpuPace *pace;
  /* the sleeps between paced tokens end early, and the answer fails as
   * cancelled, while flushing is set */
  GMutex pace_lock;
  GCond pace_cond;
  gboolean flushing;
};

/* Tests only: NPU_LLM_FORCE_ANSWER="text" (control-token text as those
 * tokens) makes every answer begin with the tokens of that text instead
 * of the ones sampled, each evaluated as a sampled one would be, so that
 * a test can drive a random model through an answer format (harmony) it
 * would never write.  Read once, when the session is made. */
#define FORCE_ANSWER_ENV "NPU_LLM_FORCE_ANSWER"

GQuark
npu_llm_session_error_quark (void)
{
  return g_quark_from_static_string ("npu-llm-session-error-quark");
}

void
npu_llm_session_params_init (NpuLlmSessionParams * params)
{
  memset (params, 0, sizeof (*params));
  params->n_sink = 4;
  params->kv_type = NPU_KV_F16;
  params->max_tokens = 256;
  npu_llm_sampler_params_init (&params->sampler);
}

void
npu_llm_session_params_clear (NpuLlmSessionParams * params)
{
  g_free (params->system_prompt);
  g_free (params->chat_template);
  g_strfreev (params->stop);
  memset (params, 0, sizeof (*params));
}

/* The token whose text, special tokens included, is @piece: the first in
 * the vocabulary, as llama.cpp's mtmd looks its image tokens up, so that
 * a token stored in another form (GPT-2 byte characters, U+2581) is found
 * by what it stands for. */
static gint32
lookup_piece (const NpuTokenizer * tok, const gchar * piece)
{
  gsize want = strlen (piece);
  guint i, n = npu_tokenizer_n_vocab (tok);

  for (i = 0; i < n; i++) {
    gsize len;
    const gchar *p = npu_tokenizer_token_piece (tok, i, &len);

    if (p && len == want && !memcmp (p, piece, len))
      return i;
  }
  return NPU_TOKEN_NULL;
}

/* Idefics3 (SmolVLM) text models carry <fake_token_around_image> and
 * <global-img>: an image's rows then go between
 * "\n\n<fake_token_around_image><global-img>" and
 * "<fake_token_around_image>", which is how HF's Idefics3 processor and
 * llama.cpp's mtmd present the overview image.  The model was trained to
 * see its image that way; without the wrapping it reads rows it never saw
 * in that place. */
static void
find_image_wrapping (NpuLlmSession * s)
{
  gint32 nl = lookup_piece (s->tokenizer, "\n\n");
  gint32 around = lookup_piece (s->tokenizer, "<fake_token_around_image>");
  gint32 global = lookup_piece (s->tokenizer, "<global-img>");

  if (nl == NPU_TOKEN_NULL || around == NPU_TOKEN_NULL ||
      global == NPU_TOKEN_NULL)
    return;
  s->image_open[0] = nl;
  s->image_open[1] = around;
  s->image_open[2] = global;
  s->n_image_open = 3;
  s->image_close[0] = around;
  s->n_image_close = 1;
}

static NpuChatTemplate *
make_template (const NpuGguf * gguf, const NpuTokenizer * tok,
    const gchar * spec, GError ** error)
{
  if (!spec || !*spec || !g_strcmp0 (spec, "auto"))
    return npu_chat_template_new_from_gguf (gguf, tok, error);
  if (strstr (spec, "{prompt}"))
    return npu_chat_template_new_custom (spec, error);
  return npu_chat_template_new_from_name (spec, error);
}

/**
 * npu_llm_session_new:
 * @gguf: the model file's metadata (tokenizer, chat template); only read
 *   during this call
 * @model: (transfer full): the loaded weights
 *
 * Returns: (transfer full): a session with its context (the KV cache,
 * allocated once here) and sampler, or %NULL with @error set.
 */
NpuLlmSession *
npu_llm_session_new (const NpuGguf * gguf, NpuLlmModel * model,
    const NpuLlmSessionParams * params, GError ** error)
{
  NpuLlmSession *s = g_new0 (NpuLlmSession, 1);
  const NpuLlmHParams *hp = npu_llm_model_get_hparams (model);
  NpuLlmContextParams cp;

  s->emit_channel = NPU_HARMONY_FINAL;
  g_mutex_init (&s->pace_lock);
  g_cond_init (&s->pace_cond);
  s->model = model;
  s->n_embd = hp->n_embd;
  s->params = *params;
  s->params.system_prompt = g_strdup (params->system_prompt);
  s->params.chat_template = g_strdup (params->chat_template);
  s->params.stop = g_strdupv (params->stop);

  s->tokenizer = npu_tokenizer_new_from_gguf (gguf, error);
  if (!s->tokenizer)
    goto failed;
  s->tmpl = make_template (gguf, s->tokenizer, params->chat_template, error);
  if (!s->tmpl)
    goto failed;
  find_image_wrapping (s);
  if (g_getenv (FORCE_ANSWER_ENV))
    s->forced = npu_tokenizer_encode (s->tokenizer,
        g_getenv (FORCE_ANSWER_ENV), -1, FALSE, TRUE, &s->n_forced);

  npu_llm_context_params_init (&cp);
  cp.n_ctx = params->n_ctx ? params->n_ctx : MIN (hp->n_ctx_train ?
      hp->n_ctx_train : 4096, 4096);
  cp.n_sink = params->n_sink;
  cp.kv_type = params->kv_type;
  cp.precision = params->precision;
  cp.streaming = TRUE;
  s->params.n_ctx = cp.n_ctx;
  s->ctx = npu_llm_context_new (model, &cp, error);
  if (!s->ctx)
    goto failed;
  s->sampler = npu_llm_sampler_new (&params->sampler, hp->n_vocab, error);
  if (!s->sampler)
    goto failed;
  return s;

failed:
  npu_llm_session_free (s);
  return NULL;
}

void
npu_llm_session_free (NpuLlmSession * s)
{
  if (!s)
    return;
  g_free (s->prefix);
  g_free (s->forced);
  if (s->sampler)
    npu_llm_sampler_free (s->sampler);
  if (s->ctx)
    npu_llm_context_free (s->ctx);
  if (s->tmpl)
    npu_chat_template_free (s->tmpl);
  if (s->tokenizer)
    npu_tokenizer_free (s->tokenizer);
  npu_llm_model_free (s->model);
  npu_llm_session_params_clear (&s->params);
  npu_pace_free (s->pace);
  g_mutex_clear (&s->pace_lock);
  g_cond_clear (&s->pace_cond);
  g_free (s);
}

const NpuTokenizer *
npu_llm_session_get_tokenizer (NpuLlmSession * s)
{
  return s->tokenizer;
}

const gchar *
npu_llm_session_get_template_name (NpuLlmSession * s)
{
  return npu_chat_family_name (npu_chat_template_get_family (s->tmpl));
}

guint
npu_llm_session_get_n_embd (NpuLlmSession * s)
{
  return s->n_embd;
}

void
npu_llm_session_get_image_wrapping (NpuLlmSession * s, const gint32 ** open,
    guint * n_open, const gint32 ** close, guint * n_close)
{
  *open = s->image_open;
  *n_open = s->n_image_open;
  *close = s->image_close;
  *n_close = s->n_image_close;
}

/**
 * npu_llm_session_set_max_tokens:
 *
 * Sets the length limit of the answers that start from now on.
 */
void
npu_llm_session_set_max_tokens (NpuLlmSession * s, guint max_tokens)
{
  s->params.max_tokens = MAX (max_tokens, 1);
}

/**
 * npu_llm_session_set_keep_context:
 *
 * With %TRUE, each answer from now on goes on from the conversation the
 * context holds (every earlier prompt and answer, within the attention-sink
 * window); %FALSE ends the conversation: the next answer starts afresh
 * (less the shared prompt prefix).
 */
void
npu_llm_session_set_keep_context (NpuLlmSession * s, gboolean keep_context)
{
  s->params.keep_context = keep_context;
  if (!keep_context)
    s->in_conversation = FALSE;
}

/**
 * npu_llm_session_set_pace:
 * @tokens_per_second: 0 to decode as fast as possible, else the rate the
 *   answers from now on are decoded at
 *
 * A paced decode runs each token on the fewest threads that hold the rate
 * (timed over the first tokens at 1, 2, ... threads: npupace.h) and sleeps
 * until the next token is due, so that the other cores and the gaps
 * between tokens are idle.  The prompt's evaluation is never paced.
 */
void
npu_llm_session_set_pace (NpuLlmSession * s, gdouble tokens_per_second)
{
  tokens_per_second = MAX (tokens_per_second, 0.0);
  if (tokens_per_second == s->params.pace_rate)
    return;
  s->params.pace_rate = tokens_per_second;
  g_clear_pointer (&s->pace, npu_pace_free);
}

/**
 * npu_llm_session_set_flushing:
 *
 * While @flushing is %TRUE, a paced answer's sleep between tokens ends at
 * once and the answer fails with NPU_LLM_SESSION_ERROR_CANCELLED; set it
 * beside npu_queue_flush() (which cancels the tasks, not the sleeps) from
 * any thread, and clear it before the next answer.
 */
void
npu_llm_session_set_flushing (NpuLlmSession * s, gboolean flushing)
{
  g_mutex_lock (&s->pace_lock);
  s->flushing = flushing;
  g_cond_broadcast (&s->pace_cond);
  g_mutex_unlock (&s->pace_lock);
}

void
npu_llm_session_get_context_stats (NpuLlmSession * s, NpuLlmStats * stats)
{
  npu_llm_context_get_stats (s->ctx, stats);
}

NpuLlmContext *
npu_llm_session_get_context (NpuLlmSession * s)
{
  return s->ctx;
}

/* ------------------------------------------------------------------------
 * Evaluation on the backend, one task per step
 */
typedef struct
{
  NpuLlmContext *ctx;
  const gint32 *tokens[2];
  gsize n_tokens[2];
  const NpuLlmMedia *media;
  guint n_media;
  const NpuLlmSession *session;
} EvalJob;

static gboolean
eval_wrapping (NpuLlmContext * ctx, NpuTask * task, const NpuLlmMedia * m,
    const gint32 * ids, guint n_ids, GError ** error)
{
  if (!m->image || !n_ids)
    return TRUE;
  return npu_llm_eval_tokens (ctx, task, ids, n_ids, error);
}

static gboolean
eval_job (NpuTask * task, EvalJob * job, GError ** error)
{
  const NpuLlmSession *s = job->session;
  guint i;

  if (job->n_tokens[0] && !npu_llm_eval_tokens (job->ctx, task,
          job->tokens[0], job->n_tokens[0], error))
    return FALSE;
  for (i = 0; i < job->n_media; i++) {
    if (npu_task_is_cancelled (task))
      return TRUE;
    if (!eval_wrapping (job->ctx, task, &job->media[i], s->image_open,
            s->n_image_open, error))
      return FALSE;
    if (!npu_llm_eval_embeddings (job->ctx, task, job->media[i].rows,
            job->media[i].n_rows, error))
      return FALSE;
    if (!eval_wrapping (job->ctx, task, &job->media[i], s->image_close,
            s->n_image_close, error))
      return FALSE;
  }
  if (job->n_tokens[1] && !npu_llm_eval_tokens (job->ctx, task,
          job->tokens[1], job->n_tokens[1], error))
    return FALSE;
  return TRUE;
}

/* The job's evaluation, whose bytes (the model's count, npullm.h) go to
 * the task's finish event: a timeline (npu-timeline) shows what each
 * prefill and token moved */
static gboolean
eval_task (NpuTask * task, gpointer user_data, GError ** error)
{
  EvalJob *job = user_data;
  NpuLlmStats before, after;
  NpuBytes moved;
  gboolean ok;

  npu_llm_context_get_stats (job->ctx, &before);
  ok = eval_job (task, job, error);
  npu_llm_context_get_stats (job->ctx, &after);
  npu_bytes_diff (&moved, &after.bytes, &before.bytes);
  npu_task_report_bytes (task, &moved);
  return ok;
}

static gboolean
run_eval (NpuQueue * queue, const gchar * label, EvalJob * job, GError ** error)
{
  NpuFence *fence = npu_queue_submit_labelled (queue, label, eval_task, job,
      NULL, NULL, 0);
  GError *err = NULL;
  gboolean ok = npu_fence_wait (fence, -1, &err);

  npu_fence_unref (fence);
  if (ok)
    return TRUE;
  if (g_error_matches (err, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED))
    g_set_error (error, NPU_LLM_SESSION_ERROR,
        NPU_LLM_SESSION_ERROR_CANCELLED, "%s", err->message);
  else
    g_propagate_error (error, g_steal_pointer (&err));
  g_clear_error (&err);
  return FALSE;
}

/* ------------------------------------------------------------------------
 * Stop strings: text is held back while it could still become one
 */
static gsize
stop_prefix_hold (const gchar * text, gsize len, gchar ** stop)
{
  gsize hold = 0;
  gchar **s;

  for (s = stop; s && *s; s++) {
    gsize sl = strlen (*s), k;

    for (k = MIN (sl - 1, len); k > hold; k--)
      if (!memcmp (text + len - k, *s, k)) {
        hold = k;
        break;
      }
  }
  return hold;
}

static const gchar *
find_stop (const gchar * text, gsize len, gchar ** stop)
{
  const gchar *first = NULL;
  gchar **s;

  for (s = stop; s && *s; s++) {
    const gchar *p = g_strstr_len (text, len, *s);
    if (p && (!first || p < first))
      first = p;
  }
  return first;
}

/* Every media item must carry its rows; counts them with an image's
 * wrapping tokens. */
static gboolean
count_media_rows (const NpuLlmSession * s, const NpuLlmMedia * media,
    guint n_media, gsize * n_rows, GError ** error)
{
  guint i;

  *n_rows = 0;
  for (i = 0; i < n_media; i++) {
    if (!media[i].rows && media[i].n_rows) {
      g_set_error (error, NPU_LLM_SESSION_ERROR, NPU_LLM_SESSION_ERROR_MEDIA,
          "media %u has no data", i);
      return FALSE;
    }
    *n_rows += media[i].n_rows;
    if (media[i].image)
      *n_rows += s->n_image_open + s->n_image_close;
  }
  return TRUE;
}

/* Formats the prompt with a marker where the media go, then tokenises the
 * two sides (@toks[0] before the media, @toks[1] after): only the first
 * side gets BOS.  A conversation's next turn starts with the last answer's
 * last token when it was generated but not evaluated. */
static void
tokenize_prompt (NpuLlmSession * s, const gchar * user, gboolean with_media,
    gboolean next_turn, gint32 * toks[2], gsize n_toks[2])
{
  gchar *formatted, **parts;
  gboolean add_special;
  guint i;

  {
    gchar *u = with_media ? g_strconcat (MEDIA_MARKER, user, NULL) :
        g_strdup (user);

    if (next_turn)
      formatted = npu_chat_format_next (s->tmpl, u, TRUE);
    else if (npu_chat_template_get_family (s->tmpl) == NPU_CHAT_NONE)
      formatted = s->params.system_prompt && *s->params.system_prompt ?
          g_strconcat (s->params.system_prompt, "\n\n", u, NULL) : g_strdup (u);
    else
      formatted = npu_chat_format (s->tmpl, s->params.system_prompt, u, TRUE);
    g_free (u);
  }
  add_special = !next_turn && !npu_chat_template_has_bos (s->tmpl);
  parts = g_strsplit (formatted, MEDIA_MARKER, 2);
  for (i = 0; i < 2 && parts[i]; i++)
    toks[i] = npu_tokenizer_encode (s->tokenizer, parts[i], -1,
        i == 0 && add_special, TRUE, &n_toks[i]);
  g_strfreev (parts);
  g_free (formatted);
  if (next_turn && s->unevaluated != NPU_TOKEN_NULL) {
    /* the last answer's last token goes in first */
    gint32 *t = g_new (gint32, n_toks[0] + 1);

    t[0] = s->unevaluated;
    if (n_toks[0])
      memcpy (t + 1, toks[0], n_toks[0] * sizeof (gint32));
    g_free (toks[0]);
    toks[0] = t;
    n_toks[0]++;
  }
}

/* Sets the context and the sampler up for the prompt @toks: the cache rows
 * of the prefix shared with the last prompt are kept (@st's n_reused), or,
 * in a conversation, everything the context holds (@st's n_context). */
static void
prepare_context (NpuLlmSession * s, gint32 * toks[2], const gsize n_toks[2],
    gboolean with_media, gboolean next_turn, NpuLlmAnswerStats * st)
{
  guint i;

  /* Reuse the longest prefix the last prompt shares with this one, less
   * one token when nothing follows it (its logits are needed); a
   * conversation goes on from everything the context holds */
  if (next_turn) {
    st->n_context = npu_llm_context_get_n_cached (s->ctx);
  } else {
    gsize common = 0, limit = n_toks[0];

    if (!with_media && !n_toks[1] && limit > 0)
      limit--;
    while (common < MIN (limit, s->n_prefix) &&
        s->prefix[common] == toks[0][common])
      common++;
    if (common == 0 || !npu_llm_context_truncate (s->ctx, common)) {
      npu_llm_context_reset (s->ctx);
      common = 0;
    }
    st->n_reused = common;
    g_free (s->prefix);
    s->prefix = g_memdup2 (toks[0], n_toks[0] * sizeof (gint32));
    s->n_prefix = 0;            /* valid once the prompt is evaluated */
  }
  /* in a conversation the penalty history and the random draws go on */
  if (!next_turn)
    npu_llm_sampler_reset (s->sampler);
  for (i = 0; i < 2; i++) {
    /* the last answer's last token is in the history already */
    gsize j = i == 0 && next_turn && s->unevaluated != NPU_TOKEN_NULL;

    for (; j < n_toks[i]; j++)
      npu_llm_sampler_accept (s->sampler, toks[i][j]);
  }
}

/* Evaluates the prompt past its reused prefix, the media in between its
 * two sides. */
static gboolean
eval_prompt (NpuLlmSession * s, NpuQueue * queue, gint32 * toks[2],
    const gsize n_toks[2], const NpuLlmMedia * media, guint n_media,
    gboolean next_turn, gsize n_reused, GError ** error)
{
  EvalJob job = { 0, };

  job.ctx = s->ctx;
  job.session = s;
  job.tokens[0] = toks[0] + n_reused;
  job.n_tokens[0] = n_toks[0] - n_reused;
  job.tokens[1] = toks[1];
  job.n_tokens[1] = n_toks[1];
  job.media = media;
  job.n_media = n_media;
  if (!run_eval (queue, "prefill", &job, error))
    return FALSE;
  if (!next_turn)
    s->n_prefix = n_toks[0];
  s->unevaluated = NPU_TOKEN_NULL;
  return TRUE;
}

/* A harmony answer's text that is handed on: the final channel's and the
 * analysis (the caller tells them apart with
 * npu_llm_session_get_emit_channel()); commentary (tool calls) and other
 * messages are not */
static gboolean
harmony_shown (NpuHarmonyChannel c)
{
  return c == NPU_HARMONY_FINAL || c == NPU_HARMONY_ANALYSIS;
}

/* What of @tok a harmony answer shows: NULL for framing.  The format's
 * tokens (and other control tokens) go to the parser whole, not through
 * the decoder. */
static gchar *
harmony_piece (NpuLlmSession * s, NpuHarmonyParser * hp, NpuTokenDecoder * dec,
    gint32 tok, gsize * len, NpuHarmonyChannel * channel)
{
  gsize plen = 0;
  const gchar *p = npu_tokenizer_token_piece (s->tokenizer, tok, &plen);
  gchar *piece;

  *len = 0;
  if (npu_tokenizer_token_type (s->tokenizer, tok) == NPU_TOKEN_TYPE_CONTROL
      || (p && npu_harmony_is_token (p, plen))) {
    npu_harmony_parser_push (hp, p ? p : "", p ? plen : 0, TRUE);
    return NULL;
  }
  piece = npu_token_decoder_push (dec, tok, len);
  if (!piece || !*len) {
    g_free (piece);
    return NULL;
  }
  *channel = npu_harmony_parser_push (hp, piece, *len, FALSE);
  if (!harmony_shown (*channel)) {
    g_free (piece);
    *len = 0;
    return NULL;
  }
  return piece;
}

/* <|return|> and <|call|> end a harmony answer, <|end|> only a message
 * (llama.cpp takes <|end|> off its end-of-generation tokens when the
 * vocabulary has the other two); every other end-of-generation token
 * ends it too */
static gboolean
ends_answer (NpuLlmSession * s, gboolean harmony, gint32 tok)
{
  gsize len = 0;
  const gchar *p;

  if (!harmony)
    return npu_tokenizer_is_eog (s->tokenizer, tok);
  p = npu_tokenizer_token_piece (s->tokenizer, tok, &len);
  if (p && ((len == 10 && memcmp (p, "<|return|>", 10) == 0)
          || (len == 8 && memcmp (p, "<|call|>", 8) == 0)))
    return TRUE;
  if (p && len == 7 && memcmp (p, "<|end|>", 7) == 0)
    return FALSE;
  return npu_tokenizer_is_eog (s->tokenizer, tok);
}

/* Hands @len bytes of @pending, all of @channel, to @emit */
static gboolean
emit_pending (NpuLlmSession * s, GString * pending, gsize len,
    NpuHarmonyChannel channel, NpuLlmTextFunc emit, gpointer user_data)
{
  gboolean go_on;

  s->emit_channel = channel;
  go_on = emit (pending->str, len, user_data);
  g_string_erase (pending, 0, len);
  s->emit_channel = NPU_HARMONY_FINAL;
  return go_on;
}

/* ------------------------------------------------------------------------
 * Pacing (npu_llm_session_set_pace)
 */

/* Before a token: the thread count the pacer wants, as @queue's cap */
static void
pace_token_start (NpuLlmSession * s, NpuQueue * queue, NpuLlmAnswerStats * st)
{
  NpuDevice *device = npu_queue_get_device (queue);

  st->pace_rate = s->params.pace_rate;
  if (s->params.pace_rate <= 0.0) {
    st->decode_threads = npu_device_get_n_threads (device);
    return;
  }
  if (!s->pace)
    s->pace = npu_pace_new (s->params.pace_rate,
        MAX (npu_device_get_n_threads (device), 1), 2);
  st->decode_threads = npu_pace_get_threads (s->pace);
  npu_queue_set_max_threads (queue, st->decode_threads);
}

/* After a token that started at @start_us: sleeps until the next is due.
 * %FALSE (cancelled) if the session is flushing. */
static gboolean
pace_token_end (NpuLlmSession * s, gint64 start_us, NpuLlmAnswerStats * st,
    GError ** error)
{
  gint64 now = g_get_monotonic_time (), until;
  gboolean flushing;

  if (s->params.pace_rate > 0.0)
    until = now + npu_pace_token_done (s->pace, start_us * 1000,
        now * 1000) / 1000;
  else
    until = now;
  g_mutex_lock (&s->pace_lock);
  while (!s->flushing && g_get_monotonic_time () < until)
    g_cond_wait_until (&s->pace_cond, &s->pace_lock, until);
  flushing = s->flushing;
  g_mutex_unlock (&s->pace_lock);
  st->paced_sleep_us += MAX (MIN (g_get_monotonic_time (), until) - now, 0);
  if (!flushing)
    return TRUE;
  g_set_error (error, NPU_LLM_SESSION_ERROR, NPU_LLM_SESSION_ERROR_CANCELLED,
      "the answer was flushed between two tokens");
  return FALSE;
}

/* Samples and evaluates token after token, handing the text to @emit, until
 * an end of generation, a stop string, max-tokens or @emit asks to stop.
 * @t1 is when the prompt was evaluated: @st's decode_us counts from it.
 * A harmony answer hands on its final and analysis text only, each piece
 * of one channel (@pending is handed on when the channel changes). */
static gboolean
generate (NpuLlmSession * s, NpuQueue * queue, NpuLlmTextFunc emit,
    gpointer user_data, gint64 t1, NpuLlmAnswerStats * st, GError ** error)
{
  NpuTokenDecoder *dec = npu_token_decoder_new (s->tokenizer,
      NPU_DECODE_NONE);
  GString *pending = g_string_new (NULL);
  NpuHarmonyParser *hp = NULL;
  NpuHarmonyChannel pending_channel = NPU_HARMONY_FINAL;
  EvalJob job = { 0, };
  gboolean ok = FALSE, go_on = TRUE;
  gint64 t_tok;

  if (s->pace)
    npu_pace_restart (s->pace);
  if (npu_chat_template_get_family (s->tmpl) == NPU_CHAT_HARMONY)
    hp = npu_harmony_parser_new ();
  job.ctx = s->ctx;
  while (go_on) {
    gint32 tok = npu_llm_sampler_sample (s->sampler,
        npu_llm_get_logits (s->ctx));
    gchar *piece;
    gsize len = 0, hold;
    const gchar *stop;
    NpuHarmonyChannel channel = NPU_HARMONY_FINAL;

    if (st->n_generated < s->n_forced)
      tok = s->forced[st->n_generated];

    if (ends_answer (s, hp != NULL, tok)) {
      st->hit_eog = TRUE;
      break;
    }
    npu_llm_sampler_accept (s->sampler, tok);
    st->n_generated++;
    s->unevaluated = tok;

    if (hp)
      piece = harmony_piece (s, hp, dec, tok, &len, &channel);
    else
      piece = npu_token_decoder_push (dec, tok, &len);
    if (piece && channel != pending_channel) {
      /* a stop string does not run across channels */
      if (pending->len)
        go_on = emit_pending (s, pending, pending->len, pending_channel,
            emit, user_data);
      pending_channel = channel;
    }
    if (piece)
      g_string_append_len (pending, piece, len);
    g_free (piece);

    stop = find_stop (pending->str, pending->len, s->params.stop);
    if (stop) {
      g_string_truncate (pending, stop - pending->str);
      st->hit_stop = TRUE;
      break;
    }
    hold = stop_prefix_hold (pending->str, pending->len, s->params.stop);
    if (go_on && pending->len > hold)
      go_on = emit_pending (s, pending, pending->len - hold, pending_channel,
          emit, user_data);
    if (st->n_generated >= s->params.max_tokens) {
      st->hit_max = TRUE;
      break;
    }
    if (!go_on)
      break;

    job.tokens[0] = &tok;
    job.n_tokens[0] = 1;
    pace_token_start (s, queue, st);
    t_tok = g_get_monotonic_time ();
    if (!run_eval (queue, "token", &job, error)
        || !pace_token_end (s, t_tok, st, error))
      goto out;
    st->n_decoded++;
    s->unevaluated = NPU_TOKEN_NULL;
  }
  st->decode_us = g_get_monotonic_time () - t1;

  if (!st->hit_stop && go_on) {
    gsize len = 0;
    gchar *rest = npu_token_decoder_flush (dec, &len);

    /* a character cut short: of the channel the text was in */
    if (rest)
      g_string_append_len (pending, rest, len);
    g_free (rest);
  }
  if (go_on && pending->len)
    emit_pending (s, pending, pending->len, pending_channel, emit, user_data);
  ok = TRUE;

out:
  /* the next prompt runs on every thread */
  npu_queue_set_max_threads (queue, 0);
  npu_harmony_parser_free (hp);
  npu_token_decoder_free (dec);
  g_string_free (pending, TRUE);
  return ok;
}

/**
 * npu_llm_session_answer:
 * @user: the user's text (the prompt)
 * @media: (array length=n_media) (nullable): embeddings to splice in
 *   before the user's text
 * @emit: receives the answer piece by piece
 *
 * Answers one prompt from a fresh context (the cache is reused, not
 * reallocated), except for the cache rows of the longest prefix this
 * prompt's text before the media shares with the last answer's, which are
 * kept (@stats' n_reused) when the last answer never slid the window.
 * The same seed gives the same answer.  With keep_context the answer goes
 * on from the conversation instead: the last answer (as generated, a stop
 * string included), the end of its turn and this prompt's turn are
 * appended to the context, whose attention-sink window bounds the memory
 * however long the conversation runs (@stats' n_context: the earlier
 * tokens it attends to).
 *
 * Returns: %TRUE when the answer ended (end of generation, a stop string,
 * max-tokens, or @emit asking to stop); %FALSE with @error set if the
 * prompt does not fit, the model failed, or the queue was flushed
 * (NPU_LLM_SESSION_ERROR_CANCELLED).
 */
gboolean
npu_llm_session_answer (NpuLlmSession * s, NpuQueue * queue,
    const gchar * user, const NpuLlmMedia * media, guint n_media,
    NpuLlmTextFunc emit, gpointer user_data, NpuLlmAnswerStats * stats,
    GError ** error)
{
  NpuLlmAnswerStats st = { 0, };
  gint32 *toks[2] = { NULL, NULL };
  gsize n_toks[2] = { 0, 0 }, n_media_rows = 0;
  gboolean ok = FALSE;
  gboolean next_turn = s->params.keep_context && s->in_conversation;
  NpuLlmStats cs0, cs1;
  gint64 t0, t1;

  if (!count_media_rows (s, media, n_media, &n_media_rows, error))
    goto out;
  tokenize_prompt (s, user, n_media > 0, next_turn, toks, n_toks);

  st.n_prompt = n_toks[0] + n_toks[1] + n_media_rows;
  if (st.n_prompt + 1 > s->params.n_ctx) {
    g_set_error (error, NPU_LLM_SESSION_ERROR, NPU_LLM_SESSION_ERROR_PROMPT,
        "the prompt is %u tokens long, the context holds %u",
        st.n_prompt, s->params.n_ctx);
    goto out;
  }
  if (st.n_prompt == 0) {
    g_set_error (error, NPU_LLM_SESSION_ERROR, NPU_LLM_SESSION_ERROR_PROMPT,
        "the prompt is empty");
    goto out;
  }

  prepare_context (s, toks, n_toks, n_media > 0, next_turn, &st);
  npu_llm_context_get_stats (s->ctx, &cs0);
  t0 = g_get_monotonic_time ();
  if (!eval_prompt (s, queue, toks, n_toks, media, n_media, next_turn,
          st.n_reused, error))
    goto out;
  t1 = g_get_monotonic_time ();
  st.prompt_us = t1 - t0;
  npu_llm_context_get_stats (s->ctx, &cs1);
  npu_bytes_diff (&st.prompt_bytes, &cs1.bytes, &cs0.bytes);
  ok = generate (s, queue, emit, user_data, t1, &st, error);
  npu_llm_context_get_stats (s->ctx, &cs0);
  npu_bytes_diff (&st.decode_bytes, &cs0.bytes, &cs1.bytes);

out:
  /* an answer that failed half-way leaves the context in no known turn */
  s->in_conversation = ok && s->params.keep_context;
  g_free (toks[0]);
  g_free (toks[1]);
  if (stats)
    *stats = st;
  return ok;
}

/**
 * npu_llm_session_get_emit_channel:
 *
 * Inside the emit function of npu_llm_session_answer(): which harmony
 * channel the text is of, NPU_HARMONY_FINAL or NPU_HARMONY_ANALYSIS
 * (always NPU_HARMONY_FINAL for other chat families).
 *
 * Returns: the channel
 */
NpuHarmonyChannel
npu_llm_session_get_emit_channel (NpuLlmSession * s)
{
  return s->emit_channel;
}
