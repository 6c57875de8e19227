/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what a tensor buffer holds
 *
 * mxfp4weights puts one on every buffer it pushes: the tensor's name, its
 * shape in ggml order (ne[0] innermost), its element type, and where it came
 * from.  Consumers find their weights by name.
 */
#ifndef __GST_NPU_TENSOR_META_H__
#define __GST_NPU_TENSOR_META_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>

G_BEGIN_DECLS

#define GST_NPU_TENSOR_META_API_TYPE (gst_npu_tensor_meta_api_get_type ())
#define GST_NPU_TENSOR_META_INFO (gst_npu_tensor_meta_get_info ())

typedef struct _GstNpuTensorMeta GstNpuTensorMeta;

/**
 * GstNpuTensorMeta:
 * @name: the tensor's name in the model file
 * @n_dims: dimensions used in @ne
 * @ne: elements per dimension, ne[0] innermost (contiguous)
 * @type: ggml type id of the data in the buffer, -1 if ggml has none
 * @type_name: "mxfp4", "f32", "u8", ...
 * @source_type_name: the type in the file ("f16" for a converted tensor)
 * @index: the tensor's position in the file, from 0
 * @n_tensors: tensors in the file
 */
struct _GstNpuTensorMeta
{
  GstMeta meta;

  gchar *name;
  guint n_dims;
  guint64 ne[4];
  gint type;
  gchar *type_name;
  gchar *source_type_name;
  guint index;
  guint n_tensors;
};

GST_NPU_API
GType gst_npu_tensor_meta_api_get_type (void);
GST_NPU_API
const GstMetaInfo *gst_npu_tensor_meta_get_info (void);

#define gst_buffer_get_npu_tensor_meta(b) \
  ((GstNpuTensorMeta *) gst_buffer_get_meta ((b), GST_NPU_TENSOR_META_API_TYPE))

GST_NPU_API
GstNpuTensorMeta *gst_buffer_add_npu_tensor_meta (GstBuffer * buffer,
    const gchar * name, guint n_dims, const guint64 * ne, gint type,
    const gchar * type_name, const gchar * source_type_name, guint index,
    guint n_tensors);

G_END_DECLS

#endif /* __GST_NPU_TENSOR_META_H__ */
