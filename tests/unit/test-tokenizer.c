/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: tokenizer and chat template tests
 *
 * Tiny vocabularies are built by hand (GGUFs written in memory) so that
 * every expected tokenization can be derived on paper; the derivations are
 * in the comments.  Results are compared as the token texts joined by "|",
 * which reads better than ids.  The models written by the project's
 * generator are used for round trips on realistic vocabularies.
 */
#include <core/text/npuchat.h>
#include <core/formats/npugguf.h>
#include <core/formats/npuggufwriter.h>
#include <core/text/nputokenizer.h>
#include "tests/tools/npumodelgen.h"

#include <glib/gstdio.h>
#include <string.h>

#define S "\xe2\x96\x81"        /* SentencePiece space U+2581 */
#define G "\xc4\xa0"            /* GPT-2 byte 0x20 (space) U+0120 */
#define NL "\xc4\x8a"           /* GPT-2 byte 0x0A (newline) U+010A */

static gchar *tmpdir;

typedef struct
{
  GBytes *bytes;
  NpuGguf *gguf;
  NpuTokenizer *tok;
} Model;

static void
model_free (Model * m)
{
  npu_tokenizer_free (m->tok);
  npu_gguf_free (m->gguf);
  if (m->bytes)
    g_bytes_unref (m->bytes);
  g_free (m);
}

/* Finishes @w into an in-memory GGUF and loads its tokenizer; @error NULL
 * means the tokenizer must load */
static Model *
model_from_writer (NpuGgufWriter * w, GError ** error)
{
  Model *m = g_new0 (Model, 1);
  GError *err = NULL;

  m->bytes = npu_gguf_writer_write_bytes (w, &err);
  g_assert_no_error (err);
  npu_gguf_writer_free (w);
  m->gguf = npu_gguf_open_bytes (g_bytes_get_data (m->bytes, NULL),
      g_bytes_get_size (m->bytes), &err);
  g_assert_no_error (err);
  m->tok = npu_tokenizer_new_from_gguf (m->gguf, error ? error : &err);
  g_assert_no_error (err);
  return m;
}

static Model *
model_from_file (const gchar * path)
{
  Model *m = g_new0 (Model, 1);
  GError *err = NULL;

  m->gguf = npu_gguf_open (path, &err);
  g_assert_no_error (err);
  m->tok = npu_tokenizer_new_from_gguf (m->gguf, &err);
  g_assert_no_error (err);
  return m;
}

/* encode -> "text|text|..." */
static gchar *
enc (const NpuTokenizer * tok, const gchar * text, gboolean add_special,
    gboolean parse_special)
{
  gsize n;
  gint32 *ids = npu_tokenizer_encode (tok, text, -1, add_special,
      parse_special, &n);
  GString *s = g_string_new (NULL);

  for (gsize i = 0; i < n; i++) {
    if (i)
      g_string_append_c (s, '|');
    g_string_append (s, npu_tokenizer_token_text (tok, ids[i]));
  }
  g_free (ids);
  return g_string_free (s, FALSE);
}

#define assert_enc(tok, text, add, parse, expected) G_STMT_START {      \
    gchar *got_ = enc ((tok), (text), (add), (parse));                  \
    g_assert_cmpstr (got_, ==, (expected));                             \
    g_free (got_);                                                      \
  } G_STMT_END

static gint32
id_of (const NpuTokenizer * tok, const gchar * text)
{
  gint32 id = npu_tokenizer_find_token (tok, text);

  g_assert_cmpint (id, >=, 0);
  return id;
}

static gchar *
dec (const NpuTokenizer * tok, const gint32 * ids, gsize n,
    NpuDecodeFlags flags)
{
  return npu_tokenizer_decode (tok, ids, n, flags, NULL);
}

/* ------------------------------------------------------------------------ */
/* SentencePiece                                                             */

typedef struct
{
  GPtrArray *text;
  GArray *type, *score;
} Vocab;

static void
vocab_init (Vocab * v)
{
  v->text = g_ptr_array_new_with_free_func (g_free);
  v->type = g_array_new (FALSE, FALSE, sizeof (gint32));
  v->score = g_array_new (FALSE, FALSE, sizeof (gfloat));
}

static void
vocab_add (Vocab * v, const gchar * text, gint32 type, gfloat score)
{
  g_ptr_array_add (v->text, g_strdup (text));
  g_array_append_val (v->type, type);
  g_array_append_val (v->score, score);
}

/* Adds tokens, types (and scores) to @w and frees @v */
static void
vocab_write (Vocab * v, NpuGgufWriter * w, gboolean scores)
{
  GError *err = NULL;

  g_assert_true (npu_gguf_writer_add_string_array (w,
          "tokenizer.ggml.tokens", (const gchar * const *) v->text->pdata,
          v->text->len, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "tokenizer.ggml.token_type",
          NPU_GGUF_TYPE_INT32, v->type->data, v->type->len, &err));
  if (scores)
    g_assert_true (npu_gguf_writer_add_array (w, "tokenizer.ggml.scores",
            NPU_GGUF_TYPE_FLOAT32, v->score->data, v->score->len, &err));
  g_assert_no_error (err);
  g_ptr_array_unref (v->text);
  g_array_unref (v->type);
  g_array_unref (v->score);
}

/* ids 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then the pieces.
 * Single characters score -10, so any piece beats them; the merges:
 *   ab -1, bc -3       (in "abc", ab wins on score and position)
 *   xy -3, yz -1       (in "xyz", yz wins on score although xy is left)
 *   aa -2              (in "aaa" both pairs tie: the left one wins)
 *   ▁ab -0.5           (reached only by merging ▁ with ab) */
static Model *
spm_model (gint add_space_prefix, gboolean add_eos)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  Vocab v;
  const gchar *chars[] = { S, "a", "b", "c", "x", "y", "z", NULL };
  GError *err = NULL;

  vocab_init (&v);
  vocab_add (&v, "<unk>", NPU_TOKEN_TYPE_UNKNOWN, 0);
  vocab_add (&v, "<s>", NPU_TOKEN_TYPE_CONTROL, 0);
  vocab_add (&v, "</s>", NPU_TOKEN_TYPE_CONTROL, 0);
  for (guint i = 0; i < 256; i++) {
    gchar *t = g_strdup_printf ("<0x%02X>", i);
    vocab_add (&v, t, NPU_TOKEN_TYPE_BYTE, 0);
    g_free (t);
  }
  for (guint i = 0; chars[i]; i++)
    vocab_add (&v, chars[i], NPU_TOKEN_TYPE_NORMAL, -10);
  vocab_add (&v, "ab", NPU_TOKEN_TYPE_NORMAL, -1);
  vocab_add (&v, "bc", NPU_TOKEN_TYPE_NORMAL, -3);
  vocab_add (&v, "xy", NPU_TOKEN_TYPE_NORMAL, -3);
  vocab_add (&v, "yz", NPU_TOKEN_TYPE_NORMAL, -1);
  vocab_add (&v, "aa", NPU_TOKEN_TYPE_NORMAL, -2);
  vocab_add (&v, S "ab", NPU_TOKEN_TYPE_NORMAL, -0.5f);
  vocab_add (&v, "<img>", NPU_TOKEN_TYPE_USER_DEFINED, 0);

  g_assert_true (npu_gguf_writer_add_string (w, "tokenizer.ggml.model",
          "llama", -1, &err));
  vocab_write (&v, w, TRUE);
  if (add_space_prefix >= 0)
    npu_gguf_writer_add_bool (w, "tokenizer.ggml.add_space_prefix",
        add_space_prefix, &err);
  if (add_eos)
    npu_gguf_writer_add_bool (w, "tokenizer.ggml.add_eos_token", TRUE, &err);
  g_assert_no_error (err);
  return model_from_writer (w, NULL);
}

