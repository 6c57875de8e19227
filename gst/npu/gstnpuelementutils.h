/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what the elements each did alike
 *
 * The compute queue every element runs its tasks on, the element error
 * for a model file that is missing, unreadable or malformed, so that every
 * element (mxfp4weights too) says it in the same words, and the list of
 * fences of the encodes npuvisiontok and npuaudiotok have submitted, which
 * their drop-oldest policy cancels from; the bytes-moved fields of the
 * stats messages.
 */
#ifndef __GST_NPU_ELEMENT_UTILS_H__
#define __GST_NPU_ELEMENT_UTILS_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <core/device/npubackend.h>
#include <core/device/npubytes.h>

G_BEGIN_DECLS

GST_NPU_API
NpuQueue *gst_npu_element_new_queue (GstElement * element, guint n_threads);

GST_NPU_API
void gst_npu_element_post_model_open_error (GstElement * element,
    const gchar * path, const gchar * format, const GError * error);

GST_NPU_API
void gst_npu_element_push_fence_locked (GQueue * pending, NpuFence * fence);

GST_NPU_API
gboolean gst_npu_element_cancel_oldest_locked (GQueue * pending,
    GMutex * lock, NpuQueue * queue);

/* The default of the elements' pj-per-bit property, and its range */
#define GST_NPU_PJ_PER_BIT_MIN 0.1
#define GST_NPU_PJ_PER_BIT_MAX 100.0

GST_NPU_API
void gst_npu_element_set_bytes_fields (GstStructure * s,
    const gchar * prefix, const NpuBytes * bytes, gdouble pj_per_bit);

G_END_DECLS

#endif /* __GST_NPU_ELEMENT_UTILS_H__ */
