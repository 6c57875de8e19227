/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: unit tests of the bytes the language model's forward pass
 * counts (NpuLlmStats.bytes), against the seed's formula for a decoded
 * token, P b_weight + 2 L H S b_kv, worked out from the file's own tensor
 * table and metadata (tests/npullmbytes.h states the layout's overheads) */
#include "core/models/npullm.h"
#include "core/device/npubackend.h"
#include "core/formats/npugguf.h"
#include "../tools/npumodelgen.h"
#include "../npullmbytes.h"
#include "../npullmeval.h"

#include <glib/gstdio.h>
#include <string.h>

static gchar *tmpdir;
static NpuDevice *device;
static NpuQueue *queue;

/* Evaluates @n tokens on the queue (two threads); returns their bytes */
static void
eval (NpuLlmContext * ctx, const gint32 * tokens, gsize n, NpuBytes * out)
{
  NpuLlmStats before, after;

  npu_llm_context_get_stats (ctx, &before);
  npu_test_eval_on_queue (queue, ctx, tokens, NULL, n);
  npu_llm_context_get_stats (ctx, &after);
  npu_bytes_diff (out, &after.bytes, &before.bytes);
}

#define PROMPT 13

static void
check_token (NpuModelArch arch, guint32 wtype, gboolean tied,
    NpuKvType kv_type)
{
  NpuTextModelParams p;
  NpuLlmContextParams cp;
  NpuLlmModel *model;
  NpuLlmContext *ctx;
  NpuGguf *gguf;
  NpuBytes prompt, token;
  GError *error = NULL;
  gchar *path = g_build_filename (tmpdir, "model.gguf", NULL);
  gint32 tokens[PROMPT + 1];
  guint64 L, S = PROMPT, kv_row;
  guint i;

  g_assert_true (npu_model_gen_text_preset (&p, arch, "tiny", &error));
  p.wtype = wtype;
  p.tied = tied;
  p.seed = 3;
  g_assert_true (npu_model_gen_write_text (&p, path, NULL, &error));
  g_assert_no_error (error);
  model = npu_llm_model_new_from_file (path, NPU_LLM_LOAD_IN_PLACE, &error);
  g_assert_no_error (error);
  gguf = npu_gguf_open (path, &error);
  g_assert_no_error (error);

  npu_llm_context_params_init (&cp);
  cp.n_ctx = 64;
  cp.kv_type = kv_type;
  ctx = npu_llm_context_new (model, &cp, &error);
  g_assert_no_error (error);
  for (i = 0; i < G_N_ELEMENTS (tokens); i++)
    tokens[i] = (gint32) ((i * 37u + 11u) % p.vocab);
  eval (ctx, tokens, PROMPT, &prompt);
  eval (ctx, tokens + PROMPT, 1, &token);

  kv_row = npu_ref_kv_row_bytes (gguf, kv_type == NPU_KV_Q8_0, &L);

  g_assert_cmpuint (token.read[NPU_BYTES_WEIGHTS], ==,
      npu_ref_token_weight_bytes (gguf));
  /* the token at position S reads the S rows before it from the cache
   * (its own from scratch) and stores its own */
  g_assert_cmpuint (token.read[NPU_BYTES_KV], ==, 2 * L * S * kv_row);
  g_assert_cmpuint (token.written[NPU_BYTES_KV], ==, 2 * L * kv_row);
  g_assert_cmpuint (token.read[NPU_BYTES_TOKENS], ==, 4);
  g_assert_cmpuint (token.written[NPU_BYTES_WEIGHTS], ==, 0);
  g_assert_cmpuint (token.read[NPU_BYTES_FRAME], ==, 0);
  /* the prompt: one chunk, so the matrices once, a row per token of
   * token_embd; its rows attend only to one another (from scratch) */
  g_assert_cmpuint (prompt.read[NPU_BYTES_WEIGHTS], ==,
      npu_ref_token_weight_bytes (gguf) + (PROMPT - 1) *
      (npu_gguf_find_tensor (gguf, "token_embd.weight")->n_bytes / p.vocab));
  g_assert_cmpuint (prompt.read[NPU_BYTES_KV], ==, 0);
  g_assert_cmpuint (prompt.written[NPU_BYTES_KV], ==, 2 * L * S * kv_row);
  g_assert_cmpuint (prompt.read[NPU_BYTES_TOKENS], ==, 4 * PROMPT);

  npu_llm_context_free (ctx);
  npu_llm_model_free (model);
  npu_gguf_free (gguf);
  g_unlink (path);
  g_free (path);
}

/* MXFP4 matrices in place, Q8_0 token_embd and logits (llama.cpp's
 * MXFP4 files); F16 KV */
static void
test_token_mxfp4 (void)
{
  check_token (NPU_MODEL_ARCH_LLAMA, NPU_GGML_TYPE_MXFP4, FALSE, NPU_KV_F16);
}

/* qwen3 (q and k norms, heads of 32): F16 matrices converted to MXFP4
 * at load, a tied F16 token_embd (the logits' matrix converted too, its
 * row read in F16); Q8_0 KV */
static void
test_token_f16_tied (void)
{
  check_token (NPU_MODEL_ARCH_QWEN3, NPU_GGML_TYPE_F16, TRUE, NPU_KV_Q8_0);
}

/* qwen2: the q, k, v biases are read too */
static void
test_token_qwen2 (void)
{
  check_token (NPU_MODEL_ARCH_QWEN2, NPU_GGML_TYPE_Q8_0, FALSE, NPU_KV_F16);
}

/* gpt-oss's mixture of experts, from the file's tensor table: a decoded
 * token reads, per layer, the router (F32, with its bias) and the three
 * matrices and biases of @k experts, 1 / expert_count of each _exps
 * tensor per expert; every other tensor as npu_ref_token_weight_bytes()
 * reads it (F32 vectors, MXFP4 matrices 17 bytes per 32, Q8_0 logits in
 * place, one row of token_embd) */
static guint64
moe_token_weight_bytes (const NpuGguf * gguf, guint64 k)
{
  gboolean tied = npu_gguf_find_tensor (gguf, "output.weight") == NULL;
  guint64 sum = 0;
  guint i;

  g_assert_false (tied);
  for (i = 0; i < npu_gguf_n_tensors (gguf); i++) {
    const NpuGgufTensor *t = npu_gguf_get_tensor (gguf, i);
    guint64 n = t->ne[0] * (t->n_dims > 1 ? t->ne[1] : 1);

    if (g_str_equal (t->name, "token_embd.weight"))
      sum += t->n_bytes / t->ne[1];
    else if (strstr (t->name, "_exps.weight"))
      sum += t->n_bytes / t->ne[2] * k;
    else if (strstr (t->name, "_exps.bias"))
      sum += n * 4 / t->ne[1] * k;
    else if (strstr (t->name, "ffn_gate_inp."))
      sum += n * 4;
    else if (t->n_dims == 1)
      sum += n * 4;
    else                        /* a matrix, read as stored */
      sum += t->n_bytes;
  }
  return sum;
}

/* A decoded token of a generated gpt-oss model reads exactly its top-k
 * experts of every layer, never all of them; a prompt's chunk reads each
 * expert at most once */
static void
test_token_moe (void)
{
  NpuTextModelParams p;
  NpuLlmContextParams cp;
  NpuLlmModel *model;
  NpuLlmContext *ctx;
  NpuGguf *gguf;
  NpuBytes prompt, token;
  GError *error = NULL;
  gchar *path = g_build_filename (tmpdir, "moe.gguf", NULL);
  gint32 tokens[PROMPT + 1];
  guint64 used, n_expert;
  guint i;

  g_assert_true (npu_model_gen_text_preset (&p, NPU_MODEL_ARCH_GPT_OSS,
          "tiny", &error));
  p.seed = 5;
  g_assert_true (npu_model_gen_write_text (&p, path, NULL, &error));
  g_assert_no_error (error);
  model = npu_llm_model_new_from_file (path, NPU_LLM_LOAD_IN_PLACE, &error);
  g_assert_no_error (error);
  gguf = npu_gguf_open (path, &error);
  g_assert_no_error (error);
  used = npu_ref_gguf_u32 (gguf, "expert_used_count", -1);
  n_expert = npu_ref_gguf_u32 (gguf, "expert_count", -1);
  g_assert_cmpuint (used, <, n_expert);

  npu_llm_context_params_init (&cp);
  cp.n_ctx = 64;
  ctx = npu_llm_context_new (model, &cp, &error);
  g_assert_no_error (error);
  for (i = 0; i < G_N_ELEMENTS (tokens); i++)
    tokens[i] = (gint32) ((i * 37u + 11u) % p.vocab);
  eval (ctx, tokens, PROMPT, &prompt);
  eval (ctx, tokens + PROMPT, 1, &token);

  g_assert_cmpuint (token.read[NPU_BYTES_WEIGHTS], ==,
      moe_token_weight_bytes (gguf, used));
  g_assert_cmpuint (token.read[NPU_BYTES_WEIGHTS], <,
      moe_token_weight_bytes (gguf, n_expert));
  /* the prompt's rows, gathered expert by expert: each expert read once
   * at most, with a row of token_embd per token */
  g_assert_cmpuint (prompt.read[NPU_BYTES_WEIGHTS], <=,
      moe_token_weight_bytes (gguf, n_expert) + (PROMPT - 1) *
      (npu_gguf_find_tensor (gguf, "token_embd.weight")->n_bytes / p.vocab));

  npu_llm_context_free (ctx);
  npu_llm_model_free (model);
  npu_gguf_free (gguf);
  g_unlink (path);
  g_free (path);
}

int
main (int argc, char **argv)
{
  GError *error = NULL;
  int ret;

  g_test_init (&argc, &argv, NULL);
  tmpdir = g_dir_make_tmp ("test-llmbytes-XXXXXX", &error);
  g_assert_no_error (error);
  device = npu_device_new_cpu (2);
  queue = npu_queue_new (device, "test-llmbytes");
  g_test_add_func ("/llmbytes/token-mxfp4", test_token_mxfp4);
  g_test_add_func ("/llmbytes/token-f16-tied", test_token_f16_tied);
  g_test_add_func ("/llmbytes/token-qwen2", test_token_qwen2);
  g_test_add_func ("/llmbytes/token-moe", test_token_moe);
  ret = g_test_run ();
  npu_queue_free (queue);
  npu_device_unref (device);
  g_rmdir (tmpdir);
  g_free (tmpdir);
  return ret;
}
