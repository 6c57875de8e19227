// SPDX-License-Identifier: LGPL-2.1-or-later
// y[i] = gelu (x[i]), the tanh form (ggml_gelu):
// 0.5 x (1 + tanh (sqrt (2 / pi) (x + 0.044715 x^3)))
// args: 0 x, 1 y; p: count; groups: ceil (count / 256) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

void main () {
  uint i = global_index ();
  if (i >= pc.p[0])
    return;
  float x = uintBitsToFloat (a0[pc.off[0] / 4 + i]);
  float u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
  // tanh from exp, clamped: GLSL's tanh is undefined for large inputs on
  // some drivers, and tanh (10) is 1 in F32
  float e = exp (-2.0 * clamp (u, -10.0, 10.0));
  float th = (1.0 - e) / (1.0 + e);
  a1[pc.off[1] / 4 + i] = floatBitsToUint (0.5 * x * (1.0 + th));
}
