// SPDX-License-Identifier: LGPL-2.1-or-later
// y[r][c] = act (y[r][c] + b[c]) in place, the activations of
// gst/core/device/npuops.h: 0 none, 1 GELU (tanh form, ggml_gelu),
// 2 GELU quick (x sigmoid (1.702 x)), 3 SiLU, 4 GELU with erf
// args: 0 y, 1 b; p: rows, cols, act, has_bias; groups: ceil (rows cols /
// 256) over (x, y)
#version 450
#include "common.glsl"
layout(local_size_x = 256) in;

float sigmoid (float x) {
  return 1.0 / (1.0 + exp (-x));
}

// erf by Abramowitz and Stegun 7.1.26 (|error| <= 1.5e-7): GLSL has none
float erf_as (float x) {
  float t = 1.0 / (1.0 + 0.3275911 * abs (x));
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t -
          0.284496736) * t + 0.254829592) * t * exp (-x * x);
  return x < 0.0 ? -y : y;
}

void main () {
  uint rows = pc.p[0], cols = pc.p[1], i = global_index ();
  if (i >= rows * cols)
    return;
  float x = uintBitsToFloat (a0[pc.off[0] / 4 + i]);
  if (pc.p[3] != 0u)
    x += uintBitsToFloat (a1[pc.off[1] / 4 + i % cols]);
  uint act = pc.p[2];
  if (act == 1u) {
    float u = 0.7978845608028654 * x * (1.0 + 0.044715 * x * x);
    float e = exp (-2.0 * clamp (u, -10.0, 10.0));
    x = 0.5 * x * (1.0 + (1.0 - e) / (1.0 + e));
  } else if (act == 2u) {
    x = x * sigmoid (1.702 * x);
  } else if (act == 3u) {
    x = x * sigmoid (x);
  } else if (act == 4u) {
    x = 0.5 * x * (1.0 + erf_as (x * 0.7071067811865476));
  }
  a0[pc.off[0] / 4 + i] = floatBitsToUint (x);
}
