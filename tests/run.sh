#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what is missing, builds, and runs every test: the unit and
# gst-check suites, the same under valgrind, the real-kernel suite under
# QEMU, and the style check.  Ends with "N passed, N failed" and exits
# non-zero on any failure.
#
# A suite that is skipped (the real-kernel suite where QEMU or the kernel
# package cannot be had, a meson test that exits 77) is a failure, unless
# NPU_ALLOW_SKIP=1 says this machine truly cannot run it; the last line is
# then "N passed, N failed, N skipped".  A suite that runs fewer tests than
# its minimum (below) fails too: a suite must not vanish silently.
set -u
cd "$(dirname "$0")/.."
# Each phase prints its wall time ("-- LABEL: N s"): the whole run, both
# legs, has a CI budget of about 45 minutes.
t_setup=$(date +%s)
./tests/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
echo "-- set-up and build: $(( $(date +%s) - t_setup )) s"

# Fewer tests than this in a suite is a failure.
MIN_UNIT=21
MIN_CHECK=15
MIN_REALKERNEL=5

ALLOW_SKIP=${NPU_ALLOW_SKIP:-0}
# The Vulkan tests run on Mesa's lavapipe (mesa-vulkan-drivers, a Vulkan
# device on the CPU): here a missing device fails them instead of skipping.
export NPU_REQUIRE_VULKAN=1
passed=0
failed=0
skipped=0

# note_skips LABEL N: N skipped tests count as skipped, or as failures.
note_skips() {
  [ "$2" = 0 ] && return
  if [ "$ALLOW_SKIP" = 1 ]; then
    echo "$1: $2 SKIPPED (allowed by NPU_ALLOW_SKIP=1)"
    skipped=$((skipped + $2))
  else
    echo "$1: $2 SKIPPED, counted as failed (NPU_ALLOW_SKIP=1 allows it)"
    failed=$((failed + $2))
  fi
}

# check_minimum LABEL N MIN: a suite that ran fewer than MIN tests fails.
check_minimum() {
  if [ "$2" -lt "$3" ]; then
    echo "$1: only $2 tests ran, at least $3 expected: counted as 1 failed"
    failed=$((failed + 1))
  fi
}

# meson test's summary: "Ok:", "Fail:", "Skipped:", "Timeout:",
# "Expected Fail:", "Unexpected Pass:" lines.
count() {
  awk -v key="$1" 'index($0, key) == 1 { n = $NF } END { print n + 0 }' "$2"
}

# run_meson BUILD LABEL MIN [meson test args]: one meson suite, counted.
run_meson() {
  build=$1 label=$2 min=$3
  shift 3
  log=$(mktemp)
  echo "== $label"
  t0=$(date +%s)
  meson test -C "$build" --print-errorlogs --num-processes 2 "$@" \
    > "$log" 2>&1
  rc=$?
  grep -E '^ *[0-9]+/[0-9]+ |^(Ok|Fail|Skipped|Timeout|Expected Fail|Unexpected Pass):' "$log"
  ok=$(( $(count "Ok:" "$log") + $(count "Expected Fail:" "$log") ))
  bad=$(( $(count "Fail:" "$log") + $(count "Timeout:" "$log") + $(count "Unexpected Pass:" "$log") ))
  skip=$(count "Skipped:" "$log")
  if [ "$rc" != 0 ] && [ "$bad" = 0 ]; then
    # meson itself failed (a build error, a bad argument): count it.
    echo "-- meson test exited with status $rc:"
    cat "$log"
    bad=1
  elif [ "$bad" != 0 ]; then
    # The failing tests' own logs (--print-errorlogs puts them in $log).
    echo "-- logs of the failing tests:"
    cat "$log"
  fi
  passed=$((passed + ok))
  failed=$((failed + bad))
  note_skips "$label" "$skip"
  check_minimum "$label" $((ok + bad + skip)) "$min"
  echo "-- $label: $(( $(date +%s) - t0 )) s"
  rm -f "$log"
}

