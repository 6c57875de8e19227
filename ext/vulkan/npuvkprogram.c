/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: Vulkan kernels (pipelines) and programs (recorded dispatches)
 *
 * See npuvk.h.  One descriptor set layout and one pipeline layout serve
 * every kernel, so that a program is only pipelines, sets and push
 * constants; the pipelines are created once per context.  A program's
 * dispatches are recorded once, at the first run, into one command buffer
 * with a compute-to-compute barrier between them and a compute-to-host one
 * at the end, and each run replays it.
 *
 * Plain C and GLib, no GStreamer types.
 */
#ifndef G_LOG_DOMAIN
#define G_LOG_DOMAIN "NpuVulkan"
#endif

#include "npuvk-private.h"

#include <string.h>

/* SPIR-V from ext/vulkan/shaders/, compiled by glslc at build time */
static const guint32 spv_mul_f32[] =
#include "mul_f32.spv.inc"
    ;
static const guint32 spv_mul_f16[] =
#include "mul_f16.spv.inc"
    ;
static const guint32 spv_mul_q8_0[] =
#include "mul_q8_0.spv.inc"
    ;
static const guint32 spv_mul_mxfp4[] =
#include "mul_mxfp4.spv.inc"
    ;
static const guint32 spv_mul_blocks[] =
#include "mul_blocks.spv.inc"
    ;
static const guint32 spv_rms_norm[] =
#include "rms_norm.spv.inc"
    ;
static const guint32 spv_softmax[] =
#include "softmax.spv.inc"
    ;
static const guint32 spv_silu_mul[] =
#include "silu_mul.spv.inc"
    ;
static const guint32 spv_gelu[] =
#include "gelu.spv.inc"
    ;
static const guint32 spv_add[] =
#include "add.spv.inc"
    ;
static const guint32 spv_rope[] =
#include "rope.spv.inc"
    ;
static const guint32 spv_attention[] =
#include "attention.spv.inc"
    ;
static const guint32 spv_layer_norm[] =
#include "layer_norm.spv.inc"
    ;
static const guint32 spv_bias_act[] =
#include "bias_act.spv.inc"
    ;
static const guint32 spv_gather[] =
#include "gather.spv.inc"
    ;
static const guint32 spv_im2col3[] =
#include "im2col3.spv.inc"
    ;

static const struct
{
  const guint32 *code;
  gsize size;
  const gchar *name;
} kernels[NPU_VK_N_KERNELS] = {
#define K(n) { spv_##n, sizeof (spv_##n), #n }
  K (mul_f32), K (mul_f16), K (mul_q8_0), K (mul_mxfp4), K (mul_blocks),
  K (rms_norm),
  K (softmax), K (silu_mul), K (gelu), K (add), K (rope), K (attention),
  K (layer_norm), K (bias_act), K (gather), K (im2col3),
#undef K
};

/* what every kernel's push constants hold */
typedef struct
{
  guint32 offset[NPU_VK_N_ARGS];        /* bytes into each bound range */
  guint32 param[NPU_VK_N_PARAMS];
} PushConstants;

G_STATIC_ASSERT (sizeof (PushConstants) <= 128);

gboolean
npu_vk_pipelines_init (NpuVkContext * ctx, GError ** error)
{
  VkDescriptorSetLayoutBinding bindings[NPU_VK_N_ARGS];
  VkDescriptorSetLayoutCreateInfo li = {
    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
    .bindingCount = NPU_VK_N_ARGS,
    .pBindings = bindings,
  };
  VkPushConstantRange range = {
    .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
    .size = sizeof (PushConstants),
  };
  VkPipelineLayoutCreateInfo pi = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
    .setLayoutCount = 1,
    .pSetLayouts = &ctx->set_layout,
    .pushConstantRangeCount = 1,
    .pPushConstantRanges = &range,
  };
  guint i;

  memset (bindings, 0, sizeof (bindings));
  for (i = 0; i < NPU_VK_N_ARGS; i++) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  if (!npu_vk_check (vkCreateDescriptorSetLayout (ctx->device, &li, NULL,
              &ctx->set_layout), "vkCreateDescriptorSetLayout", error) ||
      !npu_vk_check (vkCreatePipelineLayout (ctx->device, &pi, NULL,
              &ctx->pipeline_layout), "vkCreatePipelineLayout", error))
    return FALSE;

  for (i = 0; i < NPU_VK_N_KERNELS; i++) {
    VkShaderModuleCreateInfo mi = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
      .codeSize = kernels[i].size,
      .pCode = kernels[i].code,
    };
    VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .pName = "main",
          },
      .layout = ctx->pipeline_layout,
    };
    VkResult r;

    if (!npu_vk_check (vkCreateShaderModule (ctx->device, &mi, NULL,
                &ci.stage.module), "vkCreateShaderModule", error))
      return FALSE;
    r = vkCreateComputePipelines (ctx->device, VK_NULL_HANDLE, 1, &ci, NULL,
        &ctx->pipelines[i]);
    vkDestroyShaderModule (ctx->device, ci.stage.module, NULL);
    if (r != VK_SUCCESS) {
      gchar *what = g_strdup_printf ("creating the %s kernel", kernels[i].name);
      gboolean ok = npu_vk_check (r, what, error);

      g_free (what);
      return ok;
    }
  }
  return TRUE;
}

