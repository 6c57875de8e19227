/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GGUF version 3 writer
 *
 * See npuggufwriter.h for the layout.  Everything is little-endian on disk;
 * the project only builds for little-endian hosts (npugguf.c rejects
 * anything else), but values are still stored byte by byte so this file
 * never depends on it.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "npuggufwriter.h"
#include "npugguf-private.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glib/gstdio.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3
#define ALIGNMENT_KEY "general.alignment"
/* Fill callbacks get this much at a time (or one row if a row is larger):
 * big enough that the per-call cost vanishes, small enough not to matter
 * next to a model's own memory. */
#define FILL_CHUNK_BYTES (4u << 20)
/* stdio buffer of the output file */
#define FILE_BUFFER_BYTES (1u << 20)

G_DEFINE_QUARK (npu - gguf - writer - error - quark, npu_gguf_writer_error);

struct _NpuGgufWriterValue
{
  NpuGgufType elem_type;
  guint64 count;
  GByteArray *body;             /* the serialised elements */
};

typedef struct
{
  gchar *name;
  guint n_dims;
  guint64 ne[NPU_GGUF_MAX_DIMS];
  guint32 type;
  gsize row_bytes;
  guint64 n_rows;
  guint64 n_bytes;
  guint64 offset;               /* relative to the data section */
  const guint8 *data;
  NpuGgufWriterFillFunc func;
  gpointer user_data;
  GDestroyNotify notify;
} WriterTensor;

struct _NpuGgufWriter
{
  GByteArray *kv;               /* serialised metadata, in order */
  guint n_kv;
  GHashTable *keys;             /* set of keys, for duplicates */
  guint32 alignment;
  gssize alignment_pos;         /* offset of general.alignment's u32 in kv */
  GPtrArray *tensors;           /* WriterTensor */
  GHashTable *tensor_names;
};

/* ------------------------------------------------------------------------ */
/* Serialisation helpers                                                     */

static void
put_u32 (GByteArray * ba, guint32 v)
{
  guint8 b[4];

  b[0] = v;
  b[1] = v >> 8;
  b[2] = v >> 16;
  b[3] = v >> 24;
  g_byte_array_append (ba, b, 4);
}

static void
put_u64 (GByteArray * ba, guint64 v)
{
  guint8 b[8];
  guint i;

  for (i = 0; i < 8; i++)
    b[i] = v >> (8 * i);
  g_byte_array_append (ba, b, 8);
}

static void
put_string (GByteArray * ba, const gchar * s, gsize len)
{
  put_u64 (ba, len);
  g_byte_array_append (ba, (const guint8 *) s, len);
}

/* Appends @count host-order elements of a fixed-size type in file order.
 * The caller checked that @type is fixed-size. */
static gboolean
put_elements (GByteArray * ba, guint32 type, const void *data, gsize count,
    const gchar * what, GError ** error)
{
  gsize size = npu_gguf_scalar_size (type);
  const guint8 *p = data;
  gsize i;

  if (type == NPU_GGUF_TYPE_BOOL) {
    /* ggml rejects any other byte in a BOOL */
    for (i = 0; i < count; i++) {
      if (p[i] > 1) {
        g_set_error (error, NPU_GGUF_WRITER_ERROR,
            NPU_GGUF_WRITER_ERROR_INVALID,
            "%s: bool element %" G_GSIZE_FORMAT " is %u, not 0 or 1", what,
            i, p[i]);
        return FALSE;
      }
    }
  }
  for (i = 0; i < count; i++) {
    guint64 v = 0;

    switch (size) {
      case 1:
        v = p[i];
        break;
      case 2:{
        guint16 t;
        memcpy (&t, p + 2 * i, 2);
        v = t;
        break;
      }
      case 4:{
        guint32 t;
        memcpy (&t, p + 4 * i, 4);
        v = t;
        break;
      }
      default:
        memcpy (&v, p + 8 * i, 8);
        break;
    }
    /* host order to little-endian, whatever the host */
    {
      guint8 b[8];
      gsize k;

      for (k = 0; k < size; k++)
        b[k] = v >> (8 * k);
      g_byte_array_append (ba, b, size);
    }
  }
  return TRUE;
}

