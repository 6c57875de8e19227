/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GGUF model file reader (GGUF versions 2 and 3)
 *
 * Layout (ggml's docs/gguf.md), all integers little-endian:
 *
 *   "GGUF"  u32 version  u64 tensor_count  u64 metadata_kv_count
 *   metadata_kv_count x { string key, u32 value_type, value }
 *   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type,
 *                    u64 offset }
 *   padding to general.alignment (default 32)
 *   tensor data; each tensor's offset is relative to the start of this
 *   section and a multiple of the alignment
 *
 * A string is u64 length + bytes (no NUL).  An array value is u32 element
 * type + u64 count + the elements; arrays of strings and arrays of arrays
 * are allowed.  Version 1 used u32 counts and lengths and is rejected.
 *
 * Everything is validated against the file size before it is used, so a
 * malformed or hostile file gives a GError naming what is wrong and where,
 * never a crash, an out-of-bounds read or an allocation sized by an
 * unchecked count.  Beyond what ggml itself checks, we also reject
 * duplicate keys and tensor names, zero dimensions, BOOL bytes other than
 * 0/1, array nesting deeper than NPU_GGUF_MAX_ARRAY_DEPTH and tensors whose
 * data overlap (ggml demands tensors packed in order; we only demand that
 * they do not overlap).
 *
 * Memory: the file is mapped read-only and shared; tensor data, array data
 * and array strings are pointers into the mapping (no copies).  Keys, tensor
 * names and top-level string values are copied once, NUL-terminated.  Arrays
 * of strings or arrays get an index of NpuGgufValue (48 bytes an element) so
 * element i is found in O(1): a 150k-token vocabulary costs ~7 MB.
 *
 * An NpuGguf is immutable after open and may be read from any thread.
 * As with any mapping, a file truncated by someone else while mapped makes
 * reads past the new end raise SIGBUS; model files are not expected to
 * change under a running pipeline.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_GGUF_H__
#define __NPU_GGUF_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/device/nputensorview.h"

G_BEGIN_DECLS

#define NPU_GGUF_ERROR (npu_gguf_error_quark ())
NPU_API
GQuark npu_gguf_error_quark (void);

typedef enum
{
  NPU_GGUF_ERROR_IO,            /* open/stat/mmap failed */
  NPU_GGUF_ERROR_FORMAT,        /* malformed file */
  NPU_GGUF_ERROR_UNSUPPORTED,   /* well-formed but not for us: v1, big-endian,
                                 * unknown ggml type */
  NPU_GGUF_ERROR_NOT_FOUND,     /* getters: no such key */
  NPU_GGUF_ERROR_WRONG_TYPE,    /* getters: key holds another type, or a
                                 * value out of the requested range */
} NpuGgufError;

/* Metadata value types, ids as in the file */
typedef enum
{
  NPU_GGUF_TYPE_UINT8 = 0,
  NPU_GGUF_TYPE_INT8 = 1,
  NPU_GGUF_TYPE_UINT16 = 2,
  NPU_GGUF_TYPE_INT16 = 3,
  NPU_GGUF_TYPE_UINT32 = 4,
  NPU_GGUF_TYPE_INT32 = 5,
  NPU_GGUF_TYPE_FLOAT32 = 6,
  NPU_GGUF_TYPE_BOOL = 7,
  NPU_GGUF_TYPE_STRING = 8,
  NPU_GGUF_TYPE_ARRAY = 9,
  NPU_GGUF_TYPE_UINT64 = 10,
  NPU_GGUF_TYPE_INT64 = 11,
  NPU_GGUF_TYPE_FLOAT64 = 12,
} NpuGgufType;

/* Tensor element types: ggml's enum ggml_type ids (ggml.h).  Ids 4, 5,
 * 31-33 and 36-38 were removed from ggml and are rejected like unknown
 * ids. */
