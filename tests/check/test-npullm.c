/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npullm element tests
 *
 * The decoder itself is checked against a double-precision reference in
 * tests/unit/test-llm.c; here the element and the session it wraps (chat
 * template, BOS, media splicing, end of generation, stop strings) are:
 * what it streams must be exactly what the core's decoder says when fed
 * the prompt this file builds from the templates' text (not through the
 * session), whichever way the weights arrive, and bad input must end in a
 * clear error, never a hang.
 */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#include "npucheck.h"
#include "npuinputwatch.h"
#include <gst/check/gstharness.h>
#include <gst/video/video.h>
#include <npu/npu.h>
#include <core/models/npullm.h>
#include <core/models/npullmsession.h>
#include <core/text/nputokenizer.h>
#include <core/formats/npugguf.h>
#include <core/formats/npumxfp4.h>
#include "../tools/npumodelgen.h"
#include "../tools/npuhfexport.h"
#include "../npullmbytes.h"

static gchar *tmpdir, *qwen_path, *llama_path, *mmproj_path, *gptoss_path;

static void
write_models (void)
{
  NpuTextModelParams tp;
  NpuMmprojParams mp;
  GError *error = NULL;

  tmpdir = g_dir_make_tmp ("npullm-XXXXXX", NULL);
  qwen_path = g_build_filename (tmpdir, "qwen2.gguf", NULL);
  llama_path = g_build_filename (tmpdir, "llama.gguf", NULL);
  mmproj_path = g_build_filename (tmpdir, "mmproj.gguf", NULL);
  gptoss_path = g_build_filename (tmpdir, "gpt-oss.gguf", NULL);
  fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_QWEN2, "tiny",
          &error));
  /* A random model with tied embeddings echoes its last input token
   * (docs/models.md): this one says line breaks to every prompt, so the
   * tests could not tell prompts apart.  Untied, the text depends on the
   * whole prompt (checked in test_text_only_matches_core). */
  tp.tied = FALSE;
  fail_unless (npu_model_gen_write_text (&tp, qwen_path, NULL, &error), "%s",
      error ? error->message : "");
  fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_LLAMA, "tiny",
          &error));
  fail_unless (npu_model_gen_write_text (&tp, llama_path, NULL, &error));
  fail_unless (npu_model_gen_mmproj_preset (&mp, NPU_MODEL_PROJECTOR_MLP,
          "tiny", &error));
  fail_unless (npu_model_gen_write_mmproj (&mp, qwen_path, mmproj_path, NULL,
          &error), "%s", error ? error->message : "");
}

static void
setup (void)
{
  npu_check_load_plugins ();
  write_models ();
}

static void
teardown (void)
{
  g_unlink (qwen_path);
  g_unlink (llama_path);
  g_unlink (mmproj_path);
  g_unlink (gptoss_path);
  g_rmdir (tmpdir);
  g_free (qwen_path);
  g_free (llama_path);
  g_free (mmproj_path);
  g_free (gptoss_path);
  g_free (tmpdir);
}

/* The prompt as the model must be fed it, written here from the chat
 * templates the generator puts in the files (tests/tools/npumodelgen.c),
 * not by the session: qwen2's ChatML with the template's default system
 * turn and no BOS, llama's Llama 2 "[INST] ... [/INST]" after BOS; the
 * gpt-oss file has no template: the prompt raw.  Media rows go between
 * @before and @after, before the user's text. */
static void
prompt_text (const gchar * path, const gchar * user, gchar ** before,
    gchar ** after, gboolean * bos)
{
  if (g_str_equal (path, gptoss_path)) {
    *before = g_strdup ("");
    *after = g_strdup (user);
    *bos = FALSE;
  } else if (g_str_equal (path, llama_path)) {
    *before = g_strdup ("[INST] ");
    *after = g_strdup_printf ("%s [/INST]", user);
    *bos = TRUE;
  } else {
    *before = g_strdup ("<|im_start|>system\nYou are a helpful assistant."
        "<|im_end|>\n<|im_start|>user\n");
    *after = g_strdup_printf ("%s<|im_end|>\n<|im_start|>assistant\n", user);
    *bos = FALSE;
  }
}

/* The ids of @text, control-token text as control tokens, nothing added */
static gint32 *
tokens_of (const NpuTokenizer * tok, const gchar * text, gsize * n)
{
  return npu_tokenizer_encode (tok, text, -1, FALSE, TRUE, n);
}

/* The answer, computed without the element and without the session it
 * wraps: the hand-built prompt (prompt_text()) through the core's decoder
 * with @n_media token blocks spliced in this order; greedy (argmax, lowest
 * id on ties) at temperature 0, else the core's sampler with the element's
 * defaults; ends at the end-of-generation tokens named here or after
 * @max_tokens.  @ids (nullable) receives the generated ids, @n_prompt
 * (nullable) the length of the prompt the model was fed, media rows
 * included. */
/* The core's answers read the file as stored, or (direct_mxfp4) as
 * mxfp4weights' default conversion documents it: every 2-D F32, F16, BF16
 * or Q8_0 tensor with rows of whole 32-blocks quantised to MXFP4 by the
 * codec, except the embedding tables, a Q8_0 output.weight, the router
 * and the biases (gstmxfp4weights.c) */
static gboolean direct_mxfp4;

typedef struct
{
  NpuGguf *gguf;
  GPtrArray *owned;             /* the converted copies */
} Mxfp4Lookup;

static gboolean
mxfp4_lookup (const gchar * name, NpuTensorView * out, gpointer user_data)
{
  Mxfp4Lookup *l = user_data;
  const NpuGgufTensor *t = npu_gguf_find_tensor (l->gguf, name);
  gsize n;
  NpuBlockMxfp4 *b;

  if (!npu_gguf_lookup_view (name, out, l->gguf))
    return FALSE;
  if (t->n_dims < 2 || t->ne[0] % 32 != 0 || strstr (name, "_embd") ||
      (t->type == NPU_GGML_TYPE_Q8_0 && g_str_equal (name, "output.weight"))
      || strstr (name, "ffn_gate_inp.") || g_str_has_suffix (name, ".bias"))
    return TRUE;
  n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
  b = g_new (NpuBlockMxfp4, n / 32);
  switch (t->type) {
    case NPU_GGML_TYPE_F32:
      npu_mxfp4_quantize_f32 ((const float *) t->data, b, n);
      break;
    case NPU_GGML_TYPE_F16:
      npu_mxfp4_quantize_f16 ((const guint16 *) t->data, b, n);
      break;
    case NPU_GGML_TYPE_BF16:
      npu_mxfp4_quantize_bf16 ((const guint16 *) t->data, b, n);
      break;
    case NPU_GGML_TYPE_Q8_0:
      npu_mxfp4_quantize_q8_0 (t->data, b, n);
      break;
    default:
      g_free (b);
      return TRUE;
  }
  g_ptr_array_add (l->owned, b);
  out->type = NPU_GGML_TYPE_MXFP4;
  out->data = b;
  out->size = n / 32 * sizeof (NpuBlockMxfp4);
  return TRUE;
}

static NpuLlmModel *
direct_model (const gchar * path, Mxfp4Lookup * l)
{
  NpuLlmHParams hp;
  NpuLlmModel *model;
  GError *error = NULL;

  l->gguf = NULL;
  l->owned = NULL;
  if (!direct_mxfp4) {
    model = npu_llm_model_new_from_file (path, NPU_LLM_LOAD_IN_PLACE, &error);
  } else {
    l->gguf = npu_gguf_open (path, &error);
    fail_unless (l->gguf != NULL, "%s", error ? error->message : "");
    l->owned = g_ptr_array_new_with_free_func (g_free);
    fail_unless (npu_llm_hparams_from_gguf (l->gguf, &hp, &error));
    model = npu_llm_model_new (&hp, mxfp4_lookup, l, NPU_LLM_LOAD_IN_PLACE,
        &error);
  }
  fail_unless (model != NULL, "%s", error ? error->message : "");
  return model;
}

static void
direct_model_free (NpuLlmModel * model, Mxfp4Lookup * l)
{
  npu_llm_model_free (model);
  if (l->owned)
    g_ptr_array_unref (l->owned);
  if (l->gguf)
    npu_gguf_free (l->gguf);
}

static gchar *
direct_answer_media_ids (const gchar * path, const gchar * prompt,
    guint max_tokens, gdouble temperature, guint64 seed,
    GBytes * const *media, guint n_media, guint n_embd, GArray * ids,
    guint * n_prompt)
{
  NpuGguf *gguf = npu_gguf_open (path, NULL);
  NpuTokenizer *tok;
  NpuLlmModel *model;
  NpuLlmContextParams cp;
  NpuLlmContext *ctx;
  NpuLlmSamplerParams sp;
  NpuLlmSampler *sampler = NULL;
  const NpuLlmHParams *hp;
  GArray *out = g_array_new (FALSE, FALSE, sizeof (gint32));
  gchar *before, *after, *text;
  gint32 *tb, *ta, eog[2];
  gsize nb, na, i;
  gboolean bos;
  guint n_fed;
  Mxfp4Lookup lookup;
  GError *error = NULL;

  fail_unless (gguf != NULL);
  tok = npu_tokenizer_new_from_gguf (gguf, &error);
  fail_unless (tok != NULL, "%s", error ? error->message : "");
  npu_gguf_free (gguf);
  model = direct_model (path, &lookup);
  hp = npu_llm_model_get_hparams (model);
  npu_llm_context_params_init (&cp);
  cp.n_ctx = 512;
  /* the element's defaults (docs/npullm.md) */
  cp.kv_type = NPU_KV_F16;
  cp.precision = NPU_MATMUL_PRECISION_FAST;
  ctx = npu_llm_context_new (model, &cp, &error);
  fail_unless (ctx != NULL, "%s", error ? error->message : "");

  prompt_text (path, prompt, &before, &after, &bos);
  if (n_media == 0) {
    gchar *whole = g_strconcat (before, after, NULL);

    tb = tokens_of (tok, whole, &nb);
    ta = tokens_of (tok, "", &na);
    g_free (whole);
  } else {
    tb = tokens_of (tok, before, &nb);
    ta = tokens_of (tok, after, &na);
  }
  if (bos) {
    /* <s>, the second special token of the generated SentencePiece
     * vocabulary (<unk> <s> </s>) */
    gint32 b = 1;

    fail_unless_equals_string (npu_tokenizer_token_text (tok, 1), "<s>");
    fail_unless (npu_llm_eval_tokens (ctx, NULL, &b, 1, &error), "%s",
        error ? error->message : "");
  }
  fail_unless (npu_llm_eval_tokens (ctx, NULL, tb, nb, &error), "%s",
      error ? error->message : "");
  for (i = 0; i < n_media; i++) {
    gsize size;
    const float *rows = g_bytes_get_data (media[i], &size);

    fail_unless (npu_llm_eval_embeddings (ctx, NULL, rows,
            size / (n_embd * 4), &error), "%s", error ? error->message : "");
  }
  if (na)
    fail_unless (npu_llm_eval_tokens (ctx, NULL, ta, na, &error), "%s",
        error ? error->message : "");
  n_fed = npu_llm_context_get_n_past (ctx);
  if (n_prompt)
    *n_prompt = n_fed;

  if (bos) {
    eog[0] = npu_tokenizer_find_token (tok, "</s>");
    eog[1] = eog[0];
  } else {
    eog[0] = npu_tokenizer_find_token (tok, "<|im_end|>");
    eog[1] = npu_tokenizer_find_token (tok, "<|endoftext|>");
  }
  fail_unless (eog[0] != NPU_TOKEN_NULL && eog[1] != NPU_TOKEN_NULL);
  if (temperature > 0) {
    npu_llm_sampler_params_init (&sp);
    sp.temperature = temperature;
    sp.top_k = 40;
    sp.top_p = 0.95;
    sp.min_p = 0.05;
    sp.repeat_penalty = 1.0;
    sp.seed = seed;
    sampler = npu_llm_sampler_new (&sp, hp->n_vocab, &error);
    fail_unless (sampler != NULL);
  }
  while (out->len < max_tokens) {
    const float *logits = npu_llm_get_logits (ctx);
    gint32 next = 0;

    if (sampler) {
      next = npu_llm_sampler_sample (sampler, logits);
    } else {
      gint32 v;

      for (v = 1; v < (gint32) hp->n_vocab; v++)
        if (logits[v] > logits[next])
          next = v;
    }
    if (next == eog[0] || next == eog[1])
      break;
    if (sampler)
      npu_llm_sampler_accept (sampler, next);
    g_array_append_val (out, next);
    if (out->len < max_tokens)
      fail_unless (npu_llm_eval_tokens (ctx, NULL, &next, 1, &error), "%s",
          error ? error->message : "");
  }
  text = npu_tokenizer_decode (tok, (const gint32 *) out->data, out->len,
      NPU_DECODE_NONE, NULL);
  if (ids)
    g_array_append_vals (ids, out->data, out->len);

  g_array_unref (out);
  g_free (tb);
  g_free (ta);
  g_free (before);
  g_free (after);
  if (sampler)
    npu_llm_sampler_free (sampler);
  npu_llm_context_free (ctx);
  direct_model_free (model, &lookup);
  npu_tokenizer_free (tok);
  return text;
}

static gchar *
direct_answer_media (const gchar * path, const gchar * prompt,
    guint max_tokens, gdouble temperature, guint64 seed,
    GBytes * const *media, guint n_media, guint n_embd)
{
  return direct_answer_media_ids (path, prompt, max_tokens, temperature,
      seed, media, n_media, n_embd, NULL, NULL);
}

static gboolean
collect (const gchar * text, gsize len, gpointer user_data)
{
  g_string_append_len (user_data, text, len);
  return TRUE;
}

/* Answers @prompts[0..n) in one session (greedy, a system prompt, the
 * model's template); each answer's text and reused token count out */
