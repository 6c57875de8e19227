/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: deterministic random models in llama.cpp's GGUF layouts
 *
 * See npumodelgen.h and docs/models.md.  Key and tensor names follow
 * llama.cpp (src/llama-arch.cpp, gguf-py/gguf/constants.py and
 * tools/mtmd/clip-impl.h).
 *
 * Determinism.  Every tensor row has its own PRNG stream: xoshiro256**
 * seeded through splitmix64 from (seed, FNV-1a of the tensor name, row), so
 * the bytes do not depend on the order or chunking in which rows are
 * produced.  A weight is a sum of four 16-bit uniforms (Irwin-Hall, a
 * bounded bell shape within +-3.46 sigma) times one double constant, then
 * rounded to float: only integer operations and single IEEE multiplies
 * and adds, never libm, and no a * b + c that a compiler could fuse.
 * Quantisation is bit-exact code (npumxfp4.c, npumodelgen-quants.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "tests/tools/npumodelgen.h"
#include "tests/tools/npumodelgen-quants.h"

#include <math.h>
#include <string.h>

#include <core/formats/npugguf.h>
#include <core/formats/npuggufwriter.h>
#include <core/formats/npumxfp4.h>

G_DEFINE_QUARK (npu-model-gen-error-quark, npu_model_gen_error);

/* Image markers of the common small VLMs, as control tokens:
 * SmolVLM/Idefics3 wrap image tokens in <fake_token_around_image> with
 * <global-img> before the downscaled whole image; Qwen2-VL uses
 * <|vision_start|> <|image_pad|>... <|vision_end|>; LLaVA prompts carry
 * <image> where the embeddings go. */
const gchar *const npu_model_gen_markers[] = {
  "<image>",
  "<fake_token_around_image>",
  "<global-img>",
  "<|vision_start|>",
  "<|vision_end|>",
  "<|image_pad|>",
  NULL
};

#define N_MARKERS 6

/* Common English words, most frequent first (the rank is the word's
 * weight in the tokenizer training below), so that ordinary prompts
 * tokenize into whole words and common pieces rather than bytes. */
static const gchar *const words[] = {
  "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he",
  "was", "for", "on", "are", "with", "as", "i", "his", "they", "be", "at",
  "one", "have", "this", "from", "or", "had", "by", "not", "word", "but",
  "what", "some", "we", "can", "out", "other", "were", "all", "there",
  "when", "up", "use", "your", "how", "said", "an", "each", "she", "which",
  "do", "their", "time", "if", "will", "way", "about", "many", "then",
  "camera", "image", "video", "frame", "stream", "person", "people",
  "standing", "sitting", "walking", "holding", "wearing", "shows", "photo", "there",
  "scene", "background", "left", "right", "front", "table", "window",
  "building", "sky", "cat", "cars", "hello", "thanks", "please", "what's",
  "describe", "assistant", "user", "system", "model", "token", "text",
  "them", "write", "would", "like", "so", "these", "her", "long", "make",
  "thing", "see", "him", "two", "has", "look", "more", "day", "could", "go",
  "come", "did", "number", "sound", "no", "most", "people", "my", "over",
  "know", "water", "than", "call", "first", "who", "may", "down", "side",
  "been", "now", "find", "any", "new", "work", "part", "take", "get",
  "place", "made", "live", "where", "after", "back", "little", "only",
  "round", "man", "year", "came", "show", "every", "good", "me", "give",
  "our", "under", "name", "very", "through", "just", "form", "sentence",
  "great", "think", "say", "help", "low", "line", "differ", "turn", "cause",
  "much", "mean", "before", "move", "right", "boy", "old", "too", "same",
  "tell", "does", "set", "three", "want", "air", "well", "also", "play",
  "small", "end", "put", "home", "read", "hand", "port", "large", "spell",
  "add", "even", "land", "here", "must", "big", "high", "such", "follow",
  "act", "why", "ask", "men", "change", "went", "light", "kind", "off",
  "need", "house", "picture", "try", "us", "again", "animal", "point",
  "mother", "world", "near", "build", "self", "earth", "father", "head",
  "stand", "own", "page", "should", "country", "found", "answer", "school",
  "grow", "study", "still", "learn", "plant", "cover", "food", "sun",
  "four", "between", "state", "keep", "eye", "never", "last", "let",
  "thought", "city", "tree", "cross", "farm", "hard", "start", "might",
  "story", "saw", "far", "sea", "draw", "left", "late", "run", "while",
  "press", "close", "night", "real", "life", "few", "north", "open",
  "seem", "together", "next", "white", "children", "begin", "got", "walk",
  "example", "ease", "paper", "group", "always", "music", "those", "both",
  "mark", "often", "letter", "until", "mile", "river", "car", "feet",
  "care", "second", "book", "carry", "took", "science", "eat", "room",
  "friend", "began", "idea", "fish", "mountain", "stop", "once", "base",
  "hear", "horse", "cut", "sure", "watch", "color", "face", "wood", "main",
  "enough", "plain", "girl", "usual", "young", "ready", "above", "ever",
  "red", "list", "though", "feel", "talk", "bird", "soon", "body", "dog",
  "family", "direct", "pose", "leave", "song", "measure", "door", "product",
  "black", "short", "numeral", "class", "wind", "question", "happen",
  "complete", "ship", "area", "half", "rock", "order", "fire", "south",
  "problem", "piece", "told", "knew", "pass", "since", "top", "whole",
  "king", "space", "heard", "best", "hour", "better", "true", "during",
  "hundred", "five", "remember", "step", "early", "hold", "west", "ground",
  "interest", "reach", "fast", "verb", "sing", "listen", "six", "table",
  "travel", "less", "morning", "ten", "simple", "several", "vowel",
  "toward", "war", "lay", "against", "pattern", "slow", "center", "love",
  "person", "money", "serve", "appear", "road", "map", "rain", "rule",
  "govern", "pull", "cold", "notice", "voice", "unit", "power", "town",
  "fine", "certain", "fly", "fall", "lead", "cry", "dark", "machine",
  "note", "wait", "plan", "figure", "star", "box", "noun", "field", "rest",
  "correct", "able", "pound", "done", "beauty", "drive", "stood", "contain",
  "front", "teach", "week", "final", "gave", "green", "quick", "develop",
  "ocean", "warm", "free", "minute", "strong", "special", "mind", "behind",
  "clear", "tail", "produce", "fact", "street", "inch", "multiply",
  "nothing", "course", "stay", "wheel", "full", "force", "blue", "object",
  "decide", "surface", "deep", "moon", "island", "foot", "system", "busy",
  "test", "record", "boat", "common", "gold", "possible", "plane", "dry",
  "wonder", "laugh", "thousand", "ago", "ran", "check", "game", "shape",
  "yes", "hot", "miss", "brought", "heat", "snow", "tire", "bring",
  "distant", "fill", "east", "paint", "language", "among",
  NULL
};

/* ------------------------------------------------------------------------ */
/* PRNG                                                                      */

static guint64
splitmix64 (guint64 * s)
{
  guint64 z = (*s += G_GUINT64_CONSTANT (0x9E3779B97F4A7C15));

  z = (z ^ (z >> 30)) * G_GUINT64_CONSTANT (0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * G_GUINT64_CONSTANT (0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static inline guint64
rotl64 (guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

/* xoshiro256** 1.0 (Blackman and Vigna) */
static inline guint64
xoshiro_next (guint64 * s)
{
  guint64 result = rotl64 (s[1] * 5, 7) * 9;
  guint64 t = s[1] << 17;

  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl64 (s[3], 45);
  return result;
}

static guint64
fnv1a64 (const gchar * s)
{
  guint64 h = G_GUINT64_CONSTANT (0xcbf29ce484222325);

  for (; *s; s++) {
    h ^= (guint8) * s;
    h *= G_GUINT64_CONSTANT (0x100000001b3);
  }
  return h;
}

/* ------------------------------------------------------------------------ */
/* Number formats                                                            */

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */

/* sqrt(3) / 65536: a sum of four 16-bit uniforms minus its mean, times
 * this, has standard deviation 1 */
#define IRWIN_HALL_SCALE (1.7320508075688772 / 65536.0)

typedef struct
{
  gchar *name;
  guint n_dims;
  guint64 ne[4];
  guint32 type;
  gdouble mean;
  gdouble std;
  guint64 seed;
  guint grid_rows;              /* 0, or round each group of this many
                                 * rows (contiguous) to MXFP4 values first */
  float *row;                   /* ne[0] floats, for the fill callback */
  float *group;                 /* grid_rows rows, for grid_rows */
  guint64 group_index;          /* the group now in @group, or G_MAXUINT64 */
  gboolean f16_values;          /* round every value to F16's values */
  NpuBlockMxfp4 *blocks;        /* a group's blocks of 32 */
} TensorSpec;

static void
tensor_spec_free (gpointer p)
{
  TensorSpec *t = p;

  g_free (t->row);
  g_free (t->group);
  g_free (t->blocks);
  g_free (t->name);
  g_free (t);
}

static void
gen_row (const TensorSpec * t, guint64 row, float *out)
{
  guint64 sm = t->seed ^ (row * G_GUINT64_CONSTANT (0xD1B54A32D192ED03));
  guint64 s[4];
  gdouble scale = t->std * IRWIN_HALL_SCALE;
  guint64 j;

  s[0] = splitmix64 (&sm);
  s[1] = splitmix64 (&sm);
  s[2] = splitmix64 (&sm);
  s[3] = splitmix64 (&sm);
  for (j = 0; j < t->ne[0]; j++) {
    guint64 r = xoshiro_next (s);
    gint64 sum = (gint64) ((r & 0xffff) + ((r >> 16) & 0xffff) +
        ((r >> 32) & 0xffff) + (r >> 48)) - 131070;
    gdouble v = (gdouble) sum * scale;

    if (t->mean != 0.0) {
      /* the store keeps v * scale + mean from becoming one fused
       * multiply-add, which would round differently on some machines */
      volatile gdouble p = v;
      v = p + t->mean;
    }
    out[j] = (float) v;
  }
}

static gboolean
fill_tensor (const gchar * name, guint8 * dst, guint64 offset, gsize n_bytes,
    gpointer user_data, GError ** error)
{
  TensorSpec *t = user_data;
  gsize row_bytes = npu_gguf_writer_row_size (t->type, t->ne[0]);
  guint64 row = offset / row_bytes, end = row + n_bytes / row_bytes;
  gsize n = t->ne[0], j;

  if (t->row == NULL)
    t->row = g_new (float, n);
  if (t->grid_rows && t->blocks == NULL) {
    t->group = g_new (float, n * t->grid_rows);
    t->blocks = g_new (NpuBlockMxfp4, n * t->grid_rows /
        NPU_MXFP4_BLOCK_SIZE);
    t->group_index = G_MAXUINT64;
  }
  for (; row < end; row++, dst += row_bytes) {
    if (t->grid_rows) {
      /* the values an MXFP4 copy of the group decodes to: exact in F32,
       * F16 and BF16 (an E2M1 value has two significant bits).  A group
       * is what a runtime quantises as one row: one ne[0] row of a
       * matrix, or a whole output channel of a convolution kernel.
       * Chunks need not end on a group boundary, hence the cache. */
      guint64 g = row / t->grid_rows, k;

      if (g != t->group_index) {
        for (k = 0; k < t->grid_rows; k++)
          gen_row (t, g * t->grid_rows + k, t->group + k * n);
        npu_mxfp4_quantize_f32 (t->group, t->blocks, n * t->grid_rows);
        npu_mxfp4_dequantize (t->blocks, t->group, n * t->grid_rows);
        t->group_index = g;
      }
      memcpy (t->row, t->group + (row - g * t->grid_rows) * n,
          n * sizeof (float));
    } else {
      gen_row (t, row, t->row);
    }
    if (t->f16_values)
      for (j = 0; j < n; j++)
        t->row[j] = npu_f16_to_f32 (npu_model_gen_f32_to_f16 (t->row[j]));
    if (!npu_model_gen_quantize_row (t->type, t->row, dst, n)) {
      g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
          "no generator for type %u", t->type);
      return FALSE;
    }
  }
  return TRUE;
}

/* Adds a random tensor: mean + std * (bell-shaped noise), rounded to
 * MXFP4's values first in groups of @grid_rows rows if it is not 0
 * (ne0 * grid_rows a multiple of 32; 1 for a matrix), or to F16's values
 * if @f16_values */
static gboolean
add_random (NpuGgufWriter * w, guint64 seed, NpuModelGenStats * stats,
    const gchar * name, guint32 type, guint grid_rows, gboolean f16_values,
    gdouble mean,
    gdouble std, guint n_dims, guint64 ne0, guint64 ne1, guint64 ne2,
    guint64 ne3, GError ** error)
{
  TensorSpec *t = g_new0 (TensorSpec, 1);
  guint64 s = seed ^ fnv1a64 (name);

  /* rows that are not whole K-quant super-blocks take llama-quantize's
   * fallback type */
  type = npu_model_gen_row_type (type, ne0);

  t->name = g_strdup (name);
  t->n_dims = n_dims;
  t->ne[0] = ne0;
  t->ne[1] = ne1;
  t->ne[2] = ne2;
  t->ne[3] = ne3;
  t->type = type;
  t->mean = mean;
  t->std = std;
  t->grid_rows = grid_rows;
  t->f16_values = f16_values;
  t->seed = splitmix64 (&s);
  stats->n_params += ne0 * ne1 * ne2 * ne3;
  stats->n_tensors++;
  return npu_gguf_writer_add_tensor_func (w, name, n_dims, t->ne, type,
      fill_tensor, t, tensor_spec_free, error);
}

/* ------------------------------------------------------------------------ */
/* Tokenizer: a small byte-pair encoding trained on the word list          */

typedef struct
{
  GPtrArray *sym;               /* symbol id -> string */
  GHashTable *ids;              /* string -> id + 1 */
  GArray *merge_a, *merge_b;    /* merge k joins symbols a[k] and b[k] */
  GArray *pieces;               /* ids of symbols made by merges, in order */
} Bpe;

typedef struct
{
  GArray *syms;                 /* guint symbol ids */
  guint64 weight;
} Word;

static guint
bpe_intern (Bpe * bpe, const gchar * s, gboolean * is_new)
{
  gpointer v = g_hash_table_lookup (bpe->ids, s);
  gchar *copy;

  if (is_new)
    *is_new = v == NULL;
  if (v)
    return GPOINTER_TO_UINT (v) - 1;
  copy = g_strdup (s);
  g_ptr_array_add (bpe->sym, copy);
  g_hash_table_insert (bpe->ids, copy, GUINT_TO_POINTER (bpe->sym->len));
  return bpe->sym->len - 1;
}

static void
bpe_init (Bpe * bpe)
{
  bpe->sym = g_ptr_array_new_with_free_func (g_free);
  bpe->ids = g_hash_table_new (g_str_hash, g_str_equal);
  bpe->merge_a = g_array_new (FALSE, FALSE, sizeof (guint));
  bpe->merge_b = g_array_new (FALSE, FALSE, sizeof (guint));
  bpe->pieces = g_array_new (FALSE, FALSE, sizeof (guint));
}

static void
bpe_clear (Bpe * bpe)
{
  g_hash_table_unref (bpe->ids);
  g_ptr_array_unref (bpe->sym);
  g_array_unref (bpe->merge_a);
  g_array_unref (bpe->merge_b);
  g_array_unref (bpe->pieces);
}

/* Records a merge; returns the resulting symbol (new or not) */
static guint
bpe_add_merge (Bpe * bpe, guint a, guint b, gboolean * is_new)
{
  gchar *s = g_strconcat (g_ptr_array_index (bpe->sym, a),
      g_ptr_array_index (bpe->sym, b), NULL);
  guint r = bpe_intern (bpe, s, is_new);

  g_free (s);
  g_array_append_val (bpe->merge_a, a);
  g_array_append_val (bpe->merge_b, b);
  if (*is_new)
    g_array_append_val (bpe->pieces, r);
  return r;
}

#define PAIR_TABLE_BITS 15

/* Greedy BPE: repeatedly merge the most frequent adjacent pair (ties: the
 * smaller pair of ids, so the result is deterministic) until @max_pieces
 * new symbols exist or nothing is left to merge. */
static void
bpe_train (Bpe * bpe, GPtrArray * corpus, guint max_pieces)
{
  const gsize size = 1u << PAIR_TABLE_BITS;
  guint64 *keys = g_new (guint64, size);
  guint64 *counts = g_new0 (guint64, size);
  GArray *used = g_array_new (FALSE, FALSE, sizeof (gsize));

  for (gsize i = 0; i < size; i++)
    keys[i] = G_MAXUINT64;
  while (bpe->pieces->len < max_pieces) {
    guint64 best_key = G_MAXUINT64, best_count = 0;
    guint a, b, r;
    gboolean is_new;
    guint w, k;

    for (w = 0; w < corpus->len; w++) {
      Word *wd = g_ptr_array_index (corpus, w);

      for (k = 0; k + 1 < wd->syms->len; k++) {
        guint64 key = ((guint64) g_array_index (wd->syms, guint, k) << 32) |
            g_array_index (wd->syms, guint, k + 1);
        gsize h = (key * G_GUINT64_CONSTANT (0x9E3779B97F4A7C15)) >>
            (64 - PAIR_TABLE_BITS);

        while (keys[h] != G_MAXUINT64 && keys[h] != key)
          h = (h + 1) & (size - 1);
        if (keys[h] == G_MAXUINT64) {
          keys[h] = key;
          g_array_append_val (used, h);
        }
        counts[h] += wd->weight;
      }
    }
    for (k = 0; k < used->len; k++) {
      gsize h = g_array_index (used, gsize, k);

      if (counts[h] > best_count || (counts[h] == best_count
              && keys[h] < best_key)) {
        best_count = counts[h];
        best_key = keys[h];
      }
      keys[h] = G_MAXUINT64;
      counts[h] = 0;
    }
    g_array_set_size (used, 0);
    if (best_count == 0)
      break;

    a = best_key >> 32;
    b = best_key & 0xffffffff;
    r = bpe_add_merge (bpe, a, b, &is_new);
    for (w = 0; w < corpus->len; w++) {
      Word *wd = g_ptr_array_index (corpus, w);
      guint *s = (guint *) wd->syms->data, n = wd->syms->len, o = 0;

      for (k = 0; k < n; k++) {
        if (k + 1 < n && s[k] == a && s[k + 1] == b) {
          s[o++] = r;
          k++;
        } else {
          s[o++] = s[k];
        }
      }
      g_array_set_size (wd->syms, o);
    }
  }
  g_array_unref (used);
  g_free (keys);
  g_free (counts);
}

/* Once the word list is exhausted, larger vocabularies are filled with
 * pieces + one letter, in a fixed order: real-looking sub-words whose
 * merges are as consistent as the trained ones. */
static void
bpe_fill (Bpe * bpe, guint n_pieces, const guint * letters, guint n_letters)
{
  guint i, l;

  for (i = 0; bpe->pieces->len < n_pieces && i < bpe->pieces->len; i++) {
    for (l = 0; l < n_letters && bpe->pieces->len < n_pieces; l++) {
      guint a = g_array_index (bpe->pieces, guint, i);
      gchar *s = g_strconcat (g_ptr_array_index (bpe->sym, a),
          g_ptr_array_index (bpe->sym, letters[l]), NULL);
      gboolean is_new;

      if (!g_hash_table_contains (bpe->ids, s))
        bpe_add_merge (bpe, a, letters[l], &is_new);
      g_free (s);
    }
  }
}

static void
word_free (gpointer p)
{
  Word *w = p;

  g_array_unref (w->syms);
  g_free (w);
}

/* @prefix (the word-start marker), then the word's characters, each an
 * existing symbol */
static void
corpus_add (GPtrArray * corpus, Bpe * bpe, const gchar * prefix,
    const gchar * word, gboolean capitalize, guint64 weight)
{
  Word *w = g_new0 (Word, 1);
  const gchar *p;

  w->syms = g_array_new (FALSE, FALSE, sizeof (guint));
  w->weight = weight;
  if (prefix) {
    guint id = bpe_intern (bpe, prefix, NULL);
    g_array_append_val (w->syms, id);
  }
  for (p = word; *p; p++) {
    gchar c[2] = { *p, 0 };
    guint id;

    if (capitalize && p == word)
      c[0] = g_ascii_toupper (c[0]);
    id = bpe_intern (bpe, c, NULL);
    g_array_append_val (w->syms, id);
  }
  g_ptr_array_add (corpus, w);
}

static const gchar letter_order[] = "etaoinshrdlcumwfgypbvkjxqz";

/* Number of capitalised words in the training corpus */
#define N_CAPITALIZED 120

static void
train_words (Bpe * bpe, const gchar * space, gboolean bare_too,
    guint n_pieces)
{
  GPtrArray *corpus = g_ptr_array_new_with_free_func (word_free);
  guint letters[26];
  guint i;

  for (i = 0; words[i]; i++) {
    /* Zipf-like weights: frequent words get merged into whole tokens first */
    guint64 wt = 100000 / (i + 1) + 1;

    corpus_add (corpus, bpe, space, words[i], FALSE, wt);
    if (i < N_CAPITALIZED)
      corpus_add (corpus, bpe, space, words[i], TRUE, wt / 4 + 1);
    if (bare_too) {
      corpus_add (corpus, bpe, NULL, words[i], FALSE, wt / 8 + 1);
      if (i < N_CAPITALIZED)
        corpus_add (corpus, bpe, NULL, words[i], TRUE, wt / 4 + 1);
    }
  }
  bpe_train (bpe, corpus, n_pieces);
  for (i = 0; i < 26; i++) {
    gchar c[2] = { letter_order[i], 0 };
    letters[i] = bpe_intern (bpe, c, NULL);
  }
  bpe_fill (bpe, n_pieces, letters, 26);
  g_ptr_array_unref (corpus);
}

/* GPT-2's bytes_to_unicode(): printable bytes stand for themselves, the
 * others (space, controls...) map to U+0100 and up, in this order. */
static void
gpt2_byte_order (guint8 order[256], gunichar cp[256])
{
  gboolean printable[256] = { 0 };
  guint b, n = 0, k = 0;

  for (b = 0; b < 256; b++)
    printable[b] = (b >= 33 && b <= 126) || (b >= 161 && b <= 172)
        || (b >= 174);
  for (b = 0; b < 256; b++)
    if (printable[b]) {
      order[k] = b;
      cp[k++] = b;
    }
  for (b = 0; b < 256; b++)
    if (!printable[b]) {
      order[k] = b;
      cp[k++] = 256 + n++;
    }
}

/* Base characters of the SentencePiece vocabulary besides byte fallback */
static const gchar spm_chars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    ".,!?;:'\"-()[]{}/\\@#$%&*+=<>_~`^|";

#define SPM_SPACE "\xe2\x96\x81"        /* U+2581 LOWER ONE EIGHTH BLOCK */
#define GPT2_SPACE "\xc4\xa0"   /* U+0120, byte 0x20 in GPT-2's map */

static const gchar qwen2_chat_template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] "
    "!= 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant."
    "<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' "
    "+ message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% endif %}";

/* Qwen3's tokenizer_config.json template, verbatim: no default system
 * turn, the thinking block of earlier assistant turns dropped, and
 * "<think>\n\n</think>\n\n" after the generation prompt only when
 * enable_thinking is false (thinking is on by default) */
static const gchar qwen3_chat_template[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- messages[0].content + '\\n\\n' }}\n"
    "    {%- endif %}\n"
    "    {{- \"# Tools\\n\\nYou may call one or more functions to assist wi"
    "th the user query.\\n\\nYou are provided with function signatures with"
    "in <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json objec"
    "t with function name and arguments within <tool_call></tool_call> XML "
    "tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments"
    "\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|"
    ">\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages"
    "|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n"
    "    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == \"user\" and not(mes"
    "sage.content.startswith('<tool_response>') and message.content.endswit"
    "h('</tool_response>')) %}\n"
    "        {%- set ns.multi_step_tool = false %}\n"
    "        {%- set ns.last_query_index = index %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" a"
    "nd not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + "
    "'<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {%- set content = message.content %}\n"
    "        {%- set reasoning_content = '' %}\n"
    "        {%- if message.reasoning_content is defined and message.reason"
    "ing_content is not none %}\n"
    "            {%- set reasoning_content = message.reasoning_content %}\n"
    "        {%- else %}\n"
    "            {%- if '</think>' in message.content %}\n"
    "                {%- set content = message.content.split('</think>')[-1"
    "].lstrip('\\n') %}\n"
    "                {%- set reasoning_content = message.content.split('</t"
    "hink>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}\n"
    "            {%- endif %}\n"
    "        {%- endif %}\n"
    "        {%- if loop.index0 > ns.last_query_index %}\n"
    "            {%- if loop.last or (not loop.last and reasoning_content) "
    "%}\n"
    "                {{- '<|im_start|>' + message.role + '\\n<think>\\n' + "
    "reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip("
    "'\\n') }}\n"
    "            {%- else %}\n"
    "                {{- '<|im_start|>' + message.role + '\\n' + content }}"
    "\n"
    "            {%- endif %}\n"
    "        {%- else %}\n"
    "            {{- '<|im_start|>' + message.role + '\\n' + content }}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if (loop.first and content) or (not loop.first) %}"
    "\n"
    "                    {{- '\\n' }}\n"
    "                {%- endif %}\n"
    "                {%- if tool_call.function %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    "                {{- '<tool_call>\\n{\"name\": \"' }}\n"
    "                {{- tool_call.name }}\n"
    "                {{- '\", \"arguments\": ' }}\n"
    "                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n"
    "                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n"
    "                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != \"tool"
    "\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool"
    "\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}"
    "\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}";

static const gchar llama_chat_template[] =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = "
    "messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = "
    "false %}{% endif %}{% for message in loop_messages %}"
    "{% if loop.index0 == 0 and system_message != false %}{% set content = "
    "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + "
    "message['content'] %}{% else %}{% set content = message['content'] %}"
    "{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' "
    "+ content.strip() + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}";

#define SPM_N_SPECIAL 3         /* <unk> <s> </s> */
#define QWEN2_N_SPECIAL 3       /* <|endoftext|> <|im_start|> <|im_end|> */

/* o200k_harmony's format tokens, after <|endoftext|>, in their order of
 * ids there; <|return|> is the eos */
static const gchar *const harmony_special[] = {
  "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>", "<|end|>",
  "<|message|>", "<|call|>", NULL
};

#define HARMONY_N_SPECIAL 8     /* <|endoftext|> and the above */

/* Not gpt-oss's template (which is long): enough of its text for the
 * family to be recognised (llama.cpp's test, "<|start|>" and
 * "<|channel|>"), rendered as that family */
/* Gemma's turns (the system prompt joins the first user turn) */
static const gchar gemma_chat_template[] =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + "
    "(message['role'] == 'assistant' and 'model' or message['role']) + "
    "'\\n' + message['content'] + '<end_of_turn>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}"
    "{% endif %}";

static const gchar harmony_chat_template[] =
    "{%- for message in messages -%}{{- '<|start|>' + message['role'] + "
    "'<|message|>' + message['content'] + '<|end|>' -}}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}"
    "{#- the model answers <|channel|>final<|message|>... -#}";

/* Token types (llama_token_type) */
#define TT_NORMAL 1
#define TT_UNKNOWN 2
#define TT_CONTROL 3
#define TT_BYTE 6

/* llama's and gemma's files carry a SentencePiece vocabulary, the
 * others a byte-level BPE */
static gboolean
spm_vocab (NpuModelArch arch)
{
  return arch == NPU_MODEL_ARCH_LLAMA || arch == NPU_MODEL_ARCH_GEMMA3;
}

static guint
min_vocab (NpuModelArch arch)
{
  if (spm_vocab (arch))
    return SPM_N_SPECIAL + 256 + 1 + strlen (spm_chars) + N_MARKERS;
  return 256 + QWEN2_N_SPECIAL + N_MARKERS;
}

static gboolean
add_tokenizer (NpuGgufWriter * w, const NpuTextModelParams * p,
    GError ** error)
{
  GPtrArray *tokens = g_ptr_array_new_with_free_func (g_free);
  GArray *types = g_array_new (FALSE, FALSE, sizeof (gint32));
  GArray *scores = g_array_new (FALSE, FALSE, sizeof (gfloat));
  GPtrArray *merges = g_ptr_array_new_with_free_func (g_free);
  Bpe bpe;
  gboolean ok = TRUE;
  guint i, k;

#define ADD_TOKEN(str, type, score) G_STMT_START {              \
    gint32 tt_ = (type); gfloat sc_ = (score);                  \
    g_ptr_array_add (tokens, (str));                            \
    g_array_append_val (types, tt_);                            \
    g_array_append_val (scores, sc_);                           \
  } G_STMT_END

  bpe_init (&bpe);
  if (spm_vocab (p->arch)) {
    guint n_base, n_pieces;
    gfloat score = 0.0f;

    /* llama's SentencePiece layout: <unk> <s> </s>, the 256 byte-fallback
     * tokens, the merged pieces by falling score, the single characters
     * last; llama.cpp's SPM tokenizer merges by score, so a piece's score
     * is its merge rank. */
    ADD_TOKEN (g_strdup ("<unk>"), TT_UNKNOWN, 0.0f);
    ADD_TOKEN (g_strdup ("<s>"), TT_CONTROL, 0.0f);
    ADD_TOKEN (g_strdup ("</s>"), TT_CONTROL, 0.0f);
    for (i = 0; i < 256; i++)
      ADD_TOKEN (g_strdup_printf ("<0x%02X>", i), TT_BYTE, 0.0f);
    bpe_intern (&bpe, SPM_SPACE, NULL);
    for (i = 0; spm_chars[i]; i++) {
      gchar c[2] = { spm_chars[i], 0 };
      bpe_intern (&bpe, c, NULL);
    }
    n_base = bpe.sym->len;
    n_pieces = p->vocab - tokens->len - n_base - N_MARKERS;
    train_words (&bpe, SPM_SPACE, FALSE, n_pieces);
    for (k = 0; k < bpe.pieces->len; k++) {
      guint id = g_array_index (bpe.pieces, guint, k);
      ADD_TOKEN (g_strdup (g_ptr_array_index (bpe.sym, id)), TT_NORMAL,
          score);
      score -= 1.0f;
    }
    for (k = 0; k < n_base; k++) {
      ADD_TOKEN (g_strdup (g_ptr_array_index (bpe.sym, k)), TT_NORMAL,
          score);
      score -= 1.0f;
    }
  } else {
    guint8 order[256];
    gunichar cp[256];
    guint n_pieces;

    /* GPT-2 byte-level BPE as Qwen2 carries it: the 256 byte tokens
     * (ids 0..255 in bytes_to_unicode order), merged tokens in merge
     * order, the special tokens last. */
    gpt2_byte_order (order, cp);
    for (i = 0; i < 256; i++) {
      gchar s[8] = { 0 };
      g_unichar_to_utf8 (cp[i], s);
      bpe_intern (&bpe, s, NULL);
      ADD_TOKEN (g_strdup (s), TT_NORMAL, 0.0f);
    }
    n_pieces = p->vocab - 256 - N_MARKERS - (p->harmony ? HARMONY_N_SPECIAL
        : QWEN2_N_SPECIAL);
    train_words (&bpe, GPT2_SPACE, TRUE, n_pieces);
    for (k = 0; k < bpe.pieces->len; k++) {
      guint id = g_array_index (bpe.pieces, guint, k);
      ADD_TOKEN (g_strdup (g_ptr_array_index (bpe.sym, id)), TT_NORMAL,
          0.0f);
    }
    for (k = 0; k < bpe.merge_a->len; k++)
      g_ptr_array_add (merges, g_strdup_printf ("%s %s",
              (gchar *) g_ptr_array_index (bpe.sym,
                  g_array_index (bpe.merge_a, guint, k)),
              (gchar *) g_ptr_array_index (bpe.sym,
                  g_array_index (bpe.merge_b, guint, k))));
    ADD_TOKEN (g_strdup ("<|endoftext|>"), TT_CONTROL, 0.0f);
    if (p->harmony) {
      for (i = 0; harmony_special[i]; i++)
        ADD_TOKEN (g_strdup (harmony_special[i]), TT_CONTROL, 0.0f);
    } else {
      ADD_TOKEN (g_strdup ("<|im_start|>"), TT_CONTROL, 0.0f);
      ADD_TOKEN (g_strdup ("<|im_end|>"), TT_CONTROL, 0.0f);
    }
  }
  for (i = 0; npu_model_gen_markers[i]; i++)
    ADD_TOKEN (g_strdup (npu_model_gen_markers[i]), TT_CONTROL, 0.0f);
#undef ADD_TOKEN

  if (tokens->len != p->vocab) {
    /* the word list and its fillers ran out: cannot happen for the
     * vocabulary sizes the fillers reach (hundreds of thousands) */
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "could only build %u of the %u tokens asked for", tokens->len,
        p->vocab);
    ok = FALSE;
    goto out;
  }

  g_ptr_array_add (tokens, NULL);
  g_ptr_array_add (merges, NULL);
  if (spm_vocab (p->arch)) {
    ok = npu_gguf_writer_add_string (w, "tokenizer.ggml.model", "llama", -1,
        error)
        && npu_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens",
        (const gchar * const *) tokens->pdata, -1, error)
        && npu_gguf_writer_add_array (w, "tokenizer.ggml.scores",
        NPU_GGUF_TYPE_FLOAT32, scores->data, scores->len, error)
        && npu_gguf_writer_add_array (w, "tokenizer.ggml.token_type",
        NPU_GGUF_TYPE_INT32, types->data, types->len, error)
        && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.bos_token_id", 1, error)
        && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.eos_token_id", 2, error)
        && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.unknown_token_id", 0,
        error)
        && npu_gguf_writer_add_bool (w, "tokenizer.ggml.add_bos_token", TRUE,
        error)
        && npu_gguf_writer_add_bool (w, "tokenizer.ggml.add_eos_token", FALSE,
        error)
        && npu_gguf_writer_add_string (w, "tokenizer.chat_template",
        p->arch == NPU_MODEL_ARCH_GEMMA3 ? gemma_chat_template :
        llama_chat_template, -1, error);
  } else {
    guint32 eot = p->vocab - N_MARKERS - (p->harmony ? HARMONY_N_SPECIAL :
        QWEN2_N_SPECIAL);
    /* harmony: eos <|return|>, right after <|endoftext|> */
    guint32 eos = p->harmony ? eot + 1 : eot + 2;

    /* as Qwen2-Instruct and Qwen3 files (whose pre-tokenizer llama.cpp
     * also names qwen2): no scores, bos = pad = <|endoftext|>, eos =
     * <|im_end|>, no BOS added */
    ok = npu_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2", -1,
        error)
        && npu_gguf_writer_add_string (w, "tokenizer.ggml.pre", "qwen2", -1,
        error)
        && npu_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens",
        (const gchar * const *) tokens->pdata, -1, error)
        && npu_gguf_writer_add_array (w, "tokenizer.ggml.token_type",
        NPU_GGUF_TYPE_INT32, types->data, types->len, error)
        && npu_gguf_writer_add_string_array (w, "tokenizer.ggml.merges",
        (const gchar * const *) merges->pdata, -1, error)
        && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.eos_token_id", eos,
        error)
        && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.padding_token_id", eot,
        error)
        && npu_gguf_writer_add_u32 (w, "tokenizer.ggml.bos_token_id", eot,
        error)
        && npu_gguf_writer_add_bool (w, "tokenizer.ggml.add_bos_token", FALSE,
        error);
    /* gpt-oss's harmony template is written only when asked for: a file
     * without one is prompted raw */
    if (ok && p->arch == NPU_MODEL_ARCH_GPT_OSS && p->harmony)
      ok = npu_gguf_writer_add_string (w, "tokenizer.chat_template",
          harmony_chat_template, -1, error);
    else if (ok && p->arch != NPU_MODEL_ARCH_GPT_OSS)
      ok = npu_gguf_writer_add_string (w, "tokenizer.chat_template",
          p->arch == NPU_MODEL_ARCH_QWEN3 ? qwen3_chat_template :
          qwen2_chat_template, -1, error);
  }

