/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: error measures of the tests that a NaN or an infinity fails
 *
 * A comparison written `err > tol` passes a NaN (every comparison with NaN
 * is false), and `err = MAX (err, e)` forgets a NaN met before a number.
 * Every measure here keeps a NaN or an infinity once it has met one, and
 * npu_within() is the one test of a measure against its bound: `err <= tol`,
 * false for NaN.  tests/unit/test-compare.c feeds NaN and Inf through each.
 *
 * Header-only and GLib-only, for the unit, gst-check, reference and
 * cross-check programs alike.
 */
#ifndef __NPU_COMPARE_H__
#define __NPU_COMPARE_H__

#include <math.h>
#include <glib.h>

/* TRUE if @err is within @tol; FALSE for a NaN @err.  Fail on
 * !npu_within (err, tol), never on err > tol. */
static inline gboolean
npu_within (double err, double tol)
{
  return err <= tol;
}

/* The larger of @worst and @e, where a NaN on either side wins and stays. */
static inline double
npu_err_max (double worst, double e)
{
  return (isnan (worst) || e <= worst) ? worst : e;
}

/* max |a[i] - b[i]|; NaN if any difference is NaN.  @at (nullable): the
 * index of the first NaN, else of the largest difference. */
static inline double
npu_max_abs_diff (const float *a, const double *b, gsize n, gsize * at)
{
  double worst = 0.0;
  gsize i, where = 0;

  for (i = 0; i < n; i++) {
    double e = fabs ((double) a[i] - b[i]);

    if (isnan (worst))
      break;
    if (!(e <= worst)) {
      worst = e;
      where = i;
    }
  }
  if (at)
    *at = where;
  return worst;
}

/* The same between two float arrays. */
static inline double
npu_max_abs_diff_f (const float *a, const float *b, gsize n, gsize * at)
{
  double worst = 0.0;
  gsize i, where = 0;

  for (i = 0; i < n; i++) {
    double e = fabs ((double) a[i] - (double) b[i]);

    if (isnan (worst))
      break;
    if (!(e <= worst)) {
      worst = e;
      where = i;
    }
  }
  if (at)
    *at = where;
  return worst;
}

/* max |a - ref| over the range of @ref (max - min): NaN if a value on
 * either side is NaN, infinite where the difference is. */
static inline double
npu_rel_diff (const float *a, const double *ref, gsize n)
{
  double mn = INFINITY, mx = -INFINITY;
  gsize i;

  for (i = 0; i < n; i++) {
    if (isnan (ref[i]))
      return NAN;
    mn = MIN (mn, ref[i]);
    mx = MAX (mx, ref[i]);
  }
  return npu_max_abs_diff (a, ref, n, NULL) / (mx - mn);
}

#endif /* __NPU_COMPARE_H__ */
