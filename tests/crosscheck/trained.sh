#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The trained models of tests/models/ beside llama.cpp: every held-out
# frame of vision-heldout.txt and every held-out sound of
# audio-heldout.txt through
#
#   filesrc ! <the frame's caps> ! npuvisiontok ! npullm     (ours)
#   mtmd-caption --image <the encoder's input>               (llama.cpp)
#
#   filesrc ! wavparse ! npuaudiotok ! npullm                (ours)
#   mtmd-audio-caption --audio <the same WAV>                (llama.cpp)
#
# with the same files and the prompts "What do you see?" and "What do you
# hear?", and how often the two answers agree, word for word.
# mtmd-caption (build-llamacpp.sh) answers as llama-mtmd-cli --temp 0
# does (the file's chat template, mtmd_tokenize, mtmd_helper_eval_chunks,
# the most likely token) but prints the answer itself: llama-mtmd-cli's
# asynchronous log loses the end of an answer at exit now and then.
# mtmd-audio-caption does the same for a sound with llama.cpp's own WAV
# decoding, Whisper log-mel, encoder and text model, but keeps the log-mel's
# first second: llama-mtmd-cli --audio makes 30 s windows, which the
# trained encoder's 50-row position table cannot take (clip.cpp aborts),
# where npuaudiotok clamps its chunks to the file's window.  mtmd puts
# "<|audio_bos|>" and "<|audio_eos|>" around a qwen2a sound; npullm and
# the training do not (the vocabulary has no such tokens, so llama.cpp
# spells them in bytes): the audio lines give llama.cpp's answer both
# ways, with them (as mtmd) and bare (as npullm), and agreement is
# counted for both.  A developer tool, not part of the test suite: it
# needs the llama.cpp build of build-llamacpp.sh (run here; ~5 minutes on
# two cores the first time, and npm).
#
#   tests/crosscheck/trained.sh [BUILD_DIR]
#
# BUILD_DIR is a meson build of this tree (default: build/).  Environment:
# LLAMACPP_DIR (/tmp/llamacpp), WORK (/tmp/npu-crosscheck-trained) for the
# frames, the sounds and the answers, MODELS (tests/models), LIMIT (all)
# the number of cases of each medium, MEDIA ("vision audio") which of the
# two to run, VISION_CASES (vision-heldout.txt) the list of frames in
# MODELS (camera-balls.txt: the camera-sized balls train.py only reports).
#
# The frames: npu-render-frames draws each case's frame, the one the
# end-to-end test reaches (the frame videotestsrc shows at the case's
# position), and writes the frame's
# bytes with its caps, which our pipeline reads back, and the encoder
# input npuvisiontok makes of it (the mmproj's clip.vision.image_size and
# patch_size: 128 x 128 in patches of 16) (the frame stretched by area
# averaging or bilinear, as docs/visionprep.md says) as a PPM, which
# llama.cpp gets: at the encoder's size its own resize changes nothing, so
# both encode the same image (to within the PPM's 8-bit rounding).
#
# The sounds: the spoken words are the committed WAV files; each
# audiotestsrc case is written by its own source through wavenc (its
# format, rate and channels kept), and both sides read that WAV, each
# with its own down-mix and resampler to 16 kHz.
#
# The wrapping: for an image of the encoder's size mtmd makes a 1 x 1 grid
# of tiles, "<fake_token_around_image><row_1_col_1>" tile, then the
# overview "\n\n<fake_token_around_image><global-img>" overview
# "<fake_token_around_image>", tile and overview being the same image;
# npullm gives npuvisiontok's one image as that overview alone.  The model
# was trained on both (tests/train/train.py), so the answers, not the
# prompts, are what is compared.  An answer is right when it has every
# word the case lists, as in the test.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=${1:-$SRC/build}
export LLAMACPP_DIR=${LLAMACPP_DIR:-/tmp/llamacpp}
WORK=${WORK:-/tmp/npu-crosscheck-trained}
MODELS=${MODELS:-$SRC/tests/models}
LIMIT=${LIMIT:-0}
MEDIA=${MEDIA:-vision audio}
VISION_CASES=${VISION_CASES:-vision-heldout.txt}
PROMPT="What do you see?"
mkdir -p "$WORK/frames" "$WORK/sounds"
. "$HERE/lib.sh"
build_llamacpp
build_tools "$BUILD" "$SRC" "$WORK" tests/tools/npu-render-frames \
    gst/elements/libgstnpu.so
CAPTION=$LLAMACPP_DIR/mtmd-caption
ACAPTION=$LLAMACPP_DIR/mtmd-audio-caption
TEXT=$MODELS/videotestsrc-text.gguf
MMPROJ=$MODELS/videotestsrc-mmproj.gguf
AMMPROJ=$MODELS/audiotestsrc-mmproj.gguf
export GST_PLUGIN_PATH=$BUILD/gst/elements${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}

# trim: the text on one line, without spaces at its ends
trim () {
  tr '\n' ' ' | sed 's/^ *//; s/ *$//'
}

# has_words ANSWER WORDS: every comma-separated word, whole, any case
has_words () {
  local answer=${1,,} w
  IFS=, read -ra ws <<<"$2"
  for w in "${ws[@]}"; do
    [[ " $answer " =~ [^a-z]${w,,}[^a-z] ]] || return 1
  done
}

# A held-out list's cases without comments and blank lines, the first
# LIMIT of them when LIMIT is set
heldout_cases () {
  grep -v '^#' "$MODELS/$1" | sed '/^$/d' |
    awk -v n="$LIMIT" 'n <= 0 || NR <= n'
}

