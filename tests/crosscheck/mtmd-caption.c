/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: one image and a prompt through llama.cpp's
 * multimodal library, greedy, as llama-mtmd-cli answers it:
 *
 *   mtmd-caption -m TEXT.gguf --mmproj MMPROJ.gguf --image FILE \
 *       -p "What do you see?" [-n MAX_TOKENS]
 *
 * The user turn is mtmd's media marker then the prompt, formatted with the
 * text model's own chat template (llama_chat_apply_template, no system
 * message, the assistant's turn opened), cut by mtmd_tokenize() around the
 * image (mtmd's preprocessing, tiles and image tokens), evaluated with
 * mtmd_helper_eval_chunks(), then the most likely token is taken until an
 * end-of-generation token.  The answer goes to stdout, written before the
 * program ends (llama-mtmd-cli prints through an asynchronous log that can
 * lose the last piece at exit, which tests/crosscheck/trained.sh cannot
 * tell from a different answer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"
#include "mtmd.h"
#include "mtmd-helper.h"

static void
log_cb (enum ggml_log_level level, const char *text, void *user_data)
{
  (void) user_data;
  if (level == GGML_LOG_LEVEL_ERROR)
    fputs (text, stderr);
}

static int
usage (const char *argv0)
{
  fprintf (stderr, "usage: %s -m TEXT.gguf --mmproj MMPROJ.gguf --image "
      "FILE -p PROMPT [-n MAX_TOKENS]\n", argv0);
  return 2;
}

int
main (int argc, char **argv)
{
  const char *model_path = NULL, *mmproj_path = NULL, *image_path = NULL;
  const char *prompt = NULL;
  int max_tokens = 32, i, ret = 1;
  struct llama_model *model = NULL;
  struct llama_context *lctx = NULL;
  const struct llama_vocab *vocab;
  mtmd_context *ctx = NULL;
  struct mtmd_helper_bitmap_wrapper bw = { NULL, NULL };
  mtmd_input_chunks *chunks = NULL;
  struct mtmd_context_params mcp;
  struct llama_context_params cp;
  struct llama_chat_message msg;
  mtmd_input_text text;
  const mtmd_bitmap *bitmaps[1];
  char *user = NULL, formatted[4096];
  llama_pos n_past = 0;
  int32_t n;

  for (i = 1; i + 1 < argc; i += 2) {
    if (!strcmp (argv[i], "-m"))
      model_path = argv[i + 1];
    else if (!strcmp (argv[i], "--mmproj"))
      mmproj_path = argv[i + 1];
    else if (!strcmp (argv[i], "--image"))
      image_path = argv[i + 1];
    else if (!strcmp (argv[i], "-p"))
      prompt = argv[i + 1];
    else if (!strcmp (argv[i], "-n"))
      max_tokens = atoi (argv[i + 1]);
    else
      return usage (argv[0]);
  }
  if (i != argc || !model_path || !mmproj_path || !image_path || !prompt
      || max_tokens <= 0)
    return usage (argv[0]);

  llama_log_set (log_cb, NULL);
  mtmd_helper_log_set (log_cb, NULL);
  llama_backend_init ();
  model = llama_model_load_from_file (model_path,
      llama_model_default_params ());
  if (!model) {
    fprintf (stderr, "mtmd-caption: cannot load %s\n", model_path);
    goto out;
  }
  vocab = llama_model_get_vocab (model);
  cp = llama_context_default_params ();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  lctx = llama_init_from_model (model, cp);
  mcp = mtmd_context_params_default ();
  mcp.print_timings = false;
  mcp.warmup = false;
  ctx = mtmd_init_from_file (mmproj_path, model, mcp);
  if (!lctx || !ctx) {
    fprintf (stderr, "mtmd-caption: cannot set up the contexts\n");
    goto out;
  }
  bw = mtmd_helper_bitmap_init_from_file (ctx, image_path, false,
      mtmd_helper_init_opt_default ());
  if (!bw.bitmap) {
    fprintf (stderr, "mtmd-caption: cannot read %s\n", image_path);
    goto out;
  }

  user = malloc (strlen (mtmd_default_marker ()) + strlen (prompt) + 1);
  strcpy (user, mtmd_default_marker ());
  strcat (user, prompt);
  msg.role = "user";
  msg.content = user;
  n = llama_chat_apply_template (llama_model_chat_template (model, NULL),
      &msg, 1, true, formatted, sizeof (formatted));
  if (n < 0 || n >= (int32_t) sizeof (formatted)) {
    fprintf (stderr, "mtmd-caption: the chat template failed\n");
    goto out;
  }
  formatted[n] = '\0';
  text.text = formatted;
  text.text_len = n;
  text.add_special = true;
  text.parse_special = true;
  bitmaps[0] = bw.bitmap;
  chunks = mtmd_input_chunks_init ();
  if (mtmd_tokenize (ctx, chunks, &text, bitmaps, 1) != 0
      || mtmd_helper_eval_chunks (ctx, lctx, chunks, 0, 0, cp.n_batch, true,
          &n_past) != 0) {
    fprintf (stderr, "mtmd-caption: the prompt failed\n");
    goto out;
  }

  for (i = 0; i < max_tokens; i++) {
    const float *logits = llama_get_logits_ith (lctx, -1);
    int32_t n_vocab = llama_vocab_n_tokens (vocab), j;
    llama_token best = 0;
    char piece[256];
    struct llama_batch batch;

    for (j = 1; j < n_vocab; j++)
      if (logits[j] > logits[best])
        best = j;
    if (llama_vocab_is_eog (vocab, best))
      break;
    n = llama_token_to_piece (vocab, best, piece, sizeof (piece), 0, false);
    if (n > 0)
      fwrite (piece, 1, n, stdout);
    batch = llama_batch_get_one (&best, 1);
    if (llama_decode (lctx, batch) != 0) {
      fprintf (stderr, "mtmd-caption: decoding failed\n");
      goto out;
    }
  }
  printf ("\n");
  ret = 0;

out:
  free (user);
  if (chunks)
    mtmd_input_chunks_free (chunks);
  if (bw.bitmap)
    mtmd_bitmap_free (bw.bitmap);
  if (ctx)
    mtmd_free (ctx);
  if (lctx)
    llama_free (lctx);
  if (model)
    llama_model_free (model);
  llama_backend_free ();
  return ret;
}
