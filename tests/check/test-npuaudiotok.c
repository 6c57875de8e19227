/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npuaudiotok element tests
 *
 * The tokens the element gives for a clip are compared with a double
 * precision evaluation of the whole path written for the tests, sharing no
 * code with the element or the core: the log-mel of
 * tests/reference/npureflogmel.c and the encoder and projector of
 * tests/reference/npurefaudio.c, on the samples the chunk should hold,
 * with the matrix products on the exact (scalar) path.  Chunking,
 * overlap, the voice gate, timestamps, buffer sizes, rates and channels,
 * the NPU memory upstream writes into, copies, drops, flushing and bad
 * input are checked here.
 */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>
#include <gst/audio/audio.h>

#include "npucheck.h"
#include "npuencodercheck.h"
#include "npuinputwatch.h"
#include <gst/check/gstharness.h>
#include <npu/npu.h>
#include <core/models/npuaudioenc.h>
#include <core/formats/npugguf.h>
#include <core/cpu/npumatmul.h>
#include "../reference/npurefaudio.h"
#include "../reference/npureflogmel.h"
#include "../reference/npurefvit.h"
#include "../tools/npumodelgen.h"
#include "../npuencbytes.h"
#include "tests/npucompare.h"

static gchar *tmpdir, *text_path, *audio_path, *vision_path;

static void
setup (void)
{
  NpuTextModelParams tp;
  NpuMmprojParams mp;
  NpuAudioMmprojParams ap;
  GError *error = NULL;

  npu_check_load_plugins ();
  tmpdir = g_dir_make_tmp ("npuaudiotok-XXXXXX", NULL);
  text_path = g_build_filename (tmpdir, "text.gguf", NULL);
  audio_path = g_build_filename (tmpdir, "audio.gguf", NULL);
  vision_path = g_build_filename (tmpdir, "vision.gguf", NULL);
  fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_QWEN2, "tiny",
          &error));
  fail_unless (npu_model_gen_write_text (&tp, text_path, NULL, &error));
  fail_unless (npu_model_gen_audio_preset (&ap,
          NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, "tiny", &error), "%s",
      error ? error->message : "");
  fail_unless (npu_model_gen_write_audio_mmproj (&ap, text_path, audio_path,
          NULL, &error), "%s", error ? error->message : "");
  fail_unless (npu_model_gen_mmproj_preset (&mp, NPU_MODEL_PROJECTOR_MLP,
          "tiny", &error));
  fail_unless (npu_model_gen_write_mmproj (&mp, text_path, vision_path, NULL,
          &error), "%s", error ? error->message : "");
}

static void
teardown (void)
{
  g_unlink (text_path);
  g_unlink (audio_path);
  g_unlink (vision_path);
  g_rmdir (tmpdir);
  g_free (text_path);
  g_free (audio_path);
  g_free (vision_path);
  g_free (tmpdir);
}

/* ------------------------------------------------------------------------
 * Signals and the reference
 */

/* Speech-like test audio at 16 kHz: tones and a chirp below 7 kHz (inside
 * the resampler's pass band), phrases separated by nothing. */
static float *
make_clip (gsize n, guint seed)
{
  float *s = g_new (float, n);
  GRand *rand = g_rand_new_with_seed (seed);
  double f1 = g_rand_double_range (rand, 150, 400);
  gsize i;

  for (i = 0; i < n; i++) {
    double t = i / 16000.0;

    s[i] = 0.25 * sin (2 * M_PI * f1 * t) +
        0.15 * sin (2 * M_PI * (500.0 + 700.0 * t) * t) +
        0.05 * sin (2 * M_PI * 3300.0 * t + 1.0) +
        0.02 * sin (2 * M_PI * 6100.0 * t);
  }
  g_rand_free (rand);
  return s;
}

/* Band-limited value of the same signal at any time (seconds). */
static double
clip_at (double t, guint seed)
{
  GRand *rand = g_rand_new_with_seed (seed);
  double f1 = g_rand_double_range (rand, 150, 400);

  g_rand_free (rand);
  return 0.25 * sin (2 * M_PI * f1 * t) +
      0.15 * sin (2 * M_PI * (500.0 + 700.0 * t) * t) +
      0.05 * sin (2 * M_PI * 3300.0 * t + 1.0) +
      0.02 * sin (2 * M_PI * 6100.0 * t);
}

typedef struct
{
  NpuGguf *gguf;
  NpuRefLookup lk;
  guint n_frames, n_tokens, dim, n_mels;
  gchar *isa;
} Ref;

/* The reference for chunks of @chunk; the element's matrix products are
 * put on the exact path the reference models without rounding. */
static void
ref_init (Ref * ref, const gchar * path, GstClockTime chunk)
{
  NpuAudioEnc *enc;
  GError *error = NULL;

  ref->gguf = npu_gguf_open (path, &error);
  fail_unless (ref->gguf != NULL, "%s", error ? error->message : "");
  ref->lk.gguf = ref->gguf;
  ref->lk.func = NULL;
  ref->lk.user_data = NULL;
  /* sizes only: the tokens come from the reference */
  enc = npu_audio_enc_new (ref->gguf, NULL, NULL, &error);
  fail_unless (enc != NULL, "%s", error ? error->message : "");
  ref->n_frames = MIN (gst_util_uint64_scale (chunk, 100, GST_SECOND) & ~1u,
      npu_audio_enc_get_max_frames (enc));
  ref->n_tokens = npu_audio_enc_get_n_tokens (enc, ref->n_frames);
  ref->dim = npu_audio_enc_get_out_dim (enc);
  ref->n_mels = npu_audio_enc_get_n_mels (enc);
  npu_audio_enc_free (enc);
  ref->isa = g_strdup (npu_matmul_get_isa ());
  fail_unless (npu_matmul_set_isa ("scalar"));
}

/* The tokens of the chunk holding @s[0..@n), in double. */
static double *
ref_tokens (Ref * ref, const float *s, gsize n)
{
  double *mel = npu_ref_log_mel (s, n, ref->n_frames, ref->n_mels);
  double *out = g_new (double, (gsize) ref->n_tokens * ref->dim);

  fail_unless_equals_int (npu_ref_audio_encode (&ref->lk, mel, ref->n_frames,
          FALSE, out), ref->n_tokens);
  g_free (mel);
  return out;
}

static void
ref_clear (Ref * ref)
{
  fail_unless (npu_matmul_set_isa (ref->isa));
  g_free (ref->isa);
  npu_gguf_free (ref->gguf);
}

/* ------------------------------------------------------------------------
 * Running the element
 */
static guint64
get_u64 (GstHarness * h, const gchar * name)
{
  GstElement *tok = gst_harness_find_element (h, "npuaudiotok");
  guint64 v;

  fail_unless (tok != NULL);
  g_object_get (tok, name, &v, NULL);
  gst_object_unref (tok);
  return v;
}

static GstHarness *
make_harness (const gchar * props, const gchar * caps)
{
  gchar *desc = g_strdup_printf ("npuaudiotok model=%s n-threads=1 %s",
      audio_path, props);
  GstHarness *h = gst_harness_new_parse (desc);

  g_free (desc);
  gst_harness_set_src_caps_str (h, caps);
  return h;
}

/* Pushes @n frames of @bpf bytes at @rate in buffers of @per frames. */
static void
push_pcm (GstHarness * h, const guint8 * pcm, gsize n, gsize bpf, gint rate,
    gsize per)
{
  gsize off;

  for (off = 0; off < n; off += per) {
    gsize k = MIN (per, n - off);
    GstBuffer *buf = gst_harness_create_buffer (h, k * bpf);

    gst_buffer_fill (buf, 0, pcm + off * bpf, k * bpf);
    GST_BUFFER_PTS (buf) = gst_util_uint64_scale (off, GST_SECOND, rate);
    GST_BUFFER_DURATION (buf) = gst_util_uint64_scale (off + k, GST_SECOND,
        rate) - GST_BUFFER_PTS (buf);
    fail_unless_equals_int (gst_harness_push (h, buf), GST_FLOW_OK);
  }
}

