/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: npullm, tokens and prompts to streaming text */

/**
 * SECTION:element-npullm
 * @title: npullm
 *
 * A decoder-only language model (the llama, qwen2, qwen3 and gpt-oss
 * architectures, from GGUF) that answers prompts as text, streamed as it is
 * generated.
 *
 * - With no sink pad requested, `npullm model=m.gguf prompt="..." ! fdsink`
 *   answers #GstNpuLlm:prompt once and ends the stream.
 * - Text buffers on the `text` pad are prompts, answered one by one.
 * - Token tensors on the `vision` and `audio` pads (from npuvisiontok,
 *   npuaudiotok) are spliced into the prompt before the text and answered
 *   with #GstNpuLlm:prompt.  While an answer is being generated, media
 *   waits for the next one: a newer buffer from the same pad replaces the
 *   waiting one (latest wins; #GstNpuLlm:media-replaced counts them), so a
 *   live camera never builds a backlog, and buffers from different pads
 *   join the same answer in timestamp order.
 * - Weights come from #GstNpuLlm:model, or from mxfp4weights on the
 *   `weights` pad: `mxfp4weights location=m.gguf ! llm.weights`.
 * - Each answer starts afresh (reusing the prompt prefix it shares with the
 *   last one), or, with #GstNpuLlm:keep-context, goes on from the
 *   conversation so far, in the constant memory of the attention-sink
 *   window.
 *
 * Output is `text/x-raw,format=utf8`, split only on UTF-8 boundaries, each
 * buffer stamped with the PTS of the media (or text) it answers.
 *
 * ## Example launch lines
 * |[
 * gst-launch-1.0 npullm model=text.gguf prompt="Tell me a story." ! fdsink
 * gst-launch-1.0 mxfp4weights location=text.gguf ! llm.weights \
 *     npullm name=llm prompt="Hello" ! fdsink
 * gst-launch-1.0 videotestsrc ! video/x-raw,format=NV12,width=640,height=480 ! \
 *     npuvisiontok model=mmproj.gguf ! llm.vision \
 *     npullm name=llm model=text.gguf keep-context=true \
 *     prompt="What changed since the last frame?" ! fdsink
 * ]|
 *
 * Since: 0.1.0
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpullm.h"
#include "gstnpuanalytics.h"
#include "gstnpuprecision.h"

#include <string.h>
#include <npu/npu.h>
#include <npu/gstnpuelementutils.h>
#include <core/device/npubackend.h>
#include <core/formats/npugguf.h>
#include <core/formats/npuhfmodel.h>
#include <core/models/npullm.h>
#include <core/models/npullmsession.h>

G_STATIC_ASSERT ((int) GST_NPU_LLM_KV_TYPE_F32 == (int) NPU_KV_F32);
G_STATIC_ASSERT ((int) GST_NPU_LLM_KV_TYPE_F16 == (int) NPU_KV_F16);
G_STATIC_ASSERT ((int) GST_NPU_LLM_KV_TYPE_Q8_0 == (int) NPU_KV_Q8_0);

GST_DEBUG_CATEGORY_STATIC (gst_npu_llm_debug);
#define GST_CAT_DEFAULT gst_npu_llm_debug

#define DEFAULT_MODEL NULL
#define DEFAULT_PROMPT "Describe what you see."
#define DEFAULT_SYSTEM_PROMPT NULL
#define DEFAULT_CHAT_TEMPLATE "auto"
#define DEFAULT_MAX_TOKENS 128
#define DEFAULT_TEMPERATURE 0.0
#define DEFAULT_TOP_K 40
#define DEFAULT_TOP_P 0.95
#define DEFAULT_MIN_P 0.05
#define DEFAULT_REPEAT_PENALTY 1.0
#define DEFAULT_SEED 0
#define DEFAULT_CONTEXT_LENGTH 0
#define DEFAULT_N_THREADS 0
#define DEFAULT_OUTPUT GST_NPU_LLM_OUTPUT_TOKEN
#define DEFAULT_CAPTION_DURATION 0
#define DEFAULT_KV_TYPE GST_NPU_LLM_KV_TYPE_F16
#define DEFAULT_PRECISION GST_NPU_PRECISION_FAST
#define DEFAULT_STOP NULL
#define DEFAULT_KEEP_CONTEXT FALSE
#define DEFAULT_REASONING FALSE
#define DEFAULT_PJ_PER_BIT NPU_BYTES_DEFAULT_PJ_PER_BIT
#define DEFAULT_DECODE_POLICY GST_NPU_LLM_DECODE_AS_FAST_AS_POSSIBLE
/* about the pace of text read aloud or a caption read as it streams */
#define DEFAULT_DECODE_RATE 10.0
#define DECODE_RATE_MIN 0.1
#define DECODE_RATE_MAX 10000.0

enum
{
  PROP_0,
  PROP_MODEL,
  PROP_PROMPT,
  PROP_SYSTEM_PROMPT,
  PROP_CHAT_TEMPLATE,
  PROP_MAX_TOKENS,
  PROP_TEMPERATURE,
  PROP_TOP_K,
  PROP_TOP_P,
  PROP_MIN_P,
  PROP_REPEAT_PENALTY,
  PROP_SEED,
  PROP_CONTEXT_LENGTH,
  PROP_N_THREADS,
  PROP_OUTPUT,
  PROP_KV_TYPE,
  PROP_PRECISION,
  PROP_STOP,
  PROP_KEEP_CONTEXT,
  PROP_TTFT,
  PROP_PREFILL_TPS,
  PROP_DECODE_TPS,
  PROP_N_ANSWERS,
  PROP_MEDIA_REPLACED,
  PROP_CAPTION_DURATION,
  PROP_REASONING,
  PROP_PJ_PER_BIT,
  PROP_DECODE_POLICY,
  PROP_DECODE_RATE,
};

/* One prompt to answer. */
typedef struct
{
  gchar *text;
  GstClockTime pts;
  GstClockTime duration;
  GList *media;                 /* MediaItem, in PTS order */
  gboolean from_text_pad;
} Job;

typedef struct
{
  GstPad *pad;                  /* which pad it came on (not a reference) */
  GstBuffer *buffer;
  gboolean raw_media;           /* came as video/audio, tokens in a meta */
  GstBuffer *tokens;            /* what is mapped: @buffer, or a tensor's */
  GstMapInfo map;
  gboolean mapped;
  guint n_rows;
  gboolean image;               /* an image's rows (wrapped if the model
                                 * has image tokens) */
} MediaItem;

struct _GstNpuLlm
{
  GstElement parent;

  GstPad *srcpad;
  GstPad *textpad, *visionpad, *audiopad;
  /* video_sink -> video_src: frames pass, carrying the latest answer */
  GstPad *videosinkpad, *videosrcpad;

  /* properties, under the object lock */
  gchar *model;
  gchar *prompt;
  gchar *system_prompt;
  gchar *chat_template;
  guint max_tokens;
  guint64 caption_duration;
  gdouble temperature;
  guint top_k;
  gdouble top_p;
  gdouble min_p;
  gdouble repeat_penalty;
  guint64 seed;
  guint context_length;
  guint n_threads;
  GstNpuLlmOutput output;
  GstNpuLlmKvType kv_type;
  GstNpuPrecision precision;
  gchar *stop;
  gboolean keep_context;
  gboolean reasoning;
  gdouble pj_per_bit;
  GstNpuLlmDecodePolicy decode_policy;
  gdouble decode_rate;

  /* statistics, under the object lock */
  gdouble ttft_ms, prefill_tps, decode_tps;
  guint n_answers;
  guint64 media_replaced;

  /* the work queue, under lock */
  GMutex lock;
  GCond cond;
  GQueue jobs;                  /* Job */
  Job *latest_media_job;        /* waiting, replaceable */
  gboolean flushing;
  gboolean eos_pending;
  gboolean text_only;
  guint media_eos;              /* media/text pads that ended */
  guint n_input_pads;
  /* What became of the media buffers accepted since start (under lock),
   * so that none is lost without a word: answered, replaced by a newer one
   * from the same pad (skipped), dropped by their producer (its task was
   * cancelled), cancelled here (a flush or a shutdown, waiting or in a
   * running answer), or in an answer that failed.  The npullm-stats
   * messages carry them. */
  guint64 media_accepted, media_answered, media_skipped, media_dropped,
      media_cancelled, media_failed;
  gboolean media_unreported;    /* a count other than answered moved since
                                 * the last message */

  /* the model */
  NpuLlmSession *session;
  NpuQueue *queue;
  /* What the model reads in place, kept for its life */
  GstNpuWeightsInput *weights_in;       /* the weights pad */
  NpuGguf *gguf;
  NpuHfModel *hf;               /* or the directory the model is */
  gboolean started_stream;
  gboolean need_segment;        /* a flush cleared the segment downstream */

  /* output=caption: the last answer, pushed once the next one's PTS says
   * how long it stays (an empty one becomes a gap event); src task only */
  GstBuffer *held_caption;
  gboolean sent_caption;        /* a caption or gap went out this segment */
  gboolean live_known, live;    /* whether the media source is live */

  /* the last answer (NULL: nothing to say), for the video pass-through;
   * under the object lock */
  gchar *latest_answer;
};

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("text/x-raw, format=(string)utf8"));
static GstStaticPadTemplate text_template = GST_STATIC_PAD_TEMPLATE ("text",
    GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS ("text/x-raw, format=(string){ utf8, pango-markup }"));
#ifdef HAVE_GST_ANALYTICS
/* GStreamer 1.26 analytics: tokens in a GstTensorMeta, on whatever buffer
 * an analytics element put it (the media itself, typically) */
#define MEDIA_TENSOR_CAPS(media) "; " media "(ANY)"
#else
#define MEDIA_TENSOR_CAPS(media) ""
#endif
static GstStaticPadTemplate vision_template =
GST_STATIC_PAD_TEMPLATE ("vision", GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS ("other/tensors, format=(string)static, "
        "num_tensors=(int)1, types=(string)float32"
        MEDIA_TENSOR_CAPS ("video/x-raw")));
static GstStaticPadTemplate audio_template = GST_STATIC_PAD_TEMPLATE ("audio",
    GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS ("other/tensors, format=(string)static, "
        "num_tensors=(int)1, types=(string)float32"
        MEDIA_TENSOR_CAPS ("audio/x-raw")));
#ifdef HAVE_GST_ANALYTICS
static GstStaticPadTemplate video_sink_template =
GST_STATIC_PAD_TEMPLATE ("video_sink", GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS ("video/x-raw(ANY)"));
static GstStaticPadTemplate video_src_template =
GST_STATIC_PAD_TEMPLATE ("video_src", GST_PAD_SRC, GST_PAD_SOMETIMES,
    GST_STATIC_CAPS ("video/x-raw(ANY)"));
#endif
static GstStaticPadTemplate weights_template =
GST_STATIC_PAD_TEMPLATE ("weights", GST_PAD_SINK, GST_PAD_REQUEST,
    GST_STATIC_CAPS ("other/npu-weights"));

