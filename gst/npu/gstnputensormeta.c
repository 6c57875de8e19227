/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what a tensor buffer holds */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnputensormeta.h"

#include <string.h>

GType
gst_npu_tensor_meta_api_get_type (void)
{
  static gsize type = 0;
  static const gchar *tags[] = { NULL };

  if (g_once_init_enter (&type)) {
    GType t = gst_meta_api_type_register ("GstNpuTensorMetaAPI", tags);
    g_once_init_leave (&type, t);
  }
  return type;
}

static gboolean
gst_npu_tensor_meta_init (GstMeta * meta, gpointer params, GstBuffer * buffer)
{
  GstNpuTensorMeta *tmeta = (GstNpuTensorMeta *) meta;

  tmeta->name = NULL;
  tmeta->type_name = NULL;
  tmeta->source_type_name = NULL;
  tmeta->n_dims = 0;
  memset (tmeta->ne, 0, sizeof (tmeta->ne));
  tmeta->type = -1;
  tmeta->index = tmeta->n_tensors = 0;
  return TRUE;
}

static void
gst_npu_tensor_meta_free (GstMeta * meta, GstBuffer * buffer)
{
  GstNpuTensorMeta *tmeta = (GstNpuTensorMeta *) meta;

  g_free (tmeta->name);
  g_free (tmeta->type_name);
  g_free (tmeta->source_type_name);
}

static gboolean
gst_npu_tensor_meta_transform (GstBuffer * dest, GstMeta * meta,
    GstBuffer * buffer, GQuark type, gpointer data)
{
  GstNpuTensorMeta *t = (GstNpuTensorMeta *) meta;

  if (GST_META_TRANSFORM_IS_COPY (type)) {
    GstMetaTransformCopy *copy = data;

    /* A part of a tensor is not that tensor. */
    if (copy->region)
      return TRUE;
    return gst_buffer_add_npu_tensor_meta (dest, t->name, t->n_dims, t->ne,
        t->type, t->type_name, t->source_type_name, t->index,
        t->n_tensors) != NULL;
  }
  return FALSE;
}

const GstMetaInfo *
gst_npu_tensor_meta_get_info (void)
{
  static const GstMetaInfo *info = NULL;

  if (g_once_init_enter ((GstMetaInfo **) & info)) {
    const GstMetaInfo *mi = gst_meta_register (GST_NPU_TENSOR_META_API_TYPE,
        "GstNpuTensorMeta", sizeof (GstNpuTensorMeta),
        gst_npu_tensor_meta_init, gst_npu_tensor_meta_free,
        gst_npu_tensor_meta_transform);
    g_once_init_leave ((GstMetaInfo **) & info, (GstMetaInfo *) mi);
  }
  return info;
}

/**
 * gst_buffer_add_npu_tensor_meta:
 * @ne: (array length=n_dims): elements per dimension, innermost first
 *
 * Returns: (transfer none): the meta added to @buffer.
 */
GstNpuTensorMeta *
gst_buffer_add_npu_tensor_meta (GstBuffer * buffer, const gchar * name,
    guint n_dims, const guint64 * ne, gint type, const gchar * type_name,
    const gchar * source_type_name, guint index, guint n_tensors)
{
  GstNpuTensorMeta *meta;
  guint i;

  g_return_val_if_fail (GST_IS_BUFFER (buffer), NULL);
  g_return_val_if_fail (n_dims <= 4, NULL);

  meta = (GstNpuTensorMeta *) gst_buffer_add_meta (buffer,
      GST_NPU_TENSOR_META_INFO, NULL);
  if (!meta)
    return NULL;
  meta->name = g_strdup (name);
  meta->n_dims = n_dims;
  for (i = 0; i < 4; i++)
    meta->ne[i] = i < n_dims ? ne[i] : 1;
  meta->type = type;
  meta->type_name = g_strdup (type_name);
  meta->source_type_name = g_strdup (source_type_name);
  meta->index = index;
  meta->n_tensors = n_tensors;
  return meta;
}
