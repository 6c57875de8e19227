/* SPDX-License-Identifier: LGPL-2.1-or-later */
/**
 * SECTION:element-nputokenpay
 * @title: nputokenpay
 * @see_also: nputokendepay, npuvisiontok, npuaudiotok, tcpserversink
 *
 * Writes token buffers (npuvisiontok's or npuaudiotok's) as a byte stream
 * for another host: one packet per buffer, an 80-byte header with what
 * the token metas say (modality, grid, the source media's timestamps) and
 * the buffer's own timestamps, then the float32 rows.  nputokendepay
 * reads it back.  GStreamer's gdppay carries no metas on any version,
 * hence this pair.
 *
 * The rows are handed over finished: a buffer's fence is waited on (up to
 * GST_NPU_FENCE_TIMEOUT_MS) before it is written, so a receiver never
 * sees a fence.  A buffer whose task was cancelled is dropped.  Each
 * packet is one output buffer, so tcpserversink's new clients join on a
 * packet boundary.
 *
 * |[
 * gst-launch-1.0 videotestsrc ! npuvisiontok model=mmproj.gguf ! \
 *     nputokenpay ! tcpserversink host=0.0.0.0 port=5000
 * ]|
 *
 * Since: 1.0
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnputokenpay.h"

#include <string.h>

#include <core/device/npufence.h>
#include <core/formats/nputokenwire.h>
#include <npu/gstnpucpuaccess.h>
#include <npu/gstnpufencemeta.h>
#include <npu/gstnputokensmeta.h>

GST_DEBUG_CATEGORY_STATIC (gst_npu_token_pay_debug);
#define GST_CAT_DEFAULT gst_npu_token_pay_debug

struct _GstNpuTokenPay
{
  GstElement parent;

  GstPad *sinkpad, *srcpad;
  guint dim;                    /* row width from the caps, 0 unknown */
};

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("other/tensors, format=(string)static, "
        "num_tensors=(int)1, types=(string)float32"));
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("application/x-npu-tokens"));

