/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: Vulkan buffers: allocated, or a host range imported in place
 *
 * See npuvk.h.  Plain C and GLib, no GStreamer types.
 */
#ifndef G_LOG_DOMAIN
#define G_LOG_DOMAIN "NpuVulkan"
#endif

#include "npuvk-private.h"

#include <string.h>

#define HOST_FLAGS (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | \
    VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
#define USAGE (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | \
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT)

/* The first memory type in @bits with @flags; device-local among them
 * first (an integrated GPU's memory is both), -1 if none. */
static gint
memory_type (NpuVkContext * ctx, guint32 bits, VkMemoryPropertyFlags flags)
{
  guint32 i, pass;

  for (pass = 0; pass < 2; pass++)
    for (i = 0; i < ctx->mem.memoryTypeCount; i++) {
      VkMemoryPropertyFlags f = ctx->mem.memoryTypes[i].propertyFlags;

      if (!(bits & (1u << i)) || (f & flags) != flags)
        continue;
      if (pass == 0 && !(f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
        continue;
      return i;
    }
  return -1;
}

static NpuVkBuffer *
buffer_create (NpuVkContext * ctx, gsize size, gsize vk_size,
    gboolean external, GError ** error)
{
  NpuVkBuffer *buf = g_new0 (NpuVkBuffer, 1);
  VkExternalMemoryBufferCreateInfo ext = {
    .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
    .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
  };
  VkBufferCreateInfo bi = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
    .pNext = external ? &ext : NULL,
    .size = vk_size,
    .usage = USAGE,
    .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };

  buf->ctx = ctx;
  buf->size = size;
  buf->vk_size = vk_size;
  if (!npu_vk_check (vkCreateBuffer (ctx->device, &bi, NULL, &buf->buffer),
          "vkCreateBuffer", error)) {
    g_free (buf);
    return NULL;
  }
  return buf;
}

/* A buffer larger than the heap it would come from is refused here, the
 * same on every driver: beyond it, vkCreateBuffer and vkAllocateMemory
 * break valid usage (the heap's size, maxBufferSize), and what a driver
 * then does is undefined */
static gboolean
check_fits_heap (NpuVkContext * ctx, gsize vk_size, GError ** error)
{
  gint type = memory_type (ctx, ~0u, HOST_FLAGS);
  VkDeviceSize heap;

  if (type < 0)
    return TRUE;                /* said below, once the buffer's types are known */
  heap = ctx->mem.memoryHeaps[ctx->mem.memoryTypes[type].heapIndex].size;
  if (vk_size <= heap)
    return TRUE;
  g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_OUT_OF_MEMORY,
      "Vulkan: a buffer of %" G_GSIZE_FORMAT " bytes does not fit the "
      "memory heap of %s (%" G_GUINT64_FORMAT " bytes)", vk_size,
      ctx->info->name, (guint64) heap);
  return FALSE;
}

NpuVkBuffer *
npu_vk_buffer_new (NpuVkContext * ctx, gsize size, GError ** error)
{
  NpuVkBuffer *buf;
  VkMemoryRequirements req;
  VkMemoryAllocateInfo ai = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
  };
  gint type;

  /* rounded up so that a kernel reading whole 32-bit words (the 17- and
   * 34-byte quantised blocks) never reads past the buffer */
  if (size > G_MAXSIZE - 15) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_OUT_OF_MEMORY,
        "Vulkan: a buffer of %" G_GSIZE_FORMAT " bytes does not fit in "
        "memory", size);
    return NULL;
  }
  if (!check_fits_heap (ctx, (size + 15) & ~(gsize) 15, error))
    return NULL;
  buf = buffer_create (ctx, size, (size + 15) & ~(gsize) 15, FALSE, error);
  if (!buf)
    return NULL;
  vkGetBufferMemoryRequirements (ctx->device, buf->buffer, &req);
  type = memory_type (ctx, req.memoryTypeBits, HOST_FLAGS);
  if (type < 0) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_FAILED,
        "Vulkan: %s has no host-visible coherent memory for buffers",
        ctx->info->name);
    goto failed;
  }
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  if (!npu_vk_check (vkAllocateMemory (ctx->device, &ai, NULL, &buf->memory),
          "vkAllocateMemory", error))
    goto failed;
  if (!npu_vk_check (vkBindBufferMemory (ctx->device, buf->buffer,
              buf->memory, 0), "vkBindBufferMemory", error) ||
      !npu_vk_check (vkMapMemory (ctx->device, buf->memory, 0, VK_WHOLE_SIZE,
              0, &buf->data), "vkMapMemory", error))
    goto failed;
  memset (buf->data, 0, buf->vk_size);
  return buf;

