/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the task events (npuevents.h) the backend
 * reports for a timeline */
#include <core/device/npubackend.h>
#include <core/device/npuevents.h>

typedef struct
{
  NpuEventKind kind;
  gint64 time_ns;
  gint64 thread;
  guint64 task_id;
  gchar *queue;
  gchar *label;
  gchar *device;
  guint64 tag;
  gboolean failed;
  gboolean has_bytes;
  NpuBytes bytes;
} Recorded;

static GMutex lock;
static GArray *events;          /* Recorded */

static void
record (const NpuEvent * ev, gpointer user_data)
{
  Recorded r;

  g_assert_true (user_data == &events);
  r.kind = ev->kind;
  r.time_ns = ev->time_ns;
  r.thread = ev->thread;
  r.task_id = ev->task_id;
  r.queue = g_strdup (ev->queue);
  r.label = g_strdup (ev->label);
  r.device = g_strdup (ev->device);
  r.tag = ev->tag;
  r.failed = ev->failed;
  r.has_bytes = ev->bytes != NULL;
  if (ev->bytes)
    r.bytes = *ev->bytes;
  g_mutex_lock (&lock);
  g_array_append_val (events, r);
  g_mutex_unlock (&lock);
}

static void
recorded_clear (gpointer data)
{
  Recorded *r = data;

  g_free (r->queue);
  g_free (r->label);
  g_free (r->device);
}

static void
start_recording (void)
{
  events = g_array_new (FALSE, FALSE, sizeof (Recorded));
  g_array_set_clear_func (events, recorded_clear);
  npu_events_set_handler (record, &events);
}

static void
stop_recording (void)
{
  npu_events_set_handler (NULL, NULL);
  g_array_unref (events);
  events = NULL;
}

static Recorded *
ev_at (guint i)
{
  g_assert_cmpuint (i, <, events->len);
  return &g_array_index (events, Recorded, i);
}

static gboolean
staged_task (NpuTask * task, gpointer user_data, GError ** error)
{
  npu_events_stage (TRUE, "inner", NPU_EVENT_NO_TAG);
  npu_events_stage (FALSE, "inner", NPU_EVENT_NO_TAG);
  return TRUE;
}

static gboolean
failing_task (NpuTask * task, gpointer user_data, GError ** error)
{
  g_set_error (error, NPU_BACKEND_ERROR, NPU_BACKEND_ERROR_FAILED, "broken");
  return FALSE;
}

/* Waits on @gate (an eventfd fence), so that what is queued behind it stays
 * pending */
static gboolean
gated_task (NpuTask * task, gpointer user_data, GError ** error)
{
  return npu_fence_wait (user_data, -1, error);
}

static void
wait_and_unref (NpuFence * fence, gboolean expect_ok)
{
  GError *error = NULL;

  g_assert_true (npu_fence_wait (fence, -1, &error) == expect_ok);
  g_clear_error (&error);
  npu_fence_unref (fence);
}

/* One task's submit, start, stage, end and finish, in that order, with the
 * queue's tag, its label, its device and the threads they ran on. */
