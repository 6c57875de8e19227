/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: greedy decoding with the transformer core, token by token, for
 * comparison with another runtime (llama.cpp) on the same GGUF file
 *
 *   npu-greedy MODEL.gguf [-n N] [--tokens 1,2,3 | --prompt TEXT]
 *       [--threads T] [--top K] [--logits OUT] [--reference REF]
 *       [--tol REL] [--in-place] [--tokenize TEXT] [--tokenize-file FILE]
 *
 * The prompt is evaluated in one batch, then N greedy steps: step 0 is the
 * prediction after the prompt, step i after the i-th generated token.
 * Each step prints the argmax (lowest id on ties) and the K largest
 * logits.  --prompt tokenizes TEXT with the core tokenizer (BOS as the
 * vocabulary asks, control-token text parsed), --tokens takes ids as they
 * are (bypassing tokenizers); the default prompt is 1,2,3,...,8 offset
 * into the vocabulary so that it holds no control token.
 *
 * --logits writes the steps to a file (format below); llama-greedy.c, the
 * llama.cpp side, writes the same format.  --reference reads such a file
 * from the other runtime and, after the free run, evaluates the other
 * side's sequence (its prompt and its greedy tokens: teacher forcing, so
 * both see the same context at every step) and compares the logits:
 * max |ours - ref|, that over the range of the reference's logits, the
 * argmax of both, and the top-1 / top-2 margin of both where they differ.
 * With --tol the last line is "PASS" or "FAIL": FAIL if a step's relative
 * difference exceeds REL, or the argmaxes differ where the reference's
 * margin exceeds twice that step's max |diff| (no near-tie explains it).
 * Exit status 1 on FAIL.
 *
 * Logits file, little-endian: "NPLG", u32 n_vocab, u32 n_prompt,
 * u32 n_steps, i32 prompt[n_prompt], i32 argmax[n_steps] (the token each
 * step chose, which is the one fed to the next step), then
 * f32 logits[n_steps][n_vocab].
 *
 * --tokenize prints the ids of TEXT (as --prompt makes them) and exits;
 * --tokenize-file does so for each of the NUL-separated strings of FILE,
 * one "tokens:" line each (tokenizers.sh).
 *
 * NPU_CPU_ISA=scalar gives exact F32 products (no int8 activations).
 * Compute core only: GLib, no GStreamer types.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <core/models/npullm.h>
#include <core/cpu/npumatmul.h>
#include <core/text/nputokenizer.h>
#include "tests/npucompare.h"

#define LOGITS_MAGIC "NPLG"

typedef struct
{
  guint n_vocab;
  guint n_prompt;
  guint n_steps;
  gint32 *prompt;
  gint32 *ids;
  float *logits;                /* n_steps x n_vocab */
} Run;

typedef struct
{
  NpuLlmContext *ctx;
  const gint32 *prompt;
  gsize n_prompt;
  const gint32 *force;          /* the tokens to feed, or NULL: greedy */
  guint n_steps;
  Run *run;
} Job;

static gchar *opt_tokens = NULL, *opt_prompt = NULL, *opt_logits = NULL;
static gchar *opt_reference = NULL, *opt_tokenize = NULL;
static gchar *opt_tokenize_file = NULL, *opt_kv = NULL;
static gint opt_n = 16, opt_threads = 1, opt_top = 5;
static gdouble opt_tol = -1.0;
static gboolean opt_in_place = FALSE, opt_accurate = FALSE;

static GOptionEntry entries[] = {
  {"n-predict", 'n', 0, G_OPTION_ARG_INT, &opt_n, "Greedy steps (16)", "N"},
  {"tokens", 0, 0, G_OPTION_ARG_STRING, &opt_tokens,
      "Prompt token ids, comma-separated", "IDS"},
  /* FILENAME, not STRING: GLib would convert a STRING from the locale's
   * charset, and fail on UTF-8 text under the C locale */
  {"prompt", 'p', 0, G_OPTION_ARG_FILENAME, &opt_prompt,
      "Prompt text (core tokenizer)", "TEXT"},
  {"threads", 't', 0, G_OPTION_ARG_INT, &opt_threads, "Threads (1)", "T"},
  {"top", 0, 0, G_OPTION_ARG_INT, &opt_top, "Logits printed per step (5)",
      "K"},
  {"logits", 0, 0, G_OPTION_ARG_FILENAME, &opt_logits,
      "Write every step's logits to FILE", "FILE"},
  {"reference", 0, 0, G_OPTION_ARG_FILENAME, &opt_reference,
      "Compare with another runtime's logits file", "FILE"},
  {"tol", 0, 0, G_OPTION_ARG_DOUBLE, &opt_tol,
      "Relative logit tolerance for PASS/FAIL (with --reference)", "REL"},
  {"tokenize", 0, 0, G_OPTION_ARG_FILENAME, &opt_tokenize,
      "Print the core tokenizer's ids for TEXT (as --prompt) and exit",
      "TEXT"},
  {"tokenize-file", 0, 0, G_OPTION_ARG_FILENAME, &opt_tokenize_file,
      "--tokenize for each NUL-separated string of FILE", "FILE"},
  {"in-place", 0, 0, G_OPTION_ARG_NONE, &opt_in_place,
      "Use MXFP4 weights in place (default: repacked)", NULL},
  {"kv", 0, 0, G_OPTION_ARG_STRING, &opt_kv,
      "KV cache type: f32 (default, as llama-greedy's), f16, q8_0", "TYPE"},
  {"accurate", 0, 0, G_OPTION_ARG_NONE, &opt_accurate,
      "Accurate precision: activations of 16 bits or more (default: fast)",
      NULL},
  {NULL}
};

