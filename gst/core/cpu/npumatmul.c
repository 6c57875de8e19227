/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 and Q8_0 matrix products: reference, exact scalar paths,
 * activation quantisers, run-time dispatch and threading.  The SIMD kernels
 * are in npumatmul-<isa>.c, each built with its own instruction-set flags so
 * that this file runs on any CPU of the architecture.
 */
#include "npumatmul.h"
#include "npumatmul-testing.h"
#include "npumatmul-private.h"
#include "npugemvstreams.h"
#include "core/device/npuhugemem.h"
#include "npucpu.h"

#include <math.h>
#include <string.h>

/* The paths, as npucpu.h's levels: the kernels of level i need its
 * features. */
typedef NpuCpuIsa Isa;

#define ISA_SCALAR NPU_CPU_ISA_SCALAR
#define ISA_AVX2 NPU_CPU_ISA_AVX2
#define ISA_AVX512 NPU_CPU_ISA_AVX512
#define ISA_ASIMD NPU_CPU_ISA_ASIMD
#define ISA_NEON NPU_CPU_ISA_NEON
#define ISA_NEON_I8MM NPU_CPU_ISA_NEON_I8MM

static Isa current_isa;
/* FALSE: GEMMs on the tile kernels even where panel kernels exist
 * (npu_matmul_set_gemm_panels(), for tests and benchmarks) */
static gboolean use_panels = TRUE;
/* FALSE: the accurate GEMM on avx512 is the F32 one even though the int16
 * one is faster (npu_matmul_set_accurate_gemm_int16(), for tests and
 * benchmarks) */
static gboolean use_int16_gemm = TRUE;
float npu_matmul_e8m0_table[256];

