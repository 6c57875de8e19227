/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: tests of the NPU memory allocator
 *
 * The machines the tests run on have neither DMA-BUF heaps nor udmabuf, so
 * these tests cover the fallbacks down to plain memfd memory and everything
 * that does not depend on the kind of memory: sizes, alignment, the kept
 * mapping, and the map that waits for the memory's fence.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <glib/gstdio.h>

#include <gst/gst.h>
#include <gst/check/gstcheck.h>
#include <gst/allocators/allocators.h>

#include "npu/gstnpuallocator.h"
#include "npucheck.h"

#define LOG_CATS "npuallocator"

static gsize
page_size (void)
{
  return (gsize) sysconf (_SC_PAGESIZE);
}

/* An allocator probed with @heap_env / @udmabuf_env in the environment
 * (NULL unsets the variable). */
static GstAllocator *
new_allocator_with_env (const gchar * heap, const gchar * heap_env,
    const gchar * udmabuf_env)
{
  GstAllocator *alloc;

  if (heap_env)
    g_setenv ("GST_NPU_DMA_HEAP", heap_env, TRUE);
  else
    g_unsetenv ("GST_NPU_DMA_HEAP");
  if (udmabuf_env)
    g_setenv ("GST_NPU_UDMABUF_DEVICE", udmabuf_env, TRUE);
  else
    g_unsetenv ("GST_NPU_UDMABUF_DEVICE");
  alloc = gst_npu_allocator_new (heap);
  g_unsetenv ("GST_NPU_DMA_HEAP");
  g_unsetenv ("GST_NPU_UDMABUF_DEVICE");
  fail_unless (alloc != NULL);
  fail_unless (gst_is_npu_allocator (alloc));
  return alloc;
}

/* Fails the test if anything at ERROR or WARNING level was logged. */
static void
assert_no_errors (NpuLogCapture * cap)
{
  guint n = npu_log_capture_count (cap, "ERROR", NULL) +
      npu_log_capture_count (cap, "WARN", NULL);

  if (n)
    npu_log_capture_dump (cap);
  fail_unless_equals_int (n, 0);
}

static void
check_memfd_allocator (GstAllocator * alloc)
{
  GstMemory *mem;

  fail_unless_equals_int (gst_npu_allocator_get_path (alloc),
      GST_NPU_MEMORY_PATH_MEMFD);
  fail_unless_equals_string (gst_npu_allocator_get_device (alloc), "memfd");
  mem = gst_allocator_alloc (alloc, 1000, NULL);
  fail_unless (mem != NULL);
  fail_unless (gst_is_npu_memory (mem));
  fail_unless (gst_is_fd_memory (mem));
  fail_if (gst_is_dmabuf_memory (mem));
  gst_memory_unref (mem);
}

GST_START_TEST (test_fallback_missing_nodes)
{
  NpuLogCapture *cap = npu_log_capture_start (LOG_CATS, GST_LEVEL_INFO);
  GstAllocator *alloc;

  alloc = new_allocator_with_env (NULL, "no-such-heap-for-npu-tests",
      "/nonexistent/npu-test-udmabuf");
  check_memfd_allocator (alloc);

  /* Each node tried is named, as information, with the reason. */
  fail_unless (npu_log_capture_count (cap, "INFO",
          "/dev/dma_heap/no-such-heap-for-npu-tests", "No such file", NULL)
      >= 1);
  fail_unless (npu_log_capture_count (cap, "INFO",
          "/nonexistent/npu-test-udmabuf", "No such file", NULL) >= 1);
  /* ... and the memory in use is said. */
  fail_unless (npu_log_capture_count (cap, "INFO", "memfd",
          "not a dma-buf", NULL) >= 1);
  assert_no_errors (cap);
  gst_object_unref (alloc);

  /* The heap argument beats the environment. */
  alloc = new_allocator_with_env ("no-such-heap-arg", "system",
      "/nonexistent/npu-test-udmabuf");
  check_memfd_allocator (alloc);
  fail_unless (npu_log_capture_count (cap, "INFO",
          "/dev/dma_heap/no-such-heap-arg", NULL) >= 1);
  assert_no_errors (cap);
  gst_object_unref (alloc);

  npu_log_capture_stop (cap, LOG_CATS);
}

GST_END_TEST;

