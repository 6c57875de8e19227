/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: vision encoder (ViT + projector) of a llama.cpp "mmproj" GGUF
 *
 * The graph follows llama.cpp's tools/mtmd (clip.cpp's build_vit,
 * build_inp, build_attn, build_ffn, build_patch_merge_permute and the
 * llava / siglip graph builders); docs/vision-encoder.md gives the maths
 * and says where we differ on purpose.
 */
#include "npuvit.h"
#include "npuattention.h"
#include "npumatmul.h"
#include "npumxfp4.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK (npu - vit - error - quark, npu_vit_error);

/* Anything larger than this many floats in one buffer is a broken file,
 * not a model: refuse it before allocating. */
#define MAX_BUFFER_ELEMENTS ((guint64) 1 << 31)
/* Queries per attention work item: enough work per item to amortise the
 * dispatch, small enough to spread a few heads over many threads. */
#define ATTN_QUERY_BLOCK 16
/* Queries that go through the keys and values together
 * (npu_attention_rows() reads each row once per four) */
#define ATTN_NQ 4

typedef enum
{
  ACT_NONE,
  ACT_GELU,                     /* tanh form, ggml_gelu */
  ACT_GELU_QUICK,               /* x sigmoid (1.702 x), ggml_gelu_quick */
  ACT_SILU,                     /* x sigmoid (x), ggml_silu */
} Act;

/* A rows x k weight in MXFP4: in place (owned NULL) or converted */
typedef struct
{
  NpuMxfp4Matrix m;
  NpuBlockMxfp4 *owned;
} Matrix;

typedef struct
{
  float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
  Matrix q, k, v, o, up, down;
  float *q_b, *k_b, *v_b, *o_b, *up_b, *down_b;
} Layer;

struct _NpuVit
{
  NpuGguf *gguf;                /* npu_vit_new_from_file () only */

  NpuVitProjector projector;
  Act act;
  guint image_size, patch, side, n_patches, patch_dim;
  guint dim, ff, n_heads, head_dim, n_layers, out_dim;
  guint scale, grid, n_tokens;
  guint n_pos;                  /* encoder tokens: patches (+ class token) */
  guint first;                  /* 1 with a class token, else 0 */
  NpuMatmulPrecision precision; /* of every matrix product (accurate) */
  gfloat eps, mean[3], std[3];

  /* patch embedding: MXFP4 when 3 p p is a multiple of 32, else F32 */
  gboolean patch_mxfp4;
  Matrix patch_w;
  float *patch_w32;             /* dim x patch_dim */
  float *patch_b, *pos, *class_embd;
  float *pre_ln_w, *pre_ln_b, *post_ln_w, *post_ln_b;
  Layer *layers;
  Matrix mm0, mm2, fc;
  float *mm0_b, *mm2_b;

  /* scratch, allocated once */
  float *x, *h, *q, *k, *v, *att, *ffb, *proj;
  float *scores;                /* n_score_rows rows of n_pos */
  guint n_score_rows;

  gsize owned_bytes, borrowed_bytes, scratch_bytes;
};

/* ------------------------------------------------------------------------
 * Loading
 */
typedef struct
{
  const gchar *name;            /* error prefix */
  const NpuGguf *gguf;
  NpuVitTensorLookup lookup;
  gpointer user_data;
  NpuVit *vit;
} Loader;

static gboolean
lookup_gguf (const gchar * name, NpuVitTensorView * out, gpointer user_data)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (user_data, name);
  guint i;

  if (!t)
    return FALSE;
  out->type = t->type;
  out->n_dims = t->n_dims;
  for (i = 0; i < NPU_GGUF_MAX_DIMS; i++)
    out->ne[i] = t->ne[i];
  out->data = t->data;
  return TRUE;
}

static gchar *
format_ne (const guint64 * ne)
{
  guint n = NPU_GGUF_MAX_DIMS;

  while (n > 1 && ne[n - 1] == 1)
    n--;
  switch (n) {
    case 1:
      return g_strdup_printf ("[%" G_GUINT64_FORMAT "]", ne[0]);
    case 2:
      return g_strdup_printf ("[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
          "]", ne[0], ne[1]);
    case 3:
      return g_strdup_printf ("[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
          ", %" G_GUINT64_FORMAT "]", ne[0], ne[1], ne[2]);
    default:
      return g_strdup_printf ("[%" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT
          ", %" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT "]", ne[0], ne[1],
          ne[2], ne[3]);
  }
}

/* Finds @tname and checks its shape against @e0..@e3 (1 for unused
 * dimensions).  Returns FALSE with @error unset if it is absent and not
 * @required. */
static gboolean
get_tensor (Loader * ld, const gchar * tname, gboolean required,
    guint64 e0, guint64 e1, guint64 e2, guint64 e3, NpuVitTensorView * view,
    GError ** error)
{
  guint64 want[NPU_GGUF_MAX_DIMS] = { e0, e1, e2, e3 };
  guint i;

  memset (view, 0, sizeof (*view));
  if (!ld->lookup (tname, view, ld->user_data)) {
    if (required)
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
          "%s: tensor %s is missing", ld->name, tname);
    return FALSE;
  }
  for (i = view->n_dims; i < NPU_GGUF_MAX_DIMS; i++)
    view->ne[i] = 1;
  for (i = 0; i < NPU_GGUF_MAX_DIMS; i++) {
    if (view->ne[i] != want[i]) {
      gchar *has = format_ne (view->ne), *exp = format_ne (want);

      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: tensor %s has ne %s, expected %s", ld->name, tname, has, exp);
      g_free (has);
      g_free (exp);
      return FALSE;
    }
  }
  if (!view->data) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: tensor %s has no data", ld->name, tname);
    return FALSE;
  }
  return TRUE;
}

static gboolean
unsupported_type (Loader * ld, const gchar * tname, guint32 type,
    const gchar * allowed, GError ** error)
{
  const gchar *tn = npu_ggml_type_name (type);

  g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
      "%s: tensor %s has type %s, not one of %s", ld->name, tname,
      tn ? tn : "(unknown)", allowed);
  return FALSE;
}

