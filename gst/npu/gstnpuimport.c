/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: reading upstream memory in place
 *
 * The cache is keyed by the dma-buf's (st_dev, st_ino): every dma-buf is
 * its own inode, and the key survives upstream re-wrapping the same fd in a
 * new GstMemory each frame (as v4l2src does).  An entry keeps a dup of the
 * fd, so the mapping stays valid however upstream recycles its memory; the
 * least recently used entry goes when the cache is full.  An entry that a
 * GstNpuImportMap still uses is never unmapped under it: eviction skips it
 * (the cache may then hold more than max_cached for a while), and an entry
 * dropped from the cache while in use is freed by its last unmap.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuimport.h"
#include "gstnpuallocator.h"
#include "gstnpuprivate.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/dma-buf.h>

GST_DEBUG_CATEGORY_STATIC (gst_npu_import_debug);
#define GST_CAT_DEFAULT gst_npu_import_debug

#define DEFAULT_MAX_CACHED 32

typedef struct
{
  dev_t dev;
  ino_t ino;
  int fd;                       /* our dup */
  guint8 *data;
  gsize size;
  int prot;
  guint64 last_use;
  guint users;                  /* GstNpuImportMaps using it */
  gboolean cached;              /* in importer->entries */
} CacheEntry;

struct _GstNpuImporter
{
  GMutex lock;
  GQueue entries;               /* CacheEntry */
  guint max_cached;
  guint64 clock;
  GstNpuImportStats stats;
};

static void
debug_init (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once)) {
    GST_DEBUG_CATEGORY_INIT (gst_npu_import_debug, "npuimport", 0,
        "in-place access to upstream memory");
    g_once_init_leave (&once, 1);
  }
}

/**
 * gst_npu_importer_new:
 * @max_cached: mappings to keep, 0 for the default (32; a v4l2 pool has
 *   4 to 8 buffers)
 *
 * Returns: (transfer full): a new importer.
 */
GstNpuImporter *
gst_npu_importer_new (guint max_cached)
{
  GstNpuImporter *importer = g_new0 (GstNpuImporter, 1);

  debug_init ();
  g_mutex_init (&importer->lock);
  g_queue_init (&importer->entries);
  importer->max_cached = max_cached ? max_cached : DEFAULT_MAX_CACHED;
  return importer;
}

static void
entry_free (CacheEntry * entry)
{
  munmap (entry->data, entry->size);
  close (entry->fd);
  g_free (entry);
}

/* Takes @entry out of the cache; frees it unless a map still uses it (the
 * last unmap frees it then).  Called with the lock held. */
static void
entry_uncache (GstNpuImporter * importer, CacheEntry * entry)
{
  g_queue_remove (&importer->entries, entry);
  entry->cached = FALSE;
  if (entry->users == 0)
    entry_free (entry);
}

/* Evicts least recently used entries nobody is using until the cache holds
 * at most @max.  Called with the lock held. */
static void
cache_trim (GstNpuImporter * importer, guint max)
{
  while (importer->entries.length > max) {
    CacheEntry *oldest = NULL;
    GList *l;

    for (l = importer->entries.head; l; l = l->next) {
      CacheEntry *e = l->data;

      if (e->users == 0 && (!oldest || e->last_use < oldest->last_use))
        oldest = e;
    }
    if (!oldest)
      break;                    /* all in use: trimmed on their unmap */
    entry_uncache (importer, oldest);
  }
}

/**
 * gst_npu_importer_clear:
 *
 * Drops every cached mapping (on a caps change or in READY, when upstream's
 * buffers are gone for good).  Mappings still in use
 * stay valid until unmapped.
 */
void
gst_npu_importer_clear (GstNpuImporter * importer)
{
  CacheEntry *entry;

  g_mutex_lock (&importer->lock);
  while ((entry = g_queue_peek_head (&importer->entries)))
    entry_uncache (importer, entry);
  g_mutex_unlock (&importer->lock);
}

/**
 * gst_npu_importer_free:
 *
 * Frees @importer and its cached mappings.  Every map must have been
 * unmapped first.
 */
void
gst_npu_importer_free (GstNpuImporter * importer)
{
  if (!importer)
    return;
  gst_npu_importer_clear (importer);
  g_mutex_clear (&importer->lock);
  g_free (importer);
}

