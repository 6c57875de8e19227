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
#include "core/formats/npugguf.h"
#include "core/formats/npuquants.h"

#include <string.h>

/* Values of a row decoded at a time: a whole number of every type's
 * blocks (256 is the K-quants'); ROWS of them, 16 KiB of stack */
#define CHUNK 1024

typedef float (*DotFunc) (const float *w, const float *x, gsize n);
typedef void (*Dot4Func) (const float *w, gsize stride, const float *x,
    gsize n, float *out);

typedef void (*RowFunc) (const guint8 * src, float *dst, gsize n);
typedef gboolean (*Dot4HalfFunc) (guint32 type, const guint8 * w,
    gsize stride, const float *x, gsize n, float *out);

#define DECLARE_DOTS(isa) \
  float npu_typed_dot_##isa (const float *w, const float *x, gsize n); \
  void npu_typed_dot4_##isa (const float *w, gsize stride, const float *x, \
      gsize n, float *out); \
  void npu_typed_dot4x3_##isa (const float *w, gsize stride, \
      const float *x0, const float *x1, const float *x2, gsize n, \
      float *out); \
  void npu_typed_f16_row_##isa (const guint8 * src, float *dst, gsize n); \
  void npu_typed_bf16_row_##isa (const guint8 * src, float *dst, gsize n); \
  gboolean npu_typed_dot4_half_##isa (guint32 type, const guint8 * w, \
      gsize stride, const float *x, gsize n, float *out)

DECLARE_DOTS (generic);
#if defined(__x86_64__)
DECLARE_DOTS (avx2);
DECLARE_DOTS (avx512);
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

static void
dot4_scalar (const float *w, gsize stride, const float *x, gsize n, float *out)
{
  guint r;

  for (r = 0; r < 4; r++)
    out[r] = dot_scalar (w + r * stride, x, n);
}

static void
dot4x3_scalar (const float *w, gsize stride, const float *x0,
    const float *x1, const float *x2, gsize n, float *out)
{
  dot4_scalar (w, stride, x0, n, out);
  dot4_scalar (w, stride, x1, n, out + 4);
  dot4_scalar (w, stride, x2, n, out + 8);
}

/* The dot products of the matmul path in use (npu_matmul_get_isa(), which
 * npu_matmul_set_isa() forces for tests) */
typedef void (*Dot4x3Func) (const float *w, gsize stride, const float *x0,
    const float *x1, const float *x2, gsize n, float *out);

typedef struct
{
  DotFunc dot;
  Dot4Func dot4;
  Dot4x3Func dot4x3;
  RowFunc f16_row, bf16_row;
  Dot4HalfFunc dot4_half;
} Kernels;

#define KERNELS(isa) { npu_typed_dot_##isa, npu_typed_dot4_##isa, \
  npu_typed_dot4x3_##isa, npu_typed_f16_row_##isa, npu_typed_bf16_row_##isa, \
  npu_typed_dot4_half_##isa }

/* The kernels of the matmul path in use (npu_matmul_get_isa(), which
 * npu_matmul_set_isa() forces for tests); the scalar path's dot products
 * are the plain loops, its conversions the reference decoder's */
static Kernels
current_kernels (void)
{
  const gchar *isa = npu_matmul_get_isa ();
  Kernels k = KERNELS (generic);

  if (!strcmp (isa, "scalar")) {
    k.dot = dot_scalar;
    k.dot4 = dot4_scalar;
    k.dot4x3 = dot4x3_scalar;
    k.f16_row = k.bf16_row = NULL;
    k.dot4_half = NULL;
  }
#if defined(__x86_64__)
  if (!strcmp (isa, "avx512")) {
    Kernels a = KERNELS (avx512);
    k = a;
  } else if (!strcmp (isa, "avx2")) {
    Kernels a = KERNELS (avx2);
    k = a;
  }
#endif
  /* neon, neon-i8mm: the baseline copy is NEON on aarch64 */
  return k;
}

typedef struct
{
  guint32 type;
  const guint8 *w;
  gsize row_bytes, rows, k;
  const float *x;
  gsize n;
  float *y;
  Kernels kern;
  gboolean f32_in_place;        /* F32 rows multiplied where they are */
} TypedJob;

