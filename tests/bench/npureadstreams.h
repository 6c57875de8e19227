/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu benchmarks: the read limit's access pattern, one definition for
 * bench-llm's probe and bench-pages, so that both read memory the same way.
 */
#ifndef NPU_READ_STREAMS_H
#define NPU_READ_STREAMS_H

#include <glib.h>

typedef guint64 NpuReadVec __attribute__((vector_size (16)));

/* @n_streams streams of @len bytes (a multiple of 128), one after the
 * other from @data, read 128 bytes of each in turn (two cache lines: the
 * adjacent-line prefetcher pairs them), each with a software prefetch
 * @pf_distance bytes ahead of it (0: none).  Returns the sum of what was
 * read, for the caller to keep so that the reads stay. */
static inline guint64
npu_read_streams (const guint8 * data, gsize len, guint n_streams,
    gsize pf_distance)
{
  NpuReadVec a0 = { 0, 0 }, a1 = a0, a2 = a0, a3 = a0;
  gsize o;
  guint s;

  for (o = 0; o < len; o += 128)
    for (s = 0; s < n_streams; s++) {
      const guint8 *line = data + s * len + o;
      const NpuReadVec *v = (const NpuReadVec *) line;

      if (pf_distance)
        __builtin_prefetch (line + pf_distance, 0, 3);
      a0 += v[0] + v[1];
      a1 += v[2] + v[3];
      a2 += v[4] + v[5];
      a3 += v[6] + v[7];
    }
  a0 += a1 + a2 + a3;
  return a0[0] + a0[1];
}

#endif /* NPU_READ_STREAMS_H */
