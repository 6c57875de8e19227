/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: reading gpt-oss's answers in OpenAI's harmony format */
#include "npuharmony.h"

#include <string.h>

typedef enum
{
  STATE_RAW,                    /* no harmony token yet: text is final */
  STATE_ROLE,                   /* after <|start|> */
  STATE_CHANNEL,                /* after <|channel|> */
  STATE_CONSTRAIN,              /* after <|constrain|> */
  STATE_BODY,                   /* after <|message|> */
  STATE_BETWEEN,                /* after <|end|> */
  STATE_DONE,                   /* after <|return|> or <|call|> */
} State;

struct _NpuHarmonyParser
{
  State state;
  gboolean call;
  /* the header as written */
  GString *role, *channel, *constrain;
  /* what it says, set when the body starts */
  gchar *role_word, *channel_word, *recipient, *constraint;
  NpuHarmonyChannel body;
};

static const gchar *const harmony_tokens[] = {
  "<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>",
  "<|return|>", "<|call|>", NULL
};

gboolean
npu_harmony_is_token (const gchar * piece, gsize len)
{
  guint i;

  for (i = 0; harmony_tokens[i]; i++)
    if (strlen (harmony_tokens[i]) == len
        && memcmp (harmony_tokens[i], piece, len) == 0)
      return TRUE;
  return FALSE;
}

static void
set_str (gchar ** dst, gchar * value)
{
  g_free (*dst);
  *dst = value;
}

/* The first word of @s, trimmed, before any "to=" */
static gchar *
first_word (const gchar * s)
{
  const gchar *b = s, *e;

  while (*b && g_ascii_isspace (*b))
    b++;
  e = b;
  while (*e && !g_ascii_isspace (*e))
    e++;
  if (g_str_has_prefix (b, "to="))
    return g_strdup ("");
  return g_strndup (b, e - b);
}

/* The word after "to=" in @s, or NULL */
static gchar *
recipient_in (const gchar * s)
{
  const gchar *p = s, *e;

  while ((p = strstr (p, "to=")) != NULL) {
    if (p == s || g_ascii_isspace (p[-1]))
      break;
    p += 3;
  }
  if (!p)
    return NULL;
  p += 3;
  e = p;
  while (*e && !g_ascii_isspace (*e))
    e++;
  return g_strndup (p, e - p);
}

static void
new_header (NpuHarmonyParser * p, const gchar * role)
{
  g_string_assign (p->role, role);
  g_string_truncate (p->channel, 0);
  g_string_truncate (p->constrain, 0);
}

/* The header is complete: what its body is */
static void
start_body (NpuHarmonyParser * p)
{
  gchar *r;

  set_str (&p->role_word, first_word (p->role->str));
  set_str (&p->channel_word, first_word (p->channel->str));
  r = recipient_in (p->role->str);
  if (!r)
    r = recipient_in (p->channel->str);
  set_str (&p->recipient, r ? r : g_strdup (""));
  set_str (&p->constraint, g_strstrip (g_strdup (p->constrain->str)));

  /* a header without a role is the assistant's (the model went on from
   * its own message) */
  if (*p->role_word && strcmp (p->role_word, "assistant") != 0)
    p->body = NPU_HARMONY_OTHER;
  else if (!*p->channel_word || strcmp (p->channel_word, "final") == 0)
    p->body = NPU_HARMONY_FINAL;
  else if (strcmp (p->channel_word, "analysis") == 0)
    p->body = NPU_HARMONY_ANALYSIS;
  else if (strcmp (p->channel_word, "commentary") == 0)
    p->body = NPU_HARMONY_COMMENTARY;
  else
    p->body = NPU_HARMONY_OTHER;
  p->state = STATE_BODY;
}

NpuHarmonyParser *
npu_harmony_parser_new (void)
{
  NpuHarmonyParser *p = g_new0 (NpuHarmonyParser, 1);

  p->role = g_string_new (NULL);
  p->channel = g_string_new (NULL);
  p->constrain = g_string_new (NULL);
  npu_harmony_parser_reset (p);
  return p;
}

void
npu_harmony_parser_free (NpuHarmonyParser * p)
{
  if (!p)
    return;
  g_string_free (p->role, TRUE);
  g_string_free (p->channel, TRUE);
  g_string_free (p->constrain, TRUE);
  g_free (p->role_word);
  g_free (p->channel_word);
  g_free (p->recipient);
  g_free (p->constraint);
  g_free (p);
}

