#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Our figures beside llama.cpp's, on the same GGUF files and the same
# threads, one run, the two sides one after the other (never together):
#
#   1. prefill 64 and 512, decode at depth 0: bench-llm (ours, with the
#      read limit measured in the same run, its best pattern also taking
#      turns with decode: --alternate-limit 4) and llama-bench -p 64,512
#      -n 32;
#   2. decode at depth 2048 (a long-running stream's context: every token
#      also reads the KV cache), our three cache types, and the KV cache's
#      memory: bench-llm --prefill 2048 --depth 0,2048 --kv-type
#      f32,f16,q8_0 --alternate 4 (the two depths decoding turn about in
#      one run, each with a context of its own: its ratio of the two
#      depths' medians is the figure to quote, where one run after the
#      other differs by ~10 %) and llama-bench -n 32 -d 2048 (its default
#      F16 cache);
#   3. the time to the first token of a camera loop's second answer, which
#      reuses the prompt's shared prefix: bench-llm --prefill 256 --reuse
#      40 and llama-ttft (llama.cpp, the cache cells of the prefix kept as
#      llama-server's prompt cache does), with llama.cpp's own line on its
#      KV cache's size;
#   4. vision: a SigLIP-B-size mmproj (idefics3, 12 x 768, MXFP4, 224 x 224
#      image) encoded by npu-vit-encode (ours) and clip-encode (llama.cpp),
#      time, and each side's error against our scalar kernels' evaluation
#      (exact F32 products, F32 rounding only): max |x - exact| / range;
#   5. the weight types users download: the 1.1 B llama written in F16,
#      then quantised by llama.cpp's llama-quantize into each preset of
#      TYPES ("Q4_K_M Q8_0 F16" by default; MXFP4 is the model of 1-3):
#      prefill 512 and decode at depth 0, bench-llm and llama-bench -p 512
#      -n 32.
#
# bench-llm reads every file in place, in the type and layout it stores,
# as the elements do (its default since 2026-12-07; the figures in docs/
# from before then are of MXFP4 repacked at load, bench-llm --repack).
#
# Then a summary table of every figure with the ratio.  The machine may be
# shared: only ratios within this run mean something; each side's figure
# is the best of its repetitions.
#
#   tests/crosscheck/bench.sh [BUILD_DIR] [MODEL.gguf]
#
# BUILD_DIR defaults to build/; MODEL to a generated 1.1 B llama in MXFP4
# (written to $WORK first).  llama.cpp is built by build-llamacpp.sh into
# LLAMACPP_DIR (/tmp/llamacpp) if it is not there yet.  PASSES (3) sets the
# repetitions of the short runs; DEPTH (2048) the long context; ONLY=types
# runs part 5 alone.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$SRC/build}
MODEL=${2:-}
export LLAMACPP_DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
WORK=${WORK:-/tmp/npu-crosscheck}
PASSES=${PASSES:-3}
DEPTH=${DEPTH:-2048}
N=$(nproc)
mkdir -p "$WORK"

"$HERE/build-llamacpp.sh" >/dev/null
ninja -C "$BUILD" tests/bench/bench-llm tests/tools/npu-model-gen \
    tests/crosscheck/npu-vit-encode >/dev/null
BL=$BUILD/tests/bench/bench-llm
LB=$LLAMACPP_DIR/build/bin/llama-bench
if [ -z "$MODEL" ]; then
  MODEL=$WORK/llama-1b-mxfp4.gguf
  [ -f "$MODEL" ] || "$BUILD/tests/tools/npu-model-gen" text --arch llama \
      --size 1b --type mxfp4 -o "$MODEL" >/dev/null
fi
OUT=$WORK/bench
mkdir -p "$OUT"

run () {
  local log=$1
  shift
  echo "== $*"
  "$@" | tee "$OUT/$log"
  echo
}