static gboolean
check_key (NpuGgufWriter * writer, const gchar * key, GError ** error)
{
  g_return_val_if_fail (writer != NULL, FALSE);

  if (key == NULL || key[0] == '\0') {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "metadata key is empty");
    return FALSE;
  }
  if (!g_utf8_validate (key, -1, NULL)) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "metadata key is not valid UTF-8");
    return FALSE;
  }
  if (g_hash_table_contains (writer->keys, key)) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "metadata key '%s' added twice", key);
    return FALSE;
  }
  return TRUE;
}

/* Key and type tag; the value follows */
static void
begin_kv (NpuGgufWriter * writer, const gchar * key, guint32 type)
{
  g_hash_table_add (writer->keys, g_strdup (key));
  put_string (writer->kv, key, strlen (key));
  put_u32 (writer->kv, type);
  writer->n_kv++;
}

/* Scalars of fixed size, @v holding the value in its low bytes */
static gboolean
add_scalar (NpuGgufWriter * writer, const gchar * key, guint32 type,
    guint64 v, GError ** error)
{
  gsize size = npu_gguf_scalar_size (type), k;

  if (!check_key (writer, key, error))
    return FALSE;
  if (strcmp (key, ALIGNMENT_KEY) == 0) {
    /* ggml only honours (and demands) a u32 power of two here */
    if (type != NPU_GGUF_TYPE_UINT32) {
      g_set_error (error, NPU_GGUF_WRITER_ERROR,
          NPU_GGUF_WRITER_ERROR_INVALID, "'%s' must be a uint32, not %s",
          key, npu_gguf_type_name (type));
      return FALSE;
    }
    if (v == 0 || (v & (v - 1)) != 0) {
      g_set_error (error, NPU_GGUF_WRITER_ERROR,
          NPU_GGUF_WRITER_ERROR_INVALID,
          "'%s' is %" G_GUINT64_FORMAT ", not a power of two", key, v);
      return FALSE;
    }
  }
  begin_kv (writer, key, type);
  if (strcmp (key, ALIGNMENT_KEY) == 0) {
    writer->alignment = v;
    writer->alignment_pos = writer->kv->len;
  }
  for (k = 0; k < size; k++) {
    guint8 b = v >> (8 * k);
    g_byte_array_append (writer->kv, &b, 1);
  }
  return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */

static void
writer_tensor_free (gpointer p)
{
  WriterTensor *t = p;

  if (t->notify)
    t->notify (t->user_data);
  g_free (t->name);
  g_free (t);
}

NpuGgufWriter *
npu_gguf_writer_new (void)
{
  NpuGgufWriter *writer = g_new0 (NpuGgufWriter, 1);

  writer->kv = g_byte_array_new ();
  writer->keys = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  writer->alignment = NPU_GGUF_DEFAULT_ALIGNMENT;
  writer->alignment_pos = -1;
  writer->tensors = g_ptr_array_new_with_free_func (writer_tensor_free);
  writer->tensor_names = g_hash_table_new (g_str_hash, g_str_equal);
  return writer;
}

void
npu_gguf_writer_free (NpuGgufWriter * writer)
{
  if (writer == NULL)
    return;
  g_byte_array_unref (writer->kv);
  g_hash_table_unref (writer->keys);
  g_hash_table_unref (writer->tensor_names);
  g_ptr_array_unref (writer->tensors);
  g_free (writer);
}

gboolean
npu_gguf_writer_set_alignment (NpuGgufWriter * writer, guint32 alignment,
    GError ** error)
{
  g_return_val_if_fail (writer != NULL, FALSE);

  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "alignment %u is not a power of two", alignment);
    return FALSE;
  }
  if (writer->alignment_pos >= 0) {
    guint k;

    /* the key exists: patch its value in place, keeping the key order */
    for (k = 0; k < 4; k++)
      writer->kv->data[writer->alignment_pos + k] = alignment >> (8 * k);
    writer->alignment = alignment;
    return TRUE;
  }
  return add_scalar (writer, ALIGNMENT_KEY, NPU_GGUF_TYPE_UINT32, alignment,
      error);
}

guint32
npu_gguf_writer_get_alignment (const NpuGgufWriter * writer)
{
  g_return_val_if_fail (writer != NULL, NPU_GGUF_DEFAULT_ALIGNMENT);
  return writer->alignment;
}

gboolean
npu_gguf_writer_add_u8 (NpuGgufWriter * writer, const gchar * key,
    guint8 value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_UINT8, value, error);
}

gboolean
npu_gguf_writer_add_i8 (NpuGgufWriter * writer, const gchar * key,
    gint8 value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_INT8, (guint8) value, error);
}

