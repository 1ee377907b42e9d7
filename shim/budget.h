/* Per-process device budget (CUSHIM_DEVICE_LIMIT): device bytes (device + async + vmm + array,
 * the device total) plus the graph memory pool's reserve (memory the driver holds for the
 * process's graph allocation nodes, last read by graph_pool_sample) may not pass the limit. Bytes
 * are reserved before the real call, so racing threads cannot overshoot, and released when the
 * allocation fails or is freed (account.h). The graph reserve grows at graph launch or upload,
 * which the shim does not refuse: it then leaves less for later allocations and for
 * cuMemGetInfo's free. When no limit is set every check is one load. Thread-safe. */
#ifndef CUSHIM_BUDGET_H
#define CUSHIM_BUDGET_H

#include "shim/shim.h"

extern SHIM_HIDDEN int budget_any;                                  /* some device has a limit */
extern SHIM_HIDDEN _Atomic uint64_t budget_used[CUSHIM_MAX_DEVICES]; /* device bytes counted plus reserved */
extern SHIM_HIDDEN _Atomic uint64_t budget_graph[CUSHIM_MAX_DEVICES]; /* the graph pool's reserve, bytes */
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
uint64_t budget_graph_launches(void);

/* What the budget of `device` holds now: counted and reserved device bytes plus the graph pool's
 * reserve (saturating). */
static inline uint64_t budget_held(int device, uint64_t used)
{
    uint64_t graph = atomic_load_explicit(&budget_graph[device], memory_order_relaxed);
    return used + graph < used ? UINT64_MAX : used + graph;
}

/* A request the budget refuses, said (the program sees only CUDA_ERROR_OUT_OF_MEMORY, which a
 * real shortage gives too): the first at CUSHIM_LOG=info, each at debug. Off the success path. */
void budget_refused(int device, uint64_t bytes, uint64_t held, uint64_t limit);

/* Reserves `bytes` on `device`: false when that would pass its limit (nothing reserved). The test
 * is `bytes <= limit - used`, never `used + bytes <= limit`: a request near SIZE_MAX (which the
 * driver then refuses) would wrap the sum, pass, and its release would leave the count wrong. */
static inline bool budget_reserve(int device, uint64_t bytes)
{
    if (likely(!budget_any) || (unsigned)device >= CUSHIM_MAX_DEVICES)
        return true;
    uint64_t limit = shim.cfg.device_limit[device];
    if (!limit) {
        atomic_fetch_add_explicit(&budget_used[device], bytes, memory_order_relaxed);
        return true;
    }
    budget_graph_refresh(device);
    uint64_t used = atomic_load_explicit(&budget_used[device], memory_order_relaxed);
    do {
        uint64_t held = budget_held(device, used);
        if (held > limit || bytes > limit - held) {
            budget_refused(device, bytes, held, limit);
            return false;
        }
    } while (!atomic_compare_exchange_weak_explicit(&budget_used[device], &used, used + bytes,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

static inline void budget_release(int device, uint64_t bytes)
{
    if (unlikely(budget_any) && (unsigned)device < CUSHIM_MAX_DEVICES) {
        uint64_t old = atomic_fetch_sub_explicit(&budget_used[device], bytes, memory_order_relaxed);
        if (unlikely(old < bytes)) /* never wrap: a wrapped counter would refuse everything */
            atomic_fetch_add_explicit(&budget_used[device], bytes - old, memory_order_relaxed);
    }
}

/* cuMemGetInfo_v2 under a limit: given the driver's free and total, total becomes the budget
 * (at most the real total) and free min(real free, budget - used - graph pool reserve). */
void budget_mem_info(int device, size_t *free_bytes, size_t *total_bytes);

#endif
