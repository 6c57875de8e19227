/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a matrix of any decodable ggml type times F32 activations, read
 * in place (npu_matmul_typed(), npumatmul.h)
 *
 * Each weight row is decoded a chunk at a time by the reference decoder
 * (core/formats/npuquants.c: ggml's own arithmetic, so the values are the
 * file's, bit for bit) into a buffer of the worker's stack, and the chunk
 * is dotted with every activation column while it is in L1: the decode is
 * paid once for all n columns.  The activations stay F32 (the accurate
 * precision's promise for every type).  The dot product is the path's: a
 * plain loop in index order on the scalar path, the level's vector copy
 * of npumatmul-typed-kernel.c on the others.
 *
 * This is the first in-place path for the types other than MXFP4 and
 * Q8_0: an encoder's products (hundreds of columns) are bound by the
 * vector FMAs, a one-token product by the scalar decode.  Kernels that
 * work on the blocks themselves are the next step (docs/models.md,
 * "Weight types").
 */
#include "npumatmul.h"
#include "npucpu.h"
#include "core/formats/npuquants.h"

#include <string.h>

/* Values decoded at a time: a whole number of every type's blocks (256
 * is the K-quants'), 4 KiB of stack */
#define CHUNK 1024

typedef float (*DotFunc) (const float *w, const float *x, gsize n);

float npu_typed_dot_generic (const float *w, const float *x, gsize n);
#if defined(__x86_64__)
float npu_typed_dot_avx2 (const float *w, const float *x, gsize n);
float npu_typed_dot_avx512 (const float *w, const float *x, gsize n);
#endif

/* The scalar path's: in index order, as a reader of the code expects */
static float
dot_scalar (const float *w, const float *x, gsize n)
{
  float s = 0.0f;
  gsize i;

  for (i = 0; i < n; i++)
    s += w[i] * x[i];
  return s;
}

/* The dot product of the matmul path in use (npu_matmul_get_isa(), which
 * npu_matmul_set_isa() forces for tests) */
static DotFunc
current_dot (void)
{
  const gchar *isa = npu_matmul_get_isa ();

  if (!strcmp (isa, "scalar"))
    return dot_scalar;
#if defined(__x86_64__)
  if (!strcmp (isa, "avx512"))
    return npu_typed_dot_avx512;
  if (!strcmp (isa, "avx2"))
    return npu_typed_dot_avx2;
#endif
  /* neon, neon-i8mm: the baseline copy is NEON on aarch64 */
  return npu_typed_dot_generic;
}

typedef struct
{
  guint32 type;
  const guint8 *w;
  gsize row_bytes, rows, k;
  const float *x;
  gsize n;
  float *y;
  DotFunc dot;
} TypedJob;

static void
typed_rows (gsize start, gsize end, guint worker, gpointer data)
{
  const TypedJob *job = data;
  float buf[CHUNK] __attribute__((aligned (64)));
  gsize r, c, j;

  for (r = start; r < end; r++) {
    const guint8 *row = job->w + r * job->row_bytes;

    for (c = 0; c < job->n; c++)
      job->y[c * job->rows + r] = 0.0f;
    for (j = 0; j < job->k; j += CHUNK) {
      gsize len = MIN (CHUNK, job->k - j);

      /* j and len are whole blocks: k is, and CHUNK is a multiple of
       * every block size */
      npu_quants_dequantize_row (job->type, row + npu_quants_row_bytes
          (job->type, j), buf, len);
      for (c = 0; c < job->n; c++)
        job->y[c * job->rows + r] += job->dot (buf, job->x + c * job->k + j,
            len);
    }
  }
}

gboolean
npu_matmul_typed (NpuTask * task, guint32 type, const void *w, gsize rows,
    gsize k, const float *x, gsize n, float *y)
{
  TypedJob job;

  if (!npu_quants_supported (type) || (k > 0
          && npu_quants_row_bytes (type, k) == 0))
    return FALSE;
  g_return_val_if_fail (rows == 0 || k == 0 || w != NULL, FALSE);
  if (rows == 0 || n == 0)
    return TRUE;
  if (k == 0) {
    memset (y, 0, n * rows * sizeof (float));
    return TRUE;
  }
  job.type = type;
  job.w = w;
  job.row_bytes = npu_quants_row_bytes (type, k);
  job.rows = rows;
  job.k = k;
  job.x = x;
  job.n = n;
  job.y = y;
  job.dot = current_dot ();
  if (task)
    npu_task_parallel_for (task, rows, 4, typed_rows, &job);
  else
    typed_rows (0, rows, 0, &job);
  return TRUE;
}
