#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# run.sh BUILD_DIR: the real-kernel suite, as the project's test runner calls it.
#
# Boots the QEMU guest (qemu-run.sh) with the source and build trees shared
# read-only, runs guest-suite.sh on the programs built in
# BUILD_DIR/tests/realkernel, and prints one line per test, "[ok] name" or
# "[FAIL] name" followed by the failing test's log, then exactly one line
#   REALKERNEL-RESULT passed=N failed=M
# or, only when QEMU or the kernel cannot be had here,
#   REALKERNEL-RESULT skipped reason=<text to the end of the line>
# Exit status: 0 all passed, 1 failures, 77 skipped.
# The guest's whole console goes to BUILD_DIR/tests/realkernel/realkernel.log;
# -v (or GST_NPU_RK_VERBOSE=1) also shows it as it runs.
# Environment: GST_NPU_RK_TIMEOUT (seconds, default 600), and the GST_NPU_RK_*
# variables of qemu-run.sh.
set -uo pipefail
VERBOSE=${GST_NPU_RK_VERBOSE:-0}
[ "${1:-}" = -v ] && { VERBOSE=1; shift; }
[ $# -eq 1 ] || { echo "usage: run.sh [-v] BUILD_DIR" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd -P)
SRC=$(cd "$HERE/../.." && pwd -P)
BUILD=$(cd "$1" 2>/dev/null && pwd -P) || {
  echo "run.sh: no build dir $1" >&2
  echo "[FAIL] realkernel-setup"; echo "REALKERNEL-RESULT passed=0 failed=1"; exit 1; }
BIN=$BUILD/tests/realkernel
LOG=$BIN/realkernel.log
mkdir -p "$BIN" 2>/dev/null

result() { echo "REALKERNEL-RESULT $*"; }
missing=""
for p in rk-memory rk-fence rk-visiontok rk-camfault; do [ -x "$BIN/$p" ] || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "[FAIL] realkernel-build"
  echo "    not built in $BIN:$missing (run ninja -C $BUILD)"
  result "passed=0 failed=1"; exit 1
fi

RES=$(mktemp -d "${TMPDIR:-/tmp}/gst-npu-rk-results.XXXXXX")
trap 'rm -rf "$RES"' EXIT
T0=$(date +%s.%N)
if [ "$VERBOSE" = 1 ]; then
  "$HERE/qemu-run.sh" -t "${GST_NPU_RK_TIMEOUT:-900}" -s "$SRC" -b "$BUILD" -r "$RES" -C / -e GST_NPU_RK_CAMERA_FAULTS \
    -- /bin/bash "$HERE/guest-suite.sh" "$BIN" 2> "$RES.err" | tr -d '\r' | tee "$LOG"
  RC=${PIPESTATUS[0]}
else
  "$HERE/qemu-run.sh" -t "${GST_NPU_RK_TIMEOUT:-900}" -s "$SRC" -b "$BUILD" -r "$RES" -C / -e GST_NPU_RK_CAMERA_FAULTS \
    -- /bin/bash "$HERE/guest-suite.sh" "$BIN" 2> "$RES.err" | tr -d '\r' > "$LOG"
  RC=${PIPESTATUS[0]}
fi
T1=$(date +%s.%N)
ERR=$(cat "$RES.err" 2>/dev/null); rm -f "$RES.err"
cat >> "$LOG" <<EOF
--- qemu-run.sh exit status $RC
$ERR
EOF

if [ "$RC" -eq 77 ]; then
  reason=$(printf '%s\n' "$ERR" | grep 'cannot run here' | tail -n1 | sed 's/.*cannot run here: //')
  echo "realkernel: skipped: ${reason:-cannot run here}"
  result "skipped reason=${reason:-cannot run here}"
  exit 77
fi

pass=0; fail=0
if [ -f "$RES/results" ]; then
  while IFS=$'\t' read -r r name secs; do
    [ -n "$name" ] || continue
    if [ "$r" = ok ]; then
      echo "[ok] $name"; pass=$((pass+1))
    else
      echo "[FAIL] $name"; fail=$((fail+1))
      sed 's/^/    /' "$RES/logs/$name.log" 2>/dev/null
    fi
  done < "$RES/results"
fi
# the guest did not get through the suite: say so, as a failure
if [ "$RC" -ne 0 ] && [ "$fail" -eq 0 ]; then
  case $RC in
    124) what="timed out after ${GST_NPU_RK_TIMEOUT:-900}s";;
    125) what="harness or guest setup failed";;
    *) what="guest suite exit status $RC";;
  esac
  echo "[FAIL] realkernel-harness ($what)"; fail=$((fail+1))
  tail -n 40 "$LOG" | sed 's/^/    /'
fi
if [ $((pass + fail)) -eq 0 ]; then
  echo "[FAIL] realkernel-harness (no results)"; fail=1
fi
# The evidence, from the guest's own words: which exporter each dma-buf
# came from, and the vgem fence's states as the kernel reports them.
echo "realkernel: what the guest kernel reported:"
grep -E 'has the line "exp_name|sync_file fd [0-9]+ name=.*(active|signalled)|the task ran, .* after the signal|has not run|VGEM_FENCE_SIGNAL|NPU_FENCE_ERROR_TIMEOUT|kprobe: dma_buf_ioctl|frames into npuvisiontok|io-mode=.*(dma-buf|copied|filled|place)|system-memory path|# reference: ' "$LOG" \
  | sed 's/^ *//; s/^/    /' | awk '!seen[$0]++' | head -n 40
boot=$(awk '$1 == "boot" {print $2}' "$RES/times" 2>/dev/null)
suite=$(awk '$1 == "boot" {b = $2} $1 == "suite" {printf "%.1f", $2 - b}' "$RES/times" 2>/dev/null)
echo "realkernel: guest up after ${boot:-?}s, suite ${suite:-?}s, total $(awk -v a="$T0" -v b="$T1" 'BEGIN { printf "%.1f", b - a }')s; console log: $LOG"
result "passed=$pass failed=$fail"
[ "$fail" -eq 0 ] && exit 0 || exit 1
