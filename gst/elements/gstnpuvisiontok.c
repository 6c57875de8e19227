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
 * the caps' colorimetry), normalisation and patchify (to the encoder's
 * square input, or for a Qwen2-VL / Qwen2.5-VL file to the frame's own
 * size rounded as Qwen's processor does, #GstNpuVisionTok:max-pixels);
 * the encoder and projector then run on the CPU backend as one task per
 * frame.  The output buffer (`other/tensors`, one float32 tensor of dim x
 * tokens, in NPU memory) is pushed at once with the task's fence and a
 * #GstNpuTokensMeta (with the token grid); whoever
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
#include <npu/gstnpuencoderelement.h>
#include <core/device/npubackend.h>
#include <core/formats/npugguf.h>
#include <core/cpu/npuvisionprep.h>
#include <core/models/npuvit.h>

GST_DEBUG_CATEGORY_STATIC (gst_npu_vision_tok_debug);
#define GST_CAT_DEFAULT gst_npu_vision_tok_debug

#define DEFAULT_MODEL NULL
/* the base's defaults */
#define DEFAULT_MAX_INFLIGHT GST_NPU_ENCODER_ELEMENT_DEFAULT_MAX_INFLIGHT
#define DEFAULT_POLICY GST_NPU_ENCODER_ELEMENT_DEFAULT_POLICY
#define DEFAULT_LETTERBOX FALSE
#define DEFAULT_N_THREADS 0
#define DEFAULT_PRECISION GST_NPU_PRECISION_ACCURATE
/* Qwen2VLImageProcessor's defaults */
#define DEFAULT_MIN_PIXELS (56 * 56)
#define DEFAULT_MAX_PIXELS (28 * 28 * 1280)
/* Qwen2-VL's preprocessor_config.json max: 16384 tokens */
#define MAX_PIXELS_LIMIT (28 * 28 * 16384)

/* The properties GstNpuEncoderElement keeps are installed under its ids,
 * so that the base reads and writes them. */
enum
{
  PROP_0,
  PROP_MODEL = GST_NPU_ENCODER_ELEMENT_PROP_MODEL,
  PROP_N_THREADS = GST_NPU_ENCODER_ELEMENT_PROP_N_THREADS,
  PROP_MAX_INFLIGHT = GST_NPU_ENCODER_ELEMENT_PROP_MAX_INFLIGHT,
  PROP_POLICY = GST_NPU_ENCODER_ELEMENT_PROP_POLICY,
  PROP_FRAMES_PROCESSED = GST_NPU_ENCODER_ELEMENT_PROP_PROCESSED,
  PROP_FRAMES_DROPPED = GST_NPU_ENCODER_ELEMENT_PROP_DROPPED,
  PROP_DEVICE = GST_NPU_ENCODER_ELEMENT_PROP_DEVICE,
  PROP_PJ_PER_BIT = GST_NPU_ENCODER_ELEMENT_PROP_PJ_PER_BIT,
  PROP_LETTERBOX = GST_NPU_ENCODER_ELEMENT_PROP_LAST,
  PROP_PRECISION,
  PROP_BYTES_COPIED,
  PROP_FRAMES_DMABUF,
  PROP_MIN_PIXELS,
  PROP_MAX_PIXELS,
};

/* the base's policy logic reads this element's policy values */
G_STATIC_ASSERT ((gint) GST_NPU_VISION_TOK_POLICY_BLOCK ==
    (gint) GST_NPU_ENCODER_POLICY_BLOCK);
G_STATIC_ASSERT ((gint) GST_NPU_VISION_TOK_POLICY_DROP_NEWEST ==
    (gint) GST_NPU_ENCODER_POLICY_DROP_NEWEST);
G_STATIC_ASSERT ((gint) GST_NPU_VISION_TOK_POLICY_DROP_OLDEST ==
    (gint) GST_NPU_ENCODER_POLICY_DROP_OLDEST);

struct _GstNpuVisionTok
{
  GstNpuEncoderElement parent;

