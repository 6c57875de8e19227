/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the Whisper log-mel spectrogram, as llama.cpp's audio models
 * expect it */
#ifndef __GST_NPU_LOG_MEL_H__
#define __GST_NPU_LOG_MEL_H__

#include <glib.h>
#include <npu/gstnpuapi.h>
#include <core/device/npubytes.h>

G_BEGIN_DECLS

/* Whisper's fixed analysis: 16 kHz, 25 ms windows every 10 ms. */
#define GST_NPU_LOG_MEL_SAMPLE_RATE 16000
#define GST_NPU_LOG_MEL_N_FFT 400
#define GST_NPU_LOG_MEL_HOP 160

typedef struct _GstNpuLogMel GstNpuLogMel;

GST_NPU_API
GstNpuLogMel *gst_npu_log_mel_new (guint n_mels);
GST_NPU_API
void gst_npu_log_mel_free (GstNpuLogMel * lm);
GST_NPU_API
guint gst_npu_log_mel_get_n_mels (const GstNpuLogMel * lm);

GST_NPU_API
void gst_npu_log_mel_compute (GstNpuLogMel * lm, const gfloat * samples,
    gsize n_samples, guint n_frames, gfloat * mel);
GST_NPU_API
void gst_npu_log_mel_compute_counted (GstNpuLogMel * lm,
    const gfloat * samples, gsize n_samples, guint n_frames, gfloat * mel,
    NpuBytes * bytes);

G_END_DECLS

#endif /* __GST_NPU_LOG_MEL_H__ */