# run_realkernel BUILD: the QEMU suite on the programs of BUILD.  Its set-up
# steps (modules, device nodes, models) are not counted; a failed one is.
run_realkernel() {
  build=$1
  echo "== real-kernel tests (QEMU)"
  t0=$(date +%s)
  # The camera-fault runs (about 4 minutes under TCG) go on the Debian 12
  # leg only: they test our elements' handling of v4l2src's errors, and
  # CI's time budget has no room for them twice.
  faults=1
  [ -z "${GST_NPU_TRIXIE_LEG:-}" ] || faults=0
  GST_NPU_RK_CAMERA_FAULTS=$faults ./tests/realkernel/run.sh "$build" \
    > "$build/realkernel.log" 2>&1
  rk=$?
  echo "-- real-kernel tests: $(( $(date +%s) - t0 )) s"
  cat "$build/realkernel.log"
  result=$(grep '^REALKERNEL-RESULT' "$build/realkernel.log" | tail -n 1)
  case "$result" in
    *skipped*)
      echo "real-kernel suite: ${result#*reason=}"
      note_skips "real-kernel suite" 1 ;;
    *passed=*)
      p=$(echo "$result" | sed 's/.*passed=\([0-9]*\).*/\1/')
      f=$(echo "$result" | sed 's/.*failed=\([0-9]*\).*/\1/')
      passed=$((passed + p))
      failed=$((failed + f))
      [ "$rk" = 0 ] || [ "$f" != 0 ] || failed=$((failed + 1))
      check_minimum "real-kernel suite" $((p + f)) "$MIN_REALKERNEL" ;;
    *)
      echo "real-kernel suite gave no result (exit $rk)"
      failed=$((failed + 1)) ;;
  esac
}

# run_build_suites BUILD: every suite of one build: unit, gst-check, the
# install test, the tool tests, the network namespaces test, unit and
# gst-check under valgrind, and the real-kernel suite.  A second leg
# (another GStreamer, another root) calls it again with its own build
# directory.  There the
# unit suite is not run again under valgrind: the unit tests are the core,
# which has no GStreamer in it, and run under valgrind and ASan on Debian
# 12 already; the six minutes they took under valgrind on Debian 13 were
# what put CI's run over its budget.  The Debian 13 leg still runs them
# plain (gcc 14, -Werror) and the gst-check suite under valgrind.
run_build_suites() {
  build=$1
  run_meson "$build" "unit tests" "$MIN_UNIT" --suite unit
  run_meson "$build" "gst-check tests" "$MIN_CHECK" --suite check
  run_meson "$build" "install test" 1 --suite install
  run_meson "$build" "tool tests" 1 --suite tools
  run_meson "$build" "network namespaces test" 1 --suite net
  [ -n "${GST_NPU_TRIXIE_LEG:-}" ] ||
    run_meson "$build" "unit tests under valgrind" "$MIN_UNIT" \
      --setup valgrind --suite unit
  run_meson "$build" "gst-check tests under valgrind" "$MIN_CHECK" \
    --setup valgrind --suite check
  run_realkernel "$build"
}

run_build_suites build

# ---- Sanitizers and the soak (Debian 12 leg) --------------------------
# ASan+UBSan over the unit and gst-check suites, TSan over the backend,
# fence and session tests and the GStreamer glue tests that are clean
# under it, each in its own build tree (-O1: the run is slower than -O3,
# the build faster), and a short soak of the live caption pipeline.
# Both sanitizer trees are on the Debian 12 leg, where they were made
# clean; docs/testing.md says what each run needs and why.
MIN_TSAN=8

# sanitizer_tree DIR ARGS...: configures (once) and builds DIR, timed.
sanitizer_tree() {
  dir=$1
  shift
  t0=$(date +%s)
  slog=$(mktemp)
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Doptimization=1 "$@" > "$slog" 2>&1 ||
      { cat "$slog"; rm -f "$slog"; return 1; }
  fi
  # shellcheck disable=SC2086
  ninja -C "$dir" $SAN_TARGETS > "$slog" 2>&1 ||
    { cat "$slog"; rm -f "$slog"; return 1; }
  rm -f "$slog"
  echo "-- build of $dir: $(( $(date +%s) - t0 )) s"
}

# ASan+UBSan: every report aborts the test (-fno-sanitize-recover; ASan
# halts on its first error).  Leaks are valgrind's (the phases above):
# detect_leaks=0, as LeakSanitizer would report GLib's type system and
# gst_init's one-time allocations.  GST_REGISTRY_FORK=no: the plugin is
# loaded in the instrumented test process, not in gst-plugin-scanner
# (not built with ASan, it cannot load the plugin).
run_asan() {
  echo "== ASan+UBSan"
  SAN_TARGETS=
  if ! sanitizer_tree build-asan -Db_sanitize=address,undefined \
      -Dc_args=-fno-sanitize-recover=all; then
    failed=$((failed + 1))
    return
  fi
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  export GST_REGISTRY_FORK=no
  run_meson build-asan "unit tests under ASan+UBSan" "$MIN_UNIT" \
    --no-rebuild --suite unit
  run_meson build-asan "gst-check tests under ASan+UBSan" "$MIN_CHECK" \
    --no-rebuild --suite check
  unset ASAN_OPTIONS UBSAN_OPTIONS GST_REGISTRY_FORK
}

