/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: helpers shared by the check tests of the encoder elements
 * (npuvisiontok, npuaudiotok): holding the compute device so that their
 * tasks stay in flight, pushing from another thread what is expected
 * to wait for them, and reading their stats messages.
 *
 * Header-only on purpose: each test is one executable built from one file.
 */
#ifndef __NPU_ENCODER_CHECK_H__
#define __NPU_ENCODER_CHECK_H__

#include <gst/gst.h>
#include <gst/check/gstcheck.h>
#include <gst/check/gstharness.h>
#include <math.h>
#include <core/device/npubackend.h>

/* ------------------------------------------------------------------------
 * Holding the shared CPU device
 *
 * The elements' queues and this one run on the process's one CPU device,
 * whose tasks run one at a time: while a task of ours waits for a gate,
 * the element's tasks are queued behind it and cannot have finished, so a
 * test that sees something wait is not looking at a timing accident.
 */
typedef struct
{
  NpuQueue *queue;
  NpuFence *gate, *blocked;
} NpuDeviceHold;

static gboolean
npu_device_hold_task (NpuTask * task, gpointer data, GError ** error)
{
  return npu_fence_wait (data, 30 * G_USEC_PER_SEC, error);
}

static inline NpuDeviceHold *
npu_device_hold_new (void)
{
  NpuDeviceHold *hold = g_new0 (NpuDeviceHold, 1);

  hold->queue = npu_queue_new (npu_device_get_cpu (0), "blocker");
  /* npu_device_get_cpu()'s reference: the queue keeps its own */
  npu_device_unref (npu_queue_get_device (hold->queue));
  return hold;
}

/* Holds the device until npu_device_release(). */
static inline void
npu_device_hold (NpuDeviceHold * hold)
{
  fail_unless (hold->gate == NULL, "the device is held already");
  hold->gate = npu_fence_new ();
  hold->blocked = npu_queue_submit (hold->queue, npu_device_hold_task,
      hold->gate, NULL, NULL, 0);
}

/* Lets the device go, and waits until our task has ended. */
static inline void
npu_device_release (NpuDeviceHold * hold)
{
  npu_fence_signal (hold->gate);
  fail_unless (npu_fence_wait (hold->blocked, -1, NULL));
  npu_fence_unref (hold->gate);
  npu_fence_unref (hold->blocked);
  hold->gate = hold->blocked = NULL;
}

static inline void
npu_device_hold_free (NpuDeviceHold * hold)
{
  if (hold->gate)
    npu_device_release (hold);
  npu_queue_free (hold->queue);
  g_free (hold);
}

/* ------------------------------------------------------------------------
 * Pushing from another thread
 *
 * A buffer (a push that blocks on the in-flight window) or an event (new
 * caps, which wait for the tasks in flight) pushed into a harness from a
 * thread of its own, so that the test can see it still waiting.
 */
typedef struct
{
  GstHarness *h;
  GstBuffer *buf;
  GstEvent *event;
  GstFlowReturn flow;
  gint done;
  GThread *thread;
} NpuPushThread;

static gpointer
npu_push_thread_func (gpointer data)
{
  NpuPushThread *p = data;

  if (p->buf)
    p->flow = gst_harness_push (p->h, p->buf);
  else
    p->flow = gst_harness_push_event (p->h, p->event) ? GST_FLOW_OK :
        GST_FLOW_ERROR;
  g_atomic_int_set (&p->done, 1);
  return NULL;
}

static inline NpuPushThread *
npu_push_thread_start (GstHarness * h, GstBuffer * buf, GstEvent * event)
{
  NpuPushThread *p = g_new0 (NpuPushThread, 1);

  p->h = h;
  p->buf = buf;
  p->event = event;
  p->thread = g_thread_new ("push", npu_push_thread_func, p);
  return p;
}

/* Pushes @buf (taken) from a new thread. */
static inline NpuPushThread *
npu_push_thread_start_buffer (GstHarness * h, GstBuffer * buf)
{
  return npu_push_thread_start (h, buf, NULL);
}

/* Pushes @event (taken) from a new thread. */
static inline NpuPushThread *
npu_push_thread_start_event (GstHarness * h, GstEvent * event)
{
  return npu_push_thread_start (h, NULL, event);
}

