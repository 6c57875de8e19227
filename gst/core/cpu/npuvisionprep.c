/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: fused image preprocessing for vision encoders
 *
 * The resize is separable, so it is done vertically first, then
 * horizontally: an output row is a weighted sum of a few whole source rows
 * (one wide, SIMD-friendly loop per tap), then each output pixel sums a few
 * neighbours of that sum.  Going vertical first does the wide work on
 * out_height rows instead of crop_height, which is what pays when a 720p
 * frame is shrunk to 224.
 *
 * Colour conversion must happen per source pixel, before any filtering,
 * because each pixel is clamped to [0, 1] as it is converted (a clamp does
 * not commute with a weighted sum).  Converted rows are kept in a small ring
 * per worker, indexed by row number modulo the largest vertical tap count:
 * consecutive output rows share source rows, and the taps of one output row
 * are consecutive, so they never collide in the ring.  That ring and one
 * accumulator row are all the intermediate storage there is.
 *
 * Normalisation is affine and applied once per output value, after
 * filtering (the filter weights sum to 1, so this equals normalising every
 * source pixel first).
 */
#include "npuvisionprep.h"
#include "npucpu.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define HAVE_X86_DISPATCH 1
#include <immintrin.h>
#elif defined(__aarch64__)
/* Advanced SIMD is in the AArch64 baseline: no -march flag needed */
#define HAVE_NEON_DISPATCH 1
#include <arm_neon.h>
#endif

/* Limits keep every intermediate product of the geometry in 64 bits and
 * every index in 32; no camera or model is near them. */
#define MAX_SOURCE_SIZE 32768
#define MAX_OUTPUT_SIZE 8192

/* Floats per row slot rounded up to this (32 bytes), so that every slot of
 * the ring starts aligned for AVX. */
#define ROW_ALIGN 8

G_DEFINE_QUARK (npu - vision - prep - error - quark, npu_vision_prep_error);

typedef struct
{
  guint n_taps;                 /* max taps of any position (padded to it) */
  guint *start;                 /* [n]: first source index, crop-relative */
  guint *count;                 /* [n]: taps with non-zero weight */
  gfloat *weights;              /* [n][n_taps], zero padded */
} Filter;

/* Colour conversion constants, for values in [0, 1] from 8-bit codes */
typedef struct
{
  gfloat y_offset, y_scale;     /* v = (Y - y_offset) * y_scale */
  /* R = v + r_v V', G = v - g_u U' - g_v V', B = v + b_u U' */
  gfloat r_v, g_u, g_v, b_u;
} ColourCoef;

struct _NpuVisionPrepPlan
{
  NpuVisionPrepParams params;   /* crop resolved to the frame's edge */
  guint cx, cy, cw, ch;         /* crop */
  guint dx, dy, dw, dh;         /* content rectangle in the output */
  Filter fx, fy;
  ColourCoef coef;
  gfloat scale[3], bias[3];     /* normalised = v * scale + bias */
  gfloat fill[3];               /* normalised letterbox colour */
  gsize *col_off;               /* [out_width] */
  gsize *row_off;               /* [out_height] */
  gsize chan_stride;
  gsize n_floats;
  gsize slot_floats;            /* one converted row: R, G, B planes */
  gboolean use_avx2;
  gboolean use_neon;
  /* Horizontal taps for the AVX2 and NEON paths: every position's taps
   * padded with zeros to T8 = n_taps rounded up to 8, hw8[x * T8 + k],
   * positions padded to a multiple of 8 (weight 0, start 0), so that one
   * unaligned 8-float load per tap chunk replaces gathers. */
  guint T8;
  gfloat *hw8;
  guint *hstart8;
  /* Per block of 8 outputs: its lanes [0, m) are consecutive floats of
   * the output and so are [m, 8) (a block crosses at most one patch edge
   * when patch >= 8), stored with two masked stores; 0: scattered lane by
   * lane (small patches) */
  guint8 *hsplit;
  /* the frame's bytes one run reads (plan_frame_bytes()) */
  guint64 frame_bytes;
};

/* ------------------------------------------------------------------------
 * Parameters
 */

/**
 * npu_vision_prep_params_init:
 *
 * Defaults: NV12 BT.601 limited range (what most cameras send), no crop,
 * stretch to 224x224, black fill, CLIP's mean and std, CHW layout, patch 14.
 * Width, height and format of the source must still be set.
 */
void
npu_vision_prep_params_init (NpuVisionPrepParams * params)
{
  static const gdouble clip_mean[3] = { 0.48145466, 0.4578275, 0.40821073 };
  static const gdouble clip_std[3] = { 0.26862954, 0.26130258, 0.27577711 };

  g_return_if_fail (params != NULL);

  memset (params, 0, sizeof (*params));
  params->format = NPU_PIXEL_FORMAT_NV12;
  params->matrix = NPU_COLOR_MATRIX_BT601;
  params->range = NPU_COLOR_RANGE_LIMITED;
  params->out_width = params->out_height = 224;
  params->mode = NPU_VISION_PREP_STRETCH;
  memcpy (params->mean, clip_mean, sizeof (clip_mean));
  memcpy (params->std, clip_std, sizeof (clip_std));
  params->layout = NPU_VISION_PREP_LAYOUT_CHW;
  params->patch_size = 14;
}

/**
 * npu_pixel_format_n_planes:
 *
 * Returns: how many planes[] / strides[] entries npu_vision_prep_run()
 * reads for @format (0 for an unknown format).
 */
guint
npu_pixel_format_n_planes (NpuPixelFormat format)
{
  switch (format) {
    case NPU_PIXEL_FORMAT_NV12:
      return 2;
    case NPU_PIXEL_FORMAT_I420:
      return 3;
    case NPU_PIXEL_FORMAT_YUY2:
    case NPU_PIXEL_FORMAT_RGB:
    case NPU_PIXEL_FORMAT_BGR:
    case NPU_PIXEL_FORMAT_RGBA:
    case NPU_PIXEL_FORMAT_BGRA:
    case NPU_PIXEL_FORMAT_RGBX:
    case NPU_PIXEL_FORMAT_BGRX:
    case NPU_PIXEL_FORMAT_GRAY8:
      return 1;
    default:
      return 0;
  }
}

/* ------------------------------------------------------------------------
 * Plan
 */

/* Fills the taps of content position @i (of @dst) from a source of @src,
 * into @start / @weights with room for @max_taps; returns the tap count. */
static guint
compute_taps (guint src, guint dst, guint i, gboolean area, guint * start,
    gdouble * weights, guint max_taps)
{
  if (area) {
    /* Work in units of 1/dst of a source pixel: the footprint is
     * [i * src, (i + 1) * src), source pixel k is [k * dst, (k + 1) * dst).
     * Integer overlaps make the weights exact rationals over src. */
    guint64 f0 = (guint64) i * src, f1 = (guint64) (i + 1) * src;
    guint64 k0 = f0 / dst, k1 = (f1 - 1) / dst, k;
    guint n = 0;

    for (k = k0; k <= k1 && n < max_taps; k++) {
      guint64 a = MAX (k * dst, f0), b = MIN ((k + 1) * dst, f1);

      weights[n++] = (gdouble) (b - a) / src;
    }
    *start = (guint) k0;
    return n;
  } else {
    /* Half-pixel centres, clamped to the edge pixels as OpenCV does. */
    gdouble sx = ((2.0 * i + 1.0) * src - dst) / (2.0 * dst);
    gdouble fl, f;

    sx = CLAMP (sx, 0.0, (gdouble) src - 1.0);
    fl = floor (sx);
    f = sx - fl;
    *start = (guint) fl;
    if (f == 0.0 || *start + 1 >= src) {
      weights[0] = 1.0;
      return 1;
    }
    weights[0] = 1.0 - f;
    weights[1] = f;
    return 2;
  }
}

static void
filter_clear (Filter * f)
{
  g_free (f->start);
  g_free (f->count);
  g_free (f->weights);
}

