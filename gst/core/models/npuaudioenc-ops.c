/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the audio encoder built for a device
 *
 * npu_audio_enc_encode()'s graph (npuaudioenc.c) recorded as operations of
 * the seam for one window length: the two convolutions as im2col rows and
 * a product, the positions, the blocks (npuencoder-ops.c) and the
 * projector.  Where the CPU path strides or pairs rows in place, the
 * program gathers them: qwen2a's average of position pairs is a gather of
 * the even and the odd rows and a weighted add; ultravox's SwiGLU over the
 * two halves of each row gathers the halves as rows of their own.
 *
 * GLib only, no GStreamer types.
 */
#include "npuaudioenc-private.h"

#include <string.h>

struct _NpuAudioEncProgram
{
  NpuAudioEnc *enc;
  guint n_frames;
  NpuEncDevBlocks d;
  NpuBuffer *input, *col, *h1, *x, *a, *b, *output;
  NpuOps *ops;
};

/* dst = the rows first, first + step, ... (n of them, of dim) of src */
static gboolean
record_rows (NpuAudioEncProgram * prog, NpuBuffer * src, gsize n_src,
    guint first, guint step, NpuBuffer * dst, gsize n, gsize dim,
    GError ** error)
{
  gint32 *rows = g_new (gint32, n);
  NpuBuffer *idx;
  gboolean ok;
  gsize i;

  for (i = 0; i < n; i++)
    rows[i] = first + i * step;
  idx = npu_enc_dev_index (prog->d.device, rows, n, error);
  g_free (rows);
  if (!idx)
    return FALSE;
  npu_enc_dev_count (&prog->d, 0, (guint64) n * dim * 4, (guint64) n * dim * 4);
  ok = npu_ops_gather_rows (prog->ops, src, 0, n_src, idx, 0, dst, 0, n, dim,
      error);
  /* the operation holds its own reference */
  npu_buffer_unref (idx);
  return ok;
}

/* y (n rows of out) = GELU (conv (im2col rows) + b), as conv_apply() */
static gboolean
record_conv (NpuAudioEncProgram * prog, const Conv * conv, guint in,
    guint out, gsize n, NpuBuffer * y, GError ** error)
{
  NpuEncDevBlocks *d = &prog->d;
  NpuBuffer *w;

  if (conv->mxfp4) {
    if (!npu_enc_record_matmul (d, prog->ops, &conv->m, prog->col, 0, n, y,
            0, error))
      return FALSE;
  } else if (!(w = npu_enc_dev_weight (d, conv->w32, (gsize) out * 3 * in *
              sizeof (float), error)) ||
      !npu_enc_dev_count (d, (guint64) out * 3 * in * 4,
          (guint64) n * 3 * in * 4, (guint64) n * out * 4) ||
      !npu_ops_mul_mat (prog->ops, NPU_OP_WEIGHT_F32, w, 0, out,
          (gsize) 3 * in, prog->col, 0, n, y, 0, error))
    return FALSE;
  return npu_enc_record_bias_act (d, prog->ops, y, 0, n, out, conv->b,
      NPU_ENC_ACT_GELU_ERF, error);
}

static gboolean
record_front (NpuAudioEncProgram * prog, gsize n, GError ** error)
{
  NpuAudioEnc *enc = prog->enc;
  NpuEncDevBlocks *d = &prog->d;
  gsize dim = enc->dim;
  NpuBuffer *pos;

  guint64 nf = prog->n_frames;

  /* each im2col reads its input once and writes 3 taps a row */
  return npu_enc_dev_count (d, 0, nf * enc->n_mels * 4,
      nf * 3 * enc->n_mels * 4) &&
      npu_ops_im2col3 (prog->ops, prog->input, 0, prog->n_frames,
      enc->n_mels, TRUE, 1, prog->col, 0, prog->n_frames, error) &&
      record_conv (prog, &enc->conv1, enc->n_mels, enc->dim, prog->n_frames,
      prog->h1, error) &&
      npu_enc_dev_count (d, 0, nf * dim * 4, (guint64) n * 3 * dim * 4) &&
      npu_ops_im2col3 (prog->ops, prog->h1, 0, prog->n_frames, dim, FALSE, 2,
      prog->col, 0, n, error) &&
      record_conv (prog, &enc->conv2, enc->dim, enc->dim, n, prog->x, error) &&
      (pos = npu_enc_dev_weight (d, enc->pos, (gsize) enc->n_ctx * dim *
          sizeof (float), error)) &&
      /* of the position table, the rows the window uses */
      npu_enc_dev_count (d, (guint64) n * dim * 4, (guint64) n * dim * 4,
      (guint64) n * dim * 4) &&
      npu_ops_add (prog->ops, prog->x, 0, pos, 0, prog->x, 0, n * dim, error)
      && (!enc->pre_ln_w || npu_enc_record_layernorm (d, prog->ops, prog->x,
          0, prog->x, 0, n, dim, enc->blocks.eps, enc->pre_ln_w,
          enc->pre_ln_b, error));
}