# gguf_u32 FILE KEY: a u32 value of FILE's metadata (the key's string is
# followed by its type, 4, and the value, little-endian)
gguf_u32 () {
  python3 - "$1" "$2" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read(1 << 20)
k = sys.argv[2].encode()
i = d.find(struct.pack("<Q", len(k)) + k)
if i < 0 or struct.unpack_from("<I", d, i + 8 + len(k))[0] != 4:
    sys.exit("%s: no u32 %s" % (sys.argv[1], sys.argv[2]))
print(struct.unpack_from("<I", d, i + 12 + len(k))[0])
PY
}

status=0

vision () {
# the cases: "props | caps | position | words"
heldout_cases "$VISION_CASES" >"$WORK/cases.txt"
echo "== rendering $(wc -l <"$WORK/cases.txt") held-out frames"
cut -d'|' -f1-3 "$WORK/cases.txt" |
  "$BUILD/tests/tools/npu-render-frames" \
      --image-size "$(gguf_u32 "$MMPROJ" clip.vision.image_size)" \
      --patch "$(gguf_u32 "$MMPROJ" clip.vision.patch_size)" \
      --mean 0.5 --std 0.5 -o "$WORK/frames.f32" \
      --ppm-dir "$WORK/frames" --raw-dir "$WORK/frames" >/dev/null

n=0 agree=0 ours_ok=0 theirs_ok=0
while IFS='|' read -r props caps pos words; do
  f=$(printf '%s/frames/frame-%04u' "$WORK" "$n")
  words=$(echo "$words" | trim)
  size=$(stat -c %s "$f.raw")
  ours=$(gst-launch-1.0 -q filesrc location="$f.raw" blocksize="$size" ! \
      "$(tr -d ' ' <"$f.cap")" ! \
      npuvisiontok model="$MMPROJ" ! llm.vision \
      npullm name=llm model="$TEXT" prompt="$PROMPT" ! fdsink 2>"$WORK/gst.log" |
      trim || true)
  theirs=$("$CAPTION" -m "$TEXT" --mmproj "$MMPROJ" --image "$f.ppm" \
      -p "$PROMPT" -n 32 2>"$WORK/mtmd.log" | trim || true)
  verdict=differ
  if [ "$ours" = "$theirs" ]; then
    verdict=agree
    agree=$((agree + 1))
  fi
  has_words "$ours" "$words" && ours_ok=$((ours_ok + 1)) || true
  has_words "$theirs" "$words" && theirs_ok=$((theirs_ok + 1)) || true
  printf '%-6s %-44s | %-32s | %-32s | %s\n' "$verdict" \
      "$(echo "$props" | trim) $(echo "$caps" | sed 's/.*format=//' | trim)" \
      "$ours" "$theirs" "$words"
  n=$((n + 1))
done <"$WORK/cases.txt"
echo "vision: agree: $agree of $n; right: ours $ours_ok, llama.cpp $theirs_ok"
[ "$agree" -eq "$n" ] || status=1
}

audio () {
heldout_cases audio-heldout.txt >"$WORK/sounds.txt"
echo "== $(wc -l <"$WORK/sounds.txt") held-out sounds"
local n=0 agree=0 agree_bare=0 ours_ok=0 theirs_ok=0 bare_ok=0
local source words wav ours theirs bare verdict
while IFS='|' read -r source words; do
  source=$(echo "$source" | trim)
  words=$(echo "$words" | trim)
  wav=$(printf '%s/sounds/sound-%04u.wav' "$WORK" "$n")
  case "$source" in
    filesrc*)
      source=${source#*location=}
      cp "$MODELS/${source%% *}" "$wav" ;;
    *)
      # shellcheck disable=SC2086
      gst-launch-1.0 -q $source ! wavenc ! filesink location="$wav" ;;
  esac
  ours=$(gst-launch-1.0 -q filesrc location="$wav" ! wavparse ! \
      npuaudiotok model="$AMMPROJ" vad=false chunk-duration=1000000000 ! \
      llm.audio npullm name=llm model="$TEXT" prompt="$APROMPT" ! fdsink \
      2>"$WORK/gst.log" | trim || true)
  theirs=$("$ACAPTION" -m "$TEXT" --mmproj "$AMMPROJ" --audio "$wav" \
      -p "$APROMPT" -n 32 2>"$WORK/mtmd.log" | trim || true)
  bare=$("$ACAPTION" -m "$TEXT" --mmproj "$AMMPROJ" --audio "$wav" \
      -p "$APROMPT" -n 32 --bare 2>"$WORK/mtmd.log" | trim || true)
  verdict=differ
  if [ "$ours" = "$bare" ]; then
    verdict=agree
    agree_bare=$((agree_bare + 1))
  fi
  [ "$ours" = "$theirs" ] && agree=$((agree + 1))
  has_words "$ours" "$words" && ours_ok=$((ours_ok + 1)) || true
  has_words "$theirs" "$words" && theirs_ok=$((theirs_ok + 1)) || true
  has_words "$bare" "$words" && bare_ok=$((bare_ok + 1)) || true
  printf '%-6s %-40s | %-30s | bare %-30s | mtmd %-30s | %s\n' "$verdict" \
      "$(echo "$source" | cut -c1-40)" "$ours" "$bare" "$theirs" "$words"
  n=$((n + 1))
done <"$WORK/sounds.txt"
echo "audio: agree (bare): $agree_bare of $n, agree (mtmd's audio tokens):" \
    "$agree of $n; right: ours $ours_ok, llama.cpp bare $bare_ok, with" \
    "mtmd's tokens $theirs_ok"
[ "$agree_bare" -eq "$n" ] || status=1
}

APROMPT="What do you hear?"
for m in $MEDIA; do
  case "$m" in
    vision) vision ;;
    audio) audio ;;
    *) echo "MEDIA: vision, audio, not $m" >&2; exit 2 ;;
  esac
done
exit $status
