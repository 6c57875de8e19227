/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: the vision encoder, the naive way, in double precision
 *
 * A straight transcription of the definitions, shared by the tests of the
 * core encoder (tests/unit/test-vit.c) and of the element
 * (tests/check/test-npuvisiontok.c): patch embedding as the convolution
 * sum, LayerNorm, softmax attention, GELU, HF Idefics3's pixel_shuffle as
 * its view/permute sequence, LLaVA's two-layer MLP.  It shares no code with
 * the runtime except the weight decoders: 2-D matrices are read as the
 * file stores them, each value decoded as ggml decodes its type
 * (npu_quants_dequantize_row(), held to an independent decoder by
 * unit/quants), as the runtime multiplies them, so that a comparison
 * measures arithmetic, not the weights.
 */
#include "tests/reference/npurefvit.h"
#include <core/formats/npumxfp4.h>
#include <core/formats/npuquants.h>
#include "tests/npucompare.h"

#include <math.h>
#include <string.h>

typedef struct
{
  guint image, patch, side, np, npos, first, dim, ff, heads, layers;
  guint out_dim, scale, grid, n_tokens;
  guint act;                    /* 0 gelu, 1 quick gelu, 2 silu */
  gboolean mlp;
  gboolean gemma3;              /* else idefics3 when not mlp */
  double eps;
} RefParams;

static gboolean
get_view (const NpuRefLookup * lk, const gchar * name, NpuTensorView * v)
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

/* Any 2-D matrix, rows x k, as the runtime reads it: the file's values,
 * each decoded as ggml decodes its type (npuquants.h) */
static double *
ref_matrix (const NpuRefLookup * lk, const gchar * name, gsize rows, gsize k)
{
  NpuTensorView v;
  gsize n = rows * k, i;
  float *f = g_new (float, n);
  double *d = g_new (double, n);

  g_assert_true (get_view (lk, name, &v));
  g_assert_cmpuint (v.ne[0] * v.ne[1] * v.ne[2] * v.ne[3], ==, n);
  g_assert_true (npu_quants_dequantize_row (v.type, v.data, f, n));
  for (i = 0; i < n; i++)
    d[i] = f[i];
  g_free (f);
  return d;
}

/* F32 or F16 tensor of n elements, exactly */
static double *
ref_plain (const NpuRefLookup * lk, const gchar * name, gsize n)
{
  NpuTensorView v;
  double *d;
  gsize i;

  if (!get_view (lk, name, &v))
    return NULL;
  d = g_new (double, n);
  for (i = 0; i < n; i++) {
    if (v.type == NPU_GGML_TYPE_F32)
      d[i] = ((const float *) v.data)[i];
    else if (v.type == NPU_GGML_TYPE_F16)
      d[i] = npu_f16_to_f32 (((const guint16 *) v.data)[i]);
    else
      g_assert_not_reached ();
  }
  return d;
}

/* What the int8 kernels do to an activation row before the product */
static void
q8_round (const double *x, gsize k, double *y)
{
  gsize b, j;

  for (b = 0; b < k; b += 32) {
    float amax = 0.0f, d;

    for (j = 0; j < 32; j++)
      amax = MAX (amax, fabsf ((float) x[b + j]));
    d = amax / 127.0f;
    for (j = 0; j < 32; j++)
      y[b + j] = amax == 0.0f ? 0.0 :
          (double) d *(double) lrintf ((float) x[b + j] / d);
  }
}

/* y[n x rows] = x[n x k] W^T + b */
void
npu_ref_linear (const double *x, gsize n, gsize k, const double *w, gsize rows,
    const double *b, gboolean q8, double *y)
{
  double *xr = g_new (double, k);
  gsize c, r, j;

  for (c = 0; c < n; c++) {
    if (q8)
      q8_round (x + c * k, k, xr);
    else
      memcpy (xr, x + c * k, k * sizeof (double));
    for (r = 0; r < rows; r++) {
      double s = b ? b[r] : 0.0;

      for (j = 0; j < k; j++)
        s += w[r * k + j] * xr[j];
      y[c * rows + r] = s;
    }
  }
  g_free (xr);
}

