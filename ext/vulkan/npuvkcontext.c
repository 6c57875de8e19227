/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: Vulkan instance, physical device list, logical device
 *
 * See npuvk.h.  Plain C and GLib, no GStreamer types.
 */
#ifndef G_LOG_DOMAIN
#define G_LOG_DOMAIN "NpuVulkan"
#endif

#include "npuvk-private.h"

#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK (npu - vk - error - quark, npu_vk_error);

const gchar *
npu_vk_result_string (VkResult r)
{
  switch (r) {
    case VK_SUCCESS:
      return "success";
    case VK_TIMEOUT:
      return "timeout";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "out of host memory";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "out of device memory";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "initialization failed";
    case VK_ERROR_DEVICE_LOST:
      return "device lost";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "memory map failed";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "layer not present";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "extension not present";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "feature not present";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "incompatible driver (no Vulkan driver installed?)";
    case VK_ERROR_INVALID_EXTERNAL_HANDLE:
      return "invalid external handle";
    default:
      return "error";
  }
}

/* Sets @error from a failed call; the code follows what the result means
 * to a caller (out of memory, a lost device, anything else). */
gboolean
npu_vk_check (VkResult r, const gchar * what, GError ** error)
{
  NpuVkError code = NPU_VK_ERROR_FAILED;

  if (r == VK_SUCCESS)
    return TRUE;
  if (r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY)
    code = NPU_VK_ERROR_OUT_OF_MEMORY;
  else if (r == VK_ERROR_DEVICE_LOST)
    code = NPU_VK_ERROR_DEVICE_LOST;
  else if (r == VK_TIMEOUT)
    code = NPU_VK_ERROR_TIMEOUT;
  g_set_error (error, NPU_VK_ERROR, code, "Vulkan: %s failed: %s (%d)", what,
      npu_vk_result_string (r), r);
  return FALSE;
}

static gboolean
validation_wanted (void)
{
  const gchar *v = g_getenv ("NPU_VULKAN_VALIDATION");

  return v && *v && strcmp (v, "0") != 0;
}

static VKAPI_ATTR VkBool32 VKAPI_CALL
debug_message (VkDebugUtilsMessageSeverityFlagBitsEXT severity,
    VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT * data, void *user_data)
{
  NpuVkContext *ctx = user_data;

  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    g_atomic_int_inc (&ctx->n_validation_errors);
    g_warning ("Vulkan validation: %s", data->pMessage);
  } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    g_message ("Vulkan validation: %s", data->pMessage);
  }
  return VK_FALSE;
}

static gboolean
has_layer (const gchar * name)
{
  VkLayerProperties *props;
  guint32 n = 0, i;
  gboolean found = FALSE;

  if (vkEnumerateInstanceLayerProperties (&n, NULL) != VK_SUCCESS)
    return FALSE;
  props = g_new0 (VkLayerProperties, MAX (n, 1));
  if (vkEnumerateInstanceLayerProperties (&n, props) == VK_SUCCESS)
    for (i = 0; i < n && !found; i++)
      found = strcmp (props[i].layerName, name) == 0;
  g_free (props);
  return found;
}

#define VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

/* An instance, with the validation layer and a messenger when asked for
 * (@ctx NULL: a listing, never validated). */
static gboolean
create_instance (NpuVkContext * ctx, VkInstance * instance, GError ** error)
{
  VkApplicationInfo app = {
    .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
    .pApplicationName = "gst-npu",
    .pEngineName = "gst-npu",
    .apiVersion = VK_API_VERSION_1_1,
  };
  VkInstanceCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
    .pApplicationInfo = &app,
  };
  const gchar *layers[] = { VALIDATION_LAYER };
  const gchar *exts[] = { VK_EXT_DEBUG_UTILS_EXTENSION_NAME };
  gboolean validate = ctx && validation_wanted ();
  VkResult r;

  if (validate) {
    if (!has_layer (VALIDATION_LAYER)) {
      g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_FAILED,
          "Vulkan: NPU_VULKAN_VALIDATION is set but the layer %s is not "
          "installed (Debian: vulkan-validationlayers)", VALIDATION_LAYER);
      return FALSE;
    }
    ci.enabledLayerCount = 1;
    ci.ppEnabledLayerNames = layers;
    ci.enabledExtensionCount = 1;
    ci.ppEnabledExtensionNames = exts;
  }
  r = vkCreateInstance (&ci, NULL, instance);
  if (r != VK_SUCCESS)
    return npu_vk_check (r, "vkCreateInstance", error);

  if (validate) {
    VkDebugUtilsMessengerCreateInfoEXT mi = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
          VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = debug_message,
      .pUserData = ctx,
    };
    PFN_vkCreateDebugUtilsMessengerEXT create =
        (PFN_vkCreateDebugUtilsMessengerEXT) vkGetInstanceProcAddr (*instance,
        "vkCreateDebugUtilsMessengerEXT");

    if (!create || create (*instance, &mi, NULL, &ctx->messenger) != VK_SUCCESS) {
      vkDestroyInstance (*instance, NULL);
      g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_FAILED,
          "Vulkan: cannot install the validation messenger");
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
has_extension (const VkExtensionProperties * props, guint32 n,
    const gchar * name)
{
  guint32 i;

  for (i = 0; i < n; i++)
    if (strcmp (props[i].extensionName, name) == 0)
      return TRUE;
  return FALSE;
}

