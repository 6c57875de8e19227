/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: a kernel's tests again at every lesser ISA level
 *
 * The kernels cloned per level (attention, the vector maths between the
 * products: avx512, avx2 and generic on x86, neon and generic on aarch64)
 * pick their copy from the CPU features the cap leaves.
 * A test run exercises the best level the CPU has; these helpers run the
 * same tests again with NPU_CPU_ISA's cap set, from inside the test, to
 * each lower level the CPU can run, so that every copy is checked.
 */
#ifndef __NPU_LESSER_ISAS_H__
#define __NPU_LESSER_ISAS_H__

#include <glib.h>
#include <core/cpu/npucpu.h>

/* Runs @run once at each ISA level below the best (the level the tests
 * already ran at), then puts the best level back.  At least one level
 * must have run unless the best is scalar. */
static inline void
npu_test_at_lesser_isas (void (*run) (void))
{
  NpuCpuIsa best = npu_cpu_get_isa (), isa;
  guint n = 0;

  for (isa = NPU_CPU_ISA_SCALAR; isa < NPU_CPU_N_ISAS; isa++) {
    /* refused where the CPU lacks the level */
    if (isa == best || !npu_cpu_set_isa (npu_cpu_isa_name (isa)))
      continue;
    g_assert_cmpint (npu_cpu_get_isa (), ==, isa);
    g_test_message ("at level %s", npu_cpu_isa_name (isa));
    run ();
    n++;
  }
  g_assert_true (npu_cpu_set_isa (NULL));
  g_assert_cmpint (npu_cpu_get_isa (), ==, best);
  /* scalar is always a lesser level, unless it is the only one */
  g_assert_true (n >= 1 || best == NPU_CPU_ISA_SCALAR);
}

#endif /* __NPU_LESSER_ISAS_H__ */
