/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the errors of reading a Hugging Face model directory */
#include "npuhferror.h"

GQuark
npu_hf_model_error_quark (void)
{
  return g_quark_from_static_string ("npu-hf-model-error-quark");
}
