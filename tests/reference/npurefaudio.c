/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: the Whisper-style audio encoder, the naive way, in double
 * precision
 *
 * A transcription of Hugging Face's WhisperEncoder (conv1 and conv2 as
 * their sums, GELU with erf, learned/sinusoidal positions, pre-norm
 * blocks with no key bias, final layer norm) and of the two projectors:
 * Qwen2-Audio's (AvgPool1d (2, 2) before the layer norm, then a linear
 * layer) and Ultravox's (StackAudioFrames with zero padding, RMSNorm,
 * linear, SwiGLU with the gate on the second half, RMSNorm, linear).  It
 * shares no code with the runtime except the weight decoders: tensors are
 * read as the file stores them, each value decoded as ggml decodes its
 * type (npu_quants_dequantize_row(), held to an independent decoder by
 * unit/quants), as the runtime multiplies them, so a comparison measures
 * arithmetic, not the weights.
 */
#include "tests/reference/npurefaudio.h"
#include <core/formats/npumxfp4.h>
#include <core/formats/npuquants.h>

#include <math.h>
#include <string.h>

static gboolean
view (const NpuRefLookup * lk, const gchar * name, NpuTensorView * v)
{
  const NpuGgufTensor *t;
  guint i;

  memset (v, 0, sizeof (*v));
  if (lk->func)
    return lk->func (name, v, lk->user_data);
  t = npu_gguf_find_tensor (lk->gguf, name);
  if (!t)
    return FALSE;
  v->type = t->type;
  v->n_dims = t->n_dims;
  for (i = 0; i < NPU_GGUF_MAX_DIMS; i++)
    v->ne[i] = t->ne[i];
  v->data = t->data;
  return TRUE;
}

/* @n values of a tensor as stored, each decoded as ggml decodes its type.
 * NULL if absent. */
static double *
tensor (const NpuRefLookup * lk, const gchar * name, gsize n)
{
  NpuTensorView v;
  float *f;
  double *d;
  gsize i;

  if (!view (lk, name, &v))
    return NULL;
  g_assert_cmpuint (v.ne[0] * v.ne[1] * v.ne[2] * v.ne[3], ==, n);
  f = g_new (float, n);
  g_assert_true (npu_quants_dequantize_row (v.type, v.data, f, n));
  d = g_new (double, n);
  for (i = 0; i < n; i++)
    d[i] = f[i];
  g_free (f);
  return d;
}

static gboolean
is_mxfp4 (const NpuRefLookup * lk, const gchar * name)
{
  NpuTensorView v;

  return view (lk, name, &v) && v.type == NPU_GGML_TYPE_MXFP4;
}

static void
layer_norm (double *x, gsize n, gsize dim, const double *w, const double *b,
    double eps)
{
  gsize r, c;

  for (r = 0; r < n; r++) {
    double *row = x + r * dim, mean = 0.0, var = 0.0;

    for (c = 0; c < dim; c++)
      mean += row[c];
    mean /= dim;
    for (c = 0; c < dim; c++)
      var += (row[c] - mean) * (row[c] - mean);
    var /= dim;
    for (c = 0; c < dim; c++)
      row[c] = (row[c] - mean) / sqrt (var + eps) * w[c] + b[c];
  }
}

static void
rms_norm (double *x, gsize n, gsize dim, const double *w, double eps)
{
  gsize r, c;

  for (r = 0; r < n; r++) {
    double *row = x + r * dim, ms = 0.0;

    for (c = 0; c < dim; c++)
      ms += row[c] * row[c];
    ms /= dim;
    for (c = 0; c < dim; c++)
      row[c] = row[c] / sqrt (ms + eps) * w[c];
  }
}

static double
gelu (double x)
{
  return 0.5 * x * (1.0 + erf (x / sqrt (2.0)));
}

/* nn.Conv1d (in, out, kernel_size 3, stride, padding 1) + GELU on
 * x [in][n_in] (channel major, as PyTorch has it), weight ggml ne
 * [3, in, out] = PyTorch [out][in][3]; y [out][n_out] */
