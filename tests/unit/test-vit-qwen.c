/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the Qwen2-VL / Qwen2.5-VL vision encoder against a
 * double-precision reference written here
 *
 * Tiny qwen2vl_merger and qwen2.5vl_merger mmproj files are written by the
 * model generator with every matrix on MXFP4's values (stored in F32), so
 * the runtime's MXFP4 copies are exact and the comparison measures the
 * arithmetic and the graph.  The reference follows Hugging Face's
 * Qwen2_5_VisionTransformer, not clip.cpp's index tables: patches in the
 * processor's 2 x 2 order, get_window_index() over a grid padded to whole
 * windows, a full attention matrix with the window mask (-inf outside the
 * query's window) rather than grouped windows, the rotary embedding as
 * rotate_half over cat (freqs, freqs) with freqs = cat (row, column)
 * frequencies, and the merged tokens put back by argsort (window_index).
 *
 * 168-pixel images are 6 x 6 merged tokens: with 112-pixel windows (4 x 4
 * tokens) the windows are 4 x 4, 4 x 2, 2 x 4 and 2 x 2.  224-pixel ones
 * are whole windows only.  Native resolution: grids of h x w patches that
 * are not square (4 x 6 up to 20 x 12, windows clipped or whole), set on
 * a loaded encoder, also one after another on the same encoder; and
 * smart_resize () on worked values of HF's formula.  Tolerance as test-vit's for the accurate
 * products: |y - ref| / |ref| <= 1e-3 and max |y - ref| / rms (ref) <=
 * 2e-3.
 *
 * Also: bad models give their GError by message, and the device program
 * says these run on the CPU only.
 */
#include <core/models/npuvit.h>
#include <core/device/npubackend.h>
#include <core/formats/npugguf.h>
#include "tests/tools/npumodelgen.h"
#include "npuencodertest.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static gchar *tmp_dir;

static gchar *
write_qwen (NpuModelProjector proj, guint image, guint wa, guint window,
    guint layers, const gchar * tag)
{
  NpuMmprojParams mp;
  GError *error = NULL;
  gchar *name = g_strdup_printf ("mmproj-%s.gguf", tag);
  gchar *path = g_build_filename (tmp_dir, name, NULL);

  g_assert_true (npu_model_gen_mmproj_preset (&mp, proj, "tiny", &error));
  mp.image_size = image;
  mp.n_layers = layers;
  mp.n_wa_pattern = wa;
  mp.window_size = window;
  mp.text_dim = 96;
  mp.mxfp4_values = TRUE;
  mp.seed = 5;
  g_assert_true (npu_model_gen_write_mmproj (&mp, NULL, path, NULL, &error));
  g_assert_no_error (error);
  g_free (name);
  return path;
}

/* ------------------------------------------------------------------------
 * Reference
 */
static double *
tensor (const NpuGguf * g, gsize n, const gchar * fmt, ...)
{
  const NpuGgufTensor *t;
  double *d;
  gchar *name;
  va_list ap;
  gsize i;

  va_start (ap, fmt);
  name = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  t = npu_gguf_find_tensor (g, name);
  g_free (name);
  if (!t)
    return NULL;
  g_assert_cmpint (t->type, ==, NPU_GGML_TYPE_F32);
  g_assert_cmpuint (t->n_bytes, ==, n * sizeof (float));
  d = g_new (double, n);
  for (i = 0; i < n; i++)
    d[i] = ((const float *) t->data)[i];
  return d;
}

static guint
key_u32 (const NpuGguf * g, const gchar * key)
{
  guint32 v = 0;

  npu_gguf_get_u32 (g, key, &v, NULL);
  return v;
}

/* y[r] = W x[r] + b, W rows x k (ggml ne [k, rows]) */
static void
linear (const double *x, gsize n, gsize k, const double *w, const double *b,
    gsize rows, double *y)
{
  gsize i, r, j;

  for (i = 0; i < n; i++)
    for (r = 0; r < rows; r++) {
      double s = b ? b[r] : 0.0;

      for (j = 0; j < k; j++)
        s += w[r * k + j] * x[i * k + j];
      y[i * rows + r] = s;
    }
}

/* LayerNorm with @b, RMSNorm without */
static void
norm (double *x, gsize n, gsize dim, const double *w, const double *b,
    double eps)
{
  gsize i, c;

  for (i = 0; i < n; i++) {
    double *r = x + i * dim, mean = 0.0, var = 0.0;

    if (b) {
      for (c = 0; c < dim; c++)
        mean += r[c];
      mean /= dim;
    }
    for (c = 0; c < dim; c++)
      var += (r[c] - mean) * (r[c] - mean);
    var /= dim;
    for (c = 0; c < dim; c++)
      r[c] = (r[c] - mean) / sqrt (var + eps) * w[c] + (b ? b[c] : 0.0);
  }
}

/* HF's rotate_half form: x * cos (emb) + rotate_half (x) * sin (emb),
 * emb = cat (f, f), f = cat (h inv_freq, w inv_freq) */
static void
rope (double *x, guint hd, double h, double w)
{
  guint q = hd / 4, j;
  double *f = g_new (double, hd), *y = g_new (double, hd);

  for (j = 0; j < q; j++) {
    double inv = 1.0 / pow (10000.0, 2.0 * j / (hd / 2.0));

    f[j] = h * inv;
    f[q + j] = w * inv;
  }
  for (j = 0; j < hd / 2; j++)
    f[hd / 2 + j] = f[j];
  for (j = 0; j < hd; j++) {
    double rot = j < hd / 2 ? -x[j + hd / 2] : x[j - hd / 2];

    y[j] = x[j] * cos (f[j]) + rot * sin (f[j]);
  }
  memcpy (x, y, hd * sizeof (double));
  g_free (f);
  g_free (y);
}

/* @ph x @pw patches, both even: HF's grid_thw (1, ph, pw) */
static void
reference (const NpuGguf * g, guint ph, guint pw, const float *patches,
    double *out)
{
  gboolean q25 = g_strcmp0 (npu_gguf_get_string (g, "clip.projector_type",
          NULL, NULL), "qwen2.5vl_merger") == 0;
  guint p = key_u32 (g, "clip.vision.patch_size");
  guint dim = key_u32 (g, "clip.vision.embedding_length");
  guint ff = key_u32 (g, "clip.vision.feed_forward_length");
  guint layers = key_u32 (g, "clip.vision.block_count");
  guint heads = key_u32 (g, "clip.vision.attention.head_count");
  guint wa = q25 ? key_u32 (g, "clip.vision.n_wa_pattern") : 0;
  guint ws = q25 ? key_u32 (g, "clip.vision.window_size") / p / 2 : 1;
  guint gh = ph / 2, gw = pw / 2, n = ph * pw, nt = gh * gw;
  guint pd = 3 * p * p, hd = dim / heads, out_dim, nwh, nww, wy, wx, iy, ix;
  gsize i, j, c, il, h;
  guint *widx = g_new (guint, nt), *wid = g_new (guint, nt), cnt = 0;
  gint *unit_win = g_new (gint, n);
  double *k0, *k1, *x, *hb, *qb, *kb, *vb, *att, *u, *gt, *m0, *mm;
  double *w, *b;
  gfloat eps = 0.0f;

  npu_gguf_get_f32 (g, "clip.vision.attention.layer_norm_epsilon", &eps, NULL);
  /* get_window_index (): the merged grid padded by pad_h = ws - gh % ws
   * rows and pad_w = ws - gw % ws columns (a whole window of padding when
   * it divides), windows in raster order, each window's tokens in raster
   * order, padding dropped; without windows (qwen2vl: cu_seqlens of the
   * whole image) one window of everything */
  if (!wa)
    ws = MAX (gh, gw);
  nwh = (gh + ws - gh % ws) / ws;
  nww = (gw + ws - gw % ws) / ws;
  for (wy = 0; wy < nwh; wy++)
    for (wx = 0; wx < nww; wx++)
      for (iy = 0; iy < ws; iy++)
        for (ix = 0; ix < ws; ix++) {
          guint y = wy * ws + iy, xx = wx * ws + ix;

          if (y < gh && xx < gw) {
            wid[cnt] = wy * nww + wx;
            widx[cnt++] = y * gw + xx;
          }
        }
  g_assert_cmpuint (cnt, ==, nt);
  for (j = 0; j < n; j++)
    unit_win[j] = wid[j / 4];

  /* patch embedding in the window order: sequence position j is patch
   * (dy, dx) = (j % 4 / 2, j % 2) of merged token widx[j / 4] */
  k0 = tensor (g, (gsize) pd * dim, "v.patch_embd.weight");
  k1 = tensor (g, (gsize) pd * dim, "v.patch_embd.weight.1");
  x = g_new0 (double, (gsize) n * dim);
  for (j = 0; j < n; j++) {
    guint t = widx[j / 4], py = 2 * (t / gw) + j % 4 / 2;
    guint px = 2 * (t % gw) + j % 2;
    const float *pp = patches + ((gsize) py * pw + px) * pd;

    for (c = 0; c < dim; c++) {
      double s = 0.0;
      gsize e;

      for (e = 0; e < pd; e++)
        s += (k0[c * pd + e] + k1[c * pd + e]) * pp[e];
      x[j * dim + c] = s;
    }
  }
  g_free (k0);
  g_free (k1);

  hb = g_new (double, (gsize) n * dim);
  qb = g_new (double, (gsize) n * dim);
  kb = g_new (double, (gsize) n * dim);
  vb = g_new (double, (gsize) n * dim);
  att = g_new (double, (gsize) n * dim);
  u = g_new (double, (gsize) n * ff);
  gt = g_new (double, (gsize) n * ff);
  for (il = 0; il < layers; il++) {
    gboolean full = !wa || (il + 1) % wa == 0;
    double *sc = g_new (double, n);

    w = tensor (g, dim, "v.blk.%u.ln1.weight", (guint) il);
    b = tensor (g, dim, "v.blk.%u.ln1.bias", (guint) il);
    memcpy (hb, x, (gsize) n * dim * sizeof (double));
    norm (hb, n, dim, w, b, eps);
    g_free (w);
    g_free (b);
#define LIN(in, k, name, rows, y) do { \
      double *W = tensor (g, (gsize) (k) * (rows), "v.blk.%u." name ".weight", \
          (guint) il); \
      double *B = tensor (g, rows, "v.blk.%u." name ".bias", (guint) il); \
      linear (in, n, k, W, B, rows, y); \
      g_free (W); \
      g_free (B); \
    } while (0)
    LIN (hb, dim, "attn_q", dim, qb);
    LIN (hb, dim, "attn_k", dim, kb);
    LIN (hb, dim, "attn_v", dim, vb);
    for (j = 0; j < n; j++) {
      guint t = widx[j / 4];
      /* rot_pos_emb (): the patch's row and column */
      double py = 2 * (t / gw) + j % 4 / 2, px = 2 * (t % gw) + j % 2;

      for (h = 0; h < heads; h++) {
        rope (qb + j * dim + h * hd, hd, py, px);
        rope (kb + j * dim + h * hd, hd, py, px);
      }
    }
    /* softmax (q k^T / sqrt (hd) + mask) v, mask -inf across windows */
    for (h = 0; h < heads; h++) {
      for (i = 0; i < n; i++) {
        double mx = -INFINITY, sum = 0.0;

        for (j = 0; j < n; j++) {
          double s = 0.0;

          for (c = 0; c < hd; c++)
            s += qb[i * dim + h * hd + c] * kb[j * dim + h * hd + c];
          s /= sqrt ((double) hd);
          if (!full && unit_win[i] != unit_win[j])
            s = -INFINITY;
          sc[j] = s;
          mx = MAX (mx, s);
        }
        for (j = 0; j < n; j++) {
          sc[j] = exp (sc[j] - mx);
          sum += sc[j];
        }
        for (c = 0; c < hd; c++) {
          double s = 0.0;

          for (j = 0; j < n; j++)
            s += sc[j] * vb[j * dim + h * hd + c];
          att[i * dim + h * hd + c] = s / sum;
        }
      }
    }
    g_free (sc);
    LIN (att, dim, "attn_out", dim, hb);
    for (i = 0; i < (gsize) n * dim; i++)
      x[i] += hb[i];

    w = tensor (g, dim, "v.blk.%u.ln2.weight", (guint) il);
    b = tensor (g, dim, "v.blk.%u.ln2.bias", (guint) il);
    memcpy (hb, x, (gsize) n * dim * sizeof (double));
    norm (hb, n, dim, w, b, eps);
    g_free (w);
    g_free (b);
    LIN (hb, dim, "ffn_up", ff, u);
    if (q25) {
      LIN (hb, dim, "ffn_gate", ff, gt);
      for (i = 0; i < (gsize) n * ff; i++)
        u[i] *= gt[i] / (1.0 + exp (-gt[i]));
    } else {
      for (i = 0; i < (gsize) n * ff; i++)
        u[i] = u[i] / (1.0 + exp (-1.702 * u[i]));
    }
    LIN (u, ff, "ffn_down", dim, hb);
#undef LIN
    for (i = 0; i < (gsize) n * dim; i++)
      x[i] += hb[i];
  }

  /* merger on the window order: 4 consecutive rows are one token */
  w = tensor (g, dim, "v.post_ln.weight");
  b = tensor (g, dim, "v.post_ln.bias");
  norm (x, n, dim, w, b, eps);
  g_free (w);
  g_free (b);
  out_dim = npu_gguf_find_tensor (g, "mm.2.weight")->ne[1];
  w = tensor (g, (gsize) 16 * dim * dim, "mm.0.weight");
  b = tensor (g, 4 * dim, "mm.0.bias");
  m0 = g_new (double, (gsize) nt * 4 * dim);
  linear (x, nt, 4 * dim, w, b, 4 * dim, m0);
  g_free (w);
  g_free (b);
  /* llama.cpp's FFN_GELU: the tanh form */
  for (i = 0; i < (gsize) nt * 4 * dim; i++)
    m0[i] = 0.5 * m0[i] * (1.0 + tanh (sqrt (2.0 / G_PI) * (m0[i] +
                0.044715 * m0[i] * m0[i] * m0[i])));
  w = tensor (g, (gsize) 4 * dim * out_dim, "mm.2.weight");
  b = tensor (g, out_dim, "mm.2.bias");
  mm = g_new (double, (gsize) nt * out_dim);
  linear (m0, nt, 4 * dim, w, b, out_dim, mm);
  g_free (w);
  g_free (b);
  /* reverse_indices = argsort (window_index) */
  for (i = 0; i < nt; i++)
    memcpy (out + (gsize) widx[i] * out_dim, mm + i * out_dim,
        out_dim * sizeof (double));

  g_free (mm);
  g_free (m0);
  g_free (x);
  g_free (hb);
  g_free (qb);
  g_free (kb);
  g_free (vb);
  g_free (att);
  g_free (u);
  g_free (gt);
  g_free (widx);
  g_free (wid);
  g_free (unit_win);
}