typedef struct
{
  GPtrArray *tokens;            /* float arrays */
  GArray *pts, *dur;
  guint n_tokens, dim;
} Out;

static void
collect (GstHarness * h, Out * out)
{
  GstBuffer *buf;

  fail_unless (gst_harness_push_event (h, gst_event_new_eos ()));
  out->tokens = g_ptr_array_new_with_free_func (g_free);
  out->pts = g_array_new (FALSE, FALSE, sizeof (GstClockTime));
  out->dur = g_array_new (FALSE, FALSE, sizeof (GstClockTime));
  while ((buf = gst_harness_try_pull (h))) {
    GstNpuTokensMeta *meta = gst_buffer_get_npu_tokens_meta (buf);
    GstMapInfo map;

    fail_unless (meta != NULL);
    fail_unless (gst_buffer_get_npu_fence_meta (buf) != NULL);
    fail_unless_equals_int (meta->modality, GST_NPU_MODALITY_AUDIO);
    fail_unless_equals_uint64 (meta->source_pts, GST_BUFFER_PTS (buf));
    fail_unless_equals_uint64 (meta->source_duration,
        GST_BUFFER_DURATION (buf));
    out->n_tokens = meta->n_tokens;
    out->dim = meta->dim;
    fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
    fail_unless_equals_uint64 (map.size,
        (gsize) meta->n_tokens * meta->dim * sizeof (float));
    g_ptr_array_add (out->tokens, g_memdup2 (map.data, map.size));
    gst_buffer_unmap (buf, &map);
    g_array_append_val (out->pts, GST_BUFFER_PTS (buf));
    g_array_append_val (out->dur, GST_BUFFER_DURATION (buf));
    gst_buffer_unref (buf);
  }
}

static void
out_clear (Out * out)
{
  g_ptr_array_unref (out->tokens);
  g_array_unref (out->pts);
  g_array_unref (out->dur);
}

#define OUT_PTS(o,i) g_array_index ((o)->pts, GstClockTime, (i))
#define OUT_DUR(o,i) g_array_index ((o)->dur, GstClockTime, (i))

static Out
run_f32 (const gchar * props, const float *s, gsize n, gsize per)
{
  GstHarness *h = make_harness (props, "audio/x-raw,format=F32LE,"
      "layout=interleaved,rate=16000,channels=1");
  Out out;

  push_pcm (h, (const guint8 *) s, n, 4, 16000, per);
  collect (h, &out);
  gst_harness_teardown (h);
  return out;
}

static double
tokens_error (const float *y, const double *ref, gsize n)
{
  double err = 0;

  fail_unless (npu_ref_error_over_rms (y, ref, n, &err), "not finite");
  return err;
}

/* ------------------------------------------------------------------------
 * Tokens
 */

/* Max error over rms between the element's tokens and the double
 * reference, on the scalar matmul path: the log-mels differ by up to
 * 3e-5 (float FFT against double DFT), the encoder adds ~1e-6
 * (tests/unit/test-audioenc.c); measured 6e-6 to 1e-5. */
#define TOKENS_TOL 1e-4

GST_START_TEST (test_tokens_reference)
{
  const gsize n = 40000;        /* 2.5 s: two chunks of 1 s and a half */
  float *s = make_clip (n, 1);
  Ref ref;
  Out out;
  guint c;

  ref_init (&ref, audio_path, GST_SECOND);
  out = run_f32 ("vad=false chunk-duration=1000000000", s, n, 1600);
  fail_unless_equals_int (out.tokens->len, 3);
  fail_unless_equals_int (out.n_tokens, ref.n_tokens);
  fail_unless_equals_int (out.dim, ref.dim);
  for (c = 0; c < 3; c++) {
    gsize from = c * 16000, len = MIN (16000, n - from);
    double *r = ref_tokens (&ref, s + from, len), err;

    err = tokens_error (g_ptr_array_index (out.tokens, c), r,
        (gsize) ref.n_tokens * ref.dim);
    GST_INFO ("chunk %u: error over rms %g", c, err);
    fail_unless (err <= TOKENS_TOL, "chunk %u: error %g", c, err);
    /* the audio the chunk covers */
    fail_unless_equals_uint64 (OUT_PTS (&out, c), c * GST_SECOND);
    fail_unless_equals_uint64 (OUT_DUR (&out, c),
        gst_util_uint64_scale (len, GST_SECOND, 16000));
    g_free (r);
  }
  out_clear (&out);
  ref_clear (&ref);
  g_free (s);
}

GST_END_TEST;

/* A buffer flagged DISCONT, or a PTS more than 20 ms from where the
 * samples say, ends the chunk there and starts a new clip: 0.5 s, then
 * 1 s after the break, give a partial chunk of the first 0.5 s and a
 * chunk of the next second, each the reference's tokens for those
 * samples alone, stamped where they were */
GST_START_TEST (test_discont_starts_clip)
{
  const gsize n = 24000;
  float *s = make_clip (n, 3);
  Ref ref;
  guint variant;
  double *ra, *rb;

  ref_init (&ref, audio_path, GST_SECOND);
  ra = ref_tokens (&ref, s, 8000);
  rb = ref_tokens (&ref, s + 8000, 16000);
  for (variant = 0; variant < 2; variant++) {
    /* 0: a jump of the PTS to 3 s; 1: DISCONT, the PTS where it was */
    GstClockTime b_start = variant == 0 ? 3 * GST_SECOND : GST_SECOND / 2;
    GstHarness *h = make_harness ("vad=false chunk-duration=1000000000",
        "audio/x-raw,format=F32LE,layout=interleaved,rate=16000,channels=1");
    gsize off;
    Out out;
    double err;

    for (off = 0; off < n; off += 1600) {
      GstBuffer *buf = gst_harness_create_buffer (h, 1600 * 4);

      gst_buffer_fill (buf, 0, s + off, 1600 * 4);
      if (off < 8000)
        GST_BUFFER_PTS (buf) = gst_util_uint64_scale (off, GST_SECOND, 16000);
      else
        GST_BUFFER_PTS (buf) = b_start + gst_util_uint64_scale (off - 8000,
            GST_SECOND, 16000);
      GST_BUFFER_DURATION (buf) = GST_SECOND / 10;
      if (variant == 1 && off == 8000)
        GST_BUFFER_FLAG_SET (buf, GST_BUFFER_FLAG_DISCONT);
      fail_unless_equals_int (gst_harness_push (h, buf), GST_FLOW_OK);
    }
    collect (h, &out);
    gst_harness_teardown (h);
    fail_unless_equals_int (out.tokens->len, 2);
    err = tokens_error (g_ptr_array_index (out.tokens, 0), ra,
        (gsize) ref.n_tokens * ref.dim);
    fail_unless (npu_within (err, TOKENS_TOL), "variant %u, before the "
        "break: error %g", variant, err);
    err = tokens_error (g_ptr_array_index (out.tokens, 1), rb,
        (gsize) ref.n_tokens * ref.dim);
    fail_unless (npu_within (err, TOKENS_TOL), "variant %u, after the "
        "break: error %g", variant, err);
    fail_unless_equals_uint64 (OUT_PTS (&out, 0), 0);
    fail_unless_equals_uint64 (OUT_DUR (&out, 0), GST_SECOND / 2);
    fail_unless_equals_uint64 (OUT_PTS (&out, 1), b_start);
    fail_unless_equals_uint64 (OUT_DUR (&out, 1), GST_SECOND);
    out_clear (&out);
  }
  g_free (ra);
  g_free (rb);
  ref_clear (&ref);
  g_free (s);
}

GST_END_TEST;

/* precision=accurate (the default) against fast on the machine's own
 * integer path (the other tests run the exact scalar one): both within
 * their bounds of the double reference, accurate the closer.  2e-3 is
 * npuvisiontok's bound for accurate tokens; fast (int8, as llama.cpp)
 * measured 2-3e-2 here, bounded by the int8 step's 0.15.  The precisions
 * differ for MXFP4 matrices (the file of the other tests is F32, whose
 * products keep F32 activations either way), so this test writes its own
 * MXFP4 file. */