static guint
argmax (const float *l, guint n)
{
  guint i, b = 0;

  for (i = 1; i < n; i++)
    if (l[i] > l[b])
      b = i;
  return b;
}

/* the largest logit other than @top's */
static float
second (const float *l, guint n, guint top)
{
  float s = -INFINITY;
  guint i;

  for (i = 0; i < n; i++)
    if (i != top && l[i] > s)
      s = l[i];
  return s;
}

static void
print_top (const float *l, guint n, guint k)
{
  gboolean *used = g_new0 (gboolean, n);
  guint j, i;

  for (j = 0; j < k && j < n; j++) {
    guint b = G_MAXUINT;

    for (i = 0; i < n; i++)
      if (!used[i] && (b == G_MAXUINT || l[i] > l[b]))
        b = i;
    used[b] = TRUE;
    printf ("%s%u:%.4f", j ? " " : "", b, l[b]);
  }
  g_free (used);
}

static void
run_clear (Run * run)
{
  g_free (run->prompt);
  g_free (run->ids);
  g_free (run->logits);
  memset (run, 0, sizeof (*run));
}

static gboolean
job_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Job *job = user_data;
  Run *run = job->run;
  guint i, nv = run->n_vocab;

  npu_llm_context_reset (job->ctx);
  if (!npu_llm_eval_tokens (job->ctx, task, job->prompt, job->n_prompt,
          error))
    return FALSE;
  for (i = 0; i < job->n_steps; i++) {
    const float *l = npu_llm_get_logits (job->ctx);
    gint32 next;

    memcpy (run->logits + (gsize) i * nv, l, nv * sizeof (float));
    run->ids[i] = argmax (l, nv);
    next = job->force ? job->force[i] : run->ids[i];
    if (i + 1 < job->n_steps
        && !npu_llm_eval_tokens (job->ctx, task, &next, 1, error))
      return FALSE;
  }
  return TRUE;
}

static gboolean
run_steps (NpuQueue * queue, NpuLlmContext * ctx, guint n_vocab,
    const gint32 * prompt, gsize n_prompt, const gint32 * force,
    guint n_steps, Run * run, GError ** error)
{
  Job job = { ctx, prompt, n_prompt, force, n_steps, run };
  NpuFence *fence;
  gboolean ok;

  run->n_vocab = n_vocab;
  run->n_prompt = n_prompt;
  run->n_steps = n_steps;
  run->prompt = g_memdup2 (prompt, n_prompt * sizeof (gint32));
  run->ids = g_new0 (gint32, n_steps);
  run->logits = g_new0 (float, (gsize) n_steps * n_vocab);
  fence = npu_queue_submit (queue, job_task, &job, NULL, NULL, 0);
  ok = npu_fence_wait (fence, -1, error);
  npu_fence_unref (fence);
  return ok;
}

static gboolean
write_u32 (FILE * f, guint32 v)
{
  guint8 b[4] = { v, v >> 8, v >> 16, v >> 24 };

  return fwrite (b, 1, 4, f) == 4;
}