#define gst_npu_llm_parent_class parent_class
G_DEFINE_TYPE (GstNpuLlm, gst_npu_llm, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (npullm, "npullm", GST_RANK_NONE,
    GST_TYPE_NPU_LLM, GST_DEBUG_CATEGORY_INIT (gst_npu_llm_debug, "npullm", 0,
        "language model"));

#define GST_TYPE_NPU_LLM_KV_TYPE (gst_npu_llm_kv_type_get_type ())
static GType
gst_npu_llm_kv_type_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    {GST_NPU_LLM_KV_TYPE_F32, "32-bit float (4 bytes a value)", "f32"},
    {GST_NPU_LLM_KV_TYPE_F16, "16-bit float (2 bytes a value)", "f16"},
    {GST_NPU_LLM_KV_TYPE_Q8_0, "8-bit blocks of 32, 16-bit scale", "q8_0"},
    {0, NULL, NULL}
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstNpuLlmKvType", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

#define GST_TYPE_NPU_LLM_OUTPUT (gst_npu_llm_output_get_type ())
static GType
gst_npu_llm_output_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    {GST_NPU_LLM_OUTPUT_TOKEN, "A buffer per generated piece", "token"},
    {GST_NPU_LLM_OUTPUT_SENTENCE, "A buffer per sentence or line",
        "sentence"},
    {GST_NPU_LLM_OUTPUT_RESPONSE, "One buffer per answer", "response"},
    {GST_NPU_LLM_OUTPUT_CAPTION, "One buffer per answer, valid until the "
          "next answer (for textoverlay)", "caption"},
    {0, NULL, NULL}
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstNpuLlmOutput", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

#define GST_TYPE_NPU_LLM_DECODE_POLICY (gst_npu_llm_decode_policy_get_type ())
static GType
gst_npu_llm_decode_policy_get_type (void)
{
  static gsize type = 0;
  static const GEnumValue values[] = {
    {GST_NPU_LLM_DECODE_AS_FAST_AS_POSSIBLE, "Every token on every thread, "
          "as soon as the last is done", "as-fast-as-possible"},
    {GST_NPU_LLM_DECODE_PACED, "Tokens at decode-rate on the fewest threads "
          "that hold it, the cores idle in between", "paced"},
    {0, NULL, NULL}
  };

  if (g_once_init_enter (&type)) {
    GType t = g_enum_register_static ("GstNpuLlmDecodePolicy", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

static void gst_npu_llm_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec);
static void gst_npu_llm_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec);
static void gst_npu_llm_finalize (GObject * object);
static gboolean load_session (GstElement * element, const gchar * path,
    GstNpuWeights * weights);
static GstStateChangeReturn gst_npu_llm_change_state (GstElement * element,
    GstStateChange transition);
static GstPad *gst_npu_llm_request_new_pad (GstElement * element,
    GstPadTemplate * templ, const gchar * name, const GstCaps * caps);
static void gst_npu_llm_release_pad (GstElement * element, GstPad * pad);
#ifdef HAVE_GST_ANALYTICS
static GstIterator *gst_npu_llm_iterate_links (GstPad * pad,
    GstObject * parent);
#endif

/* The model file and what is asked of it. */
static void
install_prompt_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;
  const GParamFlags rw_ready = rw | GST_PARAM_MUTABLE_READY;

  /**
   * GstNpuLlm:model:
   *
   * A GGUF text model (llama, qwen2, qwen3, gpt-oss or gemma3), or
   * OpenAI's Hugging Face gpt-oss directory as downloaded (the directory,
   * its config.json or index, or a shard), read without a conversion step.
   * Leave unset to take the weights from mxfp4weights on the `weights`
   * pad.
   */
  g_object_class_install_property (gobject_class, PROP_MODEL,
      g_param_spec_string ("model", "Model",
          "GGUF text model (llama, qwen2, qwen3, gpt-oss, gemma3) or a Hugging "
          "Face gpt-oss directory; unset: weights come on the weights pad",
          DEFAULT_MODEL, rw_ready));
  /**
   * GstNpuLlm:prompt:
   *
   * The question asked about each media buffer, or once when no sink pad
   * is linked.  Text arriving on the `text` pad is asked instead.
   */
  g_object_class_install_property (gobject_class, PROP_PROMPT,
      g_param_spec_string ("prompt", "Prompt",
          "The question asked about each image/clip, or once with no input",
          DEFAULT_PROMPT, rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuLlm:system-prompt:
   *
   * The system message; unset uses the chat template's default.
   */
  g_object_class_install_property (gobject_class, PROP_SYSTEM_PROMPT,
      g_param_spec_string ("system-prompt", "System prompt",
          "System message (unset: the template's default)",
          DEFAULT_SYSTEM_PROMPT, rw_ready));
  /**
   * GstNpuLlm:chat-template:
   *
   * "auto" (from the file's tokenizer.chat_template; a file without one is
   * a base model, run as plain completion), "none" (force plain
   * completion), "chatml", "llama3", "llama2", "gemma", "harmony"
   * (gpt-oss), or a custom format with {system} and {prompt} placeholders.
   */
  g_object_class_install_property (gobject_class, PROP_CHAT_TEMPLATE,
      g_param_spec_string ("chat-template", "Chat template",
          "auto, none, chatml, llama3, llama2, gemma, harmony, or a format "
          "with {system} and {prompt}", DEFAULT_CHAT_TEMPLATE, rw_ready));
}

/* How each next token is drawn. */
static void
install_sampling_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;
  const GParamFlags rw_ready = rw | GST_PARAM_MUTABLE_READY;

  /**
   * GstNpuLlm:max-tokens:
   *
   * Most tokens per answer; a change applies from the next answer on.
   */
  g_object_class_install_property (gobject_class, PROP_MAX_TOKENS,
      g_param_spec_uint ("max-tokens", "Max tokens",
          "Most tokens generated per answer (from the next answer on)", 1,
          1 << 20, DEFAULT_MAX_TOKENS, rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuLlm:temperature:
   *
   * Sampling temperature; 0 means greedy (always the likeliest token).
   */
  g_object_class_install_property (gobject_class, PROP_TEMPERATURE,
      g_param_spec_double ("temperature", "Temperature",
          "Sampling temperature (0 = greedy)", 0.0, 10.0,
          DEFAULT_TEMPERATURE, rw_ready));
  /**
   * GstNpuLlm:top-k:
   *
   * Sample among the k likeliest tokens only; 0 keeps them all.  Ignored
   * when #GstNpuLlm:temperature is 0.
   */
  g_object_class_install_property (gobject_class, PROP_TOP_K,
      g_param_spec_uint ("top-k", "Top k",
          "Sample among the k likeliest tokens (0 = all)", 0, G_MAXINT,
          DEFAULT_TOP_K, rw_ready));
  /**
   * GstNpuLlm:top-p:
   *
   * Nucleus sampling: sample from the smallest set of tokens whose
   * probabilities add up to this much; 1 turns it off.
   */
  g_object_class_install_property (gobject_class, PROP_TOP_P,
      g_param_spec_double ("top-p", "Top p",
          "Nucleus sampling: smallest set with this probability mass "
          "(1 = off)", 0.0, 1.0, DEFAULT_TOP_P, rw_ready));
  /**
   * GstNpuLlm:min-p:
   *
   * Drop the tokens less likely than min-p times the likeliest one; 0
   * turns it off.
   */
  g_object_class_install_property (gobject_class, PROP_MIN_P,
      g_param_spec_double ("min-p", "Min p",
          "Drop tokens less likely than min-p times the likeliest (0 = off)",
          0.0, 1.0, DEFAULT_MIN_P, rw_ready));
  /**
   * GstNpuLlm:repeat-penalty:
   *
   * Penalty for the last 64 tokens of the prompt and answer, by
   * llama.cpp's rule (positive logits divided by it, negative ones
   * multiplied); 1 turns it off.
   */
  g_object_class_install_property (gobject_class, PROP_REPEAT_PENALTY,
      g_param_spec_double ("repeat-penalty", "Repeat penalty",
          "Penalty for the last 64 tokens (> 1 discourages repeats, 1 = off)",
          0.0, 10.0, DEFAULT_REPEAT_PENALTY, rw_ready));
  /**
   * GstNpuLlm:seed:
   *
   * Seed of the sampler: the same seed gives the same text.  Greedy
   * decoding (#GstNpuLlm:temperature 0) draws nothing and ignores it.
   */
  g_object_class_install_property (gobject_class, PROP_SEED,
      g_param_spec_uint64 ("seed", "Seed",
          "Sampler seed (same seed, same text; unused when temperature is 0)",
          0, G_MAXUINT64, DEFAULT_SEED, rw_ready));
}

/* The KV cache and the compute: fixed once the element is READY. */
static void
install_engine_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;
  const GParamFlags rw_ready = rw | GST_PARAM_MUTABLE_READY;

  /**
   * GstNpuLlm:context-length:
   *
   * Tokens the KV cache holds, allocated once; 0 = the model's, at most
   * 4096.  Longer streams slide, keeping the first tokens as attention
   * sinks.
   */
  g_object_class_install_property (gobject_class, PROP_CONTEXT_LENGTH,
      g_param_spec_uint ("context-length", "Context length",
          "KV cache size in tokens (0 = the model's, at most 4096)", 0,
          1 << 20, DEFAULT_CONTEXT_LENGTH, rw_ready));
  /**
   * GstNpuLlm:n-threads:
   *
   * Threads of the CPU backend; 0 = one per CPU.
   */
  g_object_class_install_property (gobject_class, PROP_N_THREADS,
      g_param_spec_uint ("n-threads", "Threads",
          "CPU backend threads (0 = one per CPU)", 0, 1024,
          DEFAULT_N_THREADS, rw_ready));
  /**
   * GstNpuLlm:kv-type:
   *
   * How the KV cache stores keys and values: `f16` (default) takes half
   * the memory of `f32`, `q8_0` (ggml's 8-bit blocks of 32) about a
   * quarter and needs a head size that is a multiple of 32.  Attention
   * reads the cache in this type; each stored value is off by at most
   * 2^-11 of itself (f16) or 1/254 of the largest of its block (q8_0).
   * docs/npullm.md gives the memory and the measured error of each.
   */
  g_object_class_install_property (gobject_class, PROP_KV_TYPE,
      g_param_spec_enum ("kv-type", "KV cache type",
          "Storage of the KV cache's keys and values",
          GST_TYPE_NPU_LLM_KV_TYPE, DEFAULT_KV_TYPE, rw_ready));
  /**
   * GstNpuLlm:precision:
   *
   * Activations of the model's matrix products.  `fast` (default): int8,
   * as llama.cpp (logits ~1 % of their range from a float64 evaluation of
   * the same weights); `accurate`: at least about 16-bit activations (int16
   * in AVX-512 prefill, F32 in AVX2 prefill, int8 plus the int8 residual
   * elsewhere; ~4e-5 of
   * the range).  docs/npullm.md gives both bounds and what
   * each costs in decode and prefill speed.
   */
  g_object_class_install_property (gobject_class, PROP_PRECISION,
      g_param_spec_enum ("precision", "Precision",
          "Activations of the matrix products: fast (int8) or accurate "
          "(~16 bits)", GST_TYPE_NPU_PRECISION, DEFAULT_PRECISION, rw_ready));
}

/* How answers end, are cut into buffers and follow each other. */
static void
install_answer_properties (GObjectClass * gobject_class)
{
  const GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS;
  const GParamFlags rw_ready = rw | GST_PARAM_MUTABLE_READY;

  /**
   * GstNpuLlm:output:
   *
   * How an answer is cut into buffers: a buffer per token as it comes,
   * per sentence (cut at . ! ? or a newline; each a line of text: the
   * sentence without the whitespace around it, then a newline), or the
   * whole response.
   */
  g_object_class_install_property (gobject_class, PROP_OUTPUT,
      g_param_spec_enum ("output", "Output",
          "How the answer is cut into buffers", GST_TYPE_NPU_LLM_OUTPUT,
          DEFAULT_OUTPUT, rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuLlm:caption-duration:
   *
   * With output=caption, how long each answer stays valid (its buffer
   * duration), in nanoseconds, from the PTS of the media it answers.  0:
   * until the next answer.  Not live, that is the next answer's PTS
   * (subtitle style: an answer is pushed when the next one is ready, the
   * last one at the end of the stream, when it stays to the end).  Live,
   * where the frames are drawn before the answer about them is ready, it
   * is pushed at once and stays twice as long as it took to come (at least
   * a second), about when the next one is due.
   */
  g_object_class_install_property (gobject_class, PROP_CAPTION_DURATION,
      g_param_spec_uint64 ("caption-duration", "Caption duration",
          "With output=caption, how long each answer stays valid, in ns "
          "(0 = until the next answer; live: twice its delay, at least 1 s)",
          0, G_MAXINT64, DEFAULT_CAPTION_DURATION,
          rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuLlm:stop:
   *
   * Strings that end an answer, separated by '|'.  The model's own end of
   * generation tokens always end it.
   */
  g_object_class_install_property (gobject_class, PROP_STOP,
      g_param_spec_string ("stop", "Stop strings",
          "'|'-separated strings that end an answer", DEFAULT_STOP, rw_ready));
  /**
   * GstNpuLlm:keep-context:
   *
   * Keep one conversation going across answers: each answer is appended to
   * the context (the answer as generated, the end of its turn, then the
   * next prompt's turn in the chat template) and the next one goes on from
   * it, instead of starting afresh.  The KV cache keeps its size
   * (#GstNpuLlm:context-length): when it is full, the oldest tokens after
   * the first four (the attention sinks) leave it, so a stream can run for
   * days in constant memory.  May be changed while playing: false ends the
   * conversation, the next answer starts afresh.  An answer that fails or
   * is flushed half-way also ends it.
   */
  g_object_class_install_property (gobject_class, PROP_KEEP_CONTEXT,
      g_param_spec_boolean ("keep-context", "Keep context",
          "One conversation across answers (each answer goes on from the "
          "last, within the attention-sink window)", DEFAULT_KEEP_CONTEXT,
          rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuLlm:reasoning:
   *
   * With the harmony chat family (gpt-oss) the model writes its chain of
   * thought in the `analysis` channel before the answer in `final`.  By
   * default only the final channel is streamed; true streams the
   * analysis text as well, as it comes (each buffer holds text of one
   * channel only).  Either way the answer's analysis text is in the
   * `analysis` field of the `npullm-stats` message, so an application
   * tells the two apart; the answer the video pad carries is the final
   * channel's.  Headers, the format's tokens and tool calls
   * (`commentary`) never reach the output.  No effect for other
   * families.  May be changed while playing (from the next answer on).
   */
  g_object_class_install_property (gobject_class, PROP_REASONING,
      g_param_spec_boolean ("reasoning", "Reasoning",
          "Harmony (gpt-oss): also stream the analysis channel (the chain "
          "of thought), not only the final answer", DEFAULT_REASONING,
          rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuLlm:decode-policy:
   *
   * How fast the answer's tokens are decoded.  `as-fast-as-possible`
   * runs each token on every thread (#GstNpuLlm:n-threads) as soon as the
   * last is done.  `paced` holds #GstNpuLlm:decode-rate: the first tokens
   * of the first answer are timed on 1, 2, ... threads, the fewest that
   * hold the rate are kept, and after each token the element sleeps until
   * the next is due, so that the other cores, and all of them between
   * tokens, stay idle and the CPU's governor can lower their clocks (text
   * read by a person, a caption with a deadline, need no more).  When no
   * thread count holds the rate, the fastest is kept and there is no
   * sleep.  The prompt is always evaluated on every thread.  The
   * `npullm-stats` message says which policy, threads and sleep each
   * answer had.  May be changed while playing (from the next answer on).
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_DECODE_POLICY,
      g_param_spec_enum ("decode-policy", "Decode policy",
          "As fast as possible, or paced to decode-rate with the fewest "
          "threads", GST_TYPE_NPU_LLM_DECODE_POLICY, DEFAULT_DECODE_POLICY,
          rw | GST_PARAM_MUTABLE_PLAYING));
  /**
   * GstNpuLlm:decode-rate:
   *
   * The rate, in tokens per second, a `paced` decode holds
   * (#GstNpuLlm:decode-policy); ignored otherwise.  Changing it starts
   * the thread count's timing again.  May be changed while playing.
   *
   * Since: 0.1
   */
  g_object_class_install_property (gobject_class, PROP_DECODE_RATE,
      g_param_spec_double ("decode-rate", "Decode rate",
          "Tokens per second of a paced decode", DECODE_RATE_MIN,
          DECODE_RATE_MAX, DEFAULT_DECODE_RATE,
          rw | GST_PARAM_MUTABLE_PLAYING));
}

/* Read-only figures of the last answers. */
static void
install_statistics_properties (GObjectClass * gobject_class)
{
  const GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  /**
   * GstNpuLlm:ttft-ms:
   *
   * Time to the first token of the last answer, in milliseconds.
   */
  g_object_class_install_property (gobject_class, PROP_TTFT,
      g_param_spec_double ("ttft-ms", "Time to first token",
          "Time to first token of the last answer, ms", 0, G_MAXDOUBLE, 0, ro));
  /**
   * GstNpuLlm:prefill-tps:
   *
   * Prompt tokens read per second in the last answer.
   */
  g_object_class_install_property (gobject_class, PROP_PREFILL_TPS,
      g_param_spec_double ("prefill-tps", "Prefill tokens/s",
          "Prompt tokens per second of the last answer", 0, G_MAXDOUBLE, 0,
          ro));
  /**
   * GstNpuLlm:decode-tps:
   *
   * Tokens generated per second in the last answer.
   */
  g_object_class_install_property (gobject_class, PROP_DECODE_TPS,
      g_param_spec_double ("decode-tps", "Decode tokens/s",
          "Generated tokens per second of the last answer", 0, G_MAXDOUBLE,
          0, ro));
  /**
   * GstNpuLlm:n-answers:
   *
   * Answers given since the element started.
   */
  g_object_class_install_property (gobject_class, PROP_N_ANSWERS,
      g_param_spec_uint ("n-answers", "Answers", "Answers given", 0,
          G_MAXUINT, 0, ro));
  /**
   * GstNpuLlm:media-replaced:
   *
   * Media buffers replaced by a newer buffer from the same pad before
   * they were answered (latest wins).
   */
  g_object_class_install_property (gobject_class, PROP_MEDIA_REPLACED,
      g_param_spec_uint64 ("media-replaced", "Media replaced",
          "Media buffers replaced by newer ones before being answered", 0,
          G_MAXUINT64, 0, ro));
  /**
   * GstNpuLlm:pj-per-bit:
   *
   * The energy a bit moved to or from memory costs, in picojoules, for
   * the estimate the npullm-stats message gives from the bytes the model
   * moved (`energy-estimate-uj` fields): the default, 5, is the middle of
   * the 3 to 7 pJ/bit of LPDDR5X/LPDDR6.  An estimate, not a measurement:
   * every byte is taken to cross the memory interface once.
   */
  g_object_class_install_property (gobject_class, PROP_PJ_PER_BIT,
      g_param_spec_double ("pj-per-bit", "pJ per bit",
          "Memory energy per bit moved, in pJ, for the stats' energy "
          "estimate", GST_NPU_PJ_PER_BIT_MIN, GST_NPU_PJ_PER_BIT_MAX,
          DEFAULT_PJ_PER_BIT, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_PLAYING));
}

static void
install_properties (GObjectClass * gobject_class)
{
  install_prompt_properties (gobject_class);
  install_sampling_properties (gobject_class);
  install_engine_properties (gobject_class);
  install_answer_properties (gobject_class);
  install_statistics_properties (gobject_class);
}

static void
gst_npu_llm_class_init (GstNpuLlmClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);

  gobject_class->set_property = gst_npu_llm_set_property;
  gobject_class->get_property = gst_npu_llm_get_property;
  gobject_class->finalize = gst_npu_llm_finalize;
  install_properties (gobject_class);

  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_add_static_pad_template (element_class, &text_template);
  gst_element_class_add_static_pad_template (element_class, &vision_template);
  gst_element_class_add_static_pad_template (element_class, &audio_template);
  gst_element_class_add_static_pad_template (element_class, &weights_template);
#ifdef HAVE_GST_ANALYTICS
  gst_element_class_add_static_pad_template (element_class,
      &video_sink_template);
  gst_element_class_add_static_pad_template (element_class,
      &video_src_template);
#endif
  gst_element_class_set_static_metadata (element_class,
      "NPU language model", "Filter/Converter/Text",
      "Answers prompts about vision and audio tokens with a language model, "
      "streaming the text as it is generated", "gst-npu developers");

  element_class->change_state = GST_DEBUG_FUNCPTR (gst_npu_llm_change_state);
  element_class->request_new_pad =
      GST_DEBUG_FUNCPTR (gst_npu_llm_request_new_pad);
  element_class->release_pad = GST_DEBUG_FUNCPTR (gst_npu_llm_release_pad);

  gst_type_mark_as_plugin_api (GST_TYPE_NPU_LLM_OUTPUT, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_NPU_LLM_KV_TYPE, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_NPU_LLM_DECODE_POLICY, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_NPU_PRECISION, 0);
}

static void
gst_npu_llm_init (GstNpuLlm * self)
{
  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_use_fixed_caps (self->srcpad);
#ifdef HAVE_GST_ANALYTICS
  gst_pad_set_iterate_internal_links_function (self->srcpad,
      gst_npu_llm_iterate_links);
#endif
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);

  self->prompt = g_strdup (DEFAULT_PROMPT);
  self->chat_template = g_strdup (DEFAULT_CHAT_TEMPLATE);
  self->max_tokens = DEFAULT_MAX_TOKENS;
  self->pj_per_bit = DEFAULT_PJ_PER_BIT;
  self->decode_policy = DEFAULT_DECODE_POLICY;
  self->decode_rate = DEFAULT_DECODE_RATE;
  self->temperature = DEFAULT_TEMPERATURE;
  self->top_k = DEFAULT_TOP_K;
  self->top_p = DEFAULT_TOP_P;
  self->min_p = DEFAULT_MIN_P;
  self->repeat_penalty = DEFAULT_REPEAT_PENALTY;
  self->seed = DEFAULT_SEED;
  self->output = DEFAULT_OUTPUT;
  self->caption_duration = DEFAULT_CAPTION_DURATION;
  self->kv_type = DEFAULT_KV_TYPE;
  self->keep_context = DEFAULT_KEEP_CONTEXT;
  self->reasoning = DEFAULT_REASONING;
  self->precision = DEFAULT_PRECISION;
  self->weights_in = gst_npu_weights_input_new (GST_ELEMENT (self),
      load_session);
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  g_queue_init (&self->jobs);
}

static void
media_item_free (MediaItem * m)
{
  if (m->mapped)
    gst_buffer_unmap (m->tokens, &m->map);
  gst_clear_buffer (&m->tokens);
  gst_buffer_unref (m->buffer);
  g_free (m);
}

static void
job_free (Job * job)
{
  g_free (job->text);
  g_list_free_full (job->media, (GDestroyNotify) media_item_free);
  g_free (job);
}

/* Adds @n media to @counter; under lock.  Any end but an answer is
 * reported by a message of its own if no answer's message says it. */
static void
count_media_locked (GstNpuLlm * self, guint64 * counter, guint n)
{
  *counter += n;
  if (n && counter != &self->media_answered)
    self->media_unreported = TRUE;
}

static void
count_media (GstNpuLlm * self, guint64 * counter, guint n)
{
  g_mutex_lock (&self->lock);
  count_media_locked (self, counter, n);
  g_mutex_unlock (&self->lock);
}

/* Drops the jobs not started, counting their media as cancelled; under
 * lock */
static void
cancel_jobs_locked (GstNpuLlm * self)
{
  Job *job;

  while ((job = g_queue_pop_head (&self->jobs))) {
    count_media_locked (self, &self->media_cancelled,
        g_list_length (job->media));
    job_free (job);
  }
  self->latest_media_job = NULL;
}

/* The media counts, into a stats message: taken with the waiting ones
 * (media-pending) in one snapshot, so that they add up to media-accepted */
static void
set_media_fields (GstNpuLlm * self, GstStructure * s)
{
  guint64 pending = 0;
  GList *l;

  g_mutex_lock (&self->lock);
  for (l = self->jobs.head; l; l = l->next)
    pending += g_list_length (((Job *) l->data)->media);
  gst_structure_set (s, "media-accepted", G_TYPE_UINT64, self->media_accepted,
      "media-answered", G_TYPE_UINT64, self->media_answered,
      "media-skipped", G_TYPE_UINT64, self->media_skipped,
      "media-dropped", G_TYPE_UINT64, self->media_dropped,
      "media-cancelled", G_TYPE_UINT64, self->media_cancelled,
      "media-failed", G_TYPE_UINT64, self->media_failed,
      "media-pending", G_TYPE_UINT64, pending, NULL);
  self->media_unreported = FALSE;
  g_mutex_unlock (&self->lock);
}

/* A stats message with the media counts only, @end saying why there is
 * no answer ("flushed", "eos", "shutdown"): posted when accepted media
 * ended unanswered since the last message, or with @always set (a flush,
 * once any media came), so that none is lost without a word. */
static void
post_media_stats (GstNpuLlm * self, const gchar * end, gboolean always)
{
  GstStructure *s;
  gboolean post;

  g_mutex_lock (&self->lock);
  post = self->media_unreported || (always && self->media_accepted);
  g_mutex_unlock (&self->lock);
  if (!post)
    return;
  s = gst_structure_new ("npullm-stats", "end", G_TYPE_STRING, end, NULL);
  set_media_fields (self, s);
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self), s));
}

static void
gst_npu_llm_finalize (GObject * object)
{
  GstNpuLlm *self = GST_NPU_LLM (object);

  g_free (self->model);
  g_free (self->prompt);
  g_free (self->system_prompt);
  g_free (self->chat_template);
  g_free (self->stop);
  g_free (self->latest_answer);
  g_queue_clear_full (&self->jobs, (GDestroyNotify) job_free);
  gst_npu_weights_input_free (self->weights_in);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_npu_llm_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstNpuLlm *self = GST_NPU_LLM (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_free (self->model);
      self->model = g_value_dup_string (value);
      break;
    case PROP_PROMPT:
      g_free (self->prompt);
      self->prompt = g_value_dup_string (value);
      break;
    case PROP_SYSTEM_PROMPT:
      g_free (self->system_prompt);
      self->system_prompt = g_value_dup_string (value);
      break;
    case PROP_CHAT_TEMPLATE:
      g_free (self->chat_template);
      self->chat_template = g_value_dup_string (value);
      break;
    case PROP_MAX_TOKENS:
      self->max_tokens = g_value_get_uint (value);
      break;
    case PROP_PJ_PER_BIT:
      self->pj_per_bit = g_value_get_double (value);
      break;
    case PROP_TEMPERATURE:
      self->temperature = g_value_get_double (value);
      break;
    case PROP_TOP_K:
      self->top_k = g_value_get_uint (value);
      break;
    case PROP_TOP_P:
      self->top_p = g_value_get_double (value);
      break;
    case PROP_MIN_P:
      self->min_p = g_value_get_double (value);
      break;
    case PROP_REPEAT_PENALTY:
      self->repeat_penalty = g_value_get_double (value);
      break;
    case PROP_SEED:
      self->seed = g_value_get_uint64 (value);
      break;
    case PROP_CONTEXT_LENGTH:
      self->context_length = g_value_get_uint (value);
      break;
    case PROP_N_THREADS:
      self->n_threads = g_value_get_uint (value);
      break;
    case PROP_OUTPUT:
      self->output = g_value_get_enum (value);
      break;
    case PROP_CAPTION_DURATION:
      self->caption_duration = g_value_get_uint64 (value);
      break;
    case PROP_KV_TYPE:
      self->kv_type = g_value_get_enum (value);
      break;
    case PROP_PRECISION:
      self->precision = g_value_get_enum (value);
      break;
    case PROP_STOP:
      g_free (self->stop);
      self->stop = g_value_dup_string (value);
      break;
    case PROP_KEEP_CONTEXT:
      self->keep_context = g_value_get_boolean (value);
      break;
    case PROP_REASONING:
      self->reasoning = g_value_get_boolean (value);
      break;
    case PROP_DECODE_POLICY:
      self->decode_policy = g_value_get_enum (value);
      break;
    case PROP_DECODE_RATE:
      self->decode_rate = g_value_get_double (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_npu_llm_get_property (GObject * object, guint prop_id, GValue * value,
    GParamSpec * pspec)
{
  GstNpuLlm *self = GST_NPU_LLM (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_MODEL:
      g_value_set_string (value, self->model);
      break;
    case PROP_PROMPT:
      g_value_set_string (value, self->prompt);
      break;
    case PROP_SYSTEM_PROMPT:
      g_value_set_string (value, self->system_prompt);
      break;
    case PROP_CHAT_TEMPLATE:
      g_value_set_string (value, self->chat_template);
      break;
    case PROP_MAX_TOKENS:
      g_value_set_uint (value, self->max_tokens);
      break;
    case PROP_PJ_PER_BIT:
      g_value_set_double (value, self->pj_per_bit);
      break;
    case PROP_TEMPERATURE:
      g_value_set_double (value, self->temperature);
      break;
    case PROP_TOP_K:
      g_value_set_uint (value, self->top_k);
      break;
    case PROP_TOP_P:
      g_value_set_double (value, self->top_p);
      break;
    case PROP_MIN_P:
      g_value_set_double (value, self->min_p);
      break;
    case PROP_REPEAT_PENALTY:
      g_value_set_double (value, self->repeat_penalty);
      break;
    case PROP_SEED:
      g_value_set_uint64 (value, self->seed);
      break;
    case PROP_CONTEXT_LENGTH:
      g_value_set_uint (value, self->context_length);
      break;
    case PROP_N_THREADS:
      g_value_set_uint (value, self->n_threads);
      break;
    case PROP_OUTPUT:
      g_value_set_enum (value, self->output);
      break;
    case PROP_CAPTION_DURATION:
      g_value_set_uint64 (value, self->caption_duration);
      break;
    case PROP_KV_TYPE:
      g_value_set_enum (value, self->kv_type);
      break;
    case PROP_PRECISION:
      g_value_set_enum (value, self->precision);
      break;
    case PROP_STOP:
      g_value_set_string (value, self->stop);
      break;
    case PROP_KEEP_CONTEXT:
      g_value_set_boolean (value, self->keep_context);
      break;
    case PROP_REASONING:
      g_value_set_boolean (value, self->reasoning);
      break;
    case PROP_DECODE_POLICY:
      g_value_set_enum (value, self->decode_policy);
      break;
    case PROP_DECODE_RATE:
      g_value_set_double (value, self->decode_rate);
      break;
    case PROP_TTFT:
      g_value_set_double (value, self->ttft_ms);
      break;
    case PROP_PREFILL_TPS:
      g_value_set_double (value, self->prefill_tps);
      break;
    case PROP_DECODE_TPS:
      g_value_set_double (value, self->decode_tps);
      break;
    case PROP_N_ANSWERS:
      g_value_set_uint (value, self->n_answers);
      break;
    case PROP_MEDIA_REPLACED:
      g_value_set_uint64 (value, self->media_replaced);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

/* ------------------------------------------------------------------------
 * Loading the model
 */
typedef struct
{
  NpuGguf *gguf;                /* from the model property: a file */
  NpuHfModel *hf;               /* or a directory */
  GstNpuWeights *weights;       /* or from the weights pad */
} LookupData;

static gboolean
lookup_tensor (const gchar * name, NpuTensorView * out, gpointer user_data)
{
  LookupData *ld = user_data;

  if (ld->weights)
    return gst_npu_weights_lookup (ld->weights, name, out);
  if (ld->hf)
    return npu_hf_model_lookup (name, out, ld->hf);
  return npu_gguf_lookup_view (name, out, ld->gguf);
}

static void
fill_session_params (GstNpuLlm * self, NpuLlmSessionParams * p)
{
  npu_llm_session_params_init (p);
  GST_OBJECT_LOCK (self);
  p->n_ctx = self->context_length;
  p->kv_type = (NpuKvType) self->kv_type;
  p->precision = (NpuMatmulPrecision) self->precision;
  p->max_tokens = self->max_tokens;
  p->keep_context = self->keep_context;
  p->system_prompt = g_strdup (self->system_prompt);
  p->chat_template = g_strdup (self->chat_template);
  if (self->stop && *self->stop)
    p->stop = g_strsplit (self->stop, "|", -1);
  p->sampler.temperature = self->temperature;
  p->sampler.top_k = self->top_k;
  p->sampler.top_p = self->top_p;
  p->sampler.min_p = self->min_p;
  p->sampler.repeat_penalty = self->repeat_penalty;
  p->sampler.seed = self->seed;
  GST_OBJECT_UNLOCK (self);
}

/* Builds the session from @path's metadata and the tensors @ld finds.
 * Posts the error itself. */
static gboolean
build_session (GstNpuLlm * self, const gchar * path, GstNpuWeights * weights)
{
  LookupData ld = { NULL, NULL, weights };
  const NpuGguf *meta;
  NpuLlmSessionParams params;
  NpuLlmHParams hp;
  NpuLlmModel *model;
  NpuLlmSession *session;
  NpuQueue *queue;
  GError *error = NULL;
  guint n_threads;

  /* the weights pad's tensors have GGUF names: a directory's metadata
   * would not find them */
  if (!weights && npu_hf_model_is_hf_path (path)) {
    ld.hf = npu_hf_model_open (path, &error);
    if (!ld.hf)
      goto open_failed;
    meta = npu_hf_model_get_metadata (ld.hf);
  } else {
    ld.gguf = npu_gguf_open (path, &error);
    if (!ld.gguf)
      goto open_failed;
    meta = ld.gguf;
  }
  if (!npu_llm_hparams_from_gguf (meta, &hp, &error))
    goto bad_model;
  /* MXFP4 matrices are read in place: from the file mapping or from the
   * buffers mxfp4weights pushed; both stay alive until stop(). */
  model = npu_llm_model_new (&hp, lookup_tensor, &ld, NPU_LLM_LOAD_IN_PLACE,
      &error);
  if (!model)
    goto bad_model;
  fill_session_params (self, &params);
  session = npu_llm_session_new (meta, model, &params, &error);
  npu_llm_session_params_clear (&params);
  GST_OBJECT_LOCK (self);
  n_threads = self->n_threads;
  GST_OBJECT_UNLOCK (self);
  queue = session ? gst_npu_element_new_queue (GST_ELEMENT (self),
      n_threads) : NULL;
  /* Published together under the lock the answering task waits under:
   * the weights pad builds the session in its own thread, and the task
   * must not see the session before its queue (ThreadSanitizer) */
  g_mutex_lock (&self->lock);
  self->gguf = ld.gguf;
  self->hf = ld.hf;
  self->session = session;
  self->queue = queue;
  g_mutex_unlock (&self->lock);
  if (!session)
    goto bad_settings;

  GST_INFO_OBJECT (self, "%s: %u layers, %u-wide, chat template %s", path,
      hp.n_layer, hp.n_embd, npu_llm_session_get_template_name (session));
  if (ld.hf)
    GST_INFO_OBJECT (self, "%s: a Hugging Face directory; %" G_GUINT64_FORMAT
        " bytes of vectors copied at load (widened to F32, or the experts' "
        "biases parted into gate and up), each expert's MXFP4 blocks "
        "rewritten into our layout when a token first reaches it (the values "
        "unchanged)", path, npu_hf_model_get_rewritten_bytes (ld.hf));
  return TRUE;

  /* ERRORS */
open_failed:
  {
    gst_npu_element_post_model_open_error (GST_ELEMENT (self), path,
        ld.hf || (!weights && npu_hf_model_is_hf_path (path)) ?
        "Hugging Face model" : "GGUF", error);
    g_error_free (error);
    return FALSE;
  }
bad_model:
  {
    GST_ELEMENT_ERROR (self, STREAM, WRONG_TYPE,
        ("Model \"%s\" cannot be run: %s", path, error->message),
        ("%s", error->message));
    g_error_free (error);
    if (ld.gguf)
      npu_gguf_free (ld.gguf);
    npu_hf_model_free (ld.hf);
    return FALSE;
  }
bad_settings:
  {
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
        ("Cannot set up model \"%s\": %s", path, error->message),
        ("%s", error->message));
    g_error_free (error);
    return FALSE;
  }
}

/* The model, from the file of the model property or from the weights pad;
 * wakes the output task, which waits for it. */
static gboolean
load_session (GstElement * element, const gchar * path, GstNpuWeights * weights)
{
  GstNpuLlm *self = GST_NPU_LLM (element);
  gboolean ok = build_session (self, path, weights);

  g_mutex_lock (&self->lock);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  return ok;
}

/* ------------------------------------------------------------------------
 * Output
 */
typedef struct
{
  GstNpuLlm *self;
  Job *job;
  GString *pending;
  GString *answer;              /* the whole answer, for the video pad */
  GString *analysis;            /* harmony: the analysis channel's text */
  gboolean reasoning;           /* stream the analysis too */
  GstNpuLlmOutput output;
  GstFlowReturn flow;
} EmitData;

/* Text out.  With the video pass-through in use the text pad may be left
 * unlinked: the answers then only ride on the frames. */
static GstFlowReturn
push_src (GstNpuLlm * self, GstBuffer * buf)
{
  GstFlowReturn flow = gst_pad_push (self->srcpad, buf);

  if (flow == GST_FLOW_NOT_LINKED && self->videosrcpad)
    flow = GST_FLOW_OK;
  return flow;
}

static GstFlowReturn
push_text (GstNpuLlm * self, Job * job, const gchar * text, gsize len)
{
  GstBuffer *buf = gst_buffer_new_memdup (text, len);

  GST_BUFFER_PTS (buf) = job->pts;
  GST_BUFFER_DURATION (buf) = job->duration;
  return push_src (self, buf);
}

/* output=caption.  textoverlay draws a text buffer on the video frames
 * inside [PTS, PTS + duration) and holds back the next text buffer until
 * that interval is over, so a caption needs its whole validity in its
 * duration: until the next answer's PTS, or caption-duration.  Nothing to
 * say is a gap event, which lets textoverlay (wait-text=true) go on. */
static gboolean
is_blank (const gchar * text, gsize len)
{
  gsize i;

  for (i = 0; i < len; i++)
    if (!g_ascii_isspace (text[i]))
      return FALSE;
  return TRUE;
}

/* Pushes @caption (taken) as valid from its PTS to @end: a buffer, or a gap
 * event when it holds no text. */
static GstFlowReturn
push_caption (GstNpuLlm * self, GstBuffer * caption, GstClockTime end)
{
  GstClockTime pts = GST_BUFFER_PTS (caption);
  GstClockTime duration = GST_CLOCK_TIME_IS_VALID (end) && end > pts ?
      end - pts : GST_CLOCK_TIME_NONE;

  GST_DEBUG_OBJECT (self, "caption of %" G_GSIZE_FORMAT " bytes, %"
      GST_TIME_FORMAT " + %" GST_TIME_FORMAT, gst_buffer_get_size (caption),
      GST_TIME_ARGS (pts), GST_TIME_ARGS (duration));
  self->sent_caption = TRUE;
  if (gst_buffer_get_size (caption) == 0) {
    gst_buffer_unref (caption);
    gst_pad_push_event (self->srcpad, gst_event_new_gap (pts, duration));
    return GST_FLOW_OK;
  }
  GST_BUFFER_DURATION (caption) = duration;
  return push_src (self, caption);
}

/* Whether the media comes from a live source, asked once per stream. */
static gboolean
media_is_live (GstNpuLlm * self)
{
  GstPad *pads[] = { self->visionpad, self->audiopad, self->textpad };
  guint i;

  if (self->live_known)
    return self->live;
  self->live_known = TRUE;
  self->live = FALSE;
  for (i = 0; i < G_N_ELEMENTS (pads) && !self->live; i++) {
    GstQuery *q;

    if (!pads[i])
      continue;
    q = gst_query_new_latency ();
    if (gst_pad_peer_query (pads[i], q))
      gst_query_parse_latency (q, &self->live, NULL, NULL);
    gst_query_unref (q);
  }
  return self->live;
}

/* The running time on the pipeline clock, or NONE without one. */
static GstClockTime
running_time_now (GstNpuLlm * self)
{
  GstClock *clock = gst_element_get_clock (GST_ELEMENT (self));
  GstClockTime now, base;

  if (!clock)
    return GST_CLOCK_TIME_NONE;
  now = gst_clock_get_time (clock);
  base = gst_element_get_base_time (GST_ELEMENT (self));
  gst_object_unref (clock);
  return now > base ? now - base : 0;
}

static GstFlowReturn
emit_caption (GstNpuLlm * self, Job * job, const gchar * text, gsize len)
{
  GstBuffer *caption;
  GstClockTime pts = job->pts, hold_for;
  GstFlowReturn flow = GST_FLOW_OK;

  GST_OBJECT_LOCK (self);
  hold_for = self->caption_duration;
  GST_OBJECT_UNLOCK (self);

  GST_LOG_OBJECT (self, "answer: \"%.*s\"", (int) len, text);
  caption = is_blank (text, len) ? gst_buffer_new () :
      gst_buffer_new_memdup (text, len);
  GST_BUFFER_PTS (caption) = pts;
  if (!GST_CLOCK_TIME_IS_VALID (pts)) {
    /* Nothing to time it by: as the other outputs do. */
    GST_BUFFER_DURATION (caption) = job->duration;
    return push_src (self, caption);
  }
  /* Before the first answer there was nothing to say. */
  if (!self->sent_caption && pts > 0)
    gst_pad_push_event (self->srcpad, gst_event_new_gap (0, pts));
  self->sent_caption = TRUE;
  if (hold_for > 0)
    return push_caption (self, caption, pts + hold_for);
  if (media_is_live (self)) {
    /* Live: the frames up to now are drawn already, and holding the
     * answer until the next one would only show it in the past.  It stays
     * until about when the next answer is due: twice the time it took to
     * arrive after its frame, at least a second. */
    GstClockTime now = running_time_now (self);
    GstClockTime late = GST_CLOCK_TIME_IS_VALID (now) && now > pts ?
        now - pts : 0;

    return push_caption (self, caption, pts + MAX (2 * late, GST_SECOND));
  }
  if (self->held_caption)
    flow = push_caption (self, g_steal_pointer (&self->held_caption), pts);
  self->held_caption = caption;
  return flow;
}

/* The end of the stream: the last answer stays to the end. */
static void
release_caption (GstNpuLlm * self)
{
  if (self->held_caption)
    push_caption (self, g_steal_pointer (&self->held_caption), G_MAXINT64);
}

/* What the frames on the video pad carry from now on: the answer, or
 * nothing when it is blank. */
static void
set_latest_answer (GstNpuLlm * self, const gchar * text, gsize len)
{
  gchar *answer = is_blank (text, len) ? NULL :
      g_strstrip (g_strndup (text, len));

  GST_OBJECT_LOCK (self);
  g_free (self->latest_answer);
  self->latest_answer = answer;
  GST_OBJECT_UNLOCK (self);
}

static gboolean
ends_sentence (const gchar * s, gsize len)
{
  gsize i;

  for (i = 0; i < len; i++)
    if (s[i] == '.' || s[i] == '!' || s[i] == '?' || s[i] == '\n')
      return TRUE;
  return FALSE;
}

/* output=sentence: one sentence a buffer, as a line of text.  The space
 * the model puts between sentences moves into a newline at the end, so
 * that the buffers written one after the other (fdsink, filesink) read as
 * one sentence a line, not run together; textoverlay does not draw the
 * trailing newline.  Whitespace alone (a blank line of the answer) is no
 * sentence. */
static GstFlowReturn
push_sentence (GstNpuLlm * self, Job * job, GString * pending)
{
  gsize start = 0, end = pending->len;
  GstFlowReturn flow = GST_FLOW_OK;

  while (start < end && g_ascii_isspace (pending->str[start]))
    start++;
  while (end > start && g_ascii_isspace (pending->str[end - 1]))
    end--;
  if (end > start) {
    g_string_truncate (pending, end);
    g_string_erase (pending, 0, start);
    g_string_append_c (pending, '\n');
    flow = push_text (self, job, pending->str, pending->len);
  }
  g_string_truncate (pending, 0);
  return flow;
}

static gboolean
emit_text (const gchar * text, gsize len, gpointer user_data)
{
  EmitData *ed = user_data;

  if (npu_llm_session_get_emit_channel (ed->self->session) ==
      NPU_HARMONY_ANALYSIS) {
    g_string_append_len (ed->analysis, text, len);
    if (!ed->reasoning)
      return TRUE;
  } else {
    g_string_append_len (ed->answer, text, len);
  }
  if (ed->output == GST_NPU_LLM_OUTPUT_TOKEN) {
    ed->flow = push_text (ed->self, ed->job, text, len);
  } else {
    g_string_append_len (ed->pending, text, len);
    if (ed->output == GST_NPU_LLM_OUTPUT_SENTENCE && ends_sentence (text, len))
      ed->flow = push_sentence (ed->self, ed->job, ed->pending);
  }
  return ed->flow == GST_FLOW_OK;
}

static void
start_stream (GstNpuLlm * self)
{
  gchar *id;
  GstSegment segment;
  GstCaps *caps;

  if (self->started_stream && !self->need_segment)
    return;
  if (!self->started_stream) {
    /* Made up, as aggregators do: gst_pad_create_stream_id() derives it
     * from the single upstream stream and refuses an element with several
     * sink pads (vision + audio, or weights + vision) */
    id = g_strdup_printf ("npullm-%08x", g_random_int ());
    gst_pad_push_event (self->srcpad, gst_event_new_stream_start (id));
    g_free (id);
    caps = gst_caps_new_simple ("text/x-raw", "format", G_TYPE_STRING,
        "utf8", NULL);
    gst_pad_push_event (self->srcpad, gst_event_new_caps (caps));
    gst_caps_unref (caps);
  }
  gst_segment_init (&segment, GST_FORMAT_TIME);
  gst_pad_push_event (self->srcpad, gst_event_new_segment (&segment));
  self->started_stream = TRUE;
  self->need_segment = FALSE;
}

static void
post_stats (GstNpuLlm * self, const NpuLlmAnswerStats * st,
    const gchar * analysis)
{
  gdouble ttft = st->prompt_us / 1000.0;
  gdouble prefill = st->prompt_us ? st->n_prompt * 1e6 / st->prompt_us : 0;
  gdouble decode = st->decode_us ? st->n_generated * 1e6 / st->decode_us : 0;
  gdouble pj_per_bit;
  GstStructure *s;

  GST_OBJECT_LOCK (self);
  self->ttft_ms = ttft;
  self->prefill_tps = prefill;
  self->decode_tps = decode;
  self->n_answers++;
  pj_per_bit = self->pj_per_bit;
  GST_OBJECT_UNLOCK (self);

  s = gst_structure_new ("npullm-stats", "ttft-ms", G_TYPE_DOUBLE, ttft,
      "prefill-tps", G_TYPE_DOUBLE, prefill, "decode-tps",
      G_TYPE_DOUBLE, decode, "prompt-tokens", G_TYPE_UINT,
      st->n_prompt, "reused-tokens", G_TYPE_UINT,
      /* KV rows not evaluated again: the shared prompt prefix of
       * a fresh answer, or the kept conversation (the two never
       * both count) */
      st->n_reused + st->n_context,
      "context-tokens", G_TYPE_UINT, st->n_context,
      "generated-tokens", G_TYPE_UINT,
      st->n_generated, "end", G_TYPE_STRING,
      st->hit_eog ? "eog" : st->hit_stop ? "stop" : st->hit_max ?
      "max-tokens" : "stopped", "analysis", G_TYPE_STRING, analysis, NULL);
  /* the bytes the model moved, counted by the core: the prompt's, and the
   * decoded tokens' summed (a token's at position S reads the weights and
   * S rows of the KV cache) */
  gst_structure_set (s, "decoded-tokens", G_TYPE_UINT, st->n_decoded,
      "pj-per-bit", G_TYPE_DOUBLE, pj_per_bit, NULL);
  /* the decode's pace: the threads of its last token, the time slept
   * between tokens to hold decode-rate (0 when not paced) */
  gst_structure_set (s, "decode-policy", G_TYPE_STRING, st->pace_rate > 0 ?
      "paced" : "as-fast-as-possible", "decode-rate", G_TYPE_DOUBLE,
      st->pace_rate, "decode-threads", G_TYPE_UINT,
      st->decode_threads, "paced-sleep-ms", G_TYPE_DOUBLE,
      st->paced_sleep_us / 1000.0, NULL);
  gst_npu_element_set_bytes_fields (s, "prompt-", &st->prompt_bytes,
      pj_per_bit);
  gst_npu_element_set_bytes_fields (s, "decode-", &st->decode_bytes,
      pj_per_bit);
  set_media_fields (self, s);
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self), s));
}

/* Which buffer holds @m's rows: our tokenizers' own (a GstNpuTokensMeta)
 * or a plain tensor buffer, or, on GStreamer 1.26, the tensor of a
 * GstTensorMeta when that is what the buffer carries. */
static gboolean
select_tokens (GstNpuLlm * self, MediaItem * m, guint n_embd, GError ** error)
{
  if (gst_buffer_get_npu_tokens_meta (m->buffer)) {
    m->tokens = gst_buffer_ref (m->buffer);
    return TRUE;
  }
#ifdef HAVE_GST_ANALYTICS
  {
    GError *err = NULL;

    m->tokens = gst_npu_buffer_find_token_tensor (m->buffer,
        m->pad == self->audiopad ? GST_NPU_MODALITY_AUDIO :
        GST_NPU_MODALITY_VISION, n_embd, &err);
    if (m->tokens)
      return TRUE;
    if (err) {
      g_propagate_error (error, err);
      return FALSE;
    }
    if (m->raw_media) {
      g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT,
          "a %s buffer on the %s pad carries no GstTensorMeta: it holds "
          "no tokens", m->pad == self->audiopad ? "audio" : "video",
          GST_PAD_NAME (m->pad));
      return FALSE;
    }
  }
#endif
  m->tokens = gst_buffer_ref (m->buffer);
  return TRUE;
}

/* Rows a tokenizer made for another text model: their width, as its
 * GstNpuTokensMeta gives it, must be the model's embedding size.  The
 * size check after mapping cannot see it when the bytes happen to divide
 * into rows of the model's width (96-wide rows, 64-wide model, an even
 * number of rows), and the rows would be read as other tokens. */
static gboolean
tokens_fit_model (MediaItem * m, guint n_embd, GError ** error)
{
  GstNpuTokensMeta *meta = gst_buffer_get_npu_tokens_meta (m->tokens);

  if (!meta || meta->dim == n_embd)
    return TRUE;
  g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT,
      "Tokens do not fit the model: the %s pad's rows are %u wide, the text "
      "model's embedding size is %u (the vision/audio projector must output "
      "the text model's embedding size)", GST_PAD_NAME (m->pad), meta->dim,
      n_embd);
  return FALSE;
}

/* Maps a job's media once its producer is done.  Media a producer
 * dropped (its task was cancelled) leaves the job; returns FALSE with
 * @skip set when none is left, or with @error set when a producer failed
 * or the rows do not fit the model. */
static gboolean
map_media (GstNpuLlm * self, Job * job, gboolean * skip, GError ** error)
{
  guint n_embd = npu_llm_session_get_n_embd (self->session);
  GList *l, *next;

  *skip = FALSE;
  for (l = job->media; l; l = next) {
    MediaItem *m = l->data;
    GError *err = NULL;

    next = l->next;
    /* Bounded: a producer whose fence never signals is an error, not a
     * hang (GST_NPU_FENCE_TIMEOUT_MS) */
    if (!gst_npu_buffer_wait (m->buffer, gst_npu_fence_timeout_us (), &err)) {
      if (g_error_matches (err, NPU_FENCE_ERROR, NPU_FENCE_ERROR_CANCELLED)) {
        g_error_free (err);
        count_media (self, &self->media_dropped, 1);
        media_item_free (m);
        job->media = g_list_delete_link (job->media, l);
        *skip = job->media == NULL;
        if (*skip)
          return FALSE;
        continue;
      }
      if (g_error_matches (err, NPU_FENCE_ERROR, NPU_FENCE_ERROR_TIMEOUT))
        g_propagate_prefixed_error (error, err, "the tokens were not ready "
            "in time (GST_NPU_FENCE_TIMEOUT_MS): ");
      else
        g_propagate_prefixed_error (error, err,
            "the tokens' producer failed: ");
      return FALSE;
    }
    if (!select_tokens (self, m, n_embd, error))
      return FALSE;
    if (!tokens_fit_model (m, n_embd, error))
      return FALSE;
    if (!gst_buffer_map (m->tokens, &m->map, GST_MAP_READ)) {
      g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FAILED,
          "the token buffer cannot be mapped");
      return FALSE;
    }
    m->mapped = TRUE;
    if (m->map.size == 0 || m->map.size % (n_embd * sizeof (float))) {
      g_set_error (error, GST_STREAM_ERROR, GST_STREAM_ERROR_FORMAT,
          "Tokens do not fit the model: %" G_GSIZE_FORMAT " bytes is not a "
          "whole number of %u-wide F32 rows (the vision/audio projector must "
          "output the text model's embedding size)", m->map.size, n_embd);
      return FALSE;
    }
    m->n_rows = m->map.size / (n_embd * sizeof (float));
  }
  return TRUE;
}

/* Where a job's @n media end once its answer returned: answered, unless
 * a flush or a shutdown cut it short (cancelled: the session's error, or
 * the output's FLUSHING) or it failed. */
static void
count_answer_media (GstNpuLlm * self, guint n, gboolean ok,
    const GError * error, GstFlowReturn flow)
{
  if (ok && flow != GST_FLOW_FLUSHING)
    count_media (self, &self->media_answered, n);
  else if (ok || g_error_matches (error, NPU_LLM_SESSION_ERROR,
          NPU_LLM_SESSION_ERROR_CANCELLED))
    count_media (self, &self->media_cancelled, n);
  else
    count_media (self, &self->media_failed, n);
}

/* Maps @job's media for its answer; FALSE when the job is over (freed):
 * all its media dropped by their producer (skipped), or an error (posted,
 * the task paused). */
static gboolean
take_media (GstNpuLlm * self, Job * job)
{
  GError *error = NULL;
  gboolean skip;

  if (map_media (self, job, &skip, &error))
    return TRUE;
  /* what is left of the job: none when all was dropped (@skip) */
  count_media (self, &self->media_failed, g_list_length (job->media));
  job_free (job);
  if (skip) {
    GST_DEBUG_OBJECT (self, "media dropped by its producer, skipped");
    return FALSE;
  }
  GST_ELEMENT_ERROR (self, STREAM, FORMAT, ("%s", error->message),
      ("%s", error->message));
  g_error_free (error);
  gst_pad_pause_task (self->srcpad);
  return FALSE;
}

/* The src pad's task: answers jobs as they come. */
/* The properties that may change while playing, read once an answer */
static void
apply_answer_settings (GstNpuLlm * self, EmitData * ed)
{
  GST_OBJECT_LOCK (self);
  ed->output = self->output;
  ed->reasoning = self->reasoning;
  npu_llm_session_set_max_tokens (self->session, self->max_tokens);
  npu_llm_session_set_keep_context (self->session, self->keep_context);
  npu_llm_session_set_pace (self->session, self->decode_policy ==
      GST_NPU_LLM_DECODE_PACED ? self->decode_rate : 0.0);
  GST_OBJECT_UNLOCK (self);
}

static void
gst_npu_llm_loop (GstNpuLlm * self)
{
  NpuLlmAnswerStats st;
  NpuLlmMedia media[8];
  guint n_media = 0;
  EmitData ed;
  GError *error = NULL;
  GList *l;
  Job *job;
  gboolean ok;
  gchar *analysis;

  g_mutex_lock (&self->lock);
  while (!self->flushing && (!self->session ||
          g_queue_is_empty (&self->jobs)) && !(self->eos_pending &&
          g_queue_is_empty (&self->jobs)))
    g_cond_wait (&self->cond, &self->lock);
  if (self->flushing)
    goto flushing_locked;
  if (g_queue_is_empty (&self->jobs)) {
    g_mutex_unlock (&self->lock);
    post_media_stats (self, "eos", FALSE);
    start_stream (self);
    release_caption (self);
    gst_pad_push_event (self->srcpad, gst_event_new_eos ());
    gst_pad_pause_task (self->srcpad);
    return;
  }
  job = g_queue_pop_head (&self->jobs);
  if (job == self->latest_media_job)
    self->latest_media_job = NULL;
  g_mutex_unlock (&self->lock);

  start_stream (self);
  if (!take_media (self, job))
    return;
  for (l = job->media; l && n_media < G_N_ELEMENTS (media); l = l->next) {
    MediaItem *m = l->data;
    media[n_media].rows = (const float *) m->map.data;
    media[n_media].n_rows = m->n_rows;
    /* where the decoder reads the rows: the producer's memory */
    gst_npu_input_watch_notify (GST_OBJECT (self), m->map.data, m->map.size);
    media[n_media].image = m->image;
    n_media++;
  }

  ed.self = self;
  ed.job = job;
  ed.pending = g_string_new (NULL);
  ed.answer = g_string_new (NULL);
  ed.analysis = g_string_new (NULL);
  apply_answer_settings (self, &ed);
  ed.flow = GST_FLOW_OK;
  /* the answer's PTS (its media's) ties its tasks to the frames in a
   * timeline (npu-timeline) */
  npu_queue_set_tag (self->queue, job->pts);
  ok = npu_llm_session_answer (self->session, self->queue, job->text, media,
      n_media, emit_text, &ed, &st, &error);
  if (ok && ed.flow == GST_FLOW_OK && ed.output == GST_NPU_LLM_OUTPUT_CAPTION)
    ed.flow = emit_caption (self, job, ed.pending->str, ed.pending->len);
  else if (ok && ed.flow == GST_FLOW_OK && ed.output ==
      GST_NPU_LLM_OUTPUT_SENTENCE)
    ed.flow = push_sentence (self, job, ed.pending);
  else if (ok && ed.flow == GST_FLOW_OK && ed.pending->len)
    ed.flow = push_text (self, job, ed.pending->str, ed.pending->len);
  g_string_free (ed.pending, TRUE);
  if (ok)
    set_latest_answer (self, ed.answer->str, ed.answer->len);
  g_string_free (ed.answer, TRUE);
  count_answer_media (self, g_list_length (job->media), ok, error, ed.flow);
  job_free (job);
  analysis = g_string_free (ed.analysis, FALSE);

  if (!ok) {
    g_free (analysis);
    if (g_error_matches (error, NPU_LLM_SESSION_ERROR,
            NPU_LLM_SESSION_ERROR_CANCELLED)) {
      g_error_free (error);
      gst_pad_pause_task (self->srcpad);
      return;
    }
    GST_ELEMENT_ERROR (self, STREAM, FAILED,
        ("Generating the answer failed: %s", error->message),
        ("%s", error->message));
    g_error_free (error);
    gst_pad_pause_task (self->srcpad);
    return;
  }
  post_stats (self, &st, analysis);
  g_free (analysis);
  if (ed.flow != GST_FLOW_OK) {
    GST_DEBUG_OBJECT (self, "pausing: %s", gst_flow_get_name (ed.flow));
    if (ed.flow == GST_FLOW_NOT_LINKED || ed.flow < GST_FLOW_EOS)
      GST_ELEMENT_FLOW_ERROR (self, ed.flow);
    gst_pad_pause_task (self->srcpad);
  }
  return;

flushing_locked:
  g_mutex_unlock (&self->lock);
  gst_pad_pause_task (self->srcpad);
}

/* ------------------------------------------------------------------------
 * Input
 */
/* Ends the answer being given: its tasks are cancelled, and a paced
 * answer's sleep between tokens ends at once (until FLUSH_STOP or a new
 * session) */
static void
cancel_answer (GstNpuLlm * self)
{
  NpuLlmSession *session;
  NpuQueue *queue;

  /* under the lock: the weights pad's thread may be setting them */
  g_mutex_lock (&self->lock);
  session = self->session;
  queue = self->queue;
  g_mutex_unlock (&self->lock);
  if (session)
    npu_llm_session_set_flushing (session, TRUE);
  if (queue)
    npu_queue_flush (queue);
}

static void
queue_job (GstNpuLlm * self, Job * job)
{
  g_mutex_lock (&self->lock);
  g_queue_push_tail (&self->jobs, job);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
}

static gint
compare_media_pts (gconstpointer a, gconstpointer b)
{
  GstClockTime pa = GST_BUFFER_PTS (((const MediaItem *) a)->buffer);
  GstClockTime pb = GST_BUFFER_PTS (((const MediaItem *) b)->buffer);

  /* Media without a timestamp goes after the timed one */
  if (pa == pb)
    return 0;
  if (!GST_CLOCK_TIME_IS_VALID (pa))
    return 1;
  if (!GST_CLOCK_TIME_IS_VALID (pb))
    return -1;
  return pa < pb ? -1 : 1;
}

/* The job's timestamp spans its media: from the first PTS to the end of
 * the last one */
static void
job_update_times (Job * job)
{
  GstClockTime start = GST_CLOCK_TIME_NONE, end = GST_CLOCK_TIME_NONE;
  GList *l;

  for (l = job->media; l; l = l->next) {
    GstBuffer *b = ((MediaItem *) l->data)->buffer;
    GstClockTime pts = GST_BUFFER_PTS (b), e;

    if (!GST_CLOCK_TIME_IS_VALID (pts))
      continue;
    if (!GST_CLOCK_TIME_IS_VALID (start) || pts < start)
      start = pts;
    e = pts + (GST_BUFFER_DURATION_IS_VALID (b) ? GST_BUFFER_DURATION (b) : 0);
    if (!GST_CLOCK_TIME_IS_VALID (end) || e > end)
      end = e;
  }
  job->pts = start;
  job->duration = GST_CLOCK_TIME_IS_VALID (start) && end > start ?
      end - start : GST_CLOCK_TIME_NONE;
}

/* Media waits in one job that the answering thread has not taken yet.  A
 * buffer from a pad that already has one there replaces it (latest wins,
 * counted); one from another pad joins it, in PTS order, so that an answer
 * about a camera and a microphone sees both, in the order they happened. */
static GstFlowReturn
gst_npu_llm_media_chain (GstPad * pad, GstObject * parent, GstBuffer * buf)
{
  GstNpuLlm *self = GST_NPU_LLM (parent);
  MediaItem *m = g_new0 (MediaItem, 1);
  Job *job;
  GList *l;

  /* Not mapped here: the tokens may still be computing (their fence), and
   * waiting would stall the producer.  The answering thread maps them. */
  m->pad = pad;
  m->buffer = buf;
  {
    GstNpuTokensMeta *meta = gst_buffer_get_npu_tokens_meta (buf);

    /* our tokenizers say what they encoded; other tensors, by their pad */
    m->image = meta ? meta->modality == GST_NPU_MODALITY_VISION :
        pad == self->visionpad;
  }
  {
    GstCaps *caps = gst_pad_get_current_caps (pad);

    m->raw_media = caps && g_str_has_suffix (gst_structure_get_name
        (gst_caps_get_structure (caps, 0)), "/x-raw");
    if (caps)
      gst_caps_unref (caps);
  }
  g_mutex_lock (&self->lock);
  self->media_accepted++;
  job = self->latest_media_job;
  if (!job) {
    job = g_new0 (Job, 1);
    GST_OBJECT_LOCK (self);
    job->text = g_strdup (self->prompt);
    GST_OBJECT_UNLOCK (self);
    g_queue_push_tail (&self->jobs, job);
    self->latest_media_job = job;
  }
  for (l = job->media; l; l = l->next) {
    if (((MediaItem *) l->data)->pad == pad) {
      media_item_free (l->data);
      job->media = g_list_delete_link (job->media, l);
      count_media_locked (self, &self->media_skipped, 1);
      GST_OBJECT_LOCK (self);
      self->media_replaced++;
      GST_OBJECT_UNLOCK (self);
      break;
    }
  }
  job->media = g_list_insert_sorted (job->media, m, compare_media_pts);
  job_update_times (job);
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  return GST_FLOW_OK;
}

static GstFlowReturn
gst_npu_llm_text_chain (GstPad * pad, GstObject * parent, GstBuffer * buf)
{
  GstNpuLlm *self = GST_NPU_LLM (parent);
  GstMapInfo map;
  Job *job;

  if (!gst_buffer_map (buf, &map, GST_MAP_READ)) {
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
  if (!g_utf8_validate ((const gchar *) map.data, map.size, NULL)) {
    gst_buffer_unmap (buf, &map);
    gst_buffer_unref (buf);
    GST_ELEMENT_ERROR (self, STREAM, DECODE, ("The prompt is not UTF-8."),
        (NULL));
    return GST_FLOW_ERROR;
  }
  job = g_new0 (Job, 1);
  job->text = g_strndup ((const gchar *) map.data, map.size);
  job->pts = GST_BUFFER_PTS (buf);
  job->duration = GST_BUFFER_DURATION (buf);
  job->from_text_pad = TRUE;
  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);
  if (*g_strstrip (job->text) == '\0') {
    job_free (job);
    return GST_FLOW_OK;
  }
  queue_job (self, job);
  return GST_FLOW_OK;
}

static void
input_ended (GstNpuLlm * self)
{
  g_mutex_lock (&self->lock);
  if (++self->media_eos >= self->n_input_pads) {
    self->eos_pending = TRUE;
    g_cond_broadcast (&self->cond);
  }
  g_mutex_unlock (&self->lock);
}

static gboolean
gst_npu_llm_sink_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstNpuLlm *self = GST_NPU_LLM (parent);

  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_CUSTOM_DOWNSTREAM_STICKY:
      gst_event_unref (event);
      return TRUE;
    case GST_EVENT_EOS:
      gst_event_unref (event);
      input_ended (self);
      return TRUE;
    case GST_EVENT_FLUSH_START:
      g_mutex_lock (&self->lock);
      self->flushing = TRUE;
      cancel_jobs_locked (self);
      g_cond_broadcast (&self->cond);
      g_mutex_unlock (&self->lock);
      cancel_answer (self);
      gst_pad_push_event (self->srcpad, event);
      gst_pad_pause_task (self->srcpad);
      /* the task is paused: the answer it ran is counted */
      post_media_stats (self, "flushed", TRUE);
      return TRUE;
    case GST_EVENT_FLUSH_STOP:
      g_mutex_lock (&self->lock);
      if (self->session)
        npu_llm_session_set_flushing (self->session, FALSE);
      self->flushing = FALSE;
      self->eos_pending = FALSE;
      self->media_eos = 0;
      self->need_segment = TRUE;
      g_mutex_unlock (&self->lock);
      /* the task is paused: the held answer belongs to the old segment */
      gst_clear_buffer (&self->held_caption);
      self->sent_caption = FALSE;
      gst_pad_push_event (self->srcpad, event);
      gst_pad_start_task (self->srcpad, (GstTaskFunction) gst_npu_llm_loop,
          self, NULL);
      return TRUE;
    case GST_EVENT_CAPS:
    case GST_EVENT_SEGMENT:
    case GST_EVENT_STREAM_START:
      /* The output stream is our own: one caps, one time segment. */
      gst_event_unref (event);
      return TRUE;
    default:
      if (!GST_EVENT_IS_SERIALIZED (event))
        return gst_pad_event_default (pad, parent, event);
      gst_event_unref (event);
      return TRUE;
  }
}

#ifdef HAVE_GST_ANALYTICS
/* ------------------------------------------------------------------------
 * The video pass-through: each frame leaves at once, with the latest
 * answer as a GstAnalyticsClsMtd (never waiting for one being generated)
 */
static GstFlowReturn
gst_npu_llm_video_chain (GstPad * pad, GstObject * parent, GstBuffer * buf)
{
  GstNpuLlm *self = GST_NPU_LLM (parent);
  gchar *answer;

  GST_OBJECT_LOCK (self);
  answer = g_strdup (self->latest_answer);
  GST_OBJECT_UNLOCK (self);
  if (answer) {
    /* a new buffer head at most: the frame's memory is shared, not copied */
    buf = gst_buffer_make_writable (buf);
    if (!gst_npu_buffer_add_caption_mtd (buf, answer))
      GST_WARNING_OBJECT (self, "cannot attach the answer to the frame");
    g_free (answer);
  }
  return gst_pad_push (self->videosrcpad, buf);
}

static gboolean
gst_npu_llm_video_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstNpuLlm *self = GST_NPU_LLM (parent);

  return gst_pad_push_event (pad == self->videosinkpad ? self->videosrcpad :
      self->videosinkpad, event);
}

