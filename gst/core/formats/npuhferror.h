/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the errors of reading a Hugging Face model directory
 * (npuhfmodel.h, npuhftokenizer.h)
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_HF_ERROR_H__
#define __NPU_HF_ERROR_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS
#define NPU_HF_MODEL_ERROR (npu_hf_model_error_quark ())
NPU_API
GQuark npu_hf_model_error_quark (void);

typedef enum
{
  NPU_HF_MODEL_ERROR_IO,        /* a file is missing or unreadable */
  NPU_HF_MODEL_ERROR_FORMAT,    /* a file is malformed or inconsistent */
  NPU_HF_MODEL_ERROR_UNSUPPORTED,       /* well formed, not for us */
} NpuHfModelError;

G_END_DECLS
#endif /* __NPU_HF_ERROR_H__ */
