/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: Whisper-style audio encoder + projector of a llama.cpp audio
 * "mmproj" GGUF
 *
 * The graph follows llama.cpp's tools/mtmd (models/whisper-enc.cpp,
 * clip.cpp's build_vit, build_stack and the qwen2a / ultravox loaders);
 * docs/audio-encoder.md gives the maths and says where we differ on
 * purpose.
 */
#include "npuaudioenc-private.h"
#include "core/formats/npumxfp4.h"

#include <math.h>
#include <string.h>

/* What llama.cpp encodes per chunk: 30 s of 10 ms mel frames */
#define WHISPER_FRAMES 3000
#define WHISPER_RATE 16000
/* Anything larger than this many floats in one buffer is a broken file,
 * not a model: refuse it before allocating. */
#define MAX_BUFFER_ELEMENTS ((guint64) 1 << 31)

/* ------------------------------------------------------------------------
 * Loading
 */
static gboolean
load_hparams (NpuEncLoader * ld, NpuAudioEnc * enc, GError ** error)
{
  const gchar *arch, *proj;
  guint32 dim, ff, n_heads, n_layers, n_mels, stack = 1;
  gfloat eps;
  guint64 sizes[3];
  guint i;

  arch = npu_gguf_get_string (ld->gguf, "general.architecture", NULL, NULL);
  if (g_strcmp0 (arch, "clip") != 0) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_NOT_MMPROJ,
        "%s: not an mmproj file: general.architecture is %s%s%s, expected "
        "\"clip\"", ld->name, arch ? "\"" : "", arch ? arch : "absent",
        arch ? "\"" : "");
    return FALSE;
  }
  /* clip.cpp's default: a file that does not say has no audio encoder */
  if (!npu_gguf_get_bool_default (ld->gguf, "clip.has_audio_encoder", FALSE)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_NOT_MMPROJ,
        "%s: not an audio mmproj: clip.has_audio_encoder is not true%s",
        ld->name, npu_gguf_get_bool_default (ld->gguf,
            "clip.has_vision_encoder", FALSE) ? " (a vision mmproj)" : "");
    return FALSE;
  }

  /* clip.projector_type, else the per-modality key of mixed files, in
   * clip.cpp's order; "qwen2.5o" (Qwen2.5-Omni) is qwen2a for audio */
  proj = npu_gguf_get_string (ld->gguf, "clip.projector_type", NULL, NULL);
  if (!proj || !*proj)
    proj = npu_gguf_get_string (ld->gguf, "clip.audio.projector_type", NULL,
        NULL);
  if (!proj || !*proj) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: key clip.projector_type is missing", ld->name);
    return FALSE;
  }
  if (g_strcmp0 (proj, "qwen2a") == 0 || g_strcmp0 (proj, "qwen2.5o") == 0)
    enc->projector = NPU_AUDIO_PROJECTOR_QWEN2A;
  else if (g_strcmp0 (proj, "ultravox") == 0)
    enc->projector = NPU_AUDIO_PROJECTOR_ULTRAVOX;
  else {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: audio projector type \"%s\" is not supported (qwen2a, "
        "ultravox)", ld->name, proj);
    return FALSE;
  }

  if (!npu_enc_get_u32_key (ld, "clip.audio.embedding_length", &dim, error)
      || !npu_enc_get_u32_key (ld, "clip.audio.feed_forward_length", &ff, error)
      || !npu_enc_get_u32_key (ld, "clip.audio.block_count", &n_layers, error)
      || !npu_enc_get_u32_key (ld, "clip.audio.attention.head_count", &n_heads,
          error)
      || !npu_enc_get_u32_key (ld, "clip.audio.num_mel_bins", &n_mels, error))
    return FALSE;
  if (enc->projector == NPU_AUDIO_PROJECTOR_ULTRAVOX
      && !npu_enc_get_u32_key (ld, "clip.audio.projector.stack_factor", &stack,
          error))
    return FALSE;
  if (!npu_gguf_find (ld->gguf, "clip.audio.attention.layer_norm_epsilon")) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: key clip.audio.attention.layer_norm_epsilon is missing", ld->name);
    return FALSE;
  }
  if (!npu_gguf_get_f32 (ld->gguf, "clip.audio.attention.layer_norm_epsilon",
          &eps, NULL) || !(eps >= 0.0f)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: clip.audio.attention.layer_norm_epsilon is not a float >= 0",
        ld->name);
    return FALSE;
  }
  if (!dim || !n_heads || dim % n_heads != 0 || !ff || !n_mels
      || n_mels > 1024 || !stack || stack > 64) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: embedding length %u, feed-forward length %u, %u mel bins and "
        "stack factor %u must be positive (at most 1024 bins, 64 stacked) "
        "and %u heads must divide the embedding length", ld->name, dim, ff,
        n_mels, stack, n_heads);
    return FALSE;
  }
  sizes[0] = (guint64) WHISPER_FRAMES *MAX (dim, ff);
  sizes[1] = (guint64) 3 *MAX (dim, n_mels) * MAX (dim, WHISPER_FRAMES);
  sizes[2] = (guint64) dim *ff;
  for (i = 0; i < G_N_ELEMENTS (sizes); i++) {
    if (sizes[i] > MAX_BUFFER_ELEMENTS) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: model too large (dim %u, ff %u, %u mel bins)", ld->name, dim,
          ff, n_mels);
      return FALSE;
    }
  }
  if (n_layers > 1024) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: %u blocks is not an audio encoder", ld->name, n_layers);
    return FALSE;
  }
  enc->n_mels = n_mels;
  enc->dim = dim;
  enc->ff = ff;
  enc->n_layers = n_layers;
  enc->stack = stack;
  enc->blocks.dim = dim;
  enc->blocks.ff = ff;
  enc->blocks.n_heads = n_heads;
  enc->blocks.head_dim = dim / n_heads;
  enc->blocks.eps = eps;
  /* clip.cpp sets ffn_op to GELU (erf) for every Whisper-style encoder */
  enc->blocks.act = NPU_ENC_ACT_GELU_ERF;
  return TRUE;
}

