/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a Hugging Face model directory read as the GGUF llama.cpp's
 * converter would write from it
 *
 * OpenAI ships gpt-oss as a directory: config.json, the shards
 * model-0000N-of-0000M.safetensors with model.safetensors.index.json (or
 * one model.safetensors), tokenizer.json, tokenizer_config.json and
 * chat_template.jinja.  This reads such a directory in place, with no
 * conversion step:
 *
 * - the metadata (hyper-parameters from config.json, the byte-level BPE
 *   vocabulary and merges from tokenizer.json, the special tokens from
 *   tokenizer_config.json, the chat template) becomes a small GGUF in
 *   memory with the keys convert_hf_to_gguf.py writes, so the tokenizer,
 *   the chat template and the model's hyper-parameters are read by the
 *   same code as a GGUF file's;
 * - the tensors are found by their GGUF names (npu_hf_model_lookup(), an
 *   NpuTensorLookup): matrices (BF16, F16 or F32) are pointers into the
 *   shards' mappings; norms, biases and sinks, which the model reads in
 *   F32, are widened once (exactly: every BF16 and F16 value is an F32);
 *   the MXFP4 experts, stored as "<W>_blocks" + "<W>_scales" with their
 *   nibbles in another order and gate_up_proj's gate and up rows
 *   interleaved (gate in even rows, as transformers' GptOssExperts splits
 *   them), are rewritten into ggml's block_mxfp4, gate and up apart, each
 *   expert when a token is first routed to it (NpuTensorView.prepare),
 *   into memory mapped without backing: an expert never used takes none.
 *   The values are unchanged everywhere; the bytes rewritten so far are
 *   counted (npu_hf_model_get_rewritten_bytes()).
 *
 * Only gpt-oss (config.json model_type "gpt_oss") is read: other families
 * are refused with an error that says to convert them with llama.cpp.
 * Everything is checked at open: each tensor the model reads exists in
 * the shard the index names, has a dtype we read (F32, F16, BF16, and U8
 * for the MXFP4 pairs) and the shape config.json implies.  Shard names
 * in the index must be plain file names in the directory.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_HF_MODEL_H__
#define __NPU_HF_MODEL_H__

#include <glib.h>
#include "core/device/npuapi.h"
#include "core/device/nputensorview.h"
#include "npugguf.h"
#include "npuhferror.h"

G_BEGIN_DECLS
typedef struct _NpuHfModel NpuHfModel;

/* Whether @path names a Hugging Face model: a directory, a .json file in
 * one (config.json, the index) or a .safetensors shard */
NPU_API gboolean npu_hf_model_is_hf_path (const gchar * path);

/* @path: the directory, its config.json or index, or one shard (which
 * stands for the whole directory when an index is there) */
NPU_API NpuHfModel *npu_hf_model_open (const gchar * path, GError ** error);
NPU_API void npu_hf_model_free (NpuHfModel * hf);

/* The metadata as a GGUF without tensors; owned by @hf */
NPU_API const NpuGguf *npu_hf_model_get_metadata (const NpuHfModel * hf);

/* An NpuTensorLookup over @hf (the user data) by GGUF tensor names; what
 * it returns lives as long as @hf.  Thread-safe. */
NPU_API
    gboolean npu_hf_model_lookup (const gchar * name, NpuTensorView * out,
    gpointer hf);

/* Bytes written into memory of @hf's own so far: the experts rewritten
 * into ggml's layout and the F32 copies of the vectors */
NPU_API guint64 npu_hf_model_get_rewritten_bytes (const NpuHfModel * hf);

G_END_DECLS
#endif /* __NPU_HF_MODEL_H__ */
