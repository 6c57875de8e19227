// SPDX-License-Identifier: LGPL-2.1-or-later
// dst row i = src row idx[i] (idx[i] < 0: zeros), rows of dim values: the
// permutations between layers (Idefics3's pixel shuffle, a class token)
// args: 0 src, 1 idx (int32), 2 dst; p: n_out, dim; groups: ceil (n_out dim
// / 256) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

void main () {
  uint dim = pc.p[1], g = global_index ();
  if (g >= pc.p[0] * dim)
    return;
  uint i = g / dim, c = g % dim;
  int row = int (a1[pc.off[1] / 4 + i]);
  float v = row < 0 ? 0.0 : uintBitsToFloat (a0[pc.off[0] / 4 + uint (row) * dim + c]);
  a2[pc.off[2] / 4 + g] = floatBitsToUint (v);
}
