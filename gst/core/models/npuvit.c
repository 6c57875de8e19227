/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: vision encoder (ViT + projector) of a llama.cpp "mmproj" GGUF
 *
 * The graph follows llama.cpp's tools/mtmd (clip.cpp's build_vit,
 * build_inp, build_attn, build_ffn, build_patch_merge_permute and the
 * llava / siglip graph builders); docs/vision-encoder.md gives the maths
 * and says where we differ on purpose.
 */
#include "npuvit-private.h"
#include "core/cpu/npumatmul.h"
#include "core/formats/npumxfp4.h"

#include <math.h>
#include <string.h>

/* Anything larger than this many floats in one buffer is a broken file,
 * not a model: refuse it before allocating. */
#define MAX_BUFFER_ELEMENTS ((guint64) 1 << 31)

/* ------------------------------------------------------------------------
 * Loading
 */
typedef struct
{
  NpuEncLoader e;               /* tensors, error prefix, bytes owned */
  NpuVit *vit;
} Loader;


static gboolean
get_rgb_key (Loader * ld, const gchar * key, gfloat * rgb, GError ** error)
{
  const NpuGgufValue *arr = npu_gguf_find (ld->e.gguf, key);
  guint i;

  if (!arr) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: key %s is missing", ld->e.name, key);
    return FALSE;
  }
  if (arr->type != NPU_GGUF_TYPE_ARRAY || arr->v.arr.count < 3
      || (arr->v.arr.type != NPU_GGUF_TYPE_FLOAT32
          && arr->v.arr.type != NPU_GGUF_TYPE_FLOAT64)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: key %s is not an array of 3 floats", ld->e.name, key);
    return FALSE;
  }
  for (i = 0; i < 3; i++) {
    NpuGgufValue v;

    npu_gguf_array_get (arr, i, &v);
    rgb[i] = (gfloat) v.v.f;
  }
  return TRUE;
}

/* An mmproj file with a vision encoder, and its projector's kind */
static gboolean
load_kind (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  const gchar *arch, *proj;
  gboolean has_vision;

  arch = npu_gguf_get_string (ld->e.gguf, "general.architecture", NULL, NULL);
  if (g_strcmp0 (arch, "clip") != 0) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_NOT_MMPROJ,
        "%s: not an mmproj file: general.architecture is %s%s%s, expected "
        "\"clip\"", ld->e.name, arch ? "\"" : "", arch ? arch : "absent",
        arch ? "\"" : "");
    return FALSE;
  }
  /* clip.cpp's default: a file that does not say has no vision encoder */
  has_vision = npu_gguf_get_bool_default (ld->e.gguf, "clip.has_vision_encoder",
      FALSE);
  if (!has_vision) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_NOT_MMPROJ,
        "%s: not a vision mmproj: clip.has_vision_encoder is not true",
        ld->e.name);
    return FALSE;
  }

  /* clip.projector_type, else the per-modality key of mixed files, else
   * "mlp", in clip.cpp's order */
  proj = npu_gguf_get_string (ld->e.gguf, "clip.projector_type", NULL, NULL);
  if (!proj || !*proj)
    proj = npu_gguf_get_string (ld->e.gguf, "clip.vision.projector_type", NULL,
        NULL);
  if (!proj || !*proj || g_strcmp0 (proj, "mlp") == 0)
    vit->projector = NPU_VIT_PROJECTOR_MLP;
  else if (g_strcmp0 (proj, "idefics3") == 0)
    vit->projector = NPU_VIT_PROJECTOR_IDEFICS3;
  else if (g_strcmp0 (proj, "qwen2vl_merger") == 0)
    vit->projector = NPU_VIT_PROJECTOR_QWEN2VL;
  else if (g_strcmp0 (proj, "qwen2.5vl_merger") == 0)
    vit->projector = NPU_VIT_PROJECTOR_QWEN25VL;
  else if (g_strcmp0 (proj, "gemma3") == 0)
    vit->projector = NPU_VIT_PROJECTOR_GEMMA3;
  else {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: projector type \"%s\" is not supported (mlp, idefics3, "
        "qwen2vl_merger, qwen2.5vl_merger, gemma3)", ld->e.name, proj);
    return FALSE;
  }
  return TRUE;
}

