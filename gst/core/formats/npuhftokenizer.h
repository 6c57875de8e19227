/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a Hugging Face tokenizer.json as GGUF tokenizer keys
 *
 * Writes what convert_hf_to_gguf.py writes for a byte-level BPE
 * tokenizer (its _set_vocab_gpt2 and gguf-py's SpecialVocab):
 *
 * - tokenizer.ggml.model "gpt2"; tokenizer.ggml.pre named from the
 *   pre-tokenizer's Split pattern (o200k's is "gpt-4o", Qwen2's "qwen2",
 *   Llama 3's "llama-bpe"; a ByteLevel that splits by itself "gpt2"),
 *   where llama.cpp tells them apart by hashing a tokenisation;
 * - tokenizer.ggml.tokens and token_type over max (config.json's
 *   vocab_size, the largest id + 1): the vocabulary's strings as they are
 *   (NORMAL), the added tokens (CONTROL when special or spelled <|...|>,
 *   else USER_DEFINED), "[PADn]" (UNUSED) for ids nobody names;
 * - tokenizer.ggml.merges as "a b" strings (either spelling of the file);
 * - bos/eos/padding/unknown ids from tokenizer_config.json's tokens, then
 *   config.json's *_token_id for those it does not name; add_bos_token and
 *   add_eos_token when tokenizer_config.json states them;
 * - tokenizer.chat_template from chat_template.jinja, else from
 *   tokenizer_config.json's chat_template (the "default" one of a list).
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_HF_TOKENIZER_H__
#define __NPU_HF_TOKENIZER_H__

#include <glib.h>
#include "npuggufwriter.h"
#include "npujson.h"

G_BEGIN_DECLS
/* Reads @dir's tokenizer files; @config is its parsed config.json.
 * Errors are NPU_HF_MODEL_ERROR's. */
    gboolean npu_hf_tokenizer_add_keys (NpuGgufWriter * w, const gchar * dir,
    const NpuJson * config, GError ** error);

G_END_DECLS
#endif /* __NPU_HF_TOKENIZER_H__ */
