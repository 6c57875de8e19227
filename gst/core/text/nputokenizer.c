/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: text tokenizers from GGUF metadata
 *
 * A port of llama.cpp's SPM and BPE tokenizers (src/llama-vocab.cpp,
 * src/unicode.cpp) to C + GLib.  Where we knowingly differ it is said at
 * the spot.  The vocabulary is copied into one GStringChunk and indexed by
 * open-addressing tables, so lookups during tokenization allocate nothing.
 */
#include "nputokenizer.h"

#include <string.h>

G_DEFINE_QUARK (npu - tokenizer - error - quark, npu_tokenizer_error);

#define SPM_SPACE "\xe2\x96\x81"        /* U+2581 LOWER ONE EIGHTH BLOCK */
#define SPM_SPACE_LEN 3

typedef struct
{
  const gchar *text;            /* NUL-terminated copy */
  gsize len;
  const gchar *piece;           /* what the token decodes to */
  gsize piece_len;
  gfloat score;
  NpuTokenType type;
  gboolean eog;
} Token;

typedef struct
{
  const gchar *a, *b;
  gsize alen, blen;
} Merge;

/* Open addressing, linear probing; slots hold an index or -1 */
typedef struct
{
  gint32 *slots;
  guint32 mask;
} IdTable;

struct _NpuTokenizer
{
  NpuTokenizerKind kind;
  const gchar *pre;             /* static canonical name, NULL for SPM */
  GStringChunk *chunk;

  Token *tokens;
  guint n_tokens;
  IdTable vocab_index;

  Merge *merges;
  guint n_merges;
  IdTable merge_index;

  GRegex **regexes;             /* pre-tokenizer, applied in turn */
  guint n_regexes;
  gboolean ignore_merges;       /* llama3: a word that is a token is kept */
  gboolean clean_spaces;
  gboolean add_space_prefix;

  gint32 bos, eos, eot, eom, unk, pad;
  gboolean add_bos, add_eos;

  gint32 byte_token[256];       /* SPM byte fallback */
  gchar byte_enc[256][3];       /* GPT-2 byte -> character (UTF-8) */
  gint16 byte_dec[324];         /* GPT-2 character (code point) -> byte */

  gint32 *specials;             /* CONTROL/USER_DEFINED/UNKNOWN, longest
                                 * first */
  guint n_specials;
};

/* ------------------------------------------------------------------------ */
/* Hash tables                                                               */

static inline guint32
fnv1a (guint32 h, const gchar * p, gsize n)
{
  for (gsize i = 0; i < n; i++)
    h = (h ^ (guint8) p[i]) * 16777619u;
  return h;
}

#define FNV_INIT 2166136261u

static void
id_table_init (IdTable * t, guint n)
{
  guint32 size = 16;

  while (size < 2 * (guint64) n)
    size <<= 1;
  t->slots = g_new (gint32, size);
  memset (t->slots, 0xff, size * sizeof (gint32));
  t->mask = size - 1;
}

static void
id_table_insert (IdTable * t, guint32 h, gint32 id)
{
  guint32 i = h & t->mask;

  while (t->slots[i] >= 0)
    i = (i + 1) & t->mask;
  t->slots[i] = id;
}

static gint32
vocab_find (const NpuTokenizer * tok, const gchar * s, gsize n)
{
  guint32 i = fnv1a (FNV_INIT, s, n) & tok->vocab_index.mask;
  gint32 id;

  while ((id = tok->vocab_index.slots[i]) >= 0) {
    const Token *t = &tok->tokens[id];
    if (t->len == n && memcmp (t->text, s, n) == 0)
      return id;
    i = (i + 1) & tok->vocab_index.mask;
  }
  return NPU_TOKEN_NULL;
}

static guint32
merge_hash (const gchar * a, gsize alen, const gchar * b, gsize blen)
{
  /* 0xFF never occurs in UTF-8, so it separates the parts unambiguously */
  return fnv1a (fnv1a (fnv1a (FNV_INIT, a, alen), "\xff", 1), b, blen);
}

/* Rank of merging @a with @b, -1 if there is no such merge.  Duplicates in
 * the file keep the first (lowest) rank, as llama.cpp's emplace() does:
 * the earlier entry sits earlier on the probe path. */
static gint32
merge_rank (const NpuTokenizer * tok, const gchar * a, gsize alen,
    const gchar * b, gsize blen)
{
  guint32 i = merge_hash (a, alen, b, blen) & tok->merge_index.mask;
  gint32 r;

  while ((r = tok->merge_index.slots[i]) >= 0) {
    const Merge *m = &tok->merges[r];
    if (m->alen == alen && m->blen == blen && memcmp (m->a, a, alen) == 0
        && memcmp (m->b, b, blen) == 0)
      return r;
    i = (i + 1) & tok->merge_index.mask;
  }
  return -1;
}

/* ------------------------------------------------------------------------ */
/* UTF-8 helpers                                                             */

/* llama.cpp's unicode_len_utf8(): by the lead byte's high nibble, without
 * validation (a stray continuation byte is a one-byte character) */
static inline gsize
utf8_len_lenient (guint8 c)
{
  static const guint8 lookup[16] =
      { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
  return lookup[c >> 4];
}

/* Strict sequence length from the lead byte, 0 if it cannot start one */
static inline guint
utf8_seq_len (guint8 c)
{
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf)
    return 2;
  if (c >= 0xe0 && c <= 0xef)
    return 3;
  if (c >= 0xf0 && c <= 0xf4)
    return 4;
  return 0;
}

/* Is @c a valid byte at position @k (1..3) of a sequence led by @lead?
 * The second byte's range excludes overlongs, surrogates and > U+10FFFF. */
static inline gboolean
utf8_cont_ok (guint8 lead, guint k, guint8 c)
{
  guint8 lo = 0x80, hi = 0xbf;

  if (k == 1) {
    if (lead == 0xe0)
      lo = 0xa0;
    else if (lead == 0xed)
      hi = 0x9f;
    else if (lead == 0xf0)
      lo = 0x90;
    else if (lead == 0xf4)
      hi = 0x8f;
  }
  return c >= lo && c <= hi;
}

#define REPLACEMENT "\xef\xbf\xbd"

/* Appends the complete characters of @buf[0..n) to @out, invalid bytes as
 * U+FFFD (one per maximal invalid subpart, as the Unicode standard
 * recommends).  A valid but incomplete sequence at the end is left
 * unconsumed unless @final, when it becomes one U+FFFD.  Returns the bytes
 * consumed. */
