/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: softmax attention of one query row (internal to the core)
 *
 * The keys a query attends to sit in a few contiguous runs of rows: the
 * attention sinks, the part of the sliding window that is in the KV cache
 * (two runs when the ring has wrapped), the current batch's own rows.
 * Softmax does not depend on the order of the keys, so the runs are taken
 * as they lie in memory and every row is read with plain vector loads.
 * Rows may be stored in F32, F16 or Q8_0 (npukvtype.h): they are read in
 * place and widened to F32 in registers; queries and sums stay F32,
 * except at the AVX-512 level (VNNI) with Q8_0 keys and heads of up to
 * 64: there each query (times the scale) is rounded to int8 per block of
 * 32 values, d = max|x| / 127, |x - d code| <= max|x| (1/254 + 2^-21)
 * (a block whose max is below 2^-60 is taken as zero), and its scores
 * are exact int8 dot products times the two scales.
 * Keys may be rows like the values or tiles of sixteen rows side by side
 * (npukvtype.h), which the kernels read with no horizontal sums.
 */
#ifndef __NPU_ATTENTION_H__
#define __NPU_ATTENTION_H__

#include <glib.h>
#include "core/formats/npukvtype.h"

G_BEGIN_DECLS

typedef struct
{
  const float *q;               /* the query used against these keys */
  const void *k;                /* first key row (tiled keys: its tile) */
  const void *v;                /* first value row */
  gsize stride;                 /* values from one row to the next */
  guint n;                      /* rows */
  NpuKvType type;               /* of the k and v rows (0: F32) */
  /* FALSE: key rows as the value rows, @stride values apart; TRUE: keys
   * in tiles of NPU_KV_TILE_ROWS rows of hd values (npukvtype.h), one
   * after the other, the first row row @k_row of the tile at @k */
  gboolean k_tiled;
  guint k_row;
} NpuAttnSpan;

#define NPU_ATTN_MAX_SPANS 8

/* For each of @nq queries that share the rows of @spans (the query heads
 * of one KV head, or several tokens of one head):
 *
 *   out_i[0, hd) = sum_j softmax_j (scale q_i . k_j) v_j
 *
 * Query i of a span is at its q + i * @q_stride, its scores (scratch) at
 * @scores + i * @ss (at least one float per row), its output at @out +
 * i * @out_stride.  Every row is read once per four queries.  At least one
 * row, at most NPU_ATTN_MAX_SPANS spans, all of one type.  For Q8_0 the
 * rows must start on a block (k, v and stride at multiples of 32 values)
 * and @hd must be a multiple of 32. */
G_GNUC_INTERNAL
void npu_attention_rows (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, float *scores, gsize ss,
    float *out, gsize out_stride);

/* The same with one more logit per query in each softmax, @sinks[i] for
 * query i (already scaled: it is not multiplied by @scale), that has no
 * value row: out_i = sum_j e^(s_ij) v_j / (sum_j e^(s_ij) + e^(sinks[i])).
 * gpt-oss's attention sinks, one learned logit per query head.  @sinks
 * NULL is npu_attention_rows(). */
G_GNUC_INTERNAL
void npu_attention_rows_sinks (const NpuAttnSpan * spans, guint n_spans,
    guint hd, guint nq, gsize q_stride, float scale, const float *sinks,
    float *scores, gsize ss, float *out, gsize out_stride);

/* The copy of the kernel the current cap picks: "avx512vnni", "avx512",
 * "avx2" (x86), "neon" (aarch64, Advanced SIMD) or "generic" (the
 * compiler's baseline), for tests and benchmarks. */
G_GNUC_INTERNAL
const gchar *npu_attention_copy_name (void);

G_END_DECLS

#endif /* __NPU_ATTENTION_H__ */
