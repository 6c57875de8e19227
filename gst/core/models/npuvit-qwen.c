/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the Qwen2-VL / Qwen2.5-VL vision encoder (qwen2vl_merger,
 * qwen2.5vl_merger), on the CPU
 *
 * llama.cpp's clip_graph_qwen2vl (tools/mtmd/models/qwen2vl.cpp) and the
 * index tables clip.cpp gives it, for one still image:
 *
 *   - the Conv3D patch embedding over two copies of the image in time is
 *     the sum of its two temporal kernels (v.patch_embd.weight, .weight.1)
 *     applied to the image: summed once at load time; no bias, no position
 *     embedding, no class token;
 *   - patches are grouped by 2 x 2 (the merger's units), and with window
 *     attention (qwen2.5vl) the units are further grouped by window of
 *     window_size / patch / 2 units a side, windows in raster order, the
 *     last row and column of windows clipped; the blocks run on that
 *     sequence, and the merged tokens are put back in raster order at the
 *     end (clip.cpp's inv_window_idx / window_idx);
 *   - every block rotates q and k by 2-D rotary embeddings (ggml_rope_multi
 *     in vision mode: of a head's d values, pair (k, k + d/2) for k < d/4
 *     turns by row * 10000^(-4k/d), for d/4 <= k < d/2 by column *
 *     10000^(-4(k - d/4)/d)); a block with (il + 1) % n_wa_pattern != 0
 *     attends within its window only (clip.cpp's block-diagonal mask),
 *     the others, and every block without n_wa_pattern, to all patches;
 *   - qwen2vl: LayerNorm blocks, ffn_down (act (ffn_up)); qwen2.5vl:
 *     RMSNorm (weights only) and ffn_down (act (ffn_gate) * ffn_up), act
 *     SiLU from clip.use_silu; biases on every product;
 *   - the merger: v.post_ln (same norm), the 4 patches of a unit side by
 *     side (4 dim), mm.2 (GELU (mm.0 (x))).
 *
 * The image is any grid of ph x pw patches, both even (Qwen's native
 * resolution: npu_vit_set_patch_grid (), the size from
 * npu_vit_smart_resize ()); the file's square clip.vision.image_size is
 * the grid at load time.  No device program yet: npu_vit_program_new()
 * refuses these.
 */
#include "npuvit-private.h"
#include "core/cpu/npuattention.h"

#include <math.h>
#include <string.h>

/* As npuencoder.c's: queries per work item, and per pass over the keys */
#define ATTN_QUERY_BLOCK 16
#define ATTN_NQ 4

/* ------------------------------------------------------------------------
 * Loading
 */
static gboolean
get_norm (NpuEncLoader * ld, const gchar * prefix, gboolean rms, guint dim,
    float **w, float **b, GError ** error)
{
  gchar *wn = g_strconcat (prefix, ".weight", NULL);
  gchar *bn = g_strconcat (prefix, ".bias", NULL);
  gboolean ok;

  ok = (*w = npu_enc_get_vector (ld, wn, TRUE, dim, error)) != NULL
      && (rms || (*b = npu_enc_get_vector (ld, bn, TRUE, dim, error)));
  g_free (wn);
  g_free (bn);
  return ok;
}

static gboolean
load_layer (NpuVit * vit, NpuEncLoader * ld, guint il, NpuVitQwenLayer * l,
    GError ** error)
{
  gboolean rms = vit->qwen.rms;
  guint dim = vit->dim, ff = vit->ff;
  gchar *n[16];
  gboolean ok;
  guint i;

  n[0] = g_strdup_printf ("v.blk.%u.ln1", il);
  n[1] = g_strdup_printf ("v.blk.%u.ln2", il);
  n[2] = g_strdup_printf ("v.blk.%u.attn_q.weight", il);
  n[3] = g_strdup_printf ("v.blk.%u.attn_q.bias", il);
  n[4] = g_strdup_printf ("v.blk.%u.attn_k.weight", il);
  n[5] = g_strdup_printf ("v.blk.%u.attn_k.bias", il);
  n[6] = g_strdup_printf ("v.blk.%u.attn_v.weight", il);
  n[7] = g_strdup_printf ("v.blk.%u.attn_v.bias", il);
  n[8] = g_strdup_printf ("v.blk.%u.attn_out.weight", il);
  n[9] = g_strdup_printf ("v.blk.%u.attn_out.bias", il);
  n[10] = g_strdup_printf ("v.blk.%u.ffn_up.weight", il);
  n[11] = g_strdup_printf ("v.blk.%u.ffn_up.bias", il);
  n[12] = g_strdup_printf ("v.blk.%u.ffn_gate.weight", il);
  n[13] = g_strdup_printf ("v.blk.%u.ffn_gate.bias", il);
  n[14] = g_strdup_printf ("v.blk.%u.ffn_down.weight", il);
  n[15] = g_strdup_printf ("v.blk.%u.ffn_down.bias", il);

  /* the gate is what makes a SwiGLU block: qwen2.5vl has one, qwen2vl
   * none; the other kind's file is refused rather than misread */
  {
    NpuTensorView view;

    l->has_gate = ld->lookup (n[12], &view, ld->user_data);
  }
  if (l->has_gate != rms) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: tensor %s is %s, but a %s block %s one", ld->name, n[12],
        l->has_gate ? "present" : "missing",
        rms ? "qwen2.5vl_merger" : "qwen2vl_merger", rms ? "needs" : "has no");
    ok = FALSE;
    goto done;
  }
  ok = get_norm (ld, n[0], rms, dim, &l->ln1_w, &l->ln1_b, error)
      && get_norm (ld, n[1], rms, dim, &l->ln2_w, &l->ln2_b, error)
      && npu_enc_get_matrix (ld, n[2], dim, dim, &l->q, error)
      && (l->q_b = npu_enc_get_vector (ld, n[3], TRUE, dim, error))
      && npu_enc_get_matrix (ld, n[4], dim, dim, &l->k, error)
      && (l->k_b = npu_enc_get_vector (ld, n[5], TRUE, dim, error))
      && npu_enc_get_matrix (ld, n[6], dim, dim, &l->v, error)
      && (l->v_b = npu_enc_get_vector (ld, n[7], TRUE, dim, error))
      && npu_enc_get_matrix (ld, n[8], dim, dim, &l->o, error)
      && (l->o_b = npu_enc_get_vector (ld, n[9], TRUE, dim, error))
      && npu_enc_get_matrix (ld, n[10], dim, ff, &l->up, error)
      && (l->up_b = npu_enc_get_vector (ld, n[11], TRUE, ff, error))
      && (!l->has_gate || (npu_enc_get_matrix (ld, n[12], dim, ff, &l->gate,
              error)
          && (l->gate_b = npu_enc_get_vector (ld, n[13], TRUE, ff, error))))
      && npu_enc_get_matrix (ld, n[14], ff, dim, &l->down, error)
      && (l->down_b = npu_enc_get_vector (ld, n[15], TRUE, dim, error));
  l->full = vit->qwen.n_wa_pattern == 0
      || (il + 1) % vit->qwen.n_wa_pattern == 0;
done:
  for (i = 0; i < G_N_ELEMENTS (n); i++)
    g_free (n[i]);
  return ok;
}

static void
layer_clear (NpuVitQwenLayer * l)
{
  g_free (l->ln1_w);
  g_free (l->ln1_b);
  g_free (l->ln2_w);
  g_free (l->ln2_b);
  npu_weight_matrix_clear (&l->q);
  npu_weight_matrix_clear (&l->k);
  npu_weight_matrix_clear (&l->v);
  npu_weight_matrix_clear (&l->o);
  npu_weight_matrix_clear (&l->up);
  npu_weight_matrix_clear (&l->gate);
  npu_weight_matrix_clear (&l->down);
  g_free (l->q_b);
  g_free (l->k_b);
  g_free (l->v_b);
  g_free (l->o_b);
  g_free (l->up_b);
  g_free (l->gate_b);
  g_free (l->down_b);
}

/* The two temporal kernels, summed: the still image is both frames */
static gboolean
load_patch_embedding (NpuVit * vit, NpuEncLoader * ld, GError ** error)
{
  static const gchar *const names[2] = {
    "v.patch_embd.weight", "v.patch_embd.weight.1"
  };
  gsize n = (gsize) vit->patch_dim * vit->dim, i;
  float *half[2] = { NULL, NULL };
  NpuTensorView view;
  gboolean ok = TRUE;
  guint t;

  for (t = 0; ok && t < 2; t++) {
    ok = npu_enc_get_tensor (ld, names[t], TRUE, vit->patch, vit->patch, 3,
        vit->dim, &view, error)
        && (half[t] = npu_enc_to_f32 (ld, names[t], &view, n, error));
  }
  if (ok) {
    for (i = 0; i < n; i++)
      half[0][i] += half[1][i];
    vit->patch_w32 = half[0];
    half[0] = NULL;
    /* one copy is kept, not two */
    ld->owned_bytes -= n * sizeof (float);
  }
  g_free (half[0]);
  g_free (half[1]);
  return ok;
}

/* The sequence order, the windows and the output order for a grid of
 * ph x pw patches: clip.cpp's window_idx / inv_window_idx, HF's
 * get_window_index ().  HF pads the merged grid to whole windows and drops
 * the padding (and so the empty windows of a grid that divides evenly);
 * walking the windows clipped at the last row and column gives the same
 * order. */
static void
build_order (NpuVit * vit)
{
  NpuVitQwen *q = &vit->qwen;
  guint gh = q->ph / 2, gw = q->pw / 2;
  /* without windows one window covers the whole grid */
  guint w = q->window ? q->window : MAX (gh, gw);
  guint wy, wx, dy, dx, j, dst = 0, nw = 0;

  q->order = g_new (guint, vit->n_patches);
  q->win_of = g_new (guint, vit->n_patches);
  q->unit_of = g_new (guint, vit->n_tokens);
  q->win_start = g_new (guint, ((gh + w - 1) / w) * ((gw + w - 1) / w) + 1);
  for (wy = 0; wy < gh; wy += w) {
    for (wx = 0; wx < gw; wx += w) {
      q->win_start[nw] = dst * 4;
      for (dy = 0; dy < MIN (w, gh - wy); dy++) {
        for (dx = 0; dx < MIN (w, gw - wx); dx++) {
          guint uy = wy + dy, ux = wx + dx;

          q->unit_of[uy * gw + ux] = dst;
          /* the unit's patches in row-major (y, x) order */
          for (j = 0; j < 4; j++) {
            q->order[dst * 4 + j] = (2 * uy + j / 2) * q->pw + 2 * ux + j % 2;
            q->win_of[dst * 4 + j] = nw;
          }
          dst++;
        }
      }
      nw++;
    }
  }
  q->win_start[nw] = vit->n_patches;
  q->n_windows = nw;
}

/* The rotary tables of each sequence position: HF's rot_pos_emb (), the
 * patch's row and column in the grid, whatever its shape */
static void
build_rope (NpuVit * vit)
{
  NpuVitQwen *q = &vit->qwen;
  guint hd = vit->blocks.head_dim, j, k;

  q->cos = g_new (float, (gsize) vit->n_patches * hd / 2);
  q->sin = g_new (float, (gsize) vit->n_patches * hd / 2);
  for (j = 0; j < vit->n_patches; j++) {
    guint py = q->order[j] / q->pw, px = q->order[j] % q->pw;

    for (k = 0; k < hd / 2; k++) {
      guint kk = k < hd / 4 ? k : k - hd / 4;
      double a = (k < hd / 4 ? py : px) * pow (10000.0, -4.0 * kk / hd);

      q->cos[(gsize) j * hd / 2 + k] = (float) cos (a);
      q->sin[(gsize) j * hd / 2 + k] = (float) sin (a);
    }
  }
}

static void
tables_clear (NpuVitQwen * q)
{
  g_clear_pointer (&q->order, g_free);
  g_clear_pointer (&q->unit_of, g_free);
  g_clear_pointer (&q->win_of, g_free);
  g_clear_pointer (&q->win_start, g_free);
  g_clear_pointer (&q->cos, g_free);
  g_clear_pointer (&q->sin, g_free);
}

/* n_wa_pattern and the window size (qwen2.5vl), the window in merged
 * tokens; without windows one window is the whole image */
static gboolean
load_windows (NpuVit * vit, NpuEncLoader * ld, GError ** error)
{
  NpuVitQwen *q = &vit->qwen;
  guint32 window_px = 112;

  /* qwen2.5vl: windows, and a full-attention block every n_wa_pattern
   * (the converter's fullatt_block_indexes, which are evenly spaced) */
  if (q->rms) {
    if (!npu_enc_get_u32_key (ld, "clip.vision.n_wa_pattern",
            &q->n_wa_pattern, error))
      return FALSE;
    if (q->n_wa_pattern > vit->n_layers) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: clip.vision.n_wa_pattern %u is more than the %u blocks: no "
          "block would attend to the whole image", ld->name, q->n_wa_pattern,
          vit->n_layers);
      return FALSE;
    }
    /* clip.cpp's default when the key is absent */
    if (npu_gguf_find (ld->gguf, "clip.vision.window_size")
        && !npu_enc_get_u32_key (ld, "clip.vision.window_size", &window_px,
            error))
      return FALSE;
    if (!window_px || window_px % (2 * vit->patch)) {
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: clip.vision.window_size %u is not a positive multiple of 2 "
          "patches of %u pixels", ld->name, window_px, vit->patch);
      return FALSE;
    }
  }
  /* the converter writes clip.use_silu for Qwen2.5-VL's SwiGLU; the gate
   * is SiLU only */
  if (q->rms && vit->blocks.act != NPU_ENC_ACT_SILU) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: qwen2.5vl_merger blocks are SwiGLU: clip.use_silu must be true",
        ld->name);
    return FALSE;
  }
  q->window = q->n_wa_pattern ? window_px / vit->patch / 2 : 0;

  return TRUE;
}

