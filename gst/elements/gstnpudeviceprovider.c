/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu
 *
 * This library is free software; you can redistribute it and/or
 * modify it under the terms of the GNU Library General Public
 * License as published by the Free Software Foundation; either
 * version 2.1 of the License, or (at your option) any later version.
 *
 * This library is distributed in the hope that it will be useful,
 * but WITHOUT ANY WARRANTY; without even the implied warranty of
 * MERCHANTABILITY or FITNESS FOR A PARTICULAR PURPOSE.  See the GNU
 * Library General Public License for more details.
 */

/**
 * SECTION:provider-npudeviceprovider
 * @title: npudeviceprovider
 *
 * Lists the compute devices the gst-npu elements can run on: the CPU
 * backend (always there), and, where the plugin was built with libdrm, the
 * DRM render nodes and the accel nodes of the machine with their kernel
 * driver's name.  Every device has the class "Compute/NPU" and the caps
 * `other/tensors`.
 *
 * ## Example
 * |[
 * gst-device-monitor-1.0 Compute
 * ]|
 *
 * Properties of each device: `device.api` ("npu"), `device.kind` ("cpu",
 * "drm-render", "accel"), `device.name`, `device.path`, `device.driver`,
 * `device.description`, `device.bus`, and for the CPU `device.threads` and
 * `device.cpu-features`.
 *
 * The directories searched can be changed with the NPU_DRM_DIR and
 * NPU_ACCEL_DIR environment variables (defaults /dev/dri and /dev/accel).
 */

#include "gstnpudeviceprovider.h"

GST_DEBUG_CATEGORY_STATIC (npu_device_provider_debug);
#define GST_CAT_DEFAULT npu_device_provider_debug

#define NPU_DEVICE_CAPS "other/tensors"

/* GstNpuDevice */

struct _GstNpuDevice
{
  GstDevice parent;

  NpuDeviceInfo *info;
};

enum
{
  PROP_DEVICE_0,
  PROP_DEVICE_PATH,
};

G_DEFINE_TYPE (GstNpuDevice, gst_npu_device, GST_TYPE_DEVICE);

static void
gst_npu_device_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstNpuDevice *self = GST_NPU_DEVICE (object);

  switch (prop_id) {
    case PROP_DEVICE_PATH:
      g_value_set_string (value, self->info ? self->info->path : NULL);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
}

static void
gst_npu_device_finalize (GObject * object)
{
  GstNpuDevice *self = GST_NPU_DEVICE (object);

  npu_device_info_free (self->info);

  G_OBJECT_CLASS (gst_npu_device_parent_class)->finalize (object);
}

