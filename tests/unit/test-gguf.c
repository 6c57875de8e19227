/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GGUF reader tests
 *
 * Files are built in memory by a small writer that records where each field
 * lands, so malformed variants are made by patching one field of a valid
 * file and the test can say exactly which error it expects.
 */
#include <core/formats/npugguf.h>

#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */

typedef struct
{
  GByteArray *b;
  GHashTable *marks;            /* label -> offset + 1 */
} W;

static void
w_init (W * w)
{
  w->b = g_byte_array_new ();
  w->marks = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

static void
w_clear (W * w)
{
  g_byte_array_unref (w->b);
  g_hash_table_destroy (w->marks);
}

static void
w_mark (W * w, const gchar * label)
{
  g_hash_table_insert (w->marks, g_strdup (label),
      GSIZE_TO_POINTER (w->b->len + 1));
}

static gsize
w_pos (W * w, const gchar * label)
{
  gsize p = GPOINTER_TO_SIZE (g_hash_table_lookup (w->marks, label));

  g_assert_cmpuint (p, >, 0);
  return p - 1;
}

static void
w_bytes (W * w, const void *p, gsize n)
{
  g_byte_array_append (w->b, p, n);
}

static void
w_u8 (W * w, guint8 v)
{
  w_bytes (w, &v, 1);
}

static void
w_u16 (W * w, guint16 v)
{
  v = GUINT16_TO_LE (v);
  w_bytes (w, &v, 2);
}

static void
w_u32 (W * w, guint32 v)
{
  v = GUINT32_TO_LE (v);
  w_bytes (w, &v, 4);
}

static void
w_u64 (W * w, guint64 v)
{
  v = GUINT64_TO_LE (v);
  w_bytes (w, &v, 8);
}

static void
w_f32 (W * w, gfloat f)
{
  guint32 u;

  memcpy (&u, &f, 4);
  w_u32 (w, u);
}

static void
w_f64 (W * w, gdouble f)
{
  guint64 u;

  memcpy (&u, &f, 8);
  w_u64 (w, u);
}

static void
w_str (W * w, const gchar * s)
{
  w_u64 (w, strlen (s));
  w_bytes (w, s, strlen (s));
}

static void
w_key (W * w, const gchar * key, NpuGgufType type)
{
  gchar *label = g_strdup_printf ("key:%s", key);

  w_mark (w, label);
  g_free (label);
  w_str (w, key);
  w_u32 (w, type);
}

static void
w_pad (W * w, gsize align)
{
  while (w->b->len % align)
    w_u8 (w, 0);
}

static void
patch_u32 (W * w, gsize pos, guint32 v)
{
  v = GUINT32_TO_LE (v);
  memcpy (w->b->data + pos, &v, 4);
}

static void
patch_u64 (W * w, gsize pos, guint64 v)
{
  v = GUINT64_TO_LE (v);
  memcpy (w->b->data + pos, &v, 8);
}

/* ------------------------------------------------------------------------ */
/* The valid file                                                            */

#define N_TENSORS 3

/* t0: f32 [8, 2] = 64 bytes; t1: q8_0 [64, 1] = 68 bytes; t2: mxfp4
 * [32, 3] = 51 bytes, last, ending exactly at the end of the file */
static const struct
{
  const gchar *name;
  guint32 n_dims;
  guint64 ne[2];
  guint32 type;
  gsize n_bytes;
} tspec[N_TENSORS] = {
  {"t0", 2, {8, 2}, NPU_GGML_TYPE_F32, 64},
  {"t1", 1, {64, 1}, NPU_GGML_TYPE_Q8_0, 68},
  {"t2", 2, {32, 3}, NPU_GGML_TYPE_MXFP4, 51},
};

static guint8
data_byte (guint t, gsize i)
{
  return (guint8) (t * 37 + i * 11 + 5);
}

/* @alignment 0: no general.alignment key (default 32) */
static void
build_valid (W * w, guint32 version, guint32 alignment)
{
  guint32 align = alignment ? alignment : 32;
  guint64 rel = 0, offs[N_TENSORS];
  guint i, k;
  gsize start;

  w_init (w);
  w_bytes (w, "GGUF", 4);
  w_mark (w, "version");
  w_u32 (w, version);
  w_mark (w, "n_tensors");
  w_u64 (w, N_TENSORS);
  w_mark (w, "n_kv");
  w_u64 (w, 20 + (alignment ? 1 : 0));

  /* 20 kvs: every scalar type, strings, arrays of each kind */
  w_key (w, "general.architecture", NPU_GGUF_TYPE_STRING);
  w_str (w, "llama");
  w_key (w, "test.u8", NPU_GGUF_TYPE_UINT8);
  w_u8 (w, 200);
  w_key (w, "test.i8", NPU_GGUF_TYPE_INT8);
  w_u8 (w, (guint8) - 100);
  w_key (w, "test.u16", NPU_GGUF_TYPE_UINT16);
  w_u16 (w, 60000);
  w_key (w, "test.i16", NPU_GGUF_TYPE_INT16);
  w_u16 (w, (guint16) - 30000);
  w_key (w, "test.u32", NPU_GGUF_TYPE_UINT32);
  w_u32 (w, 4000000000u);
  w_key (w, "test.i32", NPU_GGUF_TYPE_INT32);
  w_u32 (w, (guint32) - 2000000000);
  w_key (w, "test.f32", NPU_GGUF_TYPE_FLOAT32);
  w_f32 (w, 1e-5f);
  w_key (w, "test.bool", NPU_GGUF_TYPE_BOOL);
  w_mark (w, "bool");
  w_u8 (w, 1);
  w_key (w, "test.u64", NPU_GGUF_TYPE_UINT64);
  w_u64 (w, G_GUINT64_CONSTANT (0xFFFFFFFFFFFFFFFF));
  w_key (w, "test.i64", NPU_GGUF_TYPE_INT64);
  w_u64 (w, (guint64) G_MININT64);
  w_key (w, "test.f64", NPU_GGUF_TYPE_FLOAT64);
  w_f64 (w, 3.25);
  w_key (w, "test.empty_string", NPU_GGUF_TYPE_STRING);
  w_str (w, "");

  w_key (w, "test.arr_i32", NPU_GGUF_TYPE_ARRAY);
  w_u32 (w, NPU_GGUF_TYPE_INT32);
  w_mark (w, "arr_i32.count");
  w_u64 (w, 4);
  for (i = 0; i < 4; i++)
    w_u32 (w, (guint32) (gint32) (i * 1000 - 1500));

  w_key (w, "tokenizer.ggml.tokens", NPU_GGUF_TYPE_ARRAY);
  w_u32 (w, NPU_GGUF_TYPE_STRING);
  w_u64 (w, 3);
  w_str (w, "<s>");
  w_mark (w, "tokens.1");
  w_str (w, "hello");
  w_str (w, "");

  w_key (w, "test.arr_bool", NPU_GGUF_TYPE_ARRAY);
  w_u32 (w, NPU_GGUF_TYPE_BOOL);
  w_u64 (w, 3);
  w_u8 (w, 1);
  w_u8 (w, 0);
  w_u8 (w, 1);

  w_key (w, "test.arr_f64", NPU_GGUF_TYPE_ARRAY);
  w_u32 (w, NPU_GGUF_TYPE_FLOAT64);
  w_u64 (w, 2);
  w_f64 (w, -0.5);
  w_f64 (w, 1e300);

  /* [[1, 2], [], [3]] as u16 */
  w_key (w, "test.nested", NPU_GGUF_TYPE_ARRAY);
  w_u32 (w, NPU_GGUF_TYPE_ARRAY);
  w_u64 (w, 3);
  w_mark (w, "nested.0");
  w_u32 (w, NPU_GGUF_TYPE_UINT16);
  w_u64 (w, 2);
  w_u16 (w, 1);
  w_u16 (w, 2);
  w_u32 (w, NPU_GGUF_TYPE_UINT16);
  w_u64 (w, 0);
  w_u32 (w, NPU_GGUF_TYPE_UINT16);
  w_u64 (w, 1);
  w_u16 (w, 3);

  /* [["a", "bc"], [[]]]: strings inside arrays, and 3 levels */
  w_key (w, "test.nested_mixed", NPU_GGUF_TYPE_ARRAY);
  w_u32 (w, NPU_GGUF_TYPE_ARRAY);
  w_u64 (w, 2);
  w_u32 (w, NPU_GGUF_TYPE_STRING);
  w_u64 (w, 2);
  w_str (w, "a");
  w_str (w, "bc");
  w_u32 (w, NPU_GGUF_TYPE_ARRAY);
  w_u64 (w, 1);
  w_u32 (w, NPU_GGUF_TYPE_INT8);
  w_u64 (w, 0);

  w_key (w, "test.empty_arr", NPU_GGUF_TYPE_ARRAY);
  w_u32 (w, NPU_GGUF_TYPE_UINT64);
  w_u64 (w, 0);

  if (alignment) {
    w_key (w, "general.alignment", NPU_GGUF_TYPE_UINT32);
    w_mark (w, "alignment");
    w_u32 (w, alignment);
  }

  for (i = 0; i < N_TENSORS; i++) {
    gchar *l;

    offs[i] = rel;
    rel += tspec[i].n_bytes;
    rel = (rel + align - 1) / align * align;

    l = g_strdup_printf ("t%u", i);
    w_mark (w, l);
    g_free (l);
    w_str (w, tspec[i].name);
    l = g_strdup_printf ("t%u.n_dims", i);
    w_mark (w, l);
    g_free (l);
    w_u32 (w, tspec[i].n_dims);
    for (k = 0; k < tspec[i].n_dims; k++) {
      l = g_strdup_printf ("t%u.ne%u", i, k);
      w_mark (w, l);
      g_free (l);
      w_u64 (w, tspec[i].ne[k]);
    }
    l = g_strdup_printf ("t%u.type", i);
    w_mark (w, l);
    g_free (l);
    w_u32 (w, tspec[i].type);
    l = g_strdup_printf ("t%u.offset", i);
    w_mark (w, l);
    g_free (l);
    w_u64 (w, offs[i]);
  }
  w_pad (w, align);
  w_mark (w, "data");
  start = w->b->len;
  for (i = 0; i < N_TENSORS; i++) {
    while (w->b->len < start + offs[i])
      w_u8 (w, 0);
    for (k = 0; k < tspec[i].n_bytes; k++)
      w_u8 (w, data_byte (i, k));
  }
}

/* ------------------------------------------------------------------------ */

static void
check_valid (NpuGguf * g, guint32 version, guint32 alignment,
    const guint8 * base)
{
  const NpuGgufValue *arr;
  NpuGgufValue e, e2;
  const gchar *s;
  GError *err = NULL;
  gsize len;
  guint32 u32;
  guint64 u64;
  gint64 i64;
  gfloat f;
  gboolean b;
  guint i, k;

  g_assert_cmpuint (npu_gguf_get_version (g), ==, version);
  g_assert_cmpuint (npu_gguf_get_alignment (g), ==, alignment ? alignment : 32);
  g_assert_cmpuint (npu_gguf_get_data_offset (g) % npu_gguf_get_alignment (g),
      ==, 0);
  g_assert_cmpuint (npu_gguf_n_kv (g), ==, alignment ? 21 : 20);
  g_assert_cmpstr (npu_gguf_get_key (g, 0), ==, "general.architecture");
  g_assert_cmpint (npu_gguf_get_value (g, 1)->type, ==, NPU_GGUF_TYPE_UINT8);

  s = npu_gguf_get_string (g, "general.architecture", &len, &err);
  g_assert_no_error (err);
  g_assert_cmpstr (s, ==, "llama");
  g_assert_cmpuint (len, ==, 5);
  s = npu_gguf_get_string (g, "test.empty_string", &len, &err);
  g_assert_no_error (err);
  g_assert_cmpstr (s, ==, "");

  g_assert_true (npu_gguf_get_u32 (g, "test.u8", &u32, NULL));
  g_assert_cmpuint (u32, ==, 200);
  g_assert_true (npu_gguf_get_i64 (g, "test.i8", &i64, NULL));
  g_assert_cmpint (i64, ==, -100);
  g_assert_true (npu_gguf_get_u32 (g, "test.u16", &u32, NULL));
  g_assert_cmpuint (u32, ==, 60000);
  g_assert_true (npu_gguf_get_i64 (g, "test.i16", &i64, NULL));
  g_assert_cmpint (i64, ==, -30000);
  g_assert_true (npu_gguf_get_u32 (g, "test.u32", &u32, NULL));
  g_assert_cmpuint (u32, ==, 4000000000u);
  g_assert_true (npu_gguf_get_i64 (g, "test.i32", &i64, NULL));
  g_assert_cmpint (i64, ==, -2000000000);
  g_assert_true (npu_gguf_get_f32 (g, "test.f32", &f, NULL));
  g_assert_cmpfloat (f, ==, 1e-5f);
  g_assert_true (npu_gguf_get_bool (g, "test.bool", &b, NULL));
  g_assert_true (b);
  g_assert_true (npu_gguf_get_u64 (g, "test.u64", &u64, NULL));
  g_assert_cmpuint (u64, ==, G_MAXUINT64);
  g_assert_true (npu_gguf_get_i64 (g, "test.i64", &i64, NULL));
  g_assert_cmpint (i64, ==, G_MININT64);
  g_assert_true (npu_gguf_get_f32 (g, "test.f64", &f, NULL));
  g_assert_cmpfloat (f, ==, 3.25f);

  /* Range and type errors */
  u32 = 7;
  g_assert_false (npu_gguf_get_u32 (g, "test.u64", &u32, &err));
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_WRONG_TYPE);
  g_assert_nonnull (strstr (err->message, "test.u64"));
  g_clear_error (&err);
  g_assert_cmpuint (u32, ==, 7);
  g_assert_false (npu_gguf_get_u32 (g, "test.i8", &u32, NULL));
  g_assert_false (npu_gguf_get_i64 (g, "test.u64", &i64, NULL));
  g_assert_false (npu_gguf_get_bool (g, "test.u8", &b, NULL));
  g_assert_null (npu_gguf_get_string (g, "test.u8", NULL, &err));
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_WRONG_TYPE);
  g_clear_error (&err);
  g_assert_false (npu_gguf_get_u32 (g, "no.such.key", &u32, &err));
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (err->message, "no.such.key"));
  g_clear_error (&err);
  g_assert_cmpuint (npu_gguf_get_u32_default (g, "no.such.key", 42), ==, 42);
  g_assert_cmpuint (npu_gguf_get_u32_default (g, "test.u16", 42), ==, 60000);
  g_assert_cmpfloat (npu_gguf_get_f32_default (g, "x", 0.5f), ==, 0.5f);
  g_assert_true (npu_gguf_get_bool_default (g, "x", TRUE));
  g_assert_true (npu_gguf_get_bool_default (g, "test.bool", FALSE));
  g_assert_null (npu_gguf_find (g, "nope"));
  g_assert_nonnull (npu_gguf_find (g, "test.nested"));

  /* Arrays */
  arr = npu_gguf_get_array (g, "test.arr_i32", NPU_GGUF_TYPE_INT32, &err);
  g_assert_no_error (err);
  g_assert_cmpuint (arr->v.arr.count, ==, 4);
  g_assert_cmpuint (arr->v.arr.size, ==, 16);
  for (i = 0; i < 4; i++) {
    g_assert_true (npu_gguf_array_get (arr, i, &e));
    g_assert_cmpint (e.type, ==, NPU_GGUF_TYPE_INT32);
    g_assert_cmpint (e.v.i, ==, (gint) i * 1000 - 1500);
  }
  g_assert_false (npu_gguf_array_get (arr, 4, &e));
  g_assert_null (npu_gguf_array_get_string (arr, 0, NULL));
  g_assert_null (npu_gguf_get_array (g, "test.arr_i32", NPU_GGUF_TYPE_UINT8,
          &err));
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_WRONG_TYPE);
  g_clear_error (&err);

  arr = npu_gguf_get_array (g, "tokenizer.ggml.tokens", NPU_GGUF_TYPE_STRING,
      &err);
  g_assert_no_error (err);
  g_assert_cmpuint (arr->v.arr.count, ==, 3);
  s = npu_gguf_array_get_string (arr, 1, &len);
  g_assert_cmpuint (len, ==, 5);
  g_assert_true (memcmp (s, "hello", 5) == 0);
  /* no copy: the pointer is into the file */
  g_assert_true ((const guint8 *) s > base
      && (const guint8 *) s < base + npu_gguf_get_size (g));
  s = npu_gguf_array_get_string (arr, 2, &len);
  g_assert_cmpuint (len, ==, 0);
  g_assert_null (npu_gguf_array_get_string (arr, 3, &len));

  arr = npu_gguf_get_array (g, "test.arr_bool", -1, NULL);
  g_assert_true (npu_gguf_array_get (arr, 0, &e) && e.v.b);
  g_assert_true (npu_gguf_array_get (arr, 1, &e) && !e.v.b);
  arr = npu_gguf_get_array (g, "test.arr_f64", -1, NULL);
  g_assert_true (npu_gguf_array_get (arr, 1, &e));
  g_assert_cmpfloat (e.v.f, ==, 1e300);

  arr = npu_gguf_get_array (g, "test.nested", NPU_GGUF_TYPE_ARRAY, NULL);
  g_assert_cmpuint (arr->v.arr.count, ==, 3);
  {
    static const guint want_len[3] = { 2, 0, 1 };
    guint next = 1;

    for (i = 0; i < 3; i++) {
      g_assert_true (npu_gguf_array_get (arr, i, &e));
      g_assert_cmpint (e.type, ==, NPU_GGUF_TYPE_ARRAY);
      g_assert_cmpint (e.v.arr.type, ==, NPU_GGUF_TYPE_UINT16);
      g_assert_cmpuint (e.v.arr.count, ==, want_len[i]);
      for (k = 0; k < want_len[i]; k++) {
        g_assert_true (npu_gguf_array_get (&e, k, &e2));
        g_assert_cmpuint (e2.v.u, ==, next++);
      }
    }
  }
  arr = npu_gguf_get_array (g, "test.nested_mixed", NPU_GGUF_TYPE_ARRAY, NULL);
  g_assert_true (npu_gguf_array_get (arr, 0, &e));
  s = npu_gguf_array_get_string (&e, 1, &len);
  g_assert_cmpuint (len, ==, 2);
  g_assert_true (memcmp (s, "bc", 2) == 0);
  g_assert_true (npu_gguf_array_get (arr, 1, &e));
  g_assert_cmpint (e.v.arr.type, ==, NPU_GGUF_TYPE_ARRAY);
  g_assert_true (npu_gguf_array_get (&e, 0, &e2));
  g_assert_cmpint (e2.v.arr.type, ==, NPU_GGUF_TYPE_INT8);
  g_assert_cmpuint (e2.v.arr.count, ==, 0);
  arr = npu_gguf_get_array (g, "test.empty_arr", NPU_GGUF_TYPE_UINT64, NULL);
  g_assert_cmpuint (arr->v.arr.count, ==, 0);

  /* Tensors */
  g_assert_cmpuint (npu_gguf_n_tensors (g), ==, N_TENSORS);
  for (i = 0; i < N_TENSORS; i++) {
    const NpuGgufTensor *t = npu_gguf_get_tensor (g, i);

    g_assert_cmpstr (t->name, ==, tspec[i].name);
    g_assert_true (npu_gguf_find_tensor (g, tspec[i].name) == t);
    g_assert_cmpuint (t->n_dims, ==, tspec[i].n_dims);
    g_assert_cmpuint (t->ne[0], ==, tspec[i].ne[0]);
    g_assert_cmpuint (t->ne[1], ==, tspec[i].ne[1]);
    g_assert_cmpuint (t->ne[2], ==, 1);
    g_assert_cmpuint (t->ne[3], ==, 1);
    g_assert_cmpint (t->type, ==, tspec[i].type);
    g_assert_cmpuint (t->n_bytes, ==, tspec[i].n_bytes);
    g_assert_cmpuint (t->offset % npu_gguf_get_alignment (g), ==, 0);
    g_assert_true (t->data == base + t->offset);
    for (k = 0; k < t->n_bytes; k++)
      g_assert_cmpuint (t->data[k], ==, data_byte (i, k));
  }
  g_assert_null (npu_gguf_find_tensor (g, "t3"));
  /* last tensor ends at the end of the file */
  g_assert_cmpuint (npu_gguf_get_tensor (g, 2)->offset + 51, ==,
      npu_gguf_get_size (g));
}

