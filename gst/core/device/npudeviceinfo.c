/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: compute device discovery
 *
 * See npudeviceinfo.h.  GLib only, no GStreamer types.
 */
#include "config.h"

#include "npudeviceinfo.h"
#include "core/cpu/npucpu.h"

#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>

/* config.h has "#define HAVE_LIBDRM" (or "1") when libdrm was found and
 * "#undef HAVE_LIBDRM" (or "0") when not: accept every spelling. */
#if defined (HAVE_LIBDRM) && (0 - HAVE_LIBDRM - 1 != -1)
#define NPU_WITH_LIBDRM 1
#include "ext/drm/npudrm.h"
#else
#define NPU_WITH_LIBDRM 0
#endif

#include "npubackend-private.h"
#if NPU_HAVE_VULKAN
#include "ext/vulkan/npuvk.h"
#endif

#define CPUINFO_PATH "/proc/cpuinfo"

const gchar *
npu_device_kind_to_string (NpuDeviceKind kind)
{
  switch (kind) {
    case NPU_DEVICE_KIND_CPU:
      return "cpu";
    case NPU_DEVICE_KIND_DRM_RENDER:
      return "drm-render";
    case NPU_DEVICE_KIND_ACCEL:
      return "accel";
    case NPU_DEVICE_KIND_VULKAN:
      return "vulkan";
    default:
      return "unknown";
  }
}

void
npu_device_info_free (NpuDeviceInfo * info)
{
  if (info == NULL)
    return;
  g_free (info->name);
  g_free (info->path);
  g_free (info->driver);
  g_free (info->description);
  g_free (info->bus_info);
  g_free (info->cpu_features);
  g_free (info->memory_heaps);
  g_free (info->imports);
  g_free (info);
}

NpuDeviceInfo *
npu_device_info_copy (const NpuDeviceInfo * info)
{
  NpuDeviceInfo *copy;

  g_return_val_if_fail (info != NULL, NULL);

  copy = g_new0 (NpuDeviceInfo, 1);
  copy->kind = info->kind;
  copy->name = g_strdup (info->name);
  copy->path = g_strdup (info->path);
  copy->driver = g_strdup (info->driver);
  copy->description = g_strdup (info->description);
  copy->bus_info = g_strdup (info->bus_info);
  copy->n_threads = info->n_threads;
  copy->cpu_features = g_strdup (info->cpu_features);
  copy->memory_heaps = g_strdup (info->memory_heaps);
  copy->imports = g_strdup (info->imports);
  return copy;
}

/* The CPU model from /proc/cpuinfo ("model name" on x86, "Model" or
 * "Hardware" on Arm boards), or NULL. */
static gchar *
read_cpu_model (void)
{
  static const gchar *const keys[] = { "model name", "Model", "Hardware",
    "cpu model", NULL
  };
  gchar *contents = NULL;
  gchar **lines;
  gchar *found[G_N_ELEMENTS (keys)] = { NULL, };
  gchar *ret = NULL;
  guint i, k;

  if (!g_file_get_contents (CPUINFO_PATH, &contents, NULL, NULL))
    return NULL;

  lines = g_strsplit (contents, "\n", -1);
  for (i = 0; lines[i] != NULL; i++) {
    gchar *colon = strchr (lines[i], ':');
    gchar *key, *value;

    if (colon == NULL)
      continue;
    key = g_strstrip (g_strndup (lines[i], colon - lines[i]));
    value = g_strstrip (g_strdup (colon + 1));
    for (k = 0; keys[k] != NULL; k++) {
      if (found[k] == NULL && value[0] != '\0' && strcmp (key, keys[k]) == 0) {
        found[k] = value;
        value = NULL;
        break;
      }
    }
    g_free (value);
    g_free (key);
  }

  for (k = 0; keys[k] != NULL; k++) {
    if (ret == NULL && found[k] != NULL)
      ret = g_strdup (found[k]);
    g_free (found[k]);
  }

  g_strfreev (lines);
  g_free (contents);
  return ret;
}

static guint
online_cpus (void)
{
  long n = sysconf (_SC_NPROCESSORS_ONLN);

  return n > 0 ? (guint) n : 1;
}

static NpuDeviceInfo *
cpu_device_info (void)
{
  NpuDeviceInfo *info = g_new0 (NpuDeviceInfo, 1);
  gchar *model = read_cpu_model ();

  info->kind = NPU_DEVICE_KIND_CPU;
  info->name = g_strdup ("CPU");
  info->driver = g_strdup ("cpu");
  info->n_threads = online_cpus ();
  info->cpu_features = npu_cpu_features_to_string (npu_cpu_detect ());
  if (model != NULL) {
    info->description = model;
  } else {
    struct utsname u;

    if (uname (&u) == 0)
      info->description = g_strdup_printf ("%s CPU", u.machine);
    else
      info->description = g_strdup ("CPU");
  }
  return info;
}

