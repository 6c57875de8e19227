/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: large buffers on transparent huge pages (internal to the core)
 *
 * Weights repacked at load are read in full for every decoded token: on
 * 4 KiB pages that is a TLB miss every 4 KiB of a stream that is otherwise
 * only bound by memory bandwidth.  These buffers are anonymous mappings
 * whose 2 MiB-aligned interior is marked MADV_HUGEPAGE, so that the kernel
 * backs it with huge pages where transparent huge pages are enabled
 * ("always" or "madvise"); the partly used 2 MiB at the end stays on small
 * pages, so nothing is wasted.  Zero-filled.
 */
#ifndef __NPU_HUGE_MEM_H__
#define __NPU_HUGE_MEM_H__

#include <glib.h>

G_BEGIN_DECLS

G_GNUC_INTERNAL gpointer npu_huge_alloc0 (gsize size);
G_GNUC_INTERNAL void npu_huge_free (gpointer mem, gsize size);

G_END_DECLS

#endif /* __NPU_HUGE_MEM_H__ */