static void
test_valid (void)
{
  static const guint32 aligns[] = { 0, 1, 8, 64, 4096 };
  guint32 version;
  guint a;

  for (version = 2; version <= 3; version++) {
    for (a = 0; a < G_N_ELEMENTS (aligns); a++) {
      GError *err = NULL;
      NpuGguf *g;
      W w;

      build_valid (&w, version, aligns[a]);
      g = npu_gguf_open_bytes (w.b->data, w.b->len, &err);
      g_assert_no_error (err);
      g_assert_nonnull (g);
      g_assert_cmpint (npu_gguf_get_fd (g), ==, -1);
      check_valid (g, version, aligns[a], w.b->data);
      npu_gguf_free (g);
      w_clear (&w);
    }
  }
}

static void
test_type_table (void)
{
  guint bs;
  gsize ts;

  g_assert_true (npu_ggml_type_info (NPU_GGML_TYPE_MXFP4, &bs, &ts));
  g_assert_cmpuint (bs, ==, 32);
  g_assert_cmpuint (ts, ==, 17);
  g_assert_cmpstr (npu_ggml_type_name (39), ==, "mxfp4");
  g_assert_true (npu_ggml_type_info (NPU_GGML_TYPE_Q4_K, &bs, &ts));
  g_assert_cmpuint (bs, ==, 256);
  g_assert_cmpuint (ts, ==, 144);
  g_assert_true (npu_ggml_type_info (NPU_GGML_TYPE_Q8_0, &bs, &ts));
  g_assert_cmpuint (ts, ==, 34);
  g_assert_true (npu_ggml_type_info (NPU_GGML_TYPE_BF16, &bs, &ts));
  g_assert_cmpuint (ts, ==, 2);
  g_assert_cmpstr (npu_ggml_type_name (30), ==, "bf16");
  /* removed ids and out-of-range ids */
  g_assert_false (npu_ggml_type_info (4, &bs, &ts));
  g_assert_false (npu_ggml_type_info (31, NULL, NULL));
  g_assert_false (npu_ggml_type_info (38, NULL, NULL));
  g_assert_false (npu_ggml_type_info (1000, NULL, NULL));
  g_assert_null (npu_ggml_type_name (5));
  g_assert_null (npu_ggml_type_name (G_MAXUINT32));
  g_assert_cmpstr (npu_gguf_type_name (NPU_GGUF_TYPE_ARRAY), ==, "array");
  g_assert_null (npu_gguf_type_name (13));
}

