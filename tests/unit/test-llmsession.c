/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: one conversation across answers (keep_context)
 *
 * The session's second answer must be what the bare core gives when it is
 * fed the whole conversation at once: the first prompt, the first answer's
 * tokens and the second turn, written out here from the ChatML template
 * (not made by the session's own formatting), evaluated in one call from
 * an empty context, then draws with the same sampler.  And a conversation that runs far
 * past the context's length must keep its memory: no allocation, no heap
 * growth, the window sliding.
 *
 * A paced answer (npu_llm_session_set_pace) must be the same text as an
 * unpaced one, run its tokens on the pacer's threads (seen from the queue
 * between tokens), sleep between them, give the queue all its threads
 * back afterwards, and end as cancelled when flushed in a sleep.
 *
 * The bytes each prefill and token task reports to a timeline sum to the
 * answer's own counts.
 */
#include <core/models/npullmsession.h>
#include <core/device/npuevents.h>
#include "tests/tools/npumodelgen.h"

#include <malloc.h>
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#define SYSTEM "You watch a camera."
#define MAX_TOKENS 6
#define SEED 7

typedef struct
{
  gchar *dir, *path;
  NpuGguf *gguf;
  NpuTokenizer *tok;
  NpuQueue *queue;
} Fixture;

static void
fixture_open (Fixture * f)
{
  NpuTextModelParams tp;
  GError *error = NULL;

  f->dir = g_dir_make_tmp ("llmsession-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, "llama.gguf", NULL);
  g_assert_true (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_LLAMA,
          "tiny", &error));
  g_assert_true (npu_model_gen_write_text (&tp, f->path, NULL, &error));
  f->gguf = npu_gguf_open (f->path, &error);
  g_assert_no_error (error);
  f->tok = npu_tokenizer_new_from_gguf (f->gguf, &error);
  g_assert_no_error (error);
  f->queue = npu_queue_new (npu_device_get_cpu (0), "session");
  npu_device_unref (npu_queue_get_device (f->queue));
}

static void
fixture_close (Fixture * f)
{
  npu_queue_free (f->queue);
  npu_tokenizer_free (f->tok);
  npu_gguf_free (f->gguf);
  g_unlink (f->path);
  g_rmdir (f->dir);
  g_free (f->path);
  g_free (f->dir);
}

static NpuLlmModel *
load (Fixture * f)
{
  GError *error = NULL;
  NpuLlmModel *m = npu_llm_model_new_from_file (f->path,
      NPU_LLM_LOAD_IN_PLACE, &error);

  g_assert_no_error (error);
  return m;
}

/* Greedy text of a tiny random model repeats one token whatever comes
 * before it, so it would not show whether the context was kept; draws from
 * the whole distribution (temperature 1, no cut-off) change as soon as the
 * logits do.  (The llama model: its tokens print as text, where the qwen2
 * one's are mostly bytes that decode to U+FFFD and hide which they were.)
 * Verified: dropping the first answer's last token, or starting the second
 * answer from an empty cache, makes both conversations fail. */
static void
sampler_params (NpuLlmSamplerParams * sp)
{
  npu_llm_sampler_params_init (sp);
  sp->temperature = 1.0;
  sp->top_k = 0;
  sp->top_p = 1.0;
  sp->min_p = 0;
  sp->repeat_penalty = 1.0;
  sp->seed = SEED;
}

static NpuLlmSession *
new_session (Fixture * f, guint n_ctx, gboolean keep_context,
    const gchar * chat_template)
{
  NpuLlmSessionParams p;
  NpuLlmSession *s;
  GError *error = NULL;

  npu_llm_session_params_init (&p);
  p.n_ctx = n_ctx;
  p.max_tokens = MAX_TOKENS;
  p.keep_context = keep_context;
  p.chat_template = g_strdup (chat_template);
  p.system_prompt = g_strdup (SYSTEM);
  sampler_params (&p.sampler);
  s = npu_llm_session_new (f->gguf, load (f), &p, &error);
  g_assert_no_error (error);
  npu_llm_session_params_clear (&p);
  return s;
}

