/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a view of one tensor's bytes (see nputensorview.h) */
#include "nputensorview.h"

void
npu_tensor_view_init (NpuTensorView * view, guint32 type, guint n_dims,
    const guint64 * ne, gconstpointer data, gsize size)
{
  guint i;

  n_dims = MIN (n_dims, NPU_TENSOR_MAX_DIMS);
  view->type = type;
  view->n_dims = n_dims;
  for (i = 0; i < NPU_TENSOR_MAX_DIMS; i++)
    view->ne[i] = i < n_dims ? ne[i] : 1;
  view->data = data;
  view->size = size;
  view->prepare = NULL;
  view->prepare_data = NULL;
}