static void
gst_npu_device_class_init (GstNpuDeviceClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  gobject_class->get_property = gst_npu_device_get_property;
  gobject_class->finalize = gst_npu_device_finalize;

  /* No element runs on a given device yet: create_element stays NULL and
   * gst_device_create_element() returns NULL. */

  /**
   * GstNpuDevice:device-path:
   *
   * The device's node (an accel or DRM render node); none for the CPU.
   */
  g_object_class_install_property (gobject_class, PROP_DEVICE_PATH,
      g_param_spec_string ("device-path", "Device path",
          "Path of the device node (none for the CPU)", NULL,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
}

static void
gst_npu_device_init (GstNpuDevice * self)
{
}

const NpuDeviceInfo *
gst_npu_device_get_info (GstNpuDevice * device)
{
  g_return_val_if_fail (GST_IS_NPU_DEVICE (device), NULL);

  return device->info;
}

static gchar *
gst_npu_device_display_name (const NpuDeviceInfo * info)
{
  switch (info->kind) {
    case NPU_DEVICE_KIND_CPU:
      return g_strdup_printf ("gst-npu CPU (%u thread%s)", info->n_threads,
          info->n_threads == 1 ? "" : "s");
    case NPU_DEVICE_KIND_DRM_RENDER:
      return g_strdup_printf ("gst-npu DRM render node %s (%s)", info->name,
          info->driver);
    case NPU_DEVICE_KIND_ACCEL:
      return g_strdup_printf ("gst-npu accel node %s (%s)", info->name,
          info->driver);
    case NPU_DEVICE_KIND_VULKAN:
      return g_strdup_printf ("gst-npu Vulkan device %s (%s)", info->name,
          info->driver);
    default:
      return g_strdup_printf ("gst-npu %s (%s)", info->name, info->driver);
  }
}

static GstDevice *
gst_npu_device_new (const NpuDeviceInfo * info)
{
  GstNpuDevice *device;
  GstStructure *props;
  GstCaps *caps;
  gchar *display_name;

  props = gst_structure_new ("npu-device",
      "device.api", G_TYPE_STRING, "npu",
      "device.kind", G_TYPE_STRING, npu_device_kind_to_string (info->kind),
      "device.name", G_TYPE_STRING, info->name,
      "device.driver", G_TYPE_STRING, info->driver, NULL);
  if (info->path)
    gst_structure_set (props, "device.path", G_TYPE_STRING, info->path, NULL);
  if (info->description)
    gst_structure_set (props, "device.description", G_TYPE_STRING,
        info->description, NULL);
  if (info->bus_info)
    gst_structure_set (props, "device.bus", G_TYPE_STRING, info->bus_info,
        NULL);
  if (info->kind == NPU_DEVICE_KIND_CPU) {
    gst_structure_set (props, "device.threads", G_TYPE_UINT, info->n_threads,
        "device.cpu-features", G_TYPE_STRING,
        info->cpu_features ? info->cpu_features : "", NULL);
  }
  if (info->kind == NPU_DEVICE_KIND_VULKAN) {
    gst_structure_set (props, "device.memory-heaps", G_TYPE_STRING,
        info->memory_heaps, "device.imports", G_TYPE_STRING, info->imports,
        NULL);
  }

  caps = gst_caps_new_empty_simple (NPU_DEVICE_CAPS);
  display_name = gst_npu_device_display_name (info);

  device = g_object_new (GST_TYPE_NPU_DEVICE,
      "display-name", display_name,
      "device-class", GST_NPU_DEVICE_CLASS,
      "caps", caps, "properties", props, NULL);
  device->info = npu_device_info_copy (info);

  g_free (display_name);
  gst_caps_unref (caps);
  gst_structure_free (props);

  return GST_DEVICE (device);
}

/* GstNpuDeviceProvider */

struct _GstNpuDeviceProvider
{
  GstDeviceProvider parent;
};

G_DEFINE_TYPE (GstNpuDeviceProvider, gst_npu_device_provider,
    GST_TYPE_DEVICE_PROVIDER);

GST_DEVICE_PROVIDER_REGISTER_DEFINE (npudeviceprovider, "npudeviceprovider",
    GST_RANK_PRIMARY, GST_TYPE_NPU_DEVICE_PROVIDER);

static GList *
gst_npu_device_provider_probe (GstDeviceProvider * provider)
{
  GPtrArray *infos;
  GList *devices = NULL;
  guint i;

  infos = npu_device_info_enumerate ();
  for (i = 0; i < infos->len; i++) {
    const NpuDeviceInfo *info = g_ptr_array_index (infos, i);

    GST_DEBUG_OBJECT (provider, "found %s device %s: driver %s, path %s, "
        "bus %s, %s", npu_device_kind_to_string (info->kind), info->name,
        info->driver, GST_STR_NULL (info->path), GST_STR_NULL (info->bus_info),
        GST_STR_NULL (info->description));
    devices = g_list_prepend (devices, gst_npu_device_new (info));
  }
  g_ptr_array_unref (infos);

  return g_list_reverse (devices);
}

static void
gst_npu_device_provider_class_init (GstNpuDeviceProviderClass * klass)
{
  GstDeviceProviderClass *dp_class = GST_DEVICE_PROVIDER_CLASS (klass);

  GST_DEBUG_CATEGORY_INIT (npu_device_provider_debug, "npudeviceprovider", 0,
      "gst-npu compute device provider");

  /* No start/stop: the default start() probes once and adds what it finds
   * (device nodes of compute devices rarely come and go). */
  dp_class->probe = gst_npu_device_provider_probe;

  gst_device_provider_class_set_static_metadata (dp_class,
      "NPU Device Provider", GST_NPU_DEVICE_CLASS,
      "Lists the compute devices of gst-npu: the CPU backend, "
      "DRM render nodes and accel nodes", "The gst-npu developers");
}

static void
gst_npu_device_provider_init (GstNpuDeviceProvider * self)
{
}
