/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: tests of the fence meta, and of consumers that must never see
 * unfinished data: plain maps, pipelines, the CPU backend's tasks */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>

#include <gst/gst.h>
#include <gst/check/gstcheck.h>
#include <gst/check/gstharness.h>
#include <gst/allocators/allocators.h>
#include <gst/video/video.h>

#include "npu/gstnpuallocator.h"
#include "npu/gstnpufencemeta.h"
#include <core/device/npubackend.h>
#include "npucheck.h"

#define DATA_SIZE (64 * 1024)

static GstBuffer *
new_npu_buffer (gsize size)
{
  GstAllocator *alloc = gst_npu_allocator_get_default ();
  GstBuffer *buf = gst_buffer_new_allocate (alloc, size, NULL);

  fail_unless (buf != NULL);
  fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (buf, 0)));
  gst_object_unref (alloc);
  return buf;
}

/* The producer's own view of a buffer's (single) NPU memory: maps it once
 * before any fence is set; the mapping is kept for the memory's life. */
static guint8 *
producer_view (GstBuffer * buf)
{
  GstMapInfo map;
  guint8 *data;

  fail_unless (gst_buffer_map (buf, &map, GST_MAP_WRITE));
  data = map.data;
  gst_buffer_unmap (buf, &map);
  return data;
}

/* Watches for a fence's death: a fence dropped unsignalled cancels its
 * callbacks, so the callback running with CANCELLED proves the last
 * reference went. */
static void
fence_gone_cb (NpuFence * fence, const GError * error, gpointer user_data)
{
  if (error && g_error_matches (error, NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_CANCELLED))
    g_atomic_int_set ((gint *) user_data, 1);
}

/* ------------------------------------------------------------------------
 * A slow producer: writes @value into @data in chunks, then signals
 */
typedef struct
{
  guint8 *data;
  gsize size;
  guint8 value;
  guint delay_ms;
  NpuFence *before;             /* signalled first, if set */
  NpuFence *fence;
} Producer;

static gpointer
producer_thread (gpointer user_data)
{
  Producer *p = user_data;
  gsize i, chunk = MAX (p->size / 8, 1);

  if (p->before)
    npu_fence_signal (p->before);
  for (i = 0; i < p->size; i += chunk) {
    memset (p->data + i, p->value, MIN (chunk, p->size - i));
    g_usleep (p->delay_ms * 1000 / 8);
  }
  npu_fence_signal (p->fence);
  return NULL;
}

static void
check_filled (const guint8 * data, gsize size, guint8 value)
{
  gsize i;

  for (i = 0; i < size; i++)
    if (data[i] != value)
      fail ("byte %" G_GSIZE_FORMAT " is %u, not %u: unfinished data seen",
          i, data[i], value);
}

/* ------------------------------------------------------------------------
 * The meta itself
 */
GST_START_TEST (test_attach_get)
{
  GstBuffer *buf = new_npu_buffer (4096);
  NpuFence *fence = npu_fence_new (), *other = npu_fence_new (), *got;
  GstNpuFenceMeta *meta;
  gint gone = 0;

  fail_unless (gst_buffer_get_npu_fence_meta (buf) == NULL);
  fail_unless (gst_npu_buffer_get_fence (buf) == NULL);
  fail_unless (gst_npu_buffer_wait (buf, 0, NULL));

  npu_fence_add_callback (fence, fence_gone_cb, &gone);
  meta = gst_buffer_add_npu_fence_meta (buf, fence);
  fail_unless (meta != NULL);
  fail_unless (meta->fence == fence);
  fail_unless (gst_buffer_get_npu_fence_meta (buf) == meta);
  fail_unless (gst_npu_memory_get_fence (gst_buffer_peek_memory (buf, 0))
      == fence);
  got = gst_npu_buffer_get_fence (buf);
  fail_unless (got == fence);
  npu_fence_unref (got);
  fail_if (gst_npu_buffer_wait (buf, 1000, NULL));

  /* Adding again replaces the fence, on the meta and on the memory. */
  fail_unless (gst_buffer_add_npu_fence_meta (buf, other) == meta);
  fail_unless (meta->fence == other);
  fail_unless (gst_npu_memory_get_fence (gst_buffer_peek_memory (buf, 0))
      == other);
  /* ... and lets go of the first one. */
  npu_fence_unref (fence);
  fail_unless (g_atomic_int_get (&gone));

  npu_fence_signal (other);
  fail_unless (gst_npu_buffer_wait (buf, 0, NULL));
  npu_fence_unref (other);
  gst_buffer_unref (buf);
}

