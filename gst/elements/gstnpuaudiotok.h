/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npuaudiotok, microphone audio to audio tokens */
#ifndef __GST_NPU_AUDIO_TOK_H__
#define __GST_NPU_AUDIO_TOK_H__

#include <gst/gst.h>
#include <npu/gstnpuencoderelement.h>

G_BEGIN_DECLS
#define GST_TYPE_NPU_AUDIO_TOK (gst_npu_audio_tok_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuAudioTok, gst_npu_audio_tok, GST,
    NPU_AUDIO_TOK, GstNpuEncoderElement)
/**
 * GstNpuAudioTokPolicy:
 * @GST_NPU_AUDIO_TOK_POLICY_BLOCK: wait for a slot (back-pressure upstream)
 * @GST_NPU_AUDIO_TOK_POLICY_DROP_NEWEST: drop the chunk just completed
 * @GST_NPU_AUDIO_TOK_POLICY_DROP_OLDEST: cancel the oldest chunk not yet
 *   being encoded; its token buffer, already pushed, carries a cancelled
 *   fence (npullm skips it; a map of it fails)
 */
     typedef enum
     {
       GST_NPU_AUDIO_TOK_POLICY_BLOCK,
       GST_NPU_AUDIO_TOK_POLICY_DROP_NEWEST,
       GST_NPU_AUDIO_TOK_POLICY_DROP_OLDEST,
     } GstNpuAudioTokPolicy;

GST_ELEMENT_REGISTER_DECLARE (npuaudiotok);

G_END_DECLS
#endif /* __GST_NPU_AUDIO_TOK_H__ */