out:
  bpe_clear (&bpe);
  g_ptr_array_unref (tokens);
  g_ptr_array_unref (merges);
  g_array_unref (types);
  g_array_unref (scores);
  return ok;
}

/* ------------------------------------------------------------------------ */
/* Parameters                                                                */

const gchar *
npu_model_gen_arch_name (NpuModelArch arch)
{
  switch (arch) {
    case NPU_MODEL_ARCH_LLAMA:
      return "llama";
    case NPU_MODEL_ARCH_QWEN2:
      return "qwen2";
    case NPU_MODEL_ARCH_GPT_OSS:
      return "gpt-oss";
    case NPU_MODEL_ARCH_GEMMA3:
      return "gemma3";
    default:
      return "qwen3";
  }
}

gint
npu_model_gen_parse_type (const gchar * name)
{
  static const struct
  {
    const gchar *name;
    guint32 type;
  } types[] = {
    {"f32", NPU_GGML_TYPE_F32}, {"f16", NPU_GGML_TYPE_F16},
    {"bf16", NPU_GGML_TYPE_BF16}, {"q4_0", NPU_GGML_TYPE_Q4_0},
    {"q4_1", NPU_GGML_TYPE_Q4_1}, {"q5_0", NPU_GGML_TYPE_Q5_0},
    {"q5_1", NPU_GGML_TYPE_Q5_1}, {"q8_0", NPU_GGML_TYPE_Q8_0},
    {"q4_k", NPU_GGML_TYPE_Q4_K}, {"q5_k", NPU_GGML_TYPE_Q5_K},
    {"q6_k", NPU_GGML_TYPE_Q6_K}, {"mxfp4", NPU_GGML_TYPE_MXFP4},
  };
  guint i;

  for (i = 0; i < G_N_ELEMENTS (types); i++)
    if (name && g_ascii_strcasecmp (name, types[i].name) == 0)
      return types[i].type;
  return -1;
}

