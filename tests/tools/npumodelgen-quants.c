/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: the model generator's writers of ggml's weight types
 *
 * Block layouts from ggml-common.h; the 32-value types as ggml-quants.c's
 * quantize_row_*_ref write them.  The K-quants' scale packing is ggml's;
 * their quantiser is a plain one (min and max of each sub-block, scales
 * rounded to 6 or 8 bits, values to the nearest code), enough to give a
 * model weights of the intended size in the type a user's file holds.
 * What a test holds the runtime to is the decoded values of the bytes
 * written, never these formulas.  Expressions avoid a * b + c, which a
 * compiler could fuse on one machine and not another.
 */
#include "npumodelgen-quants.h"

#include <math.h>
#include <string.h>

#include <core/formats/npugguf.h>
#include <core/formats/npumxfp4.h>

guint16
npu_model_gen_f32_to_f16 (float f)
{
  guint32 x, sign, ax, q, rem;

  memcpy (&x, &f, 4);
  sign = (x >> 16) & 0x8000;
  ax = x & 0x7fffffff;
  if (ax >= 0x7f800000)         /* Inf, NaN (quiet) */
    return sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0);
  if (ax >= 0x477ff000)         /* >= 65520 rounds to Inf */
    return sign | 0x7c00;
  if (ax < 0x38800000) {        /* below 2^-14: F16 subnormal or zero */
    guint32 e = ax >> 23, m, shift, half;

    if (e < 102)                /* below 2^-25: rounds to zero */
      return sign;
    m = (ax & 0x7fffff) | 0x800000;
    shift = 126 - e;            /* units of 2^-24 */
    q = m >> shift;
    rem = m & ((1u << shift) - 1);
    half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1)))
      q++;
    return sign | q;
  }
  ax -= 0x38000000;             /* rebias 127 -> 15 */
  q = ax >> 13;
  rem = ax & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
    q++;
  return sign | q;
}

guint16
npu_model_gen_f32_to_bf16 (float f)
{
  guint32 x;

  memcpy (&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000)
    return (x >> 16) | 64;      /* quiet NaN */
  return (x + (0x7fff + ((x >> 16) & 1))) >> 16;
}

static void
put_f16 (guint8 * p, float f)
{
  guint16 v = npu_model_gen_f32_to_f16 (f);

  p[0] = v;
  p[1] = v >> 8;
}

/* The F16 value @f is stored as */
static float
f16_round (float f)
{
  return npu_f16_to_f32 (npu_model_gen_f32_to_f16 (f));
}

/* ggml's quantize_row_q8_0_ref */
static void
quantize_q8_0 (const float *x, guint8 * dst, gsize n)
{
  gsize b, j;

  for (b = 0; b < n / 32; b++) {
    const float *xb = x + 32 * b;
    guint8 *y = dst + 34 * b;
    float amax = 0.0f, d, id;

    for (j = 0; j < 32; j++)
      amax = MAX (amax, fabsf (xb[j]));
    d = amax / ((1 << 7) - 1);
    id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16 (y, d);
    for (j = 0; j < 32; j++)
      y[2 + j] = (guint8) (gint8) roundf (xb[j] * id);
  }
}

/* The value of largest magnitude of @n at @x, with its sign */
static float
signed_max (const float *x, gsize n)
{
  float amax = 0.0f, max = 0.0f;
  gsize j;

  for (j = 0; j < n; j++)
    if (fabsf (x[j]) > amax) {
      amax = fabsf (x[j]);
      max = x[j];
    }
  return max;
}

/* ggml's quantize_row_q4_0_ref / q5_0 (@bits 4 or 5): d = max / -2^(b-1),
 * codes x / d + 2^(b-1) rounded, the fifth bits in a 32-bit mask */
static void
quantize_q4_q5_0 (const float *x, guint8 * dst, gsize n, guint bits)
{
  gsize bytes = bits == 4 ? 18 : 22, b, j;
  float half = bits == 4 ? 8.0f : 16.0f, top = 2.0f * half - 1.0f;

  for (b = 0; b < n / 32; b++) {
    const float *xb = x + 32 * b;
    guint8 *y = dst + bytes * b, *qs = y + bytes - 16;
    float d = signed_max (xb, 32) / -half, id = d != 0.0f ? 1.0f / d : 0.0f;
    guint32 qh = 0;

    put_f16 (y, d);
    for (j = 0; j < 16; j++) {
      float v0 = xb[j] * id, v1 = xb[16 + j] * id;
      guint8 q0 = (guint8) MIN (top, (gint8) (v0 + (half + 0.5f)));
      guint8 q1 = (guint8) MIN (top, (gint8) (v1 + (half + 0.5f)));

      qs[j] = (q0 & 0xf) | ((q1 & 0xf) << 4);
      qh |= ((guint32) (q0 >> 4) & 1) << j;
      qh |= ((guint32) (q1 >> 4) & 1) << (j + 16);
    }
    if (bits == 5)
      for (j = 0; j < 4; j++)
        y[2 + j] = qh >> (8 * j);
  }
}

