#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Cross-check of npuaudiotok (its log-mel, the core's audio encoder and
# projectors) against llama.cpp's multimodal library on the same generated
# audio mmproj files and the same WAV.  The unit and element tests compare
# the encoder with our double-precision reference, and logmel.sh the
# log-mel with llama.cpp's code, but the generator, the encoder and that
# reference could share a misreading of llama.cpp's layout (conv kernels,
# position table, the pooling, ultravox's stacking and SwiGLU); llama.cpp
# cannot.  A developer tool, not part of the test suite: it needs the
# llama.cpp build of build-llamacpp.sh (run here; ~5 minutes on two cores
# the first time, and npm).
#
#   tests/crosscheck/audio.sh [BUILD_DIR]
#
# BUILD_DIR is a meson build of this tree (default: build/, set up and
# built here if it lacks the tools).  Environment: LLAMACPP_DIR
# (/tmp/llamacpp), WORK (/tmp/npu-crosscheck-audio) for the models, the
# clips, the embeddings and the logs, ROUNDS (3) for the timing.
#
# The clips are 16 kHz mono S16LE WAV files (29 s of pink noise, 5 s of a
# 440 Hz sine), so neither side resamples: llama.cpp's helper decodes the
# WAV to floats (s / 32768), npuaudiotok reads it through wavparse, and
# both see the same samples.  For each case npu-model-gen writes a text
# model and an audio mmproj paired with it; mtmd-audio-encode (llama.cpp:
# mtmd_tokenize, mtmd_encode_chunk, F32 attention) and
#   filesrc ! wavparse ! npuaudiotok vad=false ! filesink
# (the element as users run it) give the tokens of the clip's 30 s window,
# and the case passes when max |ours - llama.cpp| / (range of llama.cpp's
# values) is within its tolerance.  ultravox files use stack factor 4:
# with 8, 1500 positions make 187.5 rows, and this llama.cpp expects 187
# tokens while its graph makes 188, and aborts (docs/audio-encoder.md).
#
# Tolerances, by what separates the two sides (measured figures in
# docs/npuaudiotok.md):
#   1e-3         matrices on MXFP4's values (--mxfp4-values) stored F32,
#                conv kernels on F16's values, our scalar kernels: ggml's
#                conv_1d goes through an F16 im2col, so llama.cpp rounds
#                the log-mel and conv1's output to F16 (2^-11 relative)
#                where we keep F32; the rest is F32 rounding.
#   1e-3         the same F32 file, the CPU's kernels with
#                precision=accurate (the default, ~16-bit activations):
#                llama.cpp computes F32 weights in F32, and our residual
#                int8 pass brings us within F16 im2col of it (as above).
#   3e-2         the same F32 file with precision=fast (int8 activations:
#                the unit test bounds that path at 0.15 of the output's
#                rms against the exact reference, and the range of these
#                outputs is 6-8 rms), or --type mxfp4 in either precision:
#                the same MXFP4 weights on both sides, llama.cpp's Q8_0
#                activations (its own rounding is then most of the
#                difference) against ours.
#   1e-2 (F16), 3e-2 (Q8_0): random matrices stored F16 or Q8_0, as
#                mmproj files ship, read as stored by both sides
#                (stored (), below: the core's encoder through
#                npu-audio-encode, precision accurate): llama.cpp rounds
#                the activations to F16 or Q8_0 (its vec_dot_type), ours
#                keep ~16 bits and must be within 1e-3 of the float64
#                evaluation of the stored weights on the same log-mel;
#                llama.cpp's distance from it is printed beside (measured:
#                2-3e-4 F16, 0.5-1e-2 Q8_0).
# Then the encode time of a 30 s window on the Whisper-base-sized file
# (6 blocks of 512, qwen2a, MXFP4), 1 and 2 threads, best of ROUNDS (3)
# rounds, both sides in the same run, alternating (a figure for the docs,
# not a pass criterion):
# mtmd-audio-encode's mtmd_encode_chunk() and npu-audio-encode's
# npu_audio_enc_encode(), neither with its log-mel.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$SRC/build}
export LLAMACPP_DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
WORK=${WORK:-/tmp/npu-crosscheck-audio}
ROUNDS=${ROUNDS:-3}
mkdir -p "$WORK"

. "$HERE/lib.sh"
build_llamacpp
ME=$LLAMACPP_DIR/mtmd-audio-encode
build_tools "$BUILD" "$SRC" "$WORK" tests/crosscheck/npu-audio-encode \
    tests/tools/npu-model-gen gst/elements/libgstnpu.so
NE=$BUILD/tests/crosscheck/npu-audio-encode
GEN=$BUILD/tests/tools/npu-model-gen
export GST_PLUGIN_PATH=$BUILD/gst/elements${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}
# filesink maps each token buffer, which waits for the encode's fence at
# most GST_NPU_FENCE_TIMEOUT_MS (60 s by default): a base-sized F32 file's
# 30 s window can take longer on a loaded machine, and filesink then
# writes nothing (the case fails with "0 values")
export GST_NPU_FENCE_TIMEOUT_MS=${GST_NPU_FENCE_TIMEOUT_MS:-300000}