# TSan: GLib's GMutex/GCond are futexes TSan cannot see;
# tests/tsan/npu-tsan-glib.c, preloaded, tells it of their edges.
# G_SLICE=always-malloc: GLib 2.74's slice allocator hands chunks between
# threads under a lock of its own, unseen.  No suppression file.
TSAN_TESTS="backend fence llmsession allocator import fdleak videoformats
  deviceprovider"
# The element tests, run with ignore_noninstrumented_modules=1: GStreamer
# frees its mini objects (buffers, messages, events) after reference
# counts kept with its own uninstrumented atomics, and GThreadPool frees
# its hand-over's list node inside GLib's pop; ThreadSanitizer would see
# each such free unordered with the reads before it (reports inside
# GStreamer and GLib, in every element test).  With the option, the
# allocations, frees and copies uninstrumented libraries make themselves
# are not checked; all of our code's accesses are, and the locks GLib
# and pthreads take still order them (docs/testing.md).
# Of the encoders' and npullm's tests, those where threads meet (in-flight
# tasks against flushes, state and caps changes, drop policies, the
# weights pad's thread, the answering task against flushes and stops):
# the whole three take over 3 minutes under TSan on 2 cores, two at a
# time (npuvisiontok past its 180 s timeout at load 15), over CI's
# budget; these under 1 (GST_CHECKS, gst-check's own test filter).
TSAN_ELEMENT_TESTS="npuvisiontok npuaudiotok npullm"
TSAN_ELEMENT_CHECKS="test_block_and_flush_in_flight,test_drop_newest_counts,\
test_drop_oldest_cancels,test_state_changes_in_flight,\
test_caps_change_in_flight,test_weights_pad_same_tokens,\
test_drop_newest_qos,test_drop_oldest_qos,test_state_change_in_flight,\
test_flush_in_flight,test_latency,test_weights_pad,\
test_npullm_audio_and_video,test_weights_pad_same_text,\
test_gpt_oss_both_paths,test_media_from_two_pads_in_pts_order,\
test_fence_never_signals,test_media_cancelled_mid_encode_skipped,\
test_stop_while_generating,test_caption_pipeline,\
test_flush_while_generating,test_media_counts_after_flush,\
test_cancelled_media_skipped,test_producer_error,test_paced_stop_in_sleep"
# and these two whole (a few seconds each)
TSAN_GLUE_TESTS="timeline tokennet"
run_tsan() {
  echo "== TSan"
  SAN_TARGETS="tests/tsan/libnpu-tsan-glib.so tests/unit/test-backend
    tests/unit/test-fence tests/unit/test-llmsession
    tests/check/check-allocator tests/check/check-import
    tests/check/check-fdleak tests/check/check-videoformats
    tests/check/check-deviceprovider tests/check/check-npuvisiontok
    tests/check/check-npuaudiotok tests/check/check-npullm
    tests/check/check-timeline tests/check/check-tokennet
    gst/elements/libgstnpu.so"
  if ! sanitizer_tree build-tsan -Db_sanitize=thread; then
    failed=$((failed + 1))
    return
  fi
  SAN_TARGETS=
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
  export GST_REGISTRY_FORK=no G_SLICE=always-malloc
  # shellcheck disable=SC2086
  run_meson build-tsan "backend, fence, session and glue tests under TSan" \
    "$MIN_TSAN" --no-rebuild \
    --wrapper "env LD_PRELOAD=$(pwd)/build-tsan/tests/tsan/libnpu-tsan-glib.so" \
    $TSAN_TESTS
  export TSAN_OPTIONS=$TSAN_OPTIONS:ignore_noninstrumented_modules=1
  # shellcheck disable=SC2086
  run_meson build-tsan "element tests under TSan" 3 --no-rebuild \
    --wrapper "env LD_PRELOAD=$(pwd)/build-tsan/tests/tsan/libnpu-tsan-glib.so GST_CHECKS=$TSAN_ELEMENT_CHECKS" \
    $TSAN_ELEMENT_TESTS
  # shellcheck disable=SC2086
  run_meson build-tsan "timeline and token network tests under TSan" 2 \
    --no-rebuild \
    --wrapper "env LD_PRELOAD=$(pwd)/build-tsan/tests/tsan/libnpu-tsan-glib.so" \
    $TSAN_GLUE_TESTS
  unset TSAN_OPTIONS GST_REGISTRY_FORK G_SLICE
}

