/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: does the page size of the weights' memory limit decode's reads?
 *
 * Decode reads its repacked matrices from anonymous memory on transparent
 * huge pages and the logits matrix in place from the model's file mapping
 * (4 KiB pages, or partly PMD-mapped where the page cache holds large
 * folios), while bench-llm's read limit is probed on a buffer of its own on
 * huge pages.  This reads four buffers of the logits matrix's size with
 * bench-llm's access pattern (n streams a thread, 128 bytes of each in
 * turn, optionally a software prefetch 2 KiB ahead) and prints their GB/s
 * side by side:
 *
 *   anon-huge   anonymous, 2 MiB-aligned, MADV_HUGEPAGE (the probe's kind)
 *   anon-4k     anonymous, MADV_NOHUGEPAGE
 *   file        the logits matrix in place in the file mapping
 *   copy-huge   a copy of it on huge pages
 *
 * The L3 of a server can hold a whole matrix, so every timed read follows
 * an untimed read of 640 MiB of other memory: each comes from DRAM, as in
 * decode, which reads every weight once a token.  The four are alternated
 * read by read; each round prints the best of --reads reads of each.  The
 * smaps lines show what the kernel actually backed each buffer with (for
 * the file, the matrix's whole 2 MiB pages, split off as a mapping of
 * their own).
 *
 * Usage: bench-pages model.gguf [--threads N] [--streams N] [--prefetch]
 *   [--rounds N] [--reads N]
 */
#include <core/formats/npugguf.h>
#include "tests/bench/npureadstreams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((gsize) 2 << 20)
#define EVICT_BYTES ((gsize) 640 << 20)
#define PF_DISTANCE 2048        /* the one-token GEMV's, npumatmul-avx512.c */
#define MAX_THREADS 16
#define MAX_STREAMS 16

static volatile guint64 read_sink;
static guint n_streams = 8;
static gboolean prefetch;

typedef struct
{
  const guint8 *data;
  gsize size;
} Part;

/* One thread's part as n_streams interleaved streams (bench-llm's probe) */
static gpointer
read_part (gpointer user_data)
{
  const Part *p = user_data;

  read_sink += npu_read_streams (p->data, p->size / n_streams & ~(gsize) 127,
      n_streams, prefetch ? PF_DISTANCE : 0);
  return NULL;
}

/* GB/s of one read of @size bytes at @data on @n_threads threads */
static double
read_rate (const guint8 * data, gsize size, guint n_threads)
{
  GThread *threads[MAX_THREADS];
  Part parts[MAX_THREADS];
  gsize part = size / n_threads & ~(gsize) 4095;
  gint64 t0 = g_get_monotonic_time ();
  guint t;

  for (t = 0; t < n_threads; t++) {
    parts[t].data = data + t * part;
    parts[t].size = part;
    threads[t] = g_thread_new ("read", read_part, &parts[t]);
  }
  for (t = 0; t < n_threads; t++)
    g_thread_join (threads[t]);
  return (double) part * n_threads / (g_get_monotonic_time () - t0) / 1e3;
}

/* Anonymous, 2 MiB-aligned, advised for or against huge pages, filled */
static guint8 *
anon_buffer (gsize size, gboolean huge)
{
  guint8 *base, *mem;

  base = mmap (NULL, size + HUGE_PAGE, PROT_READ | PROT_WRITE,
      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    g_error ("out of memory");
  mem = (guint8 *) (((guintptr) base + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
  madvise (mem, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  memset (mem, 1, size);
  return mem;
}

/* The smaps lines that say how the mapping holding @addr is backed */
static void
print_backing (const gchar * what, gconstpointer addr)
{
  gchar *smaps = NULL, **lines, **l;
  gboolean inside = FALSE;

  if (!g_file_get_contents ("/proc/self/smaps", &smaps, NULL, NULL))
    return;
  lines = g_strsplit (smaps, "\n", -1);
  for (l = lines; *l; l++) {
    guint64 lo, hi, kib;
    gchar field[32];

    /* a mapping's header starts "lo-hi "; no field line parses so */
    if (sscanf (*l, "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x",
            &lo, &hi) == 2) {
      inside = (guintptr) addr >= lo && (guintptr) addr < hi;
      if (inside)
        printf ("%-10s mapping of %" G_GUINT64_FORMAT " KiB:", what,
            (hi - lo) >> 10);
    } else if (inside && sscanf (*l, "%31s %" G_GUINT64_FORMAT, field,
            &kib) == 2 && (!strcmp (field, "Rss:")
            || !strcmp (field, "AnonHugePages:")
            || !strcmp (field, "FilePmdMapped:"))) {
      printf (" %s %" G_GUINT64_FORMAT " KiB", field, kib);
      if (!strcmp (field, "FilePmdMapped:"))
        printf ("\n");
    }
  }
  g_strfreev (lines);
  g_free (smaps);
}

int
main (int argc, char **argv)
{
  guint n_threads = 2, rounds = 5, reads = 5, r, k, b;
  const gchar *path = NULL;
  const NpuGgufTensor *t;
  NpuGguf *gguf;
  GError *err = NULL;
  const guint8 *buf[4];
  const gchar *names[4] = { "anon-huge", "anon-4k", "file", "copy-huge" };
  guint8 *evict, *copy;
  gsize size, i;
  guint64 touch = 0;
  gint a;

  for (a = 1; a < argc; a++) {
    /* the option's value, if it has one (CLAMP and MAX evaluate twice) */
    gint v = a + 1 < argc ? atoi (argv[a + 1]) : 0;

    if (!strcmp (argv[a], "--threads") && a + 1 < argc && ++a)
      n_threads = CLAMP (v, 1, MAX_THREADS);
    else if (!strcmp (argv[a], "--streams") && a + 1 < argc && ++a)
      n_streams = CLAMP (v, 1, MAX_STREAMS);
    else if (!strcmp (argv[a], "--prefetch"))
      prefetch = TRUE;
    else if (!strcmp (argv[a], "--rounds") && a + 1 < argc && ++a)
      rounds = MAX (v, 1);
    else if (!strcmp (argv[a], "--reads") && a + 1 < argc && ++a)
      reads = MAX (v, 1);
    else if (argv[a][0] != '-' && !path)
      path = argv[a];
    else {
      fprintf (stderr, "usage: %s model.gguf [--threads N] [--streams N] "
          "[--prefetch] [--rounds N] [--reads N]\n", argv[0]);
      return 2;
    }
  }
  if (!path) {
    fprintf (stderr, "usage: %s model.gguf [options]\n", argv[0]);
    return 2;
  }
  if (!(gguf = npu_gguf_open (path, &err))) {
    fprintf (stderr, "%s\n", err->message);
    return 1;
  }
  /* the logits matrix: output.weight, or the tied embedding */
  t = npu_gguf_find_tensor (gguf, "output.weight");
  if (!t)
    t = npu_gguf_find_tensor (gguf, "token_embd.weight");
  if (!t) {
    fprintf (stderr, "%s: no output.weight or token_embd.weight\n", path);
    return 1;
  }
  size = t->n_bytes & ~(gsize) 4095;
  /* fault the whole file in, as loading and a first token do */
  for (i = 0; i < npu_gguf_get_size (gguf); i += 4096)
    touch += npu_gguf_get_base (gguf)[i];
  read_sink = touch;

  /* a mapping of its own for the matrix's whole huge pages (a flag that
   * only steers readahead splits it off), so that smaps shows how they
   * are backed */
  {
    guintptr lo = ((guintptr) t->data + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    guintptr hi = ((guintptr) t->data + size) & ~(HUGE_PAGE - 1);

    if (hi > lo)
      madvise ((gpointer) lo, hi - lo, MADV_RANDOM);
  }
  buf[0] = anon_buffer (size, TRUE);
  buf[1] = anon_buffer (size, FALSE);
  buf[2] = t->data;
  copy = anon_buffer (size, TRUE);
  memcpy (copy, t->data, size);
  buf[3] = copy;
  evict = anon_buffer (EVICT_BYTES, TRUE);

  printf ("%s: %s, %s, %.1f MiB\n", path, t->name,
      npu_ggml_type_name (t->type), size / 1048576.0);
  for (b = 0; b < 4; b++)
    print_backing (names[b], b == 2 ? (gconstpointer) (((guintptr) buf[b]
                + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)) : buf[b]);
  printf ("%u threads, %u streams a thread, %s; GB/s, best of %u reads "
      "each from DRAM\n", n_threads, n_streams,
      prefetch ? "prefetch 2 KiB ahead" : "no prefetch", reads);
  printf ("round  anon-huge  anon-4k     file  copy-huge   4k/huge  "
      "file/copy\n");
  for (r = 0; r < rounds; r++) {
    double best[4] = { 0, 0, 0, 0 };

    for (k = 0; k < reads; k++)
      for (b = 0; b < 4; b++) {
        double g;

        read_rate (evict, EVICT_BYTES, n_threads);
        g = read_rate (buf[b], size, n_threads);
        best[b] = MAX (best[b], g);
      }
    printf ("%5u  %9.2f  %7.2f  %7.2f  %9.2f   %7.3f  %9.3f\n", r, best[0],
        best[1], best[2], best[3], best[1] / best[0], best[2] / best[3]);
  }
  npu_gguf_free (gguf);
  return 0;
}
