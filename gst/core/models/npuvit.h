/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: vision encoder (ViT + projector) of a llama.cpp "mmproj" GGUF
 *
 * The image half of a CLIP/SigLIP-style vision-language model, in the
 * layout llama.cpp's mmproj converters write (general.architecture "clip",
 * clip.vision.* keys, v.* and mm.* tensors; docs/vision-encoder.md):
 *
 *   patches [n_patches x 3 p p]
 *     -> patch embedding (the p x p stride-p convolution as one matrix
 *        product) + bias + learned position embeddings
 *     -> optional class token (v.class_embd), optional pre layer norm
 *     -> block_count pre-norm blocks:
 *          x += attn_out (MHA (LN1 (x)))      softmax scale 1/sqrt(head_dim)
 *          x += ffn_down (act (ffn_up (LN2 (x))))
 *     -> optional post layer norm
 *     -> projector: "mlp" (LLaVA):       mm.2 (GELU (mm.0 (x)))
 *                   "idefics3" (SmolVLM): pixel shuffle by scale_factor,
 *                                         then mm.model.fc (no bias)
 *
 * "qwen2vl_merger" and "qwen2.5vl_merger" (Qwen2-VL, Qwen2.5-VL) are
 * another graph: 2-D rotary embeddings instead of position embeddings,
 * window attention (2.5), 2 x 2 patches merged into one token by mm.0 and
 * mm.2; npuvit-qwen.c gives it, on the CPU only (no device program).
 *
 * act is GELU (tanh form) with clip.use_gelu, SiLU with clip.use_silu,
 * quick GELU (x sigmoid (1.702 x)) otherwise, as llama.cpp's clip.cpp picks.
 *
 * Every 2-D weight matrix is multiplied in MXFP4 (npumatmul.h): MXFP4
 * tensors are used in place, F32/F16/BF16/Q8_0 ones are converted once at
 * load time.  The patch embedding is the exception: an MXFP4 kernel is
 * used in place, any other is kept as an F32 copy and multiplied by a
 * plain F32 product (it is ~1 % of the work, and converting the first
 * layer is what moved our output furthest from llama.cpp's, which reads
 * the kernel as stored; MXFP4 would also need 3 p p to be a multiple of
 * 32, which p = 14 does not give).  Norm weights, biases and position
 * embeddings are F32 copies.
 *
 * All scratch memory is allocated by npu_vit_new*(): encoding a frame does
 * not allocate (the attention's per-thread score rows grow once if a task
 * has more threads than the machine has CPUs).  An NpuVit is read-only
 * once built, except for that scratch: encode one frame at a time per
 * NpuVit.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_VIT_H__
#define __NPU_VIT_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/device/npubackend.h"
#include "core/device/npubuffer.h"
#include "core/device/npubytes.h"
#include "core/formats/npugguf.h"
#include "core/device/nputensorview.h"
#include "core/cpu/npumatmul.h"
#include "npuviterror.h"

G_BEGIN_DECLS

typedef enum
{
  NPU_VIT_PROJECTOR_MLP,        /* "mlp": LLaVA 1.5 */
  NPU_VIT_PROJECTOR_IDEFICS3,   /* "idefics3": SmolVLM, Idefics3 */
  NPU_VIT_PROJECTOR_QWEN2VL,    /* "qwen2vl_merger": Qwen2-VL */
  NPU_VIT_PROJECTOR_QWEN25VL,   /* "qwen2.5vl_merger": Qwen2.5-VL */
  NPU_VIT_PROJECTOR_GEMMA3,     /* "gemma3": Gemma 3 */
} NpuVitProjector;

typedef struct _NpuVit NpuVit;

/* Hyper-parameters come from @gguf (read during the call only); tensors
 * from @lookup, which is called during the call only.  With @lookup NULL
 * the tensors are those of @gguf, which must then outlive the NpuVit. */
NPU_API
NpuVit         *npu_vit_new              (const NpuGguf *gguf,
                                          NpuTensorLookup lookup,
                                          gpointer user_data,
                                          GError **error);