# 5. the weight types (run first: ONLY=types stops after it)
TYPES=${TYPES-Q4_K_M Q8_0 F16}
if [ -n "$TYPES" ]; then
  F16=$WORK/llama-1b-f16.gguf
  [ -f "$F16" ] || "$BUILD/tests/tools/npu-model-gen" text --arch llama \
      --size 1b --type f16 -o "$F16" >/dev/null
  for ty in $TYPES; do
    m=$WORK/llama-1b-$ty.gguf
    [ "$ty" = F16 ] && m=$F16
    [ -f "$m" ] || "$LLAMACPP_DIR/build/bin/llama-quantize" "$F16" "$m" "$ty" \
        >"$OUT/quantize-$ty.log" 2>&1
    run "ours-type-$ty.txt" "$BL" "$m" --passes "$PASSES" \
        --prefill 512 --depth 0 --decode 32
    run "llama-type-$ty.txt" "$LB" -m "$m" -p 512 -n 32 -t "1,$N" \
        -r "$PASSES"
  done
fi
if [ "${ONLY:-}" != types ]; then
run ours-short.txt "$BL" "$MODEL" --passes "$PASSES" --prefill 64 --depth 0 \
    --alternate-limit 4
run ours-512.txt "$BL" "$MODEL" --passes "$PASSES" --prefill 512 --depth 0 \
    --decode 8
run llama-short.txt "$LB" -m "$MODEL" -p 64,512 -n 32 -t "1,$N" -r "$PASSES"
run ours-depth.txt "$BL" "$MODEL" --passes 1 --prefill "$DEPTH" \
    --depth "0,$DEPTH" --ctx $((DEPTH + 64)) --kv-type f32,f16,q8_0 \
    --alternate 4
run llama-depth.txt "$LB" -m "$MODEL" -p 0 -n 32 -d "$DEPTH" -t "1,$N" -r 1
run ours-ttft.txt "$BL" "$MODEL" --passes "$PASSES" --prefill 256 \
    --reuse 40 --decode 1 --ctx 4096
for t in 1 "$N"; do
  run "llama-ttft-$t.txt" "$LLAMACPP_DIR/llama-ttft" -m "$MODEL" -p 256 \
      --reuse 40 -t "$t" -r "$PASSES" --ctx 4096
done

# Vision: vision.sh's image and base idefics3 file
VM=$WORK/idefics3-base-mxfp4.gguf
IMG=$WORK/image.f32
NE=$BUILD/tests/crosscheck/npu-vit-encode
CE=$LLAMACPP_DIR/clip-encode
[ -f "$VM" ] || "$BUILD/tests/tools/npu-model-gen" mmproj --projector \
    idefics3 --size base --text-dim 2048 --type mxfp4 -o "$VM" >/dev/null
if [ ! -f "$IMG" ]; then
  perl -e 'for $y (0..223) { for $x (0..223) { for $c (0..2) {
      $p = ($x * 3 + $y * 5 + $c * 85 + ($x * $y) % 97) % 256;
      print pack ("f<", ($p - 128) / 128); } } }' >"$IMG"
fi
NPU_CPU_ISA=scalar "$NE" "$VM" --image "$IMG" -o "$OUT/vit-exact.f32" \
    >/dev/null
for t in 1 "$N"; do
  run "llama-vit-$t.txt" "$CE" -m "$VM" --image "$IMG" -t "$t" \
      --repeat "$PASSES" -o "$OUT/vit-llama.f32"
  run "ours-vit-$t.txt" "$NE" "$VM" --image "$IMG" -t "$t" \
      --repeat "$PASSES" --reference "$OUT/vit-exact.f32"
done
run llama-vit-error.txt env NPU_CPU_ISA=scalar "$NE" "$VM" --image "$IMG" \
    --reference "$OUT/vit-llama.f32"
fi

# ------------------------------------------------------------------------
# The summary, from the logs above
#
# field FILE SED: the first match of SED (-n, with p) in FILE
field () { sed -n "$2" "$OUT/$1" | head -n 1; }
# ours FILE THREADS SED: within the block of THREADS thread(s)
ours () {
  awk -v t="$2" '/^[0-9]+ threads? \(/ { on = ($1 == t) } on' "$OUT/$1" |
      sed -n "$3" | head -n 1
}
# llama FILE TEST THREADS: llama-bench's t/s for TEST (pp64, tg32 @ d2048)
llama () {
  awk -F'|' -v test="$2" -v t="$3" '
    { gsub (/^ +| +$/, "", $(NF-2)); gsub (/^ +| +$/, "", $(NF-1)) }
    $(NF-2) == test && $(NF-3) + 0 == t { split ($(NF-1), a, " "); print a[1];
      exit }' "$OUT/$1"
}
ratio () { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0)
  printf "%.2f", a / b; else printf "-" }'; }
