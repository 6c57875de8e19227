/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: media rows spliced exactly where the chat template puts them
 *
 * A bug that keeps every number finite but puts audio or image rows one
 * place off (before or after the position the template gives), drops or
 * doubles one, or leaves them outside their markers still gives fluent
 * answers: a trained model hardly cares, and a test that checks the tokens
 * around the media cannot see it.  Here the answering session runs a
 * prompt with media rows of known, distinct values on a small generated
 * model, and what the model computed (the logits after the prompt, and how
 * many positions it took) is compared with a double-precision evaluation
 * (tests/reference/npurefllm.c) of the EXPECTED sequence: the chat
 * template's tokens written out here as literal ids, with the rows at
 * exactly their place.  The ids are literal because the vocabulary is the
 * test's own: byte b is token b, then "\n\n", the ChatML and the Idefics3
 * image tokens (so that an image's rows get their wrapping) and Llama 2's
 * "<s>".
 *
 * Cases: audio alone, an image alone, an image and audio in one prompt,
 * audio with no template (plain completion: the system prompt, "\n\n",
 * the rows, the text), audio with the Llama 2 template (its BOS written in
 * the text), and keep-context's second turn (an image after a first turn
 * with audio).  For each, every plausible mistake (the rows of each medium
 * one place early or late, its first or last row dropped, its last row
 * doubled; an image's opening or end markers skipped, its rows before or
 * after its markers, the image with its markers one place off; all the
 * media of a prompt one place off together) is evaluated too: each must
 * be at least MARGIN tolerances from the expected logits, so that the
 * comparison can fail, and a failure names the mistakes the session's
 * logits match.  Seen to fail so, naming the mistake, with npullmsession.c
 * broken on purpose: the media one place early, one place late, the last
 * row dropped, the last row doubled, the end marker skipped, the rows
 * before the opening markers.
 *
 * Scalar kernels and an F32 cache: only F32 rounding of activations
 * separates the session from the reference: measured 1.2e-7 .. 1.6e-7 of
 * the logit range, allowed 1e-5.  The nearest mistake is 5.8e-3 away (an
 * audio row one place early in the first of two turns), the others 1.2e-2
 * and more; each must be at least 1e-3 away.
 */
#include <core/models/npullmsession.h>
#include <core/models/npullmsession-testing.h>
#include <core/cpu/npumatmul.h>
#include <core/formats/npuggufwriter.h>
#include "tests/tools/npumodelgen.h"
#include "tests/npucompare.h"
#include "tests/reference/npurefllm.h"

#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#define TOL 1e-5
#define MARGIN 100.0
#define N_CTX 128
#define N_AUDIO 6
#define N_IMAGE 4
#define SYSTEM "Listen."

/* The test's vocabulary: ids 0..255 are the bytes (token b is byte b, in
 * GPT-2's byte-to-character map), then these */
enum
{
  NL2 = 256,                    /* "\n\n", the one merge */
  ENDOFTEXT,
  IM_START,
  IM_END,
  AROUND,                       /* <fake_token_around_image> */
  GLOBAL,                       /* <global-img> */
  LLAMA2_BOS,                   /* <s>, the Llama 2 template's BOS text */
  N_USED,
  /* unused tokens after them, as the model generator wants 360 at least */
  N_VOCAB = 360
};

static const gchar *const specials[] = {
  "\xc4\x8a\xc4\x8a", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
  "<fake_token_around_image>", "<global-img>", "<s>"
};

/* ChatML with no default system turn */
static const gchar chatml_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + "
    "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";

/* ------------------------------------------------------------------------
 * The model: a tiny generated llama with the test's tokenizer
 */

typedef struct
{
  gchar *dir, *path;
  NpuGguf *gguf;
  NpuRefLlm ref;
  NpuQueue *queue;
  gfloat *audio, *image;        /* N_AUDIO and N_IMAGE rows of dim */
  const gchar *native_isa;
} Fixture;