static guint64
sync_flags (GstMapFlags flags)
{
  guint64 f = 0;

  if (flags & GST_MAP_READ)
    f |= DMA_BUF_SYNC_READ;
  if (flags & GST_MAP_WRITE)
    f |= DMA_BUF_SYNC_WRITE;
  return f;
}

/* Finds or makes the cached mapping of @fd and takes a use of it.  Called
 * with the lock held. */
static CacheEntry *
lookup_mapping (GstNpuImporter * importer, int fd, gsize need, int prot)
{
  struct stat st;
  CacheEntry *entry = NULL;
  GList *l;
  off_t end;
  gsize size;
  int dupfd;
  void *data;

  if (fstat (fd, &st) < 0)
    return NULL;
  for (l = importer->entries.head; l; l = l->next) {
    CacheEntry *e = l->data;

    if (e->dev == st.st_dev && e->ino == st.st_ino) {
      entry = e;
      break;
    }
  }
  if (entry && entry->size >= need && (entry->prot & prot) == prot) {
    entry->last_use = ++importer->clock;
    entry->users++;
    importer->stats.n_cached++;
    return entry;
  }
  if (entry) {
    /* Same buffer, but we need more of it or write access: map again.  The
     * old mapping stays valid for the maps still using it. */
    prot |= entry->prot;
    entry_uncache (importer, entry);
  }

  /* dma-bufs report their size through lseek; fd memory through st_size.
   * pread-style: the offset of upstream's fd is left alone. */
  end = lseek (fd, 0, SEEK_CUR);
  size = lseek (fd, 0, SEEK_END);
  if (end >= 0)
    lseek (fd, end, SEEK_SET);
  if (size == (gsize) - 1 || size == 0)
    size = st.st_size;
  if (size < need) {
    /* Pages past the end of the file would fault on access. */
    GST_WARNING ("fd %d holds %" G_GSIZE_FORMAT " bytes, the memory claims "
        "%" G_GSIZE_FORMAT, fd, size, need);
    return NULL;
  }

  dupfd = fcntl (fd, F_DUPFD_CLOEXEC, 3);
  if (dupfd < 0)
    return NULL;
  data = mmap (NULL, size, prot, MAP_SHARED, dupfd, 0);
  if (data == MAP_FAILED) {
    GST_WARNING ("cannot mmap fd %d (%" G_GSIZE_FORMAT " bytes): %s", fd,
        size, g_strerror (errno));
    close (dupfd);
    return NULL;
  }
  importer->stats.n_mmaps++;

  /* Room for the new entry, sparing mappings in use. */
  cache_trim (importer, importer->max_cached - 1);

  entry = g_new0 (CacheEntry, 1);
  entry->dev = st.st_dev;
  entry->ino = st.st_ino;
  entry->fd = dupfd;
  entry->data = data;
  entry->size = size;
  entry->prot = prot;
  entry->last_use = ++importer->clock;
  entry->users = 1;
  entry->cached = TRUE;
  g_queue_push_tail (&importer->entries, entry);
  GST_DEBUG ("mapped fd %d (inode %lu, %" G_GSIZE_FORMAT " bytes) at %p", fd,
      (gulong) st.st_ino, size, data);
  return entry;
}

/**
 * gst_npu_importer_map:
 * @map: (out caller-allocates): where the memory's bytes are
 *
 * Gives CPU access to @mem in place.  Unmap with gst_npu_importer_unmap()
 * before the memory goes.
 *
 * Returns: %TRUE on success.
 */
