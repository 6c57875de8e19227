/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: NPU_API, the mark of the compute core's public functions
 *
 * libgstnpu-1.0 is built with hidden symbols: only what its installed
 * headers declare with NPU_API (the core) or GST_NPU_API (the GStreamer
 * side) is exported; the kernels' own entry points stay inside.
 */
#ifndef __NPU_API_H__
#define __NPU_API_H__

#if defined(__GNUC__) || defined(__clang__)
#define NPU_API extern __attribute__ ((visibility ("default")))
#else
#define NPU_API extern
#endif

#endif /* __NPU_API_H__ */
