/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: SiLU and RMS norm in vectors (core/cpu/npuvecmath.h) against libm
 * in double
 *
 * Each copy of the kernels (every ISA level this CPU has, picked through
 * the NPU_CPU_ISA cap) is held to the bounds npuvecmath.h states, per
 * element: over random values from 2^-30 to 2^30 in magnitude, every
 * array length from 1 to 70 (the last partial vector), the region where
 * the exponential flushes or overflows (|g| near 87.3 and 88.37), and
 * IEEE's special values (+-0, +-inf, NaN, FLT_MAX, a subnormal), whose
 * results must be what the formula gives in double: an infinity the same
 * infinity, a NaN a NaN.  Each element's result must also not depend on
 * where it sits in the array (the same bits alone and in a long row).
 * And each level must run the copy written for it, bit for bit.
 */
#include <core/cpu/npuvecmath.h>
#include <core/cpu/npucpu.h>
#include "tests/npucompare.h"
#include "tests/unit/npulesserisas.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define SILU_REL (1.0 / (1 << 20))      /* 2^-20 */
#define SILU_ABS 7.52316384526264e-37   /* 2^-120 */
#define NORM_REL (3.0 / (1 << 24))      /* 3 roundings */

static double
silu_mul_ref (float g, float u)
{
  return (double) g / (1.0 + exp (-(double) g)) * u;
}

/* The worst error of @out against the double reference, as a share of
 * the bound; fails the test at the first element outside it, or whose
 * special value differs */
static double
check_silu (const float *g, const float *u, const float *out, gsize n)
{
  double worst = 0.0;
  gsize i;

  for (i = 0; i < n; i++) {
    double ref = silu_mul_ref (g[i], u[i]);
    double tol = SILU_REL * fabs (ref) + SILU_ABS * fabs (u[i]);
    double err;

    if (isnan (ref) || isinf (ref)) {
      if (isnan (ref) ? !isnan (out[i]) : out[i] != ref)
        g_error ("silu (%g) * %g: %g, the formula gives %g", g[i], u[i],
            out[i], ref);
      continue;
    }
    err = fabs ((double) out[i] - ref);
    if (!npu_within (err, tol))
      g_error ("silu (%.9g) * %.9g: %.9g, reference %.17g: error %.3g above "
          "%.3g", g[i], u[i], out[i], ref, err, tol);
    worst = npu_err_max (worst, tol > 0 ? err / tol : 0.0);
  }
  return worst;
}

/* A random float of magnitude 2^-30 .. 2^30 and either sign */
static float
spread_value (GRand * rand)
{
  float m = (float) g_rand_double_range (rand, 1.0, 2.0);

  m = ldexpf (m, g_rand_int_range (rand, -30, 31));
  return g_rand_boolean (rand) ? m : -m;
}

static void
test_silu_random (void)
{
  GRand *rand = g_rand_new_with_seed (13);
  const gsize n_max = 4096 + 70;
  float *g = g_new (float, n_max), *u = g_new (float, n_max);
  float *out = g_new (float, n_max), one;
  double worst = 0.0;
  gsize n, i;

  /* most of a layer's activations sit within +-20: half there, half
   * spread over 2^-30 .. 2^30 */
  for (i = 0; i < n_max; i++) {
    g[i] = i % 2 ? spread_value (rand) :
        (float) g_rand_double_range (rand, -20.0, 20.0);
    u[i] = (float) g_rand_double_range (rand, -4.0, 4.0);
  }
  for (n = 1; n <= 70; n++) {
    npu_silu_mul (g + n, u + n, out, n);
    worst = npu_err_max (worst, check_silu (g + n, u + n, out, n));
  }
  npu_silu_mul (g, u, out, n_max);
  worst = npu_err_max (worst, check_silu (g, u, out, n_max));
  /* the same bits alone as in the row */
  for (i = 0; i < n_max; i += 97) {
    npu_silu_mul (g + i, u + i, &one, 1);
    g_assert_cmpmem (&one, sizeof (one), out + i, sizeof (float));
  }
  /* in place, over gate */
  memcpy (out, g, n_max * sizeof (float));
  npu_silu_mul (out, u, out, n_max);
  worst = npu_err_max (worst, check_silu (g, u, out, n_max));
  g_test_message ("silu at %s: worst error %.3f of the bound",
      npu_cpu_isa_name (npu_cpu_get_isa ()), worst);

  g_free (g);
  g_free (u);
  g_free (out);
  g_rand_free (rand);
}

