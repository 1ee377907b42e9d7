/* Per-process device budget (CUSHIM_DEVICE_LIMIT): device bytes (device + async + vmm + array,
 * the device total) plus the graph memory pool's reserve (memory the driver holds for the
 * process's graph allocation nodes, last read by graph_pool_sample) plus the stream-ordered pools'
 * idle reserve (their whole reserve less the stream-ordered bytes requested from them: freed
 * memory a pool keeps, and the rest of the chunks it grew by; last read by async_pool_sample) may
 * not pass the limit. Bytes
 * are reserved before the real call (cuMemAlloc, cuMemCreate, stream-ordered requests), so racing
 * threads cannot overshoot, and released when the allocation fails or is freed (account.h); where
 * the size is the driver's (arrays, pitched memory), after a successful call, which the shim
 * undoes when the budget refuses it. A request over the budget that the driver may refuse first
 * for its arguments (cuMemCreate's, a named pool that is gone) is made all the same, and undone
 * if granted. The graph reserve grows at graph launch or upload,
 * which the shim does not refuse: it then leaves less for later allocations and for
 * cuMemGetInfo's free. When no limit is set every check is one load. Thread-safe. */
#ifndef CUSHIM_BUDGET_H
#define CUSHIM_BUDGET_H

#include "shim/shim.h"

extern SHIM_HIDDEN int budget_any;                                  /* some device has a limit */
extern SHIM_HIDDEN _Atomic uint64_t budget_used[CUSHIM_MAX_DEVICES]; /* device bytes counted plus reserved */
extern SHIM_HIDDEN _Atomic uint64_t budget_graph[CUSHIM_MAX_DEVICES]; /* the graph pool's reserve, bytes */
/* The device's stream-ordered pools' idle reserve, bytes: CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
 * summed over its pools less budget_async, as last read (budget_pool_read), plus the bytes freed
 * since, less the bytes requests were served from it since (cuda.h: a pool keeps freed memory until
 * a synchronize finds more than CU_MEMPOOL_ATTR_RELEASE_THRESHOLD bytes reserved; PyTorch's
 * cudaMallocAsync backend sets the threshold to UINT64_MAX). Memory the process holds in no allocation: a cudaMalloc beside a
 * pool that keeps 10 GiB must find the budget 10 GiB fuller; a request from the pool that its
 * reserve serves grows nothing. */
extern SHIM_HIDDEN _Atomic uint64_t budget_pool_idle[CUSHIM_MAX_DEVICES];
/* Events that change the device's idle reserve or its reading, since start (counted only under a
 * budget): a stream-ordered request done or served from the reserve, a free, a served request
 * that failed, a pool created or destroyed. A reading begun before the last of them is not
 * published, and the next decision reads again. */
extern SHIM_HIDDEN _Atomic uint64_t budget_pool_changes[CUSHIM_MAX_DEVICES];
/* The reserve (bytes, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, read just before it left the table)
 * of the device's pools in cuMemPoolDestroy: from before the pool leaves the table (the readings
 * no longer see it) until after its allocations have left budget_async, each reading counts it
 * as reserved (async_pool_sample), so that those allocations are not taken off the other pools'
 * reserve. */
extern SHIM_HIDDEN _Atomic uint64_t budget_pool_buried[CUSHIM_MAX_DEVICES];
/* Of those pools, how many have a reserve that could not be read (the query failed, or a capture
 * was live, when no pool is queried): while any, a reading counts UINT64_MAX reserved (idle
 * counted high, refusing rather than over-granting, for the length of the destroy). */
extern SHIM_HIDDEN _Atomic uint32_t budget_pool_unread[CUSHIM_MAX_DEVICES];
/* The device's stream-ordered bytes in the budget whose calls are done (device pools; in
 * budget_used too, from before the call). The pools' idle reserve is read as what they reserve
 * less these: not less the driver's used, which still holds a cudaFreeAsync's bytes until its
 * stream reaches it while the budget gave them back at the call (the pool keeps them either way);
 * not less requests still in their call, whose growth a reading may not show yet. */
