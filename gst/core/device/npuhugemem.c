/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: large buffers on transparent huge pages */
#include "npuhugemem.h"

#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE ((gsize) 2 << 20)

/**
 * npu_huge_alloc0:
 * @size: bytes
 *
 * Returns: zeroed memory, 2 MiB-aligned, of which the whole huge pages are
 *   marked for transparent huge pages; free with npu_huge_free() and the
 *   same @size.  Aborts if the address space is exhausted, like g_malloc().
 */
gpointer
npu_huge_alloc0 (gsize size)
{
  gsize page = (gsize) sysconf (_SC_PAGESIZE);
  gsize used = (size + page - 1) & ~(page - 1);
  gsize span = used + HUGE_PAGE;
  guint8 *base, *mem;

  /* Over-map by one huge page and trim, to start on a 2 MiB boundary */
  base = mmap (NULL, span, PROT_READ | PROT_WRITE,
      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    g_error ("%s: failed to map %" G_GSIZE_FORMAT " bytes", G_STRLOC, size);
  mem = (guint8 *) (((guintptr) base + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
  if (mem > base)
    munmap (base, mem - base);
  if (base + span > mem + used)
    munmap (mem + used, base + span - (mem + used));
#ifdef MADV_HUGEPAGE
  if (size >= HUGE_PAGE)
    madvise (mem, size & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
  return mem;
}

void
npu_huge_free (gpointer mem, gsize size)
{
  if (mem)
    munmap (mem, size);
}
