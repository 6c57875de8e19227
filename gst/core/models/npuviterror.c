/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the error domain of the encoders; see npuviterror.h */
#include "npuviterror.h"

G_DEFINE_QUARK (npu - vit - error - quark, npu_vit_error);
