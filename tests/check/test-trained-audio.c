/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the trained audio model of tests/models/ through the elements
 *
 * Held-out sounds (sine frequencies, levels, rates and channel counts
 * training never heard, and words spoken by espeak-ng voices, speeds,
 * pitches and noise levels it never heard: tests/models/audio-heldout.txt,
 * written by tests/train/train.py with the words each answer must contain)
 * go through "audiotestsrc ! npuaudiotok ! npullm" and "filesrc ! wavparse
 * ! npuaudiotok ! npullm" (one leg), and again from memfds under
 * audio/x-raw(memory:DMABuf) caps through appsrc.  At least 95 % of the
 * answers in each leg must name the
 * sound (the tone's frequency on the ladder, the noise's colour, the
 * word) and end with the end-of-generation token.  A bug that keeps the
 * numbers finite but wrong (mel bins in the wrong order, a resampler off
 * by a rate, tokens spliced at the wrong place) costs answers here.
 */
#include <gst/check/gstcheck.h>
#include <gst/allocators/allocators.h>
#include <gst/audio/audio.h>
#include <gst/base/gstadapter.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npucheck.h"
#include "npuanswercheck.h"
#include <core/device/npubackend.h>
#include "tests/npuaudioticks.h"

#define TEXT_MODEL NPU_MODELS_DIR "/videotestsrc-text.gguf"
#define AUDIO_MODEL NPU_MODELS_DIR "/audiotestsrc-mmproj.gguf"
#define HELDOUT NPU_MODELS_DIR "/audio-heldout.txt"
#define PROMPT "What do you hear?"

typedef struct
{
  gchar *source;
  gchar **words;
} Case;

static GPtrArray *cases;

static void
case_free (Case * c)
{
  g_free (c->source);
  g_strfreev (c->words);
  g_free (c);
}

static void
setup (void)
{
  GPtrArray *rows;
  guint i;

  npu_check_load_plugins ();
  rows = npu_heldout_read (HELDOUT, 2);
  cases = g_ptr_array_new_with_free_func ((GDestroyNotify) case_free);
  for (i = 0; i < rows->len; i++) {
    gchar **f = g_ptr_array_index (rows, i);
    /* the WAV files are named relative to the list */
    gchar **parts = g_strsplit (f[0], "location=", 2);
    Case *c = g_new0 (Case, 1);

    c->source = parts[1] ? g_strdup_printf ("%slocation=%s/%s", parts[0],
        NPU_MODELS_DIR, parts[1]) : g_strdup (parts[0]);
    c->words = g_strsplit (f[1], ",", -1);
    g_ptr_array_add (cases, c);
    g_strfreev (parts);
  }
  g_ptr_array_free (rows, TRUE);
  fail_unless (cases->len >= 60, "only %u held-out cases", cases->len);
}

static void
teardown (void)
{
  g_ptr_array_free (cases, TRUE);
}

/* Whether to play case @i.  All of them, for the accuracy.  Under valgrind
 * (each must then be right) the cases that run the code paths the others
 * repeat, for leaks and memory errors: the first of each sample format,
 * rate and channel count audiotestsrc gives (the down-mix and the
 * resampler differ), and the first spoken word (filesrc ! wavparse). */
static gboolean
to_play (guint i)
{
  const Case *c = g_ptr_array_index (cases, i);
  const gchar *caps = strrchr (c->source, '!');
  guint j;

  if (!g_getenv ("NPU_UNDER_VALGRIND"))
    return TRUE;
  for (j = 0; j < i; j++) {
    const Case *e = g_ptr_array_index (cases, j);
    const gchar *e_caps = strrchr (e->source, '!');

    if (g_str_has_prefix (c->source, "filesrc") ?
        g_str_has_prefix (e->source, "filesrc") :
        (caps && e_caps && !strcmp (caps, e_caps)))
      return FALSE;
  }
  return TRUE;
}

/* Completes the unwritten frame of audiotestsrc's ticks
 * (tests/npuaudioticks.h: the training renderer does the same), and checks
 * that a ticks case has the audiotestsrc that needs it. */
static void
fix_ticks (GstElement * pipeline, const gchar * source)
{
  guint n = npu_audio_ticks_complete (pipeline);

  fail_unless_equals_int (n, strstr (source, "wave=ticks") ? 1 : 0);
}