/* E2M1 codes 0..15 as floats */
static const float e2m1_values[16] = {
  0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

/* Activation rows per quantiser slice and rows / columns per tile.  Row
 * tiles are multiples of every kernel's micro tile; a GEMM tile's weights
 * (64 rows) and activations (64 columns) stay in L2 while it runs. */
#define GEMV_MAX_N 4
#define HUGE_MATRIX_BYTES ((gsize) 2 << 20)
#define GEMV_ROW_TILE 32
/* GEMV tiles a thread claims at once: consecutive tiles are one contiguous
 * run of weights, which the hardware prefetchers follow; claimed one by one
 * the threads' tiles interleave and every 32 rows each stream restarts.
 * 2 threads on the 1B llama: decode 81% -> 85-87% of the roofline. */
#define GEMV_CLAIM_TILES 4
/* A one-token GEMV (the paths with a GEMV kernel) claims its runs guided:
 * each claim takes 1 / (GEMV_GUIDED_SHARE x threads) of the tiles still
 * left, at least GEMV_CLAIM_TILES, and one thread takes them all.  Each
 * run is read as 8 streams, and each stream starts cold (no prefetch has
 * reached it yet): with runs of 4 tiles a stream was 16 rows, 16 KiB at
 * k = 2048.  Long first claims keep the streams long; the shrinking last
 * ones let a helper that comes late to the loop (woken from sleep, or
 * descheduled on a busy machine) take its share instead of waiting for
 * one long claim of the other thread's.  1B llama decode, one run
 * alternating (a busy machine), share of bench-llm's read limit on 1 / 2
 * threads: claims of 4 tiles 77 / 55 %, of half a thread's share 78 /
 * 53 %, guided 82 / 58 % (docs/kernels.md). */
#define GEMV_GUIDED_SHARE 2
/* Runs of rows read side by side in a one-token GEMV where the path has a
 * GEMV kernel: one sequential stream per thread reads ~55 % of what
 * several give on a Xeon (bench-llm's read limit), docs/kernels.md; the
 * best count differs between CPUs, so it is measured in the process
 * (npugemvstreams.h) unless npu_matmul_set_gemv_streams() fixes it. */
static guint gemv_streams = 0;
#define GEMM_ROW_TILE 64
#define GEMM_COL_TILE 64
/* The accurate F32 GEMM: 64 weight rows (one decoded panel) by about 192
 * activation rows (up to 240, run_f32_job()), whose chunk of 128 k (96
 * KiB, at most 120) and outputs (48 KiB, at most 60) stay in L2 while
 * the panel is reused 32 times */
#define GEMM_F32_ROW_TILE 64
#define GEMM_F32_COL_TILE 192
/* The panel GEMMs: 32 weight rows (one panel, decoded once for the whole
 * k: 1 or 2 KiB a block) by 128 activation rows (4 or 8 KiB of codes a
 * block: 256 KiB of int8 codes at k = 2048, 768 KiB of int16 at k = 3072,
 * in L2) */
#define PANEL_ROW_TILE 32
#define PANEL_COL_TILE 128

/* The paths this build has, usable on this CPU within NPU_CPU_ISA's cap */
static gboolean
isa_available (Isa isa)
{
  switch (isa) {
    case ISA_SCALAR:
      return TRUE;
#if defined(__x86_64__)
    case ISA_AVX2:
    case ISA_AVX512:
      return npu_cpu_isa_usable (isa);
#endif
#if defined(__aarch64__) && defined(__linux__)
    case ISA_ASIMD:
    case ISA_NEON:
    case ISA_NEON_I8MM:
      return npu_cpu_isa_usable (isa);
#endif
    default:
      return FALSE;
  }
}

static void
matmul_init (void)
{
  static gsize initialised = 0;

  if (g_once_init_enter (&initialised)) {
    gint e;

    for (e = 0; e < 255; e++)
      npu_matmul_e8m0_table[e] = ldexpf (1.0f, e - 127);
    npu_matmul_e8m0_table[255] = NAN;

    /* the best path within NPU_CPU_ISA's cap (npucpu.h) */
    current_isa = npu_cpu_get_isa ();
    if (!isa_available (current_isa))
      current_isa = ISA_SCALAR;
    g_once_init_leave (&initialised, 1);
  }
}

const gchar *
npu_matmul_get_isa (void)
{
  matmul_init ();
  return npu_cpu_isa_name (current_isa);
}

gboolean
npu_matmul_set_isa (const gchar * name)
{
  Isa isa;

  matmul_init ();
  if (!npu_cpu_isa_from_name (name, &isa) || !isa_available (isa))
    return FALSE;
  current_isa = isa;
  return TRUE;
}

/* ------------------------------------------------------------------------
 * Matrices
 */
void
npu_mxfp4_matrix_init_view (NpuMxfp4Matrix * m, const NpuBlockMxfp4 * blocks,
    gsize rows, gsize k)
{
  g_return_if_fail (k % NPU_MXFP4_BLOCK_SIZE == 0);

  memset (m, 0, sizeof (*m));
  m->rows = rows;
  m->k = k;
  m->n_blocks = k / NPU_MXFP4_BLOCK_SIZE;
  m->layout = NPU_MXFP4_LAYOUT_BLOCKS;
  m->blocks = blocks;
}

void
npu_mxfp4_matrix_repack (NpuMxfp4Matrix * m, const NpuBlockMxfp4 * blocks,
    gsize rows, gsize k)
{
  gsize nb, stride, r, b, size;
  guint8 *nibbles, *scales;

  g_return_if_fail (k % NPU_MXFP4_BLOCK_SIZE == 0);

  memset (m, 0, sizeof (*m));
  nb = k / NPU_MXFP4_BLOCK_SIZE;
  stride = (nb + 3) & ~(gsize) 3;
  /* One allocation: nibbles first so they keep the 64-byte alignment; the
   * padding blocks are zero (scale 2^-127, elements 0).  Matrices of a
   * huge page or more go on huge pages (npuhugemem.h). */
  size = rows * stride * 17 + 1;
  if (size >= HUGE_MATRIX_BYTES) {
    nibbles = npu_huge_alloc0 (size);
    m->owned_size = size;
  } else {
    nibbles = g_aligned_alloc0 (size, 1, 64);
  }
  scales = nibbles + rows * stride * 16;
  for (r = 0; r < rows; r++) {
    for (b = 0; b < nb; b++) {
      const NpuBlockMxfp4 *src = &blocks[r * nb + b];

      scales[r * stride + b] = src->e;
      m->nan_scales |= src->e == NPU_E8M0_NAN;
      memcpy (nibbles + (r * stride + b) * 16, src->qs, 16);
    }
  }
  m->rows = rows;
  m->k = k;
  m->n_blocks = nb;
  m->layout = NPU_MXFP4_LAYOUT_SPLIT;
  m->stride = stride;
  m->scales = scales;
  m->nibbles = nibbles;
  m->owned = nibbles;
}

void
npu_mxfp4_matrix_clear (NpuMxfp4Matrix * m)
{
  if (m->owned_size)
    npu_huge_free (m->owned, m->owned_size);
  else if (m->owned)
    g_aligned_free (m->owned);
  memset (m, 0, sizeof (*m));
}

gsize
npu_mxfp4_matrix_get_size (const NpuMxfp4Matrix * m)
{
  if (m->layout == NPU_MXFP4_LAYOUT_SPLIT)
    return m->rows * m->stride * 17;
  return m->rows * m->n_blocks * sizeof (NpuBlockMxfp4);
}

/* ------------------------------------------------------------------------
 * Reference: written for clarity, not speed.  Its decoder follows the
 * spec's definitions, not the tables the kernels use.
 */
static double
ref_e2m1 (guint code)
{
  static const double mag[8] = { 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0 };

  return (code & 8) ? -mag[code & 7] : mag[code & 7];
}

void
npu_matmul_mxfp4_ref (const NpuBlockMxfp4 * blocks, gsize rows, gsize k,
    const float *x, gsize n, float *y)
{
  gsize nb = k / NPU_MXFP4_BLOCK_SIZE, c, r, b, j;

  for (c = 0; c < n; c++) {
    for (r = 0; r < rows; r++) {
      double sum = 0.0;

      for (b = 0; b < nb; b++) {
        const NpuBlockMxfp4 *blk = &blocks[r * nb + b];
        const float *xb = x + c * k + b * NPU_MXFP4_BLOCK_SIZE;
        double scale = blk->e == NPU_E8M0_NAN ? NAN : ldexp (1.0, blk->e - 127);

        for (j = 0; j < 16; j++) {
          sum += scale * ref_e2m1 (blk->qs[j] & 0xF) * xb[j];
          sum += scale * ref_e2m1 (blk->qs[j] >> 4) * xb[j + 16];
        }
      }
      y[c * rows + r] = (float) sum;
    }
  }
}

/* ------------------------------------------------------------------------
 * Exact scalar path: F32 weights decoded by table, F32 activations.  The
 * block's sum is formed before the scale is applied, as a power of two
 * scales it without rounding.
 */
static void
scalar_row (const NpuMxfp4Matrix * w, gsize r, const float *x, gsize n,
    float *y)
{
  gsize nb = w->n_blocks, c, b, j;

  for (c = 0; c < n; c++) {
    const float *xc = x + c * w->k;
    float sum = 0.0f;

    for (b = 0; b < nb; b++) {
      const guint8 *qs;
      guint8 e;
      float bs = 0.0f;

      if (w->layout == NPU_MXFP4_LAYOUT_SPLIT) {
        qs = w->nibbles + (r * w->stride + b) * 16;
        e = w->scales[r * w->stride + b];
      } else {
        qs = w->blocks[r * nb + b].qs;
        e = w->blocks[r * nb + b].e;
      }
      for (j = 0; j < 16; j++) {
        bs += e2m1_values[qs[j] & 0xF] * xc[b * 32 + j];
        bs += e2m1_values[qs[j] >> 4] * xc[b * 32 + j + 16];
      }
      sum += bs * npu_matmul_e8m0_table[e];
    }
    y[c * w->rows + r] = sum;
  }
}

/* Exact scalar Q8_0 path: each weight d * q is exact in F32 (an 11-bit
 * significand times an 8-bit integer, never below 2^-24), so the only
 * roundings are those of F32 products and sums, as in scalar_row(). */
static void
scalar_row_q8_0 (const NpuBlockQ8_0 * w, gsize nb, gsize rows, gsize r,
    const float *x, gsize n, float *y)
{
  gsize c, b, j;

  for (c = 0; c < n; c++) {
    const float *xc = x + c * nb * 32;
    float sum = 0.0f;

    for (b = 0; b < nb; b++) {
      const NpuBlockQ8_0 *blk = &w[r * nb + b];
      float d = npu_f16_to_f32 ((guint16) (blk->d[0] | blk->d[1] << 8));
      float bs = 0.0f;

      for (j = 0; j < 32; j++)
        bs += d * (float) blk->qs[j] * xc[b * 32 + j];
      sum += bs;
    }
    y[c * rows + r] = sum;
  }
}

/* ------------------------------------------------------------------------
 * Activation quantisers (Q8 per block of 32, F32 scale)
 *
 * q = round (x / d) with d = max|x| / 127, so |q| <= 127 and
 * |x - d q| <= d (1/2 + 2^-17): the division is correctly rounded, |x / d|
 * <= 127, and the rounding to the nearest integer adds at most 1/2.
 */

float
npu_q8_quantize_group (const float *x, gsize len, gint8 * q)
{
  float amax = 0.0f, d;
  gboolean finite = TRUE;
  gsize j;

  for (j = 0; j < len; j++) {
    float a = fabsf (x[j]);

    /* MAX() would let a later element replace a NaN */
    finite &= a <= G_MAXFLOAT;
    amax = a > amax ? a : amax;
  }
  if (!finite) {
    /* NaN or Inf in the group: its codes are 0, its scale NaN, so every
     * output it meets is NaN. */
    memset (q, 0, len);
    return NAN;
  }
  if (amax == 0.0f) {
    memset (q, 0, len);
    return 0.0f;
  }
  d = amax / 127.0f;
  for (j = 0; j < len; j++)
    q[j] = (gint8) lrintf (x[j] / d);
  return d;
}

/* One block: its 32 codes into @q; returns its scale */
static inline float
quantize_block (const float *xb, gint8 * q)
{
  return npu_q8_quantize_group (xb, 32, q);
}

/* x minus what the int8 codes of its blocks give (d q, as the kernels
 * read them): the second term of the accurate path.  A block whose scale
 * is not finite (a NaN or Inf in it) keeps its values, so the second term
 * is non-finite too. */
static void
residual_row (const float *x, gsize nb, float *r)
{
  gsize b;
  guint j;

  for (b = 0; b < nb; b++) {
    gint8 q[32];
    float d = quantize_block (x + b * 32, q);

    for (j = 0; j < 32; j++)
      r[b * 32 + j] = isfinite (d) ? x[b * 32 + j] - d * q[j] : x[b * 32 + j];
  }
}

/* The MXFP4 kernels' layout (npumatmul-private.h) */
static void
quantize_row (const float *x, gsize nb, gsize n_groups, guint8 * dst)
{
  gsize g, i, j;

  for (g = 0; g < n_groups; g++) {
    guint8 *grp = dst + g * NPU_Q8_GROUP_BYTES;
    gint8 *lo = (gint8 *) grp, *hi = (gint8 *) grp + 64;
    gint32 *corr = (gint32 *) (grp + 128);
    float *dx = (float *) (grp + 192);

    for (i = 0; i < 4; i++) {
      gsize b = g * 4 + i;
      float d;
      gint32 qsum = 0;
      gint8 q[32];

      if (b >= nb) {
        memset (lo + 16 * i, 0, 16);
        memset (hi + 16 * i, 0, 16);
        for (j = 0; j < 4; j++) {
          corr[4 * i + j] = 0;
          dx[4 * i + j] = 0.0f;
        }
        continue;
      }
      d = quantize_block (x + b * 32, q);
      for (j = 0; j < 32; j++)
        qsum += q[j];
      memcpy (lo + 16 * i, q, 16);
      memcpy (hi + 16 * i, q + 16, 16);
      for (j = 0; j < 4; j++) {
        corr[4 * i + j] = -3 * qsum;
        dx[4 * i + j] = d * 0.5f;
      }
    }
  }
}

/* The Q8_0 kernels' layout (npumatmul-private.h) */
static void
quantize_row_q8_0 (const float *x, gsize nb, gsize n_pairs, guint8 * dst)
{
  gsize p, i, j;

  for (p = 0; p < n_pairs; p++) {
    guint8 *pair = dst + p * NPU_Q8_0_PAIR_BYTES;
    const gint8 *q = (const gint8 *) pair;
    float *dx = (float *) (pair + 64);
    gint32 *corr = (gint32 *) (pair + 128);

    for (i = 0; i < 2; i++) {
      gsize b = 2 * p + i;
      float d = 0.0f;

      if (b < nb)
        d = quantize_block (x + b * 32, (gint8 *) pair + 32 * i);
      else
        memset (pair + 32 * i, 0, 32);
      for (j = 0; j < 8; j++)
        dx[8 * i + j] = d;
    }
    for (j = 0; j < 16; j++)
      corr[j] = -128 * (q[4 * j] + q[4 * j + 1] + q[4 * j + 2] + q[4 * j + 3]);
  }
}

/* ------------------------------------------------------------------------
 * Driver, shared by both weight formats
 */
typedef struct _MatmulJob MatmulJob;

/* What differs between MXFP4 and Q8_0 weights */
typedef struct
{
  /* the exact scalar path, one weight row against every activation row */
  void (*scalar_row) (const MatmulJob * job, gsize r);
  /* one activation row into the int8 kernels' layout (npumatmul-private.h) */
  void (*quantize_row) (const float *x, gsize nb, gsize n_groups, guint8 * dst);
  /* weight rows [r0, r1) times activation rows [c0, c1) */
  void (*tile) (const MatmulJob * job, gsize r0, gsize r1, gsize c0, gsize c1);
  /* a one-token GEMV over weight rows [r0, r1), on the path's GEMV kernel */
  void (*gemv) (const MatmulJob * job, gsize r0, gsize r1);
  gsize blocks_per_group, group_bytes;
} WeightFormat;

struct _MatmulJob
{
  const WeightFormat *format;
  /* the weights, in the format's own type, and their kernel (NULL for the
   * scalar path) */
  const NpuMxfp4Matrix *mxfp4;
  NpuMxfp4TileFunc mxfp4_tile;
  /* the panel GEMM of the job's precision, where this path has one
   * (for the accurate precision chosen over the F32 GEMM), its quantised
   * activations and one NPU_PANEL_SCRATCH per worker */
  const NpuPanelGemm *panel;
  NpuPanelRows xr;
  guint8 *panel_scratch;
  /* the accurate GEMM's F32 kernel, where this path has one */
  NpuMxfp4F32TileFunc mxfp4_f32_tile;
  /* the one-token GEMV kernel, where this path has one */
  NpuMxfp4GemvFunc mxfp4_gemv;
  /* the path's own MXFP4 activation quantiser, where it has one */
  void (*quantize_row_simd) (const float *x, gsize nb, gsize n_groups,
      guint8 * dst, guint8 * dst_residual);
  const NpuBlockQ8_0 *q8_0;
  NpuQ8_0TileFunc q8_0_tile;
  NpuQ8_0GemvFunc q8_0_gemv;
  gsize rows, nb;               /* nb: blocks of 32 per row (k / 32) */
  const float *x;
  gsize n;
  float *y;
  NpuQ8Act xq;
  /* NPU_MATMUL_PRECISION_ACCURATE: the kernels see 2 n activation rows,
   * row 2c the int8 codes of x_c, row 2c + 1 those of its residual, and
   * write 2 n output rows to @y2, which are summed pairwise into @y */
  gboolean accurate;
  float *y2;
  float *resid;                 /* nb * 32 floats per worker */
  gsize row_tile, col_tile, n_row_tiles;
  guint gemv_streams;           /* each GEMV claim's streams */
};

static void
mxfp4_scalar_row (const MatmulJob * job, gsize r)
{
  scalar_row (job->mxfp4, r, job->x, job->n, job->y);
}

static void
mxfp4_tile (const MatmulJob * job, gsize r0, gsize r1, gsize c0, gsize c1)
{
  job->mxfp4_tile (job->mxfp4, r0, r1, &job->xq, c0, c1, job->y, job->rows);
}

static void
mxfp4_gemv (const MatmulJob * job, gsize r0, gsize r1)
{
  job->mxfp4_gemv (job->mxfp4, r0, r1, &job->xq, 0, job->accurate, job->y,
      job->gemv_streams);
}

static void
q8_0_scalar_row (const MatmulJob * job, gsize r)
{
  scalar_row_q8_0 (job->q8_0, job->nb, job->rows, r, job->x, job->n, job->y);
}

static void
q8_0_tile (const MatmulJob * job, gsize r0, gsize r1, gsize c0, gsize c1)
{
  job->q8_0_tile (job->q8_0, job->nb, r0, r1, &job->xq, c0, c1, job->y,
      job->rows);
}

static void
q8_0_gemv (const MatmulJob * job, gsize r0, gsize r1)
{
  job->q8_0_gemv (job->q8_0, job->nb, r0, r1, &job->xq, 0, job->accurate,
      job->y, job->gemv_streams);
}

static const WeightFormat format_mxfp4 = {
  mxfp4_scalar_row, quantize_row, mxfp4_tile, mxfp4_gemv, 4,
  NPU_Q8_GROUP_BYTES
};

static const WeightFormat format_q8_0 = {
  q8_0_scalar_row, quantize_row_q8_0, q8_0_tile, q8_0_gemv, 2,
  NPU_Q8_0_PAIR_BYTES
};

typedef struct
{
  gsize size;
  gpointer mem;
} Workspace;

static void
workspace_free (gpointer data)
{
  Workspace *ws = data;

  g_aligned_free (ws->mem);
  g_free (ws);
}

/* Quantised activations of the calling thread, kept between calls so a
 * decode step does not allocate.  Only the thread that runs the task (or the
 * caller, without a task) writes it; workers read it during the call. */
static GPrivate workspace_key = G_PRIVATE_INIT (workspace_free);

static guint8 *
get_workspace (gsize size)
{
  Workspace *ws = g_private_get (&workspace_key);

  if (!ws) {
    ws = g_new0 (Workspace, 1);
    g_private_set (&workspace_key, ws);
  }
  if (ws->size < size) {
    g_aligned_free (ws->mem);
    ws->size = MAX (size, ws->size * 2);
    ws->mem = g_aligned_alloc (ws->size, 1, 64);
  }
  return ws->mem;
}

static void
run_parallel (NpuTask * task, gsize n, gsize grain, NpuParallelFunc func,
    gpointer data)
{
  if (task)
    npu_task_parallel_for (task, n, grain, func, data);
  else if (n > 0)
    func (0, n, 0, data);
}

static void
scalar_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MatmulJob *job = data;
  gsize r;

  for (r = start; r < end; r++)
    job->format->scalar_row (job, r);
}

