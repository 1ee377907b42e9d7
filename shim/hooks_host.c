/* Host memory: page-locked (cuMemHostAlloc, cuMemAllocHost_v2, cuMemFreeHost) and registered
 * (cuMemHostRegister / _v2, cuMemHostUnregister). Counted on the device of the current context
 * (the context the memory belongs to). */
#include "shim/shim.h"
#include "shim/track.h"

static CUresult host_alloc_done(CUresult r, void *p, size_t bytesize)
{
    if (r == CUDA_SUCCESS)
        track_alloc(&shim.ptrs, CUSHIM_KIND_PINNED_HOST, (uint64_t)(uintptr_t)p, bytesize, 0);
    else
        track_fail(CUSHIM_KIND_PINNED_HOST);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    REAL_OR_FAIL(cuMemHostAlloc);
    if (!shim_enter())
        return real_(pp, bytesize, Flags);
    CUresult r = real_(pp, bytesize, Flags);
    return host_alloc_done(r, r == CUDA_SUCCESS ? *pp : NULL, bytesize);
}

SHIM_EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    REAL_OR_FAIL(cuMemAllocHost_v2);
    if (!shim_enter())
        return real_(pp, bytesize);
    CUresult r = real_(pp, bytesize);
    return host_alloc_done(r, r == CUDA_SUCCESS ? *pp : NULL, bytesize);
}

SHIM_EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
    REAL_OR_FAIL(cuMemFreeHost);
    if (!shim_enter())
        return real_(p);
    struct shim_entry e;
    if (!track_take(&shim.ptrs, (uint64_t)(uintptr_t)p, &e)) {
        shim_leave();
        return real_(p);
    }
    if (unlikely(e.kind == CUSHIM_KIND_OFFLOADED)) {
        /* The program holds device memory (the shim served it from pinned memory): refused as
         * the driver refuses device memory here (cuda.h cuMemFreeHost: p "must have been
         * returned by a previous call to cuMemAllocHost()"), and the entry is kept. */
        if (table_put_back(&shim.ptrs, &e, NULL) < 0)
            track_table_full();
        shim_leave();
        return CUDA_ERROR_INVALID_VALUE;
    }
    track_free_begin(&e);
    CUresult r = real_(p);
    track_free_done(&shim.ptrs, &e, r == CUDA_SUCCESS);
    shim_leave();
    return r;
}

static CUresult register_done(CUresult r, void *p, size_t bytesize)
{
    if (r == CUDA_SUCCESS)
        track_alloc(&shim.ptrs, CUSHIM_KIND_REGISTERED_HOST, (uint64_t)(uintptr_t)p, bytesize, 0);
    else
        track_fail(CUSHIM_KIND_REGISTERED_HOST);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    REAL_OR_FAIL(cuMemHostRegister_v2);
    if (!shim_enter())
        return real_(p, bytesize, Flags);
    return register_done(real_(p, bytesize, Flags), p, bytesize);
}

SHIM_EXPORT CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    REAL_OR_FAIL(cuMemHostRegister);
    if (!shim_enter())
        return real_(p, bytesize, Flags);
    return register_done(real_(p, bytesize, Flags), p, bytesize);
}

SHIM_EXPORT CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    REAL_OR_FAIL(cuMemHostUnregister);
    if (!shim_enter())
        return real_(p);
    FREE_TRACKED(&shim.ptrs, (uint64_t)(uintptr_t)p, real_(p));
}
