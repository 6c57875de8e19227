#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Builds the MXFP4 kernel test for aarch64 and runs it under qemu-user, so
# the NEON path is tested on an x86 machine.  Needs (Debian):
#   gcc-aarch64-linux-gnu qemu-user libglib2.0-dev:arm64
#   (dpkg --add-architecture arm64 first)
# Usage: tests/cross/run-neon.sh [build-dir (default: a temporary one)]
set -eu

src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-$(mktemp -d)}
mkdir -p "$out"
cc=${CROSS_CC:-aarch64-linux-gnu-gcc}
sysroot=${CROSS_SYSROOT:-/usr/aarch64-linux-gnu}
glib=$(PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig \
  pkg-config --cflags --libs glib-2.0)
# The backend includes the build's config.h: this one builds the CPU
# engine alone (no Vulkan, no libdrm)
printf '#undef HAVE_VULKAN\n#undef HAVE_LIBDRM\n' > "$out/config.h"
flags="-O2 -g -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter
  -Wno-missing-field-initializers -Wshadow -Wmissing-prototypes
  -Wdeclaration-after-statement -I$out -I$src/gst -I$src"

# The NEON kernels alone get the dotprod (and i8mm) flags, as in the meson
# build.
$cc $flags -march=armv8.2-a+dotprod -c "$src/gst/core/cpu/npumatmul-neon.c" \
  -o "$out/npumatmul-neon.o" $glib
$cc $flags -march=armv8.2-a+dotprod+i8mm \
  -c "$src/gst/core/cpu/npumatmul-neon-i8mm.c" -o "$out/npumatmul-neon-i8mm.o" \
  $glib
$cc $flags -o "$out/test-matmul" "$src/tests/unit/test-matmul.c" \
  "$src/gst/core/cpu/npumatmul.c" "$src/gst/core/formats/npumxfp4.c" \
  "$src/gst/core/device/npubackend.c" "$src/gst/core/device/npufence.c" \
  "$src/gst/core/device/npuhugemem.c" "$src/gst/core/device/npuevents.c" \
  "$src/gst/core/device/npubytes.c" "$src/gst/core/cpu/npucpu.c" \
  "$src/gst/core/cpu/npumatmul-view.c" "$src/gst/core/device/nputensorview.c" \
  "$out/npumatmul-neon.o" "$out/npumatmul-neon-i8mm.o" $glib -lpthread -lm

# -cpu max: a CPU with the dot-product extension and the int8 matrix
# multiply, so "neon" and "neon-i8mm" are available and tested next to
# "scalar".  Debian 12's qemu-user hangs in clone() on
# some hosts (containers); NPU_TEST_NO_THREADS=1 then runs every product
# without a task (the threading is the same C code as on x86, tested there).
QEMU_CPU=${QEMU_CPU:-max} QEMU_LD_PREFIX=$sysroot \
  timeout "${NEON_TIMEOUT:-600}" qemu-aarch64 "$out/test-matmul"
