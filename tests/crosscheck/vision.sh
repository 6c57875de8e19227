#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Cross-check of the core's vision encoder (gst/core/models/npuvit.h) against
# llama.cpp's own (tools/mtmd/clip.cpp) on the same mmproj GGUF files.  Our
# unit test compares the encoder with our double-precision reference, but
# the generator, the encoder and that reference could share a misreading
# of llama.cpp's layout (tensor shapes and order, the pixel shuffle, the
# projector); llama.cpp cannot.  A developer tool, not part of the test
# suite: it needs the llama.cpp build of build-llamacpp.sh (run here; with
# the mtmd library, ~5 minutes on two cores the first time, and npm).
#
#   tests/crosscheck/vision.sh [BUILD_DIR]
#
# BUILD_DIR is a meson build of this tree (default: build/, set up and
# built here if it lacks the tools).  Environment: LLAMACPP_DIR
# (/tmp/llamacpp), WORK (/tmp/npu-crosscheck-vision) for the generated
# models, the image, the embeddings and the logs.
#
# For each case npu-model-gen writes an mmproj (LLaVA "mlp" or SmolVLM
# "idefics3", tiny = 2 blocks x 64 at patch 14 or base = SigLIP-B/16, 12 x
# 768), clip-encode (llama.cpp, F32 attention) and npu-vit-encode (ours)
# encode one deterministic 224 x 224 image, and the case passes when
# max |ours - llama.cpp| / (range of llama.cpp's values) is within its
# tolerance.  The image's values are multiples of 1/128 in [-1, 1):
# ggml's conv_2d rounds the image to F16 (its im2col is F16 whatever the
# kernel's type), which such values survive.
#
# LLaVA files: clip.cpp's llava graph runs block_count - 1 blocks (see
# docs/vision-encoder.md, where we differ on purpose), so llama.cpp gets
# the same file with one more block (npu-model-gen --extra-block: block
# count + 1, every other tensor identical) and both run the same blocks.
#
# Tolerances, by what separates the two sides (measured figures in
# docs/vision-encoder.md):
#   exact  1e-4  matrices on MXFP4's values (--mxfp4-values) stored F32,
#                the patch kernel on MXFP4's values (p = 16) or F16's
#                (p = 14: ggml multiplies it in F16; we keep a kernel
#                that is not MXFP4 in F32), SiLU
#                FFN (--act silu), our scalar kernels: F32 rounding only.
#                idefics3 only: the LLaVA projector always has a GELU.
#                Ours is also held to 1e-5 of the test suite's float64
#                evaluation of the same file (npu-vit-encode --f64).
#          1e-3  the tiny (p = 14) exact case: ggml's patch product there
#                is F16 x F16 with k = 3 * 14 * 14 = 588, not a multiple
#                of 16, so llamafile's sgemm declines it and
#                ggml_vec_dot_f16 runs it, which on a CPU with AVX512-FP16
#                (llama.cpp built -march=native) accumulates in F16.
#                Measured: llama.cpp 4.3e-4 from the float64 evaluation,
#                ours 1.3e-7 (p = 16: k = 768, sgemm, F32 sums, 2.6e-7).
#   gelu   1e-3  the same with GELU (the presets' clip.use_gelu, and the
#                LLaVA projector's): ggml evaluates GELU and quick GELU
#                through an F16 table (input rounded to F16, 2^-11
#                relative, result stored in F16), we in F32.  Measured
#                ~2e-4; with the table emulated on our side it drops to
#                ~2e-5, the rest being F16 rounding ties.
#   f16    1e-2  the same values stored F16: llama.cpp rounds activations
#                to F16 for F16 weights (ggml's vec_dot_type), as run.sh.
#   int8   3e-2  F32 MXFP4-valued weights, our int8-activation kernels
#                (the CPU's): the unit test bounds that path at 0.15 of
#                the output's rms against the exact reference (measured
#                2-5%), and the range of these outputs is 6-8 rms.
#   q8act  3e-2  --type mxfp4 (the F16 patch kernel is used as it is by
#                both): the same MXFP4 weights, llama.cpp's Q8_0
#                activations against our int8 ones, as run.sh.  The
#                base files are also compared with the float64 evaluation
#                (F64, below): ours, in the default accurate precision,
#                must be within 1e-3 of its range; both sides' relative
#                norm from it is printed.
#   stored 1e-2 (F16), 3e-2 (Q8_0): random matrices stored F16 or Q8_0,
#                as mmproj files ship, read as stored by both sides:
#                llama.cpp rounds the activations to F16 or Q8_0 (its
#                vec_dot_type), ours keep ~16 bits (accurate, the default)
#                and must be within 1e-3 of the float64 evaluation of the
#                stored weights (F64); llama.cpp's distance from it is
#                printed beside (measured: 2e-4 F16, 4-6e-3 Q8_0).
# Then the encode time of both sides, base idefics3 MXFP4 file, 1 and 2
# threads, best of 3 (a figure for the docs, not a pass criterion).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$SRC/build}
export LLAMACPP_DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
WORK=${WORK:-/tmp/npu-crosscheck-vision}
mkdir -p "$WORK"

. "$HERE/lib.sh"
build_llamacpp
CE=$LLAMACPP_DIR/clip-encode
build_tools "$BUILD" "$SRC" "$WORK" tests/crosscheck/npu-vit-encode \
    tests/tools/npu-model-gen
NE=$BUILD/tests/crosscheck/npu-vit-encode
GEN=$BUILD/tests/tools/npu-model-gen

