/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: mxfp4weights, a model file's tensors as MXFP4 buffers */

/**
 * SECTION:element-mxfp4weights
 * @title: mxfp4weights
 *
 * Opens a GGUF or safetensors model file once (mmap) and pushes one buffer
 * per tensor, in file order, each with a #GstNpuTensorMeta naming the
 * tensor, its shape and its type, then EOS.
 *
 * - A tensor already in MXFP4 (GGUF type MXFP4) goes downstream without a
 *   copy: its memory is a view of the model file (fd memory over the file).
 * - F32, F16, BF16 and Q8_0 tensors of two or more dimensions whose rows are
 *   a multiple of 32 long and whose name matches #GstMxfp4Weights:convert are
 *   converted once to MXFP4 (OCP MX v1.0 rules, llama.cpp's block_mxfp4
 *   layout) in NPU memory.  The conversion runs on the CPU backend; the
 *   buffer is pushed at once with the conversion's fence, and anyone who
 *   maps it waits for the data.
 * - Except embedding tables (GGUF names with "_embd": token_embd.weight,
 *   the encoders' v.position_embd, a.position_embd, v.patch_embd,
 *   v.class_embd; Hugging Face names with "embed"), output.weight when it
 *   is Q8_0 (as llama.cpp keeps it in its MXFP4 files), gpt-oss's router
 *   and the biases, which are pushed as stored.
 *
 * This element is how a user asks for MXFP4: npullm, npuvisiontok and
 * npuaudiotok run every matrix in the type it reaches them in, so their
 * `model` property runs the file as stored, and a file here gives the
 * text and tokens of its MXFP4 conversion (4.25 bits a weight, less memory
 * and bandwidth than F16 or Q8_0, at 4-bit accuracy).
 * #GstMxfp4Weights:convert chooses the tensors: "" passes every tensor as
 * stored (then the text is the `model` property's), a list of patterns
 * converts only those.
 * - gpt-oss MXFP4 pairs in safetensors ("W.blocks" + "W.scales") are
 *   repacked into block_mxfp4 in NPU memory: their nibble order differs, so
 *   they cannot be used in place.  These bytes count in #bytes-copied.
 * - Every other tensor is pushed as stored, a view of the file.
 *
 * ## Example launch line
 * |[
 * gst-launch-1.0 mxfp4weights location=model.gguf ! filesink location=out.bin
 * ]| writes every tensor's bytes in file order, MXFP4 ones in block_mxfp4
 * layout.
 *
 * Since: 0.1.0
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstmxfp4weights.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>
#include <gst/allocators/allocators.h>
#include <npu/npu.h>
#include <core/device/npubackend.h>
#include <core/formats/npumodelfile.h>

GST_DEBUG_CATEGORY_STATIC (gst_mxfp4_weights_debug);
#define GST_CAT_DEFAULT gst_mxfp4_weights_debug

#define DEFAULT_LOCATION NULL
#define DEFAULT_CONVERT "*"
#define DEFAULT_N_THREADS 0
/* Rows quantised per slice of the parallel loop. */
#define CONVERT_GRAIN_ELEMENTS (64 * 1024)

enum
{
  PROP_0,
  PROP_LOCATION,
  PROP_CONVERT,
  PROP_N_THREADS,
  PROP_N_TENSORS,
  PROP_BYTES_MAPPED,
  PROP_BYTES_CONVERTED,
  PROP_BYTES_COPIED,
  PROP_CONVERSION_ERROR,
};

struct _GstMxfp4Weights
{
  GstBaseSrc parent;

  /* properties */
  gchar *location;
  gchar *convert;
  guint n_threads;

  /* while started */
  NpuModelFile *file;
  GstAllocator *fd_allocator;
  GstMemory *file_mem;          /* the whole file, mapped once */
  GstAllocator *npu_allocator;
  NpuQueue *queue;
  NpuFence *last_conversion;    /* the queue runs tasks in order */
  GPatternSpec **patterns;
  guint next;
  gboolean sent_model_event;

