/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: text tokenizers from GGUF metadata (tokenizer.ggml.*)
 *
 * Two tokenizer families, with llama.cpp's algorithms (src/llama-vocab.cpp)
 * so that a prompt gives the same token ids here as in llama.cpp:
 *
 *  - tokenizer.ggml.model "llama": SentencePiece BPE.  Spaces become U+2581,
 *    a space is put in front of the text (and after every special token)
 *    when add_space_prefix, the text is split into UTF-8 characters and the
 *    adjacent pair whose concatenation is the token with the highest score
 *    is merged (left-most on ties) until no pair is a token; what is left
 *    and is not a token is spelled with the byte-fallback tokens <0xXX>.
 *
 *  - tokenizer.ggml.model "gpt2": byte-level BPE.  The text is split by the
 *    pre-tokenizer regex of tokenizer.ggml.pre ("default" when missing,
 *    "gpt2"/"gpt-2", "llama3"/"llama-v3"/"llama-bpe", "qwen2"), each piece's
 *    bytes are mapped to GPT-2's printable characters (space -> U+0120 'Ġ',
 *    newline -> U+010A 'Ċ') and merged by tokenizer.ggml.merges rank.
 *
 * Special tokens (type CONTROL, USER_DEFINED or UNKNOWN, longest first) are
 * cut out of the raw text before tokenizing: user-defined ones always,
 * control and unknown ones only with parse_special, as llama.cpp does.
 *
 * The tokenizer copies what it needs: the NpuGguf may be freed after
 * npu_tokenizer_new_from_gguf().  An NpuTokenizer is immutable and may be
 * used from any thread; an NpuTokenDecoder belongs to one stream.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_TOKENIZER_H__
#define __NPU_TOKENIZER_H__

#include <glib.h>
#include "core/device/npuapi.h"

#include "core/formats/npugguf.h"

G_BEGIN_DECLS

#define NPU_TOKENIZER_ERROR (npu_tokenizer_error_quark ())
NPU_API
GQuark npu_tokenizer_error_quark (void);

typedef enum
{
  NPU_TOKENIZER_ERROR_UNSUPPORTED,      /* tokenizer.ggml.model or .pre we
                                         * do not implement */
  NPU_TOKENIZER_ERROR_INVALID,  /* missing or inconsistent metadata */
} NpuTokenizerError;

/* No token (llama.cpp's LLAMA_TOKEN_NULL) */
#define NPU_TOKEN_NULL (-1)

typedef enum
{
  NPU_TOKENIZER_SPM,            /* "llama" */
  NPU_TOKENIZER_BPE,            /* "gpt2" */
} NpuTokenizerKind;

/* tokenizer.ggml.token_type values (llama_token_type) */
typedef enum
{
  NPU_TOKEN_TYPE_UNDEFINED = 0,
  NPU_TOKEN_TYPE_NORMAL = 1,
  NPU_TOKEN_TYPE_UNKNOWN = 2,
  NPU_TOKEN_TYPE_CONTROL = 3,
  NPU_TOKEN_TYPE_USER_DEFINED = 4,
  NPU_TOKEN_TYPE_UNUSED = 5,
  NPU_TOKEN_TYPE_BYTE = 6,
} NpuTokenType;

/**
 * NpuDecodeFlags:
 * @NPU_DECODE_SPECIAL: render control and unknown tokens ("<|im_end|>",
 *   "<s>") as their text; without it they produce nothing.  User-defined
 *   tokens are always rendered, as in llama.cpp.
 * @NPU_DECODE_STRIP_LEADING_SPACE: drop the space that add_space_prefix put
 *   in front of the first word (SentencePiece vocabularies only), so that
 *   decoding what npu_tokenizer_encode() made gives the text back.
 * @NPU_DECODE_CLEAN_SPACES: npu_tokenizer_decode() only: apply
 *   llama.cpp's clean_up_tokenization_spaces passes (" ," -> ",", " 's" ->
 *   "'s", ...) when the vocabulary asks for them (BPE except qwen2).
 */
typedef enum
{
  NPU_DECODE_NONE = 0,
  NPU_DECODE_SPECIAL = 1 << 0,
  NPU_DECODE_STRIP_LEADING_SPACE = 1 << 1,
  NPU_DECODE_CLEAN_SPACES = 1 << 2,
} NpuDecodeFlags;

typedef struct _NpuTokenizer NpuTokenizer;
typedef struct _NpuTokenDecoder NpuTokenDecoder;

/* Reads tokenizer.ggml.{model,pre,tokens,scores,token_type,merges,
 * bos_token_id,eos_token_id,eot_token_id,eom_token_id,unknown_token_id,
 * padding_token_id,add_bos_token,add_eos_token,add_space_prefix}.  Fails
 * with UNSUPPORTED naming the model or pre value it cannot handle. */
NPU_API
NpuTokenizer       *npu_tokenizer_new_from_gguf (const NpuGguf *gguf,
                                                 GError **error);
NPU_API
void                npu_tokenizer_free          (NpuTokenizer *tok);

NPU_API
NpuTokenizerKind    npu_tokenizer_get_kind      (const NpuTokenizer *tok);
/* Canonical pre-tokenizer name: "default", "gpt2", "llama3" or "qwen2" for
 * BPE; NULL for SentencePiece */