static void
test_spm_merges (void)
{
  Model *m = spm_model (-1, FALSE);
  const NpuTokenizer *tok = m->tok;

  g_assert_cmpint (npu_tokenizer_get_kind (tok), ==, NPU_TOKENIZER_SPM);
  g_assert_null (npu_tokenizer_get_pre (tok));
  /* "abc" -> "▁abc": ▁a is no token; ab (-1) beats bc (-3); then ▁+ab is
   * ▁ab (-0.5); ▁ab+c is no token */
  assert_enc (tok, "abc", FALSE, FALSE, S "ab|c");
  /* "xyz" -> "▁xyz": yz (-1) beats xy (-3) although xy is further left;
   * then neither ▁x nor xyz exists */
  assert_enc (tok, "xyz", FALSE, FALSE, S "|x|yz");
  /* "aaa" -> "▁aaa": the two aa pairs tie at -2: the left one merges, the
   * right one is then stale */
  assert_enc (tok, "aaa", FALSE, FALSE, S "|aa|a");
  /* a leading space is kept: "▁▁ab" (dummy prefix + the space) ->
   * ▁ + ▁ab (▁▁ is no token) */
  assert_enc (tok, " ab", FALSE, FALSE, S "|" S "ab");
  /* inner spaces: "▁ab▁ab" */
  assert_enc (tok, "ab ab", FALSE, FALSE, S "ab|" S "ab");
  /* the empty text is no token at all, or just BOS */
  assert_enc (tok, "", FALSE, FALSE, "");
  assert_enc (tok, "", TRUE, FALSE, "<s>");
  model_free (m);
}

static void
test_spm_byte_fallback (void)
{
  Model *m = spm_model (-1, FALSE);
  const NpuTokenizer *tok = m->tok;

  /* é is U+00E9 = C3 A9, not in the vocabulary: spelled in bytes */
  assert_enc (tok, "\xc3\xa9", FALSE, FALSE, S "|<0xC3>|<0xA9>");
  /* an emoji (U+1F600 = F0 9F 98 80): four byte tokens */
  assert_enc (tok, "\xf0\x9f\x98\x80", FALSE, FALSE,
      S "|<0xF0>|<0x9F>|<0x98>|<0x80>");
  /* byte tokens sit at 3 + byte */
  {
    gsize n;
    gint32 *ids = npu_tokenizer_encode (tok, "\xc3\xa9", -1, FALSE, FALSE,
        &n);
    g_assert_cmpuint (n, ==, 3);
    g_assert_cmpint (ids[1], ==, 3 + 0xc3);
    g_assert_cmpint (ids[2], ==, 3 + 0xa9);
    g_free (ids);
  }
  model_free (m);
}

static void
test_spm_special (void)
{
  Model *m = spm_model (-1, FALSE), *m2;
  const NpuTokenizer *tok = m->tok;
  gchar *s;

  /* BOS per add_bos_token's default for SentencePiece; no EOS */
  g_assert_true (npu_tokenizer_get_add_bos (tok));
  g_assert_false (npu_tokenizer_get_add_eos (tok));
  assert_enc (tok, "ab", TRUE, FALSE, "<s>|" S "ab");
  /* control tokens are parsed only with parse_special; the text after a
   * special token gets the dummy space prefix again, as in llama.cpp */
  assert_enc (tok, "<s>ab</s>", FALSE, TRUE, "<s>|" S "ab|</s>");
  s = enc (tok, "<s>ab</s>", FALSE, FALSE);
  g_assert_null (strstr (s, "<s>|"));
  g_assert_true (g_str_has_prefix (s, S "|<0x3C>|<0x73>|<0x3E>|ab|"));
  g_free (s);
  /* user-defined tokens are always cut out */
  assert_enc (tok, "ab<img>ab", FALSE, FALSE, S "ab|<img>|" S "ab");

  g_assert_cmpint (npu_tokenizer_get_bos (tok), ==, 1);
  g_assert_cmpint (npu_tokenizer_get_eos (tok), ==, 2);
  g_assert_cmpint (npu_tokenizer_get_unk (tok), ==, 0);
  g_assert_true (npu_tokenizer_is_eog (tok, 2));
  g_assert_false (npu_tokenizer_is_eog (tok, 1));
  g_assert_false (npu_tokenizer_is_eog (tok, -1));
  g_assert_cmpint (npu_tokenizer_token_type (tok, 3), ==,
      NPU_TOKEN_TYPE_BYTE);
  g_assert_cmpfloat (npu_tokenizer_token_score (tok, id_of (tok, "yz")), ==,
      -1.0f);
  g_assert_cmpint (npu_tokenizer_find_token (tok, "nope"), ==,
      NPU_TOKEN_NULL);

  /* add_eos_token and add_space_prefix from the file */
  m2 = spm_model (FALSE, TRUE);
  assert_enc (m2->tok, "ab", TRUE, FALSE, "<s>|ab|</s>");
  assert_enc (m2->tok, " ab", FALSE, FALSE, S "ab");
  model_free (m2);
  model_free (m);
}

static void
test_spm_decode (void)
{
  Model *m = spm_model (-1, FALSE);
  const NpuTokenizer *tok = m->tok;
  gint32 ids[] = { 1, id_of (tok, S "ab"), 3 + 0xc3, 3 + 0xa9, 2 };
  gchar *s;

  /* ▁ -> space, <0xXX> -> the byte, control tokens hidden */
  s = dec (tok, ids, 5, NPU_DECODE_NONE);
  g_assert_cmpstr (s, ==, " ab\xc3\xa9");
  g_free (s);
  /* the dummy prefix is dropped from the first text token */
  s = dec (tok, ids, 5, NPU_DECODE_STRIP_LEADING_SPACE);
  g_assert_cmpstr (s, ==, "ab\xc3\xa9");
  g_free (s);
  /* rendered control tokens are the first text: the space stays */
  s = dec (tok, ids, 5, NPU_DECODE_SPECIAL | NPU_DECODE_STRIP_LEADING_SPACE);
  g_assert_cmpstr (s, ==, "<s> ab\xc3\xa9</s>");
  g_free (s);
  /* a lone lead byte becomes U+FFFD */
  s = dec (tok, ids + 2, 1, NPU_DECODE_NONE);
  g_assert_cmpstr (s, ==, "\xef\xbf\xbd");
  g_free (s);
  model_free (m);
}

