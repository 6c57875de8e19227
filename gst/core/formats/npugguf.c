/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GGUF model file reader
 *
 * Parsing is a single forward pass over the header with a bounds-checked
 * cursor.  The rule that keeps hostile files harmless: every count read from
 * the file is checked against the bytes still left (using the smallest
 * possible encoding of one element) before anything is allocated or looped
 * over, and every multiplication of untrusted numbers is overflow-checked.
 */
#include "npugguf.h"
#include "npugguf-private.h"
#include "npufilemap.h"
#include "npubyteorder-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Smallest encodings, used to bound counts before allocating:
 * a kv is u64 key length + u32 type + a 1-byte value, a tensor info is u64
 * name length + u32 n_dims + u32 type + u64 offset (with n_dims 0), an array
 * element that is a string is its u64 length, one that is an array is u32
 * type + u64 count. */
#define MIN_KV_BYTES 13
#define MIN_TENSOR_INFO_BYTES 24
#define MIN_STRING_BYTES 8
#define MIN_ARRAY_BYTES 12

/* Names in error messages are cut to this many bytes: a hostile file may
 * have megabyte-long keys. */
#define MAX_NAME_IN_MESSAGE 80

typedef struct
{
  gchar *key;
  NpuGgufValue value;
  /* NUL-terminated copy of a STRING value, else NULL */
  gchar *cstr;
} NpuGgufKv;

struct _NpuGguf
{
  gchar *name;                  /* for error messages */
  int fd;
  const guint8 *base;
  gsize size;
  gboolean mapped;

  guint32 version;
  gsize alignment;
  gsize data_offset;

  NpuGgufKv *kvs;
  guint n_kv;
  GHashTable *kv_index;         /* key -> NpuGgufKv * */

  NpuGgufTensor *tensors;
  guint n_tensors;
  GHashTable *tensor_index;     /* name -> NpuGgufTensor * */

  GStringChunk *strings;        /* keys, names, cstr copies */
  GPtrArray *item_arrays;       /* NpuGgufValue[] of string/array arrays */
};

typedef struct
{
  const guint8 *base;
  gsize size;
  gsize pos;
  const gchar *name;
} Reader;

/* Spelled out: an indenter turns G_DEFINE_QUARK's dashed name into
 * something else. */
GQuark
npu_gguf_error_quark (void)
{
  return g_quark_from_static_string ("npu-gguf-error-quark");
}

/* ------------------------------------------------------------------------ */
/* Type tables                                                               */

typedef struct
{
  const gchar *name;
  guint block_size;             /* 0: no such type */
  guint type_size;
} GgmlTypeInfo;

/* ggml's type_traits (ggml.c) and block structs (ggml-common.h):
 * K-quants and most IQ types use 256-value super-blocks. */
