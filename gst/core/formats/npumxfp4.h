/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: MXFP4 codec (OCP Microscaling Formats v1.0, MXFP4 = E8M0 scale +
 * 32 x FP4 E2M1 elements)
 *
 * Storage is llama.cpp/ggml's block_mxfp4 byte layout, so GGUF MXFP4 tensors
 * are used straight from the file mapping and blocks we write are read by
 * ggml as the same values:
 *
 *   byte 0      e: E8M0 biased exponent, scale X = 2^(e-127), 0xFF = NaN
 *   bytes 1..16 qs[j]: element j in the low nibble, element j+16 in the high
 *               nibble (j = 0..15)
 *
 * An E2M1 code is sign (bit 3), exponent (bits 2..1), mantissa (bit 0):
 * magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 for codes 0..7; code 8 is -0.
 * A decoded element is X * P.
 *
 * Quantisation follows the spec's conversion algorithm (section 6.3), not
 * ggml's own quantiser, which evaluates the same scale formula with log2f
 * (that can round up just below a power of two, and leaves uint8_t's range
 * for maxima below 2^-125) and
 * breaks ties towards the lower code instead of to even:
 *
 *   shared_exp = floor(log2(max|V|)) - 2      (2 = emax of E2M1)
 *   clamped to E8M0's range [-127, 127];  X = 2^shared_exp
 *   P = V / X rounded to nearest E2M1, ties to even (mantissa bit 0),
 *       saturating to +-6 (the spec clamps normal values to max)
 *
 * The exponent is read from the float's bits, never from a float log2.
 *
 * Edge cases (docs/mxfp4.md says why):
 *  - all-zero block (+0 or -0): e = 0 (shared_exp clamped to -127), every
 *    element +0 or -0 keeping its sign; decodes to signed zeros.
 *  - -0.0 and negative values that round to zero encode as code 8 (-0), as
 *    IEEE rounding keeps the sign.  ggml decodes code 8 as +0.0: the values
 *    compare equal, only the sign of zero differs.
 *  - subnormal F32 inputs are not flushed: a subnormal block maximum has
 *    floor(log2) <= -127, so shared_exp clamps to -127 (e = 0) and the
 *    elements are V * 2^127, exact, e.g. 2^-128 encodes as 0.5.
 *  - small maxima (< 2^-125) clamp to e = 0; elements below 2^-129 then round
 *    to (signed) zero, 2^-129 itself is a tie and goes to 0 (even).
 *  - large maxima: F32's largest finite value gives shared_exp = 125
 *    (e = 252); the upper clamp at 127 is unreachable from F32, F16, BF16 or
 *    Q8_0 inputs.  Decoding e >= 253 may overflow F32 to +-Inf (6 * 2^127 is
 *    not a float), exactly as ggml does.
 *  - NaN or +-Inf anywhere in a block: e = 0xFF (NaN scale, the whole block
 *    is NaN) and every qs byte 0.  E2M1 has neither Inf nor NaN, and
 *    floor(log2(Inf)) is above E8M0's range, which the MX emulation library
 *    published with the spec (microxcaling) also maps to a NaN scale.
 *    Decoding e = 0xFF gives 32 NaNs.  ggml has no NaN scale: its row
 *    validator rejects e = 0xFF.
 *
 * This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_MXFP4_H__
#define __NPU_MXFP4_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS

/* Elements per block */
#define NPU_MXFP4_BLOCK_SIZE 32

/* E8M0 code of a NaN scale */
#define NPU_E8M0_NAN 0xFF

/**
 * NpuBlockMxfp4:
 * @e: E8M0 shared scale, X = 2^(e-127); 0xFF is NaN
 * @qs: 32 E2M1 codes, element j in the low nibble of qs[j], element j+16 in
 *   the high nibble
 *
 * 32 weights in 17 bytes, byte-compatible with ggml's block_mxfp4.
 */
typedef struct
{
  guint8 e;
  guint8 qs[NPU_MXFP4_BLOCK_SIZE / 2];
} NpuBlockMxfp4;

G_STATIC_ASSERT (sizeof (NpuBlockMxfp4) == 17);

/* Bytes of one ggml block_q8_0: fp16 d followed by int8 qs[32] */
#define NPU_Q8_0_BLOCK_BYTES 34

/* Quantisers: @n is the number of source elements, a multiple of 32;
 * @dst receives n / 32 blocks. */
NPU_API
void    npu_mxfp4_quantize_f32   (const float *src, NpuBlockMxfp4 *dst,
                                  gsize n);
NPU_API
void    npu_mxfp4_quantize_f16   (const guint16 *src, NpuBlockMxfp4 *dst,
                                  gsize n);
NPU_API
void    npu_mxfp4_quantize_bf16  (const guint16 *src, NpuBlockMxfp4 *dst,
                                  gsize n);
/* @src: n / 32 ggml block_q8_0 (34 bytes each, no alignment needed), each
 * value dequantised as d * q in F32 the way ggml does. */
NPU_API
void    npu_mxfp4_quantize_q8_0  (const void *src, NpuBlockMxfp4 *dst,
                                  gsize n);

/* @src: n / 32 ggml block_q8_0; @n elements (a multiple of 32) written to
 * @dst, each d * q in F32 as ggml's dequantize_row_q8_0 (exact: an 11-bit
 * by 8-bit product fits F32's 24 bits) */
NPU_API
void    npu_q8_0_dequantize      (const void *src, float *dst, gsize n);

/* One block of gpt-oss's safetensors layout (@codes byte k: element 2k in
 * the low nibble, 2k + 1 in the high one; the E8M0 @scale stored apart) as
 * ggml's block_mxfp4 (qs[j]: element j low, j + 16 high): the same values,
 * the nibbles moved */
NPU_API
void    npu_mxfp4_block_from_gpt_oss (const guint8 *codes, guint8 scale,
                                      NpuBlockMxfp4 *dst);

/* @n: number of elements to write to @dst (multiple of 32) */
NPU_API
void    npu_mxfp4_dequantize     (const NpuBlockMxfp4 *src, float *dst,
                                  gsize n);

/* 2^(e-127) for e < 255 (e = 0 gives the subnormal 2^-127); NaN for 0xFF */
NPU_API
float   npu_e8m0_to_float        (guint8 e);

/* Value of an E2M1 code (low 4 bits of @code used); code 8 gives -0.0 */
NPU_API
float   npu_e2m1_to_float        (guint8 code);

/* Nearest E2M1 code, ties to even, saturating to +-6 (Inf gives +-6).
 * NaN gives a signed zero: E2M1 has no NaN; blocks handle NaN through the
 * scale instead. */
NPU_API
guint8  npu_float_to_e2m1        (float v);

/* Exact widening conversions (subnormals, Inf and NaN preserved) */
NPU_API
float   npu_f16_to_f32           (guint16 h);
NPU_API
float   npu_bf16_to_f32          (guint16 h);

G_END_DECLS

#endif /* __NPU_MXFP4_H__ */
