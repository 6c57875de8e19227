/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: safetensors model file reader
 *
 * The JSON parser below is deliberately small and strict rather than a
 * general JSON library: it reads straight into the tensor table, so a
 * hostile header cannot make it build large intermediate trees, and each
 * allocation it makes is bounded by the header bytes it has consumed.
 */
#include "npusafetensors.h"
#include "npufilemap.h"
#include "npugguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NAME_IN_MESSAGE 80

struct _NpuSafetensors
{
  gchar *name;
  int fd;
  const guint8 *base;
  gsize size;
  gboolean mapped;
  gsize data_offset;

  GArray *tensors;              /* NpuSafetensorsTensor */
  GHashTable *tensor_index;     /* name -> index + 1 */
  GPtrArray *meta_keys;         /* gchar * into strings */
  GHashTable *meta;             /* key -> value */
  GStringChunk *strings;
};

typedef struct
{
  NpuSafetensors *st;
  const guint8 *p;              /* JSON text */
  gsize len;
  gsize pos;
  GString *buf;                 /* last decoded string */
} Json;

GQuark
npu_safetensors_error_quark (void)
{
  return g_quark_from_static_string ("npu-safetensors-error-quark");
}

static const struct
{
  const gchar *name;
  gsize size;
} dtypes[] = {
  [NPU_SAFETENSORS_DTYPE_BOOL] = {"BOOL", 1},
  [NPU_SAFETENSORS_DTYPE_U8] = {"U8", 1},
  [NPU_SAFETENSORS_DTYPE_I8] = {"I8", 1},
  [NPU_SAFETENSORS_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
  [NPU_SAFETENSORS_DTYPE_F8_E4M3] = {"F8_E4M3", 1},
  [NPU_SAFETENSORS_DTYPE_F8_E8M0] = {"F8_E8M0", 1},
  [NPU_SAFETENSORS_DTYPE_I16] = {"I16", 2},
  [NPU_SAFETENSORS_DTYPE_U16] = {"U16", 2},
  [NPU_SAFETENSORS_DTYPE_F16] = {"F16", 2},
  [NPU_SAFETENSORS_DTYPE_BF16] = {"BF16", 2},
  [NPU_SAFETENSORS_DTYPE_I32] = {"I32", 4},
  [NPU_SAFETENSORS_DTYPE_U32] = {"U32", 4},
  [NPU_SAFETENSORS_DTYPE_F32] = {"F32", 4},
  [NPU_SAFETENSORS_DTYPE_F64] = {"F64", 8},
  [NPU_SAFETENSORS_DTYPE_I64] = {"I64", 8},
  [NPU_SAFETENSORS_DTYPE_U64] = {"U64", 8},
};

const gchar *
npu_safetensors_dtype_name (NpuSafetensorsDtype dtype)
{
  if ((guint) dtype >= G_N_ELEMENTS (dtypes))
    return NULL;
  return dtypes[dtype].name;
}

gsize
npu_safetensors_dtype_size (NpuSafetensorsDtype dtype)
{
  if ((guint) dtype >= G_N_ELEMENTS (dtypes))
    return 0;
  return dtypes[dtype].size;
}

gint
npu_safetensors_dtype_ggml_type (NpuSafetensorsDtype dtype)
{
  switch (dtype) {
    case NPU_SAFETENSORS_DTYPE_F32:
      return NPU_GGML_TYPE_F32;
    case NPU_SAFETENSORS_DTYPE_F16:
      return NPU_GGML_TYPE_F16;
    case NPU_SAFETENSORS_DTYPE_BF16:
      return NPU_GGML_TYPE_BF16;
    default:
      return -1;
  }
}

static gchar *
describe (const gchar * s)
{
  gsize len = strlen (s);
  gboolean truncated = len > MAX_NAME_IN_MESSAGE;
  gchar *cut, *esc, *ret;

  /* Names are valid UTF-8; cutting may split a character, which the
   * escaping below turns into octal rather than emitting a broken one */
  cut = g_strndup (s, truncated ? MAX_NAME_IN_MESSAGE : len);
  esc = g_strescape (cut, NULL);
  ret = g_strdup_printf ("'%s'%s", esc, truncated ? "..." : "");
  g_free (esc);
  g_free (cut);
  return ret;
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */

/* Error at the current position, as a byte offset in the file */
static gboolean
G_GNUC_PRINTF (3, 4)
jerr (Json * j, GError ** error, const gchar * fmt, ...)
{
  va_list ap;
  gchar *msg;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
      "%s: header JSON at byte %" G_GSIZE_FORMAT ": %s", j->st->name,
      (gsize) 8 + j->pos, msg);
  g_free (msg);
  return FALSE;
}

static void
skip_ws (Json * j)
{
  while (j->pos < j->len && (j->p[j->pos] == ' ' || j->p[j->pos] == '\t'
          || j->p[j->pos] == '\n' || j->p[j->pos] == '\r'))
    j->pos++;
}

/* Skips whitespace, then consumes @c */
static gboolean
expect (Json * j, gchar c, const gchar * what, GError ** error)
{
  skip_ws (j);
  if (j->pos >= j->len)
    return jerr (j, error, "header ends where %s ('%c') was expected", what, c);
  if (j->p[j->pos] != (guint8) c)
    return jerr (j, error, "expected %s ('%c')", what, c);
  j->pos++;
  return TRUE;
}

/* Peeks the next non-blank byte, -1 at the end */
static gint
peek (Json * j)
{
  skip_ws (j);
  return j->pos < j->len ? j->p[j->pos] : -1;
}

static gint
hex4 (Json * j)
{
  gint v = 0, k, d;

  if (j->len - j->pos < 4)
    return -1;
  for (k = 0; k < 4; k++) {
    d = g_ascii_xdigit_value (j->p[j->pos + k]);
    if (d < 0)
      return -1;
    v = v * 16 + d;
  }
  j->pos += 4;
  return v;
}

/* Decodes a string into j->buf.  NUL (raw or \u0000) is rejected: names
 * and metadata are handed out as C strings. */
static gboolean
parse_string (Json * j, GError ** error)
{
  skip_ws (j);
  g_string_truncate (j->buf, 0);
  if (j->pos >= j->len || j->p[j->pos] != '"')
    return jerr (j, error, "expected a string");
  j->pos++;
  for (;;) {
    guint8 c;

    if (j->pos >= j->len)
      return jerr (j, error, "unterminated string");
    c = j->p[j->pos++];
    if (c == '"')
      break;
    if (c < 0x20) {
      j->pos--;
      return jerr (j, error, "control character 0x%02x in a string", c);
    }
    if (c != '\\') {
      g_string_append_c (j->buf, c);
      continue;
    }
    if (j->pos >= j->len)
      return jerr (j, error, "unterminated string");
    c = j->p[j->pos++];
    switch (c) {
      case '"':
      case '\\':
      case '/':
        g_string_append_c (j->buf, c);
        break;
      case 'b':
        g_string_append_c (j->buf, '\b');
        break;
      case 'f':
        g_string_append_c (j->buf, '\f');
        break;
      case 'n':
        g_string_append_c (j->buf, '\n');
        break;
      case 'r':
        g_string_append_c (j->buf, '\r');
        break;
      case 't':
        g_string_append_c (j->buf, '\t');
        break;
      case 'u':{
        gint u = hex4 (j), lo;

        if (u < 0)
          return jerr (j, error, "bad \\u escape");
        if (u >= 0xDC00 && u <= 0xDFFF)
          return jerr (j, error, "lone low surrogate \\u%04X", u);
        if (u >= 0xD800 && u <= 0xDBFF) {
          /* A high surrogate must be followed by an escaped low one */
          if (j->len - j->pos < 2 || j->p[j->pos] != '\\'
              || j->p[j->pos + 1] != 'u')
            return jerr (j, error, "lone high surrogate \\u%04X", u);
          j->pos += 2;
          lo = hex4 (j);
          if (lo < 0xDC00 || lo > 0xDFFF)
            return jerr (j, error, "high surrogate \\u%04X without a low "
                "one", u);
          u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (u == 0)
          return jerr (j, error, "\\u0000 in a string");
        g_string_append_unichar (j->buf, u);
        break;
      }
      default:
        j->pos--;
        return jerr (j, error, "bad escape '\\%c'", g_ascii_isprint (c) ?
            c : '?');
    }
  }
  if (!g_utf8_validate_len (j->buf->str, j->buf->len, NULL))
    return jerr (j, error, "string before this is not valid UTF-8");
  return TRUE;
}

/* A non-negative integer: digits only, no leading zero, no fraction or
 * exponent, at most 2^64 - 1 */
static gboolean
parse_uint (Json * j, guint64 * out, const gchar * what, GError ** error)
{
  guint64 v = 0;
  gsize start;

  skip_ws (j);
  start = j->pos;
  while (j->pos < j->len && g_ascii_isdigit (j->p[j->pos])) {
    guint d = j->p[j->pos] - '0';

    if (v > (G_MAXUINT64 - d) / 10)
      return jerr (j, error, "%s does not fit in 64 bits", what);
    v = v * 10 + d;
    j->pos++;
  }
  if (j->pos == start)
    return jerr (j, error, "%s must be a non-negative integer", what);
  if (j->pos - start > 1 && j->p[start] == '0') {
    j->pos = start;
    return jerr (j, error, "%s has a leading zero", what);
  }
  if (j->pos < j->len && (j->p[j->pos] == '.' || j->p[j->pos] == 'e'
          || j->p[j->pos] == 'E'))
    return jerr (j, error, "%s must be an integer", what);
  *out = v;
  return TRUE;
}

static gboolean
skip_literal (Json * j, const gchar * lit, GError ** error)
{
  gsize n = strlen (lit);

  if (j->len - j->pos < n || memcmp (j->p + j->pos, lit, n) != 0)
    return jerr (j, error, "unexpected character");
  j->pos += n;
  return TRUE;
}

/* RFC 8259 number grammar, value ignored */
static gboolean
skip_number (Json * j, GError ** error)
{
  gsize d;

  if (j->pos < j->len && j->p[j->pos] == '-')
    j->pos++;
  if (j->pos < j->len && j->p[j->pos] == '0')
    j->pos++;
  else {
    for (d = j->pos; j->pos < j->len && g_ascii_isdigit (j->p[j->pos]);)
      j->pos++;
    if (d == j->pos)
      return jerr (j, error, "bad number");
  }
  if (j->pos < j->len && j->p[j->pos] == '.') {
    j->pos++;
    for (d = j->pos; j->pos < j->len && g_ascii_isdigit (j->p[j->pos]);)
      j->pos++;
    if (d == j->pos)
      return jerr (j, error, "bad number");
  }
  if (j->pos < j->len && (j->p[j->pos] == 'e' || j->p[j->pos] == 'E')) {
    j->pos++;
    if (j->pos < j->len && (j->p[j->pos] == '+' || j->p[j->pos] == '-'))
      j->pos++;
    for (d = j->pos; j->pos < j->len && g_ascii_isdigit (j->p[j->pos]);)
      j->pos++;
    if (d == j->pos)
      return jerr (j, error, "bad number");
  }
  return TRUE;
}

/* Validates and skips any value; @depth is the depth the value would have
 * (containers count one level each) */
static gboolean
skip_value (Json * j, guint depth, GError ** error)
{
  gint c = peek (j);

  if (c == '{' || c == '[') {
    gchar close = c == '{' ? '}' : ']';

    if (depth > NPU_SAFETENSORS_MAX_JSON_DEPTH)
      return jerr (j, error, "nested deeper than %d",
          NPU_SAFETENSORS_MAX_JSON_DEPTH);
    j->pos++;
    if (peek (j) == close) {
      j->pos++;
      return TRUE;
    }
    for (;;) {
      if (close == '}') {
        if (!parse_string (j, error) || !expect (j, ':', "a colon", error))
          return FALSE;
      }
      if (!skip_value (j, depth + 1, error))
        return FALSE;
      c = peek (j);
      if (c == ',') {
        j->pos++;
        continue;
      }
      if (c == close) {
        j->pos++;
        return TRUE;
      }
      return jerr (j, error, "expected ',' or '%c'", close);
    }
  }
  if (c == '"')
    return parse_string (j, error);
  if (c == 't')
    return skip_literal (j, "true", error);
  if (c == 'f')
    return skip_literal (j, "false", error);
  if (c == 'n')
    return skip_literal (j, "null", error);
  if (c == '-' || (c >= '0' && c <= '9'))
    return skip_number (j, error);
  if (c < 0)
    return jerr (j, error, "header ends where a value was expected");
  return jerr (j, error, "unexpected character");
}

/* ------------------------------------------------------------------------ */

static gboolean
parse_metadata (Json * j, GError ** error)
{
  NpuSafetensors *st = j->st;

  if (!expect (j, '{', "the __metadata__ object", error))
    return FALSE;
  if (peek (j) == '}') {
    j->pos++;
    return TRUE;
  }
  for (;;) {
    gchar *key, *value;
    gint c;

    if (!parse_string (j, error))
      return FALSE;
    key = g_string_chunk_insert_len (st->strings, j->buf->str, j->buf->len);
    if (g_hash_table_contains (st->meta, key)) {
      gchar *d = describe (key);

      jerr (j, error, "duplicate __metadata__ key %s", d);
      g_free (d);
      return FALSE;
    }
    if (!expect (j, ':', "a colon", error))
      return FALSE;
    if (peek (j) != '"')
      return jerr (j, error, "__metadata__ values must be strings");
    if (!parse_string (j, error))
      return FALSE;
    value = g_string_chunk_insert_len (st->strings, j->buf->str, j->buf->len);
    g_hash_table_insert (st->meta, key, value);
    g_ptr_array_add (st->meta_keys, key);
    c = peek (j);
    if (c == ',') {
      j->pos++;
      continue;
    }
    if (c == '}') {
      j->pos++;
      return TRUE;
    }
    return jerr (j, error, "expected ',' or '}' in __metadata__");
  }
}

static gboolean
lookup_dtype (const gchar * s, NpuSafetensorsDtype * out)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (dtypes); i++) {
    if (strcmp (s, dtypes[i].name) == 0) {
      *out = i;
      return TRUE;
    }
  }
  return FALSE;
}

