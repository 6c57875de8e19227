/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: chat prompt formatting without a Jinja engine
 *
 * Models carry a Jinja chat template (tokenizer.chat_template).  We do not
 * run Jinja: we recognise the template's family and write, for one
 * optional system message and one user message, exactly the text the
 * template renders (checked against the real templates, see
 * docs/tokenizers.md):
 *
 *   ChatML (Qwen2, SmolLM...): the template contains "<|im_start|>"
 *   Llama 3:                   the template contains "<|start_header_id|>"
 *   Llama 2:                   the template contains "[INST]"
 *   Gemma (Gemma 2 and 3):     the template contains "<start_of_turn>"
 *
 * or take a family by name, or a user format with {system} and {prompt}
 * placeholders, or none at all (plain completion, for base models).
 *
 * Templates that put the BOS token in the text (Llama 2 and 3) say so with
 * npu_chat_template_has_bos(): tokenize their output with add_special off
 * (and parse_special on), or BOS would be doubled.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_CHAT_H__
#define __NPU_CHAT_H__

#include <glib.h>
#include "core/device/npuapi.h"

#include "core/formats/npugguf.h"
#include "nputokenizer.h"

G_BEGIN_DECLS

#define NPU_CHAT_ERROR (npu_chat_error_quark ())
NPU_API
GQuark npu_chat_error_quark (void);

typedef enum
{
  NPU_CHAT_ERROR_UNKNOWN_TEMPLATE,      /* the file's template or the name
                                         * given is not one we know */
  NPU_CHAT_ERROR_INVALID,       /* a user format without {prompt} */
} NpuChatError;

typedef enum
{
  NPU_CHAT_NONE,                /* plain completion */
  NPU_CHAT_CHATML,
  NPU_CHAT_LLAMA3,
  NPU_CHAT_LLAMA2,
  NPU_CHAT_GEMMA,
  NPU_CHAT_HARMONY,             /* gpt-oss */
  NPU_CHAT_CUSTOM,              /* user format */
} NpuChatFamily;

typedef struct _NpuChatTemplate NpuChatTemplate;

/* A family with no default system prompt; @bos_text (NULL: "<s>" for
 * Llama 2, "<|begin_of_text|>" for Llama 3, "<bos>" for Gemma) is what those templates call
 * bos_token.  Not for NPU_CHAT_CUSTOM. */
NPU_API
NpuChatTemplate    *npu_chat_template_new        (NpuChatFamily family,
                                                  const gchar *bos_text);
/* "none" or "completion", "chatml", "qwen2" (ChatML whose default system
 * prompt is "You are a helpful assistant.", as Qwen2-Instruct's), "llama3",
 * "llama2", "gemma" */
NPU_API
NpuChatTemplate    *npu_chat_template_new_from_name (const gchar *name,
                                                     GError **error);
/* User format: "{system}" and "{prompt}" are replaced by the messages
 * ({system} by "" when there is none), C escapes (\n, \t, \\) are
 * interpreted, so a property string can hold newlines.  {prompt} is
 * required. */
NPU_API
NpuChatTemplate    *npu_chat_template_new_custom (const gchar *format,
                                                  GError **error);
/* From tokenizer.chat_template.  No template: NPU_CHAT_NONE (base model).
 * A template of no family we know: NULL and UNKNOWN_TEMPLATE (the caller
 * decides whether to fall back to completion).  ChatML templates that
 * insert a default system message when there is none (Qwen2's) keep it.
 * @tok (may be NULL) gives the BOS text. */
NPU_API
NpuChatTemplate    *npu_chat_template_new_from_gguf (const NpuGguf *gguf,
                                                     const NpuTokenizer *tok,
                                                     GError **error);
NPU_API
void                npu_chat_template_free       (NpuChatTemplate *tmpl);

NPU_API
NpuChatFamily       npu_chat_template_get_family (const NpuChatTemplate *tmpl);
/* "none", "chatml", "llama3", "llama2", "gemma", "custom" */
NPU_API
const gchar        *npu_chat_family_name         (NpuChatFamily family);
/* The system message used when none is given, or NULL */
NPU_API
const gchar        *npu_chat_template_get_default_system
                                                 (const NpuChatTemplate *tmpl);
/* TRUE if the formatted text starts with the BOS token's text */
NPU_API
gboolean            npu_chat_template_has_bos    (const NpuChatTemplate *tmpl);

/**
 * npu_chat_format:
 * @system: (nullable): system message; NULL for none (the template's
 *   default system prompt, if any, is used then); "" is an empty one
 * @user: the user message
 * @add_generation_prompt: end with the assistant turn's header, as Jinja's
 *   add_generation_prompt (what a model needs before it answers)
 *
 * Plain completion returns @user, after @system and a blank line when a
 * non-empty @system is given.
 *
 * Returns: (transfer full): the prompt text
 */
NPU_API
gchar              *npu_chat_format              (const NpuChatTemplate *tmpl,
                                                  const gchar *system,
                                                  const gchar *user,
                                                  gboolean add_generation_prompt);

/**
 * npu_chat_format_next:
 * @user: the next user message
 * @add_generation_prompt: as npu_chat_format()
 *
 * For a conversation that goes on: the text the template renders after
 * the assistant's last answer as the model generated it (up to, not
 * including, its end-of-generation token): the end of that answer's turn,
 * then @user's turn.  No system message and no BOS text: they came with
 * the first turn.  ChatML: "<|im_end|>\n<|im_start|>user\n...", Llama 3:
 * "<|eot_id|><|start_header_id|>user...", Llama 2: " </s><s>[INST] ...
 * [/INST]", Gemma: "<end_of_turn>\n<start_of_turn>user\n...", plain completion: a blank line, then @user; a custom format:
 * the format again with an empty {system}.
 *
 * Returns: (transfer full): the text
 */
NPU_API
gchar              *npu_chat_format_next         (const NpuChatTemplate *tmpl,
                                                  const gchar *user,
                                                  gboolean add_generation_prompt);

G_END_DECLS

#endif /* __NPU_CHAT_H__ */