void
npu_vk_pipelines_clear (NpuVkContext * ctx)
{
  guint i;

  for (i = 0; i < NPU_VK_N_KERNELS; i++)
    if (ctx->pipelines[i])
      vkDestroyPipeline (ctx->device, ctx->pipelines[i], NULL);
  if (ctx->pipeline_layout)
    vkDestroyPipelineLayout (ctx->device, ctx->pipeline_layout, NULL);
  if (ctx->set_layout)
    vkDestroyDescriptorSetLayout (ctx->device, ctx->set_layout, NULL);
}

/* ------------------------------------------------------------------------
 * Programs
 */

typedef struct
{
  NpuVkKernel kernel;
  VkDescriptorBufferInfo bind[NPU_VK_N_ARGS];
  PushConstants pc;
  guint groups[3];
} Dispatch;

struct _NpuVkProgram
{
  NpuVkContext *ctx;
  GArray *dispatches;
  VkDescriptorPool pool;
  VkCommandPool cmd_pool;
  VkCommandBuffer cmd;
  VkFence fence;
  gboolean recorded;
  gboolean busy;                /* a run timed out: its work may still run */
};

NpuVkProgram *
npu_vk_program_new (NpuVkContext * ctx)
{
  NpuVkProgram *prog = g_new0 (NpuVkProgram, 1);

  prog->ctx = ctx;
  prog->dispatches = g_array_new (FALSE, TRUE, sizeof (Dispatch));
  return prog;
}

guint
npu_vk_program_get_n_dispatches (NpuVkProgram * prog)
{
  return prog->dispatches->len;
}

/* The range bound for @arg: from its offset rounded down to the device's
 * storage offset alignment to its end rounded up to a word, within the
 * VkBuffer; the rest of the offset goes to the kernel. */
static gboolean
bind_arg (NpuVkContext * ctx, const NpuVkArg * arg, guint i,
    VkDescriptorBufferInfo * bind, guint32 * kernel_offset, GError ** error)
{
  guint64 align = MAX (ctx->limits.minStorageBufferOffsetAlignment, 4);
  gsize start, end;

  if (!arg->buffer || arg->size == 0 || arg->offset > arg->buffer->size ||
      arg->size > arg->buffer->size - arg->offset) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_FAILED,
        "Vulkan: argument %u (bytes %" G_GSIZE_FORMAT "..+%" G_GSIZE_FORMAT
        ") is not a non-empty range of its %" G_GSIZE_FORMAT
        "-byte buffer", i, arg->offset, arg->size,
        arg->buffer ? arg->buffer->size : 0);
    return FALSE;
  }
  start = arg->offset - arg->offset % align;
  end = MIN ((arg->offset + arg->size + 3) & ~(gsize) 3, arg->buffer->vk_size);
  if (end - start > ctx->limits.maxStorageBufferRange) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_FAILED,
        "Vulkan: argument %u spans %" G_GSIZE_FORMAT " bytes, more than %s's "
        "storage buffer range (%u bytes)", i, end - start, ctx->info->name,
        ctx->limits.maxStorageBufferRange);
    return FALSE;
  }
  bind->buffer = arg->buffer->buffer;
  bind->offset = start;
  bind->range = end - start;
  *kernel_offset = arg->offset - start;
  return TRUE;
}