static gboolean
write_logits (const gchar * path, const Run * run, GError ** error)
{
  FILE *f = fopen (path, "wb");
  gboolean ok;
  guint i;

  if (!f) {
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
        "cannot create '%s'", path);
    return FALSE;
  }
  ok = fwrite (LOGITS_MAGIC, 1, 4, f) == 4 && write_u32 (f, run->n_vocab)
      && write_u32 (f, run->n_prompt) && write_u32 (f, run->n_steps);
  for (i = 0; ok && i < run->n_prompt; i++)
    ok = write_u32 (f, run->prompt[i]);
  for (i = 0; ok && i < run->n_steps; i++)
    ok = write_u32 (f, run->ids[i]);
  /* floats as stored: the machine is little-endian (x86-64, aarch64) */
  ok = ok && fwrite (run->logits, sizeof (float),
      (gsize) run->n_steps * run->n_vocab, f)
      == (gsize) run->n_steps * run->n_vocab;
  if (fclose (f) != 0)
    ok = FALSE;
  if (!ok)
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_IO, "cannot write '%s'",
        path);
  return ok;
}

static guint32
read_u32 (const guint8 * p)
{
  return p[0] | (p[1] << 8) | (p[2] << 16) | ((guint32) p[3] << 24);
}

static gboolean
read_logits (const gchar * path, Run * run, GError ** error)
{
  gchar *data;
  gsize len, need;
  const guint8 *p;
  guint i;

  if (!g_file_get_contents (path, &data, &len, error))
    return FALSE;
  p = (const guint8 *) data;
  if (len < 16 || memcmp (p, LOGITS_MAGIC, 4) != 0)
    goto bad;
  run->n_vocab = read_u32 (p + 4);
  run->n_prompt = read_u32 (p + 8);
  run->n_steps = read_u32 (p + 12);
  need = 16 + 4 * ((gsize) run->n_prompt + run->n_steps)
      + 4 * (gsize) run->n_steps * run->n_vocab;
  if (run->n_vocab == 0 || run->n_prompt == 0 || len != need)
    goto bad;
  p += 16;
  run->prompt = g_new (gint32, run->n_prompt);
  for (i = 0; i < run->n_prompt; i++, p += 4)
    run->prompt[i] = (gint32) read_u32 (p);
  run->ids = g_new (gint32, run->n_steps);
  for (i = 0; i < run->n_steps; i++, p += 4)
    run->ids[i] = (gint32) read_u32 (p);
  run->logits = g_new (float, (gsize) run->n_steps * run->n_vocab);
  memcpy (run->logits, p, 4 * (gsize) run->n_steps * run->n_vocab);
  g_free (data);
  return TRUE;

bad:
  g_free (data);
  g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
      "'%s' is not a logits file of the expected size", path);
  return FALSE;
}

static gint32 *
parse_ids (const gchar * s, gsize * n, GError ** error)
{
  gchar **parts = g_strsplit_set (s, ", ", -1);
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  guint i;

  for (i = 0; parts[i]; i++) {
    guint64 v;
    gint32 id;

    if (parts[i][0] == '\0')
      continue;
    if (!g_ascii_string_to_unsigned (parts[i], 10, 0, G_MAXINT32, &v, error)) {
      g_strfreev (parts);
      g_array_free (ids, TRUE);
      return NULL;
    }
    id = (gint32) v;
    g_array_append_val (ids, id);
  }
  g_strfreev (parts);
  *n = ids->len;
  return (gint32 *) g_array_free (ids, FALSE);
}

static gint32 *
tokenize (const gchar * path, const gchar * text, gsize * n, GError ** error)
{
  NpuGguf *gguf = npu_gguf_open (path, error);
  NpuTokenizer *tok;
  gint32 *ids;

  if (!gguf)
    return NULL;
  tok = npu_tokenizer_new_from_gguf (gguf, error);
  npu_gguf_free (gguf);
  if (!tok)
    return NULL;
  ids = npu_tokenizer_encode (tok, text, -1, TRUE, TRUE, n);
  npu_tokenizer_free (tok);
  return ids;
}

static void
print_ids (const gchar * label, const gint32 * ids, gsize n)
{
  gsize i;

  printf ("%s:", label);
  for (i = 0; i < n; i++)
    printf (" %d", ids[i]);
  printf ("\n");
}

/* --tokenize-file: the NUL-separated strings of @path, one line each */
static gboolean
tokenize_file (const gchar * model, const gchar * path, GError ** error)
{
  NpuGguf *gguf;
  NpuTokenizer *tok;
  gchar *buf, *p, *end;
  gsize size, n;

  if (!g_file_get_contents (path, &buf, &size, error))
    return FALSE;
  gguf = npu_gguf_open (model, error);
  tok = gguf ? npu_tokenizer_new_from_gguf (gguf, error) : NULL;
  if (gguf)
    npu_gguf_free (gguf);
  if (!tok) {
    g_free (buf);
    return FALSE;
  }
  end = buf + size;
  for (p = buf; p < end; p += strlen (p) + 1) {
    gint32 *ids = npu_tokenizer_encode (tok, p, -1, TRUE, TRUE, &n);

    print_ids ("tokens", ids, n);
    g_free (ids);
  }
  npu_tokenizer_free (tok);
  g_free (buf);
  return TRUE;
}