gboolean
gst_npu_importer_map (GstNpuImporter * importer, GstMemory * mem,
    GstMapFlags flags, GstNpuImportMap * map)
{
  g_return_val_if_fail (importer && mem && map, FALSE);

  memset (map, 0, sizeof (*map));
  map->mem = gst_memory_ref (mem);
  map->flags = flags;
  map->fd = -1;

  if (gst_is_npu_memory (mem) || !gst_is_fd_memory (mem)) {
    /* Ours stays mapped and waits for its fence; system memory is already
     * in our address space. */
    if (!gst_memory_map (mem, &map->info, flags))
      goto map_failed;
    map->kind = gst_is_npu_memory (mem) ? GST_NPU_IMPORT_NPU :
        GST_NPU_IMPORT_SYSTEM;
    map->data = map->info.data;
    map->size = map->info.size;
  } else {
    int prot;
    int fd = gst_fd_memory_get_fd (mem);
    gsize offset, need;
    CacheEntry *entry;

    /* In place means no GstMemory lock: keep read-only memory (shared
     * sub-memories, read-only upstream buffers) read-only ourselves. */
    if ((flags & GST_MAP_WRITE) && GST_MEMORY_IS_READONLY (mem)) {
      GST_WARNING ("memory %p is read-only, not mapping it for writing", mem);
      goto map_failed;
    }
    prot = (flags & GST_MAP_READ ? PROT_READ : 0) |
        (flags & GST_MAP_WRITE ? PROT_WRITE : 0);

    /* A sub-memory shares its parent's fd; offsets count from the fd's
     * start either way. */
    offset = mem->offset;
    need = offset + mem->size;

    g_mutex_lock (&importer->lock);
    entry = lookup_mapping (importer, fd, need, prot);
    if (entry) {
      map->data = entry->data + offset;
      map->size = mem->size;
      map->entry = entry;
    }
    g_mutex_unlock (&importer->lock);
    if (!entry)
      goto map_failed;

    map->kind = gst_is_dmabuf_memory (mem) ? GST_NPU_IMPORT_DMABUF :
        GST_NPU_IMPORT_FD;
    map->fd = fd;
    if (!gst_npu_dmabuf_sync (fd, DMA_BUF_SYNC_START | sync_flags (flags)))
      GST_WARNING ("DMA_BUF_IOCTL_SYNC start on fd %d failed: %s", fd,
          g_strerror (errno));
  }

  g_mutex_lock (&importer->lock);
  importer->stats.n_maps++;
  if (map->kind == GST_NPU_IMPORT_DMABUF)
    importer->stats.n_dmabuf++;
  else if (map->kind == GST_NPU_IMPORT_FD)
    importer->stats.n_fd++;
  g_mutex_unlock (&importer->lock);
  return TRUE;

  /* ERRORS */
map_failed:
  {
    GST_WARNING ("cannot map memory %p in place", mem);
    gst_memory_unref (map->mem);
    map->mem = NULL;
    return FALSE;
  }
}

void
gst_npu_importer_unmap (GstNpuImporter * importer, GstNpuImportMap * map)
{
  g_return_if_fail (importer && map);

  if (!map->mem)
    return;
  if (map->kind == GST_NPU_IMPORT_DMABUF || map->kind == GST_NPU_IMPORT_FD) {
    CacheEntry *entry = map->entry;

    if (!gst_npu_dmabuf_sync (map->fd,
            DMA_BUF_SYNC_END | sync_flags (map->flags)))
      GST_WARNING ("DMA_BUF_IOCTL_SYNC end on fd %d failed: %s", map->fd,
          g_strerror (errno));
    g_mutex_lock (&importer->lock);
    if (--entry->users == 0) {
      if (!entry->cached)
        entry_free (entry);
      else
        cache_trim (importer, importer->max_cached);
    }
    g_mutex_unlock (&importer->lock);
    map->entry = NULL;
  } else {
    gst_memory_unmap (map->mem, &map->info);
  }
  gst_memory_unref (map->mem);
  map->mem = NULL;
}

/**
 * gst_npu_importer_map_frame:
 * @info: the negotiated video info
 * @frame: (out caller-allocates): plane pointers and strides
 *
 * Maps a video frame's planes in place for reading, taking strides and
 * offsets from the buffer's GstVideoMeta when it has one.  A plane that
 * starts in one memory of @buffer and ends in the next is copied into a
 * scratch (the one copy the importer makes, counted in
 * #GstNpuImportStats.bytes_copied); a plane past the buffer's end fails.
 *
 * Returns: %TRUE on success.
 */
