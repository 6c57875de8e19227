/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: write deterministic random models in llama.cpp's GGUF layouts
 *
 *   npu-model-gen text --arch llama|qwen2|qwen3|gpt-oss
 *       [--size tiny|small|1b (gpt-oss: tiny|small|20b)]
 *       [--layers N --dim D --ff F --heads H --kv-heads K --vocab V --ctx C]
 *       [--head-dim N (qwen3, gpt-oss)]
 *       [--experts N --experts-used K --sliding-window W (gpt-oss)]
 *       [--type f32|f16|bf16|q4_0|q4_1|q5_0|q5_1|q8_0|q4_k|q5_k|q6_k|mxfp4] [--tied|--untied] [--seed S]
 *       [--all-mxfp4] [--mxfp4-values] [--tokenizer TOK.gguf]
 *       [--harmony (gpt-oss)] -o text.gguf
 *   npu-model-gen mmproj (--for text.gguf | --text-dim D)
 *       [--projector mlp|idefics3|qwen2vl|qwen2.5vl|gemma3]
 *       [--size tiny|small|base]
 *       [--image-size 224] [--patch 14] [--scale-factor 2]
 *       [--wa-pattern N --window-size PX (qwen2.5vl)]
 *       [--vision-layers N --vision-dim D --vision-ff F --vision-heads H]
 *       [--act gelu|silu|quick] [--type ...] [--mxfp4-values]
 *       [--extra-block] [--seed S]
 *       -o mmproj.gguf
 *   npu-model-gen audio (--for text.gguf | --text-dim D)
 *       [--projector qwen2a|ultravox] [--size tiny|base] [--mels 80|128]
 *       [--audio-layers N --audio-dim D --audio-ff F --audio-heads H]
 *       [--positions N] [--stack-factor N] [--hidden N]
 *       [--type ...] [--mxfp4-values] [--seed S] -o audio-mmproj.gguf
 *
 * Explicit sizes override the preset's.  See docs/models.md.  --tokenizer
 * copies the tokenizer.* keys of another GGUF (a real vocabulary, for the
 * tokenizer cross-check) instead of generating a vocabulary; --vocab is
 * then its token count.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include <core/formats/npugguf.h>
#include "tests/tools/npumodelgen.h"

static gchar *opt_arch = NULL, *opt_size = NULL, *opt_type = NULL;
static gchar *opt_seed = NULL, *opt_out = NULL, *opt_for = NULL;
static gchar *opt_projector = NULL, *opt_tokenizer = NULL, *opt_act = NULL;
static gint opt_layers = -1, opt_dim = -1, opt_ff = -1, opt_heads = -1;
static gint opt_kv_heads = -1, opt_vocab = -1, opt_ctx = -1, opt_head_dim = -1;
static gboolean opt_tied = FALSE, opt_untied = FALSE;
static gboolean opt_all_mxfp4 = FALSE, opt_mxfp4_values = FALSE;
static gboolean opt_harmony = FALSE;
static gboolean opt_extra_block = FALSE;
static gint opt_image_size = -1, opt_patch = -1, opt_scale = -1;
static gint opt_text_dim = -1, opt_wa_pattern = -1, opt_window = -1;
static gint opt_mels = -1, opt_positions = -1, opt_stack = -1;
static gint opt_hidden = -1;
static gint opt_experts = -1, opt_experts_used = -1, opt_swa = -1;

static GOptionEntry common_entries[] = {
  {"size", 0, 0, G_OPTION_ARG_STRING, &opt_size, "Preset size", "SIZE"},
  {"type", 0, 0, G_OPTION_ARG_STRING, &opt_type,
      "Type of the 2-D weights: f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, "
      "q8_0, q4_k, q5_k, q6_k (rows not of whole 256-blocks: llama-quantize's "
      "fallback), mxfp4", "TYPE"},
  {"seed", 0, 0, G_OPTION_ARG_STRING, &opt_seed, "PRNG seed (default 1)",
      "S"},
  {"output", 'o', 0, G_OPTION_ARG_FILENAME, &opt_out, "Output file", "FILE"},
  {NULL}
};

