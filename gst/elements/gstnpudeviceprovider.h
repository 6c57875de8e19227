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
#ifndef __GST_NPU_DEVICE_PROVIDER_H__
#define __GST_NPU_DEVICE_PROVIDER_H__

#include <gst/gst.h>

#include <core/device/npudeviceinfo.h>

G_BEGIN_DECLS

/* Device class of every device the provider lists; a monitor filter on
 * "Compute" (or "Compute/NPU") selects them. */
#define GST_NPU_DEVICE_CLASS "Compute/NPU"

#define GST_TYPE_NPU_DEVICE_PROVIDER (gst_npu_device_provider_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuDeviceProvider, gst_npu_device_provider,
    GST, NPU_DEVICE_PROVIDER, GstDeviceProvider)

#define GST_TYPE_NPU_DEVICE (gst_npu_device_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuDevice, gst_npu_device, GST, NPU_DEVICE,
    GstDevice)

/* The NpuDeviceInfo the device was made from (owned by the device). */
const NpuDeviceInfo *gst_npu_device_get_info (GstNpuDevice * device);

GST_DEVICE_PROVIDER_REGISTER_DECLARE (npudeviceprovider);

G_END_DECLS

#endif /* __GST_NPU_DEVICE_PROVIDER_H__ */
