/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: soak run of the live caption pipeline
 *
 * Runs, for a given time, a live camera (videotestsrc is-live=true, the
 * moving ball) and a live microphone (audiotestsrc is-live=true) into
 * npuvisiontok, npuaudiotok and npullm on the trained models of
 * tests/models/, with the same prompt every answer so that npullm reuses
 * the prompt prefix's cache rows.  Every --interval seconds it prints the
 * process's resident memory, its open file descriptors, npullm's KV cache
 * occupancy (from the npullm-stats message: the rows the last answer
 * used, out of context-length), the prompt rows reused, and the answers
 * and their latency (the running time an answer reached the sink less the
 * PTS of the media it answers) as p50/p90/p99 over the interval.
 *
 * It fails (exit 1) when, after the warm-up, the resident memory grows more
 * than --rss-bound-kib or the descriptors more than --fd-bound over the
 * first sample after the warm-up, when no answer comes for --stall
 * seconds, when the pipeline posts an error, or when no answer reused the
 * prompt prefix.
 *
 * Usage: npu-soak [--duration S (60)] [--interval S (60)] [--warmup S (10)]
 *                 [--n-threads N (1)] [--models DIR (tests/models)]
 *                 [--rss-bound-kib K (4096)] [--fd-bound N (8)]
 *                 [--stall S (10)] [--context-length N (512)] [--no-audio]
 *
 * The descriptors in use change with the work in flight (a fence is an
 * eventfd while its task runs, pooled frames come and go), so a sample
 * may catch a few more than the last: --fd-bound allows 8.  A leak of one
 * a frame or answer passes any bound within seconds.  An answer about an
 * audio chunk comes at least the chunk's 1 s after its PTS, which is in
 * its latency: the p50 and p90 are the frames', the p99 the sounds'.
 */
#include <gst/gst.h>
#include <gst/app/gstappsink.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct
{
  gint duration, interval, warmup, n_threads, rss_bound_kib, fd_bound, stall;
  gint context_length;
  gboolean audio;
  const gchar *models;
} Options;

typedef struct
{
  Options opt;
  GstElement *pipeline, *llm;
  GMainLoop *loop;
  gint64 t_start;               /* monotonic, µs */
  gint64 next_report;           /* s since the start */
  gint exit_code;

  GMutex lock;                  /* the answers, from the streaming thread */
  GArray *latencies_ms;         /* this interval's, gdouble */
  guint64 n_answers;
  gint64 t_last_answer;         /* monotonic, µs */

  /* the last npullm-stats, from the main thread's bus watch */
  guint kv_rows, context_length, reused, max_reused;

  /* the first sample after the warm-up */
  gboolean have_base;
  glong base_rss_kib, max_rss_kib;
  gint base_fds, max_fds;
  gint interval_min_fds;        /* the fewest open fds of this interval */
} Soak;

static glong
rss_kib (void)
{
  glong pages = 0, resident = 0;
  FILE *f = fopen ("/proc/self/statm", "r");

  if (!f)
    return -1;
  if (fscanf (f, "%ld %ld", &pages, &resident) != 2)
    resident = -1;
  fclose (f);
  return resident < 0 ? -1 : resident * (sysconf (_SC_PAGESIZE) / 1024);
}

static gint
open_fds (void)
{
  DIR *d = opendir ("/proc/self/fd");
  struct dirent *e;
  gint n = 0;

  if (!d)
    return -1;
  while ((e = readdir (d)))
    if (e->d_name[0] != '.')
      n++;
  closedir (d);
  /* less the descriptor opendir() itself holds */
  return n - 1;
}

