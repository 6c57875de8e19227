/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: energy meters (see npuenergy.h) */
#include "npuenergy.h"
#include "npuevents.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct
{
  gchar *name;                  /* "package-0", "hwmon0 power1 (VDD_IN)" */
  gchar *path;                  /* the file read for a sample */
  NpuEnergyKind kind;
  guint64 max_range;            /* a counter's wrap, 0 when unknown */
} Domain;

struct _NpuEnergyMeter
{
  GPtrArray *domains;           /* Domain */
};

/* One unsigned decimal from @path (a sysfs attribute: a number and a line
 * break), read with one read() as sysfs wants. */
static gboolean
read_u64 (const gchar * path, guint64 * value)
{
  gchar buf[32], *end;
  ssize_t n;
  int fd = open (path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return FALSE;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return FALSE;
  buf[n] = '\0';
  errno = 0;
  *value = g_ascii_strtoull (buf, &end, 10);
  return end != buf && errno == 0 && (*end == '\0' || *end == '\n');
}

/* The first line of @path, or NULL */
static gchar *
read_line (const gchar * path)
{
  gchar *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  g_strchomp (text);
  return text;
}

static void
domain_free (gpointer data)
{
  Domain *d = data;

  g_free (d->name);
  g_free (d->path);
  g_free (d);
}

static gint
domain_cmp (gconstpointer a, gconstpointer b)
{
  const Domain *x = *(Domain * const *) a, *y = *(Domain * const *) b;

  return strcmp (x->path, y->path);
}

/* A powercap zone: its energy_uj must be readable now (not root's alone) */
static void
add_powercap_zone (NpuEnergyMeter * m, const gchar * dir, const gchar * zone)
{
  gchar *path = g_build_filename (dir, zone, "energy_uj", NULL);
  gchar *range = g_build_filename (dir, zone, "max_energy_range_uj", NULL);
  gchar *namefile = g_build_filename (dir, zone, "name", NULL);
  gchar *name = read_line (namefile);
  guint64 v;
  Domain *d;

  if (!read_u64 (path, &v)) {
    g_debug ("energy: %s cannot be read (%s), left out", path,
        g_strerror (errno));
    g_free (path);
    goto out;
  }
  d = g_new0 (Domain, 1);
  d->path = path;
  d->kind = NPU_ENERGY_COUNTER;
  d->name = name ? g_strdup (name) : g_strdup (zone);
  if (!read_u64 (range, &d->max_range))
    d->max_range = 0;
  g_ptr_array_add (m->domains, d);
out:
  g_free (range);
  g_free (namefile);
  g_free (name);
}

/* A hwmon device's powerN_input sensors */
static void
add_hwmon_device (NpuEnergyMeter * m, const gchar * dir, const gchar * dev)
{
  gchar *devdir = g_build_filename (dir, dev, NULL);
  gchar *namefile = g_build_filename (devdir, "name", NULL);
  gchar *chip = read_line (namefile);
  GDir *d = g_dir_open (devdir, 0, NULL);
  const gchar *f;

  while (d && (f = g_dir_read_name (d))) {
    gchar *path, *labelfile, *label, *stem;
    guint64 v;
    Domain *dom;

    if (!g_str_has_prefix (f, "power") || !g_str_has_suffix (f, "_input"))
      continue;
    path = g_build_filename (devdir, f, NULL);
    if (!read_u64 (path, &v)) {
      g_debug ("energy: %s cannot be read, left out", path);
      g_free (path);
      continue;
    }
    stem = g_strndup (f, strlen (f) - strlen ("_input"));
    labelfile = g_strdup_printf ("%s/%s_label", devdir, stem);
    label = read_line (labelfile);
    dom = g_new0 (Domain, 1);
    dom->path = path;
    dom->kind = NPU_ENERGY_POWER;
    dom->name = label ? g_strdup_printf ("%s %s (%s)", chip ? chip : dev,
        stem, label) : g_strdup_printf ("%s %s", chip ? chip : dev, stem);
    g_ptr_array_add (m->domains, dom);
    g_free (stem);
    g_free (labelfile);
    g_free (label);
  }
  if (d)
    g_dir_close (d);
  g_free (chip);
  g_free (namefile);
  g_free (devdir);
}

static void
scan (NpuEnergyMeter * m, const gchar * root, const gchar * class,
    void (*add) (NpuEnergyMeter *, const gchar *, const gchar *))
{
  gchar *dir = g_build_filename (root, "class", class, NULL);
  GDir *d = g_dir_open (dir, 0, NULL);
  const gchar *e;

  while (d && (e = g_dir_read_name (d)))
    add (m, dir, e);
  if (d)
    g_dir_close (d);
  g_free (dir);
}

/**
 * npu_energy_meter_new:
 * @sysfs_root: (nullable): where sysfs is; NULL: $NPU_SYSFS_ROOT, or /sys
 *
 * Returns: (transfer full): a meter of the domains that can be read now,
 * perhaps none (npu_energy_meter_get_n_domains()).
 */
NpuEnergyMeter *
npu_energy_meter_new (const gchar * sysfs_root)
{
  NpuEnergyMeter *m = g_new0 (NpuEnergyMeter, 1);
  const gchar *root = sysfs_root ? sysfs_root : g_getenv ("NPU_SYSFS_ROOT");

  if (!root || !*root)
    root = "/sys";
  m->domains = g_ptr_array_new_with_free_func (domain_free);
  scan (m, root, "powercap", add_powercap_zone);
  scan (m, root, "hwmon", add_hwmon_device);
  /* the same order whatever order the directory lists them in */
  g_ptr_array_sort (m->domains, domain_cmp);
  return m;
}

void
npu_energy_meter_free (NpuEnergyMeter * meter)
{
  if (!meter)
    return;
  g_ptr_array_unref (meter->domains);
  g_free (meter);
}

guint
npu_energy_meter_get_n_domains (NpuEnergyMeter * meter)
{
  return meter->domains->len;
}

const gchar *
npu_energy_meter_get_domain_name (NpuEnergyMeter * meter, guint domain)
{
  g_return_val_if_fail (domain < meter->domains->len, NULL);
  return ((Domain *) g_ptr_array_index (meter->domains, domain))->name;
}

NpuEnergyKind
npu_energy_meter_get_domain_kind (NpuEnergyMeter * meter, guint domain)
{
  g_return_val_if_fail (domain < meter->domains->len, NPU_ENERGY_COUNTER);
  return ((Domain *) g_ptr_array_index (meter->domains, domain))->kind;
}

NpuEnergySample *
npu_energy_sample_new (NpuEnergyMeter * meter)
{
  NpuEnergySample *s = g_new0 (NpuEnergySample, 1);

  s->n = meter->domains->len;
  s->value = g_new0 (guint64, MAX (s->n, 1));
  s->read = g_new0 (gboolean, MAX (s->n, 1));
  return s;
}

void
npu_energy_sample_free (NpuEnergySample * sample)
{
  if (!sample)
    return;
  g_free (sample->value);
  g_free (sample->read);
  g_free (sample);
}

/**
 * npu_energy_meter_read:
 * @sample: from npu_energy_sample_new() for this meter
 *
 * Reads every domain, and the time.
 */
void
npu_energy_meter_read (NpuEnergyMeter * meter, NpuEnergySample * sample)
{
  guint i;

  g_return_if_fail (sample->n == meter->domains->len);
  sample->time_ns = npu_events_now_ns ();
  for (i = 0; i < sample->n; i++) {
    Domain *d = g_ptr_array_index (meter->domains, i);

    sample->read[i] = read_u64 (d->path, &sample->value[i]);
  }
}

/**
 * npu_energy_meter_joules:
 * @before: a sample
 * @after: a later sample
 * @joules: (out): the energy of @domain between them
 *
 * A counter that went down wrapped at its max_energy_range_uj (once: RAPL
 * wraps after minutes at the least, and samples around a task are
 * milliseconds apart); one without a known range cannot be said.
 *
 * Returns: %FALSE when @domain was unread in either sample, or wrapped
 * with no range known.
 */
gboolean
npu_energy_meter_joules (NpuEnergyMeter * meter,
    const NpuEnergySample * before, const NpuEnergySample * after,
    guint domain, gdouble * joules)
{
  Domain *d;
  guint64 a, b;

  g_return_val_if_fail (domain < meter->domains->len, FALSE);
  if (!before->read[domain] || !after->read[domain])
    return FALSE;
  d = g_ptr_array_index (meter->domains, domain);
  a = before->value[domain];
  b = after->value[domain];
  if (d->kind == NPU_ENERGY_POWER) {
    /* microwatts times nanoseconds: 1e-15 J */
    *joules = ((gdouble) a + (gdouble) b) / 2.0 *
        (gdouble) (after->time_ns - before->time_ns) * 1e-15;
    return TRUE;
  }
  if (b >= a) {
    *joules = (gdouble) (b - a) * 1e-6;
    return TRUE;
  }
  if (d->max_range == 0 || a > d->max_range)
    return FALSE;
  /* the counter runs up to max_range, then from 0 again (the kernel's
   * range is the hardware counter's, to within one of its units: tens of
   * microjoules lost at a wrap, minutes apart) */
  *joules = (gdouble) (d->max_range - a + b) * 1e-6;
  return TRUE;
}
