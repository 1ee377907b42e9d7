/* Stream capture as the shim sees it (DESIGN.md "Stream capture and graphs"): which captures are
 * live, on which context, and which live capture an allocation made meanwhile is credited to.
 * Thread-safe; atomics and one table. The shim never refuses or redirects on the strength of a
 * capture's mode: while any capture is live it adds no potentially unsafe call at all. */
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

/* Book-keeping after a successful begin / end of capture on `stream`. The capture belongs to the
 * stream's context (cuStreamGetCtx), whichever context is current. capture_ended returns the bytes
 * allocated (outside graph nodes) while that capture was live, and the device of its stream in
 * *device (-1 if unknown). */
void capture_begun(CUstream stream, bool per_thread, CUstreamCaptureMode mode);
uint64_t capture_ended(CUstream stream, bool per_thread, int *device);
/* Every capture of a context that was torn down (cuCtxDestroy, primary context reset) is over. */
void capture_context_gone(uint64_t ctx);
/* An allocation of `bytes` made while a capture is live: credited to one live capture, the calling
 * thread's own innermost (the live one it began last), else the live one begun last in the
 * process. */
void capture_note_bytes(uint64_t bytes);
/* In a child after fork(): no capture is live there (the table itself is emptied by the caller). */
void capture_after_fork_child(void);

#endif
