/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: devices of engines other than the CPU (internal to the core)
 *
 * A device of another engine is an NpuDevice whose one dispatcher thread
 * runs its queues' tasks in order and hands the engine its work there, so
 * that fences, cancellation and flushes behave as on the CPU device and
 * no streaming thread ever waits for the engine.  The engine's own state
 * (a Vulkan context) hangs off the device.
 */
#ifndef __NPU_BACKEND_PRIVATE_H__
#define __NPU_BACKEND_PRIVATE_H__

#include "config.h"

#include "npubackend.h"

G_BEGIN_DECLS

/* config.h has "#define HAVE_VULKAN" (or "1") when the Vulkan engine is
 * built and "#undef HAVE_VULKAN" (or "0") when not: accept every
 * spelling. */
#if defined (HAVE_VULKAN) && (0 - HAVE_VULKAN - 1 != -1)
#define NPU_HAVE_VULKAN 1
#else
#define NPU_HAVE_VULKAN 0
#endif

/* Makes the engine's state for @key; returns NULL with @error set, or the
 * state and the device's name in @name (transfer full). */
typedef gpointer (*NpuEngineCreateFunc) (const gchar * key, gpointer user_data,
    gchar ** name, GError ** error);

G_GNUC_INTERNAL
NpuDevice *npu_device_get_engine_device (const gchar * key, const gchar * kind,
    NpuEngineCreateFunc create, gpointer user_data,
    GDestroyNotify engine_free, GError ** error);
G_GNUC_INTERNAL
gpointer npu_device_get_engine (NpuDevice * device);

#if NPU_HAVE_VULKAN
/* npuvulkan.c: the Vulkan engine's side of the seam */
G_GNUC_INTERNAL
NpuDevice *npu_vulkan_device_open (guint index, GError ** error);
/* The engine's buffers behind an NpuBuffer (npubuffer.c): allocated
 * (zero-filled, host-visible: *@data is its host address), or a host range
 * imported in place: the range's enclosing span at the device's import
 * alignment is imported and *@offset is where @data lies in it. */
G_GNUC_INTERNAL
gpointer npu_vulkan_buffer_new (NpuDevice * device, gsize size,
    gpointer * data, GError ** error);
G_GNUC_INTERNAL
gpointer npu_vulkan_buffer_import_host (NpuDevice * device, gpointer data,
    gsize size, gsize * offset, GError ** error);
G_GNUC_INTERNAL
void npu_vulkan_buffer_free (gpointer engine_buffer);
#endif

G_END_DECLS

#endif /* __NPU_BACKEND_PRIVATE_H__ */
