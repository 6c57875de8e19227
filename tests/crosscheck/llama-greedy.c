/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: greedy decoding with llama.cpp (llama.h), the
 * reference side of npu-greedy.c
 *
 *   llama-greedy -m MODEL.gguf [-n N] [--tokens 1,2,3 | --prompt TEXT]
 *       [-t THREADS] [--top K] [--logits OUT] [--kv f32|f16]
 *       [--flash-attn] [--tokenize TEXT] [--tokenize-file FILE]
 *
 * Same steps, output lines and logits file as npu-greedy (see there): the
 * prompt in one batch (logits of its last token only), then N greedy
 * steps, one token per llama_decode().  By default the KV cache is F32 and
 * flash attention is off, so that the attention runs in F32 as ours does
 * (llama.cpp's defaults are an F16 cache and flash attention "auto").
 * --tokenize prints llama.cpp's token ids for TEXT (add_special and
 * parse_special on, as npu-greedy's --prompt) and exits; --tokenize-file
 * does so for each of the NUL-separated strings of FILE, one "tokens:" line
 * each (tokenizers.sh).
 *
 * Built against a llama.cpp build by run.sh; not part of the meson build.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

#define LOGITS_MAGIC "NPLG"

static int
argmax (const float *l, int n)
{
  int i, b = 0;

  for (i = 1; i < n; i++)
    if (l[i] > l[b])
      b = i;
  return b;
}

static void
print_top (const float *l, int n, int k)
{
  char *used = calloc (n, 1);
  int j, i;

  for (j = 0; j < k && j < n; j++) {
    int b = -1;

    for (i = 0; i < n; i++)
      if (!used[i] && (b < 0 || l[i] > l[b]))
        b = i;
    used[b] = 1;
    printf ("%s%d:%.4f", j ? " " : "", b, l[b]);
  }
  free (used);
}

static void
print_ids (const char *label, const int32_t * ids, int n)
{
  int i;

  printf ("%s:", label);
  for (i = 0; i < n; i++)
    printf (" %d", ids[i]);
  printf ("\n");
}

static int
write_u32 (FILE * f, uint32_t v)
{
  unsigned char b[4] = { v, v >> 8, v >> 16, v >> 24 };

  return fwrite (b, 1, 4, f) == 4;
}

static int32_t *
parse_ids (const char *s, int *n)
{
  int32_t *ids = malloc ((strlen (s) / 2 + 2) * sizeof (int32_t));
  const char *p = s;

  *n = 0;
  while (*p) {
    char *end;
    long v;

    if (*p == ',' || *p == ' ') {
      p++;
      continue;
    }
    errno = 0;
    v = strtol (p, &end, 10);
    if (end == p || errno || v < 0 || v > INT32_MAX) {
      free (ids);
      return NULL;
    }
    ids[(*n)++] = (int32_t) v;
    p = end;
  }
  return ids;
}

static void
log_cb (enum ggml_log_level level, const char *text, void *user_data)
{
  (void) user_data;
  if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)
    fputs (text, stderr);
}

static int
usage (const char *argv0)
{
  fprintf (stderr, "usage: %s -m MODEL.gguf [-n N] [--tokens IDS | --prompt "
      "TEXT] [-t T] [--top K] [--logits FILE] [--kv f32|f16] [--flash-attn] "
      "[--tokenize TEXT] [--tokenize-file FILE]\n", argv0);
  return 2;
}

static int32_t *
tokenize (const struct llama_vocab *vocab, const char *text, int *n)
{
  int cap = (int) strlen (text) + 8;
  int32_t *ids = malloc (cap * sizeof (int32_t));

  *n = llama_tokenize (vocab, text, (int32_t) strlen (text), ids, cap, 1, 1);
  if (*n < 0) {
    free (ids);
    return NULL;
  }
  return ids;
}