NPU_API
const gchar        *npu_tokenizer_get_pre       (const NpuTokenizer *tok);

/**
 * npu_tokenizer_encode:
 * @text: UTF-8 (invalid bytes are tokenized as U+FFFD, as llama.cpp does)
 * @len: bytes of @text, or -1 if NUL-terminated
 * @add_special: add BOS / EOS as tokenizer.ggml.add_bos_token /
 *   add_eos_token say (defaults as llama.cpp: BOS for SentencePiece and for
 *   the llama3 pre-tokenizer, never EOS)
 * @parse_special: turn the text of control tokens ("<|im_start|>", "<s>",
 *   "<image>") into those tokens; without it they are tokenized as text
 * @n_tokens: (out): number of tokens
 *
 * Returns: (transfer full): @n_tokens ids, g_free() it; never NULL (an
 *   empty result is a valid zero-length array).
 */
NPU_API
gint32             *npu_tokenizer_encode        (const NpuTokenizer *tok,
                                                 const gchar *text,
                                                 gssize len,
                                                 gboolean add_special,
                                                 gboolean parse_special,
                                                 gsize *n_tokens);

/* Whole-sequence detokenization: always valid UTF-8 (bytes that do not form
 * UTF-8 become U+FFFD).  @len (may be NULL) receives the byte length; the
 * text may hold NUL bytes if a token stands for one. */
NPU_API
gchar              *npu_tokenizer_decode        (const NpuTokenizer *tok,
                                                 const gint32 *tokens,
                                                 gsize n_tokens,
                                                 NpuDecodeFlags flags,
                                                 gsize *len);

/* Vocabulary */
NPU_API
guint               npu_tokenizer_n_vocab       (const NpuTokenizer *tok);
/* The token's text as in the file (U+2581 and GPT-2 byte characters
 * included), NUL-terminated; NULL for an id out of range */
NPU_API
const gchar        *npu_tokenizer_token_text    (const NpuTokenizer *tok,
                                                 gint32 id);
/* The bytes the token stands for when decoded with NPU_DECODE_SPECIAL (not
 * NUL-terminated: <0x00> is one NUL byte); NULL for an id out of range */
NPU_API
const gchar        *npu_tokenizer_token_piece   (const NpuTokenizer *tok,
                                                 gint32 id, gsize *len);
/* Type after llama.cpp's fix-ups (end-of-generation tokens are CONTROL);
 * UNDEFINED for an id out of range */
NPU_API
NpuTokenType        npu_tokenizer_token_type    (const NpuTokenizer *tok,
                                                 gint32 id);
NPU_API
gfloat              npu_tokenizer_token_score   (const NpuTokenizer *tok,
                                                 gint32 id);
/* Exact text match; NPU_TOKEN_NULL if no token has this text */
NPU_API
gint32              npu_tokenizer_find_token    (const NpuTokenizer *tok,
                                                 const gchar *text);

/* Special ids, NPU_TOKEN_NULL when the vocabulary has none */
NPU_API
gint32              npu_tokenizer_get_bos       (const NpuTokenizer *tok);
NPU_API
gint32              npu_tokenizer_get_eos       (const NpuTokenizer *tok);
NPU_API
gint32              npu_tokenizer_get_eot       (const NpuTokenizer *tok);
NPU_API
gint32              npu_tokenizer_get_unk       (const NpuTokenizer *tok);
NPU_API
gint32              npu_tokenizer_get_pad       (const NpuTokenizer *tok);
NPU_API
gboolean            npu_tokenizer_get_add_bos   (const NpuTokenizer *tok);
NPU_API
gboolean            npu_tokenizer_get_add_eos   (const NpuTokenizer *tok);
/* End of generation: eos, eot, eom and the tokens llama.cpp recognises by
 * text (<|eot_id|>, <|im_end|>, <|endoftext|>, <|end|>, <end_of_turn>,
 * <|eom_id|>, <|end_of_text|>, <EOT>, <end_of_utterance>) */
NPU_API
gboolean            npu_tokenizer_is_eog        (const NpuTokenizer *tok,
                                                 gint32 id);

/* Streaming detokenization: push generated tokens one at a time; each call
 * returns the text they completed, only whole UTF-8 characters (a
 * character split over byte-fallback or byte-level tokens is held back
 * until its last byte arrives; bytes that cannot start or continue a
 * character come out as U+FFFD at once).  flush() returns what is held
 * back, as one U+FFFD per incomplete character, and starts over.  The
 * decoder keeps a pointer to @tok, which must outlive it. */
NPU_API
NpuTokenDecoder    *npu_token_decoder_new       (const NpuTokenizer *tok,
                                                 NpuDecodeFlags flags);
NPU_API
void                npu_token_decoder_free      (NpuTokenDecoder *dec);
/* (transfer full): NUL-terminated, possibly empty; @len may be NULL */
NPU_API
gchar              *npu_token_decoder_push      (NpuTokenDecoder *dec,
                                                 gint32 token, gsize *len);
NPU_API
gchar              *npu_token_decoder_flush     (NpuTokenDecoder *dec,
                                                 gsize *len);
/* Drop held-back bytes without output; the next token is the first again */
NPU_API
void                npu_token_decoder_reset     (NpuTokenDecoder *dec);

G_END_DECLS

#endif /* __NPU_TOKENIZER_H__ */
