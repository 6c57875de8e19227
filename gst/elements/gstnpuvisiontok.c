/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npuvisiontok, camera frames to vision tokens */

/**
 * SECTION:element-npuvisiontok
 * @title: npuvisiontok
 *
 * Turns video frames into the vision tokens of a CLIP/SigLIP-style encoder
 * (llama.cpp "mmproj" GGUF), ready for npullm's `vision` pad.
 *
 * Frames are read in place: in NPU memory it proposes upstream (videotestsrc,
 * appsrc, `v4l2src io-mode=dmabuf-import`), or through the fd of a dma-buf
 * upstream allocated (`v4l2src io-mode=dmabuf`, which on GStreamer 1.22 sends
 * dma-buf memory under plain video/x-raw caps).  #GstNpuVisionTok:bytes-copied
 * counts what was copied: zero on these paths; only a plane split across
 * two memories of a buffer is gathered into a copy.
 *
 * One pass from the frame's pixels does crop/resize, colour conversion (by
 * the caps' colorimetry), normalisation and patchify; the encoder and
 * projector then run on the CPU backend as one task per frame.  The output
 * buffer (`other/tensors`, one float32 tensor of dim x tokens, in NPU memory)
 * is pushed at once with the task's fence and a #GstNpuTokensMeta; whoever
 * maps it waits for the tokens, and npullm passes the fence on.
 *
 * At most #GstNpuVisionTok:max-inflight frames are being encoded at once;
 * past that, #GstNpuVisionTok:policy blocks upstream or drops the new frame
 * (counted in #GstNpuVisionTok:frames-dropped, and reported as QoS).
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 videotestsrc num-buffers=10 ! npuvisiontok model=mmproj.gguf ! fakesink
 * ]|
 *
 * Since: 0.1.0
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuvisiontok.h"
#include "gstnpuanalytics.h"
#include "gstnpuprecision.h"
#include <npu/gstnpuvideoformats.h>

#include <string.h>
#include <gst/video/video.h>
#include <npu/npu.h>
#include <npu/gstnpuelementutils.h>
#include <core/device/npubackend.h>
#include <core/formats/npugguf.h>
#include <core/cpu/npuvisionprep.h>
#include <core/models/npuvit.h>

GST_DEBUG_CATEGORY_STATIC (gst_npu_vision_tok_debug);
#define GST_CAT_DEFAULT gst_npu_vision_tok_debug

#define DEFAULT_MODEL NULL
#define DEFAULT_MAX_INFLIGHT 2
#define DEFAULT_POLICY GST_NPU_VISION_TOK_POLICY_BLOCK
#define DEFAULT_LETTERBOX FALSE
#define DEFAULT_N_THREADS 0
#define DEFAULT_PRECISION GST_NPU_PRECISION_ACCURATE

enum
{
  PROP_0,
  PROP_MODEL,
  PROP_MAX_INFLIGHT,
  PROP_POLICY,
  PROP_LETTERBOX,
  PROP_N_THREADS,
  PROP_PRECISION,
  PROP_BYTES_COPIED,
  PROP_FRAMES_PROCESSED,
  PROP_FRAMES_DROPPED,
  PROP_FRAMES_DMABUF,
};

/* The sink template is made in class_init from the format table
 * (gstnpuvideoformats.c), where the 1.24+ DMA_DRM form goes too. */
static GstStaticPadTemplate weights_template =
GST_STATIC_PAD_TEMPLATE ("weights", GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS ("other/npu-weights"));
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("other/tensors, format=(string)static, "
        "num_tensors=(int)1, types=(string)float32"));

struct _GstNpuVisionTok
{
  GstElement parent;

  GstPad *sinkpad, *srcpad;

  /* properties, under the object lock */
  gchar *model;
  guint max_inflight;
  GstNpuVisionTokPolicy policy;
  gboolean letterbox;
  guint n_threads;
  GstNpuPrecision precision;
  guint64 frames_processed, frames_dropped, frames_dmabuf;

  /* the model */
  GMutex lock;
  GCond cond;
  NpuVit *vit;
  NpuGguf *gguf;                /* model property: the tensors live here */
  GstNpuWeightsInput *weights_in;       /* the weights pad */
  gboolean flushing;

  /* per caps */
  GstVideoInfo info;
  gboolean have_info;
  NpuVisionPrepPlan *plan;
  gfloat *patches;              /* one frame's encoder input */

  NpuQueue *queue;
  GstNpuImporter *importer;
  GstAllocator *allocator;
  guint inflight;
  GQueue pending;               /* NpuFence of frames submitted, oldest first */
  gint64 last_encode_us;
};