static void
quantize_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MatmulJob *job = data;
  gsize c;

  for (c = start; c < end; c++) {
    const float *x = job->x + c * job->nb * 32;

    if (job->quantize_row_simd) {
      if (job->accurate)
        job->quantize_row_simd (x, job->nb, job->xq.n_groups,
            job->xq.data + 2 * c * job->xq.row_stride,
            job->xq.data + (2 * c + 1) * job->xq.row_stride);
      else
        job->quantize_row_simd (x, job->nb, job->xq.n_groups,
            job->xq.data + c * job->xq.row_stride, NULL);
    } else if (job->accurate) {
      float *r = job->resid + (gsize) worker * job->nb * 32;

      job->format->quantize_row (x, job->nb, job->xq.n_groups,
          job->xq.data + 2 * c * job->xq.row_stride);
      residual_row (x, job->nb, r);
      job->format->quantize_row (r, job->nb, job->xq.n_groups,
          job->xq.data + (2 * c + 1) * job->xq.row_stride);
    } else {
      job->format->quantize_row (x, job->nb, job->xq.n_groups,
          job->xq.data + c * job->xq.row_stride);
    }
  }
}

/* y[c] = y2[2 c] + y2[2 c + 1] over activation rows [start, end) */
static void
combine_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MatmulJob *job = data;
  gsize c, r;

  for (c = start; c < end; c++) {
    const float *a = job->y2 + 2 * c * job->rows, *b = a + job->rows;
    float *y = job->y + c * job->rows;

    for (r = 0; r < job->rows; r++)
      y[r] = a[r] + b[r];
  }
}

