/* CUDA arrays (kind `array`): cuArrayCreate_v2, cuArray3DCreate_v2, cuMipmappedArrayCreate and
 * their destroys. Requested bytes = texels x channels x element size (levels summed for mipmaps)
 * for the plain formats of cuda.h's CUarray_format; for packed, planar and block-compressed
 * formats the driver's own figure (cu[Mipmapped]ArrayGetMemoryRequirements) is used. */
#include "shim/shim.h"
#include "shim/track.h"

static unsigned element_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0; /* not a per-channel element format */
    }
}

static uint64_t dim(size_t d, unsigned level)
{
    uint64_t v = (d ? d : 1) >> level;
    return v ? v : 1;
}

/* Texel bytes of a 3D descriptor with `levels` mip levels; 0 if the format is not plain. */
static uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
    unsigned e = element_bytes(d->Format);
    uint64_t total = 0;
    if (!e)
        return 0;
    for (unsigned l = 0; l < (levels ? levels : 1); l++) {
        /* Layered arrays keep every layer at each level: Depth is the layer count. */
        uint64_t depth = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) ? (d->Depth ? d->Depth : 1)
                                                                                   : dim(d->Depth, l);
        total += dim(d->Width, l) * (d->Height ? dim(d->Height, l) : 1) * depth * d->NumChannels * e;
    }
    return total;
}

static void array_done(CUresult r, CUarray a, uint64_t bytes)
{
    if (r == CUDA_SUCCESS) {
        if (!bytes) {
            CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
            __typeof__(&cuArrayGetMemoryRequirements) get = REAL(cuArrayGetMemoryRequirements);
            CUcontext ctx;
            int device = shim_current_device(&ctx);
            if (get && get(&req, a, device) == CUDA_SUCCESS)
                bytes = req.size;
        }
        track_alloc(&shim.arrays, CUSHIM_KIND_ARRAY, (uint64_t)(uintptr_t)a, bytes, 0);
    } else {
        track_fail(CUSHIM_KIND_ARRAY);
    }
    shim_leave();
}

SHIM_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    REAL_OR_FAIL(cuArrayCreate_v2);
    if (!shim_enter())
        return real_(pHandle, d);
    CUresult r = real_(pHandle, d);
    CUDA_ARRAY3D_DESCRIPTOR d3 = {0};
    if (d) {
        d3.Width = d->Width;
        d3.Height = d->Height;
        d3.Format = d->Format;
        d3.NumChannels = d->NumChannels;
    }
    array_done(r, r == CUDA_SUCCESS ? *pHandle : NULL, d ? array_bytes(&d3, 1) : 0);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    REAL_OR_FAIL(cuArray3DCreate_v2);
    if (!shim_enter())
        return real_(pHandle, d);
    CUresult r = real_(pHandle, d);
    array_done(r, r == CUDA_SUCCESS ? *pHandle : NULL, d ? array_bytes(d, 1) : 0);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    REAL_OR_FAIL(cuArrayDestroy);
    if (!shim_enter())
        return real_(hArray);
    FREE_TRACKED(&shim.arrays, (uint64_t)(uintptr_t)hArray, real_(hArray));
}

SHIM_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                                    const CUDA_ARRAY3D_DESCRIPTOR *d,
                                                    unsigned int numMipmapLevels)
{
    REAL_OR_FAIL(cuMipmappedArrayCreate);
    if (!shim_enter())
        return real_(pHandle, d, numMipmapLevels);
    CUresult r = real_(pHandle, d, numMipmapLevels);
    if (r == CUDA_SUCCESS) {
        uint64_t bytes = d ? array_bytes(d, numMipmapLevels) : 0;
        if (!bytes) {
            CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
            __typeof__(&cuMipmappedArrayGetMemoryRequirements) get =
                REAL(cuMipmappedArrayGetMemoryRequirements);
            if (get && get(&req, *pHandle, shim_current_device(NULL)) == CUDA_SUCCESS)
                bytes = req.size;
        }
        track_alloc(&shim.arrays, CUSHIM_KIND_ARRAY, (uint64_t)(uintptr_t)*pHandle, bytes, 0);
    } else {
        track_fail(CUSHIM_KIND_ARRAY);
    }
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    REAL_OR_FAIL(cuMipmappedArrayDestroy);
    if (!shim_enter())
        return real_(hMipmappedArray);
    FREE_TRACKED(&shim.arrays, (uint64_t)(uintptr_t)hMipmappedArray, real_(hMipmappedArray));
}