/* The value of a tensor's "dtype" key: one of dtypes[] */
static gboolean
parse_tensor_dtype (Json * j, const gchar * desc, NpuSafetensorsTensor * t,
    GError ** error)
{
  NpuSafetensors *st = j->st;

  if (peek (j) != '"')
    return jerr (j, error, "tensor %s: dtype must be a string", desc);
  if (!parse_string (j, error))
    return FALSE;
  if (!lookup_dtype (j->buf->str, &t->dtype)) {
    gchar *dt = describe (j->buf->str);

    g_set_error (error, NPU_SAFETENSORS_ERROR,
        NPU_SAFETENSORS_ERROR_UNSUPPORTED,
        "%s: tensor %s: unsupported dtype %s", st->name, desc, dt);
    g_free (dt);
    return FALSE;
  }
  return TRUE;
}

/* The value of a tensor's "shape" key: an array of at most
 * NPU_SAFETENSORS_MAX_DIMS unsigned integers */
static gboolean
parse_tensor_shape (Json * j, const gchar * desc, NpuSafetensorsTensor * t,
    GError ** error)
{
  gint c;

  if (!expect (j, '[', "the shape array", error))
    return FALSE;
  if (peek (j) == ']') {
    j->pos++;
    return TRUE;
  }
  for (;;) {
    if (t->n_dims == NPU_SAFETENSORS_MAX_DIMS)
      return jerr (j, error, "tensor %s: more than %d dimensions", desc,
          NPU_SAFETENSORS_MAX_DIMS);
    if (!parse_uint (j, &t->shape[t->n_dims], "a shape dimension", error))
      return FALSE;
    t->n_dims++;
    c = peek (j);
    if (c == ',') {
      j->pos++;
      continue;
    }
    if (c == ']') {
      j->pos++;
      return TRUE;
    }
    return jerr (j, error, "tensor %s: expected ',' or ']' in shape", desc);
  }
}

