/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what npullm.c shares with npullm-moe.c: the mixture-of-experts
 * feed-forward of gpt-oss (internal)
 *
 * llama.cpp's build_moe_ffn() with LLM_FFN_SWIGLU_OAI_MOE and
 * LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, per token x (already
 * normed):
 *
 *   l      = W_r x + b_r                      (n_expert router logits)
 *   S      = the n_used largest of l          (a tie goes to the lower index)
 *   w_e    = softmax over S of l_e            (the selected logits only)
 *   g_e    = min (Wg_e x + bg_e, 7)
 *   u_e    = clamp (Wu_e x + bu_e, -7, 7)
 *   out    = sum_{e in S} w_e (Wd_e (g_e sigmoid (1.702 g_e) (u_e + 1)) + bd_e)
 *
 * The router is computed in double from F32 weights (a routing decision
 * must not flip on the activations' int8 rounding); the experts are
 * rows of the 3-D MXFP4 tensors (ggml's ne = [k, rows, n_expert]) read
 * in place from wherever the lookup put them: each expert is a view of
 * its rows, never a copy nor a repack, so a token reads only the bytes
 * of the experts it was routed to.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_LLM_PRIVATE_H__
#define __NPU_LLM_PRIVATE_H__

#include <glib.h>
#include "npullm.h"

G_BEGIN_DECLS

/* gpt-oss's clamped SwiGLU (the OpenAI reference's limit and alpha) */
#define NPU_LLM_MOE_SWIGLU_LIMIT 7.0f
#define NPU_LLM_MOE_SWIGLU_ALPHA 1.702f

typedef struct
{
  guint n_expert, n_used, n_embd, n_ff;
  const float *router;          /* n_expert x n_embd */
  float *router_owned;          /* @router when converted from F16/BF16 */
  const float *router_b;        /* n_expert */
  NpuMxfp4Matrix *gate, *up, *down;     /* n_expert views each */
  /* each one's slice preparation, if its source writes it on first use
   * (NpuTensorView.prepare) */
  NpuTensorPrepareFunc prepare[3];
  gpointer prepare_data[3];
  const float *gate_b, *up_b;   /* n_expert x n_ff */
  const float *down_b;          /* n_expert x n_embd */
} NpuLlmMoe;

/* Scratch of one context for chunks of up to n_batch rows */
typedef struct
{
  gsize n_batch;
  float *logits;                /* n_batch x n_expert */
  guint *sel;                   /* n_batch x n_used expert ids */
  float *w;                     /* n_batch x n_used weights */
  guint *rows;                  /* rows routed to the expert at hand */
  float *wrow;                  /* their weights */
  float *xe, *ye;               /* n_batch x n_embd: its inputs, outputs */
  float *gate, *up;             /* n_batch x n_ff */
} NpuLlmMoeScratch;

/* FALSE, with @error naming the tensor, when @v's bytes (its size, 0 if
 * unknown) are fewer than its shape @need */
G_GNUC_INTERNAL
gboolean npu_llm_check_view_size (const gchar * name,
    const NpuTensorView * v, gsize need, GError ** error);

/* Layer @il's router and experts (blk.N.ffn_gate_inp.{weight,bias},
 * ffn_{gate,up,down}_exps.{weight,bias}); an error names the tensor.
 * Returns the bytes of one expert's three matrices in @expert_bytes. */
G_GNUC_INTERNAL
gboolean npu_llm_moe_load (NpuLlmMoe * moe, const NpuLlmHParams * hp,
    NpuTensorLookup lookup, gpointer user_data, guint il,
    guint64 * expert_bytes, GError ** error);
G_GNUC_INTERNAL
void npu_llm_moe_clear (NpuLlmMoe * moe);

/* Its size in bytes (for the context's stats) */
G_GNUC_INTERNAL
gsize npu_llm_moe_scratch_init (NpuLlmMoeScratch * s,
    const NpuLlmHParams * hp, gsize n_batch);
G_GNUC_INTERNAL
void npu_llm_moe_scratch_clear (NpuLlmMoeScratch * s);

/* The n_used experts of each of @n rows of @x (n_embd values each) and
 * their weights, into s->sel and s->w (row t's at t * n_used) */
G_GNUC_INTERNAL
void npu_llm_moe_route (const NpuLlmMoe * moe, const float *x, gsize n,
    NpuLlmMoeScratch * s);

/* out[n x n_embd] = the layer's output for @n <= n_batch rows of @x; adds
 * the router's and the routed experts' weights (each once a chunk) and
 * the products' activations to @bytes */
G_GNUC_INTERNAL
void npu_llm_moe_forward (const NpuLlmMoe * moe, NpuTask * task,
    NpuMatmulPrecision precision, const float *x, gsize n, float *out,
    NpuLlmMoeScratch * s, NpuBytes * bytes);

G_END_DECLS

#endif /* __NPU_LLM_PRIVATE_H__ */
