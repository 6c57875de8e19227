/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: where the compute reads its input from
 *
 * One process-wide watch: the elements have no per-instance state for it,
 * and a test wants every element of a pipeline at once.  The function and
 * its data are set together under a lock; notify reads the function
 * pointer atomically first so that the common case (no watch) takes no
 * lock.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuinputwatch.h"

static GMutex watch_lock;
static GstNpuInputWatchFunc watch_func;
static gpointer watch_data;

/**
 * gst_npu_input_watch_set:
 * @func: (nullable): called for every input read, %NULL to remove the watch
 * @user_data: passed to @func
 *
 * Installs the process-wide input watch (a test hook: see
 * gstnpuinputwatch.h).
 */
void
gst_npu_input_watch_set (GstNpuInputWatchFunc func, gpointer user_data)
{
  g_mutex_lock (&watch_lock);
  watch_data = user_data;
  g_atomic_pointer_set (&watch_func, func);
  g_mutex_unlock (&watch_lock);
}

/**
 * gst_npu_input_watch_notify:
 * @element: the element about to read
 * @data: the first input byte its compute reads
 * @size: the extent it reads
 *
 * Tells the watch, if one is set, where @element's compute reads its input.
 */
void
gst_npu_input_watch_notify (GstObject * element, const guint8 * data,
    gsize size)
{
  if (!g_atomic_pointer_get (&watch_func))
    return;
  g_mutex_lock (&watch_lock);
  if (watch_func)
    watch_func (element, data, size, watch_data);
  g_mutex_unlock (&watch_lock);
}
