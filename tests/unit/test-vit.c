/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: vision encoder against a plain double-precision reference
 *
 * Tiny mmproj files are written by the model generator (both projectors,
 * each paired with a tiny text model so the projector's output is that
 * model's embedding size) and encoded by npu_vit_encode() and by
 * npu_ref_vit_encode() (tests/reference/npurefvit.c), a straight
 * transcription of the definitions in double precision that shares no code
 * with the runtime except the MXFP4 codec, so the comparison measures
 * arithmetic, not the 4-bit weights.
 *
 * Tolerances, on max |y - y_ref| / rms (y_ref) over the whole output:
 *
 *  - matmul path "scalar" (exact F32): every operation is an F32 rounding
 *    (2^-24 relative) of a double value; dot products are at most 256
 *    terms, and through two blocks and the projector the measured error
 *    is ~1e-6 of the output's rms.  Bound 1e-4.
 *  - int8 paths (avx2, avx512, neon): npumatmul.h bounds each product's
 *    error by sum_j |w_j| d_b(j) / 2 (+ F32 accumulation), d_b = max|x| / 127
 *    of the activation's block of 32.  For these weights (std 1/sqrt(k))
 *    and activations (block maximum ~3.5 rms) that is at most
 *    0.8 sqrt(k) 3.5 / 254 ~ 9% (k = 64) to 18% (k = 256) of the product's
 *    rms, if every rounding went the same way; random roundings give
 *    ~sqrt(k) times less.  Checked twice:
 *    a) against the exact reference: max error / rms <= 0.15, the
 *       worst-case first-order bound of the largest product (measured:
 *       2-5%);
 *    b) against a reference that does what the kernels are documented to
 *       do, rounding each activation block to d * round (x / d) before
 *       every MXFP4 product: usually ~1e-6, but where F32 and double land
 *       on either side of a rounding tie (x / d within ~1e-6 of a half) a
 *       code differs by one, which moves that output by |w_j| d, itself
 *       within the product's bound; a few such flips per model, propagated,
 *       were measured up to 2.2e-2.  Bound 5e-2.
 *    That is the FAST precision (npu_vit_set_precision()).
 *  - int8 paths with ACCURATE precision (the encoder's default: each
 *    activation block quantised with its int8 residual, npumatmul.h), whose
 *    per-product bound is 254 times smaller: against the exact reference,
 *    the relative norm |y - ref| / |ref| <= 1e-3 (what the element
 *    promises for vision tokens) and max error / rms <= 2e-3 (0.15 / 254
 *    first-order per product is 6e-4; measured 0.8-1.9e-4).
 *
 * Also: bad models give the documented GError (missing tensor, wrong
 * dimension, not an mmproj, unknown projector, unsupported type); 1 and 2
 * threads give identical bytes; a class token (CLIP/LLaVA files) injected
 * through the lookup callback.
 */
#include <core/models/npuvit.h>
#include <core/cpu/npumatmul.h>
#include <core/formats/npumxfp4.h>
#include <core/formats/npugguf.h>
#include "tests/tools/npumodelgen.h"
#include "tests/reference/npurefvit.h"
#include "npuencodertest.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static gchar *tmp_dir;

/* ------------------------------------------------------------------------
 * Lookup wrapper: the file's tensors, with one hidden, one reshaped, one
 * retyped, or a class token added (and the position embeddings grown)
 */
typedef struct
{
  NpuTestLookup base;           /* hide, reshape, retype */
  gboolean add_class;
  gboolean swap_ffn;            /* ffn_up <-> ffn_down, as llama.cpp's
                                 * legacy converter names them */
  float *class_embd;            /* [dim] */
  float *pos;                   /* [dim, n_patches + 1] */
} Lookup;

