#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Cross-check of the core's decoder (gst/core/models/npullm.h) against llama.cpp on
# the same GGUF files: greedy tokens and logits, step by step.  A developer
# tool, not part of the test suite (it builds llama.cpp, ~5 minutes on two
# cores, and needs npm; see build-llamacpp.sh).
#
#   tests/crosscheck/run.sh [BUILD_DIR] [--quick]
#   ONLY=gpt-oss tests/crosscheck/run.sh [BUILD_DIR]   (the gpt-oss cases)
#
# BUILD_DIR is a meson build of this tree (default: build/, set up and
# built here if it lacks the tools).  --quick skips the 1B models.
# Environment: LLAMACPP_DIR (/tmp/llamacpp), WORK (/tmp/npu-crosscheck)
# for the generated models and the logs, N (16) greedy steps.
#
# For each model, llama-greedy (llama.cpp) and npu-greedy (ours) decode N
# greedy steps from the same prompt ids; then npu-greedy evaluates
# llama.cpp's sequence (teacher forcing) and compares every step's logits.
# A case passes when max |ours - llama.cpp| / (range of llama.cpp's
# logits) stays within its tolerance at every step and every argmax
# disagreement is a near tie (llama.cpp's top-1/top-2 margin below twice
# that step's max |diff|).  Tolerances, by what separates the two sides:
#   exact    1e-4  same weights (matrices generated on MXFP4's values,
#                  --mxfp4-values, stored F32), our scalar kernels, llama.cpp
#                  in F32 (F32 KV cache, no flash attention): F32 rounding
#                  only.  Tests RoPE, norms, biases, GQA, tied output.
#   f16      1e-2  the same in F16 storage: llama.cpp rounds activations to
#                  F16 for F16 weights (ggml's vec_dot_type).
#   int8     3e-2  same weights, our int8-activation kernels (the unit
#                  test's bound, tests/unit/test-llm.c).
#   q8act    3e-2  an all-MXFP4 file (--all-mxfp4): the same weights, with
#                  llama.cpp's Q8_0 activations and our int8 ones.
#   layout   3e-2  llama.cpp's MXFP4 layout (Q8_0 token_embd and output):
#                  both sides read the Q8_0 output matrix (or the tied
#                  embedding) as it is, so only the activations' int8 / Q8_0
#                  rounding differs, as q8act.
#   stored   1e-2  F16/Q8_0 files of random (not MXFP4-valued) weights,
#            3e-2  multiplied as stored on both sides (Q8_0 activations on
#                  llama.cpp's, int8 on ours for Q8_0).
#   preset   3e-2  an F32 model quantised by llama.cpp's own llama-quantize
#                  into Q4_0, Q4_K_M, Q5_K_M, Q6_K, Q8_0, F16 and BF16 (its
#                  mixes and fallbacks: Q6_K outputs, Q5_0/Q8_0 rows of
#                  704): our fast kernels against llama.cpp's.
#   exact    1e-3  the same preset files, our accurate precision against our
#                  scalar path (each row decoded exactly, F32 activations;
#                  held to a double-precision reference in unit/llm): the
#                  line also prints llama.cpp's own distance from it.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=
QUICK=0
for a in "$@"; do
  case $a in
    --quick) QUICK=1 ;;
    *) BUILD=$a ;;
  esac
done
BUILD=${BUILD:-$SRC/build}
export LLAMACPP_DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
WORK=${WORK:-/tmp/npu-crosscheck}
N=${N:-16}
mkdir -p "$WORK"

. "$HERE/lib.sh"
build_llamacpp
LG=$LLAMACPP_DIR/llama-greedy
build_tools "$BUILD" "$SRC" "$WORK" tests/crosscheck/npu-greedy \
    tests/tools/npu-model-gen
NG=$BUILD/tests/crosscheck/npu-greedy
LQ=$LLAMACPP_DIR/build/bin/llama-quantize
GEN=$BUILD/tests/tools/npu-model-gen


