/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the npu-timeline tracer on a real pipeline
 *
 * The tracer is created by gst_init (GST_TRACERS, set before it), so the
 * whole process records one file; the tests run in order, unforked, and
 * each checks the file once its pipeline is back in NULL.  The file is
 * read by tests/check/timeline-check.py (python3's json module, strict),
 * against the PTS a pad probe saw go into npuvisiontok.  $NPU_SYSFS_ROOT
 * is a tree with one hwmon power sensor that reads 5 W, as the kernel
 * lays it out, so each task's joules are its duration times 5 W.
 */
#include <gst/check/gstcheck.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "npucheck.h"

#define MMPROJ NPU_MODELS_DIR "/videotestsrc-mmproj.gguf"
#define TEXT NPU_MODELS_DIR "/videotestsrc-text.gguf"

static gchar *tmpdir, *trace_path;

#define HWMON "devices/LNXSYSTM:00/ACPI000D:00/hwmon/hwmon0"

/* A sysfs tree under @root: class/hwmon/hwmon0, a link to the ACPI power
 * meter's device, whose power1_input reads 5 W */
static void
make_sysfs (const gchar * root)
{
  gchar *dev = g_build_filename (root, HWMON, NULL);
  gchar *cls = g_build_filename (root, "class", "hwmon", NULL);
  gchar *f;

  g_assert (g_mkdir_with_parents (dev, 0755) == 0);
  g_assert (g_mkdir_with_parents (cls, 0755) == 0);
  f = g_build_filename (dev, "name", NULL);
  g_assert (g_file_set_contents (f, "power_meter\n", -1, NULL));
  g_free (f);
  f = g_build_filename (dev, "power1_input", NULL);
  g_assert (g_file_set_contents (f, "5000000\n", -1, NULL));
  g_free (f);
  f = g_build_filename (cls, "hwmon0", NULL);
  g_assert (symlink ("../../" HWMON, f) == 0);
  g_free (f);
  g_free (cls);
  g_free (dev);
}

static void
rm_sysfs (const gchar * root)
{
  static const gchar *paths[] = { "class/hwmon/hwmon0", "class/hwmon",
    "class", HWMON "/name", HWMON "/power1_input", HWMON,
    "devices/LNXSYSTM:00/ACPI000D:00/hwmon", "devices/LNXSYSTM:00/ACPI000D:00",
    "devices/LNXSYSTM:00", "devices", ""
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (paths); i++) {
    gchar *p = g_build_filename (root, paths[i], NULL);

    if (g_remove (p) != 0)
      g_printerr ("cannot remove %s\n", p);
    g_free (p);
  }
}

static GstPadProbeReturn
record_pts (GstPad * pad, GstPadProbeInfo * info, gpointer user_data)
{
  GString *pts = user_data;

  g_string_append_printf (pts, "%s%" G_GUINT64_FORMAT, pts->len ? "," : "",
      GST_BUFFER_PTS (GST_PAD_PROBE_INFO_BUFFER (info)));
  return GST_PAD_PROBE_OK;
}

/* Runs timeline-check.py on the trace with @args; fails the test with its
 * output unless it passes */
static void
check_trace (const gchar * args)
{
  gchar *cmd = g_strdup_printf ("python3 %s/timeline-check.py %s %s",
      NPU_TESTS_CHECK_DIR, trace_path, args);
  gchar *out = NULL, *err = NULL;
  gint status = 0;

  fail_unless (g_spawn_command_line_sync (cmd, &out, &err, &status, NULL));
  fail_unless (g_spawn_check_wait_status (status, NULL), "%s:\n%s%s", cmd,
      out, err);
  g_free (cmd);
  g_free (out);
  g_free (err);
}

static GstElement *
run_pipeline (const gchar * desc, GString * pts, gboolean expect_error)
{
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *tok;
  GstPad *sink;

  fail_unless (pipeline != NULL, "%s", desc);
  tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  sink = gst_element_get_static_pad (tok, "sink");
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_BUFFER, record_pts, pts, NULL);
  gst_object_unref (sink);
  gst_object_unref (tok);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  if (expect_error)
    g_free (npu_check_wait_error (pipeline, 60 * GST_SECOND));
  else
    npu_check_wait_eos (pipeline, 60 * GST_SECOND);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  return pipeline;
}