static const GgmlTypeInfo ggml_types[] = {
  [NPU_GGML_TYPE_F32] = {"f32", 1, 4},
  [NPU_GGML_TYPE_F16] = {"f16", 1, 2},
  [NPU_GGML_TYPE_Q4_0] = {"q4_0", 32, 18},
  [NPU_GGML_TYPE_Q4_1] = {"q4_1", 32, 20},
  [NPU_GGML_TYPE_Q5_0] = {"q5_0", 32, 22},
  [NPU_GGML_TYPE_Q5_1] = {"q5_1", 32, 24},
  [NPU_GGML_TYPE_Q8_0] = {"q8_0", 32, 34},
  [NPU_GGML_TYPE_Q8_1] = {"q8_1", 32, 36},
  [NPU_GGML_TYPE_Q2_K] = {"q2_K", 256, 84},
  [NPU_GGML_TYPE_Q3_K] = {"q3_K", 256, 110},
  [NPU_GGML_TYPE_Q4_K] = {"q4_K", 256, 144},
  [NPU_GGML_TYPE_Q5_K] = {"q5_K", 256, 176},
  [NPU_GGML_TYPE_Q6_K] = {"q6_K", 256, 210},
  [NPU_GGML_TYPE_Q8_K] = {"q8_K", 256, 292},
  [NPU_GGML_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66},
  [NPU_GGML_TYPE_IQ2_XS] = {"iq2_xs", 256, 74},
  [NPU_GGML_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98},
  [NPU_GGML_TYPE_IQ1_S] = {"iq1_s", 256, 50},
  [NPU_GGML_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},
  [NPU_GGML_TYPE_IQ3_S] = {"iq3_s", 256, 110},
  [NPU_GGML_TYPE_IQ2_S] = {"iq2_s", 256, 82},
  [NPU_GGML_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
  [NPU_GGML_TYPE_I8] = {"i8", 1, 1},
  [NPU_GGML_TYPE_I16] = {"i16", 1, 2},
  [NPU_GGML_TYPE_I32] = {"i32", 1, 4},
  [NPU_GGML_TYPE_I64] = {"i64", 1, 8},
  [NPU_GGML_TYPE_F64] = {"f64", 1, 8},
  [NPU_GGML_TYPE_IQ1_M] = {"iq1_m", 256, 56},
  [NPU_GGML_TYPE_BF16] = {"bf16", 1, 2},
  [NPU_GGML_TYPE_TQ1_0] = {"tq1_0", 256, 54},
  [NPU_GGML_TYPE_TQ2_0] = {"tq2_0", 256, 66},
  [NPU_GGML_TYPE_MXFP4] = {"mxfp4", 32, 17},
  [NPU_GGML_TYPE_NVFP4] = {"nvfp4", 64, 36},
};

const gchar *
npu_ggml_type_name (guint32 type)
{
  if (type >= G_N_ELEMENTS (ggml_types) || ggml_types[type].block_size == 0)
    return NULL;
  return ggml_types[type].name;
}

gboolean
npu_ggml_type_info (guint32 type, guint * block_size, gsize * type_size)
{
  if (type >= G_N_ELEMENTS (ggml_types) || ggml_types[type].block_size == 0)
    return FALSE;
  if (block_size)
    *block_size = ggml_types[type].block_size;
  if (type_size)
    *type_size = ggml_types[type].type_size;
  return TRUE;
}

static const gchar *const gguf_type_names[] = {
  "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
  "string", "array", "uint64", "int64", "float64",
};

const gchar *
npu_gguf_type_name (guint32 type)
{
  if (type >= G_N_ELEMENTS (gguf_type_names))
    return NULL;
  return gguf_type_names[type];
}

/* Decodes one fixed-size value at @p (the caller checked the bytes) */
static void
decode_scalar (NpuGgufType type, const guint8 * p, NpuGgufValue * out)
{
  guint32 u32;
  guint64 u64;
  gfloat f;
  gdouble d;

  out->type = type;
  switch (type) {
    case NPU_GGUF_TYPE_UINT8:
      out->v.u = p[0];
      break;
    case NPU_GGUF_TYPE_INT8:
      out->v.i = (gint8) p[0];
      break;
    case NPU_GGUF_TYPE_UINT16:
      out->v.u = npu_load_le16 (p);
      break;
    case NPU_GGUF_TYPE_INT16:
      out->v.i = (gint16) npu_load_le16 (p);
      break;
    case NPU_GGUF_TYPE_UINT32:
      out->v.u = npu_load_le32 (p);
      break;
    case NPU_GGUF_TYPE_INT32:
      out->v.i = (gint32) npu_load_le32 (p);
      break;
    case NPU_GGUF_TYPE_FLOAT32:
      u32 = npu_load_le32 (p);
      memcpy (&f, &u32, 4);
      out->v.f = f;
      break;
    case NPU_GGUF_TYPE_BOOL:
      out->v.b = p[0] != 0;
      break;
    case NPU_GGUF_TYPE_UINT64:
      out->v.u = npu_load_le64 (p);
      break;
    case NPU_GGUF_TYPE_INT64:
      out->v.i = (gint64) npu_load_le64 (p);
      break;
    case NPU_GGUF_TYPE_FLOAT64:
      u64 = npu_load_le64 (p);
      memcpy (&d, &u64, 8);
      out->v.f = d;
      break;
    default:
      g_assert_not_reached ();
  }
}

/* ------------------------------------------------------------------------ */
/* Error helpers                                                             */

/* Printable, bounded form of a name from the file for messages */
static gchar *
describe (const gchar * s, gsize len)
{
  gchar *cut, *esc, *ret;
  gboolean truncated = len > MAX_NAME_IN_MESSAGE;

  cut = g_strndup (s, truncated ? MAX_NAME_IN_MESSAGE : len);
  /* g_strndup stops at a NUL; names with NULs are rejected anyway */
  esc = g_strescape (cut, NULL);
  ret = g_strdup_printf ("'%s'%s", esc, truncated ? "..." : "");
  g_free (esc);
  g_free (cut);
  return ret;
}

static gboolean
need (Reader * r, gsize n, const gchar * what, GError ** error)
{
  if (r->size - r->pos >= n)
    return TRUE;
  g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
      "%s: truncated: %s at byte %" G_GSIZE_FORMAT " needs %" G_GSIZE_FORMAT
      " bytes, the file ends at byte %" G_GSIZE_FORMAT, r->name, what,
      r->pos, n, r->size);
  return FALSE;
}

static gboolean
read_u32 (Reader * r, guint32 * v, const gchar * what, GError ** error)
{
  if (!need (r, 4, what, error))
    return FALSE;
  *v = npu_load_le32 (r->base + r->pos);
  r->pos += 4;
  return TRUE;
}

static gboolean
read_u64 (Reader * r, guint64 * v, const gchar * what, GError ** error)
{
  if (!need (r, 8, what, error))
    return FALSE;
  *v = npu_load_le64 (r->base + r->pos);
  r->pos += 8;
  return TRUE;
}

static gboolean
read_string (Reader * r, const gchar ** s, gsize * len, const gchar * what,
    GError ** error)
{
  guint64 n;
  gsize at = r->pos;

  if (!read_u64 (r, &n, what, error))
    return FALSE;
  if (n > r->size - r->pos) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s at byte %" G_GSIZE_FORMAT " has length %" G_GUINT64_FORMAT
        ", past the end of the file (%" G_GSIZE_FORMAT " bytes)", r->name,
        what, at, n, r->size);
    return FALSE;
  }
  *s = (const gchar *) r->base + r->pos;
  *len = n;
  r->pos += n;
  return TRUE;
}

/* ------------------------------------------------------------------------ */
/* Metadata                                                                  */

static gboolean
check_bools (Reader * r, const guint8 * p, gsize n, const gchar * ctx,
    GError ** error)
{
  gsize i;

  for (i = 0; i < n; i++) {
    if (p[i] > 1) {
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
          "%s: %s: bool at byte %" G_GSIZE_FORMAT " is %u, not 0 or 1",
          r->name, ctx, (gsize) (p + i - r->base), p[i]);
      return FALSE;
    }
  }
  return TRUE;
}