/* ------------------------------------------------------------------------ */
/* Byte-level BPE                                                            */

/* GPT-2's bytes_to_unicode(), as the generator orders byte tokens */
static void
gpt2_bytes (Vocab * v)
{
  guint n = 0;
  gunichar cp[256];
  guint8 order[256];
  guint k = 0;

  for (guint b = 0; b < 256; b++) {
    gboolean printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172)
        || b >= 174;
    cp[b] = printable ? b : 256 + n++;
  }
  for (guint b = 0; b < 256; b++)
    if (cp[b] < 256)
      order[k++] = b;
  for (guint b = 0; b < 256; b++)
    if (cp[b] >= 256)
      order[k++] = b;
  for (k = 0; k < 256; k++) {
    gchar s[8] = { 0 };
    g_unichar_to_utf8 (cp[order[k]], s);
    vocab_add (v, s, NPU_TOKEN_TYPE_NORMAL, 0);
  }
}

/* Merge ranks are their positions here */
static const gchar *const bpe_merges[] = {
  G " t",                       /* 0 */
  "h e",                        /* 1 */
  G "t he",                     /* 2: Ġthe */
  "t h",                        /* 3: after "h e", so "the" -> t|he */
  NL " " NL,                    /* 4 */
  G " 1",                       /* 5: before "1 2" */
  "1 2",                        /* 6 */
  "' t",                        /* 7 */
  "' T",                        /* 8 */
  "d o",                        /* 9 */
  "do n",                       /* 10 */
  "3 4",                        /* 11 */
  G " !",                       /* 12 */
  "! !",                        /* 13 */
  "o W",                        /* 14 */
  NULL
};

/* @pre NULL: no tokenizer.ggml.pre key */
static Model *
bpe_model (const gchar * pre, GError ** error)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  Vocab v;
  GError *err = NULL;
  guint eot;

  vocab_init (&v);
  gpt2_bytes (&v);
  for (guint i = 0; bpe_merges[i]; i++) {
    gchar **parts = g_strsplit (bpe_merges[i], " ", 2);
    gchar *t = g_strconcat (parts[0], parts[1], NULL);
    gboolean have = FALSE;

    for (guint k = 0; k < v.text->len; k++)
      have |= strcmp (g_ptr_array_index (v.text, k), t) == 0;
    if (!have)
      vocab_add (&v, t, NPU_TOKEN_TYPE_NORMAL, 0);
    g_free (t);
    g_strfreev (parts);
  }
  vocab_add (&v, "xyz", NPU_TOKEN_TYPE_NORMAL, 0);       /* no merge makes it */
  eot = v.text->len;
  vocab_add (&v, "<|endoftext|>", NPU_TOKEN_TYPE_CONTROL, 0);
  vocab_add (&v, "<|im_start|>", NPU_TOKEN_TYPE_CONTROL, 0);
  vocab_add (&v, "<|im_end|>", NPU_TOKEN_TYPE_CONTROL, 0);
  vocab_add (&v, "<img>", NPU_TOKEN_TYPE_USER_DEFINED, 0);

  npu_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2", -1, &err);
  if (pre)
    npu_gguf_writer_add_string (w, "tokenizer.ggml.pre", pre, -1, &err);
  vocab_write (&v, w, FALSE);
  npu_gguf_writer_add_string_array (w, "tokenizer.ggml.merges", bpe_merges,
      -1, &err);
  npu_gguf_writer_add_u32 (w, "tokenizer.ggml.bos_token_id", eot, &err);
  npu_gguf_writer_add_u32 (w, "tokenizer.ggml.eos_token_id", eot + 2, &err);
  g_assert_no_error (err);
  return model_from_writer (w, error);
}

static void
test_bpe_merges (void)
{
  Model *m = bpe_model ("qwen2", NULL);
  const NpuTokenizer *tok = m->tok;

  g_assert_cmpint (npu_tokenizer_get_kind (tok), ==, NPU_TOKENIZER_BPE);
  g_assert_cmpstr (npu_tokenizer_get_pre (tok), ==, "qwen2");
  /* byte tokens in bytes_to_unicode order: '!' is 0, 'Ġ' (space) 220 */
  g_assert_cmpint (id_of (tok, "!"), ==, 0);
  g_assert_cmpint (id_of (tok, G), ==, 220);
  /* "the": t-h is rank 3, h-e rank 1: he merges first, and "t he" is no
   * merge, so t|he (merging left to right would give th|e) */
  assert_enc (tok, "the", FALSE, FALSE, "t|he");
  /* " the" is one word Ġthe: Ġ-t (0), then h-e (1), then Ġt-he (2) */
  assert_enc (tok, " the", FALSE, FALSE, G "the");
  /* newline is Ċ: "\n\n" is one word (\s*[\r\n]+) merged by rank 4 */
  assert_enc (tok, "a\n\nb", FALSE, FALSE, "a|" NL NL "|b");
  /* a character outside the byte tokens' merges stays byte tokens */
  assert_enc (tok, "\xc3\xa9", FALSE, FALSE, "\xc3\x83|\xc2\xa9");
  model_free (m);
}

/* Each pre-tokenizer on inputs where they differ; the splits, then the
 * merges of bpe_merges inside each piece:
 *
 * "12345"  default: \p{N}+ keeps 12345, [0-9]{3} cuts 123|45 -> 12|3|4|5
 *          gpt2:    one piece 12345: 1-2 (6), 3-4 (11) -> 12|34|5
 *          llama3:  \p{N}{1,3}: 123|45 -> 12|3|4|5
 *          qwen2:   \p{N}: every digit alone -> 1|2|3|4|5
 * " 12"    default: " ?\p{N}+" takes " 12", \p{N}+ then cuts " "|12 ->
 *                   Ġ|12
 *          gpt2:    one piece Ġ12: Ġ-1 (5) before 1-2 (6) -> Ġ1|2
 *          llama3:  " " (\s+) then 12, a token kept whole -> Ġ|12
 *          qwen2:   " ", 1, 2 -> Ġ|1|2
 * "don't"  default: [\p{P}...]+ cuts the apostrophe out -> don|'|t
 *          others:  don + 't (contraction) -> don|'t
 * "DON'T"  gpt2/default: contractions are lower-case only: ' and T apart
 *                   -> D|O|N|'|T
 *          llama3/qwen2: (?:'[tT]) -> D|O|N|'T
 * "a\n\nb" gpt2/default: \s+(?!\S) takes one \n, the second \n is left
 *                   unmatched (a piece of its own) -> a|Ċ|Ċ|b
 *          llama3/qwen2: \s*[\r\n]+ -> a|ĊĊ|b
 * "a !!"   default: [\p{P}...]+ cuts "!!" first -> a|Ġ|!!
 *          others:  " ?[^\s\p{L}\p{N}]+" takes " !!": Ġ-! (12) before
 *                   !-! (13) -> a|Ġ!|!
 * "oW"     gpt-4o: a lower-case run, then an upper-case one -> o|W
 *          others:  one \p{L}+ piece -> oW
 * "xyz"    llama3 keeps a word that is a token (ignore_merges) -> xyz
 *          others: no merges -> x|y|z
 * "a\u180e't"  all: U+180E (bytes E1 A0 8E, GPT-2 characters U+00E1
 *          U+0142 U+0130) is no whitespace, though PCRE's \s has it:
 *          "\u180e'" is punctuation, then "t" -> a|\u00e1|\u0142|\u0130|'|t
 *          (default cuts "'" out first, the same).  llama.cpp, "a\u180e's"
 *          on Qwen3's vocabulary: 64 123970 236 6 82, on Llama 3's: 128000
 *          64 157 254 236 6 82, "'" and "s" apart.
 */