/* Checks that the data_offsets [@begin, @end) lie in the data section and
 * hold exactly the elements of @t's shape, then places @t there */
static gboolean
place_tensor (NpuSafetensors * st, const gchar * desc,
    NpuSafetensorsTensor * t, guint64 begin, guint64 end, GError ** error)
{
  guint64 n = 1, n_bytes;
  gsize data_size = st->size - st->data_offset;
  guint d;

  for (d = 0; d < t->n_dims; d++) {
    if (!g_uint64_checked_mul (&n, n, t->shape[d])) {
      g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
          "%s: tensor %s: element count overflows", st->name, desc);
      return FALSE;
    }
  }
  if (!g_uint64_checked_mul (&n_bytes, n, dtypes[t->dtype].size)
      || n_bytes > G_MAXSIZE) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: tensor %s: byte size overflows", st->name, desc);
    return FALSE;
  }
  if (begin > end || end > data_size) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: tensor %s: data_offsets [%" G_GUINT64_FORMAT ", %"
        G_GUINT64_FORMAT ") %s (the data section has %" G_GSIZE_FORMAT
        " bytes)", st->name, desc, begin, end, begin > end ?
        "are reversed" : "run past the end of the file", data_size);
    return FALSE;
  }
  if (end - begin != n_bytes) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: tensor %s: data_offsets [%" G_GUINT64_FORMAT ", %"
        G_GUINT64_FORMAT ") span %" G_GUINT64_FORMAT " bytes but %"
        G_GUINT64_FORMAT " %s elements need %" G_GUINT64_FORMAT, st->name,
        desc, begin, end, end - begin, n, dtypes[t->dtype].name, n_bytes);
    return FALSE;
  }
  t->n_elements = n;
  t->n_bytes = n_bytes;
  t->offset = st->data_offset + begin;
  t->data = st->base + t->offset;
  return TRUE;
}

