/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: frames rendered by GStreamer, preprocessed as npuvisiontok does
 *
 *   npu-render-frames --image-size S --patch P --mean M --std D -o out.f32
 *       < specs
 *
 * Each line of specs is
 *
 *   <videotestsrc properties> | <caps> | <position in ns>
 *
 * e.g. "pattern=ball foreground-color=0xffff0000 |
 * video/x-raw,format=NV12,width=321,height=241 | 2000000000".  The tool
 * runs "videotestsrc <properties> ! <caps> ! appsink", seeks to the
 * position (the ball's place depends on it), takes that frame and writes
 * the encoder input npuvisiontok would make of it: the caps parsed by the
 * element's own table (gst/npu/gstnpuvideoformats.c, colorimetry
 * included), then the core's npu_vision_prep_run() in the PATCHES layout, stretched to
 * S x S, normalised by the mean and std.  The floats of every frame are
 * appended to out.f32 in host order, so training sees exactly what the
 * element gives the encoder (tests/train/train.py).
 *
 * With --ppm-dir DIR, each frame's encoder input is also written as
 * DIR/frame-NNNN.ppm (S x S, 8-bit RGB: the normalisation undone and
 * rounded), an image that other runtimes (llama.cpp's mtmd,
 * tests/crosscheck/trained.sh) take at the encoder's size, so they encode
 * what npuvisiontok encodes, to within the 8-bit rounding.  With --raw-dir
 * DIR, the frame itself as videotestsrc drew it (its buffer's bytes, the
 * default strides of its caps) goes to DIR/frame-NNNN.raw and its caps to
 * DIR/frame-NNNN.cap, for "filesrc ! <caps> ! npuvisiontok" to read.
 */
#include <gst/gst.h>
#include <gst/app/gstappsink.h>
#include <gst/video/video.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <npu/gstnpuvideoformats.h>
#include <core/cpu/npuvisionprep.h>

typedef struct
{
  guint image_size, patch;
  gdouble mean, std;
  const gchar *ppm_dir;         /* NULL: no images */
  const gchar *raw_dir;         /* NULL: no raw frames */
  guint index;                  /* of the frame, for the image's name */
} Options;

static GstSample *
render (const gchar * props, const gchar * caps, guint64 position,
    GError ** error)
{
  gchar *desc =
      g_strdup_printf ("videotestsrc name=src %s ! %s ! appsink name=sink",
      props, caps);
  GstElement *pipeline = gst_parse_launch (desc, error);
  GstElement *sink, *src;
  GstSample *sample = NULL;

  g_free (desc);
  if (!pipeline)
    return NULL;
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  src = gst_bin_get_by_name (GST_BIN (pipeline), "src");
  /* The seek is sent in READY, before the caps give videotestsrc its
   * frame rate, so it leaves the frame counter at 0: the source draws
   * every frame from the first, and the sink drops those that end at or
   * before the position (the segment's start).  The frame it prerolls is
   * the one shown at the position.  tests/check/test-trained-models.c
   * reaches the same frame by a seek once the caps are known. */
  gst_element_set_state (pipeline, GST_STATE_READY);
  if (position > 0 && !gst_element_send_event (src,
          gst_event_new_seek (1.0, GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH |
              GST_SEEK_FLAG_ACCURATE, GST_SEEK_TYPE_SET, position,
              GST_SEEK_TYPE_NONE, GST_CLOCK_TIME_NONE)))
    goto failed;
  gst_element_set_state (pipeline, GST_STATE_PAUSED);
  if (gst_element_get_state (pipeline, NULL, NULL, GST_CLOCK_TIME_NONE)
      == GST_STATE_CHANGE_FAILURE)
    goto failed;
  sample = gst_app_sink_pull_preroll (GST_APP_SINK (sink));
  if (!sample)
    goto failed;
out:
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (src);
  gst_object_unref (pipeline);
  return sample;

  /* ERRORS */
failed:
  {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_FAILED,
        "could not render a frame of videotestsrc %s ! %s", props, caps);
    goto out;
  }
}

