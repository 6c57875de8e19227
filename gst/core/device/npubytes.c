/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: bytes moved, counted by kind (npubytes.h) */
#include "npubytes.h"

#include <string.h>

void
npu_bytes_clear (NpuBytes * bytes)
{
  memset (bytes, 0, sizeof (*bytes));
}

void
npu_bytes_read (NpuBytes * bytes, NpuBytesKind kind, guint64 n)
{
  g_return_if_fail (bytes != NULL);
  g_return_if_fail ((guint) kind < NPU_BYTES_N_KINDS);

  bytes->read[kind] += n;
}

void
npu_bytes_write (NpuBytes * bytes, NpuBytesKind kind, guint64 n)
{
  g_return_if_fail (bytes != NULL);
  g_return_if_fail ((guint) kind < NPU_BYTES_N_KINDS);

  bytes->written[kind] += n;
}

void
npu_bytes_add (NpuBytes * sum, const NpuBytes * part)
{
  guint k;

  for (k = 0; k < NPU_BYTES_N_KINDS; k++) {
    sum->read[k] += part->read[k];
    sum->written[k] += part->written[k];
  }
}

/* What a running counter gained between two copies of it */
void
npu_bytes_diff (NpuBytes * out, const NpuBytes * after, const NpuBytes * before)
{
  guint k;

  for (k = 0; k < NPU_BYTES_N_KINDS; k++) {
    out->read[k] = after->read[k] - before->read[k];
    out->written[k] = after->written[k] - before->written[k];
  }
}

guint64
npu_bytes_total (const NpuBytes * bytes)
{
  guint64 total = 0;
  guint k;

  for (k = 0; k < NPU_BYTES_N_KINDS; k++)
    total += bytes->read[k] + bytes->written[k];
  return total;
}

const gchar *
npu_bytes_kind_name (NpuBytesKind kind)
{
  /* The names the stats messages and the trace use for each kind. */
  static const gchar *const names[NPU_BYTES_N_KINDS] = {
    "frame", "weights", "kv-cache", "activations", "tokens", "copies",
  };

  g_return_val_if_fail ((guint) kind < NPU_BYTES_N_KINDS, NULL);
  return names[kind];
}

/* An estimate only: every byte read or written is taken to cross the
 * memory interface once, at @pj_per_bit; caches that hold data between
 * operations make the real figure lower. */
gdouble
npu_bytes_estimate_joules (const NpuBytes * bytes, gdouble pj_per_bit)
{
  g_return_val_if_fail (pj_per_bit >= 0.0, 0.0);

  return (gdouble) npu_bytes_total (bytes) * 8.0 * pj_per_bit * 1e-12;
}
