/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: throughput of the MXFP4 matrix kernels
 *
 * GEMV (n = 1) is bound by memory bandwidth: each product streams its
 * weights once, so the benchmark rotates through at least 1 GiB of distinct
 * matrices (far beyond the caches) and reports GB/s of weight bytes, beside
 * a plain streaming read of the same bytes on the same threads (vector
 * loads summed, split the same way) and the ratio of the two; the fast and
 * the accurate precision alternate in each pass, and their ratio is
 * printed.  The same GEMV on one 256 x 4096 matrix that stays in L2 shows
 * the arithmetic's own pace, which must stay above the memory's for the
 * accurate precision to cost nothing.  GEMM (n = 32,
 * 512) is bound by arithmetic and reports GFLOPS (2 rows k n per product).
 *
 * Everything runs inside tasks of a CPU device, on 1 thread and on every
 * online CPU.  Each figure is the best of several passes, with the worst
 * beside it: the spread shows how noisy the machine was.
 *
 * Usage: bench-matmul [passes (5)] [MiB of GEMV weights (1100)]
 *   NPU_CPU_ISA=scalar|avx2|avx512|asimd|neon|neon-i8mm forces a kernel path.
 */
#include <core/cpu/npumatmul.h>
#include "tests/bench/npubenchtask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef struct
{
  const guint8 *data;
  gsize size;
} ReadJob;

/* Where the read loops store their sums, so they are not optimised away */
static volatile guint64 bench_read_sink;

#if defined(__x86_64__)
__attribute__ ((target ("avx2")))
static void
read_slice_avx2 (gsize start, gsize end, guint worker, gpointer user_data)
{
  ReadJob *job = user_data;
  const guint8 *p = job->data + start * 4096;
  const guint8 *e = job->data + MIN (end * 4096, job->size);
  __m256i a0 = _mm256_setzero_si256 (), a1 = a0, a2 = a0, a3 = a0;

  for (; p + 128 <= e; p += 128) {
    const __m256i *v = (const __m256i *) p;

    a0 = _mm256_add_epi32 (a0, _mm256_loadu_si256 (v));
    a1 = _mm256_add_epi32 (a1, _mm256_loadu_si256 (v + 1));
    a2 = _mm256_add_epi32 (a2, _mm256_loadu_si256 (v + 2));
    a3 = _mm256_add_epi32 (a3, _mm256_loadu_si256 (v + 3));
  }
  a0 = _mm256_add_epi32 (_mm256_add_epi32 (a0, a1), _mm256_add_epi32 (a2, a3));
  bench_read_sink += _mm256_extract_epi32 (a0, 0) +
      _mm256_extract_epi32 (a0, 7);
}
#endif

/* Portable fallback: 64-bit loads, summed */
static void
read_slice_c (gsize start, gsize end, guint worker, gpointer user_data)
{
  ReadJob *job = user_data;
  const guint64 *p = (const guint64 *) (job->data + start * 4096);
  const guint64 *e = (const guint64 *) (job->data + MIN (end * 4096,
          job->size));
  guint64 s0 = 0, s1 = 0, s2 = 0, s3 = 0;

  for (; p + 4 <= e; p += 4) {
    s0 += p[0];
    s1 += p[1];
    s2 += p[2];
    s3 += p[3];
  }
  bench_read_sink += s0 + s1 + s2 + s3;
}

typedef enum
{
  WORK_GEMV,
  WORK_READ,
  WORK_GEMM,
} WorkKind;

typedef struct
{
  WorkKind kind;
  NpuMxfp4Matrix *mats;
  guint n_mats;
  const float *x;
  gsize n;
  float *y;
  guint repeat;
  NpuParallelFunc read_func;
  NpuMatmulPrecision precision;
} Work;

static gboolean
work_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Work *work = user_data;
  guint i, rep;

  for (rep = 0; rep < work->repeat; rep++) {
    for (i = 0; i < work->n_mats; i++) {
      const NpuMxfp4Matrix *m = &work->mats[i];

      if (work->kind == WORK_READ) {
        ReadJob job;

        if (m->layout == NPU_MXFP4_LAYOUT_SPLIT)
          job.data = m->nibbles;
        else
          job.data = (const guint8 *) m->blocks;
        job.size = npu_mxfp4_matrix_get_size (m);
        /* 4 KiB slices, as many as the GEMV's row tiles or more */
        npu_task_parallel_for (task, (job.size + 4095) / 4096, 16,
            work->read_func, &job);
      } else {
        npu_matmul_mxfp4_with_precision (task, m, work->x, work->n,
            work->y, work->precision);
      }
    }
  }
  return TRUE;
}

