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
    FREE_TRACKED(&shim.ptrs, (uint64_t)(uintptr_t)p, real_(p));
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
