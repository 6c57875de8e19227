// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c][i] = x[c][i] w[i] / sqrt (mean_i (x[c][i]^2) + eps), one row a group
// args: 0 x, 1 w, 2 y; p: dim, eps (bits), rows; groups: rows over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

void main () {
  uint dim = pc.p[0], c = group_row ();
  float eps = uintBitsToFloat (pc.p[1]);
  if (c >= pc.p[2])
    return;
  uint x0 = pc.off[0] / 4 + c * dim, w0 = pc.off[1] / 4,
      y0 = pc.off[2] / 4 + c * dim;
  float s = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < dim; i += 64) {
    float v = uintBitsToFloat (a0[x0 + i]);
    s += v * v;
  }
  float inv = 1.0 / sqrt (group_sum (s) / float (dim) + eps);
  for (uint i = gl_LocalInvocationID.x; i < dim; i += 64)
    a2[y0 + i] = floatBitsToUint (uintBitsToFloat (a0[x0 + i]) * inv *
        uintBitsToFloat (a1[w0 + i]));
}