/* Teacher-forced comparison of @ours (run on @ref's sequence) with @ref */
static gboolean
compare (const Run * ours, const Run * ref, gdouble tol)
{
  guint nv = ref->n_vocab, i, j, agree = 0, unexplained = 0;
  gdouble worst_abs = 0, worst_rel = 0;

  printf ("forced: step  ref-id  our-id  max|diff|   rel      ref-margin "
      "our-margin\n");
  for (i = 0; i < ref->n_steps; i++) {
    const float *a = ours->logits + (gsize) i * nv;
    const float *b = ref->logits + (gsize) i * nv;
    float lo = b[0], hi = b[0];
    gdouble d = 0, rel;
    guint ta = argmax (a, nv), tb = argmax (b, nv);
    gdouble ma = a[ta] - second (a, nv, ta);
    gdouble mb = b[tb] - second (b, nv, tb);

    for (j = 0; j < nv; j++) {
      d = npu_err_max (d, fabs ((gdouble) a[j] - b[j]));
      lo = MIN (lo, b[j]);
      hi = MAX (hi, b[j]);
    }
    rel = hi > lo ? d / (hi - lo) : d;
    worst_abs = npu_err_max (worst_abs, d);
    worst_rel = npu_err_max (worst_rel, rel);
    if (ta == tb)
      agree++;
    else if (mb > 2 * d)
      unexplained++;
    printf ("forced: %4u  %6u  %6u  %.3e  %.3e  %.4f     %.4f%s\n", i, tb,
        ta, d, rel, mb, ma, ta == tb ? "" : (mb > 2 * d ? "  DIFFERENT" :
            "  near tie"));
  }
  printf ("summary: argmax agree %u/%u, max|diff| %.3e, max rel %.3e, "
      "unexplained disagreements %u\n", agree, ref->n_steps, worst_abs,
      worst_rel, unexplained);
  if (tol < 0)
    return TRUE;
  if (npu_within (worst_rel, tol) && unexplained == 0) {
    printf ("PASS (rel %.3e <= %.1e)\n", worst_rel, tol);
    return TRUE;
  }
  printf ("FAIL (rel %.3e, tolerance %.1e, %u unexplained)\n", worst_rel,
      tol, unexplained);
  return FALSE;
}

