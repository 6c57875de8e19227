/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: tests of the NPU buffer pool and of the ALLOCATION query answer
 * (gst_npu_propose_allocation()) */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <fcntl.h>

#include <gst/gst.h>
#include <gst/check/gstcheck.h>
#include <gst/allocators/allocators.h>
#include <gst/video/video.h>

#include "npu/gstnpuallocator.h"
#include "npu/gstnpubufferpool.h"
#include "npu/gstnpufencemeta.h"
#include "npu/gstnpuallocation.h"
#include "npucheck.h"

static GstBufferPool *
configure_pool (GstCaps * caps, guint size, guint min, guint max,
    gboolean video_meta, GstAllocator * allocator)
{
  GstBufferPool *pool = gst_npu_buffer_pool_new (NULL);
  GstStructure *config = gst_buffer_pool_get_config (pool);

  gst_buffer_pool_config_set_params (config, caps, size, min, max);
  if (video_meta)
    gst_buffer_pool_config_add_option (config,
        GST_BUFFER_POOL_OPTION_VIDEO_META);
  if (allocator)
    gst_buffer_pool_config_set_allocator (config, allocator, NULL);
  fail_unless (gst_buffer_pool_set_config (pool, config));
  fail_unless (gst_buffer_pool_set_active (pool, TRUE));
  return pool;
}

static void
check_video_buffer (GstBuffer * buf, GstVideoInfo * caps_info)
{
  GstVideoMeta *vmeta = gst_buffer_get_video_meta (buf);
  GstMemory *mem;
  GstVideoFrame frame;
  GstMapInfo map;
  guint p;

  fail_unless_equals_int (gst_buffer_n_memory (buf), 1);
  mem = gst_buffer_peek_memory (buf, 0);
  fail_unless (gst_is_npu_memory (mem));
  fail_unless (vmeta != NULL);
  fail_unless_equals_int (vmeta->format, GST_VIDEO_INFO_FORMAT (caps_info));
  fail_unless_equals_int (vmeta->width, GST_VIDEO_INFO_WIDTH (caps_info));
  fail_unless_equals_int (vmeta->height, GST_VIDEO_INFO_HEIGHT (caps_info));
  fail_unless_equals_int (vmeta->n_planes, GST_VIDEO_INFO_N_PLANES (caps_info));
  for (p = 0; p < vmeta->n_planes; p++) {
    fail_unless (vmeta->stride[p] % GST_NPU_ALIGN == 0,
        "%s plane %u stride %d", GST_VIDEO_INFO_NAME (caps_info), p,
        vmeta->stride[p]);
    fail_unless (vmeta->offset[p] % GST_NPU_ALIGN == 0,
        "%s plane %u offset %" G_GSIZE_FORMAT,
        GST_VIDEO_INFO_NAME (caps_info), p, vmeta->offset[p]);
    fail_unless (vmeta->stride[p] >= caps_info->stride[p]);
  }
  fail_unless (gst_memory_map (mem, &map, GST_MAP_READ));
  fail_unless (((guintptr) map.data) % GST_NPU_ALIGN == 0);
  gst_memory_unmap (mem, &map);

  /* Every plane's last row lies inside the buffer. */
  fail_unless (gst_video_frame_map (&frame, caps_info, buf, GST_MAP_READWRITE));
  for (p = 0; p < GST_VIDEO_FRAME_N_PLANES (&frame); p++) {
    guint8 *data = GST_VIDEO_FRAME_PLANE_DATA (&frame, p);
    gint stride = GST_VIDEO_FRAME_PLANE_STRIDE (&frame, p);
    gint rows = GST_VIDEO_FRAME_COMP_HEIGHT (&frame, p);

    fail_unless (((guintptr) data) % GST_NPU_ALIGN == 0);
    fail_unless_equals_int (stride, vmeta->stride[p]);
    memset (data, p + 1, (gsize) stride * rows);
  }
  gst_video_frame_unmap (&frame);
}