static void
conv_gelu (const double *x, gsize in, gsize n_in, const double *w,
    const double *b, gsize out, gsize stride, double *y, gsize n_out)
{
  gsize o, t, i, k;

  for (o = 0; o < out; o++) {
    for (t = 0; t < n_out; t++) {
      double s = b[o];

      for (i = 0; i < in; i++) {
        for (k = 0; k < 3; k++) {
          gint64 p = (gint64) (t * stride + k) - 1;

          if (p >= 0 && p < (gint64) n_in)
            s += w[(o * in + i) * 3 + k] * x[i * n_in + p];
        }
      }
      y[o * n_out + t] = gelu (s);
    }
  }
}

/* conv_gelu () as the runtime's MXFP4 product computes it: each im2col
 * row (all taps of all channels of one output frame) rounded to int8
 * blocks, then the product */
static void
conv_gelu_q8 (const double *x, gsize in, gsize n_in, const double *w,
    const double *b, gsize out, gsize stride, double *y, gsize n_out)
{
  double *col = g_new (double, 3 * in), *row = g_new (double, out);
  gsize o, t, i, k;

  for (t = 0; t < n_out; t++) {
    for (i = 0; i < in; i++)
      for (k = 0; k < 3; k++) {
        gint64 p = (gint64) (t * stride + k) - 1;

        col[i * 3 + k] = p >= 0 && p < (gint64) n_in ? x[i * n_in + p] : 0.0;
      }
    npu_ref_linear (col, 1, 3 * in, w, out, b, TRUE, row);
    for (o = 0; o < out; o++)
      y[o * n_out + t] = gelu (row[o]);
  }
  g_free (col);
  g_free (row);
}

/* A conv kernel as the runtime reads it: MXFP4 as stored (then its
 * input rows are rounded with @q8 too), anything else in full */
static double *
conv_kernel (const NpuRefLookup * lk, const gchar * name, gsize n,
    gboolean * mx)
{
  *mx = is_mxfp4 (lk, name);
  return tensor (lk, name, n);
}

