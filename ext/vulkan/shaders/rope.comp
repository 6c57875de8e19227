// SPDX-License-Identifier: LGPL-2.1-or-later
// Rotary positions, in place, on n_tok rows of n_heads heads of hd values:
// the first n_rot values of each head turn by theta_i = pos * freq_scale *
// base^(-2 i / n_rot), pos = pos0 + the row; pairs (2i, 2i + 1) (llama's
// "norm" RoPE) or (i, i + n_rot / 2) (NEOX: qwen2, qwen3)
// args: 0 x; p: n_tok, n_heads, hd, n_rot, pos0, base (bits), neox,
// freq_scale (bits); groups: ceil (n_tok n_heads n_rot / 2 / 256) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

void main () {
  uint n_tok = pc.p[0], n_heads = pc.p[1], hd = pc.p[2], half_rot = pc.p[3] / 2;
  uint g = global_index ();
  if (g >= n_tok * n_heads * half_rot)
    return;
  uint i = g % half_rot, h = (g / half_rot) % n_heads, t = g / (half_rot * n_heads);
  float pos = float (pc.p[4] + t);
  float theta = pos * uintBitsToFloat (pc.p[7]) *
      pow (uintBitsToFloat (pc.p[5]), -2.0 * float (i) / float (pc.p[3]));
  uint base = pc.off[0] / 4 + (t * n_heads + h) * hd;
  uint i0 = pc.p[6] != 0u ? base + i : base + 2u * i;
  uint i1 = pc.p[6] != 0u ? base + i + half_rot : base + 2u * i + 1u;
  float x0 = uintBitsToFloat (a0[i0]), x1 = uintBitsToFloat (a0[i1]);
  float c = cos (theta), s = sin (theta);
  a0[i0] = floatBitsToUint (x0 * c - x1 * s);
  a0[i1] = floatBitsToUint (x0 * s + x1 * c);
}
