/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: libFuzzer target for caps strings at the elements' sink pads
 *
 * Each input is a caps string: gst_caps_from_string(), then to each sink
 * pad of npuvisiontok, npuaudiotok and npullm (vision, audio, text,
 * weights), its element in PAUSED with a tiny generated model: a caps
 * query, and for fixed caps an accept-caps query and a caps event
 * (tests/fuzz/npufuzzgst.h).  Refusing is fine; crashing is not. */
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
  npu_fuzz_caps_run (&models, data, size);
  return 0;
}
