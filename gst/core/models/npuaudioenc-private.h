/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the audio encoder's state, shared by its CPU path
 * (npuaudioenc.c) and its device program (npuaudioenc-ops.c) (internal to
 * the core)
 */
#ifndef __NPU_AUDIO_ENC_PRIVATE_H__
#define __NPU_AUDIO_ENC_PRIVATE_H__

#include "npuaudioenc.h"
#include "npuencoder.h"

G_BEGIN_DECLS

/* ggml_rms_norm's epsilon in the ultravox projector (whisper-enc.cpp) */
#define ULTRAVOX_RMS_EPS 1e-6f

/* A conv1d kernel of ggml ne [3, in, out] as a matrix of out rows of
 * 3 in weights (input channel major, then tap): MXFP4 in place when the
 * file has it, else an F32 copy, as npuvit.c does for its patch
 * convolution (the first layers read as stored are what keeps us close to
 * llama.cpp). */
typedef struct
{
  gboolean mxfp4;
  NpuWeightMatrix m;
  float *w32;
  float *b;
} Conv;

struct _NpuAudioEnc
{
  NpuGguf *gguf;                /* npu_audio_enc_new_from_file () only */

  NpuAudioProjector projector;
  guint n_mels, dim, ff, n_layers, out_dim;
  guint n_ctx;                  /* rows of the position table */
  guint max_frames, max_pos;
  guint stack;                  /* ultravox: positions per token, else 1 */
  guint hidden;                 /* ultravox: mm.a.mlp.1's output size */

  Conv conv1, conv2;
  float *pos;                   /* n_ctx x dim */
  float *pre_ln_w, *pre_ln_b, *post_ln_w, *post_ln_b;
  NpuEncLayer *layers;
  /* qwen2a */
  NpuWeightMatrix fc;
  float *fc_b;
  /* ultravox */
  float *norm_pre_w, *norm_mid_w;
  NpuWeightMatrix mlp1, mlp2;

  /* scratch, allocated once */
  NpuEncBlocks blocks;
  float *col;                   /* im2col rows of either convolution */
  float *h1;                    /* conv1's output, max_frames x dim */
  float *x;                     /* the residual stream, stacked in place */
  float *p1, *p2;               /* ultravox: hidden and hidden / 2 wide */

  gsize owned_bytes, borrowed_bytes, scratch_bytes;
};

G_END_DECLS

#endif /* __NPU_AUDIO_ENC_PRIVATE_H__ */