/* Frames through npuvisiontok and npullm to an EOS: each frame's arrival
 * with its PTS, every task sane, arrows from a frame to the tokens of
 * the answer about it, and the bytes of each frame's encode. */
GST_START_TEST (test_eos)
{
  GString *pts = g_string_new (NULL);
  GstElement *pipeline = run_pipeline ("videotestsrc num-buffers=3 ! "
      "video/x-raw,format=NV12,width=64,height=48,framerate=30/1 ! "
      "npuvisiontok name=tok model=" MMPROJ " ! llm.vision "
      "npullm name=llm model=" TEXT " prompt=\"What do you see?\" "
      "max-tokens=4 ! fakesink", pts, FALSE);
  /* the encode tasks carry the frame's bytes: 64 x 48 NV12, w h 3 / 2 */
  gchar *args = g_strdup_printf ("--element tok --pts %s --answer "
      "--watts \"power_meter power1=5\" --frame-bytes 4608", pts->str);

  fail_unless_equals_int (pts->len > 0, TRUE);
  check_trace (args);
  g_free (args);
  g_string_free (pts, TRUE);
  gst_object_unref (pipeline);
}

GST_END_TEST;

/* A frame npuvisiontok refuses (too short for its caps) stops the
 * pipeline with an error: the file, with the last test's events and this
 * one's, is still valid, and the refused buffer's slice says so. */
GST_START_TEST (test_error_stop)
{
  GString *pts = g_string_new (NULL);
  GstElement *pipeline = gst_parse_launch ("appsrc name=src format=time "
      "caps=video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1 ! "
      "npuvisiontok name=tok model=" MMPROJ " ! fakesink", NULL);
  GstElement *src, *tok;
  GstBuffer *buf;
  GstPad *sink;
  GstFlowReturn flow;

  fail_unless (pipeline != NULL);
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  sink = gst_element_get_static_pad (tok, "sink");
  gst_pad_add_probe (sink, GST_PAD_PROBE_TYPE_BUFFER, record_pts, pts, NULL);
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  buf = gst_buffer_new_allocate (NULL, 100, NULL);
  GST_BUFFER_PTS (buf) = 5 * GST_SECOND;
  g_signal_emit_by_name (src, "push-buffer", buf, &flow);
  gst_buffer_unref (buf);
  g_free (npu_check_wait_error (pipeline, 60 * GST_SECOND));
  gst_element_set_state (pipeline, GST_STATE_NULL);
  fail_unless_equals_string (pts->str, "5000000000");
  check_trace ("--element tok --pts 5000000000 --flow-error");
  gst_object_unref (sink);
  gst_object_unref (tok);
  gst_object_unref (src);
  gst_object_unref (pipeline);
  g_string_free (pts, TRUE);
}

GST_END_TEST;

static Suite *
timeline_suite (void)
{
  Suite *s = suite_create ("npu-timeline");
  TCase *tc = tcase_create ("general");

  tcase_set_timeout (tc, 120);
  suite_add_tcase (s, tc);
  tcase_add_checked_fixture (tc, npu_check_load_plugins, NULL);
  tcase_add_test (tc, test_eos);
  tcase_add_test (tc, test_error_stop);
  return s;
}

int
main (int argc, char **argv)
{
  Suite *s;
  SRunner *sr;
  int n_failed;

  gchar *sysfs;

  tmpdir = g_dir_make_tmp ("npu-timeline-XXXXXX", NULL);
  trace_path = g_build_filename (tmpdir, "trace.json", NULL);
  sysfs = g_build_filename (tmpdir, "sys", NULL);
  make_sysfs (sysfs);
  g_setenv ("NPU_SYSFS_ROOT", sysfs, TRUE);
  {
    gchar *tracers = g_strdup_printf ("npu-timeline(file=%s)", trace_path);

    g_setenv ("GST_TRACERS", tracers, TRUE);
    g_free (tracers);
  }
  /* one tracer, one file for the process: the tests must not fork */
  g_setenv ("CK_FORK", "no", TRUE);
  gst_check_init (&argc, &argv);
  s = timeline_suite ();
  sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  n_failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  g_unlink (trace_path);
  rm_sysfs (sysfs);
  g_free (sysfs);
  g_rmdir (tmpdir);
  g_free (trace_path);
  g_free (tmpdir);
  return n_failed == 0 ? 0 : 1;
}
