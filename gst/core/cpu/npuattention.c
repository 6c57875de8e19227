/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: softmax attention, the copy of the kernel the CPU allows
 *
 * The kernels (npuattention-kernel.c) are built once per ISA level with
 * that level's compiler flags, so that F16 rows are widened by the CPU's
 * own conversion (F16C, AVX-512) and the vectors fill its registers.
 * On aarch64 the neon copy needs Advanced SIMD alone (as the vector
 * maths' does): a Cortex-A53 or A72 runs it too, and NPU_CPU_ISA=scalar
 * turns it off. */
#include "npuattention-private.h"
#include "npucpu.h"

void
npu_attention_rows (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, float *scores, gsize ss,
    float *out, gsize out_stride)
{
  npu_attention_rows_sinks (spans, n_spans, hd, nq, q_stride, scale, NULL,
      scores, ss, out, out_stride);
}

typedef void (*AttnKernel) (const NpuAttnSpan * spans, guint n_spans,
    guint hd, guint nq, gsize q_stride, float scale, const float *sinks,
    float *scores, gsize ss, float *out, gsize out_stride);

/* The copy the current cap allows, and its name */
static AttnKernel
pick (const gchar ** name)
{
#if defined(__x86_64__)
  const NpuCpuFeatures f16 = NPU_CPU_FMA | NPU_CPU_F16C;
  const NpuCpuFeatures vnni = NPU_CPU_AVX512BW | NPU_CPU_AVX512VNNI |
      NPU_CPU_AVX512VBMI;

  if (npu_cpu_has (NPU_CPU_AVX512F | f16 | vnni)) {
    *name = "avx512vnni";
    return npu_attention_rows_avx512vnni;
  }
  if (npu_cpu_has (NPU_CPU_AVX512F | f16)) {
    *name = "avx512";
    return npu_attention_rows_avx512;
  }
  if (npu_cpu_has (NPU_CPU_AVX2 | f16)) {
    *name = "avx2";
    return npu_attention_rows_avx2;
  }
#elif defined(__aarch64__)
  if (npu_cpu_has (NPU_CPU_NEON)) {
    *name = "neon";
    return npu_attention_rows_neon;
  }
#endif
  *name = "generic";
  return npu_attention_rows_generic;
}

const gchar *
npu_attention_copy_name (void)
{
  const gchar *name;

  pick (&name);
  return name;
}

void
npu_attention_rows_sinks (const NpuAttnSpan * spans, guint n_spans, guint hd,
    guint nq, gsize q_stride, float scale, const float *sinks, float *scores,
    gsize ss, float *out, gsize out_stride)
{
  const gchar *name;

  pick (&name) (spans, n_spans, hd, nq, q_stride, scale, sinks, scores, ss,
      out, out_stride);
}