/* llama_ftype ids (llama.h); a file of one K-quant throughout is its
 * "_S" preset */
guint32
npu_model_gen_file_type (guint32 wtype)
{
  switch (wtype) {
    case NPU_GGML_TYPE_F16:
      return 1;                 /* LLAMA_FTYPE_MOSTLY_F16 */
    case NPU_GGML_TYPE_Q4_0:
      return 2;                 /* LLAMA_FTYPE_MOSTLY_Q4_0 */
    case NPU_GGML_TYPE_Q4_1:
      return 3;                 /* LLAMA_FTYPE_MOSTLY_Q4_1 */
    case NPU_GGML_TYPE_Q8_0:
      return 7;                 /* LLAMA_FTYPE_MOSTLY_Q8_0 */
    case NPU_GGML_TYPE_Q5_0:
      return 8;                 /* LLAMA_FTYPE_MOSTLY_Q5_0 */
    case NPU_GGML_TYPE_Q5_1:
      return 9;                 /* LLAMA_FTYPE_MOSTLY_Q5_1 */
    case NPU_GGML_TYPE_Q4_K:
      return 14;                /* LLAMA_FTYPE_MOSTLY_Q4_K_S */
    case NPU_GGML_TYPE_Q5_K:
      return 16;                /* LLAMA_FTYPE_MOSTLY_Q5_K_S */
    case NPU_GGML_TYPE_Q6_K:
      return 18;                /* LLAMA_FTYPE_MOSTLY_Q6_K */
    case NPU_GGML_TYPE_BF16:
      return 32;                /* LLAMA_FTYPE_MOSTLY_BF16 */
    case NPU_GGML_TYPE_MXFP4:
      return 38;                /* LLAMA_FTYPE_MOSTLY_MXFP4_MOE */
    default:
      return 0;                 /* LLAMA_FTYPE_ALL_F32 */
  }
}

