/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: what npu-vit-encode and npu-audio-encode share; see
 * npuencodetool.h */
#include "npuencodetool.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tests/npucompare.h"

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
    {"reference", 0, 0, G_OPTION_ARG_FILENAME, &opts->reference,
        "Compare with another runtime's embeddings", "FILE"},
    {"tol", 0, 0, G_OPTION_ARG_DOUBLE, &opts->tol,
        "Relative tolerance (max |diff| / range) for PASS/FAIL", "REL"},
    {"f64", 0, 0, G_OPTION_ARG_NONE, &opts->f64,
        "Compare ours (and the reference) with a float64 evaluation", NULL},
    {NULL}
  };
  GOptionContext *octx = g_option_context_new (summary);
  GError *error = NULL;
  gboolean ok;

  memset (opts, 0, sizeof (*opts));
  opts->threads = opts->repeat = 1;
  opts->tol = -1.0;
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
  g_free (opts->reference);
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

/* max |a - b| over the range of @b, the reference */
static gboolean
compare (const float *a, const float *b, gsize n, gdouble tol)
{
  gdouble d = 0, lo = b[0], hi = b[0], ss = 0, rel, rms;
  gsize i, worst = 0;

  /* a NaN on either side makes d NaN, and the comparison below fail */
  d = npu_max_abs_diff_f (a, b, n, &worst);
  for (i = 0; i < n; i++) {
    lo = MIN (lo, b[i]);
    hi = MAX (hi, b[i]);
    ss += (gdouble) b[i] * b[i];
  }
  rms = sqrt (ss / n);
  rel = hi > lo ? d / (hi - lo) : d;
  printf ("compare: max|diff| %.3e (at %" G_GSIZE_FORMAT ": ours %.6g, ref "
      "%.6g), ref range %.4g, rel %.3e, max|diff|/rms %.3e\n", d, worst,
      a[worst], b[worst], hi - lo, rel, rms > 0 ? d / rms : d);
  if (tol < 0)
    return TRUE;
  if (!npu_within (rel, tol)) {
    printf ("FAIL (rel %.3e, tolerance %.1e)\n", rel, tol);
    return FALSE;
  }
  printf ("PASS (rel %.3e <= %.1e)\n", rel, tol);
  return TRUE;
}

/* "f64 WHO:" max |a - ref| / range (ref) against the float64 evaluation */
static void
compare_f64 (const gchar * who, const float *a, const double *ref, gsize n)
{
  gdouble d = 0, lo = ref[0], hi = ref[0], num = 0.0, den = 0.0;
  gsize i, worst = 0;

  for (i = 0; i < n; i++) {
    gdouble e = fabs (a[i] - ref[i]);

    /* !(e <= d): a NaN is the worst difference */
    if (!(e <= d)) {
      d = e;
      worst = i;
    }
    lo = MIN (lo, ref[i]);
    hi = MAX (hi, ref[i]);
  }
  printf ("f64 %s: max|diff| %.3e (at %" G_GSIZE_FORMAT ": %.6g, f64 %.6g), "
      "rel %.3e\n", who, d, worst, a[worst], ref[worst],
      hi > lo ? d / (hi - lo) : d);
  /* a NaN on either side makes the sums NaN */
  for (i = 0; i < n; i++) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  printf ("f64 %s norm: relative norm %.3e\n", who, sqrt (num / den));
}

/* The float64 evaluation of opts->model on @in: a new array of @n_out
 * doubles, or NULL with @error set */
static double *
evaluate_f64 (const NpuEncodeToolOptions * opts, const float *in,
    gsize n_in, gsize n_out, NpuEncodeToolRefFunc f64, gpointer f64_data,
    GError ** error)
{
  NpuGguf *g = npu_gguf_open (opts->model, error);
  NpuRefLookup lk = { 0, };
  double *wide, *exact;
  gsize i;

  if (!g)
    return NULL;
  lk.gguf = g;
  wide = g_new (double, n_in);
  for (i = 0; i < n_in; i++)
    wide[i] = in[i];
  exact = g_new (double, n_out);
  if (!f64 (&lk, wide, exact, f64_data, error))
    g_clear_pointer (&exact, g_free);
  g_free (wide);
  npu_gguf_free (g);
  return exact;
}

gboolean
npu_encode_tool_compare (const NpuEncodeToolOptions * opts,
    const float *out, guint n_tokens, guint out_dim, const float *in,
    gsize n_in, NpuEncodeToolRefFunc f64, gpointer f64_data, gboolean * pass,
    GError ** error)
{
  gsize n_out = (gsize) n_tokens * out_dim, ref_len = 0;
  gchar *ref = NULL;
  double *exact;

  if (opts->reference &&
      !g_file_get_contents (opts->reference, &ref, &ref_len, error))
    return FALSE;
  if (ref && ref_len != n_out * sizeof (float)) {
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "'%s' has %" G_GSIZE_FORMAT " bytes, not %u x %u floats",
        opts->reference, ref_len, n_tokens, out_dim);
    g_free (ref);
    return FALSE;
  }
  if (opts->f64) {
    exact = evaluate_f64 (opts, in, n_in, n_out, f64, f64_data, error);
    if (!exact) {
      g_free (ref);
      return FALSE;
    }
    compare_f64 ("ours", out, exact, n_out);
    if (ref)
      compare_f64 ("ref", (const float *) ref, exact, n_out);
    g_free (exact);
  }
  /* floats as stored: the machine is little-endian (x86-64, aarch64) */
  if (ref && !compare (out, (const float *) ref, n_out, opts->tol))
    *pass = FALSE;
  g_free (ref);
  return TRUE;
}
