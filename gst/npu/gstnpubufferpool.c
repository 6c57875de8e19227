/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a buffer pool of NPU memory
 *
 * One memory per buffer, so a frame is one dma-buf that v4l2src
 * (io-mode=dmabuf-import) can hand to its driver and a device can import
 * whole.  Video planes are laid out with 128-byte aligned strides so that
 * kernels can read rows with aligned vector loads.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpubufferpool.h"
#include "gstnpuallocator.h"
#include "gstnpuvideoinfo.h"

GST_DEBUG_CATEGORY_STATIC (gst_npu_buffer_pool_debug);
#define GST_CAT_DEFAULT gst_npu_buffer_pool_debug

struct _GstNpuBufferPool
{
  GstBufferPool parent;

  GstAllocator *allocator;
  GstAllocationParams params;
  gboolean is_video;
  GstVideoInfo info;
  gboolean add_video_meta;
  gsize size;
};

G_DEFINE_TYPE_WITH_CODE (GstNpuBufferPool, gst_npu_buffer_pool,
    GST_TYPE_BUFFER_POOL,
    GST_DEBUG_CATEGORY_INIT (gst_npu_buffer_pool_debug, "npubufferpool", 0,
        "NPU buffer pool"));

static const gchar **
gst_npu_buffer_pool_get_options (GstBufferPool * pool)
{
  static const gchar *options[] = {
    GST_BUFFER_POOL_OPTION_VIDEO_META,
    GST_BUFFER_POOL_OPTION_VIDEO_ALIGNMENT,
    NULL
  };
  return options;
}

/* Strides to multiples of GST_NPU_ALIGN, merged with what the config asks. */
static gboolean
align_video_info (GstVideoInfo * info, GstVideoAlignment * align)
{
  guint i;

  for (i = 0; i < GST_VIDEO_MAX_PLANES; i++)
    align->stride_align[i] |= GST_NPU_ALIGN - 1;
  return gst_video_info_align (info, align);
}

static gboolean
gst_npu_buffer_pool_set_config (GstBufferPool * pool, GstStructure * config)
{
  GstNpuBufferPool *self = GST_NPU_BUFFER_POOL (pool);
  GstCaps *caps;
  guint size, min, max;
  GstAllocator *allocator = NULL;
  GstAllocationParams params;

  if (!gst_buffer_pool_config_get_params (config, &caps, &size, &min, &max))
    goto wrong_config;
  if (!caps)
    goto no_caps;

  /* Any allocator in the config is replaced by ours: memory from this pool
   * is NPU memory by definition. */
  if (!gst_buffer_pool_config_get_allocator (config, &allocator, &params))
    gst_allocation_params_init (&params);
  params.align |= GST_NPU_ALIGN - 1;
  self->params = params;

  self->is_video = FALSE;
  self->add_video_meta = FALSE;
  if (gst_npu_video_info_from_caps (&self->info, caps)) {
    GstVideoAlignment align;

    self->is_video = TRUE;
    gst_video_alignment_reset (&align);
    if (gst_buffer_pool_config_has_option (config,
            GST_BUFFER_POOL_OPTION_VIDEO_ALIGNMENT))
      gst_buffer_pool_config_get_video_alignment (config, &align);
    if (!align_video_info (&self->info, &align))
      goto bad_alignment;
    self->add_video_meta = gst_buffer_pool_config_has_option (config,
        GST_BUFFER_POOL_OPTION_VIDEO_META);
    gst_buffer_pool_config_set_video_alignment (config, &align);
    size = MAX (size, self->info.size);
  } else if (size == 0) {
    goto no_size;
  }
  self->size = size;

  gst_buffer_pool_config_set_params (config, caps, size, min, max);
  gst_buffer_pool_config_set_allocator (config, self->allocator, &params);
  GST_DEBUG_OBJECT (pool, "%" GST_PTR_FORMAT ", %u bytes per buffer, %s "
      "memory", caps, size, gst_npu_memory_path_to_string
      (gst_npu_allocator_get_path (self->allocator)));

  return GST_BUFFER_POOL_CLASS (gst_npu_buffer_pool_parent_class)->set_config
      (pool, config) && self->size > 0;

  /* ERRORS */
wrong_config:
  {
    GST_WARNING_OBJECT (pool, "invalid config");
    return FALSE;
  }
no_caps:
  {
    GST_WARNING_OBJECT (pool, "no caps in config");
    return FALSE;
  }
bad_alignment:
  {
    GST_WARNING_OBJECT (pool, "cannot align video info for %" GST_PTR_FORMAT,
        caps);
    return FALSE;
  }
no_size:
  {
    GST_WARNING_OBJECT (pool, "caps %" GST_PTR_FORMAT " are not video and "
        "the config gives no buffer size", caps);
    return FALSE;
  }
}