  /* properties, under the object lock */
  gboolean letterbox;
  GstNpuPrecision precision;
  guint min_pixels, max_pixels;
  guint64 frames_dmabuf;

  /* the model, from load_model to unload_model */
  NpuVit *vit;
  NpuGguf *gguf;                /* model property: the tensors live here */
  NpuVitProgram *program;       /* the encoder built for `device`, or NULL */

  /* per caps; the base calls set_caps with no frame in flight */
  GstVideoInfo info;
  NpuVisionPrepPlan *plan;
  gfloat *patches;              /* one frame's encoder input */
};

#define gst_npu_vision_tok_parent_class parent_class
G_DEFINE_TYPE (GstNpuVisionTok, gst_npu_vision_tok,
    GST_TYPE_NPU_ENCODER_ELEMENT);
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
static gboolean gst_npu_vision_tok_load_model (GstNpuEncoderElement * base,
    const gchar * path, GstNpuWeights * weights);
static void gst_npu_vision_tok_unload_model (GstNpuEncoderElement * base);
static void gst_npu_vision_tok_start (GstNpuEncoderElement * base);
static gboolean gst_npu_vision_tok_set_caps (GstNpuEncoderElement * base,
    GstCaps * caps);
static GstFlowReturn gst_npu_vision_tok_handle_buffer (GstNpuEncoderElement *
    base, GstBuffer * buf);
