/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: answering ALLOCATION queries with NPU memory
 *
 * What the tokenizer elements call from propose_allocation: upstream
 * (v4l2src io-mode=dmabuf-import, videotestsrc, appsrc) then writes frames
 * straight into NPU memory.  1.22's v4l2src refuses dmabuf-import unless
 * downstream offers a pool, so a pool is always offered when asked for.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuallocation.h"
#include "gstnpuallocator.h"
#include "gstnpuvideoinfo.h"
#include "gstnpubufferpool.h"
#include "gstnpufencemeta.h"

#include <gst/video/video.h>

/**
 * gst_npu_propose_allocation:
 * @query: an ALLOCATION query
 * @allocator: (nullable): the NPU allocator, %NULL for the default one
 * @min_buffers: buffers the proposing element holds at once
 * @max_buffers: 0 for no limit
 *
 * Adds an NPU buffer pool (when upstream needs one), the NPU allocator
 * with 128-byte alignment, and the GstVideoMeta and fence meta APIs to
 * @query.
 *
 * Returns: %FALSE if the query has no usable caps.
 */
gboolean
gst_npu_propose_allocation (GstQuery * query, GstAllocator * allocator,
    guint min_buffers, guint max_buffers)
{
  GstAllocationParams params;
  GstCaps *caps;
  gboolean need_pool;
  GstVideoInfo info;
  guint size = 0;

  gst_query_parse_allocation (query, &caps, &need_pool);
  if (!caps)
    return FALSE;

  if (allocator)
    gst_object_ref (allocator);
  else
    allocator = gst_npu_allocator_get_default ();

  if (gst_npu_video_info_from_caps (&info, caps))
    size = info.size;

  gst_allocation_params_init (&params);
  params.align = GST_NPU_ALIGN - 1;
  gst_query_add_allocation_param (query, allocator, &params);

  if (need_pool && size > 0) {
    GstBufferPool *pool = gst_npu_buffer_pool_new (allocator);
    GstStructure *config = gst_buffer_pool_get_config (pool);

    gst_buffer_pool_config_set_params (config, caps, size, min_buffers,
        max_buffers);
    gst_buffer_pool_config_add_option (config,
        GST_BUFFER_POOL_OPTION_VIDEO_META);
    gst_buffer_pool_config_set_allocator (config, allocator, &params);
    if (gst_buffer_pool_set_config (pool, config)) {
      /* set_config may have grown the size for aligned strides. */
      config = gst_buffer_pool_get_config (pool);
      gst_buffer_pool_config_get_params (config, NULL, &size, NULL, NULL);
      gst_structure_free (config);
      gst_query_add_allocation_pool (query, pool, size, min_buffers,
          max_buffers);
    }
    gst_object_unref (pool);
  }

  gst_query_add_allocation_meta (query, GST_VIDEO_META_API_TYPE, NULL);
  gst_query_add_allocation_meta (query, GST_NPU_FENCE_META_API_TYPE, NULL);
  gst_object_unref (allocator);
  return TRUE;
}