static gboolean
collect (const gchar * text, gsize len, gpointer user_data)
{
  g_string_append_len (user_data, text, len);
  return TRUE;
}

static gchar *
answer (NpuLlmSession * s, Fixture * f, const gchar * prompt,
    NpuLlmAnswerStats * st)
{
  GString *out = g_string_new (NULL);
  GError *error = NULL;

  gboolean ok = npu_llm_session_answer (s, f->queue, prompt, NULL, 0,
      collect, out, st, &error);

  g_assert_no_error (error);
  g_assert_true (ok);
  return g_string_free (out, FALSE);
}

/* Draws up to MAX_TOKENS with @sampler after what @ctx holds; the tokens
 * drawn (no end-of-generation) are appended to @gen, their text
 * returned */
static gchar *
draw (const NpuTokenizer * tok, NpuLlmContext * ctx, NpuLlmSampler * sampler,
    GArray * gen)
{
  NpuTokenDecoder *dec = npu_token_decoder_new (tok, NPU_DECODE_NONE);
  GString *text = g_string_new (NULL);
  GError *error = NULL;
  guint i;
  gchar *piece;
  gsize len;

  for (i = 0; i < MAX_TOKENS; i++) {
    gint32 t = npu_llm_sampler_sample (sampler, npu_llm_get_logits (ctx));

    if (npu_tokenizer_is_eog (tok, t))
      break;
    npu_llm_sampler_accept (sampler, t);
    g_array_append_val (gen, t);
    piece = npu_token_decoder_push (dec, t, &len);
    g_string_append_len (text, piece, len);
    g_free (piece);
    if (i + 1 < MAX_TOKENS)
      g_assert_true (npu_llm_eval_tokens (ctx, NULL, &t, 1, &error));
  }
  piece = npu_token_decoder_flush (dec, &len);
  g_string_append_len (text, piece, len);
  g_free (piece);
  npu_token_decoder_free (dec);
  return g_string_free (text, FALSE);
}

/* Evaluates @seq in one call from an empty context, then draws */
static gchar *
core_run (Fixture * f, NpuLlmModel * m, guint n_ctx, NpuLlmSampler * sampler,
    GArray * seq, GArray * gen)
{
  NpuLlmContextParams cp;
  NpuLlmContext *ctx;
  GError *error = NULL;
  gchar *text;

  npu_llm_context_params_init (&cp);
  cp.n_ctx = n_ctx;
  cp.n_batch = MAX (seq->len, 1);
  ctx = npu_llm_context_new (m, &cp, &error);
  g_assert_no_error (error);
  g_assert_true (npu_llm_eval_tokens (ctx, NULL, (const gint32 *) seq->data,
          seq->len, &error));
  text = draw (f->tok, ctx, sampler, gen);
  npu_llm_context_free (ctx);
  return text;
}

/* Tokenizes @text onto @seq; the sampler's history takes it too */
static void
append_text (Fixture * f, GArray * seq, NpuLlmSampler * sampler,
    const gchar * text, gboolean add_special)
{
  gsize n = 0, i;
  gint32 *ids = npu_tokenizer_encode (f->tok, text, -1, add_special, TRUE,
      &n);

  g_array_append_vals (seq, ids, n);
  for (i = 0; i < n; i++)
    npu_llm_sampler_accept (sampler, ids[i]);
  g_free (ids);
}

/* A conversation written out by hand from the template: the first
 * prompt, and what follows the first answer's tokens */
typedef struct
{
  const gchar *chat_template;
  const gchar *first, *next;
} Conversation;

static const Conversation chatml = { "chatml",
  "<|im_start|>system\n" SYSTEM "<|im_end|>\n"
      "<|im_start|>user\nWhat is on the table?<|im_end|>\n"
      "<|im_start|>assistant\n",
  "<|im_end|>\n<|im_start|>user\nAnd on the floor?<|im_end|>\n"
      "<|im_start|>assistant\n"
};

/* The same without a template */
static const Conversation completion = { "none",
  SYSTEM "\n\nWhat is on the table?",
  "\n\nAnd on the floor?"
};

/* The second answer goes on from the first: the session says what the
 * core says for the whole conversation at once, and not what a fresh
 * session says to the second prompt alone */
