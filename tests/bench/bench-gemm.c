/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 GEMM (prefill, encoders) against the CPU's peak
 *
 * Prints, on one thread and on every online CPU:
 *  - the CPU's int8 peak (a loop of independent vpdpbusd, 64 multiply-adds
 *    each, on x86 with AVX-512 VNNI) and F32 FMA peak (independent
 *    vfmadd231ps on zmm) and int16 peak (vpdpwssd, 32 multiply-adds), in
 *    GOPS (2 operations per multiply-add), and on
 *    x86 with AVX2 + FMA the F32 peak on ymm, the avx2 path's limit;
 *  - the GEMM of each precision (fast: int8 activations; accurate) on the
 *    shapes of a SigLIP-B encoder (196 patches x 768 -> 768, -> 3072, and
 *    3072 -> 768) and of a 1.1 B llama's prefill (512 tokens x 2048 ->
 *    2048, -> 5632, and 5632 -> 2048), in GOPS and as a share of the int8
 *    peak, each on the panel kernels (the default; on avx512 the accurate
 *    one twice: int16 activations with vpdpwssd, the default, and F32
 *    activations with FMAs, npu_matmul_set_accurate_gemm_int16 (FALSE),
 *    each with its share of its own peak) and on the tile kernels
 *    (npu_matmul_set_gemm_panels (FALSE), what came before them).  The
 *    five and the peak measurements alternate within each pass, so a noisy
 *    machine hurts them alike; each figure is the best of the passes, and
 *    the share of a peak is that of the best pass's own peak;
 *  - on one thread, the fast product of the 1.1 B gate/up matrix for the
 *    chunk sizes a prefill of 196 image tokens and a short prompt meets
 *    (4, 26, 49, 64 rows; npullm prefills in chunks of at most 64), in
 *    process CPU time, which other processes on a shared machine disturb
 *    least, and per row.
 *
 * Times on one thread are the process's CPU time (the task's thread does
 * the work, the main thread waits): on a shared machine other processes
 * take turns on the CPUs, which stretches wall-clock time but not CPU time.
 * On more threads they are wall-clock times.
 *
 * Usage: bench-gemm [passes (5)]
 *   NPU_CPU_ISA=scalar|avx2|avx512|asimd|neon forces a kernel path.
 */
#include <core/cpu/npumatmul.h>
#include <core/cpu/npumatmul-testing.h>
#include "tests/bench/npubenchtask.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define PEAK_ITERS 20000000

static volatile float peak_sink;

#if defined(__x86_64__)
/* 12 independent accumulators: enough to cover the latency (4-5 cycles)
 * of two instructions a cycle */
__attribute__ ((target ("avx512f,avx512vnni")))
static void
peak_int8_slice (gsize start, gsize end, guint worker, gpointer user_data)
{
  __m512i a[12], w = _mm512_set1_epi8 (3), x = _mm512_set1_epi8 (-2);
  gsize i;
  int j;

  for (j = 0; j < 12; j++)
    a[j] = _mm512_set1_epi32 (j);
  for (i = start; i < end; i++) {
    for (j = 0; j < 12; j++)
      a[j] = _mm512_dpbusd_epi32 (a[j], w, x);
    __asm__ volatile ("":"+v" (w));
  }
  for (j = 1; j < 12; j++)
    a[0] = _mm512_add_epi32 (a[0], a[j]);
  peak_sink += (float) _mm512_reduce_add_epi32 (a[0]);
}

/* The same with vpdpwssd (32 int16 multiply-adds each): what an int16
 * activation path could reach */
