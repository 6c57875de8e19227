/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: reading npullm's answers in the trained models' gst-check tests
 *
 * Header-only, as npucheck.h: each test is one executable built from one
 * file.  test-trained-models.c (frames) and test-trained-audio.c (sounds)
 * play a pipeline ending in "npullm ! appsink name=sink" to its end and
 * judge the answer by the words a held-out case must contain.
 */
#ifndef __NPU_ANSWER_CHECK_H__
#define __NPU_ANSWER_CHECK_H__

#include <gst/gst.h>
#include <gst/check/gstcheck.h>

/* TRUE when @answer has every one of @words as a whole word, any case */
static inline gboolean
npu_answer_has_words (const gchar * answer, gchar ** words)
{
  guint i;

  for (i = 0; words[i]; i++) {
    gchar *re = g_strdup_printf ("\\b%s\\b", words[i]);
    gboolean found = g_regex_match_simple (re, answer, G_REGEX_CASELESS, 0);

    g_free (re);
    if (!found)
      return FALSE;
  }
  return TRUE;
}

/* appsink's pull-sample action signal: no link to libgstapp needed */
static inline GstSample *
npu_answer_pull_sample (GstElement * sink)
{
  GstSample *sample = NULL;

  g_signal_emit_by_name (sink, "pull-sample", &sample);
  return sample;
}

/* Reads @sink (an appsink after npullm) to EOS; returns the answer, and
 * whether it ended with the end-of-generation token (npullm-stats' "end").
 * A pipeline error fails the test, naming @what (the pipeline).  The
 * pipeline is left as it is: the caller reads its elements' counters and
 * stops it. */
static inline gchar *
npu_answer_collect (GstElement * pipeline, GstElement * sink,
    const gchar * what, gboolean * eog)
{
  GString *text = g_string_new (NULL);
  GstBus *bus = gst_element_get_bus (pipeline);
  GstSample *sample;
  GstMessage *msg;

  while ((sample = npu_answer_pull_sample (sink))) {
    GstMapInfo map;
    GstBuffer *b = gst_sample_get_buffer (sample);

    fail_unless (gst_buffer_map (b, &map, GST_MAP_READ));
    g_string_append_len (text, (const gchar *) map.data, map.size);
    gst_buffer_unmap (b, &map);
    gst_sample_unref (sample);
  }
  *eog = FALSE;
  while ((msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR |
              GST_MESSAGE_ELEMENT))) {
    const GstStructure *s = gst_message_get_structure (msg);

    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
      GError *err = NULL;
      gst_message_parse_error (msg, &err, NULL);
      fail ("pipeline error: %s (%s)", err->message, what);
    }
    /* an answer's (a message that counts media only has no tokens) */
    if (gst_structure_has_name (s, "npullm-stats") &&
        gst_structure_has_field (s, "generated-tokens"))
      *eog = !g_strcmp0 (gst_structure_get_string (s, "end"), "eog");
    gst_message_unref (msg);
  }
  gst_object_unref (bus);
  return g_string_free (text, FALSE);
}

/* The held-out list at @path: one case a line, @n_fields fields split by
 * "|" (each stripped), "#" comments and empty lines skipped.  An array of
 * string vectors (freed with the array). */
static inline GPtrArray *
npu_heldout_read (const gchar * path, guint n_fields)
{
  gchar *text = NULL, **lines;
  GError *error = NULL;
  GPtrArray *rows = g_ptr_array_new_with_free_func ((GDestroyNotify)
      g_strfreev);
  guint i, j;

  fail_unless (g_file_get_contents (path, &text, NULL, &error),
      "%s", error ? error->message : "");
  lines = g_strsplit (text, "\n", -1);
  for (i = 0; lines[i]; i++) {
    gchar **f;

    if (!*lines[i] || lines[i][0] == '#')
      continue;
    f = g_strsplit (lines[i], "|", n_fields);
    fail_unless_equals_int (g_strv_length (f), n_fields);
    for (j = 0; f[j]; j++)
      g_strstrip (f[j]);
    g_ptr_array_add (rows, f);
  }
  g_strfreev (lines);
  g_free (text);
  return rows;
}

/* Whether @answer is right: it ended with the end-of-generation token and
 * has every one of @words.  A wrong one is printed with @what (the leg)
 * and @input (what was played); with NPU_PRINT_ANSWERS set, a right one
 * too ("answer: " first), so that tests/tools/npu-answer-repeat.sh can
 * find any answer that changes from run to run. */
static inline gboolean
npu_answer_judge (const gchar * what, const gchar * input,
    const gchar * answer, gboolean eog, gchar ** words)
{
  gchar *want;

  if (eog && npu_answer_has_words (answer, words)) {
    if (g_getenv ("NPU_PRINT_ANSWERS"))
      g_printerr ("answer: %s: %s: \"%s\"\n", what, input, answer);
    return TRUE;
  }
  want = g_strjoinv (", ", words);
  g_printerr ("%s: %s: \"%s\"%s, want %s\n", what, input, answer,
      eog ? "" : " (no end-of-generation)", want);
  g_free (want);
  return FALSE;
}

/* At least 95 % of a leg's answers must be right */
static inline void
npu_answer_check_rate (const gchar * what, guint right, guint n)
{
  g_printerr ("%s: %u of %u answers right\n", what, right, n);
  fail_unless (right * 100 >= n * 95, "%s: only %u of %u answers right", what,
      right, n);
}

#endif /* __NPU_ANSWER_CHECK_H__ */
