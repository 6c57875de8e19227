/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the error domain of the encoders
 *
 * The vision encoder (npuvit.h), the audio encoder (npuaudioenc.h) and the
 * pieces they share (npuencoder.h) report their errors in this one domain.
 * It lives below all three, so that the shared pieces need not include an
 * encoder that is built from them.  npuvit.h includes it.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_VIT_ERROR_H__
#define __NPU_VIT_ERROR_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS

#define NPU_VIT_ERROR (npu_vit_error_quark ())
NPU_API
GQuark npu_vit_error_quark (void);

/**
 * NpuVitError:
 * @NPU_VIT_ERROR_NOT_MMPROJ: general.architecture is not "clip", or the
 *   file has no vision encoder
 * @NPU_VIT_ERROR_MISSING: a required key or tensor is absent
 * @NPU_VIT_ERROR_SHAPE: a tensor's dimensions or a hyper-parameter do not
 *   fit the others
 * @NPU_VIT_ERROR_UNSUPPORTED: well-formed but not handled here: projector
 *   type, tensor type, feature layers
 *
 * A task cancelled during npu_vit_encode() or npu_audio_enc_encode() fails
 * with NPU_FENCE_ERROR_CANCELLED, the backend's one code for cancellation.
 */
typedef enum
{
  NPU_VIT_ERROR_NOT_MMPROJ,
  NPU_VIT_ERROR_MISSING,
  NPU_VIT_ERROR_SHAPE,
  NPU_VIT_ERROR_UNSUPPORTED,
} NpuVitError;

G_END_DECLS

#endif /* __NPU_VIT_ERROR_H__ */
