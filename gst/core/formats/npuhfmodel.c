/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a Hugging Face model directory read as the GGUF llama.cpp's
 * converter would write from it (see npuhfmodel.h) */
#include "npuhfmodel.h"

#include <string.h>
#include <sys/mman.h>

#include "npuggufwriter.h"
#include "npuhftokenizer.h"
#include "npujson.h"
#include "npumxfp4.h"
#include "npusafetensors.h"

/* config.json of a gpt-oss model, as GptOssConfig names it */
typedef struct
{
  gint64 n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_expert,
      n_expert_used, n_swa, n_ctx;
  gdouble rms_eps, rope_theta;
  gdouble yarn_factor, yarn_beta_fast, yarn_beta_slow;
  gint64 yarn_orig_ctx;
} Config;

/* How a GGUF tensor is made from the directory's */
typedef enum
{
  KIND_MATRIX,                  /* in place, any float dtype */
  KIND_VECTOR,                  /* widened to F32 (in place if F32) */
  KIND_EXPERTS,                 /* an MXFP4 pair, every row */
  KIND_EXPERTS_EVEN,            /* an MXFP4 pair, the even rows (gate) */
  KIND_EXPERTS_ODD,             /* ... the odd rows (up) */
  KIND_BIAS_EVEN,               /* [E, 2F] -> [E, F] of the even columns */
  KIND_BIAS_ODD,
} Kind;

/* A source's row-major shape, dimension by dimension: the embedding width
 * 'D', q's width 'Q' (heads x head_dim), k's and v's 'K', experts 'E',
 * heads 'H', a vocabulary 'V' (any number); 0 ends it.  The expert
 * tensors' shapes follow from their kind (expected_shape ()). */
typedef struct
{
  const gchar *gguf, *hf;
  Kind kind;
  gchar rows, cols;
} LayerTensor;

/* A gpt-oss block, GGUF name -> transformers' name (after
 * "model.layers.N."), as convert_hf_to_gguf.py's GptOssModel maps them */
static const LayerTensor layer_tensors[] = {
  {"attn_norm.weight", "input_layernorm.weight", KIND_VECTOR, 'D', 0},
  {"post_attention_norm.weight", "post_attention_layernorm.weight",
      KIND_VECTOR, 'D', 0},
  {"attn_q.weight", "self_attn.q_proj.weight", KIND_MATRIX, 'Q', 'D'},
  {"attn_q.bias", "self_attn.q_proj.bias", KIND_VECTOR, 'Q', 0},
  {"attn_k.weight", "self_attn.k_proj.weight", KIND_MATRIX, 'K', 'D'},
  {"attn_k.bias", "self_attn.k_proj.bias", KIND_VECTOR, 'K', 0},
  {"attn_v.weight", "self_attn.v_proj.weight", KIND_MATRIX, 'K', 'D'},
  {"attn_v.bias", "self_attn.v_proj.bias", KIND_VECTOR, 'K', 0},
  {"attn_output.weight", "self_attn.o_proj.weight", KIND_MATRIX, 'D', 'Q'},
  {"attn_output.bias", "self_attn.o_proj.bias", KIND_VECTOR, 'D', 0},
  {"attn_sinks.weight", "self_attn.sinks", KIND_VECTOR, 'H', 0},
  {"ffn_gate_inp.weight", "mlp.router.weight", KIND_MATRIX, 'E', 'D'},
  {"ffn_gate_inp.bias", "mlp.router.bias", KIND_VECTOR, 'E', 0},
  {"ffn_gate_exps.weight", "mlp.experts.gate_up_proj", KIND_EXPERTS_EVEN, 0,
      0},
  {"ffn_up_exps.weight", "mlp.experts.gate_up_proj", KIND_EXPERTS_ODD, 0, 0},
  {"ffn_down_exps.weight", "mlp.experts.down_proj", KIND_EXPERTS, 0, 0},
  {"ffn_gate_exps.bias", "mlp.experts.gate_up_proj_bias", KIND_BIAS_EVEN, 0,
      0},
  {"ffn_up_exps.bias", "mlp.experts.gate_up_proj_bias", KIND_BIAS_ODD, 0, 0},
  {"ffn_down_exps.bias", "mlp.experts.down_proj_bias", KIND_VECTOR, 'E',
      'D'},
};

/* The tensors outside the blocks */
static const LayerTensor top_tensors[] = {
  {"token_embd.weight", "model.embed_tokens.weight", KIND_MATRIX, 'V', 'D'},
  {"output_norm.weight", "model.norm.weight", KIND_VECTOR, 'D', 0},
  {"output.weight", "lm_head.weight", KIND_MATRIX, 'V', 'D'},
};

