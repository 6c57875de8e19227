/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the attention kernel (core/npuattention.h) against a plain
 * double-precision softmax attention
 *
 * The LLM and ViT tests reach the kernel only through whole models; here
 * it is driven directly over the shapes it must handle: head sizes that
 * are and are not multiples of 16 (and above and below its 64-column
 * chunks), 1 to 8 queries sharing the rows (more than its 4 per pass),
 * rows split into several spans with their own query and stride, one row,
 * many rows, scores spread far enough that most weights underflow, and a
 * NaN that must reach the output.  Results are compared per query to the
 * reference's output, relative to the largest |value| feeding it.
 */
#include "core/npuattention.h"
#include "tests/npucompare.h"

#include <math.h>
#include <string.h>

typedef struct
{
  guint hd, nq, n_rows, n_spans;
  float spread;                 /* scale of the query values */
} Case;

/* query i of a span at its q + i * hd */
static void
reference (const NpuAttnSpan * spans, guint n_spans, guint hd, guint nq,
    float scale, double *out)
{
  guint i, s, r, d, m = 0, j;
  double *sc, mx, sum;

  for (s = 0; s < n_spans; s++)
    m += spans[s].n;
  sc = g_new (double, m);
  for (i = 0; i < nq; i++) {
    mx = -INFINITY;
    j = 0;
    for (s = 0; s < n_spans; s++) {
      for (r = 0; r < spans[s].n; r++, j++) {
        const float *qi = spans[s].q + i * hd;
        const float *kr = spans[s].k + r * spans[s].stride;
        double dot = 0.0;

        for (d = 0; d < hd; d++)
          dot += (double) qi[d] * kr[d];
        sc[j] = dot * scale;
        mx = MAX (mx, sc[j]);
      }
    }
    sum = 0.0;
    for (j = 0; j < m; j++) {
      sc[j] = exp (sc[j] - mx);
      sum += sc[j];
    }
    for (d = 0; d < hd; d++) {
      double o = 0.0;

      j = 0;
      for (s = 0; s < n_spans; s++)
        for (r = 0; r < spans[s].n; r++, j++)
          o += sc[j] * spans[s].v[r * spans[s].stride + d];
      out[i * hd + d] = o / sum;
    }
  }
  g_free (sc);
}

static void
run_case (const Case * c, GRand * rand)
{
  /* rows in one buffer with a stride wider than hd (like the KV cache's
   * kv_dim), spans cut at random places, each span its own query block */
  gsize stride = c->hd * 2 + 3;
  guint n_q = c->n_spans * c->nq * c->hd;
  float *k = g_new (float, c->n_rows * stride);
  float *v = g_new (float, c->n_rows * stride);
  float *q = g_new (float, n_q);
  float *scores = g_new (float, c->nq * (c->n_rows + 5));
  float *out = g_new (float, c->nq * c->hd);
  double *want = g_new (double, c->nq * c->hd);
  NpuAttnSpan spans[NPU_ATTN_MAX_SPANS];
  float scale = 1.0f / sqrtf ((float) c->hd);
  guint i, s, r0 = 0;
  gsize j;

  g_assert_cmpuint (c->n_spans, <=, NPU_ATTN_MAX_SPANS);
  for (j = 0; j < c->n_rows * stride; j++) {
    k[j] = g_rand_double_range (rand, -1.0, 1.0);
    v[j] = g_rand_double_range (rand, -1.0, 1.0);
  }
  for (j = 0; j < n_q; j++)
    q[j] = c->spread * g_rand_double_range (rand, -1.0, 1.0);
  for (s = 0; s < c->n_spans; s++) {
    guint left = c->n_rows - r0, n;

    n = s + 1 == c->n_spans ? left :
        (guint) g_rand_int_range (rand, 1, left - (c->n_spans - s - 1) + 1);
    spans[s].q = q + s * c->nq * c->hd;
    spans[s].k = k + r0 * stride;
    spans[s].v = v + r0 * stride;
    spans[s].stride = stride;
    spans[s].n = n;
    r0 += n;
  }
  g_assert_cmpuint (r0, ==, c->n_rows);

  npu_attention_rows (spans, c->n_spans, c->hd, c->nq, c->hd, scale, scores,
      c->n_rows + 5, out, c->hd);
  reference (spans, c->n_spans, c->hd, c->nq, scale, want);

  for (i = 0; i < c->nq; i++) {
    /* the values are in [-1, 1]: an output is a convex combination */
    double err = npu_max_abs_diff (out + i * c->hd, want + i * c->hd,
        c->hd, NULL);

    if (!npu_within (err, 2e-5))
      g_error ("hd %u nq %u rows %u spans %u spread %g: query %u off by %g",
          c->hd, c->nq, c->n_rows, c->n_spans, c->spread, i, err);
  }

  g_free (k);
  g_free (v);
  g_free (q);
  g_free (scores);
  g_free (out);
  g_free (want);
}

