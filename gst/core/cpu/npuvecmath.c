/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: SiLU and RMS norm, the copy of the kernels the CPU allows
 *
 * npuvecmath-kernel.c is built once per ISA level with that level's
 * compiler flags, so that its vectors fill the CPU's registers. */
#include "npuvecmath.h"
#include "npucpu.h"

#if defined(__x86_64__)
#define PICK(f, ...) G_STMT_START { \
  if (npu_cpu_has (NPU_CPU_AVX512F | NPU_CPU_FMA)) \
    f##_avx512 (__VA_ARGS__); \
  else if (npu_cpu_has (NPU_CPU_AVX2 | NPU_CPU_FMA)) \
    f##_avx2 (__VA_ARGS__); \
  else \
    f##_generic (__VA_ARGS__); \
} G_STMT_END
#elif defined(__aarch64__)
/* Advanced SIMD alone: the NEON copy needs neither the dot product nor
 * half-precision arithmetic, so a Cortex-A53 or A72 runs it too (under
 * NPU_CPU_ISA=scalar the NEON feature is capped off). */
#define PICK(f, ...) G_STMT_START { \
  if (npu_cpu_has (NPU_CPU_NEON)) \
    f##_neon (__VA_ARGS__); \
  else \
    f##_generic (__VA_ARGS__); \
} G_STMT_END
#else
#define PICK(f, ...) f##_generic (__VA_ARGS__)
#endif

void
npu_silu_mul (const float *gate, const float *up, float *out, gsize n)
{
  PICK (npu_silu_mul, gate, up, out, n);
}

void
npu_rms_norm (const float *x, const float *w, float *out, gsize n, float eps)
{
  PICK (npu_rms_norm, x, w, out, n, eps);
}
