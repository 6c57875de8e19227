/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GstNpuEncoderElement, the base of the encoder elements */

/**
 * SECTION:gstnpuencoderelement
 * @title: GstNpuEncoderElement
 * @short_description: base class of the elements that turn media into
 *   tokens
 *
 * npuvisiontok and npuaudiotok each read media, cut it into units (a
 * frame, a chunk of audio) and encode each unit as one task on a compute
 * queue, pushing the token buffer at once with the task's fence.  What
 * that takes beyond the media and the model is the same for both, and
 * lives here:
 *
 * - the in-flight window: at most `max-inflight` units are being encoded;
 *   past that the `policy` blocks, drops the new unit or cancels the
 *   oldest one not yet running (gst_npu_encoder_element_take_slot()), and
 *   each drop is counted and posted as a QoS message;
 * - the tasks: gst_npu_encoder_element_push_task() submits a unit's job,
 *   attaches its fence to the token buffer and pushes it; the time of the
 *   last encode answers the latency query;
 * - drain (EOS waits for every task, so nothing handed downstream is
 *   cancelled by a shutdown at EOS), flush (FLUSH_START cancels the
 *   waiting tasks), start and stop;
 * - the caps protocol: new caps mid-stream are handed to the subclass
 *   only once the model is loaded, what was collected is drained and no
 *   task is in flight, because the tasks read the scratch and plans the
 *   subclass is about to replace;
 * - the `weights` request pad (#GstNpuWeightsInput) and the choice
 *   between it and the `model` property.
 *
 * The subclass installs the properties the base keeps
 * (#GstNpuEncoderElementProperty) itself, so that each element documents
 * them in its own words and under its own type, and keeps its caps, its
 * preprocess or front end, and its model.
 *
 * Since: 0.1.0
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuencoderelement.h"
#include "gstnpuallocator.h"
#include "gstnpufencemeta.h"
#include "gstnpuelementutils.h"

GST_DEBUG_CATEGORY_STATIC (gst_npu_encoder_element_debug);
#define GST_CAT_DEFAULT gst_npu_encoder_element_debug

#define DEFAULT_MAX_INFLIGHT GST_NPU_ENCODER_ELEMENT_DEFAULT_MAX_INFLIGHT
#define DEFAULT_POLICY GST_NPU_ENCODER_ELEMENT_DEFAULT_POLICY

static GstStaticPadTemplate weights_template =
GST_STATIC_PAD_TEMPLATE ("weights", GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS ("other/npu-weights"));
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("other/tensors, format=(string)static, "
        "num_tensors=(int)1, types=(string)float32"));

struct _GstNpuEncoderElementPrivate
{
  /* properties and counters, under the object lock */
  gchar *model;
  gchar *device;
  guint n_threads;
  guint max_inflight;
  GstNpuEncoderPolicy policy;
  guint64 processed, dropped;
  gint64 last_encode_us;
  gdouble pj_per_bit;
  NpuBytes bytes_sum;           /* the units' bytes since start */
  guint64 units_counted;        /* the units they are of */

  /* the window, the model and the caps, under lock */
  GMutex lock;
  GCond cond;
  gboolean flushing;
  gboolean have_model;
  guint inflight;
  GQueue pending;               /* NpuFence of units submitted, oldest first */

  /* streaming thread */
  gboolean negotiated;
  /* caps the subclass refused: upstream sends them again before each
   * buffer, and each refusal would post the same error again (a pipeline
   * then gets one per buffer, and gst-launch-1.0 was seen to hang among
   * them): refused once, they are refused quietly after */
  GstCaps *refused_caps;

  GstNpuWeightsInput *weights_in;
};

static GstElementClass *parent_class = NULL;
static gint private_offset = 0;

static void gst_npu_encoder_element_class_init (gpointer g_class,
    gpointer data);
static void gst_npu_encoder_element_init (GstNpuEncoderElement * self,
    gpointer g_class);
static void gst_npu_encoder_element_finalize (GObject * object);
static GstStateChangeReturn gst_npu_encoder_element_change_state (GstElement *
    element, GstStateChange transition);
static GstPad *gst_npu_encoder_element_request_new_pad (GstElement * element,
    GstPadTemplate * templ, const gchar * name, const GstCaps * caps);
static void gst_npu_encoder_element_release_pad (GstElement * element,
    GstPad * pad);