/* Parses one tensor object and checks it against the data section */
static gboolean
parse_tensor (Json * j, const gchar * name, GError ** error)
{
  NpuSafetensors *st = j->st;
  NpuSafetensorsTensor t = { 0, };
  gboolean have_dtype = FALSE, have_shape = FALSE, have_offsets = FALSE;
  guint64 begin = 0, end = 0;
  gchar *desc = describe (name);
  gboolean ok = FALSE;
  gint c;

  t.name = name;
  if (!expect (j, '{', "a tensor object", error))
    goto out;
  if (peek (j) == '}') {
    jerr (j, error, "tensor %s: empty object", desc);
    goto out;
  }
  for (;;) {
    if (!parse_string (j, error) || !expect (j, ':', "a colon", error))
      goto out;
    if (strcmp (j->buf->str, "dtype") == 0) {
      if (have_dtype) {
        jerr (j, error, "tensor %s: duplicate dtype", desc);
        goto out;
      }
      have_dtype = TRUE;
      if (!parse_tensor_dtype (j, desc, &t, error))
        goto out;
    } else if (strcmp (j->buf->str, "shape") == 0) {
      if (have_shape) {
        jerr (j, error, "tensor %s: duplicate shape", desc);
        goto out;
      }
      have_shape = TRUE;
      if (!parse_tensor_shape (j, desc, &t, error))
        goto out;
    } else if (strcmp (j->buf->str, "data_offsets") == 0) {
      if (have_offsets) {
        jerr (j, error, "tensor %s: duplicate data_offsets", desc);
        goto out;
      }
      have_offsets = TRUE;
      if (!expect (j, '[', "the data_offsets array", error)
          || !parse_uint (j, &begin, "a data offset", error)
          || !expect (j, ',', "a comma (data_offsets has two entries)", error)
          || !parse_uint (j, &end, "a data offset", error)
          || !expect (j, ']', "the end of data_offsets (two entries)", error))
        goto out;
    } else if (!skip_value (j, 3, error)) {
      goto out;
    }
    c = peek (j);
    if (c == ',') {
      j->pos++;
      continue;
    }
    if (c == '}') {
      j->pos++;
      break;
    }
    jerr (j, error, "tensor %s: expected ',' or '}'", desc);
    goto out;
  }

  if (!have_dtype || !have_shape || !have_offsets) {
    jerr (j, error, "tensor %s: no %s", desc, !have_dtype ? "dtype" :
        !have_shape ? "shape" : "data_offsets");
    goto out;
  }
  if (!place_tensor (st, desc, &t, begin, end, error))
    goto out;
  g_array_append_val (st->tensors, t);
  g_hash_table_insert (st->tensor_index, (gpointer) name,
      GUINT_TO_POINTER (st->tensors->len));
  ok = TRUE;

out:
  g_free (desc);
  return ok;
}

