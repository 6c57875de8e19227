/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: prefill and decode throughput of the transformer core
 *
 * Decoding a token reads every weight matrix once, so its ceiling is the
 * memory bandwidth: roofline tokens/s = read bandwidth / weight bytes per
 * token.  The bandwidth is measured in the same run, on the same threads,
 * by a plain streaming read of a 1 GiB buffer (vector loads summed), and
 * the decode figure is printed beside it with the ratio.  Prefill runs the
 * same matrices through the GEMM path and is bound by arithmetic.
 *
 * Everything runs inside tasks of a CPU device, on 1 thread and on every
 * online CPU; each figure is the best of several passes, the worst beside
 * it (the spread shows how noisy the machine was).
 *
 * Usage: bench-llm [model.gguf] [--passes N (3)] [--decode N (32)]
 *          [--prefill N (64)] [--ctx N (1024)] [--threads N] [--in-place]
 *          [--kv-type f16,f32,q8_0 (f16)] [--precision fast,accurate (fast)]
 * --kv-type and --precision take one value or several, comma-separated:
 * each pass then runs prefill and decode with each combination in turn
 * (alternating, so a noisy machine hurts them alike) and prints them side
 * by side.
 * --threads N runs on N threads only (default: 1, then every online CPU).
 * --in-place reads MXFP4 weights from the file mapping in ggml's layout
 * instead of repacking them at load (NPU_LLM_LOAD_REPACK, the default).
 * Without a model a 1B llama (generator preset "1b", MXFP4) is written to
 * a temporary file first and removed at the end.
 * NPU_CPU_ISA=scalar|avx2|avx512|neon forces a kernel path.
 */
#include "core/npullm.h"
#include "core/npumatmul.h"
#include "tests/tools/npumodelgen.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define READ_BYTES (G_GUINT64_CONSTANT (1) << 30)
#define SLICE 65536

static volatile guint64 read_sink;

typedef struct
{
  const guint8 *data;
  gsize size;
} ReadJob;

#if defined(__x86_64__)
__attribute__ ((target ("avx2")))
static void
read_slice_avx2 (gsize start, gsize end, guint worker, gpointer user_data)
{
  ReadJob *job = user_data;
  const guint8 *p = job->data + start * SLICE;
  const guint8 *e = job->data + MIN (end * SLICE, job->size);
  __m256i a0 = _mm256_setzero_si256 (), a1 = a0, a2 = a0, a3 = a0;

  for (; p + 128 <= e; p += 128) {
    a0 = _mm256_add_epi64 (a0, _mm256_load_si256 ((const __m256i *) p));
    a1 = _mm256_add_epi64 (a1, _mm256_load_si256 ((const __m256i *) (p +
                32)));
    a2 = _mm256_add_epi64 (a2, _mm256_load_si256 ((const __m256i *) (p +
                64)));
    a3 = _mm256_add_epi64 (a3, _mm256_load_si256 ((const __m256i *) (p +
                96)));
  }
  a0 = _mm256_add_epi64 (_mm256_add_epi64 (a0, a1), _mm256_add_epi64 (a2,
          a3));
  read_sink += _mm256_extract_epi64 (a0, 0) + _mm256_extract_epi64 (a0, 3);
}
#endif

static void
read_slice_c (gsize start, gsize end, guint worker, gpointer user_data)
{
  ReadJob *job = user_data;
  const guint64 *p = (const guint64 *) (job->data + start * SLICE);
  const guint64 *e = (const guint64 *) (job->data + MIN (end * SLICE,
          job->size));
  guint64 s0 = 0, s1 = 0, s2 = 0, s3 = 0;

  for (; p + 4 <= e; p += 4) {
    s0 += p[0];
    s1 += p[1];
    s2 += p[2];
    s3 += p[3];
  }
  read_sink += s0 + s1 + s2 + s3;
}

typedef enum
{
  JOB_READ,
  JOB_PREFILL,
  JOB_DECODE,
} JobKind;

