/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: llama.cpp's time to the first token of a camera
 * loop's answers, the reference side of bench-llm --reuse (bench.sh)
 *
 *   llama-ttft -m MODEL.gguf [-p N (256)] [--reuse P (32)] [-t THREADS]
 *       [-r REPEAT (3)] [--ctx N (4096)] [--kv f16|f32|q8_0]
 *
 * A prompt of N tokens, ids (i * 7919 + 13) mod n_vocab as bench-llm's,
 * stands for one answer's prompt: P tokens of system prompt and template
 * head that every answer shares, then the image's rows and the question
 * (token ids in place of the image's embedding rows: the same work per
 * row).  The first answer evaluates all N in one llama_decode() and takes
 * the argmax; each later one keeps the first P cache cells, as
 * llama-server's prompt cache does (llama_memory_seq_rm() from P on), and
 * evaluates the other N - P.  Prints "ttft: first X ms, second Y ms (P of
 * N reused)", best of REPEAT each, and llama.cpp's own line about the
 * size of its KV cache (n_ctx cells; F16 by default, llama.cpp's default;
 * q8_0 turns flash attention on, which a quantised V cache needs).
 *
 * Built against a llama.cpp build by build-llamacpp.sh; not part of the
 * meson build.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

static double
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* llama.cpp's line about the KV cache's size goes to stdout */
static void
log_cb (enum ggml_log_level level, const char *text, void *user_data)
{
  (void) user_data;
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)
    fputs (text, stderr);
  else if (strstr (text, "llama_kv_cache") && strstr (text, "size ="))
    fputs (text, stdout);
}

static int
argmax (const float *l, int n)
{
  int i, b = 0;

  for (i = 1; i < n; i++)
    if (l[i] > l[b])
      b = i;
  return b;
}

/* Evaluates prompt[from, n) at positions from.., the logits of the last;
 * returns the milliseconds to its argmax, or -1 */
static double
answer (struct llama_context *ctx, const int32_t * prompt, int from, int n,
    int nv)
{
  struct llama_batch batch = llama_batch_init (n - from, 0, 1);
  double t0 = now_ms (), t;
  int i;

  batch.n_tokens = n - from;
  for (i = from; i < n; i++) {
    batch.token[i - from] = prompt[i];
    batch.pos[i - from] = i;
    batch.n_seq_id[i - from] = 1;
    batch.seq_id[i - from][0] = 0;
    batch.logits[i - from] = i == n - 1;
  }
  if (llama_decode (ctx, batch) != 0) {
    llama_batch_free (batch);
    return -1;
  }
  (void) argmax (llama_get_logits_ith (ctx, -1), nv);
  t = now_ms () - t0;
  llama_batch_free (batch);
  return t;
}

int
main (int argc, char **argv)
{
  const char *model_path = NULL, *kv = "f16";
  int n_prompt = 256, reuse = 32, n_threads = 1, repeat = 3, n_ctx = 4096;
  struct llama_model_params mp;
  struct llama_context_params cp;
  struct llama_model *model;
  struct llama_context *ctx;
  int32_t *prompt;
  double first = 1e30, second = 1e30, t;
  int i, r, nv;

  for (i = 1; i + 1 < argc; i += 2) {
    const char *a = argv[i], *v = argv[i + 1];

    if (!strcmp (a, "-m"))
      model_path = v;
    else if (!strcmp (a, "-p"))
      n_prompt = atoi (v);
    else if (!strcmp (a, "--reuse"))
      reuse = atoi (v);
    else if (!strcmp (a, "-t"))
      n_threads = atoi (v);
    else if (!strcmp (a, "-r"))
      repeat = atoi (v);
    else if (!strcmp (a, "--ctx"))
      n_ctx = atoi (v);
    else if (!strcmp (a, "--kv"))
      kv = v;
    else
      break;
  }
  if (i != argc || !model_path || n_prompt < 2 || reuse < 1
      || reuse >= n_prompt || n_threads < 1 || repeat < 1
      || n_ctx <= n_prompt || (strcmp (kv, "f16") && strcmp (kv, "f32")
          && strcmp (kv, "q8_0"))) {
    fprintf (stderr, "usage: %s -m MODEL.gguf [-p N] [--reuse P < N] "
        "[-t T] [-r R] [--ctx N > prompt] [--kv f16|f32|q8_0]\n", argv[0]);
    return 2;
  }

  llama_log_set (log_cb, NULL);
  llama_backend_init ();
  mp = llama_model_default_params ();
  mp.n_gpu_layers = 0;
  model = llama_model_load_from_file (model_path, mp);
  if (!model) {
    fprintf (stderr, "llama-ttft: cannot load '%s'\n", model_path);
    return 1;
  }
  nv = llama_vocab_n_tokens (llama_model_get_vocab (model));
  prompt = malloc (n_prompt * sizeof (int32_t));
  for (i = 0; i < n_prompt; i++)
    prompt[i] = (int32_t) ((i * 7919u + 13u) % (unsigned) nv);

  cp = llama_context_default_params ();
  cp.n_ctx = n_ctx;
  cp.n_batch = cp.n_ubatch = n_prompt;
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = n_threads;
  cp.type_k = cp.type_v = !strcmp (kv, "f32") ? GGML_TYPE_F32 :
      !strcmp (kv, "q8_0") ? GGML_TYPE_Q8_0 : GGML_TYPE_F16;
  cp.flash_attn_type = !strcmp (kv, "q8_0") ? LLAMA_FLASH_ATTN_TYPE_ENABLED :
      LLAMA_FLASH_ATTN_TYPE_AUTO;
  cp.no_perf = 1;
  ctx = llama_init_from_model (model, cp);
  if (!ctx) {
    fprintf (stderr, "llama-ttft: cannot create a context\n");
    return 1;
  }

  for (r = 0; r < repeat; r++) {
    llama_memory_clear (llama_get_memory (ctx), 1);
    t = answer (ctx, prompt, 0, n_prompt, nv);
    if (t < 0)
      goto failed;
    first = t < first ? t : first;
    if (!llama_memory_seq_rm (llama_get_memory (ctx), 0, reuse, -1)) {
      fprintf (stderr, "llama-ttft: cannot drop the cache after %d\n", reuse);
      return 1;
    }
    t = answer (ctx, prompt, reuse, n_prompt, nv);
    if (t < 0)
      goto failed;
    second = t < second ? t : second;
  }
  printf ("ttft: first %.1f ms, second %.1f ms (%d of %d reused), %d "
      "thread%s, KV %s, best of %d\n", first, second, reuse, n_prompt,
      n_threads, n_threads > 1 ? "s" : "", kv, repeat);
  free (prompt);
  llama_free (ctx);
  llama_model_free (model);
  return 0;

failed:
  fprintf (stderr, "llama-ttft: llama_decode failed\n");
  return 1;
}