static void
session_answers (const gchar * path, const gchar * const *prompts, guint n,
    gchar ** texts, guint * reused, guint * n_prompt)
{
  NpuGguf *gguf = npu_gguf_open (path, NULL);
  NpuLlmModel *model;
  NpuLlmSessionParams p;
  NpuLlmSession *s;
  NpuQueue *q = npu_queue_new (npu_device_get_cpu (0), "prefix");
  GError *error = NULL;
  guint i;

  npu_device_unref (npu_queue_get_device (q));
  model = npu_llm_model_new_from_file (path, NPU_LLM_LOAD_IN_PLACE, &error);
  fail_unless (model != NULL, "%s", error ? error->message : "");
  npu_llm_session_params_init (&p);
  p.max_tokens = 12;
  p.chat_template = g_strdup ("chatml");
  p.system_prompt = g_strdup ("You watch a camera and say what you see, "
      "in one short sentence.");
  p.sampler.temperature = 0;
  s = npu_llm_session_new (gguf, model, &p, &error);
  fail_unless (s != NULL, "%s", error ? error->message : "");
  for (i = 0; i < n; i++) {
    GString *out = g_string_new (NULL);
    NpuLlmAnswerStats st;

    fail_unless (npu_llm_session_answer (s, q, prompts[i], NULL, 0, collect,
            out, &st, &error), "%s", error ? error->message : "");
    texts[i] = g_string_free (out, FALSE);
    reused[i] = st.n_reused;
    n_prompt[i] = st.n_prompt;
  }
  npu_llm_session_params_clear (&p);
  npu_llm_session_free (s);
  npu_queue_free (q);
  npu_gguf_free (gguf);
}

/* The second and later answers start from the cache rows of the prompt
 * prefix they share with the one before (system prompt, template head),
 * and say what a fresh session says */
GST_START_TEST (test_prompt_prefix_reused)
{
  const gchar *const prompts[3] = { "What is on the table?",
    "What is on the floor?", "What is on the floor?"
  };
  gchar *texts[3], *fresh[1];
  guint reused[3], n_prompt[3], r1, n1, i;

  session_answers (qwen_path, prompts, 3, texts, reused, n_prompt);
  fail_unless_equals_int (reused[0], 0);
  /* the system prompt and more: at least 10 tokens, not the whole */
  fail_unless (reused[1] >= 10 && reused[1] < n_prompt[1], "reused %u of %u",
      reused[1], n_prompt[1]);
  /* the same prompt again: all but the last token */
  fail_unless_equals_int (reused[2], n_prompt[2] - 1);
  for (i = 1; i < 3; i++) {
    session_answers (qwen_path, &prompts[i], 1, fresh, &r1, &n1);
    fail_unless_equals_int (r1, 0);
    fail_unless_equals_string (texts[i], fresh[0]);
    g_free (fresh[0]);
  }
  fail_unless_equals_string (texts[1], texts[2]);
  for (i = 0; i < 3; i++)
    g_free (texts[i]);
}

GST_END_TEST;

static gchar *
direct_answer (const gchar * path, const gchar * prompt, guint max_tokens,
    gdouble temperature, guint64 seed, GBytes * media, guint n_embd)
{
  return direct_answer_media (path, prompt, max_tokens, temperature, seed,
      &media, media ? 1 : 0, n_embd);
}

typedef struct
{
  GString *text;
  guint n_buffers;
  GstClockTime first_pts;
  GPtrArray *stats;             /* (nullable) run() adds the structures of
                                 * the npullm-stats messages */
} Collected;

/* UTF-8 that may hold U+0000 (a model may generate the byte token
 * <0x00>; g_utf8_validate() stops at a NUL and calls it invalid) */
static gboolean
utf8_valid_with_nul (const gchar * s, gsize n)
{
  const gchar *nul;

  while ((nul = memchr (s, 0, n)) != NULL) {
    if (!g_utf8_validate (s, nul - s, NULL))
      return FALSE;
    n -= nul + 1 - s;
    s = nul + 1;
  }
  return g_utf8_validate (s, n, NULL);
}

static void
on_handoff (GstElement * sink, GstBuffer * buf, GstPad * pad, gpointer data)
{
  Collected *c = data;
  GstMapInfo map;

  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  fail_unless (utf8_valid_with_nul ((const gchar *) map.data, map.size),
      "a buffer split a UTF-8 character");
  g_string_append_len (c->text, (const gchar *) map.data, map.size);
  gst_buffer_unmap (buf, &map);
  /* atomic: test_stop_while_generating polls it from the test's thread */
  if (g_atomic_int_add ((gint *) & c->n_buffers, 1) == 0)
    c->first_pts = GST_BUFFER_PTS (buf);
}

/* Runs @desc (with a fakesink named "sink") to EOS or error. */
static gchar *
run (const gchar * desc, Collected * c, gchar ** error_message,
    GstElement ** llm)
{
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  GstElement *sink;
  GstBus *bus;
  GstMessage *msg;

  fail_unless (pipeline != NULL, "%s", error ? error->message : "");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  c->text = g_string_new (NULL);
  c->n_buffers = 0;

  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), c);
  if (llm)
    *llm = gst_bin_get_by_name (GST_BIN (pipeline), "llm");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  bus = gst_element_get_bus (pipeline);
  for (;;) {
    msg = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_ELEMENT);
    fail_unless (msg != NULL, "pipeline neither ended nor failed");
    if (GST_MESSAGE_TYPE (msg) != GST_MESSAGE_ELEMENT)
      break;
    if (c->stats && gst_message_has_name (msg, "npullm-stats"))
      g_ptr_array_add (c->stats,
          gst_structure_copy (gst_message_get_structure (msg)));
    gst_message_unref (msg);
  }
  if (error_message)
    *error_message = NULL;
  if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    GError *err = NULL;
    gst_message_parse_error (msg, &err, NULL);
    fail_unless (error_message != NULL, "unexpected error: %s", err->message);
    *error_message = g_strdup (err->message);
    g_error_free (err);
  }
  gst_message_unref (msg);
  gst_object_unref (bus);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return g_string_free (c->text, FALSE);
}

GST_START_TEST (test_text_only_matches_core)
{
  const gchar *models[] = { qwen_path, llama_path };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (models); i++) {
    gchar *want = direct_answer (models[i], "Hello, who are you?", 24, 0.0,
        0, NULL, 0);
    gchar *desc = g_strdup_printf ("npullm name=llm model=%s "
        "prompt=\"Hello, who are you?\" max-tokens=24 ! fakesink name=sink",
        models[i]);
    Collected c = { 0, };
    GstElement *llm;
    gchar *got = run (desc, &c, NULL, &llm);
    guint n_answers;
    gdouble ttft, dtps;

    fail_unless (strlen (want) > 0, "the model said nothing");
    /* one character of the prompt changes the answer: a comparison that
     * can tell a wrong template or a lost token from the right one */
    {
      gchar *other = direct_answer (models[i], "Hello, who are you!", 24, 0.0,
          0, NULL, 0);

      fail_if (g_str_equal (want, other), "%s", want);
      g_free (other);
    }
    fail_unless_equals_string (got, want);
    fail_unless (c.n_buffers >= 1 && c.n_buffers <= 24);
    g_object_get (llm, "n-answers", &n_answers, "ttft-ms", &ttft,
        "decode-tps", &dtps, NULL);
    fail_unless_equals_int (n_answers, 1);
    fail_unless (ttft > 0 && dtps > 0);
    gst_object_unref (llm);
    g_free (want);
    g_free (got);
    g_free (desc);
  }
}

GST_END_TEST;

/* Through the weights pad: with convert="" every tensor as stored, the
 * text of model=; with the default conversion, the text of the core on
 * the matrices converted to MXFP4 by the documented rules, which differs
 * (the file's F32 matrices are not MXFP4's values) */
GST_START_TEST (test_weights_pad_same_text)
{
  const gchar *convert[] = { "convert=\"\"", "" };
  gchar *as_stored = direct_answer (llama_path, "Once upon a time", 16, 0.0,
      0, NULL, 0), *converted;
  guint i;

  direct_mxfp4 = TRUE;
  converted = direct_answer (llama_path, "Once upon a time", 16, 0.0, 0,
      NULL, 0);
  direct_mxfp4 = FALSE;
  fail_if (g_str_equal (as_stored, converted), "%s", converted);
  for (i = 0; i < G_N_ELEMENTS (convert); i++) {
    gchar *desc = g_strdup_printf ("mxfp4weights name=w location=%s %s ! "
        "llm.weights npullm name=llm prompt=\"Once upon a time\" "
        "max-tokens=16 ! fakesink name=sink", llama_path, convert[i]);
    Collected c = { 0, };
    gchar *got = run (desc, &c, NULL, NULL);

    fail_unless_equals_string (got, i == 0 ? as_stored : converted);
    g_free (got);
    g_free (desc);
  }
  g_free (as_stored);
  g_free (converted);
}

GST_END_TEST;

/* gpt-oss through model=, through mxfp4weights with convert="" (the
 * experts MXFP4, the attention F32, as the converter writes them, all as
 * stored) and through model= on the same model as OpenAI's Hugging Face
 * directory (npu-hf-export): all give the core's text.  A directory
 * whose config.json is not gpt-oss's is a clear error. */
GST_START_TEST (test_gpt_oss_both_paths)
{
  NpuTextModelParams tp;
  NpuHfExportParams hp = { 2, FALSE, FALSE };
  gchar *want, *dir = g_build_filename (tmpdir, "gpt-oss-hf", NULL), *cfg;
  gchar *text, *msg;
  const gchar *fmt[] = {
    "npullm name=llm model=%s prompt=\"Once upon a time\" max-tokens=16 ! "
        "fakesink name=sink",
    "mxfp4weights name=w location=%s convert=\"\" ! llm.weights "
        "npullm name=llm prompt=\"Once upon a time\" max-tokens=16 ! "
        "fakesink name=sink",
  };
  guint i;
  GError *error = NULL;

  /* written here, not in setup (), which every test runs */
  fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_GPT_OSS, "tiny",
          NULL));
  fail_unless (npu_model_gen_write_text (&tp, gptoss_path, NULL, NULL));
  fail_unless (npu_hf_export (gptoss_path, dir, &hp, &error), "%s",
      error ? error->message : "");
  want = direct_answer (gptoss_path, "Once upon a time", 16, 0.0, 0, NULL, 0);
  fail_unless (strlen (want) > 0, "the model said nothing");
  /* model= on the file, mxfp4weights on the file, model= on the directory */
  for (i = 0; i < 3; i++) {
    const gchar *path = i < 2 ? gptoss_path : dir;
    gchar *desc = g_strdup_printf (fmt[i % 2], path);
    Collected c = { 0, };
    gchar *got = run (desc, &c, NULL, NULL);

    fail_unless_equals_string (got, want);
    g_free (got);
    g_free (desc);
  }

  cfg = g_build_filename (dir, "config.json", NULL);
  fail_unless (g_file_get_contents (cfg, &text, NULL, NULL));
  fail_unless (g_file_set_contents (cfg, "{\"model_type\": \"llama\"}", -1,
          NULL));
  {
    gchar *desc = g_strdup_printf (fmt[0], dir);
    Collected c = { 0, };
    gchar *got = run (desc, &c, &msg, NULL);

    fail_unless (msg && strstr (msg, "not a usable Hugging Face model") &&
        strstr (msg, "model_type \"llama\""), "%s", msg);
    g_free (msg);
    g_free (got);
    g_free (desc);
  }
  g_free (text);
  g_free (cfg);
  npu_hf_export_remove (dir);
  g_free (dir);
  g_free (want);
}

GST_END_TEST;

/* A harmony answer through the element: the generated gpt-oss file with
 * the format's tokens and a template of gpt-oss's family, whose answer
 * (a random model would never write the format) is forced through the
 * session's test hook (NPU_LLM_FORCE_ANSWER): each forced token is
 * evaluated as a sampled one.  The stream holds the final channel only,
 * with reasoning=true the analysis before it; the framing never; the
 * analysis is in npullm-stats either way, and the answer ends at
 * <|return|> (nothing forced after it is shown). */
GST_START_TEST (test_harmony_channels)
{
  const gchar *forced = "<|channel|>analysis<|message|>Thinking hard."
      "<|end|><|start|>assistant<|channel|>commentary to=functions.f "
      "<|constrain|>json<|message|>{\"x\": 1}<|end|><|start|>assistant"
      "<|channel|>final<|message|>The answer is 42.<|return|>After the end";
  struct
  {
    const gchar *reasoning;
    const gchar *output;
    const gchar *want;
  } cases[] = {
    {"false", "token", "The answer is 42."},
    {"true", "token", "Thinking hard.The answer is 42."},
    {"false", "response", "The answer is 42."},
  };
  NpuTextModelParams tp;
  gchar *path = g_build_filename (tmpdir, "gpt-oss-harmony.gguf", NULL);
  guint i;

  fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_GPT_OSS, "tiny",
          NULL));
  tp.harmony = TRUE;
  fail_unless (npu_model_gen_write_text (&tp, path, NULL, NULL));
  g_setenv ("NPU_LLM_FORCE_ANSWER", forced, TRUE);
  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    gchar *desc = g_strdup_printf ("npullm name=llm model=%s prompt=Hi "
        "max-tokens=100 reasoning=%s output=%s ! fakesink name=sink", path,
        cases[i].reasoning, cases[i].output);
    Collected c = { 0, };
    gchar *got;
    const GstStructure *st;

    c.stats = g_ptr_array_new_with_free_func ((GDestroyNotify)
        gst_structure_free);
    got = run (desc, &c, NULL, NULL);
    fail_unless_equals_string (got, cases[i].want);
    fail_unless_equals_int (c.stats->len, 1);
    st = g_ptr_array_index (c.stats, 0);
    fail_unless_equals_string (gst_structure_get_string (st, "analysis"),
        "Thinking hard.");
    fail_unless_equals_string (gst_structure_get_string (st, "end"), "eog");
    g_ptr_array_unref (c.stats);
    g_free (got);
    g_free (desc);
  }
  g_unsetenv ("NPU_LLM_FORCE_ANSWER");
  g_unlink (path);
  g_free (path);
}

GST_END_TEST;

