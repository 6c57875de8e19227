/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the element-wise steps between a decode step's products
 *
 * Times, in process CPU time and in cache, the SwiGLU activation of one
 * token of the 1.1 B llama (8192 values) and its RMS norm (2048), each as
 * the scalar loop npullm.c used before (expf per element; the sum of
 * squares one double at a time) and through npuvecmath.h, at every ISA
 * level this CPU has.  The minimum of many calls, alternating.
 *
 * Usage: bench-vecmath [calls (2000)]
 */
#include <core/cpu/npuvecmath.h>
#include <core/cpu/npucpu.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define FF 8192
#define DIM 2048

static volatile float sink;

static double
cpu_now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
silu_scalar (const float *gate, const float *up, float *out, gsize n)
{
  gsize i;

  for (i = 0; i < n; i++) {
    float g = gate[i];

    out[i] = g / (1.0f + expf (-g)) * up[i];
  }
}

static void
norm_scalar (const float *x, const float *w, float *out, gsize n, float eps)
{
  double ss = 0.0;
  float scale;
  gsize i;

  for (i = 0; i < n; i++)
    ss += (double) x[i] * x[i];
  scale = (float) (1.0 / sqrt (ss / n + eps));
  for (i = 0; i < n; i++)
    out[i] = x[i] * scale * w[i];
}

int
main (int argc, char **argv)
{
  guint calls = argc > 1 ? (guint) atoi (argv[1]) : 2000, c, v;
  float *gate = g_new (float, FF), *up = g_new (float, FF);
  float *out = g_new (float, FF);
  GRand *rand = g_rand_new_with_seed (1);
  NpuCpuIsa best = npu_cpu_get_isa (), isa;
  guint i;

  for (i = 0; i < FF; i++) {
    gate[i] = (float) g_rand_double_range (rand, -6.0, 6.0);
    up[i] = (float) g_rand_double_range (rand, -2.0, 2.0);
  }
  printf ("one token of the 1.1 B llama, in cache, process CPU time, "
      "min of %u calls (us)\n", calls);
  for (isa = NPU_CPU_ISA_SCALAR; isa <= best; isa++) {
    double t[4] = { 1e9, 1e9, 1e9, 1e9 };

    if (!npu_cpu_set_isa (npu_cpu_isa_name (isa)))
      continue;
    for (c = 0; c < calls; c++) {
      for (v = 0; v < 4; v++) {
        double t0 = cpu_now ();

        switch (v) {
          case 0:
            silu_scalar (gate, up, out, FF);
            break;
          case 1:
            npu_silu_mul (gate, up, out, FF);
            break;
          case 2:
            norm_scalar (gate, up, out, DIM, 1e-5f);
            break;
          default:
            npu_rms_norm (gate, up, out, DIM, 1e-5f);
            break;
        }
        sink = out[c % FF];
        t[v] = MIN (t[v], cpu_now () - t0);
      }
    }
    printf ("  %-7s silu x up (%d): scalar expf %7.2f, vector %6.2f (%.1fx); "
        "rms norm (%d): scalar %5.2f, vector %5.2f (%.1fx)\n",
        npu_cpu_isa_name (isa), FF, t[0] * 1e6, t[1] * 1e6, t[0] / t[1], DIM,
        t[2] * 1e6, t[3] * 1e6, t[2] / t[3]);
  }
  npu_cpu_set_isa (NULL);
  g_free (gate);
  g_free (up);
  g_free (out);
  g_rand_free (rand);
  return 0;
}
