/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: fused image preprocessing for vision encoders
 *
 * One pass from a video frame, read in place (plane pointers and strides,
 * e.g. a mapped camera dma-buf), to the encoder's input tensor:
 *
 *   crop -> letterbox or stretch -> resize -> colour conversion ->
 *   mean/std normalisation -> CHW image or ViT patch layout
 *
 * without ever making a full-size RGB copy of the frame: each worker keeps
 * only the few converted source rows its current output row needs.
 *
 * The maths, exactly (docs/visionprep.md has the long form):
 *
 *  - Colour: YUV formats use the plan's matrix (BT.601 or BT.709) and range
 *    (limited: Y 16..235, C 16..240; full: 0..255, C centred on 128).  Each
 *    source pixel becomes R, G, B in [0, 1], clamped to [0, 1] (as an 8-bit
 *    converter would, so out-of-gamut pixels look as they did in training).
 *    RGB formats are taken as they are (x / 255); GRAY8 is luma in the
 *    plan's range, R = G = B.
 *  - Chroma siting: centre.  A 4:2:0 chroma sample covers its 2x2 luma
 *    block (4:2:2: its 2x1 pair) and is reconstructed as a box, i.e. luma
 *    pixel (x, y) uses chroma sample (x / 2, y / 2) in frame coordinates,
 *    whatever the crop.  Odd widths and heights use the last, partly
 *    covered chroma sample.
 *  - Geometry: the crop rectangle is resized to the content rectangle:
 *    the whole output (STRETCH), or the largest centred rectangle of the
 *    crop's aspect (LETTERBOX; the rest is filled with @fill_rgb).
 *  - Filter, per axis, with scale s = source size / content size:
 *    s <= 2: bilinear with half-pixel centres (OpenCV / PIL): source
 *    coordinate (x + 0.5) * s - 0.5, clamped to [0, size - 1];
 *    s > 2: area average of the footprint [x * s, (x + 1) * s), every
 *    source pixel weighted by its overlap (OpenCV INTER_AREA), so strong
 *    down-scaling does not alias.  At s = 2 both give the same weights.
 *  - Normalisation: (v - mean[c]) / std[c], v in [0, 1].
 *  - Layout CHW: out[(c * height + y) * width + x].
 *    Layout PATCHES: F32 [n_patches][3][patch][patch], patches in raster
 *    order, i.e. out[((py * (width / patch) + px) * 3 + c) * patch * patch
 *    + dy * patch + dx]: the order of a conv2d weight [dim][3][ph][pw]
 *    (ggml's v.patch_embd.weight, ne = [patch, patch, 3, dim]) flattened,
 *    so the patch embedding is one matmul.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_VISION_PREP_H__
#define __NPU_VISION_PREP_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/device/npubackend.h"
#include "core/device/npubytes.h"

G_BEGIN_DECLS

/**
 * NpuPixelFormat:
 *
 * Source pixel formats (the element maps GstVideoFormat onto these).
 * Byte orders are GStreamer's: RGBx is R, G, B, x in memory.  Planes:
 * NV12 Y + interleaved UV (U first); I420 Y, U, V; the others one plane.
 */
typedef enum
{
  NPU_PIXEL_FORMAT_UNKNOWN = 0,
  NPU_PIXEL_FORMAT_NV12,
  NPU_PIXEL_FORMAT_I420,
  NPU_PIXEL_FORMAT_YUY2,
  NPU_PIXEL_FORMAT_RGB,
  NPU_PIXEL_FORMAT_BGR,
  NPU_PIXEL_FORMAT_RGBA,
  NPU_PIXEL_FORMAT_BGRA,
  NPU_PIXEL_FORMAT_RGBX,
  NPU_PIXEL_FORMAT_BGRX,
  NPU_PIXEL_FORMAT_GRAY8,
} NpuPixelFormat;

/* The Y'CbCr matrices of GStreamer's GstVideoColorMatrix, by their Kr and
 * Kb: BT.601 (0.299, 0.114), BT.709 (0.2126, 0.0722), BT.2020 (0.2627,
 * 0.0593), SMPTE 240M (0.212, 0.087), FCC (0.30, 0.11) */
typedef enum
{
  NPU_COLOR_MATRIX_BT601,
  NPU_COLOR_MATRIX_BT709,
  NPU_COLOR_MATRIX_BT2020,
  NPU_COLOR_MATRIX_SMPTE240M,
  NPU_COLOR_MATRIX_FCC,
} NpuColorMatrix;

typedef enum
{
  NPU_COLOR_RANGE_LIMITED,
  NPU_COLOR_RANGE_FULL,
} NpuColorRange;

typedef enum
{
  NPU_VISION_PREP_STRETCH,
  NPU_VISION_PREP_LETTERBOX,
} NpuVisionPrepMode;

typedef enum
{
  NPU_VISION_PREP_LAYOUT_CHW,
  NPU_VISION_PREP_LAYOUT_PATCHES,
} NpuVisionPrepLayout;

/**
 * NpuVisionPrepParams:
 * @format, @width, @height: the source frame
 * @matrix, @range: colorimetry of YUV sources (and @range of GRAY8)
 * @crop_x, @crop_y, @crop_width, @crop_height: source rectangle; a zero
 *   width or height means "to the frame's edge"
 * @out_width, @out_height: the model's image size
 * @mode: stretch or letterbox
 * @fill_rgb: letterbox padding colour, 0..255 per channel (normalised like
 *   any pixel)
 * @mean, @std: per channel (R, G, B), on values in [0, 1]
 * @layout: CHW image or patches
 * @patch_size: for PATCHES; must divide @out_width and @out_height
 *
 * Start from npu_vision_prep_params_init().
 */
typedef struct
{
  NpuPixelFormat format;
  guint width, height;
  NpuColorMatrix matrix;
  NpuColorRange range;
  guint crop_x, crop_y, crop_width, crop_height;
  guint out_width, out_height;
  NpuVisionPrepMode mode;
  gdouble fill_rgb[3];
  gdouble mean[3], std[3];
  NpuVisionPrepLayout layout;
  guint patch_size;
} NpuVisionPrepParams;

typedef struct _NpuVisionPrepPlan NpuVisionPrepPlan;

NPU_API
void npu_vision_prep_params_init (NpuVisionPrepParams * params);

NPU_API
guint npu_pixel_format_n_planes (NpuPixelFormat format);

NPU_API
NpuVisionPrepPlan *npu_vision_prep_plan_new (const NpuVisionPrepParams *
    params, GError ** error);
NPU_API
void npu_vision_prep_plan_free (NpuVisionPrepPlan * plan);
NPU_API
const NpuVisionPrepParams *npu_vision_prep_plan_get_params (const
    NpuVisionPrepPlan * plan);
NPU_API
gsize npu_vision_prep_plan_get_n_floats (const NpuVisionPrepPlan * plan);
NPU_API
guint npu_vision_prep_plan_get_n_patches (const NpuVisionPrepPlan * plan);
NPU_API
void npu_vision_prep_plan_get_content_rect (const NpuVisionPrepPlan * plan,
    guint * x, guint * y, guint * width, guint * height);

NPU_API
void npu_vision_prep_run (const NpuVisionPrepPlan * plan,
    const guint8 * const *planes, const gssize * strides, gfloat * out,
    NpuTask * task);
NPU_API
void npu_vision_prep_run_counted (const NpuVisionPrepPlan * plan,
    const guint8 * const *planes, const gssize * strides, gfloat * out,
    NpuTask * task, NpuBytes * bytes);

#define NPU_VISION_PREP_ERROR (npu_vision_prep_error_quark ())
NPU_API
GQuark npu_vision_prep_error_quark (void);

/**
 * NpuVisionPrepError:
 * @NPU_VISION_PREP_ERROR_FORMAT: unknown pixel format
 * @NPU_VISION_PREP_ERROR_SIZE: a zero or too large size
 * @NPU_VISION_PREP_ERROR_CROP: crop rectangle not inside the frame
 * @NPU_VISION_PREP_ERROR_PATCH: patch size zero or not dividing the output
 * @NPU_VISION_PREP_ERROR_PARAMETER: any other bad value (std 0, bad enum)
 */
typedef enum
{
  NPU_VISION_PREP_ERROR_FORMAT,
  NPU_VISION_PREP_ERROR_SIZE,
  NPU_VISION_PREP_ERROR_CROP,
  NPU_VISION_PREP_ERROR_PATCH,
  NPU_VISION_PREP_ERROR_PARAMETER,
} NpuVisionPrepError;

G_DEFINE_AUTOPTR_CLEANUP_FUNC (NpuVisionPrepPlan, npu_vision_prep_plan_free)

G_END_DECLS

#endif /* __NPU_VISION_PREP_H__ */