GST_START_TEST (test_video_layouts)
{
  static const gchar *formats[] = { "NV12", "I420", "RGB", "GRAY8", "BGRx",
    "YUY2"
  };
  static const gint sizes[][2] = { {321, 241}, {64, 48}, {1, 1}, {1281, 3} };
  guint f, s;

  for (f = 0; f < G_N_ELEMENTS (formats); f++) {
    for (s = 0; s < G_N_ELEMENTS (sizes); s++) {
      GstVideoInfo info, pool_info;
      GstBufferPool *pool;
      GstBuffer *buf;
      GstCaps *caps;
      GstStructure *config;
      guint size, p;

      gst_video_info_set_format (&info,
          gst_video_format_from_string (formats[f]), sizes[s][0], sizes[s][1]);
      caps = gst_video_info_to_caps (&info);
      pool = configure_pool (caps, info.size, 2, 0, TRUE, NULL);

      fail_unless (gst_npu_buffer_pool_get_video_info (pool, &pool_info));
      for (p = 0; p < GST_VIDEO_INFO_N_PLANES (&pool_info); p++) {
        fail_unless (pool_info.stride[p] % GST_NPU_ALIGN == 0);
        fail_unless (pool_info.offset[p] % GST_NPU_ALIGN == 0);
      }
      /* The config says the size buffers really have. */
      config = gst_buffer_pool_get_config (pool);
      fail_unless (gst_buffer_pool_config_get_params (config, NULL, &size,
              NULL, NULL));
      fail_unless (size >= pool_info.size);
      gst_structure_free (config);

      fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf,
              NULL), GST_FLOW_OK);
      fail_unless (gst_buffer_get_size (buf) >= pool_info.size);
      fail_unless_equals_uint64 (gst_buffer_get_size (buf), size);
      check_video_buffer (buf, &info);
      {
        GstVideoMeta *vmeta = gst_buffer_get_video_meta (buf);

        for (p = 0; p < vmeta->n_planes; p++) {
          fail_unless_equals_int (vmeta->stride[p], pool_info.stride[p]);
          fail_unless_equals_uint64 (vmeta->offset[p], pool_info.offset[p]);
        }
      }
      gst_buffer_unref (buf);

      fail_unless (gst_buffer_pool_set_active (pool, FALSE));
      gst_object_unref (pool);
      gst_caps_unref (caps);
    }
  }
}

GST_END_TEST;

GST_START_TEST (test_video_no_meta_option)
{
  GstVideoInfo info;
  GstBufferPool *pool;
  GstBuffer *buf;
  GstCaps *caps;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_NV12, 320, 240);
  caps = gst_video_info_to_caps (&info);
  pool = configure_pool (caps, 0, 1, 0, FALSE, NULL);
  fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf, NULL),
      GST_FLOW_OK);
  fail_unless (gst_buffer_get_video_meta (buf) == NULL);
  fail_unless (gst_buffer_get_size (buf) >= info.size);
  gst_buffer_unref (buf);
  gst_buffer_pool_set_active (pool, FALSE);
  gst_object_unref (pool);
  gst_caps_unref (caps);
}

GST_END_TEST;

GST_START_TEST (test_video_alignment_option)
{
  GstBufferPool *pool = gst_npu_buffer_pool_new (NULL);
  GstStructure *config = gst_buffer_pool_get_config (pool);
  GstVideoAlignment align;
  GstVideoInfo info, pool_info;
  GstBuffer *buf;
  GstVideoMeta *vmeta;
  GstCaps *caps;
  guint p;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_I420, 321, 241);
  caps = gst_video_info_to_caps (&info);
  gst_buffer_pool_config_set_params (config, caps, info.size, 1, 0);
  gst_buffer_pool_config_add_option (config, GST_BUFFER_POOL_OPTION_VIDEO_META);
  gst_buffer_pool_config_add_option (config,
      GST_BUFFER_POOL_OPTION_VIDEO_ALIGNMENT);
  gst_video_alignment_reset (&align);
  align.padding_top = 2;
  align.padding_bottom = 6;
  for (p = 0; p < GST_VIDEO_MAX_PLANES; p++)
    align.stride_align[p] = 255;
  gst_buffer_pool_config_set_video_alignment (config, &align);
  fail_unless (gst_buffer_pool_set_config (pool, config));
  fail_unless (gst_buffer_pool_set_active (pool, TRUE));

  fail_unless (gst_npu_buffer_pool_get_video_info (pool, &pool_info));
  fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf, NULL),
      GST_FLOW_OK);
  vmeta = gst_buffer_get_video_meta (buf);
  fail_unless (vmeta != NULL);
  for (p = 0; p < vmeta->n_planes; p++) {
    fail_unless (vmeta->stride[p] % 256 == 0, "stride %d", vmeta->stride[p]);
    fail_unless (vmeta->offset[p] % GST_NPU_ALIGN == 0);
    /* Room for the padding rows above the picture. */
    fail_unless (vmeta->offset[p] > 0);
  }
  check_video_buffer (buf, &info);
  gst_buffer_unref (buf);
  gst_buffer_pool_set_active (pool, FALSE);
  gst_object_unref (pool);
  gst_caps_unref (caps);
}

