/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: reading upstream memory in place
 *
 * A GstNpuImporter gives CPU access to a buffer's memory without copying it.
 * dma-buf and fd memory from upstream (v4l2src io-mode=dmabuf, say) is
 * mapped by fd once and the mapping cached by the dma-buf's identity (device
 * and inode), so a pool of recycled camera buffers is mapped once per
 * buffer, not once per frame.  dma-buf access is bracketed with
 * DMA_BUF_IOCTL_SYNC.  NPU memory and system memory are mapped the ordinary
 * way (NPU memory stays mapped and waits for its fence).  The one copy:
 * a video plane that straddles two memories of a buffer (a buffer built by
 * appending memories) cannot be read in place and is gathered into a
 * scratch; the importer counts those bytes so elements report them.
 */
#ifndef __GST_NPU_IMPORT_H__
#define __GST_NPU_IMPORT_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

typedef struct _GstNpuImporter GstNpuImporter;

/**
 * GstNpuImportKind:
 * @GST_NPU_IMPORT_SYSTEM: ordinary memory, mapped with gst_memory_map()
 * @GST_NPU_IMPORT_NPU: our own NPU memory
 * @GST_NPU_IMPORT_DMABUF: a foreign dma-buf, read in place through its fd
 * @GST_NPU_IMPORT_FD: foreign fd memory (memfd, shm), read in place
 */
typedef enum
{
  GST_NPU_IMPORT_SYSTEM,
  GST_NPU_IMPORT_NPU,
  GST_NPU_IMPORT_DMABUF,
  GST_NPU_IMPORT_FD,
} GstNpuImportKind;

typedef struct
{
  GstNpuImportKind kind;
  guint8 *data;                 /* at the memory's offset */
  gsize size;

  /*< private > */
  GstMemory *mem;
  GstMapInfo info;
  GstMapFlags flags;
  gint fd;
  gpointer entry;               /* the cached mapping in use */
} GstNpuImportMap;

/**
 * GstNpuImportStats:
 * @n_maps: memories made accessible
 * @n_dmabuf: of which foreign dma-bufs
 * @n_fd: of which foreign fd memories
 * @n_mmaps: mmap() calls made by the importer (one per distinct dma-buf)
 * @n_cached: maps answered from the cache
 * @bytes_copied: bytes copied: the planes that straddle memories (see
 *   gst_npu_importer_map_frame()); zero for a frame whose planes each lie
 *   in one memory
 */
typedef struct
{
  guint64 n_maps;
  guint64 n_dmabuf;
  guint64 n_fd;
  guint64 n_mmaps;
  guint64 n_cached;
  guint64 bytes_copied;
} GstNpuImportStats;

GST_NPU_API
GstNpuImporter *gst_npu_importer_new (guint max_cached);
GST_NPU_API
void gst_npu_importer_free (GstNpuImporter * importer);
GST_NPU_API
void gst_npu_importer_clear (GstNpuImporter * importer);

GST_NPU_API
gboolean gst_npu_importer_map (GstNpuImporter * importer, GstMemory * mem,
    GstMapFlags flags, GstNpuImportMap * map);
GST_NPU_API
void gst_npu_importer_unmap (GstNpuImporter * importer, GstNpuImportMap * map);

/* A video frame's planes, in place, honouring GstVideoMeta. */
typedef struct
{
  GstVideoInfo info;
  guint n_planes;
  guint8 *data[GST_VIDEO_MAX_PLANES];
  gint stride[GST_VIDEO_MAX_PLANES];
  gsize size[GST_VIDEO_MAX_PLANES];     /* bytes of each plane from data[] */
  GstNpuImportKind kind;

  /*< private > */
  guint n_maps;
  GstNpuImportMap maps[GST_VIDEO_MAX_PLANES];
  guint8 *copies[GST_VIDEO_MAX_PLANES];
} GstNpuImportFrame;

GST_NPU_API
gboolean gst_npu_importer_map_frame (GstNpuImporter * importer,
    GstBuffer * buffer, const GstVideoInfo * info, GstNpuImportFrame * frame);
GST_NPU_API
void gst_npu_importer_unmap_frame (GstNpuImporter * importer,
    GstNpuImportFrame * frame);

GST_NPU_API
void gst_npu_importer_get_stats (GstNpuImporter * importer,
    GstNpuImportStats * stats);

G_END_DECLS

#endif /* __GST_NPU_IMPORT_H__ */
