/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: token sampling for npullm
 *
 * llama.cpp's default chain and semantics: repetition penalty, top-k,
 * top-p, min-p on the untempered distribution, then temperature and a draw
 * (so top-p and min-p select the same tokens whatever the temperature).
 * Every buffer is allocated by npu_llm_sampler_new(); sampling a token does
 * not allocate, which matters for a stream that runs for days.
 *
 * The PRNG is our own xoshiro256** seeded through splitmix64, so a seed
 * gives the same tokens on every machine and GLib version.
 */
#include "npullm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct
{
  float logit;
  gint32 id;
} Cand;

struct _NpuLlmSampler
{
  NpuLlmSamplerParams p;
  guint n_vocab;
  guint64 s[4];

  Cand *cand;                   /* n_vocab */
  float *work;                  /* n_vocab: penalised logits */
  guint32 *stamp;               /* n_vocab: penalised in this call? */
  guint32 cur_stamp;
  gint32 *hist;                 /* repeat_last_n, a ring */
  guint hist_len, hist_head;
};

void
npu_llm_sampler_params_init (NpuLlmSamplerParams * params)
{
  params->temperature = 0.8f;
  params->top_k = 40;
  params->top_p = 0.95f;
  params->min_p = 0.05f;
  params->repeat_penalty = 1.0f;
  params->repeat_last_n = 64;
  params->seed = 0;
}

static guint64
splitmix64 (guint64 * x)
{
  guint64 z = (*x += G_GUINT64_CONSTANT (0x9e3779b97f4a7c15));

  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static inline guint64
rotl (guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

static guint64
xoshiro_next (guint64 * s)
{
  guint64 result = rotl (s[1] * 5, 7) * 9, t = s[1] << 17;

  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl (s[3], 45);
  return result;
}

/* Uniform in [0, 1) with 53 random bits */
static double
uniform (NpuLlmSampler * smp)
{
  return (xoshiro_next (smp->s) >> 11) * (1.0 / 9007199254740992.0);
}

static void
seed_prng (NpuLlmSampler * smp)
{
  guint64 x = smp->p.seed;
  guint i;

  for (i = 0; i < 4; i++)
    smp->s[i] = splitmix64 (&x);
}

NpuLlmSampler *
npu_llm_sampler_new (const NpuLlmSamplerParams * params, guint n_vocab,
    GError ** error)
{
  NpuLlmSamplerParams p;
  NpuLlmSampler *smp;

  if (params)
    p = *params;
  else
    npu_llm_sampler_params_init (&p);

  if (n_vocab == 0 || n_vocab > G_MAXINT32) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "vocabulary size %u out of range", n_vocab);
    return NULL;
  }
  if (!(p.temperature >= 0.0f) || !isfinite (p.temperature)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "temperature %g: must be finite and >= 0 (0 = greedy)", p.temperature);
    return NULL;
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "top-p %g: must be in (0, 1] (1 = off)", p.top_p);
    return NULL;
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "min-p %g: must be in [0, 1] (0 = off)", p.min_p);
    return NULL;
  }
  if (!(p.repeat_penalty > 0.0f) || !isfinite (p.repeat_penalty)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "repeat penalty %g: must be finite and > 0 (1 = off)",
        p.repeat_penalty);
    return NULL;
  }
  if (p.repeat_last_n > (1u << 20)) {
    g_set_error (error, NPU_LLM_ERROR, NPU_LLM_ERROR_INVALID,
        "repeat-last-n %u: at most 1048576", p.repeat_last_n);
    return NULL;
  }

  smp = g_new0 (NpuLlmSampler, 1);
  smp->p = p;
  smp->n_vocab = n_vocab;
  smp->cand = g_new (Cand, n_vocab);
  smp->work = g_new (float, n_vocab);
  smp->stamp = g_new0 (guint32, n_vocab);
  smp->hist = g_new0 (gint32, MAX (p.repeat_last_n, 1));
  seed_prng (smp);
  return smp;
}

void
npu_llm_sampler_free (NpuLlmSampler * smp)
{
  if (!smp)
    return;
  g_free (smp->cand);
  g_free (smp->work);
  g_free (smp->stamp);
  g_free (smp->hist);
  g_free (smp);
}

void
npu_llm_sampler_reset (NpuLlmSampler * smp)
{
  smp->hist_len = 0;
  smp->hist_head = 0;
  seed_prng (smp);
}

void
npu_llm_sampler_accept (NpuLlmSampler * smp, gint32 token)
{
  guint n = smp->p.repeat_last_n;

  if (n == 0)
    return;
  smp->hist[smp->hist_head] = token;
  smp->hist_head = (smp->hist_head + 1) % n;
  if (smp->hist_len < n)
    smp->hist_len++;
}

/* Candidate order: larger logit first, lower id on ties, so every sort and
 * selection is deterministic */