/* Every proper prefix of a valid file is a clean error.  Each prefix is an
 * exact-size heap copy so that an overread trips ASan or valgrind. */
static void
test_truncated (void)
{
  guint32 version;

  for (version = 2; version <= 3; version++) {
    W w;
    gsize n;

    build_valid (&w, version, version == 3 ? 64 : 0);
    for (n = 0; n < w.b->len; n++) {
      guint8 *copy = n ? g_memdup2 (w.b->data, n) : NULL;
      GError *err = NULL;
      NpuGguf *g;

      g = npu_gguf_open_bytes (copy, n, &err);
      g_assert_null (g);
      g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT);
      g_assert_true (g_str_has_prefix (err->message, "(memory): "));
      g_assert_true (strstr (err->message, "truncated")
          || strstr (err->message, "past the end")
          || strstr (err->message, "does not fit")
          || strstr (err->message, "cannot fit"));
      g_error_free (err);
      g_free (copy);
    }
    w_clear (&w);
  }
}

typedef void (*PatchFunc) (W * w);

/* Builds the valid v3 file, applies @patch, expects an error of @code
 * whose message contains every string in @needles */
static void
expect_error (PatchFunc patch, gint code, const gchar * const *needles)
{
  GError *err = NULL;
  NpuGguf *g;
  guint8 *copy;
  W w;

  build_valid (&w, 3, 0);
  patch (&w);
  copy = g_memdup2 (w.b->data, w.b->len);
  g = npu_gguf_open_bytes (copy, w.b->len, &err);
  g_assert_null (g);
  g_assert_nonnull (err);
  if (g_test_verbose ())
    g_printerr ("  %s\n", err->message);
  g_assert_error (err, NPU_GGUF_ERROR, code);
  for (; *needles; needles++) {
    if (!strstr (err->message, *needles))
      g_error ("'%s' not in error '%s'", *needles, err->message);
  }
  g_error_free (err);
  g_free (copy);
  w_clear (&w);
}

