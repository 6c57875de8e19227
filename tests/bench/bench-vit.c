/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: vision encoder time per image (docs/vision-encoder.md)
 *
 * Writes a generated mmproj (tiny or base preset, mlp or idefics3) to a
 * temporary file, or takes one, and reports the best and median encode
 * time over several runs inside a task on an N-thread CPU device, with the
 * matmul path in use, for each matmul precision (fast: int8 activations;
 * accurate, the default), each on the GEMM panel kernels (the default)
 * and on the tile kernels before them (npu_matmul_set_gemm_panels()), and
 * on avx512 the accurate one also on the F32 panels that the int16 ones
 * replaced (npu_matmul_set_accurate_gemm_int16 (FALSE)), the five
 * alternating run by run so that a noisy machine hurts them alike.
 * Beside the wall-clock times it prints the process's CPU time per encode
 * (all threads' work): on a shared machine, where other processes take
 * turns on the CPUs, that is the steadier figure of the work an encode
 * does, and its accurate / fast ratio the one to quote.
 * With --device NAME it also times the encoder built for that device
 * (npu_vit_program_new(): the operation table, on "cpu" or "vulkan"),
 * submit to signalled fence, the patches written into its input buffer
 * once.  Lavapipe, Mesa's Vulkan on the CPU, makes that a ratio on one
 * CPU, not a GPU's speed.
 * --projector qwen2vl / qwen2.5vl with --grid HxW times a Qwen encoder on
 * a grid of H x W patches (native resolution, npu_vit_set_patch_grid ())
 * instead of the file's square.
 * A program that prints figures, not a test.
 *
 * Usage: bench-vit [--size tiny|small|base]
 *                  [--projector mlp|idefics3|qwen2vl|qwen2.5vl] [--grid HxW]
 *                  [--type f32|f16|q8_0|mxfp4] [--text-dim D]
 *                  [--threads N] [--runs R] [--model mmproj.gguf]
 *                  [--device cpu|vulkan|vulkan:N]
 */
#include <core/models/npuvit.h>
#include <core/cpu/npumatmul.h>
#include <core/cpu/npumatmul-testing.h>
#include "tests/bench/npubenchstats.h"
#include "tests/bench/npubenchtask.h"
#include "tests/tools/npumodelgen.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_VARIANTS 5

typedef struct
{
  NpuVit *vit;
  const float *patches;
  float *out;
  guint runs;
  /* fast, accurate on the panel kernels; fast, accurate on the tiles;
   * accurate on the F32 panels: wall-clock and process CPU time, ms */
  gdouble *times[N_VARIANTS];
  gdouble *cpu[N_VARIANTS];
} Bench;

static gdouble
process_cpu_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The encoder built for @name: median and best ms of @runs submits */
static gboolean
bench_program (NpuVit * vit, const gchar * name, guint threads,
    const float *patches, gsize n_in, guint runs, GError ** error)
{
  NpuDevice *dev = npu_device_open (name, threads, error);
  NpuVitProgram *prog;
  NpuQueue *queue;
  gdouble *t = g_new (gdouble, runs + 1);
  gpointer in;
  guint r;

  if (!dev)
    return FALSE;
  prog = npu_vit_program_new (vit, dev, error);
  if (!prog) {
    npu_device_unref (dev);
    return FALSE;
  }
  in = npu_buffer_map (npu_vit_program_get_input (prog),
      NPU_BUFFER_MAP_WRITE, NULL);
  memcpy (in, patches, n_in * sizeof (float));
  npu_buffer_unmap (npu_vit_program_get_input (prog));
  queue = npu_queue_new (dev, "bench-vit");
  /* run 0 is the warm-up: it records the program (on Vulkan, the command
   * buffer) */
  for (r = 0; r <= runs; r++) {
    gint64 t0 = g_get_monotonic_time ();
    NpuFence *f = npu_vit_program_submit (prog, queue, NULL, 0);
    gboolean ok = npu_fence_wait (f, -1, error);

    npu_fence_unref (f);
    if (!ok)
      break;
    t[r] = (g_get_monotonic_time () - t0) / 1e3;
  }
  if (r > runs) {
    qsort (t + 1, runs, sizeof (gdouble), npu_bench_cmp_double);
    printf ("encode, program on %s: best %.2f ms, median %.2f ms (%u runs; "
        "first run %.2f ms); weights copied %" G_GSIZE_FORMAT " bytes\n",
        npu_device_get_name (dev), t[1], npu_bench_median (t + 1, runs), runs,
        t[0], npu_vit_program_get_bytes_copied (prog));
  }
  npu_queue_free (queue);
  npu_vit_program_free (prog);
  npu_device_unref (dev);
  g_free (t);
  return r > runs;
}

static gboolean
bench_task (NpuTask * task, gpointer user_data, GError ** error)
{
  Bench *b = user_data;
  guint r;

  guint p;

  /* one warm-up run: first touches of the scratch buffers */
  if (!npu_vit_encode (b->vit, task, b->patches, b->out, error))
    return FALSE;
  for (r = 0; r < b->runs; r++) {
    for (p = 0; p < N_VARIANTS; p++) {
      gint64 t0;
      gdouble c0;

      npu_matmul_set_gemm_panels (p < 2 || p == 4);
      npu_matmul_set_accurate_gemm_int16 (p != 4);
      npu_vit_set_precision (b->vit, p % 2 || p == 4 ?
          NPU_MATMUL_PRECISION_ACCURATE : NPU_MATMUL_PRECISION_FAST);
      t0 = g_get_monotonic_time ();
      c0 = process_cpu_ms ();
      if (!npu_vit_encode (b->vit, task, b->patches, b->out, error))
        return FALSE;
      b->cpu[p][r] = process_cpu_ms () - c0;
      b->times[p][r] = (g_get_monotonic_time () - t0) / 1e3;
    }
  }
  npu_matmul_set_gemm_panels (TRUE);
  npu_matmul_set_accurate_gemm_int16 (TRUE);
  return TRUE;
}

/* --projector for a generated file; -1 if unknown */
static gint
projector_of (const gchar * name)
{
  if (!name || strcmp (name, "idefics3") == 0)
    return NPU_MODEL_PROJECTOR_IDEFICS3;
  if (strcmp (name, "mlp") == 0)
    return NPU_MODEL_PROJECTOR_MLP;
  if (strcmp (name, "qwen2vl") == 0)
    return NPU_MODEL_PROJECTOR_QWEN2VL;
  if (strcmp (name, "qwen2.5vl") == 0)
    return NPU_MODEL_PROJECTOR_QWEN25VL;
  return -1;
}

/* --grid HxW: the Qwen encoder's patch grid */
static gboolean
set_grid (NpuVit * vit, const gchar * grid, GError ** error)
{
  guint h = 0, w = 0;

  if (!grid)
    return TRUE;
  if (sscanf (grid, "%ux%u", &h, &w) != 2) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "--grid %s is not HxW", grid);
    return FALSE;
  }
  return npu_vit_set_patch_grid (vit, h, w, error);
}

