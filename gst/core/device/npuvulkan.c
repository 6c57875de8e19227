/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the Vulkan engine's side of the seam
 *
 * The process's Vulkan device for an index (an NpuDevice of its own
 * engine, npubackend-private.h), its buffers, and the operation table
 * recorded into an ext/vulkan program.  Built only with the Vulkan engine.
 *
 * GLib only, no GStreamer types.
 */
#include "npubackend-private.h"

#if NPU_HAVE_VULKAN

#include "npuops-private.h"
#include "npubuffer-private.h"
#include "ext/vulkan/npuvk.h"
#include "core/formats/npugguf.h"

#include <stdlib.h>
#include <string.h>

/* How long a run may take before it is reported as hung: lavapipe runs on
 * the CPU, where a prefill of a 1 B model takes seconds.
 * NPU_VULKAN_TIMEOUT_MS overrides it (the tests shorten it). */
#define DEFAULT_TIMEOUT_MS 60000

static gpointer
create_context (const gchar * key, gpointer user_data, gchar ** name,
    GError ** error)
{
  guint index = GPOINTER_TO_UINT (user_data);
  NpuVkContext *ctx = npu_vk_context_new (index, error);

  if (ctx)
    *name = g_strdup_printf ("vulkan:%u (%s)", index,
        npu_vk_context_get_info (ctx)->name);
  return ctx;
}

/* Each device opened stays open for the life of the process: making one
 * compiles every kernel (about a second on lavapipe), and a pipeline that
 * goes to NULL and back, or a test that builds one pipeline after
 * another, would pay it each time. */
static GMutex kept_lock;
static GHashTable *kept;        /* index -> NpuDevice (a reference) */

NpuDevice *
npu_vulkan_device_open (guint index, GError ** error)
{
  gchar *key = g_strdup_printf ("vulkan:%u", index);
  GError *vk_error = NULL;
  NpuDevice *device;

  device = npu_device_get_engine_device (key, "vulkan", create_context,
      GUINT_TO_POINTER (index), (GDestroyNotify) npu_vk_context_free,
      &vk_error);
  if (device) {
    g_mutex_lock (&kept_lock);
    if (!kept)
      kept = g_hash_table_new (NULL, NULL);
    if (!g_hash_table_contains (kept, GUINT_TO_POINTER (index)))
      g_hash_table_insert (kept, GUINT_TO_POINTER (index),
          npu_device_ref (device));
    g_mutex_unlock (&kept_lock);
  } else {
    g_set_error (error, NPU_BACKEND_ERROR, vk_error->code ==
        NPU_VK_ERROR_NO_DEVICE ? NPU_BACKEND_ERROR_NOT_FOUND :
        NPU_BACKEND_ERROR_FAILED, "Device \"%s\": %s", key, vk_error->message);
    g_error_free (vk_error);
  }
  g_free (key);
  return device;
}

static NpuVkContext *
context_of (NpuDevice * device)
{
  return npu_device_get_engine (device);
}

gpointer
npu_vulkan_buffer_new (NpuDevice * device, gsize size, gpointer * data,
    GError ** error)
{
  NpuVkBuffer *buf = npu_vk_buffer_new (context_of (device), size, error);

  if (buf)
    *data = npu_vk_buffer_get_data (buf);
  return buf;
}

gpointer
npu_vulkan_buffer_import_host (NpuDevice * device, gpointer data, gsize size,
    gsize * offset, GError ** error)
{
  NpuVkContext *ctx = context_of (device);
  guint64 align = npu_vk_context_get_info (ctx)->host_import_alignment;
  guintptr start, end;
  NpuVkBuffer *buf;

  if (align == 0)
    return npu_vk_buffer_import_host (ctx, data, size, error);
  /* the pages around the range are mapped wherever the range is, as long
   * as the alignment is no more than a page */
  start = (guintptr) data - (guintptr) data % align;
  end = ((guintptr) data + size + align - 1) / align * align;
  buf = npu_vk_buffer_import_host (ctx, (gpointer) start, end - start, error);
  if (buf)
    *offset = (guintptr) data - start;
  return buf;
}

void
npu_vulkan_buffer_free (gpointer engine_buffer)
{
  npu_vk_buffer_free (engine_buffer);
}

/* ------------------------------------------------------------------------
 * The operation table
 */

