/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the bytes the encoders' core counts: a frame's
 * preprocess reads the frame's bytes its caps and crop give (worked out
 * here from width, height and format), the vision and audio encoders read
 * the weights of their file's tensor table once a unit (each matrix in
 * MXFP4, 17 bytes per 32, each vector and F32 kernel at 4 bytes a value)
 * and write their tokens */
#include "core/cpu/npuvisionprep.h"
#include "core/models/npuvit.h"
#include "core/models/npuaudioenc.h"
#include "core/formats/npugguf.h"
#include "core/device/npubackend.h"
#include "../tools/npumodelgen.h"
#include "../npuencbytes.h"

#include <glib/gstdio.h>
#include <string.h>

static gchar *tmpdir;

/* ------------------------------------------------------------------------
 * The preprocess
 */

/* One run of a plan for @p over a frame of zeros (the bytes do not depend
 * on the pixels); returns the bytes it counted */
static void
run_prep (const NpuVisionPrepParams * p, guint bpp_num, guint bpp_den,
    NpuBytes * bytes)
{
  GError *error = NULL;
  NpuVisionPrepPlan *plan = npu_vision_prep_plan_new (p, &error);
  guint n = npu_pixel_format_n_planes (p->format), i;
  const guint8 *planes[3];
  gssize strides[3];
  guint8 *frame;
  gfloat *out;
  gsize plane0 = (gsize) p->width * p->height * bpp_num / bpp_den;

  g_assert_no_error (error);
  /* planes side by side in one allocation, each of the largest size */
  frame = g_malloc0 (plane0 * 3 + 64);
  for (i = 0; i < n; i++) {
    planes[i] = frame + i * plane0;
    strides[i] = i == 0 ? (gssize) p->width * bpp_num / bpp_den :
        (gssize) (p->format == NPU_PIXEL_FORMAT_NV12 ? (p->width + 1) / 2 * 2 :
        (p->width + 1) / 2);
  }
  out = g_new (gfloat, npu_vision_prep_plan_get_n_floats (plan));
  npu_bytes_clear (bytes);
  npu_vision_prep_run_counted (plan, planes, strides, out, NULL, bytes);
  g_assert_cmpuint (bytes->written[NPU_BYTES_ACTIVATIONS], ==,
      npu_vision_prep_plan_get_n_floats (plan) * sizeof (gfloat));
  g_assert_cmpuint (bytes->read[NPU_BYTES_ACTIVATIONS], ==, 0);
  g_free (out);
  g_free (frame);
  npu_vision_prep_plan_free (plan);
}

static void
params (NpuVisionPrepParams * p, NpuPixelFormat format, guint w, guint h,
    guint cx, guint cy, guint cw, guint ch)
{
  npu_vision_prep_params_init (p);
  p->format = format;
  p->width = w;
  p->height = h;
  p->crop_x = cx;
  p->crop_y = cy;
  p->crop_width = cw;
  p->crop_height = ch;
  p->out_width = p->out_height = 224;
}

/* A shrink by more than 2 (an area filter) and an enlargement read every
 * row of the crop; 4:2:0 chroma rows serve two luma rows, and a crop at an
 * odd x or y starts inside a chroma sample */
static void
test_prep_frame_bytes (void)
{
  NpuVisionPrepParams p;
  NpuBytes b;

  /* NV12 640 x 480, whole frame: 480 luma rows of 640, 240 chroma rows of
   * 320 U V pairs: w h 3 / 2 */
  params (&p, NPU_PIXEL_FORMAT_NV12, 640, 480, 0, 0, 0, 0);
  run_prep (&p, 1, 1, &b);
  g_assert_cmpuint (b.read[NPU_BYTES_FRAME], ==, 640 * 480 * 3 / 2);

  /* I420, crop x 3 .. 502, y 5 .. 465: luma 461 rows of 500; chroma rows
   * 5 / 2 = 2 .. 465 / 2 = 232 (231 rows), columns 1 .. 251 (251), in a U
   * and a V plane */
  params (&p, NPU_PIXEL_FORMAT_I420, 640, 480, 3, 5, 500, 461);
  run_prep (&p, 1, 1, &b);
  g_assert_cmpuint (b.read[NPU_BYTES_FRAME], ==, 461 * 500 + 2 * 231 * 251);

  /* NV12, crop at an odd row: rows 7 .. 476 (470) use chroma rows 3 .. 238
   * (236), columns 0 .. 599 the pairs 0 .. 299 */
  params (&p, NPU_PIXEL_FORMAT_NV12, 640, 480, 0, 7, 600, 470);
  run_prep (&p, 1, 1, &b);
  g_assert_cmpuint (b.read[NPU_BYTES_FRAME], ==, 470 * 600 + 236 * 600);

  /* YUY2, crop x 1 .. 460: macropixels 0 .. 230 (231 of 4 bytes) a row */
  params (&p, NPU_PIXEL_FORMAT_YUY2, 640, 480, 1, 0, 460, 480);
  run_prep (&p, 2, 1, &b);
  g_assert_cmpuint (b.read[NPU_BYTES_FRAME], ==, 480 * 231 * 4);

  /* RGB 100 x 80 enlarged to 224: every pixel, 3 bytes */
  params (&p, NPU_PIXEL_FORMAT_RGB, 100, 80, 0, 0, 0, 0);
  run_prep (&p, 3, 1, &b);
  g_assert_cmpuint (b.read[NPU_BYTES_FRAME], ==, 100 * 80 * 3);

  /* BGRx 1280 x 720, letterboxed: still every row of the crop, 4 bytes a
   * pixel */
  params (&p, NPU_PIXEL_FORMAT_BGRX, 1280, 720, 0, 0, 0, 0);
  p.mode = NPU_VISION_PREP_LETTERBOX;
  run_prep (&p, 4, 1, &b);
  g_assert_cmpuint (b.read[NPU_BYTES_FRAME], ==, 1280 * 720 * 4);
}

