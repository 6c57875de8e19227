/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: tests of in-place access to upstream memory (GstNpuImporter)
 *
 * Foreign fd memory is a memfd made here and wrapped by a plain
 * GstFdAllocator, as a source that is not ours would hand it over.
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
#include "npu/gstnpufencemeta.h"
#include "npu/gstnpuimport.h"
#include "npucheck.h"

typedef struct
{
  int fd;
  gsize size;
  guint8 *view;                 /* the test's own mapping */
} TestMemfd;

static void
memfd_open (TestMemfd * m, gsize size, guint8 fill)
{
  m->fd = memfd_create ("npu-import-test", MFD_CLOEXEC);
  fail_unless (m->fd >= 0);
  fail_unless (ftruncate (m->fd, size) == 0);
  m->size = size;
  m->view = mmap (NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
  fail_unless (m->view != MAP_FAILED);
  memset (m->view, fill, size);
}

static void
memfd_close (TestMemfd * m)
{
  munmap (m->view, m->size);
  close (m->fd);
}

/* A GstMemory owning a dup of @m's fd, from a foreign fd allocator. */
static GstMemory *
wrap_fd (GstAllocator * fd_alloc, TestMemfd * m)
{
  GstMemory *mem = gst_fd_allocator_alloc (fd_alloc, dup (m->fd), m->size,
      GST_FD_MEMORY_FLAG_NONE);

  fail_unless (mem != NULL);
  fail_if (gst_is_npu_memory (mem));
  return mem;
}

static void
check_stats (GstNpuImporter * imp, guint64 n_maps, guint64 n_mmaps,
    guint64 n_cached)
{
  GstNpuImportStats stats;

  gst_npu_importer_get_stats (imp, &stats);
  fail_unless_equals_uint64 (stats.n_maps, n_maps);
  fail_unless_equals_uint64 (stats.n_mmaps, n_mmaps);
  fail_unless_equals_uint64 (stats.n_cached, n_cached);
  fail_unless_equals_uint64 (stats.bytes_copied, 0);
}

GST_START_TEST (test_fd_in_place)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (4);
  GstNpuImportMap map, map2;
  GstNpuImportStats stats;
  GstMemory *mem, *mem2;
  TestMemfd m;
  guint8 *first_data;

  memfd_open (&m, 3 * 4096, 0x11);
  mem = wrap_fd (fd_alloc, &m);

  fail_unless (gst_npu_importer_map (imp, mem, GST_MAP_READ, &map));
  fail_unless_equals_int (map.kind, GST_NPU_IMPORT_FD);
  fail_unless_equals_uint64 (map.size, 3 * 4096);
  fail_unless_equals_int (map.data[0], 0x11);
  fail_unless_equals_int (map.data[3 * 4096 - 1], 0x11);
  first_data = map.data;
  gst_npu_importer_unmap (imp, &map);
  check_stats (imp, 1, 1, 0);

  /* Same memory again: from the cache. */
  fail_unless (gst_npu_importer_map (imp, mem, GST_MAP_READ, &map));
  fail_unless (map.data == first_data);
  gst_npu_importer_unmap (imp, &map);
  check_stats (imp, 2, 1, 1);

  /* The same dma-buf/memfd re-wrapped in a new GstMemory (another fd on
   * it), as v4l2src does each frame: still the same mapping. */
  mem2 = wrap_fd (fd_alloc, &m);
  fail_unless (gst_npu_importer_map (imp, mem2, GST_MAP_READ, &map2));
  fail_unless (map2.data == first_data);
  check_stats (imp, 3, 1, 2);

  /* In place: what the producer writes shows through, no copy. */
  m.view[4096 + 7] = 0xee;
  fail_unless_equals_int (map2.data[4096 + 7], 0xee);
  gst_npu_importer_unmap (imp, &map2);

  /* Writing through the importer lands in the producer's pages too; the
   * write access needs a new mapping of the same file. */
  fail_unless (gst_npu_importer_map (imp, mem2, GST_MAP_READWRITE, &map2));
  map2.data[5] = 0x5a;
  fail_unless_equals_int (m.view[5], 0x5a);
  gst_npu_importer_unmap (imp, &map2);
  /* ... and read access is served from it afterwards. */
  fail_unless (gst_npu_importer_map (imp, mem, GST_MAP_READ, &map));
  fail_unless_equals_int (map.data[5], 0x5a);
  gst_npu_importer_unmap (imp, &map);

  gst_npu_importer_get_stats (imp, &stats);
  fail_unless_equals_uint64 (stats.n_fd, stats.n_maps);
  fail_unless_equals_uint64 (stats.n_dmabuf, 0);
  fail_unless_equals_uint64 (stats.bytes_copied, 0);
  fail_unless_equals_uint64 (stats.n_mmaps, 2);

  gst_memory_unref (mem);
  gst_memory_unref (mem2);
  gst_npu_importer_free (imp);
  memfd_close (&m);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

GST_START_TEST (test_lru_eviction)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (2);
  TestMemfd m[3];
  GstMemory *mem[3];
  GstNpuImportMap map;
  guint i;

  for (i = 0; i < 3; i++) {
    memfd_open (&m[i], 4096, 0x10 + i);
    mem[i] = wrap_fd (fd_alloc, &m[i]);
  }

#define MAP_AND_CHECK(i) G_STMT_START {                                  \
    fail_unless (gst_npu_importer_map (imp, mem[i], GST_MAP_READ, &map)); \
    fail_unless_equals_int (map.data[100], 0x10 + (i));                   \
    gst_npu_importer_unmap (imp, &map);                                   \
  } G_STMT_END

  MAP_AND_CHECK (0);
  MAP_AND_CHECK (1);
  check_stats (imp, 2, 2, 0);
  MAP_AND_CHECK (0);            /* 0 is now the most recent */
  check_stats (imp, 3, 2, 1);
  MAP_AND_CHECK (2);            /* evicts 1 */
  check_stats (imp, 4, 3, 1);
  MAP_AND_CHECK (0);            /* still there */
  check_stats (imp, 5, 3, 2);
  MAP_AND_CHECK (1);            /* mapped again, evicting 2 */
  check_stats (imp, 6, 4, 2);
  MAP_AND_CHECK (0);
  check_stats (imp, 7, 4, 3);
