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

/**
 * GstNpuLlmKvType:
 * @GST_NPU_LLM_KV_TYPE_F32: keys and values in 32-bit floats
 * @GST_NPU_LLM_KV_TYPE_F16: in 16-bit floats (half the memory)
 * @GST_NPU_LLM_KV_TYPE_Q8_0: in ggml's Q8_0 blocks (34 bytes per 32)
 *
 * The same values as the core's NpuKvType.
 */
typedef enum
{
  GST_NPU_LLM_KV_TYPE_F32,
  GST_NPU_LLM_KV_TYPE_F16,
  GST_NPU_LLM_KV_TYPE_Q8_0,
} GstNpuLlmKvType;

/**
 * GstNpuLlmDecodePolicy:
 * @GST_NPU_LLM_DECODE_AS_FAST_AS_POSSIBLE: every token on every thread,
 *   each started as soon as the last is done
 * @GST_NPU_LLM_DECODE_PACED: tokens at #GstNpuLlm:decode-rate, each on the
 *   fewest threads that hold the rate, the cores idle in between
 *
 * Since: 0.1
 */
typedef enum
{
  GST_NPU_LLM_DECODE_AS_FAST_AS_POSSIBLE,
  GST_NPU_LLM_DECODE_PACED,
} GstNpuLlmDecodePolicy;

GST_ELEMENT_REGISTER_DECLARE (npullm);

G_END_DECLS

#endif /* __GST_NPU_LLM_H__ */