/* An F32 copy of a view of @n elements (F32, F16 or BF16) */
static float *
to_f32 (Loader * ld, const gchar * tname, const NpuVitTensorView * view,
    gsize n, GError ** error)
{
  float *dst;
  gsize i;

  if (view->type != NPU_GGML_TYPE_F32 && view->type != NPU_GGML_TYPE_F16
      && view->type != NPU_GGML_TYPE_BF16) {
    unsupported_type (ld, tname, view->type, "f32, f16, bf16", error);
    return NULL;
  }
  dst = g_new (float, n);
  ld->vit->owned_bytes += n * sizeof (float);
  if (view->type == NPU_GGML_TYPE_F32) {
    memcpy (dst, view->data, n * sizeof (float));
  } else {
    const guint16 *src = view->data;

    for (i = 0; i < n; i++)
      dst[i] = view->type == NPU_GGML_TYPE_F16 ? npu_f16_to_f32 (src[i]) :
          npu_bf16_to_f32 (src[i]);
  }
  return dst;
}

/* 1-D tensor of @n elements as F32; NULL (error unset) if absent and not
 * @required */
static float *
get_vector (Loader * ld, const gchar * tname, gboolean required, guint64 n,
    GError ** error)
{
  NpuVitTensorView view;

  if (!get_tensor (ld, tname, required, n, 1, 1, 1, &view, error))
    return NULL;
  return to_f32 (ld, tname, &view, n, error);
}

/* Turns a view of a rows x k matrix (ne = [k, rows], or k spread over the
 * inner dimensions) into an MXFP4 matrix: MXFP4 in place, other types
 * converted once by the OCP rules (npumxfp4.h). */
static gboolean
view_to_matrix (Loader * ld, const gchar * tname,
    const NpuVitTensorView * view, guint64 rows, guint64 k, Matrix * mat,
    GError ** error)
{
  gsize n = rows * k;
  NpuBlockMxfp4 *blocks;

  if (k % NPU_MXFP4_BLOCK_SIZE != 0) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: tensor %s: rows of %" G_GUINT64_FORMAT " elements are not "
        "whole MXFP4 blocks of 32", ld->name, tname, k);
    return FALSE;
  }
  if (view->type == NPU_GGML_TYPE_MXFP4) {
    npu_mxfp4_matrix_init_view (&mat->m, view->data, rows, k);
    ld->vit->borrowed_bytes += n / NPU_MXFP4_BLOCK_SIZE * sizeof
        (NpuBlockMxfp4);
    return TRUE;
  }
  if (view->type != NPU_GGML_TYPE_F32 && view->type != NPU_GGML_TYPE_F16
      && view->type != NPU_GGML_TYPE_BF16 && view->type != NPU_GGML_TYPE_Q8_0)
    return unsupported_type (ld, tname, view->type,
        "f32, f16, bf16, q8_0, mxfp4", error);

  blocks = g_new (NpuBlockMxfp4, n / NPU_MXFP4_BLOCK_SIZE);
  switch (view->type) {
    case NPU_GGML_TYPE_F32:
      npu_mxfp4_quantize_f32 (view->data, blocks, n);
      break;
    case NPU_GGML_TYPE_F16:
      npu_mxfp4_quantize_f16 (view->data, blocks, n);
      break;
    case NPU_GGML_TYPE_BF16:
      npu_mxfp4_quantize_bf16 (view->data, blocks, n);
      break;
    default:
      npu_mxfp4_quantize_q8_0 (view->data, blocks, n);
      break;
  }
  mat->owned = blocks;
  npu_mxfp4_matrix_init_view (&mat->m, blocks, rows, k);
  ld->vit->owned_bytes += n / NPU_MXFP4_BLOCK_SIZE * sizeof (NpuBlockMxfp4);
  return TRUE;
}

/* A linear layer's weight, ggml ne = [k, rows] */
static gboolean
get_matrix (Loader * ld, const gchar * tname, guint64 k, guint64 rows,
    Matrix * mat, GError ** error)
{
  NpuVitTensorView view;

  return get_tensor (ld, tname, TRUE, k, rows, 1, 1, &view, error)
      && view_to_matrix (ld, tname, &view, rows, k, mat, error);
}

static void
matrix_clear (Matrix * mat)
{
  npu_mxfp4_matrix_clear (&mat->m);
  g_free (mat->owned);
  mat->owned = NULL;
}

static gboolean
get_u32_key (Loader * ld, const gchar * key, guint32 * value, GError ** error)
{
  GError *err = NULL;

  if (npu_gguf_get_u32 (ld->gguf, key, value, &err))
    return TRUE;
  g_set_error (error, NPU_VIT_ERROR, err->code == NPU_GGUF_ERROR_NOT_FOUND ?
      NPU_VIT_ERROR_MISSING : NPU_VIT_ERROR_SHAPE, "%s: %s", ld->name,
      err->message);
  g_error_free (err);
  return FALSE;
}

static gboolean
get_rgb_key (Loader * ld, const gchar * key, gfloat * rgb, GError ** error)
{
  const NpuGgufValue *arr = npu_gguf_find (ld->gguf, key);
  guint i;

  if (!arr) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: key %s is missing", ld->name, key);
    return FALSE;
  }
  if (arr->type != NPU_GGUF_TYPE_ARRAY || arr->v.arr.count < 3
      || (arr->v.arr.type != NPU_GGUF_TYPE_FLOAT32
          && arr->v.arr.type != NPU_GGUF_TYPE_FLOAT64)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: key %s is not an array of 3 floats", ld->name, key);
    return FALSE;
  }
  for (i = 0; i < 3; i++) {
    NpuGgufValue v;

    npu_gguf_array_get (arr, i, &v);
    rgb[i] = (gfloat) v.v.f;
  }
  return TRUE;
}