/* ------------------------------------------------------------------------
 * Against the reference
 */
typedef struct
{
  NpuVit *vit;
  const float *patches;
  float *out;
} EncodeJob;

static gboolean
encode_task (NpuTask * task, gpointer user_data, GError ** error)
{
  EncodeJob *job = user_data;

  return npu_vit_encode (job->vit, task, job->patches, job->out, error);
}

/* @n_threads 0: on the calling thread, no task */
static void
encode (NpuVit * vit, guint n_threads, const float *patches, float *out)
{
  GError *error = NULL;

  if (n_threads == 0) {
    g_assert_true (npu_vit_encode (vit, NULL, patches, out, &error));
  } else {
    NpuDevice *dev = npu_device_new_cpu (n_threads);
    NpuQueue *queue = npu_queue_new (dev, "vit");
    EncodeJob job = { vit, patches, out };
    NpuFence *fence = npu_queue_submit (queue, encode_task, &job, NULL, NULL,
        0);

    g_assert_true (npu_fence_wait (fence, 60 * G_USEC_PER_SEC, &error));
    npu_fence_unref (fence);
    npu_queue_free (queue);
    npu_device_unref (dev);
  }
  g_assert_no_error (error);
}

/* The encoder on its current grid of @ph x @pw patches against the
 * reference */
