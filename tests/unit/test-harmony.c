/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: harmony output parser tests
 *
 * Hand-written answers, cut into pieces as gpt-oss's tokenizer would (the
 * format's tokens whole, the text in words), are fed to the parser; the
 * text it gives each channel is compared with what the format spec says
 * each message holds.
 */
#include <core/text/npuharmony.h>

#include <string.h>

typedef struct
{
  GString *text[NPU_HARMONY_OTHER + 1];
  gboolean done;
  guint n_after_done;           /* pieces pushed after the end */
} Parsed;

/* Feeds @pieces (special: those in "<|...|>") and sorts the text by
 * channel */
static void
parse (const gchar * const *pieces, Parsed * out)
{
  NpuHarmonyParser *p = npu_harmony_parser_new ();
  guint i;

  for (i = 0; i <= NPU_HARMONY_OTHER; i++)
    out->text[i] = g_string_new (NULL);
  out->done = FALSE;
  out->n_after_done = 0;
  for (i = 0; pieces[i]; i++) {
    gsize len = strlen (pieces[i]);
    gboolean special = g_str_has_prefix (pieces[i], "<|")
        && g_str_has_suffix (pieces[i], "|>");
    NpuHarmonyChannel c;

    if (out->done)
      out->n_after_done++;
    c = npu_harmony_parser_push (p, pieces[i], len, special);
    g_string_append_len (out->text[c], pieces[i], len);
    out->done = npu_harmony_parser_is_done (p);
  }
  npu_harmony_parser_free (p);
}

static void
parsed_clear (Parsed * out)
{
  guint i;

  for (i = 0; i <= NPU_HARMONY_OTHER; i++)
    g_string_free (out->text[i], TRUE);
}

#define FRAMING(o) ((o)->text[NPU_HARMONY_FRAMING]->str)
#define FINAL(o) ((o)->text[NPU_HARMONY_FINAL]->str)
#define ANALYSIS(o) ((o)->text[NPU_HARMONY_ANALYSIS]->str)
#define COMMENTARY(o) ((o)->text[NPU_HARMONY_COMMENTARY]->str)
#define OTHER(o) ((o)->text[NPU_HARMONY_OTHER]->str)

static void
test_analysis_then_final (void)
{
  const gchar *const pieces[] = { "<|channel|>", "analysis", "<|message|>",
    "The", " user", " asks", ".", "<|end|>", "<|start|>", "assistant",
    "<|channel|>", "final", "<|message|>", "Hello", ",", " world", "!",
    "<|return|>", NULL
  };
  Parsed o;

  parse (pieces, &o);
  g_assert_cmpstr (ANALYSIS (&o), ==, "The user asks.");
  g_assert_cmpstr (FINAL (&o), ==, "Hello, world!");
  g_assert_cmpstr (COMMENTARY (&o), ==, "");
  g_assert_cmpstr (OTHER (&o), ==, "");
  g_assert_cmpstr (FRAMING (&o), ==, "<|channel|>analysis<|message|><|end|>"
      "<|start|>assistant<|channel|>final<|message|><|return|>");
  g_assert_true (o.done);
  parsed_clear (&o);
}

static void
test_final_only (void)
{
  const gchar *const pieces[] = { "<|channel|>", "final", "<|message|>",
    "42", "<|return|>", NULL
  };
  Parsed o;

  parse (pieces, &o);
  g_assert_cmpstr (FINAL (&o), ==, "42");
  g_assert_cmpstr (ANALYSIS (&o), ==, "");
  g_assert_true (o.done);
  parsed_clear (&o);
}

/* A tool call: the recipient in the channel, a content type after
 * <|constrain|>, ended by <|call|>; and the cookbook's other spelling,
 * the recipient in the role */
static void
test_commentary_recipient (void)
{
  const gchar *const pieces[] = { "<|channel|>", "analysis", "<|message|>",
    "Need", " weather", ".", "<|end|>", "<|start|>", "assistant",
    "<|channel|>", "commentary", " to", "=", "functions", ".get", "_weather",
    " ", "<|constrain|>", "json", "<|message|>", "{\"location\":", "\"Oslo\"}",
    "<|call|>", NULL
  };
  const gchar *const in_role[] = { "<|start|>", "assistant", " to",
    "=functions.lookup", "<|channel|>", "commentary", " json",
    "<|message|>", "{}", "<|call|>", NULL
  };
  NpuHarmonyParser *p = npu_harmony_parser_new ();
  Parsed o;
  guint i;

  parse (pieces, &o);
  g_assert_cmpstr (ANALYSIS (&o), ==, "Need weather.");
  g_assert_cmpstr (COMMENTARY (&o), ==, "{\"location\":\"Oslo\"}");
  g_assert_cmpstr (FINAL (&o), ==, "");
  g_assert_true (o.done);
  parsed_clear (&o);

  /* what the header said */
  for (i = 0; pieces[i]; i++)
    npu_harmony_parser_push (p, pieces[i], strlen (pieces[i]),
        pieces[i][0] == '<');
  g_assert_true (npu_harmony_parser_is_call (p));
  g_assert_cmpstr (npu_harmony_parser_get_role (p), ==, "assistant");
  g_assert_cmpstr (npu_harmony_parser_get_channel_name (p), ==, "commentary");
  g_assert_cmpstr (npu_harmony_parser_get_recipient (p), ==,
      "functions.get_weather");
  g_assert_cmpstr (npu_harmony_parser_get_constraint (p), ==, "json");

  npu_harmony_parser_reset (p);
  g_assert_false (npu_harmony_parser_is_done (p));
  for (i = 0; in_role[i]; i++)
    g_assert_cmpint (npu_harmony_parser_push (p, in_role[i],
            strlen (in_role[i]), in_role[i][0] == '<'), ==,
        i == 8 ? NPU_HARMONY_COMMENTARY : NPU_HARMONY_FRAMING);
  g_assert_cmpstr (npu_harmony_parser_get_recipient (p), ==,
      "functions.lookup");
  g_assert_cmpstr (npu_harmony_parser_get_channel_name (p), ==, "commentary");
  g_assert_true (npu_harmony_parser_is_call (p));
  npu_harmony_parser_free (p);
}

