/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: collecting a model's tensors from a `weights` pad
 *
 * What npullm and npuvisiontok do with the buffers mxfp4weights pushes:
 * keep them, note which file they came from (the `npu-model` event), and
 * once the stream ends map each one (waiting for its conversion fence) so
 * the model can read its tensors by name, in place, for as long as the
 * collection lives.
 *
 * GstNpuWeightsInput is the `weights` request pad itself, as the elements
 * share it: the pad, its chain and event functions, and the choice between
 * the `model` property and the pad when the element starts.
 */
#ifndef __GST_NPU_WEIGHTS_H__
#define __GST_NPU_WEIGHTS_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <core/device/nputensorview.h>

G_BEGIN_DECLS

typedef struct _GstNpuWeights GstNpuWeights;

GST_NPU_API
GstNpuWeights *gst_npu_weights_new (void);
GST_NPU_API
void gst_npu_weights_free (GstNpuWeights * weights);

GST_NPU_API
gboolean gst_npu_weights_add (GstNpuWeights * weights, GstBuffer * buffer);
GST_NPU_API
gboolean gst_npu_weights_take_event (GstNpuWeights * weights,
    GstEvent * event);
GST_NPU_API
const gchar *gst_npu_weights_get_location (GstNpuWeights * weights);
GST_NPU_API
gboolean gst_npu_weights_map (GstNpuWeights * weights, GError ** error);
GST_NPU_API
gboolean gst_npu_weights_lookup (GstNpuWeights * weights, const gchar * name,
    NpuTensorView * tensor);

typedef struct _GstNpuWeightsInput GstNpuWeightsInput;

/**
 * GstNpuWeightsLoadFunc:
 * @element: the element
 * @location: the model file, for its metadata
 * @weights: (nullable): the tensors from the weights pad, mapped; %NULL
 *   when the element loads the file of its `model` property
 *
 * Loads the model; posts the element error itself when it cannot.
 *
 * Returns: %TRUE if the model was loaded.
 */
typedef gboolean (*GstNpuWeightsLoadFunc) (GstElement * element,
    const gchar * location, GstNpuWeights * weights);

GST_NPU_API
GstNpuWeightsInput *gst_npu_weights_input_new (GstElement * element,
    GstNpuWeightsLoadFunc load);
GST_NPU_API
void gst_npu_weights_input_free (GstNpuWeightsInput * input);
GST_NPU_API
GstPad *gst_npu_weights_input_request_pad (GstNpuWeightsInput * input,
    GstPadTemplate * templ);
GST_NPU_API
gboolean gst_npu_weights_input_release_pad (GstNpuWeightsInput * input,
    GstPad * pad);
GST_NPU_API
gboolean gst_npu_weights_input_start (GstNpuWeightsInput * input,
    const gchar * model);
GST_NPU_API
void gst_npu_weights_input_stop (GstNpuWeightsInput * input);

G_END_DECLS

#endif /* __GST_NPU_WEIGHTS_H__ */
