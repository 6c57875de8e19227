// SPDX-License-Identifier: LGPL-2.1-or-later
// y[c * rows + r] = sum_j w[r][j] x[c * k + j], weights of one of ggml's
// other types read in place in their blocks (ggml-common.h): BF16, Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, any byte offset, k a whole number of
// blocks; each value decoded as ggml's dequantize_row_<type> does (the
// scales and offsets the same products of halves and small integers),
// gst/core/formats/npuquants.c being the CPU's copy; one invocation an
// output (see mul_f32.comp)
// args: 0 w, 1 x, 2 y; p: rows, k, n, ggml type, values a block, bytes a
// block; groups: ceil (rows n / 64) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

// ggml's type ids (npugguf.h)
const uint Q4_0 = 2u, Q4_1 = 3u, Q5_0 = 6u, Q5_1 = 7u, Q4_K = 12u;
const uint Q5_K = 13u, Q6_K = 14u, BF16 = 30u;

// the byte at byte address @a of argument 0
uint w_byte (uint a) {
  return (a0[a >> 2] >> ((a & 3u) << 3)) & 0xffu;
}

// the binary16 at byte address @a
float w_half (uint a) {
  return unpackHalf2x16 (w_byte (a) | (w_byte (a + 1u) << 8)).x;
}

// ggml's get_scale_min_k4 (): sub-block @j's 6-bit scale (x) and min (y)
// from the 12 scale bytes at @q
uvec2 scale_min_k4 (uint j, uint q) {
  if (j < 4u)
    return uvec2 (w_byte (q + j) & 63u, w_byte (q + j + 4u) & 63u);
  return uvec2 ((w_byte (q + j + 4u) & 15u) | ((w_byte (q + j - 4u) >> 6) << 4),
      (w_byte (q + j + 4u) >> 4) | ((w_byte (q + j) >> 6) << 4));
}

// sum_l w[l] x[x0 + l] over the 32 values of a Q4_0, Q4_1, Q5_0 or Q5_1
// block at @b
float dot_32 (uint type, uint b, uint x0) {
  bool has_min = type == Q4_1 || type == Q5_1;
  bool five = type == Q5_0 || type == Q5_1;
  uint qs = b + (has_min ? 4u : 2u) + (five ? 4u : 0u), qh = 0u;
  float bias = has_min ? 0.0 : (five ? 16.0 : 8.0), t = 0.0, sx = 0.0;
  if (five) {
    uint h = b + (has_min ? 4u : 2u);
    qh = w_byte (h) | (w_byte (h + 1u) << 8) | (w_byte (h + 2u) << 16) |
        (w_byte (h + 3u) << 24);
  }
  for (uint l = 0u; l < 16u; l++) {
    uint v = w_byte (qs + l);
    uint lo = (v & 15u) | (((qh >> l) & 1u) << 4);
    uint hi = (v >> 4) | (((qh >> (l + 16u)) & 1u) << 4);
    float xl = uintBitsToFloat (a1[x0 + l]);
    float xh = uintBitsToFloat (a1[x0 + l + 16u]);
    t += (float (lo) - bias) * xl + (float (hi) - bias) * xh;
    sx += xl + xh;
  }
  // w = d q (+ m): the offset times the activations' sum
  return w_half (b) * t + (has_min ? w_half (b + 2u) * sx : 0.0);
}

// the same over the 256 values of a Q4_K or Q5_K super-block at @b:
// d, dmin, scales[12], (qh[32],) qs[128]
float dot_q45_k (bool five, uint b, uint x0) {
  float d = w_half (b), dmin = w_half (b + 2u), s = 0.0;
  uint qh = b + 16u, qs = b + (five ? 48u : 16u);
  for (uint j = 0u; j < 8u; j++) {
    uvec2 sm = scale_min_k4 (j, b + 4u);
    float t = 0.0, sx = 0.0;
    // sub-blocks 2c and 2c + 1 share qs[32 c ..]: low nibbles, then high
    uint c = j >> 1, shift = (j & 1u) * 4u;
    for (uint l = 0u; l < 32u; l++) {
      uint q = (w_byte (qs + 32u * c + l) >> shift) & 15u;
      if (five)
        q |= ((w_byte (qh + l) >> j) & 1u) << 4;
      float x = uintBitsToFloat (a1[x0 + 32u * j + l]);
      t += float (q) * x;
      sx += x;
    }
    s += d * float (sm.x) * t - dmin * float (sm.y) * sx;
  }
  return s;
}

// the same over a Q6_K super-block at @b: ql[128], qh[64], scales[16]
// (int8), d
float dot_q6_k (uint b, uint x0) {
  float d = w_half (b + 208u), s = 0.0;
  for (uint h = 0u; h < 2u; h++) {
    uint ql = b + 64u * h, qh = b + 128u + 32u * h;
    for (uint g = 0u; g < 4u; g++)
      for (uint hf = 0u; hf < 2u; hf++) {
        int sc = int (w_byte (b + 192u + 8u * h + 2u * g + hf) << 24) >> 24;
        float t = 0.0;
        for (uint i = 0u; i < 16u; i++) {
          uint l = 16u * hf + i;
          uint lo = w_byte (ql + l + ((g & 1u) != 0u ? 32u : 0u));
          lo = g < 2u ? lo & 15u : lo >> 4;
          uint q = lo | (((w_byte (qh + l) >> (2u * g)) & 3u) << 4);
          t += (float (q) - 32.0) *
              uintBitsToFloat (a1[x0 + 128u * h + 32u * g + l]);
        }
        s += d * float (sc) * t;
      }
  }
  return s;
}

void main () {
  uint rows = pc.p[0], k = pc.p[1], type = pc.p[3], bk = pc.p[4];
  uint bytes = pc.p[5], nb = k / bk, g = global_index ();
  if (g >= rows * pc.p[2])
    return;
  uint r = g % rows, c = g / rows;
  uint x0 = pc.off[1] / 4 + c * k, row = pc.off[0] + r * nb * bytes;
  float s = 0.0;
  for (uint i = 0u; i < nb; i++) {
    uint b = row + i * bytes, xb = x0 + i * bk;
    if (type == BF16)
      s += uintBitsToFloat ((w_byte (b) | (w_byte (b + 1u) << 8)) << 16) *
          uintBitsToFloat (a1[xb]);
    else if (type == Q4_K || type == Q5_K)
      s += dot_q45_k (type == Q5_K, b, xb);
    else if (type == Q6_K)
      s += dot_q6_k (b, xb);
    else
      s += dot_32 (type, b, xb);
  }
  a2[pc.off[2] / 4 + g] = floatBitsToUint (s);
}
