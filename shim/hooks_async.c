/* Stream-ordered allocation: cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync (legacy and
 * per-thread variants) and the pools they draw from. On a capturing stream an allocation becomes
 * a graph node (its memory comes from the graph pool at launch: graph accounting), so it is not
 * counted here. A pool's allocations count by the pool's location (DESIGN.md: in CUDA 13 a pool
 * can hold host memory). */
#include "shim/capture.h"
#include "shim/account.h"
#include "shim/shim.h"
#include "shim/track.h"

/* Kind and device of allocations from `pool`; the defaults for pools the shim did not see made
 * (device default pools). */
static enum cushim_kind pool_kind(CUmemoryPool pool, int *device)
{
    struct shim_entry e;
    if (pool && table_get(&shim.pools, (uint64_t)(uintptr_t)pool, &e)) {
        if (e.device >= 0)
            *device = e.device;
        return (enum cushim_kind)e.aux;
    }
    return CUSHIM_KIND_ASYNC;
}

static void async_done(CUresult r, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                       CUstream stream, bool pt)
{
    CUcontext ctx;
    int device = shim_current_device(&ctx);
    enum cushim_kind kind = pool_kind(pool, &device);
    if (r != CUDA_SUCCESS)
        account_fail(device, kind);
    else if (!capture_stream_is_capturing(stream, pt))
        track_alloc_on(&shim.ptrs, kind, *dptr, bytesize, device, ctx, 0);
    shim_leave();
}

#define ALLOC_ASYNC(sym, pt)                                                                 \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)  \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        if (!shim_enter())                                                                   \
            return real_(dptr, bytesize, hStream);                                           \
        CUresult r = real_(dptr, bytesize, hStream);                                         \
        async_done(r, dptr, bytesize, NULL, hStream, pt);                                    \
        return r;                                                                            \
    }
ALLOC_ASYNC(cuMemAllocAsync, false)
ALLOC_ASYNC(cuMemAllocAsync_ptsz, true)

#define ALLOC_FROM_POOL(sym, pt)                                                             \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, \
                                     CUstream hStream)                                       \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        if (!shim_enter())                                                                   \
            return real_(dptr, bytesize, pool, hStream);                                     \
        CUresult r = real_(dptr, bytesize, pool, hStream);                                   \
        async_done(r, dptr, bytesize, pool, hStream, pt);                                    \
        return r;                                                                            \
    }
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync, false)
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz, true)

#define FREE_ASYNC(sym)                                                                      \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr dptr, CUstream hStream)                     \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        if (!shim_enter())                                                                   \
            return real_(dptr, hStream);                                                     \
        FREE_TRACKED(&shim.ptrs, dptr, real_(dptr, hStream));                                \
    }
FREE_ASYNC(cuMemFreeAsync)
FREE_ASYNC(cuMemFreeAsync_ptsz)

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
