// SPDX-License-Identifier: LGPL-2.1-or-later
// out[i] = alpha a[i] + beta b[i] (an add: alpha = beta = 1)
// args: 0 a, 1 b, 2 out; p: count, alpha (bits), beta (bits); groups:
// ceil (count / 256) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

void main () {
  uint i = global_index ();
  if (i >= pc.p[0])
    return;
  float a = uintBitsToFloat (a0[pc.off[0] / 4 + i]);
  float b = uintBitsToFloat (a1[pc.off[1] / 4 + i]);
  float alpha = uintBitsToFloat (pc.p[1]), beta = uintBitsToFloat (pc.p[2]);
  // exactly a + b for an add, whatever the driver's contraction
  a2[pc.off[2] / 4 + i] = floatBitsToUint (alpha == 1.0 && beta == 1.0 ?
      a + b : alpha * a + beta * b);
}