/* ------------------------------------------------------------------------
 * The encoders' weights, from the file's tensor table
 */

static gchar *
write_mmproj (NpuModelProjector proj, guint32 wtype, const gchar * tag)
{
  NpuMmprojParams mp;
  GError *error = NULL;
  gchar *name = g_strdup_printf ("mmproj-%s.gguf", tag);
  gchar *path = g_build_filename (tmpdir, name, NULL);

  g_assert_true (npu_model_gen_mmproj_preset (&mp, proj, "tiny", &error));
  mp.wtype = wtype;
  mp.seed = 5;
  mp.text_dim = 64;
  npu_model_gen_write_mmproj (&mp, NULL, path, NULL, &error);
  g_assert_no_error (error);
  g_free (name);
  return path;
}

/* Two frames: each reads the file's weights once and writes its tokens;
 * the second moves what the first did */
static void
check_vit (NpuModelProjector proj, guint32 wtype, const gchar * tag)
{
  gchar *path = write_mmproj (proj, wtype, tag);
  GError *error = NULL;
  NpuVit *vit = npu_vit_new_from_file (path, &error);
  NpuBytes b0, b1, b2, f1, f2;
  gsize n_in, n_out;
  float *patches, *out;

  g_assert_no_error (error);
  n_in = (gsize) npu_vit_get_n_patches (vit) * npu_vit_get_patch_dim (vit);
  n_out = (gsize) npu_vit_get_n_tokens (vit) * npu_vit_get_out_dim (vit);
  patches = g_new0 (float, n_in);
  out = g_new (float, n_out);
  npu_vit_get_bytes (vit, &b0);
  g_assert_true (npu_vit_encode (vit, NULL, patches, out, &error));
  npu_vit_get_bytes (vit, &b1);
  g_assert_true (npu_vit_encode (vit, NULL, patches, out, &error));
  npu_vit_get_bytes (vit, &b2);
  npu_bytes_diff (&f1, &b1, &b0);
  npu_bytes_diff (&f2, &b2, &b1);

  g_assert_cmpuint (f1.read[NPU_BYTES_WEIGHTS], ==,
      npu_ref_encoder_weight_bytes (path, "", 0));
  g_assert_cmpuint (f1.written[NPU_BYTES_TOKENS], ==, n_out * 4);
  g_assert_cmpuint (f1.read[NPU_BYTES_TOKENS], ==, 0);
  g_assert_cmpuint (f1.read[NPU_BYTES_FRAME], ==, 0);
  g_assert_cmpuint (f1.written[NPU_BYTES_WEIGHTS], ==, 0);
  /* the patch embedding reads the patches, at least */
  g_assert_cmpuint (f1.read[NPU_BYTES_ACTIVATIONS], >, n_in * 4);
  g_assert_true (memcmp (&f1, &f2, sizeof f1) == 0);
  /* the program for a device (the CPU's) reads the same weights and
   * writes the same tokens a submit (Qwen's mergers have none) */
  if (proj != NPU_MODEL_PROJECTOR_QWEN2VL) {
    NpuDevice *device = npu_device_new_cpu (1);
    NpuVitProgram *prog = npu_vit_program_new (vit, device, &error);
    NpuBytes pb;

    g_assert_no_error (error);
    npu_vit_program_get_bytes (prog, &pb);
    g_assert_cmpuint (pb.read[NPU_BYTES_WEIGHTS], ==,
        f1.read[NPU_BYTES_WEIGHTS]);
    g_assert_cmpuint (pb.written[NPU_BYTES_TOKENS], ==, n_out * 4);
    g_assert_cmpuint (pb.read[NPU_BYTES_ACTIVATIONS], >, n_in * 4);
    npu_vit_program_free (prog);
    npu_device_unref (device);
  }
  g_free (patches);
  g_free (out);
  npu_vit_free (vit);
  g_unlink (path);
  g_free (path);
}

static void
test_vit_mlp (void)
{
  check_vit (NPU_MODEL_PROJECTOR_MLP, NPU_GGML_TYPE_MXFP4, "mlp-mxfp4");
  /* F16 matrices, converted once to MXFP4: read as MXFP4 */
  check_vit (NPU_MODEL_PROJECTOR_MLP, NPU_GGML_TYPE_F16, "mlp-f16");
}