/* Whether @kind's source is an MXFP4 pair "<W>_blocks" + "<W>_scales" */
static gboolean
is_pair (Kind kind)
{
  return kind == KIND_EXPERTS || kind == KIND_EXPERTS_EVEN ||
      kind == KIND_EXPERTS_ODD;
}

/* An expert tensor rewritten expert by expert on first use, into memory
 * mapped without backing: the experts no token is routed to never take
 * any */
typedef struct
{
  NpuHfModel *hf;
  const NpuSafetensorsTensor *blocks, *scales;
  Kind kind;
  guint64 n_expert, rows, nb;   /* rows and blocks of one expert, ours */
  NpuBlockMxfp4 *dst;
  gsize map_size;
  gint *ready;                  /* n_expert flags */
  GMutex lock;
} LazyExperts;

typedef struct
{
  NpuTensorView view;
  gpointer data;
  LazyExperts *lazy;
} Owned;

struct _NpuHfModel
{
  gchar *dir;
  Config cfg;
  GPtrArray *shards;            /* NpuSafetensors */
  GHashTable *tensors;          /* HF name -> const NpuSafetensorsTensor */
  GBytes *meta_bytes;
  NpuGguf *meta;
  GMutex lock;
  GHashTable *owned;            /* GGUF name -> Owned */
  guint64 rewritten;
};

static void
owned_free (gpointer p)
{
  Owned *o = p;

  if (o->lazy) {
    munmap (o->lazy->dst, o->lazy->map_size);
    g_free (o->lazy->ready);
    g_mutex_clear (&o->lazy->lock);
    g_free (o->lazy);
  }
  g_free (o->data);
  g_free (o);
}

/* ------------------------------------------------------------------------ */
/* config.json                                                               */

static gboolean
cfg_int (const NpuJson * cfg, const gchar * key, gint64 def, gint64 * out,
    GError ** error)
{
  const NpuJson *v = npu_json_member (cfg, key);

  if (!v && def >= 0) {
    *out = def;
    return TRUE;
  }
  if (!npu_json_int (v, out) || *out <= 0 || *out > G_MAXINT32) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
        "config.json: \"%s\" %s", key, v ? "is not a positive integer" :
        "is missing");
    return FALSE;
  }
  return TRUE;
}

static gboolean
cfg_float (const NpuJson * cfg, const gchar * key, gdouble def,
    gdouble * out, GError ** error)
{
  const NpuJson *v = npu_json_member (cfg, key);

  if (!v && def >= 0.0) {
    *out = def;
    return TRUE;
  }
  if (!npu_json_number (v, out) || !(*out > 0.0)) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
        "config.json: \"%s\" %s", key, v ? "is not a positive number" :
        "is missing");
    return FALSE;
  }
  return TRUE;
}

/* YaRN, the only scaling gpt-oss is trained with; llama.cpp's defaults
 * where config.json is silent */
static gboolean
read_rope_scaling (const NpuJson * cfg, Config * c, GError ** error)
{
  const NpuJson *rs = npu_json_member (cfg, "rope_scaling");
  const gchar *type;

  c->yarn_factor = 0.0;
  if (!rs || npu_json_type (rs) == NPU_JSON_NULL)
    return TRUE;
  type = npu_json_string (npu_json_member (rs, "rope_type"));
  if (!type)
    type = npu_json_string (npu_json_member (rs, "type"));
  if (g_strcmp0 (type, "yarn") != 0) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_UNSUPPORTED,
        "config.json: rope_scaling type \"%s\" (gpt-oss uses yarn)",
        type ? type : "(none)");
    return FALSE;
  }
  return cfg_float (rs, "factor", -1.0, &c->yarn_factor, error)
      && cfg_int (rs, "original_max_position_embeddings", 4096,
      &c->yarn_orig_ctx, error)
      && cfg_float (rs, "beta_fast", 32.0, &c->yarn_beta_fast, error)
      && cfg_float (rs, "beta_slow", 1.0, &c->yarn_beta_slow, error);
}

/* What our gpt-oss computes and config.json may state otherwise: the
 * SwiGLU clamp at 7 and sliding attention on the even layers */
