/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: DRM render node and accel node discovery through libdrm
 *
 * See npudrm.h.  Plain C and GLib, no GStreamer types.
 */
#ifndef G_LOG_DOMAIN
#define G_LOG_DOMAIN "NpuDrm"
#endif

#include "ext/drm/npudrm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>

#include <xf86drm.h>

#define RENDER_PREFIX "renderD"
#define ACCEL_PREFIX "accel"

/* What drmGetDevices2() told us about one render node. */
typedef struct
{
  gchar *bus_info;
  gchar *ids;                   /* "PCI 8086:46a6" or NULL */
} DrmDevDetails;

static void
drm_dev_details_free (DrmDevDetails * d)
{
  g_free (d->bus_info);
  g_free (d->ids);
  g_free (d);
}

void
npu_drm_node_free (NpuDrmNode * node)
{
  if (node == NULL)
    return;
  g_free (node->name);
  g_free (node->path);
  g_free (node->driver);
  g_free (node->description);
  g_free (node->bus_info);
  g_free (node);
}

/* A copy of @dir without trailing slashes ("/" stays "/"). */
static gchar *
normalize_dir (const gchar * dir)
{
  gchar *d = g_strdup (dir);
  gsize len = strlen (d);

  while (len > 1 && d[len - 1] == G_DIR_SEPARATOR)
    d[--len] = '\0';
  return d;
}

/* TRUE if @name is @prefix followed by one or more decimal digits. */
static gboolean
node_name_matches (const gchar * name, const gchar * prefix, guint * number)
{
  const gchar *p;
  gsize plen = strlen (prefix);

  if (strncmp (name, prefix, plen) != 0 || name[plen] == '\0')
    return FALSE;
  for (p = name + plen; *p; p++) {
    if (!g_ascii_isdigit (*p))
      return FALSE;
  }
  if (number)
    *number = (guint) g_ascii_strtoull (name + plen, NULL, 10);
  return TRUE;
}

/* Basename of the target of the symlink @path, or NULL. */
static gchar *
read_link_basename (const gchar * path)
{
  gchar *target = g_file_read_link (path, NULL);
  gchar *base;

  if (target == NULL)
    return NULL;
  base = g_path_get_basename (target);
  g_free (target);
  return base;
}

static gchar *
sysfs_char_dir (dev_t rdev)
{
  return g_strdup_printf ("/sys/dev/char/%u:%u", major (rdev), minor (rdev));
}

/* The sysfs class of a char device ("drm", "accel", "mem", ...), or NULL
 * where sysfs cannot tell. */
static gchar *
sysfs_class (dev_t rdev)
{
  gchar *dir = sysfs_char_dir (rdev);
  gchar *link = g_build_filename (dir, "subsystem", NULL);
  gchar *cls = read_link_basename (link);

  g_free (link);
  g_free (dir);
  return cls;
}

/* "bus:device" of the device behind a char node, from sysfs: for example
 * "pci:0000:00:02.0" or "platform:vgem".  NULL where sysfs cannot tell. */
static gchar *
sysfs_bus_info (dev_t rdev)
{
  gchar *dir = sysfs_char_dir (rdev);
  gchar *dev_link = g_build_filename (dir, "device", NULL);
  gchar *bus_link = g_build_filename (dir, "device", "subsystem", NULL);
  gchar *dev = read_link_basename (dev_link);
  gchar *bus = read_link_basename (bus_link);
  gchar *ret = NULL;

  if (dev != NULL && bus != NULL)
    ret = g_strdup_printf ("%s:%s", bus, dev);
  else if (dev != NULL)
    ret = g_strdup (dev);

  g_free (dev);
  g_free (bus);
  g_free (bus_link);
  g_free (dev_link);
  g_free (dir);
  return ret;
}

/* Name of the kernel driver bound to the device behind a char node, from
 * sysfs, or NULL. */
static gchar *
sysfs_kernel_driver (dev_t rdev)
{
  gchar *dir = sysfs_char_dir (rdev);
  gchar *link = g_build_filename (dir, "device", "driver", NULL);
  gchar *drv = read_link_basename (link);

  g_free (link);
  g_free (dir);
  return drv;
}

static gchar *
drm_device_bus_info (drmDevicePtr dev)
{
  switch (dev->bustype) {
    case DRM_BUS_PCI:
      if (dev->businfo.pci)
        return g_strdup_printf ("pci:%04x:%02x:%02x.%u",
            dev->businfo.pci->domain, dev->businfo.pci->bus,
            dev->businfo.pci->dev, dev->businfo.pci->func);
      break;
    case DRM_BUS_USB:
      if (dev->businfo.usb)
        return g_strdup_printf ("usb:%03u:%03u", dev->businfo.usb->bus,
            dev->businfo.usb->dev);
      break;
    case DRM_BUS_PLATFORM:
      if (dev->businfo.platform)
        return g_strdup_printf ("platform:%s", dev->businfo.platform->fullname);
      break;
    case DRM_BUS_HOST1X:
      if (dev->businfo.host1x)
        return g_strdup_printf ("host1x:%s", dev->businfo.host1x->fullname);
      break;
    default:
      break;
  }
  return NULL;
}