#define gst_npu_vision_tok_parent_class parent_class
G_DEFINE_TYPE (GstNpuVisionTok, gst_npu_vision_tok, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (npuvisiontok, "npuvisiontok",
    GST_RANK_NONE, GST_TYPE_NPU_VISION_TOK,
    GST_DEBUG_CATEGORY_INIT (gst_npu_vision_tok_debug, "npuvisiontok", 0,
        "frames to vision tokens"));

#define GST_TYPE_NPU_VISION_TOK_POLICY (gst_npu_vision_tok_policy_get_type ())
static GType
gst_npu_vision_tok_policy_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    {GST_NPU_VISION_TOK_POLICY_BLOCK, "Wait for a slot (back-pressure)",
        "block"},
    {GST_NPU_VISION_TOK_POLICY_DROP_NEWEST, "Drop the incoming frame",
        "drop-newest"},
    {GST_NPU_VISION_TOK_POLICY_DROP_OLDEST,
        "Cancel the oldest frame not yet being encoded", "drop-oldest"},
    {0, NULL, NULL}
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstNpuVisionTokPolicy", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

static void gst_npu_vision_tok_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec);
static void gst_npu_vision_tok_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec);
static void gst_npu_vision_tok_finalize (GObject * object);
static GstStateChangeReturn gst_npu_vision_tok_change_state (GstElement *
    element, GstStateChange transition);
static gboolean load_model (GstElement * element, const gchar * path,
    GstNpuWeights * weights);
static GstPad *gst_npu_vision_tok_request_new_pad (GstElement * element,
    GstPadTemplate * templ, const gchar * name, const GstCaps * caps);
static void gst_npu_vision_tok_release_pad (GstElement * element, GstPad * pad);
static GstFlowReturn gst_npu_vision_tok_chain (GstPad * pad,
    GstObject * parent, GstBuffer * buf);
static gboolean gst_npu_vision_tok_sink_event (GstPad * pad,
    GstObject * parent, GstEvent * event);
static gboolean gst_npu_vision_tok_sink_query (GstPad * pad,
    GstObject * parent, GstQuery * query);
static gboolean gst_npu_vision_tok_src_query (GstPad * pad,
    GstObject * parent, GstQuery * query);

