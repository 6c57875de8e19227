/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: Whisper-style audio encoder + projector of a llama.cpp audio
 * "mmproj" GGUF
 *
 * The audio half of an audio-language model, in the layout llama.cpp's
 * converters write (general.architecture "clip", clip.has_audio_encoder,
 * clip.audio.* keys, a.* and mm.a.* tensors; docs/audio-encoder.md), as
 * llama.cpp's tools/mtmd/models/whisper-enc.cpp evaluates it:
 *
 *   log-mel [n_mels x n_frames]
 *     -> conv1d (kernel 3, stride 1, pad 1) + bias, GELU (erf)
 *     -> conv1d (kernel 3, stride 2, pad 1) + bias, GELU (erf)
 *        = n_frames / 2 positions
 *     -> + a.position_embd (the first n_frames / 2 rows)
 *     -> block_count pre-norm blocks (LayerNorm, MHA with q and v biases and
 *        no k bias, GELU (erf) FFN)
 *     -> projector:
 *        "qwen2a":   average pool (2, stride 2), post LayerNorm,
 *                    mm.a.fc (weight + bias)
 *        "ultravox": post LayerNorm, stack clip.audio.projector.stack_factor
 *                    consecutive positions into one row (zero padded at the
 *                    end), RMS norm * mm.a.norm_pre, mm.a.mlp.1, SwiGLU with
 *                    the second half through SiLU, RMS norm * mm.a.norm_mid,
 *                    mm.a.mlp.2
 *
 * The tensor-lookup callback and view are the vision encoder's
 * (NpuTensorLookup / NpuTensorView, npuvit.h), so weights from a
 * file and from mxfp4weights arrive the same way to both encoders.
 *
 * Errors are in the NPU_VIT_ERROR domain (npuvit.h): NOT_MMPROJ (not an
 * mmproj, or no audio encoder: a vision-only mmproj or a text model),
 * MISSING, SHAPE, UNSUPPORTED (the projector type is named); a cancelled
 * task is NPU_FENCE_ERROR_CANCELLED.
 *
 * All scratch memory is allocated by npu_audio_enc_new*(): encoding does
 * not allocate.  Encode one chunk at a time per NpuAudioEnc.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_AUDIO_ENC_H__
#define __NPU_AUDIO_ENC_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/device/npubackend.h"
#include "core/device/npubuffer.h"
#include "core/formats/npugguf.h"
#include "core/cpu/npumatmul.h"
#include "npuvit.h"

G_BEGIN_DECLS

typedef struct _NpuAudioEnc NpuAudioEnc;

typedef enum
{
  NPU_AUDIO_PROJECTOR_QWEN2A,   /* "qwen2a": Qwen2-Audio, Qwen2.5-Omni */
  NPU_AUDIO_PROJECTOR_ULTRAVOX, /* "ultravox" */
} NpuAudioProjector;

/* Hyper-parameters come from @gguf (read during the call only); tensors
 * from @lookup, which is called during the call only.  With @lookup NULL
 * the tensors are those of @gguf, which must then outlive the encoder. */
NPU_API
NpuAudioEnc    *npu_audio_enc_new             (const NpuGguf *gguf,
                                               NpuTensorLookup lookup,
                                               gpointer user_data,
                                               GError **error);
/* Opens and maps @path; the encoder keeps the mapping. */
NPU_API
NpuAudioEnc    *npu_audio_enc_new_from_file   (const gchar *path,
                                               GError **error);
NPU_API
void            npu_audio_enc_free            (NpuAudioEnc *enc);

NPU_API
NpuAudioProjector npu_audio_enc_get_projector (const NpuAudioEnc *enc);
/* Mel bins per frame: 80 or 128, clip.audio.num_mel_bins */
NPU_API
guint           npu_audio_enc_get_n_mels      (const NpuAudioEnc *enc);
/* 16000: the rate the log-mel front end must feed */
NPU_API
guint           npu_audio_enc_get_sample_rate (const NpuAudioEnc *enc);
/* 3000 = 30 s of 10 ms mel frames (what llama.cpp encodes per chunk),
 * or fewer if the position table is shorter */
NPU_API
guint           npu_audio_enc_get_max_frames  (const NpuAudioEnc *enc);
/* Tokens out of @n_frames mel frames (0 if @n_frames is odd, zero or above
 * max_frames): n_frames / 4 for qwen2a, ceil (n_frames / 2 / stack) for
 * ultravox */
