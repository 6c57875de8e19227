/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GGUF writer and random model generator
 *
 * The writer is checked through the project's reader (npugguf): every
 * metadata type, nested arrays and every tensor type come back byte-exact,
 * at the offsets and alignment GGUF demands.  Generated models are checked
 * for what a loader relies on: llama.cpp's keys and tensor names, shapes
 * consistent with the hyper-parameters, tokenizer arrays consistent with
 * each other and with token_embd, every BPE merge made of tokens that
 * exist, and the same bytes for the same seed (a checksum pins them
 * across machines).
 */
#include <core/formats/npugguf.h>
#include <core/formats/npuggufwriter.h>
#include <core/formats/npumxfp4.h>
#include <core/formats/npuquants.h>
#include "tests/tools/npumodelgen.h"
#include "tests/tools/npumodelgen-quants.h"

#include <math.h>

#include <glib/gstdio.h>
#include <string.h>

/* SHA-256 of tiny models with seed 1.  They change only when the
 * generator's output is changed on purpose (update docs/models.md too);
 * a mismatch on one machine alone means the bytes depend on the machine. */
#define LLAMA_F32_SHA256 \
    "9e1ab569c9c849c678c5a816d0984922b536ecb38680008cdd3e86be14faf753"
#define QWEN2_MXFP4_SHA256 \
    "7afa4f28586315e13d64fdbb5ba45034ff57e5a8ad60e77b8f905a6ac0a78724"
#define MMPROJ_Q8_0_SHA256 \
    "88cab0e045e5a6cccea04cd3aae9c2ee7b22bc2d9e006a5d84cc44cdc6e3f0a1"

static gchar *tmpdir;

static gchar *
tmp_path (const gchar * name)
{
  return g_build_filename (tmpdir, name, NULL);
}

/* ------------------------------------------------------------------------ */
/* Writer round trip                                                         */

static const guint8 *
value_raw (const NpuGgufValue * arr)
{
  return arr->v.arr.data;
}

static void
check_string (const NpuGgufValue * v, const gchar * s, gsize len)
{
  g_assert_cmpint (v->type, ==, NPU_GGUF_TYPE_STRING);
  g_assert_cmpuint (v->v.str.len, ==, len);
  g_assert_true (memcmp (v->v.str.data, s, len) == 0);
}

static gboolean
fill_pattern (const gchar * name, guint8 * dst, guint64 offset,
    gsize n_bytes, gpointer user_data, GError ** error)
{
  gsize i;

  for (i = 0; i < n_bytes; i++)
    dst[i] = (guint8) ((offset + i) * 7 + 3);
  return TRUE;
}

static void
test_writer_roundtrip (void)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  GError *err = NULL;
  const guint8 u8s[] = { 0, 1, 255 };
  const gint8 i8s[] = { -128, 0, 127 };
  const guint16 u16s[] = { 0, 65535 };
  const gint16 i16s[] = { -32768, 32767 };
  const guint32 u32s[] = { 0, 1, G_MAXUINT32 };
  const gint32 i32s[] = { G_MININT32, -1, G_MAXINT32 };
  const guint64 u64s[] = { 0, G_MAXUINT64 };
  const gint64 i64s[] = { G_MININT64, G_MAXINT64 };
  const gfloat f32s[] = { 0.0f, -1.5f, 3.4e38f, 1e-45f };
  const gdouble f64s[] = { -0.0, 1e308, 2.5 };
  const guint8 bools[] = { 1, 0, 1 };
  const gchar *const strs[] = { "", "a", "\xe2\x96\x81the", "<0xFF>", NULL };
  NpuGgufWriterValue *outer, *inner, *mid;
  guint8 t_f32[5 * 3 * 4], t_f16[8 * 2 * 2], t_bf16[4 * 2 * 2];
  guint8 t_q8[2 * 34 * 3], t_mx[3 * 17 * 2 * 2];
  guint64 ne_f32[] = { 5, 3 }, ne_f16[] = { 8, 2 }, ne_bf16[] = { 4, 1, 2 };
  guint64 ne_q8[] = { 64, 3 }, ne_mx[] = { 96, 2, 2, 1 }, ne_cb[] = { 32, 
    100000 };
  GBytes *bytes;
  const guint8 *data;
  gsize size, i;
  NpuGguf *g;
  const NpuGgufValue *v;
  NpuGgufValue e;
  gchar *path, *contents;
  gsize len;

  for (i = 0; i < sizeof (t_f32); i++)
    t_f32[i] = i * 13 + 1;
  for (i = 0; i < sizeof (t_f16); i++)
    t_f16[i] = i * 17 + 2;
  for (i = 0; i < sizeof (t_bf16); i++)
    t_bf16[i] = i * 19 + 3;
  for (i = 0; i < sizeof (t_q8); i++)
    t_q8[i] = i * 23 + 4;
  for (i = 0; i < sizeof (t_mx); i++)
    t_mx[i] = i * 29 + 5;

  g_assert_true (npu_gguf_writer_add_u8 (w, "t.u8", 255, &err));
  g_assert_true (npu_gguf_writer_add_i8 (w, "t.i8", -128, &err));
  g_assert_true (npu_gguf_writer_add_u16 (w, "t.u16", 65535, &err));
  g_assert_true (npu_gguf_writer_add_i16 (w, "t.i16", -32768, &err));
  g_assert_true (npu_gguf_writer_add_u32 (w, "t.u32", 0xdeadbeef, &err));
  g_assert_true (npu_gguf_writer_add_i32 (w, "t.i32", G_MININT32, &err));
  g_assert_true (npu_gguf_writer_add_u64 (w, "t.u64", G_MAXUINT64, &err));
  g_assert_true (npu_gguf_writer_add_i64 (w, "t.i64", G_MININT64, &err));
  g_assert_true (npu_gguf_writer_add_f32 (w, "t.f32", -0.1f, &err));
  g_assert_true (npu_gguf_writer_add_f64 (w, "t.f64", 1.0 / 3.0, &err));
  g_assert_true (npu_gguf_writer_add_bool (w, "t.true", TRUE, &err));
  g_assert_true (npu_gguf_writer_add_bool (w, "t.false", FALSE, &err));
  g_assert_true (npu_gguf_writer_add_string (w, "t.str", "h\xc3\xa9llo", -1,
          &err));
  g_assert_true (npu_gguf_writer_add_string (w, "t.empty", "", -1, &err));
  g_assert_true (npu_gguf_writer_add_string (w, "t.nul", "a\0b", 3, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.u8", NPU_GGUF_TYPE_UINT8,
          u8s, 3, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.i8", NPU_GGUF_TYPE_INT8,
          i8s, 3, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.u16", NPU_GGUF_TYPE_UINT16,
          u16s, 2, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.i16", NPU_GGUF_TYPE_INT16,
          i16s, 2, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.u32", NPU_GGUF_TYPE_UINT32,
          u32s, 3, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.i32", NPU_GGUF_TYPE_INT32,
          i32s, 3, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.u64", NPU_GGUF_TYPE_UINT64,
          u64s, 2, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.i64", NPU_GGUF_TYPE_INT64,
          i64s, 2, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.f32",
          NPU_GGUF_TYPE_FLOAT32, f32s, 4, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.f64",
          NPU_GGUF_TYPE_FLOAT64, f64s, 3, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.bool", NPU_GGUF_TYPE_BOOL,
          bools, 3, &err));
  g_assert_true (npu_gguf_writer_add_array (w, "a.empty",
          NPU_GGUF_TYPE_FLOAT32, NULL, 0, &err));
  g_assert_true (npu_gguf_writer_add_string_array (w, "a.str", strs, -1,
          &err));

  /* [[1, 2, 3], ["", "a", ...], [[-1.5, ...]]] */
  outer = npu_gguf_writer_value_new_array_of_arrays ();
  inner = npu_gguf_writer_value_new_array (NPU_GGUF_TYPE_UINT32, u32s, 3,
      &err);
  g_assert_true (npu_gguf_writer_value_append (outer, inner, &err));
  g_assert_true (npu_gguf_writer_value_append (outer,
          npu_gguf_writer_value_new_string_array (strs, 4), &err));
  mid = npu_gguf_writer_value_new_array_of_arrays ();
  g_assert_true (npu_gguf_writer_value_append (mid,
          npu_gguf_writer_value_new_array (NPU_GGUF_TYPE_FLOAT32, f32s, 4,
              &err), &err));
  g_assert_true (npu_gguf_writer_value_append (outer, mid, &err));
  g_assert_true (npu_gguf_writer_add_value (w, "a.nested", outer, &err));
  g_assert_no_error (err);

  /* the key can be set twice; the value is patched in place */
  g_assert_true (npu_gguf_writer_set_alignment (w, 256, &err));
  g_assert_true (npu_gguf_writer_set_alignment (w, 64, &err));
  g_assert_cmpuint (npu_gguf_writer_get_alignment (w), ==, 64);

  g_assert_true (npu_gguf_writer_add_tensor (w, "f32", 2, ne_f32,
          NPU_GGML_TYPE_F32, t_f32, &err));
  g_assert_true (npu_gguf_writer_add_tensor (w, "f16", 2, ne_f16,
          NPU_GGML_TYPE_F16, t_f16, &err));
  g_assert_true (npu_gguf_writer_add_tensor (w, "bf16", 3, ne_bf16,
          NPU_GGML_TYPE_BF16, t_bf16, &err));
  g_assert_true (npu_gguf_writer_add_tensor (w, "q8_0", 2, ne_q8,
          NPU_GGML_TYPE_Q8_0, t_q8, &err));
  g_assert_true (npu_gguf_writer_add_tensor (w, "mxfp4", 4, ne_mx,
          NPU_GGML_TYPE_MXFP4, t_mx, &err));
  /* 6.4 MB through the callback: more than one chunk */
  g_assert_true (npu_gguf_writer_add_tensor_func (w, "callback", 2, ne_cb,
          NPU_GGML_TYPE_F16, fill_pattern, NULL, NULL, &err));
  g_assert_no_error (err);

  bytes = npu_gguf_writer_write_bytes (w, &err);
  g_assert_no_error (err);
  data = g_bytes_get_data (bytes, &size);
  g_assert_cmpuint (size, ==, npu_gguf_writer_get_file_size (w));
  g_assert_cmpuint (size % 64, ==, 0);

  g = npu_gguf_open_bytes (data, size, &err);
  g_assert_no_error (err);
  g_assert_cmpuint (npu_gguf_get_version (g), ==, 3);
  g_assert_cmpuint (npu_gguf_n_kv (g), ==, npu_gguf_writer_n_kv (w));
  g_assert_cmpuint (npu_gguf_get_alignment (g), ==, 64);
  g_assert_cmpuint (npu_gguf_get_data_offset (g) % 64, ==, 0);

