/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: safetensors model file reader
 *
 * Layout (Hugging Face safetensors):
 *
 *   u64 N (little-endian)
 *   N bytes of UTF-8 JSON: an object whose members are tensors
 *     "name": {"dtype": "F16", "shape": [2, 3], "data_offsets": [begin, end]}
 *   and optionally "__metadata__": an object of string -> string;
 *   the JSON may be padded with trailing spaces
 *   the data section: offsets are relative to its start (byte 8 + N)
 *
 * The JSON is read by a small strict parser that accepts exactly RFC 8259
 * JSON (no comments, no trailing commas, no NaN) with nesting limited to
 * NPU_SAFETENSORS_MAX_JSON_DEPTH, and only what safetensors needs in the
 * places it needs it: shapes and offsets must be non-negative integers
 * without fraction or exponent.  Unknown members of a tensor object are
 * skipped (the reference reader ignores them too).
 *
 * Validated before use: N against the file size (and at most
 * NPU_SAFETENSORS_MAX_HEADER), every string as UTF-8 without NUL, rank at
 * most NPU_SAFETENSORS_MAX_DIMS, begin <= end <= data section size,
 * end - begin == product(shape) * dtype size (overflow-checked), no two
 * tensors overlapping, no duplicate names or metadata keys.  Holes between
 * tensors are allowed (the reference writer never leaves any, but nothing
 * breaks if one does).  Errors name the tensor and the byte in the file.
 *
 * The file is mapped read-only and shared; tensor data are pointers into
 * the mapping.  An NpuSafetensors is immutable after open and may be read
 * from any thread.  A file truncated by someone else while mapped makes
 * reads past the new end raise SIGBUS, as with any mapping.
 *
 * gpt-oss MXFP4 weights
 * ---------------------
 * gpt-oss checkpoints store each MXFP4 weight W as two U8 tensors:
 *
 *   "<W>.blocks"  shape [..., n_blocks, 16]: 16 bytes = 32 FP4 E2M1 codes
 *   "<W>.scales"  shape [..., n_blocks]:     one E8M0 exponent per block,
 *                                            scale 2^(s - 127)
 *
 * and dequantise (gpt-oss and transformers' convert_moe_packed_tensors)
 * block g as
 *
 *   value[2k]     = E2M1 (blocks[g][k] & 0x0F) * 2^(scales[g] - 127)
 *   value[2k + 1] = E2M1 (blocks[g][k] >> 4)   * 2^(scales[g] - 127)
 *   (k = 0..15), then flatten [..., n_blocks, 32] to [..., n_blocks * 32]:
 *   the 32 values of a block are consecutive along the last (input)
 *   dimension, so one row of W is n_blocks consecutive blocks.
 *
 * i.e. byte k holds elements 2k (low nibble) and 2k+1 (high nibble).
 *
 * Our block (NpuBlockMxfp4, ggml's block_mxfp4) is {e, qs[16]} with element
 * j in the low nibble of qs[j] and element j + 16 in the high nibble.  The
 * scale byte carries over unchanged (same E8M0 code, same bias 127), but
 * the nibbles must be repacked; for j = 0..15:
 *
 *   qs[j] = nib (j) | nib (j + 16) << 4,
 *   nib (m) = m even ? blocks[m / 2] & 0x0F : blocks[m / 2] >> 4
 *
 * (so qs[j] takes its low nibble from blocks[j / 2] and its high nibble
 * from blocks[8 + j / 2], each the low nibble for even j, the high one for
 * odd j).  The reader only finds and validates the pair; the element that
 * converts a safetensors model repacks into our layout at load time.
 * (A model detail, not a file-format one: gpt-oss's mlp1 interleaves the
 * SwiGLU gate and linear rows, gate in even rows.)
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_SAFETENSORS_H__
#define __NPU_SAFETENSORS_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS

#define NPU_SAFETENSORS_ERROR (npu_safetensors_error_quark ())
NPU_API
GQuark npu_safetensors_error_quark (void);

typedef enum
{
  NPU_SAFETENSORS_ERROR_IO,
  NPU_SAFETENSORS_ERROR_FORMAT,
  NPU_SAFETENSORS_ERROR_UNSUPPORTED,    /* e.g. an unknown dtype */
  NPU_SAFETENSORS_ERROR_NOT_FOUND,
} NpuSafetensorsError;

/* The dtype strings of the format; sub-byte types (F4, F6_*) are not
 * supported and reported as UNSUPPORTED. */
typedef enum
{
  NPU_SAFETENSORS_DTYPE_BOOL,
  NPU_SAFETENSORS_DTYPE_U8,
  NPU_SAFETENSORS_DTYPE_I8,
  NPU_SAFETENSORS_DTYPE_F8_E5M2,
  NPU_SAFETENSORS_DTYPE_F8_E4M3,
  NPU_SAFETENSORS_DTYPE_F8_E8M0,
  NPU_SAFETENSORS_DTYPE_I16,
  NPU_SAFETENSORS_DTYPE_U16,
  NPU_SAFETENSORS_DTYPE_F16,
  NPU_SAFETENSORS_DTYPE_BF16,
  NPU_SAFETENSORS_DTYPE_I32,
  NPU_SAFETENSORS_DTYPE_U32,
  NPU_SAFETENSORS_DTYPE_F32,
  NPU_SAFETENSORS_DTYPE_F64,
  NPU_SAFETENSORS_DTYPE_I64,
  NPU_SAFETENSORS_DTYPE_U64,
} NpuSafetensorsDtype;

#define NPU_SAFETENSORS_MAX_DIMS 8
/* Same cap as the reference implementation: 100 MB of JSON */
#define NPU_SAFETENSORS_MAX_HEADER (100 * 1000 * 1000)
/* Nesting limit for JSON values (the format itself needs 3) */
#define NPU_SAFETENSORS_MAX_JSON_DEPTH 8

/**
 * NpuSafetensorsTensor:
 * @name: NUL-terminated, valid UTF-8
 * @shape: row-major as in the file, shape[0] outermost, shape[n_dims - 1]
 *   contiguous (the reverse of ggml's ne[]); n_dims 0 is a scalar
 * @n_elements: product of @shape (1 for a scalar, 0 if a dimension is 0)
 * @offset: absolute byte offset in the file (NOT aligned in general: the
 *   format has no alignment, so @data may be unaligned)
 * @n_bytes: @n_elements * dtype size
 * @data: pointer into the mapping
 */
typedef struct
{
  const gchar *name;
  NpuSafetensorsDtype dtype;
  guint n_dims;
  guint64 shape[NPU_SAFETENSORS_MAX_DIMS];
  guint64 n_elements;
  guint64 offset;
  gsize n_bytes;
  const guint8 *data;
} NpuSafetensorsTensor;

typedef struct _NpuSafetensors NpuSafetensors;

/* As npu_gguf_open() / npu_gguf_open_bytes(): open() maps read-only and
 * shared and keeps the fd; open_bytes() does not copy @data, which must
 * outlive the result.  Messages start with the base name or "(memory)". */
NPU_API
NpuSafetensors     *npu_safetensors_open        (const gchar *path,
                                                 GError **error);
NPU_API
NpuSafetensors     *npu_safetensors_open_bytes  (const guint8 *data,
                                                 gsize size, GError **error);
NPU_API
void                npu_safetensors_free        (NpuSafetensors *st);

NPU_API
int                 npu_safetensors_get_fd      (const NpuSafetensors *st);
NPU_API
const guint8       *npu_safetensors_get_base    (const NpuSafetensors *st);
NPU_API
gsize               npu_safetensors_get_size    (const NpuSafetensors *st);
/* 8 + header length */
NPU_API
gsize               npu_safetensors_get_data_offset (const NpuSafetensors *st);

/* Tensors in header order */
NPU_API
guint               npu_safetensors_n_tensors   (const NpuSafetensors *st);
NPU_API
const NpuSafetensorsTensor *npu_safetensors_get_tensor (const NpuSafetensors *st,
                                                        guint i);
/* NULL if absent */
NPU_API
const NpuSafetensorsTensor *npu_safetensors_find_tensor (const NpuSafetensors *st,
                                                         const gchar *name);

/* "__metadata__" entries in header order */
NPU_API
guint               npu_safetensors_n_metadata  (const NpuSafetensors *st);
NPU_API
const gchar        *npu_safetensors_get_metadata_key (const NpuSafetensors *st,
                                                      guint i);
/* NULL if absent */
NPU_API
const gchar        *npu_safetensors_get_metadata (const NpuSafetensors *st,
                                                  const gchar *key);

/* The ggml type id (NpuGgmlType) of the float dtypes F32, F16 and BF16,
 * whose elements ggml stores the same way; -1 for every other dtype */
NPU_API
gint                npu_safetensors_dtype_ggml_type (NpuSafetensorsDtype dtype);

/* "F16" etc., NULL if out of range; size in bytes of one element */
NPU_API
const gchar        *npu_safetensors_dtype_name  (NpuSafetensorsDtype dtype);
NPU_API
gsize               npu_safetensors_dtype_size  (NpuSafetensorsDtype dtype);

/**
 * npu_safetensors_find_mxfp4:
 * @base_name: e.g. "block.0.mlp.mlp1_weight"
 *
 * Finds "<base_name>.blocks" and "<base_name>.scales" and checks that they
 * form a gpt-oss MXFP4 pair: both U8, blocks of rank >= 2 with a last
 * dimension of 16, scales of the blocks' shape without that last dimension.
 * NOT_FOUND if either is missing, FORMAT if they do not pair.  See the top
 * of this file for the byte layout and the repack it needs.
 */
NPU_API
gboolean            npu_safetensors_find_mxfp4  (const NpuSafetensors *st,
                                                 const gchar *base_name,
                                                 const NpuSafetensorsTensor **blocks,
                                                 const NpuSafetensorsTensor **scales,
                                                 GError **error);

G_END_DECLS

#endif /* __NPU_SAFETENSORS_H__ */