/* AvgPool1d (2, 2), the post norm, mm.a.fc */
static gboolean
record_qwen2a (NpuAudioEncProgram * prog, gsize n, GError ** error)
{
  NpuAudioEnc *enc = prog->enc;
  NpuEncDevBlocks *d = &prog->d;
  gsize dim = enc->dim, n_tok = n / 2;

  return record_rows (prog, prog->x, n, 0, 2, prog->a, n_tok, dim, error) &&
      record_rows (prog, prog->x, n, 1, 2, prog->b, n_tok, dim, error) &&
      npu_enc_dev_count (d, 0, (guint64) 2 * n_tok * dim * 4,
      (guint64) n_tok * dim * 4) &&
      npu_ops_add_scaled (prog->ops, prog->a, 0, 0.5f, prog->b, 0, 0.5f,
      prog->a, 0, n_tok * dim, error) &&
      (!enc->post_ln_w || npu_enc_record_layernorm (d, prog->ops, prog->a, 0,
          prog->a, 0, n_tok, dim, enc->blocks.eps, enc->post_ln_w,
          enc->post_ln_b, error)) &&
      npu_enc_record_matmul (d, prog->ops, &enc->fc, prog->a, 0, n_tok,
      prog->output, 0, error) &&
      npu_enc_record_bias_act (d, prog->ops, prog->output, 0, n_tok,
      enc->out_dim, enc->fc_b, NPU_ENC_ACT_NONE, error);
}

/* The post norm, frames stacked (the rows past n are zeros: the device
 * buffer starts zeroed and only rows < n are ever written), norm_pre,
 * mlp.1, SwiGLU of the halves, norm_mid, mlp.2 */
static gboolean
record_ultravox (NpuAudioEncProgram * prog, gsize n, GError ** error)
{
  NpuAudioEnc *enc = prog->enc;
  NpuEncDevBlocks *d = &prog->d;
  gsize dim = enc->dim, s = enc->stack, n_tok = (n + s - 1) / s;
  gsize half = enc->hidden / 2;
  NpuBuffer *pre, *mid;

  return (!enc->post_ln_w || npu_enc_record_layernorm (d, prog->ops, prog->x,
          0, prog->x, 0, n, dim, enc->blocks.eps, enc->post_ln_w,
          enc->post_ln_b, error)) &&
      (pre = npu_enc_dev_weight (d, enc->norm_pre_w, s * dim * sizeof (float),
          error)) &&
      npu_enc_dev_count (d, (guint64) s * dim * 4, (guint64) n_tok * s * dim *
      4, (guint64) n_tok * s * dim * 4) &&
      npu_ops_rms_norm (prog->ops, prog->x, 0, pre, 0, prog->x, 0, s * dim,
      n_tok, ULTRAVOX_RMS_EPS, error) &&
      npu_enc_record_matmul (d, prog->ops, &enc->mlp1, prog->x, 0, n_tok,
      prog->col, 0, error) &&
      /* each row of hidden values is two rows of half: a, then the gate */
      record_rows (prog, prog->col, 2 * n_tok, 0, 2, prog->a, n_tok, half,
      error) &&
      record_rows (prog, prog->col, 2 * n_tok, 1, 2, prog->b, n_tok, half,
      error) &&
      npu_enc_dev_count (d, 0, (guint64) 2 * n_tok * half * 4,
      (guint64) n_tok * half * 4) &&
      npu_ops_silu_mul (prog->ops, prog->b, 0, prog->a, 0, prog->a, 0,
      n_tok * half, error) &&
      (mid = npu_enc_dev_weight (d, enc->norm_mid_w, half * sizeof (float),
          error)) &&
      npu_enc_dev_count (d, (guint64) half * 4, (guint64) n_tok * half * 4,
      (guint64) n_tok * half * 4) &&
      npu_ops_rms_norm (prog->ops, prog->a, 0, mid, 0, prog->a, 0, half,
      n_tok, ULTRAVOX_RMS_EPS, error) &&
      npu_enc_record_matmul (d, prog->ops, &enc->mlp2, prog->a, 0, n_tok,
      prog->output, 0, error);
}

static gboolean
record (NpuAudioEncProgram * prog, GError ** error)
{
  NpuAudioEnc *enc = prog->enc;
  gsize n = prog->n_frames / 2;
  guint il;

