/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: chat prompt formatting
 *
 * Each family writes what its reference template renders for [system?,
 * user]; the templates are quoted in the comments so a reader can check.
 */
#include "npuchat.h"

#include <string.h>

G_DEFINE_QUARK (npu - chat - error - quark, npu_chat_error);

struct _NpuChatTemplate
{
  NpuChatFamily family;
  gchar *bos_text;
  gchar *default_system;
  gchar *format;                /* NPU_CHAT_CUSTOM, escapes interpreted */
};

#define QWEN2_DEFAULT_SYSTEM "You are a helpful assistant."

NpuChatTemplate *
npu_chat_template_new (NpuChatFamily family, const gchar * bos_text)
{
  NpuChatTemplate *t;

  g_return_val_if_fail (family != NPU_CHAT_CUSTOM, NULL);
  t = g_new0 (NpuChatTemplate, 1);
  t->family = family;
  if (bos_text)
    t->bos_text = g_strdup (bos_text);
  else if (family == NPU_CHAT_LLAMA3)
    t->bos_text = g_strdup ("<|begin_of_text|>");
  else if (family == NPU_CHAT_LLAMA2)
    t->bos_text = g_strdup ("<s>");
  else if (family == NPU_CHAT_GEMMA)
    t->bos_text = g_strdup ("<bos>");
  return t;
}

NpuChatTemplate *
npu_chat_template_new_from_name (const gchar * name, GError ** error)
{
  NpuChatTemplate *t;

  g_return_val_if_fail (name != NULL, NULL);
  if (g_ascii_strcasecmp (name, "none") == 0
      || g_ascii_strcasecmp (name, "completion") == 0)
    return npu_chat_template_new (NPU_CHAT_NONE, NULL);
  if (g_ascii_strcasecmp (name, "chatml") == 0)
    return npu_chat_template_new (NPU_CHAT_CHATML, NULL);
  if (g_ascii_strcasecmp (name, "qwen2") == 0) {
    t = npu_chat_template_new (NPU_CHAT_CHATML, NULL);
    t->default_system = g_strdup (QWEN2_DEFAULT_SYSTEM);
    return t;
  }
  if (g_ascii_strcasecmp (name, "llama3") == 0)
    return npu_chat_template_new (NPU_CHAT_LLAMA3, NULL);
  if (g_ascii_strcasecmp (name, "llama2") == 0)
    return npu_chat_template_new (NPU_CHAT_LLAMA2, NULL);
  if (g_ascii_strcasecmp (name, "gemma") == 0)
    return npu_chat_template_new (NPU_CHAT_GEMMA, NULL);
  if (g_ascii_strcasecmp (name, "harmony") == 0)
    return npu_chat_template_new (NPU_CHAT_HARMONY, NULL);
  g_set_error (error, NPU_CHAT_ERROR, NPU_CHAT_ERROR_UNKNOWN_TEMPLATE,
      "unknown chat template family \"%s\" (known: none, completion, chatml, "
      "qwen2, llama3, llama2, gemma, harmony)", name);
  return NULL;
}

NpuChatTemplate *
npu_chat_template_new_custom (const gchar * format, GError ** error)
{
  NpuChatTemplate *t;
  gchar *f;

  g_return_val_if_fail (format != NULL, NULL);
  f = g_strcompress (format);
  if (!strstr (f, "{prompt}")) {
    g_set_error (error, NPU_CHAT_ERROR, NPU_CHAT_ERROR_INVALID,
        "chat format \"%s\" has no {prompt} placeholder", format);
    g_free (f);
    return NULL;
  }
  t = g_new0 (NpuChatTemplate, 1);
  t->family = NPU_CHAT_CUSTOM;
  t->format = f;
  return t;
}

/* ChatML templates that add a system turn when the first message is not
 * one (Qwen2-Instruct:
 *   {% if loop.first and messages[0]['role'] != 'system' %}
 *   {{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}
 *   {% endif %}
 * where "\n" is a Jinja string escape; Qwen2-VL writes the same as raw
 * template text with real newlines).  We take the literal text between
 * "<|im_start|>system" + newline and "<|im_end|>", provided it is plain
 * text and not an expression (e.g. '+ message['content'] +'). */
