/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: audio encoder against a plain double-precision reference
 *
 * Tiny audio mmproj files are written by the model generator (qwen2a and
 * ultravox, 80 and 128 mel bins, each paired with a tiny text model so the
 * projector's output is that model's embedding size) and encoded by
 * npu_audio_enc_encode() and by npu_ref_audio_encode()
 * (tests/reference/npurefaudio.c), a transcription of Hugging Face's
 * Whisper encoder and the two projectors in double precision that shares
 * no code with the runtime except the MXFP4 codec.
 *
 * Tolerances, on max |y - y_ref| / rms (y_ref) over the whole output, as
 * in test-vit.c (same block, same kernels, products of at most 512
 * terms):
 *
 *  - matmul path "scalar" (exact F32): measured ~1e-6; bound 1e-4.
 *  - int8 paths: against the exact reference, the first-order worst case
 *    of the largest product, 0.15 (measured 2-4 %); against a reference
 *    that rounds every activation block entering an MXFP4 product as the
 *    kernels document it, 0.1: rounding ties that land on either side in
 *    F32 and double move a code by one, and each flip moves everything
 *    after it by up to the product's bound; on short windows that stays
 *    below 2.5e-2, on the 30 s window (1500 positions, 48000 outputs, so
 *    many more flips and a larger maximum) it measured 5.0e-2, as far as
 *    from the exact reference: there the modelling no longer tracks.
 *
 * Also: the token counts of llama.cpp for a 30 s window (750 for qwen2a,
 * ceil (1500 / stack) for ultravox), a shorter window giving the leading
 * positions' tokens, bad models and bad input giving the documented
 * GError, 1 and 2 threads giving identical bytes.
 */
#include <core/models/npuaudioenc.h>
#include <core/cpu/npumatmul.h>
#include <core/formats/npugguf.h>
#include "tests/tools/npumodelgen.h"
#include "tests/reference/npurefaudio.h"
#include "npuencodertest.h"

#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

static gchar *tmp_dir;

/* ------------------------------------------------------------------------
 * Models and input
 */
static gchar *
write_text_model (void)
{
  NpuTextModelParams tp;
  GError *error = NULL;
  gchar *path = g_build_filename (tmp_dir, "text.gguf", NULL);

  if (g_file_test (path, G_FILE_TEST_EXISTS))
    return path;
  g_assert_true (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_QWEN2, "tiny",
          &error));
  tp.seed = 7;
  g_assert_true (npu_model_gen_write_text (&tp, path, NULL, &error));
  g_assert_no_error (error);
  return path;
}

static gchar *
write_audio (NpuModelAudioProjector proj, guint n_mels, guint32 wtype,
    const gchar * text_path, const gchar * tag)
{
  NpuAudioMmprojParams ap;
  GError *error = NULL;
  gchar *name = g_strdup_printf ("audio-%s.gguf", tag);
  gchar *path = g_build_filename (tmp_dir, name, NULL);

  g_assert_true (npu_model_gen_audio_preset (&ap, proj, "tiny", &error));
  ap.n_mels = n_mels;
  ap.wtype = wtype;
  ap.seed = 13;
  g_assert_true (npu_model_gen_write_audio_mmproj (&ap, text_path, path,
          NULL, &error));
  g_assert_no_error (error);
  g_free (name);
  return path;
}

/* A normalised log-mel as the front end gives it: ((log10 clamped at
 * max - 8) + 4) / 4 lies in [max' - 2, max'], here about [-0.8, 1.2],
 * with some structure along time so the convolutions see more than
 * noise */
static float *
random_mel (GRand * rand, guint n_mels, guint n_frames)
{
  float *m = g_new (float, (gsize) n_mels * n_frames);
  guint i, t;

  for (i = 0; i < n_mels; i++)
    for (t = 0; t < n_frames; t++)
      m[(gsize) i * n_frames + t] = (float) (0.2 + 0.5 * sin (0.05 * t + i) +
          g_rand_double_range (rand, -0.5, 0.5));
  return m;
}