static gboolean
lookup_func (const gchar * name, NpuTensorView * out, gpointer user_data)
{
  Lookup *lk = user_data;
  const NpuGgufTensor *t;

  if (lk->base.hide && strcmp (name, lk->base.hide) == 0)
    return FALSE;
  if (lk->add_class && strcmp (name, "v.class_embd") == 0) {
    t = npu_gguf_find_tensor (lk->base.gguf, "v.patch_embd.bias");
    memset (out, 0, sizeof (*out));
    out->type = NPU_GGML_TYPE_F32;
    out->n_dims = 1;
    out->ne[0] = t->ne[0];
    out->ne[1] = out->ne[2] = out->ne[3] = 1;
    out->data = lk->class_embd;
    return TRUE;
  }
  if (lk->swap_ffn && (strstr (name, ".ffn_up.") || strstr (name,
              ".ffn_down."))) {
    gchar **parts = g_strsplit (name, ".ffn_", 2);
    gchar *other = g_strconcat (parts[0], g_str_has_prefix (parts[1], "up.") ?
        ".ffn_down." : ".ffn_up.", strchr (parts[1], '.') + 1, NULL);

    t = npu_gguf_find_tensor (lk->base.gguf, other);
    g_free (other);
    g_strfreev (parts);
  } else {
    t = npu_gguf_find_tensor (lk->base.gguf, name);
  }
  if (!t)
    return FALSE;
  npu_test_lookup_fill (&lk->base, name, t, out);
  if (lk->add_class && strcmp (name, "v.position_embd.weight") == 0) {
    out->ne[1] += 1;
    out->data = lk->pos;
  }
  return TRUE;
}

/* ------------------------------------------------------------------------
 * Models
 */
static gchar *
write_text_model (NpuModelArch arch)
{
  NpuTextModelParams tp;
  GError *error = NULL;
  gchar *path = g_build_filename (tmp_dir, arch == NPU_MODEL_ARCH_LLAMA ?
      "text-llama.gguf" : "text-qwen2.gguf", NULL);

  if (g_file_test (path, G_FILE_TEST_EXISTS))
    return path;
  g_assert_true (npu_model_gen_text_preset (&tp, arch, "tiny", &error));
  tp.seed = 7;
  g_assert_true (npu_model_gen_write_text (&tp, path, NULL, &error));
  g_assert_no_error (error);
  return path;
}

static gchar *
write_mmproj (NpuModelProjector proj, guint image, guint patch,
    guint32 wtype, const gchar * text_path, const gchar * tag)
{
  NpuMmprojParams mp;
  GError *error = NULL;
  gchar *name = g_strdup_printf ("mmproj-%s.gguf", tag);
  gchar *path = g_build_filename (tmp_dir, name, NULL);

  g_assert_true (npu_model_gen_mmproj_preset (&mp, proj, "tiny", &error));
  mp.image_size = image;
  mp.patch = patch;
  mp.wtype = wtype;
  mp.seed = 11;
  g_assert_true (npu_model_gen_write_mmproj (&mp, text_path, path, NULL,
          &error));
  g_assert_no_error (error);
  g_free (name);
  return path;
}

static float *
random_patches (GRand * rand, guint n)
{
  float *p = g_new (float, n);
  guint i;

  /* normalised pixels: about [-2, 2] */
  for (i = 0; i < n; i++)
    p[i] = (float) g_rand_double_range (rand, -2.0, 2.0);
  return p;
}

/* Encode with npu_vit_encode() on the current matmul path and compare
 * with the matching reference */