/* ggml conv1d kernel ne [3, in, out] and its bias, which llama.cpp's
 * converter writes as ne [1, out] (it broadcasts over the frames); plain
 * [out] is read too. */
static gboolean
load_conv (NpuEncLoader * ld, guint index, guint in, guint out, Conv * conv,
    GError ** error)
{
  gchar *wn = g_strdup_printf ("a.conv1d.%u.weight", index);
  gchar *bn = g_strdup_printf ("a.conv1d.%u.bias", index);
  NpuTensorView view;
  gsize k = (gsize) 3 * in;
  gboolean ok;

  ok = npu_enc_get_tensor (ld, wn, TRUE, 3, in, out, 1, &view, error);
  if (ok && view.type == NPU_GGML_TYPE_MXFP4 && k % NPU_MXFP4_BLOCK_SIZE == 0) {
    conv->mxfp4 = TRUE;
    ok = npu_enc_view_to_matrix (ld, wn, &view, out, k, &conv->m, error);
  } else if (ok) {
    conv->w32 = npu_enc_to_f32 (ld, wn, &view, k * out, error);
    ok = conv->w32 != NULL;
  }
  if (ok) {
    GError *err = NULL;

    if (!npu_enc_get_tensor (ld, bn, TRUE, 1, out, 1, 1, &view, &err)) {
      g_clear_error (&err);
      ok = npu_enc_get_tensor (ld, bn, TRUE, out, 1, 1, 1, &view, error);
    }
    if (ok) {
      conv->b = npu_enc_to_f32 (ld, bn, &view, out, error);
      ok = conv->b != NULL;
    }
  }
  g_free (wn);
  g_free (bn);
  return ok;
}

static void
conv_clear (Conv * conv)
{
  npu_weight_matrix_clear (&conv->m);
  g_free (conv->w32);
  g_free (conv->b);
}

static gboolean
load_positions (NpuEncLoader * ld, NpuAudioEnc * enc, GError ** error)
{
  const gchar *tname = "a.position_embd.weight";
  NpuTensorView view;

  memset (&view, 0, sizeof (view));
  if (!ld->lookup (tname, &view, ld->user_data)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: tensor %s is missing", ld->name, tname);
    return FALSE;
  }
  enc->n_ctx = view.n_dims >= 2 ? view.ne[1] : 0;
  if (!enc->n_ctx || enc->n_ctx > 65536) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: %s has %u positions", ld->name, tname, enc->n_ctx);
    return FALSE;
  }
  if (!npu_enc_get_tensor (ld, tname, TRUE, enc->dim, enc->n_ctx, 1, 1,
          &view, error))
    return FALSE;
  enc->pos = npu_enc_to_f32 (ld, tname, &view, (gsize) enc->dim * enc->n_ctx,
      error);
  if (!enc->pos)
    return FALSE;
  /* the conv stride halves the frames: two frames a position */
  enc->max_frames = MIN (WHISPER_FRAMES, 2 * enc->n_ctx);
  enc->max_pos = enc->max_frames / 2;
  return TRUE;
}