static GstFlowReturn gst_npu_encoder_element_chain (GstPad * pad,
    GstObject * parent, GstBuffer * buf);
static gboolean gst_npu_encoder_element_sink_event (GstPad * pad,
    GstObject * parent, GstEvent * event);
static gboolean gst_npu_encoder_element_sink_query (GstPad * pad,
    GstObject * parent, GstQuery * query);
static gboolean gst_npu_encoder_element_src_query (GstPad * pad,
    GstObject * parent, GstQuery * query);
static gboolean load_model (GstElement * element, const gchar * path,
    GstNpuWeights * weights);

/* Registered by hand, as GstBaseTransform is: the instance init needs the
 * class of the instance being made (the subclass's, with its pad
 * templates), which G_DEFINE_TYPE's init does not get. */
GType
gst_npu_encoder_element_get_type (void)
{
  static gsize type = 0;

  if (g_once_init_enter (&type)) {
    static const GTypeInfo info = {
      sizeof (GstNpuEncoderElementClass), NULL, NULL,
      gst_npu_encoder_element_class_init, NULL, NULL,
      sizeof (GstNpuEncoderElement), 0,
      (GInstanceInitFunc) gst_npu_encoder_element_init, NULL
    };
    GType t = g_type_register_static (GST_TYPE_ELEMENT,
        "GstNpuEncoderElement", &info, G_TYPE_FLAG_ABSTRACT);

    private_offset = g_type_add_instance_private (t,
        sizeof (GstNpuEncoderElementPrivate));
    GST_DEBUG_CATEGORY_INIT (gst_npu_encoder_element_debug,
        "npuencoderelement", 0, "base of the encoder elements");
    g_once_init_leave (&type, t);
  }
  return type;
}

static void
gst_npu_encoder_element_class_init (gpointer g_class, gpointer data)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (g_class);
  GstElementClass *element_class = GST_ELEMENT_CLASS (g_class);

  parent_class = g_type_class_peek_parent (g_class);
  g_type_class_adjust_private_offset (g_class, &private_offset);
  gobject_class->finalize = gst_npu_encoder_element_finalize;
  element_class->change_state =
      GST_DEBUG_FUNCPTR (gst_npu_encoder_element_change_state);
  element_class->request_new_pad =
      GST_DEBUG_FUNCPTR (gst_npu_encoder_element_request_new_pad);
  element_class->release_pad =
      GST_DEBUG_FUNCPTR (gst_npu_encoder_element_release_pad);
  gst_type_mark_as_plugin_api (GST_TYPE_NPU_ENCODER_ELEMENT, 0);
}

static void
gst_npu_encoder_element_init (GstNpuEncoderElement * self, gpointer g_class)
{
  GstElementClass *element_class = GST_ELEMENT_CLASS (g_class);
  GstNpuEncoderElementPrivate *priv = G_STRUCT_MEMBER_P (self, private_offset);
  GstPadTemplate *templ;

  self->priv = priv;
  /* the subclass's templates (gst_npu_encoder_element_class_add_pad_
   * templates()), from the class of the instance being made */
  templ = gst_element_class_get_pad_template (element_class, "sink");
  g_return_if_fail (templ != NULL);
  self->sinkpad = gst_pad_new_from_template (templ, "sink");
  gst_pad_set_chain_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_npu_encoder_element_chain));
  gst_pad_set_event_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_npu_encoder_element_sink_event));
  gst_pad_set_query_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_npu_encoder_element_sink_query));
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  templ = gst_element_class_get_pad_template (element_class, "src");
  self->srcpad = gst_pad_new_from_template (templ, "src");
  gst_pad_set_query_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_npu_encoder_element_src_query));
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
  priv->pj_per_bit = NPU_BYTES_DEFAULT_PJ_PER_BIT;

  priv->max_inflight = DEFAULT_MAX_INFLIGHT;
  priv->policy = DEFAULT_POLICY;
  priv->weights_in = gst_npu_weights_input_new (GST_ELEMENT (self), load_model);
  g_mutex_init (&priv->lock);
  g_cond_init (&priv->cond);
  g_queue_init (&priv->pending);
}

