/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: mxfp4weights element tests
 *
 * A model file is written with the project's GGUF writer; what the element
 * pushes is compared with the file's bytes (stored tensors) and with the
 * MXFP4 codec's output (converted ones; the codec itself is checked against
 * an independent reference in tests/unit/test-mxfp4.c).
 */
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <glib/gstdio.h>

#include "npucheck.h"
#include <npu/npu.h>
#include <core/formats/npuggufwriter.h>
#include <core/formats/npugguf.h>
#include <core/formats/npumxfp4.h>
#include <core/formats/npuquants.h>

typedef struct
{
  const gchar *name;
  guint n_dims;
  guint64 ne[4];
  guint32 type;
  gboolean convertible;
} TensorSpec;

/* File order; every kind of tensor the element treats differently. */
static const TensorSpec specs[] = {
  {"blk.0.attn_q.weight", 2, {64, 3}, 0, TRUE}, /* F32 matrix */
  {"blk.0.attn_norm.weight", 1, {64}, 0, FALSE},        /* 1-D: as stored */
  {"blk.0.ffn_up.weight", 2, {32, 5}, 1, TRUE}, /* F16 */
  {"blk.0.ffn_down.weight", 2, {64, 2}, 39, FALSE},     /* MXFP4 already */
  {"blk.0.ffn_gate.weight", 3, {32, 2, 2}, 30, TRUE},   /* BF16, 3-D */
  {"blk.0.attn_k.weight", 2, {64, 3}, 8, TRUE}, /* Q8_0 */
  /* npullm reads the embedding table in its own type (F32 here) and a Q8_0
   * output in Q8_0 (llama.cpp's MXFP4 files have it so): they stay,
   * whatever the patterns say */
  {"token_embd.weight", 2, {96, 4}, 0, FALSE},
  {"output.weight", 2, {96, 4}, 8, FALSE},
  {"odd.weight", 2, {48, 2}, 0, FALSE}, /* rows not a multiple of 32 */
  /* the encoders add position tables and patch embeddings as stored and
   * refuse them in MXFP4: they stay too; their projectors' matrices are
   * converted */
  {"v.position_embd.weight", 2, {64, 4}, 0, FALSE},
  {"v.patch_embd.weight", 4, {32, 1, 3, 2}, 1, FALSE},
  {"a.position_embd.weight", 2, {32, 3}, 1, FALSE},
  {"mm.a.fc.weight", 2, {64, 2}, 0, TRUE},
  {"model.embed_tokens.weight", 2, {32, 4}, 0, FALSE},  /* Hugging Face */
};

static gchar *tmpdir;
static gchar *model_path;
static GBytes *tensor_bytes[G_N_ELEMENTS (specs)];

static guint64
n_elements (const TensorSpec * s)
{
  guint64 n = 1;
  guint i;

  for (i = 0; i < s->n_dims; i++)
    n *= s->ne[i];
  return n;
}

static guint16
f32_to_f16 (float f)
{
  /* Values here are small normals: truncating the mantissa is exact enough
   * for a test input; the element must treat the bits exactly as given. */
  guint32 x;
  gint e;

  memcpy (&x, &f, 4);
  e = ((x >> 23) & 0xff) - 127 + 15;
  if (e <= 0)
    return (x >> 16) & 0x8000;
  return ((x >> 16) & 0x8000) | (e << 10) | ((x >> 13) & 0x3ff);
}