GST_START_TEST (test_precision)
{
  const gsize n = 16000;
  float *s = make_clip (n, 1);
  gchar *f32_path = audio_path;
  NpuAudioMmprojParams ap;
  GError *error = NULL;
  const gchar *props[2] = {
    "vad=false chunk-duration=1000000000 precision=accurate",
    "vad=false chunk-duration=1000000000 precision=fast"
  };
  double err[2], *r;
  Ref ref;
  guint i;

  audio_path = g_build_filename (tmpdir, "audio-mxfp4.gguf", NULL);
  fail_unless (npu_model_gen_audio_preset (&ap,
          NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, "tiny", &error));
  ap.wtype = NPU_GGML_TYPE_MXFP4;
  fail_unless (npu_model_gen_write_audio_mmproj (&ap, text_path, audio_path,
          NULL, &error), "%s", error ? error->message : "");

  ref_init (&ref, audio_path, GST_SECOND);
  r = ref_tokens (&ref, s, n);
  fail_unless (npu_matmul_set_isa (ref.isa));
  for (i = 0; i < 2; i++) {
    Out out = run_f32 (props[i], s, n, 1600);

    fail_unless_equals_int (out.tokens->len, 1);
    err[i] = tokens_error (g_ptr_array_index (out.tokens, 0), r,
        (gsize) ref.n_tokens * ref.dim);
    GST_INFO ("%s on %s: error over rms %g", props[i], ref.isa, err[i]);
    out_clear (&out);
  }
  fail_unless (npu_within (err[0], 2e-3), "accurate: error %g", err[0]);
  fail_unless (npu_within (err[1], 0.15), "fast: error %g", err[1]);
  if (g_strcmp0 (ref.isa, "scalar") != 0)
    fail_unless (err[0] < err[1], "accurate %g not closer than fast %g",
        err[0], err[1]);
  fail_unless (npu_matmul_set_isa ("scalar"));
  g_free (r);
  ref_clear (&ref);
  g_free (s);
  g_unlink (audio_path);
  g_free (audio_path);
  audio_path = f32_path;
}

GST_END_TEST;

GST_START_TEST (test_overlap)
{
  const gsize n = 32000;        /* 2 s, chunks of 1 s every 0.75 s */
  float *s = make_clip (n, 2);
  Ref ref;
  Out out;
  guint c;

  ref_init (&ref, audio_path, GST_SECOND);
  out = run_f32 ("vad=false chunk-duration=1000000000 overlap=250000000", s,
      n, 320);
  fail_unless_equals_int (out.tokens->len, 3);
  for (c = 0; c < 3; c++) {
    gsize from = c * 12000, len = MIN (16000, n - from);
    double *r = ref_tokens (&ref, s + from, len), err;

    err = tokens_error (g_ptr_array_index (out.tokens, c), r,
        (gsize) ref.n_tokens * ref.dim);
    fail_unless (err <= TOKENS_TOL, "chunk %u: error %g", c, err);
    fail_unless_equals_uint64 (OUT_PTS (&out, c), c * 750 * GST_MSECOND);
    g_free (r);
  }
  out_clear (&out);
  ref_clear (&ref);
  g_free (s);
}

GST_END_TEST;

/* 10 ms or 1 s buffers: the same samples, the same tokens, bit for bit */
GST_START_TEST (test_buffer_sizes)
{
  const gsize n = 24000;
  float *s = make_clip (n, 3);
  Out a, b;
  guint c;

  a = run_f32 ("vad=false chunk-duration=1000000000", s, n, 160);
  b = run_f32 ("vad=false chunk-duration=1000000000", s, n, 16000);
  fail_unless_equals_int (a.tokens->len, 2);
  fail_unless_equals_int (b.tokens->len, 2);
  for (c = 0; c < 2; c++) {
    fail_unless (memcmp (g_ptr_array_index (a.tokens, c),
            g_ptr_array_index (b.tokens, c),
            (gsize) a.n_tokens * a.dim * sizeof (float)) == 0, "chunk %u", c);
    fail_unless_equals_uint64 (OUT_PTS (&a, c), OUT_PTS (&b, c));
    fail_unless_equals_uint64 (OUT_DUR (&a, c), OUT_DUR (&b, c));
  }
  out_clear (&a);
  out_clear (&b);
  g_free (s);
}

GST_END_TEST;

/* 44.1 kHz stereo S16LE against 16 kHz mono F32 of the same band-limited
 * sound: measured 1.6-1.8 % (max error over rms), the same with F32LE
 * input, so it is the resampler's (its filter rings where the stream
 * starts and ends abruptly, and the log-mel's maximum is taken near
 * there), not S16's.  Bound 5 %; a channel dropped from the mix or a
 * resampler without its tail gives far more. */
#define RATES_TOL 5e-2