gboolean
npu_vk_program_add (NpuVkProgram * prog, NpuVkKernel kernel,
    const NpuVkArg * args, guint n_args, const guint32 * params,
    guint n_params, const guint groups[3], GError ** error)
{
  NpuVkContext *ctx = prog->ctx;
  Dispatch d = { 0 };
  guint i;

  g_return_val_if_fail (!prog->recorded, FALSE);
  g_return_val_if_fail (kernel < NPU_VK_N_KERNELS, FALSE);
  g_return_val_if_fail (n_args >= 1 && n_args <= NPU_VK_N_ARGS, FALSE);
  g_return_val_if_fail (n_params <= NPU_VK_N_PARAMS, FALSE);

  d.kernel = kernel;
  for (i = 0; i < NPU_VK_N_ARGS; i++)
    if (!bind_arg (ctx, &args[i < n_args ? i : 0], i, &d.bind[i],
            &d.pc.offset[i], error))
      return FALSE;
  if (n_params)
    memcpy (d.pc.param, params, n_params * sizeof (guint32));
  for (i = 0; i < 3; i++) {
    if (groups[i] == 0 || groups[i] > ctx->limits.maxComputeWorkGroupCount[i]) {
      g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_FAILED,
          "Vulkan: %s: %u workgroups in dimension %u (the device allows 1 to "
          "%u)", kernels[kernel].name, groups[i], i,
          ctx->limits.maxComputeWorkGroupCount[i]);
      return FALSE;
    }
    d.groups[i] = groups[i];
  }
  g_array_append_val (prog->dispatches, d);
  return TRUE;
}

static gboolean
allocate (NpuVkProgram * prog, VkDescriptorSet * sets, GError ** error)
{
  NpuVkContext *ctx = prog->ctx;
  guint n = prog->dispatches->len, i;
  VkDescriptorPoolSize size = {
    .type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
    .descriptorCount = n * NPU_VK_N_ARGS,
  };
  VkDescriptorPoolCreateInfo pi = {
    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
    .maxSets = n,
    .poolSizeCount = 1,
    .pPoolSizes = &size,
  };
  VkCommandPoolCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
    .queueFamilyIndex = ctx->family,
  };
  VkCommandBufferAllocateInfo bi = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
    .commandBufferCount = 1,
    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
  };
  VkFenceCreateInfo fi = {
    .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO,
  };
  VkDescriptorSetLayout *layouts = g_newa (VkDescriptorSetLayout, n);
  VkDescriptorSetAllocateInfo si = {
    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
    .descriptorSetCount = n,
    .pSetLayouts = layouts,
  };

  for (i = 0; i < n; i++)
    layouts[i] = ctx->set_layout;
  if (!npu_vk_check (vkCreateDescriptorPool (ctx->device, &pi, NULL,
              &prog->pool), "vkCreateDescriptorPool", error))
    return FALSE;
  si.descriptorPool = prog->pool;
  if (!npu_vk_check (vkAllocateDescriptorSets (ctx->device, &si, sets),
          "vkAllocateDescriptorSets", error) ||
      !npu_vk_check (vkCreateCommandPool (ctx->device, &ci, NULL,
              &prog->cmd_pool), "vkCreateCommandPool", error))
    return FALSE;
  bi.commandPool = prog->cmd_pool;
  return npu_vk_check (vkAllocateCommandBuffers (ctx->device, &bi,
          &prog->cmd), "vkAllocateCommandBuffers", error) &&
      npu_vk_check (vkCreateFence (ctx->device, &fi, NULL, &prog->fence),
      "vkCreateFence", error);
}

static void
barrier (VkCommandBuffer cmd, VkPipelineStageFlags dst_stage,
    VkAccessFlags dst_access)
{
  VkMemoryBarrier mb = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
    .dstAccessMask = dst_access,
  };

  vkCmdPipelineBarrier (cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, dst_stage,
      0, 1, &mb, 0, NULL, 0, NULL);
}

