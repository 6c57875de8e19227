/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rk-fence: NPU fences over real kernel sync_files (run inside the QEMU guest)
 *
 * vgem gives a real, externally controlled dma_fence: create a dumb buffer,
 * export it as a dma-buf (PRIME), attach a write fence (VGEM_FENCE_ATTACH)
 * and export the dma-buf's pending fence as a sync_file
 * (DMA_BUF_IOCTL_EXPORT_SYNC_FILE).  The fence signals when we say so
 * (VGEM_FENCE_SIGNAL), or by itself after vgem's 10 s timeout, so every
 * wait below stays well under that.
 *
 * Checks: NpuFence over that sync_file (pending, timed-out wait); a CPU
 * queue task gated on it runs only after the signal; a merge of the
 * sync_file and an eventfd fence signals only after both; NPU memory whose
 * pending fence is a vgem fence blocks its map until the signal; a dma-buf
 * from the NPU allocator imported through GstNpuImporter is read in place,
 * mapped once.
 */
#include "rk-common.h"

#include <dirent.h>
#include <gst/gst.h>
#include <gst/allocators/allocators.h>
#include <npu/npu.h>
#include <npu/gstnpuallocator.h>
#include <npu/gstnpuimport.h>
#include <core/device/npufence.h>
#include <core/device/npubackend.h>

/* DRM / vgem uapi, defined here so that the test needs no libdrm headers
 * (bookworm's linux-libc-dev has no vgem_drm.h). */
struct rk_drm_version
{
  int version_major, version_minor, version_patchlevel;
  size_t name_len;
  char *name;
  size_t date_len;
  char *date;
  size_t desc_len;
  char *desc;
};
struct rk_drm_mode_create_dumb
{
  uint32_t height, width, bpp, flags, handle, pitch;
  uint64_t size;
};
struct rk_drm_prime_handle
{
  uint32_t handle, flags;
  int32_t fd;
};
struct rk_vgem_fence_attach
{
  uint32_t handle, flags, out_fence, pad;
};
struct rk_vgem_fence_signal
{
  uint32_t fence, flags;
};
#define RK_DRM_IOCTL_VERSION _IOWR('d', 0x00, struct rk_drm_version)
#define RK_DRM_IOCTL_MODE_CREATE_DUMB _IOWR('d', 0xB2, struct rk_drm_mode_create_dumb)
#define RK_DRM_IOCTL_PRIME_HANDLE_TO_FD _IOWR('d', 0x2d, struct rk_drm_prime_handle)
#define RK_VGEM_FENCE_ATTACH _IOWR('d', 0x40 + 0x1, struct rk_vgem_fence_attach)
#define RK_VGEM_FENCE_SIGNAL _IOW('d', 0x40 + 0x2, struct rk_vgem_fence_signal)
#define RK_VGEM_FENCE_WRITE 0x1

#define MS (G_TIME_SPAN_MILLISECOND)

static int vgem = -1;

static int
open_vgem (void)
{
  DIR *d = opendir ("/dev/dri");
  struct dirent *de;
  int fd = -1;

  if (!d)
    return -1;
  while ((de = readdir (d)) != NULL) {
    char path[300], name[64];
    struct rk_drm_version v;
    int f;
    if (strncmp (de->d_name, "card", 4) != 0)
      continue;
    snprintf (path, sizeof path, "/dev/dri/%s", de->d_name);
    f = open (path, O_RDWR | O_CLOEXEC);
    if (f < 0)
      continue;
    memset (&v, 0, sizeof v);
    memset (name, 0, sizeof name);
    v.name = name;
    v.name_len = sizeof name - 1;
    if (ioctl (f, RK_DRM_IOCTL_VERSION, &v) == 0 && strcmp (name, "vgem") == 0) {
      RK_INFO ("vgem device: %s", path);
      fd = f;
      break;
    }
    close (f);
  }
  closedir (d);
  return fd;
}

/* A vgem buffer with a pending write fence; returns the sync_file fd of the
 * buffer's fence, and the vgem fence id in *fence_id. */
typedef struct
{
  int dmabuf;
  int sync_file;
  uint32_t fence_id;
} VgemFence;