static gsize
utf8_emit (GString * out, const guint8 * buf, gsize n, gboolean final)
{
  gsize i = 0;

  while (i < n) {
    guint8 c = buf[i];
    guint len = utf8_seq_len (c), k;

    if (len == 1) {
      g_string_append_c (out, c);
      i++;
      continue;
    }
    if (len == 0) {
      g_string_append (out, REPLACEMENT);
      i++;
      continue;
    }
    for (k = 1; k < len; k++) {
      if (i + k >= n)
        break;
      if (!utf8_cont_ok (c, k, buf[i + k]))
        break;
    }
    if (k == len) {
      g_string_append_len (out, (const gchar *) buf + i, len);
      i += len;
    } else if (i + k >= n && !final) {
      break;                    /* wait for the rest */
    } else {
      g_string_append (out, REPLACEMENT);
      i += k;
    }
  }
  return i;
}

/* llama.cpp decodes input with unicode_cpts_from_utf8(), which turns each
 * byte that does not start a valid sequence into U+FFFD; BPE works on the
 * re-encoded text, so do the same (GRegex also needs valid UTF-8). */
static gchar *
utf8_sanitize (const gchar * s, gsize n, gsize * out_len)
{
  GString *out = g_string_sized_new (n + 1);
  const gchar *end = s + n;

  while (s < end) {
    gunichar c = g_utf8_get_char_validated (s, end - s);

    if (c == (gunichar) - 1 || c == (gunichar) - 2) {
      g_string_append (out, REPLACEMENT);
      s++;
    } else if (c == 0) {
      g_string_append_c (out, 0);
      s++;
    } else {
      const gchar *next = g_utf8_next_char (s);
      g_string_append_len (out, s, next - s);
      s = next;
    }
  }
  *out_len = out->len;
  return g_string_free (out, FALSE);
}

/* ------------------------------------------------------------------------ */
/* Merge queue: a binary heap of candidate pairs                            */

typedef struct
{
  gint prev, next;
  const gchar *text;
  gsize n;
} Symbol;

typedef struct
{
  gint left, right;
  gfloat score;                 /* SPM: higher first */
  gint32 rank;                  /* BPE: lower first */
  gsize size;
} Bigram;

typedef gboolean (*BigramFirst) (const Bigram * a, const Bigram * b);

