/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: tests of compute device discovery (core/device/npudeviceinfo.h) */
#include "config.h"

#include <core/device/npudeviceinfo.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#if defined (HAVE_LIBDRM) && (0 - HAVE_LIBDRM - 1 != -1)
#define WITH_LIBDRM 1
#else
#define WITH_LIBDRM 0
#endif

static gboolean
has_feature (const gchar * features, const gchar * name)
{
  gchar **tokens = g_strsplit (features, " ", -1);
  gboolean found = g_strv_contains ((const gchar * const *) tokens, name);

  g_strfreev (tokens);
  return found;
}

/* A temporary directory, removed with everything in it by rm_tmp_dir(). */
static gchar *
make_tmp_dir (void)
{
  GError *error = NULL;
  gchar *dir = g_dir_make_tmp ("npu-devinfo-XXXXXX", &error);

  g_assert_no_error (error);
  g_assert_nonnull (dir);
  return dir;
}

static void
rm_tmp_dir (gchar * dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const gchar *name;

  if (d != NULL) {
    while ((name = g_dir_read_name (d)) != NULL) {
      gchar *path = g_build_filename (dir, name, NULL);

      if (g_file_test (path, G_FILE_TEST_IS_DIR)
          && !g_file_test (path, G_FILE_TEST_IS_SYMLINK))
        g_rmdir (path);
      else
        g_unlink (path);
      g_free (path);
    }
    g_dir_close (d);
  }
  g_rmdir (dir);
  g_free (dir);
}

static void
unset_dirs (void)
{
  g_unsetenv (NPU_DRM_DIR_ENV);
  g_unsetenv (NPU_ACCEL_DIR_ENV);
}

/* The devices less the Vulkan ones, which are no DRM or accel nodes and do
 * not change with the directories these tests point at (test_vulkan
 * checks them) */
static GPtrArray *
enumerate_nodes (void)
{
  GPtrArray *devices = npu_device_info_enumerate ();
  guint i = 0;

  while (i < devices->len)
    if (((NpuDeviceInfo *) g_ptr_array_index (devices, i))->kind ==
        NPU_DEVICE_KIND_VULKAN)
      g_ptr_array_remove_index (devices, i);
    else
      i++;
  return devices;
}

/* Each Vulkan device after the nodes, named as npu_device_open() takes it,
 * with its heaps and import paths; lavapipe in CI (NPU_REQUIRE_VULKAN) */
static void
test_vulkan (void)
{
  GPtrArray *devices = npu_device_info_enumerate ();
  guint i, n = 0;
  gboolean after_nodes = FALSE;

  for (i = 0; i < devices->len; i++) {
    NpuDeviceInfo *d = g_ptr_array_index (devices, i);
    gchar *name;

    if (d->kind != NPU_DEVICE_KIND_VULKAN) {
      g_assert_false (after_nodes);
      g_assert_null (d->memory_heaps);
      g_assert_null (d->imports);
      continue;
    }
    after_nodes = TRUE;
    name = g_strdup_printf ("vulkan:%u", n++);
    g_assert_cmpstr (d->name, ==, name);
    g_free (name);
    g_assert_null (d->path);
    g_assert_nonnull (d->driver);
    g_assert_true (strstr (d->description, ", Vulkan 1.") != NULL);
    g_assert_true (strstr (d->memory_heaps, " GiB") != NULL);
    g_assert_nonnull (d->imports);
    g_test_message ("%s: %s (%s), heaps %s, imports \"%s\"", d->name,
        d->driver, d->description, d->memory_heaps, d->imports);
  }
  if (g_strcmp0 (g_getenv ("NPU_REQUIRE_VULKAN"), "1") == 0)
    g_assert_cmpuint (n, >=, 1);
  g_ptr_array_unref (devices);
}

static void
test_kind_to_string (void)
{
  g_assert_cmpstr (npu_device_kind_to_string (NPU_DEVICE_KIND_CPU), ==, "cpu");
  g_assert_cmpstr (npu_device_kind_to_string (NPU_DEVICE_KIND_DRM_RENDER),
      ==, "drm-render");
  g_assert_cmpstr (npu_device_kind_to_string (NPU_DEVICE_KIND_ACCEL), ==,
      "accel");
  g_assert_cmpstr (npu_device_kind_to_string (NPU_DEVICE_KIND_VULKAN), ==,
      "vulkan");
}

