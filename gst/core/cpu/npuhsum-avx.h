/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the sum of a 256-bit vector's 8 float lanes
 *
 * Shared by the kernel files built with AVX flags (npumatmul-avx2.c and
 * the AVX2 and AVX-512 copies of npumatmul-typed-kernel.c and
 * npumatmul-blocks-kernel.c).  Include it only from such a file: it is an
 * inline function on vector types.
 */
#ifndef __NPU_HSUM_AVX_H__
#define __NPU_HSUM_AVX_H__

#include <immintrin.h>

/* (v0 + v4) + (v2 + v6) + ((v1 + v5) + (v3 + v7)) */
static inline __attribute__ ((always_inline)) float
npu_hsum_m256 (__m256 v)
{
  __m128 s = _mm_add_ps (_mm256_castps256_ps128 (v),
      _mm256_extractf128_ps (v, 1));

  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  s = _mm_add_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}

#endif /* __NPU_HSUM_AVX_H__ */
