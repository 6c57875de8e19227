/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a small strict JSON reader for the files beside a model
 *
 * Hugging Face model directories describe themselves in JSON: config.json
 * (the hyper-parameters), model.safetensors.index.json (which shard holds
 * which tensor), tokenizer.json (a vocabulary of ~200k strings and ~450k
 * merges for gpt-oss) and tokenizer_config.json.  This parses one such
 * text into a tree that is read, never changed.
 *
 * Exactly RFC 8259 JSON: no comments, no trailing commas, no NaN, nesting
 * at most NPU_JSON_MAX_DEPTH; strings must be UTF-8 and may not hold NUL
 * (they are handed out as C strings).  Object members keep their file
 * order; npu_json_member() returns the first of a repeated name.  Errors
 * give the byte offset.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_JSON_H__
#define __NPU_JSON_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS
#define NPU_JSON_ERROR (npu_json_error_quark ())
    NPU_API GQuark npu_json_error_quark (void);

typedef enum
{
  NPU_JSON_ERROR_SYNTAX,
} NpuJsonError;

#define NPU_JSON_MAX_DEPTH 64

typedef enum
{
  NPU_JSON_NULL,
  NPU_JSON_BOOL,
  NPU_JSON_NUMBER,
  NPU_JSON_STRING,
  NPU_JSON_ARRAY,
  NPU_JSON_OBJECT,
} NpuJsonType;

typedef struct _NpuJson NpuJson;

/* Parses @len bytes of @text (need not be NUL-terminated).  @what names
 * the text in error messages ("config.json"). */
NPU_API
    NpuJson * npu_json_parse (const gchar * text, gsize len, const gchar * what,
    GError ** error);
/* Reads and parses the file at @path */
NPU_API NpuJson *npu_json_parse_file (const gchar * path, GError ** error);
NPU_API void npu_json_free (NpuJson * root);

NPU_API NpuJsonType npu_json_type (const NpuJson * v);
/* Elements of an array or members of an object; 0 for anything else */
NPU_API guint npu_json_size (const NpuJson * v);
/* Element @i of an array or the value of member @i of an object */
NPU_API const NpuJson *npu_json_at (const NpuJson * v, guint i);
/* The name of member @i of an object, NULL for anything else */
NPU_API const gchar *npu_json_key_at (const NpuJson * v, guint i);
/* The first member named @key of an object; NULL if @v is NULL, not an
 * object or has no such member */
NPU_API const NpuJson *npu_json_member (const NpuJson * v, const gchar * key);

/* Typed reads: NULL / FALSE when @v is NULL or of another type */
NPU_API const gchar *npu_json_string (const NpuJson * v);
NPU_API gboolean npu_json_number (const NpuJson * v, gdouble * out);
/* A number without fraction or exponent that fits in 64 bits */
NPU_API gboolean npu_json_int (const NpuJson * v, gint64 * out);
NPU_API gboolean npu_json_bool (const NpuJson * v, gboolean * out);

G_END_DECLS
#endif /* __NPU_JSON_H__ */
