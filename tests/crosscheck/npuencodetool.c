/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: what npu-vit-encode and npu-audio-encode share; see
 * npuencodetool.h */
#include "npuencodetool.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

gboolean
npu_encode_tool_parse (NpuEncodeToolOptions * opts, int *argc, char ***argv,
    const gchar * summary, const gchar * input_name,
    const gchar * input_help, const GOptionEntry * extra)
{
  const GOptionEntry common[] = {
    {input_name, 0, 0, G_OPTION_ARG_FILENAME, &opts->input, input_help,
        "FILE"},
    {"output", 'o', 0, G_OPTION_ARG_FILENAME, &opts->output,
        "Write the embeddings (n_tokens x out_dim F32) to FILE", "FILE"},
    {"threads", 't', 0, G_OPTION_ARG_INT, &opts->threads, "Threads (1)", "T"},
    {"repeat", 0, 0, G_OPTION_ARG_INT, &opts->repeat,
        "Encodes; the best time is printed (1)", "N"},
    {NULL}
  };
  GOptionContext *octx = g_option_context_new (summary);
  GError *error = NULL;
  gboolean ok;

  memset (opts, 0, sizeof (*opts));
  opts->threads = opts->repeat = 1;
  g_option_context_add_main_entries (octx, common, NULL);
  if (extra)
    g_option_context_add_main_entries (octx, extra, NULL);
  ok = g_option_context_parse (octx, argc, argv, &error) && *argc == 2
      && opts->input;
  g_option_context_free (octx);
  if (!ok) {
    if (error)
      g_printerr ("%s\n", error->message);
    else
      g_printerr ("give one MODEL.gguf and --%s\n", input_name);
    g_clear_error (&error);
    return FALSE;
  }
  if (opts->threads < 1 || opts->repeat < 1) {
    g_printerr ("--threads and --repeat must be positive\n");
    return FALSE;
  }
  opts->model = (*argv)[1];
  return TRUE;
}

void
npu_encode_tool_options_clear (NpuEncodeToolOptions * opts)
{
  g_free (opts->input);
  g_free (opts->output);
  memset (opts, 0, sizeof (*opts));
}

gboolean
npu_encode_tool_run (const NpuEncodeToolOptions * opts, const gchar * name,
    NpuTaskFunc func, gpointer job, const gint64 * job_us, gint64 * best_us,
    GError ** error)
{
  NpuDevice *device = npu_device_new_cpu (opts->threads);
  NpuQueue *queue = npu_queue_new (device, name);
  gboolean ok = TRUE;
  gint i;

  *best_us = -1;
  for (i = 0; ok && i < opts->repeat; i++) {
    NpuFence *fence = npu_queue_submit (queue, func, job, NULL, NULL, 0);

    ok = npu_fence_wait (fence, -1, error);
    npu_fence_unref (fence);
    if (ok && (*best_us < 0 || *job_us < *best_us))
      *best_us = *job_us;
  }
  npu_queue_free (queue);
  npu_device_unref (device);
  return ok;
}

gboolean
npu_encode_tool_report (const NpuEncodeToolOptions * opts, const float *out,
    guint n_tokens, guint out_dim, gint64 best_us, GError ** error)
{
  gsize n_out = (gsize) n_tokens * out_dim;
  FILE *f;
  gboolean ok;

  printf ("tokens: %u\n", n_tokens);
  printf ("embd: %u\n", out_dim);
  printf ("encode: %.1f ms (best of %d, %d thread%s)\n", best_us / 1000.0,
      opts->repeat, opts->threads, opts->threads > 1 ? "s" : "");
  if (!opts->output)
    return TRUE;
  f = fopen (opts->output, "wb");
  ok = f && fwrite (out, sizeof (float), n_out, f) == n_out;
  if (f && fclose (f) != 0)
    ok = FALSE;
  if (!ok)
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
        "cannot write '%s'", opts->output);
  return ok;
}