static gchar *
chatml_default_system (const gchar * tpl)
{
  static const gchar head[] = "<|im_start|>system";
  const gchar *p = tpl;

  while ((p = strstr (p, head))) {
    const gchar *s = p + strlen (head), *e;

    p = s;
    if (g_str_has_prefix (s, "\\n"))
      s += 2;
    else if (*s == '\n')
      s += 1;
    else
      continue;
    e = strstr (s, "<|im_end|>");
    if (!e || e == s)
      continue;
    {
      gchar *lit = g_strndup (s, e - s);
      gchar *out = NULL;

      if (!strpbrk (lit, "'\"{}+"))
        out = g_strcompress (lit);
      g_free (lit);
      if (out)
        return out;
    }
  }
  return NULL;
}

NpuChatTemplate *
npu_chat_template_new_from_gguf (const NpuGguf * gguf,
    const NpuTokenizer * tok, GError ** error)
{
  const gchar *tpl, *bos = NULL;
  NpuChatTemplate *t;

  g_return_val_if_fail (gguf != NULL, NULL);
  if (tok && npu_tokenizer_get_bos (tok) >= 0)
    bos = npu_tokenizer_token_text (tok, npu_tokenizer_get_bos (tok));
  tpl = npu_gguf_get_string (gguf, "tokenizer.chat_template", NULL, NULL);
  if (!tpl || !*tpl)
    return npu_chat_template_new (NPU_CHAT_NONE, NULL);
  if (strstr (tpl, "<|im_start|>")) {
    t = npu_chat_template_new (NPU_CHAT_CHATML, NULL);
    t->default_system = chatml_default_system (tpl);
    return t;
  }
  if (strstr (tpl, "<|start_header_id|>"))
    return npu_chat_template_new (NPU_CHAT_LLAMA3, bos);
  if (strstr (tpl, "[INST]"))
    return npu_chat_template_new (NPU_CHAT_LLAMA2, bos);
  if (strstr (tpl, "<start_of_turn>"))
    return npu_chat_template_new (NPU_CHAT_GEMMA, bos);
  /* llama.cpp's test for gpt-oss's template (LLM_CHAT_TEMPLATE_OPENAI_MOE) */
  if (strstr (tpl, "<|start|>") && strstr (tpl, "<|channel|>"))
    return npu_chat_template_new (NPU_CHAT_HARMONY, NULL);
  g_set_error (error, NPU_CHAT_ERROR, NPU_CHAT_ERROR_UNKNOWN_TEMPLATE,
      "tokenizer.chat_template is of no family we know (ChatML, Llama 3, "
      "Llama 2, Gemma, harmony); set a chat format or use completion");
  return NULL;
}

void
npu_chat_template_free (NpuChatTemplate * tmpl)
{
  if (!tmpl)
    return;
  g_free (tmpl->bos_text);
  g_free (tmpl->default_system);
  g_free (tmpl->format);
  g_free (tmpl);
}

NpuChatFamily
npu_chat_template_get_family (const NpuChatTemplate * tmpl)
{
  g_return_val_if_fail (tmpl != NULL, NPU_CHAT_NONE);
  return tmpl->family;
}

const gchar *
npu_chat_family_name (NpuChatFamily family)
{
  switch (family) {
    case NPU_CHAT_NONE:
      return "none";
    case NPU_CHAT_CHATML:
      return "chatml";
    case NPU_CHAT_LLAMA3:
      return "llama3";
    case NPU_CHAT_LLAMA2:
      return "llama2";
    case NPU_CHAT_GEMMA:
      return "gemma";
    case NPU_CHAT_HARMONY:
      return "harmony";
    case NPU_CHAT_CUSTOM:
      return "custom";
  }
  return NULL;
}

const gchar *
npu_chat_template_get_default_system (const NpuChatTemplate * tmpl)
{
  g_return_val_if_fail (tmpl != NULL, NULL);
  return tmpl->default_system;
}

gboolean
npu_chat_template_has_bos (const NpuChatTemplate * tmpl)
{
  g_return_val_if_fail (tmpl != NULL, FALSE);
  return tmpl->family == NPU_CHAT_LLAMA3 || tmpl->family == NPU_CHAT_LLAMA2
      || tmpl->family == NPU_CHAT_GEMMA;
}