static void
write_tokenizer (const gchar * path)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  const gchar *tokens[N_VOCAB + 1];
  const gchar *merges[] = { "\xc4\x8a \xc4\x8a", NULL };
  gchar *bytes[256], *unused[N_VOCAB - N_USED];
  gint32 types[N_VOCAB];
  GError *error = NULL;
  guint b, n = 0;

  for (b = 0; b < 256; b++) {
    gboolean printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172)
        || b >= 174;
    gunichar cp = printable ? b : 256 + n++;

    bytes[b] = g_ucs4_to_utf8 (&cp, 1, NULL, NULL, NULL);
    tokens[b] = bytes[b];
    types[b] = 1;               /* normal */
  }
  for (b = NL2; b < N_USED; b++) {
    tokens[b] = specials[b - NL2];
    types[b] = b == NL2 ? 1 : 3;        /* control */
  }
  for (b = N_USED; b < N_VOCAB; b++) {
    unused[b - N_USED] = g_strdup_printf ("<unused%u>", b - N_USED);
    tokens[b] = unused[b - N_USED];
    types[b] = 5;               /* unused */
  }
  tokens[N_VOCAB] = NULL;
  g_assert_true (npu_gguf_writer_add_string (w, "tokenizer.ggml.model",
          "gpt2", -1, &error)
      && npu_gguf_writer_add_string (w, "tokenizer.ggml.pre", "qwen2", -1,
          &error)
      && npu_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens",
          tokens, -1, &error)
      && npu_gguf_writer_add_array (w, "tokenizer.ggml.token_type",
          NPU_GGUF_TYPE_INT32, types, N_VOCAB, &error)
      && npu_gguf_writer_add_string_array (w, "tokenizer.ggml.merges",
          merges, -1, &error)
      && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.eos_token_id", IM_END,
          &error)
      && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.bos_token_id",
          ENDOFTEXT, &error)
      && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.padding_token_id",
          ENDOFTEXT, &error)
      && npu_gguf_writer_add_bool (w, "tokenizer.ggml.add_bos_token", FALSE,
          &error)
      && npu_gguf_writer_add_string (w, "tokenizer.chat_template",
          chatml_template, -1, &error)
      && npu_gguf_writer_write_file (w, path, &error));
  g_assert_no_error (error);
  npu_gguf_writer_free (w);
  for (b = 0; b < 256; b++)
    g_free (bytes[b]);
  for (b = N_USED; b < N_VOCAB; b++)
    g_free (unused[b - N_USED]);
}

/* Rows of distinct, known values: row r of medium m */
static gfloat *
make_rows (guint n, guint dim, guint m)
{
  gfloat *rows = g_new (gfloat, n * dim);
  guint r, j;

  for (r = 0; r < n; r++)
    for (j = 0; j < dim; j++)
      rows[r * dim + j] = sin (0.7 * (j + 1) * (r + 1) + 1.9 * m) +
          0.25 * cos (0.13 * j * (m + 2));
  return rows;
}

static void
fixture_open (Fixture * f)
{
  NpuTextModelParams p;
  GError *error = NULL;
  gchar *tok_path;

  f->native_isa = npu_matmul_get_isa ();
  g_assert_true (npu_matmul_set_isa ("scalar"));
  f->dir = g_dir_make_tmp ("llmsplice-XXXXXX", &error);
  g_assert_no_error (error);
  tok_path = g_build_filename (f->dir, "tokenizer.gguf", NULL);
  f->path = g_build_filename (f->dir, "llama.gguf", NULL);
  write_tokenizer (tok_path);
  g_assert_true (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_LLAMA,
          "tiny", &error));
  p.wtype = NPU_GGML_TYPE_MXFP4;
  p.tied = FALSE;
  p.seed = 11;
  npu_model_gen_write_text_with_tokenizer (&p, tok_path, f->path, NULL, &error);
  g_assert_no_error (error);
  g_unlink (tok_path);
  g_free (tok_path);
  f->gguf = npu_gguf_open (f->path, &error);
  g_assert_no_error (error);
  npu_ref_llm_load (&f->ref, f->gguf, &p);
  g_assert_cmpuint (f->ref.vocab, ==, N_VOCAB);
  f->audio = make_rows (N_AUDIO, f->ref.dim, 0);
  f->image = make_rows (N_IMAGE, f->ref.dim, 1);
  f->queue = npu_queue_new (npu_device_get_cpu (0), "splice");
  npu_device_unref (npu_queue_get_device (f->queue));
}

static void
fixture_close (Fixture * f)
{
  npu_queue_free (f->queue);
  npu_ref_llm_clear (&f->ref);
  npu_gguf_free (f->gguf);
  g_unlink (f->path);
  g_rmdir (f->dir);
  g_free (f->path);
  g_free (f->dir);
  g_free (f->audio);
  g_free (f->image);
  g_assert_true (npu_matmul_set_isa (f->native_isa));
}

