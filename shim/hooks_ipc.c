/* Memory of another process opened through CUDA IPC (kind `imported`: reported, never in the
 * device total): cuIpcOpenMemHandle (4010 and 11000 ABIs), cuIpcCloseMemHandle. The size is the
 * allocation's, from cuMemGetAddressRange_v2. */
#include "shim/shim.h"
#include "shim/track.h"

static void opened(CUresult r, CUdeviceptr p)
{
    if (r == CUDA_SUCCESS) {
        CUdeviceptr base = 0;
        size_t size = 0;
        __typeof__(&cuMemGetAddressRange_v2) range = REAL(cuMemGetAddressRange_v2);
        if (range && range(&base, &size, p) == CUDA_SUCCESS)
            track_alloc(&shim.ptrs, CUSHIM_KIND_IMPORTED, p, size, 0);
    } else {
        track_fail(CUSHIM_KIND_IMPORTED);
    }
    shim_leave();
}

SHIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                                   unsigned int Flags)
{
    REAL_OR_FAIL(cuIpcOpenMemHandle_v2);
    if (!shim_enter())
        return real_(pdptr, handle, Flags);
    CUresult r = real_(pdptr, handle, Flags);
    opened(r, r == CUDA_SUCCESS ? *pdptr : 0);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                                unsigned int Flags)
{
    REAL_OR_FAIL(cuIpcOpenMemHandle);
    if (!shim_enter())
        return real_(pdptr, handle, Flags);
    CUresult r = real_(pdptr, handle, Flags);
    opened(r, r == CUDA_SUCCESS ? *pdptr : 0);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    REAL_OR_FAIL(cuIpcCloseMemHandle);
    if (!shim_enter())
        return real_(dptr);
    FREE_TRACKED(&shim.ptrs, dptr, real_(dptr));
}
