/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a fence riding on a buffer */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpufencemeta.h"
#include "gstnpuallocator.h"

GST_DEBUG_CATEGORY_STATIC (gst_npu_fence_meta_debug);
#define GST_CAT_DEFAULT gst_npu_fence_meta_debug

GType
gst_npu_fence_meta_api_get_type (void)
{
  static gsize type = 0;
  static const gchar *tags[] = { GST_META_TAG_MEMORY_STR, NULL };

  if (g_once_init_enter (&type)) {
    GType t = gst_meta_api_type_register ("GstNpuFenceMetaAPI", tags);
    g_once_init_leave (&type, t);
  }
  return type;
}

static gboolean
gst_npu_fence_meta_init (GstMeta * meta, gpointer params, GstBuffer * buffer)
{
  ((GstNpuFenceMeta *) meta)->fence = NULL;
  ((GstNpuFenceMeta *) meta)->buffer = buffer;
  return TRUE;
}

static void
gst_npu_fence_meta_free (GstMeta * meta, GstBuffer * buffer)
{
  GstNpuFenceMeta *fmeta = (GstNpuFenceMeta *) meta;

  if (fmeta->fence)
    npu_fence_unref (fmeta->fence);
  fmeta->fence = NULL;
}

static gboolean
gst_npu_fence_meta_transform (GstBuffer * dest, GstMeta * meta,
    GstBuffer * buffer, GQuark type, gpointer data)
{
  GstNpuFenceMeta *fmeta = (GstNpuFenceMeta *) meta;

  /* GStreamer only asks for a copy when the memory goes along (the meta is
   * tagged "memory"), so the same fence still describes it. */
  if (GST_META_TRANSFORM_IS_COPY (type)) {
    GstNpuFenceMeta *dmeta = gst_buffer_get_npu_fence_meta (dest);

    if (!dmeta)
      dmeta = (GstNpuFenceMeta *) gst_buffer_add_meta (dest,
          GST_NPU_FENCE_META_INFO, NULL);
    if (!dmeta)
      return FALSE;
    if (dmeta->fence)
      npu_fence_unref (dmeta->fence);
    dmeta->fence = fmeta->fence ? npu_fence_ref (fmeta->fence) : NULL;
    return TRUE;
  }
  return FALSE;
}

const GstMetaInfo *
gst_npu_fence_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;

  if (g_once_init_enter ((GstMetaInfo **) & info)) {
    const GstMetaInfo *mi = gst_meta_register (GST_NPU_FENCE_META_API_TYPE,
        "GstNpuFenceMeta", sizeof (GstNpuFenceMeta),
        gst_npu_fence_meta_init, gst_npu_fence_meta_free,
        gst_npu_fence_meta_transform);
    GST_DEBUG_CATEGORY_INIT (gst_npu_fence_meta_debug, "npufencemeta", 0,
        "NPU fence meta");
    g_once_init_leave ((GstMetaInfo **) & info, (GstMetaInfo *) mi);
  }
  return info;
}

static void
set_memory_fences (GstBuffer * buffer, NpuFence * fence)
{
  guint i, n = gst_buffer_n_memory (buffer);

  for (i = 0; i < n; i++) {
    GstMemory *mem = gst_buffer_peek_memory (buffer, i);

    if (gst_is_npu_memory (mem))
      gst_npu_memory_set_fence (mem, fence);
  }
}

/**
 * gst_buffer_add_npu_fence_meta:
 * @buffer: a writable buffer
 * @fence: signals when @buffer's memory holds its data
 *
 * Attaches @fence (a reference is taken) to @buffer, or replaces the fence
 * already there, and sets it on @buffer's NPU memories so their map waits
 * for it.
 *
 * Returns: (transfer none): the meta.
 */
GstNpuFenceMeta *
gst_buffer_add_npu_fence_meta (GstBuffer * buffer, NpuFence * fence)
{
  GstNpuFenceMeta *meta;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);
  g_return_val_if_fail (fence != NULL, NULL);

  meta = gst_buffer_get_npu_fence_meta (buffer);
  if (!meta)
    meta = (GstNpuFenceMeta *) gst_buffer_add_meta (buffer,
        GST_NPU_FENCE_META_INFO, NULL);
  if (!meta)
    return NULL;
  if (meta->fence)
    npu_fence_unref (meta->fence);
  meta->fence = npu_fence_ref (fence);
  set_memory_fences (buffer, fence);
  return meta;
}

/**
 * gst_npu_fence_meta_chain:
 * @fence: more work on the buffer's memory
 *
 * Replaces the meta's fence with one that signals when both the old fence
 * and @fence have: for a second producer writing into the same buffer.
 * The buffer's NPU memories wait for the merged fence too.
 */
void
gst_npu_fence_meta_chain (GstNpuFenceMeta * meta, NpuFence * fence)
{
  NpuFence *both[2];
  NpuFence *merged;

  g_return_if_fail (meta != NULL && fence != NULL);

  if (!meta->fence) {
    merged = npu_fence_ref (fence);
  } else {
    both[0] = meta->fence;
    both[1] = fence;
    merged = npu_fence_merge (both, 2);
    npu_fence_unref (meta->fence);
  }
  meta->fence = merged;
  /* A map must wait for the second producer as well, not only for the
   * fence the memory was given with the meta. */
  if (meta->buffer)
    set_memory_fences (meta->buffer, merged);
}

/**
 * gst_npu_buffer_get_fence:
 *
 * Returns: (transfer full) (nullable): the fence that signals when
 * @buffer's data is there: its fence meta's, else that of its memory.
 */
NpuFence *
gst_npu_buffer_get_fence (GstBuffer * buffer)
{
  GstNpuFenceMeta *meta = gst_buffer_get_npu_fence_meta (buffer);
  guint i, n;

  if (meta && meta->fence)
    return npu_fence_ref (meta->fence);
  n = gst_buffer_n_memory (buffer);
  for (i = 0; i < n; i++) {
    NpuFence *fence = gst_npu_memory_get_fence (gst_buffer_peek_memory
        (buffer, i));
    if (fence)
      return npu_fence_ref (fence);
  }
  return NULL;
}

/**
 * gst_npu_buffer_wait:
 * @timeout_us: microseconds, or -1 for ever
 *
 * Waits until @buffer's data is there.
 *
 * Returns: %TRUE if it is; %FALSE with @error set on timeout or if the work
 * that produces it failed.
 */
gboolean
gst_npu_buffer_wait (GstBuffer * buffer, gint64 timeout_us, GError ** error)
{
  NpuFence *fence = gst_npu_buffer_get_fence (buffer);
  gboolean ok;

  if (!fence)
    return TRUE;
  ok = npu_fence_wait (fence, timeout_us, error);
  npu_fence_unref (fence);
  return ok;
}
