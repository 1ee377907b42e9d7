/* Stream-ordered allocation: cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync (legacy and
 * per-thread variants) and the pools they draw from. On a capturing stream an allocation becomes
 * a graph node (its memory comes from the graph pool at launch: graph accounting), so it is not
 * counted here. A pool's allocations count by the pool's location (DESIGN.md: in CUDA 13 a pool
 * can hold host memory). */
#include "shim/account.h"
#include "shim/budget.h"
#include "shim/capture.h"
#include "shim/offload.h"
#include "shim/shim.h"
#include "shim/track.h"

/* Kind and device of allocations from `pool`; the defaults for pools the shim did not see made
 * (device default pools). */
static inline enum cushim_kind pool_kind(CUmemoryPool pool, int *device)
{
    struct shim_entry e;
    if (pool && table_get(&shim.pools, (uint64_t)(uintptr_t)pool, &e)) {
        if (e.device >= 0)
            *device = e.device;
        return (enum cushim_kind)e.aux;
    }
    return CUSHIM_KIND_ASYNC;
}

/* Where a stream-ordered allocation goes and what it counts as. */
struct async_req {
    CUcontext ctx;
    int device;
    enum cushim_kind kind;
    bool capturing;  /* a graph node: its memory is the graph pool's, not counted here */
    bool reserved;   /* budget reserved (device pools only) */
};

/* Before the real call: classify, reserve the budget. False when over the budget. */
static inline __attribute__((always_inline)) bool async_begin(struct async_req *q, size_t bytes, CUmemoryPool pool, CUstream stream, bool pt)
{
    if (unlikely(shim_policy_active())) {
        phase_poll();
        offload_poll();
    }
    q->device = shim_current_device(&q->ctx);
    q->kind = pool_kind(pool, &q->device);
    q->capturing = capture_stream_is_capturing(stream, pt);
    q->reserved = false;
    if (q->capturing || q->kind != CUSHIM_KIND_ASYNC)
        return true;
    if (!budget_reserve(q->device, bytes))
        return false;
    q->reserved = budget_any;
    return true;
}

static inline __attribute__((always_inline)) CUresult async_end(const struct async_req *q, CUresult r, CUdeviceptr *dptr, size_t bytes)
{
    if (r == CUDA_SUCCESS) {
        if (!q->capturing)
            track_alloc_on(&shim.ptrs, q->kind, *dptr, bytes, q->device, q->ctx,
                           q->reserved ? SHIM_F_RESERVED : 0);
    } else {
        if (q->reserved)
            budget_release(q->device, bytes);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && shim.cfg.spill && !q->capturing && !capture_any_live() &&
            q->kind == CUSHIM_KIND_ASYNC && offload_alloc(dptr, bytes, SHIM_F_SPILLED) == CUDA_SUCCESS)
            r = CUDA_SUCCESS;
        else
            account_fail(q->device, q->kind);
    }
    shim_leave();
    return r;
}

/* cuMemAllocAsync draws from the device's current pool; offloaded like cuMemAlloc_v2 when the
 * policy says so and the stream is not capturing (a capture makes it a graph node). */
#define ALLOC_ASYNC(sym, pt)                                                                 \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)  \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        struct async_req q;                                                                  \
        if (!shim_enter())                                                                   \
            return real_(dptr, bytesize, hStream);                                           \
        if (!async_begin(&q, bytesize, NULL, hStream, pt))                                   \
            return async_end(&q, CUDA_ERROR_OUT_OF_MEMORY, dptr, bytesize);                  \
        if (unlikely(!q.capturing && offload_wanted(bytesize)) && dptr &&                    \
            offload_alloc(dptr, bytesize, 0) == CUDA_SUCCESS) {                              \
            if (q.reserved) /* host memory: the device budget was not used */                \
                budget_release(q.device, bytesize);                                          \
            shim_leave();                                                                    \
            return CUDA_SUCCESS;                                                             \
        }                                                                                    \
        return async_end(&q, real_(dptr, bytesize, hStream), dptr, bytesize);                \
    }
ALLOC_ASYNC(cuMemAllocAsync, false)
ALLOC_ASYNC(cuMemAllocAsync_ptsz, true)

