// SPDX-License-Identifier: LGPL-2.1-or-later
// each row of x replaced by its softmax, in place, one row a group
// args: 0 x; p: dim, n; groups: rows over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

void main () {
  uint dim = pc.p[0], c = group_row ();
  if (c >= pc.p[1])
    return;
  uint x0 = pc.off[0] / 4 + c * dim;
  float m = -1.0 / 0.0;
  for (uint i = gl_LocalInvocationID.x; i < dim; i += 64)
    m = max (m, uintBitsToFloat (a0[x0 + i]));
  m = group_max (m);
  float s = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < dim; i += 64)
    s += exp (uintBitsToFloat (a0[x0 + i]) - m);
  float inv = 1.0 / group_sum (s);
  for (uint i = gl_LocalInvocationID.x; i < dim; i += 64)
    a0[x0 + i] = floatBitsToUint (exp (uintBitsToFloat (a0[x0 + i]) - m) * inv);
}
