/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: libFuzzer target for token buffers and their metas into npullm
 *
 * Each input is a token buffer (tests/fuzz/npufuzzgst.h: a header that
 * picks the pad, the GstNpuTokensMeta and GstNpuTensorMeta, then the
 * payload) pushed through a GstHarness into npullm with a tiny generated
 * model.  It must end in EOS or an error with a message, within 20 s. */
#include "npufuzzgst.h"

#include <stdint.h>

int LLVMFuzzerInitialize (int *argc, char ***argv);
int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

static NpuFuzzModels models;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  npu_fuzz_target_init (argc, argv, &models);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  gchar *message;
  NpuFuzzEnd end = npu_fuzz_tokens_run (&models, data, size, &message);

  /* a hang, or an error that does not say why */
  if (end == NPU_FUZZ_HUNG || (end == NPU_FUZZ_ERROR && !*message))
    __builtin_trap ();
  g_free (message);
  return 0;
}
