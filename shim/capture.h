/* Stream capture as the shim sees it (DESIGN.md "Stream capture and graphs"): which captures are
 * live, on which context, and which live capture an allocation made meanwhile is credited to.
 * Thread-safe; atomics and one table. While any capture is live the shim moves no allocation to
 * host memory; while a capture that prohibits potentially unsafe calls is live or beginning it
 * makes none of its own (capture_unsafe_begin). */
#ifndef CUSHIM_CAPTURE_H
#define CUSHIM_CAPTURE_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shim/gate.h"

/* True while any stream of the process is capturing (begun, not yet ended; gate.h). One load. */
static inline bool capture_any_live(void)
{
    return __builtin_expect(gate_captures() != 0, 0);
}

/* Live GLOBAL-mode captures, counted from just before their begin (capture_begin_announce) until
 * they end, and live THREAD_LOCAL-mode ones. cuda.h cuThreadExchangeStreamCaptureMode: a GLOBAL
 * capture prohibits potentially unsafe calls in every thread (of the default mode, which the shim
 * assumes), a THREAD_LOCAL one in the thread that began it; a RELAXED one prohibits nothing. */
extern SHIM_HIDDEN _Atomic int capture_global;
extern SHIM_HIDDEN _Atomic int capture_thread_local;
/* The shim's own potentially unsafe calls in flight (capture_unsafe_begin/end). */
extern SHIM_HIDDEN _Atomic int capture_unsafe_inflight;

/* Whether the calling thread began a THREAD_LOCAL capture that is still live (a table scan). */
bool capture_own_strict_live(void);

/* Whether a potentially unsafe call made by the calling thread now would be one a live capture
 * prohibits. One load when no capture is live. */
static inline bool capture_prohibits_here(void)
{
    return atomic_load_explicit(&capture_global, memory_order_seq_cst) != 0 ||
           (atomic_load_explicit(&capture_thread_local, memory_order_relaxed) != 0 &&
            capture_own_strict_live());
}

/* Around a call the shim makes on its own account that a capture may prohibit (cuMemHostAlloc,
 * cuMemFreeHost of offload's pinned blocks, an event query): false, and nothing to end, while such
 * a capture is live or a GLOBAL one is beginning; else the call may be made, then
 * capture_unsafe_end. A GLOBAL capture's begin waits for those in flight (capture_begin_announce),
 * so none overlaps it: the check and the call are one step as the capture sees it. Lock-free:
 * seq_cst increment, then load, on both sides. A section holds one driver call that does not wait
 * on the program's work (but for offload's cache: cuCtxSynchronize, made only with no capture
 * live, where the program's own free would have synchronized; and a cudaFreeAsync of offloaded
 * memory that could not be deferred: cuStreamSynchronize of its stream; a GLOBAL capture
 * beginning then waits for either, 5 s at most), with thread cancellation off (a cancelled thread must not leave one
 * open). Not on a hot path. */
bool capture_unsafe_begin(void);
void capture_unsafe_end(void);

/* Just before the program begins a capture in `mode`: any capture counts as live from here (the
 * stream is capturing inside the driver's call), a GLOBAL one is counted, then the shim's
 * unsafe calls in flight are waited out (single driver calls; at most 5 s, then said once and
 * not waited for: a stuck call must not hang the program). capture_begin_done after
 * the begin, with its result, records it (or takes the count back). */
void capture_begin_announce(CUstreamCaptureMode mode);
void capture_begin_done(CUresult r, CUstream stream, bool per_thread, CUstreamCaptureMode mode);

/* True if `stream` is capturing. `per_thread`: the call came through a _ptsz variant (a NULL
 * stream then means the per-thread default stream). One driver query at most, and none when no
 * capture is live. */
bool capture_stream_query(CUstream stream, bool per_thread);
static inline bool capture_stream_is_capturing(CUstream stream, bool per_thread)
{
    return capture_any_live() && capture_stream_query(stream, per_thread);
}

/* Whether the allocation at dptr, just made on `stream` by a stream-ordered call that began with
 * no capture of that stream seen, is a graph node of a capture begun on the stream during the
 * call (by another thread): true when the stream is capturing and a memory-allocation node among
 * its capture's last nodes (cuStreamGetCaptureInfo_v2's dependencies) has address dptr. False
 * otherwise, also when the driver will not say (the allocation is then memory, as before).
 * `per_thread`: as capture_stream_query. Callers ask only when a capture is live
 * (capture_any_live). A few driver calls, none a capture prohibits; cold. Thread-safe. */
bool capture_made_node(CUstream stream, bool per_thread, CUdeviceptr dptr);

/* Book-keeping after a successful end of capture on `stream` (a begin: capture_begin_done). The
 * capture belongs to the stream's context (cuStreamGetCtx), whichever context is current.
 * capture_ended returns the bytes allocated (outside graph nodes) while that capture was live, and
 * the device of its stream in *device (-1 if unknown). */
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