static gboolean
check_fixed_choices (const NpuJson * cfg, const Config * c, GError ** error)
{
  const NpuJson *types = npu_json_member (cfg, "layer_types");
  gdouble limit = 7.0;
  guint i;

  if (npu_json_member (cfg, "swiglu_limit") &&
      (!npu_json_number (npu_json_member (cfg, "swiglu_limit"), &limit)
          || limit != 7.0)) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_UNSUPPORTED,
        "config.json: swiglu_limit %g (gpt-oss's SwiGLU clamps at 7)", limit);
    return FALSE;
  }
  if (types && npu_json_size (types) != (guint) c->n_layer) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
        "config.json: layer_types has %u entries for %" G_GINT64_FORMAT
        " layers", npu_json_size (types), c->n_layer);
    return FALSE;
  }
  for (i = 0; i < npu_json_size (types); i++) {
    const gchar *want = i % 2 == 0 ? "sliding_attention" : "full_attention";

    if (g_strcmp0 (npu_json_string (npu_json_at (types, i)), want) != 0) {
      g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_UNSUPPORTED,
          "config.json: layer_types[%u] is not \"%s\" (gpt-oss alternates "
          "sliding and full attention, sliding first)", i, want);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
read_config (const NpuJson * cfg, Config * c, GError ** error)
{
  const gchar *type = npu_json_string (npu_json_member (cfg, "model_type"));

  if (g_strcmp0 (type, "gpt_oss") != 0) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_UNSUPPORTED,
        "config.json: model_type \"%s\": only gpt-oss (\"gpt_oss\") "
        "directories are read as they are; convert other models with "
        "llama.cpp's convert_hf_to_gguf.py", type ? type : "(none)");
    return FALSE;
  }
  if (!cfg_int (cfg, "num_hidden_layers", -1, &c->n_layer, error)
      || !cfg_int (cfg, "hidden_size", -1, &c->n_embd, error)
      || !cfg_int (cfg, "intermediate_size", -1, &c->n_ff, error)
      || !cfg_int (cfg, "num_attention_heads", -1, &c->n_head, error)
      || !cfg_int (cfg, "num_key_value_heads", c->n_head, &c->n_head_kv, error)
      || !cfg_int (cfg, "head_dim", c->n_embd / c->n_head, &c->head_dim, error)
      || !cfg_int (cfg, "num_local_experts", -1, &c->n_expert, error)
      || !cfg_int (cfg, npu_json_member (cfg, "num_experts_per_tok") ?
          "num_experts_per_tok" : "experts_per_token", -1, &c->n_expert_used,
          error)
      || !cfg_int (cfg, "sliding_window", -1, &c->n_swa, error)
      || !cfg_int (cfg, "max_position_embeddings", -1, &c->n_ctx, error)
      || !cfg_float (cfg, "rms_norm_eps", -1.0, &c->rms_eps, error)
      || !cfg_float (cfg, "rope_theta", -1.0, &c->rope_theta, error)
      || !read_rope_scaling (cfg, c, error))
    return FALSE;
  if (c->n_embd % 32 != 0 || c->n_ff % 32 != 0) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
        "config.json: hidden_size %" G_GINT64_FORMAT " and intermediate_size "
        "%" G_GINT64_FORMAT " must be multiples of 32 (MXFP4 blocks)",
        c->n_embd, c->n_ff);
    return FALSE;
  }
  return check_fixed_choices (cfg, c, error);
}

/* ------------------------------------------------------------------------ */
/* Shards                                                                    */

static gboolean
add_shard_tensors (NpuHfModel * hf, NpuSafetensors * st, const gchar * file,
    GHashTable * wanted, GError ** error)
{
  guint i;

  for (i = 0; i < npu_safetensors_n_tensors (st); i++) {
    const NpuSafetensorsTensor *t = npu_safetensors_get_tensor (st, i);

    if (wanted && g_strcmp0 (g_hash_table_lookup (wanted, t->name), file))
      continue;
    if (g_hash_table_contains (hf->tensors, t->name)) {
      g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
          "%s: tensor '%s' is in another shard too", file, t->name);
      return FALSE;
    }
    g_hash_table_insert (hf->tensors, (gpointer) t->name, (gpointer) t);
  }
  return TRUE;
}

static gboolean
open_shard (NpuHfModel * hf, const gchar * file, GHashTable * wanted,
    GError ** error)
{
  gchar *path;
  NpuSafetensors *st;

  if (strchr (file, '/') || strcmp (file, "..") == 0 || *file == '\0' ||
      !g_str_has_suffix (file, ".safetensors")) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
        "model.safetensors.index.json: shard \"%s\" is not a .safetensors "
        "file of the directory", file);
    return FALSE;
  }
  path = g_build_filename (hf->dir, file, NULL);
  st = npu_safetensors_open (path, error);
  g_free (path);
  if (!st)
    return FALSE;
  g_ptr_array_add (hf->shards, st);
  return add_shard_tensors (hf, st, file, wanted, error);
}

