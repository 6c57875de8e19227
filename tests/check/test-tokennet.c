/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: tokens over TCP (nputokenpay, nputokendepay)
 *
 * Held-out frames of the trained models through
 *   videotestsrc ! npuvisiontok ! nputokenpay ! tcpserversink
 *   tcpclientsrc ! nputokendepay ! npullm ! appsink
 * over loopback, two pipelines in this process: the answer must be the
 * one "videotestsrc ! npuvisiontok ! npullm" gives in one pipeline, and
 * the token metas must arrive as they left.  Malformed streams (cut,
 * wrong sizes, wrong dimensions, garbage, non-finite values) pushed into
 * nputokendepay must each fail with their own error message.
 */
#include <gst/check/gstcheck.h>
#include <gst/check/gstharness.h>
#include <string.h>

#include <core/formats/nputokenwire.h>
#include <npu/gstnputokensmeta.h>

#include "npucheck.h"
#include "npuanswercheck.h"

#define TEXT_MODEL NPU_MODELS_DIR "/videotestsrc-text.gguf"
#define VISION_MODEL NPU_MODELS_DIR "/videotestsrc-mmproj.gguf"
#define HELDOUT NPU_MODELS_DIR "/vision-heldout.txt"
#define PROMPT "What do you see?"
#define LLM "npullm name=llm model=" TEXT_MODEL " prompt=\"" PROMPT \
  "\" max-tokens=24 ! appsink name=sink sync=false"

typedef struct
{
  GMutex lock;
  GCond cond;
  gboolean client;
} Gate;

static void
client_added (GstElement * sink, GObject * socket, Gate * g)
{
  g_mutex_lock (&g->lock);
  g->client = TRUE;
  g_cond_broadcast (&g->cond);
  g_mutex_unlock (&g->lock);
}

/* tcpserversink sends only to connected clients: hold the first packet
 * until the receiver is there */
static GstPadProbeReturn
wait_client (GstPad * pad, GstPadProbeInfo * info, Gate * g)
{
  g_mutex_lock (&g->lock);
  while (!g->client)
    g_cond_wait (&g->cond, &g->lock);
  g_mutex_unlock (&g->lock);
  return GST_PAD_PROBE_REMOVE;
}

typedef struct
{
  GMutex lock;
  GString *str;
  guint n;
} Log;

/* The metas as npullm receives them, checked against the sender's */
static GstPadProbeReturn
note_meta (GstPad * pad, GstPadProbeInfo * info, Log * log)
{
  GstBuffer *b = GST_PAD_PROBE_INFO_BUFFER (info);
  GstNpuTokensMeta *m = gst_buffer_get_npu_tokens_meta (b);

  fail_unless (m != NULL, "a token buffer without its GstNpuTokensMeta");
  g_mutex_lock (&log->lock);
  log->n++;
  g_string_append_printf (log->str, "%d %u %u %u %u %" G_GUINT64_FORMAT " %"
      G_GUINT64_FORMAT " %" G_GUINT64_FORMAT " %" G_GSIZE_FORMAT ";",
      m->modality, m->n_tokens, m->dim, m->grid_width, m->grid_height,
      m->source_pts, m->source_duration, GST_BUFFER_PTS (b),
      gst_buffer_get_size (b));
  g_mutex_unlock (&log->lock);
  return GST_PAD_PROBE_OK;
}

static void
probe (GstElement * pipeline, const gchar * name, const gchar * padname,
    GstPadProbeType type, GstPadProbeCallback cb, gpointer data)
{
  GstElement *e = gst_bin_get_by_name (GST_BIN (pipeline), name);
  GstPad *pad = gst_element_get_static_pad (e, padname);

  gst_pad_add_probe (pad, type, cb, data, NULL);
  gst_object_unref (pad);
  gst_object_unref (e);
}