static gboolean
under_valgrind (void)
{
  return g_getenv ("NPU_UNDER_VALGRIND") != NULL;
}

/* Encode @n_frames with npu_audio_enc_encode() on the current matmul path
 * and compare with the matching reference */
static void
check_model (const gchar * path, guint n_frames, const gchar * what)
{
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  NpuTestLookup lk = { 0, };
  NpuAudioEnc *enc;
  GRand *rand = g_rand_new_with_seed (4321);
  NpuRefLookup ref_lk;
  gsize n_out, n_in, i;
  guint n_tok;
  float *mel, *y;
  double *ref, *md;
  const gchar *isa = npu_matmul_get_isa ();
  gboolean q8 = g_strcmp0 (isa, "scalar") != 0;
  double err, tol = q8 ? 0.1 : 1e-4;

  g_assert_no_error (error);
  lk.gguf = g;
  enc = npu_audio_enc_new (g, npu_test_lookup, &lk, &error);
  g_assert_no_error (error);
  g_assert_nonnull (enc);

  n_tok = npu_audio_enc_get_n_tokens (enc, n_frames);
  g_assert_cmpuint (n_tok, >, 0);
  n_out = (gsize) n_tok *npu_audio_enc_get_out_dim (enc);
  n_in = (gsize) npu_audio_enc_get_n_mels (enc) * n_frames;
  mel = random_mel (rand, npu_audio_enc_get_n_mels (enc), n_frames);
  ref_lk.gguf = g;
  ref_lk.func = npu_test_lookup;
  ref_lk.user_data = &lk;
  y = g_new (float, n_out);
  ref = g_new (double, n_out);
  g_assert_true (npu_audio_enc_encode (enc, NULL, mel, n_frames, y, &error));
  g_assert_no_error (error);

  md = g_new (double, n_in);
  for (i = 0; i < n_in; i++)
    md[i] = mel[i];
  g_assert_cmpuint (npu_ref_audio_encode (&ref_lk, md, n_frames, q8, ref),
      ==, n_tok);
  g_assert_true (npu_ref_error_over_rms (y, ref, n_out, &err));
  if (q8) {
    double *exact = g_new (double, n_out);
    double err_exact;

    npu_ref_audio_encode (&ref_lk, md, n_frames, FALSE, exact);
    g_assert_true (npu_ref_error_over_rms (y, exact, n_out, &err_exact));
    g_test_message ("%s, %u frames [%s]: max err / rms %.2e against the "
        "exact reference (bound 0.15), %.2e against the int8-modelling one "
        "(bound %.0e)", what, n_frames, isa, err_exact, err, tol);
    g_assert_cmpfloat (err_exact, <=, 0.15);
    g_free (exact);
  } else {
    g_test_message ("%s, %u frames [%s]: max err / rms %.2e (bound %.0e)",
        what, n_frames, isa, err, tol);
  }
  g_assert_cmpfloat (err, <=, tol);

  g_free (mel);
  g_free (md);
  g_free (y);
  g_free (ref);
  npu_audio_enc_free (enc);
  npu_gguf_free (g);
  g_rand_free (rand);
}

/* The encoder built for @device_name and @n_frames against the exact
 * reference: within 2e-3 of it (max error over rms) with the CPU's
 * accurate products, 2e-5 with F32 ones elsewhere; twice (the second run
 * a replay).  Skipped where the device is absent, unless
 * NPU_REQUIRE_VULKAN=1. */