static GOptionEntry text_entries[] = {
  {"arch", 0, 0, G_OPTION_ARG_STRING, &opt_arch,
      "llama, qwen2, qwen3, gpt-oss or gemma3", "ARCH"},
  {"experts", 0, 0, G_OPTION_ARG_INT, &opt_experts,
      "gpt-oss: experts per layer (expert_count)", "N"},
  {"experts-used", 0, 0, G_OPTION_ARG_INT, &opt_experts_used,
      "gpt-oss: experts a token is routed to (expert_used_count)", "K"},
  {"sliding-window", 0, 0, G_OPTION_ARG_INT, &opt_swa,
      "gpt-oss: positions a sliding layer attends to (128)", "W"},
  {"layers", 0, 0, G_OPTION_ARG_INT, &opt_layers, "Blocks", "N"},
  {"dim", 0, 0, G_OPTION_ARG_INT, &opt_dim, "Embedding length", "D"},
  {"ff", 0, 0, G_OPTION_ARG_INT, &opt_ff, "Feed-forward length", "F"},
  {"heads", 0, 0, G_OPTION_ARG_INT, &opt_heads, "Attention heads", "H"},
  {"kv-heads", 0, 0, G_OPTION_ARG_INT, &opt_kv_heads, "KV heads", "K"},
  {"head-dim", 0, 0, G_OPTION_ARG_INT, &opt_head_dim,
      "qwen3, gpt-oss: head size (attention.key_length; the preset's by default)",
      "N"},
  {"vocab", 0, 0, G_OPTION_ARG_INT, &opt_vocab, "Tokens", "V"},
  {"ctx", 0, 0, G_OPTION_ARG_INT, &opt_ctx, "Context length", "C"},
  {"tied", 0, 0, G_OPTION_ARG_NONE, &opt_tied,
      "No output.weight (token_embd reused; qwen2's default)", NULL},
  {"untied", 0, 0, G_OPTION_ARG_NONE, &opt_untied,
      "Separate output.weight (llama's default)", NULL},
  {"all-mxfp4", 0, 0, G_OPTION_ARG_NONE, &opt_all_mxfp4,
      "With --type mxfp4: token_embd and output in MXFP4 too (not Q8_0)",
      NULL},
  {"mxfp4-values", 0, 0, G_OPTION_ARG_NONE, &opt_mxfp4_values,
      "Round every matrix to MXFP4's values, stored in --type (f32, f16, "
      "bf16)", NULL},
  {"tokenizer", 0, 0, G_OPTION_ARG_FILENAME, &opt_tokenizer,
      "Copy the tokenizer.* keys of FILE (GGUF) instead of generating a "
      "vocabulary", "FILE"},
  {"harmony", 0, 0, G_OPTION_ARG_NONE, &opt_harmony,
      "gpt-oss: the harmony format's tokens in the vocabulary and a chat "
      "template of gpt-oss's family", NULL},
  {NULL}
};

static GOptionEntry mmproj_entries[] = {
  {"for", 0, 0, G_OPTION_ARG_FILENAME, &opt_for,
      "Text model whose embedding_length the projector outputs", "FILE"},
  {"text-dim", 0, 0, G_OPTION_ARG_INT, &opt_text_dim,
      "Projector output size, without --for", "D"},
  {"projector", 0, 0, G_OPTION_ARG_STRING, &opt_projector,
      "mlp (LLaVA), idefics3 (SmolVLM), qwen2vl, qwen2.5vl or gemma3",
        "TYPE"},
  {"image-size", 0, 0, G_OPTION_ARG_INT, &opt_image_size, "Image side", "N"},
  {"patch", 0, 0, G_OPTION_ARG_INT, &opt_patch, "Patch side", "N"},
  {"scale-factor", 0, 0, G_OPTION_ARG_INT, &opt_scale,
      "idefics3 pixel shuffle factor", "N"},
  {"wa-pattern", 0, 0, G_OPTION_ARG_INT, &opt_wa_pattern,
      "qwen2.5vl: every N-th block attends to the whole image", "N"},
  {"window-size", 0, 0, G_OPTION_ARG_INT, &opt_window,
      "qwen2.5vl: attention window side in pixels", "PX"},
  {"vision-layers", 0, 0, G_OPTION_ARG_INT, &opt_layers, "ViT blocks", "N"},
  {"vision-dim", 0, 0, G_OPTION_ARG_INT, &opt_dim, "ViT width", "D"},
  {"vision-ff", 0, 0, G_OPTION_ARG_INT, &opt_ff, "ViT MLP width", "F"},
  {"vision-heads", 0, 0, G_OPTION_ARG_INT, &opt_heads, "ViT heads", "H"},
  {"act", 0, 0, G_OPTION_ARG_STRING, &opt_act,
      "FFN activation: gelu (clip.use_gelu, default), silu (clip.use_silu) "
      "or quick (quick GELU, neither key)", "ACT"},
  {"mxfp4-values", 0, 0, G_OPTION_ARG_NONE, &opt_mxfp4_values,
      "Round every matrix (and the patch kernel if 3 p p is a multiple of "
      "32) to MXFP4's values, stored in --type (f32, f16, bf16)", NULL},
  {"extra-block", 0, 0, G_OPTION_ARG_NONE, &opt_extra_block,
      "Write one more block, the others unchanged (llama.cpp's LLaVA graph "
      "skips the last block)", NULL},
  {NULL}
};

