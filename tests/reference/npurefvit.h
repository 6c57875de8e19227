/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: double-precision reference of the vision encoder */
#ifndef __NPU_REF_VIT_H__
#define __NPU_REF_VIT_H__

#include <core/formats/npugguf.h>
#include <core/models/npuvit.h>

G_BEGIN_DECLS

/* Where the reference finds the model: hyper-parameters from @gguf, tensors
 * from @func (called with @user_data) or, with @func NULL, from @gguf. */
typedef struct
{
  const NpuGguf *gguf;
  NpuTensorLookup func;
  gpointer user_data;
} NpuRefLookup;

/* Encodes @patches ([n_patches][3][patch][patch], normalised) into
 * @out ([n_tokens][out_dim]).  With @q8, every activation row entering an
 * MXFP4 product is first rounded as the int8 kernels document it
 * (blocks of 32, d = max |x| / 127, x -> d round (x / d)). */
void npu_ref_vit_encode (const NpuRefLookup * lk, const double *patches,
    gboolean q8, double *out);

/* y[@n][@rows] = x[@n][@k] W^T (+ @b, which may be NULL), in double;
 * with @q8, each row of x first rounded as the int8 kernels round it (as
 * npu_ref_vit_encode() says).  The encoders' references share it. */
void npu_ref_linear (const double *x, gsize n, gsize k, const double *w,
    gsize rows, const double *b, gboolean q8, double *y);

/* att[@n][@dim] = softmax (q k^T / sqrt (hd)) v for each of @heads heads
 * of hd = @dim / @heads columns, every row attending to every row (no
 * mask), in double.  The encoders' references share it. */
void npu_ref_attention (const double *q, const double *k, const double *v,
    gsize n, gsize dim, guint heads, double *att);

/* max |y - ref| / rms (ref) over @n values, in @err: how the vision tests
 * measure an output against its reference.  FALSE if a value of @y is not
 * finite or @ref is all zero (nothing to measure against). */
gboolean npu_ref_error_over_rms (const float *y, const double *ref, gsize n,
    double *err);

G_END_DECLS

#endif /* __NPU_REF_VIT_H__ */
