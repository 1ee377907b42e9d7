/* Stream-ordered memory pools as the driver sees them (DESIGN.md "Kinds of memory": "Memory pools
 * keep freed memory: beside the requested bytes, export each pool's CU_MEMPOOL_ATTR_RESERVED_MEM_*
 * / USED_MEM_* where the driver reports them"). The `async` kind counts requested bytes; a pool
 * also keeps freed memory reserved until its release threshold lets it go, and that reserve is
 * device memory the program holds (what `torch.cuda.memory_reserved()` is for PyTorch's caching
 * allocator). Read, not counted: a few driver calls per device, at exit, whenever the program
 * calls cuMemGetInfo, after cuMemPoolTrimTo and a high-water-mark reset (hooks_async.c), now and
 * then from cudaMallocAsync (async_pool_tick), and under a budget before a decision that follows
 * a stream-ordered event, with each stream-ordered request's own pool asked twice when its device
 * has idle reserve (budget.h). Thread-safe. */
#ifndef CUSHIM_POOLS_H
#define CUSHIM_POOLS_H

#include "shim/shim.h"

/* Sums CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT/HIGH and USED_MEM_CURRENT/HIGH (cuda.h
 * CUmemPool_attribute, bytes) over the device pools of `device` that the shim knows (created or
 * handed out, hooks_async.c) and the device's default pool, into the async_pool stats. The _HIGH
 * sums are kept as high-water marks, never lowered by a reading (a pool destroyed since, whose
 * figures no reading has any more, stays in them: a fresh-user trial, XLA's allocator destroying
 * its pool), except by the first reading after async_pool_high_restart. */
void async_pool_sample(int device);
/* The program reset a pool's high-water mark (cuMemPoolSetAttribute of RESERVED_MEM_HIGH or
 * USED_MEM_HIGH): the next reading of `device` (-1: of every device) sets the _HIGH sums as read. */
void async_pool_high_restart(int device);
/* At exit: every device the process used. */
void async_pool_sample_all(void);

/* The idle reserve of one pool, bytes (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT less
 * USED_MEM_CURRENT, asked of the driver now): *pool, or with *pool NULL the current pool of
 * `device` (cuDeviceGetMemPool: where cuMemAllocAsync draws from), which is stored in *pool. 0 when
 * the driver does not answer. Not while a capture is live (the caller checks). */
uint64_t async_pool_idle_of(CUmemoryPool *pool, int device); /* *pool: NULL is set to the current pool */

/* In a child after fork(): no sampler of the parent's threads is running here, and no pool
 * is lost (pools_lost: the child's table starts empty). */
void async_pool_after_fork_child(void);

/* True once a pool of host or managed memory could not be recorded in shim.pools
 * (pools_note_lost; a device pool not recorded counts as a pool never seen does, pool_kind, and
 * does not set it): the accounting of pools is incomplete from then on. Requests from a pool not in the table then pass through
 * unchanged (no budget, not counted: its kind and device are unknown), and the pools' readings
 * leave out its reserve. Read with a relaxed load on the request path. */
extern SHIM_HIDDEN _Atomic bool pools_lost;
/* A pool shim.pools could not take (out of memory): sets pools_lost; logged once at warn level.
 * Thread-safe. */
void pools_note_lost(void);

/* In a child after fork(): forgets the destroyed pools' tombstones (hooks_async.c, the last 256
 * pools destroyed kept in shim.pools, which the child empties) and their lock, which a parent's
 * thread may have held at the fork. */
void pool_tombstones_after_fork_child(void);

/* cuMemPoolDestroy: after its pool was taken out of the table, waits until no sampler can still
 * be querying it (samplers copy handles out of the table, or ask for the current pool, then ask
 * the driver without a lock), so the driver never sees a destroyed handle from the shim. Waits
 * only for the samplers already in a query when it is called (two epochs), never for later ones:
 * a few microseconds. */
void async_pool_quiesce(void);

/* For the live view, from stream-ordered allocations made while no capture is live (so the
 * queries cannot disturb one): on a thread's 1st, 257th, 513th, ... such allocation, and at most
 * every 100 ms per device, the pools are read. One increment and a test otherwise. */
extern SHIM_HIDDEN SHIM_TLS uint32_t async_pool_allocs_here;
void async_pool_sample_slow(int device);
static inline __attribute__((always_inline)) void async_pool_tick(int device)
{
    if (unlikely((++async_pool_allocs_here & 255) == 1))
        async_pool_sample_slow(device);
}

#endif