GST_END_TEST;

GST_START_TEST (test_system_memory)
{
  /* On system memory the meta works, without a memory to put a fence on. */
  GstBuffer *buf = gst_buffer_new_allocate (NULL, 100, NULL);
  NpuFence *fence = npu_fence_new ();
  GError *error = NULL;

  gst_buffer_add_npu_fence_meta (buf, fence);
  fail_if (gst_npu_buffer_wait (buf, 50 * 1000, &error));
  fail_unless (g_error_matches (error, NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_TIMEOUT));
  g_clear_error (&error);
  npu_fence_signal (fence);
  fail_unless (gst_npu_buffer_wait (buf, 0, NULL));
  npu_fence_unref (fence);
  gst_buffer_unref (buf);
}

GST_END_TEST;

GST_START_TEST (test_chain)
{
  GstBuffer *buf = new_npu_buffer (DATA_SIZE);
  NpuFence *a = npu_fence_new (), *b = npu_fence_new ();
  GstNpuFenceMeta *meta;
  Producer p = { 0, };
  GThread *thread;
  GstMapInfo map;
  gint gone_a = 0, gone_b = 0;

  p.data = producer_view (buf);
  npu_fence_add_callback (a, fence_gone_cb, &gone_a);
  npu_fence_add_callback (b, fence_gone_cb, &gone_b);

  meta = gst_buffer_add_npu_fence_meta (buf, a);
  gst_npu_fence_meta_chain (meta, b);
  fail_if (meta->fence == a);
  fail_if (meta->fence == b);
  fail_if (npu_fence_is_signalled (meta->fence));
  npu_fence_signal (a);
  fail_if (npu_fence_is_signalled (meta->fence));
  fail_if (gst_npu_buffer_wait (buf, 1000, NULL));

  /* The second producer writes after the first signalled: a consumer that
   * maps must wait for both. */
  p.size = DATA_SIZE;
  p.value = 0x3c;
  p.delay_ms = 80;
  p.fence = b;
  thread = g_thread_new ("second producer", producer_thread, &p);
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  check_filled (map.data, map.size, 0x3c);
  gst_buffer_unmap (buf, &map);
  g_thread_join (thread);
  fail_unless (npu_fence_is_signalled (meta->fence));
  fail_unless (gst_npu_buffer_wait (buf, 0, NULL));

  npu_fence_unref (a);
  npu_fence_unref (b);
  gst_buffer_unref (buf);
}

GST_END_TEST;

GST_START_TEST (test_chain_failure)
{
  GstBuffer *buf = new_npu_buffer (4096);
  NpuFence *a = npu_fence_new (), *b = npu_fence_new ();
  GstNpuFenceMeta *meta = gst_buffer_add_npu_fence_meta (buf, a);
  GError *error = NULL;

  gst_npu_fence_meta_chain (meta, b);
  npu_fence_signal_error (a, g_error_new (NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_FAILED, "first producer failed"));
  npu_fence_signal (b);
  fail_if (gst_npu_buffer_wait (buf, G_USEC_PER_SEC, &error));
  fail_unless (error != NULL);
  fail_unless (strstr (error->message, "first producer failed") != NULL,
      "%s", error->message);
  g_clear_error (&error);
  npu_fence_unref (a);
  npu_fence_unref (b);
  gst_buffer_unref (buf);
}

GST_END_TEST;

