/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu tests: what the vision and audio encoders' tests share
 *
 * Both encoders read an mmproj through an NpuTensorLookup and fail with
 * NPU_VIT_ERROR on a bad one; their tests break a good file the same ways
 * (a tensor hidden, halved in its second dimension or retyped; a key or
 * string patched in a copy of the file) and check the error by its code
 * and message.
 */
#ifndef __NPU_ENCODER_TEST_H__
#define __NPU_ENCODER_TEST_H__

#include <glib.h>
#include <core/formats/npugguf.h>
#include <core/device/nputensorview.h>

G_BEGIN_DECLS

/* The tensors of @gguf, with the one named @hide absent, the one named
 * @reshape halved in its second dimension and the one named @retype
 * claimed to be q4_0 (each NULL: none) */
typedef struct
{
  const NpuGguf *gguf;
  const gchar *hide;
  const gchar *reshape;
  const gchar *retype;
} NpuTestLookup;

/* An NpuTensorLookup over an NpuTestLookup (@user_data) */
gboolean npu_test_lookup (const gchar * name, NpuTensorView * out,
    gpointer user_data);
/* @out from @t, then @lk's reshape or retype when @name is theirs: for a
 * lookup that finds tensors its own way */
void npu_test_lookup_fill (const NpuTestLookup * lk, const gchar * name,
    const NpuGgufTensor * t, NpuTensorView * out);

/* An encoder's constructor: npu_vit_new(), npu_audio_enc_new() */
typedef gpointer (*NpuTestEncoderNew) (const NpuGguf * gguf,
    NpuTensorLookup lookup, gpointer user_data, GError ** error);

/* @new_encoder on @gguf (through @lookup unless NULL) must fail with
 * NPU_VIT_ERROR / @code and a message that contains @text */
void npu_test_expect_encoder_error (NpuTestEncoderNew new_encoder,
    const NpuGguf * gguf, NpuTensorLookup lookup, gpointer user_data,
    gint code, const gchar * text);
/* A copy of the file @path with occurrence @nth (0: the first) of @from
 * replaced by @to, of the same length: a metadata key or string edited in
 * place.  Free with g_free(). */
guint8 *npu_test_patched_copy (const gchar * path, const gchar * from,
    const gchar * to, guint nth, gsize * size);
/* npu_test_expect_encoder_error() on such a copy */
void npu_test_expect_patched_error (NpuTestEncoderNew new_encoder,
    const gchar * path, const gchar * from, const gchar * to, guint nth,
    gint code, const gchar * text);

G_END_DECLS

#endif /* __NPU_ENCODER_TEST_H__ */