guint
npu_ref_audio_encode (const NpuRefLookup * lk, const double *mel,
    guint n_frames, gboolean q8, double *out)
{
  const NpuGguf *g = lk->gguf;
  const gchar *proj = npu_gguf_get_string (g, "clip.projector_type", NULL,
      NULL);
  gboolean ultravox = g_strcmp0 (proj, "ultravox") == 0;
  guint n_mels = npu_gguf_get_u32_default (g, "clip.audio.num_mel_bins", 0);
  gsize dim = npu_gguf_get_u32_default (g, "clip.audio.embedding_length", 0);
  gsize ff = npu_gguf_get_u32_default (g, "clip.audio.feed_forward_length",
      0);
  guint heads = npu_gguf_get_u32_default (g,
      "clip.audio.attention.head_count", 0);
  guint layers = npu_gguf_get_u32_default (g, "clip.audio.block_count", 0);
  gsize n = n_frames / 2, i, c, l, n_tok, out_dim;
  double *c1, *x, *h, *q, *k, *v, *att, *f, *w, *b;
  gfloat eps32;
  double eps;
  gboolean mx;
  NpuTensorView pv;

  g_assert_true (ultravox || g_strcmp0 (proj, "qwen2a") == 0);
  g_assert_true (npu_gguf_get_f32 (g,
          "clip.audio.attention.layer_norm_epsilon", &eps32, NULL));
  eps = eps32;
  g_assert_cmpuint (n_frames % 2, ==, 0);
  /* conv1, conv2 (stride 2), channel major as in PyTorch */
  c1 = g_new (double, dim * n_frames);
  h = g_new (double, dim * n);
  w = conv_kernel (lk, "a.conv1d.1.weight", 3 * n_mels * dim, &mx);
  b = tensor (lk, "a.conv1d.1.bias", dim);
  if (mx && q8)
    conv_gelu_q8 (mel, n_mels, n_frames, w, b, dim, 1, c1, n_frames);
  else
    conv_gelu (mel, n_mels, n_frames, w, b, dim, 1, c1, n_frames);
  g_free (w);
  g_free (b);
  w = conv_kernel (lk, "a.conv1d.2.weight", 3 * dim * dim, &mx);
  b = tensor (lk, "a.conv1d.2.bias", dim);
  if (mx && q8)
    conv_gelu_q8 (c1, dim, n_frames, w, b, dim, 2, h, n);
  else
    conv_gelu (c1, dim, n_frames, w, b, dim, 2, h, n);
  g_free (w);
  g_free (b);
  g_free (c1);

  /* permute to [n][dim] and add the positions */
  g_assert_true (view (lk, "a.position_embd.weight", &pv));
  w = tensor (lk, "a.position_embd.weight", dim * pv.ne[1]);
  x = g_new (double, dim * n);
  for (i = 0; i < n; i++)
    for (c = 0; c < dim; c++)
      x[i * dim + c] = h[c * n + i] + w[i * dim + c];
  g_free (w);
  g_free (h);

  h = g_new (double, n * dim);
  q = g_new (double, n * dim);
  k = g_new (double, n * dim);
  v = g_new (double, n * dim);
  att = g_new (double, n * dim);
  f = g_new (double, n * ff);
  for (l = 0; l < layers; l++) {
    gchar nm[64];
    double *ln_w, *ln_b, *wq, *bq, *wk, *wv, *bv, *wo, *bo;

#define NAME(s) (g_snprintf (nm, sizeof (nm), "a.blk.%u." s, (guint) l), nm)
    ln_w = tensor (lk, NAME ("ln1.weight"), dim);
    ln_b = tensor (lk, NAME ("ln1.bias"), dim);
    wq = tensor (lk, NAME ("attn_q.weight"), dim * dim);
    bq = tensor (lk, NAME ("attn_q.bias"), dim);
    wk = tensor (lk, NAME ("attn_k.weight"), dim * dim);
    wv = tensor (lk, NAME ("attn_v.weight"), dim * dim);
    bv = tensor (lk, NAME ("attn_v.bias"), dim);
    wo = tensor (lk, NAME ("attn_out.weight"), dim * dim);
    bo = tensor (lk, NAME ("attn_out.bias"), dim);

    memcpy (h, x, n * dim * sizeof (double));
    layer_norm (h, n, dim, ln_w, ln_b, eps);
    npu_ref_linear (h, n, dim, wq, dim, bq, q8, q);
    npu_ref_linear (h, n, dim, wk, dim, NULL, q8, k);
    npu_ref_linear (h, n, dim, wv, dim, bv, q8, v);
    npu_ref_attention (q, k, v, n, dim, heads, att);
    npu_ref_linear (att, n, dim, wo, dim, bo, q8, h);
    for (i = 0; i < n * dim; i++)
      x[i] += h[i];
    g_free (ln_w);
    g_free (ln_b);
    g_free (wq);
    g_free (bq);
    g_free (wk);
    g_free (wv);
    g_free (bv);
    g_free (wo);
    g_free (bo);

    /* fc1 (ffn_up), GELU, fc2 (ffn_down) */
    ln_w = tensor (lk, NAME ("ln2.weight"), dim);
    ln_b = tensor (lk, NAME ("ln2.bias"), dim);
    wq = tensor (lk, NAME ("ffn_up.weight"), dim * ff);
    bq = tensor (lk, NAME ("ffn_up.bias"), ff);
    wk = tensor (lk, NAME ("ffn_down.weight"), dim * ff);
    bo = tensor (lk, NAME ("ffn_down.bias"), dim);
#undef NAME
    memcpy (h, x, n * dim * sizeof (double));
    layer_norm (h, n, dim, ln_w, ln_b, eps);
    npu_ref_linear (h, n, dim, wq, ff, bq, q8, f);
    for (i = 0; i < n * ff; i++)
      f[i] = gelu (f[i]);
    npu_ref_linear (f, n, ff, wk, dim, bo, q8, h);
    for (i = 0; i < n * dim; i++)
      x[i] += h[i];
    g_free (ln_w);
    g_free (ln_b);
    g_free (wq);
    g_free (bq);
    g_free (wk);
    g_free (bo);
  }
  g_free (h);
  g_free (q);
  g_free (k);
  g_free (v);
  g_free (att);
  g_free (f);

  w = tensor (lk, "a.post_ln.weight", dim);
  b = tensor (lk, "a.post_ln.bias", dim);
  if (!ultravox) {
    /* Qwen2AudioEncoder: avg_pooler (AvgPool1d (2, stride 2)) on the
     * block output, then layer_norm, then the projector's linear */
    double *wf, *bf;

    n_tok = n / 2;
    for (i = 0; i < n_tok; i++)
      for (c = 0; c < dim; c++)
        x[i * dim + c] = (x[2 * i * dim + c] + x[(2 * i + 1) * dim + c]) / 2;
    if (w)
      layer_norm (x, n_tok, dim, w, b, eps);
    g_assert_true (view (lk, "mm.a.fc.weight", &pv));
    out_dim = pv.ne[1];
    wf = tensor (lk, "mm.a.fc.weight", dim * out_dim);
    bf = tensor (lk, "mm.a.fc.bias", out_dim);
    npu_ref_linear (x, n_tok, dim, wf, out_dim, bf, q8, out);
    g_free (wf);
    g_free (bf);
  } else {
    guint s = npu_gguf_get_u32_default (g,
        "clip.audio.projector.stack_factor", 0);
    gsize in = dim * s, hidden, half;
    double *st, *np_w, *w1, *nm_w, *w2, *y1, *y2;

    if (w)
      layer_norm (x, n, dim, w, b, eps);
    /* StackAudioFrames: pad the positions with zeros to a multiple of s,
     * then row t is positions s t .. s t + s - 1 side by side */
    n_tok = (n + s - 1) / s;
    st = g_new0 (double, n_tok * in);
    for (i = 0; i < n; i++)
      for (c = 0; c < dim; c++)
        st[(i / s) * in + (i % s) * dim + c] = x[i * dim + c];
    g_assert_true (view (lk, "mm.a.mlp.1.weight", &pv));
    hidden = pv.ne[1];
    half = hidden / 2;
    g_assert_true (view (lk, "mm.a.mlp.2.weight", &pv));
    out_dim = pv.ne[1];
    np_w = tensor (lk, "mm.a.norm_pre.weight", in);
    w1 = tensor (lk, "mm.a.mlp.1.weight", in * hidden);
    nm_w = tensor (lk, "mm.a.norm_mid.weight", half);
    w2 = tensor (lk, "mm.a.mlp.2.weight", half * out_dim);
    y1 = g_new (double, n_tok * hidden);
    y2 = g_new (double, n_tok * half);
    rms_norm (st, n_tok, in, np_w, 1e-6);
    npu_ref_linear (st, n_tok, in, w1, hidden, NULL, q8, y1);
    /* Ultravox's SwiGLU: x, gate = chunk (2); silu (gate) * x */
    for (i = 0; i < n_tok; i++)
      for (c = 0; c < half; c++) {
        double a = y1[i * hidden + c], gt = y1[i * hidden + half + c];

        y2[i * half + c] = a * gt / (1.0 + exp (-gt));
      }
    rms_norm (y2, n_tok, half, nm_w, 1e-6);
    npu_ref_linear (y2, n_tok, half, w2, out_dim, NULL, q8, out);
    g_free (st);
    g_free (np_w);
    g_free (w1);
    g_free (nm_w);
    g_free (w2);
    g_free (y1);
    g_free (y2);
  }
  g_free (w);
  g_free (b);
  g_free (x);
  return n_tok;
}