GST_START_TEST (test_44k_stereo)
{
  const gsize n16 = 32000, n44 = 88200;
  float *s = make_clip (n16, 4);
  gint16 *pcm = g_new (gint16, n44 * 2);
  GstHarness *h;
  Ref ref;
  Out a, b;
  guint c;
  gsize i;

  for (i = 0; i < n44; i++) {
    double v = clip_at (i / 44100.0, 4);

    /* left and right differ; their mean is the mono signal */
    pcm[2 * i] = (gint16) lrint (32767.0 * (v * 1.5 - 0.05 * sin (i * 0.01)));
    pcm[2 * i + 1] = (gint16) lrint (32767.0 * (v * 0.5 + 0.05 *
            sin (i * 0.01)));
  }
  ref_init (&ref, audio_path, GST_SECOND);
  a = run_f32 ("vad=false chunk-duration=1000000000", s, n16, 1600);
  h = make_harness ("vad=false chunk-duration=1000000000",
      "audio/x-raw,format=S16LE,layout=interleaved,rate=44100,channels=2,"
      "channel-mask=(bitmask)0x3");
  push_pcm (h, (const guint8 *) pcm, n44, 4, 44100, 441);
  collect (h, &b);
  gst_harness_teardown (h);
  /* and through the resampler too, 10 ms or 1 s buffers give the same
   * tokens, bit for bit.  Not under valgrind (NPU_UNDER_VALGRIND): the
   * 10 ms buffers above already ran the resampler across a buffer's end
   * a hundred times, and 1 s buffers run the same loops longer;
   * test_buffer_sizes keeps its two sizes there. */
  if (!g_getenv ("NPU_UNDER_VALGRIND")) {
    Out c1;

    h = make_harness ("vad=false chunk-duration=1000000000",
        "audio/x-raw,format=S16LE,layout=interleaved,rate=44100,channels=2,"
        "channel-mask=(bitmask)0x3");
    push_pcm (h, (const guint8 *) pcm, n44, 4, 44100, 44100);
    collect (h, &c1);
    gst_harness_teardown (h);
    fail_unless_equals_int (c1.tokens->len, b.tokens->len);
    for (c = 0; c < b.tokens->len; c++)
      fail_unless (memcmp (g_ptr_array_index (b.tokens, c),
              g_ptr_array_index (c1.tokens, c),
              (gsize) b.n_tokens * b.dim * sizeof (float)) == 0, "chunk %u",
          c);
    out_clear (&c1);
  }

  fail_unless_equals_int (b.tokens->len, a.tokens->len);
  for (c = 0; c < a.tokens->len; c++) {
    double *r = g_new (double, (gsize) a.n_tokens * a.dim), err;
    const float *x = g_ptr_array_index (a.tokens, c);

    for (i = 0; i < (gsize) a.n_tokens * a.dim; i++)
      r[i] = x[i];
    err = tokens_error (g_ptr_array_index (b.tokens, c), r,
        (gsize) a.n_tokens * a.dim);
    GST_INFO ("chunk %u: 44.1 kHz stereo against 16 kHz mono: %g", c, err);
    fail_unless (err <= RATES_TOL, "chunk %u: error %g", c, err);
    fail_unless_equals_uint64 (OUT_PTS (&a, c), OUT_PTS (&b, c));
    g_free (r);
  }
  out_clear (&a);
  out_clear (&b);
  ref_clear (&ref);
  g_free (pcm);
  g_free (s);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * The voice-activity gate
 */
GST_START_TEST (test_vad)
{
  /* 2 s of silence, 1 s of sound, 2 s of silence, in 30 s chunks */
  const gsize n = 80000;
  float *s = g_new0 (float, n), *tone = make_clip (16000, 5);
  GstHarness *h;
  Out out;
  guint64 silent;

  memcpy (s + 32000, tone, 16000 * sizeof (float));
  out = run_f32 ("vad-split=true vad-hangover=300000000", s, n, 160);
  /* one chunk: 300 ms of lead-in, the sound, 300 ms of hangover */
  fail_unless_equals_int (out.tokens->len, 1);
  fail_unless_equals_uint64 (OUT_PTS (&out, 0), 1700 * GST_MSECOND);
  fail_unless_equals_uint64 (OUT_DUR (&out, 0), 1600 * GST_MSECOND);
  out_clear (&out);

  /* without vad-split the gate only keeps silent chunks back: the same
   * sound in 1 s chunks is the chunk from 2 s to 3 s, the others silent */
  {
    GstHarness *hs = make_harness ("chunk-duration=1000000000",
        "audio/x-raw,format=F32LE,layout=interleaved,rate=16000,channels=1");

    push_pcm (hs, (const guint8 *) s, n, 4, 16000, 1600);
    collect (hs, &out);
    fail_unless_equals_int (out.tokens->len, 1);
    fail_unless_equals_uint64 (OUT_PTS (&out, 0), 2 * GST_SECOND);
    fail_unless_equals_uint64 (OUT_DUR (&out, 0), GST_SECOND);
    fail_unless_equals_uint64 (get_u64 (hs, "chunks-silent"), 4);
    out_clear (&out);
    gst_harness_teardown (hs);
  }

  /* silence only: nothing, and the chunk it ended in counted */
  memset (s, 0, n * sizeof (float));
  h = make_harness ("", "audio/x-raw,format=F32LE,layout=interleaved,"
      "rate=16000,channels=1");
  push_pcm (h, (const guint8 *) s, n, 4, 16000, 1600);
  fail_unless (gst_harness_push_event (h, gst_event_new_eos ()));
  fail_unless (gst_harness_try_pull (h) == NULL);
  silent = get_u64 (h, "chunks-silent");
  fail_unless_equals_uint64 (silent, 1);
  gst_harness_teardown (h);

  /* vad=false: silence is encoded too */
  out = run_f32 ("vad=false chunk-duration=1000000000", s, 32000, 1600);
  fail_unless_equals_int (out.tokens->len, 2);
  out_clear (&out);
  g_free (s);
  g_free (tone);
}

GST_END_TEST;

/* With vad-split the chunk starts a hangover before the first loud sample,
 * wherever the 10 ms grid falls: the same utterance 77 samples later in
 * the stream gives the same tokens, 77 samples later */
GST_START_TEST (test_vad_onset_aligned)
{
  const gsize lead = 16000, len = 16000, pad = 16000;
  float *tone = make_clip (len, 12);
  float *a = g_new0 (float, lead + len + pad), *b = g_new0 (float,
      lead + 77 + len + pad);
  Out oa, ob;

  memcpy (a + lead, tone, len * sizeof (float));
  memcpy (b + lead + 77, tone, len * sizeof (float));
  oa = run_f32 ("vad-split=true vad-hangover=200000000 "
      "chunk-duration=3000000000", a, lead + len + pad, 160);
  ob = run_f32 ("vad-split=true vad-hangover=200000000 "
      "chunk-duration=3000000000", b, lead + 77 + len + pad, 160);
  fail_unless_equals_int (oa.tokens->len, 1);
  fail_unless_equals_int (ob.tokens->len, 1);
  fail_unless_equals_uint64 (OUT_PTS (&oa, 0), 800 * GST_MSECOND);
  fail_unless_equals_uint64 (OUT_PTS (&ob, 0), 800 * GST_MSECOND +
      gst_util_uint64_scale (77, GST_SECOND, 16000));
  fail_unless (memcmp (g_ptr_array_index (oa.tokens, 0),
          g_ptr_array_index (ob.tokens, 0),
          (gsize) oa.n_tokens * oa.dim * sizeof (float)) == 0);
  out_clear (&oa);
  out_clear (&ob);
  g_free (a);
  g_free (b);
  g_free (tone);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Memory: upstream writes into NPU memory, nothing is copied
 */
typedef struct
{
  guint n_buffers, n_npu;
  NpuInputWatch *watch;
} MemoryProbe;

static GstPadProbeReturn
count_npu_memory (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  MemoryProbe *probe = data;
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER (info);

  probe->n_buffers++;
  if (gst_buffer_n_memory (buf) == 1 &&
      gst_is_npu_memory (gst_buffer_peek_memory (buf, 0)))
    probe->n_npu++;
  npu_input_watch_add_buffer (probe->watch, buf);
  return GST_PAD_PROBE_OK;
}

/* The npuaudiotok-stats message after each chunk: the chunk's 16 kHz F32
 * samples the log-mel reads, the file's weights once a chunk with the
 * window's rows of the position table (tests/npuencbytes.h), its tokens,
 * the sums and the estimate at the pj-per-bit asked for */
GST_START_TEST (test_stats_bytes)
{
  gchar *desc = g_strdup_printf ("audiotestsrc num-buffers=10 "
      "samplesperbuffer=1600 wave=sine ! audio/x-raw,format=F32LE,"
      "rate=16000,channels=1 ! npuaudiotok model=%s vad=false "
      "chunk-duration=500000000 pj-per-bit=7 ! fakesink", audio_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GPtrArray *stats = npu_check_collect_stats (pipeline, "npuaudiotok-stats");
  NpuAudioEnc *enc = npu_audio_enc_new_from_file (audio_path, NULL);
  /* 0.5 s: 8000 samples, 50 mel frames of 160 (fewer if the model's
   * window is shorter), whole pairs */
  guint frames = MIN (50, npu_audio_enc_get_max_frames (enc)) & ~1u;
  guint64 weights = npu_ref_encoder_weight_bytes (audio_path,
      "a.position_embd.weight", frames / 2);
  guint i;

  fail_unless (enc != NULL);
  /* 1 s of samples: two chunks of 0.5 s */
  fail_unless_equals_int (stats->len, 2);
  npu_check_stats_sums (stats, 7.0);
  for (i = 0; i < stats->len; i++) {
    const GstStructure *s = g_ptr_array_index (stats, i);

    fail_unless_equals_uint64 (npu_stats_u64 (s, "bytes-frame-read"),
        8000 * 4);
    fail_unless_equals_uint64 (npu_stats_u64 (s, "bytes-weights-read"),
        weights);
    fail_unless_equals_uint64 (npu_stats_u64 (s, "bytes-tokens-written"),
        (guint64) npu_audio_enc_get_n_tokens (enc, frames) *
        npu_audio_enc_get_out_dim (enc) * 4);
    fail_unless_equals_uint64 (npu_stats_u64 (s, "pts"),
        (guint64) i * GST_SECOND / 2);
  }
  npu_audio_enc_free (enc);
  g_ptr_array_unref (stats);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_audiotestsrc_npu_memory)
{
  gchar *desc = g_strdup_printf ("audiotestsrc num-buffers=20 "
      "samplesperbuffer=1600 wave=sine ! audio/x-raw,format=S16LE,rate=48000,"
      "channels=2 ! npuaudiotok name=t model=%s vad=false "
      "chunk-duration=500000000 n-threads=1 ! fakesink", audio_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL), *tok;
  GstPad *pad;
  MemoryProbe probe = { 0, 0, npu_input_watch_start () };
  guint64 copied, processed;

  fail_unless (pipeline != NULL);
  tok = gst_bin_get_by_name (GST_BIN (pipeline), "t");
  pad = gst_element_get_static_pad (tok, "sink");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, count_npu_memory,
      &probe, NULL);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  npu_check_wait_eos (pipeline, 30 * GST_SECOND);
  g_object_get (tok, "bytes-copied", &copied, "chunks-processed",
      &processed, NULL);
  /* every buffer audiotestsrc made was NPU memory, read where it was */
  fail_unless_equals_int (probe.n_buffers, 20);
  fail_unless_equals_int (probe.n_npu, 20);
  fail_unless_equals_uint64 (copied, 0);
  /* the front end read each of them in place (1600 frames of 4 bytes
   * each: no frame split) */
  npu_input_watch_assert_in_place (probe.watch, 20);
  npu_input_watch_stop (probe.watch);
  /* 20 x 1600 samples at 48 kHz = 0.667 s: one chunk of 0.5 s and one
   * partial */
  fail_unless_equals_uint64 (processed, 2);

  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pad);
  gst_object_unref (tok);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

/* The front end reads the PCM at the address upstream wrote it to
 * (tests/check/npuinputwatch.h): a copy of the input anywhere before it (a
 * gst_buffer_copy_deep(), a merge of memories) would move the reads out of
 * the memories pushed, and bytes-copied stays 0. */
GST_START_TEST (test_reads_in_place)
{
  const gsize n = 3200;
  float *s = make_clip (n, 10);
  GstHarness *h = make_harness ("vad=false chunk-duration=100000000",
      "audio/x-raw,format=F32LE,layout=interleaved,rate=16000,channels=1");
  NpuInputWatch *watch = npu_input_watch_start ();
  GstBuffer *buf;
  Out out;

  /* two memories in one buffer, each read where it is */
  buf = gst_buffer_new ();
  gst_buffer_append_memory (buf, gst_memory_new_wrapped (0, s, 1600 * 4, 0,
          1600 * 4, NULL, NULL));
  gst_buffer_append_memory (buf, gst_memory_new_wrapped (0, s + 1600,
          1600 * 4, 0, 1600 * 4, NULL, NULL));
  GST_BUFFER_PTS (buf) = 0;
  npu_input_watch_add_buffer (watch, buf);
  fail_unless_equals_int (gst_harness_push (h, buf), GST_FLOW_OK);
  collect (h, &out);
  /* 0.2 s in chunks of 0.1 s: the PCM really went through */
  fail_unless_equals_int (out.tokens->len, 2);
  fail_unless_equals_int (npu_input_watch_n_reads (watch), 2);
  npu_input_watch_assert_in_place (watch, 2);
  fail_unless_equals_uint64 (get_u64 (h, "bytes-copied"), 0);
  npu_input_watch_stop (watch);
  out_clear (&out);
  gst_harness_teardown (h);
  g_free (s);
}

GST_END_TEST;

/* Frames split between buffers are stitched: counted, same tokens; the
 * front end reads every whole frame in place and only the stitched frames
 * from elsewhere, as many bytes as bytes-copied says */
GST_START_TEST (test_split_frames_counted)
{
  const gsize n = 16000;
  float *s = make_clip (n, 6);
  GstHarness *h;
  Out a, b;
  gsize off, size = n * 4, expected = 0;
  guint64 copied;
  NpuInputWatch *watch;

  a = run_f32 ("vad=false chunk-duration=1000000000", s, n, 1600);
  watch = npu_input_watch_start ();
  h = make_harness ("vad=false chunk-duration=1000000000",
      "audio/x-raw,format=F32LE,layout=interleaved,rate=16000,channels=1");
  /* 1001-byte buffers: a frame split at most boundaries */
  for (off = 0; off < size; off += 1001) {
    gsize k = MIN (1001, size - off);
    GstBuffer *buf = gst_harness_create_buffer (h, k);

    gst_buffer_fill (buf, 0, (guint8 *) s + off, k);
    if (off == 0)
      GST_BUFFER_PTS (buf) = 0;
    /* a split frame: its tail here, its head at the end of the buffer */
    if (off % 4)
      expected += 4 - off % 4;
    if ((off + k) % 4)
      expected += (off + k) % 4;
    npu_input_watch_add_buffer (watch, buf);
    fail_unless_equals_int (gst_harness_push (h, buf), GST_FLOW_OK);
  }
  collect (h, &b);
  copied = get_u64 (h, "bytes-copied");
  gst_harness_teardown (h);
  fail_unless (expected > 0);
  fail_unless_equals_uint64 (copied, expected);
  /* all 16000 frames read, the split ones (4 bytes each) from the stitch */
  fail_unless_equals_uint64 (npu_input_watch_bytes_outside (watch), expected);
  {
    guint64 total = 0;
    guint i;

    for (i = 0; i < watch->reads->len; i++)
      total += g_array_index (watch->reads, NpuInputRead, i).size;
    fail_unless_equals_uint64 (total, size);
  }
  npu_input_watch_stop (watch);
  fail_unless_equals_int (b.tokens->len, 1);
  fail_unless (memcmp (g_ptr_array_index (a.tokens, 0),
          g_ptr_array_index (b.tokens, 0),
          (gsize) a.n_tokens * a.dim * sizeof (float)) == 0);
  out_clear (&a);
  out_clear (&b);
  g_free (s);
}

GST_END_TEST;

/* A live source's latency grows by the chunk: its tokens come a chunk
 * after its first sample */
GST_START_TEST (test_latency)
{
  gchar *desc = g_strdup_printf ("audiotestsrc is-live=true "
      "samplesperbuffer=160 ! npuaudiotok name=tok model=%s "
      "chunk-duration=1000000000 vad=false ! fakesink sync=true", audio_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  GstQuery *q = gst_query_new_latency ();
  GstClockTime min, max, t0, elapsed;
  gboolean live;
  guint max_inflight;

  g_object_get (tok, "max-inflight", &max_inflight, NULL);
  t0 = gst_util_get_timestamp ();
  fail_unless_equals_int (gst_element_set_state (pipeline,
          GST_STATE_PLAYING), GST_STATE_CHANGE_ASYNC);
  fail_unless_equals_int (gst_element_get_state (pipeline, NULL, NULL,
          30 * GST_SECOND), GST_STATE_CHANGE_SUCCESS);
  fail_unless (gst_element_query (pipeline, q));
  elapsed = gst_util_get_timestamp () - t0;
  gst_query_parse_latency (q, &live, &min, &max);
  fail_unless (live);
  /* audiotestsrc's own 10 ms, then our second, then max-inflight times
   * the last chunk's encode time: none before the first chunk is done,
   * and no encode took longer than the pipeline has run (under valgrind
   * a chunk may have been encoded, slowly, before the query) */
  fail_unless (min >= GST_SECOND + 10 * GST_MSECOND, "%" GST_TIME_FORMAT,
      GST_TIME_ARGS (min));
  fail_unless (min <= GST_SECOND + 10 * GST_MSECOND + max_inflight * elapsed,
      "%" GST_TIME_FORMAT " after %" GST_TIME_FORMAT, GST_TIME_ARGS (min),
      GST_TIME_ARGS (elapsed));
  /* outside valgrind the encode of a 1 s chunk takes milliseconds */
  if (!g_getenv ("NPU_UNDER_VALGRIND"))
    fail_unless (min < 2 * GST_SECOND, "%" GST_TIME_FORMAT,
        GST_TIME_ARGS (min));
  gst_query_unref (q);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (tok);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Weights from mxfp4weights on the weights pad
 */
static void
on_handoff (GstElement * sink, GstBuffer * buf, GstPad * pad, gpointer data)
{
  GByteArray *bytes = data;
  GstMapInfo map;

  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  g_byte_array_append (bytes, map.data, map.size);
  gst_buffer_unmap (buf, &map);
}

static GByteArray *
run_pipeline (const gchar * desc)
{
  GstElement *pipeline = gst_parse_launch (desc, NULL), *sink;
  GByteArray *bytes = g_byte_array_new ();

  fail_unless (pipeline != NULL);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "out");
  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), bytes);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  npu_check_wait_eos (pipeline, 60 * GST_SECOND);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return bytes;
}

GST_START_TEST (test_weights_pad)
{
  const gchar *src = "audiotestsrc num-buffers=10 samplesperbuffer=1600 "
      "wave=sine freq=330 ! audio/x-raw,format=F32LE,rate=16000,channels=1";
  gchar *a = g_strdup_printf ("%s ! npuaudiotok model=%s vad=false "
      "chunk-duration=500000000 ! fakesink name=out", src, audio_path);
  /* convert="": the tensors arrive as stored, as the model property reads
   * them: the same tokens, bit for bit */
  gchar *b = g_strdup_printf ("mxfp4weights location=%s convert=\"\" ! "
      "at.weights %s ! npuaudiotok name=at vad=false "
      "chunk-duration=500000000 ! fakesink name=out", audio_path, src);
  /* the documented pipeline, mxfp4weights' default convert="*": the
   * position table stays as stored (the encoder refuses it in MXFP4) and
   * the conv kernels cannot be converted (rows of 3 taps); the blocks' and
   * the projector's F32 matrices arrive in MXFP4, a change of the model
   * the user asked for: other tokens */
  gchar *c = g_strdup_printf ("mxfp4weights location=%s ! at.weights %s ! "
      "npuaudiotok name=at vad=false chunk-duration=500000000 ! "
      "fakesink name=out", audio_path, src);
  GByteArray *ta = run_pipeline (a), *tb = run_pipeline (b),
      *tc = run_pipeline (c);

  /* two chunks of 0.5 s */
  fail_unless (ta->len > 0);
  fail_unless_equals_int (tb->len, ta->len);
  fail_unless (memcmp (ta->data, tb->data, ta->len) == 0);
  fail_unless_equals_int (tc->len, ta->len);
  fail_unless (memcmp (ta->data, tc->data, ta->len) != 0);
  g_byte_array_unref (ta);
  g_byte_array_unref (tb);
  g_byte_array_unref (tc);
  g_free (a);
  g_free (b);
  g_free (c);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Into npullm
 */
typedef struct
{
  GMutex lock;
  GString *text;
  GstClockTime first_pts, last_end;
} Answer;

static void
on_text (GstElement * sink, GstBuffer * buf, GstPad * pad, gpointer data)
{
  Answer *a = data;
  GstMapInfo map;

  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  g_mutex_lock (&a->lock);
  g_string_append_len (a->text, (const gchar *) map.data, map.size);
  fail_unless (GST_BUFFER_PTS_IS_VALID (buf));
  fail_unless (GST_BUFFER_DURATION_IS_VALID (buf));
  a->first_pts = MIN (a->first_pts, GST_BUFFER_PTS (buf));
  a->last_end = MAX (a->last_end, GST_BUFFER_PTS (buf) +
      GST_BUFFER_DURATION (buf));
  g_mutex_unlock (&a->lock);
  gst_buffer_unmap (buf, &map);
}

/* npullm answers a microphone, and a microphone with a camera: the text
 * is stamped with the media it speaks of (audio from 1 s to 2 s, a frame
 * at 0) */
static void
answer_pipeline (gboolean with_video, Answer * a)
{
  gchar *desc = g_strdup_printf ("audiotestsrc num-buffers=10 "
      "samplesperbuffer=1600 wave=sine freq=330 timestamp-offset=1000000000 ! "
      "audio/x-raw,format=F32LE,rate=16000,channels=1 ! npuaudiotok "
      "model=%s vad=false chunk-duration=1000000000 ! llm.audio %s%s%s "
      "npullm name=llm model=%s prompt=\"What happened?\" max-tokens=4 ! "
      "fakesink name=out signal-handoffs=true", audio_path,
      with_video ? "videotestsrc num-buffers=1 ! video/x-raw,width=64,"
      "height=64 ! npuvisiontok model=" : "", with_video ? vision_path : "",
      with_video ? " ! llm.vision" : "", text_path);
  GstElement *pipeline = gst_parse_launch (desc, NULL), *sink;

  fail_unless (pipeline != NULL, "%s", desc);
  g_mutex_init (&a->lock);
  a->text = g_string_new (NULL);
  a->first_pts = a->last_end = GST_CLOCK_TIME_NONE;
  a->last_end = 0;
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "out");
  g_signal_connect (sink, "handoff", G_CALLBACK (on_text), a);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  npu_check_wait_eos (pipeline, 120 * GST_SECOND);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_mutex_clear (&a->lock);
  g_free (desc);
}

GST_START_TEST (test_npullm_audio_and_video)
{
  Answer a;

  answer_pipeline (FALSE, &a);
  fail_unless (a.text->len > 0);
  /* the one chunk: from 1 s, a second long */
  fail_unless_equals_uint64 (a.first_pts, GST_SECOND);
  fail_unless_equals_uint64 (a.last_end, 2 * GST_SECOND);
  g_string_free (a.text, TRUE);

  answer_pipeline (TRUE, &a);
  fail_unless (a.text->len > 0);
  /* the frame at 0 and the audio up to 2 s are both answered */
  fail_unless_equals_uint64 (a.first_pts, 0);
  fail_unless_equals_uint64 (a.last_end, 2 * GST_SECOND);
  g_string_free (a.text, TRUE);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Bad input
 */
static gchar *
run_expect_error (const gchar * model)
{
  gchar *desc = g_strdup_printf ("audiotestsrc num-buffers=5 ! npuaudiotok "
      "model=\"%s\" ! fakesink", model);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  gchar *text;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  text = npu_check_wait_error (pipeline, 30 * GST_SECOND);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pipeline);
  g_free (desc);
  return text;
}

GST_START_TEST (test_bad_models)
{
  gchar *truncated = g_build_filename (tmpdir, "truncated.gguf", NULL);
  gchar *missing = g_build_filename (tmpdir, "missing.gguf", NULL);
  gchar *contents, *msg;
  gsize len;

  msg = run_expect_error (vision_path);
  fail_unless (strstr (msg, "is not a usable audio encoder") != NULL, "%s",
      msg);
  g_free (msg);
  msg = run_expect_error (text_path);
  fail_unless (strstr (msg, "is not a usable audio encoder") != NULL, "%s",
      msg);
  g_free (msg);

  fail_unless (g_file_get_contents (audio_path, &contents, &len, NULL));
  fail_unless (g_file_set_contents (truncated, contents, len / 2, NULL));
  msg = run_expect_error (truncated);
  fail_unless (strstr (msg, "is not a usable") != NULL, "%s", msg);
  g_free (msg);
  g_free (contents);
  g_unlink (truncated);

  msg = run_expect_error (missing);
  fail_unless (strstr (msg, "not found") != NULL, "%s", msg);
  g_free (msg);
  g_free (truncated);
  g_free (missing);
}

GST_END_TEST;

GST_START_TEST (test_bad_caps)
{
  gchar *desc;
  GstMessage *msg;
  GstHarness *h;
  GstBus *bus;
  GError *error = NULL;

  /* 96 kHz is outside the template: refused, not negotiated */
  desc = g_strdup_printf ("npuaudiotok model=%s", audio_path);
  h = gst_harness_new_parse (desc);
  gst_harness_set_src_caps_str (h, "audio/x-raw,format=S16LE,"
      "layout=interleaved,rate=96000,channels=1");
  fail_unless_equals_int (gst_harness_push (h, gst_buffer_new_allocate (NULL,
              192, NULL)), GST_FLOW_NOT_NEGOTIATED);
  gst_harness_teardown (h);
  g_free (desc);

  /* an overlap as long as the chunk: refused with the reason */
  desc = g_strdup_printf ("npuaudiotok model=%s chunk-duration=1000000000 "
      "overlap=1000000000", audio_path);
  h = gst_harness_new_parse (desc);
  bus = gst_bus_new ();
  gst_element_set_bus (h->element, bus);
  gst_harness_set_src_caps_str (h, "audio/x-raw,format=F32LE,"
      "layout=interleaved,rate=16000,channels=1");
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  fail_unless (msg != NULL);
  gst_message_parse_error (msg, &error, NULL);
  fail_unless (strstr (error->message, "must be shorter than the chunk"),
      "%s", error->message);
  g_clear_error (&error);
  gst_message_unref (msg);
  gst_element_set_bus (h->element, NULL);
  gst_object_unref (bus);
  gst_harness_teardown (h);
  g_free (desc);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Drops, flushing, state changes
 */
GST_START_TEST (test_drop_newest_qos)
{
  /* ten chunks of 1 s in one buffer: formed in microseconds, each
   * encoded in about a millisecond */
  const gsize n = 160000;
  float *s = make_clip (n, 7);
  GstHarness *h = make_harness ("vad=false chunk-duration=1000000000 "
      "max-inflight=1 policy=drop-newest",
      "audio/x-raw,format=F32LE,layout=interleaved,rate=16000,channels=1");
  GstBus *bus = gst_bus_new ();
  GstMessage *msg;
  guint64 processed, dropped;
  guint n_qos = 0, n_out = 0;
  GstBuffer *buf;

  gst_element_set_bus (h->element, bus);
  push_pcm (h, (const guint8 *) s, n, 4, 16000, n);
  fail_unless (gst_harness_push_event (h, gst_event_new_eos ()));
  while ((buf = gst_harness_try_pull (h))) {
    n_out++;
    gst_buffer_unref (buf);
  }
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_QOS))) {
    n_qos++;
    gst_message_unref (msg);
  }
  processed = get_u64 (h, "chunks-processed");
  dropped = get_u64 (h, "chunks-dropped");
  /* ten chunks: each either encoded and pushed, or dropped and reported */
  fail_unless_equals_uint64 (processed + dropped, 10);
  fail_unless_equals_uint64 (processed, n_out);
  fail_unless_equals_uint64 (dropped, n_qos);
  fail_unless (dropped > 0);

  gst_element_set_bus (h->element, NULL);
  gst_object_unref (bus);
  gst_harness_teardown (h);
  g_free (s);
}

