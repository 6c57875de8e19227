/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GST_NPU_API, the mark of libgstnpu-1.0's public functions, as
 * GStreamer's libraries have GST_VIDEO_API and the like */
#ifndef __GST_NPU_API_H__
#define __GST_NPU_API_H__

#include <gst/gst.h>

#ifndef GST_NPU_API
#ifdef BUILDING_GST_NPU
#define GST_NPU_API GST_API_EXPORT
#else
#define GST_NPU_API GST_API_IMPORT
#endif
#endif

#endif /* __GST_NPU_API_H__ */
