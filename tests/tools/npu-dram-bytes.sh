#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# npu-dram-bytes: the DRAM bytes the memory controller measured during a
# command, beside the bytes the elements counted (their stats messages).
#
#   tests/tools/npu-dram-bytes.sh gst-launch-1.0 -m PIPELINE...
#
# The command runs under `perf stat -a` with the memory controller's own
# counters, where the machine has a PMU for them:
#   - Intel's integrated memory controllers (uncore_imc, uncore_imc_N:
#     cas_count_read and cas_count_write, one 64-byte line a CAS, scaled
#     to MiB by the PMU's own .scale and .unit files; bare metal only);
#   - Rockchip's DDR monitor (rockchip_ddr: read-bytes and write-bytes,
#     Linux 6.7 on, RK3399 / RK3568 / RK3588).
# Other SoCs' DDR PMUs (i.MX8's imx8_ddr counts bursts in units that
# depend on the DDR's width) are not read yet: the tool says it found
# none.  The counted bytes are the sums of the `bytes-total` fields of
# the command's element messages (gst-launch-1.0 -m prints them: npullm's
# prompt- and decode- ones, each encoder unit's own, not the running
# sum- ones): what the compute core counted, every byte once across the
# memory interface.
# The measured bytes are the whole machine's during the run (every
# process, and the caches' write-backs), so they are larger.
#
# NPU_SYSFS_ROOT (default /sys) is where the PMUs are looked for and
# PERF (default perf) the perf program: tests/unit/test-dram-bytes.sh
# sets both.
set -eu

sysfs=${NPU_SYSFS_ROOT:-/sys}
perf=${PERF:-perf}
pmus=$sysfs/bus/event_source/devices

if [ $# -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGS...] (gst-launch-1.0 -m ...)" >&2
  exit 2
fi

# The events of every memory-controller PMU found, comma-separated.
events=
for dev in "$pmus"/uncore_imc "$pmus"/uncore_imc_[0-9]* "$pmus"/rockchip_ddr; do
  [ -d "$dev" ] || continue
  pmu=$(basename "$dev")
  case $pmu in
    uncore_imc*) rd=cas_count_read wr=cas_count_write ;;
    rockchip_ddr) rd=read-bytes wr=write-bytes ;;
  esac
  [ -e "$dev/events/$rd" ] && [ -e "$dev/events/$wr" ] || continue
  events="$events${events:+,}$pmu/$rd/,$pmu/$wr/"
done

out=$(mktemp)
counts=$(mktemp)
trap 'rm -f "$out" "$counts"' EXIT

status=0
if [ -n "$events" ]; then
  "$perf" stat -a -x, -e "$events" -o "$counts" -- "$@" > "$out" || status=$?
else
  "$@" > "$out" || status=$?
fi
cat "$out"

# bytes-total=(guint64)N of every message, summed: npullm's prompt- and
# decode- fields, the encoders' per-unit ones (not their running sum-)
counted=$(grep -oE '(^|[ ,])(prompt-|decode-)?bytes-total=\(guint64\)[0-9]+' \
  "$out" | sed 's/.*)//' | awk '{ s += $1 } END { printf "%.0f", s }')
echo "counted by the elements: $counted bytes"

if [ -z "$events" ]; then
  echo "measured: no memory-controller counters on this machine" \
    "(no uncore_imc or rockchip_ddr PMU under $pmus)"
  exit $status
fi

# perf's CSV: value,unit,event,...; values scaled to the PMU's unit
# (MiB for the Intel CAS counts), "<not counted>" when a counter failed.
awk -F, -v counted="$counted" '
  /^#/ || NF < 3 { next }
  {
    if ($1 !~ /^[0-9.]+$/) { bad = bad " " $3; next }
    mult = 1
    if ($2 == "MiB") mult = 1048576
    else if ($2 == "KiB") mult = 1024
    else if ($2 == "GiB") mult = 1073741824
    v = $1 * mult
    if ($3 ~ /read/) rd += v; else wr += v
  }
  END {
    if (bad != "") { print "measured: counters not counted:" bad; exit 1 }
    printf "measured by the memory controller: %.0f bytes read, %.0f written, %.0f in all\n", rd, wr, rd + wr
    if (counted > 0)
      printf "measured / counted: %.2f\n", (rd + wr) / counted
  }' "$counts" || status=1
exit $status