#define SCALAR(key, t, member, val) G_STMT_START {      \
    v = npu_gguf_find (g, key);                         \
    g_assert_nonnull (v);                               \
    g_assert_cmpint (v->type, ==, t);                   \
    g_assert_true (v->v.member == (val));               \
  } G_STMT_END
  SCALAR ("t.u8", NPU_GGUF_TYPE_UINT8, u, 255);
  SCALAR ("t.i8", NPU_GGUF_TYPE_INT8, i, -128);
  SCALAR ("t.u16", NPU_GGUF_TYPE_UINT16, u, 65535);
  SCALAR ("t.i16", NPU_GGUF_TYPE_INT16, i, -32768);
  SCALAR ("t.u32", NPU_GGUF_TYPE_UINT32, u, 0xdeadbeef);
  SCALAR ("t.i32", NPU_GGUF_TYPE_INT32, i, G_MININT32);
  SCALAR ("t.u64", NPU_GGUF_TYPE_UINT64, u, G_MAXUINT64);
  SCALAR ("t.i64", NPU_GGUF_TYPE_INT64, i, G_MININT64);
  SCALAR ("t.f32", NPU_GGUF_TYPE_FLOAT32, f, (gdouble) - 0.1f);
  SCALAR ("t.f64", NPU_GGUF_TYPE_FLOAT64, f, 1.0 / 3.0);
  SCALAR ("t.true", NPU_GGUF_TYPE_BOOL, b, TRUE);
  SCALAR ("t.false", NPU_GGUF_TYPE_BOOL, b, FALSE);
  SCALAR ("general.alignment", NPU_GGUF_TYPE_UINT32, u, 64);
#undef SCALAR
  check_string (npu_gguf_find (g, "t.str"), "h\xc3\xa9llo", 6);
  check_string (npu_gguf_find (g, "t.empty"), "", 0);
  check_string (npu_gguf_find (g, "t.nul"), "a\0b", 3);

  /* fixed-size arrays: the raw bytes are the host values (little-endian
   * host) */
#define ARRAY(key, t, src, n) G_STMT_START {                    \
    v = npu_gguf_get_array (g, key, t, &err);                   \
    g_assert_no_error (err);                                    \
    g_assert_cmpuint (v->v.arr.count, ==, n);                   \
    g_assert_cmpuint (v->v.arr.size, ==, sizeof (src));         \
    g_assert_true (memcmp (value_raw (v), src, sizeof (src)) == 0); \
  } G_STMT_END
  ARRAY ("a.u8", NPU_GGUF_TYPE_UINT8, u8s, 3);
  ARRAY ("a.i8", NPU_GGUF_TYPE_INT8, i8s, 3);
  ARRAY ("a.u16", NPU_GGUF_TYPE_UINT16, u16s, 2);
  ARRAY ("a.i16", NPU_GGUF_TYPE_INT16, i16s, 2);
  ARRAY ("a.u32", NPU_GGUF_TYPE_UINT32, u32s, 3);
  ARRAY ("a.i32", NPU_GGUF_TYPE_INT32, i32s, 3);
  ARRAY ("a.u64", NPU_GGUF_TYPE_UINT64, u64s, 2);
  ARRAY ("a.i64", NPU_GGUF_TYPE_INT64, i64s, 2);
  ARRAY ("a.f32", NPU_GGUF_TYPE_FLOAT32, f32s, 4);
  ARRAY ("a.f64", NPU_GGUF_TYPE_FLOAT64, f64s, 3);
  ARRAY ("a.bool", NPU_GGUF_TYPE_BOOL, bools, 3);
