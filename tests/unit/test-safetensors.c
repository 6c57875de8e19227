/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: safetensors reader tests */
#include <core/formats/npusafetensors.h>

#include <glib/gstdio.h>
#include <string.h>

/* u64 header length + @json + @data_len bytes of a pattern, as an exact-size
 * heap block (so an overread trips ASan or valgrind) */
static guint8 *
make_file (const gchar * json, gsize data_len, gsize * size)
{
  gsize n = strlen (json), i;
  guint64 le = GUINT64_TO_LE (n);
  guint8 *b;

  *size = 8 + n + data_len;
  b = g_malloc (*size);
  memcpy (b, &le, 8);
  memcpy (b + 8, json, n);
  for (i = 0; i < data_len; i++)
    b[8 + n + i] = (guint8) (i * 7 + 3);
  return b;
}

static const gchar valid_json[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"tab\\there\"},"
    " \"w.blocks\" : {\"dtype\":\"U8\",\"shape\":[2,3,16],"
    "\"data_offsets\":[0,96]},\n"
    "\"w.scales\":{\"shape\":[2,3],\"dtype\":\"U8\",\"data_offsets\":[96,102]},"
    "\"f16\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[102,108],"
    "\"extra\":{\"x\":[1,-2.5e3,true,false,null,\"s\"]}},"
    "\"scalar\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[108,116]},"
    "\"empty\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[116,116]},"
    "\"caf\\u00e9 \\ud83d\\ude00\\\"\":{\"dtype\":\"I32\",\"shape\":[1,1],"
    "\"data_offsets\":[116,120]},"
    "\"e8m0\":{\"dtype\":\"F8_E8M0\",\"shape\":[4],\"data_offsets\":[120,124]}"
    "}      ";
#define VALID_DATA 124

static void
test_valid (void)
{
  const NpuSafetensorsTensor *t, *blocks, *scales;
  GError *err = NULL;
  NpuSafetensors *st;
  gsize size;
  guint8 *b = make_file (valid_json, VALID_DATA, &size);

  st = npu_safetensors_open_bytes (b, size, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_safetensors_get_fd (st), ==, -1);
  g_assert_cmpuint (npu_safetensors_get_data_offset (st), ==,
      8 + strlen (valid_json));
  g_assert_cmpuint (npu_safetensors_n_tensors (st), ==, 7);
  g_assert_cmpuint (npu_safetensors_n_metadata (st), ==, 2);
  g_assert_cmpstr (npu_safetensors_get_metadata_key (st, 1), ==, "note");
  g_assert_cmpstr (npu_safetensors_get_metadata (st, "format"), ==, "pt");
  g_assert_cmpstr (npu_safetensors_get_metadata (st, "note"), ==, "tab\there");
  g_assert_null (npu_safetensors_get_metadata (st, "nope"));

  t = npu_safetensors_get_tensor (st, 0);
  g_assert_cmpstr (t->name, ==, "w.blocks");
  g_assert_cmpint (t->dtype, ==, NPU_SAFETENSORS_DTYPE_U8);
  g_assert_cmpuint (t->n_dims, ==, 3);
  g_assert_cmpuint (t->shape[0], ==, 2);
  g_assert_cmpuint (t->shape[2], ==, 16);
  g_assert_cmpuint (t->n_elements, ==, 96);
  g_assert_cmpuint (t->n_bytes, ==, 96);
  g_assert_cmpuint (t->offset, ==, npu_safetensors_get_data_offset (st));
  g_assert_true (t->data == b + t->offset);

  t = npu_safetensors_find_tensor (st, "f16");
  g_assert_nonnull (t);
  g_assert_cmpint (t->dtype, ==, NPU_SAFETENSORS_DTYPE_F16);
  g_assert_cmpuint (t->n_bytes, ==, 6);
  g_assert_cmpuint (t->data[0], ==, (guint8) (102 * 7 + 3));

  t = npu_safetensors_find_tensor (st, "scalar");
  g_assert_cmpuint (t->n_dims, ==, 0);
  g_assert_cmpuint (t->n_elements, ==, 1);
  g_assert_cmpuint (t->n_bytes, ==, 8);
  t = npu_safetensors_find_tensor (st, "empty");
  g_assert_cmpuint (t->n_elements, ==, 0);
  g_assert_cmpuint (t->n_bytes, ==, 0);
  t = npu_safetensors_find_tensor (st, "caf\xc3\xa9 \xf0\x9f\x98\x80\"");
  g_assert_nonnull (t);
  g_assert_cmpint (t->dtype, ==, NPU_SAFETENSORS_DTYPE_I32);
  t = npu_safetensors_find_tensor (st, "e8m0");
  g_assert_cmpint (t->dtype, ==, NPU_SAFETENSORS_DTYPE_F8_E8M0);
  g_assert_null (npu_safetensors_find_tensor (st, "w"));

  g_assert_true (npu_safetensors_find_mxfp4 (st, "w", &blocks, &scales, &err));
  g_assert_no_error (err);
  g_assert_cmpstr (blocks->name, ==, "w.blocks");
  g_assert_cmpstr (scales->name, ==, "w.scales");
  g_assert_false (npu_safetensors_find_mxfp4 (st, "v", &blocks, &scales, &err));
  g_assert_error (err, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_NOT_FOUND);
  g_assert_nonnull (strstr (err->message, "'v.blocks'"));
  g_clear_error (&err);

  g_assert_cmpstr (npu_safetensors_dtype_name (NPU_SAFETENSORS_DTYPE_BF16),
      ==, "BF16");
  g_assert_cmpuint (npu_safetensors_dtype_size (NPU_SAFETENSORS_DTYPE_U64),
      ==, 8);
  g_assert_null (npu_safetensors_dtype_name (99));

  npu_safetensors_free (st);
  g_free (b);
}

static void
test_mxfp4_pairing (void)
{
  static const struct
  {
    const gchar *json;
    const gchar *needle;
  } cases[] = {
    {"{\"a.blocks\":{\"dtype\":\"U8\",\"shape\":[2,16],\"data_offsets\":[0,32]}," "\"a.scales\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[32,35]}}",
        "dimension 0 is 3 in scales but 2 in blocks"},
    {"{\"a.blocks\":{\"dtype\":\"U8\",\"shape\":[2,16],\"data_offsets\":[0,32]}," "\"a.scales\":{\"dtype\":\"U8\",\"shape\":[2,1],\"data_offsets\":[32,34]}}",
        "scales have 2 dimensions, blocks 2; expected 1"},
    {"{\"a.blocks\":{\"dtype\":\"U8\",\"shape\":[4,8],\"data_offsets\":[0,32]},"
          "\"a.scales\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[32,36]}}",
        "blocks must have shape [..., n_blocks, 16]"},
    {"{\"a.blocks\":{\"dtype\":\"U8\",\"shape\":[2,16],\"data_offsets\":[0,32]}," "\"a.scales\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[32,34]}}",
        "blocks are U8 and scales I8"},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    GError *err = NULL;
    NpuSafetensors *st;
    gsize size;
    guint8 *b = make_file (cases[i].json, 36, &size);
    const NpuSafetensorsTensor *bl = NULL, *sc = NULL;

    st = npu_safetensors_open_bytes (b, size, &err);
    g_assert_no_error (err);
    g_assert_false (npu_safetensors_find_mxfp4 (st, "a", &bl, &sc, &err));
    g_assert_error (err, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT);
    if (!strstr (err->message, cases[i].needle))
      g_error ("'%s' not in '%s'", cases[i].needle, err->message);
    g_assert_null (bl);
    g_clear_error (&err);
    npu_safetensors_free (st);
    g_free (b);
  }
}

static void
test_truncated (void)
{
  gsize size, n;
  guint8 *full = make_file (valid_json, VALID_DATA, &size);

  /* every prefix: the header length then runs past the end, or the last
   * tensor's data does */
  for (n = 0; n < size; n++) {
    guint8 *copy = n ? g_memdup2 (full, n) : NULL;
    GError *err = NULL;

    g_assert_null (npu_safetensors_open_bytes (copy, n, &err));
    g_assert_error (err, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT);
    g_assert_true (g_str_has_prefix (err->message, "(memory): "));
    g_error_free (err);
    g_free (copy);
  }

  /* every truncation of the JSON text itself, with a consistent length */
  for (n = 0; n < strlen (valid_json) - 6; n++) {
    gchar *json = g_strndup (valid_json, n);
    guint8 *b = make_file (json, VALID_DATA, &size);
    GError *err = NULL;

    g_assert_null (npu_safetensors_open_bytes (b, size, &err));
    g_assert_error (err, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT);
    g_assert_nonnull (strstr (err->message, "header JSON at byte"));
    g_error_free (err);
    g_free (b);
    g_free (json);
  }
  g_free (full);
}

static void
test_malformed (void)
{
  static const struct
  {
    const gchar *json;
    gsize data;
    gint code;
    const gchar *needle;
  } cases[] = {
    /* JSON syntax */
    {"", 0, NPU_SAFETENSORS_ERROR_FORMAT, "must start with '{'"},
    {" {}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "must start with '{'"},
    {"[]", 0, NPU_SAFETENSORS_ERROR_FORMAT, "must start with '{'"},
    {"{", 0, NPU_SAFETENSORS_ERROR_FORMAT, "expected a string"},
    {"{}x", 0, NPU_SAFETENSORS_ERROR_FORMAT, "data after the header object"},
    {"{}{}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "data after the header"},
    {"{,}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "expected a string"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "expected a string"},
    {"{\"a\" {}}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "expected a colon"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,],\"data_offsets\":[0,1]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "a shape dimension must be a "
          "non-negative integer"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "non-negative integer"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1.0],\"data_offsets\":[0,1]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "must be an integer"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1e2],\"data_offsets\":[0,1]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "must be an integer"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[01],\"data_offsets\":[0,1]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "leading zero"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551616],"
          "\"data_offsets\":[0,1]}}", 1, NPU_SAFETENSORS_ERROR_FORMAT,
        "does not fit in 64 bits"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 3,
        NPU_SAFETENSORS_ERROR_FORMAT, "two entries"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "two entries"},
    {"{\"a\":{\"dtype\":U8,\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "dtype must be a string"},
    {"{\"a\x01\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT,
        "control character 0x01"},
    {"{\"a\\x\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "bad escape"},
    {"{\"a\\u12\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "bad \\u escape"},
    {"{\"a\\u0000\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "\\u0000"},
    {"{\"a\\ud800\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT,
        "lone high surrogate"},
    {"{\"a\\udc00\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT,
        "lone low surrogate"},
    {"{\"a\\ud800\\u0041\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT,
        "without a low one"},
    {"{\"\xff\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "not valid UTF-8"},
    {"{\"\xc0\xaf\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "not valid UTF-8"},
    {"{\"a", 0, NPU_SAFETENSORS_ERROR_FORMAT, "unterminated string"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
          "\"x\":[[[[[[[[[[1]]]]]]]]]]}}", 1, NPU_SAFETENSORS_ERROR_FORMAT,
        "nested deeper than 8"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
          "\"x\":tru}}", 1, NPU_SAFETENSORS_ERROR_FORMAT,
        "unexpected character"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
          "\"x\":-}}", 1, NPU_SAFETENSORS_ERROR_FORMAT, "bad number"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],"
          "\"x\":1.}}", 1, NPU_SAFETENSORS_ERROR_FORMAT, "bad number"},
    /* structure */
    {"{\"a\":{}}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "tensor 'a': empty object"},
    {"{\"a\":[]}", 0, NPU_SAFETENSORS_ERROR_FORMAT, "expected a tensor object"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 0,
        NPU_SAFETENSORS_ERROR_FORMAT, "tensor 'a': no data_offsets"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "tensor 'a': no dtype"},
    {"{\"a\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],"
          "\"data_offsets\":[0,1]}}", 1, NPU_SAFETENSORS_ERROR_FORMAT,
        "duplicate dtype"},
    {"{\"a\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[0,1]}}", 1,
          NPU_SAFETENSORS_ERROR_UNSUPPORTED,
        "tensor 'a': unsupported dtype 'F4'"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,2,3,4,5,6,7,8,9],"
          "\"data_offsets\":[0,1]}}", 1, NPU_SAFETENSORS_ERROR_FORMAT,
        "more than 8 dimensions"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
          "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2,
        NPU_SAFETENSORS_ERROR_FORMAT, "duplicate tensor 'a'"},
    {"{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
        NPU_SAFETENSORS_ERROR_FORMAT, "empty name"},
    {"{\"__metadata__\":{\"a\":1}}", 0, NPU_SAFETENSORS_ERROR_FORMAT,
        "__metadata__ values must be strings"},
    {"{\"__metadata__\":{\"a\":\"x\",\"a\":\"y\"}}", 0,
        NPU_SAFETENSORS_ERROR_FORMAT, "duplicate __metadata__ key 'a'"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0,
        NPU_SAFETENSORS_ERROR_FORMAT, "duplicate __metadata__"},
    {"{\"__metadata__\":[]}", 0, NPU_SAFETENSORS_ERROR_FORMAT,
        "the __metadata__ object"},
    /* sizes and offsets */
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
          NPU_SAFETENSORS_ERROR_FORMAT,
        "tensor 'a': data_offsets [0, 4) span 4 bytes but 2 F32 elements need 8"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,0]}}", 4,
        NPU_SAFETENSORS_ERROR_FORMAT, "are reversed"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 3,
          NPU_SAFETENSORS_ERROR_FORMAT,
        "data_offsets [0, 4) run past the end of the file (the data section "
          "has 3 bytes)"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":"
          "[18446744073709551615,18446744073709551615]}}", 3,
        NPU_SAFETENSORS_ERROR_FORMAT, "run past the end"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
          "\"data_offsets\":[0,0]}}", 0, NPU_SAFETENSORS_ERROR_FORMAT,
        "element count overflows"},
    {"{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,1073741824],"
          "\"data_offsets\":[0,0]}}", 0, NPU_SAFETENSORS_ERROR_FORMAT,
        "byte size overflows"},
    {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
          "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[3,7]}}", 8,
          NPU_SAFETENSORS_ERROR_FORMAT,
        "tensor 'b' [offset 116, 4 bytes) overlaps tensor 'a'"},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (cases); i++) {
    GError *err = NULL;
    gsize size;
    guint8 *b = make_file (cases[i].json, cases[i].data, &size);

    g_assert_null (npu_safetensors_open_bytes (b, size, &err));
    g_assert_nonnull (err);
    if (g_test_verbose ())
      g_printerr ("  %s\n", err->message);
    if (err->domain != NPU_SAFETENSORS_ERROR || err->code != cases[i].code
        || !strstr (err->message, cases[i].needle))
      g_error ("case %u: '%s' not in '%s' (code %d)", i, cases[i].needle,
          err->message, err->code);
    g_error_free (err);
    g_free (b);
  }
}

static void
test_header_length (void)
{
  GError *err = NULL;
  guint8 b[16] = { 0, };
  guint64 n;

  g_assert_null (npu_safetensors_open_bytes (b, 7, &err));
  g_assert_nonnull (strstr (err->message, "truncated"));
  g_clear_error (&err);

  n = GUINT64_TO_LE (G_MAXUINT64);
  memcpy (b, &n, 8);
  g_assert_null (npu_safetensors_open_bytes (b, sizeof (b), &err));
  g_assert_nonnull (strstr (err->message, "header length "
          "18446744073709551615 runs past the end of the file (16 bytes)"));
  g_clear_error (&err);

  /* empty header: not JSON */
  n = 0;
  memcpy (b, &n, 8);
  g_assert_null (npu_safetensors_open_bytes (b, 8, &err));
  g_assert_nonnull (strstr (err->message, "must start with '{'"));
  g_clear_error (&err);
}

/* Deep nesting in an unknown member must not recurse without bound */
static void
test_depth_bomb (void)
{
  GString *s = g_string_new ("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
      "\"data_offsets\":[0,1],\"x\":");
  GError *err = NULL;
  gsize size;
  guint8 *b;
  guint i;

  for (i = 0; i < 100000; i++)
    g_string_append_c (s, '[');
  b = make_file (s->str, 1, &size);
  g_assert_null (npu_safetensors_open_bytes (b, size, &err));
  g_assert_nonnull (strstr (err->message, "nested deeper than"));
  g_clear_error (&err);
  g_free (b);
  g_string_free (s, TRUE);
}

static void
test_file (void)
{
  GError *err = NULL;
  gchar *dir, *path;
  NpuSafetensors *st;
  gsize size;
  guint8 *b;

  dir = g_dir_make_tmp ("npu-st-XXXXXX", &err);
  g_assert_no_error (err);
  path = g_build_filename (dir, "model.safetensors", NULL);
  b = make_file (valid_json, VALID_DATA, &size);
  g_assert_true (g_file_set_contents (path, (gchar *) b, size, &err));
  st = npu_safetensors_open (path, &err);
  g_assert_no_error (err);
  g_assert_cmpint (npu_safetensors_get_fd (st), >=, 0);
  g_assert_cmpuint (npu_safetensors_get_size (st), ==, size);
  g_assert_true (memcmp (npu_safetensors_find_tensor (st, "f16")->data,
          b + npu_safetensors_find_tensor (st, "f16")->offset, 6) == 0);
  npu_safetensors_free (st);

  g_assert_true (g_file_set_contents (path, (gchar *) b, size - 1, &err));
  st = npu_safetensors_open (path, &err);
  g_assert_null (st);
  g_assert_true (g_str_has_prefix (err->message,
          "model.safetensors: tensor 'e8m0': data_offsets [120, 124) run "
          "past the end"));
  g_clear_error (&err);

  g_unlink (path);
  g_assert_null (npu_safetensors_open (path, &err));
  g_assert_error (err, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_IO);
  g_clear_error (&err);
  g_rmdir (dir);
  g_free (b);
  g_free (path);
  g_free (dir);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/safetensors/valid", test_valid);
  g_test_add_func ("/safetensors/mxfp4-pairing", test_mxfp4_pairing);
  g_test_add_func ("/safetensors/truncated", test_truncated);
  g_test_add_func ("/safetensors/malformed", test_malformed);
  g_test_add_func ("/safetensors/header-length", test_header_length);
  g_test_add_func ("/safetensors/depth-bomb", test_depth_bomb);
  g_test_add_func ("/safetensors/file", test_file);
  return g_test_run ();
}