GST_START_TEST (test_fallback_not_a_heap)
{
  NpuLogCapture *cap = npu_log_capture_start (LOG_CATS, GST_LEVEL_INFO);
  gchar *tmp = NULL;
  GstAllocator *alloc;
  int fd;

  /* Nodes that open but are not heaps nor udmabuf: refused at the probe. */
  alloc = new_allocator_with_env (NULL, "/dev/null", "/dev/null");
  check_memfd_allocator (alloc);
  fail_unless (npu_log_capture_count (cap, "INFO", "dma-heap /dev/null",
          "refuses", NULL) >= 1);
  fail_unless (npu_log_capture_count (cap, "INFO", "udmabuf /dev/null",
          "refuses", NULL) >= 1);
  assert_no_errors (cap);
  gst_object_unref (alloc);

  /* A regular file, for both. */
  fd = g_file_open_tmp ("npu-test-heap-XXXXXX", &tmp, NULL);
  fail_unless (fd >= 0);
  close (fd);
  alloc = new_allocator_with_env (NULL, tmp, tmp);
  check_memfd_allocator (alloc);
  fail_unless (npu_log_capture_count (cap, "INFO", "dma-heap", tmp,
          "refuses", NULL) >= 1);
  fail_unless (npu_log_capture_count (cap, "INFO", "udmabuf", tmp,
          "refuses", NULL) >= 1);
  assert_no_errors (cap);
  gst_object_unref (alloc);
  g_unlink (tmp);
  g_free (tmp);

  npu_log_capture_stop (cap, LOG_CATS);
}

GST_END_TEST;

GST_START_TEST (test_properties)
{
  GstAllocator *alloc = new_allocator_with_env ("npu-test-heap", NULL,
      "/nonexistent/npu-test-udmabuf");
  GstNpuMemoryPath path = GST_NPU_MEMORY_PATH_DMA_HEAP;
  gchar *device = NULL, *heap = NULL;

  g_object_get (alloc, "memory-path", &path, "device", &device, "heap", &heap,
      NULL);
  fail_unless_equals_int (path, GST_NPU_MEMORY_PATH_MEMFD);
  fail_unless_equals_string (device, "memfd");
  fail_unless_equals_string (heap, "npu-test-heap");
  fail_unless_equals_string (gst_npu_memory_path_to_string (path), "memfd");
  g_free (device);
  g_free (heap);
  gst_object_unref (alloc);
}

GST_END_TEST;

GST_START_TEST (test_default_shared)
{
  GstAllocator *a = gst_npu_allocator_get_default ();
  GstAllocator *b = gst_npu_allocator_get_default ();
  GstAllocator *found = gst_allocator_find (GST_ALLOCATOR_NPU);
  GstMemory *mem;

  fail_unless (a == b);
  fail_unless (found == a);
  fail_unless (gst_is_npu_allocator (found));
  fail_unless_equals_string (GST_ALLOCATOR_NPU, "NpuMemory");

  mem = gst_allocator_alloc (found, 4096, NULL);
  fail_unless (mem != NULL);
  fail_unless (gst_is_npu_memory (mem));
  gst_memory_unref (mem);

  gst_object_unref (found);
  gst_object_unref (b);
  gst_object_unref (a);
}

GST_END_TEST;

GST_START_TEST (test_sizes)
{
  GstAllocator *alloc = new_allocator_with_env (NULL, "none", "/nonexistent");
  static const gsize sizes[] = { 1, 127, 128, 1000, 4095, 4096, 4097,
    321 * 241 * 3, 1 << 20
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (sizes); i++) {
    GstMemory *mem = gst_allocator_alloc (alloc, sizes[i], NULL);
    GstMapInfo map;
    struct stat st;
    gsize maxsize;

    fail_unless (mem != NULL);
    gst_memory_get_sizes (mem, NULL, &maxsize);
    fail_unless_equals_uint64 (gst_memory_get_sizes (mem, NULL, NULL),
        sizes[i]);
    fail_unless_equals_uint64 (maxsize % page_size (), 0);
    fail_unless (maxsize >= sizes[i]);
    /* The fd holds exactly the pages. */
    fail_unless (fstat (gst_fd_memory_get_fd (mem), &st) == 0);
    fail_unless_equals_uint64 ((guint64) st.st_size, maxsize);

    fail_unless (gst_memory_map (mem, &map, GST_MAP_READWRITE));
    fail_unless_equals_uint64 (map.size, sizes[i]);
    fail_unless_equals_uint64 (((guintptr) map.data) % GST_NPU_ALIGN, 0);
    /* Fresh memory reads as zeros and takes writes to its end. */
    fail_unless_equals_int (map.data[0], 0);
    fail_unless_equals_int (map.data[map.size - 1], 0);
    memset (map.data, 0x5a, map.size);
    gst_memory_unmap (mem, &map);
    gst_memory_unref (mem);
  }
  gst_object_unref (alloc);
}

GST_END_TEST;

