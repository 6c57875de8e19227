/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: energy meters of the machine (powercap/RAPL, hwmon)
 *
 * Finds the energy counters and power sensors the kernel offers under one
 * sysfs root ($NPU_SYSFS_ROOT, default /sys, so that tests can lay out a
 * tree of their own):
 *
 * - powercap zones (class/powercap/<zone>/energy_uj, in microjoules, with
 *   max_energy_range_uj, where the counter wraps back to zero): Intel's and
 *   AMD's RAPL package, core, uncore, dram and psys domains;
 * - hwmon power sensors (class/hwmon/hwmonN/powerM_input, in microwatts):
 *   boards' INA2xx/INA3221 rails, ACPI power meters.
 *
 * A sample reads every domain at once; the joules between two samples are
 * the counter's difference (wrapped once at most) for an energy counter,
 * and the mean of the two readings times the time between them for a
 * power sensor, which is exact only when the power held between them.
 * A domain that cannot be read (energy_uj is root's alone on kernels since
 * 5.10, a sensor gone away) is left out when the meter is made, or marked
 * unread in the sample where it failed.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_ENERGY_H__
#define __NPU_ENERGY_H__

#include <glib.h>
#include "npuapi.h"

G_BEGIN_DECLS

typedef struct _NpuEnergyMeter NpuEnergyMeter;

/**
 * NpuEnergyKind:
 * @NPU_ENERGY_COUNTER: an energy counter in microjoules (powercap)
 * @NPU_ENERGY_POWER: a power sensor in microwatts (hwmon)
 */
typedef enum
{
  NPU_ENERGY_COUNTER,
  NPU_ENERGY_POWER,
} NpuEnergyKind;

/**
 * NpuEnergySample:
 * @time_ns: CLOCK_MONOTONIC when it was read
 * @n: the meter's domains
 * @value: each domain's reading (microjoules or microwatts)
 * @read: whether that domain could be read
 */
typedef struct
{
  gint64 time_ns;
  guint n;
  guint64 *value;
  gboolean *read;
} NpuEnergySample;

NPU_API
NpuEnergyMeter *npu_energy_meter_new (const gchar * sysfs_root);
NPU_API
void npu_energy_meter_free (NpuEnergyMeter * meter);
NPU_API
guint npu_energy_meter_get_n_domains (NpuEnergyMeter * meter);
NPU_API
const gchar *npu_energy_meter_get_domain_name (NpuEnergyMeter * meter,
    guint domain);
NPU_API
NpuEnergyKind npu_energy_meter_get_domain_kind (NpuEnergyMeter * meter,
    guint domain);

NPU_API
NpuEnergySample *npu_energy_sample_new (NpuEnergyMeter * meter);
NPU_API
void npu_energy_sample_free (NpuEnergySample * sample);
NPU_API
void npu_energy_meter_read (NpuEnergyMeter * meter, NpuEnergySample * sample);
NPU_API
gboolean npu_energy_meter_joules (NpuEnergyMeter * meter,
    const NpuEnergySample * before, const NpuEnergySample * after,
    guint domain, gdouble * joules);

G_END_DECLS

#endif /* __NPU_ENERGY_H__ */