/* The layer norms' epsilon and the pixel normalisation */
static gboolean
load_normalisation (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  guint i;

  if (!npu_gguf_find (ld->e.gguf, "clip.vision.attention.layer_norm_epsilon")) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: key clip.vision.attention.layer_norm_epsilon is missing",
        ld->e.name);
    return FALSE;
  }
  if (!npu_gguf_get_f32 (ld->e.gguf, "clip.vision.attention.layer_norm_epsilon",
          &vit->blocks.eps, NULL) || !(vit->blocks.eps >= 0.0f)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: clip.vision.attention.layer_norm_epsilon is not a float >= 0",
        ld->e.name);
    return FALSE;
  }
  if (!get_rgb_key (ld, "clip.vision.image_mean", vit->mean, error)
      || !get_rgb_key (ld, "clip.vision.image_std", vit->std, error))
    return FALSE;
  for (i = 0; i < 3; i++) {
    if (!(vit->std[i] > 0.0f) || !isfinite (vit->mean[i])) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: clip.vision.image_std must be positive and image_mean finite",
          ld->e.name);
      return FALSE;
    }
  }
  return TRUE;
}

/* The feed-forward activation; stacked feature layers are refused */
static gboolean
load_activation (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  gboolean use_gelu, use_silu;

  use_gelu = npu_gguf_get_bool_default (ld->e.gguf, "clip.use_gelu", FALSE);
  use_silu = npu_gguf_get_bool_default (ld->e.gguf, "clip.use_silu", FALSE);
  if (use_gelu && use_silu) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: clip.use_gelu and clip.use_silu are both true", ld->e.name);
    return FALSE;
  }
  vit->blocks.act = use_gelu ? NPU_ENC_ACT_GELU : use_silu ? NPU_ENC_ACT_SILU
      : NPU_ENC_ACT_GELU_QUICK;

  /* Feature layers (Granite Vision) stack hidden states of several
   * blocks: a different graph. */
  if (npu_gguf_find (ld->e.gguf, "clip.vision.feature_layer")) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: clip.vision.feature_layer (stacked feature layers) is not "
        "supported", ld->e.name);
    return FALSE;
  }
  return TRUE;
}

/* Hyper-parameters and the checks that need no tensor */
static gboolean
load_hparams (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  guint32 image_size, patch, dim, ff, n_heads, n_layers;
  guint64 sizes[4];
  guint i;

  if (!load_kind (ld, error))
    return FALSE;


  if (!npu_enc_get_u32_key (&ld->e, "clip.vision.image_size", &image_size,
          error)
      || !npu_enc_get_u32_key (&ld->e, "clip.vision.patch_size", &patch, error)
      || !npu_enc_get_u32_key (&ld->e, "clip.vision.embedding_length", &dim,
          error)
      || !npu_enc_get_u32_key (&ld->e, "clip.vision.feed_forward_length", &ff,
          error)
      || !npu_enc_get_u32_key (&ld->e, "clip.vision.block_count", &n_layers,
          error)
      || !npu_enc_get_u32_key (&ld->e, "clip.vision.attention.head_count",
          &n_heads, error))
    return FALSE;
  if (!load_normalisation (ld, error) || !load_activation (ld, error))
    return FALSE;


  if (!patch || !image_size || image_size % patch != 0) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: image size %u is not a positive multiple of the patch size %u",
        ld->e.name, image_size, patch);
    return FALSE;
  }
  if (!dim || !n_heads || dim % n_heads != 0 || !ff) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: embedding length %u and feed-forward length %u must be "
        "positive and %u heads must divide the embedding length", ld->e.name,
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
  vit->blocks.dim = dim;
  vit->blocks.ff = ff;
  vit->blocks.n_heads = n_heads;
  vit->blocks.head_dim = dim / n_heads;
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
          ld->e.name, image_size, patch, dim, ff);
      return FALSE;
    }
  }
  if (n_layers > 1024) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: %u blocks is not a vision encoder", ld->e.name, n_layers);
    return FALSE;
  }
  return TRUE;
}