/* The index's weight_map: every tensor in the shard it names */
static gboolean
open_indexed_shards (NpuHfModel * hf, const gchar * index_path, GError ** error)
{
  NpuJson *index = npu_json_parse_file (index_path, error);
  const NpuJson *map = npu_json_member (index, "weight_map");
  GHashTable *wanted, *opened;
  gboolean ok = TRUE;
  guint i;

  if (!index)
    return FALSE;
  wanted = g_hash_table_new (g_str_hash, g_str_equal);
  opened = g_hash_table_new (g_str_hash, g_str_equal);
  if (!map || npu_json_type (map) != NPU_JSON_OBJECT) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
        "model.safetensors.index.json: no \"weight_map\" object");
    ok = FALSE;
  }
  for (i = 0; ok && i < npu_json_size (map); i++) {
    const gchar *file = npu_json_string (npu_json_at (map, i));

    if (!file) {
      g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
          "model.safetensors.index.json: weight_map[\"%s\"] is not a file "
          "name", npu_json_key_at (map, i));
      ok = FALSE;
    } else {
      g_hash_table_insert (wanted, (gpointer) npu_json_key_at (map, i),
          (gpointer) file);
    }
  }
  for (i = 0; ok && i < npu_json_size (map); i++) {
    const gchar *file = npu_json_string (npu_json_at (map, i));

    if (g_hash_table_add (opened, (gpointer) file))
      ok = open_shard (hf, file, wanted, error);
  }
  /* a tensor the index places in a shard that does not hold it */
  for (i = 0; ok && i < npu_json_size (map); i++) {
    if (!g_hash_table_contains (hf->tensors, npu_json_key_at (map, i))) {
      g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
          "%s: no tensor '%s', which model.safetensors.index.json places "
          "there", npu_json_string (npu_json_at (map, i)),
          npu_json_key_at (map, i));
      ok = FALSE;
    }
  }
  g_hash_table_unref (opened);
  g_hash_table_unref (wanted);
  npu_json_free (index);
  return ok;
}

static gboolean
open_shards (NpuHfModel * hf, const gchar * path, GError ** error)
{
  gchar *index = g_build_filename (hf->dir, "model.safetensors.index.json",
      NULL);
  gchar *single = NULL;
  gboolean ok;

  if (g_file_test (index, G_FILE_TEST_EXISTS)) {
    ok = open_indexed_shards (hf, index, error);
  } else {
    single = g_str_has_suffix (path, ".safetensors") ?
        g_path_get_basename (path) : g_strdup ("model.safetensors");
    ok = open_shard (hf, single, NULL, error);
  }
  g_free (single);
  g_free (index);
  return ok;
}

/* ------------------------------------------------------------------------ */
/* The tensors the model reads, checked at open                              */

/* Bytes of an element of a float dtype we read, 0 for the others */
static gsize
dtype_float_size (NpuSafetensorsDtype d)
{
  return npu_safetensors_dtype_ggml_type (d) >= 0 ?
      npu_safetensors_dtype_size (d) : 0;
}

/* The length dimension @ch of the table stands for (0: any number) */
static guint64
dim_of (const Config * c, gchar ch)
{
  switch (ch) {
    case 'D':
      return c->n_embd;
    case 'Q':
      return c->n_head * c->head_dim;
    case 'K':
      return c->n_head_kv * c->head_dim;
    case 'E':
      return c->n_expert;
    case 'H':
      return c->n_head;
    default:
      return 0;
  }
}

/* The row-major shape @e's source has in the directory; for a pair, the
 * blocks' (the scales' is the same without the last 16).  Returns its
 * dimensions. */
static guint
expected_shape (const Config * c, const LayerTensor * e, guint64 * shape)
{
  guint64 D = c->n_embd, F = c->n_ff, E = c->n_expert;

  switch (e->kind) {
    case KIND_EXPERTS_EVEN:
    case KIND_EXPERTS_ODD:
      shape[0] = E, shape[1] = 2 * F, shape[2] = D / 32, shape[3] = 16;
      return 4;
    case KIND_EXPERTS:
      shape[0] = E, shape[1] = D, shape[2] = F / 32, shape[3] = 16;
      return 4;
    case KIND_BIAS_EVEN:
    case KIND_BIAS_ODD:
      shape[0] = E, shape[1] = 2 * F;
      return 2;
    default:
      shape[0] = dim_of (c, e->rows);
      shape[1] = dim_of (c, e->cols);
      return e->cols ? 2 : 1;
  }
}

static gboolean
check_shape (const NpuSafetensorsTensor * t, const guint64 * shape,
    guint n_dims, GError ** error)
{
  GString *want = g_string_new (NULL), *have = g_string_new (NULL);
  gboolean ok = t->n_dims == n_dims;
  guint d;

  for (d = 0; d < n_dims; d++) {
    ok = ok && (shape[d] == 0 || shape[d] == t->shape[d]);
    if (shape[d])
      g_string_append_printf (want, "%s%" G_GUINT64_FORMAT, d ? ", " : "",
          shape[d]);
    else                        /* a vocabulary's rows: any number */
      g_string_append_printf (want, "%s*", d ? ", " : "");
  }
  for (d = 0; d < t->n_dims; d++)
    g_string_append_printf (have, "%s%" G_GUINT64_FORMAT, d ? ", " : "",
        t->shape[d]);
  if (!ok)
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
        "tensor '%s' has shape [%s]; config.json implies [%s]", t->name,
        have->str, want->str);
  g_string_free (want, TRUE);
  g_string_free (have, TRUE);
  return ok;
}