/* ------------------------------------------------------------------------
 * Sequences: token ids and media rows, in order
 */

typedef struct
{
  gint32 token;                 /* -1 for a media row */
  const gfloat *row;
  const gchar *media;           /* "audio", "image" */
  guint index;                  /* of the row in its medium */
} Item;

static GArray *
seq_new (void)
{
  return g_array_new (FALSE, FALSE, sizeof (Item));
}

static void
seq_token (GArray * seq, gint32 token)
{
  Item it = { token, NULL, NULL, 0 };

  g_array_append_val (seq, it);
}

/* ASCII text: byte b is token b in this vocabulary */
static void
seq_text (GArray * seq, const gchar * text)
{
  for (; *text; text++)
    seq_token (seq, (guint8) * text);
}

static void
seq_rows (GArray * seq, const gchar * media, const gfloat * rows, guint n,
    guint dim)
{
  guint i;

  for (i = 0; i < n; i++) {
    Item it = { -1, rows + (gsize) i * dim, media, i };

    g_array_append_val (seq, it);
  }
}

/* "<|im_start|>system\nListen.<|im_end|>\n<|im_start|>user\n" */
static void
seq_chatml_head (GArray * seq)
{
  seq_token (seq, IM_START);
  seq_text (seq, "system\n" SYSTEM);
  seq_token (seq, IM_END);
  seq_text (seq, "\n");
  seq_token (seq, IM_START);
  seq_text (seq, "user\n");
}

/* "<user><|im_end|>\n<|im_start|>assistant\n" */
static void
seq_chatml_tail (GArray * seq, const gchar * user)
{
  seq_text (seq, user);
  seq_token (seq, IM_END);
  seq_text (seq, "\n");
  seq_token (seq, IM_START);
  seq_text (seq, "assistant\n");
}

/* Idefics3's overview image: "\n\n<fake_token_around_image><global-img>",
 * the rows, "<fake_token_around_image>" */
static void
seq_image (Fixture * f, GArray * seq)
{
  seq_token (seq, NL2);
  seq_token (seq, AROUND);
  seq_token (seq, GLOBAL);
  seq_rows (seq, "image", f->image, N_IMAGE, f->ref.dim);
  seq_token (seq, AROUND);
}

static void
seq_audio (Fixture * f, GArray * seq)
{
  seq_rows (seq, "audio", f->audio, N_AUDIO, f->ref.dim);
}

static gboolean
items_equal (const Item * a, const Item * b)
{
  return a->token == b->token && a->row == b->row;
}

static gboolean
seq_equal (GArray * a, GArray * b)
{
  guint i;

  if (a->len != b->len)
    return FALSE;
  for (i = 0; i < a->len; i++)
    if (!items_equal (&g_array_index (a, Item, i), &g_array_index (b, Item, i)))
      return FALSE;
  return TRUE;
}

/* Positions @from..@to of @seq as text: bytes as characters, the special
 * tokens by name, rows as [audio 0] */
static gchar *
seq_describe (GArray * seq, guint from, guint to)
{
  GString *s = g_string_new (NULL);
  guint i;

  for (i = from; i < MIN (to, seq->len); i++) {
    const Item *it = &g_array_index (seq, Item, i);

    if (it->token < 0)
      g_string_append_printf (s, "[%s %u]", it->media, it->index);
    else if (it->token == '\n')
      g_string_append (s, "\\n");
    else if (it->token == NL2)
      g_string_append (s, "\\n\\n");
    else if (it->token >= NL2)
      g_string_append (s, specials[it->token - NL2]);
    else
      g_string_append_c (s, it->token);
  }
  return g_string_free (s, FALSE);
}

/* The reference's logits after @seq, from an empty cache of the
 * session's size */
static double *
ref_eval (Fixture * f, GArray * seq)
{
  NpuRefLlmRun run;
  double *logits = g_new (double, f->ref.vocab);
  double *row = g_new (double, f->ref.dim);
  guint i, j;

  npu_ref_llm_run_init (&run, &f->ref, N_CTX, 4, seq->len);
  for (i = 0; i < seq->len; i++) {
    const Item *it = &g_array_index (seq, Item, i);

    if (it->token >= 0) {
      npu_ref_llm_step_token (&run, it->token, logits);
    } else {
      for (j = 0; j < f->ref.dim; j++)
        row[j] = it->row[j];
      npu_ref_llm_step (&run, row, logits);
    }
  }
  npu_ref_llm_run_clear (&run);
  g_free (row);
  return logits;
}