static void
check_model (const gchar * path, Lookup * lk, const gchar * what)
{
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  Lookup plain = { 0, };
  NpuVit *vit;
  GRand *rand = g_rand_new_with_seed (1234);
  NpuRefLookup ref_lk;
  gsize n_out, n_in, i;
  float *patches, *y;
  double *ref, *pd;
  const gchar *isa = npu_matmul_get_isa ();
  gboolean q8 = g_strcmp0 (isa, "scalar") != 0;
  double err, tol = q8 ? 5e-2 : 1e-4;

  g_assert_no_error (error);
  if (!lk) {
    plain.base.gguf = g;
    lk = &plain;
  }
  lk->base.gguf = g;
  vit = npu_vit_new (g, lookup_func, lk, &error);
  g_assert_no_error (error);
  g_assert_nonnull (vit);
  g_assert_cmpint (npu_vit_get_precision (vit), ==,
      NPU_MATMUL_PRECISION_ACCURATE);
  npu_vit_set_precision (vit, NPU_MATMUL_PRECISION_FAST);

  n_out = (gsize) npu_vit_get_n_tokens (vit) * npu_vit_get_out_dim (vit);
  n_in = (gsize) npu_vit_get_n_patches (vit) * npu_vit_get_patch_dim (vit);
  patches = random_patches (rand, n_in);
  ref_lk.gguf = g;
  ref_lk.func = lookup_func;
  ref_lk.user_data = lk;
  y = g_new (float, n_out);
  ref = g_new (double, n_out);
  g_assert_true (npu_vit_encode (vit, NULL, patches, y, &error));
  g_assert_no_error (error);

  pd = g_new (double, n_in);
  for (i = 0; i < n_in; i++)
    pd[i] = patches[i];
  npu_ref_vit_encode (&ref_lk, pd, q8, ref);
  g_assert_true (npu_ref_error_over_rms (y, ref, n_out, &err));
  if (q8) {
    double *exact = g_new (double, n_out);
    double err_exact;

    npu_ref_vit_encode (&ref_lk, pd, FALSE, exact);
    g_assert_true (npu_ref_error_over_rms (y, exact, n_out, &err_exact));
    g_test_message ("%s [%s]: max err / rms %.2e against the exact "
        "reference (bound 0.15), %.2e against the int8-modelling one "
        "(bound %.0e)", what, isa, err_exact, err, tol);
    g_assert_cmpfloat (err_exact, <=, 0.15);

    /* the default, accurate precision */
    {
      double num = 0.0, den = 0.0, rel;

      npu_vit_set_precision (vit, NPU_MATMUL_PRECISION_ACCURATE);
      g_assert_true (npu_vit_encode (vit, NULL, patches, y, &error));
      g_assert_true (npu_ref_error_over_rms (y, exact, n_out, &err_exact));
      for (i = 0; i < n_out; i++) {
        num += (y[i] - exact[i]) * (y[i] - exact[i]);
        den += exact[i] * exact[i];
      }
      rel = sqrt (num / den);
      g_test_message ("%s [%s, accurate]: max err / rms %.2e (bound 2e-3), "
          "relative norm %.2e (bound 1e-3)", what, isa, err_exact, rel);
      g_assert_true (err_exact <= 2e-3);
      g_assert_true (rel <= 1e-3);
      /* the fast one for the check below */
      npu_vit_set_precision (vit, NPU_MATMUL_PRECISION_FAST);
      g_assert_true (npu_vit_encode (vit, NULL, patches, y, &error));
    }
    g_free (exact);
  } else {
    g_test_message ("%s [%s]: max err / rms %.2e (bound %.0e)", what, isa,
        err, tol);
  }
  g_assert_cmpfloat (err, <=, tol);

  g_free (patches);
  g_free (pd);
  g_free (y);
  g_free (ref);
  npu_vit_free (vit);
  npu_gguf_free (g);
  g_rand_free (rand);
}

/* The encoder built for @device_name (npu_vit_program_new()) against the
 * exact reference, with the accurate path's bounds; skipped where the
 * device is absent, unless NPU_REQUIRE_VULKAN=1 */