/* The patches (patch-major, each channel-major) as an S x S RGB image. */
static gboolean
write_ppm (const gfloat * patches, const Options * o, GError ** error)
{
  guint s = o->image_size, p = o->patch, g = s / p, x, y, c;
  guint8 *rgb = g_new (guint8, s * s * 3);
  gchar *name = g_strdup_printf ("frame-%04u.ppm", o->index);
  gchar *path = g_build_filename (o->ppm_dir, name, NULL);
  GString *file = g_string_new (NULL);
  gboolean ok;

  for (y = 0; y < s; y++)
    for (x = 0; x < s; x++)
      for (c = 0; c < 3; c++) {
        gsize i = (((gsize) (y / p) * g + x / p) * 3 + c) * p * p +
            (y % p) * p + x % p;
        gdouble v = (patches[i] * o->std + o->mean) * 255.0;

        rgb[(y * s + x) * 3 + c] = (guint8) CLAMP (v + 0.5, 0.0, 255.0);
      }
  g_string_printf (file, "P6\n%u %u\n255\n", s, s);
  g_string_append_len (file, (const gchar *) rgb, s * s * 3);
  ok = g_file_set_contents (path, file->str, file->len, error);
  g_string_free (file, TRUE);
  g_free (path);
  g_free (name);
  g_free (rgb);
  return ok;
}

/* The frame's bytes, and its caps as text beside them (frame-NNNN.caps:
 * colorimetry included, so a reader sees the frame as npuvisiontok did) */
static gboolean
write_raw (GstSample * sample, const Options * o, GError ** error)
{
  GstBuffer *buffer = gst_sample_get_buffer (sample);
  gchar *base = g_strdup_printf ("%s/frame-%04u", o->raw_dir, o->index);
  gchar *path = g_strconcat (base, ".cap", NULL);
  gchar *caps = gst_caps_to_string (gst_sample_get_caps (sample));
  GstMapInfo map;
  gboolean ok = g_file_set_contents (path, caps, -1, error);

  g_free (path);
  path = g_strconcat (base, ".raw", NULL);
  if (ok && !gst_buffer_map (buffer, &map, GST_MAP_READ)) {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_FAILED,
        "cannot map the frame");
    ok = FALSE;
  } else if (ok) {
    ok = g_file_set_contents (path, (const gchar *) map.data, map.size,
        error);
    gst_buffer_unmap (buffer, &map);
  }
  g_free (caps);
  g_free (path);
  g_free (base);
  return ok;
}

static gboolean
prepare (GstSample * sample, const Options * o, FILE * out, GError ** error)
{
  NpuVisionPrepParams p;
  NpuVisionPrepPlan *plan;
  NpuPixelFormat format;
  GstVideoInfo info;
  GstVideoFrame frame;
  const guint8 *planes[GST_VIDEO_MAX_PLANES];
  gssize strides[GST_VIDEO_MAX_PLANES];
  gfloat *patches;
  gsize n;
  guint i;
  gboolean ok;

  if (!gst_npu_video_formats_parse (gst_sample_get_caps (sample), &info,
          &format, error))
    return FALSE;
  /* As npuvisiontok's set_caps(). */
  npu_vision_prep_params_init (&p);
  p.format = format;
  p.width = GST_VIDEO_INFO_WIDTH (&info);
  p.height = GST_VIDEO_INFO_HEIGHT (&info);
  gst_npu_video_formats_colorimetry (&info, &p.matrix, &p.range);
  p.crop_width = p.width;
  p.crop_height = p.height;
  p.out_width = p.out_height = o->image_size;
  p.mode = NPU_VISION_PREP_STRETCH;
  for (i = 0; i < 3; i++) {
    p.mean[i] = o->mean;
    p.std[i] = o->std;
    p.fill_rgb[i] = o->mean * 255.0;
  }
  p.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
  p.patch_size = o->patch;
  plan = npu_vision_prep_plan_new (&p, error);
  if (!plan)
    return FALSE;
  if (!gst_video_frame_map (&frame, &info, gst_sample_get_buffer (sample),
          GST_MAP_READ)) {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_FAILED,
        "cannot map the frame");
    npu_vision_prep_plan_free (plan);
    return FALSE;
  }
  for (i = 0; i < GST_VIDEO_FRAME_N_PLANES (&frame); i++) {
    planes[i] = GST_VIDEO_FRAME_PLANE_DATA (&frame, i);
    strides[i] = GST_VIDEO_FRAME_PLANE_STRIDE (&frame, i);
  }
  n = npu_vision_prep_plan_get_n_floats (plan);
  patches = g_new (gfloat, n);
  npu_vision_prep_run (plan, planes, strides, patches, NULL);
  gst_video_frame_unmap (&frame);
  npu_vision_prep_plan_free (plan);
  ok = fwrite (patches, sizeof (gfloat), n, out) == n;
  if (!ok)
    g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_IO, "write failed");
  else if (o->ppm_dir)
    ok = write_ppm (patches, o, error);
  if (ok && o->raw_dir)
    ok = write_raw (sample, o, error);
  g_free (patches);
  return ok;
}

