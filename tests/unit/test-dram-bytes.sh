#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# tests/tools/npu-dram-bytes.sh on PMU trees laid out as the kernel lays
# them (bus/event_source/devices/PMU/events/EVENT, with .scale and .unit),
# with a stand-in perf that writes the CSV `perf stat -x,` writes: which
# events the tool asks for, how it turns perf's MiB into bytes and sums
# the controllers, the elements' counted bytes beside them, a counter
# perf could not count, a machine without counters, and the command's
# exit status passed on.  (The counters themselves need bare metal.)
set -eu

tool=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

fail() {
  echo "FAIL: $*"
  fails=$((fails + 1))
}

# expect NAME OUTPUT LINE: OUTPUT has LINE, whole
expect() {
  if ! printf '%s\n' "$2" | grep -qxF "$3"; then
    fail "$1: no line '$3' in:"
    printf '%s\n' "$2" | sed 's/^/    /'
  fi
}

# The command the tool runs: two answers' stats and an encoder unit's
# (whose running sum- field is not added again) as gst-launch-1.0 -m
# prints them, then its exit status ($1)
cat > "$tmp/cmd" <<'EOF'
#!/bin/sh
echo 'Got message #12 from element "npullm0" (element): npullm-stats, ttft-ms=(double)1.5, prompt-bytes-total=(guint64)1000, decode-bytes-total=(guint64)234;'
echo 'Got message #20 from element "npullm0" (element): npullm-stats, ttft-ms=(double)1.2, prompt-bytes-total=(guint64)500, decode-bytes-total=(guint64)66;'
echo 'Got message #21 from element "npuvisiontok0" (element): npuvisiontok-stats, units=(guint64)2, bytes-total=(guint64)4000, energy-estimate-uj=(double)0.16, sum-bytes-total=(guint64)8000;'
exit "${1:-0}"
EOF
chmod +x "$tmp/cmd"

# A perf that records its -e and writes $PERF_CSV to -o, then runs the
# command as perf stat does
cat > "$tmp/perf" <<'EOF'
#!/bin/sh
o=
while [ $# -gt 0 ]; do
  case $1 in
    -e) echo "$2" > "$PERF_EVENTS"; shift 2 ;;
    -o) o=$2; shift 2 ;;
    --) shift; break ;;
    *) shift ;;
  esac
done
printf '# started on today\n\n%s\n' "$PERF_CSV" > "$o"
exec "$@"
EOF
chmod +x "$tmp/perf"
export PERF="$tmp/perf" PERF_EVENTS="$tmp/events"

pmu() {
  d=$tmp/$1/bus/event_source/devices/$2/events
  mkdir -p "$d"
  for e in $3 $4; do
    echo "event=0x04,umask=0x03" > "$d/$e"
    [ -z "${5:-}" ] || echo "$5" > "$d/$e.unit"
  done
}

# 1. no PMU: the counted bytes, and it says there is nothing to measure
mkdir -p "$tmp/none/bus/event_source/devices/cpu"
out=$(NPU_SYSFS_ROOT=$tmp/none sh "$tool" "$tmp/cmd")
expect none "$out" "counted by the elements: 5800 bytes"
expect none "$out" "measured: no memory-controller counters on this machine (no uncore_imc or rockchip_ddr PMU under $tmp/none/bus/event_source/devices)"

# 2. two Intel controllers, in MiB: 1.5 + 0.25 MiB read, 0.5 + 0.125 written
pmu intel uncore_imc_0 cas_count_read cas_count_write MiB
pmu intel uncore_imc_1 cas_count_read cas_count_write MiB
mkdir -p "$tmp/intel/bus/event_source/devices/uncore_cha_0/events"
export PERF_CSV="1.50,MiB,uncore_imc_0/cas_count_read/,1000,100.00,,
0.50,MiB,uncore_imc_0/cas_count_write/,1000,100.00,,
0.25,MiB,uncore_imc_1/cas_count_read/,1000,100.00,,
0.125,MiB,uncore_imc_1/cas_count_write/,1000,100.00,,"
out=$(NPU_SYSFS_ROOT=$tmp/intel sh "$tool" "$tmp/cmd")
expect intel "$out" "counted by the elements: 5800 bytes"
expect intel "$out" "measured by the memory controller: 1835008 bytes read, 655360 written, 2490368 in all"
expect intel "$out" "measured / counted: 429.37"
expect intel-events "$(cat "$PERF_EVENTS")" \
  "uncore_imc_0/cas_count_read/,uncore_imc_0/cas_count_write/,uncore_imc_1/cas_count_read/,uncore_imc_1/cas_count_write/"

# 3. Rockchip's DDR monitor counts bytes
pmu rk rockchip_ddr read-bytes write-bytes
export PERF_CSV="3000,,rockchip_ddr/read-bytes/,1000,100.00,,
1000,,rockchip_ddr/write-bytes/,1000,100.00,,"
out=$(NPU_SYSFS_ROOT=$tmp/rk sh "$tool" "$tmp/cmd")
expect rk "$out" "measured by the memory controller: 3000 bytes read, 1000 written, 4000 in all"
expect rk-events "$(cat "$PERF_EVENTS")" "rockchip_ddr/read-bytes/,rockchip_ddr/write-bytes/"

# 4. a counter perf could not count: said, and the tool fails
export PERF_CSV="<not counted>,MiB,uncore_imc_0/cas_count_read/,0,0.00,,
0.50,MiB,uncore_imc_0/cas_count_write/,1000,100.00,,"
st=0
out=$(NPU_SYSFS_ROOT=$tmp/intel sh "$tool" "$tmp/cmd") || st=$?
expect not-counted "$out" "measured: counters not counted: uncore_imc_0/cas_count_read/"
[ "$st" = 1 ] || fail "not-counted: exit status $st, not 1"

# 5. the command's exit status comes back, with and without counters
st=0
NPU_SYSFS_ROOT=$tmp/none sh "$tool" "$tmp/cmd" 3 > /dev/null || st=$?
[ "$st" = 3 ] || fail "status without counters: $st, not 3"
export PERF_CSV="1,MiB,uncore_imc_0/cas_count_read/,1,100.00,,"
st=0
NPU_SYSFS_ROOT=$tmp/intel sh "$tool" "$tmp/cmd" 4 > /dev/null || st=$?
[ "$st" = 4 ] || fail "status with counters: $st, not 4"

# 6. no command: usage, status 2
st=0
sh "$tool" 2> /dev/null || st=$?
[ "$st" = 2 ] || fail "usage: status $st, not 2"

if [ "$fails" -gt 0 ]; then
  echo "$fails failed"
  exit 1
fi
echo "npu-dram-bytes: all cases passed"
