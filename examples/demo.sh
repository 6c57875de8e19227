#!/bin/sh
# The main job: installs what is missing, builds, and runs the demo.
set -eu
cd "$(dirname "$0")/.."
./tests/setup.sh

export GST_PLUGIN_PATH="$(pwd)/build/gst/elements${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"

echo "== compute devices (gst-device-monitor-1.0 Compute)"
gst-device-monitor-1.0 Compute

echo "== frames into NPU memory, read in place by a backend task"
./build/examples/npu-memory-demo 1280x720 120

echo "== a generated F16 llama model, converted to MXFP4 by mxfp4weights"
./build/tests/tools/npu-model-gen text --arch llama --size small --type f16 \
  --seed 1 -o build/demo-text-f16.gguf
gst-launch-1.0 mxfp4weights location=build/demo-text-f16.gguf ! \
  filesink location=build/demo-weights.bin
echo "model file: $(stat -c %s build/demo-text-f16.gguf) bytes;" \
  "tensors as pushed (MXFP4 matrices): $(stat -c %s build/demo-weights.bin) bytes"