/* Ties go to the left-most pair in both tokenizers */
static gboolean
spm_first (const Bigram * a, const Bigram * b)
{
  return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static gboolean
bpe_first (const Bigram * a, const Bigram * b)
{
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void
heap_push (GArray * h, const Bigram * b, BigramFirst first)
{
  Bigram *v;
  guint i;

  g_array_append_val (h, *b);
  v = (Bigram *) h->data;
  for (i = h->len - 1; i > 0;) {
    guint p = (i - 1) / 2;
    Bigram t;

    if (!first (&v[i], &v[p]))
      break;
    t = v[i];
    v[i] = v[p];
    v[p] = t;
    i = p;
  }
}

static Bigram
heap_pop (GArray * h, BigramFirst first)
{
  Bigram *v = (Bigram *) h->data;
  Bigram top = v[0];
  guint i = 0, n = h->len - 1;

  v[0] = v[n];
  g_array_set_size (h, n);
  for (;;) {
    guint l = 2 * i + 1, r = l + 1, m = i;
    Bigram t;

    if (l < n && first (&v[l], &v[m]))
      m = l;
    if (r < n && first (&v[r], &v[m]))
      m = r;
    if (m == i)
      break;
    t = v[i];
    v[i] = v[m];
    v[m] = t;
    i = m;
  }
  return top;
}

/* One symbol per character (lead-byte length, as llama.cpp) */
static void
symbols_split (GArray * syms, const gchar * text, gsize n)
{
  gsize off = 0;
  gint index = 0;

  g_array_set_size (syms, 0);
  while (off < n) {
    Symbol s;

    s.text = text + off;
    s.n = MIN (utf8_len_lenient (text[off]), n - off);
    off += s.n;
    s.prev = index - 1;
    s.next = off == n ? -1 : index + 1;
    index++;
    g_array_append_val (syms, s);
  }
}

/* Merge the right symbol into the left one */
static void
symbols_merge (Symbol * s, gint left, gint right)
{
  s[left].n += s[right].n;
  s[right].n = 0;
  s[left].next = s[right].next;
  if (s[right].next >= 0)
    s[s[right].next].prev = left;
}

/* A queued pair is stale when either symbol has changed since: symbols
 * only grow, so an unchanged total size means both are as they were. */
static inline gboolean
bigram_stale (const Symbol * s, const Bigram * b)
{
  return s[b->left].n == 0 || s[b->right].n == 0
      || s[b->left].n + s[b->right].n != b->size;
}

/* ------------------------------------------------------------------------ */
/* SentencePiece                                                             */

static void
spm_try_bigram (const NpuTokenizer * tok, GArray * syms, GArray * heap,
    gint left, gint right)
{
  const Symbol *s = (const Symbol *) syms->data;
  Bigram b;
  gint32 id;

  if (left < 0 || right < 0)
    return;
  /* adjacent symbols are contiguous in the text */
  id = vocab_find (tok, s[left].text, s[left].n + s[right].n);
  if (id < 0)
    return;
  b.left = left;
  b.right = right;
  b.score = tok->tokens[id].score;
  b.rank = 0;
  b.size = s[left].n + s[right].n;
  heap_push (heap, &b, spm_first);
}

static void
spm_tokenize (const NpuTokenizer * tok, const gchar * text, gsize n,
    GArray * out)
{
  GArray *syms = g_array_new (FALSE, FALSE, sizeof (Symbol));
  GArray *heap = g_array_new (FALSE, FALSE, sizeof (Bigram));
  Symbol *s;
  gint i;

  symbols_split (syms, text, n);
  for (i = 1; i < (gint) syms->len; i++)
    spm_try_bigram (tok, syms, heap, i - 1, i);

  while (heap->len > 0) {
    Bigram b = heap_pop (heap, spm_first);

    s = (Symbol *) syms->data;
    if (bigram_stale (s, &b))
      continue;
    symbols_merge (s, b.left, b.right);
    spm_try_bigram (tok, syms, heap, s[b.left].prev, b.left);
    spm_try_bigram (tok, syms, heap, b.left, s[b.left].next);
  }

  /* llama.cpp's resegment(): every merged symbol is a token by
   * construction, so only single characters can miss the vocabulary; they
   * are spelled in byte-fallback tokens. */
  s = (Symbol *) syms->data;
  for (i = syms->len > 0 ? 0 : -1; i >= 0; i = s[i].next) {
    gint32 id = vocab_find (tok, s[i].text, s[i].n);

    if (id >= 0) {
      g_array_append_val (out, id);
      continue;
    }
    for (gsize j = 0; j < s[i].n; j++) {
      id = tok->byte_token[(guint8) s[i].text[j]];
      if (id >= 0)
        g_array_append_val (out, id);
    }
  }
  g_array_unref (syms);
  g_array_unref (heap);
}

/* ------------------------------------------------------------------------ */
/* Byte-level BPE                                                            */

/* The pre-tokenizer regexes, from llama.cpp's llm_tokenizer_bpe.
 * llama.cpp writes the case-insensitive contractions (?i:'s|'t|...) of the
 * original tokenizer.json as (?:'[sS]|'[tT]|...) because std::regex lacks
 * (?i:); the two match the same strings.  \s is spelled out (WS): the
 * Unicode White_Space property, llama.cpp's whitespace (unicode-data.cpp);
 * PCRE's \s also takes U+180E MONGOLIAN VOWEL SEPARATOR (a space before
 * Unicode 6.3), which split "a\u180e's" as "a" "\u180e" "'s" instead of
 * "a" "\u180e'" "s". */
#define WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}" \
  "\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define RE_S "[" WS "]"
#define RE_NOT_S "[^" WS "]"
#define RE_NOT_SLN "[^" WS "\\p{L}\\p{N}]"

static const gchar *const pre_default[] = {
  "[\\p{P}\\$\\+<=>\\^~\\|]+",
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?" RE_NOT_SLN "+"
      "|" RE_S "+(?!" RE_NOT_S ")",
  "\\p{N}+",
  "[0-9][0-9][0-9]",
  NULL
};

static const gchar *const pre_gpt2[] = {
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?" RE_NOT_SLN "+"
      "|" RE_S "+(?!" RE_NOT_S ")",
  NULL
};

static const gchar *const pre_llama3[] = {
  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
      "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
      "| ?" RE_NOT_SLN "+[\\r\\n]*|" RE_S "*[\\r\\n]+"
      "|" RE_S "+(?!" RE_NOT_S ")|" RE_S "+",
  NULL
};

static const gchar *const pre_qwen2[] = {
  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
      "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
      "| ?" RE_NOT_SLN "+[\\r\\n]*|" RE_S "*[\\r\\n]+"
      "|" RE_S "+(?!" RE_NOT_S ")|" RE_S "+",
  NULL
};

/* gpt-4o (o200k, gpt-oss's o200k_harmony): llama.cpp's rewrite of the
 * tokenizer.json regex, which we take as is to split as llama.cpp does.
 * It spells [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] as "a letter that is not
 * a-z" and [\p{Ll}\p{Lm}\p{Lo}\p{M}] as "a letter that is not A-Z": a
 * non-ASCII letter of any case is in both, and combining marks (\p{M}) are
 * in neither, where the original attaches them to the word. */
#define RE_UPPER "((?=[\\p{L}])([^a-z]))"
#define RE_LOWER "((?=[\\p{L}])([^A-Z]))"
#define RE_CONTR "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"

static const gchar *const pre_gpt4o[] = {
  "[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "*" RE_LOWER "+" RE_CONTR
      "|[^\\r\\n\\p{L}\\p{N}]?" RE_UPPER "+" RE_LOWER "*" RE_CONTR
      "|\\p{N}{1,3}| ?" RE_NOT_SLN "+[\\r\\n/]*|" RE_S "*[\\r\\n]+"
      "|" RE_S "+(?!" RE_NOT_S ")|" RE_S "+",
  NULL
};

#undef RE_UPPER
#undef RE_LOWER
#undef RE_CONTR
#undef WS
#undef RE_S
#undef RE_NOT_S
#undef RE_NOT_SLN

typedef struct
{
  gsize off, len;
} Span;

static void
span_add (GArray * a, gsize off, gsize len)
{
  Span s = { off, len };
  g_array_append_val (a, s);
}

/* llama.cpp's unicode_regex_split(): each regex splits every piece the
 * previous one made; matches stay inside their piece (the subject ends at
 * the piece's end, so a lookahead cannot see past it) and the text between
 * matches is kept as pieces of its own. */
static GArray *
bpe_pre_split (const NpuTokenizer * tok, const gchar * text, gsize n)
{
  GArray *spans = g_array_new (FALSE, FALSE, sizeof (Span));

  span_add (spans, 0, n);
  for (guint r = 0; r < tok->n_regexes; r++) {
    GArray *next = g_array_new (FALSE, FALSE, sizeof (Span));

    for (guint k = 0; k < spans->len; k++) {
      Span sp = g_array_index (spans, Span, k);
      gsize end = sp.off + sp.len, pos = sp.off;
      GMatchInfo *mi = NULL;

      g_regex_match_full (tok->regexes[r], text, end, sp.off, 0, &mi, NULL);
      while (g_match_info_matches (mi)) {
        gint ms, me;

        g_match_info_fetch_pos (mi, 0, &ms, &me);
        if (me > ms) {
          if ((gsize) ms > pos)
            span_add (next, pos, ms - pos);
          span_add (next, ms, me - ms);
          pos = me;
        }
        g_match_info_next (mi, NULL);
      }
      g_match_info_free (mi);
      if (pos < end)
        span_add (next, pos, end - pos);
    }
    g_array_unref (spans);
    spans = next;
  }
  return spans;
}

static void
bpe_try_bigram (const NpuTokenizer * tok, GArray * syms, GArray * heap,
    gint left, gint right)
{
  const Symbol *s = (const Symbol *) syms->data;
  Bigram b;
  gint32 rank;

  if (left < 0 || right < 0)
    return;
  rank = merge_rank (tok, s[left].text, s[left].n, s[right].text, s[right].n);
  if (rank < 0)
    return;
  b.left = left;
  b.right = right;
  b.score = 0.0f;
  b.rank = rank;
  b.size = s[left].n + s[right].n;
  heap_push (heap, &b, bpe_first);
}

static void
bpe_word (const NpuTokenizer * tok, const gchar * word, gsize n,
    GArray * syms, GArray * heap, GArray * out)
{
  Symbol *s;
  gint i;

  if (tok->ignore_merges) {
    gint32 id = vocab_find (tok, word, n);
    if (id >= 0) {
      g_array_append_val (out, id);
      return;
    }
  }

  symbols_split (syms, word, n);
  g_array_set_size (heap, 0);
  for (i = 1; i < (gint) syms->len; i++)
    bpe_try_bigram (tok, syms, heap, i - 1, i);
  while (heap->len > 0) {
    Bigram b = heap_pop (heap, bpe_first);

    s = (Symbol *) syms->data;
    if (bigram_stale (s, &b))
      continue;
    symbols_merge (s, b.left, b.right);
    bpe_try_bigram (tok, syms, heap, s[b.left].prev, b.left);
    bpe_try_bigram (tok, syms, heap, b.left, s[b.left].next);
  }

  s = (Symbol *) syms->data;
  for (i = syms->len > 0 ? 0 : -1; i >= 0; i = s[i].next) {
    gint32 id = vocab_find (tok, s[i].text, s[i].n);

    if (id >= 0) {
      g_array_append_val (out, id);
      continue;
    }
    /* Not a token (a merge whose result is missing from the vocabulary):
     * llama.cpp looks its bytes up one by one and drops what is not found;
     * we look up its characters, which are the byte tokens of byte-level
     * vocabularies. */
    for (gsize j = 0; j < s[i].n;) {
      gsize cl = MIN (utf8_len_lenient (s[i].text[j]), s[i].n - j);

      id = vocab_find (tok, s[i].text + j, cl);
      if (id >= 0)
        g_array_append_val (out, id);
      j += cl;
    }
  }
}

static void
bpe_tokenize (const NpuTokenizer * tok, const gchar * raw, gsize raw_len,
    GArray * out)
{
  GArray *syms = g_array_new (FALSE, FALSE, sizeof (Symbol));
  GArray *heap = g_array_new (FALSE, FALSE, sizeof (Bigram));
  GString *word = g_string_new (NULL);
  gsize n;
  gchar *text = utf8_sanitize (raw, raw_len, &n);
  GArray *spans = bpe_pre_split (tok, text, n);

  for (guint k = 0; k < spans->len; k++) {
    Span sp = g_array_index (spans, Span, k);

    g_string_truncate (word, 0);
    for (gsize j = 0; j < sp.len; j++)
      g_string_append (word, tok->byte_enc[(guint8) text[sp.off + j]]);
    bpe_word (tok, word->str, word->len, syms, heap, out);
  }
  g_array_unref (spans);
  g_free (text);
  g_string_free (word, TRUE);
  g_array_unref (syms);
  g_array_unref (heap);
}

/* ------------------------------------------------------------------------ */
/* Encoding                                                                  */

typedef struct
{
  gint32 token;                 /* NPU_TOKEN_NULL: raw text */
  gsize off, len;
} Fragment;

static void
fragment_add (GArray * a, gint32 token, gsize off, gsize len)
{
  Fragment f = { token, off, len };
  g_array_append_val (a, f);
}

/* llama.cpp's tokenizer_st_partition(): cut the special tokens out of the
 * raw text, longest token first, left to right within each fragment. */
static GArray *
partition_specials (const NpuTokenizer * tok, const gchar * text, gsize n,
    gboolean parse_special)
{
  GArray *frags = g_array_new (FALSE, FALSE, sizeof (Fragment));

  if (n > 0)
    fragment_add (frags, NPU_TOKEN_NULL, 0, n);
  for (guint s = 0; s < tok->n_specials; s++) {
    gint32 id = tok->specials[s];
    const Token *t = &tok->tokens[id];
    GArray *next;

    if (!parse_special && t->type != NPU_TOKEN_TYPE_USER_DEFINED)
      continue;
    next = g_array_sized_new (FALSE, FALSE, sizeof (Fragment), frags->len);
    for (guint k = 0; k < frags->len; k++) {
      Fragment f = g_array_index (frags, Fragment, k);
      gsize pos = f.off, end = f.off + f.len;

      if (f.token != NPU_TOKEN_NULL) {
        g_array_append_val (next, f);
        continue;
      }
      while (pos < end) {
        const gchar *m = memmem (text + pos, end - pos, t->text, t->len);

        if (!m)
          break;
        if ((gsize) (m - text) > pos)
          fragment_add (next, NPU_TOKEN_NULL, pos, (m - text) - pos);
        fragment_add (next, id, m - text, t->len);
        pos = (m - text) + t->len;
      }
      if (pos < end)
        fragment_add (next, NPU_TOKEN_NULL, pos, end - pos);
    }
    g_array_unref (frags);
    frags = next;
  }
  return frags;
}

gint32 *
npu_tokenizer_encode (const NpuTokenizer * tok, const gchar * text,
    gssize len, gboolean add_special, gboolean parse_special, gsize * n_tokens)
{
  GArray *out;
  GArray *frags;
  gboolean prev_special = TRUE;

  g_return_val_if_fail (tok != NULL && n_tokens != NULL, NULL);
  g_return_val_if_fail (text != NULL || len == 0, NULL);
  if (len < 0)
    len = strlen (text);

  out = g_array_new (FALSE, FALSE, sizeof (gint32));
  frags = partition_specials (tok, text, len, parse_special);
  if (add_special && tok->add_bos)
    g_array_append_val (out, tok->bos);
  for (guint k = 0; k < frags->len; k++) {
    Fragment f = g_array_index (frags, Fragment, k);

    if (f.token != NPU_TOKEN_NULL) {
      g_array_append_val (out, f.token);
      prev_special = TRUE;
    } else if (tok->kind == NPU_TOKENIZER_SPM) {
      GString *s = g_string_sized_new (f.len * 3 + 4);

      /* SentencePiece's dummy prefix: at the start of the text and, in
       * llama.cpp, after every special token too */
      if (tok->add_space_prefix && prev_special)
        g_string_append (s, SPM_SPACE);
      for (gsize j = 0; j < f.len; j++) {
        if (text[f.off + j] == ' ')
          g_string_append (s, SPM_SPACE);
        else
          g_string_append_c (s, text[f.off + j]);
      }
      spm_tokenize (tok, s->str, s->len, out);
      g_string_free (s, TRUE);
      prev_special = FALSE;
    } else {
      bpe_tokenize (tok, text + f.off, f.len, out);
    }
  }
  if (add_special && tok->add_eos)
    g_array_append_val (out, tok->eos);
  g_array_unref (frags);

  *n_tokens = out->len;
  return (gint32 *) g_array_free (out, FALSE);
}

/* ------------------------------------------------------------------------ */
/* Decoding                                                                  */

struct _NpuTokenDecoder
{
  const NpuTokenizer *tok;
  NpuDecodeFlags flags;
  GByteArray *pending;
  gboolean started;             /* a non-empty piece has been seen */
};

NpuTokenDecoder *
npu_token_decoder_new (const NpuTokenizer * tok, NpuDecodeFlags flags)
{
  NpuTokenDecoder *dec;

  g_return_val_if_fail (tok != NULL, NULL);
  dec = g_new0 (NpuTokenDecoder, 1);
  dec->tok = tok;
  dec->flags = flags;
  dec->pending = g_byte_array_new ();
  return dec;
}

void
npu_token_decoder_free (NpuTokenDecoder * dec)
{
  if (!dec)
    return;
  g_byte_array_unref (dec->pending);
  g_free (dec);
}

void
npu_token_decoder_reset (NpuTokenDecoder * dec)
{
  g_return_if_fail (dec != NULL);
  g_byte_array_set_size (dec->pending, 0);
  dec->started = FALSE;
}

static void
decoder_add (NpuTokenDecoder * dec, gint32 token)
{
  const NpuTokenizer *tok = dec->tok;
  const Token *t;
  const gchar *p;
  gsize n;

  if (token < 0 || (guint) token >= tok->n_tokens)
    return;
  t = &tok->tokens[token];
  if (!(dec->flags & NPU_DECODE_SPECIAL) && (t->type == NPU_TOKEN_TYPE_CONTROL
          || t->type == NPU_TOKEN_TYPE_UNKNOWN))
    return;
  p = t->piece;
  n = t->piece_len;
  if (n == 0)
    return;
  /* The space add_space_prefix put before the first word.  llama.cpp
   * strips it only when the very first token carries it; we take the first
   * token that produces text, so that a hidden BOS does not keep it, which
   * is what SentencePiece's own decoder does. */
  if (!dec->started && (dec->flags & NPU_DECODE_STRIP_LEADING_SPACE)
      && tok->add_space_prefix && tok->kind == NPU_TOKENIZER_SPM && p[0] == ' ') {
    p++;
    n--;
  }
  dec->started = TRUE;
  g_byte_array_append (dec->pending, (const guint8 *) p, n);
}

static gchar *
decoder_take (NpuTokenDecoder * dec, gboolean final, gsize * len)
{
  GString *out = g_string_new (NULL);
  gsize used = utf8_emit (out, dec->pending->data, dec->pending->len, final);

  g_byte_array_remove_range (dec->pending, 0, used);
  if (len)
    *len = out->len;
  return g_string_free (out, FALSE);
}

gchar *
npu_token_decoder_push (NpuTokenDecoder * dec, gint32 token, gsize * len)
{
  g_return_val_if_fail (dec != NULL, NULL);
  decoder_add (dec, token);
  return decoder_take (dec, FALSE, len);
}

gchar *
npu_token_decoder_flush (NpuTokenDecoder * dec, gsize * len)
{
  gchar *s;

  g_return_val_if_fail (dec != NULL, NULL);
  s = decoder_take (dec, TRUE, len);
  dec->started = FALSE;
  return s;
}

/* llama.cpp's clean_up_tokenization_spaces passes (detokenize()) */
static void
clean_spaces (GString * s)
{
  gchar *t = s->str;
  gsize total, n, i;

  if (s->len == 0)
    return;
  /* " ?", " !", " .", " ," lose the space */
  n = s->len;
  total = 1;
  for (i = 1; i < n; i++) {
    gchar x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
      total--;
    t[total++] = x;
  }
  /* " ' " -> "'" */
  n = total;
  total = 1;
  for (i = 1; i < n; i++) {
    gchar x = t[i];
    if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
      total--;
      t[++i] = '\0';
    }
    t[total++] = x;
  }
  /* " 's", " 'm", " 're", " 've" lose the space */
  n = total;
  total = 1;
  for (i = 1; i < n; i++) {
    gchar x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      gchar x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm')
        total--;
      else if (i + 2 < n && ((x1 == 'r' && t[i + 2] == 'e')
              || (x1 == 'v' && t[i + 2] == 'e')))
        total--;
    }
    t[total++] = x;
  }
  g_string_truncate (s, total);
}