static void
test_bpe_pre (void)
{
  static const struct
  {
    const gchar *pre, *canon;
    const gchar *num, *sp_num, *dont, *dont_uc, *nl, *bang, *xyz, *ow;
  } cases[] = {
    {NULL, "default", "12|3|4|5", G "|12", "don|'|t", "D|O|N|'|T",
        "a|" NL "|" NL "|b", "a|" G "|!!", "x|y|z", "oW"},
    {"default", "default", "12|3|4|5", G "|12", "don|'|t", "D|O|N|'|T",
        "a|" NL "|" NL "|b", "a|" G "|!!", "x|y|z", "oW"},
    {"gpt-2", "gpt2", "12|34|5", G "1|2", "don|'t", "D|O|N|'|T",
        "a|" NL "|" NL "|b", "a|" G "!|!", "x|y|z", "oW"},
    {"llama-bpe", "llama3", "12|3|4|5", G "|12", "don|'t", "D|O|N|'T",
        "a|" NL NL "|b", "a|" G "!|!", "xyz", "oW"},
    {"qwen2", "qwen2", "1|2|3|4|5", G "|1|2", "don|'t", "D|O|N|'T",
        "a|" NL NL "|b", "a|" G "!|!", "x|y|z", "oW"},
    {"gpt-4o", "gpt-4o", "12|3|4|5", G "|12", "don|'t", "D|O|N|'T",
        "a|" NL NL "|b", "a|" G "!|!", "x|y|z", "o|W"},
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    Model *m = bpe_model (cases[i].pre, NULL);
    const NpuTokenizer *tok = m->tok;

    g_test_message ("pre %s", cases[i].canon);
    g_assert_cmpstr (npu_tokenizer_get_pre (tok), ==, cases[i].canon);
    assert_enc (tok, "12345", FALSE, FALSE, cases[i].num);
    assert_enc (tok, " 12", FALSE, FALSE, cases[i].sp_num);
    assert_enc (tok, "don't", FALSE, FALSE, cases[i].dont);
    assert_enc (tok, "DON'T", FALSE, FALSE, cases[i].dont_uc);
    assert_enc (tok, "a\n\nb", FALSE, FALSE, cases[i].nl);
    assert_enc (tok, "a !!", FALSE, FALSE, cases[i].bang);
    assert_enc (tok, "xyz", FALSE, FALSE, cases[i].xyz);
    assert_enc (tok, "oW", FALSE, FALSE, cases[i].ow);
    assert_enc (tok, "a\xe1\xa0\x8e't", FALSE, FALSE,
        "a|\xc3\xa1|\xc5\x82|\xc4\xb0|'|t");
    model_free (m);
  }
}

static void
test_bpe_special (void)
{
  Model *m = bpe_model ("qwen2", NULL), *l3;
  const NpuTokenizer *tok = m->tok;
  gint32 end = id_of (tok, "<|im_end|>"), eot = id_of (tok, "<|endoftext|>");
  gchar *s;
  gsize n;
  gint32 *ids;

  assert_enc (tok, "<|im_start|>the<|im_end|>", FALSE, TRUE,
      "<|im_start|>|t|he|<|im_end|>");
  /* without parse_special the markers are text, and come back as such */
  ids = npu_tokenizer_encode (tok, "<|im_start|>the", -1, FALSE, FALSE, &n);
  g_assert_cmpint (ids[0], !=, id_of (tok, "<|im_start|>"));
  s = dec (tok, ids, n, NPU_DECODE_NONE);
  g_assert_cmpstr (s, ==, "<|im_start|>the");
  g_free (s);
  g_free (ids);
  /* user-defined: always */
  assert_enc (tok, "x<img>y", FALSE, FALSE, "x|<img>|y");

  /* no BOS for qwen2 unless the file says so; llama3 adds it by default */
  g_assert_false (npu_tokenizer_get_add_bos (tok));
  assert_enc (tok, "the", TRUE, FALSE, "t|he");
  l3 = bpe_model ("llama3", NULL);
  g_assert_true (npu_tokenizer_get_add_bos (l3->tok));
  assert_enc (l3->tok, "the", TRUE, FALSE, "<|endoftext|>|t|he");
  model_free (l3);

  /* end of generation: eos (<|im_end|>) and <|endoftext|> by its text;
   * eot found by text, <|im_end|> before <|endoftext|> */
  g_assert_cmpint (npu_tokenizer_get_eos (tok), ==, end);
  g_assert_cmpint (npu_tokenizer_get_eot (tok), ==, end);
  g_assert_true (npu_tokenizer_is_eog (tok, end));
  g_assert_true (npu_tokenizer_is_eog (tok, eot));
  g_assert_false (npu_tokenizer_is_eog (tok, id_of (tok, "<|im_start|>")));
  g_assert_false (npu_tokenizer_is_eog (tok, id_of (tok, "he")) ||
      npu_tokenizer_is_eog (tok, 0));
  model_free (m);
}

static void
test_bpe_decode (void)
{
  Model *m = bpe_model ("llama3", NULL);
  const NpuTokenizer *tok = m->tok;
  gint32 ids[] = { id_of (tok, "<|im_start|>"), id_of (tok, G "the"),
    id_of (tok, NL NL), id_of (tok, G "!"), id_of (tok, "<|im_end|>")
  };
  gchar *s;
  gsize len;
  const gchar *p;

  /* GPT-2 characters back to bytes: Ġ -> space, Ċ -> newline */
  s = dec (tok, ids, 5, NPU_DECODE_NONE);
  g_assert_cmpstr (s, ==, " the\n\n !");
  g_free (s);
  s = dec (tok, ids, 5, NPU_DECODE_SPECIAL);
  g_assert_cmpstr (s, ==, "<|im_start|> the\n\n !<|im_end|>");
  g_free (s);
  /* llama3 vocabularies clean up " !" like llama.cpp's detokenize, on
   * request */
  s = dec (tok, ids, 5, NPU_DECODE_CLEAN_SPACES);
  g_assert_cmpstr (s, ==, " the\n\n!");
  g_free (s);
  p = npu_tokenizer_token_piece (tok, id_of (tok, NL NL), &len);
  g_assert_cmpuint (len, ==, 2);
  g_assert_true (memcmp (p, "\n\n", 2) == 0);
  model_free (m);
}

