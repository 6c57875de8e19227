/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: a gpt-oss GGUF written out as OpenAI's Hugging Face
 * directory (see npuhfexport.h) */
#include "npuhfexport.h"

#include <glib/gstdio.h>
#include <string.h>

#include "core/formats/npugguf.h"
#include "core/formats/npumxfp4.h"

typedef struct
{
  gchar *name;
  const gchar *dtype;
  guint n_dims;
  guint64 shape[4];
  guint8 *data;
  gsize size;
  guint shard;
} Out;

typedef struct
{
  const NpuGguf *g;
  const NpuHfExportParams *p;
  GPtrArray *out;               /* Out */
  guint n_layer, n_expert, n_ff;
} Export;

static void
out_free (gpointer p)
{
  Out *o = p;

  g_free (o->name);
  g_free (o->data);
  g_free (o);
}

static gboolean
fail (GError ** error, const gchar * what)
{
  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "hf export: %s", what);
  return FALSE;
}

static Out *
add (Export * x, const gchar * name, const gchar * dtype, guint shard,
    gsize size, guint n_dims, guint64 d0, guint64 d1, guint64 d2, guint64 d3)
{
  Out *o = g_new0 (Out, 1);

  o->name = g_strdup (name);
  o->dtype = dtype;
  o->shard = shard;
  o->size = size;
  o->data = g_malloc (size);
  o->n_dims = n_dims;
  o->shape[0] = d0, o->shape[1] = d1, o->shape[2] = d2, o->shape[3] = d3;
  g_ptr_array_add (x->out, o);
  return o;
}

static guint16
bf16_round (float f)
{
  guint32 u;

  memcpy (&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return u >> 16;
}

static gboolean
put_floats (Export * x, Out * o, guint64 i, float v)
{
  if (x->p->bf16_vectors) {
    guint16 h = bf16_round (v);

    memcpy (o->data + 2 * i, &h, 2);
  } else {
    memcpy (o->data + 4 * i, &v, 4);
  }
  return TRUE;
}

static const gchar *
vector_dtype (Export * x, gsize * size)
{
  *size = x->p->bf16_vectors ? 2 : 4;
  return x->p->bf16_vectors ? "BF16" : "F32";
}

/* A 2-D matrix in its own type, the shape reversed into row-major */
static gboolean
add_matrix (Export * x, const gchar * gguf, const gchar * hf, guint shard,
    GError ** error)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (x->g, gguf);
  const gchar *dtype;
  Out *o;

  if (!t)
    return strcmp (gguf, "output.weight") == 0 || fail (error, gguf);
  dtype = t->type == NPU_GGML_TYPE_F32 ? "F32" : t->type ==
      NPU_GGML_TYPE_F16 ? "F16" : t->type == NPU_GGML_TYPE_BF16 ? "BF16" : NULL;
  if (!dtype || t->n_dims != 2)
    return fail (error, "matrices must be 2-D f32, f16 or bf16 to export");
  o = add (x, hf, dtype, shard, t->n_bytes, 2, t->ne[1], t->ne[0], 0, 0);
  memcpy (o->data, t->data, t->n_bytes);
  return TRUE;
}

/* An F32 vector (or a 2-D bias) */
static gboolean
add_vector (Export * x, const gchar * gguf, const gchar * hf, guint shard,
    GError ** error)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (x->g, gguf);
  guint64 n, i;
  gsize es;
  const gchar *dtype = vector_dtype (x, &es);
  Out *o;

  if (!t || t->type != NPU_GGML_TYPE_F32 || t->n_dims > 2)
    return fail (error, gguf);
  n = t->ne[0] * t->ne[1];
  o = t->n_dims == 1 ? add (x, hf, dtype, shard, n * es, 1, n, 0, 0, 0) :
      add (x, hf, dtype, shard, n * es, 2, t->ne[1], t->ne[0], 0, 0);
  for (i = 0; i < n; i++)
    put_floats (x, o, i, ((const float *) t->data)[i]);
  return TRUE;
}