GST_END_TEST;

GST_START_TEST (test_tensor_caps)
{
  GstCaps *caps = gst_caps_from_string ("other/tensors,format=static,"
      "num_tensors=1,types=(string)float32,dimensions=(string)768:197,"
      "framerate=(fraction)0/1");
  GstBufferPool *pool = configure_pool (caps, 768 * 197 * 4, 1, 4, FALSE,
      NULL);
  GstBuffer *buf;
  GstMapInfo map;
  GstVideoInfo vinfo;

  fail_if (gst_npu_buffer_pool_get_video_info (pool, &vinfo));
  fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf, NULL),
      GST_FLOW_OK);
  fail_unless_equals_uint64 (gst_buffer_get_size (buf), 768 * 197 * 4);
  fail_unless_equals_int (gst_buffer_n_memory (buf), 1);
  fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (buf, 0)));
  fail_unless (gst_buffer_get_video_meta (buf) == NULL);
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_WRITE));
  fail_unless (((guintptr) map.data) % GST_NPU_ALIGN == 0);
  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);
  gst_buffer_pool_set_active (pool, FALSE);
  gst_object_unref (pool);
  gst_caps_unref (caps);
}

GST_END_TEST;

GST_START_TEST (test_reuse)
{
  GstCaps *caps = gst_caps_from_string ("video/x-raw,format=NV12,"
      "width=321,height=241,framerate=30/1");
  GstBufferPool *pool = configure_pool (caps, 0, 2, 3, TRUE, NULL);
  GHashTable *mems = g_hash_table_new (NULL, NULL);
  GHashTable *fds = g_hash_table_new (NULL, NULL);
  guint i, fds_before, fds_after;

  fds_before = npu_count_fds ();
  for (i = 0; i < 100; i++) {
    GstBuffer *buf[2];
    guint j;

    for (j = 0; j < 2; j++) {
      GstMemory *mem;

      fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf[j],
              NULL), GST_FLOW_OK);
      mem = gst_buffer_peek_memory (buf[j], 0);
      g_hash_table_add (mems, mem);
      g_hash_table_add (fds, GINT_TO_POINTER (gst_fd_memory_get_fd (mem)));
      /* Downstream may map: the kept mapping must not cost anything. */
      if (i % 10 == 0) {
        GstMapInfo map;

        fail_unless (gst_buffer_map (buf[j], &map, GST_MAP_WRITE));
        map.data[0] = i;
        gst_buffer_unmap (buf[j], &map);
      }
    }
    for (j = 0; j < 2; j++)
      gst_buffer_unref (buf[j]);
  }
  fds_after = npu_count_fds ();
  /* Only the two preallocated buffers went round. */
  fail_unless_equals_int (g_hash_table_size (mems), 2);
  fail_unless_equals_int (g_hash_table_size (fds), 2);
  fail_unless_equals_int (fds_after, fds_before);

  g_hash_table_unref (mems);
  g_hash_table_unref (fds);
  gst_buffer_pool_set_active (pool, FALSE);
  gst_object_unref (pool);
  gst_caps_unref (caps);
}

GST_END_TEST;

