/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npu-timeline, a tracer that writes what each frame costs as a
 * Chrome/Perfetto trace
 *
 * SECTION:tracer-npu-timeline
 * @title: npu-timeline
 * @short_description: a timeline of frames, tasks and tokens
 *
 *   GST_TRACERS="npu-timeline(file=trace.json)" gst-launch-1.0 ...
 *
 * writes the trace-event JSON ("traceEvents") that ui.perfetto.dev and
 * chrome://tracing open, one lane per thread:
 *
 * - every buffer that reaches a sink pad of an element of this plugin, as a
 *   slice over that pad's chain function ("vision <- frame"), with its PTS;
 * - every buffer such an element pushes from a source pad (npullm's text);
 * - every task of the compute core (npuevents.h): a slice from its start
 *   to its end on the worker thread that ran it, with its device, its
 *   queue, the tag it carries (the PTS of its frame, chunk or answer) and
 *   when it was submitted, and an instant on the thread that submitted it;
 *   where the machine has energy meters (powercap/RAPL, hwmon power
 *   sensors, under $NPU_SYSFS_ROOT or /sys: npuenergy.h), the joules of
 *   each domain from its start to its end ("otherData" names the domains);
 * - the stages that the elements report inside a task (preprocess, vision
 *   encoder, log-mel, audio encoder);
 * - flows (arrows) from each of those to the next one with the same PTS:
 *   from a frame's arrival to its encoding, to npullm, to the prefill and
 *   tokens of the answer that speaks of it, to the text pushed out.
 *
 * The file is valid JSON whenever a top-level pipeline has gone to NULL
 * (an EOS or an error stop, as gst-launch-1.0 ends) and when GStreamer is
 * deinitialised; events that come later are written over the closing
 * bracket.  Parameters: file (default npu-timeline-PID.json).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnputimeline.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <core/device/npuevents.h>
#include <core/device/npuenergy.h>

GST_DEBUG_CATEGORY_STATIC (gst_npu_timeline_debug);
#define GST_CAT_DEFAULT gst_npu_timeline_debug

/* Flows are kept per tag while this many tags are open; past that the
 * oldest links are forgotten (a long run must not grow without bound). */
#define MAX_OPEN_FLOWS 4096
#define TRAILER "\n]}\n"

/* A task between its start and its finish */
typedef struct
{
  gint64 submit_ns;             /* 0: submitted before the tracer */
  gint64 start_ns;
  gint64 thread;
  NpuEnergySample *energy;      /* at its start, where there are meters */
} TaskSpan;

/* Where a flow goes on from: the last event that carried a tag */
typedef struct
{
  gint64 ts_ns;
  gint64 thread;
} FlowPoint;

/* The recorder's state.  Static, not the tracer object's: an event already
 * past npu_events_enabled() may arrive after the tracer is finalized. */
typedef struct
{
  GMutex lock;
  FILE *file;
  gchar *path;
  gboolean any;                 /* an event was written */
  gboolean closed;              /* the trailer ends the file */
  gint64 origin_ns;
  gint pid;
  guint64 next_flow;
  GHashTable *threads;          /* thread id -> TRUE, once named */
  GHashTable *tasks;            /* task id -> TaskSpan */
  GHashTable *submits;          /* task id -> submit time (gint64 *) */
  GHashTable *running;          /* thread id -> tag of the task it runs */
  GHashTable *flows;            /* tag -> FlowPoint */
  NpuEnergyMeter *meter;        /* NULL: the machine has none */
} Recorder;

static Recorder rec = { 0, };

struct _GstNpuTimeline
{
  GstTracer parent;
};

#define gst_npu_timeline_parent_class parent_class
G_DEFINE_TYPE (GstNpuTimeline, gst_npu_timeline, GST_TYPE_TRACER);

/* ------------------------------------------------------------------------
 * Writing (all with rec.lock held)
 */
static void
json_string (GString * s, const gchar * str)
{
  const guchar *p;

  g_string_append_c (s, '"');
  for (p = (const guchar *) (str ? str : ""); *p; p++) {
    if (*p == '"' || *p == '\\')
      g_string_append_printf (s, "\\%c", *p);
    else if (*p < 0x20)
      g_string_append_printf (s, "\\u%04x", *p);
    else
      g_string_append_c (s, *p);
  }
  g_string_append_c (s, '"');
}

/* Microseconds since the tracer began, to the nanosecond (never below 0:
 * "-1.-23" would be no JSON number) */
static void
json_ts (GString * s, const gchar * key, gint64 ns)
{
  ns = MAX (ns, 0);
  g_string_append_printf (s, ",\"%s\":%" G_GINT64_FORMAT ".%03d", key,
      ns / 1000, (gint) (ns % 1000));
}

/* Starts an event: {"ph":PH,"pid":..,"tid":..,"ts":..,"name":NAME,"cat":CAT */
static GString *
event_begin (const gchar * ph, gint64 ts_ns, gint64 thread,
    const gchar * name, const gchar * cat)
{
  GString *s = g_string_new (NULL);

  g_string_append_printf (s, "{\"ph\":\"%s\",\"pid\":%d,\"tid\":%"
      G_GINT64_FORMAT, ph, rec.pid, thread);
  json_ts (s, "ts", MAX (ts_ns - rec.origin_ns, 0));
  g_string_append (s, ",\"name\":");
  json_string (s, name);
  g_string_append (s, ",\"cat\":");
  json_string (s, cat);
  return s;
}

/* The args object's PTS members, for a valid tag */
static void
json_pts (GString * s, guint64 tag)
{
  gchar *str;

  if (tag == NPU_EVENT_NO_TAG)
    return;
  str = g_strdup_printf ("%" GST_TIME_FORMAT, GST_TIME_ARGS (tag));
  g_string_append_printf (s, ",\"pts_ns\":%" G_GUINT64_FORMAT ",\"pts\":", tag);
  json_string (s, str);
  g_free (str);
}

/* Appends @s (taken) and "}" to the file: over the trailer if the file was
 * closed, after a comma otherwise. */
static void
event_write (GString * s)
{
  g_string_append_c (s, '}');
  if (rec.file) {
    if (rec.closed) {
      fseeko (rec.file, -(off_t) strlen (TRAILER), SEEK_END);
      rec.closed = FALSE;
    }
    fputs (rec.any ? ",\n" : "\n", rec.file);
    fputs (s->str, rec.file);
    rec.any = TRUE;
  }
  g_string_free (s, TRUE);
}

/* Writes the closing bracket: the file is valid JSON until the next event */
static void
recorder_close_locked (void)
{
  if (!rec.file || rec.closed)
    return;
  fputs (TRAILER, rec.file);
  fflush (rec.file);
  rec.closed = TRUE;
}

/* Names the calling thread's lane the first time it has an event; every
 * event is reported on the thread it happened on, so the name is this
 * thread's own. */
static void
name_thread (gint64 thread)
{
  gchar name[32] = "";
  GString *s;

  if (g_hash_table_contains (rec.threads, &thread))
    return;
  g_hash_table_add (rec.threads, g_memdup2 (&thread, sizeof thread));
  if (pthread_getname_np (pthread_self (), name, sizeof name) != 0)
    g_strlcpy (name, "thread", sizeof name);
  s = event_begin ("M", rec.origin_ns, thread, "thread_name", "__metadata");
  g_string_append (s, ",\"args\":{\"name\":");
  json_string (s, name);
  g_string_append (s, "}");
  event_write (s);
}

/* One arrow, from the slice at @from_ns on @from to the one at @to_ns */
static void
flow_write (gint64 from_ns, gint64 from, gint64 to_ns, gint64 to)
{
  guint64 id = ++rec.next_flow;
  GString *s;

  s = event_begin ("s", from_ns, from, "media", "flow");
  g_string_append_printf (s, ",\"id\":%" G_GUINT64_FORMAT, id);
  event_write (s);
  s = event_begin ("f", to_ns, to, "media", "flow");
  g_string_append_printf (s, ",\"id\":%" G_GUINT64_FORMAT ",\"bp\":\"e\"", id);
  event_write (s);
}

/* An arrow from the last event tagged @tag to this one (at @ts_ns on
 * @thread, inside a slice that starts there) */
static void
flow_to (guint64 tag, gint64 ts_ns, gint64 thread)
{
  FlowPoint *last, *point;

  if (tag == NPU_EVENT_NO_TAG)
    return;
  last = g_hash_table_lookup (rec.flows, &tag);
  if (last && last->ts_ns > ts_ns) {
    /* Read on its thread before another thread's later event got the
     * lock: an arrow into the last point, which stays the last. */
    flow_write (ts_ns, thread, last->ts_ns, last->thread);
    return;
  }
  if (last)
    flow_write (last->ts_ns, last->thread, ts_ns, thread);
  else if (g_hash_table_size (rec.flows) >= MAX_OPEN_FLOWS) {
    g_hash_table_remove_all (rec.flows);
  }
  point = g_new (FlowPoint, 1);
  point->ts_ns = ts_ns;
  point->thread = thread;
  g_hash_table_insert (rec.flows, g_memdup2 (&tag, sizeof tag), point);
}

/* ------------------------------------------------------------------------
 * The compute core's events
 */
static void
span_free (gpointer data)
{
  TaskSpan *span = data;

  npu_energy_sample_free (span->energy);
  g_free (span);
}

/* The task's joules by domain, from its start's sample to now */
/* The bytes the task reported (npu_task_report_bytes()), by kind: each
 * kind it moved as {"read": n, "written": n}, and their total */
static void
json_bytes (GString * s, const NpuBytes * bytes)
{
  guint k;

  if (!bytes)
    return;
  g_string_append (s, ",\"bytes\":{");
  for (k = 0; k < NPU_BYTES_N_KINDS; k++) {
    if (!bytes->read[k] && !bytes->written[k])
      continue;
    json_string (s, npu_bytes_kind_name (k));
    g_string_append_printf (s, ":{\"read\":%" G_GUINT64_FORMAT
        ",\"written\":%" G_GUINT64_FORMAT "},", bytes->read[k],
        bytes->written[k]);
  }
  g_string_append_printf (s, "\"total\":%" G_GUINT64_FORMAT "}",
      npu_bytes_total (bytes));
}

static void
json_joules (GString * s, TaskSpan * span)
{
  NpuEnergySample *now;
  gboolean first = TRUE;
  guint i;

  if (!span || !span->energy)
    return;
  now = npu_energy_sample_new (rec.meter);
  npu_energy_meter_read (rec.meter, now);
  g_string_append (s, ",\"joules\":{");
  for (i = 0; i < now->n; i++) {
    gdouble j;

    if (!npu_energy_meter_joules (rec.meter, span->energy, now, i, &j))
      continue;
    g_string_append (s, first ? "" : ",");
    json_string (s, npu_energy_meter_get_domain_name (rec.meter, i));
    g_string_append_printf (s, ":%.9f", j);
    first = FALSE;
  }
  g_string_append (s, "}");
  npu_energy_sample_free (now);
}

static void
on_task_start (const NpuEvent * ev)
{
  TaskSpan *span = g_new0 (TaskSpan, 1);
  gint64 *submit = g_hash_table_lookup (rec.submits, &ev->task_id);

  span->submit_ns = submit ? *submit : 0;
  span->start_ns = ev->time_ns;
  span->thread = ev->thread;
  if (rec.meter) {
    span->energy = npu_energy_sample_new (rec.meter);
    npu_energy_meter_read (rec.meter, span->energy);
  }
  g_hash_table_remove (rec.submits, &ev->task_id);
  g_hash_table_insert (rec.tasks, g_memdup2 (&ev->task_id,
          sizeof ev->task_id), span);
  g_hash_table_insert (rec.running, g_memdup2 (&ev->thread,
          sizeof ev->thread), g_memdup2 (&ev->tag, sizeof ev->tag));
  flow_to (ev->tag, ev->time_ns, ev->thread);
}

/* The task's slice, written once its end is known; a task that never ran
 * (cancelled, or an input failed) is an instant where it was dropped. */
static void
on_task_finish (const NpuEvent * ev)
{
  TaskSpan *span = g_hash_table_lookup (rec.tasks, &ev->task_id);
  GString *s;

  if (span) {
    s = event_begin ("X", span->start_ns, span->thread, ev->label, "task");
    json_ts (s, "dur", ev->time_ns - span->start_ns);
  } else {
    s = event_begin ("i", ev->time_ns, ev->thread, ev->label, "task");
    g_string_append (s, ",\"s\":\"t\"");
  }
  g_string_append_printf (s, ",\"args\":{\"task\":%" G_GUINT64_FORMAT
      ",\"ran\":%s,\"failed\":%s,\"queue\":", ev->task_id,
      span ? "true" : "false", ev->failed ? "true" : "false");
  json_string (s, ev->queue);
  g_string_append (s, ",\"device\":");
  json_string (s, ev->device);
  if (span && span->submit_ns)
    json_ts (s, "submitted", span->submit_ns - rec.origin_ns);
  json_joules (s, span);
  json_bytes (s, ev->bytes);
  json_pts (s, ev->tag);
  g_string_append (s, "}");
  event_write (s);
  g_hash_table_remove (rec.tasks, &ev->task_id);
  g_hash_table_remove (rec.submits, &ev->task_id);
  g_hash_table_remove (rec.running, &ev->thread);
}

static void
on_task_submit (const NpuEvent * ev)
{
  gchar *name = g_strdup_printf ("submit %s", ev->label);
  GString *s = event_begin ("i", ev->time_ns, ev->thread, name, "submit");

  g_string_append (s, ",\"s\":\"t\",\"args\":{\"queue\":");
  json_string (s, ev->queue);
  g_string_append_printf (s, ",\"task\":%" G_GUINT64_FORMAT, ev->task_id);
  json_pts (s, ev->tag);
  g_string_append (s, "}");
  event_write (s);
  g_free (name);
  g_hash_table_insert (rec.submits, g_memdup2 (&ev->task_id,
          sizeof ev->task_id), g_memdup2 (&ev->time_ns, sizeof ev->time_ns));
}

/* A stage without a tag of its own is the running task's */
static void
on_stage (const NpuEvent * ev)
{
  guint64 tag = ev->tag;
  GString *s;

  if (tag == NPU_EVENT_NO_TAG) {
    guint64 *t = g_hash_table_lookup (rec.running, &ev->thread);

    if (t)
      tag = *t;
  }
  s = event_begin (ev->kind == NPU_EVENT_STAGE_BEGIN ? "B" : "E",
      ev->time_ns, ev->thread, ev->label, "stage");
  g_string_append (s, ",\"args\":{\"stage\":");
  json_string (s, ev->label);
  json_pts (s, tag);
  g_string_append (s, "}");
  event_write (s);
}

static void
on_npu_event (const NpuEvent * ev, gpointer user_data)
{
  g_mutex_lock (&rec.lock);
  if (!rec.file)
    goto done;
  name_thread (ev->thread);
  switch (ev->kind) {
    case NPU_EVENT_TASK_SUBMIT:
      on_task_submit (ev);
      break;
    case NPU_EVENT_TASK_START:
      on_task_start (ev);
      break;
    case NPU_EVENT_TASK_FINISH:
      on_task_finish (ev);
      break;
    case NPU_EVENT_STAGE_BEGIN:
    case NPU_EVENT_STAGE_END:
      on_stage (ev);
      break;
  }
done:
  g_mutex_unlock (&rec.lock);
}

/* ------------------------------------------------------------------------
 * GStreamer's hooks
 */

/* Whether @pad is one of this plugin's elements' (the "npu" plugin):
 * only their pads are on the timeline. */
static gboolean
is_npu_pad (GstPad * pad)
{
  GstObject *parent = GST_OBJECT_PARENT (pad);
  GstElementFactory *factory;
  const gchar *plugin;

  if (!GST_IS_ELEMENT (parent))
    return FALSE;
  factory = gst_element_get_factory (GST_ELEMENT (parent));
  if (!factory)
    return FALSE;
  plugin = gst_plugin_feature_get_plugin_name (GST_PLUGIN_FEATURE (factory));
  return plugin && g_str_equal (plugin, "npu");
}

/* A slice over a buffer's chain into (@into) or push out of an npu pad,
 * "ELEMENT:PAD <- buffer" or "ELEMENT:PAD -> buffer"; its PTS starts or
 * continues its flow. */
static void
pad_buffer_begin (GstPad * pad, GstBuffer * buffer, gboolean into)
{
  gint64 now = npu_events_now_ns (), thread = npu_events_thread_id ();
  GstClockTime pts = GST_BUFFER_PTS (buffer);
  gchar *name = g_strdup_printf ("%s:%s %s buffer", GST_DEBUG_PAD_NAME (pad),
      into ? "<-" : "->");
  GString *s;

  g_mutex_lock (&rec.lock);
  if (!rec.file)
    goto done;
  name_thread (thread);
  s = event_begin ("B", now, thread, name, into ? "in" : "out");
  g_string_append (s, ",\"args\":{\"element\":");
  json_string (s, GST_OBJECT_NAME (GST_OBJECT_PARENT (pad)));
  g_string_append (s, ",\"pad\":");
  json_string (s, GST_OBJECT_NAME (pad));
  g_string_append_printf (s, ",\"size\":%" G_GSIZE_FORMAT,
      gst_buffer_get_size (buffer));
  json_pts (s, pts);
  g_string_append (s, "}");
  event_write (s);
  flow_to (pts, now, thread);
done:
  g_mutex_unlock (&rec.lock);
  g_free (name);
}

static void
pad_buffer_end (GstPad * pad, GstFlowReturn res)
{
  gint64 now = npu_events_now_ns (), thread = npu_events_thread_id ();
  GString *s;

  g_mutex_lock (&rec.lock);
  if (rec.file) {
    s = event_begin ("E", now, thread, "", "pad");
    g_string_append (s, ",\"args\":{\"flow\":");
    json_string (s, gst_flow_get_name (res));
    g_string_append (s, "}");
    event_write (s);
  }
  g_mutex_unlock (&rec.lock);
}

static void
do_chain_pre (GstTracer * tracer, GstClockTime ts, GstPad * pad,
    GstBuffer * buffer)
{
  if (is_npu_pad (pad))
    pad_buffer_begin (pad, buffer, TRUE);
}

static void
do_chain_post (GstTracer * tracer, GstClockTime ts, GstPad * pad,
    GstFlowReturn res)
{
  if (is_npu_pad (pad))
    pad_buffer_end (pad, res);
}

static void
do_push_pre (GstTracer * tracer, GstClockTime ts, GstPad * pad,
    GstBuffer * buffer)
{
  if (is_npu_pad (pad))
    pad_buffer_begin (pad, buffer, FALSE);
}

static void
do_push_post (GstTracer * tracer, GstClockTime ts, GstPad * pad,
    GstFlowReturn res)
{
  if (is_npu_pad (pad))
    pad_buffer_end (pad, res);
}

/* A top-level pipeline that went to NULL (after an EOS or an error, as
 * gst-launch-1.0 ends, or an application's teardown) closes the file, so
 * that it is valid JSON while the process goes on or dies. */
static void
do_change_state_post (GstTracer * tracer, GstClockTime ts,
    GstElement * element, GstStateChange transition,
    GstStateChangeReturn result)
{
  if (GST_STATE_TRANSITION_NEXT (transition) != GST_STATE_NULL ||
      GST_OBJECT_PARENT (element) != NULL)
    return;
  g_mutex_lock (&rec.lock);
  recorder_close_locked ();
  g_mutex_unlock (&rec.lock);
}

/* ------------------------------------------------------------------------
 * The tracer
 */

/* The file parameter of "npu-timeline(file=PATH)", or the default */
static gchar *
params_file (GstNpuTimeline * self)
{
  gchar *params = NULL, *desc, *path = NULL;
  GstStructure *st;

  g_object_get (self, "params", &params, NULL);
  if (params) {
    desc = g_strdup_printf ("npu-timeline,%s", params);
    st = gst_structure_from_string (desc, NULL);
    if (!st)
      GST_WARNING_OBJECT (self, "cannot parse the parameters \"%s\"", params);
    else
      path = g_strdup (gst_structure_get_string (st, "file"));
    g_clear_pointer (&st, gst_structure_free);
    g_free (desc);
    g_free (params);
  }
  return path ? path : g_strdup_printf ("npu-timeline-%d.json", getpid ());
}

/* The file's head, with the energy meters found (docs/cost.md) */
static void
write_header (void)
{
  GString *s = g_string_new ("{\"displayTimeUnit\":\"ms\",\"otherData\":{"
      "\"energy_domains\":[");
  guint i, n;

  rec.meter = npu_energy_meter_new (NULL);
  n = npu_energy_meter_get_n_domains (rec.meter);
  for (i = 0; i < n; i++) {
    g_string_append (s, i ? "," : "");
    json_string (s, npu_energy_meter_get_domain_name (rec.meter, i));
  }
  if (n == 0)
    g_clear_pointer (&rec.meter, npu_energy_meter_free);
  g_string_append (s, "]},\"traceEvents\":[");
  fputs (s->str, rec.file);
  g_string_free (s, TRUE);
}

static gboolean
recorder_open (const gchar * path)
{
  g_mutex_lock (&rec.lock);
  if (rec.file) {
    g_mutex_unlock (&rec.lock);
    return FALSE;
  }
  rec.file = fopen (path, "w");
  if (rec.file) {
    rec.path = g_strdup (path);
    rec.origin_ns = npu_events_now_ns ();
    rec.pid = getpid ();
    rec.any = rec.closed = FALSE;
    rec.threads = g_hash_table_new_full (g_int64_hash, g_int64_equal,
        g_free, NULL);
    rec.tasks = g_hash_table_new_full (g_int64_hash, g_int64_equal,
        g_free, span_free);
    rec.submits = g_hash_table_new_full (g_int64_hash, g_int64_equal,
        g_free, g_free);
    rec.running = g_hash_table_new_full (g_int64_hash, g_int64_equal,
        g_free, g_free);
    rec.flows = g_hash_table_new_full (g_int64_hash, g_int64_equal,
        g_free, g_free);
    write_header ();
    /* nothing left in the buffer for a fork (gst-check's) to write twice */
    fflush (rec.file);
  }
  g_mutex_unlock (&rec.lock);
  return rec.file != NULL;
}

static void
gst_npu_timeline_constructed (GObject * object)
{
  GstNpuTimeline *self = GST_NPU_TIMELINE (object);
  GstTracer *tracer = GST_TRACER (object);
  gchar *path = params_file (self);

  G_OBJECT_CLASS (parent_class)->constructed (object);
  if (!recorder_open (path)) {
    GST_ERROR_OBJECT (self, "cannot write the timeline to \"%s\": %s", path,
        rec.file ? "one npu-timeline tracer is already recording" :
        g_strerror (errno));
    g_free (path);
    return;
  }
  GST_INFO_OBJECT (self, "writing the timeline to %s", path);
  g_free (path);
  npu_events_set_handler (on_npu_event, NULL);
  gst_tracing_register_hook (tracer, "pad-chain-pre",
      G_CALLBACK (do_chain_pre));
  gst_tracing_register_hook (tracer, "pad-chain-post",
      G_CALLBACK (do_chain_post));
  gst_tracing_register_hook (tracer, "pad-push-pre", G_CALLBACK (do_push_pre));
  gst_tracing_register_hook (tracer, "pad-push-post",
      G_CALLBACK (do_push_post));
  gst_tracing_register_hook (tracer, "element-change-state-post",
      G_CALLBACK (do_change_state_post));
}

/* Closes the file for good.  The handler is cleared first; an event
 * already past it finds no file and writes nothing. */
static void
gst_npu_timeline_finalize (GObject * object)
{
  npu_events_set_handler (NULL, NULL);
  g_mutex_lock (&rec.lock);
  if (rec.file) {
    recorder_close_locked ();
    fclose (rec.file);
    rec.file = NULL;
    g_clear_pointer (&rec.path, g_free);
    g_clear_pointer (&rec.threads, g_hash_table_unref);
    g_clear_pointer (&rec.tasks, g_hash_table_unref);
    g_clear_pointer (&rec.submits, g_hash_table_unref);
    g_clear_pointer (&rec.running, g_hash_table_unref);
    g_clear_pointer (&rec.flows, g_hash_table_unref);
    g_clear_pointer (&rec.meter, npu_energy_meter_free);
  }
  g_mutex_unlock (&rec.lock);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_npu_timeline_class_init (GstNpuTimelineClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);

  gobject_class->constructed = gst_npu_timeline_constructed;
  gobject_class->finalize = gst_npu_timeline_finalize;
  GST_DEBUG_CATEGORY_INIT (gst_npu_timeline_debug, "npu-timeline", 0,
      "npu-timeline tracer");
}

static void
gst_npu_timeline_init (GstNpuTimeline * self)
{
}