#undef MAP_AND_CHECK

  gst_npu_importer_clear (imp);
  fail_unless (gst_npu_importer_map (imp, mem[0], GST_MAP_READ, &map));
  gst_npu_importer_unmap (imp, &map);
  check_stats (imp, 8, 5, 3);

  for (i = 0; i < 3; i++) {
    gst_memory_unref (mem[i]);
    memfd_close (&m[i]);
  }
  gst_npu_importer_free (imp);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

/* Mappings still in use are not taken away, whatever the cache size. */
GST_START_TEST (test_eviction_while_mapped)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (1);
  TestMemfd m[3];
  GstMemory *mem[3];
  GstNpuImportMap map[3], again;
  guint i;

  for (i = 0; i < 3; i++) {
    memfd_open (&m[i], 8192, 0x20 + i);
    mem[i] = wrap_fd (fd_alloc, &m[i]);
  }
  for (i = 0; i < 3; i++)
    fail_unless (gst_npu_importer_map (imp, mem[i], GST_MAP_READ, &map[i]));
  /* All three still readable (a munmapped one would crash here). */
  for (i = 0; i < 3; i++) {
    fail_unless_equals_int (map[i].data[0], 0x20 + i);
    fail_unless_equals_int (map[i].data[8191], 0x20 + i);
  }

  /* Asking for write access while a read mapping is in use. */
  fail_unless (gst_npu_importer_map (imp, mem[0], GST_MAP_READWRITE, &again));
  again.data[1] = 0x77;
  fail_unless_equals_int (map[0].data[1], 0x77);
  gst_npu_importer_unmap (imp, &again);
  fail_unless_equals_int (map[0].data[8000], 0x20);

  /* Clearing while in use only drops the cache's hold. */
  gst_npu_importer_clear (imp);
  fail_unless_equals_int (map[1].data[4000], 0x21);

  for (i = 0; i < 3; i++)
    gst_npu_importer_unmap (imp, &map[i]);
  for (i = 0; i < 3; i++) {
    gst_memory_unref (mem[i]);
    memfd_close (&m[i]);
  }
  gst_npu_importer_free (imp);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