void
npu_ref_attention (const double *q, const double *k, const double *v,
    gsize n, gsize dim, guint heads, double *att)
{
  gsize hd = dim / heads, i, j, c, hh;
  double *s = g_new (double, n);

  for (hh = 0; hh < heads; hh++) {
    for (i = 0; i < n; i++) {
      double mx = -INFINITY, sum = 0.0;

      for (j = 0; j < n; j++) {
        double dot = 0.0;

        for (c = 0; c < hd; c++)
          dot += q[i * dim + hh * hd + c] * k[j * dim + hh * hd + c];
        s[j] = dot / sqrt ((double) hd);
        mx = MAX (mx, s[j]);
      }
      for (j = 0; j < n; j++)
        sum += (s[j] = exp (s[j] - mx));
      for (c = 0; c < hd; c++) {
        double o = 0.0;

        for (j = 0; j < n; j++)
          o += s[j] / sum * v[j * dim + hh * hd + c];
        att[i * dim + hh * hd + c] = o;
      }
    }
  }
  g_free (s);
}

static void
ref_layernorm (double *x, gsize n, gsize dim, const double *w,
    const double *b, double eps, double *y)
{
  gsize r, c;

  for (r = 0; r < n; r++) {
    double mean = 0.0, var = 0.0;

    for (c = 0; c < dim; c++)
      mean += x[r * dim + c];
    mean /= dim;
    for (c = 0; c < dim; c++)
      var += (x[r * dim + c] - mean) * (x[r * dim + c] - mean);
    var /= dim;
    for (c = 0; c < dim; c++)
      y[r * dim + c] = (x[r * dim + c] - mean) / sqrt (var + eps) * w[c] + b[c];
  }
}

static double
ref_act (guint act, double x)
{
  if (act == 0)
    return 0.5 * x * (1.0 + tanh (sqrt (2.0 / G_PI) * (x + 0.044715 * x * x *
                x)));
  if (act == 1)
    return x / (1.0 + exp (-1.702 * x));
  return x / (1.0 + exp (-x));
}

static void
ref_params (const NpuGguf * g, const NpuRefLookup * lk, RefParams * p)
{
  NpuTensorView v;
  const gchar *proj = npu_gguf_get_string (g, "clip.projector_type", NULL,
      NULL);
  gfloat eps;

  p->image = npu_gguf_get_u32_default (g, "clip.vision.image_size", 0);
  p->patch = npu_gguf_get_u32_default (g, "clip.vision.patch_size", 0);
  p->dim = npu_gguf_get_u32_default (g, "clip.vision.embedding_length", 0);
  p->ff = npu_gguf_get_u32_default (g, "clip.vision.feed_forward_length", 0);
  p->heads = npu_gguf_get_u32_default (g, "clip.vision.attention.head_count",
      0);
  p->layers = npu_gguf_get_u32_default (g, "clip.vision.block_count", 0);
  g_assert_true (npu_gguf_get_f32 (g,
          "clip.vision.attention.layer_norm_epsilon", &eps, NULL));
  p->eps = eps;
  /* as npuvit.c reads them: GELU, SiLU, or else quick GELU */
  p->act = npu_gguf_get_bool_default (g, "clip.use_gelu", FALSE) ? 0 :
      npu_gguf_get_bool_default (g, "clip.use_silu", FALSE) ? 2 : 1;
  p->side = p->image / p->patch;
  p->np = p->side * p->side;
  p->first = get_view (lk, "v.class_embd", &v) ? 1 : 0;
  p->npos = p->np + p->first;
  p->mlp = g_strcmp0 (proj, "mlp") == 0;
  p->gemma3 = g_strcmp0 (proj, "gemma3") == 0;
  p->scale = 1;
  if (p->gemma3) {
    /* HF Gemma3MultiModalProjector: AvgPool2d of side / tokens_per_side
     * (clip.cpp: the scale factor, else 4); the projection is stored as
     * HF holds it, [vision dim][text dim], so ne[0] is the text dim */
    p->scale = npu_gguf_get_u32_default (g,
        "clip.vision.projector.scale_factor", 4);
    g_assert_true (get_view (lk, "mm.input_projection.weight", &v));
    p->out_dim = v.ne[0];
    p->grid = p->side / p->scale;
    p->n_tokens = p->grid * p->grid;
  } else if (p->mlp) {
    g_assert_true (get_view (lk, "mm.2.weight", &v));
    p->out_dim = v.ne[1];
    p->grid = p->side;
    p->n_tokens = p->np;
  } else {
    p->scale = npu_gguf_get_u32_default (g,
        "clip.vision.projector.scale_factor", 0);
    g_assert_true (get_view (lk, "mm.model.fc.weight", &v));
    p->out_dim = v.ne[1];
    g_assert_cmpuint (p->side % p->scale, ==, 0);
    p->grid = p->side / p->scale;
    p->n_tokens = p->grid * p->grid;
  }
}

