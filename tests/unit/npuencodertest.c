/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: what the vision and audio encoders' tests share; see
 * npuencodertest.h */
#include "npuencodertest.h"

#include <string.h>
#include <core/models/npuviterror.h>

void
npu_test_lookup_fill (const NpuTestLookup * lk, const gchar * name,
    const NpuGgufTensor * t, NpuTensorView * out)
{
  guint i;

  out->type = t->type;
  out->n_dims = t->n_dims;
  for (i = 0; i < NPU_GGUF_MAX_DIMS; i++)
    out->ne[i] = t->ne[i];
  out->data = t->data;
  if (lk->reshape && strcmp (name, lk->reshape) == 0)
    out->ne[1] /= 2;
  /* a type the encoders have no decoder for (npuquants.h), of 32-value
   * blocks as the retyped matrices' rows are */
  if (lk->retype && strcmp (name, lk->retype) == 0)
    out->type = NPU_GGML_TYPE_IQ4_NL;
}

gboolean
npu_test_lookup (const gchar * name, NpuTensorView * out, gpointer user_data)
{
  const NpuTestLookup *lk = user_data;
  const NpuGgufTensor *t;

  if (lk->hide && strcmp (name, lk->hide) == 0)
    return FALSE;
  t = npu_gguf_find_tensor (lk->gguf, name);
  if (!t)
    return FALSE;
  npu_test_lookup_fill (lk, name, t, out);
  return TRUE;
}

void
npu_test_expect_encoder_error (NpuTestEncoderNew new_encoder,
    const NpuGguf * gguf, NpuTensorLookup lookup, gpointer user_data,
    gint code, const gchar * text)
{
  GError *error = NULL;
  gpointer encoder = new_encoder (gguf, lookup, user_data, &error);

  g_assert_null (encoder);
  g_assert_error (error, NPU_VIT_ERROR, code);
  g_test_message ("%s", error->message);
  if (!strstr (error->message, text))
    g_error ("\"%s\" does not contain \"%s\"", error->message, text);
  g_error_free (error);
}

guint8 *
npu_test_patched_copy (const gchar * path, const gchar * from,
    const gchar * to, guint nth, gsize * size)
{
  gchar *data;
  gsize len = strlen (from), i;

  g_assert_cmpuint (strlen (to), ==, len);
  g_assert_true (g_file_get_contents (path, &data, size, NULL));
  for (i = 0; i + len <= *size; i++) {
    if (memcmp (data + i, from, len) == 0 && nth-- == 0) {
      memcpy (data + i, to, len);
      return (guint8 *) data;
    }
  }
  g_assert_not_reached ();
  return NULL;
}

void
npu_test_expect_patched_error (NpuTestEncoderNew new_encoder,
    const gchar * path, const gchar * from, const gchar * to, guint nth,
    gint code, const gchar * text)
{
  GError *error = NULL;
  gsize size;
  guint8 *bytes = npu_test_patched_copy (path, from, to, nth, &size);
  NpuGguf *pg = npu_gguf_open_bytes (bytes, size, &error);

  g_assert_no_error (error);
  npu_test_expect_encoder_error (new_encoder, pg, NULL, NULL, code, text);
  npu_gguf_free (pg);
  g_free (bytes);
}
