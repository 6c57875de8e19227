/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: one view of a model file, GGUF or safetensors
 *
 * Lists a file's tensors in file order with ggml-order shapes (ne[0]
 * innermost) and type names, whatever the container.  A gpt-oss MXFP4 pair
 * in safetensors ("<W>.blocks" + "<W>.scales") is one tensor "<W>" of type
 * MXFP4 that needs repacking (npu_model_tensor_repack_mxfp4()); every other
 * tensor is a pointer into the file mapping.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_MODEL_FILE_H__
#define __NPU_MODEL_FILE_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "npugguf.h"
#include "npusafetensors.h"
#include "npumxfp4.h"

G_BEGIN_DECLS

typedef enum
{
  NPU_MODEL_FORMAT_GGUF,
  NPU_MODEL_FORMAT_SAFETENSORS,
} NpuModelFormat;

/* Element types a model tensor can have, ggml's ids where ggml has one. */
#define NPU_TENSOR_TYPE_F32 0
#define NPU_TENSOR_TYPE_F16 1
#define NPU_TENSOR_TYPE_Q8_0 8
#define NPU_TENSOR_TYPE_BF16 30
#define NPU_TENSOR_TYPE_MXFP4 39

typedef struct
{
  const gchar *name;
  guint n_dims;
  guint64 ne[4];
  gint type;                    /* ggml type id, or -1 (safetensors U8, ...) */
  const gchar *type_name;       /* "f32", "mxfp4", "u8", ... */
  guint64 offset;               /* in the file */
  gsize n_bytes;
  const guint8 *data;

  /* gpt-oss MXFP4 pairs only: the scales, and the blocks in @data */
  gboolean needs_repack;
  const guint8 *scales;
  guint64 scales_offset;
} NpuModelTensor;

typedef struct _NpuModelFile NpuModelFile;

NPU_API
NpuModelFile *npu_model_file_open (const gchar * path, GError ** error);
NPU_API
void npu_model_file_free (NpuModelFile * file);

NPU_API
NpuModelFormat npu_model_file_get_format (const NpuModelFile * file);
NPU_API
const gchar *npu_model_file_get_format_name (const NpuModelFile * file);
NPU_API
int npu_model_file_get_fd (const NpuModelFile * file);
NPU_API
gsize npu_model_file_get_size (const NpuModelFile * file);
NPU_API
const gchar *npu_model_file_get_architecture (const NpuModelFile * file);
NPU_API
NpuGguf *npu_model_file_get_gguf (const NpuModelFile * file);

NPU_API
guint npu_model_file_n_tensors (const NpuModelFile * file);
NPU_API
const NpuModelTensor *npu_model_file_get_tensor (const NpuModelFile * file,
    guint i);

NPU_API
guint64 npu_model_tensor_n_elements (const NpuModelTensor * t);
NPU_API
gboolean npu_model_tensor_can_convert (const NpuModelTensor * t);
NPU_API
gsize npu_model_tensor_mxfp4_bytes (const NpuModelTensor * t);
NPU_API
void npu_model_tensor_convert_rows (const NpuModelTensor * t, guint64 row0,
    guint64 row1, NpuBlockMxfp4 * dst);
/* Adds, over rows [@row0, @row1) of @t converted into @dst (as
 * npu_model_tensor_convert_rows() wrote them), the squared differences of
 * the MXFP4 values from the stored ones to @err2 and the squared stored
 * values to @ref2, in double: sqrt (err2 / ref2) is the conversion's
 * relative RMS error */
NPU_API
void npu_model_tensor_conversion_error (const NpuModelTensor * t,
    guint64 row0, guint64 row1, const NpuBlockMxfp4 * dst, double *err2,
    double *ref2);
NPU_API
void npu_model_tensor_repack_mxfp4 (const NpuModelTensor * t,
    guint64 block0, guint64 block1, NpuBlockMxfp4 * dst);
NPU_API
void npu_model_tensor_release_source (const NpuModelTensor * t);

G_END_DECLS

#endif /* __NPU_MODEL_FILE_H__ */