/* Where the exponential flushes to 0 or overflows, finely, and the special
 * values */
static void
test_silu_edges (void)
{
  static const float special[] = {
    0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX,
    1e-40f, -1e-40f, FLT_MIN, -FLT_MIN, 1e30f, -1e30f, 87.3f, -87.3f,
    88.37f, -88.37f, 88.38f, -88.38f, 88.72f, -88.72f, 89.0f, -89.0f,
    103.0f, -103.0f, 150.0f, -150.0f,
  };
  const gsize n_sp = G_N_ELEMENTS (special), n_sweep = 4000;
  float *g = g_new (float, n_sp + n_sweep), *u = g_new (float, n_sp + n_sweep);
  float *out = g_new (float, n_sp + n_sweep);
  double worst;
  gsize i;

  memcpy (g, special, sizeof (special));
  for (i = 0; i < n_sweep; i++) {
    /* +-86 .. +-90 in steps of 1/500 */
    float a = 86.0f + (float) (i / 2) / 500.0f;

    g[n_sp + i] = i % 2 ? -a : a;
  }
  for (i = 0; i < n_sp + n_sweep; i++)
    u[i] = i % 3 == 0 ? 1.0f : (i % 3 == 1 ? -2.5f : 1e-3f);
  npu_silu_mul (g, u, out, n_sp + n_sweep);
  worst = check_silu (g, u, out, n_sp + n_sweep);
  /* what the formula gives, spelled out */
  g_assert_true (isinf (out[2]) && out[2] > 0);       /* silu (+inf) * 1 */
  g_assert_true (isnan (out[3]));       /* silu (-inf) = -inf / inf */
  g_assert_true (isnan (out[4]) && isnan (out[5]));
  g_assert_cmpfloat (out[0], ==, 0.0f);
  g_test_message ("silu edges at %s: worst error %.3f of the bound",
      npu_cpu_isa_name (npu_cpu_get_isa ()), worst);
  g_free (g);
  g_free (u);
  g_free (out);
}

static void
check_norm (const float *x, const float *w, const float *out, gsize n,
    float eps)
{
  double ss = 0.0, s;
  gsize i;

  for (i = 0; i < n; i++)
    ss += (double) x[i] * x[i];
  s = 1.0 / sqrt (ss / n + eps);
  for (i = 0; i < n; i++) {
    double ref = x[i] * s * w[i];

    if (isnan (ref) || isinf (ref)) {
      if (isnan (ref) ? !isnan (out[i]) : out[i] != ref)
        g_error ("norm, element %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT
            ": %g, reference %g", i, n, out[i], ref);
      continue;
    }
    if (!npu_within (fabs (out[i] - ref), NORM_REL * fabs (ref)))
      g_error ("norm, element %" G_GSIZE_FORMAT " of %" G_GSIZE_FORMAT
          ": %.9g, reference %.17g", i, n, out[i], ref);
  }
}

static void
test_norm (void)
{
  GRand *rand = g_rand_new_with_seed (7);
  const gsize n_max = 2048;
  float *x = g_new (float, n_max), *w = g_new (float, n_max);
  float *out = g_new (float, n_max);
  gsize n, i;

  for (i = 0; i < n_max; i++) {
    x[i] = (float) g_rand_double_range (rand, -3.0, 3.0);
    w[i] = (float) g_rand_double_range (rand, 0.5, 1.5);
  }
  for (n = 1; n <= 70; n++) {
    npu_rms_norm (x + n, w + n, out, n, 1e-5f);
    check_norm (x + n, w + n, out, n, 1e-5f);
  }
  npu_rms_norm (x, w, out, n_max, 1e-6f);
  check_norm (x, w, out, n_max, 1e-6f);
  /* in place; tiny and large rows, where eps matters or the squares
   * would overflow a float sum */
  for (i = 0; i < n_max; i++)
    x[i] *= 1e-4f;
  npu_rms_norm (x, w, x, n_max, 1e-5f);
  for (i = 0; i < n_max; i++)
    x[i] = ldexpf (x[i], 60);
  memcpy (out, x, n_max * sizeof (float));
  npu_rms_norm (out, w, out, n_max, 1e-5f);
  check_norm (x, w, out, n_max, 1e-5f);
  /* a NaN reaches every output; an infinity makes its own NaN, the rest 0 */
  x[5] = NAN;
  npu_rms_norm (x, w, out, 40, 1e-5f);
  for (i = 0; i < 40; i++)
    g_assert_true (isnan (out[i]));
  x[5] = INFINITY;
  npu_rms_norm (x, w, out, 40, 1e-5f);
  check_norm (x, w, out, 40, 1e-5f);
  g_assert_true (isnan (out[5]));
  g_assert_cmpfloat (out[6], ==, 0.0f);

  g_free (x);
  g_free (w);
  g_free (out);
  g_rand_free (rand);
}