/* Parses a value of @type at the cursor.  @depth is the array nesting
 * level of the value (0 for a top-level value); @ctx names the key. */
static gboolean
parse_value (NpuGguf * g, Reader * r, guint32 type, guint depth,
    NpuGgufValue * out, const gchar * ctx, GError ** error)
{
  gsize at = r->pos, sz;
  guint32 elem_type;
  guint64 count, i;
  NpuGgufValue *items;

  memset (out, 0, sizeof (*out));

  if (type > NPU_GGUF_TYPE_FLOAT64) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s: unknown value type %u before byte %" G_GSIZE_FORMAT,
        r->name, ctx, type, at);
    return FALSE;
  }

  sz = npu_gguf_scalar_size (type);
  if (sz) {
    if (!need (r, sz, ctx, error))
      return FALSE;
    if (type == NPU_GGUF_TYPE_BOOL
        && !check_bools (r, r->base + r->pos, 1, ctx, error))
      return FALSE;
    decode_scalar (type, r->base + r->pos, out);
    r->pos += sz;
    return TRUE;
  }

  if (type == NPU_GGUF_TYPE_STRING) {
    out->type = NPU_GGUF_TYPE_STRING;
    return read_string (r, &out->v.str.data, &out->v.str.len, ctx, error);
  }

  /* ARRAY */
  if (depth + 1 > NPU_GGUF_MAX_ARRAY_DEPTH) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s: arrays nested deeper than %d at byte %" G_GSIZE_FORMAT,
        r->name, ctx, NPU_GGUF_MAX_ARRAY_DEPTH, at);
    return FALSE;
  }
  if (!read_u32 (r, &elem_type, ctx, error)
      || !read_u64 (r, &count, ctx, error))
    return FALSE;
  if (elem_type > NPU_GGUF_TYPE_FLOAT64) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s: array at byte %" G_GSIZE_FORMAT
        " has unknown element type %u", r->name, ctx, at, elem_type);
    return FALSE;
  }

  out->type = NPU_GGUF_TYPE_ARRAY;
  out->v.arr.type = elem_type;
  out->v.arr.count = count;
  out->v.arr.data = r->base + r->pos;

  sz = npu_gguf_scalar_size (elem_type);
  if (sz == 0)
    sz = elem_type == NPU_GGUF_TYPE_STRING ? MIN_STRING_BYTES : MIN_ARRAY_BYTES;
  /* Divide rather than multiply: count * sz may overflow */
  if (count > (r->size - r->pos) / sz) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s: array at byte %" G_GSIZE_FORMAT " of %" G_GUINT64_FORMAT
        " %s elements does not fit in the %" G_GSIZE_FORMAT
        " bytes left in the file", r->name, ctx, at, count,
        gguf_type_names[elem_type], r->size - r->pos);
    return FALSE;
  }

  if (elem_type != NPU_GGUF_TYPE_STRING && elem_type != NPU_GGUF_TYPE_ARRAY) {
    if (elem_type == NPU_GGUF_TYPE_BOOL
        && !check_bools (r, r->base + r->pos, count, ctx, error))
      return FALSE;
    r->pos += count * sz;
    out->v.arr.size = count * sz;
    return TRUE;
  }

  /* count is bounded by the file size / 8 here */
  items = g_new0 (NpuGgufValue, count);
  g_ptr_array_add (g->item_arrays, items);
  out->v.arr.items = items;
  for (i = 0; i < count; i++) {
    if (elem_type == NPU_GGUF_TYPE_STRING) {
      items[i].type = NPU_GGUF_TYPE_STRING;
      if (!read_string (r, &items[i].v.str.data, &items[i].v.str.len, ctx,
              error))
        return FALSE;
    } else {
      /* An element of an array of arrays is an array without its own type
       * tag: element type + count + items (gguf.md's gguf_metadata_value_t
       * union; gguf-py reads it the same way) */
      if (!parse_value (g, r, NPU_GGUF_TYPE_ARRAY, depth + 1, &items[i], ctx,
              error))
        return FALSE;
    }
  }
  out->v.arr.size = r->pos - (out->v.arr.data - r->base);
  return TRUE;
}

/* ------------------------------------------------------------------------ */

static void
npu_gguf_free_internal (NpuGguf * g)
{
  if (g->kv_index)
    g_hash_table_destroy (g->kv_index);
  if (g->tensor_index)
    g_hash_table_destroy (g->tensor_index);
  if (g->item_arrays)
    g_ptr_array_free (g->item_arrays, TRUE);
  if (g->strings)
    g_string_chunk_free (g->strings);
  g_free (g->kvs);
  g_free (g->tensors);
  if (g->mapped)
    munmap ((gpointer) g->base, g->size);
  if (g->fd >= 0)
    close (g->fd);
  g_free (g->name);
  g_free (g);
}

void
npu_gguf_free (NpuGguf * gguf)
{
  if (gguf)
    npu_gguf_free_internal (gguf);
}

static gint
compare_by_offset (gconstpointer a, gconstpointer b)
{
  const NpuGgufTensor *ta = *(const NpuGgufTensor * const *) a;
  const NpuGgufTensor *tb = *(const NpuGgufTensor * const *) b;

  return ta->offset < tb->offset ? -1 : ta->offset > tb->offset;
}

