/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: large buffers on transparent huge pages
 *
 * npu_huge_alloc0() must return zeroed, 2 MiB-aligned memory whose whole
 * huge pages the kernel backs with huge pages when transparent huge pages
 * are enabled (read back from /proc/self/smaps; required only with
 * NPU_TEST_REQUIRE_HUGE_PAGES set, as a fragmented machine may have none
 * to give), free it, and work for sizes that are not a multiple of a
 * page; valgrind checks that no byte past the size is touched.
 */
#include "core/npuhugemem.h"

#include <stdio.h>
#include <string.h>

#define MIB ((gsize) 1 << 20)

/* The smaps entry of the mapping that contains @p: its size and its
 * AnonHugePages, in kB; FALSE if no mapping contains it.  The huge-page
 * interior is its own entry (its flags differ from the tail's). */
static gboolean
smaps_for (gconstpointer p, guint64 * size_kb, guint64 * huge_kb)
{
  gchar *text = NULL;
  gchar **lines;
  gboolean in = FALSE, found = FALSE;
  guint i;

  g_assert_true (g_file_get_contents ("/proc/self/smaps", &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);
  for (i = 0; lines[i]; i++) {
    guint64 lo, hi, v;

    if (sscanf (lines[i], "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x",
            &lo, &hi) == 2 && strchr (lines[i], ' ')) {
      in = (guintptr) p >= lo && (guintptr) p < hi;
      if (in)
        found = TRUE;
    } else if (in && sscanf (lines[i], "Size: %" G_GUINT64_FORMAT, &v) == 1) {
      *size_kb = v;
    } else if (in
        && sscanf (lines[i], "AnonHugePages: %" G_GUINT64_FORMAT, &v) == 1) {
      *huge_kb = v;
    }
  }
  g_strfreev (lines);
  g_free (text);
  return found;
}

static gboolean
thp_enabled (void)
{
  gchar *s = NULL;
  gboolean on;

  if (!g_file_get_contents ("/sys/kernel/mm/transparent_hugepage/enabled",
          &s, NULL, NULL))
    return FALSE;
  on = strstr (s, "[never]") == NULL;
  g_free (s);
  return on;
}

static void
test_alloc (void)
{
  const gsize sizes[] = { 1, 4095, 2 * MIB - 1, 2 * MIB, 9 * MIB + 12345 };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (sizes); i++) {
    gsize size = sizes[i], j;
    guint8 *p = npu_huge_alloc0 (size);
    guint64 size_kb = 0, huge_kb = 0;

    g_assert_nonnull (p);
    g_assert_cmpuint ((guintptr) p % (2 * MIB), ==, 0);
    for (j = 0; j < size; j++)
      g_assert_cmpuint (p[j], ==, 0);
    memset (p, 0xa5, size);
    g_assert_true (smaps_for (p, &size_kb, &huge_kb));
    if (size >= 2 * MIB && thp_enabled ())
      g_test_message ("%" G_GSIZE_FORMAT " bytes: AnonHugePages %"
          G_GUINT64_FORMAT " kB", size, huge_kb);
    /* The huge pages are the kernel's to give (memory may be fragmented):
     * report, but require them only where asked to */
    if (size >= 2 * MIB && thp_enabled ()
        && g_getenv ("NPU_TEST_REQUIRE_HUGE_PAGES"))
      g_assert_cmpuint (huge_kb, >=, 2048);
    npu_huge_free (p, size);
    g_assert_false (smaps_for (p, &size_kb, &huge_kb));
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hugemem/alloc", test_alloc);
  return g_test_run ();
}
