/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: no file descriptor outlives what it belongs to
 *
 * Every NPU memory, fence and imported mapping holds an fd; a camera
 * pipeline runs for days, so one leaked fd per frame is fatal.  Each test
 * counts /proc/self/fd before and after a thousand of something.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <unistd.h>
#include <sys/mman.h>

#include <gst/gst.h>
#include <gst/check/gstcheck.h>
#include <gst/allocators/allocators.h>
#include <gst/video/video.h>

#include "npu/gstnpuallocator.h"
#include "npu/gstnpubufferpool.h"
#include "npu/gstnpufencemeta.h"
#include "npu/gstnpuimport.h"
#include "npucheck.h"

#define N 1000

GST_START_TEST (test_pool)
{
  GstCaps *caps = gst_caps_from_string ("video/x-raw,format=NV12,"
      "width=321,height=241,framerate=30/1");
  GstAllocator *alloc = gst_npu_allocator_get_default ();
  guint before, during = 0, round;

  before = npu_count_fds ();
  for (round = 0; round < 2; round++) {
    GstBufferPool *pool = gst_npu_buffer_pool_new (alloc);
    GstStructure *config = gst_buffer_pool_get_config (pool);
    guint i;

    gst_buffer_pool_config_set_params (config, caps, 0, 2, 4);
    gst_buffer_pool_config_add_option (config,
        GST_BUFFER_POOL_OPTION_VIDEO_META);
    fail_unless (gst_buffer_pool_set_config (pool, config));
    fail_unless (gst_buffer_pool_set_active (pool, TRUE));

    for (i = 0; i < N; i++) {
      GstBuffer *buf;
      NpuFence *fence = npu_fence_new ();
      GstMapInfo map;

      fail_unless_equals_int (gst_buffer_pool_acquire_buffer (pool, &buf,
              NULL), GST_FLOW_OK);
      gst_buffer_add_npu_fence_meta (buf, fence);
      npu_fence_signal (fence);
      npu_fence_unref (fence);
      fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
      gst_buffer_unmap (buf, &map);
      gst_buffer_unref (buf);
    }
    /* Two buffers' memory, nothing else. */
    during = npu_count_fds ();
    fail_unless (during <= before + 4, "%u fds open, %u before", during,
        before);

    fail_unless (gst_buffer_pool_set_active (pool, FALSE));
    gst_object_unref (pool);
  }
  fail_unless_equals_int (npu_count_fds (), before);
  gst_object_unref (alloc);
  gst_caps_unref (caps);
}

GST_END_TEST;

GST_START_TEST (test_allocator)
{
  GstAllocator *alloc = gst_npu_allocator_get_default ();
  guint before = npu_count_fds (), i;

  for (i = 0; i < N; i++) {
    GstMemory *mem = gst_allocator_alloc (alloc, 1000 + i, NULL);
    GstMemory *sub;
    GstMapInfo map;

    fail_unless (mem != NULL);
    fail_unless (gst_memory_map (mem, &map, GST_MAP_WRITE));
    gst_memory_unmap (mem, &map);
    sub = gst_memory_share (mem, 10, 100);
    gst_memory_unref (sub);
    gst_memory_unref (mem);
  }
  fail_unless_equals_int (npu_count_fds (), before);

  /* A thousand allocators as well (each probes the nodes). */
  for (i = 0; i < N; i++) {
    GstAllocator *a = gst_npu_allocator_new (NULL);
    GstMemory *mem = gst_allocator_alloc (a, 100, NULL);

    gst_memory_unref (mem);
    gst_object_unref (a);
  }
  fail_unless_equals_int (npu_count_fds (), before);
  gst_object_unref (alloc);
}

GST_END_TEST;

GST_START_TEST (test_import)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (8);
  guint before = npu_count_fds (), i, during;
  GstNpuImportStats stats;

  for (i = 0; i < N; i++) {
    int fd = memfd_create ("npu-fdleak", MFD_CLOEXEC);
    GstMemory *mem;
    GstNpuImportMap map;

    fail_unless (fd >= 0);
    fail_unless (ftruncate (fd, 4096) == 0);
    mem = gst_fd_allocator_alloc (fd_alloc, fd, 4096, GST_FD_MEMORY_FLAG_NONE);
    fail_unless (gst_npu_importer_map (imp, mem, GST_MAP_READ, &map));
    fail_unless_equals_int (map.data[0], 0);
    gst_npu_importer_unmap (imp, &map);
    gst_memory_unref (mem);
  }
  /* The cache holds at most 8 dups. */
  during = npu_count_fds ();
  fail_unless (during <= before + 8, "%u fds open, %u before", during, before);
  gst_npu_importer_get_stats (imp, &stats);
  fail_unless_equals_uint64 (stats.n_mmaps, N);
  gst_npu_importer_free (imp);
  fail_unless_equals_int (npu_count_fds (), before);

  /* Map frames of re-wrapped memories, clear in between. */
  imp = gst_npu_importer_new (2);
  for (i = 0; i < N; i++) {
    int fd = memfd_create ("npu-fdleak", MFD_CLOEXEC);
    GstBuffer *buf = gst_buffer_new ();
    GstVideoInfo info;
    GstNpuImportFrame frame;

    gst_video_info_set_format (&info, GST_VIDEO_FORMAT_GRAY8, 64, 16);
    fail_unless (ftruncate (fd, info.size) == 0);
    gst_buffer_append_memory (buf, gst_fd_allocator_alloc (fd_alloc, fd,
            info.size, GST_FD_MEMORY_FLAG_NONE));
    fail_unless (gst_npu_importer_map_frame (imp, buf, &info, &frame));
    gst_npu_importer_unmap_frame (imp, &frame);
    gst_buffer_unref (buf);
    if (i % 100 == 0)
      gst_npu_importer_clear (imp);
  }
  gst_npu_importer_free (imp);
  fail_unless_equals_int (npu_count_fds (), before);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

GST_START_TEST (test_fences)
{
  guint before = npu_count_fds (), i;
  GstBuffer *buf = gst_buffer_new_allocate (NULL, 16, NULL);

  for (i = 0; i < N; i++) {
    NpuFence *a = npu_fence_new (), *b = npu_fence_new ();
    GstNpuFenceMeta *meta = gst_buffer_add_npu_fence_meta (buf, a);

    gst_npu_fence_meta_chain (meta, b);
    npu_fence_signal (a);
    npu_fence_signal (b);
    fail_unless (gst_npu_buffer_wait (buf, 0, NULL));
    npu_fence_unref (a);
    npu_fence_unref (b);
  }
  gst_buffer_unref (buf);
  fail_unless_equals_int (npu_count_fds (), before);
}

GST_END_TEST;

static Suite *
npufdleak_suite (void)
{
  Suite *s = suite_create ("npufdleak");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_set_timeout (tc, 60);
  tcase_add_test (tc, test_pool);
  tcase_add_test (tc, test_allocator);
  tcase_add_test (tc, test_import);
  tcase_add_test (tc, test_fences);
  return s;
}

GST_CHECK_MAIN (npufdleak);
