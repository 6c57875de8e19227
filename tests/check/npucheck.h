/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: helpers shared by the gst-check tests of libgstnpu
 *
 * Header-only on purpose: each test is one executable built from one file.
 */
#ifndef __NPU_CHECK_H__
#define __NPU_CHECK_H__

#include <dirent.h>
#include <string.h>
#include <gst/gst.h>
#include <gst/check/gstcheck.h>

/* ------------------------------------------------------------------------
 * Capturing the GStreamer debug log
 */
typedef struct
{
  GMutex lock;
  GPtrArray *lines;             /* "LEVEL category message" */
} NpuLogCapture;

static void
npu_log_capture_func (GstDebugCategory * category, GstDebugLevel level,
    const gchar * file, const gchar * function, gint line, GObject * object,
    GstDebugMessage * message, gpointer user_data)
{
  NpuLogCapture *cap = user_data;
  const gchar *msg = gst_debug_message_get (message);

  if (level > gst_debug_category_get_threshold (category))
    return;
  g_mutex_lock (&cap->lock);
  g_ptr_array_add (cap->lines, g_strdup_printf ("%s %s %s",
          gst_debug_level_get_name (level),
          gst_debug_category_get_name (category), msg ? msg : ""));
  g_mutex_unlock (&cap->lock);
}

/* Starts capturing: @categories (comma separated, as in GST_DEBUG) are set
 * to @level; the default (stderr) log function is kept out of the way. */
static inline NpuLogCapture *
npu_log_capture_start (const gchar * categories, GstDebugLevel level)
{
  NpuLogCapture *cap = g_new0 (NpuLogCapture, 1);
  gchar **names = g_strsplit (categories, ",", -1);
  guint i;

  g_mutex_init (&cap->lock);
  cap->lines = g_ptr_array_new_with_free_func (g_free);
  for (i = 0; names[i]; i++)
    gst_debug_set_threshold_for_name (names[i], level);
  g_strfreev (names);
  gst_debug_remove_log_function (gst_debug_log_default);
  gst_debug_add_log_function (npu_log_capture_func, cap, NULL);
  return cap;
}

static inline void
npu_log_capture_stop (NpuLogCapture * cap, const gchar * categories)
{
  gchar **names = g_strsplit (categories, ",", -1);
  guint i;

  gst_debug_remove_log_function_by_data (cap);
  gst_debug_add_log_function (gst_debug_log_default, NULL, NULL);
  for (i = 0; names[i]; i++)
    gst_debug_unset_threshold_for_name (names[i]);
  g_strfreev (names);
  g_ptr_array_unref (cap->lines);
  g_mutex_clear (&cap->lock);
  g_free (cap);
}

/* Number of captured lines containing all of the NULL-terminated strings. */
static inline guint
npu_log_capture_count (NpuLogCapture * cap, const gchar * first, ...)
{
  guint i, n = 0;

  g_mutex_lock (&cap->lock);
  for (i = 0; i < cap->lines->len; i++) {
    const gchar *line = g_ptr_array_index (cap->lines, i);
    const gchar *s = first;
    gboolean all = TRUE;
    va_list args;

    va_start (args, first);
    while (s && all) {
      all = strstr (line, s) != NULL;
      s = va_arg (args, const gchar *);
    }
    va_end (args);
    if (all)
      n++;
  }
  g_mutex_unlock (&cap->lock);
  return n;
}

static inline void
npu_log_capture_dump (NpuLogCapture * cap)
{
  guint i;

  g_mutex_lock (&cap->lock);
  for (i = 0; i < cap->lines->len; i++)
    g_printerr ("  log: %s\n", (gchar *) g_ptr_array_index (cap->lines, i));
  g_mutex_unlock (&cap->lock);
}

/* ------------------------------------------------------------------------
 * Elements from gst-plugins-base, -good (wavparse) and core
 *
 * The test environment restricts the plugin path to the project's own
 * elements; the few stock elements these tests use are loaded by file from
 * the system plugin directory (passed in by the build) when missing.
 */
static inline void
npu_check_load_plugins (void)
{
#ifdef GST_SYSTEM_PLUGINS_DIR
  static const gchar *plugins[][2] = {
    {"fakesink", "libgstcoreelements.so"},
    {"appsrc", "libgstapp.so"},
    {"videotestsrc", "libgstvideotestsrc.so"},
    {"videoconvert", "libgstvideoconvertscale.so"},
    {"audioconvert", "libgstaudioconvert.so"},
    {"audiotestsrc", "libgstaudiotestsrc.so"},
    {"wavparse", "libgstwavparse.so"},
    {"textoverlay", "libgstpango.so"},
    {"pngenc", "libgstpng.so"},
    {"multifilesink", "libgstmultifile.so"},
    {"tcpserversink", "libgsttcp.so"},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (plugins); i++) {
    GstElementFactory *f = gst_element_factory_find (plugins[i][0]);
    gchar *path;
    GstPlugin *plugin;

    if (f) {
      gst_object_unref (f);
      continue;
    }
    path = g_build_filename (GST_SYSTEM_PLUGINS_DIR, plugins[i][1], NULL);
    plugin = gst_plugin_load_file (path, NULL);
    if (plugin)
      gst_object_unref (plugin);
    g_free (path);
  }
#endif
}

/* ------------------------------------------------------------------------
 * How a pipeline ended
 */

/* Waits up to @timeout for @pipeline's EOS or error.  Returns NULL at
 * EOS, the error's message (free it) at an error; fails the test when
 * neither comes. */
static inline gchar *
npu_check_wait_end (GstElement * pipeline, GstClockTime timeout)
{
  GstMessage *msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      timeout, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  GError *err = NULL;
  gchar *text = NULL;

  fail_unless (msg != NULL, "no EOS and no error in %" GST_TIME_FORMAT,
      GST_TIME_ARGS (timeout));
  if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    gst_message_parse_error (msg, &err, NULL);
    text = g_strdup (err->message);
    g_error_free (err);
  }
  gst_message_unref (msg);
  return text;
}

/* Waits for @pipeline's EOS; an error instead fails the test with its
 * message. */
static inline void
npu_check_wait_eos (GstElement * pipeline, GstClockTime timeout)
{
  gchar *text = npu_check_wait_end (pipeline, timeout);

  fail_unless (text == NULL, "an error instead of EOS: %s", text);
}

/* Waits for an error of @pipeline (EOS instead fails the test) and
 * returns its message; free it. */
static inline gchar *
npu_check_wait_error (GstElement * pipeline, GstClockTime timeout)
{
  gchar *text = npu_check_wait_end (pipeline, timeout);

  fail_unless (text != NULL, "EOS instead of an error");
  return text;
}

/* ------------------------------------------------------------------------
 * Open file descriptors of this process
 */
static inline guint
npu_count_fds (void)
{
  DIR *dir = opendir ("/proc/self/fd");
  struct dirent *d;
  guint n = 0;

  fail_unless (dir != NULL);
  while ((d = readdir (dir)))
    if (d->d_name[0] != '.')
      n++;
  closedir (dir);
  /* opendir()'s own fd was counted */
  return n - 1;
}

#endif /* __NPU_CHECK_H__ */