static gboolean gst_npu_vision_tok_sink_query (GstNpuEncoderElement * base,
    GstQuery * query);

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
   * GstNpuVisionTok:min-pixels:
   *
   * Qwen2-VL / Qwen2.5-VL files (qwen2vl_merger, qwen2.5vl_merger) only:
   * the fewest pixels a frame is resized to.  The frame keeps its own
   * aspect ratio and about its size, each side rounded to a multiple of
   * 28 (2 x 2 patches of 14, one token) and scaled up to at least this
   * many pixels or down to at most #GstNpuVisionTok:max-pixels, as
   * Qwen2VLImageProcessor's smart_resize does; the tokens are the
   * (height / 28) x (width / 28) grid, given in each buffer's
   * #GstNpuTokensMeta.  Must not be above max-pixels.
   */
  g_object_class_install_property (gobject_class, PROP_MIN_PIXELS,
      g_param_spec_uint ("min-pixels", "Min pixels",
          "Qwen files: fewest pixels of the resized frame (smart_resize)",
          0, MAX_PIXELS_LIMIT, DEFAULT_MIN_PIXELS,
          rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuVisionTok:max-pixels:
   *
   * Qwen2-VL / Qwen2.5-VL files only: the most pixels a frame is resized
   * to (#GstNpuVisionTok:min-pixels says how); the encoder's time grows
   * with it (the full-attention blocks as its square).  0 keeps the
   * file's square clip.vision.image_size, as for the other projectors
   * (stretched or #GstNpuVisionTok:letterbox).  The default is Qwen's,
   * 28 x 28 x 1280 (at most 1280 tokens): a 640 x 480 frame gives
   * 23 x 17 tokens.
   */
  g_object_class_install_property (gobject_class, PROP_MAX_PIXELS,
      g_param_spec_uint ("max-pixels", "Max pixels",
          "Qwen files: most pixels of the resized frame (smart_resize); 0: "
          "the file's square image size", 0, MAX_PIXELS_LIMIT,
          DEFAULT_MAX_PIXELS, rw | GST_PARAM_MUTABLE_READY));
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
   * GstNpuVisionTok:device:
   *
   * The engine the vision encoder runs on: `cpu` (the default), `auto`
   * (the CPU until a measurement says otherwise), `vulkan` or `vulkan:N`
   * (the Nth Vulkan device, `gst-device-monitor-1.0 Compute` lists them).
   * The preprocessing runs on the CPU and writes the encoder's input in
   * the device's memory; on Vulkan the encoder's products are F32 ones
   * (#GstNpuVisionTok:precision is the CPU's).  A device that cannot be
   * opened is an error when the element starts.  docs/vulkan.md says what
   * runs where and how fast.
   */
  g_object_class_install_property (gobject_class, PROP_DEVICE,
      g_param_spec_string ("device", "Device",
          "Engine of the encoder: cpu, auto, vulkan, vulkan:N", "cpu",
          rw | GST_PARAM_MUTABLE_READY));
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
   * GstNpuVisionTok:pj-per-bit:
   *
   * The energy a bit moved to or from memory costs, in picojoules, for
   * the estimate the npuvisiontok-stats message gives, after each frame, from the
   * bytes its preprocess and encoder moved (`energy-estimate-uj` fields):
   * the default, 5, is the middle of the 3 to 7 pJ/bit of LPDDR5X/LPDDR6.
   * An estimate, not a measurement: every byte is taken to cross the
   * memory interface once.
   */
  g_object_class_install_property (gobject_class, PROP_PJ_PER_BIT,
      g_param_spec_double ("pj-per-bit", "pJ per bit",
          "Memory energy per bit moved, in pJ, for the stats' energy "
          "estimate", GST_NPU_PJ_PER_BIT_MIN, GST_NPU_PJ_PER_BIT_MAX,
          NPU_BYTES_DEFAULT_PJ_PER_BIT, G_PARAM_READWRITE |
          G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING));

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
  GstNpuEncoderElementClass *encoder_class =
      GST_NPU_ENCODER_ELEMENT_CLASS (klass);
  GstCaps *sink_caps;

  gobject_class->set_property = gst_npu_vision_tok_set_property;
  gobject_class->get_property = gst_npu_vision_tok_get_property;

  install_model_properties (gobject_class);
  install_queue_properties (gobject_class);
  install_statistics_properties (gobject_class);

  /* The sink caps come from the format table (gstnpuvideoformats.c),
   * where the 1.24+ DMA_DRM form goes too. */
  sink_caps = gst_npu_video_formats_sink_caps ();
  gst_npu_encoder_element_class_add_pad_templates (encoder_class, sink_caps);
  gst_caps_unref (sink_caps);
  gst_element_class_set_static_metadata (element_class,
      "NPU vision tokenizer", "Filter/Converter/Video/Tensor",
      "Turns video frames, read in place, into the vision tokens of a "
      "CLIP/SigLIP encoder for a language model", "gst-npu developers");

  encoder_class->load_model = gst_npu_vision_tok_load_model;
  encoder_class->unload_model = gst_npu_vision_tok_unload_model;
  encoder_class->start = gst_npu_vision_tok_start;
  encoder_class->set_caps = gst_npu_vision_tok_set_caps;
  encoder_class->handle_buffer = gst_npu_vision_tok_handle_buffer;
  encoder_class->sink_query = gst_npu_vision_tok_sink_query;

  gst_type_mark_as_plugin_api (GST_TYPE_NPU_VISION_TOK_POLICY, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_NPU_PRECISION, 0);
}

static void
gst_npu_vision_tok_init (GstNpuVisionTok * self)
{
  self->letterbox = DEFAULT_LETTERBOX;
  self->precision = DEFAULT_PRECISION;
  self->min_pixels = DEFAULT_MIN_PIXELS;
  self->max_pixels = DEFAULT_MAX_PIXELS;
}

static void
gst_npu_vision_tok_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (object);

  if (gst_npu_encoder_element_set_property (GST_NPU_ENCODER_ELEMENT (self),
          prop_id, value))
    return;
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_LETTERBOX:
      self->letterbox = g_value_get_boolean (value);
      break;
    case PROP_PRECISION:
      self->precision = g_value_get_enum (value);
      break;
    case PROP_MIN_PIXELS:
      self->min_pixels = g_value_get_uint (value);
      break;
    case PROP_MAX_PIXELS:
      self->max_pixels = g_value_get_uint (value);
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
  GstNpuEncoderElement *base = GST_NPU_ENCODER_ELEMENT (self);
  GstNpuImportStats stats = { 0, };

  if (gst_npu_encoder_element_get_property (base, prop_id, value))
    return;
  if (prop_id == PROP_BYTES_COPIED && base->importer)
    gst_npu_importer_get_stats (base->importer, &stats);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_LETTERBOX:
      g_value_set_boolean (value, self->letterbox);
      break;
    case PROP_PRECISION:
      g_value_set_enum (value, self->precision);
      break;
    case PROP_MIN_PIXELS:
      g_value_set_uint (value, self->min_pixels);
      break;
    case PROP_MAX_PIXELS:
      g_value_set_uint (value, self->max_pixels);
      break;
    case PROP_BYTES_COPIED:
      g_value_set_uint64 (value, stats.bytes_copied);
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
gst_npu_vision_tok_load_model (GstNpuEncoderElement * base,
    const gchar * path, GstNpuWeights * weights)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (base);
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
  if (base->engine_queue) {
    self->program = npu_vit_program_new (self->vit,
        npu_queue_get_device (base->engine_queue), &error);
    if (!self->program)
      goto no_program;
    GST_INFO_OBJECT (self, "encoder built for %s, %" G_GSIZE_FORMAT
        " bytes of weights copied", npu_device_get_name (npu_queue_get_device
            (base->engine_queue)),
        npu_vit_program_get_bytes_copied (self->program));
  }
  return TRUE;

  /* ERRORS */
open_failed:
  {
    gst_npu_element_post_model_open_error (GST_ELEMENT (self), path, "GGUF",
        error);
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
no_program:
  {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Cannot build the vision encoder of \"%s\" for its device: %s",
            path, error->message), ("%s", error->message));
    g_error_free (error);
    return FALSE;
  }
}

/* The model and what was made for it, once the queue has ended. */
static void
gst_npu_vision_tok_unload_model (GstNpuEncoderElement * base)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (base);

  /* the program reads the encoder's weights: first */
  g_clear_pointer (&self->program, npu_vit_program_free);
  g_clear_pointer (&self->vit, npu_vit_free);
  g_clear_pointer (&self->gguf, npu_gguf_free);
  g_clear_pointer (&self->plan, npu_vision_prep_plan_free);
  g_clear_pointer (&self->patches, g_free);
}

static void
gst_npu_vision_tok_start (GstNpuEncoderElement * base)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (base);

  GST_OBJECT_LOCK (self);
  self->frames_dmabuf = 0;
  GST_OBJECT_UNLOCK (self);
}