static gchar *
drm_device_ids (drmDevicePtr dev)
{
  if (dev->bustype == DRM_BUS_PCI && dev->deviceinfo.pci)
    return g_strdup_printf ("PCI %04x:%04x", dev->deviceinfo.pci->vendor_id,
        dev->deviceinfo.pci->device_id);
  if (dev->bustype == DRM_BUS_USB && dev->deviceinfo.usb)
    return g_strdup_printf ("USB %04x:%04x", dev->deviceinfo.usb->vendor,
        dev->deviceinfo.usb->product);
  return NULL;
}

/* Render nodes that drmGetDevices2() knows of inside @drm_dir:
 * path -> DrmDevDetails. */
static GHashTable *
drm_devices_in_dir (const gchar * drm_dir)
{
  GHashTable *table = g_hash_table_new_full (g_str_hash, g_str_equal,
      g_free, (GDestroyNotify) drm_dev_details_free);
  drmDevicePtr *devices;
  int n, i;

  n = drmGetDevices2 (0, NULL, 0);
  if (n <= 0) {
    g_debug ("drmGetDevices2: %s", n == 0 ? "no devices" : g_strerror (-n));
    return table;
  }

  devices = g_new0 (drmDevicePtr, n);
  n = drmGetDevices2 (0, devices, n);
  for (i = 0; i < n; i++) {
    drmDevicePtr dev = devices[i];
    DrmDevDetails *details;
    gchar *dir;

    if (!(dev->available_nodes & (1 << DRM_NODE_RENDER)) ||
        dev->nodes[DRM_NODE_RENDER] == NULL)
      continue;

    dir = g_path_get_dirname (dev->nodes[DRM_NODE_RENDER]);
    if (strcmp (dir, drm_dir) != 0) {
      g_debug ("%s is outside %s, not listed", dev->nodes[DRM_NODE_RENDER],
          drm_dir);
      g_free (dir);
      continue;
    }
    g_free (dir);

    details = g_new0 (DrmDevDetails, 1);
    details->bus_info = drm_device_bus_info (dev);
    details->ids = drm_device_ids (dev);
    g_hash_table_replace (table, g_strdup (dev->nodes[DRM_NODE_RENDER]),
        details);
  }
  if (n > 0)
    drmFreeDevices (devices, n);
  g_free (devices);

  return table;
}

/* Opens the node and asks the driver its name; never fails: a node that
 * does not answer gets driver "unknown" and the reason as description. */
static void
probe_node (NpuDrmNode * node, const struct stat *st, const gchar * ids)
{
  drmVersionPtr version;
  int fd, err;

  fd = open (node->path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    gchar *kdrv;

    err = errno;
    kdrv = st ? sysfs_kernel_driver (st->st_rdev) : NULL;
    node->driver = g_strdup ("unknown");
    if (kdrv)
      node->description = g_strdup_printf ("cannot open %s: %s "
          "(kernel driver %s)", node->path, g_strerror (err), kdrv);
    else
      node->description = g_strdup_printf ("cannot open %s: %s", node->path,
          g_strerror (err));
    g_free (kdrv);
    g_debug ("%s", node->description);
    return;
  }

  errno = 0;
  version = drmGetVersion (fd);
  err = errno;
  close (fd);

  if (version == NULL) {
    node->driver = g_strdup ("unknown");
    node->description = g_strdup_printf ("%s does not answer "
        "DRM_IOCTL_VERSION: %s", node->path,
        err ? g_strerror (err) : "no version");
    g_debug ("%s", node->description);
    return;
  }

  if (version->name && version->name[0])
    node->driver = g_strndup (version->name, version->name_len);
  else
    node->driver = g_strdup ("unknown");

  {
    const gchar *desc = (version->desc && version->desc[0] &&
        strcmp (version->desc, "Unknown") != 0) ? version->desc : NULL;
    gchar *d = desc ? g_strndup (desc, version->desc_len) :
        g_strdup (node->driver);

    if (ids)
      node->description = g_strdup_printf ("%s (%s)", d, ids);
    else
      node->description = g_strdup (d);
    g_free (d);
  }
  node->usable = TRUE;
  drmFreeVersion (version);
}