/* The projector's output size from its last matrix */
static gboolean
out_dim_of (NpuEncLoader * ld, const gchar * tname, guint * out,
    GError ** error)
{
  NpuTensorView view;

  memset (&view, 0, sizeof (view));
  if (!ld->lookup (tname, &view, ld->user_data)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: tensor %s is missing", ld->name, tname);
    return FALSE;
  }
  *out = view.n_dims >= 2 ? view.ne[1] : 0;
  if (!*out || *out > (1u << 20)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: %s has an output size of %u", ld->name, tname, *out);
    return FALSE;
  }
  return TRUE;
}

static gboolean
load_projector (NpuEncLoader * ld, NpuAudioEnc * enc, GError ** error)
{
  if (enc->projector == NPU_AUDIO_PROJECTOR_QWEN2A) {
    /* mm.a.fc: Qwen2-Audio's multi_modal_projector.linear */
    return out_dim_of (ld, "mm.a.fc.weight", &enc->out_dim, error)
        && npu_enc_get_matrix (ld, "mm.a.fc.weight", enc->dim, enc->out_dim,
        &enc->fc, error)
        && (enc->fc_b = npu_enc_get_vector (ld, "mm.a.fc.bias", TRUE,
            enc->out_dim, error));
  } else {
    guint64 in = (guint64) enc->dim * enc->stack;

    /* UltravoxProjector: linear_1 (no bias) to hidden, SwiGLU halves it,
     * linear_2 (no bias) to the text model's width */
    if (!out_dim_of (ld, "mm.a.mlp.1.weight", &enc->hidden, error)
        || !out_dim_of (ld, "mm.a.mlp.2.weight", &enc->out_dim, error))
      return FALSE;
    if (enc->hidden % 2) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: mm.a.mlp.1.weight has an odd output size %u (SwiGLU halves "
          "it)", ld->name, enc->hidden);
      return FALSE;
    }
    return (enc->norm_pre_w = npu_enc_get_vector (ld, "mm.a.norm_pre.weight",
            TRUE, in, error))
        && npu_enc_get_matrix (ld, "mm.a.mlp.1.weight", in, enc->hidden,
        &enc->mlp1, error)
        && (enc->norm_mid_w = npu_enc_get_vector (ld, "mm.a.norm_mid.weight",
            TRUE, enc->hidden / 2, error))
        && npu_enc_get_matrix (ld, "mm.a.mlp.2.weight", enc->hidden / 2,
        enc->out_dim, &enc->mlp2, error);
  }
}

static gboolean
alloc_scratch (NpuAudioEnc * enc)
{
  gsize d = enc->dim, nf = enc->max_frames, np = enc->max_pos;
  gsize n_tok = npu_audio_enc_get_n_tokens (enc, enc->max_frames);
  gsize col = MAX (nf * 3 * enc->n_mels, np * 3 * d);
  gsize x = MAX (np, n_tok * enc->stack) * d;
  gsize p1 = 0, p2 = 0;

  if (enc->projector == NPU_AUDIO_PROJECTOR_ULTRAVOX) {
    p1 = n_tok * enc->hidden;
    p2 = n_tok * (enc->hidden / 2);
    enc->p1 = g_try_new (float, p1);
    enc->p2 = g_try_new (float, p2);
    if (!enc->p1 || !enc->p2)
      return FALSE;
  }
  enc->col = g_try_new (float, col);
  enc->h1 = g_try_new (float, nf * d);
  enc->x = g_try_new (float, x);
  enc->scratch_bytes = sizeof (float) * (col + nf * d + x + p1 + p2);
  return enc->col && enc->h1 && enc->x
      && npu_enc_blocks_alloc (&enc->blocks, enc->max_pos);
}