#define gst_npu_token_pay_parent_class parent_class
G_DEFINE_TYPE (GstNpuTokenPay, gst_npu_token_pay, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (nputokenpay, "nputokenpay",
    GST_RANK_NONE, GST_TYPE_NPU_TOKEN_PAY,
    GST_DEBUG_CATEGORY_INIT (gst_npu_token_pay_debug, "nputokenpay", 0,
        "token buffers to a byte stream"));

/* dimensions=D:N (innermost first); only D is needed: N follows from the
 * buffer's size */
static gboolean
dim_from_caps (GstCaps * caps, guint * dim)
{
  const gchar *dims = gst_structure_get_string (gst_caps_get_structure (caps,
          0), "dimensions");
  guint64 d;

  *dim = 0;
  if (!dims)
    return TRUE;
  d = g_ascii_strtoull (dims, NULL, 10);
  if (d == 0 || d > G_MAXUINT32)
    return FALSE;
  *dim = d;
  return TRUE;
}

static gboolean
gst_npu_token_pay_sink_event (GstPad * pad, GstObject * parent,
    GstEvent * event)
{
  GstNpuTokenPay *self = GST_NPU_TOKEN_PAY (parent);

  if (GST_EVENT_TYPE (event) == GST_EVENT_CAPS) {
    GstCaps *caps, *out;
    gboolean ok;

    gst_event_parse_caps (event, &caps);
    if (!dim_from_caps (caps, &self->dim)) {
      GST_ELEMENT_ERROR (self, STREAM, FORMAT, (NULL),
          ("the tensor caps' dimensions are not D:N: %" GST_PTR_FORMAT, caps));
      gst_event_unref (event);
      return FALSE;
    }
    gst_event_unref (event);
    out = gst_caps_new_empty_simple ("application/x-npu-tokens");
    ok = gst_pad_set_caps (self->srcpad, out);
    gst_caps_unref (out);
    return ok;
  }
  return gst_pad_event_default (pad, parent, event);
}

/* The header from the tokens' meta, or, for a plain tensor buffer, from
 * the caps and the pad's default modality (vision) */
static gboolean
fill_header (GstNpuTokenPay * self, GstBuffer * buf, NpuTokenWireHeader * h)
{
  GstNpuTokensMeta *meta = gst_buffer_get_npu_tokens_meta (buf);
  gsize size = gst_buffer_get_size (buf);

  memset (h, 0, sizeof (*h));
  h->source_pts = h->source_duration = GST_CLOCK_TIME_NONE;
  if (meta) {
    h->modality = meta->modality == GST_NPU_MODALITY_AUDIO ? 1 : 0;
    h->n_tokens = meta->n_tokens;
    h->dim = meta->dim;
    h->grid_width = meta->grid_width;
    h->grid_height = meta->grid_height;
    h->source_pts = meta->source_pts;
    h->source_duration = meta->source_duration;
  } else if (self->dim && size % ((gsize) self->dim * 4) == 0) {
    h->dim = self->dim;
    h->n_tokens = size / ((gsize) self->dim * 4);
    h->grid_width = h->n_tokens;
    h->grid_height = 1;
  }
  h->payload_size = size;
  h->pts = GST_BUFFER_PTS (buf);
  h->duration = GST_BUFFER_DURATION (buf);
  if (GST_BUFFER_FLAG_IS_SET (buf, GST_BUFFER_FLAG_DISCONT))
    h->flags |= NPU_TOKEN_WIRE_FLAG_DISCONT;
  return h->n_tokens && h->dim && (guint64) h->n_tokens * h->dim * 4 == size;
}

static GstFlowReturn
gst_npu_token_pay_chain (GstPad * pad, GstObject * parent, GstBuffer * buf)
{
  GstNpuTokenPay *self = GST_NPU_TOKEN_PAY (parent);
  guint8 header[NPU_TOKEN_WIRE_HEADER_SIZE];
  NpuTokenWireHeader h;
  GError *err = NULL;
  GstBuffer *out;

  /* Finished data only: the receiver has no fence to wait on */
  if (!gst_npu_buffer_wait (buf, gst_npu_fence_timeout_us (), &err)) {
    if (g_error_matches (err, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED)) {
      GST_DEBUG_OBJECT (self, "dropping cancelled tokens");
      g_error_free (err);
      gst_buffer_unref (buf);
      return GST_FLOW_OK;
    }
    goto not_ready;
  }
  if (!fill_header (self, buf, &h))
    goto bad_buffer;
  npu_token_wire_write_header (&h, header);
  out = gst_buffer_new_memdup (header, sizeof (header));
  gst_buffer_copy_into (out, buf, GST_BUFFER_COPY_TIMESTAMPS |
      GST_BUFFER_COPY_FLAGS, 0, -1);
  /* the rows themselves are not copied: their memory is appended */
  out = gst_buffer_append (out, buf);
  return gst_pad_push (self->srcpad, out);

  /* ERRORS */
not_ready:
  {
    GST_ELEMENT_ERROR (self, STREAM, FAILED, (NULL),
        ("the tokens were not ready: %s", err->message));
    g_error_free (err);
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
bad_buffer:
  {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT, (NULL),
        ("a token buffer of %" G_GSIZE_FORMAT " bytes is not %u x %u float32 "
            "rows (its GstNpuTokensMeta or the caps' dimensions)",
            gst_buffer_get_size (buf), h.n_tokens, h.dim));
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
}

static void
gst_npu_token_pay_class_init (GstNpuTokenPayClass * klass)
{
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "NPU token payloader", "Codec/Payloader/Network",
      "Writes token buffers and their metas (modality, grid, source "
      "timestamps) as a byte stream for nputokendepay", "gst-npu contributors");
}

static void
gst_npu_token_pay_init (GstNpuTokenPay * self)
{
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, gst_npu_token_pay_chain);
  gst_pad_set_event_function (self->sinkpad, gst_npu_token_pay_sink_event);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);
  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
}
