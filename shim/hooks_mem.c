/* Device memory: cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged, cuMemFree_v2,
 * cuMemGetInfo_v2 (DESIGN.md "Kinds of memory"). */
#include "shim/shim.h"
#include "shim/track.h"

SHIM_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    REAL_OR_FAIL(cuMemAlloc_v2);
    if (!shim_enter())
        return real_(dptr, bytesize);
    CUresult r = real_(dptr, bytesize);
    if (r == CUDA_SUCCESS)
        track_alloc(&shim.ptrs, CUSHIM_KIND_DEVICE, *dptr, bytesize, 0);
    else
        track_fail(CUSHIM_KIND_DEVICE);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
                                                size_t WidthInBytes, size_t Height,
                                                unsigned int ElementSizeBytes)
{
    REAL_OR_FAIL(cuMemAllocPitch_v2);
    if (!shim_enter())
        return real_(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    CUresult r = real_(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    /* Requested bytes of a pitched allocation: pitch x height (DESIGN.md). */
    if (r == CUDA_SUCCESS)
        track_alloc(&shim.ptrs, CUSHIM_KIND_DEVICE, *dptr, (uint64_t)*pPitch * Height, 0);
    else
        track_fail(CUSHIM_KIND_DEVICE);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                                               unsigned int flags)
{
    REAL_OR_FAIL(cuMemAllocManaged);
    if (!shim_enter())
        return real_(dptr, bytesize, flags);
    CUresult r = real_(dptr, bytesize, flags);
    if (r == CUDA_SUCCESS)
        track_alloc(&shim.ptrs, CUSHIM_KIND_MANAGED, *dptr, bytesize, 0);
    else
        track_fail(CUSHIM_KIND_MANAGED);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    REAL_OR_FAIL(cuMemFree_v2);
    if (!shim_enter())
        return real_(dptr);
    FREE_TRACKED(&shim.ptrs, dptr, real_(dptr));
}

SHIM_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    REAL_OR_FAIL(cuMemGetInfo_v2);
    if (!shim_enter())
        return real_(free, total);
    CUresult r = real_(free, total);
    if (r == CUDA_SUCCESS && free && total) {
        /* A free sample of untracked memory for the live view. */
        int device = shim_current_device(NULL);
        if (device >= 0)
            shim_sample_untracked(device, *free, *total);
    }
    shim_leave();
    return r;
}