/* Row @r's values [j, j + len) as floats into @buf: the level's
 * conversion for F16 and BF16, the reference decoder for the other types
 * (F32 rows are read in place, typed_rows ()) */
static void
decode_row (const TypedJob * job, gsize r, gsize j, gsize len, float *buf)
{
  const guint8 *src = job->w + r * job->row_bytes +
      npu_quants_row_bytes (job->type, j);

  if (job->type == NPU_GGML_TYPE_F16 && job->kern.f16_row)
    job->kern.f16_row (src, buf, len);
  else if (job->type == NPU_GGML_TYPE_BF16 && job->kern.bf16_row)
    job->kern.bf16_row (src, buf, len);
  else
    npu_quants_dequantize_row (job->type, src, buf, len);
}

/* Rows decoded at a time: each activation vector loaded once for all of
 * them (npu_typed_dot4 ()) */
#define ROWS 4

static void
typed_rows (gsize start, gsize end, guint worker, gpointer data)
{
  const TypedJob *job = data;
  float buf[ROWS * CHUNK] __attribute__((aligned (64)));
  gsize r, c, j;
  guint i;

  for (r = start; r < end; r += ROWS) {
    guint nr = MIN (ROWS, end - r);

    /* F16 and BF16 rows of one or two columns widened in registers:
     * each weight is read once, a decode buffer would double the work */
    if (nr == ROWS && job->n <= 2 && job->kern.dot4_half) {
      const guint8 *w = job->w + r * job->row_bytes;
      float out[ROWS];

      for (c = 0; c < job->n; c++) {
        if (!job->kern.dot4_half (job->type, w, job->row_bytes,
                job->x + c * job->k, job->k, out))
          break;
        for (i = 0; i < ROWS; i++)
          job->y[c * job->rows + r + i] = out[i];
      }
      if (c == job->n)
        continue;
    }
    for (i = 0; i < nr; i++)
      for (c = 0; c < job->n; c++)
        job->y[c * job->rows + r + i] = 0.0f;
    for (j = 0; j < job->k; j += CHUNK) {
      gsize len = MIN (CHUNK, job->k - j);
      /* the group's rows, @stride floats apart: F32 rows where the
       * matrix holds them, the others decoded side by side into buf
       * (j and len are whole blocks: k is, and CHUNK is a multiple of
       * every block size) */
      const float *v = buf;
      gsize stride = CHUNK;

      if (job->f32_in_place) {
        v = (const float *) (job->w + r * job->row_bytes) + j;
        stride = job->k;
      } else {
        for (i = 0; i < nr; i++)
          decode_row (job, r + i, j, len, buf + i * CHUNK);
      }
      c = 0;
      if (nr == ROWS) {
        /* three columns at a time: each weight vector loaded once for
         * the three */
        for (; c + 3 <= job->n; c += 3) {
          const float *x = job->x + c * job->k + j;
          float *y = job->y + c * job->rows + r;
          float out[3 * ROWS];

          job->kern.dot4x3 (v, stride, x, x + job->k, x + 2 * job->k, len, out);
          for (i = 0; i < ROWS; i++) {
            y[i] += out[i];
            y[job->rows + i] += out[ROWS + i];
            y[2 * job->rows + i] += out[2 * ROWS + i];
          }
        }
      }
      for (; c < job->n; c++) {
        const float *x = job->x + c * job->k + j;
        float *y = job->y + c * job->rows + r;

        if (nr == ROWS) {
          float out[ROWS];

          job->kern.dot4 (v, stride, x, len, out);
          for (i = 0; i < ROWS; i++)
            y[i] += out[i];
        } else {
          for (i = 0; i < nr; i++)
            y[i] += job->kern.dot (v + i * stride, x, len);
        }
      }
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
  job.kern = current_kernels ();
  /* F32 rows on float alignment (a file's tensor data is 32-aligned) */
  job.f32_in_place = type == NPU_GGML_TYPE_F32 && ((guintptr) w & 3) == 0;
  /* claims of 32 rows, whole groups of ROWS (only the last claim has a
   * partial group) and whole cache lines of y (two threads never write
   * the same one) */
  if (task)
    npu_task_parallel_for (task, rows, 32, typed_rows, &job);
  else
    typed_rows (0, rows, 0, &job);
  return TRUE;
}
