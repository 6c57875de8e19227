/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GStreamer 1.26 analytics metadata (gstreamer-analytics-1.0)
 *
 * Built only where the library is (the Debian 13 leg; GStreamer 1.22 has
 * none, and the elements are built without the feature there):
 * - token buffers from npuvisiontok and npuaudiotok carry a GstTensorMeta
 *   whose tensor is the very memory of the tokens (no copy);
 * - npullm answers tokens that come only in a GstTensorMeta, exactly as the
 *   core answers the same rows, and refuses tensors that are not tokens
 *   with a reason;
 * - npullm's video pass-through (video_sink -> video_src) hands every frame
 *   on at once, carrying the latest answer as a GstAnalyticsClsMtd, also
 *   while the next answer waits for its tokens.
 */
#include <math.h>
#include <string.h>
#include <glib/gstdio.h>

#include "npucheck.h"
#include <gst/check/gstharness.h>
#include <gst/analytics/analytics.h>
#include <npu/npu.h>
#include <core/models/npullmsession.h>
#include <core/formats/npugguf.h>
#include "../tools/npumodelgen.h"

static gchar *tmpdir, *text_path, *vision_path, *audio_path;
static guint n_embd;

static void
setup (void)
{
  NpuTextModelParams tp;
  NpuMmprojParams mp;
  NpuAudioMmprojParams ap;
  GError *error = NULL;

  npu_check_load_plugins ();
  tmpdir = g_dir_make_tmp ("npuanalytics-XXXXXX", NULL);
  text_path = g_build_filename (tmpdir, "text.gguf", NULL);
  vision_path = g_build_filename (tmpdir, "vision.gguf", NULL);
  audio_path = g_build_filename (tmpdir, "audio.gguf", NULL);
  fail_unless (npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_LLAMA, "tiny",
          &error));
  fail_unless (npu_model_gen_write_text (&tp, text_path, NULL, &error), "%s",
      error ? error->message : "");
  n_embd = tp.dim;
  fail_unless (npu_model_gen_mmproj_preset (&mp, NPU_MODEL_PROJECTOR_MLP,
          "tiny", &error));
  fail_unless (npu_model_gen_write_mmproj (&mp, text_path, vision_path, NULL,
          &error), "%s", error ? error->message : "");
  fail_unless (npu_model_gen_audio_preset (&ap,
          NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, "tiny", &error), "%s",
      error ? error->message : "");
  fail_unless (npu_model_gen_write_audio_mmproj (&ap, text_path, audio_path,
          NULL, &error), "%s", error ? error->message : "");
}

static void
teardown (void)
{
  g_unlink (text_path);
  g_unlink (vision_path);
  g_unlink (audio_path);
  g_rmdir (tmpdir);
  g_free (text_path);
  g_free (vision_path);
  g_free (audio_path);
  g_free (tmpdir);
}

/* ------------------------------------------------------------------------
 * Token buffers carry a GstTensorMeta over their own memory
 */
static void
collect_buffer (GstElement * sink, GstBuffer * buf, GstPad * pad,
    gpointer data)
{
  g_ptr_array_add (data, gst_buffer_ref (buf));
}

static GPtrArray *
run_tokenizer (const gchar * desc)
{
  GstElement *pipeline = gst_parse_launch (desc, NULL), *sink;
  GPtrArray *bufs = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_buffer_unref);
  GstMessage *msg;

  fail_unless (pipeline != NULL, "%s", desc);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  g_object_set (sink, "signal-handoffs", TRUE, NULL);
  g_signal_connect (sink, "handoff", G_CALLBACK (collect_buffer), bufs);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS, "%s", desc);
  gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  return bufs;
}

/* The tensor describes @buf's tokens: one float32 row-major tensor
 * [n_tokens, n_embd] named @id, whose buffer holds the same GstMemory. */
