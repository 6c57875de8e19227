/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the bytes a decoded token should read, from a GGUF file's own
 * tensor table and metadata: the seed's formula, P b_weight + 2 L H S
 * b_kv, with the project's layout's overheads (the independent reference
 * of tests/unit/test-llmbytes.c and tests/check/test-npullm.c):
 *
 * - every matrix, the logits' too, is read in the type the file stores
 *   (its tensor's bytes; MXFP4 is 17 bytes per 32 weights); the norms and
 *   biases are F32, 4 bytes a value; a token reads one row of token_embd
 *   in the file's type;
 * - the KV cache holds F16 (2 bytes a value) or Q8_0 (34 bytes per 32).
 *
 * Header-only, GLib and the GGUF reader only.
 */
#ifndef __NPU_LLM_BYTES_REF_H__
#define __NPU_LLM_BYTES_REF_H__

#include <glib.h>
#include <core/formats/npugguf.h>

/* The weight bytes one token reads */
static inline guint64
npu_ref_token_weight_bytes (const NpuGguf * gguf)
{
  gboolean tied = npu_gguf_find_tensor (gguf, "output.weight") == NULL;
  guint64 sum = 0;
  guint i;

  for (i = 0; i < npu_gguf_n_tensors (gguf); i++) {
    const NpuGgufTensor *t = npu_gguf_get_tensor (gguf, i);
    guint64 mxfp4 = t->ne[0] / 32 * 17 * t->ne[1];

    if (g_str_equal (t->name, "token_embd.weight")) {
      /* a token's row, and the whole table when it is also the logits' */
      sum += t->n_bytes / t->ne[1];
      if (!tied)
        continue;
    }
    if (t->n_dims == 1) {
      g_assert_cmpint (t->type, ==, NPU_GGML_TYPE_F32);
      g_assert_cmpuint (t->n_bytes, ==, t->ne[0] * 4);
      sum += t->n_bytes;
    } else {
      /* every matrix read as stored */
      if (t->type == NPU_GGML_TYPE_MXFP4)
        g_assert_cmpuint (t->n_bytes, ==, mxfp4);
      sum += t->n_bytes;
    }
  }
  return sum;
}

/* ARCH.@key of the metadata; @fallback where it is absent (< 0: it must
 * be there) */
static inline guint32
npu_ref_gguf_u32 (const NpuGguf * gguf, const gchar * key, gint64 fallback)
{
  gchar *full = g_strconcat (npu_gguf_get_string (gguf,
          "general.architecture", NULL, NULL), ".", key, NULL);
  guint32 v = 0;
  GError *error = NULL;

  if (fallback >= 0 && !npu_gguf_find (gguf, full))
    v = (guint32) fallback;
  else
    g_assert_true (npu_gguf_get_u32 (gguf, full, &v, &error));
  g_assert_no_error (error);
  g_free (full);
  return v;
}

/* The bytes of one cache row of a layer: H = KV heads x head size values,
 * 2 bytes each (F16) or 34 per 32 (Q8_0); and the layers, L */
static inline guint64
npu_ref_kv_row_bytes (const NpuGguf * gguf, gboolean q8_0, guint64 * n_layers)
{
  guint64 H = (guint64) npu_ref_gguf_u32 (gguf, "attention.head_count_kv",
      -1) * npu_ref_gguf_u32 (gguf, "attention.key_length",
      npu_ref_gguf_u32 (gguf, "embedding_length", -1) /
      npu_ref_gguf_u32 (gguf, "attention.head_count", -1));

  *n_layers = npu_ref_gguf_u32 (gguf, "block_count", -1);
  return q8_0 ? H / 32 * 34 : H * 2;
}

#endif /* __NPU_LLM_BYTES_REF_H__ */