static GBytes *
make_data (const TensorSpec * s, GRand * rand)
{
  guint64 n = n_elements (s), i;
  GByteArray *a = g_byte_array_new ();

  switch (s->type) {
    case 0:
      for (i = 0; i < n; i++) {
        float v = g_rand_double_range (rand, -2.0, 2.0);
        g_byte_array_append (a, (guint8 *) & v, 4);
      }
      break;
    case 1:
      for (i = 0; i < n; i++) {
        guint16 h = f32_to_f16 (g_rand_double_range (rand, -1.0, 1.0));
        g_byte_array_append (a, (guint8 *) & h, 2);
      }
      break;
    case 30:
      for (i = 0; i < n; i++) {
        float v = g_rand_double_range (rand, -3.0, 3.0);
        guint32 x;
        guint16 b;
        memcpy (&x, &v, 4);
        b = x >> 16;
        g_byte_array_append (a, (guint8 *) & b, 2);
      }
      break;
    case 8:
      for (i = 0; i < n / 32; i++) {
        guint16 d = f32_to_f16 (g_rand_double_range (rand, 0.001, 0.1));
        guint j;
        g_byte_array_append (a, (guint8 *) & d, 2);
        for (j = 0; j < 32; j++) {
          gint8 q = g_rand_int_range (rand, -127, 128);
          g_byte_array_append (a, (guint8 *) & q, 1);
        }
      }
      break;
    case 39:
      for (i = 0; i < n / 32 * 17; i++) {
        guint8 b = g_rand_int_range (rand, 0, 256);
        /* Keep scales (every 17th byte) finite and sane. */
        if (i % 17 == 0)
          b = 120 + b % 10;
        g_byte_array_append (a, &b, 1);
      }
      break;
    default:
      g_assert_not_reached ();
  }
  return g_byte_array_free_to_bytes (a);
}

static void
write_model (void)
{
  NpuGgufWriter *w = npu_gguf_writer_new ();
  GRand *rand = g_rand_new_with_seed (42);
  GError *error = NULL;
  guint i;

  fail_unless (npu_gguf_writer_add_string (w, "general.architecture",
          "llama", -1, &error));
  for (i = 0; i < G_N_ELEMENTS (specs); i++) {
    tensor_bytes[i] = make_data (&specs[i], rand);
    fail_unless (npu_gguf_writer_add_tensor (w, specs[i].name,
            specs[i].n_dims, specs[i].ne, specs[i].type,
            g_bytes_get_data (tensor_bytes[i], NULL), &error),
        "%s", error ? error->message : "");
  }
  fail_unless (npu_gguf_writer_write_file (w, model_path, &error), "%s",
      error ? error->message : "");
  npu_gguf_writer_free (w);
  g_rand_free (rand);
}

/* What the element must push for tensor @i: the stored bytes, or MXFP4. */
static GBytes *
expected_bytes (guint i, gboolean converted)
{
  const TensorSpec *s = &specs[i];
  gsize n = n_elements (s);
  NpuBlockMxfp4 *blocks;
  gconstpointer src = g_bytes_get_data (tensor_bytes[i], NULL);

  if (!converted)
    return g_bytes_ref (tensor_bytes[i]);
  blocks = g_new0 (NpuBlockMxfp4, n / 32);
  switch (s->type) {
    case 0:
      npu_mxfp4_quantize_f32 (src, blocks, n);
      break;
    case 1:
      npu_mxfp4_quantize_f16 (src, blocks, n);
      break;
    case 30:
      npu_mxfp4_quantize_bf16 (src, blocks, n);
      break;
    case 8:
      npu_mxfp4_quantize_q8_0 (src, blocks, n);
      break;
  }
  return g_bytes_new_take (blocks, n / 32 * sizeof (NpuBlockMxfp4));
}

static void
setup (void)
{
  npu_check_load_plugins ();
  tmpdir = g_dir_make_tmp ("mxfp4weights-XXXXXX", NULL);
  model_path = g_build_filename (tmpdir, "model.gguf", NULL);
  write_model ();
}

static void
teardown (void)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (specs); i++)
    g_bytes_unref (tensor_bytes[i]);
  g_unlink (model_path);
  g_rmdir (tmpdir);
  g_free (model_path);
  g_free (tmpdir);
}

/* Runs @desc to EOS or error; returns the buffers of appsink "sink" (if
 * any) and the error message (if any). */
