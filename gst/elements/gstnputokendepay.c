/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-nputokendepay
 * @title: nputokendepay
 * @see_also: nputokenpay, npullm, tcpclientsrc
 *
 * Reads the byte stream nputokenpay writes and pushes each packet as a
 * token buffer again: the float32 rows under `other/tensors` caps
 * (dimensions from the packet), the buffer's timestamps, and a
 * GstNpuTokensMeta with the modality, grid and source timestamps, so that
 * npullm on this host answers exactly as it would beside the encoder.
 *
 * Every header is checked before any size in it is trusted; a stream that
 * is not a token stream, a packet whose sizes or grid disagree, a
 * non-finite value, or a stream that ends inside a packet is a
 * GST_STREAM_ERROR naming what was wrong.
 *
 * |[
 * gst-launch-1.0 tcpclientsrc host=encoder port=5000 ! nputokendepay ! \
 *     llm.vision npullm name=llm model=text.gguf ! fdsink
 * ]|
 *
 * Since: 1.0
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnputokendepay.h"

#include <gst/base/gstadapter.h>
#include <core/formats/nputokenwire.h>
#include <npu/gstnputokensmeta.h>

GST_DEBUG_CATEGORY_STATIC (gst_npu_token_depay_debug);
#define GST_CAT_DEFAULT gst_npu_token_depay_debug

struct _GstNpuTokenDepay
{
  GstElement parent;

  GstPad *sinkpad, *srcpad;
  GstAdapter *adapter;
  gboolean have_header;
  NpuTokenWireHeader header;
  guint cur_tokens, cur_dim;    /* of the caps set, 0 none */
  gboolean need_segment;
  gboolean failed;
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("other/tensors, format=(string)static, "
        "num_tensors=(int)1, types=(string)float32"));