/* Python's str.strip() / Jinja's trim: ASCII and Unicode white space at
 * both ends (g_strstrip only knows ASCII) */
static gchar *
strip_ws (const gchar * s)
{
  const gchar *b = s, *e = s + strlen (s);

  while (b < e && g_unichar_isspace (g_utf8_get_char (b)))
    b = g_utf8_next_char (b);
  while (e > b) {
    const gchar *prev = g_utf8_prev_char (e);
    if (!g_unichar_isspace (g_utf8_get_char (prev)))
      break;
    e = prev;
  }
  return g_strndup (b, e - b);
}

/* Replaces every occurrence of @key in @s */
static void
replace_all (GString * s, const gchar * key, const gchar * value)
{
  gsize klen = strlen (key), vlen = strlen (value), pos = 0;
  const gchar *m;

  while ((m = strstr (s->str + pos, key))) {
    gsize at = m - s->str;
    g_string_erase (s, at, klen);
    g_string_insert (s, at, value);
    pos = at + vlen;
  }
}

gchar *
npu_chat_format (const NpuChatTemplate * tmpl, const gchar * system,
    const gchar * user, gboolean add_generation_prompt)
{
  GString *out = g_string_new (NULL);

  g_return_val_if_fail (tmpl != NULL && user != NULL, NULL);
  if (!system)
    system = tmpl->default_system;

  switch (tmpl->family) {
    case NPU_CHAT_NONE:
      if (system && *system)
        g_string_append_printf (out, "%s\n\n", system);
      g_string_append (out, user);
      break;

    case NPU_CHAT_CHATML:
      /* {% for message in messages %}{{'<|im_start|>' + message['role']
       * + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}
       * {% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}
       * {% endif %}  -- content verbatim, no trimming */
      if (system)
        g_string_append_printf (out, "<|im_start|>system\n%s<|im_end|>\n",
            system);
      g_string_append_printf (out, "<|im_start|>user\n%s<|im_end|>\n", user);
      if (add_generation_prompt)
        g_string_append (out, "<|im_start|>assistant\n");
      break;

    case NPU_CHAT_LLAMA3:{
      /* Meta-Llama-3-Instruct: {% set content = '<|start_header_id|>' +
       * message['role'] + '<|end_header_id|>\n\n' + message['content'] |
       * trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content =
       * bos_token + content %}{% endif %}{{ content }} ... {% if
       * add_generation_prompt %}{{ '<|start_header_id|>assistant
       * <|end_header_id|>\n\n' }}{% endif %} */
      gchar *u = strip_ws (user);

      g_string_append (out, tmpl->bos_text);
      if (system) {
        gchar *s = strip_ws (system);
        g_string_append_printf (out,
            "<|start_header_id|>system<|end_header_id|>\n\n%s<|eot_id|>", s);
        g_free (s);
      }
      g_string_append_printf (out,
          "<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>", u);
      if (add_generation_prompt)
        g_string_append (out,
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
      g_free (u);
      break;
    }

    case NPU_CHAT_LLAMA2:{
      /* Llama-2-chat: the system message goes into the first user turn,
       * content = '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + content, then
       * {{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}; there
       * is no generation prompt to add */
      gchar *content = system ?
          g_strdup_printf ("<<SYS>>\n%s\n<</SYS>>\n\n%s", system, user) :
          g_strdup (user);
      gchar *c = strip_ws (content);

      g_string_append_printf (out, "%s[INST] %s [/INST]", tmpl->bos_text, c);
      g_free (c);
      g_free (content);
      break;
    }

    case NPU_CHAT_GEMMA:{
      /* Gemma 3: {{ bos_token }}, a system message becomes
       * first_user_prefix = messages[0]['content'] + '\n\n' (not trimmed),
       * then {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if
       * loop.first else "") }}{{ message['content'] | trim }}
       * {{ '<end_of_turn>\n' }}, and {% if add_generation_prompt %}
       * {{'<start_of_turn>model\n'}}{% endif %} */
      gchar *u = strip_ws (user);

      g_string_append_printf (out, "%s<start_of_turn>user\n", tmpl->bos_text);
      if (system)
        g_string_append_printf (out, "%s\n\n", system);
      g_string_append_printf (out, "%s<end_of_turn>\n", u);
      if (add_generation_prompt)
        g_string_append (out, "<start_of_turn>model\n");
      g_free (u);
      break;
    }
    case NPU_CHAT_HARMONY:
      /* llama.cpp's rendering of gpt-oss's template (llama-chat.cpp,
       * LLM_CHAT_TEMPLATE_OPENAI_MOE): '<|start|>' + role + '<|message|>'
       * + content + '<|end|>' per message, content verbatim, then
       * '<|start|>assistant'; the model names its channel itself */
      if (system)
        g_string_append_printf (out, "<|start|>system<|message|>%s<|end|>",
            system);
      g_string_append_printf (out, "<|start|>user<|message|>%s<|end|>", user);
      if (add_generation_prompt)
        g_string_append (out, "<|start|>assistant");
      break;

    case NPU_CHAT_CUSTOM:
      g_string_assign (out, tmpl->format);
      /* {prompt} first, so that a "{system}" typed by the user in the
       * prompt is not expanded */
      {
        gchar *marker = g_strdup_printf ("\x01prompt-%p\x01", (void *) out);
        replace_all (out, "{prompt}", marker);
        replace_all (out, "{system}", system ? system : "");
        replace_all (out, marker, user);
        g_free (marker);
      }
      break;
  }
  return g_string_free (out, FALSE);
}

gchar *
npu_chat_format_next (const NpuChatTemplate * tmpl, const gchar * user,
    gboolean add_generation_prompt)
{
  GString *out;
  gchar *u, *turn;

  g_return_val_if_fail (tmpl != NULL && user != NULL, NULL);
  switch (tmpl->family) {
    case NPU_CHAT_NONE:
      return g_strconcat ("\n\n", user, NULL);

    case NPU_CHAT_CHATML:
      /* the assistant message closes with '<|im_end|>' + '\n' as every
       * other message of the loop */
      out = g_string_new ("<|im_end|>\n");
      g_string_append_printf (out, "<|im_start|>user\n%s<|im_end|>\n", user);
      if (add_generation_prompt)
        g_string_append (out, "<|im_start|>assistant\n");
      return g_string_free (out, FALSE);

    case NPU_CHAT_LLAMA3:
      /* content | trim + '<|eot_id|>'; only the first message gets
       * bos_token */
      u = strip_ws (user);
      out = g_string_new ("<|eot_id|>");
      g_string_append_printf (out,
          "<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>", u);
      if (add_generation_prompt)
        g_string_append (out,
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
      g_free (u);
      return g_string_free (out, FALSE);

    case NPU_CHAT_LLAMA2:
      /* assistant: ' ' + content.strip() + ' ' + eos_token; the next user
       * turn: bos_token + '[INST] ' + content.strip() + ' [/INST]' (the
       * system message went into the first user turn only) */
      u = strip_ws (user);
      turn = g_strdup_printf (" </s>%s[INST] %s [/INST]", tmpl->bos_text, u);
      g_free (u);
      return turn;

    case NPU_CHAT_GEMMA:
      /* the model's turn (role "model") closes with '<end_of_turn>\n' as
       * every message of the loop; only the first user turn gets
       * first_user_prefix */
      u = strip_ws (user);
      out = g_string_new ("<end_of_turn>\n");
      g_string_append_printf (out, "<start_of_turn>user\n%s<end_of_turn>\n", u);
      if (add_generation_prompt)
        g_string_append (out, "<start_of_turn>model\n");
      g_free (u);
      return g_string_free (out, FALSE);

    case NPU_CHAT_HARMONY:
      /* llama.cpp closes an assistant message with '<|return|>' */
      out = g_string_new ("<|return|>");
      g_string_append_printf (out, "<|start|>user<|message|>%s<|end|>", user);
      if (add_generation_prompt)
        g_string_append (out, "<|start|>assistant");
      return g_string_free (out, FALSE);

    case NPU_CHAT_CUSTOM:
    default:
      return npu_chat_format (tmpl, "", user, add_generation_prompt);
  }
}