/* Queries (caps, allocation, latency...) go through to the other video pad
 * only, not to the tokens' and text pads. */
static GstIterator *
gst_npu_llm_video_iterate_links (GstPad * pad, GstObject * parent)
{
  GstNpuLlm *self = GST_NPU_LLM (parent);
  GValue v = G_VALUE_INIT;
  GstIterator *it;

  g_value_init (&v, GST_TYPE_PAD);
  g_value_set_object (&v, pad == self->videosinkpad ? self->videosrcpad :
      self->videosinkpad);
  it = gst_iterator_new_single (GST_TYPE_PAD, &v);
  g_value_unset (&v);
  return it;
}

/* The other pads' links leave the video pair out: a query or event of the
 * tokens, text or weights pads must not wander into the video branch. */
static gint
keep_linked_pad (const GValue * item, const GValue * from)
{
  GstPad *pad = g_value_get_object (item), *origin = g_value_get_object (from);
  GstNpuLlm *self = GST_NPU_LLM (GST_PAD_PARENT (origin));

  if (pad == self->videosinkpad || pad == self->videosrcpad)
    return 1;
  return GST_PAD_DIRECTION (pad) == GST_PAD_DIRECTION (origin);
}

static GstIterator *
gst_npu_llm_iterate_links (GstPad * pad, GstObject * parent)
{
  GValue from = G_VALUE_INIT;
  GstIterator *it;

  g_value_init (&from, GST_TYPE_PAD);
  g_value_set_object (&from, pad);
  it = gst_iterator_filter (gst_element_iterate_pads (GST_ELEMENT (parent)),
      (GCompareFunc) keep_linked_pad, &from);
  g_value_unset (&from);
  return it;
}