/* Hyper-parameters and the checks that need no tensor */
static gboolean
load_hparams (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  const gchar *arch, *proj;
  gboolean has_vision, use_gelu, use_silu;
  guint32 image_size, patch, dim, ff, n_heads, n_layers;
  guint64 sizes[4];
  guint i;

  arch = npu_gguf_get_string (ld->gguf, "general.architecture", NULL, NULL);
  if (g_strcmp0 (arch, "clip") != 0) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_NOT_MMPROJ,
        "%s: not an mmproj file: general.architecture is %s%s%s, expected "
        "\"clip\"", ld->name, arch ? "\"" : "", arch ? arch : "absent",
        arch ? "\"" : "");
    return FALSE;
  }
  /* clip.cpp's default: a file that does not say has no vision encoder */
  has_vision = npu_gguf_get_bool_default (ld->gguf, "clip.has_vision_encoder",
      FALSE);
  if (!has_vision) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_NOT_MMPROJ,
        "%s: not a vision mmproj: clip.has_vision_encoder is not true",
        ld->name);
    return FALSE;
  }

  /* clip.projector_type, else the per-modality key of mixed files, else
   * "mlp", in clip.cpp's order */
  proj = npu_gguf_get_string (ld->gguf, "clip.projector_type", NULL, NULL);
  if (!proj || !*proj)
    proj = npu_gguf_get_string (ld->gguf, "clip.vision.projector_type", NULL,
        NULL);
  if (!proj || !*proj || g_strcmp0 (proj, "mlp") == 0)
    vit->projector = NPU_VIT_PROJECTOR_MLP;
  else if (g_strcmp0 (proj, "idefics3") == 0)
    vit->projector = NPU_VIT_PROJECTOR_IDEFICS3;
  else {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: projector type \"%s\" is not supported (mlp, idefics3)",
        ld->name, proj);
    return FALSE;
  }

  if (!get_u32_key (ld, "clip.vision.image_size", &image_size, error)
      || !get_u32_key (ld, "clip.vision.patch_size", &patch, error)
      || !get_u32_key (ld, "clip.vision.embedding_length", &dim, error)
      || !get_u32_key (ld, "clip.vision.feed_forward_length", &ff, error)
      || !get_u32_key (ld, "clip.vision.block_count", &n_layers, error)
      || !get_u32_key (ld, "clip.vision.attention.head_count", &n_heads, error))
    return FALSE;
  if (!npu_gguf_find (ld->gguf, "clip.vision.attention.layer_norm_epsilon")) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: key clip.vision.attention.layer_norm_epsilon is missing",
        ld->name);
    return FALSE;
  }
  if (!npu_gguf_get_f32 (ld->gguf, "clip.vision.attention.layer_norm_epsilon",
          &vit->eps, NULL) || !(vit->eps >= 0.0f)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: clip.vision.attention.layer_norm_epsilon is not a float >= 0",
        ld->name);
    return FALSE;
  }
  if (!get_rgb_key (ld, "clip.vision.image_mean", vit->mean, error)
      || !get_rgb_key (ld, "clip.vision.image_std", vit->std, error))
    return FALSE;
  for (i = 0; i < 3; i++) {
    if (!(vit->std[i] > 0.0f) || !isfinite (vit->mean[i])) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: clip.vision.image_std must be positive and image_mean finite",
          ld->name);
      return FALSE;
    }
  }

  use_gelu = npu_gguf_get_bool_default (ld->gguf, "clip.use_gelu", FALSE);
  use_silu = npu_gguf_get_bool_default (ld->gguf, "clip.use_silu", FALSE);
  if (use_gelu && use_silu) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: clip.use_gelu and clip.use_silu are both true", ld->name);
    return FALSE;
  }
  vit->act = use_gelu ? ACT_GELU : use_silu ? ACT_SILU : ACT_GELU_QUICK;

  /* Feature layers (Granite Vision) stack hidden states of several
   * blocks: a different graph. */
  if (npu_gguf_find (ld->gguf, "clip.vision.feature_layer")) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: clip.vision.feature_layer (stacked feature layers) is not "
        "supported", ld->name);
    return FALSE;
  }

  if (!patch || !image_size || image_size % patch != 0) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: image size %u is not a positive multiple of the patch size %u",
        ld->name, image_size, patch);
    return FALSE;
  }
  if (!dim || !n_heads || dim % n_heads != 0 || !ff) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: embedding length %u and feed-forward length %u must be "
        "positive and %u heads must divide the embedding length", ld->name,
        dim, ff, n_heads);
    return FALSE;
  }
  vit->image_size = image_size;
  vit->patch = patch;
  vit->side = image_size / patch;
  vit->n_patches = vit->side * vit->side;
  vit->patch_dim = 3 * patch * patch;
  vit->dim = dim;
  vit->ff = ff;
  vit->n_heads = n_heads;
  vit->head_dim = dim / n_heads;
  vit->n_layers = n_layers;

  /* Every buffer's size, in floats, fits comfortably before anything is
   * allocated from these numbers. */
  sizes[0] = (guint64) vit->n_patches * (vit->patch_dim + 1);
  sizes[1] = ((guint64) vit->n_patches + 1) * MAX (dim, ff);
  sizes[2] = (guint64) vit->patch_dim * dim;
  sizes[3] = (guint64) dim *ff;
  for (i = 0; i < G_N_ELEMENTS (sizes); i++) {
    if (vit->side > 4096 || patch > 4096 || sizes[i] > MAX_BUFFER_ELEMENTS) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: model too large (image %u, patch %u, dim %u, ff %u)",
          ld->name, image_size, patch, dim, ff);
      return FALSE;
    }
  }
  if (n_layers > 1024) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: %u blocks is not a vision encoder", ld->name, n_layers);
    return FALSE;
  }
  return TRUE;
}

