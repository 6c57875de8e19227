/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: the rules of CPU access to NPU memory
 *
 * How long a CPU reader waits for a producer's fence, and the cache
 * maintenance that brackets CPU access to a dma-buf.  Kept below the
 * allocator so that it depends on nothing else in the library.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstnpucpuaccess.h"
#include "gstnpuprivate.h"

#include <errno.h>
#include <sys/ioctl.h>
#include <linux/dma-buf.h>

/* Long enough for the slowest honest producer: a 30 s chunk through a
 * Whisper-base-size encoder took over 10 s (the old default) on a loaded
 * 2-core machine, and a sink's map then failed.  Still a bound, so a
 * fence that never signals ends in an error, not a hang. */
#define DEFAULT_FENCE_TIMEOUT_MS 60000

/**
 * gst_npu_fence_timeout_us:
 *
 * How long gst-npu waits for a producer's fence before it gives up with an
 * error instead of hanging: GST_NPU_FENCE_TIMEOUT_MS from the environment
 * (read each call, so tests may change it), default 60000 ms.  Mapping NPU
 * memory and npullm's wait for its tokens use it.
 *
 * Returns: the timeout in microseconds
 */
gint64
gst_npu_fence_timeout_us (void)
{
  const gchar *env = g_getenv ("GST_NPU_FENCE_TIMEOUT_MS");
  gint64 ms = env ? g_ascii_strtoll (env, NULL, 10) : 0;

  return (ms > 0 ? ms : DEFAULT_FENCE_TIMEOUT_MS) * 1000;
}

/**
 * gst_npu_dmabuf_sync: (skip)
 * @flags: DMA_BUF_SYNC_START or _END with _READ and/or _WRITE
 *
 * Brackets CPU access to the dma-buf @fd.  Returns %FALSE (errno set) if
 * the kernel refused; an fd that is no dma-buf (memfd, shm) needs no cache
 * maintenance and counts as done.
 */
gboolean
gst_npu_dmabuf_sync (int fd, guint64 flags)
{
  struct dma_buf_sync sync = { flags };

  while (ioctl (fd, DMA_BUF_IOCTL_SYNC, &sync) < 0) {
    if (errno == EINTR || errno == EAGAIN)
      continue;
    return errno == ENOTTY;
  }
  return TRUE;
}