static void
compare (NpuVit * vit, const NpuGguf * g, guint ph, guint pw, guint threads,
    const gchar * tag)
{
  GRand *rand = g_rand_new_with_seed (7 + ph * 64 + pw);
  guint n_patches, pd, nt, od, gw, gh, i;
  double *ref, err2 = 0.0, ref2 = 0.0, maxe = 0.0, rms;
  float *patches, *out;

  n_patches = npu_vit_get_n_patches (vit);
  pd = npu_vit_get_patch_dim (vit);
  nt = npu_vit_get_n_tokens (vit);
  od = npu_vit_get_out_dim (vit);
  npu_vit_get_token_grid (vit, &gw, &gh);
  g_assert_cmpuint (n_patches, ==, ph * pw);
  g_assert_cmpuint (gw, ==, pw / 2);
  g_assert_cmpuint (gh, ==, ph / 2);
  g_assert_cmpuint (nt, ==, gw * gh);
  g_assert_cmpuint (od, ==, 96);

  patches = g_new (float, (gsize) n_patches * pd);
  for (i = 0; i < n_patches * pd; i++)
    patches[i] = (float) g_rand_double_range (rand, -2.0, 2.0);
  out = g_new (float, (gsize) nt * od);
  ref = g_new (double, (gsize) nt * od);
  encode (vit, threads, patches, out);
  reference (g, ph, pw, patches, ref);
  for (i = 0; i < nt * od; i++) {
    double e = fabs (out[i] - ref[i]);

    err2 += e * e;
    ref2 += ref[i] * ref[i];
    maxe = MAX (maxe, e);
  }
  rms = sqrt (ref2 / (nt * od));
  g_test_message ("%s, %u x %u patches: |y - ref| / |ref| = %.3g, "
      "max / rms = %.3g", tag, ph, pw, sqrt (err2 / ref2), maxe / rms);
  g_assert_cmpfloat (rms, >, 1e-3);
  g_assert_cmpfloat (sqrt (err2 / ref2), <=, 1e-3);
  g_assert_cmpfloat (maxe / rms, <=, 2e-3);

  g_free (patches);
  g_free (out);
  g_free (ref);
  g_rand_free (rand);
}