GST_END_TEST;

/* drop-oldest: with one chunk being encoded and one waiting, the next
 * cancels the waiting one; its
 * buffer, already pushed, fails as cancelled, and only the others carry
 * tokens */
GST_START_TEST (test_drop_oldest_qos)
{
  const gsize n = 160000;
  float *s = make_clip (n, 11);
  GstHarness *h = make_harness ("vad=false chunk-duration=1000000000 "
      "max-inflight=2 policy=drop-oldest",
      "audio/x-raw,format=F32LE,layout=interleaved,rate=16000,channels=1");
  GstBus *bus = gst_bus_new ();
  GstMessage *msg;
  guint64 processed, dropped;
  guint n_qos = 0, n_ok = 0, n_cancelled = 0;
  GstBuffer *buf;

  gst_element_set_bus (h->element, bus);
  push_pcm (h, (const guint8 *) s, n, 4, 16000, n);
  fail_unless (gst_harness_push_event (h, gst_event_new_eos ()));
  while ((buf = gst_harness_try_pull (h))) {
    GError *error = NULL;

    if (gst_npu_buffer_wait (buf, 10 * G_USEC_PER_SEC, &error))
      n_ok++;
    else if (g_error_matches (error, NPU_FENCE_ERROR,
            NPU_FENCE_ERROR_CANCELLED))
      n_cancelled++;
    else
      fail ("%s", error->message);
    g_clear_error (&error);
    gst_buffer_unref (buf);
  }
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_QOS))) {
    n_qos++;
    gst_message_unref (msg);
  }
  processed = get_u64 (h, "chunks-processed");
  dropped = get_u64 (h, "chunks-dropped");
  /* every chunk pushed: encoded, or cancelled and reported */
  fail_unless_equals_int (n_ok + n_cancelled, 10);
  fail_unless_equals_uint64 (processed, n_ok);
  fail_unless_equals_uint64 (dropped, n_cancelled);
  fail_unless_equals_uint64 (dropped, n_qos);
  fail_unless (dropped > 0);

  gst_element_set_bus (h->element, NULL);
  gst_object_unref (bus);
  gst_harness_teardown (h);
  g_free (s);
}

