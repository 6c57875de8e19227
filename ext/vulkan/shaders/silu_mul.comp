// SPDX-License-Identifier: LGPL-2.1-or-later
// out[i] = silu (gate[i]) up[i], silu (g) = g / (1 + exp (-g))
// args: 0 gate, 1 up, 2 out; p: count; groups: ceil (count / 256) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

void main () {
  uint i = global_index ();
  if (i >= pc.p[0])
    return;
  float g = uintBitsToFloat (a0[pc.off[0] / 4 + i]);
  float u = uintBitsToFloat (a1[pc.off[1] / 4 + i]);
  a2[pc.off[2] / 4 + i] = floatBitsToUint (g / (1.0 + exp (-g)) * u);
}