static void
gst_npu_encoder_element_finalize (GObject * object)
{
  GstNpuEncoderElementPrivate *priv = GST_NPU_ENCODER_ELEMENT (object)->priv;

  g_free (priv->model);
  g_free (priv->device);
  gst_caps_replace (&priv->refused_caps, NULL);
  gst_npu_weights_input_free (priv->weights_in);
  g_mutex_clear (&priv->lock);
  g_cond_clear (&priv->cond);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

/**
 * gst_npu_encoder_element_class_add_pad_templates:
 * @klass: the subclass's class, in its class_init
 * @sink_caps: (transfer none): what the sink pad takes
 *
 * Adds the pad templates every encoder has, in the order gst-inspect-1.0
 * lists them: `sink` (always, @sink_caps), `src` (always, one float32
 * tensor in NNStreamer's `other/tensors`) and `weights` (request,
 * `other/npu-weights` from mxfp4weights).
 */
void
gst_npu_encoder_element_class_add_pad_templates (GstNpuEncoderElementClass *
    klass, GstCaps * sink_caps)
{
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);

  gst_element_class_add_pad_template (element_class,
      gst_pad_template_new ("sink", GST_PAD_SINK, GST_PAD_ALWAYS, sink_caps));
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_add_static_pad_template (element_class, &weights_template);
}

/* ------------------------------------------------------------------------
 * Properties
 */
/**
 * gst_npu_encoder_element_set_property:
 * @self: the element
 * @prop_id: the id the subclass installed the property under
 * @value: the new value
 *
 * Sets one of the properties the base class keeps
 * (#GstNpuEncoderElementProperty), for the subclass's set_property.
 *
 * Returns: %TRUE if @prop_id is one of them
 */
gboolean
gst_npu_encoder_element_set_property (GstNpuEncoderElement * self,
    guint prop_id, const GValue * value)
{
  GstNpuEncoderElementPrivate *priv = self->priv;
  gboolean ours = TRUE;

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case GST_NPU_ENCODER_ELEMENT_PROP_MODEL:
      g_free (priv->model);
      priv->model = g_value_dup_string (value);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_N_THREADS:
      priv->n_threads = g_value_get_uint (value);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_MAX_INFLIGHT:
      priv->max_inflight = g_value_get_uint (value);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_POLICY:
      priv->policy = g_value_get_enum (value);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_DEVICE:
      g_free (priv->device);
      priv->device = g_value_dup_string (value);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_PJ_PER_BIT:
      priv->pj_per_bit = g_value_get_double (value);
      break;
    default:
      ours = FALSE;
      break;
  }
  GST_OBJECT_UNLOCK (self);
  return ours;
}

/**
 * gst_npu_encoder_element_get_property:
 * @self: the element
 * @prop_id: the id the subclass installed the property under
 * @value: where the value goes
 *
 * Reads one of the properties the base class keeps
 * (#GstNpuEncoderElementProperty), for the subclass's get_property.
 *
 * Returns: %TRUE if @prop_id is one of them
 */
gboolean
gst_npu_encoder_element_get_property (GstNpuEncoderElement * self,
    guint prop_id, GValue * value)
{
  GstNpuEncoderElementPrivate *priv = self->priv;
  gboolean ours = TRUE;

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case GST_NPU_ENCODER_ELEMENT_PROP_MODEL:
      g_value_set_string (value, priv->model);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_N_THREADS:
      g_value_set_uint (value, priv->n_threads);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_DEVICE:
      g_value_set_string (value, priv->device ? priv->device : "cpu");
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_MAX_INFLIGHT:
      g_value_set_uint (value, priv->max_inflight);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_POLICY:
      g_value_set_enum (value, priv->policy);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_PROCESSED:
      g_value_set_uint64 (value, priv->processed);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_DROPPED:
      g_value_set_uint64 (value, priv->dropped);
      break;
    case GST_NPU_ENCODER_ELEMENT_PROP_PJ_PER_BIT:
      g_value_set_double (value, priv->pj_per_bit);
      break;
    default:
      ours = FALSE;
      break;
  }
  GST_OBJECT_UNLOCK (self);
  return ours;
}

/**
 * gst_npu_encoder_element_get_max_inflight:
 * @self: the element
 *
 * Returns: the units that may be encoded at once (`max-inflight`)
 */
guint
gst_npu_encoder_element_get_max_inflight (GstNpuEncoderElement * self)
{
  guint max_inflight;

  GST_OBJECT_LOCK (self);
  max_inflight = self->priv->max_inflight;
  GST_OBJECT_UNLOCK (self);
  return max_inflight;
}

