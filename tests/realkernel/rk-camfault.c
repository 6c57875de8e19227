/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu real-kernel test: camera faults while a caption pipeline runs
 *
 *   rk-camfault PLUGIN_DIR SYSTEM_PLUGIN_DIR MMPROJ TEXT_MODEL FAULT...
 *
 * Runs `v4l2src io-mode=dmabuf ! npuvisiontok ! npullm ! fakesink` on
 * vivid and injects each FAULT with vivid's own error-injection controls
 * (set through a second file handle on the device, as v4l2-ctl would):
 *
 *   corrupt     "Inject V4L2_BUF_FLAG_ERROR" after the first frame: the
 *               driver marks the next frame corrupt; the pipeline carries
 *               on to EOS
 *   drop        "Percentage of Dropped Buffers" = 50 from the start: the
 *               driver never returns half the buffers; the pipeline carries
 *               on to EOS
 *   fatal       "Inject Fatal Streaming Error" after the first frame
 *               (vb2_queue_error): v4l2src posts an ERROR
 *   disconnect  "Disconnect" after the first frame (a USB unplug): v4l2src
 *               posts an ERROR
 *   streamon    "Inject VIDIOC_STREAMON Error" before the start: the
 *               pipeline fails to start with an ERROR, no frame arrives
 *
 * For each: the outcome above within a bound (no hang), every frame that
 * npuvisiontok accepted became tokens or was counted as dropped (after an
 * error too: frames in flight finish), on EOS every vision-token buffer
 * npullm received was answered or counted as replaced, and once the
 * pipeline is in NULL and freed the run has left no more fds open than
 * `v4l2src ! fakesink` alone leaves under the same fault, measured in the
 * same process (1.22's v4l2src keeps its buffer pool; after a failed
 * STREAMON also the camera buffers it exported, counted apart by their
 * exporter: bounded by the control's wherever a frame reached us), by kind: our dma-bufs,
 * sync_files, eventfds, video device nodes, all.  A first clean run warms
 * up what GStreamer and the plugin create once.  "disconnect" goes last: vivid stays unplugged
 * while any handle on it is open, and v4l2src's leaked pool holds one.
 */
#include "rk-common.h"

#include <dirent.h>
#include <linux/videodev2.h>

#include <gst/gst.h>

/* a run that carries on: few frames, each costs seconds under TCG */
#define N_FRAMES 3
/* frames seen before a mid-stream fault is injected */
#define FAULT_AFTER 1
#define BUS_WAIT_S 180

/* dmabuf: our allocator's (exporter "system", the DMA heap, or
 * "udmabuf"); cam_dmabuf: any other exporter's, the camera driver's
 * buffers v4l2src exported (VIDIOC_EXPBUF) */
typedef struct
{
  guint total, dmabuf, cam_dmabuf, sync_file, eventfd, video;
} FdCount;

typedef struct
{
  gint frames_in, media_in;
} Seen;

static void
count_fds (FdCount * c)
{
  DIR *d = opendir ("/proc/self/fd");
  struct dirent *e;
  int self = dirfd (d);

  memset (c, 0, sizeof (*c));
  while ((e = readdir (d))) {
    char path[64], link[256];
    ssize_t n;
    int fd;

    if (e->d_name[0] == '.')
      continue;
    fd = atoi (e->d_name);
    if (fd == self)
      continue;
    c->total++;
    snprintf (path, sizeof (path), "/proc/self/fd/%d", fd);
    n = readlink (path, link, sizeof (link) - 1);
    link[n > 0 ? n : 0] = '\0';
    if (g_getenv ("RK_CAMFAULT_LIST_FDS"))
      RK_INFO ("  fd %d: %s", fd, link);
    if (g_str_has_prefix (link, "anon_inode:sync_file"))
      c->sync_file++;
    else if (g_str_has_prefix (link, "anon_inode:[eventfd]"))
      c->eventfd++;
    else if (g_str_has_prefix (link, "/dev/video"))
      c->video++;
    else {
      gchar *exp = rk_fdinfo_get (fd, "exp_name");

      if (exp && (!strcmp (exp, "system") || !strcmp (exp, "udmabuf")))
        c->dmabuf++;
      else if (exp)
        c->cam_dmabuf++;
      g_free (exp);
    }
  }
  closedir (d);
}

/* Finds a control of the device by its name, as VIDIOC_QUERYCTRL reports
 * it; 0 if there is none. */
static guint32
find_control (int fd, const char *name)
{
  struct v4l2_queryctrl q = {.id = V4L2_CTRL_FLAG_NEXT_CTRL };

  while (ioctl (fd, VIDIOC_QUERYCTRL, &q) == 0) {
    if (!strcmp ((const char *) q.name, name))
      return q.id;
    q.id |= V4L2_CTRL_FLAG_NEXT_CTRL;
  }
  return 0;
}

static gboolean
set_control (const char *name, gint value)
{
  int fd = open ("/dev/video0", O_RDWR);
  struct v4l2_control ctrl = { 0, value };
  gboolean ok;

  if (fd < 0) {
    RK_INFO ("open /dev/video0: %s", g_strerror (errno));
    return FALSE;
  }
  ctrl.id = find_control (fd, name);
  ok = ctrl.id != 0 && ioctl (fd, VIDIOC_S_CTRL, &ctrl) == 0;
  RK_INFO ("vivid control \"%s\" (0x%x) = %d: %s", name, ctrl.id, value,
      ok ? "set" : ctrl.id ? g_strerror (errno) : "no such control");
  close (fd);
  return ok;
}

static GstPadProbeReturn
count_buffer (GstPad * pad, GstPadProbeInfo * info, gpointer data)
{
  g_atomic_int_inc ((gint *) data);
  return GST_PAD_PROBE_OK;
}

static void
probe (GstElement * pipeline, const char *element, const char *pad_name,
    gint * counter)
{
  GstElement *el = gst_bin_get_by_name (GST_BIN (pipeline), element);
  GstPad *pad = pad_name ? gst_element_get_static_pad (el, pad_name) : NULL;

  if (!pad) {
    /* npullm's vision pad is a request pad, linked by gst_parse_launch */
    GstIterator *it = gst_element_iterate_sink_pads (el);
    GValue v = G_VALUE_INIT;

    if (gst_iterator_next (it, &v) == GST_ITERATOR_OK)
      pad = gst_object_ref (g_value_get_object (&v));
    g_value_unset (&v);
    gst_iterator_free (it);
  }
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER, count_buffer, counter,
      NULL);
  gst_object_unref (pad);
  gst_object_unref (el);
}