static void
test_errors (void)
{
  NpuGgufWriter *w;
  GError *err = NULL;
  Model *m;
  const gchar *toks[] = { "a", "b", "a", NULL };

  m = bpe_model ("deepseek-llm", &err);
  g_assert_error (err, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (err->message, "\"deepseek-llm\""));
  g_assert_null (m->tok);
  g_clear_error (&err);
  model_free (m);

  w = npu_gguf_writer_new ();
  npu_gguf_writer_add_string (w, "tokenizer.ggml.model", "bert", -1, NULL);
  m = model_from_writer (w, &err);
  g_assert_error (err, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (err->message, "\"bert\""));
  g_clear_error (&err);
  model_free (m);

  /* no tokenizer at all */
  w = npu_gguf_writer_new ();
  npu_gguf_writer_add_u32 (w, "x", 1, NULL);
  m = model_from_writer (w, &err);
  g_assert_error (err, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID);
  g_clear_error (&err);
  model_free (m);

  /* a duplicate token, and BPE without merges */
  w = npu_gguf_writer_new ();
  npu_gguf_writer_add_string (w, "tokenizer.ggml.model", "llama", -1, NULL);
  npu_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens", toks, -1,
      NULL);
  m = model_from_writer (w, &err);
  g_assert_error (err, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID);
  g_assert_nonnull (strstr (err->message, "duplicate"));
  g_clear_error (&err);
  model_free (m);

  w = npu_gguf_writer_new ();
  npu_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2", -1, NULL);
  npu_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens", toks, 2,
      NULL);
  m = model_from_writer (w, &err);
  g_assert_error (err, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID);
  g_assert_nonnull (strstr (err->message, "merges"));
  g_clear_error (&err);
  model_free (m);
}

/* ------------------------------------------------------------------------ */
/* Streaming decoder                                                         */

static void
push_expect (NpuTokenDecoder * d, gint32 id, const gchar * expected)
{
  gsize len;
  gchar *s = npu_token_decoder_push (d, id, &len);

  g_assert_cmpstr (s, ==, expected);
  g_assert_cmpuint (len, ==, strlen (expected));
  g_free (s);
}

static void
flush_expect (NpuTokenDecoder * d, const gchar * expected)
{
  gchar *s = npu_token_decoder_flush (d, NULL);

  g_assert_cmpstr (s, ==, expected);
  g_free (s);
}

static void
test_stream (void)
{
  Model *m = spm_model (-1, FALSE);
  const NpuTokenizer *tok = m->tok;
  NpuTokenDecoder *d = npu_token_decoder_new (tok,
      NPU_DECODE_STRIP_LEADING_SPACE);

  /* BOS shows nothing; the first word loses the dummy space */
  push_expect (d, 1, "");
  push_expect (d, id_of (tok, S "ab"), "ab");
  /* é over two byte tokens: nothing until the second */
  push_expect (d, 3 + 0xc3, "");
  push_expect (d, 3 + 0xa9, "\xc3\xa9");
  /* an emoji over four */
  push_expect (d, 3 + 0xf0, "");
  push_expect (d, 3 + 0x9f, "");
  push_expect (d, 3 + 0x98, "");
  push_expect (d, 3 + 0x80, "\xf0\x9f\x98\x80");
  /* later words keep their space */
  push_expect (d, id_of (tok, S "ab"), " ab");
  /* a byte that can start nothing comes out at once as U+FFFD */
  push_expect (d, 3 + 0xff, "\xef\xbf\xbd");
  /* a lead byte followed by a non-continuation: U+FFFD, then the text */
  push_expect (d, 3 + 0xe2, "");
  push_expect (d, id_of (tok, "ab"), "\xef\xbf\xbd" "ab");
  /* an incomplete character at the end: one U+FFFD at flush */
  push_expect (d, 3 + 0xf0, "");
  push_expect (d, 3 + 0x9f, "");
  flush_expect (d, "\xef\xbf\xbd");
  flush_expect (d, "");
  /* after flush the next token is the first again */
  push_expect (d, id_of (tok, S "ab"), "ab");
  npu_token_decoder_reset (d);
  push_expect (d, 3 + 0xc3, "");
  npu_token_decoder_reset (d);
  flush_expect (d, "");
  /* out-of-range ids are ignored */
  push_expect (d, 100000, "");
  push_expect (d, -1, "");
  npu_token_decoder_free (d);

  /* special tokens rendered on request */
  d = npu_token_decoder_new (tok, NPU_DECODE_SPECIAL);
  push_expect (d, 2, "</s>");
  npu_token_decoder_free (d);
  model_free (m);
}

/* ------------------------------------------------------------------------ */
/* Generated models: round trips                                             */

static const gchar *const texts[] = {
  "Hello world, this is a test of the camera image.",
  "  leading spaces, double  spaces\tand tabs\nnew lines\n\n  end ",
  "Numbers 12345 and 3.14159, don't WON'T I'm we've.",
  "Gr\xc3\xbc\xc3\x9f" "e aus K\xc3\xb6ln \xe2\x80\x94 \xe6\x9d\xb1\xe4\xba"
      "\xac \xe2\x80\x94 \xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82 "
      "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 \xe0\xa4\xa8\xe0\xa4\xae"
      "\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87",
  "Emoji \xf0\x9f\x91\x8b\xf0\x9f\x8f\xbd and a family \xf0\x9f\x91\xa8"
      "\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 \xf0\x9f\x98"
      "\x80!",
  "<image> is text here, and so is <|im_start|>",
  "",
};

static gchar *
gen_model (NpuModelArch arch)
{
  NpuTextModelParams p;
  GError *err = NULL;
  gchar *base = g_strconcat (npu_model_gen_arch_name (arch), ".gguf", NULL);
  gchar *path = g_build_filename (tmpdir, base, NULL);

  g_free (base);

  if (g_file_test (path, G_FILE_TEST_EXISTS))
    return path;
  g_assert_true (npu_model_gen_text_preset (&p, arch, "tiny", &err));
  p.seed = 1;
  p.wtype = NPU_GGML_TYPE_F32;
  g_assert_true (npu_model_gen_write_text (&p, path, NULL, &err));
  g_assert_no_error (err);
  return path;
}