gchar *
npu_tokenizer_decode (const NpuTokenizer * tok, const gint32 * tokens,
    gsize n_tokens, NpuDecodeFlags flags, gsize * len)
{
  NpuTokenDecoder dec = { tok, flags, NULL, FALSE };
  GString *out;
  gsize n;
  gchar *s;

  g_return_val_if_fail (tok != NULL, NULL);
  g_return_val_if_fail (tokens != NULL || n_tokens == 0, NULL);
  dec.pending = g_byte_array_new ();
  for (gsize i = 0; i < n_tokens; i++)
    decoder_add (&dec, tokens[i]);
  s = decoder_take (&dec, TRUE, &n);
  g_byte_array_unref (dec.pending);
  out = g_string_new_len (s, n);
  g_free (s);
  if ((flags & NPU_DECODE_CLEAN_SPACES) && tok->clean_spaces)
    clean_spaces (out);
  if (len)
    *len = out->len;
  return g_string_free (out, FALSE);
}

/* ------------------------------------------------------------------------ */
/* Loading                                                                   */

/* GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for
 * themselves, the other 68 map to U+0100.. in byte order */
static void
init_byte_maps (NpuTokenizer * tok)
{
  guint n = 0;

  for (guint i = 0; i < G_N_ELEMENTS (tok->byte_dec); i++)
    tok->byte_dec[i] = -1;
  for (guint b = 0; b < 256; b++) {
    gboolean printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac)
        || b >= 0xae;
    gunichar cp = printable ? b : 256 + n++;

    memset (tok->byte_enc[b], 0, 3);
    g_unichar_to_utf8 (cp, tok->byte_enc[b]);
    tok->byte_dec[cp] = b;
  }
}

