// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c * rows + r] = sum_j w[r][j] x[c * k + j], Q8_0 weights read in place:
// ggml's 34-byte block_q8_0 (binary16 scale d, 32 int8 values), k a
// multiple of 32, the weights at any byte offset; one invocation an output
// (see mul_f32.comp)
// args: 0 w, 1 x, 2 y; p: rows, k, n; groups: ceil (rows n / 64) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

// the byte at byte address @a of argument 0
uint w_byte (uint a) {
  return (a0[a >> 2] >> ((a & 3u) << 3)) & 0xffu;
}

void main () {
  uint rows = pc.p[0], k = pc.p[1], nb = k / 32, g = global_index ();
  if (g >= rows * pc.p[2])
    return;
  uint r = g % rows, c = g / rows;
  uint x0 = pc.off[1] / 4 + c * k;
  float s = 0.0;
  for (uint b = 0; b < nb; b++) {
    uint base = pc.off[0] + (r * nb + b) * 34u;
    float d = unpackHalf2x16 (w_byte (base) | (w_byte (base + 1) << 8)).x;
    float t = 0.0;
    for (uint j = 0; j < 32; j++) {
      int v = int (w_byte (base + 2 + j) << 24) >> 24;
      t += float (v) * uintBitsToFloat (a1[x0 + b * 32 + j]);
    }
    s += d * t;
  }
  a2[pc.off[2] / 4 + g] = floatBitsToUint (s);
}