static void
test_cpu_first (void)
{
  GPtrArray *devices = enumerate_nodes ();
  NpuDeviceInfo *cpu;
  long online = sysconf (_SC_NPROCESSORS_ONLN);

  g_assert_nonnull (devices);
  g_assert_cmpuint (devices->len, >=, 1);

  cpu = g_ptr_array_index (devices, 0);
  g_assert_cmpint (cpu->kind, ==, NPU_DEVICE_KIND_CPU);
  g_assert_cmpstr (cpu->name, ==, "CPU");
  g_assert_cmpstr (cpu->driver, ==, "cpu");
  g_assert_null (cpu->path);
  g_assert_cmpint (online, >, 0);
  g_assert_cmpuint (cpu->n_threads, ==, (guint) online);
  g_assert_nonnull (cpu->description);
  g_assert_cmpstr (cpu->description, !=, "");
  g_assert_nonnull (cpu->cpu_features);
  g_test_message ("CPU: %s, %u threads, features \"%s\"", cpu->description,
      cpu->n_threads, cpu->cpu_features);

  /* No feature twice, no empty token, no stray spaces. */
  if (cpu->cpu_features[0] != '\0') {
    gchar **tokens = g_strsplit (cpu->cpu_features, " ", -1);
    guint i, j;

    for (i = 0; tokens[i] != NULL; i++) {
      g_assert_cmpstr (tokens[i], !=, "");
      for (j = i + 1; tokens[j] != NULL; j++)
        g_assert_cmpstr (tokens[i], !=, tokens[j]);
    }
    g_strfreev (tokens);
  }

  /* The CPU is the only CPU device. */
  {
    guint i;

    for (i = 1; i < devices->len; i++) {
      NpuDeviceInfo *d = g_ptr_array_index (devices, i);

      g_assert_cmpint (d->kind, !=, NPU_DEVICE_KIND_CPU);
      g_assert_nonnull (d->path);
      g_assert_nonnull (d->driver);
      g_assert_nonnull (d->description);
      g_assert_null (d->cpu_features);
    }
  }

  g_ptr_array_unref (devices);
}

static void
test_cpu_features (void)
{
  GPtrArray *devices = enumerate_nodes ();
  NpuDeviceInfo *cpu = g_ptr_array_index (devices, 0);
  const gchar *features = cpu->cpu_features;

#if (defined (__x86_64__) || defined (__i386__)) && defined (__GNUC__)
  __builtin_cpu_init ();
#define CHECK_FEATURE(builtin_name, our_name) \
  G_STMT_START { \
    gboolean want = __builtin_cpu_supports (builtin_name) != 0; \
    g_test_message ("%s: %d", our_name, want); \
    if (want != has_feature (features, our_name)) \
      g_error ("feature %s: __builtin_cpu_supports says %d, " \
          "cpu_features is \"%s\"", our_name, want, features); \
  } G_STMT_END

  CHECK_FEATURE ("avx2", "avx2");
  CHECK_FEATURE ("fma", "fma");
#if !defined (__clang__)
  CHECK_FEATURE ("f16c", "f16c");
#endif
  CHECK_FEATURE ("avx512f", "avx512f");
  CHECK_FEATURE ("avx512bw", "avx512bw");
  CHECK_FEATURE ("avx512vl", "avx512vl");
  CHECK_FEATURE ("avx512vnni", "avx512_vnni");
  CHECK_FEATURE ("avx512vbmi", "avx512_vbmi");
#undef CHECK_FEATURE
#elif defined (__aarch64__)
  g_assert_true (has_feature (features, "neon"));
#else
  g_test_message ("no SIMD feature check for this architecture: \"%s\"",
      features);
#endif

  g_ptr_array_unref (devices);
}

static void
test_copy (void)
{
  GPtrArray *devices = npu_device_info_enumerate ();
  guint i;

  for (i = 0; i < devices->len; i++) {
    NpuDeviceInfo *d = g_ptr_array_index (devices, i);
    g_autoptr (NpuDeviceInfo) c = npu_device_info_copy (d);

    g_assert_true (c != d);
    g_assert_cmpint (c->kind, ==, d->kind);
    g_assert_cmpstr (c->name, ==, d->name);
    g_assert_cmpstr (c->path, ==, d->path);
    g_assert_cmpstr (c->driver, ==, d->driver);
    g_assert_cmpstr (c->description, ==, d->description);
    g_assert_cmpstr (c->bus_info, ==, d->bus_info);
    g_assert_cmpuint (c->n_threads, ==, d->n_threads);
    g_assert_cmpstr (c->cpu_features, ==, d->cpu_features);
    g_assert_cmpstr (c->memory_heaps, ==, d->memory_heaps);
    g_assert_cmpstr (c->imports, ==, d->imports);
    if (d->name)
      g_assert_true (c->name != d->name);
  }
  npu_device_info_free (NULL);
  g_ptr_array_unref (devices);
}

