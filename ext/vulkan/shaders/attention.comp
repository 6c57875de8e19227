// SPDX-License-Identifier: LGPL-2.1-or-later
// Softmax attention over a KV cache, one invocation a (query row, head):
//   out[t][h] = sum_j softmax_j (scale q[t][h] . k[j][kvh]) v[j][kvh]
// for keys j = 0 .. pos0 + t (causal) or 0 .. pos0 + n_q - 1 (every key:
// an encoder), kvh = h / (n_heads / n_kv).  Each invocation streams the
// keys once with the running maximum and sum (the streaming softmax), its
// query and its output in registers (hd <= 256); the 64 invocations of a
// group are 64 query rows of one head, so they read the same key and
// value rows at the same time (a CPU driver's vector lanes; no barrier).
// args: 0 q (n_q x n_heads x hd), 1 k cache, 2 v cache (rows of n_kv x
// hd, F32 or F16), 3 out (as q)
// p: n_heads, n_kv, hd, pos0, scale (bits), kv_f16, causal, n_q; groups:
// (ceil (n_q / 64), n_heads)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

#define MAX_HD 256

float kv_value (bool k, uint idx) {
  bool f16 = pc.p[5] != 0u;
  uint w = f16 ? idx >> 1 : idx;
  uint word = k ? a1[pc.off[1] / 4 + w] : a2[pc.off[2] / 4 + w];
  if (!f16)
    return uintBitsToFloat (word);
  vec2 v = unpackHalf2x16 (word);
  return (idx & 1u) != 0u ? v.y : v.x;
}

void main () {
  uint n_heads = pc.p[0], n_kv = pc.p[1], hd = pc.p[2], n_q = pc.p[7];
  uint t = gl_GlobalInvocationID.x, h = gl_WorkGroupID.y;
  if (t >= n_q)
    return;
  uint kvh = h / (n_heads / n_kv);
  uint n_keys = pc.p[6] != 0u ? pc.p[3] + t + 1 : pc.p[3] + n_q;
  float scale = uintBitsToFloat (pc.p[4]);
  uint q0 = pc.off[0] / 4 + (t * n_heads + h) * hd;
  uint row = n_kv * hd;
  float q[MAX_HD], acc[MAX_HD];

  for (uint d = 0; d < hd; d++) {
    q[d] = uintBitsToFloat (a0[q0 + d]) * scale;
    acc[d] = 0.0;
  }
  float m = -1.0 / 0.0, l = 0.0;
  for (uint j = 0; j < n_keys; j++) {
    uint k0 = j * row + kvh * hd;
    float s = 0.0;
    for (uint d = 0; d < hd; d++)
      s += q[d] * kv_value (true, k0 + d);
    float m_new = max (m, s);
    float r = exp (m - m_new), p = exp (s - m_new);
    l = l * r + p;
    for (uint d = 0; d < hd; d++)
      acc[d] = acc[d] * r + p * kv_value (false, k0 + d);
    m = m_new;
  }
  uint o0 = pc.off[3] / 4 + (t * n_heads + h) * hd;
  for (uint d = 0; d < hd; d++)
    a3[o0 + d] = floatBitsToUint (acc[d] / l);
}