static void
tile_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MatmulJob *job = data;
  gsize t;

  for (t = start; t < end; t++) {
    gsize rt = t % job->n_row_tiles, ct = t / job->n_row_tiles;
    gsize r0 = rt * job->row_tile, c0 = ct * job->col_tile;

    job->format->tile (job, r0, MIN (r0 + job->row_tile, job->rows), c0,
        MIN (c0 + job->col_tile, job->xq.n));
  }
}

/* A second buffer of the calling thread, for the accurate path's
 * residuals and its doubled outputs */
static GPrivate workspace2_key = G_PRIVATE_INIT (workspace_free);

static gpointer
get_workspace2 (gsize size)
{
  Workspace *ws = g_private_get (&workspace2_key);

  if (!ws) {
    ws = g_new0 (Workspace, 1);
    g_private_set (&workspace2_key, ws);
  }
  if (ws->size < size) {
    g_aligned_free (ws->mem);
    ws->size = MAX (size, ws->size * 2);
    ws->mem = g_aligned_alloc (ws->size, 1, 64);
  }
  return ws->mem;
}

/* For an accurate job: scratch for the residuals (one row per worker)
 * and the doubled outputs, @y2_floats of them (every job of a multi) */
static float *
accurate_scratch (NpuTask * task, MatmulJob * job, gsize y2_floats)
{
  guint workers = task ? npu_task_get_n_threads (task) : 1;
  gsize resid = (gsize) workers * job->nb * 32;
  float *mem = get_workspace2 ((resid + y2_floats) * sizeof (float));

  job->resid = mem;
  return mem + resid;
}