GST_END_TEST;

GST_START_TEST (test_state_change_in_flight)
{
  const gsize n = 32000;
  float *s = make_clip (n, 8);
  guint round;

  for (round = 0; round < 3; round++) {
    GstHarness *h = make_harness ("vad=false chunk-duration=100000000 "
        "max-inflight=8",
        "audio/x-raw,format=F32LE,layout=interleaved,rate=16000,channels=1");
    GstBuffer *buf;
    guint n_ok = 0, n_cancelled = 0;

    push_pcm (h, (const guint8 *) s, n, 4, 16000, 3200);
    /* chunks still being encoded: stop now, and again after a while */
    g_usleep (round * 20000);
    fail_unless_equals_int (gst_element_set_state (h->element,
            GST_STATE_NULL), GST_STATE_CHANGE_SUCCESS);
    /* every token buffer pushed is finished or cancelled, none hangs */
    while ((buf = gst_harness_try_pull (h))) {
      GError *error = NULL;

      if (gst_npu_buffer_wait (buf, 10 * G_USEC_PER_SEC, &error))
        n_ok++;
      else if (g_error_matches (error, NPU_FENCE_ERROR,
              NPU_FENCE_ERROR_CANCELLED))
        /* cancelled before it ran, or while it ran: one code for both */
        n_cancelled++;
      else
        fail ("%s", error->message);
      g_clear_error (&error);
      gst_buffer_unref (buf);
    }
    fail_unless_equals_int (n_ok + n_cancelled, 20);
    gst_harness_teardown (h);
  }
  g_free (s);
}

