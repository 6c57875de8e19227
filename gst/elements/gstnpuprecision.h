/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the `precision` property's type, shared by npuvisiontok and
 * npullm */
#ifndef __GST_NPU_PRECISION_H__
#define __GST_NPU_PRECISION_H__

#include <glib-object.h>

G_BEGIN_DECLS

/**
 * GstNpuPrecision:
 * @GST_NPU_PRECISION_FAST: int8 activations in the matrix products (as
 *   llama.cpp), error up to max|x| / 254 per element of a block of 32
 * @GST_NPU_PRECISION_ACCURATE: int8 activations plus their int8 residual
 *   (about 16 bits), error up to max|x| / 64516; twice the integer work
 *
 * The values of the core's NpuMatmulPrecision.
 */
typedef enum
{
  GST_NPU_PRECISION_FAST,
  GST_NPU_PRECISION_ACCURATE,
} GstNpuPrecision;

#define GST_TYPE_NPU_PRECISION (gst_npu_precision_get_type ())
G_GNUC_INTERNAL GType gst_npu_precision_get_type (void);

G_END_DECLS

#endif /* __GST_NPU_PRECISION_H__ */
