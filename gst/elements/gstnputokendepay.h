/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: nputokendepay, a byte stream back to token buffers */
#ifndef __GST_NPU_TOKEN_DEPAY_H__
#define __GST_NPU_TOKEN_DEPAY_H__

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_NPU_TOKEN_DEPAY (gst_npu_token_depay_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuTokenDepay, gst_npu_token_depay, GST,
    NPU_TOKEN_DEPAY, GstElement)

GST_ELEMENT_REGISTER_DECLARE (nputokendepay);

G_END_DECLS

#endif /* __GST_NPU_TOKEN_DEPAY_H__ */