GST_START_TEST (test_params)
{
  GstAllocator *alloc = new_allocator_with_env (NULL, "none", "/nonexistent");
  static const struct
  {
    gsize prefix, padding, align;
  } cases[] = {
    {0, 0, 0},
    {1, 0, 0},
    {10, 300, 127},
    {128, 0, 127},
    {129, 7, 63},
    {10, 0, 255},
    {300, 4096, 1023},
    {0, 0, 2047},
    {4000, 100, 15},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    GstAllocationParams params;
    GstMemory *mem;
    GstMapInfo map;
    gsize offset, maxsize, size = 1000 + i;
    gsize align = MAX (cases[i].align + 1, GST_NPU_ALIGN);

    gst_allocation_params_init (&params);
    params.prefix = cases[i].prefix;
    params.padding = cases[i].padding;
    params.align = cases[i].align;
    mem = gst_allocator_alloc (alloc, size, &params);
    fail_unless (mem != NULL, "case %u", i);
    fail_unless_equals_uint64 (gst_memory_get_sizes (mem, &offset, &maxsize),
        size);
    fail_unless (offset >= cases[i].prefix, "case %u: offset %" G_GSIZE_FORMAT
        " < prefix %" G_GSIZE_FORMAT, i, offset, cases[i].prefix);
    fail_unless (maxsize - offset - size >= cases[i].padding, "case %u", i);
    fail_unless_equals_uint64 (maxsize % page_size (), 0);

    fail_unless (gst_memory_map (mem, &map, GST_MAP_READWRITE));
    fail_unless (((guintptr) map.data) % align == 0,
        "case %u: data %p not aligned to %" G_GSIZE_FORMAT, i, map.data, align);
    gst_memory_unmap (mem, &map);
    gst_memory_unref (mem);
  }

  /* Flags given in the params end up on the memory. */
  {
    GstAllocationParams params;
    GstMemory *mem;

    gst_allocation_params_init (&params);
    params.flags = GST_MEMORY_FLAG_ZERO_PREFIXED | GST_MEMORY_FLAG_ZERO_PADDED;
    params.prefix = 64;
    mem = gst_allocator_alloc (alloc, 100, &params);
    fail_unless (GST_MEMORY_FLAG_IS_SET (mem, GST_MEMORY_FLAG_ZERO_PREFIXED));
    fail_unless (GST_MEMORY_FLAG_IS_SET (mem, GST_MEMORY_FLAG_ZERO_PADDED));
    gst_memory_unref (mem);
  }
  gst_object_unref (alloc);
}

GST_END_TEST;

GST_START_TEST (test_keep_mapped)
{
  GstAllocator *alloc = new_allocator_with_env (NULL, "none", "/nonexistent");
  GstMemory *mem = gst_allocator_alloc (alloc, 10000, NULL);
  GstMapInfo m1, m2;
  gpointer first_data;
  guint8 *view;
  gsize offset, maxsize;

  fail_unless (gst_memory_map (mem, &m1, GST_MAP_READ));
  first_data = m1.data;
  fail_unless (gst_memory_map (mem, &m2, GST_MAP_READ));
  fail_unless (m2.data == first_data);
  gst_memory_unmap (mem, &m2);
  gst_memory_unmap (mem, &m1);

  /* Unmapped and mapped again, for writing this time: still the same. */
  fail_unless (gst_memory_map (mem, &m1, GST_MAP_WRITE));
  fail_unless (m1.data == first_data);
  memset (m1.data, 0xa5, m1.size);
  gst_memory_unmap (mem, &m1);
  fail_unless (gst_memory_map (mem, &m1, GST_MAP_READWRITE));
  fail_unless (m1.data == first_data);
  gst_memory_unmap (mem, &m1);

  /* The same pages as the fd's: another mapping of it sees the writes. */
  gst_memory_get_sizes (mem, &offset, &maxsize);
  view = mmap (NULL, maxsize, PROT_READ, MAP_SHARED,
      gst_fd_memory_get_fd (mem), 0);
  fail_unless (view != MAP_FAILED);
  fail_unless_equals_int (view[offset], 0xa5);
  fail_unless_equals_int (view[offset + 9999], 0xa5);
  munmap (view, maxsize);

  gst_memory_unref (mem);
  gst_object_unref (alloc);
}

GST_END_TEST;

/* ------------------------------------------------------------------------
 * Map waits for the memory's fence
 */
typedef struct
{
  guint8 *view;                 /* the producer's own mapping of the fd */
  gsize size;
  guint8 value;
  guint delay_ms;
  NpuFence *fence;
  GError *error;                /* signalled with this instead, if set */
} Producer;

