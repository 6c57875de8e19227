#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs the build into a temporary prefix (meson install --destdir),
# builds install-check.c against the installed gst-npu-1.0.pc alone, runs
# it, and checks the installed library's exported symbols: each must be a
# function or variable of the API (gst_npu_*, npu_*, gst_*_npu_*) declared
# in an installed header; nothing of the kernels' own entry points.
# Usage: test-install.sh BUILD_DIR SOURCE_DIR PREFIX LIBDIR
set -eu
build=$1 src=$2 prefix=$3 libdir=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

meson install -C "$build" --no-rebuild --destdir "$tmp/root" --quiet >/dev/null
root=$tmp/root$prefix
case $libdir in /*) lib=$tmp/root$libdir ;; *) lib=$root/$libdir ;; esac
inc=$root/include/gst-npu-1.0
[ -f "$lib/libgstnpu-1.0.so" ] || { echo "FAIL: no libgstnpu-1.0.so in $lib"; exit 1; }
[ -f "$inc/npu/npu.h" ] && [ -f "$inc/core/device/npuapi.h" ] ||
  { echo "FAIL: headers not under include/gst-npu-1.0/"; exit 1; }

# The program sees only the installed tree, through its pkg-config file
# (its prefix moved to where --destdir put it; the other packages' own).
mkdir "$tmp/pc"
sed "s|^prefix=.*|prefix=$root|" "$lib/pkgconfig/gst-npu-1.0.pc" \
  > "$tmp/pc/gst-npu-1.0.pc"
export PKG_CONFIG_PATH="$tmp/pc"
# shellcheck disable=SC2046
${CC:-cc} -Wall -Werror -o "$tmp/install-check" \
  "$src/tests/install/install-check.c" $(pkg-config --cflags --libs gst-npu-1.0)
LD_LIBRARY_PATH=$lib "$tmp/install-check"

# Exported symbols: all of the API's form, each declared in a header.
nm -D --defined-only "$lib/libgstnpu-1.0.so" | awk '{ print $3 }' |
  sort -u > "$tmp/exported"
n=$(wc -l < "$tmp/exported")
bad=0
while read -r sym; do
  case $sym in
    gst_npu_* | npu_* | gst_*_npu_*) ;;
    *) echo "FAIL: exported, not of the API: $sym"; bad=1; continue ;;
  esac
  if ! grep -rqw -- "$sym" "$inc"; then
    echo "FAIL: exported, declared in no installed header: $sym"
    bad=1
  fi
done < "$tmp/exported"
# The kernels' private entry points (npumatmul-private.h) must stay inside.
for sym in npu_mxfp4_tile_avx2 npu_mxfp4_tile_avx512 npu_matmul_e8m0_table npu_attention_rows; do
  if grep -qx "$sym" "$tmp/exported"; then
    echo "FAIL: private symbol exported: $sym"
    bad=1
  fi
done
[ "$n" -ge 100 ] || { echo "FAIL: only $n symbols exported"; bad=1; }
[ "$bad" = 0 ] && echo "ok: $n symbols exported, all declared API"
exit "$bad"
