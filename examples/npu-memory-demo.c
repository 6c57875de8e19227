/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu example: camera-style frames into NPU memory, read in place by a
 * backend task with fences.
 *
 *   videotestsrc ! video/x-raw,format=NV12,... ! appsink
 *
 * The appsink's ALLOCATION query is answered with gst_npu_propose_allocation(),
 * so videotestsrc draws every frame straight into NPU memory (a dma-buf where
 * the kernel has a DMA-BUF heap or udmabuf).  Each frame becomes a backend
 * task that reads the luma plane in place on all CPU threads; the task's
 * fence rides on the buffer as a GstNpuFenceMeta.  Nothing is copied, and
 * the program prints the figures that show it.
 *
 * Usage: npu-memory-demo [WIDTHxHEIGHT] [FRAMES]
 */
#include <stdio.h>
#include <stdlib.h>

#include <gst/gst.h>
#include <gst/app/app.h>
#include <npu/npu.h>
#include <core/device/npubackend.h>

typedef struct
{
  GstNpuImporter *importer;
  GstBuffer *buffer;
  GstVideoInfo info;
  double mean;
} LumaJob;

/* What the parallel loop shares: the frame, and one sum per worker so the
 * hot loop takes no lock. */
typedef struct
{
  const GstNpuImportFrame *frame;
  guint64 sums[256];
} LumaSums;

static void
sum_rows (gsize start, gsize end, guint worker, gpointer user_data)
{
  LumaSums *ls = user_data;
  const GstNpuImportFrame *frame = ls->frame;
  gint x, w = GST_VIDEO_INFO_WIDTH (&frame->info);
  guint64 sum = 0;
  gsize y;

  for (y = start; y < end; y++) {
    const guint8 *row = frame->data[0] + y * frame->stride[0];
    for (x = 0; x < w; x++)
      sum += row[x];
  }
  ls->sums[worker] += sum;
}

static gboolean
luma_task (NpuTask * task, gpointer user_data, GError ** error)
{
  LumaJob *job = user_data;
  GstNpuImportFrame frame;
  LumaSums ls = { &frame, {0,} };
  guint64 total = 0;
  guint i;

  if (npu_task_get_n_threads (task) > G_N_ELEMENTS (ls.sums)) {
    g_set_error (error, NPU_BACKEND_ERROR, 0, "too many threads");
    return FALSE;
  }
  if (!gst_npu_importer_map_frame (job->importer, job->buffer, &job->info,
          &frame)) {
    g_set_error (error, NPU_BACKEND_ERROR, 0, "cannot map frame in place");
    return FALSE;
  }
  npu_task_parallel_for (task, GST_VIDEO_INFO_HEIGHT (&job->info), 16,
      sum_rows, &ls);
  gst_npu_importer_unmap_frame (job->importer, &frame);

  for (i = 0; i < G_N_ELEMENTS (ls.sums); i++)
    total += ls.sums[i];
  job->mean = (double) total / (GST_VIDEO_INFO_WIDTH (&job->info) *
      GST_VIDEO_INFO_HEIGHT (&job->info));
  return TRUE;
}

static GstPadProbeReturn
answer_allocation (GstPad * pad, GstPadProbeInfo * info, gpointer user_data)
{
  GstQuery *query = GST_PAD_PROBE_INFO_QUERY (info);

  if (GST_QUERY_TYPE (query) != GST_QUERY_ALLOCATION)
    return GST_PAD_PROBE_OK;
  gst_npu_propose_allocation (query, NULL, 2, 0);
  return GST_PAD_PROBE_HANDLED;
}

int
main (int argc, char **argv)
{
  guint width = 1280, height = 720, frames = 120, n = 0, n_npu = 0, n_dmabuf =
      0;
  GstElement *pipeline, *sink;
  GstPad *pad;
  GstAllocator *allocator;
  NpuDevice *device;
  NpuQueue *queue;
  GstNpuImportStats stats;
  LumaJob job = { 0, };
  gchar *desc;
  gint64 t0, t1;
  GError *error = NULL;

  gst_init (&argc, &argv);
  if (argc > 1 && sscanf (argv[1], "%ux%u", &width, &height) != 2) {
    fprintf (stderr, "usage: %s [WIDTHxHEIGHT] [FRAMES]\n", argv[0]);
    return 2;
  }
  if (argc > 2)
    frames = atoi (argv[2]);

  allocator = gst_npu_allocator_get_default ();
  printf ("NPU memory: %s (%s)\n", gst_npu_memory_path_to_string
      (gst_npu_allocator_get_path (allocator)),
      gst_npu_allocator_get_device (allocator));

  desc = g_strdup_printf ("videotestsrc num-buffers=%u pattern=smpte ! "
      "video/x-raw,format=NV12,width=%u,height=%u ! "
      "appsink name=sink sync=false max-buffers=4", frames, width, height);
  printf ("pipeline: %s\n", desc);
  pipeline = gst_parse_launch (desc, &error);
  g_free (desc);
  if (!pipeline) {
    fprintf (stderr, "cannot build pipeline: %s\n", error->message);
    return 1;
  }
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  pad = gst_element_get_static_pad (sink, "sink");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_QUERY_DOWNSTREAM,
      answer_allocation, NULL, NULL);
  gst_object_unref (pad);

  device = npu_device_get_cpu (0);
  queue = npu_queue_new (device, "demo");
  job.importer = gst_npu_importer_new (0);
  printf ("backend: %s\n", npu_device_get_name (device));

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  t0 = g_get_monotonic_time ();
  for (;;) {
    GstSample *sample = gst_app_sink_pull_sample (GST_APP_SINK (sink));
    GstBuffer *buffer;
    GstMemory *mem;
    NpuFence *fence;

    if (!sample)
      break;
    buffer = gst_sample_get_buffer (sample);
    gst_video_info_from_caps (&job.info, gst_sample_get_caps (sample));
    mem = gst_buffer_peek_memory (buffer, 0);
    n_npu += gst_is_npu_memory (mem);
    n_dmabuf += gst_is_dmabuf_memory (mem);

    job.buffer = buffer;
    fence = npu_queue_submit (queue, luma_task, &job, NULL, NULL, 0);
    /* A downstream NPU element would pass this fence on; here we wait. */
    if (!npu_fence_wait (fence, 5 * G_USEC_PER_SEC, &error)) {
      fprintf (stderr, "frame %u: %s\n", n, error->message);
      return 1;
    }
    npu_fence_unref (fence);
    gst_sample_unref (sample);
    n++;
  }
  t1 = g_get_monotonic_time ();
  gst_element_set_state (pipeline, GST_STATE_NULL);

  gst_npu_importer_get_stats (job.importer, &stats);
  printf ("frames: %u, in NPU memory: %u, dma-buf: %u\n", n, n_npu, n_dmabuf);
  printf ("mean luma of the last frame: %.2f\n", job.mean);
  printf ("bytes copied: %" G_GUINT64_FORMAT "\n", stats.bytes_copied);
  printf ("%.1f frames/s end to end\n", n * 1e6 / MAX (t1 - t0, 1));

  gst_npu_importer_free (job.importer);
  npu_queue_free (queue);
  npu_device_unref (device);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  gst_object_unref (allocator);
  return n == frames && n_npu == n ? 0 : 1;
}
