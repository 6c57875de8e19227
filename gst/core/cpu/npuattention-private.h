/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what npuattention.c shares with npuattention-kernel.c
 *
 * npuattention-kernel.c is built once per ISA level, each time with that
 * level's -m flags and NPU_ATTN_ISA set to its name, which names the copy
 * it defines.  npuattention.c picks one at run time (npucpu.h).
 */
#ifndef __NPU_ATTENTION_PRIVATE_H__
#define __NPU_ATTENTION_PRIVATE_H__

#include "npuattention.h"

G_BEGIN_DECLS

#define NPU_ATTN_KERNEL_DECL(isa) \
G_GNUC_INTERNAL \
void npu_attention_rows_##isa (const NpuAttnSpan * spans, guint n_spans, \
    guint hd, guint nq, gsize q_stride, float scale, const float *sinks, \
    float *scores, gsize ss, float *out, gsize out_stride);

NPU_ATTN_KERNEL_DECL (generic)
#if defined(__x86_64__)
NPU_ATTN_KERNEL_DECL (avx2)
NPU_ATTN_KERNEL_DECL (avx512)
NPU_ATTN_KERNEL_DECL (avx512vnni)
#elif defined(__aarch64__)
NPU_ATTN_KERNEL_DECL (neon)
#endif

G_END_DECLS

#endif /* __NPU_ATTENTION_PRIVATE_H__ */