GST_START_TEST (test_sub_memory)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (0);
  GstNpuImportMap map, submap;
  GstMemory *mem, *sub, *subsub;
  TestMemfd m;
  guint i;

  memfd_open (&m, 4 * 4096, 0);
  for (i = 0; i < m.size; i++)
    m.view[i] = i % 251;
  mem = wrap_fd (fd_alloc, &m);

  fail_unless (gst_npu_importer_map (imp, mem, GST_MAP_READ, &map));
  sub = gst_memory_share (mem, 1000, 5000);
  fail_unless (gst_npu_importer_map (imp, sub, GST_MAP_READ, &submap));
  fail_unless (submap.data == map.data + 1000);
  fail_unless_equals_uint64 (submap.size, 5000);
  fail_unless_equals_int (submap.data[0], 1000 % 251);
  gst_npu_importer_unmap (imp, &submap);

  /* Shared memory is read-only: no writing to it in place either. */
  fail_if (gst_npu_importer_map (imp, sub, GST_MAP_WRITE, &submap));

  /* A share of a share counts from the first one's offset. */
  subsub = gst_memory_share (sub, 10, 100);
  fail_unless (gst_npu_importer_map (imp, subsub, GST_MAP_READ, &submap));
  fail_unless (submap.data == map.data + 1010);
  fail_unless_equals_int (submap.data[0], 1010 % 251);
  gst_npu_importer_unmap (imp, &submap);
  gst_npu_importer_unmap (imp, &map);
  check_stats (imp, 3, 1, 2);

  gst_memory_unref (subsub);
  gst_memory_unref (sub);
  gst_memory_unref (mem);

  /* A resized memory (offset into the fd) as well. */
  mem = wrap_fd (fd_alloc, &m);
  gst_memory_resize (mem, 3000, 100);
  fail_unless (gst_npu_importer_map (imp, mem, GST_MAP_READ, &map));
  fail_unless_equals_int (map.data[0], 3000 % 251);
  fail_unless_equals_uint64 (map.size, 100);
  gst_npu_importer_unmap (imp, &map);
  gst_memory_unref (mem);
  gst_npu_importer_free (imp);
  memfd_close (&m);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

/* An fd smaller than the memory claims to be is refused, not mapped past
 * its end (which would fault on access). */
GST_START_TEST (test_fd_too_small)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (0);
  GstNpuImportMap map;
  GstMemory *mem;
  TestMemfd m;

  memfd_open (&m, 4096, 1);
  mem = gst_fd_allocator_alloc (fd_alloc, dup (m.fd), 3 * 4096,
      GST_FD_MEMORY_FLAG_NONE);
  fail_if (gst_npu_importer_map (imp, mem, GST_MAP_READ, &map));
  gst_memory_unref (mem);
  gst_npu_importer_free (imp);
  memfd_close (&m);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

/* NV12 64x48 laid out with custom strides and offsets. */
#define W 64
#define H 48
#define Y_STRIDE 192
#define UV_STRIDE 256
#define Y_OFFSET 512
#define UV_OFFSET (Y_OFFSET + Y_STRIDE * H + 1024)
#define FRAME_SIZE (UV_OFFSET + UV_STRIDE * (H / 2))

static GstBuffer *
custom_nv12_buffer (GstAllocator * fd_alloc, TestMemfd * m, gsize mem_size)
{
  gsize offsets[GST_VIDEO_MAX_PLANES] = { Y_OFFSET, UV_OFFSET };
  gint strides[GST_VIDEO_MAX_PLANES] = { Y_STRIDE, UV_STRIDE };
  GstBuffer *buf = gst_buffer_new ();
  guint x, y;

  memfd_open (m, MAX (mem_size, FRAME_SIZE), 0xcc);
  for (y = 0; y < H; y++)
    for (x = 0; x < W; x++)
      m->view[Y_OFFSET + y * Y_STRIDE + x] = y;
  for (y = 0; y < H / 2; y++)
    for (x = 0; x < W; x++)
      m->view[UV_OFFSET + y * UV_STRIDE + x] = 0x80 + y;
  gst_buffer_append_memory (buf, gst_fd_allocator_alloc (fd_alloc,
          dup (m->fd), mem_size, GST_FD_MEMORY_FLAG_NONE));
  gst_buffer_add_video_meta_full (buf, GST_VIDEO_FRAME_FLAG_NONE,
      GST_VIDEO_FORMAT_NV12, W, H, 2, offsets, strides);
  return buf;
}