/* gate_up_proj_bias [E, 2F]: gate in the even columns, up in the odd */
static gboolean
add_gate_up_bias (Export * x, guint il, const gchar * hf, guint shard,
    GError ** error)
{
  gchar gn[64], un[64];
  const NpuGgufTensor *g, *u;
  guint64 E = x->n_expert, F = x->n_ff, e, f;
  gsize es;
  const gchar *dtype = vector_dtype (x, &es);
  Out *o;

  g_snprintf (gn, sizeof (gn), "blk.%u.ffn_gate_exps.bias", il);
  g_snprintf (un, sizeof (un), "blk.%u.ffn_up_exps.bias", il);
  g = npu_gguf_find_tensor (x->g, gn);
  u = npu_gguf_find_tensor (x->g, un);
  if (!g || !u || g->type != NPU_GGML_TYPE_F32 || u->type != NPU_GGML_TYPE_F32)
    return fail (error, gn);
  o = add (x, hf, dtype, shard, E * 2 * F * es, 2, E, 2 * F, 0, 0);
  for (e = 0; e < E; e++) {
    for (f = 0; f < F; f++) {
      put_floats (x, o, e * 2 * F + 2 * f, ((const float *) g->data)[e * F +
              f]);
      put_floats (x, o, e * 2 * F + 2 * f + 1,
          ((const float *) u->data)[e * F + f]);
    }
  }
  return TRUE;
}

/* ggml's block (qs[j]: element j low, j + 16 high) as gpt-oss's 16 bytes
 * (byte k: element 2k low, 2k + 1 high) */
static void
block_to_gpt_oss (const NpuBlockMxfp4 * b, guint8 * codes)
{
  guint k;

  for (k = 0; k < 16; k++) {
    guint m0 = 2 * k, m1 = 2 * k + 1;
    guint c0 = m0 < 16 ? b->qs[m0] & 0x0F : b->qs[m0 - 16] >> 4;
    guint c1 = m1 < 16 ? b->qs[m1] & 0x0F : b->qs[m1 - 16] >> 4;

    codes[k] = c0 | c1 << 4;
  }
}

/* "<hf>_blocks" + "<hf>_scales" from one GGUF expert tensor [K, R, E], or
 * from two ([K, F, E] each) with their rows interleaved */
static gboolean
add_experts (Export * x, const gchar * first, const gchar * second,
    const gchar * hf, guint shard, GError ** error)
{
  const NpuGgufTensor *a = npu_gguf_find_tensor (x->g, first);
  const NpuGgufTensor *b = second ? npu_gguf_find_tensor (x->g, second) : a;
  guint n_src = second ? 2 : 1;
  guint64 nb, R, E, rows, e, r, k;
  gchar *name;
  Out *blocks, *scales;

  if (!a || !b || a->type != NPU_GGML_TYPE_MXFP4 ||
      b->type != NPU_GGML_TYPE_MXFP4 || a->n_dims != 3)
    return fail (error, first);
  nb = a->ne[0] / 32, R = a->ne[1], E = a->ne[2], rows = R * n_src;
  name = g_strconcat (hf, "_blocks", NULL);
  blocks = add (x, name, "U8", shard, E * rows * nb * 16, 4, E, rows, nb, 16);
  g_free (name);
  name = g_strconcat (hf, "_scales", NULL);
  scales = add (x, name, "U8", shard, E * rows * nb, 3, E, rows, nb, 0);
  g_free (name);
  for (e = 0; e < E; e++) {
    for (r = 0; r < rows; r++) {
      const NpuGgufTensor *src = r % n_src == 0 ? a : b;
      const NpuBlockMxfp4 *in = (const NpuBlockMxfp4 *) src->data +
          (e * R + r / n_src) * nb;
      guint64 at = (e * rows + r) * nb;

      for (k = 0; k < nb; k++) {
        block_to_gpt_oss (in + k, blocks->data + (at + k) * 16);
        scales->data[at + k] = in[k].e;
      }
    }
  }
  return TRUE;
}

