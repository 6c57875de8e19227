/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: whatever PCM comes in to the 16 kHz mono float an audio
 * encoder reads */
#ifndef __GST_NPU_AUDIO_FRONTEND_H__
#define __GST_NPU_AUDIO_FRONTEND_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <gst/audio/audio.h>

G_BEGIN_DECLS

/**
 * GST_NPU_AUDIO_FRONTEND_QUALITY:
 *
 * GstAudioResampler's Kaiser quality used: the highest (10), whose filter
 * has 120 dB of stop-band attenuation, a pass band to 0.975 of the lower
 * Nyquist frequency, and costs little beside an encoder.
 */
#define GST_NPU_AUDIO_FRONTEND_QUALITY GST_AUDIO_RESAMPLER_QUALITY_MAX

typedef struct _GstNpuAudioFrontend GstNpuAudioFrontend;

GST_NPU_API
gboolean gst_npu_audio_frontend_parse_caps (const GstCaps * caps,
    GstAudioInfo * info, GError ** error);

GST_NPU_API
GstNpuAudioFrontend *gst_npu_audio_frontend_new (const GstAudioInfo * in,
    gint out_rate, GError ** error);
GST_NPU_API
void gst_npu_audio_frontend_free (GstNpuAudioFrontend * fe);
GST_NPU_API
void gst_npu_audio_frontend_reset (GstNpuAudioFrontend * fe);

GST_NPU_API
gsize gst_npu_audio_frontend_get_out_frames (GstNpuAudioFrontend * fe,
    gsize in_frames);
GST_NPU_API
gsize gst_npu_audio_frontend_get_latency (GstNpuAudioFrontend * fe);
GST_NPU_API
gsize gst_npu_audio_frontend_convert (GstNpuAudioFrontend * fe,
    gconstpointer in, gsize in_frames, gfloat * out);

G_END_DECLS

#endif /* __GST_NPU_AUDIO_FRONTEND_H__ */