static void
test_shapes (void)
{
  static const guint hds[] = { 8, 16, 20, 48, 64, 80, 128 };
  static const guint nqs[] = { 1, 2, 3, 4, 5, 7, 8 };
  static const guint rows[] = { 1, 2, 17, 100, 1000 };
  GRand *rand = g_rand_new_with_seed (11);
  guint a, b, c, s;

  for (a = 0; a < G_N_ELEMENTS (hds); a++)
    for (b = 0; b < G_N_ELEMENTS (nqs); b++)
      for (c = 0; c < G_N_ELEMENTS (rows); c++)
        for (s = 1; s <= 5 && s <= rows[c]; s += 2) {
          Case k = { hds[a], nqs[b], rows[c], s, 1.0f };

          run_case (&k, rand);
        }
  g_rand_free (rand);
}

/* Queries large enough that the scores spread over hundreds: most
 * weights underflow to 0 and the maximum must dominate, not overflow */
static void
test_spread (void)
{
  static const float spreads[] = { 0.0f, 0.01f, 4.0f, 30.0f, 200.0f };
  GRand *rand = g_rand_new_with_seed (12);
  guint i;

  for (i = 0; i < G_N_ELEMENTS (spreads); i++) {
    Case k = { 64, 4, 300, 3, spreads[i] };

    run_case (&k, rand);
  }
  g_rand_free (rand);
}

/* A NaN is not lost: in a key it makes that row's score NaN, and the
 * softmax (a vectorised exp that flushes tiny weights to 0 must not flush
 * it) then every output; in a value it reaches that column of every
 * output (0 * NaN is NaN). */
static void
test_nan (void)
{
  guint hd = 32, nq = 2, n = 40, i;
  float *k = g_new0 (float, n * hd), *v = g_new0 (float, n * hd);
  float *q = g_new0 (float, nq * hd), scores[2 * 40], out[2 * 32];
  NpuAttnSpan span = { q, k, v, hd, n };

  for (i = 0; i < n * hd; i++) {
    k[i] = (i % 7) * 0.1f;
    v[i] = (i % 5) * 0.2f;
  }
  for (i = 0; i < nq * hd; i++)
    q[i] = (i % 3) * 0.5f;
  k[10 * hd + 3] = NAN;
  npu_attention_rows (&span, 1, hd, nq, hd, 0.5f, scores, n, out, hd);
  for (i = 0; i < nq * hd; i++)
    g_assert_true (isnan (out[i]));

  k[10 * hd + 3] = 0.0f;
  v[20 * hd + 5] = NAN;
  npu_attention_rows (&span, 1, hd, nq, hd, 0.5f, scores, n, out, hd);
  for (i = 0; i < nq * hd; i++)
    g_assert_true (i % hd == 5 ? isnan (out[i]) : isfinite (out[i]));
  g_free (k);
  g_free (v);
  g_free (q);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/attention/shapes", test_shapes);
  g_test_add_func ("/attention/spread", test_spread);
  g_test_add_func ("/attention/nan", test_nan);
  return g_test_run ();
}