# check NAME ISA TOL GENERATOR-ARGS... [-- PROMPT-ARGS...]
# ISA: scalar, or "default" (the kernels the CPU picks); TOL: a relative
# tolerance, or "info".  MODEL=OTHER reuses case OTHER's model file,
# NPU_ARGS adds options to npu-greedy.
check () {
  local name=$1 isa=$2 tol=$3
  shift 3
  local gen=() prompt=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do gen+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  prompt=("$@")
  local model=$WORK/${MODEL:-$name}.gguf ref=$WORK/$name.ref log=$WORK/$name
  local -a env=()
  [ "$isa" != default ] && env=(NPU_CPU_ISA="$isa")

  if [ ! -f "$model" ]; then
    "$GEN" text "${gen[@]}" -o "$model" >/dev/null
  fi
  if ! "$LG" -m "$model" -n "$N" "${prompt[@]}" --logits "$ref" \
      >"$log.llama.txt" 2>"$log.llama.err"; then
    fail "$name: llama.cpp did not load or run it (see $log.llama.err)"
    return
  fi
  local tolarg=()
  [ "$tol" != info ] && tolarg=(--tol "$tol")
  local rc=0
  local -a extra=()
  [ -n "${NPU_ARGS:-}" ] && read -r -a extra <<<"$NPU_ARGS"
  env "${env[@]}" "$NG" "$model" "${prompt[@]}" --reference "$ref" \
      "${tolarg[@]}" "${extra[@]}" >"$log.npu.txt" 2>"$log.npu.err" || rc=$?
  local free summary
  free=$(sed -n 's/^free run: \([0-9]*\/[0-9]*\) steps equal.*/\1/p' \
      "$log.npu.txt")
  summary=$(sed -n 's/^summary: //p' "$log.npu.txt")
  judge "$name" "$isa" "$tol" "$rc" npu-greedy "$log.npu.err" "$summary" \
      ": free run $free equal; $summary"
}

# preset NAME SRC PRESET: llama-quantize SRC (an F32 file) into PRESET, then
# our fast kernels against llama.cpp (tol 3e-2), and our accurate
# precision against our exact scalar path (tol 1e-3), with llama.cpp's
# own distance from that path printed beside
preset () {
  local name=$1 src=$2 preset=$3 log=$WORK/$1 exact=$WORK/$1.exact
  local model=$WORK/$1.gguf rc=0 summary theirs
  if [ ! -f "$model" ] && ! "$LQ" "$src" "$model" "$preset" \
      >"$log.quantize.log" 2>&1; then
    fail "$name: llama-quantize $preset failed (see $log.quantize.log)"
    return
  fi
  MODEL=$name check "$name" default 3e-2
  NPU_CPU_ISA=scalar "$NG" "$model" --logits "$exact" \
      --reference "$WORK/$name.ref" >"$log.exact.txt" 2>"$log.exact.err" \
      || true
  theirs=$(sed -n 's/^summary: .*max rel \([^,]*\),.*/\1/p' "$log.exact.txt")
  "$NG" "$model" --accurate --reference "$exact" --tol 1e-3 \
      >"$log.accurate.txt" 2>"$log.accurate.err" || rc=$?
  summary=$(sed -n 's/^summary: //p' "$log.accurate.txt")
  judge "$name-accurate-vs-exact" default 1e-3 "$rc" npu-greedy \
      "$log.accurate.err" "$summary" ": $summary (llama.cpp from exact: max \
rel $theirs)"
}

