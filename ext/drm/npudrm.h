/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: DRM render node and accel node discovery through libdrm
 *
 * Lists the DRM render nodes (renderD*) of a DRM directory and the compute
 * accelerator nodes (accel*) of an accel directory, with the kernel
 * driver's name and description as DRM_IOCTL_VERSION reports them
 * (drmGetVersion(); the accel uAPI answers that ioctl too).
 *
 * Render nodes come from drmGetDevices2(), which also gives the bus they
 * sit on.  drmGetDevices2() does not list accel nodes, and it drops a
 * device whose bus it cannot parse (some platform devices), so both
 * directories are also scanned for character devices of those names; for
 * those the bus comes from sysfs.
 *
 * A node that cannot be opened or queried is still listed, with driver
 * "unknown" and the reason in its description: discovery never fails.
 *
 * Plain C and GLib, no GStreamer types.  Only built where libdrm is found.
 */
#ifndef __NPU_DRM_H__
#define __NPU_DRM_H__

#include <glib.h>

G_BEGIN_DECLS

typedef enum
{
  NPU_DRM_NODE_RENDER,
  NPU_DRM_NODE_ACCEL,
} NpuDrmNodeType;

typedef struct
{
  NpuDrmNodeType type;
  gchar *name;                  /* node file name: "renderD128", "accel0" */
  gchar *path;                  /* "/dev/dri/renderD128" */
  gchar *driver;                /* drmVersion name ("i915", "vgem"),
                                 * or "unknown" */
  gchar *description;           /* drmVersion desc, or why the node could
                                 * not be queried */
  gchar *bus_info;              /* "pci:0000:00:02.0", "platform:vgem", ...;
                                 * NULL if unknown */
  gboolean usable;              /* opened O_RDWR and answered
                                 * DRM_IOCTL_VERSION */
} NpuDrmNode;

/* Returns a new array of NpuDrmNode (free func set): the render nodes of
 * @drm_dir (sorted by minor), then the accel nodes of @accel_dir (sorted by
 * number).  Either directory may be NULL or missing; the array may be
 * empty, never NULL. */
GPtrArray *npu_drm_enumerate_nodes (const gchar * drm_dir,
    const gchar * accel_dir);

void npu_drm_node_free (NpuDrmNode * node);

G_END_DECLS

#endif /* __NPU_DRM_H__ */