GST_START_TEST (test_seed_and_output_modes)
{
  gchar *a, *b, *desc;
  Collected c = { 0, };

  desc = g_strdup_printf ("npullm model=%s prompt=\"Tell me\" "
      "max-tokens=20 temperature=0.9 seed=7 output=response ! "
      "fakesink name=sink", qwen_path);
  a = run (desc, &c, NULL, NULL);
  fail_unless_equals_int (c.n_buffers, strlen (a) ? 1 : 0);
  b = run (desc, &c, NULL, NULL);
  fail_unless_equals_string (a, b);
  g_free (b);
  b = direct_answer (qwen_path, "Tell me", 20, 0.9, 7, NULL, 0);
  fail_unless_equals_string (a, b);
  g_free (a);
  g_free (b);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_text_pad_answers_each)
{
  gchar *desc = g_strdup_printf ("appsrc name=src format=time "
      "caps=text/x-raw,format=utf8 ! llm.text npullm name=llm model=%s "
      "max-tokens=8 ! fakesink name=sink", qwen_path);
  gchar *want1 = direct_answer (qwen_path, "first question", 8, 0, 0, NULL,
      0);
  gchar *want2 = direct_answer (qwen_path, "second one", 8, 0, 0, NULL, 0);
  gchar *want = g_strconcat (want1, want2, NULL);
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  const gchar *qs[] = { "first question", "second one" };
  Collected c = { g_string_new (NULL), 0, 0, NULL };
  GstFlowReturn flow;
  guint i;

  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), &c);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (i = 0; i < 2; i++) {
    GstBuffer *buf = gst_buffer_new_memdup (qs[i], strlen (qs[i]));
    GST_BUFFER_PTS (buf) = (i + 1) * GST_SECOND;
    g_signal_emit_by_name (src, "push-buffer", buf, &flow);
    gst_buffer_unref (buf);
  }
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  npu_check_wait_eos (pipeline, 60 * GST_SECOND);
  fail_unless_equals_string (c.text->str, want);
  /* Stamped with the PTS of the text it answers. */
  fail_unless_equals_uint64 (c.first_pts, GST_SECOND);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  g_string_free (c.text, TRUE);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (want);
  g_free (want1);
  g_free (want2);
  g_free (desc);
}

GST_END_TEST;

/* The answers of one session to @prompts, sampled (temperature 1, no
 * cut-off, seed 7), concatenated; with @keep_context one conversation */
static gchar *
session_conversation (const gchar * path, const gchar * const *prompts,
    guint n, gboolean keep_context)
{
  NpuGguf *gguf = npu_gguf_open (path, NULL);
  NpuLlmModel *model;
  NpuLlmSessionParams p;
  NpuLlmSession *s;
  NpuQueue *q = npu_queue_new (npu_device_get_cpu (0), "conversation");
  GString *out = g_string_new (NULL);
  GError *error = NULL;
  guint i;

  npu_device_unref (npu_queue_get_device (q));
  model = npu_llm_model_new_from_file (path, NPU_LLM_LOAD_IN_PLACE, &error);
  fail_unless (model != NULL, "%s", error ? error->message : "");
  npu_llm_session_params_init (&p);
  p.max_tokens = 6;
  p.keep_context = keep_context;
  p.chat_template = g_strdup ("auto");
  p.sampler.temperature = 1.0;
  p.sampler.top_k = 0;
  p.sampler.top_p = 1.0;
  p.sampler.min_p = 0;
  p.sampler.repeat_penalty = 1.0;
  p.sampler.seed = 7;
  s = npu_llm_session_new (gguf, model, &p, &error);
  fail_unless (s != NULL, "%s", error ? error->message : "");
  for (i = 0; i < n; i++)
    fail_unless (npu_llm_session_answer (s, q, prompts[i], NULL, 0, collect,
            out, NULL, &error), "%s", error ? error->message : "");
  npu_llm_session_params_clear (&p);
  npu_llm_session_free (s);
  npu_queue_free (q);
  npu_gguf_free (gguf);
  return g_string_free (out, FALSE);
}

/* keep-context=true: the element's answers are one conversation, the
 * session's (tests/unit/test-llmsession.c checks that against the core
 * fed the whole conversation), and npullm-stats says how many earlier
 * tokens the second answer attended to, all of them reused */
GST_START_TEST (test_keep_context)
{
  const gchar *qs[] = { "first question", "second one" };
  gchar *want = session_conversation (llama_path, qs, 2, TRUE);
  gchar *apart = session_conversation (llama_path, qs, 2, FALSE);
  gchar *desc = g_strdup_printf ("appsrc name=src format=time "
      "caps=text/x-raw,format=utf8 ! llm.text npullm name=llm model=%s "
      "max-tokens=6 temperature=1 top-k=0 top-p=1 min-p=0 seed=7 "
      "keep-context=true ! fakesink name=sink", llama_path);
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  Collected c = { g_string_new (NULL), 0, 0 };
  GstBus *bus = gst_element_get_bus (pipeline);
  GstMessage *msg;
  GstFlowReturn flow;
  guint i, n_stats = 0, context[2] = { 0, 0 }, reused[2] = { 1, 1 };

  fail_if (g_str_equal (want, apart), "the conversation made no difference");
  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), &c);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (i = 0; i < 2; i++) {
    GstBuffer *buf = gst_buffer_new_memdup (qs[i], strlen (qs[i]));
    GST_BUFFER_PTS (buf) = (i + 1) * GST_SECOND;
    g_signal_emit_by_name (src, "push-buffer", buf, &flow);
    gst_buffer_unref (buf);
  }
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  while ((msg = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
              GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_ELEMENT))) {
    const GstStructure *st = gst_message_get_structure (msg);

    if (GST_MESSAGE_TYPE (msg) != GST_MESSAGE_ELEMENT) {
      fail_unless (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS);
      gst_message_unref (msg);
      break;
    }
    if (gst_structure_has_name (st, "npullm-stats") && n_stats < 2) {
      fail_unless (gst_structure_get_uint (st, "context-tokens",
              &context[n_stats]));
      fail_unless (gst_structure_get_uint (st, "reused-tokens",
              &reused[n_stats++]));
    }
    gst_message_unref (msg);
  }
  fail_unless_equals_int (n_stats, 2);
  fail_unless_equals_int (context[0], 0);
  fail_unless (context[1] > 6, "context-tokens %u", context[1]);
  /* the second answer evaluated none of the conversation again: its KV
   * rows were all reused */
  fail_unless_equals_int (reused[0], 0);
  fail_unless_equals_int (reused[1], context[1]);
  fail_unless_equals_string (c.text->str, want);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  g_string_free (c.text, TRUE);
  gst_object_unref (bus);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (want);
  g_free (apart);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_vision_tokens_spliced)
{
  NpuGguf *g = npu_gguf_open (qwen_path, NULL);
  NpuLlmHParams hp;
  guint n_rows = 5, i;
  float *rows;
  GBytes *media;
  gchar *want, *desc;
  GError *error = NULL;
  GstElement *pipeline, *src, *sink;
  Collected c = { g_string_new (NULL), 0, 0, NULL };
  GstBuffer *buf;
  GstFlowReturn flow;
  GstMessage *msg;
  NpuInputWatch *watch;

  fail_unless (npu_llm_hparams_from_gguf (g, &hp, NULL));
  npu_gguf_free (g);
  rows = g_new (float, n_rows * hp.n_embd);
  for (i = 0; i < n_rows * hp.n_embd; i++)
    rows[i] = ((i * 7919) % 200) / 100.0f - 1.0f;
  media = g_bytes_new_take (rows, n_rows * hp.n_embd * 4);
  want = direct_answer (qwen_path, "What is this?", 10, 0, 0, media, hp.n_embd);
  fail_unless (strlen (want) > 0);

  desc = g_strdup_printf ("appsrc name=src format=time caps=\"other/tensors,"
      "format=static,num_tensors=1,types=float32,dimensions=(string)%u:%u\" ! "
      "llm.vision npullm name=llm model=%s prompt=\"What is this?\" "
      "max-tokens=10 ! fakesink name=sink", hp.n_embd, n_rows, qwen_path);
  pipeline = gst_parse_launch (desc, &error);
  fail_unless (pipeline != NULL, "%s", error ? error->message : "");
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), &c);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  buf = gst_buffer_new_memdup (g_bytes_get_data (media, NULL),
      g_bytes_get_size (media));
  GST_BUFFER_PTS (buf) = 3 * GST_SECOND;
  /* the decoder reads the rows where appsrc's buffer holds them */
  watch = npu_input_watch_start ();
  npu_input_watch_add_buffer (watch, buf);
  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  npu_check_wait_eos (pipeline, 60 * GST_SECOND);
  fail_unless_equals_string (c.text->str, want);
  fail_unless_equals_uint64 (c.first_pts, 3 * GST_SECOND);
  fail_unless_equals_int (npu_input_watch_n_reads (watch), 1);
  npu_input_watch_assert_in_place (watch, 1);
  npu_input_watch_stop (watch);
  gst_buffer_unref (buf);
  gst_element_set_state (pipeline, GST_STATE_NULL);

  /* Rows of the wrong width are refused with a reason. */
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  buf = gst_buffer_new_allocate (NULL, (hp.n_embd + 1) * 4, NULL);
  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  gst_buffer_unref (buf);
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR);
  {
    GError *err = NULL;
    gchar *dbg = NULL;
    gst_message_parse_error (msg, &err, &dbg);
    fail_unless (strstr (err->message, "do not fit the model"), "%s",
        err->message);
    fail_unless (dbg && strstr (dbg, "embedding size"), "%s", dbg);
    g_error_free (err);
    g_free (dbg);
  }
  gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);

  g_string_free (c.text, TRUE);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_bytes_unref (media);
  g_free (want);
  g_free (desc);
}

GST_END_TEST;

/* Token rows of the model's width, different for every @seed */
static GBytes *
make_rows (guint n_rows, guint n_embd, guint seed)
{
  float *rows = g_new (float, n_rows * n_embd);
  guint i;

  for (i = 0; i < n_rows * n_embd; i++)
    rows[i] = 2.0f * ((((i + 1) * (7919 + 104729 * seed)) % 200) / 100.0f -
        1.0f);
  return g_bytes_new_take (rows, (gsize) n_rows * n_embd * 4);
}

static GstBuffer *
rows_buffer (GBytes * rows, GstClockTime pts)
{
  GstBuffer *buf = gst_buffer_new_memdup (g_bytes_get_data (rows, NULL),
      g_bytes_get_size (rows));

  GST_BUFFER_PTS (buf) = pts;
  GST_BUFFER_DURATION (buf) = GST_SECOND / 10;
  return buf;
}

static void
append_text (GString * text, GstBuffer * buf)
{
  GstMapInfo map;

  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  g_string_append_len (text, (const gchar *) map.data, map.size);
  gst_buffer_unmap (buf, &map);
}

/* `prompt` may change while playing: each media buffer is asked the
 * prompt set when it arrived.  The first answer is awaited before the
 * change, so that the second buffer cannot join the first answer. */
GST_START_TEST (test_prompt_changed_while_playing)
{
  static const gchar *prompts[2] = { "What is this?", "Name the colour." };
  NpuGguf *g = npu_gguf_open (qwen_path, NULL);
  NpuLlmHParams hp;
  GBytes *media;
  gchar *want[2], *desc, *both;
  GError *error = NULL;
  GstElement *pipeline, *src, *sink, *llm;
  Collected c = { g_string_new (NULL), 0, 0, NULL };
  GstBuffer *buf;
  GstFlowReturn flow;
  guint i, n_answers = 0;
  gint64 end;

  fail_unless (npu_llm_hparams_from_gguf (g, &hp, NULL));
  npu_gguf_free (g);
  media = make_rows (3, hp.n_embd, 5);
  for (i = 0; i < 2; i++)
    want[i] = direct_answer (qwen_path, prompts[i], 10, 0, 0, media, hp.n_embd);
  /* the two prompts must be told apart by their answers */
  fail_if (g_str_equal (want[0], want[1]), "%s", want[0]);

  desc = g_strdup_printf ("appsrc name=src format=time caps=\"other/tensors,"
      "format=static,num_tensors=1,types=float32,dimensions=(string)%u:3\" ! "
      "llm.vision npullm name=llm model=%s prompt=\"%s\" max-tokens=10 ! "
      "fakesink name=sink", hp.n_embd, qwen_path, prompts[0]);
  pipeline = gst_parse_launch (desc, &error);
  fail_unless (pipeline != NULL, "%s", error ? error->message : "");
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  llm = gst_bin_get_by_name (GST_BIN (pipeline), "llm");
  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), &c);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  buf = rows_buffer (media, 0);
  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  gst_buffer_unref (buf);
  end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  while (n_answers == 0 && g_get_monotonic_time () < end) {
    g_usleep (2000);
    g_object_get (llm, "n-answers", &n_answers, NULL);
  }
  fail_unless_equals_int (n_answers, 1);

  g_object_set (llm, "prompt", prompts[1], NULL);
  buf = rows_buffer (media, GST_SECOND);
  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  gst_buffer_unref (buf);
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  npu_check_wait_eos (pipeline, 60 * GST_SECOND);
  both = g_strconcat (want[0], want[1], NULL);
  fail_unless_equals_string (c.text->str, both);

  gst_element_set_state (pipeline, GST_STATE_NULL);
  g_string_free (c.text, TRUE);
  g_free (both);
  for (i = 0; i < 2; i++)
    g_free (want[i]);
  g_bytes_unref (media);
  gst_object_unref (llm);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

/* A camera and a microphone: media from two pads that arrive while an
 * answer is being generated join the next answer in PTS order, whatever
 * order they arrived in, and the newest of each pad wins. */