static void
check_program (const gchar * path, guint n_frames, const gchar * what,
    const gchar * device_name)
{
  GError *error = NULL;
  NpuDevice *dev = npu_device_open (device_name, 2, &error);
  gboolean cpu = g_str_equal (device_name, "cpu");
  double tol = cpu ? 2e-3 : 2e-5, err;
  NpuTestLookup lk = { 0, };
  NpuAudioEnc *enc;
  NpuAudioEncProgram *prog;
  NpuQueue *queue;
  NpuRefLookup ref_lk;
  GRand *rand = g_rand_new_with_seed (77);
  NpuGguf *g;
  gsize n_out, n_in, i;
  double *exact, *md;
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
    g_clear_error (&error);
    g_rand_free (rand);
    return;
  }
  g = npu_gguf_open (path, &error);
  g_assert_no_error (error);
  lk.gguf = g;
  enc = npu_audio_enc_new (g, npu_test_lookup, &lk, &error);
  g_assert_no_error (error);
  prog = npu_audio_enc_program_new (enc, dev, n_frames, &error);
  g_assert_no_error (error);
  if (cpu)
    g_assert_cmpuint (npu_audio_enc_program_get_bytes_copied (prog), ==, 0);
  n_out = (gsize) npu_audio_enc_get_n_tokens (enc, n_frames) *
      npu_audio_enc_get_out_dim (enc);
  n_in = (gsize) npu_audio_enc_get_n_mels (enc) * n_frames;
  ref_lk.gguf = g;
  ref_lk.func = npu_test_lookup;
  ref_lk.user_data = &lk;
  exact = g_new (double, n_out);
  md = g_new (double, n_in);
  queue = npu_queue_new (dev, "test-audioenc");
  for (run = 0; run < 2; run++) {
    float *mel = random_mel (rand, npu_audio_enc_get_n_mels (enc), n_frames);
    gpointer in = npu_buffer_map (npu_audio_enc_program_get_input (prog),
        NPU_BUFFER_MAP_WRITE, &error);
    NpuFence *fence;
    const float *y;

    g_assert_no_error (error);
    memcpy (in, mel, n_in * sizeof (float));
    npu_buffer_unmap (npu_audio_enc_program_get_input (prog));
    fence = npu_audio_enc_program_submit (prog, queue, NULL, 0);
    if (!npu_fence_wait (fence, -1, &error))
      g_error ("%s on %s: %s", what, device_name, error->message);
    npu_fence_unref (fence);
    for (i = 0; i < n_in; i++)
      md[i] = mel[i];
    npu_ref_audio_encode (&ref_lk, md, n_frames, FALSE, exact);
    y = npu_buffer_map (npu_audio_enc_program_get_output (prog),
        NPU_BUFFER_MAP_READ, &error);
    g_assert_true (npu_ref_error_over_rms (y, exact, n_out, &err));
    npu_buffer_unmap (npu_audio_enc_program_get_output (prog));
    g_test_message ("%s, %u frames [%s program]: max err / rms %.2e (bound "
        "%.0e)", what, n_frames, npu_device_get_name (dev), err, tol);
    g_assert_true (err <= tol);
    g_free (mel);
  }
  npu_queue_free (queue);
  npu_audio_enc_program_free (prog);
  npu_audio_enc_free (enc);
  npu_gguf_free (g);
  npu_device_unref (dev);
  g_free (exact);
  g_free (md);
  g_rand_free (rand);
}

static void
check_model_all_isas (const gchar * path, guint n_frames, const gchar * what)
{
  gchar *saved = g_strdup (npu_matmul_get_isa ());

  g_assert_true (npu_matmul_set_isa ("scalar"));
  check_model (path, n_frames, what);
  g_assert_true (npu_matmul_set_isa (saved));
  if (g_strcmp0 (saved, "scalar") != 0)
    check_model (path, n_frames, what);
  g_free (saved);
}

/* ------------------------------------------------------------------------
 * Tests
 */
