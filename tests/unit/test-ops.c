/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the operation table (core/device/npuops.h) on every device of
 * this build, each operation on random shapes against a double-precision
 * reference written here, with the bound each comparison states; the
 * Vulkan device's zero-copy imports; and the errors by their message.
 *
 * The Vulkan device is the first one Vulkan lists (lavapipe in CI).  Where
 * the build has no Vulkan engine or the machine no Vulkan device its tests
 * are skipped, unless NPU_REQUIRE_VULKAN=1 (as tests/run.sh sets it),
 * where that fails.  With NPU_VULKAN_VALIDATION=1 (the suite's default)
 * the Khronos validation layer checks every call, and any error it reports
 * fails the test (a warning of GLib's, fatal in tests). */
#include <core/device/npuops.h>
#include <core/formats/npumxfp4.h>
#include <core/formats/npugguf.h>
#include <core/formats/npuquants.h>
#include <tests/npucompare.h>

#include <math.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

static GRand *rng;

static float
uniform (float lo, float hi)
{
  return (float) g_rand_double_range (rng, lo, hi);
}

static gsize
pick (gsize lo, gsize hi)
{
  return (gsize) g_rand_int_range (rng, (gint32) lo, (gint32) hi + 1);
}

/* A device by name, or NULL when the test is to be skipped */
static NpuDevice *
open_device (const gchar * name)
{
  GError *error = NULL;
  NpuDevice *dev = npu_device_open (name, 2, &error);

  if (dev)
    return dev;
  if (g_str_has_prefix (name, "vulkan") &&
      g_error_matches (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_NOT_FOUND)
      && g_strcmp0 (g_getenv ("NPU_REQUIRE_VULKAN"), "1") != 0) {
    g_test_skip (error->message);
    g_error_free (error);
    return NULL;
  }
  g_error ("cannot open device %s: %s", name, error->message);
  return NULL;
}

/* A device buffer holding @n floats of @src (NULL: zeros) */
static NpuBuffer *
buffer_with (NpuDevice * dev, const void *src, gsize bytes)
{
  GError *error = NULL;
  NpuBuffer *buf = npu_buffer_new (dev, bytes, &error);
  gpointer p;

  g_assert_no_error (error);
  p = npu_buffer_map (buf, NPU_BUFFER_MAP_WRITE, &error);
  g_assert_no_error (error);
  if (src)
    memcpy (p, src, bytes);
  npu_buffer_unmap (buf);
  return buf;
}

static void
read_back (NpuBuffer * buf, gsize offset, float *dst, gsize n)
{
  GError *error = NULL;
  const guint8 *p = npu_buffer_map (buf, NPU_BUFFER_MAP_READ, &error);

  g_assert_no_error (error);
  memcpy (dst, p + offset, n * sizeof (float));
  npu_buffer_unmap (buf);
}

/* Submits @ops on a queue of its device and waits for it */
static void
run_ops (NpuDevice * dev, NpuOps * ops)
{
  NpuQueue *queue = npu_queue_new (dev, "test-ops");
  NpuFence *fence = npu_ops_submit (ops, queue, NULL, 0);
  GError *error = NULL;

  if (!npu_fence_wait (fence, -1, &error))
    g_error ("%s", error->message);
  npu_fence_unref (fence);
  npu_queue_free (queue);
}

/* Fails unless |got[i] - ref[i]| <= rel * scale[i] + abs for every i */
static void
assert_close (const gchar * what, const float *got, const double *ref,
    const double *scale, gsize n, double rel, double abs)
{
  gsize i;

  for (i = 0; i < n; i++) {
    double err = fabs ((double) got[i] - ref[i]);
    double tol = rel * (scale ? scale[i] : fabs (ref[i])) + abs;

    if (!npu_within (err, tol))
      g_error ("%s: element %" G_GSIZE_FORMAT ": %.9g against %.9g (error "
          "%.3g, bound %.3g)", what, i, got[i], ref[i], err, tol);
  }
}

static guint16
random_f16 (gint min_exp, gint max_exp)
{
  guint16 sign = g_rand_boolean (rng) ? 0x8000 : 0;
  guint16 e = (guint16) (pick (15 + min_exp, 15 + max_exp));

  return sign | (e << 10) | (guint16) pick (0, 1023);
}

/* rows x k weights of @type with their F32 values in @wf */
static guint8 *
random_weights (NpuOpWeight type, gsize rows, gsize k, float *wf, gsize * bytes)
{
  gsize n = rows * k, i;
  guint8 *w;

  switch (type) {
    case NPU_OP_WEIGHT_F32:
      *bytes = n * 4;
      w = g_malloc (*bytes);
      for (i = 0; i < n; i++)
        wf[i] = uniform (-1, 1);
      memcpy (w, wf, *bytes);
      return w;
    case NPU_OP_WEIGHT_F16:
      *bytes = n * 2;
      w = g_malloc (*bytes);
      for (i = 0; i < n; i++) {
        guint16 h = random_f16 (-6, 0);

        memcpy (w + 2 * i, &h, 2);
        wf[i] = npu_f16_to_f32 (h);
      }
      return w;
    case NPU_OP_WEIGHT_Q8_0:
      *bytes = n / 32 * 34;
      w = g_malloc (*bytes);
      for (i = 0; i < n / 32; i++) {
        guint16 d = random_f16 (-9, -5);
        gsize j;

        memcpy (w + 34 * i, &d, 2);
        for (j = 0; j < 32; j++)
          w[34 * i + 2 + j] = (guint8) pick (0, 255);
      }
      npu_q8_0_dequantize (w, wf, n);
      return w;
    case NPU_OP_WEIGHT_MXFP4:
      *bytes = n / 32 * 17;
      w = g_malloc (*bytes);
      for (i = 0; i < n; i++)
        wf[i] = uniform (-1, 1) * (i % 97 == 0 ? 8.0f : 1.0f);
      npu_mxfp4_quantize_f32 (wf, (NpuBlockMxfp4 *) w, n);
      npu_mxfp4_dequantize ((NpuBlockMxfp4 *) w, wf, n);
      return w;
    default:{
      /* BF16 and the 4-, 5- and 6-bit types: random bytes, every f16
       * field (d first, then m or dmin; Q6_K's d last) a random finite
       * half, BF16 values of order one; the values as ggml decodes them */
      guint32 gt = npu_op_weight_get_ggml_type (type);
      gsize row_bytes = npu_quants_row_bytes (gt, k), bb = 0, b;
      guint block = 0;

      npu_ggml_type_info (gt, &block, &bb);
      *bytes = rows * row_bytes;
      w = g_malloc (*bytes);
      for (i = 0; i < *bytes; i++)
        w[i] = (guint8) pick (0, 255);
      for (b = 0; b < *bytes / bb; b++) {
        guint8 *p = w + b * bb;
        guint16 h = random_f16 (-10, -6), m = random_f16 (-10, -6);

        if (type == NPU_OP_WEIGHT_BF16) {
          h = (guint16) (g_rand_boolean (rng) ? 0x8000 : 0) |
              (guint16) (pick (120, 127) << 7) | (guint16) pick (0, 127);
          memcpy (p, &h, 2);
        } else if (type == NPU_OP_WEIGHT_Q6_K) {
          memcpy (p + 208, &h, 2);
        } else {
          memcpy (p, &h, 2);
          if (type == NPU_OP_WEIGHT_Q4_1 || type == NPU_OP_WEIGHT_Q5_1 ||
              type == NPU_OP_WEIGHT_Q4_K || type == NPU_OP_WEIGHT_Q5_K)
            memcpy (p + 2, &m, 2);
        }
      }
      for (i = 0; i < rows; i++)
        g_assert_true (npu_quants_dequantize_row (gt, w + i * row_bytes,
                wf + i * k, k));
      return w;
    }
  }
}

/* One product of random shape on @dev; the weights at @w_pad bytes into
 * their buffer (any byte for the quantised types) */
static void
check_mul_mat (NpuDevice * dev, NpuOpWeight type, gsize rows, gsize k,
    gsize n, gsize w_pad)
{

  float *wf = g_new (float, rows * k), *x = g_new (float, n * k);
  float *y = g_new (float, n * rows);
  double *ref = g_new (double, n * rows), *scale = g_new (double, n * rows);
  double xmax = 0, rel;
  gsize wbytes, c, r, j;
  guint8 *w = random_weights (type, rows, k, wf, &wbytes);
  guint8 *padded = g_malloc0 (wbytes + w_pad);
  NpuBuffer *wb, *xb, *yb;
  NpuOps *ops = npu_ops_new (dev);
  GError *error = NULL;
  gchar *what;

  for (j = 0; j < n * k; j++) {
    x[j] = uniform (-2, 2);
    xmax = MAX (xmax, fabs (x[j]));
  }
  memcpy (padded + w_pad, w, wbytes);
  wb = buffer_with (dev, padded, wbytes + w_pad);
  xb = buffer_with (dev, x, n * k * 4);
  yb = buffer_with (dev, NULL, n * rows * 4 + 8);
  g_assert_true (npu_ops_mul_mat (ops, type, wb, w_pad, rows, k, xb, 0, n,
          yb, 8, &error));
  g_assert_no_error (error);
  run_ops (dev, ops);
  read_back (yb, 8, y, n * rows);

  for (c = 0; c < n; c++)
    for (r = 0; r < rows; r++) {
      double s = 0, a = 0;

      for (j = 0; j < k; j++) {
        s += (double) wf[r * k + j] * x[c * k + j];
        a += fabs ((double) wf[r * k + j]) * xmax;
      }
      ref[c * rows + r] = s;
      scale[c * rows + r] = a;
    }
  /* F32 sums of k products: (k + 2) roundings of at most the sum of the
   * magnitudes; the CPU's accurate integer products round the
   * activations to ~16 bits of max |x| (npumatmul.h), 2^-14 with margin */
  rel = (k + 2) * 0x1p-24 + (type >= NPU_OP_WEIGHT_Q8_0 ? 0x1p-14 : 0);
  what = g_strdup_printf ("%s: mul_mat %s %" G_GSIZE_FORMAT " x %"
      G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT, npu_device_get_name (dev),
      npu_ggml_type_name (npu_op_weight_get_ggml_type (type)), rows, k, n);
  assert_close (what, y, ref, scale, n * rows, rel, 0);
  g_free (what);

  npu_ops_free (ops);
  npu_buffer_unref (wb);
  npu_buffer_unref (xb);
  npu_buffer_unref (yb);
  g_free (padded);
  g_free (w);
  g_free (wf);
  g_free (x);
  g_free (y);
  g_free (ref);
  g_free (scale);
}

static void
check_products (NpuDevice * dev)
{
  NpuOpWeight t;
  guint i;

  for (t = NPU_OP_WEIGHT_F32; t <= NPU_OP_WEIGHT_Q6_K; t++)
    for (i = 0; i < 3; i++) {
      guint block = 0;
      gsize k, rows = pick (1, 70), n = i == 0 ? 1 : pick (2, 9);

      npu_ggml_type_info (npu_op_weight_get_ggml_type (t), &block, NULL);
      k = MAX (block, 32) * pick (1, block == 256 ? 3 : 12);
      /* F32 and F16 at a word, the others at any byte */
      check_mul_mat (dev, t, rows, k, n, t >= NPU_OP_WEIGHT_Q8_0 ?
          pick (0, 40) : 4 * pick (0, 10));
    }
  /* more rows than one dispatch dimension holds on some devices */
  if (!g_getenv ("NPU_UNDER_VALGRIND"))
    check_mul_mat (dev, NPU_OP_WEIGHT_MXFP4, 70000, 32, 1, 3);
}

static void
check_norm_softmax (NpuDevice * dev)
{
  gsize dim = pick (1, 700), n = pick (1, 6), i, c;
  gsize count = n * dim;
  float *x = g_new (float, count), *w = g_new (float, dim);
  float *y = g_new (float, count);
  double *ref = g_new (double, count);
  NpuBuffer *xb, *wb, *yb, *sb;
  NpuOps *ops = npu_ops_new (dev);
  GError *error = NULL;

  for (i = 0; i < count; i++)
    x[i] = uniform (-6, 6);
  for (i = 0; i < dim; i++)
    w[i] = uniform (-2, 2);
  xb = buffer_with (dev, x, count * 4);
  wb = buffer_with (dev, w, dim * 4);
  yb = buffer_with (dev, NULL, count * 4);
  sb = buffer_with (dev, x, count * 4);
  g_assert_true (npu_ops_rms_norm (ops, xb, 0, wb, 0, yb, 0, dim, n, 1e-5f,
          &error));
  g_assert_true (npu_ops_softmax (ops, sb, 0, dim, n, &error));
  g_assert_no_error (error);
  run_ops (dev, ops);

  read_back (yb, 0, y, count);
  for (c = 0; c < n; c++) {
    double ss = 0, inv;

    for (i = 0; i < dim; i++)
      ss += (double) x[c * dim + i] * x[c * dim + i];
    inv = 1.0 / sqrt (ss / dim + 1e-5);
    for (i = 0; i < dim; i++)
      ref[c * dim + i] = x[c * dim + i] * inv * w[i];
  }
  /* a sum of squares and a square root in F32, then two products */
  assert_close ("rms_norm", y, ref, NULL, count, 4e-6, 1e-7);

  read_back (sb, 0, y, count);
  for (c = 0; c < n; c++) {
    double m = -INFINITY, s = 0;

    for (i = 0; i < dim; i++)
      m = MAX (m, x[c * dim + i]);
    for (i = 0; i < dim; i++)
      s += exp (x[c * dim + i] - m);
    for (i = 0; i < dim; i++)
      ref[c * dim + i] = exp (x[c * dim + i] - m) / s;
  }
  /* exp of arguments down to -12 within GLSL's 3 + 2 |x| ulp, the sum of
   * up to 700 terms in F32 */
  assert_close ("softmax", y, ref, NULL, count, 3e-5, 1e-9);

  npu_ops_free (ops);
  npu_buffer_unref (xb);
  npu_buffer_unref (wb);
  npu_buffer_unref (yb);
  npu_buffer_unref (sb);
  g_free (x);
  g_free (w);
  g_free (y);
  g_free (ref);
}

static void
check_elementwise (NpuDevice * dev)
{
  gsize count = pick (1, 5000), i;
  float *a = g_new (float, count), *b = g_new (float, count);
  float *y = g_new (float, count);
  double *ref = g_new (double, count);
  NpuBuffer *ab, *bb, *sb, *gb, *db;
  NpuOps *ops = npu_ops_new (dev);
  GError *error = NULL;

  for (i = 0; i < count; i++) {
    a[i] = uniform (-9, 9);
    b[i] = uniform (-3, 3);
  }
  ab = buffer_with (dev, a, count * 4);
  bb = buffer_with (dev, b, count * 4);
  sb = buffer_with (dev, NULL, count * 4);
  gb = buffer_with (dev, NULL, count * 4);
  db = buffer_with (dev, NULL, count * 4);
  g_assert_true (npu_ops_silu_mul (ops, ab, 0, bb, 0, sb, 0, count, &error));
  g_assert_true (npu_ops_gelu (ops, ab, 0, gb, 0, count, &error));
  g_assert_true (npu_ops_add (ops, ab, 0, bb, 0, db, 0, count, &error));
  g_assert_no_error (error);
  run_ops (dev, ops);

  read_back (sb, 0, y, count);
  for (i = 0; i < count; i++)
    ref[i] = a[i] / (1.0 + exp (-(double) a[i])) * b[i];
  assert_close ("silu_mul", y, ref, NULL, count, 4e-6, 1e-30);
  read_back (gb, 0, y, count);
  for (i = 0; i < count; i++)
    ref[i] = 0.5 * a[i] * (1.0 + tanh (0.7978845608028654 * (a[i] +
                0.044715 * pow (a[i], 3))));
  /* tanh from exp: near 0 its absolute error is F32's, times x / 2 */
  assert_close ("gelu", y, ref, NULL, count, 4e-6, 1e-6);
  read_back (db, 0, y, count);
  for (i = 0; i < count; i++)
    ref[i] = (double) a[i] + b[i];
  assert_close ("add", y, ref, NULL, count, 0x1p-24, 0);

  npu_ops_free (ops);
  npu_buffer_unref (ab);
  npu_buffer_unref (bb);
  npu_buffer_unref (sb);
  npu_buffer_unref (gb);
  npu_buffer_unref (db);
  g_free (a);
  g_free (b);
  g_free (y);
  g_free (ref);
}

static void
check_rope (NpuDevice * dev, gboolean neox)
{
  gsize n_tok = pick (1, 5), n_heads = pick (1, 6), hd = 2 * pick (2, 40);
  gsize n_rot = 2 * pick (1, hd / 2), pos0 = pick (0, 300), count, t, h, i;
  float *x, *y;
  double *ref, *scale;
  NpuBuffer *xb;
  NpuOps *ops = npu_ops_new (dev);
  GError *error = NULL;

  count = n_tok * n_heads * hd;
  x = g_new (float, count);
  y = g_new (float, count);
  ref = g_new (double, count);
  scale = g_new (double, count);
  for (i = 0; i < count; i++)
    x[i] = uniform (-3, 3);
  xb = buffer_with (dev, x, count * 4);
  g_assert_true (npu_ops_rope (ops, xb, 0, n_tok, n_heads, hd, n_rot, pos0,
          10000.0f, 1.0f, neox, &error));
  g_assert_no_error (error);
  run_ops (dev, ops);
  read_back (xb, 0, y, count);

  for (i = 0; i < count; i++) {
    ref[i] = x[i];
    scale[i] = 3.0;
  }
  for (t = 0; t < n_tok; t++)
    for (h = 0; h < n_heads; h++)
      for (i = 0; i < n_rot / 2; i++) {
        gsize base = (t * n_heads + h) * hd;
        gsize i0 = base + (neox ? i : 2 * i);
        gsize i1 = base + (neox ? i + n_rot / 2 : 2 * i + 1);
        double a = (pos0 + t) * pow (10000.0, -2.0 * i / n_rot);

        ref[i0] = x[i0] * cos (a) - x[i1] * sin (a);
        ref[i1] = x[i0] * sin (a) + x[i1] * cos (a);
        scale[i0] = scale[i1] = fabs (x[i0]) + fabs (x[i1]);
      }
  /* the angle, up to ~300 radians, in F32 on a GPU: its error is a few
   * ulp of the angle, 2^-20 of it with margin */
  assert_close (neox ? "rope (neox)" : "rope", y, ref, scale, count,
      (pos0 + n_tok + 1) * 0x1p-20, 1e-7);

  npu_ops_free (ops);
  npu_buffer_unref (xb);
  g_free (x);
  g_free (y);
  g_free (ref);
  g_free (scale);
}

static void
check_attention (NpuDevice * dev, NpuKvType kv_type, gboolean causal)
{
  gsize n_kv = pick (1, 3), group = pick (1, 3), n_heads = n_kv * group;
  gsize hd = kv_type == NPU_KV_F16 ? 2 * pick (4, 64) :
      kv_type == NPU_KV_Q8_0 ? 32 * pick (3, 4) : pick (1, 130);
  gsize n_q = pick (1, 4), pos0 = pick (0, 150), n_ctx = pos0 + n_q;
  gsize kv_vals = n_ctx * n_kv * hd, q_vals = n_q * n_heads * hd;
  float *q = g_new (float, q_vals), *kf = g_new (float, kv_vals);
  float *vf = g_new (float, kv_vals), *y = g_new (float, q_vals);
  double *ref = g_new0 (double, q_vals), *sc = g_new (double, n_ctx);
  gsize kv_bytes = n_ctx * npu_kv_row_bytes (kv_type, n_kv * hd);
  guint8 *kraw = g_malloc (kv_bytes), *vraw = g_malloc (kv_bytes);
  float scale = 1.0f / sqrtf (hd);
  NpuBuffer *qb, *kb, *vb, *ob;
  NpuOps *ops = npu_ops_new (dev);
  GError *error = NULL;
  gsize i, t, h, j, d;

  for (i = 0; i < q_vals; i++)
    q[i] = uniform (-2, 2);
  for (i = 0; i < kv_vals; i++) {
    if (kv_type == NPU_KV_F16) {
      guint16 hk = random_f16 (-4, 1), hv = random_f16 (-4, 1);

      memcpy (kraw + 2 * i, &hk, 2);
      memcpy (vraw + 2 * i, &hv, 2);
      kf[i] = npu_f16_to_f32 (hk);
      vf[i] = npu_f16_to_f32 (hv);
    } else {
      kf[i] = uniform (-2, 2);
      vf[i] = uniform (-2, 2);
    }
  }
  if (kv_type == NPU_KV_F32) {
    memcpy (kraw, kf, kv_bytes);
    memcpy (vraw, vf, kv_bytes);
  }
  if (kv_type == NPU_KV_Q8_0) {
    gsize row = n_kv * hd, rb = npu_kv_row_bytes (kv_type, row);

    /* the reference reads the values as stored */
    for (j = 0; j < n_ctx; j++) {
      npu_kv_encode_row (kv_type, kf + j * row, row, kraw + j * rb);
      npu_kv_encode_row (kv_type, vf + j * row, row, vraw + j * rb);
      for (d = 0; d < row; d++) {
        kf[j * row + d] = npu_kv_decode_at (kv_type, kraw + j * rb, d);
        vf[j * row + d] = npu_kv_decode_at (kv_type, vraw + j * rb, d);
      }
    }
  }
  qb = buffer_with (dev, q, q_vals * 4);
  kb = buffer_with (dev, kraw, kv_bytes);
  vb = buffer_with (dev, vraw, kv_bytes);
  ob = buffer_with (dev, NULL, q_vals * 4);
  g_assert_true (npu_ops_attention (ops, qb, 0, kb, 0, vb, 0, kv_type, ob, 0,
          n_q, n_heads, n_kv, hd, pos0, causal, scale, &error));
  g_assert_no_error (error);
  run_ops (dev, ops);
  read_back (ob, 0, y, q_vals);

  for (t = 0; t < n_q; t++)
    for (h = 0; h < n_heads; h++) {
      const float *qr = q + (t * n_heads + h) * hd;
      gsize kvh = h / group, n = causal ? pos0 + t + 1 : n_ctx;
      double m = -INFINITY, s = 0;

      for (j = 0; j < n; j++) {
        const float *kr = kf + (j * n_kv + kvh) * hd;
        double dot = 0;

        for (d = 0; d < hd; d++)
          dot += (double) qr[d] * kr[d];
        sc[j] = dot * scale;
        m = MAX (m, sc[j]);
      }
      for (j = 0; j < n; j++)
        s += (sc[j] = exp (sc[j] - m));
      for (j = 0; j < n; j++)
        for (d = 0; d < hd; d++)
          ref[(t * n_heads + h) * hd + d] += sc[j] / s *
              vf[(j * n_kv + kvh) * hd + d];
    }
  /* scores are F32 dot products of up to 130 terms (|score| < ~12), so
   * each weight is within ~2^-17 relative; the output is a weighted mean
   * of values below 4 in magnitude */
  /* Q8_0 rows are read as stored (the reference decodes them the same);
   * heads of 96 and 128 keep the queries in F32 at every level (the
   * AVX-512 level rounds them to int8 for heads up to 64 only,
   * npuattention.h, which test-attention bounds) */
  assert_close (kv_type == NPU_KV_F16 ? "attention (f16 kv)" :
      kv_type == NPU_KV_Q8_0 ? "attention (q8_0 kv)" :
      causal ? "attention (f32 kv)" : "attention (f32 kv, every key)", y,
      ref, NULL, q_vals, 0, 4.0 * 0x1p-15);

  npu_ops_free (ops);
  npu_buffer_unref (qb);
  npu_buffer_unref (kb);
  npu_buffer_unref (vb);
  npu_buffer_unref (ob);
  g_free (q);
  g_free (kf);
  g_free (vf);
  g_free (y);
  g_free (ref);
  g_free (sc);
  g_free (kraw);
  g_free (vraw);
}

static double
act_ref (NpuOpAct act, double x)
{
  switch (act) {
    case NPU_OP_ACT_GELU:
      return 0.5 * x * (1.0 + tanh (0.7978845608028654 * x * (1.0 +
                  0.044715 * x * x)));
    case NPU_OP_ACT_GELU_QUICK:
      return x / (1.0 + exp (-1.702 * x));
    case NPU_OP_ACT_SILU:
      return x / (1.0 + exp (-x));
    case NPU_OP_ACT_GELU_ERF:
      return 0.5 * x * (1.0 + erf (x / sqrt (2.0)));
    default:
      return x;
  }
}

/* What the encoders add: layer norm, bias and activation, gathering rows */
static void
check_encoder_ops (NpuDevice * dev)
{
  gsize dim = pick (1, 300), n = pick (1, 7), count = n * dim, i, c;
  float *x = g_new (float, count), *w = g_new (float, dim);
  float *b = g_new (float, dim), *y = g_new (float, count);
  double *ref = g_new (double, count);
  gint32 idx[9];
  NpuBuffer *xb, *wb, *bb, *yb, *ab[5], *ib, *gb;
  NpuOps *ops = npu_ops_new (dev);
  GError *error = NULL;
  NpuOpAct act;

  for (i = 0; i < count; i++)
    x[i] = uniform (-5, 5);
  for (i = 0; i < dim; i++) {
    w[i] = uniform (-2, 2);
    b[i] = uniform (-1, 1);
  }
  for (i = 0; i < G_N_ELEMENTS (idx); i++)
    idx[i] = i % 4 == 3 ? -1 : (gint32) pick (0, n - 1);
  xb = buffer_with (dev, x, count * 4);
  wb = buffer_with (dev, w, dim * 4);
  bb = buffer_with (dev, b, dim * 4);
  yb = buffer_with (dev, x, count * 4);
  ib = buffer_with (dev, idx, sizeof (idx));
  gb = buffer_with (dev, NULL, G_N_ELEMENTS (idx) * dim * 4);
  /* in place, as the encoders run it */
  g_assert_true (npu_ops_layer_norm (ops, yb, 0, wb, 0, bb, 0, yb, 0, dim, n,
          1e-6f, &error));
  for (act = NPU_OP_ACT_NONE; act <= NPU_OP_ACT_GELU_ERF; act++) {
    ab[act] = buffer_with (dev, x, count * 4);
    g_assert_true (npu_ops_bias_act (ops, ab[act], 0, act == NPU_OP_ACT_SILU
            ? NULL : bb, 0, n, dim, act, &error));
  }
  g_assert_true (npu_ops_gather_rows (ops, xb, 0, n, ib, 0, gb, 0,
          G_N_ELEMENTS (idx), dim, &error));
  g_assert_no_error (error);
  run_ops (dev, ops);

  read_back (yb, 0, y, count);
  for (c = 0; c < n; c++) {
    double m = 0, v = 0;

    for (i = 0; i < dim; i++)
      m += x[c * dim + i];
    m /= dim;
    for (i = 0; i < dim; i++)
      v += (x[c * dim + i] - m) * (x[c * dim + i] - m);
    v = 1.0 / sqrt (v / dim + 1e-6);
    for (i = 0; i < dim; i++)
      ref[c * dim + i] = (x[c * dim + i] - m) * v * w[i] + b[i];
  }
  /* normalised values are below sqrt (dim) ~ 18, times |w| < 2 */
  assert_close ("layer_norm", y, ref, NULL, count, 1e-5, 2e-5);
  for (act = NPU_OP_ACT_NONE; act <= NPU_OP_ACT_GELU_ERF; act++) {
    gchar *what = g_strdup_printf ("bias_act %d", act);

    read_back (ab[act], 0, y, count);
    for (i = 0; i < count; i++)
      ref[i] = act_ref (act, (double) x[i] + (act == NPU_OP_ACT_SILU ? 0 :
              b[i % dim]));
    /* exp within GLSL's ulp bound, erf by a polynomial within 1.5e-7 */
    assert_close (what, y, ref, NULL, count, 8e-6, 1e-6);
    g_free (what);
    npu_buffer_unref (ab[act]);
  }
  {
    float *g = g_new (float, G_N_ELEMENTS (idx) * dim);

    read_back (gb, 0, g, G_N_ELEMENTS (idx) * dim);
    for (i = 0; i < G_N_ELEMENTS (idx); i++)
      for (c = 0; c < dim; c++)
        g_assert_cmpfloat (g[i * dim + c], ==, idx[i] < 0 ? 0.0f :
            x[idx[i] * dim + c]);
    g_free (g);
  }

  npu_ops_free (ops);
  npu_buffer_unref (xb);
  npu_buffer_unref (wb);
  npu_buffer_unref (bb);
  npu_buffer_unref (yb);
  npu_buffer_unref (ib);
  npu_buffer_unref (gb);
  g_free (x);
  g_free (w);
  g_free (b);
  g_free (y);
  g_free (ref);
}

/* What the audio encoder adds: a convolution's input rows from a
 * channel-major and a position-major source, and a weighted add */
static void
check_audio_ops (NpuDevice * dev)
{
  gsize in = pick (1, 40), n_in = pick (2, 60), i, t, k, c;
  float *src = g_new (float, n_in * in), *y, *a, *b;
  NpuBuffer *sb, *d1, *d2, *ab, *bb, *ob;
  NpuOps *ops = npu_ops_new (dev);
  GError *error = NULL;
  gsize n1 = n_in, n2 = n_in / 2;
  double *ref;

  for (i = 0; i < n_in * in; i++)
    src[i] = uniform (-3, 3);
  a = g_new (float, n_in * in);
  b = g_new (float, n_in * in);
  for (i = 0; i < n_in * in; i++) {
    a[i] = uniform (-3, 3);
    b[i] = uniform (-3, 3);
  }
  sb = buffer_with (dev, src, n_in * in * 4);
  d1 = buffer_with (dev, NULL, n1 * in * 3 * 4);
  d2 = buffer_with (dev, NULL, n2 * in * 3 * 4);
  ab = buffer_with (dev, a, n_in * in * 4);
  bb = buffer_with (dev, b, n_in * in * 4);
  ob = buffer_with (dev, NULL, n_in * in * 4);
  g_assert_true (npu_ops_im2col3 (ops, sb, 0, n_in, in, TRUE, 1, d1, 0, n1,
          &error));
  g_assert_true (npu_ops_im2col3 (ops, sb, 0, n_in, in, FALSE, 2, d2, 0, n2,
          &error));
  g_assert_true (npu_ops_add_scaled (ops, ab, 0, 0.5f, bb, 0, -1.25f, ob, 0,
          n_in * in, &error));
  g_assert_no_error (error);
  run_ops (dev, ops);

  y = g_new (float, n1 * in * 3);
  for (c = 0; c < 2; c++) {
    gsize n = c ? n2 : n1, stride = c ? 2 : 1;

    read_back (c ? d2 : d1, 0, y, n * in * 3);
    for (t = 0; t < n; t++)
      for (i = 0; i < in; i++)
        for (k = 0; k < 3; k++) {
          gint64 p = (gint64) (t * stride + k) - 1;
          float want = p < 0 || p >= (gint64) n_in ? 0.0f :
              src[c ? p * in + i : i * n_in + p];

          g_assert_cmpfloat (y[(t * in + i) * 3 + k], ==, want);
        }
  }
  ref = g_new (double, n_in * in);
  read_back (ob, 0, y, n_in * in);
  for (i = 0; i < n_in * in; i++)
    ref[i] = 0.5 * a[i] - 1.25 * b[i];
  assert_close ("add_scaled", y, ref, NULL, n_in * in, 0, 4 * 0x1p-22);

  npu_ops_free (ops);
  npu_buffer_unref (sb);
  npu_buffer_unref (d1);
  npu_buffer_unref (d2);
  npu_buffer_unref (ab);
  npu_buffer_unref (bb);
  npu_buffer_unref (ob);
  g_free (src);
  g_free (a);
  g_free (b);
  g_free (y);
  g_free (ref);
}

static void
check_all (NpuDevice * dev)
{
  guint round, n_rounds = g_getenv ("NPU_UNDER_VALGRIND") ? 1 : 3;

  for (round = 0; round < n_rounds; round++) {
    check_products (dev);
    check_norm_softmax (dev);
    check_elementwise (dev);
    check_rope (dev, FALSE);
    check_rope (dev, TRUE);
    check_attention (dev, NPU_KV_F32, TRUE);
    check_attention (dev, NPU_KV_F16, TRUE);
    check_attention (dev, NPU_KV_F32, FALSE);
    /* on the CPU only: the Vulkan device refuses Q8_0 KV (/ops/errors) */
    if (g_str_equal (npu_device_get_kind (dev), "cpu"))
      check_attention (dev, NPU_KV_Q8_0, TRUE);
    check_encoder_ops (dev);
    check_audio_ops (dev);
  }
}

static void
test_cpu (void)
{
  NpuDevice *dev = open_device ("cpu");

  check_all (dev);
  npu_device_unref (dev);
}

static void
test_vulkan (void)
{
  NpuDevice *dev = open_device ("vulkan");

  if (!dev)
    return;
  g_assert_cmpstr (npu_device_get_kind (dev), ==, "vulkan");
  g_test_message ("device: %s", npu_device_get_name (dev));
  check_all (dev);
  npu_device_unref (dev);
}

/* A program is recorded once and replayed: a second run with new inputs
 * gives the new results */
static void
test_vulkan_replay (void)
{
  NpuDevice *dev = open_device ("vulkan");
  float a[300], b[300], y[300];
  NpuBuffer *ab, *bb, *yb;
  NpuOps *ops;
  GError *error = NULL;
  guint run, i;

  if (!dev)
    return;
  ab = buffer_with (dev, NULL, sizeof (a));
  bb = buffer_with (dev, NULL, sizeof (b));
  yb = buffer_with (dev, NULL, sizeof (y));
  ops = npu_ops_new (dev);
  g_assert_true (npu_ops_add (ops, ab, 0, bb, 0, yb, 0, 300, &error));
  g_assert_no_error (error);
  for (run = 0; run < 3; run++) {
    float *pa = npu_buffer_map (ab, NPU_BUFFER_MAP_WRITE, NULL);
    float *pb = npu_buffer_map (bb, NPU_BUFFER_MAP_WRITE, NULL);

    for (i = 0; i < 300; i++) {
      pa[i] = a[i] = i * (run + 1);
      pb[i] = b[i] = 1000 * run;
    }
    npu_buffer_unmap (ab);
    npu_buffer_unmap (bb);
    run_ops (dev, ops);
    read_back (yb, 0, y, 300);
    for (i = 0; i < 300; i++)
      g_assert_cmpfloat (y[i], ==, a[i] + b[i]);
  }
  npu_ops_free (ops);
  npu_buffer_unref (ab);
  npu_buffer_unref (bb);
  npu_buffer_unref (yb);
  npu_device_unref (dev);
}

/* Weights in a host range and an fd are used in place: nothing copied,
 * and the product reads the bytes where they lie */
static void
test_vulkan_import (void)
{
  NpuDevice *dev = open_device ("vulkan");
  gsize rows = 40, k = 64, wbytes, page = sysconf (_SC_PAGESIZE), r, j;
  float wf[40 * 64], x[64], y[40];
  double ref[40], scale[40];
  guint8 *w, *host;
  NpuBuffer *hb, *fb, *xb, *yb;
  NpuOps *ops;
  GError *error = NULL;
  int fd;

  if (!dev)
    return;
  w = random_weights (NPU_OP_WEIGHT_MXFP4, rows, k, wf, &wbytes);
  for (j = 0; j < k; j++)
    x[j] = uniform (-1, 1);
  /* the range starts 5 bytes into a page, as a tensor in a GGUF mapping */
  host = mmap (NULL, 2 * page, PROT_READ | PROT_WRITE,
      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memcpy (host + 5, w, wbytes);
  hb = npu_buffer_import_host (dev, host + 5, wbytes, TRUE, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (npu_buffer_get_bytes_copied (hb), ==, 0);

  fd = memfd_create ("test-ops", MFD_CLOEXEC);
  g_assert_cmpint (pwrite (fd, w, wbytes, 3), ==, (gssize) wbytes);
  fb = npu_buffer_import_fd (dev, fd, 3, wbytes, &error);
  g_assert_no_error (error);
  close (fd);
  g_assert_cmpuint (npu_buffer_get_bytes_copied (fb), ==, 0);

  xb = buffer_with (dev, x, sizeof (x));
  yb = buffer_with (dev, NULL, 2 * sizeof (y));
  ops = npu_ops_new (dev);
  g_assert_true (npu_ops_mul_mat (ops, NPU_OP_WEIGHT_MXFP4, hb, 0, rows, k,
          xb, 0, 1, yb, 0, &error));
  g_assert_true (npu_ops_mul_mat (ops, NPU_OP_WEIGHT_MXFP4, fb, 0, rows, k,
          xb, 0, 1, yb, sizeof (y), &error));
  g_assert_no_error (error);
  /* written after the import: the device reads the range itself */
  memset (host + 5, 0, 17);
  memset (wf, 0, 32 * sizeof (float));
  run_ops (dev, ops);
  for (r = 0; r < rows; r++) {
    ref[r] = scale[r] = 0;
    for (j = 0; j < k; j++) {
      ref[r] += (double) wf[r * k + j] * x[j];
      scale[r] += fabs (wf[r * k + j]);
    }
  }
  read_back (yb, 0, y, rows);
  assert_close ("imported host range", y, ref, scale, rows, 66 * 0x1p-24, 0);

  npu_ops_free (ops);
  npu_buffer_unref (hb);
  npu_buffer_unref (fb);
  npu_buffer_unref (xb);
  npu_buffer_unref (yb);
  munmap (host, 2 * page);
  g_free (w);
  npu_device_unref (dev);
}

/* A buffer larger than the device's memory is refused with an error that
 * says so, not a crash or a driver's undefined behaviour; the device
 * then allocates as before */
static void
test_vulkan_out_of_memory (void)
{
  NpuDevice *dev = open_device ("vulkan");
  GError *error = NULL;
  NpuBuffer *b;

  if (!dev)
    return;
  b = npu_buffer_new (dev, G_MAXSIZE / 4, &error);
  g_assert_null (b);
  g_assert_nonnull (error);
  g_test_message ("%s", error->message);
  if (!strstr (error->message, "does not fit"))
    g_error ("unexpected message: %s", error->message);
  g_clear_error (&error);
  b = npu_buffer_new (dev, 4096, &error);
  g_assert_no_error (error);
  npu_buffer_unref (b);
  npu_device_unref (dev);
}

/* A run that outlasts NPU_VULKAN_TIMEOUT_MS fails its fence with the
 * message, the next run of the same list works once the device is done,
 * and nothing hangs */
static void
test_vulkan_timeout (void)
{
  NpuDevice *dev = open_device ("vulkan");
  gsize rows = 2048, k = 2048;
  NpuBuffer *w, *x, *y;
  NpuOps *ops;
  NpuQueue *queue;
  NpuFence *fence;
  GError *error = NULL;
  guint i;

  if (!dev)
    return;
  w = buffer_with (dev, NULL, rows * k / 32 * 17);
  x = buffer_with (dev, NULL, k * 4);
  y = buffer_with (dev, NULL, rows * 4);
  ops = npu_ops_new (dev);
  /* some 40 M multiply-adds: tens of milliseconds on lavapipe */
  for (i = 0; i < 10; i++)
    g_assert_true (npu_ops_mul_mat (ops, NPU_OP_WEIGHT_MXFP4, w, 0, rows, k,
            x, 0, 1, y, 0, &error));
  queue = npu_queue_new (dev, "test-ops");
  g_setenv ("NPU_VULKAN_TIMEOUT_MS", "1", TRUE);
  fence = npu_ops_submit (ops, queue, NULL, 0);
  g_assert_false (npu_fence_wait (fence, -1, &error));
  g_assert_nonnull (error);
  if (!strstr (error->message, "did not finish 10 dispatches within 1 ms"))
    g_error ("unexpected message: %s", error->message);
  g_clear_error (&error);
  npu_fence_unref (fence);
  g_unsetenv ("NPU_VULKAN_TIMEOUT_MS");
  /* until the device has ended the first run, a second one is refused */
  for (i = 0; i < 200; i++) {
    gboolean ok;

    fence = npu_ops_submit (ops, queue, NULL, 0);
    ok = npu_fence_wait (fence, -1, &error);
    npu_fence_unref (fence);
    if (ok)
      break;
    if (!strstr (error->message, "has still not finished"))
      g_error ("unexpected message: %s", error->message);
    g_clear_error (&error);
    g_usleep (10000);
  }
  g_assert_cmpuint (i, <, 200);
  npu_queue_free (queue);
  npu_ops_free (ops);
  npu_buffer_unref (w);
  npu_buffer_unref (x);
  npu_buffer_unref (y);
  npu_device_unref (dev);
}

static void
expect_error (gboolean ok, GError ** error, const gchar * fragment)
{
  g_assert_false (ok);
  g_assert_nonnull (*error);
  if (!strstr ((*error)->message, fragment))
    g_error ("expected an error with \"%s\", got \"%s\"", fragment,
        (*error)->message);
  g_clear_error (error);
}

static void
test_errors (void)
{
  NpuDevice *cpu = open_device ("cpu"), *vk = NULL;
  NpuBuffer *a = buffer_with (cpu, NULL, 4096), *b;
  NpuOps *ops = npu_ops_new (cpu);
  GError *error = NULL;

  expect_error (npu_ops_add (ops, a, 0, a, 4000, a, 0, 100, &error), &error,
      "outside its 4096-byte buffer");
  expect_error (npu_ops_add (ops, a, 2, a, 0, a, 0, 10, &error), &error,
      "is not at a multiple of 4 bytes");
  expect_error (npu_ops_mul_mat (ops, NPU_OP_WEIGHT_MXFP4, a, 0, 2, 48, a, 0,
          1, a, 0, &error), &error, "k = 48 is not a multiple of 32");
  expect_error (npu_ops_softmax (ops, a, 0, 0, 1, &error), &error,
      "softmax: dim is 0");
  expect_error (npu_ops_attention (ops, a, 0, a, 0, a, 0, NPU_KV_F32, a, 0,
          1, 3, 2, 8, 0, TRUE, 1.0f, &error), &error,
      "3 query heads are not a multiple of 2 KV heads");
  {
    gint32 bad = 7;
    NpuBuffer *ib = buffer_with (cpu, &bad, 4);

    expect_error (npu_ops_gather_rows (ops, a, 0, 7, ib, 0, a, 0, 1, 4,
            &error), &error, "gather_rows: index 0 is 7, past the 7 source "
        "rows");
    npu_buffer_unref (ib);
  }
  g_assert_cmpuint (npu_ops_get_length (ops), ==, 0);

  if (g_strcmp0 (g_getenv ("NPU_REQUIRE_VULKAN"), "1") == 0 ||
      (vk = npu_device_open ("vulkan", 1, NULL))) {
    if (!vk)
      vk = open_device ("vulkan");
    b = buffer_with (vk, NULL, 4096);
    expect_error (npu_ops_add (ops, a, 0, b, 0, a, 0, 10, &error), &error,
        "buffer belongs to vulkan:0");
    npu_ops_free (ops);
    ops = npu_ops_new (vk);
    expect_error (npu_ops_attention (ops, b, 0, b, 0, b, 0, NPU_KV_Q8_0, b,
            0, 1, 1, 1, 32, 0, TRUE, 1.0f, &error), &error,
        "runs F32 and F16 KV caches");
    npu_buffer_unref (b);
    npu_device_unref (vk);
  }
  npu_ops_free (ops);
  npu_buffer_unref (a);
  npu_device_unref (cpu);
}

int
main (int argc, char **argv)
{
  int ret;

  g_test_init (&argc, &argv, NULL);
  /* the validation layer checks the Vulkan calls in the plain run; under
   * valgrind it only multiplies the time */
  if (g_getenv ("NPU_UNDER_VALGRIND"))
    g_setenv ("NPU_VULKAN_VALIDATION", "0", TRUE);
  rng = g_rand_new_with_seed (20261202);
  g_test_add_func ("/ops/cpu", test_cpu);
  g_test_add_func ("/ops/vulkan", test_vulkan);
  g_test_add_func ("/ops/vulkan-replay", test_vulkan_replay);
  g_test_add_func ("/ops/vulkan-import", test_vulkan_import);
  g_test_add_func ("/ops/vulkan-timeout", test_vulkan_timeout);
  g_test_add_func ("/ops/vulkan-out-of-memory", test_vulkan_out_of_memory);
  g_test_add_func ("/ops/errors", test_errors);
  ret = g_test_run ();
  g_rand_free (rng);
  return ret;
}