static gchar *
answer_local (const gchar * src, Log * metas)
{
  gchar *desc = g_strdup_printf ("%s ! npuvisiontok name=tok model=%s ! "
      "llm.vision " LLM, src, VISION_MODEL);
  GstElement *pipeline = gst_parse_launch (desc, NULL);
  GstElement *sink;
  gboolean eog;
  gchar *answer;

  fail_unless (pipeline != NULL, "%s", desc);
  probe (pipeline, "tok", "src", GST_PAD_PROBE_TYPE_BUFFER,
      (GstPadProbeCallback) note_meta, metas);
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  answer = npu_answer_collect (pipeline, sink, desc, &eog);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (pipeline);
  g_free (desc);
  return answer;
}

static gchar *
answer_remote (const gchar * src, Log * metas, guint n_packets)
{
  gchar *sdesc = g_strdup_printf ("%s ! npuvisiontok model=%s ! nputokenpay "
      "name=pay ! tcpserversink name=ts host=127.0.0.1 port=0 sync=false",
      src, VISION_MODEL);
  GstElement *server = gst_parse_launch (sdesc, NULL), *ts, *client, *sink;
  Gate g = { 0 };
  GstMessage *msg;
  gboolean done = FALSE;
  guint i;
  gchar *cdesc, *answer;
  gboolean eog;
  gint port = 0;

  fail_unless (server != NULL, "%s", sdesc);
  ts = gst_bin_get_by_name (GST_BIN (server), "ts");
  g_signal_connect (ts, "client-added", G_CALLBACK (client_added), &g);
  probe (server, "pay", "src", GST_PAD_PROBE_TYPE_BUFFER,
      (GstPadProbeCallback) wait_client, &g);
  /* READY binds the port; port=0 lets the kernel choose a free one */
  fail_unless (gst_element_set_state (server, GST_STATE_READY) ==
      GST_STATE_CHANGE_SUCCESS);
  g_object_get (ts, "current-port", &port, NULL);
  fail_unless (port > 0);
  cdesc = g_strdup_printf ("tcpclientsrc host=127.0.0.1 port=%d ! "
      "nputokendepay name=depay ! llm.vision " LLM, port);
  client = gst_parse_launch (cdesc, NULL);
  fail_unless (client != NULL, "%s", cdesc);
  probe (client, "depay", "src", GST_PAD_PROBE_TYPE_BUFFER,
      (GstPadProbeCallback) note_meta, metas);
  sink = gst_bin_get_by_name (GST_BIN (client), "sink");
  gst_element_set_state (client, GST_STATE_PLAYING);
  gst_element_set_state (server, GST_STATE_PLAYING);
  /* tcpserversink keeps its clients past EOS: stopping the server closes
   * the connection, and the client's EOS follows */
  msg = gst_bus_timed_pop_filtered (GST_ELEMENT_BUS (server),
      60 * GST_SECOND, GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS,
      "the sender did not finish: %" GST_PTR_FORMAT, msg);
  gst_message_unref (msg);
  /* ... once every packet is through: its sending thread may still hold
   * the last ones at EOS */
  for (i = 0; i < 6000; i++) {
    g_mutex_lock (&metas->lock);
    done = metas->n >= n_packets;
    g_mutex_unlock (&metas->lock);
    if (done)
      break;
    g_usleep (10000);
  }
  fail_unless (done, "%u of %u packets arrived", metas->n, n_packets);
  gst_element_set_state (server, GST_STATE_NULL);
  answer = npu_answer_collect (client, sink, cdesc, &eog);
  gst_element_set_state (client, GST_STATE_NULL);
  gst_object_unref (sink);
  gst_object_unref (ts);
  gst_object_unref (client);
  gst_object_unref (server);
  g_mutex_clear (&g.lock);
  g_cond_clear (&g.cond);
  g_free (sdesc);
  g_free (cdesc);
  return answer;
}