gboolean
gst_npu_importer_map_frame (GstNpuImporter * importer, GstBuffer * buffer,
    const GstVideoInfo * info, GstNpuImportFrame * frame)
{
  GstVideoMeta *vmeta = gst_buffer_get_video_meta (buffer);
  gsize plane_size = 0;
  guint i = 0, p;

  memset (frame, 0, sizeof (*frame));
  frame->info = *info;
  frame->n_planes = GST_VIDEO_INFO_N_PLANES (info);
  if (vmeta) {
    if (vmeta->n_planes != frame->n_planes || vmeta->format !=
        GST_VIDEO_INFO_FORMAT (info))
      goto meta_mismatch;
    for (p = 0; p < frame->n_planes; p++) {
      frame->info.offset[p] = vmeta->offset[p];
      frame->info.stride[p] = vmeta->stride[p];
    }
  }

  for (p = 0; p < frame->n_planes; p++) {
    gsize offset = frame->info.offset[p], skip;
    guint idx, len;
    GstMemory *mem;

    if (!gst_buffer_find_memory (buffer, offset, 1, &idx, &len, &skip))
      goto out_of_bounds;
    /* The plane's rows, from its first byte to its last. */
    plane_size = (gsize) ABS (frame->info.stride[p]) *
        (GST_VIDEO_FORMAT_INFO_SCALE_HEIGHT (info->finfo, p,
            GST_VIDEO_INFO_HEIGHT (info)) - 1) +
        GST_VIDEO_FORMAT_INFO_SCALE_WIDTH (info->finfo, p,
        GST_VIDEO_INFO_WIDTH (info)) *
        GST_VIDEO_FORMAT_INFO_PSTRIDE (info->finfo, p);
    mem = gst_buffer_peek_memory (buffer, idx);

    if (skip + plane_size > mem->size) {
      /* Past the end of its memory: either the buffer is short, or the
       * plane goes on in the next memory, where it cannot be read in
       * place; then it is gathered, and counted. */
      if (offset + plane_size > gst_buffer_get_size (buffer))
        goto truncated;
      frame->copies[p] = g_malloc (plane_size);
      gst_buffer_extract (buffer, offset, frame->copies[p], plane_size);
      frame->data[p] = frame->copies[p];
      frame->stride[p] = frame->info.stride[p];
      frame->size[p] = plane_size;
      g_mutex_lock (&importer->lock);
      importer->stats.bytes_copied += plane_size;
      g_mutex_unlock (&importer->lock);
      GST_DEBUG ("plane %u straddles memories: copied %" G_GSIZE_FORMAT
          " bytes", p, plane_size);
      continue;
    }

    /* Planes in the same memory share one map. */
    for (i = 0; i < frame->n_maps; i++)
      if (frame->maps[i].mem == mem)
        break;
    if (i == frame->n_maps) {
      if (!gst_npu_importer_map (importer, mem, GST_MAP_READ,
              &frame->maps[frame->n_maps]))
        goto map_failed;
      frame->n_maps++;
    }
    frame->data[p] = frame->maps[i].data + skip;
    frame->stride[p] = frame->info.stride[p];
    frame->size[p] = plane_size;
    frame->kind = frame->maps[i].kind;
  }
  return TRUE;

  /* ERRORS */
meta_mismatch:
  {
    GST_WARNING ("video meta (%s, %u planes) does not match caps (%s)",
        gst_video_format_to_string (vmeta->format), vmeta->n_planes,
        GST_VIDEO_INFO_NAME (info));
    return FALSE;
  }
out_of_bounds:
  {
    GST_WARNING ("plane %u at offset %" G_GSIZE_FORMAT " lies outside the "
        "%" G_GSIZE_FORMAT "-byte buffer", p, frame->info.offset[p],
        gst_buffer_get_size (buffer));
    gst_npu_importer_unmap_frame (importer, frame);
    return FALSE;
  }
map_failed:
  {
    gst_npu_importer_unmap_frame (importer, frame);
    return FALSE;
  }
truncated:
  {
    GST_WARNING ("plane %u is truncated: needs %" G_GSIZE_FORMAT " bytes "
        "at offset %" G_GSIZE_FORMAT ", the buffer has %" G_GSIZE_FORMAT, p,
        plane_size, frame->info.offset[p], gst_buffer_get_size (buffer));
    gst_npu_importer_unmap_frame (importer, frame);
    return FALSE;
  }
}

void
gst_npu_importer_unmap_frame (GstNpuImporter * importer,
    GstNpuImportFrame * frame)
{
  guint i;

  for (i = 0; i < frame->n_maps; i++)
    gst_npu_importer_unmap (importer, &frame->maps[i]);
  frame->n_maps = 0;
  for (i = 0; i < GST_VIDEO_MAX_PLANES; i++)
    g_clear_pointer (&frame->copies[i], g_free);
}

void
gst_npu_importer_get_stats (GstNpuImporter * importer,
    GstNpuImportStats * stats)
{
  g_mutex_lock (&importer->lock);
  *stats = importer->stats;
  g_mutex_unlock (&importer->lock);
}
