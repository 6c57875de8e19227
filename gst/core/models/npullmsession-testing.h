/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the answering session's hook for tests
 *
 * Not installed and not exported from libgstnpu-1.0: the unit tests link
 * the core statically.  The session's context, so that a test can compare
 * what the model computed for a prompt (the logits the first token was
 * drawn from, the number of positions evaluated) with a reference
 * evaluation of the sequence the prompt should have been.
 */
#ifndef __NPU_LLM_SESSION_TESTING_H__
#define __NPU_LLM_SESSION_TESTING_H__

#include <glib.h>
#include "npullm.h"

G_BEGIN_DECLS

struct _NpuLlmSession;

/* The context the session evaluates in (owned by the session).  After an
 * answer that ended at max-tokens 1, its logits are those after the
 * prompt (the token drawn from them is not evaluated) and its n_past the
 * number of positions the prompt took. */
NpuLlmContext *npu_llm_session_get_context (struct _NpuLlmSession * session);

G_END_DECLS

#endif /* __NPU_LLM_SESSION_TESTING_H__ */