/* ------------------------------------------------------------------------
 * The model
 */
/* GstNpuWeightsInput's load function: the subclass loads, and whoever
 * waits for the model (the caps event) is woken */
static gboolean
load_model (GstElement * element, const gchar * path, GstNpuWeights * weights)
{
  GstNpuEncoderElement *self = GST_NPU_ENCODER_ELEMENT (element);
  GstNpuEncoderElementPrivate *priv = self->priv;

  if (!GST_NPU_ENCODER_ELEMENT_GET_CLASS (self)->load_model (self, path,
          weights))
    return FALSE;
  g_mutex_lock (&priv->lock);
  priv->have_model = TRUE;
  g_cond_broadcast (&priv->cond);
  g_mutex_unlock (&priv->lock);
  return TRUE;
}

/* Waits until the model is loaded (weights pad); FALSE when flushing. */
static gboolean
wait_for_model (GstNpuEncoderElement * self)
{
  GstNpuEncoderElementPrivate *priv = self->priv;
  gboolean have_model;

  g_mutex_lock (&priv->lock);
  while (!priv->have_model && !priv->flushing)
    g_cond_wait (&priv->cond, &priv->lock);
  have_model = priv->have_model;
  g_mutex_unlock (&priv->lock);
  return have_model;
}

/* ------------------------------------------------------------------------
 * The window
 */
static void
post_qos_drop (GstNpuEncoderElement * self, GstClockTime ts, GstClockTime dur)
{
  GstNpuEncoderElementPrivate *priv = self->priv;
  const GstSegment *segment;
  GstEvent *ev = gst_pad_get_sticky_event (self->sinkpad, GST_EVENT_SEGMENT,
      0);
  GstClockTime running = GST_CLOCK_TIME_NONE, stream = GST_CLOCK_TIME_NONE;
  GstMessage *msg;

  if (ev) {
    gst_event_parse_segment (ev, &segment);
    running = gst_segment_to_running_time (segment, GST_FORMAT_TIME, ts);
    stream = gst_segment_to_stream_time (segment, GST_FORMAT_TIME, ts);
    gst_event_unref (ev);
  }
  msg = gst_message_new_qos (GST_OBJECT (self), FALSE, running, stream, ts,
      dur);
  GST_OBJECT_LOCK (self);
  priv->dropped++;
  gst_message_set_qos_stats (msg, GST_FORMAT_BUFFERS, priv->processed,
      priv->dropped);
  GST_OBJECT_UNLOCK (self);
  gst_element_post_message (GST_ELEMENT (self), msg);
}

/**
 * gst_npu_encoder_element_take_slot:
 * @self: the element
 * @pts: the unit's timestamp, for the QoS message if it is dropped
 * @duration: the unit's duration, likewise
 * @dropped: (out): set if the unit is dropped (drop-newest)
 *
 * Takes a slot of the in-flight window for a unit about to be encoded,
 * by the `policy`: waits for one (block, and drop-oldest when nothing
 * could be cancelled), drops the unit (drop-newest: GST_FLOW_OK and
 * *@dropped set), or cancels the oldest unit not yet running (drop-oldest;
 * its QoS message has no timestamps: the cancelled unit's are not kept).
 * Each drop is counted and posted as QoS.  With GST_FLOW_OK and
 * *@dropped unset the caller holds a slot, handed back by the destroy of
 * gst_npu_encoder_element_push_task() or by
 * gst_npu_encoder_element_release_slot().  The caller keeps its unit in
 * every case.
 *
 * Returns: GST_FLOW_OK, or GST_FLOW_FLUSHING when the element flushes
 */