static gboolean
load_patch_embedding (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  NpuTensorView view;
  const gchar *tname = "v.patch_embd.weight";

  /* ggml conv_2d kernel: ne = [KW, KH, IC, OC], so output channel o's
   * 3 p p weights are contiguous, channel-major, then row, then column:
   * the order of a patch's values in npu_vit_encode ()'s input. */
  if (!npu_enc_get_tensor (&ld->e, tname, TRUE, vit->patch, vit->patch, 3,
          vit->dim, &view, error))
    return FALSE;
  /* An MXFP4 kernel is used in place.  Any other (llama.cpp's converters
   * write F16 or F32 kernels) becomes an F32 copy rather than MXFP4: the
   * product is ~1 % of the encoder's work, and quantising the first layer
   * moved the base model's output by ~0.5 of its rms (llama.cpp's clip
   * cross-check), where every later layer is read as stored. */
  if (view.type == NPU_GGML_TYPE_MXFP4) {
    vit->patch_mxfp4 = TRUE;
    if (!npu_enc_view_to_matrix (&ld->e, tname, &view, vit->dim, vit->patch_dim,
            &vit->patch_w, error))
      return FALSE;
  } else {
    vit->patch_w32 = npu_enc_to_f32 (&ld->e, tname, &view,
        (gsize) vit->patch_dim * vit->dim, error);
    if (!vit->patch_w32)
      return FALSE;
  }
  vit->patch_b =
      npu_enc_get_vector (&ld->e, "v.patch_embd.bias", FALSE, vit->dim, error);
  if (!vit->patch_b && error && *error)
    return FALSE;

  /* CLIP (LLaVA) has a class token, SigLIP has none */
  vit->class_embd =
      npu_enc_get_vector (&ld->e, "v.class_embd", FALSE, vit->dim, error);
  if (!vit->class_embd && error && *error)
    return FALSE;
  vit->first = vit->class_embd ? 1 : 0;
  vit->n_pos = vit->n_patches + vit->first;

  if (!npu_enc_get_tensor (&ld->e, "v.position_embd.weight", TRUE, vit->dim,
          vit->n_pos, 1, 1, &view, error))
    return FALSE;
  vit->pos = npu_enc_to_f32 (&ld->e, "v.position_embd.weight", &view,
      (gsize) vit->dim * vit->n_pos, error);
  return vit->pos != NULL;
}


static gboolean
load_projector (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  NpuTensorView view;

  if (vit->projector == NPU_VIT_PROJECTOR_GEMMA3)
    return npu_vit_gemma3_load (vit, &ld->e, error);
  if (vit->projector == NPU_VIT_PROJECTOR_MLP) {
    /* LLaVA: mm.0 [dim, out], GELU, mm.2 [out, out]; the output size is
     * mm.0's ne[1] (clip.vision.projection_dim is not it in LLaVA files
     * from the legacy converter: that one is CLIP's own projection) */
    memset (&view, 0, sizeof (view));
    if (!ld->e.lookup ("mm.0.weight", &view, ld->e.user_data)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
          "%s: tensor mm.0.weight is missing", ld->e.name);
      return FALSE;
    }
    vit->out_dim = view.n_dims >= 2 ? view.ne[1] : 0;
    if (!vit->out_dim || vit->out_dim > (1u << 20)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: mm.0.weight has an output size of %u", ld->e.name, vit->out_dim);
      return FALSE;
    }
    vit->grid = vit->side;
    vit->n_tokens = vit->n_patches;
    return npu_enc_get_matrix (&ld->e, "mm.0.weight", vit->dim, vit->out_dim,
        &vit->mm0, error)
        && (vit->mm0_b =
        npu_enc_get_vector (&ld->e, "mm.0.bias", TRUE, vit->out_dim, error))
        && npu_enc_get_matrix (&ld->e, "mm.2.weight", vit->out_dim,
        vit->out_dim, &vit->mm2, error)
        && (vit->mm2_b =
        npu_enc_get_vector (&ld->e, "mm.2.bias", TRUE, vit->out_dim, error));
  } else {
    guint32 scale = 0;
    guint64 in;

    memset (&view, 0, sizeof (view));
    if (!ld->e.lookup ("mm.model.fc.weight", &view, ld->e.user_data)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
          "%s: tensor mm.model.fc.weight is missing", ld->e.name);
      return FALSE;
    }
    /* clip.cpp reads the factor if present; without it, ne[0] = dim s^2
     * says what it is */
    if (npu_gguf_find (ld->e.gguf, "clip.vision.projector.scale_factor")) {
      if (!npu_enc_get_u32_key (&ld->e, "clip.vision.projector.scale_factor",
              &scale, error))
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
          "(clip.vision.projector.scale_factor), not %u", ld->e.name,
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
          "%s: mm.model.fc.weight has an output size of %u", ld->e.name,
          vit->out_dim);
      return FALSE;
    }
    return npu_enc_get_matrix (&ld->e, "mm.model.fc.weight", in, vit->out_dim,
        &vit->fc, error);
  }
}