static gboolean
parse_json (NpuSafetensors * st, const guint8 * text, gsize len,
    GError ** error)
{
  Json j = { st, text, len, 0, g_string_new (NULL) };
  gboolean seen_metadata = FALSE, ok = FALSE;
  gint c;

  /* The format requires the header to start with '{' (no leading blanks) */
  if (len == 0 || text[0] != '{') {
    jerr (&j, error, "the header must start with '{'");
    goto out;
  }
  j.pos = 1;
  if (peek (&j) == '}')
    j.pos++;
  else {
    for (;;) {
      gchar *name;

      if (!parse_string (&j, error))
        goto out;
      if (strcmp (j.buf->str, "__metadata__") == 0) {
        if (seen_metadata) {
          jerr (&j, error, "duplicate __metadata__");
          goto out;
        }
        seen_metadata = TRUE;
        if (!expect (&j, ':', "a colon", error) || !parse_metadata (&j, error))
          goto out;
      } else {
        if (j.buf->len == 0) {
          jerr (&j, error, "tensor with an empty name");
          goto out;
        }
        if (g_hash_table_contains (st->tensor_index, j.buf->str)) {
          gchar *d = describe (j.buf->str);

          jerr (&j, error, "duplicate tensor %s", d);
          g_free (d);
          goto out;
        }
        name = g_string_chunk_insert_len (st->strings, j.buf->str, j.buf->len);
        if (!expect (&j, ':', "a colon", error)
            || !parse_tensor (&j, name, error))
          goto out;
      }
      c = peek (&j);
      if (c == ',') {
        j.pos++;
        continue;
      }
      if (c == '}') {
        j.pos++;
        break;
      }
      jerr (&j, error, "expected ',' or '}' after a tensor");
      goto out;
    }
  }
  skip_ws (&j);
  if (j.pos != j.len) {
    jerr (&j, error, "data after the header object");
    goto out;
  }
  ok = TRUE;

out:
  g_string_free (j.buf, TRUE);
  return ok;
}