/* The merger: mm.0 [4 dim, 4 dim], GELU, mm.2 [4 dim, out] */
static gboolean
load_merger (NpuVit * vit, NpuEncLoader * ld, GError ** error)
{
  NpuTensorView view;
  gsize d = vit->dim;

  memset (&view, 0, sizeof (view));
  if (!ld->lookup ("mm.2.weight", &view, ld->user_data)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_MISSING,
        "%s: tensor mm.2.weight is missing", ld->name);
    return FALSE;
  }
  vit->out_dim = view.n_dims >= 2 ? view.ne[1] : 0;
  if (!vit->out_dim || vit->out_dim > (1u << 20)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: mm.2.weight has an output size of %u", ld->name, vit->out_dim);
    return FALSE;
  }
  /* the grid, tokens and positions: npu_vit_qwen_set_grid () */
  vit->first = 0;
  if (!npu_enc_get_matrix (ld, "mm.0.weight", 4 * d, 4 * d, &vit->mm0, error)
      || !(vit->mm0_b = npu_enc_get_vector (ld, "mm.0.bias", TRUE, 4 * d,
              error))
      || !npu_enc_get_matrix (ld, "mm.2.weight", 4 * d, vit->out_dim,
          &vit->mm2, error)
      || !(vit->mm2_b = npu_enc_get_vector (ld, "mm.2.bias", TRUE,
              vit->out_dim, error)))
    return FALSE;

  return TRUE;
}

