/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: one view of a model file, GGUF or safetensors */
#include "npumodelfile.h"
#include "npuquants.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

struct _NpuModelFile
{
  NpuModelFormat format;
  NpuGguf *gguf;
  NpuSafetensors *st;
  GArray *tensors;              /* NpuModelTensor */
  GPtrArray *names;             /* names we own (MXFP4 pair bases) */
  gchar *architecture;
};

static const gchar *
gguf_type_name (guint32 type)
{
  switch (type) {
    case NPU_TENSOR_TYPE_F32:
      return "f32";
    case NPU_TENSOR_TYPE_F16:
      return "f16";
    case NPU_TENSOR_TYPE_BF16:
      return "bf16";
    case NPU_TENSOR_TYPE_Q8_0:
      return "q8_0";
    case NPU_TENSOR_TYPE_MXFP4:
      return "mxfp4";
    default:
      return npu_ggml_type_name (type);
  }
}

static gboolean
open_gguf (NpuModelFile * file, const gchar * path, GError ** error)
{
  guint i, n;

  file->gguf = npu_gguf_open (path, error);
  if (!file->gguf)
    return FALSE;
  n = npu_gguf_n_tensors (file->gguf);
  for (i = 0; i < n; i++) {
    const NpuGgufTensor *g = npu_gguf_get_tensor (file->gguf, i);
    NpuModelTensor t = { 0, };
    guint d;

    t.name = g->name;
    t.n_dims = g->n_dims;
    for (d = 0; d < 4; d++)
      t.ne[d] = d < g->n_dims ? g->ne[d] : 1;
    t.type = g->type;
    t.type_name = gguf_type_name (g->type);
    t.offset = g->offset;
    t.n_bytes = g->n_bytes;
    t.data = g->data;
    g_array_append_val (file->tensors, t);
  }
  file->architecture = g_strdup (npu_gguf_get_string (file->gguf,
          "general.architecture", NULL, NULL));
  return TRUE;
}

static gint
compare_offsets (gconstpointer a, gconstpointer b)
{
  const NpuModelTensor *ta = a, *tb = b;

  return ta->offset < tb->offset ? -1 : ta->offset > tb->offset;
}

static gboolean
open_safetensors (NpuModelFile * file, const gchar * path, GError ** error)
{
  GHashTable *paired;
  guint i, n;

  file->st = npu_safetensors_open (path, error);
  if (!file->st)
    return FALSE;
  paired = g_hash_table_new (g_str_hash, g_str_equal);
  n = npu_safetensors_n_tensors (file->st);
  for (i = 0; i < n; i++) {
    const NpuSafetensorsTensor *s = npu_safetensors_get_tensor (file->st, i);
    const NpuSafetensorsTensor *blocks, *scales;
    NpuModelTensor t = { 0, };
    guint d;

    if (g_hash_table_contains (paired, s->name))
      continue;
    if (s->n_dims > 4) {
      g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
          "%s: tensor '%s' has %u dimensions, at most 4 are supported",
          path, s->name, s->n_dims);
      g_hash_table_unref (paired);
      return FALSE;
    }

    if (g_str_has_suffix (s->name, ".blocks")) {
      gchar *base = g_strndup (s->name, strlen (s->name) - 7);
      GError *err = NULL;

      if (npu_safetensors_find_mxfp4 (file->st, base, &blocks, &scales, &err)) {
        g_ptr_array_add (file->names, base);
        g_hash_table_add (paired, (gpointer) blocks->name);
        g_hash_table_add (paired, (gpointer) scales->name);
        t.name = base;
        /* [..., n_blocks, 16] -> ne = [n_blocks * 32, ...reversed] */
        t.n_dims = blocks->n_dims - 1;
        t.ne[0] = blocks->shape[blocks->n_dims - 2] * 32;
        for (d = 1; d < 4; d++)
          t.ne[d] = d < t.n_dims ? blocks->shape[t.n_dims - 1 - d] : 1;
        t.type = NPU_TENSOR_TYPE_MXFP4;
        t.type_name = "mxfp4";
        t.offset = blocks->offset;
        t.n_bytes = blocks->n_bytes;
        t.data = blocks->data;
        t.needs_repack = TRUE;
        t.scales = scales->data;
        t.scales_offset = scales->offset;
        g_array_append_val (file->tensors, t);
        continue;
      }
      g_free (base);
      if (!g_error_matches (err, NPU_SAFETENSORS_ERROR,
              NPU_SAFETENSORS_ERROR_NOT_FOUND)) {
        g_propagate_error (error, err);
        g_hash_table_unref (paired);
        return FALSE;
      }
      g_clear_error (&err);
    }

    t.name = s->name;
    t.n_dims = s->n_dims;
    for (d = 0; d < 4; d++)
      t.ne[d] = d < s->n_dims ? s->shape[s->n_dims - 1 - d] : 1;
    t.type = npu_safetensors_dtype_ggml_type (s->dtype);
    t.type_name = npu_safetensors_dtype_name (s->dtype);
    t.offset = s->offset;
    t.n_bytes = s->n_bytes;
    t.data = s->data;
    g_array_append_val (file->tensors, t);
  }
  g_hash_table_unref (paired);

  /* safetensors' JSON order means nothing; the data order is the file's. */
  g_array_sort (file->tensors, compare_offsets);
  /* Lower-case type names like GGUF's, for one vocabulary in metas. */
  for (i = 0; i < file->tensors->len; i++) {
    NpuModelTensor *t = &g_array_index (file->tensors, NpuModelTensor, i);
    gchar *lower = g_ascii_strdown (t->type_name, -1);

    g_ptr_array_add (file->names, lower);
    t->type_name = lower;
  }
  return TRUE;
}

