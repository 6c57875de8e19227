#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The main job: installs what is missing, builds, and runs the demo
# pipelines: first the models trained here (tests/models/,
# docs/trained-models.md) naming what videotestsrc draws, then the
# generated random models of the speed benchmarks (real weights cannot be
# downloaded here; their text is noise: what they show is the pipeline, the
# zero-copy path and the figures).  DEMO_ONLY=trained stops after the
# trained models' frames and sounds (tests/tools/npu-answer-repeat.sh -d).
#
# DEMO_BUILD (default build) names the build whose plugin runs the
# trained models' pipelines, DEMO_LAUNCH (default gst-launch-1.0) the
# program that runs them: tests/cross/demo-aarch64.sh sets them to the
# aarch64 build and the arm64 gst-launch-1.0 under qemu-user.
set -eu
cd "$(dirname "$0")/.."
./tests/setup.sh

LAUNCH=${DEMO_LAUNCH:-gst-launch-1.0}
export GST_PLUGIN_PATH="$(pwd)/${DEMO_BUILD:-build}/gst/elements${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
GEN=./build/tests/tools/npu-model-gen
M=build/demo-models
mkdir -p "$M"

T=tests/models
# One frame of videotestsrc through the trained models; prints the answer
# and npullm's figures for it.
name() {
  out=$(mktemp)
  stats=$("$LAUNCH" -m videotestsrc num-buffers=1 $1 ! "$2" ! \
      npuvisiontok model=$T/videotestsrc-mmproj.gguf ! llm.vision \
    npullm name=llm model=$T/videotestsrc-text.gguf \
      prompt="What do you see?" ! filesink location="$out" 2>&1 |
    grep npullm-stats)
  field() { echo "$stats" | sed -n "s/.*$1=([a-z]*)\([0-9.]*\).*/\1/p"; }
  printf '%-62s -> %-28s (first token %.1f ms, %d tokens at %.0f tok/s)\n' \
    "videotestsrc $1 ! $2" "$(cat "$out")" "$(field ttft-ms)" \
    "$(field generated-tokens)" "$(field decode-tps)"
  rm -f "$out"
}
echo "== trained models name what videotestsrc draws (tests/models/)"
name "pattern=smpte" video/x-raw,format=NV12,width=352,height=288
name "pattern=pinwheel" video/x-raw,format=RGB,width=320,height=240
name "pattern=checkers-8" video/x-raw,format=I420,width=199,height=141
name "pattern=solid-color foreground-color=0xffe8e020" \
  video/x-raw,format=NV12,width=320,height=240
name "pattern=zone-plate kx2=24 ky2=24" video/x-raw,format=RGB,width=256,height=192
name "pattern=snow" video/x-raw,format=YUY2,width=320,height=180
# One sound through the trained audio encoder and the same text model:
# vad=false (a tone is a sound to name too), 1 s chunks (the encoder's
# window), so a clip under a second gets one answer.
hear() {
  out=$(mktemp)
  stats=$("$LAUNCH" -m $1 ! audioconvert ! audioresample ! \
      npuaudiotok model=$T/audiotestsrc-mmproj.gguf vad=false \
        chunk-duration=1000000000 ! llm.audio \
    npullm name=llm model=$T/videotestsrc-text.gguf \
      prompt="What do you hear?" ! filesink location="$out" 2>&1 |
    grep npullm-stats)
  field() { echo "$stats" | sed -n "s/.*$1=([a-z]*)\([0-9.]*\).*/\1/p"; }
  printf '%-62s -> %-28s (first token %.1f ms, %d tokens at %.0f tok/s)\n' \
    "$2" "$(cat "$out")" "$(field ttft-ms)" "$(field generated-tokens)" \
    "$(field decode-tps)"
  rm -f "$out"
}
echo "== and name what audiotestsrc plays and a voice says (the same text model)"
hear "audiotestsrc wave=sine freq=1000 volume=0.4 num-buffers=1 samplesperbuffer=12000 ! audio/x-raw,rate=16000,channels=1" \
  "audiotestsrc wave=sine freq=1000 (0.75 s)"
