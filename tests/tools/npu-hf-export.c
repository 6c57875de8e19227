/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: npu-hf-export MODEL.gguf DIR [--shards N] [--bf16-vectors]
 * [--merge-pairs]
 *
 * Writes a gpt-oss GGUF (npu-model-gen text --arch gpt-oss) out as
 * OpenAI's Hugging Face directory (npuhfexport.h), the layout npullm reads
 * with model=DIR (docs/gpt-oss.md). */
#include "npuhfexport.h"

int
main (int argc, char **argv)
{
  NpuHfExportParams p = { 2, FALSE, FALSE };
  gint shards = 2;
  GOptionEntry entries[] = {
    {"shards", 0, 0, G_OPTION_ARG_INT, &shards,
        "safetensors shards (1: model.safetensors, no index; default 2)", "N"},
    {"bf16-vectors", 0, 0, G_OPTION_ARG_NONE, &p.bf16_vectors,
        "norms, biases and sinks in BF16 (rounded), as OpenAI's files", NULL},
    {"merge-pairs", 0, 0, G_OPTION_ARG_NONE, &p.merges_as_pairs,
        "tokenizer.json merges as [\"a\", \"b\"] pairs", NULL},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("MODEL.gguf DIR");
  GError *error = NULL;

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || argc != 3 ||
      shards < 1) {
    g_printerr ("%s\n", error ? error->message :
        "usage: npu-hf-export MODEL.gguf DIR [--shards N]");
    return 2;
  }
  g_option_context_free (ctx);
  p.n_shards = shards;
  if (!npu_hf_export (argv[1], argv[2], &p, &error)) {
    g_printerr ("npu-hf-export: %s\n", error->message);
    g_error_free (error);
    return 1;
  }
  return 0;
}