#define EXPECT(patch, code, ...) \
  G_STMT_START { \
    static const gchar *const needles_[] = { __VA_ARGS__, NULL }; \
    expect_error (patch, code, needles_); \
  } G_STMT_END

static void
p_magic (W * w)
{
  w->b->data[0] = 'g';
}

static void
p_v1 (W * w)
{
  patch_u32 (w, w_pos (w, "version"), 1);
}

static void
p_v4 (W * w)
{
  patch_u32 (w, w_pos (w, "version"), 4);
}

static void
p_be (W * w)
{
  patch_u32 (w, w_pos (w, "version"), 0x03000000);
}

static void
p_huge_kv (W * w)
{
  patch_u64 (w, w_pos (w, "n_kv"), G_GUINT64_CONSTANT (1) << 60);
}

static void
p_max_kv (W * w)
{
  patch_u64 (w, w_pos (w, "n_kv"), G_MAXUINT64);
}

static void
p_huge_tensors (W * w)
{
  patch_u64 (w, w_pos (w, "n_tensors"), G_MAXUINT64 / 2);
}

/* more tensors than fit after the metadata, but few enough to pass the
 * first check against the whole file */
static void
p_more_tensors (W * w)
{
  patch_u64 (w, w_pos (w, "n_tensors"), (w->b->len - w_pos (w, "t0")) / 24 + 1);
}

