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
 * are whole windows only.  Tolerance as test-vit's for the accurate
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

static void
reference (const NpuGguf * g, const float *patches, double *out)
{
  gboolean q25 = g_strcmp0 (npu_gguf_get_string (g, "clip.projector_type",
          NULL, NULL), "qwen2.5vl_merger") == 0;
  guint image = key_u32 (g, "clip.vision.image_size");
  guint p = key_u32 (g, "clip.vision.patch_size");
  guint dim = key_u32 (g, "clip.vision.embedding_length");
  guint ff = key_u32 (g, "clip.vision.feed_forward_length");
  guint layers = key_u32 (g, "clip.vision.block_count");
  guint heads = key_u32 (g, "clip.vision.attention.head_count");
  guint wa = q25 ? key_u32 (g, "clip.vision.n_wa_pattern") : 0;
  guint ws = q25 ? key_u32 (g, "clip.vision.window_size") / p / 2 : 1;
  guint side = image / p, gr = side / 2, n = side * side, nt = gr * gr;
  guint pd = 3 * p * p, hd = dim / heads, out_dim, pad, nw, wy, wx, iy, ix;
  gsize i, j, c, il, h;
  guint *widx = g_new (guint, nt), *wid = g_new (guint, nt), cnt = 0;
  gint *unit_win = g_new (gint, n);
  double *k0, *k1, *x, *hb, *qb, *kb, *vb, *att, *u, *gt, *m0, *mm;
  double *w, *b;
  gfloat eps = 0.0f;

  npu_gguf_get_f32 (g, "clip.vision.attention.layer_norm_epsilon", &eps, NULL);
  /* get_window_index (): the merged grid padded to whole windows, windows
   * in raster order, each window's tokens in raster order, padding
   * dropped; without windows one window of everything */
  if (!wa)
    ws = gr;
  pad = ws - gr % ws;
  nw = (gr + pad) / ws;
  for (wy = 0; wy < nw; wy++)
    for (wx = 0; wx < nw; wx++)
      for (iy = 0; iy < ws; iy++)
        for (ix = 0; ix < ws; ix++) {
          guint y = wy * ws + iy, xx = wx * ws + ix;

          if (y < gr && xx < gr) {
            wid[cnt] = wy * nw + wx;
            widx[cnt++] = y * gr + xx;
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
    guint t = widx[j / 4], py = 2 * (t / gr) + j % 4 / 2;
    guint px = 2 * (t % gr) + j % 2;
    const float *pp = patches + ((gsize) py * side + px) * pd;

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
      double py = 2 * (t / gr) + j % 4 / 2, px = 2 * (t % gr) + j % 2;

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

typedef struct
{
  NpuModelProjector proj;
  guint image;
  guint threads;
  const gchar *tag;
  guint tokens;
} Case;

static const Case cases[] = {
  {NPU_MODEL_PROJECTOR_QWEN25VL, 168, 0, "qwen2.5vl-168", 36},
  {NPU_MODEL_PROJECTOR_QWEN25VL, 224, 2, "qwen2.5vl-224-2threads", 64},
  {NPU_MODEL_PROJECTOR_QWEN2VL, 168, 0, "qwen2vl-168", 36},
  {NPU_MODEL_PROJECTOR_QWEN2VL, 112, 3, "qwen2vl-112-3threads", 16},
};

static void
test_reference (gconstpointer data)
{
  const Case *cs = data;
  gchar *path = write_qwen (cs->proj, cs->image, 2, 112, 2, cs->tag);
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  NpuVit *vit;
  GRand *rand = g_rand_new_with_seed (7);
  guint n_patches, pd, nt, od, gw, gh, i;
  double *ref, err2 = 0.0, ref2 = 0.0, maxe = 0.0, rms;
  float *patches, *out;

  g_assert_no_error (error);
  vit = npu_vit_new (g, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (npu_vit_get_projector (vit), ==,
      cs->proj == NPU_MODEL_PROJECTOR_QWEN25VL ? NPU_VIT_PROJECTOR_QWEN25VL :
      NPU_VIT_PROJECTOR_QWEN2VL);
  n_patches = npu_vit_get_n_patches (vit);
  pd = npu_vit_get_patch_dim (vit);
  nt = npu_vit_get_n_tokens (vit);
  od = npu_vit_get_out_dim (vit);
  npu_vit_get_token_grid (vit, &gw, &gh);
  g_assert_cmpuint (nt, ==, cs->tokens);
  g_assert_cmpuint (gw * gh, ==, nt);
  g_assert_cmpuint (n_patches, ==, 4 * nt);
  g_assert_cmpuint (od, ==, 96);

  patches = g_new (float, (gsize) n_patches * pd);
  for (i = 0; i < n_patches * pd; i++)
    patches[i] = (float) g_rand_double_range (rand, -2.0, 2.0);
  out = g_new (float, (gsize) nt * od);
  ref = g_new (double, (gsize) nt * od);
  encode (vit, cs->threads, patches, out);
  reference (g, patches, ref);
  for (i = 0; i < nt * od; i++) {
    double e = fabs (out[i] - ref[i]);

    err2 += e * e;
    ref2 += ref[i] * ref[i];
    maxe = MAX (maxe, e);
  }
  rms = sqrt (ref2 / (nt * od));
  g_test_message ("%s: |y - ref| / |ref| = %.3g, max / rms = %.3g", cs->tag,
      sqrt (err2 / ref2), maxe / rms);
  g_assert_cmpfloat (rms, >, 1e-3);
  g_assert_cmpfloat (sqrt (err2 / ref2), <=, 1e-3);
  g_assert_cmpfloat (maxe / rms, <=, 2e-3);

  g_free (patches);
  g_free (out);
  g_free (ref);
  g_rand_free (rand);
  npu_vit_free (vit);
  npu_gguf_free (g);
  g_free (path);
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
