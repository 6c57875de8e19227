/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the CPU's SIMD features, probed once for the whole core
 *
 * Every run-time choice of a SIMD path asks here: the matrix kernels
 * (npumatmul.c), the vision preprocessing (npuvisionprep.c), the attention
 * (npuattention.c), and the CPU device's feature list (npudeviceinfo.c).
 * The probe reads CPUID and XGETBV on x86 (a feature counts only where the
 * OS saves its registers, as __builtin_cpu_supports() has it) and the
 * auxiliary vector's HWCAP bits on Arm.
 *
 * NPU_CPU_ISA=scalar|avx2|avx512|asimd|neon|neon-i8mm in the environment
 * (read once, at the first call) caps what the core may use at that level, so
 * that a test or a benchmark runs the paths of a lesser CPU: "scalar"
 * turns every SIMD path off.  A level this CPU lacks (or an unknown name) warns and falls back to
 * scalar.  npu_cpu_set_isa() does the same from a program.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_CPU_H__
#define __NPU_CPU_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS

#define NPU_CPU_ISA_ENV "NPU_CPU_ISA"

/**
 * NpuCpuFeatures:
 *
 * SIMD features, each usable (the CPU has it and the OS saves its state).
 */
typedef enum
{
  NPU_CPU_AVX2 = 1 << 0,
  NPU_CPU_FMA = 1 << 1,
  NPU_CPU_F16C = 1 << 2,
  NPU_CPU_AVX512F = 1 << 3,
  NPU_CPU_AVX512BW = 1 << 4,
  NPU_CPU_AVX512VL = 1 << 5,
  NPU_CPU_AVX512VNNI = 1 << 6,
  NPU_CPU_AVX512VBMI = 1 << 7,
  NPU_CPU_NEON = 1 << 8,
  NPU_CPU_DOTPROD = 1 << 9,
  NPU_CPU_I8MM = 1 << 10,
} NpuCpuFeatures;

/**
 * NpuCpuIsa:
 *
 * The levels the kernels are written for, each a set of features:
 * avx2 = AVX2 + FMA + F16C; avx512 = avx2 + AVX-512 F, BW, VL, VNNI and
 * VBMI; asimd = Advanced SIMD alone (every aarch64 CPU: the Cortex-A53,
 * A55 and A72 have no dot product); neon = Advanced SIMD with the dot
 * product instructions (sdot, HWCAP_ASIMDDP); neon-i8mm = neon + the int8
 * matrix multiply (smmla, HWCAP2_I8MM).
 */
typedef enum
{
  NPU_CPU_ISA_SCALAR,
  NPU_CPU_ISA_AVX2,
  NPU_CPU_ISA_AVX512,
  NPU_CPU_ISA_ASIMD,
  NPU_CPU_ISA_NEON,
  NPU_CPU_ISA_NEON_I8MM,
  NPU_CPU_N_ISAS
} NpuCpuIsa;

/* What this CPU has, whatever the cap. */
NPU_API
NpuCpuFeatures npu_cpu_detect (void);

/* What the core may use: the CPU's features within the cap. */
NPU_API
NpuCpuFeatures npu_cpu_get_features (void);

/* TRUE if every one of @features may be used. */
NPU_API
gboolean npu_cpu_has (NpuCpuFeatures features);

/* TRUE if every feature of level @isa may be used. */
NPU_API
gboolean npu_cpu_isa_usable (NpuCpuIsa isa);

/* The highest level that may be used, and the names of the levels
 * ("scalar", "avx2", "avx512", "asimd", "neon", "neon-i8mm"). */
NPU_API
NpuCpuIsa npu_cpu_get_isa (void);
NPU_API
const gchar *npu_cpu_isa_name (NpuCpuIsa isa);
NPU_API
gboolean npu_cpu_isa_from_name (const gchar * name, NpuCpuIsa * isa);

/* For tests and benchmarks, as NPU_CPU_ISA does: caps the features at
 * level @name (NULL: back to NPU_CPU_ISA's cap, or none).  Returns FALSE, and keeps the current cap, if
 * the name is unknown or this CPU lacks the level.  Paths already chosen
 * (a vision preprocessing plan, the matrix kernels' current path) keep
 * theirs; npu_matmul_set_isa() switches the matrix kernels. */
NPU_API
gboolean npu_cpu_set_isa (const gchar * name);

/* @features as space-separated names ("avx2 fma f16c avx512f ...",
 * "neon dotprod"), "" for none.  Free with g_free(). */
NPU_API
gchar *npu_cpu_features_to_string (NpuCpuFeatures features);

G_END_DECLS

#endif /* __NPU_CPU_H__ */