static void
test_getters (void)
{
  gchar *text = write_text_model ();
  gchar *q = write_audio (NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 128,
      NPU_GGML_TYPE_F32, text, "get-q");
  gchar *u = write_audio (NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX, 80,
      NPU_GGML_TYPE_MXFP4, text, "get-u");
  GError *error = NULL;
  NpuGguf *tg = npu_gguf_open (text, &error);
  guint32 text_dim = 0;
  NpuAudioEnc *enc;
  gsize owned, borrowed, scratch;

  g_assert_true (npu_gguf_get_u32 (tg, "qwen2.embedding_length", &text_dim,
          &error));

  enc = npu_audio_enc_new_from_file (q, &error);
  g_assert_no_error (error);
  g_assert_cmpint (npu_audio_enc_get_projector (enc), ==,
      NPU_AUDIO_PROJECTOR_QWEN2A);
  g_assert_cmpuint (npu_audio_enc_get_n_mels (enc), ==, 128);
  g_assert_cmpuint (npu_audio_enc_get_sample_rate (enc), ==, 16000);
  g_assert_cmpuint (npu_audio_enc_get_max_frames (enc), ==, 3000);
  /* llama.cpp: 3000 frames -> 1500 positions -> avg pool -> 750 */
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 3000), ==, 750);
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 200), ==, 50);
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 6), ==, 1);
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 3001), ==, 0);
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 3002), ==, 0);
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 0), ==, 0);
  g_assert_cmpuint (npu_audio_enc_get_out_dim (enc), ==, text_dim);
  g_assert_cmpuint (npu_audio_enc_get_dim (enc), ==, 64);
  g_assert_cmpuint (npu_audio_enc_get_n_layers (enc), ==, 2);
  g_assert_cmpuint (npu_audio_enc_get_stack_factor (enc), ==, 1);
  npu_audio_enc_get_memory (enc, &owned, &borrowed, &scratch);
  /* the vectors and conv kernels as F32 copies; the matrices in place,
   * F32 as the file has them */
  g_assert_cmpuint (owned, >, 0);
  g_assert_cmpuint (borrowed, >, 0);
  g_assert_cmpuint (scratch, >, 0);
  npu_audio_enc_free (enc);

  enc = npu_audio_enc_new_from_file (u, &error);
  g_assert_no_error (error);
  g_assert_cmpint (npu_audio_enc_get_projector (enc), ==,
      NPU_AUDIO_PROJECTOR_ULTRAVOX);
  g_assert_cmpuint (npu_audio_enc_get_n_mels (enc), ==, 80);
  g_assert_cmpuint (npu_audio_enc_get_stack_factor (enc), ==, 8);
  /* 1500 positions padded to 1504, 8 a token */
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 3000), ==, 188);
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 16), ==, 1);
  g_assert_cmpuint (npu_audio_enc_get_n_tokens (enc, 18), ==, 2);
  g_assert_cmpuint (npu_audio_enc_get_out_dim (enc), ==, text_dim);
  npu_audio_enc_get_memory (enc, &owned, &borrowed, &scratch);
  /* MXFP4 matrices are used in place, as every other type */
  g_assert_cmpuint (borrowed, >, 0);
  npu_audio_enc_free (enc);

  npu_gguf_free (tg);
  g_unlink (q);
  g_unlink (u);
  g_free (q);
  g_free (u);
  g_free (text);
}

typedef struct
{
  NpuModelAudioProjector proj;
  guint n_mels;
  guint32 wtype;
  guint n_frames;
  const gchar *tag;
} Case;

static const Case cases[] = {
  {NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 128, NPU_GGML_TYPE_F32, 200,
      "qwen2a-f32-128"},
  {NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 80, NPU_GGML_TYPE_F16, 202,
      "qwen2a-f16-80"},
  {NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 128, NPU_GGML_TYPE_MXFP4, 160,
      "qwen2a-mxfp4-128"},
  /* 100 positions: the last token is half zero padding */
  {NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX, 80, NPU_GGML_TYPE_F32, 200,
      "ultravox-f32-80"},
  {NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX, 128, NPU_GGML_TYPE_BF16, 256,
      "ultravox-bf16-128"},
  {NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX, 128, NPU_GGML_TYPE_Q8_0, 96,
      "ultravox-q8-128"},
  /* rows of 64: llama-quantize's fallback, Q5_1 for Q5_K */
  {NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 80, NPU_GGML_TYPE_Q5_K, 160,
      "qwen2a-q5k-80"},
  /* the whole 30 s window of llama.cpp (not under valgrind) */
  {NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 128, NPU_GGML_TYPE_MXFP4, 3000,
      "qwen2a-mxfp4-30s"},
  {NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX, 80, NPU_GGML_TYPE_F16, 3000,
      "ultravox-f16-30s"},
};