  /* statistics, under the object lock */
  guint n_tensors;
  guint64 bytes_mapped;
  guint64 bytes_converted;
  guint64 bytes_copied;
  gdouble conversion_error;     /* the largest relative RMS error */
};

static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC,
    GST_PAD_ALWAYS,
    GST_STATIC_CAPS ("other/npu-weights"));

#define gst_mxfp4_weights_parent_class parent_class
G_DEFINE_TYPE (GstMxfp4Weights, gst_mxfp4_weights, GST_TYPE_BASE_SRC);
GST_ELEMENT_REGISTER_DEFINE_WITH_CODE (mxfp4weights, "mxfp4weights",
    GST_RANK_NONE, GST_TYPE_MXFP4_WEIGHTS,
    GST_DEBUG_CATEGORY_INIT (gst_mxfp4_weights_debug, "mxfp4weights", 0,
        "model weights as MXFP4 tensors"));

static void gst_mxfp4_weights_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec);
static void gst_mxfp4_weights_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec);
static void gst_mxfp4_weights_finalize (GObject * object);
static gboolean gst_mxfp4_weights_start (GstBaseSrc * src);
static gboolean gst_mxfp4_weights_stop (GstBaseSrc * src);
static gboolean gst_mxfp4_weights_negotiate (GstBaseSrc * src);
static gboolean gst_mxfp4_weights_is_seekable (GstBaseSrc * src);
static GstFlowReturn gst_mxfp4_weights_create (GstBaseSrc * src,
    guint64 offset, guint size, GstBuffer ** buf);

