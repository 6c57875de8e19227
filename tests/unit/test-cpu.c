/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the CPU-feature probe and its cap (NPU_CPU_ISA)
 *
 * The probe's features against the compiler's own detection are checked in
 * test-deviceinfo.c (the CPU device lists them); here: the levels, the cap
 * set from a program, and the cap from the environment, read in a child
 * process started with it.
 */
#include <core/cpu/npucpu.h>
#include <core/cpu/npumatmul.h>

#include <string.h>

/* What each level needs, written out here rather than taken from the
 * probe's own tables. */
static NpuCpuFeatures
level_needs (NpuCpuIsa isa)
{
  NpuCpuFeatures avx2 = NPU_CPU_AVX2 | NPU_CPU_FMA | NPU_CPU_F16C;

  switch (isa) {
    case NPU_CPU_ISA_AVX2:
      return avx2;
    case NPU_CPU_ISA_AVX512:
      return avx2 | NPU_CPU_AVX512F | NPU_CPU_AVX512BW | NPU_CPU_AVX512VL |
          NPU_CPU_AVX512VNNI | NPU_CPU_AVX512VBMI;
    case NPU_CPU_ISA_ASIMD:
      return NPU_CPU_NEON;
    case NPU_CPU_ISA_NEON:
      return NPU_CPU_NEON | NPU_CPU_DOTPROD;
    case NPU_CPU_ISA_NEON_I8MM:
      return NPU_CPU_NEON | NPU_CPU_DOTPROD | NPU_CPU_I8MM;
    default:
      return 0;
  }
}

static void
test_names (void)
{
  static const gchar *const names[] = { "scalar", "avx2", "avx512", "asimd",
    "neon", "neon-i8mm"
  };
  NpuCpuIsa isa;
  guint i;

  for (i = 0; i < G_N_ELEMENTS (names); i++) {
    g_assert_true (npu_cpu_isa_from_name (names[i], &isa));
    g_assert_cmpint (isa, ==, i);
    g_assert_cmpstr (npu_cpu_isa_name (isa), ==, names[i]);
  }
  g_assert_true (npu_cpu_isa_from_name ("AVX2", &isa));
  g_assert_cmpint (isa, ==, NPU_CPU_ISA_AVX2);
  g_assert_false (npu_cpu_isa_from_name ("sse2", &isa));
  g_assert_false (npu_cpu_isa_from_name ("", &isa));
}

static void
test_levels (void)
{
  NpuCpuFeatures all = npu_cpu_detect ();
  NpuCpuIsa isa, best = NPU_CPU_ISA_SCALAR;
  gchar *s;

  /* with no cap (the suite runs without NPU_CPU_ISA) everything is usable */
  g_assert_null (g_getenv ("NPU_CPU_ISA"));
  g_assert_cmphex (npu_cpu_get_features (), ==, all);
  for (isa = NPU_CPU_ISA_SCALAR; isa < NPU_CPU_N_ISAS; isa++) {
    gboolean want = (all & level_needs (isa)) == level_needs (isa);

    g_assert_cmpint (npu_cpu_isa_usable (isa), ==, want);
    if (want)
      best = isa;
  }
  g_assert_cmpint (npu_cpu_get_isa (), ==, best);
  /* the matrix kernels start on the best level this build has */
  g_assert_cmpstr (npu_matmul_get_isa (), ==, npu_cpu_isa_name (best));

  s = npu_cpu_features_to_string (NPU_CPU_AVX2 | NPU_CPU_F16C |
      NPU_CPU_AVX512VNNI);
  g_assert_cmpstr (s, ==, "avx2 f16c avx512_vnni");
  g_free (s);
  s = npu_cpu_features_to_string (0);
  g_assert_cmpstr (s, ==, "");
  g_free (s);
}

