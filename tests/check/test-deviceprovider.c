/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: tests of the npudeviceprovider device provider */
#include <unistd.h>
#include <glib/gstdio.h>

#include <gst/gst.h>
#include <gst/check/gstcheck.h>

#include <core/device/npudeviceinfo.h>

#define PROVIDER_NAME "npudeviceprovider"

static guint
online_cpus (void)
{
  long n = sysconf (_SC_NPROCESSORS_ONLN);

  fail_unless (n > 0);
  return (guint) n;
}

static gboolean
device_is_cpu (GstDevice * device, guint * threads)
{
  GstStructure *props = gst_device_get_properties (device);
  gboolean is_cpu;

  fail_unless (props != NULL);
  is_cpu = g_strcmp0 (gst_structure_get_string (props, "device.driver"),
      "cpu") == 0;
  if (is_cpu && threads)
    fail_unless (gst_structure_get_uint (props, "device.threads", threads));
  gst_structure_free (props);
  return is_cpu;
}

GST_START_TEST (test_factory_exists)
{
  GstDeviceProviderFactory *factory;
  const gchar *klass;

  factory = gst_device_provider_factory_find (PROVIDER_NAME);
  fail_unless (factory != NULL, "no %s factory", PROVIDER_NAME);

  klass = gst_device_provider_factory_get_metadata (factory,
      GST_ELEMENT_METADATA_KLASS);
  fail_unless (klass != NULL);
  fail_unless (g_strstr_len (klass, -1, "Compute") != NULL);
  fail_unless_equals_int (gst_plugin_feature_get_rank (GST_PLUGIN_FEATURE
          (factory)), GST_RANK_PRIMARY);
  fail_unless (gst_device_provider_factory_has_classes (factory, "Compute"));

  gst_object_unref (factory);
}

GST_END_TEST;

GST_START_TEST (test_monitor_compute)
{
  GstDeviceMonitor *monitor;
  GList *devices, *l;
  gboolean found_cpu = FALSE;
  guint n_vulkan = 0;

  monitor = gst_device_monitor_new ();
  fail_unless (gst_device_monitor_add_filter (monitor, "Compute", NULL) > 0);
  fail_unless (gst_device_monitor_start (monitor));

  devices = gst_device_monitor_get_devices (monitor);
  fail_unless (devices != NULL, "the monitor lists no Compute device");

  for (l = devices; l; l = l->next) {
    GstDevice *device = l->data;
    GstStructure *props;
    GstCaps *caps, *tensors;
    gchar *name, *klass;
    guint threads = 0;

    fail_unless (gst_device_has_classes (device, "Compute"));
    klass = gst_device_get_device_class (device);
    fail_unless_equals_string (klass, "Compute/NPU");
    g_free (klass);

    name = gst_device_get_display_name (device);
    fail_unless (g_str_has_prefix (name, "gst-npu "), "display name %s", name);

    caps = gst_device_get_caps (device);
    tensors = gst_caps_from_string ("other/tensors");
    fail_unless (gst_caps_can_intersect (caps, tensors));
    gst_caps_unref (tensors);
    gst_caps_unref (caps);

    props = gst_device_get_properties (device);
    fail_unless_equals_string (gst_structure_get_string (props, "device.api"),
        "npu");
    fail_unless (gst_structure_get_string (props, "device.kind") != NULL);
    fail_unless (gst_structure_get_string (props, "device.driver") != NULL);
    gst_structure_free (props);

    if (device_is_cpu (device, &threads)) {
      GstElement *element;

      fail_if (found_cpu, "two CPU devices");
      found_cpu = TRUE;
      fail_unless_equals_int (threads, online_cpus ());
      fail_unless (g_str_has_prefix (name, "gst-npu CPU ("), "display name %s",
          name);

      props = gst_device_get_properties (device);
      fail_unless_equals_string (gst_structure_get_string (props,
              "device.kind"), "cpu");
      fail_unless (gst_structure_get_string (props,
              "device.cpu-features") != NULL);
      gst_structure_free (props);

      /* No element runs on a given device yet. */
      element = gst_device_create_element (device, NULL);
      fail_unless (element == NULL);
    }
    props = gst_device_get_properties (device);
    if (g_strcmp0 (gst_structure_get_string (props, "device.kind"),
            "vulkan") == 0) {
      const gchar *dev_name = gst_structure_get_string (props, "device.name");

      n_vulkan++;
      fail_unless (g_str_has_prefix (dev_name, "vulkan:"), "%s", dev_name);
      fail_unless (g_str_has_prefix (name, "gst-npu Vulkan device vulkan:"),
          "display name %s", name);
      fail_unless (gst_structure_get_string (props, "device.memory-heaps"));
      fail_unless (gst_structure_get_string (props, "device.imports"));
      fail_unless (gst_structure_get_string (props, "device.description"));
    }
    gst_structure_free (props);
    g_free (name);
  }
  fail_unless (found_cpu, "no device with device.driver=cpu");
  /* lavapipe in CI: its one device, with host memory import */
  if (g_strcmp0 (g_getenv ("NPU_REQUIRE_VULKAN"), "1") == 0)
    fail_unless (n_vulkan >= 1, "no Vulkan device listed");

  g_list_free_full (devices, gst_object_unref);
  gst_device_monitor_stop (monitor);
  gst_object_unref (monitor);
}