static gint
compare_by_offset (gconstpointer a, gconstpointer b)
{
  const NpuSafetensorsTensor *ta = *(const NpuSafetensorsTensor * const *) a;
  const NpuSafetensorsTensor *tb = *(const NpuSafetensorsTensor * const *) b;

  return ta->offset < tb->offset ? -1 : ta->offset > tb->offset;
}

static gboolean
parse (NpuSafetensors * st, GError ** error)
{
  guint64 n;
  const NpuSafetensorsTensor **sorted;
  const NpuSafetensorsTensor *prev = NULL;
  gboolean ok = TRUE;
  guint i, k;

  if (st->size < 8) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: truncated: %" G_GSIZE_FORMAT " bytes, the header length alone "
        "needs 8", st->name, st->size);
    return FALSE;
  }
  memcpy (&n, st->base, 8);
  n = GUINT64_FROM_LE (n);
  if (n > st->size - 8) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: header length %" G_GUINT64_FORMAT " runs past the end of the "
        "file (%" G_GSIZE_FORMAT " bytes)", st->name, n, st->size);
    return FALSE;
  }
  if (n > NPU_SAFETENSORS_MAX_HEADER) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: header length %" G_GUINT64_FORMAT " is over the limit of %d",
        st->name, n, NPU_SAFETENSORS_MAX_HEADER);
    return FALSE;
  }
  st->data_offset = 8 + n;
  if (!parse_json (st, st->base + 8, n, error))
    return FALSE;

  sorted = g_new (const NpuSafetensorsTensor *, st->tensors->len + 1);
  for (i = 0, k = 0; i < st->tensors->len; i++) {
    const NpuSafetensorsTensor *t =
        &g_array_index (st->tensors, NpuSafetensorsTensor, i);

    /* Empty tensors occupy no bytes and cannot overlap anything */
    if (t->n_bytes > 0)
      sorted[k++] = t;
  }
  qsort (sorted, k, sizeof (*sorted), compare_by_offset);
  for (i = 0; i < k; i++) {
    const NpuSafetensorsTensor *t = sorted[i];

    if (prev && prev->offset + prev->n_bytes > t->offset) {
      gchar *da = describe (prev->name), *db = describe (t->name);

      g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
          "%s: tensor %s [offset %" G_GUINT64_FORMAT ", %" G_GSIZE_FORMAT
          " bytes) overlaps tensor %s [offset %" G_GUINT64_FORMAT ", %"
          G_GSIZE_FORMAT " bytes)", st->name, db, t->offset, t->n_bytes, da,
          prev->offset, prev->n_bytes);
      g_free (da);
      g_free (db);
      ok = FALSE;
      break;
    }
    prev = t;
  }
  g_free (sorted);
  return ok;
}

