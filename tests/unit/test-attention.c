/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the attention kernel (core/cpu/npuattention.h) against a plain
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
 *
 * Rows stored in F16 and Q8_0 are checked twice: against the reference
 * over the values the rows hold (decoded here with the codec's
 * npu_f16_to_f32(), not the kernel's loads: the kernel's own error,
 * as tight as F32's), and against the reference over the F32 values
 * before storage, within the bound that the storage error gives
 * (kv_bound()).
 *
 * At the AVX-512 level (which has VNNI) the one-pass kernel scores Q8_0
 * key tiles in integers, with each query rounded to int8 codes per block
 * of 32 values, and Q8_0 key rows with the same rounded query (so that a
 * batch's own rows score as the cache's): there the first reference
 * takes the query as the kernel
 * rounds it (quantised_query(), written here from the rule the kernel
 * states), and the second adds the rounding's bound to the scores' error.
 */
#include <core/cpu/npuattention.h>
#include <core/cpu/npucpu.h>
#include "tests/npucompare.h"
#include "tests/unit/npulesserisas.h"
#include <core/formats/npumxfp4.h>

#include <math.h>
#include <string.h>

typedef struct
{
  guint hd, nq, n_rows, n_spans;
  float spread;                 /* scale of the query values */
  gboolean packed;              /* rows contiguous (stride hd), as in
                                 * npullm's head-major cache */
  guint tiled;                  /* keys in tiles (npukvtype.h), packed
                                 * values: 1 every span, 2 every other
                                 * span (the others key rows) */
} Case;

/* A plain F32 view of the rows: @k and @v with @stride floats a row */
typedef struct
{
  const float *q;
  const float *k, *v;
  gsize stride;
  guint n;
  double scale;                 /* of the scores q . k */
} RefSpan;

/* Value c of a row stored in @type, decoded independently of the kernel */
static float
stored_at (NpuKvType type, const guint8 * row, gsize c)
{
  if (type == NPU_KV_F16)
    return npu_f16_to_f32 (row[2 * c] | row[2 * c + 1] << 8);
  if (type == NPU_KV_Q8_0) {
    const guint8 *b = row + c / 32 * 34;

    return npu_f16_to_f32 (b[0] | b[1] << 8) * (gint8) b[2 + c % 32];
  }
  return ((const float *) row)[c];
}

/* Row @row (@hd values stored in @type) into row @j of a key tile, as
 * npukvtype.h lays a tile out: value d of row j at d * 16 + j, Q8_0's
 * scales first (block b's at b * 16 + j), then its int8 values */
static void
tile_scatter (NpuKvType type, guint hd, const guint8 * row, guint8 * tile,
    guint j)
{
  guint d, e = type == NPU_KV_F16 ? 2 : 4;

  for (d = 0; d < hd; d++) {
    if (type == NPU_KV_Q8_0) {
      const guint8 *b = row + d / 32 * 34;

      if (d % 32 == 0)
        memcpy (tile + 2 * (d / 32 * 16 + j), b, 2);
      tile[hd / 32 * 32 + d * 16 + j] = b[2 + d % 32];
    } else {
      memcpy (tile + e * (d * 16 + j), row + e * d, e);
    }
  }
}

/* The largest |x - stored x| npukvtype.h states for values up to @amax */
static double
storage_error (NpuKvType type, double amax)
{
  if (type == NPU_KV_F16)
    return amax * 0x1p-11;
  if (type == NPU_KV_Q8_0)
    return (1.0 + 0x1p-10) * amax / 254.0 + 0x1p-18;
  return 0.0;
}

/* Bound on |out - reference over the unstored values| for query @i of
 * the @n_spans @spans (each span may have queries of its own, as npullm's
 * sinks do): keys off by at most ek move each score of span s by at most
 * scale ||q_s||_1 ek, so every score by at most delta = scale
 * max_s ||q_s||_1 ek, so each softmax weight by a factor within
 * e^(+-2 delta) and their sum of |changes| by at most e^(2 delta) - 1,
 * which moves the output by that times max|v|; values off by at most ev
 * move it by ev.  Plus the kernel's own F32 rounding.  A query rounded
 * to int8 moves each score by at most @dq more. */
static double
kv_bound (NpuKvType type, const NpuAttnSpan * spans, guint n_spans, guint i,
    guint hd, float scale, double kmax, double vmax, double dq)
{
  double q1 = 0.0, delta;
  guint s, d;

  for (s = 0; s < n_spans; s++) {
    const float *q = spans[s].q + i * hd;
    double n1 = 0.0;

    for (d = 0; d < hd; d++)
      n1 += fabs (q[d]);
    q1 = MAX (q1, n1);
  }
  /* plus @dq, the query's own rounding (query_rounding_error()) */
  delta = scale * q1 * storage_error (type, kmax) + dq;
  return storage_error (type, vmax) + expm1 (2.0 * delta) * vmax + 2e-5;
}

/* The query @q (@hd values) as the kernel's int8 scores use it
 * (npuattention-kernel.c, quantize_queries()): times @scale in F32, then
 * per block of 32 values d = max|x| / 127 and codes rint (x * (127 /
 * max|x|)), a block whose max is below 2^-60 all zero.  The values d x
 * code go to @out, and the stated bound on |x - d code| of block b to
 * @err[b]: max|x| (1/254 + 2^-21), or max|x| for a zeroed block. */
static void
quantised_query (const float *q, guint hd, float scale, double *out,
    double *err)
{
  guint b, d;

  for (b = 0; b < hd / 32; b++) {
    float x[32], amax = 0.0f, inv, qd;

    for (d = 0; d < 32; d++) {
      x[d] = q[32 * b + d] * scale;
      amax = MAX (amax, fabsf (x[d]));
    }
    if (!(amax >= 0x1p-60f)) {
      for (d = 0; d < 32; d++)
        out[32 * b + d] = 0.0;
      err[b] = amax;
      continue;
    }
    inv = 127.0f / amax;
    qd = amax / 127.0f;
    for (d = 0; d < 32; d++) {
      float t = x[d] * inv;

      out[32 * b + d] = (double) qd * rintf (t);
    }
    err[b] = amax * (1.0 / 254.0 + 0x1p-21);
  }
}

/* The largest move of a score that the query's rounding @err (per block,
 * quantised_query()) gives over the @n stored key rows @k (@stride apart) */
static double
query_rounding_error (const double *err, const float *k, gsize stride,
    guint n, guint hd)
{
  double worst = 0.0;
  guint r, b, d;

  for (r = 0; r < n; r++) {
    double e = 0.0;

    for (b = 0; b < hd / 32; b++) {
      double k1 = 0.0;

      for (d = 0; d < 32; d++)
        k1 += fabs (k[r * stride + 32 * b + d]);
      e += err[b] * k1;
    }
    worst = MAX (worst, e);
  }
  return worst;
}

/* query i of a span at its q + i * hd (F32), or its qm + i * hd (the
 * model of a rounded query, if not NULL) */
static void
reference (const RefSpan * spans, const double *const *qm, guint n_spans,
    guint hd, guint nq, double *out)
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
          dot += (qm && qm[s] ? qm[s][i * hd + d] : (double) qi[d]) * kr[d];
        sc[j] = dot * spans[s].scale;
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
run_case_type (const Case * c, NpuKvType type, GRand * rand)
{
  /* rows in one buffer with a stride wider than hd (like the KV cache's
   * kv_dim; a multiple of 32 for Q8_0), spans cut at random places, each
   * span its own query block */
  gsize stride = c->packed || c->tiled ? c->hd :
      type == NPU_KV_Q8_0 ? c->hd * 2 + 32 : c->hd * 2 + 3;
  gsize rb = npu_kv_row_bytes (type, stride);
  guint n_q = c->n_spans * c->nq * c->hd;
  float *k = g_new (float, c->n_rows * stride);
  float *v = g_new (float, c->n_rows * stride);
  float *kd = g_new (float, c->n_rows * stride);
  float *vd = g_new (float, c->n_rows * stride);
  guint8 *ks = g_malloc (c->n_rows * rb), *vs = g_malloc (c->n_rows * rb);
  /* tiled keys: row r in row (r + off) % 16 of tile (r + off) / 16; the
   * rest of the tiles NaN (all ones in every type), which must not reach
   * the output */
  guint off = c->tiled ? (guint) g_rand_int_range (rand, 0, 16) : 0;
  gsize tb = npu_kv_tile_bytes (type, c->hd);
  gsize n_tiles = c->tiled ? (c->n_rows + off + 15) / 16 : 0;
  guint8 *kt = g_malloc (n_tiles * tb), *kt2 = g_malloc (n_tiles * tb);
  float *q = g_new (float, n_q);
  float *scores = g_new (float, c->nq * (c->n_rows + 5));
  float *out = g_new (float, c->nq * c->hd);
  double *want = g_new (double, c->nq * c->hd);
  double *want0 = g_new (double, c->nq * c->hd);
  NpuAttnSpan spans[NPU_ATTN_MAX_SPANS];
  RefSpan ref[NPU_ATTN_MAX_SPANS], ref0[NPU_ATTN_MAX_SPANS];
  float scale = 1.0f / sqrtf ((float) c->hd);
  /* where the kernel rounds the queries of Q8_0 keys to int8: the one
   * pass (heads of up to 64) at the AVX-512 level, tiles and key rows */
  gboolean rounds = type == NPU_KV_Q8_0 && c->hd <= 64 &&
      npu_cpu_get_isa () == NPU_CPU_ISA_AVX512;
  double *qm = g_new0 (double, n_q), *qerr = g_new0 (double, n_q / 32 + 1);
  const double *qms[NPU_ATTN_MAX_SPANS] = { NULL, };
  double kmax = 0.0, vmax = 0.0;
  guint i, s, r0 = 0;
  gsize j, r;

  g_assert_cmpuint (c->n_spans, <=, NPU_ATTN_MAX_SPANS);
  for (j = 0; j < c->n_rows * stride; j++) {
    k[j] = g_rand_double_range (rand, -1.0, 1.0);
    v[j] = g_rand_double_range (rand, -1.0, 1.0);
    kmax = MAX (kmax, fabs (k[j]));
    vmax = MAX (vmax, fabs (v[j]));
  }
  /* store the rows, and decode what was stored */
  for (r = 0; r < c->n_rows; r++) {
    npu_kv_encode_row (type, k + r * stride, stride, ks + r * rb);
    npu_kv_encode_row (type, v + r * stride, stride, vs + r * rb);
    for (j = 0; j < stride; j++) {
      kd[r * stride + j] = stored_at (type, ks + r * rb, j);
      vd[r * stride + j] = stored_at (type, vs + r * rb, j);
    }
  }
  /* untiled cases have no tiles: g_malloc (0) is NULL, which memset and
   * memcmp must not be given even for zero bytes */
  if (n_tiles) {
    memset (kt, 0xff, n_tiles * tb);
    memset (kt2, 0xff, n_tiles * tb);
  }
  for (r = 0; c->tiled && r < c->n_rows; r++) {
    tile_scatter (type, c->hd, ks + r * rb, kt + (r + off) / 16 * tb,
        (r + off) % 16);
    npu_kv_tile_put (type, c->hd, ks + r * rb, kt2 + (r + off) / 16 * tb,
        (r + off) % 16);
  }
  g_assert_true (n_tiles == 0 || memcmp (kt, kt2, n_tiles * tb) == 0);
  for (j = 0; j < n_q; j++)
    q[j] = c->spread * g_rand_double_range (rand, -1.0, 1.0);
  for (s = 0; s < c->n_spans; s++) {
    guint left = c->n_rows - r0, n;

    n = s + 1 == c->n_spans ? left :
        (guint) g_rand_int_range (rand, 1, left - (c->n_spans - s - 1) + 1);
    spans[s].q = q + s * c->nq * c->hd;
    spans[s].k = ks + r0 * rb;
    spans[s].v = vs + r0 * rb;
    spans[s].stride = stride;
    spans[s].n = n;
    spans[s].type = type;
    spans[s].k_tiled = c->tiled == 1 || (c->tiled == 2 && s % 2 == 0);
    spans[s].k_row = 0;
    if (spans[s].k_tiled) {
      spans[s].k = kt + (r0 + off) / 16 * tb;
      spans[s].k_row = (r0 + off) % 16;
    }
    ref[s] = (RefSpan) {
    spans[s].q, kd + r0 * stride, vd + r0 * stride, stride, n, scale};
    ref0[s] = (RefSpan) {
    spans[s].q, k + r0 * stride, v + r0 * stride, stride, n, scale};
    if (rounds) {
      for (i = 0; i < c->nq; i++)
        quantised_query (spans[s].q + i * c->hd, c->hd, scale,
            qm + (s * c->nq + i) * c->hd,
            qerr + (s * c->nq + i) * (c->hd / 32));
      qms[s] = qm + s * c->nq * c->hd;
      ref[s].scale = 1.0;
    }
    r0 += n;
  }
  g_assert_cmpuint (r0, ==, c->n_rows);

  npu_attention_rows (spans, c->n_spans, c->hd, c->nq, c->hd, scale, scores,
      c->n_rows + 5, out, c->hd);
  reference (ref, qms, c->n_spans, c->hd, c->nq, want);
  reference (ref0, NULL, c->n_spans, c->hd, c->nq, want0);

  for (i = 0; i < c->nq; i++) {
    /* the values are in [-1, 1]: an output is a convex combination */
    double err = npu_max_abs_diff (out + i * c->hd, want + i * c->hd, c->hd,
        NULL);
    double err0 = npu_max_abs_diff (out + i * c->hd, want0 + i * c->hd, c->hd,
        NULL);
    double dq = 0.0, bound;

    for (s = 0; s < c->n_spans; s++)
      if (qms[s])
        dq = MAX (dq, query_rounding_error (qerr + (s * c->nq + i) *
                (c->hd / 32), ref[s].k, stride, ref[s].n, c->hd));
    bound = kv_bound (type, spans, c->n_spans, i, c->hd, scale, kmax, vmax,
        dq);

    if (!npu_within (err, 2e-5))
      g_error ("%s hd %u nq %u rows %u spans %u spread %g tiled %u: query %u "
          "off by %g", npu_kv_type_name (type), c->hd, c->nq, c->n_rows,
          c->n_spans, c->spread, c->tiled, i, err);
    if (!npu_within (err0, bound))
      g_error ("%s hd %u nq %u rows %u spans %u spread %g tiled %u: query %u "
          "off the unstored values by %g > bound %g", npu_kv_type_name (type),
          c->hd, c->nq, c->n_rows, c->n_spans, c->spread, c->tiled, i, err0,
          bound);
  }

  g_free (k);
  g_free (v);
  g_free (kd);
  g_free (vd);
  g_free (ks);
  g_free (vs);
  g_free (kt);
  g_free (kt2);
  g_free (q);
  g_free (scores);
  g_free (out);
  g_free (want);
  g_free (want0);
  g_free (qm);
  g_free (qerr);
}

static void
run_case (const Case * c, GRand * rand)
{
  run_case_type (c, NPU_KV_F32, rand);
  run_case_type (c, NPU_KV_F16, rand);
  if (c->hd % 32 == 0)
    run_case_type (c, NPU_KV_Q8_0, rand);
}

static void
test_shapes (void)
{
  static const guint hds[] = { 8, 16, 20, 48, 64, 80, 128 };
  static const guint nqs[] = { 1, 2, 3, 4, 5, 7, 8 };
  static const guint rows[] = { 1, 2, 17, 100, 1000 };
  /* Under valgrind (NPU_UNDER_VALGRIND) the 1000-row shapes, nine tenths
   * of this test's work, are left out: 100 rows already run many 16-row
   * blocks, a partial last block and spans cut inside blocks for every
   * head size and query count, and /attention/long, /attention/packed and
   * /attention/tiled run 2048-2100 rows (the lesser levels run the last
   * two).  More rows of the same blocks read and write nothing new. */
  guint n_rows = g_getenv ("NPU_UNDER_VALGRIND") ? G_N_ELEMENTS (rows) - 1 :
      G_N_ELEMENTS (rows);
  GRand *rand = g_rand_new_with_seed (11);
  guint a, b, c, s;

  for (a = 0; a < G_N_ELEMENTS (hds); a++)
    for (b = 0; b < G_N_ELEMENTS (nqs); b++)
      for (c = 0; c < n_rows; c++)
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

/* A decode at a long context: thousands of rows in 16-row blocks, so the
 * running maximum of the one-pass softmax rises in many blocks after the
 * first and every earlier sum is rescaled */
static void
test_long (void)
{
  static const Case cases[] = {
    {64, 4, 2100, 5, 30.0f},
    {64, 4, 2053, 3, 1.0f},
    {32, 3, 2048, 1, 200.0f},
  };
  GRand *rand = g_rand_new_with_seed (14);
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    run_case (&cases[i], rand);
  g_rand_free (rand);
}

/* The same over contiguous rows (a head of npullm's head-major cache):
 * the kernel prefetches them as one run of lines, from the spans' starts
 * and ahead of the blocks, up to their ends */
static void
test_packed (void)
{
  static const Case cases[] = {
    {64, 4, 2100, 5, 30.0f, TRUE},
    {64, 4, 2048, 1, 1.0f, TRUE},
    {64, 1, 70, 2, 4.0f, TRUE},
    {32, 3, 777, 3, 200.0f, TRUE},
    {48, 2, 300, 1, 1.0f, TRUE},
    {80, 4, 513, 4, 1.0f, TRUE},
  };
  GRand *rand = g_rand_new_with_seed (15);
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    run_case (&cases[i], rand);
  g_rand_free (rand);
}

/* Keys in tiles (npullm's cache): spans that start and end inside a tile,
 * one row, a tile exactly, every head size the kernels treat apart, and
 * tiled spans beside key-row spans in one call (the cache's rows and a
 * batch's own); the tiles' other rows are NaN */
static void
test_tiled (void)
{
  static const Case cases[] = {
    {64, 4, 2100, 5, 30.0f, FALSE, 1},
    {64, 4, 2048, 1, 1.0f, FALSE, 1},
    {64, 4, 1000, 5, 4.0f, FALSE, 2},
    {64, 1, 1, 1, 1.0f, FALSE, 1},
    {64, 2, 16, 1, 1.0f, FALSE, 1},
    {64, 3, 70, 2, 200.0f, FALSE, 1},
    {32, 3, 777, 3, 200.0f, FALSE, 2},
    {48, 2, 300, 1, 1.0f, FALSE, 1},
    {16, 4, 40, 3, 1.0f, FALSE, 1},
    {80, 4, 513, 4, 1.0f, FALSE, 2},
    {20, 5, 100, 3, 1.0f, FALSE, 1},
    {8, 8, 33, 2, 1.0f, FALSE, 1},
  };
  GRand *rand = g_rand_new_with_seed (16);
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    run_case (&cases[i], rand);
  g_rand_free (rand);
}

/* A NaN is not lost: in a key it makes that row's score NaN, and the
 * softmax (a vectorised exp that flushes tiny weights to 0 must not flush
 * it) then every output; in a value it reaches that column of every
 * output (0 * NaN is NaN), or with Q8_0 the columns of its block (the
 * block's scale becomes NaN). */
static void
test_nan_type (NpuKvType type)
{
  guint hd = 64, nq = 2, n = 40, i;
  gsize rb = npu_kv_row_bytes (type, hd);
  float *k = g_new0 (float, n * hd), *v = g_new0 (float, n * hd);
  float *q = g_new0 (float, nq * hd), scores[2 * 40], out[2 * 64];
  guint8 *ks = g_malloc (n * rb), *vs = g_malloc (n * rb);
  NpuAttnSpan span = { q, ks, vs, hd, n, type };

  for (i = 0; i < n * hd; i++) {
    k[i] = (i % 7) * 0.1f;
    v[i] = (i % 5) * 0.2f;
  }
  for (i = 0; i < nq * hd; i++)
    q[i] = (i % 3) * 0.5f;
  k[10 * hd + 3] = NAN;
  for (i = 0; i < n; i++) {
    npu_kv_encode_row (type, k + i * hd, hd, ks + i * rb);
    npu_kv_encode_row (type, v + i * hd, hd, vs + i * rb);
  }
  npu_attention_rows (&span, 1, hd, nq, hd, 0.5f, scores, n, out, hd);
  for (i = 0; i < nq * hd; i++)
    g_assert_true (isnan (out[i]));

  k[10 * hd + 3] = 0.0f;
  v[20 * hd + 37] = NAN;
  for (i = 0; i < n; i++) {
    npu_kv_encode_row (type, k + i * hd, hd, ks + i * rb);
    npu_kv_encode_row (type, v + i * hd, hd, vs + i * rb);
  }
  npu_attention_rows (&span, 1, hd, nq, hd, 0.5f, scores, n, out, hd);
  for (i = 0; i < nq * hd; i++) {
    gboolean in_nan = type == NPU_KV_Q8_0 ? i % hd >= 32 : i % hd == 37;

    g_assert_true (in_nan ? isnan (out[i]) : isfinite (out[i]));
  }
  g_free (k);
  g_free (v);
  g_free (ks);
  g_free (vs);
  g_free (q);
}

static void
test_nan (void)
{
  test_nan_type (NPU_KV_F32);
  test_nan_type (NPU_KV_F16);
  test_nan_type (NPU_KV_Q8_0);
}

/* F32 to F16: every finite half survives the round trip through F32,
 * values halfway between neighbours go to the even one and a hair off
 * the middle to the nearer, overflow is Inf, NaN stays NaN */
static void
test_f16_encode (void)
{
  guint h;

  for (h = 0; h < 0x10000; h++) {
    float f = npu_f16_to_f32 (h);
    guint16 nx = (h & 0x7fff) == 0x7bff ? 0 : h + 1;

    if ((h & 0x7c00) == 0x7c00) {
      g_assert_true (isnan (f) ? isnan (npu_f16_to_f32 (npu_f32_to_f16 (f)))
          : npu_f32_to_f16 (f) == h);
      continue;
    }
    g_assert_cmphex (npu_f32_to_f16 (f), ==, h);
    if (nx && (h & 0x7fff) != 0x7bff && h != 0x8000) {
      /* halfway to the next half up in magnitude (exact in F32) */
      float g = npu_f16_to_f32 (nx), mid = (f + g) / 2;
      guint16 even = (h & 1) ? nx : h;

      g_assert_cmphex (npu_f32_to_f16 (mid), ==, even);
      g_assert_cmphex (npu_f32_to_f16 (nextafterf (mid, f)), ==, h);
      g_assert_cmphex (npu_f32_to_f16 (nextafterf (mid, g)), ==, nx);
    }
  }
  g_assert_cmphex (npu_f32_to_f16 (65519.0f), ==, 0x7bff);
  g_assert_cmphex (npu_f32_to_f16 (65520.0f), ==, 0x7c00);
  g_assert_cmphex (npu_f32_to_f16 (-1e30f), ==, 0xfc00);
  g_assert_cmphex (npu_f32_to_f16 (INFINITY), ==, 0x7c00);
  g_assert_true (isnan (npu_f16_to_f32 (npu_f32_to_f16 (NAN))));
}

/* Q8_0 rows: each value within the bound npukvtype.h states, over blocks
 * from tiny (a scale below F16's normal range) to large */
static void
test_q8_0_encode (void)
{
  static const double mags[] = { 1e-9, 1e-6, 3e-3, 0.5, 1.0, 300.0, 6e4 };
  GRand *rand = g_rand_new_with_seed (13);
  float x[64];
  guint8 row[68];
  guint m, it, j;

  for (m = 0; m < G_N_ELEMENTS (mags); m++) {
    for (it = 0; it < 200; it++) {
      double amax[2] = { 0, 0 };

      for (j = 0; j < 64; j++) {
        x[j] = mags[m] * g_rand_double_range (rand, -1.0, 1.0);
        amax[j / 32] = MAX (amax[j / 32], fabs (x[j]));
      }
      npu_kv_encode_row (NPU_KV_Q8_0, x, 64, row);
      for (j = 0; j < 64; j++) {
        double err = fabs (stored_at (NPU_KV_Q8_0, row, j) - (double) x[j]);
        double bound = storage_error (NPU_KV_Q8_0, amax[j / 32]);

        if (!(err <= bound))
          g_error ("q8_0 value %g (block max %g) stored off by %g > %g",
              x[j], amax[j / 32], err, bound);
        g_assert_true (npu_kv_decode_at (NPU_KV_Q8_0, row, j) ==
            stored_at (NPU_KV_Q8_0, row, j));
      }
    }
  }
  g_rand_free (rand);
}

/* gpt-oss's sinks (npu_attention_rows_sinks()): one more logit per query
 * in the softmax's denominator, with no value, against the double
 * softmax; head sizes of the one-pass kernel (32, 64) and of the two
 * passes (80), sinks far above the scores (the output goes to 0) and far
 * below (no sink), and a span with its own query */
static void
test_sinks (void)
{
  static const guint hds[] = { 32, 64, 80 };
  static const guint nqs[] = { 1, 3, 4, 6 };
  static const guint rows[] = { 1, 17, 100 };
  GRand *rand = g_rand_new_with_seed (27);
  guint a, b, c, i, j, d;

  for (a = 0; a < G_N_ELEMENTS (hds); a++)
    for (b = 0; b < G_N_ELEMENTS (nqs); b++)
      for (c = 0; c < G_N_ELEMENTS (rows); c++) {
        guint hd = hds[a], nq = nqs[b], n = rows[c];
        float *k = g_new (float, n * hd), *v = g_new (float, n * hd);
        float *q = g_new (float, nq * hd), *out = g_new (float, nq * hd);
        float *scores = g_new (float, nq * n), *sinks = g_new (float, nq);
        NpuAttnSpan sp[2];
        float scale = 1.0f / sqrtf ((float) hd);
        guint n0 = n / 2;

        for (j = 0; j < n * hd; j++) {
          k[j] = g_rand_double_range (rand, -1, 1);
          v[j] = g_rand_double_range (rand, -1, 1);
        }
        for (j = 0; j < nq * hd; j++)
          q[j] = 3.0 * g_rand_double_range (rand, -1, 1);
        for (i = 0; i < nq; i++)
          sinks[i] = i == 1 ? 40.0f : i == 2 ? -80.0f :
              g_rand_double_range (rand, -3, 3);
        /* rows [0, n0) and [n0, n) as two spans of the same query */
        memset (sp, 0, sizeof (sp));
        sp[0] = (NpuAttnSpan) {
        q, k, v, hd, n0, NPU_KV_F32, FALSE, 0};
        sp[1] = (NpuAttnSpan) {
        q, k + n0 * hd, v + n0 * hd, hd, n - n0, NPU_KV_F32, FALSE, 0};
        npu_attention_rows_sinks (n0 ? sp : sp + 1, n0 ? 2 : 1, hd, nq, hd,
            scale, sinks, scores, n, out, hd);
        for (i = 0; i < nq; i++) {
          double *s = g_new (double, n), mx = sinks[i], sum = 0, err = 0;

          for (j = 0; j < n; j++) {
            double dot = 0;

            for (d = 0; d < hd; d++)
              dot += (double) q[i * hd + d] * k[j * hd + d];
            s[j] = dot * scale;
            mx = MAX (mx, s[j]);
          }
          for (j = 0; j < n; j++)
            sum += (s[j] = exp (s[j] - mx));
          sum += exp (sinks[i] - mx);
          for (d = 0; d < hd; d++) {
            double o = 0;

            for (j = 0; j < n; j++)
              o += s[j] / sum * v[j * hd + d];
            err = MAX (err, fabs (o - out[i * hd + d]));
          }
          if (!(err <= 2e-5))
            g_error ("sinks: hd %u nq %u rows %u: query %u (sink %g) off "
                "by %g", hd, nq, n, i, sinks[i], err);
          g_free (s);
        }
        g_free (k);
        g_free (v);
        g_free (q);
        g_free (out);
        g_free (scores);
        g_free (sinks);
      }
  g_rand_free (rand);
}

/* The copy the current cap must pick: x86's by level (the avx512 level
 * includes VNNI and VBMI); on aarch64 the neon copy wherever Advanced
 * SIMD is left usable, whatever the level (a Cortex-A72 has no dot
 * product, so its level is scalar, and runs the neon copy), so that the
 * tests above are known to have run the copy they are meant for */
static void
test_copy (void)
{
  const gchar *want = "generic";

#if defined(__aarch64__)
  if (npu_cpu_has (NPU_CPU_NEON))
    want = "neon";
#else
  switch (npu_cpu_get_isa ()) {
    case NPU_CPU_ISA_AVX2:
      want = "avx2";
      break;
    case NPU_CPU_ISA_AVX512:
      want = "avx512vnni";
      break;
    default:
      break;
  }
#endif
  g_test_message ("attention copy: %s", npu_attention_copy_name ());
  g_assert_cmpstr (npu_attention_copy_name (), ==, want);
}

/* The tests each lesser level's copy of the kernels runs */
static void
test_at_one_level (void)
{
  test_copy ();
  test_sinks ();
  test_shapes ();
  test_packed ();
  test_tiled ();
  test_nan ();
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
  g_test_add_func ("/attention/copy", test_copy);
  g_test_add_func ("/attention/shapes", test_shapes);
  g_test_add_func ("/attention/spread", test_spread);
  g_test_add_func ("/attention/long", test_long);
  g_test_add_func ("/attention/packed", test_packed);
  g_test_add_func ("/attention/tiled", test_tiled);
  g_test_add_func ("/attention/nan", test_nan);
  g_test_add_func ("/attention/sinks", test_sinks);
  g_test_add_func ("/attention/f16-encode", test_f16_encode);
  g_test_add_func ("/attention/q8_0-encode", test_q8_0_encode);
  g_test_add_func ("/attention/lesser-isas", test_lesser_isas);
  return g_test_run ();
}