static void
test_reference (gconstpointer data)
{
  const Case *c = data;
  gchar *text, *path;

  if (c->n_frames == 3000 && under_valgrind ()) {
    g_test_skip ("the 30 s window is too slow under valgrind");
    return;
  }
  text = write_text_model ();
  path = write_audio (c->proj, c->n_mels, c->wtype, text, c->tag);
  check_model_all_isas (path, c->n_frames, c->tag);
  /* every stored type, BF16 and the block types included, as stored */
  check_program (path, c->n_frames, c->tag, "cpu");
  if (c->n_frames != 3000)
    /* lavapipe takes seconds over the 30 s window */
    check_program (path, c->n_frames, c->tag, "vulkan");
  g_unlink (path);
  g_free (path);
  g_free (text);
}

static gpointer
new_audio_enc (const NpuGguf * gguf, NpuTensorLookup lookup,
    gpointer user_data, GError ** error)
{
  return npu_audio_enc_new (gguf, lookup, user_data, error);
}

static void
expect_error (const NpuGguf * g, NpuTestLookup * lk, gint code,
    const gchar * text)
{
  npu_test_expect_encoder_error (new_audio_enc, g,
      lk ? npu_test_lookup : NULL, lk, code, text);
}

static void
expect_file_error (const gchar * path, gint domain_is_gguf, gint code,
    const gchar * text)
{
  GError *error = NULL;
  NpuAudioEnc *enc = npu_audio_enc_new_from_file (path, &error);

  g_assert_null (enc);
  g_assert_nonnull (error);
  if (domain_is_gguf)
    g_assert_true (error->domain == NPU_GGUF_ERROR);
  else
    g_assert_error (error, NPU_VIT_ERROR, code);
  g_test_message ("%s", error->message);
  if (!strstr (error->message, text))
    g_error ("\"%s\" does not contain \"%s\"", error->message, text);
  g_error_free (error);
}

static void
expect_patched (const gchar * path, const gchar * from, const gchar * to,
    guint nth, gint code, const gchar * text)
{
  npu_test_expect_patched_error (new_audio_enc, path, from, to, nth, code,
      text);
}

