/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: one fuzz input through the elements, for the libFuzzer targets
 * fuzz-tokenbuf and fuzz-caps and for their corpus replay in every normal
 * build (tests/check/test-fuzz-gst.c)
 *
 * Token buffers: the input's first NPU_FUZZ_TOKENS_HEADER bytes say which
 * pad of npullm the buffer goes to, its caps, and the GstNpuTokensMeta
 * (and a GstNpuTensorMeta) it carries; the rest is its payload.  Caps: the
 * input is a caps string, given to each element's sink pads as an
 * accept-caps query and as a caps event.  Either may fail (an error
 * message, a refused event); neither may crash, hang or leak.
 */
#ifndef __NPU_FUZZ_GST_H__
#define __NPU_FUZZ_GST_H__

#include <gst/gst.h>
#include <gst/check/gstharness.h>
#include <npu/npu.h>

#include "../tools/npumodelgen.h"

#include <glib/gstdio.h>
#include <string.h>

#define NPU_FUZZ_TOKENS_HEADER 12

/* The models the inputs run through: a tiny text model and its vision
 * and audio projectors, written once into a temporary directory */
typedef struct
{
  gchar *dir;
  gchar *text, *vision, *audio;
} NpuFuzzModels;

static inline gboolean
npu_fuzz_models_write (NpuFuzzModels * m, GError ** error)
{
  NpuTextModelParams tp;
  NpuMmprojParams mp;
  NpuAudioMmprojParams ap;

  m->dir = g_dir_make_tmp ("npu-fuzz-XXXXXX", error);
  if (!m->dir)
    return FALSE;
  m->text = g_build_filename (m->dir, "text.gguf", NULL);
  m->vision = g_build_filename (m->dir, "vision.gguf", NULL);
  m->audio = g_build_filename (m->dir, "audio.gguf", NULL);
  return npu_model_gen_text_preset (&tp, NPU_MODEL_ARCH_QWEN2, "tiny", error)
      && npu_model_gen_write_text (&tp, m->text, NULL, error)
      && npu_model_gen_mmproj_preset (&mp, NPU_MODEL_PROJECTOR_MLP, "tiny",
      error) && npu_model_gen_write_mmproj (&mp, m->text, m->vision, NULL,
      error) && npu_model_gen_audio_preset (&ap,
      NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, "tiny", error)
      && npu_model_gen_write_audio_mmproj (&ap, m->text, m->audio, NULL, error);
}

#ifdef NPU_FUZZ_PLUGIN_DIR
/* A libFuzzer target's set-up: GStreamer with the plugin of this build,
 * loaded in this process (its coverage), and @m's models written */
static inline void
npu_fuzz_target_init (int *argc, char ***argv, NpuFuzzModels * m)
{
  GError *error = NULL;

  g_setenv ("GST_PLUGIN_PATH_1_0", NPU_FUZZ_PLUGIN_DIR, FALSE);
  g_setenv ("GST_REGISTRY_FORK", "no", FALSE);
  gst_init (argc, argv);
  if (!npu_fuzz_models_write (m, &error))
    g_error ("the fuzz models: %s", error->message);
}
#endif

static inline void
npu_fuzz_models_remove (NpuFuzzModels * m)
{
  g_unlink (m->text);
  g_unlink (m->vision);
  g_unlink (m->audio);
  g_rmdir (m->dir);
  g_free (m->text);
  g_free (m->vision);
  g_free (m->audio);
  g_free (m->dir);
}

static inline guint
npu_fuzz_u16 (const guint8 * p)
{
  return p[0] | (p[1] << 8);
}

/* The header: [0] flags (bit 0: the audio pad, else vision; bit 1: a
 * GstNpuTokensMeta; bit 2: a GstNpuTensorMeta; bit 3: no timestamps;
 * bit 4: a second buffer, the same), [1]
 * modality, [2..3] n_tokens, [4..5] dim, [6] grid width, [7] grid height,
 * [8..9] the tensor meta's ne[0], [10..11] its ne[1] */
static inline GstBuffer *
npu_fuzz_token_buffer (const guint8 * data, gsize size)
{
  const guint8 *payload = data + NPU_FUZZ_TOKENS_HEADER;
  gsize n = size - NPU_FUZZ_TOKENS_HEADER;
  /* an empty payload is a buffer with no memory (memdup of 0 bytes gives
   * NULL, which GstMemory refuses) */
  GstBuffer *buf = n ? gst_buffer_new_memdup (payload, n) : gst_buffer_new ();

  if (!(data[0] & 8)) {
    GST_BUFFER_PTS (buf) = 0;
    GST_BUFFER_DURATION (buf) = GST_SECOND / 10;
  }
  if (data[0] & 2)
    gst_buffer_add_npu_tokens_meta (buf, (GstNpuModality) (data[1] % 4),
        npu_fuzz_u16 (data + 2), npu_fuzz_u16 (data + 4), data[6], data[7],
        0, GST_SECOND / 10);
  if (data[0] & 4) {
    guint64 ne[2] = { npu_fuzz_u16 (data + 8), npu_fuzz_u16 (data + 10) };

    gst_buffer_add_npu_tensor_meta (buf, "fuzz", 2, ne, 0, "f32", "f32", 0,
        1);
  }
  return buf;
}

typedef enum
{
  NPU_FUZZ_HUNG,                /* neither EOS nor an error in time */
  NPU_FUZZ_EOS,
  NPU_FUZZ_ERROR,
} NpuFuzzEnd;