static GstPad *
add_video_pads (GstNpuLlm * self, GstPadTemplate * templ)
{
  GstElementClass *klass = GST_ELEMENT_GET_CLASS (self);
  GstPad *sink, *src;

  if (self->videosinkpad) {
    GST_WARNING_OBJECT (self, "pad video_sink already exists");
    return NULL;
  }
  sink = gst_pad_new_from_template (templ, "video_sink");
  src = gst_pad_new_from_template (gst_element_class_get_pad_template (klass,
          "video_src"), "video_src");
  gst_pad_set_chain_function (sink, gst_npu_llm_video_chain);
  gst_pad_set_event_function (sink, gst_npu_llm_video_event);
  gst_pad_set_event_function (src, gst_npu_llm_video_event);
  gst_pad_set_iterate_internal_links_function (sink,
      gst_npu_llm_video_iterate_links);
  gst_pad_set_iterate_internal_links_function (src,
      gst_npu_llm_video_iterate_links);
  GST_PAD_SET_PROXY_CAPS (sink);
  GST_PAD_SET_PROXY_ALLOCATION (sink);
  GST_PAD_SET_PROXY_SCHEDULING (sink);
  GST_PAD_SET_PROXY_CAPS (src);
  GST_PAD_SET_PROXY_SCHEDULING (src);
  self->videosinkpad = sink;
  self->videosrcpad = src;
  /* the source first: a frame may follow the sink pad at once (pads added
   * in PAUSED or PLAYING are activated by gst_element_add_pad) */
  gst_element_add_pad (GST_ELEMENT (self), src);
  gst_element_add_pad (GST_ELEMENT (self), sink);
  return sink;
}
#endif

