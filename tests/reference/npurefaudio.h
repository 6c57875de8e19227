/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: double-precision reference of the audio encoder */
#ifndef __NPU_REF_AUDIO_H__
#define __NPU_REF_AUDIO_H__

#include "tests/reference/npurefvit.h"

G_BEGIN_DECLS

/* Encodes @mel ([n_mels][n_frames], normalised log-mel, n_frames even)
 * with the audio mmproj of @lk into @out ([n_tokens][out_dim]) and
 * returns n_tokens.  @q8 as for npu_ref_vit_encode(): every activation
 * row entering an MXFP4 product is first rounded as the int8 kernels
 * do. */
guint npu_ref_audio_encode (const NpuRefLookup * lk, const double *mel,
    guint n_frames, gboolean q8, double *out);

G_END_DECLS

#endif /* __NPU_REF_AUDIO_H__ */
