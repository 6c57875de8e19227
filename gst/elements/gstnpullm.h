/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npullm, tokens and prompts to streaming text */
#ifndef __GST_NPU_LLM_H__
#define __GST_NPU_LLM_H__

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_NPU_LLM (gst_npu_llm_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuLlm, gst_npu_llm, GST, NPU_LLM, GstElement)

/**
 * GstNpuLlmOutput:
 * @GST_NPU_LLM_OUTPUT_TOKEN: a buffer per generated piece of text
 * @GST_NPU_LLM_OUTPUT_SENTENCE: a buffer per sentence or line
 * @GST_NPU_LLM_OUTPUT_RESPONSE: one buffer per answer
 * @GST_NPU_LLM_OUTPUT_CAPTION: one buffer per answer, timed as a subtitle:
 *   valid until the next answer (or for #GstNpuLlm:caption-duration), a
 *   gap event when the answer is empty
 */
typedef enum
{
  GST_NPU_LLM_OUTPUT_TOKEN,
  GST_NPU_LLM_OUTPUT_SENTENCE,
  GST_NPU_LLM_OUTPUT_RESPONSE,
  GST_NPU_LLM_OUTPUT_CAPTION,
} GstNpuLlmOutput;

GST_ELEMENT_REGISTER_DECLARE (npullm);

G_END_DECLS

#endif /* __GST_NPU_LLM_H__ */