/* Magic, version and the two counts, each count bounded by the bytes left */
static gboolean
parse_preamble (NpuGguf * g, Reader * r, guint64 * n_tensors, guint64 * n_kv,
    GError ** error)
{
  if (!need (r, 4, "magic", error))
    return FALSE;
  if (memcmp (g->base, "GGUF", 4) != 0) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: not a GGUF file (magic is %02x %02x %02x %02x, expected "
        "\"GGUF\")", g->name, g->base[0], g->base[1], g->base[2], g->base[3]);
    return FALSE;
  }
  r->pos = 4;
  if (!read_u32 (r, &g->version, "version", error))
    return FALSE;
  if (g->version == 1) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_UNSUPPORTED,
        "%s: GGUF version 1 (32-bit counts) is not supported, only "
        "versions 2 and 3; convert the file with a current llama.cpp", g->name);
    return FALSE;
  }
  if (g->version != 2 && g->version != 3) {
    if (GUINT32_SWAP_LE_BE (g->version) == 2
        || GUINT32_SWAP_LE_BE (g->version) == 3)
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_UNSUPPORTED,
          "%s: big-endian GGUF files are not supported", g->name);
    else
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_UNSUPPORTED,
          "%s: unsupported GGUF version %u (only 2 and 3)", g->name,
          g->version);
    return FALSE;
  }
  if (!read_u64 (r, n_tensors, "tensor count", error)
      || !read_u64 (r, n_kv, "metadata kv count", error))
    return FALSE;

  /* Bound the counts by the bytes left before allocating for them.  The
   * tensor infos come after the kvs, so both share what is left. */
  if (*n_kv > (r->size - r->pos) / MIN_KV_BYTES || *n_kv > G_MAXUINT) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: metadata kv count %" G_GUINT64_FORMAT " (byte 16) cannot fit "
        "in the %" G_GSIZE_FORMAT " bytes left in the file", g->name, *n_kv,
        r->size - r->pos);
    return FALSE;
  }
  if (*n_tensors > (r->size - r->pos) / MIN_TENSOR_INFO_BYTES
      || *n_tensors > G_MAXUINT) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: tensor count %" G_GUINT64_FORMAT " (byte 8) cannot fit in the %"
        G_GSIZE_FORMAT " bytes left in the file", g->name, *n_tensors,
        r->size - r->pos);
    return FALSE;
  }
  return TRUE;
}

/* The metadata key-values, indexed by key */
static gboolean
parse_kvs (NpuGguf * g, Reader * r, guint64 n_kv, GError ** error)
{
  guint64 i;
  gboolean ok;

  g->kvs = g_new0 (NpuGgufKv, n_kv);
  for (i = 0; i < n_kv; i++) {
    NpuGgufKv *kv = &g->kvs[i];
    const gchar *key;
    gsize key_len, at = r->pos;
    guint32 type;
    gchar *what, *desc;

    what = g_strdup_printf ("key of kv %" G_GUINT64_FORMAT, i);
    ok = read_string (r, &key, &key_len, what, error);
    g_free (what);
    if (!ok)
      return FALSE;
    if (key_len == 0 || memchr (key, 0, key_len)) {
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
          "%s: key of kv %" G_GUINT64_FORMAT " at byte %" G_GSIZE_FORMAT
          " %s", g->name, i, at, key_len ? "has a NUL byte" : "is empty");
      return FALSE;
    }
    kv->key = g_string_chunk_insert_len (g->strings, key, key_len);
    desc = describe (key, key_len);
    if (g_hash_table_contains (g->kv_index, kv->key)) {
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
          "%s: duplicate key %s at byte %" G_GSIZE_FORMAT, g->name, desc, at);
      g_free (desc);
      return FALSE;
    }
    what = g_strdup_printf ("key %s", desc);
    g_free (desc);
    ok = read_u32 (r, &type, what, error)
        && parse_value (g, r, type, 0, &kv->value, what, error);
    g_free (what);
    if (!ok)
      return FALSE;
    if (type == NPU_GGUF_TYPE_STRING)
      kv->cstr = g_string_chunk_insert_len (g->strings,
          kv->value.v.str.data, kv->value.v.str.len);
    g_hash_table_insert (g->kv_index, kv->key, kv);
    g->n_kv++;
  }
  return TRUE;
}

/* general.alignment, or the default */
static gboolean
read_alignment (NpuGguf * g, GError ** error)
{
  const NpuGgufKv *akv;

  g->alignment = NPU_GGUF_DEFAULT_ALIGNMENT;
  akv = g_hash_table_lookup (g->kv_index, "general.alignment");
  if (akv) {
    /* ggml insists on u32 here; so do we, a wrong type means a broken
     * writer and we would rather not guess */
    if (akv->value.type != NPU_GGUF_TYPE_UINT32) {
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
          "%s: general.alignment is %s, must be uint32", g->name,
          gguf_type_names[akv->value.type]);
      return FALSE;
    }
    if (akv->value.v.u == 0 || (akv->value.v.u & (akv->value.v.u - 1))) {
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
          "%s: general.alignment %" G_GUINT64_FORMAT
          " is not a power of two", g->name, akv->value.v.u);
      return FALSE;
    }
    g->alignment = akv->value.v.u;
  }
  return TRUE;
}