static gboolean
alloc_scratch (NpuVit * vit)
{
  gsize n = vit->n_pos, d = vit->dim, proj;

  if (vit->projector == NPU_VIT_PROJECTOR_MLP)
    proj = (gsize) vit->n_patches * vit->out_dim;
  else if (vit->projector == NPU_VIT_PROJECTOR_GEMMA3)
    proj = (gsize) vit->n_tokens * d;
  else
    proj = (gsize) vit->n_tokens * d * vit->scale * vit->scale;
  vit->x = g_try_new (float, n * d);
  vit->proj = g_try_new (float, proj);
  if (!npu_enc_blocks_alloc (&vit->blocks, vit->n_pos))
    return FALSE;
  vit->scratch_bytes = sizeof (float) * (n * d + proj);
  return vit->x && vit->proj;
}

/* The tensors of the mlp and idefics3 graphs, and their scratch */
static gboolean
load_tensors (Loader * ld, GError ** error)
{
  NpuVit *vit = ld->vit;
  const gchar *name = ld->e.name;
  gboolean ok;
  guint i;

  ok = load_patch_embedding (ld, error)
      && npu_enc_get_norm (&ld->e, "v.pre_ln", FALSE, vit->dim,
      &vit->pre_ln_w, &vit->pre_ln_b, error);
  if (ok) {
    vit->layers = g_new0 (Layer, vit->n_layers);
    for (i = 0; ok && i < vit->n_layers; i++)
      ok = npu_enc_load_layer (&ld->e, "v", i, vit->dim, vit->ff, TRUE, TRUE,
          &vit->layers[i], error);
  }
  /* One block past block_count would be silently ignored: the file and
   * its key disagree, say so. */
  if (ok) {
    NpuTensorView view;
    gchar *extra = g_strdup_printf ("v.blk.%u.attn_q.weight", vit->n_layers);

    if (ld->e.lookup (extra, &view, ld->e.user_data)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: tensor %s exists but clip.vision.block_count is %u", name,
          extra, vit->n_layers);
      ok = FALSE;
    }
    g_free (extra);
  }
  ok = ok && npu_enc_get_norm (&ld->e, "v.post_ln", FALSE, vit->dim,
      &vit->post_ln_w, &vit->post_ln_b, error)
      && load_projector (ld, error);
  if (ok && !alloc_scratch (vit)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: out of memory for the scratch buffers", name);
    ok = FALSE;
  }
  return ok;
}