/* Seconds for one run of @work in a task on @queue */
static double
time_work (NpuQueue * queue, Work * work)
{
  return npu_bench_run_task (queue, work_task, work);
}

static guint64 rng_state = 0x9E3779B97F4A7C15ULL;

static guint64
rng (void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static void
fill_blocks (NpuBlockMxfp4 * blocks, gsize n)
{
  gsize b;
  guint j;

  for (b = 0; b < n; b++) {
    guint64 r0 = rng (), r1 = rng ();

    blocks[b].e = 120 + (guint8) (r0 >> 60);
    for (j = 0; j < 8; j++) {
      blocks[b].qs[j] = (guint8) (r0 >> (8 * j));
      blocks[b].qs[j + 8] = (guint8) (r1 >> (8 * j));
    }
  }
}

static void
report (const gchar * what, const double *v, guint passes, const gchar * unit)
{
  double best = v[0], worst = v[0];
  guint i;

  for (i = 1; i < passes; i++) {
    best = MAX (best, v[i]);
    worst = MIN (worst, v[i]);
  }
  printf ("%-44s %8.2f %s (worst %.2f)\n", what, best, unit, worst);
}

int
main (int argc, char **argv)
{
  static const gsize gemv_shapes[3][2] = {
    {4096, 4096}, {14336, 4096}, {4096, 14336},
  };
  static const gsize gemm_ns[2] = { 32, 512 };
  guint passes = argc > 1 ? (guint) atoi (argv[1]) : 5;
  gsize pool_mib = argc > 2 ? (gsize) atoi (argv[2]) : 1100;
  gsize pool_blocks = pool_mib * 1024 * 1024 / sizeof (NpuBlockMxfp4);
  guint thread_counts[2] = { 1, npu_cpu_count () };
  NpuBlockMxfp4 *pool;
  float *x, *y;
  double *gbs, *rbs, *abs_;
  guint t, s, p, layout;
  NpuParallelFunc read_func = read_slice_c;

#if defined(__x86_64__)
  if (__builtin_cpu_supports ("avx2"))
    read_func = read_slice_avx2;
#endif
  /* Line by line, so a long run shows progress through a pipe */
  setvbuf (stdout, NULL, _IOLBF, 0);
  passes = MAX (passes, 1);
  gbs = g_new (double, passes);
  rbs = g_new (double, passes);
  abs_ = g_new (double, passes);

  printf ("kernel path: %s, online CPUs: %u, GEMV pool %" G_GSIZE_FORMAT
      " MiB, best of %u passes\n", npu_matmul_get_isa (), thread_counts[1],
      pool_mib, passes);

  pool = g_malloc (pool_blocks * sizeof (NpuBlockMxfp4));
  fill_blocks (pool, pool_blocks);
  x = g_new (float, 512 * 14336);
  y = g_new (float, 512 * 14336);
  for (s = 0; s < 512 * 14336; s++)
    x[s] = (float) ((double) (rng () >> 11) / (1ULL << 53) * 2.0 - 1.0);

  for (t = 0; t < (thread_counts[1] > 1 ? 2 : 1); t++) {
    NpuDevice *device = npu_device_new_cpu (thread_counts[t]);
    NpuQueue *queue = npu_queue_new (device, "bench");

    printf ("\n%u thread(s)\n", thread_counts[t]);

    for (layout = 0; layout < 2; layout++) {
      for (s = 0; s < G_N_ELEMENTS (gemv_shapes); s++) {
        gsize rows = gemv_shapes[s][0], k = gemv_shapes[s][1];
        gsize mat_blocks = rows * k / 32;
        guint n_mats = pool_blocks / mat_blocks, i;
        NpuMxfp4Matrix *mats = g_new (NpuMxfp4Matrix, n_mats);
        Work gemv = { WORK_GEMV, mats, n_mats, x, 1, y, 1, NULL,
          NPU_MATMUL_PRECISION_FAST
        };
        Work gemv_acc = { WORK_GEMV, mats, n_mats, x, 1, y, 1, NULL,
          NPU_MATMUL_PRECISION_ACCURATE
        };
        Work rd = { WORK_READ, mats, n_mats, NULL, 0, NULL, 1, read_func,
          NPU_MATMUL_PRECISION_FAST
        };
        gsize bytes = 0;
        gchar *what;

        for (i = 0; i < n_mats; i++) {
          if (layout == 0)
            npu_mxfp4_matrix_init_view (&mats[i], pool + i * mat_blocks, rows,
                k);
          else
            npu_mxfp4_matrix_repack (&mats[i], pool + i * mat_blocks, rows,
                k);
          bytes += npu_mxfp4_matrix_get_size (&mats[i]);
        }
        /* Warm up: page faults, thread start */
        time_work (queue, &gemv);
        time_work (queue, &gemv_acc);
        for (p = 0; p < passes; p++) {
          /* Interleaved so all see the same machine load */
          gbs[p] = bytes / time_work (queue, &gemv) / 1e9;
          abs_[p] = bytes / time_work (queue, &gemv_acc) / 1e9;
          rbs[p] = bytes / time_work (queue, &rd) / 1e9;
        }
        what = g_strdup_printf ("GEMV %5" G_GSIZE_FORMAT "x%-5" G_GSIZE_FORMAT
            " %s", rows, k, layout == 0 ? "ggml  " : "split ");
        report (what, gbs, passes, "GB/s");
        g_free (what);
        report ("  accurate precision", abs_, passes, "GB/s");
        report ("  streaming read of the same bytes", rbs, passes, "GB/s");
        {
          double bg = 0, ba = 0, br = 0;

          for (p = 0; p < passes; p++) {
            bg = MAX (bg, gbs[p]);
            ba = MAX (ba, abs_[p]);
            br = MAX (br, rbs[p]);
          }
          printf ("  ratio (best / best)                         %6.1f %%\n",
              100.0 * bg / br);
          printf ("  accurate / fast (best / best)               %6.1f %%\n",
              100.0 * ba / bg);
        }
        for (i = 0; i < n_mats; i++)
          npu_mxfp4_matrix_clear (&mats[i]);
        g_free (mats);
      }
    }

    {
      /* In cache: the arithmetic's pace, fast and accurate alternating */
      NpuMxfp4Matrix m;
      Work gemv = { WORK_GEMV, &m, 1, x, 1, y, 200, NULL,
        NPU_MATMUL_PRECISION_FAST
      };
      Work gemv_acc = { WORK_GEMV, &m, 1, x, 1, y, 200, NULL,
        NPU_MATMUL_PRECISION_ACCURATE
      };
      double bytes;

      npu_mxfp4_matrix_repack (&m, pool, 256, 4096);
      bytes = 200.0 * npu_mxfp4_matrix_get_size (&m);
      time_work (queue, &gemv);
      time_work (queue, &gemv_acc);
      for (p = 0; p < passes; p++) {
        gbs[p] = bytes / time_work (queue, &gemv) / 1e9;
        abs_[p] = bytes / time_work (queue, &gemv_acc) / 1e9;
      }
      report ("GEMV   256x4096  split, in L2", gbs, passes, "GB/s");
      report ("  accurate precision", abs_, passes, "GB/s");
      npu_mxfp4_matrix_clear (&m);
    }

    for (layout = 0; layout < 2; layout++) {
      for (s = 0; s < G_N_ELEMENTS (gemm_ns); s++) {
        gsize rows = 4096, k = 4096, n = gemm_ns[s];
        NpuMxfp4Matrix m;
        Work gemm = { WORK_GEMM, &m, 1, x, n, y, 1, NULL,
          NPU_MATMUL_PRECISION_FAST
        };
        gchar *what;

        if (layout == 0)
          npu_mxfp4_matrix_init_view (&m, pool, rows, k);
        else
          npu_mxfp4_matrix_repack (&m, pool, rows, k);
        /* About 2 seconds of work per pass on one fast path thread */
        gemm.repeat = MAX (1, 64 / n);
        time_work (queue, &gemm);
        for (p = 0; p < passes; p++)
          gbs[p] = 2.0 * rows * k * n * gemm.repeat / time_work (queue,
              &gemm) / 1e9;
        what = g_strdup_printf ("GEMM 4096x4096 n=%-3" G_GSIZE_FORMAT " %s",
            n, layout == 0 ? "ggml" : "split");
        report (what, gbs, passes, "GFLOPS");
        g_free (what);
        npu_mxfp4_matrix_clear (&m);
      }
    }

    npu_queue_free (queue);
    npu_device_unref (device);
  }

  g_free (pool);
  g_free (x);
  g_free (y);
  g_free (gbs);
  g_free (rbs);
  g_free (abs_);
  return 0;
}
