// SPDX-License-Identifier: LGPL-2.1-or-later
// Causal softmax attention over a KV cache, one (head, query row) a group:
//   out[t][h] = sum_j softmax_j (scale q[t][h] . k[j][kvh]) v[j][kvh]
// for keys j = 0 .. pos0 + t (causal) or 0 .. pos0 + n_q - 1 (every key:
// an encoder), kvh = h / (n_heads / n_kv).  Keys are taken
// 64 at a time: each thread scores one key, then the running maximum and
// sum are rescaled (the streaming softmax), so any context length works
// with 64 floats of shared memory; each thread keeps up to four of the
// head's hd (<= 256) output values.
// args: 0 q (n_q x n_heads x hd), 1 k cache, 2 v cache (rows of n_kv x
// hd, F32 or F16), 3 out (as q)
// p: n_heads, n_kv, hd, pos0, scale (bits), kv_f16, causal; groups:
// (n_heads, n_q)
#version 450
#include "common.glsl"
layout(local_size_x = 64) in;

shared float qs[256];
shared float ps[64];

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
  uint n_heads = pc.p[0], n_kv = pc.p[1], hd = pc.p[2];
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  uint kvh = h / (n_heads / n_kv);
  uint n_keys = pc.p[6] != 0u ? pc.p[3] + t + 1 : pc.p[3] + gl_NumWorkGroups.y;
  float scale = uintBitsToFloat (pc.p[4]);
  uint q0 = pc.off[0] / 4 + (t * n_heads + h) * hd;
  uint row = n_kv * hd;

  for (uint d = tid; d < hd; d += 64)
    qs[d] = uintBitsToFloat (a0[q0 + d]) * scale;
  barrier ();

  float m = -1.0 / 0.0, l = 0.0;
  float acc[4] = float[4] (0.0, 0.0, 0.0, 0.0);
  for (uint c0 = 0; c0 < n_keys; c0 += 64) {
    uint j = c0 + tid;
    float s = -1.0 / 0.0;
    if (j < n_keys) {
      s = 0.0;
      for (uint d = 0; d < hd; d++)
        s += qs[d] * kv_value (true, j * row + kvh * hd + d);
    }
    float m_new = max (m, group_max (s));
    float p = j < n_keys ? exp (s - m_new) : 0.0;
    ps[tid] = p;
    barrier ();
    float r = exp (m - m_new), sum = 0.0;
    uint n = min (64u, n_keys - c0);
    for (uint i = 0; i < n; i++)
      sum += ps[i];
    l = l * r + sum;
    [[unroll]] for (uint a = 0; a < 4; a++) {
      uint d = tid + a * 64u;
      if (d < hd) {
        float v = 0.0;
        for (uint i = 0; i < n; i++)
          v += ps[i] * kv_value (false, (c0 + i) * row + kvh * hd + d);
        acc[a] = acc[a] * r + v;
      }
    }
    m = m_new;
    barrier ();
  }
  uint o0 = pc.off[3] / 4 + (t * n_heads + h) * hd;
  [[unroll]] for (uint a = 0; a < 4; a++) {
    uint d = tid + a * 64u;
    if (d < hd)
      a3[o0 + d] = floatBitsToUint (acc[a] / l);
  }
}