static void
test_set_isa (void)
{
  NpuCpuFeatures all = npu_cpu_detect ();
  NpuCpuIsa best = npu_cpu_get_isa (), isa;

  for (isa = NPU_CPU_ISA_SCALAR; isa < NPU_CPU_N_ISAS; isa++) {
    NpuCpuFeatures f, before = npu_cpu_get_features ();

    /* a level the CPU lacks is refused, whatever the current cap */
    if ((all & level_needs (isa)) != level_needs (isa)) {
      g_assert_false (npu_cpu_set_isa (npu_cpu_isa_name (isa)));
      g_assert_cmphex (npu_cpu_get_features (), ==, before);
      continue;
    }
    g_assert_true (npu_cpu_set_isa (npu_cpu_isa_name (isa)));
    f = npu_cpu_get_features ();
    g_assert_cmpint (npu_cpu_get_isa (), ==, isa);
    g_assert_true (npu_cpu_has (level_needs (isa)));
    /* nothing beyond the CPU's, nothing of a higher level */
    g_assert_cmphex (f & ~all, ==, 0);
    if (isa == NPU_CPU_ISA_SCALAR)
      g_assert_cmphex (f, ==, 0);
    if (isa == NPU_CPU_ISA_AVX2)
      g_assert_false (npu_cpu_has (NPU_CPU_AVX512F));
  }
  g_assert_false (npu_cpu_set_isa ("no-such-level"));
  g_assert_true (npu_cpu_set_isa (NULL));
  g_assert_cmphex (npu_cpu_get_features (), ==, all);
  g_assert_cmpint (npu_cpu_get_isa (), ==, best);
}

static const gchar *self_path;

/* Runs this program with NPU_CPU_ISA=@value; its stdout and stderr.  In a
 * cross build meson runs the tests through an emulator (the cross file's
 * exe_wrapper, in MESON_EXE_WRAPPER): the child is started through it too,
 * for this machine may not execute the program itself. */
static void
run_child (const gchar * value, gchar ** out, gchar ** err)
{
  const gchar *wrapper = g_getenv ("MESON_EXE_WRAPPER");
  gchar **wrap = NULL;
  GPtrArray *argv = g_ptr_array_new ();
  gchar **envp = g_environ_setenv (g_get_environ (), "NPU_CPU_ISA", value,
      TRUE);
  GError *error = NULL;
  gint status;
  guint i;

  if (wrapper && *wrapper) {
    g_assert_true (g_shell_parse_argv (wrapper, NULL, &wrap, &error));
    g_assert_no_error (error);
    for (i = 0; wrap[i]; i++)
      g_ptr_array_add (argv, wrap[i]);
  }
  g_ptr_array_add (argv, (gpointer) self_path);
  g_ptr_array_add (argv, (gpointer) "--child");
  g_ptr_array_add (argv, NULL);
  g_assert_true (g_spawn_sync (NULL, (gchar **) argv->pdata, envp,
          G_SPAWN_SEARCH_PATH, NULL, NULL, out, err, &status, &error));
  g_assert_no_error (error);
  g_assert_true (g_spawn_check_wait_status (status, NULL));
  g_ptr_array_unref (argv);
  g_strfreev (wrap);
  g_strfreev (envp);
}

static void
test_env (void)
{
  NpuCpuIsa isa;
  gchar *out, *err, *want;

  run_child ("scalar", &out, &err);
  g_assert_cmpstr (out, ==, "isa=scalar matmul=scalar features=\n");
  g_assert_cmpstr (err, ==, "");
  g_free (out);
  g_free (err);

  run_child ("no-such-level", &out, &err);
  g_assert_cmpstr (out, ==, "isa=scalar matmul=scalar features=\n");
  g_assert_nonnull (strstr (err,
          "NPU_CPU_ISA=no-such-level is not available here, using scalar"));
  g_free (out);
  g_free (err);

  for (isa = NPU_CPU_ISA_AVX2; isa < NPU_CPU_N_ISAS; isa++) {
    if (!npu_cpu_isa_usable (isa))
      continue;
    run_child (npu_cpu_isa_name (isa), &out, &err);
    want = g_strdup_printf ("isa=%s matmul=%s features=",
        npu_cpu_isa_name (isa), npu_cpu_isa_name (isa));
    g_assert_true (g_str_has_prefix (out, want));
    g_assert_cmpstr (err, ==, "");
    g_free (want);
    g_free (out);
    g_free (err);
  }
}

int
main (int argc, char **argv)
{
  if (argc == 2 && strcmp (argv[1], "--child") == 0) {
    gchar *f = npu_cpu_features_to_string (npu_cpu_get_features ());

    g_print ("isa=%s matmul=%s features=%s\n",
        npu_cpu_isa_name (npu_cpu_get_isa ()), npu_matmul_get_isa (), f);
    g_free (f);
    return 0;
  }
  self_path = argv[0];
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/cpu/names", test_names);
  g_test_add_func ("/cpu/levels", test_levels);
  g_test_add_func ("/cpu/set-isa", test_set_isa);
  g_test_add_func ("/cpu/env", test_env);
  return g_test_run ();
}