GstFlowReturn
gst_npu_encoder_element_take_slot (GstNpuEncoderElement * self,
    GstClockTime pts, GstClockTime duration, gboolean * dropped)
{
  GstNpuEncoderElementPrivate *priv = self->priv;
  GstNpuEncoderPolicy policy;
  guint max_inflight;

  *dropped = FALSE;
  GST_OBJECT_LOCK (self);
  max_inflight = priv->max_inflight;
  policy = priv->policy;
  GST_OBJECT_UNLOCK (self);

  g_mutex_lock (&priv->lock);
  if (priv->inflight >= max_inflight &&
      policy == GST_NPU_ENCODER_POLICY_DROP_NEWEST) {
    g_mutex_unlock (&priv->lock);
    post_qos_drop (self, pts, duration);
    *dropped = TRUE;
    return GST_FLOW_OK;
  }
  if (priv->inflight >= max_inflight &&
      policy == GST_NPU_ENCODER_POLICY_DROP_OLDEST &&
      gst_npu_element_cancel_oldest_locked (&priv->pending, &priv->lock,
          self->queue)) {
    g_mutex_unlock (&priv->lock);
    post_qos_drop (self, GST_CLOCK_TIME_NONE, GST_CLOCK_TIME_NONE);
    g_mutex_lock (&priv->lock);
  }
  while (priv->inflight >= max_inflight && !priv->flushing)
    g_cond_wait (&priv->cond, &priv->lock);
  if (priv->flushing) {
    g_mutex_unlock (&priv->lock);
    return GST_FLOW_FLUSHING;
  }
  priv->inflight++;
  g_mutex_unlock (&priv->lock);
  return GST_FLOW_OK;
}

/**
 * gst_npu_encoder_element_release_slot:
 * @self: the element
 *
 * Hands back a slot taken by gst_npu_encoder_element_take_slot() for a
 * unit that was not submitted after all (its output could not be made).
 */
void
gst_npu_encoder_element_release_slot (GstNpuEncoderElement * self)
{
  GstNpuEncoderElementPrivate *priv = self->priv;

  g_mutex_lock (&priv->lock);
  priv->inflight--;
  g_cond_broadcast (&priv->cond);
  g_mutex_unlock (&priv->lock);
}

/* Waits until no unit is being encoded. */
static void
wait_idle (GstNpuEncoderElement * self, gboolean unless_flushing)
{
  GstNpuEncoderElementPrivate *priv = self->priv;

  g_mutex_lock (&priv->lock);
  while (priv->inflight > 0 && !(unless_flushing && priv->flushing))
    g_cond_wait (&priv->cond, &priv->lock);
  g_mutex_unlock (&priv->lock);
}

/* ------------------------------------------------------------------------
 * Tasks
 */
typedef struct
{
  GstNpuEncoderElement *self;
  NpuTaskFunc func;
  gpointer job;
  GDestroyNotify destroy;
} Task;

static gboolean
run_task (NpuTask * npu_task, gpointer data, GError ** error)
{
  Task *task = data;
  GstNpuEncoderElementPrivate *priv = task->self->priv;
  gint64 t0 = g_get_monotonic_time ();
  gboolean ok;

  ok = task->func (npu_task, task->job, error);
  /* under the lock: the latency query reads it from another thread */
  GST_OBJECT_LOCK (task->self);
  priv->last_encode_us = g_get_monotonic_time () - t0;
  priv->processed++;
  GST_OBJECT_UNLOCK (task->self);
  return ok;
}

/**
 * gst_npu_encoder_element_report_bytes:
 * @self: the element
 * @task: (nullable): the unit's task, which carries the bytes into the
 *   task's trace event (npu_task_report_bytes())
 * @message_name: the stats message's name (`npuvisiontok-stats`)
 * @pts: the unit's timestamp
 * @bytes: what the core counted for one unit (a frame, a chunk): its
 *   preprocess and its encode
 *
 * Adds @bytes to the running sum and posts an element message
 * @message_name with `pts`, `units` (the units counted since the element
 * started), `pj-per-bit`, the unit's `bytes-KIND-read` and
 * `bytes-KIND-written` for every kind, `bytes-total` and
 * `energy-estimate-uj` (gst_npu_element_set_bytes_fields()), and the same
 * for the running sum with the prefix `sum-`.  Called from the unit's
 * task, on a worker: posting is thread-safe.
 */
void
gst_npu_encoder_element_report_bytes (GstNpuEncoderElement * self,
    NpuTask * task, const gchar * message_name, GstClockTime pts,
    const NpuBytes * bytes)
{
  GstNpuEncoderElementPrivate *priv = self->priv;
  GstStructure *s;
  NpuBytes sum;
  guint64 units;
  gdouble pj;

  if (task)
    npu_task_report_bytes (task, bytes);
  GST_OBJECT_LOCK (self);
  npu_bytes_add (&priv->bytes_sum, bytes);
  sum = priv->bytes_sum;
  units = ++priv->units_counted;
  pj = priv->pj_per_bit;
  GST_OBJECT_UNLOCK (self);

  s = gst_structure_new (message_name, "pts", G_TYPE_UINT64, (guint64) pts,
      "units", G_TYPE_UINT64, units, "pj-per-bit", G_TYPE_DOUBLE, pj, NULL);
  gst_npu_element_set_bytes_fields (s, "", bytes, pj);
  gst_npu_element_set_bytes_fields (s, "sum-", &sum, pj);
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self), s));
}

