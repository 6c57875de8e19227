/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a Hugging Face tokenizer.json as GGUF tokenizer keys (see
 * npuhftokenizer.h) */
#include "npuhftokenizer.h"

#include <string.h>

#include "npuhferror.h"

/* llama.cpp's token types (llama_token_type) */
enum
{
  TYPE_NORMAL = 1,
  TYPE_CONTROL = 3,
  TYPE_USER_DEFINED = 4,
  TYPE_UNUSED = 5,
};

/* Split patterns as tokenizer.json files spell them, and the name
 * llama.cpp's converter gives the pre-tokenizer */
static const struct
{
  const gchar *pre, *pattern;
} known_splits[] = {
  {"gpt-4o",
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"
        "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
        "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
        "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+"
        "|\\s+(?!\\S)|\\s+"},
  {"qwen2",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
        "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
  {"llama-bpe",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
        "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
        "|\\s+(?!\\S)|\\s+"},
};

static gboolean
fail (GError ** error, gint code, const gchar * fmt, ...)
G_GNUC_PRINTF (3, 4);

     static gboolean fail (GError ** error, gint code, const gchar * fmt, ...)
{
  va_list ap;
  gchar *msg;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error_literal (error, NPU_HF_MODEL_ERROR, code, msg);
  g_free (msg);
  return FALSE;
}

/* The pre-tokenizer's name from its Split pattern (alone or in a
 * Sequence); "gpt2" for a ByteLevel that splits with its own regex */
static gboolean
find_pre (const NpuJson * tok, const gchar ** pre, GError ** error)
{
  const NpuJson *pt = npu_json_member (tok, "pre_tokenizer");
  const NpuJson *list = npu_json_member (pt, "pretokenizers");
  const gchar *pattern = NULL;
  gboolean byte_level = FALSE, own_regex = FALSE;
  guint i, n = list ? npu_json_size (list) : 1;

  for (i = 0; i < n; i++) {
    const NpuJson *p = list ? npu_json_at (list, i) : pt;
    const gchar *type = npu_json_string (npu_json_member (p, "type"));
    gboolean use_regex = TRUE;

    if (g_strcmp0 (type, "Split") == 0 && !pattern)
      pattern = npu_json_string (npu_json_member (npu_json_member (p,
                  "pattern"), "Regex"));
    if (g_strcmp0 (type, "ByteLevel") == 0) {
      byte_level = TRUE;
      npu_json_bool (npu_json_member (p, "use_regex"), &use_regex);
      own_regex = own_regex || use_regex;
    }
  }
  if (!byte_level)
    return fail (error, NPU_HF_MODEL_ERROR_UNSUPPORTED, "tokenizer.json: "
        "the pre-tokenizer has no ByteLevel step (only byte-level BPE is "
        "read)");
  if (!pattern && own_regex) {
    *pre = "gpt2";
    return TRUE;
  }
  for (i = 0; pattern && i < G_N_ELEMENTS (known_splits); i++) {
    if (strcmp (pattern, known_splits[i].pattern) == 0) {
      *pre = known_splits[i].pre;
      return TRUE;
    }
  }
  return fail (error, NPU_HF_MODEL_ERROR_UNSUPPORTED, "tokenizer.json: "
      "the pre-tokenizer's Split pattern is none we know (o200k, Qwen2, "
      "Llama 3)");
}

/* Puts @s at @id, which must be free */
static gboolean
place (GPtrArray * tokens, GArray * types, gint64 id, const gchar * s,
    gint type, GError ** error)
{
  if (id < 0 || id >= (gint64) tokens->len)
    return fail (error, NPU_HF_MODEL_ERROR_FORMAT, "tokenizer.json: token "
        "\"%s\" has id %" G_GINT64_FORMAT ", outside the vocabulary", s, id);
  if (g_ptr_array_index (tokens, id) != NULL &&
      g_strcmp0 (g_ptr_array_index (tokens, id), s) != 0)
    return fail (error, NPU_HF_MODEL_ERROR_FORMAT, "tokenizer.json: id %"
        G_GINT64_FORMAT " is both \"%s\" and \"%s\"", id,
        (const gchar *) g_ptr_array_index (tokens, id), s);
  g_ptr_array_index (tokens, id) = (gpointer) s;
  g_array_index (types, gint32, id) = type;
  return TRUE;
}

/* The largest id either list names, + 1 */
static gint64
count_ids (const NpuJson * vocab, const NpuJson * added, gint64 n)
{
  guint i;
  gint64 id;

  for (i = 0; i < npu_json_size (vocab); i++)
    if (npu_json_int (npu_json_at (vocab, i), &id) && id >= n)
      n = id + 1;
  for (i = 0; i < npu_json_size (added); i++)
    if (npu_json_int (npu_json_member (npu_json_at (added, i), "id"), &id)
        && id >= n)
      n = id + 1;
  return n;
}

static gboolean
fill_vocab (const NpuJson * vocab, const NpuJson * added, GPtrArray * tokens,
    GArray * types, GError ** error)
{
  guint i;
  gint64 id;

  for (i = 0; i < npu_json_size (vocab); i++) {
    if (!npu_json_int (npu_json_at (vocab, i), &id))
      return fail (error, NPU_HF_MODEL_ERROR_FORMAT, "tokenizer.json: "
          "vocab[\"%s\"] is not an id", npu_json_key_at (vocab, i));
    if (!place (tokens, types, id, npu_json_key_at (vocab, i), TYPE_NORMAL,
            error))
      return FALSE;
  }
  for (i = 0; i < npu_json_size (added); i++) {
    const NpuJson *a = npu_json_at (added, i);
    const gchar *s = npu_json_string (npu_json_member (a, "content"));
    gboolean special = FALSE;

    npu_json_bool (npu_json_member (a, "special"), &special);
    if (!s || !npu_json_int (npu_json_member (a, "id"), &id))
      return fail (error, NPU_HF_MODEL_ERROR_FORMAT, "tokenizer.json: "
          "added_tokens[%u] has no content or id", i);
    /* convert_hf_to_gguf.py's does_token_look_special, the part that
     * applies to byte-level vocabularies */
    special = special || (g_str_has_prefix (s, "<|") &&
        g_str_has_suffix (s, "|>"));
    if (!place (tokens, types, id, s, special ? TYPE_CONTROL :
            TYPE_USER_DEFINED, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
add_vocab (NpuGgufWriter * w, const NpuJson * model, const NpuJson * added,
    const NpuJson * config, GError ** error)
{
  const NpuJson *vocab = npu_json_member (model, "vocab");
  gint64 n = 0, i;
  GPtrArray *tokens, *pads;
  GArray *types;
  gboolean ok;

  if (!vocab || npu_json_type (vocab) != NPU_JSON_OBJECT)
    return fail (error, NPU_HF_MODEL_ERROR_FORMAT,
        "tokenizer.json: model.vocab is not an object");
  npu_json_int (npu_json_member (config, "vocab_size"), &n);
  n = count_ids (vocab, added, MAX (n, 0));
  if (n == 0 || n > G_MAXINT32)
    return fail (error, NPU_HF_MODEL_ERROR_FORMAT, "tokenizer.json: a "
        "vocabulary of %" G_GINT64_FORMAT " tokens", n);
  tokens = g_ptr_array_new ();
  g_ptr_array_set_size (tokens, n);
  types = g_array_new (FALSE, TRUE, sizeof (gint32));
  g_array_set_size (types, n);
  pads = g_ptr_array_new_with_free_func (g_free);
  ok = fill_vocab (vocab, added, tokens, types, error);
  for (i = 0; ok && i < n; i++) {
    if (g_ptr_array_index (tokens, i) == NULL) {
      gchar *pad = g_strdup_printf ("[PAD%" G_GINT64_FORMAT "]", i);

      g_ptr_array_add (pads, pad);
      g_ptr_array_index (tokens, i) = pad;
      g_array_index (types, gint32, i) = TYPE_UNUSED;
    }
  }
  ok = ok && npu_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens",
      (const gchar * const *) tokens->pdata, n, error)
      && npu_gguf_writer_add_array (w, "tokenizer.ggml.token_type",
      NPU_GGUF_TYPE_INT32, types->data, n, error);
  g_ptr_array_unref (pads);
  g_ptr_array_unref (tokens);
  g_array_unref (types);
  return ok;
}

/* Merges as "a b", from either spelling: "a b" or ["a", "b"] */
static gboolean
add_merges (NpuGgufWriter * w, const NpuJson * model, GError ** error)
{
  const NpuJson *merges = npu_json_member (model, "merges");
  guint n = npu_json_size (merges), i;
  GPtrArray *out = g_ptr_array_new_with_free_func (g_free);
  gboolean ok = TRUE;

  for (i = 0; ok && i < n; i++) {
    const NpuJson *m = npu_json_at (merges, i);
    const gchar *s = npu_json_string (m);
    const gchar *a = npu_json_string (npu_json_at (m, 0));
    const gchar *b = npu_json_string (npu_json_at (m, 1));

    if (s && strchr (s, ' '))
      g_ptr_array_add (out, g_strdup (s));
    else if (!s && a && b && npu_json_size (m) == 2)
      g_ptr_array_add (out, g_strconcat (a, " ", b, NULL));
    else
      ok = fail (error, NPU_HF_MODEL_ERROR_FORMAT, "tokenizer.json: "
          "merges[%u] is neither \"a b\" nor [\"a\", \"b\"]", i);
  }
  ok = ok && npu_gguf_writer_add_string_array (w, "tokenizer.ggml.merges",
      (const gchar * const *) out->pdata, out->len, error);
  g_ptr_array_unref (out);
  return ok;
}

/* The id of a token spelled @s, -1 if none */
static gint64
id_of (const NpuJson * vocab, const NpuJson * added, const gchar * s)
{
  const NpuJson *v;
  guint i;
  gint64 id;

  for (i = 0; s && i < npu_json_size (added); i++) {
    const NpuJson *a = npu_json_at (added, i);

    if (g_strcmp0 (npu_json_string (npu_json_member (a, "content")), s) == 0
        && npu_json_int (npu_json_member (a, "id"), &id))
      return id;
  }
  v = s ? npu_json_member (vocab, s) : NULL;
  return v && npu_json_int (v, &id) ? id : -1;
}

static gboolean
add_special_ids (NpuGgufWriter * w, const NpuJson * model,
    const NpuJson * added, const NpuJson * tcfg, const NpuJson * config,
    GError ** error)
{
  static const struct
  {
    const gchar *hf, *config_key, *gguf;
  } specials[] = {
    {"bos_token", "bos_token_id", "tokenizer.ggml.bos_token_id"},
    {"eos_token", "eos_token_id", "tokenizer.ggml.eos_token_id"},
    {"pad_token", "pad_token_id", "tokenizer.ggml.padding_token_id"},
    {"unk_token", "unk_token_id", "tokenizer.ggml.unknown_token_id"},
  };
  const NpuJson *vocab = npu_json_member (model, "vocab");
  gboolean ok = TRUE, flag;
  guint i;

  for (i = 0; ok && i < G_N_ELEMENTS (specials); i++) {
    const NpuJson *t = npu_json_member (tcfg, specials[i].hf);
    const NpuJson *c = npu_json_member (config, specials[i].config_key);
    const gchar *s = npu_json_string (t);
    gint64 id;

    if (!s)
      s = npu_json_string (npu_json_member (t, "content"));
    id = id_of (vocab, added, s);
    /* config.json may hold a list of eos ids: the first is the one */
    if (id < 0 && !npu_json_int (c, &id) && !npu_json_int (npu_json_at (c,
                0), &id))
      continue;
    if (id >= 0 && id <= G_MAXUINT32)
      ok = npu_gguf_writer_add_u32 (w, specials[i].gguf, (guint32) id, error);
  }
  if (ok && npu_json_bool (npu_json_member (tcfg, "add_bos_token"), &flag))
    ok = npu_gguf_writer_add_bool (w, "tokenizer.ggml.add_bos_token", flag,
        error);
  if (ok && npu_json_bool (npu_json_member (tcfg, "add_eos_token"), &flag))
    ok = npu_gguf_writer_add_bool (w, "tokenizer.ggml.add_eos_token", flag,
        error);
  return ok;
}

static gboolean
add_chat_template (NpuGgufWriter * w, const gchar * dir,
    const NpuJson * tcfg, GError ** error)
{
  gchar *path = g_build_filename (dir, "chat_template.jinja", NULL);
  const NpuJson *t = npu_json_member (tcfg, "chat_template");
  gchar *text = NULL;
  const gchar *tmpl = npu_json_string (t);
  gboolean ok = TRUE;
  guint i;

  if (g_file_test (path, G_FILE_TEST_EXISTS)) {
    ok = g_file_get_contents (path, &text, NULL, error);
    tmpl = text;
  }
  for (i = 0; ok && !tmpl && i < npu_json_size (t); i++)
    if (g_strcmp0 (npu_json_string (npu_json_member (npu_json_at (t, i),
                    "name")), "default") == 0)
      tmpl = npu_json_string (npu_json_member (npu_json_at (t, i), "template"));
  if (ok && tmpl)
    ok = npu_gguf_writer_add_string (w, "tokenizer.chat_template", tmpl, -1,
        error);
  g_free (text);
  g_free (path);
  return ok;
}

gboolean
npu_hf_tokenizer_add_keys (NpuGgufWriter * w, const gchar * dir,
    const NpuJson * config, GError ** error)
{
  gchar *path = g_build_filename (dir, "tokenizer.json", NULL);
  NpuJson *tok = npu_json_parse_file (path, error), *tcfg = NULL;
  const NpuJson *model = npu_json_member (tok, "model");
  const NpuJson *added = npu_json_member (tok, "added_tokens");
  const gchar *pre = NULL;
  gboolean ok = tok != NULL;

  g_free (path);
  path = g_build_filename (dir, "tokenizer_config.json", NULL);
  if (ok && g_file_test (path, G_FILE_TEST_EXISTS))
    ok = (tcfg = npu_json_parse_file (path, error)) != NULL;
  g_free (path);
  if (ok && g_strcmp0 (npu_json_string (npu_json_member (model, "type")),
          "BPE") != 0)
    ok = fail (error, NPU_HF_MODEL_ERROR_UNSUPPORTED, "tokenizer.json: "
        "model type \"%s\" (only byte-level BPE is read)",
        npu_json_string (npu_json_member (model, "type")));
  ok = ok && find_pre (tok, &pre, error)
      && npu_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2", -1,
      error)
      && npu_gguf_writer_add_string (w, "tokenizer.ggml.pre", pre, -1, error)
      && add_vocab (w, model, added, config, error)
      && add_merges (w, model, error)
      && add_special_ids (w, model, added, tcfg, config, error)
      && add_chat_template (w, dir, tcfg, error);
  npu_json_free (tcfg);
  npu_json_free (tok);
  return ok;
}
