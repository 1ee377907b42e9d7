/* Memory pools (pool.c) for the stream-ordered allocator (async.c). */
#ifndef SIM_POOL_H
#define SIM_POOL_H

#include "sim.h"

#define SIM_POOL_CHUNK (2ull << 20) /* pools reserve memory in 2 MiB chunks */

/* Whether `pool` is a live pool (CUDA_SUCCESS) or not (CUDA_ERROR_INVALID_VALUE): one destroyed,
 * or released since, is looked up, never read. Caller holds pool.c's lock. */
CUresult sim_pool_check(CUmemoryPool pool);
/* The device's current pool (cuDeviceGetMemPool), its default pool until cuDeviceSetMemPool. */
CUresult sim_pool_current(int dev, CUmemoryPool *out);
/* *pool checked (sim_pool_check), or with *pool NULL the current pool of `dev` put there, and held:
 * not released by a concurrent destroy until sim_pool_unhold (a stress trial: a pool destroyed
 * and released between the lookup and the allocation was used after its release). */
CUresult sim_pool_hold(CUmemoryPool *pool, int dev);
void sim_pool_unhold(CUmemoryPool pool);
/* What sim_pool_cancel needs to undo a take: the rounded bytes, and the reserve and high marks
 * before it. */
struct sim_pool_undo {
    uint64_t need, reserved, reserved_high, used_high;
};
/* Takes `bytes` (rounded to SIMCUDA_GRANULARITY) from the pool, growing its reserve by whole
 * chunks; a device pool's growth must fit in the device (CUDA_ERROR_OUT_OF_MEMORY, as is a size
 * whose rounding or reserve overflows); on failure nothing changed. */
CUresult sim_pool_take(CUmemoryPool pool, size_t bytes, struct sim_pool_undo *undo);
/* Undoes a successful take whose allocation then failed: counters and high marks as before it. */
void sim_pool_cancel(CUmemoryPool pool, const struct sim_pool_undo *undo);
void sim_pool_give(CUmemoryPool pool, size_t bytes);
/* The device an allocation from `pool` counts on: a device pool's own device, else `dev`. */
int sim_pool_device(CUmemoryPool pool, int dev);
bool sim_pool_is_host(CUmemoryPool pool);
void sim_pool_props(CUmemoryPool pool, CUmemPoolProps *out);
/* A stream, event or context synchronize on `dev`: pools over their release threshold shrink. */
void sim_pool_apply_thresholds(int dev);

#endif