/* Opens and maps @path; the NpuVit keeps the mapping. */
NPU_API
NpuVit         *npu_vit_new_from_file    (const gchar *path, GError **error);
NPU_API
void            npu_vit_free             (NpuVit *vit);

NPU_API
NpuVitProjector npu_vit_get_projector    (const NpuVit *vit);
/* Square input images of image_size x image_size pixels (for the Qwen
 * mergers the size at load time, npu_vit_set_patch_grid () changes it) */
NPU_API
guint           npu_vit_get_image_size   (const NpuVit *vit);
NPU_API
guint           npu_vit_get_patch_size   (const NpuVit *vit);
/* (image_size / patch_size)^2, or the Qwen grid's patches */
NPU_API
guint           npu_vit_get_n_patches    (const NpuVit *vit);
/* 3 * patch_size^2: floats per patch in npu_vit_encode()'s input */
NPU_API
guint           npu_vit_get_patch_dim    (const NpuVit *vit);
/* Per-channel (R, G, B) normalisation: (pixel / 255 - mean) / std */
NPU_API
void            npu_vit_get_mean_std     (const NpuVit *vit, gfloat mean[3],
                                          gfloat std[3]);
/* Output tokens per image and the grid they form (w x h, row-major):
 * the patch grid for mlp, the grid after the pixel shuffle for idefics3,
 * the grid of 2 x 2 patches for the Qwen mergers */
NPU_API
guint           npu_vit_get_n_tokens     (const NpuVit *vit);
NPU_API
void            npu_vit_get_token_grid   (const NpuVit *vit, guint *width,
                                          guint *height);
/* Features per output token: must equal the text model's embedding size */
NPU_API
guint           npu_vit_get_out_dim      (const NpuVit *vit);
NPU_API
guint           npu_vit_get_dim          (const NpuVit *vit);
NPU_API
guint           npu_vit_get_n_layers     (const NpuVit *vit);
/* Bytes of weights owned (converted) and borrowed (used in place), and of
 * the scratch buffers */
NPU_API
void            npu_vit_get_memory       (const NpuVit *vit, gsize *owned,
                                          gsize *borrowed, gsize *scratch);

/* Qwen mergers (qwen2vl_merger, qwen2.5vl_merger) only: encode images of
 * @height x @width patches from now on, both even (the merger's 2 x 2
 * units), as Qwen's processor gives each image its own grid
 * (npu_vit_smart_resize () / patch size).  The file's square image_size is
 * the grid at load time.  n_patches, n_tokens ((height / 2) (width / 2))
 * and the token grid follow; the scratch grows when the grid has more
 * patches than any before (the allocation is here, not in
 * npu_vit_encode ()).  Not while an encode runs.  Refused
 * (NPU_VIT_ERROR_UNSUPPORTED) for the other projectors; an odd, zero or
 * too large grid, or no memory for it, is NPU_VIT_ERROR_SHAPE and leaves
 * the grid as it was. */
NPU_API
gboolean        npu_vit_set_patch_grid   (NpuVit *vit, guint height,
                                          guint width, GError **error);
/* The patch grid: image_size / patch_size each way, or the Qwen grid */
NPU_API
void            npu_vit_get_patch_grid   (const NpuVit *vit, guint *width,
                                          guint *height);
/* Qwen2VLImageProcessor's smart_resize () (Hugging Face transformers):
 * the (@out_height, @out_width) an image of @height x @width pixels is
 * resized to, multiples of @factor (patch size x 2 for the Qwen mergers:
 * 28) with about the image's aspect ratio and between @min_pixels and
 * @max_pixels pixels (Qwen's defaults 56 * 56 and 28 * 28 * 1280).  Each
 * side is rounded to the nearest multiple (halves to even, as Python's
 * round ()); if that is more than @max_pixels both are scaled by
 * sqrt (h w / max_pixels) and floored, if less than @min_pixels scaled by
 * sqrt (min_pixels / (h w)) and ceiled.  A side is at least @factor.
 * Errors (NPU_VIT_ERROR_SHAPE): a zero size or factor, an aspect ratio
 * above 200, @min_pixels above @max_pixels. */