static GstPad *
gst_npu_llm_request_new_pad (GstElement * element, GstPadTemplate * templ,
    const gchar * name, const GstCaps * caps)
{
  GstNpuLlm *self = GST_NPU_LLM (element);
  const gchar *tname = GST_PAD_TEMPLATE_NAME_TEMPLATE (templ);
  GstPad **slot;
  GstPadChainFunction chain;
  GstPad *pad;

#ifdef HAVE_GST_ANALYTICS
  if (!g_strcmp0 (tname, "video_sink"))
    return add_video_pads (self, templ);
#endif
  if (!g_strcmp0 (tname, "text")) {
    slot = &self->textpad;
    chain = gst_npu_llm_text_chain;
  } else if (!g_strcmp0 (tname, "vision")) {
    slot = &self->visionpad;
    chain = gst_npu_llm_media_chain;
  } else if (!g_strcmp0 (tname, "audio")) {
    slot = &self->audiopad;
    chain = gst_npu_llm_media_chain;
  } else if (!g_strcmp0 (tname, "weights")) {
    pad = gst_npu_weights_input_request_pad (self->weights_in, templ);
    if (pad) {
      GST_PAD_SET_PROXY_ALLOCATION (pad);
#ifdef HAVE_GST_ANALYTICS
      /* not into video_src: the weights are not the video's */
      gst_pad_set_iterate_internal_links_function (pad,
          gst_npu_llm_iterate_links);
#endif
    } else
      GST_WARNING_OBJECT (self, "pad %s already exists", tname);
    return pad;
  } else {
    return NULL;
  }
  if (*slot) {
    GST_WARNING_OBJECT (self, "pad %s already exists", tname);
    return NULL;
  }
  pad = gst_pad_new_from_template (templ, tname);
  gst_pad_set_chain_function (pad, chain);
  gst_pad_set_event_function (pad, gst_npu_llm_sink_event);
#ifdef HAVE_GST_ANALYTICS
  gst_pad_set_iterate_internal_links_function (pad, gst_npu_llm_iterate_links);
#endif
  GST_PAD_SET_PROXY_ALLOCATION (pad);
  *slot = pad;
  gst_element_add_pad (element, pad);
  return pad;
}