static void
p_huge_array (W * w)
{
  patch_u64 (w, w_pos (w, "arr_i32.count"), G_GUINT64_CONSTANT (1) << 62);
}

static void
p_huge_string (W * w)
{
  patch_u64 (w, w_pos (w, "tokens.1"), G_GUINT64_CONSTANT (1) << 63);
}

static void
p_key_len (W * w)
{
  patch_u64 (w, w_pos (w, "key:test.u8"), G_MAXUINT64);
}

static void
p_bool (W * w)
{
  w->b->data[w_pos (w, "bool")] = 2;
}

static void
p_value_type (W * w)
{
  patch_u32 (w, w_pos (w, "key:test.u8") + 8 + 7, 13);
}

static void
p_nested_elem_type (W * w)
{
  patch_u32 (w, w_pos (w, "nested.0"), 14);
}

static void
p_dup_key (W * w)
{
  memcpy (w->b->data + w_pos (w, "key:test.i8") + 8, "test.u8", 7);
}

static void
p_empty_key (W * w)
{
  patch_u64 (w, w_pos (w, "key:test.u8"), 0);
}

static void
p_dup_tensor (W * w)
{
  w->b->data[w_pos (w, "t1") + 9] = '0';
}

static void
p_nul_tensor (W * w)
{
  w->b->data[w_pos (w, "t1") + 9] = '\0';
}