/* The case's audio as its source gives it: one buffer of all its samples
 * in a memfd wrapped as dma-buf memory (as a capture device's dma-buf
 * arrives), and its caps under the memory:DMABuf feature. */
static GstBuffer *
render_to_dmabuf (const Case * c, gchar ** caps_str)
{
  gchar *desc = g_strdup_printf ("%s ! appsink name=sink sync=false",
      c->source);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *sink;
  GstAllocator *dmabuf_alloc = gst_dmabuf_allocator_new ();
  GstAdapter *adapter = gst_adapter_new ();
  GstCaps *caps = NULL;
  GstSample *sample;
  GstBuffer *buf;
  GstMapInfo map;
  gsize size;
  int fd;

  fail_unless (pipeline != NULL, "%s", desc);
  fix_ticks (pipeline, c->source);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  while ((sample = npu_answer_pull_sample (sink))) {
    if (!caps)
      caps = gst_caps_copy (gst_sample_get_caps (sample));
    gst_adapter_push (adapter, gst_buffer_ref (gst_sample_get_buffer (sample)));
    gst_sample_unref (sample);
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  fail_unless (caps != NULL, "%s gave no audio", c->source);
  size = gst_adapter_available (adapter);
  fd = memfd_create ("audio", MFD_CLOEXEC);
  fail_unless (fd >= 0 && ftruncate (fd, size) == 0);
  buf = gst_buffer_new ();
  gst_buffer_append_memory (buf, gst_dmabuf_allocator_alloc (dmabuf_alloc,
          fd, size));
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_WRITE));
  gst_adapter_copy (adapter, map.data, 0, size);
  gst_buffer_unmap (buf, &map);
  GST_BUFFER_PTS (buf) = 0;
  gst_caps_set_features (caps, 0,
      gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_DMABUF, NULL));
  *caps_str = gst_caps_to_string (caps);
  gst_caps_unref (caps);
  g_object_unref (adapter);
  gst_object_unref (dmabuf_alloc);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);
  return buf;
}

/* npuaudiotok's device for play() */
static const gchar *audio_device = "cpu";

/* Plays the case's source (or, given @buf, that audio as one dma-buf
 * under @caps_str through appsrc) into npuaudiotok and npullm; returns
 * the answer, and whether it ended with the end-of-generation token
 * (npullm-stats' "end").  vad=false: silence is a sound to name too.  One
 * chunk: every clip is shorter than the model's 1 s window. */
static gchar *
play (const Case * c, GstBuffer * buf, const gchar * caps_str, gboolean * eog)
{
  gboolean dmabuf = buf != NULL;
  gchar *source, *desc, *answer;
  GstElement *pipeline, *sink, *tok;
  guint64 chunks = 0, dmabufs = 0, copied = 1;

  if (dmabuf) {
    source = g_strdup_printf ("appsrc name=src format=time caps=\"%s\"",
        caps_str);
  } else {
    source = g_strdup (c->source);
  }
  desc = g_strdup_printf ("%s ! npuaudiotok name=tok device=%s model=%s "
      "vad=false chunk-duration=1000000000 ! llm.audio "
      "npullm name=llm model=%s prompt=\"%s\" max-tokens=24 ! "
      "appsink name=sink sync=false", source, audio_device, AUDIO_MODEL,
      TEXT_MODEL, PROMPT);
  pipeline = gst_parse_launch (desc, NULL);
  fail_unless (pipeline != NULL, "%s", desc);
  if (!dmabuf)
    fix_ticks (pipeline, c->source);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  if (dmabuf) {
    GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
    GstFlowReturn flow;

    /* the action signal takes no ownership: the caller's buffer stays
     * its own, to play again */
    g_signal_emit_by_name (src, "push-buffer", buf, &flow);
    fail_unless_equals_int (flow, GST_FLOW_OK);
    g_signal_emit_by_name (src, "end-of-stream", &flow);
    gst_object_unref (src);
  }
  answer = npu_answer_collect (pipeline, sink, desc, eog);
  /* one chunk, one answer: a clip cut in two would be answered twice */
  g_object_get (tok, "chunks-processed", &chunks, "buffers-dmabuf",
      &dmabufs, "bytes-copied", &copied, NULL);
  fail_unless_equals_uint64 (chunks, 1);
  fail_unless_equals_uint64 (dmabufs, dmabuf ? 1 : 0);
  fail_unless_equals_uint64 (copied, 0);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (tok);
  gst_object_unref (pipeline);
  g_free (desc);
  g_free (source);
  return answer;
}

