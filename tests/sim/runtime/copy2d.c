/* Pitched copies: cudaMemcpy2D(_ptds) (cuMemcpy2DUnaligned looked up at 3020 = cuMemcpy2DUnaligned_v2),
 * cudaMemcpy2DAsync(_ptsz) (cuMemcpy2DAsync at 3020), cudaMemcpy3D(_ptds) (cuMemcpy3D at 3020),
 * cudaMemcpy3DAsync(_ptsz) (cuMemcpy3DAsync at 3020). The per-thread entry points use the
 * per-thread driver variants (looked up at 7000 with flags 2), as copy.c does for cudaMemcpy.
 *
 * cuda_runtime_api.h: kind "must be one of ::cudaMemcpyHostToHost, ::cudaMemcpyHostToDevice,
 * ::cudaMemcpyDeviceToHost, ::cudaMemcpyDeviceToDevice, or ::cudaMemcpyDefault" (else
 * cudaErrorInvalidMemcpyDirection, listed in the returns); with cudaMemcpyDefault "the type of
 * transfer is inferred from the pointer values": here CU_MEMORYTYPE_UNIFIED for both sides (cuda.h
 * CUDA_MEMCPY2D: "the (unified virtual address space) base address"); an explicit kind names
 * CU_MEMORYTYPE_HOST / CU_MEMORYTYPE_DEVICE per side, and the simulated driver checks a DEVICE
 * side as it does for cuMemcpyHtoD (driver/copy2d.c).
 *
 * CUDA arrays: the simulated driver's cuMemcpy3D refuses CU_MEMORYTYPE_ARRAY
 * (CUDA_ERROR_NOT_SUPPORTED: its arrays hold no data), so a cudaMemcpy3DParms naming srcArray or
 * dstArray gets cudaErrorNotSupported here without a driver call. */
#include "rt.h"

/* The memory types of the destination and source for a cudaMemcpyKind. */
static cudaError_t memory_types(enum cudaMemcpyKind kind, CUmemorytype *dst, CUmemorytype *src)
{
    switch (kind) {
    case cudaMemcpyHostToHost:
        *dst = CU_MEMORYTYPE_HOST, *src = CU_MEMORYTYPE_HOST;
        return cudaSuccess;
    case cudaMemcpyHostToDevice:
        *dst = CU_MEMORYTYPE_DEVICE, *src = CU_MEMORYTYPE_HOST;
        return cudaSuccess;
    case cudaMemcpyDeviceToHost:
        *dst = CU_MEMORYTYPE_HOST, *src = CU_MEMORYTYPE_DEVICE;
        return cudaSuccess;
    case cudaMemcpyDeviceToDevice:
        *dst = CU_MEMORYTYPE_DEVICE, *src = CU_MEMORYTYPE_DEVICE;
        return cudaSuccess;
    case cudaMemcpyDefault:
        *dst = CU_MEMORYTYPE_UNIFIED, *src = CU_MEMORYTYPE_UNIFIED;
        return cudaSuccess;
    default:
        return cudaErrorInvalidMemcpyDirection;
    }
}

/* cuda.h CUDA_MEMCPY2D/3D: a HOST side is read from srcHost/dstHost, any other from
 * srcDevice/dstDevice. */
#define PLACE(host, device, type, ptr) \
    ((type) == CU_MEMORYTYPE_HOST ? (void)((host) = (ptr)) : (void)((device) = (CUdeviceptr)(ptr)))

/* cuda_runtime_api.h, cudaMemcpy2D: "\p width must not exceed either \p dpitch or \p spitch"
 * (cudaErrorInvalidPitchValue is the pitch error its returns list). */
static cudaError_t params_2d(CUDA_MEMCPY2D *p, void *dst, size_t dpitch, const void *src, size_t spitch,
                             size_t width, size_t height, enum cudaMemcpyKind kind)
{
    cudaError_t e = memory_types(kind, &p->dstMemoryType, &p->srcMemoryType);
    if (e != cudaSuccess)
        return e;
    if (width > dpitch || width > spitch)
        return cudaErrorInvalidPitchValue;
    PLACE(p->srcHost, p->srcDevice, p->srcMemoryType, src);
    PLACE(p->dstHost, p->dstDevice, p->dstMemoryType, dst);
    p->srcPitch = spitch, p->dstPitch = dpitch;
    p->WidthInBytes = width, p->Height = height;
    return cudaSuccess;
}

