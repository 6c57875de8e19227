/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GStreamer's analytics metadata (gstreamer-analytics-1.0, 1.26)
 *
 * Built only where the library is (HAVE_GST_ANALYTICS): token buffers also
 * carry a GstTensorMeta over the same memory, so that analytics elements
 * and applications read them without knowing our metas; npullm takes its
 * tokens from a GstTensorMeta when that is all a buffer carries, and
 * attaches its answers to video frames as a GstAnalyticsClsMtd.
 */
#ifndef __GST_NPU_ANALYTICS_H__
#define __GST_NPU_ANALYTICS_H__

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#ifdef HAVE_GST_ANALYTICS

#include <gst/gst.h>
#include <gst/analytics/analytics.h>
#include <npu/gstnputokensmeta.h>

G_BEGIN_DECLS

/* GstTensor ids of the token tensors, one per modality */
#define GST_NPU_TENSOR_ID_VISION_TOKENS "npu-vision-tokens"
#define GST_NPU_TENSOR_ID_AUDIO_TOKENS "npu-audio-tokens"

/* The caption's GstAnalyticsClsMtd in a GstAnalyticsRelationMeta: its one
 * class is the answer's text (as a quark), its level 1.0 */

gboolean gst_npu_buffer_add_token_tensor (GstBuffer * buffer, GstMemory * tokens,
    GstNpuModality modality, guint n_tokens, guint dim);

GstBuffer *gst_npu_buffer_find_token_tensor (GstBuffer * buffer,
    GstNpuModality modality, guint n_embd, GError ** error);

gboolean gst_npu_buffer_add_caption_mtd (GstBuffer * buffer,
    const gchar * text);

G_END_DECLS

#endif /* HAVE_GST_ANALYTICS */
#endif /* __GST_NPU_ANALYTICS_H__ */