/* The model, how a frame is fitted to its input, and the compute. */
static void
install_model_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  /**
   * GstNpuVisionTok:model:
   *
   * An mmproj GGUF (llama.cpp's clip layout).  Leave unset to take the
   * weights from mxfp4weights on the `weights` pad.
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "mmproj GGUF (CLIP/SigLIP vision encoder + projector); unset: "
          "weights come on the weights pad", DEFAULT_MODEL,
          rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuVisionTok:letterbox:
   *
   * Keep the frame's aspect ratio, padding with the model's mean colour;
   * otherwise the frame is stretched to the encoder's square input.
   */
  g_object_class_install_property (gobject_class, PROP_LETTERBOX,
      g_param_spec_boolean ("letterbox", "Letterbox",
          "Keep the aspect ratio (pad) instead of stretching",
          DEFAULT_LETTERBOX, rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuVisionTok:n-threads:
   *
   * Threads of the CPU backend; 0 = one per CPU.
   */
  g_object_class_install_property (gobject_class, PROP_N_THREADS,
      g_param_spec_uint ("n-threads", "Threads",
          "CPU backend threads (0 = one per CPU)", 0, 1024,
          DEFAULT_N_THREADS, rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuVisionTok:precision:
   *
   * Activations of the encoder's matrix products.  `accurate` (default)
   * keeps at least about 16 bits: on AVX-512 the products run on int16
   * activations (per block of 32) and exactly decoded weights, on AVX2 on
   * F32 activations; elsewhere each block of 32 activations is quantised
   * to int8 and then its residual to int8 again.
   * Vision tokens are within 1e-3 (relative norm) of a float64 evaluation
   * of the same weights; `fast` uses int8 activations as llama.cpp does
   * (tokens ~1 % away).  docs/npuvisiontok.md gives both bounds and the
   * measured encode times.
   */
  g_object_class_install_property (gobject_class, PROP_PRECISION,
      g_param_spec_enum ("precision", "Precision",
          "Activations of the matrix products: accurate (~16 bits) or fast "
          "(int8)", GST_TYPE_NPU_PRECISION, DEFAULT_PRECISION,
          rw | GST_PARAM_MUTABLE_READY));
}

/* What happens when frames come faster than they are encoded. */
static void
install_queue_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  /**
   * GstNpuVisionTok:max-inflight:
   *
   * Frames being encoded at once; past that, #GstNpuVisionTok:policy.
   */
  g_object_class_install_property (gobject_class, PROP_MAX_INFLIGHT,
      g_param_spec_uint ("max-inflight", "Max in flight",
          "Frames being encoded at once", 1, 64, DEFAULT_MAX_INFLIGHT,
          rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuVisionTok:policy:
   *
   * What happens to a frame that arrives while #GstNpuVisionTok:max-inflight
   * frames are being encoded: block (wait, back-pressuring upstream),
   * drop-newest (drop it) or drop-oldest (cancel the oldest frame not yet
   * being encoded).  Drops are counted and posted as QoS messages.
   */
  g_object_class_install_property (gobject_class, PROP_POLICY,
      g_param_spec_enum ("policy", "Policy",
          "What to do with a frame when max-inflight are being encoded",
          GST_TYPE_NPU_VISION_TOK_POLICY, DEFAULT_POLICY,
          rw | GST_PARAM_MUTABLE_PLAYING));
}

/* Read-only counters. */
static void
install_statistics_properties (GObjectClass * gobject_class)
{
  const GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  /**
   * GstNpuVisionTok:bytes-copied:
   *
   * Bytes of frames copied before encoding: zero when every plane of a
   * frame lies in one memory, since frames are read in place; a plane that
   * straddles two memories of a buffer is gathered into a copy and its
   * bytes counted here.
   */
  g_object_class_install_property (gobject_class, PROP_BYTES_COPIED,
      g_param_spec_uint64 ("bytes-copied", "Bytes copied",
          "Bytes of input frames copied (zero when read in place)", 0,
          G_MAXUINT64, 0, ro));
  /**
   * GstNpuVisionTok:frames-processed:
   *
   * Frames turned into tokens since the element started.
   */
  g_object_class_install_property (gobject_class, PROP_FRAMES_PROCESSED,
      g_param_spec_uint64 ("frames-processed", "Frames processed",
          "Frames turned into tokens", 0, G_MAXUINT64, 0, ro));
  /**
   * GstNpuVisionTok:frames-dropped:
   *
   * Frames dropped or cancelled by the drop-newest and drop-oldest
   * policies.
   */
  g_object_class_install_property (gobject_class, PROP_FRAMES_DROPPED,
      g_param_spec_uint64 ("frames-dropped", "Frames dropped",
          "Frames dropped or cancelled by the drop-newest and drop-oldest "
          "policies", 0, G_MAXUINT64, 0, ro));
  /**
   * GstNpuVisionTok:frames-dmabuf:
   *
   * Frames whose memory was a dma-buf, read in place.
   */
  g_object_class_install_property (gobject_class, PROP_FRAMES_DMABUF,
      g_param_spec_uint64 ("frames-dmabuf", "Frames in dma-bufs",
          "Frames whose memory was a dma-buf", 0, G_MAXUINT64, 0, ro));
}

static void
gst_npu_vision_tok_class_init (GstNpuVisionTokClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstCaps *sink_caps;

  gobject_class->set_property = gst_npu_vision_tok_set_property;
  gobject_class->get_property = gst_npu_vision_tok_get_property;
  gobject_class->finalize = gst_npu_vision_tok_finalize;

  install_model_properties (gobject_class);
  install_queue_properties (gobject_class);
  install_statistics_properties (gobject_class);

  sink_caps = gst_npu_video_formats_sink_caps ();
  gst_element_class_add_pad_template (element_class,
      gst_pad_template_new ("sink", GST_PAD_SINK, GST_PAD_ALWAYS, sink_caps));
  gst_caps_unref (sink_caps);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_add_static_pad_template (element_class, &weights_template);
  gst_element_class_set_static_metadata (element_class,
      "NPU vision tokenizer", "Filter/Converter/Video/Tensor",
      "Turns video frames, read in place, into the vision tokens of a "
      "CLIP/SigLIP encoder for a language model", "gst-npu developers");

  element_class->change_state =
      GST_DEBUG_FUNCPTR (gst_npu_vision_tok_change_state);
  element_class->request_new_pad =
      GST_DEBUG_FUNCPTR (gst_npu_vision_tok_request_new_pad);
  element_class->release_pad =
      GST_DEBUG_FUNCPTR (gst_npu_vision_tok_release_pad);

  gst_type_mark_as_plugin_api (GST_TYPE_NPU_VISION_TOK_POLICY, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_NPU_PRECISION, 0);
}

static void
gst_npu_vision_tok_init (GstNpuVisionTok * self)
{
  self->sinkpad = gst_pad_new_from_template (gst_element_class_get_pad_template
      (GST_ELEMENT_GET_CLASS (self), "sink"), "sink");
  gst_pad_set_chain_function (self->sinkpad, gst_npu_vision_tok_chain);
  gst_pad_set_event_function (self->sinkpad, gst_npu_vision_tok_sink_event);
  gst_pad_set_query_function (self->sinkpad, gst_npu_vision_tok_sink_query);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_query_function (self->srcpad, gst_npu_vision_tok_src_query);
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);

  self->max_inflight = DEFAULT_MAX_INFLIGHT;
  self->policy = DEFAULT_POLICY;
  self->letterbox = DEFAULT_LETTERBOX;
  self->precision = DEFAULT_PRECISION;
  self->weights_in = gst_npu_weights_input_new (GST_ELEMENT (self), load_model);
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
}

static void
gst_npu_vision_tok_finalize (GObject * object)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (object);

  g_free (self->model);
  gst_npu_weights_input_free (self->weights_in);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_npu_vision_tok_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_free (self->model);
      self->model = g_value_dup_string (value);
      break;
    case PROP_MAX_INFLIGHT:
      self->max_inflight = g_value_get_uint (value);
      break;
    case PROP_POLICY:
      self->policy = g_value_get_enum (value);
      break;
    case PROP_LETTERBOX:
      self->letterbox = g_value_get_boolean (value);
      break;
    case PROP_N_THREADS:
      self->n_threads = g_value_get_uint (value);
      break;
    case PROP_PRECISION:
      self->precision = g_value_get_enum (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_npu_vision_tok_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (object);
  GstNpuImportStats stats = { 0, };

  if (prop_id == PROP_BYTES_COPIED && self->importer)
    gst_npu_importer_get_stats (self->importer, &stats);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string (value, self->model);
      break;
    case PROP_MAX_INFLIGHT:
      g_value_set_uint (value, self->max_inflight);
      break;
    case PROP_POLICY:
      g_value_set_enum (value, self->policy);
      break;
    case PROP_LETTERBOX:
      g_value_set_boolean (value, self->letterbox);
      break;
    case PROP_N_THREADS:
      g_value_set_uint (value, self->n_threads);
      break;
    case PROP_PRECISION:
      g_value_set_enum (value, self->precision);
      break;
    case PROP_BYTES_COPIED:
      g_value_set_uint64 (value, stats.bytes_copied);
      break;
    case PROP_FRAMES_PROCESSED:
      g_value_set_uint64 (value, self->frames_processed);
      break;
    case PROP_FRAMES_DROPPED:
      g_value_set_uint64 (value, self->frames_dropped);
      break;
    case PROP_FRAMES_DMABUF:
      g_value_set_uint64 (value, self->frames_dmabuf);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

/* ------------------------------------------------------------------------
 * The model
 */
/* GstNpuWeights as the encoder's NpuTensorLookup */
static gboolean
lookup_weights (const gchar * name, NpuTensorView * out, gpointer data)
{
  return gst_npu_weights_lookup (data, name, out);
}

/* Opens the mmproj at @path; tensors from @weights, else from the file. */
static gboolean
load_model (GstElement * element, const gchar * path, GstNpuWeights * weights)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (element);
  GError *error = NULL;

  self->gguf = npu_gguf_open (path, &error);
  if (!self->gguf)
    goto open_failed;
  self->vit = npu_vit_new (self->gguf, weights ? lookup_weights : NULL,
      weights, &error);
  if (!self->vit)
    goto bad_model;
  GST_OBJECT_LOCK (self);
  npu_vit_set_precision (self->vit, (NpuMatmulPrecision) self->precision);
  GST_OBJECT_UNLOCK (self);
  GST_INFO_OBJECT (self, "%s: %ux%u input, %u tokens of %u", path,
      npu_vit_get_image_size (self->vit), npu_vit_get_image_size (self->vit),
      npu_vit_get_n_tokens (self->vit), npu_vit_get_out_dim (self->vit));
  g_mutex_lock (&self->lock);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  return TRUE;

  /* ERRORS */
open_failed:
  {
    gst_npu_element_post_model_open_error (element, path, "GGUF", error);
    g_error_free (error);
    return FALSE;
  }
bad_model:
  {
    GST_ELEMENT_ERROR (self, STREAM, WRONG_TYPE,
        ("Model \"%s\" is not a usable vision encoder: %s", path,
            error->message), ("%s", error->message));
    g_error_free (error);
    return FALSE;
  }
}

/* ------------------------------------------------------------------------
 * Caps
 */
/* Waits until the encoder is loaded (weights pad); FALSE when flushing. */
static gboolean
wait_for_model (GstNpuVisionTok * self)
{
  g_mutex_lock (&self->lock);
  while (!self->vit && !self->flushing)
    g_cond_wait (&self->cond, &self->lock);
  g_mutex_unlock (&self->lock);
  return self->vit != NULL;
}

/* Waits until no frame is being encoded. */
static void
wait_idle (GstNpuVisionTok * self)
{
  g_mutex_lock (&self->lock);
  while (self->inflight > 0)
    g_cond_wait (&self->cond, &self->lock);
  g_mutex_unlock (&self->lock);
}

#if GST_CHECK_VERSION(1, 24, 0)
/* Posts why @caps, which the sink pad refused, cannot be read. */
static void
refuse_caps (GstNpuVisionTok * self, GstCaps * caps)
{
  GstVideoInfo info;
  NpuPixelFormat format;
  GError *error = NULL;

  if (gst_npu_video_formats_parse (caps, &info, &format, &error))
    return;
  GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("%s", error->message),
      ("%" GST_PTR_FORMAT, caps));
  g_error_free (error);
}
#endif

static gboolean
set_caps (GstNpuVisionTok * self, GstCaps * caps)
{
  NpuVisionPrepParams p;
  NpuPixelFormat format;
  GstVideoInfo info;
  GstCaps *out;
  GError *error = NULL;
  gchar *dims;
  gfloat mean[3], std[3];
  gboolean ok;
  guint i;

  if (!gst_npu_video_formats_parse (caps, &info, &format, &error))
    goto bad_caps;
  if (!wait_for_model (self))
    return FALSE;

  npu_vision_prep_params_init (&p);
  p.format = format;
  p.width = GST_VIDEO_INFO_WIDTH (&info);
  p.height = GST_VIDEO_INFO_HEIGHT (&info);
  gst_npu_video_formats_colorimetry (&info, &p.matrix, &p.range);
  p.crop_x = p.crop_y = 0;
  p.crop_width = p.width;
  p.crop_height = p.height;
  p.out_width = p.out_height = npu_vit_get_image_size (self->vit);
  GST_OBJECT_LOCK (self);
  p.mode = self->letterbox ? NPU_VISION_PREP_LETTERBOX :
      NPU_VISION_PREP_STRETCH;
  GST_OBJECT_UNLOCK (self);
  npu_vit_get_mean_std (self->vit, mean, std);
  for (i = 0; i < 3; i++) {
    p.mean[i] = mean[i];
    p.std[i] = std[i];
    /* Letterbox bars: the mean colour, i.e. zero after normalisation. */
    p.fill_rgb[i] = mean[i] * 255.0;
  }
  p.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
  p.patch_size = npu_vit_get_patch_size (self->vit);

  /* New caps mid-stream: the frames in flight were submitted against the
   * plan and the patch scratch about to be replaced, and their tasks read
   * both; let them finish first.  Not while flushing only: FLUSH_START
   * cancels the waiting tasks and the running one ends, so the wait is
   * short then, and a task never outlives what it reads. */
  wait_idle (self);
  if (self->plan)
    npu_vision_prep_plan_free (self->plan);
  self->plan = npu_vision_prep_plan_new (&p, &error);
  if (!self->plan)
    goto bad_plan;
  g_free (self->patches);
  self->patches = g_new (gfloat, npu_vision_prep_plan_get_n_floats
      (self->plan));
  self->info = info;
  self->have_info = TRUE;

  dims = g_strdup_printf ("%u:%u", npu_vit_get_out_dim (self->vit),
      npu_vit_get_n_tokens (self->vit));
  out = gst_caps_new_simple ("other/tensors", "format", G_TYPE_STRING,
      "static", "num_tensors", G_TYPE_INT, 1, "types", G_TYPE_STRING,
      "float32", "dimensions", G_TYPE_STRING, dims, "framerate",
      GST_TYPE_FRACTION, GST_VIDEO_INFO_FPS_N (&info),
      GST_VIDEO_INFO_FPS_D (&info), NULL);
  g_free (dims);
  ok = gst_pad_set_caps (self->srcpad, out);
  gst_caps_unref (out);
  return ok;

  /* ERRORS */
bad_caps:
  {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, ("%s", error->message),
        ("%" GST_PTR_FORMAT, caps));
    g_error_free (error);
    return FALSE;
  }
bad_plan:
  {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
        ("Cannot preprocess %s %dx%d frames: %s",
            GST_VIDEO_INFO_NAME (&info), GST_VIDEO_INFO_WIDTH (&info),
            GST_VIDEO_INFO_HEIGHT (&info), error->message),
        ("%s", error->message));
    g_error_free (error);
    return FALSE;
  }
}