int
main (int argc, char **argv)
{
  GOptionContext *octx;
  GError *error = NULL;
  NpuLlmModel *model = NULL;
  NpuLlmContext *ctx = NULL;
  NpuLlmContextParams cp;
  NpuDevice *device = NULL;
  NpuQueue *queue = NULL;
  const NpuLlmHParams *hp;
  gint32 *prompt = NULL;
  gsize n_prompt = 0, i;
  Run run = { 0 }, ref = { 0 }, forced = { 0 };
  guint n_steps, nv, match_prefix = 0, match_total = 0;
  int ret = 1;

  octx = g_option_context_new ("MODEL.gguf - greedy decoding with the core");
  g_option_context_add_main_entries (octx, entries, NULL);
  if (!g_option_context_parse (octx, &argc, &argv, &error) || argc != 2) {
    g_printerr ("%s\n", error ? error->message : "give one MODEL.gguf");
    g_clear_error (&error);
    g_option_context_free (octx);
    return 2;
  }
  g_option_context_free (octx);
  if (opt_n < 1 || opt_threads < 1 || opt_top < 0 || (opt_tokens
          && opt_prompt)) {
    g_printerr ("-n and --threads must be positive, --top >= 0, and give at "
        "most one of --tokens and --prompt\n");
    return 2;
  }
  if (opt_tokenize_file) {
    if (tokenize_file (argv[1], opt_tokenize_file, &error))
      ret = 0;
    goto out;
  }
  if (opt_tokenize) {
    prompt = tokenize (argv[1], opt_tokenize, &n_prompt, &error);
    if (prompt) {
      print_ids ("tokens", prompt, n_prompt);
      ret = 0;
    }
    goto out;
  }
  if (opt_reference && !read_logits (opt_reference, &ref, &error))
    goto out;
  n_steps = opt_reference ? ref.n_steps : (guint) opt_n;

  model = npu_llm_model_new_from_file (argv[1], opt_in_place ?
      NPU_LLM_LOAD_IN_PLACE : NPU_LLM_LOAD_REPACK, &error);
  if (!model)
    goto out;
  hp = npu_llm_model_get_hparams (model);
  nv = hp->n_vocab;
  printf ("model: %s (%s, %u layers, dim %u, vocab %u), kernels %s, %d "
      "thread%s\n", argv[1], hp->arch == NPU_LLM_ARCH_LLAMA ? "llama" :
      hp->arch == NPU_LLM_ARCH_QWEN2 ? "qwen2" :
      hp->arch == NPU_LLM_ARCH_QWEN3 ? "qwen3" : "gpt-oss", hp->n_layer,
      hp->n_embd, nv, npu_matmul_get_isa (),
      opt_threads, opt_threads > 1 ? "s" : "");

  if (opt_prompt) {
    prompt = tokenize (argv[1], opt_prompt, &n_prompt, &error);
    if (!prompt)
      goto out;
  } else if (opt_tokens) {
    prompt = parse_ids (opt_tokens, &n_prompt, &error);
    if (!prompt)
      goto out;
  } else if (opt_reference) {
    prompt = g_memdup2 (ref.prompt, ref.n_prompt * sizeof (gint32));
    n_prompt = ref.n_prompt;
  } else {
    n_prompt = 8;
    prompt = g_new (gint32, n_prompt);
    for (i = 0; i < n_prompt; i++)
      prompt[i] = (gint32) (nv / 3 + 7 * i);
  }
  if (n_prompt == 0) {
    g_set_error (&error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "empty prompt");
    goto out;
  }
  for (i = 0; i < n_prompt; i++)
    if (prompt[i] < 0 || (guint) prompt[i] >= nv) {
      g_set_error (&error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
          "token id %d is out of the vocabulary (%u)", prompt[i], nv);
      goto out;
    }
  if (opt_reference && (ref.n_vocab != nv || ref.n_prompt != n_prompt
          || memcmp (ref.prompt, prompt, n_prompt * sizeof (gint32)) != 0)) {
    g_set_error (&error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "the reference has another vocabulary size or prompt");
    goto out;
  }
  print_ids ("prompt", prompt, n_prompt);

  device = npu_device_new_cpu (opt_threads);
  queue = npu_queue_new (device, "npu-greedy");
  npu_llm_context_params_init (&cp);
  cp.n_ctx = MAX (n_prompt + n_steps + 1, 16u);
  cp.n_batch = MAX (n_prompt, 1u);
  cp.streaming = FALSE;
  if (opt_accurate)
    cp.precision = NPU_MATMUL_PRECISION_ACCURATE;
  /* llama-greedy's cache is F32 unless told otherwise: compare like with
   * like */
  cp.kv_type = NPU_KV_F32;
  if (opt_kv && !npu_kv_type_from_name (opt_kv, &cp.kv_type)) {
    g_printerr ("unknown --kv '%s' (f32, f16, q8_0)\n", opt_kv);
    return 1;
  }
  ctx = npu_llm_context_new (model, &cp, &error);
  if (!ctx)
    goto out;

  if (!run_steps (queue, ctx, nv, prompt, n_prompt, NULL, n_steps, &run,
          &error))
    goto out;
  for (i = 0; i < n_steps; i++) {
    printf ("step %3" G_GSIZE_FORMAT ": %6d  top ", i, run.ids[i]);
    print_top (run.logits + i * nv, nv, opt_top);
    printf ("\n");
  }
  print_ids ("greedy", run.ids, n_steps);
  if (opt_logits && !write_logits (opt_logits, &run, &error))
    goto out;
  ret = 0;

  if (opt_reference) {
    for (i = 0; i < n_steps; i++)
      if (run.ids[i] == ref.ids[i]) {
        match_total++;
        if (match_prefix == i)
          match_prefix++;
      }
    print_ids ("ref-greedy", ref.ids, n_steps);
    printf ("free run: %u/%u steps equal, first %u in a row\n", match_total,
        n_steps, match_prefix);
    if (!run_steps (queue, ctx, nv, prompt, n_prompt, ref.ids, n_steps,
            &forced, &error)) {
      ret = 1;
      goto out;
    }
    if (!compare (&forced, &ref, opt_tol))
      ret = 1;
  }

out:
  if (error) {
    g_printerr ("npu-greedy: %s\n", error->message);
    g_error_free (error);
    ret = 1;
  }
  run_clear (&run);
  run_clear (&ref);
  run_clear (&forced);
  g_free (prompt);
  if (ctx)
    npu_llm_context_free (ctx);
  if (queue)
    npu_queue_free (queue);
  if (device)
    npu_device_unref (device);
  if (model)
    npu_llm_model_free (model);
  return ret;
}