failed:
  npu_vk_buffer_free (buf);
  return NULL;
}

gboolean
npu_vk_buffer_can_import_host (NpuVkContext * ctx, gconstpointer data,
    gsize size)
{
  guint64 align = ctx->info->host_import_alignment;

  return ctx->get_host_pointer_properties && align > 0 && size > 0 &&
      (guintptr) data % align == 0 && size % align == 0;
}

NpuVkBuffer *
npu_vk_buffer_import_host (NpuVkContext * ctx, gpointer data, gsize size,
    GError ** error)
{
  VkMemoryHostPointerPropertiesEXT hp = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT,
  };
  VkImportMemoryHostPointerInfoEXT imp = {
    .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
    .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
    .pHostPointer = data,
  };
  VkMemoryAllocateInfo ai = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
    .pNext = &imp,
    .allocationSize = size,
  };
  VkMemoryRequirements req;
  NpuVkBuffer *buf;
  gint type;

  if (!npu_vk_buffer_can_import_host (ctx, data, size)) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_FAILED,
        "Vulkan: %s cannot import the host range %p..+%" G_GSIZE_FORMAT
        " (%s)", ctx->info->name, data, size, ctx->info->host_import ?
        "not aligned to the device's host import alignment" :
        "no VK_EXT_external_memory_host");
    return NULL;
  }
  if (!npu_vk_check (ctx->get_host_pointer_properties (ctx->device,
              VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, data,
              &hp), "vkGetMemoryHostPointerPropertiesEXT", error))
    return NULL;
  buf = buffer_create (ctx, size, size, TRUE, error);
  if (!buf)
    return NULL;
  vkGetBufferMemoryRequirements (ctx->device, buf->buffer, &req);
  type = memory_type (ctx, req.memoryTypeBits & hp.memoryTypeBits,
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  if (type < 0) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_FAILED,
        "Vulkan: %s offers no memory type for imported host memory",
        ctx->info->name);
    goto failed;
  }
  ai.memoryTypeIndex = type;
  if (!npu_vk_check (vkAllocateMemory (ctx->device, &ai, NULL, &buf->memory),
          "vkAllocateMemory (host import)", error) ||
      !npu_vk_check (vkBindBufferMemory (ctx->device, buf->buffer,
              buf->memory, 0), "vkBindBufferMemory", error))
    goto failed;
  buf->data = data;
  buf->imported = TRUE;
  return buf;

failed:
  npu_vk_buffer_free (buf);
  return NULL;
}

gpointer
npu_vk_buffer_get_data (NpuVkBuffer * buffer)
{
  return buffer->data;
}

gsize
npu_vk_buffer_get_size (NpuVkBuffer * buffer)
{
  return buffer->size;
}

void
npu_vk_buffer_free (NpuVkBuffer * buf)
{
  if (!buf)
    return;
  if (buf->memory && buf->data && !buf->imported)
    vkUnmapMemory (buf->ctx->device, buf->memory);
  vkDestroyBuffer (buf->ctx->device, buf->buffer, NULL);
  if (buf->memory)
    vkFreeMemory (buf->ctx->device, buf->memory, NULL);
  g_free (buf);
}