/* @grid_h, @grid_w: patches, 0 for the file's square image */
typedef struct
{
  NpuModelProjector proj;
  guint image;
  guint grid_h, grid_w;
  guint threads;
  const gchar *tag;
  guint tokens;
} Case;

/* Windows of 112 pixels are 4 x 4 merged tokens.  Native grids: 4 x 6
 * patches (2 x 3 tokens, one clipped window), 6 x 10 (3 x 5: windows of
 * 3 x 4 and 3 x 1), 20 x 12 (10 x 6: rows of 4, 4, 2 by columns of 4, 2),
 * 16 x 8 (8 x 4: whole windows, HF's padding adds an empty row and column
 * of windows), and qwen2vl's one window on 6 x 10 and 10 x 4. */
static const Case cases[] = {
  {NPU_MODEL_PROJECTOR_QWEN25VL, 168, 0, 0, 0, "qwen2.5vl-168", 36},
  {NPU_MODEL_PROJECTOR_QWEN25VL, 224, 0, 0, 2, "qwen2.5vl-224-2threads", 64},
  {NPU_MODEL_PROJECTOR_QWEN2VL, 168, 0, 0, 0, "qwen2vl-168", 36},
  {NPU_MODEL_PROJECTOR_QWEN2VL, 112, 0, 0, 3, "qwen2vl-112-3threads", 16},
  {NPU_MODEL_PROJECTOR_QWEN25VL, 112, 4, 6, 0, "qwen2.5vl-grid-4x6", 6},
  {NPU_MODEL_PROJECTOR_QWEN25VL, 112, 6, 10, 0, "qwen2.5vl-grid-6x10", 15},
  {NPU_MODEL_PROJECTOR_QWEN25VL, 112, 20, 12, 2, "qwen2.5vl-grid-20x12", 60},
  {NPU_MODEL_PROJECTOR_QWEN25VL, 112, 16, 8, 3, "qwen2.5vl-grid-16x8", 32},
  {NPU_MODEL_PROJECTOR_QWEN2VL, 112, 6, 10, 0, "qwen2vl-grid-6x10", 15},
  {NPU_MODEL_PROJECTOR_QWEN2VL, 112, 10, 4, 2, "qwen2vl-grid-10x4", 10},
};

