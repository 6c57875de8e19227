/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: how many row streams a one-token GEMV reads, chosen by
 * measurement on the machine
 *
 * A decode step's GEMV reads each thread's rows as S runs side by side (S
 * sequential streams, npumatmul-avx512.c).  The best S is a property of
 * the CPU's prefetchers and memory, not of the code: on the Xeons the
 * kernels were written on, 8 streams on one thread read ~1.8x what one
 * does; on an AMD EPYC (Zen 4), 2 streams decode 1.67x faster than 8
 * (docs/kernels.md).  So the first large GEMVs of a process take turns
 * with S = 1, 2, 4 and 8, each timed, and once every candidate has run
 * NPU_GEMV_STREAMS_TRIALS times the one that read the most bytes a second
 * is kept for that thread count.  The sums are the same for every S (one
 * accumulator chain per row whatever the streams), so the choice changes
 * speed only, never a result.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_GEMV_STREAMS_H__
#define __NPU_GEMV_STREAMS_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS
/* Trials of each candidate before the choice */
#define NPU_GEMV_STREAMS_TRIALS 24
/* GEMVs of fewer weight bytes are not timed (too short to measure, and
 * apt to sit in a cache) */
#define NPU_GEMV_STREAMS_MIN_BYTES (1024 * 1024)
    typedef struct
{
  guint streams;                /* what the GEMV reads with */
  /* private */
  guint slot, candidate;
  gsize bytes;
  gint64 start;
} NpuGemvStreamsTrial;

/* The streams of a GEMV of @weight_bytes on @n_threads threads; call
 * npu_gemv_streams_end() when it is done. */
void npu_gemv_streams_begin (NpuGemvStreamsTrial * trial, guint n_threads,
    gsize weight_bytes);
void npu_gemv_streams_end (NpuGemvStreamsTrial * trial);

/* The streams chosen for @n_threads threads, 0 while still measuring */
NPU_API guint npu_gemv_streams_get_chosen (guint n_threads);
/* Forgets every measurement (tests, benchmarks) */
NPU_API void npu_gemv_streams_reset (void);

G_END_DECLS
#endif /* __NPU_GEMV_STREAMS_H__ */
