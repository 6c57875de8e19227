/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: collecting a model's tensors from a `weights` pad */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuweights.h"
#include "gstnputensormeta.h"

typedef struct
{
  GstBuffer *buffer;
  GstMapInfo map;
  GstNpuTensorMeta *meta;
} MappedTensor;

struct _GstNpuWeights
{
  GPtrArray *buffers;           /* as received */
  GHashTable *by_name;          /* name -> MappedTensor, once mapped */
  gchar *location;
};

static void
mapped_tensor_free (MappedTensor * t)
{
  gst_buffer_unmap (t->buffer, &t->map);
  gst_buffer_unref (t->buffer);
  g_free (t);
}

GstNpuWeights *
gst_npu_weights_new (void)
{
  GstNpuWeights *w = g_new0 (GstNpuWeights, 1);

  w->buffers = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_buffer_unref);
  w->by_name = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
      (GDestroyNotify) mapped_tensor_free);
  return w;
}

void
gst_npu_weights_free (GstNpuWeights * w)
{
  if (!w)
    return;
  g_hash_table_unref (w->by_name);
  g_ptr_array_unref (w->buffers);
  g_free (w->location);
  g_free (w);
}

/**
 * gst_npu_weights_add:
 * @buffer: (transfer full): a tensor from mxfp4weights
 *
 * Returns: %FALSE (and drops @buffer) if it carries no #GstNpuTensorMeta.
 */
gboolean
gst_npu_weights_add (GstNpuWeights * w, GstBuffer * buffer)
{
  if (!gst_buffer_get_npu_tensor_meta (buffer)) {
    gst_buffer_unref (buffer);
    return FALSE;
  }
  g_ptr_array_add (w->buffers, buffer);
  return TRUE;
}

/**
 * gst_npu_weights_take_event:
 * @event: (transfer none): an event from the weights pad
 *
 * Notes the model file named by mxfp4weights' `npu-model` event.
 *
 * Returns: %TRUE if @event was that event.
 */
gboolean
gst_npu_weights_take_event (GstNpuWeights * w, GstEvent * event)
{
  const GstStructure *s;

  if (GST_EVENT_TYPE (event) != GST_EVENT_CUSTOM_DOWNSTREAM_STICKY)
    return FALSE;
  s = gst_event_get_structure (event);
  if (!gst_structure_has_name (s, "npu-model"))
    return FALSE;
  g_free (w->location);
  w->location = g_strdup (gst_structure_get_string (s, "location"));
  return TRUE;
}

/**
 * gst_npu_weights_get_location:
 *
 * Returns: (nullable): the model file the tensors come from, for its
 * metadata (hyper-parameters, tokenizer).
 */
const gchar *
gst_npu_weights_get_location (GstNpuWeights * w)
{
  return w->location;
}

/**
 * gst_npu_weights_map:
 *
 * Maps every tensor received, waiting for conversions still running.
 *
 * Returns: %FALSE with @error set if the stream named no model file or a
 * tensor cannot be mapped (its conversion failed).
 */
gboolean
gst_npu_weights_map (GstNpuWeights * w, GError ** error)
{
  guint i;

  if (!w->location) {
    g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT,
        "no npu-model event before EOS: link mxfp4weights to the weights "
        "pad");
    return FALSE;
  }
  for (i = 0; i < w->buffers->len; i++) {
    MappedTensor *t = g_new0 (MappedTensor, 1);

    t->buffer = gst_buffer_ref (g_ptr_array_index (w->buffers, i));
    t->meta = gst_buffer_get_npu_tensor_meta (t->buffer);
    if (!gst_buffer_map (t->buffer, &t->map, GST_MAP_READ)) {
      g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FAILED,
          "tensor '%s' cannot be mapped (its conversion failed?)",
          t->meta->name);
      gst_buffer_unref (t->buffer);
      g_free (t);
      return FALSE;
    }
    g_hash_table_replace (w->by_name, t->meta->name, t);
  }
  return TRUE;
}

/**
 * gst_npu_weights_lookup:
 * @tensor: (out caller-allocates): where tensor @name is, valid while the
 *   collection lives
 *
 * Returns: %TRUE if the collection has tensor @name (after
 * gst_npu_weights_map()).
 */
gboolean
gst_npu_weights_lookup (GstNpuWeights * w, const gchar * name,
    NpuTensorView * tensor)
{
  MappedTensor *t = g_hash_table_lookup (w->by_name, name);

  if (!t)
    return FALSE;
  npu_tensor_view_init (tensor, t->meta->type, t->meta->n_dims, t->meta->ne,
      t->map.data, t->map.size);
  return TRUE;
}