GST_START_TEST (test_recycled_fence_cleared)
{
  GstCaps *caps = gst_caps_from_string ("video/x-raw,format=GRAY8,"
      "width=64,height=64,framerate=30/1");
  GstBufferPool *pool = configure_pool (caps, 0, 1, 1, TRUE, NULL);
  GstBuffer *buf, *again;
  NpuFence *fence = npu_fence_new ();
  GstMapInfo map;
  gint fd = npu_fence_get_fd (fence);

  fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf, NULL),
      GST_FLOW_OK);
  gst_buffer_add_npu_fence_meta (buf, fence);
  npu_fence_signal (fence);
  npu_fence_unref (fence);
  gst_buffer_unref (buf);

  fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &again,
          NULL), GST_FLOW_OK);
  fail_unless (again == buf);
  fail_unless (gst_buffer_get_npu_fence_meta (again) == NULL);
  fail_unless (gst_npu_memory_get_fence (gst_buffer_peek_memory (again,
              0)) == NULL);
  /* Nothing holds the old fence any more. */
  fail_unless (fcntl (fd, F_GETFD) < 0);
  /* The video meta (pooled) stays. */
  fail_unless (gst_buffer_get_video_meta (again) != NULL);
  fail_unless (gst_buffer_map (again, &map, GST_MAP_READ));
  gst_buffer_unmap (again, &map);
  gst_buffer_unref (again);
  gst_buffer_pool_set_active (pool, FALSE);
  gst_object_unref (pool);
  gst_caps_unref (caps);
}

GST_END_TEST;

typedef struct
{
  guint8 *data;
  gsize size;
  NpuFence *fence;
} SlowWriter;

static gpointer
slow_writer (gpointer user_data)
{
  SlowWriter *w = user_data;

  g_usleep (50 * 1000);
  memset (w->data, 0x6b, w->size);
  npu_fence_signal (w->fence);
  return NULL;
}

/* The pool takes back a buffer whose memory a copy still uses: the copy's
 * readers must still wait for the fence. */
GST_START_TEST (test_released_while_shared)
{
  GstCaps *caps = gst_caps_from_string ("video/x-raw,format=GRAY8,"
      "width=256,height=64,framerate=30/1");
  GstBufferPool *pool = configure_pool (caps, 0, 1, 0, TRUE, NULL);
  GstBuffer *buf, *copy;
  SlowWriter w;
  GThread *thread;
  GstMapInfo map;
  gsize i;

  fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf, NULL),
      GST_FLOW_OK);
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_WRITE));
  w.data = map.data;
  w.size = map.size;
  gst_buffer_unmap (buf, &map);
  w.fence = npu_fence_new ();
  gst_buffer_add_npu_fence_meta (buf, w.fence);
  copy = gst_buffer_copy (buf);
  gst_buffer_unref (buf);

  thread = g_thread_new ("writer", slow_writer, &w);
  fail_unless (gst_buffer_map (copy, &map, GST_MAP_READ));
  for (i = 0; i < map.size; i++)
    if (map.data[i] != 0x6b)
      fail ("byte %" G_GSIZE_FORMAT " is %u: unfinished data seen", i,
          map.data[i]);
  gst_buffer_unmap (copy, &map);
  g_thread_join (thread);
  npu_fence_unref (w.fence);
  gst_buffer_unref (copy);
  gst_buffer_pool_set_active (pool, FALSE);
  gst_object_unref (pool);
  gst_caps_unref (caps);
}

GST_END_TEST;

GST_START_TEST (test_foreign_allocator)
{
  GstCaps *caps = gst_caps_from_string ("video/x-raw,format=RGB,"
      "width=33,height=17,framerate=30/1");
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstAllocator *sys_alloc = gst_allocator_find (NULL);
  GstAllocator *allocs[2] = { fd_alloc, sys_alloc };
  guint i;

  for (i = 0; i < 2; i++) {
    GstBufferPool *pool = configure_pool (caps, 0, 1, 0, TRUE, allocs[i]);
    GstStructure *config = gst_buffer_pool_get_config (pool);
    GstAllocator *got = NULL;
    GstBuffer *buf;

    fail_unless (gst_buffer_pool_config_get_allocator (config, &got, NULL));
    fail_unless (gst_is_npu_allocator (got));
    gst_structure_free (config);
    fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf,
            NULL), GST_FLOW_OK);
    fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (buf, 0)));
    gst_buffer_unref (buf);
    gst_buffer_pool_set_active (pool, FALSE);
    gst_object_unref (pool);
  }
  gst_object_unref (fd_alloc);
  gst_object_unref (sys_alloc);
  gst_caps_unref (caps);
}

