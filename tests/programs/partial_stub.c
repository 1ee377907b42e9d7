/* libpartialstub.so: a stub that has a few of the driver's functions and no cuDriverGetVersion
 * (a hand-made one, as tests and loaders carry), each failing with CUDA_ERROR_STUB_LIBRARY. */
#include <cuda.h>

CUresult CUDAAPI cuInit(unsigned int flags)
{
    (void)flags;
    return CUDA_ERROR_STUB_LIBRARY;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    (void)dptr;
    (void)bytesize;
    return CUDA_ERROR_STUB_LIBRARY;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    (void)dptr;
    return CUDA_ERROR_STUB_LIBRARY;
}