static void
test_bad_models (void)
{
  gchar *text = write_text_model ();
  gchar *path = write_audio (NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 80,
      NPU_GGML_TYPE_F32, text, "bad");
  gchar *uv = write_audio (NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX, 80,
      NPU_GGML_TYPE_F32, text, "bad-u");
  gchar *vision = g_build_filename (tmp_dir, "vision.gguf", NULL);
  gchar *trunc = g_build_filename (tmp_dir, "truncated.gguf", NULL);
  GError *error = NULL;
  NpuGguf *g = npu_gguf_open (path, &error);
  NpuTestLookup lk = { 0, };
  gchar *data;
  gsize size;

  g_assert_no_error (error);
  lk.gguf = g;

  /* a text model is not an mmproj; the file name leads the message */
  expect_file_error (text, FALSE, NPU_VIT_ERROR_NOT_MMPROJ,
      "text.gguf: not an mmproj file: general.architecture is \"qwen2\", "
      "expected \"clip\"");

  /* a vision mmproj has no audio encoder */
  {
    NpuMmprojParams mp;

    g_assert_true (npu_model_gen_mmproj_preset (&mp,
            NPU_MODEL_PROJECTOR_MLP, "tiny", &error));
    g_assert_true (npu_model_gen_write_mmproj (&mp, text, vision, NULL,
            &error));
    g_assert_no_error (error);
  }
  expect_file_error (vision, FALSE, NPU_VIT_ERROR_NOT_MMPROJ,
      "not an audio mmproj: clip.has_audio_encoder is not true (a vision "
      "mmproj)");

  /* a truncated file: the GGUF reader's error */
  g_assert_true (g_file_get_contents (path, &data, &size, NULL));
  g_assert_true (g_file_set_contents (trunc, data, size / 2, NULL));
  g_free (data);
  expect_file_error (trunc, TRUE, 0, "truncated.gguf");

  /* missing tensors */
  lk.hide = "a.blk.1.attn_v.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_MISSING,
      "mmproj: tensor a.blk.1.attn_v.weight is missing");
  lk.hide = "a.conv1d.2.bias";
  expect_error (g, &lk, NPU_VIT_ERROR_MISSING,
      "tensor a.conv1d.2.bias is missing");
  lk.hide = "a.position_embd.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_MISSING,
      "tensor a.position_embd.weight is missing");
  lk.hide = "mm.a.fc.bias";
  expect_error (g, &lk, NPU_VIT_ERROR_MISSING,
      "tensor mm.a.fc.bias is missing");
  lk.hide = NULL;

  /* wrong dimensions */
  lk.reshape = "a.conv1d.1.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_SHAPE,
      "tensor a.conv1d.1.weight has ne [3, 40, 64], expected [3, 80, 64]");
  lk.reshape = "a.blk.0.ffn_up.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_SHAPE,
      "tensor a.blk.0.ffn_up.weight has ne [64, 128], expected [64, 256]");
  lk.reshape = NULL;

  /* a type the encoder does not take */
  lk.retype = "a.blk.0.attn_k.weight";
  expect_error (g, &lk, NPU_VIT_ERROR_UNSUPPORTED,
      "tensor a.blk.0.attn_k.weight has type iq4_nl, not one of f32, f16, "
      "bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K, mxfp4");
  lk.retype = NULL;

  /* an unsupported projector is named (the first "qwen2a" is in
   * general.name) */
  expect_patched (path, "qwen2a", "glmaaa", 1, NPU_VIT_ERROR_UNSUPPORTED,
      "audio projector type \"glmaaa\" is not supported (qwen2a, ultravox)");
  /* no audio encoder key at all */
  expect_patched (path, "clip.has_audio_encoder", "clip.has_audio_encodeX",
      0, NPU_VIT_ERROR_NOT_MMPROJ,
      "not an audio mmproj: clip.has_audio_encoder is not true");
  /* required keys */
  expect_patched (path, "clip.audio.num_mel_bins", "clip.audio.num_mel_binX",
      0, NPU_VIT_ERROR_MISSING, "clip.audio.num_mel_bins");
  expect_patched (uv, "clip.audio.projector.stack_factor",
      "clip.audio.projector.stack_facto_", 0, NPU_VIT_ERROR_MISSING,
      "clip.audio.projector.stack_factor");

  npu_gguf_free (g);
  g_unlink (path);
  g_unlink (uv);
  g_unlink (vision);
  g_unlink (trunc);
  g_free (path);
  g_free (uv);
  g_free (vision);
  g_free (trunc);
  g_free (text);
}

/* Bad input to encode(): an odd, zero or too long window */
static void
test_bad_input (void)
{
  gchar *text = write_text_model ();
  gchar *path = write_audio (NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 80,
      NPU_GGML_TYPE_F32, text, "input");
  GError *error = NULL;
  NpuAudioEnc *enc = npu_audio_enc_new_from_file (path, &error);
  float *mel = g_new0 (float, 80 * 3002), out[64];
  const guint bad[] = { 0, 3, 3002 };
  guint i;

  g_assert_no_error (error);
  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_assert_false (npu_audio_enc_encode (enc, NULL, mel, bad[i], out, &error));
    g_assert_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE);
    g_assert_nonnull (strstr (error->message, "expected an even number "
            "from 2 to 3000"));
    g_clear_error (&error);
  }
  g_free (mel);
  npu_audio_enc_free (enc);
  g_unlink (path);
  g_free (path);
  g_free (text);
}

