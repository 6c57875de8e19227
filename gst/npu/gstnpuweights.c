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

/* ------------------------------------------------------------------------
 * The weights pad
 */
struct _GstNpuWeightsInput
{
  GstElement *element;          /* not a reference: it owns us */
  GstNpuWeightsLoadFunc load;
  GstPad *pad;                  /* the request pad, while it exists */
  GstNpuWeights *weights;       /* between start and stop */
  gboolean loaded;              /* from the property or the pad */
};

/**
 * gst_npu_weights_input_new:
 * @element: the element that has a `weights` request pad template
 * @load: loads the model, from a file or from the pad's tensors
 *
 * Returns: (transfer full): the pad's state; free it in finalize.
 */
GstNpuWeightsInput *
gst_npu_weights_input_new (GstElement * element, GstNpuWeightsLoadFunc load)
{
  GstNpuWeightsInput *in = g_new0 (GstNpuWeightsInput, 1);

  in->element = element;
  in->load = load;
  return in;
}

void
gst_npu_weights_input_free (GstNpuWeightsInput * in)
{
  if (!in)
    return;
  gst_npu_weights_free (in->weights);
  g_free (in);
}

static GstFlowReturn
weights_input_chain (GstPad * pad, GstObject * parent, GstBuffer * buf)
{
  GstNpuWeightsInput *in = gst_pad_get_element_private (pad);

  if (!in->weights) {
    gst_buffer_unref (buf);
    return GST_FLOW_FLUSHING;
  }
  if (!gst_npu_weights_add (in->weights, buf)) {
    GST_ELEMENT_ERROR (in->element, STREAM, FORMAT,
        ("The weights pad takes tensors from mxfp4weights."),
        ("a buffer without a tensor meta"));
    return GST_FLOW_ERROR;
  }
  return GST_FLOW_OK;
}

/* At the weights' EOS: waits for each conversion, then loads the model,
 * which reads the tensors in place; the collection keeps them mapped
 * until stop. */
static gboolean
weights_input_load (GstNpuWeightsInput * in)
{
  GError *error = NULL;

  if (in->loaded)
    return TRUE;
  if (!gst_npu_weights_map (in->weights, &error)) {
    GST_ELEMENT_ERROR (in->element, STREAM, FORMAT,
        ("Cannot use the weights: %s", error->message), ("%s", error->message));
    g_error_free (error);
    return FALSE;
  }
  in->loaded = in->load (in->element,
      gst_npu_weights_get_location (in->weights), in->weights);
  return in->loaded;
}

/* The stream's own events (stream-start, caps, segment) end here: the
 * element's output is its own stream. */
static gboolean
weights_input_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstNpuWeightsInput *in = gst_pad_get_element_private (pad);
  gboolean ret = TRUE;

  if (in->weights) {
    switch (GST_EVENT_TYPE (event)) {
      case GST_EVENT_CUSTOM_DOWNSTREAM_STICKY:
        gst_npu_weights_take_event (in->weights, event);
        break;
      case GST_EVENT_EOS:
        ret = weights_input_load (in);
        break;
      default:
        break;
    }
  }
  gst_event_unref (event);
  return ret;
}

/**
 * gst_npu_weights_input_request_pad:
 * @templ: the element's `weights` request pad template
 *
 * For the element's request_new_pad: adds the `weights` pad.
 *
 * Returns: (transfer none) (nullable): the pad, or %NULL if the element
 * has it already.
 */
GstPad *
gst_npu_weights_input_request_pad (GstNpuWeightsInput * in,
    GstPadTemplate * templ)
{
  if (in->pad)
    return NULL;
  in->pad = gst_pad_new_from_template (templ, "weights");
  gst_pad_set_element_private (in->pad, in);
  gst_pad_set_chain_function (in->pad, weights_input_chain);
  gst_pad_set_event_function (in->pad, weights_input_event);
  gst_element_add_pad (in->element, in->pad);
  return in->pad;
}

/**
 * gst_npu_weights_input_release_pad:
 *
 * For the element's release_pad: removes @pad if it is the weights pad.
 *
 * Returns: %TRUE if it was (and is now removed).
 */
gboolean
gst_npu_weights_input_release_pad (GstNpuWeightsInput * in, GstPad * pad)
{
  if (pad != in->pad)
    return FALSE;
  in->pad = NULL;
  gst_element_remove_pad (in->element, pad);
  return TRUE;
}

/**
 * gst_npu_weights_input_start:
 * @model: (nullable): the element's `model` property
 *
 * On READY to PAUSED: loads @model if set (the weights pad, if linked too,
 * is then ignored), else waits for the weights pad's tensors.  Posts
 * RESOURCE/NOT_FOUND ("No model given.") when there is neither.
 *
 * Returns: %FALSE if the element cannot start.
 */
gboolean
gst_npu_weights_input_start (GstNpuWeightsInput * in, const gchar * model)
{
  in->weights = gst_npu_weights_new ();
  in->loaded = FALSE;
  if (!model && !in->pad) {
    GST_ELEMENT_ERROR (in->element, RESOURCE, NOT_FOUND, ("No model given."),
        ("set the \"model\" property or link mxfp4weights to the weights "
            "pad"));
    return FALSE;
  }
  if (model)
    in->loaded = in->load (in->element, model, NULL);
  return !model || in->loaded;
}

/**
 * gst_npu_weights_input_stop:
 *
 * On PAUSED to READY, once the model is freed: drops the tensors.
 */
void
gst_npu_weights_input_stop (GstNpuWeightsInput * in)
{
  g_clear_pointer (&in->weights, gst_npu_weights_free);
  in->loaded = FALSE;
}
