/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: time to the first token of a camera frame's answer
 *
 * One 1280 x 720 NV12 frame through the whole core as npuvisiontok and
 * npullm run it: preprocessing (scale, colour conversion, patches), the
 * vision encoder (its default, accurate precision), then the prefill of
 * the image tokens and of a text prompt in the text model (its default,
 * fast precision), up to the logits of the first answer token.  With the
 * generated SigLIP-B-size mmproj (12 x 768, 224 px, patch 16, LLaVA
 * projector: 196 tokens) and 22 text tokens, the prompt is 218 tokens.
 *
 * Each run is timed twice in a row, on the GEMM panel kernels (the
 * default) and on the tile kernels before them
 * (npu_matmul_set_gemm_panels()), alternating, so a noisy machine hurts
 * both alike.  A program that prints figures, not a test.
 *
 * Usage: bench-ttft TEXT.gguf MMPROJ.gguf [--threads N (2)] [--runs R (3)]
 *                   [--text-tokens T (22)]
 */
#include <core/models/npullm.h>
#include <core/cpu/npumatmul.h>
#include <core/cpu/npumatmul-testing.h>
#include <core/cpu/npuvisionprep.h>
#include <core/models/npuvit.h>
#include "tests/bench/npubenchtask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_W 1280
#define FRAME_H 720

typedef struct
{
  const NpuVisionPrepPlan *plan;
  const guint8 *planes[2];
  gssize strides[2];
  NpuVit *vit;
  NpuLlmContext *ctx;
  float *patches, *tokens;
  guint n_tokens;
  const gint32 *text;
  guint n_text;
  /* seconds: preprocessing, encode, prefill */
  double t[3];
} Frame;

static gboolean
frame_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Frame *f = user_data;
  gint64 t0 = g_get_monotonic_time (), t1, t2;

  npu_vision_prep_run (f->plan, f->planes, f->strides, f->patches, task);
  t1 = g_get_monotonic_time ();
  if (!npu_vit_encode (f->vit, task, f->patches, f->tokens, error))
    return FALSE;
  t2 = g_get_monotonic_time ();
  npu_llm_context_reset (f->ctx);
  if (!npu_llm_eval_embeddings (f->ctx, task, f->tokens, f->n_tokens, error)
      || !npu_llm_eval_tokens (f->ctx, task, f->text, f->n_text, error))
    return FALSE;
  if (!npu_llm_get_logits (f->ctx))
    return FALSE;
  f->t[0] = (t1 - t0) / 1e6;
  f->t[1] = (t2 - t1) / 1e6;
  f->t[2] = (g_get_monotonic_time () - t2) / 1e6;
  return TRUE;
}

static double
run_frame (NpuQueue * queue, Frame * f)
{
  return npu_bench_run_task (queue, frame_task, f);
}

