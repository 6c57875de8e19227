/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: replays the fuzzing corpora through the model file readers
 *
 * tests/fuzz/corpus-gguf/, corpus-safetensors/ and corpus-json/ (the JSON
 * of Hugging Face directories, read from an exact-size copy) hold seeds and
 * inputs the
 * fuzzers found interesting (including any that once crashed), so every
 * normal build re-checks them without libFuzzer.  Names say what to expect:
 * "ok-*" must open, "bad-*" must fail with an error, anything else must
 * merely not crash.  Each file is read both through open() (the mapping)
 * and open_bytes() on an exact-size heap copy, so that an overread trips
 * ASan or valgrind.
 *
 * The corpus directory (tests/fuzz in the source tree) is found from the
 * NPU_FUZZ_CORPUS_DIR environment variable, else the NPU_FUZZ_CORPUS_DIR
 * define, else G_TEST_SRCDIR (tests/unit) + "../fuzz".
 */
#include <core/formats/npugguf.h>
#include <core/formats/npujson.h>
#include <core/formats/npusafetensors.h>
#include <core/formats/nputokenwire.h>

#include <string.h>

typedef enum
{
  EXPECT_ANY,
  EXPECT_OK,
  EXPECT_BAD,
} Expect;

static gchar *
corpus_root (void)
{
  const gchar *env = g_getenv ("NPU_FUZZ_CORPUS_DIR");

  if (env && *env)
    return g_strdup (env);
#ifdef NPU_FUZZ_CORPUS_DIR
  return g_strdup (NPU_FUZZ_CORPUS_DIR);
#else
  if (g_getenv ("G_TEST_SRCDIR"))
    return g_test_build_filename (G_TEST_DIST, "..", "fuzz", NULL);
  return NULL;
#endif
}

static Expect
expect_for (const gchar * name)
{
  if (g_str_has_prefix (name, "ok-"))
    return EXPECT_OK;
  if (g_str_has_prefix (name, "bad-"))
    return EXPECT_BAD;
  return EXPECT_ANY;
}

static void
check (const gchar * path, const gchar * name, gboolean ok, GError * err,
    Expect expect)
{
  if (ok)
    g_assert_no_error (err);
  else {
    /* a failure always says why, naming the file or "(memory)" */
    g_assert_nonnull (err);
    g_assert_cmpstr (err->message, !=, "");
  }
  if (expect == EXPECT_OK && !ok)
    g_error ("%s should open: %s", path, err->message);
  if (expect == EXPECT_BAD && ok)
    g_error ("%s should fail to open", path);
  if (g_test_verbose ())
    g_printerr ("  %s: %s\n", name, ok ? "ok" : err->message);
}

static void
walk_gguf (NpuGguf * g)
{
  guint i;

  for (i = 0; i < npu_gguf_n_tensors (g); i++) {
    const NpuGgufTensor *t = npu_gguf_get_tensor (g, i);
    guint64 sum = 0;
    gsize k;

    g_assert_true (npu_gguf_find_tensor (g, t->name) == t);
    g_assert_cmpuint (t->offset + t->n_bytes, <=, npu_gguf_get_size (g));
    for (k = 0; k < t->n_bytes; k++)
      sum += t->data[k];
    (void) sum;
  }
  for (i = 0; i < npu_gguf_n_kv (g); i++)
    g_assert_true (npu_gguf_find (g, npu_gguf_get_key (g, i)) ==
        npu_gguf_get_value (g, i));
}

static void
walk_safetensors (NpuSafetensors * st)
{
  guint i;

  for (i = 0; i < npu_safetensors_n_tensors (st); i++) {
    const NpuSafetensorsTensor *t = npu_safetensors_get_tensor (st, i);

    g_assert_true (npu_safetensors_find_tensor (st, t->name) == t);
    g_assert_cmpuint (t->offset + t->n_bytes, <=,
        npu_safetensors_get_size (st));
  }
}

