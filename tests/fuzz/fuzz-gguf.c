/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: libFuzzer target for the GGUF reader
 *
 * Opens the input in place and touches everything the reader hands out
 * (every value, every array element at every depth, every byte of tensor
 * data) so that a bounds mistake anywhere shows up under ASan.
 */
#include <core/formats/npugguf.h>

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static volatile guint64 sink;

static void
walk_value (const NpuGgufValue * v)
{
  NpuGgufValue e;
  guint64 i;
  gsize len;
  const gchar *s;

  switch (v->type) {
    case NPU_GGUF_TYPE_STRING:
      for (i = 0; i < v->v.str.len; i++)
        sink += (guint8) v->v.str.data[i];
      break;
    case NPU_GGUF_TYPE_ARRAY:
      for (i = 0; i < v->v.arr.size; i++)
        sink += v->v.arr.data[i];
      for (i = 0; i < v->v.arr.count; i++) {
        if (!npu_gguf_array_get (v, i, &e))
          __builtin_trap ();
        walk_value (&e);
        s = npu_gguf_array_get_string (v, i, &len);
        if (s)
          sink += len ? (guint8) s[len - 1] : 0;
      }
      break;
    default:
      sink += v->v.u;
      break;
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  GError *err = NULL;
  NpuGguf *g;
  guint i;
  gsize k;

  g = npu_gguf_open_bytes (data, size, &err);
  if (!g) {
    /* every failure must say why */
    if (!err || !err->message[0])
      __builtin_trap ();
    g_error_free (err);
    return 0;
  }
  for (i = 0; i < npu_gguf_n_kv (g); i++) {
    const gchar *key = npu_gguf_get_key (g, i);
    guint32 u32;
    gint64 i64;
    gfloat f;
    gboolean b;

    if (npu_gguf_find (g, key) != npu_gguf_get_value (g, i))
      __builtin_trap ();
    walk_value (npu_gguf_get_value (g, i));
    npu_gguf_get_u32 (g, key, &u32, NULL);
    npu_gguf_get_i64 (g, key, &i64, NULL);
    npu_gguf_get_f32 (g, key, &f, NULL);
    npu_gguf_get_bool (g, key, &b, NULL);
    npu_gguf_get_string (g, key, NULL, NULL);
    npu_gguf_get_array (g, key, -1, NULL);
  }
  for (i = 0; i < npu_gguf_n_tensors (g); i++) {
    const NpuGgufTensor *t = npu_gguf_get_tensor (g, i);

    if (npu_gguf_find_tensor (g, t->name) != t)
      __builtin_trap ();
    if (t->offset + t->n_bytes > size || t->data != data + t->offset)
      __builtin_trap ();
    for (k = 0; k < t->n_bytes; k++)
      sink += t->data[k];
    sink += strlen (npu_ggml_type_name (t->type));
  }
  npu_gguf_free (g);
  return 0;
}
