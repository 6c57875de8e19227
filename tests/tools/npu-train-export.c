/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a trained model's safetensors to GGUF (llama.cpp's layouts)
 *
 *   npu-train-export model.safetensors -o model.gguf
 *
 * tests/train/train.py writes each model as safetensors whose tensors
 * already carry their GGUF names (PyTorch's row-major shape is ggml's ne
 * reversed, so the bytes need no transposing) and whose "__metadata__"
 * holds the GGUF key/value pairs as "gguf:<type>:<key>" = text:
 *
 *   str, u32, i32, f32, bool ("true"/"false")   one value
 *   strv                                        items separated by "\n"
 *   strve                                       the same, each item with C
 *                                               escapes (g_strcompress: a
 *                                               backslash and n for a
 *                                               newline), so an item can
 *                                               hold a newline
 *   f32v, i32v                                  numbers separated by spaces
 *
 * Tensors must be F32.  Every 2-D "*.weight" whose rows are whole MXFP4
 * blocks (ne[0] a multiple of 32) is written as MXFP4 by the core's codec,
 * except the encoders' position tables (v.position_embd.weight,
 * a.position_embd.weight), which the encoders read as F32 (they refuse
 * them in MXFP4); everything else (norms, biases, the convolution kernels
 * of the patch embedding and of the audio encoder's two conv1d) stays F32.  The training script rounds the same matrices to
 * MXFP4 in its forward pass, so the file holds the weights it was trained
 * with.
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include <core/formats/npuggufwriter.h>
#include <core/formats/npumxfp4.h>
#include <core/formats/npusafetensors.h>

static gboolean
is_mxfp4 (const NpuSafetensorsTensor * t)
{
  return t->n_dims == 2 && g_str_has_suffix (t->name, ".weight")
      && t->shape[1] % NPU_MXFP4_BLOCK_SIZE == 0
      && strcmp (t->name, "v.position_embd.weight") != 0
      && strcmp (t->name, "a.position_embd.weight") != 0;
}

static gboolean
add_numbers (NpuGgufWriter * w, const gchar * key, const gchar * text,
    gboolean is_float, GError ** error)
{
  gchar **items = g_strsplit_set (text, " ", -1);
  guint n = 0, i;
  gpointer data = g_new (guint32, g_strv_length (items) + 1);
  gboolean ok;

  for (i = 0; items[i]; i++) {
    gchar *end;

    if (!*items[i])
      continue;
    if (is_float)
      ((gfloat *) data)[n] = g_ascii_strtod (items[i], &end);
    else
      ((gint32 *) data)[n] = g_ascii_strtoll (items[i], &end, 10);
    if (*end) {
      g_set_error (error, NPU_GGUF_WRITER_ERROR,
          NPU_GGUF_WRITER_ERROR_INVALID, "%s: \"%s\" is not a number", key,
          items[i]);
      g_strfreev (items);
      g_free (data);
      return FALSE;
    }
    n++;
  }
  ok = npu_gguf_writer_add_array (w, key, is_float ? NPU_GGUF_TYPE_FLOAT32 :
      NPU_GGUF_TYPE_INT32, data, n, error);
  g_strfreev (items);
  g_free (data);
  return ok;
}

static gboolean
add_kv (NpuGgufWriter * w, const gchar * spec, const gchar * value,
    GError ** error)
{
  const gchar *type = spec + strlen ("gguf:");
  const gchar *key = strchr (type, ':');
  gchar *t;
  gboolean ok;

  if (!key) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "metadata \"%s\" is not gguf:<type>:<key>", spec);
    return FALSE;
  }
  t = g_strndup (type, key - type);
  key++;
  if (!strcmp (t, "str"))
    ok = npu_gguf_writer_add_string (w, key, value, -1, error);
  else if (!strcmp (t, "u32"))
    ok = npu_gguf_writer_add_u32 (w, key, g_ascii_strtoull (value, NULL, 10),
        error);
  else if (!strcmp (t, "i32"))
    ok = npu_gguf_writer_add_i32 (w, key, g_ascii_strtoll (value, NULL, 10),
        error);
  else if (!strcmp (t, "f32"))
    ok = npu_gguf_writer_add_f32 (w, key, g_ascii_strtod (value, NULL), error);
  else if (!strcmp (t, "bool"))
    ok = npu_gguf_writer_add_bool (w, key, !strcmp (value, "true"), error);
  else if (!strcmp (t, "strv") || !strcmp (t, "strve")) {
    gchar **items = g_strsplit (value, "\n", -1);
    guint i;

    for (i = 0; t[4] == 'e' && items[i]; i++) {
      gchar *plain = g_strcompress (items[i]);

      g_free (items[i]);
      items[i] = plain;
    }
    ok = npu_gguf_writer_add_string_array (w, key,
        (const gchar * const *) items, -1, error);
    g_strfreev (items);
  } else if (!strcmp (t, "f32v") || !strcmp (t, "i32v"))
    ok = add_numbers (w, key, value, t[0] == 'f', error);
  else {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "metadata \"%s\": unknown type \"%s\"", spec, t);
    ok = FALSE;
  }
  g_free (t);
  return ok;
}

