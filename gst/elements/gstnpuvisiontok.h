/* gst-npu: npuvisiontok, camera frames to vision tokens */
#ifndef __GST_NPU_VISION_TOK_H__
#define __GST_NPU_VISION_TOK_H__

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_NPU_VISION_TOK (gst_npu_vision_tok_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuVisionTok, gst_npu_vision_tok, GST,
    NPU_VISION_TOK, GstElement)

/**
 * GstNpuVisionTokPolicy:
 * @GST_NPU_VISION_TOK_POLICY_BLOCK: wait for a slot (back-pressure upstream)
 * @GST_NPU_VISION_TOK_POLICY_DROP_NEWEST: drop the incoming frame
 */
typedef enum
{
  GST_NPU_VISION_TOK_POLICY_BLOCK,
  GST_NPU_VISION_TOK_POLICY_DROP_NEWEST,
} GstNpuVisionTokPolicy;

GST_ELEMENT_REGISTER_DECLARE (npuvisiontok);

G_END_DECLS

#endif /* __GST_NPU_VISION_TOK_H__ */