GST_START_TEST (test_copies)
{
  GstBuffer *buf = new_npu_buffer (4096), *copy;
  NpuFence *fence = npu_fence_new ();
  GstNpuFenceMeta *meta, *cmeta;
  gint gone = 0;

  npu_fence_add_callback (fence, fence_gone_cb, &gone);
  meta = gst_buffer_add_npu_fence_meta (buf, fence);

  /* A copy shares the memory: the fence goes along. */
  copy = gst_buffer_copy (buf);
  fail_unless (gst_buffer_peek_memory (copy, 0) ==
      gst_buffer_peek_memory (buf, 0));
  cmeta = gst_buffer_get_npu_fence_meta (copy);
  fail_unless (cmeta != NULL);
  fail_unless (cmeta != meta);
  fail_unless (cmeta->fence == fence);
  gst_buffer_unref (copy);

  /* The whole buffer as a region is still the same memory. */
  copy = gst_buffer_copy_region (buf, GST_BUFFER_COPY_ALL, 0, 4096);
  fail_unless (gst_buffer_get_npu_fence_meta (copy) != NULL);
  gst_buffer_unref (copy);

  /* Part of it: the memory changed, the meta is dropped ... */
  copy = gst_buffer_copy_region (buf, GST_BUFFER_COPY_ALL, 100, 1000);
  fail_unless (gst_buffer_get_npu_fence_meta (copy) == NULL);
  /* ... but the shared memory still waits for the fence. */
  fail_unless (gst_npu_memory_get_fence (gst_buffer_peek_memory (copy,
              0)) == fence);
  gst_buffer_unref (copy);

  /* Metadata without the memory: dropped. */
  copy = gst_buffer_new ();
  fail_unless (gst_buffer_copy_into (copy, buf, GST_BUFFER_COPY_METADATA, 0,
          -1));
  fail_unless (gst_buffer_get_npu_fence_meta (copy) == NULL);
  gst_buffer_unref (copy);

  /* Merged memory: dropped. */
  copy = gst_buffer_new ();
  fail_unless (gst_buffer_copy_into (copy, buf, GST_BUFFER_COPY_ALL |
          GST_BUFFER_COPY_MERGE, 0, -1));
  fail_unless (gst_buffer_get_npu_fence_meta (copy) == NULL);
  gst_buffer_unref (copy);

  /* Nothing above kept a reference. */
  npu_fence_unref (fence);
  fail_if (g_atomic_int_get (&gone));
  gst_buffer_unref (buf);
  fail_unless (g_atomic_int_get (&gone));
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Pipelines
 */
typedef struct
{
  guint8 value;
  gsize size;
  gint n_buffers;
  gint n_with_meta;
  gboolean bad_data;
} SinkCheck;

static void
handoff_cb (GstElement * sink, GstBuffer * buf, GstPad * pad,
    gpointer user_data)
{
  SinkCheck *check = user_data;
  GstMapInfo map;
  gsize i;

  if (gst_buffer_get_npu_fence_meta (buf))
    g_atomic_int_inc (&check->n_with_meta);
  if (!gst_buffer_map (buf, &map, GST_MAP_READ)) {
    check->bad_data = TRUE;
    return;
  }
  for (i = 0; i < map.size; i++)
    if (map.data[i] != check->value) {
      check->bad_data = TRUE;
      break;
    }
  gst_buffer_unmap (buf, &map);
  g_atomic_int_inc (&check->n_buffers);
}

static void
run_to_eos (GstElement * pipeline)
{
  GstBus *bus = gst_element_get_bus (pipeline);
  GstMessage *msg;

  msg = gst_bus_timed_pop_filtered (bus, 10 * GST_SECOND,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg != NULL, "no EOS");
  fail_unless_equals_int (GST_MESSAGE_TYPE (msg), GST_MESSAGE_EOS);
  gst_message_unref (msg);
  gst_object_unref (bus);
}

/* appsrc's push-buffer action signal (no link to libgstapp needed);
 * takes @buf. */
static GstFlowReturn
push_buffer (GstElement * src, GstBuffer * buf)
{
  GstFlowReturn ret = GST_FLOW_ERROR;

  g_signal_emit_by_name (src, "push-buffer", buf, &ret);
  gst_buffer_unref (buf);
  return ret;
}

/* Pushes buffers whose data is still being written into @pipeline's
 * appsrc "src"; @n_sinks fakesinks "sink0".. check what they get. */
static void
push_unfinished_buffers (GstElement * pipeline, SinkCheck * check,
    guint n_buffers)
{
  GstElement *src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  GstFlowReturn ret;
  guint i;

  fail_unless (src != NULL);
  g_object_set (src, "format", GST_FORMAT_TIME, NULL);
  fail_unless (gst_element_set_state (pipeline, GST_STATE_PLAYING) !=
      GST_STATE_CHANGE_FAILURE);

  for (i = 0; i < n_buffers; i++) {
    GstBuffer *buf = new_npu_buffer (check->size);
    Producer p = { 0, };
    GThread *thread;

    p.data = producer_view (buf);
    p.size = check->size;
    p.value = check->value;
    p.delay_ms = 60;
    p.fence = npu_fence_new ();
    gst_buffer_add_npu_fence_meta (buf, p.fence);
    GST_BUFFER_PTS (buf) = i * GST_SECOND / 30;
    /* Pushed at once, the data follows. */
    thread = g_thread_new ("producer", producer_thread, &p);
    fail_unless_equals_int (push_buffer (src, buf), GST_FLOW_OK);
    g_thread_join (thread);
    npu_fence_unref (p.fence);
  }
  g_signal_emit_by_name (src, "end-of-stream", &ret);
  run_to_eos (pipeline);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (src);
}

GST_START_TEST (test_pipeline_fakesink)
{
  GstElement *pipeline, *sink;
  SinkCheck check = { 0x42, DATA_SIZE, 0, 0, FALSE };

  pipeline = gst_parse_launch ("appsrc name=src ! "
      "fakesink name=sink0 sync=false signal-handoffs=true", NULL);
  fail_unless (pipeline != NULL);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink0");
  g_signal_connect (sink, "handoff", G_CALLBACK (handoff_cb), &check);
  push_unfinished_buffers (pipeline, &check, 3);
  fail_unless_equals_int (check.n_buffers, 3);
  fail_unless_equals_int (check.n_with_meta, 3);
  fail_if (check.bad_data, "the sink saw unfinished data");
  gst_object_unref (sink);
  gst_object_unref (pipeline);
}

GST_END_TEST;

GST_START_TEST (test_pipeline_tee)
{
  GstElement *pipeline, *sink0, *sink1;
  SinkCheck check0 = { 0x24, DATA_SIZE, 0, 0, FALSE };
  SinkCheck check1 = { 0x24, DATA_SIZE, 0, 0, FALSE };

  pipeline = gst_parse_launch ("appsrc name=src ! tee name=t "
      "t. ! queue ! fakesink name=sink0 sync=false signal-handoffs=true "
      "t. ! queue ! fakesink name=sink1 sync=false signal-handoffs=true", NULL);
  fail_unless (pipeline != NULL);
  sink0 = gst_bin_get_by_name (GST_BIN (pipeline), "sink0");
  sink1 = gst_bin_get_by_name (GST_BIN (pipeline), "sink1");
  g_signal_connect (sink0, "handoff", G_CALLBACK (handoff_cb), &check0);
  g_signal_connect (sink1, "handoff", G_CALLBACK (handoff_cb), &check1);
  push_unfinished_buffers (pipeline, &check0, 2);
  fail_unless_equals_int (check0.n_buffers, 2);
  fail_unless_equals_int (check1.n_buffers, 2);
  /* Both branches keep the meta. */
  fail_unless_equals_int (check0.n_with_meta, 2);
  fail_unless_equals_int (check1.n_with_meta, 2);
  fail_if (check0.bad_data || check1.bad_data);
  gst_object_unref (sink0);
  gst_object_unref (sink1);
  gst_object_unref (pipeline);
}

GST_END_TEST;

GST_START_TEST (test_pipeline_appsink)
{
  GstElement *pipeline, *src, *sink;
  GstBuffer *buf;
  GstSample *sample;
  Producer p = { 0, };
  GThread *thread;
  GstMapInfo map;

  pipeline = gst_parse_launch ("appsrc name=src format=time ! "
      "appsink name=sink sync=false", NULL);
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  buf = new_npu_buffer (DATA_SIZE);
  p.data = producer_view (buf);
  p.size = DATA_SIZE;
  p.value = 0x99;
  p.delay_ms = 80;
  p.fence = npu_fence_new ();
  gst_buffer_add_npu_fence_meta (buf, p.fence);
  GST_BUFFER_PTS (buf) = 0;
  fail_unless_equals_int (push_buffer (src, buf), GST_FLOW_OK);
  thread = g_thread_new ("producer", producer_thread, &p);

  g_signal_emit_by_name (sink, "try-pull-sample", 5 * GST_SECOND, &sample);
  fail_unless (sample != NULL);
  buf = gst_sample_get_buffer (sample);
  fail_unless (gst_buffer_get_npu_fence_meta (buf) != NULL);
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  check_filled (map.data, map.size, 0x99);
  gst_buffer_unmap (buf, &map);
  gst_sample_unref (sample);
  g_thread_join (thread);
  npu_fence_unref (p.fence);

  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (src);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
}

GST_END_TEST;

/* A GstBaseTransform that makes a new output buffer drops the meta, and
 * reads the input only once the data is there. */
GST_START_TEST (test_transform_drops_meta)
{
  GstHarness *h = gst_harness_new_parse ("videoconvert ! "
      "capsfilter caps=video/x-raw,format=RGB");
  GstVideoInfo info;
  GstBuffer *buf, *out;
  NpuFence *fence;
  GThread *thread;
  Producer p = { 0, };
  GstMapInfo map;
  gint gone = 0;
  gsize i;

  gst_harness_set_src_caps_str (h, "video/x-raw,format=GRAY8,width=64,"
      "height=48,framerate=30/1");
  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_GRAY8, 64, 48);
  buf = new_npu_buffer (info.size);
  p.data = producer_view (buf);
  p.size = info.size;
  p.value = 0xff;
  p.delay_ms = 80;
  fence = p.fence = npu_fence_new ();
  npu_fence_add_callback (fence, fence_gone_cb, &gone);
  gst_buffer_add_npu_fence_meta (buf, fence);
  GST_BUFFER_PTS (buf) = 0;

  thread = g_thread_new ("producer", producer_thread, &p);
  fail_unless_equals_int (gst_harness_push (h, buf), GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless (out != NULL);
  fail_unless (gst_buffer_get_npu_fence_meta (out) == NULL);
  fail_unless (gst_buffer_map (out, &map, GST_MAP_READ));
  fail_unless_equals_uint64 (map.size, 64 * 48 * 3);
  for (i = 0; i < map.size; i++)
    if (map.data[i] != 0xff)
      fail ("byte %" G_GSIZE_FORMAT " of the converted frame is %u: the "
          "transform read unfinished data", i, map.data[i]);
  gst_buffer_unmap (out, &map);
  gst_buffer_unref (out);
  g_thread_join (thread);
  gst_harness_teardown (h);

  /* Signalled fences run no callback when they die: check the fd. */
  {
    gint fd = npu_fence_get_fd (fence);

    npu_fence_unref (fence);
    fail_unless (fcntl (fd, F_GETFD) < 0 && errno == EBADF,
        "the fence outlived every buffer");
  }
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * The CPU backend's tasks as producers
 */
typedef struct
{
  guint8 *data;
  gsize size;
  guint8 value;
  gboolean fail;
} FillTask;

static gboolean
fill_task (NpuTask * task, gpointer user_data, GError ** error)
{
  FillTask *t = user_data;
  gsize i;

  if (t->fail) {
    g_usleep (20 * 1000);
    g_set_error (error, NPU_BACKEND_ERROR, 0, "matmul shape mismatch "
        "(made up by the test)");
    return FALSE;
  }
  for (i = 0; i < t->size; i += 4096) {
    memset (t->data + i, t->value, MIN (4096, t->size - i));
    if (i % (16 * 4096) == 0)
      g_usleep (5 * 1000);
  }
  return TRUE;
}

GST_START_TEST (test_backend_task)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "fence-meta-test");
  GstBuffer *buf = new_npu_buffer (DATA_SIZE * 4);
  FillTask t = { NULL, DATA_SIZE * 4, 0x5e, FALSE };
  NpuFence *out;
  GstMapInfo map;
  GError *error = NULL;

  t.data = producer_view (buf);
  out = npu_queue_submit (queue, fill_task, &t, NULL, NULL, 0);
  gst_buffer_add_npu_fence_meta (buf, out);
  npu_fence_unref (out);

  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  check_filled (map.data, map.size, 0x5e);
  gst_buffer_unmap (buf, &map);
  fail_unless (gst_npu_buffer_wait (buf, 0, &error));
  fail_unless (error == NULL);

  gst_buffer_unref (buf);
  npu_queue_free (queue);
  npu_device_unref (device);
}