static void
test_second_answer_sees_first (gconstpointer data)
{
  const Conversation *conv = data;
  Fixture f;
  NpuLlmModel *m;
  NpuLlmSession *s, *fresh;
  NpuLlmAnswerStats st1, st2, stf;
  GArray *seq = g_array_new (FALSE, FALSE, sizeof (gint32));
  GArray *gen = g_array_new (FALSE, FALSE, sizeof (gint32));
  gchar *a1, *a2, *want1, *want2, *alone;
  NpuLlmSamplerParams sp;
  NpuLlmSampler *sampler;
  GError *error = NULL;

  fixture_open (&f);
  s = new_session (&f, 256, TRUE, conv->chat_template);
  a1 = answer (s, &f, "What is on the table?", &st1);
  a2 = answer (s, &f, "And on the floor?", &st2);
  fresh = new_session (&f, 256, FALSE, conv->chat_template);
  alone = answer (fresh, &f, "And on the floor?", &stf);

  m = load (&f);
  sampler_params (&sp);
  sampler = npu_llm_sampler_new (&sp, npu_llm_model_get_hparams (m)->n_vocab,
      &error);
  g_assert_no_error (error);
  append_text (&f, seq, sampler, conv->first, TRUE);
  g_assert_cmpuint (seq->len, ==, st1.n_prompt);
  want1 = core_run (&f, m, 256, sampler, seq, gen);
  g_assert_cmpstr (a1, ==, want1);
  g_assert_cmpuint (gen->len, ==, st1.n_generated);
  g_assert_cmpuint (gen->len, >, 0);

  /* the conversation: prompt, answer, the end of its turn, the next */
  g_array_append_vals (seq, gen->data, gen->len);
  append_text (&f, seq, sampler, conv->next, FALSE);
  g_array_set_size (gen, 0);
  want2 = core_run (&f, m, 256, sampler, seq, gen);
  g_test_message ("answers: \"%s\", then \"%s\" (alone: \"%s\")", a1, a2,
      alone);
  g_assert_cmpstr (a2, ==, want2);
  g_assert_cmpuint (st2.n_context, ==, st1.n_prompt + st1.n_generated -
      (st1.hit_max ? 1 : 0));
  g_assert_cmpuint (st2.n_reused, ==, 0);
  g_assert_cmpstr (a2, !=, alone);

  g_free (a1);
  g_free (a2);
  g_free (want1);
  g_free (want2);
  g_free (alone);
  g_array_unref (seq);
  g_array_unref (gen);
  npu_llm_sampler_free (sampler);
  npu_llm_model_free (m);
  npu_llm_session_free (s);
  npu_llm_session_free (fresh);
  fixture_close (&f);
}

/* Turning keep_context off ends the conversation: the next answer is a
 * fresh session's */
static void
test_keep_context_off (void)
{
  Fixture f;
  NpuLlmSession *s, *fresh;
  NpuLlmAnswerStats st;
  gchar *a, *b, *want;

  fixture_open (&f);
  s = new_session (&f, 256, TRUE, "chatml");
  a = answer (s, &f, "What is on the table?", &st);
  npu_llm_session_set_keep_context (s, FALSE);
  b = answer (s, &f, "And on the floor?", &st);
  g_assert_cmpuint (st.n_context, ==, 0);
  fresh = new_session (&f, 256, FALSE, "chatml");
  want = answer (fresh, &f, "And on the floor?", &st);
  g_assert_cmpstr (b, ==, want);
  g_free (a);
  g_free (b);
  g_free (want);
  npu_llm_session_free (s);
  npu_llm_session_free (fresh);
  fixture_close (&f);
}

/* Sixty answers through a 160-token context: the window slides many
 * times, the conversation goes on, and nothing is allocated for good */
