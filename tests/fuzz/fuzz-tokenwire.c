/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: libFuzzer target for the token stream reader
 *
 * Reads the input as nputokendepay reads a TCP stream: header, payload,
 * header, ... with every header checked before its sizes are used and
 * every payload's values checked.  Each failure must say why.
 */
#include "core/formats/nputokenwire.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  gsize off = 0;

  while (off < size) {
    NpuTokenWireHeader h;
    GError *err = NULL;
    gsize left = size - off;
    gboolean ok;

    ok = npu_token_wire_read_header (data + off, left, &h, &err);
    if (ok) {
      off += NPU_TOKEN_WIRE_HEADER_SIZE;
      left -= NPU_TOKEN_WIRE_HEADER_SIZE;
      ok = npu_token_wire_check_payload (&h, data + off,
          MIN (left, h.payload_size), &err);
      off += MIN (left, h.payload_size);
    }
    if (!ok) {
      if (!err || !err->message[0])
        __builtin_trap ();
      g_error_free (err);
      return 0;
    }
    if (err)
      __builtin_trap ();
  }
  return 0;
}