static void
gst_npu_llm_release_pad (GstElement * element, GstPad * pad)
{
  GstNpuLlm *self = GST_NPU_LLM (element);

  if (pad == self->textpad)
    self->textpad = NULL;
  else if (pad == self->visionpad)
    self->visionpad = NULL;
  else if (pad == self->audiopad)
    self->audiopad = NULL;
  else if (gst_npu_weights_input_release_pad (self->weights_in, pad))
    return;
  if (pad == self->videosinkpad) {
    GstPad *src = self->videosrcpad;

    self->videosinkpad = self->videosrcpad = NULL;
    gst_element_remove_pad (element, src);
  }
  gst_element_remove_pad (element, pad);
}

/* ------------------------------------------------------------------------
 * States
 */
static gboolean
start (GstNpuLlm * self)
{
  gchar *model, *prompt;

  GST_OBJECT_LOCK (self);
  model = g_strdup (self->model);
  prompt = g_strdup (self->prompt);
  GST_OBJECT_UNLOCK (self);

  self->flushing = FALSE;
  self->eos_pending = FALSE;
  self->media_eos = 0;
  self->started_stream = FALSE;
  self->media_accepted = self->media_answered = self->media_skipped = 0;
  self->media_dropped = self->media_cancelled = self->media_failed = 0;
  self->media_unreported = FALSE;
  self->n_input_pads = (self->textpad != NULL) + (self->visionpad != NULL) +
      (self->audiopad != NULL);
  self->text_only = self->n_input_pads == 0;
  if (!gst_npu_weights_input_start (self->weights_in, model))
    goto failed;

  if (self->text_only) {
    Job *job;
    if (!prompt || !*prompt) {
      GST_ELEMENT_ERROR (self, RESOURCE, SETTINGS, ("No prompt given."),
          ("with no input pad, npullm answers the \"prompt\" property"));
      goto failed;
    }
    job = g_new0 (Job, 1);
    job->text = g_strdup (prompt);
    job->pts = 0;
    job->duration = GST_CLOCK_TIME_NONE;
    g_queue_push_tail (&self->jobs, job);
    self->eos_pending = TRUE;
  }
  g_free (model);
  g_free (prompt);
  return TRUE;

failed:
  g_free (model);
  g_free (prompt);
  return FALSE;
}