static void
p_ndims5 (W * w)
{
  patch_u32 (w, w_pos (w, "t1.n_dims"), 5);
}

static void
p_dim0 (W * w)
{
  patch_u64 (w, w_pos (w, "t0.ne1"), 0);
}

static void
p_dim_neg (W * w)
{
  patch_u64 (w, w_pos (w, "t0.ne1"), G_MAXUINT64);
}

static void
p_nelem_overflow (W * w)
{
  patch_u64 (w, w_pos (w, "t0.ne0"), G_GUINT64_CONSTANT (1) << 40);
  patch_u64 (w, w_pos (w, "t0.ne1"), G_GUINT64_CONSTANT (1) << 40);
}

static void
p_bytes_overflow (W * w)
{
  patch_u64 (w, w_pos (w, "t0.ne0"), G_GUINT64_CONSTANT (1) << 61);
}

static void
p_bad_type (W * w)
{
  patch_u32 (w, w_pos (w, "t1.type"), 99);
}

static void
p_removed_type (W * w)
{
  patch_u32 (w, w_pos (w, "t1.type"), 4);
}

static void
p_block (W * w)
{
  patch_u64 (w, w_pos (w, "t1.ne0"), 48);
}

static void
p_misaligned (W * w)
{
  patch_u64 (w, w_pos (w, "t1.offset"), 72);
}

static void
p_overlap (W * w)
{
  patch_u64 (w, w_pos (w, "t2.offset"), 32);
}

static void
p_past_end (W * w)
{
  patch_u64 (w, w_pos (w, "t2.offset"), 1 << 20);
}

static void
p_offset_wrap (W * w)
{
  patch_u64 (w, w_pos (w, "t2.offset"), G_MAXUINT64 - 31);
}

static void
p_tensor_len (W * w)
{
  patch_u64 (w, w_pos (w, "t2"), 1 << 30);
}