gboolean
npu_vit_qwen_load (NpuVit * vit, NpuEncLoader * ld, GError ** error)
{
  NpuVitQwen *q = &vit->qwen;
  NpuTensorView view;
  guint hd = vit->blocks.head_dim, il;

  q->rms = vit->projector == NPU_VIT_PROJECTOR_QWEN25VL;
  if (vit->image_size % (2 * vit->patch)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: image size %u is not a multiple of 2 patches of %u (the "
        "merger's 2 x 2 units)", ld->name, vit->image_size, vit->patch);
    return FALSE;
  }
  if (hd % 4) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "%s: head size %u is not a multiple of 4 (2-D rotary embeddings)",
        ld->name, hd);
    return FALSE;
  }
  if (!load_windows (vit, ld, error))
    return FALSE;

  if (!load_patch_embedding (vit, ld, error))
    return FALSE;
  memset (&view, 0, sizeof (view));
  if (ld->lookup ("v.patch_embd.bias", &view, ld->user_data)
      || ld->lookup ("v.class_embd", &view, ld->user_data)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED,
        "%s: a Qwen vision encoder has no patch bias nor class token",
        ld->name);
    return FALSE;
  }
  q->layers = g_new0 (NpuVitQwenLayer, vit->n_layers);
  for (il = 0; il < vit->n_layers; il++)
    if (!load_layer (vit, ld, il, &q->layers[il], error))
      return FALSE;
  {
    gchar *extra = g_strdup_printf ("v.blk.%u.attn_q.weight", vit->n_layers);
    gboolean found = ld->lookup (extra, &view, ld->user_data);

    if (found)
      g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
          "%s: tensor %s exists but clip.vision.block_count is %u", ld->name,
          extra, vit->n_layers);
    g_free (extra);
    if (found)
      return FALSE;
  }
  if (!get_norm (ld, "v.post_ln", q->rms, vit->dim, &vit->post_ln_w,
          &vit->post_ln_b, error))
    return FALSE;

  if (!load_merger (vit, ld, error))
    return FALSE;
  /* the file's square image until npu_vit_set_patch_grid () */
  if (!npu_vit_qwen_set_grid (vit, vit->side, vit->side, error)) {
    g_prefix_error (error, "%s: ", ld->name);
    return FALSE;
  }
  return TRUE;
}