/* The activations of @job in the int8 kernels' layout, in the calling
 * thread's workspace */
static void
quantize_activations (NpuTask * task, MatmulJob * job)
{
  const WeightFormat *f = job->format;

  job->xq.n = job->accurate ? 2 * job->n : job->n;
  job->xq.n_groups = (job->nb + f->blocks_per_group - 1) / f->blocks_per_group;
  job->xq.row_stride = job->xq.n_groups * f->group_bytes;
  job->xq.data = get_workspace (job->xq.n * job->xq.row_stride);
  /* A slice of the quantiser is at least ~16k activations. */
  run_parallel (task, job->n, MAX (1, 16384 / (job->nb * 32)),
      quantize_slice, job);
}

static void
f32_tile_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MatmulJob *job = data;
  gsize t;

  for (t = start; t < end; t++) {
    gsize rt = t % job->n_row_tiles, ct = t / job->n_row_tiles;
    gsize r0 = rt * job->row_tile, c0 = ct * job->col_tile;

    job->mxfp4_f32_tile (job->mxfp4, r0, MIN (r0 + job->row_tile, job->rows),
        job->x, c0, MIN (c0 + job->col_tile, job->n), job->y, job->rows);
  }
}

static void
panel_quantize_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MatmulJob *job = data;
  gsize c;

  for (c = start; c < end; c++)
    job->panel->quantize_row (job->x + c * job->nb * 32, job->nb,
        job->xr.data + c * job->xr.row_stride, &job->xr);
}

static void
panel_tile_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MatmulJob *job = data;
  guint8 *scratch = job->panel_scratch +
      (gsize) worker * NPU_PANEL_SCRATCH (job->nb, job->panel->code_bytes);
  gsize t;

  for (t = start; t < end; t++) {
    gsize rt = t % job->n_row_tiles, ct = t / job->n_row_tiles;
    gsize r0 = rt * job->row_tile, c0 = ct * job->col_tile;

    job->panel->tile (job->mxfp4, r0, MIN (r0 + job->row_tile, job->rows),
        &job->xr, c0, MIN (c0 + job->col_tile, job->n), job->y, job->rows,
        scratch);
  }
}

/* A GEMM where the path has a panel kernel of the job's precision: the
 * activations quantised (int8 or int16 per block) in their natural order,
 * in parallel over activation rows, then tiles of 32 rows x 128
 * activation rows */
static void
run_panel_job (NpuTask * task, MatmulJob * job)
{
  const guint code_bytes = job->panel->code_bytes;
  guint workers = task ? npu_task_get_n_threads (task) : 1;
  gsize n_col_tiles, end;

  job->xr.n = job->n;
  job->xr.dx_offset = job->nb * 32 * code_bytes;
  job->xr.corr_offset = job->xr.dx_offset + job->nb * sizeof (float);
  end = job->xr.corr_offset + (code_bytes == 1 ? job->nb * sizeof (gint32) : 0);
  job->xr.row_stride = (end + 63) & ~(gsize) 63;
  job->xr.data = get_workspace (job->n * job->xr.row_stride);
  job->panel_scratch = get_workspace2 ((gsize) workers *
      NPU_PANEL_SCRATCH (job->nb, code_bytes));
  run_parallel (task, job->n, MAX (1, 16384 / (job->nb * 32)),
      panel_quantize_slice, job);
  job->row_tile = PANEL_ROW_TILE;
  job->col_tile = PANEL_COL_TILE;
  job->n_row_tiles = (job->rows + job->row_tile - 1) / job->row_tile;
  n_col_tiles = (job->n + job->col_tile - 1) / job->col_tile;
  run_parallel (task, job->n_row_tiles * n_col_tiles, 1, panel_tile_slice, job);
}