typedef struct
{
  JobKind kind;
  ReadJob read;
  NpuParallelFunc read_func;
  NpuLlmContext *ctx;
  const gint32 *tokens;
  gsize n;
  guint n_vocab;
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

static gboolean
job_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Job *job = user_data;
  gsize i;

  switch (job->kind) {
    case JOB_READ:
      npu_task_parallel_for (task, (job->read.size + SLICE - 1) / SLICE, 1,
          job->read_func, &job->read);
      return TRUE;
    case JOB_PREFILL:
      return npu_llm_eval_tokens (job->ctx, task, job->tokens, job->n, error);
    default:
      /* greedy steps, as a stream would run them */
      for (i = 0; i < job->n; i++) {
        gint32 t = argmax (npu_llm_get_logits (job->ctx), job->n_vocab);

        if (!npu_llm_eval_tokens (job->ctx, task, &t, 1, error))
          return FALSE;
      }
      return TRUE;
  }
}

static double
time_job (NpuQueue * queue, Job * job)
{
  gint64 t0 = g_get_monotonic_time ();
  NpuFence *fence = npu_queue_submit (queue, job_task, job, NULL, NULL, 0);
  GError *error = NULL;

  if (!npu_fence_wait (fence, -1, &error))
    g_error ("benchmark task failed: %s", error->message);
  npu_fence_unref (fence);
  return (g_get_monotonic_time () - t0) / 1e6;
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
  NpuParallelFunc read_func = read_slice_c;
  NpuLlmLoadFlags flags = NPU_LLM_LOAD_REPACK;
  NpuKvType kv_types[3] = { NPU_KV_F16 };
  NpuMatmulPrecision precs[2] = { NPU_MATMUL_PRECISION_FAST };
  guint n_kv = 1, n_prec = 1, n_cfg, k;

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
    else if (strcmp (argv[i], "--kv-type") == 0 && i + 1 < (guint) argc) {
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
          g_error ("--precision: '%s' is not fast or accurate",
              names[n_prec]);
      }
      g_strfreev (names);
      if (n_prec == 0)
        g_error ("--precision needs a value");
    } else if (strcmp (argv[i], "--in-place") == 0) {
      flags = NPU_LLM_LOAD_IN_PLACE;
      continue;
    } else if (argv[i][0] != '-') {
      path = argv[i];
      continue;
    } else {
      g_printerr ("usage: %s [model.gguf] [--passes N] [--decode N] "
          "[--prefill N (>= 2)] [--ctx N (>= 16)] [--threads N] "
          "[--in-place] [--kv-type f16,f32,q8_0] [--precision fast,accurate]"
          "\n", argv[0]);
      return 2;
    }
    i++;
  }
#if defined(__x86_64__)
  if (__builtin_cpu_supports ("avx2"))
    read_func = read_slice_avx2;