/* ------------------------------------------------------------------------
 * Frames
 */
typedef struct
{
  GstNpuVisionTok *self;
  GstBuffer *inbuf;
  GstNpuImportFrame frame;
  GstMemory *outmem;
  gfloat *out;
} EncodeJob;

static gboolean
encode_task (NpuTask * task, gpointer user_data, GError ** error)
{
  EncodeJob *job = user_data;
  GstNpuVisionTok *self = job->self;
  const guint8 *planes[GST_VIDEO_MAX_PLANES];
  gssize strides[GST_VIDEO_MAX_PLANES];
  gint64 t0 = g_get_monotonic_time ();
  gboolean ok;
  guint i;

  for (i = 0; i < job->frame.n_planes; i++) {
    planes[i] = job->frame.data[i];
    strides[i] = job->frame.stride[i];
    /* where the preprocessing reads: upstream's memory, unless copied */
    gst_npu_input_watch_notify (GST_OBJECT (self), planes[i],
        job->frame.size[i]);
  }
  /* Tasks of one queue run one at a time, so one scratch serves all. */
  npu_events_stage (TRUE, "preprocess", GST_BUFFER_PTS (job->inbuf));
  npu_vision_prep_run (self->plan, planes, strides, self->patches, task);
  npu_events_stage (FALSE, "preprocess", GST_BUFFER_PTS (job->inbuf));
  npu_events_stage (TRUE, "vision encoder", GST_BUFFER_PTS (job->inbuf));
  ok = npu_vit_encode (self->vit, task, self->patches, job->out, error);
  npu_events_stage (FALSE, "vision encoder", GST_BUFFER_PTS (job->inbuf));
  gst_npu_memory_end_cpu_write (job->outmem);
  /* under the lock: the latency query reads it from another thread */
  GST_OBJECT_LOCK (self);
  self->last_encode_us = g_get_monotonic_time () - t0;
  self->frames_processed++;
  GST_OBJECT_UNLOCK (self);
  return ok;
}