static void
test_vit_idefics3 (void)
{
  check_vit (NPU_MODEL_PROJECTOR_IDEFICS3, NPU_GGML_TYPE_MXFP4, "idefics3");
}

static void
test_vit_qwen (void)
{
  check_vit (NPU_MODEL_PROJECTOR_QWEN2VL, NPU_GGML_TYPE_MXFP4, "qwen2vl");
}

static gchar *
write_audio (NpuModelAudioProjector proj, guint32 wtype, const gchar * tag)
{
  NpuAudioMmprojParams ap;
  GError *error = NULL;
  gchar *name = g_strdup_printf ("audio-%s.gguf", tag);
  gchar *path = g_build_filename (tmpdir, name, NULL);

  g_assert_true (npu_model_gen_audio_preset (&ap, proj, "tiny", &error));
  ap.wtype = wtype;
  ap.seed = 9;
  ap.text_dim = 64;
  npu_model_gen_write_audio_mmproj (&ap, NULL, path, NULL, &error);
  g_assert_no_error (error);
  g_free (name);
  return path;
}

/* A chunk of @n_frames mel frames reads the file's weights once, of the
 * position table the n_frames / 2 rows it uses, and writes its tokens */
static void
check_audio (NpuModelAudioProjector proj, guint32 wtype, const gchar * tag)
{
  gchar *path = write_audio (proj, wtype, tag);
  GError *error = NULL;
  NpuAudioEnc *enc = npu_audio_enc_new_from_file (path, &error);
  guint n_frames, n_tok;
  NpuBytes b0, b1, f;
  float *mel, *out;

  g_assert_no_error (error);
  n_frames = MIN (npu_audio_enc_get_max_frames (enc), 64);
  n_tok = npu_audio_enc_get_n_tokens (enc, n_frames);
  mel = g_new0 (float, (gsize) npu_audio_enc_get_n_mels (enc) * n_frames);
  out = g_new (float, (gsize) n_tok * npu_audio_enc_get_out_dim (enc));
  npu_audio_enc_get_bytes (enc, &b0);
  g_assert_true (npu_audio_enc_encode (enc, NULL, mel, n_frames, out,
          &error));
  npu_audio_enc_get_bytes (enc, &b1);
  npu_bytes_diff (&f, &b1, &b0);

  g_assert_cmpuint (f.read[NPU_BYTES_WEIGHTS], ==,
      npu_ref_encoder_weight_bytes (path, "a.position_embd.weight", n_frames / 2));
  g_assert_cmpuint (f.written[NPU_BYTES_TOKENS], ==,
      (guint64) n_tok * npu_audio_enc_get_out_dim (enc) * 4);
  g_assert_cmpuint (f.read[NPU_BYTES_FRAME], ==, 0);
  /* conv1's im2col reads the mel */
  g_assert_cmpuint (f.read[NPU_BYTES_ACTIVATIONS], >,
      (guint64) npu_audio_enc_get_n_mels (enc) * n_frames * 4);
  /* the program for a device (the CPU's) of that window: the same */
  {
    NpuDevice *device = npu_device_new_cpu (1);
    NpuAudioEncProgram *prog = npu_audio_enc_program_new (enc, device,
        n_frames, &error);
    NpuBytes pb;

    g_assert_no_error (error);
    npu_audio_enc_program_get_bytes (prog, &pb);
    g_assert_cmpuint (pb.read[NPU_BYTES_WEIGHTS], ==,
        f.read[NPU_BYTES_WEIGHTS]);
    g_assert_cmpuint (pb.written[NPU_BYTES_TOKENS], ==,
        f.written[NPU_BYTES_TOKENS]);
    npu_audio_enc_program_free (prog);
    npu_device_unref (device);
  }
  g_free (mel);
  g_free (out);
  npu_audio_enc_free (enc);
  g_unlink (path);
  g_free (path);
}

static void
test_audio_qwen2a (void)
{
  check_audio (NPU_MODEL_AUDIO_PROJECTOR_QWEN2A, NPU_GGML_TYPE_MXFP4,
      "qwen2a");
}

static void
test_audio_ultravox (void)
{
  check_audio (NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX, NPU_GGML_TYPE_F16,
      "ultravox");
}

int
main (int argc, char **argv)
{
  int ret;

  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("npu-encbytes-XXXXXX", NULL);
  g_test_add_func ("/encbytes/prep-frame", test_prep_frame_bytes);
  g_test_add_func ("/encbytes/vit-mlp", test_vit_mlp);
  g_test_add_func ("/encbytes/vit-idefics3", test_vit_idefics3);
  g_test_add_func ("/encbytes/vit-qwen2vl", test_vit_qwen);
  g_test_add_func ("/encbytes/audio-qwen2a", test_audio_qwen2a);
  g_test_add_func ("/encbytes/audio-ultravox", test_audio_ultravox);
  ret = g_test_run ();
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return ret;
}
