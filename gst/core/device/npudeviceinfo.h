/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: compute device discovery
 *
 * Lists the compute devices of this machine: the CPU backend first (every
 * machine has it), then, where the project was built with libdrm, the DRM
 * render nodes and the compute accelerator (accel) nodes with the name of
 * their kernel driver.  Discovery never fails: a node that cannot be opened
 * is still listed, with driver "unknown" and the reason in its description.
 *
 * Environment variables (read at every npu_device_info_enumerate() call):
 *
 *   NPU_DRM_DIR    directory searched for DRM render nodes (renderD*);
 *                  default "/dev/dri".  Only nodes inside it are listed.
 *   NPU_ACCEL_DIR  directory searched for accel nodes (accel*);
 *                  default "/dev/accel".
 *
 * Setting either to an empty string disables that part of the search.
 * Only character devices are listed; where sysfs is available they must
 * also belong to the "drm" / "accel" device class.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_DEVICE_INFO_H__
#define __NPU_DEVICE_INFO_H__

#include <glib.h>
#include "npuapi.h"

G_BEGIN_DECLS

#define NPU_DRM_DIR_ENV "NPU_DRM_DIR"
#define NPU_ACCEL_DIR_ENV "NPU_ACCEL_DIR"
#define NPU_DRM_DIR_DEFAULT "/dev/dri"
#define NPU_ACCEL_DIR_DEFAULT "/dev/accel"

typedef enum
{
  NPU_DEVICE_KIND_CPU,
  NPU_DEVICE_KIND_DRM_RENDER,
  NPU_DEVICE_KIND_ACCEL,
  NPU_DEVICE_KIND_VULKAN,
} NpuDeviceKind;

typedef struct
{
  NpuDeviceKind kind;
  gchar *name;                  /* "CPU", "renderD128", "accel0" */
  gchar *path;                  /* device node; NULL for the CPU */
  gchar *driver;                /* "cpu", the DRM driver name, or "unknown" */
  gchar *description;           /* CPU model, DRM driver description, or
                                 * why the node could not be queried */
  gchar *bus_info;              /* "pci:0000:00:02.0", "platform:vgem",
                                 * or NULL */
  guint n_threads;              /* CPU: online CPUs; 0 for the others */
  gchar *cpu_features;          /* CPU: space-separated SIMD features the
                                 * kernels use ("avx2 fma f16c ...", "neon
                                 * dotprod"), may be ""; NULL for the others */
  /* Vulkan (name "vulkan:N", what npu_device_open() takes; driver the
   * Vulkan driver's name; description its device name, version and type) */
  gchar *memory_heaps;          /* "23.4 GiB device-local, ..." */
  gchar *imports;               /* space-separated: "host-memory dma-buf
                                 * sync-fd int-dot", may be "" */
} NpuDeviceInfo;

/* Returns a new array of NpuDeviceInfo (element free func set); the CPU
 * device is always element 0.  Free with g_ptr_array_unref(). */
NPU_API
GPtrArray *npu_device_info_enumerate (void);

NPU_API
NpuDeviceInfo *npu_device_info_copy (const NpuDeviceInfo * info);
NPU_API
void npu_device_info_free (NpuDeviceInfo * info);

/* "cpu", "drm-render", "accel" */
NPU_API
const gchar *npu_device_kind_to_string (NpuDeviceKind kind);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (NpuDeviceInfo, npu_device_info_free)

G_END_DECLS

#endif /* __NPU_DEVICE_INFO_H__ */
