/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu benchmarks: the model a benchmark runs when none is given, a
 * generated Llama-3.2-1B-shaped MXFP4 file in a temporary file.
 */
#ifndef NPU_BENCH_MODEL_H
#define NPU_BENCH_MODEL_H

#include "tests/tools/npumodelgen.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <unistd.h>

/* Writes the file (NAME-XXXXXX.gguf in the temporary directory) and
 * prints what it holds; returns its path, to g_unlink() and g_free().
 * A benchmark cannot go on without it: a failure ends the program. */
static inline gchar *
npu_bench_generate_llama_1b (const gchar * name)
{
  NpuTextModelParams p;
  NpuModelGenStats st;
  gint64 t0 = g_get_monotonic_time ();
  gchar *tmpl = g_strdup_printf ("%s-XXXXXX.gguf", name);
  gchar *path = NULL;
  GError *error = NULL;
  gint fd = g_file_open_tmp (tmpl, &path, &error);

  g_free (tmpl);
  if (fd < 0)
    g_error ("%s", error->message);
  close (fd);
  if (!npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_LLAMA, "1b", &error))
    g_error ("%s", error->message);
  p.seed = 1;
  if (!npu_model_gen_write_text (&p, path, &st, &error))
    g_error ("%s", error->message);
  printf ("generated llama 1b mxfp4: %.0f M parameters, %.1f MiB, %.1f s\n",
      st.n_params / 1e6, st.file_size / 1048576.0,
      (g_get_monotonic_time () - t0) / 1e6);
  return path;
}

#endif /* NPU_BENCH_MODEL_H */