__attribute__ ((target ("avx512f,avx512vnni")))
static void
peak_int16_slice (gsize start, gsize end, guint worker, gpointer user_data)
{
  __m512i a[12], w = _mm512_set1_epi16 (3), x = _mm512_set1_epi16 (-2);
  gsize i;
  int j;

  for (j = 0; j < 12; j++)
    a[j] = _mm512_set1_epi32 (j);
  for (i = start; i < end; i++) {
    for (j = 0; j < 12; j++)
      a[j] = _mm512_dpwssd_epi32 (a[j], w, x);
    __asm__ volatile ("":"+v" (w));
  }
  for (j = 1; j < 12; j++)
    a[0] = _mm512_add_epi32 (a[0], a[j]);
  peak_sink += (float) _mm512_reduce_add_epi32 (a[0]);
}

__attribute__ ((target ("avx512f,fma")))
static void
peak_f32_slice (gsize start, gsize end, guint worker, gpointer user_data)
{
  __m512 a[12], w = _mm512_set1_ps (1.0f), x = _mm512_set1_ps (1e-9f);
  gsize i;
  int j;

  for (j = 0; j < 12; j++)
    a[j] = _mm512_set1_ps ((float) j);
  for (i = start; i < end; i++) {
    for (j = 0; j < 12; j++)
      a[j] = _mm512_fmadd_ps (a[j], w, x);
    __asm__ volatile ("":"+v" (w));
  }
  for (j = 1; j < 12; j++)
    a[0] = _mm512_add_ps (a[0], a[j]);
  peak_sink += _mm512_reduce_add_ps (a[0]);
}

/* The same on ymm (8 lanes), what the avx2 path's F32 GEMM can reach.
 * Written out so that the accumulators stay in registers. */
__attribute__ ((target ("avx2,fma")))
static void
peak_f32_ymm_slice (gsize start, gsize end, guint worker, gpointer user_data)
{
  __m256 w = _mm256_set1_ps (1.0f), x = _mm256_set1_ps (1e-9f);
  __m256 a0 = _mm256_set1_ps (0.0f), a1 = _mm256_set1_ps (1.0f);
  __m256 a2 = _mm256_set1_ps (2.0f), a3 = _mm256_set1_ps (3.0f);
  __m256 a4 = _mm256_set1_ps (4.0f), a5 = _mm256_set1_ps (5.0f);
  __m256 a6 = _mm256_set1_ps (6.0f), a7 = _mm256_set1_ps (7.0f);
  __m256 a8 = _mm256_set1_ps (8.0f), a9 = _mm256_set1_ps (9.0f);
  __m256 a10 = _mm256_set1_ps (10.0f), a11 = _mm256_set1_ps (11.0f);
  float out[8];
  gsize i;

  for (i = start; i < end; i++) {
    a0 = _mm256_fmadd_ps (a0, w, x);
    a1 = _mm256_fmadd_ps (a1, w, x);
    a2 = _mm256_fmadd_ps (a2, w, x);
    a3 = _mm256_fmadd_ps (a3, w, x);
    a4 = _mm256_fmadd_ps (a4, w, x);
    a5 = _mm256_fmadd_ps (a5, w, x);
    a6 = _mm256_fmadd_ps (a6, w, x);
    a7 = _mm256_fmadd_ps (a7, w, x);
    a8 = _mm256_fmadd_ps (a8, w, x);
    a9 = _mm256_fmadd_ps (a9, w, x);
    a10 = _mm256_fmadd_ps (a10, w, x);
    a11 = _mm256_fmadd_ps (a11, w, x);
    __asm__ volatile ("":"+x" (w));
  }
  a0 = _mm256_add_ps (_mm256_add_ps (_mm256_add_ps (a0, a1),
          _mm256_add_ps (a2, a3)), _mm256_add_ps (_mm256_add_ps (a4, a5),
          _mm256_add_ps (a6, a7)));
  a0 = _mm256_add_ps (a0, _mm256_add_ps (_mm256_add_ps (a8, a9),
          _mm256_add_ps (a10, a11)));
  _mm256_storeu_ps (out, a0);
  peak_sink += out[0];
}
#endif