/* max |a - ref| / range (ref), NaN-safe (@a rounded to float, 6e-8
 * relative: nothing beside the 1e-3 this measures against) */
static double
rel_diff_d (const double *a, const double *ref, guint n)
{
  gfloat *af = g_new (gfloat, n);
  double d;
  guint i;

  for (i = 0; i < n; i++)
    af[i] = a[i];
  d = npu_rel_diff (af, ref, n);
  g_free (af);
  return d;
}

/* ------------------------------------------------------------------------
 * The mistakes a splice can make
 */

typedef struct
{
  gchar *name;
  GArray *seq;
} Mistake;

static void
mistake_free (gpointer data)
{
  Mistake *m = data;

  g_free (m->name);
  g_array_unref (m->seq);
  g_free (m);
}

/* Moves @n items at @from of @seq so that they start at @to (an index in
 * the sequence without them) */
static void
seq_move (GArray * seq, guint from, guint n, guint to)
{
  GArray *moved = seq_new ();

  g_array_append_vals (moved, &g_array_index (seq, Item, from), n);
  g_array_remove_range (seq, from, n);
  g_array_insert_vals (seq, to, moved->data, n);
  g_array_unref (moved);
}

/* Adds @seq as the mistake @name, or the name to an equal mistake's */
static void
add_mistake (GPtrArray * list, GArray * seq, const gchar * name,
    const gchar * media)
{
  gchar *full = g_strdup_printf (name, media);
  guint i;

  for (i = 0; i < list->len; i++) {
    Mistake *m = g_ptr_array_index (list, i);

    if (seq_equal (m->seq, seq)) {
      gchar *both = g_strconcat (m->name, " (= ", full, ")", NULL);

      g_free (m->name);
      m->name = both;
      g_free (full);
      g_array_unref (seq);
      return;
    }
  }
  {
    Mistake *m = g_new0 (Mistake, 1);

    m->name = full;
    m->seq = seq;
    g_ptr_array_add (list, m);
  }
}

static GArray *
seq_copy (GArray * seq)
{
  GArray *c = seq_new ();

  g_array_append_vals (c, seq->data, seq->len);
  return c;
}

/* The span of @n items at @from one place early and one place late */
static void
block_mistakes (GArray * want, guint from, guint n, const gchar * name,
    const gchar * media, GPtrArray * list)
{
  gchar *early = g_strconcat (name, " one place early", NULL);
  gchar *late = g_strconcat (name, " one place late", NULL);
  GArray *s;

  if (from > 0) {
    s = seq_copy (want);
    seq_move (s, from, n, from - 1);
    add_mistake (list, s, early, media);
  }
  if (from + n < want->len) {
    s = seq_copy (want);
    seq_move (s, from, n, from + 1);
    add_mistake (list, s, late, media);
  }
  g_free (early);
  g_free (late);
}

/* The mistakes of the rows at [@a, @b) of @want, one medium; returns
 * the span of the medium with its markers */
static void
medium_mistakes (GArray * want, guint a, guint b, const gchar * media,
    GPtrArray * list, guint span[2])
{
  guint n = b - a;
  GArray *s;
  gboolean wrapped = a >= 3 && b < want->len &&
      g_array_index (want, Item, a - 3).token == NL2 &&
      g_array_index (want, Item, a - 2).token == AROUND &&
      g_array_index (want, Item, a - 1).token == GLOBAL &&
      g_array_index (want, Item, b).token == AROUND;

  span[0] = wrapped ? a - 3 : a;
  span[1] = wrapped ? b + 1 : b;
  block_mistakes (want, a, n, "the %s rows", media, list);
  s = seq_copy (want);
  g_array_remove_index (s, b - 1);
  add_mistake (list, s, "the last %s row dropped", media);
  s = seq_copy (want);
  g_array_remove_index (s, a);
  add_mistake (list, s, "the first %s row dropped", media);
  s = seq_copy (want);
  g_array_insert_vals (s, b, &g_array_index (want, Item, b - 1), 1);
  add_mistake (list, s, "the last %s row doubled", media);
  if (!wrapped)
    return;
  s = seq_copy (want);
  g_array_remove_index (s, b);
  add_mistake (list, s, "the %s end marker skipped", media);
  s = seq_copy (want);
  g_array_remove_range (s, a - 3, 3);
  add_mistake (list, s, "the %s opening markers skipped", media);
  s = seq_copy (want);
  seq_move (s, a, n, a - 3);
  add_mistake (list, s, "the %s rows before their markers", media);
  s = seq_copy (want);
  seq_move (s, a, n, a + 1);
  add_mistake (list, s, "the %s rows after their markers", media);
  block_mistakes (want, a - 3, n + 4, "the %s with its markers", media, list);
}