gboolean
npu_vulkan_op_check (NpuDevice * device, const NpuOp * op, GError ** error)
{
  const NpuVkDeviceInfo *info = npu_vk_context_get_info (context_of (device));
  guint i;

  if (op->kind == NPU_OP_ATTENTION && (op->kv_type == NPU_KV_Q8_0 ||
          op->n[3] > 256)) {
    g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
        "attention: %s runs F32 and F16 KV caches with heads of up to 256 "
        "values (asked: KV type %d, heads of %" G_GSIZE_FORMAT ")",
        npu_device_get_name (device), op->kv_type, op->n[3]);
    return FALSE;
  }
  for (i = 0; i < op->n_args; i++)
    /* what the program binds: the argument, at most the storage offset
     * alignment and a word more */
    if (op->args[i].size + 256 > info->max_storage_range) {
      g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED,
          "%s: argument %u spans %" G_GSIZE_FORMAT " bytes, more than what "
          "%s binds at once (%" G_GUINT64_FORMAT " bytes)",
          op->kind == NPU_OP_MUL_MAT ? "mul_mat" : "operation", i,
          op->args[i].size, npu_device_get_name (device),
          info->max_storage_range);
      return FALSE;
    }
  return TRUE;
}

static guint32
f32_bits (float f)
{
  guint32 u;

  memcpy (&u, &f, 4);
  return u;
}

/* @n groups spread over x and y, as the kernels' group_row() reads them */
static void
spread (NpuVkContext * ctx, guint64 n, guint groups[3])
{
  guint max = npu_vk_context_get_max_groups (ctx);

  groups[0] = MIN (n, max);
  groups[1] = (n + groups[0] - 1) / groups[0];
}

/* A product's kernel and parameters: rows, k, n, and for mul_blocks.comp,
 * which decodes by ggml's type, its id and its values and bytes a block */
static NpuVkKernel
mul_mat_params (const NpuOp * op, guint32 * p, guint * n_p)
{
  static const NpuVkKernel mul[] = {
    [NPU_OP_WEIGHT_F32] = NPU_VK_KERNEL_MUL_F32,
    [NPU_OP_WEIGHT_F16] = NPU_VK_KERNEL_MUL_F16,
    [NPU_OP_WEIGHT_Q8_0] = NPU_VK_KERNEL_MUL_Q8_0,
    [NPU_OP_WEIGHT_MXFP4] = NPU_VK_KERNEL_MUL_MXFP4,
    [NPU_OP_WEIGHT_BF16] = NPU_VK_KERNEL_MUL_BLOCKS,
    [NPU_OP_WEIGHT_Q4_0] = NPU_VK_KERNEL_MUL_BLOCKS,
    [NPU_OP_WEIGHT_Q4_1] = NPU_VK_KERNEL_MUL_BLOCKS,
    [NPU_OP_WEIGHT_Q5_0] = NPU_VK_KERNEL_MUL_BLOCKS,
    [NPU_OP_WEIGHT_Q5_1] = NPU_VK_KERNEL_MUL_BLOCKS,
    [NPU_OP_WEIGHT_Q4_K] = NPU_VK_KERNEL_MUL_BLOCKS,
    [NPU_OP_WEIGHT_Q5_K] = NPU_VK_KERNEL_MUL_BLOCKS,
    [NPU_OP_WEIGHT_Q6_K] = NPU_VK_KERNEL_MUL_BLOCKS,
  };
  NpuVkKernel kernel = mul[op->weight];

  p[(*n_p)++] = op->n[0];
  p[(*n_p)++] = op->n[1];
  p[(*n_p)++] = op->n[2];
  if (kernel == NPU_VK_KERNEL_MUL_BLOCKS) {
    guint32 type = npu_op_weight_get_ggml_type (op->weight);
    guint block = 0;
    gsize bytes = 0;

    npu_ggml_type_info (type, &block, &bytes);
    p[(*n_p)++] = type;
    p[(*n_p)++] = block;
    p[(*n_p)++] = bytes;
  }
  return kernel;
}