static gboolean
load_patch_embedding (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  NpuVitTensorView view;
  const gchar *tname = "v.patch_embd.weight";

  /* ggml conv_2d kernel: ne = [KW, KH, IC, OC], so output channel o's
   * 3 p p weights are contiguous, channel-major, then row, then column:
   * the order of a patch's values in npu_vit_encode ()'s input. */
  if (!get_tensor (ld, tname, TRUE, vit->patch, vit->patch, 3, vit->dim,
          &view, error))
    return FALSE;
  /* An MXFP4 kernel is used in place.  Any other (llama.cpp's converters
   * write F16 or F32 kernels) becomes an F32 copy rather than MXFP4: the
   * product is ~1 % of the encoder's work, and quantising the first layer
   * moved the base model's output by ~0.5 of its rms (llama.cpp's clip
   * cross-check), where every later layer is read as stored. */
  if (view.type == NPU_GGML_TYPE_MXFP4) {
    vit->patch_mxfp4 = TRUE;
    if (!view_to_matrix (ld, tname, &view, vit->dim, vit->patch_dim,
            &vit->patch_w, error))
      return FALSE;
  } else {
    vit->patch_w32 = to_f32 (ld, tname, &view,
        (gsize) vit->patch_dim * vit->dim, error);
    if (!vit->patch_w32)
      return FALSE;
  }
  vit->patch_b = get_vector (ld, "v.patch_embd.bias", FALSE, vit->dim, error);
  if (!vit->patch_b && error && *error)
    return FALSE;

  /* CLIP (LLaVA) has a class token, SigLIP has none */
  vit->class_embd = get_vector (ld, "v.class_embd", FALSE, vit->dim, error);
  if (!vit->class_embd && error && *error)
    return FALSE;
  vit->first = vit->class_embd ? 1 : 0;
  vit->n_pos = vit->n_patches + vit->first;

  if (!get_tensor (ld, "v.position_embd.weight", TRUE, vit->dim, vit->n_pos,
          1, 1, &view, error))
    return FALSE;
  vit->pos = to_f32 (ld, "v.position_embd.weight", &view,
      (gsize) vit->dim * vit->n_pos, error);
  return vit->pos != NULL;
}

/* A weight/bias pair of norms; both absent is fine when !@required */
static gboolean
get_norm (Loader * ld, const gchar * prefix, gboolean required, float **w,
    float **b, GError ** error)
{
  gchar *wn = g_strconcat (prefix, ".weight", NULL);
  gchar *bn = g_strconcat (prefix, ".bias", NULL);
  gboolean ok = TRUE;

  *w = get_vector (ld, wn, required, ld->vit->dim, error);
  if (!*w)
    ok = !(error && *error);
  if (ok && *w) {
    *b = get_vector (ld, bn, TRUE, ld->vit->dim, error);
    ok = *b != NULL;
  }
  g_free (wn);
  g_free (bn);
  return ok;
}

static gboolean
load_layer (Loader * ld, guint il, GError ** error)
{
  NpuVit *vit = ld->vit;
  Layer *l = &vit->layers[il];
  guint dim = vit->dim, ff = vit->ff;
  gchar *p = g_strdup_printf ("v.blk.%u", il);
  gchar *n[12];
  gboolean ok, swapped;
  guint i;

  n[0] = g_strconcat (p, ".ln1", NULL);
  n[1] = g_strconcat (p, ".ln2", NULL);
  n[2] = g_strconcat (p, ".attn_q.weight", NULL);
  n[3] = g_strconcat (p, ".attn_q.bias", NULL);
  n[4] = g_strconcat (p, ".attn_k.weight", NULL);
  n[5] = g_strconcat (p, ".attn_k.bias", NULL);
  n[6] = g_strconcat (p, ".attn_v.weight", NULL);
  n[7] = g_strconcat (p, ".attn_v.bias", NULL);
  n[8] = g_strconcat (p, ".attn_out.weight", NULL);
  n[9] = g_strconcat (p, ".attn_out.bias", NULL);
  n[10] = g_strconcat (p, ".ffn_up.weight", NULL);
  n[11] = g_strconcat (p, ".ffn_down.weight", NULL);
  /* llama.cpp's legacy CLIP/LLaVA converter names fc1 (dim -> ff)
   * "ffn_down" and fc2 "ffn_up"; clip.cpp swaps them back when ffn_down's
   * ne[0] is the vision dim, and so do we (same rule, so the two agree
   * even when ff = dim). */
  {
    NpuVitTensorView view;

    swapped = ld->lookup (n[11], &view, ld->user_data) && view.ne[0] == dim;
    if (swapped) {
      gchar *tmp = n[10];

      n[10] = n[11];
      n[11] = tmp;
    }
  }

  ok = get_norm (ld, n[0], TRUE, &l->ln1_w, &l->ln1_b, error)
      && get_norm (ld, n[1], TRUE, &l->ln2_w, &l->ln2_b, error)
      && get_matrix (ld, n[2], dim, dim, &l->q, error)
      && (l->q_b = get_vector (ld, n[3], TRUE, dim, error))
      && get_matrix (ld, n[4], dim, dim, &l->k, error)
      && (l->k_b = get_vector (ld, n[5], TRUE, dim, error))
      && get_matrix (ld, n[6], dim, dim, &l->v, error)
      && (l->v_b = get_vector (ld, n[7], TRUE, dim, error))
      && get_matrix (ld, n[8], dim, dim, &l->o, error)
      && (l->o_b = get_vector (ld, n[9], TRUE, dim, error))
      && get_matrix (ld, n[10], dim, ff, &l->up, error)
      && get_matrix (ld, n[11], ff, dim, &l->down, error);
  if (ok) {
    gchar *ub = g_strconcat (p, swapped ? ".ffn_down.bias" : ".ffn_up.bias",
        NULL);
    gchar *db = g_strconcat (p, swapped ? ".ffn_up.bias" : ".ffn_down.bias",
        NULL);

    ok = (l->up_b = get_vector (ld, ub, TRUE, ff, error))
        && (l->down_b = get_vector (ld, db, TRUE, dim, error));
    g_free (ub);
    g_free (db);
  }
  /* A gated FFN (ffn_gate) is another graph: refuse it rather than
   * silently ignore a tensor. */
  if (ok) {
    NpuVitTensorView view;
    gchar *gn = g_strconcat (p, ".ffn_gate.weight", NULL);

    if (ld->lookup (gn, &view, ld->user_data)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
          "%s: tensor %s: gated feed-forward blocks are not supported",
          ld->name, gn);
      ok = FALSE;
    }
    g_free (gn);
  }
  for (i = 0; i < G_N_ELEMENTS (n); i++)
    g_free (n[i]);
  g_free (p);
  return ok;
}

