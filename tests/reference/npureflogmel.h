/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: double-precision reference of the Whisper log-mel */
#ifndef __NPU_REF_LOG_MEL_H__
#define __NPU_REF_LOG_MEL_H__

#include <glib.h>
#include <stddef.h>

G_BEGIN_DECLS

/* The normalised log-mel llama.cpp's Whisper preprocessor
 * (tools/mtmd/mtmd-audio.cpp) computes for the clip @s of @n 16 kHz
 * samples: its first @n_frames frames, @n_mels rows of @n_frames values
 * (g_free() it).  Direct DFT, Slaney filters and periodic Hann in double,
 * from the definitions. */
double *npu_ref_log_mel (const float *s, size_t n, guint n_frames,
    guint n_mels);

G_END_DECLS

#endif /* __NPU_REF_LOG_MEL_H__ */