static void
gst_mxfp4_weights_class_init (GstMxfp4WeightsClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GstBaseSrcClass *basesrc_class = GST_BASE_SRC_CLASS (klass);

  gobject_class->set_property = gst_mxfp4_weights_set_property;
  gobject_class->get_property = gst_mxfp4_weights_get_property;
  gobject_class->finalize = gst_mxfp4_weights_finalize;

  /**
   * GstMxfp4Weights:location:
   *
   * The model file: GGUF (v2 or v3) or safetensors.
   */
  g_object_class_install_property (gobject_class, PROP_LOCATION,
      g_param_spec_string ("location", "Location",
          "Model file (GGUF or safetensors)", DEFAULT_LOCATION,
          G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_READY));
  /**
   * GstMxfp4Weights:convert:
   *
   * Comma-separated name patterns ('*' and '?' wildcards) of the tensors to
   * convert to MXFP4.  Only F32, F16, BF16 and Q8_0 tensors with two or more
   * dimensions and rows a multiple of 32 long can be converted, and
   * embedding tables (names with "_embd" or "embed": token_embd.weight,
   * position tables, patch and class embeddings) or a Q8_0 output.weight
   * never are (npullm and the encoders read them in their own type); a
   * pattern never makes another tensor an error.  The default "*"
   * converts every other weight matrix; "" converts nothing, and the
   * consumers then run the file as stored.
   */
  g_object_class_install_property (gobject_class, PROP_CONVERT,
      g_param_spec_string ("convert", "Convert",
          "Comma-separated name patterns of the tensors to convert to MXFP4 "
          "(\"*\": every weight matrix, never embedding or position "
          "tables; \"\": none, every tensor as stored)",
          DEFAULT_CONVERT, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_READY));
  /**
   * GstMxfp4Weights:n-threads:
   *
   * Threads of the CPU backend that converts tensors; 0 = one per CPU.
   */
  g_object_class_install_property (gobject_class, PROP_N_THREADS,
      g_param_spec_uint ("n-threads", "Threads",
          "CPU backend threads for conversion (0 = one per CPU)", 0, 1024,
          DEFAULT_N_THREADS, G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
          GST_PARAM_MUTABLE_READY));
  /**
   * GstMxfp4Weights:n-tensors:
   *
   * Tensors in the open file.
   */
  g_object_class_install_property (gobject_class, PROP_N_TENSORS,
      g_param_spec_uint ("n-tensors", "Tensors", "Tensors in the file", 0,
          G_MAXUINT, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  /**
   * GstMxfp4Weights:bytes-mapped:
   *
   * Bytes pushed as views of the model file, without a copy.
   */
  g_object_class_install_property (gobject_class, PROP_BYTES_MAPPED,
      g_param_spec_uint64 ("bytes-mapped", "Bytes mapped",
          "Bytes pushed as views of the file (no copy)", 0, G_MAXUINT64, 0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  /**
   * GstMxfp4Weights:bytes-converted:
   *
   * MXFP4 bytes written by conversions from F32/F16/BF16/Q8_0.
   */
  g_object_class_install_property (gobject_class, PROP_BYTES_CONVERTED,
      g_param_spec_uint64 ("bytes-converted", "Bytes converted",
          "MXFP4 bytes produced by conversion", 0, G_MAXUINT64, 0,
          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));
  /**
   * GstMxfp4Weights:bytes-copied:
   *
   * Bytes copied unchanged in value: only gpt-oss MXFP4 pairs, whose nibble
   * order must be repacked.  Zero for GGUF files.
   */
  g_object_class_install_property (gobject_class, PROP_BYTES_COPIED,
      g_param_spec_uint64 ("bytes-copied", "Bytes copied",
          "Bytes repacked without conversion (gpt-oss safetensors pairs)", 0,
          G_MAXUINT64, 0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  /**
   * GstMxfp4Weights:conversion-error:
   *
   * The largest relative RMS error of a tensor converted so far, ||MXFP4
   * values - stored values|| / ||stored values||, measured as each tensor
   * is converted (each tensor's own is in the debug log, at INFO level);
   * 0 when nothing was converted.  Random weights of a bell shape come out
   * near 0.1-0.15: 4-bit values, as `convert` asks.
   */
  g_object_class_install_property (gobject_class, PROP_CONVERSION_ERROR,
      g_param_spec_double ("conversion-error", "Conversion error",
          "Largest relative RMS error of a converted tensor (0: none)", 0.0,
          G_MAXDOUBLE, 0.0, G_PARAM_READABLE | G_PARAM_STATIC_STRINGS));

  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "MXFP4 model weights", "Source/Tensor",
      "Reads a GGUF or safetensors model and pushes its tensors, as MXFP4 "
      "where wanted, without copying what is already MXFP4",
      "gst-npu developers");

  basesrc_class->start = GST_DEBUG_FUNCPTR (gst_mxfp4_weights_start);
  basesrc_class->stop = GST_DEBUG_FUNCPTR (gst_mxfp4_weights_stop);
  basesrc_class->negotiate = GST_DEBUG_FUNCPTR (gst_mxfp4_weights_negotiate);
  basesrc_class->is_seekable =
      GST_DEBUG_FUNCPTR (gst_mxfp4_weights_is_seekable);
  basesrc_class->create = GST_DEBUG_FUNCPTR (gst_mxfp4_weights_create);
}

static void
gst_mxfp4_weights_init (GstMxfp4Weights * self)
{
  self->location = g_strdup (DEFAULT_LOCATION);
  self->convert = g_strdup (DEFAULT_CONVERT);
  self->n_threads = DEFAULT_N_THREADS;
  gst_base_src_set_format (GST_BASE_SRC (self), GST_FORMAT_DEFAULT);
}

static void
gst_mxfp4_weights_finalize (GObject * object)
{
  GstMxfp4Weights *self = GST_MXFP4_WEIGHTS (object);

  g_free (self->location);
  g_free (self->convert);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_mxfp4_weights_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstMxfp4Weights *self = GST_MXFP4_WEIGHTS (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_LOCATION:
      g_free (self->location);
      self->location = g_value_dup_string (value);
      break;
    case PROP_CONVERT:
      g_free (self->convert);
      self->convert = g_value_dup_string (value);
      break;
    case PROP_N_THREADS:
      self->n_threads = g_value_get_uint (value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
gst_mxfp4_weights_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstMxfp4Weights *self = GST_MXFP4_WEIGHTS (object);

  GST_OBJECT_LOCK (self);
  switch (prop_id) {
    case PROP_LOCATION:
      g_value_set_string (value, self->location);
      break;
    case PROP_CONVERT:
      g_value_set_string (value, self->convert);
      break;
    case PROP_N_THREADS:
      g_value_set_uint (value, self->n_threads);
      break;
    case PROP_N_TENSORS:
      g_value_set_uint (value, self->n_tensors);
      break;
    case PROP_BYTES_MAPPED:
      g_value_set_uint64 (value, self->bytes_mapped);
      break;
    case PROP_BYTES_CONVERTED:
      g_value_set_uint64 (value, self->bytes_converted);
      break;
    case PROP_CONVERSION_ERROR:
      g_value_set_double (value, self->conversion_error);
      break;
    case PROP_BYTES_COPIED:
      g_value_set_uint64 (value, self->bytes_copied);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK (self);
}

static void
free_patterns (GPatternSpec ** patterns)
{
  GPatternSpec **p;

  for (p = patterns; p && *p; p++)
    g_pattern_spec_free (*p);
  g_free (patterns);
}

static GPatternSpec **
parse_patterns (const gchar * list)
{
  gchar **parts = g_strsplit (list ? list : "", ",", -1);
  GPtrArray *specs = g_ptr_array_new ();
  gchar **p;

  for (p = parts; *p; p++) {
    gchar *s = g_strstrip (*p);
    if (*s)
      g_ptr_array_add (specs, g_pattern_spec_new (s));
  }
  g_strfreev (parts);
  g_ptr_array_add (specs, NULL);
  return (GPatternSpec **) g_ptr_array_free (specs, FALSE);
}

/* What the consumers read in the file's own type, whatever `convert`
 * says: embedding tables, which are looked up or added row by row:
 * npullm's token_embd (a tied model's logits then read it as stored too),
 * the encoders'
 * position tables and patch and class embeddings (GGUF "..._embd"; Hugging
 * Face "embed_tokens", "embeddings.position_embedding", ...), which
 * npuvisiontok and npuaudiotok refuse in MXFP4; and a Q8_0 output matrix
 * (as llama.cpp reads its MXFP4 files); and gpt-oss's router
 * (ffn_gate_inp, whose products npullm takes in F32 so that a routing
 * decision does not turn on 4-bit rounding) and its experts' 2-D biases,
 * added as they are.  Converting them would only change the numbers, or
 * make the weights unusable. */
static gboolean
keep_as_stored (const NpuModelTensor * t)
{
  return strstr (t->name, "_embd") != NULL || strstr (t->name, "embed") != NULL
      || (t->type == NPU_TENSOR_TYPE_Q8_0
      && strcmp (t->name, "output.weight") == 0)
      || strstr (t->name, "ffn_gate_inp.") != NULL
      || g_str_has_suffix (t->name, ".bias");
}

static gboolean
wants_conversion (GstMxfp4Weights * self, const NpuModelTensor * t)
{
  GPatternSpec **p;

  if (!npu_model_tensor_can_convert (t) || keep_as_stored (t))
    return FALSE;
  for (p = self->patterns; *p; p++)
    if (g_pattern_spec_match_string (*p, t->name))
      return TRUE;
  return FALSE;
}

static gboolean
gst_mxfp4_weights_start (GstBaseSrc * src)
{
  GstMxfp4Weights *self = GST_MXFP4_WEIGHTS (src);
  GError *error = NULL;
  gchar *location, *convert;
  guint n_threads;
  int fd;

  GST_OBJECT_LOCK (self);
  location = g_strdup (self->location);
  convert = g_strdup (self->convert);
  n_threads = self->n_threads;
  GST_OBJECT_UNLOCK (self);

  if (!location || !*location)
    goto no_location;

  self->file = npu_model_file_open (location, &error);
  if (!self->file)
    goto open_failed;

  fd = dup (npu_model_file_get_fd (self->file));
  if (fd < 0)
    goto dup_failed;
  /* One fd memory for the whole file, mapped once (read-only: the file is
   * opened read-only); every stored tensor is a share of it. */
  self->fd_allocator = gst_fd_allocator_new ();
  self->file_mem = gst_fd_allocator_alloc (self->fd_allocator, fd,
      npu_model_file_get_size (self->file), GST_FD_MEMORY_FLAG_KEEP_MAPPED);
  GST_MINI_OBJECT_FLAG_SET (self->file_mem, GST_MEMORY_FLAG_READONLY);

  self->npu_allocator = gst_npu_allocator_get_default ();
  self->queue = npu_queue_new (npu_device_open ("cpu", n_threads, NULL),
      GST_OBJECT_NAME (self));
  /* npu_queue_new took its own reference. */
  npu_device_unref (npu_queue_get_device (self->queue));
  self->patterns = parse_patterns (convert);
  self->next = 0;
  self->sent_model_event = FALSE;

  GST_OBJECT_LOCK (self);
  self->n_tensors = npu_model_file_n_tensors (self->file);
  self->bytes_mapped = self->bytes_converted = self->bytes_copied = 0;
  self->conversion_error = 0.0;
  GST_OBJECT_UNLOCK (self);

  GST_INFO_OBJECT (self, "%s: %s, %u tensors, architecture %s", location,
      npu_model_file_get_format_name (self->file), self->n_tensors,
      GST_STR_NULL (npu_model_file_get_architecture (self->file)));
  g_free (location);
  g_free (convert);
  return TRUE;

  /* ERRORS */
no_location:
  {
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("No model file given."), ("set the \"location\" property"));
    g_free (location);
    g_free (convert);
    return FALSE;
  }
open_failed:
  {
    gst_npu_element_post_model_open_error (GST_ELEMENT (self), location,
        "GGUF or safetensors", error);
    g_error_free (error);
    g_free (location);
    g_free (convert);
    return FALSE;
  }
dup_failed:
  {
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ,
        ("Could not open model file \"%s\".", location),
        ("dup: %s", g_strerror (errno)));
    npu_model_file_free (self->file);
    self->file = NULL;
    g_free (location);
    g_free (convert);
    return FALSE;
  }
}

static gboolean
gst_mxfp4_weights_stop (GstBaseSrc * src)
{
  GstMxfp4Weights *self = GST_MXFP4_WEIGHTS (src);

  /* Buffers already pushed may still be converting: let them finish (a
   * flush would cancel them and fail their readers' maps), and they read
   * the file, which must outlive them. */
  if (self->last_conversion) {
    GError *error = NULL;

    if (!npu_fence_wait (self->last_conversion, -1, &error)) {
      GST_WARNING_OBJECT (self, "conversion failed: %s", error->message);
      g_error_free (error);
    }
    npu_fence_unref (self->last_conversion);
    self->last_conversion = NULL;
  }
  if (self->queue)
    npu_queue_free (self->queue);
  self->queue = NULL;
  gst_clear_object (&self->npu_allocator);
  if (self->file_mem)
    gst_memory_unref (self->file_mem);
  self->file_mem = NULL;
  gst_clear_object (&self->fd_allocator);
  npu_model_file_free (self->file);
  self->file = NULL;
  free_patterns (self->patterns);
  self->patterns = NULL;
  return TRUE;
}

static gboolean
gst_mxfp4_weights_negotiate (GstBaseSrc * src)
{
  GstMxfp4Weights *self = GST_MXFP4_WEIGHTS (src);
  const gchar *arch = npu_model_file_get_architecture (self->file);
  GstCaps *caps;
  gboolean ret;

  caps = gst_caps_new_simple ("other/npu-weights",
      "container", G_TYPE_STRING, npu_model_file_get_format_name (self->file),
      "n-tensors", G_TYPE_INT, (gint) npu_model_file_n_tensors (self->file),
      NULL);
  if (arch)
    gst_caps_set_simple (caps, "architecture", G_TYPE_STRING, arch, NULL);
  ret = gst_base_src_set_caps (src, caps);
  gst_caps_unref (caps);
  return ret;
}

static gboolean
gst_mxfp4_weights_is_seekable (GstBaseSrc * src)
{
  return FALSE;
}

/* A conversion task: quantises or repacks one tensor into NPU memory. */
typedef struct
{
  GstMxfp4Weights *self;        /* not referenced: stop () waits for us */
  const NpuModelTensor *tensor;
  GstMemory *mem;               /* referenced */
  NpuBlockMxfp4 *dst;
  guint64 n_rows;               /* rows (convert) or blocks (repack) */
  gsize grain;
  /* the conversion's squared error and squared values, summed by the
   * slices under @lock */
  GMutex lock;
  gdouble err2, ref2;
} ConvertJob;

static void
convert_slice (gsize start, gsize end, guint worker, gpointer user_data)
{
  ConvertJob *job = user_data;
  const NpuModelTensor *t = job->tensor;

  if (t->needs_repack)
    npu_model_tensor_repack_mxfp4 (t, start, end, job->dst + start);
  else {
    NpuBlockMxfp4 *dst = job->dst + start * (t->ne[0] / NPU_MXFP4_BLOCK_SIZE);
    gdouble err2 = 0.0, ref2 = 0.0;

    npu_model_tensor_convert_rows (t, start, end, dst);
    npu_model_tensor_conversion_error (t, start, end, dst, &err2, &ref2);
    g_mutex_lock (&job->lock);
    job->err2 += err2;
    job->ref2 += ref2;
    g_mutex_unlock (&job->lock);
  }
}

static gboolean
convert_task (NpuTask * task, gpointer user_data, GError ** error)
{
  ConvertJob *job = user_data;

  npu_task_parallel_for (task, job->n_rows, job->grain, convert_slice, job);
  if (!job->tensor->needs_repack) {
    gdouble rel = job->ref2 > 0.0 ? sqrt (job->err2 / job->ref2) : 0.0;

    GST_INFO_OBJECT (job->self, "converted %s (%s, %" G_GUINT64_FORMAT
        " values) to MXFP4: relative RMS error %.4g", job->tensor->name,
        job->tensor->type_name, npu_model_tensor_n_elements (job->tensor), rel);
    GST_OBJECT_LOCK (job->self);
    job->self->conversion_error = MAX (job->self->conversion_error, rel);
    GST_OBJECT_UNLOCK (job->self);
  }
  gst_npu_memory_end_cpu_write (job->mem);
  npu_model_tensor_release_source (job->tensor);
  return TRUE;
}

static void
convert_job_free (gpointer data)
{
  ConvertJob *job = data;

  gst_memory_unref (job->mem);
  g_mutex_clear (&job->lock);
  g_free (job);
}

static GstBuffer *
make_converted (GstMxfp4Weights * self, const NpuModelTensor * t)
{
  gsize size = npu_model_tensor_mxfp4_bytes (t);
  ConvertJob *job;
  GstMemory *mem;
  GstBuffer *buf;
  NpuFence *fence;

  mem = gst_allocator_alloc (self->npu_allocator, size, NULL);
  if (!mem)
    return NULL;
  job = g_new0 (ConvertJob, 1);
  g_mutex_init (&job->lock);
  job->self = self;
  job->tensor = t;
  job->mem = gst_memory_ref (mem);
  job->dst = (NpuBlockMxfp4 *) gst_npu_memory_begin_cpu_write (mem);
  if (!job->dst) {
    convert_job_free (job);
    gst_memory_unref (mem);
    return NULL;
  }
  if (t->needs_repack) {
    job->n_rows = npu_model_tensor_n_elements (t) / NPU_MXFP4_BLOCK_SIZE;
    job->grain = CONVERT_GRAIN_ELEMENTS / NPU_MXFP4_BLOCK_SIZE;
  } else {
    job->n_rows = npu_model_tensor_n_elements (t) / t->ne[0];
    job->grain = MAX (CONVERT_GRAIN_ELEMENTS / t->ne[0], 1);
  }

  buf = gst_buffer_new ();
  gst_buffer_append_memory (buf, mem);
  fence = npu_queue_submit (self->queue, convert_task, job, convert_job_free,
      NULL, 0);
  gst_buffer_add_npu_fence_meta (buf, fence);
  if (self->last_conversion)
    npu_fence_unref (self->last_conversion);
  self->last_conversion = fence;

  GST_OBJECT_LOCK (self);
  if (t->needs_repack)
    self->bytes_copied += size;
  else
    self->bytes_converted += size;
  GST_OBJECT_UNLOCK (self);
  return buf;
}

static GstBuffer *
make_view (GstMxfp4Weights * self, const NpuModelTensor * t)
{
  GstBuffer *buf = gst_buffer_new ();

  if (t->n_bytes > 0)
    gst_buffer_append_memory (buf, gst_memory_share (self->file_mem,
            t->offset, t->n_bytes));
  GST_OBJECT_LOCK (self);
  self->bytes_mapped += t->n_bytes;
  GST_OBJECT_UNLOCK (self);
  return buf;
}

static GstFlowReturn
gst_mxfp4_weights_create (GstBaseSrc * src, guint64 offset, guint size,
    GstBuffer ** out)
{
  GstMxfp4Weights *self = GST_MXFP4_WEIGHTS (src);
  guint n = npu_model_file_n_tensors (self->file);
  const NpuModelTensor *t;
  gboolean convert;
  GstBuffer *buf;

  if (!self->sent_model_event) {
    const gchar *arch = npu_model_file_get_architecture (self->file);
    gchar *location;

    GST_OBJECT_LOCK (self);
    location = g_strdup (self->location);
    GST_OBJECT_UNLOCK (self);
    /* Consumers that need the file's metadata (tokenizer, settings) open
     * it themselves; the mapping is shared page cache, not a copy. */
    gst_pad_push_event (GST_BASE_SRC_PAD (src),
        gst_event_new_custom (GST_EVENT_CUSTOM_DOWNSTREAM_STICKY,
            gst_structure_new ("npu-model", "location", G_TYPE_STRING,
                location, "container", G_TYPE_STRING,
                npu_model_file_get_format_name (self->file), "architecture",
                G_TYPE_STRING, arch, "n-tensors", G_TYPE_UINT, n, NULL)));
    g_free (location);
    self->sent_model_event = TRUE;
  }

  if (self->next >= n)
    return GST_FLOW_EOS;
  t = npu_model_file_get_tensor (self->file, self->next);

  convert = t->needs_repack || wants_conversion (self, t);
  buf = convert ? make_converted (self, t) : make_view (self, t);
  if (!buf)
    goto no_memory;

  gst_buffer_add_npu_tensor_meta (buf, t->name, t->n_dims, t->ne,
      convert ? NPU_TENSOR_TYPE_MXFP4 : t->type,
      convert ? "mxfp4" : t->type_name, t->type_name, self->next, n);
  GST_BUFFER_OFFSET (buf) = self->next;
  GST_BUFFER_OFFSET_END (buf) = self->next + 1;
  GST_LOG_OBJECT (self, "tensor %u/%u '%s' %s%s (%" G_GSIZE_FORMAT " bytes)",
      self->next + 1, n, t->name, t->type_name,
      convert ? " -> mxfp4" : "", gst_buffer_get_size (buf));
  self->next++;
  *out = buf;
  return GST_FLOW_OK;

  /* ERRORS */
no_memory:
  {
    GST_ELEMENT_ERROR (self, RESOURCE, NO_SPACE_LEFT,
        ("Cannot allocate %" G_GSIZE_FORMAT " bytes of NPU memory for "
            "tensor '%s'.", npu_model_tensor_mxfp4_bytes (t), t->name), (NULL));
    return GST_FLOW_ERROR;
  }
}
