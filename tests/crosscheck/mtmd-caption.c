/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: one image and a prompt through llama.cpp's
 * multimodal library, greedy, as llama-mtmd-cli answers it:
 *
 *   mtmd-caption -m TEXT.gguf --mmproj MMPROJ.gguf --image FILE \
 *       -p "What do you see?" [-n MAX_TOKENS]
 *
 * The user turn is mtmd's media marker then the prompt, formatted with the
 * text model's own chat template (mtmd-common.c), cut by mtmd_tokenize()
 * around the image (mtmd's preprocessing, tiles and image tokens),
 * evaluated with mtmd_helper_eval_chunks(), then the most likely token is
 * taken until an end-of-generation token.  The answer goes to stdout,
 * written before the program ends (llama-mtmd-cli prints through an
 * asynchronous log that can lose the last piece at exit, which
 * tests/crosscheck/trained.sh cannot tell from a different answer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtmd-common.h"
#include "mtmd-helper.h"

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
  int max_tokens = 32, i, n, ret = 1;
  MtmdCheck c;
  struct mtmd_helper_bitmap_wrapper bw = { NULL, NULL };
  mtmd_input_chunks *chunks = NULL;
  mtmd_input_text text;
  const mtmd_bitmap *bitmaps[1];
  char formatted[4096];
  llama_pos n_past = 0;

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

  if (mtmd_check_open (&c, "mtmd-caption", model_path, mmproj_path) != 0)
    goto out;
  bw = mtmd_helper_bitmap_init_from_file (c.mctx, image_path, false,
      mtmd_helper_init_opt_default ());
  if (!bw.bitmap) {
    fprintf (stderr, "mtmd-caption: cannot read %s\n", image_path);
    goto out;
  }
  n = mtmd_check_format (&c, prompt, formatted, sizeof (formatted));
  if (n < 0)
    goto out;
  text.text = formatted;
  text.text_len = n;
  text.add_special = true;
  text.parse_special = true;
  bitmaps[0] = bw.bitmap;
  chunks = mtmd_input_chunks_init ();
  if (mtmd_tokenize (c.mctx, chunks, &text, bitmaps, 1) != 0
      || mtmd_helper_eval_chunks (c.mctx, c.lctx, chunks, 0, 0, c.n_batch,
          true, &n_past) != 0) {
    fprintf (stderr, "mtmd-caption: the prompt failed\n");
    goto out;
  }
  if (mtmd_check_greedy (&c, max_tokens) == 0)
    ret = 0;

out:
  if (chunks)
    mtmd_input_chunks_free (chunks);
  if (bw.bitmap)
    mtmd_bitmap_free (bw.bitmap);
  mtmd_check_close (&c);
  return ret;
}