static void
test_empty_dirs (void)
{
  gchar *dir = make_tmp_dir ();
  GPtrArray *devices;

  g_setenv (NPU_DRM_DIR_ENV, dir, TRUE);
  g_setenv (NPU_ACCEL_DIR_ENV, dir, TRUE);
  devices = enumerate_nodes ();
  g_assert_cmpuint (devices->len, ==, 1);
  g_assert_cmpint (((NpuDeviceInfo *) g_ptr_array_index (devices, 0))->kind,
      ==, NPU_DEVICE_KIND_CPU);
  g_ptr_array_unref (devices);

  /* Directories that do not exist: the same. */
  {
    gchar *missing = g_build_filename (dir, "missing", NULL);

    g_setenv (NPU_DRM_DIR_ENV, missing, TRUE);
    g_setenv (NPU_ACCEL_DIR_ENV, missing, TRUE);
    devices = enumerate_nodes ();
    g_assert_cmpuint (devices->len, ==, 1);
    g_ptr_array_unref (devices);
    g_free (missing);
  }

  /* Empty values disable the search. */
  g_setenv (NPU_DRM_DIR_ENV, "", TRUE);
  g_setenv (NPU_ACCEL_DIR_ENV, "", TRUE);
  devices = enumerate_nodes ();
  g_assert_cmpuint (devices->len, ==, 1);
  g_ptr_array_unref (devices);

  unset_dirs ();
  rm_tmp_dir (dir);
}

/* Every listed node is a character device; one that could not be queried
 * says so ("unknown" and a reason). */
static void
check_nodes_sane (GPtrArray * devices, const gchar * dir)
{
  guint i;

  for (i = 1; i < devices->len; i++) {
    NpuDeviceInfo *d = g_ptr_array_index (devices, i);
    struct stat st;

    g_test_message ("listed %s %s: driver %s, %s",
        npu_device_kind_to_string (d->kind), d->path, d->driver,
        d->description);
    g_assert_nonnull (d->path);
    g_assert_cmpint (stat (d->path, &st), ==, 0);
    g_assert_true (S_ISCHR (st.st_mode));
    g_assert_nonnull (d->driver);
    g_assert_cmpstr (d->driver, !=, "");
    g_assert_nonnull (d->description);
    g_assert_cmpstr (d->description, !=, "");
    if (dir && g_str_has_prefix (d->path, dir)) {
      /* Nothing in the test directory is a DRM device. */
      g_assert_cmpstr (d->driver, ==, "unknown");
    }
  }
}

static void
test_bogus_nodes (void)
{
  gchar *dir = make_tmp_dir ();
  gchar *path;
  GPtrArray *devices;
  GError *error = NULL;
  guint i;

  /* A regular file, a directory, a symlink to a char device that is not a
   * DRM device, a dangling symlink: nothing of it is a compute device. */
  path = g_build_filename (dir, "accel0", NULL);
  g_file_set_contents (path, "not a device", -1, &error);
  g_assert_no_error (error);
  g_free (path);

  path = g_build_filename (dir, "renderD128", NULL);
  g_file_set_contents (path, "", -1, &error);
  g_assert_no_error (error);
  g_free (path);

  path = g_build_filename (dir, "accel1", NULL);
  g_assert_cmpint (g_mkdir (path, 0700), ==, 0);
  g_free (path);

  path = g_build_filename (dir, "accel2", NULL);
  g_assert_cmpint (symlink ("/dev/null", path), ==, 0);
  g_free (path);

  path = g_build_filename (dir, "accel3", NULL);
  g_assert_cmpint (symlink ("/nonexistent/accel3", path), ==, 0);
  g_free (path);

  g_setenv (NPU_DRM_DIR_ENV, dir, TRUE);
  g_setenv (NPU_ACCEL_DIR_ENV, dir, TRUE);
  devices = enumerate_nodes ();
  g_assert_cmpuint (devices->len, >=, 1);
  g_assert_cmpint (((NpuDeviceInfo *) g_ptr_array_index (devices, 0))->kind,
      ==, NPU_DEVICE_KIND_CPU);
  check_nodes_sane (devices, dir);
  for (i = 1; i < devices->len; i++) {
    NpuDeviceInfo *d = g_ptr_array_index (devices, i);

    /* Only the symlink to /dev/null could be listed at all, and only
     * where sysfs cannot tell that it is no DRM device. */
    g_assert_true (g_str_has_suffix (d->path, "/accel2"));
  }
  if (g_file_test ("/sys/dev/char/1:3/subsystem", G_FILE_TEST_EXISTS))
    g_assert_cmpuint (devices->len, ==, 1);
  g_ptr_array_unref (devices);

  unset_dirs ();
  rm_tmp_dir (dir);
}

/* A DRM char device node with no driver behind it (root only: mknod) is
 * listed, with driver "unknown" and the reason, and nothing fails. */