static void
test_long_conversation_bounded (void)
{
  Fixture f;
  NpuLlmSession *s;
  NpuLlmAnswerStats st;
  NpuLlmStats c0, c1;
  struct mallinfo2 m0, mh = { 0 }, m1;
  glong growth1, growth2;
  guint i, n = g_getenv ("NPU_UNDER_VALGRIND") ? 20 : 60;

  fixture_open (&f);
  s = new_session (&f, 160, TRUE, "chatml");
  /* warm-up: GLib's and the allocator's caches reach their size (a
   * one-time ~2 KiB in the seventh answer here) */
  for (i = 0; i < 10; i++)
    g_free (answer (s, &f, "Anything new?", &st));
  npu_llm_session_get_context_stats (s, &c0);
  m0 = mallinfo2 ();
  for (i = 0; i < n; i++) {
    g_free (answer (s, &f, "Anything new?", &st));
    /* the window is full: every earlier token it can hold */
    g_assert_cmpuint (st.n_context, ==, 159);
    if (i + 1 == n / 2)
      mh = mallinfo2 ();
  }
  m1 = mallinfo2 ();
  npu_llm_session_get_context_stats (s, &c1);
  growth1 = (glong) mh.uordblks - (glong) m0.uordblks;
  growth2 = (glong) m1.uordblks - (glong) mh.uordblks;
  g_test_message ("%u answers: heap in use %zu -> %zu -> %zu bytes, %"
      G_GUINT64_FORMAT " tokens evicted, KV cache %zu bytes", n, m0.uordblks,
      mh.uordblks, m1.uordblks, c1.n_evicted, c1.kv_bytes);
  g_assert_cmpuint (c1.n_allocs, ==, c0.n_allocs);
  g_assert_cmpuint (c1.kv_bytes, ==, c0.kv_bytes);
  /* each answer adds its turn (> 10 tokens) and evicts as many */
  g_assert_cmpuint (c1.n_evicted - c0.n_evicted, >=, 10 * n);
  /* A leak grows the heap in both halves; a one-time allocation by GLib
   * or the C library (seen once under load: +304 bytes) in one only.
   * The smallest leak, one 32-byte chunk an answer, is 320 bytes in a
   * half of 10 answers (valgrind) and 960 in a half of 30. */
  g_assert_cmpint (MIN (ABS (growth1), ABS (growth2)), <=, 256);
  npu_llm_session_free (s);
  fixture_close (&f);
}

/* Idefics3's image tokens.  The trained text model of tests/models/ has
 * them: an image's rows must go between
 * "\n\n<fake_token_around_image><global-img>" and
 * "<fake_token_around_image>" (llama.cpp's mtmd's overview), other media's
 * rows bare.  The reference is that sequence written out here (ids looked
 * up by their text in the file), evaluated by the bare core, then draws
 * with the same sampler (temperature 1: any change in the logits shows). */
#define TRAINED_TEXT NPU_MODELS_DIR "/videotestsrc-text.gguf"
#define N_ROWS 16

