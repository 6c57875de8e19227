/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the block types times int8 activations, read in place
 * (npu_matmul_blocks(), npumatmul.h)
 *
 * The products of Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K matrices on
 * integer dot products, as llama.cpp's vec_dot_*_q8_* do: each column of
 * activations is quantised once per call, a block of 32 at a time, to
 * int8 with d = max|x| / 127 (FAST), or to that and the int8 code of its
 * residual (ACCURATE, about 16 bits, the same two passes as the MXFP4
 * kernels'), with each block's code sum kept for the types' offsets; the
 * rows are then unpacked and multiplied by the level's copy of
 * npumatmul-blocks-kernel.c, spread over the task's threads.
 *
 * Columns go a group at a time, their codes on this thread's stack (no
 * allocation per product: a decode step allocates nothing).
 */
#include "npumatmul-private.h"
#include "npucpu.h"
#include "core/formats/npugguf.h"
#include "core/formats/npuquants.h"

#include <math.h>
#include <string.h>

/* The largest row this path takes, and the columns of a group */
#define MAX_K 16384
#define GROUP_COLS 4

typedef void (*RowsFunc) (guint32 type, const guint8 * w, gsize row_bytes,
    gsize r0, gsize r1, gsize k, const gint8 * qx, const float *dx,
    const float *xsum, guint n_cols, guint n_passes, gsize col_stride,
    float *y, gsize y_stride);

#define DECLARE_ROWS(isa) \
  void npu_blocks_rows_##isa (guint32 type, const guint8 * w, \
      gsize row_bytes, gsize r0, gsize r1, gsize k, const gint8 * qx, \
      const float *dx, const float *xsum, guint n_cols, guint n_passes, \
      gsize col_stride, float *y, gsize y_stride)

DECLARE_ROWS (generic);
#if defined(__x86_64__)
DECLARE_ROWS (avx2);
DECLARE_ROWS (avx512);
#endif
#if defined(__aarch64__)
DECLARE_ROWS (neon);
#endif

/* The copy of the matmul path in use (npu_matmul_get_isa()); the scalar
 * path has no copy of its own and runs the baseline one */
static RowsFunc
current_rows (void)
{
  const gchar *isa = npu_matmul_get_isa ();

#if defined(__x86_64__)
  if (!strcmp (isa, "avx512"))
    return npu_blocks_rows_avx512;
  if (!strcmp (isa, "avx2"))
    return npu_blocks_rows_avx2;
#endif
#if defined(__aarch64__)
  /* both Arm levels have the dot product (sdot) */
  if (g_str_has_prefix (isa, "neon"))
    return npu_blocks_rows_neon;
#endif
  (void) isa;
  return npu_blocks_rows_generic;
}

gboolean
npu_matmul_blocks_supported (guint32 type)
{
  switch (type) {
    case NPU_GGML_TYPE_Q4_0:
    case NPU_GGML_TYPE_Q4_1:
    case NPU_GGML_TYPE_Q5_0:
    case NPU_GGML_TYPE_Q5_1:
    case NPU_GGML_TYPE_Q4_K:
    case NPU_GGML_TYPE_Q5_K:
    case NPU_GGML_TYPE_Q6_K:
      return TRUE;
    default:
      return FALSE;
  }
}

/* @k values of @x as int8 codes a @group (32, or 256 for the K-quants,
 * as ggml's Q8_0 and Q8_K) at a time (npu_q8_quantize_group(): a NaN or
 * an Inf gives its group a NaN scale), and d and the code sum of each
 * block of 32.  With @res, @x - d q goes there (the residual the second
 * pass quantises; @x itself where d is not finite, so that the second
 * pass is NaN too). */
static void
quantize_column (const float *x, gsize k, gsize group, gint8 * q, float *d,
    float *sum, float *res)
{
  gsize g, b, j;

  for (g = 0; g < k; g += group) {
    float dg = npu_q8_quantize_group (x + g, group, q + g);

    for (b = g / 32; b < (g + group) / 32; b++) {
      gint32 s = 0;

      d[b] = dg;
      for (j = 32 * b; j < 32 * b + 32; j++) {
        s += q[j];
        if (res)
          res[j] = isfinite (dg) ? x[j] - dg * (float) q[j] : x[j];
      }
      sum[b] = (float) s;       /* exact: at most 32 x 127 */
    }
  }
}

typedef struct
{
  RowsFunc rows_func;
  guint32 type;
  const guint8 *w;
  gsize row_bytes, rows, k;
  const gint8 *qx;
  const float *dx;
  const float *xsum;
  guint n_cols, n_passes;
  float *y;
} BlocksJob;

/* Rows [start, end) of every column */
static void
blocks_rows (gsize start, gsize end, gpointer data)
{
  const BlocksJob *job = data;

  job->rows_func (job->type, job->w, job->row_bytes, start, end, job->k,
      job->qx, job->dx, job->xsum, job->n_cols, job->n_passes, job->k,
      job->y, job->rows);
}

/* Rows are claimed guided, as the MXFP4 GEMV's tiles (npumatmul.c): each
 * claim 1 / (2 threads) of the rows still left, at least CLAIM_ROWS (whole
 * cache lines of y, so two threads never write the same one) */
#define CLAIM_ROWS 32
#define CLAIM_SHARE 2

gboolean
npu_matmul_blocks (NpuTask * task, guint32 type, const void *w, gsize rows,
    gsize k, const float *x, gsize n, float *y, NpuMatmulPrecision precision)
{
  /* a group's codes (both passes), block scales and sums, and the
   * residual of the column at hand */
  gint8 qx[2 * GROUP_COLS * MAX_K] __attribute__((aligned (32)));
  float dx[2 * GROUP_COLS * MAX_K / 32];
  float xsum[2 * GROUP_COLS * MAX_K / 32];
  float res[MAX_K];
  guint passes = precision == NPU_MATMUL_PRECISION_ACCURATE ? 2 : 1;
  /* the activations a scale: a block of 32 (Q8_0), or the K-quants'
   * super-block of 256 (Q8_K): the weights' own block either way */
  guint group = 0;
  BlocksJob job;
  gsize c0;

  if (!npu_matmul_blocks_supported (type) || k == 0 || k > MAX_K
      || npu_quants_row_bytes (type, k) == 0
      || !npu_ggml_type_info (type, &group, NULL))
    return FALSE;
  g_return_val_if_fail (rows == 0 || w != NULL, FALSE);

  job.rows_func = current_rows ();
  job.type = type;
  job.w = w;
  job.row_bytes = npu_quants_row_bytes (type, k);
  job.rows = rows;
  job.k = k;
  job.qx = qx;
  job.dx = dx;
  job.xsum = xsum;
  job.n_passes = passes;
  for (c0 = 0; c0 < n; c0 += GROUP_COLS) {
    guint nc = MIN (GROUP_COLS, n - c0), c;

    for (c = 0; c < nc; c++) {
      gsize i = c * k, i2 = (nc + c) * k;

      quantize_column (x + (c0 + c) * k, k, group, qx + i, dx + i / 32,
          xsum + i / 32, passes == 2 ? res : NULL);
      if (passes == 2)
        quantize_column (res, k, group, qx + i2, dx + i2 / 32, xsum + i2 / 32,
            NULL);
    }
    job.n_cols = nc;
    job.y = y + c0 * rows;
    npu_task_parallel_claims (task, rows, CLAIM_ROWS, CLAIM_SHARE,
        blocks_rows, &job);
  }
  return TRUE;
}
