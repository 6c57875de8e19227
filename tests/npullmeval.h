/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: running a language model's eval inside a queue task, as the
 * element does (the kernels then see a task and its worker threads, not
 * the calling thread alone), for the unit tests of the model.
 *
 * Header-only, the core only.
 */
#ifndef __NPU_LLM_EVAL_TEST_H__
#define __NPU_LLM_EVAL_TEST_H__

#include <glib.h>
#include <core/device/npubackend.h>
#include <core/models/npullm.h>

typedef struct
{
  NpuLlmContext *ctx;
  const gint32 *tokens;         /* or NULL: then embd */
  const float *embd;
  gsize n;
} NpuTestEvalCall;

static inline gboolean
npu_test_eval_task (NpuTask * task, gpointer user_data, GError ** error)
{
  NpuTestEvalCall *c = user_data;

  if (c->tokens)
    return npu_llm_eval_tokens (c->ctx, task, c->tokens, c->n, error);
  return npu_llm_eval_embeddings (c->ctx, task, c->embd, c->n, error);
}

/* Evaluates @n tokens (or, with @tokens NULL, @n rows of @embd) on @queue
 * and waits for it; aborts the test on an error */
static inline void
npu_test_eval_on_queue (NpuQueue * queue, NpuLlmContext * ctx,
    const gint32 * tokens, const float *embd, gsize n)
{
  NpuTestEvalCall call = { ctx, tokens, embd, n };
  GError *error = NULL;
  NpuFence *fence;

  fence = npu_queue_submit (queue, npu_test_eval_task, &call, NULL, NULL, 0);
  if (!npu_fence_wait (fence, -1, &error))
    g_error ("eval failed: %s", error->message);
  npu_fence_unref (fence);
}

#endif /* __NPU_LLM_EVAL_TEST_H__ */
