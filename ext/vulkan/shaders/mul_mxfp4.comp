// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c * rows + r] = sum_j w[r][j] x[c * k + j], MXFP4 weights read in place
// in their 17-byte blocks (ggml's block_mxfp4, gst/core/formats/npumxfp4.h:
// E8M0 scale byte e, then element j in the low nibble of byte 1 + j and
// element j + 16 in its high nibble), k a multiple of 32
// args: 0 w, 1 x, 2 y; p: rows, k; groups: rows over (x, y), n in z
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

const float e2m1[16] = float[16] (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
    -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0);

uint w_byte (uint a) {
  return (a0[a >> 2] >> ((a & 3u) << 3)) & 0xffu;
}

void main () {
  uint rows = pc.p[0], k = pc.p[1], nb = k / 32;
  uint r = group_row (), c = gl_WorkGroupID.z;
  if (r >= rows)
    return;
  uint x0 = pc.off[1] / 4 + c * k;
  float s = 0.0;
  // a thread takes a quarter block: bytes 1 + 4 part .. 4 + 4 part, that
  // is elements 4 part .. 4 part + 3 and the same plus 16
  for (uint q = gl_LocalInvocationID.x; q < nb * 4; q += 64) {
    uint b = q >> 2, part = q & 3u;
    uint base = pc.off[0] + (r * nb + b) * 17u;
    uint e = w_byte (base);
    // 2^(e - 127) from its bits; e = 0 (2^-127, subnormal) is taken as 0,
    // as GPUs flush subnormals
    float scale = uintBitsToFloat (e << 23);
    uint xb = x0 + b * 32;
    float t = 0.0;
    [[unroll]] for (uint i = 0; i < 4; i++) {
      uint j = part * 4 + i, v = w_byte (base + 1 + j);
      t += e2m1[v & 15u] * uintBitsToFloat (a1[xb + j]) +
          e2m1[v >> 4] * uintBitsToFloat (a1[xb + j + 16]);
    }
    s += scale * t;
  }
  s = group_sum (s);
  if (gl_LocalInvocationID.x == 0)
    a2[pc.off[2] / 4 + c * rows + r] = floatBitsToUint (s);
}