static void
check_token_tensor (GstBuffer * buf, const gchar * id)
{
  GstTensorMeta *tmeta = gst_buffer_get_tensor_meta (buf);
  const GstTensor *t;
  GstMapInfo tmap, bmap;
  gsize size = gst_buffer_get_size (buf), i;
  const gfloat *f;

  fail_unless (tmeta != NULL, "a token buffer without a GstTensorMeta");
  fail_unless_equals_uint64 (tmeta->num_tensors, 1);
  t = gst_tensor_meta_get (tmeta, 0);
  fail_unless_equals_string (g_quark_to_string (t->id), id);
  fail_unless_equals_int (t->data_type, GST_TENSOR_DATA_TYPE_FLOAT32);
  fail_unless_equals_int (t->dims_order, GST_TENSOR_DIM_ORDER_ROW_MAJOR);
  fail_unless_equals_int (t->layout, GST_TENSOR_LAYOUT_CONTIGUOUS);
  fail_unless_equals_uint64 (t->num_dims, 2);
  /* rows as wide as the text model's embedding, as many as fill the
   * buffer */
  fail_unless_equals_uint64 (t->dims[1], n_embd);
  fail_unless (t->dims[0] > 0);
  fail_unless_equals_uint64 (t->dims[0] * t->dims[1] * sizeof (gfloat), size);
  /* no copy: the tensor's buffer holds the token buffer's own memory */
  fail_unless_equals_int (gst_buffer_n_memory (t->data), 1);
  fail_unless (gst_buffer_peek_memory (t->data, 0) ==
      gst_buffer_peek_memory (buf, 0), "the tensor holds a copy");
  /* mapped first, the tensor waits for the tokens like the buffer does */
  fail_unless (gst_buffer_map (t->data, &tmap, GST_MAP_READ));
  fail_unless (gst_buffer_map (buf, &bmap, GST_MAP_READ));
  fail_unless (tmap.data == bmap.data && tmap.size == size);
  f = (const gfloat *) tmap.data;
  for (i = 0; i < size / sizeof (gfloat); i++)
    fail_unless (isfinite (f[i]), "token value %" G_GSIZE_FORMAT " is %f", i,
        f[i]);
  gst_buffer_unmap (buf, &bmap);
  gst_buffer_unmap (t->data, &tmap);
}

GST_START_TEST (test_tokenizers_carry_tensor_meta)
{
  gchar *desc;
  GPtrArray *bufs;
  guint i;

  desc = g_strdup_printf ("videotestsrc num-buffers=3 ! video/x-raw,"
      "format=RGB,width=64,height=48 ! npuvisiontok model=%s ! "
      "fakesink name=sink", vision_path);
  bufs = run_tokenizer (desc);
  fail_unless_equals_int (bufs->len, 3);
  for (i = 0; i < bufs->len; i++)
    check_token_tensor (g_ptr_array_index (bufs, i), "npu-vision-tokens");
  g_ptr_array_unref (bufs);
  g_free (desc);

  desc = g_strdup_printf ("audiotestsrc num-buffers=10 samplesperbuffer=1600 "
      "wave=sine ! audio/x-raw,format=S16LE,rate=16000,channels=1 ! "
      "npuaudiotok model=%s vad=false chunk-duration=500000000 n-threads=1 ! "
      "fakesink name=sink", audio_path);
  bufs = run_tokenizer (desc);
  /* 1 s of audio in chunks of 0.5 s */
  fail_unless_equals_int (bufs->len, 2);
  for (i = 0; i < bufs->len; i++)
    check_token_tensor (g_ptr_array_index (bufs, i), "npu-audio-tokens");
  g_ptr_array_unref (bufs);
  g_free (desc);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * npullm reads tokens from a GstTensorMeta
 */
static gboolean
collect_text (const gchar * text, gsize len, gpointer user_data)
{
  g_string_append_len (user_data, text, len);
  return TRUE;
}

/* The answer the core gives for @rows, computed without the element */
static gchar *
direct_answer (const gchar * prompt, guint max_tokens, GBytes * rows)
{
  NpuGguf *gguf = npu_gguf_open (text_path, NULL);
  NpuLlmModel *model;
  NpuLlmSessionParams p;
  NpuLlmSession *s;
  NpuQueue *q = npu_queue_new (npu_device_get_cpu (0), "ref");
  GString *out = g_string_new (NULL);
  NpuLlmMedia m = { 0, };
  GError *error = NULL;

  npu_device_unref (npu_queue_get_device (q));
  fail_unless (gguf != NULL);
  model = npu_llm_model_new_from_file (text_path, NPU_LLM_LOAD_IN_PLACE,
      &error);
  fail_unless (model != NULL, "%s", error ? error->message : "");
  npu_llm_session_params_init (&p);
  p.max_tokens = max_tokens;
  p.chat_template = g_strdup ("auto");
  p.sampler.temperature = 0;
  p.sampler.top_k = 40;
  p.sampler.top_p = 0.95;
  p.sampler.min_p = 0.05;
  p.sampler.repeat_penalty = 1.0;
  s = npu_llm_session_new (gguf, model, &p, &error);
  fail_unless (s != NULL, "%s", error ? error->message : "");
  m.rows = g_bytes_get_data (rows, NULL);
  m.n_rows = g_bytes_get_size (rows) / (n_embd * sizeof (gfloat));
  fail_unless (npu_llm_session_answer (s, q, prompt, &m, 1, collect_text,
          out, NULL, &error), "%s", error ? error->message : "");
  npu_llm_session_params_clear (&p);
  npu_llm_session_free (s);
  npu_queue_free (q);
  npu_gguf_free (gguf);
  return g_string_free (out, FALSE);
}

/* Token rows of the model's width, different for every @seed */
static GBytes *
make_rows (guint n_rows, guint seed)
{
  gfloat *rows = g_new (gfloat, n_rows * n_embd);
  guint i;

  for (i = 0; i < n_rows * n_embd; i++)
    rows[i] = 2.0f * ((((i + 1) * (7919 + 104729 * seed)) % 200) / 100.0f -
        1.0f);
  return g_bytes_new_take (rows, (gsize) n_rows * n_embd * sizeof (gfloat));
}

/* A video frame (64 bytes of GRAY8 8x8, not tokens) carrying @rows only in
 * a GstTensorMeta, as an analytics element would hand them on */
static GstBuffer *
frame_with_tensor (GBytes * rows, GstTensorDataType type, gsize width,
    GstClockTime pts)
{
  GstBuffer *frame = gst_buffer_new_allocate (NULL, 64, NULL);
  GstBuffer *data = gst_buffer_new_memdup (g_bytes_get_data (rows, NULL),
      g_bytes_get_size (rows));
  gsize elem = type == GST_TENSOR_DATA_TYPE_FLOAT32 ? 4 : 1;
  gsize dims[3] = { 1, g_bytes_get_size (rows) / elem / width, width };
  GstTensor **tensors = g_new (GstTensor *, 1);

  gst_buffer_memset (frame, 0, 0x80, 64);
  gst_buffer_resize (data, 0, dims[1] * dims[2] * elem);
  /* an id of another element's: the only tensor is taken */
  tensors[0] = gst_tensor_new_simple (g_quark_from_static_string
      ("some-model-output"), type, data, GST_TENSOR_DIM_ORDER_ROW_MAJOR, 3,
      dims);
  fail_unless (tensors[0] != NULL);
  gst_tensor_meta_set (gst_buffer_add_tensor_meta (frame), 1, tensors);
  GST_BUFFER_PTS (frame) = pts;
  GST_BUFFER_DURATION (frame) = GST_SECOND / 10;
  return frame;
}

/* output=response: one buffer an answer */
static gchar *
pull_answer (GstHarness * h)
{
  GstBuffer *buf = gst_harness_pull (h);
  GstMapInfo map;
  gchar *text;

  fail_unless (buf != NULL);
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  text = g_strndup ((const gchar *) map.data, map.size);
  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);
  return text;
}