static guint64
get_u64 (GstElement * pipeline, const char *element, const char *prop)
{
  GstElement *el = gst_bin_get_by_name (GST_BIN (pipeline), element);
  guint64 v = 0;

  g_object_get (el, prop, &v, NULL);
  gst_object_unref (el);
  return v;
}

/* Waits for EOS or ERROR, pressing the mid-stream fault's button once
 * FAULT_AFTER frames have arrived.  Returns the message (or NULL). */
static GstMessage *
run_until_done (GstElement * pipeline, Seen * seen, const char *button)
{
  GstBus *bus = gst_element_get_bus (pipeline);
  gint64 end = g_get_monotonic_time () + BUS_WAIT_S * G_USEC_PER_SEC;
  GstMessage *msg = NULL;

  while (!msg && g_get_monotonic_time () < end) {
    msg = gst_bus_timed_pop_filtered (bus, 100 * GST_MSECOND,
        GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
    if (button && g_atomic_int_get (&seen->frames_in) >= FAULT_AFTER) {
      set_control (button, 1);
      button = NULL;
    }
  }
  gst_object_unref (bus);
  return msg;
}

static void
report_error (GstMessage * msg)
{
  GError *err = NULL;
  gchar *dbg = NULL;

  gst_message_parse_error (msg, &err, &dbg);
  RK_INFO ("ERROR from %s: %s", GST_MESSAGE_SRC_NAME (msg), err->message);
  RK_INFO ("  debug: %s", dbg ? dbg : "(none)");
  g_error_free (err);
  g_free (dbg);
}

/* Frames in flight when the source failed finish on their own: give them
 * the fence timeout's worth of time to be counted. */
static gboolean
frames_accounted (GstElement * pipeline, Seen * seen, guint64 * done)
{
  gint64 end = g_get_monotonic_time () + 60 * G_USEC_PER_SEC;

  do {
    *done = get_u64 (pipeline, "tok", "frames-processed") +
        get_u64 (pipeline, "tok", "frames-dropped");
    if (*done == (guint64) g_atomic_int_get (&seen->frames_in))
      return TRUE;
    g_usleep (50000);
  } while (g_get_monotonic_time () < end);
  return FALSE;
}

static void
fd_delta (const FdCount * a, const FdCount * b, FdCount * d)
{
  d->total = b->total - a->total;
  d->dmabuf = b->dmabuf - a->dmabuf;
  d->cam_dmabuf = b->cam_dmabuf - a->cam_dmabuf;
  /* bounded apart (run_fault) */
  d->total = d->total - d->cam_dmabuf;
  d->sync_file = b->sync_file - a->sync_file;
  d->eventfd = b->eventfd - a->eventfd;
  d->video = b->video - a->video;
}

/* The same camera into fakesink, no element of ours: what GStreamer's own
 * v4l2src leaves open per run.  1.22's keeps its buffer pool (the device
 * fd it dups and the two GstPoll socket pairs: 5 fds a run), so the fault
 * runs are held to "no more than v4l2src alone leaves". */
static void
control_run (const char *fault, FdCount * leak)
{
  gboolean streamon = !strcmp (fault, "streamon");
  FdCount before, after;
  GstElement *pipeline;
  GstMessage *msg;
  GError *error = NULL;

  count_fds (&before);
  if (streamon)
    set_control ("Inject VIDIOC_STREAMON Error", 1);
  pipeline = gst_parse_launch ("v4l2src device=/dev/video0 io-mode=dmabuf "
      "num-buffers=2 ! video/x-raw,format=NV12,width=640,height=480 ! "
      "fakesink", &error);
  RK_CHECK_NO_ERROR (pipeline != NULL, error, "control: pipeline built");
  if (!pipeline)
    return;
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (pipeline),
      BUS_WAIT_S * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  RK_CHECK (msg && GST_MESSAGE_TYPE (msg) == (streamon ? GST_MESSAGE_ERROR :
          GST_MESSAGE_EOS), "control (%s): v4l2src ! fakesink %s", fault,
      streamon ? "failed to start" : "ran to EOS");
  if (msg)
    gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (pipeline);
  count_fds (&after);
  fd_delta (&before, &after, leak);
  RK_INFO ("control (%s): v4l2src ! fakesink alone leaves %u fds open "
      "besides %u of the camera's dma-bufs (dma-buf %u, sync_file %u, "
      "eventfd %u, /dev/video %u)", fault, leak->total, leak->cam_dmabuf,
      leak->dmabuf, leak->sync_file, leak->eventfd, leak->video);
}

static void
run_fault (const char *const *argv, const char *fault, const FdCount * leak)
{
  gboolean errors = !strcmp (fault, "fatal") || !strcmp (fault, "disconnect")
      || !strcmp (fault, "streamon");
  const char *button = !strcmp (fault, "corrupt") ?
      "Inject V4L2_BUF_FLAG_ERROR" : !strcmp (fault, "fatal") ?
      "Inject Fatal Streaming Error" : !strcmp (fault, "disconnect") ?
      "Disconnect" : NULL;
  GstElement *pipeline;
  GstMessage *msg;
  GError *error = NULL;
  Seen seen = { 0, };
  guint64 done = 0, answers, replaced;
  FdCount before, after, d, streamon_leak;
  gchar *desc;

  RK_INFO ("---- fault: %s", fault);
  /* A failed STREAMON makes 1.22's v4l2src leave its pool's exported
   * dma-bufs open too: measure what it leaves alone under that fault. */
  if (!strcmp (fault, "streamon")) {
    control_run (fault, &streamon_leak);
    leak = &streamon_leak;
  }
  count_fds (&before);
  if (!strcmp (fault, "streamon"))
    RK_CHECK (set_control ("Inject VIDIOC_STREAMON Error", 1),
        "%s: the next VIDIOC_STREAMON will fail", fault);
  if (!strcmp (fault, "drop"))
    RK_CHECK (set_control ("Percentage of Dropped Buffers", 50),
        "%s: vivid drops half the buffers", fault);
  /* precision=fast, max-tokens=2: the guest's SIMD is emulated; this
   * test is about the camera's faults, not the answers' words. */
  desc = g_strdup_printf ("v4l2src name=cam device=/dev/video0 "
      "io-mode=dmabuf num-buffers=%d extra-controls=\"c,osd_text_mode=2\" ! "
      "video/x-raw,format=NV12,width=640,height=480 ! "
      "npuvisiontok name=tok precision=fast model=%s ! "
      "npullm name=llm model=%s max-tokens=2 ! fakesink",
      errors && strcmp (fault, "streamon") ? 1000 : N_FRAMES, argv[3], argv[4]);
  pipeline = gst_parse_launch (desc, &error);
  g_free (desc);
  RK_CHECK_NO_ERROR (pipeline != NULL, error, "%s: pipeline built", fault);
  if (!pipeline)
    return;
  probe (pipeline, "tok", "sink", &seen.frames_in);
  probe (pipeline, "llm", NULL, &seen.media_in);

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  msg = run_until_done (pipeline, &seen, button);
  RK_CHECK (msg != NULL, "%s: EOS or ERROR within %d s (no hang)", fault,
      BUS_WAIT_S);
  if (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR)
    report_error (msg);
  if (errors) {
    RK_CHECK (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR &&
        !strcmp (GST_MESSAGE_SRC_NAME (msg), "cam"),
        "%s: v4l2src posted an ERROR", fault);
  } else {
    RK_CHECK (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS,
        "%s: the pipeline carried on to EOS", fault);
  }
  RK_CHECK (frames_accounted (pipeline, &seen, &done),
      "%s: the %d frames npuvisiontok accepted became tokens or were "
      "counted as dropped (%" G_GUINT64_FORMAT ")", fault, seen.frames_in,
      done);
  if (!strcmp (fault, "streamon"))
    RK_CHECK (seen.frames_in == 0, "%s: no frame arrived", fault);
  else
    RK_CHECK (seen.frames_in >= (errors ? FAULT_AFTER : 1),
        "%s: frames arrived before the fault (%d)", fault, seen.frames_in);
  answers = get_u64 (pipeline, "llm", "n-answers");
  replaced = get_u64 (pipeline, "llm", "media-replaced");
  RK_INFO ("%s: frames into npuvisiontok %d, token buffers into npullm %d, "
      "answers %" G_GUINT64_FORMAT ", replaced %" G_GUINT64_FORMAT, fault,
      seen.frames_in, seen.media_in, answers, replaced);
  if (!errors)
    RK_CHECK (answers + replaced == (guint64) seen.media_in,
        "%s: every token buffer npullm received was answered or counted "
        "as replaced", fault);
  if (msg)
    gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  {
    gpointer alive = pipeline;

    g_object_add_weak_pointer (G_OBJECT (pipeline), &alive);
    RK_INFO ("%s: pipeline refcount before the last unref: %d", fault,
        GST_OBJECT_REFCOUNT_VALUE (pipeline));
    gst_object_unref (pipeline);
    RK_CHECK (alive == NULL, "%s: the pipeline was freed", fault);
  }
  if (!strcmp (fault, "drop"))
    set_control ("Percentage of Dropped Buffers", 0);

  count_fds (&after);
  fd_delta (&before, &after, &d);
  RK_INFO ("%s: fds left open by the run: %u besides %u of the camera's "
      "dma-bufs: dma-buf %u, sync_file %u, eventfd %u, /dev/video %u",
      fault, d.total, d.cam_dmabuf, d.dmabuf, d.sync_file, d.eventfd, d.video);
  /* the warm-up run opens what lives on; it is not held to the bound */
  if (strcmp (fault, "none"))
    RK_CHECK (d.dmabuf <= leak->dmabuf && d.sync_file <= leak->sync_file &&
        d.eventfd <= leak->eventfd && d.video <= leak->video &&
        d.total <= leak->total, "%s: no fd, dma-buf or fence left open "
        "beyond v4l2src's own", fault);
  /* A camera buffer we kept would keep its dma-buf open.  When no frame
   * reached us (a failed STREAMON) the ones left open are v4l2src's,
   * however many its pool exported for this pipeline's allocation. */
  if (strcmp (fault, "none") && seen.frames_in > 0)
    RK_CHECK (d.cam_dmabuf <= leak->cam_dmabuf, "%s: no camera buffer "
        "kept (%u of its dma-bufs left open, v4l2src alone %u)", fault,
        d.cam_dmabuf, leak->cam_dmabuf);
}

static void
load (const gchar * dir, const gchar * file)
{
  gchar *path = g_build_filename (dir, file, NULL);
  GError *error = NULL;
  GstPlugin *p = gst_plugin_load_file (path, &error);

  RK_CHECK_NO_ERROR (p != NULL, error, "loaded %s", path);
  if (p)
    gst_object_unref (p);
  g_free (path);
}

int
main (int argc, char **argv)
{
  FdCount leak;
  int i;

  gst_init (&argc, &argv);
  if (argc < 6) {
    fprintf (stderr, "usage: %s PLUGIN_DIR SYSTEM_PLUGIN_DIR MMPROJ "
        "TEXT_MODEL corrupt|drop|fatal|disconnect|streamon...\n", argv[0]);
    return 2;
  }
  load (argv[1], "libgstnpu.so");
  load (argv[2], "libgstvideo4linux2.so");
  load (argv[2], "libgstcoreelements.so");
  /* what GStreamer and the plugin create once (the system clock, the CPU
   * backend's threads) is made by a first clean run */
  memset (&leak, 0xff, sizeof (leak));
  run_fault ((const char *const *) argv, "none", &leak);
  control_run ("none", &leak);
  for (i = 5; i < argc; i++)
    run_fault ((const char *const *) argv, argv[i], &leak);
  gst_deinit ();
  return rk_finish ("rk-camfault");
}