static GOptionEntry audio_entries[] = {
  {"for", 0, 0, G_OPTION_ARG_FILENAME, &opt_for,
      "Text model whose embedding_length the projector outputs", "FILE"},
  {"text-dim", 0, 0, G_OPTION_ARG_INT, &opt_text_dim,
      "Projector output size, without --for", "D"},
  {"projector", 0, 0, G_OPTION_ARG_STRING, &opt_projector,
      "qwen2a (Qwen2-Audio, default) or ultravox", "TYPE"},
  {"mels", 0, 0, G_OPTION_ARG_INT, &opt_mels, "Mel bins (80 or 128)", "N"},
  {"audio-layers", 0, 0, G_OPTION_ARG_INT, &opt_layers, "Encoder blocks",
      "N"},
  {"audio-dim", 0, 0, G_OPTION_ARG_INT, &opt_dim, "Encoder width", "D"},
  {"audio-ff", 0, 0, G_OPTION_ARG_INT, &opt_ff, "Encoder MLP width", "F"},
  {"audio-heads", 0, 0, G_OPTION_ARG_INT, &opt_heads, "Encoder heads", "H"},
  {"positions", 0, 0, G_OPTION_ARG_INT, &opt_positions,
      "Rows of a.position_embd (1500: 30 s)", "N"},
  {"stack-factor", 0, 0, G_OPTION_ARG_INT, &opt_stack,
      "ultravox: positions stacked into one token (8)", "N"},
  {"hidden", 0, 0, G_OPTION_ARG_INT, &opt_hidden,
      "ultravox: mm.a.mlp.1's output size (even)", "N"},
  {"mxfp4-values", 0, 0, G_OPTION_ARG_NONE, &opt_mxfp4_values,
      "Round every matrix to MXFP4's values and the conv kernels to F16's, "
      "stored in --type (f32, f16, bf16)", NULL},
  {NULL}
};

static void
override (guint * field, gint value)
{
  if (value >= 0)
    *field = value;
}

static gboolean
parse_common (guint32 * wtype, guint64 * seed, GError ** error)
{
  if (opt_type) {
    gint t = npu_model_gen_parse_type (opt_type);

    if (t < 0) {
      g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
          "unknown --type '%s' (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, "
          "q8_0, q4_k, q5_k, q6_k, mxfp4)", opt_type);
      return FALSE;
    }
    *wtype = t;
  }
  if (opt_seed && !g_ascii_string_to_unsigned (opt_seed, 10, 0, G_MAXUINT64,
          seed, error))
    return FALSE;
  if (opt_out == NULL) {
    g_set_error (error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
        "no output file (-o)");
    return FALSE;
  }
  return TRUE;
}

static void
report (const NpuModelGenStats * s, gint64 t0)
{
  gdouble secs = (g_get_monotonic_time () - t0) / 1e6;

  g_print ("%s: %" G_GUINT64_FORMAT " parameters (%.3f M), %u tensors, %"
      G_GUINT64_FORMAT " bytes (%.1f MiB), %.2f s\n", opt_out, s->n_params,
      s->n_params / 1e6, s->n_tensors, s->file_size,
      s->file_size / 1048576.0, secs);
  if (s->n_tokens)
    g_print ("  vocabulary: %u tokens\n", s->n_tokens);
}