/* Tensor info @i: name, shape, type, size and (relative) offset */
static gboolean
parse_tensor_info (NpuGguf * g, Reader * r, guint64 i, GError ** error)
{
  NpuGgufTensor *t = &g->tensors[i];
  const gchar *name;
  gsize name_len, at = r->pos;
  guint32 n_dims, type;
  guint64 nelem = 1, rows, n_bytes, rel;
  guint block_size, d;
  gsize type_size;
  gchar *what, *desc;
  gboolean ok;

  what = g_strdup_printf ("name of tensor %" G_GUINT64_FORMAT, i);
  ok = read_string (r, &name, &name_len, what, error);
  g_free (what);
  if (!ok)
    return FALSE;
  if (name_len == 0 || memchr (name, 0, name_len)) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: name of tensor %" G_GUINT64_FORMAT " at byte %" G_GSIZE_FORMAT
        " %s", g->name, i, at, name_len ? "has a NUL byte" : "is empty");
    return FALSE;
  }
  t->name = g_string_chunk_insert_len (g->strings, name, name_len);
  desc = describe (name, name_len);
  what = g_strdup_printf ("tensor %s", desc);
  g_free (desc);

  if (g_hash_table_contains (g->tensor_index, t->name)) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: duplicate %s at byte %" G_GSIZE_FORMAT, g->name, what, at);
    goto fail;
  }
  if (!read_u32 (r, &n_dims, what, error))
    goto fail;
  if (n_dims > NPU_GGUF_MAX_DIMS) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s: %u dimensions, at most %d", g->name, what, n_dims,
        NPU_GGUF_MAX_DIMS);
    goto fail;
  }
  t->n_dims = n_dims;
  for (d = 0; d < NPU_GGUF_MAX_DIMS; d++)
    t->ne[d] = 1;
  for (d = 0; d < n_dims; d++) {
    if (!read_u64 (r, &t->ne[d], what, error))
      goto fail;
    /* ggml keeps ne as int64_t */
    if (t->ne[d] == 0 || t->ne[d] > G_MAXINT64) {
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
          "%s: %s: dimension %u is %" G_GUINT64_FORMAT
          " (must be 1..2^63-1)", g->name, what, d, t->ne[d]);
      goto fail;
    }
    if (!g_uint64_checked_mul (&nelem, nelem, t->ne[d])
        || nelem > G_MAXINT64) {
      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
          "%s: %s: element count overflows", g->name, what);
      goto fail;
    }
  }
  if (!read_u32 (r, &type, what, error))
    goto fail;
  if (!npu_ggml_type_info (type, &block_size, &type_size)) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_UNSUPPORTED,
        "%s: %s: unknown ggml type %u", g->name, what, type);
    goto fail;
  }
  t->type = type;
  if (t->ne[0] % block_size != 0) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s: row of %" G_GUINT64_FORMAT " elements is not a multiple "
        "of the %s block size %u", g->name, what, t->ne[0],
        ggml_types[type].name, block_size);
    goto fail;
  }
  rows = nelem / t->ne[0];
  if (!g_uint64_checked_mul (&n_bytes, t->ne[0] / block_size, type_size)
      || !g_uint64_checked_mul (&n_bytes, n_bytes, rows)
      || n_bytes > G_MAXSIZE) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s: byte size overflows", g->name, what);
    goto fail;
  }
  t->n_bytes = n_bytes;
  if (!read_u64 (r, &rel, what, error))
    goto fail;
  if (rel % g->alignment != 0) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: %s: data offset %" G_GUINT64_FORMAT " is not a multiple of "
        "the alignment %" G_GSIZE_FORMAT, g->name, what, rel, g->alignment);
    goto fail;
  }
  /* Relative for now, made absolute once the data section is known */
  t->offset = rel;
  g_free (what);
  g_hash_table_insert (g->tensor_index, (gpointer) t->name, t);
  g->n_tensors++;
  return TRUE;

fail:
  g_free (what);
  return FALSE;
}

/* The tensor infos, indexed by name */
static gboolean
parse_tensor_infos (NpuGguf * g, Reader * r, guint64 n_tensors, GError ** error)
{
  guint64 i;

  /* Re-check against what is left now that the kvs are read */
  if (n_tensors > (r->size - r->pos) / MIN_TENSOR_INFO_BYTES) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: tensor count %" G_GUINT64_FORMAT " (byte 8) cannot fit in the %"
        G_GSIZE_FORMAT " bytes left after the metadata at byte %"
        G_GSIZE_FORMAT, g->name, n_tensors, r->size - r->pos, r->pos);
    return FALSE;
  }

  g->tensors = g_new0 (NpuGgufTensor, n_tensors);
  for (i = 0; i < n_tensors; i++) {
    if (!parse_tensor_info (g, r, i, error))
      return FALSE;
  }
  return TRUE;
}

/* The data section after the header (@header_end), aligned; every
 * tensor's offset made absolute and checked to lie inside the file */
