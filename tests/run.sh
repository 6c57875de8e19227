#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what is missing, builds, and runs every test: the unit and
# gst-check suites, the same under valgrind, and the real-kernel suite under
# QEMU.  Ends with "N passed, N failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/.."
./tests/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0

# meson test prints "Ok:", "Fail:", "Timeout:", "Unexpected Pass:" lines.
count() {
  awk -v key="$1" 'index($0, key) == 1 { n = $NF } END { print n + 0 }' "$2"
}
run_meson() {
  label=$1
  shift
  log=$(mktemp)
  echo "== $label"
  meson test -C build --print-errorlogs --num-processes 2 "$@" 2>&1 | tee "$log" |
    grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):'
  ok=$(count "Ok:" "$log")
  bad=$(( $(count "Fail:" "$log") + $(count "Timeout:" "$log") + $(count "Unexpected Pass:" "$log") ))
  if [ "$ok" = 0 ] && [ "$bad" = 0 ]; then
    # meson itself failed: show why and count it.
    cat "$log"
    bad=1
  elif [ "$bad" != 0 ]; then
    # The failing tests' own logs (--print-errorlogs puts them in $log).
    echo "-- logs of the failing tests:"
    cat "$log"
  fi
  passed=$((passed + ok))
  failed=$((failed + bad))
  rm -f "$log"
}

run_meson "unit and gst-check tests"
run_meson "unit and gst-check tests under valgrind" --setup valgrind

echo "== real-kernel tests (QEMU)"
./tests/realkernel/run.sh build > build/realkernel.log 2>&1
rk=$?
cat build/realkernel.log
result=$(grep '^REALKERNEL-RESULT' build/realkernel.log | tail -n 1)
case "$result" in
  *skipped*)
    echo "real-kernel suite SKIPPED (not counted as passed): ${result#*reason=}" ;;
  *passed=*)
    p=$(echo "$result" | sed 's/.*passed=\([0-9]*\).*/\1/')
    f=$(echo "$result" | sed 's/.*failed=\([0-9]*\).*/\1/')
    passed=$((passed + p))
    failed=$((failed + f))
    [ "$rk" = 0 ] || [ "$f" != 0 ] || failed=$((failed + 1)) ;;
  *)
    echo "real-kernel suite gave no result (exit $rk)"
    failed=$((failed + 1)) ;;
esac

# Style once, on Debian 12: its GNU indent (2.2.12) is gst-indent's; 2.2.13
# (Debian 13) lays some declarations out differently.
if [ -z "${GST_NPU_TRIXIE_LEG:-}" ]; then
echo "== style (gst-indent, SPDX lines)"
if ./tests/check-style.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi
fi

# The Debian 13 leg (GStreamer 1.26): this same script inside a trixie root.
if [ -z "${GST_NPU_TRIXIE_LEG:-}" ]; then
  echo "== Debian 13 (GStreamer 1.26) leg"
  ./tests/trixie/run.sh > build/trixie-leg.log 2>&1
  rc=$?
  cat build/trixie-leg.log
  t=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' build/trixie-leg.log | tail -n 1)
  [ "$rc" = 77 ] && t="0 passed, 0 failed" && echo "Debian 13 leg SKIPPED (not counted)"
  t=${t:-0 passed, 1 failed}
  passed=$((passed + ${t%% passed*}))
  failed=$((failed + $(echo "$t" | sed 's/.*, //; s/ failed//')))
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