static void
check_program (const gchar * path, Lookup * lk, const gchar * what,
    const gchar * device_name)
{
  GError *error = NULL;
  NpuDevice *dev = npu_device_open (device_name, 2, &error);
  NpuGguf *g;
  Lookup plain = { 0, };
  NpuVit *vit;
  NpuVitProgram *prog;
  NpuQueue *queue;
  NpuFence *fence;
  GRand *rand = g_rand_new_with_seed (4321);
  NpuRefLookup ref_lk;
  gsize n_out, n_in, i;
  float *patches, *in;
  const float *y;
  double *exact, *pd, err, num = 0.0, den = 0.0, rel;
  /* the CPU's accurate products (~16-bit activations), as for
   * npu_vit_encode(); F32 products elsewhere, a hundred times closer */
  gboolean cpu = g_str_equal (device_name, "cpu");
  double tol_max = cpu ? 2e-3 : 2e-5, tol_rel = cpu ? 1e-3 : 1e-5;
  guint run;

  static guint n_checked_cpu = 0, n_checked_other = 0;

  /* under valgrind (lavapipe there takes minutes a model), one model a
   * device: the memory of the program's code does not depend on it */
  if (dev && g_getenv ("NPU_UNDER_VALGRIND") &&
      (g_str_equal (device_name, "cpu") ? n_checked_cpu++ :
          n_checked_other++) > 0) {
    npu_device_unref (dev);
    g_rand_free (rand);
    return;
  }
  if (!dev) {
    g_assert_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_NOT_FOUND);
    g_assert_cmpstr (g_getenv ("NPU_REQUIRE_VULKAN"), !=, "1");
    g_test_message ("%s: no %s device: %s", what, device_name, error->message);
    g_clear_error (&error);
    g_rand_free (rand);
    return;
  }
  g = npu_gguf_open (path, &error);
  g_assert_no_error (error);
  if (!lk)
    lk = &plain;
  lk->base.gguf = g;
  vit = npu_vit_new (g, lookup_func, lk, &error);
  g_assert_no_error (error);
  prog = npu_vit_program_new (vit, dev, &error);
  g_assert_no_error (error);
  /* everything imported in place on a device that imports host memory */
  if (g_str_equal (device_name, "cpu"))
    g_assert_cmpuint (npu_vit_program_get_bytes_copied (prog), ==, 0);

  n_out = (gsize) npu_vit_get_n_tokens (vit) * npu_vit_get_out_dim (vit);
  n_in = (gsize) npu_vit_get_n_patches (vit) * npu_vit_get_patch_dim (vit);
  ref_lk.gguf = g;
  ref_lk.func = lookup_func;
  ref_lk.user_data = lk;
  exact = g_new (double, n_out);
  pd = g_new (double, n_in);
  queue = npu_queue_new (dev, "test-vit");
  /* twice: the recorded program replays with new patches */
  for (run = 0; run < 2; run++) {
    patches = random_patches (rand, n_in);
    in = npu_buffer_map (npu_vit_program_get_input (prog),
        NPU_BUFFER_MAP_WRITE, &error);
    g_assert_no_error (error);
    memcpy (in, patches, n_in * sizeof (float));
    npu_buffer_unmap (npu_vit_program_get_input (prog));
    fence = npu_vit_program_submit (prog, queue, NULL, 0);
    if (!npu_fence_wait (fence, -1, &error))
      g_error ("%s on %s: %s", what, device_name, error->message);
    npu_fence_unref (fence);

    for (i = 0; i < n_in; i++)
      pd[i] = patches[i];
    npu_ref_vit_encode (&ref_lk, pd, FALSE, exact);
    y = npu_buffer_map (npu_vit_program_get_output (prog),
        NPU_BUFFER_MAP_READ, &error);
    g_assert_true (npu_ref_error_over_rms (y, exact, n_out, &err));
    num = den = 0.0;
    for (i = 0; i < n_out; i++) {
      num += (y[i] - exact[i]) * (y[i] - exact[i]);
      den += exact[i] * exact[i];
    }
    npu_buffer_unmap (npu_vit_program_get_output (prog));
    rel = sqrt (num / den);
    g_test_message ("%s [%s program]: max err / rms %.2e (bound %.0e), "
        "relative norm %.2e (bound %.0e)", what, npu_device_get_name (dev),
        err, tol_max, rel, tol_rel);
    g_assert_true (err <= tol_max);
    g_assert_true (rel <= tol_rel);
    g_free (patches);
  }

  npu_queue_free (queue);
  npu_vit_program_free (prog);
  npu_vit_free (vit);
  npu_gguf_free (g);
  npu_device_unref (dev);
  g_free (exact);
  g_free (pd);
  g_rand_free (rand);
}

/* Every path this CPU has: "scalar" and the default fast one */
static void
check_model_all_isas (const gchar * path, Lookup * lk, const gchar * what)
{
  const gchar *fast = npu_matmul_get_isa ();
  gchar *saved = g_strdup (fast);

  g_assert_true (npu_matmul_set_isa ("scalar"));
  check_model (path, lk, what);
  g_assert_true (npu_matmul_set_isa (saved));
  if (g_strcmp0 (saved, "scalar") != 0)
    check_model (path, lk, what);
  g_free (saved);
}

/* ------------------------------------------------------------------------
 * Tests
 */
