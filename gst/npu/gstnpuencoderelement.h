/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: GstNpuEncoderElement, the base of the encoder elements */
#ifndef __GST_NPU_ENCODER_ELEMENT_H__
#define __GST_NPU_ENCODER_ELEMENT_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>
#include <npu/gstnpuimport.h>
#include <npu/gstnpuweights.h>
#include <core/device/npubackend.h>
#include <core/device/npubytes.h>

G_BEGIN_DECLS

#define GST_TYPE_NPU_ENCODER_ELEMENT (gst_npu_encoder_element_get_type ())
#define GST_NPU_ENCODER_ELEMENT(obj) (G_TYPE_CHECK_INSTANCE_CAST ((obj), \
    GST_TYPE_NPU_ENCODER_ELEMENT, GstNpuEncoderElement))
#define GST_NPU_ENCODER_ELEMENT_CLASS(klass) (G_TYPE_CHECK_CLASS_CAST \
    ((klass), GST_TYPE_NPU_ENCODER_ELEMENT, GstNpuEncoderElementClass))
#define GST_NPU_ENCODER_ELEMENT_GET_CLASS(obj) (G_TYPE_INSTANCE_GET_CLASS \
    ((obj), GST_TYPE_NPU_ENCODER_ELEMENT, GstNpuEncoderElementClass))
#define GST_IS_NPU_ENCODER_ELEMENT(obj) (G_TYPE_CHECK_INSTANCE_TYPE ((obj), \
    GST_TYPE_NPU_ENCODER_ELEMENT))

typedef struct _GstNpuEncoderElement GstNpuEncoderElement;
typedef struct _GstNpuEncoderElementClass GstNpuEncoderElementClass;
typedef struct _GstNpuEncoderElementPrivate GstNpuEncoderElementPrivate;

/**
 * GstNpuEncoderPolicy:
 * @GST_NPU_ENCODER_POLICY_BLOCK: wait for a slot (back-pressure upstream)
 * @GST_NPU_ENCODER_POLICY_DROP_NEWEST: drop the unit about to be encoded
 * @GST_NPU_ENCODER_POLICY_DROP_OLDEST: cancel the oldest unit not yet being
 *   encoded; its token buffer, already pushed, carries a cancelled fence
 *
 * What an encoder does with a unit (a frame, a chunk) when
 * max-inflight units are being encoded.  Each element registers its own
 * enum type for its `policy` property, with these values.
 *
 * Since: 0.1.0
 */
typedef enum
{
  GST_NPU_ENCODER_POLICY_BLOCK,
  GST_NPU_ENCODER_POLICY_DROP_NEWEST,
  GST_NPU_ENCODER_POLICY_DROP_OLDEST,
} GstNpuEncoderPolicy;

/**
 * GST_NPU_ENCODER_ELEMENT_DEFAULT_MAX_INFLIGHT:
 *
 * The `max-inflight` an encoder starts with; the subclass's property gives
 * it as its default.
 *
 * Since: 0.1.0
 */
#define GST_NPU_ENCODER_ELEMENT_DEFAULT_MAX_INFLIGHT 2
/**
 * GST_NPU_ENCODER_ELEMENT_DEFAULT_POLICY:
 *
 * The `policy` an encoder starts with (block).
 *
 * Since: 0.1.0
 */
#define GST_NPU_ENCODER_ELEMENT_DEFAULT_POLICY GST_NPU_ENCODER_POLICY_BLOCK

/**
 * GstNpuEncoderElementProperty:
 * @GST_NPU_ENCODER_ELEMENT_PROP_MODEL: `model` (string)
 * @GST_NPU_ENCODER_ELEMENT_PROP_N_THREADS: `n-threads` (uint)
 * @GST_NPU_ENCODER_ELEMENT_PROP_MAX_INFLIGHT: `max-inflight` (uint)
 * @GST_NPU_ENCODER_ELEMENT_PROP_POLICY: `policy` (an enum with the values
 *   of #GstNpuEncoderPolicy)
 * @GST_NPU_ENCODER_ELEMENT_PROP_PROCESSED: units encoded (uint64, read-only)
 * @GST_NPU_ENCODER_ELEMENT_PROP_DROPPED: units dropped or cancelled by the
 *   policy (uint64, read-only)
 * @GST_NPU_ENCODER_ELEMENT_PROP_DEVICE: `device` (string): the engine the
 *   encoder runs on, a name npu_device_open() takes (`cpu`, `auto`,
 *   `vulkan`, `vulkan:N`)
 * @GST_NPU_ENCODER_ELEMENT_PROP_PJ_PER_BIT: `pj-per-bit` (double,
 *   %GST_NPU_PJ_PER_BIT_MIN to %GST_NPU_PJ_PER_BIT_MAX): the energy
 *   estimate of the stats message (gst_npu_encoder_element_report_bytes())
 * @GST_NPU_ENCODER_ELEMENT_PROP_LAST: the first id free for the subclass's
 *   own properties
 *
 * The property ids whose values the base class keeps.  A subclass installs
 * these properties itself, with its own names, blurbs and documentation,
 * under these ids, and hands them to
 * gst_npu_encoder_element_set_property() and
 * gst_npu_encoder_element_get_property().
 *
 * Since: 0.1.0
 */