GST_START_TEST (test_media_from_two_pads_in_pts_order)
{
  NpuGguf *g = npu_gguf_open (llama_path, NULL);
  NpuLlmHParams hp;
  GBytes *v0, *v1, *v1_old, *a2, *both[2];
  gchar *want0, *want1, *reversed;
  GString *answer0 = g_string_new (NULL), *answer1 = g_string_new (NULL);
  GstHarness *hv;
  GstPad *asrc, *asink;
  GstSegment segment;
  GstCaps *caps;
  gboolean eos = FALSE;
  GstElement *llm;
  GstBuffer *buf;
  guint64 replaced;

  fail_unless (npu_llm_hparams_from_gguf (g, &hp, NULL));
  npu_gguf_free (g);
  v0 = make_rows (4, hp.n_embd, 1);
  v1_old = make_rows (4, hp.n_embd, 2);
  v1 = make_rows (4, hp.n_embd, 3);
  a2 = make_rows (3, hp.n_embd, 4);
  want0 = direct_answer (llama_path, "What happened?", 16, 0, 0, v0, hp.n_embd);
  both[0] = a2;                 /* audio at 1.0 s before vision at 2.0 s */
  both[1] = v1;
  want1 = direct_answer_media (llama_path, "What happened?", 16, 0, 0, both, 2,
      hp.n_embd);
  both[0] = v1;
  both[1] = a2;
  reversed = direct_answer_media (llama_path, "What happened?", 16, 0, 0,
      both, 2, hp.n_embd);
  /* Otherwise this test could not tell the orders apart (llama: untied
   * output, so the answer depends on the media, docs/models.md) */
  fail_if (g_str_equal (want1, reversed), "%s / %s / %s", want0, want1,
      reversed);

  llm = gst_element_factory_make ("npullm", NULL);
  fail_unless (llm != NULL);
  g_object_set (llm, "model", llama_path, "prompt", "What happened?",
      "max-tokens", 16, NULL);
  gst_util_set_object_arg (G_OBJECT (llm), "output", "token");
  hv = gst_harness_new_with_element (llm, "vision", "src");
  gst_harness_set_src_caps_str (hv, "other/tensors,format=static,"
      "num_tensors=1,types=float32");
  /* The audio pad is fed by hand: a second harness on the same element
   * cannot make up a stream id for an element with two sink pads. */
  asink = gst_element_request_pad_simple (llm, "audio");
  asrc = gst_pad_new ("audio-src", GST_PAD_SRC);
  fail_unless_equals_int (gst_pad_link (asrc, asink), GST_PAD_LINK_OK);
  fail_unless (gst_pad_set_active (asrc, TRUE));
  gst_segment_init (&segment, GST_FORMAT_TIME);
  fail_unless (gst_pad_push_event (asrc, gst_event_new_stream_start ("a")));
  caps = gst_caps_from_string ("other/tensors,format=static,num_tensors=1,"
      "types=float32");
  fail_unless (gst_pad_push_event (asrc, gst_event_new_caps (caps)));
  gst_caps_unref (caps);
  fail_unless (gst_pad_push_event (asrc, gst_event_new_segment (&segment)));
  /* The element's pushes block until the test pulls: the first answer is
   * held half way while the next media arrives. */
  gst_harness_set_blocking_push_mode (hv);

  fail_unless_equals_int (gst_harness_push (hv, rows_buffer (v0, 0)),
      GST_FLOW_OK);
  buf = gst_harness_pull (hv);
  fail_unless (buf != NULL);
  fail_unless_equals_uint64 (GST_BUFFER_PTS (buf), 0);
  append_text (answer0, buf);
  gst_buffer_unref (buf);
  /* One token of the first answer is out and the next waits on us: the
   * element is busy with it while these arrive, newest frame last. */
  fail_unless_equals_int (gst_harness_push (hv, rows_buffer (v1_old,
              2 * GST_SECOND)), GST_FLOW_OK);
  fail_unless_equals_int (gst_harness_push (hv, rows_buffer (v1,
              2 * GST_SECOND)), GST_FLOW_OK);
  fail_unless_equals_int (gst_pad_push (asrc, rows_buffer (a2, GST_SECOND)),
      GST_FLOW_OK);
  gst_harness_push_event (hv, gst_event_new_eos ());
  gst_pad_push_event (asrc, gst_event_new_eos ());

  /* Until the element's EOS, after which every buffer is queued */
  for (;;) {
    GstEvent *ev;

    while ((ev = gst_harness_try_pull_event (hv))) {
      eos |= GST_EVENT_TYPE (ev) == GST_EVENT_EOS;
      gst_event_unref (ev);
    }
    buf = gst_harness_try_pull (hv);
    if (!buf) {
      if (eos)
        break;
      g_usleep (1000);
      continue;
    }
    if (GST_BUFFER_PTS (buf) == 0) {
      append_text (answer0, buf);
    } else {
      /* stamped from the audio's start to the end of the frame */
      fail_unless_equals_uint64 (GST_BUFFER_PTS (buf), GST_SECOND);
      fail_unless_equals_uint64 (GST_BUFFER_DURATION (buf),
          GST_SECOND + GST_SECOND / 10);
      append_text (answer1, buf);
    }
    gst_buffer_unref (buf);
  }
  fail_unless_equals_string (answer0->str, want0);
  fail_unless_equals_string (answer1->str, want1);
  g_object_get (llm, "media-replaced", &replaced, NULL);
  fail_unless_equals_uint64 (replaced, 1);

  gst_pad_set_active (asrc, FALSE);
  gst_pad_unlink (asrc, asink);
  gst_element_release_request_pad (llm, asink);
  gst_object_unref (asink);
  gst_object_unref (asrc);
  gst_harness_teardown (hv);
  gst_object_unref (llm);
  g_bytes_unref (v0);
  g_bytes_unref (v1);
  g_bytes_unref (v1_old);
  g_bytes_unref (a2);
  g_free (want0);
  g_free (want1);
  g_free (reversed);
  g_string_free (answer0, TRUE);
  g_string_free (answer1, TRUE);
}

GST_END_TEST;

/* Holds the first piece of an answer in the src pad (until a flush) and
 * says so */
static GstPadProbeReturn
hold_answer (GstPad * pad, GstPadProbeInfo * info, gpointer user_data)
{
  g_atomic_int_set ((gint *) user_data, 1);
  return GST_PAD_PROBE_OK;
}

/* The last npullm-stats message on @bus (a copy; free it) */
static GstStructure *
last_stats (GstBus * bus)
{
  GstStructure *last = NULL;
  GstMessage *msg;

  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ELEMENT))) {
    if (gst_message_has_name (msg, "npullm-stats")) {
      if (last)
        gst_structure_free (last);
      last = gst_structure_copy (gst_message_get_structure (msg));
    }
    gst_message_unref (msg);
  }
  fail_unless (last != NULL, "no npullm-stats message");
  return last;
}

/* @s's media counts are these, and add up to media-accepted */
static void
check_media_counts (const GstStructure * s, guint64 accepted,
    guint64 answered, guint64 skipped, guint64 dropped, guint64 cancelled,
    guint64 failed)
{
  const gchar *fields[] = { "media-answered", "media-skipped",
    "media-dropped", "media-cancelled", "media-failed", "media-pending"
  };
  guint64 want[] = { answered, skipped, dropped, cancelled, failed, 0 }, v,
      sum = 0;
  guint i;

  fail_unless (gst_structure_get_uint64 (s, "media-accepted", &v));
  fail_unless_equals_uint64 (v, accepted);
  for (i = 0; i < G_N_ELEMENTS (fields); i++) {
    fail_unless (gst_structure_get_uint64 (s, fields[i], &v), "%s", fields[i]);
    fail_unless_equals_uint64 (v, want[i]);
    sum += v;
  }
  fail_unless_equals_uint64 (sum, accepted);
}

/* Media accepted and then flushed are reported, not lost: a flush while
 * the first frame's answer runs (its first piece held in the src pad)
 * and a second frame waits (it replaced a third from the same pad) gives
 * an npullm-stats message "flushed" that counts the running answer's
 * frame and the waiting one as cancelled, the replaced one as skipped;
 * after the flush a fourth frame is answered, and the counts go on. */
GST_START_TEST (test_media_counts_after_flush)
{
  NpuGguf *g = npu_gguf_open (qwen_path, NULL);
  NpuLlmHParams hp;
  GBytes *rows;
  GstElement *llm;
  GstHarness *h;
  GstPad *srcpad;
  GstBus *bus = gst_bus_new ();
  GstStructure *s;
  GstEvent *ev;
  GstSegment segment;
  gint held = 0;
  gulong probe;
  gboolean eos = FALSE;
  gint64 deadline = g_get_monotonic_time () + 120 * G_TIME_SPAN_SECOND;

  fail_unless (npu_llm_hparams_from_gguf (g, &hp, NULL));
  npu_gguf_free (g);
  rows = make_rows (3, hp.n_embd, 7);
  llm = gst_element_factory_make ("npullm", NULL);
  fail_unless (llm != NULL);
  g_object_set (llm, "model", qwen_path, "prompt", "What is this?",
      "max-tokens", 100000, "context-length", 256, NULL);
  gst_util_set_object_arg (G_OBJECT (llm), "output", "token");
  h = gst_harness_new_with_element (llm, "vision", "src");
  gst_element_set_bus (llm, bus);
  gst_harness_set_src_caps_str (h, "other/tensors,format=static,"
      "num_tensors=1,types=float32");
  srcpad = gst_element_get_static_pad (llm, "src");
  probe = gst_pad_add_probe (srcpad, GST_PAD_PROBE_TYPE_BLOCK |
      GST_PAD_PROBE_TYPE_BUFFER, hold_answer, &held, NULL);

  fail_unless_equals_int (gst_harness_push (h, rows_buffer (rows, 0)),
      GST_FLOW_OK);
  while (!g_atomic_int_get (&held)) {
    fail_unless (g_get_monotonic_time () < deadline, "no answer came");
    g_usleep (1000);
  }
  /* the answer is held: these wait, the newer one replacing the older */
  fail_unless_equals_int (gst_harness_push (h, rows_buffer (rows,
              GST_SECOND)), GST_FLOW_OK);
  fail_unless_equals_int (gst_harness_push (h, rows_buffer (rows,
              2 * GST_SECOND)), GST_FLOW_OK);
  /* the flush unblocks the probe; when it returns the task is paused */
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_start ()));
  s = last_stats (bus);
  fail_unless_equals_string (gst_structure_get_string (s, "end"), "flushed");
  check_media_counts (s, 3, 0, 1, 0, 2, 0);
  gst_structure_free (s);

  gst_pad_remove_probe (srcpad, probe);
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  gst_segment_init (&segment, GST_FORMAT_TIME);
  fail_unless (gst_harness_push_event (h, gst_event_new_segment (&segment)));
  g_object_set (llm, "max-tokens", 4, NULL);
  fail_unless_equals_int (gst_harness_push (h, rows_buffer (rows,
              3 * GST_SECOND)), GST_FLOW_OK);
  fail_unless (gst_harness_push_event (h, gst_event_new_eos ()));
  while (!eos) {
    fail_unless (g_get_monotonic_time () < deadline, "no EOS came");
    while ((ev = gst_harness_try_pull_event (h))) {
      eos |= GST_EVENT_TYPE (ev) == GST_EVENT_EOS;
      gst_event_unref (ev);
    }
    g_usleep (1000);
  }
  s = last_stats (bus);
  /* an answer's message */
  fail_unless (gst_structure_has_field (s, "generated-tokens"));
  check_media_counts (s, 4, 1, 1, 0, 2, 0);
  gst_structure_free (s);

  gst_object_unref (srcpad);
  gst_harness_teardown (h);
  /* the state-changed messages of the teardown hold the element */
  gst_bus_set_flushing (bus, TRUE);
  gst_object_unref (llm);
  gst_object_unref (bus);
  g_bytes_unref (rows);
}

GST_END_TEST;

/* Tokens whose producer never finishes (a fence that never signals): a
 * clear error after GST_NPU_FENCE_TIMEOUT_MS, not a hang */
GST_START_TEST (test_fence_never_signals)
{
  NpuGguf *g = npu_gguf_open (qwen_path, NULL);
  NpuLlmHParams hp;
  GstHarness *h;
  GstElement *llm;
  GstBuffer *buf;
  GstBus *bus = gst_bus_new ();
  GstMessage *msg;
  GError *err = NULL;
  NpuFence *never = npu_fence_new ();
  GBytes *rows;

  fail_unless (npu_llm_hparams_from_gguf (g, &hp, NULL));
  npu_gguf_free (g);
  g_setenv ("GST_NPU_FENCE_TIMEOUT_MS", "200", TRUE);
  llm = gst_element_factory_make ("npullm", NULL);
  g_object_set (llm, "model", qwen_path, "max-tokens", 2, NULL);
  gst_element_set_bus (llm, bus);
  h = gst_harness_new_with_element (llm, "vision", "src");
  gst_harness_set_src_caps_str (h, "other/tensors,format=static,"
      "num_tensors=1,types=float32");
  rows = make_rows (2, hp.n_embd, 1);
  buf = rows_buffer (rows, 0);
  gst_buffer_add_npu_fence_meta (buf, never);
  fail_unless_equals_int (gst_harness_push (h, buf), GST_FLOW_OK);
  msg = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND, GST_MESSAGE_ERROR);
  fail_unless (msg != NULL, "no error: the element hung");
  gst_message_parse_error (msg, &err, NULL);
  fail_unless (strstr (err->message, "not ready in time"), "%s", err->message);
  fail_unless (strstr (err->message, "200 ms"), "%s", err->message);
  g_error_free (err);
  gst_message_unref (msg);

  gst_harness_teardown (h);
  gst_element_set_bus (llm, NULL);
  gst_object_unref (bus);
  gst_object_unref (llm);
  npu_fence_unref (never);
  g_bytes_unref (rows);
  g_unsetenv ("GST_NPU_FENCE_TIMEOUT_MS");
}

GST_END_TEST;

/* A task that runs until a flush stops it, then fails in its own error
 * domain (as an encoder might): the backend reports it as cancelled. */
static gboolean
stopped_task (NpuTask * task, gpointer user_data, GError ** error)
{
  gint *started = user_data;
  gint64 end = g_get_monotonic_time () + 30 * G_USEC_PER_SEC;

  g_atomic_int_set (started, 1);
  while (!npu_task_is_cancelled (task) && g_get_monotonic_time () < end)
    g_usleep (1000);
  g_set_error (error, g_quark_from_static_string ("some-encoder-error"), 3,
      "encoder stopped at block 2");
  return FALSE;
}

/* The fence of a task cancelled while it ran (a flush of its producer) */
static NpuFence *
cancelled_while_running (void)
{
  NpuDevice *device = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (device, "producer");
  gint started = 0;
  NpuFence *fence = npu_queue_submit (queue, stopped_task, &started, NULL,
      NULL, 0);
  GError *err = NULL;

  while (!g_atomic_int_get (&started))
    g_usleep (1000);
  npu_queue_flush (queue);
  fail_if (npu_fence_wait (fence, 0, &err));
  fail_unless (g_error_matches (err, NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_CANCELLED), "%s", err->message);
  g_error_free (err);
  npu_queue_free (queue);
  npu_device_unref (device);
  return fence;
}