static void
test_getters (void)
{
  gchar *text = write_text_model (NPU_MODEL_ARCH_QWEN2);
  gchar *mlp = write_mmproj (NPU_MODEL_PROJECTOR_MLP, 224, 14,
      NPU_GGML_TYPE_F32, text, "get-mlp");
  gchar *ide = write_mmproj (NPU_MODEL_PROJECTOR_IDEFICS3, 224, 14,
      NPU_GGML_TYPE_F16, text, "get-ide");
  GError *error = NULL;
  NpuGguf *tg = npu_gguf_open (text, &error);
  guint32 text_dim = 0;
  NpuVit *vit;
  gfloat mean[3], std[3];
  guint w, h;
  gsize owned, borrowed, scratch;

  g_assert_true (npu_gguf_get_u32 (tg, "qwen2.embedding_length", &text_dim,
          &error));

  vit = npu_vit_new_from_file (mlp, &error);
  g_assert_no_error (error);
  g_assert_cmpint (npu_vit_get_projector (vit), ==, NPU_VIT_PROJECTOR_MLP);
  g_assert_cmpuint (npu_vit_get_image_size (vit), ==, 224);
  g_assert_cmpuint (npu_vit_get_patch_size (vit), ==, 14);
  g_assert_cmpuint (npu_vit_get_n_patches (vit), ==, 256);
  g_assert_cmpuint (npu_vit_get_patch_dim (vit), ==, 588);
  g_assert_cmpuint (npu_vit_get_n_tokens (vit), ==, 256);
  npu_vit_get_token_grid (vit, &w, &h);
  g_assert_cmpuint (w, ==, 16);
  g_assert_cmpuint (h, ==, 16);
  g_assert_cmpuint (npu_vit_get_out_dim (vit), ==, text_dim);
  g_assert_cmpuint (npu_vit_get_dim (vit), ==, 64);
  g_assert_cmpuint (npu_vit_get_n_layers (vit), ==, 2);
  npu_vit_get_mean_std (vit, mean, std);
  g_assert_cmpfloat (mean[0], ==, 0.48145466f);
  g_assert_cmpfloat (std[2], ==, 0.27577711f);
  npu_vit_get_memory (vit, &owned, &borrowed, &scratch);
  /* the vectors (and the patch kernel of p = 14) as F32 copies; the
   * matrices in place, F32 as the file has them */
  g_assert_cmpuint (owned, >, 0);
  g_assert_cmpuint (borrowed, >, 0);
  g_assert_cmpuint (scratch, >, 0);
  npu_vit_free (vit);

  vit = npu_vit_new_from_file (ide, &error);
  g_assert_no_error (error);
  g_assert_cmpint (npu_vit_get_projector (vit), ==, NPU_VIT_PROJECTOR_IDEFICS3);
  g_assert_cmpuint (npu_vit_get_n_tokens (vit), ==, 64);
  npu_vit_get_token_grid (vit, &w, &h);
  g_assert_cmpuint (w, ==, 8);
  g_assert_cmpuint (h, ==, 8);
  g_assert_cmpuint (npu_vit_get_out_dim (vit), ==, text_dim);
  npu_vit_get_mean_std (vit, mean, std);
  g_assert_cmpfloat (mean[1], ==, 0.5f);
  g_assert_cmpfloat (std[1], ==, 0.5f);
  npu_vit_free (vit);

  npu_gguf_free (tg);
  g_unlink (mlp);
  g_unlink (ide);
  g_free (mlp);
  g_free (ide);
  g_free (text);
}

typedef struct
{
  NpuModelProjector proj;
  guint image, patch;
  guint32 wtype;
  const gchar *tag;
} Case;

static const Case cases[] = {
  /* p = 14: 588 is not whole MXFP4 blocks, F32 patch embedding */
  {NPU_MODEL_PROJECTOR_MLP, 56, 14, NPU_GGML_TYPE_F32, "mlp-f32-p14"},
  {NPU_MODEL_PROJECTOR_IDEFICS3, 56, 14, NPU_GGML_TYPE_F16, "ide-f16-p14"},
  /* p = 16: 768 is, MXFP4 patch embedding */
  {NPU_MODEL_PROJECTOR_MLP, 64, 16, NPU_GGML_TYPE_MXFP4, "mlp-mxfp4-p16"},
  {NPU_MODEL_PROJECTOR_IDEFICS3, 64, 16, NPU_GGML_TYPE_Q8_0, "ide-q8-p16"},
  {NPU_MODEL_PROJECTOR_IDEFICS3, 64, 16, NPU_GGML_TYPE_BF16, "ide-bf16-p16"},
  /* rows of 64: llama-quantize's fallback, Q5_0 for Q4_K */
  {NPU_MODEL_PROJECTOR_IDEFICS3, 64, 16, NPU_GGML_TYPE_Q4_K, "ide-q4k-p16"},
  {NPU_MODEL_PROJECTOR_MLP, 64, 16, NPU_GGML_TYPE_Q4_1, "mlp-q41-p16"},
  /* the real token counts: 256 and 64 */
  {NPU_MODEL_PROJECTOR_MLP, 224, 14, NPU_GGML_TYPE_F16, "mlp-f16-224"},
  {NPU_MODEL_PROJECTOR_IDEFICS3, 224, 14, NPU_GGML_TYPE_MXFP4, "ide-mxfp4-224"},
  /* gemma3: 16 x 16 patches pooled 4 x 4 into 16 tokens; 70 px (5 x 5
   * patches) leaves the last row and column out of the one token */
  {NPU_MODEL_PROJECTOR_GEMMA3, 224, 14, NPU_GGML_TYPE_F16, "gemma3-f16-224"},
  {NPU_MODEL_PROJECTOR_GEMMA3, 224, 14, NPU_GGML_TYPE_MXFP4,
      "gemma3-mxfp4-224"},
  {NPU_MODEL_PROJECTOR_GEMMA3, 70, 14, NPU_GGML_TYPE_F32, "gemma3-f32-70"},
};