gboolean
npu_gguf_writer_add_u16 (NpuGgufWriter * writer, const gchar * key,
    guint16 value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_UINT16, value, error);
}

gboolean
npu_gguf_writer_add_i16 (NpuGgufWriter * writer, const gchar * key,
    gint16 value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_INT16, (guint16) value, error);
}

gboolean
npu_gguf_writer_add_u32 (NpuGgufWriter * writer, const gchar * key,
    guint32 value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_UINT32, value, error);
}

gboolean
npu_gguf_writer_add_i32 (NpuGgufWriter * writer, const gchar * key,
    gint32 value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_INT32, (guint32) value, error);
}

gboolean
npu_gguf_writer_add_u64 (NpuGgufWriter * writer, const gchar * key,
    guint64 value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_UINT64, value, error);
}

gboolean
npu_gguf_writer_add_i64 (NpuGgufWriter * writer, const gchar * key,
    gint64 value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_INT64, (guint64) value, error);
}

gboolean
npu_gguf_writer_add_f32 (NpuGgufWriter * writer, const gchar * key,
    gfloat value, GError ** error)
{
  guint32 bits;

  memcpy (&bits, &value, 4);
  return add_scalar (writer, key, NPU_GGUF_TYPE_FLOAT32, bits, error);
}

gboolean
npu_gguf_writer_add_f64 (NpuGgufWriter * writer, const gchar * key,
    gdouble value, GError ** error)
{
  guint64 bits;

  memcpy (&bits, &value, 8);
  return add_scalar (writer, key, NPU_GGUF_TYPE_FLOAT64, bits, error);
}

gboolean
npu_gguf_writer_add_bool (NpuGgufWriter * writer, const gchar * key,
    gboolean value, GError ** error)
{
  return add_scalar (writer, key, NPU_GGUF_TYPE_BOOL, value ? 1 : 0, error);
}

gboolean
npu_gguf_writer_add_string (NpuGgufWriter * writer, const gchar * key,
    const gchar * value, gssize len, GError ** error)
{
  g_return_val_if_fail (value != NULL || len == 0, FALSE);

  if (!check_key (writer, key, error))
    return FALSE;
  if (len < 0)
    len = strlen (value);
  begin_kv (writer, key, NPU_GGUF_TYPE_STRING);
  put_string (writer->kv, value, len);
  return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Arrays                                                                    */

NpuGgufWriterValue *
npu_gguf_writer_value_new_array (NpuGgufType elem_type, const void *data,
    gsize count, GError ** error)
{
  NpuGgufWriterValue *v;

  g_return_val_if_fail (data != NULL || count == 0, NULL);

  if (npu_gguf_scalar_size (elem_type) == 0) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "array element type %d is not a fixed-size type (use the string "
        "array or array of arrays constructors)", (gint) elem_type);
    return NULL;
  }
  v = g_new0 (NpuGgufWriterValue, 1);
  v->elem_type = elem_type;
  v->count = count;
  v->body = g_byte_array_sized_new (count * npu_gguf_scalar_size (elem_type));
  if (!put_elements (v->body, elem_type, data, count, "array", error)) {
    npu_gguf_writer_value_free (v);
    return NULL;
  }
  return v;
}

NpuGgufWriterValue *
npu_gguf_writer_value_new_string_array (const gchar * const *strv, gssize n)
{
  NpuGgufWriterValue *v = g_new0 (NpuGgufWriterValue, 1);
  gsize i, count;

  g_return_val_if_fail (strv != NULL || n <= 0, NULL);

  count = n < 0 ? g_strv_length ((gchar **) strv) : (gsize) n;
  v->elem_type = NPU_GGUF_TYPE_STRING;
  v->count = count;
  v->body = g_byte_array_new ();
  for (i = 0; i < count; i++)
    put_string (v->body, strv[i], strlen (strv[i]));
  return v;
}

NpuGgufWriterValue *
npu_gguf_writer_value_new_array_of_arrays (void)
{
  NpuGgufWriterValue *v = g_new0 (NpuGgufWriterValue, 1);

  v->elem_type = NPU_GGUF_TYPE_ARRAY;
  v->body = g_byte_array_new ();
  return v;
}

/* An array value as it appears in the file: type, count, elements */
static void
put_array (GByteArray * ba, const NpuGgufWriterValue * v)
{
  put_u32 (ba, v->elem_type);
  put_u64 (ba, v->count);
  g_byte_array_append (ba, v->body->data, v->body->len);
}