static gint
cmp_double (gconstpointer a, gconstpointer b)
{
  gdouble x = *(const gdouble *) a, y = *(const gdouble *) b;

  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of the sorted @v. */
static gdouble
percentile (const GArray * v, gdouble p)
{
  guint rank;

  if (v->len == 0)
    return 0;
  rank = (guint) (p / 100.0 * v->len + 0.999999);
  rank = CLAMP (rank, 1, v->len);
  return g_array_index (v, gdouble, rank - 1);
}

static GstFlowReturn
on_answer (GstAppSink * sink, gpointer user_data)
{
  Soak *s = user_data;
  GstSample *sample = gst_app_sink_pull_sample (sink);
  GstBuffer *buf;
  GstClockTime now;
  gdouble ms = -1;

  if (!sample)
    return GST_FLOW_EOS;
  buf = gst_sample_get_buffer (sample);
  now = gst_element_get_current_running_time (s->pipeline);
  if (buf && GST_BUFFER_PTS_IS_VALID (buf) && GST_CLOCK_TIME_IS_VALID (now)
      && now >= GST_BUFFER_PTS (buf))
    ms = (now - GST_BUFFER_PTS (buf)) / 1e6;
  g_mutex_lock (&s->lock);
  s->n_answers++;
  s->t_last_answer = g_get_monotonic_time ();
  if (ms >= 0)
    g_array_append_val (s->latencies_ms, ms);
  g_mutex_unlock (&s->lock);
  gst_sample_unref (sample);
  return GST_FLOW_OK;
}

static void
read_stats (Soak * s, const GstStructure * st)
{
  guint prompt = 0, generated = 0, context = 0, reused = 0;

  /* a message that counts media only (the shutdown's) has no answer */
  if (!gst_structure_has_field (st, "generated-tokens"))
    return;
  gst_structure_get_uint (st, "prompt-tokens", &prompt);
  gst_structure_get_uint (st, "generated-tokens", &generated);
  gst_structure_get_uint (st, "context-tokens", &context);
  gst_structure_get_uint (st, "reused-tokens", &reused);
  /* the cache rows the answer occupied: the kept conversation (none
   * here), the prompt with its media rows, and the answer */
  s->kv_rows = context + prompt + generated;
  s->reused = reused;
  s->max_reused = MAX (s->max_reused, reused);
}

static gboolean
on_message (GstBus * bus, GstMessage * msg, gpointer user_data)
{
  Soak *s = user_data;
  GError *err = NULL;
  gchar *dbg = NULL;

  switch (GST_MESSAGE_TYPE (msg)) {
    case GST_MESSAGE_ELEMENT:
      if (gst_message_has_name (msg, "npullm-stats"))
        read_stats (s, gst_message_get_structure (msg));
      break;
    case GST_MESSAGE_ERROR:
      gst_message_parse_error (msg, &err, &dbg);
      g_printerr ("soak: FAIL: error from %s: %s (%s)\n",
          GST_OBJECT_NAME (GST_MESSAGE_SRC (msg)), err->message,
          dbg ? dbg : "");
      g_clear_error (&err);
      g_free (dbg);
      s->exit_code = 1;
      g_main_loop_quit (s->loop);
      break;
    case GST_MESSAGE_EOS:
      g_printerr ("soak: FAIL: the live pipeline ended\n");
      s->exit_code = 1;
      g_main_loop_quit (s->loop);
      break;
    default:
      break;
  }
  return G_SOURCE_CONTINUE;
}

/* RSS, and the fewest fds of the interval, against the first report after
 * the warm-up.  The fewest, not the last: the fds in use rise with the
 * work in flight (a fence is an eventfd while its task runs, a token
 * buffer's memory an fd until npullm lets it go), and a loaded machine
 * keeps more in flight for a while; a leak raises the fewest too. */
static void
check_growth (Soak * s, gint64 elapsed, glong rss, gint fds)
{
  if (elapsed < s->opt.warmup)
    return;
  if (!s->have_base) {
    s->have_base = TRUE;
    s->base_rss_kib = s->max_rss_kib = rss;
    s->base_fds = s->max_fds = fds;
    return;
  }
  s->max_rss_kib = MAX (s->max_rss_kib, rss);
  s->max_fds = MAX (s->max_fds, fds);
  if (rss - s->base_rss_kib > s->opt.rss_bound_kib) {
    g_printerr ("soak: FAIL: RSS grew %ld KiB since the warm-up "
        "(bound %d KiB)\n", rss - s->base_rss_kib, s->opt.rss_bound_kib);
    s->exit_code = 1;
  }
  if (fds - s->base_fds > s->opt.fd_bound) {
    g_printerr ("soak: FAIL: the fewest open fds of an interval grew from "
        "%d to %d after the warm-up (bound %d)\n", s->base_fds, fds,
        s->opt.fd_bound);
    s->exit_code = 1;
  }
}

static void
print_sample (Soak * s, gint64 elapsed, glong rss, gint fds)
{
  GArray *lat;
  guint64 n;

  g_mutex_lock (&s->lock);
  lat = s->latencies_ms;
  s->latencies_ms = g_array_new (FALSE, FALSE, sizeof (gdouble));
  n = s->n_answers;
  g_mutex_unlock (&s->lock);

  g_array_sort (lat, cmp_double);
  g_print ("soak t=%" G_GINT64_FORMAT "s rss=%.1fMiB fds=%d (fewest %d) "
      "kv=%u/%u "
      "(%.1f%%) reused=%u answers=%" G_GUINT64_FORMAT " (+%u) "
      "latency-ms p50=%.1f p90=%.1f p99=%.1f\n", elapsed, rss / 1024.0, fds,
      s->interval_min_fds, s->kv_rows, s->context_length,
      s->context_length ? 100.0 * s->kv_rows / s->context_length : 0.0,
      s->reused, n, lat->len, percentile (lat, 50), percentile (lat, 90),
      percentile (lat, 99));
  g_array_unref (lat);
}

static gboolean
on_tick (gpointer user_data)
{
  Soak *s = user_data;
  gint64 now = g_get_monotonic_time ();
  gint64 elapsed = (now - s->t_start) / G_USEC_PER_SEC;
  glong rss = rss_kib ();
  gint fds = open_fds ();
  gint64 last;

  s->interval_min_fds = MIN (s->interval_min_fds, fds);
  if (elapsed >= s->next_report || elapsed >= s->opt.duration) {
    print_sample (s, elapsed, rss, fds);
    check_growth (s, elapsed, rss, s->interval_min_fds);
    s->next_report = elapsed + s->opt.interval;
    s->interval_min_fds = G_MAXINT;
  }

  g_mutex_lock (&s->lock);
  last = s->t_last_answer ? s->t_last_answer : s->t_start;
  g_mutex_unlock (&s->lock);
  if (now - last > (gint64) s->opt.stall * G_USEC_PER_SEC) {
    g_printerr ("soak: FAIL: no answer for %d s\n", s->opt.stall);
    s->exit_code = 1;
  }

  if (s->exit_code != 0 || elapsed >= s->opt.duration) {
    g_main_loop_quit (s->loop);
    return G_SOURCE_REMOVE;
  }
  return G_SOURCE_CONTINUE;
}

static gchar *
pipeline_description (const Options * o)
{
  gchar *audio = o->audio ?
      g_strdup_printf ("audiotestsrc is-live=true wave=sine freq=1000 "
      "samplesperbuffer=1600 ! "
      "audio/x-raw,format=S16LE,rate=16000,channels=1 ! "
      "npuaudiotok model=%s/audiotestsrc-mmproj.gguf vad=false "
      "chunk-duration=1000000000 n-threads=%d ! llm.audio ", o->models,
      o->n_threads) : g_strdup ("");
  gchar *d = g_strdup_printf ("videotestsrc pattern=ball is-live=true ! "
      "video/x-raw,format=NV12,width=320,height=240,framerate=30/1 ! "
      "queue leaky=downstream max-size-buffers=1 ! "
      "npuvisiontok model=%s/videotestsrc-mmproj.gguf policy=drop-newest "
      "n-threads=%d ! llm.vision %s"
      "npullm name=llm model=%s/videotestsrc-text.gguf "
      "prompt=\"What do you see?\" output=response n-threads=%d "
      "context-length=%d ! appsink name=answers sync=false "
      "emit-signals=false", o->models, o->n_threads, audio, o->models,
      o->n_threads, o->context_length);

  g_free (audio);
  return d;
}

static gboolean
parse_options (Options * o, int argc, char **argv)
{
  gboolean no_audio = FALSE;
  gchar *models = NULL;
  GOptionEntry entries[] = {
    {"duration", 0, 0, G_OPTION_ARG_INT, &o->duration, "Run time (s)", "S"},
    {"interval", 0, 0, G_OPTION_ARG_INT, &o->interval,
        "Print every S seconds", "S"},
    {"warmup", 0, 0, G_OPTION_ARG_INT, &o->warmup,
        "Growth is measured from the first sample after S seconds", "S"},
    {"n-threads", 0, 0, G_OPTION_ARG_INT, &o->n_threads,
        "Threads of each element", "N"},
    {"models", 0, 0, G_OPTION_ARG_FILENAME, &models,
        "Directory of the trained models", "DIR"},
    {"rss-bound-kib", 0, 0, G_OPTION_ARG_INT, &o->rss_bound_kib,
        "Largest RSS growth after the warm-up", "K"},
    {"fd-bound", 0, 0, G_OPTION_ARG_INT, &o->fd_bound,
        "Largest growth of open fds after the warm-up", "N"},
    {"stall", 0, 0, G_OPTION_ARG_INT, &o->stall,
        "Fail when no answer comes for S seconds", "S"},
    {"context-length", 0, 0, G_OPTION_ARG_INT, &o->context_length,
        "npullm's KV cache rows", "N"},
    {"no-audio", 0, 0, G_OPTION_ARG_NONE, &no_audio, "No microphone", NULL},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("- soak the live pipeline");
  GError *err = NULL;
  gboolean ok;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  ok = g_option_context_parse (ctx, &argc, &argv, &err);
  g_option_context_free (ctx);
  if (!ok) {
    g_printerr ("soak: %s\n", err->message);
    g_error_free (err);
    return FALSE;
  }
  o->audio = !no_audio;
  if (models)
    o->models = models;
  if (o->duration < 1 || o->interval < 1 || o->warmup < 0 || o->stall < 1
      || o->n_threads < 0 || o->context_length < 1 || o->rss_bound_kib < 0
      || o->fd_bound < 0) {
    g_printerr ("soak: durations and bounds must be positive\n");
    return FALSE;
  }
  return TRUE;
}

static gboolean
build_pipeline (Soak * s)
{
  gchar *desc = pipeline_description (&s->opt);
  GError *err = NULL;
  GstElement *sink;
  GstAppSinkCallbacks cb = { NULL, NULL, on_answer };

  s->pipeline = gst_parse_launch (desc, &err);
  g_free (desc);
  if (!s->pipeline || err) {
    g_printerr ("soak: cannot build the pipeline: %s\n",
        err ? err->message : "?");
    g_clear_error (&err);
    return FALSE;
  }
  s->llm = gst_bin_get_by_name (GST_BIN (s->pipeline), "llm");
  g_object_get (s->llm, "context-length", &s->context_length, NULL);
  sink = gst_bin_get_by_name (GST_BIN (s->pipeline), "answers");
  gst_app_sink_set_callbacks (GST_APP_SINK (sink), &cb, s, NULL);
  gst_object_unref (sink);
  return TRUE;
}

static void
finish (Soak * s)
{
  if (s->exit_code == 0 && s->max_reused == 0) {
    g_printerr ("soak: FAIL: no answer reused the prompt prefix\n");
    s->exit_code = 1;
  }
  if (s->exit_code == 0 && !s->have_base) {
    g_printerr ("soak: FAIL: the run ended inside the warm-up\n");
    s->exit_code = 1;
  }
  g_print ("soak: %s: %" G_GUINT64_FORMAT " answers; RSS %.1f to %.1f MiB"
      " (largest), fds %d to %d, after a %d s warm-up\n",
      s->exit_code ? "FAIL" : "OK", s->n_answers, s->base_rss_kib / 1024.0,
      s->max_rss_kib / 1024.0, s->base_fds, s->max_fds, s->opt.warmup);
}

int
main (int argc, char **argv)
{
  Soak s = { {60, 60, 10, 1, 4096, 8, 10, 512, TRUE, "tests/models"} };
  GstBus *bus;

  if (!parse_options (&s.opt, argc, argv))
    return 2;
  if (!build_pipeline (&s))
    return 2;
  g_mutex_init (&s.lock);
  s.latencies_ms = g_array_new (FALSE, FALSE, sizeof (gdouble));
  s.loop = g_main_loop_new (NULL, FALSE);
  bus = gst_element_get_bus (s.pipeline);
  gst_bus_add_watch (bus, on_message, &s);
  s.t_start = g_get_monotonic_time ();
  s.next_report = s.opt.interval;
  s.interval_min_fds = G_MAXINT;
  if (gst_element_set_state (s.pipeline, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE) {
    g_printerr ("soak: FAIL: the pipeline does not start\n");
    s.exit_code = 1;
  } else {
    g_timeout_add_seconds (1, on_tick, &s);
    g_main_loop_run (s.loop);
  }
  finish (&s);
  gst_element_set_state (s.pipeline, GST_STATE_NULL);
  gst_bus_remove_watch (bus);
  gst_object_unref (bus);
  gst_object_unref (s.llm);
  gst_object_unref (s.pipeline);
  g_main_loop_unref (s.loop);
  g_array_unref (s.latencies_ms);
  g_mutex_clear (&s.lock);
  return s.exit_code;
}