/* Taps of every content position.  Horizontal taps are padded to the same
 * count and their window shifted left where needed to stay inside the row,
 * so that the inner loop has a fixed length and reads no further than the
 * last source pixel. */
static void
filter_init (Filter * f, guint src, guint dst)
{
  gboolean area = src > 2 * (guint64) dst;
  /* An area footprint of s pixels touches at most ceil(s) + 1 of them. */
  guint max_taps = area ? (src + dst - 1) / dst + 1 : 2;
  gdouble *w = g_new (gdouble, max_taps);
  guint i, n_taps = 1;

  max_taps = MIN (max_taps, src);
  f->start = g_new (guint, dst);
  f->count = g_new (guint, dst);
  for (i = 0; i < dst; i++) {
    f->count[i] = compute_taps (src, dst, i, area, &f->start[i], w, max_taps);
    n_taps = MAX (n_taps, f->count[i]);
  }
  f->n_taps = n_taps;
  f->weights = g_new0 (gfloat, (gsize) dst * n_taps);
  for (i = 0; i < dst; i++) {
    guint n = compute_taps (src, dst, i, area, &f->start[i], w, max_taps);
    guint shift = 0, k;

    if (f->start[i] + n_taps > src) {
      shift = f->start[i] + n_taps - src;
      f->start[i] -= shift;
    }
    for (k = 0; k < n; k++)
      f->weights[(gsize) i * n_taps + shift + k] = (gfloat) w[k];
  }
  g_free (w);
}

static gboolean
is_yuv (NpuPixelFormat format)
{
  return format == NPU_PIXEL_FORMAT_NV12 || format == NPU_PIXEL_FORMAT_I420
      || format == NPU_PIXEL_FORMAT_YUY2;
}

static void
colour_coef_init (ColourCoef * c, NpuColorMatrix matrix, NpuColorRange range)
{
  static const gdouble k[][2] = {
    {0.299, 0.114}, {0.2126, 0.0722}, {0.2627, 0.0593}, {0.212, 0.087},
    {0.30, 0.11}
  };
  gdouble kr = k[matrix][0], kb = k[matrix][1];
  gdouble kg = 1.0 - kr - kb;
  gdouble cs = range == NPU_COLOR_RANGE_FULL ? 1.0 / 255 : 1.0 / 224;

  c->y_offset = range == NPU_COLOR_RANGE_FULL ? 0.0f : 16.0f;
  c->y_scale = (gfloat) (range == NPU_COLOR_RANGE_FULL ? 1.0 / 255 : 1.0 / 219);
  c->r_v = (gfloat) (2.0 * (1.0 - kr) * cs);
  c->b_u = (gfloat) (2.0 * (1.0 - kb) * cs);
  c->g_u = (gfloat) (2.0 * kb * (1.0 - kb) / kg * cs);
  c->g_v = (gfloat) (2.0 * kr * (1.0 - kr) / kg * cs);
}

/**
 * npu_vision_prep_plan_new:
 * @params: what to do; copied
 *
 * Checks @params and precomputes everything that does not depend on the
 * pixels: filter taps and weights, output offsets, colour and normalisation
 * constants.  Make one per caps (and crop) and run it on every frame.
 *
 * Returns: (transfer full): the plan, or %NULL with @error set.
 */
/* Checks @p, filling in a crop size of 0 (to the frame's edge) */
static gboolean
check_params (NpuVisionPrepParams * p, GError ** error)
{
  guint c;

  if (npu_pixel_format_n_planes (p->format) == 0) {
    g_set_error (error, NPU_VISION_PREP_ERROR, NPU_VISION_PREP_ERROR_FORMAT,
        "Unknown pixel format %d", (gint) p->format);
    return FALSE;
  }
  if (p->width == 0 || p->height == 0 || p->width > MAX_SOURCE_SIZE
      || p->height > MAX_SOURCE_SIZE) {
    g_set_error (error, NPU_VISION_PREP_ERROR, NPU_VISION_PREP_ERROR_SIZE,
        "Source size %ux%u is not within 1x1 .. %ux%u", p->width, p->height,
        MAX_SOURCE_SIZE, MAX_SOURCE_SIZE);
    return FALSE;
  }
  if (p->out_width == 0 || p->out_height == 0 || p->out_width > MAX_OUTPUT_SIZE
      || p->out_height > MAX_OUTPUT_SIZE) {
    g_set_error (error, NPU_VISION_PREP_ERROR, NPU_VISION_PREP_ERROR_SIZE,
        "Output size %ux%u is not within 1x1 .. %ux%u", p->out_width,
        p->out_height, MAX_OUTPUT_SIZE, MAX_OUTPUT_SIZE);
    return FALSE;
  }
  if (p->crop_x >= p->width || p->crop_y >= p->height) {
    g_set_error (error, NPU_VISION_PREP_ERROR, NPU_VISION_PREP_ERROR_CROP,
        "Crop origin (%u, %u) is outside the %ux%u frame", p->crop_x,
        p->crop_y, p->width, p->height);
    return FALSE;
  }
  if (p->crop_width == 0)
    p->crop_width = p->width - p->crop_x;
  if (p->crop_height == 0)
    p->crop_height = p->height - p->crop_y;
  if (p->crop_width > p->width - p->crop_x
      || p->crop_height > p->height - p->crop_y) {
    g_set_error (error, NPU_VISION_PREP_ERROR, NPU_VISION_PREP_ERROR_CROP,
        "Crop %ux%u at (%u, %u) does not fit in the %ux%u frame", p->crop_width,
        p->crop_height, p->crop_x, p->crop_y, p->width, p->height);
    return FALSE;
  }
  if ((guint) p->matrix > NPU_COLOR_MATRIX_FCC
      || (guint) p->range > NPU_COLOR_RANGE_FULL
      || (guint) p->mode > NPU_VISION_PREP_LETTERBOX
      || (guint) p->layout > NPU_VISION_PREP_LAYOUT_PATCHES) {
    g_set_error (error, NPU_VISION_PREP_ERROR,
        NPU_VISION_PREP_ERROR_PARAMETER,
        "Unknown colour matrix, range, mode or layout");
    return FALSE;
  }
  for (c = 0; c < 3; c++) {
    if (!isfinite (p->mean[c]) || !isfinite (p->std[c]) || p->std[c] == 0.0
        || !isfinite (p->fill_rgb[c])) {
      g_set_error (error, NPU_VISION_PREP_ERROR,
          NPU_VISION_PREP_ERROR_PARAMETER,
          "Channel %u: mean %g, std %g, fill %g: std must be non-zero and "
          "all finite", c, p->mean[c], p->std[c], p->fill_rgb[c]);
      return FALSE;
    }
  }
  if (p->layout == NPU_VISION_PREP_LAYOUT_PATCHES && (p->patch_size == 0
          || p->out_width % p->patch_size != 0
          || p->out_height % p->patch_size != 0)) {
    g_set_error (error, NPU_VISION_PREP_ERROR, NPU_VISION_PREP_ERROR_PATCH,
        "Patch size %u does not divide the output size %ux%u", p->patch_size,
        p->out_width, p->out_height);
    return FALSE;
  }
  return TRUE;
}

/* Where the crop lands in the output: all of it, or letterboxed */
static void
plan_destination (NpuVisionPrepPlan * plan)
{
  const NpuVisionPrepParams *p = &plan->params;

  if (p->mode == NPU_VISION_PREP_LETTERBOX) {
    /* Compare out_w / cw with out_h / ch exactly, in integers; the other
     * side is rounded to nearest, and never collapses to nothing. */
    guint64 a = (guint64) p->out_width * plan->ch;
    guint64 b = (guint64) p->out_height * plan->cw;

    if (a <= b) {
      plan->dw = p->out_width;
      plan->dh = (guint) ((a + plan->cw / 2) / plan->cw);
    } else {
      plan->dh = p->out_height;
      plan->dw = (guint) ((b + plan->ch / 2) / plan->ch);
    }
    plan->dw = CLAMP (plan->dw, 1, p->out_width);
    plan->dh = CLAMP (plan->dh, 1, p->out_height);
    plan->dx = (p->out_width - plan->dw) / 2;
    plan->dy = (p->out_height - plan->dh) / 2;
  } else {
    plan->dw = p->out_width;
    plan->dh = p->out_height;
  }
}