/* The buffers that hold @n patches, all or none: on failure the old ones
 * stay, so a refused grid leaves the encoder as it was */
static gboolean
alloc_scratch (NpuVit * vit, gsize n, GError ** error)
{
  NpuVitQwen *q = &vit->qwen;
  NpuEncBlocks nb = vit->blocks;
  gsize d = vit->dim;
  float *x = g_try_new (float, n * d);
  float *proj = g_try_new (float, n * d);
  float *pin = g_try_new (float, n * vit->patch_dim);
  float *gate = q->rms ? g_try_new (float, n * vit->ff) : NULL;
  gboolean ok = x && proj && pin && (gate || !q->rms);

  if (ok && !(ok = npu_enc_blocks_alloc (&nb, n)))
    npu_enc_blocks_clear (&nb);
  if (!ok) {
    g_free (x);
    g_free (proj);
    g_free (pin);
    g_free (gate);
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "out of memory for the scratch buffers of %" G_GSIZE_FORMAT
        " patches", n);
    return FALSE;
  }
  npu_enc_blocks_clear (&vit->blocks);
  vit->blocks = nb;
  g_free (vit->x);
  g_free (vit->proj);
  g_free (q->pin);
  g_free (q->gate);
  vit->x = x;
  vit->proj = proj;
  q->pin = pin;
  q->gate = gate;
  q->cap = n;
  return TRUE;
}

