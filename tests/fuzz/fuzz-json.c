/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: libFuzzer target for the JSON reader of Hugging Face model
 * directories (config.json, tokenizer.json, the index)
 *
 * Parses the input and walks the whole tree: every member found again
 * by its name (the first of that name), every string valid UTF-8 of the
 * length it claims, every number read both ways.
 */
#include <core/formats/npujson.h>

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static volatile guint64 sink;

static void
walk (const NpuJson * v, guint depth)
{
  guint i, n = npu_json_size (v);
  gdouble d;
  gint64 k;
  gboolean b;

  if (depth > NPU_JSON_MAX_DEPTH)
    __builtin_trap ();
  switch (npu_json_type (v)) {
    case NPU_JSON_STRING:
      if (!g_utf8_validate (npu_json_string (v), -1, NULL))
        __builtin_trap ();
      sink += strlen (npu_json_string (v));
      break;
    case NPU_JSON_NUMBER:
      if (!npu_json_number (v, &d))
        __builtin_trap ();
      if (npu_json_int (v, &k))
        sink += (guint64) k;
      break;
    case NPU_JSON_BOOL:
      if (!npu_json_bool (v, &b))
        __builtin_trap ();
      break;
    case NPU_JSON_OBJECT:
      for (i = 0; i < n; i++) {
        const NpuJson *first = npu_json_member (v, npu_json_key_at (v, i));

        if (!first || !g_utf8_validate (npu_json_key_at (v, i), -1, NULL))
          __builtin_trap ();
        /* the first member of that name, at i or before */
        if (first != npu_json_at (v, i) && npu_json_member (v,
                npu_json_key_at (v, i)) != first)
          __builtin_trap ();
      }
      /* fall through */
    case NPU_JSON_ARRAY:
      for (i = 0; i < n; i++)
        walk (npu_json_at (v, i), depth + 1);
      break;
    default:
      break;
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  GError *err = NULL;
  NpuJson *root = npu_json_parse ((const gchar *) data, size, "fuzz", &err);

  if (!root) {
    if (!err || !err->message[0])
      __builtin_trap ();
    g_error_free (err);
    return 0;
  }
  walk (root, 0);
  npu_json_free (root);
  return 0;
}