static const NpuSafetensorsTensor *
find (const NpuHfModel * hf, const gchar * name)
{
  return g_hash_table_lookup (hf->tensors, name);
}

/* The source of one GGUF tensor: its dtype and shape.  An absent optional
 * tensor (lm_head, for a tied output) is not an error. */
static gboolean
check_tensor (NpuHfModel * hf, const LayerTensor * e, const gchar * hf_name,
    GError ** error)
{
  guint64 shape[4];
  guint n_dims = expected_shape (&hf->cfg, e, shape);
  gboolean pair = is_pair (e->kind);
  gchar *bn = g_strconcat (hf_name, pair ? "_blocks" : NULL, NULL);
  gchar *sn = g_strconcat (hf_name, "_scales", NULL);
  const NpuSafetensorsTensor *t = find (hf, bn), *s = find (hf, sn);
  gboolean ok = FALSE;

  if (!t || (pair && !s)) {
    ok = strcmp (e->gguf, "output.weight") == 0;
    if (!ok)
      g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_FORMAT,
          "no tensor '%s' in the directory's shards", t ? sn : bn);
  } else if (pair && (t->dtype != NPU_SAFETENSORS_DTYPE_U8 ||
          s->dtype != NPU_SAFETENSORS_DTYPE_U8)) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_UNSUPPORTED,
        "tensors '%s' and '%s' are %s and %s; the MXFP4 experts must be U8 "
        "(dequantised experts are not read)", bn, sn,
        npu_safetensors_dtype_name (t->dtype),
        npu_safetensors_dtype_name (s->dtype));
  } else if (!pair && dtype_float_size (t->dtype) == 0) {
    g_set_error (error, NPU_HF_MODEL_ERROR, NPU_HF_MODEL_ERROR_UNSUPPORTED,
        "tensor '%s' is %s (F32, F16 or BF16 expected)", bn,
        npu_safetensors_dtype_name (t->dtype));
  } else {
    ok = check_shape (t, shape, n_dims, error)
        && (!pair || check_shape (s, shape, n_dims - 1, error));
  }
  g_free (bn);
  g_free (sn);
  return ok;
}

static gboolean
check_tensors (NpuHfModel * hf, GError ** error)
{
  gchar name[160];
  gint64 il;
  guint i;

  for (i = 0; i < G_N_ELEMENTS (top_tensors); i++)
    if (!check_tensor (hf, &top_tensors[i], top_tensors[i].hf, error))
      return FALSE;
  for (il = 0; il < hf->cfg.n_layer; il++) {
    for (i = 0; i < G_N_ELEMENTS (layer_tensors); i++) {
      g_snprintf (name, sizeof (name), "model.layers.%" G_GINT64_FORMAT
          ".%s", il, layer_tensors[i].hf);
      if (!check_tensor (hf, &layer_tensors[i], name, error))
        return FALSE;
    }
  }
  return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Metadata                                                                  */

/* The keys convert_hf_to_gguf.py's GptOssModel writes */
static gboolean
add_hparams (NpuGgufWriter * w, const NpuHfModel * hf, GError ** error)
{
  const Config *c = &hf->cfg;
  gchar *name = g_path_get_basename (hf->dir);
  gboolean ok;

#define U32(key, v) npu_gguf_writer_add_u32 (w, "gpt-oss." key, (guint32) (v), \
    error)
#define F32(key, v) npu_gguf_writer_add_f32 (w, "gpt-oss." key, (gfloat) (v), \
    error)
  ok = npu_gguf_writer_add_string (w, "general.architecture", "gpt-oss", -1,
      error)
      && npu_gguf_writer_add_string (w, "general.name", name, -1, error)
      && U32 ("block_count", c->n_layer)
      && U32 ("context_length", c->n_ctx)
      && U32 ("embedding_length", c->n_embd)
      && U32 ("feed_forward_length", c->n_ff)
      && U32 ("attention.head_count", c->n_head)
      && U32 ("attention.head_count_kv", c->n_head_kv)
      && U32 ("attention.key_length", c->head_dim)
      && U32 ("attention.value_length", c->head_dim)
      && F32 ("attention.layer_norm_rms_epsilon", c->rms_eps)
      && F32 ("rope.freq_base", c->rope_theta)
      && U32 ("expert_count", c->n_expert)
      && U32 ("expert_used_count", c->n_expert_used)
      && U32 ("expert_feed_forward_length", c->n_ff)
      && U32 ("attention.sliding_window", c->n_swa);
  if (ok && c->yarn_factor > 0.0)
    ok = npu_gguf_writer_add_string (w, "gpt-oss.rope.scaling.type", "yarn",
        -1, error)
        && F32 ("rope.scaling.factor", c->yarn_factor)
        && U32 ("rope.scaling.original_context_length", c->yarn_orig_ctx)
        && F32 ("rope.scaling.yarn_beta_fast", c->yarn_beta_fast)
        && F32 ("rope.scaling.yarn_beta_slow", c->yarn_beta_slow);
