/* Offload (DESIGN.md "Offload to pinned, device-mapped host memory"): device requests served by
 * cuMemHostAlloc(PORTABLE | DEVICEMAP), whose device address under unified addressing is the host
 * address, so kernels, cuMemcpy and memsets work on it unchanged. The shim owns these ranges:
 * frees of them go to cuMemFreeHost (after the stream's earlier work for cuMemFreeAsync, through
 * an event polled from later calls and at exit), explicit-kind copies touching them are routed
 * through cuMemcpy, cuMemGetAddressRange_v2 answers from the shim's table, IPC handle requests
 * fail cleanly. Thread-safe; never called with a lock held across the driver. */
#ifndef CUSHIM_OFFLOAD_H
#define CUSHIM_OFFLOAD_H

#include "shim/capture.h"
#include "shim/shim.h"

/* Number of live offloaded ranges (0 = every check below is one load). */
extern SHIM_HIDDEN _Atomic uint32_t offload_live;
/* Offload, a budget or spill is configured (fixed at load, init.c). */
extern SHIM_HIDDEN int shim_policy;

/* The policy: should a device request of `bytes` on the calling thread be offloaded now?
 * CUSHIM_OFFLOAD (always, or compile while the phase is compile), at least CUSHIM_OFFLOAD_MIN
 * bytes, and never while any stream of the process is capturing (the shim's own cuMemHostAlloc
 * is a potentially unsafe call; DESIGN.md). 0 for no; else the flags to give offload_alloc:
 * SHIM_F_OFFLOADED, and SHIM_F_COMPILE when the phase this decision read was compile (read once:
 * a change while the host memory is made does not split the decision from the entry's phase; a
 * stress trial). */
unsigned offload_wanted_slow(uint64_t bytes);
static inline unsigned offload_wanted(uint64_t bytes)
{
    return unlikely(shim.cfg.offload != CUSHIM_OFFLOAD_OFF) ? offload_wanted_slow(bytes) : 0;
}

/* Serves a device request from pinned mapped host memory, tracked as kind `offloaded` on `device`,
 * the device the request was for (-1: the current context's; a stream-ordered request names its
 * stream's). `in_ctx`: the context the host memory belongs to (a stream-ordered request's stream's,
 * so that only a teardown of that context frees it, as README Limits says), made current around
 * the allocation when it is not; NULL: the current one. flags: what offload_wanted returned, or
 * SHIM_F_SPILLED when a failure sent it here (its phase is then the one current when its entry is
 * put). Callers take any waiting phase request first (phase_poll). The entry is put and counted
 * as one step against phase changes (phase_offloaded_put). Returns CUDA_SUCCESS with *dptr set, or the host allocation's error
 * (the caller then falls back). */
CUresult offload_alloc(CUdeviceptr *dptr, uint64_t bytes, unsigned flags, int device, CUcontext in_ctx);

/* Frees an offloaded entry already taken out of the table: now (sync), or once the work queued
 * on `stream` so far has finished (async; `pt`: per-thread variant). Counts the free.
 * offload_free returns CUDA_SUCCESS (the block kept in the cache or cuMemFreeHost'd, the free
 * counted) or cuMemFreeHost's error (CUDA_ERROR_NOT_INITIALIZED without it): nothing counted,
 * the range rerouted again, and the caller puts the entry back. offload_free_async returns
 * CUDA_SUCCESS once the free is deferred (counted now) or done; else an error with nothing
 * freed or counted: the driver's answer about a capturing stream
 * (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED while it
 * captures, or when no event could be made and a live capture forbids waiting), or the
 * stream's own error (an invalid handle or context); a failing cuMemFreeHost as offload_free. */
CUresult offload_free(const struct shim_entry *e);
CUresult offload_free_async(const struct shim_entry *e, CUstream stream, bool pt);

/* Releases deferred frees whose stream work has finished (cheap when there are none). */
void offload_poll_slow(void);
static inline void offload_poll(void)
{
    if (unlikely(gate_pending() != 0)) /* deferred frees waiting for their stream */
        offload_poll_slow();
}
/* At exit: waits for every deferred free and releases it. */
void offload_drain(void);

