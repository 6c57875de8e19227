/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: deterministic random models in llama.cpp's GGUF layouts
 *
 * No real model can be downloaded where the project is built and tested,
 * so tests, the demo and the benchmarks use models written here: random
 * weights, but every key, tensor name, shape, type and tokenizer array is
 * what llama.cpp writes for the same architecture (docs/models.md lists
 * them).  The same parameters and seed give the same bytes on every run
 * and machine: weights come from integer PRNGs and a fixed sequence of
 * IEEE operations, never from libm.
 *
 * Used by the npu-model-gen tool and compiled into the unit test.
 */
#ifndef __NPU_MODEL_GEN_H__
#define __NPU_MODEL_GEN_H__

#include <glib.h>

G_BEGIN_DECLS

#define NPU_MODEL_GEN_ERROR (npu_model_gen_error_quark ())
GQuark npu_model_gen_error_quark (void);

typedef enum
{
  NPU_MODEL_GEN_ERROR_INVALID,  /* parameters that make no model */
  NPU_MODEL_GEN_ERROR_FOR,      /* --for: the text model is unusable */
} NpuModelGenError;

typedef enum
{
  NPU_MODEL_ARCH_LLAMA,
  NPU_MODEL_ARCH_QWEN2,
  NPU_MODEL_ARCH_QWEN3,         /* qwen2 without biases, q/k norms */
  NPU_MODEL_ARCH_GPT_OSS,       /* mixture of experts, sinks, sliding window */
  NPU_MODEL_ARCH_GEMMA3,        /* q/k norms, post norms, GeGLU, windows */
} NpuModelArch;

typedef enum
{
  NPU_MODEL_PROJECTOR_MLP,      /* LLaVA: mm.0 (linear), GELU, mm.2 */
  NPU_MODEL_PROJECTOR_IDEFICS3, /* SmolVLM: pixel shuffle + mm.model.fc */
  NPU_MODEL_PROJECTOR_QWEN2VL,  /* Qwen2-VL: 2x2 merger, LayerNorm blocks */
  NPU_MODEL_PROJECTOR_QWEN25VL, /* Qwen2.5-VL: RMSNorm, SwiGLU, windows */
  NPU_MODEL_PROJECTOR_GEMMA3,   /* Gemma 3: average pool, RMS norm, linear */
} NpuModelProjector;

typedef struct
{
  NpuModelArch arch;
  guint n_layers;
  guint dim;                    /* embedding_length */
  guint ff;                     /* feed_forward_length */
  guint n_heads;
  guint n_kv_heads;
  guint head_dim;               /* qwen3's attention.key_length; 0: dim /
                                 * n_heads (the only choice for the
                                 * others) */
  guint vocab;                  /* number of tokens, markers included */
  guint ctx;
  guint32 wtype;                /* ggml type of the 2-D weights */
  gboolean tied;                /* no output.weight: token_embd is reused */
  gboolean all_mxfp4;           /* with wtype MXFP4: token_embd and output
                                 * MXFP4 too instead of Q8_0 (llama-quantize
                                 * --token-embedding-type mxfp4
                                 * --output-tensor-type mxfp4) */
  gboolean mxfp4_values;        /* every 2-D weight (token_embd and output
                                 * too) rounded to the values an MXFP4 copy
                                 * decodes to, stored in wtype (F32, F16 or
                                 * BF16): ggml then computes with exactly
                                 * the weights an MXFP4 runtime uses */
  guint64 seed;
  gfloat rms_eps;
  gfloat rope_base;
  /* gpt-oss: ff is the experts' width (expert_feed_forward_length, and
   * feed_forward_length as the converter copies it); the experts are
   * MXFP4 whatever wtype, as the converter keeps OpenAI's */
  guint n_experts;              /* expert_count */
  guint n_experts_used;         /* expert_used_count */
  guint sliding_window;         /* attention.sliding_window (gpt-oss,
                                 * gemma3) */
  gfloat yarn_factor;           /* rope.scaling.factor (type yarn) */
  guint yarn_orig_ctx;          /* rope.scaling.original_context_length */
  gboolean harmony;             /* gpt-oss: the vocabulary gets
                                 * o200k_harmony's format tokens (eos
                                 * <|return|>) and the file a chat template
                                 * of gpt-oss's family */
} NpuTextModelParams;

typedef enum
{
  NPU_MODEL_ACT_GELU,           /* clip.use_gelu: GELU, tanh form */
  NPU_MODEL_ACT_SILU,           /* clip.use_silu */
  NPU_MODEL_ACT_GELU_QUICK,     /* neither: quick GELU */
} NpuModelAct;