static gboolean
add_op (NpuVkProgram * prog, NpuVkContext * ctx, const NpuOp * op,
    GError ** error)
{
  NpuVkArg args[NPU_VK_N_ARGS];
  guint32 p[NPU_VK_N_PARAMS] = { 0 };
  guint groups[3] = { 1, 1, 1 }, i, n_p = 0;
  NpuVkKernel kernel = NPU_VK_KERNEL_ADD;

  for (i = 0; i < op->n_args; i++) {
    gsize at;

    args[i].buffer = npu_buffer_get_engine_buffer (op->args[i].buffer, &at);
    args[i].offset = at + op->args[i].offset;
    args[i].size = op->args[i].size;
  }
  switch (op->kind) {
    case NPU_OP_MUL_MAT:
      kernel = mul_mat_params (op, p, &n_p);
      spread (ctx, ((guint64) op->n[0] * op->n[2] + 63) / 64, groups);
      break;
    case NPU_OP_RMS_NORM:
      kernel = NPU_VK_KERNEL_RMS_NORM;
      p[n_p++] = op->n[0];
      p[n_p++] = f32_bits (op->f[0]);
      p[n_p++] = op->n[1];
      spread (ctx, op->n[1], groups);
      break;
    case NPU_OP_SOFTMAX:
      kernel = NPU_VK_KERNEL_SOFTMAX;
      p[n_p++] = op->n[0];
      p[n_p++] = op->n[1];
      spread (ctx, op->n[1], groups);
      break;
    case NPU_OP_SILU_MUL:
    case NPU_OP_GELU:
    case NPU_OP_ADD:
      kernel = op->kind == NPU_OP_SILU_MUL ? NPU_VK_KERNEL_SILU_MUL :
          op->kind == NPU_OP_GELU ? NPU_VK_KERNEL_GELU : NPU_VK_KERNEL_ADD;
      p[n_p++] = op->n[0];
      p[n_p++] = f32_bits (op->f[0]);
      p[n_p++] = f32_bits (op->f[1]);
      spread (ctx, (op->n[0] + 255) / 256, groups);
      break;
    case NPU_OP_IM2COL3:
      kernel = NPU_VK_KERNEL_IM2COL3;
      for (i = 0; i < 5; i++)
        p[n_p++] = op->n[i];
      spread (ctx, ((guint64) op->n[0] * op->n[1] * 3 + 255) / 256, groups);
      break;
    case NPU_OP_ROPE:
      kernel = NPU_VK_KERNEL_ROPE;
      for (i = 0; i < 5; i++)
        p[n_p++] = op->n[i];
      p[n_p++] = f32_bits (op->f[0]);
      p[n_p++] = op->n[5];
      p[n_p++] = f32_bits (op->f[1]);
      spread (ctx, ((guint64) op->n[0] * op->n[1] * (op->n[3] / 2) + 255) /
          256, groups);
      break;
    case NPU_OP_ATTENTION:
      kernel = NPU_VK_KERNEL_ATTENTION;
      for (i = 1; i < 5; i++)
        p[n_p++] = op->n[i];
      p[n_p++] = f32_bits (op->f[0]);
      p[n_p++] = op->kv_type == NPU_KV_F16;
      p[n_p++] = op->n[5];
      p[n_p++] = op->n[0];
      groups[0] = (op->n[0] + 63) / 64;
      groups[1] = op->n[1];
      break;
    case NPU_OP_LAYER_NORM:
      kernel = NPU_VK_KERNEL_LAYER_NORM;
      p[n_p++] = op->n[0];
      p[n_p++] = f32_bits (op->f[0]);
      p[n_p++] = op->n[1];
      spread (ctx, op->n[1], groups);
      break;
    case NPU_OP_BIAS_ACT:
      kernel = NPU_VK_KERNEL_BIAS_ACT;
      p[n_p++] = op->n[0];
      p[n_p++] = op->n[1];
      p[n_p++] = op->act;
      p[n_p++] = op->n[2];
      spread (ctx, ((guint64) op->n[0] * op->n[1] + 255) / 256, groups);
      break;
    case NPU_OP_GATHER:
      kernel = NPU_VK_KERNEL_GATHER;
      p[n_p++] = op->n[0];
      p[n_p++] = op->n[1];
      spread (ctx, ((guint64) op->n[0] * op->n[1] + 255) / 256, groups);
      break;
  }
  return npu_vk_program_add (prog, kernel, args, op->n_args, p, n_p, groups,
      error);
}

static guint
timeout_ms (void)
{
  const gchar *env = g_getenv ("NPU_VULKAN_TIMEOUT_MS");
  guint64 v;

  if (env && g_ascii_string_to_unsigned (env, 10, 1, G_MAXUINT, &v, NULL))
    return v;
  return DEFAULT_TIMEOUT_MS;
}

gboolean
npu_vulkan_ops_run (NpuOps * ops, GError ** error)
{
  NpuVkContext *ctx = context_of (ops->device);
  GError *vk_error = NULL;
  guint i;

  if (!ops->engine_program) {
    NpuVkProgram *prog = npu_vk_program_new (ctx);

    for (i = 0; i < ops->ops->len; i++)
      if (!add_op (prog, ctx, &g_array_index (ops->ops, NpuOp, i), &vk_error)) {
        npu_vk_program_free (prog);
        goto failed;
      }
    ops->engine_program = prog;
    ops->engine_program_free = (GDestroyNotify) npu_vk_program_free;
  }
  if (npu_vk_program_run (ops->engine_program, timeout_ms (), &vk_error))
    return TRUE;

failed:
  g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED, "%s: %s",
      npu_device_get_name (ops->device), vk_error->message);
  g_error_free (vk_error);
  return FALSE;
}

#endif /* NPU_HAVE_VULKAN */