/* Run, cancelled or flushed: the job goes, then its slot. */
static void
task_free (gpointer data)
{
  Task *task = data;

  if (task->destroy)
    task->destroy (task->job);
  gst_npu_encoder_element_release_slot (task->self);
  g_free (task);
}

/**
 * gst_npu_encoder_element_push_task:
 * @self: the element
 * @outbuf: (transfer full): the unit's token buffer, its memory to be
 *   written by @func
 * @func: encodes the unit; tasks of the element run one at a time
 * @job: what @func reads and writes
 * @destroy: (nullable): frees @job once @func has run or the task was
 *   cancelled
 *
 * Submits the unit's encode in the slot taken by
 * gst_npu_encoder_element_take_slot(), attaches its fence to @outbuf
 * (which whoever maps it waits for) and pushes @outbuf downstream at once.
 * The slot is handed back after @destroy.
 *
 * Returns: what the push returned
 */
GstFlowReturn
gst_npu_encoder_element_push_task (GstNpuEncoderElement * self,
    GstBuffer * outbuf, NpuTaskFunc func, gpointer job, GDestroyNotify destroy)
{
  GstNpuEncoderElementPrivate *priv = self->priv;
  Task *task = g_new (Task, 1);
  NpuFence *fence;

  task->self = self;
  task->func = func;
  task->job = job;
  task->destroy = destroy;
  /* the unit's PTS ties the task to it in a timeline (npu-timeline) */
  npu_queue_set_tag (self->queue, GST_BUFFER_PTS (outbuf));
  fence = npu_queue_submit_labelled (self->queue, "encode", run_task, task,
      task_free, NULL, 0);
  gst_buffer_add_npu_fence_meta (outbuf, fence);
  g_mutex_lock (&priv->lock);
  gst_npu_element_push_fence_locked (&priv->pending, fence);
  g_mutex_unlock (&priv->lock);
  return gst_pad_push (self->srcpad, outbuf);
}

/* ------------------------------------------------------------------------
 * Streaming
 */
