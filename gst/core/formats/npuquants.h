/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: ggml's weight types, block by block, decoded as ggml decodes them
 *
 * The block layouts of ggml-common.h for the types llama.cpp's
 * llama-quantize writes (the presets Q4_0, Q4_K_M, Q5_K_M, Q6_K, Q8_0, F16
 * and BF16, their fallbacks Q4_1, Q5_0, Q5_1 for rows that are not a
 * multiple of 256, and MXFP4), read in place from a file's mapping, and
 * the scalar references every product kernel of these types is tested
 * against:
 *
 *   npu_quants_dequantize_row()  a row to F32, each value computed in F32
 *                                exactly as ggml's dequantize_row_<type>
 *                                (the same products and sums in the same
 *                                order, so the same bits);
 *   npu_quants_dot_row()         sum over the row of value x activation,
 *                                the values as above, products and sum in
 *                                double: the reference of a matrix-vector
 *                                product's one output.
 *
 * Every multi-byte field is little-endian in the file, as ggml writes it on
 * every host it runs on; the decoders read the fields byte by byte, so
 * blocks need no alignment and a big-endian host reads them right.
 */
#ifndef __NPU_QUANTS_H__
#define __NPU_QUANTS_H__

#include <glib.h>

#include "core/device/npuapi.h"

G_BEGIN_DECLS

/* Values in one Q4_K, Q5_K or Q6_K super-block (ggml's QK_K) */
#define NPU_QK_K 256

/* TRUE when the ggml @type has a decoder here: F32, F16, BF16, Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4 */
NPU_API
gboolean npu_quants_supported      (guint32 type);

/* Bytes of a row of @n values of @type, or 0 when @type has no decoder
 * here or @n is not a whole number of its blocks */
NPU_API
gsize    npu_quants_row_bytes      (guint32 type, gsize n);

/* Decodes the row of @n values of @type at @src (npu_quants_row_bytes()
 * bytes, any alignment) into @dst.  FALSE, with nothing written, when the
 * type has no decoder or @n is not a whole number of blocks. */
NPU_API
gboolean npu_quants_dequantize_row (guint32 type, const void *src,
                                    float *dst, gsize n);

/* The reference dot product of the row at @src (@n values of @type) with
 * @x: sum of value * x[i] in double, each value decoded as
 * npu_quants_dequantize_row() decodes it.  NaN when the type has no
 * decoder or @n is not a whole number of blocks. */
NPU_API
double   npu_quants_dot_row        (guint32 type, const void *src,
                                    const float *x, gsize n);

G_END_DECLS

#endif /* __NPU_QUANTS_H__ */