int
main (int argc, char **argv)
{
  gchar *size = NULL, *proj = NULL, *type = NULL, *model = NULL;
  gchar *device = NULL, *grid = NULL;
  gint threads = 0, runs = 10, text_dim = 2048;
  GOptionEntry entries[] = {
    {"size", 0, 0, G_OPTION_ARG_STRING, &size, "tiny, small, base", NULL},
    {"projector", 0, 0, G_OPTION_ARG_STRING, &proj,
        "mlp, idefics3, qwen2vl, qwen2.5vl", NULL},
    {"grid", 0, 0, G_OPTION_ARG_STRING, &grid, "Qwen: HxW patches", NULL},
    {"type", 0, 0, G_OPTION_ARG_STRING, &type, "weight type", NULL},
    {"text-dim", 0, 0, G_OPTION_ARG_INT, &text_dim, "projector output", NULL},
    {"threads", 0, 0, G_OPTION_ARG_INT, &threads, "0: one per CPU", NULL},
    {"runs", 0, 0, G_OPTION_ARG_INT, &runs, "timed runs", NULL},
    {"model", 0, 0, G_OPTION_ARG_FILENAME, &model, "existing mmproj", NULL},
    {"device", 0, 0, G_OPTION_ARG_STRING, &device,
        "also time the encoder built for this device", NULL},
    {NULL}
  };
  GOptionContext *ctx = g_option_context_new ("- vision encoder timing");
  GError *error = NULL;
  gchar *tmp = NULL;
  NpuDevice *dev;
  NpuQueue *queue;
  Bench b = { 0, };
  float *patches;
  gsize n_in, i, owned, borrowed, scratch;
  gint64 t0;
  gdouble load_ms, med_wall[N_VARIANTS], med_cpu[N_VARIANTS];

  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &error)) {
    fprintf (stderr, "%s\n", error->message);
    return 2;
  }
  g_option_context_free (ctx);
  runs = CLAMP (runs, 1, 1000);

  if (!model) {
    NpuMmprojParams mp;
    gint wt = npu_model_gen_parse_type (type ? type : "f16");
    gint pj = projector_of (proj);

    if (wt < 0 || pj < 0 || !npu_model_gen_mmproj_preset (&mp, pj,
            size ? size : "tiny", &error)) {
      fprintf (stderr, "%s\n", error ? error->message :
          "unknown --type or --projector");
      return 2;
    }
    mp.wtype = wt;
    mp.text_dim = text_dim;
    tmp = g_build_filename (g_get_tmp_dir (), "bench-vit-mmproj.gguf", NULL);
    if (!npu_model_gen_write_mmproj (&mp, NULL, tmp, NULL, &error)) {
      fprintf (stderr, "%s\n", error->message);
      return 1;
    }
    model = g_strdup (tmp);
  }

  t0 = g_get_monotonic_time ();
  b.vit = npu_vit_new_from_file (model, &error);
  load_ms = (g_get_monotonic_time () - t0) / 1e3;
  if (!b.vit || !set_grid (b.vit, grid, &error)) {
    fprintf (stderr, "%s\n", error->message);
    return 1;
  }
  n_in = (gsize) npu_vit_get_n_patches (b.vit) * npu_vit_get_patch_dim (b.vit);
  patches = g_new (float, n_in);
  for (i = 0; i < n_in; i++)
    patches[i] = (float) ((i * 2654435761u) % 4001) / 1000.0f - 2.0f;
  b.patches = patches;
  b.out = g_new (float, (gsize) npu_vit_get_n_tokens (b.vit) *
      npu_vit_get_out_dim (b.vit));
  b.runs = runs;
  for (i = 0; i < N_VARIANTS; i++) {
    b.times[i] = g_new (gdouble, runs);
    b.cpu[i] = g_new (gdouble, runs);
  }

  dev = npu_device_new_cpu (threads);
  queue = npu_queue_new (dev, "bench-vit");
  npu_bench_run_task (queue, bench_task, &b);
  for (i = 0; i < N_VARIANTS; i++) {
    qsort (b.times[i], runs, sizeof (gdouble), npu_bench_cmp_double);
    qsort (b.cpu[i], runs, sizeof (gdouble), npu_bench_cmp_double);
    med_wall[i] = npu_bench_median (b.times[i], runs);
    med_cpu[i] = npu_bench_median (b.cpu[i], runs);
  }
  npu_vit_get_memory (b.vit, &owned, &borrowed, &scratch);

  printf ("model %s: %u layers x %u, image %u, patch %u, %u patches -> %u "
      "tokens x %u\n", model, npu_vit_get_n_layers (b.vit),
      npu_vit_get_dim (b.vit), npu_vit_get_image_size (b.vit),
      npu_vit_get_patch_size (b.vit), npu_vit_get_n_patches (b.vit),
      npu_vit_get_n_tokens (b.vit), npu_vit_get_out_dim (b.vit));
  printf ("load %.1f ms; weights %.2f MiB converted + %.2f MiB in place, "
      "scratch %.2f MiB\n", load_ms, owned / 1048576.0, borrowed / 1048576.0,
      scratch / 1048576.0);
  for (i = 0; i < N_VARIANTS; i++)
    printf ("encode, %u threads, matmul %s, %-8s (GEMM %s): best %.2f ms, "
        "median %.2f ms (%d runs); CPU time best %.2f ms, median %.2f ms\n",
        npu_device_get_n_threads (dev), npu_matmul_get_isa (),
        i % 2 || i == 4 ? "accurate" : "fast",
        i == 4 ? "F32 panels" : i < 2 ? "panels" : "tiles ",
        b.times[i][0], med_wall[i], runs, b.cpu[i][0], med_cpu[i]);
  printf ("accurate / fast (panels): %.2f (best), %.2f (median)\n",
      b.times[1][0] / b.times[0][0], med_wall[1] / med_wall[0]);
  printf ("accurate / fast (panels), CPU time: %.2f (best), %.2f (median)\n",
      b.cpu[1][0] / b.cpu[0][0], med_cpu[1] / med_cpu[0]);
  printf ("accurate (panels) / fast (tiles): %.2f (best), %.2f (median)\n",
      b.times[1][0] / b.times[2][0], med_wall[1] / med_wall[2]);
  printf ("accurate, F32 panels / fast (panels), CPU time: %.2f (best), "
      "%.2f (median)\n", b.cpu[4][0] / b.cpu[0][0], med_cpu[4] / med_cpu[0]);
  printf ("fast, tiles / panels: %.2f (best), %.2f (median)\n",
      b.times[2][0] / b.times[0][0], med_wall[2] / med_wall[0]);
  if (device && !bench_program (b.vit, device, threads, patches, n_in, runs,
          &error)) {
    fprintf (stderr, "%s\n", error->message);
    return 1;
  }

  npu_queue_free (queue);
  npu_device_unref (dev);
  npu_vit_free (b.vit);
  g_free (patches);
  g_free (b.out);
  for (i = 0; i < N_VARIANTS; i++) {
    g_free (b.times[i]);
    g_free (b.cpu[i]);
  }
  if (tmp)
    g_unlink (tmp);
  g_free (tmp);
  g_free (model);
  g_free (size);
  g_free (proj);
  g_free (type);
  g_free (grid);
  return 0;
}
