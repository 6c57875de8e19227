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