static NpuAudioEnc *
audio_enc_new (const NpuGguf * gguf, NpuTensorLookup lookup,
    gpointer user_data, const gchar * name, GError ** error)
{
  NpuEncLoader ld;
  NpuAudioEnc *enc;
  GError *err = NULL;
  gboolean ok;
  guint i;

  g_return_val_if_fail (gguf != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  npu_enc_loader_init (&ld, gguf, lookup, user_data, name);
  enc = g_new0 (NpuAudioEnc, 1);
  enc->blocks.precision = NPU_MATMUL_PRECISION_ACCURATE;

  /* a local error: the loaders tell "absent" from "bad" by it */
  ok = load_hparams (&ld, enc, &err)
      && load_conv (&ld, 1, enc->n_mels, enc->dim, &enc->conv1, &err)
      && load_conv (&ld, 2, enc->dim, enc->dim, &enc->conv2, &err)
      && load_positions (&ld, enc, &err)
      && npu_enc_get_norm (&ld, "a.pre_ln", FALSE, enc->dim, &enc->pre_ln_w,
      &enc->pre_ln_b, &err);
  if (ok) {
    enc->layers = g_new0 (NpuEncLayer, enc->n_layers);
    /* Whisper has no key bias (whisper-enc.cpp asserts it); clip.cpp swaps
     * no audio FFN */
    for (i = 0; ok && i < enc->n_layers; i++)
      ok = npu_enc_load_layer (&ld, "a", i, enc->dim, enc->ff, FALSE, FALSE,
          &enc->layers[i], &err);
  }
  /* One block past block_count would be silently ignored: the file and
   * its key disagree, say so. */
  if (ok) {
    NpuTensorView view;
    gchar *extra = g_strdup_printf ("a.blk.%u.attn_q.weight", enc->n_layers);

    if (ld.lookup (extra, &view, ld.user_data)) {
      g_set_error (&err, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: tensor %s exists but clip.audio.block_count is %u", name,
          extra, enc->n_layers);
      ok = FALSE;
    }
    g_free (extra);
  }
  ok = ok && npu_enc_get_norm (&ld, "a.post_ln", FALSE, enc->dim,
      &enc->post_ln_w, &enc->post_ln_b, &err)
      && load_projector (&ld, enc, &err);
  if (ok && !alloc_scratch (enc)) {
    g_set_error (&err, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: out of memory for the scratch buffers", name);
    ok = FALSE;
  }
  enc->owned_bytes = ld.owned_bytes;
  enc->borrowed_bytes = ld.borrowed_bytes;
  if (!ok) {
    g_propagate_error (error, err);
    npu_audio_enc_free (enc);
    return NULL;
  }
  return enc;
}

NpuAudioEnc *
npu_audio_enc_new (const NpuGguf * gguf, NpuTensorLookup lookup,
    gpointer user_data, GError ** error)
{
  return audio_enc_new (gguf, lookup, user_data, "mmproj", error);
}

NpuAudioEnc *
npu_audio_enc_new_from_file (const gchar * path, GError ** error)
{
  NpuGguf *gguf;
  NpuAudioEnc *enc;
  gchar *base;

  g_return_val_if_fail (path != NULL, NULL);

  gguf = npu_gguf_open (path, error);
  if (!gguf)
    return NULL;
  base = g_path_get_basename (path);
  enc = audio_enc_new (gguf, NULL, NULL, base, error);
  g_free (base);
  if (!enc) {
    npu_gguf_free (gguf);
    return NULL;
  }
  /* MXFP4 tensors point into the mapping */
  enc->gguf = gguf;
  return enc;
}

void
npu_audio_enc_free (NpuAudioEnc * enc)
{
  guint i;

  if (!enc)
    return;
  conv_clear (&enc->conv1);
  conv_clear (&enc->conv2);
  g_free (enc->pos);
  g_free (enc->pre_ln_w);
  g_free (enc->pre_ln_b);
  g_free (enc->post_ln_w);
  g_free (enc->post_ln_b);
  for (i = 0; enc->layers && i < enc->n_layers; i++)
    npu_enc_layer_clear (&enc->layers[i]);
  g_free (enc->layers);
  npu_weight_matrix_clear (&enc->fc);
  g_free (enc->fc_b);
  g_free (enc->norm_pre_w);
  g_free (enc->norm_mid_w);
  npu_weight_matrix_clear (&enc->mlp1);
  npu_weight_matrix_clear (&enc->mlp2);
  npu_enc_blocks_clear (&enc->blocks);
  g_free (enc->col);
  g_free (enc->h1);
  g_free (enc->x);
  g_free (enc->p1);
  g_free (enc->p2);
  if (enc->gguf)
    npu_gguf_free (enc->gguf);
  g_free (enc);
}

/* ------------------------------------------------------------------------
 * Getters
 */
NpuAudioProjector
npu_audio_enc_get_projector (const NpuAudioEnc * enc)
{
  return enc->projector;
}

guint
npu_audio_enc_get_n_mels (const NpuAudioEnc * enc)
{
  return enc->n_mels;
}

guint
npu_audio_enc_get_sample_rate (const NpuAudioEnc * enc)
{
  return WHISPER_RATE;
}

guint
npu_audio_enc_get_max_frames (const NpuAudioEnc * enc)
{
  return enc->max_frames;
}

guint
npu_audio_enc_get_n_tokens (const NpuAudioEnc * enc, guint n_frames)
{
  guint n_pos = n_frames / 2;

  if (n_frames == 0 || n_frames % 2 || n_frames > enc->max_frames)
    return 0;
  if (enc->projector == NPU_AUDIO_PROJECTOR_QWEN2A)
    return n_pos / 2;           /* AvgPool1d (2, stride 2) */
  return (n_pos + enc->stack - 1) / enc->stack;
}

guint
npu_audio_enc_get_out_dim (const NpuAudioEnc * enc)
{
  return enc->out_dim;
}

guint
npu_audio_enc_get_dim (const NpuAudioEnc * enc)
{
  return enc->dim;
}

guint
npu_audio_enc_get_n_layers (const NpuAudioEnc * enc)
{
  return enc->n_layers;
}

guint
npu_audio_enc_get_stack_factor (const NpuAudioEnc * enc)
{
  return enc->stack;
}

void
npu_audio_enc_set_precision (NpuAudioEnc * enc, NpuMatmulPrecision precision)
{
  g_return_if_fail (enc != NULL);

  enc->blocks.precision = precision;
}

NpuMatmulPrecision
npu_audio_enc_get_precision (const NpuAudioEnc * enc)
{
  g_return_val_if_fail (enc != NULL, NPU_MATMUL_PRECISION_ACCURATE);

  return enc->blocks.precision;
}

void
npu_audio_enc_get_memory (const NpuAudioEnc * enc, gsize * owned,
    gsize * borrowed, gsize * scratch)
{
  if (owned)
    *owned = enc->owned_bytes;
  if (borrowed)
    *borrowed = enc->borrowed_bytes;
  if (scratch)
    *scratch = enc->scratch_bytes + enc->blocks.scratch_bytes;
}

/* ------------------------------------------------------------------------
 * Encoding
 */
typedef struct
{
  const NpuAudioEnc *enc;
  const float *src;
  float *dst;
  guint n_in, in, stride;
} Im2col;

/* Row t of a kernel-3, padding-1 convolution's input: tap k of input
 * channel i is input position stride t + k - 1 (zero outside), at
 * i * 3 + k, the order of the kernel's weights.  The mel is channel major
 * (src[i * n_in + pos]); conv1's output is position major
 * (src[pos * in + i]). */
static void
im2col_mel_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Im2col *job = data;
  gsize t, i;
  gint k;

  for (t = start; t < end; t++) {
    float *row = job->dst + t * 3 * job->in;

    for (i = 0; i < job->in; i++) {
      for (k = 0; k < 3; k++) {
        gint64 p = (gint64) t * job->stride + k - 1;

        row[i * 3 + k] = p >= 0 && p < job->n_in ?
            job->src[i * job->n_in + p] : 0.0f;
      }
    }
  }
}

static void
im2col_rows_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Im2col *job = data;
  gsize t, i;
  gint k;

  for (t = start; t < end; t++) {
    float *row = job->dst + t * 3 * job->in;

    for (k = 0; k < 3; k++) {
      gint64 p = (gint64) t * job->stride + k - 1;
      const float *s = job->src + p * job->in;

      if (p >= 0 && p < job->n_in)
        for (i = 0; i < job->in; i++)
          row[i * 3 + k] = s[i];
      else
        for (i = 0; i < job->in; i++)
          row[i * 3 + k] = 0.0f;
    }
  }
}

