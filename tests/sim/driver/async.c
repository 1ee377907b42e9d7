/* The stream-ordered allocator: cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync
 * (+ _ptsz). The work is done when enqueued. Allocations from device pools count as
 * SIMCUDA_ASYNC (their device memory is the pool's reserve), from host pools as
 * SIMCUDA_PINNED_HOST on the stream's device. */
#include "capture.h"
#include "ctx.h"
#include "graph.h"
#include "mem.h"
#include "pool.h"
#include "stream.h"

/* cuda.h, cuMemAllocAsync: "During stream capture, this function results in the creation of an
 * allocation node. In this case, the allocation is owned by the graph instead of the memory pool.
 * The memory pool's properties are used to set the node's creation parameters." */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream h, bool per_thread_api)
{
    struct CUstream_st *s;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc == CUDA_SUCCESS)
        rc = sim_pool_hold(&pool, s->ctx->dev); /* released only after sim_pool_unhold */
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, .u.alloc.bytesize = bytesize};
    sim_pool_props(pool, &spec.u.alloc.poolProps);
    spec.u.alloc.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_NONE; /* graph allocations: no IPC */
    if (sim_capture_add(s, &spec, &rc)) {
        if (rc == CUDA_SUCCESS)
            *dptr = spec.u.alloc.dptr;
        sim_pool_unhold(pool);
        return rc;
    }
    struct sim_pool_undo undo;
    rc = sim_pool_take(pool, bytesize, &undo);
    if (rc == CUDA_SUCCESS) {
        struct sim_range r = {.size = bytesize, .kind = SIM_MEM_ASYNC, .ctx = s->ctx,
                              .dev = sim_pool_device(pool, s->ctx->dev),
                              .counted = sim_pool_is_host(pool) ? SIMCUDA_PINNED_HOST : SIMCUDA_ASYNC, .pool = pool};
        rc = sim_mem_new(&r);
        if (rc != CUDA_SUCCESS)
            sim_pool_cancel(pool, &undo); /* a failed request changes no counter or high mark */
        else
            *dptr = r.base;
    }
    sim_pool_unhold(pool);
    if (rc == CUDA_SUCCESS)
        sim_stream_enqueue(s);
    return rc;
}

/* cuda.h, cuMemAllocAsync: "The allocation comes from the memory pool current to the stream's
 * device." */
CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_ENTER(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, NULL, hStream, false);
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_ENTER(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, NULL, hStream, true);
}

/* cuda.h: "The specified memory pool may be from a device different than that of the specified
 * hStream." */
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    SIM_ENTER(cuMemAllocFromPoolAsync);
    return pool ? alloc_async(dptr, bytesize, pool, hStream, false) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                              CUstream hStream)
{
    SIM_ENTER(cuMemAllocFromPoolAsync_ptsz);
    return pool ? alloc_async(dptr, bytesize, pool, hStream, true) : CUDA_ERROR_INVALID_VALUE;
}

/* cuda.h, cuMemFreeAsync: "During stream capture, this function results in the creation of a free
 * node and must therefore be passed the address of a graph allocation." Outside capture it frees
 * stream-ordered, cuMemAlloc and graph allocations. */
static CUresult free_async(CUdeviceptr dptr, CUstream h, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_MEM_FREE, .u.free = dptr};
    if (sim_capture_add(s, &spec, &rc))
        return rc;
    struct sim_range r;
    if (sim_reg_take(dptr, SIM_MEM(ASYNC) | SIM_MEM(DEVICE), &r))
        sim_mem_release(&r);
    else
        rc = sim_graph_mem_free(dptr);
    if (rc == CUDA_SUCCESS)
        sim_stream_enqueue(s);
    return rc;
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    SIM_ENTER(cuMemFreeAsync);
    return free_async(dptr, hStream, false);
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    SIM_ENTER(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream, true);
}