static GstFlowReturn
gst_npu_buffer_pool_alloc_buffer (GstBufferPool * pool, GstBuffer ** buffer,
    GstBufferPoolAcquireParams * acquire_params)
{
  GstNpuBufferPool *self = GST_NPU_BUFFER_POOL (pool);
  GstMemory *mem;
  GstBuffer *buf;

  mem = gst_allocator_alloc (self->allocator, self->size, &self->params);
  if (!mem)
    goto no_memory;

  buf = gst_buffer_new ();
  gst_buffer_append_memory (buf, mem);
  if (self->is_video && self->add_video_meta) {
    const GstVideoInfo *info = &self->info;

    gst_buffer_add_video_meta_full (buf, GST_VIDEO_FRAME_FLAG_NONE,
        GST_VIDEO_INFO_FORMAT (info), GST_VIDEO_INFO_WIDTH (info),
        GST_VIDEO_INFO_HEIGHT (info), GST_VIDEO_INFO_N_PLANES (info),
        (gsize *) info->offset, (gint *) info->stride);
  }
  *buffer = buf;
  return GST_FLOW_OK;

  /* ERRORS */
no_memory:
  {
    GST_ERROR_OBJECT (pool, "cannot allocate a %" G_GSIZE_FORMAT
        " byte buffer of NPU memory", self->size);
    return GST_FLOW_ERROR;
  }
}

static void
gst_npu_buffer_pool_reset_buffer (GstBufferPool * pool, GstBuffer * buffer)
{
  GstMemory *mem = gst_buffer_peek_memory (buffer, 0);

  /* A recycled buffer's old fence says nothing about its next contents.
   * But a memory still shared with another buffer (a copy of this one,
   * downstream) keeps it: that buffer's readers must still wait, and the
   * pool does not take such a buffer back anyway. */
  if (gst_buffer_n_memory (buffer) == 1 && gst_is_npu_memory (mem)
      && gst_memory_is_writable (mem))
    gst_npu_memory_set_fence (mem, NULL);
  GST_BUFFER_POOL_CLASS (gst_npu_buffer_pool_parent_class)->reset_buffer
      (pool, buffer);
}

static void
gst_npu_buffer_pool_finalize (GObject * object)
{
  GstNpuBufferPool *self = GST_NPU_BUFFER_POOL (object);

  gst_object_unref (self->allocator);
  G_OBJECT_CLASS (gst_npu_buffer_pool_parent_class)->finalize (object);
}

static void
gst_npu_buffer_pool_class_init (GstNpuBufferPoolClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstBufferPoolClass *pool_class = GST_BUFFER_POOL_CLASS (klass);

  gobject_class->finalize = gst_npu_buffer_pool_finalize;
  pool_class->get_options = gst_npu_buffer_pool_get_options;
  pool_class->set_config = gst_npu_buffer_pool_set_config;
  pool_class->alloc_buffer = gst_npu_buffer_pool_alloc_buffer;
  pool_class->reset_buffer = gst_npu_buffer_pool_reset_buffer;
}

static void
gst_npu_buffer_pool_init (GstNpuBufferPool * self)
{
}

/**
 * gst_npu_buffer_pool_new:
 * @allocator: (nullable): an NPU allocator; %NULL for the default one
 *
 * Returns: (transfer full): a new pool of NPU memory.
 */
GstBufferPool *
gst_npu_buffer_pool_new (GstAllocator * allocator)
{
  GstNpuBufferPool *pool;

  g_return_val_if_fail (allocator == NULL || gst_is_npu_allocator (allocator),
      NULL);

  pool = g_object_new (GST_TYPE_NPU_BUFFER_POOL, NULL);
  gst_object_ref_sink (pool);
  pool->allocator = allocator ? gst_object_ref (allocator) :
      gst_npu_allocator_get_default ();
  return GST_BUFFER_POOL (pool);
}

/**
 * gst_npu_buffer_pool_get_video_info:
 * @info: (out): the aligned layout of the pool's frames
 *
 * Returns: %TRUE if the pool is configured for video.
 */
gboolean
gst_npu_buffer_pool_get_video_info (GstBufferPool * pool, GstVideoInfo * info)
{
  GstNpuBufferPool *self = GST_NPU_BUFFER_POOL (pool);

  if (!self->is_video)
    return FALSE;
  *info = self->info;
  return TRUE;
}