static void
round_trips (const NpuTokenizer * tok)
{
  for (guint i = 0; i < G_N_ELEMENTS (texts); i++) {
    gsize n, n2;
    gint32 *ids = npu_tokenizer_encode (tok, texts[i], -1, TRUE, FALSE, &n);
    gchar *s = dec (tok, ids, n, NPU_DECODE_STRIP_LEADING_SPACE);
    NpuTokenDecoder *d = npu_token_decoder_new (tok,
        NPU_DECODE_STRIP_LEADING_SPACE);
    GString *streamed = g_string_new (NULL);

    g_assert_cmpstr (s, ==, texts[i]);
    /* one token at a time gives the same text, and only whole characters
     * at each step */
    for (gsize k = 0; k < n; k++) {
      gchar *part = npu_token_decoder_push (d, ids[k], &n2);
      g_assert_true (g_utf8_validate (part, n2, NULL));
      g_string_append_len (streamed, part, n2);
      g_free (part);
    }
    {
      gchar *rest = npu_token_decoder_flush (d, NULL);
      g_string_append (streamed, rest);
      g_free (rest);
    }
    g_assert_cmpstr (streamed->str, ==, texts[i]);
    g_string_free (streamed, TRUE);
    npu_token_decoder_free (d);
    g_free (s);
    g_free (ids);
  }
}

static void
test_gen_llama (void)
{
  gchar *path = gen_model (NPU_MODEL_ARCH_LLAMA);
  Model *m = model_from_file (path);
  const NpuTokenizer *tok = m->tok;
  gsize n;
  gint32 *ids;

  g_assert_cmpint (npu_tokenizer_get_kind (tok), ==, NPU_TOKENIZER_SPM);
  g_assert_cmpuint (npu_tokenizer_n_vocab (tok), ==, 1024);
  round_trips (tok);
  /* common words are whole tokens: "the image" -> <s> ▁the ▁image */
  assert_enc (tok, "the image", TRUE, FALSE, "<s>|" S "the|" S "image");
  /* the markers are control tokens found by text */
  ids = npu_tokenizer_encode (tok, "<image>\nWhat", -1, TRUE, TRUE, &n);
  g_assert_cmpint (ids[0], ==, 1);
  g_assert_cmpint (ids[1], ==, id_of (tok, "<image>"));
  g_assert_cmpint (npu_tokenizer_token_type (tok, ids[1]), ==,
      NPU_TOKEN_TYPE_CONTROL);
  g_free (ids);
  g_assert_cmpint (npu_tokenizer_find_token (tok, "<|vision_start|>"), >=,
      0);
  /* an emoji is four byte-fallback tokens after ▁ */
  ids = npu_tokenizer_encode (tok, "\xf0\x9f\x98\x80", -1, FALSE, FALSE, &n);
  g_assert_cmpuint (n, ==, 5);
  for (guint k = 1; k < 5; k++)
    g_assert_cmpint (npu_tokenizer_token_type (tok, ids[k]), ==,
        NPU_TOKEN_TYPE_BYTE);
  g_free (ids);
  model_free (m);
  g_free (path);
}

static void
test_gen_qwen2 (void)
{
  gchar *path = gen_model (NPU_MODEL_ARCH_QWEN2);
  Model *m = model_from_file (path);
  const NpuTokenizer *tok = m->tok;
  NpuTokenDecoder *d;
  gsize n;
  gint32 *ids;

  g_assert_cmpint (npu_tokenizer_get_kind (tok), ==, NPU_TOKENIZER_BPE);
  g_assert_cmpstr (npu_tokenizer_get_pre (tok), ==, "qwen2");
  round_trips (tok);
  assert_enc (tok, "the image", TRUE, FALSE, "the|" G "image");
  g_assert_true (npu_tokenizer_is_eog (tok, id_of (tok, "<|im_end|>")));
  g_assert_true (npu_tokenizer_is_eog (tok, id_of (tok, "<|endoftext|>")));
  g_assert_cmpint (npu_tokenizer_get_eos (tok), ==, id_of (tok,
          "<|im_end|>"));
  /* an emoji in four byte-level tokens: streamed, only the last one
   * gives text */
  ids = npu_tokenizer_encode (tok, "\xf0\x9f\x98\x80", -1, FALSE, FALSE, &n);
  g_assert_cmpuint (n, ==, 4);
  d = npu_token_decoder_new (tok, NPU_DECODE_NONE);
  for (guint k = 0; k < 3; k++)
    push_expect (d, ids[k], "");
  push_expect (d, ids[3], "\xf0\x9f\x98\x80");
  npu_token_decoder_free (d);
  g_free (ids);
  model_free (m);
  g_free (path);
}

/* ------------------------------------------------------------------------ */
/* Chat templates                                                            */

#define assert_chat(t, sys, user, gen, expected) G_STMT_START {        \
    gchar *got_ = npu_chat_format ((t), (sys), (user), (gen));          \
    g_assert_cmpstr (got_, ==, (expected));                             \
    g_free (got_);                                                      \
  } G_STMT_END

static void
test_chat_generated (void)
{
  gchar *qp = gen_model (NPU_MODEL_ARCH_QWEN2);
  gchar *lp = gen_model (NPU_MODEL_ARCH_LLAMA);
  Model *q = model_from_file (qp), *l = model_from_file (lp);
  GError *err = NULL;
  NpuChatTemplate *t;
  gchar *prompt;
  gsize n;
  gint32 *ids;

  /* Qwen2-Instruct's template inserts its default system turn when the
   * first message is not a system one */
  t = npu_chat_template_new_from_gguf (q->gguf, q->tok, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_CHATML);
  g_assert_cmpstr (npu_chat_template_get_default_system (t), ==,
      "You are a helpful assistant.");
  g_assert_false (npu_chat_template_has_bos (t));
  assert_chat (t, NULL, "Describe the image.", TRUE,
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nDescribe the image.<|im_end|>\n"
      "<|im_start|>assistant\n");
  /* a given system message replaces it; content is not trimmed */
  assert_chat (t, "Be brief.", " Hi ", FALSE,
      "<|im_start|>system\nBe brief.<|im_end|>\n"
      "<|im_start|>user\n Hi <|im_end|>\n");
  /* tokenized with parse_special, the markers are single tokens */
  prompt = npu_chat_format (t, NULL, "Hi", TRUE);
  ids = npu_tokenizer_encode (q->tok, prompt, -1,
      !npu_chat_template_has_bos (t), TRUE, &n);
  g_assert_cmpint (ids[0], ==, id_of (q->tok, "<|im_start|>"));
  g_free (ids);
  g_free (prompt);
  npu_chat_template_free (t);

  /* Qwen3's template (the generator writes it verbatim): no default
   * system turn, and with thinking on (its default) the generation prompt
   * is the bare assistant header, "<think>" being the model's to write.
   * Rendered by hand from the Jinja for [system?, user]. */
  {
    gchar *q3p = gen_model (NPU_MODEL_ARCH_QWEN3);
    Model *q3 = model_from_file (q3p);

    t = npu_chat_template_new_from_gguf (q3->gguf, q3->tok, &err);
    g_assert_no_error (err);
    g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_CHATML);
    g_assert_null (npu_chat_template_get_default_system (t));
    g_assert_false (npu_chat_template_has_bos (t));
    assert_chat (t, NULL, "Describe the image.", TRUE,
        "<|im_start|>user\nDescribe the image.<|im_end|>\n"
        "<|im_start|>assistant\n");
    assert_chat (t, "Be brief.", " Hi ", TRUE,
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\n Hi <|im_end|>\n<|im_start|>assistant\n");
    npu_chat_template_free (t);
    model_free (q3);
    g_free (q3p);
  }

  /* the generator's llama file carries a Llama 2 [INST] template */
  t = npu_chat_template_new_from_gguf (l->gguf, l->tok, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_LLAMA2);
  g_assert_true (npu_chat_template_has_bos (t));
  assert_chat (t, NULL, " Describe the image. ", TRUE,
      "<s>[INST] Describe the image. [/INST]");
  assert_chat (t, "Be brief.", "Hi", TRUE,
      "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]");
  /* BOS is in the text: tokenizing without add_special gives exactly one */
  prompt = npu_chat_format (t, NULL, "Hi", TRUE);
  ids = npu_tokenizer_encode (l->tok, prompt, -1,
      !npu_chat_template_has_bos (t), TRUE, &n);
  g_assert_cmpint (ids[0], ==, 1);
  g_assert_cmpint (ids[1], !=, 1);
  g_free (ids);
  g_free (prompt);
  npu_chat_template_free (t);

  model_free (q);
  model_free (l);
  g_free (qp);
  g_free (lp);
}