typedef enum
{
  GST_NPU_ENCODER_ELEMENT_PROP_MODEL = 1,
  GST_NPU_ENCODER_ELEMENT_PROP_N_THREADS,
  GST_NPU_ENCODER_ELEMENT_PROP_MAX_INFLIGHT,
  GST_NPU_ENCODER_ELEMENT_PROP_POLICY,
  GST_NPU_ENCODER_ELEMENT_PROP_PROCESSED,
  GST_NPU_ENCODER_ELEMENT_PROP_DROPPED,
  GST_NPU_ENCODER_ELEMENT_PROP_DEVICE,
  GST_NPU_ENCODER_ELEMENT_PROP_PJ_PER_BIT,
  GST_NPU_ENCODER_ELEMENT_PROP_LAST,
} GstNpuEncoderElementProperty;

/**
 * GstNpuEncoderElement:
 * @sinkpad: the media input; its chain, event and query functions are the
 *   base class's
 * @srcpad: the token output (fixed caps)
 * @queue: the compute queue, from start to stop: the CPU device's, where
 *   the element's tasks run
 * @engine_queue: a queue of the `device` the encoder runs on, from start
 *   to stop, where that is not the CPU; %NULL on the CPU
 * @importer: reads input memory in place, from start to stop
 * @allocator: NPU memory for the token tensors, from start to stop
 *
 * Since: 0.1.0
 */
struct _GstNpuEncoderElement
{
  GstElement parent;

  /*< public >*/
  GstPad *sinkpad, *srcpad;

  /*< protected >*/
  NpuQueue *queue;
  GstNpuImporter *importer;
  GstAllocator *allocator;
  NpuQueue *engine_queue;

  /*< private >*/
  GstNpuEncoderElementPrivate *priv;
  gpointer _gst_reserved[GST_PADDING - 1];
};

/**
 * GstNpuEncoderElementClass:
 * @parent_class: the parent class
 * @load_model: (not optional) loads the model from @location, its tensors
 *   from @weights (the `weights` pad) or from the file when %NULL; posts
 *   the element error itself when it cannot
 * @unload_model: frees the model and everything made for it; called when
 *   the element stops, after the queue has ended
 * @start: (optional) resets the subclass's counters and stream state when
 *   the element goes to PAUSED, before the model is loaded
 * @set_caps: (not optional) takes new input caps and sets the src caps.
 *   Called with the model loaded and no task in flight, so that it may
 *   free what earlier tasks read
 * @handle_buffer: (not optional) takes @buffer (transfer full) once caps
 *   are set: encodes it, or collects it until a unit is complete
 * @drain: (optional) encodes what is collected and not yet a whole unit;
 *   called at EOS and before new caps
 * @reset: (optional) forgets the stream state: after FLUSH_STOP and EOS
 * @sink_query: (optional) queries on the sink pad; the default is
 *   gst_pad_query_default()
 * @get_latency: (optional) latency of the subclass's own, beyond the
 *   encodes in flight (how long a unit takes to fill)
 *
 * Since: 0.1.0
 */
struct _GstNpuEncoderElementClass
{
  GstElementClass parent_class;

  /*< public >*/
  gboolean (*load_model) (GstNpuEncoderElement * self, const gchar * location,
      GstNpuWeights * weights);
  void (*unload_model) (GstNpuEncoderElement * self);
  void (*start) (GstNpuEncoderElement * self);
  gboolean (*set_caps) (GstNpuEncoderElement * self, GstCaps * caps);
  GstFlowReturn (*handle_buffer) (GstNpuEncoderElement * self,
      GstBuffer * buffer);
  GstFlowReturn (*drain) (GstNpuEncoderElement * self);
  void (*reset) (GstNpuEncoderElement * self);
  gboolean (*sink_query) (GstNpuEncoderElement * self, GstQuery * query);
  GstClockTime (*get_latency) (GstNpuEncoderElement * self);

  /*< private >*/
  gpointer _gst_reserved[GST_PADDING];
};

GST_NPU_API
GType gst_npu_encoder_element_get_type (void);

GST_NPU_API
void gst_npu_encoder_element_class_add_pad_templates
    (GstNpuEncoderElementClass * klass, GstCaps * sink_caps);

GST_NPU_API
gboolean gst_npu_encoder_element_set_property (GstNpuEncoderElement * self,
    guint prop_id, const GValue * value);
GST_NPU_API
gboolean gst_npu_encoder_element_get_property (GstNpuEncoderElement * self,
    guint prop_id, GValue * value);
GST_NPU_API
guint gst_npu_encoder_element_get_max_inflight (GstNpuEncoderElement * self);

GST_NPU_API
GstFlowReturn gst_npu_encoder_element_take_slot (GstNpuEncoderElement * self,
    GstClockTime pts, GstClockTime duration, gboolean * dropped);
GST_NPU_API
void gst_npu_encoder_element_release_slot (GstNpuEncoderElement * self);
GST_NPU_API
GstFlowReturn gst_npu_encoder_element_push_task (GstNpuEncoderElement * self,
    GstBuffer * outbuf, NpuTaskFunc func, gpointer job,
    GDestroyNotify destroy);
GST_NPU_API
void gst_npu_encoder_element_report_bytes (GstNpuEncoderElement * self,
    NpuTask * task, const gchar * message_name, GstClockTime pts,
    const NpuBytes * bytes);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (GstNpuEncoderElement, gst_object_unref)

G_END_DECLS

#endif /* __GST_NPU_ENCODER_ELEMENT_H__ */
