/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the trained models of tests/models/ through the elements
 *
 * Held-out frames (colours, ball positions, sizes and formats training
 * never saw: tests/models/vision-heldout.txt, written by
 * tests/train/train.py with the words each answer must contain) go through
 * "videotestsrc ! npuvisiontok ! npullm", and again from a memfd under
 * video/x-raw(memory:DMABuf) caps through appsrc.  At least 95 % of the
 * answers must name the right pattern, colour and quarter, and end with
 * the end-of-generation token.  A bug that keeps numbers finite but wrong
 * (swapped chroma, a mirrored frame, a prompt tokenised differently from
 * training, media spliced at the wrong place) costs answers here.
 */
#include <gst/check/gstcheck.h>
#include <gst/allocators/allocators.h>
#include <gst/video/video.h>
#include <sys/mman.h>
#include <unistd.h>

#include "npucheck.h"
#include "npuanswercheck.h"

#define TEXT_MODEL NPU_MODELS_DIR "/videotestsrc-text.gguf"
#define VISION_MODEL NPU_MODELS_DIR "/videotestsrc-mmproj.gguf"
#define HELDOUT NPU_MODELS_DIR "/vision-heldout.txt"
#define PROMPT "What do you see?"

typedef struct
{
  gchar *props, *caps;
  guint64 position;
  gchar **words;
} Case;

static GPtrArray *cases;

static void
case_free (Case * c)
{
  g_free (c->props);
  g_free (c->caps);
  g_strfreev (c->words);
  g_free (c);
}

static void
setup (void)
{
  GPtrArray *rows;
  guint i;

  npu_check_load_plugins ();
  rows = npu_heldout_read (HELDOUT, 4);
  cases = g_ptr_array_new_with_free_func ((GDestroyNotify) case_free);
  for (i = 0; i < rows->len; i++) {
    gchar **f = g_ptr_array_index (rows, i);
    Case *c = g_new0 (Case, 1);

    c->props = g_strdup (f[0]);
    c->caps = g_strdup (f[1]);
    c->position = g_ascii_strtoull (f[2], NULL, 10);
    c->words = g_strsplit (f[3], ",", -1);
    g_ptr_array_add (cases, c);
  }
  g_ptr_array_free (rows, TRUE);
  fail_unless (cases->len >= 60, "only %u held-out cases", cases->len);
}

static void
teardown (void)
{
  g_ptr_array_free (cases, TRUE);
}

/* Under valgrind four cases (each must be right) show leaks and memory
 * errors on the same code; the accuracy is measured on all of them
 * otherwise. */
static guint
n_cases (void)
{
  return g_getenv ("NPU_UNDER_VALGRIND") ? MIN (cases->len, 4) : cases->len;
}

/* videotestsrc draws a frame from its frame count (the ball's place
 * depends on it), and a seek sent before the caps are known does not move
 * that count.  So the source runs from frame 0 to the case's frame
 * (num-buffers) and a probe on its pad drops the frames before the case's
 * position, as a sink clips them to a seek's segment: the frame that goes
 * on is the one npu-render-frames rendered for training and the held-out
 * record (30 frames a second, videotestsrc's default). */
static guint
n_buffers (const Case * c)
{
  return gst_util_uint64_scale_ceil (c->position, 30, GST_SECOND) + 1;
}

static GstPadProbeReturn
drop_before (GstPad * pad, GstPadProbeInfo * info, gpointer user_data)
{
  const Case *c = user_data;
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER (info);

  return GST_BUFFER_PTS (buf) < c->position ? GST_PAD_PROBE_DROP :
      GST_PAD_PROBE_OK;
}

static void
start (GstElement * pipeline, GstElement * src, const Case * c)
{
  GstPad *pad = gst_element_get_static_pad (src, "src");

  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, drop_before,
      (gpointer) c, NULL);
  gst_object_unref (pad);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
}

static gchar *
answer_from_videotestsrc (const Case * c, gboolean * eog)
{
  gchar *desc = g_strdup_printf ("videotestsrc name=src num-buffers=%u %s ! "
      "%s ! npuvisiontok model=%s ! llm.vision "
      "npullm name=llm model=%s prompt=\"%s\" max-tokens=24 ! "
      "appsink name=sink sync=false", n_buffers (c), c->props, c->caps,
      VISION_MODEL, TEXT_MODEL, PROMPT);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *src, *sink;
  gchar *answer;

  fail_unless (pipeline != NULL, "%s", desc);
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  start (pipeline, src, c);
  answer = npu_answer_collect (pipeline, sink, desc, eog);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);
  return answer;
}

/* The same frame, rendered by videotestsrc, copied into a memfd wrapped
 * as dma-buf memory (as a camera's dma-buf arrives, with a GstVideoMeta;
 * the element's DMA_BUF_IOCTL_SYNC on a memfd counts as done) and pushed under
 * video/x-raw(memory:DMABuf) caps; npuvisiontok must read it in place. */