static gboolean
vgem_fence_new (VgemFence * vf, const char *what)
{
  struct rk_drm_mode_create_dumb d = {.height = 64,.width = 64,.bpp = 32 };
  struct rk_drm_prime_handle ph;
  struct rk_vgem_fence_attach at;
  struct dma_buf_export_sync_file ex = {.flags = DMA_BUF_SYNC_READ,.fd = -1 };
  gboolean ok;

  vf->dmabuf = vf->sync_file = -1;
  ok = ioctl (vgem, RK_DRM_IOCTL_MODE_CREATE_DUMB, &d) == 0;
  RK_CHECK (ok, "%s: vgem DRM_IOCTL_MODE_CREATE_DUMB 64x64x32 (%llu bytes)",
      what, (unsigned long long) d.size);
  if (!ok)
    return FALSE;
  memset (&ph, 0, sizeof ph);
  ph.handle = d.handle;
  ph.flags = O_CLOEXEC | O_RDWR;
  ok = ioctl (vgem, RK_DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph) == 0;
  RK_CHECK (ok, "%s: DRM_IOCTL_PRIME_HANDLE_TO_FD -> dma-buf fd %d", what,
      ph.fd);
  if (!ok)
    return FALSE;
  vf->dmabuf = ph.fd;
  rk_fdinfo_print (vf->dmabuf, what);

  memset (&at, 0, sizeof at);
  at.handle = d.handle;
  at.flags = RK_VGEM_FENCE_WRITE;
  ok = ioctl (vgem, RK_VGEM_FENCE_ATTACH, &at) == 0;
  RK_CHECK (ok, "%s: VGEM_FENCE_ATTACH (write fence %u)", what, at.out_fence);
  if (!ok)
    return FALSE;
  vf->fence_id = at.out_fence;
  ok = ioctl (vf->dmabuf, DMA_BUF_IOCTL_EXPORT_SYNC_FILE, &ex) == 0;
  RK_CHECK (ok && ex.fd >= 0,
      "%s: DMA_BUF_IOCTL_EXPORT_SYNC_FILE (read) -> sync_file fd %d", what,
      ex.fd);
  if (!ok)
    return FALSE;
  vf->sync_file = ex.fd;
  RK_CHECK (rk_sync_file_status (vf->sync_file, TRUE, what) == 0,
      "%s: the kernel says the sync_file is active (pending)", what);
  return TRUE;
}

static gboolean
vgem_fence_signal (VgemFence * vf)
{
  struct rk_vgem_fence_signal s = {.fence = vf->fence_id,.flags = 0 };
  return ioctl (vgem, RK_VGEM_FENCE_SIGNAL, &s) == 0;
}

static void
vgem_fence_clear (VgemFence * vf)
{
  if (vf->sync_file >= 0)
    close (vf->sync_file);
  if (vf->dmabuf >= 0)
    close (vf->dmabuf);
  vf->sync_file = vf->dmabuf = -1;
}

static const char *
state (NpuFence * f)
{
  return npu_fence_is_signalled (f) ? "signalled" : "pending";
}

/* ---- a CPU task gated on the vgem fence --------------------------------- */

typedef struct
{
  gint ran;
  gint64 ran_at;
} TaskRecord;

static gboolean
record_task (NpuTask * task, gpointer user_data, GError ** error)
{
  TaskRecord *r = user_data;
  r->ran_at = g_get_monotonic_time ();
  g_atomic_int_set (&r->ran, 1);
  return TRUE;
}