typedef struct
{
  NpuParallelFunc func;
  const NpuMxfp4Matrix *w;
  const float *x;
  gsize n;
  float *y;
  NpuMatmulPrecision precision;
  guint n_threads;
} Work;

static gboolean
work_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Work *work = user_data;

  if (work->func)
    /* one slice of PEAK_ITERS per thread */
    npu_task_parallel_for (task, (gsize) PEAK_ITERS * work->n_threads,
        PEAK_ITERS, work->func, NULL);
  else
    npu_matmul_mxfp4_with_precision (task, work->w, work->x, work->n,
        work->y, work->precision);
  return TRUE;
}

static double process_cpu_seconds (void);

/* Seconds: process CPU time for a one-thread @work, else wall-clock */
static double
time_work (NpuQueue * queue, Work * work)
{
  double c0 = process_cpu_seconds ();
  double wall = npu_bench_run_task (queue, work_task, work);

  if (work->n_threads == 1)
    return process_cpu_seconds () - c0;
  return wall;
}

static double
process_cpu_seconds (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One thread: the fast product of @m for several chunk sizes, alternating,
 * best process CPU time of @passes */
static void
bench_chunks (NpuQueue * queue, const NpuMxfp4Matrix * m, const float *x,
    float *y, guint passes)
{
  static const gsize sizes[] = { 4, 26, 49, 64 };
  double best[G_N_ELEMENTS (sizes)];
  guint p, i;

  for (i = 0; i < G_N_ELEMENTS (sizes); i++)
    best[i] = G_MAXDOUBLE;
  for (p = 0; p <= passes; p++) {
    for (i = 0; i < G_N_ELEMENTS (sizes); i++) {
      Work w = { NULL, m, x, sizes[i], y, NPU_MATMUL_PRECISION_FAST, 1 };
      double secs = time_work (queue, &w);

      /* pass 0 warms up */
      if (p > 0 && secs < best[i])
        best[i] = secs;
    }
  }
  printf ("prefill chunks, fast, %" G_GSIZE_FORMAT " x %" G_GSIZE_FORMAT
      " (CPU time, best of %u):\n", m->rows, m->k, passes);
  for (i = 0; i < G_N_ELEMENTS (sizes); i++)
    printf ("  %2" G_GSIZE_FORMAT " rows: %7.3f ms, %.4f ms a row\n",
        sizes[i], best[i] * 1e3, best[i] * 1e3 / sizes[i]);
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

int
main (int argc, char **argv)
{
  static const struct
  {
    const gchar *what;
    gsize rows, k, n;
  } shapes[] = {
    {"SigLIP-B qkv/o  768 <- 768, 196", 768, 768, 196},
    {"SigLIP-B up    3072 <- 768, 196", 3072, 768, 196},
    {"SigLIP-B down   768 <- 3072, 196", 768, 3072, 196},
    {"1.1B q/o       2048 <- 2048, 512", 2048, 2048, 512},
    {"1.1B gate/up   5632 <- 2048, 512", 5632, 2048, 512},
    {"1.1B down      2048 <- 5632, 512", 2048, 5632, 512},
  };
  guint passes = argc > 1 ? (guint) atoi (argv[1]) : 5;
  guint thread_counts[2] = { 1, npu_cpu_count () };
  gsize max_x = 0, max_y = 0, max_w = 0, i;
  NpuBlockMxfp4 *blocks;
  float *x, *y;
  guint t, s, p, q;

  setvbuf (stdout, NULL, _IOLBF, 0);
  passes = MAX (passes, 1);
  for (s = 0; s < G_N_ELEMENTS (shapes); s++) {
    max_x = MAX (max_x, shapes[s].n * shapes[s].k);
    max_y = MAX (max_y, shapes[s].n * shapes[s].rows);
    max_w = MAX (max_w, shapes[s].rows * shapes[s].k / 32);
  }
  blocks = g_new (NpuBlockMxfp4, max_w);
  for (i = 0; i < max_w; i++) {
    guint64 r0 = rng (), r1 = rng ();
    guint j;

    blocks[i].e = 120 + (guint8) (r0 >> 60);
    for (j = 0; j < 8; j++) {
      blocks[i].qs[j] = (guint8) (r0 >> (8 * j));
      blocks[i].qs[j + 8] = (guint8) (r1 >> (8 * j));
    }
  }
  x = g_new (float, max_x);
  y = g_new (float, max_y);
  for (i = 0; i < max_x; i++)
    x[i] = (float) ((double) (rng () >> 11) / (1ULL << 53) * 2.0 - 1.0);

  printf ("kernel path: %s, online CPUs: %u, best of %u passes, "
      "fast and accurate alternating\n", npu_matmul_get_isa (),
      thread_counts[1], passes);

  for (t = 0; t < (thread_counts[1] > 1 ? 2 : 1); t++) {
    NpuDevice *device = npu_device_new_cpu (thread_counts[t]);
    NpuQueue *queue = npu_queue_new (device, "bench");
    double peak_int8 = 0.0, peak_int16 = 0.0;
    /* the accurate GEMM is the int16 one on avx512 only */
    const gboolean int16_path = g_str_equal (npu_matmul_get_isa (), "avx512");

    printf ("\n%u thread(s), %s\n", thread_counts[t],
        thread_counts[t] == 1 ? "process CPU time" : "wall-clock time");
#if defined(__x86_64__)
    if (__builtin_cpu_supports ("avx512f")
        && __builtin_cpu_supports ("avx512vnni")) {
      Work w8 = { peak_int8_slice, NULL, NULL, 0, NULL, 0, thread_counts[t] };
      Work wf = { peak_f32_slice, NULL, NULL, 0, NULL, 0, thread_counts[t] };
      Work w16 = { peak_int16_slice, NULL, NULL, 0, NULL, 0,
        thread_counts[t]
      };
      double pf = 0.0, p16 = 0.0;

      for (p = 0; p < passes; p++) {
        peak_int8 = MAX (peak_int8, 2.0 * 64 * 12 * PEAK_ITERS *
            thread_counts[t] / time_work (queue, &w8) / 1e9);
        p16 = MAX (p16, 2.0 * 32 * 12 * PEAK_ITERS * thread_counts[t] /
            time_work (queue, &w16) / 1e9);
        pf = MAX (pf, 2.0 * 16 * 12 * PEAK_ITERS * thread_counts[t] /
            time_work (queue, &wf) / 1e9);
      }
      printf ("int8 peak (vpdpbusd)                     %8.1f GOPS\n",
          peak_int8);
      printf ("int16 peak (vpdpwssd)                    %8.1f GOPS\n", p16);
      peak_int16 = p16;
      printf ("F32 peak (vfmadd231ps)                   %8.1f GOPS\n", pf);
    }
    if (__builtin_cpu_supports ("avx2") && __builtin_cpu_supports ("fma")) {
      Work wy = { peak_f32_ymm_slice, NULL, NULL, 0, NULL, 0,
        thread_counts[t]
      };
      double py = 0.0;

      for (p = 0; p < passes; p++)
        py = MAX (py, 2.0 * 8 * 12 * PEAK_ITERS * thread_counts[t] /
            time_work (queue, &wy) / 1e9);
      printf ("F32 peak on ymm (vfmadd231ps, avx2)      %8.1f GOPS\n", py);
    }
#endif
    for (s = 0; s < G_N_ELEMENTS (shapes); s++) {
      NpuMxfp4Matrix m;
      /* fast, accurate on panels; fast, accurate on tiles; accurate on
       * the F32 panels */
      double best[5] = { 0.0, 0.0, 0.0, 0.0, 0.0 };
      double share[5] = { 0.0, 0.0, 0.0, 0.0, 0.0 };
      double ops = 2.0 * shapes[s].rows * shapes[s].k * shapes[s].n;

      npu_mxfp4_matrix_init_view (&m, blocks, shapes[s].rows, shapes[s].k);
      for (p = 0; p <= passes; p++) {
        double peak = 0.0, peak16 = 0.0, peakf = 0.0;

#if defined(__x86_64__)
        if (peak_int8 > 0) {
          Work w8 = { peak_int8_slice, NULL, NULL, 0, NULL, 0,
            thread_counts[t]
          };
          Work w16 = { peak_int16_slice, NULL, NULL, 0, NULL, 0,
            thread_counts[t]
          };
          Work wf = { peak_f32_slice, NULL, NULL, 0, NULL, 0,
            thread_counts[t]
          };

          peak = 2.0 * 64 * 12 * PEAK_ITERS * thread_counts[t] /
              time_work (queue, &w8) / 1e9;
          peak16 = 2.0 * 32 * 12 * PEAK_ITERS * thread_counts[t] /
              time_work (queue, &w16) / 1e9;
          peakf = 2.0 * 16 * 12 * PEAK_ITERS * thread_counts[t] /
              time_work (queue, &wf) / 1e9;
        }
#endif
        for (q = 0; q < 5; q++) {
          Work w = { NULL, &m, x, shapes[s].n, y, q % 2 ?
                NPU_MATMUL_PRECISION_ACCURATE : NPU_MATMUL_PRECISION_FAST,
            thread_counts[t]
          };
          double secs, gops;

          if (q == 4)
            w.precision = NPU_MATMUL_PRECISION_ACCURATE;
          npu_matmul_set_gemm_panels (q < 2 || q == 4);
          npu_matmul_set_accurate_gemm_int16 (q != 4);
          secs = time_work (queue, &w);
          gops = ops / secs / 1e9;
          /* pass 0 warms up */
          if (p > 0 && gops > best[q]) {
            best[q] = gops;
            /* each against the peak of its own instruction: the accurate
             * panels' int16 vpdpwssd (or F32 FMA where this path has no
             * int16 GEMM, avx2) */
            share[q] = q == 0 ? gops / peak : q == 1 ? gops / peak16 :
                q == 4 ? gops / peakf : 0.0;
          }
        }
        npu_matmul_set_gemm_panels (TRUE);
        npu_matmul_set_accurate_gemm_int16 (TRUE);
      }
      printf ("%s\n  panels: fast %6.1f GOPS", shapes[s].what, best[0]);
      if (peak_int8 > 0)
        printf (" (%4.1f %% of int8 peak)", 100 * share[0]);
      printf (", accurate %6.1f GOPS", best[1]);
      if (peak_int16 > 0 && int16_path)
        printf (" (%4.1f %% of int16 peak)", 100 * share[1]);
      printf (" (time x %.2f of fast)\n", best[0] / best[1]);
      if (peak_int16 > 0 && int16_path) {
        printf ("  accurate on F32 panels %6.1f GOPS (%4.1f %% of F32 peak) "
            "(time x %.2f of fast); int16 / F32 speed %.2f\n", best[4],
            100 * share[4], best[0] / best[4], best[1] / best[4]);
      }
      printf ("  tiles:  fast %6.1f GOPS, accurate %6.1f GOPS; "
          "panels / tiles speed: fast %.2f, accurate %.2f\n", best[2],
          best[3], best[0] / best[2], best[1] / best[3]);
      npu_mxfp4_matrix_clear (&m);
    }
    if (thread_counts[t] == 1) {
      NpuMxfp4Matrix m;

      /* gate/up, repacked (npullm's NPU_LLM_LOAD_REPACK layout) */
      npu_mxfp4_matrix_repack (&m, blocks, 5632, 2048);
      bench_chunks (queue, &m, x, y, passes);
      npu_mxfp4_matrix_clear (&m);
    }
    npu_queue_free (queue);
    npu_device_unref (device);
  }
  g_free (blocks);
  g_free (x);
  g_free (y);
  return 0;
}