/* gpt-oss-20b's hyper-parameters (its config.json), and small ones for
 * the tests: a YaRN ramp that crosses the small heads' frequencies (the
 * 20 B's factor 32 over 4096 positions puts it at pairs 8..18 of 32; the
 * tiny's 8 over 128 at pairs 0..5 of 16) */
static gboolean
gpt_oss_preset (NpuTextModelParams * p, const gchar * size, GError ** error)
{
  p->tied = FALSE;
  p->rms_eps = 1e-5f;
  p->rope_base = 150000.0f;
  p->sliding_window = 128;
  p->n_experts_used = 4;
  if (g_strcmp0 (size, "tiny") == 0) {
    p->n_layers = 2;
    p->dim = 64;
    p->ff = 64;
    p->n_heads = 4;
    p->n_kv_heads = 2;
    p->head_dim = 32;           /* q and o not square, as the 20 B's */
    p->n_experts = 8;
    p->vocab = 1024;
    p->ctx = 1024;
    p->yarn_factor = 8.0f;
    p->yarn_orig_ctx = 128;
  } else if (g_strcmp0 (size, "small") == 0) {
    p->n_layers = 4;
    p->dim = 256;
    p->ff = 256;
    p->n_heads = 8;
    p->n_kv_heads = 2;
    p->head_dim = 64;
    p->n_experts = 16;
    p->vocab = 8192;
    p->ctx = 4096;
    p->yarn_factor = 8.0f;
    p->yarn_orig_ctx = 512;
  } else if (g_strcmp0 (size, "20b") == 0) {
    p->wtype = NPU_GGML_TYPE_MXFP4;
    p->n_layers = 24;
    p->dim = 2880;
    p->ff = 2880;
    p->n_heads = 64;
    p->n_kv_heads = 8;
    p->head_dim = 64;
    p->n_experts = 32;
    p->vocab = 201088;
    p->ctx = 131072;
    p->yarn_factor = 32.0f;
    p->yarn_orig_ctx = 4096;
  } else {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "unknown gpt-oss size '%s' (tiny, small, 20b)", size);
    return FALSE;
  }
  return TRUE;
}

/* Gemma 3: six layers (five sliding, one global) in the small sizes too,
 * a window shorter than the tests' prompts, heads wider than dim / heads
 * (1B: 4 x 256 on 1152), tied, eps 1e-6, global base 1e6 */
static gboolean
gemma3_preset (NpuTextModelParams * p, const gchar * size, GError ** error)
{
  p->rms_eps = 1e-6f;
  p->rope_base = 1000000.0f;
  p->tied = TRUE;
  if (g_strcmp0 (size, "tiny") == 0) {
    p->n_layers = 6;
    p->dim = 64;
    p->ff = 192;
    p->n_heads = 4;
    p->n_kv_heads = 2;
    p->head_dim = 32;
    p->vocab = 1024;
    p->ctx = 512;
    p->sliding_window = 8;
  } else if (g_strcmp0 (size, "small") == 0) {
    p->n_layers = 6;
    p->dim = 256;
    p->ff = 704;
    p->n_heads = 4;
    p->n_kv_heads = 1;
    p->head_dim = 128;
    p->vocab = 8192;
    p->ctx = 2048;
    p->sliding_window = 64;
  } else if (g_strcmp0 (size, "1b") == 0) {
    /* Gemma 3 1B's shapes with a 32k vocabulary (its own has 262k) */
    p->wtype = NPU_GGML_TYPE_MXFP4;
    p->n_layers = 26;
    p->dim = 1152;
    p->ff = 6912;
    p->n_heads = 4;
    p->n_kv_heads = 1;
    p->head_dim = 256;
    p->vocab = 32000;
    p->ctx = 4096;
    p->sliding_window = 512;
  } else {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "unknown gemma3 size '%s' (tiny, small, 1b)", size);
    return FALSE;
  }
  return TRUE;
}

gboolean
npu_model_gen_text_preset (NpuTextModelParams * p, NpuModelArch arch,
    const gchar * size, GError ** error)
{
  memset (p, 0, sizeof (*p));
  p->arch = arch;
  p->seed = 1;
  p->wtype = NPU_GGML_TYPE_F32;
  /* llama 2's and Qwen2's values */
  p->rms_eps = arch == NPU_MODEL_ARCH_LLAMA ? 1e-5f : 1e-6f;
  p->rope_base = arch == NPU_MODEL_ARCH_LLAMA ? 10000.0f : 1000000.0f;
  /* Qwen2's and Qwen3's small models tie the output to the embedding,
   * llama's not */
  p->tied = arch != NPU_MODEL_ARCH_LLAMA;

  if (arch == NPU_MODEL_ARCH_GPT_OSS)
    return gpt_oss_preset (p, size, error);
  if (arch == NPU_MODEL_ARCH_GEMMA3)
    return gemma3_preset (p, size, error);
  if (g_strcmp0 (size, "tiny") == 0) {
    p->n_layers = 2;
    p->dim = 64;
    p->ff = 192;
    p->n_heads = 4;
    p->n_kv_heads = 2;
    p->vocab = 1024;
    p->ctx = 512;
    /* Qwen3's heads are wider than dim / heads (0.6B: 16 x 128 on a
     * dim of 1024), so q and o are not square */
    if (arch == NPU_MODEL_ARCH_QWEN3)
      p->head_dim = 32;
  } else if (g_strcmp0 (size, "small") == 0) {
    p->n_layers = 6;
    p->dim = 256;
    p->ff = 704;
    p->n_heads = 4;
    p->n_kv_heads = 2;
    p->vocab = 8192;
    p->ctx = 2048;
    if (arch == NPU_MODEL_ARCH_QWEN3)
      p->head_dim = 128;
  } else if (g_strcmp0 (size, "1b") == 0) {
    /* Llama 3.2 1B's and Qwen2.5 1.5B's shapes with a 32k vocabulary */
    p->wtype = NPU_GGML_TYPE_MXFP4;
    p->vocab = 32000;
    p->ctx = 4096;
    if (arch == NPU_MODEL_ARCH_LLAMA) {
      p->n_layers = 16;
      p->dim = 2048;
      p->ff = 8192;
      p->n_heads = 32;
      p->n_kv_heads = 8;
    } else if (arch == NPU_MODEL_ARCH_QWEN3) {
      /* Qwen3 1.7B's */
      p->n_layers = 28;
      p->dim = 2048;
      p->ff = 6144;
      p->n_heads = 16;
      p->n_kv_heads = 8;
      p->head_dim = 128;
    } else {
      p->n_layers = 20;
      p->dim = 1536;
      p->ff = 8960;
      p->n_heads = 12;
      p->n_kv_heads = 2;
    }
  } else {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "unknown text model size '%s' (tiny, small, 1b)", size);
    return FALSE;
  }
  return TRUE;
}

gboolean
npu_model_gen_mmproj_preset (NpuMmprojParams * p,
    NpuModelProjector projector, const gchar * size, GError ** error)
{
  memset (p, 0, sizeof (*p));
  p->projector = projector;
  p->seed = 1;
  p->wtype = NPU_GGML_TYPE_F32;
  p->eps = 1e-6f;               /* SigLIP's */
  p->image_size = 224;
  p->patch = 14;
  p->scale_factor = 2;
  if (g_strcmp0 (size, "tiny") == 0) {
    p->n_layers = 2;
    p->dim = 64;
    p->ff = 256;
    p->n_heads = 4;
  } else if (g_strcmp0 (size, "small") == 0) {
    p->n_layers = 4;
    p->dim = 192;
    p->ff = 768;
    p->n_heads = 3;
  } else if (g_strcmp0 (size, "base") == 0) {
    /* SigLIP-B/16 at 224 */
    p->n_layers = 12;
    p->dim = 768;
    p->ff = 3072;
    p->n_heads = 12;
    p->patch = 16;
  } else {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "unknown vision encoder size '%s' (tiny, small, base)", size);
    return FALSE;
  }
  /* Gemma 3 pools 4 x 4 patches into a token (896 px at patch 14: 256
   * tokens); 224 px at patch 14 gives 4 x 4 tokens */
  if (projector == NPU_MODEL_PROJECTOR_GEMMA3)
    p->scale_factor = 4;
  if (projector == NPU_MODEL_PROJECTOR_QWEN2VL
      || projector == NPU_MODEL_PROJECTOR_QWEN25VL) {
    /* Qwen's patch 14 and 112-pixel windows; 168 pixels are 6 x 6 merged
     * tokens, so the windows are 4 x 4, 4 x 2, 2 x 4 and 2 x 2: whole and
     * clipped ones */
    p->patch = 14;
    p->image_size = 168;
    p->window_size = 112;
    p->n_wa_pattern = p->n_layers;
    p->act = projector == NPU_MODEL_PROJECTOR_QWEN25VL ? NPU_MODEL_ACT_SILU :
        NPU_MODEL_ACT_GELU_QUICK;
    if (p->dim / p->n_heads % 4)
      p->n_heads = p->dim / 64;
  }
  return TRUE;
}

static gboolean
check_ne0 (guint64 ne0, guint32 type, const gchar * what, GError ** error)
{
  type = npu_model_gen_row_type (type, ne0);
  if (npu_gguf_writer_row_size (type, ne0) == 0) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "%s = %" G_GUINT64_FORMAT " is not a multiple of %s's block size",
        what, ne0, npu_ggml_type_name (type));
    return FALSE;
  }
  return TRUE;
}

/* MXFP4 values are stored exactly in F32, F16 or BF16 only */
static gboolean
check_mxfp4_values (gboolean mxfp4_values, guint32 wt, GError ** error)
{
  if (mxfp4_values && wt != NPU_GGML_TYPE_F32 && wt != NPU_GGML_TYPE_F16
      && wt != NPU_GGML_TYPE_BF16) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "MXFP4 values need type f32, f16 or bf16 (%s cannot hold them "
        "exactly)", npu_ggml_type_name (wt));
    return FALSE;
  }
  return TRUE;
}

/* attention.key_length: @head_dim, or dim / heads when 0 */
static guint
text_head_dim (const NpuTextModelParams * p)
{
  return p->head_dim ? p->head_dim : p->dim / MAX (p->n_heads, 1);
}

static gboolean
check_text (const NpuTextModelParams * p, GError ** error)
{
  guint32 big = p->wtype == NPU_GGML_TYPE_MXFP4 && !p->all_mxfp4 ?
      NPU_GGML_TYPE_Q8_0 : p->wtype;

  if (!p->n_layers || !p->dim || !p->ff || !p->n_heads || !p->n_kv_heads
      || !p->ctx) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "layers, dim, ff, heads, kv-heads and ctx must be positive");
    return FALSE;
  }
  if ((!p->head_dim && p->dim % p->n_heads) || p->n_heads % p->n_kv_heads
      || text_head_dim (p) % 2) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "dim %u, %u heads, %u kv heads, head size %u: the head size must be "
        "even (heads must divide dim when it is not given) and kv heads must "
        "divide heads", p->dim, p->n_heads, p->n_kv_heads, text_head_dim (p));
    return FALSE;
  }
  if (p->head_dim && p->arch != NPU_MODEL_ARCH_QWEN3 &&
      p->arch != NPU_MODEL_ARCH_GPT_OSS && p->arch != NPU_MODEL_ARCH_GEMMA3) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "a head size other than dim / heads is written for qwen3, gpt-oss "
        "and gemma3 only");
    return FALSE;
  }
  if (p->arch == NPU_MODEL_ARCH_GEMMA3 && !p->sliding_window) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "gemma3 needs a sliding window");
    return FALSE;
  }
  if ((p->arch == NPU_MODEL_ARCH_GPT_OSS) != (p->n_experts > 0) ||
      p->n_experts_used > p->n_experts ||
      (p->n_experts > 0 && (!p->n_experts_used || !p->sliding_window))) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "%u experts, %u used, sliding window %u: gpt-oss needs experts, at "
        "most as many used and a window, and the others none",
        p->n_experts, p->n_experts_used, p->sliding_window);
    return FALSE;
  }
  if (p->vocab < min_vocab (p->arch)) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "vocab %u is below this tokenizer's minimum of %u", p->vocab,
        min_vocab (p->arch));
    return FALSE;
  }
  if (p->all_mxfp4 && p->wtype != NPU_GGML_TYPE_MXFP4) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "all-MXFP4 needs type mxfp4");
    return FALSE;
  }
  if (!check_mxfp4_values (p->mxfp4_values, p->wtype, error))
    return FALSE;
  if (p->mxfp4_values)
    big = NPU_GGML_TYPE_MXFP4;  /* rows are whole MXFP4 blocks */
  return check_ne0 (p->dim, p->wtype, "dim", error)
      && check_ne0 (p->ff, p->wtype, "ff", error)
      && check_ne0 (p->dim, big, "dim", error)
      && check_ne0 (p->ff, big, "ff", error)
      && (p->arch != NPU_MODEL_ARCH_GPT_OSS
      || (check_ne0 (p->dim, NPU_GGML_TYPE_MXFP4, "dim", error)
          && check_ne0 (p->ff, NPU_GGML_TYPE_MXFP4, "ff", error)));
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */

