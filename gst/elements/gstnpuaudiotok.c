/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npuaudiotok, microphone audio to audio tokens */

/**
 * SECTION:element-npuaudiotok
 * @title: npuaudiotok
 *
 * Turns audio into the tokens of a Whisper-style audio encoder and its
 * projector (llama.cpp audio "mmproj" GGUF: qwen2a, ultravox), ready for
 * npullm's `audio` pad.
 *
 * Any interleaved S16LE, S32LE or F32LE audio of 1 to 8 channels at 8 to
 * 48 kHz is taken as it comes (no audioconvert or audioresample needed):
 * each buffer is read once, in place, by a GstAudioConverter that mixes it
 * to mono and resamples it to the encoder's 16 kHz.  `propose_allocation`
 * offers NPU memory, so audiotestsrc, alsasrc and pulsesrc write into it.
 * #GstNpuAudioTok:bytes-copied counts the PCM bytes copied: only the bytes
 * of a sample frame split between two memories are.  Under
 * `audio/x-raw(memory:DMABuf)` caps the dma-bufs are read in place through
 * their fd (counted in #GstNpuAudioTok:buffers-dmabuf).
 *
 * The 16 kHz signal is cut into chunks of #GstNpuAudioTok:chunk-duration
 * (30 s by default, what llama.cpp encodes at once), consecutive chunks
 * sharing #GstNpuAudioTok:overlap.  A chunk goes through the Whisper
 * log-mel exactly as llama.cpp computes it for a clip of that length, then
 * the encoder and projector, as one task on the CPU backend.  The output
 * buffer (`other/tensors`, one float32 tensor of dim x tokens, in NPU
 * memory) is pushed at once with the task's fence and a #GstNpuTokensMeta
 * marked audio, stamped with the PTS and duration of the audio it covers.
 *
 * With #GstNpuAudioTok:vad (the default) an energy gate keeps silence out:
 * a chunk without a 10 ms frame above #GstNpuAudioTok:vad-threshold gives
 * no tokens.  With #GstNpuAudioTok:vad-split, voice also cuts the chunks:
 * a chunk starts #GstNpuAudioTok:vad-hangover before the voice and ends
 * that long after it, so an utterance is answered without waiting for the
 * chunk to fill.  At EOS the partial chunk is encoded.
 *
 * At most #GstNpuAudioTok:max-inflight chunks are being encoded at once;
 * past that, #GstNpuAudioTok:policy blocks upstream or drops a chunk
 * (counted in #GstNpuAudioTok:chunks-dropped, and reported as QoS).
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 audiotestsrc wave=sine num-buffers=300 ! \
 *     npuaudiotok model=mmproj-audio.gguf vad=false chunk-duration=3000000000 ! fakesink
 * gst-launch-1.0 pulsesrc ! npuaudiotok model=mmproj-audio.gguf vad-split=true ! llm.audio \
 *     npullm name=llm model=text.gguf prompt="What did you hear?" ! fdsink
 * ]|
 *
 * Since: 0.1.0
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpuaudiotok.h"
#include "gstnpuanalytics.h"
#include "gstnpuprecision.h"

#include <math.h>
#include <string.h>
#include <gst/audio/audio.h>
#include <npu/npu.h>
#include <npu/gstnpuelementutils.h>
#include <npu/gstnpuencoderelement.h>
#include <core/models/npuaudioenc.h>
#include <core/device/npubackend.h>
#include <core/formats/npugguf.h>

GST_DEBUG_CATEGORY_STATIC (gst_npu_audio_tok_debug);
#define GST_CAT_DEFAULT gst_npu_audio_tok_debug

#define DEFAULT_MODEL NULL
#define DEFAULT_CHUNK_DURATION (30 * GST_SECOND)
#define MIN_CHUNK_DURATION (100 * GST_MSECOND)
#define DEFAULT_OVERLAP 0
#define DEFAULT_VAD TRUE
#define DEFAULT_VAD_THRESHOLD -50.0
#define DEFAULT_VAD_HANGOVER (500 * GST_MSECOND)
#define DEFAULT_VAD_SPLIT FALSE
/* the base's defaults */
#define DEFAULT_MAX_INFLIGHT GST_NPU_ENCODER_ELEMENT_DEFAULT_MAX_INFLIGHT
#define DEFAULT_POLICY GST_NPU_ENCODER_ELEMENT_DEFAULT_POLICY
#define DEFAULT_N_THREADS 0
#define DEFAULT_PRECISION GST_NPU_PRECISION_ACCURATE

/* the encoder's frame: the log-mel's hop, and the gate's 10 ms */
#define HOP 160
/* a timestamp this far from where the samples say starts a new stream */
#define MAX_DRIFT (20 * GST_MSECOND)

/* The properties GstNpuEncoderElement keeps are installed under its ids,
 * so that the base reads and writes them. */
enum
{
  PROP_0,
  PROP_MODEL = GST_NPU_ENCODER_ELEMENT_PROP_MODEL,
  PROP_N_THREADS = GST_NPU_ENCODER_ELEMENT_PROP_N_THREADS,
  PROP_MAX_INFLIGHT = GST_NPU_ENCODER_ELEMENT_PROP_MAX_INFLIGHT,
  PROP_POLICY = GST_NPU_ENCODER_ELEMENT_PROP_POLICY,
  PROP_CHUNKS_PROCESSED = GST_NPU_ENCODER_ELEMENT_PROP_PROCESSED,
  PROP_CHUNKS_DROPPED = GST_NPU_ENCODER_ELEMENT_PROP_DROPPED,
  PROP_DEVICE = GST_NPU_ENCODER_ELEMENT_PROP_DEVICE,
  PROP_PJ_PER_BIT = GST_NPU_ENCODER_ELEMENT_PROP_PJ_PER_BIT,
  PROP_CHUNK_DURATION = GST_NPU_ENCODER_ELEMENT_PROP_LAST,
  PROP_OVERLAP,
  PROP_VAD,
  PROP_VAD_THRESHOLD,
  PROP_VAD_HANGOVER,
  PROP_VAD_SPLIT,
  PROP_PRECISION,
  PROP_BYTES_COPIED,
  PROP_CHUNKS_SILENT,
  PROP_BUFFERS_DMABUF,
};

/* the base's policy logic reads this element's policy values */
G_STATIC_ASSERT ((gint) GST_NPU_AUDIO_TOK_POLICY_BLOCK ==
    (gint) GST_NPU_ENCODER_POLICY_BLOCK);
G_STATIC_ASSERT ((gint) GST_NPU_AUDIO_TOK_POLICY_DROP_NEWEST ==
    (gint) GST_NPU_ENCODER_POLICY_DROP_NEWEST);
