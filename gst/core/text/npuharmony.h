/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: reading gpt-oss's answers in OpenAI's harmony format
 *
 * After a prompt that ends with "<|start|>assistant" the model writes
 * messages such as
 *
 *   <|channel|>analysis<|message|>...<|end|>
 *   <|start|>assistant<|channel|>final<|message|>The answer<|return|>
 *
 * (a header: the role after <|start|>, the channel after <|channel|>, a
 * recipient "to=NAME" in the role or the channel, a content type after
 * <|constrain|>; then the body after <|message|>).  The parser is fed the
 * answer piece by piece, special tokens as whole pieces, and says of each
 * piece which channel's text it is, or that it is framing, to be dropped.
 * <|return|> and <|call|> end the answer; <|end|> ends a message, and a
 * new header may follow.
 *
 * A model that ignores the format (random weights, or a base model) is
 * still read: text before any harmony token is the final answer, so that
 * such a file shows something.  Text between messages (after <|end|>,
 * before the next header) is dropped.  A message without a channel is
 * final; a message of another role than the assistant's, or of a channel
 * not named here, is NPU_HARMONY_OTHER.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_HARMONY_H__
#define __NPU_HARMONY_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS

typedef enum
{
  NPU_HARMONY_FRAMING,          /* header, special tokens, text outside a
                                 * message: never shown */
  NPU_HARMONY_FINAL,            /* the answer */
  NPU_HARMONY_ANALYSIS,         /* chain of thought */
  NPU_HARMONY_COMMENTARY,       /* tool calls and preambles */
  NPU_HARMONY_OTHER,            /* another channel, or another role */
} NpuHarmonyChannel;

typedef struct _NpuHarmonyParser NpuHarmonyParser;

/* A parser for one answer, as if "<|start|>assistant" had just been read
 * (the prompt's generation header) */
NPU_API
NpuHarmonyParser   *npu_harmony_parser_new       (void);
NPU_API
void                npu_harmony_parser_free      (NpuHarmonyParser *p);
/* Starts over, for the next answer */
NPU_API
void                npu_harmony_parser_reset     (NpuHarmonyParser *p);

/* TRUE if @piece is one of the tokens the format is made of
 * ("<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>",
 * "<|return|>", "<|call|>") */
NPU_API
gboolean            npu_harmony_is_token         (const gchar *piece,
                                                  gsize len);

/**
 * npu_harmony_parser_push:
 * @piece: the decoded text of one token
 * @special: the piece is a special (control) token's text; special pieces
 *   other than the format's are framing and change nothing
 *
 * Returns: the channel @piece's text belongs to, or NPU_HARMONY_FRAMING
 */
NPU_API
NpuHarmonyChannel   npu_harmony_parser_push      (NpuHarmonyParser *p,
                                                  const gchar *piece,
                                                  gsize len,
                                                  gboolean special);
/* TRUE once <|return|> or <|call|> was read: the answer is over */
NPU_API
gboolean            npu_harmony_parser_is_done   (const NpuHarmonyParser *p);
/* TRUE if the answer ended at <|call|> (a tool call) */
NPU_API
gboolean            npu_harmony_parser_is_call   (const NpuHarmonyParser *p);
/* The current (or last) message's header, "" when none: its role's first
 * word, its channel's name, its recipient (after "to="), its content type
 * (after <|constrain|>).  Valid until the next push. */
NPU_API
const gchar        *npu_harmony_parser_get_role  (const NpuHarmonyParser *p);
NPU_API
const gchar        *npu_harmony_parser_get_channel_name
                                                 (const NpuHarmonyParser *p);
NPU_API
const gchar        *npu_harmony_parser_get_recipient
                                                 (const NpuHarmonyParser *p);
NPU_API
const gchar        *npu_harmony_parser_get_constraint
                                                 (const NpuHarmonyParser *p);
/* "framing", "final", "analysis", "commentary", "other" */
NPU_API
const gchar        *npu_harmony_channel_name     (NpuHarmonyChannel channel);

G_END_DECLS

#endif /* __NPU_HARMONY_H__ */