static gboolean
finish (NpuGgufWriter * w, const gchar * path, NpuModelGenStats * stats,
    GError ** error)
{
  if (!npu_gguf_writer_write_file (w, path, error))
    return FALSE;
  stats->file_size = npu_gguf_writer_get_file_size (w);
  return TRUE;
}

/* general.architecture, .name, .description (the seed) and .file_type:
 * the keys every generated file starts with */
static gboolean
add_general (NpuGgufWriter * w, const gchar * arch, const gchar * name,
    guint64 seed, guint32 wtype, GError ** error)
{
  gchar *desc = g_strdup_printf ("deterministic random weights (seed %"
      G_GUINT64_FORMAT "), not a trained model", seed);
  gboolean ok;

  ok = npu_gguf_writer_add_string (w, "general.architecture", arch, -1, error)
      && npu_gguf_writer_add_string (w, "general.name", name, -1, error)
      && npu_gguf_writer_add_string (w, "general.description", desc, -1, error)
      && npu_gguf_writer_add_u32 (w, "general.file_type",
      npu_model_gen_file_type (wtype), error);
  g_free (desc);
  return ok;
}

/* Writes the file and frees @w; the stats go to @out_stats on success */
static gboolean
finish_and_free (NpuGgufWriter * w, gboolean ok, const gchar * path,
    NpuModelGenStats * stats, NpuModelGenStats * out_stats, GError ** error)
{
  ok = ok && finish (w, path, stats, error);
  npu_gguf_writer_free (w);
  if (ok && out_stats)
    *out_stats = *stats;
  return ok;
}

/* --tokenizer: every tokenizer.* key of @src as it is */
static gboolean
copy_tokenizer (NpuGgufWriter * w, const NpuGguf * src, GError ** error)
{
  gboolean ok = TRUE;

  for (guint i = 0; ok && i < npu_gguf_n_kv (src); i++) {
    const gchar *key = npu_gguf_get_key (src, i);
    const NpuGgufValue *v = npu_gguf_get_value (src, i);

    if (!g_str_has_prefix (key, "tokenizer."))
      continue;
    if (v->type == NPU_GGUF_TYPE_STRING) {
      ok = npu_gguf_writer_add_string (w, key, v->v.str.data, v->v.str.len,
          error);
    } else if (v->type == NPU_GGUF_TYPE_UINT32) {
      ok = npu_gguf_writer_add_u32 (w, key, v->v.u, error);
    } else if (v->type == NPU_GGUF_TYPE_BOOL) {
      ok = npu_gguf_writer_add_bool (w, key, v->v.b, error);
    } else if (v->type == NPU_GGUF_TYPE_ARRAY
        && v->v.arr.type == NPU_GGUF_TYPE_STRING) {
      gchar **strv = g_new0 (gchar *, v->v.arr.count + 1);

      for (guint64 k = 0; k < v->v.arr.count; k++) {
        gsize len;
        const gchar *s = npu_gguf_array_get_string (v, k, &len);

        strv[k] = g_strndup (s, len);
      }
      ok = npu_gguf_writer_add_string_array (w, key,
          (const gchar * const *) strv, v->v.arr.count, error);
      g_strfreev (strv);
    } else if (v->type == NPU_GGUF_TYPE_ARRAY
        && (v->v.arr.type == NPU_GGUF_TYPE_FLOAT32
            || v->v.arr.type == NPU_GGUF_TYPE_INT32)) {
      gboolean f = v->v.arr.type == NPU_GGUF_TYPE_FLOAT32;
      gfloat *fa = g_new (gfloat, MAX (v->v.arr.count, 1));
      gint32 *ia = g_new (gint32, MAX (v->v.arr.count, 1));

      for (guint64 k = 0; k < v->v.arr.count; k++) {
        NpuGgufValue e;

        npu_gguf_array_get (v, k, &e);
        if (f)
          fa[k] = e.v.f;
        else
          ia[k] = e.v.i;
      }
      ok = npu_gguf_writer_add_array (w, key, v->v.arr.type,
          f ? (gconstpointer) fa : (gconstpointer) ia, v->v.arr.count, error);
      g_free (fa);
      g_free (ia);
    } else {
      g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
          "%s: value type %s is not copied", key,
          npu_gguf_type_name (v->type));
      ok = FALSE;
    }
  }
  return ok;
}

/* gpt-oss's keys beyond the common ones, as GptOssModel writes them */
static gboolean
add_gpt_oss_keys (NpuGgufWriter * w, const NpuTextModelParams * p,
    GError ** error)
{
  return npu_gguf_writer_add_u32 (w, "gpt-oss.expert_count", p->n_experts,
      error)
      && npu_gguf_writer_add_u32 (w, "gpt-oss.expert_used_count",
      p->n_experts_used, error)
      && npu_gguf_writer_add_u32 (w, "gpt-oss.expert_feed_forward_length",
      p->ff, error)
      && npu_gguf_writer_add_u32 (w, "gpt-oss.attention.sliding_window",
      p->sliding_window, error)
      && (p->yarn_factor == 0.0f
      || (npu_gguf_writer_add_string (w, "gpt-oss.rope.scaling.type", "yarn",
              -1, error)
          && npu_gguf_writer_add_f32 (w, "gpt-oss.rope.scaling.factor",
              p->yarn_factor, error)
          && npu_gguf_writer_add_u32 (w,
              "gpt-oss.rope.scaling.original_context_length",
              p->yarn_orig_ctx, error)));
}

/* One gpt-oss block: attention with biases and sinks, the router and the
 * experts (3-D, MXFP4 always), post_attention_norm.  The gate and up
 * experts are spread three times wider than unit variance so that the
 * clamp at 7 of gpt-oss's SwiGLU is reached (a few per cent of the
 * values), the router twice, so that the top experts are apart. */
static gboolean
add_gpt_oss_layer (NpuGgufWriter * w, const NpuTextModelParams * p, guint il,
    NpuModelGenStats * stats, GError ** error)
{
  guint hd = text_head_dim (p), qd = hd * p->n_heads, kv = hd * p->n_kv_heads;
  guint E = p->n_experts, D = p->dim, F = p->ff;
  guint32 wt = p->wtype, mx = NPU_GGML_TYPE_MXFP4, f32 = NPU_GGML_TYPE_F32;
  gdouble s_dim = 1.0 / sqrt ((gdouble) D), s_ff = 1.0 / sqrt ((gdouble) F);
  gdouble s_res = 1.0 / sqrt (2.0 * p->n_layers);
  guint g = p->mxfp4_values ? 1 : 0;
  gchar n[64];
  gboolean ok;

#define N(s) (g_snprintf (n, sizeof (n), "blk.%u." s, il), n)
#define R(name, t, grid, mean, std, nd, a, b, c) \
  add_random (w, p->seed, stats, name, t, grid, FALSE, mean, std, nd, a, b, \
      c, 1, error)
  ok = R (N ("attn_norm.weight"), f32, 0, 1.0, 0.05, 1, D, 1, 1)
      && R (N ("attn_q.weight"), wt, g, 0.0, s_dim, 2, D, qd, 1)
      && R (N ("attn_q.bias"), f32, 0, 0.0, 0.02, 1, qd, 1, 1)
      && R (N ("attn_k.weight"), wt, g, 0.0, s_dim, 2, D, kv, 1)
      && R (N ("attn_k.bias"), f32, 0, 0.0, 0.02, 1, kv, 1, 1)
      && R (N ("attn_v.weight"), wt, g, 0.0, s_dim, 2, D, kv, 1)
      && R (N ("attn_v.bias"), f32, 0, 0.0, 0.02, 1, kv, 1, 1)
      && R (N ("attn_output.weight"), wt, g, 0.0,
      s_res / sqrt ((gdouble) qd), 2, qd, D, 1)
      && R (N ("attn_output.bias"), f32, 0, 0.0, 0.02, 1, D, 1, 1)
      && R (N ("attn_sinks.weight"), f32, 0, 0.0, 1.0, 1, p->n_heads, 1, 1)
      && R (N ("post_attention_norm.weight"), f32, 0, 1.0, 0.05, 1, D, 1, 1)
      && R (N ("ffn_gate_inp.weight"), f32, 0, 0.0, 2.0 * s_dim, 2, D, E, 1)
      && R (N ("ffn_gate_inp.bias"), f32, 0, 0.0, 0.5, 1, E, 1, 1)
      && R (N ("ffn_gate_exps.weight"), mx, 0, 0.0, 3.0 * s_dim, 3, D, F, E)
      && R (N ("ffn_gate_exps.bias"), f32, 0, 0.0, 0.5, 2, F, E, 1)
      && R (N ("ffn_up_exps.weight"), mx, 0, 0.0, 3.0 * s_dim, 3, D, F, E)
      && R (N ("ffn_up_exps.bias"), f32, 0, 0.0, 0.5, 2, F, E, 1)
      && R (N ("ffn_down_exps.weight"), mx, 0, 0.0, s_ff * s_res / 4.0, 3, F,
      D, E)
      && R (N ("ffn_down_exps.bias"), f32, 0, 0.0, 0.02, 2, D, E, 1);
#undef R
#undef N
  return ok;
}

gboolean
npu_model_gen_write_text (const NpuTextModelParams * p, const gchar * path,
    NpuModelGenStats * out_stats, GError ** error)
{
  return npu_model_gen_write_text_with_tokenizer (p, NULL, path, out_stats,
      error);
}

gboolean
npu_model_gen_write_text_with_tokenizer (const NpuTextModelParams * params,
    const gchar * tokenizer_path, const gchar * path,
    NpuModelGenStats * out_stats, GError ** error)
{
  NpuTextModelParams tp = *params;
  const NpuTextModelParams *p = &tp;
  NpuGguf *src = NULL;
  const gchar *arch = npu_model_gen_arch_name (p->arch);
  guint hd = text_head_dim (p), kv = hd * p->n_kv_heads, i;
  guint qd = hd * p->n_heads;   /* dim but for qwen3's wider heads */
  /* llama.cpp's MXFP4 quantisation (LLAMA_FTYPE_MOSTLY_MXFP4_MOE) keeps
   * token_embd and output in Q8_0; every other type applies to all 2-D
   * weights, as llama-quantize does for F16/BF16/Q8_0 files. */
  guint32 wt = p->wtype;
  guint32 et = wt == NPU_GGML_TYPE_MXFP4 && !p->all_mxfp4 ?
      NPU_GGML_TYPE_Q8_0 : wt;
  NpuModelGenStats stats = { 0 };
  NpuGgufWriter *w;
  gchar *key = NULL, *name;
  gboolean ok;
  gdouble s_dim, s_ff, s_res, s_emb;

  if (tokenizer_path) {
    const NpuGgufValue *toks;

    src = npu_gguf_open (tokenizer_path, error);
    if (!src)
      return FALSE;
    toks = npu_gguf_get_array (src, "tokenizer.ggml.tokens",
        NPU_GGUF_TYPE_STRING, error);
    if (!toks || toks->v.arr.count > G_MAXINT32) {
      if (toks)
        g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
            "%s: too many tokens", tokenizer_path);
      npu_gguf_free (src);
      return FALSE;
    }
    tp.vocab = toks->v.arr.count;
  }
  if (!check_text (p, error)) {
    if (src)
      npu_gguf_free (src);
    return FALSE;
  }

  w = npu_gguf_writer_new ();
  name = g_strdup_printf ("gst-npu random %s %uL-%u", arch, p->n_layers,
      p->dim);
