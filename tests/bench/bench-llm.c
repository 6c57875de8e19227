/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: prefill and decode throughput of the transformer core
 *
 * Decoding a token reads every weight matrix once, so its ceiling is the
 * memory bandwidth: roofline tokens/s = read limit / bytes read per token
 * (the weights, plus the KV cache's rows at the decode's depth).  The read
 * limit is measured in the same run, on the same threads, as the best of
 * several access patterns over a 1 GiB buffer on transparent huge pages
 * (as the repacked weights are): the threads claim it in parts of 32 MiB,
 * each part read as 1, 2, 4, 8 or 16 interleaved streams, with and
 * without software prefetch; a single
 * plain stream (the old probe) is often not the limit, one thread keeping
 * more lines in flight reads faster.  Prefill runs the same matrices
 * through the GEMM path and is bound by arithmetic.
 *
 * The memory this machine gives us moves while the benchmark runs (its
 * host shares it with other guests), so decode is compared with a limit
 * taken beside it: all ten patterns run right before and right after each
 * decode run, and that run's share is its read rate over the better of
 * the two probes (the limit the memory showed on either side of it).
 * Each decode line prints the share pass by pass, with the median and
 * the spread; the roofline beside the best tok/s is against the best
 * limit of the whole run, the stricter and older figure.
 *
 * Everything runs inside tasks of a CPU device, on 1 thread and on every
 * online CPU; each figure is the best of several passes, the worst beside
 * it (the spread shows how noisy the machine was).
 *
 * Usage: bench-llm [model.gguf] [--passes N (3)] [--decode N (32)]
 *          [--prefill N (64)] [--ctx N (1024)] [--threads N] [--repack]
 *          [--kv-type f16,f32,q8_0 (f16)] [--precision fast,accurate (fast)]
 *          [--depth D1,D2,... (none)] [--reuse P] [--gemv-streams 1,2,4,8]
 *          [--alternate N] [--alternate-limit N]
 * --depth decodes at each depth in turn after the prefill (the context
 * truncated back to D tokens, D <= the prefill, then N tokens decoded from
 * there, so each figure's tokens sit at D .. D + N): with --prefill 2048
 * --depth 0,2048 --kv-type f32,f16,q8_0 one run gives decode at both
 * depths for all three cache types, and the ratio of each depth to 0.
 * --reuse P: the time to the first token of a camera loop's second
 * answer, which keeps the first P tokens' cache rows (system prompt,
 * template head: npullm's prompt-prefix reuse) and evaluates the other
 * prefill - P (the new image's rows and the question; token ids stand in
 * for the rows, the same work) before its first token, beside the first
 * answer's (the whole prefill).
 * --kv-type and --precision take one value or several, comma-separated:
 * each pass then runs prefill and decode with each combination in turn
 * (alternating, so a noisy machine hurts them alike) and prints them side
 * by side.
 * --gemv-streams S1,S2,...: each pass runs every configuration above with
 * the one-token GEMV reading its rows as S1, then S2, ... sequential
 * streams (npu_matmul_set_gemv_streams(), avx512; default: the library's
 * choice, measured in the process by npugemvstreams.h), printed side by
 * side.
 * --alternate N: what a list gives takes turns every N tokens inside one
 * decode run instead of each having runs of its own, and each token is
 * timed.  The stream counts of --gemv-streams share one context; the
 * depths of --depth each have a context of their own (the same
 * parameters; those deeper than 0 prefilled, then truncated to their
 * depth), each decoding --decode tokens, so --depth 0,2048 --alternate 4
 * decodes four tokens with an empty cache, four at depth 2048, and so on.
 * Each lane's median ms a token over every pass is printed with its ratio
 * to the first lane's, and that ratio pass by pass.  Variants that share
 * the memory's moments this closely differ by ~0.5 % when they are the
 * same, where whole runs one after the other differ by 10 % or more on a
 * shared machine (docs/kernels.md).
 * --alternate-limit N: each decode run also reads the limit's best
 * pattern (the best of this thread count's first probe, on the same
 * threads, in the probe's parts) between its tokens: N tokens of decode,
 * then that pattern over as many bytes as those N tokens read (going
 * round the probe's buffer), then N tokens, and so on, each turn timed.
 * Decode and the limit then see the same moments of the memory, where
 * the probes around a run are seconds away from most of its tokens.
 * Prints the median GB/s of the limit's turns and of decode's (tokens x
 * bytes a token over the turn's time), their ratio (decode's share of
 * the limit, alternated) and that ratio pass by pass.  The other lines
 * stay as they are; decode's tok/s is over its own turns' time.  Not with
 * --alternate; --decode a multiple of N.
 * --threads N runs on N threads only (default: 1, then every online CPU).
 * The weights are read where the file mapping has them, in the type and
 * layout the file stores, as the npullm element reads them
 * (NPU_LLM_LOAD_IN_PLACE).  --repack repacks the MXFP4 matrices at load
 * into the split layout instead (NPU_LLM_LOAD_REPACK, a private copy the
 * size of the weights): the default before 2026-12-07, so the figures
 * quoted before then in docs/ are of the repacked layout.  --in-place,
 * now the default, is still accepted.
 * Without a model a 1B llama (generator preset "1b", MXFP4) is written to
 * a temporary file first and removed at the end.
 * NPU_CPU_ISA=scalar|avx2|avx512|asimd|neon forces a kernel path.
 */
#include <core/models/npullm.h>
#include <core/cpu/npumatmul.h>
#include <core/cpu/npumatmul-testing.h>
#include <core/cpu/npugemvstreams.h>
#include "tests/bench/npubenchstats.h"
#include "tests/bench/npubenchtask.h"
#include "tests/bench/npureadstreams.h"
#include "tests/bench/npubenchmodel.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define READ_BYTES (G_GUINT64_CONSTANT (1) << 30)

static volatile guint64 read_sink;


/* ------------------------------------------------------------------------
 * The read limit: several access patterns, the best one counts
 */
/* a part of the buffer, read as 1 to 16 streams of 2 MiB or more */
#define PROBE_PART ((gsize) 32 << 20)
#define PF_DISTANCE 1024        /* bytes ahead of each stream */

typedef struct
{
  const guint8 *data;
  gsize size;
  /* parts of PROBE_PART, claimed by the threads; more than the buffer
   * holds go round it again (--alternate-limit reads as many bytes as
   * its decode turns, often more than the buffer) */
  guint n_parts;
  guint n_streams;              /* read interleaved inside a part */
  gboolean prefetch;
} PatternJob;

/* Parts [@start, @end), each read as n_streams equal streams, 128 bytes
 * of each in turn (two cache lines: the adjacent-line prefetcher pairs
 * them) */
static void
read_part (gsize start, gsize end, guint worker, gpointer user_data)
{
  PatternJob *job = user_data;
  gsize in_buffer = job->size / PROBE_PART, i;
  guint ns = job->n_streams;
  guint64 sum = 0;

  for (i = start; i < end; i++)
    sum += npu_read_streams (job->data + i % in_buffer * PROBE_PART,
        PROBE_PART / ns & ~(gsize) 127, ns, job->prefetch ? PF_DISTANCE : 0);
  read_sink += sum;
}

/* 2 MiB aligned, marked for transparent huge pages, filled */
static guint8 *
huge_buffer (gsize size)
{
  gpointer p = NULL;
  gsize i;

  if (posix_memalign (&p, 2 << 20, size) != 0)
    g_error ("out of memory");
#ifdef MADV_HUGEPAGE
  madvise (p, size, MADV_HUGEPAGE);
#endif
  for (i = 0; i < size / 8; i++)
    ((guint64 *) p)[i] = i;
  return p;
}

typedef enum
{
  JOB_PATTERN,
  JOB_PREFILL,
  JOB_DECODE,
} JobKind;

/* --alternate: one decode run in which lanes take turns every few tokens;
 * a lane is a context (one per depth when depths alternate) decoding with
 * one GEMV stream count, and keeps each of its tokens' time */
typedef struct
{
  NpuLlmContext *ctx;
  guint64 start;                /* its context's depth when the run begins */
  guint streams;                /* npu_matmul_set_gemv_streams (), 0: as is */
  GArray *ms;                   /* each token's ms, every pass */
  GArray *pass_end;             /* ms->len at the end of each pass */
  gchar *label;
} Lane;

/* --alternate-limit: a decode run cut into turns of a few tokens, each
 * followed by a turn of the read limit's best pattern over as many bytes
 * as those tokens read, so that both are timed in the same moments of the
 * memory; every turn's seconds, every pass */
typedef struct
{
  double decode_bytes;          /* a decode turn reads: tokens x a token */
  double limit_bytes;           /* a limit turn reads: its parts */
  GArray *decode_s, *limit_s;
  GArray *pass_end;             /* decode_s->len at the end of each pass */
} LimitTurns;

typedef struct
{
  JobKind kind;
  PatternJob pattern;
  NpuLlmContext *ctx;
  const gint32 *tokens;
  gsize n;
  guint n_vocab;
  gint32 from_token;            /* >= 0: the first decode step's input */
  /* --alternate: the n tokens taken by n_lanes lanes in turn, alt_every
   * tokens at a time */
  Lane *lanes;
  guint n_lanes, alt_every;
  /* --alternate-limit: after every limit_every tokens, the pattern
   * limit (over limit.n_parts parts), each turn timed into turns */
  guint limit_every;
  PatternJob limit;
  LimitTurns *turns;
} Job;

static gint32
argmax (const float *l, guint n)
{
  guint i, b = 0;

  for (i = 1; i < n; i++)
    if (l[i] > l[b])
      b = i;
  return b;
}

/* --alternate-limit: the decode turn that began at @turn_start ends
 * here; the limit's turn follows it, on the same threads, its parts
 * claimed as the probe's are */
static void
limit_turn (NpuTask * task, Job * job, gint64 turn_start)
{
  gint64 t0 = g_get_monotonic_time ();
  double s = (t0 - turn_start) / 1e6;

  g_array_append_val (job->turns->decode_s, s);
  npu_task_parallel_for (task, job->limit.n_parts, 1, read_part, &job->limit);
  s = (g_get_monotonic_time () - t0) / 1e6;
  g_array_append_val (job->turns->limit_s, s);
}

static gboolean
job_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Job *job = user_data;
  gint64 turn_start = 0;
  gsize i;

  switch (job->kind) {
    case JOB_PATTERN:
      /* Parts of PROBE_PART claimed one at a time, as the GEMV claims its
       * rows: one fixed part per thread made the probe as slow as the
       * thread that got the least CPU time, so on a loaded machine decode
       * (which balances) read up to 1.3x "the limit" on two threads */
      npu_task_parallel_for (task, job->pattern.n_parts, 1, read_part,
          &job->pattern);
      return TRUE;
    case JOB_PREFILL:
      /* up to the first token: the time to first token */
      if (!npu_llm_eval_tokens (job->ctx, task, job->tokens, job->n, error))
        return FALSE;
      (void) argmax (npu_llm_get_logits (job->ctx), job->n_vocab);
      return TRUE;
    default:
      /* greedy steps, as a stream would run them; after a truncation
       * (no logits) from the first prompt token */
      for (i = 0; i < job->n; i++) {
        Lane *lane = job->n_lanes ? &job->lanes[i / job->alt_every %
            job->n_lanes] : NULL;
        NpuLlmContext *ctx = lane ? lane->ctx : job->ctx;
        gboolean first = lane ? npu_llm_context_get_n_past (ctx) ==
            lane->start : i == 0;
        gint32 t = first && job->from_token >= 0 ? job->from_token :
            argmax (npu_llm_get_logits (ctx), job->n_vocab);
        gint64 t0;

        if (job->turns && i % job->limit_every == 0)
          turn_start = g_get_monotonic_time ();
        if (lane && lane->streams)
          npu_matmul_set_gemv_streams (lane->streams);
        t0 = g_get_monotonic_time ();
        if (!npu_llm_eval_tokens (ctx, task, &t, 1, error))
          return FALSE;
        if (lane) {
          double ms = (g_get_monotonic_time () - t0) / 1e3;

          g_array_append_val (lane->ms, ms);
        }
        if (job->turns && (i + 1) % job->limit_every == 0)
          limit_turn (task, job, turn_start);
      }
      return TRUE;
  }
}

static double
time_job (NpuQueue * queue, Job * job)
{
  return npu_bench_run_task (queue, job_task, job);
}

#define N_STREAM_COUNTS 5
static const guint stream_counts[N_STREAM_COUNTS] = { 1, 2, 4, 8, 16 };

#define MAX_CFG 16
#define MAX_DEPTHS 4
#define MAX_LANES (MAX_DEPTHS * 4)

typedef struct
{
  double best, worst;
} Range;

static void
range_add (Range * r, double v)
{
  r->best = MAX (r->best, v);
  r->worst = MIN (r->worst, v);
}

/* The read limit now: every pattern once over @buf, each one's GB/s kept
 * in @pat (best and worst of the run); returns the best of this probe */
static double
probe_limit (NpuQueue * queue, guint8 * buf, Range pat[][2])
{
  Job job;
  double best = 0;
  guint s, pre;

  memset (&job, 0, sizeof (job));
  job.kind = JOB_PATTERN;
  job.pattern.data = buf;
  job.pattern.size = READ_BYTES;
  job.pattern.n_parts = READ_BYTES / PROBE_PART;
  for (s = 0; s < N_STREAM_COUNTS; s++)
    for (pre = 0; pre < 2; pre++) {
      double v;

      job.pattern.n_streams = stream_counts[s];
      job.pattern.prefetch = pre;
      v = READ_BYTES / time_job (queue, &job) / 1e9;
      range_add (&pat[s][pre], v);
      best = MAX (best, v);
    }
  return best;
}

/* Decode beside the limit probed around it, one entry per pass */
typedef struct
{
  double *share;                /* read rate / neighbouring limit */
  double *limit;                /* the neighbouring limit, GB/s */
} Beside;

static void
print_beside (const Beside * b, guint passes)
{
  double lo = G_MAXDOUBLE, hi = 0;
  guint p;

  printf ("      beside the limit probed around each pass:");
  for (p = 0; p < passes; p++) {
    printf (" %.0f%%", 100.0 * b->share[p]);
    lo = MIN (lo, b->share[p]);
    hi = MAX (hi, b->share[p]);
  }
  printf (" of");
  for (p = 0; p < passes; p++)
    printf (" %.2f", b->limit[p]);
  printf (" GB/s; median %.0f%% (%.0f-%.0f%%)\n",
      100.0 * npu_bench_median (b->share, passes), 100.0 * lo, 100.0 * hi);
}

/* --alternate: each lane's median ms a token over every pass, with its
 * ratio to the first lane's (for a depth against depth 0, also as the
 * change in tokens per second); then that ratio pass by pass, from each
 * pass's own medians, which is the spread of the comparison in this run */
static void
print_lanes (const Lane * lanes, guint n_lanes, guint every, guint passes)
{
  double first =
      npu_bench_median ((double *) lanes[0].ms->data, lanes[0].ms->len);
  guint l, p;

  printf ("      alternating every %u tokens, median ms a token:", every);
  for (l = 0; l < n_lanes; l++) {
    double m =
        npu_bench_median ((double *) lanes[l].ms->data, lanes[l].ms->len);

    printf ("%s %s: %.3f", l ? "," : "", lanes[l].label, m);
    if (l > 0)
      printf (" (%.3f x, %+.1f%% tok/s)", m / first, 100.0 * (first / m - 1));
  }
  printf ("\n");
  for (l = 1; l < n_lanes; l++) {
    printf ("        %s / %s pass by pass:", lanes[l].label, lanes[0].label);
    for (p = 0; p < passes; p++) {
      guint a0 = p ? g_array_index (lanes[0].pass_end, guint, p - 1) : 0;
      guint b0 = g_array_index (lanes[0].pass_end, guint, p);
      guint a1 = p ? g_array_index (lanes[l].pass_end, guint, p - 1) : 0;
      guint b1 = g_array_index (lanes[l].pass_end, guint, p);

      printf (" %.3f", npu_bench_median ((double *) lanes[l].ms->data + a1,
              b1 - a1) / npu_bench_median ((double *) lanes[0].ms->data + a0,
              b0 - a0));
    }
    printf ("\n");
  }
}

/* The median GB/s of turns [@from, @to) of @s, each of @bytes */
static double
turns_median_rate (GArray * s, guint from, guint to, double bytes)
{
  double *r = g_new (double, to - from), m;
  guint i;

  for (i = from; i < to; i++)
    r[i - from] = bytes / g_array_index (s, double, i) / 1e9;
  m = npu_bench_median (r, to - from);
  g_free (r);
  return m;
}

/* --alternate-limit: the limit's and decode's median GB/s over the turns
 * of every pass, their ratio (decode's share of a limit read in the same
 * moments), and that ratio pass by pass, from each pass's own medians */
static void
print_limit_turns (const LimitTurns * t, guint every, guint passes,
    guint n_streams, gboolean prefetch)
{
  guint n = t->decode_s->len, p;
  double lim = turns_median_rate (t->limit_s, 0, n, t->limit_bytes);
  double dec = turns_median_rate (t->decode_s, 0, n, t->decode_bytes);

  printf ("      alternating with the limit (%u stream%s a thread, %s) every "
      "%u tokens, median of %u turns each: limit %.2f GB/s, decode %.2f "
      "GB/s; share of the limit, alternated: %.1f%%\n", n_streams,
      n_streams > 1 ? "s" : "", prefetch ? "prefetch" : "no prefetch",
      every, n, lim, dec, 100.0 * dec / lim);
  printf ("        pass by pass:");
  for (p = 0; p < passes; p++) {
    guint a = p ? g_array_index (t->pass_end, guint, p - 1) : 0;
    guint b = g_array_index (t->pass_end, guint, p);

    printf (" %.1f%%", 100.0 * turns_median_rate (t->decode_s, a, b,
            t->decode_bytes) / turns_median_rate (t->limit_s, a, b,
            t->limit_bytes));
  }
  printf ("\n");
}

/* What a decoded token reads: the weights, and the cache rows at its
 * depth (on average the middle of the run of @n_decode) */
static double
decode_bytes (NpuLlmContext * ctx, guint64 wbytes, guint n_ctx, guint depth,
    guint n_decode)
{
  NpuLlmStats st;

  npu_llm_context_get_stats (ctx, &st);
  return wbytes + (double) st.kv_bytes / n_ctx * (depth + n_decode / 2.0);
}

/* The prefill of @ctx from empty, timed into @pf; with @reuse, then the
 * next answer's: the shared prefix kept, the rest again (its tokens per
 * second into @ttft, so that best is the shortest time) */
static void
time_prefill (NpuQueue * queue, Job * job, NpuLlmContext * ctx,
    guint n_prefill, guint reuse, Range * pf, Range * ttft)
{
  const gint32 *prompt = job->tokens;

  npu_llm_context_reset (ctx);
  job->kind = JOB_PREFILL;
  job->ctx = ctx;
  job->n = n_prefill;
  range_add (pf, n_prefill / time_job (queue, job));
  if (!reuse)
    return;
  if (!npu_llm_context_truncate (ctx, reuse))
    g_error ("cannot go back to %u tokens", reuse);
  job->tokens = prompt + reuse;
  job->n = n_prefill - reuse;
  range_add (ttft, 1 / time_job (queue, job));
  job->tokens = prompt;
}

static gboolean
parse_list (const gchar * arg, guint * out, guint max, guint * n)
{
  gchar **v = g_strsplit (arg, ",", -1);
  gboolean ok = TRUE;

  for (*n = 0; v[*n] && ok; (*n)++) {
    gchar *e;
    guint64 x = g_ascii_strtoull (v[*n], &e, 10);

    ok = *n < max && e != v[*n] && !*e && x <= 1 << 20;
    if (ok)
      out[*n] = x;
  }
  g_strfreev (v);
  return ok && *n > 0;
}

int
main (int argc, char **argv)
{
  const gchar *path = NULL;
  gchar *tmp_path = NULL;
  guint passes = 3, n_decode = 32, n_prefill = 64, n_ctx = 1024;
  guint only_threads = 0;
  guint thread_counts[2], n_counts, ti, i;
  NpuLlmModel *model;
  const NpuLlmHParams *hp;
  GError *error = NULL;
  guint8 *buf;
  gint32 *prompt;
  guint64 wbytes;
  gdouble matrix_weights;
  NpuLlmLoadFlags flags = NPU_LLM_LOAD_IN_PLACE;
  NpuKvType kv_types[3] = { NPU_KV_F16 };
  NpuMatmulPrecision precs[2] = { NPU_MATMUL_PRECISION_FAST };
  guint depths[MAX_DEPTHS], n_depths = 0, reuse = 0;
  guint n_kv = 1, n_prec = 1, n_cfg, k, d;
  guint streams[4] = { 8 }, n_streams = 0, alternate = 0, alt_limit = 0;
  /* configurations of stream counts: one if they alternate inside runs */
  guint n_scfg;
  /* --alternate: what takes turns inside a decode run */
  gboolean alt_streams, alt_depths;

  /* line by line through a pipe (bench.sh tees it): a long run shows
   * how far it got */
  setvbuf (stdout, NULL, _IOLBF, 0);
  for (i = 1; i < (guint) argc; i++) {
    /* atoi () once: MAX () evaluates its arguments twice */
    gint v = i + 1 < (guint) argc ? atoi (argv[i + 1]) : 0;

    if (strcmp (argv[i], "--passes") == 0 && v > 0)
      passes = v;
    else if (strcmp (argv[i], "--decode") == 0 && v > 0)
      n_decode = v;
    else if (strcmp (argv[i], "--prefill") == 0 && v > 1)
      n_prefill = v;
    else if (strcmp (argv[i], "--ctx") == 0 && v >= 16)
      n_ctx = v;
    else if (strcmp (argv[i], "--threads") == 0 && v > 0)
      only_threads = v;
    else if (strcmp (argv[i], "--alternate") == 0 && v > 0)
      alternate = v;
    else if (strcmp (argv[i], "--alternate-limit") == 0 && v > 0)
      alt_limit = v;
    else if (strcmp (argv[i], "--reuse") == 0 && v > 0)
      reuse = v;
    else if (strcmp (argv[i], "--gemv-streams") == 0 && i + 1 < (guint) argc) {
      if (!parse_list (argv[i + 1], streams, G_N_ELEMENTS (streams),
              &n_streams))
        g_error ("--gemv-streams: '%s' is not a list of at most 4 counts",
            argv[i + 1]);
      for (k = 0; k < n_streams; k++)
        if (streams[k] != 1 && streams[k] != 2 && streams[k] != 4 &&
            streams[k] != 8)
          g_error ("--gemv-streams: %u is not 1, 2, 4 or 8", streams[k]);
    } else if (strcmp (argv[i], "--depth") == 0 && i + 1 < (guint) argc) {
      if (!parse_list (argv[i + 1], depths, MAX_DEPTHS, &n_depths))
        g_error ("--depth: '%s' is not a list of at most %u token counts",
            argv[i + 1], MAX_DEPTHS);
    } else if (strcmp (argv[i], "--kv-type") == 0 && i + 1 < (guint) argc) {
      gchar **names = g_strsplit (argv[i + 1], ",", -1);

      for (n_kv = 0; names[n_kv]; n_kv++)
        if (n_kv >= G_N_ELEMENTS (kv_types) ||
            !npu_kv_type_from_name (names[n_kv], &kv_types[n_kv]))
          g_error ("--kv-type: '%s' is not f32, f16 or q8_0 (at most 3)",
              names[n_kv]);
      g_strfreev (names);
      if (n_kv == 0)
        g_error ("--kv-type needs a type");
    } else if (strcmp (argv[i], "--precision") == 0 && i + 1 < (guint) argc) {
      gchar **names = g_strsplit (argv[i + 1], ",", -1);

      for (n_prec = 0; names[n_prec]; n_prec++) {
        if (n_prec >= 2)
          g_error ("--precision: at most fast,accurate");
        if (strcmp (names[n_prec], "fast") == 0)
          precs[n_prec] = NPU_MATMUL_PRECISION_FAST;
        else if (strcmp (names[n_prec], "accurate") == 0)
          precs[n_prec] = NPU_MATMUL_PRECISION_ACCURATE;
        else
          g_error ("--precision: '%s' is not fast or accurate", names[n_prec]);
      }
      g_strfreev (names);
      if (n_prec == 0)
        g_error ("--precision needs a value");
    } else if (strcmp (argv[i], "--in-place") == 0) {
      flags = NPU_LLM_LOAD_IN_PLACE;
      continue;
    } else if (strcmp (argv[i], "--repack") == 0) {
      flags = NPU_LLM_LOAD_REPACK;
      continue;
    } else if (argv[i][0] != '-') {
      path = argv[i];
      continue;
    } else {
      g_printerr ("usage: %s [model.gguf] [--passes N] [--decode N] "
          "[--prefill N (>= 2)] [--ctx N (>= 16)] [--threads N] "
          "[--repack] [--kv-type f16,f32,q8_0] [--precision fast,accurate]"
          " [--depth D,...] [--reuse P] [--gemv-streams 1,2,4,8]"
          " [--alternate N] [--alternate-limit N]\n", argv[0]);
      return 2;
    }
    i++;
  }
  if (reuse >= n_prefill)
    g_error ("--reuse %u: the prefill (%u) must be longer", reuse, n_prefill);
  /* without --gemv-streams: the library's default, untouched */
  if (n_streams == 0)
    streams[n_streams++] = 0;
  /* without --depth: decode goes on from the prefill */
  if (n_depths == 0)
    depths[n_depths++] = n_prefill;
  alt_streams = alternate && n_streams >= 2;
  alt_depths = alternate && n_depths >= 2;
  if (alternate && !alt_streams && !alt_depths)
    g_error ("--alternate %u needs two or more --gemv-streams counts or "
        "--depth values", alternate);
  /* every lane its turns, and (depths, one context each) every context
   * exactly --decode tokens */
  if (alternate && (n_decode < alternate * (alt_streams ? n_streams : 1) ||
          (alt_depths && n_decode % (alternate * (alt_streams ? n_streams :
                      1)))))
    g_error ("--alternate %u: --decode %u must be at least %u%s", alternate,
        n_decode, alternate * (alt_streams ? n_streams : 1),
        alt_depths ? " and a multiple of it" : "");
  if (alt_limit && alternate)
    g_error ("--alternate-limit %u: not with --alternate", alt_limit);
  if (alt_limit && n_decode % alt_limit)
    g_error ("--alternate-limit %u: --decode %u must be a multiple of it",
        alt_limit, n_decode);
  n_scfg = alt_streams ? 1 : n_streams;
  for (d = 0; d < n_depths; d++) {
    if (depths[d] > n_prefill)
      g_error ("--depth %u is deeper than the prefill (%u)", depths[d],
          n_prefill);
    if (depths[d] + n_decode >= n_ctx)
      g_error ("--ctx %u is too short to decode %u at depth %u without "
          "sliding", n_ctx, n_decode, depths[d]);
  }

  if (!path)
    path = tmp_path = npu_bench_generate_llama_1b ("bench-llm");

  model = npu_llm_model_new_from_file (path, flags, &error);
  if (!model)
    g_error ("%s", error->message);
  hp = npu_llm_model_get_hparams (model);
  wbytes = npu_llm_model_get_decode_bytes (model);
  /* Weights a token multiplies with: q and o (dim x heads hd), k and v
   * (dim x kv heads hd), three FFN matrices, the logits */
  matrix_weights = (gdouble) hp->n_layer * ((2.0 * hp->n_head + 2.0 *
          hp->n_head_kv) * hp->head_dim * hp->n_embd +
      3.0 * hp->n_embd * hp->n_ff) + (gdouble) hp->n_embd * hp->n_vocab;
  printf ("model: %s, %s, %u layers, dim %u, ff %u, heads %u/%u, vocab %u\n",
      path, hp->arch == NPU_LLM_ARCH_LLAMA ? "llama" : "qwen2", hp->n_layer,
      hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv, hp->n_vocab);
  printf ("weights read per decoded token: %.1f MiB (converted or "
      "repacked at load: %.1f MiB)\nkernels: %s, weights %s\n",
      wbytes / 1048576.0,
      npu_llm_model_get_converted_bytes (model) / 1048576.0,
      npu_matmul_get_isa (), flags ? "repacked" : "in place");

  buf = huge_buffer (READ_BYTES);
  prompt = g_new (gint32, n_prefill);
  for (i = 0; i < n_prefill; i++)
    prompt[i] = (gint32) ((i * 7919u + 13u) % hp->n_vocab);

  thread_counts[0] = 1;
  thread_counts[1] = npu_cpu_count ();
  n_counts = thread_counts[1] > 1 ? 2 : 1;
  if (only_threads) {
    thread_counts[0] = only_threads;
    n_counts = 1;
  }

  for (ti = 0; ti < n_counts; ti++) {
    NpuDevice *device = npu_device_new_cpu (thread_counts[ti]);
    NpuQueue *queue = npu_queue_new (device, "bench-llm");
    NpuLlmContextParams cp;
    /* one context a configuration, one a depth when depths alternate */
    NpuLlmContext *ctxs[MAX_CFG][MAX_DEPTHS];
    guint n_cctx = alt_depths ? n_depths : 1, c;
    Range pat[N_STREAM_COUNTS][2], pf[MAX_CFG], dec[MAX_CFG][MAX_DEPTHS];
    Range ttft[MAX_CFG];
    Range limit = { 0, G_MAXDOUBLE };
    Beside beside[MAX_CFG][MAX_DEPTHS];
    /* --alternate: a decode run's lanes; depths alternating take one run
     * a configuration ([k][0]), stream counts alone one a depth */
    Lane lanes[MAX_CFG][MAX_DEPTHS][MAX_LANES];
    /* --alternate-limit: each decode run's turns, and the pattern of the
     * limit's turns (the best of the first probe) */
    LimitTurns turns[MAX_CFG][MAX_DEPTHS];
    guint lim_s = 0, lim_p = 0;
    guint ns = alt_streams ? n_streams : 1;
    guint n_lanes = (alt_depths ? n_depths : 1) * ns, l;
    guint best_s = 0, best_p = 0, pass, s, pre;
    Job job;

    n_cfg = n_kv * n_prec * n_scfg;
    for (s = 0; s < N_STREAM_COUNTS; s++)
      for (pre = 0; pre < 2; pre++)
        pat[s][pre] = (Range) {
        0, G_MAXDOUBLE};
    for (k = 0; k < n_cfg; k++) {
      npu_llm_context_params_init (&cp);
      cp.n_ctx = n_ctx;
      cp.n_batch = MIN (n_prefill, 256u);
      cp.kv_type = kv_types[k / (n_prec * n_scfg)];
      cp.precision = precs[k / n_scfg % n_prec];
      for (c = 0; c < n_cctx; c++) {
        ctxs[k][c] = npu_llm_context_new (model, &cp, &error);
        if (!ctxs[k][c])
          g_error ("%s", error->message);
      }
      pf[k] = (Range) {
      0, G_MAXDOUBLE};
      ttft[k] = (Range) {
      0, G_MAXDOUBLE};
      for (d = 0; d < n_depths; d++) {
        dec[k][d] = (Range) {
        0, G_MAXDOUBLE};
        beside[k][d].share = g_new0 (double, passes);
        beside[k][d].limit = g_new0 (double, passes);
        turns[k][d].decode_s = g_array_new (FALSE, FALSE, sizeof (double));
        turns[k][d].limit_s = g_array_new (FALSE, FALSE, sizeof (double));
        turns[k][d].pass_end = g_array_new (FALSE, FALSE, sizeof (guint));
      }
      for (d = 0; alternate && d < (alt_depths ? 1 : n_depths); d++)
        for (l = 0; l < n_lanes; l++) {
          Lane *lane = &lanes[k][d][l];
          /* depths alternating: lane l decodes at depth l / ns */
          guint ld = alt_depths ? l / ns : d;

          lane->ctx = ctxs[k][alt_depths ? ld : 0];
          lane->start = depths[ld];
          lane->streams = alt_streams ? streams[l % ns] : 0;
          lane->ms = g_array_new (FALSE, FALSE, sizeof (double));
          lane->pass_end = g_array_new (FALSE, FALSE, sizeof (guint));
          if (alt_depths && alt_streams)
            lane->label = g_strdup_printf ("@ %u, %u streams", depths[ld],
                lane->streams);
          else if (alt_depths)
            lane->label = g_strdup_printf ("@ %u", depths[ld]);
          else
            lane->label = g_strdup_printf ("%u streams", lane->streams);
        }

      /* warm-up: pages of the mapping, kernels' workspaces */
      memset (&job, 0, sizeof (job));
      job.kind = JOB_PREFILL;
      job.tokens = prompt;
      job.n = MIN (n_prefill, 64u);
      job.n_vocab = hp->n_vocab;
      for (c = 0; c < n_cctx; c++) {
        job.ctx = ctxs[k][c];
        time_job (queue, &job);
      }
    }

    for (pass = 0; pass < passes; pass++) {
      double t;

      for (k = 0; k < n_cfg; k++) {
        /* the limit now, after the prefill and before the first decode;
         * then again after each decode, which the next one shares */
        double before;
        guint n_pf = 0;

        if (!alt_streams && streams[k % n_streams])
          npu_matmul_set_gemv_streams (streams[k % n_streams]);
        /* the prefill on each context that decodes deeper than 0, or on
         * the last if none does; the first also times --reuse */
        for (c = 0; c < n_cctx; c++)
          if (n_cctx == 1 || depths[c] > 0 || (c == n_cctx - 1 && !n_pf))
            time_prefill (queue, &job, ctxs[k][c], n_prefill,
                n_pf++ ? 0 : reuse, &pf[k], &ttft[k]);

        before = probe_limit (queue, buf, pat);
        range_add (&limit, before);
        if (alt_limit && pass == 0 && k == 0)
          for (s = 0; s < N_STREAM_COUNTS; s++)
            for (pre = 0; pre < 2; pre++)
              if (pat[s][pre].best > pat[lim_s][lim_p].best) {
                lim_s = s;
                lim_p = pre;
              }
        if (alt_depths) {
          double after;

          for (c = 0; c < n_cctx; c++)
            if (depths[c] == 0)
              npu_llm_context_reset (ctxs[k][c]);
            else if (!npu_llm_context_truncate (ctxs[k][c], depths[c]))
              g_error ("cannot go back to depth %u", depths[c]);
          job.kind = JOB_DECODE;
          job.n = n_decode * n_depths;
          job.from_token = prompt[0];
          job.lanes = lanes[k][0];
          job.n_lanes = n_lanes;
          job.alt_every = alternate;
          time_job (queue, &job);
          job.from_token = -1;
          job.n_lanes = 0;
          after = probe_limit (queue, buf, pat);
          range_add (&limit, after);
          /* each depth's tokens of this pass, over their own time */
          for (d = 0; d < n_depths; d++) {
            double ms = 0;
            guint n_tok = 0;

            for (l = d * ns; l < (d + 1) * ns; l++) {
              GArray *a = lanes[k][0][l].ms;
              guint from = pass ? g_array_index (lanes[k][0][l].pass_end,
                  guint, pass - 1) : 0;

              for (i = from; i < a->len; i++)
                ms += g_array_index (a, double, i);
              n_tok += a->len - from;
            }
            range_add (&dec[k][d], n_tok / ms * 1e3);
            beside[k][d].limit[pass] = MAX (before, after);
            beside[k][d].share[pass] = n_tok / ms * 1e3 *
                decode_bytes (ctxs[k][d], wbytes, n_ctx, depths[d],
                n_decode) / 1e9 / beside[k][d].limit[pass];
          }
          for (l = 0; l < n_lanes; l++)
            g_array_append_val (lanes[k][0][l].pass_end,
                lanes[k][0][l].ms->len);
          continue;
        }
        /* deepest first: truncating only ever goes back */
        for (d = n_depths; d-- > 0;) {
          double after;

          if (depths[d] == 0)
            npu_llm_context_reset (ctxs[k][0]);
          else if (!npu_llm_context_truncate (ctxs[k][0], depths[d]))
            g_error ("cannot go back to depth %u", depths[d]);
          job.kind = JOB_DECODE;
          job.ctx = ctxs[k][0];
          job.n = n_decode;
          job.from_token = prompt[0];
          if (alt_streams) {
            job.lanes = lanes[k][d];
            job.n_lanes = n_lanes;
            job.alt_every = alternate;
          }
          if (alt_limit) {
            LimitTurns *lt = &turns[k][d];
            guint n_parts;

            lt->decode_bytes = alt_limit * decode_bytes (ctxs[k][0], wbytes,
                n_ctx, depths[d], n_decode);
            n_parts = MAX (1, (guint) (lt->decode_bytes / PROBE_PART + 0.5));
            lt->limit_bytes = (double) n_parts *PROBE_PART;
            job.limit.data = buf;
            job.limit.size = READ_BYTES;
            job.limit.n_parts = n_parts;
            job.limit.n_streams = stream_counts[lim_s];
            job.limit.prefetch = lim_p;
            job.limit_every = alt_limit;
            job.turns = lt;
          }
          t = time_job (queue, &job);
          job.from_token = -1;
          job.n_lanes = 0;
          if (alt_limit) {
            LimitTurns *lt = &turns[k][d];
            guint from = pass ? g_array_index (lt->pass_end, guint,
                pass - 1) : 0;

            /* decode's own time: the limit's turns taken out */
            for (t = 0, i = from; i < lt->decode_s->len; i++)
              t += g_array_index (lt->decode_s, double, i);
            g_array_append_val (lt->pass_end, lt->decode_s->len);
            job.turns = NULL;
          }
          for (l = 0; alt_streams && l < n_lanes; l++)
            g_array_append_val (lanes[k][d][l].pass_end,
                lanes[k][d][l].ms->len);
          range_add (&dec[k][d], n_decode / t);
          after = probe_limit (queue, buf, pat);
          range_add (&limit, after);
          beside[k][d].limit[pass] = MAX (before, after);
          beside[k][d].share[pass] = n_decode / t *
              decode_bytes (ctxs[k][0], wbytes, n_ctx, depths[d], n_decode) /
              1e9 / beside[k][d].limit[pass];
          before = after;
        }
      }
    }
    for (s = 0; s < N_STREAM_COUNTS; s++)
      for (pre = 0; pre < 2; pre++)
        if (pat[s][pre].best > pat[best_s][best_p].best) {
          best_s = s;
          best_p = pre;
        }

    printf ("\n%u thread%s (best of %u, worst in brackets)\n",
        thread_counts[ti], thread_counts[ti] > 1 ? "s" : "", passes);
    /* best and worst of the probes: the memory's drift during the run */
    printf ("  read limit %7.2f GB/s (%.2f): %u stream%s a thread, %s "
        "(one plain stream: %.2f)\n", limit.best, limit.worst,
        stream_counts[best_s], stream_counts[best_s] > 1 ? "s" : "",
        best_p ? "prefetch" : "no prefetch", pat[0][0].best);
    printf ("  GB/s by streams a thread:");
    for (s = 0; s < N_STREAM_COUNTS; s++)
      printf (" %7u", stream_counts[s]);
    for (pre = 0; pre < 2; pre++) {
      printf ("\n    %-22s", pre ? "with prefetch" : "plain");
      for (s = 0; s < N_STREAM_COUNTS; s++)
        printf (" %7.2f", pat[s][pre].best);
    }
    printf ("\n");
    for (k = 0; k < n_cfg; k++) {
      NpuLlmStats st;
      double kv_token;

      npu_llm_context_get_stats (ctxs[k][0], &st);
      kv_token = (double) st.kv_bytes / n_ctx;
      printf ("  KV cache %s, precision %s", npu_kv_type_name (kv_types[k /
                  (n_prec * n_scfg)]), precs[k / n_scfg % n_prec] ?
          "accurate" : "fast");
      if (!alt_streams && streams[k % n_streams])
        printf (", GEMV streams %u", streams[k % n_streams]);
      else if (!alt_streams && npu_gemv_streams_get_chosen (thread_counts[ti]))
        printf (", GEMV streams %u (measured)",
            npu_gemv_streams_get_chosen (thread_counts[ti]));
      printf (": %.1f KiB a token, %.1f MiB for %u tokens\n",
          kv_token / 1024.0, st.kv_bytes / 1048576.0, n_ctx);
      printf ("    prefill %4u tok %8.2f tok/s (%.2f)  %.1f GFLOPS of "
          "matrices\n", n_prefill, pf[k].best, pf[k].worst,
          pf[k].best * 2.0 * matrix_weights / 1e9);
      if (reuse)
        printf ("    TTFT first answer %8.1f ms (%.1f), second answer %8.1f "
            "ms (%.1f): %u of %u prompt tokens reused\n",
            1e3 * n_prefill / pf[k].best, 1e3 * n_prefill / pf[k].worst,
            1e3 / ttft[k].best, 1e3 / ttft[k].worst, reuse, n_prefill);
      for (d = 0; d < n_depths; d++) {
        double bytes = decode_bytes (ctxs[k][0], wbytes, n_ctx, depths[d],
            n_decode);
        double roof = limit.best * 1e9 / bytes;

        printf ("    decode @ %4u    %8.2f tok/s (%.2f)  %.2f GB/s read, "
            "roofline %.2f tok/s: %.0f%%", depths[d], dec[k][d].best,
            dec[k][d].worst, dec[k][d].best * bytes / 1e9, roof,
            100.0 * dec[k][d].best / roof);
        if (d > 0 && depths[0] == 0)
          printf (", %+.1f%% of @ 0", 100.0 * (dec[k][d].best /
                  dec[k][0].best - 1));
        printf ("\n");
        print_beside (&beside[k][d], passes);
        if (alt_limit)
          print_limit_turns (&turns[k][d], alt_limit, passes,
              stream_counts[lim_s], lim_p);
        g_array_free (turns[k][d].decode_s, TRUE);
        g_array_free (turns[k][d].limit_s, TRUE);
        g_array_free (turns[k][d].pass_end, TRUE);
        if (alt_streams && !alt_depths)
          print_lanes (lanes[k][d], n_lanes, alternate, passes);
        g_free (beside[k][d].share);
        g_free (beside[k][d].limit);
      }
      if (alt_depths)
        print_lanes (lanes[k][0], n_lanes, alternate, passes);
      for (d = 0; alternate && d < (alt_depths ? 1 : n_depths); d++)
        for (l = 0; l < n_lanes; l++) {
          g_array_free (lanes[k][d][l].ms, TRUE);
          g_array_free (lanes[k][d][l].pass_end, TRUE);
          g_free (lanes[k][d][l].label);
        }
      for (c = 0; c < n_cctx; c++)
        npu_llm_context_free (ctxs[k][c]);
    }

    npu_queue_free (queue);
    npu_device_unref (device);
  }

  free (buf);
  g_free (prompt);
  npu_llm_model_free (model);
  if (tmp_path) {
    g_unlink (tmp_path);
    g_free (tmp_path);
  }
  return 0;
}
