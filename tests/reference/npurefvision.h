/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: double-precision reference of the vision preprocessing */
#ifndef __NPU_REF_VISION_H__
#define __NPU_REF_VISION_H__

#include <core/cpu/npuvisionprep.h>

G_BEGIN_DECLS

/* A source frame as the reference reads it: plane pointers and strides
 * (negative for bottom-up rows) */
typedef struct
{
  NpuPixelFormat format;
  guint width, height;
  const guint8 *planes[3];
  gssize strides[3];
} NpuRefFrame;

/* The whole preprocessing of @fr with @p (crop, stretch or letterbox,
 * colour conversion, normalisation); returns CHW doubles
 * [3][out_height][out_width] and the content rectangle it used (x, y,
 * width, height) in @rect.  Free with g_free(). */
gdouble *npu_ref_vision_prep (const NpuRefFrame * fr,
    const NpuVisionPrepParams * p, guint rect[4]);

/* CHW to [n_patches][3][patch][patch], patches in raster order */
gdouble *npu_ref_patchify (const gdouble * chw, guint ow, guint oh,
    guint patch);

G_END_DECLS

#endif /* __NPU_REF_VISION_H__ */