static gboolean
load_projector (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  NpuVitTensorView view;

  if (vit->projector == NPU_VIT_PROJECTOR_MLP) {
    /* LLaVA: mm.0 [dim, out], GELU, mm.2 [out, out]; the output size is
     * mm.0's ne[1] (clip.vision.projection_dim is not it in LLaVA files
     * from the legacy converter: that one is CLIP's own projection) */
    memset (&view, 0, sizeof (view));
    if (!ld->lookup ("mm.0.weight", &view, ld->user_data)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
          "%s: tensor mm.0.weight is missing", ld->name);
      return FALSE;
    }
    vit->out_dim = view.n_dims >= 2 ? view.ne[1] : 0;
    if (!vit->out_dim || vit->out_dim > (1u << 20)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: mm.0.weight has an output size of %u", ld->name, vit->out_dim);
      return FALSE;
    }
    vit->grid = vit->side;
    vit->n_tokens = vit->n_patches;
    return get_matrix (ld, "mm.0.weight", vit->dim, vit->out_dim, &vit->mm0,
        error)
        && (vit->mm0_b = get_vector (ld, "mm.0.bias", TRUE, vit->out_dim,
            error))
        && get_matrix (ld, "mm.2.weight", vit->out_dim, vit->out_dim,
        &vit->mm2, error)
        && (vit->mm2_b = get_vector (ld, "mm.2.bias", TRUE, vit->out_dim,
            error));
  } else {
    guint32 scale = 0;
    guint64 in;

    memset (&view, 0, sizeof (view));
    if (!ld->lookup ("mm.model.fc.weight", &view, ld->user_data)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
          "%s: tensor mm.model.fc.weight is missing", ld->name);
      return FALSE;
    }
    /* clip.cpp reads the factor if present; without it, ne[0] = dim s^2
     * says what it is */
    if (npu_gguf_find (ld->gguf, "clip.vision.projector.scale_factor")) {
      if (!get_u32_key (ld, "clip.vision.projector.scale_factor", &scale,
              error))
        return FALSE;
    } else if (view.ne[0] % vit->dim == 0) {
      guint64 s2 = view.ne[0] / vit->dim;

      while ((guint64) (scale + 1) * (scale + 1) <= s2)
        scale++;
      if ((guint64) scale * scale != s2)
        scale = 0;
    }
    if (scale < 2 || scale > vit->side) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: idefics3 pixel shuffle needs a scale factor between 2 and %u "
          "(clip.vision.projector.scale_factor), not %u", ld->name,
          vit->side, scale);
      return FALSE;
    }
    vit->scale = scale;
    /* clip.cpp pads the patch grid with zeros up to a multiple of s */
    vit->grid = (vit->side + scale - 1) / scale;
    vit->n_tokens = vit->grid * vit->grid;
    in = (guint64) vit->dim * scale * scale;
    vit->out_dim = view.n_dims >= 2 ? view.ne[1] : 0;
    if (!vit->out_dim || vit->out_dim > (1u << 20)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: mm.model.fc.weight has an output size of %u", ld->name,
          vit->out_dim);
      return FALSE;
    }
    return get_matrix (ld, "mm.model.fc.weight", in, vit->out_dim, &vit->fc,
        error);
  }
}

static gboolean
alloc_scratch (NpuVit * vit)
{
  gsize n = vit->n_pos, d = vit->dim, proj;

  if (vit->projector == NPU_VIT_PROJECTOR_MLP)
    proj = (gsize) vit->n_patches * vit->out_dim;
  else
    proj = (gsize) vit->n_tokens * d * vit->scale * vit->scale;
  vit->x = g_try_new (float, n * d);
  vit->h = g_try_new (float, n * d);
  vit->q = g_try_new (float, n * d);
  vit->k = g_try_new (float, n * d);
  vit->v = g_try_new (float, n * d);
  vit->att = g_try_new (float, n * d);
  vit->ffb = g_try_new (float, n * vit->ff);
  vit->proj = g_try_new (float, proj);
  /* ATTN_NQ score rows per thread the machine has; a task on more
   * threads grows them once (npu_vit_encode) */
  vit->n_score_rows = npu_cpu_count ();
  vit->scores = g_try_new (float, (gsize) vit->n_score_rows * ATTN_NQ * n);
  vit->scratch_bytes = sizeof (float) * (6 * n * d + n * vit->ff + proj +
      (gsize) vit->n_score_rows * ATTN_NQ * n);
  return vit->x && vit->h && vit->q && vit->k && vit->v && vit->att
      && vit->ffb && vit->proj && vit->scores;
}

static NpuVit *
vit_new (const NpuGguf * gguf, NpuVitTensorLookup lookup,
    gpointer user_data, const gchar * name, GError ** error)
{
  Loader ld = { name, gguf, lookup, user_data, NULL };
  NpuVit *vit;
  gboolean ok;
  guint i;

  g_return_val_if_fail (gguf != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  if (!lookup) {
    ld.lookup = lookup_gguf;
    ld.user_data = (gpointer) gguf;
  }
  vit = g_new0 (NpuVit, 1);
  vit->precision = NPU_MATMUL_PRECISION_ACCURATE;
  ld.vit = vit;

  ok = load_hparams (&ld, error) && load_patch_embedding (&ld, error)
      && get_norm (&ld, "v.pre_ln", FALSE, &vit->pre_ln_w, &vit->pre_ln_b,
      error);
  if (ok) {
    vit->layers = g_new0 (Layer, vit->n_layers);
    for (i = 0; ok && i < vit->n_layers; i++)
      ok = load_layer (&ld, i, error);
  }
  /* One block past block_count would be silently ignored: the file and
   * its key disagree, say so. */
  if (ok) {
    NpuVitTensorView view;
    gchar *extra = g_strdup_printf ("v.blk.%u.attn_q.weight", vit->n_layers);

    if (ld.lookup (extra, &view, ld.user_data)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: tensor %s exists but clip.vision.block_count is %u", name,
          extra, vit->n_layers);
      ok = FALSE;
    }
    g_free (extra);
  }
  ok = ok && get_norm (&ld, "v.post_ln", FALSE, &vit->post_ln_w,
      &vit->post_ln_b, error)
      && load_projector (&ld, error);
  if (ok && !alloc_scratch (vit)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: out of memory for the scratch buffers", name);
    ok = FALSE;
  }
  if (!ok) {
    npu_vit_free (vit);
    return NULL;
  }
  return vit;
}