void
npu_harmony_parser_reset (NpuHarmonyParser * p)
{
  /* the prompt ended with the generation header "<|start|>assistant" */
  new_header (p, "assistant");
  set_str (&p->role_word, g_strdup (""));
  set_str (&p->channel_word, g_strdup (""));
  set_str (&p->recipient, g_strdup (""));
  set_str (&p->constraint, g_strdup (""));
  p->state = STATE_RAW;
  p->call = FALSE;
  p->body = NPU_HARMONY_FINAL;
}

static void
push_token (NpuHarmonyParser * p, const gchar * t)
{
  if (strcmp (t, "<|return|>") == 0 || strcmp (t, "<|call|>") == 0) {
    p->call = t[2] == 'c';
    p->state = STATE_DONE;
  } else if (strcmp (t, "<|start|>") == 0) {
    new_header (p, "");
    p->state = STATE_ROLE;
  } else if (strcmp (t, "<|channel|>") == 0) {
    /* a channel straight after a message body or <|end|> (a model that
     * skipped "<|end|><|start|>assistant") opens the assistant's next
     * message; inside a header it names that header's channel */
    if (p->state == STATE_BODY || p->state == STATE_BETWEEN)
      new_header (p, "assistant");
    else if (p->state == STATE_RAW)
      new_header (p, p->role->str);
    g_string_truncate (p->channel, 0);
    p->state = STATE_CHANNEL;
  } else if (strcmp (t, "<|constrain|>") == 0) {
    if (p->state == STATE_ROLE || p->state == STATE_CHANNEL
        || p->state == STATE_RAW)
      p->state = STATE_CONSTRAIN;
  } else if (strcmp (t, "<|message|>") == 0) {
    /* a second <|message|> inside a body is framing */
    if (p->state != STATE_BODY) {
      if (p->state == STATE_BETWEEN)
        new_header (p, "assistant");
      start_body (p);
    }
  } else if (strcmp (t, "<|end|>") == 0) {
    p->state = STATE_BETWEEN;
  }
}

NpuHarmonyChannel
npu_harmony_parser_push (NpuHarmonyParser * p, const gchar * piece,
    gsize len, gboolean special)
{
  g_return_val_if_fail (p != NULL, NPU_HARMONY_FRAMING);

  if (p->state == STATE_DONE)
    return NPU_HARMONY_FRAMING;
  if (npu_harmony_is_token (piece, len)) {
    gchar *t = g_strndup (piece, len);

    push_token (p, t);
    g_free (t);
    return NPU_HARMONY_FRAMING;
  }
  if (special)
    return NPU_HARMONY_FRAMING;
  switch (p->state) {
    case STATE_RAW:
      return NPU_HARMONY_FINAL;
    case STATE_ROLE:
      g_string_append_len (p->role, piece, len);
      return NPU_HARMONY_FRAMING;
    case STATE_CHANNEL:
      g_string_append_len (p->channel, piece, len);
      return NPU_HARMONY_FRAMING;
    case STATE_CONSTRAIN:
      g_string_append_len (p->constrain, piece, len);
      return NPU_HARMONY_FRAMING;
    case STATE_BODY:
      return p->body;
    case STATE_BETWEEN:
    case STATE_DONE:
    default:
      return NPU_HARMONY_FRAMING;
  }
}

gboolean
npu_harmony_parser_is_done (const NpuHarmonyParser * p)
{
  return p->state == STATE_DONE;
}

gboolean
npu_harmony_parser_is_call (const NpuHarmonyParser * p)
{
  return p->state == STATE_DONE && p->call;
}

const gchar *
npu_harmony_parser_get_role (const NpuHarmonyParser * p)
{
  return p->role_word;
}

const gchar *
npu_harmony_parser_get_channel_name (const NpuHarmonyParser * p)
{
  return p->channel_word;
}

const gchar *
npu_harmony_parser_get_recipient (const NpuHarmonyParser * p)
{
  return p->recipient;
}

const gchar *
npu_harmony_parser_get_constraint (const NpuHarmonyParser * p)
{
  return p->constraint;
}

const gchar *
npu_harmony_channel_name (NpuHarmonyChannel channel)
{
  switch (channel) {
    case NPU_HARMONY_FINAL:
      return "final";
    case NPU_HARMONY_ANALYSIS:
      return "analysis";
    case NPU_HARMONY_COMMENTARY:
      return "commentary";
    case NPU_HARMONY_OTHER:
      return "other";
    case NPU_HARMONY_FRAMING:
    default:
      return "framing";
  }
}
