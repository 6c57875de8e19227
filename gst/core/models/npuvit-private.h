/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the vision encoder's state, shared by its CPU path (npuvit.c)
 * and its device program (npuvit-ops.c) (internal to the core)
 */
#ifndef __NPU_VIT_PRIVATE_H__
#define __NPU_VIT_PRIVATE_H__

#include "npuvit.h"
#include "npuencoder.h"

G_BEGIN_DECLS

typedef NpuWeightMatrix Matrix;
typedef NpuEncLayer Layer;

/* A Qwen2-VL / Qwen2.5-VL block (npuvit-qwen.c): LayerNorm (w, b) or
 * RMSNorm (b NULL); gate NULL (qwen2vl): ffn_down (act (ffn_up)), else
 * ffn_down (act (ffn_gate) * ffn_up) */
typedef struct
{
  float *ln1_w, *ln1_b, *ln2_w, *ln2_b;
  NpuWeightMatrix q, k, v, o, up, gate, down;
  float *q_b, *k_b, *v_b, *o_b, *up_b, *gate_b, *down_b;
  gboolean has_gate;
  gboolean full;                /* attends to every patch, not its window */
} NpuVitQwenLayer;

/* The Qwen merger's layout (npuvit-qwen.c), set by the patch grid
 * (npu_vit_set_patch_grid (); the file's square image at load time) */
typedef struct
{
  gboolean rms;                 /* qwen2.5vl: RMSNorm and SwiGLU */
  guint n_wa_pattern;           /* 0: no window attention */
  guint window;                 /* window side in merged tokens; 0: none */
  guint ph, pw;                 /* the patch grid: rows, columns (even) */
  guint cap;                    /* patches the scratch buffers hold */
  NpuVitQwenLayer *layers;
  /* sequence position -> patch (row-major); output token (row-major over
   * the merged grid) -> merged unit of the sequence */
  guint *order, *unit_of;
  /* window of each sequence position, and where each window starts
   * (n_windows + 1 entries, the last n_patches) */
  guint *win_of, *win_start;
  guint n_windows;
  /* rotary cos / sin of each sequence position, head_dim / 2 each */
  float *cos, *sin;
  float *pin;                   /* the patches in sequence order */
  float *gate;                  /* n_patches x ff: the gate's products */
} NpuVitQwen;

struct _NpuVit
{
  NpuGguf *gguf;                /* npu_vit_new_from_file () only */

  NpuVitProjector projector;
  guint image_size, patch, side, n_patches, patch_dim;
  guint dim, ff, n_layers, out_dim;
  guint scale, grid, n_tokens;
  guint n_pos;                  /* encoder tokens: patches (+ class token) */
  guint first;                  /* 1 with a class token, else 0 */
  gfloat mean[3], std[3];

  /* patch embedding: MXFP4 when 3 p p is a multiple of 32, else F32 */
  gboolean patch_mxfp4;
  Matrix patch_w;
  float *patch_w32;             /* dim x patch_dim */
  float *patch_b, *pos, *class_embd;
  float *pre_ln_w, *pre_ln_b, *post_ln_w, *post_ln_b;
  Layer *layers;
  Matrix mm0, mm2, fc;
  float *mm0_b, *mm2_b;
  /* gemma3: mm.soft_emb_norm (dim) and mm.input_projection transposed
   * (out_dim rows of dim), F32 */
  float *gemma_norm, *gemma_proj;

  NpuVitQwen qwen;              /* qwen2vl_merger, qwen2.5vl_merger */

  /* the blocks' shape and scratch; x and proj, allocated once */
  NpuEncBlocks blocks;
  float *x, *proj;

  gsize owned_bytes, borrowed_bytes, scratch_bytes;
};

/* npuvit-qwen.c: everything after the hyper-parameters, for the Qwen
 * projectors (the kernels, blocks, merger, tables and scratch) */
G_GNUC_INTERNAL
gboolean npu_vit_qwen_load (NpuVit * vit, NpuEncLoader * ld, GError ** error);
G_GNUC_INTERNAL
void npu_vit_qwen_clear (NpuVit * vit);
/* npu_vit_set_patch_grid () for the Qwen projectors */
G_GNUC_INTERNAL
gboolean npu_vit_qwen_set_grid (NpuVit * vit, guint height, guint width,
    GError ** error);
G_GNUC_INTERNAL
gboolean npu_vit_qwen_encode (NpuVit * vit, NpuTask * task,
    const float *patches, float *out, GError ** error);

/* npuvit-gemma3.c: Gemma 3's projector (pooling, norm, projection) */
G_GNUC_INTERNAL
gboolean npu_vit_gemma3_load (NpuVit * vit, NpuEncLoader * ld,
    GError ** error);
G_GNUC_INTERNAL
void npu_vit_gemma3_clear (NpuVit * vit);
G_GNUC_INTERNAL
void npu_vit_gemma3_project (NpuVit * vit, NpuTask * task,
    const float *patches, float *out);

G_END_DECLS

#endif /* __NPU_VIT_PRIVATE_H__ */