/* Every value of a JSON tree, and each member found by its name */
static void
walk_json (const NpuJson * v)
{
  guint i;

  for (i = 0; i < npu_json_size (v); i++) {
    if (npu_json_type (v) == NPU_JSON_OBJECT)
      g_assert_nonnull (npu_json_member (v, npu_json_key_at (v, i)));
    walk_json (npu_json_at (v, i));
  }
  if (npu_json_type (v) == NPU_JSON_STRING)
    g_assert_true (g_utf8_validate (npu_json_string (v), -1, NULL));
}

static void
replay_json (const gchar * path, const gchar * name, const gchar * text,
    gsize len)
{
  GError *err = NULL;
  NpuJson *root = npu_json_parse (text, len, name, &err);

  check (path, name, root != NULL, err, expect_for (name));
  if (root)
    walk_json (root);
  npu_json_free (root);
  g_clear_error (&err);
}

typedef enum
{
  FORMAT_GGUF,
  FORMAT_SAFETENSORS,
  FORMAT_JSON,
} Format;

static guint
replay (const gchar * sub, Format format)
{
  gchar *root = corpus_root (), *dir;
  GError *err = NULL;
  const gchar *name;
  GDir *d;
  guint n = 0;

  if (!root)
    g_error ("corpus not found: set NPU_FUZZ_CORPUS_DIR to tests/fuzz, or "
        "build with -DNPU_FUZZ_CORPUS_DIR");
  dir = g_build_filename (root, sub, NULL);
  d = g_dir_open (dir, 0, &err);
  g_assert_no_error (err);

  while ((name = g_dir_read_name (d))) {
    gchar *path = g_build_filename (dir, name, NULL);
    Expect expect = expect_for (name);
    gchar *contents;
    guint8 *copy;
    gsize len;
    gboolean ok;

    if (!g_file_get_contents (path, &contents, &len, &err))
      g_error ("%s: %s", path, err->message);
    copy = len ? g_memdup2 (contents, len) : NULL;
    g_free (contents);

    if (format == FORMAT_JSON) {
      replay_json (path, name, (const gchar *) copy, len);
    } else if (format == FORMAT_GGUF) {
      NpuGguf *g = npu_gguf_open (path, &err);

      check (path, name, g != NULL, err, expect);
      if (g)
        walk_gguf (g);
      npu_gguf_free (g);
      g_clear_error (&err);
      g = npu_gguf_open_bytes (copy, len, &err);
      ok = g != NULL;
      check (path, name, ok, err, expect);
      if (g)
        walk_gguf (g);
      npu_gguf_free (g);
    } else {
      NpuSafetensors *st = npu_safetensors_open (path, &err);

      check (path, name, st != NULL, err, expect);
      if (st)
        walk_safetensors (st);
      npu_safetensors_free (st);
      g_clear_error (&err);
      st = npu_safetensors_open_bytes (copy, len, &err);
      ok = st != NULL;
      check (path, name, ok, err, expect);
      if (st)
        walk_safetensors (st);
      npu_safetensors_free (st);
    }
    g_clear_error (&err);
    g_free (copy);
    g_free (path);
    n++;
  }
  g_dir_close (d);
  g_free (dir);
  g_free (root);
  return n;
}

static void
test_gguf_corpus (void)
{
  /* a corpus that went missing must not pass silently */
  g_assert_cmpuint (replay ("corpus-gguf", FORMAT_GGUF), >=, 10);
}

static void
test_safetensors_corpus (void)
{
  g_assert_cmpuint (replay ("corpus-safetensors", FORMAT_SAFETENSORS), >=, 10);
}

static void
test_json_corpus (void)
{
  g_assert_cmpuint (replay ("corpus-json", FORMAT_JSON), >=, 10);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/fuzz-corpus/gguf", test_gguf_corpus);
  g_test_add_func ("/fuzz-corpus/safetensors", test_safetensors_corpus);
  g_test_add_func ("/fuzz-corpus/json", test_json_corpus);
  return g_test_run ();
}
