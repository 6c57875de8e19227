/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the tests' error measures fail on NaN and infinity
 *
 * Every comparison of the suite goes through tests/npucompare.h (and the
 * vision reference's npu_ref_error_over_rms()).  Here a NaN or an infinity
 * goes through each of them, first, in the middle and last, on either
 * side, and the measure must come out failing npu_within() whatever the
 * tolerance.  The clean case must pass, with the exact error.
 */
#include <math.h>
#include <glib.h>

#include "tests/npucompare.h"
#include "tests/reference/npurefvit.h"

#define N 7
static const double BIG_TOL = 1e300;

static void
test_within (void)
{
  g_assert_true (npu_within (0.5, 1.0));
  g_assert_true (npu_within (1.0, 1.0));
  g_assert_false (npu_within (1.5, 1.0));
  g_assert_false (npu_within (NAN, BIG_TOL));
  g_assert_false (npu_within (INFINITY, BIG_TOL));
}

static void
test_err_max (void)
{
  static const double after[] = { 0.0, 1.0, 1e9, INFINITY };
  guint i;

  g_assert_cmpfloat (npu_err_max (1.0, 2.0), ==, 2.0);
  g_assert_cmpfloat (npu_err_max (2.0, 1.0), ==, 2.0);
  for (i = 0; i < G_N_ELEMENTS (after); i++) {
    /* a NaN met before or after a number is kept */
    g_assert_true (isnan (npu_err_max (npu_err_max (0.0, NAN), after[i])));
    g_assert_true (isnan (npu_err_max (after[i], NAN)));
  }
  g_assert_false (npu_within (npu_err_max (0.0, INFINITY), BIG_TOL));
}

/* @bad at position @pos of the float side (or of the reference side) */
static void
fill (float *a, double *ref, float *af, guint pos, double bad,
    gboolean in_ref)
{
  guint i;

  for (i = 0; i < N; i++) {
    ref[i] = i * 0.25 - 0.5;
    af[i] = ref[i];
    a[i] = ref[i] + (i == 3 ? 0.125 : 0.0);
  }
  if (pos < N) {
    if (in_ref) {
      ref[pos] = bad;
      af[pos] = bad;
    } else {
      a[pos] = bad;
    }
  }
}

static void
test_diffs (void)
{
  static const double bads[] = { NAN, INFINITY, -INFINITY };
  static const guint positions[] = { 0, 3, N - 1 };
  float a[N], af[N];
  double ref[N], err;
  gsize at;
  guint b, p, side;

  /* clean: the difference at element 3, exactly */
  fill (a, ref, af, N, 0, FALSE);
  g_assert_cmpfloat (npu_max_abs_diff (a, ref, N, &at), ==, 0.125);
  g_assert_cmpuint (at, ==, 3);
  g_assert_cmpfloat (npu_max_abs_diff_f (a, af, N, &at), ==, 0.125);
  g_assert_cmpuint (at, ==, 3);
  g_assert_cmpfloat (fabs (npu_rel_diff (a, ref, N) - 0.125 / 1.5), <=,
      1e-15);
  g_assert_true (npu_ref_error_over_rms (a, ref, N, &err));
  g_assert_true (npu_within (err, 1.0));

  for (b = 0; b < G_N_ELEMENTS (bads); b++) {
    for (p = 0; p < G_N_ELEMENTS (positions); p++) {
      for (side = 0; side < 2; side++) {
        gboolean in_ref = side == 1;
        gboolean ok;

        fill (a, ref, af, positions[p], bads[b], in_ref);
        g_assert_false (npu_within (npu_max_abs_diff (a, ref, N, NULL),
                BIG_TOL));
        g_assert_false (npu_within (npu_max_abs_diff_f (a, af, N, NULL),
                BIG_TOL));
        /* the same with the sides swapped */
        g_assert_false (npu_within (npu_max_abs_diff_f (af, a, N, NULL),
                BIG_TOL));
        g_assert_false (npu_within (npu_rel_diff (a, ref, N), BIG_TOL));
        /* error over rms: refused (FALSE) or a failing measure */
        err = 0.0;
        ok = npu_ref_error_over_rms (a, ref, N, &err);
        g_assert_false (ok && npu_within (err, BIG_TOL));
      }
    }
  }
}

/* The position the diff reports is the NaN's, so messages name it. */
static void
test_nan_position (void)
{
  float a[N], af[N];
  double ref[N];
  gsize at = 0;

  fill (a, ref, af, 5, NAN, FALSE);
  g_assert_true (isnan (npu_max_abs_diff (a, ref, N, &at)));
  g_assert_cmpuint (at, ==, 5);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/compare/within", test_within);
  g_test_add_func ("/compare/err-max", test_err_max);
  g_test_add_func ("/compare/diffs", test_diffs);
  g_test_add_func ("/compare/nan-position", test_nan_position);
  return g_test_run ();
}
