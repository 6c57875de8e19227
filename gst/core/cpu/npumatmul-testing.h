/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the matrix products' hooks for tests and benchmarks
 *
 * Not installed and not exported from libgstnpu-1.0: the unit tests and
 * benchmarks link the core statically.  A reference product to compare the
 * kernels with, and switches between kernel variants that are tuning
 * choices, not API.
 */
#ifndef __NPU_MATMUL_TESTING_H__
#define __NPU_MATMUL_TESTING_H__

#include <glib.h>
#include "core/formats/npumxfp4.h"

G_BEGIN_DECLS

/* Reference: plain loops, double accumulation, its own decoder.  @blocks in
 * ggml layout, rows x k. */
void npu_matmul_mxfp4_ref (const NpuBlockMxfp4 * blocks, gsize rows,
    gsize k, const float *x, gsize n, float *y);

/* For tests and benchmarks: with FALSE, GEMMs (n > 4) run on the kernels
 * that decode each weight group for 4 activation rows at a time (and the
 * accurate precision on int8 + residual) even where this path has the
 * panel kernels (avx512: a fast int8 GEMM over decoded 32-row panels, an
 * accurate F32 one).  Returns the previous setting.  Not thread-safe
 * against concurrent multiplications. */
gboolean npu_matmul_set_gemm_panels (gboolean panels);

/* For tests and benchmarks: with FALSE, the accurate GEMM (n > 4) on
 * avx512 is the one with F32 activations and weights decoded to F32, not
 * the int16 one (vpdpwssd), which is the default there.  Returns the
 * previous setting.  Not thread-safe against concurrent multiplications. */
gboolean npu_matmul_set_accurate_gemm_int16 (gboolean int16);

/* For tests and benchmarks: a one-token GEMV on a path with a GEMV kernel
 * (avx512) reads each thread's rows as @streams (1, 2, 4 or 8) sequential
 * runs side by side; 0, the default, for the library's choice, measured
 * in the process (npugemvstreams.h).  Returns the previous setting.  Not
 * thread-safe against concurrent multiplications. */
guint npu_matmul_set_gemv_streams (guint streams);

G_END_DECLS

#endif /* __NPU_MATMUL_TESTING_H__ */