GST_END_TEST;

GST_START_TEST (test_flush_in_flight)
{
  const gsize n = 32000;
  float *s = make_clip (n, 9);
  GstHarness *h = make_harness ("vad=false chunk-duration=100000000 "
      "max-inflight=8",
      "audio/x-raw,format=F32LE,layout=interleaved,rate=16000,channels=1");
  GstSegment seg;
  Out out;
  Ref ref;
  double *r, err;

  ref_init (&ref, audio_path, 100 * GST_MSECOND);
  push_pcm (h, (const guint8 *) s, n, 4, 16000, 3200);
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_start ()));
  fail_unless (gst_harness_push_event (h, gst_event_new_flush_stop (TRUE)));
  gst_segment_init (&seg, GST_FORMAT_TIME);
  fail_unless (gst_harness_push_event (h, gst_event_new_segment (&seg)));
  while (gst_harness_buffers_in_queue (h) > 0)
    gst_buffer_unref (gst_harness_pull (h));
  /* after the flush, a fresh stream: its first chunk as from scratch */
  push_pcm (h, (const guint8 *) s, 1600, 4, 16000, 1600);
  collect (h, &out);
  fail_unless_equals_int (out.tokens->len, 1);
  r = ref_tokens (&ref, s, 1600);
  err = tokens_error (g_ptr_array_index (out.tokens, 0), r,
      (gsize) ref.n_tokens * ref.dim);
  fail_unless (err <= TOKENS_TOL, "error %g", err);
  g_free (r);
  ref_clear (&ref);
  out_clear (&out);
  gst_harness_teardown (h);
  g_free (s);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Caps changes while chunks are in flight
 */
typedef struct
{
  GstAudioFormat format;
  gint channels, rate;
} AudioStep;

