/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the npu-timeline tracer */
#ifndef __GST_NPU_TIMELINE_H__
#define __GST_NPU_TIMELINE_H__

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_NPU_TIMELINE (gst_npu_timeline_get_type ())
G_DECLARE_FINAL_TYPE (GstNpuTimeline, gst_npu_timeline, GST, NPU_TIMELINE,
    GstTracer)

G_END_DECLS

#endif /* __GST_NPU_TIMELINE_H__ */