/* ggml's quantize_row_q4_1_ref / q5_1: d = (max - min) / (2^b - 1), m =
 * min, codes (x - min) / d rounded */
static void
quantize_q4_q5_1 (const float *x, guint8 * dst, gsize n, guint bits)
{
  gsize bytes = bits == 4 ? 20 : 24, b, j;
  float top = bits == 4 ? 15.0f : 31.0f;

  for (b = 0; b < n / 32; b++) {
    const float *xb = x + 32 * b;
    guint8 *y = dst + bytes * b, *qs = y + bytes - 16;
    float min = xb[0], max = xb[0], d, id;
    guint32 qh = 0;

    for (j = 1; j < 32; j++) {
      min = MIN (min, xb[j]);
      max = MAX (max, xb[j]);
    }
    d = (max - min) / top;
    id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16 (y, d);
    put_f16 (y + 2, min);
    for (j = 0; j < 16; j++) {
      float v0 = (xb[j] - min) * id, v1 = (xb[16 + j] - min) * id;
      guint8 q0 = (guint8) MIN (top, v0 + 0.5f);
      guint8 q1 = (guint8) MIN (top, v1 + 0.5f);

      qs[j] = (q0 & 0xf) | ((q1 & 0xf) << 4);
      qh |= ((guint32) (q0 >> 4) & 1) << j;
      qh |= ((guint32) (q1 >> 4) & 1) << (j + 16);
    }
    if (bits == 5)
      for (j = 0; j < 4; j++)
        y[4 + j] = qh >> (8 * j);
  }
}

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block @j (of 8) into
 * ggml's 12 bytes (get_scale_min_k4() reads them back) */
static void
pack_scale_min (guint8 * s, guint j, guint sc, guint m)
{
  if (j < 4) {
    s[j] = (s[j] & 0xc0) | sc;
    s[j + 4] = (s[j + 4] & 0xc0) | m;
  } else {
    s[j + 4] = (sc & 0xf) | ((m & 0xf) << 4);
    s[j - 4] |= (sc >> 4) << 6;
    s[j] |= (m >> 4) << 6;
  }
}

/* One Q4_K (@bits 4: d, dmin, scales[12], qs[128]) or Q5_K (5: the same
 * with qh[32] before qs) block of 256: value = d sc q - dmin m per
 * sub-block of 32 */
static void
quantize_k_block (const float *x, guint8 * y, guint bits)
{
  float scale[8], mins[8], max_scale = 0.0f, max_min = 0.0f, d, dmin;
  float top = bits == 4 ? 15.0f : 31.0f;
  guint8 *scales = y + 4, *qh = y + 16, *qs = bits == 4 ? y + 16 : y + 48;
  guint sc[8], m[8], j, l;

  memset (y + 4, 0, bits == 4 ? 140 : 172);
  for (j = 0; j < 8; j++) {
    float lo = 0.0f, hi = 0.0f;

    for (l = 0; l < 32; l++) {
      lo = MIN (lo, x[32 * j + l]);
      hi = MAX (hi, x[32 * j + l]);
    }
    scale[j] = (hi - lo) / top;
    mins[j] = -lo;
    max_scale = MAX (max_scale, scale[j]);
    max_min = MAX (max_min, mins[j]);
  }
  d = f16_round (max_scale / 63.0f);
  dmin = f16_round (max_min / 63.0f);
  put_f16 (y, d);
  put_f16 (y + 2, dmin);
  for (j = 0; j < 8; j++) {
    sc[j] = d > 0.0f ? (guint) MIN (63.0f, roundf (scale[j] / d)) : 0;
    m[j] = dmin > 0.0f ? (guint) MIN (63.0f, roundf (mins[j] / dmin)) : 0;
    pack_scale_min (scales, j, sc[j], m[j]);
  }
  for (j = 0; j < 8; j++) {
    float ds = d * (float) sc[j], dm = dmin * (float) m[j];

    for (l = 0; l < 32; l++) {
      float v = ds > 0.0f ? (x[32 * j + l] + dm) / ds : 0.0f;
      guint q = (guint) CLAMP (roundf (v), 0.0f, top);
      /* sub-blocks 2c and 2c + 1 share 32 bytes: low, then high nibbles */
      guint8 *byte = qs + 32 * (j / 2) + l;

      *byte |= (q & 0xf) << (j % 2 ? 4 : 0);
      if (bits == 5 && (q & 16))
        qh[l] |= 1 << j;
    }
  }
}

/* One Q6_K block of 256 (ql[128], qh[64], int8 scales[16], d): value =
 * d scale q, q in [-32, 31], per sub-block of 16 */
