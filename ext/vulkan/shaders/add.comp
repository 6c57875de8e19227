// SPDX-License-Identifier: LGPL-2.1-or-later
// out[i] = a[i] + b[i]
// args: 0 a, 1 b, 2 out; p: count; groups: ceil (count / 256) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

void main () {
  uint i = global_index ();
  if (i >= pc.p[0])
    return;
  a2[pc.off[2] / 4 + i] = floatBitsToUint (uintBitsToFloat (a0[pc.off[0] / 4 +
              i]) + uintBitsToFloat (a1[pc.off[1] / 4 + i]));
}