#define KEY(suffix) (g_free (key), key = g_strconcat (arch, suffix, NULL))
  ok = add_general (w, arch, name, p->seed, wt, error)
      && npu_gguf_writer_add_u32 (w, "general.quantization_version", 2, error)
      && npu_gguf_writer_add_u32 (w, KEY (".context_length"), p->ctx, error)
      && npu_gguf_writer_add_u32 (w, KEY (".embedding_length"), p->dim, error)
      && npu_gguf_writer_add_u32 (w, KEY (".block_count"), p->n_layers, error)
      && npu_gguf_writer_add_u32 (w, KEY (".feed_forward_length"), p->ff,
      error)
      && npu_gguf_writer_add_u32 (w, KEY (".attention.head_count"),
      p->n_heads, error)
      && npu_gguf_writer_add_u32 (w, KEY (".attention.head_count_kv"),
      p->n_kv_heads, error)
      && npu_gguf_writer_add_f32 (w, KEY (".attention.layer_norm_rms_epsilon"),
      p->rms_eps, error)
      && npu_gguf_writer_add_f32 (w, KEY (".rope.freq_base"), p->rope_base,
      error);
  /* the gpt-oss converter writes no rotary size (all of the head turns) */
  if (ok && p->arch != NPU_MODEL_ARCH_GPT_OSS)
    ok = npu_gguf_writer_add_u32 (w, KEY (".rope.dimension_count"), hd,
        error);
  if (ok && p->arch == NPU_MODEL_ARCH_GPT_OSS)
    ok = add_gpt_oss_keys (w, p, error);
  if (ok && p->arch == NPU_MODEL_ARCH_LLAMA)
    ok = npu_gguf_writer_add_u32 (w, KEY (".vocab_size"), p->vocab, error);
  /* The converter writes the head size when config.json has head_dim, as
   * every Qwen3 config does */
  if (ok && p->arch == NPU_MODEL_ARCH_GEMMA3)
    ok = npu_gguf_writer_add_u32 (w, KEY (".attention.sliding_window"),
        p->sliding_window, error);
  if (ok && (p->arch == NPU_MODEL_ARCH_QWEN3 ||
          p->arch == NPU_MODEL_ARCH_GPT_OSS ||
          p->arch == NPU_MODEL_ARCH_GEMMA3))
    ok = npu_gguf_writer_add_u32 (w, KEY (".attention.key_length"), hd,
        error)
        && npu_gguf_writer_add_u32 (w, KEY (".attention.value_length"), hd,
        error);
#undef KEY
  g_free (key);
  g_free (name);
  if (ok && src)
    ok = copy_tokenizer (w, src, error);
  else if (ok)
    ok = add_tokenizer (w, p, error);
  if (src)
    npu_gguf_free (src);
  stats.n_tokens = p->vocab;

  /* Scales (see docs/models.md): matrices 1/sqrt(fan_in) so every
   * projection keeps unit variance; the two matrices that write into the
   * residual stream a further 1/sqrt(2 * layers) (GPT-2's init), so the
   * stream stays near unit size however deep; embeddings dim^-1/4 so the
   * logits of a tied output are dim^1/4, peaked but not saturated. */
  s_dim = 1.0 / sqrt ((gdouble) p->dim);
  s_ff = 1.0 / sqrt ((gdouble) p->ff);
  s_res = 1.0 / sqrt (2.0 * p->n_layers);
  s_emb = 1.0 / sqrt (sqrt ((gdouble) p->dim));
#define T2(n, t, std, a, b) \
  add_random (w, p->seed, &stats, n, t, p->mxfp4_values ? 1 : 0, FALSE, \
      0.0, std, 2, a, b, 1, 1, error)
#define T1(n, mean, std, a) \
  add_random (w, p->seed, &stats, n, NPU_GGML_TYPE_F32, 0, FALSE, mean, \
      std, 1, a, 1, 1, 1, error)
  ok = ok && T2 ("token_embd.weight", et, s_emb, p->dim, p->vocab);
  for (i = 0; ok && p->arch == NPU_MODEL_ARCH_GPT_OSS && i < p->n_layers; i++)
    ok = add_gpt_oss_layer (w, p, i, &stats, error);
  for (i = 0; ok && p->arch != NPU_MODEL_ARCH_GPT_OSS && i < p->n_layers;
      i++) {
    gchar *b = g_strdup_printf ("blk.%u.", i);
    gchar *n[16];
    guint k;

    n[0] = g_strconcat (b, "attn_norm.weight", NULL);
    n[1] = g_strconcat (b, "attn_q.weight", NULL);
    n[2] = g_strconcat (b, "attn_k.weight", NULL);
    n[3] = g_strconcat (b, "attn_v.weight", NULL);
    n[4] = g_strconcat (b, "attn_output.weight", NULL);
    n[5] = g_strconcat (b, "ffn_norm.weight", NULL);
    n[6] = g_strconcat (b, "ffn_gate.weight", NULL);
    n[7] = g_strconcat (b, "ffn_up.weight", NULL);
    n[8] = g_strconcat (b, "ffn_down.weight", NULL);
    n[9] = g_strconcat (b, "attn_q.bias", NULL);
    n[10] = g_strconcat (b, "attn_k.bias", NULL);
    n[11] = g_strconcat (b, "attn_v.bias", NULL);
    n[12] = g_strconcat (b, "attn_q_norm.weight", NULL);
    n[13] = g_strconcat (b, "attn_k_norm.weight", NULL);
    n[14] = g_strconcat (b, "post_attention_norm.weight", NULL);
    n[15] = g_strconcat (b, "post_ffw_norm.weight", NULL);
    ok = T1 (n[0], 1.0, 0.05, p->dim)
        && T2 (n[1], wt, s_dim, p->dim, qd)
        && T2 (n[2], wt, s_dim, p->dim, kv)
        && T2 (n[3], wt, s_dim, p->dim, kv);
    if (ok && p->arch == NPU_MODEL_ARCH_QWEN2)
      ok = T1 (n[9], 0.0, 0.02, p->dim) && T1 (n[10], 0.0, 0.02, kv)
          && T1 (n[11], 0.0, 0.02, kv);
    /* Qwen3's per-head q/k norms, head_dim weights each; spread wider
     * than the other norms' so that a decoder which skips one (or applies
     * the wrong one) gives visibly different logits */
    if (ok && (p->arch == NPU_MODEL_ARCH_QWEN3 ||
            p->arch == NPU_MODEL_ARCH_GEMMA3))
      ok = T1 (n[12], 1.0, 0.3, hd) && T1 (n[13], 1.0, 0.3, hd);
    /* Gemma's norms of the blocks' outputs, as wide as the q/k ones */
    if (ok && p->arch == NPU_MODEL_ARCH_GEMMA3)
      ok = T1 (n[14], 1.0, 0.3, p->dim) && T1 (n[15], 1.0, 0.3, p->dim);
    ok = ok && T2 (n[4], wt,
        (qd == p->dim ? s_dim : 1.0 / sqrt ((gdouble) qd)) * s_res, qd,
        p->dim)
        && T1 (n[5], 1.0, 0.05, p->dim)
        && T2 (n[6], wt, s_dim, p->dim, p->ff)
        && T2 (n[7], wt, s_dim, p->dim, p->ff)
        && T2 (n[8], wt, s_ff * s_res, p->ff, p->dim);
    for (k = 0; k < 16; k++)
      g_free (n[k]);
    g_free (b);
  }
  ok = ok && T1 ("output_norm.weight", 1.0, 0.05, p->dim);
  if (ok && !p->tied)
    ok = T2 ("output.weight", et, s_dim, p->dim, p->vocab);
#undef T1
#undef T2

  return finish_and_free (w, ok, path, &stats, out_stats, error);
}

static gboolean
read_text_dim (const gchar * text_path, guint * dim, GError ** error)
{
  NpuGguf *g = npu_gguf_open (text_path, error);
  const gchar *arch;
  gchar *key;
  gboolean ok;

  if (g == NULL)
    return FALSE;
  arch = npu_gguf_get_string (g, "general.architecture", NULL, error);
  if (arch == NULL) {
    npu_gguf_free (g);
    return FALSE;
  }
  key = g_strconcat (arch, ".embedding_length", NULL);
  ok = npu_gguf_get_u32 (g, key, dim, error);
  g_free (key);
  npu_gguf_free (g);
  return ok;
}

/* The projector's output size: @text_path's embedding_length (--for), or
 * *@text_dim as given when @text_path is NULL */
static gboolean
get_text_dim (const gchar * text_path, guint * text_dim, GError ** error)
{
  GError *err = NULL;

  if (text_path == NULL || read_text_dim (text_path, text_dim, &err))
    return TRUE;
  g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_FOR,
      "--for %s: %s", text_path, err->message);
  g_error_free (err);
  return FALSE;
}

/* The sizes and scales of an encoder's pre-norm blocks */
typedef struct
{
  const gchar *prefix;          /* "v" or "a" */
  gboolean k_bias;              /* FALSE: Whisper's k_proj has none */
  guint64 seed;
  guint32 wt;                   /* the matrices' type */
  guint grid;                   /* add_random()'s grid_rows for matrices */
  guint dim, ff;
  gdouble s_dim, s_ff, s_res;
} EncoderBlocks;

/* Matrices 1/sqrt(fan_in); the two that write into the residual stream a
 * further 1/sqrt(2 * layers), as the text model's (see docs/models.md) */
static void
encoder_blocks_init (EncoderBlocks * e, const gchar * prefix,
    gboolean k_bias, guint64 seed, guint32 wt, guint grid, guint dim,
    guint ff, guint n_layers)
{
  e->prefix = prefix;
  e->k_bias = k_bias;
  e->seed = seed;
  e->wt = wt;
  e->grid = grid;
  e->dim = dim;
  e->ff = ff;
  e->s_dim = 1.0 / sqrt ((gdouble) dim);
  e->s_ff = 1.0 / sqrt ((gdouble) ff);
  e->s_res = 1.0 / sqrt (2.0 * n_layers);
}

/* Block @i of @e: the layer norms, attention and FFN of clip.cpp's
 * build_vit, with llama.cpp's mmproj tensor names */
static gboolean
add_encoder_block (NpuGgufWriter * w, const EncoderBlocks * e, guint i,
    NpuModelGenStats * stats, GError ** error)
{
  static const gchar *const parts[] = {
    "ln1.weight", "ln1.bias", "attn_q.weight", "attn_q.bias",
    "attn_k.weight", "attn_k.bias", "attn_v.weight", "attn_v.bias",
    "attn_out.weight", "attn_out.bias", "ln2.weight", "ln2.bias",
    "ffn_up.weight", "ffn_up.bias", "ffn_down.weight", "ffn_down.bias",
  };
  gchar *n[G_N_ELEMENTS (parts)];
  guint dim = e->dim, ff = e->ff, k;
  gboolean ok;

  for (k = 0; k < G_N_ELEMENTS (parts); k++)
    n[k] = g_strdup_printf ("%s.blk.%u.%s", e->prefix, i, parts[k]);
#define T(n, std, a, b) \
  add_random (w, e->seed, stats, n, e->wt, e->grid, FALSE, 0.0, std, 2, a, \
      b, 1, 1, error)
#define T1(n, mean, std, a) \
  add_random (w, e->seed, stats, n, NPU_GGML_TYPE_F32, 0, FALSE, mean, \
      std, 1, a, 1, 1, 1, error)
  ok = T1 (n[0], 1.0, 0.05, dim) && T1 (n[1], 0.0, 0.02, dim)
      && T (n[2], e->s_dim, dim, dim)
      && T1 (n[3], 0.0, 0.02, dim)
      && T (n[4], e->s_dim, dim, dim)
      && (!e->k_bias || T1 (n[5], 0.0, 0.02, dim))
      && T (n[6], e->s_dim, dim, dim)
      && T1 (n[7], 0.0, 0.02, dim)
      && T (n[8], e->s_dim * e->s_res, dim, dim)
      && T1 (n[9], 0.0, 0.02, dim)
      && T1 (n[10], 1.0, 0.05, dim) && T1 (n[11], 0.0, 0.02, dim)
      && T (n[12], e->s_dim, dim, ff)
      && T1 (n[13], 0.0, 0.02, ff)
      && T (n[14], e->s_ff * e->s_res, ff, dim)
      && T1 (n[15], 0.0, 0.02, dim);
#undef T
#undef T1
  for (k = 0; k < G_N_ELEMENTS (parts); k++)
    g_free (n[k]);
  return ok;
}

/* @n_blocks blocks of @e, then the post layer norm */
static gboolean
add_encoder_blocks (NpuGgufWriter * w, const EncoderBlocks * e,
    guint n_blocks, NpuModelGenStats * stats, GError ** error)
{
  gchar *post_w = g_strconcat (e->prefix, ".post_ln.weight", NULL);
  gchar *post_b = g_strconcat (e->prefix, ".post_ln.bias", NULL);
  gboolean ok = TRUE;
  guint i;

  for (i = 0; ok && i < n_blocks; i++)
    ok = add_encoder_block (w, e, i, stats, error);
  ok = ok && add_random (w, e->seed, stats, post_w, NPU_GGML_TYPE_F32, 0,
      FALSE, 1.0, 0.05, 1, e->dim, 1, 1, 1, error)
      && add_random (w, e->seed, stats, post_b, NPU_GGML_TYPE_F32, 0, FALSE,
      0.0, 0.02, 1, e->dim, 1, 1, 1, error);
  g_free (post_w);
  g_free (post_b);
  return ok;
}

