// SPDX-License-Identifier: LGPL-2.1-or-later
// The input rows of a kernel-3, padding-1 1-D convolution:
//   dst[t][i * 3 + k] = src (position stride t + k - 1, channel i),
// zero outside 0 .. n_in - 1; src is channel major (src[i * n_in + p],
// the log-mel) or position major (src[p * in + i])
// args: 0 src, 1 dst; p: n_out, in, n_in, stride, channel_major; groups:
// ceil (n_out in 3 / 256) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

void main () {
  uint in_ch = pc.p[1], n_in = pc.p[2], g = global_index ();
  if (g >= pc.p[0] * in_ch * 3u)
    return;
  uint t = g / (in_ch * 3u), e = g % (in_ch * 3u), i = e / 3u, k = e % 3u;
  int p = int (t * pc.p[3] + k) - 1;
  float v = 0.0;
  if (p >= 0 && uint (p) < n_in) {
    uint idx = pc.p[4] != 0u ? i * n_in + uint (p) : uint (p) * in_ch + i;
    v = uintBitsToFloat (a0[pc.off[0] / 4 + idx]);
  }
  a1[pc.off[1] / 4 + g] = floatBitsToUint (v);
}