/* The directory an env var names, its default when unset, NULL when set to
 * the empty string (that search disabled). */
static const gchar *
device_dir (const gchar * env, const gchar * def)
{
  const gchar *dir = g_getenv (env);

  if (dir == NULL)
    return def;
  if (dir[0] == '\0')
    return NULL;
  return dir;
}

#if NPU_HAVE_VULKAN
static NpuDeviceInfo *
vulkan_device_info (const NpuVkDeviceInfo * vk)
{
  NpuDeviceInfo *info = g_new0 (NpuDeviceInfo, 1);
  GString *heaps = g_string_new (NULL), *imports = g_string_new (NULL);
  guint i;

  info->kind = NPU_DEVICE_KIND_VULKAN;
  info->name = g_strdup_printf ("vulkan:%u", vk->index);
  info->driver = g_strdup (vk->driver);
  info->description = g_strdup_printf ("%s, %s, %s, Vulkan %u.%u", vk->name,
      vk->driver_info && *vk->driver_info ? vk->driver_info : "no version",
      vk->type, vk->api_version >> 22, (vk->api_version >> 12) & 0x3ff);
  for (i = 0; i < vk->n_heaps; i++)
    g_string_append_printf (heaps, "%s%.1f GiB%s", i ? ", " : "",
        vk->heap_size[i] / (1024.0 * 1024 * 1024),
        vk->heap_device_local[i] ? " device-local" : "");
  if (vk->host_import)
    g_string_append (imports, "host-memory ");
  if (vk->dmabuf_import)
    g_string_append (imports, "dma-buf ");
  if (vk->sync_fd)
    g_string_append (imports, "sync-fd ");
  if (vk->int_dot)
    g_string_append (imports, "int-dot ");
  if (imports->len)
    g_string_truncate (imports, imports->len - 1);
  info->memory_heaps = g_string_free (heaps, FALSE);
  info->imports = g_string_free (imports, FALSE);
  return info;
}

/* Every Vulkan device with a compute queue; none where no loader or
 * driver answers (said in the debug log) */
static void
add_vulkan_devices (GPtrArray * devices)
{
  GError *error = NULL;
  GPtrArray *list = npu_vk_list_devices (&error);
  guint i;

  if (!list) {
    g_debug ("no Vulkan devices: %s", error->message);
    g_error_free (error);
    return;
  }
  for (i = 0; i < list->len; i++) {
    const NpuVkDeviceInfo *vk = g_ptr_array_index (list, i);

    if (vk->has_compute)
      g_ptr_array_add (devices, vulkan_device_info (vk));
  }
  g_ptr_array_unref (list);
}
#endif

GPtrArray *
npu_device_info_enumerate (void)
{
  GPtrArray *devices = g_ptr_array_new_with_free_func ((GDestroyNotify)
      npu_device_info_free);
  const gchar *drm_dir = device_dir (NPU_DRM_DIR_ENV, NPU_DRM_DIR_DEFAULT);
  const gchar *accel_dir = device_dir (NPU_ACCEL_DIR_ENV,
      NPU_ACCEL_DIR_DEFAULT);

  g_ptr_array_add (devices, cpu_device_info ());

#if NPU_WITH_LIBDRM
  {
    GPtrArray *nodes = npu_drm_enumerate_nodes (drm_dir, accel_dir);
    guint i;

    for (i = 0; i < nodes->len; i++) {
      NpuDrmNode *node = g_ptr_array_index (nodes, i);
      NpuDeviceInfo *info = g_new0 (NpuDeviceInfo, 1);

      info->kind = node->type == NPU_DRM_NODE_ACCEL ?
          NPU_DEVICE_KIND_ACCEL : NPU_DEVICE_KIND_DRM_RENDER;
      info->name = g_strdup (node->name);
      info->path = g_strdup (node->path);
      info->driver = g_strdup (node->driver);
      info->description = g_strdup (node->description);
      info->bus_info = g_strdup (node->bus_info);
      g_ptr_array_add (devices, info);
    }
    g_ptr_array_unref (nodes);
  }
#else
  g_debug ("built without libdrm: not searching %s and %s for devices",
      drm_dir ? drm_dir : "(none)", accel_dir ? accel_dir : "(none)");
#endif
#if NPU_HAVE_VULKAN
  add_vulkan_devices (devices);
#endif

  return devices;
}