static void
encode_job_free (gpointer data)
{
  EncodeJob *job = data;
  GstNpuVisionTok *self = job->self;

  gst_npu_importer_unmap_frame (self->importer, &job->frame);
  gst_buffer_unref (job->inbuf);
  gst_memory_unref (job->outmem);
  g_free (job);

  g_mutex_lock (&self->lock);
  self->inflight--;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
}

static void
post_qos_drop (GstNpuVisionTok * self, GstBuffer * buf)
{
  GstSegment *segment = NULL;
  GstEvent *ev = gst_pad_get_sticky_event (self->sinkpad, GST_EVENT_SEGMENT,
      0);
  GstClockTime ts = GST_BUFFER_PTS (buf), running = GST_CLOCK_TIME_NONE;
  GstMessage *msg;

  if (ev) {
    gst_event_parse_segment (ev, (const GstSegment **) &segment);
    running = gst_segment_to_running_time (segment, GST_FORMAT_TIME, ts);
  }
  msg = gst_message_new_qos (GST_OBJECT (self), FALSE, running,
      ev ? gst_segment_to_stream_time (segment, GST_FORMAT_TIME, ts) :
      GST_CLOCK_TIME_NONE, ts, GST_BUFFER_DURATION (buf));
  GST_OBJECT_LOCK (self);
  gst_message_set_qos_stats (msg, GST_FORMAT_BUFFERS, self->frames_processed,
      self->frames_dropped);
  GST_OBJECT_UNLOCK (self);
  gst_element_post_message (GST_ELEMENT (self), msg);
  if (ev)
    gst_event_unref (ev);
}