static GPtrArray *
run_pipeline (const gchar * desc, gchar ** error_message, GstElement ** src)
{
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  GstElement *sink;
  GPtrArray *bufs = g_ptr_array_new_with_free_func ((GDestroyNotify)
      gst_buffer_unref);
  GstBus *bus;
  GstMessage *msg;

  fail_unless (pipeline != NULL, "%s", error ? error->message : "");
  sink = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  if (src)
    *src = gst_bin_get_by_name (GST_BIN (pipeline), "w");
  gst_element_set_state (pipeline, GST_STATE_PLAYING);

  if (sink) {
    for (;;) {
      GstSample *sample = NULL;
      g_signal_emit_by_name (sink, "pull-sample", &sample);
      if (!sample)
        break;
      g_ptr_array_add (bufs, gst_buffer_ref (gst_sample_get_buffer (sample)));
      gst_sample_unref (sample);
    }
  }
  bus = gst_element_get_bus (pipeline);
  msg = gst_bus_timed_pop_filtered (bus, 30 * GST_SECOND,
      GST_MESSAGE_EOS | GST_MESSAGE_ERROR);
  fail_unless (msg != NULL, "pipeline neither ended nor failed");
  if (error_message)
    *error_message = NULL;
  if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    GError *err = NULL;
    gst_message_parse_error (msg, &err, NULL);
    fail_unless (error_message != NULL, "unexpected error: %s", err->message);
    *error_message = g_strdup (err->message);
    g_error_free (err);
  }
  gst_message_unref (msg);
  gst_object_unref (bus);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  if (sink)
    gst_object_unref (sink);
  gst_object_unref (pipeline);
  return bufs;
}

static void
check_buffer (GstBuffer * buf, guint i, gboolean converted, const gchar * path)
{
  GstNpuTensorMeta *meta = gst_buffer_get_npu_tensor_meta (buf);
  GBytes *want = expected_bytes (i, converted);
  GstMapInfo map;
  guint d;

  fail_unless (meta != NULL);
  fail_unless_equals_string (meta->name, specs[i].name);
  fail_unless_equals_int (meta->index, i);
  fail_unless_equals_int (meta->n_tensors, G_N_ELEMENTS (specs));
  fail_unless_equals_int (meta->n_dims, specs[i].n_dims);
  for (d = 0; d < specs[i].n_dims; d++)
    fail_unless_equals_uint64 (meta->ne[d], specs[i].ne[d]);
  fail_unless_equals_int (meta->type, converted ? 39 : (gint) specs[i].type);
  if (converted || specs[i].type == 39)
    fail_unless_equals_string (meta->type_name, "mxfp4");

  /* Mapping waits for the conversion's fence. */
  fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
  fail_unless_equals_uint64 (map.size, g_bytes_get_size (want));
  fail_unless (memcmp (map.data, g_bytes_get_data (want, NULL),
          map.size) == 0, "tensor %s: bytes differ", specs[i].name);
  gst_buffer_unmap (buf, &map);

  if (converted) {
    fail_unless (gst_is_npu_memory (gst_buffer_peek_memory (buf, 0)));
  } else {
    /* Zero copy: fd memory over the model file itself. */
    GstMemory *mem = gst_buffer_peek_memory (buf, 0);
    struct stat a, b;

    fail_unless (gst_is_fd_memory (mem));
    fail_if (gst_is_npu_memory (mem));
    fail_unless (fstat (gst_fd_memory_get_fd (mem), &a) == 0);
    fail_unless (g_stat (path, &b) == 0);
    fail_unless (a.st_ino == b.st_ino && a.st_dev == b.st_dev);
  }
  g_bytes_unref (want);
}

/* The largest ||pushed - stored|| / ||stored|| over the converted tensors
 * of @bufs, from the file's bytes decoded here */
static gdouble
worst_conversion_error (GPtrArray * bufs)
{
  gdouble worst = 0.0;
  guint i;

  for (i = 0; i < bufs->len; i++) {
    GstBuffer *buf = g_ptr_array_index (bufs, i);
    GstNpuTensorMeta *meta = gst_buffer_get_npu_tensor_meta (buf);
    gsize n = n_elements (&specs[i]), j;
    float *stored = g_new (float, n), *mx = g_new (float, n);
    gdouble e2 = 0.0, r2 = 0.0;
    GstMapInfo map;

    if (meta->type != 39 || specs[i].type == 39) {
      g_free (stored);
      g_free (mx);
      continue;
    }
    fail_unless (npu_quants_dequantize_row (specs[i].type,
            g_bytes_get_data (tensor_bytes[i], NULL), stored, n));
    fail_unless (gst_buffer_map (buf, &map, GST_MAP_READ));
    npu_mxfp4_dequantize ((const NpuBlockMxfp4 *) map.data, mx, n);
    gst_buffer_unmap (buf, &map);
    for (j = 0; j < n; j++) {
      e2 += ((gdouble) mx[j] - stored[j]) * ((gdouble) mx[j] - stored[j]);
      r2 += (gdouble) stored[j] * stored[j];
    }
    worst = MAX (worst, sqrt (e2 / r2));
    g_free (stored);
    g_free (mx);
  }
  return worst;
}