/* Colour conversion and the per-channel normalisation */
static void
plan_channels (NpuVisionPrepPlan * plan)
{
  const NpuVisionPrepParams *p = &plan->params;
  guint c;

  if (is_yuv (p->format) || p->format == NPU_PIXEL_FORMAT_GRAY8)
    colour_coef_init (&plan->coef, p->matrix, p->range);
  for (c = 0; c < 3; c++) {
    plan->scale[c] = (gfloat) (1.0 / p->std[c]);
    plan->bias[c] = (gfloat) (-p->mean[c] / p->std[c]);
    plan->fill[c] =
        (gfloat) ((p->fill_rgb[c] / 255.0 - p->mean[c]) / p->std[c]);
  }
}

/* Output offsets of each row and column, for either layout */
static void
plan_output_layout (NpuVisionPrepPlan * plan)
{
  const NpuVisionPrepParams *p = &plan->params;
  guint x, y, patch;

  /* Both layouts are out[row_off[y] + c * chan_stride + col_off[x]]. */
  plan->col_off = g_new (gsize, p->out_width);
  plan->row_off = g_new (gsize, p->out_height);
  if (p->layout == NPU_VISION_PREP_LAYOUT_PATCHES) {
    gsize patch_floats;

    patch = p->patch_size;
    patch_floats = (gsize) 3 *patch * patch;
    plan->chan_stride = (gsize) patch *patch;
    for (x = 0; x < p->out_width; x++)
      plan->col_off[x] = (x / patch) * patch_floats + x % patch;
    for (y = 0; y < p->out_height; y++)
      plan->row_off[y] = (gsize) (y / patch) * (p->out_width / patch)
          * patch_floats + (gsize) (y % patch) * patch;
  } else {
    plan->chan_stride = (gsize) p->out_width * p->out_height;
    for (x = 0; x < p->out_width; x++)
      plan->col_off[x] = x;
    for (y = 0; y < p->out_height; y++)
      plan->row_off[y] = (gsize) y *p->out_width;
  }
  plan->n_floats = (gsize) 3 *p->out_width * p->out_height;
  plan->slot_floats =
      ((gsize) plan->cw + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
}

/* The SIMD paths' padded filter tables, where this CPU has AVX2 or NEON
 * (Advanced SIMD alone: no dot product needed) */
static void
plan_simd (NpuVisionPrepPlan * plan)
{
  guint x;

#ifdef HAVE_X86_DISPATCH
  plan->use_avx2 = npu_cpu_has (NPU_CPU_AVX2 | NPU_CPU_FMA);
#elif defined(HAVE_NEON_DISPATCH)
  plan->use_neon = npu_cpu_has (NPU_CPU_NEON);
#endif
  if (plan->use_avx2 || plan->use_neon) {
    guint k, T = plan->fx.n_taps, dw8 = (plan->dw + 7) / 8 * 8;

    plan->T8 = (T + 7) / 8 * 8;
    plan->hw8 = g_new0 (gfloat, (gsize) dw8 * plan->T8);
    plan->hstart8 = g_new0 (guint, dw8);
    for (x = 0; x < plan->dw; x++) {
      plan->hstart8[x] = plan->fx.start[x];
      for (k = 0; k < T; k++)
        plan->hw8[(gsize) x * plan->T8 + k] =
            plan->fx.weights[(gsize) x * T + k];
    }
    plan->hsplit = g_new0 (guint8, dw8 / 8);
    for (x = 0; x < plan->dw; x += 8) {
      const gsize *co = plan->col_off + plan->dx + x;
      guint n = MIN (8, plan->dw - x), m = 1, l;

      while (m < n && co[m] == co[0] + m)
        m++;
      for (l = m + 1; l < n; l++)
        if (co[l] != co[m] + (l - m))
          break;
      /* The second part is stored from co[m] - m: keep that >= 0 */
      if (l >= n && (m == n || co[m] >= m))
        plan->hsplit[x / 8] = m;
    }
  }
}

/* Bytes of one source row's plane spans the conversion reads for the
 * crop's columns: @luma for the luma row (or the packed row), @chroma for
 * its chroma row(s) (4:2:0: one chroma row serves two luma rows) */
static void
row_span_bytes (const NpuVisionPrepPlan * plan, guint64 * luma,
    guint64 * chroma)
{
  guint64 c0 = plan->cx / 2, c1 = (plan->cx + plan->cw - 1) / 2;

  *chroma = 0;
  switch (plan->params.format) {
    case NPU_PIXEL_FORMAT_NV12:
      *luma = plan->cw;
      *chroma = (c1 - c0 + 1) * 2;      /* interleaved U, V pairs */
      break;
    case NPU_PIXEL_FORMAT_I420:
      *luma = plan->cw;
      *chroma = (c1 - c0 + 1) * 2;      /* a U and a V plane */
      break;
    case NPU_PIXEL_FORMAT_YUY2:
      *luma = (c1 - c0 + 1) * 4;        /* whole Y0 U Y1 V macropixels */
      break;
    case NPU_PIXEL_FORMAT_GRAY8:
      *luma = plan->cw;
      break;
    case NPU_PIXEL_FORMAT_RGB:
    case NPU_PIXEL_FORMAT_BGR:
      *luma = (guint64) plan->cw * 3;
      break;
    default:
      *luma = (guint64) plan->cw * 4;
      break;
  }
}

/* The bytes of the frame one run reads: every source row a non-zero
 * vertical tap uses (run_rows() skips zero taps; a downscale by 2 or less
 * may skip rows), each counted once although a slice boundary converts
 * its shared rows twice (the second read is from cache), and the chroma
 * rows those rows use, once each. */
static guint64
plan_frame_bytes (const NpuVisionPrepPlan * plan)
{
  const Filter *fy = &plan->fy;
  gboolean *used = g_new0 (gboolean, plan->ch);
  gboolean sub = plan->params.format == NPU_PIXEL_FORMAT_NV12 ||
      plan->params.format == NPU_PIXEL_FORMAT_I420;
  guint64 luma, chroma, sum = 0;
  gint64 last_chroma = -1;
  guint y, k;

  for (y = 0; y < plan->dh; y++)
    for (k = 0; k < fy->n_taps; k++)
      if (fy->weights[(gsize) y * fy->n_taps + k] != 0.0f)
        used[fy->start[y] + k] = TRUE;
  row_span_bytes (plan, &luma, &chroma);
  for (y = 0; y < plan->ch; y++) {
    gint64 cr = sub ? (plan->cy + y) / 2 : plan->cy + y;

    if (!used[y])
      continue;
    sum += luma;
    if (chroma && cr != last_chroma)
      sum += chroma;
    last_chroma = cr;
  }
  g_free (used);
  return sum;
}

NpuVisionPrepPlan *
npu_vision_prep_plan_new (const NpuVisionPrepParams * params, GError ** error)
{
  NpuVisionPrepPlan *plan;
  NpuVisionPrepParams p;

  g_return_val_if_fail (params != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  p = *params;
  if (!check_params (&p, error))
    return NULL;

  plan = g_new0 (NpuVisionPrepPlan, 1);
  plan->params = p;
  plan->cx = p.crop_x;
  plan->cy = p.crop_y;
  plan->cw = p.crop_width;
  plan->ch = p.crop_height;

  plan_destination (plan);
  filter_init (&plan->fx, plan->cw, plan->dw);
  filter_init (&plan->fy, plan->ch, plan->dh);
  plan_channels (plan);
  plan_output_layout (plan);
  plan_simd (plan);
  plan->frame_bytes = plan_frame_bytes (plan);
  return plan;
}

void
npu_vision_prep_plan_free (NpuVisionPrepPlan * plan)
{
  if (!plan)
    return;
  filter_clear (&plan->fx);
  filter_clear (&plan->fy);
  g_free (plan->col_off);
  g_free (plan->row_off);
  g_free (plan->hw8);
  g_free (plan->hstart8);
  g_free (plan->hsplit);
  g_free (plan);
}

/* Returns: the parameters with the crop resolved (never zero sized) */
const NpuVisionPrepParams *
npu_vision_prep_plan_get_params (const NpuVisionPrepPlan * plan)
{
  g_return_val_if_fail (plan != NULL, NULL);
  return &plan->params;
}

/* Returns: floats written by npu_vision_prep_run(): 3 * out_width *
 * out_height in either layout */
gsize
npu_vision_prep_plan_get_n_floats (const NpuVisionPrepPlan * plan)
{
  g_return_val_if_fail (plan != NULL, 0);
  return plan->n_floats;
}

/* Returns: the number of patches (rows of the PATCHES layout), 0 for CHW */
guint
npu_vision_prep_plan_get_n_patches (const NpuVisionPrepPlan * plan)
{
  const NpuVisionPrepParams *p;

  g_return_val_if_fail (plan != NULL, 0);
  p = &plan->params;
  if (p->layout != NPU_VISION_PREP_LAYOUT_PATCHES)
    return 0;
  return (p->out_width / p->patch_size) * (p->out_height / p->patch_size);
}

/* Where the image lands in the output; the rest is letterbox fill. */
void
npu_vision_prep_plan_get_content_rect (const NpuVisionPrepPlan * plan,
    guint * x, guint * y, guint * width, guint * height)
{
  g_return_if_fail (plan != NULL);
  if (x)
    *x = plan->dx;
  if (y)
    *y = plan->dy;
  if (width)
    *width = plan->dw;
  if (height)
    *height = plan->dh;
}

/* ------------------------------------------------------------------------
 * Row conversion: source row @row (frame coordinates), crop columns, to
 * R, G, B planes of @slot_floats each, values in [0, 1].
 */

static inline gfloat
clamp01 (gfloat v)
{
  /* Compiles to maxss/minss; inputs come from 8-bit codes, never NaN */
  return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
}

static inline void
yuv_to_rgb (const ColourCoef * k, guint yc, guint uc, guint vc, gfloat * r,
    gfloat * g, gfloat * b)
{
  gfloat l = ((gfloat) yc - k->y_offset) * k->y_scale;
  gfloat u = (gfloat) uc - 128.0f, v = (gfloat) vc - 128.0f;

  *r = clamp01 (l + k->r_v * v);
  *g = clamp01 (l - k->g_u * u - k->g_v * v);
  *b = clamp01 (l + k->b_u * u);
}

/* Scalar conversion of crop columns [i0, i1) of row @row. */
static void
convert_row_scalar (const NpuVisionPrepPlan * plan,
    const guint8 * const *planes, const gssize * strides, guint row,
    guint i0, guint i1, gfloat * out)
{
  const ColourCoef *k = &plan->coef;
  gfloat *r = out, *g = out + plan->slot_floats, *b = g + plan->slot_floats;
  const guint8 *s0 = planes[0] + (gssize) row * strides[0];
  const guint8 *s1, *s2;
  guint i, x;

  switch (plan->params.format) {
    case NPU_PIXEL_FORMAT_NV12:
      s1 = planes[1] + (gssize) (row / 2) * strides[1];
      for (i = i0; i < i1; i++) {
        x = plan->cx + i;
        yuv_to_rgb (k, s0[x], s1[x / 2 * 2], s1[x / 2 * 2 + 1], &r[i], &g[i],
            &b[i]);
      }
      break;
    case NPU_PIXEL_FORMAT_I420:
      s1 = planes[1] + (gssize) (row / 2) * strides[1];
      s2 = planes[2] + (gssize) (row / 2) * strides[2];
      for (i = i0; i < i1; i++) {
        x = plan->cx + i;
        yuv_to_rgb (k, s0[x], s1[x / 2], s2[x / 2], &r[i], &g[i], &b[i]);
      }
      break;
    case NPU_PIXEL_FORMAT_YUY2:
      for (i = i0; i < i1; i++) {
        x = plan->cx + i;
        yuv_to_rgb (k, s0[2 * x], s0[x / 2 * 4 + 1], s0[x / 2 * 4 + 3], &r[i],
            &g[i], &b[i]);
      }
      break;
    case NPU_PIXEL_FORMAT_GRAY8:
      for (i = i0; i < i1; i++) {
        x = plan->cx + i;
        r[i] = g[i] = b[i] =
            clamp01 (((gfloat) s0[x] - k->y_offset) * k->y_scale);
      }
      break;
    default:{
      /* Packed RGB: byte offsets of R, G and B within a pixel */
      guint bpp = 4, ro = 0, go = 1, bo = 2;
      const gfloat n = 1.0f / 255.0f;

      switch (plan->params.format) {
        case NPU_PIXEL_FORMAT_RGB:
          bpp = 3;
          break;
        case NPU_PIXEL_FORMAT_BGR:
          bpp = 3;
          ro = 2;
          bo = 0;
          break;
        case NPU_PIXEL_FORMAT_BGRA:
        case NPU_PIXEL_FORMAT_BGRX:
          ro = 2;
          bo = 0;
          break;
        default:
          break;
      }
      for (i = i0; i < i1; i++) {
        const guint8 *px = s0 + (gsize) (plan->cx + i) * bpp;

        r[i] = px[ro] * n;
        g[i] = px[go] * n;
        b[i] = px[bo] * n;
      }
      break;
    }
  }
}

#ifdef HAVE_X86_DISPATCH
#define AVX2_FN __attribute__ ((target ("avx2,fma")))

/* 8 pixels from 8 Y, U, V codes (as int32 lanes) to clamped R, G, B */
static inline AVX2_FN void
yuv8_avx2 (const ColourCoef * k, __m256i y, __m256i u, __m256i v,
    gfloat * r, gfloat * g, gfloat * b)
{
  const __m256 zero = _mm256_setzero_ps (), one = _mm256_set1_ps (1.0f);
  const __m256 c128 = _mm256_set1_ps (128.0f);
  __m256 l = _mm256_mul_ps (_mm256_sub_ps (_mm256_cvtepi32_ps (y),
          _mm256_set1_ps (k->y_offset)), _mm256_set1_ps (k->y_scale));
  __m256 uf = _mm256_sub_ps (_mm256_cvtepi32_ps (u), c128);
  __m256 vf = _mm256_sub_ps (_mm256_cvtepi32_ps (v), c128);
  __m256 rr = _mm256_fmadd_ps (_mm256_set1_ps (k->r_v), vf, l);
  __m256 gg = _mm256_fnmadd_ps (_mm256_set1_ps (k->g_v), vf,
      _mm256_fnmadd_ps (_mm256_set1_ps (k->g_u), uf, l));
  __m256 bb = _mm256_fmadd_ps (_mm256_set1_ps (k->b_u), uf, l);

  _mm256_storeu_ps (r, _mm256_min_ps (_mm256_max_ps (rr, zero), one));
  _mm256_storeu_ps (g, _mm256_min_ps (_mm256_max_ps (gg, zero), one));
  _mm256_storeu_ps (b, _mm256_min_ps (_mm256_max_ps (bb, zero), one));
}

/* 16 luma codes and their 16 (already duplicated) chroma codes */
static inline AVX2_FN void
yuv16_avx2 (const ColourCoef * k, __m128i y, __m128i u, __m128i v,
    gfloat * r, gfloat * g, gfloat * b)
{
  yuv8_avx2 (k, _mm256_cvtepu8_epi32 (y), _mm256_cvtepu8_epi32 (u),
      _mm256_cvtepu8_epi32 (v), r, g, b);
  yuv8_avx2 (k, _mm256_cvtepu8_epi32 (_mm_srli_si128 (y, 8)),
      _mm256_cvtepu8_epi32 (_mm_srli_si128 (u, 8)),
      _mm256_cvtepu8_epi32 (_mm_srli_si128 (v, 8)), r + 8, g + 8, b + 8);
}

/* The YUV formats, 16 pixels at a time from an even frame column (so that
 * chroma pairs line up); the odd first column and the tail go scalar. */
static AVX2_FN void
convert_row_avx2 (const NpuVisionPrepPlan * plan,
    const guint8 * const *planes, const gssize * strides, guint row,
    gfloat * out)
{
  const ColourCoef *k = &plan->coef;
  gfloat *r = out, *g = out + plan->slot_floats, *b = g + plan->slot_floats;
  const guint8 *s0 = planes[0] + (gssize) row * strides[0];
  guint i = 0, x;

  if (plan->cx % 2 == 1) {
    convert_row_scalar (plan, planes, strides, row, 0, 1, out);
    i = 1;
  }
  switch (plan->params.format) {
    case NPU_PIXEL_FORMAT_NV12:{
      const guint8 *s1 = planes[1] + (gssize) (row / 2) * strides[1];
      const __m128i dup_u = _mm_setr_epi8 (0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10,
          10, 12, 12, 14, 14);
      const __m128i dup_v = _mm_setr_epi8 (1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11,
          11, 13, 13, 15, 15);

      /* 16 luma columns need 16 bytes of UV from x (even) on */
      for (; i + 16 <= plan->cw; i += 16) {
        __m128i y, uv;

        x = plan->cx + i;
        y = _mm_loadu_si128 ((const __m128i *) (s0 + x));
        uv = _mm_loadu_si128 ((const __m128i *) (s1 + x));
        yuv16_avx2 (k, y, _mm_shuffle_epi8 (uv, dup_u),
            _mm_shuffle_epi8 (uv, dup_v), r + i, g + i, b + i);
      }
      break;
    }
    case NPU_PIXEL_FORMAT_I420:{
      const guint8 *s1 = planes[1] + (gssize) (row / 2) * strides[1];
      const guint8 *s2 = planes[2] + (gssize) (row / 2) * strides[2];

      for (; i + 16 <= plan->cw; i += 16) {
        __m128i y, u, v;

        x = plan->cx + i;
        y = _mm_loadu_si128 ((const __m128i *) (s0 + x));
        u = _mm_loadl_epi64 ((const __m128i *) (s1 + x / 2));
        v = _mm_loadl_epi64 ((const __m128i *) (s2 + x / 2));
        yuv16_avx2 (k, y, _mm_unpacklo_epi8 (u, u), _mm_unpacklo_epi8 (v, v),
            r + i, g + i, b + i);
      }
      break;
    }
    case NPU_PIXEL_FORMAT_YUY2:{
      /* Y0 U Y1 V: luma at even bytes, U at 4n + 1, V at 4n + 3 */
      const __m128i get_y = _mm_setr_epi8 (0, 2, 4, 6, 8, 10, 12, 14, -1, -1,
          -1, -1, -1, -1, -1, -1);
      const __m128i get_u = _mm_setr_epi8 (1, 1, 5, 5, 9, 9, 13, 13, -1, -1,
          -1, -1, -1, -1, -1, -1);
      const __m128i get_v = _mm_setr_epi8 (3, 3, 7, 7, 11, 11, 15, 15, -1, -1,
          -1, -1, -1, -1, -1, -1);

      for (; i + 16 <= plan->cw; i += 16) {
        const guint8 *p;
        __m128i a, c, y, u, v;

        x = plan->cx + i;
        p = s0 + (gsize) x *2;
        a = _mm_loadu_si128 ((const __m128i *) p);
        c = _mm_loadu_si128 ((const __m128i *) (p + 16));
        y = _mm_unpacklo_epi64 (_mm_shuffle_epi8 (a, get_y),
            _mm_shuffle_epi8 (c, get_y));
        u = _mm_unpacklo_epi64 (_mm_shuffle_epi8 (a, get_u),
            _mm_shuffle_epi8 (c, get_u));
        v = _mm_unpacklo_epi64 (_mm_shuffle_epi8 (a, get_v),
            _mm_shuffle_epi8 (c, get_v));
        yuv16_avx2 (k, y, u, v, r + i, g + i, b + i);
      }
      break;
    }
    default:
      g_assert_not_reached ();
  }
  if (i < plan->cw)
    convert_row_scalar (plan, planes, strides, row, i, plan->cw, out);
}

/* acc (+)= w * src over @n floats */
static AVX2_FN void
axpy_avx2 (gfloat * acc, const gfloat * src, gfloat w, gsize n, gboolean first)
{
  __m256 wv = _mm256_set1_ps (w);
  gsize i = 0;

  if (first) {
    for (; i + 8 <= n; i += 8)
      _mm256_store_ps (acc + i, _mm256_mul_ps (wv, _mm256_load_ps (src + i)));
    for (; i < n; i++)
      acc[i] = w * src[i];
  } else {
    for (; i + 8 <= n; i += 8)
      _mm256_store_ps (acc + i, _mm256_fmadd_ps (wv,
              _mm256_load_ps (src + i), _mm256_load_ps (acc + i)));
    for (; i < n; i++)
      acc[i] += w * src[i];
  }
}

/* Sum of each of 8 vectors, as one vector */
static inline AVX2_FN __m256
sum8_avx2 (const __m256 * v)
{
  __m256 t0 = _mm256_hadd_ps (v[0], v[1]), t1 = _mm256_hadd_ps (v[2], v[3]);
  __m256 t2 = _mm256_hadd_ps (v[4], v[5]), t3 = _mm256_hadd_ps (v[6], v[7]);
  __m256 u0 = _mm256_hadd_ps (t0, t1), u1 = _mm256_hadd_ps (t2, t3);

  /* u0 = s0..s3 of the low halves | s0..s3 of the high halves, u1 s4..s7 */
  return _mm256_add_ps (_mm256_permute2f128_ps (u0, u1, 0x20),
      _mm256_permute2f128_ps (u0, u1, 0x31));
}

/* Horizontal filter of one channel row @a, normalised, 8 outputs at a
 * time: each output's window is one (or T8 / 8) unaligned load times its
 * zero-padded weights, then the 8 products are summed across.  Gathers
 * would do the same with T loads per 8 outputs but cost far more per
 * element on the CPUs we have.  Windows reach up to 7 floats past the
 * last tap: the accumulator is padded with zeros for that. */
static AVX2_FN void
hfilter_avx2 (const NpuVisionPrepPlan * plan, const gfloat * a, gfloat * o,
    gfloat sc, gfloat bi)
{
  const guint T8 = plan->T8;
  const gsize *col_off = plan->col_off + plan->dx;
  const __m256 scv = _mm256_set1_ps (sc), biv = _mm256_set1_ps (bi);
  const __m256i iota = _mm256_setr_epi32 (0, 1, 2, 3, 4, 5, 6, 7);
  guint x, j, k, lane, m;

  for (x = 0; x < plan->dw; x += 8) {
    __m256 prod[8], r;
    guint n = MIN (8, plan->dw - x);

    for (j = 0; j < 8; j++) {
      const gfloat *w = plan->hw8 + (gsize) (x + j) * T8;
      const gfloat *src = a + plan->hstart8[x + j];

      prod[j] = _mm256_mul_ps (_mm256_loadu_ps (w), _mm256_loadu_ps (src));
      for (k = 8; k < T8; k += 8)
        prod[j] = _mm256_fmadd_ps (_mm256_loadu_ps (w + k),
            _mm256_loadu_ps (src + k), prod[j]);
    }
    r = _mm256_fmadd_ps (sum8_avx2 (prod), scv, biv);
    m = plan->hsplit[x / 8];
    if (m == 8) {
      _mm256_storeu_ps (o + col_off[x], r);
    } else if (m > 0) {
      /* Lanes [0, m) from col_off[x], lanes [m, n) from col_off[x + m] - m
       * on; a masked store touches no other float. */
      __m256i lo = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (m), iota);
      __m256i in = _mm256_cmpgt_epi32 (_mm256_set1_epi32 (n), iota);

      _mm256_maskstore_ps (o + col_off[x], lo, r);
      if (m < n)
        _mm256_maskstore_ps (o + (col_off[x + m] - m),
            _mm256_andnot_si256 (lo, in), r);
    } else {
      gfloat res[8];

      _mm256_storeu_ps (res, r);
      for (lane = 0; lane < n; lane++)
        o[col_off[x + lane]] = res[lane];
    }
  }
}
#endif

#ifdef HAVE_NEON_DISPATCH
/* 16 codes to 4 vectors of 4 floats, exactly */
static inline void
u8x16_to_f32 (uint8x16_t v, float32x4_t f[4])
{
  uint16x8_t lo = vmovl_u8 (vget_low_u8 (v)), hi = vmovl_high_u8 (v);

  f[0] = vcvtq_f32_u32 (vmovl_u16 (vget_low_u16 (lo)));
  f[1] = vcvtq_f32_u32 (vmovl_high_u16 (lo));
  f[2] = vcvtq_f32_u32 (vmovl_u16 (vget_low_u16 (hi)));
  f[3] = vcvtq_f32_u32 (vmovl_high_u16 (hi));
}

static inline float32x4_t
clamp01_neon (float32x4_t v)
{
  return vminq_f32 (vmaxq_f32 (v, vdupq_n_f32 (0.0f)), vdupq_n_f32 (1.0f));
}

/* 16 luma codes and their 16 (already duplicated) chroma codes to clamped
 * R, G, B, with the AVX2 path's fused multiply-adds */
static inline void
yuv16_neon (const ColourCoef * k, uint8x16_t y, uint8x16_t u, uint8x16_t v,
    gfloat * r, gfloat * g, gfloat * b)
{
  float32x4_t yf[4], uf[4], vf[4];
  guint j;

  u8x16_to_f32 (y, yf);
  u8x16_to_f32 (u, uf);
  u8x16_to_f32 (v, vf);
  for (j = 0; j < 4; j++) {
    float32x4_t l = vmulq_n_f32 (vsubq_f32 (yf[j],
            vdupq_n_f32 (k->y_offset)), k->y_scale);
    float32x4_t cu = vsubq_f32 (uf[j], vdupq_n_f32 (128.0f));
    float32x4_t cv = vsubq_f32 (vf[j], vdupq_n_f32 (128.0f));

    vst1q_f32 (r + 4 * j, clamp01_neon (vfmaq_n_f32 (l, cv, k->r_v)));
    vst1q_f32 (g + 4 * j, clamp01_neon (vfmsq_n_f32 (vfmsq_n_f32 (l, cu,
                    k->g_u), cv, k->g_v)));
    vst1q_f32 (b + 4 * j, clamp01_neon (vfmaq_n_f32 (l, cu, k->b_u)));
  }
}

/* Each code of 8 twice: the chroma of 16 luma columns */
static inline uint8x16_t
dup8_neon (uint8x8_t c)
{
  return vcombine_u8 (vzip1_u8 (c, c), vzip2_u8 (c, c));
}

/* 16 packed RGB pixels, deinterleaved by the load (vld3/vld4), to floats
 * in [0, 1]: code * (1 / 255), the scalar path's one rounding */
static inline void
rgb16_neon (uint8x16_t cr, uint8x16_t cg, uint8x16_t cb, gfloat * r,
    gfloat * g, gfloat * b)
{
  const gfloat n = 1.0f / 255.0f;
  float32x4_t fr[4], fg[4], fb[4];
  guint j;

  u8x16_to_f32 (cr, fr);
  u8x16_to_f32 (cg, fg);
  u8x16_to_f32 (cb, fb);
  for (j = 0; j < 4; j++) {
    vst1q_f32 (r + 4 * j, vmulq_n_f32 (fr[j], n));
    vst1q_f32 (g + 4 * j, vmulq_n_f32 (fg[j], n));
    vst1q_f32 (b + 4 * j, vmulq_n_f32 (fb[j], n));
  }
}

/* The row converters below: @n blocks of 16 pixels from frame column @x
 * (even for YUV, so that chroma pairs line up) into r, g, b.  One loop
 * per format, each its own function (noinline: one call a row, and a loop
 * objdump shows alone, whose instructions docs/visionprep.md counts); each
 * load reads only the 16 pixels' own bytes. */
#define NEON_ROW_FN static __attribute__ ((noinline)) void
#define NEON_ROW_ARGS const ColourCoef * k, const guint8 * s0, \
    const guint8 * s1, const guint8 * s2, guint x, guint n, gfloat * r, \
    gfloat * g, gfloat * b

NEON_ROW_FN
row_nv12_neon (NEON_ROW_ARGS)
{
  /* a copy the stores to r, g, b cannot alias: no reloads a block */
  const ColourCoef kc = *k;

  for (; n > 0; n--, x += 16, r += 16, g += 16, b += 16) {
    /* 16 bytes of UV from x on: 8 U, 8 V */
    uint8x8x2_t uv = vld2_u8 (s1 + x);

    yuv16_neon (&kc, vld1q_u8 (s0 + x), dup8_neon (uv.val[0]),
        dup8_neon (uv.val[1]), r, g, b);
  }
}

NEON_ROW_FN
row_i420_neon (NEON_ROW_ARGS)
{
  /* a copy the stores to r, g, b cannot alias: no reloads a block */
  const ColourCoef kc = *k;

  for (; n > 0; n--, x += 16, r += 16, g += 16, b += 16)
    yuv16_neon (&kc, vld1q_u8 (s0 + x), dup8_neon (vld1_u8 (s1 + x / 2)),
        dup8_neon (vld1_u8 (s2 + x / 2)), r, g, b);
}

NEON_ROW_FN
row_yuy2_neon (NEON_ROW_ARGS)
{
  /* a copy the stores to r, g, b cannot alias: no reloads a block */
  const ColourCoef kc = *k;

  for (; n > 0; n--, x += 16, r += 16, g += 16, b += 16) {
    /* Y0 U Y1 V: 8 of each from 32 bytes */
    uint8x8x4_t p = vld4_u8 (s0 + (gsize) x * 2);
    uint8x16_t y = vcombine_u8 (vzip1_u8 (p.val[0], p.val[2]),
        vzip2_u8 (p.val[0], p.val[2]));

    yuv16_neon (&kc, y, dup8_neon (p.val[1]), dup8_neon (p.val[3]), r, g, b);
  }
}

NEON_ROW_FN
row_gray8_neon (NEON_ROW_ARGS)
{
  const float32x4_t off = vdupq_n_f32 (k->y_offset);
  const gfloat scale = k->y_scale;
  guint j;

  for (; n > 0; n--, x += 16, r += 16, g += 16, b += 16) {
    float32x4_t f[4];

    u8x16_to_f32 (vld1q_u8 (s0 + x), f);
    for (j = 0; j < 4; j++) {
      /* as the scalar path: (Y - offset) * scale, clamped */
      float32x4_t l = clamp01_neon (vmulq_n_f32 (vsubq_f32 (f[j], off),
              scale));

      vst1q_f32 (r + 4 * j, l);
      vst1q_f32 (g + 4 * j, l);
      vst1q_f32 (b + 4 * j, l);
    }
  }
}

/* Packed RGB of 3 and 4 bytes a pixel, in either order: the load
 * deinterleaves (vld3/vld4) */
NEON_ROW_FN
row_rgb_neon (NEON_ROW_ARGS)
{
  for (; n > 0; n--, x += 16, r += 16, g += 16, b += 16) {
    uint8x16x3_t p = vld3q_u8 (s0 + (gsize) x * 3);

    rgb16_neon (p.val[0], p.val[1], p.val[2], r, g, b);
  }
}

NEON_ROW_FN
row_bgr_neon (NEON_ROW_ARGS)
{
  for (; n > 0; n--, x += 16, r += 16, g += 16, b += 16) {
    uint8x16x3_t p = vld3q_u8 (s0 + (gsize) x * 3);

    rgb16_neon (p.val[2], p.val[1], p.val[0], r, g, b);
  }
}

NEON_ROW_FN
row_rgbx_neon (NEON_ROW_ARGS)
{
  for (; n > 0; n--, x += 16, r += 16, g += 16, b += 16) {
    uint8x16x4_t p = vld4q_u8 (s0 + (gsize) x * 4);

    rgb16_neon (p.val[0], p.val[1], p.val[2], r, g, b);
  }
}

NEON_ROW_FN
row_bgrx_neon (NEON_ROW_ARGS)
{
  for (; n > 0; n--, x += 16, r += 16, g += 16, b += 16) {
    uint8x16x4_t p = vld4q_u8 (s0 + (gsize) x * 4);

    rgb16_neon (p.val[2], p.val[1], p.val[0], r, g, b);
  }
}

/* Every format, 16 pixels at a time; the odd first column (for the
 * chroma pairs) and the tail go scalar. */
static void
convert_row_neon (const NpuVisionPrepPlan * plan,
    const guint8 * const *planes, const gssize * strides, guint row,
    gfloat * out)
{
  gfloat *r = out, *g = out + plan->slot_floats, *b = g + plan->slot_floats;
  const guint8 *s0 = planes[0] + (gssize) row * strides[0];
  const guint8 *s1 = NULL, *s2 = NULL;
  guint i = 0, n;
  void (*fn) (NEON_ROW_ARGS);

  switch (plan->params.format) {
    case NPU_PIXEL_FORMAT_NV12:
      fn = row_nv12_neon;
      break;
    case NPU_PIXEL_FORMAT_I420:
      fn = row_i420_neon;
      break;
    case NPU_PIXEL_FORMAT_YUY2:
      fn = row_yuy2_neon;
      break;
    case NPU_PIXEL_FORMAT_GRAY8:
      fn = row_gray8_neon;
      break;
    case NPU_PIXEL_FORMAT_RGB:
      fn = row_rgb_neon;
      break;
    case NPU_PIXEL_FORMAT_BGR:
      fn = row_bgr_neon;
      break;
    case NPU_PIXEL_FORMAT_RGBA:
    case NPU_PIXEL_FORMAT_RGBX:
      fn = row_rgbx_neon;
      break;
    case NPU_PIXEL_FORMAT_BGRA:
    case NPU_PIXEL_FORMAT_BGRX:
      fn = row_bgrx_neon;
      break;
    default:
      /* check_params() took no other format */
      g_assert_not_reached ();
      return;
  }
  if (plan->cx % 2 == 1) {
    convert_row_scalar (plan, planes, strides, row, 0, 1, out);
    i = 1;
  }
  if (npu_pixel_format_n_planes (plan->params.format) > 1)
    s1 = planes[1] + (gssize) (row / 2) * strides[1];
  if (npu_pixel_format_n_planes (plan->params.format) > 2)
    s2 = planes[2] + (gssize) (row / 2) * strides[2];
  n = (plan->cw - i) / 16;
  fn (&plan->coef, s0, s1, s2, plan->cx + i, n, r + i, g + i, b + i);
  i += 16 * n;
  if (i < plan->cw)
    convert_row_scalar (plan, planes, strides, row, i, plan->cw, out);
}

/* acc (+)= w * src over @n floats (rows of the ring are 32-byte aligned) */
static void
axpy_neon (gfloat * acc, const gfloat * src, gfloat w, gsize n, gboolean first)
{
  gsize i = 0;

  /* 8 floats a step: the loop's own instructions are then a quarter of
   * it, as in the AVX2 loop */
  if (first) {
    for (; i + 8 <= n; i += 8) {
      vst1q_f32 (acc + i, vmulq_n_f32 (vld1q_f32 (src + i), w));
      vst1q_f32 (acc + i + 4, vmulq_n_f32 (vld1q_f32 (src + i + 4), w));
    }
    for (; i < n; i++)
      acc[i] = w * src[i];
  } else {
    for (; i + 8 <= n; i += 8) {
      vst1q_f32 (acc + i, vfmaq_n_f32 (vld1q_f32 (acc + i),
              vld1q_f32 (src + i), w));
      vst1q_f32 (acc + i + 4, vfmaq_n_f32 (vld1q_f32 (acc + i + 4),
              vld1q_f32 (src + i + 4), w));
    }
    for (; i < n; i++)
      acc[i] += w * src[i];
  }
}

/* The sums of 4 vectors, as one vector */
static inline float32x4_t
sum4_neon (const float32x4_t * v)
{
  return vpaddq_f32 (vpaddq_f32 (v[0], v[1]), vpaddq_f32 (v[2], v[3]));
}

/* Horizontal filter of one channel row @a, normalised: the AVX2 path's
 * padded tables (8 outputs a block, each output's taps in chunks of 8 with
 * zero weights), an 8-float chunk as two NEON vectors; the 8 windows'
 * products then summed across by pairwise adds.  A block whose outputs are
 * consecutive floats is stored as two vectors, any other lane by lane. */
static void
hfilter_neon (const NpuVisionPrepPlan * plan, const gfloat * a, gfloat * o,
    gfloat sc, gfloat bi)
{
  const guint T8 = plan->T8;
  const gsize *col_off = plan->col_off + plan->dx;
  const float32x4_t biv = vdupq_n_f32 (bi);
  guint x, j, k, lane;

  for (x = 0; x < plan->dw; x += 8) {
    float32x4_t prod[8], r[2];
    guint n = MIN (8, plan->dw - x);

    /* unrolled, so that prod[] stays in registers (GCC 12 keeps the loop
     * and spills it to the stack otherwise) */
#pragma GCC unroll 8
    for (j = 0; j < 8; j++) {
      const gfloat *w = plan->hw8 + (gsize) (x + j) * T8;
      const gfloat *src = a + plan->hstart8[x + j];
      float32x4_t lo = vmulq_f32 (vld1q_f32 (w), vld1q_f32 (src));
      float32x4_t hi = vmulq_f32 (vld1q_f32 (w + 4), vld1q_f32 (src + 4));

      for (k = 8; k < T8; k += 8) {
        lo = vfmaq_f32 (lo, vld1q_f32 (w + k), vld1q_f32 (src + k));
        hi = vfmaq_f32 (hi, vld1q_f32 (w + k + 4), vld1q_f32 (src + k + 4));
      }
      prod[j] = vaddq_f32 (lo, hi);
    }
    r[0] = vfmaq_n_f32 (biv, sum4_neon (prod), sc);
    r[1] = vfmaq_n_f32 (biv, sum4_neon (prod + 4), sc);
    if (plan->hsplit[x / 8] == 8) {
      vst1q_f32 (o + col_off[x], r[0]);
      vst1q_f32 (o + col_off[x] + 4, r[1]);
    } else {
      gfloat res[8];

      vst1q_f32 (res, r[0]);
      vst1q_f32 (res + 4, r[1]);
      for (lane = 0; lane < n; lane++)
        o[col_off[x + lane]] = res[lane];
    }
  }
}
#endif

static void
axpy_scalar (gfloat * acc, const gfloat * src, gfloat w, gsize n,
    gboolean first)
{
  gsize i;

  if (first)
    for (i = 0; i < n; i++)
      acc[i] = w * src[i];
  else
    for (i = 0; i < n; i++)
      acc[i] += w * src[i];
}

/* ------------------------------------------------------------------------
 * Run
 */

typedef struct
{
  gfloat *ring;                 /* fy.n_taps slots of 3 * slot_floats */
  gint64 *tags;                 /* source row in each slot, -1 = none */
  gfloat *acc;                  /* 3 * slot_floats */
} Scratch;

typedef struct
{
  const NpuVisionPrepPlan *plan;
  const guint8 *const *planes;
  const gssize *strides;
  gfloat *out;
  Scratch *scratch;             /* one per worker, made on first use */
} RunCtx;

static const gfloat *
get_row (const NpuVisionPrepPlan * plan, const RunCtx * ctx, Scratch * s,
    guint row)
{
  guint slot = row % plan->fy.n_taps;
  gfloat *dst = s->ring + (gsize) slot * 3 * plan->slot_floats;

  if (s->tags[slot] == row)
    return dst;
#ifdef HAVE_X86_DISPATCH
  if (plan->use_avx2 && is_yuv (plan->params.format))
    convert_row_avx2 (plan, ctx->planes, ctx->strides, plan->cy + row, dst);
  else
#elif defined(HAVE_NEON_DISPATCH)
  if (plan->use_neon)
    convert_row_neon (plan, ctx->planes, ctx->strides, plan->cy + row, dst);
  else
#endif
    convert_row_scalar (plan, ctx->planes, ctx->strides, plan->cy + row, 0,
        plan->cw, dst);
  s->tags[slot] = row;
  return dst;
}

static void
fill_span (const NpuVisionPrepPlan * plan, gfloat * out, guint y, guint x0,
    guint x1)
{
  guint c, x;

  for (c = 0; c < 3; c++) {
    gfloat *o = out + plan->row_off[y] + c * plan->chan_stride;

    for (x = x0; x < x1; x++)
      o[plan->col_off[x]] = plan->fill[c];
  }
}

static void
run_rows (gsize start, gsize end, guint worker, gpointer user_data)
{
  RunCtx *ctx = user_data;
  const NpuVisionPrepPlan *plan = ctx->plan;
  const Filter *fx = &plan->fx, *fy = &plan->fy;
  Scratch *s = &ctx->scratch[worker];
  gsize plane = plan->slot_floats;
  gsize y;
  guint k, c, x;

  if (!s->ring) {
    s->ring = g_aligned_alloc (fy->n_taps * 3 * plane, sizeof (gfloat), 32);
    /* + 8: the SIMD horizontal windows may reach past the last plane */
    s->acc = g_aligned_alloc (3 * plane + 8, sizeof (gfloat), 32);
    /* Zeroed: the padding between planes goes through the vertical sum,
     * and the SIMD horizontal windows multiply it by zero weights, so it
     * must hold no NaN or Inf (nor slow denormals). */
    memset (s->ring, 0, fy->n_taps * 3 * plane * sizeof (gfloat));
    memset (s->acc, 0, (3 * plane + 8) * sizeof (gfloat));
    s->tags = g_new (gint64, fy->n_taps);
    for (k = 0; k < fy->n_taps; k++)
      s->tags[k] = -1;
  }

  for (y = start; y < end; y++) {
    guint yy, row0, n;
    const gfloat *wy;

    if (y < plan->dy || y >= plan->dy + plan->dh) {
      fill_span (plan, ctx->out, y, 0, plan->params.out_width);
      continue;
    }
    yy = y - plan->dy;
    row0 = fy->start[yy];
    n = fy->count[yy];
    wy = fy->weights + (gsize) yy *fy->n_taps;
    /* Vertical: acc = sum of whole converted rows.  The padded window of
     * the vertical filter may start before the real taps; skip zeros. */
    for (k = 0; k < fy->n_taps && n > 0; k++) {
      const gfloat *src;

      if (wy[k] == 0.0f)
        continue;
      src = get_row (plan, ctx, s, row0 + k);
#ifdef HAVE_X86_DISPATCH
      if (plan->use_avx2)
        axpy_avx2 (s->acc, src, wy[k], 3 * plane, n == fy->count[yy]);
      else
#elif defined(HAVE_NEON_DISPATCH)
      if (plan->use_neon)
        axpy_neon (s->acc, src, wy[k], 3 * plane, n == fy->count[yy]);
      else
#endif
        axpy_scalar (s->acc, src, wy[k], 3 * plane, n == fy->count[yy]);
      n--;
    }
    /* Horizontal, normalise, store at the layout's offsets */
    for (c = 0; c < 3; c++) {
      const gfloat *a = s->acc + c * plane;
      gfloat *o = ctx->out + plan->row_off[y] + c * plan->chan_stride;
      const gsize *col_off = plan->col_off + plan->dx;
      gfloat sc = plan->scale[c], bi = plan->bias[c];

#ifdef HAVE_X86_DISPATCH
      if (plan->use_avx2) {
        hfilter_avx2 (plan, a, o, sc, bi);
        continue;
      }
#elif defined(HAVE_NEON_DISPATCH)
      if (plan->use_neon) {
        hfilter_neon (plan, a, o, sc, bi);
        continue;
      }
#endif
      for (x = 0; x < plan->dw; x++) {
        const gfloat *w = fx->weights + (gsize) x * fx->n_taps;
        const gfloat *p = a + fx->start[x];
        gfloat sum = 0.0f;

        for (k = 0; k < fx->n_taps; k++)
          sum += w[k] * p[k];
        o[col_off[x]] = sum * sc + bi;
      }
    }
    if (plan->dw < plan->params.out_width) {
      fill_span (plan, ctx->out, y, 0, plan->dx);
      fill_span (plan, ctx->out, y, plan->dx + plan->dw,
          plan->params.out_width);
    }
  }
}

/**
 * npu_vision_prep_run:
 * @plan: the plan
 * @planes: the frame's planes (npu_pixel_format_n_planes() of them), each
 *   pointing at its first row, as mapped; only the crop's rows are read
 * @strides: bytes from one row to the next, per plane (may be negative for
 *   bottom-up frames)
 * @out: npu_vision_prep_plan_get_n_floats() floats
 * @task: (nullable): run inside this backend task, over all its threads
 *   with npu_task_parallel_for(); %NULL: on the calling thread
 *
 * Writes every float of @out once.  The plan is only read, so several runs
 * of one plan may go on at once.
 */
void
npu_vision_prep_run (const NpuVisionPrepPlan * plan,
    const guint8 * const *planes, const gssize * strides, gfloat * out,
    NpuTask * task)
{
  npu_vision_prep_run_counted (plan, planes, strides, out, task, NULL);
}

/**
 * npu_vision_prep_run_counted:
 * @bytes: (nullable): adds what the run moved: the frame's bytes it reads
 *   (%NPU_BYTES_FRAME: the crop's plane spans of the rows its vertical
 *   taps use, each once) and the tensor it writes (%NPU_BYTES_ACTIVATIONS)
 *
 * npu_vision_prep_run(), counting its bytes.
 */
void
npu_vision_prep_run_counted (const NpuVisionPrepPlan * plan,
    const guint8 * const *planes, const gssize * strides, gfloat * out,
    NpuTask * task, NpuBytes * bytes)
{
  RunCtx ctx;
  guint n_workers, w;
  guint out_h;
  gsize grain;

  g_return_if_fail (plan != NULL);
  g_return_if_fail (planes != NULL && strides != NULL && out != NULL);

  out_h = plan->params.out_height;
  n_workers = task ? MAX (npu_task_get_n_threads (task), 1) : 1;
  ctx.plan = plan;
  ctx.planes = planes;
  ctx.strides = strides;
  ctx.out = out;
  ctx.scratch = g_new0 (Scratch, n_workers);

  if (task) {
    /* A few slices per thread balance the load; larger slices reuse more
     * converted rows across output rows (each slice boundary converts the
     * shared rows twice). */
    grain = MAX ((gsize) 1, (out_h + 4 * n_workers - 1) / (4 * n_workers));
    npu_task_parallel_for (task, out_h, grain, run_rows, &ctx);
  } else {
    run_rows (0, out_h, 0, &ctx);
  }

  for (w = 0; w < n_workers; w++) {
    g_aligned_free (ctx.scratch[w].ring);
    g_aligned_free (ctx.scratch[w].acc);
    g_free (ctx.scratch[w].tags);
  }
  g_free (ctx.scratch);
  if (bytes) {
    npu_bytes_read (bytes, NPU_BYTES_FRAME, plan->frame_bytes);
    npu_bytes_write (bytes, NPU_BYTES_ACTIVATIONS,
        (guint64) plan->n_floats * sizeof (gfloat));
  }
}