/* ------------------------------------------------------------------------
 * Caps
 */

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

/* The encoder's input for frames of @p's size: for a Qwen file with
 * max-pixels the frame's own size as Qwen's processor rounds it (and the
 * encoder's grid set to it), else the file's square image. */
static gboolean
fit_frame (GstNpuVisionTok * self, NpuVisionPrepParams * p, GError ** error)
{
  NpuVitProjector proj = npu_vit_get_projector (self->vit);
  guint patch = npu_vit_get_patch_size (self->vit);
  guint min_px, max_px, h, w;

  GST_OBJECT_LOCK (self);
  min_px = self->min_pixels;
  max_px = self->max_pixels;
  p->mode = self->letterbox ? NPU_VISION_PREP_LETTERBOX :
      NPU_VISION_PREP_STRETCH;
  GST_OBJECT_UNLOCK (self);
  p->out_width = p->out_height = npu_vit_get_image_size (self->vit);
  if (proj != NPU_VIT_PROJECTOR_QWEN2VL && proj != NPU_VIT_PROJECTOR_QWEN25VL)
    return TRUE;
  if (max_px) {
    if (!npu_vit_smart_resize (p->crop_height, p->crop_width, 2 * patch,
            min_px, max_px, &h, &w, error))
      return FALSE;
    p->out_width = w;
    p->out_height = h;
    /* the size keeps the frame's aspect ratio: stretched as HF resizes */
    p->mode = NPU_VISION_PREP_STRETCH;
  }
  /* a grid from earlier caps goes back to the square with max-pixels 0 */
  if (!npu_vit_set_patch_grid (self->vit, p->out_height / patch,
          p->out_width / patch, error))
    return FALSE;
  GST_INFO_OBJECT (self, "%ux%u frames resized to %ux%u: %u x %u tokens",
      p->width, p->height, p->out_width, p->out_height,
      p->out_width / patch / 2, p->out_height / patch / 2);
  return TRUE;
}

