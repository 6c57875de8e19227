// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c * rows + r] = sum_j w[r][j] x[c * k + j], MXFP4 weights read in place
// in their 17-byte blocks (ggml's block_mxfp4, gst/core/formats/npumxfp4.h:
// E8M0 scale byte e, then element j in the low nibble of byte 1 + j and
// element j + 16 in its high nibble), k a multiple of 32; one invocation
// an output (see mul_f32.comp)
// args: 0 w, 1 x, 2 y; p: rows, k, n; groups: ceil (rows n / 64) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

// E2M1 code (sign bit 3, magnitude code m) to its value, by arithmetic:
// a constant table indexed at run time becomes memory on CPU drivers
float e2m1 (uint code) {
  uint m = code & 7u;
  float v = m < 2u ? 0.5 * float (m) :
      (1.0 + 0.5 * float (m & 1u)) * float (1u << ((m >> 1) - 1u));
  return (code & 8u) != 0u ? -v : v;
}

// the four bytes of argument 0 at byte address @a, any alignment
uint w_word (uint a) {
  uint sh = (a & 3u) << 3, lo = a0[a >> 2];
  return sh == 0u ? lo : (lo >> sh) | (a0[(a >> 2) + 1u] << (32u - sh));
}

void main () {
  uint rows = pc.p[0], k = pc.p[1], nb = k / 32, g = global_index ();
  if (g >= rows * pc.p[2])
    return;
  uint r = g % rows, c = g / rows;
  uint x0 = pc.off[1] / 4 + c * k;
  float s = 0.0;
  for (uint b = 0; b < nb; b++) {
    uint base = pc.off[0] + (r * nb + b) * 17u;
    // 2^(e - 127) from its bits; e = 0 (2^-127, subnormal) is taken as 0,
    // as GPUs flush subnormals
    float scale = uintBitsToFloat ((w_word (base) & 0xffu) << 23);
    uint xb = x0 + b * 32;
    float t = 0.0;
    // the 16 code bytes as four words, each four elements and the four
    // sixteen places on
    [[unroll]] for (uint q = 0; q < 4; q++) {
      uint v = w_word (base + 1u + 4u * q);
      [[unroll]] for (uint i = 0; i < 4; i++) {
        uint byte = (v >> (8u * i)) & 0xffu, j = 4u * q + i;
        t += e2m1 (byte & 15u) * uintBitsToFloat (a1[xb + j]) +
            e2m1 (byte >> 4) * uintBitsToFloat (a1[xb + j + 16u]);
      }
    }
    s += scale * t;
  }
  a2[pc.off[2] / 4 + g] = floatBitsToUint (s);
}