# clip NAME SAMPLES AUDIOTESTSRC-ARGS: $WORK/NAME.wav and, for
# npu-audio-encode, the same samples as floats in $WORK/NAME.f32
clip () {
  if [ ! -f "$WORK/$1.wav" ]; then
    # shellcheck disable=SC2086
    gst-launch-1.0 -q audiotestsrc num-buffers=1 samplesperbuffer="$2" $3 ! \
      audio/x-raw,format=S16LE,rate=16000,channels=1 ! wavenc ! \
      filesink location="$WORK/$1.wav"
  fi
  if [ ! -f "$WORK/$1.f32" ]; then
    gst-launch-1.0 -q filesrc location="$WORK/$1.wav" ! wavparse ! \
      audioconvert ! audio/x-raw,format=F32LE ! \
      filesink location="$WORK/$1.f32"
  fi
}
clip pink-29s 464000 "wave=pink-noise volume=0.5"
clip sine-5s 80000 "wave=sine freq=440 volume=0.3"

# text DIM: $WORK/text-DIM.gguf, the text model the projectors feed (one
# small block: llama.cpp needs one to pair the mmproj with)
text () {
  if [ ! -f "$WORK/text-$1.gguf" ]; then
    "$GEN" text --arch qwen2 --dim "$1" --layers 1 --heads 8 --kv-heads 4 \
        --ff 256 --vocab 1024 -o "$WORK/text-$1.gguf" >/dev/null
  fi
}

# compare OURS REF TOL: "max|diff| ... rel ..." and the verdict (exit
# status); a NaN on either side, or a length mismatch, fails
compare () {
  python3 - "$1" "$2" "$3" <<'PY'
import array, math, sys
a = array.array('f', open(sys.argv[1], 'rb').read())
b = array.array('f', open(sys.argv[2], 'rb').read())
tol = sys.argv[3]
if len(a) != len(b) or not b:
    print('%d values, llama.cpp %d' % (len(a), len(b)))
    sys.exit(1)
d = max(abs(x - y) if not (math.isnan(x) or math.isnan(y)) else math.nan
        for x, y in zip(a, b))
rng = max(b) - min(b)
rel = d / rng if rng > 0 else d
print('max|diff| %.3e, range %.4g, rel %.3e' % (d, rng, rel))
sys.exit(0 if tol == 'info' or rel <= float(tol) else 1)
PY
}

# check NAME MODES CLIP GENERATOR-ARGS...
# MODES: comma-separated MODE:TOL, ways to run our side against one
# llama.cpp run: "scalar" (NPU_CPU_ISA=scalar: exact F32 products), or
# the CPU's kernels with npuaudiotok's precision "fast" (int8 activations,
# as llama.cpp's Q8_0) or "accurate" (the default, ~16 bits); TOL: a
# relative tolerance, or "info"
check () {
  local name=$1 modes=$2 clip=$3
  shift 3
  local dim=64 model=$WORK/$name.gguf log=$WORK/$name.$clip mode
  case " $* " in *" --size base "*) dim=2048 ;; esac

  text $dim
  if [ ! -f "$model" ]; then
    "$GEN" audio --for "$WORK/text-$dim.gguf" "$@" -o "$model" >/dev/null
  fi
  if ! "$ME" -m "$WORK/text-$dim.gguf" --mmproj "$model" \
      --audio "$WORK/$clip.wav" -o "$log.llama.f32" >"$log.llama.txt" \
      2>"$log.llama.err"; then
    fail "$name $clip: llama.cpp did not load or run it (see $log.llama.err)"
    return
  fi
  # llama.cpp encodes one window for a clip under 30 s
  if [ "$(sed -n 's/^chunks: //p' "$log.llama.txt")" != 1 ]; then
    fail "$name $clip: llama.cpp made more than one window"
    return
  fi
  for mode in ${modes//,/ }; do
    local tol=${mode#*:}
    mode=${mode%%:*}
    local -a env=() prop=()
    local rc=0 summary out=$log.npu-$mode
    case $mode in
      scalar) env=(NPU_CPU_ISA=scalar) ;;
      *) prop=(precision="$mode") ;;
    esac
    if ! env "${env[@]}" gst-launch-1.0 -q filesrc \
        location="$WORK/$clip.wav" ! wavparse ! \
        npuaudiotok model="$model" vad=false "${prop[@]}" ! \
        filesink location="$out.f32" >"$out.txt" 2>"$out.err"; then
      fail "$name $clip: npuaudiotok failed (see $out.err)"
      continue
    fi
    summary=$(compare "$out.f32" "$log.llama.f32" "$tol") || rc=$?
    judge "$name $clip" "$mode" "$tol" "$rc" npuaudiotok "$out.err" \
        "$summary" " $(sed -n 's/^tokens: //p' "$log.llama.txt") x $(sed -n \
        's/^embd: //p' "$log.llama.txt"): $summary"
  done
}