/* Called by the base with the encoder loaded and no frame in flight: the
 * plan and the patch scratch the old frames' tasks read may go, and the
 * encoder's grid may change. */
static gboolean
gst_npu_vision_tok_set_caps (GstNpuEncoderElement * base, GstCaps * caps)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (base);
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

  npu_vision_prep_params_init (&p);
  p.format = format;
  p.width = GST_VIDEO_INFO_WIDTH (&info);
  p.height = GST_VIDEO_INFO_HEIGHT (&info);
  gst_npu_video_formats_colorimetry (&info, &p.matrix, &p.range);
  p.crop_x = p.crop_y = 0;
  p.crop_width = p.width;
  p.crop_height = p.height;
  if (!fit_frame (self, &p, &error))
    goto bad_size;
  npu_vit_get_mean_std (self->vit, mean, std);
  for (i = 0; i < 3; i++) {
    p.mean[i] = mean[i];
    p.std[i] = std[i];
    /* Letterbox bars: the mean colour, i.e. zero after normalisation. */
    p.fill_rgb[i] = mean[i] * 255.0;
  }
  p.layout = NPU_VISION_PREP_LAYOUT_PATCHES;
  p.patch_size = npu_vit_get_patch_size (self->vit);

  if (self->plan)
    npu_vision_prep_plan_free (self->plan);
  self->plan = npu_vision_prep_plan_new (&p, &error);
  if (!self->plan)
    goto bad_plan;
  g_free (self->patches);
  self->patches = g_new (gfloat, npu_vision_prep_plan_get_n_floats
      (self->plan));
  self->info = info;

  dims = g_strdup_printf ("%u:%u", npu_vit_get_out_dim (self->vit),
      npu_vit_get_n_tokens (self->vit));
  out = gst_caps_new_simple ("other/tensors", "format", G_TYPE_STRING,
      "static", "num_tensors", G_TYPE_INT, 1, "types", G_TYPE_STRING,
      "float32", "dimensions", G_TYPE_STRING, dims, "framerate",
      GST_TYPE_FRACTION, GST_VIDEO_INFO_FPS_N (&info),
      GST_VIDEO_INFO_FPS_D (&info), NULL);
  g_free (dims);
  ok = gst_pad_set_caps (base->srcpad, out);
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
bad_size:
  {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION,
        ("Cannot fit %s %dx%d frames to the Qwen vision encoder: %s",
            GST_VIDEO_INFO_NAME (&info), GST_VIDEO_INFO_WIDTH (&info),
            GST_VIDEO_INFO_HEIGHT (&info), error->message),
        ("%s", error->message));
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

/* The encoder on its device: the preprocess writes the encoder's input in
 * the device's buffer, the program runs on the device's queue (this task,
 * on a CPU worker, waits for it: no streaming thread does), and the tokens
 * are copied from its output into the token buffer, the one copy of this
 * path (of the tokens, not of the frame). */