/* y (n rows of out) = GELU (conv (col) + b) */
static void
conv_apply (NpuTask * task, const Conv * conv, guint in, guint out,
    const float *col, gsize n, float *y, NpuMatmulPrecision precision,
    NpuBytes * bytes)
{
  if (conv->mxfp4)
    npu_enc_matmul (task, &conv->m, col, n, y, precision, bytes);
  else
    npu_enc_gemm_f32 (task, conv->w32, out, (gsize) 3 * in, col, n, y, bytes);
  npu_enc_bias_act (task, y, n, out, conv->b, NPU_ENC_ACT_GELU_ERF, bytes);
}

/* ggml_rms_norm (eps) then * w, in place, on n rows of cols */
static void
rms_norm_rows (float *x, gsize n, gsize cols, const float *w, NpuBytes * bytes)
{
  gsize r, c;

  npu_bytes_read (bytes, NPU_BYTES_WEIGHTS, (guint64) cols * 4);
  npu_bytes_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * cols * 4);
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * cols * 4);

  for (r = 0; r < n; r++) {
    float *row = x + r * cols;
    double sum = 0.0;
    float scale;

    for (c = 0; c < cols; c++)
      sum += (double) row[c] * row[c];
    scale = (float) (1.0 / sqrt (sum / cols + ULTRAVOX_RMS_EPS));
    for (c = 0; c < cols; c++)
      row[c] = row[c] * scale * w[c];
  }
}