#define ALLOC_FROM_POOL(sym, pt)                                                             \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, \
                                     CUstream hStream)                                       \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        struct async_req q;                                                                  \
        if (!shim_enter())                                                                   \
            return real_(dptr, bytesize, pool, hStream);                                     \
        if (!async_begin(&q, bytesize, pool, hStream, pt))                                   \
            return async_end(&q, CUDA_ERROR_OUT_OF_MEMORY, dptr, bytesize);                  \
        return async_end(&q, real_(dptr, bytesize, pool, hStream), dptr, bytesize);          \
    }
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync, false)
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz, true)

/* A free of an offloaded range releases its host memory after the stream's earlier work. */
#define FREE_ASYNC(sym, pt)                                                                  \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr dptr, CUstream hStream)                     \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        struct shim_entry e;                                                                 \
        if (!shim_enter())                                                                   \
            return real_(dptr, hStream);                                                     \
        offload_poll();                                                                      \
        if (!track_take(&shim.ptrs, dptr, &e)) {                                             \
            shim_leave();                                                                    \
            return real_(dptr, hStream);                                                     \
        }                                                                                    \
        CUresult r;                                                                          \
        if (unlikely(e.kind == CUSHIM_KIND_OFFLOADED)) {                                     \
            r = offload_free_async(&e, hStream, pt);                                         \
            if (r != CUDA_SUCCESS)                                                           \
                table_put(&shim.ptrs, &e, NULL);                                             \
        } else {                                                                             \
            r = real_(dptr, hStream);                                                        \
            track_free_done(&shim.ptrs, &e, r == CUDA_SUCCESS);                              \
        }                                                                                    \
        shim_leave();                                                                        \
        return r;                                                                            \
    }
FREE_ASYNC(cuMemFreeAsync, false)
FREE_ASYNC(cuMemFreeAsync_ptsz, true)

SHIM_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    REAL_OR_FAIL(cuMemPoolCreate);
    CUresult r = real_(pool, poolProps);
    if (r != CUDA_SUCCESS || !poolProps || !shim_enter())
        return r;
    /* cuda.h CUmemLocationType: a pool on a device holds device memory; host and host-NUMA
     * locations hold page-locked host memory. */
    enum cushim_kind kind = CUSHIM_KIND_ASYNC;
    int device = -1;
    switch ((int)poolProps->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        device = poolProps->location.id;
        break;
#if CUDA_VERSION >= 12020
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        kind = CUSHIM_KIND_PINNED_HOST;
        break;
#endif
    default:
        break;
    }
#if CUDA_VERSION >= 13000
    /* cuda.h (cuMemPoolCreate): CUDA 13 pools may hold managed memory. */
    if (poolProps->allocType == CU_MEM_ALLOCATION_TYPE_MANAGED)
        kind = CUSHIM_KIND_MANAGED;
#endif
    struct shim_entry e = {.key = (uint64_t)(uintptr_t)*pool, .aux = kind, .device = device};
    table_put(&shim.pools, &e, NULL);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    REAL_OR_FAIL(cuMemPoolDestroy);
    CUresult r = real_(pool);
    if (r == CUDA_SUCCESS)
        table_take(&shim.pools, (uint64_t)(uintptr_t)pool, NULL);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                                    CUmemPoolPtrExportData *shareData)
{
    REAL_OR_FAIL(cuMemPoolImportPointer);
    if (!shim_enter())
        return real_(ptr_out, pool, shareData);
    CUresult r = real_(ptr_out, pool, shareData);
    if (r == CUDA_SUCCESS) {
        CUdeviceptr base = 0;
        size_t size = 0;
        __typeof__(&cuMemGetAddressRange_v2) range = REAL(cuMemGetAddressRange_v2);
        if (range && range(&base, &size, *ptr_out) == CUDA_SUCCESS)
            track_alloc(&shim.ptrs, CUSHIM_KIND_IMPORTED, *ptr_out, size, 0);
    } else {
        track_fail(CUSHIM_KIND_IMPORTED);
    }
    shim_leave();
    return r;
}