NpuVit *
npu_vit_new (const NpuGguf * gguf, NpuVitTensorLookup lookup,
    gpointer user_data, GError ** error)
{
  return vit_new (gguf, lookup, user_data, "mmproj", error);
}

NpuVit *
npu_vit_new_from_file (const gchar * path, GError ** error)
{
  NpuGguf *gguf;
  NpuVit *vit;
  gchar *base;

  g_return_val_if_fail (path != NULL, NULL);

  gguf = npu_gguf_open (path, error);
  if (!gguf)
    return NULL;
  base = g_path_get_basename (path);
  vit = vit_new (gguf, NULL, NULL, base, error);
  g_free (base);
  if (!vit) {
    npu_gguf_free (gguf);
    return NULL;
  }
  /* MXFP4 tensors point into the mapping */
  vit->gguf = gguf;
  return vit;
}

void
npu_vit_free (NpuVit * vit)
{
  guint i;

  if (!vit)
    return;
  matrix_clear (&vit->patch_w);
  g_free (vit->patch_w32);
  g_free (vit->patch_b);
  g_free (vit->pos);
  g_free (vit->class_embd);
  g_free (vit->pre_ln_w);
  g_free (vit->pre_ln_b);
  g_free (vit->post_ln_w);
  g_free (vit->post_ln_b);
  for (i = 0; vit->layers && i < vit->n_layers; i++) {
    Layer *l = &vit->layers[i];

    g_free (l->ln1_w);
    g_free (l->ln1_b);
    g_free (l->ln2_w);
    g_free (l->ln2_b);
    matrix_clear (&l->q);
    matrix_clear (&l->k);
    matrix_clear (&l->v);
    matrix_clear (&l->o);
    matrix_clear (&l->up);
    matrix_clear (&l->down);
    g_free (l->q_b);
    g_free (l->k_b);
    g_free (l->v_b);
    g_free (l->o_b);
    g_free (l->up_b);
    g_free (l->down_b);
  }
  g_free (vit->layers);
  matrix_clear (&vit->mm0);
  matrix_clear (&vit->mm2);
  matrix_clear (&vit->fc);
  g_free (vit->mm0_b);
  g_free (vit->mm2_b);
  g_free (vit->x);
  g_free (vit->h);
  g_free (vit->q);
  g_free (vit->k);
  g_free (vit->v);
  g_free (vit->att);
  g_free (vit->ffb);
  g_free (vit->proj);
  g_free (vit->scores);
  if (vit->gguf)
    npu_gguf_free (vit->gguf);
  g_free (vit);
}

/* ------------------------------------------------------------------------
 * Getters
 */
NpuVitProjector
npu_vit_get_projector (const NpuVit * vit)
{
  return vit->projector;
}

guint
npu_vit_get_image_size (const NpuVit * vit)
{
  return vit->image_size;
}

guint
npu_vit_get_patch_size (const NpuVit * vit)
{
  return vit->patch;
}

guint
npu_vit_get_n_patches (const NpuVit * vit)
{
  return vit->n_patches;
}

guint
npu_vit_get_patch_dim (const NpuVit * vit)
{
  return vit->patch_dim;
}

void
npu_vit_get_mean_std (const NpuVit * vit, gfloat mean[3], gfloat std[3])
{
  memcpy (mean, vit->mean, sizeof (vit->mean));
  memcpy (std, vit->std, sizeof (vit->std));
}

guint
npu_vit_get_n_tokens (const NpuVit * vit)
{
  return vit->n_tokens;
}

void
npu_vit_get_token_grid (const NpuVit * vit, guint * width, guint * height)
{
  if (width)
    *width = vit->grid;
  if (height)
    *height = vit->grid;
}

guint
npu_vit_get_out_dim (const NpuVit * vit)
{
  return vit->out_dim;
}

guint
npu_vit_get_dim (const NpuVit * vit)
{
  return vit->dim;
}

guint
npu_vit_get_n_layers (const NpuVit * vit)
{
  return vit->n_layers;
}

void
npu_vit_get_memory (const NpuVit * vit, gsize * owned, gsize * borrowed,
    gsize * scratch)
{
  if (owned)
    *owned = vit->owned_bytes;
  if (borrowed)
    *borrowed = vit->borrowed_bytes;
  if (scratch)
    *scratch = vit->scratch_bytes;
}

/* ------------------------------------------------------------------------
 * Kernels.  Each row (token) is computed by one thread in a fixed order,
 * so the result does not depend on the number of threads.
 */
typedef struct
{
  NpuVit *vit;
  /* row operations */
  float *dst;
  const float *src;
  const float *w, *b;
  gsize cols;
  Act act;
  /* F32 product */
  const float *x;
  gsize k, rows;
} Job;

static void
run_parallel (NpuTask * task, gsize n, gsize grain, NpuParallelFunc func,
    gpointer data)
{
  if (task)
    npu_task_parallel_for (task, n, grain, func, data);
  else if (n > 0)
    func (0, n, 0, data);
}

/* Rows per slice for cheap element-wise work: ~16k elements */
static gsize
row_grain (gsize cols)
{
  return MAX (1, 16384 / MAX (cols, 1));
}

static inline float
activate (Act act, float x)
{
  switch (act) {
    case ACT_GELU:
      /* ggml_gelu: the tanh approximation, with ggml's constants */
      return 0.5f * x * (1.0f + tanhf (0.79788456080286535587989211986876f *
              x * (1.0f + 0.044715f * x * x)));
    case ACT_GELU_QUICK:
      return x / (1.0f + expf (-1.702f * x));
    case ACT_SILU:
      return x / (1.0f + expf (-x));
    default:
      return x;
  }
}