/* HF Idefics3Connector.pixel_shuffle, step by step:
 *   x [seq, C] viewed as [h, w, C] -> view [h, w/s, C s] -> permute to
 *   [w/s, h, C s] -> reshape [w/s, h/s, C s s] -> permute to
 *   [h/s, w/s, C s s] -> reshape [seq / s^2, C s s] */
static void
ref_pixel_shuffle (const double *x, guint side, guint C, guint s, double *y)
{
  guint h = side, w = side, a, b, c;
  gsize cs = (gsize) C * s, css = cs * s;
  double *t1 = g_new (double, (gsize) side * side * C);
  double *t2 = g_new (double, (gsize) side * side * C);

  /* [h][w/s][Cs] is x itself; permute (1, 0, 2) -> t1 [w/s][h][Cs] */
  for (a = 0; a < h; a++)
    for (b = 0; b < w / s; b++)
      for (c = 0; c < cs; c++)
        t1[((gsize) b * h + a) * cs + c] = x[((gsize) a * (w / s) + b) * cs +
            c];
  /* t1 viewed as [w/s][h/s][Css]; permute (1, 0, 2) -> t2 [h/s][w/s][Css] */
  for (a = 0; a < w / s; a++)
    for (b = 0; b < h / s; b++)
      for (c = 0; c < css; c++)
        t2[((gsize) b * (w / s) + a) * css + c] =
            t1[((gsize) a * (h / s) + b) * css + c];
  memcpy (y, t2, (gsize) side * side * C * sizeof (double));
  g_free (t1);
  g_free (t2);
}

/* Gemma 3's projector, as HF Gemma3MultiModalProjector computes it: the
 * patch grid averaged over scale x scale squares, RMS-normed times
 * mm.soft_emb_norm (Gemma's 1 already added by the converter), then
 * x @ mm_input_projection_weight ([vision][text], HF's own layout).  The
 * runtime multiplies these in F32: no int8 rounding to model. */
static void
ref_gemma3_projector (const NpuRefLookup * lk, const RefParams * p,
    const double *x, double *out)
{
  gsize dim = p->dim, t, c, r;
  guint ty, tx, y, xx;
  double *wn = ref_plain (lk, "mm.soft_emb_norm.weight", dim);
  double *wp = ref_plain (lk, "mm.input_projection.weight", dim * p->out_dim);
  double *pooled = g_new0 (double, dim);

  for (ty = 0; ty < p->grid; ty++)
    for (tx = 0; tx < p->grid; tx++) {
      double ss = 0;

      t = (gsize) ty * p->grid + tx;
      memset (pooled, 0, dim * sizeof (double));
      for (y = 0; y < p->scale; y++)
        for (xx = 0; xx < p->scale; xx++)
          for (c = 0; c < dim; c++)
            pooled[c] += x[((gsize) (ty * p->scale + y) * p->side +
                    tx * p->scale + xx) * dim + c];
      for (c = 0; c < dim; c++) {
        pooled[c] /= (double) p->scale * p->scale;
        ss += pooled[c] * pooled[c];
      }
      ss = 1.0 / sqrt (ss / dim + p->eps);
      for (c = 0; c < dim; c++)
        pooled[c] *= ss * wn[c];
      for (r = 0; r < p->out_dim; r++) {
        double acc = 0;

        for (c = 0; c < dim; c++)
          acc += pooled[c] * wp[c * p->out_dim + r];
        out[t * p->out_dim + r] = acc;
      }
    }
  g_free (wn);
  g_free (wp);
  g_free (pooled);
}

