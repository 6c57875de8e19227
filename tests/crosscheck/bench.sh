#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Decode and prefill speed beside llama.cpp's on the same GGUF file and the
# same threads: tests/bench/bench-llm (ours, with the roofline measured in
# the same run) and llama.cpp's llama-bench (pp64 / tg32, three repetitions).
# The two run one after the other, never together.
#
#   tests/crosscheck/bench.sh [BUILD_DIR] [MODEL.gguf]
#   DEPTH=2048 tests/crosscheck/bench.sh ...
#
# With DEPTH set, both sides also prefill DEPTH tokens and decode 32 at
# that depth (a long-running stream's full context: every token then reads
# the KV cache too), one run each: bench-llm --prefill DEPTH --decode 32,
# llama-bench -p DEPTH -n 32 -d 0,DEPTH (its pp at depth 0 is ours).
#
# BUILD_DIR defaults to build/; MODEL to a generated 1B llama in MXFP4
# (written to $WORK first).  llama.cpp is built by build-llamacpp.sh into
# LLAMACPP_DIR (/tmp/llamacpp) if it is not there yet.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$SRC/build}
MODEL=${2:-}
export LLAMACPP_DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
WORK=${WORK:-/tmp/npu-crosscheck}
mkdir -p "$WORK"

"$HERE/build-llamacpp.sh" >/dev/null
ninja -C "$BUILD" tests/bench/bench-llm tests/tools/npu-model-gen >/dev/null
if [ -z "$MODEL" ]; then
  MODEL=$WORK/llama-1b-mxfp4.gguf
  [ -f "$MODEL" ] || "$BUILD/tests/tools/npu-model-gen" text --arch llama \
      --size 1b --type mxfp4 -o "$MODEL" >/dev/null
fi

echo "== gst-npu: $BUILD/tests/bench/bench-llm $MODEL --passes 3"
"$BUILD/tests/bench/bench-llm" "$MODEL" --passes 3
echo
echo "== llama.cpp: llama-bench -m $MODEL -p 64 -n 32 -t 1,$(nproc) -r 3"
"$LLAMACPP_DIR/build/bin/llama-bench" -m "$MODEL" -p 64 -n 32 \
    -t "1,$(nproc)" -r 3

if [ -n "${DEPTH:-}" ]; then
  echo
  echo "== gst-npu at depth $DEPTH: bench-llm --prefill $DEPTH --decode 32"
  "$BUILD/tests/bench/bench-llm" "$MODEL" --passes 1 --prefill "$DEPTH" \
      --decode 32 --ctx $((DEPTH + 64))
  echo
  echo "== llama.cpp at depth $DEPTH: llama-bench -p $DEPTH -n 32 -d 0,$DEPTH"
  "$LLAMACPP_DIR/build/bin/llama-bench" -m "$MODEL" -p "$DEPTH" -n 32 \
      -d "0,$DEPTH" -t "1,$(nproc)" -r 1
fi