NPU_API
gboolean        npu_vit_smart_resize     (guint height, guint width,
                                          guint factor, guint64 min_pixels,
                                          guint64 max_pixels,
                                          guint *out_height,
                                          guint *out_width, GError **error);

/* Activations of the matrix products (npumatmul.h): ACCURATE (default,
 * ~16 bits, vision tokens within 1e-3 of a float64 evaluation, docs/
 * vision-encoder.md) or FAST (int8, as llama.cpp; about half the
 * arithmetic).  Not while an encode runs. */
NPU_API
void            npu_vit_set_precision    (NpuVit *vit,
                                          NpuMatmulPrecision precision);
NPU_API
NpuMatmulPrecision npu_vit_get_precision (const NpuVit *vit);

/* @patches: n_patches rows of 3 p p floats, patches in row-major order over
 * the image (left to right, then top to bottom), each patch's values
 * channel-major, then row, then column (c * p * p + y * p + x), already
 * normalised with mean/std.  @out: n_tokens rows of out_dim floats.
 * @task may be NULL (runs on the calling thread); otherwise it must be the
 * running task and the work is spread over its device's threads.  Fails
 * only if the task is cancelled (NPU_FENCE_ERROR_CANCELLED). */
NPU_API
gboolean        npu_vit_encode           (NpuVit *vit, NpuTask *task,
                                          const float *patches, float *out,
                                          GError **error);

/* What npu_vit_encode() has moved so far, a running count (npubytes.h):
 * each product's weights in the layout it reads them (MXFP4 17 bytes per
 * 32, an F32 patch kernel 4 a value), the F32 vectors once a frame, the
 * position table's rows, the F32 rows in and out of every kernel
 * (activations) and the frame's tokens (%NPU_BYTES_TOKENS written).  A
 * frame's bytes are the difference of two counts around its encode. */
NPU_API
void            npu_vit_get_bytes        (const NpuVit *vit, NpuBytes *bytes);

/**
 * NpuVitProgram:
 *
 * The encoder built for a device: its weights imported once as device
 * buffers (in place where the device can import host memory, else copied
 * once, npu_vit_program_get_bytes_copied()), its scratch on the device, and
 * npu_vit_encode()'s arithmetic recorded once as operations of the seam
 * (core/device/npuops.h), replayed by each submit.  Write the patches
 * (npu_vit_encode()'s input layout) into the input buffer, submit, and
 * read the tokens from the output buffer once the fence has signalled.
 * The vit must outlive its programs.  On the CPU device the products are
 * the accurate ones whatever npu_vit_set_precision() says.
 */
typedef struct _NpuVitProgram NpuVitProgram;

NPU_API
NpuVitProgram  *npu_vit_program_new      (NpuVit *vit, NpuDevice *device,
                                          GError **error);
NPU_API
void            npu_vit_program_free     (NpuVitProgram *prog);
/* n_patches x patch_dim floats */
NPU_API
NpuBuffer      *npu_vit_program_get_input  (NpuVitProgram *prog);
/* n_tokens x out_dim floats */
NPU_API
NpuBuffer      *npu_vit_program_get_output (NpuVitProgram *prog);
NPU_API
NpuFence       *npu_vit_program_submit   (NpuVitProgram *prog,
                                          NpuQueue *queue,
                                          NpuFence * const *in_fences,
                                          guint n_in_fences);
/* What one submit moves, as npu_vit_get_bytes() counts a frame's encode,
 * counted once as the program was recorded (its operations' activations
 * are the device's passes, a few more than the CPU path's) */
NPU_API
void            npu_vit_program_get_bytes (NpuVitProgram *prog,
                                          NpuBytes *bytes);
/* Bytes of weights copied because the device could not import them */
NPU_API
gsize           npu_vit_program_get_bytes_copied (NpuVitProgram *prog);

G_END_DECLS

#endif /* __NPU_VIT_H__ */