/* The bytes a token stands for (llama.cpp's token_to_piece(special=true)) */
static void
make_piece (NpuTokenizer * tok, Token * t, GString * buf)
{
  g_string_truncate (buf, 0);
  switch (t->type) {
    case NPU_TOKEN_TYPE_CONTROL:
    case NPU_TOKEN_TYPE_UNKNOWN:
    case NPU_TOKEN_TYPE_USER_DEFINED:
      g_string_append_len (buf, t->text, t->len);
      break;
    case NPU_TOKEN_TYPE_BYTE:
      if (t->len == 6 && strncmp (t->text, "<0x", 3) == 0
          && t->text[5] == '>' && g_ascii_isxdigit (t->text[3])
          && g_ascii_isxdigit (t->text[4]))
        g_string_append_c (buf, (g_ascii_xdigit_value (t->text[3]) << 4) |
            g_ascii_xdigit_value (t->text[4]));
      else
        g_string_append_len (buf, t->text, t->len);
      break;
    case NPU_TOKEN_TYPE_NORMAL:
      if (tok->kind == NPU_TOKENIZER_SPM) {
        for (gsize i = 0; i < t->len;) {
          if (i + SPM_SPACE_LEN <= t->len
              && memcmp (t->text + i, SPM_SPACE, SPM_SPACE_LEN) == 0) {
            g_string_append_c (buf, ' ');
            i += SPM_SPACE_LEN;
          } else {
            g_string_append_c (buf, t->text[i++]);
          }
        }
      } else {
        const gchar *p = t->text, *end = t->text + t->len;

        while (p < end) {
          gunichar c = g_utf8_get_char_validated (p, end - p);
          gsize cl;

          if (c == (gunichar) - 1 || c == (gunichar) - 2) {
            g_string_append_c (buf, *p++);
            continue;
          }
          cl = c == 0 ? 1 : (gsize) (g_utf8_next_char (p) - p);
          /* characters outside GPT-2's byte map pass through unchanged
           * (llama.cpp writes an [UNK_BYTE_..] marker instead) */
          if (c < G_N_ELEMENTS (tok->byte_dec) && tok->byte_dec[c] >= 0)
            g_string_append_c (buf, tok->byte_dec[c]);
          else
            g_string_append_len (buf, p, cl);
          p += cl;
        }
      }
      break;
    default:
      /* UNDEFINED and UNUSED tokens render as nothing, as in llama.cpp */
      break;
  }
  t->piece = g_string_chunk_insert_len (tok->chunk, buf->str, buf->len);
  t->piece_len = buf->len;
}