/* The case's answer from its source, or, with @dmabuf, from its audio
 * rendered into one dma-buf first */
static gchar *
answer_of (const Case * c, gboolean dmabuf, gboolean * eog)
{
  GstBuffer *buf;
  gchar *caps_str, *answer;

  if (!dmabuf)
    return play (c, NULL, NULL, eog);
  buf = render_to_dmabuf (c, &caps_str);
  answer = play (c, buf, caps_str, eog);
  gst_buffer_unref (buf);
  g_free (caps_str);
  return answer;
}

static void
check_accuracy (gboolean dmabuf)
{
  const gchar *what = dmabuf ? "dmabuf" : "sources";
  guint n = 0, right = 0, i, n_tones = 0;

  for (i = 0; i < cases->len; i++) {
    const Case *c = g_ptr_array_index (cases, i);
    gboolean eog;
    gchar *answer;

    if (!to_play (i))
      continue;
    if (g_str_has_prefix (c->source, "audiotestsrc"))
      n_tones++;
    answer = answer_of (c, dmabuf, &eog);
    if (npu_answer_judge (what, c->source, answer, eog, c->words))
      right++;
    n++;
    g_free (answer);
  }
  /* both kinds of sound are there */
  fail_unless (n_tones > 0 && n_tones < n, "%u tones of %u cases", n_tones, n);
  npu_answer_check_rate (what, right, n);
}

/* every held-out sound from its own source: audiotestsrc, or filesrc !
 * wavparse for the spoken words */
GST_START_TEST (test_sounds_named)
{
  check_accuracy (FALSE);
}

GST_END_TEST;

/* every held-out sound, tones and words, as dma-buf memory */
GST_START_TEST (test_dmabuf_named)
{
  check_accuracy (TRUE);
}

GST_END_TEST;

/* The audio encoder on the Vulkan device gives every sound the CPU's
 * answer, word for word (lavapipe in CI: NPU_REQUIRE_VULKAN=1 makes a
 * missing device a failure; skipped under valgrind, where lavapipe's JIT
 * takes minutes and the unit tests check the Vulkan path's memory).  Both
 * hear the same samples, rendered once: audiotestsrc's noises are new
 * random samples each time it plays (its generator has no seed), and two
 * draws are two different sounds. */
GST_START_TEST (test_vulkan_same_answers)
{
  NpuDevice *dev;
  guint i, n = 0;

  if (g_getenv ("NPU_UNDER_VALGRIND"))
    return;
  dev = npu_device_open ("vulkan", 1, NULL);
  if (!dev) {
    fail_if (g_strcmp0 (g_getenv ("NPU_REQUIRE_VULKAN"), "1") == 0,
        "no Vulkan device");
    return;
  }
  npu_device_unref (dev);
  for (i = 0; i < cases->len; i++) {
    const Case *c = g_ptr_array_index (cases, i);
    gboolean eog_cpu, eog_vk;
    gchar *cpu, *vk, *caps_str;
    GstBuffer *buf;

    if (!to_play (i))
      continue;
    buf = render_to_dmabuf (c, &caps_str);
    audio_device = "cpu";
    cpu = play (c, buf, caps_str, &eog_cpu);
    audio_device = "vulkan";
    vk = play (c, buf, caps_str, &eog_vk);
    audio_device = "cpu";
    gst_buffer_unref (buf);
    g_free (caps_str);
    fail_unless_equals_string (vk, cpu);
    fail_unless_equals_int (eog_vk, eog_cpu);
    g_free (cpu);
    g_free (vk);
    n++;
  }
  fail_unless (n > 0);
}

GST_END_TEST;

static Suite *
trained_audio_suite (void)
{
  Suite *s = suite_create ("trained-audio");
  TCase *tc = tcase_create ("audio");

  suite_add_tcase (s, tc);
  tcase_set_timeout (tc, 300);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_sounds_named);
  tcase_add_test (tc, test_dmabuf_named);
  tcase_add_test (tc, test_vulkan_same_answers);
  return s;
}

GST_CHECK_MAIN (trained_audio);
