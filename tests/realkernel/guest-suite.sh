#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# guest-suite.sh BINDIR: the real-kernel suite, run inside the QEMU guest.
#
# Set-up steps (loading vgem and vivid, checking the device nodes,
# generating the models) print "[set-up] name" and are not tests: only a
# failed one is recorded, as a failure.  Then it runs the test programs from
# BINDIR and prints "[ok] name" / "[FAIL] name" lines with each test's
# output.  Results also go to $RK_RESULTS (when set): "results" has one line
# per test and per failed set-up step (ok|FAIL <tab> name <tab> seconds),
# logs/NAME.log each one's output.
# Exit status: 0 if every set-up step and test passed.
BIN=${1:?usage: guest-suite.sh BINDIR}
OUT=${RK_RESULTS:-/tmp/rk-results}
mkdir -p "$OUT/logs"; : > "$OUT/results"
pass=0; fail=0
# The rk-* programs use GStreamer's core and allocators library, no plugins:
# an empty plugin path spares a registry scan of /usr over 9p (~6 s under TCG).
# A test that needs system plugins (v4l2src on vivid) sets the path back.
export GST_PLUGIN_SYSTEM_PATH_1_0= GST_PLUGIN_PATH_1_0= GST_REGISTRY_1_0=/tmp/rk-registry.bin
up() { cut -d' ' -f1 /proc/uptime; }
echo "boot $(up)" > "$OUT/times"
echo "guest: kernel $(uname -r), up $(up)s, $(nproc) CPUs"

t() {  # t NAME CMD [ARGS..]
  local name=$1 s e r rc; shift
  s=$(up)
  timeout -k 5 "${RK_TEST_TIMEOUT:-240}" "$@" > "$OUT/logs/$name.log" 2>&1; rc=$?
  if [ $rc -eq 0 ]; then
    r=ok; pass=$((pass+1))
  else
    r=FAIL; fail=$((fail+1))
    if [ $rc -eq 124 ]; then echo "timed out after ${RK_TEST_TIMEOUT:-240}s" >> "$OUT/logs/$name.log"
    else echo "exit status $rc" >> "$OUT/logs/$name.log"; fi
  fi
  e=$(awk -v a="$s" -v b="$(up)" 'BEGIN { printf "%.2f", b - a }')
  sed 's/^/    /' "$OUT/logs/$name.log"
  echo "[$r] $name (${e}s)"
  printf '%s\t%s\t%s\n' "$r" "$name" "$e" >> "$OUT/results"
}

setup() {  # setup NAME CMD [ARGS..]: not a test; its failure is recorded
  local name=$1 rc; shift
  timeout -k 5 "${RK_TEST_TIMEOUT:-240}" "$@" > "$OUT/logs/$name.log" 2>&1; rc=$?
  sed 's/^/    /' "$OUT/logs/$name.log"
  if [ $rc -eq 0 ]; then
    echo "[set-up] $name"
  else
    echo "set-up step failed, exit status $rc" >> "$OUT/logs/$name.log"
    echo "[FAIL] set-up $name"; fail=$((fail+1))
    printf 'FAIL\tset-up-%s\t0\n' "$name" >> "$OUT/results"
    cp "$OUT/logs/$name.log" "$OUT/logs/set-up-$name.log"
  fi
}

nodes() {
  local ok=0 n
  for n in /dev/dma_heap/system /dev/udmabuf; do
    if [ -c "$n" ]; then ls -l "$n"; else echo "missing: $n"; ok=1; fi
  done
  if ls /dev/dri/card* >/dev/null 2>&1; then ls -l /dev/dri/; else echo "missing: /dev/dri/card*"; ok=1; fi
  for n in /sys/class/drm/card*/device/driver; do
    [ -e "$n" ] && { d=${n%/device/driver}; l=$(readlink "$n"); echo "${d##*/}: driver ${l##*/}"; }
  done
  if ls /dev/video* >/dev/null 2>&1; then
    for n in /dev/video*; do read -r l < "/sys/class/video4linux/${n#/dev/}/name"; echo "$n: $l"; done
  else echo "missing: /dev/video* (vivid)"; ok=1; fi
  return $ok
}