G_STATIC_ASSERT ((gint) GST_NPU_AUDIO_TOK_POLICY_DROP_OLDEST ==
    (gint) GST_NPU_ENCODER_POLICY_DROP_OLDEST);

#define AUDIO_FIELDS "format=(string){ S16LE, S32LE, F32LE }, " \
  "layout=(string)interleaved, rate=(int)[ 8000, 48000 ], " \
  "channels=(int)[ 1, 8 ]"
#define AUDIO_CAPS "audio/x-raw, " AUDIO_FIELDS "; " \
  "audio/x-raw(" GST_CAPS_FEATURE_MEMORY_DMABUF "), " AUDIO_FIELDS
static GstStaticCaps sink_caps = GST_STATIC_CAPS (AUDIO_CAPS);

/* One chunk of 16 kHz mono samples, waiting or being encoded. */
typedef struct
{
  gfloat *samples;              /* window_len, zeros past n */
  gsize n;
  guint64 start;                /* index of its first sample in the stream */
  gboolean voiced;
} Chunk;

struct _GstNpuAudioTok
{
  GstNpuEncoderElement parent;

  /* properties, under the object lock */
  GstClockTime chunk_duration, overlap, vad_hangover;
  gboolean vad, vad_split;
  gdouble vad_threshold;
  GstNpuPrecision precision;
  guint64 chunks_silent, bytes_copied;
  guint64 buffers_dmabuf;

  /* the model, from load_model to unload_model */
  NpuAudioEnc *enc;
  NpuAudioEncProgram *program;  /* built for `device` and the window, or NULL */
  NpuGguf *gguf;                /* model property: the tensors live here */

  /* per caps, streaming thread; the base calls set_caps with no chunk in
   * flight */
  GstAudioInfo info;
  GstNpuAudioFrontend *fe;
  gfloat *conv;                 /* the converter's output for one memory */
  gsize conv_len;
  guint8 split[64];             /* a sample frame split between memories */
  guint split_len;
  guint window_frames, n_tokens;
  gsize window_len, overlap_len, hangover_len;
  gboolean vad_on, split_on;
  gdouble vad_power;            /* threshold as a mean square */

  /* the stream, streaming thread */
  GstClockTime base_ts;         /* time of stream sample 0 */
  guint64 n_in;                 /* input frames since base_ts */
  guint64 n_out;                /* 16 kHz samples since base_ts */
  Chunk *chunk;                 /* the open one */
  gdouble energy;               /* of the current 10 ms frame */
  guint energy_n;
  guint64 last_voiced;          /* end of the last voiced frame */

  /* encoding: tasks of one queue run one at a time, one scratch serves */
  GstNpuLogMel *log_mel;
  gfloat *mel;
};

#define gst_npu_audio_tok_parent_class parent_class
G_DEFINE_TYPE (GstNpuAudioTok, gst_npu_audio_tok, GST_TYPE_NPU_ENCODER_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (npuaudiotok, "npuaudiotok",
    GST_RANK_NONE, GST_TYPE_NPU_AUDIO_TOK,
    GST_DEBUG_CATEGORY_INIT (gst_npu_audio_tok_debug, "npuaudiotok", 0,
        "audio to audio tokens"));

#define GST_TYPE_NPU_AUDIO_TOK_POLICY (gst_npu_audio_tok_policy_get_type ())
static GType
gst_npu_audio_tok_policy_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    {GST_NPU_AUDIO_TOK_POLICY_BLOCK, "Wait for a slot (back-pressure)",
        "block"},
    {GST_NPU_AUDIO_TOK_POLICY_DROP_NEWEST, "Drop the chunk just completed",
        "drop-newest"},
    {GST_NPU_AUDIO_TOK_POLICY_DROP_OLDEST,
        "Cancel the oldest chunk not yet being encoded", "drop-oldest"},
    {0, NULL, NULL}
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstNpuAudioTokPolicy", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

static void gst_npu_audio_tok_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec);
static void gst_npu_audio_tok_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec);
static gboolean gst_npu_audio_tok_load_model (GstNpuEncoderElement * base,
    const gchar * path, GstNpuWeights * weights);
static void gst_npu_audio_tok_unload_model (GstNpuEncoderElement * base);
static void gst_npu_audio_tok_start (GstNpuEncoderElement * base);
static gboolean gst_npu_audio_tok_set_caps (GstNpuEncoderElement * base,
    GstCaps * caps);
static GstFlowReturn gst_npu_audio_tok_handle_buffer (GstNpuEncoderElement *
    base, GstBuffer * buf);
static GstFlowReturn gst_npu_audio_tok_drain (GstNpuEncoderElement * base);
static void gst_npu_audio_tok_reset (GstNpuEncoderElement * base);
static gboolean gst_npu_audio_tok_sink_query (GstNpuEncoderElement * base,
    GstQuery * query);
static GstClockTime gst_npu_audio_tok_get_latency (GstNpuEncoderElement * base);