/* A grid the buffers' sizes fit, as npuvit.c checks the file's image */
static gboolean
check_grid (const NpuVit * vit, guint height, guint width, GError ** error)
{
  guint64 n = (guint64) height * width;

  if (!height || !width || height % 2 || width % 2) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "a patch grid of %u x %u is not a positive even number of patches "
        "each way (the merger's 2 x 2 units)", height, width);
    return FALSE;
  }
  if (height > 4096 || width > 4096
      || n * (vit->patch_dim + 1) > ((guint64) 1 << 31)
      || (n + 1) * MAX (vit->dim, vit->ff) > ((guint64) 1 << 31)) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "a patch grid of %u x %u is too large for this encoder", height, width);
    return FALSE;
  }
  return TRUE;
}

gboolean
npu_vit_qwen_set_grid (NpuVit * vit, guint height, guint width, GError ** error)
{
  NpuVitQwen *q = &vit->qwen;
  gsize n = (gsize) height * width, hd = vit->blocks.head_dim;

  if (!check_grid (vit, height, width, error))
    return FALSE;
  /* the scratch only grows: a smaller grid after a larger one keeps it */
  if (n > q->cap && !alloc_scratch (vit, n, error))
    return FALSE;
  q->ph = height;
  q->pw = width;
  vit->n_patches = vit->n_pos = n;
  vit->grid = width / 2;
  vit->n_tokens = (height / 2) * (width / 2);
  tables_clear (q);
  build_order (vit);
  build_rope (vit);
  vit->scratch_bytes = sizeof (float) * (q->cap * (2 * vit->dim +
          vit->patch_dim + (q->rms ? vit->ff : 0)) + n * hd) +
      sizeof (guint) * (2 * n + vit->n_tokens + q->n_windows + 1);
  return TRUE;
}

void
npu_vit_qwen_clear (NpuVit * vit)
{
  NpuVitQwen *q = &vit->qwen;
  guint il;

  for (il = 0; q->layers && il < vit->n_layers; il++)
    layer_clear (&q->layers[il]);
  g_free (q->layers);
  tables_clear (q);
  g_free (q->pin);
  g_free (q->gate);
  memset (q, 0, sizeof (*q));
}

/* ------------------------------------------------------------------------
 * Row kernels
 */
typedef struct
{
  NpuVit *vit;
  const NpuVitQwenLayer *l;
  float *dst;
  const float *src, *w, *b;
  gsize cols;
  gfloat eps;
} Job;

static gsize
row_grain (gsize cols)
{
  return MAX (1, 16384 / MAX (cols, 1));
}

/* ggml_rms_norm then * w: x / sqrt (mean (x^2) + eps) w, the sum in
 * double as ggml does; dst may be src */
static void
rmsnorm_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c, n = job->cols;

  for (r = start; r < end; r++) {
    const float *x = job->src + r * n;
    float *y = job->dst + r * n;
    double sum = 0.0;
    float scale;

    for (c = 0; c < n; c++)
      sum += (double) x[c] * x[c];
    scale = 1.0f / sqrtf ((float) (sum / n) + job->eps);
    for (c = 0; c < n; c++)
      y[c] = x[c] * scale * job->w[c];
  }
}