static gboolean
encode_on_device (GstNpuVisionTok * self, EncodeJob * job,
    const guint8 ** planes, const gssize * strides, NpuTask * task,
    GError ** error)
{
  GstNpuEncoderElement *base = GST_NPU_ENCODER_ELEMENT (self);
  NpuBuffer *in = npu_vit_program_get_input (self->program);
  NpuBuffer *out = npu_vit_program_get_output (self->program);
  GstClockTime pts = GST_BUFFER_PTS (job->inbuf);
  NpuFence *fence;
  NpuBytes bytes;
  gpointer p;
  gboolean ok;

  npu_events_stage (TRUE, "preprocess", pts);
  p = npu_buffer_map (in, NPU_BUFFER_MAP_WRITE, error);
  if (!p)
    return FALSE;
  npu_bytes_clear (&bytes);
  npu_vision_prep_run_counted (self->plan, planes, strides, p, task, &bytes);
  npu_buffer_unmap (in);
  npu_events_stage (FALSE, "preprocess", pts);
  npu_events_stage (TRUE, "vision encoder", pts);
  fence = npu_vit_program_submit (self->program, base->engine_queue, NULL, 0);
  ok = npu_fence_wait (fence, -1, error);
  npu_fence_unref (fence);
  npu_events_stage (FALSE, "vision encoder", pts);
  if (ok && (p = npu_buffer_map (out, NPU_BUFFER_MAP_READ, error))) {
    memcpy (job->out, p, npu_buffer_get_size (out));
    npu_buffer_unmap (out);
  } else {
    ok = FALSE;
  }
  gst_npu_memory_end_cpu_write (job->outmem);
  if (ok) {
    NpuBytes prog_bytes;

    /* the program's operations, counted once as it was recorded, and the
     * tokens' copy out of the device */
    npu_vit_program_get_bytes (self->program, &prog_bytes);
    npu_bytes_add (&bytes, &prog_bytes);
    npu_bytes_read (&bytes, NPU_BYTES_COPIES, npu_buffer_get_size (out));
    npu_bytes_write (&bytes, NPU_BYTES_COPIES, npu_buffer_get_size (out));
    gst_npu_encoder_element_report_bytes (base, task, "npuvisiontok-stats",
        pts, &bytes);
  }
  return ok;
}

/* The frame's bytes: its preprocess's (counted by the run) and its
 * encode's (the difference of the encoder's running count around it) */
static gboolean
encode_counted (GstNpuVisionTok * self, EncodeJob * job,
    const guint8 ** planes, const gssize * strides, NpuTask * task,
    GError ** error)
{
  GstClockTime pts = GST_BUFFER_PTS (job->inbuf);
  NpuBytes bytes, before, after, enc;
  gboolean ok;

  npu_bytes_clear (&bytes);
  /* Tasks of one queue run one at a time, so one scratch serves all. */
  npu_events_stage (TRUE, "preprocess", pts);
  npu_vision_prep_run_counted (self->plan, planes, strides, self->patches,
      task, &bytes);
  npu_events_stage (FALSE, "preprocess", pts);
  npu_events_stage (TRUE, "vision encoder", pts);
  npu_vit_get_bytes (self->vit, &before);
  ok = npu_vit_encode (self->vit, task, self->patches, job->out, error);
  npu_vit_get_bytes (self->vit, &after);
  npu_events_stage (FALSE, "vision encoder", pts);
  gst_npu_memory_end_cpu_write (job->outmem);
  if (ok) {
    npu_bytes_diff (&enc, &after, &before);
    npu_bytes_add (&bytes, &enc);
    gst_npu_encoder_element_report_bytes (GST_NPU_ENCODER_ELEMENT (self),
        task, "npuvisiontok-stats", pts, &bytes);
  }
  return ok;
}

static gboolean
encode_task (NpuTask * task, gpointer user_data, GError ** error)
{
  EncodeJob *job = user_data;
  GstNpuVisionTok *self = job->self;
  const guint8 *planes[GST_VIDEO_MAX_PLANES];
  gssize strides[GST_VIDEO_MAX_PLANES];
  guint i;

  for (i = 0; i < job->frame.n_planes; i++) {
    planes[i] = job->frame.data[i];
    strides[i] = job->frame.stride[i];
    /* where the preprocessing reads: upstream's memory, unless copied */
    gst_npu_input_watch_notify (GST_OBJECT (self), planes[i],
        job->frame.size[i]);
  }
  if (self->program)
    return encode_on_device (self, job, planes, strides, task, error);
  return encode_counted (self, job, planes, strides, task, error);
}