static void
test_sync_file_and_task (void)
{
  const char *what = "vgem fence";
  VgemFence vf;
  NpuFence *fence, *out;
  NpuDevice *dev;
  NpuQueue *queue;
  TaskRecord rec = { 0, 0 };
  GError *error = NULL;
  gint64 t0, t_signal;
  gboolean ok;

  if (!vgem_fence_new (&vf, what))
    return;

  fence = npu_fence_new_sync_file (dup (vf.sync_file));
  RK_CHECK (fence != NULL, "npu_fence_new_sync_file (vgem sync_file)");
  if (!fence) {
    vgem_fence_clear (&vf);
    return;
  }
  RK_INFO ("NpuFence kind %d (SYNC_FILE is %d), fd %d, state %s",
      npu_fence_get_kind (fence), NPU_FENCE_KIND_SYNC_FILE,
      npu_fence_get_fd (fence), state (fence));
  RK_CHECK (npu_fence_get_kind (fence) == NPU_FENCE_KIND_SYNC_FILE,
      "fence kind is NPU_FENCE_KIND_SYNC_FILE");
  RK_CHECK (!npu_fence_is_signalled (fence),
      "npu_fence_is_signalled is FALSE before VGEM_FENCE_SIGNAL");
  t0 = g_get_monotonic_time ();
  ok = npu_fence_wait (fence, 100 * MS, &error);
  RK_CHECK (!ok && g_error_matches (error, NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_TIMEOUT),
      "npu_fence_wait (100 ms) fails with NPU_FENCE_ERROR_TIMEOUT after %"
      G_GINT64_FORMAT " ms (%s)", (g_get_monotonic_time () - t0) / MS,
      error ? error->message : "no error");
  RK_CHECK (g_get_monotonic_time () - t0 >= 90 * MS,
      "the timed-out wait lasted about its timeout");
  g_clear_error (&error);

  dev = npu_device_new_cpu (2);
  RK_CHECK (dev != NULL, "npu_device_new_cpu (2)");
  if (!dev)
    goto done;
  queue = npu_queue_new (dev, "rk-fence");
  out = npu_queue_submit (queue, record_task, &rec, NULL, &fence, 1);
  RK_CHECK (out != NULL, "npu_queue_submit with the vgem fence as input");
  if (!out) {
    npu_queue_free (queue);
    npu_device_unref (dev);
    goto done;
  }
  g_usleep (300 * MS);
  RK_INFO ("after 300 ms: input %s, task %s, output fence %s", state (fence),
      g_atomic_int_get (&rec.ran) ? "ran" : "not run", state (out));
  RK_CHECK (!g_atomic_int_get (&rec.ran),
      "the task has not run 300 ms later (its input fence is pending)");
  RK_CHECK (!npu_fence_is_signalled (out),
      "the task's output fence is pending");
  RK_CHECK (rk_sync_file_status (vf.sync_file, TRUE, what) == 0,
      "the kernel still says active");

  t_signal = g_get_monotonic_time ();
  RK_CHECK (vgem_fence_signal (&vf), "VGEM_FENCE_SIGNAL");
  ok = npu_fence_wait (out, 10000 * MS, &error);
  RK_CHECK_NO_ERROR (ok, error, "npu_fence_wait on the task's output fence");
  RK_CHECK (g_atomic_int_get (&rec.ran) && rec.ran_at >= t_signal,
      "the task ran, %" G_GINT64_FORMAT " us after the signal",
      rec.ran_at - t_signal);
  RK_CHECK (npu_fence_is_signalled (fence),
      "the vgem NpuFence is signalled now");
  RK_CHECK (rk_sync_file_status (vf.sync_file, TRUE, what) == 1,
      "the kernel says signalled");
  RK_INFO ("after the signal: input %s, task %s, output fence %s",
      state (fence), rec.ran ? "ran" : "not run", state (out));
  npu_fence_unref (out);
  npu_queue_free (queue);
  npu_device_unref (dev);
done:
  npu_fence_unref (fence);
  vgem_fence_clear (&vf);
}

/* ---- merge of a sync_file and an eventfd fence -------------------------- */

static void
test_merge (gboolean vgem_first)
{
  const char *what = vgem_first ? "merge (vgem first)" : "merge (eventfd first)";
  VgemFence vf;
  NpuFence *fences[2], *merged;
  GError *error = NULL;
  gboolean ok;

  if (!vgem_fence_new (&vf, what))
    return;
  fences[0] = npu_fence_new_sync_file (dup (vf.sync_file));
  fences[1] = npu_fence_new ();
  RK_CHECK (fences[0] && fences[1], "%s: a sync_file fence and an eventfd "
      "fence (kind %d)", what, fences[1] ? (int) npu_fence_get_kind (fences[1])
      : -1);
  if (!fences[0] || !fences[1])
    goto out;
  merged = npu_fence_merge (fences, 2);
  RK_CHECK (merged != NULL, "%s: npu_fence_merge", what);
  if (!merged)
    goto out;
  RK_INFO ("%s: merged kind %d, fd %d, state %s", what,
      npu_fence_get_kind (merged), npu_fence_get_fd (merged), state (merged));
  RK_CHECK (!npu_fence_is_signalled (merged), "%s: pending at first", what);

  if (vgem_first)
    RK_CHECK (vgem_fence_signal (&vf), "%s: VGEM_FENCE_SIGNAL", what);
  else
    npu_fence_signal (fences[1]);
  ok = npu_fence_wait (merged, 150 * MS, &error);
  RK_INFO ("%s: one signalled (vgem %s, eventfd %s): merged %s", what,
      state (fences[0]), state (fences[1]), state (merged));
  RK_CHECK (!ok && g_error_matches (error, NPU_FENCE_ERROR,
          NPU_FENCE_ERROR_TIMEOUT) && !npu_fence_is_signalled (merged),
      "%s: still pending with one of two signalled (wait timed out)", what);
  g_clear_error (&error);

  if (vgem_first)
    npu_fence_signal (fences[1]);
  else
    RK_CHECK (vgem_fence_signal (&vf), "%s: VGEM_FENCE_SIGNAL", what);
  ok = npu_fence_wait (merged, 10000 * MS, &error);
  RK_CHECK_NO_ERROR (ok, error, "%s: signalled once both are", what);
  RK_CHECK (npu_fence_is_signalled (merged), "%s: npu_fence_is_signalled",
      what);
  RK_INFO ("%s: both signalled: merged %s", what, state (merged));
  npu_fence_unref (merged);
out:
  if (fences[0])
    npu_fence_unref (fences[0]);
  if (fences[1])
    npu_fence_unref (fences[1]);
  vgem_fence_clear (&vf);
}