gboolean
npu_gguf_writer_value_append (NpuGgufWriterValue * array,
    NpuGgufWriterValue * item, GError ** error)
{
  g_return_val_if_fail (array != NULL && item != NULL, FALSE);

  if (array->elem_type != NPU_GGUF_TYPE_ARRAY) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "appending to an array of %s, not an array of arrays",
        npu_gguf_type_name (array->elem_type));
    npu_gguf_writer_value_free (item);
    return FALSE;
  }
  put_array (array->body, item);
  array->count++;
  npu_gguf_writer_value_free (item);
  return TRUE;
}

void
npu_gguf_writer_value_free (NpuGgufWriterValue * value)
{
  if (value == NULL)
    return;
  g_byte_array_unref (value->body);
  g_free (value);
}

gboolean
npu_gguf_writer_add_value (NpuGgufWriter * writer, const gchar * key,
    NpuGgufWriterValue * value, GError ** error)
{
  g_return_val_if_fail (value != NULL, FALSE);

  if (!check_key (writer, key, error)) {
    npu_gguf_writer_value_free (value);
    return FALSE;
  }
  begin_kv (writer, key, NPU_GGUF_TYPE_ARRAY);
  put_array (writer->kv, value);
  npu_gguf_writer_value_free (value);
  return TRUE;
}

gboolean
npu_gguf_writer_add_array (NpuGgufWriter * writer, const gchar * key,
    NpuGgufType elem_type, const void *data, gsize count, GError ** error)
{
  NpuGgufWriterValue *v;

  if (!check_key (writer, key, error))
    return FALSE;
  v = npu_gguf_writer_value_new_array (elem_type, data, count, error);
  if (v == NULL) {
    g_prefix_error (error, "'%s': ", key);
    return FALSE;
  }
  return npu_gguf_writer_add_value (writer, key, v, error);
}

gboolean
npu_gguf_writer_add_string_array (NpuGgufWriter * writer, const gchar * key,
    const gchar * const *strv, gssize n, GError ** error)
{
  if (!check_key (writer, key, error))
    return FALSE;
  return npu_gguf_writer_add_value (writer, key,
      npu_gguf_writer_value_new_string_array (strv, n), error);
}

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */

/* ggml's block sizes and bytes per block (ggml.c type_traits).  The
 * writer does not interpret the bytes; this is only for the sizes. */
static gboolean
type_info (guint32 type, guint * block, gsize * size)
{
  static const struct
  {
    guint32 type;
    guint block;
    guint size;
  } table[] = {
    {NPU_GGML_TYPE_F32, 1, 4},
    {NPU_GGML_TYPE_F16, 1, 2},
    {NPU_GGML_TYPE_Q4_0, 32, 18},
    {NPU_GGML_TYPE_Q4_1, 32, 20},
    {NPU_GGML_TYPE_Q5_0, 32, 22},
    {NPU_GGML_TYPE_Q5_1, 32, 24},
    {NPU_GGML_TYPE_Q8_0, 32, 34},
    {NPU_GGML_TYPE_Q8_1, 32, 36},
    {NPU_GGML_TYPE_Q2_K, 256, 84},
    {NPU_GGML_TYPE_Q3_K, 256, 110},
    {NPU_GGML_TYPE_Q4_K, 256, 144},
    {NPU_GGML_TYPE_Q5_K, 256, 176},
    {NPU_GGML_TYPE_Q6_K, 256, 210},
    {NPU_GGML_TYPE_Q8_K, 256, 292},
    {NPU_GGML_TYPE_I8, 1, 1},
    {NPU_GGML_TYPE_I16, 1, 2},
    {NPU_GGML_TYPE_I32, 1, 4},
    {NPU_GGML_TYPE_I64, 1, 8},
    {NPU_GGML_TYPE_F64, 1, 8},
    {NPU_GGML_TYPE_BF16, 1, 2},
    {NPU_GGML_TYPE_MXFP4, 32, 17},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (table); i++) {
    if (table[i].type == type) {
      *block = table[i].block;
      *size = table[i].size;
      return TRUE;
    }
  }
  return FALSE;
}

gsize
npu_gguf_writer_row_size (guint32 type, guint64 ne0)
{
  guint block;
  gsize size;

  if (!type_info (type, &block, &size) || ne0 == 0 || ne0 % block != 0)
    return 0;
  if (ne0 / block > G_MAXSIZE / size)
    return 0;
  return ne0 / block * size;
}

