/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: replays the corpora of the element fuzzers (fuzz-tokenbuf,
 * fuzz-caps) through the elements in every normal build
 *
 * tests/fuzz/corpus-tokenbuf/ holds token buffers (header, then payload:
 * tests/fuzz/npufuzzgst.h) for npullm, corpus-caps/ caps strings for the
 * elements' sink pads; seeds and whatever the fuzzers found (any input
 * that once crashed or hung).  Names say what to expect of a token buffer:
 * "ok-*" must be answered (EOS, no error), "bad-*" must give an error
 * with a message; any input must end (EOS or error) within 20 s, and
 * neither may crash or leak (the valgrind run).
 */
#include <gst/check/gstcheck.h>

#include "npucheck.h"
#include "../fuzz/npufuzzgst.h"

static NpuFuzzModels models;

static void
setup (void)
{
  GError *error = NULL;

  npu_check_load_plugins ();
  fail_unless (npu_fuzz_models_write (&models, &error), "%s",
      error ? error->message : "");
}

static void
teardown (void)
{
  npu_fuzz_models_remove (&models);
}

/* Calls @run on each file of tests/fuzz/@sub; returns how many */
static guint
replay (const gchar * sub, void (*run) (const gchar * name,
        const guint8 * data, gsize size))
{
  gchar *dir = g_build_filename (NPU_TESTS_CHECK_DIR, "..", "fuzz", sub,
      NULL);
  GDir *d = g_dir_open (dir, 0, NULL);
  const gchar *name;
  guint n = 0;

  fail_unless (d != NULL, "no corpus %s", dir);
  while ((name = g_dir_read_name (d))) {
    gchar *path = g_build_filename (dir, name, NULL);
    gchar *data;
    gsize size;

    fail_unless (g_file_get_contents (path, &data, &size, NULL), "%s", path);
    run (name, (const guint8 *) data, size);
    g_free (data);
    g_free (path);
    n++;
  }
  g_dir_close (d);
  g_free (dir);
  return n;
}

static void
run_tokens (const gchar * name, const guint8 * data, gsize size)
{
  gchar *message;
  NpuFuzzEnd end = npu_fuzz_tokens_run (&models, data, size, &message);

  GST_INFO ("%s: %s", name, message ? message : "EOS");
  fail_if (end == NPU_FUZZ_HUNG, "%s: neither EOS nor an error", name);
  if (end == NPU_FUZZ_ERROR)
    fail_unless (message && *message, "%s: an error without a message",
        name);
  if (g_str_has_prefix (name, "ok-"))
    fail_unless (end == NPU_FUZZ_EOS, "%s: %s", name, message);
  if (g_str_has_prefix (name, "bad-"))
    fail_unless (end == NPU_FUZZ_ERROR, "%s: no error", name);
  g_free (message);
}

static void
run_caps (const gchar * name, const guint8 * data, gsize size)
{
  GST_INFO ("%s", name);
  npu_fuzz_caps_run (&models, data, size);
}

GST_START_TEST (test_tokenbuf_corpus)
{
  fail_unless (replay ("corpus-tokenbuf", run_tokens) >= 10);
}

GST_END_TEST;

GST_START_TEST (test_caps_corpus)
{
  fail_unless (replay ("corpus-caps", run_caps) >= 10);
}

GST_END_TEST;

static Suite *
fuzz_gst_suite (void)
{
  Suite *s = suite_create ("fuzz-gst");
  TCase *tc = tcase_create ("general");

  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, test_tokenbuf_corpus);
  tcase_add_test (tc, test_caps_corpus);
  suite_add_tcase (s, tc);
  return s;
}

GST_CHECK_MAIN (fuzz_gst);
