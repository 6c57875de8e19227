// SPDX-License-Identifier: LGPL-2.1-or-later
// gst-npu: what every kernel shares: four storage buffers read as 32-bit
// words (floats by their bits, bytes by shifts, so that no 8- or 16-bit
// storage feature is needed and 17- and 34-byte blocks are read in place),
// and the push constants: each argument's byte offset within its bound
// range, then the kernel's parameters (ext/vulkan/npuvk.h).
#extension GL_EXT_control_flow_attributes : enable

layout(std430, binding = 0) buffer Arg0 { uint a0[]; };
layout(std430, binding = 1) buffer Arg1 { uint a1[]; };
layout(std430, binding = 2) buffer Arg2 { uint a2[]; };
layout(std430, binding = 3) buffer Arg3 { uint a3[]; };

layout(push_constant) uniform Push {
  uint off[4];
  uint p[12];
} pc;

// a group's index along rows, when the rows are spread over the x and y
// dimensions of the dispatch (a vocabulary has more rows than one
// dimension's limit)
uint group_row () {
  return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
}

// the invocation's index in a 1-D problem spread over x and y likewise
uint global_index () {
  return gl_GlobalInvocationID.x +
      gl_WorkGroupID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}

// the 64-thread sum and max used by the row kernels
shared float red[64];

float group_sum (float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier ();
  [[unroll]] for (uint s = 32; s > 0; s >>= 1) {
    if (t < s)
      red[t] += red[t + s];
    barrier ();
  }
  float r = red[0];
  barrier ();
  return r;
}

float group_max (float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier ();
  [[unroll]] for (uint s = 32; s > 0; s >>= 1) {
    if (t < s)
      red[t] = max (red[t], red[t + s]);
    barrier ();
  }
  float r = red[0];
  barrier ();
  return r;
}