static void
test_task_order (void)
{
  NpuDevice *device = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (device, "q-order");
  gint64 me = npu_events_thread_id ();
  guint i;

  start_recording ();
  npu_queue_set_tag (queue, 42);
  wait_and_unref (npu_queue_submit_labelled (queue, "work", staged_task,
          NULL, NULL, NULL, 0), TRUE);
  npu_queue_free (queue);

  g_mutex_lock (&lock);
  g_assert_cmpuint (events->len, ==, 5);
  g_assert_cmpint (ev_at (0)->kind, ==, NPU_EVENT_TASK_SUBMIT);
  g_assert_cmpint (ev_at (1)->kind, ==, NPU_EVENT_TASK_START);
  g_assert_cmpint (ev_at (2)->kind, ==, NPU_EVENT_STAGE_BEGIN);
  g_assert_cmpint (ev_at (3)->kind, ==, NPU_EVENT_STAGE_END);
  g_assert_cmpint (ev_at (4)->kind, ==, NPU_EVENT_TASK_FINISH);
  g_assert_cmpint (ev_at (0)->thread, ==, me);
  for (i = 0; i < 5; i++) {
    Recorded *r = ev_at (i);
    gboolean stage = r->kind == NPU_EVENT_STAGE_BEGIN ||
        r->kind == NPU_EVENT_STAGE_END;

    if (i > 0) {
      g_assert_cmpint (r->time_ns, >=, ev_at (i - 1)->time_ns);
      /* the worker, not the submitter */
      g_assert_cmpint (r->thread, ==, ev_at (1)->thread);
      g_assert_cmpint (r->thread, !=, me);
    }
    g_assert_cmpstr (r->label, ==, stage ? "inner" : "work");
    if (stage) {
      g_assert_null (r->queue);
      g_assert_cmpuint (r->tag, ==, NPU_EVENT_NO_TAG);
      continue;
    }
    g_assert_cmpuint (r->task_id, !=, 0);
    g_assert_cmpuint (r->task_id, ==, ev_at (0)->task_id);
    g_assert_cmpstr (r->queue, ==, "q-order");
    g_assert_cmpstr (r->device, ==, npu_device_get_name (device));
    g_assert_cmpuint (r->tag, ==, 42);
    g_assert_false (r->failed);
  }
  g_mutex_unlock (&lock);
  stop_recording ();
  npu_device_unref (device);
}

/* npu_queue_submit() without a label: the queue's name, and no tag until
 * one is set; each task its own id */
static void
test_defaults (void)
{
  NpuDevice *device = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (device, "q-plain");

  start_recording ();
  wait_and_unref (npu_queue_submit (queue, staged_task, NULL, NULL, NULL, 0),
      TRUE);
  npu_queue_set_tag (queue, 7);
  wait_and_unref (npu_queue_submit (queue, staged_task, NULL, NULL, NULL, 0),
      TRUE);
  npu_queue_free (queue);

  g_mutex_lock (&lock);
  g_assert_cmpuint (events->len, ==, 10);
  g_assert_cmpstr (ev_at (0)->label, ==, "q-plain");
  g_assert_cmpuint (ev_at (0)->tag, ==, NPU_EVENT_NO_TAG);
  g_assert_cmpuint (ev_at (5)->tag, ==, 7);
  g_assert_cmpuint (ev_at (9)->tag, ==, 7);
  g_assert_cmpuint (ev_at (5)->task_id, !=, ev_at (0)->task_id);
  g_mutex_unlock (&lock);
  stop_recording ();
  npu_device_unref (device);
}

/* A task that fails finishes failed; one cancelled before it ran finishes
 * failed without a start, on the thread that cancelled it. */
static void
test_failed_and_cancelled (void)
{
  NpuDevice *device = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (device, "q-fail");
  NpuFence *gate = npu_fence_new (), *first, *second;
  guint i, n_submit = 0, n_start = 0, n_finish_failed = 0;
  guint64 second_id = 0;

  start_recording ();
  wait_and_unref (npu_queue_submit (queue, failing_task, NULL, NULL, NULL,
          0), FALSE);
  first = npu_queue_submit (queue, gated_task, gate, NULL, NULL, 0);
  second = npu_queue_submit (queue, staged_task, NULL, NULL, &gate, 1);
  g_assert_true (npu_queue_cancel (queue, second));
  npu_fence_signal (gate);
  wait_and_unref (first, TRUE);
  wait_and_unref (second, FALSE);
  npu_queue_free (queue);

  g_mutex_lock (&lock);
  for (i = 0; i < events->len; i++) {
    Recorded *r = ev_at (i);

    /* the third task submitted */
    if (r->kind == NPU_EVENT_TASK_SUBMIT && ++n_submit == 3)
      second_id = r->task_id;
    n_start += r->kind == NPU_EVENT_TASK_START;
    n_finish_failed += r->kind == NPU_EVENT_TASK_FINISH && r->failed;
    g_assert_cmpint (r->kind, !=, NPU_EVENT_STAGE_BEGIN);
  }
  /* the failing one and the gated one ran; the cancelled one did not */
  g_assert_cmpuint (n_start, ==, 2);
  g_assert_cmpuint (n_finish_failed, ==, 2);
  g_assert_cmpuint (second_id, !=, 0);
  for (i = 0; i < events->len; i++) {
    Recorded *r = ev_at (i);

    if (r->task_id != second_id)
      continue;
    g_assert_cmpint (r->kind, !=, NPU_EVENT_TASK_START);
    if (r->kind == NPU_EVENT_TASK_FINISH) {
      g_assert_true (r->failed);
      g_assert_cmpint (r->thread, ==, npu_events_thread_id ());
    }
  }
  g_mutex_unlock (&lock);
  stop_recording ();
  npu_fence_unref (gate);
  npu_device_unref (device);
}