static NpuVit *
vit_new (const NpuGguf * gguf, NpuTensorLookup lookup,
    gpointer user_data, const gchar * name, GError ** error)
{
  Loader ld;
  NpuVit *vit;
  gboolean ok;

  g_return_val_if_fail (gguf != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  npu_enc_loader_init (&ld.e, gguf, lookup, user_data, name);
  vit = g_new0 (NpuVit, 1);
  vit->blocks.precision = NPU_MATMUL_PRECISION_ACCURATE;
  ld.vit = vit;

  ok = load_hparams (&ld, error);
  if (ok && (vit->projector == NPU_VIT_PROJECTOR_QWEN2VL
          || vit->projector == NPU_VIT_PROJECTOR_QWEN25VL))
    ok = npu_vit_qwen_load (vit, &ld.e, error);
  else if (ok)
    ok = load_tensors (&ld, error);
  vit->owned_bytes = ld.e.owned_bytes;
  vit->borrowed_bytes = ld.e.borrowed_bytes;
  if (!ok) {
    npu_vit_free (vit);
    return NULL;
  }
  return vit;
}

NpuVit *
npu_vit_new (const NpuGguf * gguf, NpuTensorLookup lookup,
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
  npu_weight_matrix_clear (&vit->patch_w);
  g_free (vit->patch_w32);
  g_free (vit->patch_b);
  g_free (vit->pos);
  g_free (vit->class_embd);
  g_free (vit->pre_ln_w);
  g_free (vit->pre_ln_b);
  g_free (vit->post_ln_w);
  g_free (vit->post_ln_b);
  for (i = 0; vit->layers && i < vit->n_layers; i++)
    npu_enc_layer_clear (&vit->layers[i]);
  g_free (vit->layers);
  npu_weight_matrix_clear (&vit->mm0);
  npu_weight_matrix_clear (&vit->mm2);
  npu_weight_matrix_clear (&vit->fc);
  g_free (vit->mm0_b);
  g_free (vit->mm2_b);
  npu_vit_gemma3_clear (vit);
  g_free (vit->x);
  g_free (vit->proj);
  npu_vit_qwen_clear (vit);
  npu_enc_blocks_clear (&vit->blocks);
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
  /* the Qwen grid need not be square */
  gboolean qwen = vit->qwen.layers != NULL;

  if (width)
    *width = vit->grid;
  if (height)
    *height = qwen ? vit->qwen.ph / 2 : vit->grid;
}

void
npu_vit_get_patch_grid (const NpuVit * vit, guint * width, guint * height)
{
  gboolean qwen = vit->qwen.layers != NULL;

  if (width)
    *width = qwen ? vit->qwen.pw : vit->side;
  if (height)
    *height = qwen ? vit->qwen.ph : vit->side;
}

gboolean
npu_vit_set_patch_grid (NpuVit * vit, guint height, guint width,
    GError ** error)
{
  g_return_val_if_fail (vit != NULL, FALSE);

  if (!vit->qwen.layers) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "only the Qwen mergers (qwen2vl_merger, qwen2.5vl_merger) take a "
        "patch grid of their own; this encoder's image is %u x %u",
        vit->image_size, vit->image_size);
    return FALSE;
  }
  return npu_vit_qwen_set_grid (vit, height, width, error);
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
    *scratch = vit->scratch_bytes + vit->blocks.scratch_bytes;
}

/* ------------------------------------------------------------------------
 * Encoding
 */
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

void
npu_vit_set_precision (NpuVit * vit, NpuMatmulPrecision precision)
{
  vit->blocks.precision = precision;
}

NpuMatmulPrecision
npu_vit_get_precision (const NpuVit * vit)
{
  return vit->blocks.precision;
}

/* The embeddings added to the patch embedding's rows: the position table
 * (all its n_pos rows), the patch bias and the class token, each once,
 * and the rows they are added to */
static void
count_embeddings (NpuVit * vit)
{
  guint64 dim = vit->dim, w = (guint64) vit->n_pos * dim * 4;

  if (vit->patch_b)
    w += dim * 4;
  if (vit->class_embd)
    w += dim * 4;
  npu_bytes_read (&vit->blocks.bytes, NPU_BYTES_WEIGHTS, w);
  npu_bytes_read (&vit->blocks.bytes, NPU_BYTES_ACTIVATIONS,
      (guint64) vit->n_pos * dim * 4);
  npu_bytes_write (&vit->blocks.bytes, NPU_BYTES_ACTIVATIONS,
      (guint64) vit->n_pos * dim * 4);
}


