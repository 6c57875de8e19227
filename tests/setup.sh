#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what is missing on Debian 12 (apt; sudo when not root), then
# configures and builds gst-npu in ./build.  Used by examples/demo.sh and
# tests/run.sh, so a fresh machine needs nothing else.
set -eu
cd "$(dirname "$0")/.."

# Build, run and test dependencies (libgstreamer1.0-dev carries gst-check,
# which the build requires; gstreamer1.0-x: textoverlay, for the caption
# pipeline in docs/npullm.md; gstreamer1.0-alsa: alsasrc/alsasink, for the
# real-kernel suite's ALSA loopback into npuaudiotok).  The last line is the
# real-kernel test
# suite: QEMU boots Debian's kernel with dma-buf heaps, udmabuf and vgem.
PACKAGES="gcc libc6-dev pkg-config meson ninja-build
  libglib2.0-dev libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libdrm-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-base-apps
  gstreamer1.0-plugins-good gstreamer1.0-alsa
  gstreamer1.0-x
  valgrind indent
  qemu-system-x86 busybox-static kmod cpio xz-utils strace"

SUDO=
if [ "$(id -u)" != 0 ]; then
  SUDO=sudo
fi

missing=
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
fi

if [ ! -f build/build.ninja ]; then
  meson setup build >/dev/null || { meson setup build; exit 1; }
fi
ninja -C build >/dev/null || { ninja -C build; exit 1; }
echo "setup: built gst-npu in $(pwd)/build"