/* The accurate GEMM where the path has an F32 kernel: no quantisation,
 * tiles of decoded weights times F32 activations.  Every column tile
 * decodes every panel again, so the columns are shared out evenly over
 * the fewest tiles of about GEMM_F32_COL_TILE (up to 1.25 times that):
 * 196 patches are one tile, not 192 and a tile of 4 that decodes the
 * whole matrix again for 4 columns (3 % of the SigLIP-B products' time;
 * tiles of 256 measured slower than two of 128). */
static void
run_f32_job (NpuTask * task, MatmulJob * job)
{
  gsize n_col_tiles;

  job->row_tile = GEMM_F32_ROW_TILE;
  n_col_tiles = MAX (1, (job->n + GEMM_F32_COL_TILE * 3 / 4 - 1) /
      GEMM_F32_COL_TILE);
  job->col_tile = (job->n + n_col_tiles - 1) / n_col_tiles;
  n_col_tiles = (job->n + job->col_tile - 1) / job->col_tile;
  job->n_row_tiles = (job->rows + job->row_tile - 1) / job->row_tile;
  run_parallel (task, job->n_row_tiles * n_col_tiles, 1, f32_tile_slice, job);
}

/* Weight rows of GEMV tiles [start, end) of @job */
static void
gemv_rows (MatmulJob * job, gsize start, gsize end)
{
  job->format->gemv (job, start * GEMV_ROW_TILE,
      MIN (end * GEMV_ROW_TILE, job->rows));
}

/* The tiles of one or several GEMV jobs (npu_matmul_mxfp4_multi()), claimed
 * guided (GEMV_GUIDED_SHARE) by the threads that take part */
typedef struct
{
  MatmulJob *jobs;
  const gsize *first_tile;      /* n_jobs + 1 entries: job i's tiles are
                                 * [first_tile[i], first_tile[i + 1]) */
  guint n_jobs;
} GemvClaims;

/* GEMV tiles [start, end) of every job they cover */
static void
gemv_claim_rows (gsize start, gsize end, gpointer data)
{
  const GemvClaims *gc = data;
  guint i;

  for (i = 0; i < gc->n_jobs; i++) {
    gsize a = MAX (start, gc->first_tile[i]);
    gsize b = MIN (end, gc->first_tile[i + 1]);

    if (a < b)
      gemv_rows (&gc->jobs[i], a - gc->first_tile[i], b - gc->first_tile[i]);
  }
}

static void
run_gemv_claims (NpuTask * task, MatmulJob * jobs, const gsize * first_tile,
    guint n_jobs)
{
  GemvClaims gc = { jobs, first_tile, n_jobs };
  guint n_threads = task ? npu_task_get_n_threads (task) : 1, i;
  NpuGemvStreamsTrial trial = { gemv_streams, };
  gsize bytes = 0;

  for (i = 0; i < n_jobs; i++)
    bytes += jobs[i].rows * jobs[i].nb * (jobs[i].mxfp4 ?
        sizeof (NpuBlockMxfp4) : sizeof (NpuBlockQ8_0));
  if (!gemv_streams)
    npu_gemv_streams_begin (&trial, n_threads, bytes);
  for (i = 0; i < n_jobs; i++)
    jobs[i].gemv_streams = trial.streams;
  npu_task_parallel_claims (task, first_tile[n_jobs], GEMV_CLAIM_TILES,
      GEMV_GUIDED_SHARE, gemv_claim_rows, &gc);
  if (!gemv_streams)
    npu_gemv_streams_end (&trial);
}

/* One token through the path's GEMV kernel: the activations quantised
 * once (with their residuals for the accurate precision), then runs of
 * tiles claimed guided, each read as job->gemv_streams streams; the kernel
 * sums the accurate precision's two halves itself. */
static void
run_gemv_job (NpuTask * task, MatmulJob * job)
{
  gsize first_tile[2] = { 0, 0 };

  if (job->accurate)
    accurate_scratch (task, job, 0);
  quantize_activations (task, job);
  job->n_row_tiles = (job->rows + GEMV_ROW_TILE - 1) / GEMV_ROW_TILE;
  first_tile[1] = job->n_row_tiles;
  run_gemv_claims (task, job, first_tile, 1);
}

/* y = x . w^T for a job whose weights, format and kernel are set */
static void
run_job (NpuTask * task, MatmulJob * job, gboolean have_kernel)
{
  float *const y_out = job->y;
  gsize n_col_tiles;

  if (job->n == 0 || job->rows == 0)
    return;
  if (job->nb == 0) {
    memset (job->y, 0, job->n * job->rows * sizeof (float));
    return;
  }
  if (!have_kernel) {
    run_parallel (task, job->rows, 16, scalar_slice, job);
    return;
  }
  if (job->n > GEMV_MAX_N && job->panel) {
    run_panel_job (task, job);
    return;
  }
  if (job->accurate && job->n > GEMV_MAX_N && job->mxfp4_f32_tile) {
    run_f32_job (task, job);
    return;
  }
  if (job->n == 1 && (job->mxfp4_gemv || job->q8_0_gemv)) {
    run_gemv_job (task, job);
    return;
  }

  if (job->accurate) {
    job->y2 = accurate_scratch (task, job, 2 * job->n * job->rows);
    quantize_activations (task, job);
    job->y = job->y2;
  } else {
    quantize_activations (task, job);
  }
  /* A GEMV tile of 32 rows is ~70 KiB of Q8_0 at k = 2048; a GEMM tile's
   * weights and activations stay in L2. */
  if (job->n <= GEMV_MAX_N) {
    job->row_tile = GEMV_ROW_TILE;
    job->col_tile = job->xq.n;
  } else {
    job->row_tile = GEMM_ROW_TILE;
    job->col_tile = GEMM_COL_TILE;
  }
  job->n_row_tiles = (job->rows + job->row_tile - 1) / job->row_tile;
  n_col_tiles = (job->xq.n + job->col_tile - 1) / job->col_tile;
  run_parallel (task, job->n_row_tiles * n_col_tiles,
      job->n <= GEMV_MAX_N ? GEMV_CLAIM_TILES : 1, tile_slice, job);
  if (job->accurate) {
    job->y = y_out;
    run_parallel (task, job->n, MAX (1, 16384 / job->rows), combine_slice, job);
  }
}

