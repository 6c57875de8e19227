// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c * rows + r] = sum_j w[r * k + j] x[c * k + j], F32 weights
// One invocation an output: the neighbours of a group share the input row
// and read consecutive weight rows (a CPU driver runs them as the lanes of
// one vector; one group a row and a reduction cost lavapipe a
// workgroup's start and six barriers per output).
// args: 0 w, 1 x, 2 y; p: rows, k, n; groups: ceil (rows n / 64) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

void main () {
  uint rows = pc.p[0], k = pc.p[1], g = global_index ();
  if (g >= rows * pc.p[2])
    return;
  uint r = g % rows, c = g / rows;
  uint w0 = pc.off[0] / 4 + r * k, x0 = pc.off[1] / 4 + c * k;
  float s = 0.0;
  for (uint j = 0; j < k; j++)
    s += uintBitsToFloat (a0[w0 + j]) * uintBitsToFloat (a1[x0 + j]);
  a2[pc.off[2] / 4 + g] = floatBitsToUint (s);
}
