#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Cross-check of npuaudiotok's log-mel (gst/npu/gstnpulogmel.c) against
# llama.cpp's own Whisper preprocessor (tools/mtmd/mtmd-audio.cpp, compiled
# as it is into whisper-mel).  tests/check/test-audiofrontend.c holds the
# log-mel to a double-precision reference written from our reading of
# mtmd-audio.cpp; this checks the reading itself (padding, window, filters,
# floor, normalisation, the frames the maximum sees) against the code.
# A developer tool, not part of the test suite.
#
#   tests/crosscheck/logmel.sh [BUILD_DIR]
#
# Needs llama.cpp's source and libggml-base from build-llamacpp.sh
# (LLAMACPP_DIR, default /tmp/llamacpp) and gst-launch-1.0 with
# audiotestsrc for the clips.  WORK (/tmp/npu-crosscheck-logmel) keeps the
# clips and both sides' windows.
#
# Clips: 2.5 s of a sine, 10 s of white noise, 0.01 s of a sine (shorter
# than the 200 reflected samples), 29.99 s of pink noise; 80 and 128 mels.
# A case passes when max |ours - llama.cpp| over the first window is
# within 2e-4: both sides are float FFTs (kiss_fft against llama.cpp's own
# radix-2 with a DFT for the odd factor 25) summed in double, the values
# lie in about [-1.5, 1.5]; measured up to 9e-5.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-$HERE/../../build}
LLAMACPP_DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
WORK=${WORK:-/tmp/npu-crosscheck-logmel}
mkdir -p "$WORK"

[ -x "$BUILD/tests/crosscheck/npu-log-mel" ] || ninja -C "$BUILD" tests/crosscheck/npu-log-mel
[ -f "$LLAMACPP_DIR/src/tools/mtmd/mtmd-audio.cpp" ] || "$HERE/build-llamacpp.sh"
LIBDIR=$(dirname "$(find "$LLAMACPP_DIR/build" -name 'libggml-base.so' | head -1)")
S=$LLAMACPP_DIR/src
c++ -O2 -std=c++17 -o "$WORK/whisper-mel" "$HERE/whisper-mel.cpp" \
  "$S/tools/mtmd/mtmd-audio.cpp" -I"$S/tools/mtmd" -I"$S/ggml/include" \
  -I"$S/include" -L"$LIBDIR" -lggml-base -Wl,-rpath,"$LIBDIR"

clip() {  # clip NAME SAMPLES AUDIOTESTSRC-ARGS
  gst-launch-1.0 -q audiotestsrc num-buffers=1 samplesperbuffer="$2" $3 ! \
    audio/x-raw,format=F32LE,rate=16000,channels=1 ! \
    filesink location="$WORK/$1.f32"
}
clip sine-2.5s 40000 "wave=sine freq=440 volume=0.5"
clip white-10s 160000 "wave=white-noise volume=0.3"
clip sine-0.01s 160 "wave=sine freq=1000"
clip pink-29.99s 479840 "wave=pink-noise volume=0.8"

pass=0 fail=0
for c in sine-2.5s white-10s sine-0.01s pink-29.99s; do
  for m in 80 128; do
    "$WORK/whisper-mel" "$WORK/$c.f32" "$WORK/$c.llama.$m" "$m" 2>/dev/null
    "$BUILD/tests/crosscheck/npu-log-mel" "$WORK/$c.f32" "$WORK/$c.npu.$m" "$m"
    if python3 - "$WORK/$c.llama.$m" "$WORK/$c.npu.$m" "$m" "$c" <<'PY'
import array, sys
a = array.array('f', open(sys.argv[1], 'rb').read())
b = array.array('f', open(sys.argv[2], 'rb').read())
n = int(sys.argv[3]) * 3000
err = max(abs(x - y) for x, y in zip(a[:n], b[:n]))
ok = len(b) == n and len(a) >= n and err <= 2e-4
print('%s %s mels: max |ours - llama.cpp| %.2e  %s' %
      (sys.argv[4], sys.argv[3], err, 'PASS' if ok else 'FAIL'))
sys.exit(0 if ok else 1)
PY
    then pass=$((pass+1)); else fail=$((fail+1)); fi
  done
done
echo "logmel: $pass passed, $fail failed"
[ "$fail" = 0 ]
