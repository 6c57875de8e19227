/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: one image through the core's vision encoder (npuvit.h), for
 * comparison with another runtime (llama.cpp's clip) on the same mmproj
 *
 *   npu-vit-encode MMPROJ.gguf --image IMAGE.f32 [-o OUT.f32]
 *       [--threads T] [--repeat N] [--reference REF.f32 [--tol REL]]
 *       [--f64]
 *
 * IMAGE.f32 is the encoder's exact input as clip-encode.cpp (the llama.cpp
 * side) takes it: image_size rows of image_size pixels of 3 floats
 * (R, G, B), little-endian, already normalised with the file's mean and
 * std.  It is cut into patches in npu_vit_encode()'s order here (a plain
 * reordering, no arithmetic), encoded in a task on a CPU device of T
 * threads, and the n_tokens x out_dim embeddings are written to OUT.f32.
 *
 * Prints "tokens: N", "embd: D" and "encode: T ms (best of R, H threads)",
 * the same lines as clip-encode (the time is npu_vit_encode()'s alone).
 *
 * --reference reads the other runtime's embeddings (clip-encode's -o) and
 * prints max |ours - ref|, the range (max - min) of the reference's values,
 * their ratio ("rel", the figure judged) and max |diff| over the
 * reference's rms.  With --tol the last line is "PASS" or "FAIL" (rel
 * above REL), and the exit status 1 on FAIL.
 * --f64 also evaluates the test suite's double-precision reference of
 * the encoder (tests/reference/npurefvit.h, the stored weights decoded
 * exactly, in double,
 * no int8 activations) on the same patches, and prints both sides against
 * it, "f64 ours:" and, with --reference, "f64 ref:" (the same figures as
 * "compare:"): when the two runtimes differ, this says which one is off.
 * Each is followed by a "f64 WHO norm:" line, |a - f64| / |f64| over all
 * the embeddings (the relative norm the unit tests and the docs quote).
 * NPU_CPU_ISA=scalar gives exact F32 products (no int8 activations).
 * Compute core only: GLib, no GStreamer types.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <core/models/npuvit.h>
#include <core/cpu/npumatmul.h>
#include "tests/npucompare.h"
#include "tests/reference/npurefvit.h"
#include "npuencodetool.h"

typedef struct
{
  NpuVit *vit;
  const float *patches;
  float *out;
  gint64 us;                    /* npu_vit_encode()'s time */
} Job;

static gboolean
job_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Job *job = user_data;
  gint64 t0 = g_get_monotonic_time ();
  gboolean ok;

  ok = npu_vit_encode (job->vit, task, job->patches, job->out, error);
  job->us = g_get_monotonic_time () - t0;
  return ok;
}

/* The test suite's double-precision encoder on the patches (the weights
 * as stored, decoded exactly) */
static gboolean
encode_f64 (const NpuRefLookup * lk, const double *patches, double *out,
    gpointer data, GError ** error)
{
  npu_ref_vit_encode (lk, patches, FALSE, out);
  return TRUE;
}

/* HWC pixels to n_patches rows of c * p * p + y * p + x */
static float *
patchify (const float *img, guint side, guint p)
{
  guint g = side / p, py, px, c, y, x;
  float *out = g_new (float, (gsize) side * side * 3);
  float *o = out;

  for (py = 0; py < g; py++)
    for (px = 0; px < g; px++)
      for (c = 0; c < 3; c++)
        for (y = 0; y < p; y++)
          for (x = 0; x < p; x++)
            *o++ = img[((gsize) (py * p + y) * side + px * p + x) * 3 + c];
  return out;
}

int
main (int argc, char **argv)
{
  NpuEncodeToolOptions opts;
  GError *error = NULL;
  NpuVit *vit = NULL;
  gchar *img = NULL;
  float *patches = NULL, *out = NULL;
  gsize len, n_out;
  guint side, n_tokens, out_dim;
  gint64 best = -1;
  Job job = { 0, };
  gboolean pass = TRUE;
  int ret = 1;

  if (!npu_encode_tool_parse (&opts, &argc, &argv, "MMPROJ.gguf - encode "
          "one image with the core's vision encoder", "image",
          "Normalised S x S x 3 F32 image (S = the file's image size)", NULL))
    return 2;

  vit = npu_vit_new_from_file (opts.model, &error);
  if (!vit)
    goto out;
  side = npu_vit_get_image_size (vit);
  if (!g_file_get_contents (opts.input, &img, &len, &error))
    goto out;
  if (len != (gsize) side * side * 3 * sizeof (float)) {
    g_set_error (&error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
        "'%s' has %" G_GSIZE_FORMAT " bytes, not %u x %u x 3 floats",
        opts.input, len, side, side);
    goto out;
  }
  /* floats as stored: the machine is little-endian (x86-64, aarch64) */
  patches = patchify ((const float *) img, side, npu_vit_get_patch_size (vit));
  n_tokens = npu_vit_get_n_tokens (vit);
  out_dim = npu_vit_get_out_dim (vit);
  n_out = (gsize) n_tokens *out_dim;
  out = g_new (float, n_out);

  job.vit = vit;
  job.patches = patches;
  job.out = out;
  if (!npu_encode_tool_run (&opts, "npu-vit-encode", job_task, &job, &job.us,
          &best, &error))
    goto out;
  printf ("model: %s (%u blocks, dim %u, %s), kernels %s\n", opts.model,
      npu_vit_get_n_layers (vit), npu_vit_get_dim (vit),
      npu_vit_get_projector (vit) == NPU_VIT_PROJECTOR_MLP ? "mlp" :
      "idefics3", npu_matmul_get_isa ());
  if (!npu_encode_tool_report (&opts, out, n_tokens, out_dim, best, &error))
    goto out;

  if (!npu_encode_tool_compare (&opts, out, n_tokens, out_dim, patches,
          (gsize) side * side * 3, encode_f64, NULL, &pass, &error))
    goto out;
  ret = pass ? 0 : 1;

out:
  if (error) {
    g_printerr ("npu-vit-encode: %s\n", error->message);
    g_error_free (error);
    ret = 1;
  }
  if (vit)
    npu_vit_free (vit);
  g_free (img);
  g_free (patches);
  g_free (out);
  npu_encode_tool_options_clear (&opts);
  return ret;
}