/* Runs an audio-pad harness over @bufs (then EOS) and returns the text
 * answered; fails on an error message */
static gchar *
answer_audio (GstBuffer ** bufs, guint n_bufs)
{
  GstElement *llm = gst_element_factory_make ("npullm", NULL);
  GstBus *bus = gst_bus_new ();
  GString *text = g_string_new (NULL);
  gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  gboolean eos = FALSE;
  GstHarness *h;
  GstMessage *msg;
  GstBuffer *buf;
  guint i;

  g_object_set (llm, "model", qwen_path, "prompt", "What did you hear?",
      "max-tokens", 8, NULL);
  gst_element_set_bus (llm, bus);
  h = gst_harness_new_with_element (llm, "audio", "src");
  gst_harness_set_src_caps_str (h, "other/tensors,format=static,"
      "num_tensors=1,types=float32");
  for (i = 0; i < n_bufs; i++)
    fail_unless_equals_int (gst_harness_push (h, bufs[i]), GST_FLOW_OK);
  gst_harness_push_event (h, gst_event_new_eos ());
  while (!eos && g_get_monotonic_time () < end) {
    GstEvent *ev;

    while ((ev = gst_harness_try_pull_event (h))) {
      eos |= GST_EVENT_TYPE (ev) == GST_EVENT_EOS;
      gst_event_unref (ev);
    }
    while ((buf = gst_harness_try_pull (h))) {
      append_text (text, buf);
      gst_buffer_unref (buf);
    }
    if ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR))) {
      GError *err = NULL;

      gst_message_parse_error (msg, &err, NULL);
      fail ("npullm failed on cancelled media: %s", err->message);
    }
    g_usleep (1000);
  }
  fail_unless (eos, "no EOS: the element hung");
  while ((buf = gst_harness_try_pull (h))) {
    append_text (text, buf);
    gst_buffer_unref (buf);
  }
  gst_harness_teardown (h);
  gst_element_set_bus (llm, NULL);
  gst_object_unref (bus);
  gst_object_unref (llm);
  return g_string_free (text, FALSE);
}

/* Tokens whose producer was flushed while encoding them (npuaudiotok or
 * npuvisiontok stopped mid-chunk) are skipped, not an error: alone they
 * give no answer, and media after them are answered as if they had not
 * been there. */
GST_START_TEST (test_media_cancelled_mid_encode_skipped)
{
  NpuGguf *g = npu_gguf_open (qwen_path, NULL);
  NpuLlmHParams hp;
  GBytes *dropped, *good;
  NpuFence *cancelled = cancelled_while_running ();
  GstBuffer *bufs[2];
  gchar *want, *got;

  fail_unless (npu_llm_hparams_from_gguf (g, &hp, NULL));
  npu_gguf_free (g);
  dropped = make_rows (3, hp.n_embd, 5);
  good = make_rows (3, hp.n_embd, 6);
  want = direct_answer (qwen_path, "What did you hear?", 8, 0, 0, good,
      hp.n_embd);
  fail_unless (strlen (want) > 0);

  bufs[0] = rows_buffer (dropped, 0);
  gst_buffer_add_npu_fence_meta (bufs[0], cancelled);
  got = answer_audio (bufs, 1);
  fail_unless_equals_string (got, "");
  g_free (got);

  bufs[0] = rows_buffer (dropped, 0);
  gst_buffer_add_npu_fence_meta (bufs[0], cancelled);
  bufs[1] = rows_buffer (good, GST_SECOND);
  got = answer_audio (bufs, 2);
  fail_unless_equals_string (got, want);
  g_free (got);

  npu_fence_unref (cancelled);
  g_bytes_unref (dropped);
  g_bytes_unref (good);
  g_free (want);
}

GST_END_TEST;

GST_START_TEST (test_errors)
{
  Collected c = { 0, };
  gchar *desc, *msg, *got;

  got = run ("npullm model=/nonexistent/m.gguf ! fakesink name=sink", &c,
      &msg, NULL);
  fail_unless (msg && strstr (msg, "not found") && strstr (msg, "m.gguf"),
      "%s", msg);
  g_free (msg);
  g_free (got);

  /* An mmproj is not a text model. */
  desc = g_strdup_printf ("npullm model=%s ! fakesink name=sink", mmproj_path);
  got = run (desc, &c, &msg, NULL);
  fail_unless (msg && strstr (msg, "cannot be run"), "%s", msg);
  g_free (msg);
  g_free (got);
  g_free (desc);

  got = run ("npullm ! fakesink name=sink", &c, &msg, NULL);
  fail_unless (msg && strstr (msg, "No model"), "%s", msg);
  g_free (msg);
  g_free (got);

  /* An mmproj made for a text model 1.5x as wide: the frame's rows are
   * 96 floats, and an even number of them also divides into 64-wide
   * rows, so only their width (the tokens meta) shows they do not fit. */
  {
    NpuTextModelParams tp;
    NpuMmprojParams mp;
    GError *error = NULL;
    gchar *wide = g_build_filename (tmpdir, "mmproj-wide.gguf", NULL);
    gchar *want;

    fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_QWEN2,
            "tiny", &error));
    fail_unless (npu_model_gen_mmproj_preset (&mp, NPU_MODEL_PROJECTOR_MLP,
            "tiny", &error));
    mp.text_dim = tp.dim * 3 / 2;
    fail_unless (npu_model_gen_write_mmproj (&mp, NULL, wide, NULL, &error),
        "%s", error ? error->message : "");
    desc = g_strdup_printf ("videotestsrc num-buffers=1 ! "
        "video/x-raw,width=64,height=48 ! npuvisiontok model=%s ! "
        "llm.vision npullm name=llm model=%s max-tokens=4 ! "
        "fakesink name=sink", wide, qwen_path);
    got = run (desc, &c, &msg, NULL);
    want = g_strdup_printf ("the vision pad's rows are %u wide, the text "
        "model's embedding size is %u", mp.text_dim, tp.dim);
    fail_unless (msg && strstr (msg, want), "%s", msg);
    g_free (want);
    g_free (msg);
    g_free (got);
    g_free (desc);
    g_unlink (wide);
    g_free (wide);
  }

  /* The test models have heads of 16: no Q8_0 cache (blocks of 32) */
  desc = g_strdup_printf ("npullm model=%s kv-type=q8_0 ! fakesink "
      "name=sink", llama_path);
  got = run (desc, &c, &msg, NULL);
  fail_unless (msg && strstr (msg, "q8_0") && strstr (msg, "multiple of 32"),
      "%s", msg);
  g_free (msg);
  g_free (got);
  g_free (desc);
}

GST_END_TEST;

/* A bus sync handler: keeps a copy of each npullm-stats message */
static GstBusSyncReply
keep_stats (GstBus * bus, GstMessage * msg, gpointer user_data)
{
  if (gst_message_has_name (msg, "npullm-stats"))
    g_ptr_array_add (user_data,
        gst_structure_copy (gst_message_get_structure (msg)));
  return GST_BUS_PASS;
}

/* Shut down in the middle of a very long answer, after 1, 3 and 6 pieces
 * of it: the state change to NULL succeeds at once (no hang: the test's
 * timeout), no EOS came (the answer was cut short), nothing is pushed
 * after it, what came is the start of the reference answer, and nothing
 * leaks (the valgrind run). */
GST_START_TEST (test_stop_while_generating)
{
  gchar *desc = g_strdup_printf ("npullm model=%s prompt=\"Go on\" "
      "max-tokens=100000 context-length=256 ! fakesink name=sink sync=false",
      llama_path);
  gchar *want = direct_answer (llama_path, "Go on", 48, 0, 0, NULL, 0);
  const guint after[] = { 1, 3, 6 };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (after); i++) {
    GError *error = NULL;
    GstElement *pipeline = gst_parse_launch (desc, &error);
    GstElement *sink;
    Collected c = { g_string_new (NULL), 0, 0, NULL };
    GstState state;
    GstMessage *msg;
    gint64 deadline = g_get_monotonic_time () + 60 * G_TIME_SPAN_SECOND;
    guint n_at_stop;
    GPtrArray *stats;

    fail_unless (pipeline != NULL, "%s", error ? error->message : "");
    sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
    g_object_set (sink, "signal-handoffs", TRUE, NULL);
    g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), &c);
    /* as they are posted: the bus drops what it holds on the way to NULL */
    stats = g_ptr_array_new_with_free_func ((GDestroyNotify)
        gst_structure_free);
    gst_bus_set_sync_handler (GST_ELEMENT_BUS (pipeline), keep_stats, stats,
        NULL);
    gst_element_set_state (pipeline, GST_STATE_PLAYING);
    while (g_atomic_int_get ((gint *) & c.n_buffers) < (gint) after[i]) {
      fail_unless (g_get_monotonic_time () < deadline, "no answer came");
      g_usleep (1000);
    }
    fail_unless_equals_int (gst_element_set_state (pipeline, GST_STATE_NULL),
        GST_STATE_CHANGE_SUCCESS);
    fail_unless_equals_int (gst_element_get_state (pipeline, &state, NULL,
            0), GST_STATE_CHANGE_SUCCESS);
    fail_unless_equals_int (state, GST_STATE_NULL);
    n_at_stop = c.n_buffers;
    fail_unless (n_at_stop >= after[i]);
    msg = gst_bus_pop_filtered (GST_ELEMENT_BUS (pipeline),
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    fail_unless (msg == NULL, "%s after the stop",
        msg ? GST_MESSAGE_TYPE_NAME (msg) : "");
    /* the answer stopped where it was: if it reported at all, it was not
     * run on to its limit */
    {
      guint k, n = 0;

      for (k = 0; k < stats->len; k++) {
        const GstStructure *st = g_ptr_array_index (stats, k);

        fail_unless (gst_structure_get_uint (st, "generated-tokens", &n));
        fail_unless (n < 1000, "%u tokens generated, %u pieces pushed", n,
            n_at_stop);
        fail_unless_equals_string (gst_structure_get_string (st, "end"),
            "stopped");
      }
    }
    gst_bus_set_sync_handler (GST_ELEMENT_BUS (pipeline), NULL, NULL, NULL);
    g_ptr_array_unref (stats);
    /* the start of the answer, not all of it */
    fail_unless (g_str_has_prefix (want, c.text->str) ||
        g_str_has_prefix (c.text->str, want), "\"%s\" is not the start of "
        "\"%s\"", c.text->str, want);
    g_usleep (50 * 1000);
    fail_unless_equals_int (g_atomic_int_get ((gint *) & c.n_buffers),
        n_at_stop);
    gst_object_unref (sink);
    gst_object_unref (pipeline);
    g_string_free (c.text, TRUE);
  }
  g_free (want);
  g_free (desc);
}

GST_END_TEST;

static void
count_handoff (GstElement * sink, GstBuffer * buf, GstPad * pad, gpointer data)
{
  g_atomic_int_inc ((gint *) data);
}

GST_START_TEST (test_flush_while_generating)
{
  /* A flush in the middle of a long answer cancels it; the next prompt is
   * answered in full, in a new segment, and the stream ends. */
  gchar *desc = g_strdup_printf ("appsrc name=src format=time "
      "caps=text/x-raw,format=utf8 ! llm.text npullm name=llm model=%s "
      "max-tokens=8 ! fakesink name=sink sync=false", qwen_path);
  gchar *want = direct_answer (qwen_path, "second one", 8, 0, 0, NULL, 0);
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  GstElement *llm = gst_bin_get_by_name (GST_BIN (pipeline), "llm");
  GstPad *textpad = gst_element_get_static_pad (llm, "text");
  Collected c = { g_string_new (NULL), 0, 0, NULL };
  GstBuffer *buf;
  GstFlowReturn flow;
  gint n_first = 0;
  gulong handler;
  gint64 deadline = g_get_monotonic_time () + 300 * G_TIME_SPAN_SECOND;

  g_object_set (llm, "max-tokens", 100000, NULL);
  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  handler = g_signal_connect (sink, "handoff", G_CALLBACK (count_handoff),
      &n_first);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  buf = gst_buffer_new_memdup ("go on and on", 12);
  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  gst_buffer_unref (buf);
  /* The flush must come in the middle of the answer: once some of it is
   * out, not after a fixed time (under valgrind the pipeline may not have
   * started by then, and a flush before appsrc pushed would stop appsrc's
   * task for good) */
  while (g_atomic_int_get (&n_first) < 1) {
    fail_unless (g_get_monotonic_time () < deadline, "no answer came");
    g_usleep (1000);
  }
  g_signal_handler_disconnect (sink, handler);

  fail_unless (gst_pad_send_event (textpad, gst_event_new_flush_start ()));
  fail_unless (gst_pad_send_event (textpad, gst_event_new_flush_stop (TRUE)));
  {
    /* As upstream does after a flushing seek. */
    GstSegment seg;
    gst_segment_init (&seg, GST_FORMAT_TIME);
    fail_unless (gst_pad_send_event (textpad, gst_event_new_segment (&seg)));
  }
  /* Count only what comes after the flush. */
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), &c);
  g_object_set (llm, "max-tokens", 8, NULL);
  buf = gst_buffer_new_memdup ("second one", 10);
  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  gst_buffer_unref (buf);
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  npu_check_wait_eos (pipeline, 60 * GST_SECOND);
  fail_unless_equals_string (c.text->str, want);

  gst_element_set_state (pipeline, GST_STATE_NULL);
  g_string_free (c.text, TRUE);
  gst_object_unref (textpad);
  gst_object_unref (llm);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (want);
  g_free (desc);
}

GST_END_TEST;

/* The vision tokens npuvisiontok makes of one frame of @desc (ending in
 * appsink name=a) */