extern SHIM_HIDDEN _Atomic uint64_t budget_async[CUSHIM_MAX_DEVICES];
/* 1: a read of the reserve was skipped during a capture: read again before the budget next decides. */
extern SHIM_HIDDEN _Atomic unsigned char budget_graph_stale[CUSHIM_MAX_DEVICES];
/* Before the budget of `device` decides: reads the graph pool's reserve again if it may have
 * changed since it was read (a graph launched since, on any device: its allocation nodes may draw
 * on this device's pool; or a read skipped during a capture) and no capture is live. The launch
 * path itself does nothing more (budget.c). */
void budget_graph_refresh(int device);
/* The graph pool's reserve of `device` as just read (graph_pool_sample): the budget's until the
 * process launches a graph again. `launches`: budget_graph_launches() taken *before* the
 * driver was asked, so that a launch on another thread during the read counts as unseen. */
void budget_graph_read(int device, uint64_t reserve, uint64_t launches, uint64_t ticket);
/* A reading's place among the device's (taken before the driver is asked, like `launches`): of
 * two readings, the one that began later is kept, whichever ends first. */
uint64_t budget_graph_ticket(int device);
/* In a child after fork(): nothing held, nothing read (its segment's launch counts start at 0),
 * no lock held by a thread of the parent's. */
void budget_after_fork_child(void);
/* A context was torn down (cuCtxDestroy, cudaDeviceReset, the last primary-context release): the
 * graph memory pool and the stream-ordered pools it used may have given their reserve back
 * (nothing the shim launches or frees shows it), so every device's readings are stale: read again
 * before its budget next decides or answers cudaMemGetInfo. Nothing without a limit. */
void budget_context_gone(void);
/* The process's graph launches so far (CUSHIM_DEV_graph_launches summed over the live device
 * records; 0 without a segment): a launch counts on its graph's device but may grow any device's
 * graph pool, so a change anywhere makes every device's reading stale. A count, not bytes.
 * Thread-safe (separate loads: a launch during the sum may be missed, and is seen next time). */
uint64_t budget_graph_launches(void);

/* The stream-ordered pools of `device` as async_pool_sample just read them: `reserved`, their
 * CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT summed; `changes` and `async`: budget_pool_changes and
 * budget_async of the device taken *before* the driver was asked. */
void budget_pool_read(int device, uint64_t reserved, uint64_t changes, uint64_t async);
/* Before the budget of `device` decides: reads the pools again if a stream-ordered allocation or
 * free happened since they were read (a pool grows by whole chunks of the driver's choosing, which
 * only a reading shows), or always when `force` (a request about to be refused while the reserve
 * counts: a synchronize may have released it since); never while a capture is live (the last
 * reading stands until it ends). */
void budget_pool_refresh(int device, bool force);
/* What the budget of `device` holds (budget_used + budget_graph + budget_pool_idle, budget_held's
 * sum) mirrored for the CLI in the device's segment record (CUSHIM_DEV_limit_held): every change
 * of one of the three adds its exact change here (`delta`, wrapping: a decrease is its two's
 * complement), so the mirror takes no lock and needs no order between changes, and equals the
 * sum whenever no change is in flight (a reader between a change and its mirror sees the figure
 * before it). Only for a device with a limit (0 otherwise). Thread-safe; one relaxed add. */
static inline void budget_mirror(int device, uint64_t delta)
{
    struct cushim_segment *seg = shim.seg;
    if (delta && seg && (unsigned)device < CUSHIM_MAX_DEVICES && shim.cfg.device_limit[device])
        atomic_fetch_add_explicit(&seg->devices[device].dev[CUSHIM_DEV_limit_held], delta,
                                  memory_order_relaxed);
}

/* A stream-ordered allocation (freed 0) or free of `freed` bytes on `device` (under a budget):
 * the idle reserve may have changed. Freed bytes go back to their pool, which keeps them until a
 * synchronize finds it above its release threshold: counted idle now (a free leaves what the
 * budget holds as it was), and a refusal reads the pools again first (budget_reserve_limited), so
 * bytes a synchronize released since never refuse a request. */
