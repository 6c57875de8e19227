/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: a gpt-oss GGUF written out as OpenAI's Hugging Face
 * directory
 *
 * The inverse of what llama.cpp's convert_hf_to_gguf.py does to gpt-oss,
 * written from the transformers side (GptOssConfig, GptOssExperts,
 * convert_moe_packed_tensors), so that the tests have a directory in the
 * layout users download whose every value they know: config.json;
 * model-0000N-of-0000M.safetensors with model.safetensors.index.json
 * (layers spread over the shards); tokenizer.json (byte-level BPE with
 * the GGUF's vocabulary, merges and added tokens); tokenizer_config.json;
 * chat_template.jinja when the GGUF has a template.
 *
 * The experts go back to "<W>_blocks" [E, rows, K / 32, 16] + "<W>_scales"
 * [E, rows, K / 32] with byte k of a block holding elements 2k (low
 * nibble) and 2k + 1 (high), and gate_up_proj's rows interleaved: gate in
 * the even rows, up in the odd (its bias the same way).  Matrices keep
 * their type (F32, F16 or BF16); vectors are F32, or BF16 rounded to
 * nearest even with @bf16_vectors.
 */
#ifndef __NPU_HF_EXPORT_H__
#define __NPU_HF_EXPORT_H__

#include <glib.h>

G_BEGIN_DECLS

typedef struct
{
  guint n_shards;               /* 1: model.safetensors and no index */
  gboolean bf16_vectors;
  gboolean merges_as_pairs;     /* ["a", "b"], as newer tokenizers write */
} NpuHfExportParams;

gboolean npu_hf_export (const gchar * gguf_path, const gchar * dir,
    const NpuHfExportParams * params, GError ** error);
/* Removes a directory npu_hf_export() wrote (its files, then itself) */
void npu_hf_export_remove (const gchar * dir);

G_END_DECLS

#endif /* __NPU_HF_EXPORT_H__ */
