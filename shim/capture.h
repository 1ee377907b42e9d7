/* Stream capture as the shim sees it (DESIGN.md "Stream capture and graphs"): which captures are
 * live, in which mode, and each thread's capture interaction mode, following cuda.h's doc of
 * cuThreadExchangeStreamCaptureMode. Thread-safe; atomics and one table. */
#ifndef CUSHIM_CAPTURE_H
#define CUSHIM_CAPTURE_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Captures begun and not yet ended, process-wide. */
extern _Atomic int capture_live;

/* True while any stream of the process is capturing (begun, not yet ended). One load. */
static inline bool capture_any_live(void)
{
    return __builtin_expect(atomic_load_explicit(&capture_live, memory_order_relaxed) > 0, 0);
}

/* True if `stream` is capturing. `per_thread`: the call came through a _ptsz variant (a NULL
 * stream then means the per-thread default stream). One driver query at most, and none when no
 * capture is live. */
bool capture_stream_query(CUstream stream, bool per_thread);
static inline bool capture_stream_is_capturing(CUstream stream, bool per_thread)
{
    return capture_any_live() && capture_stream_query(stream, per_thread);
}

/* cuda.h, cuThreadExchangeStreamCaptureMode: true if the calling thread is prohibited from
 * potentially unsafe API calls (cuMemAlloc, cuMemHostAlloc, ...) right now. */
bool capture_thread_prohibited(void);

/* Book-keeping after a successful begin / end of capture on `stream`. capture_ended returns the
 * bytes allocated (outside graph nodes) while that capture was live. */
void capture_begun(CUstream stream, bool per_thread, CUstreamCaptureMode mode);
uint64_t capture_ended(CUstream stream, bool per_thread);
/* Every capture of a context that was torn down (cuCtxDestroy, primary context reset) is over. */
void capture_context_gone(uint64_t ctx);
/* An allocation of `bytes` made while a capture is live: credited to the calling thread's own
 * capture, else to the one begun last. */
void capture_note_bytes(uint64_t bytes);
/* After a successful cuThreadExchangeStreamCaptureMode: the thread's mode is now `mode`. */
void capture_thread_mode_set(CUstreamCaptureMode mode);

#endif