/* @q8: model the int8 activations of the fast matmul paths */
void
npu_ref_vit_encode (const NpuRefLookup * lk, const double *patches,
    gboolean q8, double *out)
{
  RefParams p;
  gsize n, dim, K, i, c, l;
  double *x, *h, *q, *k, *v, *att, *f, *tmp, *wp, *bp, *pos;
  gboolean patch_mx;
  NpuTensorView pv;

  ref_params (lk->gguf, lk, &p);
  n = p.npos;
  dim = p.dim;
  K = 3 * p.patch * p.patch;
  x = g_new0 (double, n * dim);
  h = g_new (double, n * dim);
  q = g_new (double, n * dim);
  k = g_new (double, n * dim);
  v = g_new (double, n * dim);
  att = g_new (double, n * dim);
  f = g_new (double, n * p.ff);

  /* Patch embedding: conv2d with kernel [p, p, 3, dim] (KW, KH, IC, OC)
   * and stride p.  The patch input is already flattened as (ic, ky, kx),
   * so out[o] = sum_{ic,ky,kx} K[kx,ky,ic,o] * patch[ic][ky][kx]. */
  /* as the encoder: an MXFP4 kernel as stored, any other in full */
  g_assert_true (get_view (lk, "v.patch_embd.weight", &pv));
  patch_mx = pv.type == NPU_GGML_TYPE_MXFP4;
  wp = patch_mx ? ref_matrix (lk, "v.patch_embd.weight", dim, K) :
      ref_plain (lk, "v.patch_embd.weight", dim * K);
  bp = ref_plain (lk, "v.patch_embd.bias", dim);
  pos = ref_plain (lk, "v.position_embd.weight", n * dim);
  npu_ref_linear (patches, p.np, K, wp, dim, bp, q8 && patch_mx,
      x + p.first * dim);
  if (p.first) {
    double *cls = ref_plain (lk, "v.class_embd", dim);

    for (c = 0; c < dim; c++)
      x[c] = cls[c];
    g_free (cls);
  }
  for (i = 0; i < n * dim; i++)
    x[i] += pos[i];
  g_free (wp);
  g_free (bp);
  g_free (pos);

  for (l = 0; l < p.layers; l++) {
    gchar nm[64];
    double *w1, *b1, *w2, *b2;
    double *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo;
    NpuTensorView fv;
    gboolean swapped;
    const gchar *fc1, *fc2;

#define NAME(s) (g_snprintf (nm, sizeof (nm), "v.blk.%u." s, (guint) l), nm)
    w1 = ref_plain (lk, NAME ("ln1.weight"), dim);
    b1 = ref_plain (lk, NAME ("ln1.bias"), dim);
    w2 = ref_plain (lk, NAME ("ln2.weight"), dim);
    b2 = ref_plain (lk, NAME ("ln2.bias"), dim);
    wq = ref_matrix (lk, NAME ("attn_q.weight"), dim, dim);
    bq = ref_plain (lk, NAME ("attn_q.bias"), dim);
    wk = ref_matrix (lk, NAME ("attn_k.weight"), dim, dim);
    bk = ref_plain (lk, NAME ("attn_k.bias"), dim);
    wv = ref_matrix (lk, NAME ("attn_v.weight"), dim, dim);
    bv = ref_plain (lk, NAME ("attn_v.bias"), dim);
    wo = ref_matrix (lk, NAME ("attn_out.weight"), dim, dim);
    bo = ref_plain (lk, NAME ("attn_out.bias"), dim);

    ref_layernorm (x, n, dim, w1, b1, p.eps, h);
    npu_ref_linear (h, n, dim, wq, dim, bq, q8, q);
    npu_ref_linear (h, n, dim, wk, dim, bk, q8, k);
    npu_ref_linear (h, n, dim, wv, dim, bv, q8, v);
    npu_ref_attention (q, k, v, n, dim, p.heads, att);
    npu_ref_linear (att, n, dim, wo, dim, bo, q8, h);
    for (i = 0; i < n * dim; i++)
      x[i] += h[i];
    g_free (wq);
    g_free (bq);
    g_free (wk);
    g_free (bk);
    g_free (wv);
    g_free (bv);
    g_free (wo);
    g_free (bo);

    /* llama.cpp's legacy converter calls fc1 "ffn_down" and fc2
     * "ffn_up"; clip.cpp swaps them back when ffn_down's ne[0] is dim */
    swapped = get_view (lk, NAME ("ffn_down.weight"), &fv) && fv.ne[0] == dim;
    fc1 = swapped ? "ffn_down" : "ffn_up";
    fc2 = swapped ? "ffn_up" : "ffn_down";
#define FFN(t, s) (g_snprintf (nm, sizeof (nm), "v.blk.%u.%s." s, (guint) l, \
        t), nm)
    wq = ref_matrix (lk, FFN (fc1, "weight"), p.ff, dim);
    bq = ref_plain (lk, FFN (fc1, "bias"), p.ff);
    wk = ref_matrix (lk, FFN (fc2, "weight"), dim, p.ff);
    bk = ref_plain (lk, FFN (fc2, "bias"), dim);
