/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: every element property is in the user's guide, and only those
 *
 * For each element, the properties gst-inspect-1.0 lists as the element's
 * own (inherited ones, such as GstBaseSrc's, are GStreamer's to document)
 * must be exactly the names in the first column of the "## Properties"
 * table of docs/<element>.md.  A property added without its line in docs/,
 * or a line left behind for a property that went, fails here by name.
 * Each of those properties must also have its gtk-doc comment
 * ("GstNpuLlm:prompt:") in the element's source, at its
 * g_object_class_install_property().
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>
#include <gst/gst.h>
#include <gst/check/gstcheck.h>

static const struct
{
  const gchar *name, *source;
} elements[] = {
  {"mxfp4weights", "gstmxfp4weights.c"},
  {"npullm", "gstnpullm.c"},
  {"npuvisiontok", "gstnpuvisiontok.c"},
  {"npuaudiotok", "gstnpuaudiotok.c"},
};

/* The `names` in the first cell of each row of the Properties table */
static GHashTable *
documented_properties (const gchar * element)
{
  gchar *path = g_strdup_printf ("%s/%s.md", NPU_DOCS_DIR, element);
  gchar *text = NULL, **lines, **l;
  GHashTable *names = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      NULL);
  gboolean in_section = FALSE, seen_section = FALSE;
  GError *error = NULL;

  if (!g_file_get_contents (path, &text, NULL, &error))
    fail ("%s", error->message);
  lines = g_strsplit (text, "\n", -1);
  for (l = lines; *l; l++) {
    if (g_str_has_prefix (*l, "## ")) {
      in_section = strcmp (*l, "## Properties") == 0;
      seen_section |= in_section;
      continue;
    }
    if (in_section && g_str_has_prefix (*l, "| `")) {
      const gchar *cell_end = strchr (*l + 1, '|');
      gchar *cell = g_strndup (*l + 1, cell_end ? cell_end - *l - 1 :
          (gssize) strlen (*l + 1));
      gchar **parts = g_strsplit (cell, "`", -1);
      guint i;

      /* `a`, `b`: the odd pieces are the names */
      for (i = 1; parts[i]; i += 2)
        g_hash_table_add (names, g_strdup (parts[i]));
      g_strfreev (parts);
      g_free (cell);
    }
  }
  fail_unless (seen_section, "%s has no \"## Properties\" section", path);
  g_strfreev (lines);
  g_free (text);
  g_free (path);
  return names;
}

GST_START_TEST (test_properties_documented)
{
  guint e;
  GString *problems = g_string_new (NULL);

  for (e = 0; e < G_N_ELEMENTS (elements); e++) {
    const gchar *name = elements[e].name;
    GstElement *element = gst_element_factory_make (name, NULL);
    GHashTable *documented, *listed;
    GParamSpec **specs;
    guint n, i;
    GHashTableIter it;
    gpointer key;
    gchar *path, *source = NULL;

    fail_unless (element != NULL, "no element %s", name);
    documented = documented_properties (name);
    path = g_build_filename (NPU_ELEMENTS_DIR, elements[e].source, NULL);
    fail_unless (g_file_get_contents (path, &source, NULL, NULL),
        "cannot read %s", path);
    listed = g_hash_table_new (g_str_hash, g_str_equal);
    specs = g_object_class_list_properties (G_OBJECT_GET_CLASS (element), &n);
    for (i = 0; i < n; i++) {
      if (specs[i]->owner_type != G_OBJECT_TYPE (element))
        continue;
      g_hash_table_add (listed, (gpointer) specs[i]->name);
      if (!g_hash_table_contains (documented, specs[i]->name))
        g_string_append_printf (problems, "%s: property %s is not in "
            "docs/%s.md\n", name, specs[i]->name, name);
      {
        gchar *tag = g_strdup_printf ("* %s:%s:\n", G_OBJECT_TYPE_NAME
            (element), specs[i]->name);

        if (!strstr (source, tag))
          g_string_append_printf (problems, "%s: property %s has no doc "
              "comment (%s:%s:) in %s\n", name, specs[i]->name,
              G_OBJECT_TYPE_NAME (element), specs[i]->name,
              elements[e].source);
        g_free (tag);
      }
    }
    g_hash_table_iter_init (&it, documented);
    while (g_hash_table_iter_next (&it, &key, NULL)) {
      if (!g_hash_table_contains (listed, key))
        g_string_append_printf (problems, "%s: docs/%s.md documents %s, "
            "which the element does not have\n", name, name,
            (const gchar *) key);
    }
    g_free (source);
    g_free (path);
    g_free (specs);
    g_hash_table_unref (listed);
    g_hash_table_unref (documented);
    gst_object_unref (element);
  }
  fail_unless (problems->len == 0, "%s", problems->str);
  g_string_free (problems, TRUE);
}

GST_END_TEST;

static Suite *
docs_properties_suite (void)
{
  Suite *s = suite_create ("npudocsproperties");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_properties_documented);
  return s;
}

GST_CHECK_MAIN (docs_properties);
