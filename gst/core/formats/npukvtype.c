/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: storing KV cache rows in F32, F16 or Q8_0 (npukvtype.h) */
#include "npukvtype.h"
#include "npumxfp4.h"

#include <math.h>
#include <string.h>

static const gchar *const names[] = { "f32", "f16", "q8_0" };

const gchar *
npu_kv_type_name (NpuKvType type)
{
  return (guint) type < G_N_ELEMENTS (names) ? names[type] : NULL;
}

gboolean
npu_kv_type_from_name (const gchar * name, NpuKvType * type)
{
  guint i;

  for (i = 0; name && i < G_N_ELEMENTS (names); i++) {
    if (strcmp (name, names[i]) == 0) {
      *type = (NpuKvType) i;
      return TRUE;
    }
  }
  return FALSE;
}

gsize
npu_kv_row_bytes (NpuKvType type, gsize n)
{
  switch (type) {
    case NPU_KV_F16:
      return n * 2;
    case NPU_KV_Q8_0:
      return n / NPU_KV_Q8_0_BLOCK * NPU_KV_Q8_0_BYTES;
    case NPU_KV_F32:
    default:
      return n * 4;
  }
}

static inline guint32
f32_bits (float f)
{
  guint32 u;

  memcpy (&u, &f, 4);
  return u;
}

static inline float
bits_f32 (guint32 u)
{
  float f;

  memcpy (&f, &u, 4);
  return f;
}

/* F. Giesen's float_to_half_fast3_rtne: the rounding of the mantissa's
 * low 13 bits is an integer add whose carry may run into the exponent,
 * which is what rounding up to the next binade (or to Inf) means. */
guint16
npu_f32_to_f16 (float f)
{
  guint32 x = f32_bits (f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  guint32 o;

  if (ax > 0x7f800000u)         /* NaN: quiet, top of the payload kept */
    return (guint16) (sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x47800000u)        /* >= 2^16 (and Inf): Inf */
    return (guint16) (sign | 0x7c00u);
  if (ax < 0x38800000u) {
    /* below 2^-14: a subnormal half.  Adding 0.5 puts the value's bits
     * at the half's mantissa positions, rounded by the FPU (RNE). */
    const guint32 magic = 126u << 23;

    o = f32_bits (bits_f32 (ax) + bits_f32 (magic)) - magic;
  } else {
    guint32 odd = (ax >> 13) & 1;

    ax += ((guint32) (15 - 127) << 23) + 0xfffu;
    ax += odd;
    o = ax >> 13;
  }
  return (guint16) (o | sign);
}

static void
encode_q8_0 (const float *src, gsize n, guint8 * dst)
{
  gsize b;
  guint j;

  for (b = 0; b < n / NPU_KV_Q8_0_BLOCK; b++) {
    const float *x = src + b * NPU_KV_Q8_0_BLOCK;
    guint8 *blk = dst + b * NPU_KV_Q8_0_BYTES;
    float amax = 0.0f, d;
    guint16 h;

    for (j = 0; j < NPU_KV_Q8_0_BLOCK; j++) {
      float a = fabsf (x[j]);

      if (a > amax || isnan (a))        /* a NaN stays, and the block is NaN */
        amax = a;
    }
    h = npu_f32_to_f16 (amax / 127.0f);
    /* rounded by the F16 scale that is stored, not the exact one, so a
     * value is off by at most half the stored step */
    d = npu_f16_to_f32 (h);
    blk[0] = h & 0xff;
    blk[1] = h >> 8;
    for (j = 0; j < NPU_KV_Q8_0_BLOCK; j++) {
      float v = d > 0.0f ? x[j] / d : 0.0f;

      if (!(v >= -127.0f))
        v = isnan (v) ? 0.0f : -127.0f;
      if (v > 127.0f)
        v = 127.0f;
      blk[2 + j] = (guint8) (gint8) lrintf (v);
    }
  }
}

void
npu_kv_encode_row (NpuKvType type, const float *src, gsize n, void *dst)
{
  gsize i;

  switch (type) {
    case NPU_KV_F16:{
      guint8 *o = dst;

      for (i = 0; i < n; i++) {
        guint16 h = npu_f32_to_f16 (src[i]);

        o[2 * i] = h & 0xff;
        o[2 * i + 1] = h >> 8;
      }
      break;
    }
    case NPU_KV_Q8_0:
      g_return_if_fail (n % NPU_KV_Q8_0_BLOCK == 0);
      encode_q8_0 (src, n, dst);
      break;
    case NPU_KV_F32:
    default:
      memcpy (dst, src, n * sizeof (float));
      break;
  }
}

float
npu_kv_decode_at (NpuKvType type, const void *row, gsize i)
{
  const guint8 *p = row;

  switch (type) {
    case NPU_KV_F16:
      return npu_f16_to_f32 ((guint16) (p[2 * i] | p[2 * i + 1] << 8));
    case NPU_KV_Q8_0:{
      const guint8 *blk = p + i / NPU_KV_Q8_0_BLOCK * NPU_KV_Q8_0_BYTES;

      return npu_f16_to_f32 ((guint16) (blk[0] | blk[1] << 8)) *
          (gint8) blk[2 + i % NPU_KV_Q8_0_BLOCK];
    }
    case NPU_KV_F32:
    default:{
      float f;

      memcpy (&f, p + 4 * i, 4);
      return f;
    }
  }
}

gsize
npu_kv_tile_bytes (NpuKvType type, gsize hd)
{
  return NPU_KV_TILE_ROWS * npu_kv_row_bytes (type, hd);
}

void
npu_kv_tile_put (NpuKvType type, gsize hd, const void *row, void *tile, guint j)
{
  const guint8 *src = row;
  guint8 *t = tile;
  gsize d, b, nb;

  g_return_if_fail (j < NPU_KV_TILE_ROWS);
  switch (type) {
    case NPU_KV_F16:
      for (d = 0; d < hd; d++)
        memcpy (t + 2 * (d * NPU_KV_TILE_ROWS + j), src + 2 * d, 2);
      break;
    case NPU_KV_Q8_0:
      g_return_if_fail (hd % NPU_KV_Q8_0_BLOCK == 0);
      nb = hd / NPU_KV_Q8_0_BLOCK;
      for (b = 0; b < nb; b++) {
        const guint8 *blk = src + b * NPU_KV_Q8_0_BYTES;
        guint8 *q = t + nb * 2 * NPU_KV_TILE_ROWS +
            b * NPU_KV_Q8_0_BLOCK * NPU_KV_TILE_ROWS + j;

        memcpy (t + 2 * (b * NPU_KV_TILE_ROWS + j), blk, 2);
        for (d = 0; d < NPU_KV_Q8_0_BLOCK; d++)
          q[d * NPU_KV_TILE_ROWS] = blk[2 + d];
      }
      break;
    case NPU_KV_F32:
    default:
      for (d = 0; d < hd; d++)
        memcpy (t + 4 * (d * NPU_KV_TILE_ROWS + j), src + 4 * d, 4);
      break;
  }
}