static WriterTensor *
new_tensor (NpuGgufWriter * writer, const gchar * name, guint n_dims,
    const guint64 * ne, guint32 type, GError ** error)
{
  WriterTensor *t;
  guint block, i;
  gsize size;
  guint64 n_rows = 1, total;

  g_return_val_if_fail (writer != NULL, NULL);

  if (name == NULL || name[0] == '\0') {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "tensor name is empty");
    return NULL;
  }
  if (strlen (name) > NPU_GGUF_WRITER_MAX_NAME
      || !g_utf8_validate (name, -1, NULL)) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "tensor name '%s' is longer than %d bytes or not UTF-8", name,
        NPU_GGUF_WRITER_MAX_NAME);
    return NULL;
  }
  if (g_hash_table_contains (writer->tensor_names, name)) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s' added twice", name);
    return NULL;
  }
  if (n_dims < 1 || n_dims > NPU_GGUF_MAX_DIMS) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': %u dimensions, must be 1..%d", name, n_dims,
        NPU_GGUF_MAX_DIMS);
    return NULL;
  }
  if (!type_info (type, &block, &size)) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': unknown ggml type %u", name, type);
    return NULL;
  }
  for (i = 0; i < n_dims; i++) {
    /* ggml keeps element counts in int64_t */
    if (ne[i] == 0 || ne[i] > G_MAXINT64) {
      g_set_error (error, NPU_GGUF_WRITER_ERROR,
          NPU_GGUF_WRITER_ERROR_INVALID, "tensor '%s': ne[%u] = %"
          G_GUINT64_FORMAT " is out of range", name, i, ne[i]);
      return NULL;
    }
    if (i > 0) {
      if (n_rows > G_MAXINT64 / ne[i]) {
        g_set_error (error, NPU_GGUF_WRITER_ERROR,
            NPU_GGUF_WRITER_ERROR_INVALID, "tensor '%s': too many elements",
            name);
        return NULL;
      }
      n_rows *= ne[i];
    }
  }
  if (ne[0] % block != 0) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': ne[0] = %" G_GUINT64_FORMAT " is not a multiple of "
        "%s's block size %u", name, ne[0], npu_ggml_type_name (type), block);
    return NULL;
  }
  size = npu_gguf_writer_row_size (type, ne[0]);
  if (size == 0 || n_rows > G_MAXINT64 / size || n_rows > G_MAXINT64 / ne[0]) {
    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_INVALID,
        "tensor '%s': too large", name);
    return NULL;
  }
  total = n_rows * size;

  t = g_new0 (WriterTensor, 1);
  t->name = g_strdup (name);
  t->n_dims = n_dims;
  for (i = 0; i < NPU_GGUF_MAX_DIMS; i++)
    t->ne[i] = i < n_dims ? ne[i] : 1;
  t->type = type;
  t->row_bytes = size;
  t->n_rows = n_rows;
  t->n_bytes = total;
  return t;
}

static void
append_tensor (NpuGgufWriter * writer, WriterTensor * t)
{
  g_ptr_array_add (writer->tensors, t);
  g_hash_table_add (writer->tensor_names, t->name);
}

gboolean
npu_gguf_writer_add_tensor (NpuGgufWriter * writer, const gchar * name,
    guint n_dims, const guint64 * ne, guint32 type, const void *data,
    GError ** error)
{
  WriterTensor *t;

  g_return_val_if_fail (ne != NULL && data != NULL, FALSE);

  t = new_tensor (writer, name, n_dims, ne, type, error);
  if (t == NULL)
    return FALSE;
  t->data = data;
  append_tensor (writer, t);
  return TRUE;
}

gboolean
npu_gguf_writer_add_tensor_func (NpuGgufWriter * writer, const gchar * name,
    guint n_dims, const guint64 * ne, guint32 type, NpuGgufWriterFillFunc func,
    gpointer user_data, GDestroyNotify notify, GError ** error)
{
  WriterTensor *t;

  g_return_val_if_fail (ne != NULL && func != NULL, FALSE);

  t = new_tensor (writer, name, n_dims, ne, type, error);
  if (t == NULL) {
    /* the writer owns @user_data from the call on, as the header says */
    if (notify)
      notify (user_data);
    return FALSE;
  }
  t->func = func;
  t->user_data = user_data;
  t->notify = notify;
  append_tensor (writer, t);
  return TRUE;
}