static void
test_image_wrapping (gconstpointer data)
{
  gboolean image = GPOINTER_TO_INT (data);
  NpuGguf *gguf;
  NpuTokenizer *tok;
  NpuLlmModel *m;
  NpuLlmSession *s;
  NpuLlmSessionParams p;
  NpuLlmContextParams cp;
  NpuLlmContext *ctx;
  NpuLlmSampler *sampler;
  NpuLlmAnswerStats st;
  NpuLlmMedia media;
  NpuQueue *queue = npu_queue_new (npu_device_get_cpu (0), "wrapping");
  GArray *before = g_array_new (FALSE, FALSE, sizeof (gint32));
  GArray *after = g_array_new (FALSE, FALSE, sizeof (gint32));
  GArray *gen = g_array_new (FALSE, FALSE, sizeof (gint32));
  GString *out = g_string_new (NULL);
  GError *error = NULL;
  gint32 nl, around, global;
  gfloat *rows;
  guint n_embd, i;
  gchar *want;

  npu_device_unref (npu_queue_get_device (queue));
  gguf = npu_gguf_open (TRAINED_TEXT, &error);
  g_assert_no_error (error);
  tok = npu_tokenizer_new_from_gguf (gguf, &error);
  g_assert_no_error (error);
  nl = npu_tokenizer_find_token (tok, "\n\n");
  around = npu_tokenizer_find_token (tok, "<fake_token_around_image>");
  global = npu_tokenizer_find_token (tok, "<global-img>");
  g_assert_cmpint (nl, !=, NPU_TOKEN_NULL);
  g_assert_cmpint (around, !=, NPU_TOKEN_NULL);
  g_assert_cmpint (global, !=, NPU_TOKEN_NULL);

  m = npu_llm_model_new_from_file (TRAINED_TEXT, NPU_LLM_LOAD_IN_PLACE,
      &error);
  g_assert_no_error (error);
  n_embd = npu_llm_model_get_hparams (m)->n_embd;
  rows = g_new (gfloat, n_embd * N_ROWS);
  for (i = 0; i < n_embd * N_ROWS; i++)
    rows[i] = 0.5 * sin (0.37 * i) + 0.25 * cos (0.011 * i * i);
  media.rows = rows;
  media.n_rows = N_ROWS;
  media.image = image;

  npu_llm_session_params_init (&p);
  p.max_tokens = MAX_TOKENS;
  sampler_params (&p.sampler);
  s = npu_llm_session_new (gguf, m, &p, &error);
  g_assert_no_error (error);
  npu_llm_session_params_clear (&p);
  g_assert_true (npu_llm_session_answer (s, queue, "What do you see?",
          &media, 1, collect, out, &st, &error));
  g_assert_no_error (error);
  {
    const gint32 *open, *close;
    guint n_open, n_close;

    npu_llm_session_get_image_wrapping (s, &open, &n_open, &close,
        &n_close);
    g_assert_cmpuint (n_open, ==, 3);
    g_assert_cmpint (open[0], ==, nl);
    g_assert_cmpint (open[1], ==, around);
    g_assert_cmpint (open[2], ==, global);
    g_assert_cmpuint (n_close, ==, 1);
    g_assert_cmpint (close[0], ==, around);
  }

  /* the reference: the file's ChatML, no system prompt, media first */
  m = npu_llm_model_new_from_file (TRAINED_TEXT, NPU_LLM_LOAD_IN_PLACE,
      &error);
  g_assert_no_error (error);
  sampler_params (&p.sampler);
  sampler = npu_llm_sampler_new (&p.sampler,
      npu_llm_model_get_hparams (m)->n_vocab, &error);
  g_assert_no_error (error);
  {
    Fixture f = {.tok = tok };

    append_text (&f, before, sampler, "<|im_start|>user\n", TRUE);
    append_text (&f, after, sampler,
        "What do you see?<|im_end|>\n<|im_start|>assistant\n", FALSE);
  }
  if (image) {
    g_array_append_val (before, nl);
    g_array_append_val (before, around);
    g_array_append_val (before, global);
    g_array_prepend_val (after, around);
  }
  g_assert_cmpuint (st.n_prompt, ==, before->len + N_ROWS + after->len);
  npu_llm_context_params_init (&cp);
  cp.n_ctx = 128;
  ctx = npu_llm_context_new (m, &cp, &error);
  g_assert_no_error (error);
  g_assert_true (npu_llm_eval_tokens (ctx, NULL,
          (const gint32 *) before->data, before->len, &error));
  g_assert_true (npu_llm_eval_embeddings (ctx, NULL, rows, N_ROWS, &error));
  g_assert_true (npu_llm_eval_tokens (ctx, NULL,
          (const gint32 *) after->data, after->len, &error));
  g_assert_no_error (error);
  want = draw (tok, ctx, sampler, gen);
  g_test_message ("%s: \"%s\"", image ? "image" : "other media", out->str);
  g_assert_cmpuint (gen->len, >, 0);
  g_assert_cmpstr (out->str, ==, want);

  g_free (want);
  g_free (rows);
  g_string_free (out, TRUE);
  g_array_unref (before);
  g_array_unref (after);
  g_array_unref (gen);
  npu_llm_context_free (ctx);
  npu_llm_sampler_free (sampler);
  npu_llm_model_free (m);
  npu_llm_session_free (s);
  npu_tokenizer_free (tok);
  npu_gguf_free (gguf);
  npu_queue_free (queue);
}

/* ------------------------------------------------------------------------
 * Paced decode
 */