static gpointer
producer_thread (gpointer data)
{
  Producer *p = data;
  gsize i, chunk = MAX (p->size / 8, 1);

  /* Slowly, in chunks: a reader that does not wait sees a mixture. */
  for (i = 0; i < p->size; i += chunk) {
    memset (p->view + i, p->value, MIN (chunk, p->size - i));
    g_usleep (p->delay_ms * 1000 / 8);
  }
  if (p->error)
    npu_fence_signal_error (p->fence, p->error);
  else
    npu_fence_signal (p->fence);
  return NULL;
}

static guint8 *
map_fd_view (GstMemory * mem)
{
  gsize offset, maxsize;
  guint8 *view;

  gst_memory_get_sizes (mem, &offset, &maxsize);
  view = mmap (NULL, maxsize, PROT_READ | PROT_WRITE, MAP_SHARED,
      gst_fd_memory_get_fd (mem), 0);
  fail_unless (view != MAP_FAILED);
  return view + offset;
}

static void
unmap_fd_view (GstMemory * mem, guint8 * view)
{
  gsize offset, maxsize;

  gst_memory_get_sizes (mem, &offset, &maxsize);
  munmap (view - offset, maxsize);
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

GST_START_TEST (test_map_waits_for_fence)
{
  GstAllocator *alloc = new_allocator_with_env (NULL, "none", "/nonexistent");
  guint round;

  for (round = 0; round < 4; round++) {
    GstMemory *mem = gst_allocator_alloc (alloc, 64 * 1024, NULL);
    Producer p = { 0, };
    GThread *thread;
    GstMapInfo map;
    gint64 start;

    p.view = map_fd_view (mem);
    p.size = 64 * 1024;
    p.value = 0x11 * (round + 1);
    p.delay_ms = 80;
    p.fence = npu_fence_new ();
    gst_npu_memory_set_fence (mem, p.fence);
    fail_unless (gst_npu_memory_get_fence (mem) == p.fence);

    start = g_get_monotonic_time ();
    thread = g_thread_new ("producer", producer_thread, &p);
    if (round % 2 == 0) {
      fail_unless (gst_memory_map (mem, &map, GST_MAP_READ));
      fail_unless (g_get_monotonic_time () - start >= 70 * 1000);
      check_filled (map.data, map.size, p.value);
      gst_memory_unmap (mem, &map);
    } else {
      /* Through a buffer, and through a memory shared from it. */
      GstBuffer *buf = gst_buffer_new ();
      GstMemory *sub;

      gst_buffer_append_memory (buf, gst_memory_ref (mem));
      fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
      check_filled (map.data, map.size, p.value);
      gst_buffer_unmap (buf, &map);
      gst_buffer_unref (buf);
      sub = gst_memory_share (mem, 100, 1000);
      fail_unless (gst_npu_memory_get_fence (sub) == p.fence);
      fail_unless (gst_memory_map (sub, &map, GST_MAP_READ));
      check_filled (map.data, map.size, p.value);
      gst_memory_unmap (sub, &map);
      gst_memory_unref (sub);
    }
    g_thread_join (thread);
    fail_unless (gst_npu_memory_wait (mem, 0, NULL));

    /* Clearing the fence. */
    gst_npu_memory_set_fence (mem, NULL);
    fail_unless (gst_npu_memory_get_fence (mem) == NULL);
    npu_fence_unref (p.fence);
    unmap_fd_view (mem, p.view);
    gst_memory_unref (mem);
  }
  gst_object_unref (alloc);
}

GST_END_TEST;

GST_START_TEST (test_map_fence_timeout)
{
  NpuLogCapture *cap = npu_log_capture_start (LOG_CATS, GST_LEVEL_INFO);
  GstAllocator *alloc;
  GstMemory *mem;
  NpuFence *fence;
  GstMapInfo map;
  GstBuffer *buf;
  gint64 start, elapsed;

  g_setenv ("GST_NPU_FENCE_TIMEOUT_MS", "200", TRUE);
  alloc = new_allocator_with_env (NULL, "none", "/nonexistent");
  g_unsetenv ("GST_NPU_FENCE_TIMEOUT_MS");

  mem = gst_allocator_alloc (alloc, 4096, NULL);
  fence = npu_fence_new ();
  gst_npu_memory_set_fence (mem, fence);

  start = g_get_monotonic_time ();
  fail_if (gst_memory_map (mem, &map, GST_MAP_READ));
  elapsed = g_get_monotonic_time () - start;
  fail_unless (elapsed >= 190 * 1000, "gave up after %" G_GINT64_FORMAT " us",
      elapsed);
  fail_unless (elapsed < 2 * G_USEC_PER_SEC, "took %" G_GINT64_FORMAT " us",
      elapsed);
  fail_unless (npu_log_capture_count (cap, "ERROR", "did not signal within",
          "200 ms", NULL) == 1);

  /* A buffer map fails the same way.  (GstBuffer tries a copy of memory
   * it cannot map, and the copy waits as well: up to twice the timeout.) */
  buf = gst_buffer_new ();
  gst_buffer_append_memory (buf, gst_memory_ref (mem));
  start = g_get_monotonic_time ();
  fail_if (gst_buffer_map (buf, &map, GST_MAP_READ));
  elapsed = g_get_monotonic_time () - start;
  fail_unless (elapsed < 3 * G_USEC_PER_SEC, "took %" G_GINT64_FORMAT " us",
      elapsed);
  fail_unless (npu_log_capture_count (cap, "ERROR", "did not signal within",
          NULL) >= 2);
  /* The buffer still holds the NPU memory, not some copy. */
  fail_unless (gst_buffer_peek_memory (buf, 0) == mem);

  /* Once signalled, maps work again. */
  npu_fence_signal (fence);
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);

  npu_fence_unref (fence);
  gst_memory_unref (mem);
  gst_object_unref (alloc);
  npu_log_capture_stop (cap, LOG_CATS);
}