static void
norm (NpuTask * task, float *dst, const float *src, gsize rows, gsize cols,
    gfloat eps, const float *w, const float *b, NpuBytes * bytes)
{
  Job job = { 0, };

  if (b) {
    npu_enc_layernorm (task, dst, src, rows, cols, eps, w, b, bytes);
    return;
  }
  npu_bytes_read (bytes, NPU_BYTES_WEIGHTS, (guint64) cols * 4);
  npu_bytes_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 4);
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 4);
  job.dst = dst;
  job.src = src;
  job.w = w;
  job.cols = cols;
  job.eps = eps;
  npu_enc_run_parallel (task, rows, row_grain (cols), rmsnorm_slice, &job);
}

/* dst[r] += src[r] + b */
static void
residual_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c;

  for (r = start; r < end; r++)
    for (c = 0; c < job->cols; c++)
      job->dst[r * job->cols + c] += job->src[r * job->cols + c] + job->b[c];
}

static void
residual (NpuTask * task, float *x, const float *y, const float *b,
    gsize rows, gsize cols, NpuBytes * bytes)
{
  Job job = { 0, };

  npu_bytes_read (bytes, NPU_BYTES_WEIGHTS, (guint64) cols * 4);
  npu_bytes_read (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 8);
  npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS, (guint64) rows * cols * 4);

  job.dst = x;
  job.src = y;
  job.b = b;
  job.cols = cols;
  npu_enc_run_parallel (task, rows, row_grain (cols), residual_slice, &job);
}

/* dst (the up product) *= act (src + gate bias): the SwiGLU of
 * ggml_swiglu_split, on biased products */
static void
gated_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  gsize r, c;

  for (r = start; r < end; r++) {
    float *u = job->dst + r * job->cols;
    const float *g = job->src + r * job->cols;

    for (c = 0; c < job->cols; c++) {
      float x = g[c] + job->b[c];

      u[c] *= x / (1.0f + expf (-x));
    }
  }
}

/* The 2-D rotary embedding of q and k (ggml_rope_multi, vision mode) */
static void
rope_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  NpuVit *vit = job->vit;
  gsize hd = vit->blocks.head_dim, dim = vit->dim, half = hd / 2, r, h, k;
  float *bufs[2] = { vit->blocks.q, vit->blocks.k };
  guint t;

  for (r = start; r < end; r++) {
    const float *c = vit->qwen.cos + r * half, *s = vit->qwen.sin + r * half;

    for (t = 0; t < 2; t++) {
      for (h = 0; h < dim; h += hd) {
        float *x = bufs[t] + r * dim + h;

        for (k = 0; k < half; k++) {
          float a = x[k], b = x[k + half];

          x[k] = a * c[k] - b * s[k];
          x[k + half] = a * s[k] + b * c[k];
        }
      }
    }
  }
}

/* Attention of each query over its window (or all positions in a full
 * block): the keys of a window are contiguous in the sequence order.
 * Work items are (head, block of queries) as in npuencoder.c. */
static void
attention_slice (gsize start, gsize end, guint worker, gpointer data)
{
  Job *job = data;
  NpuVit *vit = job->vit;
  NpuEncBlocks *b = &vit->blocks;
  NpuVitQwen *q = &vit->qwen;
  gsize n = vit->n_pos, hd = b->head_dim, dim = b->dim;
  gsize n_qblocks = (n + ATTN_QUERY_BLOCK - 1) / ATTN_QUERY_BLOCK;
  float scale = 1.0f / sqrtf ((float) hd);
  float *s = b->scores + (gsize) worker * ATTN_NQ * b->n_max;
  gsize item, i;

  for (item = start; item < end; item++) {
    gsize head = item / n_qblocks, qb = item % n_qblocks;
    gsize i0 = qb * ATTN_QUERY_BLOCK, i1 = MIN (i0 + ATTN_QUERY_BLOCK, n);
    gsize off = head * hd;

    for (i = i0; i < i1;) {
      gsize lo = 0, hi = n, nq = 1;
      NpuAttnSpan span;

      if (!job->l->full) {
        lo = q->win_start[q->win_of[i]];
        hi = q->win_start[q->win_of[i] + 1];
      }
      /* up to ATTN_NQ queries of the same window share a pass */
      while (nq < ATTN_NQ && i + nq < i1 && (job->l->full
              || q->win_of[i + nq] == q->win_of[i]))
        nq++;
      span.q = b->q + i * dim + off;
      span.k = b->k + lo * dim + off;
      span.v = b->v + lo * dim + off;
      span.stride = dim;
      span.n = (guint) (hi - lo);
      span.type = 0;
      span.k_tiled = FALSE;
      span.k_row = 0;
      npu_attention_rows (&span, 1, hd, nq, dim, scale, s, b->n_max,
          b->att + i * dim + off, dim);
      i += nq;
    }
  }
}

