/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the CPU's SIMD features, probed once for the whole core */
#include "npucpu.h"

#if defined (__x86_64__) || defined (__i386__)
#include <cpuid.h>
#ifndef bit_AVX512VBMI
#define bit_AVX512VBMI (1 << 1)
#endif
#ifndef bit_AVX512VNNI
#define bit_AVX512VNNI (1 << 11)
#endif
#endif
#if (defined (__aarch64__) || defined (__arm__)) && defined (__linux__)
#include <sys/auxv.h>
#endif

static const gchar *const isa_names[NPU_CPU_N_ISAS] = {
  "scalar", "avx2", "avx512", "asimd", "neon", "neon-i8mm"
};

#define AVX2_LEVEL (NPU_CPU_AVX2 | NPU_CPU_FMA | NPU_CPU_F16C)
#define AVX512_LEVEL (AVX2_LEVEL | NPU_CPU_AVX512F | NPU_CPU_AVX512BW | \
    NPU_CPU_AVX512VL | NPU_CPU_AVX512VNNI | NPU_CPU_AVX512VBMI)

#define ASIMD_LEVEL NPU_CPU_NEON
#define NEON_LEVEL (NPU_CPU_NEON | NPU_CPU_DOTPROD)
#define NEON_I8MM_LEVEL (NEON_LEVEL | NPU_CPU_I8MM)

/* What each level needs, and what a cap at that level leaves usable (the
 * neon cap leaves out the int8 matrix multiply, so that its sdot kernels
 * run on a CPU that has both; the asimd cap the dot product too) */
static const NpuCpuFeatures isa_needs[NPU_CPU_N_ISAS] = {
  0, AVX2_LEVEL, AVX512_LEVEL, ASIMD_LEVEL, NEON_LEVEL, NEON_I8MM_LEVEL
};

static const NpuCpuFeatures isa_allows[NPU_CPU_N_ISAS] = {
  0, AVX2_LEVEL, AVX512_LEVEL, ASIMD_LEVEL, NEON_LEVEL, NEON_I8MM_LEVEL
};

/* In the order npu_cpu_features_to_string() lists them */
static const struct
{
  NpuCpuFeatures feature;
  const gchar *name;
} feature_names[] = {
  {NPU_CPU_AVX2, "avx2"},
  {NPU_CPU_FMA, "fma"},
  {NPU_CPU_F16C, "f16c"},
  {NPU_CPU_AVX512F, "avx512f"},
  {NPU_CPU_AVX512BW, "avx512bw"},
  {NPU_CPU_AVX512VL, "avx512vl"},
  {NPU_CPU_AVX512VNNI, "avx512_vnni"},
  {NPU_CPU_AVX512VBMI, "avx512_vbmi"},
  {NPU_CPU_NEON, "neon"},
  {NPU_CPU_DOTPROD, "dotprod"},
  {NPU_CPU_I8MM, "i8mm"},
};

static NpuCpuFeatures detected;
/* detected within NPU_CPU_ISA's cap */
static NpuCpuFeatures from_env;
/* detected within the current cap; read by every kernel dispatch */
static gint usable;

#if defined (__x86_64__) || defined (__i386__)
static NpuCpuFeatures
probe (void)
{
  guint eax, ebx, edx, max_level;
  guint ecx1 = 0, ebx7 = 0, ecx7 = 0;
  gboolean avx_usable = FALSE, avx512_usable = FALSE;
  NpuCpuFeatures f = 0;

  max_level = __get_cpuid_max (0, NULL);
  if (max_level >= 1)
    __cpuid (1, eax, ebx, ecx1, edx);
  if (max_level >= 7)
    __cpuid_count (7, 0, eax, ebx7, ecx7, edx);

  if (ecx1 & bit_OSXSAVE) {
    guint xcr0_lo, xcr0_hi;

    __asm__ volatile ("xgetbv":"=a" (xcr0_lo), "=d" (xcr0_hi):"c" (0));
    (void) xcr0_hi;
    /* XMM|YMM state; and opmask|ZMM_Hi256|Hi16_ZMM for AVX-512 */
    avx_usable = (xcr0_lo & 0x6) == 0x6;
    avx512_usable = (xcr0_lo & 0xe6) == 0xe6;
  }
  if (avx_usable) {
    f |= (ebx7 & bit_AVX2) ? NPU_CPU_AVX2 : 0;
    f |= (ecx1 & bit_FMA) ? NPU_CPU_FMA : 0;
    f |= (ecx1 & bit_F16C) ? NPU_CPU_F16C : 0;
  }
  if (avx512_usable) {
    f |= (ebx7 & bit_AVX512F) ? NPU_CPU_AVX512F : 0;
    f |= (ebx7 & bit_AVX512BW) ? NPU_CPU_AVX512BW : 0;
    f |= (ebx7 & bit_AVX512VL) ? NPU_CPU_AVX512VL : 0;
    f |= (ecx7 & bit_AVX512VNNI) ? NPU_CPU_AVX512VNNI : 0;
    f |= (ecx7 & bit_AVX512VBMI) ? NPU_CPU_AVX512VBMI : 0;
  }
  return f;
}
#elif defined (__aarch64__) && defined (__linux__)
static NpuCpuFeatures
probe (void)
{
  gulong hwcap = getauxval (AT_HWCAP);
  gulong hwcap2 = getauxval (AT_HWCAP2);
  NpuCpuFeatures f = 0;

  /* HWCAP_ASIMD, HWCAP_ASIMDDP, HWCAP2_I8MM from <asm/hwcap.h> */
  f |= (hwcap & (1UL << 1)) ? NPU_CPU_NEON : 0;
  f |= (hwcap & (1UL << 20)) ? NPU_CPU_DOTPROD : 0;
  f |= (hwcap2 & (1UL << 13)) ? NPU_CPU_I8MM : 0;
  return f;
}
#elif defined (__aarch64__)
static NpuCpuFeatures
probe (void)
{
  /* Advanced SIMD is mandatory on AArch64. */
  return NPU_CPU_NEON;
}
#elif defined (__arm__) && defined (__linux__)
static NpuCpuFeatures
probe (void)
{
  /* HWCAP_NEON from <asm/hwcap.h> */
  return (getauxval (AT_HWCAP) & (1UL << 12)) ? NPU_CPU_NEON : 0;
}
#else
static NpuCpuFeatures
probe (void)
{
  return 0;
}
#endif