/* The bus's messages hold the harness's pads, whose last unref posts on
 * the element's bus: dropped first, not while the element swaps its bus
 * under its lock. */
static void
drop_element (GstElement * llm)
{
  GstBus *bus = gst_element_get_bus (llm);

  gst_bus_set_flushing (bus, TRUE);
  gst_object_unref (bus);
  gst_object_unref (llm);
}

/* npullm on a harness, its vision pad taking video frames */
static GstHarness *
new_llm_harness (GstElement ** llm_out)
{
  GstElement *llm = gst_element_factory_make ("npullm", NULL);
  GstBus *bus = gst_bus_new ();
  GstHarness *h;

  fail_unless (llm != NULL);
  g_object_set (llm, "model", text_path, "prompt", "What is this?",
      "max-tokens", 12, NULL);
  gst_util_set_object_arg (G_OBJECT (llm), "output", "response");
  gst_element_set_bus (llm, bus);
  gst_object_unref (bus);
  h = gst_harness_new_with_element (llm, "vision", "src");
  gst_harness_set_src_caps_str (h, "video/x-raw,format=GRAY8,width=8,"
      "height=8,framerate=10/1");
  *llm_out = llm;
  return h;
}

/* The error npullm posts for @buf (taken), on a harness of its own */
static gchar *
error_for (GstBuffer * buf)
{
  GstElement *llm;
  GstHarness *h = new_llm_harness (&llm);
  GstBus *bus = gst_element_get_bus (llm);
  GstMessage *msg;
  GError *err = NULL;
  gchar *text;

  gst_harness_push (h, buf);
  msg = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND, GST_MESSAGE_ERROR);
  fail_unless (msg != NULL, "no error");
  gst_message_parse_error (msg, &err, NULL);
  text = g_strdup (err->message);
  g_error_free (err);
  gst_message_unref (msg);
  gst_harness_teardown (h);
  drop_element (llm);
  gst_object_unref (bus);
  return text;
}

