/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: token tensors on a byte stream
 *
 * One packet per token buffer: a fixed 80-byte header (little-endian)
 * followed by n_tokens * dim float32 values (little-endian IEEE 754).
 *
 *   0  "NPUT"            magic
 *   4  u16 version (1)   u16 header size (80)
 *   8  u32 modality      0 vision, 1 audio
 *  12  u32 n_tokens      u32 dim      u32 grid_width   u32 grid_height
 *  28  u32 flags         bit 0: discont
 *  32  u64 pts           u64 duration (of the token buffer)
 *  48  u64 source_pts    u64 source_duration (of the media encoded)
 *  64  u64 payload size  (n_tokens * dim * 4)
 *  72  u64 reserved (0)
 *
 * GStreamer's gdppay carries timestamps and caps but no metas on any
 * version, so the grid, modality and source times travel here.  Plain C,
 * no GStreamer types: the parser is fuzzed on its own.
 */
#ifndef __NPU_TOKEN_WIRE_H__
#define __NPU_TOKEN_WIRE_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS

#define NPU_TOKEN_WIRE_HEADER_SIZE 80
#define NPU_TOKEN_WIRE_VERSION 1
/* A packet larger than this is refused before anything is allocated */
#define NPU_TOKEN_WIRE_MAX_PAYLOAD (256u << 20)

#define NPU_TOKEN_WIRE_FLAG_DISCONT (1u << 0)

#define NPU_TOKEN_WIRE_ERROR (npu_token_wire_error_quark ())

typedef struct
{
  guint32 modality;
  guint32 n_tokens;
  guint32 dim;
  guint32 grid_width;
  guint32 grid_height;
  guint32 flags;
  guint64 pts;
  guint64 duration;
  guint64 source_pts;
  guint64 source_duration;
  guint64 payload_size;
} NpuTokenWireHeader;

NPU_API
GQuark npu_token_wire_error_quark (void);

NPU_API
void npu_token_wire_write_header (const NpuTokenWireHeader * h,
    guint8 out[NPU_TOKEN_WIRE_HEADER_SIZE]);

NPU_API
gboolean npu_token_wire_read_header (const guint8 * data, gsize size,
    NpuTokenWireHeader * h, GError ** error);

NPU_API
gboolean npu_token_wire_check_payload (const NpuTokenWireHeader * h,
    const guint8 * data, gsize size, GError ** error);

G_END_DECLS

#endif /* __NPU_TOKEN_WIRE_H__ */