gboolean
npu_cpu_isa_from_name (const gchar * name, NpuCpuIsa * isa)
{
  gint i;

  for (i = 0; name && i < NPU_CPU_N_ISAS; i++) {
    if (g_ascii_strcasecmp (name, isa_names[i]) == 0) {
      *isa = (NpuCpuIsa) i;
      return TRUE;
    }
  }
  return FALSE;
}

const gchar *
npu_cpu_isa_name (NpuCpuIsa isa)
{
  g_return_val_if_fail ((guint) isa < NPU_CPU_N_ISAS, NULL);
  return isa_names[isa];
}

/* The features left usable under a cap at @name; FALSE if it cannot be. */
static gboolean
cap_at (const gchar * name, NpuCpuFeatures * out)
{
  NpuCpuIsa isa;

  if (!npu_cpu_isa_from_name (name, &isa) ||
      (detected & isa_needs[isa]) != isa_needs[isa])
    return FALSE;
  *out = detected & isa_allows[isa];
  return TRUE;
}

static void
cpu_init (void)
{
  static gsize initialised = 0;

  if (g_once_init_enter (&initialised)) {
    const gchar *env = g_getenv (NPU_CPU_ISA_ENV);
    NpuCpuFeatures f;

    detected = probe ();
    f = detected;
    if (env && *env && !cap_at (env, &f)) {
      g_warning (NPU_CPU_ISA_ENV "=%s is not available here, using scalar",
          env);
      f = 0;
    }
    from_env = f;
    g_atomic_int_set (&usable, (gint) f);
    g_once_init_leave (&initialised, 1);
  }
}

NpuCpuFeatures
npu_cpu_detect (void)
{
  cpu_init ();
  return detected;
}

NpuCpuFeatures
npu_cpu_get_features (void)
{
  cpu_init ();
  return (NpuCpuFeatures) g_atomic_int_get (&usable);
}

gboolean
npu_cpu_has (NpuCpuFeatures features)
{
  return (npu_cpu_get_features () & features) == features;
}

gboolean
npu_cpu_isa_usable (NpuCpuIsa isa)
{
  g_return_val_if_fail ((guint) isa < NPU_CPU_N_ISAS, FALSE);
  return npu_cpu_has (isa_needs[isa]);
}

NpuCpuIsa
npu_cpu_get_isa (void)
{
  gint i;

  for (i = NPU_CPU_N_ISAS - 1; i > NPU_CPU_ISA_SCALAR; i--)
    if (npu_cpu_isa_usable ((NpuCpuIsa) i))
      return (NpuCpuIsa) i;
  return NPU_CPU_ISA_SCALAR;
}

gboolean
npu_cpu_set_isa (const gchar * name)
{
  NpuCpuFeatures f;

  cpu_init ();
  if (name == NULL)
    f = from_env;
  else if (!cap_at (name, &f))
    return FALSE;
  g_atomic_int_set (&usable, (gint) f);
  return TRUE;
}

gchar *
npu_cpu_features_to_string (NpuCpuFeatures features)
{
  GString *s = g_string_new (NULL);
  guint i;

  for (i = 0; i < G_N_ELEMENTS (feature_names); i++) {
    if (!(features & feature_names[i].feature))
      continue;
    if (s->len > 0)
      g_string_append_c (s, ' ');
    g_string_append (s, feature_names[i].name);
  }
  return g_string_free (s, FALSE);
}
