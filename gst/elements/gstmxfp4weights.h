/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: mxfp4weights, a model file's tensors as MXFP4 buffers */
#ifndef __GST_MXFP4_WEIGHTS_H__
#define __GST_MXFP4_WEIGHTS_H__

#include <gst/gst.h>
#include <gst/base/gstbasesrc.h>

G_BEGIN_DECLS

#define GST_TYPE_MXFP4_WEIGHTS (gst_mxfp4_weights_get_type ())
G_DECLARE_FINAL_TYPE (GstMxfp4Weights, gst_mxfp4_weights, GST, MXFP4_WEIGHTS,
    GstBaseSrc)

GST_ELEMENT_REGISTER_DECLARE (mxfp4weights);

G_END_DECLS

#endif /* __GST_MXFP4_WEIGHTS_H__ */
