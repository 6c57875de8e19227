/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the element-wise steps of a transformer layer, in vectors
 *
 * A decoded token spends most of its time in the matrix products, which
 * every thread shares; the steps between them (the SwiGLU activation, the
 * RMS norms) run on one thread while the others wait.  With a scalar expf
 * per element the 1.1 B llama's SiLU took 25 us a layer (8192 values),
 * 0.4 ms of a token, against 4 us in AVX-512 vectors (bench-vecmath, in
 * cache).  These are the vector forms, built once per ISA level
 * (npuvecmath-kernel.c, like the attention kernel; on aarch64 also
 * npuvecmath-neon.c in NEON intrinsics) and picked from the CPU probe
 * (npucpu.h, NPU_CPU_ISA's cap applies).
 *
 * Not installed: used by npullm.c and the unit tests.
 */
#ifndef __NPU_VECMATH_H__
#define __NPU_VECMATH_H__

#include <glib.h>

G_BEGIN_DECLS

/* out[i] = silu (gate[i]) * up[i], silu (g) = g / (1 + e^-g); @out may be
 * @gate or @up.  Per element, with ref the same formula in exact
 * arithmetic:
 *
 *   |out - ref| <= 2^-20 |ref| + 2^-120 |up|
 *
 * (e^-g by a polynomial within ~3 ulp, then three roundings; the second
 * term covers g below -88.37, where e^-g is taken as +inf and silu as -0
 * against a true |silu| below 4e-37).  IEEE special values follow the
 * formula: silu (+inf) = +inf, silu (-inf) = NaN, NaN stays NaN.  Each
 * element's result depends on its own inputs only, not on its position
 * or on n. */
G_GNUC_INTERNAL
void npu_silu_mul (const float *gate, const float *up, float *out, gsize n);

/* out[i] = x[i] * s * w[i], s = 1 / sqrt (sum x^2 / n + eps) with the sum
 * in double (the squares exact), s rounded to float once: per element
 * within 3 roundings (3 x 2^-24 relative) of the exact result.  @out may
 * be @x. */
G_GNUC_INTERNAL
void npu_rms_norm (const float *x, const float *w, float *out, gsize n,
    float eps);

/* The copies of npuvecmath-kernel.c, one per ISA level (NPU_VEC_ISA names
 * the copy); npuvecmath.c picks one for the functions above. */
#define NPU_VECMATH_DECL(isa) \
G_GNUC_INTERNAL \
void npu_silu_mul_##isa (const float *gate, const float *up, float *out, \
    gsize n); \
G_GNUC_INTERNAL \
void npu_rms_norm_##isa (const float *x, const float *w, float *out, \
    gsize n, float eps);

NPU_VECMATH_DECL (generic)
#if defined(__x86_64__)
NPU_VECMATH_DECL (avx2)
NPU_VECMATH_DECL (avx512)
#endif
#if defined(__aarch64__)
/* npuvecmath-neon.c: intrinsics, not the vector-extension kernel */
NPU_VECMATH_DECL (neon)
#endif

G_END_DECLS

#endif /* __NPU_VECMATH_H__ */
