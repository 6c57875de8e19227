/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: how many row streams a one-token GEMV reads, chosen by
 * measurement on the machine (see npugemvstreams.h) */
#include "npugemvstreams.h"

#include <string.h>

static const guint candidates[] = { 1, 2, 4, 8 };

#define N_CANDIDATES G_N_ELEMENTS (candidates)
/* Thread counts measured apart: 1 .. MAX_SLOT - 1, and MAX_SLOT for more */
#define MAX_SLOT 8
/* Before the choice, GEMVs too short to time take the Xeon-measured
 * counts (8 streams on one thread, 4 each on more) */
#define DEFAULT_ONE_THREAD 8
#define DEFAULT_SEVERAL 4

typedef struct
{
  gint chosen;                  /* atomic: 0 until decided */
  guint next;
  guint trials[N_CANDIDATES];
  guint64 bytes[N_CANDIDATES];
  gint64 us[N_CANDIDATES];
} Tuner;

static GMutex lock;
static Tuner tuners[MAX_SLOT + 1];

static guint
slot_of (guint n_threads)
{
  return CLAMP (n_threads, 1, MAX_SLOT);
}

void
npu_gemv_streams_begin (NpuGemvStreamsTrial * trial, guint n_threads,
    gsize weight_bytes)
{
  Tuner *t;

  trial->slot = slot_of (n_threads);
  trial->bytes = weight_bytes;
  trial->candidate = G_MAXUINT;
  t = &tuners[trial->slot];
  /* once chosen, every GEMV of the process reads it without the lock */
  trial->streams = g_atomic_int_get (&t->chosen);
  if (trial->streams)
    return;
  g_mutex_lock (&lock);
  if (t->chosen) {
    trial->streams = t->chosen;
  } else if (weight_bytes < NPU_GEMV_STREAMS_MIN_BYTES) {
    trial->streams = n_threads > 1 ? DEFAULT_SEVERAL : DEFAULT_ONE_THREAD;
  } else {
    trial->candidate = t->next++ % N_CANDIDATES;
    trial->streams = candidates[trial->candidate];
  }
  g_mutex_unlock (&lock);
  trial->start = trial->candidate == G_MAXUINT ? 0 : g_get_monotonic_time ();
}

/* The candidate that read the most bytes a second, once each has run its
 * trials; 0 before */
static guint
decide (const Tuner * t)
{
  guint c, best = 0;

  for (c = 0; c < N_CANDIDATES; c++)
    if (t->trials[c] < NPU_GEMV_STREAMS_TRIALS || t->us[c] <= 0)
      return 0;
  for (c = 1; c < N_CANDIDATES; c++)
    if ((gdouble) t->bytes[c] / t->us[c] > (gdouble) t->bytes[best] /
        t->us[best])
      best = c;
  return candidates[best];
}

void
npu_gemv_streams_end (NpuGemvStreamsTrial * trial)
{
  gint64 us;
  Tuner *t;

  if (trial->candidate == G_MAXUINT)
    return;
  us = g_get_monotonic_time () - trial->start;
  g_mutex_lock (&lock);
  t = &tuners[trial->slot];
  if (!t->chosen) {
    t->trials[trial->candidate]++;
    t->bytes[trial->candidate] += trial->bytes;
    t->us[trial->candidate] += us;
    g_atomic_int_set (&t->chosen, decide (t));
  }
  g_mutex_unlock (&lock);
}

guint
npu_gemv_streams_get_chosen (guint n_threads)
{
  guint chosen;

  chosen = g_atomic_int_get (&tuners[slot_of (n_threads)].chosen);
  return chosen;
}

void
npu_gemv_streams_reset (void)
{
  g_mutex_lock (&lock);
  memset (tuners, 0, sizeof (tuners));
  g_mutex_unlock (&lock);
}
