/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: ggml's weight types decoded as ggml decodes them (npuquants.h)
 *
 * Each decoder takes one block's bytes and writes its values, in F32 with
 * the operations of ggml-quants.c's dequantize_row_<type> in their order:
 * a kernel that matches these bits matches llama.cpp's reading of the file.
 */
#include "npuquants.h"

#include <math.h>
#include <string.h>

#include "npugguf.h"
#include "npumxfp4.h"

/* A little-endian 16-bit field at @p */
static inline guint16
le16 (const guint8 * p)
{
  return (guint16) (p[0] | (p[1] << 8));
}

static inline float
half_at (const guint8 * p)
{
  return npu_f16_to_f32 (le16 (p));
}

/* Q4_0, 18 bytes: d (f16), qs[16]; value j is nibble j of qs (low nibbles
 * first, then high), minus 8, times d */
static void
decode_q4_0 (const guint8 * b, float *y)
{
  const float d = half_at (b);
  const guint8 *qs = b + 2;
  guint j;

  for (j = 0; j < 16; j++) {
    y[j] = ((gint) (qs[j] & 0x0f) - 8) * d;
    y[j + 16] = ((gint) (qs[j] >> 4) - 8) * d;
  }
}

/* Q4_1, 20 bytes: d, m (f16), qs[16]; q * d + m */
static void
decode_q4_1 (const guint8 * b, float *y)
{
  const float d = half_at (b), m = half_at (b + 2);
  const guint8 *qs = b + 4;
  guint j;

  for (j = 0; j < 16; j++) {
    y[j] = (qs[j] & 0x0f) * d + m;
    y[j + 16] = (qs[j] >> 4) * d + m;
  }
}

/* The fifth bits of Q5_0 and Q5_1: bit j of the 32-bit qh is value j's */
static inline guint32
fifth_bits (const guint8 * qh)
{
  return (guint32) qh[0] | ((guint32) qh[1] << 8) | ((guint32) qh[2] << 16)
      | ((guint32) qh[3] << 24);
}