static gboolean
record (NpuVkProgram * prog, GError ** error)
{
  NpuVkContext *ctx = prog->ctx;
  guint n = prog->dispatches->len, i, j;
  VkDescriptorSet *sets = g_new0 (VkDescriptorSet, n);
  VkCommandBufferBeginInfo begin = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
  };
  gboolean ok = FALSE;

  if (!allocate (prog, sets, error))
    goto out;
  for (i = 0; i < n; i++) {
    Dispatch *d = &g_array_index (prog->dispatches, Dispatch, i);
    VkWriteDescriptorSet w[NPU_VK_N_ARGS];

    memset (w, 0, sizeof (w));
    for (j = 0; j < NPU_VK_N_ARGS; j++) {
      w[j].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      w[j].dstSet = sets[i];
      w[j].dstBinding = j;
      w[j].descriptorCount = 1;
      w[j].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w[j].pBufferInfo = &d->bind[j];
    }
    vkUpdateDescriptorSets (ctx->device, NPU_VK_N_ARGS, w, 0, NULL);
  }
  if (!npu_vk_check (vkBeginCommandBuffer (prog->cmd, &begin),
          "vkBeginCommandBuffer", error))
    goto out;
  for (i = 0; i < n; i++) {
    Dispatch *d = &g_array_index (prog->dispatches, Dispatch, i);

    if (i > 0)
      barrier (prog->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdBindPipeline (prog->cmd, VK_PIPELINE_BIND_POINT_COMPUTE,
        ctx->pipelines[d->kernel]);
    vkCmdBindDescriptorSets (prog->cmd, VK_PIPELINE_BIND_POINT_COMPUTE,
        ctx->pipeline_layout, 0, 1, &sets[i], 0, NULL);
    vkCmdPushConstants (prog->cmd, ctx->pipeline_layout,
        VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof (PushConstants), &d->pc);
    vkCmdDispatch (prog->cmd, d->groups[0], d->groups[1], d->groups[2]);
  }
  /* the host reads the results once the fence has signalled */
  barrier (prog->cmd, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
  ok = npu_vk_check (vkEndCommandBuffer (prog->cmd), "vkEndCommandBuffer",
      error);
  prog->recorded = ok;

out:
  g_free (sets);
  return ok;
}

gboolean
npu_vk_program_run (NpuVkProgram * prog, guint timeout_ms, GError ** error)
{
  NpuVkContext *ctx = prog->ctx;
  VkSubmitInfo si = {
    .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
    .commandBufferCount = 1,
  };
  VkResult r;

  if (prog->dispatches->len == 0)
    return TRUE;
  if (prog->busy) {
    /* the command buffer may not be submitted again while it is pending */
    r = vkGetFenceStatus (ctx->device, prog->fence);
    if (r == VK_NOT_READY) {
      g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_TIMEOUT,
          "Vulkan: %s has still not finished the program's last run",
          ctx->info->name);
      return FALSE;
    }
    if (!npu_vk_check (r, "vkGetFenceStatus", error) ||
        !npu_vk_check (vkResetFences (ctx->device, 1, &prog->fence),
            "vkResetFences", error))
      return FALSE;
    prog->busy = FALSE;
  }
  if (!prog->recorded && !record (prog, error))
    return FALSE;
  si.pCommandBuffers = &prog->cmd;
  g_mutex_lock (&ctx->lock);
  r = vkQueueSubmit (ctx->queue, 1, &si, prog->fence);
  g_mutex_unlock (&ctx->lock);
  if (!npu_vk_check (r, "vkQueueSubmit", error))
    return FALSE;
  r = vkWaitForFences (ctx->device, 1, &prog->fence, VK_TRUE,
      (guint64) timeout_ms * 1000000);
  if (r == VK_TIMEOUT) {
    g_set_error (error, NPU_VK_ERROR, NPU_VK_ERROR_TIMEOUT,
        "Vulkan: %s did not finish %u dispatches within %u ms",
        ctx->info->name, prog->dispatches->len, timeout_ms);
    /* no wait here for work that may never end: the next run looks at
     * the fence again, and freeing the context waits for the device */
    prog->busy = TRUE;
    return FALSE;
  }
  if (!npu_vk_check (r, "vkWaitForFences", error))
    return FALSE;
  return npu_vk_check (vkResetFences (ctx->device, 1, &prog->fence),
      "vkResetFences", error);
}

void
npu_vk_program_free (NpuVkProgram * prog)
{
  NpuVkContext *ctx;

  if (!prog)
    return;
  ctx = prog->ctx;
  if (prog->busy && vkWaitForFences (ctx->device, 1, &prog->fence, VK_TRUE,
          1000000000) != VK_SUCCESS) {
    /* destroying what the device may still use is undefined: leak it */
    g_warning ("Vulkan: %s still runs a program being freed; its command "
        "buffer is leaked", ctx->info->name);
    g_array_unref (prog->dispatches);
    g_free (prog);
    return;
  }
  if (prog->fence)
    vkDestroyFence (ctx->device, prog->fence, NULL);
  if (prog->cmd_pool)
    vkDestroyCommandPool (ctx->device, prog->cmd_pool, NULL);
  if (prog->pool)
    vkDestroyDescriptorPool (ctx->device, prog->pool, NULL);
  g_array_unref (prog->dispatches);
  g_free (prog);
}