/* The rotary embedding rewrites q and k (its cos / sin tables, made at
 * load time, are counted with them); the attention reads q, k and v once
 * each and writes the heads' outputs */
static void
count_rope_attention (NpuEncBlocks * b, gsize n)
{
  guint64 rows = (guint64) n * b->dim * 4;

  npu_bytes_read (&b->bytes, NPU_BYTES_ACTIVATIONS, 2 * rows +
      (guint64) n * b->head_dim * 4);
  npu_bytes_write (&b->bytes, NPU_BYTES_ACTIVATIONS, 2 * rows);
  npu_bytes_read (&b->bytes, NPU_BYTES_ACTIVATIONS, 3 * rows);
  npu_bytes_write (&b->bytes, NPU_BYTES_ACTIVATIONS, rows);
}

static void
block_forward (NpuVit * vit, const NpuVitQwenLayer * l, NpuTask * task)
{
  NpuEncBlocks *b = &vit->blocks;
  gsize n = vit->n_pos, dim = vit->dim, ff = vit->ff;
  gsize n_qblocks = (n + ATTN_QUERY_BLOCK - 1) / ATTN_QUERY_BLOCK;
  float *x = vit->x;
  Job job = { 0, };

  job.vit = vit;
  job.l = l;

  /* x += attn_out (MHA (rope (q), rope (k), v of norm1 (x))) */
  norm (task, b->h, x, n, dim, b->eps, l->ln1_w, l->ln1_b, &b->bytes);
  npu_enc_matmul (task, &l->q, b->h, n, b->q, b->precision, &vit->blocks.bytes);
  npu_enc_matmul (task, &l->k, b->h, n, b->k, b->precision, &vit->blocks.bytes);
  npu_enc_matmul (task, &l->v, b->h, n, b->v, b->precision, &vit->blocks.bytes);
  npu_enc_bias_act (task, b->q, n, dim, l->q_b, NPU_ENC_ACT_NONE,
      &vit->blocks.bytes);
  npu_enc_bias_act (task, b->k, n, dim, l->k_b, NPU_ENC_ACT_NONE,
      &vit->blocks.bytes);
  npu_enc_bias_act (task, b->v, n, dim, l->v_b, NPU_ENC_ACT_NONE,
      &vit->blocks.bytes);
  npu_enc_run_parallel (task, n, row_grain (2 * dim), rope_slice, &job);
  npu_enc_run_parallel (task, b->n_heads * n_qblocks, 1, attention_slice, &job);
  count_rope_attention (b, n);
  npu_enc_matmul (task, &l->o, b->att, n, b->h, b->precision,
      &vit->blocks.bytes);
  residual (task, x, b->h, l->o_b, n, dim, &b->bytes);

  /* x += ffn_down (act (ffn_up (norm2 (x)))), or with the gate
   * ffn_down (act (ffn_gate) * ffn_up) */
  norm (task, b->h, x, n, dim, b->eps, l->ln2_w, l->ln2_b, &b->bytes);
  npu_enc_matmul (task, &l->up, b->h, n, b->ffb, b->precision,
      &vit->blocks.bytes);
  if (l->has_gate) {
    npu_enc_bias_act (task, b->ffb, n, ff, l->up_b, NPU_ENC_ACT_NONE,
        &vit->blocks.bytes);
    npu_enc_matmul (task, &l->gate, b->h, n, vit->qwen.gate, b->precision,
        &vit->blocks.bytes);
    job.dst = b->ffb;
    job.src = vit->qwen.gate;
    job.b = l->gate_b;
    job.cols = ff;
    npu_enc_run_parallel (task, n, row_grain (ff), gated_slice, &job);
    npu_bytes_read (&b->bytes, NPU_BYTES_WEIGHTS, (guint64) ff * 4);
    npu_bytes_read (&b->bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * ff * 8);
    npu_bytes_write (&b->bytes, NPU_BYTES_ACTIVATIONS, (guint64) n * ff * 4);
  } else {
    npu_enc_bias_act (task, b->ffb, n, ff, l->up_b, b->act, &vit->blocks.bytes);
  }
  npu_enc_matmul (task, &l->down, b->ffb, n, b->h, b->precision,
      &vit->blocks.bytes);
  residual (task, x, b->h, l->down_b, n, dim, &b->bytes);
}