static void
count_drop (GstNpuVisionTok * self, GstBuffer * buf)
{
  GST_OBJECT_LOCK (self);
  self->frames_dropped++;
  GST_OBJECT_UNLOCK (self);
  post_qos_drop (self, buf);
}

/* Takes an encoding slot for @buf, by #GstNpuVisionTok:policy: waits for
 * one, or drops @buf (GST_FLOW_OK, *@dropped set), or cancels the oldest
 * waiting frame.  Anything but GST_FLOW_OK with a slot has consumed @buf. */
static GstFlowReturn
take_slot (GstNpuVisionTok * self, GstBuffer * buf, gboolean * dropped)
{
  guint max_inflight;
  GstNpuVisionTokPolicy policy;

  *dropped = FALSE;
  GST_OBJECT_LOCK (self);
  max_inflight = self->max_inflight;
  policy = self->policy;
  GST_OBJECT_UNLOCK (self);

  g_mutex_lock (&self->lock);
  if (self->inflight >= max_inflight &&
      policy == GST_NPU_VISION_TOK_POLICY_DROP_NEWEST) {
    g_mutex_unlock (&self->lock);
    count_drop (self, buf);
    gst_buffer_unref (buf);
    *dropped = TRUE;
    return GST_FLOW_OK;
  }
  if (self->inflight >= max_inflight &&
      policy == GST_NPU_VISION_TOK_POLICY_DROP_OLDEST &&
      gst_npu_element_cancel_oldest_locked (&self->pending,
          &self->lock, self->queue)) {
    g_mutex_unlock (&self->lock);
    count_drop (self, buf);
    g_mutex_lock (&self->lock);
  }
  while (self->inflight >= max_inflight && !self->flushing)
    g_cond_wait (&self->cond, &self->lock);
  if (self->flushing) {
    g_mutex_unlock (&self->lock);
    gst_buffer_unref (buf);
    return GST_FLOW_FLUSHING;
  }
  self->inflight++;
  g_mutex_unlock (&self->lock);
  return GST_FLOW_OK;
}

/* The token tensor's buffer: @job's output memory, @in's timestamps and a
 * tokens meta describing it */