int
main (int argc, char **argv)
{
  guint threads = 2, runs = 3, n_text = 22, i, r, v;
  NpuVisionPrepParams pp;
  NpuVisionPrepPlan *plan;
  NpuLlmContextParams cp;
  NpuLlmModel *model;
  NpuDevice *device;
  NpuQueue *queue;
  GError *error = NULL;
  guint8 *frame;
  gint32 *text;
  gfloat mean[3], stdv[3];
  Frame f;
  double best[2][4];

  setvbuf (stdout, NULL, _IOLBF, 0);
  if (argc < 3) {
    fprintf (stderr, "usage: %s TEXT.gguf MMPROJ.gguf [--threads N] "
        "[--runs R] [--text-tokens T]\n", argv[0]);
    return 2;
  }
  for (i = 3; i + 1 < (guint) argc; i += 2) {
    if (!strcmp (argv[i], "--threads"))
      threads = MAX (1, atoi (argv[i + 1]));
    else if (!strcmp (argv[i], "--runs"))
      runs = MAX (1, atoi (argv[i + 1]));
    else if (!strcmp (argv[i], "--text-tokens"))
      n_text = MAX (1, atoi (argv[i + 1]));
    else {
      fprintf (stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }

  memset (&f, 0, sizeof (f));
  /* in place, as the npullm element reads the file */
  model = npu_llm_model_new_from_file (argv[1], NPU_LLM_LOAD_IN_PLACE,
      &error);
  if (!model)
    g_error ("%s", error->message);
  f.vit = npu_vit_new_from_file (argv[2], &error);
  if (!f.vit)
    g_error ("%s", error->message);
  if (npu_vit_get_out_dim (f.vit) != npu_llm_model_get_hparams (model)->n_embd)
    g_error ("the projector gives %u features, the text model takes %u",
        npu_vit_get_out_dim (f.vit),
        npu_llm_model_get_hparams (model)->n_embd);
  f.n_tokens = npu_vit_get_n_tokens (f.vit);

  npu_vision_prep_params_init (&pp);
  pp.format = NPU_PIXEL_FORMAT_NV12;
  pp.width = FRAME_W;
  pp.height = FRAME_H;
  pp.out_width = pp.out_height = npu_vit_get_image_size (f.vit);
  pp.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
  pp.patch_size = npu_vit_get_patch_size (f.vit);
  npu_vit_get_mean_std (f.vit, mean, stdv);
  for (i = 0; i < 3; i++) {
    pp.mean[i] = mean[i];
    pp.std[i] = stdv[i];
  }
  plan = npu_vision_prep_plan_new (&pp, &error);
  if (!plan)
    g_error ("%s", error->message);
  frame = g_malloc (FRAME_W * FRAME_H * 3 / 2);
  for (i = 0; i < FRAME_W * FRAME_H * 3 / 2; i++)
    frame[i] = (guint8) (i * 2654435761u >> 24);
  f.plan = plan;
  f.planes[0] = frame;
  f.planes[1] = frame + FRAME_W * FRAME_H;
  f.strides[0] = f.strides[1] = FRAME_W;
  f.patches = g_new (float, npu_vision_prep_plan_get_n_floats (plan));
  f.tokens = g_new (float, (gsize) f.n_tokens * npu_vit_get_out_dim (f.vit));

  npu_llm_context_params_init (&cp);
  cp.n_ctx = 1024;
  f.ctx = npu_llm_context_new (model, &cp, &error);
  if (!f.ctx)
    g_error ("%s", error->message);
  text = g_new (gint32, n_text);
  for (i = 0; i < n_text; i++)
    text[i] = (gint32) ((i * 7919u + 13u) %
        npu_llm_model_get_hparams (model)->n_vocab);
  f.text = text;
  f.n_text = n_text;

  device = npu_device_new_cpu (threads);
  queue = npu_queue_new (device, "bench-ttft");
  printf ("frame %ux%u NV12 -> %u px, %u patches -> %u image tokens + %u "
      "text tokens = %u prompt tokens; %u thread(s), kernels %s\n",
      FRAME_W, FRAME_H, npu_vit_get_image_size (f.vit),
      npu_vit_get_n_patches (f.vit), f.n_tokens, n_text, f.n_tokens + n_text,
      threads, npu_matmul_get_isa ());

  /* warm-up: pages of the mappings, workspaces */
  run_frame (queue, &f);
  for (v = 0; v < 2; v++)
    for (i = 0; i < 4; i++)
      best[v][i] = G_MAXDOUBLE;
  for (r = 0; r < runs; r++) {
    for (v = 0; v < 2; v++) {
      double total;

      npu_matmul_set_gemm_panels (v == 0);
      total = run_frame (queue, &f);
      best[v][3] = MIN (best[v][3], total);
      for (i = 0; i < 3; i++)
        best[v][i] = MIN (best[v][i], f.t[i]);
    }
  }
  npu_matmul_set_gemm_panels (TRUE);
  for (v = 0; v < 2; v++)
    printf ("%s: time to first token %.0f ms (best of %u; preprocess %.1f, "
        "encode %.0f, prefill %.0f ms, each its own best)\n",
        v == 0 ? "GEMM panels (default)" : "GEMM tiles (before)  ",
        best[v][3] * 1e3, runs, best[v][0] * 1e3, best[v][1] * 1e3,
        best[v][2] * 1e3);
  printf ("tiles / panels: %.2f\n", best[1][3] / best[0][3]);

  npu_queue_free (queue);
  npu_device_unref (device);
  npu_llm_context_free (f.ctx);
  npu_vision_prep_plan_free (plan);
  npu_vit_free (f.vit);
  npu_llm_model_free (model);
  g_free (frame);
  g_free (text);
  g_free (f.patches);
  g_free (f.tokens);
  return 0;
}