gboolean
npu_vit_qwen_encode (NpuVit * vit, NpuTask * task, const float *patches,
    float *out, GError ** error)
{
  NpuVitQwen *q = &vit->qwen;
  gsize n = vit->n_pos, dim = vit->dim, pd = vit->patch_dim, t;
  guint il;

  /* the patches in sequence order, embedded */
  for (t = 0; t < n; t++)
    memcpy (q->pin + t * pd, patches + (gsize) q->order[t] * pd,
        pd * sizeof (float));
  npu_enc_gemm_f32 (task, vit->patch_w32, dim, pd, q->pin, n, vit->x,
      &vit->blocks.bytes);

  for (il = 0; il < vit->n_layers; il++) {
    if (task && npu_task_is_cancelled (task)) {
      g_set_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED,
          "vision encoder cancelled at block %u", il);
      return FALSE;
    }
    block_forward (vit, &q->layers[il], task);
  }
  norm (task, vit->x, vit->x, n, dim, vit->blocks.eps, vit->post_ln_w,
      vit->post_ln_b, &vit->blocks.bytes);

  /* units back in raster order (4 rows of dim are one unit of 4 dim),
   * then mm.2 (GELU (mm.0)) */
  for (t = 0; t < vit->n_tokens; t++)
    memcpy (vit->blocks.h + t * 4 * dim, vit->x + (gsize) q->unit_of[t] * 4 *
        dim, 4 * dim * sizeof (float));
  npu_enc_matmul (task, &vit->mm0, vit->blocks.h, vit->n_tokens, vit->proj,
      vit->blocks.precision, &vit->blocks.bytes);
  npu_enc_bias_act (task, vit->proj, vit->n_tokens, 4 * dim, vit->mm0_b,
      NPU_ENC_ACT_GELU, &vit->blocks.bytes);
  npu_enc_matmul (task, &vit->mm2, vit->proj, vit->n_tokens, out,
      vit->blocks.precision, &vit->blocks.bytes);
  npu_enc_bias_act (task, out, vit->n_tokens, vit->out_dim, vit->mm2_b,
      NPU_ENC_ACT_NONE, &vit->blocks.bytes);
  npu_enc_count_as_tokens (&vit->blocks.bytes,
      (guint64) vit->n_tokens * vit->out_dim * 4);
  return TRUE;
}

/* ------------------------------------------------------------------------
 * Native resolution
 */
/* Python's round (): halves to the even neighbour */
static double
round_half_even (double x)
{
  double r = floor (x), d = x - r;

  if (d > 0.5 || (d == 0.5 && fmod (r, 2.0) != 0.0))
    r += 1.0;
  return r;
}

/* Qwen2VLImageProcessor's smart_resize (), the same operations in the
 * same order on doubles, so that its rounding is ours */
gboolean
npu_vit_smart_resize (guint height, guint width, guint factor,
    guint64 min_pixels, guint64 max_pixels, guint * out_height,
    guint * out_width, GError ** error)
{
  double f = factor, h_bar, w_bar, beta;

  g_return_val_if_fail (out_height != NULL && out_width != NULL, FALSE);

  if (!height || !width || !factor) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "cannot resize a %u x %u image to multiples of %u", width, height,
        factor);
    return FALSE;
  }
  if (min_pixels > max_pixels) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "min-pixels %" G_GUINT64_FORMAT " is more than max-pixels %"
        G_GUINT64_FORMAT, min_pixels, max_pixels);
    return FALSE;
  }
  if ((double) MAX (height, width) / MIN (height, width) > 200.0) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "a %u x %u image: the aspect ratio must be at most 200", width, height);
    return FALSE;
  }
  h_bar = round_half_even (height / f) * f;
  w_bar = round_half_even (width / f) * f;
  if (h_bar * w_bar > (double) max_pixels) {
    beta = sqrt ((double) ((guint64) height * width) / (double) max_pixels);
    h_bar = MAX (f, floor (height / beta / f) * f);
    w_bar = MAX (f, floor (width / beta / f) * f);
  } else if (h_bar * w_bar < (double) min_pixels) {
    beta = sqrt ((double) min_pixels / (double) ((guint64) height * width));
    h_bar = ceil (height * beta / f) * f;
    w_bar = ceil (width * beta / f) * f;
  }
  /* HF gives 0 for a side under factor / 2 when min_pixels is 0; no
   * encoder takes that: one row (column) of units */
  *out_height = (guint) MAX (f, h_bar);
  *out_width = (guint) MAX (f, w_bar);
  return TRUE;
}