/* Waits (bounded) for the harness's EOS or an error on @bus; an error's
 * message goes to @message (free it) */
static inline NpuFuzzEnd
npu_fuzz_wait_end (GstHarness * h, GstBus * bus, gint64 timeout_us,
    gchar ** message)
{
  gint64 deadline = g_get_monotonic_time () + timeout_us;

  for (;;) {
    GstMessage *msg;
    GstEvent *ev;
    GstBuffer *buf;

    while ((buf = gst_harness_try_pull (h)))
      gst_buffer_unref (buf);
    while ((ev = gst_harness_try_pull_event (h))) {
      gboolean eos = GST_EVENT_TYPE (ev) == GST_EVENT_EOS;

      gst_event_unref (ev);
      if (eos)
        return NPU_FUZZ_EOS;
    }
    msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
    if (msg) {
      GError *err = NULL;

      gst_message_parse_error (msg, &err, NULL);
      *message = g_strdup (err->message);
      g_error_free (err);
      gst_message_unref (msg);
      return NPU_FUZZ_ERROR;
    }
    if (g_get_monotonic_time () > deadline)
      return NPU_FUZZ_HUNG;
    g_usleep (1000);
  }
}

/* One token-buffer input through npullm: how it ended, an error's message
 * in @message (free it).  An input shorter than the header is not run
 * (EOS). */
static inline NpuFuzzEnd
npu_fuzz_tokens_run (const NpuFuzzModels * m, const guint8 * data,
    gsize size, gchar ** message)
{
  GstElement *llm;
  GstHarness *h;
  GstBus *bus;
  gboolean audio;
  NpuFuzzEnd end;

  *message = NULL;
  if (size < NPU_FUZZ_TOKENS_HEADER)
    return NPU_FUZZ_EOS;
  audio = data[0] & 1;
  llm = gst_element_factory_make ("npullm", NULL);
  g_assert (llm != NULL);
  g_object_set (llm, "model", m->text, "prompt", "What is it?",
      "max-tokens", 2, NULL);
  h = gst_harness_new_with_element (llm, audio ? "audio" : "vision", "src");
  bus = gst_bus_new ();
  gst_element_set_bus (llm, bus);
  gst_harness_set_src_caps_str (h, "other/tensors,format=static,"
      "num_tensors=1,types=float32");
  gst_harness_push (h, npu_fuzz_token_buffer (data, size));
  if (data[0] & 16)
    gst_harness_push (h, npu_fuzz_token_buffer (data, size));
  gst_harness_push_event (h, gst_event_new_eos ());
  end = npu_fuzz_wait_end (h, bus, 20 * G_USEC_PER_SEC, message);
  gst_harness_teardown (h);
  /* the teardown's state-changed messages hold the element */
  gst_bus_set_flushing (bus, TRUE);
  gst_object_unref (llm);
  gst_object_unref (bus);
  return end;
}

/* @caps to one sink pad of @factory (its model set, in PAUSED): an
 * caps query filtered by them, and if they are fixed an accept-caps
 * query and the caps event a stream would bring (refused or taken:
 * either is fine) */
static inline void
npu_fuzz_caps_pad (const gchar * factory, const gchar * model,
    const gchar * name, GstCaps * caps)
{
  GstElement *e = gst_element_factory_make (factory, NULL);
  GstPad *sink, *src = gst_pad_new ("fuzz-src", GST_PAD_SRC);
  gboolean requested = FALSE;

  g_assert (e != NULL);
  if (model)
    g_object_set (e, "model", model, NULL);
  sink = gst_element_get_static_pad (e, name);
  if (!sink) {
    sink = gst_element_request_pad_simple (e, name);
    requested = TRUE;
  }
  g_assert (sink != NULL);
  g_assert (gst_pad_link (src, sink) == GST_PAD_LINK_OK);
  gst_pad_set_active (src, TRUE);
  gst_element_set_state (e, GST_STATE_PAUSED);
  gst_pad_push_event (src, gst_event_new_stream_start ("fuzz"));
  gst_caps_unref (gst_pad_query_caps (sink, caps));
  /* both need fixed caps (GStreamer's own precondition) */
  if (gst_caps_is_fixed (caps)) {
    gst_pad_query_accept_caps (sink, caps);
    gst_pad_push_event (src, gst_event_new_caps (caps));
  }
  gst_element_set_state (e, GST_STATE_NULL);
  gst_pad_set_active (src, FALSE);
  gst_pad_unlink (src, sink);
  if (requested)
    gst_element_release_request_pad (e, sink);
  gst_object_unref (sink);
  gst_object_unref (src);
  gst_object_unref (e);
}

/* One caps string through the sink pads of the elements */
static inline void
npu_fuzz_caps_run (const NpuFuzzModels * m, const guint8 * data, gsize size)
{
  gchar *str = g_strndup ((const gchar *) data, size);
  GstCaps *caps = gst_caps_from_string (str);

  g_free (str);
  if (!caps)
    return;
  npu_fuzz_caps_pad ("npuvisiontok", m->vision, "sink", caps);
  npu_fuzz_caps_pad ("npuaudiotok", m->audio, "sink", caps);
  npu_fuzz_caps_pad ("npullm", m->text, "vision", caps);
  npu_fuzz_caps_pad ("npullm", m->text, "audio", caps);
  npu_fuzz_caps_pad ("npullm", m->text, "text", caps);
  npu_fuzz_caps_pad ("npullm", m->text, "weights", caps);
  gst_caps_unref (caps);
}

#endif /* __NPU_FUZZ_GST_H__ */