static GstFlowReturn
gst_npu_encoder_element_chain (GstPad * pad, GstObject * parent,
    GstBuffer * buf)
{
  GstNpuEncoderElement *self = GST_NPU_ENCODER_ELEMENT (parent);

  if (!self->priv->negotiated)
    goto not_negotiated;
  return GST_NPU_ENCODER_ELEMENT_GET_CLASS (self)->handle_buffer (self, buf);

  /* ERRORS */
not_negotiated:
  {
    gst_buffer_unref (buf);
    if (self->priv->flushing)
      return GST_FLOW_FLUSHING;
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL),
        ("a buffer arrived before caps"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
}

static void
set_flushing (GstNpuEncoderElement * self, gboolean flushing)
{
  GstNpuEncoderElementPrivate *priv = self->priv;

  g_mutex_lock (&priv->lock);
  priv->flushing = flushing;
  g_cond_broadcast (&priv->cond);
  g_mutex_unlock (&priv->lock);
}

/* New caps, mid-stream or not.  The tasks in flight were submitted against
 * what the subclass is about to replace (the preprocess plan, the scratch
 * the encoder reads, the front end), so they end before it does: the
 * subclass's set_caps runs with none in flight.  Flushing or not:
 * FLUSH_START cancels the waiting tasks but sets the flag before its
 * npu_queue_flush() has ended the running one, so the wait is short then,
 * and a task never outlives what it reads. */
static gboolean
set_caps (GstNpuEncoderElement * self, GstCaps * caps)
{
  GstNpuEncoderElementClass *klass = GST_NPU_ENCODER_ELEMENT_GET_CLASS (self);
  GstNpuEncoderElementPrivate *priv = self->priv;

  if (!wait_for_model (self))
    return FALSE;
  if (priv->refused_caps && gst_caps_is_equal (caps, priv->refused_caps)) {
    GST_DEBUG_OBJECT (self, "caps %" GST_PTR_FORMAT " refused already", caps);
    return FALSE;
  }
  if (priv->negotiated) {
    /* what was collected under the old caps is a unit of its own */
    if (klass->drain)
      klass->drain (self);
    wait_idle (self, FALSE);
  }
  /* until the subclass has taken the caps whole, no buffer may use what
   * it has half replaced */
  priv->negotiated = FALSE;
  priv->negotiated = klass->set_caps (self, caps);
  gst_caps_replace (&priv->refused_caps, priv->negotiated ? NULL : caps);
  return priv->negotiated;
}

static gboolean
gst_npu_encoder_element_sink_event (GstPad * pad, GstObject * parent,
    GstEvent * event)
{
  GstNpuEncoderElement *self = GST_NPU_ENCODER_ELEMENT (parent);
  GstNpuEncoderElementClass *klass = GST_NPU_ENCODER_ELEMENT_GET_CLASS (self);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CAPS:{
      GstCaps *caps;
      gboolean ok;

      gst_event_parse_caps (event, &caps);
      ok = set_caps (self, caps);
      gst_event_unref (event);
      return ok;
    }
    case GST_EVENT_FLUSH_START:
      set_flushing (self, TRUE);
      if (self->queue)
        npu_queue_flush (self->queue);
      break;
    case GST_EVENT_FLUSH_STOP:
      if (klass->reset)
        klass->reset (self);
      set_flushing (self, FALSE);
      break;
    case GST_EVENT_EOS:
      /* Drain: the tokens pushed so far are all there before EOS, so a
       * pipeline shut down at EOS does not cancel work already handed
       * downstream. */
      if (self->priv->negotiated && klass->drain)
        klass->drain (self);
      if (klass->reset)
        klass->reset (self);
      wait_idle (self, TRUE);
      break;
    default:
      break;
  }
  return gst_pad_event_default (pad, parent, event);
}

static gboolean
gst_npu_encoder_element_sink_query (GstPad * pad, GstObject * parent,
    GstQuery * query)
{
  GstNpuEncoderElement *self = GST_NPU_ENCODER_ELEMENT (parent);
  GstNpuEncoderElementClass *klass = GST_NPU_ENCODER_ELEMENT_GET_CLASS (self);

  if (klass->sink_query)
    return klass->sink_query (self, query);
  return gst_pad_query_default (pad, parent, query);
}

static gboolean
gst_npu_encoder_element_src_query (GstPad * pad, GstObject * parent,
    GstQuery * query)
{
  GstNpuEncoderElement *self = GST_NPU_ENCODER_ELEMENT (parent);
  GstNpuEncoderElementClass *klass = GST_NPU_ENCODER_ELEMENT_GET_CLASS (self);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_LATENCY:{
      gboolean live;
      GstClockTime min, max, ours;

      if (!gst_pad_peer_query (self->sinkpad, query))
        return FALSE;
      gst_query_parse_latency (query, &live, &min, &max);
      GST_OBJECT_LOCK (self);
      /* Tokens are pushed at once, but only there when the encode is
       * done; a consumer that waits sees up to max-inflight encodes. */
      ours = self->priv->last_encode_us * GST_USECOND *
          self->priv->max_inflight;
      GST_OBJECT_UNLOCK (self);
      if (klass->get_latency)
        ours += klass->get_latency (self);
      min += ours;
      if (max != GST_CLOCK_TIME_NONE)
        max += ours;
      gst_query_set_latency (query, live, min, max);
      return TRUE;
    }
    default:
      return gst_pad_query_default (pad, parent, query);
  }
}

static GstPad *
gst_npu_encoder_element_request_new_pad (GstElement * element,
    GstPadTemplate * templ, const gchar * name, const GstCaps * caps)
{
  GstNpuEncoderElement *self = GST_NPU_ENCODER_ELEMENT (element);

  return gst_npu_weights_input_request_pad (self->priv->weights_in, templ);
}

static void
gst_npu_encoder_element_release_pad (GstElement * element, GstPad * pad)
{
  GstNpuEncoderElement *self = GST_NPU_ENCODER_ELEMENT (element);

  gst_npu_weights_input_release_pad (self->priv->weights_in, pad);
}

