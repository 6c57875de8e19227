/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu real-kernel test: a V4L2 camera (vivid) into npuvisiontok
 *
 *   rk-visiontok PLUGIN_DIR SYSTEM_PLUGIN_DIR MMPROJ IO_MODE [dma-drm]
 *       [--tokens FILE]
 *   rk-visiontok --has-dma-drm     exit 0 if built against GStreamer 1.24+
 *
 * Runs `v4l2src io-mode=IO_MODE num-buffers=N ! npuvisiontok ! fakesink`
 * and asserts that every frame npuvisiontok received was a dma-buf, that
 * every frame became tokens, and that npuvisiontok copied zero bytes.
 * With io-mode=dmabuf the camera's own dma-bufs are read in place through
 * their fds; with io-mode=dmabuf-import the camera fills our NPU memory
 * (a DMA-BUF heap buffer here) that npuvisiontok proposed.
 * With dma-drm (GStreamer 1.24+) the caps between them are the DMA_DRM
 * form, video/x-raw(memory:DMABuf),format=DMA_DRM,drm-format=NV12, and the
 * test checks that they were negotiated.
 * With io-mode=mmap or rw the frames come as system memory under the
 * classic caps (the reference the dma-buf paths are compared with): it
 * asserts that none was a dma-buf and that every frame became tokens.
 * With --tokens the tokens go to FILE (filesink) instead of fakesink, all
 * frames one after the other, so that the guest suite can compare the
 * paths' tokens with cmp once the pipelines are done: nothing maps a
 * buffer while the pipeline runs.  The camera draws no OSD text
 * (osd_text_mode=2, "None") and its test pattern does not move, so every
 * run sees the same frames.
 */
#include <stdio.h>
#include <string.h>

#include <gst/gst.h>
#include <gst/allocators/allocators.h>
#include <gst/video/video.h>
#include <npu/npu.h>

/* few: under TCG on a loaded host each run took 80-120 s with 10 */
#define N_FRAMES 5

static int failures;

#define CHECK(cond, ...) do { \
    if (cond) { printf ("ok - "); } else { printf ("not ok - "); failures++; } \
    printf (__VA_ARGS__); printf ("\n"); fflush (stdout); } while (0)

typedef struct
{
  guint n, n_dmabuf, n_npu;
} Seen;

static GstPadProbeReturn
on_frame (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  Seen *seen = data;
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER (info);
  GstMemory *mem = gst_buffer_peek_memory (buf, 0);

  seen->n++;
  seen->n_dmabuf += gst_buffer_n_memory (buf) == 1 &&
      gst_is_dmabuf_memory (mem);
  seen->n_npu += gst_is_npu_memory (mem);
  return GST_PAD_PROBE_OK;
}

static void
load (const gchar * dir, const gchar * file)
{
  gchar *path = g_build_filename (dir, file, NULL);
  GError *error = NULL;
  GstPlugin *p = gst_plugin_load_file (path, &error);

  if (!p) {
    printf ("cannot load %s: %s\n", path, error->message);
    failures++;
  } else {
    gst_object_unref (p);
  }
  g_free (path);
}