if [ -z "${GST_NPU_TRIXIE_LEG:-}" ]; then
  run_asan
  run_tsan
  run_meson build "soak of the live caption pipeline" 1 --suite soak
fi
# ---- end of sanitizers and the soak -----------------------------------

# ---- aarch64 (Debian 12 leg) ------------------------------------------
# The project cross-built for 64-bit Arm with -Werror (Debian's
# gcc-aarch64-linux-gnu and the arm64 multiarch libraries), and its unit
# and gst-check suites run as aarch64 under qemu-user (-cpu max: Advanced
# SIMD, the dot product and the int8 matrix multiply), on the best Arm
# level; then the tests whose products take the best level alone again
# with each lesser level forced (NPU_CPU_ISA: neon, asimd, scalar), the
# vector maths and the preprocess on a Cortex-A72 (Advanced SIMD without
# the dot product), and Debian's arm64 gst-inspect-1.0 and gst-launch-1.0
# on the plugin: the demo's trained-model answers must equal the x86
# build's.  unit/matmul, unit/matmul-typed, unit/attention, unit/vecmath
# and unit/visionprep run every level or copy the CPU has by themselves.
# Per-test timeouts are ten times the native ones (-t 10): emulation is
# 10 to 40 times slower.
# docs/testing.md says what each run costs.
A64_LEVEL_TESTS="llm vit vit-qwen llmsplice llmsession mxfp4 ops encbytes"
run_aarch64() {
  echo "== aarch64 (cross build, qemu-user)"
  # The aarch64 build is the CPU engine's: no arm64 libvulkan is installed,
  # so the Vulkan tests say "no Vulkan backend" and skip there (the same
  # engine code runs on lavapipe on x86, above).
  unset NPU_REQUIRE_VULKAN
  t0=$(date +%s)
  if ! ./tests/cross/setup-aarch64.sh build-aarch64; then
    echo "aarch64 set-up or build failed"
    failed=$((failed + 1))
    return
  fi
  echo "-- aarch64 set-up and build: $(( $(date +%s) - t0 )) s"
  run_meson build-aarch64 "aarch64 unit tests (neon-i8mm)" "$MIN_UNIT" \
    --no-rebuild -t 10 --suite unit
  run_meson build-aarch64 "aarch64 gst-check tests (neon-i8mm)" \
    "$MIN_CHECK" --no-rebuild -t 10 --suite check
  for level in neon asimd scalar; do
    export NPU_CPU_ISA=$level
    # shellcheck disable=SC2086
    run_meson build-aarch64 "aarch64 kernel tests at $level" 8 \
      --no-rebuild -t 10 $A64_LEVEL_TESTS
  done
  unset NPU_CPU_ISA
  export QEMU_CPU=cortex-a72
  run_meson build-aarch64 \
    "aarch64 vector maths and preprocess on a Cortex-A72" 3 \
    --no-rebuild -t 10 vecmath visionprep cpu
  unset QEMU_CPU
  echo "== aarch64 gst-inspect-1.0 and the demo's trained models"
  t0=$(date +%s)
  if ./tests/cross/demo-aarch64.sh build-aarch64; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
  echo "-- aarch64 gst-inspect-1.0 and demo: $(( $(date +%s) - t0 )) s"
  export NPU_REQUIRE_VULKAN=1
}

[ -n "${GST_NPU_TRIXIE_LEG:-}" ] || run_aarch64
# ---- end of aarch64 ---------------------------------------------------

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
  t0=$(date +%s)
  ./tests/trixie/run.sh > build/trixie-leg.log 2>&1
  rc=$?
  echo "-- Debian 13 leg: $(( $(date +%s) - t0 )) s (its own phases below)"
  cat build/trixie-leg.log
  t=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' build/trixie-leg.log | tail -n 1)
  if [ "$rc" = 77 ]; then
    echo "Debian 13 leg SKIPPED"
    if [ "$ALLOW_SKIP" = 1 ]; then
      t="0 passed, 0 failed"
      skipped=$((skipped + 1))
    else
      t="0 passed, 1 failed"
    fi
  fi
  t=${t:-0 passed, 1 failed}
  passed=$((passed + ${t%% passed*}))
  failed=$((failed + $(echo "$t" | sed 's/.*, //; s/ failed//')))
fi

if [ "$ALLOW_SKIP" = 1 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" = 0 ]
