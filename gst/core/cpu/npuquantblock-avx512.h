/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: one block of 32 activations to integer codes, AVX-512
 *
 * Shared by the files built with AVX-512 flags (the one-token GEMV in
 * npumatmul-avx512.c, the panel GEMMs in npumatmul-panel-avx512.c), so
 * that the int8 and int16 codes of a block are the same arithmetic
 * everywhere.  Include it only from such a file: it is an inline function
 * on vector types.
 *
 * d = max|x| / qmax and x / d are correctly rounded divisions, then
 * rounded to the nearest integer (ties to even, as lrintf): |x - d q| <= d
 * (1/2 + qmax x 2^-24), and |x / d| rounds to at most qmax.  A block with
 * a NaN or an Inf gets codes 0 and a NaN scale, so every output it meets
 * is NaN; an all-zero block gets scale 0.
 */
#ifndef __NPU_QUANT_BLOCK_AVX512_H__
#define __NPU_QUANT_BLOCK_AVX512_H__

#include <glib.h>
#include <immintrin.h>
#include <math.h>

/* Codes of the block @a0, @a1 (elements 0..15, 16..31) at most @qmax in
 * magnitude into @q0, @q1; returns the block's scale d */
static inline __attribute__ ((always_inline)) float
npu_quantize_block_avx512 (__m512 a0, __m512 a1, float qmax, __m512i * q0,
    __m512i * q1)
{
  const __m512 amax = _mm512_max_ps (_mm512_abs_ps (a0), _mm512_abs_ps (a1));
  /* not finite: a NaN (unordered) or an Inf (above the largest float) */
  const __mmask16 bad = _mm512_cmp_ps_mask (_mm512_abs_ps (a0),
      _mm512_set1_ps (G_MAXFLOAT), _CMP_NLE_UQ) |
      _mm512_cmp_ps_mask (_mm512_abs_ps (a1), _mm512_set1_ps (G_MAXFLOAT),
      _CMP_NLE_UQ);
  const float m = _mm512_reduce_max_ps (amax);
  __m512 vd;
  float d;

  if (bad || m == 0.0f) {
    *q0 = *q1 = _mm512_setzero_si512 ();
    return bad ? NAN : 0.0f;
  }
  d = m / qmax;
  vd = _mm512_set1_ps (d);
  *q0 = _mm512_cvtps_epi32 (_mm512_div_ps (a0, vd));
  *q1 = _mm512_cvtps_epi32 (_mm512_div_ps (a1, vd));
  return d;
}

#endif /* __NPU_QUANT_BLOCK_AVX512_H__ */