#undef FFN
#undef NAME
    ref_layernorm (x, n, dim, w2, b2, p.eps, h);
    npu_ref_linear (h, n, dim, wq, p.ff, bq, q8, f);
    for (i = 0; i < n * p.ff; i++)
      f[i] = ref_act (p.act, f[i]);
    npu_ref_linear (f, n, p.ff, wk, dim, bk, q8, h);
    for (i = 0; i < n * dim; i++)
      x[i] += h[i];
    g_free (wq);
    g_free (bq);
    g_free (wk);
    g_free (bk);
    g_free (w1);
    g_free (b1);
    g_free (w2);
    g_free (b2);
  }
  {
    double *w = ref_plain (lk, "v.post_ln.weight", dim);
    double *b = ref_plain (lk, "v.post_ln.bias", dim);

    g_assert_nonnull (w);
    ref_layernorm (x, n, dim, w, b, p.eps, x);
    g_free (w);
    g_free (b);
  }

  /* the projector sees the patches, not the class token */
  tmp = x + p.first * dim;
  if (p.mlp) {
    double *w0 = ref_matrix (lk, "mm.0.weight", p.out_dim, dim);
    double *b0 = ref_plain (lk, "mm.0.bias", p.out_dim);
    double *w2 = ref_matrix (lk, "mm.2.weight", p.out_dim, p.out_dim);
    double *b2 = ref_plain (lk, "mm.2.bias", p.out_dim);
    double *y = g_new (double, p.np * p.out_dim);

    npu_ref_linear (tmp, p.np, dim, w0, p.out_dim, b0, q8, y);
    for (i = 0; i < p.np * p.out_dim; i++)
      y[i] = ref_act (0, y[i]);
    npu_ref_linear (y, p.np, p.out_dim, w2, p.out_dim, b2, q8, out);
    g_free (w0);
    g_free (b0);
    g_free (w2);
    g_free (b2);
    g_free (y);
  } else if (p.gemma3) {
    ref_gemma3_projector (lk, &p, tmp, out);
  } else {
    gsize in = dim * p.scale * p.scale;
    double *wf = ref_matrix (lk, "mm.model.fc.weight", p.out_dim, in);
    double *sh = g_new (double, p.np * dim);

    ref_pixel_shuffle (tmp, p.side, dim, p.scale, sh);
    npu_ref_linear (sh, p.n_tokens, in, wf, p.out_dim, NULL, q8, out);
    g_free (wf);
    g_free (sh);
  }
  g_free (x);
  g_free (h);
  g_free (q);
  g_free (k);
  g_free (v);
  g_free (att);
  g_free (f);
}

gboolean
npu_ref_error_over_rms (const float *y, const double *ref, gsize n, double *err)
{
  double rms = 0.0, e = 0.0;
  gsize i;

  for (i = 0; i < n; i++) {
    if (!isfinite (y[i]))
      return FALSE;
    rms += ref[i] * ref[i];
    e = npu_err_max (e, fabs (y[i] - ref[i]));
  }
  rms = sqrt (rms / n);
  if (!(rms > 0.0))
    return FALSE;
  *err = e / rms;
  return TRUE;
}