static GstBuffer *
make_token_buffer (GstNpuVisionTok * self, EncodeJob * job, GstBuffer * in)
{
  GstBuffer *outbuf = gst_buffer_new ();
  guint gw, gh;

  gst_buffer_append_memory (outbuf, gst_memory_ref (job->outmem));
  gst_buffer_copy_into (outbuf, in, GST_BUFFER_COPY_TIMESTAMPS, 0, -1);
  npu_vit_get_token_grid (self->vit, &gw, &gh);
  gst_buffer_add_npu_tokens_meta (outbuf, GST_NPU_MODALITY_VISION,
      npu_vit_get_n_tokens (self->vit), npu_vit_get_out_dim (self->vit), gw,
      gh, GST_BUFFER_PTS (in), GST_BUFFER_DURATION (in));
#ifdef HAVE_GST_ANALYTICS
  /* the same memory, described the way GStreamer 1.26 analytics reads it */
  gst_npu_buffer_add_token_tensor (outbuf, job->outmem,
      GST_NPU_MODALITY_VISION, npu_vit_get_n_tokens (self->vit),
      npu_vit_get_out_dim (self->vit));
#endif
  return outbuf;
}

/* Queues @job's encoding; its fence rides on @outbuf and joins the pending
 * list (signalled ones at its head are let go) */
static void
submit_job (GstNpuVisionTok * self, EncodeJob * job, GstBuffer * outbuf)
{
  NpuFence *fence;

  /* the frame's PTS ties the task to it in a timeline (npu-timeline) */
  npu_queue_set_tag (self->queue, GST_BUFFER_PTS (outbuf));
  fence = npu_queue_submit_labelled (self->queue, "encode", encode_task, job,
      encode_job_free, NULL, 0);
  gst_buffer_add_npu_fence_meta (outbuf, fence);
  g_mutex_lock (&self->lock);
  gst_npu_element_push_fence_locked (&self->pending, fence);
  g_mutex_unlock (&self->lock);
}

static GstFlowReturn
gst_npu_vision_tok_chain (GstPad * pad, GstObject * parent, GstBuffer * buf)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (parent);
  EncodeJob *job;
  GstBuffer *outbuf;
  GstFlowReturn ret;
  gboolean dropped;
  gsize out_bytes;

  if (!self->have_info || !self->vit)
    goto not_negotiated;

  ret = take_slot (self, buf, &dropped);
  if (ret != GST_FLOW_OK || dropped)
    return ret;

  job = g_new0 (EncodeJob, 1);
  job->self = self;
  job->inbuf = buf;
  /* In place: NPU memory, or a foreign dma-buf/fd through its fd. */
  if (!gst_npu_importer_map_frame (self->importer, buf, &self->info,
          &job->frame))
    goto map_failed;

  out_bytes = (gsize) npu_vit_get_out_dim (self->vit) *
      npu_vit_get_n_tokens (self->vit) * sizeof (gfloat);
  job->outmem = gst_allocator_alloc (self->allocator, out_bytes, NULL);
  if (!job->outmem)
    goto no_memory;
  job->out = (gfloat *) gst_npu_memory_begin_cpu_write (job->outmem);

  GST_OBJECT_LOCK (self);
  if (job->frame.kind == GST_NPU_IMPORT_DMABUF)
    self->frames_dmabuf++;
  GST_OBJECT_UNLOCK (self);

  outbuf = make_token_buffer (self, job, buf);
  submit_job (self, job, outbuf);
  return gst_pad_push (self->srcpad, outbuf);

  /* ERRORS */
not_negotiated:
  {
    gst_buffer_unref (buf);
    if (self->flushing)
      return GST_FLOW_FLUSHING;
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL),
        ("a frame arrived before caps"));
    return GST_FLOW_NOT_NEGOTIATED;
  }
map_failed:
  {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("Cannot read the frame in place: it is smaller than its caps "
            "(%s %dx%d) say, or its memory cannot be mapped.",
            GST_VIDEO_INFO_NAME (&self->info),
            GST_VIDEO_INFO_WIDTH (&self->info),
            GST_VIDEO_INFO_HEIGHT (&self->info)),
        ("buffer of %" G_GSIZE_FORMAT " bytes", gst_buffer_get_size (buf)));
    job->outmem = gst_allocator_alloc (self->allocator, 1, NULL);
    encode_job_free (job);
    return GST_FLOW_ERROR;
  }
no_memory:
  {
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT,
        ("Cannot allocate the token tensor."), (NULL));
    job->outmem = gst_allocator_alloc (self->allocator, 1, NULL);
    encode_job_free (job);
    return GST_FLOW_ERROR;
  }
}

/* ------------------------------------------------------------------------
 * Events and queries
 */
static void
set_flushing (GstNpuVisionTok * self, gboolean flushing)
{
  g_mutex_lock (&self->lock);
  self->flushing = flushing;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
}

