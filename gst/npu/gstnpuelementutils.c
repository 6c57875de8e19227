/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what the elements each did alike */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuelementutils.h"

/**
 * gst_npu_element_new_queue:
 * @element: the element the queue works for (its name names the queue)
 * @n_threads: worker threads of the CPU device (0: one per online CPU)
 *
 * A task queue on the CPU device.  The queue holds the device; the caller
 * frees the queue with npu_queue_free() when it stops.
 *
 * Returns: (transfer full): the queue
 */
NpuQueue *
gst_npu_element_new_queue (GstElement * element, guint n_threads)
{
  /* "cpu" always opens: the elements have no device choice yet */
  NpuQueue *queue = npu_queue_new (npu_device_open ("cpu", n_threads, NULL),
      GST_OBJECT_NAME (element));

  /* npu_device_open()'s reference: the queue keeps its own */
  npu_device_unref (npu_queue_get_device (queue));
  return queue;
}

/**
 * gst_npu_element_post_model_open_error:
 * @element: the element that could not open its model
 * @path: the model file
 * @format: the formats the element reads, for the message ("GGUF")
 * @error: why the file could not be opened (npu_gguf_open(),
 *   npu_model_file_open())
 *
 * Posts RESOURCE/NOT_FOUND ("Model file ... not found.") if @path does not
 * exist, RESOURCE/OPEN_READ ("Could not open model file ...: " and the
 * reason) if it cannot be read (a directory, no permission), else
 * STREAM/DECODE ("Model file ... is not a usable @format file: " and the
 * reason).
 */
void
gst_npu_element_post_model_open_error (GstElement * element,
    const gchar * path, const gchar * format, const GError * error)
{
  if (g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT) ||
      !g_file_test (path, G_FILE_TEST_EXISTS))
    GST_ELEMENT_ERROR (element, RESOURCE, NOT_FOUND,
        ("Model file \"%s\" not found.", path), ("%s", error->message));
  else if (error->domain == G_FILE_ERROR)
    GST_ELEMENT_ERROR (element, RESOURCE, OPEN_READ,
        ("Could not open model file \"%s\": %s", path, error->message),
        ("%s", error->message));
  else
    GST_ELEMENT_ERROR (element, STREAM, DECODE,
        ("Model file \"%s\" is not a usable %s file: %s", path, format,
            error->message), ("%s", error->message));
}

/**
 * gst_npu_element_push_fence_locked:
 * @pending: the fences of the submitted tasks, oldest first
 * @fence: (transfer full): the fence of the task just submitted
 *
 * Appends @fence to @pending, first letting go of the signalled fences at
 * its head.  Called with the lock that guards @pending held.
 */
void
gst_npu_element_push_fence_locked (GQueue * pending, NpuFence * fence)
{
  while (!g_queue_is_empty (pending) &&
      npu_fence_is_signalled (g_queue_peek_head (pending)))
    npu_fence_unref (g_queue_pop_head (pending));
  g_queue_push_tail (pending, fence);
}

/**
 * gst_npu_element_cancel_oldest_locked:
 * @pending: the fences of the tasks submitted to @queue, oldest first
 * @lock: the lock that guards @pending, held by the caller
 * @queue: the queue the tasks run on
 *
 * Cancels the oldest task of @pending that is not running yet, and lets go
 * of the signalled ones before it.  @lock is released around each
 * npu_queue_cancel(): a cancelled task's destroy function may take it.
 *
 * Returns: %TRUE if a task was cancelled
 */
gboolean
gst_npu_element_cancel_oldest_locked (GQueue * pending, GMutex * lock,
    NpuQueue * queue)
{
  GList *l;

  for (l = pending->head; l;) {
    NpuFence *fence = l->data;
    GList *next = l->next;
    gboolean done = npu_fence_is_signalled (fence), cancelled = FALSE;

    if (!done) {
      /* The job's destroy takes the lock: let go while cancelling. */
      g_mutex_unlock (lock);
      cancelled = npu_queue_cancel (queue, fence);
      g_mutex_lock (lock);
    }
    if (done || cancelled) {
      g_queue_delete_link (pending, l);
      npu_fence_unref (fence);
      if (cancelled)
        return TRUE;
    }
    l = next;
  }
  return FALSE;
}

/* Sets PREFIXbytes-KIND-read and -written (guint64) for every kind of
 * @bytes, PREFIXbytes-total, and PREFIXenergy-estimate-uj: the joules
 * those bytes cost at @pj_per_bit (npu_bytes_estimate_joules(), an
 * estimate, not a measurement), in microjoules. */
void
gst_npu_element_set_bytes_fields (GstStructure * s, const gchar * prefix,
    const NpuBytes * bytes, gdouble pj_per_bit)
{
  guint k;

  for (k = 0; k < NPU_BYTES_N_KINDS; k++) {
    gchar *r = g_strdup_printf ("%sbytes-%s-read", prefix,
        npu_bytes_kind_name (k));
    gchar *w = g_strdup_printf ("%sbytes-%s-written", prefix,
        npu_bytes_kind_name (k));

    gst_structure_set (s, r, G_TYPE_UINT64, bytes->read[k], w, G_TYPE_UINT64,
        bytes->written[k], NULL);
    g_free (r);
    g_free (w);
  }
  {
    gchar *t = g_strdup_printf ("%sbytes-total", prefix);
    gchar *e = g_strdup_printf ("%senergy-estimate-uj", prefix);

    gst_structure_set (s, t, G_TYPE_UINT64, npu_bytes_total (bytes), e,
        G_TYPE_DOUBLE, npu_bytes_estimate_joules (bytes, pj_per_bit) * 1e6,
        NULL);
    g_free (t);
    g_free (e);
  }
}