/* ------------------------------------------------------------------------
 * States
 */
/* The `device` the encoder runs on: a queue of it where it is not the CPU
 * (whose queue the element has anyway); an element error when it cannot
 * be opened */
static gboolean
open_engine (GstNpuEncoderElement * self, const gchar * name, guint n_threads)
{
  GError *error = NULL;
  NpuDevice *dev = npu_device_open (name ? name : "cpu", n_threads, &error);

  if (!dev) {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("Cannot run on device \"%s\": %s", name, error->message),
        ("npu_device_open: %s", error->message));
    g_error_free (error);
    return FALSE;
  }
  if (!g_str_equal (npu_device_get_kind (dev), "cpu")) {
    self->engine_queue = npu_queue_new (dev, GST_OBJECT_NAME (self));
    GST_INFO_OBJECT (self, "encoding on %s", npu_device_get_name (dev));
  }
  npu_device_unref (dev);
  return TRUE;
}

static gboolean
start (GstNpuEncoderElement * self)
{
  GstNpuEncoderElementClass *klass = GST_NPU_ENCODER_ELEMENT_GET_CLASS (self);
  GstNpuEncoderElementPrivate *priv = self->priv;
  gchar *model, *device;
  guint n_threads;
  gboolean ok;

  GST_OBJECT_LOCK (self);
  model = g_strdup (priv->model);
  device = g_strdup (priv->device);
  n_threads = priv->n_threads;
  priv->processed = priv->dropped = 0;
  priv->last_encode_us = 0;
  npu_bytes_clear (&priv->bytes_sum);
  priv->units_counted = 0;
  GST_OBJECT_UNLOCK (self);

  priv->flushing = FALSE;
  priv->inflight = 0;
  priv->have_model = FALSE;
  priv->negotiated = FALSE;
  self->importer = gst_npu_importer_new (0);
  self->allocator = gst_npu_allocator_get_default ();
  self->queue = gst_npu_element_new_queue (GST_ELEMENT (self), n_threads);
  ok = open_engine (self, device, n_threads);
  g_free (device);
  if (!ok) {
    g_free (model);
    return FALSE;
  }
  if (klass->start)
    klass->start (self);

  GST_DEBUG_OBJECT (self, "starting, model %s", model ? model :
      "from the weights pad");
  ok = gst_npu_weights_input_start (priv->weights_in, model);
  g_free (model);
  return ok;
}

static void
stop (GstNpuEncoderElement * self)
{
  GstNpuEncoderElementClass *klass = GST_NPU_ENCODER_ELEMENT_GET_CLASS (self);
  GstNpuEncoderElementPrivate *priv = self->priv;

  set_flushing (self, TRUE);
  /* every task ends (run or cancelled) before anything it reads goes */
  if (self->queue)
    npu_queue_free (self->queue);
  self->queue = NULL;
  /* after the CPU queue: its tasks wait for the engine's */
  if (self->engine_queue)
    npu_queue_free (self->engine_queue);
  self->engine_queue = NULL;
  if (klass->reset)
    klass->reset (self);
  klass->unload_model (self);
  g_mutex_lock (&priv->lock);
  priv->have_model = FALSE;
  g_mutex_unlock (&priv->lock);
  /* after the model: its tensors may live in the weights pad's buffers */
  gst_npu_weights_input_stop (priv->weights_in);
  g_queue_clear_full (&priv->pending, (GDestroyNotify) npu_fence_unref);
  g_clear_pointer (&self->importer, gst_npu_importer_free);
  gst_clear_object (&self->allocator);
  priv->negotiated = FALSE;
  gst_caps_replace (&priv->refused_caps, NULL);
}

static GstStateChangeReturn
gst_npu_encoder_element_change_state (GstElement * element,
    GstStateChange transition)
{
  GstNpuEncoderElement *self = GST_NPU_ENCODER_ELEMENT (element);
  GstStateChangeReturn ret;

  switch (transition) {
    case GST_STATE_CHANGE_READY_TO_PAUSED:
      if (!start (self)) {
        stop (self);
        return GST_STATE_CHANGE_FAILURE;
      }
      break;
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      set_flushing (self, TRUE);
      if (self->queue)
        npu_queue_flush (self->queue);
      break;
    default:
      break;
  }

  ret = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);

  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY)
    stop (self);
  return ret;
}