# The image: 224 x 224 x 3 little-endian floats, a gradient with some
# texture so that attention does not see equal patches
IMG=$WORK/image.f32
if [ ! -f "$IMG" ]; then
  perl -e 'for $y (0..223) { for $x (0..223) { for $c (0..2) {
      $p = ($x * 3 + $y * 5 + $c * 85 + ($x * $y) % 97) % 256;
      print pack ("f<", ($p - 128) / 128); } } }' >"$IMG"
fi


# gen NAME GENERATOR-ARGS...: $WORK/NAME.gguf, and for LLaVA files
# $WORK/NAME.llama.gguf with the extra block
gen () {
  local name=$1
  shift
  if [ ! -f "$WORK/$name.gguf" ]; then
    "$GEN" mmproj "$@" -o "$WORK/$name.gguf" >/dev/null
  fi
  case " $* " in
    *" --projector mlp "*)
      if [ ! -f "$WORK/$name.llama.gguf" ]; then
        "$GEN" mmproj "$@" --extra-block -o "$WORK/$name.llama.gguf" \
            >/dev/null
      fi ;;
  esac
}

# check NAME ISA TOL GENERATOR-ARGS...
# ISA: scalar, or "default" (the kernels the CPU picks); TOL: a relative
# tolerance, or "info".  With F64=REL set for the call, ours is also
# compared with the float64 evaluation (npu-vit-encode --f64) and must be
# within REL of it.
check () {
  local name=$1 isa=$2 tol=$3
  shift 3
  local model=$WORK/$name.gguf ref=$WORK/$name.ref.f32 log=$WORK/$name
  local llama_model=$model
  local -a env=()
  [ "$isa" != default ] && env=(NPU_CPU_ISA="$isa")

  gen "$name" "$@"
  [ -f "$WORK/$name.llama.gguf" ] && llama_model=$WORK/$name.llama.gguf
  if ! "$CE" -m "$llama_model" --image "$IMG" -o "$ref" \
      >"$log.llama.txt" 2>"$log.llama.err"; then
    fail "$name: llama.cpp did not load or run it (see $log.llama.err)"
    return
  fi
  local tolarg=()
  [ "$tol" != info ] && tolarg=(--tol "$tol")
  [ -n "${F64:-}" ] && tolarg+=(--f64)
  local rc=0
  env "${env[@]}" "$NE" "$model" --image "$IMG" --reference "$ref" \
      "${tolarg[@]}" >"$log.npu.txt" 2>"$log.npu.err" || rc=$?
  local summary shape
  summary=$(sed -n 's/^compare: //p' "$log.npu.txt")
  if [ -n "${F64:-}" ] && [ -n "$summary" ]; then
    summary="$summary; $(f64_verdict "$log.npu.txt" "$F64")" || rc=1
  fi
  shape="$(sed -n 's/^tokens: //p' "$log.npu.txt") x $(sed -n \
      's/^embd: //p' "$log.npu.txt")"
  judge "$name" "$isa" "$tol" "$rc" npu-vit-encode "$log.npu.err" \
      "$summary" " $shape: $summary"
}

echo "== cross-check (logs in $WORK)"
for size in tiny base; do
  dim=64
  [ $size = base ] && dim=2048
  exact_tol=1e-4
  [ $size = tiny ] && exact_tol=1e-3
  F64=1e-5 check "idefics3-$size-f32-exact" scalar $exact_tol \
      --projector idefics3 \
      --size $size --text-dim $dim --type f32 --mxfp4-values --act silu
  for proj in mlp idefics3; do
    check "$proj-$size-f32-gelu" scalar 1e-3 --projector $proj \
        --size $size --text-dim $dim --type f32 --mxfp4-values
  done
done
check "mlp-tiny-f32-silu" scalar 1e-3 --projector mlp --text-dim 64 \
    --type f32 --mxfp4-values --act silu
check "mlp-tiny-f32-quick" scalar 1e-3 --projector mlp --text-dim 64 \
    --type f32 --mxfp4-values --act quick
for proj in mlp idefics3; do
  check "$proj-tiny-f16" scalar 1e-2 --projector $proj --text-dim 64 \
      --type f16 --mxfp4-values
  check "$proj-base-f32-int8" default 3e-2 --projector $proj --size base \
      --text-dim 2048 --type f32 --mxfp4-values
  check "$proj-tiny-mxfp4" default 3e-2 --projector $proj --text-dim 64 \
      --type mxfp4
  F64=1e-3 check "$proj-base-mxfp4" default 3e-2 --projector $proj --size base \
      --text-dim 2048 --type mxfp4
  F64=1e-3 check "$proj-base-f16" default 1e-2 --projector $proj \
      --size base --text-dim 2048 --type f16
  F64=1e-3 check "$proj-base-q8_0" default 3e-2 --projector $proj \
      --size base --text-dim 2048 --type q8_0
done

echo "== encode time, idefics3-base-mxfp4 (best of 3)"
for t in 1 2; do
  a=$("$CE" -m "$WORK/idefics3-base-mxfp4.gguf" --image "$IMG" -t $t \
      --repeat 3 | sed -n 's/^encode: //p')
  b=$("$NE" "$WORK/idefics3-base-mxfp4.gguf" --image "$IMG" -t $t \
      --repeat 3 | sed -n 's/^model: .*kernels \(.*\)$/\1/p; s/^encode: //p' \
      | paste -sd ' ')
  echo "llama.cpp:    $a"
  echo "ours ${b%% *}: ${b#* }"
done

echo "vision crosscheck: $passed passed, $failed failed"
[ $failed -eq 0 ]
