/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the energy meters (npuenergy.h) on a sysfs tree
 * laid out as the kernel lays it: class/powercap/<zone> and
 * class/hwmon/hwmonN are links into devices/, RAPL subzones are
 * directories of their package zone, the control type (intel-rapl) has no
 * counter, and a chip may have no power sensor. */
#include <core/device/npuenergy.h>

#include <math.h>
#include <unistd.h>
#include <glib/gstdio.h>

#define RAPL "devices/virtual/powercap/intel-rapl"
#define RANGE G_GUINT64_CONSTANT (262143328850)

static gchar *root;

static void
put (const gchar * rel, const gchar * text)
{
  gchar *path = g_build_filename (root, rel, NULL);
  gchar *dir = g_path_get_dirname (path);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  g_free (dir);
  g_free (path);
}

static void
link_to (const gchar * rel, const gchar * target)
{
  gchar *path = g_build_filename (root, rel, NULL);
  gchar *dir = g_path_get_dirname (path);

  g_assert_cmpint (g_mkdir_with_parents (dir, 0755), ==, 0);
  g_assert_cmpint (symlink (target, path), ==, 0);
  g_free (dir);
  g_free (path);
}

static void
rm_tree (const gchar * path)
{
  GDir *d = g_dir_open (path, 0, NULL);
  const gchar *e;

  while (d && (e = g_dir_read_name (d))) {
    gchar *p = g_build_filename (path, e, NULL);

    if (g_file_test (p, G_FILE_TEST_IS_DIR) &&
        !g_file_test (p, G_FILE_TEST_IS_SYMLINK))
      rm_tree (p);
    else
      g_unlink (p);
    g_free (p);
  }
  if (d)
    g_dir_close (d);
  g_rmdir (path);
}

/* A package zone with core and dram subzones, a psys zone whose counter
 * is root's alone (mode 0400: left out unless we are root, so it is made
 * absent here), an ACPI power meter and a temperature-only chip. */
static void
make_tree (void)
{
  gchar *range = g_strdup_printf ("%" G_GUINT64_FORMAT "\n", RANGE);

  root = g_dir_make_tmp ("npu-sysfs-XXXXXX", NULL);
  put (RAPL "/enabled", "1\n");
  put (RAPL "/intel-rapl:0/name", "package-0\n");
  put (RAPL "/intel-rapl:0/energy_uj", "1000000\n");
  put (RAPL "/intel-rapl:0/max_energy_range_uj", range);
  put (RAPL "/intel-rapl:0/intel-rapl:0:0/name", "core\n");
  put (RAPL "/intel-rapl:0/intel-rapl:0:0/energy_uj", "500\n");
  put (RAPL "/intel-rapl:0/intel-rapl:0:0/max_energy_range_uj", range);
  put (RAPL "/intel-rapl:0/intel-rapl:0:1/name", "dram\n");
  put (RAPL "/intel-rapl:0/intel-rapl:0:1/energy_uj", "7\n");
  put (RAPL "/intel-rapl:0/intel-rapl:0:1/max_energy_range_uj", range);
  /* psys: no readable counter */
  put (RAPL "/intel-rapl:1/name", "psys\n");
  put (RAPL "/intel-rapl:1/max_energy_range_uj", range);
  link_to ("class/powercap/intel-rapl",
      "../../devices/virtual/powercap/intel-rapl");
  link_to ("class/powercap/intel-rapl:0",
      "../../" RAPL "/intel-rapl:0");
  link_to ("class/powercap/intel-rapl:0:0",
      "../../" RAPL "/intel-rapl:0/intel-rapl:0:0");
  link_to ("class/powercap/intel-rapl:0:1",
      "../../" RAPL "/intel-rapl:0/intel-rapl:0:1");
  link_to ("class/powercap/intel-rapl:1", "../../" RAPL "/intel-rapl:1");

  put ("devices/LNXSYSTM:00/ACPI000D:00/hwmon/hwmon0/name", "power_meter\n");
  put ("devices/LNXSYSTM:00/ACPI000D:00/hwmon/hwmon0/power1_input",
      "5000000\n");
  put ("devices/LNXSYSTM:00/ACPI000D:00/hwmon/hwmon0/power1_label",
      "VDD_IN\n");
  put ("devices/platform/coretemp.0/hwmon/hwmon1/name", "coretemp\n");
  put ("devices/platform/coretemp.0/hwmon/hwmon1/temp1_input", "45000\n");
  link_to ("class/hwmon/hwmon0",
      "../../devices/LNXSYSTM:00/ACPI000D:00/hwmon/hwmon0");
  link_to ("class/hwmon/hwmon1",
      "../../devices/platform/coretemp.0/hwmon/hwmon1");
  g_free (range);
}

static gint
find (NpuEnergyMeter * m, const gchar * name)
{
  guint i;

  for (i = 0; i < npu_energy_meter_get_n_domains (m); i++)
    if (g_str_equal (npu_energy_meter_get_domain_name (m, i), name))
      return i;
  return -1;
}

