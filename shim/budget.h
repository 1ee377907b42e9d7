/* Per-process device budget (CUSHIM_DEVICE_LIMIT): device bytes (device + async + vmm + array,
 * the device total) may not pass the limit. Bytes are reserved before the real call, so racing
 * threads cannot overshoot, and released when the allocation fails or is freed (account.h).
 * When no limit is set every check is one load. Thread-safe. */
#ifndef CUSHIM_BUDGET_H
#define CUSHIM_BUDGET_H

#include "shim/shim.h"

extern int budget_any;                                  /* some device has a limit */
extern _Atomic uint64_t budget_used[CUSHIM_MAX_DEVICES]; /* device bytes counted plus reserved */

/* Reserves `bytes` on `device`: false when that would pass its limit (nothing reserved). */
static inline bool budget_reserve(int device, uint64_t bytes)
{
    if (likely(!budget_any) || (unsigned)device >= CUSHIM_MAX_DEVICES)
        return true;
    uint64_t limit = shim.cfg.device_limit[device];
    uint64_t used = atomic_fetch_add_explicit(&budget_used[device], bytes, memory_order_relaxed) + bytes;
    if (limit && used > limit) {
        atomic_fetch_sub_explicit(&budget_used[device], bytes, memory_order_relaxed);
        return false;
    }
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
 * (at most the real total) and free min(real free, budget - used). */
void budget_mem_info(int device, size_t *free_bytes, size_t *total_bytes);

#endif
