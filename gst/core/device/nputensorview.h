/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a view of one tensor's bytes, wherever they live
 *
 * The one way the models (npullm.h, npuvit.h, and any encoder after them)
 * are handed their weights: by name, through an NpuTensorLookup, from a
 * GGUF mapping (npu_gguf_lookup_view()), from the buffers of a `weights`
 * pad (gst_npu_weights_lookup()) or from a test's own arrays.  A view does
 * not own its bytes.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_TENSOR_VIEW_H__
#define __NPU_TENSOR_VIEW_H__

#include <glib.h>
#include "npuapi.h"

G_BEGIN_DECLS

/* Largest tensor rank (ggml's GGML_MAX_DIMS) */
#define NPU_TENSOR_MAX_DIMS 4

/* Makes slice @slice of a view readable (its outermost dimension, an
 * expert of a 3-D expert tensor), for a source that writes a tensor on
 * first use; thread-safe, and cheap once the slice is done */
typedef void (*NpuTensorPrepareFunc) (gpointer data, guint64 slice);

/**
 * NpuTensorView:
 * @type: ggml type id (an NpuGgmlType)
 * @n_dims: dimensions used in @ne, 1..NPU_TENSOR_MAX_DIMS
 * @ne: elements per dimension, ggml order (ne[0] innermost, contiguous);
 *   the dimensions beyond @n_dims are always 1
 * @data: the tensor's bytes in ggml's layout for @type
 * @size: their size in bytes, 0 if the source does not say
 * @prepare: NULL when every byte is there to read; else to be called with
 *   @prepare_data for each slice before it is read (a Hugging Face
 *   directory's experts are rewritten into ggml's layout on first use)
 */
typedef struct
{
  guint32 type;
  guint n_dims;
  guint64 ne[NPU_TENSOR_MAX_DIMS];
  gconstpointer data;
  gsize size;
  NpuTensorPrepareFunc prepare;
  gpointer prepare_data;
} NpuTensorView;

/* Fills @out and returns TRUE if tensor @name exists, FALSE if not.  What
 * @out points to must stay valid as long as the caller says (a model that
 * reads MXFP4 in place: as long as the model). */
typedef gboolean (*NpuTensorLookup) (const gchar * name, NpuTensorView * out,
    gpointer user_data);

/* Fills @view (ready to read: no @prepare); the dimensions of @ne beyond
 * @n_dims are set to 1 whatever @ne holds there (@n_dims above
 * NPU_TENSOR_MAX_DIMS is clamped). */
NPU_API
void npu_tensor_view_init (NpuTensorView * view, guint32 type, guint n_dims,
    const guint64 * ne, gconstpointer data, gsize size);

G_END_DECLS

#endif /* __NPU_TENSOR_VIEW_H__ */