static void
test_domains (void)
{
  NpuEnergyMeter *m;

  make_tree ();
  m = npu_energy_meter_new (root);
  g_assert_cmpuint (npu_energy_meter_get_n_domains (m), ==, 4);
  g_assert_cmpint (find (m, "package-0"), >=, 0);
  g_assert_cmpint (find (m, "core"), >=, 0);
  g_assert_cmpint (find (m, "dram"), >=, 0);
  g_assert_cmpint (find (m, "power_meter power1 (VDD_IN)"), >=, 0);
  g_assert_cmpint (find (m, "psys"), ==, -1);
  g_assert_cmpint (npu_energy_meter_get_domain_kind (m, find (m, "dram")),
      ==, NPU_ENERGY_COUNTER);
  g_assert_cmpint (npu_energy_meter_get_domain_kind (m,
          find (m, "power_meter power1 (VDD_IN)")), ==, NPU_ENERGY_POWER);
  npu_energy_meter_free (m);

  /* $NPU_SYSFS_ROOT when no root is given */
  g_setenv ("NPU_SYSFS_ROOT", root, TRUE);
  m = npu_energy_meter_new (NULL);
  g_assert_cmpuint (npu_energy_meter_get_n_domains (m), ==, 4);
  npu_energy_meter_free (m);
  g_unsetenv ("NPU_SYSFS_ROOT");
  rm_tree (root);
  g_clear_pointer (&root, g_free);
}

/* Counters' differences, a wrap at max_energy_range_uj, a power sensor's
 * mean times the time, a domain gone between two samples. */
static void
test_joules (void)
{
  NpuEnergyMeter *m;
  NpuEnergySample *a, *b;
  gchar *near_end = g_strdup_printf ("%" G_GUINT64_FORMAT "\n", RANGE - 1000);
  gdouble j = -1;
  gint pkg, core, dram, pw;

  make_tree ();
  put (RAPL "/intel-rapl:0/intel-rapl:0:0/energy_uj", near_end);
  m = npu_energy_meter_new (root);
  pkg = find (m, "package-0");
  core = find (m, "core");
  dram = find (m, "dram");
  pw = find (m, "power_meter power1 (VDD_IN)");
  a = npu_energy_sample_new (m);
  b = npu_energy_sample_new (m);
  npu_energy_meter_read (m, a);
  g_usleep (20000);
  put (RAPL "/intel-rapl:0/energy_uj", "3500000\n");
  put (RAPL "/intel-rapl:0/intel-rapl:0:0/energy_uj", "500\n");
  put ("devices/LNXSYSTM:00/ACPI000D:00/hwmon/hwmon0/power1_input",
      "7000000\n");
  put (RAPL "/intel-rapl:0/intel-rapl:0:1/energy_uj", "not a number\n");
  npu_energy_meter_read (m, b);

  g_assert_true (npu_energy_meter_joules (m, a, b, pkg, &j));
  g_assert_cmpfloat_with_epsilon (j, 2.5, 1e-12);
  /* wrapped: 1000 uJ to the end of the range, 500 after it */
  g_assert_true (npu_energy_meter_joules (m, a, b, core, &j));
  g_assert_cmpfloat_with_epsilon (j, 1500e-6, 1e-12);
  /* 5 W then 7 W: 6 W over the time between the samples */
  g_assert_true (npu_energy_meter_joules (m, a, b, pw, &j));
  g_assert_cmpfloat_with_epsilon (j, 6.0 * (b->time_ns - a->time_ns) * 1e-9,
      1e-9);
  g_assert_cmpfloat (j, >, 6.0 * 0.019);
  /* unreadable in the second sample */
  g_assert_false (b->read[dram]);
  g_assert_false (npu_energy_meter_joules (m, a, b, dram, &j));
  /* gone altogether */
  {
    gchar *p = g_build_filename (root, RAPL "/intel-rapl:0/energy_uj", NULL);

    g_assert_cmpint (g_unlink (p), ==, 0);
    g_free (p);
  }
  npu_energy_meter_read (m, b);
  g_assert_false (b->read[pkg]);
  g_assert_false (npu_energy_meter_joules (m, a, b, pkg, &j));
  g_assert_true (b->read[core]);

  npu_energy_sample_free (a);
  npu_energy_sample_free (b);
  npu_energy_meter_free (m);
  g_free (near_end);
  rm_tree (root);
  g_clear_pointer (&root, g_free);
}

/* A tree with neither powercap nor hwmon: no domains, no failure */
static void
test_none (void)
{
  gchar *empty = g_dir_make_tmp ("npu-sysfs-XXXXXX", NULL);
  NpuEnergyMeter *m = npu_energy_meter_new (empty);
  NpuEnergySample *s = npu_energy_sample_new (m);

  g_assert_cmpuint (npu_energy_meter_get_n_domains (m), ==, 0);
  npu_energy_meter_read (m, s);
  npu_energy_sample_free (s);
  npu_energy_meter_free (m);
  g_rmdir (empty);
  g_free (empty);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/energy/domains", test_domains);
  g_test_add_func ("/energy/joules", test_joules);
  g_test_add_func ("/energy/none", test_none);
  return g_test_run ();
}