#undef U32
#undef F32
  g_free (name);
  return ok;
}

static gboolean
build_metadata (NpuHfModel * hf, const NpuJson * config, GError ** error)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  gboolean ok;

  ok = add_hparams (w, hf, error)
      && npu_hf_tokenizer_add_keys (w, hf->dir, config, error);
  if (ok)
    hf->meta_bytes = npu_gguf_writer_write_bytes (w, error);
  npu_gguf_writer_free (w);
  if (!hf->meta_bytes)
    return FALSE;
  hf->meta = npu_gguf_open_bytes (g_bytes_get_data (hf->meta_bytes, NULL),
      g_bytes_get_size (hf->meta_bytes), error);
  return hf->meta != NULL;
}

/* ------------------------------------------------------------------------ */
/* Opening                                                                   */

gboolean
npu_hf_model_is_hf_path (const gchar * path)
{
  g_return_val_if_fail (path != NULL, FALSE);

  return g_file_test (path, G_FILE_TEST_IS_DIR) ||
      g_str_has_suffix (path, ".safetensors") ||
      g_str_has_suffix (path, ".json");
}

static gchar *
directory_of (const gchar * path)
{
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    return g_strdup (path);
  return g_path_get_dirname (path);
}

NpuHfModel *
npu_hf_model_open (const gchar * path, GError ** error)
{
  NpuHfModel *hf;
  NpuJson *config;
  gchar *config_path;
  GError *err = NULL;
  gboolean ok;

  g_return_val_if_fail (path != NULL, NULL);

  hf = g_new0 (NpuHfModel, 1);
  g_mutex_init (&hf->lock);
  hf->dir = directory_of (path);
  hf->shards = g_ptr_array_new_with_free_func ((GDestroyNotify)
      npu_safetensors_free);
  hf->tensors = g_hash_table_new (g_str_hash, g_str_equal);
  hf->owned = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      owned_free);
  config_path = g_build_filename (hf->dir, "config.json", NULL);
  config = npu_json_parse_file (config_path, &err);
  g_free (config_path);
  ok = config && read_config (config, &hf->cfg, &err)
      && open_shards (hf, path, &err)
      && check_tensors (hf, &err)
      && build_metadata (hf, config, &err);
  npu_json_free (config);
  if (!ok) {
    /* a file of the directory missing or unreadable is the directory's
     * fault, not the path's: one domain for every error */
    g_set_error_literal (error, NPU_HF_MODEL_ERROR,
        err->domain == NPU_HF_MODEL_ERROR ? err->code :
        err->domain == G_FILE_ERROR || g_error_matches (err,
            NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_IO) ?
        NPU_HF_MODEL_ERROR_IO : NPU_HF_MODEL_ERROR_FORMAT, err->message);
    g_error_free (err);
    npu_hf_model_free (hf);
    return NULL;
  }
  return hf;
}

void
npu_hf_model_free (NpuHfModel * hf)
{
  if (!hf)
    return;
  if (hf->meta)
    npu_gguf_free (hf->meta);
  if (hf->meta_bytes)
    g_bytes_unref (hf->meta_bytes);
  g_hash_table_unref (hf->owned);
  g_hash_table_unref (hf->tensors);
  g_ptr_array_unref (hf->shards);
  g_mutex_clear (&hf->lock);
  g_free (hf->dir);
  g_free (hf);
}

const NpuGguf *
npu_hf_model_get_metadata (const NpuHfModel * hf)
{
  g_return_val_if_fail (hf != NULL, NULL);
  return hf->meta;
}

guint64
npu_hf_model_get_rewritten_bytes (const NpuHfModel * hf)
{
  guint64 n;

  g_return_val_if_fail (hf != NULL, 0);
  g_mutex_lock ((GMutex *) & hf->lock);
  n = hf->rewritten;
  g_mutex_unlock ((GMutex *) & hf->lock);
  return n;
}

/* ------------------------------------------------------------------------ */
/* Lookup                                                                    */