static void
test_reference (gconstpointer data)
{
  const Case *cs = data;
  gchar *path = write_qwen (cs->proj, cs->image, 2, 112, 2, cs->tag);
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  guint side = cs->image / 14, ph = side, pw = side;
  NpuVit *vit;

  g_assert_no_error (error);
  vit = npu_vit_new (g, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (npu_vit_get_projector (vit), ==,
      cs->proj == NPU_MODEL_PROJECTOR_QWEN25VL ? NPU_VIT_PROJECTOR_QWEN25VL :
      NPU_VIT_PROJECTOR_QWEN2VL);
  if (cs->grid_h) {
    ph = cs->grid_h;
    pw = cs->grid_w;
    g_assert_true (npu_vit_set_patch_grid (vit, ph, pw, &error));
    g_assert_no_error (error);
  }
  g_assert_cmpuint (npu_vit_get_n_tokens (vit), ==, cs->tokens);
  compare (vit, g, ph, pw, cs->threads, cs->tag);

  npu_vit_free (vit);
  npu_gguf_free (g);
  g_free (path);
}

/* One encoder through grids that grow its scratch, shrink, and go back
 * to the file's: each frame as the reference on its own grid */
static void
test_regrid (void)
{
  static const guint grids[][2] = { {4, 6}, {20, 12}, {6, 10}, {12, 12} };
  gchar *path = write_qwen (NPU_MODEL_PROJECTOR_QWEN25VL, 168, 2, 112, 2,
      "regrid");
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  NpuVit *vit = npu_vit_new (g, NULL, NULL, &error);
  guint i, w, h;

  g_assert_no_error (error);
  for (i = 0; i < G_N_ELEMENTS (grids); i++) {
    g_assert_true (npu_vit_set_patch_grid (vit, grids[i][0], grids[i][1],
            &error));
    g_assert_no_error (error);
    npu_vit_get_patch_grid (vit, &w, &h);
    g_assert_cmpuint (h, ==, grids[i][0]);
    g_assert_cmpuint (w, ==, grids[i][1]);
    compare (vit, g, grids[i][0], grids[i][1], i % 2 ? 2 : 0, "regrid");
  }
  npu_vit_free (vit);
  npu_gguf_free (g);
  g_unlink (path);
  g_free (path);
}

/* A refused grid says why and leaves the encoder on its grid */
static void
expect_grid_error (NpuVit * vit, guint h, guint w, gint code,
    const gchar * text)
{
  GError *error = NULL;
  guint tokens = npu_vit_get_n_tokens (vit);

  g_assert_false (npu_vit_set_patch_grid (vit, h, w, &error));
  g_assert_error (error, NPU_VIT_ERROR, code);
  if (!strstr (error->message, text))
    g_error ("\"%s\" does not say \"%s\"", error->message, text);
  g_error_free (error);
  g_assert_cmpuint (npu_vit_get_n_tokens (vit), ==, tokens);
}

static void
test_bad_grids (void)
{
  gchar *path = write_qwen (NPU_MODEL_PROJECTOR_QWEN2VL, 112, 2, 112, 1,
      "bad-grid");
  gchar *mlp = g_build_filename (tmp_dir, "mmproj-mlp.gguf", NULL);
  NpuMmprojParams mp;
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error), *gm;
  NpuVit *vit = npu_vit_new (g, NULL, NULL, &error), *vm;

  g_assert_no_error (error);
  expect_grid_error (vit, 5, 6, NPU_VIT_ERROR_SHAPE,
      "a patch grid of 5 x 6 is not a positive even number of patches");
  expect_grid_error (vit, 4, 0, NPU_VIT_ERROR_SHAPE,
      "a patch grid of 4 x 0 is not a positive even number of patches");
  expect_grid_error (vit, 2, 8192, NPU_VIT_ERROR_SHAPE,
      "a patch grid of 2 x 8192 is too large for this encoder");

  g_assert_true (npu_model_gen_mmproj_preset (&mp, NPU_MODEL_PROJECTOR_MLP,
          "tiny", &error));
  mp.text_dim = 96;
  g_assert_true (npu_model_gen_write_mmproj (&mp, NULL, mlp, NULL, &error));
  gm = npu_gguf_open (mlp, &error);
  vm = npu_vit_new (gm, NULL, NULL, &error);
  g_assert_no_error (error);
  expect_grid_error (vm, 4, 4, NPU_VIT_ERROR_UNSUPPORTED,
      "only the Qwen mergers (qwen2vl_merger, qwen2.5vl_merger) take a "
      "patch grid");

  npu_vit_free (vm);
  npu_gguf_free (gm);
  npu_vit_free (vit);
  npu_gguf_free (g);
  g_unlink (mlp);
  g_unlink (path);
  g_free (mlp);
  g_free (path);
}

