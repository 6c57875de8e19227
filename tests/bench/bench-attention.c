/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the attention of one decoded token at a depth, in CPU time
 *
 * Decode at a depth D reads every layer's D cached key and value rows and
 * does the attention's arithmetic over them; this times that part alone,
 * shaped as the generated 1.1 B llama's (16 layers, 8 KV heads of 64, 4
 * query heads each), for each KV cache type, in three layouts:
 *   rows   a cache row holds every KV head's values (512 a token), so one
 *          head's rows are a strided walk (npullm's layout before the
 *          head-major one), on 4 KiB pages (g_malloc);
 *   heads  each head's rows contiguous (head-major), on transparent huge
 *          pages (npu_huge_alloc0(), as npullm), keys as rows like the
 *          values (npullm's layout before the key tiles);
 *   tiles  as heads, but each head's keys in tiles of sixteen rows side
 *          by side (npukvtype.h; npullm's layout).
 * The two side by side show what the layout gives on this machine.  The
 * figure is the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID), which other jobs on a shared machine move far
 * less than the wall time (printed beside it); the cache (16 x D rows) is
 * larger than the L2, so the rows come from L3 or memory as in a decode.
 *
 * --evict MiB reads that many MiB of other memory before each token (a
 * decode streams its weights, 559 MiB for that llama, between two tokens'
 * attention), so that the rows come from memory, not from a large L3.
 *
 * --threads N (2 or more) runs each token as a decode does on N threads:
 * per layer one parallel loop of a CPU device (npubackend.h) whose items
 * are the KV heads, taken in turn by whichever thread is free.  The
 * figure is then the token's wall time; beside it, each thread's time
 * inside its heads (its cache reads over that time: how fast one thread
 * reads while the others attend too) and the share of the token the
 * threads spent outside any head (waiting for each other at the end of a
 * layer's loop, or being handed the next one).
 *
 * --layers N attends N layers only: with a small N and depth the whole
 * cache stays in the core's L2 (e.g. --layers 1 --depth 512, 1 MiB of
 * F16), which times the kernel's arithmetic without its reads from
 * memory.
 *
 * Usage: bench-attention [--depth D (2048)] [--reps N (20)]
 *          [--kv-type f32,f16,q8_0 (all three)]
 *          [--layout rows,heads,tiles (all three)]
 *          [--evict MiB (0)] [--threads N (1)] [--layers N (16)]
 * Each figure is the best of N tokens' worth of calls, the types and
 * layouts alternating in each repetition.
 * NPU_CPU_ISA=scalar|avx2|avx512|asimd|neon forces a kernel path.
 */
#include <core/cpu/npuattention.h>
#include <core/device/npubackend.h>
#include <core/cpu/npucpu.h>
#include <core/device/npufence.h>
#include <core/device/npuhugemem.h>
#include "tests/bench/npubenchtask.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* layers: the model's 16 unless --layers says fewer */
static guint n_layer = 16;
#define N_KV 8
#define GQA 4
#define HD 64
#define KV_DIM (N_KV * HD)
#define MAX_THREADS 16

typedef struct
{
  NpuKvType type;
  /* 0: n_layer x depth rows of KV_DIM values (g_malloc); 1 (heads):
   * n_layer x N_KV x depth rows of HD values (npu_huge_alloc0()); 2
   * (tiles): values as heads, keys n_layer x N_KV x tiles (depth / 16
   * rounded up) of 16 rows of HD values */
  guint layout;
  guint8 *k, *v;
  gsize row;                    /* bytes of KV_DIM values */
  gsize size;                   /* of v */
  gsize k_size;                 /* of k */
  gsize n_tiles;                /* a head's tiles (layout 2) */
  double best_cpu, best_wall;
  /* --threads: of the token with the best wall time, each thread's time
   * inside its heads and the heads it ran */
  double busy[MAX_THREADS];
  guint heads[MAX_THREADS];
} Cache;

static double
now (clockid_t clock)
{
  struct timespec ts;

  clock_gettime (clock, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const gchar *const layout_names[] = { "rows", "heads", "tiles" };

static void
cache_init (Cache * c, NpuKvType type, guint layout, guint depth,
    GRand * rand)
{
  gsize off = npu_kv_row_bytes (type, HD), tb = npu_kv_tile_bytes (type, HD);
  float x[KV_DIM];
  guint8 row[KV_DIM * 4];
  gsize r, i, g;

  c->type = type;
  c->layout = layout;
  c->row = npu_kv_row_bytes (type, KV_DIM);
  c->size = (gsize) n_layer *depth * c->row;
  c->n_tiles = (depth + NPU_KV_TILE_ROWS - 1) / NPU_KV_TILE_ROWS;
  c->k_size = layout == 2 ? (gsize) n_layer * N_KV * c->n_tiles * tb :
      c->size;
  c->k = layout ? npu_huge_alloc0 (c->k_size) : g_malloc (c->k_size);
  c->v = layout ? npu_huge_alloc0 (c->size) : g_malloc (c->size);
  /* random rows: which head a row belongs to does not matter here, except
   * that the tiles take each head's part of a row */
  for (r = 0; r < (gsize) n_layer * depth; r++) {
    for (i = 0; i < KV_DIM; i++)
      x[i] = (float) g_rand_double_range (rand, -2.0, 2.0);
    if (layout == 2) {
      npu_kv_encode_row (type, x, KV_DIM, row);
      for (g = 0; g < N_KV; g++) {
        gsize h = (r / depth) * N_KV + g, t = r % depth;

        npu_kv_tile_put (type, HD, row + g * off, c->k + (h * c->n_tiles +
                t / NPU_KV_TILE_ROWS) * tb, t % NPU_KV_TILE_ROWS);
      }
    } else {
      npu_kv_encode_row (type, x, KV_DIM, c->k + r * c->row);
    }
    for (i = 0; i < KV_DIM; i++)
      x[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
    npu_kv_encode_row (type, x, KV_DIM, c->v + r * c->row);
  }
  c->best_cpu = c->best_wall = INFINITY;
}

static void
cache_clear (Cache * c)
{
  if (c->layout) {
    npu_huge_free (c->k, c->k_size);
    npu_huge_free (c->v, c->size);
  } else {
    g_free (c->k);
    g_free (c->v);
  }
}

/* KV head @g of layer @l with its GQA query heads */
static void
head (const Cache * c, guint depth, guint l, guint g, const float *q,
    float *scores, float *out)
{
  gsize off = npu_kv_row_bytes (c->type, HD);
  gsize tb = npu_kv_tile_bytes (c->type, HD);
  gsize h = (gsize) l * N_KV + g;
  gsize base = c->layout ? h * depth * off :
      (gsize) l * depth * c->row + g * off;
  NpuAttnSpan sp = { q + g * GQA * HD, c->k + base, c->v + base,
    c->layout ? HD : KV_DIM, depth, c->type, FALSE, 0
  };

  if (c->layout == 2) {
    sp.k = c->k + h * c->n_tiles * tb;
    sp.k_tiled = TRUE;
  }
  npu_attention_rows (&sp, 1, HD, GQA, HD, 0.125f, scores, depth,
      out + g * GQA * HD, HD);
}

/* One token: every layer, every KV head with its GQA query heads */
static void
token (Cache * c, guint depth, const float *q, float *scores, float *out)
{
  guint l, g;

  for (l = 0; l < n_layer; l++)
    for (g = 0; g < N_KV; g++)
      head (c, depth, l, g, q, scores, out);
}

/* --threads: one token inside a task of a CPU device */
typedef struct
{
  const Cache *c;
  guint depth, layer;
  const float *q;
  float *scores;                /* a depth x GQA block per thread */
  float *out;
  double busy[MAX_THREADS];
  guint heads[MAX_THREADS];
  double wall;
} ThreadedToken;

static void
heads_slice (gsize start, gsize end, guint worker, gpointer user_data)
{
  ThreadedToken *tt = user_data;
  double t0 = now (CLOCK_MONOTONIC);
  gsize g;

  for (g = start; g < end; g++)
    head (tt->c, tt->depth, tt->layer, (guint) g, tt->q,
        tt->scores + (gsize) worker * GQA * tt->depth, tt->out);
  tt->busy[worker] += now (CLOCK_MONOTONIC) - t0;
  tt->heads[worker] += (guint) (end - start);
}

static gboolean
threaded_token_run (NpuTask * task, gpointer user_data, GError ** error)
{
  ThreadedToken *tt = user_data;
  double t0 = now (CLOCK_MONOTONIC);

  for (tt->layer = 0; tt->layer < n_layer; tt->layer++)
    npu_task_parallel_for (task, N_KV, 1, heads_slice, tt);
  tt->wall = now (CLOCK_MONOTONIC) - t0;
  return TRUE;
}

/* One token on the device's threads, as npullm's decode runs it; keeps
 * the best wall time and that token's per-thread figures in @c */
static void
token_threaded (Cache * c, NpuQueue * queue, guint n_threads, guint depth,
    const float *q, float *scores, float *out)
{
  ThreadedToken tt = { c, depth, 0, q, scores, out, {0,}, {0,}, 0 };
  guint i;

  npu_bench_run_task (queue, threaded_token_run, &tt);
  if (tt.wall < c->best_wall) {
    c->best_wall = tt.wall;
    for (i = 0; i < n_threads; i++) {
      c->busy[i] = tt.busy[i];
      c->heads[i] = tt.heads[i];
    }
  }
}

static volatile guint64 evict_sink;

/* Reads @n bytes of @buf, a cache line at a time */
static void
evict (const guint8 * buf, gsize n)
{
  guint64 s = 0;
  gsize i;

  for (i = 0; i < n; i += 64)
    s += buf[i];
  evict_sink += s;
}

static gboolean
parse_types (const gchar * arg, NpuKvType * types, guint * n)
{
  gchar **names = g_strsplit (arg, ",", -1);
  gboolean ok = TRUE;
  guint i;

  *n = 0;
  for (i = 0; names[i] && ok; i++) {
    if (*n == 3 || !npu_kv_type_from_name (names[i], &types[(*n)++]))
      ok = FALSE;
  }
  g_strfreev (names);
  return ok && *n > 0;
}

int
main (int argc, char **argv)
{
  NpuKvType types[3] = { NPU_KV_F32, NPU_KV_F16, NPU_KV_Q8_0 };
  guint n_types = 3, depth = 2048, reps = 20, i, t, rep, n_c = 0;
  guint n_threads = 1;
  NpuDevice *device = NULL;
  NpuQueue *queue = NULL;
  guint layouts = 7;            /* bit i: layout_names[i] */
  gsize evict_bytes = 0;
  guint8 *evict_buf = NULL;
  Cache caches[9];
  float *q, *scores, *out;
  GRand *rand;

  for (i = 1; i < (guint) argc; i++) {
    if (!strcmp (argv[i], "--depth") && i + 1 < (guint) argc)
      depth = (guint) atoi (argv[++i]);
    else if (!strcmp (argv[i], "--reps") && i + 1 < (guint) argc)
      reps = (guint) atoi (argv[++i]);
    else if (!strcmp (argv[i], "--kv-type") && i + 1 < (guint) argc) {
      if (!parse_types (argv[++i], types, &n_types)) {
        fprintf (stderr, "bench-attention: bad --kv-type %s\n", argv[i]);
        return 1;
      }
    } else if (!strcmp (argv[i], "--evict") && i + 1 < (guint) argc) {
      evict_bytes = (gsize) atoi (argv[++i]) << 20;
    } else if (!strcmp (argv[i], "--layers") && i + 1 < (guint) argc) {
      n_layer = (guint) atoi (argv[++i]);
    } else if (!strcmp (argv[i], "--threads") && i + 1 < (guint) argc) {
      n_threads = (guint) atoi (argv[++i]);
    } else if (!strcmp (argv[i], "--layout") && i + 1 < (guint) argc) {
      i++;
      layouts = (strstr (argv[i], "rows") ? 1 : 0) |
          (strstr (argv[i], "heads") ? 2 : 0) |
          (strstr (argv[i], "tiles") ? 4 : 0);
      if (!layouts) {
        fprintf (stderr, "bench-attention: bad --layout %s\n", argv[i]);
        return 1;
      }
    } else {
      fprintf (stderr, "usage: bench-attention [--depth D] [--reps N] "
          "[--kv-type f32,f16,q8_0] [--layout rows,heads,tiles] "
          "[--evict MiB] [--threads N] [--layers N]\n");
      return 1;
    }
  }
  if (depth < 1 || reps < 1 || n_layer < 1) {
    fprintf (stderr, "bench-attention: depth, reps and layers must be "
        ">= 1\n");
    return 1;
  }
  if (n_threads < 1 || n_threads > MAX_THREADS) {
    fprintf (stderr, "bench-attention: threads must be 1 to %d\n",
        MAX_THREADS);
    return 1;
  }
  if (n_threads > 1) {
    device = npu_device_new_cpu (n_threads);
    queue = npu_queue_new (device, "bench-attention");
  }

  rand = g_rand_new_with_seed (1);
  q = g_new (float, N_KV * GQA * HD);
  out = g_new (float, N_KV * GQA * HD);
  scores = g_new (float, (gsize) GQA * depth * n_threads);
  for (i = 0; i < N_KV * GQA * HD; i++)
    q[i] = (float) g_rand_double_range (rand, -1.0, 1.0);
  if (evict_bytes) {
    evict_buf = npu_huge_alloc0 (evict_bytes);
    memset (evict_buf, 1, evict_bytes);
  }
  for (t = 0; t < n_types; t++)
    for (i = 0; i < 3; i++)
      if (layouts & (1 << i))
        cache_init (&caches[n_c++], types[t], i, depth, rand);

  printf ("attention of one token at depth %u: %u layers x %d KV heads x %d "
      "queries, head %d; kernels %s; best of %u; %" G_GSIZE_FORMAT
      " MiB read before each; %u thread%s\n", depth, n_layer, N_KV, GQA, HD,
      npu_cpu_isa_name (npu_cpu_get_isa ()), reps, evict_bytes >> 20,
      n_threads, n_threads > 1 ? "s (wall time)" : "");
  for (rep = 0; rep < reps; rep++) {
    for (t = 0; t < n_c; t++) {
      Cache *c = &caches[t];
      double c0, w0;

      if (evict_buf)
        evict (evict_buf, evict_bytes);
      if (queue) {
        token_threaded (c, queue, n_threads, depth, q, scores, out);
        continue;
      }
      c0 = now (CLOCK_THREAD_CPUTIME_ID);
      w0 = now (CLOCK_MONOTONIC);

      token (c, depth, q, scores, out);
      c->best_cpu = MIN (c->best_cpu, now (CLOCK_THREAD_CPUTIME_ID) - c0);
      c->best_wall = MIN (c->best_wall, now (CLOCK_MONOTONIC) - w0);
    }
  }
  for (t = 0; t < n_c; t++) {
    Cache *c = &caches[t];
    double mib = 2.0 * n_layer * depth * c->row / (1024.0 * 1024.0);

    if (queue) {
      double busy = 0;

      printf ("  %-5s %-5s %6.1f MiB read: %7.2f ms wall, %5.2f GB/s\n",
          npu_kv_type_name (c->type), layout_names[c->layout], mib,
          c->best_wall * 1e3, mib * 1048576.0 / c->best_wall * 1e-9);
      for (i = 0; i < n_threads; i++) {
        double read = mib * 1048576.0 * c->heads[i] / (n_layer * N_KV);

        busy += c->busy[i];
        printf ("        thread %u: %3u heads in %6.2f ms, %5.2f GB/s\n", i,
            c->heads[i], c->busy[i] * 1e3,
            c->busy[i] > 0 ? read / c->busy[i] * 1e-9 : 0.0);
      }
      printf ("        outside the heads: %.1f %% of the threads' time\n",
          100.0 * (1.0 - busy / (n_threads * c->best_wall)));
      cache_clear (c);
      continue;
    }
    printf ("  %-5s %-5s %6.1f MiB read: %7.2f ms CPU (wall %7.2f ms), "
        "%5.2f GB/s\n", npu_kv_type_name (c->type), layout_names[c->layout],
        mib, c->best_cpu * 1e3, c->best_wall * 1e3,
        mib * 1048576.0 / c->best_cpu * 1e-9);
    if (c->layout && t > 0 && caches[t - 1].type == c->type)
      printf ("  %-5s %s / %s: %.2fx faster\n", npu_kv_type_name (c->type),
          layout_names[c->layout], layout_names[caches[t - 1].layout],
          caches[t - 1].best_cpu / c->best_cpu);
    cache_clear (c);
  }
  npu_huge_free (evict_buf, evict_bytes);
  if (queue) {
    npu_queue_free (queue);
    npu_device_unref (device);
  }
  g_free (q);
  g_free (out);
  g_free (scores);
  g_rand_free (rand);
  return 0;
}