static gint
compare_nodes (gconstpointer a, gconstpointer b)
{
  const NpuDrmNode *na = *(const NpuDrmNode * const *) a;
  const NpuDrmNode *nb = *(const NpuDrmNode * const *) b;
  const gchar *prefix = na->type == NPU_DRM_NODE_RENDER ?
      RENDER_PREFIX : ACCEL_PREFIX;
  guint ia = 0, ib = 0;

  if (na->type != nb->type)
    return na->type < nb->type ? -1 : 1;
  node_name_matches (na->name, prefix, &ia);
  node_name_matches (nb->name, prefix, &ib);
  if (ia != ib)
    return ia < ib ? -1 : 1;
  return strcmp (na->path, nb->path);
}

/* Adds the char devices named @prefix<N> in @dir to @nodes.  Entries
 * already in @seen (paths) are skipped; @drm_details may give the bus. */
static void
scan_dir (GPtrArray * nodes, const gchar * dir, const gchar * prefix,
    NpuDrmNodeType type, const gchar * expected_class,
    GHashTable * drm_details, GHashTable * seen)
{
  GDir *gdir;
  GError *error = NULL;
  const gchar *name;

  gdir = g_dir_open (dir, 0, &error);
  if (gdir == NULL) {
    g_debug ("not scanning %s: %s", dir, error->message);
    g_clear_error (&error);
    return;
  }

  while ((name = g_dir_read_name (gdir)) != NULL) {
    gchar *path, *cls;
    struct stat st;
    NpuDrmNode *node;
    DrmDevDetails *details;

    if (!node_name_matches (name, prefix, NULL))
      continue;

    path = g_build_filename (dir, name, NULL);
    if (g_hash_table_contains (seen, path)) {
      g_free (path);
      continue;
    }
    if (stat (path, &st) != 0) {
      g_debug ("skipping %s: %s", path, g_strerror (errno));
      g_free (path);
      continue;
    }
    if (!S_ISCHR (st.st_mode)) {
      g_debug ("skipping %s: not a character device", path);
      g_free (path);
      continue;
    }
    /* Where sysfs can tell, the node must belong to the DRM or accel
     * class: a stray char device named like a node is not listed. */
    cls = sysfs_class (st.st_rdev);
    if (cls != NULL && strcmp (cls, expected_class) != 0) {
      g_debug ("skipping %s: device %u:%u is of class %s, not %s", path,
          major (st.st_rdev), minor (st.st_rdev), cls, expected_class);
      g_free (cls);
      g_free (path);
      continue;
    }
    g_free (cls);

    details = drm_details ? g_hash_table_lookup (drm_details, path) : NULL;

    node = g_new0 (NpuDrmNode, 1);
    node->type = type;
    node->name = g_strdup (name);
    node->path = path;
    node->bus_info = details && details->bus_info ?
        g_strdup (details->bus_info) : sysfs_bus_info (st.st_rdev);
    probe_node (node, &st, details ? details->ids : NULL);
    g_ptr_array_add (nodes, node);
    g_hash_table_add (seen, g_strdup (path));
  }
  g_dir_close (gdir);
}

GPtrArray *
npu_drm_enumerate_nodes (const gchar * drm_dir, const gchar * accel_dir)
{
  GPtrArray *nodes = g_ptr_array_new_with_free_func ((GDestroyNotify)
      npu_drm_node_free);
  GHashTable *seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
      NULL);

  if (drm_dir != NULL && drm_dir[0] != '\0') {
    gchar *dir = normalize_dir (drm_dir);
    GHashTable *details = drm_devices_in_dir (dir);
    GHashTableIter iter;
    gpointer key, value;

    scan_dir (nodes, dir, RENDER_PREFIX, NPU_DRM_NODE_RENDER, "drm", details,
        seen);

    /* Anything libdrm listed that the scan did not see (it should not
     * happen, but libdrm is the reference for render nodes). */
    g_hash_table_iter_init (&iter, details);
    while (g_hash_table_iter_next (&iter, &key, &value)) {
      const gchar *path = key;
      DrmDevDetails *d = value;
      NpuDrmNode *node;
      gchar *base;

      if (g_hash_table_contains (seen, path))
        continue;
      base = g_path_get_basename (path);
      if (!node_name_matches (base, RENDER_PREFIX, NULL)) {
        g_free (base);
        continue;
      }
      node = g_new0 (NpuDrmNode, 1);
      node->type = NPU_DRM_NODE_RENDER;
      node->name = base;
      node->path = g_strdup (path);
      node->bus_info = g_strdup (d->bus_info);
      probe_node (node, NULL, d->ids);
      g_ptr_array_add (nodes, node);
      g_hash_table_add (seen, g_strdup (path));
    }

    g_hash_table_unref (details);
    g_free (dir);
  }

  if (accel_dir != NULL && accel_dir[0] != '\0') {
    gchar *dir = normalize_dir (accel_dir);

    scan_dir (nodes, dir, ACCEL_PREFIX, NPU_DRM_NODE_ACCEL, "accel", NULL,
        seen);
    g_free (dir);
  }

  g_hash_table_unref (seen);
  g_ptr_array_sort (nodes, compare_nodes);

  return nodes;
}