GST_START_TEST (test_remote_answers_as_local)
{
  GPtrArray *rows = npu_heldout_read (HELDOUT, 4);
  /* under valgrind (for leaks and memory errors, not the answers) every
   * 64th: the same code paths, a quarter of the time */
  guint step = g_getenv ("NPU_UNDER_VALGRIND") ? 64 : 16;
  guint i, n = 0;

  /* every 16th held-out frame: the formats and sizes of the list */
  for (i = 0; i < rows->len; i += step) {
    gchar **f = g_ptr_array_index (rows, i);
    gchar *src = g_strdup_printf ("videotestsrc num-buffers=1 %s ! %s", f[0],
        f[1]);
    Log lm = { {0}, g_string_new (NULL), 0 }, rm = { {0}, g_string_new (NULL),
    0};
    gchar *local = answer_local (src, &lm);
    gchar *remote = answer_remote (src, &rm, lm.n);

    fail_unless (local[0] != '\0', "no answer in one process for %s", src);
    fail_unless_equals_string (remote, local);
    fail_unless_equals_string (rm.str->str, lm.str->str);
    g_free (local);
    g_free (remote);
    g_string_free (lm.str, TRUE);
    g_string_free (rm.str, TRUE);
    g_free (src);
    n++;
  }
  fail_unless (n >= 3);
  g_ptr_array_unref (rows);
}

GST_END_TEST;

/* One good packet: 2 x 3 tokens of width 4 */
static GstBuffer *
good_packet (void)
{
  NpuTokenWireHeader h = { 0 };
  guint8 *data = g_malloc0 (NPU_TOKEN_WIRE_HEADER_SIZE + 6 * 4 * 4);
  guint i;

  h.modality = 0;
  h.n_tokens = 6;
  h.dim = 4;
  h.grid_width = 3;
  h.grid_height = 2;
  h.pts = 1000;
  h.duration = 10;
  h.source_pts = 900;
  h.source_duration = 20;
  h.payload_size = 6 * 4 * 4;
  npu_token_wire_write_header (&h, data);
  for (i = 0; i < 24; i++) {
    gfloat v = i * 0.25f;
    guint32 u;

    memcpy (&u, &v, 4);
    u = GUINT32_TO_LE (u);
    memcpy (data + NPU_TOKEN_WIRE_HEADER_SIZE + 4 * i, &u, 4);
  }
  return gst_buffer_new_wrapped (data, NPU_TOKEN_WIRE_HEADER_SIZE + 96);
}

static void
poke32 (GstBuffer * b, gsize off, guint32 v)
{
  v = GUINT32_TO_LE (v);
  gst_buffer_fill (b, off, &v, 4);
}

/* Pushes @in (and EOS) into nputokendepay; returns the error message it
 * posted, or NULL */
static gchar *
depay_error (GstBuffer * in, guint * n_out)
{
  GstHarness *h = gst_harness_new ("nputokendepay");
  GstBus *bus = gst_bus_new ();
  GstMessage *msg;
  gchar *text = NULL;

  gst_element_set_bus (h->element, bus);
  gst_harness_set_src_caps_str (h, "application/x-npu-tokens");
  gst_harness_push (h, in);
  gst_harness_push_event (h, gst_event_new_eos ());
  *n_out = gst_harness_buffers_received (h);
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  if (msg) {
    GError *err = NULL;
    gchar *dbg = NULL;

    gst_message_parse_error (msg, &err, &dbg);
    text = g_strdup (dbg);
    g_error_free (err);
    g_free (dbg);
    gst_message_unref (msg);
  }
  gst_element_set_bus (h->element, NULL);
  gst_object_unref (bus);
  gst_harness_teardown (h);
  return text;
}

static void
expect_error (GstBuffer * in, const gchar * what)
{
  guint n;
  gchar *msg = depay_error (in, &n);

  fail_unless (msg != NULL, "no error for %s", what);
  fail_unless (strstr (msg, what) != NULL, "'%s' does not say '%s'", msg,
      what);
  fail_unless_equals_int (n, 0);
  g_free (msg);
}