/* Qwen2-VL / Qwen2.5-VL, as llama.cpp's Qwen2VLVisionModel converter
 * writes them: the Conv3D patch kernel split into its two temporal halves
 * (v.patch_embd.weight, .weight.1, F16, no bias), no position embedding
 * (the blocks use 2-D rotary embeddings), no class token; blocks with
 * LayerNorm and fc1/fc2 (qwen2vl) or RMSNorm (weights only) and a gated
 * FFN with biases (qwen2.5vl); the merger's norm as v.post_ln, then
 * mm.0 (4 dim -> 4 dim) and mm.2 (4 dim -> text). */
static gboolean
add_qwen_block (NpuGgufWriter * w, const NpuMmprojParams * p,
    const EncoderBlocks * e, gboolean rms, guint i, NpuModelGenStats * stats,
    GError ** error)
{
  guint dim = p->dim, ff = p->ff;
  gchar *n[20];
  gboolean ok;
  guint k;

  n[0] = g_strdup_printf ("v.blk.%u.ln1.weight", i);
  n[1] = g_strdup_printf ("v.blk.%u.ln1.bias", i);
  n[2] = g_strdup_printf ("v.blk.%u.attn_q.weight", i);
  n[3] = g_strdup_printf ("v.blk.%u.attn_q.bias", i);
  n[4] = g_strdup_printf ("v.blk.%u.attn_k.weight", i);
  n[5] = g_strdup_printf ("v.blk.%u.attn_k.bias", i);
  n[6] = g_strdup_printf ("v.blk.%u.attn_v.weight", i);
  n[7] = g_strdup_printf ("v.blk.%u.attn_v.bias", i);
  n[8] = g_strdup_printf ("v.blk.%u.attn_out.weight", i);
  n[9] = g_strdup_printf ("v.blk.%u.attn_out.bias", i);
  n[10] = g_strdup_printf ("v.blk.%u.ln2.weight", i);
  n[11] = g_strdup_printf ("v.blk.%u.ln2.bias", i);
  n[12] = g_strdup_printf ("v.blk.%u.ffn_up.weight", i);
  n[13] = g_strdup_printf ("v.blk.%u.ffn_up.bias", i);
  n[14] = g_strdup_printf ("v.blk.%u.ffn_gate.weight", i);
  n[15] = g_strdup_printf ("v.blk.%u.ffn_gate.bias", i);
  n[16] = g_strdup_printf ("v.blk.%u.ffn_down.weight", i);
  n[17] = g_strdup_printf ("v.blk.%u.ffn_down.bias", i);
  n[18] = n[19] = NULL;
#define T(n, std, a, b) \
  add_random (w, e->seed, stats, n, e->wt, e->grid, FALSE, 0.0, std, 2, a, \
      b, 1, 1, error)
#define T1(n, mean, std, a) \
  add_random (w, e->seed, stats, n, NPU_GGML_TYPE_F32, 0, FALSE, mean, \
      std, 1, a, 1, 1, 1, error)
  ok = T1 (n[0], 1.0, 0.05, dim) && (rms || T1 (n[1], 0.0, 0.02, dim))
      && T (n[2], e->s_dim, dim, dim) && T1 (n[3], 0.0, 0.02, dim)
      && T (n[4], e->s_dim, dim, dim) && T1 (n[5], 0.0, 0.02, dim)
      && T (n[6], e->s_dim, dim, dim) && T1 (n[7], 0.0, 0.02, dim)
      && T (n[8], e->s_dim * e->s_res, dim, dim) && T1 (n[9], 0.0, 0.02, dim)
      && T1 (n[10], 1.0, 0.05, dim) && (rms || T1 (n[11], 0.0, 0.02, dim))
      && T (n[12], e->s_dim, dim, ff) && T1 (n[13], 0.0, 0.02, ff)
      && (!rms || (T (n[14], e->s_dim, dim, ff) && T1 (n[15], 0.0, 0.02, ff)))
      && T (n[16], e->s_ff * e->s_res, ff, dim) && T1 (n[17], 0.0, 0.02, dim);
#undef T
#undef T1
  for (k = 0; k < 18; k++)
    g_free (n[k]);
  return ok;
}

static gboolean
write_qwen_mmproj (const NpuMmprojParams * p, guint text_dim,
    const gchar * path, NpuModelGenStats * out_stats, GError ** error)
{
  static const gfloat clip_mean[3] = { 0.48145466f, 0.4578275f, 0.40821073f };
  static const gfloat clip_std[3] = { 0.26862954f, 0.26130258f, 0.27577711f };
  gboolean q25 = p->projector == NPU_MODEL_PROJECTOR_QWEN25VL;
  const gchar *type = q25 ? "qwen2.5vl_merger" : "qwen2vl_merger";
  guint32 wt = p->wtype;
  guint32 conv_t = wt == NPU_GGML_TYPE_F32 ? NPU_GGML_TYPE_F32 :
      NPU_GGML_TYPE_F16;
  guint32 grid_t = p->mxfp4_values ? NPU_GGML_TYPE_MXFP4 : wt;
  guint grid = p->mxfp4_values ? 1 : 0, i;
  guint64 in = (guint64) p->dim * 4;
  NpuModelGenStats stats = { 0 };
  EncoderBlocks blocks = { 0, };
  gdouble s_conv = 1.0 / sqrt (2.0 * 3.0 * p->patch * p->patch);
  NpuGgufWriter *w;
  gchar *name;
  gboolean ok;

  if (p->image_size % (2 * p->patch) || p->dim % p->n_heads
      || (p->dim / p->n_heads) % 4) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "%s: image size %u must be a multiple of twice the patch size %u "
        "and the head size (dim %u / %u heads) a multiple of 4", type,
        p->image_size, p->patch, p->dim, p->n_heads);
    return FALSE;
  }
  if (!check_mxfp4_values (p->mxfp4_values, wt, error)
      || !check_ne0 (p->dim, wt, "vision dim", error)
      || !check_ne0 (p->ff, wt, "vision ff", error)
      || !check_ne0 (in, wt, "projector input", error)
      || !check_ne0 (p->dim, grid_t, "vision dim", error)
      || !check_ne0 (p->ff, grid_t, "vision ff", error)
      || !check_ne0 (in, grid_t, "projector input", error))
    return FALSE;

  w = npu_gguf_writer_new ();
  name = g_strdup_printf ("gst-npu random mmproj %s %uL-%u", type,
      p->n_layers, p->dim);
  ok = add_general (w, "clip", name, p->seed, wt, error)
      && npu_gguf_writer_add_bool (w, "clip.has_vision_encoder", TRUE, error)
      && npu_gguf_writer_add_string (w, "clip.projector_type", type, -1, error)
      && (!q25 || npu_gguf_writer_add_bool (w, "clip.use_silu", TRUE, error))
      && npu_gguf_writer_add_u32 (w, "clip.vision.image_size", p->image_size,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.patch_size", p->patch, error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.embedding_length", p->dim,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.feed_forward_length", p->ff,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.block_count", p->n_layers,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.attention.head_count",
      p->n_heads, error)
      && npu_gguf_writer_add_f32 (w,
      "clip.vision.attention.layer_norm_epsilon", p->eps, error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.projection_dim", text_dim,
      error)
      && npu_gguf_writer_add_array (w, "clip.vision.image_mean",
      NPU_GGUF_TYPE_FLOAT32, clip_mean, 3, error)
      && npu_gguf_writer_add_array (w, "clip.vision.image_std",
      NPU_GGUF_TYPE_FLOAT32, clip_std, 3, error)
      && (!q25 || (npu_gguf_writer_add_u32 (w, "clip.vision.n_wa_pattern",
              p->n_wa_pattern, error)
          && npu_gguf_writer_add_u32 (w, "clip.vision.window_size",
              p->window_size, error)));
  g_free (name);

  encoder_blocks_init (&blocks, "v", TRUE, p->seed, wt, grid, p->dim, p->ff,
      p->n_layers);
  /* the two temporal halves each see one copy of the image */
  ok = ok && add_random (w, p->seed, &stats, "v.patch_embd.weight", conv_t, 0,
      p->mxfp4_values, 0.0, s_conv, 4, p->patch, p->patch, 3, p->dim, error)
      && add_random (w, p->seed, &stats, "v.patch_embd.weight.1", conv_t, 0,
      p->mxfp4_values, 0.0, s_conv, 4, p->patch, p->patch, 3, p->dim, error);
  for (i = 0; ok && i < p->n_layers; i++)
    ok = add_qwen_block (w, p, &blocks, q25, i, &stats, error);
  ok = ok && add_random (w, p->seed, &stats, "v.post_ln.weight",
      NPU_GGML_TYPE_F32, 0, FALSE, 1.0, 0.05, 1, p->dim, 1, 1, 1, error)
      && (q25 || add_random (w, p->seed, &stats, "v.post_ln.bias",
          NPU_GGML_TYPE_F32, 0, FALSE, 0.0, 0.02, 1, p->dim, 1, 1, 1, error))
      && add_random (w, p->seed, &stats, "mm.0.weight", wt, grid, FALSE, 0.0,
      1.0 / sqrt ((gdouble) in), 2, in, in, 1, 1, error)
      && add_random (w, p->seed, &stats, "mm.0.bias", NPU_GGML_TYPE_F32, 0,
      FALSE, 0.0, 0.02, 1, in, 1, 1, 1, error)
      && add_random (w, p->seed, &stats, "mm.2.weight", wt, grid, FALSE, 0.0,
      1.0 / sqrt ((gdouble) in), 2, in, text_dim, 1, 1, error)
      && add_random (w, p->seed, &stats, "mm.2.bias", NPU_GGML_TYPE_F32, 0,
      FALSE, 0.0, 0.02, 1, text_dim, 1, 1, 1, error);
  return finish_and_free (w, ok, path, &stats, out_stats, error);
}

gboolean
npu_model_gen_write_mmproj (const NpuMmprojParams * p,
    const gchar * text_path, const gchar * path,
    NpuModelGenStats * out_stats, GError ** error)
{
  /* OpenAI CLIP's normalisation for LLaVA, SigLIP's for SmolVLM */
  static const gfloat clip_mean[3] = { 0.48145466f, 0.4578275f, 0.40821073f };
  static const gfloat clip_std[3] = { 0.26862954f, 0.26130258f, 0.27577711f };
  static const gfloat half[3] = { 0.5f, 0.5f, 0.5f };
  gboolean mlp = p->projector == NPU_MODEL_PROJECTOR_MLP;
  gboolean gemma3 = p->projector == NPU_MODEL_PROJECTOR_GEMMA3;
  const gchar *type = mlp ? "mlp" : gemma3 ? "gemma3" : "idefics3";
  guint32 wt = p->wtype;
  /* the patch convolution's ne[0] is the patch width, no quantisation
   * block fits: F32 or F16 as llama.cpp's mmproj converters write it */
  guint32 conv_t = wt == NPU_GGML_TYPE_F32 ? NPU_GGML_TYPE_F32 :
      NPU_GGML_TYPE_F16;
  NpuModelGenStats stats = { 0 };
  guint32 grid_t;
  guint text_dim = p->text_dim, side, n_patches, n_blocks;
  guint grid = p->mxfp4_values ? 1 : 0, conv_grid = 0;
  EncoderBlocks blocks = { 0, };
  NpuGgufWriter *w;
  gchar *name;
  gboolean ok;

  if (!get_text_dim (text_path, &text_dim, error))
    return FALSE;
  if (!p->n_layers || !p->dim || !p->ff || !p->n_heads || !p->patch
      || !p->image_size || !text_dim || !p->scale_factor) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "vision sizes and the text embedding size must be positive");
    return FALSE;
  }
  if (p->projector == NPU_MODEL_PROJECTOR_QWEN2VL
      || p->projector == NPU_MODEL_PROJECTOR_QWEN25VL)
    return write_qwen_mmproj (p, text_dim, path, out_stats, error);
  if (p->image_size % p->patch || p->dim % p->n_heads) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "image size %u must be a multiple of the patch size %u and heads %u "
        "must divide the vision dim %u", p->image_size, p->patch, p->n_heads,
        p->dim);
    return FALSE;
  }
  side = p->image_size / p->patch;
  n_patches = side * side;
  /* Gemma's pooling leaves a partial last row and column out */
  if (gemma3 ? side < p->scale_factor : !mlp && side % p->scale_factor) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "%s: %u patches a side is not a multiple of the scale factor %u",
        gemma3 ? "pooling" : "pixel shuffle", side, p->scale_factor);
    return FALSE;
  }
  if (!check_mxfp4_values (p->mxfp4_values, wt, error))
    return FALSE;
  /* with MXFP4 values every matrix row is whole MXFP4 blocks */
  grid_t = p->mxfp4_values ? NPU_GGML_TYPE_MXFP4 : wt;
  if (!check_ne0 (p->dim, wt, "vision dim", error)
      || !check_ne0 (p->ff, wt, "vision ff", error)
      || !check_ne0 (mlp ? text_dim : (guint64) p->dim * p->scale_factor *
          p->scale_factor, wt, "projector input", error)
      || !check_ne0 (p->dim, grid_t, "vision dim", error)
      || !check_ne0 (p->ff, grid_t, "vision ff", error)
      || !check_ne0 (mlp ? text_dim : (guint64) p->dim * p->scale_factor *
          p->scale_factor, grid_t, "projector input", error))
    return FALSE;
  /* The convolution kernel is quantised per output channel (3 p p
   * weights, as a runtime multiplies it) when that is whole blocks.  Else
   * an MXFP4 runtime keeps it unquantised (npuvit.h), but ggml's conv_2d
   * multiplies in F16 whatever the kernel's type (its im2col is F16, so
   * the kernel is rounded to F16 too): F16's values are what both use. */
  if (p->mxfp4_values && (3 * p->patch * p->patch) % NPU_MXFP4_BLOCK_SIZE == 0)
    conv_grid = 3 * p->patch;
  n_blocks = p->n_layers + (p->extra_block ? 1 : 0);

  w = npu_gguf_writer_new ();
  name = g_strdup_printf ("gst-npu random mmproj %s %uL-%u", type,
      p->n_layers, p->dim);
  ok = add_general (w, "clip", name, p->seed, wt, error)
      && npu_gguf_writer_add_bool (w, "clip.has_vision_encoder", TRUE, error)
      && npu_gguf_writer_add_string (w, "clip.projector_type", type, -1, error)
      && (p->act != NPU_MODEL_ACT_GELU
      || npu_gguf_writer_add_bool (w, "clip.use_gelu", TRUE, error))
      && (p->act != NPU_MODEL_ACT_SILU
      || npu_gguf_writer_add_bool (w, "clip.use_silu", TRUE, error))
      && npu_gguf_writer_add_u32 (w, "clip.vision.image_size", p->image_size,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.patch_size", p->patch, error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.embedding_length", p->dim,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.feed_forward_length", p->ff,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.block_count", n_blocks,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.attention.head_count",
      p->n_heads, error)
      && npu_gguf_writer_add_f32 (w,
      "clip.vision.attention.layer_norm_epsilon", p->eps, error)
      && npu_gguf_writer_add_u32 (w, "clip.vision.projection_dim", text_dim,
      error)
      && npu_gguf_writer_add_array (w, "clip.vision.image_mean",
      NPU_GGUF_TYPE_FLOAT32, mlp ? clip_mean : half, 3, error)
      && npu_gguf_writer_add_array (w, "clip.vision.image_std",
      NPU_GGUF_TYPE_FLOAT32, mlp ? clip_std : half, 3, error);
  if (ok && !mlp)
    ok = npu_gguf_writer_add_u32 (w, "clip.vision.projector.scale_factor",
        p->scale_factor, error);
  g_free (name);

  encoder_blocks_init (&blocks, "v", TRUE, p->seed, wt, grid, p->dim, p->ff,
      p->n_layers);
