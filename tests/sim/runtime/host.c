/* Page-locked host memory: cudaMallocHost and cudaHostAlloc (cuMemHostAlloc, looked up at 2020),
 * cudaFreeHost (cuMemFreeHost), cudaHostRegister (cuMemHostRegister at 6050 =
 * cuMemHostRegister_v2), cudaHostUnregister, cudaHostGetDevicePointer. The cudaHostAlloc* and
 * cudaHostRegister* flags equal the driver's CU_MEMHOSTALLOC_* / CU_MEMHOSTREGISTER_* values. */
#include "rt.h"

cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    cudaError_t e = pHost ? simrt_ctx() : cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemHostAlloc, 2020), pHost, size, flags);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
    cudaError_t e = ptr ? simrt_ctx() : cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemHostAlloc, 2020), ptr, size, 0);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess && ptr)
        e = SIMRT_CALL(DRV(cuMemFreeHost, 2000), ptr);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemHostRegister, 6050), ptr, size, flags);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaHostUnregister(void *ptr)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemHostUnregister, 4000), ptr);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    CUdeviceptr p = 0;
    cudaError_t e = pDevice ? simrt_ctx() : cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemHostGetDevicePointer, 3020), &p, pHost, flags);
    if (e == cudaSuccess)
        *pDevice = (void *)p;
    return simrt_ret(e);
}