#endif

  if (!path) {
    NpuTextModelParams p;
    NpuModelGenStats st;
    gint64 t0 = g_get_monotonic_time ();
    gint fd = g_file_open_tmp ("bench-llm-XXXXXX.gguf", &tmp_path, &error);

    if (fd < 0)
      g_error ("%s", error->message);
    close (fd);
    if (!npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_LLAMA, "1b", &error))
      g_error ("%s", error->message);
    p.seed = 1;
    if (!npu_model_gen_write_text (&p, tmp_path, &st, &error))
      g_error ("%s", error->message);
    printf ("generated llama 1b mxfp4: %.0f M parameters, %.1f MiB, %.1f s\n",
        st.n_params / 1e6, st.file_size / 1048576.0,
        (g_get_monotonic_time () - t0) / 1e6);
    path = tmp_path;
  }

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

  buf = g_aligned_alloc (READ_BYTES, 1, 64);
  for (i = 0; i < READ_BYTES / 8; i++)
    ((guint64 *) buf)[i] = i;
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
    NpuLlmContext *ctxs[6];
    double bw_best = 0, bw_worst = G_MAXDOUBLE;
    double pf_best[6], pf_worst[6], dec_best[6], dec_worst[6], roof;
    guint pass;
    Job job;

    n_cfg = n_kv * n_prec;
    for (k = 0; k < n_cfg; k++) {
      npu_llm_context_params_init (&cp);
      cp.n_ctx = n_ctx;
      cp.n_batch = MIN (n_prefill, 256u);
      cp.kv_type = kv_types[k / n_prec];
      cp.precision = precs[k % n_prec];
      ctxs[k] = npu_llm_context_new (model, &cp, &error);
      if (!ctxs[k])
        g_error ("%s", error->message);
      pf_best[k] = dec_best[k] = 0;
      pf_worst[k] = dec_worst[k] = G_MAXDOUBLE;

      /* warm-up: pages of the mapping, kernels' workspaces */
      memset (&job, 0, sizeof (job));
      job.kind = JOB_PREFILL;
      job.ctx = ctxs[k];
      job.tokens = prompt;
      job.n = n_prefill;
      job.n_vocab = hp->n_vocab;
      time_job (queue, &job);
    }

    for (pass = 0; pass < passes; pass++) {
      double t, v;

      job.kind = JOB_READ;
      job.read.data = buf;
      job.read.size = READ_BYTES;
      job.read_func = read_func;
      t = time_job (queue, &job);
      v = READ_BYTES / t / 1e9;
      bw_best = MAX (bw_best, v);
      bw_worst = MIN (bw_worst, v);

      for (k = 0; k < n_cfg; k++) {
        job.ctx = ctxs[k];
        npu_llm_context_reset (ctxs[k]);
        job.kind = JOB_PREFILL;
        job.n = n_prefill;
        t = time_job (queue, &job);
        v = n_prefill / t;
        pf_best[k] = MAX (pf_best[k], v);
        pf_worst[k] = MIN (pf_worst[k], v);

        job.kind = JOB_DECODE;
        job.n = n_decode;
        t = time_job (queue, &job);
        v = n_decode / t;
        dec_best[k] = MAX (dec_best[k], v);
        dec_worst[k] = MIN (dec_worst[k], v);
      }
    }
    roof = bw_best * 1e9 / wbytes;
    printf ("\n%u thread%s (best of %u, worst in brackets)\n",
        thread_counts[ti], thread_counts[ti] > 1 ? "s" : "", passes);
    printf ("  read bandwidth   %7.2f GB/s  (%.2f)\n", bw_best, bw_worst);
    for (k = 0; k < n_cfg; k++) {
      NpuLlmStats st;

      npu_llm_context_get_stats (ctxs[k], &st);
      printf ("  KV cache %s, precision %s: %.1f KiB a token, %.1f MiB for "
          "%u tokens\n", npu_kv_type_name (kv_types[k / n_prec]),
          precs[k % n_prec] ? "accurate" : "fast",
          st.kv_bytes / 1024.0 / n_ctx, st.kv_bytes / 1048576.0, n_ctx);
      printf ("  prefill %4u tok %7.2f tok/s (%.2f)  %.1f GFLOPS of "
          "matrices\n", n_prefill, pf_best[k], pf_worst[k],
          pf_best[k] * 2.0 * matrix_weights / 1e9);
      printf ("  decode  %4u tok %7.2f tok/s (%.2f)  = %.2f GB/s of "
          "weights\n", n_decode, dec_best[k], dec_worst[k],
          dec_best[k] * wbytes / 1e9);
      printf ("  roofline         %7.2f tok/s  decode / roofline = %.0f%%\n",
          roof, 100.0 * dec_best[k] / roof);
      npu_llm_context_free (ctxs[k]);
    }

    npu_queue_free (queue);
    npu_device_unref (device);
  }

  g_aligned_free (buf);
  g_free (prompt);
  npu_llm_model_free (model);
  if (tmp_path) {
    g_unlink (tmp_path);
    g_free (tmp_path);
  }
  return 0;
}
