/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what a token tensor stands for */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnputokensmeta.h"

GType
gst_npu_tokens_meta_api_get_type (void)
{
  static gsize type = 0;
  static const gchar *tags[] = { NULL };

  if (g_once_init_enter (&type)) {
    GType t = gst_meta_api_type_register ("GstNpuTokensMetaAPI", tags);
    g_once_init_leave (&type, t);
  }
  return type;
}

static gboolean
gst_npu_tokens_meta_init (GstMeta * meta, gpointer params, GstBuffer * buffer)
{
  GstNpuTokensMeta *t = (GstNpuTokensMeta *) meta;

  t->modality = GST_NPU_MODALITY_VISION;
  t->n_tokens = t->dim = t->grid_width = t->grid_height = 0;
  t->source_pts = t->source_duration = GST_CLOCK_TIME_NONE;
  return TRUE;
}

static gboolean
gst_npu_tokens_meta_transform (GstBuffer * dest, GstMeta * meta,
    GstBuffer * buffer, GQuark type, gpointer data)
{
  GstNpuTokensMeta *t = (GstNpuTokensMeta *) meta;

  if (GST_META_TRANSFORM_IS_COPY (type)) {
    GstMetaTransformCopy *copy = data;

    if (copy->region)
      return TRUE;
    return gst_buffer_add_npu_tokens_meta (dest, t->modality, t->n_tokens,
        t->dim, t->grid_width, t->grid_height, t->source_pts,
        t->source_duration) != NULL;
  }
  return FALSE;
}

const GstMetaInfo *
gst_npu_tokens_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;

  if (g_once_init_enter ((GstMetaInfo **) & info)) {
    const GstMetaInfo *mi = gst_meta_register (GST_NPU_TOKENS_META_API_TYPE,
        "GstNpuTokensMeta", sizeof (GstNpuTokensMeta),
        gst_npu_tokens_meta_init, NULL, gst_npu_tokens_meta_transform);
    g_once_init_leave ((GstMetaInfo **) & info, (GstMetaInfo *) mi);
  }
  return info;
}

/**
 * gst_buffer_add_npu_tokens_meta:
 *
 * Returns: (transfer none): the meta added to @buffer.
 */
GstNpuTokensMeta *
gst_buffer_add_npu_tokens_meta (GstBuffer * buffer, GstNpuModality modality,
    guint n_tokens, guint dim, guint grid_width, guint grid_height,
    GstClockTime source_pts, GstClockTime source_duration)
{
  GstNpuTokensMeta *t;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);

  t = (GstNpuTokensMeta *) gst_buffer_add_meta (buffer,
      GST_NPU_TOKENS_META_INFO, NULL);
  if (!t)
    return NULL;
  t->modality = modality;
  t->n_tokens = n_tokens;
  t->dim = dim;
  t->grid_width = grid_width;
  t->grid_height = grid_height;
  t->source_pts = source_pts;
  t->source_duration = source_duration;
  return t;
}
