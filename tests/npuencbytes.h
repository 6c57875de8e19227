/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the weight bytes an encoder (vision or audio mmproj) should
 * read for one frame or chunk, from the file's own tensor table (the
 * independent reference of tests/unit/test-encbytes.c and the
 * npuvisiontok / npuaudiotok check tests): every tensor once, in the
 * layout the encoder reads it in (below).
 *
 * Header-only, GLib and the GGUF reader only.
 */
#ifndef __NPU_ENC_BYTES_REF_H__
#define __NPU_ENC_BYTES_REF_H__

#include <glib.h>
#include <string.h>
#include <core/formats/npugguf.h>

static inline guint64
npu_ref_n_elements (const NpuGgufTensor * t)
{
  guint64 n = 1;
  guint i;

  for (i = 0; i < t->n_dims; i++)
    n *= t->ne[i];
  return n;
}

/* What a unit reads of tensor @t in the layout the encoder reads it in:
 * a matrix in place, as the file stores it (its own bytes, whatever its
 * type); the vectors and the position table F32; a convolution kernel
 * (patch embedding, conv1d) MXFP4 in place when the file has it, else an
 * F32 copy (Qwen2-VL's two temporal halves as one); of @pos_table,
 * @pos_rows rows only */
static inline guint64
npu_ref_tensor_read_bytes (const NpuGgufTensor * t, const gchar * pos_table,
    guint64 pos_rows)
{
  gboolean kernel = g_str_has_prefix (t->name, "v.patch_embd.weight") ||
      strstr (t->name, "conv1d") != NULL;

  /* Qwen2-VL's two temporal kernels are summed into one at load time */
  if (g_str_equal (t->name, "v.patch_embd.weight.1"))
    return 0;
  if (g_str_equal (t->name, pos_table))
    return pos_rows * t->ne[0] * 4;
  if (strstr (t->name, "position_embd"))
    return npu_ref_n_elements (t) * 4;
  if (t->n_dims == 1 || g_str_has_suffix (t->name, ".bias"))
    return npu_ref_n_elements (t) * 4;
  if (kernel)
    return t->type == NPU_GGML_TYPE_MXFP4 ? t->n_bytes : npu_ref_n_elements (t) * 4;
  if (t->type == NPU_GGML_TYPE_MXFP4)
    g_assert_cmpuint (t->n_bytes, ==, npu_ref_n_elements (t) / 32 * 17);
  return t->n_bytes;
}

/* The weight bytes one unit of the encoder in the file @path reads */
static inline guint64
npu_ref_encoder_weight_bytes (const gchar * path, const gchar * pos_table,
    guint64 pos_rows)
{
  GError *error = NULL;
  NpuGguf *gguf = npu_gguf_open (path, &error);
  guint64 sum = 0;
  guint i;

  g_assert_no_error (error);
  for (i = 0; i < npu_gguf_n_tensors (gguf); i++)
    sum += npu_ref_tensor_read_bytes (npu_gguf_get_tensor (gguf, i), pos_table,
        pos_rows);
  npu_gguf_free (gguf);
  return sum;
}

#endif /* __NPU_ENC_BYTES_REF_H__ */
