/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the vision encoder's state, shared by its CPU path (npuvit.c)
 * and its device program (npuvit-ops.c) (internal to the core)
 */
#ifndef __NPU_VIT_PRIVATE_H__
#define __NPU_VIT_PRIVATE_H__

#include "npuvit.h"
#include "npuencoder.h"

G_BEGIN_DECLS

typedef NpuEncMatrix Matrix;
typedef NpuEncLayer Layer;

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

  /* the blocks' shape and scratch; x and proj, allocated once */
  NpuEncBlocks blocks;
  float *x, *proj;

  gsize owned_bytes, borrowed_bytes, scratch_bytes;
};

G_END_DECLS

#endif /* __NPU_VIT_PRIVATE_H__ */