  if (!record_front (prog, n, error))
    return FALSE;
  for (il = 0; il < enc->n_layers; il++)
    if (!npu_enc_record_block (&prog->d, prog->ops, &enc->blocks,
            &enc->layers[il], prog->x, 0, n, error))
      return FALSE;
  if (!(enc->projector == NPU_AUDIO_PROJECTOR_QWEN2A ?
          record_qwen2a (prog, n, error) : record_ultravox (prog, n, error)))
    return FALSE;
  npu_enc_count_as_tokens (&prog->d.bytes, (guint64)
      npu_audio_enc_get_n_tokens (enc, prog->n_frames) * enc->out_dim * 4);
  return TRUE;
}

static NpuBuffer *
floats (NpuDevice * device, gsize n, GError ** error)
{
  return npu_buffer_new (device, MAX (n, 1) * sizeof (float), error);
}

NpuAudioEncProgram *
npu_audio_enc_program_new (NpuAudioEnc * enc, NpuDevice * device,
    guint n_frames, GError ** error)
{
  NpuAudioEncProgram *prog;
  gsize d, n, n_tok, col, x, ab;

  g_return_val_if_fail (enc != NULL && device != NULL, NULL);
  if (n_frames == 0 || n_frames % 2 || n_frames > enc->max_frames) {
    g_set_error (error, NPU_VIT_ERROR, NPU_VIT_ERROR_SHAPE,
        "audio encoder: %u mel frames, expected an even number from 2 to %u",
        n_frames, enc->max_frames);
    return NULL;
  }
  d = enc->dim;
  n = n_frames / 2;
  n_tok = npu_audio_enc_get_n_tokens (enc, n_frames);
  /* im2col rows of either convolution; ultravox's mlp.1 output too */
  col = MAX ((gsize) n_frames * 3 * enc->n_mels, n * 3 * d);
  if (enc->projector == NPU_AUDIO_PROJECTOR_ULTRAVOX)
    col = MAX (col, n_tok * enc->hidden);
  x = MAX (n, n_tok * enc->stack) * d;
  ab = MAX (n_tok * d, n_tok * (enc->hidden / 2));

  prog = g_new0 (NpuAudioEncProgram, 1);
  prog->enc = enc;
  prog->n_frames = n_frames;
  prog->ops = npu_ops_new (device);
  if (!npu_enc_dev_blocks_init (&prog->d, device, &enc->blocks, error) ||
      !(prog->input = floats (device, (gsize) enc->n_mels * n_frames,
              error)) || !(prog->col = floats (device, col, error)) ||
      !(prog->h1 = floats (device, (gsize) n_frames * d, error)) ||
      !(prog->x = floats (device, x, error)) ||
      !(prog->a = floats (device, ab, error)) ||
      !(prog->b = floats (device, ab, error)) ||
      !(prog->output = floats (device, n_tok * enc->out_dim, error)) ||
      !record (prog, error)) {
    g_prefix_error (error, "audio encoder on %s: ",
        npu_device_get_name (device));
    npu_audio_enc_program_free (prog);
    return NULL;
  }
  return prog;
}

void
npu_audio_enc_program_free (NpuAudioEncProgram * prog)
{
  if (!prog)
    return;
  /* the operations first: they hold references on the buffers */
  npu_ops_free (prog->ops);
  g_clear_pointer (&prog->input, npu_buffer_unref);
  g_clear_pointer (&prog->col, npu_buffer_unref);
  g_clear_pointer (&prog->h1, npu_buffer_unref);
  g_clear_pointer (&prog->x, npu_buffer_unref);
  g_clear_pointer (&prog->a, npu_buffer_unref);
  g_clear_pointer (&prog->b, npu_buffer_unref);
  g_clear_pointer (&prog->output, npu_buffer_unref);
  npu_enc_dev_blocks_clear (&prog->d);
  g_free (prog);
}

NpuBuffer *
npu_audio_enc_program_get_input (NpuAudioEncProgram * prog)
{
  return prog->input;
}

NpuBuffer *
npu_audio_enc_program_get_output (NpuAudioEncProgram * prog)
{
  return prog->output;
}

NpuFence *
npu_audio_enc_program_submit (NpuAudioEncProgram * prog, NpuQueue * queue,
    NpuFence * const *in_fences, guint n_in_fences)
{
  return npu_ops_submit (prog->ops, queue, in_fences, n_in_fences);
}

void
npu_audio_enc_program_get_bytes (NpuAudioEncProgram * prog, NpuBytes * bytes)
{
  g_return_if_fail (prog != NULL && bytes != NULL);

  *bytes = prog->d.bytes;
}

gsize
npu_audio_enc_program_get_bytes_copied (NpuAudioEncProgram * prog)
{
  return prog->d.bytes_copied;
}