static float
read_float (NpuSafetensorsDtype d, const guint8 * p, gsize i)
{
  guint16 h;
  float f;

  if (d == NPU_SAFETENSORS_DTYPE_F32) {
    memcpy (&f, p + 4 * i, 4);
    return f;
  }
  memcpy (&h, p + 2 * i, 2);
  return d == NPU_SAFETENSORS_DTYPE_F16 ? npu_f16_to_f32 (h) :
      npu_bf16_to_f32 (h);
}

/* A vector or 2-D bias widened to F32: every column, or the even or odd
 * ones (gate_up_proj_bias) */
static Owned *
make_vector (const NpuSafetensorsTensor * t, Kind kind)
{
  guint64 cols = t->shape[t->n_dims - 1];
  guint64 rows = t->n_elements / cols;
  guint step = kind == KIND_VECTOR ? 1 : 2;
  guint first = kind == KIND_BIAS_ODD ? 1 : 0;
  guint64 out_cols = cols / step, r, j;
  Owned *o = g_new0 (Owned, 1);
  float *dst = g_try_new (float, rows * out_cols);

  if (!dst) {
    g_free (o);
    return NULL;
  }
  for (r = 0; r < rows; r++)
    for (j = 0; j < out_cols; j++)
      dst[r * out_cols + j] = read_float (t->dtype, t->data,
          r * cols + j * step + first);
  o->data = dst;
  npu_tensor_view_init (&o->view, NPU_GGML_TYPE_F32, t->n_dims == 1 ? 1 : 2,
      (guint64[]) {
      out_cols, rows, 1, 1}
      , dst, rows * out_cols * sizeof (float));
  return o;
}

/* Expert @e of @lazy: its rows of the pair (every one, or the even or
 * the odd ones) rewritten into ggml's blocks, once */
static void
prepare_expert (gpointer data, guint64 e)
{
  LazyExperts *lazy = data;
  guint step = lazy->kind == KIND_EXPERTS ? 1 : 2;
  guint first = lazy->kind == KIND_EXPERTS_ODD ? 1 : 0;
  guint64 R = lazy->rows * step, nb = lazy->nb, r, k;

  if (e >= lazy->n_expert || g_atomic_int_get (&lazy->ready[e]))
    return;
  g_mutex_lock (&lazy->lock);
  if (!lazy->ready[e]) {
    for (r = 0; r < lazy->rows; r++) {
      guint64 src_row = e * R + r * step + first;
      NpuBlockMxfp4 *out = lazy->dst + (e * lazy->rows + r) * nb;

      for (k = 0; k < nb; k++)
        npu_mxfp4_block_from_gpt_oss (lazy->blocks->data + (src_row * nb +
                k) * 16, lazy->scales->data[src_row * nb + k], out + k);
    }
    g_mutex_lock (&lazy->hf->lock);
    lazy->hf->rewritten += lazy->rows * nb * sizeof (NpuBlockMxfp4);
    g_mutex_unlock (&lazy->hf->lock);
    g_atomic_int_set (&lazy->ready[e], 1);
  }
  g_mutex_unlock (&lazy->lock);
}

/* Experts [E, R, K / 32] as ggml's [K, R', E] blocks, R' = R (every row)
 * or R / 2 (the even or the odd rows), each written when a token is
 * first routed to it (NpuTensorView.prepare) */
