/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: a small strict JSON reader (see npujson.h) */
#include "npujson.h"

#include <errno.h>
#include <string.h>

GQuark
npu_json_error_quark (void)
{
  return g_quark_from_static_string ("npu-json-error-quark");
}

struct _NpuJson
{
  NpuJsonType type;
  gboolean is_int;              /* NUMBER: written without fraction or
                                 * exponent, and @i holds it */
  union
  {
    gboolean b;
    struct
    {
      gdouble d;
      gint64 i;
    } num;
    gchar *s;
    struct
    {
      NpuJson **items;
      gchar **keys;             /* OBJECT only */
      guint n;
    } c;
  } v;
};

typedef struct
{
  const guint8 *p;
  gsize len, pos;
  const gchar *what;
  GString *buf;
} Parser;

static gboolean
G_GNUC_PRINTF (3, 4)
perr (Parser * ps, GError ** error, const gchar * fmt, ...)
{
  va_list ap;
  gchar *msg;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, NPU_JSON_ERROR, NPU_JSON_ERROR_SYNTAX,
      "%s: JSON at byte %" G_GSIZE_FORMAT ": %s", ps->what, ps->pos, msg);
  g_free (msg);
  return FALSE;
}

static void
skip_ws (Parser * ps)
{
  while (ps->pos < ps->len && (ps->p[ps->pos] == ' ' || ps->p[ps->pos] == '\t'
          || ps->p[ps->pos] == '\n' || ps->p[ps->pos] == '\r'))
    ps->pos++;
}