static void
test_malformed (void)
{
  EXPECT (p_magic, NPU_GGUF_ERROR_FORMAT, "not a GGUF file");
  EXPECT (p_v1, NPU_GGUF_ERROR_UNSUPPORTED, "version 1", "2 and 3");
  EXPECT (p_v4, NPU_GGUF_ERROR_UNSUPPORTED, "version 4");
  EXPECT (p_be, NPU_GGUF_ERROR_UNSUPPORTED, "big-endian");
  EXPECT (p_huge_kv, NPU_GGUF_ERROR_FORMAT, "kv count 1152921504606846976",
      "cannot fit");
  EXPECT (p_max_kv, NPU_GGUF_ERROR_FORMAT, "kv count");
  EXPECT (p_huge_tensors, NPU_GGUF_ERROR_FORMAT, "tensor count");
  EXPECT (p_more_tensors, NPU_GGUF_ERROR_FORMAT, "tensor count",
      "after the metadata");
  EXPECT (p_huge_array, NPU_GGUF_ERROR_FORMAT, "test.arr_i32",
      "4611686018427387904 int32 elements does not fit");
  EXPECT (p_huge_string, NPU_GGUF_ERROR_FORMAT, "tokenizer.ggml.tokens",
      "past the end of the file");
  EXPECT (p_key_len, NPU_GGUF_ERROR_FORMAT, "key of kv 1", "past the end");
  EXPECT (p_bool, NPU_GGUF_ERROR_FORMAT, "test.bool", "is 2, not 0 or 1");
  EXPECT (p_value_type, NPU_GGUF_ERROR_FORMAT, "test.u8",
      "unknown value type 13");
  EXPECT (p_nested_elem_type, NPU_GGUF_ERROR_FORMAT, "test.nested",
      "unknown element type 14");
  EXPECT (p_dup_key, NPU_GGUF_ERROR_FORMAT, "duplicate key 'test.u8'");
  EXPECT (p_empty_key, NPU_GGUF_ERROR_FORMAT, "is empty");
  EXPECT (p_dup_tensor, NPU_GGUF_ERROR_FORMAT, "duplicate tensor 't0'");
  EXPECT (p_nul_tensor, NPU_GGUF_ERROR_FORMAT, "name of tensor 1", "NUL byte");
  EXPECT (p_ndims5, NPU_GGUF_ERROR_FORMAT, "tensor 't1'", "5 dimensions");
  EXPECT (p_dim0, NPU_GGUF_ERROR_FORMAT, "tensor 't0'", "dimension 1 is 0");
  EXPECT (p_dim_neg, NPU_GGUF_ERROR_FORMAT, "tensor 't0'", "dimension 1 is");
  EXPECT (p_nelem_overflow, NPU_GGUF_ERROR_FORMAT, "tensor 't0'",
      "element count overflows");
  EXPECT (p_bytes_overflow, NPU_GGUF_ERROR_FORMAT, "tensor 't0'",
      "byte size overflows");
  EXPECT (p_bad_type, NPU_GGUF_ERROR_UNSUPPORTED, "tensor 't1'",
      "unknown ggml type 99");
  EXPECT (p_removed_type, NPU_GGUF_ERROR_UNSUPPORTED, "tensor 't1'",
      "unknown ggml type 4");
  EXPECT (p_block, NPU_GGUF_ERROR_FORMAT, "tensor 't1'",
      "48 elements is not a multiple of the q8_0 block size 32");
  EXPECT (p_misaligned, NPU_GGUF_ERROR_FORMAT, "tensor 't1'",
      "offset 72 is not a multiple of the alignment 32");
  EXPECT (p_overlap, NPU_GGUF_ERROR_FORMAT, "tensor 't2'", "overlaps",
      "tensor 't0'");
  EXPECT (p_past_end, NPU_GGUF_ERROR_FORMAT, "tensor 't2'",
      "51 bytes) runs past the end of the file");
  EXPECT (p_offset_wrap, NPU_GGUF_ERROR_FORMAT, "tensor 't2'",
      "runs past the end of the file");
  EXPECT (p_tensor_len, NPU_GGUF_ERROR_FORMAT, "name of tensor 2",
      "past the end");
}

/* general.alignment: wrong type, zero, not a power of two */
static void
test_bad_alignment (void)
{
  static const guint32 bad[] = { 0, 3, 48, 0x80000001u };
  GError *err = NULL;
  NpuGguf *g;
  guint i;
  W w;

  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    gchar *want = g_strdup_printf ("general.alignment %u is not a power of "
        "two", bad[i]);

    build_valid (&w, 3, 64);
    patch_u32 (&w, w_pos (&w, "alignment"), bad[i]);
    g = npu_gguf_open_bytes (w.b->data, w.b->len, &err);
    g_assert_null (g);
    g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT);
    g_assert_nonnull (strstr (err->message, want));
    g_clear_error (&err);
    g_free (want);
    w_clear (&w);
  }

  /* as int32 */
  build_valid (&w, 3, 64);
  patch_u32 (&w, w_pos (&w, "alignment") - 4, NPU_GGUF_TYPE_INT32);
  g = npu_gguf_open_bytes (w.b->data, w.b->len, &err);
  g_assert_null (g);
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT);
  g_assert_nonnull (strstr (err->message, "general.alignment is int32, must "
          "be uint32"));
  g_clear_error (&err);
  w_clear (&w);
}

/* A file with one key holding arrays nested @depth deep */
static GByteArray *
build_nested (guint depth, guint64 inner_count)
{
  GByteArray *b;
  guint d;
  W w;

  w_init (&w);
  w_bytes (&w, "GGUF", 4);
  w_u32 (&w, 3);
  w_u64 (&w, 0);
  w_u64 (&w, 1);
  w_key (&w, "bomb", NPU_GGUF_TYPE_ARRAY);
  for (d = 1; d < depth; d++) {
    w_u32 (&w, NPU_GGUF_TYPE_ARRAY);
    w_u64 (&w, 1);
  }
  w_u32 (&w, NPU_GGUF_TYPE_UINT8);
  w_u64 (&w, inner_count);
  for (d = 0; d < inner_count; d++)
    w_u8 (&w, d);
  b = g_byte_array_ref (w.b);
  w_clear (&w);
  return b;
}

