/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu cross-check: what mtmd-caption.c and mtmd-audio-caption.cpp
 * share: llama.cpp's text model and mtmd context set up as
 * llama-mtmd-cli sets them up, the user turn around mtmd's media marker,
 * and the greedy answer.  Built with them by build-llamacpp.sh, against
 * a llama.cpp build; not part of the meson build. */
#ifndef __NPU_MTMD_COMMON_H__
#define __NPU_MTMD_COMMON_H__

#include <stddef.h>

#include "llama.h"
#include "mtmd.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct
{
  const char *prog;             /* for error messages */
  struct llama_model *model;
  const struct llama_vocab *vocab;
  struct llama_context *lctx;   /* n_ctx = n_batch = 512 */
  mtmd_context *mctx;
  int n_batch;
} MtmdCheck;

/* Logs only llama.cpp's errors, loads @model_path and @mmproj_path
 * (mtmd: no timings, no warm-up); 0, or -1 after a message on stderr.
 * mtmd_check_close() frees what was set up either way. */
int mtmd_check_open (MtmdCheck * c, const char *prog, const char *model_path,
    const char *mmproj_path);
void mtmd_check_close (MtmdCheck * c);

/* The user turn, mtmd's media marker then @prompt, formatted with the
 * text model's chat template (no system message, the assistant's turn
 * opened) into @out; its length, or -1 after a message on stderr */
int mtmd_check_format (MtmdCheck * c, const char *prompt, char *out,
    size_t size);

/* From the logits of the last token decoded: the most likely token until
 * an end-of-generation token or @max_tokens, each piece to stdout as it
 * comes, then a newline (stdout, not llama.cpp's asynchronous log, which
 * can lose the last piece at exit); 0, or -1 after a message on stderr */
int mtmd_check_greedy (MtmdCheck * c, int max_tokens);

#ifdef __cplusplus
}
#endif

#endif /* __NPU_MTMD_COMMON_H__ */