static gboolean
run_line (const gchar * line, const Options * o, FILE * out, GError ** error)
{
  gchar **f = g_strsplit (line, "|", 3);
  GstSample *sample;
  gboolean ok = FALSE;

  if (g_strv_length (f) != 3) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "a line needs \"properties | caps | position\": %s", line);
    goto out;
  }
  sample = render (g_strstrip (f[0]), g_strstrip (f[1]),
      g_ascii_strtoull (g_strstrip (f[2]), NULL, 10), error);
  if (sample) {
    ok = prepare (sample, o, out, error);
    gst_sample_unref (sample);
  }
out:
  g_strfreev (f);
  return ok;
}

int
main (int argc, char **argv)
{
  Options o = { 64, 8, 0.5, 0.5, NULL, NULL, 0 };
  gchar *output = NULL, *ppm_dir = NULL, *raw_dir = NULL, line[4096];
  gint image_size = 64, patch = 8;
  GOptionEntry entries[] = {
    {"image-size", 0, 0, G_OPTION_ARG_INT, &image_size, "encoder input side",
        "S"},
    {"patch", 0, 0, G_OPTION_ARG_INT, &patch, "patch side", "P"},
    {"mean", 0, 0, G_OPTION_ARG_DOUBLE, &o.mean, "normalisation mean", "M"},
    {"std", 0, 0, G_OPTION_ARG_DOUBLE, &o.std, "normalisation std", "D"},
    {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output, "float32 output",
        "FILE"},
    {"ppm-dir", 0, 0, G_OPTION_ARG_FILENAME, &ppm_dir,
        "also write each encoder input as DIR/frame-NNNN.ppm", "DIR"},
    {"raw-dir", 0, 0, G_OPTION_ARG_FILENAME, &raw_dir,
        "also write each frame as DIR/frame-NNNN.raw", "DIR"},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("< specs");
  GError *error = NULL;
  FILE *out;
  guint n = 0;

  g_option_context_add_main_entries (ctx, entries, NULL);
  g_option_context_add_group (ctx, gst_init_get_option_group ());
  if (!g_option_context_parse (ctx, &argc, &argv, &error) || !output
      || image_size <= 0 || patch <= 0 || !(o.std > 0)) {
    g_printerr ("%s\n", error ? error->message : "need -o and sane sizes");
    return 2;
  }
  g_option_context_free (ctx);
  o.image_size = image_size;
  o.patch = patch;
  o.ppm_dir = ppm_dir;
  o.raw_dir = raw_dir;
  out = fopen (output, "wb");
  if (!out) {
    g_printerr ("cannot create %s\n", output);
    return 1;
  }
  while (fgets (line, sizeof (line), stdin)) {
    g_strstrip (line);
    if (!*line || *line == '#')
      continue;
    o.index = n;
    if (!run_line (line, &o, out, &error)) {
      g_printerr ("frame %u: %s\n", n, error->message);
      fclose (out);
      return 1;
    }
    n++;
  }
  if (fclose (out) != 0) {
    g_printerr ("writing %s failed\n", output);
    return 1;
  }
  g_print ("%u frames\n", n);
  g_free (output);
  g_free (ppm_dir);
  g_free (raw_dir);
  return 0;
}