typedef struct
{
  NpuAudioEnc *enc;
  const float *mel;
  guint n_frames;
  float *out;
} EncodeJob;

static gboolean
encode_task (NpuTask * task, gpointer user_data, GError ** error)
{
  EncodeJob *job = user_data;

  return npu_audio_enc_encode (job->enc, task, job->mel, job->n_frames,
      job->out, error);
}

static void
encode_on (NpuAudioEnc * enc, guint n_threads, const float *mel,
    guint n_frames, float *out)
{
  NpuDevice *dev = npu_device_new_cpu (n_threads);
  NpuQueue *queue = npu_queue_new (dev, "audioenc");
  EncodeJob job = { enc, mel, n_frames, out };
  GError *error = NULL;
  NpuFence *fence = npu_queue_submit (queue, encode_task, &job, NULL, NULL,
      0);

  g_assert_true (npu_fence_wait (fence, 120 * G_USEC_PER_SEC, &error));
  g_assert_no_error (error);
  npu_fence_unref (fence);
  npu_queue_free (queue);
  npu_device_unref (dev);
}

/* 1 and 2 threads give the same bytes; a shorter window after a longer
 * one gives the same tokens as on a fresh encoder */
static void
test_threads (void)
{
  gchar *text = write_text_model ();
  const NpuModelAudioProjector projs[] = {
    NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX
  };
  guint r, long_frames = under_valgrind ()? 400 : 3000, short_frames = 300;

  for (r = 0; r < G_N_ELEMENTS (projs); r++) {
    gchar *path = write_audio (projs[r], 128, NPU_GGML_TYPE_MXFP4, text,
        "threads");
    GError *error = NULL;
    NpuAudioEnc *enc = npu_audio_enc_new_from_file (path, &error);
    GRand *rand = g_rand_new_with_seed (5);
    gsize n_long, n_short;
    float *mel, *mel_short, *y0, *y1, *y2, *s0, *s1;
    guint i;

    g_assert_no_error (error);
    n_long = (gsize) npu_audio_enc_get_n_tokens (enc, long_frames) *
        npu_audio_enc_get_out_dim (enc);
    n_short = (gsize) npu_audio_enc_get_n_tokens (enc, short_frames) *
        npu_audio_enc_get_out_dim (enc);
    mel = random_mel (rand, 128, long_frames);
    mel_short = g_new (float, 128 * short_frames);
    for (i = 0; i < 128; i++)
      memcpy (mel_short + i * short_frames, mel + (gsize) i * long_frames,
          short_frames * sizeof (float));
    y0 = g_new (float, n_long);
    y1 = g_new (float, n_long);
    y2 = g_new (float, n_long);
    s0 = g_new (float, n_short);
    s1 = g_new (float, n_short);
    g_assert_true (npu_audio_enc_encode (enc, NULL, mel_short, short_frames,
            s0, &error));
    g_assert_true (npu_audio_enc_encode (enc, NULL, mel, long_frames, y0,
            &error));
    encode_on (enc, 1, mel, long_frames, y1);
    encode_on (enc, 2, mel, long_frames, y2);
    g_assert_cmpmem (y0, n_long * sizeof (float), y1, n_long * sizeof (float));
    g_assert_cmpmem (y1, n_long * sizeof (float), y2, n_long * sizeof (float));
    /* the scratch keeps nothing from the longer window */
    encode_on (enc, 2, mel_short, short_frames, s1);
    g_assert_cmpmem (s0, n_short * sizeof (float), s1,
        n_short * sizeof (float));

    g_free (mel);
    g_free (mel_short);
    g_free (y0);
    g_free (y1);
    g_free (y2);
    g_free (s0);
    g_free (s1);
    g_rand_free (rand);
    npu_audio_enc_free (enc);
    g_unlink (path);
    g_free (path);
  }
  g_free (text);
}

