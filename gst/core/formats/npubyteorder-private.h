/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: little-endian loads and stores at any alignment, for the file
 * and wire formats (GGUF, the token stream) */
#ifndef __NPU_BYTEORDER_PRIVATE_H__
#define __NPU_BYTEORDER_PRIVATE_H__

#include <glib.h>
#include <string.h>

G_BEGIN_DECLS

static inline guint16
npu_load_le16 (const guint8 * p)
{
  guint16 v;

  memcpy (&v, p, 2);
  return GUINT16_FROM_LE (v);
}

static inline guint32
npu_load_le32 (const guint8 * p)
{
  guint32 v;

  memcpy (&v, p, 4);
  return GUINT32_FROM_LE (v);
}

static inline guint64
npu_load_le64 (const guint8 * p)
{
  guint64 v;

  memcpy (&v, p, 8);
  return GUINT64_FROM_LE (v);
}

static inline void
npu_store_le32 (guint8 * p, guint32 v)
{
  v = GUINT32_TO_LE (v);
  memcpy (p, &v, 4);
}

static inline void
npu_store_le64 (guint8 * p, guint64 v)
{
  v = GUINT64_TO_LE (v);
  memcpy (p, &v, 8);
}

G_END_DECLS

#endif /* __NPU_BYTEORDER_PRIVATE_H__ */