typedef enum
{
  NPU_GGML_TYPE_F32 = 0,
  NPU_GGML_TYPE_F16 = 1,
  NPU_GGML_TYPE_Q4_0 = 2,
  NPU_GGML_TYPE_Q4_1 = 3,
  NPU_GGML_TYPE_Q5_0 = 6,
  NPU_GGML_TYPE_Q5_1 = 7,
  NPU_GGML_TYPE_Q8_0 = 8,
  NPU_GGML_TYPE_Q8_1 = 9,
  NPU_GGML_TYPE_Q2_K = 10,
  NPU_GGML_TYPE_Q3_K = 11,
  NPU_GGML_TYPE_Q4_K = 12,
  NPU_GGML_TYPE_Q5_K = 13,
  NPU_GGML_TYPE_Q6_K = 14,
  NPU_GGML_TYPE_Q8_K = 15,
  NPU_GGML_TYPE_IQ2_XXS = 16,
  NPU_GGML_TYPE_IQ2_XS = 17,
  NPU_GGML_TYPE_IQ3_XXS = 18,
  NPU_GGML_TYPE_IQ1_S = 19,
  NPU_GGML_TYPE_IQ4_NL = 20,
  NPU_GGML_TYPE_IQ3_S = 21,
  NPU_GGML_TYPE_IQ2_S = 22,
  NPU_GGML_TYPE_IQ4_XS = 23,
  NPU_GGML_TYPE_I8 = 24,
  NPU_GGML_TYPE_I16 = 25,
  NPU_GGML_TYPE_I32 = 26,
  NPU_GGML_TYPE_I64 = 27,
  NPU_GGML_TYPE_F64 = 28,
  NPU_GGML_TYPE_IQ1_M = 29,
  NPU_GGML_TYPE_BF16 = 30,
  NPU_GGML_TYPE_TQ1_0 = 34,
  NPU_GGML_TYPE_TQ2_0 = 35,
  NPU_GGML_TYPE_MXFP4 = 39,     /* block_mxfp4: 32 values, 17 bytes */
  NPU_GGML_TYPE_NVFP4 = 40,     /* block_nvfp4: 64 values, 36 bytes */
} NpuGgmlType;

/* Largest tensor rank in GGUF (GGML_MAX_DIMS) */
#define NPU_GGUF_MAX_DIMS 4
/* Arrays may nest this deep (an array of arrays is depth 2) */
#define NPU_GGUF_MAX_ARRAY_DEPTH 8
/* general.alignment when the file has none */
#define NPU_GGUF_DEFAULT_ALIGNMENT 32

typedef struct _NpuGguf NpuGguf;
typedef struct _NpuGgufValue NpuGgufValue;

/**
 * NpuGgufValue:
 * @type: which member of @v is valid
 * @v.u: UINT8, UINT16, UINT32, UINT64 (zero-extended)
 * @v.i: INT8, INT16, INT32, INT64 (sign-extended)
 * @v.f: FLOAT32, FLOAT64
 * @v.b: BOOL
 * @v.str: STRING: @data points into the mapping and is NOT NUL-terminated;
 *   use @len.  (npu_gguf_get_string() gives a NUL-terminated copy for
 *   top-level values.)
 * @v.arr: ARRAY of @count elements of @type.  For fixed-size element types
 *   @data holds the @size raw little-endian bytes, possibly unaligned (read
 *   with memcpy or npu_gguf_array_get()); for STRING and ARRAY elements
 *   @items holds one value per element, else @items is NULL.
 *
 * Values belong to the NpuGguf and live until npu_gguf_free().
 */
struct _NpuGgufValue
{
  NpuGgufType type;
  union
  {
    guint64 u;
    gint64 i;
    gdouble f;
    gboolean b;
    struct
    {
      const gchar *data;
      gsize len;
    } str;
    struct
    {
      NpuGgufType type;
      guint64 count;
      const guint8 *data;
      gsize size;
      const NpuGgufValue *items;
    } arr;
  } v;
};

/**
 * NpuGgufTensor:
 * @name: NUL-terminated tensor name
 * @n_dims: 1..4 (0 would be a scalar; ggml never writes it)
 * @ne: elements per dimension in ggml order, ne[0] innermost (contiguous);
 *   dimensions beyond @n_dims are 1
 * @type: ggml type id (an NpuGgmlType)
 * @offset: absolute byte offset of the data in the file, a multiple of the
 *   file's alignment (the mapping is page-aligned, so @data is too)
 * @n_bytes: size of the data (ne[0] / block size * type size * ne[1..3])
 * @data: pointer into the mapping
 */
typedef struct
{
  const gchar *name;
  guint n_dims;
  guint64 ne[NPU_GGUF_MAX_DIMS];
  NpuGgmlType type;
  guint64 offset;
  gsize n_bytes;
  const guint8 *data;
} NpuGgufTensor;

/* Opening.  open() maps @path read-only (MAP_SHARED) and keeps the fd open
 * for npu_gguf_get_fd().  open_bytes() reads @data in place (no copy): it
 * must outlive the NpuGguf.  Error messages start with the file's base name
 * ("(memory)" for open_bytes). */
NPU_API
NpuGguf            *npu_gguf_open          (const gchar *path, GError **error);
NPU_API
NpuGguf            *npu_gguf_open_bytes    (const guint8 *data, gsize size,
                                            GError **error);
NPU_API
void                npu_gguf_free          (NpuGguf *gguf);

NPU_API
guint32             npu_gguf_get_version   (const NpuGguf *gguf);
/* The file's fd, owned by @gguf (-1 for open_bytes); dup() it to keep it
 * beyond npu_gguf_free(). */
