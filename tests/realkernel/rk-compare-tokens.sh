#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# rk-compare-tokens.sh DIR N_FRAMES REFERENCE NAME..: run in the guest after
# the rk-visiontok runs that wrote their tokens to DIR/NAME.f32.  Each NAME
# (a dma-buf path: io-mode=dmabuf or dmabuf-import, classic or DMA_DRM caps)
# must have left the same tokens as REFERENCE (the same camera frames as
# system memory), byte for byte: the same pixels through the same code give
# the same floats, so no tolerance is needed, and any difference means a
# path read the frame from the wrong place (a plane offset, a stride, the
# drm-format's layout).  Frame N is compared with frame N: every run is a
# fresh capture of vivid's still test pattern with the same frame count.
set -u
DIR=$1 N=$2 REF=$1/$3.f32
shift 3
[ -s "$REF" ] || { echo "not ok - no tokens from the system-memory path ($REF)"; exit 1; }
size=$(stat -c %s "$REF")
[ $((size % N)) -eq 0 ] || { echo "not ok - $size bytes of tokens are not $N frames'"; exit 1; }
# Evidence that the camera's frames did not change within a run (the
# comparison itself does not rely on it): when every frame's tokens equal
# the next frame's, the file equals itself shifted by one frame (one cmp:
# each process costs under emulation).
fs=$((size / N))
if cmp -s -n $((size - fs)) -i 0:$fs "$REF" "$REF"; then still="all the same"; else still="not all the same"; fi
echo "# reference: $N frames, $fs bytes of tokens each, $still"
fail=0
for name in "$@"; do
  f=$DIR/$name.f32
  if [ ! -f "$f" ]; then
    echo "not ok - $name left no tokens"; fail=1
  elif cmp "$REF" "$f"; then
    echo "ok - $name: $(stat -c %s "$f") bytes of tokens, the same as the system-memory path's"
  else
    echo "not ok - $name: tokens differ from the system-memory path's ($(stat -c %s "$f") bytes, reference $size)"
    fail=1
  fi
done
[ $# -ge 2 ] || { echo "not ok - only $# dma-buf runs to compare"; exit 1; }
exit $fail