static void
encode_job_free (gpointer data)
{
  EncodeJob *job = data;

  gst_npu_importer_unmap_frame (GST_NPU_ENCODER_ELEMENT (job->self)->importer,
      &job->frame);
  gst_buffer_unref (job->inbuf);
  if (job->outmem)
    gst_memory_unref (job->outmem);
  g_free (job);
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

/* One frame, one task, in a slot of the in-flight window (the base's). */
static GstFlowReturn
gst_npu_vision_tok_handle_buffer (GstNpuEncoderElement * base, GstBuffer * buf)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (base);
  EncodeJob *job;
  GstBuffer *outbuf;
  GstFlowReturn ret;
  gboolean dropped;
  gsize out_bytes;

  ret = gst_npu_encoder_element_take_slot (base, GST_BUFFER_PTS (buf),
      GST_BUFFER_DURATION (buf), &dropped);
  if (ret != GST_FLOW_OK || dropped) {
    gst_buffer_unref (buf);
    return ret;
  }

  job = g_new0 (EncodeJob, 1);
  job->self = self;
  job->inbuf = buf;
  /* In place: NPU memory, or a foreign dma-buf/fd through its fd. */
  if (!gst_npu_importer_map_frame (base->importer, buf, &self->info,
          &job->frame))
    goto map_failed;

  out_bytes = (gsize) npu_vit_get_out_dim (self->vit) *
      npu_vit_get_n_tokens (self->vit) * sizeof (gfloat);
  job->outmem = gst_allocator_alloc (base->allocator, out_bytes, NULL);
  if (!job->outmem)
    goto no_memory;
  job->out = (gfloat *) gst_npu_memory_begin_cpu_write (job->outmem);

  GST_OBJECT_LOCK (self);
  if (job->frame.kind == GST_NPU_IMPORT_DMABUF)
    self->frames_dmabuf++;
  GST_OBJECT_UNLOCK (self);

  outbuf = make_token_buffer (self, job, buf);
  return gst_npu_encoder_element_push_task (base, outbuf, encode_task, job,
      encode_job_free);

  /* ERRORS */
map_failed:
  {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("Cannot read the frame in place: it is smaller than its caps "
            "(%s %dx%d) say, or its memory cannot be mapped.",
            GST_VIDEO_INFO_NAME (&self->info),
            GST_VIDEO_INFO_WIDTH (&self->info),
            GST_VIDEO_INFO_HEIGHT (&self->info)),
        ("buffer of %" G_GSIZE_FORMAT " bytes", gst_buffer_get_size (buf)));
    encode_job_free (job);
    gst_npu_encoder_element_release_slot (base);
    return GST_FLOW_ERROR;
  }
no_memory:
  {
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT,
        ("Cannot allocate the token tensor."), (NULL));
    encode_job_free (job);
    gst_npu_encoder_element_release_slot (base);
    return GST_FLOW_ERROR;
  }
}

/* ------------------------------------------------------------------------
 * Queries
 */
static gboolean
gst_npu_vision_tok_sink_query (GstNpuEncoderElement * base, GstQuery * query)
{
  GstNpuVisionTok *self = GST_NPU_VISION_TOK (base);
  GstObject *parent = GST_OBJECT (self);

  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_ALLOCATION:
      /* Upstream writes frames straight into NPU memory; the frames in
       * flight are held until their task has read them. */
      return gst_npu_propose_allocation (query, base->allocator,
          gst_npu_encoder_element_get_max_inflight (base) + 1, 0);
#if GST_CHECK_VERSION(1, 24, 0)
    case GST_QUERY_ACCEPT_CAPS:{
      GstCaps *caps;
      gboolean accepted;

      if (!gst_pad_query_default (base->sinkpad, parent, query))
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
      return gst_pad_query_default (base->sinkpad, parent, query);
  }
}