row () { printf "| %s | %s | %s | %s |\n" "$1" "$2" "$3" "$(ratio "$4" "$5")"; }

echo "== summary (best of each side's repetitions; ratio = ours / llama.cpp"
echo "   for speeds, llama.cpp / ours for times and sizes)"
echo "| figure | gst-npu | llama.cpp | ratio |"
echo "|---|---|---|---|"
for ty in $TYPES; do
  for t in 1 "$N"; do
    a=$(ours "ours-type-$ty.txt" "$t" \
        's/^ *prefill *512 tok *\([0-9.]*\) .*/\1/p')
    b=$(llama "llama-type-$ty.txt" pp512 "$t")
    row "$ty: prefill 512, $t thr (tok/s)" "$a" "$b" "$a" "$b"
    a=$(ours "ours-type-$ty.txt" "$t" 's/^ *decode @ *0 *\([0-9.]*\) .*/\1/p')
    b=$(llama "llama-type-$ty.txt" tg32 "$t")
    row "$ty: decode @ 0, $t thr (tok/s)" "$a" "$b" "$a" "$b"
  done
done
[ "${ONLY:-}" = types ] && exit 0
for t in 1 "$N"; do
  a=$(ours ours-short.txt "$t" 's/^ *prefill *64 tok *\([0-9.]*\) .*/\1/p')
  b=$(llama llama-short.txt pp64 "$t")
  row "prefill 64, $t thr (tok/s)" "$a" "$b" "$a" "$b"
  a=$(ours ours-512.txt "$t" 's/^ *prefill *512 tok *\([0-9.]*\) .*/\1/p')
  b=$(llama llama-short.txt pp512 "$t")
  row "prefill 512, $t thr (tok/s)" "$a" "$b" "$a" "$b"
  a=$(ours ours-short.txt "$t" 's/^ *decode @ *0 *\([0-9.]*\) .*/\1/p')
  b=$(llama llama-short.txt tg32 "$t")
  row "decode @ 0, $t thr (tok/s)" "$a" "$b" "$a" "$b"
  for kv in f16 q8_0 f32; do
    a=$(awk -v t="$t" -v kv="$kv" '/^[0-9]+ threads? \(/ { on = ($1 == t) }
        on && /KV cache/ { k = ($3 == kv ",") }
        on && k && /decode @ *'"$DEPTH"' / { print $4; exit }' \
        "$OUT/ours-depth.txt")
    b=$(llama llama-depth.txt "tg32 @ d$DEPTH" "$t")
    row "decode @ $DEPTH, $t thr, our KV $kv (llama.cpp f16) (tok/s)" \
        "$a" "$b" "$a" "$b"
  done
  a=$(ours ours-ttft.txt "$t" 's/.*second answer *\([0-9.]*\) ms.*/\1/p')
  b=$(field "llama-ttft-$t.txt" 's/.*second \([0-9.]*\) ms.*/\1/p')
  row "TTFT 2nd answer (40 of 256 reused), $t thr (ms)" "$a" "$b" "$b" "$a"
  a=$(field "ours-vit-$t.txt" 's/^encode: \([0-9.]*\) ms.*/\1/p')
  b=$(field "llama-vit-$t.txt" 's/^encode: \([0-9.]*\) ms.*/\1/p')
  row "vision encode SigLIP-B 224, $t thr (ms)" "$a" "$b" "$b" "$a"
done
a=$(field ours-vit-1.txt 's/.*rel \([0-9.e+-]*\).*/\1/p')
b=$(field llama-vit-error.txt 's/.*rel \([0-9.e+-]*\).*/\1/p')
row "vision error, max diff / range vs exact F32" "$a" "$b" "$b" "$a"
a=$(awk '/KV cache f16,/ { print $6; exit }' "$OUT/ours-depth.txt")
b=$(field llama-ttft-1.txt 's/.*size = *\([0-9.]*\) MiB ( *\([0-9]*\) cells.*/\1 \2/p' |
    awk '{ printf "%.1f", $1 * 1024 / $2 }')
row "KV cache f16, KiB a token" "$a" "$b" "$b" "$a"
a=$(awk '/KV cache q8_0,/ { print $6; exit }' "$OUT/ours-depth.txt")
row "KV cache q8_0 (ours) beside f16 (llama.cpp), KiB a token" "$a" "$b" \
    "$b" "$a"
