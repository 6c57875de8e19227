/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the frame audiotestsrc's ticks leave unwritten, written 0
 *
 * audiotestsrc's wave=ticks (GStreamer 1.22 and 1.26) writes nothing at the
 * frame where a tick starts: that frame keeps whatever the buffer's memory
 * held, so the same source sounded different from run to run (a ticks case
 * was "White noise." in about half the runs of test-trained-audio's dma-buf
 * leg, whose buffers reuse freed memory).  Its tick phase runs one buffer
 * ahead: the unwritten frames are those where (frame + samplesperbuffer) is
 * a whole number of tick intervals (seen with MALLOC_PERTURB_ on all three
 * held-out ticks cases).  npu_audio_ticks_complete() adds a probe that
 * writes the 0 that sin (0) would have given there.
 *
 * One rule for the two programs that play ticks to the trained model: the
 * training renderer (tests/tools/npu-render-audio.c), so that the ticks the
 * model learns are what GStreamer means rather than leftover memory, and
 * tests/check/test-trained-audio.c, so that the held-out ticks are the same
 * sound in every run.  Header-only, for both.
 */
#ifndef __NPU_AUDIO_TICKS_H__
#define __NPU_AUDIO_TICKS_H__

#include <string.h>
#include <gst/gst.h>
#include <gst/audio/audio.h>

typedef struct
{
  guint64 frames;               /* frames seen before this buffer */
  guint64 interval_ns;          /* tick-interval */
  guint spb;                    /* samplesperbuffer */
} NpuAudioTicks;

static inline GstPadProbeReturn
npu_audio_ticks_probe (GstPad * pad, GstPadProbeInfo * info, gpointer user_data)
{
  NpuAudioTicks *t = user_data;
  GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER (info);
  GstCaps *caps = gst_pad_get_current_caps (pad);
  GstAudioInfo ainfo;
  GstMapInfo map;
  guint64 n, i, interval = 0;
  guint bpf;
  gboolean ok;

  ok = caps && gst_audio_info_from_caps (&ainfo, caps);
  if (caps)
    gst_caps_unref (caps);
  if (ok)
    interval = gst_util_uint64_scale_int (t->interval_ns,
        GST_AUDIO_INFO_RATE (&ainfo), GST_SECOND);
  if (!ok || interval == 0)
    goto refused;
  bpf = GST_AUDIO_INFO_BPF (&ainfo);
  buf = gst_buffer_make_writable (buf);
  GST_PAD_PROBE_INFO_DATA (info) = buf;
  if (!gst_buffer_map (buf, &map, GST_MAP_READWRITE))
    goto refused;
  n = map.size / bpf;
  for (i = 0; i < n; i++)
    if ((t->frames + i + t->spb) % interval == 0)
      memset (map.data + i * bpf, 0, bpf);
  gst_buffer_unmap (buf, &map);
  t->frames += n;
  return GST_PAD_PROBE_OK;

  /* ERRORS */
refused:
  {
    /* a buffer left with its stale frame would be a different sound:
     * none goes on, and the pipeline stops with an error */
    GstObject *src = gst_pad_get_parent (pad);

    GST_ELEMENT_ERROR (src, STREAM, FORMAT, (NULL),
        ("cannot complete the ticks of a buffer (caps, tick interval "
            "shorter than a frame, or unmappable memory)"));
    gst_object_unref (src);
    return GST_PAD_PROBE_DROP;
  }
}

/* Adds npu_audio_ticks_probe() to each audiotestsrc of @pipeline that
 * plays wave=ticks (set before the pipeline plays); returns how many. */
static inline guint
npu_audio_ticks_complete (GstElement * pipeline)
{
  GstIterator *it;
  GValue v = G_VALUE_INIT;
  guint n = 0;

  if (!GST_IS_BIN (pipeline))
    return 0;
  it = gst_bin_iterate_all_by_element_factory_name (GST_BIN (pipeline),
      "audiotestsrc");
  while (gst_iterator_next (it, &v) == GST_ITERATOR_OK) {
    GstElement *src = g_value_get_object (&v);
    GParamSpec *pspec = g_object_class_find_property (G_OBJECT_GET_CLASS
        (src), "wave");
    GEnumValue *ticks = NULL;
    gint wave = -1;

    if (pspec && G_IS_PARAM_SPEC_ENUM (pspec)) {
      ticks = g_enum_get_value_by_nick (G_PARAM_SPEC_ENUM (pspec)->enum_class,
          "ticks");
      g_object_get (src, "wave", &wave, NULL);
    }
    if (ticks && wave == ticks->value) {
      NpuAudioTicks *t = g_new0 (NpuAudioTicks, 1);
      GstPad *pad = gst_element_get_static_pad (src, "src");

      g_object_get (src, "samplesperbuffer", &t->spb, "tick-interval",
          &t->interval_ns, NULL);
      gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER,
          npu_audio_ticks_probe, t, g_free);
      gst_object_unref (pad);
      n++;
    }
    g_value_unset (&v);
  }
  gst_iterator_free (it);
  return n;
}

#endif /* __NPU_AUDIO_TICKS_H__ */
