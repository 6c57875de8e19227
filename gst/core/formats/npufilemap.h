/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: opening a model file for reading in place
 *
 * Shared by the GGUF and safetensors readers: open read-only, check that it
 * is a regular file that fits the address space, and map it shared.  Errors
 * name the file and are reported in the caller's error domain.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_FILE_MAP_H__
#define __NPU_FILE_MAP_H__

#include <glib.h>

G_BEGIN_DECLS

gboolean npu_file_map (const gchar * path, const gchar * name,
    GQuark domain, gint code, int *fd, const guint8 ** base, gsize * size,
    GError ** error);

G_END_DECLS

#endif /* __NPU_FILE_MAP_H__ */
