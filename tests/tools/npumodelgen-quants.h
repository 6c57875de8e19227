/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: the model generator's writers of ggml's weight types
 * (internal to npumodelgen.c and its tests) */
#ifndef __NPU_MODEL_GEN_QUANTS_H__
#define __NPU_MODEL_GEN_QUANTS_H__

#include <glib.h>

G_BEGIN_DECLS

/* Round to nearest even, as ggml's GGML_FP32_TO_FP16 / _BF16 */
guint16   npu_model_gen_f32_to_f16   (float f);
guint16   npu_model_gen_f32_to_bf16  (float f);

/* Writes @n values (a whole number of @type's blocks) of @x as @type:
 * F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (ggml's reference
 * quantisers, the same bytes), Q4_K, Q5_K, Q6_K (a one-pass quantiser:
 * ggml's block layouts and scale packing, each sub-block's range split
 * evenly, without ggml's search for the best scale), MXFP4 (the codec).
 * FALSE for any other type. */
gboolean  npu_model_gen_quantize_row (guint32 type, const float *x,
                                      guint8 *dst, gsize n);

/* llama-quantize's fallback for a row of @ne0 values that is not whole
 * 256-value super-blocks (llama-quant.cpp): Q4_K -> Q5_0, Q5_K -> Q5_1,
 * Q6_K -> Q8_0, and F16 where even those do not fit; @type otherwise */
guint32   npu_model_gen_row_type     (guint32 type, guint64 ne0);

G_END_DECLS

#endif /* __NPU_MODEL_GEN_QUANTS_H__ */