/* The projectors without a device program say so */
static void
check_no_program (const gchar * path, const gchar * device_name,
    const gchar * message)
{
  GError *error = NULL;
  NpuDevice *dev = npu_device_open (device_name, 2, &error);
  NpuGguf *g;
  NpuVit *vit;

  if (!dev) {
    g_clear_error (&error);
    return;
  }
  g = npu_gguf_open (path, &error);
  g_assert_no_error (error);
  vit = npu_vit_new (g, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_null (npu_vit_program_new (vit, dev, &error));
  g_assert_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_UNSUPPORTED);
  if (!strstr (error->message, message))
    g_error ("unexpected message: %s", error->message);
  g_clear_error (&error);
  npu_vit_free (vit);
  npu_gguf_free (g);
  npu_device_unref (dev);
}

static void
test_reference (gconstpointer data)
{
  const Case *c = data;
  gchar *text = write_text_model (c->proj == NPU_MODEL_PROJECTOR_MLP ?
      NPU_MODEL_ARCH_LLAMA : NPU_MODEL_ARCH_QWEN2);
  gchar *path = write_mmproj (c->proj, c->image, c->patch, c->wtype, text,
      c->tag);

  check_model_all_isas (path, NULL, c->tag);
  if (c->proj == NPU_MODEL_PROJECTOR_GEMMA3) {
    check_no_program (path, "cpu", "the gemma3 projector has no device "
        "program yet");
  } else {
    /* every stored type, BF16 and the block types included, as stored */
    check_program (path, NULL, c->tag, "cpu");
    check_program (path, NULL, c->tag, "vulkan");
  }
  g_unlink (path);
  g_free (path);
  g_free (text);
}

