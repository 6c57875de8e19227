/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what the Vulkan engine's files share (internal)
 */
#ifndef __NPU_VK_PRIVATE_H__
#define __NPU_VK_PRIVATE_H__

#include "npuvk.h"

#include <vulkan/vulkan.h>

G_BEGIN_DECLS

struct _NpuVkContext
{
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice pd;
  VkPhysicalDeviceMemoryProperties mem;
  VkPhysicalDeviceLimits limits;
  NpuVkDeviceInfo *info;
  guint32 family;
  VkDevice device;
  VkQueue queue;
  GMutex lock;                  /* the queue: one submit at a time */
  gint n_validation_errors;
  PFN_vkGetMemoryHostPointerPropertiesEXT get_host_pointer_properties;

  /* one layout for every kernel: NPU_VK_N_ARGS storage buffers and the
   * push constants */
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout pipeline_layout;
  VkPipeline pipelines[NPU_VK_N_KERNELS];
};

struct _NpuVkBuffer
{
  NpuVkContext *ctx;
  VkBuffer buffer;
  VkDeviceMemory memory;
  gsize size;                   /* what the caller asked for */
  gsize vk_size;                /* the VkBuffer's size, >= size */
  gpointer data;
  gboolean imported;
};

const gchar *npu_vk_result_string (VkResult r);
gboolean npu_vk_check (VkResult r, const gchar * what, GError ** error);
gboolean npu_vk_pipelines_init (NpuVkContext * ctx, GError ** error);
void npu_vk_pipelines_clear (NpuVkContext * ctx);

G_END_DECLS

#endif /* __NPU_VK_PRIVATE_H__ */
