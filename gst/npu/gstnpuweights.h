/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: collecting a model's tensors from a `weights` pad
 *
 * What npullm and npuvisiontok do with the buffers mxfp4weights pushes:
 * keep them, note which file they came from (the `npu-model` event), and
 * once the stream ends map each one (waiting for its conversion fence) so
 * the model can read its tensors by name, in place, for as long as the
 * collection lives.
 */
#ifndef __GST_NPU_WEIGHTS_H__
#define __GST_NPU_WEIGHTS_H__

#include <gst/gst.h>
#include <core/nputensorview.h>

G_BEGIN_DECLS

typedef struct _GstNpuWeights GstNpuWeights;

GstNpuWeights *gst_npu_weights_new (void);
void gst_npu_weights_free (GstNpuWeights * weights);

gboolean gst_npu_weights_add (GstNpuWeights * weights, GstBuffer * buffer);
gboolean gst_npu_weights_take_event (GstNpuWeights * weights,
    GstEvent * event);
const gchar *gst_npu_weights_get_location (GstNpuWeights * weights);
gboolean gst_npu_weights_map (GstNpuWeights * weights, GError ** error);
gboolean gst_npu_weights_lookup (GstNpuWeights * weights, const gchar * name,
    NpuTensorView * tensor);

G_END_DECLS

#endif /* __GST_NPU_WEIGHTS_H__ */
