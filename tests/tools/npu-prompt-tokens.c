/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the token ids npullm makes of a prompt about one image
 *
 *   npu-prompt-tokens text.gguf "What do you see?"
 *
 * prints two lines of ids: the tokens before the image's rows and the
 * tokens after them.  It does what npu_llm_session_answer() does with the
 * default properties (the file's chat template, no system prompt, media
 * in front of the user's text, BOS only on the first side), with the same
 * core calls, so tests/train/train.py trains on the prompts the element
 * will feed the model.  The tokens an image is wrapped in (Idefics3's,
 * when the vocabulary has them) are not printed: they belong to the image,
 * and train.py puts them around it as the session does.  The end-to-end
 * test (tests/check/test-trained-models.c) fails if the two ever part.
 */
#include <glib.h>
#include <stdio.h>

#include <core/text/npuchat.h>
#include <core/formats/npugguf.h>
#include <core/text/nputokenizer.h>

/* Marks where the media go in the user turn, so that the formatted prompt
 * can be split there after the template is applied: the same technique
 * and text as npullmsession.c's MEDIA_PLACEHOLDER, which is private there;
 * any text a prompt cannot contain would do. */
#define PLACEHOLDER "\x01media\x01"

int
main (int argc, char **argv)
{
  GError *error = NULL;
  NpuGguf *gguf;
  NpuTokenizer *tok = NULL;
  NpuChatTemplate *tmpl = NULL;
  gchar *user, *formatted, **parts;
  gboolean add_special;
  guint i;
  int ret = 1;

  if (argc != 3) {
    g_printerr ("usage: npu-prompt-tokens text.gguf PROMPT\n");
    return 2;
  }
  gguf = npu_gguf_open (argv[1], &error);
  if (!gguf)
    goto out;
  tok = npu_tokenizer_new_from_gguf (gguf, &error);
  if (!tok)
    goto out;
  tmpl = npu_chat_template_new_from_gguf (gguf, tok, &error);
  if (!tmpl)
    goto out;
  user = g_strconcat (PLACEHOLDER, argv[2], NULL);
  if (npu_chat_template_get_family (tmpl) == NPU_CHAT_NONE)
    formatted = g_strdup (user);
  else
    formatted = npu_chat_format (tmpl, NULL, user, TRUE);
  g_free (user);
  add_special = !npu_chat_template_has_bos (tmpl);
  parts = g_strsplit (formatted, PLACEHOLDER, 2);
  for (i = 0; i < 2; i++) {
    gsize n = 0, j;
    gint32 *ids = parts[i] ? npu_tokenizer_encode (tok, parts[i], -1,
        i == 0 && add_special, TRUE, &n) : NULL;

    for (j = 0; j < n; j++)
      g_print ("%s%d", j ? " " : "", ids[j]);
    g_print ("\n");
    g_free (ids);
  }
  g_strfreev (parts);
  g_free (formatted);
  ret = 0;

out:
  if (error)
    g_printerr ("npu-prompt-tokens: %s\n", error->message);
  g_clear_error (&error);
  if (tmpl)
    npu_chat_template_free (tmpl);
  if (tok)
    npu_tokenizer_free (tok);
  if (gguf)
    npu_gguf_free (gguf);
  return ret;
}
