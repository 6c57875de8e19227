/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: what npu-vit-encode and npu-audio-encode share
 *
 * Both take MODEL.gguf, one input file, -o OUT.f32, --threads and
 * --repeat; both run their encode in a task on a CPU device as often as
 * --repeat says and keep the best time, then print the same "tokens:",
 * "embd:" and "encode:" lines as their llama.cpp counterparts and write
 * the embeddings.  Compute core only: GLib, no GStreamer types.
 */
#ifndef __NPU_ENCODE_TOOL_H__
#define __NPU_ENCODE_TOOL_H__

#include <glib.h>
#include <core/device/npubackend.h>

G_BEGIN_DECLS

typedef struct
{
  const gchar *model;           /* argv[1] */
  gchar *input;                 /* the file of the tool's input option */
  gchar *output;                /* -o; NULL: none */
  gint threads, repeat;
} NpuEncodeToolOptions;

/* Parses the command line: one MODEL.gguf, --@input_name (required, help
 * @input_help), -o, --threads, --repeat, and the tool's own @extra entries
 * (NULL-terminated, or NULL).  On a bad command line prints why and
 * returns FALSE: the tool exits with status 2. */
gboolean npu_encode_tool_parse (NpuEncodeToolOptions * opts, int *argc,
    char ***argv, const gchar * summary, const gchar * input_name,
    const gchar * input_help, const GOptionEntry * extra);
void npu_encode_tool_options_clear (NpuEncodeToolOptions * opts);

/* Runs @func (@job) in a task on a CPU device of opts->threads threads,
 * opts->repeat times; @func stores its own time in *@job_us, whose best is
 * returned in *@best_us. */
gboolean npu_encode_tool_run (const NpuEncodeToolOptions * opts,
    const gchar * name, NpuTaskFunc func, gpointer job, const gint64 * job_us,
    gint64 * best_us, GError ** error);

/* Prints "tokens: N", "embd: D" and "encode: T ms (best of R, H threads)",
 * then writes the @n_tokens x @out_dim embeddings to opts->output, if
 * given. */
gboolean npu_encode_tool_report (const NpuEncodeToolOptions * opts,
    const float *out, guint n_tokens, guint out_dim, gint64 best_us,
    GError ** error);

G_END_DECLS

#endif /* __NPU_ENCODE_TOOL_H__ */