/* Worked values of Qwen2VLImageProcessor's smart_resize () (factor 28,
 * min 56 * 56, max 28 * 28 * 1280 unless given), each computed by hand
 * from the formula: h' = round (h / 28) 28 (Python's round: halves to
 * even), then if h' w' > max: beta = sqrt (h w / max), h' = max (28,
 * floor (h / beta / 28) 28); if h' w' < min: beta = sqrt (min / (h w)),
 * h' = ceil (h beta / 28) 28 */
typedef struct
{
  guint h, w;
  guint64 min, max;
  guint out_h, out_w;
} Resize;

static const Resize resizes[] = {
  /* 240 / 28 = 8.57 -> 9, 320 / 28 = 11.43 -> 11 */
  {240, 320, 3136, 1003520, 252, 308},
  /* 17.14 -> 17, 22.86 -> 23: 306544 pixels, under max */
  {480, 640, 3136, 1003520, 476, 644},
  /* 1092 x 1932 is over max: beta = sqrt (2073600 / 1003520) = 1.4375,
   * 1080 / beta / 28 = 26.8 -> 26, 1920 / beta / 28 = 47.7 -> 47 */
  {1080, 1920, 3136, 1003520, 728, 1316},
  {2160, 3840, 3136, 1003520, 728, 1316},
  /* 28 x 28 is under min: beta = sqrt (3136 / 600) = 2.286,
   * 20 beta / 28 = 1.63 -> 2, 30 beta / 28 = 2.45 -> 3 */
  {20, 30, 3136, 1003520, 56, 84},
  /* halves to even: 70 / 28 = 2.5 -> 2, 98 / 28 = 3.5 -> 4 */
  {70, 98, 3136, 1003520, 56, 112},
  /* 1.5 -> 2 */
  {42, 42, 3136, 1003520, 56, 56},
  /* 308 x 308 over max 50176: beta = 300 / 224 in exact arithmetic, so
   * 300 / beta / 28 is 8; in doubles it is 7.999..., floored to 7 */
  {300, 300, 3136, 50176, 196, 196},
  /* floor (28 / sqrt (50) / 28) = 0: the side kept at 28 */
  {28, 5600, 3136, 3136, 28, 784},
  /* ratio exactly 200 is allowed: beta = sqrt (3136 / 200) = 3.96,
   * 1 beta / 28 -> 1, 200 beta / 28 = 28.3 -> 29 */
  {1, 200, 3136, 1003520, 28, 812},
  /* under min 200704: beta = 4.48, 100 beta / 28 = 16 */
  {100, 100, 200704, 1003520, 448, 448},
  {224, 224, 3136, 1003520, 224, 224},
};