static GBytes *
vision_rows (const gchar * desc)
{
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "a");
  GstSample *sample = NULL;
  GstMapInfo map;
  GBytes *rows;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  g_signal_emit_by_name (sink, "pull-sample", &sample);
  fail_unless (sample != NULL);
  /* maps wait for the encoder's fence */
  fail_unless (gst_buffer_map (gst_sample_get_buffer (sample), &map,
          GST_MAP_READ));
  rows = g_bytes_new (map.data, map.size);
  gst_buffer_unmap (gst_sample_get_buffer (sample), &map);
  gst_sample_unref (sample);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return rows;
}

/* @text's words (what whitespace separates), one space between them */
static gchar *
words_of (const gchar * text)
{
  gchar **w = g_strsplit_set (text, " \t\r\n", -1);
  GString *out = g_string_new (NULL);
  guint i;

  for (i = 0; w[i]; i++)
    if (*w[i])
      g_string_append_printf (out, "%s%s", out->len ? " " : "", w[i]);
  g_strfreev (w);
  return g_string_free (out, FALSE);
}

static guint
count_lines (const gchar * text)
{
  guint n = 0;

  for (; *text; text++)
    n += *text == '\n';
  return n;
}

GST_START_TEST (test_caption_pipeline)
{
  /* The captioning pipeline of docs/npullm.md, on a finite source whose
   * frames are all the same (a checkerboard: the default SMPTE bars have a
   * corner of noise that videotestsrc draws anew for every frame, so
   * their tokens differ a little from frame to frame, and a random model's
   * greedy text with them): whichever frames the model answers, every
   * answer is the reference answer for the tokens of that frame. */
  gchar *mm = g_build_filename (tmpdir, "mmproj.gguf", NULL);
  gchar *desc = g_strdup_printf ("videotestsrc num-buffers=10 "
      "pattern=checkers-8 ! "
      "video/x-raw,format=NV12,width=320,height=240 ! tee name=t "
      "t. ! queue ! npuvisiontok model=%s policy=drop-newest ! llm.vision "
      "npullm name=llm model=%s prompt=\"One short caption.\" "
      "output=sentence max-tokens=8 ! text/x-raw,format=utf8 ! tee name=tt "
      "tt. ! queue ! ov.text_sink tt. ! queue ! fakesink name=sink "
      "t. ! queue ! textoverlay name=ov wait-text=false ! fakesink",
      mm, qwen_path);
  gchar *one = g_strdup_printf ("videotestsrc num-buffers=1 "
      "pattern=checkers-8 ! video/x-raw,format=NV12,width=320,height=240 ! "
      "npuvisiontok model=%s ! appsink name=a", mm);
  GBytes *rows = vision_rows (one);
  NpuGguf *g = npu_gguf_open (qwen_path, NULL);
  NpuLlmHParams hp;
  gchar *want;
  GString *all = g_string_new (NULL);
  Collected c = { 0, };
  GstElement *llm;
  gchar *got;
  guint n_answers, i;

  fail_unless (npu_llm_hparams_from_gguf (g, &hp, NULL));
  npu_gguf_free (g);
  want = direct_answer (qwen_path, "One short caption.", 8, 0, 0, rows,
      hp.n_embd);
  fail_unless (strlen (want) > 0);
  got = run (desc, &c, NULL, &llm);
  g_object_get (llm, "n-answers", &n_answers, NULL);
  fail_unless (n_answers >= 1);
  /* output=sentence: the answers' words, each sentence a line: written
   * one after the other (as fdsink does) they read as text, the last
   * sentence of an answer not run into the first of the next */
  for (i = 0; i < n_answers; i++) {
    gchar *words = words_of (want);

    g_string_append_printf (all, "%s%s", i ? " " : "", words);
    g_free (words);
  }
  {
    gchar *got_words = words_of (got);

    fail_unless_equals_string (got_words, all->str);
    g_free (got_words);
  }
  fail_unless (g_str_has_suffix (got, "\n"), "\"%s\" is not lines", got);
  fail_unless_equals_int (count_lines (got), c.n_buffers);
  fail_if (strstr (got, " \n") || strstr (got, "\n "), "\"%s\": "
      "whitespace around a sentence", got);
  /* at least one buffer per answer */
  fail_unless (c.n_buffers >= n_answers, "%u buffers, %u answers",
      c.n_buffers, n_answers);
  gst_object_unref (llm);
  g_string_free (all, TRUE);
  g_bytes_unref (rows);
  g_free (want);
  g_free (got);
  g_free (one);
  g_free (desc);
  g_free (mm);
}

GST_END_TEST;

/* output=caption: each caption buffer as it left npullm */
typedef struct
{
  GstClockTime pts, duration;
  gchar *text;
} Caption;

static void
on_caption (GstElement * sink, GstBuffer * buf, GstPad * pad, gpointer data)
{
  GArray *captions = data;
  Caption c;
  GstMapInfo map;

  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  c.pts = GST_BUFFER_PTS (buf);
  c.duration = GST_BUFFER_DURATION (buf);
  c.text = g_strndup ((const gchar *) map.data, map.size);
  gst_buffer_unmap (buf, &map);
  g_array_append_val (captions, c);
}

/* The caption test's frames: few and small, for it runs under valgrind
 * too (the model's answers, textoverlay and the PNG files dominate) */
#define CAPTION_FONT "Sans 8"
#define CAPTION_FRAMES 6
#define CAPTION_W 160
#define CAPTION_H 120
#define CAPTION_CAPS "video/x-raw,format=NV12,width=160,height=120," \
  "framerate=30/1"

/* Frames as 8-bit luma, decoded from PNG files (multifilesrc @location)
 * or from any pipeline ending in appsink name=a */
static GPtrArray *
grey_frames (const gchar * desc, const gchar * overlay_text)
{
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "a");
  GPtrArray *frames = g_ptr_array_new_with_free_func ((GDestroyNotify)
      g_bytes_unref);
  GstSample *sample;

  if (overlay_text) {
    GstElement *ov = gst_bin_get_by_name (GST_BIN (pipeline), "ov");

    g_object_set (ov, "text", overlay_text, NULL);
    gst_object_unref (ov);
  }
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (;;) {
    GstBuffer *b;
    GstVideoInfo info;
    GstVideoFrame f;
    guint8 *grey;
    guint y;

    g_signal_emit_by_name (sink, "pull-sample", &sample);
    if (!sample)
      break;
    b = gst_sample_get_buffer (sample);
    fail_unless (gst_video_info_from_caps (&info, gst_sample_get_caps
            (sample)));
    fail_unless (gst_video_frame_map (&f, &info, b, GST_MAP_READ));
    grey = g_malloc (CAPTION_W * CAPTION_H);
    for (y = 0; y < CAPTION_H; y++)
      memcpy (grey + y * CAPTION_W, (guint8 *) GST_VIDEO_FRAME_PLANE_DATA (&f,
              0) + y * GST_VIDEO_FRAME_PLANE_STRIDE (&f, 0), CAPTION_W);
    gst_video_frame_unmap (&f);
    g_ptr_array_add (frames, g_bytes_new_take (grey, CAPTION_W * CAPTION_H));
    gst_sample_unref (sample);
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return frames;
}

/* pixels brighter than the black test pattern: text, drawn white */
static guint
count_bright (GBytes * frame)
{
  gsize n, i;
  const guint8 *p = g_bytes_get_data (frame, &n);
  guint bright = 0;

  for (i = 0; i < n; i++)
    bright += p[i] > 128;
  return bright;
}

/* pixels that differ by more than a rounding */
static guint
count_different (GBytes * a, GBytes * b)
{
  gsize n, i;
  const guint8 *pa = g_bytes_get_data (a, &n), *pb = g_bytes_get_data (b, NULL);
  guint d = 0;

  for (i = 0; i < n; i++)
    d += ABS ((gint) pa[i] - (gint) pb[i]) > 24;
  return d;
}

/* The caption pipeline of docs/npullm.md, not live, rendered to PNG files
 * (videotestsrc's black pattern under textoverlay): every frame from the
 * first answer's on shows a caption (each stays until the next one), and
 * what is drawn on each frame is exactly what textoverlay draws for the
 * answer whose interval holds that frame (rendered alone with its text
 * property, as the reference). */
GST_START_TEST (test_captions_drawn)
{
  gchar *dir = g_build_filename (tmpdir, "frames", NULL);
  gchar *text_path = g_build_filename (tmpdir, "caption-text.gguf", NULL);
  gchar *mm_path = g_build_filename (tmpdir, "caption-mmproj.gguf", NULL);
  GArray *captions = g_array_new (FALSE, TRUE, sizeof (Caption));
  gchar *desc, *pngs;
  GstElement *pipeline, *sink;
  GstMessage *msg;
  GPtrArray *frames, *refs;
  guint i, k, n_drawn = 0;

  fail_unless (g_mkdir (dir, 0700) == 0);
  /* The default tiny model answers this prompt with line breaks only (a
   * gap: nothing drawn); the one from seed 3 says words after them. */
  {
    NpuTextModelParams tp;
    NpuMmprojParams mp;
    GError *error = NULL;

    fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_QWEN2,
            "tiny", &error));
    tp.seed = 3;
    fail_unless (npu_model_gen_write_text (&tp, text_path, NULL, &error));
    fail_unless (npu_model_gen_mmproj_preset (&mp, NPU_MODEL_PROJECTOR_MLP,
            "tiny", &error));
    fail_unless (npu_model_gen_write_mmproj (&mp, text_path, mm_path, NULL,
            &error), "%s", error ? error->message : "");
  }
  desc = g_strdup_printf ("videotestsrc num-buffers=%d pattern=black ! "
      CAPTION_CAPS " ! "
      "tee name=t t. ! queue ! npuvisiontok model=%s precision=fast ! "
      "llm.vision "
      "npullm name=llm model=%s prompt=\"One short caption.\" "
      "output=caption max-tokens=8 temperature=2 seed=1 ! "
      "text/x-raw,format=utf8 ! tee name=tt "
      "tt. ! queue ! ov.text_sink tt. ! queue ! fakesink name=sink "
      "t. ! queue ! textoverlay name=ov font-desc=\"" CAPTION_FONT "\" "
      "auto-resize=false ! "
      "videoconvert ! pngenc compression-level=1 ! "
      "multifilesink location=%s/frame-%%03d.png",
      CAPTION_FRAMES, mm_path, text_path, dir);
  pipeline = gst_parse_launch (desc, NULL);
  fail_unless (pipeline != NULL);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_caption), captions);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  /* generous: under valgrind on a loaded 2-core machine the pipeline took
   * nearly two minutes */
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      400 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg != NULL, "the caption pipeline neither ended nor failed");
  fail_unless (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS);
  gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);

  /* Subtitle timing: each caption valid until the next one's PTS, the
   * last one to the end. */
  fail_unless (captions->len >= 1);
  for (i = 0; i < captions->len; i++) {
    Caption *c = &g_array_index (captions, Caption, i);

    fail_unless (GST_CLOCK_TIME_IS_VALID (c->pts));
    fail_unless (GST_CLOCK_TIME_IS_VALID (c->duration));
    if (i + 1 < captions->len) {
      fail_unless_equals_uint64 (c->pts + c->duration,
          g_array_index (captions, Caption, i + 1).pts);
    } else {
      fail_unless (c->pts + c->duration >= CAPTION_FRAMES * GST_SECOND / 30);
    }
  }

  pngs = g_strdup_printf ("multifilesrc location=%s/frame-%%03d.png "
      "caps=image/png,framerate=30/1 ! pngdec ! videoconvert ! "
      "video/x-raw,format=GRAY8 ! appsink name=a sync=false", dir);
  frames = grey_frames (pngs, NULL);
  g_free (pngs);
  fail_unless_equals_int (frames->len, CAPTION_FRAMES);

  refs = g_ptr_array_new_full (captions->len, (GDestroyNotify)
      g_ptr_array_unref);
  g_ptr_array_set_size (refs, captions->len);
  for (k = 0; k < frames->len; k++) {
    GstClockTime t = gst_util_uint64_scale (k, GST_SECOND, 30);
    Caption *c = NULL;
    guint ci_index = 0;

    for (i = 0; i < captions->len; i++) {
      Caption *ci = &g_array_index (captions, Caption, i);

      if (t >= ci->pts && t < ci->pts + ci->duration) {
        c = ci;
        ci_index = i;
      }
    }
    if (!c) {
      /* before the first answer: nothing drawn */
      fail_unless (t < g_array_index (captions, Caption, 0).pts);
      fail_unless_equals_int (count_bright (g_ptr_array_index (frames, k)), 0);
      continue;
    }
    /* the reference: textoverlay drawing this answer alone, once */
    if (!g_ptr_array_index (refs, ci_index)) {
      gchar *escaped = g_markup_escape_text (c->text, -1);
      gsize len = strlen (escaped);
      GPtrArray *ref;

      /* textoverlay drops trailing line breaks from a text buffer */
      while (len > 0 && (escaped[len - 1] == '\n' || escaped[len - 1] == '\r'))
        escaped[--len] = '\0';
      ref = grey_frames ("videotestsrc num-buffers=1 pattern=black ! "
          CAPTION_CAPS " ! "
          "textoverlay name=ov font-desc=\"" CAPTION_FONT "\" "
          "auto-resize=false ! videoconvert ! pngenc compression-level=1 ! "
          "pngdec ! videoconvert ! "
          "video/x-raw,format=GRAY8 ! appsink name=a sync=false", escaped);
      fail_unless_equals_int (ref->len, 1);
      fail_unless (count_bright (g_ptr_array_index (ref, 0)) > 20,
          "the reference of \"%s\" shows no text", c->text);
      g_ptr_array_index (refs, ci_index) = ref;
      g_free (escaped);
    }
    {
      GPtrArray *ref = g_ptr_array_index (refs, ci_index);

      fail_unless_equals_int (count_different (g_ptr_array_index (frames, k),
              g_ptr_array_index (ref, 0)), 0);
    }
    n_drawn++;
  }
  /* every frame from the first answered one on shows a caption (frame 0
   * may have been replaced by a newer one while the model was busy) */
  fail_unless (n_drawn >= CAPTION_FRAMES / 2, "%u frames", n_drawn);
  fail_unless_equals_int (n_drawn, CAPTION_FRAMES - gst_util_uint64_scale_ceil
      (g_array_index (captions, Caption, 0).pts, 30, GST_SECOND));

  g_ptr_array_unref (refs);
  g_ptr_array_unref (frames);
  for (i = 0; i < captions->len; i++)
    g_free (g_array_index (captions, Caption, i).text);
  g_array_unref (captions);
  if (!g_getenv ("NPU_KEEP_CAPTION_FRAMES")) {
    for (k = 0; k < CAPTION_FRAMES; k++) {
      gchar *f = g_strdup_printf ("%s/frame-%03u.png", dir, k);

      g_unlink (f);
      g_free (f);
    }
    g_rmdir (dir);
  }
  g_unlink (text_path);
  g_unlink (mm_path);
  g_free (text_path);
  g_free (mm_path);
  g_free (dir);
}