static NpuChatTemplate *
chat_from_template (const gchar * tpl, GError ** error)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  GBytes *b;
  NpuGguf *g;
  NpuChatTemplate *t;

  if (tpl)
    npu_gguf_writer_add_string (w, "tokenizer.chat_template", tpl, -1, NULL);
  else
    npu_gguf_writer_add_u32 (w, "x", 0, NULL);
  b = npu_gguf_writer_write_bytes (w, NULL);
  npu_gguf_writer_free (w);
  g = npu_gguf_open_bytes (g_bytes_get_data (b, NULL), g_bytes_get_size (b),
      NULL);
  t = npu_chat_template_new_from_gguf (g, NULL, error);
  npu_gguf_free (g);
  g_bytes_unref (b);
  return t;
}

/* Meta-Llama-3-8B-Instruct's template */
static const gchar llama3_tpl[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

/* SmolLM-Instruct style ChatML: no default system turn */
static const gchar smol_tpl[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n'"
    " + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";

/* Qwen2-VL writes the default system turn as raw template text */
static const gchar qwen2vl_tpl[] =
    "{% set image_count = namespace(value=0) %}{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\n"
    "You are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>"
    "{{ message['role'] }}\n{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/* Gemma 3's template (google/gemma-3-*-it, as the converter stores it),
 * the parts that matter for [system?, user] */
static const gchar gemma3_tpl[] =
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n"
    "{%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "{%- set loop_messages = messages[1:] -%}\n{%- else -%}\n"
    "{%- set first_user_prefix = \"\" -%}\n"
    "{%- set loop_messages = messages -%}\n{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}"
    "{%- else -%}{%- set role = message['role'] -%}{%- endif -%}\n"
    "{{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first "
    "else \"\") }}\n{{ message['content'] | trim }}\n"
    "{{ '<end_of_turn>\\n' }}\n{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{'<start_of_turn>model\\n'}}"
    "{%- endif -%}\n";

static void
test_chat_families (void)
{
  GError *err = NULL;
  NpuChatTemplate *t;

  /* Llama 3: bos_token first, headers, both messages trimmed */
  t = chat_from_template (llama3_tpl, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_LLAMA3);
  g_assert_true (npu_chat_template_has_bos (t));
  assert_chat (t, "  Be brief. ", "Hi\n", TRUE,
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
      "Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
      "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  assert_chat (t, NULL, "Hi", FALSE,
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
      "Hi<|eot_id|>");
  npu_chat_template_free (t);

  t = chat_from_template (smol_tpl, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_CHATML);
  g_assert_null (npu_chat_template_get_default_system (t));
  assert_chat (t, NULL, "Hi", TRUE,
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  /* an empty system message is still a turn, as in Jinja */
  assert_chat (t, "", "Hi", FALSE,
      "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  npu_chat_template_free (t);

  t = chat_from_template (qwen2vl_tpl, &err);
  g_assert_no_error (err);
  g_assert_cmpstr (npu_chat_template_get_default_system (t), ==,
      "You are a helpful assistant.");
  npu_chat_template_free (t);

  /* Gemma: bos_token first, the system message (not trimmed) and a blank
   * line in the first user turn, the user message trimmed, the assistant
   * turn is "model" */
  t = chat_from_template (gemma3_tpl, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_GEMMA);
  g_assert_true (npu_chat_template_has_bos (t));
  g_assert_null (npu_chat_template_get_default_system (t));
  assert_chat (t, NULL, " Describe the image.\n", TRUE,
      "<bos><start_of_turn>user\nDescribe the image.<end_of_turn>\n"
      "<start_of_turn>model\n");
  assert_chat (t, " Be brief.", "Hi ", FALSE,
      "<bos><start_of_turn>user\n Be brief.\n\nHi<end_of_turn>\n");
  npu_chat_template_free (t);

  /* no template: plain completion (base model) */
  t = chat_from_template (NULL, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_NONE);
  assert_chat (t, NULL, "Once upon a time", TRUE, "Once upon a time");
  assert_chat (t, "A story.", "Once", TRUE, "A story.\n\nOnce");
  npu_chat_template_free (t);

  /* a template of another family */
  t = chat_from_template ("{{ messages[0]['content'] }}<|user|>", &err);
  g_assert_null (t);
  g_assert_error (err, NPU_CHAT_ERROR, NPU_CHAT_ERROR_UNKNOWN_TEMPLATE);
  g_clear_error (&err);
}

/* A conversation: the first turn, the answer as generated, then
 * npu_chat_format_next() must give what the template renders for the
 * messages [user, assistant, user] (written out from the templates quoted
 * in npuchat.c) */
static void
assert_conversation (NpuChatTemplate * t, const gchar * answer,
    const gchar * expected)
{
  gchar *first = npu_chat_format (t, NULL, "Hi", TRUE);
  gchar *next = npu_chat_format_next (t, "Bye", TRUE);
  gchar *all = g_strconcat (first, answer, next, NULL);

  g_assert_cmpstr (all, ==, expected);
  g_free (all);
  g_free (next);
  g_free (first);
}

/* An excerpt of gpt-oss's harmony template (chat_template.jinja): what
 * llama.cpp looks for, <|start|> and <|channel|> */
static const gchar harmony_tpl[] =
    "{%- for message in loop_messages -%}{%- if message.role == 'user' %}"
    "{{- '<|start|>user<|message|>' + message.content + '<|end|>' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|start|>assistant"
    "<|channel|>final<|message|>' + message.content + '<|end|>' }}"
    "{%- endif %}{%- endfor -%}{%- if add_generation_prompt -%}"
    "<|start|>assistant{%- endif -%}";

/* The strings llama.cpp's llm_chat_apply_template writes for
 * LLM_CHAT_TEMPLATE_OPENAI_MOE */
static void
test_chat_harmony (void)
{
  GError *err = NULL;
  NpuChatTemplate *t;

  t = chat_from_template (harmony_tpl, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_HARMONY);
  g_assert_cmpstr (npu_chat_family_name (NPU_CHAT_HARMONY), ==, "harmony");
  g_assert_false (npu_chat_template_has_bos (t));
  assert_chat (t, "Be brief.", "Hi", TRUE,
      "<|start|>system<|message|>Be brief.<|end|>"
      "<|start|>user<|message|>Hi<|end|><|start|>assistant");
  assert_chat (t, NULL, " Hi ", FALSE, "<|start|>user<|message|> Hi <|end|>");
  assert_conversation (t, "<|channel|>final<|message|>Hello",
      "<|start|>user<|message|>Hi<|end|><|start|>assistant"
      "<|channel|>final<|message|>Hello<|return|>"
      "<|start|>user<|message|>Bye<|end|><|start|>assistant");
  npu_chat_template_free (t);

  t = npu_chat_template_new_from_name ("harmony", &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_HARMONY);
  npu_chat_template_free (t);
}

static void
test_chat_next (void)
{
  NpuChatTemplate *t;
  GError *err = NULL;

  t = npu_chat_template_new_from_name ("chatml", &err);
  assert_conversation (t, "Hello",
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello"
      "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
      "<|im_start|>assistant\n");
  npu_chat_template_free (t);

  /* the default system message comes with the first turn only */
  t = npu_chat_template_new_from_name ("qwen2", &err);
  assert_conversation (t, "Hello",
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello"
      "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
      "<|im_start|>assistant\n");
  npu_chat_template_free (t);

  t = npu_chat_template_new_from_name ("llama3", &err);
  assert_conversation (t, "Hello",
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
      "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
      "Hello<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
      "Bye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  npu_chat_template_free (t);

  /* assistant: ' ' + content.strip() + ' ' + eos_token */
  t = npu_chat_template_new_from_name ("llama2", &err);
  assert_conversation (t, " Hello",
      "<s>[INST] Hi [/INST] Hello </s><s>[INST] Bye [/INST]");
  npu_chat_template_free (t);

  /* the answer is "model"'s turn, closed by '<end_of_turn>\n' */
  t = npu_chat_template_new_from_name ("gemma", &err);
  assert_conversation (t, "Hello",
      "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"
      "Hello<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n"
      "<start_of_turn>model\n");
  npu_chat_template_free (t);

  t = npu_chat_template_new_from_name ("none", &err);
  assert_conversation (t, " there.", "Hi there.\n\nBye");
  npu_chat_template_free (t);

  t = npu_chat_template_new_custom ("{system}Q: {prompt}\nA:", &err);
  assert_conversation (t, " Hello", "Q: Hi\nA: HelloQ: Bye\nA:");
  npu_chat_template_free (t);
  g_assert_no_error (err);
}

static void
test_chat_names (void)
{
  GError *err = NULL;
  NpuChatTemplate *t;

  t = npu_chat_template_new_from_name ("qwen2", &err);
  g_assert_no_error (err);
  assert_chat (t, NULL, "Hi", TRUE,
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  npu_chat_template_free (t);

  t = npu_chat_template_new_from_name ("chatml", &err);
  assert_chat (t, NULL, "Hi", TRUE,
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  npu_chat_template_free (t);

  t = npu_chat_template_new_from_name ("llama3", &err);
  assert_chat (t, NULL, "Hi", TRUE,
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
      "Hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  npu_chat_template_free (t);

  t = npu_chat_template_new_from_name ("completion", &err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_NONE);
  g_assert_cmpstr (npu_chat_family_name (NPU_CHAT_NONE), ==, "none");
  npu_chat_template_free (t);

  g_assert_null (npu_chat_template_new_from_name ("vicuna", &err));
  g_assert_error (err, NPU_CHAT_ERROR, NPU_CHAT_ERROR_UNKNOWN_TEMPLATE);
  g_clear_error (&err);

  /* user format: escapes interpreted, placeholders replaced once (a
   * "{system}" inside the prompt stays text) */
  t = npu_chat_template_new_custom ("### System:\\n{system}\\n### User:\\n"
      "{prompt}\\n### Assistant:\\n", &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_chat_template_get_family (t), ==, NPU_CHAT_CUSTOM);
  assert_chat (t, "Be brief.", "Say {system}", TRUE,
      "### System:\nBe brief.\n### User:\nSay {system}\n### Assistant:\n");
  assert_chat (t, NULL, "Hi", TRUE,
      "### System:\n\n### User:\nHi\n### Assistant:\n");
  npu_chat_template_free (t);
  g_assert_null (npu_chat_template_new_custom ("no placeholder", &err));
  g_assert_error (err, NPU_CHAT_ERROR, NPU_CHAT_ERROR_INVALID);
  g_clear_error (&err);
}

int
main (int argc, char **argv)
{
  gint ret;
  gchar *p;

  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("npu-tokenizer-XXXXXX", NULL);
  g_assert_nonnull (tmpdir);

  g_test_add_func ("/tokenizer/spm/merges", test_spm_merges);
  g_test_add_func ("/tokenizer/spm/byte-fallback", test_spm_byte_fallback);
  g_test_add_func ("/tokenizer/spm/special", test_spm_special);
  g_test_add_func ("/tokenizer/spm/decode", test_spm_decode);
  g_test_add_func ("/tokenizer/bpe/merges", test_bpe_merges);
  g_test_add_func ("/tokenizer/bpe/pre-tokenizers", test_bpe_pre);
  g_test_add_func ("/tokenizer/bpe/special", test_bpe_special);
  g_test_add_func ("/tokenizer/bpe/decode", test_bpe_decode);
  g_test_add_func ("/tokenizer/errors", test_errors);
  g_test_add_func ("/tokenizer/stream", test_stream);
  g_test_add_func ("/tokenizer/generated/llama", test_gen_llama);
  g_test_add_func ("/tokenizer/generated/qwen2", test_gen_qwen2);
  g_test_add_func ("/chat/generated", test_chat_generated);
  g_test_add_func ("/chat/families", test_chat_families);
  g_test_add_func ("/chat/names", test_chat_names);
  g_test_add_func ("/chat/next", test_chat_next);
  g_test_add_func ("/chat/harmony", test_chat_harmony);
  ret = g_test_run ();

  p = g_build_filename (tmpdir, "llama.gguf", NULL);
  g_unlink (p);
  g_free (p);
  p = g_build_filename (tmpdir, "qwen2.gguf", NULL);
  g_unlink (p);
  g_free (p);
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return ret;
}