GST_START_TEST (test_all_tensors_in_order)
{
  gchar *desc = g_strdup_printf ("mxfp4weights name=w location=%s ! "
      "appsink name=sink sync=false", model_path);
  GstElement *w;
  GPtrArray *bufs = run_pipeline (desc, NULL, &w);
  guint64 mapped, converted, copied;
  gdouble error, want;
  guint i;

  fail_unless_equals_int (bufs->len, G_N_ELEMENTS (specs));
  for (i = 0; i < bufs->len; i++)
    check_buffer (g_ptr_array_index (bufs, i), i, specs[i].convertible,
        model_path);
  g_object_get (w, "bytes-mapped", &mapped, "bytes-converted", &converted,
      "bytes-copied", &copied, "conversion-error", &error, NULL);
  fail_unless_equals_uint64 (copied, 0);
  fail_unless (mapped > 0 && converted > 0);
  /* the element's measure of what it changed, against ours */
  want = worst_conversion_error (bufs);
  fail_unless (want > 0.01, "%g", want);
  fail_unless (fabs (error - want) <= 1e-9 * want, "conversion-error %.12g, "
      "measured here %.12g", error, want);
  gst_object_unref (w);
  g_ptr_array_unref (bufs);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_convert_patterns)
{
  gchar *desc = g_strdup_printf ("mxfp4weights location=%s "
      "convert=\"blk.*.ffn_*, token_embd.*, output.*, v.*, a.*\" ! "
      "appsink name=sink sync=false", model_path);
  GPtrArray *bufs = run_pipeline (desc, NULL, NULL);
  GstElement *w;
  gdouble error;
  guint i;

  fail_unless_equals_int (bufs->len, G_N_ELEMENTS (specs));
  for (i = 0; i < bufs->len; i++) {
    /* token_embd, output and the position and patch tables match, but
     * stay as stored */
    gboolean conv = specs[i].convertible &&
        g_str_has_prefix (specs[i].name, "blk.0.ffn_");
    check_buffer (g_ptr_array_index (bufs, i), i, conv, model_path);
  }
  g_ptr_array_unref (bufs);
  g_free (desc);

  desc = g_strdup_printf ("mxfp4weights name=w location=%s convert=\"\" ! "
      "appsink name=sink sync=false", model_path);
  bufs = run_pipeline (desc, NULL, &w);
  for (i = 0; i < bufs->len; i++)
    check_buffer (g_ptr_array_index (bufs, i), i, FALSE, model_path);
  g_object_get (w, "conversion-error", &error, NULL);
  fail_unless (error == 0.0, "%g", error);
  gst_object_unref (w);
  g_ptr_array_unref (bufs);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_filesink_bytes)
{
  gchar *out = g_build_filename (tmpdir, "out.bin", NULL);
  gchar *desc = g_strdup_printf ("mxfp4weights location=%s ! filesink "
      "location=%s", model_path, out);
  GPtrArray *bufs = run_pipeline (desc, NULL, NULL);
  GByteArray *want = g_byte_array_new ();
  gchar *contents;
  gsize len;
  guint i;

  for (i = 0; i < G_N_ELEMENTS (specs); i++) {
    GBytes *b = expected_bytes (i, specs[i].convertible);
    g_byte_array_append (want, g_bytes_get_data (b, NULL),
        g_bytes_get_size (b));
    g_bytes_unref (b);
  }
  fail_unless (g_file_get_contents (out, &contents, &len, NULL));
  fail_unless_equals_uint64 (len, want->len);
  fail_unless (memcmp (contents, want->data, len) == 0);
  g_free (contents);
  g_byte_array_unref (want);
  g_ptr_array_unref (bufs);
  g_unlink (out);
  g_free (out);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_tee_shares_memory)
{
  gchar *desc = g_strdup_printf ("mxfp4weights location=%s ! tee name=t "
      "t. ! queue ! appsink name=sink sync=false "
      "t. ! queue ! appsink name=sink2 sync=false", model_path);
  GError *error = NULL;
  GstElement *pipeline = gst_parse_launch (desc, &error);
  GstElement *s1 = gst_bin_get_by_name (GST_BIN (pipeline), "sink");
  GstElement *s2 = gst_bin_get_by_name (GST_BIN (pipeline), "sink2");
  guint i;

  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  for (i = 0; i < G_N_ELEMENTS (specs); i++) {
    GstSample *a = NULL, *b = NULL;
    g_signal_emit_by_name (s1, "pull-sample", &a);
    g_signal_emit_by_name (s2, "pull-sample", &b);
    fail_unless (a && b);
    fail_unless (gst_buffer_peek_memory (gst_sample_get_buffer (a), 0) ==
        gst_buffer_peek_memory (gst_sample_get_buffer (b), 0));
    gst_sample_unref (a);
    gst_sample_unref (b);
  }
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (s1);
  gst_object_unref (s2);
  gst_object_unref (pipeline);
  g_free (desc);
}

