/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: fused vision preprocessing against a plain reference
 *
 * The reference (tests/reference/npurefvision.c) is written the naive way,
 * in double precision, straight from the definitions in npuvisionprep.h:
 * the whole source frame is converted to an RGB image, then cropped,
 * resized with the filter computed from its definition, normalised and
 * patchified by index arithmetic.  No code is shared with the fused path.
 *
 * Tolerance: 1e-4 absolute on normalised values.  The fused path computes in
 * F32: every value in [0, 1] goes through a conversion of a few operations,
 * then a vertical and a horizontal weighted sum of at most ~100 taps here,
 * each step adding a relative error of 2^-24; the bound is about
 * (taps_x + taps_y + 8) * 6e-8 < 2e-5 in [0, 1] units, times 1 / std (< 4
 * for CLIP's std) < 8e-5.  Typical errors are ~1e-6.  The normalised range
 * is (1 - 0) / std ~ 3.7 wide, so 1e-4 is below 1/30000 of it: a wrong
 * pixel, offset, channel, chroma sample or weight (>= 1/255 of the range,
 * and typically 100 times more with random pixels) cannot hide under it.
 */
#include <core/cpu/npuvisionprep.h>
#include <core/cpu/npucpu.h>
#include "tests/reference/npurefvision.h"
#include "tests/npucompare.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define TOL 1e-4

/* ------------------------------------------------------------------------
 * Frames
 */
typedef struct
{
  NpuRefFrame ref;              /* what the plane pointers see */
  guint8 *mem[3];
  /* with guard pages: each plane's mapping, the plane at its end */
  guint8 *map[3];
  gsize map_size[3];
} Frame;

/* When set, frame_new() puts every plane right before an inaccessible
 * page: a read of even one byte past a plane faults, on any machine and
 * for the SIMD loads valgrind and the sanitizers do not check by byte
 * (GCC's -fsanitize=address does not instrument NEON's vld3/vld4). */
static gboolean guard_pages;

static const NpuPixelFormat all_formats[] = {
  NPU_PIXEL_FORMAT_NV12, NPU_PIXEL_FORMAT_I420, NPU_PIXEL_FORMAT_YUY2,
  NPU_PIXEL_FORMAT_RGB, NPU_PIXEL_FORMAT_BGR, NPU_PIXEL_FORMAT_RGBA,
  NPU_PIXEL_FORMAT_BGRA, NPU_PIXEL_FORMAT_RGBX, NPU_PIXEL_FORMAT_BGRX,
  NPU_PIXEL_FORMAT_GRAY8,
};

static const gchar *
format_name (NpuPixelFormat f)
{
  static const gchar *names[] = { "?", "NV12", "I420", "YUY2", "RGB", "BGR",
    "RGBA", "BGRA", "RGBx", "BGRx", "GRAY8"
  };
  return names[f];
}

/* Row bytes and rows of plane @p, from the formats' definitions */
static void
plane_size (NpuPixelFormat f, guint w, guint h, guint p, guint * row_bytes,
    guint * rows)
{
  guint cw = (w + 1) / 2, ch = (h + 1) / 2;

  *rows = h;
  switch (f) {
    case NPU_PIXEL_FORMAT_NV12:
      *row_bytes = p == 0 ? w : 2 * cw;
      *rows = p == 0 ? h : ch;
      break;
    case NPU_PIXEL_FORMAT_I420:
      *row_bytes = p == 0 ? w : cw;
      *rows = p == 0 ? h : ch;
      break;
    case NPU_PIXEL_FORMAT_YUY2:
      *row_bytes = 4 * cw;
      break;
    case NPU_PIXEL_FORMAT_RGB:
    case NPU_PIXEL_FORMAT_BGR:
      *row_bytes = 3 * w;
      break;
    case NPU_PIXEL_FORMAT_GRAY8:
      *row_bytes = w;
      break;
    default:
      *row_bytes = 4 * w;
      break;
  }
}

/* Random pixels (most YUV triples out of gamut: clamping is exercised),
 * @pad random bytes after every row (a wrong stride reads them), rows
 * stored bottom-up with a negative stride if @flip.  Allocations are exact,
 * so that valgrind sees any read past a plane. */
static Frame *
frame_new (NpuPixelFormat f, guint w, guint h, guint pad, gboolean flip,
    GRand * rand)
{
  Frame *fr = g_new0 (Frame, 1);
  guint p, i;

  fr->ref.format = f;
  fr->ref.width = w;
  fr->ref.height = h;
  for (p = 0; p < npu_pixel_format_n_planes (f); p++) {
    guint rb, rows;
    gsize stride, size;

    plane_size (f, w, h, p, &rb, &rows);
    stride = rb + pad;
    size = stride * (rows - 1) + rb;
    if (guard_pages) {
      gsize page = sysconf (_SC_PAGESIZE);
      gsize len = (size + page - 1) / page * page;

      fr->map_size[p] = len + page;
      fr->map[p] = mmap (NULL, fr->map_size[p], PROT_READ | PROT_WRITE,
          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      g_assert_true (fr->map[p] != MAP_FAILED);
      g_assert_cmpint (mprotect (fr->map[p] + len, page, PROT_NONE), ==, 0);
      fr->mem[p] = fr->map[p] + len - size;
    } else {
      fr->mem[p] = g_malloc (size);
    }
    for (i = 0; i < size; i++)
      fr->mem[p][i] = g_rand_int_range (rand, 0, 256);
    if (flip) {
      fr->ref.planes[p] = fr->mem[p] + stride * (rows - 1);
      fr->ref.strides[p] = -(gssize) stride;
    } else {
      fr->ref.planes[p] = fr->mem[p];
      fr->ref.strides[p] = stride;
    }
  }
  return fr;
}

static void
frame_free (Frame * fr)
{
  guint p;

  for (p = 0; p < 3; p++) {
    if (fr->map[p])
      g_assert_cmpint (munmap (fr->map[p], fr->map_size[p]), ==, 0);
    else
      g_free (fr->mem[p]);
  }
  g_free (fr);
}

/* ------------------------------------------------------------------------
 * Comparison
 */
typedef struct
{
  NpuVisionPrepPlan *plan;
  const Frame *fr;
  gfloat *out;
} TaskCtx;

static gboolean
run_task (NpuTask * task, gpointer user_data, GError ** error)
{
  TaskCtx *t = user_data;

  npu_vision_prep_run (t->plan, t->fr->ref.planes, t->fr->ref.strides, t->out,
      task);
  return TRUE;
}

static gfloat *
run_fused (const NpuVisionPrepParams * p, const Frame * fr, NpuQueue * queue)
{
  GError *error = NULL;
  NpuVisionPrepPlan *plan = npu_vision_prep_plan_new (p, &error);
  gfloat *out;
  gsize n, i;

  g_assert_no_error (error);
  n = npu_vision_prep_plan_get_n_floats (plan);
  g_assert_cmpuint (n, ==, (gsize) 3 * p->out_width * p->out_height);
  out = g_new (gfloat, n);
  for (i = 0; i < n; i++)
    out[i] = NAN;               /* every float must be written */
  if (queue) {
    TaskCtx t = { plan, fr, out };
    NpuFence *fence = npu_queue_submit (queue, run_task, &t, NULL, NULL, 0);

    g_assert_true (npu_fence_wait (fence, -1, &error));
    g_assert_no_error (error);
    npu_fence_unref (fence);
  } else {
    npu_vision_prep_run (plan, fr->ref.planes, fr->ref.strides, out, NULL);
  }
  npu_vision_prep_plan_free (plan);
  return out;
}

static gdouble worst_error;

static void
compare (const gfloat * got, const gdouble * want, gsize n, const gchar * what)
{
  gsize worst_i = 0;
  /* NaN (a float never written) stays NaN and fails */
  gdouble worst = npu_max_abs_diff (got, want, n, &worst_i);

  if (!npu_within (worst, TOL))
    g_error ("%s: element %" G_GSIZE_FORMAT " is %.7f, reference %.7f", what,
        worst_i, got[worst_i], want[worst_i]);
  worst_error = npu_err_max (worst_error, worst);
}

/* Runs @p on a fresh random frame in CHW and PATCHES (when the patch
 * divides) layouts, against the reference. */
static void
check_case (NpuVisionPrepParams * p, guint pad, gboolean flip,
    NpuQueue * queue, GRand * rand)
{
  Frame *fr = frame_new (p->format, p->width, p->height, pad, flip, rand);
  guint rect[4], got_rect[4];
  gdouble *want = npu_ref_vision_prep (&fr->ref, p, rect);
  gchar *what = g_strdup_printf ("%s %ux%u crop %u,%u %ux%u -> %ux%u %s "
      "%s %s pad %u%s", format_name (p->format), p->width, p->height,
      p->crop_x, p->crop_y, p->crop_width, p->crop_height, p->out_width,
      p->out_height, p->mode == NPU_VISION_PREP_LETTERBOX ? "letterbox" :
      "stretch", p->matrix == NPU_COLOR_MATRIX_BT709 ? "709" : "601",
      p->range == NPU_COLOR_RANGE_FULL ? "full" : "limited", pad,
      flip ? " bottom-up" : "");
  gsize n = (gsize) 3 * p->out_width * p->out_height;
  gfloat *got;
  NpuVisionPrepPlan *plan;

  g_test_message ("%s", what);
  plan = npu_vision_prep_plan_new (p, NULL);
  npu_vision_prep_plan_get_content_rect (plan, &got_rect[0], &got_rect[1],
      &got_rect[2], &got_rect[3]);
  g_assert_cmpmem (got_rect, sizeof (got_rect), rect, sizeof (rect));
  npu_vision_prep_plan_free (plan);

  p->layout = NPU_VISION_PREP_LAYOUT_CHW;
  got = run_fused (p, fr, queue);
  compare (got, want, n, what);
  g_free (got);

  if (p->patch_size && p->out_width % p->patch_size == 0
      && p->out_height % p->patch_size == 0) {
    gdouble *wantp = npu_ref_patchify (want, p->out_width, p->out_height,
        p->patch_size);

    p->layout = NPU_VISION_PREP_LAYOUT_PATCHES;
    got = run_fused (p, fr, queue);
    compare (got, wantp, n, what);
    g_free (got);
    g_free (wantp);
    p->layout = NPU_VISION_PREP_LAYOUT_CHW;
  }
  g_free (want);
  g_free (what);
  frame_free (fr);
}

static void
params_for (NpuVisionPrepParams * p, NpuPixelFormat f, guint w, guint h,
    guint ow, guint oh)
{
  npu_vision_prep_params_init (p);
  p->format = f;
  p->width = w;
  p->height = h;
  p->out_width = ow;
  p->out_height = oh;
}

/* ------------------------------------------------------------------------
 * Tests
 */

/* Every format x matrix x range, odd size, padded strides, both modes */
static void
test_formats (void)
{
  GRand *rand = g_rand_new_with_seed (1);
  /* Under valgrind (NPU_UNDER_VALGRIND) each format runs one matrix and
   * range, in both modes, taken turn by turn: the matrix and the range
   * are only the plan's coefficients (colour_coef_init()), the code that
   * reads the frame and writes the output is the same for all ten pairs,
   * so the other nine add no read or write valgrind has not seen. */
  gboolean one = g_getenv ("NPU_UNDER_VALGRIND") != NULL;
  guint f, m, r;

  for (f = 0; f < G_N_ELEMENTS (all_formats); f++) {
    for (m = 0; m <= NPU_COLOR_MATRIX_FCC; m++) {
      for (r = 0; r < 2; r++) {
        NpuVisionPrepParams p;

        if (one && (m != f % (NPU_COLOR_MATRIX_FCC + 1)
                || r != f / (NPU_COLOR_MATRIX_FCC + 1) % 2))
          continue;
        params_for (&p, all_formats[f], 321, 241, 224, 224);
        p.matrix = m;
        p.range = r;
        check_case (&p, 13, FALSE, NULL, rand);
        /* Letterbox with a fill, a crop at odd coordinates, other mean */
        p.mode = NPU_VISION_PREP_LETTERBOX;
        p.crop_x = 37;
        p.crop_y = 19;
        p.crop_width = 201;
        p.crop_height = 133;
        p.fill_rgb[0] = 127;
        p.fill_rgb[1] = 10;
        p.fill_rgb[2] = 250;
        p.mean[0] = p.mean[1] = p.mean[2] = 0.5;
        p.std[0] = p.std[1] = p.std[2] = 0.5;
        check_case (&p, 0, FALSE, NULL, rand);
      }
    }
  }
  g_rand_free (rand);
}

/* 1x1, 3x5 and other tiny frames, tight strides, up-scaling */
static void
test_tiny (void)
{
  GRand *rand = g_rand_new_with_seed (2);
  static const guint sizes[][4] = {
    {1, 1, 224, 224}, {3, 5, 8, 6}, {5, 3, 4, 4}, {2, 2, 3, 7},
    {1, 7, 2, 2}, {7, 1, 14, 14}, {17, 9, 17, 9}, {33, 31, 16, 16},
  };
  guint f, s, mode;

  for (f = 0; f < G_N_ELEMENTS (all_formats); f++) {
    for (s = 0; s < G_N_ELEMENTS (sizes); s++) {
      for (mode = 0; mode < 2; mode++) {
        NpuVisionPrepParams p;

        params_for (&p, all_formats[f], sizes[s][0], sizes[s][1],
            sizes[s][2], sizes[s][3]);
        p.mode = mode;
        p.patch_size = sizes[s][2] % 2 == 0 && sizes[s][3] % 2 == 0 ? 2 : 1;
        check_case (&p, s % 3, FALSE, NULL, rand);
      }
    }
  }
  g_rand_free (rand);
}

/* Every plane ends at an inaccessible page: widths around the SIMD
 * loops' 16 pixels (a whole number of blocks, and a tail), odd and even
 * crops reaching the right edge, frames read top-down (the last row, at
 * the guard, read last) */
static void
test_guard_pages (void)
{
  GRand *rand = g_rand_new_with_seed (8);
  static const guint widths[] = { 16, 17, 31, 32, 33, 47, 64, 70 };
  guint f, w, c;

  guard_pages = TRUE;
  for (f = 0; f < G_N_ELEMENTS (all_formats); f++) {
    for (w = 0; w < G_N_ELEMENTS (widths); w++) {
      for (c = 0; c < 2; c++) {
        NpuVisionPrepParams p;

        params_for (&p, all_formats[f], widths[w], 9, 16, 8);
        /* from column 0 or 1 to the right edge: the odd start takes the
         * one scalar column first, then whole blocks and a tail */
        p.crop_x = c;
        p.crop_width = widths[w] - c;
        p.patch_size = 8;
        check_case (&p, w % 3, FALSE, NULL, rand);
      }
    }
  }
  guard_pages = FALSE;
  g_rand_free (rand);
}

/* Crops of every parity, negative strides, sub-rectangles at the edges */
static void
test_crops (void)
{
  GRand *rand = g_rand_new_with_seed (3);
  static const guint crops[][4] = {
    {0, 0, 1, 1}, {1, 1, 1, 1}, {100, 60, 0, 0}, {101, 61, 0, 0},
    {0, 0, 50, 120}, {63, 0, 1, 121}, {5, 7, 96, 2}, {40, 30, 61, 61},
  };
  guint f, c;

  for (f = 0; f < G_N_ELEMENTS (all_formats); f++) {
    for (c = 0; c < G_N_ELEMENTS (crops); c++) {
      NpuVisionPrepParams p;

      params_for (&p, all_formats[f], 161, 121, 28, 42);
      p.crop_x = crops[c][0];
      p.crop_y = crops[c][1];
      p.crop_width = crops[c][2];
      p.crop_height = crops[c][3];
      p.mode = c % 2 ? NPU_VISION_PREP_LETTERBOX : NPU_VISION_PREP_STRETCH;
      p.matrix = NPU_COLOR_MATRIX_BT709;
      p.range = c % 3 ? NPU_COLOR_RANGE_FULL : NPU_COLOR_RANGE_LIMITED;
      check_case (&p, c * 5, c % 2 == 0, NULL, rand);
    }
  }
  g_rand_free (rand);
}

/* Camera frames: 1280x720 to 224 and 384 (area in both axes, or area and
 * bilinear), on several threads, with and without SIMD */
static void
test_camera_run (void)
{
  GRand *rand = g_rand_new_with_seed (4);
  NpuDevice *device = npu_device_new_cpu (3);
  NpuQueue *queue = npu_queue_new (device, "visionprep");

  static const NpuPixelFormat fmts[] = { NPU_PIXEL_FORMAT_NV12,
    NPU_PIXEL_FORMAT_I420, NPU_PIXEL_FORMAT_YUY2, NPU_PIXEL_FORMAT_BGRX
  };
  static const guint sizes[] = { 224, 384 };
  guint f, s, mode;

  for (f = 0; f < G_N_ELEMENTS (fmts); f++) {
    for (s = 0; s < G_N_ELEMENTS (sizes); s++) {
      for (mode = 0; mode < 2; mode++) {
        NpuVisionPrepParams p;

        /* Keep the slow reference to the cases that matter */
        if (fmts[f] != NPU_PIXEL_FORMAT_NV12 && s == 1)
          continue;
        params_for (&p, fmts[f], 1280, 720, sizes[s], sizes[s]);
        p.matrix = NPU_COLOR_MATRIX_BT709;
        p.mode = mode;
        p.patch_size = sizes[s] == 224 ? 14 : 16;
        check_case (&p, 64, FALSE, mode ? queue : NULL, rand);
      }
    }
  }
  npu_queue_free (queue);
  npu_device_unref (device);
  g_rand_free (rand);
}

/* Threads, SIMD and scalar must agree: the same sums in the same order,
 * except FMA rounding, so within a few ulps */
static void
test_threads_simd_run (void)
{
  GRand *rand = g_rand_new_with_seed (5);
  NpuDevice *device = npu_device_new_cpu (4);
  NpuQueue *queue = npu_queue_new (device, "visionprep");
  guint f;


  for (f = 0; f < G_N_ELEMENTS (all_formats); f++) {
    NpuVisionPrepParams p;
    Frame *fr;
    gfloat *a, *b, *c;
    gsize i, n;

    params_for (&p, all_formats[f], 643, 359, 112, 98);
    p.crop_x = 3;
    p.crop_width = 621;
    p.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
    fr = frame_new (p.format, p.width, p.height, 7, FALSE, rand);
    a = run_fused (&p, fr, NULL);
    b = run_fused (&p, fr, queue);
    g_assert_true (npu_cpu_set_isa ("scalar"));
    c = run_fused (&p, fr, queue);
    g_assert_true (npu_cpu_set_isa (NULL));
    n = (gsize) 3 * p.out_width * p.out_height;
    /* Threads change nothing: every output row is computed alike */
    g_assert_cmpmem (a, n * sizeof (gfloat), b, n * sizeof (gfloat));
    for (i = 0; i < n; i++)
      g_assert_cmpfloat_with_epsilon (a[i], c[i], 1e-5);
    g_free (a);
    g_free (b);
    g_free (c);
    frame_free (fr);
  }
  npu_queue_free (queue);
  npu_device_unref (device);
  g_rand_free (rand);
}

/* The point of the patch layout: a conv2d with stride = kernel = patch and
 * weight [dim][3][patch][patch] (ggml: ne = [patch, patch, 3, dim]) over the
 * CHW image equals one matmul of the patch rows by the flat weight. */
static void
test_patch_embedding (void)
{
  GRand *rand = g_rand_new_with_seed (6);
  const guint P = 4, S = 16, DIM = 5, G = S / P;
  NpuVisionPrepParams p;
  Frame *fr;
  gfloat *chw, *patches, *weight;
  guint d, py, px, c, ky, kx, k;

  params_for (&p, NPU_PIXEL_FORMAT_NV12, 37, 29, S, S);
  p.patch_size = P;
  fr = frame_new (p.format, p.width, p.height, 3, FALSE, rand);
  chw = run_fused (&p, fr, NULL);
  p.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
  patches = run_fused (&p, fr, NULL);
  g_assert_cmpuint (G * G, ==, 16);
  weight = g_new (gfloat, DIM * 3 * P * P);
  for (k = 0; k < DIM * 3 * P * P; k++)
    weight[k] = g_rand_double_range (rand, -1, 1);

  for (d = 0; d < DIM; d++) {
    for (py = 0; py < G; py++) {
      for (px = 0; px < G; px++) {
        gdouble conv = 0.0, mm = 0.0;

        /* conv2d, index by index */
        for (c = 0; c < 3; c++)
          for (ky = 0; ky < P; ky++)
            for (kx = 0; kx < P; kx++)
              conv += weight[((d * 3 + c) * P + ky) * P + kx]
                  * chw[(c * S + py * P + ky) * S + px * P + kx];
        /* row (py * G + px) of the patch matrix . row d of the weight */
        for (k = 0; k < 3 * P * P; k++)
          mm += patches[(py * G + px) * 3 * P * P + k]
              * weight[d * 3 * P * P + k];
        g_assert_cmpfloat_with_epsilon (conv, mm, 1e-4);
      }
    }
  }
  g_free (weight);
  g_free (chw);
  g_free (patches);
  frame_free (fr);
  g_rand_free (rand);
}

static void
expect_error (const NpuVisionPrepParams * p, gint code)
{
  GError *error = NULL;
  NpuVisionPrepPlan *plan = npu_vision_prep_plan_new (p, &error);

  g_assert_null (plan);
  g_assert_error (error, NPU_VISION_PREP_ERROR, code);
  g_test_message ("%s", error->message);
  g_error_free (error);
}

static void
test_errors (void)
{
  NpuVisionPrepParams p, q;

  params_for (&p, NPU_PIXEL_FORMAT_NV12, 640, 480, 224, 224);

  q = p;
  q.format = NPU_PIXEL_FORMAT_UNKNOWN;
  expect_error (&q, NPU_VISION_PREP_ERROR_FORMAT);
  q.format = 99;
  expect_error (&q, NPU_VISION_PREP_ERROR_FORMAT);
  q = p;
  q.width = 0;
  expect_error (&q, NPU_VISION_PREP_ERROR_SIZE);
  q = p;
  q.height = 0;
  expect_error (&q, NPU_VISION_PREP_ERROR_SIZE);
  q = p;
  q.out_width = 0;
  expect_error (&q, NPU_VISION_PREP_ERROR_SIZE);
  q = p;
  q.out_height = 100000;
  expect_error (&q, NPU_VISION_PREP_ERROR_SIZE);
  q = p;
  q.crop_x = 640;
  expect_error (&q, NPU_VISION_PREP_ERROR_CROP);
  q = p;
  q.crop_y = 10;
  q.crop_height = 471;
  expect_error (&q, NPU_VISION_PREP_ERROR_CROP);
  q = p;
  q.crop_x = 1;
  q.crop_width = G_MAXUINT;     /* no wrap-round */
  expect_error (&q, NPU_VISION_PREP_ERROR_CROP);
  q = p;
  q.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
  q.patch_size = 0;
  expect_error (&q, NPU_VISION_PREP_ERROR_PATCH);
  q.patch_size = 15;
  expect_error (&q, NPU_VISION_PREP_ERROR_PATCH);
  q = p;
  q.std[1] = 0.0;
  expect_error (&q, NPU_VISION_PREP_ERROR_PARAMETER);
  q = p;
  q.mean[2] = NAN;
  expect_error (&q, NPU_VISION_PREP_ERROR_PARAMETER);
  q = p;
  q.mode = 7;
  expect_error (&q, NPU_VISION_PREP_ERROR_PARAMETER);

  /* The CHW layout ignores the patch size; a whole-frame crop is fine */
  q = p;
  q.patch_size = 0;
  q.crop_width = 640;
  q.crop_height = 480;
  {
    NpuVisionPrepPlan *plan = npu_vision_prep_plan_new (&q, NULL);

    g_assert_nonnull (plan);
    g_assert_cmpuint (npu_vision_prep_plan_get_n_patches (plan), ==, 0);
    npu_vision_prep_plan_free (plan);
  }
  q.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
  q.patch_size = 14;
  {
    g_autoptr (NpuVisionPrepPlan) plan = npu_vision_prep_plan_new (&q, NULL);

    g_assert_cmpuint (npu_vision_prep_plan_get_n_patches (plan), ==, 256);
  }
}

static void
test_camera (void)
{
  if (g_getenv ("NPU_UNDER_VALGRIND")) {
    /* The same code runs on smaller inputs in the other cases. */
    g_test_skip ("too slow under valgrind");
    return;
  }
  test_camera_run ();
}

static void
test_threads_simd (void)
{
  if (g_getenv ("NPU_UNDER_VALGRIND")) {
    /* The same code runs on smaller inputs in the other cases. */
    g_test_skip ("too slow under valgrind");
    return;
  }
  test_threads_simd_run ();
}

int
main (int argc, char **argv)
{
  int ret;

  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/visionprep/formats", test_formats);
  g_test_add_func ("/visionprep/tiny", test_tiny);
  g_test_add_func ("/visionprep/crops", test_crops);
  g_test_add_func ("/visionprep/guard-pages", test_guard_pages);
  g_test_add_func ("/visionprep/camera", test_camera);
  g_test_add_func ("/visionprep/threads-simd", test_threads_simd);
  g_test_add_func ("/visionprep/patch-embedding", test_patch_embedding);
  g_test_add_func ("/visionprep/errors", test_errors);
  ret = g_test_run ();
  if (g_test_verbose ())
    g_print ("worst error against the reference: %.3g\n", worst_error);
  return ret;
}