static inline void budget_pool_changed(int device, uint64_t freed)
{
    if ((unsigned)device >= CUSHIM_MAX_DEVICES)
        return;
    /* The count first: a reading that began before it and publishes after it is dropped
     * (budget_pool_read), so it cannot overwrite the idle bytes added next. */
    atomic_fetch_add_explicit(&budget_pool_changes[device], 1, memory_order_seq_cst);
    if (freed) {
        uint64_t idle = atomic_load_explicit(&budget_pool_idle[device], memory_order_seq_cst), next;
        do
            next = idle + freed < idle ? UINT64_MAX : idle + freed;
        while (!atomic_compare_exchange_weak_explicit(&budget_pool_idle[device], &idle, next,
                                                      memory_order_seq_cst, memory_order_seq_cst));
        budget_mirror(device, next - idle);
    }
}

/* Stream-ordered bytes of `device` enter the pools' figures (a request's call done, its entry kept). */
static inline void budget_async_add(int device, uint64_t bytes)
{
    if ((unsigned)device < CUSHIM_MAX_DEVICES)
        atomic_fetch_add_explicit(&budget_async[device], bytes, memory_order_seq_cst);
}

/* *v -= n, stopping at 0 (never wraps); returns what it took (n, or less at 0). seq_cst: the idle
 * estimate's changes follow their count's bump (budget_pool_read), and a claim given back follows
 * the driver call that used it (budget.c claim_idle), on any CPU. */
static inline uint64_t budget_sub_saturating(_Atomic uint64_t *v, uint64_t n)
{
    uint64_t old = atomic_load_explicit(v, memory_order_seq_cst);
    while (!atomic_compare_exchange_weak_explicit(v, &old, old > n ? old - n : 0, memory_order_seq_cst,
                                                  memory_order_seq_cst))
        ;
    return old > n ? n : old;
}

/* Stream-ordered bytes of `device` leave the budget (a free): budget_async. */
static inline void budget_async_sub(int device, uint64_t bytes)
{
    if ((unsigned)device < CUSHIM_MAX_DEVICES)
        budget_sub_saturating(&budget_async[device], bytes);
}

/* What the budget of `device` holds with `used` bytes in use and an idle reserve of `idle`:
 * those plus the graph pool's reserve (saturating). */
static inline uint64_t budget_held_idle(int device, uint64_t used, uint64_t idle)
{
    uint64_t graph = atomic_load_explicit(&budget_graph[device], memory_order_relaxed);
    uint64_t held = used + graph < used ? UINT64_MAX : used + graph;
    return held + idle < held ? UINT64_MAX : held + idle;
}

/* What the budget of `device` holds now: counted and reserved device bytes plus the graph pool's
 * reserve plus the pools' idle reserve as published (saturating). */
static inline uint64_t budget_held(int device, uint64_t used)
{
    return budget_held_idle(device, used, atomic_load_explicit(&budget_pool_idle[device], memory_order_relaxed));
}

/* A request the budget refuses, said (the program sees only CUDA_ERROR_OUT_OF_MEMORY, which a
 * real shortage gives too): the first at CUSHIM_LOG=info, each at debug. Off the success path. */
void budget_refused(int device, uint64_t bytes, uint64_t held, uint64_t limit);
/* budget_refused with what `device`'s budget holds now: for a refusal the caller kept quiet
 * (budget_reserve_in's `say` false) until it knew the driver would not refuse the request first. */
void budget_say_refused(int device, uint64_t bytes);

/* Reserves `bytes` on `device` (budget.c): false when that would pass its limit (nothing
 * reserved). `own_idle`: for a stream-ordered request, the idle reserve of the very pool it draws
 * from (async_pool_idle_of; 0 otherwise), which serves it without growing: only what that
 * reserve cannot serve must fit in what the budget holds (the device's bytes in use, the request
 * with them, must stay within the limit all the same), and what it serves is taken off the
 * device's idle reserve and claimed until the request is done (*served, bytes; give it back with
 * budget_pool_served_done after the real call, whatever its result): two requests racing on one
 * pool cannot both be served by the same idle bytes. `say`: a refusal is said and counted
 * (budget_refused); when false the caller says it (budget_say_refused) or lets the driver refuse
 * the request. */
bool budget_reserve_limited(int device, uint64_t bytes, uint64_t own_idle, uint64_t pool, uint64_t *served,
                            bool say);