static gchar *
answer_from_dmabuf (const Case * c, gboolean * eog)
{
  gchar *desc = g_strdup_printf ("videotestsrc name=src num-buffers=%u %s ! "
      "%s ! appsink name=sink sync=false", n_buffers (c), c->props, c->caps);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *src, *sink, *tok;
  GstAllocator *dmabuf_alloc = gst_dmabuf_allocator_new ();
  GstSample *sample;
  GstVideoInfo info;
  GstVideoFrame in;
  GstBuffer *buf;
  GstMapInfo map;
  GstCaps *caps;
  gchar *caps_str, *answer;
  GstFlowReturn flow;
  guint64 dmabuf_frames = 0, copied = 1;
  gsize size;
  int fd;

  fail_unless (pipeline != NULL, "%s", desc);
  g_free (desc);
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  start (pipeline, src, c);
  sample = npu_answer_pull_sample (sink);
  fail_unless (sample != NULL);
  fail_unless (gst_video_info_from_caps (&info, gst_sample_get_caps (sample)));
  fail_unless (gst_video_frame_map (&in, &info, gst_sample_get_buffer (sample),
          GST_MAP_READ));
  /* the whole buffer, laid out as its GstVideoFrame says */
  size = gst_buffer_get_size (gst_sample_get_buffer (sample));
  fd = memfd_create ("frame", MFD_CLOEXEC);
  fail_unless (fd >= 0 && ftruncate (fd, size) == 0);
  buf = gst_buffer_new ();
  gst_buffer_append_memory (buf, gst_dmabuf_allocator_alloc (dmabuf_alloc,
          fd, size));
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_WRITE));
  fail_unless_equals_uint64 (gst_buffer_extract (gst_sample_get_buffer
          (sample), 0, map.data, size), size);
  gst_buffer_unmap (buf, &map);
  gst_buffer_add_video_meta_full (buf, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_INFO_FORMAT (&in.info), GST_VIDEO_INFO_WIDTH (&in.info),
      GST_VIDEO_INFO_HEIGHT (&in.info), GST_VIDEO_INFO_N_PLANES (&in.info),
      in.info.offset, in.info.stride);
  caps = gst_caps_copy (gst_sample_get_caps (sample));
  gst_caps_set_features (caps, 0,
      gst_caps_features_new (GST_CAPS_FEATURE_MEMORY_DMABUF, NULL));
  caps_str = gst_caps_to_string (caps);
  gst_caps_unref (caps);
  gst_video_frame_unmap (&in);
  gst_sample_unref (sample);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);

  desc = g_strdup_printf ("appsrc name=src format=time caps=\"%s\" ! "
      "npuvisiontok name=tok model=%s ! llm.vision "
      "npullm name=llm model=%s prompt=\"%s\" max-tokens=24 ! "
      "appsink name=sink sync=false", caps_str, VISION_MODEL, TEXT_MODEL,
      PROMPT);
  pipeline = gst_parse_launch (desc, NULL);
  fail_unless (pipeline != NULL, "%s", desc);
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  GST_BUFFER_PTS (buf) = 0;
  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  fail_unless_equals_int (flow, GST_FLOW_OK);
  gst_buffer_unref (buf);
  g_signal_emit_by_name (src, "end-of-stream", &flow);
  answer = npu_answer_collect (pipeline, sink, desc, eog);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  g_object_get (tok, "frames-dmabuf", &dmabuf_frames, "bytes-copied",
      &copied, NULL);
  fail_unless_equals_uint64 (dmabuf_frames, 1);
  fail_unless_equals_uint64 (copied, 0);
  gst_object_unref (tok);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  gst_object_unref (dmabuf_alloc);
  g_free (caps_str);
  g_free (desc);
  return answer;
}

typedef gchar *(*AnswerFunc) (const Case * c, gboolean * eog);

static void
check_accuracy (AnswerFunc answer_of, const gchar * what)
{
  guint n = n_cases (), right = 0, i;

  for (i = 0; i < n; i++) {
    const Case *c = g_ptr_array_index (cases, i);
    gboolean eog;
    gchar *answer = answer_of (c, &eog);
    gchar *input = g_strdup_printf ("videotestsrc %s ! %s (at %"
        G_GUINT64_FORMAT " ns)", c->props, c->caps, c->position);

    if (npu_answer_judge (what, input, answer, eog, c->words))
      right++;
    g_free (input);
    g_free (answer);
  }
  npu_answer_check_rate (what, right, n);
}

GST_START_TEST (test_videotestsrc_named)
{
  check_accuracy (answer_from_videotestsrc, "videotestsrc");
}

GST_END_TEST;

GST_START_TEST (test_dmabuf_named)
{
  check_accuracy (answer_from_dmabuf, "dmabuf");
}

GST_END_TEST;

static Suite *
trained_models_suite (void)
{
  Suite *s = suite_create ("trained-models");
  TCase *tc = tcase_create ("vision");

  suite_add_tcase (s, tc);
  tcase_set_timeout (tc, 300);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_videotestsrc_named);
  tcase_add_test (tc, test_dmabuf_named);
  return s;
}

GST_CHECK_MAIN (trained_models);
