/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: what npu-vit-encode and npu-audio-encode share
 *
 * Both take MODEL.gguf, one input file, -o OUT.f32, --threads and
 * --repeat; both run their encode in a task on a CPU device as often as
 * --repeat says and keep the best time, then print the same "tokens:",
 * "embd:" and "encode:" lines as their llama.cpp counterparts and write
 * the embeddings.  Both compare them with another runtime's (--reference,
 * --tol) and with the test suite's double-precision evaluation of the
 * same input and file (--f64), as npu_encode_tool_compare() says.
 * Compute core only: GLib, no GStreamer types.
 */
#ifndef __NPU_ENCODE_TOOL_H__
#define __NPU_ENCODE_TOOL_H__

#include <glib.h>
#include <core/device/npubackend.h>
#include "tests/reference/npurefvit.h"

G_BEGIN_DECLS typedef struct
{
  const gchar *model;           /* argv[1] */
  gchar *input;                 /* the file of the tool's input option */
  gchar *output;                /* -o; NULL: none */
  gint threads, repeat;
  gchar *reference;             /* --reference; NULL: none */
  gdouble tol;                  /* --tol; < 0: no verdict */
  gboolean f64;                 /* --f64 */
} NpuEncodeToolOptions;

/* The test suite's float64 evaluation of the encoder of @lk (the model
 * file) on @in, the tool's input widened to double, into @out (n_tokens x
 * out_dim); FALSE with @error where it disagrees with the encoder's shape */
typedef gboolean (*NpuEncodeToolRefFunc) (const NpuRefLookup * lk,
    const double *in, double *out, gpointer data, GError ** error);

/* Parses the command line: one MODEL.gguf, --@input_name (required, help
 * @input_help), -o, --threads, --repeat, --reference, --tol, --f64 and
 * the tool's own @extra entries
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

/* With --reference: reads the other runtime's embeddings (@n_tokens x
 * @out_dim floats) and prints "compare: max|diff| ... rel R, max|diff|/rms
 * ...", where R = max |ours - ref| / (range of ref), the figure judged;
 * with --tol also "PASS" or "FAIL" (R above it, or a NaN), and *@pass
 * becomes FALSE on FAIL.
 * With --f64: @f64 (@f64_data) evaluates the model file on the same
 * input, the @n_in floats @in widened to double, and
 * "f64 ours:" (and with --reference "f64 ref:") print the same figures
 * against it, each followed by "f64 WHO norm: relative norm N",
 * |a - f64| / |f64| over all the embeddings (the figure the unit tests and
 * the docs quote): when the two runtimes differ, this says which is off.
 * Returns FALSE with @error on an unreadable or mis-sized reference or a
 * failed evaluation. */
gboolean npu_encode_tool_compare (const NpuEncodeToolOptions * opts,
    const float *out, guint n_tokens, guint out_dim, const float *in,
    gsize n_in, NpuEncodeToolRefFunc f64, gpointer f64_data, gboolean * pass,
    GError ** error);

G_END_DECLS
#endif /* __NPU_ENCODE_TOOL_H__ */