static gboolean
add_layer (Export * x, guint il, guint shard, GError ** error)
{
  static const struct
  {
    const gchar *gguf, *hf;
    gboolean matrix;
  } plain[] = {
    {"attn_norm.weight", "input_layernorm.weight", FALSE},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", FALSE},
    {"attn_q.weight", "self_attn.q_proj.weight", TRUE},
    {"attn_q.bias", "self_attn.q_proj.bias", FALSE},
    {"attn_k.weight", "self_attn.k_proj.weight", TRUE},
    {"attn_k.bias", "self_attn.k_proj.bias", FALSE},
    {"attn_v.weight", "self_attn.v_proj.weight", TRUE},
    {"attn_v.bias", "self_attn.v_proj.bias", FALSE},
    {"attn_output.weight", "self_attn.o_proj.weight", TRUE},
    {"attn_output.bias", "self_attn.o_proj.bias", FALSE},
    {"attn_sinks.weight", "self_attn.sinks", FALSE},
    {"ffn_gate_inp.weight", "mlp.router.weight", TRUE},
    {"ffn_gate_inp.bias", "mlp.router.bias", FALSE},
    {"ffn_down_exps.bias", "mlp.experts.down_proj_bias", FALSE},
  };
  gchar g[96], h[96], g2[96];
  gboolean ok = TRUE;
  guint i;

  for (i = 0; ok && i < G_N_ELEMENTS (plain); i++) {
    g_snprintf (g, sizeof (g), "blk.%u.%s", il, plain[i].gguf);
    g_snprintf (h, sizeof (h), "model.layers.%u.%s", il, plain[i].hf);
    ok = plain[i].matrix ? add_matrix (x, g, h, shard, error) :
        add_vector (x, g, h, shard, error);
  }
  g_snprintf (h, sizeof (h), "model.layers.%u.mlp.experts.gate_up_proj_bias",
      il);
  ok = ok && add_gate_up_bias (x, il, h, shard, error);
  g_snprintf (g, sizeof (g), "blk.%u.ffn_gate_exps.weight", il);
  g_snprintf (g2, sizeof (g2), "blk.%u.ffn_up_exps.weight", il);
  g_snprintf (h, sizeof (h), "model.layers.%u.mlp.experts.gate_up_proj", il);
  ok = ok && add_experts (x, g, g2, h, shard, error);
  g_snprintf (g, sizeof (g), "blk.%u.ffn_down_exps.weight", il);
  g_snprintf (h, sizeof (h), "model.layers.%u.mlp.experts.down_proj", il);
  return ok && add_experts (x, g, NULL, h, shard, error);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

static void
json_string (GString * s, const gchar * str, gsize len)
{
  gsize i;

  g_string_append_c (s, '"');
  for (i = 0; i < len; i++) {
    guint8 c = str[i];

    if (c == '"' || c == '\\')
      g_string_append_printf (s, "\\%c", c);
    else if (c < 0x20)
      g_string_append_printf (s, "\\u%04x", c);
    else
      g_string_append_c (s, c);
  }
  g_string_append_c (s, '"');
}

static gchar *
shard_name (const Export * x, guint shard)
{
  if (x->p->n_shards <= 1)
    return g_strdup ("model.safetensors");
  return g_strdup_printf ("model-%05u-of-%05u.safetensors", shard + 1,
      x->p->n_shards);
}

static gboolean
write_shard (const Export * x, const gchar * dir, guint shard, GError ** error)
{
  GString *h = g_string_new ("{\"__metadata__\":{\"format\":\"pt\"}");
  GByteArray *file = g_byte_array_new ();
  guint64 off = 0, len;
  gchar *name = shard_name (x, shard), *path;
  gboolean ok;
  guint i, d;

  for (i = 0; i < x->out->len; i++) {
    const Out *o = g_ptr_array_index (x->out, i);

    if (o->shard != shard)
      continue;
    g_string_append_c (h, ',');
    json_string (h, o->name, strlen (o->name));
    g_string_append_printf (h, ":{\"dtype\":\"%s\",\"shape\":[", o->dtype);
    for (d = 0; d < o->n_dims; d++)
      g_string_append_printf (h, "%s%" G_GUINT64_FORMAT, d ? "," : "",
          o->shape[d]);
    g_string_append_printf (h, "],\"data_offsets\":[%" G_GUINT64_FORMAT
        ",%" G_GUINT64_FORMAT "]}", off, off + o->size);
    off += o->size;
  }
  g_string_append_c (h, '}');
  while (h->len % 8)
    g_string_append_c (h, ' ');
  len = GUINT64_TO_LE ((guint64) h->len);
  g_byte_array_append (file, (const guint8 *) &len, 8);
  g_byte_array_append (file, (const guint8 *) h->str, h->len);
  for (i = 0; i < x->out->len; i++) {
    const Out *o = g_ptr_array_index (x->out, i);

    if (o->shard == shard)
      g_byte_array_append (file, o->data, o->size);
  }
  path = g_build_filename (dir, name, NULL);
  ok = g_file_set_contents (path, (const gchar *) file->data, file->len, error);
  g_free (path);
  g_free (name);
  g_byte_array_unref (file);
  g_string_free (h, TRUE);
  return ok;
}

static gboolean
write_text (const gchar * dir, const gchar * file, const GString * s,
    GError ** error)
{
  gchar *path = g_build_filename (dir, file, NULL);
  gboolean ok = g_file_set_contents (path, s->str, s->len, error);

  g_free (path);
  return ok;
}

static gboolean
write_index (const Export * x, const gchar * dir, GError ** error)
{
  GString *s = g_string_new ("{\"metadata\":{\"total_size\":");
  guint64 total = 0;
  gboolean ok;
  guint i;

  for (i = 0; i < x->out->len; i++)
    total += ((const Out *) g_ptr_array_index (x->out, i))->size;
  g_string_append_printf (s, "%" G_GUINT64_FORMAT "},\"weight_map\":{", total);
  for (i = 0; i < x->out->len; i++) {
    const Out *o = g_ptr_array_index (x->out, i);
    gchar *name = shard_name (x, o->shard);

    g_string_append (s, i ? ",\n" : "\n");
    json_string (s, o->name, strlen (o->name));
    g_string_append_c (s, ':');
    json_string (s, name, strlen (name));
    g_free (name);
  }
  g_string_append (s, "}}\n");
  ok = write_text (dir, "model.safetensors.index.json", s, error);
  g_string_free (s, TRUE);
  return ok;
}

static gboolean
write_config (const Export * x, const gchar * dir, GError ** error)
{
  const NpuGguf *g = x->g;
  GString *s =
      g_string_new ("{\n  \"architectures\": [\"GptOssForCausalLM\"],\n"
      "  \"model_type\": \"gpt_oss\",\n");
  guint i;
  gboolean ok;

#define U(key) npu_gguf_get_u32_default (g, "gpt-oss." key, 0)
  g_string_append_printf (s, "  \"num_hidden_layers\": %u,\n"
      "  \"hidden_size\": %u,\n  \"intermediate_size\": %u,\n"
      "  \"num_attention_heads\": %u,\n  \"num_key_value_heads\": %u,\n"
      "  \"head_dim\": %u,\n  \"num_local_experts\": %u,\n"
      "  \"num_experts_per_tok\": %u,\n  \"sliding_window\": %u,\n"
      "  \"max_position_embeddings\": %u,\n  \"swiglu_limit\": 7.0,\n"
      "  \"rms_norm_eps\": %.9g,\n  \"rope_theta\": %.9g,\n"
      "  \"tie_word_embeddings\": false,\n  \"vocab_size\": %u,\n",
      U ("block_count"), U ("embedding_length"),
      U ("expert_feed_forward_length"), U ("attention.head_count"),
      U ("attention.head_count_kv"), U ("attention.key_length"),
      U ("expert_count"), U ("expert_used_count"),
      U ("attention.sliding_window"), U ("context_length"),
      npu_gguf_get_f32_default (g, "gpt-oss.attention.layer_norm_rms_epsilon",
          0), npu_gguf_get_f32_default (g, "gpt-oss.rope.freq_base", 0),
      (guint) npu_gguf_get_array (g, "tokenizer.ggml.tokens", -1,
          NULL)->v.arr.count);
  if (npu_gguf_find (g, "gpt-oss.rope.scaling.factor"))
    g_string_append_printf (s, "  \"rope_scaling\": {\"rope_type\": \"yarn\", "
        "\"factor\": %.9g, \"beta_fast\": 32.0, \"beta_slow\": 1.0, "
        "\"truncate\": false, \"original_max_position_embeddings\": %u},\n",
        npu_gguf_get_f32_default (g, "gpt-oss.rope.scaling.factor", 0),
        U ("rope.scaling.original_context_length"));
  g_string_append (s, "  \"layer_types\": [");
  for (i = 0; i < x->n_layer; i++)
    g_string_append_printf (s, "%s\"%s\"", i ? ", " : "", i % 2 == 0 ?
        "sliding_attention" : "full_attention");
  g_string_append (s, "]\n}\n");
#undef U
  ok = write_text (dir, "config.json", s, error);
  g_string_free (s, TRUE);
  return ok;
}

/* Split patterns as tokenizer.json files spell them */
static const gchar *
split_pattern (const gchar * pre)
{
  if (g_strcmp0 (pre, "gpt-4o") == 0)
    return "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*"
        "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
        "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
        "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|"
        "\\s+(?!\\S)|\\s+";
  if (g_strcmp0 (pre, "qwen2") == 0)
    return "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
        "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  return NULL;
}

static void
append_token (GString * s, const NpuGgufValue * toks, guint64 i)
{
  gsize len;
  const gchar *t = npu_gguf_array_get_string (toks, i, &len);

  json_string (s, t, len);
}

static void
append_vocab (GString * s, const NpuGgufValue * toks,
    const NpuGgufValue * types, gboolean added)
{
  guint64 i;
  gboolean first = TRUE;

  for (i = 0; i < toks->v.arr.count; i++) {
    NpuGgufValue type;
    gint64 ty = 1;

    if (types && npu_gguf_array_get (types, i, &type))
      ty = type.v.i;
    if (ty == 5 || added != (ty == 3 || ty == 4))
      continue;
    g_string_append (s, first ? "\n" : ",\n");
    first = FALSE;
    if (added) {
      g_string_append_printf (s, "{\"id\":%" G_GUINT64_FORMAT ",\"content\":",
          i);
      append_token (s, toks, i);
      g_string_append_printf (s, ",\"single_word\":false,\"lstrip\":false,"
          "\"rstrip\":false,\"normalized\":false,\"special\":%s}",
          ty == 3 ? "true" : "false");
    } else {
      append_token (s, toks, i);
      g_string_append_printf (s, ":%" G_GUINT64_FORMAT, i);
    }
  }
}

static void
append_merges (GString * s, const NpuGgufValue * merges, gboolean pairs)
{
  guint64 i;

  for (i = 0; merges && i < merges->v.arr.count; i++) {
    gsize len;
    const gchar *m = npu_gguf_array_get_string (merges, i, &len);
    const gchar *sp = memchr (m, ' ', len);

    g_string_append (s, i ? ",\n" : "\n");
    if (pairs && sp) {
      g_string_append_c (s, '[');
      json_string (s, m, sp - m);
      g_string_append_c (s, ',');
      json_string (s, sp + 1, len - (sp - m) - 1);
      g_string_append_c (s, ']');
    } else {
      json_string (s, m, len);
    }
  }
}

static gboolean
write_tokenizer_json (const Export * x, const gchar * dir, GError ** error)
{
  const NpuGgufValue *toks = npu_gguf_get_array (x->g, "tokenizer.ggml.tokens",
      NPU_GGUF_TYPE_STRING, error);
  const NpuGgufValue *types = npu_gguf_find (x->g, "tokenizer.ggml.token_type");
  const gchar *pattern = split_pattern (npu_gguf_get_string (x->g,
          "tokenizer.ggml.pre", NULL, NULL));
  GString *s;
  gboolean ok;

  if (!toks || !pattern)
    return toks ? fail (error, "tokenizer.ggml.pre is not gpt-4o or qwen2") :
        FALSE;
  s = g_string_new ("{\"version\":\"1.0\",\"truncation\":null,"
      "\"padding\":null,\"added_tokens\":[");
  append_vocab (s, toks, types, TRUE);
  g_string_append (s, "],\"normalizer\":null,\"pre_tokenizer\":{\"type\":"
      "\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
      "{\"Regex\":");
  json_string (s, pattern, strlen (pattern));
  g_string_append (s, "},\"behavior\":\"Isolated\",\"invert\":false},"
      "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
      "\"trim_offsets\":true,\"use_regex\":false}]},\"post_processor\":null,"
      "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
      "\"trim_offsets\":true,\"use_regex\":true},\"model\":{\"type\":\"BPE\","
      "\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":\"\","
      "\"end_of_word_suffix\":\"\",\"fuse_unk\":false,\"byte_fallback\":false,"
      "\"ignore_merges\":false,\"vocab\":{");
  append_vocab (s, toks, types, FALSE);
  g_string_append (s, "},\"merges\":[");
  append_merges (s, npu_gguf_find (x->g, "tokenizer.ggml.merges"),
      x->p->merges_as_pairs);
  g_string_append (s, "]}}\n");
  ok = write_text (dir, "tokenizer.json", s, error);
  g_string_free (s, TRUE);
  return ok;
}

static void
append_special (GString * s, const Export * x, const gchar * hf,
    const gchar * key)
{
  const NpuGgufValue *toks = npu_gguf_find (x->g, "tokenizer.ggml.tokens");
  guint32 id;

  if (!npu_gguf_get_u32 (x->g, key, &id, NULL))
    return;
  g_string_append_printf (s, ",\n  \"%s\": ", hf);
  append_token (s, toks, id);
}

static gboolean
write_tokenizer_config (const Export * x, const gchar * dir, GError ** error)
{
  GString *s = g_string_new ("{\n  \"model_max_length\": 1000000");
  const gchar *tmpl = npu_gguf_get_string (x->g, "tokenizer.chat_template",
      NULL, NULL);
  gboolean flag, ok;

  append_special (s, x, "bos_token", "tokenizer.ggml.bos_token_id");
  append_special (s, x, "eos_token", "tokenizer.ggml.eos_token_id");
  append_special (s, x, "pad_token", "tokenizer.ggml.padding_token_id");
  if (npu_gguf_get_bool (x->g, "tokenizer.ggml.add_bos_token", &flag, NULL))
    g_string_append_printf (s, ",\n  \"add_bos_token\": %s", flag ? "true" :
        "false");
  g_string_append (s, "\n}\n");
  ok = write_text (dir, "tokenizer_config.json", s, error);
  g_string_free (s, TRUE);
  if (ok && tmpl) {
    GString *t = g_string_new (tmpl);

    ok = write_text (dir, "chat_template.jinja", t, error);
    g_string_free (t, TRUE);
  }
  return ok;
}

gboolean
npu_hf_export (const gchar * gguf_path, const gchar * dir,
    const NpuHfExportParams * params, GError ** error)
{
  NpuGguf *g = npu_gguf_open (gguf_path, error);
  Export x = { g, params, g_ptr_array_new_with_free_func (out_free), };
  guint n_shards = MAX (params->n_shards, 1), il, s;
  gboolean ok = g != NULL;

  if (ok && g_strcmp0 (npu_gguf_get_string (g, "general.architecture", NULL,
              NULL), "gpt-oss") != 0)
    ok = fail (error, "the GGUF is not a gpt-oss model");
  if (ok) {
    x.n_layer = npu_gguf_get_u32_default (g, "gpt-oss.block_count", 0);
    x.n_expert = npu_gguf_get_u32_default (g, "gpt-oss.expert_count", 0);
    x.n_ff = npu_gguf_get_u32_default (g,
        "gpt-oss.expert_feed_forward_length", 0);
    ok = g_mkdir_with_parents (dir, 0755) == 0
        || fail (error, "cannot make the directory");
  }
  ok = ok && add_matrix (&x, "token_embd.weight", "model.embed_tokens.weight",
      0, error)
      && add_vector (&x, "output_norm.weight", "model.norm.weight", 0, error)
      && add_matrix (&x, "output.weight", "lm_head.weight", n_shards - 1,
      error);
  for (il = 0; ok && il < x.n_layer; il++)
    ok = add_layer (&x, il, il * n_shards / MAX (x.n_layer, 1), error);
  for (s = 0; ok && s < n_shards; s++)
    ok = write_shard (&x, dir, s, error);
  if (ok && params->n_shards > 1)
    ok = write_index (&x, dir, error);
  ok = ok && write_config (&x, dir, error)
      && write_tokenizer_json (&x, dir, error)
      && write_tokenizer_config (&x, dir, error);
  g_ptr_array_unref (x.out);
  if (g)
    npu_gguf_free (g);
  return ok;
}

void
npu_hf_export_remove (const gchar * dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const gchar *f;

  while (d && (f = g_dir_read_name (d))) {
    gchar *path = g_build_filename (dir, f, NULL);

    g_unlink (path);
    g_free (path);
  }
  if (d)
    g_dir_close (d);
  g_rmdir (dir);
}