guint
npu_gguf_writer_n_kv (const NpuGgufWriter * writer)
{
  return writer->n_kv;
}

guint
npu_gguf_writer_n_tensors (const NpuGgufWriter * writer)
{
  return writer->tensors->len;
}

static guint64
align_up (guint64 v, guint64 a)
{
  return (v + a - 1) / a * a;
}

/* Lays out the data section (tensor offsets); returns its size */
static guint64
layout (const NpuGgufWriter * writer)
{
  guint64 off = 0;
  guint i;

  for (i = 0; i < writer->tensors->len; i++) {
    WriterTensor *t = g_ptr_array_index (writer->tensors, i);

    t->offset = off;
    off = align_up (off + t->n_bytes, writer->alignment);
  }
  return off;
}

static guint64
header_size (const NpuGgufWriter * writer)
{
  guint64 n = 4 + 4 + 8 + 8 + writer->kv->len;
  guint i;

  for (i = 0; i < writer->tensors->len; i++) {
    WriterTensor *t = g_ptr_array_index (writer->tensors, i);

    n += 8 + strlen (t->name) + 4 + 8 * t->n_dims + 4 + 8;
  }
  return n;
}

guint64
npu_gguf_writer_get_data_size (const NpuGgufWriter * writer)
{
  g_return_val_if_fail (writer != NULL, 0);
  return layout (writer);
}

guint64
npu_gguf_writer_get_file_size (const NpuGgufWriter * writer)
{
  g_return_val_if_fail (writer != NULL, 0);
  return align_up (header_size (writer), writer->alignment) + layout (writer);
}

/* ------------------------------------------------------------------------ */
/* Output                                                                    */

typedef gboolean (*SinkFunc) (gpointer sink, const void *buf, gsize n,
    GError ** error);

typedef struct
{
  FILE *fp;
  const gchar *path;            /* the final name, for messages */
} FileSink;

static gboolean
file_sink (gpointer sink, const void *buf, gsize n, GError ** error)
{
  FileSink *fs = sink;

  if (n > 0 && fwrite (buf, 1, n, fs->fp) != n) {
    int e = errno;

    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_IO,
        "%s: write failed: %s", fs->path, g_strerror (e));
    return FALSE;
  }
  return TRUE;
}

static gboolean
bytes_sink (gpointer sink, const void *buf, gsize n, GError ** error)
{
  g_byte_array_append (sink, buf, n);
  return TRUE;
}

static gboolean
put_zeros (SinkFunc fn, gpointer sink, guint64 n, GError ** error)
{
  static const guint8 zeros[4096];

  while (n > 0) {
    gsize k = MIN (n, sizeof (zeros));

    if (!fn (sink, zeros, k, error))
      return FALSE;
    n -= k;
  }
  return TRUE;
}