static gboolean
add_tensor (NpuGgufWriter * w, const NpuSafetensorsTensor * t,
    GPtrArray * keep, GError ** error)
{
  guint64 ne[4];
  gfloat *f;
  guint i;

  if (t->dtype != NPU_SAFETENSORS_DTYPE_F32 || t->n_dims < 1 || t->n_dims > 4) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "tensor %s: only F32 tensors of 1 to 4 dimensions are exported",
        t->name);
    return FALSE;
  }
  for (i = 0; i < t->n_dims; i++)
    ne[i] = t->shape[t->n_dims - 1 - i];
  /* safetensors data need not be aligned */
  f = g_memdup2 (t->data, t->n_bytes);
  g_ptr_array_add (keep, f);
  if (is_mxfp4 (t)) {
    NpuBlockMxfp4 *q = g_new (NpuBlockMxfp4,
        t->n_elements / NPU_MXFP4_BLOCK_SIZE);

    g_ptr_array_add (keep, q);
    npu_mxfp4_quantize_f32 (f, q, t->n_elements);
    return npu_gguf_writer_add_tensor (w, t->name, t->n_dims, ne,
        NPU_GGML_TYPE_MXFP4, q, error);
  }
  return npu_gguf_writer_add_tensor (w, t->name, t->n_dims, ne,
      NPU_GGML_TYPE_F32, f, error);
}

int
main (int argc, char **argv)
{
  gchar *output = NULL;
  GOptionEntry entries[] = {
    {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "GGUF to write",
        "FILE"},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("model.safetensors");
  GPtrArray *keep = g_ptr_array_new_with_free_func (g_free);
  NpuSafetensors *st = NULL;
  NpuGgufWriter *w = NULL;
  GError *error = NULL;
  guint i;
  int ret = 1;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 2
      || !output) {
    g_printerr ("usage: npu-train-export model.safetensors -o model.gguf%s%s\n",
        error ? ": " : "", error ? error->message : "");
    g_clear_error (&error);
    g_option_context_free (ctx);
    g_ptr_array_free (keep, TRUE);
    return 2;
  }
  g_option_context_free (ctx);
  st = npu_safetensors_open (argv[1], &error);
  if (!st)
    goto out;
  w = npu_gguf_writer_new ();
  for (i = 0; i < npu_safetensors_n_metadata (st); i++) {
    const gchar *k = npu_safetensors_get_metadata_key (st, i);

    if (g_str_has_prefix (k, "gguf:")
        && !add_kv (w, k, npu_safetensors_get_metadata (st, k), &error))
      goto out;
  }
  for (i = 0; i < npu_safetensors_n_tensors (st); i++)
    if (!add_tensor (w, npu_safetensors_get_tensor (st, i), keep, &error))
      goto out;
  if (!npu_gguf_writer_write_file (w, output, &error))
    goto out;
  g_print ("%s: %u keys, %u tensors, %" G_GUINT64_FORMAT " bytes\n", output,
      npu_gguf_writer_n_kv (w), npu_gguf_writer_n_tensors (w),
      npu_gguf_writer_get_file_size (w));
  ret = 0;

out:
  if (error)
    g_printerr ("npu-train-export: %s\n", error->message);
  g_clear_error (&error);
  if (w)
    npu_gguf_writer_free (w);
  if (st)
    npu_safetensors_free (st);
  g_ptr_array_free (keep, TRUE);
  g_free (output);
  return ret;
}