NPU_API
int                 npu_gguf_get_fd        (const NpuGguf *gguf);
/* Whole file / buffer */
NPU_API
const guint8       *npu_gguf_get_base      (const NpuGguf *gguf);
NPU_API
gsize               npu_gguf_get_size      (const NpuGguf *gguf);
/* Absolute offset of the tensor data section (for a file without tensors
 * it may lie past the end of the file: nothing is there to read) */
NPU_API
gsize               npu_gguf_get_data_offset (const NpuGguf *gguf);
NPU_API
gsize               npu_gguf_get_alignment (const NpuGguf *gguf);

/* Metadata, in file order */
NPU_API
guint               npu_gguf_n_kv          (const NpuGguf *gguf);
NPU_API
const gchar        *npu_gguf_get_key       (const NpuGguf *gguf, guint i);
NPU_API
const NpuGgufValue *npu_gguf_get_value     (const NpuGguf *gguf, guint i);
/* NULL if absent */
NPU_API
const NpuGgufValue *npu_gguf_find          (const NpuGguf *gguf,
                                            const gchar *key);

/* Typed getters.  Integer getters accept any integer type whose value fits
 * the requested type (writers disagree on u32 vs u64 for counts); float
 * getters accept FLOAT32 and FLOAT64.  They fail with NOT_FOUND or
 * WRONG_TYPE; *@value is left untouched on failure. */
NPU_API
gboolean            npu_gguf_get_u32       (const NpuGguf *gguf, const gchar *key,
                                            guint32 *value, GError **error);
NPU_API
gboolean            npu_gguf_get_u64       (const NpuGguf *gguf, const gchar *key,
                                            guint64 *value, GError **error);
NPU_API
gboolean            npu_gguf_get_i64       (const NpuGguf *gguf, const gchar *key,
                                            gint64 *value, GError **error);
NPU_API
gboolean            npu_gguf_get_f32       (const NpuGguf *gguf, const gchar *key,
                                            gfloat *value, GError **error);
NPU_API
gboolean            npu_gguf_get_bool      (const NpuGguf *gguf, const gchar *key,
                                            gboolean *value, GError **error);
/* NUL-terminated copy owned by @gguf; @len (may be NULL) receives the
 * length, which is what to trust if the string holds a NUL byte. */
NPU_API
const gchar        *npu_gguf_get_string    (const NpuGguf *gguf, const gchar *key,
                                            gsize *len, GError **error);
/* ARRAY value; with @elem_type >= 0 the element type must match */
NPU_API
const NpuGgufValue *npu_gguf_get_array     (const NpuGguf *gguf, const gchar *key,
                                            gint elem_type, GError **error);

/* Defaults: @def when the key is absent or unusable */
NPU_API
guint32             npu_gguf_get_u32_default (const NpuGguf *gguf,
                                              const gchar *key, guint32 def);
NPU_API
gfloat              npu_gguf_get_f32_default (const NpuGguf *gguf,
                                              const gchar *key, gfloat def);
NPU_API
gboolean            npu_gguf_get_bool_default (const NpuGguf *gguf,
                                               const gchar *key, gboolean def);

/* Array element access.  get() decodes element @i of any type into *@out
 * (FALSE if @arr is not an array or @i is out of range); get_string()
 * returns a pointer into the mapping, NOT NUL-terminated, or NULL if the
 * elements are not strings or @i is out of range. */
NPU_API
gboolean            npu_gguf_array_get     (const NpuGgufValue *arr, guint64 i,
                                            NpuGgufValue *out);
NPU_API
const gchar        *npu_gguf_array_get_string (const NpuGgufValue *arr,
                                               guint64 i, gsize *len);

/* Tensors, in file order */
NPU_API
guint               npu_gguf_n_tensors     (const NpuGguf *gguf);
NPU_API
const NpuGgufTensor *npu_gguf_get_tensor   (const NpuGguf *gguf, guint i);
/* NULL if absent */
NPU_API
const NpuGgufTensor *npu_gguf_find_tensor  (const NpuGguf *gguf,
                                            const gchar *name);
/* An NpuTensorLookup over the tensors of a GGUF (@gguf: the NpuGguf); the
 * views point into its mapping. */
NPU_API
gboolean            npu_gguf_lookup_view   (const gchar *name,
                                            NpuTensorView *out,
                                            gpointer gguf);

/* ggml type table: name ("q4_0", "mxfp4", ...) or NULL for an unknown id;
 * info gives values per block and bytes per block, FALSE if unknown. */
NPU_API
const gchar        *npu_ggml_type_name     (guint32 type);
NPU_API
gboolean            npu_ggml_type_info     (guint32 type, guint *block_size,
                                            gsize *type_size);
/* Name of a metadata type ("uint32", "array", ...), NULL if unknown */
NPU_API
const gchar        *npu_gguf_type_name     (guint32 type);

G_END_DECLS

#endif /* __NPU_GGUF_H__ */
