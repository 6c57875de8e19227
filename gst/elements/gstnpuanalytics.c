/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GStreamer's analytics metadata (gstreamer-analytics-1.0, 1.26)
 *
 * Compiled only where the library is (see gstnpuanalytics.h).
 */
#include "gstnpuanalytics.h"

#ifdef HAVE_GST_ANALYTICS

static const gchar *
tensor_id_for (GstNpuModality modality)
{
  return modality == GST_NPU_MODALITY_AUDIO ?
      GST_NPU_TENSOR_ID_AUDIO_TOKENS : GST_NPU_TENSOR_ID_VISION_TOKENS;
}

/* Names as GStreamer 1.28's gst_tensor_data_type_get_name() gives them
 * (1.26 has no such function). */
static const gchar *
data_type_name (GstTensorDataType t)
{
  static const gchar *const names[] = { "int4", "int8", "int16", "int32",
    "int64", "uint4", "uint8", "uint16", "uint32", "uint64", "float16",
    "float32", "float64", "bfloat16"
  };

  return (guint) t < G_N_ELEMENTS (names) ? names[t] : "unknown";
}

/**
 * gst_npu_buffer_add_token_tensor:
 * @buffer: a writable token buffer
 * @tokens: the memory the tokens are (being) written to
 * @modality: vision or audio
 * @n_tokens: rows
 * @dim: floats a row
 *
 * Adds a #GstTensorMeta with one float32 row-major tensor [@n_tokens, @dim]
 * whose buffer holds @tokens itself (a reference, no copy): mapping it
 * waits for the tokens' fence like mapping @buffer does.
 *
 * Returns: %FALSE (and no meta) when @tokens is not @n_tokens x @dim floats.
 */
gboolean
gst_npu_buffer_add_token_tensor (GstBuffer * buffer, GstMemory * tokens,
    GstNpuModality modality, guint n_tokens, guint dim)
{
  GstTensorMeta *tmeta;
  GstBuffer *data;
  GstTensor *tensor;
  gsize dims[2] = { n_tokens, dim };

  /* the tensor is the whole memory (a share of a part would be a second
   * GstMemory whose map need not wait for the fence) */
  g_return_val_if_fail (gst_memory_get_sizes (tokens, NULL, NULL) ==
      (gsize) n_tokens * dim * sizeof (gfloat), FALSE);
  data = gst_buffer_new ();
  gst_buffer_append_memory (data, gst_memory_ref (tokens));
  tensor = gst_tensor_new_simple (g_quark_from_static_string (tensor_id_for
          (modality)), GST_TENSOR_DATA_TYPE_FLOAT32, data,
      GST_TENSOR_DIM_ORDER_ROW_MAJOR, 2, dims);
  if (!tensor) {
    gst_buffer_unref (data);
    return FALSE;
  }
  tmeta = gst_buffer_add_tensor_meta (buffer);
  gst_tensor_meta_set (tmeta, 1, g_memdup2 (&tensor, sizeof (tensor)));
  return TRUE;
}

/* The tensor of @tmeta that holds @modality's tokens: ours by its id, or
 * the only one there is. */
static const GstTensor *
pick_tensor (GstTensorMeta * tmeta, GstNpuModality modality, GError ** error)
{
  const gchar *id = tensor_id_for (modality);
  gint idx = gst_tensor_meta_get_index_from_id (tmeta,
      g_quark_from_static_string (id));

  if (idx < 0 && tmeta->num_tensors == 1)
    idx = 0;
  if (idx < 0) {
    g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT,
        "the buffer's GstTensorMeta has %" G_GSIZE_FORMAT " tensors and none "
        "with the id \"%s\": cannot tell which holds the tokens",
        tmeta->num_tensors, id);
    return NULL;
  }
  return gst_tensor_meta_get (tmeta, idx);
}

/**
 * gst_npu_buffer_find_token_tensor:
 * @buffer: a buffer that arrived on npullm's vision or audio pad
 * @modality: the pad's
 * @n_embd: the text model's embedding size, floats a token
 * @error: where a tensor that cannot be tokens is explained
 *
 * The tokens a #GstTensorMeta on @buffer describes: a float32, contiguous
 * tensor whose rows (the innermost dimension: the last one row-major, the
 * first one column-major) are @n_embd wide.
 *
 * Returns: (transfer full) (nullable): the tensor's buffer; %NULL with
 *   @error unset when @buffer has no #GstTensorMeta.
 */
GstBuffer *
gst_npu_buffer_find_token_tensor (GstBuffer * buffer,
    GstNpuModality modality, guint n_embd, GError ** error)
{
  GstTensorMeta *tmeta = gst_buffer_get_tensor_meta (buffer);
  const GstTensor *t;
  gsize row, n_elems = 1, size, i;
  gboolean dynamic = FALSE;

  if (!tmeta || tmeta->num_tensors == 0)
    return NULL;
  if (!(t = pick_tensor (tmeta, modality, error)))
    return NULL;
  if (t->data_type != GST_TENSOR_DATA_TYPE_FLOAT32 ||
      t->layout != GST_TENSOR_LAYOUT_CONTIGUOUS || !t->data ||
      t->num_dims == 0) {
    g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT,
        "the GstTensorMeta's tensor is %s%s, not contiguous float32 rows",
        data_type_name (t->data_type), t->data ? "" : " without data");
    return NULL;
  }
  row = t->dims_order == GST_TENSOR_DIM_ORDER_COL_MAJOR ?
      t->dims[0] : t->dims[t->num_dims - 1];
  for (i = 0; i < t->num_dims; i++) {
    /* 0 is a dynamic dimension: the buffer's size says */
    if (t->dims[i] == 0)
      dynamic = TRUE;
    else
      n_elems *= t->dims[i];
  }
  size = gst_buffer_get_size (t->data);
  if (row != n_embd || size == 0 || size % (n_embd * sizeof (gfloat)) ||
      (!dynamic && size != n_elems * sizeof (gfloat))) {
    g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT,
        "Tokens do not fit the model: the GstTensorMeta's tensor has rows "
        "of %" G_GSIZE_FORMAT " floats and %" G_GSIZE_FORMAT " bytes of data, "
        "the model wants whole rows of %u (the vision/audio projector must "
        "output the text model's embedding size)", row, size, n_embd);
    return NULL;
  }
  return gst_buffer_ref (t->data);
}

/**
 * gst_npu_buffer_add_caption_mtd:
 * @buffer: a writable video frame
 * @text: the answer
 *
 * Adds @text as a #GstAnalyticsClsMtd of one class (the text as a quark,
 * level 1.0) to the frame's #GstAnalyticsRelationMeta, made if missing.
 */
gboolean
gst_npu_buffer_add_caption_mtd (GstBuffer * buffer, const gchar * text)
{
  GstAnalyticsRelationMeta *rmeta =
      gst_buffer_get_analytics_relation_meta (buffer);
  GstAnalyticsClsMtd cls;

  if (!rmeta)
    rmeta = gst_buffer_add_analytics_relation_meta (buffer);
  if (!rmeta)
    return FALSE;
  return gst_analytics_relation_meta_add_one_cls_mtd (rmeta, 1.0f,
      g_quark_from_string (text), &cls);
}

#endif /* HAVE_GST_ANALYTICS */
