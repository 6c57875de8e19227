/* gst-npu: softmax attention of one query row
 *
 * Written with GCC's vector extensions, sixteen floats to a vector, and
 * compiled once per x86 ISA level (the run-time linker picks the clone for
 * the CPU): one zmm per vector with AVX-512, two ymm with AVX2, four xmm
 * otherwise or on NEON.  Auto-vectorising the plain loops gave scalar
 * code for the dot products and kept the output in memory.
 */
#include "npuattention.h"

#include <math.h>
#include <string.h>

typedef float v16sf __attribute__ ((vector_size (64)));

/* The 64-byte vectors only pass between static inline functions of this
 * file, never across an ABI boundary, so GCC's note that their calling
 * convention differs with and without AVX-512 does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__)
#define ISA_CLONES __attribute__ ((target_clones ("avx512f", "avx2", \
        "default")))
#else
#define ISA_CLONES
#endif

static inline __attribute__ ((always_inline)) v16sf
load16 (const float *p)
{
  v16sf v;

  memcpy (&v, p, sizeof (v));
  return v;
}

static inline __attribute__ ((always_inline)) void
store16 (float *p, v16sf v)
{
  memcpy (p, &v, sizeof (v));
}

static inline float
dot (const float *a, const float *b, guint n)
{
  v16sf acc = { 0, };
  float s = 0.0f;
  guint i;

  for (i = 0; i + 16 <= n; i += 16)
    acc += load16 (a + i) * load16 (b + i);
  for (; i < n; i++)
    s += a[i] * b[i];
  for (i = 0; i < 16; i++)
    s += acc[i];
  return s;
}

ISA_CLONES void
npu_attention_row (const NpuAttnSpan * spans, guint n_spans, guint hd,
    float scale, float *scores, float *out)
{
  const guint hv = hd / 16 * 16;
  float mx = -INFINITY, sum = 0.0f, inv;
  guint s, r, j, m = 0, d0, d;

  for (s = 0; s < n_spans; s++) {
    const NpuAttnSpan *sp = &spans[s];

    for (r = 0; r < sp->n; r++, m++) {
      scores[m] = dot (sp->q, sp->k + r * sp->stride, hd) * scale;
      mx = MAX (mx, scores[m]);
    }
  }
  for (j = 0; j < m; j++) {
    scores[j] = expf (scores[j] - mx);
    sum += scores[j];
  }
  inv = 1.0f / sum;

  /* Values: 64 dimensions at a time, in four vector accumulators that
   * stay in registers over every row */
  for (d0 = 0; d0 < hv; d0 += 64) {
    guint w = MIN (64, hv - d0);
    v16sf a0 = { 0, }, a1 = a0, a2 = a0, a3 = a0;

    j = 0;
    for (s = 0; s < n_spans; s++) {
      const NpuAttnSpan *sp = &spans[s];
      const float *v = sp->v + d0;

      for (r = 0; r < sp->n; r++, j++, v += sp->stride) {
        float p = scores[j];

        a0 += p * load16 (v);
        if (w > 16)
          a1 += p * load16 (v + 16);
        if (w > 32)
          a2 += p * load16 (v + 32);
        if (w > 48)
          a3 += p * load16 (v + 48);
      }
    }
    store16 (out + d0, a0 * inv);
    if (w > 16)
      store16 (out + d0 + 16, a1 * inv);
    if (w > 32)
      store16 (out + d0 + 32, a2 * inv);
    if (w > 48)
      store16 (out + d0 + 48, a3 * inv);
  }
  for (d = hv; d < hd; d++) {
    float o = 0.0f;

    j = 0;
    for (s = 0; s < n_spans; s++)
      for (r = 0; r < spans[s].n; r++, j++)
        o += scores[j] * spans[s].v[r * spans[s].stride + d];
    out[d] = o * inv;
  }
}