GST_START_TEST (test_good_packet)
{
  GstHarness *h = gst_harness_new ("nputokendepay");
  GstBuffer *in = good_packet (), *out, *a, *b;
  GstNpuTokensMeta *m;
  GstCaps *caps;

  gst_harness_set_src_caps_str (h, "application/x-npu-tokens");
  /* in two halves, the cut inside the header */
  a = gst_buffer_copy_region (in, GST_BUFFER_COPY_MEMORY, 0, 37);
  b = gst_buffer_copy_region (in, GST_BUFFER_COPY_MEMORY, 37,
      gst_buffer_get_size (in) - 37);
  fail_unless_equals_int (gst_harness_push (h, a), GST_FLOW_OK);
  fail_unless_equals_int (gst_harness_buffers_received (h), 0);
  fail_unless_equals_int (gst_harness_push (h, b), GST_FLOW_OK);
  out = gst_harness_pull (h);
  fail_unless (out != NULL);
  fail_unless_equals_uint64 (GST_BUFFER_PTS (out), 1000);
  fail_unless_equals_uint64 (GST_BUFFER_DURATION (out), 10);
  m = gst_buffer_get_npu_tokens_meta (out);
  fail_unless (m != NULL);
  fail_unless_equals_int (m->modality, GST_NPU_MODALITY_VISION);
  fail_unless_equals_int (m->n_tokens, 6);
  fail_unless_equals_int (m->dim, 4);
  fail_unless_equals_int (m->grid_width, 3);
  fail_unless_equals_int (m->grid_height, 2);
  fail_unless_equals_uint64 (m->source_pts, 900);
  fail_unless_equals_uint64 (m->source_duration, 20);
  {
    GstMapInfo map, imap;

    fail_unless (gst_buffer_map (out, &map, GST_MAP_READ));
    fail_unless (gst_buffer_map (in, &imap, GST_MAP_READ));
    fail_unless_equals_int (map.size, 96);
    fail_unless (memcmp (map.data, imap.data + NPU_TOKEN_WIRE_HEADER_SIZE,
            96) == 0);
    gst_buffer_unmap (in, &imap);
    gst_buffer_unmap (out, &map);
  }
  caps = gst_pad_get_current_caps (h->sinkpad);
  fail_unless_equals_string (gst_structure_get_string
      (gst_caps_get_structure (caps, 0), "dimensions"), "4:6");
  gst_caps_unref (caps);
  gst_buffer_unref (out);
  gst_buffer_unref (in);
  gst_harness_teardown (h);
}

GST_END_TEST;

GST_START_TEST (test_bad_streams)
{
  GstBuffer *b;
  gfloat nan = NAN;

  /* cut: inside the payload, inside the header */
  b = good_packet ();
  gst_buffer_resize (b, 0, gst_buffer_get_size (b) - 5);
  expect_error (b, "truncated, it ended inside a packet (91 bytes of its "
      "payload)");
  b = good_packet ();
  gst_buffer_resize (b, 0, 50);
  expect_error (b, "truncated, it ended inside a packet (50 bytes of a "
      "header)");
  /* garbage */
  b = gst_buffer_new_allocate (NULL, 200, NULL);
  gst_buffer_memset (b, 0, 0x5a, 200);
  expect_error (b, "not a token packet: no \"NPUT\" magic");
  /* wrong sizes: the payload size, the grid, the dimensions */
  b = good_packet ();
  poke32 (b, 64, 95);
  expect_error (b, "payload size 95 is not 6 x 4 float32 values");
  b = good_packet ();
  poke32 (b, 20, 4);
  expect_error (b, "grid 4 x 2 is not its 6 tokens");
  b = good_packet ();
  poke32 (b, 16, 0);
  expect_error (b, "no rows or no width: 6 x 0");
  b = good_packet ();
  poke32 (b, 12, 0x40000000);
  poke32 (b, 16, 0x40000000);
  expect_error (b, "larger than the 256 MiB limit");
  b = good_packet ();
  poke32 (b, 8, 7);
  expect_error (b, "unknown modality 7");
  b = good_packet ();
  poke32 (b, 4, 2);
  expect_error (b, "token packet version 2");
  /* a NaN in row 1, column 2 */
  b = good_packet ();
  gst_buffer_fill (b, NPU_TOKEN_WIRE_HEADER_SIZE + 4 * 6, &nan, 4);
  expect_error (b, "non-finite value at row 1, column 2");
}

GST_END_TEST;

static Suite *
tokennet_suite (void)
{
  Suite *s = suite_create ("nputokennet");
  TCase *tc = tcase_create ("net");

  npu_check_load_plugins ();
  suite_add_tcase (s, tc);
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, test_good_packet);
  tcase_add_test (tc, test_bad_streams);
  tcase_add_test (tc, test_remote_answers_as_local);
  return s;
}

GST_CHECK_MAIN (tokennet);