static const gchar *
type_name (VkPhysicalDeviceType t)
{
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

/* -1 if @pd has no queue family with compute */
static gint
compute_family (VkPhysicalDevice pd)
{
  VkQueueFamilyProperties *fam;
  guint32 n = 0, i;
  gint found = -1;

  vkGetPhysicalDeviceQueueFamilyProperties (pd, &n, NULL);
  fam = g_new0 (VkQueueFamilyProperties, MAX (n, 1));
  vkGetPhysicalDeviceQueueFamilyProperties (pd, &n, fam);
  /* a compute-only family first: it does not share the graphics queue */
  for (i = 0; i < n && found < 0; i++)
    if ((fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT) &&
        !(fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
      found = i;
  for (i = 0; i < n && found < 0; i++)
    if (fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
      found = i;
  g_free (fam);
  return found;
}

static NpuVkDeviceInfo *
describe (VkInstance instance, VkPhysicalDevice pd, guint index)
{
  NpuVkDeviceInfo *info = g_new0 (NpuVkDeviceInfo, 1);
  VkPhysicalDeviceDriverProperties driver = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES,
  };
  VkPhysicalDeviceExternalMemoryHostPropertiesEXT host = {
    .sType =
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT,
  };
  VkPhysicalDeviceProperties2 props = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
  };
  VkPhysicalDeviceMemoryProperties mem;
  VkExtensionProperties *exts;
  guint32 n_exts = 0, i;

  vkEnumerateDeviceExtensionProperties (pd, NULL, &n_exts, NULL);
  exts = g_new0 (VkExtensionProperties, MAX (n_exts, 1));
  vkEnumerateDeviceExtensionProperties (pd, NULL, &n_exts, exts);
  info->host_import = has_extension (exts, n_exts,
      VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
  info->dmabuf_import = has_extension (exts, n_exts,
      VK_EXT_EXTERNAL_MEMORY_DMA_BUF_EXTENSION_NAME);
  info->sync_fd = has_extension (exts, n_exts,
      VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
  info->int_dot = has_extension (exts, n_exts,
      VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);

  /* the chain only names structures whose extension the device has */
  props.pNext = &driver;
  if (info->host_import)
    driver.pNext = &host;
  if (has_extension (exts, n_exts, VK_KHR_DRIVER_PROPERTIES_EXTENSION_NAME))
    vkGetPhysicalDeviceProperties2 (pd, &props);
  else
    vkGetPhysicalDeviceProperties (pd, &props.properties);
  g_free (exts);

  info->index = index;
  info->name = g_strdup (props.properties.deviceName);
  info->driver = g_strdup (driver.driverName[0] ? driver.driverName :
      "unknown");
  info->driver_info = g_strdup (driver.driverInfo);
  info->type = type_name (props.properties.deviceType);
  info->vendor_id = props.properties.vendorID;
  info->device_id = props.properties.deviceID;
  info->api_version = props.properties.apiVersion;
  info->max_storage_range = props.properties.limits.maxStorageBufferRange;
  info->host_import_alignment = host.minImportedHostPointerAlignment;
  info->has_compute = compute_family (pd) >= 0;

  vkGetPhysicalDeviceMemoryProperties (pd, &mem);
  info->n_heaps = MIN (mem.memoryHeapCount, NPU_VK_MAX_HEAPS);
  for (i = 0; i < info->n_heaps; i++) {
    info->heap_size[i] = mem.memoryHeaps[i].size;
    info->heap_device_local[i] =
        (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
  }
  return info;
}

void
npu_vk_device_info_free (NpuVkDeviceInfo * info)
{
  if (!info)
    return;
  g_free (info->name);
  g_free (info->driver);
  g_free (info->driver_info);
  g_free (info);
}

static GPtrArray *
enumerate (VkInstance instance, VkPhysicalDevice ** pds, GError ** error)
{
  GPtrArray *list;
  guint32 n = 0, i;
  VkResult r;

  r = vkEnumeratePhysicalDevices (instance, &n, NULL);
  if (r != VK_SUCCESS) {
    npu_vk_check (r, "vkEnumeratePhysicalDevices", error);
    return NULL;
  }
  *pds = g_new0 (VkPhysicalDevice, MAX (n, 1));
  r = vkEnumeratePhysicalDevices (instance, &n, *pds);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    g_clear_pointer (pds, g_free);
    npu_vk_check (r, "vkEnumeratePhysicalDevices", error);
    return NULL;
  }
  list = g_ptr_array_new_with_free_func ((GDestroyNotify)
      npu_vk_device_info_free);
  for (i = 0; i < n; i++)
    g_ptr_array_add (list, describe (instance, (*pds)[i], i));
  return list;
}

GPtrArray *
npu_vk_list_devices (GError ** error)
{
  VkInstance instance;
  VkPhysicalDevice *pds = NULL;
  GPtrArray *list;

  if (!create_instance (NULL, &instance, error))
    return NULL;
  list = enumerate (instance, &pds, error);
  g_free (pds);
  vkDestroyInstance (instance, NULL);
  return list;
}

/* The logical device: one compute queue, the import extension where the
 * device has it. */
static gboolean
create_device (NpuVkContext * ctx, GError ** error)
{
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
    .queueFamilyIndex = ctx->family,
    .queueCount = 1,
    .pQueuePriorities = &priority,
  };
  const gchar *exts[4];
  guint n_exts = 0;
  VkDeviceCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
    .queueCreateInfoCount = 1,
    .pQueueCreateInfos = &qi,
  };

  if (ctx->info->host_import) {
    exts[n_exts++] = VK_KHR_EXTERNAL_MEMORY_EXTENSION_NAME;
    exts[n_exts++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
  }
  ci.enabledExtensionCount = n_exts;
  ci.ppEnabledExtensionNames = exts;
  if (!npu_vk_check (vkCreateDevice (ctx->pd, &ci, NULL, &ctx->device),
          "vkCreateDevice", error))
    return FALSE;
  vkGetDeviceQueue (ctx->device, ctx->family, 0, &ctx->queue);
  if (ctx->info->host_import)
    ctx->get_host_pointer_properties = (PFN_vkGetMemoryHostPointerPropertiesEXT)
        vkGetDeviceProcAddr (ctx->device,
        "vkGetMemoryHostPointerPropertiesEXT");
  return TRUE;
}

NpuVkContext *
npu_vk_context_new (guint index, GError ** error)
{
  NpuVkContext *ctx = g_new0 (NpuVkContext, 1);
  VkPhysicalDevice *pds = NULL;
  GPtrArray *list;
  VkPhysicalDeviceProperties props;

  if (!create_instance (ctx, &ctx->instance, error)) {
    g_free (ctx);
    return NULL;
  }
  list = enumerate (ctx->instance, &pds, error);
  if (!list)
    goto failed;
  if (index >= list->len) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_NO_DEVICE,
        "Vulkan: no device %u (%u found; Debian's mesa-vulkan-drivers has "
        "lavapipe, a Vulkan device on the CPU)", index, list->len);
    goto failed;
  }
  ctx->pd = pds[index];
  ctx->info = g_ptr_array_steal_index (list, index);
  if (!ctx->info->has_compute) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_NO_DEVICE,
        "Vulkan: device %u (%s) has no compute queue", index, ctx->info->name);
    goto failed;
  }
  ctx->family = compute_family (ctx->pd);
  vkGetPhysicalDeviceMemoryProperties (ctx->pd, &ctx->mem);
  vkGetPhysicalDeviceProperties (ctx->pd, &props);
  ctx->limits = props.limits;
  if (!create_device (ctx, error) || !npu_vk_pipelines_init (ctx, error))
    goto failed;
  g_mutex_init (&ctx->lock);
  g_ptr_array_unref (list);
  g_free (pds);
  return ctx;

