/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npuvisiontok, camera frames to vision tokens */
#ifndef __GST_NPU_VISION_TOK_H__
#define __GST_NPU_VISION_TOK_H__

#include <gst/gst.h>
#include <npu/gstnpuencoderelement.h>

G_BEGIN_DECLS

#define GST_TYPE_NPU_VISION_TOK (gst_npu_vision_tok_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuVisionTok, gst_npu_vision_tok, GST,
    NPU_VISION_TOK, GstNpuEncoderElement)

/**
 * GstNpuVisionTokPolicy:
 * @GST_NPU_VISION_TOK_POLICY_BLOCK: wait for a slot (back-pressure upstream)
 * @GST_NPU_VISION_TOK_POLICY_DROP_NEWEST: drop the incoming frame
 * @GST_NPU_VISION_TOK_POLICY_DROP_OLDEST: cancel the oldest frame not yet
 *   being encoded; its token buffer, already pushed, carries a cancelled
 *   fence (npullm skips it; a map of it fails)
 */
typedef enum
{
  GST_NPU_VISION_TOK_POLICY_BLOCK,
  GST_NPU_VISION_TOK_POLICY_DROP_NEWEST,
  GST_NPU_VISION_TOK_POLICY_DROP_OLDEST,
} GstNpuVisionTokPolicy;

GST_ELEMENT_REGISTER_DECLARE (npuvisiontok);

G_END_DECLS

#endif /* __GST_NPU_VISION_TOK_H__ */