static void
test_smart_resize (void)
{
  GError *error = NULL;
  guint i, h, w;

  for (i = 0; i < G_N_ELEMENTS (resizes); i++) {
    const Resize *r = &resizes[i];

    g_assert_true (npu_vit_smart_resize (r->h, r->w, 28, r->min, r->max, &h,
            &w, &error));
    g_assert_no_error (error);
    g_test_message ("%u x %u -> %u x %u", r->h, r->w, h, w);
    g_assert_cmpuint (h, ==, r->out_h);
    g_assert_cmpuint (w, ==, r->out_w);
  }
  g_assert_false (npu_vit_smart_resize (10, 2010, 28, 3136, 1003520, &h, &w,
          &error));
  g_assert_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE);
  g_assert_nonnull (strstr (error->message,
          "a 2010 x 10 image: the aspect ratio must be at most 200"));
  g_clear_error (&error);
  g_assert_false (npu_vit_smart_resize (100, 100, 28, 5000, 4000, &h, &w,
          &error));
  g_assert_nonnull (strstr (error->message,
          "min-pixels 5000 is more than max-pixels 4000"));
  g_clear_error (&error);
  g_assert_false (npu_vit_smart_resize (0, 100, 28, 3136, 4000, &h, &w,
          &error));
  g_assert_nonnull (strstr (error->message,
          "cannot resize a 100 x 0 image"));
  g_clear_error (&error);
}

/* ------------------------------------------------------------------------
 * Bad models
 */
static gpointer
new_vit (const NpuGguf * gguf, NpuTensorLookup lookup, gpointer user_data,
    GError ** error)
{
  return npu_vit_new (gguf, lookup, user_data, error);
}

static void
expect_error (const gchar * path, const gchar * hide, gint code,
    const gchar * text)
{
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  NpuTestLookup lk = { g, hide, NULL, NULL };

  g_assert_no_error (error);
  npu_test_expect_encoder_error (new_vit, g, npu_test_lookup, &lk, code, text);
  npu_gguf_free (g);
}

