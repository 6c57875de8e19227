/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the SiLU's error over a sweep of floats, at every ISA level
 *
 * unit/vecmath holds each copy of npu_silu_mul() to the header's bound on
 * random values and the edges; this program goes through every @step-th
 * float g with |g| <= 100 (step 1: all of them), up = 1, at each level
 * this CPU has (the NPU_CPU_ISA cap, as the tests set it), and prints the
 * worst error as a share of the bound 2^-20 |ref| + 2^-120 against the
 * formula in double, and where it was: over the whole sweep (whose worst
 * is where e^-g turns +inf and silu -0, g near -88.37) and over
 * |g| <= 80, where the relative term is all of the bound.  A measurement for the docs, not a
 * test: at step 1 it takes minutes (hours under qemu).
 *
 * Usage: sweep-silu [step (16)]
 */
#include <core/cpu/npuvecmath.h>
#include <core/cpu/npucpu.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096

typedef struct
{
  double worst;
  float at;
} Worst;

/* The worst share of the bound over @n results: w[0] all, w[1] |g| <= 80 */
static void
check (const float *g, const float *o, gsize n, Worst w[2])
{
  gsize i;

  for (i = 0; i < n; i++) {
    double ref = (double) g[i] / (1.0 + exp (-(double) g[i]));
    double tol = ldexp (fabs (ref), -20) + ldexp (1.0, -120);
    double e = fabs ((double) o[i] - ref) / tol;
    guint j;

    for (j = 0; j < (fabsf (g[i]) <= 80.0f ? 2u : 1u); j++) {
      if (!(e <= w[j].worst)) {
        w[j].worst = e;
        w[j].at = g[i];
      }
    }
  }
}

static void
sweep (guint32 step)
{
  static float g[N], u[N], o[N];
  Worst w[2] = { {0.0, 0.0f}, {0.0, 0.0f} };
  guint64 count = 0;
  guint32 bits;
  gsize k = 0, i;
  gint sign;

  for (i = 0; i < N; i++)
    u[i] = 1.0f;
  for (sign = 0; sign < 2; sign++) {
    for (bits = 0;; bits += step) {
      float x;

      memcpy (&x, &bits, sizeof (x));
      if (!(x <= 100.0f))
        break;
      g[k++] = sign ? -x : x;
      if (k == N) {
        npu_silu_mul (g, u, o, k);
        check (g, o, k, w);
        count += k;
        k = 0;
      }
    }
  }
  npu_silu_mul (g, u, o, k);
  check (g, o, k, w);
  count += k;
  printf ("  %-7s %" G_GUINT64_FORMAT " values: worst error %.4f of the "
      "bound, at g = %.9g; within |g| <= 80 %.4f, at g = %.9g\n",
      npu_cpu_isa_name (npu_cpu_get_isa ()), count, w[0].worst, w[0].at,
      w[1].worst, w[1].at);
}

int
main (int argc, char **argv)
{
  guint32 step = argc > 1 ? (guint32) strtoul (argv[1], NULL, 10) : 16;
  gint isa;

  if (step == 0) {
    fprintf (stderr, "usage: sweep-silu [step (16), at least 1]\n");
    return 2;
  }
  printf ("silu (g) x 1, every %u-th float of |g| <= 100\n", step);
  for (isa = 0; isa < NPU_CPU_N_ISAS; isa++) {
    if (!npu_cpu_set_isa (npu_cpu_isa_name ((NpuCpuIsa) isa)))
      continue;
    sweep (step);
  }
  npu_cpu_set_isa (NULL);
  return 0;
}