/**
 * npu_model_file_open:
 *
 * Opens a GGUF file (by its magic) or else a safetensors file, mapping it
 * read-only and validating it completely.
 *
 * Returns: (transfer full): the file, or %NULL with @error naming the file
 * and what is wrong.
 */
NpuModelFile *
npu_model_file_open (const gchar * path, GError ** error)
{
  NpuModelFile *file = g_new0 (NpuModelFile, 1);
  /* GGUF's magic, or safetensors' 8-byte header length and the '{' its
   * JSON header must begin with */
  guint8 head[9] = { 0, };
  gsize n_head;
  FILE *f;
  gboolean ok;

  f = fopen (path, "rb");
  if (!f) {
    g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (errno),
        "%s: cannot open: %s", path, g_strerror (errno));
    g_free (file);
    return NULL;
  }
  n_head = fread (head, 1, sizeof (head), f);
  fclose (f);
  /* Anything else (a WAV, a text file) would otherwise be read as a
   * safetensors file with an absurd header length, and the message would
   * say only that. */
  if (memcmp (head, "GGUF", 4) && (n_head < sizeof (head) || head[8] != '{')) {
    gchar *base = g_path_get_basename (path);

    g_set_error (error, NPU_SAFETENSORS_ERROR, NPU_SAFETENSORS_ERROR_FORMAT,
        "%s: neither GGUF (it does not start with \"GGUF\") nor "
        "safetensors (no JSON header after the first 8 bytes)", base);
    g_free (base);
    g_free (file);
    return NULL;
  }

  file->tensors = g_array_new (FALSE, TRUE, sizeof (NpuModelTensor));
  file->names = g_ptr_array_new_with_free_func (g_free);
  if (!memcmp (head, "GGUF", 4)) {
    file->format = NPU_MODEL_FORMAT_GGUF;
    ok = open_gguf (file, path, error);
  } else {
    file->format = NPU_MODEL_FORMAT_SAFETENSORS;
    ok = open_safetensors (file, path, error);
  }
  if (!ok) {
    npu_model_file_free (file);
    return NULL;
  }
  return file;
}

void
npu_model_file_free (NpuModelFile * file)
{
  if (!file)
    return;
  g_array_unref (file->tensors);
  g_ptr_array_unref (file->names);
  if (file->gguf)
    npu_gguf_free (file->gguf);
  if (file->st)
    npu_safetensors_free (file->st);
  g_free (file->architecture);
  g_free (file);
}

NpuModelFormat
npu_model_file_get_format (const NpuModelFile * file)
{
  return file->format;
}

const gchar *
npu_model_file_get_format_name (const NpuModelFile * file)
{
  return file->format == NPU_MODEL_FORMAT_GGUF ? "gguf" : "safetensors";
}

int
npu_model_file_get_fd (const NpuModelFile * file)
{
  return file->gguf ? npu_gguf_get_fd (file->gguf) :
      npu_safetensors_get_fd (file->st);
}

gsize
npu_model_file_get_size (const NpuModelFile * file)
{
  return file->gguf ? npu_gguf_get_size (file->gguf) :
      npu_safetensors_get_size (file->st);
}

/**
 * npu_model_file_get_architecture:
 *
 * Returns: (nullable): GGUF's general.architecture, or safetensors'
 * __metadata__ "architecture" if present.
 */
const gchar *
npu_model_file_get_architecture (const NpuModelFile * file)
{
  if (file->architecture)
    return file->architecture;
  if (file->st)
    return npu_safetensors_get_metadata (file->st, "architecture");
  return NULL;
}

NpuGguf *
npu_model_file_get_gguf (const NpuModelFile * file)
{
  return file->gguf;
}

guint
npu_model_file_n_tensors (const NpuModelFile * file)
{
  return file->tensors->len;
}

const NpuModelTensor *
npu_model_file_get_tensor (const NpuModelFile * file, guint i)
{
  g_return_val_if_fail (i < file->tensors->len, NULL);

  return &g_array_index (file->tensors, NpuModelTensor, i);
}

