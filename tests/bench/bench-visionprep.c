/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: throughput of the fused vision preprocessing
 *
 * A 1280x720 NV12 camera frame (padded stride, as a V4L2 driver gives) to
 * the encoder's patch layout at 224x224 and 384x384, stretch and letterbox,
 * on one thread (no task) and on a backend task over N threads.  Prints
 * frames/s (best of several passes of many frames, so that a descheduled
 * pass does not count) and the bytes a frame touches: source bytes read
 * (the crop's rows of every plane) plus output bytes written.
 *
 * Usage: bench-visionprep [threads (default: one per CPU)] [frames (200)]
 */
#include <core/cpu/npuvisionprep.h>
#include "tests/bench/npubenchtask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SRC_W 1280
#define SRC_H 720
#define STRIDE 1280             /* already a multiple of 128 */

typedef struct
{
  NpuVisionPrepPlan *plan;
  const guint8 *const *planes;
  const gssize *strides;
  gfloat *out;
  guint frames;
} Job;

static gboolean
job_func (NpuTask * task, gpointer user_data, GError ** error)
{
  Job *job = user_data;
  guint i;

  for (i = 0; i < job->frames; i++)
    npu_vision_prep_run (job->plan, job->planes, job->strides, job->out, task);
  return TRUE;
}

/* Seconds per frame, best of @passes */
static double
time_frames (Job * job, NpuQueue * queue, guint passes)
{
  double best = G_MAXDOUBLE;
  guint p;

  for (p = 0; p < passes; p++) {
    double seconds;

    if (queue) {
      seconds = npu_bench_run_task (queue, job_func, job);
    } else {
      gint64 t0 = g_get_monotonic_time ();

      job_func (NULL, job, NULL);
      seconds = (g_get_monotonic_time () - t0) / 1e6;
    }
    best = MIN (best, seconds / job->frames);
  }
  return best;
}

int
main (int argc, char **argv)
{
  guint n_threads = argc > 1 ? (guint) atoi (argv[1]) : 0;
  guint frames = argc > 2 ? (guint) atoi (argv[2]) : 200;
  static const guint sizes[] = { 224, 384 };
  static const guint patches[] = { 14, 16 };
  GRand *rand = g_rand_new_with_seed (42);
  guint8 *y = g_malloc ((gsize) STRIDE * SRC_H);
  guint8 *uv = g_malloc ((gsize) STRIDE * SRC_H / 2);
  const guint8 *planes[2] = { y, uv };
  const gssize strides[2] = { STRIDE, STRIDE };
  NpuDevice *device;
  NpuQueue *queue;
  gsize i;
  guint s, mode;

  if (n_threads == 0)
    n_threads = npu_cpu_count ();
  /* A smooth picture with noise, not constants: the work does not depend
   * on the values, but let nothing be folded away. */
  for (i = 0; i < (gsize) STRIDE * SRC_H; i++)
    y[i] = (guint8) ((i % STRIDE) / 5 + g_rand_int_range (rand, 0, 16));
  for (i = 0; i < (gsize) STRIDE * SRC_H / 2; i++)
    uv[i] = (guint8) (96 + g_rand_int_range (rand, 0, 64));
  device = npu_device_new_cpu (n_threads);
  queue = npu_queue_new (device, "bench");

  printf ("source: %ux%u NV12, stride %u; %u frames a pass, best of 5\n",
      SRC_W, SRC_H, STRIDE, frames);
  printf ("%-20s %10s %12s %12s %14s\n", "output", "MB/frame",
      "fps 1 thr", "fps N thr", "N");
  for (s = 0; s < G_N_ELEMENTS (sizes); s++) {
    for (mode = 0; mode < 2; mode++) {
      NpuVisionPrepParams p;
      Job job;
      double t1, tn, bytes;
      guint dy, dh;

      npu_vision_prep_params_init (&p);
      p.format = NPU_PIXEL_FORMAT_NV12;
      p.width = SRC_W;
      p.height = SRC_H;
      p.matrix = NPU_COLOR_MATRIX_BT709;
      p.out_width = p.out_height = sizes[s];
      p.mode = mode ? NPU_VISION_PREP_LETTERBOX : NPU_VISION_PREP_STRETCH;
      p.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
      p.patch_size = patches[s];
      job.plan = npu_vision_prep_plan_new (&p, NULL);
      job.planes = planes;
      job.strides = strides;
      job.out = g_new (gfloat, npu_vision_prep_plan_get_n_floats (job.plan));
      job.frames = frames;
      npu_vision_prep_plan_get_content_rect (job.plan, NULL, &dy, NULL, &dh);

      /* Every crop row of Y and of UV is read (rows shared by two output
       * rows are read from cache); the output is written once. */
      bytes = (double) SRC_W * SRC_H * 1.5 +
          npu_vision_prep_plan_get_n_floats (job.plan) * sizeof (gfloat);
      time_frames (&job, NULL, 1);      /* warm up */
      t1 = time_frames (&job, NULL, 5);
      tn = time_frames (&job, queue, 5);
      printf ("%3ux%-3u %-12s %10.2f %12.0f %12.0f %14u\n", sizes[s],
          sizes[s], mode ? "letterbox" : "stretch", bytes / 1e6, 1.0 / t1,
          1.0 / tn, n_threads);
      g_free (job.out);
      npu_vision_prep_plan_free (job.plan);
    }
  }
  npu_queue_free (queue);
  npu_device_unref (device);
  g_free (y);
  g_free (uv);
  g_rand_free (rand);
  return 0;
}
