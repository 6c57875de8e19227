/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gst-npu: decode paced to a target rate with the fewest threads
 *
 * A decoder that only needs, say, 10 tokens a second (a caption read by a
 * person) wastes energy decoding at full speed on every core.  The pacer
 * first times a few tokens at each thread count from 1 up to the most
 * allowed, then keeps the fewest threads whose mean token time holds the
 * period (1 / rate), or the fastest count when none does; after each token
 * it says how long to sleep until the next token is due, so that the cores
 * are idle meanwhile.  Deadlines advance by one period from the last, so
 * that short sleeps do not add up to drift; a token that came late starts
 * the deadlines again from its end rather than rushing to catch up.
 *
 * The caller passes the clock's readings in: the logic is tested with an
 * injected clock.  This is compute core: GLib only, no GStreamer types.
 */
#ifndef __NPU_PACE_H__
#define __NPU_PACE_H__

#include <glib.h>
#include "core/device/npuapi.h"

G_BEGIN_DECLS

typedef struct _NpuPace NpuPace;

NPU_API
NpuPace *npu_pace_new (gdouble tokens_per_second, guint max_threads,
    guint samples_per_count);
NPU_API
void npu_pace_free (NpuPace * pace);
NPU_API
guint npu_pace_get_threads (NpuPace * pace);
NPU_API
gboolean npu_pace_is_calibrated (NpuPace * pace);
/* A new run of tokens (an answer) begins: no deadline carried over */
NPU_API
void npu_pace_restart (NpuPace * pace);
NPU_API
gint64 npu_pace_token_done (NpuPace * pace, gint64 start_ns, gint64 end_ns);

G_END_DECLS
#endif /* __NPU_PACE_H__ */