/* CLIP (LLaVA 1.5) files carry a class token in front of the patches */
static void
test_class_token (void)
{
  gchar *text = write_text_model (NPU_MODEL_ARCH_LLAMA);
  gchar *path = write_mmproj (NPU_MODEL_PROJECTOR_MLP, 56, 14,
      NPU_GGML_TYPE_F32, text, "cls");
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  const NpuGgufTensor *pos = npu_gguf_find_tensor (g,
      "v.position_embd.weight");
  Lookup lk = { 0, };
  GRand *rand = g_rand_new_with_seed (99);
  gsize dim = pos->ne[0], n = pos->ne[1], i;

  lk.add_class = TRUE;
  lk.class_embd = g_new (float, dim);
  lk.pos = g_new (float, dim * (n + 1));
  for (i = 0; i < dim; i++)
    lk.class_embd[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
  for (i = 0; i < dim * (n + 1); i++)
    lk.pos[i] = (float) g_rand_double_range (rand, -0.1, 0.1);
  check_model_all_isas (path, &lk, "class token");
  check_program (path, &lk, "class token", "cpu");
  check_program (path, &lk, "class token", "vulkan");

  g_free (lk.class_embd);
  g_free (lk.pos);
  npu_gguf_free (g);
  g_rand_free (rand);
  g_unlink (path);
  g_free (path);
  g_free (text);
}

static gpointer
new_vit (const NpuGguf * gguf, NpuTensorLookup lookup, gpointer user_data,
    GError ** error)
{
  return npu_vit_new (gguf, lookup, user_data, error);
}

static void
expect_error (const NpuGguf * g, Lookup * lk, gint code, const gchar * text)
{
  npu_test_expect_encoder_error (new_vit, g, lk ? lookup_func : NULL, lk,
      code, text);
}

static void
test_bad_models (void)
{
  gchar *text = write_text_model (NPU_MODEL_ARCH_LLAMA);
  gchar *path = write_mmproj (NPU_MODEL_PROJECTOR_IDEFICS3, 56, 14,
      NPU_GGML_TYPE_F32, text, "bad");
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error), *tg;
  Lookup lk = { 0, };

  g_assert_no_error (error);
  lk.base.gguf = g;

  /* a text model is not an mmproj */
  tg = npu_gguf_open (text, &error);
  g_assert_no_error (error);
  expect_error (tg, NULL, NPU_VIT_ERROR_NOT_MMPROJ,
      "not an mmproj file: general.architecture is \"llama\", expected "
      "\"clip\"");
  npu_gguf_free (tg);
  {
    NpuVit *vit = npu_vit_new_from_file (text, &error);
    gchar *base = g_path_get_basename (text);

    g_assert_null (vit);
    g_assert_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_NOT_MMPROJ);
    g_assert_true (g_str_has_prefix (error->message, base));
    g_clear_error (&error);
    g_free (base);
  }

  /* missing tensors */
  lk.base.hide = "v.blk.1.attn_k.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_MISSING,
      "mmproj: tensor v.blk.1.attn_k.weight is missing");
  lk.base.hide = "mm.model.fc.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_MISSING,
      "tensor mm.model.fc.weight is missing");
  lk.base.hide = "v.post_ln.bias";
  expect_error (g, &lk, NPU_VIT_ERROR_MISSING,
      "tensor v.post_ln.bias is missing");
  lk.base.hide = NULL;

  /* wrong dimensions */
  lk.base.reshape = "v.blk.0.ffn_up.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_SHAPE,
      "tensor v.blk.0.ffn_up.weight has ne [64, 128], expected [64, 256]");
  lk.base.reshape = "v.position_embd.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_SHAPE,
      "tensor v.position_embd.weight has ne [64, 8], expected [64, 16]");
  lk.base.reshape = NULL;

  /* a type the encoder does not take */
  lk.base.retype = "v.blk.0.attn_q.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_UNSUPPORTED,
      "tensor v.blk.0.attn_q.weight has type iq4_nl, not one of f32, f16, "
      "bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, mxfp4");
  lk.base.retype = NULL;

  /* an unknown projector type (the first "idefics3" is in general.name) */
  npu_test_expect_patched_error (new_vit, path, "idefics3", "resampl3", 1,
      NPU_VIT_ERROR_UNSUPPORTED,
      "projector type \"resampl3\" is not supported (mlp, idefics3, "
      "qwen2vl_merger, qwen2.5vl_merger, gemma3)");

  /* no vision encoder: clip.has_vision_encoder absent means false */
  npu_test_expect_patched_error (new_vit, path, "clip.has_vision_encoder",
      "clip.has_vision_encodeX", 0, NPU_VIT_ERROR_NOT_MMPROJ,
      "not a vision mmproj: clip.has_vision_encoder is not true");

  /* a required key is absent */
  npu_test_expect_patched_error (new_vit, path,
      "clip.vision.embedding_length", "clip.vision.embedding_lengtX", 0,
      NPU_VIT_ERROR_MISSING, "clip.vision.embedding_length");

  npu_gguf_free (g);
  g_unlink (path);
  g_free (path);
  g_free (text);
}

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

/* Files from llama.cpp's legacy CLIP/LLaVA converter call fc1 (dim -> ff)
 * "ffn_down" and fc2 "ffn_up"; clip.cpp swaps them back by shape, and the
 * encoder must give the same output as for the file named right */
static void
test_swapped_ffn (void)
{
  gchar *text = write_text_model (NPU_MODEL_ARCH_LLAMA);
  gchar *path = write_mmproj (NPU_MODEL_PROJECTOR_MLP, 56, 14,
      NPU_GGML_TYPE_F32, text, "swap");
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  Lookup lk = { 0, };
  NpuVit *plain, *swapped;
  GRand *rand = g_rand_new_with_seed (3);
  gsize n_out;
  float *patches, *y0, *y1;

  g_assert_no_error (error);
  plain = npu_vit_new (g, NULL, NULL, &error);
  g_assert_no_error (error);
  lk.base.gguf = g;
  lk.swap_ffn = TRUE;
  swapped = npu_vit_new (g, lookup_func, &lk, &error);
  g_assert_no_error (error);
  n_out = (gsize) npu_vit_get_n_tokens (plain) * npu_vit_get_out_dim (plain);
  patches = random_patches (rand, npu_vit_get_n_patches (plain) *
      npu_vit_get_patch_dim (plain));
  y0 = g_new (float, n_out);
  y1 = g_new (float, n_out);
  g_assert_true (npu_vit_encode (plain, NULL, patches, y0, &error));
  g_assert_true (npu_vit_encode (swapped, NULL, patches, y1, &error));
  g_assert_cmpmem (y0, n_out * sizeof (float), y1, n_out * sizeof (float));
  /* and the reference reads them the same way */
  check_model (path, &lk, "swapped ffn names");

  g_free (patches);
  g_free (y0);
  g_free (y1);
  npu_vit_free (plain);
  npu_vit_free (swapped);
  npu_gguf_free (g);
  g_rand_free (rand);
  g_unlink (path);
  g_free (path);
  g_free (text);
}