/* rate, channels and format change at every step */
static const AudioStep audio_steps[] = {
  {GST_AUDIO_FORMAT_S16LE, 1, 16000},
  {GST_AUDIO_FORMAT_F32LE, 2, 44100},
  {GST_AUDIO_FORMAT_S32LE, 3, 8000},
};

/* 250 ms a step: two whole chunks of 100 ms and a partial one */
#define STEP_DURATION (250 * GST_MSECOND)
/* max-inflight=3: the three chunks of a step fit, so only the caps
 * event's own wait holds it; n-threads=0: the shared CPU device, which the
 * test holds */
#define STEP_PROPS "vad=false chunk-duration=100000000 max-inflight=3 " \
  "n-threads=0"

static GstCaps *
audio_step_caps (const AudioStep * st)
{
  GstAudioInfo info;

  gst_audio_info_set_format (&info, st->format, st->rate, st->channels, NULL);
  return gst_audio_info_to_caps (&info);
}

/* Pushes step @s's audio (each channel a different mix of the test
 * signal) in buffers of 10 ms, stamped from @s * STEP_DURATION on. */
static void
push_step (GstHarness * h, guint s)
{
  const AudioStep *st = &audio_steps[s];
  gsize n = gst_util_uint64_scale (STEP_DURATION, st->rate, GST_SECOND);
  gsize bps = st->format == GST_AUDIO_FORMAT_S16LE ? 2 : 4;
  guint8 *pcm = g_malloc (n * st->channels * bps);
  GstClockTime t0 = s * STEP_DURATION;
  gsize i, per = st->rate / 100, off;
  gint c;

  for (i = 0; i < n; i++) {
    for (c = 0; c < st->channels; c++) {
      double v = clip_at (i / (double) st->rate, 3 + c) * (1.0 - 0.2 * c);
      gsize k = i * st->channels + c;

      if (st->format == GST_AUDIO_FORMAT_S16LE)
        ((gint16 *) pcm)[k] = (gint16) lrint (v * 32767.0);
      else if (st->format == GST_AUDIO_FORMAT_S32LE)
        ((gint32 *) pcm)[k] = (gint32) lrint (v * 2147483647.0);
      else
        ((float *) pcm)[k] = v;
    }
  }
  for (off = 0; off < n; off += per) {
    gsize k = MIN (per, n - off), bpf = st->channels * bps;
    GstBuffer *buf = gst_buffer_new_memdup (pcm + off * bpf, k * bpf);

    GST_BUFFER_PTS (buf) = t0 + gst_util_uint64_scale (off, GST_SECOND,
        st->rate);
    GST_BUFFER_DURATION (buf) = t0 + gst_util_uint64_scale (off + k,
        GST_SECOND, st->rate) - GST_BUFFER_PTS (buf);
    fail_unless_equals_int (gst_harness_push (h, buf), GST_FLOW_OK);
  }
  g_free (pcm);
}

/* Rate, channels and format change every 250 ms of audio while its chunks
 * are still being encoded (the shared CPU device is held): the caps event
 * closes the partial chunk, waits for the chunks in flight, and only then
 * replaces the front end and the log-mel scratch they read.  Every chunk's
 * tokens and timestamps equal those of fresh elements given each step's
 * caps and audio, then EOS. */
GST_START_TEST (test_caps_change_in_flight)
{
  NpuDeviceHold *hold = npu_device_hold_new ();
  GstCaps *caps = audio_step_caps (&audio_steps[0]);
  gchar *str = gst_caps_to_string (caps);
  GstHarness *h = make_harness (STEP_PROPS, str);
  Out got, want = { g_ptr_array_new_with_free_func (g_free),
    g_array_new (FALSE, FALSE, sizeof (GstClockTime)),
    g_array_new (FALSE, FALSE, sizeof (GstClockTime)), 0, 0
  };
  guint s, i, n_early = 0;

  gst_caps_unref (caps);
  g_free (str);
  for (s = 0; s < G_N_ELEMENTS (audio_steps); s++) {
    NpuPushThread *cp = NULL;
    GstHarness *fresh;
    Out one;

    /* the reference: a fresh element, this step only */
    caps = audio_step_caps (&audio_steps[s]);
    str = gst_caps_to_string (caps);
    fresh = make_harness (STEP_PROPS, str);
    push_step (fresh, s);
    collect (fresh, &one);
    gst_harness_teardown (fresh);
    for (i = 0; i < one.tokens->len; i++) {
      g_ptr_array_add (want.tokens, g_memdup2 (one.tokens->pdata[i],
              (gsize) one.n_tokens * one.dim * sizeof (float)));
      g_array_append_val (want.pts, g_array_index (one.pts, GstClockTime, i));
      g_array_append_val (want.dur, g_array_index (one.dur, GstClockTime, i));
    }
    want.n_tokens = one.n_tokens;
    want.dim = one.dim;
    out_clear (&one);
    g_free (str);

    npu_device_hold (hold);
    push_step (h, s);
    if (s + 1 < G_N_ELEMENTS (audio_steps)) {
      gst_caps_unref (caps);
      caps = audio_step_caps (&audio_steps[s + 1]);
      cp = npu_push_thread_start_event (h, gst_event_new_caps (caps));
      /* nothing can finish the chunks while the device is held */
      g_usleep (300 * 1000);
      n_early += npu_push_thread_is_done (cp);
    }
    gst_caps_unref (caps);
    npu_device_release (hold);
    if (cp)
      fail_unless (npu_push_thread_finish (cp) == GST_FLOW_OK,
          "caps %u refused", s + 1);
  }
  collect (h, &got);
  fail_unless_equals_int (n_early, 0);
  /* three chunks a step: two whole, one drained */
  fail_unless_equals_int (want.tokens->len, 3 * G_N_ELEMENTS (audio_steps));
  fail_unless_equals_int (got.tokens->len, want.tokens->len);
  for (i = 0; i < got.tokens->len; i++) {
    fail_unless_equals_uint64 (g_array_index (got.pts, GstClockTime, i),
        g_array_index (want.pts, GstClockTime, i));
    fail_unless_equals_uint64 (g_array_index (got.dur, GstClockTime, i),
        g_array_index (want.dur, GstClockTime, i));
    fail_unless (memcmp (got.tokens->pdata[i], want.tokens->pdata[i],
            (gsize) got.n_tokens * got.dim * sizeof (float)) == 0,
        "chunk %u: tokens differ from a fresh element's", i);
  }
  out_clear (&got);
  out_clear (&want);
  gst_harness_teardown (h);
  npu_device_hold_free (hold);
}

GST_END_TEST;

static Suite *
npuaudiotok_suite (void)
{
  Suite *s = suite_create ("npuaudiotok");
  TCase *tc = tcase_create ("general");

  tcase_set_timeout (tc, 170);
  tcase_add_checked_fixture (tc, setup, teardown);
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_tokens_reference);
  tcase_add_test (tc, test_precision);
  tcase_add_test (tc, test_overlap);
  tcase_add_test (tc, test_discont_starts_clip);
  tcase_add_test (tc, test_buffer_sizes);
  tcase_add_test (tc, test_44k_stereo);
  tcase_add_test (tc, test_vad);
  tcase_add_test (tc, test_vad_onset_aligned);
  tcase_add_test (tc, test_audiotestsrc_npu_memory);
  tcase_add_test (tc, test_stats_bytes);
  tcase_add_test (tc, test_reads_in_place);
  tcase_add_test (tc, test_split_frames_counted);
  tcase_add_test (tc, test_latency);
  tcase_add_test (tc, test_weights_pad);
  tcase_add_test (tc, test_npullm_audio_and_video);
  tcase_add_test (tc, test_bad_models);
  tcase_add_test (tc, test_bad_caps);
  tcase_add_test (tc, test_drop_newest_qos);
  tcase_add_test (tc, test_drop_oldest_qos);
  tcase_add_test (tc, test_state_change_in_flight);
  tcase_add_test (tc, test_flush_in_flight);
  tcase_add_test (tc, test_caps_change_in_flight);
  return s;
}

GST_CHECK_MAIN (npuaudiotok);