/* Without a handler, nothing is called: a handler set and then cleared
 * sees none of the tasks that come after. */
static void
test_off (void)
{
  NpuDevice *device = npu_device_new_cpu (2);
  NpuQueue *queue = npu_queue_new (device, "q-off");
  guint i;

  g_assert_false (npu_events_enabled ());
  start_recording ();
  g_assert_true (npu_events_enabled ());
  wait_and_unref (npu_queue_submit (queue, staged_task, NULL, NULL, NULL, 0),
      TRUE);
  g_assert_cmpuint (events->len, ==, 5);
  npu_events_set_handler (NULL, NULL);
  g_assert_false (npu_events_enabled ());
  g_array_set_size (events, 0);
  for (i = 0; i < 10; i++)
    wait_and_unref (npu_queue_submit (queue, staged_task, NULL, NULL, NULL,
            0), TRUE);
  npu_queue_free (queue);
  g_assert_cmpuint (events->len, ==, 0);
  stop_recording ();
  npu_device_unref (device);
}

/* Reports 1000 frame bytes read and 24 token bytes written, in two calls */
static gboolean
bytes_task (NpuTask * task, gpointer user_data, GError ** error)
{
  NpuBytes b;

  npu_bytes_clear (&b);
  npu_bytes_read (&b, NPU_BYTES_FRAME, 600);
  npu_task_report_bytes (task, &b);
  npu_bytes_clear (&b);
  npu_bytes_read (&b, NPU_BYTES_FRAME, 400);
  npu_bytes_write (&b, NPU_BYTES_TOKENS, 24);
  npu_task_report_bytes (task, &b);
  return TRUE;
}

/* A task's reported bytes, summed, reach its finish event, and only that
 * one; a task that reports none finishes with none */
static void
test_task_bytes (void)
{
  NpuDevice *device = npu_device_new_cpu (1);
  NpuQueue *queue = npu_queue_new (device, "q-bytes");
  guint i, n_finish = 0;

  start_recording ();
  wait_and_unref (npu_queue_submit (queue, bytes_task, NULL, NULL, NULL, 0),
      TRUE);
  wait_and_unref (npu_queue_submit (queue, staged_task, NULL, NULL, NULL, 0),
      TRUE);
  npu_queue_free (queue);
  g_mutex_lock (&lock);
  for (i = 0; i < events->len; i++) {
    Recorded *r = ev_at (i);

    if (r->kind != NPU_EVENT_TASK_FINISH) {
      g_assert_false (r->has_bytes);
      continue;
    }
    if (n_finish++ == 0) {
      g_assert_true (r->has_bytes);
      g_assert_cmpuint (r->bytes.read[NPU_BYTES_FRAME], ==, 1000);
      g_assert_cmpuint (r->bytes.written[NPU_BYTES_TOKENS], ==, 24);
      g_assert_cmpuint (npu_bytes_total (&r->bytes), ==, 1024);
    } else {
      g_assert_false (r->has_bytes);
    }
  }
  g_assert_cmpuint (n_finish, ==, 2);
  g_mutex_unlock (&lock);
  stop_recording ();
  npu_device_unref (device);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/events/task-order", test_task_order);
  g_test_add_func ("/events/defaults", test_defaults);
  g_test_add_func ("/events/failed-and-cancelled", test_failed_and_cancelled);
  g_test_add_func ("/events/off", test_off);
  g_test_add_func ("/events/task-bytes", test_task_bytes);
  return g_test_run ();
}