static void
test_depth (void)
{
  const NpuGgufValue *v;
  NpuGgufValue e;
  GError *err = NULL;
  GByteArray *b;
  NpuGguf *g;
  guint d;

  b = build_nested (NPU_GGUF_MAX_ARRAY_DEPTH, 3);
  g = npu_gguf_open_bytes (b->data, b->len, &err);
  g_assert_no_error (err);
  v = npu_gguf_find (g, "bomb");
  for (d = 1; d < NPU_GGUF_MAX_ARRAY_DEPTH; d++) {
    g_assert_cmpint (v->v.arr.type, ==, NPU_GGUF_TYPE_ARRAY);
    v = &v->v.arr.items[0];
  }
  g_assert_cmpint (v->v.arr.type, ==, NPU_GGUF_TYPE_UINT8);
  g_assert_true (npu_gguf_array_get (v, 2, &e));
  g_assert_cmpuint (e.v.u, ==, 2);
  /* no tensors: no data section needed */
  g_assert_cmpuint (npu_gguf_n_tensors (g), ==, 0);
  npu_gguf_free (g);
  g_byte_array_unref (b);

  b = build_nested (NPU_GGUF_MAX_ARRAY_DEPTH + 1, 0);
  g = npu_gguf_open_bytes (b->data, b->len, &err);
  g_assert_null (g);
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT);
  g_assert_nonnull (strstr (err->message, "key 'bomb'"));
  g_assert_nonnull (strstr (err->message, "nested deeper than 8"));
  g_clear_error (&err);
  g_byte_array_unref (b);

  /* a real bomb: 100000 levels, must fail fast without deep recursion */
  b = build_nested (100000, 0);
  g = npu_gguf_open_bytes (b->data, b->len, &err);
  g_assert_null (g);
  g_assert_nonnull (strstr (err->message, "nested deeper"));
  g_clear_error (&err);
  g_byte_array_unref (b);
}

/* Many-element string array: count is checked against the bytes left
 * before the index is allocated */
static void
test_string_array_count (void)
{
  GError *err = NULL;
  NpuGguf *g;
  W w;

  w_init (&w);
  w_bytes (&w, "GGUF", 4);
  w_u32 (&w, 3);
  w_u64 (&w, 0);
  w_u64 (&w, 1);
  w_key (&w, "s", NPU_GGUF_TYPE_ARRAY);
  w_u32 (&w, NPU_GGUF_TYPE_STRING);
  w_u64 (&w, G_GUINT64_CONSTANT (1) << 58);
  w_str (&w, "x");
  g = npu_gguf_open_bytes (w.b->data, w.b->len, &err);
  g_assert_null (g);
  g_assert_nonnull (strstr (err->message, "string elements does not fit"));
  g_clear_error (&err);
  w_clear (&w);
}

static void
test_file (void)
{
  GError *err = NULL;
  gchar *dir, *path;
  NpuGguf *g;
  W w;

  dir = g_dir_make_tmp ("npu-gguf-XXXXXX", &err);
  g_assert_no_error (err);
  path = g_build_filename (dir, "m.gguf", NULL);

  build_valid (&w, 3, 0);
  g_assert_true (g_file_set_contents (path, (gchar *) w.b->data, w.b->len,
          &err));
  g = npu_gguf_open (path, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_gguf_get_fd (g), >=, 0);
  check_valid (g, 3, 0, npu_gguf_get_base (g));
  npu_gguf_free (g);

  /* the error names the file by its base name */
  p_past_end (&w);
  g_assert_true (g_file_set_contents (path, (gchar *) w.b->data, w.b->len,
          &err));
  g = npu_gguf_open (path, &err);
  g_assert_null (g);
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT);
  g_assert_true (g_str_has_prefix (err->message, "m.gguf: tensor 't2': "
          "data [offset "));
  g_clear_error (&err);
  w_clear (&w);

  /* empty file */
  g_assert_true (g_file_set_contents (path, "", 0, &err));
  g = npu_gguf_open (path, &err);
  g_assert_null (g);
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT);
  g_assert_nonnull (strstr (err->message, "truncated"));
  g_clear_error (&err);

  g_unlink (path);
  g = npu_gguf_open (path, &err);
  g_assert_null (g);
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_IO);
  g_clear_error (&err);

  g = npu_gguf_open (dir, &err);
  g_assert_null (g);
  g_assert_error (err, NPU_GGUF_ERROR, NPU_GGUF_ERROR_IO);
  g_assert_nonnull (strstr (err->message, "not a regular file"));
  g_clear_error (&err);

  g_rmdir (dir);
  g_free (path);
  g_free (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/gguf/valid", test_valid);
  g_test_add_func ("/gguf/type-table", test_type_table);
  g_test_add_func ("/gguf/truncated", test_truncated);
  g_test_add_func ("/gguf/malformed", test_malformed);
  g_test_add_func ("/gguf/bad-alignment", test_bad_alignment);
  g_test_add_func ("/gguf/depth", test_depth);
  g_test_add_func ("/gguf/string-array-count", test_string_array_count);
  g_test_add_func ("/gguf/file", test_file);
  return g_test_run ();
}
