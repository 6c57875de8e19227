/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the element types a KV cache row may be stored in
 *
 * A row is kv_dim values (or one head's part of them).  F16 halves the
 * cache, Q8_0 (ggml's block_q8_0: an F16 scale and 32 int8 per block)
 * takes 34 bytes per 32 values, 0.27x of F32.  The attention kernel reads
 * every type in place and widens to F32 in registers only.
 *
 * Error of one stored value x (docs/llm-core.md, "KV cache types"):
 *   F32   exact
 *   F16   |x - x'| <= 2^-11 |x| (round to nearest even; |x| <= 65504,
 *         larger values become +-Inf)
 *   Q8_0  |x - x'| <= (1 + 2^-10) max|block| / 254 + 2^-18 (scale d =
 *         F16 of max|block| / 127, then round (x / d) clamped to
 *         [-127, 127]; the 2^-18 only counts when d is below F16's
 *         normal range, max|block| < 7.8e-3)
 *
 * Keys may also be stored in tiles (npullm's cache does): sixteen rows of
 * a head side by side, value d of the sixteen rows in one run, so that the
 * attention kernel gets the sixteen rows' dot products of a query as one
 * vector of multiply-adds with no horizontal sum.  A tile of @hd-value
 * rows takes the bytes of its sixteen rows (npu_kv_tile_bytes()):
 *   F32   float d * 16 + j is value d of row j
 *   F16   half d * 16 + j is value d of row j
 *   Q8_0  first hd / 32 runs of sixteen F16 scales (half b * 16 + j is the
 *         scale of block b of row j), then the int8 values, byte
 *         hd / 32 * 32 + d * 16 + j is value d of row j
 * The values are those npu_kv_encode_row() stores, moved, not rounded
 * again.
 *
 * This is compute core: GLib only.
 */
#ifndef __NPU_KV_TYPE_H__
#define __NPU_KV_TYPE_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS

typedef enum
{
  NPU_KV_F32 = 0,
  NPU_KV_F16,
  NPU_KV_Q8_0,
} NpuKvType;

/* Values per Q8_0 block, and its bytes (an F16 scale, 32 int8) */
#define NPU_KV_Q8_0_BLOCK 32
#define NPU_KV_Q8_0_BYTES 34

/* "f32", "f16", "q8_0" (NULL for an unknown type) */
NPU_API
const gchar *npu_kv_type_name (NpuKvType type);
/* The type named @name (as npu_kv_type_name() spells it); FALSE if none */
NPU_API
gboolean npu_kv_type_from_name (const gchar * name, NpuKvType * type);

/* Bytes of @n values (for Q8_0 @n must be a multiple of 32) */
NPU_API
gsize npu_kv_row_bytes (NpuKvType type, gsize n);

/* Stores @n F32 values of @src in @dst in @type (@n a multiple of 32 for
 * Q8_0), rounding as above */
NPU_API
void npu_kv_encode_row (NpuKvType type, const float *src, gsize n, void *dst);

/* Value @i of a row stored in @type */
NPU_API
float npu_kv_decode_at (NpuKvType type, const void *row, gsize i);

/* Rows in a key tile */
#define NPU_KV_TILE_ROWS 16

/* Bytes of a tile of NPU_KV_TILE_ROWS rows of @hd values */
NPU_API
gsize npu_kv_tile_bytes (NpuKvType type, gsize hd);

/* Puts the row @row (@hd values stored in @type by npu_kv_encode_row())
 * into row @j (< NPU_KV_TILE_ROWS) of the tile @tile */
NPU_API
void npu_kv_tile_put (NpuKvType type, gsize hd, const void *row, void *tile,
    guint j);

/* IEEE binary16 of @f, rounded to nearest even (overflow to +-Inf, NaN
 * stays NaN) */
NPU_API
guint16 npu_f32_to_f16 (float f);

G_END_DECLS

#endif /* __NPU_KV_TYPE_H__ */
