// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c * rows + r] = sum_j w[r * k + j] x[c * k + j], F16 weights (IEEE
// binary16, k even), one invocation an output (see mul_f32.comp)
// args: 0 w, 1 x, 2 y; p: rows, k, n; groups: ceil (rows n / 64) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

void main () {
  uint rows = pc.p[0], k = pc.p[1], g = global_index ();
  if (g >= rows * pc.p[2])
    return;
  uint r = g % rows, c = g / rows;
  uint w0 = pc.off[0] / 4 + r * (k / 2), x0 = pc.off[1] / 4 + c * k;
  float s = 0.0;
  for (uint j = 0; j < k / 2; j++) {
    vec2 wv = unpackHalf2x16 (a0[w0 + j]);
    s += wv.x * uintBitsToFloat (a1[x0 + 2 * j]) +
        wv.y * uintBitsToFloat (a1[x0 + 2 * j + 1]);
  }
  a2[pc.off[2] / 4 + g] = floatBitsToUint (s);
}