static gboolean
place_tensors (NpuGguf * g, gsize header_end, GError ** error)
{
  guint64 i;

  if (g->alignment - 1 > G_MAXSIZE - header_end) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: general.alignment %" G_GSIZE_FORMAT " is too large",
        g->name, g->alignment);
    return FALSE;
  }
  g->data_offset = (header_end + g->alignment - 1) & ~(g->alignment - 1);
  if (g->n_tensors > 0 && g->data_offset > g->size) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
        "%s: tensor data section (byte %" G_GSIZE_FORMAT " aligned to %"
        G_GSIZE_FORMAT ") starts past the end of the file (%" G_GSIZE_FORMAT
        " bytes)", g->name, header_end, g->alignment, g->size);
    return FALSE;
  }

  for (i = 0; i < g->n_tensors; i++) {
    NpuGgufTensor *t = &g->tensors[i];
    gsize room = g->size - g->data_offset;

    if (t->offset > room || t->n_bytes > room - t->offset) {
      gchar *desc = describe (t->name, strlen (t->name));
      guint64 abs;

      if (g_uint64_checked_add (&abs, t->offset, g->data_offset))
        g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
            "%s: tensor %s: data [offset %" G_GUINT64_FORMAT ", %"
            G_GSIZE_FORMAT " bytes) runs past the end of the file (%"
            G_GSIZE_FORMAT " bytes)", g->name, desc, abs, t->n_bytes, g->size);
      else
        g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
            "%s: tensor %s: data [relative offset %" G_GUINT64_FORMAT ", %"
            G_GSIZE_FORMAT " bytes) runs past the end of the file (%"
            G_GSIZE_FORMAT " bytes)", g->name, desc, t->offset, t->n_bytes,
            g->size);
      g_free (desc);
      return FALSE;
    }
    t->offset += g->data_offset;
    t->data = g->base + t->offset;
  }
  return TRUE;
}

/* No two tensors' data may overlap */
static gboolean
check_overlaps (NpuGguf * g, GError ** error)
{
  NpuGgufTensor **sorted;
  gboolean ok = TRUE;
  guint64 i;

  /* Overlaps: sort by offset, then neighbours must not intersect */
  sorted = g_new (NpuGgufTensor *, g->n_tensors ? g->n_tensors : 1);
  for (i = 0; i < g->n_tensors; i++)
    sorted[i] = &g->tensors[i];
  qsort (sorted, g->n_tensors, sizeof (*sorted), compare_by_offset);
  for (i = 1; i < g->n_tensors; i++) {
    const NpuGgufTensor *a = sorted[i - 1], *b = sorted[i];

    /* a->offset + a->n_bytes <= size, no overflow */
    if (a->offset + a->n_bytes > b->offset) {
      gchar *da = describe (a->name, strlen (a->name));
      gchar *db = describe (b->name, strlen (b->name));

      g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_FORMAT,
          "%s: tensor %s [offset %" G_GUINT64_FORMAT ", %" G_GSIZE_FORMAT
          " bytes) overlaps tensor %s [offset %" G_GUINT64_FORMAT ", %"
          G_GSIZE_FORMAT " bytes)", g->name, db, b->offset, b->n_bytes, da,
          a->offset, a->n_bytes);
      g_free (da);
      g_free (db);
      ok = FALSE;
      break;
    }
  }
  g_free (sorted);
  return ok;
}

static gboolean
parse_header (NpuGguf * g, GError ** error)
{
  Reader r = { g->base, g->size, 0, g->name };
  guint64 n_tensors, n_kv;

  return parse_preamble (g, &r, &n_tensors, &n_kv, error)
      && parse_kvs (g, &r, n_kv, error)
      && read_alignment (g, error)
      && parse_tensor_infos (g, &r, n_tensors, error)
      && place_tensors (g, r.pos, error)
      && check_overlaps (g, error);
}

static NpuGguf *
npu_gguf_new (const gchar * name)
{
  NpuGguf *g = g_new0 (NpuGguf, 1);

  g->name = g_strdup (name);
  g->fd = -1;
  g->alignment = NPU_GGUF_DEFAULT_ALIGNMENT;
  g->kv_index = g_hash_table_new (g_str_hash, g_str_equal);
  g->tensor_index = g_hash_table_new (g_str_hash, g_str_equal);
  g->strings = g_string_chunk_new (4096);
  g->item_arrays = g_ptr_array_new_with_free_func (g_free);
  return g;
}