static inline gboolean
cand_before (const Cand * a, const Cand * b)
{
  return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int
cand_cmp (const void *pa, const void *pb)
{
  const Cand *a = pa, *b = pb;

  if (cand_before (a, b))
    return -1;
  if (cand_before (b, a))
    return 1;
  return 0;
}

/* Move the k first candidates (in cand_before order) to c[0..k), any
 * order: quickselect, median-of-three pivot */
static void
select_top (Cand * c, gsize n, gsize k)
{
  gsize lo = 0, hi = n;

  while (hi - lo > 1) {
    gsize mid = lo + (hi - lo) / 2, i, store;
    Cand pivot, t;

    /* median of lo, mid, hi - 1 to the end */
    if (cand_before (&c[mid], &c[lo])) {
      t = c[mid];
      c[mid] = c[lo];
      c[lo] = t;
    }
    if (cand_before (&c[hi - 1], &c[lo])) {
      t = c[hi - 1];
      c[hi - 1] = c[lo];
      c[lo] = t;
    }
    if (cand_before (&c[hi - 1], &c[mid])) {
      t = c[hi - 1];
      c[hi - 1] = c[mid];
      c[mid] = t;
    }
    t = c[mid];
    c[mid] = c[hi - 1];
    c[hi - 1] = t;
    pivot = c[hi - 1];
    store = lo;
    for (i = lo; i < hi - 1; i++) {
      if (cand_before (&c[i], &pivot)) {
        t = c[i];
        c[i] = c[store];
        c[store] = t;
        store++;
      }
    }
    c[hi - 1] = c[store];
    c[store] = pivot;
    if (store == k || store + 1 == k)
      return;
    if (store > k)
      hi = store;
    else
      lo = store + 1;
  }
}

gint32
npu_llm_sampler_sample (NpuLlmSampler * smp, const float *logits)
{
  const NpuLlmSamplerParams *p = &smp->p;
  guint V = smp->n_vocab, i;
  gsize n, keep;
  float *l = smp->work;
  double sum, cum, u, max_l;

  memcpy (l, logits, V * sizeof (float));

  /* Repetition penalty: once per distinct token of the history */
  if (p->repeat_penalty != 1.0f && smp->hist_len > 0) {
    if (++smp->cur_stamp == 0) {
      memset (smp->stamp, 0, V * sizeof (guint32));
      smp->cur_stamp = 1;
    }
    for (i = 0; i < smp->hist_len; i++) {
      gint32 t = smp->hist[i];

      if (t < 0 || (guint) t >= V || smp->stamp[t] == smp->cur_stamp)
        continue;
      smp->stamp[t] = smp->cur_stamp;
      if (l[t] > 0.0f)
        l[t] /= p->repeat_penalty;
      else
        l[t] *= p->repeat_penalty;
    }
  }

  if (p->temperature == 0.0f) {
    guint best = 0;

    for (i = 1; i < V; i++)
      if (l[i] > l[best])
        best = i;
    return (gint32) best;
  }

  for (i = 0; i < V; i++) {
    smp->cand[i].logit = l[i];
    smp->cand[i].id = (gint32) i;
  }
  n = V;

  if (p->top_k > 0 && p->top_k < V) {
    select_top (smp->cand, n, p->top_k);
    n = p->top_k;
  }
  if (p->top_p < 1.0f) {
    qsort (smp->cand, n, sizeof (Cand), cand_cmp);
  }

  max_l = -INFINITY;
  for (i = 0; i < n; i++)
    max_l = MAX (max_l, smp->cand[i].logit);

  if (p->top_p < 1.0f) {
    /* the smallest prefix whose probability reaches top_p (at least 1) */
    sum = 0.0;
    for (i = 0; i < n; i++)
      sum += exp (smp->cand[i].logit - max_l);
    cum = 0.0;
    for (keep = 0; keep < n;) {
      cum += exp (smp->cand[keep].logit - max_l) / sum;
      keep++;
      if (cum >= p->top_p)
        break;
    }
    n = keep;
  }

  if (p->min_p > 0.0f) {
    /* p_i >= min_p * p_max  <=>  logit_i >= max + log (min_p) */
    double thr = max_l + log (p->min_p);
    gsize j = 0;

    for (i = 0; i < n; i++)
      if (smp->cand[i].logit >= thr)
        smp->cand[j++] = smp->cand[i];
    n = j;                      /* the maximum always passes */
  }

  /* Temperature, then a draw by inverse CDF */
  sum = 0.0;
  for (i = 0; i < n; i++)
    sum += exp ((smp->cand[i].logit - max_l) / p->temperature);
  u = uniform (smp) * sum;
  cum = 0.0;
  for (i = 0; i + 1 < n; i++) {
    cum += exp ((smp->cand[i].logit - max_l) / p->temperature);
    if (u < cum)
      break;
  }
  return smp->cand[i].id;
}