#undef ARRAY
  v = npu_gguf_get_array (g, "a.empty", NPU_GGUF_TYPE_FLOAT32, &err);
  g_assert_no_error (err);
  g_assert_cmpuint (v->v.arr.count, ==, 0);
  v = npu_gguf_get_array (g, "a.str", NPU_GGUF_TYPE_STRING, &err);
  g_assert_no_error (err);
  g_assert_cmpuint (v->v.arr.count, ==, 4);
  for (i = 0; i < 4; i++) {
    const gchar *s = npu_gguf_array_get_string (v, i, &len);
    g_assert_cmpuint (len, ==, strlen (strs[i]));
    g_assert_true (memcmp (s, strs[i], len) == 0);
  }

  v = npu_gguf_get_array (g, "a.nested", NPU_GGUF_TYPE_ARRAY, &err);
  g_assert_no_error (err);
  g_assert_cmpuint (v->v.arr.count, ==, 3);
  g_assert_true (npu_gguf_array_get (v, 0, &e));
  g_assert_cmpint (e.type, ==, NPU_GGUF_TYPE_ARRAY);
  g_assert_cmpint (e.v.arr.type, ==, NPU_GGUF_TYPE_UINT32);
  g_assert_true (memcmp (e.v.arr.data, u32s, sizeof (u32s)) == 0);
  g_assert_true (npu_gguf_array_get (v, 1, &e));
  g_assert_cmpint (e.v.arr.type, ==, NPU_GGUF_TYPE_STRING);
  g_assert_cmpuint (e.v.arr.count, ==, 4);
  {
    const gchar *s = npu_gguf_array_get_string (&e, 2, &len);
    g_assert_cmpuint (len, ==, strlen (strs[2]));
    g_assert_true (memcmp (s, strs[2], len) == 0);
  }
  g_assert_true (npu_gguf_array_get (v, 2, &e));
  g_assert_cmpint (e.v.arr.type, ==, NPU_GGUF_TYPE_ARRAY);
  g_assert_cmpuint (e.v.arr.count, ==, 1);
  {
    NpuGgufValue e2;
    g_assert_true (npu_gguf_array_get (&e, 0, &e2));
    g_assert_cmpint (e2.v.arr.type, ==, NPU_GGUF_TYPE_FLOAT32);
    g_assert_true (memcmp (e2.v.arr.data, f32s, sizeof (f32s)) == 0);
  }

  /* tensors: shapes, types, aligned offsets, exact bytes */
  {
    const struct
    {
      const gchar *name;
      guint n_dims;
      const guint64 *ne;
      guint32 type;
      const guint8 *data;
      gsize n;
    } exp[] = {
      {"f32", 2, ne_f32, NPU_GGML_TYPE_F32, t_f32, sizeof (t_f32)},
      {"f16", 2, ne_f16, NPU_GGML_TYPE_F16, t_f16, sizeof (t_f16)},
      {"bf16", 3, ne_bf16, NPU_GGML_TYPE_BF16, t_bf16, sizeof (t_bf16)},
      {"q8_0", 2, ne_q8, NPU_GGML_TYPE_Q8_0, t_q8, sizeof (t_q8)},
      {"mxfp4", 4, ne_mx, NPU_GGML_TYPE_MXFP4, t_mx, sizeof (t_mx)},
    };
    const NpuGgufTensor *t;
    guint k, d;

    g_assert_cmpuint (npu_gguf_n_tensors (g), ==, 6);
    for (k = 0; k < G_N_ELEMENTS (exp); k++) {
      t = npu_gguf_get_tensor (g, k);
      g_assert_cmpstr (t->name, ==, exp[k].name);
      g_assert_cmpuint (t->n_dims, ==, exp[k].n_dims);
      for (d = 0; d < t->n_dims; d++)
        g_assert_cmpuint (t->ne[d], ==, exp[k].ne[d]);
      g_assert_cmpuint (t->type, ==, exp[k].type);
      g_assert_cmpuint (t->n_bytes, ==, exp[k].n);
      g_assert_cmpuint (t->offset % 64, ==, 0);
      g_assert_true (memcmp (t->data, exp[k].data, exp[k].n) == 0);
    }
    t = npu_gguf_find_tensor (g, "callback");
    g_assert_nonnull (t);
    g_assert_cmpuint (t->n_bytes, ==, 32 * 100000 * 2);
    for (i = 0; i < t->n_bytes; i++)
      if (t->data[i] != (guint8) (i * 7 + 3))
        g_assert_not_reached ();
  }
  npu_gguf_free (g);

  /* the file is the same bytes */
  path = tmp_path ("roundtrip.gguf");
  g_assert_true (npu_gguf_writer_write_file (w, path, &err));
  g_assert_no_error (err);
  g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
  g_assert_cmpuint (len, ==, size);
  g_assert_true (memcmp (contents, data, size) == 0);
  g_free (contents);
  g_unlink (path);
  g_free (path);

  g_bytes_unref (bytes);
  npu_gguf_writer_free (w);
}

static gboolean
fill_fail (const gchar * name, guint8 * dst, guint64 offset, gsize n_bytes,
    gpointer user_data, GError ** error)
{
  if (offset > 0) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED, "no more data");
    return FALSE;
  }
  memset (dst, 0, n_bytes);
  return TRUE;
}

static void
count_notify (gpointer p)
{
  (*(gint *) p)++;
}