static gint
special_cmp (gconstpointer a, gconstpointer b, gpointer user_data)
{
  const NpuTokenizer *tok = user_data;
  gint32 x = *(const gint32 *) a, y = *(const gint32 *) b;
  gsize lx = tok->tokens[x].len, ly = tok->tokens[y].len;

  if (lx != ly)
    return lx > ly ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* Tokens llama.cpp takes for end-of-turn (special_eot_id) when the file
 * names none, in the order we try them (llama.cpp walks a hash map, so its
 * pick among several is arbitrary) */
static const gchar *const eot_texts[] = {
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
  "<|end_of_text|>", "<EOT>", "<end_of_utterance>", NULL
};

/* Tokens llama.cpp treats as end of generation by their text */
static const gchar *const eog_texts[] = {
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
  "<|eom_id|>", "<EOT>", "<|end_of_text|>", "<end_of_utterance>", NULL
};

static void
read_special_id (const NpuGguf * gguf, const gchar * key, guint n, gint32 * id)
{
  guint32 v;

  /* llama.cpp: a default out of range is disabled, a file value out of
   * range is ignored */
  if (*id >= 0 && (guint) * id >= n)
    *id = NPU_TOKEN_NULL;
  if (npu_gguf_get_u32 (gguf, key, &v, NULL) && v < n)
    *id = v;
}

static gboolean
set_pre (NpuTokenizer * tok, const gchar * pre, GError ** error)
{
  const gchar *const *exprs;

  tok->clean_spaces = TRUE;
  if (!pre || strcmp (pre, "default") == 0) {
    tok->pre = "default";
    exprs = pre_default;
  } else if (strcmp (pre, "gpt2") == 0 || strcmp (pre, "gpt-2") == 0) {
    tok->pre = "gpt2";
    exprs = pre_gpt2;
  } else if (strcmp (pre, "llama3") == 0 || strcmp (pre, "llama-v3") == 0
      || strcmp (pre, "llama-bpe") == 0) {
    tok->pre = "llama3";
    exprs = pre_llama3;
    tok->ignore_merges = TRUE;
    tok->add_bos = TRUE;
  } else if (strcmp (pre, "qwen2") == 0) {
    tok->pre = "qwen2";
    exprs = pre_qwen2;
    tok->clean_spaces = FALSE;
  } else if (strcmp (pre, "gpt-4o") == 0) {
    tok->pre = "gpt-4o";
    exprs = pre_gpt4o;
    tok->clean_spaces = FALSE;
  } else {
    g_set_error (error, NPU_TOKENIZER_ERROR,
        NPU_TOKENIZER_ERROR_UNSUPPORTED,
        "tokenizer.ggml.pre \"%s\" is not supported (supported: default, "
        "gpt2, gpt-4o, llama3, llama-bpe, qwen2)", pre);
    return FALSE;
  }
  tok->n_regexes = g_strv_length ((gchar **) exprs);
  tok->regexes = g_new0 (GRegex *, tok->n_regexes);
  for (guint i = 0; i < tok->n_regexes; i++) {
    GError *err = NULL;

    tok->regexes[i] = g_regex_new (exprs[i], G_REGEX_OPTIMIZE, 0, &err);
    if (!tok->regexes[i]) {
      g_set_error (error, NPU_TOKENIZER_ERROR,
          NPU_TOKENIZER_ERROR_UNSUPPORTED,
          "pre-tokenizer \"%s\": regex does not compile: %s", tok->pre,
          err->message);
      g_error_free (err);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
load_merges (NpuTokenizer * tok, const NpuGguf * gguf, GError ** error)
{
  const NpuGgufValue *arr;
  GError *err = NULL;

  arr = npu_gguf_get_array (gguf, "tokenizer.ggml.merges",
      NPU_GGUF_TYPE_STRING, &err);
  if (!arr) {
    g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
        "byte-level BPE needs tokenizer.ggml.merges: %s", err->message);
    g_error_free (err);
    return FALSE;
  }
  if (arr->v.arr.count > G_MAXINT32) {
    g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
        "tokenizer.ggml.merges: too many merges");
    return FALSE;
  }
  tok->n_merges = arr->v.arr.count;
  tok->merges = g_new0 (Merge, MAX (tok->n_merges, 1));
  id_table_init (&tok->merge_index, tok->n_merges);
  for (guint i = 0; i < tok->n_merges; i++) {
    gsize len, sp;
    const gchar *s = npu_gguf_array_get_string (arr, i, &len);
    const gchar *copy;
    Merge *m = &tok->merges[i];

    /* llama.cpp splits at the first space after the first byte, so a
     * part may start with a space; a merge without one is ignored */
    for (sp = 1; sp < len && s[sp] != ' '; sp++);
    if (sp >= len)
      continue;
    copy = g_string_chunk_insert_len (tok->chunk, s, len);
    m->a = copy;
    m->alen = sp;
    m->b = copy + sp + 1;
    m->blen = len - sp - 1;
    id_table_insert (&tok->merge_index,
        merge_hash (m->a, m->alen, m->b, m->blen), i);
  }
  return TRUE;
}

static gboolean
load_tokens (NpuTokenizer * tok, const NpuGguf * gguf, GError ** error)
{
  const NpuGgufValue *tokens, *scores, *types;
  GError *err = NULL;
  guint n;

  tokens = npu_gguf_get_array (gguf, "tokenizer.ggml.tokens",
      NPU_GGUF_TYPE_STRING, &err);
  if (!tokens) {
    g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
        "no vocabulary: %s", err->message);
    g_error_free (err);
    return FALSE;
  }
  if (tokens->v.arr.count == 0 || tokens->v.arr.count > G_MAXINT32) {
    g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
        "tokenizer.ggml.tokens: %" G_GUINT64_FORMAT " tokens",
        tokens->v.arr.count);
    return FALSE;
  }
  n = tok->n_tokens = tokens->v.arr.count;

  scores = npu_gguf_find (gguf, "tokenizer.ggml.scores");
  if (scores && (scores->type != NPU_GGUF_TYPE_ARRAY
          || (scores->v.arr.type != NPU_GGUF_TYPE_FLOAT32
              && scores->v.arr.type != NPU_GGUF_TYPE_INT32)
          || scores->v.arr.count < n)) {
    g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
        "tokenizer.ggml.scores must be an f32 or i32 array of at least %u "
        "elements", n);
    return FALSE;
  }
  types = npu_gguf_find (gguf, "tokenizer.ggml.token_type");
  if (types && (types->type != NPU_GGUF_TYPE_ARRAY
          || types->v.arr.type != NPU_GGUF_TYPE_INT32
          || types->v.arr.count < n)) {
    g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
        "tokenizer.ggml.token_type must be an i32 array of at least %u "
        "elements", n);
    return FALSE;
  }

  tok->tokens = g_new0 (Token, n);
  id_table_init (&tok->vocab_index, n);
  for (guint i = 0; i < n; i++) {
    Token *t = &tok->tokens[i];
    gsize len;
    const gchar *s = npu_gguf_array_get_string (tokens, i, &len);
    NpuGgufValue v;
    gchar *empty = NULL;
    gint32 dup;

    if (len == 0) {
      /* as llama.cpp, so that no token is the empty string */
      s = empty = g_strdup_printf ("[EMPTY_%u]", i);
      len = strlen (s);
    }
    if ((dup = vocab_find (tok, s, len)) >= 0) {
      g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
          "duplicate token in vocabulary: \"%.*s\" has ids %d and %u",
          (gint) MIN (len, 64), s, dup, i);
      g_free (empty);
      return FALSE;
    }
    t->text = g_string_chunk_insert_len (tok->chunk, s, len);
    t->len = len;
    g_free (empty);
    t->type = NPU_TOKEN_TYPE_NORMAL;
    if (types && npu_gguf_array_get (types, i, &v))
      t->type = (v.v.i >= 0 && v.v.i <= NPU_TOKEN_TYPE_BYTE) ?
          (NpuTokenType) v.v.i : NPU_TOKEN_TYPE_UNDEFINED;
    if (scores && npu_gguf_array_get (scores, i, &v))
      t->score = scores->v.arr.type == NPU_GGUF_TYPE_FLOAT32 ?
          (gfloat) v.v.f : (gfloat) v.v.i;
    id_table_insert (&tok->vocab_index, fnv1a (FNV_INIT, t->text, len), i);
  }
  return TRUE;
}