#define PACED_THREADS 4

typedef struct
{
  NpuQueue *queue;
  GString *text;
  guint min_threads;            /* of the queue's tasks seen between tokens */
} PacedRun;

static gboolean
record_n_threads (NpuTask * task, gpointer user_data, GError ** error)
{
  *(guint *) user_data = npu_task_get_n_threads (task);
  return TRUE;
}

static guint
queue_n_threads (NpuQueue * queue)
{
  guint n = 0;
  NpuFence *fence = npu_queue_submit (queue, record_n_threads, &n, NULL,
      NULL, 0);

  g_assert_true (npu_fence_wait (fence, -1, NULL));
  npu_fence_unref (fence);
  return n;
}

static gboolean
collect_paced (const gchar * text, gsize len, gpointer user_data)
{
  PacedRun *run = user_data;

  g_string_append_len (run->text, text, len);
  run->min_threads = MIN (run->min_threads, queue_n_threads (run->queue));
  return TRUE;
}

static gchar *
paced_answer (NpuLlmSession * s, NpuQueue * queue, NpuLlmAnswerStats * st,
    guint * min_threads)
{
  PacedRun run = { queue, g_string_new (NULL), G_MAXUINT };
  GError *error = NULL;

  g_assert_true (npu_llm_session_answer (s, queue, "What is on the table?",
          NULL, 0, collect_paced, &run, st, &error));
  g_assert_no_error (error);
  *min_threads = run.min_threads;
  return g_string_free (run.text, FALSE);
}

/* 20 tokens a second: a tiny model's token takes far less than 50 ms on
 * one thread, so the pacer keeps one and sleeps the rest of each period */
static void
test_paced_same_answer (void)
{
  Fixture f;
  NpuQueue *queue = npu_queue_new (npu_device_new_cpu (PACED_THREADS), "pq");
  NpuLlmSession *s;
  NpuLlmAnswerStats st;
  gchar *fast, *paced;
  guint min_threads;

  npu_device_unref (npu_queue_get_device (queue));
  fixture_open (&f);
  s = new_session (&f, 256, FALSE, "chatml");
  fast = paced_answer (s, queue, &st, &min_threads);
  g_assert_cmpuint (st.n_decoded, >, 1);
  g_assert_cmpuint (st.decode_threads, ==, PACED_THREADS);
  g_assert_cmpuint (min_threads, ==, PACED_THREADS);
  g_assert_cmpint (st.paced_sleep_us, ==, 0);

  npu_llm_session_set_pace (s, 20.0);
  paced = paced_answer (s, queue, &st, &min_threads);
  g_assert_cmpstr (paced, ==, fast);
  g_assert_cmpuint (st.decode_threads, ==, 1);
  g_assert_cmpuint (min_threads, ==, 1);
  g_assert_cmpint (st.paced_sleep_us, >, 0);
  /* the cap ends with the answer */
  g_assert_cmpuint (queue_n_threads (queue), ==, PACED_THREADS);
  g_free (fast);
  g_free (paced);
  npu_llm_session_free (s);
  npu_queue_free (queue);
  fixture_close (&f);
}

static gpointer
flush_later (gpointer data)
{
  g_usleep (200 * 1000);
  npu_llm_session_set_flushing (data, TRUE);
  return NULL;
}

/* At one token in 10 s, the flush 200 ms in must end the answer in its
 * first sleep, not at its end (a bound 25 times the flush's delay) */