/* The model and the compute: fixed once the element is READY. */
static void
install_model_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  /**
   * GstNpuAudioTok:model:
   *
   * An audio mmproj GGUF (llama.cpp's layout: a Whisper-style encoder and
   * a qwen2a or ultravox projector).  Leave unset to take the weights from
   * mxfp4weights on the `weights` pad.
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "Audio mmproj GGUF (Whisper-style encoder + qwen2a/ultravox "
          "projector); unset: weights come on the weights pad", DEFAULT_MODEL,
          rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuAudioTok:n-threads:
   *
   * Threads of the CPU backend (0: one per CPU).
   */
  g_object_class_install_property (gobject_class, PROP_N_THREADS,
      g_param_spec_uint ("n-threads", "Threads",
          "CPU backend threads (0 = one per CPU)", 0, 1024,
          DEFAULT_N_THREADS, rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuAudioTok:device:
   *
   * The engine the audio encoder runs on: `cpu` (the default), `auto` (the
   * CPU until a measurement says otherwise), `vulkan` or `vulkan:N` (the
   * Nth Vulkan device, `gst-device-monitor-1.0 Compute` lists them).  The
   * resampler and the log-mel run on the CPU and write the encoder's input
   * in the device's memory; on Vulkan the encoder's products are F32 ones
   * (#GstNpuAudioTok:precision is the CPU's).  A device that cannot be
   * opened is an error when the element starts.  docs/vulkan.md says what
   * runs where and how fast.
   */
  g_object_class_install_property (gobject_class, PROP_DEVICE,
      g_param_spec_string ("device", "Device",
          "Engine of the encoder: cpu, auto, vulkan, vulkan:N", "cpu",
          rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuAudioTok:precision:
   *
   * Activations of the encoder's matrix products, as npuvisiontok's:
   * `accurate` (default) keeps at least about 16 bits (int16 activations
   * in AVX-512 GEMMs, F32 in AVX2 ones, elsewhere int8 and their int8
   * residual); `fast` uses
   * int8 activations as llama.cpp does.
   * docs/npuaudiotok.md gives both and the measured encode times.
   */
  g_object_class_install_property (gobject_class, PROP_PRECISION,
      g_param_spec_enum ("precision", "Precision",
          "Activations of the matrix products: accurate (~16 bits) or fast "
          "(int8)", GST_TYPE_NPU_PRECISION, DEFAULT_PRECISION,
          rw | GST_PARAM_MUTABLE_READY));
}

/* How the audio is cut into chunks, and the voice gate. */
static void
install_chunk_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  /**
   * GstNpuAudioTok:chunk-duration:
   *
   * Audio per chunk, in nanoseconds.  30 s (the default) is what llama.cpp
   * encodes at once and what the encoder's positions cover; a shorter
   * window uses the first positions and gives proportionally fewer tokens,
   * trading what the model hears at once for latency.  Rounded down to
   * 20 ms (two mel frames) and to the model's window.
   */
  g_object_class_install_property (gobject_class, PROP_CHUNK_DURATION,
      g_param_spec_uint64 ("chunk-duration", "Chunk duration",
          "Audio per chunk in ns (30 s: llama.cpp's window; shorter: fewer "
          "tokens, less latency)", MIN_CHUNK_DURATION, 30 * GST_SECOND,
          DEFAULT_CHUNK_DURATION, rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuAudioTok:overlap:
   *
   * Audio, in nanoseconds, that a chunk repeats from the end of the one
   * before it, so that a word cut by a chunk's end is heard whole in the
   * next.  Must be shorter than #GstNpuAudioTok:chunk-duration.
   */
  g_object_class_install_property (gobject_class, PROP_OVERLAP,
      g_param_spec_uint64 ("overlap", "Overlap",
          "Audio in ns a chunk repeats from the previous one (shorter than "
          "chunk-duration)", 0,
          29 * GST_SECOND, DEFAULT_OVERLAP, rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuAudioTok:vad:
   *
   * Gate silence out by energy: a chunk with no 10 ms frame louder than
   * #GstNpuAudioTok:vad-threshold gives no tokens.  With
   * #GstNpuAudioTok:vad-split, voice also cuts the chunks.
   */
  g_object_class_install_property (gobject_class, PROP_VAD,
      g_param_spec_boolean ("vad", "Voice activity gate",
          "Send no tokens for chunks with no voice",
          DEFAULT_VAD, rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuAudioTok:vad-threshold:
   *
   * RMS level of a 10 ms frame, in dB relative to full scale (a full-scale
   * square wave is 0 dB, a full-scale sine -3 dB), above which it counts
   * as voice.
   */
  g_object_class_install_property (gobject_class, PROP_VAD_THRESHOLD,
      g_param_spec_double ("vad-threshold", "VAD threshold",
          "RMS level of a 10 ms frame in dBFS above which it is voice",
          -120.0, 0.0, DEFAULT_VAD_THRESHOLD, rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuAudioTok:vad-hangover:
   *
   * With #GstNpuAudioTok:vad-split: silence, in nanoseconds, after which
   * a chunk with voice in it ends; also the silence kept before the first
   * voiced frame of a chunk.
   */
  g_object_class_install_property (gobject_class, PROP_VAD_HANGOVER,
      g_param_spec_uint64 ("vad-hangover", "VAD hangover",
          "With vad-split: silence in ns that ends a chunk with voice (and "
          "is kept before voice)", 10 * GST_MSECOND, 10 * GST_SECOND,
          DEFAULT_VAD_HANGOVER, rw | GST_PARAM_MUTABLE_READY));
  /**
   * GstNpuAudioTok:vad-split:
   *
   * Cut chunks by voice: drop silence before it (keeping
   * #GstNpuAudioTok:vad-hangover of it) and end a chunk that much silence
   * after it, so an utterance is answered as soon as it ends instead of
   * when the chunk is full.  Off by default: chunks are then exactly the
   * clips llama.cpp would encode.
   */
  g_object_class_install_property (gobject_class, PROP_VAD_SPLIT,
      g_param_spec_boolean ("vad-split", "Split by voice",
          "Cut chunks at voice onsets and after vad-hangover of silence "
          "(lower latency; chunks no longer llama.cpp's clips)",
          DEFAULT_VAD_SPLIT, rw | GST_PARAM_MUTABLE_READY));
}

/* What happens when chunks come faster than they are encoded. */
static void
install_queue_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;

  /**
   * GstNpuAudioTok:max-inflight:
   *
   * Chunks being encoded at once; past that, #GstNpuAudioTok:policy.
   */
  g_object_class_install_property (gobject_class, PROP_MAX_INFLIGHT,
      g_param_spec_uint ("max-inflight", "Max in flight",
          "Chunks being encoded at once", 1, 64, DEFAULT_MAX_INFLIGHT,
          rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuAudioTok:policy:
   *
   * What to do with a completed chunk when #GstNpuAudioTok:max-inflight
   * are being encoded.
   */
  g_object_class_install_property (gobject_class, PROP_POLICY,
      g_param_spec_enum ("policy", "Policy",
          "What to do with a chunk when max-inflight are being encoded",
          GST_TYPE_NPU_AUDIO_TOK_POLICY, DEFAULT_POLICY,
          rw | GST_PARAM_MUTABLE_PLAYING));
}

/* Read-only counters. */
static void
install_statistics_properties (GObjectClass * gobject_class)
{
  const GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  /**
   * GstNpuAudioTok:pj-per-bit:
   *
   * The energy a bit moved to or from memory costs, in picojoules, for
   * the estimate the npuaudiotok-stats message gives, after each chunk, from the
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
   * GstNpuAudioTok:bytes-copied:
   *
   * PCM bytes copied before conversion: the bytes of sample frames split
   * between two memories or buffers, stitched together; zero when every
   * memory holds whole frames (all GStreamer sources, rawaudioparse).
   */
  g_object_class_install_property (gobject_class, PROP_BYTES_COPIED,
      g_param_spec_uint64 ("bytes-copied", "Bytes copied",
          "PCM bytes copied (only frames split between memories)", 0,
          G_MAXUINT64, 0, ro));
  /**
   * GstNpuAudioTok:buffers-dmabuf:
   *
   * Buffers with dma-buf memory (`audio/x-raw(memory:DMABuf)`), read in
   * place through the dma-buf's fd, bracketed by DMA_BUF_IOCTL_SYNC.
   */
  g_object_class_install_property (gobject_class, PROP_BUFFERS_DMABUF,
      g_param_spec_uint64 ("buffers-dmabuf", "Buffers in dma-bufs",
          "Buffers read in place from dma-buf memory", 0, G_MAXUINT64, 0, ro));
  /**
   * GstNpuAudioTok:chunks-processed:
   *
   * Chunks encoded into tokens.
   */
  g_object_class_install_property (gobject_class, PROP_CHUNKS_PROCESSED,
      g_param_spec_uint64 ("chunks-processed", "Chunks processed",
          "Chunks turned into tokens", 0, G_MAXUINT64, 0, ro));
  /**
   * GstNpuAudioTok:chunks-dropped:
   *
   * Chunks dropped by the drop policies.
   */
  g_object_class_install_property (gobject_class, PROP_CHUNKS_DROPPED,
      g_param_spec_uint64 ("chunks-dropped", "Chunks dropped",
          "Chunks dropped by the drop policies", 0, G_MAXUINT64, 0, ro));
  /**
   * GstNpuAudioTok:chunks-silent:
   *
   * Chunks the voice-activity gate kept back as silence.
   */
  g_object_class_install_property (gobject_class, PROP_CHUNKS_SILENT,
      g_param_spec_uint64 ("chunks-silent", "Chunks silent",
          "Chunks with no voice, sent no tokens", 0, G_MAXUINT64, 0, ro));
}

static void
gst_npu_audio_tok_class_init (GstNpuAudioTokClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstNpuEncoderElementClass *encoder_class =
      GST_NPU_ENCODER_ELEMENT_CLASS (klass);
  GstCaps *caps;

  gobject_class->set_property = gst_npu_audio_tok_set_property;
  gobject_class->get_property = gst_npu_audio_tok_get_property;

  install_model_properties (gobject_class);
  install_chunk_properties (gobject_class);
  install_queue_properties (gobject_class);
  install_statistics_properties (gobject_class);

  caps = gst_static_caps_get (&sink_caps);
  gst_npu_encoder_element_class_add_pad_templates (encoder_class, caps);
  gst_caps_unref (caps);
  gst_element_class_set_static_metadata (element_class,
      "NPU audio tokenizer", "Filter/Converter/Audio/Tensor",
      "Turns audio, read in place, into the tokens of a Whisper-style "
      "audio encoder for a language model", "gst-npu developers");

  encoder_class->load_model = gst_npu_audio_tok_load_model;
  encoder_class->unload_model = gst_npu_audio_tok_unload_model;
  encoder_class->start = gst_npu_audio_tok_start;
  encoder_class->set_caps = gst_npu_audio_tok_set_caps;
  encoder_class->handle_buffer = gst_npu_audio_tok_handle_buffer;
  encoder_class->drain = gst_npu_audio_tok_drain;
  encoder_class->reset = gst_npu_audio_tok_reset;
  encoder_class->sink_query = gst_npu_audio_tok_sink_query;
  encoder_class->get_latency = gst_npu_audio_tok_get_latency;

  gst_type_mark_as_plugin_api (GST_TYPE_NPU_AUDIO_TOK_POLICY, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_NPU_PRECISION, 0);
}

static void
gst_npu_audio_tok_init (GstNpuAudioTok * self)
{
  self->chunk_duration = DEFAULT_CHUNK_DURATION;
  self->overlap = DEFAULT_OVERLAP;
  self->vad = DEFAULT_VAD;
  self->vad_threshold = DEFAULT_VAD_THRESHOLD;
  self->vad_hangover = DEFAULT_VAD_HANGOVER;
  self->vad_split = DEFAULT_VAD_SPLIT;
  self->precision = DEFAULT_PRECISION;
}

static void
gst_npu_audio_tok_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (object);

  if (gst_npu_encoder_element_set_property (GST_NPU_ENCODER_ELEMENT (self),
          prop_id, value))
    return;
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_CHUNK_DURATION:
      self->chunk_duration = g_value_get_uint64 (value);
      break;
    case PROP_OVERLAP:
      self->overlap = g_value_get_uint64 (value);
      break;
    case PROP_VAD:
      self->vad = g_value_get_boolean (value);
      break;
    case PROP_VAD_THRESHOLD:
      self->vad_threshold = g_value_get_double (value);
      break;
    case PROP_VAD_HANGOVER:
      self->vad_hangover = g_value_get_uint64 (value);
      break;
    case PROP_VAD_SPLIT:
      self->vad_split = g_value_get_boolean (value);
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
gst_npu_audio_tok_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (object);

  if (gst_npu_encoder_element_get_property (GST_NPU_ENCODER_ELEMENT (self),
          prop_id, value))
    return;
  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_CHUNK_DURATION:
      g_value_set_uint64 (value, self->chunk_duration);
      break;
    case PROP_OVERLAP:
      g_value_set_uint64 (value, self->overlap);
      break;
    case PROP_VAD:
      g_value_set_boolean (value, self->vad);
      break;
    case PROP_VAD_THRESHOLD:
      g_value_set_double (value, self->vad_threshold);
      break;
    case PROP_VAD_HANGOVER:
      g_value_set_uint64 (value, self->vad_hangover);
      break;
    case PROP_VAD_SPLIT:
      g_value_set_boolean (value, self->vad_split);
      break;
    case PROP_PRECISION:
      g_value_set_enum (value, self->precision);
      break;
    case PROP_BYTES_COPIED:
      g_value_set_uint64 (value, self->bytes_copied);
      break;
    case PROP_BUFFERS_DMABUF:
      g_value_set_uint64 (value, self->buffers_dmabuf);
      break;
    case PROP_CHUNKS_SILENT:
      g_value_set_uint64 (value, self->chunks_silent);
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
static gboolean
lookup_weights (const gchar * name, NpuTensorView * out, gpointer data)
{
  return gst_npu_weights_lookup (data, name, out);
}

/* Opens the mmproj at @path; tensors from @weights, else from the file. */
static gboolean
gst_npu_audio_tok_load_model (GstNpuEncoderElement * base, const gchar * path,
    GstNpuWeights * weights)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (base);
  GError *error = NULL;

  self->gguf = npu_gguf_open (path, &error);
  if (!self->gguf)
    goto open_failed;
  self->enc = npu_audio_enc_new (self->gguf, weights ? lookup_weights : NULL,
      weights, &error);
  if (!self->enc)
    goto bad_model;
  if (npu_audio_enc_get_sample_rate (self->enc) != GST_NPU_LOG_MEL_SAMPLE_RATE)
    goto bad_rate;
  GST_OBJECT_LOCK (self);
  npu_audio_enc_set_precision (self->enc, (NpuMatmulPrecision) self->precision);
  GST_OBJECT_UNLOCK (self);
  GST_INFO_OBJECT (self, "%s: %u mels, up to %u frames, %u-wide tokens",
      path, npu_audio_enc_get_n_mels (self->enc),
      npu_audio_enc_get_max_frames (self->enc),
      npu_audio_enc_get_out_dim (self->enc));
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
        ("Model \"%s\" is not a usable audio encoder: %s", path,
            error->message), ("%s", error->message));
    g_error_free (error);
    return FALSE;
  }
bad_rate:
  {
    GST_ELEMENT_ERROR (self, STREAM, WRONG_TYPE,
        ("Model \"%s\" is not a usable audio encoder: it wants %u Hz, the "
            "Whisper front end gives %u Hz", path,
            npu_audio_enc_get_sample_rate (self->enc),
            GST_NPU_LOG_MEL_SAMPLE_RATE), (NULL));
    g_clear_pointer (&self->enc, npu_audio_enc_free);
    return FALSE;
  }
}

/* ------------------------------------------------------------------------
 * Caps
 */
static void
stream_reset (GstNpuAudioTok * self)
{
  if (self->chunk) {
    g_free (self->chunk->samples);
    g_free (self->chunk);
    self->chunk = NULL;
  }
  if (self->fe)
    gst_npu_audio_frontend_reset (self->fe);
  self->base_ts = GST_CLOCK_TIME_NONE;
  self->n_in = self->n_out = 0;
  self->energy = 0.0;
  self->energy_n = 0;
  self->last_voiced = 0;
  self->split_len = 0;
}

/* Called by the base with the encoder loaded, the old audio drained (a
 * clip of its own) and no chunk in flight: the front end, the log-mel and
 * its scratch, which the old chunks' tasks read, may go. */
static gboolean
gst_npu_audio_tok_set_caps (GstNpuEncoderElement * base, GstCaps * caps)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (base);
  GstAudioInfo info;
  GError *error = NULL;
  GstClockTime chunk, overlap, hangover;
  GstCaps *out;
  gchar *dims;
  guint frames;
  gboolean ok;

  if (!gst_npu_audio_frontend_parse_caps (caps, &info, &error))
    goto bad_caps;

  GST_OBJECT_LOCK (self);
  chunk = self->chunk_duration;
  overlap = self->overlap;
  hangover = self->vad_hangover;
  self->vad_on = self->vad;
  self->split_on = self->vad && self->vad_split;
  self->vad_power = pow (10.0, self->vad_threshold / 10.0);
  GST_OBJECT_UNLOCK (self);

  /* the window: whole pairs of mel frames, no longer than the model's */
  frames = gst_util_uint64_scale (chunk, GST_NPU_LOG_MEL_SAMPLE_RATE,
      GST_SECOND * HOP) & ~1u;
  frames = MIN (frames, npu_audio_enc_get_max_frames (self->enc)) & ~1u;
  if (overlap >= chunk)
    goto bad_overlap;
  self->n_tokens = npu_audio_enc_get_n_tokens (self->enc, frames);
  if (self->n_tokens == 0)
    goto bad_window;
  self->window_frames = frames;
  self->window_len = (gsize) frames *HOP;
  self->overlap_len = MIN (gst_util_uint64_scale (overlap,
          GST_NPU_LOG_MEL_SAMPLE_RATE, GST_SECOND), self->window_len / 2);
  self->hangover_len = MIN (gst_util_uint64_scale (hangover,
          GST_NPU_LOG_MEL_SAMPLE_RATE, GST_SECOND), self->window_len / 2);

  if (self->fe)
    gst_npu_audio_frontend_free (self->fe);
  self->fe = gst_npu_audio_frontend_new (&info, GST_NPU_LOG_MEL_SAMPLE_RATE,
      &error);
  if (!self->fe)
    goto bad_caps;
  self->info = info;
  stream_reset (self);

  if (self->log_mel)
    gst_npu_log_mel_free (self->log_mel);
  self->log_mel = gst_npu_log_mel_new (npu_audio_enc_get_n_mels (self->enc));
  g_free (self->mel);
  self->mel = g_new (gfloat, (gsize) frames *
      npu_audio_enc_get_n_mels (self->enc));
  /* the encoder built for the device and this window; no chunk is in
   * flight */
  g_clear_pointer (&self->program, npu_audio_enc_program_free);
  if (base->engine_queue) {
    self->program = npu_audio_enc_program_new (self->enc,
        npu_queue_get_device (base->engine_queue), frames, &error);
    if (!self->program)
      goto no_program;
  }
  GST_INFO_OBJECT (self, "%s, %d ch, %d Hz; window %u frames -> %u tokens",
      GST_AUDIO_INFO_NAME (&info), GST_AUDIO_INFO_CHANNELS (&info),
      GST_AUDIO_INFO_RATE (&info), frames, self->n_tokens);

  dims = g_strdup_printf ("%u:%u", npu_audio_enc_get_out_dim (self->enc),
      self->n_tokens);
  out = gst_caps_new_simple ("other/tensors", "format", G_TYPE_STRING,
      "static", "num_tensors", G_TYPE_INT, 1, "types", G_TYPE_STRING,
      "float32", "dimensions", G_TYPE_STRING, dims, "framerate",
      GST_TYPE_FRACTION, 0, 1, NULL);
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
bad_overlap:
  {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
        ("The overlap (%" GST_TIME_FORMAT ") must be shorter than the chunk "
            "(%" GST_TIME_FORMAT ").", GST_TIME_ARGS (overlap),
            GST_TIME_ARGS (chunk)), (NULL));
    return FALSE;
  }
bad_window:
  {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
        ("The encoder cannot take a window of %u mel frames (chunk-duration "
            "%" GST_TIME_FORMAT ").", frames, GST_TIME_ARGS (chunk)), (NULL));
    return FALSE;
  }
no_program:
  {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Cannot build the audio encoder for its device: %s",
            error->message), ("%s", error->message));
    g_error_free (error);
    return FALSE;
  }
}

/* ------------------------------------------------------------------------
 * Encoding
 */
typedef struct
{
  GstNpuAudioTok *self;
  Chunk *chunk;
  GstClockTime pts;             /* the chunk's, for the stats message */
  GstMemory *outmem;
  gfloat *out;
} EncodeJob;

/* The encoder on its device: the log-mel written in the device's buffer,
 * the program run on the device's queue (this task, on a CPU worker,
 * waits for it: no streaming thread does), the tokens copied from its
 * output into the token buffer. */
static gboolean
encode_on_device (GstNpuAudioTok * self, EncodeJob * job, NpuTask * task,
    GError ** error)
{
  GstNpuEncoderElement *base = GST_NPU_ENCODER_ELEMENT (self);
  NpuBuffer *in = npu_audio_enc_program_get_input (self->program);
  NpuBuffer *out = npu_audio_enc_program_get_output (self->program);
  NpuFence *fence;
  NpuBytes bytes;
  gpointer p;
  gboolean ok;

  npu_events_stage (TRUE, "log-mel", NPU_EVENT_NO_TAG);
  p = npu_buffer_map (in, NPU_BUFFER_MAP_WRITE, error);
  if (!p)
    return FALSE;
  npu_bytes_clear (&bytes);
  gst_npu_log_mel_compute_counted (self->log_mel, job->chunk->samples,
      job->chunk->n, self->window_frames, p, &bytes);
  npu_buffer_unmap (in);
  npu_events_stage (FALSE, "log-mel", NPU_EVENT_NO_TAG);
  npu_events_stage (TRUE, "audio encoder", NPU_EVENT_NO_TAG);
  fence = npu_audio_enc_program_submit (self->program, base->engine_queue,
      NULL, 0);
  ok = npu_fence_wait (fence, -1, error);
  npu_fence_unref (fence);
  npu_events_stage (FALSE, "audio encoder", NPU_EVENT_NO_TAG);
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
    npu_audio_enc_program_get_bytes (self->program, &prog_bytes);
    npu_bytes_add (&bytes, &prog_bytes);
    npu_bytes_read (&bytes, NPU_BYTES_COPIES, npu_buffer_get_size (out));
    npu_bytes_write (&bytes, NPU_BYTES_COPIES, npu_buffer_get_size (out));
    gst_npu_encoder_element_report_bytes (base, task, "npuaudiotok-stats",
        job->pts, &bytes);
  }
  return ok;
}

static gboolean
encode_task (NpuTask * task, gpointer user_data, GError ** error)
{
  EncodeJob *job = user_data;
  GstNpuAudioTok *self = job->self;
  NpuBytes bytes, before, after, enc;
  gboolean ok;

  if (self->program)
    return encode_on_device (self, job, task, error);

  /* the log-mel of the chunk as llama.cpp's for a clip of that length */
  npu_bytes_clear (&bytes);
  npu_events_stage (TRUE, "log-mel", NPU_EVENT_NO_TAG);
  gst_npu_log_mel_compute_counted (self->log_mel, job->chunk->samples,
      job->chunk->n, self->window_frames, self->mel, &bytes);
  npu_events_stage (FALSE, "log-mel", NPU_EVENT_NO_TAG);
  npu_events_stage (TRUE, "audio encoder", NPU_EVENT_NO_TAG);
  npu_audio_enc_get_bytes (self->enc, &before);
  ok = npu_audio_enc_encode (self->enc, task, self->mel, self->window_frames,
      job->out, error);
  npu_audio_enc_get_bytes (self->enc, &after);
  npu_events_stage (FALSE, "audio encoder", NPU_EVENT_NO_TAG);
  gst_npu_memory_end_cpu_write (job->outmem);
  if (ok) {
    npu_bytes_diff (&enc, &after, &before);
    npu_bytes_add (&bytes, &enc);
    gst_npu_encoder_element_report_bytes (GST_NPU_ENCODER_ELEMENT (self),
        task, "npuaudiotok-stats", job->pts, &bytes);
  }
  return ok;
}

static void
chunk_free (Chunk * chunk)
{
  g_free (chunk->samples);
  g_free (chunk);
}

static void
encode_job_free (gpointer data)
{
  EncodeJob *job = data;

  chunk_free (job->chunk);
  if (job->outmem)
    gst_memory_unref (job->outmem);
  g_free (job);
}

static GstClockTime
sample_time (GstNpuAudioTok * self, guint64 index)
{
  return self->base_ts + gst_util_uint64_scale (index, GST_SECOND,
      GST_NPU_LOG_MEL_SAMPLE_RATE);
}

/* Hands @chunk (taken) to the encoder and pushes its tokens. */
static GstFlowReturn
submit_chunk (GstNpuAudioTok * self, Chunk * chunk)
{
  GstNpuEncoderElement *base = GST_NPU_ENCODER_ELEMENT (self);
  GstClockTime pts = sample_time (self, chunk->start), dur;
  guint out_dim = npu_audio_enc_get_out_dim (self->enc);
  EncodeJob *job;
  GstBuffer *outbuf;
  GstFlowReturn ret;
  gboolean dropped;

  dur = sample_time (self, chunk->start + chunk->n) - pts;
  if (self->vad_on && !chunk->voiced) {
    GST_LOG_OBJECT (self, "silent chunk at %" GST_TIME_FORMAT,
        GST_TIME_ARGS (pts));
    GST_OBJECT_LOCK (self);
    self->chunks_silent++;
    GST_OBJECT_UNLOCK (self);
    chunk_free (chunk);
    return GST_FLOW_OK;
  }

  ret = gst_npu_encoder_element_take_slot (base, pts, dur, &dropped);
  if (ret != GST_FLOW_OK || dropped) {
    chunk_free (chunk);
    return ret;
  }

  job = g_new0 (EncodeJob, 1);
  job->self = self;
  job->chunk = chunk;
  job->pts = pts;
  job->outmem = gst_allocator_alloc (base->allocator,
      (gsize) out_dim * self->n_tokens * sizeof (gfloat), NULL);
  if (!job->outmem)
    goto no_memory;
  job->out = (gfloat *) gst_npu_memory_begin_cpu_write (job->outmem);

  outbuf = gst_buffer_new ();
  gst_buffer_append_memory (outbuf, gst_memory_ref (job->outmem));
  GST_BUFFER_PTS (outbuf) = pts;
  GST_BUFFER_DURATION (outbuf) = dur;
  gst_buffer_add_npu_tokens_meta (outbuf, GST_NPU_MODALITY_AUDIO,
      self->n_tokens, out_dim, self->n_tokens, 1, pts, dur);

#ifdef HAVE_GST_ANALYTICS
  /* the same memory, described the way GStreamer 1.26 analytics reads it */
  gst_npu_buffer_add_token_tensor (outbuf, job->outmem, GST_NPU_MODALITY_AUDIO,
      self->n_tokens, out_dim);
#endif
  GST_DEBUG_OBJECT (self, "chunk %" GST_TIME_FORMAT " + %" GST_TIME_FORMAT,
      GST_TIME_ARGS (pts), GST_TIME_ARGS (dur));
  return gst_npu_encoder_element_push_task (base, outbuf, encode_task, job,
      encode_job_free);

  /* ERRORS */
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
 * Chunking and the voice-activity gate
 */
static Chunk *
chunk_new (GstNpuAudioTok * self, guint64 start)
{
  Chunk *chunk = g_new0 (Chunk, 1);

  /* zeros past the samples: the window's silent tail */
  chunk->samples = g_new0 (gfloat, self->window_len);
  chunk->start = start;
  return chunk;
}

/* Closes the open chunk; a full one passes its overlap to the next. */
static GstFlowReturn
close_chunk (GstNpuAudioTok * self, gboolean carry_overlap)
{
  Chunk *chunk = self->chunk, *next = NULL;

  if (carry_overlap && self->overlap_len > 0) {
    next = chunk_new (self, chunk->start + chunk->n - self->overlap_len);
    memcpy (next->samples, chunk->samples + chunk->n - self->overlap_len,
        self->overlap_len * sizeof (gfloat));
    next->n = self->overlap_len;
  }
  self->chunk = next;
  return submit_chunk (self, chunk);
}

/* No voice before @at yet: keep only a hangover of silence before it. */
static void
trim_lead_in (GstNpuAudioTok * self, Chunk * chunk, gsize at)
{
  gsize drop, keep;

  if (at <= self->hangover_len)
    return;
  drop = at - self->hangover_len;
  keep = chunk->n - drop;
  memmove (chunk->samples, chunk->samples + drop, keep * sizeof (gfloat));
  memset (chunk->samples + keep, 0, drop * sizeof (gfloat));
  chunk->n = keep;
  chunk->start += drop;
}

/* The end of a 10 ms frame: voice or not, and what that does. */
static GstFlowReturn
end_of_vad_frame (GstNpuAudioTok * self)
{
  Chunk *chunk = self->chunk;
  gboolean voiced = self->energy / HOP > self->vad_power;

  self->energy = 0.0;
  self->energy_n = 0;
  if (voiced && !chunk->voiced && self->split_on) {
    /* The lead-in is counted from the first loud sample, not from the
     * frame: the frames' grid depends on when the stream started, the
     * first loud sample does not, so the same utterance captured from a
     * microphone or read from a file starts its chunk at the same place. */
    gsize frame = MIN (chunk->n, HOP), onset = chunk->n - frame, i;

    for (i = chunk->n - frame; i < chunk->n; i++) {
      if ((gdouble) chunk->samples[i] * chunk->samples[i] > self->vad_power) {
        onset = i;
        break;
      }
    }
    trim_lead_in (self, chunk, onset);
  }
  if (voiced) {
    chunk->voiced = TRUE;
    self->last_voiced = self->n_out;
    return GST_FLOW_OK;
  }
  if (!self->split_on)
    return GST_FLOW_OK;
  if (chunk->voiced && self->n_out - self->last_voiced >= self->hangover_len)
    return close_chunk (self, FALSE);   /* the utterance ended */
  if (!chunk->voiced)
    trim_lead_in (self, chunk, chunk->n);
  return GST_FLOW_OK;
}

/* Appends 16 kHz samples to the stream. */
static GstFlowReturn
take_samples (GstNpuAudioTok * self, const gfloat * x, gsize n)
{
  GstFlowReturn ret = GST_FLOW_OK;

  while (n > 0 && ret == GST_FLOW_OK) {
    Chunk *chunk;
    gsize take, i;

    if (!self->chunk)
      self->chunk = chunk_new (self, self->n_out);
    chunk = self->chunk;
    take = MIN (n, self->window_len - chunk->n);
    take = MIN (take, HOP - self->energy_n);
    memcpy (chunk->samples + chunk->n, x, take * sizeof (gfloat));
    for (i = 0; i < take; i++)
      self->energy += (gdouble) x[i] * x[i];
    chunk->n += take;
    self->energy_n += take;
    self->n_out += take;
    x += take;
    n -= take;

    if (self->energy_n == HOP)
      ret = end_of_vad_frame (self);
    if (ret == GST_FLOW_OK && self->chunk == chunk &&
        chunk->n == self->window_len)
      ret = close_chunk (self, TRUE);
  }
  return ret;
}

/* Converts @n_frames interleaved frames at @data (NULL: silence). */
static GstFlowReturn
convert (GstNpuAudioTok * self, gconstpointer data, gsize n_frames)
{
  gsize n_out = gst_npu_audio_frontend_get_out_frames (self->fe, n_frames);

  if (n_out > self->conv_len) {
    g_free (self->conv);
    self->conv_len = n_out;
    self->conv = g_new (gfloat, n_out);
  }
  /* where the front end reads: upstream's memory, or the stitch buffer of
   * a frame split between two memories (counted in bytes-copied) */
  if (data)
    gst_npu_input_watch_notify (GST_OBJECT (self), data,
        n_frames * GST_AUDIO_INFO_BPF (&self->info));
  n_out = gst_npu_audio_frontend_convert (self->fe, data, n_frames, self->conv);
  if (data)
    self->n_in += n_frames;
  return take_samples (self, self->conv, n_out);
}

static void
count_copy (GstNpuAudioTok * self, gsize bytes)
{
  GST_OBJECT_LOCK (self);
  self->bytes_copied += bytes;
  GST_OBJECT_UNLOCK (self);
}

/* Reads one memory in place; a frame split with the next is stitched. */
static GstFlowReturn
convert_memory (GstNpuAudioTok * self, const guint8 * data, gsize size)
{
  const guint bpf = GST_AUDIO_INFO_BPF (&self->info);
  GstFlowReturn ret = GST_FLOW_OK;
  gsize whole;

  if (self->split_len > 0) {
    gsize take = MIN (size, bpf - self->split_len);

    memcpy (self->split + self->split_len, data, take);
    self->split_len += take;
    count_copy (self, take);
    data += take;
    size -= take;
    if (self->split_len < bpf)
      return GST_FLOW_OK;
    ret = convert (self, self->split, 1);
    self->split_len = 0;
  }
  whole = size / bpf;
  if (ret == GST_FLOW_OK && whole > 0)
    ret = convert (self, data, whole);
  if (size % bpf) {
    memcpy (self->split, data + whole * bpf, size % bpf);
    self->split_len = size % bpf;
    count_copy (self, size % bpf);
  }
  return ret;
}

/* Pushes the resampler's tail out and closes the partial chunk: at EOS,
 * before new caps (the base calls it then, once caps are set) and at a
 * discontinuity. */
static GstFlowReturn
gst_npu_audio_tok_drain (GstNpuEncoderElement * base)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (base);
  GstFlowReturn ret = GST_FLOW_OK;
  gsize latency;

  latency = gst_npu_audio_frontend_get_latency (self->fe);
  if (latency > 0 && self->n_in > 0) {
    gsize n = gst_npu_audio_frontend_get_out_frames (self->fe, latency);
    /* only the output the real input is owed, not the silence's own */
    guint64 owed = gst_util_uint64_scale (self->n_in,
        GST_NPU_LOG_MEL_SAMPLE_RATE, GST_AUDIO_INFO_RATE (&self->info));

    if (n > self->conv_len) {
      g_free (self->conv);
      self->conv_len = n;
      self->conv = g_new (gfloat, n);
    }
    n = gst_npu_audio_frontend_convert (self->fe, NULL, latency, self->conv);
    n = MIN (n, owed > self->n_out ? owed - self->n_out : 0);
    ret = take_samples (self, self->conv, n);
  }
  if (ret == GST_FLOW_OK && self->chunk && self->chunk->n > 0) {
    /* the energy of an unfinished 10 ms frame still counts */
    if (self->energy_n > 0 && self->energy / self->energy_n > self->vad_power)
      self->chunk->voiced = TRUE;
    ret = close_chunk (self, FALSE);
  }
  if (self->chunk) {
    chunk_free (self->chunk);
    self->chunk = NULL;
  }
  return ret;
}

static GstFlowReturn
gst_npu_audio_tok_handle_buffer (GstNpuEncoderElement * base, GstBuffer * buf)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (base);
  GstFlowReturn ret = GST_FLOW_OK;
  GstClockTime pts = GST_BUFFER_PTS (buf);
  gboolean dmabuf = FALSE;
  guint i, n;

  if (GST_CLOCK_TIME_IS_VALID (pts) && GST_CLOCK_TIME_IS_VALID (self->base_ts)) {
    GstClockTime expected = self->base_ts + gst_util_uint64_scale (self->n_in,
        GST_SECOND, GST_AUDIO_INFO_RATE (&self->info));
    GstClockTimeDiff drift = GST_CLOCK_DIFF (expected, pts);

    if (GST_BUFFER_IS_DISCONT (buf) || ABS (drift) > MAX_DRIFT) {
      /* a gap or a jump: what came before is a clip of its own */
      GST_DEBUG_OBJECT (self, "discontinuity of %" GST_STIME_FORMAT,
          GST_STIME_ARGS (drift));
      ret = gst_npu_audio_tok_drain (base);
      stream_reset (self);
      if (ret != GST_FLOW_OK)
        goto done;
    }
  }
  if (!GST_CLOCK_TIME_IS_VALID (self->base_ts))
    self->base_ts = GST_CLOCK_TIME_IS_VALID (pts) ? pts : 0;

  /* memory by memory, so that a buffer of several is not merged; a
   * dma-buf through its fd, synced for the CPU's read */
  n = gst_buffer_n_memory (buf);
  for (i = 0; i < n && ret == GST_FLOW_OK; i++) {
    GstMemory *mem = gst_buffer_peek_memory (buf, i);
    GstNpuImportMap map;

    if (!gst_npu_importer_map (base->importer, mem, GST_MAP_READ, &map))
      goto map_failed;
    if (map.kind == GST_NPU_IMPORT_DMABUF)
      dmabuf = TRUE;
    /* the address is logged so that a test can see it is upstream's */
    GST_LOG_OBJECT (self, "reading %" G_GSIZE_FORMAT " bytes in place at %p",
        map.size, map.data);
    ret = convert_memory (self, map.data, map.size);
    gst_npu_importer_unmap (base->importer, &map);
  }
  if (dmabuf) {
    GST_OBJECT_LOCK (self);
    self->buffers_dmabuf++;
    GST_OBJECT_UNLOCK (self);
  }

done:
  gst_buffer_unref (buf);
  return ret;

  /* ERRORS */
map_failed:
  {
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("Cannot read the audio: its memory cannot be mapped."), (NULL));
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
}

/* ------------------------------------------------------------------------
 * Queries
 */
static gboolean
gst_npu_audio_tok_sink_query (GstNpuEncoderElement * base, GstQuery * query)
{
  switch (GST_QUERY_TYPE (query)) {
    case GST_QUERY_ALLOCATION:{
      GstAllocationParams params;
      GstAllocator *allocator = base->allocator ?
          gst_object_ref (base->allocator) : gst_npu_allocator_get_default ();

      /* Sources that allocate (GstBaseSrc, GstAudioBaseSrc) write the
       * samples straight into NPU memory; each buffer is read before
       * chain returns, so no pool of ours needs to outlive it. */
      gst_allocation_params_init (&params);
      params.align = GST_NPU_ALIGN - 1;
      gst_query_add_allocation_param (query, allocator, &params);
      gst_object_unref (allocator);
      return TRUE;
    }
    default:
      return gst_pad_query_default (base->sinkpad, GST_OBJECT (base), query);
  }
}

/* A chunk is complete a chunk after its first sample (the base adds the
 * encodes in flight). */
static GstClockTime
gst_npu_audio_tok_get_latency (GstNpuEncoderElement * base)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (base);
  GstClockTime chunk;

  GST_OBJECT_LOCK (self);
  chunk = self->chunk_duration;
  GST_OBJECT_UNLOCK (self);
  return chunk;
}

/* ------------------------------------------------------------------------
 * States
 */
static void
gst_npu_audio_tok_start (GstNpuEncoderElement * base)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (base);

  GST_OBJECT_LOCK (self);
  self->chunks_silent = self->bytes_copied = self->buffers_dmabuf = 0;
  GST_OBJECT_UNLOCK (self);
  stream_reset (self);
}

static void
gst_npu_audio_tok_reset (GstNpuEncoderElement * base)
{
  stream_reset (GST_NPU_AUDIO_TOK (base));
}

/* The model and what was made for it, once the queue has ended. */
static void
gst_npu_audio_tok_unload_model (GstNpuEncoderElement * base)
{
  GstNpuAudioTok *self = GST_NPU_AUDIO_TOK (base);

  /* the program reads the encoder's weights: first */
  g_clear_pointer (&self->program, npu_audio_enc_program_free);
  g_clear_pointer (&self->enc, npu_audio_enc_free);
  g_clear_pointer (&self->gguf, npu_gguf_free);
  g_clear_pointer (&self->fe, gst_npu_audio_frontend_free);
  g_clear_pointer (&self->log_mel, gst_npu_log_mel_free);
  g_clear_pointer (&self->mel, g_free);
  g_clear_pointer (&self->conv, g_free);
  self->conv_len = 0;
}
