// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c][i] = (x[c][i] - mean) / sqrt (var + eps) w[i] + b[i], one row a
// group (ggml_norm, then the weight and bias); y may be x
// args: 0 x, 1 w, 2 b, 3 y; p: dim, eps (bits), rows; groups: rows over
// (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

void main () {
  uint dim = pc.p[0], c = group_row ();
  float eps = uintBitsToFloat (pc.p[1]);
  if (c >= pc.p[2])
    return;
  uint x0 = pc.off[0] / 4 + c * dim, y0 = pc.off[3] / 4 + c * dim;
  float s = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < dim; i += 64)
    s += uintBitsToFloat (a0[x0 + i]);
  float mean = group_sum (s) / float (dim);
  float s2 = 0.0;
  for (uint i = gl_LocalInvocationID.x; i < dim; i += 64) {
    float d = uintBitsToFloat (a0[x0 + i]) - mean;
    s2 += d * d;
  }
  float inv = 1.0 / sqrt (group_sum (s2) / float (dim) + eps);
  for (uint i = gl_LocalInvocationID.x; i < dim; i += 64)
    a3[y0 + i] = floatBitsToUint ((uintBitsToFloat (a0[x0 + i]) - mean) * inv *
        uintBitsToFloat (a1[pc.off[1] / 4 + i]) +
        uintBitsToFloat (a2[pc.off[2] / 4 + i]));
}