hear "audiotestsrc wave=pink-noise volume=0.5 num-buffers=1 samplesperbuffer=36000 ! audio/x-raw,rate=48000,channels=2" \
  "audiotestsrc wave=pink-noise (48 kHz stereo)"
hear "filesrc location=$T/audio-heldout/seven-0.wav ! wavparse" \
  "filesrc location=.../audio-heldout/seven-0.wav ! wavparse"
hear "filesrc location=$T/audio-heldout/yes-1.wav ! wavparse" \
  "filesrc location=.../audio-heldout/yes-1.wav ! wavparse"
[ "${DEMO_ONLY:-}" != trained ] || exit 0
echo "== live: a moving red ball, captioned as it moves (examples/live-caption.sh)"
SINK=fakesink RUN_SECONDS=3 ./examples/live-caption.sh 0xffff2020 | sort | uniq -c

echo "== compute devices (gst-device-monitor-1.0 Compute)"
gst-device-monitor-1.0 Compute

echo "== generated models: a small qwen2 text model (MXFP4) and its vision projector"
# --untied: a random model with tied embeddings only repeats its last input
# token (docs/models.md), which shows nothing of the pipeline
$GEN text --arch qwen2 --size small --type mxfp4 --untied --seed 1 \
  -o $M/text.gguf
$GEN mmproj --for $M/text.gguf --size tiny --seed 1 -o $M/mmproj.gguf
echo "== and its audio projector (Whisper-style encoder, qwen2a)"
$GEN audio --for $M/text.gguf --size tiny --seed 1 -o $M/audio.gguf

echo "== camera to text: videotestsrc ! npuvisiontok ! npullm ! fdsink"
# fdsink writes to a pipe (| cat): on a redirected, seekable stdout it
# writes from the start of the file, over what the demo printed before.
gst-launch-1.0 -q \
  videotestsrc num-buffers=3 ! video/x-raw,format=NV12,width=1280,height=720 ! \
    npuvisiontok model=$M/mmproj.gguf ! llm.vision \
  npullm name=llm model=$M/text.gguf prompt="Describe what you see." \
    max-tokens=24 ! fdsink | cat
echo

echo "== microphone and camera to text: audiotestsrc ! npuaudiotok and videotestsrc ! npuvisiontok into one npullm"
# 1.8 s of audio: a partial chunk, encoded at EOS; the media of one answer
# are spliced in PTS order (docs/npuaudiotok.md)
gst-launch-1.0 -q \
  audiotestsrc num-buffers=50 samplesperbuffer=1600 ! \
    npuaudiotok model=$M/audio.gguf chunk-duration=5000000000 ! llm.audio \
  videotestsrc num-buffers=1 ! npuvisiontok model=$M/mmproj.gguf ! llm.vision \
  npullm name=llm model=$M/text.gguf prompt="What do you see and hear?" \
    max-tokens=24 ! fdsink | cat
echo

echo "== weights through mxfp4weights, text only"
gst-launch-1.0 -q mxfp4weights location=$M/text.gguf ! llm.weights \
  npullm name=llm prompt="Tell me a story." max-tokens=32 ! fdsink | cat
echo

echo "== the same from an application (examples/npu-describe.c)"
./build/examples/npu-describe $M/text.gguf $M/mmproj.gguf "What is this?"

echo "== frames into NPU memory, read in place by a backend task"
./build/examples/npu-memory-demo 1280x720 120

echo "== a generated F16 llama model, converted to MXFP4 by mxfp4weights"
$GEN text --arch llama --size small --type f16 --seed 1 -o $M/llama-f16.gguf
gst-launch-1.0 -q mxfp4weights location=$M/llama-f16.gguf ! \
  filesink location=$M/llama-weights.bin
echo "model file: $(stat -c %s $M/llama-f16.gguf) bytes;" \
  "tensors as pushed (MXFP4 matrices): $(stat -c %s $M/llama-weights.bin) bytes"
