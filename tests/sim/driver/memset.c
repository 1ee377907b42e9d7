/* Memsets: cuMemsetD8_v2, cuMemsetD16_v2, cuMemsetD32_v2 (+ _ptds) and cuMemsetD8Async,
 * cuMemsetD16Async, cuMemsetD32Async (+ _ptsz). The target must lie in one allocation the device
 * can reach (device-resident, pinned, registered or mapped VMM memory: under unified addressing
 * the device writes mapped host memory too). cuda.h, cuMemsetD16: "The dstDevice pointer must be
 * two byte aligned" (four for D32). Synchronous memsets are potentially unsafe during capture;
 * asynchronous ones on a capturing stream become memset nodes. */
#include <string.h>

#include "capture.h"
#include "graph.h"
#include "mem.h"
#include "stream.h"

void sim_node_run_memset(const CUDA_MEMSET_NODE_PARAMS_v2 *p)
{
    for (size_t row = 0; row < p->height; row++) {
        unsigned char *dst = (unsigned char *)p->dst + row * p->pitch;
        for (size_t i = 0; i < p->width; i++) {
            if (p->elementSize == 1) {
                dst[i] = (unsigned char)p->value;
            } else if (p->elementSize == 2) {
                uint16_t v = (uint16_t)p->value;
                memcpy(dst + 2 * i, &v, 2);
            } else {
                uint32_t v = p->value;
                memcpy(dst + 4 * i, &v, 4);
            }
        }
    }
}

/* N elements of `size` bytes: a byte count that overflows size_t is out of range
 * (CUDA_ERROR_INVALID_VALUE, as a range outside memory; sim_mem_check refuses an end that wraps). */
static CUresult check(CUdeviceptr dst, unsigned size, size_t n)
{
    size_t bytes;
    if (dst % size || __builtin_mul_overflow(n, (size_t)size, &bytes))
        return CUDA_ERROR_INVALID_VALUE;
    return n ? sim_mem_check(dst, bytes, false) : CUDA_SUCCESS;
}

static CUresult set(CUdeviceptr dst, unsigned value, unsigned size, size_t n, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = sim_capture_unsafe();
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(NULL, per_thread_api, &s);
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_forbid(s);
    if (rc == CUDA_SUCCESS)
        rc = check(dst, size, n);
    if (rc == CUDA_SUCCESS)
        sim_node_run_memset(&(CUDA_MEMSET_NODE_PARAMS_v2){dst, 0, value, size, n, 1, s->ctx});
    return rc;
}

static CUresult set_async(CUdeviceptr dst, unsigned value, unsigned size, size_t n, CUstream h, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc == CUDA_SUCCESS)
        rc = check(dst, size, n);
    if (rc != CUDA_SUCCESS || n == 0)
        return rc;
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_MEMSET, .u.memset = {dst, 0, value, size, n, 1, s->ctx}};
    if (sim_capture_add(s, &spec, &rc))
        return rc;
    sim_node_run_memset(&spec.u.memset);
    sim_stream_enqueue(s);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    SIM_ENTER(cuMemsetD8_v2);
    return set(dstDevice, uc, 1, N, false);
}

CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    SIM_ENTER(cuMemsetD8_v2_ptds);
    return set(dstDevice, uc, 1, N, true);
}

CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    SIM_ENTER(cuMemsetD16_v2);
    return set(dstDevice, us, 2, N, false);
}

CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    SIM_ENTER(cuMemsetD16_v2_ptds);
    return set(dstDevice, us, 2, N, true);
}

CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    SIM_ENTER(cuMemsetD32_v2);
    return set(dstDevice, ui, 4, N, false);
}

CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    SIM_ENTER(cuMemsetD32_v2_ptds);
    return set(dstDevice, ui, 4, N, true);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD8Async);
    return set_async(dstDevice, uc, 1, N, hStream, false);
}

CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD8Async_ptsz);
    return set_async(dstDevice, uc, 1, N, hStream, true);
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD16Async);
    return set_async(dstDevice, us, 2, N, hStream, false);
}

CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD16Async_ptsz);
    return set_async(dstDevice, us, 2, N, hStream, true);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD32Async);
    return set_async(dstDevice, ui, 4, N, hStream, false);
}

CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD32Async_ptsz);
    return set_async(dstDevice, ui, 4, N, hStream, true);
}