/* Random weights: text before any harmony token is final; other special
 * tokens are dropped and change nothing; text between messages is
 * dropped; a body of another role or channel is OTHER */
static void
test_garbage (void)
{
  const gchar *const raw[] = { "foo", " bar", "<|endoftext|>", " baz", NULL };
  const gchar *const mixed[] = { "x", "<|message|>", "y", "<|message|>", "z",
    "<|end|>", "junk", "<|start|>", "user", "<|message|>", "fake",
    "<|end|>", "<|start|>", "assistant", "<|channel|>", "thoughts",
    "<|message|>", "w", "<|end|>", "<|constrain|>", "<|message|>", "v",
    NULL
  };
  Parsed o;

  parse (raw, &o);
  g_assert_cmpstr (FINAL (&o), ==, "foo bar baz");
  g_assert_cmpstr (FRAMING (&o), ==, "<|endoftext|>");
  g_assert_false (o.done);
  parsed_clear (&o);

  parse (mixed, &o);
  /* "x" before any token; "y" and "z" in a body without channel (the
   * second <|message|> is framing); "v": <|message|> after <|end|> opens
   * the assistant's message without channel */
  g_assert_cmpstr (FINAL (&o), ==, "xyzv");
  g_assert_cmpstr (OTHER (&o), ==, "fakew");
  g_assert_cmpstr (ANALYSIS (&o), ==, "");
  g_assert_true (g_str_has_prefix (FRAMING (&o), "<|message|><|message|>"
          "<|end|>junk<|start|>user"));
  g_assert_false (o.done);
  parsed_clear (&o);
}

/* <|end|> then a new header, several times, and a channel straight after
 * a body (no <|end|><|start|>): each body goes to its own channel */
static void
test_end_then_header (void)
{
  const gchar *const pieces[] = { "<|channel|>", "analysis", "<|message|>",
    "a1", "<|end|>", "<|start|>", "assistant", "<|channel|>", "commentary",
    "<|message|>", "c1", "<|end|>", "<|start|>", "assistant", "<|channel|>",
    "analysis", "<|message|>", "a2", "<|channel|>", "final", "<|message|>",
    "f1", "<|end|>", NULL
  };
  Parsed o;

  parse (pieces, &o);
  g_assert_cmpstr (ANALYSIS (&o), ==, "a1a2");
  g_assert_cmpstr (COMMENTARY (&o), ==, "c1");
  g_assert_cmpstr (FINAL (&o), ==, "f1");
  /* <|end|> does not end the answer */
  g_assert_false (o.done);
  parsed_clear (&o);
}

/* Nothing after <|return|> is text of any channel */
static void
test_stop_at_return (void)
{
  const gchar *const pieces[] = { "<|channel|>", "final", "<|message|>",
    "done", "<|return|>", "more", "<|start|>", "assistant", "<|channel|>",
    "final", "<|message|>", "again", NULL
  };
  Parsed o;

  parse (pieces, &o);
  g_assert_cmpstr (FINAL (&o), ==, "done");
  g_assert_true (o.done);
  g_assert_cmpuint (o.n_after_done, ==, 7);
  g_assert_cmpstr (FRAMING (&o), ==, "<|channel|>final<|message|><|return|>"
      "more<|start|>assistant<|channel|>final<|message|>again");
  parsed_clear (&o);
}

static void
test_is_token (void)
{
  g_assert_true (npu_harmony_is_token ("<|channel|>", 11));
  g_assert_true (npu_harmony_is_token ("<|call|>", 8));
  g_assert_false (npu_harmony_is_token ("<|channel|>", 10));
  g_assert_false (npu_harmony_is_token ("<|endoftext|>", 13));
  g_assert_cmpstr (npu_harmony_channel_name (NPU_HARMONY_ANALYSIS), ==,
      "analysis");
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/harmony/analysis-then-final", test_analysis_then_final);
  g_test_add_func ("/harmony/final-only", test_final_only);
  g_test_add_func ("/harmony/commentary-recipient", test_commentary_recipient);
  g_test_add_func ("/harmony/garbage", test_garbage);
  g_test_add_func ("/harmony/end-then-header", test_end_then_header);
  g_test_add_func ("/harmony/stop-at-return", test_stop_at_return);
  g_test_add_func ("/harmony/is-token", test_is_token);
  return g_test_run ();
}