static void
test_writer_errors (void)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  GError *err = NULL;
  guint64 ne[] = { 33, 2 }, big[] = { 32, 1000000 };
  guint8 data[4096] = { 0 };
  gchar *path, *name;
  gint notified = 0;
  GDir *dir;

  g_assert_true (npu_gguf_writer_add_u32 (w, "k", 1, &err));
  g_assert_false (npu_gguf_writer_add_string (w, "k", "x", -1, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_assert_nonnull (strstr (err->message, "'k'"));
  g_clear_error (&err);
  g_assert_false (npu_gguf_writer_add_u32 (w, "", 1, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_clear_error (&err);
  g_assert_false (npu_gguf_writer_add_u64 (w, "general.alignment", 32, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_clear_error (&err);
  g_assert_false (npu_gguf_writer_set_alignment (w, 48, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_clear_error (&err);
  {
    const guint8 bad_bool[] = { 0, 2 };
    g_assert_false (npu_gguf_writer_add_array (w, "b", NPU_GGUF_TYPE_BOOL,
            bad_bool, 2, &err));
    g_assert_error (err, NPU_GGUF_WRITER_ERROR,
        NPU_GGUF_WRITER_ERROR_INVALID);
    g_clear_error (&err);
    g_assert_false (npu_gguf_writer_add_array (w, "s", NPU_GGUF_TYPE_STRING,
            bad_bool, 2, &err));
    g_assert_error (err, NPU_GGUF_WRITER_ERROR,
        NPU_GGUF_WRITER_ERROR_INVALID);
    g_clear_error (&err);
  }
  {
    NpuGgufWriterValue *flat = npu_gguf_writer_value_new_string_array (NULL,
        0);
    g_assert_false (npu_gguf_writer_value_append (flat,
            npu_gguf_writer_value_new_string_array (NULL, 0), &err));
    g_assert_error (err, NPU_GGUF_WRITER_ERROR,
        NPU_GGUF_WRITER_ERROR_INVALID);
    g_clear_error (&err);
    npu_gguf_writer_value_free (flat);
  }

  /* ne[0] = 33 is not a whole number of Q8_0 blocks */
  g_assert_false (npu_gguf_writer_add_tensor (w, "t", 2, ne,
          NPU_GGML_TYPE_Q8_0, data, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_assert_nonnull (strstr (err->message, "'t'"));
  g_clear_error (&err);
  g_assert_false (npu_gguf_writer_add_tensor (w, "t", 2, ne, 4, data, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_clear_error (&err);
  g_assert_false (npu_gguf_writer_add_tensor (w, "t", 5, ne,
          NPU_GGML_TYPE_F32, data, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_clear_error (&err);
  name = g_strnfill (64, 'x');
  g_assert_false (npu_gguf_writer_add_tensor (w, name, 2, ne,
          NPU_GGML_TYPE_F32, data, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_clear_error (&err);
  g_free (name);
  g_assert_true (npu_gguf_writer_add_tensor (w, "t", 2, ne,
          NPU_GGML_TYPE_F32, data, &err));
  g_assert_false (npu_gguf_writer_add_tensor (w, "t", 2, ne,
          NPU_GGML_TYPE_F32, data, &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID);
  g_clear_error (&err);
  /* a refused callback tensor still releases its user data */
  g_assert_false (npu_gguf_writer_add_tensor_func (w, "t", 2, ne,
          NPU_GGML_TYPE_F32, fill_fail, &notified, count_notify, &err));
  g_clear_error (&err);
  g_assert_cmpint (notified, ==, 1);

  /* a failing callback: the error names the tensor, no file is left */
  g_assert_true (npu_gguf_writer_add_tensor_func (w, "cb", 2, big,
          NPU_GGML_TYPE_F32, fill_fail, &notified, count_notify, &err));
  path = tmp_path ("fail.gguf");
  g_assert_false (npu_gguf_writer_write_file (w, path, &err));
  g_assert_error (err, G_FILE_ERROR, G_FILE_ERROR_FAILED);
  g_assert_nonnull (strstr (err->message, "'cb'"));
  g_clear_error (&err);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  dir = g_dir_open (tmpdir, 0, NULL);
  g_assert_null (g_dir_read_name (dir));
  g_dir_close (dir);
  /* unwritable place */
  g_assert_false (npu_gguf_writer_write_file (w, "/nonexistent-dir/x.gguf",
          &err));
  g_assert_error (err, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_IO);
  g_clear_error (&err);
  g_free (path);
  npu_gguf_writer_free (w);
  g_assert_cmpint (notified, ==, 2);
}

/* ------------------------------------------------------------------------ */
/* Generated models                                                          */

static guint32
get_u32 (NpuGguf * g, const gchar * key)
{
  GError *err = NULL;
  guint32 v = 0;

  if (!npu_gguf_get_u32 (g, key, &v, &err))
    g_error ("%s: %s", key, err->message);
  return v;
}

static const NpuGgufTensor *
tensor (NpuGguf * g, const gchar * name, guint n_dims, guint64 ne0,
    guint64 ne1)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (g, name);

  if (t == NULL)
    g_error ("no tensor %s", name);
  g_assert_cmpuint (t->n_dims, ==, n_dims);
  g_assert_cmpuint (t->ne[0], ==, ne0);
  if (n_dims > 1)
    g_assert_cmpuint (t->ne[1], ==, ne1);
  if (n_dims == 1)
    g_assert_cmpuint (t->type, ==, NPU_GGML_TYPE_F32);
  return t;
}

static gint64
token_id (const NpuGgufValue * toks, const gchar * s)
{
  guint64 i;
  gsize len, n = strlen (s);

  for (i = 0; i < toks->v.arr.count; i++) {
    const gchar *t = npu_gguf_array_get_string (toks, i, &len);
    if (len == n && memcmp (t, s, n) == 0)
      return i;
  }
  return -1;
}

static gint32
token_type (const NpuGgufValue * types, guint64 i)
{
  NpuGgufValue e;

  g_assert_true (npu_gguf_array_get (types, i, &e));
  return e.v.i;
}

static void
check_text_model (const gchar * path, const NpuTextModelParams * p)
{
  GError *err = NULL;
  NpuGguf *g = npu_gguf_open (path, &err);
  const gchar *arch = p->arch == NPU_MODEL_ARCH_LLAMA ? "llama" :
      p->arch == NPU_MODEL_ARCH_QWEN2 ? "qwen2" : "qwen3";
  gboolean qwen3 = p->arch == NPU_MODEL_ARCH_QWEN3;
  guint hd = qwen3 ? p->head_dim : p->dim / p->n_heads;
  guint kv = hd * p->n_kv_heads, qd = hd * p->n_heads, i;
  guint32 wt = p->wtype, et = wt == NPU_GGML_TYPE_MXFP4 && !p->all_mxfp4 ?
      NPU_GGML_TYPE_Q8_0 : wt;
  const NpuGgufValue *toks, *types, *scores;
  const NpuGgufTensor *t;
  gchar *key, *name;
  gsize len;
  guint64 n_tok;

  g_assert_no_error (err);
  g_assert_cmpstr (npu_gguf_get_string (g, "general.architecture", NULL,
          &err), ==, arch);
  g_assert_nonnull (npu_gguf_get_string (g, "general.name", NULL, &err));
  g_assert_cmpuint (get_u32 (g, "general.file_type"), ==,
      npu_model_gen_file_type (wt));
#define AK(suffix, val) G_STMT_START {                          \
    key = g_strconcat (arch, suffix, NULL);                     \
    g_assert_cmpuint (get_u32 (g, key), ==, val);               \
    g_free (key);                                               \
  } G_STMT_END
  AK (".context_length", p->ctx);
  AK (".embedding_length", p->dim);
  AK (".block_count", p->n_layers);
  AK (".feed_forward_length", p->ff);
  AK (".attention.head_count", p->n_heads);
  AK (".attention.head_count_kv", p->n_kv_heads);
  AK (".rope.dimension_count", hd);
  if (qwen3) {
    AK (".attention.key_length", hd);
    AK (".attention.value_length", hd);
  }
#undef AK
  key = g_strconcat (arch, ".attention.layer_norm_rms_epsilon", NULL);
  g_assert_cmpfloat (npu_gguf_get_f32_default (g, key, -1), >, 0);
  g_free (key);
  key = g_strconcat (arch, ".rope.freq_base", NULL);
  g_assert_cmpfloat (npu_gguf_get_f32_default (g, key, -1), >=, 10000);
  g_free (key);

  /* tokenizer */
  toks = npu_gguf_get_array (g, "tokenizer.ggml.tokens",
      NPU_GGUF_TYPE_STRING, &err);
  g_assert_no_error (err);
  n_tok = toks->v.arr.count;
  g_assert_cmpuint (n_tok, ==, p->vocab);
  types = npu_gguf_get_array (g, "tokenizer.ggml.token_type",
      NPU_GGUF_TYPE_INT32, &err);
  g_assert_no_error (err);
  g_assert_cmpuint (types->v.arr.count, ==, n_tok);
  {
    /* tokens are unique */
    GHashTable *seen = g_hash_table_new_full (g_str_hash, g_str_equal,
        g_free, NULL);
    for (i = 0; i < n_tok; i++) {
      const gchar *s = npu_gguf_array_get_string (toks, i, &len);
      gchar *c = g_strndup (s, len);
      g_assert_true (len > 0 && g_utf8_validate (c, -1, NULL));
      g_assert_false (g_hash_table_contains (seen, c));
      g_hash_table_add (seen, c);
    }
    g_hash_table_unref (seen);
  }
  for (i = 0; npu_model_gen_markers[i]; i++) {
    gint64 id = token_id (toks, npu_model_gen_markers[i]);
    g_assert_cmpint (id, >=, 0);
    g_assert_cmpint (token_type (types, id), ==, 3);
  }
  if (p->arch == NPU_MODEL_ARCH_LLAMA) {
    g_assert_cmpstr (npu_gguf_get_string (g, "tokenizer.ggml.model", NULL,
            &err), ==, "llama");
    scores = npu_gguf_get_array (g, "tokenizer.ggml.scores",
        NPU_GGUF_TYPE_FLOAT32, &err);
    g_assert_no_error (err);
    g_assert_cmpuint (scores->v.arr.count, ==, n_tok);
    g_assert_cmpint (token_id (toks, "<unk>"), ==, 0);
    g_assert_cmpint (token_id (toks, "<s>"), ==, 1);
    g_assert_cmpint (token_id (toks, "</s>"), ==, 2);
    g_assert_cmpint (token_type (types, 0), ==, 2);
    g_assert_cmpint (token_type (types, 1), ==, 3);
    g_assert_cmpint (token_type (types, 2), ==, 3);
    g_assert_cmpuint (get_u32 (g, "tokenizer.ggml.bos_token_id"), ==, 1);
    g_assert_cmpuint (get_u32 (g, "tokenizer.ggml.eos_token_id"), ==, 2);
    g_assert_cmpuint (get_u32 (g, "tokenizer.ggml.unknown_token_id"), ==, 0);
    g_assert_true (npu_gguf_get_bool_default (g,
            "tokenizer.ggml.add_bos_token", FALSE));
    for (i = 0; i < 256; i++) {
      gchar b[8];
      g_snprintf (b, sizeof (b), "<0x%02X>", i);
      g_assert_cmpint (token_id (toks, b), ==, 3 + i);
      g_assert_cmpint (token_type (types, 3 + i), ==, 6);
    }
    /* common words are single pieces; every piece of two or more
     * characters is the join of two shorter pieces (SentencePiece
     * merges by score, so it must be reachable) */
    g_assert_cmpint (token_id (toks, "\xe2\x96\x81the"), >, 258);
    g_assert_cmpint (token_id (toks, "\xe2\x96\x81image"), >, 258);
    for (i = 259; i < n_tok; i++) {
      const gchar *s = npu_gguf_array_get_string (toks, i, &len);
      glong n_chars;
      gchar *c;
      gboolean found = FALSE;
      const gchar *q;

      if (token_type (types, i) != 1)
        continue;
      c = g_strndup (s, len);
      n_chars = g_utf8_strlen (c, -1);
      for (q = g_utf8_next_char (c); n_chars > 1 && *q && !found;
          q = g_utf8_next_char (q)) {
        gchar *l = g_strndup (c, q - c);
        found = token_id (toks, l) >= 0 && token_id (toks, q) >= 0;
        g_free (l);
      }
      g_assert_true (n_chars == 1 || found);
      g_free (c);
    }
  } else {
    const NpuGgufValue *merges;
    GHashTable *vocab = g_hash_table_new_full (g_str_hash, g_str_equal,
        g_free, NULL);
    guint64 m;

    g_assert_cmpstr (npu_gguf_get_string (g, "tokenizer.ggml.model", NULL,
            &err), ==, "gpt2");
    g_assert_cmpstr (npu_gguf_get_string (g, "tokenizer.ggml.pre", NULL,
            &err), ==, "qwen2");
    g_assert_null (npu_gguf_find (g, "tokenizer.ggml.scores"));
    g_assert_cmpint (token_id (toks, "!"), ==, 0);
    g_assert_cmpint (token_id (toks, "\xc4\xa0"), ==, 220);     /* 'Ġ' */
    g_assert_cmpint (token_id (toks, "\xc4\x80"), ==, 188);     /* byte 0 */
    g_assert_cmpint (token_id (toks, "\xc4\xa0the"), >, 255);
    g_assert_cmpint (token_id (toks, "<|im_end|>"), ==,
        get_u32 (g, "tokenizer.ggml.eos_token_id"));
    g_assert_cmpint (token_id (toks, "<|endoftext|>"), ==,
        get_u32 (g, "tokenizer.ggml.bos_token_id"));
    g_assert_cmpint (token_type (types, token_id (toks, "<|im_start|>")), ==,
        3);
    g_assert_nonnull (strstr (npu_gguf_get_string (g,
                "tokenizer.chat_template", NULL, &err), "<|im_start|>"));
    /* Qwen3's, with its thinking switch; Qwen2's has none */
    g_assert_true (!strstr (npu_gguf_get_string (g,
                "tokenizer.chat_template", NULL, &err),
            "enable_thinking is false") == !qwen3);
    for (i = 0; i < n_tok; i++) {
      const gchar *s = npu_gguf_array_get_string (toks, i, &len);
      g_hash_table_add (vocab, g_strndup (s, len));
    }
    merges = npu_gguf_get_array (g, "tokenizer.ggml.merges",
        NPU_GGUF_TYPE_STRING, &err);
    g_assert_no_error (err);
    g_assert_cmpuint (merges->v.arr.count, >, 0);
    for (m = 0; m < merges->v.arr.count; m++) {
      const gchar *s = npu_gguf_array_get_string (merges, m, &len);
      gchar *c = g_strndup (s, len), *sp = strchr (c, ' '), *joined;

      g_assert_nonnull (sp);
      *sp = '\0';
      g_assert_null (strchr (sp + 1, ' '));
      joined = g_strconcat (c, sp + 1, NULL);
      g_assert_true (g_hash_table_contains (vocab, c));
      g_assert_true (g_hash_table_contains (vocab, sp + 1));
      g_assert_true (g_hash_table_contains (vocab, joined));
      g_free (joined);
      g_free (c);
    }
    /* and every non-byte, non-special token comes from a merge */
    g_assert_cmpuint (merges->v.arr.count, >=,
        n_tok - 256 - 3 - g_strv_length ((gchar **) npu_model_gen_markers));
    g_hash_table_unref (vocab);
  }

  /* tensors */
  t = tensor (g, "token_embd.weight", 2, p->dim, n_tok);
  g_assert_cmpuint (t->type, ==, et);
  tensor (g, "output_norm.weight", 1, p->dim, 0);
  if (p->tied) {
    g_assert_null (npu_gguf_find_tensor (g, "output.weight"));
  } else {
    t = tensor (g, "output.weight", 2, p->dim, n_tok);
    g_assert_cmpuint (t->type, ==, et);
  }
  for (i = 0; i < p->n_layers; i++) {
    const struct
    {
      const gchar *n;
      guint64 ne0, ne1;
    } mats[] = {
      {"attn_q.weight", p->dim, qd}, {"attn_k.weight", p->dim, kv},
      {"attn_v.weight", p->dim, kv}, {"attn_output.weight", qd, p->dim},
      {"ffn_gate.weight", p->dim, p->ff}, {"ffn_up.weight", p->dim, p->ff},
      {"ffn_down.weight", p->ff, p->dim},
    };
    guint k;

    for (k = 0; k < G_N_ELEMENTS (mats); k++) {
      name = g_strdup_printf ("blk.%u.%s", i, mats[k].n);
      t = tensor (g, name, 2, mats[k].ne0, mats[k].ne1);
      g_assert_cmpuint (t->type, ==, wt);
      if (wt == NPU_GGML_TYPE_MXFP4)
        g_assert_cmpuint (t->n_bytes * 32, ==, t->ne[0] * t->ne[1] * 17);
      g_free (name);
    }
    name = g_strdup_printf ("blk.%u.attn_norm.weight", i);
    tensor (g, name, 1, p->dim, 0);
    g_free (name);
    name = g_strdup_printf ("blk.%u.ffn_norm.weight", i);
    tensor (g, name, 1, p->dim, 0);
    g_free (name);
    name = g_strdup_printf ("blk.%u.attn_q.bias", i);
    if (p->arch == NPU_MODEL_ARCH_QWEN2) {
      tensor (g, name, 1, p->dim, 0);
      g_free (name);
      name = g_strdup_printf ("blk.%u.attn_k.bias", i);
      tensor (g, name, 1, kv, 0);
      g_free (name);
      name = g_strdup_printf ("blk.%u.attn_v.bias", i);
      tensor (g, name, 1, kv, 0);
    } else {
      g_assert_null (npu_gguf_find_tensor (g, name));
    }
    g_free (name);
    name = g_strdup_printf ("blk.%u.attn_q_norm.weight", i);
    if (qwen3) {
      tensor (g, name, 1, hd, 0);
      g_free (name);
      name = g_strdup_printf ("blk.%u.attn_k_norm.weight", i);
      tensor (g, name, 1, hd, 0);
    } else {
      g_assert_null (npu_gguf_find_tensor (g, name));
    }
    g_free (name);
  }
  /* F32 weights are finite and of the intended scale */
  if (wt == NPU_GGML_TYPE_F32) {
    const float *d;
    gdouble ss = 0;
    guint64 n, j;

    t = npu_gguf_find_tensor (g, "blk.0.attn_q.weight");
    d = (const float *) t->data;
    n = t->ne[0] * t->ne[1];
    for (j = 0; j < n; j++) {
      g_assert_true (d[j] == d[j] && d[j] < 10 && d[j] > -10);
      ss += (gdouble) d[j] * d[j];
    }
    /* std 1/sqrt(dim) within 10% */
    g_assert_cmpfloat (ss / n * p->dim, >, 0.8);
    g_assert_cmpfloat (ss / n * p->dim, <, 1.2);
    t = npu_gguf_find_tensor (g, "output_norm.weight");
    d = (const float *) t->data;
    for (j = 0; j < t->ne[0]; j++)
      g_assert_true (d[j] > 0.8f && d[j] < 1.2f);
  }
  npu_gguf_free (g);
}

static void
check_mmproj (const gchar * path, const NpuMmprojParams * p, guint text_dim)
{
  GError *err = NULL;
  NpuGguf *g = npu_gguf_open (path, &err);
  gboolean mlp = p->projector == NPU_MODEL_PROJECTOR_MLP;
  guint n_patches = (p->image_size / p->patch) * (p->image_size / p->patch);
  const NpuGgufTensor *t;
  const NpuGgufValue *v;
  guint i;

  g_assert_no_error (err);
  g_assert_cmpstr (npu_gguf_get_string (g, "general.architecture", NULL,
          &err), ==, "clip");
  g_assert_true (npu_gguf_get_bool_default (g, "clip.has_vision_encoder",
          FALSE));
  g_assert_true (npu_gguf_get_bool_default (g, "clip.use_gelu", FALSE));
  g_assert_cmpstr (npu_gguf_get_string (g, "clip.projector_type", NULL,
          &err), ==, mlp ? "mlp" : "idefics3");
  g_assert_cmpuint (get_u32 (g, "clip.vision.image_size"), ==, p->image_size);
  g_assert_cmpuint (get_u32 (g, "clip.vision.patch_size"), ==, p->patch);
  g_assert_cmpuint (get_u32 (g, "clip.vision.embedding_length"), ==, p->dim);
  g_assert_cmpuint (get_u32 (g, "clip.vision.feed_forward_length"), ==,
      p->ff);
  g_assert_cmpuint (get_u32 (g, "clip.vision.block_count"), ==, p->n_layers);
  g_assert_cmpuint (get_u32 (g, "clip.vision.attention.head_count"), ==,
      p->n_heads);
  g_assert_cmpuint (get_u32 (g, "clip.vision.projection_dim"), ==, text_dim);
  g_assert_cmpfloat (npu_gguf_get_f32_default (g,
          "clip.vision.attention.layer_norm_epsilon", -1), >, 0);
  v = npu_gguf_get_array (g, "clip.vision.image_mean", NPU_GGUF_TYPE_FLOAT32,
      &err);
  g_assert_no_error (err);
  g_assert_cmpuint (v->v.arr.count, ==, 3);
  v = npu_gguf_get_array (g, "clip.vision.image_std", NPU_GGUF_TYPE_FLOAT32,
      &err);
  g_assert_no_error (err);
  g_assert_cmpuint (v->v.arr.count, ==, 3);
  if (!mlp)
    g_assert_cmpuint (get_u32 (g, "clip.vision.projector.scale_factor"), ==,
        p->scale_factor);

  t = npu_gguf_find_tensor (g, "v.patch_embd.weight");
  g_assert_nonnull (t);
  g_assert_cmpuint (t->n_dims, ==, 4);
  g_assert_cmpuint (t->ne[0], ==, p->patch);
  g_assert_cmpuint (t->ne[1], ==, p->patch);
  g_assert_cmpuint (t->ne[2], ==, 3);
  g_assert_cmpuint (t->ne[3], ==, p->dim);
  tensor (g, "v.patch_embd.bias", 1, p->dim, 0);
  tensor (g, "v.position_embd.weight", 2, p->dim, n_patches);
  for (i = 0; i < p->n_layers; i++) {
    const struct
    {
      const gchar *n;
      guint64 ne0, ne1;
    } m[] = {
      {"attn_q", p->dim, p->dim}, {"attn_k", p->dim, p->dim},
      {"attn_v", p->dim, p->dim}, {"attn_out", p->dim, p->dim},
      {"ffn_up", p->dim, p->ff}, {"ffn_down", p->ff, p->dim},
    };
    guint k;
    gchar *name;

    for (k = 0; k < G_N_ELEMENTS (m); k++) {
      name = g_strdup_printf ("v.blk.%u.%s.weight", i, m[k].n);
      t = tensor (g, name, 2, m[k].ne0, m[k].ne1);
      g_assert_cmpuint (t->type, ==, p->wtype);
      g_free (name);
      name = g_strdup_printf ("v.blk.%u.%s.bias", i, m[k].n);
      tensor (g, name, 1, m[k].ne1, 0);
      g_free (name);
    }
    for (k = 1; k <= 2; k++) {
      name = g_strdup_printf ("v.blk.%u.ln%u.weight", i, k);
      tensor (g, name, 1, p->dim, 0);
      g_free (name);
      name = g_strdup_printf ("v.blk.%u.ln%u.bias", i, k);
      tensor (g, name, 1, p->dim, 0);
      g_free (name);
    }
  }
  tensor (g, "v.post_ln.weight", 1, p->dim, 0);
  tensor (g, "v.post_ln.bias", 1, p->dim, 0);
  if (mlp) {
    tensor (g, "mm.0.weight", 2, p->dim, text_dim);
    tensor (g, "mm.0.bias", 1, text_dim, 0);
    tensor (g, "mm.2.weight", 2, text_dim, text_dim);
    tensor (g, "mm.2.bias", 1, text_dim, 0);
  } else {
    tensor (g, "mm.model.fc.weight", 2,
        p->dim * p->scale_factor * p->scale_factor, text_dim);
    g_assert_null (npu_gguf_find_tensor (g, "mm.0.weight"));
  }
  npu_gguf_free (g);
}

static void
gen_and_check (NpuModelArch arch, const gchar * type, gboolean tied_default)
{
  NpuTextModelParams p;
  NpuMmprojParams mp;
  NpuModelGenStats st;
  GError *err = NULL;
  gchar *text = tmp_path ("text.gguf"), *mm = tmp_path ("mmproj.gguf");
  guint k;

  g_assert_true (npu_model_gen_text_preset (&p, arch, "tiny", &err));
  p.wtype = npu_model_gen_parse_type (type);
  if (!tied_default)
    p.tied = !p.tied;
  g_assert_true (npu_model_gen_write_text (&p, text, &st, &err));
  g_assert_no_error (err);
  g_assert_cmpuint (st.n_tokens, ==, p.vocab);
  check_text_model (text, &p);

  for (k = 0; k < 2; k++) {
    g_assert_true (npu_model_gen_mmproj_preset (&mp,
            k ? NPU_MODEL_PROJECTOR_IDEFICS3 : NPU_MODEL_PROJECTOR_MLP,
            "tiny", &err));
    mp.wtype = p.wtype;
    g_assert_true (npu_model_gen_write_mmproj (&mp, text, mm, &st, &err));
    g_assert_no_error (err);
    check_mmproj (mm, &mp, p.dim);
    g_unlink (mm);
  }
  g_unlink (text);
  g_free (text);
  g_free (mm);
}

static void
test_gen_llama (void)
{
  gen_and_check (NPU_MODEL_ARCH_LLAMA, "f32", TRUE);
  gen_and_check (NPU_MODEL_ARCH_LLAMA, "mxfp4", TRUE);
  gen_and_check (NPU_MODEL_ARCH_LLAMA, "q8_0", FALSE);
}

static void
test_gen_qwen2 (void)
{
  gen_and_check (NPU_MODEL_ARCH_QWEN2, "f32", TRUE);
  gen_and_check (NPU_MODEL_ARCH_QWEN2, "mxfp4", TRUE);
  gen_and_check (NPU_MODEL_ARCH_QWEN2, "f16", FALSE);
  gen_and_check (NPU_MODEL_ARCH_QWEN2, "bf16", TRUE);
}

static void
test_gen_qwen3 (void)
{
  NpuTextModelParams p;
  GError *err = NULL;

  /* the preset's heads are wider than dim / heads: q and o not square */
  g_assert_true (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_QWEN3, "tiny",
          &err));
  g_assert_cmpuint (p.head_dim * p.n_heads, !=, p.dim);
  gen_and_check (NPU_MODEL_ARCH_QWEN3, "f32", TRUE);
  gen_and_check (NPU_MODEL_ARCH_QWEN3, "mxfp4", FALSE);
}

static void
check_tensor (NpuGguf * g, const gchar * name, guint32 type, guint n_dims,
    guint64 ne0, guint64 ne1, guint64 ne2)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (g, name);

  if (!t)
    g_error ("tensor '%s' missing", name);
  g_assert_cmpuint (t->type, ==, type);
  g_assert_cmpuint (t->n_dims, ==, n_dims);
  g_assert_cmpuint (t->ne[0], ==, ne0);
  g_assert_cmpuint (t->ne[1], ==, ne1);
  g_assert_cmpuint (t->ne[2], ==, ne2);
}

/* gpt-oss as llama.cpp's GptOssModel writes it (llama-arch.cpp's names
 * for LLM_ARCH_OPENAI_MOE, llama_model_openai_moe's shapes): the expert
 * keys, YaRN, no rotary size; per block q/k/v/o with biases, sinks,
 * post_attention_norm, the router and its bias, the 3-D MXFP4 experts and
 * their 2-D biases; an untied output; no chat template (harmony is not
 * written) */
static void
test_gen_gpt_oss (void)
{
  NpuTextModelParams p;
  GError *err = NULL;
  gchar *path = tmp_path ("gpt-oss.gguf"), name[64];
  NpuGguf *g;
  gfloat f = 0;
  guint il, E, D, F, H, KV, HD;

  g_assert_true (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_GPT_OSS,
          "20b", &err));
  /* gpt-oss-20b's config.json */
  g_assert_cmpuint (p.n_layers, ==, 24);
  g_assert_cmpuint (p.dim, ==, 2880);
  g_assert_cmpuint (p.ff, ==, 2880);
  g_assert_cmpuint (p.n_heads, ==, 64);
  g_assert_cmpuint (p.n_kv_heads, ==, 8);
  g_assert_cmpuint (p.head_dim, ==, 64);
  g_assert_cmpuint (p.n_experts, ==, 32);
  g_assert_cmpuint (p.n_experts_used, ==, 4);
  g_assert_cmpuint (p.sliding_window, ==, 128);
  g_assert_cmpuint (p.vocab, ==, 201088);
  g_assert_true (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_GPT_OSS,
          "tiny", &err));
  p.wtype = NPU_GGML_TYPE_F32;  /* the experts stay MXFP4 */
  p.ff = 96;                    /* not dim: up and down tell apart */
  g_assert_true (npu_model_gen_write_text (&p, path, NULL, &err));
  g_assert_no_error (err);
  g = npu_gguf_open (path, &err);
  g_assert_no_error (err);
  E = p.n_experts;
  D = p.dim;
  F = p.ff;
  H = p.n_heads;
  KV = p.n_kv_heads;
  HD = p.head_dim;
  g_assert_cmpstr (npu_gguf_get_string (g, "general.architecture", NULL,
          NULL), ==, "gpt-oss");
  g_assert_cmpuint (get_u32 (g, "gpt-oss.expert_count"), ==, E);
  g_assert_cmpuint (get_u32 (g, "gpt-oss.expert_used_count"), ==, 4);
  g_assert_cmpuint (get_u32 (g, "gpt-oss.expert_feed_forward_length"), ==,
      F);
  g_assert_cmpuint (get_u32 (g, "gpt-oss.feed_forward_length"), ==, F);
  g_assert_cmpuint (get_u32 (g, "gpt-oss.attention.sliding_window"), ==,
      128);
  g_assert_cmpuint (get_u32 (g, "gpt-oss.attention.key_length"), ==, HD);
  g_assert_cmpuint (get_u32 (g, "gpt-oss.attention.value_length"), ==, HD);
  g_assert_cmpuint (get_u32 (g, "gpt-oss.rope.scaling.original_context_length"),
      ==, p.yarn_orig_ctx);
  g_assert_cmpstr (npu_gguf_get_string (g, "gpt-oss.rope.scaling.type", NULL,
          NULL), ==, "yarn");
  g_assert_true (npu_gguf_get_f32 (g, "gpt-oss.rope.scaling.factor", &f,
          NULL));
  g_assert_cmpfloat (f, ==, p.yarn_factor);
  g_assert_null (npu_gguf_find (g, "gpt-oss.rope.dimension_count"));
  g_assert_null (npu_gguf_find (g, "tokenizer.chat_template"));
  g_assert_cmpstr (npu_gguf_get_string (g, "tokenizer.ggml.model", NULL,
          NULL), ==, "gpt2");
  check_tensor (g, "output.weight", NPU_GGML_TYPE_F32, 2, D, p.vocab, 1);
  for (il = 0; il < p.n_layers; il++) {
#define N(s) (g_snprintf (name, sizeof (name), "blk.%u." s, il), name)
    check_tensor (g, N ("attn_norm.weight"), 0, 1, D, 1, 1);
    check_tensor (g, N ("post_attention_norm.weight"), 0, 1, D, 1, 1);
    check_tensor (g, N ("attn_q.weight"), 0, 2, D, H * HD, 1);
    check_tensor (g, N ("attn_q.bias"), 0, 1, H * HD, 1, 1);
    check_tensor (g, N ("attn_k.weight"), 0, 2, D, KV * HD, 1);
    check_tensor (g, N ("attn_k.bias"), 0, 1, KV * HD, 1, 1);
    check_tensor (g, N ("attn_v.weight"), 0, 2, D, KV * HD, 1);
    check_tensor (g, N ("attn_v.bias"), 0, 1, KV * HD, 1, 1);
    check_tensor (g, N ("attn_output.weight"), 0, 2, H * HD, D, 1);
    check_tensor (g, N ("attn_output.bias"), 0, 1, D, 1, 1);
    check_tensor (g, N ("attn_sinks.weight"), 0, 1, H, 1, 1);
    check_tensor (g, N ("ffn_gate_inp.weight"), 0, 2, D, E, 1);
    check_tensor (g, N ("ffn_gate_inp.bias"), 0, 1, E, 1, 1);
    check_tensor (g, N ("ffn_gate_exps.weight"), NPU_GGML_TYPE_MXFP4, 3, D, F,
        E);
    check_tensor (g, N ("ffn_up_exps.weight"), NPU_GGML_TYPE_MXFP4, 3, D, F,
        E);
    check_tensor (g, N ("ffn_down_exps.weight"), NPU_GGML_TYPE_MXFP4, 3, F, D,
        E);
    check_tensor (g, N ("ffn_gate_exps.bias"), 0, 2, F, E, 1);
    check_tensor (g, N ("ffn_up_exps.bias"), 0, 2, F, E, 1);
    check_tensor (g, N ("ffn_down_exps.bias"), 0, 2, D, E, 1);
    g_assert_null (npu_gguf_find_tensor (g, N ("ffn_norm.weight")));
#undef N
  }
  npu_gguf_free (g);
  g_unlink (path);
  /* experts the arch does not have, or a window of 0 */
  p.n_experts_used = p.n_experts + 1;
  g_assert_false (npu_model_gen_write_text (&p, path, NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_clear_error (&err);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  g_free (path);
}

static void
test_gen_errors (void)
{
  NpuTextModelParams p;
  NpuMmprojParams mp;
  GError *err = NULL;
  gchar *path = tmp_path ("x.gguf");

  g_assert_false (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_LLAMA,
          "huge", &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_clear_error (&err);
  g_assert_true (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_LLAMA, "tiny",
          &err));
  p.n_heads = 3;
  g_assert_false (npu_model_gen_write_text (&p, path, NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_clear_error (&err);
  p.n_heads = 4;
  p.head_dim = 32;              /* a head size of its own: qwen3, gpt-oss and
                                 * gemma3 only */
  g_assert_false (npu_model_gen_write_text (&p, path, NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_assert_nonnull (strstr (err->message, "gpt-oss and gemma3 only"));
  g_clear_error (&err);
  p.head_dim = 0;
  p.dim = 80;                   /* not a whole number of MXFP4 blocks */
  p.wtype = NPU_GGML_TYPE_MXFP4;
  g_assert_false (npu_model_gen_write_text (&p, path, NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_clear_error (&err);
  p.dim = 64;
  p.vocab = 100;
  g_assert_false (npu_model_gen_write_text (&p, path, NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_clear_error (&err);
  g_assert_true (npu_model_gen_mmproj_preset (&mp,
          NPU_MODEL_PROJECTOR_IDEFICS3, "tiny", &err));
  g_assert_false (npu_model_gen_write_mmproj (&mp, "/nonexistent.gguf", path,
          NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_FOR);
  g_clear_error (&err);
  mp.text_dim = 64;
  mp.scale_factor = 3;          /* 16 patches a side */
  g_assert_false (npu_model_gen_write_mmproj (&mp, NULL, path, NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_clear_error (&err);
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  g_free (path);
}

/* --all-mxfp4 puts token_embd and output in MXFP4; --mxfp4-values stores
 * every matrix as the values an MXFP4 copy decodes to: the same weights as
 * the MXFP4 file of the same seed (so ggml computes with F32 weights
 * exactly what an MXFP4 runtime uses), and requantising them changes
 * nothing */
static void
test_gen_mxfp4_options (void)
{
  static const gchar *const mats[] = { "token_embd.weight", "output.weight",
    "blk.0.attn_q.weight", "blk.1.ffn_down.weight"
  };
  NpuTextModelParams p;
  GError *err = NULL;
  gchar *mx = tmp_path ("all-mxfp4.gguf"), *f32 = tmp_path ("values.gguf");
  gchar *bad = tmp_path ("bad.gguf");
  NpuGguf *gm, *gf;
  guint k;

  g_assert_true (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_LLAMA, "tiny",
          &err));
  p.tied = FALSE;
  p.wtype = NPU_GGML_TYPE_MXFP4;
  p.all_mxfp4 = TRUE;
  g_assert_true (npu_model_gen_write_text (&p, mx, NULL, &err));
  g_assert_no_error (err);
  check_text_model (mx, &p);
  p.all_mxfp4 = FALSE;
  p.wtype = NPU_GGML_TYPE_F32;
  p.mxfp4_values = TRUE;
  g_assert_true (npu_model_gen_write_text (&p, f32, NULL, &err));
  g_assert_no_error (err);
  check_text_model (f32, &p);

  gm = npu_gguf_open (mx, &err);
  g_assert_no_error (err);
  gf = npu_gguf_open (f32, &err);
  g_assert_no_error (err);
  for (k = 0; k < G_N_ELEMENTS (mats); k++) {
    const NpuGgufTensor *tm = npu_gguf_find_tensor (gm, mats[k]);
    const NpuGgufTensor *tf = npu_gguf_find_tensor (gf, mats[k]);
    gsize n = tf->ne[0] * tf->ne[1], i;
    float *dec = g_new (float, n), *again = g_new (float, n);
    NpuBlockMxfp4 *blocks = g_new (NpuBlockMxfp4, n / 32);

    g_assert_cmpint (tm->type, ==, NPU_GGML_TYPE_MXFP4);
    g_assert_cmpint (tf->type, ==, NPU_GGML_TYPE_F32);
    npu_mxfp4_dequantize ((const NpuBlockMxfp4 *) tm->data, dec, n);
    g_assert_true (memcmp (dec, tf->data, n * sizeof (float)) == 0);
    npu_mxfp4_quantize_f32 ((const float *) tf->data, blocks, n);
    npu_mxfp4_dequantize (blocks, again, n);
    /* the same values (+0 and -0 compare equal) */
    for (i = 0; i < n; i++)
      g_assert_true (again[i] == dec[i]);
    g_free (dec);
    g_free (again);
    g_free (blocks);
  }
  npu_gguf_free (gm);
  npu_gguf_free (gf);

  /* Q8_0 cannot hold MXFP4 values exactly; all-MXFP4 needs MXFP4 */
  p.wtype = NPU_GGML_TYPE_Q8_0;
  g_assert_false (npu_model_gen_write_text (&p, bad, NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_clear_error (&err);
  p.mxfp4_values = FALSE;
  p.wtype = NPU_GGML_TYPE_F16;
  p.all_mxfp4 = TRUE;
  g_assert_false (npu_model_gen_write_text (&p, bad, NULL, &err));
  g_assert_error (err, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID);
  g_clear_error (&err);
  g_assert_false (g_file_test (bad, G_FILE_TEST_EXISTS));

  g_unlink (mx);
  g_unlink (f32);
  g_free (mx);
  g_free (f32);
  g_free (bad);
}

static gchar *
gen_checksum (NpuModelArch arch, const gchar * type, guint64 seed,
    gboolean mmproj)
{
  NpuTextModelParams p;
  NpuMmprojParams mp;
  GError *err = NULL;
  gchar *path = tmp_path ("det.gguf"), *contents, *sum;
  gsize len;

  g_assert_true (npu_model_gen_text_preset (&p, arch, "tiny", &err));
  p.wtype = npu_model_gen_parse_type (type);
  p.seed = seed;
  if (mmproj) {
    g_assert_true (npu_model_gen_mmproj_preset (&mp,
            NPU_MODEL_PROJECTOR_IDEFICS3, "tiny", &err));
    mp.wtype = p.wtype;
    mp.seed = seed;
    mp.text_dim = p.dim;
    g_assert_true (npu_model_gen_write_mmproj (&mp, NULL, path, NULL, &err));
  } else {
    g_assert_true (npu_model_gen_write_text (&p, path, NULL, &err));
  }
  g_assert_no_error (err);
  g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
  sum = g_compute_checksum_for_data (G_CHECKSUM_SHA256, (guint8 *) contents,
      len);
  g_free (contents);
  g_unlink (path);
  g_free (path);
  return sum;
}

static void
test_determinism (void)
{
  static const struct
  {
    NpuModelArch arch;
    const gchar *type;
    gboolean mmproj;
    const gchar *sha256;        /* seed 1: pins the bytes across machines */
  } cases[] = {
    {NPU_MODEL_ARCH_LLAMA, "f32", FALSE, LLAMA_F32_SHA256},
    {NPU_MODEL_ARCH_QWEN2, "mxfp4", FALSE, QWEN2_MXFP4_SHA256},
    {NPU_MODEL_ARCH_LLAMA, "q8_0", TRUE, MMPROJ_Q8_0_SHA256},
  };
  guint k;

  for (k = 0; k < G_N_ELEMENTS (cases); k++) {
    gchar *a = gen_checksum (cases[k].arch, cases[k].type, 1,
        cases[k].mmproj);
    gchar *b = gen_checksum (cases[k].arch, cases[k].type, 1,
        cases[k].mmproj);
    gchar *c = gen_checksum (cases[k].arch, cases[k].type, 2,
        cases[k].mmproj);

    g_test_message ("%s %s%s seed 1: %s", cases[k].arch ? "qwen2" : "llama",
        cases[k].type, cases[k].mmproj ? " mmproj" : "", a);
    g_assert_cmpstr (a, ==, b);
    g_assert_cmpstr (a, !=, c);
    g_assert_cmpstr (a, ==, cases[k].sha256);
    g_free (a);
    g_free (b);
    g_free (c);
  }
}

/* Every type the generator writes, decoded by the runtime's decoders:
 * each value within its type's step of the one written (a slip in a
 * block's layout puts values in the wrong place, far outside it); and
 * llama-quantize's fallback for rows that are not whole 256-blocks */
static void
test_quantize_types (void)
{
  static const struct
  {
    guint32 type;
    double step;                /* error bound, in units of max |x| of
                                 * the row */
  } types[] = {
    {NPU_GGML_TYPE_F16, 1e-3}, {NPU_GGML_TYPE_BF16, 8e-3},
    {NPU_GGML_TYPE_Q4_0, 1.0 / 8}, {NPU_GGML_TYPE_Q4_1, 1.0 / 15},
    {NPU_GGML_TYPE_Q5_0, 1.0 / 16}, {NPU_GGML_TYPE_Q5_1, 1.0 / 31},
    {NPU_GGML_TYPE_Q8_0, 1.0 / 127}, {NPU_GGML_TYPE_Q4_K, 1.0 / 8},
    {NPU_GGML_TYPE_Q5_K, 1.0 / 16}, {NPU_GGML_TYPE_Q6_K, 1.0 / 24},
    {NPU_GGML_TYPE_MXFP4, 1.0 / 3},      /* 6 s clamps up to 8 s */
  };
  const gsize n = 1024;
  GRand *rng = g_rand_new_with_seed (5);
  float *x = g_new (float, n), *y = g_new (float, n);
  guint8 *q = g_malloc (n * 4);
  guint t;
  gsize j;

  for (t = 0; t < G_N_ELEMENTS (types); t++) {
    double amax = 0, worst = 0, sum2 = 0, err2 = 0;

    /* a spread of magnitudes and signs, one outlier a block */
    for (j = 0; j < n; j++) {
      x[j] = (float) g_rand_double_range (rng, -1, 1);
      if (j % 37 == 0)
        x[j] *= 4;
      amax = MAX (amax, fabs (x[j]));
    }
    g_assert_true (npu_model_gen_quantize_row (types[t].type, x, q, n));
    g_assert_true (npu_quants_dequantize_row (types[t].type, q, y, n));
    for (j = 0; j < n; j++) {
      worst = MAX (worst, fabs ((double) y[j] - x[j]));
      sum2 += (double) x[j] * x[j];
      err2 += ((double) y[j] - x[j]) * ((double) y[j] - x[j]);
    }
    g_test_message ("%s: max |err| %.3g of max |x| (bound %.3g), rms err "
        "%.3g of rms x", npu_ggml_type_name (types[t].type), worst / amax,
        types[t].step, sqrt (err2 / sum2));
    g_assert_cmpfloat (worst, <=, types[t].step * amax);
  }
  g_assert_false (npu_model_gen_quantize_row (NPU_GGML_TYPE_Q2_K, x, q, n));

  /* llama-quant.cpp's fallbacks */
  g_assert_cmpuint (npu_model_gen_row_type (NPU_GGML_TYPE_Q4_K, 512), ==,
      NPU_GGML_TYPE_Q4_K);
  g_assert_cmpuint (npu_model_gen_row_type (NPU_GGML_TYPE_Q4_K, 192), ==,
      NPU_GGML_TYPE_Q5_0);
  g_assert_cmpuint (npu_model_gen_row_type (NPU_GGML_TYPE_Q5_K, 64), ==,
      NPU_GGML_TYPE_Q5_1);
  g_assert_cmpuint (npu_model_gen_row_type (NPU_GGML_TYPE_Q6_K, 96), ==,
      NPU_GGML_TYPE_Q8_0);
  g_assert_cmpuint (npu_model_gen_row_type (NPU_GGML_TYPE_Q6_K, 40), ==,
      NPU_GGML_TYPE_F16);
  g_assert_cmpuint (npu_model_gen_row_type (NPU_GGML_TYPE_Q8_0, 40), ==,
      NPU_GGML_TYPE_Q8_0);
  g_free (q);
  g_free (y);
  g_free (x);
  g_rand_free (rng);
}

int
main (int argc, char **argv)
{
  int ret;

  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("npu-model-gen-XXXXXX", NULL);
  g_assert_nonnull (tmpdir);
  g_test_add_func ("/gguf-writer/roundtrip", test_writer_roundtrip);
  g_test_add_func ("/gguf-writer/errors", test_writer_errors);
  g_test_add_func ("/model-gen/llama", test_gen_llama);
  g_test_add_func ("/model-gen/qwen2", test_gen_qwen2);
  g_test_add_func ("/model-gen/qwen3", test_gen_qwen3);
  g_test_add_func ("/model-gen/gpt-oss", test_gen_gpt_oss);
  g_test_add_func ("/model-gen/errors", test_gen_errors);
  g_test_add_func ("/model-gen/mxfp4-options", test_gen_mxfp4_options);
  g_test_add_func ("/model-gen/determinism", test_determinism);
  g_test_add_func ("/model-gen/quantize-types", test_quantize_types);
  ret = g_test_run ();
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return ret;
}