static Owned *
make_experts (NpuHfModel * hf, const NpuSafetensorsTensor * b,
    const NpuSafetensorsTensor * s, Kind kind)
{
  guint64 E = b->shape[0], R = b->shape[1], nb = b->shape[2];
  guint64 rows = kind == KIND_EXPERTS ? R : R / 2;
  gsize size = E * rows * nb * sizeof (NpuBlockMxfp4);
  LazyExperts *lazy;
  Owned *o;
  gpointer map;

  map = mmap (NULL, size, PROT_READ | PROT_WRITE,
      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (map == MAP_FAILED)
    return NULL;
  lazy = g_new0 (LazyExperts, 1);
  lazy->hf = hf;
  lazy->blocks = b;
  lazy->scales = s;
  lazy->kind = kind;
  lazy->n_expert = E;
  lazy->rows = rows;
  lazy->nb = nb;
  lazy->dst = map;
  lazy->map_size = size;
  lazy->ready = g_new0 (gint, E);
  g_mutex_init (&lazy->lock);
  o = g_new0 (Owned, 1);
  o->lazy = lazy;
  npu_tensor_view_init (&o->view, NPU_GGML_TYPE_MXFP4, 3, (guint64[]) {
      nb * 32, rows, E, 1}
      , map, size);
  o->view.prepare = prepare_expert;
  o->view.prepare_data = lazy;
  return o;
}

/* A matrix in place, or copied where the shard leaves its elements
 * unaligned (the format has no alignment; writers in practice align) */
static Owned *
make_matrix (const NpuSafetensorsTensor * t, NpuTensorView * out)
{
  gsize size = dtype_float_size (t->dtype);
  guint32 type = (guint32) npu_safetensors_dtype_ggml_type (t->dtype);
  guint64 ne[4] = { t->shape[1], t->shape[0], 1, 1 };
  Owned *o;

  if (GPOINTER_TO_SIZE (t->data) % size == 0) {
    npu_tensor_view_init (out, type, 2, ne, t->data, t->n_bytes);
    return NULL;
  }
  o = g_new0 (Owned, 1);
  o->data = g_try_malloc (t->n_bytes);
  if (!o->data) {
    g_free (o);
    return NULL;
  }
  memcpy (o->data, t->data, t->n_bytes);
  npu_tensor_view_init (&o->view, type, 2, ne, o->data, t->n_bytes);
  return o;
}

/* The entry of @name in the tables, and its source's name */
static const LayerTensor *
resolve (const gchar * name, gchar * hf_name, gsize hf_size)
{
  guint i;
  guint64 il;
  gchar *end;

  for (i = 0; i < G_N_ELEMENTS (top_tensors); i++) {
    if (strcmp (name, top_tensors[i].gguf) == 0) {
      g_strlcpy (hf_name, top_tensors[i].hf, hf_size);
      return &top_tensors[i];
    }
  }
  if (!g_str_has_prefix (name, "blk.") || !g_ascii_isdigit (name[4]))
    return NULL;
  il = g_ascii_strtoull (name + 4, &end, 10);
  if (*end != '.' || il > G_MAXINT32)
    return NULL;
  for (i = 0; i < G_N_ELEMENTS (layer_tensors); i++) {
    if (strcmp (end + 1, layer_tensors[i].gguf) == 0) {
      g_snprintf (hf_name, hf_size, "model.layers.%" G_GUINT64_FORMAT ".%s",
          il, layer_tensors[i].hf);
      return &layer_tensors[i];
    }
  }
  return NULL;
}

static Owned *
make (NpuHfModel * hf, const LayerTensor * e, const gchar * hf_name,
    NpuTensorView * out)
{
  gchar *bn, *sn;
  const NpuSafetensorsTensor *t, *s;
  Owned *o;

  if (e->kind == KIND_MATRIX)
    return make_matrix (find (hf, hf_name), out);
  if (!is_pair (e->kind)) {
    t = find (hf, hf_name);
    /* F32 vectors aligned for floats are read in place */
    if (e->kind == KIND_VECTOR && t->dtype == NPU_SAFETENSORS_DTYPE_F32 &&
        GPOINTER_TO_SIZE (t->data) % 4 == 0) {
      npu_tensor_view_init (out, NPU_GGML_TYPE_F32, t->n_dims == 1 ? 1 : 2,
          (guint64[]) {
          t->shape[t->n_dims - 1], t->n_dims == 1 ? 1 : t->shape[0], 1, 1}
          , t->data, t->n_bytes);
      return NULL;
    }
    return make_vector (t, e->kind);
  }
  bn = g_strconcat (hf_name, "_blocks", NULL);
  sn = g_strconcat (hf_name, "_scales", NULL);
  t = find (hf, bn);
  s = find (hf, sn);
  o = make_experts (hf, t, s, e->kind);
  g_free (bn);
  g_free (sn);
  return o;
}

gboolean
npu_hf_model_lookup (const gchar * name, NpuTensorView * out, gpointer data)
{
  NpuHfModel *hf = data;
  gchar hf_name[160], source[168];
  const LayerTensor *e;
  Owned *o;
  gboolean found = TRUE;

  g_return_val_if_fail (name != NULL && out != NULL && hf != NULL, FALSE);

  e = resolve (name, hf_name, sizeof (hf_name));
  if (!e)
    return FALSE;
  /* every tensor was checked at open: only an untied output is absent */
  g_snprintf (source, sizeof (source), "%s%s", hf_name,
      is_pair (e->kind) ? "_blocks" : "");
  if (!find (hf, source))
    return FALSE;
  g_mutex_lock (&hf->lock);
  o = g_hash_table_lookup (hf->owned, name);
  if (!o) {
    memset (out, 0, sizeof (*out));
    o = make (hf, e, hf_name, out);
    if (o) {
      g_hash_table_insert (hf->owned, g_strdup (name), o);
      /* the experts count as they are written */
      if (!o->lazy)
        hf->rewritten += o->view.size;
    } else {
      /* in place, or memory for the copy ran out */
      found = out->data != NULL;
    }
  }
  if (o)
    *out = o->view;
  g_mutex_unlock (&hf->lock);
  return found;
}