# tokenize NAME MODEL TEXT: the same ids from both tokenizers
tokenize () {
  local name=$1 model=$2 text=$3 a b shown
  shown=${text//$'\n'/\\n}
  shown=${shown//$'\t'/\\t}
  a=$("$LG" -m "$model" --tokenize "$text" 2>/dev/null \
      | sed -n 's/^tokens://p') || true
  b=$("$NG" "$model" --tokenize "$text" 2>"$WORK/tokenize.err" \
      | sed -n 's/^tokens://p') || true
  if [ -n "$a" ] && [ "$a" = "$b" ]; then
    pass "tokenize $name: '$shown' ->$a"
  else
    fail "tokenize $name: '$shown': llama.cpp$a, ours$b"
  fi
}

echo "== cross-check, $N greedy steps per model (logs in $WORK)"
# gpt-oss: the experts are MXFP4 on both sides, which llama.cpp multiplies
# with Q8_0 activations (ggml's vec_dot_type for MXFP4) even in an F32
# file, so no case is exact; 150 steps from a short prompt go past the
# sliding window of 128.  Where two router logits are closer than the two
# sides' activation rounding, a token is routed otherwise and that step's
# logits jump by the expert's share (docs/gpt-oss.md): the cases where
# such a step was measured print their figures (info) rather than fail on
# it.  ONLY=gpt-oss runs these cases alone.
N=150 check gpt-oss-tiny-mxfp4 default 3e-2 --arch gpt-oss --type mxfp4
N=150 check gpt-oss-tiny-mxfp4-values default info --arch gpt-oss \
    --type f32 --mxfp4-values
check gpt-oss-small-mxfp4 default info --arch gpt-oss --size small \
    --type mxfp4
if [ "${ONLY:-}" = gpt-oss ]; then
  echo "crosscheck: $passed passed, $failed failed"
  [ $failed -eq 0 ]
  exit
fi
for arch in llama qwen2; do
  for size in tiny small; do
    check "$arch-$size-f32-exact" scalar 1e-4 --arch "$arch" --size "$size" \
        --type f32 --mxfp4-values
  done
  # the output the architecture does not default to (llama untied, qwen2
  # tied)
  other=tied
  [ "$arch" = qwen2 ] && other=untied
  check "$arch-tiny-f32-exact-$other" scalar 1e-4 --arch "$arch" \
      --type f32 --mxfp4-values "--$other"
  check "$arch-tiny-f16-exact" scalar 1e-2 --arch "$arch" --type f16 \
      --mxfp4-values
  check "$arch-tiny-bf16-exact" scalar 1e-2 --arch "$arch" --type bf16 \
      --mxfp4-values
  check "$arch-small-f32-exact-int8" default 3e-2 --arch "$arch" \
      --size small --type f32 --mxfp4-values
  for size in tiny small; do
    check "$arch-$size-all-mxfp4" default 3e-2 --arch "$arch" \
        --size "$size" --type mxfp4 --all-mxfp4
    check "$arch-$size-mxfp4" default 3e-2 --arch "$arch" --size "$size" \
        --type mxfp4
  done
  MODEL=$arch-small-mxfp4 check "$arch-small-mxfp4-text-prompt" default \
      3e-2 --arch "$arch" --size small --type mxfp4 \
      -- --prompt "the camera sees a person"
  check "$arch-small-f16" default 1e-2 --arch "$arch" --size small \
      --type f16
  check "$arch-small-q8_0" default 3e-2 --arch "$arch" --size small \
      --type q8_0
  # llama-quantize's presets of a random F32 model
  src=$WORK/$arch-small-f32.gguf
  [ -f "$src" ] || "$GEN" text --arch "$arch" --size small --type f32 \
      -o "$src" >/dev/null
  for p in Q4_0 Q4_K_M Q5_K_M Q6_K Q8_0 F16 BF16; do
    preset "$arch-small-$p" "$src" "$p"
  done
  if [ $QUICK -eq 0 ]; then
    check "$arch-1b-mxfp4" default 3e-2 --arch "$arch" --size 1b \
        --type mxfp4
  fi
done

for arch in llama qwen2; do
  model=$WORK/$arch-small-mxfp4.gguf
  tokenize "$arch" "$model" "the camera sees a person"
  tokenize "$arch" "$model" "Hello, World! It's 2024: naïve café, 3.14"
  tokenize "$arch" "$model" "  two  spaces, a	tab and
a newline"
  tokenize "$arch" "$model" "<image> what is in the image? <|im_end|>"
done

echo "crosscheck: $passed passed, $failed failed"
[ $failed -eq 0 ]
