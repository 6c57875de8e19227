/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the Hugging Face directory reader (npuhfmodel.h)
 * and of the JSON it reads (npujson.h)
 *
 * The directory is written by tests/tools/npuhfexport.c from a generated
 * gpt-oss GGUF, from the transformers side of the layout (gate in the even
 * rows of gate_up_proj, gpt-oss's nibble order, row-major shapes), so that
 * a model read from it must compute exactly what the GGUF computes: the
 * same logits bit for bit, the same token ids, the same template. */
#include "core/formats/npuhfmodel.h"
#include "core/formats/npujson.h"
#include "core/formats/npumxfp4.h"
#include "core/models/npullm.h"
#include "core/device/npubackend.h"
#include "core/text/nputokenizer.h"
#include "../tools/npumodelgen.h"
#include "../tools/npuhfexport.h"
#include "../npullmeval.h"

#include <glib/gstdio.h>
#include <string.h>

static gchar *tmpdir;
static NpuDevice *device;
static NpuQueue *queue;

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */

static void
test_json_values (void)
{
  const gchar *text = " {\"a\": [1, -2.5e1, true, false, null], "
      "\"s\": \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\", "
      "\"big\": 12345678901234567890, \"a\": 2, \"o\": {}} ";
  GError *error = NULL;
  NpuJson *root = npu_json_parse (text, strlen (text), "t", &error);
  const NpuJson *a;
  gdouble d;
  gint64 i;
  gboolean b;

  g_assert_no_error (error);
  g_assert_cmpint (npu_json_type (root), ==, NPU_JSON_OBJECT);
  g_assert_cmpuint (npu_json_size (root), ==, 5);
  a = npu_json_member (root, "a");
  /* the first of a repeated name */
  g_assert_cmpuint (npu_json_size (a), ==, 5);
  g_assert_true (npu_json_int (npu_json_at (a, 0), &i));
  g_assert_cmpint (i, ==, 1);
  g_assert_false (npu_json_int (npu_json_at (a, 1), &i));
  g_assert_true (npu_json_number (npu_json_at (a, 1), &d));
  g_assert_cmpfloat (d, ==, -25.0);
  g_assert_true (npu_json_bool (npu_json_at (a, 2), &b) && b);
  g_assert_true (npu_json_bool (npu_json_at (a, 3), &b) && !b);
  g_assert_cmpint (npu_json_type (npu_json_at (a, 4)), ==, NPU_JSON_NULL);
  g_assert_cmpstr (npu_json_string (npu_json_member (root, "s")), ==,
      "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  /* beyond 64 bits: a number, not an integer */
  g_assert_false (npu_json_int (npu_json_member (root, "big"), &i));
  g_assert_true (npu_json_number (npu_json_member (root, "big"), &d));
  g_assert_cmpfloat (d, ==, 12345678901234567890.0);
  g_assert_cmpuint (npu_json_size (npu_json_member (root, "o")), ==, 0);
  g_assert_cmpstr (npu_json_key_at (root, 4), ==, "o");
  g_assert_null (npu_json_member (a, "x"));
  npu_json_free (root);
}

static void
test_json_errors (void)
{
  static const struct
  {
    const gchar *text, *message;
  } bad[] = {
    {"[1,]", "t: JSON at byte 3: expected a value"},
    {"{\"a\":1,}", "t: JSON at byte 7: expected a member name"},
    {"[01]", "t: JSON at byte 3: number with a leading zero"},
    {"[1.]", "t: JSON at byte 3: no digits after the decimal point"},
    {"\"\\u0000\"", "t: JSON at byte 7: \\u0000 in a string"},
    {"\"\\udc00\"", "t: JSON at byte 7: lone low surrogate \\uDC00"},
    {"\"\\ud800x\"", "t: JSON at byte 7: lone high surrogate \\uD800"},
    {"\"\xff\"", "t: JSON at byte 1: string is not valid UTF-8"},
    {"\"a\nb\"", "t: JSON at byte 2: control character 0x0a in a string"},
    {"[1] 2", "t: JSON at byte 4: text after the value"},
    {"[NaN]", "t: JSON at byte 1: expected a value"},
    {"{\"a\" 1}", "t: JSON at byte 5: expected ':'"},
    {"[1 2]", "t: JSON at byte 3: expected ',' or ']'"},
    {"\"abc", "t: JSON at byte 4: unterminated string"},
    {"", "t: JSON at byte 0: text ends where a value was expected"},
  };
  GString *deep = g_string_new (NULL);
  GError *error = NULL;
  guint k;

  for (k = 0; k < G_N_ELEMENTS (bad); k++) {
    g_assert_null (npu_json_parse (bad[k].text, strlen (bad[k].text), "t",
            &error));
    g_assert_error (error, NPU_JSON_ERROR, NPU_JSON_ERROR_SYNTAX);
    g_assert_cmpstr (error->message, ==, bad[k].message);
    g_clear_error (&error);
  }
  for (k = 0; k <= NPU_JSON_MAX_DEPTH; k++)
    g_string_append_c (deep, '[');
  g_assert_null (npu_json_parse (deep->str, deep->len, "t", &error));
  g_assert_cmpstr (error->message, ==, "t: JSON at byte 64: nested deeper "
      "than 64");
  g_clear_error (&error);
  g_string_free (deep, TRUE);
}

/* ------------------------------------------------------------------------ */
/* A gpt-oss model as a GGUF and as a directory                              */

static gchar *
write_gguf (const gchar * name, guint32 wtype)
{
  NpuTextModelParams p;
  GError *error = NULL;
  gchar *path = g_build_filename (tmpdir, name, NULL);

  g_assert_true (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_GPT_OSS,
          "tiny", &error));
  p.wtype = wtype;
  p.harmony = TRUE;
  p.seed = 41;
  g_assert_true (npu_model_gen_write_text (&p, path, NULL, &error));
  g_assert_no_error (error);
  return path;
}

static gchar *
export (const gchar * gguf, const gchar * name, guint shards,
    gboolean bf16_vectors, gboolean pairs)
{
  NpuHfExportParams p = { shards, bf16_vectors, pairs };
  gchar *dir = g_build_filename (tmpdir, name, NULL);
  GError *error = NULL;

  g_assert_true (npu_hf_export (gguf, dir, &p, &error));
  g_assert_no_error (error);
  return dir;
}

#define N_PROMPT 24
#define N_STEPS 4

/* Logits of a prompt and of N_STEPS tokens after it, one row each */
static float *
run_logits (NpuLlmModel * model, guint * n_vocab)
{
  NpuLlmContextParams cp;
  NpuLlmContext *ctx;
  GError *error = NULL;
  gint32 tokens[N_PROMPT + N_STEPS];
  guint v = npu_llm_model_get_hparams (model)->n_vocab, i;
  float *out = g_new (float, (gsize) v * (1 + N_STEPS));

  npu_llm_context_params_init (&cp);
  cp.n_ctx = 64;
  ctx = npu_llm_context_new (model, &cp, &error);
  g_assert_no_error (error);
  for (i = 0; i < G_N_ELEMENTS (tokens); i++)
    tokens[i] = (gint32) ((i * 131u + 7u) % v);
  npu_test_eval_on_queue (queue, ctx, tokens, NULL, N_PROMPT);
  memcpy (out, npu_llm_get_logits (ctx), v * sizeof (float));
  for (i = 0; i < N_STEPS; i++) {
    npu_test_eval_on_queue (queue, ctx, tokens + N_PROMPT + i, NULL, 1);
    memcpy (out + (gsize) v * (1 + i), npu_llm_get_logits (ctx),
        v * sizeof (float));
  }
  npu_llm_context_free (ctx);
  *n_vocab = v;
  return out;
}

static const gchar *corpus[] = {
  "Hello world, it's 2026 and the camera sees 3 cats.",
  "  spaces   and\ttabs\n\nnew lines",
  "<|start|>user<|message|>What is in the frame?<|end|>",
  "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e 123456",
};

static void
check_same_tokenizer (const NpuGguf * a, const NpuGguf * b)
{
  GError *error = NULL;
  NpuTokenizer *ta = npu_tokenizer_new_from_gguf (a, &error);
  NpuTokenizer *tb;
  guint k;

  g_assert_no_error (error);
  tb = npu_tokenizer_new_from_gguf (b, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (npu_tokenizer_get_pre (ta), ==, npu_tokenizer_get_pre (tb));
  for (k = 0; k < G_N_ELEMENTS (corpus); k++) {
    gsize na, nb;
    gint32 *ia = npu_tokenizer_encode (ta, corpus[k], -1, TRUE, TRUE, &na);
    gint32 *ib = npu_tokenizer_encode (tb, corpus[k], -1, TRUE, TRUE, &nb);

    g_assert_cmpuint (na, ==, nb);
    g_assert_cmpmem (ia, na * 4, ib, nb * 4);
    g_free (ia);
    g_free (ib);
  }
  g_assert_cmpstr (npu_gguf_get_string (a, "tokenizer.chat_template", NULL,
          NULL), ==, npu_gguf_get_string (b, "tokenizer.chat_template", NULL,
          NULL));
  npu_tokenizer_free (ta);
  npu_tokenizer_free (tb);
}

/* The directory computes what the GGUF does, bit for bit: the same
 * matrices in place, the same MXFP4 blocks after the rewrite */
static void
check_same_model (guint32 wtype, guint shards, gboolean pairs)
{
  gchar *gguf = write_gguf ("same.gguf", wtype);
  gchar *dir = export (gguf, "same-hf", shards, FALSE, pairs);
  GError *error = NULL;
  NpuLlmModel *a, *b;
  float *la, *lb;
  guint va, vb;
  gchar *shard;

  a = npu_llm_model_new_from_file (gguf, NPU_LLM_LOAD_IN_PLACE, &error);
  g_assert_no_error (error);
  /* the directory named by itself, by its config.json or by a shard */
  shard = shards > 1 ? g_build_filename (dir, "model-00002-of-00002"
      ".safetensors", NULL) : g_build_filename (dir, "config.json", NULL);
  b = npu_llm_model_new_from_file (shard, NPU_LLM_LOAD_IN_PLACE, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (npu_llm_model_get_converted_bytes (b), ==, 0);
  g_assert_cmpuint (npu_llm_model_get_decode_bytes (a), ==,
      npu_llm_model_get_decode_bytes (b));
  check_same_tokenizer (npu_llm_model_get_metadata (a),
      npu_llm_model_get_metadata (b));
  la = run_logits (a, &va);
  lb = run_logits (b, &vb);
  g_assert_cmpuint (va, ==, vb);
  g_assert_cmpmem (la, (gsize) va * (1 + N_STEPS) * 4, lb,
      (gsize) vb * (1 + N_STEPS) * 4);
  g_free (la);
  g_free (lb);
  npu_llm_model_free (a);
  npu_llm_model_free (b);
  g_free (shard);
  npu_hf_export_remove (dir);
  g_unlink (gguf);
  g_free (dir);
  g_free (gguf);
}

static void
test_same_bf16 (void)
{
  check_same_model (NPU_GGML_TYPE_BF16, 2, FALSE);
}

static void
test_same_f32_one_file (void)
{
  check_same_model (NPU_GGML_TYPE_F32, 1, TRUE);
}

/* The test's own BF16 rounding (to nearest, ties to even) */
static float
bf16_value (float f)
{
  guint32 u, low;

  memcpy (&u, &f, 4);
  low = u & 0xFFFF;
  u &= 0xFFFF0000u;
  if (low > 0x8000 || (low == 0x8000 && (u & 0x10000)))
    u += 0x10000;
  memcpy (&f, &u, 4);
  return f;
}

/* A generated GGUF, the directory exported from it, and both opened */
typedef struct
{
  gchar *gguf, *dir;
  NpuGguf *g;
  NpuHfModel *hf;
} Pair;

static void
pair_open (Pair * p, const gchar * name, guint shards, gboolean bf16_vectors)
{
  gchar *file = g_strconcat (name, ".gguf", NULL);
  gchar *dir = g_strconcat (name, "-hf", NULL);
  GError *error = NULL;

  p->gguf = write_gguf (file, NPU_GGML_TYPE_BF16);
  p->dir = export (p->gguf, dir, shards, bf16_vectors, FALSE);
  p->g = npu_gguf_open (p->gguf, &error);
  g_assert_no_error (error);
  p->hf = npu_hf_model_open (p->dir, &error);
  g_assert_no_error (error);
  g_free (dir);
  g_free (file);
}

static void
pair_close (Pair * p)
{
  npu_hf_model_free (p->hf);
  npu_gguf_free (p->g);
  npu_hf_export_remove (p->dir);
  g_unlink (p->gguf);
  g_free (p->dir);
  g_free (p->gguf);
}

/* BF16 vectors are widened exactly; gate_up_proj_bias's even columns are
 * the gate's, the odd ones the up's */
static void
test_bf16_vectors (void)
{
  static const gchar *names[] = {
    "blk.0.attn_norm.weight", "blk.1.attn_sinks.weight",
    "blk.1.ffn_gate_exps.bias", "blk.0.ffn_up_exps.bias",
    "blk.1.ffn_down_exps.bias", "output_norm.weight",
  };
  Pair p;
  guint k;

  pair_open (&p, "vec", 3, TRUE);
  for (k = 0; k < G_N_ELEMENTS (names); k++) {
    const NpuGgufTensor *t = npu_gguf_find_tensor (p.g, names[k]);
    NpuTensorView v;
    guint64 i, n = t->ne[0] * t->ne[1];

    g_assert_true (npu_hf_model_lookup (names[k], &v, p.hf));
    g_assert_cmpuint (v.type, ==, NPU_GGML_TYPE_F32);
    g_assert_cmpmem (v.ne, sizeof (v.ne), t->ne, sizeof (v.ne));
    for (i = 0; i < n; i++)
      g_assert_cmpfloat (((const float *) v.data)[i], ==,
          bf16_value (((const float *) t->data)[i]));
  }
  /* the vectors copied */
  g_assert_cmpuint (npu_hf_model_get_rewritten_bytes (p.hf), >, 0);
  pair_close (&p);
}

/* The experts are rewritten one by one when first prepared, into ggml's
 * blocks of the GGUF's bytes; the rest of the tensor is never written */
static void
test_lazy_experts (void)
{
  Pair p;
  const NpuGgufTensor *t;
  NpuTensorView v;
  gsize per;
  guint64 before;
  guint e;

  pair_open (&p, "lazy", 2, FALSE);
  t = npu_gguf_find_tensor (p.g, "blk.1.ffn_up_exps.weight");
  per = t->n_bytes / t->ne[2];
  g_assert_true (npu_hf_model_lookup ("blk.1.ffn_up_exps.weight", &v, p.hf));
  g_assert_nonnull (v.prepare);
  g_assert_cmpuint (v.size, ==, t->n_bytes);
  before = npu_hf_model_get_rewritten_bytes (p.hf);
  v.prepare (v.prepare_data, 3);
  v.prepare (v.prepare_data, 3);
  g_assert_cmpuint (npu_hf_model_get_rewritten_bytes (p.hf), ==, before + per);
  g_assert_cmpmem ((const guint8 *) v.data + 3 * per, per,
      t->data + 3 * per, per);
  /* the others untouched: still the zero pages of the mapping */
  for (e = 0; e < t->ne[2]; e++) {
    const guint8 *q = (const guint8 *) v.data + e * per;

    if (e != 3)
      g_assert_true (q[0] == 0 && memcmp (q, q + 1, per - 1) == 0);
  }
  pair_close (&p);
}

/* ------------------------------------------------------------------------ */
/* Bad directories                                                           */

static void
replace_in_file (const gchar * dir, const gchar * file, const gchar * from,
    const gchar * to)
{
  gchar *path = g_build_filename (dir, file, NULL), *text, **parts, *joined;

  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_nonnull (strstr (text, from));
  parts = g_strsplit (text, from, 2);
  joined = g_strjoinv (to, parts);
  g_assert_true (g_file_set_contents (path, joined, -1, NULL));
  g_strfreev (parts);
  g_free (joined);
  g_free (text);
  g_free (path);
}

static void
expect_open_error (const gchar * dir, gint code, const gchar * message)
{
  GError *error = NULL;

  g_assert_null (npu_hf_model_open (dir, &error));
  g_assert_error (error, NPU_HF_MODEL_ERROR, code);
  if (!strstr (error->message, message))
    g_error ("\"%s\" does not say \"%s\"", error->message, message);
  g_error_free (error);
}

static void
test_bad_directories (void)
{
  static const struct
  {
    const gchar *file, *from, *to;
    gint code;
    const gchar *message;
  } cases[] = {
    {"config.json", "\"gpt_oss\"", "\"llama\"", NPU_HF_MODEL_ERROR_UNSUPPORTED,
        "model_type \"llama\": only gpt-oss"},
    {"config.json", "\"hidden_size\": 64", "\"hidden_size\": 96",
          NPU_HF_MODEL_ERROR_FORMAT,
        "tensor 'model.embed_tokens.weight' has shape [1024, 64]; "
          "config.json implies [*, 96]"},
    {"config.json", "\"swiglu_limit\": 7.0", "\"swiglu_limit\": 5.0",
        NPU_HF_MODEL_ERROR_UNSUPPORTED, "swiglu_limit 5"},
    {"config.json", "\"num_local_experts\": 8,", "",
        NPU_HF_MODEL_ERROR_FORMAT, "\"num_local_experts\" is missing"},
    {"config.json", "\"sliding_attention\", \"full",
          "\"full_attention\", \"full", NPU_HF_MODEL_ERROR_UNSUPPORTED,
        "layer_types[0]"},
    {"config.json", "]\n}", "]\n", NPU_HF_MODEL_ERROR_FORMAT,
        "config.json: JSON at byte"},
    {"model.safetensors.index.json", "\"model-00002-of-00002.safetensors\"",
          "\"../model-00002-of-00002.safetensors\"",
        NPU_HF_MODEL_ERROR_FORMAT, "shard \"../model-00002-of-00002"},
    {"model.safetensors.index.json", "\"model-00002-of-00002.safetensors\"",
          "\"model-00003-of-00002.safetensors\"",
        NPU_HF_MODEL_ERROR_IO, "model-00003-of-00002.safetensors"},
    {"model.safetensors.index.json", "\"lm_head.weight\"",
          "\"x.weight\":\"model-00002-of-00002.safetensors\","
          "\"lm_head.weight\"", NPU_HF_MODEL_ERROR_FORMAT,
        "model-00002-of-00002.safetensors: no tensor 'x.weight'"},
    {"model.safetensors.index.json",
          "\"model.layers.1.mlp.experts.down_proj_scales\"",
          "\"model.layers.1.mlp.experts.down_proj_scalez\"",
        NPU_HF_MODEL_ERROR_FORMAT, "no tensor 'model.layers.1.mlp.experts."
          "down_proj_scalez'"},
    {"tokenizer.json", "\"type\":\"BPE\"", "\"type\":\"WordPiece\"",
        NPU_HF_MODEL_ERROR_UNSUPPORTED, "model type \"WordPiece\""},
    {"tokenizer.json", "\\\\p{N}|", "\\\\p{N}{1,2}|",
        NPU_HF_MODEL_ERROR_UNSUPPORTED, "Split pattern is none we know"},
  };
  gchar *gguf = write_gguf ("bad.gguf", NPU_GGML_TYPE_BF16);
  gchar *missing = g_build_filename (tmpdir, "nothing-here", NULL);
  guint k;

  for (k = 0; k < G_N_ELEMENTS (cases); k++) {
    gchar *dir = export (gguf, "bad-hf", 2, FALSE, FALSE);

    replace_in_file (dir, cases[k].file, cases[k].from, cases[k].to);
    expect_open_error (dir, cases[k].code, cases[k].message);
    npu_hf_export_remove (dir);
    g_free (dir);
  }
  g_mkdir (missing, 0755);
  expect_open_error (missing, NPU_HF_MODEL_ERROR_IO, "config.json");
  g_rmdir (missing);
  g_free (missing);
  g_unlink (gguf);
  g_free (gguf);
}

int
main (int argc, char **argv)
{
  GError *error = NULL;
  int ret;

  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("test-hfmodel-XXXXXX", &error);
  g_assert_no_error (error);
  device = npu_device_new_cpu (2);
  queue = npu_queue_new (device, "test-hfmodel");
  g_test_add_func ("/hfmodel/json/values", test_json_values);
  g_test_add_func ("/hfmodel/json/errors", test_json_errors);
  g_test_add_func ("/hfmodel/gpt-oss/same-as-gguf-bf16", test_same_bf16);
  g_test_add_func ("/hfmodel/gpt-oss/same-as-gguf-f32-one-file",
      test_same_f32_one_file);
  g_test_add_func ("/hfmodel/gpt-oss/bf16-vectors", test_bf16_vectors);
  g_test_add_func ("/hfmodel/gpt-oss/lazy-experts", test_lazy_experts);
  g_test_add_func ("/hfmodel/gpt-oss/bad-directories", test_bad_directories);
  ret = g_test_run ();
  npu_queue_free (queue);
  npu_device_unref (device);
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return ret;
}