/* dst[r] = act (dst[r] + b) */
static void
bias_act_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c;

  for (r = start; r < end; r++) {
    float *y = job->dst + r * job->cols;

    if (job->b)
      for (c = 0; c < job->cols; c++)
        y[c] += job->b[c];
    if (job->act != ACT_NONE)
      for (c = 0; c < job->cols; c++)
        y[c] = activate (job->act, y[c]);
  }
}

static void
bias_act (NpuTask * task, float *y, gsize rows, gsize cols, const float *b,
    Act act)
{
  Job job = { 0, };

  job.dst = y;
  job.cols = cols;
  job.b = b;
  job.act = act;
  run_parallel (task, rows, row_grain (cols), bias_act_slice, &job);
}

/* dst[r] += src[r] + b: the residual stream */
static void
residual_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c;

  for (r = start; r < end; r++) {
    float *x = job->dst + r * job->cols;
    const float *y = job->src + r * job->cols;

    for (c = 0; c < job->cols; c++)
      x[c] += y[c] + job->b[c];
  }
}

static void
residual (NpuTask * task, float *x, const float *y, const float *b,
    gsize rows, gsize cols)
{
  Job job = { 0, };

  job.dst = x;
  job.src = y;
  job.b = b;
  job.cols = cols;
  run_parallel (task, rows, row_grain (cols), residual_slice, &job);
}

/* ggml_norm then weight and bias: (x - mean) / sqrt (var + eps) * w + b,
 * the biased variance; sums in double as ggml does.  dst may be src. */
static void
layernorm_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c, n = job->cols;
  float eps = job->vit->eps;

  for (r = start; r < end; r++) {
    const float *x = job->src + r * n;
    float *y = job->dst + r * n;
    double sum = 0.0, sum2 = 0.0;
    float mean, scale;

    for (c = 0; c < n; c++)
      sum += x[c];
    mean = (float) (sum / n);
    for (c = 0; c < n; c++) {
      float d = x[c] - mean;

      sum2 += (double) d *d;
    }
    scale = (float) (1.0 / sqrt (sum2 / n + eps));
    for (c = 0; c < n; c++)
      y[c] = (x[c] - mean) * scale * job->w[c] + job->b[c];
  }
}

static void
layernorm (NpuVit * vit, NpuTask * task, float *dst, const float *src,
    gsize rows, const float *w, const float *b)
{
  Job job = { 0, };

  job.vit = vit;
  job.dst = dst;
  job.src = src;
  job.w = w;
  job.b = b;
  job.cols = vit->dim;
  run_parallel (task, rows, row_grain (vit->dim), layernorm_slice, &job);
}

/* Plain F32 product for the patch embedding when MXFP4 cannot hold it:
 * y[c][r] = sum_j w[r][j] x[c][j].  Four patches at a time share each
 * weight row load; eight partial sums per patch keep the loop free of a
 * serial dependency so the compiler can vectorise it. */
#define GEMM_COLS 4

static void
gemm_f32_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize k = job->k, rows = job->rows, c0, r, j, i, l;

  for (c0 = start; c0 < end; c0 += GEMM_COLS) {
    gsize nc = MIN (GEMM_COLS, end - c0);

    for (r = 0; r < rows; r++) {
      const float *w = job->w + r * k;
      float acc[GEMM_COLS][8] = { {0,}, };

      for (i = 0; i < nc; i++) {
        const float *x = job->x + (c0 + i) * k;

        for (j = 0; j + 8 <= k; j += 8)
          for (l = 0; l < 8; l++)
            acc[i][l] += w[j + l] * x[j + l];
        for (; j < k; j++)
          acc[i][0] += w[j] * x[j];
      }
      for (i = 0; i < nc; i++) {
        float s = ((acc[i][0] + acc[i][1]) + (acc[i][2] + acc[i][3])) +
            ((acc[i][4] + acc[i][5]) + (acc[i][6] + acc[i][7]));

        job->dst[(c0 + i) * rows + r] = s;
      }
    }
  }
}

static void
gemm_f32 (NpuTask * task, const float *w, gsize rows, gsize k,
    const float *x, gsize n, float *y)
{
  Job job = { 0, };

  job.w = w;
  job.rows = rows;
  job.k = k;
  job.x = x;
  job.dst = y;
  /* slices are whole groups of GEMM_COLS patches */
  run_parallel (task, n, GEMM_COLS * 2, gemm_f32_slice, &job);
}

/* Multi-head attention over all tokens, no mask.  Work items are
 * (head, block of ATTN_QUERY_BLOCK queries), so a few heads still spread
 * over many threads. */
static void
attention_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  NpuVit *vit = job->vit;
  gsize n = vit->n_pos, hd = vit->head_dim, dim = vit->dim;
  gsize n_qblocks = (n + ATTN_QUERY_BLOCK - 1) / ATTN_QUERY_BLOCK;
  float scale = 1.0f / sqrtf ((float) hd);
  float *s = vit->scores + (gsize) worker * ATTN_NQ * n;
  gsize item, i;

  for (item = start; item < end; item++) {
    gsize head = item / n_qblocks, qb = item % n_qblocks;
    gsize i0 = qb * ATTN_QUERY_BLOCK, i1 = MIN (i0 + ATTN_QUERY_BLOCK, n);
    gsize off = head * hd;

    for (i = i0; i < i1; i += ATTN_NQ) {
      NpuAttnSpan all = { vit->q + i * dim + off, vit->k + off, vit->v + off,
        dim, (guint) n
      };

      /* consecutive tokens' queries of this head are dim floats apart */
      npu_attention_rows (&all, 1, hd, MIN (ATTN_NQ, i1 - i), dim, scale, s,
          n, vit->att + i * dim + off, dim);
    }
  }
}

static void
attention (NpuVit * vit, NpuTask * task)
{
  Job job = { 0, };
  gsize n_qblocks = (vit->n_pos + ATTN_QUERY_BLOCK - 1) / ATTN_QUERY_BLOCK;

  job.vit = vit;
  run_parallel (task, vit->n_heads * n_qblocks, 1, attention_slice, &job);
}