GST_START_TEST (test_npullm_tokens_from_tensor_meta)
{
  GBytes *rows = make_rows (5, 1), *other = make_rows (5, 2);
  gchar *want = direct_answer ("What is this?", 12, rows);
  gchar *not_want = direct_answer ("What is this?", 12, other);
  gchar *got, *msg;
  GstElement *llm;
  GstHarness *h;

  /* otherwise the test could not tell the rows apart */
  fail_if (g_str_equal (want, not_want), "%s", want);

  h = new_llm_harness (&llm);
  fail_unless_equals_int (gst_harness_push (h, frame_with_tensor (rows,
              GST_TENSOR_DATA_TYPE_FLOAT32, n_embd, GST_SECOND)), GST_FLOW_OK);
  got = pull_answer (h);
  fail_unless_equals_string (got, want);
  g_free (got);
  gst_harness_teardown (h);
  drop_element (llm);

  /* Tensors that are not tokens: refused with the reason */
  msg = error_for (frame_with_tensor (rows, GST_TENSOR_DATA_TYPE_UINT8,
          n_embd, 0));
  fail_unless (strstr (msg, "uint8") && strstr (msg, "not contiguous float32"),
      "%s", msg);
  g_free (msg);
  msg = error_for (frame_with_tensor (rows, GST_TENSOR_DATA_TYPE_FLOAT32,
          n_embd / 2, 0));
  fail_unless (strstr (msg, "do not fit the model"), "%s", msg);
  g_free (msg);
  /* a video frame without a GstTensorMeta holds no tokens */
  msg = error_for (gst_buffer_new_allocate (NULL, 64, NULL));
  fail_unless (strstr (msg, "carries no GstTensorMeta"), "%s", msg);
  g_free (msg);

  g_bytes_unref (rows);
  g_bytes_unref (other);
  g_free (want);
  g_free (not_want);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * The video pass-through
 */

/* The answers a frame carries as GstAnalyticsClsMtd (NULL: none) */
static gchar *
caption_of (GstBuffer * frame)
{
  GstAnalyticsRelationMeta *rmeta =
      gst_buffer_get_analytics_relation_meta (frame);
  GstAnalyticsClsMtd cls;
  gpointer state = NULL;
  GString *s;

  if (!rmeta)
    return NULL;
  s = g_string_new (NULL);
  while (gst_analytics_relation_meta_iterate (rmeta, &state,
          gst_analytics_cls_mtd_get_mtd_type (), &cls)) {
    fail_unless_equals_int (gst_analytics_cls_mtd_get_length (&cls), 1);
    fail_unless (gst_analytics_cls_mtd_get_level (&cls, 0) == 1.0f);
    if (s->len)
      g_string_append (s, " | ");
    g_string_append (s, g_quark_to_string (gst_analytics_cls_mtd_get_quark
            (&cls, 0)));
  }
  return g_string_free (s, FALSE);
}

static GstBuffer *
push_frame (GstHarness * hv, guint n)
{
  GstBuffer *frame = gst_buffer_new_allocate (NULL, 64, NULL), *out;
  GstMapInfo a, b;

  gst_buffer_memset (frame, 0, n, 64);
  GST_BUFFER_PTS (frame) = n * GST_SECOND / 10;
  fail_unless_equals_int (gst_harness_push (hv, gst_buffer_ref (frame)),
      GST_FLOW_OK);
  /* handed on at once: already there when the push returns */
  out = gst_harness_try_pull (hv);
  fail_unless (out != NULL, "frame %u was held back", n);
  fail_unless_equals_uint64 (GST_BUFFER_PTS (out), n * GST_SECOND / 10);
  /* the frame itself, not a copy of its pixels */
  fail_unless (gst_buffer_map (frame, &a, GST_MAP_READ));
  fail_unless (gst_buffer_map (out, &b, GST_MAP_READ));
  fail_unless (a.data == b.data, "the frame's pixels were copied");
  gst_buffer_unmap (frame, &a);
  gst_buffer_unmap (out, &b);
  gst_buffer_unref (frame);
  return out;
}

static void
wait_answers (GstElement * llm, guint n)
{
  gint64 end = g_get_monotonic_time () + 60 * G_TIME_SPAN_SECOND;
  guint got;

  for (;;) {
    g_object_get (llm, "n-answers", &got, NULL);
    if (got >= n)
      break;
    fail_unless (g_get_monotonic_time () < end, "answer %u never came", n);
    g_usleep (2000);
  }
}

GST_START_TEST (test_video_pad_carries_latest_answer)
{
  GBytes *rows1 = make_rows (4, 3), *rows2 = make_rows (4, 4);
  gchar *want1 = direct_answer ("What is this?", 12, rows1);
  gchar *want2 = direct_answer ("What is this?", 12, rows2);
  GstElement *llm = gst_element_factory_make ("npullm", NULL);
  GstHarness *hv;
  GstPad *vsrc, *vsink;
  GstSegment segment;
  GstCaps *caps;
  GstBuffer *frame, *rows_buf;
  NpuFence *fence = npu_fence_new ();
  gchar *got;

  fail_if (g_str_equal (g_strstrip (want1), g_strstrip (want2)), "%s",
      want1);
  fail_unless (*want1 && *want2, "an empty answer cannot be seen");
  g_object_set (llm, "model", text_path, "prompt", "What is this?",
      "max-tokens", 12, NULL);
  /* the tokens' pad by hand (a second harness cannot share the element),
   * requested before the element starts: an npullm without media pads
   * answers its prompt alone */
  vsink = gst_element_request_pad_simple (llm, "vision");
  /* frames in, frames out; the text pad is left unlinked */
  hv = gst_harness_new_with_element (llm, "video_sink", "video_src");
  gst_harness_set_src_caps_str (hv, "video/x-raw,format=GRAY8,width=8,"
      "height=8,framerate=10/1");
  vsrc = gst_pad_new ("tokens-src", GST_PAD_SRC);
  fail_unless_equals_int (gst_pad_link (vsrc, vsink), GST_PAD_LINK_OK);
  fail_unless (gst_pad_set_active (vsrc, TRUE));
  fail_unless (gst_pad_push_event (vsrc, gst_event_new_stream_start ("t")));
  caps = gst_caps_from_string ("other/tensors,format=static,num_tensors=1,"
      "types=float32");
  fail_unless (gst_pad_push_event (vsrc, gst_event_new_caps (caps)));
  gst_caps_unref (caps);
  gst_segment_init (&segment, GST_FORMAT_TIME);
  fail_unless (gst_pad_push_event (vsrc, gst_event_new_segment (&segment)));

  /* before any answer: nothing to carry */
  frame = push_frame (hv, 0);
  fail_unless (caption_of (frame) == NULL);
  gst_buffer_unref (frame);

  rows_buf = gst_buffer_new_memdup (g_bytes_get_data (rows1, NULL),
      g_bytes_get_size (rows1));
  fail_unless_equals_int (gst_pad_push (vsrc, rows_buf), GST_FLOW_OK);
  wait_answers (llm, 1);
  frame = push_frame (hv, 1);
  got = caption_of (frame);
  fail_unless_equals_string (got, want1);
  g_free (got);
  gst_buffer_unref (frame);

  /* The next tokens are not ready (their fence is pending): frames go on,
   * at once, with the answer they have */
  rows_buf = gst_buffer_new_memdup (g_bytes_get_data (rows2, NULL),
      g_bytes_get_size (rows2));
  gst_buffer_add_npu_fence_meta (rows_buf, fence);
  fail_unless_equals_int (gst_pad_push (vsrc, rows_buf), GST_FLOW_OK);
  frame = push_frame (hv, 2);
  got = caption_of (frame);
  fail_unless_equals_string (got, want1);
  g_free (got);
  gst_buffer_unref (frame);
  npu_fence_signal (fence);
  wait_answers (llm, 2);
  frame = push_frame (hv, 3);
  got = caption_of (frame);
  fail_unless_equals_string (got, want2);
  g_free (got);
  gst_buffer_unref (frame);

  gst_pad_set_active (vsrc, FALSE);
  gst_pad_unlink (vsrc, vsink);
  gst_element_release_request_pad (llm, vsink);
  gst_object_unref (vsink);
  gst_object_unref (vsrc);
  gst_harness_teardown (hv);
  gst_object_unref (llm);
  npu_fence_unref (fence);
  g_bytes_unref (rows1);
  g_bytes_unref (rows2);
  g_free (want1);
  g_free (want2);
}

GST_END_TEST;

static Suite *
analytics_suite (void)
{
  Suite *s = suite_create ("analytics");
  TCase *tc = tcase_create ("general");

  tcase_set_timeout (tc, 120);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_tokenizers_carry_tensor_meta);
  tcase_add_test (tc, test_npullm_tokens_from_tensor_meta);
  tcase_add_test (tc, test_video_pad_carries_latest_answer);
  suite_add_tcase (s, tc);
  return s;
}

GST_CHECK_MAIN (analytics);
