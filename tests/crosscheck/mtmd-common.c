/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: llama.cpp set-up and greedy answer shared by
 * mtmd-caption.c and mtmd-audio-caption.cpp (mtmd-common.h) */
#include "mtmd-common.h"

#include <stdio.h>
#include <string.h>

#include "mtmd-helper.h"

static void
log_cb (enum ggml_log_level level, const char *text, void *user_data)
{
  (void) user_data;
  if (level == GGML_LOG_LEVEL_ERROR)
    fputs (text, stderr);
}

int
mtmd_check_open (MtmdCheck * c, const char *prog, const char *model_path,
    const char *mmproj_path)
{
  struct llama_context_params cp;
  struct mtmd_context_params mcp;

  memset (c, 0, sizeof (*c));
  c->prog = prog;
  llama_log_set (log_cb, NULL);
  mtmd_helper_log_set (log_cb, NULL);
  mtmd_log_set (log_cb, NULL);
  llama_backend_init ();
  c->model = llama_model_load_from_file (model_path,
      llama_model_default_params ());
  if (!c->model) {
    fprintf (stderr, "%s: cannot load %s\n", prog, model_path);
    return -1;
  }
  c->vocab = llama_model_get_vocab (c->model);
  cp = llama_context_default_params ();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  c->n_batch = cp.n_batch;
  c->lctx = llama_init_from_model (c->model, cp);
  mcp = mtmd_context_params_default ();
  mcp.print_timings = false;
  mcp.warmup = false;
  c->mctx = mtmd_init_from_file (mmproj_path, c->model, mcp);
  if (!c->lctx || !c->mctx) {
    fprintf (stderr, "%s: cannot set up the contexts\n", prog);
    return -1;
  }
  return 0;
}

void
mtmd_check_close (MtmdCheck * c)
{
  if (c->mctx)
    mtmd_free (c->mctx);
  if (c->lctx)
    llama_free (c->lctx);
  if (c->model)
    llama_model_free (c->model);
  llama_backend_free ();
  memset (c, 0, sizeof (*c));
}

int
mtmd_check_format (MtmdCheck * c, const char *prompt, char *out, size_t size)
{
  const char *marker = mtmd_default_marker ();
  char user[4096];
  struct llama_chat_message msg;
  int32_t n;

  if (strlen (marker) + strlen (prompt) >= sizeof (user)) {
    fprintf (stderr, "%s: the prompt is too long\n", c->prog);
    return -1;
  }
  strcpy (user, marker);
  strcat (user, prompt);
  msg.role = "user";
  msg.content = user;
  n = llama_chat_apply_template (llama_model_chat_template (c->model, NULL),
      &msg, 1, true, out, (int32_t) size);
  if (n < 0 || (size_t) n >= size) {
    fprintf (stderr, "%s: the chat template failed\n", c->prog);
    return -1;
  }
  out[n] = '\0';
  return n;
}

int
mtmd_check_greedy (MtmdCheck * c, int max_tokens)
{
  int32_t n_vocab = llama_vocab_n_tokens (c->vocab);
  int i;

  for (i = 0; i < max_tokens; i++) {
    const float *logits = llama_get_logits_ith (c->lctx, -1);
    llama_token best = 0, j;
    char piece[256];
    int32_t n;

    for (j = 1; j < n_vocab; j++)
      if (logits[j] > logits[best])
        best = j;
    if (llama_vocab_is_eog (c->vocab, best))
      break;
    n = llama_token_to_piece (c->vocab, best, piece, sizeof (piece), 0,
        false);
    if (n > 0)
      fwrite (piece, 1, n, stdout);
    if (llama_decode (c->lctx, llama_batch_get_one (&best, 1)) != 0) {
      fprintf (stderr, "%s: decoding failed\n", c->prog);
      return -1;
    }
  }
  printf ("\n");
  return 0;
}