/* llama.cpp's build_patch_merge_permute (HF Idefics3's pixel_shuffle):
 * output token (ty, tx) of the (side/s) x (side/s) grid concatenates the
 * s x s patches (s ty + yi, s tx + xi) in row-major (yi, xi) order, each
 * with all dim features: feature (yi s + xi) dim + c.  Patches beyond the
 * grid (side not a multiple of s) are the zero padding clip.cpp adds. */
static void
pixel_shuffle (NpuVit * vit, const float *x, float *dst)
{
  guint s = vit->scale, g = vit->grid, side = vit->side, dim = vit->dim;
  guint ty, tx, yi, xi;

  for (ty = 0; ty < g; ty++) {
    for (tx = 0; tx < g; tx++) {
      float *t = dst + ((gsize) ty * g + tx) * dim * s * s;

      for (yi = 0; yi < s; yi++) {
        for (xi = 0; xi < s; xi++) {
          guint py = ty * s + yi, px = tx * s + xi;
          float *f = t + ((gsize) yi * s + xi) * dim;

          if (py < side && px < side)
            memcpy (f, x + ((gsize) py * side + px) * dim,
                dim * sizeof (float));
          else
            memset (f, 0, dim * sizeof (float));
        }
      }
    }
  }
}

static void
matmul (const NpuVit * vit, NpuTask * task, const Matrix * m, const float *x,
    gsize n, float *y)
{
  npu_matmul_mxfp4_with_precision (task, &m->m, x, n, y, vit->precision);
}

void
npu_vit_set_precision (NpuVit * vit, NpuMatmulPrecision precision)
{
  vit->precision = precision;
}

NpuMatmulPrecision
npu_vit_get_precision (const NpuVit * vit)
{
  return vit->precision;
}

gboolean
npu_vit_encode (NpuVit * vit, NpuTask * task, const float *patches,
    float *out, GError ** error)
{
  gsize n = vit->n_pos, dim = vit->dim, np = vit->n_patches, r, c;
  float *x = vit->x, *xp = vit->x + vit->first * dim;
  guint il, threads;

  g_return_val_if_fail (vit != NULL && patches != NULL && out != NULL, FALSE);

  /* Grows once if this device has more threads than the machine has
   * CPUs; not per frame. */
  threads = task ? npu_task_get_n_threads (task) : 1;
  if (threads > vit->n_score_rows) {
    g_free (vit->scores);
    vit->scores = g_new (float, (gsize) threads * ATTN_NQ * n);
    vit->scratch_bytes += (gsize) (threads - vit->n_score_rows) * ATTN_NQ *
        n * sizeof (float);
    vit->n_score_rows = threads;
  }

  /* Patch embedding: the stride-p convolution is one product over the
   * flattened patches, then its bias and the position embeddings. */
  if (vit->patch_mxfp4)
    matmul (vit, task, &vit->patch_w, patches, np, xp);
  else
    gemm_f32 (task, vit->patch_w32, dim, vit->patch_dim, patches, np, xp);
  if (vit->class_embd)
    memcpy (x, vit->class_embd, dim * sizeof (float));
  for (r = 0; r < n; r++) {
    float *row = x + r * dim;
    const float *p = vit->pos + r * dim;

    if (r >= vit->first && vit->patch_b)
      for (c = 0; c < dim; c++)
        row[c] += vit->patch_b[c] + p[c];
    else
      for (c = 0; c < dim; c++)
        row[c] += p[c];
  }
  if (vit->pre_ln_w)
    layernorm (vit, task, x, x, n, vit->pre_ln_w, vit->pre_ln_b);

  for (il = 0; il < vit->n_layers; il++) {
    const Layer *l = &vit->layers[il];

    if (task && npu_task_is_cancelled (task)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_CANCELLED,
          "vision encoder cancelled at block %u", il);
      return FALSE;
    }
    /* x += attn_out (MHA (LN1 (x))) */
    layernorm (vit, task, vit->h, x, n, l->ln1_w, l->ln1_b);
    matmul (vit, task, &l->q, vit->h, n, vit->q);
    matmul (vit, task, &l->k, vit->h, n, vit->k);
    matmul (vit, task, &l->v, vit->h, n, vit->v);
    bias_act (task, vit->q, n, dim, l->q_b, ACT_NONE);
    bias_act (task, vit->k, n, dim, l->k_b, ACT_NONE);
    bias_act (task, vit->v, n, dim, l->v_b, ACT_NONE);
    attention (vit, task);
    matmul (vit, task, &l->o, vit->att, n, vit->h);
    residual (task, x, vit->h, l->o_b, n, dim);

    /* x += ffn_down (act (ffn_up (LN2 (x)))) */
    layernorm (vit, task, vit->h, x, n, l->ln2_w, l->ln2_b);
    matmul (vit, task, &l->up, vit->h, n, vit->ffb);
    bias_act (task, vit->ffb, n, vit->ff, l->up_b, vit->act);
    matmul (vit, task, &l->down, vit->ffb, n, vit->h);
    residual (task, x, vit->h, l->down_b, n, dim);
  }
  if (vit->post_ln_w)
    layernorm (vit, task, x, x, n, vit->post_ln_w, vit->post_ln_b);

  /* The class token, if any, is not an image token: the projector sees
   * the patches only (LLaVA selects rows 1..n_patches). */
  if (vit->projector == NPU_VIT_PROJECTOR_MLP) {
    /* mm.2 (GELU (mm.0 (x))): ggml_gelu whatever clip.use_gelu says */
    matmul (vit, task, &vit->mm0, xp, np, vit->proj);
    bias_act (task, vit->proj, np, vit->out_dim, vit->mm0_b, ACT_GELU);
    matmul (vit, task, &vit->mm2, vit->proj, np, out);
    bias_act (task, out, np, vit->out_dim, vit->mm2_b, ACT_NONE);
  } else {
    pixel_shuffle (vit, xp, vit->proj);
    matmul (vit, task, &vit->fc, vit->proj, vit->n_tokens, out);
  }
  return TRUE;
}