/* Q5_0, 22 bytes: d, qh[4], qs[16]; (nibble | fifth bit << 4) - 16, times d */
static void
decode_q5_0 (const guint8 * b, float *y)
{
  const float d = half_at (b);
  const guint32 qh = fifth_bits (b + 2);
  const guint8 *qs = b + 6;
  guint j;

  for (j = 0; j < 16; j++) {
    gint x0 = ((qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) - 16;
    gint x1 = ((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;

    y[j] = x0 * d;
    y[j + 16] = x1 * d;
  }
}

/* Q5_1, 24 bytes: d, m, qh[4], qs[16]; (nibble | fifth bit << 4) * d + m */
static void
decode_q5_1 (const guint8 * b, float *y)
{
  const float d = half_at (b), m = half_at (b + 2);
  const guint32 qh = fifth_bits (b + 4);
  const guint8 *qs = b + 8;
  guint j;

  for (j = 0; j < 16; j++) {
    gint x0 = (qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
    gint x1 = (qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);

    y[j] = x0 * d + m;
    y[j + 16] = x1 * d + m;
  }
}

static void
decode_q8_0 (const guint8 * b, float *y)
{
  npu_q8_0_dequantize (b, y, 32);
}

static void
decode_mxfp4 (const guint8 * b, float *y)
{
  NpuBlockMxfp4 blk;

  memcpy (&blk, b, sizeof (blk));
  npu_mxfp4_dequantize (&blk, y, 32);
}

/* The 6-bit scale and min of sub-block @j (0..7) of Q4_K and Q5_K, packed
 * in 12 bytes as ggml's get_scale_min_k4 unpacks them */
static inline void
scale_min_k4 (guint j, const guint8 * q, guint8 * sc, guint8 * m)
{
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

/* Q4_K and Q5_K: d, dmin (f16), scales[12], then for Q5_K qh[32], then
 * qs[128]; four pairs of 32-value sub-blocks, the pair's low nibbles then
 * its high nibbles, each (q + 16 * fifth bit) * (d * scale) - dmin * min.
 * Q5_K's fifth bit of pair k is bit 2k of qh[l] for the low nibble, bit
 * 2k + 1 for the high one; Q4_K (@qh NULL) has none, and adding 0 to the
 * integer code leaves ggml's Q4_K arithmetic as it is. */
static void
decode_k4 (const guint8 * b, const guint8 * qh, const guint8 * ql, float *y)
{
  const float d = half_at (b), dmin = half_at (b + 2);
  const guint8 *scales = b + 4;
  guint j, l, u1 = 1, u2 = 2;

  for (j = 0; j < 8; j += 2) {
    guint8 sc, m;
    float d1, m1, d2, m2;

    scale_min_k4 (j, scales, &sc, &m);
    d1 = d * sc;
    m1 = dmin * m;
    scale_min_k4 (j + 1, scales, &sc, &m);
    d2 = d * sc;
    m2 = dmin * m;
    for (l = 0; l < 32; l++)
      *y++ = d1 * ((ql[l] & 0x0f) + (qh && (qh[l] & u1) ? 16 : 0)) - m1;
    for (l = 0; l < 32; l++)
      *y++ = d2 * ((ql[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    u1 <<= 2;
    u2 <<= 2;
  }
}

/* Q4_K, 144 bytes */
static void
decode_q4_k (const guint8 * b, float *y)
{
  decode_k4 (b, NULL, b + 16, y);
}

/* Q5_K, 176 bytes */
static void
decode_q5_k (const guint8 * b, float *y)
{
  decode_k4 (b, b + 16, b + 48, y);
}

/* Q6_K, 210 bytes: ql[128], qh[64], scales[16] (int8), d (f16); two
 * halves of 128 values, each four runs of 32 whose low 4 bits are the
 * low or high nibbles of ql and whose top 2 bits are a pair of qh's bits,
 * minus 32, times d * scale (one scale a 16 values) */
static void
decode_q6_k (const guint8 * b, float *y)
{
  const float d = half_at (b + 208);
  const guint8 *ql = b, *qh = b + 128;
  const gint8 *sc = (const gint8 *) (b + 192);
  guint n, l;

  for (n = 0; n < NPU_QK_K; n += 128) {
    for (l = 0; l < 32; l++) {
      guint is = l / 16;
      gint8 q1 = (gint8) ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      gint8 q2 = (gint8) ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4))
          - 32;
      gint8 q3 = (gint8) ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      gint8 q4 = (gint8) ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;

      y[l] = d * sc[is] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

static void
decode_f32 (const guint8 * b, float *y)
{
  guint32 u = (guint32) b[0] | ((guint32) b[1] << 8) | ((guint32) b[2] << 16)
      | ((guint32) b[3] << 24);

  memcpy (y, &u, sizeof (u));
}

static void
decode_f16 (const guint8 * b, float *y)
{
  *y = npu_f16_to_f32 (le16 (b));
}

static void
decode_bf16 (const guint8 * b, float *y)
{
  *y = npu_bf16_to_f32 (le16 (b));
}

typedef void (*DecodeFunc) (const guint8 * b, float *y);

/* The decoder of each type; the block sizes are the GGUF reader's
 * (npu_ggml_type_info()), the one table of them */
static const struct
{
  guint32 type;
  DecodeFunc decode;
} decoders[] = {
  {NPU_GGML_TYPE_F32, decode_f32},
  {NPU_GGML_TYPE_F16, decode_f16},
  {NPU_GGML_TYPE_BF16, decode_bf16},
  {NPU_GGML_TYPE_Q4_0, decode_q4_0},
  {NPU_GGML_TYPE_Q4_1, decode_q4_1},
  {NPU_GGML_TYPE_Q5_0, decode_q5_0},
  {NPU_GGML_TYPE_Q5_1, decode_q5_1},
  {NPU_GGML_TYPE_Q8_0, decode_q8_0},
  {NPU_GGML_TYPE_Q4_K, decode_q4_k},
  {NPU_GGML_TYPE_Q5_K, decode_q5_k},
  {NPU_GGML_TYPE_Q6_K, decode_q6_k},
  {NPU_GGML_TYPE_MXFP4, decode_mxfp4},
};

static DecodeFunc
decoder_of (guint32 type)
{
  guint i;

  for (i = 0; i < G_N_ELEMENTS (decoders); i++)
    if (decoders[i].type == type)
      return decoders[i].decode;
  return NULL;
}

/* A row of @n values of @type: its decoder, values and bytes a block;
 * FALSE when the type has no decoder or @n is not whole blocks */
static gboolean
row_layout (guint32 type, gsize n, DecodeFunc * decode, guint * block,
    gsize * bytes)
{
  *decode = decoder_of (type);
  return *decode && npu_ggml_type_info (type, block, bytes) && n % *block == 0;
}

gboolean
npu_quants_supported (guint32 type)
{
  return decoder_of (type) != NULL;
}

gsize
npu_quants_row_bytes (guint32 type, gsize n)
{
  DecodeFunc decode;
  guint block;
  gsize bytes;

  if (!row_layout (type, n, &decode, &block, &bytes))
    return 0;
  return n / block * bytes;
}

gboolean
npu_quants_dequantize_row (guint32 type, const void *src, float *dst, gsize n)
{
  const guint8 *b = src;
  DecodeFunc decode;
  guint block;
  gsize bytes, i;

  if (!row_layout (type, n, &decode, &block, &bytes))
    return FALSE;
  g_return_val_if_fail (n == 0 || (src != NULL && dst != NULL), FALSE);
  for (i = 0; i < n / block; i++)
    decode (b + i * bytes, dst + i * block);
  return TRUE;
}

double
npu_quants_dot_row (guint32 type, const void *src, const float *x, gsize n)
{
  const guint8 *b = src;
  DecodeFunc decode;
  float v[NPU_QK_K];
  double sum = 0.0;
  guint block, j;
  gsize bytes, i;

  if (!row_layout (type, n, &decode, &block, &bytes))
    return NAN;
  g_return_val_if_fail (n == 0 || (src != NULL && x != NULL), NAN);
  g_return_val_if_fail (block <= NPU_QK_K, NAN);
  for (i = 0; i < n / block; i++) {
    decode (b + i * bytes, v);
    for (j = 0; j < block; j++)
      sum += (double) v[j] * x[i * block + j];
  }
  return sum;
}