static gboolean
gst_npu_vision_tok_sink_event (GstPad * pad, GstObject * parent,
    GstEvent * event)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (parent);

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
      set_flushing (self, FALSE);
      break;
    case GST_EVENT_EOS:
      /* Drain: the tokens pushed so far are all there before EOS, so a
       * pipeline shut down at EOS does not cancel work already handed
       * downstream. */
      g_mutex_lock (&self->lock);
      while (self->inflight > 0 && !self->flushing)
        g_cond_wait (&self->cond, &self->lock);
      g_mutex_unlock (&self->lock);
      break;
    default:
      break;
  }
  return gst_pad_event_default (pad, parent, event);
}

static gboolean
gst_npu_vision_tok_sink_query (GstPad * pad, GstObject * parent,
    GstQuery * query)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (parent);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_ALLOCATION:{
      guint max_inflight;

      GST_OBJECT_LOCK (self);
      max_inflight = self->max_inflight;
      GST_OBJECT_UNLOCK (self);
      /* Upstream writes frames straight into NPU memory; the frames in
       * flight are held until their task has read them. */
      return gst_npu_propose_allocation (query, self->allocator,
          max_inflight + 1, 0);
    }
#if GST_CHECK_VERSION(1, 24, 0)
    case GST_QUERY_ACCEPT_CAPS:{
      GstCaps *caps;
      gboolean accepted;

      if (!gst_pad_query_default (pad, parent, query))
        return FALSE;
      gst_query_parse_accept_caps (query, &caps);
      gst_query_parse_accept_caps_result (query, &accepted);
      /* Refused DMA_DRM caps (a tiled or compressed modifier, a fourcc we
       * do not read) never reach the caps event, whose handler would say
       * why: say it here, or the user only sees "not-negotiated". */
      if (!accepted && gst_video_is_dma_drm_caps (caps))
        refuse_caps (self, caps);
      return TRUE;
    }
#endif
    default:
      return gst_pad_query_default (pad, parent, query);
  }
}

static gboolean
gst_npu_vision_tok_src_query (GstPad * pad, GstObject * parent,
    GstQuery * query)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (parent);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_LATENCY:{
      gboolean live;
      GstClockTime min, max, ours;
      guint max_inflight;

      if (!gst_pad_peer_query (self->sinkpad, query))
        return FALSE;
      gst_query_parse_latency (query, &live, &min, &max);
      GST_OBJECT_LOCK (self);
      max_inflight = self->max_inflight;
      /* Tokens are pushed at once, but only there when the encode is
       * done; a consumer that waits sees up to max-inflight encodes. */
      ours = self->last_encode_us * GST_USECOND * max_inflight;
      GST_OBJECT_UNLOCK (self);
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
gst_npu_vision_tok_request_new_pad (GstElement * element,
    GstPadTemplate * templ, const gchar * name, const GstCaps * caps)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (element);

  return gst_npu_weights_input_request_pad (self->weights_in, templ);
}

static void
gst_npu_vision_tok_release_pad (GstElement * element, GstPad * pad)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (element);

  gst_npu_weights_input_release_pad (self->weights_in, pad);
}

/* ------------------------------------------------------------------------
 * States
 */
static gboolean
start (GstNpuVisionTok * self)
{
  gchar *model;
  guint n_threads;
  gboolean ok;

  GST_OBJECT_LOCK (self);
  model = g_strdup (self->model);
  n_threads = self->n_threads;
  self->frames_processed = self->frames_dropped = self->frames_dmabuf = 0;
  GST_OBJECT_UNLOCK (self);

  self->flushing = FALSE;
  self->inflight = 0;
  self->have_info = FALSE;
  self->importer = gst_npu_importer_new (0);
  self->allocator = gst_npu_allocator_get_default ();
  self->queue = gst_npu_element_new_queue (GST_ELEMENT (self), n_threads);

  ok = gst_npu_weights_input_start (self->weights_in, model);
  g_free (model);
  return ok;
}

static void
stop (GstNpuVisionTok * self)
{
  set_flushing (self, TRUE);
  if (self->queue)
    npu_queue_free (self->queue);
  self->queue = NULL;
  if (self->vit)
    npu_vit_free (self->vit);
  self->vit = NULL;
  g_clear_pointer (&self->gguf, npu_gguf_free);
  gst_npu_weights_input_stop (self->weights_in);
  g_queue_clear_full (&self->pending, (GDestroyNotify) npu_fence_unref);
  g_clear_pointer (&self->plan, npu_vision_prep_plan_free);
  g_clear_pointer (&self->patches, g_free);
  g_clear_pointer (&self->importer, gst_npu_importer_free);
  gst_clear_object (&self->allocator);
  self->have_info = FALSE;
}

static GstStateChangeReturn
gst_npu_vision_tok_change_state (GstElement * element,
    GstStateChange transition)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (element);
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
