/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: bytes moved, counted by kind, and the energy they cost
 *
 * Memory traffic, not arithmetic, is what a pipeline on a small device
 * pays for: an LPDDR5X/LPDDR6 interface costs 3 to 7 pJ for every bit it
 * moves.  An NpuBytes is a small counter an operation adds the bytes it
 * read and wrote to, by kind, where the work is done; the caller sums one
 * per frame, per chunk or per token.  Where the machine has no energy
 * meter (npuenergy.h), the joules are estimated from the bytes at a
 * stated pJ/bit: an estimate, to be labelled as such wherever it is shown.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_BYTES_H__
#define __NPU_BYTES_H__

#include <glib.h>
#include "npuapi.h"

G_BEGIN_DECLS

/**
 * NpuBytesKind:
 * @NPU_BYTES_FRAME: a raw video frame or audio chunk as it came in
 * @NPU_BYTES_WEIGHTS: a model's weights
 * @NPU_BYTES_KV: the KV cache
 * @NPU_BYTES_ACTIVATIONS: intermediate tensors between operations
 * @NPU_BYTES_TOKENS: token ids and embeddings handed between elements
 * @NPU_BYTES_COPIES: copies made only to move data between memories
 * @NPU_BYTES_N_KINDS: the number of kinds
 */
typedef enum
{
  NPU_BYTES_FRAME,
  NPU_BYTES_WEIGHTS,
  NPU_BYTES_KV,
  NPU_BYTES_ACTIVATIONS,
  NPU_BYTES_TOKENS,
  NPU_BYTES_COPIES,
  NPU_BYTES_N_KINDS,
} NpuBytesKind;

/**
 * NpuBytes:
 * @read: bytes read, by kind
 * @written: bytes written, by kind
 *
 * Plain counters, zeroed by npu_bytes_clear(); not locked: one counter
 * belongs to one thread of work, and counters are summed afterwards.
 */
typedef struct
{
  guint64 read[NPU_BYTES_N_KINDS];
  guint64 written[NPU_BYTES_N_KINDS];
} NpuBytes;

/* The middle of the seed's LPDDR5X/LPDDR6 range, 3 to 7 pJ/bit. */
#define NPU_BYTES_DEFAULT_PJ_PER_BIT 5.0

NPU_API
void npu_bytes_clear (NpuBytes * bytes);
NPU_API
void npu_bytes_read (NpuBytes * bytes, NpuBytesKind kind, guint64 n);
NPU_API
void npu_bytes_write (NpuBytes * bytes, NpuBytesKind kind, guint64 n);
NPU_API
void npu_bytes_add (NpuBytes * sum, const NpuBytes * part);
/* @out = @after - @before, kind by kind (@after a later copy of the same
 * running counter) */
NPU_API
void npu_bytes_diff (NpuBytes * out, const NpuBytes * after,
    const NpuBytes * before);
NPU_API
guint64 npu_bytes_total (const NpuBytes * bytes);
NPU_API
const gchar *npu_bytes_kind_name (NpuBytesKind kind);
NPU_API
gdouble npu_bytes_estimate_joules (const NpuBytes * bytes,
    gdouble pj_per_bit);

G_END_DECLS
#endif /* __NPU_BYTES_H__ */