GST_END_TEST;

/* The one npullm-stats message of a run, checked against the reference's
 * own counts; returns its "end" */
static const gchar *
check_stats (Collected * c, guint n_prompt, guint n_generated)
{
  const GstStructure *st;
  guint u;
  gdouble d;

  fail_unless_equals_int (c->stats->len, 1);
  st = g_ptr_array_index (c->stats, 0);
  fail_unless (gst_structure_get_uint (st, "prompt-tokens", &u));
  fail_unless_equals_int (u, n_prompt);
  fail_unless (gst_structure_get_uint (st, "generated-tokens", &u));
  fail_unless_equals_int (u, n_generated);
  fail_unless (gst_structure_get_double (st, "ttft-ms", &d) && d > 0);
  fail_unless (gst_structure_get_double (st, "prefill-tps", &d) && d > 0);
  fail_unless (gst_structure_get_double (st, "decode-tps", &d) && d > 0);
  fail_unless (gst_structure_has_field_typed (st, "end", G_TYPE_STRING));
  return gst_structure_get_string (st, "end");
}

/* After each answer: an element message npullm-stats whose token counts
 * are the prompt the model was fed (counted by the reference, BOS and
 * template included) and the tokens generated, and whose timings are the
 * element's read-only properties */
GST_START_TEST (test_stats_message)
{
  const gchar *models[] = { qwen_path, llama_path };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (models); i++) {
    GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
    guint n_prompt = 0;
    gchar *want = direct_answer_media_ids (models[i], "Count the tokens.",
        12, 0, 0, NULL, 0, 0, ids, &n_prompt);
    gchar *desc = g_strdup_printf ("npullm name=llm model=%s "
        "prompt=\"Count the tokens.\" max-tokens=12 ! fakesink name=sink",
        models[i]);
    Collected c = { 0, };
    GstElement *llm;
    gchar *got;
    const GstStructure *st;
    gdouble ttft, prefill, decode, d;

    c.stats = g_ptr_array_new_with_free_func ((GDestroyNotify)
        gst_structure_free);
    got = run (desc, &c, NULL, &llm);
    fail_unless_equals_string (got, want);
    /* the model did not end early: the limit did */
    fail_unless_equals_int (ids->len, 12);
    fail_unless (n_prompt > 10);
    fail_unless_equals_string (check_stats (&c, n_prompt, 12), "max-tokens");
    st = g_ptr_array_index (c.stats, 0);
    g_object_get (llm, "ttft-ms", &ttft, "prefill-tps", &prefill,
        "decode-tps", &decode, NULL);
    fail_unless (gst_structure_get_double (st, "ttft-ms", &d));
    fail_unless (d == ttft, "%g %g", d, ttft);
    fail_unless (gst_structure_get_double (st, "prefill-tps", &d));
    fail_unless (d == prefill, "%g %g", d, prefill);
    fail_unless (gst_structure_get_double (st, "decode-tps", &d));
    fail_unless (d == decode, "%g %g", d, decode);
    /* prefill speed is the prompt over the time to first token */
    fail_unless (fabs (prefill * ttft / 1000.0 - n_prompt) <= 1e-6 * n_prompt,
        "%g tokens/s over %g ms for %u tokens", prefill, ttft, n_prompt);
    gst_object_unref (llm);
    g_ptr_array_unref (c.stats);
    g_array_unref (ids);
    g_free (want);
    g_free (got);
    g_free (desc);
  }
}

GST_END_TEST;

static guint64
get_u64 (const GstStructure * st, const gchar * field)
{
  guint64 v = 0;

  fail_unless (gst_structure_get_uint64 (st, field, &v), "no %s", field);
  return v;
}

/* npullm-stats carries the bytes the model moved, counted by the core:
 * the decoded tokens' weights are each token's (the file's tensor table,
 * tests/npullmbytes.h), their KV reads 2 L H S b_kv summed over their
 * positions S, and the energy estimate is the total at pj-per-bit */
GST_START_TEST (test_stats_bytes)
{
  const gchar *models[] = { llama_path, qwen_path };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (models); i++) {
    gchar *desc = g_strdup_printf ("npullm name=llm model=%s "
        "prompt=\"Count the bytes.\" max-tokens=6 kv-type=f16 pj-per-bit=3 "
        "! fakesink name=sink", models[i]);
    NpuGguf *gguf = npu_gguf_open (models[i], NULL);
    Collected c = { 0, };
    const GstStructure *st;
    guint n_prompt, n_decoded, n_gen, j;
    guint64 L, kv_row, kv_read = 0, total = 0;
    gdouble d;
    gchar *got;

    c.stats = g_ptr_array_new_with_free_func ((GDestroyNotify)
        gst_structure_free);
    got = run (desc, &c, NULL, NULL);
    fail_unless_equals_int (c.stats->len, 1);
    st = g_ptr_array_index (c.stats, 0);
    fail_unless (gst_structure_get_uint (st, "prompt-tokens", &n_prompt));
    fail_unless (gst_structure_get_uint (st, "generated-tokens", &n_gen));
    fail_unless (gst_structure_get_uint (st, "decoded-tokens", &n_decoded));
    /* the last token generated is not evaluated */
    fail_unless_equals_int (n_decoded, n_gen - 1);
    fail_unless (n_decoded > 0);
    /* (the test models' heads are 16 wide: too narrow for a Q8_0 cache,
     * which tests/unit/test-llmbytes.c counts) */
    kv_row = npu_ref_kv_row_bytes (gguf, FALSE, &L);
    for (j = 0; j < n_decoded; j++)
      kv_read += 2 * L * kv_row * (n_prompt + j);
    fail_unless_equals_uint64 (get_u64 (st, "decode-bytes-weights-read"),
        n_decoded * npu_ref_token_weight_bytes (gguf));
    fail_unless_equals_uint64 (get_u64 (st, "decode-bytes-kv-cache-read"),
        kv_read);
    fail_unless_equals_uint64 (get_u64 (st, "decode-bytes-kv-cache-written"),
        n_decoded * 2 * L * kv_row);
    fail_unless_equals_uint64 (get_u64 (st, "decode-bytes-tokens-read"),
        n_decoded * 4);
    fail_unless_equals_uint64 (get_u64 (st, "prompt-bytes-kv-cache-written"),
        n_prompt * 2 * L * kv_row);
    fail_unless_equals_uint64 (get_u64 (st, "prompt-bytes-frame-read"), 0);
    /* the total is every kind, both ways */
    {
      static const gchar *const kinds[] = { "frame", "weights", "kv-cache",
        "activations", "tokens", "copies"
      };
      for (j = 0; j < G_N_ELEMENTS (kinds); j++) {
        gchar *r = g_strdup_printf ("decode-bytes-%s-read", kinds[j]);
        gchar *w = g_strdup_printf ("decode-bytes-%s-written", kinds[j]);

        total += get_u64 (st, r) + get_u64 (st, w);
        g_free (r);
        g_free (w);
      }
    }
    fail_unless_equals_uint64 (get_u64 (st, "decode-bytes-total"), total);
    fail_unless (gst_structure_get_double (st, "pj-per-bit", &d) && d == 3.0);
    fail_unless (gst_structure_get_double (st, "decode-energy-estimate-uj",
            &d));
    fail_unless (fabs (d - total * 8 * 3e-6) <= 1e-9 * d, "%g uJ for %"
        G_GUINT64_FORMAT " bytes", d, total);
    g_ptr_array_unref (c.stats);
    npu_gguf_free (gguf);
    g_free (got);
    g_free (desc);
  }
}

GST_END_TEST;

/* The same answer paced (decode-policy=paced) as unpaced, and the stats
 * say how: the pacer's thread count (one holds 5 tokens a second with
 * the tiny model, far faster on one thread), the sleep between tokens */
GST_START_TEST (test_paced_decode)
{
  const gchar *policy[] = { "as-fast-as-possible", "paced" };
  gchar *answers[2];
  guint i;

  for (i = 0; i < 2; i++) {
    gchar *desc = g_strdup_printf ("npullm name=llm model=%s n-threads=2 "
        "prompt=\"Pace yourself.\" max-tokens=6 seed=3 decode-policy=%s "
        "decode-rate=5 ! fakesink name=sink", llama_path, policy[i]);
    Collected c = { 0, };
    const GstStructure *st;
    guint threads = 0, n_decoded = 0;
    gdouble sleep_ms = -1, rate = -1;

    c.stats = g_ptr_array_new_with_free_func ((GDestroyNotify)
        gst_structure_free);
    answers[i] = run (desc, &c, NULL, NULL);
    fail_unless_equals_int (c.stats->len, 1);
    st = g_ptr_array_index (c.stats, 0);
    fail_unless_equals_string (gst_structure_get_string (st,
            "decode-policy"), policy[i]);
    fail_unless (gst_structure_get_uint (st, "decode-threads", &threads));
    fail_unless (gst_structure_get_uint (st, "decoded-tokens", &n_decoded));
    fail_unless (gst_structure_get_double (st, "paced-sleep-ms", &sleep_ms));
    fail_unless (gst_structure_get_double (st, "decode-rate", &rate));
    fail_unless (n_decoded > 1);
    if (i == 0) {
      fail_unless_equals_int (threads, 2);
      fail_unless_equals_float (sleep_ms, 0.0);
      fail_unless_equals_float (rate, 0.0);
    } else {
      fail_unless_equals_int (threads, 1);
      fail_unless (sleep_ms > 0.0, "slept %g ms", sleep_ms);
      fail_unless_equals_float (rate, 5.0);
    }
    g_ptr_array_unref (c.stats);
    g_free (desc);
  }
  fail_unless_equals_string (answers[1], answers[0]);
  g_free (answers[0]);
  g_free (answers[1]);
}

GST_END_TEST;

static void
on_first_buffer (GstElement * sink, GstBuffer * buf, GstPad * pad,
    gpointer data)
{
  g_mutex_lock (&check_mutex);
  *(gboolean *) data = TRUE;
  g_cond_signal (&check_cond);
  g_mutex_unlock (&check_mutex);
}

/* Stopped in a paced answer's sleep (one token in 10 s): the pipeline
 * goes to NULL at once, not at the sleep's end (a bound of 5 s) */
GST_START_TEST (test_paced_stop_in_sleep)
{
  gchar *desc = g_strdup_printf ("npullm model=%s prompt=\"Slowly.\" "
      "max-tokens=50 decode-policy=paced decode-rate=0.1 output=token "
      "! fakesink name=sink signal-handoffs=true", llama_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  gboolean got = FALSE;
  gint64 t0;

  g_signal_connect (sink, "handoff", G_CALLBACK (on_first_buffer), &got);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  g_mutex_lock (&check_mutex);
  while (!got)
    g_cond_wait (&check_cond, &check_mutex);
  g_mutex_unlock (&check_mutex);
  /* the first token is out, the second is due 10 s after it: let the
   * element evaluate the first (well under a second) and go to sleep */
  g_usleep (G_USEC_PER_SEC);
  t0 = g_get_monotonic_time ();
  fail_unless_equals_int (gst_element_set_state (pipeline, GST_STATE_NULL),
      GST_STATE_CHANGE_SUCCESS);
  fail_unless (g_get_monotonic_time () - t0 < 5 * G_USEC_PER_SEC,
      "stopping took %" G_GINT64_FORMAT " us", g_get_monotonic_time () - t0);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

/* A stop string of three ASCII letters that two tokens of @ids spell
 * (its first occurrence in @text, the whole answer, straddles them), so
 * that the element must hold text back before it knows; starting at or
 * after byte @from of @text */
static gchar *
straddling_stop (const gchar * path, GArray * ids, const gchar * text,
    gsize from)
{
  NpuGguf *g = npu_gguf_open (path, NULL);
  NpuTokenizer *tok = npu_tokenizer_new_from_gguf (g, NULL);
  gchar *stop = NULL;
  gsize *ends = g_new0 (gsize, ids->len + 1);
  guint k;

  fail_unless (tok != NULL);
  /* ends[k]: bytes of text the first k tokens give, where it is a prefix */
  for (k = 1; k <= ids->len; k++) {
    gchar *t = npu_tokenizer_decode (tok, (const gint32 *) ids->data, k,
        NPU_DECODE_NONE, NULL);

    ends[k] = g_str_has_prefix (text, t) ? strlen (t) : 0;
    g_free (t);
  }
  for (k = 1; k < ids->len && !stop; k++) {
    gsize e = ends[k], i;
    const gchar *first;

    if (e < 1 || e < from + 1 || e + 2 > strlen (text))
      continue;
    for (i = e - 1; i < e + 2 && g_ascii_isalpha (text[i]); i++);
    if (i < e + 2)
      continue;
    stop = g_strndup (text + e - 1, 3);
    first = strstr (text, stop);
    if (first != text + e - 1 || (gsize) (first - text) < from) {
      g_free (stop);
      stop = NULL;
    }
  }
  g_free (ends);
  npu_tokenizer_free (tok);
  npu_gguf_free (g);
  return stop;
}

/* How many of @ids are generated until their text holds @stop */
static guint
tokens_until (const gchar * path, GArray * ids, const gchar * stop)
{
  NpuGguf *g = npu_gguf_open (path, NULL);
  NpuTokenizer *tok = npu_tokenizer_new_from_gguf (g, NULL);
  guint k;

  fail_unless (tok != NULL);
  for (k = 1; k <= ids->len; k++) {
    gchar *t = npu_tokenizer_decode (tok, (const gint32 *) ids->data, k,
        NPU_DECODE_NONE, NULL);
    gboolean found = strstr (t, stop) != NULL;

    g_free (t);
    if (found)
      break;
  }
  fail_unless (k <= ids->len);
  npu_tokenizer_free (tok);
  npu_gguf_free (g);
  return k;
}

/* stop="a|b": the answer ends before the first of them to appear (the
 * text streamed up to there and no further, where each stop string spans
 * two tokens), and the stats say "stop" */
GST_START_TEST (test_stop_strings)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  guint n_prompt = 0;
  gchar *ref = direct_answer_media_ids (qwen_path, "Hello, who are you?", 24,
      0, 0, NULL, 0, 0, ids, &n_prompt);
  gchar *early, *late, *want, *desc, *got;
  const gchar *cut;
  Collected c = { 0, };

  /* two stop strings taken from the reference answer, the later one
   * listed first */
  early = straddling_stop (qwen_path, ids, ref, 0);
  fail_unless (early != NULL, "no stop string in \"%s\"", ref);
  cut = strstr (ref, early);
  late = straddling_stop (qwen_path, ids, ref, cut - ref + 3);
  fail_unless (late != NULL, "no stop string after \"%s\" in \"%s\"",
      early, ref);
  fail_unless (strstr (ref, late) > cut);
  want = g_strndup (ref, cut - ref);
  fail_unless (strlen (want) < strlen (ref));

  desc = g_strdup_printf ("npullm name=llm model=%s "
      "prompt=\"Hello, who are you?\" max-tokens=24 stop=\"zzqx|%s|%s\" ! "
      "fakesink name=sink", qwen_path, late, early);
  c.stats = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_structure_free);
  got = run (desc, &c, NULL, NULL);
  fail_unless_equals_string (got, want);
  fail_unless_equals_string (check_stats (&c, n_prompt,
          tokens_until (qwen_path, ids, early)), "stop");
  g_ptr_array_unref (c.stats);
  g_free (got);
  g_free (desc);
  g_free (want);
  g_free (early);
  g_free (late);
  g_free (ref);
  g_array_unref (ids);
}