#define gst_npu_token_depay_parent_class parent_class
G_DEFINE_TYPE (GstNpuTokenDepay, gst_npu_token_depay, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (nputokendepay, "nputokendepay",
    GST_RANK_NONE, GST_TYPE_NPU_TOKEN_DEPAY,
    GST_DEBUG_CATEGORY_INIT (gst_npu_token_depay_debug, "nputokendepay", 0,
        "a byte stream to token buffers"));

static void
gst_npu_token_depay_reset (GstNpuTokenDepay * self)
{
  gst_adapter_clear (self->adapter);
  self->have_header = FALSE;
  self->failed = FALSE;
  self->need_segment = TRUE;
  self->cur_tokens = self->cur_dim = 0;
}

/* Caps and a time segment of our own, before the first buffer of a shape:
 * the byte stream's segment says nothing about the tokens' times */
static gboolean
negotiate (GstNpuTokenDepay * self, const NpuTokenWireHeader * h)
{
  if (h->n_tokens != self->cur_tokens || h->dim != self->cur_dim) {
    gchar *dims = g_strdup_printf ("%u:%u", h->dim, h->n_tokens);
    GstCaps *caps = gst_caps_new_simple ("other/tensors", "format",
        G_TYPE_STRING, "static", "num_tensors", G_TYPE_INT, 1, "types",
        G_TYPE_STRING, "float32", "dimensions", G_TYPE_STRING, dims,
        "framerate", GST_TYPE_FRACTION, 0, 1, NULL);
    gboolean ok = gst_pad_set_caps (self->srcpad, caps);

    gst_caps_unref (caps);
    g_free (dims);
    if (!ok)
      return FALSE;
    self->cur_tokens = h->n_tokens;
    self->cur_dim = h->dim;
  }
  if (self->need_segment) {
    GstSegment seg;

    gst_segment_init (&seg, GST_FORMAT_TIME);
    gst_pad_push_event (self->srcpad, gst_event_new_segment (&seg));
    self->need_segment = FALSE;
  }
  return TRUE;
}

/* One packet's rows, checked, with the buffer fields and meta restored */
static GstFlowReturn
push_packet (GstNpuTokenDepay * self, GError ** error)
{
  const NpuTokenWireHeader *h = &self->header;
  GstBuffer *out = gst_adapter_take_buffer (self->adapter, h->payload_size);
  GstMapInfo map;
  gboolean ok;

  self->have_header = FALSE;
  if (!gst_buffer_map (out, &map, GST_MAP_READ)) {
    gst_buffer_unref (out);
    g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FAILED,
        "the token packet cannot be mapped");
    return GST_FLOW_ERROR;
  }
  ok = npu_token_wire_check_payload (h, map.data, map.size, error);
  gst_buffer_unmap (out, &map);
  if (!ok) {
    gst_buffer_unref (out);
    return GST_FLOW_ERROR;
  }
  GST_BUFFER_PTS (out) = h->pts;
  GST_BUFFER_DURATION (out) = h->duration;
  if (h->flags & NPU_TOKEN_WIRE_FLAG_DISCONT)
    GST_BUFFER_FLAG_SET (out, GST_BUFFER_FLAG_DISCONT);
  gst_buffer_add_npu_tokens_meta (out, h->modality == 1 ?
      GST_NPU_MODALITY_AUDIO : GST_NPU_MODALITY_VISION, h->n_tokens, h->dim,
      h->grid_width, h->grid_height, h->source_pts, h->source_duration);
  if (!negotiate (self, h)) {
    gst_buffer_unref (out);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  return gst_pad_push (self->srcpad, out);
}

static GstFlowReturn
gst_npu_token_depay_chain (GstPad * pad, GstObject * parent, GstBuffer * buf)
{
  GstNpuTokenDepay *self = GST_NPU_TOKEN_DEPAY (parent);
  GstFlowReturn ret = GST_FLOW_OK;
  GError *err = NULL;

  if (self->failed) {
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
  gst_adapter_push (self->adapter, buf);
  while (ret == GST_FLOW_OK) {
    if (!self->have_header) {
      const guint8 *data;

      if (gst_adapter_available (self->adapter) < NPU_TOKEN_WIRE_HEADER_SIZE)
        break;
      data = gst_adapter_map (self->adapter, NPU_TOKEN_WIRE_HEADER_SIZE);
      self->have_header = npu_token_wire_read_header (data,
          NPU_TOKEN_WIRE_HEADER_SIZE, &self->header, &err);
      gst_adapter_unmap (self->adapter);
      if (!self->have_header)
        goto bad_stream;
      gst_adapter_flush (self->adapter, NPU_TOKEN_WIRE_HEADER_SIZE);
    }
    if (gst_adapter_available (self->adapter) < self->header.payload_size)
      break;
    ret = push_packet (self, &err);
    if (err)
      goto bad_stream;
  }
  return ret;

  /* ERRORS */
bad_stream:
  {
    GST_ELEMENT_ERROR (self, STREAM, DECODE, (NULL),
        ("bad token stream: %s", err->message));
    g_error_free (err);
    self->failed = TRUE;
    return GST_FLOW_ERROR;
  }
}

static gboolean
gst_npu_token_depay_sink_event (GstPad * pad, GstObject * parent,
    GstEvent * event)
{
  GstNpuTokenDepay *self = GST_NPU_TOKEN_DEPAY (parent);
  gsize left;

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS:
    case GST_EVENT_SEGMENT:
      /* ours come from the packets */
      gst_event_unref (event);
      return TRUE;
    case GST_EVENT_FLUSH_STOP:
      gst_npu_token_depay_reset (self);
      break;
    case GST_EVENT_EOS:
      left = gst_adapter_available (self->adapter);
      if (!self->failed && (left || self->have_header)) {
        GST_ELEMENT_ERROR (self, STREAM, DECODE, (NULL),
            ("bad token stream: truncated, it ended inside a packet (%"
                G_GSIZE_FORMAT " bytes %s)", left, self->have_header ?
                "of its payload" : "of a header"));
        gst_event_unref (event);
        return FALSE;
      }
      break;
    default:
      break;
  }
  return gst_pad_event_default (pad, parent, event);
}

static GstStateChangeReturn
gst_npu_token_depay_change_state (GstElement * element,
    GstStateChange transition)
{
  GstNpuTokenDepay *self = GST_NPU_TOKEN_DEPAY (element);

  if (transition == GST_STATE_CHANGE_READY_TO_PAUSED)
    gst_npu_token_depay_reset (self);
  return GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);
}

static void
gst_npu_token_depay_finalize (GObject * object)
{
  g_object_unref (GST_NPU_TOKEN_DEPAY (object)->adapter);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_npu_token_depay_class_init (GstNpuTokenDepayClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);

  gobject_class->finalize = gst_npu_token_depay_finalize;
  element_class->change_state = gst_npu_token_depay_change_state;
  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "NPU token depayloader", "Codec/Depayloader/Network",
      "Reads nputokenpay's byte stream back into token buffers with their "
      "metas", "gst-npu contributors");
}

static void
gst_npu_token_depay_init (GstNpuTokenDepay * self)
{
  self->adapter = gst_adapter_new ();
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, gst_npu_token_depay_chain);
  gst_pad_set_event_function (self->sinkpad, gst_npu_token_depay_sink_event);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);
  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
  gst_npu_token_depay_reset (self);
}
