#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Sets up and builds gst-npu for aarch64 on a Debian 12 x86 machine, so that
# its suites run under qemu-user (tests/run.sh's aarch64 phase):
#   - the arm64 architecture in dpkg, Debian's cross compiler, qemu-user,
#     the arm64 multiarch -dev packages and the arm64 GStreamer plugins the
#     tests load (apt; sudo when not root);
#   - libgstreamer-plugins-base1.0-dev:arm64, which Debian 12 does not let
#     sit beside the x86 one (it is not Multi-Arch: same): its files are
#     unpacked under BUILD/arm64-dev (dpkg's tree stays untouched) and its
#     pkg-config files point there;
#   - gstreamer1.0-tools:arm64's programs unpacked under BUILD/arm64-tools
#     the same way (tests/cross/demo-aarch64.sh);
#   - meson with tests/cross/aarch64-linux-gnu.ini and -Dwerror=true into
#     BUILD (default build-aarch64), then ninja.
# Usage: tests/cross/setup-aarch64.sh [BUILD]
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build-aarch64}
triplet=aarch64-linux-gnu

SUDO=
if [ "$(id -u)" != 0 ]; then
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive

# Host tools, then the arm64 libraries: the -dev packages the build links
# against, and the runtime plugins the gst-check suite loads, as on x86:
# videotestsrc, appsrc, fakesink, audiotestsrc and videoconvert
# (gstreamer1.0-plugins-base), textoverlay (gstreamer1.0-x) and pngenc
# (gstreamer1.0-plugins-good).
PACKAGES="gcc-$triplet libc6-dev-arm64-cross qemu-user
  libglib2.0-dev:arm64 libgstreamer1.0-dev:arm64 libdrm-dev:arm64
  liborc-0.4-dev:arm64 libgstreamer-plugins-base1.0-0:arm64
  libgstreamer-gl1.0-0:arm64 gstreamer1.0-plugins-base:arm64
  gstreamer1.0-x:arm64 gstreamer1.0-plugins-good:arm64"

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "setup-aarch64: adding the arm64 architecture to dpkg"
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -q >/dev/null
fi
missing=
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup-aarch64: installing:$missing"
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null ||
    { $SUDO apt-get update -q >/dev/null &&
      $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null; }
fi

# libgstreamer-plugins-base1.0-dev:arm64 unpacked, of the very version of
# the installed runtime library (its .so links point at dpkg's library).
ver=$(dpkg-query -W -f='${Version}' libgstreamer-plugins-base1.0-0:arm64)
dev=$(pwd)/$build/arm64-dev
# The directory is made here, before meson (which marks only the build
# directories it makes itself as ignored by git)
mkdir -p "$build"
[ -f "$build/.gitignore" ] || echo '*' > "$build/.gitignore"
if [ "$(cat "$dev/.version" 2>/dev/null)" != "$ver" ]; then
  echo "setup-aarch64: unpacking libgstreamer-plugins-base1.0-dev:arm64 $ver"
  rm -rf "$dev"
  mkdir -p "$dev/deb"
  (cd "$dev/deb" &&
    apt-get download -q "libgstreamer-plugins-base1.0-dev:arm64=$ver" \
      >/dev/null 2>&1) ||
    { echo "setup-aarch64: cannot download libgstreamer-plugins-base1.0-dev:arm64=$ver"; exit 1; }
  dpkg-deb -x "$dev"/deb/*.deb "$dev"
  rm -rf "$dev/deb"
  for pc in "$dev/usr/lib/$triplet/pkgconfig"/*.pc; do
    sed -i "s|^prefix=.*|prefix=$dev/usr|" "$pc"
  done
  for so in "$dev/usr/lib/$triplet"/lib*.so; do
    ln -sf "/usr/lib/$triplet/$(readlink "$so")" "$so"
  done
  echo "$ver" > "$dev/.version"
fi

# gstreamer1.0-tools:arm64 (gst-inspect-1.0, gst-launch-1.0) cannot sit
# beside the x86 one either (the same paths): its programs are unpacked
# under BUILD/arm64-tools, of the installed library's version, for
# tests/cross/demo-aarch64.sh to run under qemu-user.
tools=$(pwd)/$build/arm64-tools
tver=$(dpkg-query -W -f='${Version}' libgstreamer1.0-0:arm64)
if [ "$(cat "$tools/.version" 2>/dev/null)" != "$tver" ]; then
  echo "setup-aarch64: unpacking gstreamer1.0-tools:arm64 $tver"
  rm -rf "$tools"
  mkdir -p "$tools/deb"
  (cd "$tools/deb" &&
    apt-get download -q "gstreamer1.0-tools:arm64=$tver" >/dev/null 2>&1) ||
    { echo "setup-aarch64: cannot download gstreamer1.0-tools:arm64=$tver"; exit 1; }
  dpkg-deb -x "$tools"/deb/*.deb "$tools"
  rm -rf "$tools/deb"
  echo "$tver" > "$tools/.version"
fi

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" --cross-file tests/cross/$triplet.ini \
    -Dwerror=true -Dpkg_config_path="$dev/usr/lib/$triplet/pkgconfig" \
    >"$build/meson-setup.log" 2>&1 ||
    { cat "$build/meson-setup.log"; exit 1; }
fi
ninja -C "$build" >"$build/ninja.log" 2>&1 || { cat "$build/ninja.log"; exit 1; }
echo "setup-aarch64: built gst-npu for aarch64 in $(pwd)/$build"