/* End of turn / generation by token text, as llama.cpp; the tokens found
 * by text become CONTROL so that they are parsed and hidden like others */
static void
find_eog (NpuTokenizer * tok)
{
  for (guint k = 0; tok->eot < 0 && eot_texts[k]; k++)
    tok->eot = vocab_find (tok, eot_texts[k], strlen (eot_texts[k]));
  if (tok->eom < 0)
    tok->eom = vocab_find (tok, "<|eom_id|>", strlen ("<|eom_id|>"));
  for (guint k = 0; eog_texts[k]; k++) {
    gint32 id = vocab_find (tok, eog_texts[k], strlen (eog_texts[k]));

    if (id < 0)
      continue;
    tok->tokens[id].eog = TRUE;
    if (tok->tokens[id].type != NPU_TOKEN_TYPE_USER_DEFINED)
      tok->tokens[id].type = NPU_TOKEN_TYPE_CONTROL;
  }
  if (tok->eos >= 0)
    tok->tokens[tok->eos].eog = TRUE;
  if (tok->eot >= 0)
    tok->tokens[tok->eot].eog = TRUE;
  if (tok->eom >= 0)
    tok->tokens[tok->eom].eog = TRUE;
}

NpuTokenizer *
npu_tokenizer_new_from_gguf (const NpuGguf * gguf, GError ** error)
{
  NpuTokenizer *tok;
  const gchar *model, *pre;
  GString *buf;
  GArray *specials;
  GError *err = NULL;
  guint n, i;

  g_return_val_if_fail (gguf != NULL, NULL);

  model = npu_gguf_get_string (gguf, "tokenizer.ggml.model", NULL, &err);
  if (!model) {
    g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
        "no tokenizer: %s", err->message);
    g_error_free (err);
    return NULL;
  }
  pre = npu_gguf_get_string (gguf, "tokenizer.ggml.pre", NULL, NULL);

  tok = g_new0 (NpuTokenizer, 1);
  tok->chunk = g_string_chunk_new (64 * 1024);
  init_byte_maps (tok);
  tok->eot = NPU_TOKEN_NULL;
  tok->eom = NPU_TOKEN_NULL;
  tok->pad = NPU_TOKEN_NULL;
  if (strcmp (model, "llama") == 0) {
    /* llama.cpp's defaults for SentencePiece vocabularies */
    tok->kind = NPU_TOKENIZER_SPM;
    tok->bos = 1;
    tok->eos = 2;
    tok->unk = 0;
    tok->add_bos = TRUE;
    tok->add_space_prefix = npu_gguf_get_bool_default (gguf,
        "tokenizer.ggml.add_space_prefix", TRUE);
  } else if (strcmp (model, "gpt2") == 0) {
    /* ... and for BPE ones */
    tok->kind = NPU_TOKENIZER_BPE;
    tok->bos = 11;
    tok->eos = 11;
    tok->unk = NPU_TOKEN_NULL;
    if (!set_pre (tok, pre, error))
      goto fail;
  } else {
    g_set_error (error, NPU_TOKENIZER_ERROR,
        NPU_TOKENIZER_ERROR_UNSUPPORTED,
        "tokenizer.ggml.model \"%s\" is not supported (supported: llama "
        "(SentencePiece), gpt2 (byte-level BPE))", model);
    goto fail;
  }

  if (!load_tokens (tok, gguf, error))
    goto fail;
  n = tok->n_tokens;
  if (tok->kind == NPU_TOKENIZER_BPE && !load_merges (tok, gguf, error))
    goto fail;

  read_special_id (gguf, "tokenizer.ggml.bos_token_id", n, &tok->bos);
  read_special_id (gguf, "tokenizer.ggml.eos_token_id", n, &tok->eos);
  read_special_id (gguf, "tokenizer.ggml.eot_token_id", n, &tok->eot);
  read_special_id (gguf, "tokenizer.ggml.eom_token_id", n, &tok->eom);
  read_special_id (gguf, "tokenizer.ggml.unknown_token_id", n, &tok->unk);
  read_special_id (gguf, "tokenizer.ggml.padding_token_id", n, &tok->pad);
  tok->add_bos = npu_gguf_get_bool_default (gguf,
      "tokenizer.ggml.add_bos_token", tok->add_bos);
  tok->add_eos = npu_gguf_get_bool_default (gguf,
      "tokenizer.ggml.add_eos_token", tok->add_eos);
  if ((tok->add_bos && tok->bos < 0) || (tok->add_eos && tok->eos < 0)) {
    const gchar *which = tok->add_bos && tok->bos < 0 ? "bos" : "eos";

    g_set_error (error, NPU_TOKENIZER_ERROR, NPU_TOKENIZER_ERROR_INVALID,
        "tokenizer.ggml.add_%s_token is true, but tokenizer.ggml.%s_token_id "
        "is not set or out of range", which, which);
    goto fail;
  }
  find_eog (tok);

  /* SPM byte fallback: <0xXX>, else the byte itself as a token (as
   * llama.cpp's byte_to_token()), else <unk> */
  for (i = 0; i < 256; i++) {
    gchar hex[8], raw = (gchar) i;

    g_snprintf (hex, sizeof hex, "<0x%02X>", i);
    tok->byte_token[i] = vocab_find (tok, hex, 6);
    if (tok->byte_token[i] < 0)
      tok->byte_token[i] = vocab_find (tok, &raw, 1);
    if (tok->byte_token[i] < 0)
      tok->byte_token[i] = tok->unk;
  }

  specials = g_array_new (FALSE, FALSE, sizeof (gint32));
  buf = g_string_new (NULL);
  for (i = 0; i < n; i++) {
    Token *t = &tok->tokens[i];

    if (t->type == NPU_TOKEN_TYPE_CONTROL
        || t->type == NPU_TOKEN_TYPE_USER_DEFINED
        || t->type == NPU_TOKEN_TYPE_UNKNOWN)
      g_array_append_val (specials, i);
    make_piece (tok, t, buf);
  }
  g_string_free (buf, TRUE);
  g_array_sort_with_data (specials, special_cmp, tok);
  tok->n_specials = specials->len;
  tok->specials = (gint32 *) g_array_free (specials, FALSE);
  return tok;

