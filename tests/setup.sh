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
  qemu-system-x86 busybox-static kmod cpio xz-utils strace iproute2
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers"

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

# GStreamer 1.26's analytics library (GstTensorMeta, GstAnalyticsRelationMeta)
# for the token tensors' GstTensorMeta and npullm's caption metadata.  Debian
# 13 has its headers only in libgstreamer-plugins-bad1.0-dev, which pulls
# OpenCV and more: take the runtime library from its package, and from the
# -dev package only the analytics headers, pkg-config file and .so link,
# under /usr/local (dpkg's /usr stays untouched).  Debian 12 (GStreamer
# 1.22) has no such library: the feature is built out there.
analytics_pc=/usr/local/lib/$(gcc -print-multiarch 2>/dev/null)/pkgconfig/gstreamer-analytics-1.0.pc
if grep -q '^VERSION_ID="13"' /etc/os-release 2>/dev/null &&
   ! pkg-config --exists gstreamer-analytics-1.0 2>/dev/null; then
  echo "setup: installing GStreamer's analytics headers (from libgstreamer-plugins-bad1.0-dev)"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y -q --no-install-recommends \
    libgstreamer-plugins-bad1.0-0 >/dev/null ||
    { $SUDO apt-get update -q >/dev/null &&
      $SUDO apt-get install -y -q --no-install-recommends \
        libgstreamer-plugins-bad1.0-0 >/dev/null; }
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q libgstreamer-plugins-bad1.0-dev >/dev/null 2>&1) ||
    { echo "setup: cannot download libgstreamer-plugins-bad1.0-dev"; rm -rf "$tmp"; exit 1; }
  dpkg-deb -x "$tmp"/libgstreamer-plugins-bad1.0-dev_*.deb "$tmp/x"
  arch=$(gcc -print-multiarch)
  $SUDO mkdir -p /usr/local/include/gstreamer-1.0/gst "${analytics_pc%/*}"
  $SUDO cp -r "$tmp/x/usr/include/gstreamer-1.0/gst/analytics" \
    /usr/local/include/gstreamer-1.0/gst/
  sed 's|^prefix=.*|prefix=/usr/local|; s|^libdir=.*|libdir=${prefix}/lib/'"$arch"'|' \
    "$tmp/x/usr/lib/$arch/pkgconfig/gstreamer-analytics-1.0.pc" |
    $SUDO tee "$analytics_pc" >/dev/null
  $SUDO ln -sf "/usr/lib/$arch/libgstanalytics-1.0.so.0" \
    "/usr/local/lib/$arch/libgstanalytics-1.0.so"
  rm -rf "$tmp"
  # the build must see the new dependency
  [ ! -f build/build.ninja ] || meson setup --reconfigure build >/dev/null
fi

if [ ! -f build/build.ninja ]; then
  # the Vulkan engine is built, or the set-up fails, rather than a build
  # without it passing its tests by skipping them
  meson setup build -Dvulkan=enabled >/dev/null ||
    { meson setup build -Dvulkan=enabled; exit 1; }
fi
ninja -C build >/dev/null || { ninja -C build; exit 1; }
echo "setup: built gst-npu in $(pwd)/build"