/* ---- NPU memory whose pending fence is a vgem fence ---------------------- */

typedef struct
{
  GstMemory *mem;
  gint done;
  gboolean mapped;
  gint64 at;
} MapThread;

static gpointer
map_thread (gpointer data)
{
  MapThread *m = data;
  GstMapInfo info;

  m->mapped = gst_memory_map (m->mem, &info, GST_MAP_READ);
  m->at = g_get_monotonic_time ();
  if (m->mapped)
    gst_memory_unmap (m->mem, &info);
  g_atomic_int_set (&m->done, 1);
  return NULL;
}

static void
test_memory_fence (GstAllocator * alloc)
{
  const char *what = "memory fence";
  VgemFence vf;
  NpuFence *fence;
  GstMemory *mem;
  MapThread mt = { NULL, 0, FALSE, 0 };
  GThread *th;
  gint64 t_signal;

  if (!vgem_fence_new (&vf, what))
    return;
  mem = gst_allocator_alloc (alloc, 4096, NULL);
  fence = npu_fence_new_sync_file (dup (vf.sync_file));
  if (!mem || !fence) {
    RK_CHECK (FALSE, "%s: memory and fence", what);
    goto out;
  }
  gst_npu_memory_set_fence (mem, fence);
  mt.mem = mem;
  th = g_thread_new ("rk-map", map_thread, &mt);
  g_usleep (300 * MS);
  RK_CHECK (!g_atomic_int_get (&mt.done),
      "%s: gst_memory_map blocks while the vgem fence is pending", what);
  t_signal = g_get_monotonic_time ();
  RK_CHECK (vgem_fence_signal (&vf), "%s: VGEM_FENCE_SIGNAL", what);
  g_thread_join (th);
  RK_CHECK (mt.mapped && mt.at >= t_signal,
      "%s: the map returned %" G_GINT64_FORMAT " us after the signal", what,
      mt.at - t_signal);
out:
  if (fence)
    npu_fence_unref (fence);
  if (mem)
    gst_memory_unref (mem);
  vgem_fence_clear (&vf);
}

/* ---- import: a dma-buf from the NPU allocator, read in place ------------ */

