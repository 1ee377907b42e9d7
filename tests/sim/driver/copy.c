/* Copies: cuMemcpy, cuMemcpyAsync, cuMemcpyHtoD_v2, cuMemcpyDtoH_v2, cuMemcpyDtoD_v2 and their
 * Async _v2 forms, cuMemcpyPeer and cuMemcpyPeerAsync, each with its _ptds/_ptsz twin.
 *
 * cuda.h, cuMemcpy "infers the type of the transfer ... from the pointer values", so cuMemcpy and
 * cuMemcpyAsync take any address. The explicit-kind copies name device memory on their "D" side:
 * it must lie inside one allocation the device reaches by that address (device, async, graph,
 * imported, managed, page-locked host memory as the real driver takes it: mem.h
 * SIM_MEM_DEVICE_SIDE, or a mapped and accessible VMM range of a device handle), else
 * CUDA_ERROR_INVALID_VALUE; their "H" side is any host address. cuMemcpyPeer "Copies from device memory in one context to device
 * memory in another context": both sides are "D" sides, and both contexts must be live ones
 * (CUDA_ERROR_INVALID_CONTEXT is among its errors). Synchronous copies are potentially unsafe during capture;
 * asynchronous ones on a capturing stream become memcpy nodes and are not executed.
 */
#include <string.h>

#include "capture.h"
#include "ctx.h"
#include "graph.h"
#include "mem.h"
#include "stream.h"

/* A side that is any address (cuMemcpy's, an "H" side) is not looked up, but a range whose end
 * wraps past the end of the address space is no memory at all: CUDA_ERROR_INVALID_VALUE, as
 * sim_mem_check answers for a "D" side. */
static CUresult check(CUdeviceptr dst, CUdeviceptr src, size_t n, bool dev_dst, bool dev_src)
{
    if (n == 0)
        return CUDA_SUCCESS;
    if (!sim_range_fits(dst, n) || !sim_range_fits(src, n))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = dev_dst ? sim_mem_check(dst, n, true) : CUDA_SUCCESS;
    return rc == CUDA_SUCCESS && dev_src ? sim_mem_check(src, n, true) : rc;
}

static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t n, bool dev_dst, bool dev_src, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = sim_capture_unsafe();
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(NULL, per_thread_api, &s);
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_forbid(s);
    if (rc == CUDA_SUCCESS)
        rc = check(dst, src, n, dev_dst, dev_src);
    if (rc == CUDA_SUCCESS && n)
        memmove((void *)dst, (const void *)src, n);
    return rc;
}

static CUresult copy_async(CUdeviceptr dst, CUdeviceptr src, size_t n, bool dev_dst, bool dev_src, CUstream h,
                           bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc == CUDA_SUCCESS)
        rc = check(dst, src, n, dev_dst, dev_src);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_MEMCPY, .u.memcpy = {dst, src, n}};
    if (sim_capture_add(s, &spec, &rc))
        return rc;
    if (n)
        memmove((void *)dst, (const void *)src, n);
    sim_stream_enqueue(s);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    SIM_ENTER(cuMemcpy);
    return copy(dst, src, ByteCount, false, false, false);
}

CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    SIM_ENTER(cuMemcpy_ptds);
    return copy(dst, src, ByteCount, false, false, true);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyAsync);
    return copy_async(dst, src, ByteCount, false, false, hStream, false);
}

CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyAsync_ptsz);
    return copy_async(dst, src, ByteCount, false, false, hStream, true);
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyHtoD_v2);
    return copy(dstDevice, (CUdeviceptr)srcHost, ByteCount, true, false, false);
}

CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyHtoD_v2_ptds);
    return copy(dstDevice, (CUdeviceptr)srcHost, ByteCount, true, false, true);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyDtoH_v2);
    return copy((CUdeviceptr)dstHost, srcDevice, ByteCount, false, true, false);
}

CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyDtoH_v2_ptds);
    return copy((CUdeviceptr)dstHost, srcDevice, ByteCount, false, true, true);
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyDtoD_v2);
    return copy(dstDevice, srcDevice, ByteCount, true, true, false);
}

CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyDtoD_v2_ptds);
    return copy(dstDevice, srcDevice, ByteCount, true, true, true);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyHtoDAsync_v2);
    return copy_async(dstDevice, (CUdeviceptr)srcHost, ByteCount, true, false, hStream, false);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                           CUstream hStream)
{
    SIM_ENTER(cuMemcpyHtoDAsync_v2_ptsz);
    return copy_async(dstDevice, (CUdeviceptr)srcHost, ByteCount, true, false, hStream, true);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyDtoHAsync_v2);
    return copy_async((CUdeviceptr)dstHost, srcDevice, ByteCount, false, true, hStream, false);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyDtoHAsync_v2_ptsz);
    return copy_async((CUdeviceptr)dstHost, srcDevice, ByteCount, false, true, hStream, true);
}

CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream)
{
    SIM_ENTER(cuMemcpyDtoDAsync_v2);
    return copy_async(dstDevice, srcDevice, ByteCount, true, true, hStream, false);
}

CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                           CUstream hStream)
{
    SIM_ENTER(cuMemcpyDtoDAsync_v2_ptsz);
    return copy_async(dstDevice, srcDevice, ByteCount, true, true, hStream, true);
}

static CUresult peer_contexts(CUcontext dst, CUcontext src)
{
    CUresult rc = sim_ctx_check(dst);
    return rc == CUDA_SUCCESS ? sim_ctx_check(src) : rc;
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                              CUcontext srcContext, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyPeer);
    CUresult rc = peer_contexts(dstContext, srcContext);
    return rc == CUDA_SUCCESS ? copy(dstDevice, srcDevice, ByteCount, true, true, false) : rc;
}

CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                   CUcontext srcContext, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyPeer_ptds);
    CUresult rc = peer_contexts(dstContext, srcContext);
    return rc == CUDA_SUCCESS ? copy(dstDevice, srcDevice, ByteCount, true, true, true) : rc;
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                   CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyPeerAsync);
    CUresult rc = peer_contexts(dstContext, srcContext);
    return rc == CUDA_SUCCESS ? copy_async(dstDevice, srcDevice, ByteCount, true, true, hStream, false) : rc;
}

CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                        CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyPeerAsync_ptsz);
    CUresult rc = peer_contexts(dstContext, srcContext);
    return rc == CUDA_SUCCESS ? copy_async(dstDevice, srcDevice, ByteCount, true, true, hStream, true) : rc;
}