/* The tile kernels of the path in use; NULL for the scalar paths. */
static NpuMxfp4TileFunc
current_tile_func (void)
{
  switch (current_isa) {
#if defined(__x86_64__)
    case ISA_AVX2:
      return npu_mxfp4_tile_avx2;
    case ISA_AVX512:
      return npu_mxfp4_tile_avx512;
#endif
#if defined(__aarch64__)
    case ISA_ASIMD:
      return npu_mxfp4_tile_asimd;
    case ISA_NEON:
      return npu_mxfp4_tile_neon;
    case ISA_NEON_I8MM:
      return npu_mxfp4_tile_neon_i8mm;
#endif
    default:
      return NULL;
  }
}

gboolean
npu_matmul_set_gemm_panels (gboolean panels)
{
  gboolean old = use_panels;

  use_panels = panels;
  return old;
}

static NpuMxfp4F32TileFunc
current_f32_tile_func (void)
{
  if (!use_panels)
    return NULL;
  switch (current_isa) {
#if defined(__x86_64__)
    case ISA_AVX2:
      return npu_mxfp4_tile_f32_avx2;
    case ISA_AVX512:
      return npu_mxfp4_tile_f32_avx512;
#endif
    default:
      return NULL;
  }
}

gboolean
npu_matmul_set_accurate_gemm_int16 (gboolean int16)
{
  gboolean old = use_int16_gemm;

  use_int16_gemm = int16;
  return old;
}

#if defined(__x86_64__)
static const NpuPanelGemm panel_gemm8_avx512 = {
  1, npu_quantize_row_q8_avx512, npu_mxfp4_tile_gemm8_avx512
};

static const NpuPanelGemm panel_gemm16_avx512 = {
  2, npu_quantize_row_q16_avx512, npu_mxfp4_tile_gemm16_avx512
};
#endif

/* The panel GEMM of the path in use for @accurate or fast products; NULL
 * where it has none (or the tests switched them off) */
static const NpuPanelGemm *
current_panel_gemm (gboolean accurate)
{
  if (!use_panels || (accurate && !use_int16_gemm))
    return NULL;
  switch (current_isa) {
#if defined(__x86_64__)
    case ISA_AVX512:
      return accurate ? &panel_gemm16_avx512 : &panel_gemm8_avx512;
#endif
    default:
      return NULL;
  }
}

static NpuQ8_0GemvFunc
current_q8_0_gemv_func (void)
{
  switch (current_isa) {
#if defined(__x86_64__)
    case ISA_AVX512:
      return npu_q8_0_gemv_avx512;
#endif
    default:
      return NULL;
  }
}

static NpuMxfp4GemvFunc
current_gemv_func (void)
{
  switch (current_isa) {
#if defined(__x86_64__)
    case ISA_AVX512:
      return npu_mxfp4_gemv_avx512;
#endif
    default:
      return NULL;
  }
}

guint
npu_matmul_set_gemv_streams (guint streams)
{
  guint old = gemv_streams;

  g_return_val_if_fail (streams == 0 || streams == 1 || streams == 2 ||
      streams == 4 || streams == 8, old);
  gemv_streams = streams;
  return old;
}

static NpuQ8_0TileFunc
current_q8_0_tile_func (void)
{
  switch (current_isa) {
#if defined(__x86_64__)
    case ISA_AVX2:
      return npu_q8_0_tile_avx2;
    case ISA_AVX512:
      return npu_q8_0_tile_avx512;
#endif
#if defined(__aarch64__)
    case ISA_ASIMD:
      return npu_q8_0_tile_asimd;
    case ISA_NEON:
    case ISA_NEON_I8MM:
      return npu_q8_0_tile_neon;
#endif
    default:
      return NULL;
  }
}

static void
mxfp4_job_init (MatmulJob * job, const NpuMxfp4Matrix * w, const float *x,
    gsize n, float *y, NpuMatmulPrecision precision)
{
  memset (job, 0, sizeof (*job));
  job->accurate = precision == NPU_MATMUL_PRECISION_ACCURATE;
  job->format = &format_mxfp4;
  job->mxfp4 = w;
  job->mxfp4_tile = current_tile_func ();
  job->mxfp4_f32_tile = current_f32_tile_func ();
  job->panel = current_panel_gemm (job->accurate);
  job->mxfp4_gemv = current_gemv_func ();
#if defined(__x86_64__)
  if (current_isa == ISA_AVX512)
    job->quantize_row_simd = npu_quantize_row_avx512;
#endif
  job->rows = w->rows;
  job->nb = w->n_blocks;
  job->x = x;
  job->n = n;
  job->y = y;
}

void
npu_matmul_mxfp4_with_precision (NpuTask * task, const NpuMxfp4Matrix * w,
    const float *x, gsize n, float *y, NpuMatmulPrecision precision)
{
  MatmulJob job;

  matmul_init ();
  mxfp4_job_init (&job, w, x, n, y, precision);
  run_job (task, &job, job.mxfp4_tile != NULL);
}

void
npu_matmul_mxfp4 (NpuTask * task, const NpuMxfp4Matrix * w, const float *x,
    gsize n, float *y)
{
  npu_matmul_mxfp4_with_precision (task, w, x, n, y, NPU_MATMUL_PRECISION_FAST);
}