GST_START_TEST (test_map_frame)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (0);
  GstNpuImportFrame frame;
  GstVideoInfo info;
  GstBuffer *buf;
  TestMemfd m;
  guint y;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_NV12, W, H);
  buf = custom_nv12_buffer (fd_alloc, &m, FRAME_SIZE);

  fail_unless (gst_npu_importer_map_frame (imp, buf, &info, &frame));
  fail_unless_equals_int (frame.kind, GST_NPU_IMPORT_FD);
  fail_unless_equals_int (frame.n_planes, 2);
  fail_unless_equals_int (frame.stride[0], Y_STRIDE);
  fail_unless_equals_int (frame.stride[1], UV_STRIDE);
  fail_unless (frame.data[1] - frame.data[0] == UV_OFFSET - Y_OFFSET);
  for (y = 0; y < H; y++)
    fail_unless_equals_int (frame.data[0][y * Y_STRIDE + W - 1], y);
  for (y = 0; y < H / 2; y++)
    fail_unless_equals_int (frame.data[1][y * UV_STRIDE], 0x80 + y);
  /* In place: the producer's writes show. */
  m.view[Y_OFFSET + 3] = 0xab;
  fail_unless_equals_int (frame.data[0][3], 0xab);
  gst_npu_importer_unmap_frame (imp, &frame);

  gst_buffer_unref (buf);
  memfd_close (&m);
  gst_npu_importer_free (imp);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

GST_START_TEST (test_map_frame_truncated)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (0);
  GstNpuImportFrame frame;
  GstVideoInfo info;
  GstBuffer *buf;
  TestMemfd m;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_NV12, W, H);

  /* The chroma plane starts inside the memory but runs past its end. */
  buf = custom_nv12_buffer (fd_alloc, &m, FRAME_SIZE - UV_STRIDE);
  fail_if (gst_npu_importer_map_frame (imp, buf, &info, &frame));
  gst_buffer_unref (buf);
  memfd_close (&m);

  /* The chroma plane starts beyond the memory's end. */
  buf = custom_nv12_buffer (fd_alloc, &m, UV_OFFSET - 10);
  fail_if (gst_npu_importer_map_frame (imp, buf, &info, &frame));
  gst_buffer_unref (buf);
  memfd_close (&m);

  /* The luma rows do not fit. */
  buf = custom_nv12_buffer (fd_alloc, &m, Y_OFFSET + Y_STRIDE * 10);
  fail_if (gst_npu_importer_map_frame (imp, buf, &info, &frame));
  gst_buffer_unref (buf);
  memfd_close (&m);

  /* No video meta, and shorter than the caps say. */
  buf = gst_buffer_new_allocate (NULL, info.size - 1, NULL);
  fail_if (gst_npu_importer_map_frame (imp, buf, &info, &frame));
  gst_buffer_unref (buf);

  /* A video meta that disagrees with the caps. */
  {
    GstVideoInfo i420;

    gst_video_info_set_format (&i420, GST_VIDEO_FORMAT_I420, W, H);
    buf = custom_nv12_buffer (fd_alloc, &m, FRAME_SIZE);
    fail_if (gst_npu_importer_map_frame (imp, buf, &i420, &frame));
    gst_buffer_unref (buf);
    memfd_close (&m);
  }

  gst_npu_importer_free (imp);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

/* I420 with each plane in its own foreign memory, more planes than the
 * cache holds: all planes stay valid until unmapped. */