static cudaError_t copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                           enum cudaMemcpyKind kind, bool pt)
{
    CUDA_MEMCPY2D p = {0};
    cudaError_t e = params_2d(&p, dst, dpitch, src, spitch, width, height, kind);
    if (e == cudaSuccess)
        e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuMemcpy2DUnaligned, 3020, 7000, pt), &p);
    return simrt_ret(e);
}

static cudaError_t copy_2d_async(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                 size_t height, enum cudaMemcpyKind kind, cudaStream_t stream, bool pt)
{
    CUDA_MEMCPY2D p = {0};
    cudaError_t e = params_2d(&p, dst, dpitch, src, spitch, width, height, kind);
    if (e == cudaSuccess)
        e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuMemcpy2DAsync, 3020, 7000, pt), &p, stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, false);
}

cudaError_t CUDARTAPI cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                        size_t height, enum cudaMemcpyKind kind)
{
    return copy_2d(dst, dpitch, src, spitch, width, height, kind, true);
}

cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                        size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_2d_async(dst, dpitch, src, spitch, width, height, kind, stream, false);
}

cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                             size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return copy_2d_async(dst, dpitch, src, spitch, width, height, kind, stream, true);
}

/* cuda_runtime_api.h, cudaMemcpy3D: "must specify one of \p srcArray or \p srcPtr and one of
 * \p dstArray or \p dstPtr. Passing more than one non-zero source or destination will cause
 * ::cudaMemcpy3D() to return an error" (cudaErrorInvalidValue); arrays: cudaErrorNotSupported
 * (file comment). */
static cudaError_t one_side(cudaArray_t array, const struct cudaPitchedPtr *ptr)
{
    if ((array != NULL) == (ptr->ptr != NULL))
        return cudaErrorInvalidValue;
    return array ? cudaErrorNotSupported : cudaSuccess;
}

/* "The \p srcPos and \p dstPos fields are optional offsets ... The element for a host or device
 * pointer is assumed to be <b>unsigned char</b>", and the extent is "in elements of <b>unsigned
 * char</b>" when no array takes part. A cudaPitchedPtr's ysize is the slice height in rows
 * (cuda.h CUDA_MEMCPY3D srcHeight). "The source object must entirely contain the region defined
 * by \p srcPos and \p extent": the driver checks pitch >= width + x and height >= rows + y
 * (CUDA_ERROR_INVALID_VALUE). */
static cudaError_t params_3d(CUDA_MEMCPY3D *p, const struct cudaMemcpy3DParms *r)
{
    if (!r)
        return cudaErrorInvalidValue;
    cudaError_t e = one_side(r->srcArray, &r->srcPtr);
    if (e == cudaSuccess)
        e = one_side(r->dstArray, &r->dstPtr);
    if (e == cudaSuccess)
        e = memory_types(r->kind, &p->dstMemoryType, &p->srcMemoryType);
    if (e != cudaSuccess)
        return e;
    PLACE(p->srcHost, p->srcDevice, p->srcMemoryType, r->srcPtr.ptr);
    PLACE(p->dstHost, p->dstDevice, p->dstMemoryType, r->dstPtr.ptr);
    p->srcXInBytes = r->srcPos.x, p->srcY = r->srcPos.y, p->srcZ = r->srcPos.z;
    p->dstXInBytes = r->dstPos.x, p->dstY = r->dstPos.y, p->dstZ = r->dstPos.z;
    p->srcPitch = r->srcPtr.pitch, p->srcHeight = r->srcPtr.ysize;
    p->dstPitch = r->dstPtr.pitch, p->dstHeight = r->dstPtr.ysize;
    p->WidthInBytes = r->extent.width, p->Height = r->extent.height, p->Depth = r->extent.depth;
    return cudaSuccess;
}

static cudaError_t copy_3d(const struct cudaMemcpy3DParms *r, bool pt)
{
    CUDA_MEMCPY3D p = {0};
    cudaError_t e = params_3d(&p, r);
    if (e == cudaSuccess)
        e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuMemcpy3D, 3020, 7000, pt), &p);
    return simrt_ret(e);
}

static cudaError_t copy_3d_async(const struct cudaMemcpy3DParms *r, cudaStream_t stream, bool pt)
{
    CUDA_MEMCPY3D p = {0};
    cudaError_t e = params_3d(&p, r);
    if (e == cudaSuccess)
        e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuMemcpy3DAsync, 3020, 7000, pt), &p, stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    return copy_3d(p, false);
}

cudaError_t CUDARTAPI cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p)
{
    return copy_3d(p, true);
}

cudaError_t CUDARTAPI cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    return copy_3d_async(p, stream, false);
}

cudaError_t CUDARTAPI cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    return copy_3d_async(p, stream, true);
}