setup modprobe-vgem modprobe vgem
setup modprobe-vivid modprobe vivid num_outputs=1 output_types=1
setup device-nodes bash -c "$(declare -f nodes); nodes"
t rk-memory "$BIN/rk-memory" --paths
t rk-memory-sync "$BIN/rk-memory" --sync
t rk-fence "$BIN/rk-fence"

# vivid camera into npuvisiontok, both dma-buf modes, on a generated model.
# Each run writes its tokens to a file; the last test compares them with
# those of the same frames as system memory.
BUILD=${BIN%/tests/realkernel}
GEN=$BUILD/tests/tools/npu-model-gen
SYSPLUGINS=$(pkg-config --variable=pluginsdir gstreamer-1.0 2>/dev/null || echo /usr/lib/x86_64-linux-gnu/gstreamer-1.0)
TOK=/tmp/rk-tokens
mkdir -p /tmp/rk-models "$TOK"
setup generate-models bash -c "$GEN text --arch qwen2 --size tiny -o /tmp/rk-models/text.gguf && $GEN mmproj --for /tmp/rk-models/text.gguf --size tiny -o /tmp/rk-models/mmproj.gguf"
DMABUF_RUNS=()
vt() {  # vt NAME IO_MODE [dma-drm]: rk-visiontok, its tokens in $TOK/NAME.f32
  local name=$1; shift
  [ "$1" = mmap ] || DMABUF_RUNS+=("$name")
  t "$name" "$BIN/rk-visiontok" "$BUILD/gst/elements" "$SYSPLUGINS" /tmp/rk-models/mmproj.gguf "$@" --tokens "$TOK/$name.f32"
}
vt v4l2src-dmabuf-npuvisiontok dmabuf
vt v4l2src-dmabuf-import-npuvisiontok dmabuf-import
# GStreamer 1.24+ (the Debian 13 leg): the same through DMA_DRM caps,
# the form 1.24+ v4l2src offers first.
if "$BIN/rk-visiontok" --has-dma-drm; then
  vt v4l2src-dmabuf-dma-drm-npuvisiontok dmabuf dma-drm
  vt v4l2src-dmabuf-import-dma-drm-npuvisiontok dmabuf-import dma-drm
fi
# The same camera frames as system memory (io-mode=mmap, classic caps):
# every dma-buf path's tokens must equal these, bit for bit (5 frames a
# run: rk-visiontok.c's N_FRAMES).
vt v4l2src-mmap-npuvisiontok mmap
t visiontok-tokens-dmabuf-equal-system "$(dirname "$0")/rk-compare-tokens.sh" "$TOK" 5 v4l2src-mmap-npuvisiontok "${DMABUF_RUNS[@]}"
# vivid's faults while v4l2src io-mode=dmabuf ! npuvisiontok ! npullm
# runs: each ends as GStreamer's conventions say, frames in flight are
# accounted for, nothing leaks (rk-camfault.c).  Last of the camera tests:
# "Disconnect" leaves the device unplugged until every handle is closed.
# About 4 minutes under TCG; GST_NPU_RK_CAMERA_FAULTS=0 leaves it out (the
# Debian 13 leg of tests/run.sh does, for CI's time budget).
[ "${GST_NPU_RK_CAMERA_FAULTS:-1}" = 0 ] ||
  RK_TEST_TIMEOUT=600 t vivid-faults-v4l2src-npuvisiontok-npullm "$BIN/rk-camfault" "$BUILD/gst/elements" "$SYSPLUGINS" /tmp/rk-models/mmproj.gguf /tmp/rk-models/text.gguf corrupt drop fatal streamon disconnect
# a WAV through the ALSA loopback into npuaudiotok, against filesrc
setup modprobe-snd-aloop modprobe snd-aloop
t alsasrc-npuaudiotok "$(dirname "$0")/rk-audiotok.sh" "$BUILD" "$SYSPLUGINS"
echo "suite $(up)" >> "$OUT/times"
echo "guest: $pass passed, $fail failed, up $(up)s"
[ $fail -eq 0 ]
