/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what the GGUF reader (npugguf.c) shares with the writer
 * (npuggufwriter.c): the size of a metadata scalar, so both lay values
 * out alike
 */
#ifndef __NPU_GGUF_PRIVATE_H__
#define __NPU_GGUF_PRIVATE_H__

#include "npugguf.h"

G_BEGIN_DECLS

/* Bytes of one value of GGUF metadata type @type (a NpuGgufType, as the
 * file stores it); 0 for a string, an array or a type GGUF does not
 * define. */
static inline gsize
npu_gguf_scalar_size (guint32 type)
{
  switch (type) {
    case NPU_GGUF_TYPE_UINT8:
    case NPU_GGUF_TYPE_INT8:
    case NPU_GGUF_TYPE_BOOL:
      return 1;
    case NPU_GGUF_TYPE_UINT16:
    case NPU_GGUF_TYPE_INT16:
      return 2;
    case NPU_GGUF_TYPE_UINT32:
    case NPU_GGUF_TYPE_INT32:
    case NPU_GGUF_TYPE_FLOAT32:
      return 4;
    case NPU_GGUF_TYPE_UINT64:
    case NPU_GGUF_TYPE_INT64:
    case NPU_GGUF_TYPE_FLOAT64:
      return 8;
    default:
      return 0;
  }
}

G_END_DECLS

#endif /* __NPU_GGUF_PRIVATE_H__ */