/* im2col: @job's @rows rows of 3 taps, each of job->in floats, from the
 * rows they gather (a stride-2 pass reads every input row once) */
static void
count_im2col (NpuBytes * bytes, const Im2col * job, gsize rows)
{
  npu_bytes_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) job->n_in *
      job->in * 4);
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * 3 *
      job->in * 4);
}

/* qwen2a: AvgPool1d (2, stride 2), post norm, mm.a.fc; x (n rows) to
 * out (n / 2 rows) */
static void
project_qwen2a (NpuAudioEnc * enc, NpuTask * task, float *x, gsize n,
    float *out)
{
  NpuBytes *bytes = &enc->blocks.bytes;
  gsize dim = enc->dim, n_tok = n / 2, r, c;

  /* AvgPool1d (2, stride 2) over positions (before the post norm, as
   * build_vit does it), in place: row j reads rows 2j and 2j + 1 >= j */
  for (r = 0; r < n_tok; r++) {
    const float *a = x + 2 * r * dim, *b = a + dim;
    float *row = x + r * dim;

    for (c = 0; c < dim; c++)
      row[c] = (a[c] + b[c]) * 0.5f;
  }
  npu_bytes_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) 2 * n_tok * dim * 4);
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n_tok * dim * 4);
  if (enc->post_ln_w)
    npu_enc_layernorm (task, x, x, n_tok, dim, enc->blocks.eps,
        enc->post_ln_w, enc->post_ln_b, bytes);
  npu_enc_matmul (task, &enc->fc, x, n_tok, out, enc->blocks.precision, bytes);
  npu_enc_bias_act (task, out, n_tok, enc->out_dim, enc->fc_b,
      NPU_ENC_ACT_NONE, bytes);
  npu_enc_count_as_tokens (bytes, (guint64) n_tok * enc->out_dim * 4);
}

/* ultravox: post norm, stack, RMS norm, SwiGLU MLP; x (n rows) to out */
static void
project_ultravox (NpuAudioEnc * enc, NpuTask * task, float *x, gsize n,
    float *out)
{
  NpuBytes *bytes = &enc->blocks.bytes;
  gsize dim = enc->dim, s = enc->stack, n_tok = (n + s - 1) / s, in = s * dim;
  gsize half = enc->hidden / 2, r, c;

  if (enc->post_ln_w)
    npu_enc_layernorm (task, x, x, n, dim, enc->blocks.eps,
        enc->post_ln_w, enc->post_ln_b, bytes);
  /* StackAudioFrames: s consecutive positions make one row of s dim,
   * which is x as it lies; the last row is padded with zeros */
  memset (x + n * dim, 0, (n_tok * s - n) * dim * sizeof (float));
  rms_norm_rows (x, n_tok, in, enc->norm_pre_w, bytes);
  npu_enc_matmul (task, &enc->mlp1, x, n_tok, enc->p1, enc->blocks.precision,
      bytes);
  /* ggml_swiglu_swapped: the first half times SiLU of the second */
  for (r = 0; r < n_tok; r++) {
    const float *a = enc->p1 + r * enc->hidden, *g = a + half;
    float *row = enc->p2 + r * half;

    for (c = 0; c < half; c++)
      row[c] = a[c] * (g[c] / (1.0f + expf (-g[c])));
  }
  npu_bytes_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n_tok *
      enc->hidden * 4);
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n_tok * half * 4);
  rms_norm_rows (enc->p2, n_tok, half, enc->norm_mid_w, bytes);
  npu_enc_matmul (task, &enc->mlp2, enc->p2, n_tok, out,
      enc->blocks.precision, bytes);
  npu_enc_count_as_tokens (bytes, (guint64) n_tok * enc->out_dim * 4);
}