int
main (int argc, char **argv)
{
  GOptionContext *ctx;
  GError *error = NULL;
  NpuModelGenStats stats = { 0 };
  gint64 t0;
  gboolean ok;
  const gchar *cmd = argc > 1 ? argv[1] : "";

  if (strcmp (cmd, "text") != 0 && strcmp (cmd, "mmproj") != 0
      && strcmp (cmd, "audio") != 0) {
    g_printerr ("usage: %s text|mmproj|audio [OPTIONS] -o FILE\n"
        "       %s text --help, %s mmproj --help, %s audio --help\n",
        argv[0], argv[0], argv[0], argv[0]);
    return 2;
  }
  ctx = g_option_context_new (strcmp (cmd, "text") == 0 ?
      "text - write a random text model (GGUF)" :
      strcmp (cmd, "mmproj") == 0 ?
      "mmproj - write a random vision encoder + projector (GGUF)" :
      "audio - write a random Whisper-style audio encoder + projector "
      "(GGUF)");
  g_option_context_add_main_entries (ctx, common_entries, NULL);
  g_option_context_add_main_entries (ctx, strcmp (cmd, "text") == 0 ?
      text_entries : strcmp (cmd, "mmproj") == 0 ? mmproj_entries :
      audio_entries, NULL);
  /* drop the sub-command so the parser sees only options */
  argv[1] = argv[0];
  argc--;
  argv++;
  if (!g_option_context_parse (ctx, &argc, &argv, &error)) {
    g_printerr ("%s\n", error->message);
    g_clear_error (&error);
    g_option_context_free (ctx);
    return 2;
  }
  g_option_context_free (ctx);
  if (argc > 1) {
    g_printerr ("unexpected argument '%s'\n", argv[1]);
    return 2;
  }

  t0 = g_get_monotonic_time ();
  if (strcmp (cmd, "text") == 0) {
    NpuTextModelParams p;
    NpuModelArch arch;

    if (g_strcmp0 (opt_arch, "llama") == 0)
      arch = NPU_MODEL_ARCH_LLAMA;
    else if (g_strcmp0 (opt_arch, "qwen2") == 0)
      arch = NPU_MODEL_ARCH_QWEN2;
    else if (g_strcmp0 (opt_arch, "qwen3") == 0)
      arch = NPU_MODEL_ARCH_QWEN3;
    else if (g_strcmp0 (opt_arch, "gpt-oss") == 0)
      arch = NPU_MODEL_ARCH_GPT_OSS;
    else if (g_strcmp0 (opt_arch, "gemma3") == 0)
      arch = NPU_MODEL_ARCH_GEMMA3;
    else {
      g_printerr ("--arch must be llama, qwen2, qwen3, gpt-oss or gemma3\n");
      return 2;
    }
    ok = npu_model_gen_text_preset (&p, arch, opt_size ? opt_size : "tiny",
        &error)
        && parse_common (&p.wtype, &p.seed, &error);
    if (ok) {
      override (&p.n_layers, opt_layers);
      override (&p.dim, opt_dim);
      override (&p.ff, opt_ff);
      override (&p.n_heads, opt_heads);
      override (&p.n_kv_heads, opt_kv_heads);
      override (&p.head_dim, opt_head_dim);
      override (&p.vocab, opt_vocab);
      override (&p.ctx, opt_ctx);
      override (&p.n_experts, opt_experts);
      override (&p.n_experts_used, opt_experts_used);
      override (&p.sliding_window, opt_swa);
      if (opt_tied)
        p.tied = TRUE;
      if (opt_untied)
        p.tied = FALSE;
      p.all_mxfp4 = opt_all_mxfp4;
      p.mxfp4_values = opt_mxfp4_values;
      p.harmony = opt_harmony && p.arch == NPU_MODEL_ARCH_GPT_OSS;
      ok = npu_model_gen_write_text_with_tokenizer (&p, opt_tokenizer,
          opt_out, &stats, &error);
    }
  } else if (strcmp (cmd, "audio") == 0) {
    NpuAudioMmprojParams p;
    NpuModelAudioProjector proj;

    if (opt_projector == NULL || strcmp (opt_projector, "qwen2a") == 0)
      proj = NPU_MODEL_AUDIO_PROJECTOR_QWEN2A;
    else if (strcmp (opt_projector, "ultravox") == 0)
      proj = NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX;
    else {
      g_printerr ("--projector must be qwen2a or ultravox\n");
      return 2;
    }
    if ((opt_for == NULL) == (opt_text_dim < 0)) {
      g_printerr ("give one of --for TEXT.gguf or --text-dim D\n");
      return 2;
    }
    ok = npu_model_gen_audio_preset (&p, proj, opt_size ? opt_size : "tiny",
        &error)
        && parse_common (&p.wtype, &p.seed, &error);
    if (ok) {
      override (&p.n_layers, opt_layers);
      override (&p.dim, opt_dim);
      override (&p.ff, opt_ff);
      override (&p.n_heads, opt_heads);
      override (&p.n_mels, opt_mels);
      override (&p.n_ctx, opt_positions);
      override (&p.stack_factor, opt_stack);
      override (&p.hidden, opt_hidden);
      override (&p.text_dim, opt_text_dim);
      p.mxfp4_values = opt_mxfp4_values;
      ok = npu_model_gen_write_audio_mmproj (&p, opt_for, opt_out, &stats,
          &error);
    }
  } else {
    NpuMmprojParams p;
    NpuModelProjector proj;

    if (opt_projector == NULL || strcmp (opt_projector, "mlp") == 0)
      proj = NPU_MODEL_PROJECTOR_MLP;
    else if (strcmp (opt_projector, "idefics3") == 0)
      proj = NPU_MODEL_PROJECTOR_IDEFICS3;
    else if (strcmp (opt_projector, "gemma3") == 0)
      proj = NPU_MODEL_PROJECTOR_GEMMA3;
    else if (strcmp (opt_projector, "qwen2vl") == 0)
      proj = NPU_MODEL_PROJECTOR_QWEN2VL;
    else if (strcmp (opt_projector, "qwen2.5vl") == 0)
      proj = NPU_MODEL_PROJECTOR_QWEN25VL;
    else {
      g_printerr ("--projector must be mlp, idefics3, qwen2vl, qwen2.5vl "
          "or gemma3\n");
      return 2;
    }
    if ((opt_for == NULL) == (opt_text_dim < 0)) {
      g_printerr ("give one of --for TEXT.gguf or --text-dim D\n");
      return 2;
    }
    ok = npu_model_gen_mmproj_preset (&p, proj, opt_size ? opt_size : "tiny",
        &error)
        && parse_common (&p.wtype, &p.seed, &error);
    if (ok) {
      override (&p.n_layers, opt_layers);
      override (&p.dim, opt_dim);
      override (&p.ff, opt_ff);
      override (&p.n_heads, opt_heads);
      override (&p.image_size, opt_image_size);
      override (&p.patch, opt_patch);
      override (&p.scale_factor, opt_scale);
      override (&p.text_dim, opt_text_dim);
      override (&p.n_wa_pattern, opt_wa_pattern);
      override (&p.window_size, opt_window);
      p.mxfp4_values = opt_mxfp4_values;
      p.extra_block = opt_extra_block;
      /* without --act, the preset's (Qwen's: what the converter writes) */
      if (opt_act != NULL && strcmp (opt_act, "gelu") == 0)
        p.act = NPU_MODEL_ACT_GELU;
      else if (opt_act != NULL && strcmp (opt_act, "silu") == 0)
        p.act = NPU_MODEL_ACT_SILU;
      else if (opt_act != NULL && strcmp (opt_act, "quick") == 0)
        p.act = NPU_MODEL_ACT_GELU_QUICK;
      else if (opt_act != NULL) {
        g_printerr ("--act must be gelu, silu or quick\n");
        return 2;
      }
      ok = npu_model_gen_write_mmproj (&p, opt_for, opt_out, &stats, &error);
    }
  }
  if (!ok) {
    g_printerr ("npu-model-gen: %s\n", error->message);
    g_error_free (error);
    return 1;
  }
  report (&stats, t0);
  return 0;
}