GST_END_TEST;

GST_START_TEST (test_bad_config)
{
  GstBufferPool *pool = gst_npu_buffer_pool_new (NULL);
  GstStructure *config;
  GstCaps *caps;

  /* No caps. */
  config = gst_buffer_pool_get_config (pool);
  gst_buffer_pool_config_set_params (config, NULL, 4096, 1, 0);
  fail_if (gst_buffer_pool_set_config (pool, config));

  /* Not video, and no size. */
  caps = gst_caps_from_string ("other/tensors,format=static,num_tensors=1,"
      "types=(string)float32,dimensions=(string)10:10");
  config = gst_buffer_pool_get_config (pool);
  gst_buffer_pool_config_set_params (config, caps, 0, 1, 0);
  fail_if (gst_buffer_pool_set_config (pool, config));
  gst_caps_unref (caps);

  /* Nor can it be activated after that. */
  fail_if (gst_buffer_pool_set_active (pool, TRUE));
  gst_object_unref (pool);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * propose_allocation
 */
static gboolean
query_has_meta (GstQuery * query, GType api)
{
  return gst_query_find_allocation_meta (query, api, NULL);
}

GST_START_TEST (test_propose_allocation_query)
{
  GstCaps *caps = gst_caps_from_string ("video/x-raw,format=NV12,"
      "width=321,height=241,framerate=30/1");
  GstQuery *query = gst_query_new_allocation (caps, TRUE);
  GstBufferPool *pool = NULL;
  GstAllocator *allocator = NULL;
  GstAllocationParams params;
  GstVideoInfo info;
  guint size, min, max;

  gst_video_info_from_caps (&info, caps);
  fail_unless (gst_npu_propose_allocation (query, NULL, 3, 0));

  fail_unless_equals_int (gst_query_get_n_allocation_pools (query), 1);
  gst_query_parse_nth_allocation_pool (query, 0, &pool, &size, &min, &max);
  fail_unless (pool != NULL);
  fail_unless (GST_IS_NPU_BUFFER_POOL (pool));
  fail_unless (size >= info.size);
  fail_unless_equals_int (min, 3);
  fail_unless_equals_int (max, 0);

  fail_unless (gst_query_get_n_allocation_params (query) >= 1);
  gst_query_parse_nth_allocation_param (query, 0, &allocator, &params);
  fail_unless (allocator != NULL);
  fail_unless (gst_is_npu_allocator (allocator));
  fail_unless_equals_int (params.align, 127);

  fail_unless (query_has_meta (query, GST_VIDEO_META_API_TYPE));
  fail_unless (query_has_meta (query, GST_NPU_FENCE_META_API_TYPE));

  /* The pool works as it comes. */
  fail_unless (gst_buffer_pool_set_active (pool, TRUE));
  {
    GstBuffer *buf;

    fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf,
            NULL), GST_FLOW_OK);
    check_video_buffer (buf, &info);
    gst_buffer_unref (buf);
  }
  gst_buffer_pool_set_active (pool, FALSE);

  gst_object_unref (pool);
  gst_object_unref (allocator);
  gst_query_unref (query);

  /* Without need_pool: allocator and metas, no pool. */
  query = gst_query_new_allocation (caps, FALSE);
  fail_unless (gst_npu_propose_allocation (query, NULL, 2, 0));
  fail_unless_equals_int (gst_query_get_n_allocation_pools (query), 0);
  fail_unless (gst_query_get_n_allocation_params (query) >= 1);
  fail_unless (query_has_meta (query, GST_NPU_FENCE_META_API_TYPE));
  gst_query_unref (query);

  /* Without caps: nothing to propose. */
  query = gst_query_new_allocation (NULL, TRUE);
  fail_if (gst_npu_propose_allocation (query, NULL, 2, 0));
  gst_query_unref (query);
  gst_caps_unref (caps);
}

GST_END_TEST;

