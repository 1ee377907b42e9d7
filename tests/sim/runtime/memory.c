/* Device memory: cudaMalloc (cuMemAlloc looked up at 3020 = cuMemAlloc_v2), cudaFree
 * (cuMemFree_v2), cudaMallocPitch (cuMemAllocPitch_v2), cudaMallocManaged (cuMemAllocManaged),
 * cudaMemGetInfo (cuMemGetInfo_v2), cudaPointerGetAttributes (cuPointerGetAttributes). */
#include "rt.h"

/* cudaMalloc(0) returns cudaSuccess and NULL without allocating. */
cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    CUdeviceptr p = 0;
    cudaError_t e = devPtr ? simrt_ctx() : cudaErrorInvalidValue;
    if (e == cudaSuccess && size)
        e = SIMRT_CALL(DRV(cuMemAlloc, 3020), &p, size);
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return simrt_ret(e);
}

/* cuda_runtime_api.h, cudaFree: "If devPtr is 0, no operation is performed" (the context is still
 * initialized: cudaFree(NULL) is the usual way to do that). */
cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess && devPtr)
        e = SIMRT_CALL(DRV(cuMemFree, 3020), (CUdeviceptr)devPtr);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    CUdeviceptr p = 0;
    cudaError_t e = devPtr && pitch ? simrt_ctx() : cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemAllocPitch, 3020), &p, pitch, width, height, 4);
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    CUdeviceptr p = 0;
    cudaError_t e = devPtr ? simrt_ctx() : cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemAllocManaged, 6000), &p, size, flags);
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free, size_t *total)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemGetInfo, 3020), free, total);
    return simrt_ret(e);
}

/* driver_types.h, cudaPointerAttributes: type cudaMemoryTypeUnregistered for memory CUDA does not
 * know (device -2, NULL pointers), cudaMemoryTypeManaged for managed memory. */
cudaError_t CUDARTAPI cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    unsigned int type = 0;
    int managed = 0, device = -2;
    CUdeviceptr dptr = 0;
    void *hptr = NULL;
    CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                   CU_POINTER_ATTRIBUTE_HOST_POINTER};
    void *data[] = {&type, &managed, &device, &dptr, &hptr};
    cudaError_t e = attributes ? simrt_ctx() : cudaErrorInvalidValue;
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuPointerGetAttributes, 7000), 5, which, data, (CUdeviceptr)ptr);
    if (e != cudaSuccess)
        return simrt_ret(e);
    *attributes = (struct cudaPointerAttributes){
        .type = managed                          ? cudaMemoryTypeManaged
                : type == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice
                : type == CU_MEMORYTYPE_HOST   ? cudaMemoryTypeHost
                                               : cudaMemoryTypeUnregistered,
        .device = device, .devicePointer = (void *)dptr, .hostPointer = hptr};
    return cudaSuccess;
}