failed:
  if (list)
    g_ptr_array_unref (list);
  g_free (pds);
  npu_vk_context_free (ctx);
  return NULL;
}

void
npu_vk_context_free (NpuVkContext * ctx)
{
  if (!ctx)
    return;
  if (ctx->device) {
    vkDeviceWaitIdle (ctx->device);
    npu_vk_pipelines_clear (ctx);
    vkDestroyDevice (ctx->device, NULL);
    g_mutex_clear (&ctx->lock);
  }
  if (ctx->messenger) {
    PFN_vkDestroyDebugUtilsMessengerEXT destroy =
        (PFN_vkDestroyDebugUtilsMessengerEXT)
        vkGetInstanceProcAddr (ctx->instance,
        "vkDestroyDebugUtilsMessengerEXT");
    if (destroy)
      destroy (ctx->instance, ctx->messenger, NULL);
  }
  if (ctx->instance)
    vkDestroyInstance (ctx->instance, NULL);
  npu_vk_device_info_free (ctx->info);
  g_free (ctx);
}

const NpuVkDeviceInfo *
npu_vk_context_get_info (NpuVkContext * ctx)
{
  return ctx->info;
}

guint
npu_vk_context_get_n_validation_errors (NpuVkContext * ctx)
{
  return g_atomic_int_get (&ctx->n_validation_errors);
}

guint
npu_vk_context_get_max_groups (NpuVkContext * ctx)
{
  return MIN (MIN (ctx->limits.maxComputeWorkGroupCount[0],
          ctx->limits.maxComputeWorkGroupCount[1]),
      ctx->limits.maxComputeWorkGroupCount[2]);
}
