/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: what a token tensor stands for
 *
 * npuvisiontok and npuaudiotok put one on every token buffer: which
 * modality the tokens come from, their grid (a vision encoder's patch grid
 * after the projector; time steps for audio), and the timestamps of the
 * media they were made from, so npullm can order media from several pads
 * and stamp its answer with the PTS of what it is about.
 */
#ifndef __GST_NPU_TOKENS_META_H__
#define __GST_NPU_TOKENS_META_H__

#include <gst/gst.h>
#include <npu/gstnpuapi.h>

G_BEGIN_DECLS

typedef enum
{
  GST_NPU_MODALITY_VISION,
  GST_NPU_MODALITY_AUDIO,
  GST_NPU_MODALITY_TEXT,
} GstNpuModality;

#define GST_NPU_TOKENS_META_API_TYPE (gst_npu_tokens_meta_api_get_type ())
#define GST_NPU_TOKENS_META_INFO (gst_npu_tokens_meta_get_info ())

typedef struct _GstNpuTokensMeta GstNpuTokensMeta;

/**
 * GstNpuTokensMeta:
 * @modality: where the tokens come from
 * @n_tokens: rows of the tensor
 * @dim: width of a row (the language model's embedding size)
 * @grid_width: tokens per row of the grid (vision) or @n_tokens (audio)
 * @grid_height: rows of the grid (vision) or 1
 * @source_pts: PTS of the frame or audio the tokens were made from
 * @source_duration: its duration
 */
struct _GstNpuTokensMeta
{
  GstMeta meta;

  GstNpuModality modality;
  guint n_tokens;
  guint dim;
  guint grid_width;
  guint grid_height;
  GstClockTime source_pts;
  GstClockTime source_duration;
};

GST_NPU_API
GType gst_npu_tokens_meta_api_get_type (void);
GST_NPU_API
const GstMetaInfo *gst_npu_tokens_meta_get_info (void);

#define gst_buffer_get_npu_tokens_meta(b) \
  ((GstNpuTokensMeta *) gst_buffer_get_meta ((b), GST_NPU_TOKENS_META_API_TYPE))

GST_NPU_API
GstNpuTokensMeta *gst_buffer_add_npu_tokens_meta (GstBuffer * buffer,
    GstNpuModality modality, guint n_tokens, guint dim, guint grid_width,
    guint grid_height, GstClockTime source_pts,
    GstClockTime source_duration);

G_END_DECLS

#endif /* __GST_NPU_TOKENS_META_H__ */
