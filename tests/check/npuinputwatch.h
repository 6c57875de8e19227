/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: did the element read its input in place?
 *
 * The elements tell gst_npu_input_watch_notify() where their compute reads
 * its input (npuvisiontok: each plane of a frame).  These helpers record
 * those reads and check that each lies inside memory the test handed
 * upstream: a deep copy of the buffer, a staging copy in an import path or
 * any other copy puts the read somewhere else, and the check fails.  No
 * LD_PRELOAD, so it works under valgrind too.
 *
 * Memory that the element maps by its fd (foreign fd or dma-buf memory) is
 * mapped at the element's own address, not at the test's: a read there is
 * resolved through /proc/self/maps to the file (inode) and offset it maps,
 * at the time of the read, and compared with the memory's fd and range.
 * Other memory (system, NPU) is compared by address.
 *
 * Header-only, like npucheck.h; usable by any element that calls the watch
 * (npuaudiotok's PCM as well as npuvisiontok's frames).
 */
#ifndef __NPU_INPUT_WATCH_CHECK_H__
#define __NPU_INPUT_WATCH_CHECK_H__

#include <stdio.h>
#include <sys/stat.h>
#include <gst/gst.h>
#include <gst/allocators/allocators.h>
#include <gst/check/gstcheck.h>
#include <npu/npu.h>

typedef struct
{
  const guint8 *data;
  gsize size;
  /* the file mapping it lies in, 0 if none (anonymous memory) */
  guint64 ino;
  guint64 file_offset;
} NpuInputRead;

typedef struct
{
  GMutex lock;
  GArray *reads;                /* NpuInputRead */
  GArray *ranges;               /* NpuInputRead: memory handed upstream */
} NpuInputWatch;

/* The file mapping that holds [data, data + size), from /proc/self/maps. */
static inline void
npu_input_watch_resolve (NpuInputRead * r)
{
  FILE *f = fopen ("/proc/self/maps", "r");
  char line[512];
  guintptr p = (guintptr) r->data;

  r->ino = 0;
  r->file_offset = 0;
  if (!f)
    return;
  while (fgets (line, sizeof (line), f)) {
    unsigned long start, end, off, ino;
    unsigned int dmaj, dmin;
    char perms[8];

    if (sscanf (line, "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &off,
            &dmaj, &dmin, &ino) != 7)
      continue;
    if (p >= start && p + r->size <= end) {
      r->ino = ino;
      r->file_offset = off + (p - start);
      break;
    }
  }
  fclose (f);
}

static inline void
npu_input_watch_record (GstObject * element, const guint8 * data, gsize size,
    gpointer user_data)
{
  NpuInputWatch *w = user_data;
  NpuInputRead r = { data, size, 0, 0 };

  npu_input_watch_resolve (&r);
  g_mutex_lock (&w->lock);
  g_array_append_val (w->reads, r);
  g_mutex_unlock (&w->lock);
}

static inline NpuInputWatch *
npu_input_watch_start (void)
{
  NpuInputWatch *w = g_new0 (NpuInputWatch, 1);

  g_mutex_init (&w->lock);
  w->reads = g_array_new (FALSE, FALSE, sizeof (NpuInputRead));
  w->ranges = g_array_new (FALSE, FALSE, sizeof (NpuInputRead));
  gst_npu_input_watch_set (npu_input_watch_record, w);
  return w;
}

static inline void
npu_input_watch_stop (NpuInputWatch * w)
{
  gst_npu_input_watch_set (NULL, NULL);
  g_array_unref (w->reads);
  g_array_unref (w->ranges);
  g_mutex_clear (&w->lock);
  g_free (w);
}

static inline guint
npu_input_watch_n_reads (NpuInputWatch * w)
{
  guint n;

  g_mutex_lock (&w->lock);
  n = w->reads->len;
  g_mutex_unlock (&w->lock);
  return n;
}

