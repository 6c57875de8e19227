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
    if (gst_structure_has_name (s, "npullm-stats"))
      *eog = !g_strcmp0 (gst_structure_get_string (s, "end"), "eog");
    gst_message_unref (msg);
  }
  gst_object_unref (bus);
  return g_string_free (text, FALSE);
}

#endif /* __NPU_ANSWER_CHECK_H__ */