NPU_API
guint           npu_audio_enc_get_n_tokens    (const NpuAudioEnc *enc,
                                               guint n_frames);
/* Features per output token: must equal the text model's n_embd */
NPU_API
guint           npu_audio_enc_get_out_dim     (const NpuAudioEnc *enc);
/* Encoder width and depth, and ultravox's stack factor (1 for qwen2a) */
NPU_API
guint           npu_audio_enc_get_dim         (const NpuAudioEnc *enc);
NPU_API
guint           npu_audio_enc_get_n_layers    (const NpuAudioEnc *enc);
NPU_API
guint           npu_audio_enc_get_stack_factor (const NpuAudioEnc *enc);
/* Activations of the matrix products (npumatmul.h): ACCURATE (default,
 * ~16 bits) or FAST (int8, as llama.cpp).  Not while an encode runs. */
NPU_API
void            npu_audio_enc_set_precision   (NpuAudioEnc *enc,
                                               NpuMatmulPrecision precision);
NPU_API
NpuMatmulPrecision npu_audio_enc_get_precision (const NpuAudioEnc *enc);
/* Bytes of weights owned (converted) and borrowed (used in place), and of
 * the scratch buffers */
NPU_API
void            npu_audio_enc_get_memory      (const NpuAudioEnc *enc,
                                               gsize *owned, gsize *borrowed,
                                               gsize *scratch);

/* What npu_audio_enc_encode() has moved so far, a running count
 * (npubytes.h), as npu_vit_get_bytes() counts it; the position table is
 * read for the rows a chunk uses only.  A chunk's bytes are the
 * difference of two counts around its encode. */
NPU_API
void            npu_audio_enc_get_bytes       (const NpuAudioEnc *enc,
                                               NpuBytes *bytes);

/* @mel: n_mels rows of n_frames floats (mel-bin major, as whisper and
 * llama.cpp lay it out), already log-mel normalised
 * ((log10 clamped at max - 8) + 4) / 4.  @n_frames: even, 2 ..
 * max_frames; a window shorter than max_frames uses the first positions
 * and gives fewer tokens.  @out: n_tokens rows of out_dim floats.
 * @task may be NULL (runs on the calling thread); otherwise it must be the
 * running task and the work is spread over its device's threads.  Fails
 * if @n_frames is out of range (NPU_VIT_ERROR_SHAPE) or the task is
 * cancelled (NPU_FENCE_ERROR_CANCELLED). */
NPU_API
gboolean        npu_audio_enc_encode          (NpuAudioEnc *enc,
                                               NpuTask *task,
                                               const float *mel,
                                               guint n_frames, float *out,
                                               GError **error);

/**
 * NpuAudioEncProgram:
 *
 * The encoder built for a device and one window of @n_frames mel frames,
 * as #NpuVitProgram is for the vision encoder: weights imported once,
 * scratch on the device, npu_audio_enc_encode()'s arithmetic recorded once
 * and replayed by each submit.  Write the mel (npu_audio_enc_encode()'s
 * input layout) into the input buffer, submit, read the n_tokens x out_dim
 * tokens from the output buffer once the fence has signalled.  The
 * encoder must outlive its programs.
 */
typedef struct _NpuAudioEncProgram NpuAudioEncProgram;

NPU_API
NpuAudioEncProgram *npu_audio_enc_program_new (NpuAudioEnc *enc,
                                               NpuDevice *device,
                                               guint n_frames,
                                               GError **error);
NPU_API
void            npu_audio_enc_program_free    (NpuAudioEncProgram *prog);
/* n_mels x n_frames floats */
NPU_API
NpuBuffer      *npu_audio_enc_program_get_input  (NpuAudioEncProgram *prog);
/* n_tokens x out_dim floats */
NPU_API
NpuBuffer      *npu_audio_enc_program_get_output (NpuAudioEncProgram *prog);
NPU_API
NpuFence       *npu_audio_enc_program_submit  (NpuAudioEncProgram *prog,
                                               NpuQueue *queue,
                                               NpuFence * const *in_fences,
                                               guint n_in_fences);
/* What one submit moves, counted once as the program was recorded, as
 * npu_vit_program_get_bytes() */
NPU_API
void            npu_audio_enc_program_get_bytes
                                              (NpuAudioEncProgram *prog,
                                               NpuBytes *bytes);
NPU_API
gsize           npu_audio_enc_program_get_bytes_copied
                                              (NpuAudioEncProgram *prog);

G_END_DECLS

#endif /* __NPU_AUDIO_ENC_H__ */