/* If [addr, addr+1) lies in a live offloaded allocation, its base and size. */
bool offload_find(uint64_t addr, uint64_t *base, uint64_t *size);
static inline bool offload_touches(uint64_t addr)
{
    uint64_t b, s;
    return unlikely(atomic_load_explicit(&offload_live, memory_order_relaxed) != 0) &&
           offload_find(addr, &b, &s);
}

/* How the n bytes from addr lie against the offloaded ranges: 0 when addr is in none, 1 when it
 * is in one and the bytes fit inside its requested size, -1 when they run past its end. A copy
 * past the end of a device allocation is refused by the driver; the same copy rerouted to the
 * pinned block would read or write past it, so the callers refuse it (CUDA_ERROR_INVALID_VALUE)
 * instead. With no offloaded range alive, one load. */
static inline int offload_span(uint64_t addr, uint64_t n)
{
    uint64_t b, s;
    if (likely(atomic_load_explicit(&offload_live, memory_order_relaxed) == 0) ||
        !offload_find(addr, &b, &s))
        return 0;
    return n <= s - (addr - b) ? 1 : -1;
}


/* Whether an allocation must take the policy path: offload, budget or spill configured
 * (shim_policy, fixed at load), or a phase request or deferred frees to apply. Three loads. */
static inline bool shim_policy_active(void)
{
    struct cushim_segment *seg = shim.seg;
    return shim_policy | (int)gate_pending() |
           (int)atomic_load_explicit(&seg->control.phase_request, memory_order_relaxed);
}

/* The common case of an allocation wrapper: this thread is outside the shim and the gate is
 * zero (gate.h: the shim is active, no policy is configured, no deferred free waits, no stream of
 * the process is capturing), and no phase request from the CLI waits. Enters the shim
 * (shim_depth = 1) when true; the wrapper then counts with track_alloc_plain / track_free_plain_begin and _end
 * (track.h) and leaves with shim_leave(). Otherwise the wrapper takes its full path, which decides everything
 * again. Two loads besides the thread's depth (the segment is mapped once the gate opens). */
static inline __attribute__((always_inline)) bool shim_enter_plain_alloc(void)
{
    if (unlikely(shim_depth != 0) ||
        unlikely(atomic_load_explicit(&shim_gate, memory_order_acquire) != 0) ||
        unlikely(atomic_load_explicit(&shim.seg->control.phase_request, memory_order_relaxed) != 0))
        return false;
    shim_depth = 1;
    return true;
}

/* The same for a free: captures and phase requests do not matter to it. */
static inline __attribute__((always_inline)) bool shim_enter_plain_free(void)
{
    if (unlikely(shim_depth != 0) ||
        unlikely((atomic_load_explicit(&shim_gate, memory_order_acquire) & ~SHIM_GATE_CAPTURES) != 0))
        return false;
    shim_depth = 1;
    return true;
}

/* Context teardown (context.c): an offloaded range the driver freed with its context (the range
 * at `base` if it is of context `ctx`, the dropped entry's: a newer block another thread was given
 * at that address keeps its own), and then the context's cached blocks and deferred frees, which
 * the driver freed too. */
void offload_range_gone(uint64_t base, uint64_t ctx);
void offload_context_gone(uint64_t ctx);
/* Around a call that may end context ctx (cuCtxDestroy, cuCtxDetach, a primary context's reset
 * or release): from offload_context_closing until offload_context_settled, polls leave alone the
 * deferred frees of its blocks and events, and closing first waits (up to 5 s) for a poll of one
 * already in a driver call (cuda.h cuCtxDestroy: "It is the responsibility of the calling function
 * to ensure that no API call issues using ctx while cuCtxDestroy() is executing"). Else, between the driver's teardown and shim_drop_context, another
 * thread's poll freed a block the driver had freed with the context, and with it a new
 * allocation at the same address (a review). closing returns whether it held anything back
 * (false: none was ever queued, or 0); call settled only then, after shim_drop_context. Any
 * thread; the lock is never held across a driver call. */
bool offload_context_closing(uint64_t ctx);
void offload_context_settled(uint64_t ctx);

/* In a child after fork: forget the parent's ranges and deferred frees. */
void offload_after_fork_child(void);

#endif