static gboolean
write_all (NpuGgufWriter * writer, SinkFunc fn, gpointer sink, GError ** error)
{
  GByteArray *hdr = g_byte_array_new ();
  guint8 *chunk = NULL;
  gsize chunk_size = 0;
  guint64 hsize, pos;
  gboolean ok = FALSE;
  guint i, d;

  layout (writer);

  /* header and tensor infos, then padding to the data section */
  g_byte_array_append (hdr, (const guint8 *) GGUF_MAGIC, 4);
  put_u32 (hdr, GGUF_VERSION);
  put_u64 (hdr, writer->tensors->len);
  put_u64 (hdr, writer->n_kv);
  g_byte_array_append (hdr, writer->kv->data, writer->kv->len);
  for (i = 0; i < writer->tensors->len; i++) {
    WriterTensor *t = g_ptr_array_index (writer->tensors, i);

    put_string (hdr, t->name, strlen (t->name));
    put_u32 (hdr, t->n_dims);
    for (d = 0; d < t->n_dims; d++)
      put_u64 (hdr, t->ne[d]);
    put_u32 (hdr, t->type);
    put_u64 (hdr, t->offset);
  }
  hsize = hdr->len;
  g_assert (hsize == header_size (writer));
  if (!fn (sink, hdr->data, hdr->len, error))
    goto out;
  if (!put_zeros (fn, sink, align_up (hsize, writer->alignment) - hsize, error))
    goto out;

  pos = 0;
  for (i = 0; i < writer->tensors->len; i++) {
    WriterTensor *t = g_ptr_array_index (writer->tensors, i);

    g_assert (pos == t->offset);
    if (t->data) {
      if (!fn (sink, t->data, t->n_bytes, error))
        goto out;
    } else {
      guint64 rows_per_chunk = MAX (1, FILL_CHUNK_BYTES / t->row_bytes);
      guint64 row = 0;

      rows_per_chunk = MIN (rows_per_chunk, t->n_rows);
      if (rows_per_chunk * t->row_bytes > chunk_size) {
        g_free (chunk);
        chunk_size = rows_per_chunk * t->row_bytes;
        chunk = g_malloc (chunk_size);
      }
      while (row < t->n_rows) {
        guint64 n = MIN (rows_per_chunk, t->n_rows - row);
        gsize bytes = n * t->row_bytes;
        GError *err = NULL;

        if (!t->func (t->name, chunk, row * t->row_bytes, bytes,
                t->user_data, &err)) {
          if (err)
            g_propagate_prefixed_error (error, err, "tensor '%s': ", t->name);
          else
            g_set_error (error, NPU_GGUF_WRITER_ERROR,
                NPU_GGUF_WRITER_ERROR_FILL,
                "tensor '%s': fill callback failed at byte %" G_GUINT64_FORMAT,
                t->name, row * t->row_bytes);
          goto out;
        }
        if (!fn (sink, chunk, bytes, error))
          goto out;
        row += n;
      }
    }
    pos += t->n_bytes;
    if (!put_zeros (fn, sink, align_up (pos, writer->alignment) - pos, error))
      goto out;
    pos = align_up (pos, writer->alignment);
  }
  ok = TRUE;

out:
  g_free (chunk);
  g_byte_array_unref (hdr);
  return ok;
}

gboolean
npu_gguf_writer_write_file (NpuGgufWriter * writer, const gchar * path,
    GError ** error)
{
  FileSink fs;
  gchar *tmp;
  gchar *buf;
  int fd;
  gboolean ok;

  g_return_val_if_fail (writer != NULL && path != NULL, FALSE);

  /* beside the target, so that the final rename is atomic */
  tmp = g_strconcat (path, ".XXXXXX", NULL);
  fd = g_mkstemp (tmp);
  if (fd < 0) {
    int e = errno;

    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_IO,
        "%s: cannot create a temporary file: %s", path, g_strerror (e));
    g_free (tmp);
    return FALSE;
  }
  /* mkstemp makes 0600; a model file is ordinary data */
  if (fchmod (fd, 0644) != 0) {
    /* not fatal: the file is still usable by its owner */
  }
  fs.fp = fdopen (fd, "wb");
  fs.path = path;
  if (fs.fp == NULL) {
    int e = errno;

    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_IO,
        "%s: fdopen failed: %s", path, g_strerror (e));
    close (fd);
    g_unlink (tmp);
    g_free (tmp);
    return FALSE;
  }
  buf = g_malloc (FILE_BUFFER_BYTES);
  setvbuf (fs.fp, buf, _IOFBF, FILE_BUFFER_BYTES);

  ok = write_all (writer, file_sink, &fs, error);
  if (fflush (fs.fp) != 0 && ok) {
    int e = errno;

    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_IO,
        "%s: write failed: %s", path, g_strerror (e));
    ok = FALSE;
  }
  if (fclose (fs.fp) != 0 && ok) {
    int e = errno;

    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_IO,
        "%s: close failed: %s", path, g_strerror (e));
    ok = FALSE;
  }
  g_free (buf);
  if (ok && g_rename (tmp, path) != 0) {
    int e = errno;

    g_set_error (error, NPU_GGUF_WRITER_ERROR, NPU_GGUF_WRITER_ERROR_IO,
        "%s: rename failed: %s", path, g_strerror (e));
    ok = FALSE;
  }
  if (!ok)
    g_unlink (tmp);
  g_free (tmp);
  return ok;
}

GBytes *
npu_gguf_writer_write_bytes (NpuGgufWriter * writer, GError ** error)
{
  GByteArray *ba;

  g_return_val_if_fail (writer != NULL, NULL);

  ba = g_byte_array_sized_new (npu_gguf_writer_get_file_size (writer));
  if (!write_all (writer, bytes_sink, ba, error)) {
    g_byte_array_unref (ba);
    return NULL;
  }
  return g_byte_array_free_to_bytes (ba);
}