/* Every medium's mistakes, and, where media follow one another, all of
 * them one place off together */
static GPtrArray *
make_mistakes (GArray * want)
{
  GPtrArray *list = g_ptr_array_new_with_free_func (mistake_free);
  guint a = 0, group[2] = { 0, 0 }, n_in_group = 0;

  while (a < want->len) {
    const Item *first = &g_array_index (want, Item, a);
    guint b = a + 1, span[2];

    if (first->token >= 0) {
      a++;
      continue;
    }
    while (b < want->len && g_array_index (want, Item, b).token < 0 &&
        !g_strcmp0 (g_array_index (want, Item, b).media, first->media))
      b++;
    medium_mistakes (want, a, b, first->media, list, span);
    if (n_in_group && span[0] == group[1]) {
      group[1] = span[1];
      n_in_group++;
    } else {
      if (n_in_group > 1)
        block_mistakes (want, group[0], group[1] - group[0], "all the %s",
            "media", list);
      group[0] = span[0];
      group[1] = span[1];
      n_in_group = 1;
    }
    a = b;
  }
  if (n_in_group > 1)
    block_mistakes (want, group[0], group[1] - group[0], "all the %s",
        "media", list);
  return list;
}

/* ------------------------------------------------------------------------
 * The check
 */

/* Each mistake must be far from the expected sequence in the reference
 * itself, or the comparison could not catch it */
static void
check_mistakes_visible (Fixture * f, const gchar * what, GPtrArray * list,
    const double *want_logits)
{
  double nearest = INFINITY;
  guint i;

  for (i = 0; i < list->len; i++) {
    Mistake *m = g_ptr_array_index (list, i);
    double *l = ref_eval (f, m->seq);
    double d = rel_diff_d (l, want_logits, f->ref.vocab);

    if (!(d >= MARGIN * TOL))
      g_error ("%s: the reference cannot tell %s from the expected sequence "
          "(%.3g of the logit range, below %g)", what, m->name, d,
          MARGIN * TOL);
    nearest = MIN (nearest, d);
    g_free (l);
  }
  g_test_message ("%s: %u mistakes, the nearest %.3g of the logit range "
      "from the expected sequence (%.0f tolerances)", what, list->len,
      nearest, nearest / TOL);
}

/* Fails with what differed: the positions, the logits, and which of the
 * mistakes the session's logits match */
static void
fail_splice (Fixture * f, const gchar * what, GArray * want,
    GPtrArray * list, const float *logits, guint64 n_past, double err)
{
  GString *msg = g_string_new (NULL);
  GString *matches = g_string_new (NULL);
  const gchar *nearest = NULL;
  double nearest_d = INFINITY;
  gchar *text = seq_describe (want, 0, want->len);
  guint i;

  for (i = 0; i < list->len; i++) {
    Mistake *m = g_ptr_array_index (list, i);
    double *l = ref_eval (f, m->seq);
    double d = npu_rel_diff (logits, l, f->ref.vocab);

    if (npu_within (d, TOL))
      g_string_append_printf (matches, "%s%s (%.3g)", matches->len ? "; " :
          "", m->name, d);
    if (d < nearest_d) {
      nearest_d = d;
      nearest = m->name;
    }
    g_free (l);
  }
  g_string_printf (msg, "%s: media rows not where the template puts them: "
      "the session evaluated %" G_GUINT64_FORMAT " positions, the expected "
      "sequence has %u (%s); its logits after the prompt are %.3g of their "
      "range from the expected sequence's (tolerance %g); ", what, n_past,
      want->len, text, err, TOL);
  if (matches->len)
    g_string_append_printf (msg, "they match: %s", matches->str);
  else
    g_string_append_printf (msg, "they match none of the %u mistakes tried "
        "(nearest: %s, %.3g)", list->len, nearest ? nearest : "none",
        nearest_d);
  g_free (text);
  g_string_free (matches, TRUE);
  g_assertion_message (G_LOG_DOMAIN, __FILE__, __LINE__, G_STRFUNC, msg->str);
  g_string_free (msg, TRUE);
}