/* conv1 (stride 1) and conv2 (stride 2) of @n_frames mel frames, each as
 * one product over its im2col rows, each followed by its bias and GELU
 * (erf); then + the first n_frames / 2 rows of the position table */
static void
embed (NpuAudioEnc * enc, NpuTask * task, const float *mel, guint n_frames)
{
  NpuBytes *bytes = &enc->blocks.bytes;
  gsize dim = enc->dim, n = n_frames / 2, r, c;
  float *x = enc->x;
  Im2col job;

  job.enc = enc;
  job.src = mel;
  job.dst = enc->col;
  job.n_in = n_frames;
  job.in = enc->n_mels;
  job.stride = 1;
  npu_enc_run_parallel (task, n_frames, 64, im2col_mel_slice, &job);
  count_im2col (bytes, &job, n_frames);
  conv_apply (task, &enc->conv1, enc->n_mels, enc->dim, enc->col, n_frames,
      enc->h1, enc->blocks.precision, bytes);
  job.src = enc->h1;
  job.in = enc->dim;
  job.stride = 2;
  npu_enc_run_parallel (task, n, 16, im2col_rows_slice, &job);
  count_im2col (bytes, &job, n);
  conv_apply (task, &enc->conv2, enc->dim, enc->dim, enc->col, n, x,
      enc->blocks.precision, bytes);

  for (r = 0; r < n; r++) {
    float *row = x + r * dim;
    const float *p = enc->pos + r * dim;

    for (c = 0; c < dim; c++)
      row[c] += p[c];
  }
  /* the rows of the table a chunk uses, not all n_ctx */
  npu_bytes_read (bytes, NPU_BYTES_WEIGHTS, (guint64) n * dim * 4);
  npu_bytes_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * dim * 4);
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * dim * 4);
}

void
npu_audio_enc_get_bytes (const NpuAudioEnc * enc, NpuBytes * bytes)
{
  g_return_if_fail (enc != NULL && bytes != NULL);

  *bytes = enc->blocks.bytes;
}

gboolean
npu_audio_enc_encode (NpuAudioEnc * enc, NpuTask * task, const float *mel,
    guint n_frames, float *out, GError ** error)
{
  gsize dim = enc->dim, n;
  float *x = enc->x;
  guint il;

  g_return_val_if_fail (enc != NULL && mel != NULL && out != NULL, FALSE);

  if (n_frames == 0 || n_frames % 2 || n_frames > enc->max_frames) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "audio encoder: %u mel frames, expected an even number from 2 to %u",
        n_frames, enc->max_frames);
    return FALSE;
  }
  n = n_frames / 2;
  npu_enc_blocks_fit_task (&enc->blocks, task);
  embed (enc, task, mel, n_frames);
  if (enc->pre_ln_w)
    npu_enc_layernorm (task, x, x, n, dim, enc->blocks.eps, enc->pre_ln_w,
        enc->pre_ln_b, &enc->blocks.bytes);

  for (il = 0; il < enc->n_layers; il++) {
    if (task && npu_task_is_cancelled (task)) {
      g_set_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
          "audio encoder cancelled at block %u", il);
      return FALSE;
    }
    npu_enc_block_forward (&enc->blocks, &enc->layers[il], task, x, n);
  }

  if (enc->projector == NPU_AUDIO_PROJECTOR_QWEN2A)
    project_qwen2a (enc, task, x, n, out);
  else
    project_ultravox (enc, task, x, n, out);
  return TRUE;
}