/* ------------------------------------------------------------------------ */

void
npu_safetensors_free (NpuSafetensors * st)
{
  if (!st)
    return;
  g_array_free (st->tensors, TRUE);
  g_hash_table_destroy (st->tensor_index);
  g_ptr_array_free (st->meta_keys, TRUE);
  g_hash_table_destroy (st->meta);
  g_string_chunk_free (st->strings);
  if (st->mapped)
    munmap ((gpointer) st->base, st->size);
  if (st->fd >= 0)
    close (st->fd);
  g_free (st->name);
  g_free (st);
}

static NpuSafetensors *
npu_safetensors_new (const gchar * name)
{
  NpuSafetensors *st = g_new0 (NpuSafetensors, 1);

  st->name = g_strdup (name);
  st->fd = -1;
  st->tensors = g_array_new (FALSE, TRUE, sizeof (NpuSafetensorsTensor));
  st->tensor_index = g_hash_table_new (g_str_hash, g_str_equal);
  st->meta_keys = g_ptr_array_new ();
  st->meta = g_hash_table_new (g_str_hash, g_str_equal);
  st->strings = g_string_chunk_new (4096);
  return st;
}

NpuSafetensors *
npu_safetensors_open_bytes (const guint8 * data, gsize size, GError ** error)
{
  NpuSafetensors *st;

  g_return_val_if_fail (data != NULL || size == 0, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  st = npu_safetensors_new ("(memory)");
  st->base = data;
  st->size = size;
  if (!parse (st, error)) {
    npu_safetensors_free (st);
    return NULL;
  }
  return st;
}

NpuSafetensors *
npu_safetensors_open (const gchar * path, GError ** error)
{
  NpuSafetensors *st;
  gchar *base;

  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  base = g_path_get_basename (path);
  st = npu_safetensors_new (base);
  g_free (base);

  if (!npu_file_map (path, st->name, NPU_SAFETENSORS_ERROR,
          NPU_SAFETENSORS_ERROR_IO, &st->fd, &st->base, &st->size, error))
    goto fail;
  st->mapped = st->base != NULL;
  if (!parse (st, error))
    goto fail;
  return st;

fail:
  npu_safetensors_free (st);
  return NULL;
}

int
npu_safetensors_get_fd (const NpuSafetensors * st)
{
  g_return_val_if_fail (st != NULL, -1);
  return st->fd;
}

const guint8 *
npu_safetensors_get_base (const NpuSafetensors * st)
{
  g_return_val_if_fail (st != NULL, NULL);
  return st->base;
}

gsize
npu_safetensors_get_size (const NpuSafetensors * st)
{
  g_return_val_if_fail (st != NULL, 0);
  return st->size;
}

gsize
npu_safetensors_get_data_offset (const NpuSafetensors * st)
{
  g_return_val_if_fail (st != NULL, 0);
  return st->data_offset;
}

guint
npu_safetensors_n_tensors (const NpuSafetensors * st)
{
  g_return_val_if_fail (st != NULL, 0);
  return st->tensors->len;
}

const NpuSafetensorsTensor *
npu_safetensors_get_tensor (const NpuSafetensors * st, guint i)
{
  g_return_val_if_fail (st != NULL, NULL);
  g_return_val_if_fail (i < st->tensors->len, NULL);
  return &g_array_index (st->tensors, NpuSafetensorsTensor, i);
}

const NpuSafetensorsTensor *
npu_safetensors_find_tensor (const NpuSafetensors * st, const gchar * name)
{
  guint i;

  g_return_val_if_fail (st != NULL, NULL);
  g_return_val_if_fail (name != NULL, NULL);
  i = GPOINTER_TO_UINT (g_hash_table_lookup (st->tensor_index, name));
  return i ? &g_array_index (st->tensors, NpuSafetensorsTensor, i - 1) : NULL;
}

guint
npu_safetensors_n_metadata (const NpuSafetensors * st)
{
  g_return_val_if_fail (st != NULL, 0);
  return st->meta_keys->len;
}

const gchar *
npu_safetensors_get_metadata_key (const NpuSafetensors * st, guint i)
{
  g_return_val_if_fail (st != NULL, NULL);
  g_return_val_if_fail (i < st->meta_keys->len, NULL);
  return g_ptr_array_index (st->meta_keys, i);
}

const gchar *
npu_safetensors_get_metadata (const NpuSafetensors * st, const gchar * key)
{
  g_return_val_if_fail (st != NULL, NULL);
  g_return_val_if_fail (key != NULL, NULL);
  return g_hash_table_lookup (st->meta, key);
}

gboolean
npu_safetensors_find_mxfp4 (const NpuSafetensors * st,
    const gchar * base_name, const NpuSafetensorsTensor ** blocks,
    const NpuSafetensorsTensor ** scales, GError ** error)
{
  const NpuSafetensorsTensor *b, *s;
  gchar *bn, *sn;
  gboolean ok = FALSE;
  guint d;

  g_return_val_if_fail (st != NULL && base_name != NULL, FALSE);

  bn = g_strconcat (base_name, ".blocks", NULL);
  sn = g_strconcat (base_name, ".scales", NULL);
  b = npu_safetensors_find_tensor (st, bn);
  s = npu_safetensors_find_tensor (st, sn);
  if (!b || !s) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_NOT_FOUND,
        "%s: no tensor '%s'", st->name, !b ? bn : sn);
    goto out;
  }
  if (b->dtype != NPU_SAFETENSORS_DTYPE_U8
      || s->dtype != NPU_SAFETENSORS_DTYPE_U8) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: MXFP4 pair '%s': blocks are %s and scales %s, both must be U8",
        st->name, base_name, dtypes[b->dtype].name, dtypes[s->dtype].name);
    goto out;
  }
  if (b->n_dims < 2 || b->shape[b->n_dims - 1] != 16) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: MXFP4 pair '%s': blocks must have shape [..., n_blocks, 16]",
        st->name, base_name);
    goto out;
  }
  if (s->n_dims != b->n_dims - 1) {
    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: MXFP4 pair '%s': scales have %u dimensions, blocks %u; "
        "expected %u", st->name, base_name, s->n_dims, b->n_dims,
        b->n_dims - 1);
    goto out;
  }
  for (d = 0; d < s->n_dims; d++) {
    if (s->shape[d] != b->shape[d]) {
      g_set_error (error, NPU_SAFETENSORS_ERROR,
          NPU_SAFETENSORS_ERROR_FORMAT,
          "%s: MXFP4 pair '%s': dimension %u is %" G_GUINT64_FORMAT
          " in scales but %" G_GUINT64_FORMAT " in blocks", st->name,
          base_name, d, s->shape[d], b->shape[d]);
      goto out;
    }
  }
  if (blocks)
    *blocks = b;
  if (scales)
    *scales = s;
  ok = TRUE;

out:
  g_free (bn);
  g_free (sn);
  return ok;
}