static gint
hex4 (Parser * ps)
{
  gint v = 0, k, d;

  if (ps->len - ps->pos < 4)
    return -1;
  for (k = 0; k < 4; k++) {
    d = g_ascii_xdigit_value (ps->p[ps->pos + k]);
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  ps->pos += 4;
  return v;
}

/* One \u escape (after the 'u'), a surrogate pair joined */
static gboolean
unicode_escape (Parser * ps, GError ** error)
{
  gint u = hex4 (ps), lo;

  if (u < 0)
    return perr (ps, error, "bad \\u escape");
  if (u >= 0xDC00 && u <= 0xDFFF)
    return perr (ps, error, "lone low surrogate \\u%04X", u);
  if (u >= 0xD800 && u <= 0xDBFF) {
    if (ps->len - ps->pos < 2 || ps->p[ps->pos] != '\\'
        || ps->p[ps->pos + 1] != 'u')
      return perr (ps, error, "lone high surrogate \\u%04X", u);
    ps->pos += 2;
    lo = hex4 (ps);
    if (lo < 0xDC00 || lo > 0xDFFF)
      return perr (ps, error, "high surrogate \\u%04X without a low one", u);
    u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
  }
  if (u == 0)
    return perr (ps, error, "\\u0000 in a string");
  g_string_append_unichar (ps->buf, u);
  return TRUE;
}

/* A string (the opening quote next) into ps->buf */
static gboolean
parse_string (Parser * ps, GError ** error)
{
  static const gchar plain[] = "\"\\/bfnrt", meant[] = "\"\\/\b\f\n\r\t";
  gsize start;

  g_string_truncate (ps->buf, 0);
  start = ++ps->pos;
  for (;;) {
    guint8 c;
    const gchar *e;

    if (ps->pos >= ps->len)
      return perr (ps, error, "unterminated string");
    c = ps->p[ps->pos++];
    if (c == '"')
      break;
    if (c < 0x20) {
      ps->pos--;
      return perr (ps, error, "control character 0x%02x in a string", c);
    }
    if (c != '\\') {
      g_string_append_c (ps->buf, c);
      continue;
    }
    if (ps->pos >= ps->len)
      return perr (ps, error, "unterminated string");
    c = ps->p[ps->pos++];
    if (c == 'u') {
      if (!unicode_escape (ps, error))
        return FALSE;
    } else if (c != 0 && (e = strchr (plain, c)) != NULL) {
      g_string_append_c (ps->buf, meant[e - plain]);
    } else {
      ps->pos--;
      return perr (ps, error, "bad escape '\\%c'", g_ascii_isprint (c) ?
          c : '?');
    }
  }
  if (!g_utf8_validate_len (ps->buf->str, ps->buf->len, NULL)) {
    ps->pos = start;
    return perr (ps, error, "string is not valid UTF-8");
  }
  return TRUE;
}

static gsize
digits (Parser * ps)
{
  gsize start = ps->pos;

  while (ps->pos < ps->len && g_ascii_isdigit (ps->p[ps->pos]))
    ps->pos++;
  return ps->pos - start;
}

static gboolean
parse_number (Parser * ps, NpuJson * v, GError ** error)
{
  gsize start = ps->pos, n;
  gboolean integral = TRUE;
  gchar *text, *end;

  if (ps->p[ps->pos] == '-')
    ps->pos++;
  n = digits (ps);
  if (n == 0)
    return perr (ps, error, "expected a value");
  if (n > 1 && ps->p[ps->pos - n] == '0')
    return perr (ps, error, "number with a leading zero");
  if (ps->pos < ps->len && ps->p[ps->pos] == '.') {
    ps->pos++;
    integral = FALSE;
    if (digits (ps) == 0)
      return perr (ps, error, "no digits after the decimal point");
  }
  if (ps->pos < ps->len && (ps->p[ps->pos] == 'e' || ps->p[ps->pos] == 'E')) {
    ps->pos++;
    integral = FALSE;
    if (ps->pos < ps->len && (ps->p[ps->pos] == '+' || ps->p[ps->pos] == '-'))
      ps->pos++;
    if (digits (ps) == 0)
      return perr (ps, error, "no digits in the exponent");
  }
  text = g_strndup ((const gchar *) ps->p + start, ps->pos - start);
  v->type = NPU_JSON_NUMBER;
  v->v.num.d = g_ascii_strtod (text, NULL);
  if (integral) {
    errno = 0;
    v->v.num.i = g_ascii_strtoll (text, &end, 10);
    v->is_int = errno == 0 && *end == '\0';
  }
  g_free (text);
  return TRUE;
}

static gboolean
parse_literal (Parser * ps, NpuJson * v, GError ** error)
{
  static const struct
  {
    const gchar *text;
    NpuJsonType type;
    gboolean b;
  } lits[] = {
    {"true", NPU_JSON_BOOL, TRUE},
    {"false", NPU_JSON_BOOL, FALSE},
    {"null", NPU_JSON_NULL, FALSE},
  };
  guint k;

  for (k = 0; k < G_N_ELEMENTS (lits); k++) {
    gsize n = strlen (lits[k].text);

    if (ps->len - ps->pos >= n && memcmp (ps->p + ps->pos, lits[k].text,
            n) == 0) {
      ps->pos += n;
      v->type = lits[k].type;
      v->v.b = lits[k].b;
      return TRUE;
    }
  }
  return perr (ps, error, "expected a value");
}

static gboolean parse_value (Parser * ps, NpuJson * v, guint depth,
    GError ** error);

/* An array or object (the opening bracket next) */
static gboolean
parse_container (Parser * ps, NpuJson * v, guint depth, GError ** error)
{
  gboolean is_object = ps->p[ps->pos] == '{';
  gchar close = is_object ? '}' : ']';
  GPtrArray *items = g_ptr_array_new ();
  GPtrArray *keys = is_object ? g_ptr_array_new () : NULL;
  gboolean ok = TRUE;

  v->type = is_object ? NPU_JSON_OBJECT : NPU_JSON_ARRAY;
  if (depth >= NPU_JSON_MAX_DEPTH)
    ok = perr (ps, error, "nested deeper than %u", NPU_JSON_MAX_DEPTH);
  ps->pos++;
  skip_ws (ps);
  if (ok && ps->pos < ps->len && ps->p[ps->pos] == close) {
    ps->pos++;
    goto done;
  }
  while (ok) {
    NpuJson *item;

    skip_ws (ps);
    if (is_object) {
      if (ps->pos >= ps->len || ps->p[ps->pos] != '"') {
        ok = perr (ps, error, "expected a member name");
        break;
      }
      if (!(ok = parse_string (ps, error)))
        break;
      g_ptr_array_add (keys, g_strndup (ps->buf->str, ps->buf->len));
      skip_ws (ps);
      if (ps->pos >= ps->len || ps->p[ps->pos] != ':') {
        ok = perr (ps, error, "expected ':'");
        break;
      }
      ps->pos++;
    }
    item = g_new0 (NpuJson, 1);
    g_ptr_array_add (items, item);
    if (!(ok = parse_value (ps, item, depth + 1, error)))
      break;
    skip_ws (ps);
    if (ps->pos < ps->len && ps->p[ps->pos] == ',') {
      ps->pos++;
      continue;
    }
    if (ps->pos < ps->len && ps->p[ps->pos] == close) {
      ps->pos++;
      break;
    }
    ok = perr (ps, error, "expected ',' or '%c'", close);
  }
done:
  v->v.c.n = items->len;
  v->v.c.items = (NpuJson **) g_ptr_array_free (items, FALSE);
  if (keys) {
    /* a member whose name was read but whose value was not has no item */
    while (keys->len > v->v.c.n)
      g_free (g_ptr_array_steal_index (keys, keys->len - 1));
    v->v.c.keys = (gchar **) g_ptr_array_free (keys, FALSE);
  }
  return ok;
}

static gboolean
parse_value (Parser * ps, NpuJson * v, guint depth, GError ** error)
{
  guint8 c;

  skip_ws (ps);
  if (ps->pos >= ps->len)
    return perr (ps, error, "text ends where a value was expected");
  c = ps->p[ps->pos];
  if (c == '{' || c == '[')
    return parse_container (ps, v, depth, error);
  if (c == '"') {
    if (!parse_string (ps, error))
      return FALSE;
    v->type = NPU_JSON_STRING;
    v->v.s = g_strndup (ps->buf->str, ps->buf->len);
    return TRUE;
  }
  if (c == '-' || g_ascii_isdigit (c))
    return parse_number (ps, v, error);
  return parse_literal (ps, v, error);
}

static void
clear (NpuJson * v)
{
  guint i;

  if (v->type == NPU_JSON_STRING) {
    g_free (v->v.s);
  } else if (v->type == NPU_JSON_ARRAY || v->type == NPU_JSON_OBJECT) {
    for (i = 0; i < v->v.c.n; i++) {
      clear (v->v.c.items[i]);
      g_free (v->v.c.items[i]);
      if (v->v.c.keys)
        g_free (v->v.c.keys[i]);
    }
    g_free (v->v.c.items);
    g_free (v->v.c.keys);
  }
}

NpuJson *
npu_json_parse (const gchar * text, gsize len, const gchar * what,
    GError ** error)
{
  Parser ps = { (const guint8 *) text, len, 0, what, g_string_new (NULL) };
  NpuJson *root = g_new0 (NpuJson, 1);
  gboolean ok;

  g_return_val_if_fail (text != NULL || len == 0, NULL);

  ok = parse_value (&ps, root, 0, error);
  if (ok) {
    skip_ws (&ps);
    if (ps.pos != ps.len)
      ok = perr (&ps, error, "text after the value");
  }
  g_string_free (ps.buf, TRUE);
  if (!ok) {
    npu_json_free (root);
    return NULL;
  }
  return root;
}

NpuJson *
npu_json_parse_file (const gchar * path, GError ** error)
{
  gchar *text, *base;
  gsize len;
  NpuJson *root;

  if (!g_file_get_contents (path, &text, &len, error))
    return NULL;
  base = g_path_get_basename (path);
  root = npu_json_parse (text, len, base, error);
  g_free (base);
  g_free (text);
  return root;
}

void
npu_json_free (NpuJson * root)
{
  if (!root)
    return;
  clear (root);
  g_free (root);
}

NpuJsonType
npu_json_type (const NpuJson * v)
{
  g_return_val_if_fail (v != NULL, NPU_JSON_NULL);
  return v->type;
}

guint
npu_json_size (const NpuJson * v)
{
  if (!v || (v->type != NPU_JSON_ARRAY && v->type != NPU_JSON_OBJECT))
    return 0;
  return v->v.c.n;
}

const NpuJson *
npu_json_at (const NpuJson * v, guint i)
{
  if (i >= npu_json_size (v))
    return NULL;
  return v->v.c.items[i];
}

const gchar *
npu_json_key_at (const NpuJson * v, guint i)
{
  if (!v || v->type != NPU_JSON_OBJECT || i >= v->v.c.n)
    return NULL;
  return v->v.c.keys[i];
}

const NpuJson *
npu_json_member (const NpuJson * v, const gchar * key)
{
  guint i;

  if (!v || v->type != NPU_JSON_OBJECT)
    return NULL;
  for (i = 0; i < v->v.c.n; i++)
    if (strcmp (v->v.c.keys[i], key) == 0)
      return v->v.c.items[i];
  return NULL;
}

const gchar *
npu_json_string (const NpuJson * v)
{
  return v && v->type == NPU_JSON_STRING ? v->v.s : NULL;
}

gboolean
npu_json_number (const NpuJson * v, gdouble * out)
{
  if (!v || v->type != NPU_JSON_NUMBER)
    return FALSE;
  *out = v->v.num.d;
  return TRUE;
}

gboolean
npu_json_int (const NpuJson * v, gint64 * out)
{
  if (!v || v->type != NPU_JSON_NUMBER || !v->is_int)
    return FALSE;
  *out = v->v.num.i;
  return TRUE;
}

gboolean
npu_json_bool (const NpuJson * v, gboolean * out)
{
  if (!v || v->type != NPU_JSON_BOOL)
    return FALSE;
  *out = v->v.b;
  return TRUE;
}