static void
test_import (GstAllocator * alloc)
{
  const char *what = "import";
  GstAllocator *dmabuf_alloc = gst_dmabuf_allocator_new ();
  GstNpuImporter *imp = gst_npu_importer_new (8);
  GstNpuImportStats st;
  GstNpuImportMap m1, m2, m0;
  GstMemory *mem, *w1, *w2;
  GstMapInfo info;
  gsize size = 256 * 1024, i;
  gboolean ok1, ok2, same = TRUE;
  int fd;

  RK_CHECK (gst_npu_allocator_get_path (alloc) == GST_NPU_MEMORY_PATH_DMA_HEAP,
      "%s: allocator on the dma-heap path", what);
  mem = gst_allocator_alloc (alloc, size, NULL);
  RK_CHECK (mem && gst_is_dmabuf_memory (mem), "%s: NPU dma-buf memory", what);
  if (!mem)
    goto out;
  fd = gst_dmabuf_memory_get_fd (mem);
  rk_fdinfo_print (fd, what);
  if (gst_memory_map (mem, &info, GST_MAP_WRITE)) {
    for (i = 0; i < size; i++)
      info.data[i] = (guint8) (i * 7 + 1);
    gst_memory_unmap (mem, &info);
  }

  /* As foreign dma-bufs (what v4l2src io-mode=dmabuf hands downstream):
   * two GstDmaBufMemory wrappers, each over its own dup of the fd. */
  w1 = gst_dmabuf_allocator_alloc (dmabuf_alloc, dup (fd), size);
  w2 = gst_dmabuf_allocator_alloc (dmabuf_alloc, dup (fd), size);
  RK_CHECK (w1 && w2 && !gst_is_npu_memory (w1),
      "%s: two foreign GstDmaBufMemory over dups of fd %d (fds %d, %d)", what,
      fd, w1 ? gst_dmabuf_memory_get_fd (w1) : -1,
      w2 ? gst_dmabuf_memory_get_fd (w2) : -1);
  if (!w1 || !w2)
    goto out;

  memset (&m1, 0, sizeof m1);
  memset (&m2, 0, sizeof m2);
  ok1 = gst_npu_importer_map (imp, w1, GST_MAP_READ, &m1);
  RK_CHECK (ok1 && m1.kind == GST_NPU_IMPORT_DMABUF && m1.size == size,
      "%s: gst_npu_importer_map (first) -> kind %d (DMABUF is %d), %p, %"
      G_GSIZE_FORMAT " bytes", what, m1.kind, GST_NPU_IMPORT_DMABUF, m1.data,
      m1.size);
  if (ok1) {
    for (i = 0; i < size && same; i++)
      same = m1.data[i] == (guint8) (i * 7 + 1);
    RK_CHECK (same, "%s: reads what was written through the NPU memory", what);
    gst_npu_importer_unmap (imp, &m1);
  }
  ok2 = gst_npu_importer_map (imp, w2, GST_MAP_READ, &m2);
  RK_CHECK (ok2 && ok1 && m2.data == m1.data,
      "%s: second map of the same dma-buf (other fd) -> same pointer %p", what,
      m2.data);
  if (ok2) {
    /* in place: a write through the NPU memory shows through the import */
    if (gst_memory_map (mem, &info, GST_MAP_WRITE)) {
      info.data[12345] = 0x5a;
      gst_memory_unmap (mem, &info);
    }
    RK_CHECK (m2.data[12345] == 0x5a,
        "%s: a later write through the NPU memory is visible through the "
        "imported mapping (read in place, no copy)", what);
    gst_npu_importer_unmap (imp, &m2);
  }

  memset (&m0, 0, sizeof m0);
  if (gst_npu_importer_map (imp, mem, GST_MAP_READ, &m0)) {
    RK_CHECK (m0.kind == GST_NPU_IMPORT_NPU,
        "%s: our own NPU memory is kind NPU (%d)", what, m0.kind);
    gst_npu_importer_unmap (imp, &m0);
  } else
    RK_CHECK (FALSE, "%s: gst_npu_importer_map of NPU memory", what);

  gst_npu_importer_get_stats (imp, &st);
  RK_INFO ("%s: stats n_maps=%" G_GUINT64_FORMAT " n_dmabuf=%"
      G_GUINT64_FORMAT " n_fd=%" G_GUINT64_FORMAT " n_mmaps=%"
      G_GUINT64_FORMAT " n_cached=%" G_GUINT64_FORMAT " bytes_copied=%"
      G_GUINT64_FORMAT, what, st.n_maps, st.n_dmabuf, st.n_fd, st.n_mmaps,
      st.n_cached, st.bytes_copied);
  RK_CHECK (st.n_mmaps == 1, "%s: stats n_mmaps == 1", what);
  RK_CHECK (st.n_dmabuf == 2, "%s: stats n_dmabuf == 2", what);
  RK_CHECK (st.n_cached >= 1, "%s: stats n_cached >= 1", what);
  RK_CHECK (st.bytes_copied == 0, "%s: stats bytes_copied == 0", what);
  gst_memory_unref (w1);
  gst_memory_unref (w2);
out:
  if (mem)
    gst_memory_unref (mem);
  gst_npu_importer_free (imp);
  gst_object_unref (dmabuf_alloc);
}

int
main (int argc, char **argv)
{
  GstAllocator *alloc;

  gst_init (&argc, &argv);

  vgem = open_vgem ();
  RK_CHECK (vgem >= 0, "open the vgem DRM device (modprobe vgem)");
  if (vgem >= 0) {
    test_sync_file_and_task ();
    test_merge (TRUE);
    test_merge (FALSE);
  }

  g_unsetenv ("GST_NPU_DMA_HEAP");
  g_unsetenv ("GST_NPU_UDMABUF_DEVICE");
  alloc = gst_npu_allocator_new (NULL);
  RK_CHECK (alloc != NULL, "gst_npu_allocator_new (NULL)");
  if (alloc) {
    if (vgem >= 0)
      test_memory_fence (alloc);
    test_import (alloc);
    gst_object_unref (alloc);
  }
  if (vgem >= 0)
    close (vgem);
  return rk_finish ("rk-fence");
}
