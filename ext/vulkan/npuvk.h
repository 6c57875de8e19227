/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the Vulkan compute engine (instance, device, buffers, programs)
 *
 * The thin layer between the core's device seam (gst/core/device/) and
 * libvulkan: it knows nothing of models, fences or GStreamer.  A context is
 * one VkDevice with one compute queue; a buffer is host-visible memory the
 * device reads and writes (allocated, or a host range imported in place
 * through VK_EXT_external_memory_host); a program is a list of compute
 * dispatches recorded once into a command buffer and replayed, with a
 * barrier between consecutive dispatches and one before the host reads.
 *
 * The kernels' SPIR-V is compiled from ext/vulkan/shaders/ at build time and
 * embedded.  Every kernel binds four storage buffers (an unused slot repeats
 * the first) and takes NPU_VK_N_PARAMS 32-bit parameters as push constants,
 * after the four arguments' byte offsets within their bound ranges.
 *
 * Validation: with NPU_VULKAN_VALIDATION=1 in the environment the Khronos
 * validation layer is enabled and every message of error severity is
 * logged and counted (npu_vk_context_get_n_validation_errors()), so that
 * tests can require zero.
 *
 * Plain C and GLib, no GStreamer types.  Only built where libvulkan and
 * glslc are found.
 */
#ifndef __NPU_VK_H__
#define __NPU_VK_H__

#include <glib.h>

G_BEGIN_DECLS typedef struct _NpuVkContext NpuVkContext;
typedef struct _NpuVkBuffer NpuVkBuffer;
typedef struct _NpuVkProgram NpuVkProgram;

#define NPU_VK_N_ARGS 4
#define NPU_VK_N_PARAMS 12
#define NPU_VK_MAX_HEAPS 8

/**
 * NpuVkDeviceInfo:
 *
 * What a physical device is and which of the import paths the seam uses it
 * has, as vkEnumeratePhysicalDevices() lists it (index = its position).
 */
typedef struct
{
  guint index;
  gchar *name;                  /* deviceName */
  gchar *driver;                /* driverName (VK_KHR_driver_properties) */
  gchar *driver_info;           /* driverInfo: the driver's version */
  const gchar *type;            /* "integrated-gpu", "discrete-gpu", "cpu", ... */
  guint32 vendor_id, device_id;
  guint32 api_version;
  guint n_heaps;
  guint64 heap_size[NPU_VK_MAX_HEAPS];
  gboolean heap_device_local[NPU_VK_MAX_HEAPS];
  gboolean has_compute;         /* a queue family with compute */
  gboolean host_import;         /* VK_EXT_external_memory_host */
  guint64 host_import_alignment;        /* minImportedHostPointerAlignment */
  gboolean dmabuf_import;       /* VK_EXT_external_memory_dma_buf */
  gboolean sync_fd;             /* VK_KHR_external_semaphore_fd */
  gboolean int_dot;             /* VK_KHR_shader_integer_dot_product */
  guint64 max_storage_range;    /* maxStorageBufferRange */
} NpuVkDeviceInfo;

typedef enum
{
  NPU_VK_KERNEL_MUL_F32,
  NPU_VK_KERNEL_MUL_F16,
  NPU_VK_KERNEL_MUL_Q8_0,
  NPU_VK_KERNEL_MUL_MXFP4,
  NPU_VK_KERNEL_MUL_BLOCKS,
  NPU_VK_KERNEL_RMS_NORM,
  NPU_VK_KERNEL_SOFTMAX,
  NPU_VK_KERNEL_SILU_MUL,
  NPU_VK_KERNEL_GELU,
  NPU_VK_KERNEL_ADD,
  NPU_VK_KERNEL_ROPE,
  NPU_VK_KERNEL_ATTENTION,
  NPU_VK_KERNEL_LAYER_NORM,
  NPU_VK_KERNEL_BIAS_ACT,
  NPU_VK_KERNEL_GATHER,
  NPU_VK_KERNEL_IM2COL3,
  NPU_VK_N_KERNELS
} NpuVkKernel;

/**
 * NpuVkArg:
 * @buffer: the buffer
 * @offset: the argument's first byte: any byte for the kernels that read
 *   bytes (the quantised weights), a multiple of 4 for those that read
 *   floats (the caller checks: the kernels divide it by 4)
 * @size: bytes the kernel may touch from @offset
 */
typedef struct
{
  NpuVkBuffer *buffer;
  gsize offset;
  gsize size;
} NpuVkArg;

/* The physical devices (NpuVkDeviceInfo), empty when there is none; NULL
 * with @error when no Vulkan loader or driver answers. */
GPtrArray *npu_vk_list_devices (GError ** error);
void npu_vk_device_info_free (NpuVkDeviceInfo * info);

NpuVkContext *npu_vk_context_new (guint index, GError ** error);
void npu_vk_context_free (NpuVkContext * ctx);
const NpuVkDeviceInfo *npu_vk_context_get_info (NpuVkContext * ctx);
guint npu_vk_context_get_n_validation_errors (NpuVkContext * ctx);

/* @size bytes of host-visible, coherent device memory, zero-filled */
NpuVkBuffer *npu_vk_buffer_new (NpuVkContext * ctx, gsize size,
    GError ** error);
/* the host range [data, data + size) itself, imported as device memory:
 * @data and @size must be multiples of the device's host import alignment
 * (npu_vk_buffer_can_import_host() says whether they are). */
NpuVkBuffer *npu_vk_buffer_import_host (NpuVkContext * ctx, gpointer data,
    gsize size, GError ** error);
gboolean npu_vk_buffer_can_import_host (NpuVkContext * ctx, gconstpointer data,
    gsize size);
gpointer npu_vk_buffer_get_data (NpuVkBuffer * buffer);
gsize npu_vk_buffer_get_size (NpuVkBuffer * buffer);
void npu_vk_buffer_free (NpuVkBuffer * buffer);

NpuVkProgram *npu_vk_program_new (NpuVkContext * ctx);
/* Appends one dispatch of @kernel over @groups workgroups with @args (up to
 * NPU_VK_N_ARGS, at least one) and @params (up to NPU_VK_N_PARAMS).  Fails
 * with a message for a misaligned offset, a range outside its buffer or
 * beyond the device's storage buffer range, and a group count beyond the
 * device's limits.  Not after the first npu_vk_program_run(). */
gboolean npu_vk_program_add (NpuVkProgram * prog, NpuVkKernel kernel,
    const NpuVkArg * args, guint n_args, const guint32 * params,
    guint n_params, const guint groups[3], GError ** error);
/* Records the program on its first call, then submits it and waits for it
 * at most @timeout_ms; a timeout, a lost device and a failed submit end
 * with a message. */
gboolean npu_vk_program_run (NpuVkProgram * prog, guint timeout_ms,
    GError ** error);
guint npu_vk_program_get_n_dispatches (NpuVkProgram * prog);
void npu_vk_program_free (NpuVkProgram * prog);

/* The largest group count of one dimension */
guint npu_vk_context_get_max_groups (NpuVkContext * ctx);

typedef enum
{
  NPU_VK_ERROR_FAILED,
  NPU_VK_ERROR_NO_DEVICE,
  NPU_VK_ERROR_OUT_OF_MEMORY,
  NPU_VK_ERROR_DEVICE_LOST,
  NPU_VK_ERROR_TIMEOUT,
} NpuVkError;

#define NPU_VK_ERROR (npu_vk_error_quark ())
GQuark npu_vk_error_quark (void);

G_END_DECLS
#endif /* __NPU_VK_H__ */