/* Notes where @buf's memories are, as upstream of the element sees them:
 * the reads must fall inside.  Call it while the memories are alive
 * (before the push, or from a pad probe). */
static inline void
npu_input_watch_add_buffer (NpuInputWatch * w, GstBuffer * buf)
{
  guint i;

  for (i = 0; i < gst_buffer_n_memory (buf); i++) {
    GstMemory *mem = gst_buffer_peek_memory (buf, i);
    NpuInputRead r = { NULL, mem->size, 0, mem->offset };

    if (gst_is_fd_memory (mem) && !gst_is_npu_memory (mem)) {
      struct stat st;

      fail_unless (fstat (gst_fd_memory_get_fd (mem), &st) == 0);
      r.ino = st.st_ino;
    } else {
      GstMapInfo map;

      fail_unless (gst_memory_map (mem, &map, GST_MAP_READ));
      r.data = map.data;
      gst_memory_unmap (mem, &map);
    }
    g_mutex_lock (&w->lock);
    g_array_append_val (w->ranges, r);
    g_mutex_unlock (&w->lock);
  }
}

static inline gboolean
npu_input_read_inside (const NpuInputRead * r, const NpuInputRead * range)
{
  if (range->data)
    return r->data >= range->data &&
        r->data + r->size <= range->data + range->size;
  return r->ino != 0 && r->ino == range->ino &&
      r->file_offset >= range->file_offset &&
      r->file_offset + r->size <= range->file_offset + range->size;
}

/* Reads that lie outside every memory given to npu_input_watch_add_buffer():
 * copies.  The first is described in @first (if not NULL). */
static inline guint
npu_input_watch_n_outside (NpuInputWatch * w, NpuInputRead * first)
{
  guint i, j, n = 0;

  g_mutex_lock (&w->lock);
  for (i = 0; i < w->reads->len; i++) {
    const NpuInputRead *r = &g_array_index (w->reads, NpuInputRead, i);
    gboolean inside = FALSE;

    for (j = 0; j < w->ranges->len && !inside; j++)
      inside = npu_input_read_inside (r, &g_array_index (w->ranges,
              NpuInputRead, j));
    if (!inside && n++ == 0 && first)
      *first = *r;
  }
  g_mutex_unlock (&w->lock);
  return n;
}

/* The bytes of the reads that lie outside every memory given to
 * npu_input_watch_add_buffer(): what the element read from a copy. */
static inline guint64
npu_input_watch_bytes_outside (NpuInputWatch * w)
{
  guint i, j;
  guint64 bytes = 0;

  g_mutex_lock (&w->lock);
  for (i = 0; i < w->reads->len; i++) {
    const NpuInputRead *r = &g_array_index (w->reads, NpuInputRead, i);
    gboolean inside = FALSE;

    for (j = 0; j < w->ranges->len && !inside; j++)
      inside = npu_input_read_inside (r, &g_array_index (w->ranges,
              NpuInputRead, j));
    if (!inside)
      bytes += r->size;
  }
  g_mutex_unlock (&w->lock);
  return bytes;
}

/* Fails unless at least @min_reads reads were seen and every one lies
 * inside memory given to npu_input_watch_add_buffer(). */
static inline void
npu_input_watch_assert_in_place (NpuInputWatch * w, guint min_reads)
{
  NpuInputRead r = { 0, };
  guint n_reads = npu_input_watch_n_reads (w);
  guint n_outside = npu_input_watch_n_outside (w, &r);

  fail_unless (n_reads >= min_reads, "%u input reads seen, expected at "
      "least %u", n_reads, min_reads);
  fail_unless (n_outside == 0, "%u of %u input reads are not in upstream's "
      "memory (the first at %p, %" G_GSIZE_FORMAT " bytes, inode %"
      G_GUINT64_FORMAT "): the input was copied", n_outside, n_reads, r.data,
      r.size, r.ino);
}

#endif /* __NPU_INPUT_WATCH_CHECK_H__ */