static void
test_bad_models (void)
{
  gchar *q25 = write_qwen (NPU_MODEL_PROJECTOR_QWEN25VL, 168, 2, 112, 2,
      "bad-q25");
  gchar *q2 = write_qwen (NPU_MODEL_PROJECTOR_QWEN2VL, 168, 2, 112, 2,
      "bad-q2");
  gchar *wa = write_qwen (NPU_MODEL_PROJECTOR_QWEN25VL, 168, 3, 112, 2,
      "bad-wa");
  gchar *win = write_qwen (NPU_MODEL_PROJECTOR_QWEN25VL, 168, 2, 100, 2,
      "bad-window");

  expect_error (q25, "v.patch_embd.weight.1", NPU_VIT_ERROR_MISSING,
      "tensor v.patch_embd.weight.1 is missing");
  expect_error (q25, "v.blk.1.ffn_gate.weight", NPU_VIT_ERROR_SHAPE,
      "tensor v.blk.1.ffn_gate.weight is missing, but a qwen2.5vl_merger "
      "block needs one");
  expect_error (q25, "mm.2.bias", NPU_VIT_ERROR_MISSING,
      "tensor mm.2.bias is missing");
  expect_error (q2, "v.post_ln.bias", NPU_VIT_ERROR_MISSING,
      "tensor v.post_ln.bias is missing");
  expect_error (wa, NULL, NPU_VIT_ERROR_SHAPE,
      "clip.vision.n_wa_pattern 3 is more than the 2 blocks");
  expect_error (win, NULL, NPU_VIT_ERROR_SHAPE,
      "clip.vision.window_size 100 is not a positive multiple of 2 patches "
      "of 14 pixels");
  /* without n_wa_pattern a qwen2.5vl file is refused */
  npu_test_expect_patched_error (new_vit, q25, "clip.vision.n_wa_pattern",
      "clip.vision.n_wa_patterX", 0, NPU_VIT_ERROR_MISSING,
      "clip.vision.n_wa_pattern");

  g_unlink (q25);
  g_unlink (q2);
  g_unlink (wa);
  g_unlink (win);
  g_free (q25);
  g_free (q2);
  g_free (wa);
  g_free (win);
}

/* No device program for these yet: a clear error, not a wrong graph */
static void
test_no_program (void)
{
  gchar *path = write_qwen (NPU_MODEL_PROJECTOR_QWEN2VL, 112, 2, 112, 1,
      "program");
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  NpuVit *vit = npu_vit_new (g, NULL, NULL, &error);
  NpuDevice *dev = npu_device_new_cpu (1);

  g_assert_no_error (error);
  g_assert_null (npu_vit_program_new (vit, dev, &error));
  g_assert_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED);
  g_assert_nonnull (strstr (error->message,
          "the Qwen merger has no device program yet"));
  g_error_free (error);
  npu_device_unref (dev);
  npu_vit_free (vit);
  npu_gguf_free (g);
  g_unlink (path);
  g_free (path);
}

int
main (int argc, char **argv)
{
  GError *error = NULL;
  guint i;
  int ret;

  g_test_init (&argc, &argv, NULL);
  tmp_dir = g_dir_make_tmp ("test-vit-qwen-XXXXXX", &error);
  g_assert_no_error (error);

  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    gchar *name = g_strdup_printf ("/vit-qwen/reference/%s", cases[i].tag);

    g_test_add_data_func (name, &cases[i], test_reference);
    g_free (name);
  }
  g_test_add_func ("/vit-qwen/regrid", test_regrid);
  g_test_add_func ("/vit-qwen/bad-grids", test_bad_grids);
  g_test_add_func ("/vit-qwen/smart-resize", test_smart_resize);
  g_test_add_func ("/vit-qwen/bad-models", test_bad_models);
  g_test_add_func ("/vit-qwen/no-program", test_no_program);
  ret = g_test_run ();

  {
    const gchar *f;
    GDir *dir = g_dir_open (tmp_dir, 0, NULL);

    while (dir && (f = g_dir_read_name (dir))) {
      gchar *p = g_build_filename (tmp_dir, f, NULL);

      g_unlink (p);
      g_free (p);
    }
    if (dir)
      g_dir_close (dir);
    g_rmdir (tmp_dir);
  }
  g_free (tmp_dir);
  return ret;
}