static GstPadProbeReturn
allocation_probe (GstPad * pad, GstPadProbeInfo * info, gpointer user_data)
{
  GstQuery *query = GST_PAD_PROBE_INFO_QUERY (info);

  if (GST_QUERY_TYPE (query) != GST_QUERY_ALLOCATION)
    return GST_PAD_PROBE_OK;
  fail_unless (gst_npu_propose_allocation (query, NULL, 2, 0));
  g_atomic_int_inc ((gint *) user_data);
  return GST_PAD_PROBE_HANDLED;
}

typedef struct
{
  gint n_buffers;
  gint n_npu;
  gint n_vmeta;
  gint n_aligned;
} Seen;

static void
handoff_cb (GstElement * sink, GstBuffer * buf, GstPad * pad,
    gpointer user_data)
{
  Seen *seen = user_data;
  GstVideoMeta *vmeta = gst_buffer_get_video_meta (buf);
  guint p;
  gboolean aligned = TRUE;

  seen->n_buffers++;
  if (gst_buffer_n_memory (buf) == 1
      && gst_is_npu_memory (gst_buffer_peek_memory (buf, 0))
      && buf->pool && GST_IS_NPU_BUFFER_POOL (buf->pool))
    seen->n_npu++;
  if (vmeta) {
    seen->n_vmeta++;
    for (p = 0; p < vmeta->n_planes; p++)
      aligned &= vmeta->stride[p] % GST_NPU_ALIGN == 0
          && vmeta->offset[p] % GST_NPU_ALIGN == 0;
    if (aligned)
      seen->n_aligned++;
  }
}

GST_START_TEST (test_propose_allocation_pipeline)
{
  static const gchar *formats[] = { "NV12", "I420", "RGB", "GRAY8" };
  guint f;

  for (f = 0; f < G_N_ELEMENTS (formats); f++) {
    gchar *desc = g_strdup_printf ("videotestsrc num-buffers=5 ! "
        "video/x-raw,format=%s,width=321,height=241 ! "
        "fakesink name=sink signal-handoffs=true", formats[f]);
    GstElement *pipeline = gst_parse_launch (desc, NULL);
    GstElement *sink;
    GstPad *pad;
    GstBus *bus;
    GstMessage *msg;
    Seen seen = { 0, };
    gint n_queries = 0;

    fail_unless (pipeline != NULL);
    sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
    pad = gst_element_get_static_pad (sink, "sink");
    gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM,
        allocation_probe, &n_queries, NULL);
    g_signal_connect (sink, "handoff", G_CALLBACK (handoff_cb), &seen);

    gst_element_set_state (pipeline, GST_STATE_PLAYING);
    bus = gst_element_get_bus (pipeline);
    msg = gst_bus_timed_pop_filtered (bus, 10 * GST_SECOND,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    fail_unless (msg != NULL);
    fail_unless_equals_int (GST_MESSAGE_TYPE (msg), GST_MESSAGE_EOS);
    gst_message_unref (msg);
    gst_element_set_state (pipeline, GST_STATE_NULL);

    fail_unless (n_queries >= 1);
    fail_unless_equals_int (seen.n_buffers, 5);
    fail_unless_equals_int (seen.n_npu, 5);
    fail_unless_equals_int (seen.n_vmeta, 5);
    fail_unless_equals_int (seen.n_aligned, 5);

    gst_object_unref (bus);
    gst_object_unref (pad);
    gst_object_unref (sink);
    gst_object_unref (pipeline);
    g_free (desc);
  }
}

GST_END_TEST;

static Suite *
npubufferpool_suite (void)
{
  Suite *s = suite_create ("npubufferpool");
  TCase *tc = tcase_create ("general");

  npu_check_load_plugins ();
  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_video_layouts);
  tcase_add_test (tc, test_video_no_meta_option);
  tcase_add_test (tc, test_video_alignment_option);
  tcase_add_test (tc, test_tensor_caps);
  tcase_add_test (tc, test_reuse);
  tcase_add_test (tc, test_recycled_fence_cleared);
  tcase_add_test (tc, test_released_while_shared);
  tcase_add_test (tc, test_foreign_allocator);
  tcase_add_test (tc, test_bad_config);
  tcase_add_test (tc, test_propose_allocation_query);
  tcase_add_test (tc, test_propose_allocation_pipeline);
  return s;
}

GST_CHECK_MAIN (npubufferpool);
