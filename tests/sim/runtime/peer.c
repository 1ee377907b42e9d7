/* Copies between devices: cudaMemcpyPeer (cuMemcpyPeer looked up at 4000) and
 * cudaMemcpyPeerAsync (cuMemcpyPeerAsync at 4000). cuda_runtime_api.h defines no _ptds/_ptsz
 * form of either (its per-thread list has cudaMemcpy3DPeer, not cudaMemcpyPeer; the real
 * libcudart.so.13 exports none), so the per-thread lookups at 7000 stay unused here.
 *
 * cuda_runtime_api.h: "\p dst is the base device pointer of the destination memory and
 * \p dstDevice is the destination device. \p src is the base device pointer of the source memory
 * and \p srcDevice is the source device"; the driver's cuMemcpyPeer takes contexts, so each device
 * is named by its primary context (retained once per process, as the runtime's own contexts are);
 * a device the driver does not have is cudaErrorInvalidDevice (in the returns). The copy itself
 * is the driver's (its checks: driver/copy.c). */
#include "rt.h"

/* The current context (note_init_rt: the runtime initializes the current device's primary
 * context) and the primary contexts of both devices. */
static cudaError_t contexts(int dstDevice, CUcontext *dst, int srcDevice, CUcontext *src)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = simrt_primary(dstDevice, dst);
    if (e == cudaSuccess)
        e = simrt_primary(srcDevice, src);
    return e;
}

cudaError_t CUDARTAPI cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    CUcontext d, s;
    cudaError_t e = contexts(dstDevice, &d, srcDevice, &s);
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemcpyPeer, 4000), (CUdeviceptr)dst, d, (CUdeviceptr)src, s, count);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                          cudaStream_t stream)
{
    CUcontext d, s;
    cudaError_t e = contexts(dstDevice, &d, srcDevice, &s);
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuMemcpyPeerAsync, 4000), (CUdeviceptr)dst, d, (CUdeviceptr)src, s, count, stream);
    return simrt_ret(e);
}