/* --tokenize-file: the NUL-separated strings of @path, one line each */
static int
tokenize_file (const struct llama_vocab *vocab, const char *path)
{
  FILE *f = fopen (path, "rb");
  char *buf = NULL, *p, *end;
  long size;
  int32_t *ids;
  int n;

  if (!f || fseek (f, 0, SEEK_END) != 0 || (size = ftell (f)) < 0
      || fseek (f, 0, SEEK_SET) != 0 || !(buf = malloc (size + 1))
      || fread (buf, 1, size, f) != (size_t) size) {
    fprintf (stderr, "llama-greedy: cannot read '%s'\n", path);
    if (f)
      fclose (f);
    free (buf);
    return 1;
  }
  fclose (f);
  buf[size] = 0;
  end = buf + size;
  for (p = buf; p < end; p += strlen (p) + 1) {
    ids = tokenize (vocab, p, &n);
    if (!ids) {
      printf ("tokens: ERROR\n");
      continue;
    }
    print_ids ("tokens", ids, n);
    free (ids);
  }
  free (buf);
  return 0;
}

int
main (int argc, char **argv)
{
  const char *model_path = NULL, *tokens = NULL, *prompt_text = NULL;
  const char *logits_path = NULL, *tokenize_text = NULL;
  const char *tokenize_path = NULL;
  int n_steps = 16, n_threads = 1, top = 5, flash = 0, kv_f16 = 0;
  struct llama_model_params mp;
  struct llama_context_params cp;
  struct llama_model *model;
  struct llama_context *ctx;
  const struct llama_vocab *vocab;
  struct llama_batch batch;
  int32_t *prompt = NULL, *ids;
  float *logits;
  int n_prompt = 0, nv, i;
  FILE *f;

  for (i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

    if (strcmp (a, "--flash-attn") == 0) {
      flash = 1;
      continue;
    }
    if (!v)
      return usage (argv[0]);
    if (strcmp (a, "-m") == 0)
      model_path = v;
    else if (strcmp (a, "-n") == 0)
      n_steps = atoi (v);
    else if (strcmp (a, "-t") == 0)
      n_threads = atoi (v);
    else if (strcmp (a, "--top") == 0)
      top = atoi (v);
    else if (strcmp (a, "--tokens") == 0)
      tokens = v;
    else if (strcmp (a, "--prompt") == 0 || strcmp (a, "-p") == 0)
      prompt_text = v;
    else if (strcmp (a, "--logits") == 0)
      logits_path = v;
    else if (strcmp (a, "--tokenize") == 0)
      tokenize_text = v;
    else if (strcmp (a, "--tokenize-file") == 0)
      tokenize_path = v;
    else if (strcmp (a, "--kv") == 0 && (strcmp (v, "f32") == 0
            || strcmp (v, "f16") == 0))
      kv_f16 = strcmp (v, "f16") == 0;
    else
      return usage (argv[0]);
    i++;
  }
  if (!model_path || n_steps < 1 || n_threads < 1 || top < 0
      || (tokens && prompt_text))
    return usage (argv[0]);

  llama_log_set (log_cb, NULL);
  llama_backend_init ();
  mp = llama_model_default_params ();
  mp.n_gpu_layers = 0;
  model = llama_model_load_from_file (model_path, mp);
  if (!model) {
    fprintf (stderr, "llama-greedy: cannot load '%s'\n", model_path);
    return 1;
  }
  vocab = llama_model_get_vocab (model);
  nv = llama_vocab_n_tokens (vocab);

  if (tokenize_path) {
    i = tokenize_file (vocab, tokenize_path);
    llama_model_free (model);
    return i;
  }
  if (tokenize_text) {
    prompt = tokenize (vocab, tokenize_text, &n_prompt);
    if (!prompt)
      return 1;
    print_ids ("tokens", prompt, n_prompt);
    free (prompt);
    llama_model_free (model);
    return 0;
  }
  if (prompt_text)
    prompt = tokenize (vocab, prompt_text, &n_prompt);
  else if (tokens)
    prompt = parse_ids (tokens, &n_prompt);
  else {
    /* npu-greedy's default */
    n_prompt = 8;
    prompt = malloc (n_prompt * sizeof (int32_t));
    for (i = 0; i < n_prompt; i++)
      prompt[i] = nv / 3 + 7 * i;
  }
  if (!prompt || n_prompt == 0) {
    fprintf (stderr, "llama-greedy: bad or empty prompt\n");
    return 1;
  }
  for (i = 0; i < n_prompt; i++)
    if (prompt[i] >= nv) {
      fprintf (stderr, "llama-greedy: token %d is out of the vocabulary\n",
          prompt[i]);
      return 1;
    }

  cp = llama_context_default_params ();
  cp.n_ctx = n_prompt + n_steps + 16;
  cp.n_batch = cp.n_ubatch = n_prompt > 1 ? n_prompt : 1;
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = n_threads;
  cp.type_k = cp.type_v = kv_f16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
  cp.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED :
      LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = 1;
  ctx = llama_init_from_model (model, cp);
  if (!ctx) {
    fprintf (stderr, "llama-greedy: cannot create a context\n");
    return 1;
  }
  printf ("model: %s (llama.cpp, vocab %d), KV %s, flash attention %s, %d "
      "thread%s\n", model_path, nv, kv_f16 ? "f16" : "f32",
      flash ? "on" : "off", n_threads, n_threads > 1 ? "s" : "");
  print_ids ("prompt", prompt, n_prompt);

  ids = malloc (n_steps * sizeof (int32_t));
  logits = malloc ((size_t) n_steps * nv * sizeof (float));
  batch = llama_batch_init (n_prompt, 0, 1);
  batch.n_tokens = n_prompt;
  for (i = 0; i < n_prompt; i++) {
    batch.token[i] = prompt[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = i == n_prompt - 1;
  }
  for (i = 0; i < n_steps; i++) {
    const float *l;

    if (llama_decode (ctx, batch) != 0) {
      fprintf (stderr, "llama-greedy: llama_decode failed at step %d\n", i);
      return 1;
    }
    l = llama_get_logits_ith (ctx, -1);
    memcpy (logits + (size_t) i * nv, l, nv * sizeof (float));
    ids[i] = argmax (l, nv);
    printf ("step %3d: %6d  top ", i, ids[i]);
    print_top (l, nv, top);
    printf ("\n");
    batch.n_tokens = 1;
    batch.token[0] = ids[i];
    batch.pos[0] = n_prompt + i;
    batch.n_seq_id[0] = 1;
    batch.seq_id[0][0] = 0;
    batch.logits[0] = 1;
  }
  print_ids ("greedy", ids, n_steps);

  if (logits_path) {
    int ok;

    f = fopen (logits_path, "wb");
    if (!f) {
      fprintf (stderr, "llama-greedy: cannot create '%s'\n", logits_path);
      return 1;
    }
    ok = fwrite (LOGITS_MAGIC, 1, 4, f) == 4 && write_u32 (f, nv)
        && write_u32 (f, n_prompt) && write_u32 (f, n_steps);
    for (i = 0; ok && i < n_prompt; i++)
      ok = write_u32 (f, prompt[i]);
    for (i = 0; ok && i < n_steps; i++)
      ok = write_u32 (f, ids[i]);
    ok = ok && fwrite (logits, sizeof (float), (size_t) n_steps * nv, f)
        == (size_t) n_steps * nv;
    if (fclose (f) != 0 || !ok) {
      fprintf (stderr, "llama-greedy: cannot write '%s'\n", logits_path);
      return 1;
    }
  }

  llama_batch_free (batch);
  free (ids);
  free (logits);
  free (prompt);
  llama_free (ctx);
  llama_model_free (model);
  llama_backend_free ();
  return 0;
}