/* The session's logits after its last prompt (an answer of max-tokens 1)
 * against the reference's after @want */
static void
check_prompt (Fixture * f, NpuLlmSession * s, const gchar * what, GArray * want)
{
  NpuLlmContext *ctx = npu_llm_session_get_context (s);
  const float *logits = npu_llm_get_logits (ctx);
  guint64 n_past = npu_llm_context_get_n_past (ctx);
  double *want_logits = ref_eval (f, want);
  double err = npu_rel_diff (logits, want_logits, f->ref.vocab);
  GPtrArray *list = make_mistakes (want);

  g_test_message ("%s: %" G_GUINT64_FORMAT " positions (expected %u), "
      "logits %.3g of their range from the reference", what, n_past,
      want->len, err);
  if (!npu_within (err, TOL) || n_past != want->len)
    fail_splice (f, what, want, list, logits, n_past, err);
  /* valgrind runs the comparison, not the reference's self-check */
  if (!g_getenv ("NPU_UNDER_VALGRIND"))
    check_mistakes_visible (f, what, list, want_logits);
  g_ptr_array_unref (list);
  g_free (want_logits);
}

static NpuLlmSession *
new_session (Fixture * f, gboolean keep_context, const gchar * chat_template)
{
  NpuLlmSessionParams p;
  NpuLlmSession *s;
  NpuLlmModel *m;
  GError *error = NULL;

  m = npu_llm_model_new_from_file (f->path, NPU_LLM_LOAD_IN_PLACE, &error);
  g_assert_no_error (error);
  npu_llm_session_params_init (&p);
  p.n_ctx = N_CTX;
  p.kv_type = NPU_KV_F32;
  /* the logits after the prompt stay in the context: the token drawn
   * from them is not evaluated */
  p.max_tokens = 1;
  p.keep_context = keep_context;
  p.system_prompt = g_strdup (SYSTEM);
  p.chat_template = g_strdup (chat_template);
  p.sampler.temperature = 0;
  s = npu_llm_session_new (f->gguf, m, &p, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (npu_llm_session_get_template_name (s), ==,
      chat_template ? chat_template : "chatml");
  npu_llm_session_params_clear (&p);
  return s;
}

static gboolean
ignore_text (const gchar * text, gsize len, gpointer user_data)
{
  return TRUE;
}

static void
answer (Fixture * f, NpuLlmSession * s, const gchar * user,
    const NpuLlmMedia * media, guint n_media)
{
  NpuLlmAnswerStats st;
  GError *error = NULL;

  g_assert_true (npu_llm_session_answer (s, f->queue, user, media, n_media,
          ignore_text, NULL, &st, &error));
  g_assert_no_error (error);
  g_assert_true (st.hit_max || st.hit_eog);
}

/* ------------------------------------------------------------------------
 * The cases
 */

static void
set_media (NpuLlmMedia * m, const gfloat * rows, guint n_rows, gboolean image)
{
  m->rows = rows;
  m->n_rows = n_rows;
  m->image = image;
}

typedef enum
{
  CASE_AUDIO,
  CASE_IMAGE,
  CASE_IMAGE_AND_AUDIO,
  CASE_COMPLETION,              /* chat-template=none, audio */
  CASE_LLAMA2,                  /* chat-template=llama2 (BOS text), audio */
} Case;

static void
test_one_prompt (gconstpointer data)
{
  Case c = GPOINTER_TO_INT (data);
  Fixture f;
  NpuLlmSession *s;
  NpuLlmMedia media[2];
  GArray *want = seq_new ();
  const gchar *user, *what;
  guint n_media = 0;

  fixture_open (&f);
  if (c == CASE_COMPLETION) {
    /* plain completion: the system prompt, a blank line, the media, the
     * user's text */
    s = new_session (&f, FALSE, "none");
    set_media (&media[0], f.audio, N_AUDIO, FALSE);
    seq_text (want, SYSTEM);
    seq_token (want, NL2);
    seq_audio (&f, want);
    seq_text (want, "What do you hear?");
    answer (&f, s, "What do you hear?", media, 1);
    check_prompt (&f, s, "audio, no template", want);
    goto done;
  }
  if (c == CASE_LLAMA2) {
    /* the BOS in the text, the system prompt inside the user's turn, the
     * media after it; ">>\n\n" is one piece, its newlines one token */
    s = new_session (&f, FALSE, "llama2");
    set_media (&media[0], f.audio, N_AUDIO, FALSE);
    seq_token (want, LLAMA2_BOS);
    seq_text (want, "[INST] <<SYS>>\n" SYSTEM "\n<</SYS>>");
    seq_token (want, NL2);
    seq_audio (&f, want);
    seq_text (want, "What do you hear? [/INST]");
    answer (&f, s, "What do you hear?", media, 1);
    check_prompt (&f, s, "audio, llama2", want);
    goto done;
  }
  s = new_session (&f, FALSE, NULL);
  seq_chatml_head (want);
  if (c != CASE_AUDIO) {
    set_media (&media[n_media++], f.image, N_IMAGE, TRUE);
    seq_image (&f, want);
  }
  if (c != CASE_IMAGE) {
    set_media (&media[n_media++], f.audio, N_AUDIO, FALSE);
    seq_audio (&f, want);
  }
  user = c == CASE_AUDIO ? "What do you hear?" : c == CASE_IMAGE ?
      "What do you see?" : "What do you see and hear?";
  what = c == CASE_AUDIO ? "audio" : c == CASE_IMAGE ? "image" :
      "image and audio";
  seq_chatml_tail (want, user);
  answer (&f, s, user, media, n_media);
  check_prompt (&f, s, what, want);

done:
  g_array_unref (want);
  npu_llm_session_free (s);
  fixture_close (&f);
}

/* keep-context: the first turn with audio, the second with an image; the
 * second turn's prompt goes on from the first one's and its drawn token */
static void
test_second_turn (void)
{
  Fixture f;
  NpuLlmSession *s;
  NpuLlmMedia audio, image;
  GArray *want = seq_new ();
  const float *logits;
  gint32 t1 = 0;
  guint i;

  fixture_open (&f);
  s = new_session (&f, TRUE, NULL);
  set_media (&audio, f.audio, N_AUDIO, FALSE);
  set_media (&image, f.image, N_IMAGE, TRUE);
  seq_chatml_head (want);
  seq_audio (&f, want);
  seq_chatml_tail (want, "What do you hear?");
  answer (&f, s, "What do you hear?", &audio, 1);
  check_prompt (&f, s, "first turn", want);

  /* the token greedy decoding drew (max-tokens 1: not evaluated yet, so
   * the second turn starts with it) */
  logits = npu_llm_get_logits (npu_llm_session_get_context (s));
  for (i = 1; i < f.ref.vocab; i++)
    if (logits[i] > logits[t1])
      t1 = i;
  g_test_message ("first answer: token %d", t1);
  g_assert_cmpint (t1, <, NL2);
  seq_token (want, t1);
  seq_token (want, IM_END);
  seq_text (want, "\n");
  seq_token (want, IM_START);
  seq_text (want, "user\n");
  seq_image (&f, want);
  seq_chatml_tail (want, "And now?");
  answer (&f, s, "And now?", &image, 1);
  check_prompt (&f, s, "second turn", want);

  g_array_unref (want);
  npu_llm_session_free (s);
  fixture_close (&f);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_data_func ("/llm-splice/audio", GINT_TO_POINTER (CASE_AUDIO),
      test_one_prompt);
  g_test_add_data_func ("/llm-splice/image", GINT_TO_POINTER (CASE_IMAGE),
      test_one_prompt);
  g_test_add_data_func ("/llm-splice/image-and-audio",
      GINT_TO_POINTER (CASE_IMAGE_AND_AUDIO), test_one_prompt);
  g_test_add_data_func ("/llm-splice/no-template",
      GINT_TO_POINTER (CASE_COMPLETION), test_one_prompt);
  g_test_add_data_func ("/llm-splice/llama2",
      GINT_TO_POINTER (CASE_LLAMA2), test_one_prompt);
  g_test_add_func ("/llm-splice/keep-context-second-turn", test_second_turn);
  return g_test_run ();
}
