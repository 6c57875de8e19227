/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: nputokenpay, token buffers to a byte stream */
#ifndef __GST_NPU_TOKEN_PAY_H__
#define __GST_NPU_TOKEN_PAY_H__

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_NPU_TOKEN_PAY (gst_npu_token_pay_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuTokenPay, gst_npu_token_pay, GST, NPU_TOKEN_PAY,
    GstElement)

GST_ELEMENT_REGISTER_DECLARE (nputokenpay);

G_END_DECLS

#endif /* __GST_NPU_TOKEN_PAY_H__ */