/* Whether what `device`'s budget holds now, a request's `bytes` already reserved in it, is within
 * its limit (always true without one); when not, the request is refused (said by budget_refused,
 * counted; the caller answers CUDA_ERROR_OUT_OF_MEMORY). For a request whose growth was not asked
 * of budget_reserve_limited: it was to be served from a reserve that went meanwhile. Thread-safe. */
bool budget_held_within(int device, uint64_t bytes);

/* A served request's real call is done (budget_reserve_limited's *served, from `pool`): its claim
 * is given back; a request that failed also gives the idle bytes back to the device's reserve,
 * out of its stream-ordered bytes (budget_async: a served request's are in them from its grant
 * on; a growing request's from its call's success, by its caller). */
void budget_pool_served_done(int device, uint64_t pool, uint64_t served, bool failed);

/* Whether `device` has a limit (every other device's requests are only counted). */
static inline bool budget_limited(int device)
{
    return unlikely(budget_any) && (unsigned)device < CUSHIM_MAX_DEVICES && shim.cfg.device_limit[device];
}

/* Reserves `bytes` on `device`: false when that would pass its limit (nothing reserved). `pool`
 * (its handle), *served and `say` as for budget_reserve_limited (0 when nothing was served). */
static inline bool budget_reserve_in(int device, uint64_t bytes, uint64_t own_idle, uint64_t pool,
                                     uint64_t *served, bool say)
{
    *served = 0;
    if (likely(!budget_any) || (unsigned)device >= CUSHIM_MAX_DEVICES)
        return true;
    if (!shim.cfg.device_limit[device]) {
        atomic_fetch_add_explicit(&budget_used[device], bytes, memory_order_relaxed); /* no mirror: no limit */
        return true;
    }
    return budget_reserve_limited(device, bytes, own_idle, pool, served, say);
}

/* budget_reserve_in for a request no pool's idle reserve serves. Always true (nothing counted)
 * without any limit, or for an ordinal outside 0..CUSHIM_MAX_DEVICES-1; for a device without a
 * limit while another has one, bytes are counted and true returned; under a limit, false means
 * refused (said by budget_refused; the caller answers CUDA_ERROR_OUT_OF_MEMORY) and may first
 * ask the driver (the pools read again). Bytes. Thread-safe. */
static inline bool budget_reserve(int device, uint64_t bytes)
{
    uint64_t served;
    return budget_reserve_in(device, bytes, 0, 0, &served, true);
}

/* Counts `bytes` on `device` without asking the limit: an allocation the program keeps though the
 * budget refused it (the shim could not undo it: a capture prohibits its free). Nothing without
 * any limit, or for an ordinal outside 0..CUSHIM_MAX_DEVICES-1. Thread-safe. */
static inline void budget_reserve_always(int device, uint64_t bytes)
{
    if (unlikely(budget_any) && (unsigned)device < CUSHIM_MAX_DEVICES) {
        atomic_fetch_add_explicit(&budget_used[device], bytes, memory_order_relaxed);
        budget_mirror(device, bytes);
    }
}

/* Gives back `bytes` budget_reserve took or an allocation counted (account.h); stops at 0
 * rather than wrap, silently. Nothing without any limit, or for an ordinal outside
 * 0..CUSHIM_MAX_DEVICES-1. Thread-safe. */
static inline void budget_release(int device, uint64_t bytes)
{
    if (unlikely(budget_any) && (unsigned)device < CUSHIM_MAX_DEVICES) {
        uint64_t old = atomic_fetch_sub_explicit(&budget_used[device], bytes, memory_order_relaxed);
        if (unlikely(old < bytes)) /* never wrap: a wrapped counter would refuse everything */
            atomic_fetch_add_explicit(&budget_used[device], bytes - old, memory_order_relaxed);
        budget_mirror(device, 0 - (old < bytes ? old : bytes)); /* the net of the two */
    }
}

/* cuMemGetInfo_v2 under a limit: given the driver's free and total, total becomes the budget
 * (at most the real total) and free min(real free, budget - used - graph pool reserve). */
void budget_mem_info(int device, size_t *free_bytes, size_t *total_bytes);

#endif