GST_END_TEST;

/* A filter on another class does not list our devices. */
GST_START_TEST (test_monitor_other_class)
{
  GstDeviceMonitor *monitor;
  GList *devices, *l;

  monitor = gst_device_monitor_new ();
  gst_device_monitor_add_filter (monitor, "Video/Source", NULL);
  gst_device_monitor_start (monitor);
  devices = gst_device_monitor_get_devices (monitor);
  for (l = devices; l; l = l->next)
    fail_if (gst_device_has_classes (l->data, "Compute"));
  g_list_free_full (devices, gst_object_unref);
  gst_device_monitor_stop (monitor);
  gst_object_unref (monitor);
}

GST_END_TEST;

static guint
count_vulkan (void)
{
  GPtrArray *infos = npu_device_info_enumerate ();
  guint i, n = 0;

  for (i = 0; i < infos->len; i++)
    n += ((NpuDeviceInfo *) g_ptr_array_index (infos, i))->kind ==
        NPU_DEVICE_KIND_VULKAN;
  g_ptr_array_unref (infos);
  return n;
}

static void
check_provider_matches_core (void)
{
  GstDeviceProvider *provider;
  GPtrArray *infos;
  GList *devices, *l;
  guint i;

  provider = gst_device_provider_factory_get_by_name (PROVIDER_NAME);
  fail_unless (provider != NULL);

  infos = npu_device_info_enumerate ();
  devices = gst_device_provider_get_devices (provider);
  fail_unless_equals_int (g_list_length (devices), infos->len);

  /* Same order, the CPU first. */
  fail_unless (devices != NULL);
  fail_unless (device_is_cpu (devices->data, NULL));
  for (l = devices, i = 0; l; l = l->next, i++) {
    const NpuDeviceInfo *info = g_ptr_array_index (infos, i);
    GstStructure *props = gst_device_get_properties (l->data);

    fail_unless_equals_string (gst_structure_get_string (props,
            "device.driver"), info->driver);
    fail_unless_equals_string (gst_structure_get_string (props,
            "device.kind"), npu_device_kind_to_string (info->kind));
    fail_unless_equals_string (gst_structure_get_string (props,
            "device.path"), info->path);
    gst_structure_free (props);
  }

  g_list_free_full (devices, gst_object_unref);
  g_ptr_array_unref (infos);
  gst_object_unref (provider);
}

GST_START_TEST (test_provider_matches_core)
{
  check_provider_matches_core ();
}

GST_END_TEST;

GST_START_TEST (test_provider_empty_dirs)
{
  GstDeviceProvider *provider;
  GList *devices;
  gchar *dir;

  dir = g_dir_make_tmp ("npu-provider-XXXXXX", NULL);
  fail_unless (dir != NULL);
  g_setenv (NPU_DRM_DIR_ENV, dir, TRUE);
  g_setenv (NPU_ACCEL_DIR_ENV, dir, TRUE);

  provider = gst_device_provider_factory_get_by_name (PROVIDER_NAME);
  fail_unless (provider != NULL);
  devices = gst_device_provider_get_devices (provider);
  /* the CPU, and the Vulkan devices, which are no nodes of those dirs */
  fail_unless_equals_int (g_list_length (devices), 1 + count_vulkan ());
  fail_unless (device_is_cpu (devices->data, NULL));
  g_list_free_full (devices, gst_object_unref);
  gst_object_unref (provider);

  check_provider_matches_core ();

  g_unsetenv (NPU_DRM_DIR_ENV);
  g_unsetenv (NPU_ACCEL_DIR_ENV);
  g_rmdir (dir);
  g_free (dir);
}

GST_END_TEST;

static Suite *
deviceprovider_suite (void)
{
  Suite *s = suite_create ("npudeviceprovider");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_add_test (tc, test_factory_exists);
  tcase_add_test (tc, test_monitor_compute);
  tcase_add_test (tc, test_monitor_other_class);
  tcase_add_test (tc, test_provider_matches_core);
  tcase_add_test (tc, test_provider_empty_dirs);

  return s;
}

GST_CHECK_MAIN (deviceprovider);