typedef void (*SiluFn) (const float *gate, const float *up, float *out,
    gsize n);
typedef void (*NormFn) (const float *x, const float *w, float *out, gsize n,
    float eps);

/* The copy written for the level the cap leaves: a level must not fall
 * back to another copy unseen (the other tests would pass on any correct
 * copy, and the one meant for the level would go untested) */
static void
expected_copy (SiluFn * silu, NormFn * norm, const gchar ** name)
{
#if defined(__x86_64__)
  if (npu_cpu_has (NPU_CPU_AVX512F | NPU_CPU_FMA)) {
    *silu = npu_silu_mul_avx512;
    *norm = npu_rms_norm_avx512;
    *name = "avx512";
    return;
  }
  if (npu_cpu_has (NPU_CPU_AVX2 | NPU_CPU_FMA)) {
    *silu = npu_silu_mul_avx2;
    *norm = npu_rms_norm_avx2;
    *name = "avx2";
    return;
  }
#elif defined(__aarch64__)
  if (npu_cpu_has (NPU_CPU_NEON)) {
    *silu = npu_silu_mul_neon;
    *norm = npu_rms_norm_neon;
    *name = "neon";
    return;
  }
#endif
  *silu = npu_silu_mul_generic;
  *norm = npu_rms_norm_generic;
  *name = "generic";
}

/* npu_silu_mul () and npu_rms_norm () give the bits of the expected copy;
 * how many elements the generic copy gets otherwise says whether the
 * check could tell the copies apart on this level */
static void
test_dispatch (void)
{
  GRand *rand = g_rand_new_with_seed (29);
  const gsize n = 1027;
  float *g = g_new (float, n), *u = g_new (float, n);
  float *a = g_new (float, n), *b = g_new (float, n);
  SiluFn silu;
  NormFn norm;
  const gchar *name;
  guint differ = 0;
  gsize i;

  for (i = 0; i < n; i++) {
    g[i] = (float) g_rand_double_range (rand, -20.0, 20.0);
    u[i] = (float) g_rand_double_range (rand, -4.0, 4.0);
  }
  expected_copy (&silu, &norm, &name);
  npu_silu_mul (g, u, a, n);
  silu (g, u, b, n);
  g_assert_cmpmem (a, n * sizeof (float), b, n * sizeof (float));
  npu_silu_mul_generic (g, u, b, n);
  for (i = 0; i < n; i++)
    differ += memcmp (&a[i], &b[i], sizeof (float)) != 0;
  npu_rms_norm (g, u, a, n, 1e-5f);
  norm (g, u, b, n, 1e-5f);
  g_assert_cmpmem (a, n * sizeof (float), b, n * sizeof (float));
  g_test_message ("at %s the %s copy; its SiLU differs from the generic "
      "copy's in %u of %" G_GSIZE_FORMAT " elements",
      npu_cpu_isa_name (npu_cpu_get_isa ()), name, differ, n);

  g_free (g);
  g_free (u);
  g_free (a);
  g_free (b);
  g_rand_free (rand);
}

/* The tests each lesser level's copy of the kernels runs */
static void
test_at_one_level (void)
{
  test_silu_random ();
  test_silu_edges ();
  test_norm ();
  test_dispatch ();
}

/* The other levels' copies (the tests above ran the best one) */
static void
test_lesser_isas (void)
{
  npu_test_at_lesser_isas (test_at_one_level);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/vecmath/silu-random", test_silu_random);
  g_test_add_func ("/vecmath/silu-edges", test_silu_edges);
  g_test_add_func ("/vecmath/norm", test_norm);
  g_test_add_func ("/vecmath/dispatch", test_dispatch);
  g_test_add_func ("/vecmath/lesser-isas", test_lesser_isas);
  return g_test_run ();
}