static void
test_paced_flush (void)
{
  Fixture f;
  NpuLlmSession *s;
  NpuLlmAnswerStats st;
  GString *out = g_string_new (NULL);
  GError *error = NULL;
  GThread *flusher;
  gchar *after;

  fixture_open (&f);
  s = new_session (&f, 256, FALSE, "chatml");
  npu_llm_session_set_max_tokens (s, 64);
  npu_llm_session_set_pace (s, 0.1);
  flusher = g_thread_new ("flush", flush_later, s);
  g_assert_false (npu_llm_session_answer (s, f.queue, "What is on the table?",
          NULL, 0, collect, out, &st, &error));
  g_thread_join (flusher);
  g_assert_error (error, NPU_LLM_SESSION_ERROR,
      NPU_LLM_SESSION_ERROR_CANCELLED);
  g_assert_cmpstr (error->message, ==,
      "the answer was flushed between two tokens");
  g_assert_cmpuint (st.n_generated, <, 64);
  g_assert_cmpint (st.paced_sleep_us, <, 5 * G_USEC_PER_SEC);
  g_clear_error (&error);

  /* the flush over, the session answers again */
  npu_llm_session_set_flushing (s, FALSE);
  npu_llm_session_set_pace (s, 0.0);
  npu_llm_session_set_max_tokens (s, MAX_TOKENS);
  after = answer (s, &f, "What is on the table?", &st);
  g_assert_cmpuint (st.n_generated, >, 0);
  g_free (after);
  g_string_free (out, TRUE);
  npu_llm_session_free (s);
  fixture_close (&f);
}

/* ------------------------------------------------------------------------
 * Bytes in the tasks' events
 */
typedef struct
{
  GMutex lock;
  NpuBytes prefill, token;
  guint n_prefill, n_token, n_without;
} TaskBytes;

static void
on_event (const NpuEvent * ev, gpointer user_data)
{
  TaskBytes *tb = user_data;

  if (ev->kind != NPU_EVENT_TASK_FINISH)
    return;
  g_mutex_lock (&tb->lock);
  if (!ev->bytes) {
    tb->n_without++;
  } else if (g_strcmp0 (ev->label, "prefill") == 0) {
    tb->n_prefill++;
    npu_bytes_add (&tb->prefill, ev->bytes);
  } else if (g_strcmp0 (ev->label, "token") == 0) {
    tb->n_token++;
    npu_bytes_add (&tb->token, ev->bytes);
  }
  g_mutex_unlock (&tb->lock);
}

static void
assert_bytes_equal (const NpuBytes * a, const NpuBytes * b)
{
  guint k;

  for (k = 0; k < NPU_BYTES_N_KINDS; k++) {
    g_assert_cmpuint (a->read[k], ==, b->read[k]);
    g_assert_cmpuint (a->written[k], ==, b->written[k]);
  }
}

static void
test_task_bytes (void)
{
  Fixture f;
  NpuLlmSession *s;
  NpuLlmAnswerStats st;
  TaskBytes tb = { 0, };
  gchar *a;

  g_mutex_init (&tb.lock);
  fixture_open (&f);
  s = new_session (&f, 256, FALSE, "chatml");
  npu_events_set_handler (on_event, &tb);
  a = answer (s, &f, "What is on the table?", &st);
  npu_events_set_handler (NULL, NULL);
  g_assert_cmpuint (tb.n_prefill, ==, 1);
  g_assert_cmpuint (tb.n_token, ==, st.n_decoded);
  g_assert_cmpuint (tb.n_without, ==, 0);
  g_assert_cmpuint (npu_bytes_total (&tb.token), >, 0);
  assert_bytes_equal (&tb.prefill, &st.prompt_bytes);
  assert_bytes_equal (&tb.token, &st.decode_bytes);
  g_free (a);
  npu_llm_session_free (s);
  fixture_close (&f);
  g_mutex_clear (&tb.lock);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/llm-session/keep-context/chatml", &chatml,
      test_second_answer_sees_first);
  g_test_add_data_func ("/llm-session/keep-context/completion", &completion,
      test_second_answer_sees_first);
  g_test_add_func ("/llm-session/keep-context/off", test_keep_context_off);
  g_test_add_func ("/llm-session/keep-context/bounded",
      test_long_conversation_bounded);
  g_test_add_data_func ("/llm-session/image-wrapping/image",
      GINT_TO_POINTER (TRUE), test_image_wrapping);
  g_test_add_data_func ("/llm-session/image-wrapping/other",
      GINT_TO_POINTER (FALSE), test_image_wrapping);
  g_test_add_func ("/llm-session/paced/same-answer", test_paced_same_answer);
  g_test_add_func ("/llm-session/paced/flush", test_paced_flush);
  g_test_add_func ("/llm-session/task-bytes", test_task_bytes);
  return g_test_run ();
}
