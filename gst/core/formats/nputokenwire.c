/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: token tensors on a byte stream */
#include "nputokenwire.h"
#include "npubyteorder-private.h"

#include <math.h>
#include <string.h>

GQuark
npu_token_wire_error_quark (void)
{
  return g_quark_from_static_string ("npu-token-wire-error-quark");
}

void
npu_token_wire_write_header (const NpuTokenWireHeader * h,
    guint8 out[NPU_TOKEN_WIRE_HEADER_SIZE])
{
  memset (out, 0, NPU_TOKEN_WIRE_HEADER_SIZE);
  memcpy (out, "NPUT", 4);
  out[4] = NPU_TOKEN_WIRE_VERSION;
  out[6] = NPU_TOKEN_WIRE_HEADER_SIZE;
  npu_store_le32 (out + 8, h->modality);
  npu_store_le32 (out + 12, h->n_tokens);
  npu_store_le32 (out + 16, h->dim);
  npu_store_le32 (out + 20, h->grid_width);
  npu_store_le32 (out + 24, h->grid_height);
  npu_store_le32 (out + 28, h->flags);
  npu_store_le64 (out + 32, h->pts);
  npu_store_le64 (out + 40, h->duration);
  npu_store_le64 (out + 48, h->source_pts);
  npu_store_le64 (out + 56, h->source_duration);
  npu_store_le64 (out + 64, h->payload_size);
}

/* Reads and checks one header: every field must be consistent with the
 * others before the receiver trusts a size from it. */
gboolean
npu_token_wire_read_header (const guint8 * data, gsize size,
    NpuTokenWireHeader * h, GError ** error)
{
  guint version, hsize;
  guint64 n;

  if (size < NPU_TOKEN_WIRE_HEADER_SIZE)
    goto short_header;
  if (memcmp (data, "NPUT", 4) != 0)
    goto bad_magic;
  version = data[4] | (data[5] << 8);
  hsize = data[6] | (data[7] << 8);
  if (version != NPU_TOKEN_WIRE_VERSION || hsize != NPU_TOKEN_WIRE_HEADER_SIZE)
    goto bad_version;
  h->modality = npu_load_le32 (data + 8);
  h->n_tokens = npu_load_le32 (data + 12);
  h->dim = npu_load_le32 (data + 16);
  h->grid_width = npu_load_le32 (data + 20);
  h->grid_height = npu_load_le32 (data + 24);
  h->flags = npu_load_le32 (data + 28);
  h->pts = npu_load_le64 (data + 32);
  h->duration = npu_load_le64 (data + 40);
  h->source_pts = npu_load_le64 (data + 48);
  h->source_duration = npu_load_le64 (data + 56);
  h->payload_size = npu_load_le64 (data + 64);
  if (h->modality > 1)
    goto bad_modality;
  if (h->n_tokens == 0 || h->dim == 0)
    goto bad_dims;
  n = (guint64) h->n_tokens * h->dim;
  if (n > NPU_TOKEN_WIRE_MAX_PAYLOAD / 4)
    goto too_big;
  if ((guint64) h->grid_width * h->grid_height != h->n_tokens)
    goto bad_grid;
  if (h->payload_size != n * 4)
    goto bad_size;
  return TRUE;

  /* ERRORS */
short_header:
  g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "truncated token packet: "
      "%" G_GSIZE_FORMAT " bytes, a header is %d", size,
      NPU_TOKEN_WIRE_HEADER_SIZE);
  return FALSE;
bad_magic:
  g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "not a token packet: no "
      "\"NPUT\" magic (a stream from something other than nputokenpay, or "
      "out of step)");
  return FALSE;
bad_version:
  g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "token packet version %u with "
      "a %u-byte header: only version %d with %d bytes is known", version,
      hsize, NPU_TOKEN_WIRE_VERSION, NPU_TOKEN_WIRE_HEADER_SIZE);
  return FALSE;
bad_modality:
  g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "token packet of unknown "
      "modality %u (0 vision, 1 audio)", h->modality);
  return FALSE;
bad_dims:
  g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "token packet with no rows "
      "or no width: %u x %u", h->n_tokens, h->dim);
  return FALSE;
too_big:
  g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "token packet of %u x %u "
      "floats is larger than the %u MiB limit", h->n_tokens, h->dim,
      NPU_TOKEN_WIRE_MAX_PAYLOAD >> 20);
  return FALSE;
bad_grid:
  g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "token packet's grid %u x %u "
      "is not its %u tokens", h->grid_width, h->grid_height, h->n_tokens);
  return FALSE;
bad_size:
  g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "token packet's payload size "
      "%" G_GUINT64_FORMAT " is not %u x %u float32 values", h->payload_size,
      h->n_tokens, h->dim);
  return FALSE;
}

/* The payload: its size, and finite values only (a NaN or Inf would not
 * crash the decoder but would make every later answer garbage) */
gboolean
npu_token_wire_check_payload (const NpuTokenWireHeader * h,
    const guint8 * data, gsize size, GError ** error)
{
  gsize i;

  if (size != h->payload_size) {
    g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "truncated token packet: "
        "%" G_GSIZE_FORMAT " payload bytes of %" G_GUINT64_FORMAT, size,
        h->payload_size);
    return FALSE;
  }
  for (i = 0; i < size; i += 4) {
    guint32 u = npu_load_le32 (data + i);
    gfloat f;

    memcpy (&f, &u, 4);
    if (!isfinite (f)) {
      g_set_error (error, NPU_TOKEN_WIRE_ERROR, 0, "token packet holds a "
          "non-finite value at row %" G_GSIZE_FORMAT ", column %"
          G_GSIZE_FORMAT, i / 4 / h->dim, i / 4 % h->dim);
      return FALSE;
    }
  }
  return TRUE;
}