GST_START_TEST (test_map_frame_multi_memory)
{
  GstAllocator *fd_alloc = gst_fd_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (1);
  GstNpuImportFrame frame;
  GstVideoInfo info;
  GstBuffer *buf = gst_buffer_new ();
  TestMemfd m[3];
  guint p;

  gst_video_info_set_format (&info, GST_VIDEO_FORMAT_I420, W, H);
  for (p = 0; p < 3; p++) {
    gsize plane_size = (p + 1 < 3 ? info.offset[p + 1] : info.size) -
        info.offset[p];

    memfd_open (&m[p], plane_size, 0x40 + p);
    gst_buffer_append_memory (buf, gst_fd_allocator_alloc (fd_alloc,
            dup (m[p].fd), plane_size, GST_FD_MEMORY_FLAG_NONE));
  }
  fail_unless (gst_npu_importer_map_frame (imp, buf, &info, &frame));
  for (p = 0; p < 3; p++) {
    fail_unless_equals_int (frame.data[p][0], 0x40 + p);
    fail_unless_equals_int (frame.data[p][frame.stride[p] *
            (GST_VIDEO_INFO_COMP_HEIGHT (&info, p) - 1)], 0x40 + p);
  }
  gst_npu_importer_unmap_frame (imp, &frame);

  gst_buffer_unref (buf);
  for (p = 0; p < 3; p++)
    memfd_close (&m[p]);
  gst_npu_importer_free (imp);
  gst_object_unref (fd_alloc);
}

GST_END_TEST;

GST_START_TEST (test_system_and_npu_memory)
{
  GstNpuImporter *imp = gst_npu_importer_new (0);
  GstAllocator *npu = gst_npu_allocator_get_default ();
  GstBuffer *sys = gst_buffer_new_allocate (NULL, 1000, NULL);
  GstBuffer *ours = gst_buffer_new_allocate (npu, 1000, NULL);
  GstNpuImportMap map;
  GstMapInfo info;
  NpuFence *fence;
  GstNpuImportStats stats;

  fail_unless (gst_buffer_map (sys, &info, GST_MAP_READ));
  fail_unless (gst_npu_importer_map (imp, gst_buffer_peek_memory (sys, 0),
          GST_MAP_READ, &map));
  fail_unless_equals_int (map.kind, GST_NPU_IMPORT_SYSTEM);
  fail_unless (map.data == info.data);
  gst_npu_importer_unmap (imp, &map);
  gst_buffer_unmap (sys, &info);

  fail_unless (gst_buffer_map (ours, &info, GST_MAP_READ));
  fail_unless (gst_npu_importer_map (imp, gst_buffer_peek_memory (ours, 0),
          GST_MAP_READ, &map));
  fail_unless_equals_int (map.kind, GST_NPU_IMPORT_NPU);
  fail_unless (map.data == info.data);
  gst_npu_importer_unmap (imp, &map);
  gst_buffer_unmap (ours, &info);

  /* Our memory still waits for its fence. */
  fence = npu_fence_new ();
  gst_buffer_add_npu_fence_meta (ours, fence);
  npu_fence_signal_error (fence, g_error_new (NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_FAILED, "no data"));
  fail_if (gst_npu_importer_map (imp, gst_buffer_peek_memory (ours, 0),
          GST_MAP_READ, &map));
  npu_fence_unref (fence);

  gst_npu_importer_get_stats (imp, &stats);
  fail_unless_equals_uint64 (stats.n_maps, 2);
  fail_unless_equals_uint64 (stats.n_mmaps, 0);
  fail_unless_equals_uint64 (stats.n_fd, 0);

  gst_buffer_unref (sys);
  gst_buffer_unref (ours);
  gst_object_unref (npu);
  gst_npu_importer_free (imp);
}

GST_END_TEST;

static Suite *
npuimport_suite (void)
{
  Suite *s = suite_create ("npuimport");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_fd_in_place);
  tcase_add_test (tc, test_lru_eviction);
  tcase_add_test (tc, test_eviction_while_mapped);
  tcase_add_test (tc, test_sub_memory);
  tcase_add_test (tc, test_fd_too_small);
  tcase_add_test (tc, test_map_frame);
  tcase_add_test (tc, test_map_frame_truncated);
  tcase_add_test (tc, test_map_frame_multi_memory);
  tcase_add_test (tc, test_system_and_npu_memory);
  return s;
}

GST_CHECK_MAIN (npuimport);
