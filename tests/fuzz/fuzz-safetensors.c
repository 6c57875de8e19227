/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: libFuzzer target for the safetensors reader
 *
 * Opens the input in place and touches every tensor byte, name and
 * metadata entry, and tries the MXFP4 pairing on every name.
 */
#include <core/formats/npusafetensors.h>

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static volatile guint64 sink;

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  GError *err = NULL;
  NpuSafetensors *st;
  guint i;
  gsize k;

  st = npu_safetensors_open_bytes (data, size, &err);
  if (!st) {
    if (!err || !err->message[0])
      __builtin_trap ();
    g_error_free (err);
    return 0;
  }
  for (i = 0; i < npu_safetensors_n_metadata (st); i++) {
    const gchar *key = npu_safetensors_get_metadata_key (st, i);
    const gchar *val = npu_safetensors_get_metadata (st, key);

    if (!val || !g_utf8_validate (val, -1, NULL))
      __builtin_trap ();
    sink += strlen (key) + strlen (val);
  }
  for (i = 0; i < npu_safetensors_n_tensors (st); i++) {
    const NpuSafetensorsTensor *t = npu_safetensors_get_tensor (st, i);
    const NpuSafetensorsTensor *b = NULL, *s = NULL;
    gchar *base;

    if (npu_safetensors_find_tensor (st, t->name) != t)
      __builtin_trap ();
    if (t->offset + t->n_bytes > size || t->data != data + t->offset)
      __builtin_trap ();
    if (t->n_bytes != t->n_elements * npu_safetensors_dtype_size (t->dtype))
      __builtin_trap ();
    for (k = 0; k < t->n_bytes; k++)
      sink += t->data[k];
    base = g_strdup (t->name);
    if (g_str_has_suffix (base, ".blocks") || g_str_has_suffix (base,
            ".scales"))
      base[strlen (base) - 7] = '\0';
    if (npu_safetensors_find_mxfp4 (st, base, &b, &s, NULL))
      sink += b->n_bytes + s->n_bytes;
    g_free (base);
  }
  npu_safetensors_free (st);
  return 0;
}
