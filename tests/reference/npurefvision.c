/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: fused vision preprocessing, the naive way, in double
 *
 * Written straight from the definitions in core/cpu/npuvisionprep.h and shared
 * by the tests of the core (tests/unit/test-visionprep.c) and of the
 * element (tests/check/test-npuvisiontok.c): the whole source frame is
 * converted to an RGB image (matrix from Kr and Kb, G solved from the luma
 * equation, clamp), then cropped, then resized with the filter computed from
 * its definition (bilinear sample position, or the exact overlap of each
 * source pixel with the output pixel's footprint), then normalised, then
 * patchified by index arithmetic.  No code is shared with the fused path.
 */
#include "tests/reference/npurefvision.h"

#include <math.h>
#include <string.h>

static const guint8 *
at (const NpuRefFrame * fr, guint p, guint x, guint y)
{
  return fr->planes[p] + (gssize) y * fr->strides[p] + x;
}

static void
ref_yuv (guint yc, guint uc, guint vc, NpuColorMatrix m, NpuColorRange r,
    gdouble rgb[3])
{
  /* Kr, Kb as ITU-R BT.601, BT.709, BT.2020, SMPTE 240M and FCC define
   * them */
  gdouble kr = m == NPU_COLOR_MATRIX_BT709 ? 0.2126 :
      m == NPU_COLOR_MATRIX_BT2020 ? 0.2627 :
      m == NPU_COLOR_MATRIX_SMPTE240M ? 0.212 :
      m == NPU_COLOR_MATRIX_FCC ? 0.30 : 0.299;
  gdouble kb = m == NPU_COLOR_MATRIX_BT709 ? 0.0722 :
      m == NPU_COLOR_MATRIX_BT2020 ? 0.0593 :
      m == NPU_COLOR_MATRIX_SMPTE240M ? 0.087 :
      m == NPU_COLOR_MATRIX_FCC ? 0.11 : 0.114;
  gdouble kg = 1.0 - kr - kb;
  gdouble ey, pb, pr, R, G, B;
  guint c;

  if (r == NPU_COLOR_RANGE_FULL) {
    ey = yc / 255.0;
    pb = (uc - 128.0) / 255.0;
    pr = (vc - 128.0) / 255.0;
  } else {
    ey = (yc - 16.0) / 219.0;
    pb = (uc - 128.0) / 224.0;
    pr = (vc - 128.0) / 224.0;
  }
  /* Pb = (B - Y) / (2 (1 - Kb)), Pr = (R - Y) / (2 (1 - Kr)),
   * Y = Kr R + Kg G + Kb B */
  R = ey + 2.0 * (1.0 - kr) * pr;
  B = ey + 2.0 * (1.0 - kb) * pb;
  G = (ey - kr * R - kb * B) / kg;
  rgb[0] = R;
  rgb[1] = G;
  rgb[2] = B;
  for (c = 0; c < 3; c++)
    rgb[c] = CLAMP (rgb[c], 0.0, 1.0);
}

/* Whole frame to RGB doubles [h][w][3] */
static gdouble *
ref_to_rgb (const NpuRefFrame * fr, NpuColorMatrix m, NpuColorRange r)
{
  gdouble *img = g_new (gdouble, (gsize) fr->width * fr->height * 3);
  guint x, y, c;

  for (y = 0; y < fr->height; y++) {
    for (x = 0; x < fr->width; x++) {
      gdouble *o = img + ((gsize) y * fr->width + x) * 3;
      const guint8 *px;

      switch (fr->format) {
        case NPU_PIXEL_FORMAT_NV12:
          ref_yuv (*at (fr, 0, x, y), *at (fr, 1, (x / 2) * 2, y / 2),
              *at (fr, 1, (x / 2) * 2 + 1, y / 2), m, r, o);
          break;
        case NPU_PIXEL_FORMAT_I420:
          ref_yuv (*at (fr, 0, x, y), *at (fr, 1, x / 2, y / 2),
              *at (fr, 2, x / 2, y / 2), m, r, o);
          break;
        case NPU_PIXEL_FORMAT_YUY2:
          px = at (fr, 0, (x / 2) * 4, y);      /* Y0 U Y1 V */
          ref_yuv (px[(x % 2) * 2], px[1], px[3], m, r, o);
          break;
        case NPU_PIXEL_FORMAT_GRAY8:{
          gdouble v = r == NPU_COLOR_RANGE_FULL ? *at (fr, 0, x, y) / 255.0 :
              (*at (fr, 0, x, y) - 16.0) / 219.0;
          o[0] = o[1] = o[2] = CLAMP (v, 0.0, 1.0);
          break;
        }
        case NPU_PIXEL_FORMAT_RGB:
        case NPU_PIXEL_FORMAT_BGR:
          px = at (fr, 0, x * 3, y);
          for (c = 0; c < 3; c++)
            o[c] = px[fr->format == NPU_PIXEL_FORMAT_RGB ? c : 2 - c] / 255.0;
          break;
        case NPU_PIXEL_FORMAT_RGBA:
        case NPU_PIXEL_FORMAT_RGBX:
          px = at (fr, 0, x * 4, y);
          for (c = 0; c < 3; c++)
            o[c] = px[c] / 255.0;
          break;
        default:                /* BGRA, BGRx */
          px = at (fr, 0, x * 4, y);
          for (c = 0; c < 3; c++)
            o[c] = px[2 - c] / 255.0;
          break;
      }
    }
  }
  return img;
}

/* Weight of source pixel @i for output position @o, resizing @src to @dst,
 * straight from the definition. */
static gdouble
ref_weight (guint src, guint dst, guint o, guint i)
{
  gdouble s = (gdouble) src / dst;

  if (s > 2.0) {
    gdouble a = o * s, b = (o + 1) * s;
    gdouble lo = MAX (a, (gdouble) i), hi = MIN (b, (gdouble) i + 1);

    return hi > lo ? (hi - lo) / s : 0.0;
  } else {
    gdouble p = (o + 0.5) * s - 0.5, f;
    gint i0;

    p = CLAMP (p, 0.0, src - 1.0);
    i0 = (gint) floor (p);
    f = p - i0;
    if ((gint) i == i0)
      return 1.0 - f;
    if ((gint) i == i0 + 1)
      return f;
    return 0.0;
  }
}

/* The whole pipeline; returns CHW doubles [3][oh][ow] (normalised) and the
 * content rectangle it used. */
gdouble *
npu_ref_vision_prep (const NpuRefFrame * fr, const NpuVisionPrepParams * p,
    guint rect[4])
{
  gdouble *rgb = ref_to_rgb (fr, p->matrix, p->range);
  guint cw = p->crop_width ? p->crop_width : fr->width - p->crop_x;
  guint ch = p->crop_height ? p->crop_height : fr->height - p->crop_y;
  guint ow = p->out_width, oh = p->out_height, dw = ow, dh = oh, dx = 0, dy = 0;
  gdouble *crop, *out;
  gdouble **wx, **wy;
  guint *xlo, *xhi;
  guint x, y, i, j, c;

  /* Crop */
  crop = g_new (gdouble, (gsize) cw * ch * 3);
  for (y = 0; y < ch; y++)
    memcpy (crop + (gsize) y * cw * 3,
        rgb + (((gsize) y + p->crop_y) * fr->width + p->crop_x) * 3,
        cw * 3 * sizeof (gdouble));
  g_free (rgb);

  /* Letterbox geometry: scale by the smaller ratio, round, centre */
  if (p->mode == NPU_VISION_PREP_LETTERBOX) {
    gdouble s = MIN ((gdouble) ow / cw, (gdouble) oh / ch);

    if ((gdouble) ow / cw <= (gdouble) oh / ch)
      dh = (guint) floor ((gdouble) ch * ow / cw + 0.5);
    else
      dw = (guint) floor ((gdouble) cw * oh / ch + 0.5);
    (void) s;
    dw = CLAMP (dw, 1, ow);
    dh = CLAMP (dh, 1, oh);
    dx = (ow - dw) / 2;
    dy = (oh - dh) / 2;
  }
  rect[0] = dx;
  rect[1] = dy;
  rect[2] = dw;
  rect[3] = dh;

  /* The source columns with a non-zero weight, [xlo, xhi), so that the
   * sums below skip the zero terms (fast enough to run under valgrind) */
  wx = g_new (gdouble *, dw);
  xlo = g_new (guint, dw);
  xhi = g_new (guint, dw);
  for (x = 0; x < dw; x++) {
    wx[x] = g_new (gdouble, cw);
    xlo[x] = cw;
    xhi[x] = 0;
    for (i = 0; i < cw; i++) {
      wx[x][i] = ref_weight (cw, dw, x, i);
      if (wx[x][i] != 0.0) {
        xlo[x] = MIN (xlo[x], i);
        xhi[x] = i + 1;
      }
    }
  }
  wy = g_new (gdouble *, dh);
  for (y = 0; y < dh; y++) {
    wy[y] = g_new (gdouble, ch);
    for (j = 0; j < ch; j++)
      wy[y][j] = ref_weight (ch, dh, y, j);
  }

  out = g_new (gdouble, (gsize) 3 * ow * oh);
  for (y = 0; y < oh; y++) {
    for (x = 0; x < ow; x++) {
      gdouble v[3] = { 0, 0, 0 };

      if (x < dx || x >= dx + dw || y < dy || y >= dy + dh) {
        for (c = 0; c < 3; c++)
          v[c] = p->fill_rgb[c] / 255.0;
      } else {
        /* 2-D sum over the source, the product of the 1-D weights */
        for (j = 0; j < ch; j++) {
          gdouble a = wy[y - dy][j];

          if (a == 0.0)
            continue;
          for (i = xlo[x - dx]; i < xhi[x - dx]; i++) {
            gdouble w = a * wx[x - dx][i];

            if (w == 0.0)
              continue;
            for (c = 0; c < 3; c++)
              v[c] += w * crop[((gsize) j * cw + i) * 3 + c];
          }
        }
      }
      for (c = 0; c < 3; c++)
        out[((gsize) c * oh + y) * ow + x] = (v[c] - p->mean[c]) / p->std[c];
    }
  }
  for (x = 0; x < dw; x++)
    g_free (wx[x]);
  for (y = 0; y < dh; y++)
    g_free (wy[y]);
  g_free (wx);
  g_free (xlo);
  g_free (xhi);
  g_free (wy);
  g_free (crop);
  return out;
}

/* CHW to [n_patches][3][ph][pw], patches in raster order */
gdouble *
npu_ref_patchify (const gdouble * chw, guint ow, guint oh, guint patch)
{
  guint gx = ow / patch, gy = oh / patch;
  gdouble *o = g_new (gdouble, (gsize) 3 * ow * oh);
  guint py, px, c, dy, dx;
  gsize n = 0;

  for (py = 0; py < gy; py++)
    for (px = 0; px < gx; px++)
      for (c = 0; c < 3; c++)
        for (dy = 0; dy < patch; dy++)
          for (dx = 0; dx < patch; dx++)
            o[n++] = chw[((gsize) c * oh + py * patch + dy) * ow
                + px * patch + dx];
  return o;
}