GST_END_TEST;

GST_START_TEST (test_backend_task_error)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "fence-meta-test");
  GstBuffer *buf = new_npu_buffer (4096), *buf2 = new_npu_buffer (4096);
  FillTask t = { NULL, 4096, 0x01, TRUE };
  FillTask t2 = { NULL, 4096, 0x02, FALSE };
  NpuFence *out, *out2;
  GError *error = NULL;
  GstMapInfo map;

  t.data = producer_view (buf);
  t2.data = producer_view (buf2);
  out = npu_queue_submit (queue, fill_task, &t, NULL, NULL, 0);
  gst_buffer_add_npu_fence_meta (buf, out);
  /* A task reading the failed one's output does not run, and says why. */
  out2 = npu_queue_submit (queue, fill_task, &t2, NULL, &out, 1);
  gst_buffer_add_npu_fence_meta (buf2, out2);
  npu_fence_unref (out);
  npu_fence_unref (out2);

  fail_if (gst_npu_buffer_wait (buf, 5 * G_USEC_PER_SEC, &error));
  fail_unless (error != NULL);
  fail_unless (strstr (error->message, "matmul shape mismatch") != NULL,
      "%s", error->message);
  g_clear_error (&error);
  fail_if (gst_buffer_map (buf, &map, GST_MAP_READ));

  fail_if (gst_npu_buffer_wait (buf2, 5 * G_USEC_PER_SEC, &error));
  fail_unless (error != NULL);
  fail_unless (strstr (error->message, "matmul shape mismatch") != NULL,
      "%s", error->message);
  g_clear_error (&error);
  /* It did not run. */
  fail_unless_equals_int (t2.data[0], 0);

  gst_buffer_unref (buf);
  gst_buffer_unref (buf2);
  npu_queue_free (queue);
  npu_device_unref (device);
}

GST_END_TEST;

static Suite *
npufencemeta_suite (void)
{
  Suite *s = suite_create ("npufencemeta");
  TCase *tc = tcase_create ("general");

  npu_check_load_plugins ();
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_attach_get);
  tcase_add_test (tc, test_system_memory);
  tcase_add_test (tc, test_chain);
  tcase_add_test (tc, test_chain_failure);
  tcase_add_test (tc, test_copies);
  tcase_add_test (tc, test_pipeline_fakesink);
  tcase_add_test (tc, test_pipeline_tee);
  tcase_add_test (tc, test_pipeline_appsink);
  tcase_add_test (tc, test_transform_drops_meta);
  tcase_add_test (tc, test_backend_task);
  tcase_add_test (tc, test_backend_task_error);
  return s;
}

GST_CHECK_MAIN (npufencemeta);