/* Whether the push has returned yet. */
static inline gboolean
npu_push_thread_is_done (NpuPushThread * p)
{
  return g_atomic_int_get (&p->done);
}

/* Waits for the push and frees @p.  Returns: what the buffer's push
 * returned, or for an event GST_FLOW_OK if it was handled and
 * GST_FLOW_ERROR if not. */
static inline GstFlowReturn
npu_push_thread_finish (NpuPushThread * p)
{
  GstFlowReturn flow;

  g_thread_join (p->thread);
  flow = p->flow;
  g_free (p);
  return flow;
}

/* ------------------------------------------------------------------------
 * The stats messages (gst_npu_encoder_element_report_bytes())
 */

static inline guint64
npu_stats_u64 (const GstStructure * s, const gchar * field)
{
  guint64 v = 0;

  fail_unless (gst_structure_get_uint64 (s, field, &v), "%s has no %s",
      gst_structure_get_name (s), field);
  return v;
}

/* Plays @pipeline to its EOS (or fails on an error) and returns copies of
 * the element messages named @name it posted, in order */
static inline GPtrArray *
npu_check_collect_stats (GstElement * pipeline, const gchar * name)
{
  GPtrArray *stats = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_structure_free);
  GstBus *bus = gst_element_get_bus (pipeline);
  gboolean done = FALSE;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  while (!done) {
    GstMessage *msg = gst_bus_timed_pop_filtered (bus, 60 * GST_SECOND,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR | GST_MESSAGE_ELEMENT);
    const GstStructure *s;

    fail_unless (msg != NULL, "no EOS in 60 s");
    s = gst_message_get_structure (msg);
    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
      GError *err = NULL;

      gst_message_parse_error (msg, &err, NULL);
      fail ("error: %s", err->message);
    }
    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS)
      done = TRUE;
    else if (gst_structure_has_name (s, name))
      g_ptr_array_add (stats, gst_structure_copy (s));
    gst_message_unref (msg);
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  return stats;
}

/* The fields of one stats message that do not depend on the model:
 * PREFIXbytes-total is every kind read and written, the energy estimate
 * is that total at @pj_per_bit; returns the total */
static inline guint64
npu_check_stats_total (const GstStructure * s, const gchar * prefix,
    gdouble pj_per_bit)
{
  static const gchar *const kinds[] = { "frame", "weights", "kv-cache",
    "activations", "tokens", "copies"
  };
  guint64 total = 0;
  gdouble uj;
  gchar *f;
  guint j;

  for (j = 0; j < G_N_ELEMENTS (kinds); j++) {
    gchar *r = g_strdup_printf ("%sbytes-%s-read", prefix, kinds[j]);
    gchar *w = g_strdup_printf ("%sbytes-%s-written", prefix, kinds[j]);

    total += npu_stats_u64 (s, r) + npu_stats_u64 (s, w);
    g_free (r);
    g_free (w);
  }
  f = g_strdup_printf ("%sbytes-total", prefix);
  fail_unless_equals_uint64 (npu_stats_u64 (s, f), total);
  g_free (f);
  f = g_strdup_printf ("%senergy-estimate-uj", prefix);
  fail_unless (gst_structure_get_double (s, f, &uj));
  /* bytes x 8 bits x pJ, in uJ */
  fail_unless (fabs (uj - total * 8 * pj_per_bit * 1e-6) <= 1e-9 * uj,
      "%g uJ for %" G_GUINT64_FORMAT " bytes", uj, total);
  g_free (f);
  return total;
}

/* Checks @stats in order: units 1, 2, ..., each message's fields
 * consistent, the sum- fields the running sum of the units' */
static inline void
npu_check_stats_sums (GPtrArray * stats, gdouble pj_per_bit)
{
  guint64 sum = 0;
  gdouble pj;
  guint i;

  for (i = 0; i < stats->len; i++) {
    const GstStructure *s = g_ptr_array_index (stats, i);

    fail_unless_equals_uint64 (npu_stats_u64 (s, "units"), i + 1);
    fail_unless (gst_structure_get_double (s, "pj-per-bit", &pj));
    fail_unless (pj == pj_per_bit);
    sum += npu_check_stats_total (s, "", pj_per_bit);
    fail_unless_equals_uint64 (npu_check_stats_total (s, "sum-",
            pj_per_bit), sum);
  }
}

#endif /* __NPU_ENCODER_CHECK_H__ */