fail:
  npu_tokenizer_free (tok);
  return NULL;
}

void
npu_tokenizer_free (NpuTokenizer * tok)
{
  if (!tok)
    return;
  for (guint i = 0; i < tok->n_regexes; i++)
    if (tok->regexes[i])
      g_regex_unref (tok->regexes[i]);
  g_free (tok->regexes);
  g_free (tok->tokens);
  g_free (tok->vocab_index.slots);
  g_free (tok->merges);
  g_free (tok->merge_index.slots);
  g_free (tok->specials);
  g_string_chunk_free (tok->chunk);
  g_free (tok);
}

/* ------------------------------------------------------------------------ */
/* Accessors                                                                 */

NpuTokenizerKind
npu_tokenizer_get_kind (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, NPU_TOKENIZER_SPM);
  return tok->kind;
}

const gchar *
npu_tokenizer_get_pre (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, NULL);
  return tok->pre;
}

guint
npu_tokenizer_n_vocab (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, 0);
  return tok->n_tokens;
}

#define VALID_ID(tok, id) ((id) >= 0 && (guint) (id) < (tok)->n_tokens)

const gchar *
npu_tokenizer_token_text (const NpuTokenizer * tok, gint32 id)
{
  g_return_val_if_fail (tok != NULL, NULL);
  return VALID_ID (tok, id) ? tok->tokens[id].text : NULL;
}

const gchar *
npu_tokenizer_token_piece (const NpuTokenizer * tok, gint32 id, gsize * len)
{
  g_return_val_if_fail (tok != NULL, NULL);
  if (!VALID_ID (tok, id))
    return NULL;
  if (len)
    *len = tok->tokens[id].piece_len;
  return tok->tokens[id].piece;
}

NpuTokenType
npu_tokenizer_token_type (const NpuTokenizer * tok, gint32 id)
{
  g_return_val_if_fail (tok != NULL, NPU_TOKEN_TYPE_UNDEFINED);
  return VALID_ID (tok, id) ? tok->tokens[id].type : NPU_TOKEN_TYPE_UNDEFINED;
}

gfloat
npu_tokenizer_token_score (const NpuTokenizer * tok, gint32 id)
{
  g_return_val_if_fail (tok != NULL, 0.0f);
  return VALID_ID (tok, id) ? tok->tokens[id].score : 0.0f;
}

gint32
npu_tokenizer_find_token (const NpuTokenizer * tok, const gchar * text)
{
  g_return_val_if_fail (tok != NULL && text != NULL, NPU_TOKEN_NULL);
  return vocab_find (tok, text, strlen (text));
}

gint32
npu_tokenizer_get_bos (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, NPU_TOKEN_NULL);
  return tok->bos;
}

gint32
npu_tokenizer_get_eos (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, NPU_TOKEN_NULL);
  return tok->eos;
}

gint32
npu_tokenizer_get_eot (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, NPU_TOKEN_NULL);
  return tok->eot;
}

gint32
npu_tokenizer_get_unk (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, NPU_TOKEN_NULL);
  return tok->unk;
}

gint32
npu_tokenizer_get_pad (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, NPU_TOKEN_NULL);
  return tok->pad;
}

gboolean
npu_tokenizer_get_add_bos (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, FALSE);
  return tok->add_bos;
}

gboolean
npu_tokenizer_get_add_eos (const NpuTokenizer * tok)
{
  g_return_val_if_fail (tok != NULL, FALSE);
  return tok->add_eos;
}

gboolean
npu_tokenizer_is_eog (const NpuTokenizer * tok, gint32 id)
{
  g_return_val_if_fail (tok != NULL, FALSE);
  return VALID_ID (tok, id) && tok->tokens[id].eog;
}