GST_END_TEST;

GST_START_TEST (test_errors)
{
  gchar *missing = g_build_filename (tmpdir, "nope.gguf", NULL);
  gchar *bad = g_build_filename (tmpdir, "bad.gguf", NULL);
  gchar *contents, *desc, *msg;
  gsize len;
  GPtrArray *bufs;

  desc = g_strdup_printf ("mxfp4weights location=%s ! fakesink", missing);
  bufs = run_pipeline (desc, &msg, NULL);
  fail_unless (msg && strstr (msg, "not found") && strstr (msg, "nope.gguf"),
      "%s", msg);
  g_free (msg);
  g_free (desc);
  g_ptr_array_unref (bufs);

  /* Truncated in the middle of the tensor data. */
  fail_unless (g_file_get_contents (model_path, &contents, &len, NULL));
  fail_unless (g_file_set_contents (bad, contents, len - 100, NULL));
  g_free (contents);
  desc = g_strdup_printf ("mxfp4weights location=%s ! fakesink", bad);
  bufs = run_pipeline (desc, &msg, NULL);
  fail_unless (msg && strstr (msg, "is not a usable GGUF or safetensors file")
      && strstr (msg, "bad.gguf"), "%s", msg);
  g_free (msg);
  g_free (desc);
  g_ptr_array_unref (bufs);

  /* Not a model at all (a WAV header): said so, not read as safetensors
   * with an absurd header length. */
  fail_unless (g_file_set_contents (bad, "RIFF$\x10\0\0WAVEfmt \x10\0\0\0",
          20, NULL));
  desc = g_strdup_printf ("mxfp4weights location=%s ! fakesink", bad);
  bufs = run_pipeline (desc, &msg, NULL);
  fail_unless (msg && strstr (msg, "bad.gguf: neither GGUF") &&
      strstr (msg, "nor safetensors"), "%s", msg);
  g_free (msg);
  g_free (desc);
  g_ptr_array_unref (bufs);

  bufs = run_pipeline ("mxfp4weights ! fakesink", &msg, NULL);
  fail_unless (msg && strstr (msg, "No model file"), "%s", msg);
  g_free (msg);
  g_ptr_array_unref (bufs);

  g_unlink (bad);
  g_free (bad);
  g_free (missing);
}

GST_END_TEST;

static Suite *
mxfp4weights_suite (void)
{
  Suite *s = suite_create ("mxfp4weights");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_add_checked_fixture (tc, setup, teardown);
  tcase_add_test (tc, test_all_tensors_in_order);
  tcase_add_test (tc, test_convert_patterns);
  tcase_add_test (tc, test_filesink_bytes);
  tcase_add_test (tc, test_tee_shares_memory);
  tcase_add_test (tc, test_errors);
  return s;
}

GST_CHECK_MAIN (mxfp4weights);
