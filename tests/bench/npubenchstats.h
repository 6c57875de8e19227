/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu benchmarks: the median the benchmarks print, one definition, so
 * that "median" means the same in every program's output.
 */
#ifndef NPU_BENCH_STATS_H
#define NPU_BENCH_STATS_H

#include <glib.h>
#include <stdlib.h>

/* For qsort(): doubles in ascending order */
static inline int
npu_bench_cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

/* The median of @n values (the mean of the middle two for an even @n);
 * @v is left as it is */
static inline double
npu_bench_median (const double *v, guint n)
{
  double *c = g_memdup2 (v, n * sizeof (double)), m;

  qsort (c, n, sizeof (double), npu_bench_cmp_double);
  m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
  g_free (c);
  return m;
}

#endif /* NPU_BENCH_STATS_H */