/* ------------------------------------------------------------------------
 * Several products of the same activations
 */
typedef struct
{
  MatmulJob jobs[NPU_MATMUL_MAX_MULTI];
  gsize first_tile[NPU_MATMUL_MAX_MULTI + 1];
  guint n_jobs;
} MultiJob;

static void
multi_tile_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MultiJob *mj = data;
  guint i = 0;
  gsize t;

  for (t = start; t < end; t++) {
    MatmulJob *job;
    gsize r0;

    while (t >= mj->first_tile[i + 1])
      i++;
    job = &mj->jobs[i];
    r0 = (t - mj->first_tile[i]) * job->row_tile;
    job->format->tile (job, r0, MIN (r0 + job->row_tile, job->rows), 0,
        job->xq.n);
  }
}

/**
 * npu_matmul_mxfp4_multi:
 * @w: (array length=n_w): matrices with the same k
 * @y: (array length=n_w): one output per matrix, n x rows each
 *
 * y[i] = w[i] x for every i: what a transformer layer does with q, k and v
 * (or gate and up).  For a decode step (n <= 4) the activations are
 * quantised once and the matrices streamed in one parallel loop, so the
 * memory system sees one long read instead of several short ones; larger
 * n runs the products one after the other.  Results are those of
 * npu_matmul_mxfp4() on each matrix.
 */
static void
multi_combine_slice (gsize start, gsize end, guint worker, gpointer data)
{
  MultiJob *mj = data;
  guint i;

  for (i = 0; i < mj->n_jobs; i++)
    combine_slice (start, end, worker, &mj->jobs[i]);
}

void
npu_matmul_mxfp4_multi (NpuTask * task, const NpuMxfp4Matrix * const *w,
    guint n_w, const float *x, gsize n, float *const *y)
{
  npu_matmul_mxfp4_multi_with_precision (task, w, n_w, x, n, y,
      NPU_MATMUL_PRECISION_FAST);
}

void
npu_matmul_mxfp4_multi_with_precision (NpuTask * task,
    const NpuMxfp4Matrix * const *w, guint n_w, const float *x, gsize n,
    float *const *y, NpuMatmulPrecision precision)
{
  MultiJob mj;
  gsize y2_floats = 0;
  float *y2 = NULL;
  guint i;

  g_return_if_fail (n_w <= NPU_MATMUL_MAX_MULTI);

  matmul_init ();
  for (i = 0; i < n_w; i++)
    if (w[i]->k != w[0]->k || w[i]->k == 0 || w[i]->rows == 0)
      break;
  if (n == 0 || n > GEMV_MAX_N || i < n_w || !current_tile_func ()) {
    for (i = 0; i < n_w; i++)
      npu_matmul_mxfp4_with_precision (task, w[i], x, n, y[i], precision);
    return;
  }

  memset (&mj, 0, sizeof (mj));
  mj.n_jobs = n_w;
  for (i = 0; i < n_w; i++) {
    MatmulJob *job = &mj.jobs[i];

    mxfp4_job_init (job, w[i], x, n, y[i], precision);
    job->row_tile = GEMV_ROW_TILE;
    job->n_row_tiles = (w[i]->rows + GEMV_ROW_TILE - 1) / GEMV_ROW_TILE;
    mj.first_tile[i + 1] = mj.first_tile[i] + job->n_row_tiles;
    y2_floats += 2 * n * w[i]->rows;
  }

  /* One quantisation serves every matrix: they share k and the layout of
   * the quantised activations depends on k only. */
  if (n == 1 && mj.jobs[0].mxfp4_gemv) {
    if (mj.jobs[0].accurate)
      accurate_scratch (task, &mj.jobs[0], 0);
    quantize_activations (task, &mj.jobs[0]);
    for (i = 0; i < n_w; i++)
      mj.jobs[i].xq = mj.jobs[0].xq;
    run_gemv_claims (task, mj.jobs, mj.first_tile, n_w);
    return;
  }
  if (mj.jobs[0].accurate)
    y2 = accurate_scratch (task, &mj.jobs[0], y2_floats);
  quantize_activations (task, &mj.jobs[0]);
  for (i = 0; i < n_w; i++) {
    MatmulJob *job = &mj.jobs[i];

    job->xq = mj.jobs[0].xq;
    job->col_tile = job->xq.n;
    if (job->accurate) {
      job->y2 = y2;
      job->y = y2;
      y2 += 2 * n * job->rows;
    }
  }

  run_parallel (task, mj.first_tile[n_w], GEMV_CLAIM_TILES, multi_tile_slice,
      &mj);
  if (mj.jobs[0].accurate) {
    for (i = 0; i < n_w; i++)
      mj.jobs[i].y = y[i];
    run_parallel (task, n, 1, multi_combine_slice, &mj);
  }
}

/* ------------------------------------------------------------------------
 * Q8_0 weights
 */
void
npu_matmul_q8_0 (NpuTask * task, const NpuBlockQ8_0 * w, gsize rows, gsize k,
    const float *x, gsize n, float *y)
{
  npu_matmul_q8_0_with_precision (task, w, rows, k, x, n, y,
      NPU_MATMUL_PRECISION_FAST);
}

void
npu_matmul_q8_0_with_precision (NpuTask * task, const NpuBlockQ8_0 * w,
    gsize rows, gsize k, const float *x, gsize n, float *y,
    NpuMatmulPrecision precision)
{
  MatmulJob job = { 0, };

  g_return_if_fail (k % 32 == 0);

  matmul_init ();
  job.accurate = precision == NPU_MATMUL_PRECISION_ACCURATE;
  job.format = &format_q8_0;
  job.q8_0 = w;
  job.q8_0_tile = current_q8_0_tile_func ();
  job.q8_0_gemv = current_q8_0_gemv_func ();
  job.rows = rows;
  job.nb = k / 32;
  job.x = x;
  job.n = n;
  job.y = y;
  run_job (task, &job, job.q8_0_tile != NULL);
}
