/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: large buffers on transparent huge pages
 *
 * npu_huge_alloc0() must return zeroed, 2 MiB-aligned memory whose whole
 * huge pages are advised for transparent huge pages and backed by them
 * when the kernel is set to give them (read back from /proc/self/smaps;
 * see test_alloc() for when each is asserted), free it, and work for
 * sizes that are not a multiple of a page; valgrind checks that no byte
 * past the size is touched.
 */
#include <core/device/npuhugemem.h>

#include <stdio.h>
#include <string.h>

#define MIB ((gsize) 1 << 20)

typedef struct
{
  guint64 size_kb, huge_kb;
  gboolean advised;             /* VmFlags "hg": MADV_HUGEPAGE */
  gint eligible;                /* THPeligible, -1 if the kernel has none */
} Smaps;

/* The smaps entry of the mapping that contains @p; FALSE if no mapping
 * contains it.  The huge-page interior is its own entry (its flags differ
 * from the tail's). */
static gboolean
smaps_for (gconstpointer p, Smaps * sm)
{
  gchar *text = NULL;
  gchar **lines;
  gboolean in = FALSE, found = FALSE;
  guint i;

  memset (sm, 0, sizeof (*sm));
  sm->eligible = -1;
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
      sm->size_kb = v;
    } else if (in
        && sscanf (lines[i], "AnonHugePages: %" G_GUINT64_FORMAT, &v) == 1) {
      sm->huge_kb = v;
    } else if (in
        && sscanf (lines[i], "THPeligible: %" G_GUINT64_FORMAT, &v) == 1) {
      sm->eligible = v;
    } else if (in && g_str_has_prefix (lines[i], "VmFlags:")) {
      gchar **flags = g_strsplit (lines[i] + 8, " ", -1);

      sm->advised = g_strv_contains ((const gchar * const *) flags, "hg");
      g_strfreev (flags);
    }
  }
  g_strfreev (lines);
  g_free (text);
  return found;
}

/* The bracketed choice of a /sys/kernel/mm/transparent_hugepage file, NULL
 * if there is none */
static gchar *
thp_setting (const gchar * name)
{
  gchar *path = g_build_filename ("/sys/kernel/mm/transparent_hugepage",
      name, NULL);
  gchar *s = NULL, *open, *close, *v = NULL;

  if (g_file_get_contents (path, &s, NULL, NULL) &&
      (open = strchr (s, '[')) && (close = strchr (open, ']')))
    v = g_strndup (open + 1, close - open - 1);
  g_free (s);
  g_free (path);
  return v;
}

/* Where transparent huge pages are enabled (always or madvise), the whole
 * huge pages of the buffer are advised (VmFlags hg) and eligible
 * (THPeligible 1): asserted, that is ours.  Whether the kernel backs them
 * with huge pages is its own choice; where it compacts memory at the
 * fault of advised memory rather than fall back (defrag always or
 * madvise, the default) it is asserted too; elsewhere (defer, never: the
 * kernel falls back to small pages when none is free at once) only with
 * NPU_TEST_REQUIRE_HUGE_PAGES set. */
static void
test_alloc (void)
{
  const gsize sizes[] = { 1, 4095, 2 * MIB - 1, 2 * MIB, 9 * MIB + 12345 };
  gchar *enabled = thp_setting ("enabled");
  gchar *defrag = thp_setting ("defrag");
  gboolean thp = enabled && g_strcmp0 (enabled, "never") != 0;
  gboolean require = thp && (g_getenv ("NPU_TEST_REQUIRE_HUGE_PAGES") ||
      !g_strcmp0 (defrag, "always") || !g_strcmp0 (defrag, "madvise"));
  /* qemu-user writes /proc/self/smaps itself, from its own page table:
   * no VmFlags of the kernel's ("hg" is never there) and no huge pages.
   * The kernel's answer cannot be read from inside it. */
  gboolean emulated = g_getenv ("NPU_UNDER_QEMU_USER") != NULL;
  guint i;

  g_test_message ("transparent huge pages: enabled %s, defrag %s",
      enabled ? enabled : "(none)", defrag ? defrag : "(none)");
  if (emulated)
    g_test_message ("under qemu-user: its smaps has no huge-page facts; "
        "alignment, zeroing and unmapping checked alone");
  for (i = 0; i < G_N_ELEMENTS (sizes); i++) {
    gsize size = sizes[i], j;
    guint8 *p = npu_huge_alloc0 (size);
    Smaps sm;

    g_assert_nonnull (p);
    g_assert_cmpuint ((guintptr) p % (2 * MIB), ==, 0);
    for (j = 0; j < size; j++)
      g_assert_cmpuint (p[j], ==, 0);
    memset (p, 0xa5, size);
    g_assert_true (smaps_for (p, &sm));
    if (size >= 2 * MIB && thp && !emulated) {
      g_test_message ("%" G_GSIZE_FORMAT " bytes: AnonHugePages %"
          G_GUINT64_FORMAT " kB", size, sm.huge_kb);
      g_assert_true (sm.advised);
      if (sm.eligible >= 0)
        g_assert_cmpint (sm.eligible, ==, 1);
      /* at least the first huge page */
      if (require)
        g_assert_cmpuint (sm.huge_kb, >=, 2048);
    }
    npu_huge_free (p, size);
    /* gone from the map.  Valgrind (Debian 13's) may map memory of its own
     * at the freed address at once, of any size (seen: 8 MiB after
     * freeing 9 MB, and 8 MiB after freeing 2 MiB): there, a mapping at
     * @p must at least not be ours, that is not advised for huge pages. */
    if (smaps_for (p, &sm)) {
      g_assert_nonnull (g_getenv ("NPU_UNDER_VALGRIND"));
      g_assert_false (sm.advised);
    }
  }
  g_free (enabled);
  g_free (defrag);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/hugemem/alloc", test_alloc);
  return g_test_run ();
}