int
main (int argc, char **argv)
{
  const gchar *io_mode;
  GstElement *pipeline, *tok;
  GstPad *pad;
  GstMessage *msg;
  GError *error = NULL;
  Seen seen = { 0, };
  guint64 processed = 0, copied = 1, dmabuf = 0;
  gboolean dma_drm, system, negotiated_dma_drm = FALSE;
  const gchar *tokens = NULL;
  gchar *desc, *sink;

  gst_init (&argc, &argv);
  if (argc == 2 && !strcmp (argv[1], "--has-dma-drm"))
    return GST_CHECK_VERSION (1, 24, 0) ? 0 : 1;
  if (argc >= 7 && !strcmp (argv[argc - 2], "--tokens")) {
    tokens = argv[argc - 1];
    argc -= 2;
  }
  if (argc != 5 && !(argc == 6 && !strcmp (argv[5], "dma-drm"))) {
    fprintf (stderr, "usage: %s PLUGIN_DIR SYSTEM_PLUGIN_DIR MMPROJ "
        "IO_MODE [dma-drm] [--tokens FILE]\n", argv[0]);
    return 2;
  }
  io_mode = argv[4];
  dma_drm = argc == 6;
  system = !strcmp (io_mode, "mmap") || !strcmp (io_mode, "rw");
  if (system && dma_drm) {
    fprintf (stderr, "io-mode=%s gives system memory, not DMA_DRM\n",
        io_mode);
    return 2;
  }
  /* Only the plugins this pipeline uses: a full registry scan of /usr
   * over 9p costs seconds under emulation. */
  load (argv[1], "libgstnpu.so");
  load (argv[2], "libgstvideo4linux2.so");
  load (argv[2], "libgstcoreelements.so");

  /* precision=fast: the guest's SIMD is emulated (TCG), where the
   * default accurate products (two int8 passes) took over 12 s a frame on
   * a loaded host and ran past the timeout.  This test is about the
   * memory paths; the precisions are tested in tests/check. */
  sink = tokens ? g_strdup_printf ("filesink location=\"%s\"", tokens) :
      g_strdup ("fakesink");
  desc = g_strdup_printf ("v4l2src device=/dev/video0 io-mode=%s "
      "num-buffers=%d extra-controls=\"c,osd_text_mode=2\" ! "
      "%s,width=640,height=480 ! "
      "npuvisiontok name=tok precision=fast model=%s ! %s", io_mode, N_FRAMES,
      dma_drm ? "video/x-raw(memory:DMABuf),format=DMA_DRM,drm-format=NV12" :
      "video/x-raw,format=NV12", argv[3], sink);
  g_free (sink);
  printf ("# %s\n", desc);
  pipeline = gst_parse_launch (desc, &error);
  g_free (desc);
  CHECK (pipeline != NULL, "pipeline built%s%s", error ? ": " : "",
      error ? error->message : "");
  if (!pipeline)
    return 1;
  tok = gst_bin_get_by_name (GST_BIN (pipeline), "tok");
  pad = gst_element_get_static_pad (tok, "sink");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, on_frame, &seen, NULL);

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      300 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  if (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    GError *err = NULL;
    gchar *dbg = NULL;
    gst_message_parse_error (msg, &err, &dbg);
    printf ("# error: %s (%s)\n", err->message, dbg ? dbg : "");
    g_error_free (err);
    g_free (dbg);
  }
  CHECK (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS,
      "io-mode=%s: the pipeline ran to EOS", io_mode);
  if (msg)
    gst_message_unref (msg);
  g_object_get (tok, "frames-processed", &processed, "bytes-copied", &copied,
      "frames-dmabuf", &dmabuf, NULL);
  {
    GstCaps *caps = gst_pad_get_current_caps (pad);

    if (caps) {
      gchar *str = gst_caps_to_string (caps);

      printf ("# negotiated: %s\n", str);
      g_free (str);
#if GST_CHECK_VERSION(1, 24, 0)
      negotiated_dma_drm = gst_video_is_dma_drm_caps (caps);
#endif
      gst_caps_unref (caps);
    }
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);

  printf ("# frames into npuvisiontok: %u, dma-buf: %u, NPU memory: %u; "
      "frames-processed %" G_GUINT64_FORMAT ", frames-dmabuf %"
      G_GUINT64_FORMAT ", bytes-copied %" G_GUINT64_FORMAT "\n", seen.n,
      seen.n_dmabuf, seen.n_npu, processed, dmabuf, copied);
  CHECK (seen.n == N_FRAMES, "io-mode=%s: %d frames arrived", io_mode,
      N_FRAMES);
  CHECK (processed == seen.n, "io-mode=%s: every frame became tokens",
      io_mode);
  if (system) {
    CHECK (seen.n_dmabuf == 0 && dmabuf == 0, "io-mode=%s: the frames "
        "were system memory, not dma-bufs", io_mode);
    goto done;
  }
  CHECK (seen.n_dmabuf == seen.n, "io-mode=%s: every frame was a dma-buf",
      io_mode);
  CHECK (copied == 0, "io-mode=%s: npuvisiontok copied 0 bytes", io_mode);
  if (dma_drm)
    CHECK (negotiated_dma_drm, "io-mode=%s: DMA_DRM caps negotiated",
        io_mode);
  if (!strcmp (io_mode, "dmabuf"))
    CHECK (dmabuf == seen.n, "io-mode=dmabuf: read in place through the "
        "camera's dma-buf fds (frames-dmabuf)");
  else
    CHECK (seen.n_npu == seen.n, "io-mode=dmabuf-import: the camera filled "
        "npuvisiontok's NPU memory");

done:
  gst_object_unref (pad);
  gst_object_unref (tok);
  gst_object_unref (pipeline);
  return failures ? 1 : 0;
}