GST_END_TEST;

GST_START_TEST (test_map_fence_error)
{
  NpuLogCapture *cap = npu_log_capture_start (LOG_CATS, GST_LEVEL_INFO);
  GstAllocator *alloc = new_allocator_with_env (NULL, "none", "/nonexistent");
  GstMemory *mem = gst_allocator_alloc (alloc, 4096, NULL);
  Producer p = { 0, };
  GThread *thread;
  GError *error = NULL;
  GstMapInfo map;

  p.view = map_fd_view (mem);
  p.size = 4096;
  p.value = 0x77;
  p.delay_ms = 40;
  p.fence = npu_fence_new ();
  p.error = g_error_new (NPU_FENCE_ERROR, NPU_FENCE_ERROR_FAILED,
      "tensor kernel blew up on purpose");
  gst_npu_memory_set_fence (mem, p.fence);

  thread = g_thread_new ("producer", producer_thread, &p);
  fail_if (gst_memory_map (mem, &map, GST_MAP_READ));
  g_thread_join (thread);
  fail_unless (npu_log_capture_count (cap, "ERROR",
          "tensor kernel blew up on purpose", NULL) == 1);

  fail_if (gst_npu_memory_wait (mem, -1, &error));
  fail_unless (g_error_matches (error, NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_FAILED));
  g_clear_error (&error);

  npu_fence_unref (p.fence);
  unmap_fd_view (mem, p.view);
  gst_memory_unref (mem);
  gst_object_unref (alloc);
  npu_log_capture_stop (cap, LOG_CATS);
}

GST_END_TEST;

GST_START_TEST (test_fence_dropped_with_memory)
{
  GstAllocator *alloc = new_allocator_with_env (NULL, "none", "/nonexistent");
  GstMemory *mem = gst_allocator_alloc (alloc, 4096, NULL);
  NpuFence *fence = npu_fence_new ();
  gint fd = npu_fence_get_fd (fence);

  npu_fence_signal (fence);
  gst_npu_memory_set_fence (mem, fence);
  /* Replacing a fence drops the old one's reference. */
  gst_npu_memory_set_fence (mem, fence);
  npu_fence_unref (fence);
  fail_unless (fcntl (fd, F_GETFD) >= 0);
  gst_memory_unref (mem);
  /* The memory held the last reference: the fence (and its fd) is gone. */
  fail_unless (fcntl (fd, F_GETFD) < 0 && errno == EBADF);
  gst_object_unref (alloc);
}

GST_END_TEST;

static Suite *
npuallocator_suite (void)
{
  Suite *s = suite_create ("npuallocator");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_fallback_missing_nodes);
  tcase_add_test (tc, test_fallback_not_a_heap);
  tcase_add_test (tc, test_properties);
  tcase_add_test (tc, test_default_shared);
  tcase_add_test (tc, test_sizes);
  tcase_add_test (tc, test_params);
  tcase_add_test (tc, test_keep_mapped);
  tcase_add_test (tc, test_map_waits_for_fence);
  tcase_add_test (tc, test_map_fence_timeout);
  tcase_add_test (tc, test_map_fence_error);
  tcase_add_test (tc, test_fence_dropped_with_memory);
  return s;
}

GST_CHECK_MAIN (npuallocator);