GST_END_TEST;

/* A prompt longer than the context: the error says how long, by the
 * reference's count */
GST_START_TEST (test_prompt_longer_than_context)
{
  guint n_prompt = 0;
  gchar *ref = direct_answer_media_ids (llama_path, "Tell me everything "
      "about the pictures you saw today, one by one, in order.", 1, 0, 0,
      NULL, 0, 0, NULL, &n_prompt);
  gchar *desc = g_strdup_printf ("npullm model=%s prompt=\"Tell me "
      "everything about the pictures you saw today, one by one, in order.\" "
      "context-length=16 ! fakesink name=sink", llama_path);
  gchar *want = g_strdup_printf ("Generating the answer failed: the prompt "
      "is %u tokens long, the context holds 16", n_prompt);
  Collected c = { 0, };
  gchar *msg, *got;

  fail_unless (n_prompt + 1 > 16);
  got = run (desc, &c, &msg, NULL);
  fail_unless_equals_string (msg, want);
  fail_unless_equals_string (got, "");
  g_free (msg);
  g_free (got);
  g_free (want);
  g_free (desc);
  g_free (ref);
}

GST_END_TEST;

/* One vision buffer through a harness whose fence ends as @fence_error
 * says; returns the bus's error message, if any, after the element's EOS
 * or error.  @n_out receives the buffers the element pushed, @stats (free
 * it) the last npullm-stats message's structure. */
static gchar *
push_fenced (GError * fence_error, guint * n_out, guint * n_answers,
    GstStructure ** stats)
{
  NpuGguf *g = npu_gguf_open (qwen_path, NULL);
  NpuLlmHParams hp;
  GstHarness *h;
  GstElement *llm;
  GstBus *bus = gst_bus_new ();
  GPtrArray *kept = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_structure_free);
  GstMessage *msg;
  NpuFence *fence = npu_fence_new ();
  GBytes *rows;
  GstBuffer *buf;
  gchar *message = NULL;
  gboolean eos = FALSE;

  fail_unless (npu_llm_hparams_from_gguf (g, &hp, NULL));
  npu_gguf_free (g);
  llm = gst_element_factory_make ("npullm", NULL);
  g_object_set (llm, "model", qwen_path, "max-tokens", 4, NULL);
  gst_element_set_bus (llm, bus);
  gst_bus_set_sync_handler (bus, keep_stats, kept, NULL);
  h = gst_harness_new_with_element (llm, "vision", "src");
  gst_harness_set_src_caps_str (h, "other/tensors,format=static,"
      "num_tensors=1,types=float32");
  rows = make_rows (2, hp.n_embd, 1);
  buf = rows_buffer (rows, 0);
  gst_buffer_add_npu_fence_meta (buf, fence);
  fail_unless_equals_int (gst_harness_push (h, buf), GST_FLOW_OK);
  npu_fence_signal_error (fence, fence_error);
  gst_harness_push_event (h, gst_event_new_eos ());
  *n_out = 0;
  /* the element's EOS, or its error */
  while (!eos) {
    GstEvent *ev;

    msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
    if (msg) {
      GError *err = NULL;

      gst_message_parse_error (msg, &err, NULL);
      message = g_strdup (err->message);
      g_error_free (err);
      gst_message_unref (msg);
      break;
    }
    while ((buf = gst_harness_try_pull (h))) {
      (*n_out)++;
      gst_buffer_unref (buf);
    }
    ev = gst_harness_try_pull_event (h);
    if (ev) {
      eos = GST_EVENT_TYPE (ev) == GST_EVENT_EOS;
      gst_event_unref (ev);
    } else {
      g_usleep (1000);
    }
  }
  while ((buf = gst_harness_try_pull (h))) {
    (*n_out)++;
    gst_buffer_unref (buf);
  }
  g_object_get (llm, "n-answers", n_answers, NULL);
  gst_harness_teardown (h);
  /* the last npullm-stats, the shutdown's included (the error pops above
   * drop the other messages: kept as they were posted) */
  fail_unless (kept->len > 0, "no npullm-stats message");
  *stats = gst_structure_copy (g_ptr_array_index (kept, kept->len - 1));
  g_ptr_array_unref (kept);
  gst_bus_set_sync_handler (bus, NULL, NULL, NULL);
  gst_element_set_bus (llm, NULL);
  gst_object_unref (bus);
  gst_object_unref (llm);
  npu_fence_unref (fence);
  g_bytes_unref (rows);
  return message;
}

/* Media whose producer cancelled it (npuvisiontok policy=drop-oldest):
 * the answer is skipped, no text, no error, and the stream ends */
GST_START_TEST (test_cancelled_media_skipped)
{
  guint n_out, n_answers;
  GstStructure *stats;
  gchar *msg = push_fenced (g_error_new (NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_CANCELLED, "dropped: a newer frame came"), &n_out,
      &n_answers, &stats);

  fail_unless (msg == NULL, "%s", msg);
  fail_unless_equals_int (n_out, 0);
  fail_unless_equals_int (n_answers, 0);
  /* reported at the end of the stream, as dropped by its producer */
  fail_unless_equals_string (gst_structure_get_string (stats, "end"), "eos");
  check_media_counts (stats, 1, 0, 0, 1, 0, 0);
  gst_structure_free (stats);
}

GST_END_TEST;

/* Media whose producer's task failed: an element error with the
 * producer's reason, no answer */
GST_START_TEST (test_producer_error)
{
  guint n_out, n_answers;
  GstStructure *stats;
  gchar *msg = push_fenced (g_error_new (NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_FAILED, "the encoder ran out of scratch"), &n_out,
      &n_answers, &stats);

  fail_unless (msg != NULL, "no error");
  fail_unless (strstr (msg, "the tokens' producer failed") &&
      strstr (msg, "the encoder ran out of scratch"), "%s", msg);
  fail_unless_equals_int (n_out, 0);
  fail_unless_equals_int (n_answers, 0);
  /* reported when the element shut down, as failed */
  fail_unless_equals_string (gst_structure_get_string (stats, "end"),
      "shutdown");
  check_media_counts (stats, 1, 0, 0, 0, 0, 1);
  gst_structure_free (stats);
  g_free (msg);
}

GST_END_TEST;

/* The ids of the prompt the model must be fed for @prompt alone (no
 * media), as direct_answer_media_ids() feeds them */
static GArray *
prompt_ids (const gchar * path, const gchar * prompt)
{
  NpuGguf *g = npu_gguf_open (path, NULL);
  NpuTokenizer *tok = npu_tokenizer_new_from_gguf (g, NULL);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  gchar *before, *after, *whole;
  gboolean bos;
  gint32 *t, b = 1;
  gsize n;

  fail_unless (tok != NULL);
  prompt_text (path, prompt, &before, &after, &bos);
  whole = g_strconcat (before, after, NULL);
  if (bos)
    g_array_append_val (ids, b);
  t = tokens_of (tok, whole, &n);
  g_array_append_vals (ids, t, n);
  g_free (t);
  g_free (whole);
  g_free (before);
  g_free (after);
  npu_tokenizer_free (tok);
  npu_gguf_free (g);
  return ids;
}

/* KV cache reuse across answers (docs/npullm.md, "Prompt prefix reuse"):
 * prompts on the text pad, one after the other; each answer is the one a
 * fresh context gives (the reference), and npullm-stats' reused-tokens is
 * the longest prefix of token ids the prompt shares with the one before,
 * less one when it is the whole prompt, counted here on the reference's
 * ids */
GST_START_TEST (test_kv_reused_across_answers)
{
  const gchar *prompts[] = { "What is on the table?",
    "What is on the floor?", "What is on the floor?", "Hello there"
  };
  const guint n = G_N_ELEMENTS (prompts);
  gchar *desc = g_strdup_printf ("appsrc name=src format=time "
      "caps=text/x-raw,format=utf8 ! llm.text npullm name=llm model=%s "
      "max-tokens=6 ! fakesink name=sink", qwen_path);
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstElement *sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  Collected c = { g_string_new (NULL), 0, 0, NULL };
  GString *want = g_string_new (NULL);
  GPtrArray *stats = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_structure_free);
  GArray *prev = NULL;
  GstMessage *msg;
  GstFlowReturn flow;
  guint i, n_reused_total = 0;

  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), &c);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (i = 0; i < n; i++) {
    GstBuffer *buf = gst_buffer_new_memdup (prompts[i], strlen (prompts[i]));
    gchar *w = direct_answer (qwen_path, prompts[i], 6, 0, 0, NULL, 0);

    GST_BUFFER_PTS (buf) = i * GST_SECOND;
    g_signal_emit_by_name (src, "push-buffer", buf, &flow);
    gst_buffer_unref (buf);
    g_string_append (want, w);
    g_free (w);
  }
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  for (;;) {
    msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
        60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR |
        GST_MESSAGE_ELEMENT);
    fail_unless (msg != NULL);
    fail_unless (GST_MESSAGE_TYPE (msg) != GST_MESSAGE_ERROR);
    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS) {
      gst_message_unref (msg);
      break;
    }
    if (gst_message_has_name (msg, "npullm-stats"))
      g_ptr_array_add (stats,
          gst_structure_copy (gst_message_get_structure (msg)));
    gst_message_unref (msg);
  }
  /* each answer is a fresh context's */
  fail_unless_equals_string (c.text->str, want->str);
  fail_unless_equals_int (stats->len, n);
  for (i = 0; i < n; i++) {
    GArray *ids = prompt_ids (qwen_path, prompts[i]);
    const GstStructure *st = g_ptr_array_index (stats, i);
    guint reused = G_MAXUINT, n_prompt = 0, expected = 0;

    fail_unless (gst_structure_get_uint (st, "reused-tokens", &reused));
    fail_unless (gst_structure_get_uint (st, "prompt-tokens", &n_prompt));
    fail_unless_equals_int (n_prompt, ids->len);
    if (prev) {
      while (expected < MIN (prev->len, ids->len) &&
          g_array_index (prev, gint32, expected) == g_array_index (ids,
              gint32, expected))
        expected++;
      if (expected == ids->len)
        expected--;
      g_array_unref (prev);
    }
    fail_unless_equals_int (reused, expected);
    n_reused_total += reused;
    prev = ids;
  }
  /* the shared system turn at least, and the whole repeated prompt */
  fail_unless (n_reused_total > 20, "%u", n_reused_total);
  g_array_unref (prev);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  g_ptr_array_unref (stats);
  g_string_free (want, TRUE);
  g_string_free (c.text, TRUE);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

static Suite *
npullm_suite (void)
{
  Suite *s = suite_create ("npullm");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_set_timeout (tc, 120);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_text_only_matches_core);
  tcase_add_test (tc, test_prompt_prefix_reused);
  tcase_add_test (tc, test_weights_pad_same_text);
  tcase_add_test (tc, test_gpt_oss_both_paths);
  tcase_add_test (tc, test_harmony_channels);
  tcase_add_test (tc, test_seed_and_output_modes);
  tcase_add_test (tc, test_text_pad_answers_each);
  tcase_add_test (tc, test_keep_context);
  tcase_add_test (tc, test_vision_tokens_spliced);
  tcase_add_test (tc, test_media_from_two_pads_in_pts_order);
  tcase_add_test (tc, test_prompt_changed_while_playing);
  tcase_add_test (tc, test_fence_never_signals);
  tcase_add_test (tc, test_media_cancelled_mid_encode_skipped);
  tcase_add_test (tc, test_errors);
  tcase_add_test (tc, test_stop_while_generating);
  tcase_add_test (tc, test_caption_pipeline);
  tcase_add_test (tc, test_captions_drawn);
  tcase_add_test (tc, test_flush_while_generating);
  tcase_add_test (tc, test_media_counts_after_flush);
  tcase_add_test (tc, test_stats_message);
  tcase_add_test (tc, test_stats_bytes);
  tcase_add_test (tc, test_paced_decode);
  tcase_add_test (tc, test_paced_stop_in_sleep);
  tcase_add_test (tc, test_stop_strings);
  tcase_add_test (tc, test_prompt_longer_than_context);
  tcase_add_test (tc, test_cancelled_media_skipped);
  tcase_add_test (tc, test_producer_error);
  tcase_add_test (tc, test_kv_reused_across_answers);
  return s;
}

GST_CHECK_MAIN (npullm);
