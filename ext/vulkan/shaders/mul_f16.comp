// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c * rows + r] = sum_j w[r * k + j] x[c * k + j], F16 weights (IEEE binary16, k even)
// args: 0 w, 1 x, 2 y; p: rows, k; groups: rows over (x, y), n in z
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

void main () {
  uint rows = pc.p[0], k = pc.p[1];
  uint r = group_row (), c = gl_WorkGroupID.z;
  if (r >= rows)
    return;
  uint w0 = pc.off[0] / 4 + r * (k / 2), x0 = pc.off[1] / 4 + c * k;
  float s = 0.0;
  for (uint j = gl_LocalInvocationID.x; j < k / 2; j += 64) {
    vec2 wv = unpackHalf2x16 (a0[w0 + j]);
    s += wv.x * uintBitsToFloat (a1[x0 + 2 * j]) +
        wv.y * uintBitsToFloat (a1[x0 + 2 * j + 1]);
  }
  s = group_sum (s);
  if (gl_LocalInvocationID.x == 0)
    a2[pc.off[2] / 4 + c * rows + r] = floatBitsToUint (s);
}