static void
test_unopenable_node (void)
{
  gchar *dir, *path;
  GPtrArray *devices;
  guint i;
  gboolean listed = FALSE;

  if (!WITH_LIBDRM) {
    g_test_skip ("built without libdrm");
    return;
  }
  if (geteuid () != 0) {
    g_test_skip ("mknod needs root");
    return;
  }

  dir = make_tmp_dir ();
  path = g_build_filename (dir, "renderD255", NULL);
  /* DRM major 226; render minors are 128..191, 255 belongs to no device. */
  if (mknod (path, S_IFCHR | 0600, makedev (226, 255)) != 0) {
    g_test_skip_printf ("mknod: %s", g_strerror (errno));
    g_free (path);
    rm_tmp_dir (dir);
    return;
  }

  g_setenv (NPU_DRM_DIR_ENV, dir, TRUE);
  g_setenv (NPU_ACCEL_DIR_ENV, dir, TRUE);
  devices = enumerate_nodes ();
  check_nodes_sane (devices, dir);
  for (i = 1; i < devices->len; i++) {
    NpuDeviceInfo *d = g_ptr_array_index (devices, i);

    if (g_strcmp0 (d->path, path) == 0) {
      listed = TRUE;
      g_assert_cmpint (d->kind, ==, NPU_DEVICE_KIND_DRM_RENDER);
      g_assert_cmpstr (d->name, ==, "renderD255");
    }
  }
  /* Unless sysfs knows 226:255 as something else, it is listed. */
  if (!g_file_test ("/sys/dev/char/226:255", G_FILE_TEST_EXISTS))
    g_assert_true (listed);
  g_ptr_array_unref (devices);

  unset_dirs ();
  g_free (path);
  rm_tmp_dir (dir);
}

/* On a machine (or VM) with DRM render nodes or accel nodes, every node of
 * /dev/dri and /dev/accel is listed with its driver. */
static void
test_real_nodes (void)
{
  const gchar *dirs[] = { NPU_DRM_DIR_DEFAULT, NPU_ACCEL_DIR_DEFAULT };
  const gchar *prefixes[] = { "renderD", "accel" };
  GPtrArray *devices;
  guint k, n_nodes = 0;

  unset_dirs ();
  devices = enumerate_nodes ();
  check_nodes_sane (devices, NULL);

  for (k = 0; k < G_N_ELEMENTS (dirs); k++) {
    GDir *d = g_dir_open (dirs[k], 0, NULL);
    const gchar *name;

    if (d == NULL)
      continue;
    while ((name = g_dir_read_name (d)) != NULL) {
      gchar *path;
      struct stat st;
      gboolean listed = FALSE;
      guint i;

      if (!g_str_has_prefix (name, prefixes[k]))
        continue;
      path = g_build_filename (dirs[k], name, NULL);
      if (stat (path, &st) != 0 || !S_ISCHR (st.st_mode)) {
        g_free (path);
        continue;
      }
      n_nodes++;
      for (i = 1; i < devices->len; i++) {
        NpuDeviceInfo *info = g_ptr_array_index (devices, i);

        if (g_strcmp0 (info->path, path) == 0) {
          listed = TRUE;
          g_test_message ("%s: driver %s, bus %s, %s", path, info->driver,
              info->bus_info ? info->bus_info : "-", info->description);
          g_assert_cmpint (info->kind, ==, k == 0 ?
              NPU_DEVICE_KIND_DRM_RENDER : NPU_DEVICE_KIND_ACCEL);
          g_assert_cmpstr (info->name, ==, name);
          /* As root (tests in a VM) every node opens and answers. */
          if (geteuid () == 0)
            g_assert_cmpstr (info->driver, !=, "unknown");
        }
      }
      if (WITH_LIBDRM)
        g_assert_true (listed);
      else
        g_assert_false (listed);
      g_free (path);
    }
    g_dir_close (d);
  }

  if (n_nodes == 0)
    g_test_message ("no DRM render or accel node on this machine");
  g_ptr_array_unref (devices);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);

  g_test_add_func ("/deviceinfo/kind-to-string", test_kind_to_string);
  g_test_add_func ("/deviceinfo/cpu-first", test_cpu_first);
  g_test_add_func ("/deviceinfo/cpu-features", test_cpu_features);
  g_test_add_func ("/deviceinfo/copy", test_copy);
  g_test_add_func ("/deviceinfo/empty-dirs", test_empty_dirs);
  g_test_add_func ("/deviceinfo/bogus-nodes", test_bogus_nodes);
  g_test_add_func ("/deviceinfo/unopenable-node", test_unopenable_node);
  g_test_add_func ("/deviceinfo/real-nodes", test_real_nodes);
  g_test_add_func ("/deviceinfo/vulkan", test_vulkan);

  return g_test_run ();
}