/* A flush while encoding: the encoder stops between blocks with the
 * backend's one cancellation code, NPU_FENCE_ERROR_CANCELLED (npullm
 * skips such tokens), and encodes normally afterwards. */
typedef struct
{
  EncodeJob job;
  gint started;
  GError *error;                /* the encoder's own, before the backend */
} CancelJob;

static gboolean
cancel_task (NpuTask * task, gpointer user_data, GError ** error)
{
  CancelJob *cj = user_data;
  gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;
  gboolean ok;

  g_atomic_int_set (&cj->started, 1);
  while (!npu_task_is_cancelled (task) && g_get_monotonic_time () < end)
    g_usleep (1000);
  ok = npu_audio_enc_encode (cj->job.enc, task, cj->job.mel,
      cj->job.n_frames, cj->job.out, &cj->error);
  if (!ok)
    g_propagate_error (error, g_error_copy (cj->error));
  return ok;
}

static void
test_cancel (void)
{
  gchar *text = write_text_model ();
  gchar *path = write_audio (NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, 80,
      NPU_GGML_TYPE_F32, text, "cancel");
  GError *error = NULL;
  NpuAudioEnc *enc = npu_audio_enc_new_from_file (path, &error);
  GRand *rand = g_rand_new_with_seed (9);
  float *mel = random_mel (rand, 80, 200), *out, *ref;
  gsize n_out;
  NpuDevice *dev = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (dev, "audioenc");
  CancelJob cj;
  NpuFence *fence;

  g_assert_no_error (error);
  n_out = (gsize) npu_audio_enc_get_n_tokens (enc, 200) *
      npu_audio_enc_get_out_dim (enc);
  out = g_new (float, n_out);
  ref = g_new (float, n_out);
  memset (&cj, 0, sizeof (cj));
  cj.job.enc = enc;
  cj.job.mel = mel;
  cj.job.n_frames = 200;
  cj.job.out = out;
  fence = npu_queue_submit (queue, cancel_task, &cj, NULL, NULL, 0);
  while (!g_atomic_int_get (&cj.started))
    g_usleep (1000);
  npu_queue_flush (queue);
  g_assert_error (cj.error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED);
  g_assert_nonnull (strstr (cj.error->message, "audio encoder cancelled"));
  g_assert_false (npu_fence_wait (fence, 0, &error));
  g_assert_error (error, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED);
  g_clear_error (&error);
  g_clear_error (&cj.error);
  npu_fence_unref (fence);

  /* nothing left behind: the next encode is a whole one */
  g_assert_true (npu_audio_enc_encode (enc, NULL, mel, 200, ref, &error));
  encode_on (enc, 1, mel, 200, out);
  g_assert_cmpmem (out, n_out * sizeof (float), ref, n_out * sizeof (float));

  npu_queue_free (queue);
  npu_device_unref (dev);
  g_rand_free (rand);
  g_free (mel);
  g_free (out);
  g_free (ref);
  npu_audio_enc_free (enc);
  g_unlink (path);
  g_free (path);
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
  tmp_dir = g_dir_make_tmp ("test-audioenc-XXXXXX", &error);
  g_assert_no_error (error);

  g_test_add_func ("/audioenc/getters", test_getters);
  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    gchar *name = g_strdup_printf ("/audioenc/reference/%s", cases[i].tag);

    g_test_add_data_func (name, &cases[i], test_reference);
    g_free (name);
  }
  g_test_add_func ("/audioenc/bad-models", test_bad_models);
  g_test_add_func ("/audioenc/bad-input", test_bad_input);
  g_test_add_func ("/audioenc/threads", test_threads);
  g_test_add_func ("/audioenc/cancel", test_cancel);
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
