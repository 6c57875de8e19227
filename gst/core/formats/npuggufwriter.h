/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GGUF version 3 writer
 *
 * Writes files that npugguf.h and ggml's gguf reader both accept, in the
 * layout ggml's own writer produces:
 *
 *   "GGUF"  u32 3  u64 tensor_count  u64 metadata_kv_count
 *   metadata (in the order added)
 *   tensor infos (in the order added; offsets relative to the data section)
 *   zero padding to the alignment
 *   tensor data, each tensor followed by zero padding to the alignment
 *
 * so the file size is a multiple of the alignment, as with ggml.
 *
 * Metadata is serialised when it is added (it is small); tensor data is
 * not copied.  A tensor is either a borrowed pointer that must stay valid
 * until the writer is freed, or a callback that produces the bytes while the
 * file is written, a few MiB at a time, so that a model of billions of
 * weights is written with a small, constant amount of memory.
 *
 * The alignment is 32 (ggml's GGUF_DEFAULT_ALIGNMENT) unless
 * npu_gguf_writer_set_alignment() is called or a "general.alignment" u32
 * key is added, which are the same thing: the key is what tells readers.
 *
 * Every failure is a GError in NPU_GGUF_WRITER_ERROR naming the key or
 * tensor concerned.  Files are written to a temporary name beside the
 * target and renamed into place, so a failed write never leaves a
 * truncated model behind.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_GGUF_WRITER_H__
#define __NPU_GGUF_WRITER_H__

#include <glib.h>
#include "core/device/npuapi.h"

#include "npugguf.h"

G_BEGIN_DECLS

#define NPU_GGUF_WRITER_ERROR (npu_gguf_writer_error_quark ())
NPU_API
GQuark npu_gguf_writer_error_quark (void);

typedef enum
{
  NPU_GGUF_WRITER_ERROR_INVALID,     /* bad argument: duplicate or empty
                                      * key, bad shape, unknown type... */
  NPU_GGUF_WRITER_ERROR_IO,          /* creating or writing the file */
  NPU_GGUF_WRITER_ERROR_FILL,        /* a fill callback failed without
                                      * setting an error itself */
} NpuGgufWriterError;

/* The same tensor name limit as ggml (GGML_MAX_NAME 64, NUL included) */
#define NPU_GGUF_WRITER_MAX_NAME 63

typedef struct _NpuGgufWriter NpuGgufWriter;
typedef struct _NpuGgufWriterValue NpuGgufWriterValue;

/**
 * NpuGgufWriterFillFunc:
 * @name: the tensor's name
 * @dst: where to put the bytes
 * @offset: byte offset of @dst within the tensor's data
 * @n_bytes: bytes to produce
 * @user_data: as given to npu_gguf_writer_add_tensor_func()
 * @error: set it on failure
 *
 * Called while the file is written, with consecutive chunks covering the
 * tensor from offset 0.  A chunk always holds whole rows (ne[0] elements,
 * i.e. whole quantisation blocks) so row r starts at r * row_bytes; it is a
 * few MiB at most, or one row when a row is larger.
 *
 * Returns: FALSE to abort the write.
 */
typedef gboolean (*NpuGgufWriterFillFunc) (const gchar * name, guint8 * dst,
    guint64 offset, gsize n_bytes, gpointer user_data, GError ** error);

NPU_API
NpuGgufWriter      *npu_gguf_writer_new         (void);
NPU_API
void                npu_gguf_writer_free        (NpuGgufWriter *writer);

/* Power of two; also adds/updates the "general.alignment" u32 key */
NPU_API
gboolean            npu_gguf_writer_set_alignment (NpuGgufWriter *writer,
                                                   guint32 alignment,
                                                   GError **error);
NPU_API
guint32             npu_gguf_writer_get_alignment (const NpuGgufWriter *writer);

/* Scalar metadata.  Keys are non-empty UTF-8 and unique in a file. */
NPU_API
gboolean npu_gguf_writer_add_u8     (NpuGgufWriter *writer, const gchar *key,
                                     guint8 value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_i8     (NpuGgufWriter *writer, const gchar *key,
                                     gint8 value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_u16    (NpuGgufWriter *writer, const gchar *key,
                                     guint16 value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_i16    (NpuGgufWriter *writer, const gchar *key,
                                     gint16 value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_u32    (NpuGgufWriter *writer, const gchar *key,
                                     guint32 value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_i32    (NpuGgufWriter *writer, const gchar *key,
                                     gint32 value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_u64    (NpuGgufWriter *writer, const gchar *key,
                                     guint64 value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_i64    (NpuGgufWriter *writer, const gchar *key,
                                     gint64 value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_f32    (NpuGgufWriter *writer, const gchar *key,
                                     gfloat value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_f64    (NpuGgufWriter *writer, const gchar *key,
                                     gdouble value, GError **error);
NPU_API
gboolean npu_gguf_writer_add_bool   (NpuGgufWriter *writer, const gchar *key,
                                     gboolean value, GError **error);
/* @len -1: NUL-terminated; otherwise @len bytes (may hold NULs) */
NPU_API
gboolean npu_gguf_writer_add_string (NpuGgufWriter *writer, const gchar *key,
                                     const gchar *value, gssize len,
                                     GError **error);

/* Array of a fixed-size type: @data holds @count host-order elements
 * (gfloat for FLOAT32, gdouble for FLOAT64, one guint8 0/1 per BOOL). */
NPU_API
gboolean npu_gguf_writer_add_array  (NpuGgufWriter *writer, const gchar *key,
                                     NpuGgufType elem_type, const void *data,
                                     gsize count, GError **error);
/* @n -1: @strv is NULL-terminated */
NPU_API
gboolean npu_gguf_writer_add_string_array (NpuGgufWriter *writer,
                                           const gchar *key,
                                           const gchar * const *strv,
                                           gssize n, GError **error);

/* General values, for nested arrays.  A value is built, then either added
 * to the writer or appended to an array of arrays, which takes it over
 * (also on failure). */
NPU_API
NpuGgufWriterValue *npu_gguf_writer_value_new_array (NpuGgufType elem_type,
                                                     const void *data,
                                                     gsize count,
                                                     GError **error);
NPU_API
NpuGgufWriterValue *npu_gguf_writer_value_new_string_array
                                         (const gchar * const *strv, gssize n);
NPU_API
NpuGgufWriterValue *npu_gguf_writer_value_new_array_of_arrays (void);
NPU_API
gboolean            npu_gguf_writer_value_append (NpuGgufWriterValue *array,
                                                  NpuGgufWriterValue *item,
                                                  GError **error);
NPU_API
void                npu_gguf_writer_value_free (NpuGgufWriterValue *value);
NPU_API
gboolean            npu_gguf_writer_add_value (NpuGgufWriter *writer,
                                               const gchar *key,
                                               NpuGgufWriterValue *value,
                                               GError **error);

/* Tensors.  @ne in ggml order (ne[0] innermost), 1..4 dims, each >= 1;
 * ne[0] must be a multiple of the type's block size.  @type is a ggml
 * type id (NpuGgmlType); the plain and block types of ggml are known. */
NPU_API
gboolean npu_gguf_writer_add_tensor (NpuGgufWriter *writer, const gchar *name,
                                     guint n_dims, const guint64 *ne,
                                     guint32 type, const void *data,
                                     GError **error);
/* @notify (may be NULL) is called on @user_data when the writer is freed */
NPU_API
gboolean npu_gguf_writer_add_tensor_func (NpuGgufWriter *writer,
                                          const gchar *name, guint n_dims,
                                          const guint64 *ne, guint32 type,
                                          NpuGgufWriterFillFunc func,
                                          gpointer user_data,
                                          GDestroyNotify notify,
                                          GError **error);

/* Bytes of a row of @ne0 elements of @type, 0 if unknown or not a whole
 * number of blocks */
NPU_API
gsize    npu_gguf_writer_row_size   (guint32 type, guint64 ne0);

NPU_API
guint    npu_gguf_writer_n_kv       (const NpuGgufWriter *writer);
NPU_API
guint    npu_gguf_writer_n_tensors  (const NpuGgufWriter *writer);
/* Sizes the file will have, known before writing */
NPU_API
guint64  npu_gguf_writer_get_data_size (const NpuGgufWriter *writer);
NPU_API
guint64  npu_gguf_writer_get_file_size (const NpuGgufWriter *writer);

/* Writing may be done more than once (callbacks are called again). */
NPU_API
gboolean npu_gguf_writer_write_file (NpuGgufWriter *writer, const gchar *path,
                                     GError **error);
NPU_API
GBytes  *npu_gguf_writer_write_bytes (NpuGgufWriter *writer, GError **error);

G_END_DECLS

#endif /* __NPU_GGUF_WRITER_H__ */