# stored NAME TOL GENERATOR-ARGS...: a base-sized file written with its
# matrices in a stored type; npu-audio-encode (the same log-mel as
# npuaudiotok's, accurate) against llama.cpp at TOL and against the
# float64 evaluation at 1e-3 (a minute of double arithmetic a file)
stored () {
  local name=$1 tol=$2
  shift 2
  local model=$WORK/$name.gguf log=$WORK/$name.pink-29s rc=0 summary

  text 2048
  if [ ! -f "$model" ]; then
    "$GEN" audio --for "$WORK/text-2048.gguf" --size base "$@" \
        -o "$model" >/dev/null
  fi
  if ! "$ME" -m "$WORK/text-2048.gguf" --mmproj "$model" \
      --audio "$WORK/pink-29s.wav" -o "$log.llama.f32" >"$log.llama.txt" \
      2>"$log.llama.err"; then
    fail "$name: llama.cpp did not load or run it (see $log.llama.err)"
    return
  fi
  "$NE" "$model" --audio "$WORK/pink-29s.f32" --reference "$log.llama.f32" \
      --tol "$tol" --f64 >"$log.npu.txt" 2>"$log.npu.err" || rc=$?
  summary=$(sed -n 's/^compare: //p' "$log.npu.txt")
  if [ -n "$summary" ]; then
    summary="$summary; $(f64_verdict "$log.npu.txt" 1e-3)" || rc=1
  fi
  judge "$name pink-29s" accurate "$tol" "$rc" npu-audio-encode \
      "$log.npu.err" "$summary" ": $summary"
}

echo "== cross-check (logs in $WORK)"
for proj in qwen2a ultravox; do
  for mels in 80 128; do
    for clip in pink-29s sine-5s; do
      check "$proj-tiny-$mels-f32" scalar:1e-3 $clip --projector $proj \
          --mels $mels --stack-factor 4 --type f32 --mxfp4-values
    done
  done
  check "$proj-tiny-mxfp4" fast:3e-2,accurate:3e-2 pink-29s \
      --projector $proj \
      --stack-factor 4 --type mxfp4
  check "$proj-base-f32" fast:3e-2,accurate:1e-3 pink-29s \
      --projector $proj \
      --size base --stack-factor 4 --type f32 --mxfp4-values
  check "$proj-base-mxfp4" fast:3e-2,accurate:3e-2 pink-29s \
      --projector $proj \
      --size base --stack-factor 4 --type mxfp4
  stored "$proj-base-f16" 1e-2 --projector $proj --stack-factor 4 \
      --type f16
  stored "$proj-base-q8_0" 3e-2 --projector $proj --stack-factor 4 \
      --type q8_0
done

# Each round runs each side once, two encodes in one process (the first
# pays for first touches: graph allocation on llama.cpp's side, scratch
# pages on ours), the sides alternating so that they see the same load on
# a shared machine; the best of all rounds is printed.  Ours runs in both
# precisions: fast is llama.cpp's arithmetic (int8 activations), accurate
# the element's default.
echo "== encode time of a 30 s window, qwen2a-base-mxfp4 (best of" \
    "$ROUNDS rounds of 2 encodes, the two sides alternating)"
min () { python3 -c "import sys; print(min(map(float, sys.argv[1:])))" "$@"; }
ours () {  # ours THREADS PRECISION: "ISA MS"
  "$NE" "$WORK/qwen2a-base-mxfp4.gguf" --audio "$WORK/pink-29s.f32" \
      -t "$1" --repeat 2 --precision "$2" | sed -n \
      's/^model: .*kernels \(.*\)$/\1/p; s/^encode: \([0-9.]*\) ms.*/\1/p' \
      | paste -sd ' '
}
for t in 1 2; do
  a= f= c= isa=
  for r in $(seq "$ROUNDS"); do
    x=$("$ME" -m "$WORK/text-2048.gguf" \
        --mmproj "$WORK/qwen2a-base-mxfp4.gguf" --audio "$WORK/pink-29s.wav" \
        -t $t --repeat 2 2>/dev/null | sed -n 's/^encode: \([0-9.]*\) ms.*/\1/p')
    y=$(ours $t fast)
    z=$(ours $t accurate)
    isa=${y%% *}
    # shellcheck disable=SC2086
    a=$(min $a "$x")
    # shellcheck disable=SC2086
    f=$(min $f "${y#* }")
    # shellcheck disable=SC2086
    c=$(min $c "${z#* }")
  done
  python3 -c "import sys; a, f, c = map(float, sys.argv[1:4]); \
print('%s thread(s): llama.cpp %.0f ms; ours (%s) fast %.0f ms, %.2fx' \
      ' llama.cpp, %.1fx real time; accurate %.0f ms, %.2fx llama.cpp,' \
      ' %.1fx real time' % (sys.argv[4], a, sys.argv[5], f, a / f, 30000 / f, \
      c, a / c, 30000 / c))" "$a" "$f" "$c" $t "$isa"
done

echo "audio crosscheck: $passed passed, $failed failed"
[ $failed -eq 0 ]
