/* Stream-ordered allocator and pools: cudaMallocAsync, cudaFreeAsync, cudaMallocFromPoolAsync
 * (+ _ptsz; cuMemAllocAsync / cuMemFreeAsync / cuMemAllocFromPoolAsync looked up at 11020),
 * cudaDeviceGetDefaultMemPool, cudaDeviceSetMemPool, cudaMemPoolCreate, cudaMemPoolDestroy, cudaMemPoolGetAttribute,
 * cudaMemPoolSetAttribute, cudaMemPoolTrimTo. When the driver has no such entry point (an older
 * driver, SIMCUDA_HIDE), the call fails with cudaErrorNotSupported. cudaMemPoolAttr values equal
 * the driver's CUmemPool_attribute values. */
#include "rt.h"

static cudaError_t malloc_async(void **devPtr, size_t size, cudaMemPool_t pool, cudaStream_t stream, bool pt)
{
    CUdeviceptr p = 0;
    cudaError_t e = devPtr ? simrt_ctx() : cudaErrorInvalidValue;
    if (e == cudaSuccess && pool)
        e = SIMRT_CALL(DRV_PT(cuMemAllocFromPoolAsync, 11020, 11020, pt), &p, size, pool, stream);
    else if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuMemAllocAsync, 11020, 11020, pt), &p, size, stream);
    if (e == cudaSuccess)
        *devPtr = (void *)p;
    return simrt_ret(e);
}

static cudaError_t free_async(void *devPtr, cudaStream_t stream, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuMemFreeAsync, 11020, 11020, pt), (CUdeviceptr)devPtr, stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(devPtr, size, NULL, hStream, false);
}

cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    return malloc_async(devPtr, size, NULL, hStream, true);
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream)
{
    return memPool ? malloc_async(ptr, size, memPool, stream, false) : simrt_ret(cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                   cudaStream_t stream)
{
    return memPool ? malloc_async(ptr, size, memPool, stream, true) : simrt_ret(cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, false);
}

cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    return free_async(devPtr, hStream, true);
}

cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceGetDefaultMemPool, 11020), memPool, device);
    return simrt_ret(e);
}

/* cuda_runtime_api.h cudaDeviceSetMemPool: "Sets the current memory pool of a device" (the
 * driver's cuDeviceSetMemPool, looked up at 11020). */
cudaError_t CUDARTAPI cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceSetMemPool, 11020), device, memPool);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t *memPool, const struct cudaMemPoolProps *poolProps)
{
    if (!poolProps)
        return simrt_ret(cudaErrorInvalidValue);
    const struct cudaMemPoolProps *p = poolProps;
    CUmemPoolProps props = {.allocType = (CUmemAllocationType)p->allocType,
                            .handleTypes = (CUmemAllocationHandleType)p->handleTypes,
                            .location = {(CUmemLocationType)p->location.type, p->location.id},
                            .win32SecurityAttributes = p->win32SecurityAttributes,
                            .maxSize = p->maxSize,
                            .usage = p->usage};
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemPoolCreate, 11020), memPool, &props);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemPoolDestroy, 11020), memPool);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemPoolGetAttribute, 11020), memPool, (CUmemPool_attribute)attr, value);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemPoolSetAttribute, 11020), memPool, (CUmemPool_attribute)attr, value);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemPoolTrimTo, 11020), memPool, minBytesToKeep);
    return simrt_ret(e);
}