static void
encode_on (NpuVit * vit, guint n_threads, const float *patches, float *out)
{
  NpuDevice *dev = npu_device_new_cpu (n_threads);
  NpuQueue *queue = npu_queue_new (dev, "vit");
  EncodeJob job = { vit, patches, out };
  GError *error = NULL;
  NpuFence *fence = npu_queue_submit (queue, encode_task, &job, NULL, NULL,
      0);

  g_assert_true (npu_fence_wait (fence, 60 * G_USEC_PER_SEC, &error));
  g_assert_no_error (error);
  npu_fence_unref (fence);
  npu_queue_free (queue);
  npu_device_unref (dev);
}

static void
test_threads (void)
{
  gchar *text = write_text_model (NPU_MODEL_ARCH_QWEN2);
  const struct
  {
    NpuModelProjector proj;
    guint patch;
    guint32 wtype;
  } runs[] = {
    {NPU_MODEL_PROJECTOR_MLP, 14, NPU_GGML_TYPE_F16},
    {NPU_MODEL_PROJECTOR_IDEFICS3, 16, NPU_GGML_TYPE_MXFP4},
  };
  guint r;

  for (r = 0; r < G_N_ELEMENTS (runs); r++) {
    gchar *path = write_mmproj (runs[r].proj, runs[r].patch * 8,
        runs[r].patch, runs[r].wtype, text, "threads");
    GError *error = NULL;
    NpuVit *vit = npu_vit_new_from_file (path, &error);
    GRand *rand = g_rand_new_with_seed (5);
    gsize n_out;
    float *patches, *y0, *y1, *y2;

    g_assert_no_error (error);
    n_out = (gsize) npu_vit_get_n_tokens (vit) * npu_vit_get_out_dim (vit);
    patches = random_patches (rand, npu_vit_get_n_patches (vit) *
        npu_vit_get_patch_dim (vit));
    y0 = g_new (float, n_out);
    y1 = g_new (float, n_out);
    y2 = g_new (float, n_out);
    g_assert_true (npu_vit_encode (vit, NULL, patches, y0, &error));
    encode_on (vit, 1, patches, y1);
    encode_on (vit, 2, patches, y2);
    g_assert_cmpmem (y0, n_out * sizeof (float), y1, n_out * sizeof (float));
    g_assert_cmpmem (y1, n_out * sizeof (float), y2, n_out * sizeof (float));
    /* and again: the scratch buffers keep nothing from one frame */
    encode_on (vit, 2, patches, y2);
    g_assert_cmpmem (y1, n_out * sizeof (float), y2, n_out * sizeof (float));

    g_free (patches);
    g_free (y0);
    g_free (y1);
    g_free (y2);
    g_rand_free (rand);
    npu_vit_free (vit);
    g_unlink (path);
    g_free (path);
  }
  g_free (text);
}

int
main (int argc, char **argv)
{
  GError *error = NULL;
  guint i;
  int ret;

  g_test_init (&argc, &argv, NULL);
  /* the validation layer checks the Vulkan calls in the plain run; under
   * valgrind it only multiplies the time */
  if (g_getenv ("NPU_UNDER_VALGRIND"))
    g_setenv ("NPU_VULKAN_VALIDATION", "0", TRUE);
  tmp_dir = g_dir_make_tmp ("test-vit-XXXXXX", &error);
  g_assert_no_error (error);

  g_test_add_func ("/vit/getters", test_getters);
  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    gchar *name = g_strdup_printf ("/vit/reference/%s", cases[i].tag);

    g_test_add_data_func (name, &cases[i], test_reference);
    g_free (name);
  }
  g_test_add_func ("/vit/class-token", test_class_token);
  g_test_add_func ("/vit/swapped-ffn", test_swapped_ffn);
  g_test_add_func ("/vit/bad-models", test_bad_models);
  g_test_add_func ("/vit/threads", test_threads);
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
