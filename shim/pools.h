/* Stream-ordered memory pools as the driver sees them (DESIGN.md "Kinds of memory": "Memory pools
 * keep freed memory: beside the requested bytes, export each pool's CU_MEMPOOL_ATTR_RESERVED_MEM_*
 * / USED_MEM_* where the driver reports them"). The `async` kind counts requested bytes; a pool
 * also keeps freed memory reserved until its release threshold lets it go, and that reserve is
 * device memory the program holds (what `torch.cuda.memory_reserved()` is for PyTorch's caching
 * allocator). Read, not counted: a few driver calls per device, at exit and whenever the program
 * calls cuMemGetInfo, never on the allocation path. Thread-safe. */
#ifndef CUSHIM_POOLS_H
#define CUSHIM_POOLS_H

/* Sums CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT/HIGH and USED_MEM_CURRENT/HIGH (cuda.h
 * CUmemPool_attribute, bytes) over the device pools of `device` that the shim knows (created or
 * handed out, hooks_async.c) and the device's default pool, into the async_pool stats. */
void async_pool_sample(int device);
/* At exit: every device the process used. */
void async_pool_sample_all(void);

#endif