typedef struct
{
  NpuModelProjector projector;
  NpuModelAct act;              /* the blocks' FFN activation (presets:
                                 * GELU) */
  guint image_size;
  guint patch;
  guint n_layers;
  guint dim;
  guint ff;
  guint n_heads;
  guint scale_factor;           /* idefics3 pixel shuffle factor */
  guint n_wa_pattern;           /* qwen2.5vl: every n-th block attends to
                                 * the whole image, the others to windows */
  guint window_size;            /* qwen2.5vl: window side in pixels (112) */
  guint text_dim;               /* projector output: the text model's
                                 * embedding_length */
  guint32 wtype;
  gboolean mxfp4_values;        /* every 2-D weight rounded to the values an
                                 * MXFP4 copy decodes to, stored in wtype
                                 * (F32, F16 or BF16), as for text models;
                                 * the patch convolution too when 3 p p is
                                 * a multiple of 32 (per output channel),
                                 * else rounded to F16's values (ggml's
                                 * conv_2d computes in F16) */
  gboolean extra_block;         /* write block n_layers too (block_count
                                 * n_layers + 1), the other blocks
                                 * unchanged: llama.cpp's LLaVA graph runs
                                 * block_count - 1 blocks, so it runs
                                 * exactly those of the file without it */
  guint64 seed;
  gfloat eps;
} NpuMmprojParams;

typedef enum
{
  NPU_MODEL_AUDIO_PROJECTOR_QWEN2A,     /* avg pool 2 + mm.a.fc */
  NPU_MODEL_AUDIO_PROJECTOR_ULTRAVOX,   /* stack, RMS norm, SwiGLU MLP */
} NpuModelAudioProjector;

/* A Whisper-style audio mmproj as llama.cpp's converter writes it for
 * Qwen2-Audio (qwen2a) and Ultravox (clip.has_audio_encoder, clip.audio.*,
 * a.conv1d.{1,2}, a.position_embd, a.blk.N.* without a key bias,
 * a.post_ln, mm.a.*) */
typedef struct
{
  NpuModelAudioProjector projector;
  guint n_mels;                 /* 80 or 128 */
  guint n_layers;
  guint dim;
  guint ff;
  guint n_heads;
  guint n_ctx;                  /* rows of a.position_embd (1500) */
  guint stack_factor;           /* ultravox */
  guint hidden;                 /* ultravox: mm.a.mlp.1's output size */
  guint text_dim;               /* projector output: the text model's
                                 * embedding_length */
  guint32 wtype;                /* the 2-D matrices; the conv kernels are
                                 * F16 unless wtype is F32, as the
                                 * converter writes them */
  gboolean mxfp4_values;        /* every matrix rounded to MXFP4's values
                                 * (stored in wtype: F32, F16 or BF16),
                                 * the conv kernels to F16's */
  guint64 seed;
  gfloat eps;
} NpuAudioMmprojParams;

typedef struct
{
  guint64 n_params;
  guint64 file_size;
  guint n_tensors;
  guint n_tokens;               /* text models */
} NpuModelGenStats;

/* Presets: "tiny", "small", "1b" (text), "tiny", "small", "base" (vision).
 * They set everything but the seed and the type. */
gboolean  npu_model_gen_text_preset   (NpuTextModelParams *params,
                                       NpuModelArch arch, const gchar *size,
                                       GError **error);
gboolean  npu_model_gen_mmproj_preset (NpuMmprojParams *params,
                                       NpuModelProjector projector,
                                       const gchar *size, GError **error);

gboolean  npu_model_gen_write_text    (const NpuTextModelParams *params,
                                       const gchar *path,
                                       NpuModelGenStats *stats,
                                       GError **error);
/* The same with the tokenizer.* metadata of @tokenizer_path (a GGUF, e.g.
 * from tests/crosscheck/hf-tokenizer-gguf.js) copied as it is instead of a
 * generated vocabulary; the vocabulary size is its token count.  For the
 * tokenizer cross-check with real vocabularies.  NULL: write_text(). */
gboolean  npu_model_gen_write_text_with_tokenizer
                                      (const NpuTextModelParams *params,
                                       const gchar *tokenizer_path,
                                       const gchar *path,
                                       NpuModelGenStats *stats,
                                       GError **error);
/* Reads text_dim from @text_path (general.architecture and
 * <arch>.embedding_length) when it is not NULL */
gboolean  npu_model_gen_write_mmproj  (const NpuMmprojParams *params,
                                       const gchar *text_path,
                                       const gchar *path,
                                       NpuModelGenStats *stats,
                                       GError **error);

/* Audio presets: "tiny" and "base" (Whisper-base: 6 blocks of 512) */
gboolean  npu_model_gen_audio_preset  (NpuAudioMmprojParams *params,
                                       NpuModelAudioProjector projector,
                                       const gchar *size, GError **error);
/* Reads text_dim from @text_path when it is not NULL */
gboolean  npu_model_gen_write_audio_mmproj
                                      (const NpuAudioMmprojParams *params,
                                       const gchar *text_path,
                                       const gchar *path,
                                       NpuModelGenStats *stats,
                                       GError **error);

/* general.architecture of @arch: "llama", "qwen2", "qwen3" */
const gchar *npu_model_gen_arch_name  (NpuModelArch arch);
/* "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k",
 * "q5_k", "q6_k", "mxfp4" (any case) to a ggml type id; -1 if unknown.
 * A K-quant's rows that are not whole super-blocks of 256 are written in
 * llama-quantize's fallback (npumodelgen-quants.h). */
gint      npu_model_gen_parse_type    (const gchar *name);
/* general.file_type (llama_ftype) for files whose 2-D weights are @wtype */
guint32   npu_model_gen_file_type     (guint32 wtype);

/* Image marker tokens put in every generated text vocabulary */
extern const gchar *const npu_model_gen_markers[];

G_END_DECLS

#endif /* __NPU_MODEL_GEN_H__ */
