/* Copies and memsets: cudaMemcpy(_ptds), cudaMemcpyAsync(_ptsz), cudaMemset(_ptds),
 * cudaMemsetAsync(_ptsz). An explicit direction uses the driver's explicit-kind copy
 * (cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, cuMemcpyDtoD_v2 and their Async forms); cudaMemcpyDefault
 * and cudaMemcpyHostToHost use cuMemcpy / cuMemcpyAsync. The per-thread entry points use the
 * per-thread driver variants (looked up with flags 2). */
#include "rt.h"

static cudaError_t copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, bool pt)
{
    CUdeviceptr d = (CUdeviceptr)dst, s = (CUdeviceptr)src;
    cudaError_t e = simrt_ctx();
    if (e != cudaSuccess)
        return simrt_ret(e);
    switch (kind) {
    case cudaMemcpyHostToDevice:
        e = SIMRT_CALL(DRV_PT(cuMemcpyHtoD, 3020, 7000, pt), d, src, count);
        break;
    case cudaMemcpyDeviceToHost:
        e = SIMRT_CALL(DRV_PT(cuMemcpyDtoH, 3020, 7000, pt), dst, s, count);
        break;
    case cudaMemcpyDeviceToDevice:
        e = SIMRT_CALL(DRV_PT(cuMemcpyDtoD, 3020, 7000, pt), d, s, count);
        break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
        e = SIMRT_CALL(DRV_PT(cuMemcpy, 4000, 7000, pt), d, s, count);
        break;
    default:
        e = cudaErrorInvalidMemcpyDirection;
    }
    return simrt_ret(e);
}

static cudaError_t copy_async(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream,
                              bool pt)
{
    CUdeviceptr d = (CUdeviceptr)dst, s = (CUdeviceptr)src;
    cudaError_t e = simrt_ctx();
    if (e != cudaSuccess)
        return simrt_ret(e);
    switch (kind) {
    case cudaMemcpyHostToDevice:
        e = SIMRT_CALL(DRV_PT(cuMemcpyHtoDAsync, 3020, 7000, pt), d, src, count, stream);
        break;
    case cudaMemcpyDeviceToHost:
        e = SIMRT_CALL(DRV_PT(cuMemcpyDtoHAsync, 3020, 7000, pt), dst, s, count, stream);
        break;
    case cudaMemcpyDeviceToDevice:
        e = SIMRT_CALL(DRV_PT(cuMemcpyDtoDAsync, 3020, 7000, pt), d, s, count, stream);
        break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
        e = SIMRT_CALL(DRV_PT(cuMemcpyAsync, 4000, 7000, pt), d, s, count, stream);
        break;
    default:
        e = cudaErrorInvalidMemcpyDirection;
    }
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(dst, src, count, kind, false);
}

cudaError_t CUDARTAPI cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(dst, src, count, kind, true);
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                      cudaStream_t stream)
{
    return copy_async(dst, src, count, kind, stream, false);
}

cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                           cudaStream_t stream)
{
    return copy_async(dst, src, count, kind, stream, true);
}

static cudaError_t set(void *devPtr, int value, size_t count, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuMemsetD8, 3020, 7000, pt), (CUdeviceptr)devPtr, (unsigned char)value, count);
    return simrt_ret(e);
}

static cudaError_t set_async(void *devPtr, int value, size_t count, cudaStream_t stream, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuMemsetD8Async, 3020, 7000, pt), (CUdeviceptr)devPtr, (unsigned char)value, count,
                       stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemset(void *devPtr, int value, size_t count)
{
    return set(devPtr, value, count, false);
}

cudaError_t CUDARTAPI cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    return set(devPtr, value, count, true);
}

cudaError_t CUDARTAPI cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return set_async(devPtr, value, count, stream, false);
}

cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return set_async(devPtr, value, count, stream, true);
}