#define T(n, t, std, nd, a, b, c, d) \
  add_random (w, p->seed, &stats, n, t, grid, FALSE, 0.0, std, nd, a, b, \
      c, d, error)
#define T1(n, mean, std, a) \
  add_random (w, p->seed, &stats, n, NPU_GGML_TYPE_F32, 0, FALSE, mean, \
      std, 1, a, 1, 1, 1, error)
  /* pixels are normalised to about [-1, 1]: the convolution is a
   * projection of 3 * patch^2 inputs */
  ok = ok && add_random (w, p->seed, &stats, "v.patch_embd.weight", conv_t,
      conv_grid, p->mxfp4_values && !conv_grid, 0.0,
      1.0 / sqrt (3.0 * p->patch * p->patch), 4, p->patch, p->patch, 3,
      p->dim, error)
      && T1 ("v.patch_embd.bias", 0.0, 0.02, p->dim)
      && add_random (w, p->seed, &stats, "v.position_embd.weight",
      NPU_GGML_TYPE_F32, 0, FALSE, 0.0, 0.02, 2, p->dim, n_patches, 1, 1,
      error);
  /* the scales stay those of n_layers blocks with extra_block: the other
   * blocks' weights are those of the file without it */
  ok = ok && add_encoder_blocks (w, &blocks, n_blocks, &stats, error);
  if (ok && mlp) {
    ok = T ("mm.0.weight", wt, blocks.s_dim, 2, p->dim, text_dim, 1, 1)
        && T1 ("mm.0.bias", 0.0, 0.02, text_dim)
        && T ("mm.2.weight", wt, 1.0 / sqrt ((gdouble) text_dim), 2, text_dim,
        text_dim, 1, 1)
        && T1 ("mm.2.bias", 0.0, 0.02, text_dim);
  } else if (ok && gemma3) {
    /* the norm as wide as the others' spread; the projection in HF's
     * layout, ne = [text dim, vision dim], in F32 or F16 as the
     * converters write it (quantised types would block the wrong axis) */
    ok = T1 ("mm.soft_emb_norm.weight", 1.0, 0.3, p->dim)
        && add_random (w, p->seed, &stats, "mm.input_projection.weight",
        conv_t, 0, FALSE, 0.0, blocks.s_dim, 2, text_dim, p->dim, 1, 1,
        error);
  } else if (ok) {
    guint64 in = (guint64) p->dim * p->scale_factor * p->scale_factor;

    ok = T ("mm.model.fc.weight", wt, 1.0 / sqrt ((gdouble) in), 2, in,
        text_dim, 1, 1);
  }
#undef T
#undef T1

  return finish_and_free (w, ok, path, &stats, out_stats, error);
}

/* ------------------------------------------------------------------------ */
/* Audio mmproj                                                             */

gboolean
npu_model_gen_audio_preset (NpuAudioMmprojParams * p,
    NpuModelAudioProjector projector, const gchar * size, GError ** error)
{
  memset (p, 0, sizeof (*p));
  p->projector = projector;
  p->seed = 1;
  p->wtype = NPU_GGML_TYPE_F32;
  p->eps = 1e-5f;               /* Whisper's */
  p->n_mels = 128;              /* Qwen2-Audio's and Ultravox's (v3) */
  p->n_ctx = 1500;
  p->stack_factor = 8;          /* Ultravox's */
  if (g_strcmp0 (size, "tiny") == 0) {
    p->n_layers = 2;
    p->dim = 64;
    p->ff = 256;
    p->n_heads = 4;
    p->hidden = 256;
  } else if (g_strcmp0 (size, "base") == 0) {
    /* Whisper-base's encoder */
    p->n_layers = 6;
    p->dim = 512;
    p->ff = 2048;
    p->n_heads = 8;
    p->hidden = 2048;
  } else {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "unknown audio encoder size '%s' (tiny, base)", size);
    return FALSE;
  }
  return TRUE;
}

gboolean
npu_model_gen_write_audio_mmproj (const NpuAudioMmprojParams * p,
    const gchar * text_path, const gchar * path,
    NpuModelGenStats * out_stats, GError ** error)
{
  gboolean qwen = p->projector == NPU_MODEL_AUDIO_PROJECTOR_QWEN2A;
  const gchar *proj = qwen ? "qwen2a" : "ultravox";
  guint32 wt = p->wtype, grid_t;
  /* llama.cpp's converter writes the conv kernels in F16 (F32 files keep
   * F32); they are 3 wide, no quantisation block fits */
  guint32 conv_t = wt == NPU_GGML_TYPE_F32 ? NPU_GGML_TYPE_F32 :
      NPU_GGML_TYPE_F16;
  NpuModelGenStats stats = { 0 };
  guint text_dim = p->text_dim, grid = p->mxfp4_values ? 1 : 0, i;
  guint64 stacked = (guint64) p->dim * p->stack_factor;
  EncoderBlocks blocks = { 0, };
  NpuGgufWriter *w;
  gchar *name;
  gboolean ok;

  if (!get_text_dim (text_path, &text_dim, error))
    return FALSE;
  if (!p->n_layers || !p->dim || !p->ff || !p->n_heads || !p->n_mels
      || !p->n_ctx || !text_dim || (!qwen && (!p->stack_factor
              || !p->hidden || p->hidden % 2))) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "audio sizes and the text embedding size must be positive (the "
        "ultravox hidden size even)");
    return FALSE;
  }
  if (p->dim % p->n_heads) {
    g_set_error (error, NPU_MODEL_GEN_ERROR, NPU_MODEL_GEN_ERROR_INVALID,
        "heads %u must divide the audio dim %u", p->n_heads, p->dim);
    return FALSE;
  }
  if (!check_mxfp4_values (p->mxfp4_values, wt, error))
    return FALSE;
  grid_t = p->mxfp4_values ? NPU_GGML_TYPE_MXFP4 : wt;
  for (i = 0; i < 2; i++) {
    guint32 t = i ? grid_t : wt;

    if (!check_ne0 (p->dim, t, "audio dim", error)
        || !check_ne0 (p->ff, t, "audio ff", error)
        || (!qwen && (!check_ne0 (stacked, t, "stacked dim", error)
                || !check_ne0 (p->hidden / 2, t, "ultravox hidden / 2",
                    error))))
      return FALSE;
  }

  w = npu_gguf_writer_new ();
  name = g_strdup_printf ("gst-npu random audio mmproj %s %uL-%u", proj,
      p->n_layers, p->dim);
  ok = add_general (w, "clip", name, p->seed, wt, error)
      && npu_gguf_writer_add_bool (w, "clip.has_vision_encoder", FALSE, error)
      && npu_gguf_writer_add_bool (w, "clip.has_audio_encoder", TRUE, error)
      && npu_gguf_writer_add_string (w, "clip.projector_type", proj, -1,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.audio.num_mel_bins", p->n_mels,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.audio.embedding_length", p->dim,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.audio.feed_forward_length", p->ff,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.audio.block_count", p->n_layers,
      error)
      && npu_gguf_writer_add_u32 (w, "clip.audio.attention.head_count",
      p->n_heads, error)
      && npu_gguf_writer_add_f32 (w,
      "clip.audio.attention.layer_norm_epsilon", p->eps, error)
      && npu_gguf_writer_add_u32 (w, "clip.audio.projection_dim", text_dim,
      error);
  if (ok && !qwen)
    ok = npu_gguf_writer_add_u32 (w, "clip.audio.projector.stack_factor",
        p->stack_factor, error);
  g_free (name);

  encoder_blocks_init (&blocks, "a", FALSE, p->seed, wt, grid, p->dim,
      p->ff, p->n_layers);
#define T(n, t, std, nd, a, b, c, d) \
  add_random (w, p->seed, &stats, n, t, grid, FALSE, 0.0, std, nd, a, b, \
      c, d, error)
#define T1(n, mean, std, a) \
  add_random (w, p->seed, &stats, n, NPU_GGML_TYPE_F32, 0, FALSE, mean, \
      std, 1, a, 1, 1, 1, error)
  /* conv kernels ne [3, in, out], biases ne [1, out] (the converter's
   * unsqueeze, so ggml broadcasts them over the frames).  With MXFP4
   * values the kernels hold F16's: ggml's conv_1d multiplies in F16 (its
   * im2col is F16) and an MXFP4 runtime keeps them unquantised. */
  ok = ok && add_random (w, p->seed, &stats, "a.conv1d.1.weight", conv_t, 0,
      p->mxfp4_values, 0.0, 1.0 / sqrt (3.0 * p->n_mels), 3, 3, p->n_mels,
      p->dim, 1, error)
      && add_random (w, p->seed, &stats, "a.conv1d.1.bias", NPU_GGML_TYPE_F32,
      0, FALSE, 0.0, 0.02, 2, 1, p->dim, 1, 1, error)
      && add_random (w, p->seed, &stats, "a.conv1d.2.weight", conv_t, 0,
      p->mxfp4_values, 0.0, 1.0 / sqrt (3.0 * p->dim), 3, 3, p->dim, p->dim,
      1, error)
      && add_random (w, p->seed, &stats, "a.conv1d.2.bias", NPU_GGML_TYPE_F32,
      0, FALSE, 0.0, 0.02, 2, 1, p->dim, 1, 1, error)
      && add_random (w, p->seed, &stats, "a.position_embd.weight",
      NPU_GGML_TYPE_F32, 0, FALSE, 0.0, 0.02, 2, p->dim, p->n_ctx, 1, 1,
      error);
  ok = ok && add_encoder_blocks (w, &blocks, p->n_layers, &stats, error);
  if (ok && qwen) {
    ok = T ("mm.a.fc.weight", wt, blocks.s_dim, 2, p->dim, text_dim, 1, 1)
        && T1 ("mm.a.fc.bias", 0.0, 0.02, text_dim);
  } else if (ok) {
    ok = T1 ("mm.a.norm_pre.weight", 1.0, 0.05, stacked)
        && T ("mm.a.mlp.1.weight", wt, 1.0 / sqrt ((gdouble) stacked), 2,
        stacked, p->hidden, 1, 1)
        && T1 ("mm.a.norm_mid.weight", 1.0, 0.05, p->hidden / 2)
        && T ("mm.a.mlp.2.weight", wt, 1.0 / sqrt (p->hidden / 2.0), 2,
        p->hidden / 2, text_dim, 1, 1);
  }
#undef T
#undef T1

  return finish_and_free (w, ok, path, &stats, out_stats, error);
}
