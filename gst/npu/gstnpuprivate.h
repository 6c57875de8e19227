/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: helpers shared inside libgstnpu (not installed) */
#ifndef __GST_NPU_PRIVATE_H__
#define __GST_NPU_PRIVATE_H__

#include <glib.h>

G_BEGIN_DECLS

G_GNUC_INTERNAL
gboolean gst_npu_dmabuf_sync (int fd, guint64 flags);

G_END_DECLS

#endif /* __GST_NPU_PRIVATE_H__ */