static void
stop (GstNpuLlm * self)
{
  g_mutex_lock (&self->lock);
  self->flushing = TRUE;
  g_cond_broadcast (&self->cond);
  g_mutex_unlock (&self->lock);
  cancel_answer (self);
  gst_pad_stop_task (self->srcpad);
  gst_clear_buffer (&self->held_caption);
  self->sent_caption = FALSE;
  self->live_known = FALSE;
  GST_OBJECT_LOCK (self);
  g_clear_pointer (&self->latest_answer, g_free);
  GST_OBJECT_UNLOCK (self);

  g_mutex_lock (&self->lock);
  cancel_jobs_locked (self);
  g_mutex_unlock (&self->lock);
  post_media_stats (self, "shutdown", FALSE);
  if (self->queue)
    npu_queue_free (self->queue);
  self->queue = NULL;
  npu_llm_session_free (self->session);
  self->session = NULL;
  g_clear_pointer (&self->gguf, npu_gguf_free);
  g_clear_pointer (&self->hf, npu_hf_model_free);
  gst_npu_weights_input_stop (self->weights_in);
}

static GstStateChangeReturn
gst_npu_llm_change_state (GstElement * element, GstStateChange transition)
{
  GstNpuLlm *self = GST_NPU_LLM (element);
  GstStateChangeReturn ret;

  switch (transition) {
    case GST_STATE_CHANGE_READY_TO_PAUSED:
      if (!start (self)) {
        stop (self);
        return GST_STATE_CHANGE_FAILURE;
      }
      break;
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      /* Unblock chain functions waiting for the model before the pads
       * deactivate. */
      g_mutex_lock (&self->lock);
      self->flushing = TRUE;
      g_cond_broadcast (&self->cond);
      g_mutex_unlock (&self->lock);
      cancel_answer (self);
      break;
    default:
      break;
  }

  ret = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);

  switch (transition) {
    case GST_STATE_CHANGE_READY_TO_PAUSED:
      /* The source pad is active now: the answers can start flowing. */
      if (ret != GST_STATE_CHANGE_FAILURE && !gst_pad_start_task (self->srcpad,
              (GstTaskFunction) gst_npu_llm_loop, self, NULL))
        ret = GST_STATE_CHANGE_FAILURE;
      break;
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      stop (self);
      break;
    default:
      break;
  }
  return ret;
}