NpuGguf *
npu_gguf_open_bytes (const guint8 * data, gsize size, GError ** error)
{
  NpuGguf *g;

  g_return_val_if_fail (data != NULL || size == 0, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  g = npu_gguf_new ("(memory)");
  g->base = data;
  g->size = size;
  if (!parse_header (g, error)) {
    npu_gguf_free_internal (g);
    return NULL;
  }
  return g;
}

NpuGguf *
npu_gguf_open (const gchar * path, GError ** error)
{
  NpuGguf *g;
  gchar *base;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  base = g_path_get_basename (path);
  g = npu_gguf_new (base);
  g_free (base);

  if (!npu_file_map (path, g->name, NPU_GGUF_ERROR, NPU_GGUF_ERROR_IO,
          &g->fd, &g->base, &g->size, error))
    goto fail;
  g->mapped = g->base != NULL;
  if (!parse_header (g, error))
    goto fail;
  return g;

fail:
  npu_gguf_free_internal (g);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* Accessors                                                                 */

guint32
npu_gguf_get_version (const NpuGguf * gguf)
{
  g_return_val_if_fail (gguf != NULL, 0);
  return gguf->version;
}

int
npu_gguf_get_fd (const NpuGguf * gguf)
{
  g_return_val_if_fail (gguf != NULL, -1);
  return gguf->fd;
}

const guint8 *
npu_gguf_get_base (const NpuGguf * gguf)
{
  g_return_val_if_fail (gguf != NULL, NULL);
  return gguf->base;
}

gsize
npu_gguf_get_size (const NpuGguf * gguf)
{
  g_return_val_if_fail (gguf != NULL, 0);
  return gguf->size;
}

gsize
npu_gguf_get_data_offset (const NpuGguf * gguf)
{
  g_return_val_if_fail (gguf != NULL, 0);
  return gguf->data_offset;
}

gsize
npu_gguf_get_alignment (const NpuGguf * gguf)
{
  g_return_val_if_fail (gguf != NULL, 0);
  return gguf->alignment;
}

guint
npu_gguf_n_kv (const NpuGguf * gguf)
{
  g_return_val_if_fail (gguf != NULL, 0);
  return gguf->n_kv;
}

const gchar *
npu_gguf_get_key (const NpuGguf * gguf, guint i)
{
  g_return_val_if_fail (gguf != NULL, NULL);
  g_return_val_if_fail (i < gguf->n_kv, NULL);
  return gguf->kvs[i].key;
}

const NpuGgufValue *
npu_gguf_get_value (const NpuGguf * gguf, guint i)
{
  g_return_val_if_fail (gguf != NULL, NULL);
  g_return_val_if_fail (i < gguf->n_kv, NULL);
  return &gguf->kvs[i].value;
}

static const NpuGgufKv *
lookup (const NpuGguf * gguf, const gchar * key, GError ** error)
{
  const NpuGgufKv *kv;

  kv = g_hash_table_lookup (gguf->kv_index, key);
  if (!kv)
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_NOT_FOUND,
        "%s: no key '%s'", gguf->name, key);
  return kv;
}

const NpuGgufValue *
npu_gguf_find (const NpuGguf * gguf, const gchar * key)
{
  const NpuGgufKv *kv;

  g_return_val_if_fail (gguf != NULL, NULL);
  g_return_val_if_fail (key != NULL, NULL);
  kv = lookup (gguf, key, NULL);
  return kv ? &kv->value : NULL;
}

static gboolean
is_unsigned (NpuGgufType t)
{
  return t == NPU_GGUF_TYPE_UINT8 || t == NPU_GGUF_TYPE_UINT16
      || t == NPU_GGUF_TYPE_UINT32 || t == NPU_GGUF_TYPE_UINT64;
}

static gboolean
is_signed (NpuGgufType t)
{
  return t == NPU_GGUF_TYPE_INT8 || t == NPU_GGUF_TYPE_INT16
      || t == NPU_GGUF_TYPE_INT32 || t == NPU_GGUF_TYPE_INT64;
}

static gboolean
wrong_type (const NpuGguf * gguf, const gchar * key, const NpuGgufValue * v,
    const gchar * wanted, GError ** error)
{
  g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_WRONG_TYPE,
      "%s: key '%s' is %s, not %s", gguf->name, key,
      gguf_type_names[v->type], wanted);
  return FALSE;
}

/* Non-negative integer value as u64 */
static gboolean
as_u64 (const NpuGgufValue * v, guint64 * out)
{
  if (is_unsigned (v->type)) {
    *out = v->v.u;
    return TRUE;
  }
  if (is_signed (v->type) && v->v.i >= 0) {
    *out = v->v.i;
    return TRUE;
  }
  return FALSE;
}

gboolean
npu_gguf_get_u64 (const NpuGguf * gguf, const gchar * key, guint64 * value,
    GError ** error)
{
  const NpuGgufKv *kv;
  guint64 u;

  g_return_val_if_fail (gguf != NULL && key != NULL, FALSE);
  if (!(kv = lookup (gguf, key, error)))
    return FALSE;
  if (!as_u64 (&kv->value, &u))
    return wrong_type (gguf, key, &kv->value, "a non-negative integer", error);
  *value = u;
  return TRUE;
}

gboolean
npu_gguf_get_u32 (const NpuGguf * gguf, const gchar * key, guint32 * value,
    GError ** error)
{
  const NpuGgufKv *kv;
  guint64 u;

  g_return_val_if_fail (gguf != NULL && key != NULL, FALSE);
  if (!(kv = lookup (gguf, key, error)))
    return FALSE;
  if (!as_u64 (&kv->value, &u) || u > G_MAXUINT32)
    return wrong_type (gguf, key, &kv->value,
        "an integer in the uint32 range", error);
  *value = u;
  return TRUE;
}

gboolean
npu_gguf_get_i64 (const NpuGguf * gguf, const gchar * key, gint64 * value,
    GError ** error)
{
  const NpuGgufKv *kv;

  g_return_val_if_fail (gguf != NULL && key != NULL, FALSE);
  if (!(kv = lookup (gguf, key, error)))
    return FALSE;
  if (is_signed (kv->value.type))
    *value = kv->value.v.i;
  else if (is_unsigned (kv->value.type) && kv->value.v.u <= G_MAXINT64)
    *value = kv->value.v.u;
  else
    return wrong_type (gguf, key, &kv->value,
        "an integer in the int64 range", error);
  return TRUE;
}

