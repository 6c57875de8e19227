/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what a decode paced to a rate costs beside one as fast as
 * possible
 *
 * npullm's decode-policy=paced (npu_llm_session_set_pace()) runs each
 * token on the fewest threads that hold the rate and sleeps until the
 * next is due.  This program answers the same prompt through the session,
 * as npullm does, first as fast as possible and then paced at fractions
 * of the rate that gave, and prints for the decode of each (from the
 * first token on, the prompt left out): the rate reached, the threads the
 * pacer kept, the wall time a token took to compute (its latency once it
 * is due), the CPU time a token cost the process (getrusage: every
 * thread, spinning included) and how busy that kept the cores; and the
 * joules a token cost where the machine has energy meters (RAPL, hwmon:
 * npuenergy.h), or says that it has none.
 *
 * Each configuration answers once untimed first (the pacer times its
 * thread counts over the first tokens of a session's first paced answer),
 * then --passes times, alternating with the others, best pass printed.
 * A program that prints figures, not a test.
 *
 * Usage: bench-paced [model.gguf] [--tokens N (48)] [--passes P (3)]
 *          [--threads T (one per CPU)] [--fractions F1,F2,... (0.5,0.25)]
 * Without a model, a generated Llama-3.2-1B-shaped MXFP4 file is used.
 */
#include <core/models/npullmsession.h>
#include <core/device/npuenergy.h>
#include "tests/bench/npubenchmodel.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define PROMPT "Describe the scene in front of the camera in detail."
#define MAX_CONFIGS 8

typedef struct
{
  gdouble rate;                 /* 0: as fast as possible */
  gdouble best_cpu_ms;          /* per token, best pass */
  gdouble reached, token_ms, busy, joules;
  guint threads;
} Config;

typedef struct
{
  gboolean started;
  gint64 wall0;
  gint64 cpu0;
  NpuEnergyMeter *meter;
  NpuEnergySample *e0;
} Timing;

static gint64
cpu_us (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * G_USEC_PER_SEC +
      ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* The decode starts at the first piece of text: the prompt is behind */
static gboolean
on_text (const gchar * text, gsize len, gpointer user_data)
{
  Timing *t = user_data;

  if (!t->started) {
    t->started = TRUE;
    t->wall0 = g_get_monotonic_time ();
    t->cpu0 = cpu_us ();
    npu_energy_meter_read (t->meter, t->e0);
  }
  return TRUE;
}

static gdouble
energy_joules (NpuEnergyMeter * meter, NpuEnergySample * a,
    NpuEnergySample * b)
{
  gdouble sum = 0, j;
  guint d;

  /* the package domains hold the cores and the uncore; dram beside them */
  for (d = 0; d < npu_energy_meter_get_n_domains (meter); d++) {
    const gchar *name = npu_energy_meter_get_domain_name (meter, d);

    if ((g_str_has_prefix (name, "package") || g_str_equal (name, "dram"))
        && npu_energy_meter_joules (meter, a, b, d, &j))
      sum += j;
  }
  return sum;
}

typedef struct
{
  NpuLlmSession *session;
  NpuQueue *queue;
  NpuEnergyMeter *meter;
  guint n_threads;
} Bench;

static void
run_config (Bench * b, Config * c, gboolean timed)
{
  NpuEnergySample *e0 = npu_energy_sample_new (b->meter);
  NpuEnergySample *e1 = npu_energy_sample_new (b->meter);
  Timing t = { FALSE, 0, 0, b->meter, e0 };
  NpuLlmAnswerStats st;
  GError *error = NULL;
  gint64 wall, cpu;
  gdouble cpu_ms;
  guint n;

  npu_llm_session_set_pace (b->session, c->rate);
  if (!npu_llm_session_answer (b->session, b->queue, PROMPT, NULL, 0,
          on_text, &t, &st, &error))
    g_error ("%s", error->message);
  npu_energy_meter_read (b->meter, e1);
  wall = g_get_monotonic_time () - t.wall0;
  cpu = cpu_us () - t.cpu0;
  n = st.n_decoded;
  if (!timed || n == 0)
    goto out;
  cpu_ms = cpu / 1000.0 / n;
  if (c->best_cpu_ms == 0 || cpu_ms < c->best_cpu_ms) {
    c->best_cpu_ms = cpu_ms;
    c->reached = n * 1e6 / wall;
    c->token_ms = (wall - st.paced_sleep_us) / 1000.0 / n;
    c->busy = (gdouble) cpu / wall / b->n_threads;
    c->threads = st.decode_threads;
    c->joules = energy_joules (b->meter, e0, e1) / n;
  }
out:
  npu_energy_sample_free (e0);
  npu_energy_sample_free (e1);
}

static NpuLlmSession *
open_session (const gchar * path, guint n_tokens)
{
  NpuLlmSessionParams sp;
  NpuLlmSession *s;
  NpuLlmModel *model;
  NpuGguf *gguf;
  GError *error = NULL;

  gguf = npu_gguf_open (path, &error);
  if (!gguf)
    g_error ("%s", error->message);
  model = npu_llm_model_new_from_file (path, NPU_LLM_LOAD_IN_PLACE, &error);
  if (!model)
    g_error ("%s", error->message);
  npu_llm_session_params_init (&sp);
  sp.n_ctx = 1024;
  sp.max_tokens = n_tokens;
  /* sampled, not greedy: a random model's greedy text ends or repeats
   * early; the seed keeps every answer the same length */
  sp.sampler.temperature = 1.0;
  sp.sampler.top_k = 0;
  sp.sampler.seed = 5;
  s = npu_llm_session_new (gguf, model, &sp, &error);
  if (!s)
    g_error ("%s", error->message);
  npu_llm_session_params_clear (&sp);
  npu_gguf_free (gguf);
  return s;
}

static void
print_config (const Config * c, const Config * fast, gboolean have_energy)
{
  gchar policy[32];

  if (c->rate > 0)
    g_snprintf (policy, sizeof (policy), "paced %.1f", c->rate);
  else
    g_strlcpy (policy, "as-fast-as-possible", sizeof (policy));
  printf ("%-20s %8.1f %7u %10.2f %12.2f %7.2f %8.0f %%", policy, c->reached,
      c->threads, c->token_ms, c->best_cpu_ms,
      c->best_cpu_ms / fast->best_cpu_ms, c->busy * 100);
  if (have_energy)
    printf (" %10.4f", c->joules);
  printf ("\n");
}

int
main (int argc, char **argv)
{
  guint n_tokens = 48, passes = 3, n_threads = 0, n_configs = 1, i, p;
  gchar *fractions = NULL, *tmp = NULL, **f;
  const gchar *path = NULL;
  GOptionEntry entries[] = {
    {"tokens", 0, 0, G_OPTION_ARG_INT, &n_tokens, "Tokens an answer", "N"},
    {"passes", 0, 0, G_OPTION_ARG_INT, &passes, "Timed passes", "P"},
    {"threads", 0, 0, G_OPTION_ARG_INT, &n_threads, "CPU threads", "T"},
    {"fractions", 0, 0, G_OPTION_ARG_STRING, &fractions,
        "Paced rates, as fractions of the unpaced one", "F1,F2"},
    {NULL}
  };
  GOptionContext *opts = g_option_context_new ("[model.gguf]");
  GError *error = NULL;
  Config configs[MAX_CONFIGS] = { {0,}, };
  Bench b;

  g_option_context_add_main_entries (opts, entries, NULL);
  if (!g_option_context_parse (opts, &argc, &argv, &error))
    g_error ("%s", error->message);
  g_option_context_free (opts);
  if (argc > 1)
    path = argv[1];
  else
    path = tmp = npu_bench_generate_llama_1b ("bench-paced");
  if (n_threads == 0)
    n_threads = g_get_num_processors ();

  b.queue = npu_queue_new (npu_device_new_cpu (n_threads), "bench-paced");
  npu_device_unref (npu_queue_get_device (b.queue));
  b.n_threads = n_threads;
  b.session = open_session (path, n_tokens);
  b.meter = npu_energy_meter_new (NULL);

  /* the unpaced rate first: the paced ones are fractions of it */
  run_config (&b, &configs[0], FALSE);
  for (p = 0; p < passes; p++)
    run_config (&b, &configs[0], TRUE);
  f = g_strsplit (fractions ? fractions : "0.5,0.25", ",", -1);
  for (i = 0; f[i] && n_configs < MAX_CONFIGS; i++)
    configs[n_configs++].rate = configs[0].reached * g_ascii_strtod (f[i],
        NULL);
  g_strfreev (f);
  for (i = 1; i < n_configs; i++)
    run_config (&b, &configs[i], FALSE);
  for (p = 0; p < passes; p++)
    for (i = 0; i < n_configs; i++)
      run_config (&b, &configs[i], TRUE);

  printf ("%s, %u threads, %u tokens an answer, best of %u passes\n",
      path, n_threads, n_tokens, passes);
  printf ("%-20s %8s %7s %10s %12s %7s %10s", "policy", "tok/s", "threads",
      "token ms", "CPU ms/tok", "ratio", "CPU busy");
  if (npu_energy_meter_get_n_domains (b.meter))
    printf (" %10s", "J/token");
  printf ("\n");
  for (i = 0; i < n_configs; i++)
    print_config (&configs[i], &configs[0],
        npu_energy_meter_get_n_domains (b.meter) > 0);
  if (!npu_energy_meter_get_n_domains (b.meter))
    printf ("no energy meter on this machine (powercap, hwmon): no joules\n");

  npu_energy_meter_free (b.meter);
  npu_llm_session_free (b.session);
  npu_queue_free (b.queue);
  if (tmp) {
    g_unlink (tmp);
    g_free (tmp);
  }
  g_free (fractions);
  return 0;
}