guint64
npu_model_tensor_n_elements (const NpuModelTensor * t)
{
  return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/**
 * npu_model_tensor_can_convert:
 *
 * Returns: whether @t can become MXFP4: F32, F16, BF16 or Q8_0, two or more
 * dimensions, rows a multiple of 32 long.
 */
gboolean
npu_model_tensor_can_convert (const NpuModelTensor * t)
{
  switch (t->type) {
    case NPU_TENSOR_TYPE_F32:
    case NPU_TENSOR_TYPE_F16:
    case NPU_TENSOR_TYPE_BF16:
    case NPU_TENSOR_TYPE_Q8_0:
      break;
    default:
      return FALSE;
  }
  return t->n_dims >= 2 && t->ne[0] % NPU_MXFP4_BLOCK_SIZE == 0;
}

/* Bytes of @t in MXFP4: 17 per 32 elements. */
gsize
npu_model_tensor_mxfp4_bytes (const NpuModelTensor * t)
{
  return npu_model_tensor_n_elements (t) / NPU_MXFP4_BLOCK_SIZE *
      sizeof (NpuBlockMxfp4);
}

/**
 * npu_model_tensor_convert_rows:
 * @row0: first row (rows are ne[0] elements, all higher dims flattened)
 * @row1: one past the last row
 * @dst: where row @row0's blocks go
 *
 * Quantises rows of a convertible tensor to MXFP4 by the OCP rules.
 */
void
npu_model_tensor_convert_rows (const NpuModelTensor * t, guint64 row0,
    guint64 row1, NpuBlockMxfp4 * dst)
{
  gsize n = (row1 - row0) * t->ne[0];
  gsize first = row0 * t->ne[0];

  switch (t->type) {
    case NPU_TENSOR_TYPE_F32:
      npu_mxfp4_quantize_f32 ((const float *) t->data + first, dst, n);
      break;
    case NPU_TENSOR_TYPE_F16:
      npu_mxfp4_quantize_f16 ((const guint16 *) t->data + first, dst, n);
      break;
    case NPU_TENSOR_TYPE_BF16:
      npu_mxfp4_quantize_bf16 ((const guint16 *) t->data + first, dst, n);
      break;
    case NPU_TENSOR_TYPE_Q8_0:
      npu_mxfp4_quantize_q8_0 (t->data + first / NPU_MXFP4_BLOCK_SIZE *
          NPU_Q8_0_BLOCK_BYTES, dst, n);
      break;
    default:
      g_assert_not_reached ();
  }
}

void
npu_model_tensor_conversion_error (const NpuModelTensor * t, guint64 row0,
    guint64 row1, const NpuBlockMxfp4 * dst, double *err2, double *ref2)
{
  gsize k = t->ne[0], row_bytes = npu_quants_row_bytes (t->type, k), j;
  float *stored = g_new (float, k), *mx = g_new (float, k);
  guint64 r;

  g_return_if_fail (row_bytes > 0);
  for (r = row0; r < row1; r++) {
    npu_quants_dequantize_row (t->type, t->data + r * row_bytes, stored, k);
    npu_mxfp4_dequantize (dst + (r - row0) * (k / NPU_MXFP4_BLOCK_SIZE), mx, k);
    for (j = 0; j < k; j++) {
      double d = (double) mx[j] - stored[j];

      *err2 += d * d;
      *ref2 += (double) stored[j] * stored[j];
    }
  }
  g_free (mx);
  g_free (stored);
}

/**
 * npu_model_tensor_repack_mxfp4:
 * @block0: first block (32 elements each, in row order)
 *
 * Rewrites gpt-oss blocks [@block0, @block1) (byte k: elements 2k low, 2k+1
 * high; scales apart) into ggml's block_mxfp4 (qs[j]: element j low, j+16
 * high; scale in front).  The values are unchanged.
 */
void
npu_model_tensor_repack_mxfp4 (const NpuModelTensor * t, guint64 block0,
    guint64 block1, NpuBlockMxfp4 * dst)
{
  guint64 b;

  g_return_if_fail (t->needs_repack);

  for (b = block0; b < block1; b++, dst++)
    npu_mxfp4_block_from_gpt_oss (t->data + b * 16, t->scales[b], dst);
}

static void
release_range (const guint8 * data, gsize n_bytes)
{
  gsize page = sysconf (_SC_PAGESIZE);
  guintptr start = GPOINTER_TO_SIZE (data), end = start + n_bytes;

  /* Only whole pages inside the range: a neighbour may still be read. */
  start = (start + page - 1) & ~(guintptr) (page - 1);
  end &= ~(guintptr) (page - 1);
  if (end > start)
    madvise (GSIZE_TO_POINTER (start), end - start, MADV_DONTNEED);
}

/**
 * npu_model_tensor_release_source:
 *
 * Once @t has been converted, drops its source pages from this process's
 * mapping of the file (they stay in the page cache, reclaimable), so a
 * converted model costs its MXFP4 bytes in resident memory, not those plus
 * the source's.  The data can still be read: the pages fault back in.
 */
void
npu_model_tensor_release_source (const NpuModelTensor * t)
{
  release_range (t->data, t->n_bytes);
  if (t->needs_repack)
    release_range (t->scales, npu_model_tensor_n_elements (t) /
        NPU_MXFP4_BLOCK_SIZE);
}