gboolean
npu_gguf_get_f32 (const NpuGguf * gguf, const gchar * key, gfloat * value,
    GError ** error)
{
  const NpuGgufKv *kv;

  g_return_val_if_fail (gguf != NULL && key != NULL, FALSE);
  if (!(kv = lookup (gguf, key, error)))
    return FALSE;
  if (kv->value.type != NPU_GGUF_TYPE_FLOAT32
      && kv->value.type != NPU_GGUF_TYPE_FLOAT64)
    return wrong_type (gguf, key, &kv->value, "a float", error);
  *value = kv->value.v.f;
  return TRUE;
}

gboolean
npu_gguf_get_bool (const NpuGguf * gguf, const gchar * key, gboolean * value,
    GError ** error)
{
  const NpuGgufKv *kv;

  g_return_val_if_fail (gguf != NULL && key != NULL, FALSE);
  if (!(kv = lookup (gguf, key, error)))
    return FALSE;
  if (kv->value.type != NPU_GGUF_TYPE_BOOL)
    return wrong_type (gguf, key, &kv->value, "a bool", error);
  *value = kv->value.v.b;
  return TRUE;
}

const gchar *
npu_gguf_get_string (const NpuGguf * gguf, const gchar * key, gsize * len,
    GError ** error)
{
  const NpuGgufKv *kv;

  g_return_val_if_fail (gguf != NULL && key != NULL, NULL);
  if (!(kv = lookup (gguf, key, error)))
    return NULL;
  if (kv->value.type != NPU_GGUF_TYPE_STRING) {
    wrong_type (gguf, key, &kv->value, "a string", error);
    return NULL;
  }
  if (len)
    *len = kv->value.v.str.len;
  return kv->cstr;
}

const NpuGgufValue *
npu_gguf_get_array (const NpuGguf * gguf, const gchar * key, gint elem_type,
    GError ** error)
{
  const NpuGgufKv *kv;

  g_return_val_if_fail (gguf != NULL && key != NULL, NULL);
  if (!(kv = lookup (gguf, key, error)))
    return NULL;
  if (kv->value.type != NPU_GGUF_TYPE_ARRAY) {
    wrong_type (gguf, key, &kv->value, "an array", error);
    return NULL;
  }
  if (elem_type >= 0 && kv->value.v.arr.type != (NpuGgufType) elem_type) {
    g_set_error (error, NPU_GGUF_ERROR, NPU_GGUF_ERROR_WRONG_TYPE,
        "%s: key '%s' is an array of %s, not of %s", gguf->name, key,
        gguf_type_names[kv->value.v.arr.type],
        npu_gguf_type_name (elem_type) ? npu_gguf_type_name (elem_type) : "?");
    return NULL;
  }
  return &kv->value;
}

guint32
npu_gguf_get_u32_default (const NpuGguf * gguf, const gchar * key, guint32 def)
{
  guint32 v = def;

  npu_gguf_get_u32 (gguf, key, &v, NULL);
  return v;
}

gfloat
npu_gguf_get_f32_default (const NpuGguf * gguf, const gchar * key, gfloat def)
{
  gfloat v = def;

  npu_gguf_get_f32 (gguf, key, &v, NULL);
  return v;
}

gboolean
npu_gguf_get_bool_default (const NpuGguf * gguf, const gchar * key,
    gboolean def)
{
  gboolean v = def;

  npu_gguf_get_bool (gguf, key, &v, NULL);
  return v;
}

gboolean
npu_gguf_array_get (const NpuGgufValue * arr, guint64 i, NpuGgufValue * out)
{
  gsize sz;

  g_return_val_if_fail (arr != NULL && out != NULL, FALSE);
  if (arr->type != NPU_GGUF_TYPE_ARRAY || i >= arr->v.arr.count)
    return FALSE;
  if (arr->v.arr.items) {
    *out = arr->v.arr.items[i];
    return TRUE;
  }
  sz = npu_gguf_scalar_size (arr->v.arr.type);
  decode_scalar (arr->v.arr.type, arr->v.arr.data + i * sz, out);
  return TRUE;
}

const gchar *
npu_gguf_array_get_string (const NpuGgufValue * arr, guint64 i, gsize * len)
{
  g_return_val_if_fail (arr != NULL, NULL);
  if (arr->type != NPU_GGUF_TYPE_ARRAY
      || arr->v.arr.type != NPU_GGUF_TYPE_STRING || i >= arr->v.arr.count)
    return NULL;
  if (len)
    *len = arr->v.arr.items[i].v.str.len;
  return arr->v.arr.items[i].v.str.data;
}

guint
npu_gguf_n_tensors (const NpuGguf * gguf)
{
  g_return_val_if_fail (gguf != NULL, 0);
  return gguf->n_tensors;
}

const NpuGgufTensor *
npu_gguf_get_tensor (const NpuGguf * gguf, guint i)
{
  g_return_val_if_fail (gguf != NULL, NULL);
  g_return_val_if_fail (i < gguf->n_tensors, NULL);
  return &gguf->tensors[i];
}

const NpuGgufTensor *
npu_gguf_find_tensor (const NpuGguf * gguf, const gchar * name)
{
  g_return_val_if_fail (gguf != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);
  return g_hash_table_lookup (gguf->tensor_index, name);
}

gboolean
npu_gguf_lookup_view (const gchar * name, NpuTensorView * out, gpointer gguf)
{
  const NpuGgufTensor *t = npu_gguf_find_tensor (gguf, name);

  if (!t)
    return FALSE;
  npu_tensor_view_init (out, t->type, t->n_dims, t->ne, t->data, t->n_bytes);
  return TRUE;
}
