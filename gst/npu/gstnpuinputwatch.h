/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: where the compute reads its input from
 *
 * Elements call gst_npu_input_watch_notify() with the address and size of
 * the input bytes their compute is about to read (a frame's planes, a
 * chunk of PCM).  A test or a debugging tool installs a watch and compares
 * those addresses with the memory it handed upstream: an input read in
 * place lies inside upstream's memory; a copy anywhere on the way (a deep
 * copy of the buffer, a staging copy in an import path) lies elsewhere.
 * Without a watch the cost is one atomic pointer load per plane.
 */
#ifndef __GST_NPU_INPUT_WATCH_H__
#define __GST_NPU_INPUT_WATCH_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>

G_BEGIN_DECLS

/**
 * GstNpuInputWatchFunc:
 * @element: the element whose compute reads the bytes
 * @data: the first byte it reads
 * @size: how many bytes from @data it may read
 * @user_data: what gst_npu_input_watch_set() was given
 *
 * Called from the element's streaming thread or its compute task, so it
 * must be thread-safe and must not block.
 */
typedef void (*GstNpuInputWatchFunc) (GstObject * element,
    const guint8 * data, gsize size, gpointer user_data);

GST_NPU_API
void gst_npu_input_watch_set (GstNpuInputWatchFunc func, gpointer user_data);
GST_NPU_API
void gst_npu_input_watch_notify (GstObject * element, const guint8 * data,
    gsize size);

G_END_DECLS

#endif /* __GST_NPU_INPUT_WATCH_H__ */