static void
quantize_q6_k_block (const float *x, guint8 * y)
{
  guint8 *ql = y, *qh = y + 128;
  gint8 *scales = (gint8 *) (y + 192);
  float scale[16], max_scale = 0.0f, d;
  guint j;

  memset (y, 0, 208);
  for (j = 0; j < 16; j++) {
    scale[j] = signed_max (x + 16 * j, 16) / -32.0f;
    if (fabsf (scale[j]) > fabsf (max_scale))
      max_scale = scale[j];
  }
  d = f16_round (max_scale / -128.0f);
  put_f16 (y + 208, d);
  for (j = 0; j < 16; j++)
    scales[j] = d != 0.0f ?
        (gint8) CLAMP (roundf (scale[j] / d), -128.0f, 127.0f) : 0;
  for (j = 0; j < 256; j++) {
    float ds = d * (float) scales[j / 16];
    float v = ds != 0.0f ? x[j] / ds : 0.0f;
    guint q = (guint) (CLAMP (roundf (v), -32.0f, 31.0f) + 32.0f);
    /* ggml's dequantize_row_q6_K, inverted: value (h, i) of a half h
     * (128 values) at i = 32 g + l, g = 0..3, takes ql[64 h + l + 32 (g &
     * 1)]'s low (g < 2) or high nibble and qh[32 h + l]'s bits 2g..2g+1 */
    guint h = j / 128, i = j % 128, g = i / 32, li = i % 32;

    ql[64 * h + li + 32 * (g & 1)] |= (q & 0xf) << (g < 2 ? 0 : 4);
    qh[32 * h + li] |= (q >> 4) << (2 * g);
  }
}

gboolean
npu_model_gen_quantize_row (guint32 type, const float *x, guint8 * dst,
    gsize n)
{
  gsize j;

  switch (type) {
    case NPU_GGML_TYPE_F32:
      for (j = 0; j < n; j++) {
        guint32 u;

        memcpy (&u, &x[j], 4);
        dst[4 * j] = u;
        dst[4 * j + 1] = u >> 8;
        dst[4 * j + 2] = u >> 16;
        dst[4 * j + 3] = u >> 24;
      }
      return TRUE;
    case NPU_GGML_TYPE_F16:
    case NPU_GGML_TYPE_BF16:
      for (j = 0; j < n; j++) {
        guint16 v = type == NPU_GGML_TYPE_F16 ?
            npu_model_gen_f32_to_f16 (x[j]) : npu_model_gen_f32_to_bf16 (x[j]);

        dst[2 * j] = v;
        dst[2 * j + 1] = v >> 8;
      }
      return TRUE;
    case NPU_GGML_TYPE_Q4_0:
    case NPU_GGML_TYPE_Q5_0:
      quantize_q4_q5_0 (x, dst, n, type == NPU_GGML_TYPE_Q4_0 ? 4 : 5);
      return TRUE;
    case NPU_GGML_TYPE_Q4_1:
    case NPU_GGML_TYPE_Q5_1:
      quantize_q4_q5_1 (x, dst, n, type == NPU_GGML_TYPE_Q4_1 ? 4 : 5);
      return TRUE;
    case NPU_GGML_TYPE_Q8_0:
      quantize_q8_0 (x, dst, n);
      return TRUE;
    case NPU_GGML_TYPE_Q4_K:
    case NPU_GGML_TYPE_Q5_K:
      for (j = 0; j < n / 256; j++)
        quantize_k_block (x + 256 * j, dst + j * (type == NPU_GGML_TYPE_Q4_K ?
                144 : 176), type == NPU_GGML_TYPE_Q4_K ? 4 : 5);
      return TRUE;
    case NPU_GGML_TYPE_Q6_K:
      for (j = 0; j < n / 256; j++)
        quantize_q6_k_block (x + 256 * j, dst + 210 * j);
      return TRUE;
    case NPU_GGML_TYPE_MXFP4:
      npu_mxfp4_quantize_f32 (x, (NpuBlockMxfp4 *) dst, n);
      return TRUE;
    default:
      return FALSE;
  }
}

guint32
npu_model_gen_row_type (guint32 type, guint64 ne0)
{
  guint32 fallback;
  guint block = 1;

  switch (type) {
    case NPU_GGML_TYPE_Q4_K:
      fallback = NPU_GGML_TYPE_Q5_0;
      break;
    case NPU_GGML_TYPE_Q5_K:
      fallback = NPU_GGML_TYPE_Q5_1;
      break;
    case NPU_GGML_TYPE_Q6_K:
      fallback = NPU_GGML_TYPE_Q8_0;
      break;
    default:
      return type;
  }
  if (ne0 % 256 == 0)
    return type;
  npu_ggml_type_info (fallback, &block, NULL);
  return ne0 % block == 0 ? fallback : NPU_GGML_TYPE_F16;
}