void
npu_vit_get_bytes (const NpuVit * vit, NpuBytes * bytes)
{
  g_return_if_fail (vit != NULL && bytes != NULL);

  *bytes = vit->blocks.bytes;
}

gboolean
npu_vit_encode (NpuVit * vit, NpuTask * task, const float *patches,
    float *out, GError ** error)
{
  gsize n = vit->n_pos, dim = vit->dim, np = vit->n_patches, r, c;
  float *x = vit->x, *xp = vit->x + vit->first * dim;
  guint il;

  g_return_val_if_fail (vit != NULL && patches != NULL && out != NULL, FALSE);

  /* Grows once if this device has more threads than the machine has
   * CPUs; not per frame. */
  npu_enc_blocks_fit_task (&vit->blocks, task);
  if (vit->qwen.layers)
    return npu_vit_qwen_encode (vit, task, patches, out, error);

  /* Patch embedding: the stride-p convolution is one product over the
   * flattened patches, then its bias and the position embeddings. */
  if (vit->patch_mxfp4)
    npu_enc_matmul (task, &vit->patch_w, patches, np, xp,
        vit->blocks.precision, &vit->blocks.bytes);
  else
    npu_enc_gemm_f32 (task, vit->patch_w32, dim, vit->patch_dim, patches, np,
        xp, &vit->blocks.bytes);
  if (vit->class_embd)
    memcpy (x, vit->class_embd, dim * sizeof (float));
  count_embeddings (vit);
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
    npu_enc_layernorm (task, x, x, n, dim, vit->blocks.eps, vit->pre_ln_w,
        vit->pre_ln_b, &vit->blocks.bytes);

  for (il = 0; il < vit->n_layers; il++) {
    const Layer *l = &vit->layers[il];

    if (task && npu_task_is_cancelled (task)) {
      g_set_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
          "vision encoder cancelled at block %u", il);
      return FALSE;
    }
    npu_enc_block_forward (&vit->blocks, l, task, x, n);
  }
  if (vit->post_ln_w)
    npu_enc_layernorm (task, x, x, n, dim, vit->blocks.eps, vit->post_ln_w,
        vit->post_ln_b, &vit->blocks.bytes);

  /* The class token, if any, is not an image token: the projector sees
   * the patches only (LLaVA selects rows 1..n_patches). */
  if (vit->projector == NPU_VIT_PROJECTOR_MLP) {
    /* mm.2 (GELU (mm.0 (x))): ggml_gelu whatever clip.use_gelu says */
    npu_enc_matmul (task, &vit->mm0, xp, np, vit->proj, vit->blocks.precision,
        &vit->blocks.bytes);
    npu_enc_bias_act (task, vit->proj, np, vit->out_dim, vit->mm0_b,
        NPU_ENC_ACT_GELU, &vit->blocks.bytes);
    npu_enc_matmul (task, &vit->mm2, vit->proj, np, out, vit->blocks.precision,
        &vit->blocks.bytes);
    npu_enc_bias_act (task, out, np, vit->out_dim, vit->mm2_b, NPU_ENC_ACT_NONE,
        &vit->blocks.bytes);
  } else if (vit->projector == NPU_VIT_PROJECTOR_GEMMA3) {
    npu_vit_gemma3_project (vit, task, xp, out);
  } else {
    pixel_shuffle (vit, xp, vit->proj);
    npu_bytes_read (&vit->blocks.bytes, NPU_BYTES_ACTIVATIONS,
        (guint64) np * dim * 4);
    npu_bytes_write (&vit->blocks.bytes, NPU_BYTES_ACTIVATIONS,
        (guint64) vit->n_tokens * dim * vit->scale * vit->scale * 4);
    npu_enc_matmul (task, &vit->fc, vit->proj, vit->n_tokens, out,
        vit->blocks.precision, &vit->blocks.bytes);
  }
  npu_enc_count_as_tokens (&vit->blocks.bytes,
      (guint64) vit->n_tokens * vit->out_dim * 4);
  return TRUE;
}
