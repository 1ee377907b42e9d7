/* Linear device memory: cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged, cuMemFree_v2,
 * cuMemGetInfo_v2, cuMemGetAddressRange_v2, and the allocate/release/validate helpers every
 * addressable kind shares. Requested bytes feed simcuda_live_bytes; capacity and cuMemGetInfo_v2
 * use sizes rounded up to SIMCUDA_GRANULARITY. */
#include <stdlib.h>

#include "capture.h"
#include "ctx.h"
#include "graph.h"
#include "mem.h"
#include "pool.h"
#include "vmm.h"

CUresult sim_mem_new(struct sim_range *r)
{
    /* cuda.h CUDA_ERROR_OUT_OF_MEMORY: "unable to allocate enough memory". Before sim_account, whose
     * signed deltas would turn a charge or size past 2^63 negative: no device holds such a charge,
     * and no process's address space (user addresses lie below 2^63) such a size. */
    if (r->charge > sim_cfg.capacity[r->dev] || r->size > INT64_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = sim_account(r->dev, r->counted, (int64_t)r->size, (int64_t)r->charge);
    if (rc != CUDA_SUCCESS)
        return rc;
    void *p = sim_backing_alloc(r->size);
    r->base = (uintptr_t)p;
    rc = p ? sim_reg_add(r, 0) : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS) {
        if (p)
            sim_backing_free(p, r->size);
        sim_account(r->dev, r->counted, -(int64_t)r->size, -(int64_t)r->charge);
    }
    return rc;
}

void sim_mem_release(const struct sim_range *r)
{
    if (r->kind == SIM_MEM_ASYNC)
        sim_pool_give(r->pool, r->size);
    if (r->kind != SIM_MEM_REGISTERED)
        sim_backing_free((void *)r->base, r->size);
    sim_account(r->dev, r->counted, -(int64_t)r->size, -(int64_t)r->charge);
}

/* A context's teardown releases its linear, managed and pinned memory. Not stream-ordered
 * allocations: cuda.h cuCtxDestroy, "will not destroy memory allocations by cuMemCreate(),
 * cuMemAllocAsync() and cuMemAllocFromPoolAsync(). These memory allocations are not associated
 * with any CUDA context and need to be destroyed explicitly" (cuda_runtime_api.h says the same of
 * cudaDeviceReset). Graph allocations and IPC imports have their own release. */
void sim_mem_release_ctx(CUcontext ctx)
{
    struct sim_range *taken;
    size_t n = sim_reg_take_ctx(ctx, SIM_MEM_ALL & ~(SIM_MEM(ASYNC) | SIM_MEM(GRAPH) | SIM_MEM(IMPORTED)), &taken);
    for (size_t i = 0; i < n; i++)
        sim_mem_release(&taken[i]);
    free(taken);
}

/* A range whose end p + n wraps past the end of the address space lies in no allocation:
 * CUDA_ERROR_INVALID_VALUE, as for any range outside device memory. */
CUresult sim_mem_check(CUdeviceptr p, size_t n, bool resident_only)
{
    if (!sim_range_fits(p, n))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned kinds = !resident_only ? SIM_MEM_ALL : sim_cfg.strict_copies ? SIM_MEM_RESIDENT : SIM_MEM_DEVICE_SIDE;
    if (sim_reg_find(p, n, kinds, NULL) || sim_vmm_reaches(p, n, resident_only) || sim_graph_mem_contains(p, n))
        return CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_VALUE;
}

/* Potentially unsafe during stream capture (cuThreadExchangeStreamCaptureMode: "a call to
 * cudaMalloc ... is not enqueued asynchronously to a stream, and is not observed by stream
 * capture"), then needs a current context. */
static CUresult alloc(CUdeviceptr *dptr, size_t bytes, enum sim_mem_kind kind, simcuda_kind counted, bool charged)
{
    CUresult rc = sim_capture_unsafe();
    CUcontext ctx;
    if (rc == CUDA_SUCCESS)
        rc = sim_ctx_current(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_range r = {.size = bytes, .kind = kind, .ctx = ctx, .dev = ctx->dev, .counted = counted,
                          .charge = charged ? sim_round(bytes) : 0};
    rc = sim_mem_new(&r);
    if (rc == CUDA_SUCCESS)
        *dptr = r.base;
    return rc;
}

/* cuda.h, cuMemAlloc: "If bytesize is 0, cuMemAlloc() returns CUDA_ERROR_INVALID_VALUE." */
CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    SIM_ENTER(cuMemAlloc_v2);
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc(dptr, bytesize, SIM_MEM_DEVICE, SIMCUDA_DEVICE, true);
}

/* The pitch: WidthInBytes rounded up to 512, and bytes = pitch x Height; false where either
 * overflows size_t. */
static bool pitched_size(size_t width, size_t height, size_t *pitch, size_t *bytes)
{
    size_t up;
    if (__builtin_add_overflow(width, (size_t)511, &up))
        return false;
    *pitch = up / 512 * 512;
    return !__builtin_mul_overflow(*pitch, height, bytes);
}

/* cuda.h, cuMemAllocPitch: "ElementSizeBytes may be 4, 8 or 16"; the pitch "is the width in bytes
 * of the allocation". The pitch here is WidthInBytes rounded up to 512; bytes = pitch x Height.
 * cuMemAllocPitch "Allocates at least WidthInBytes * Height bytes": where the pitch or that product
 * does not fit in a size_t no size can be allocated, so the request itself is out of range,
 * CUDA_ERROR_INVALID_VALUE ("one or more of the parameters passed to the API call is not within an
 * acceptable range of values"); a size that fits but exceeds the device is CUDA_ERROR_OUT_OF_MEMORY
 * ("unable to allocate enough memory"), as for cuMemAlloc. */
CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                    unsigned int ElementSizeBytes)
{
    SIM_ENTER(cuMemAllocPitch_v2);
    size_t pitch, bytes;
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) ||
        !pitched_size(WidthInBytes, Height, &pitch, &bytes))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = alloc(dptr, bytes, SIM_MEM_DEVICE, SIMCUDA_DEVICE, true);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

/* cuda.h, cuMemAllocManaged: "If bytesize is 0, cuMemAllocManaged returns
 * CUDA_ERROR_INVALID_VALUE"; "flags must be one of CU_MEM_ATTACH_GLOBAL or CU_MEM_ATTACH_HOST".
 * Managed memory may oversubscribe the device, so it is not limited by the capacity. */
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    SIM_ENTER(cuMemAllocManaged);
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    return alloc(dptr, bytesize, SIM_MEM_MANAGED, SIMCUDA_MANAGED, false);
}

/* cuda.h, cuMemFree: dptr "must have been returned by a previous call to one of the following
 * memory allocation APIs - cuMemAlloc(), cuMemAllocPitch(), cuMemAllocManaged(),
 * cuMemAllocAsync(), cuMemAllocFromPoolAsync()"; cuGraphAddMemAllocNode: graph allocations "can
 * be freed by passing the allocation to cuMemFreeAsync or cuMemFree". Anything else:
 * CUDA_ERROR_INVALID_VALUE. */
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_ENTER(cuMemFree_v2);
    CUresult rc = sim_capture_unsafe();
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_range r;
    if (sim_reg_take(dptr, SIM_MEM(DEVICE) | SIM_MEM(ASYNC) | SIM_MEM(MANAGED), &r)) {
        sim_mem_release(&r);
        return CUDA_SUCCESS;
    }
    return sim_graph_mem_free(dptr);
}

/* cuda.h: "Returns in *total the total amount of memory available to the the current context.
 * Returns in *free the amount of memory on the device that is free". total = capacity;
 * free = capacity - used. Either output may be NULL. */
CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    SIM_ENTER(cuMemGetInfo_v2);
    CUcontext ctx;
    CUresult rc = sim_ctx_current(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t capacity = sim_cfg.capacity[ctx->dev];
    if (free)
        *free = capacity - sim_device_used(ctx->dev);
    if (total)
        *total = capacity;
    return CUDA_SUCCESS;
}

/* cuda.h: "Returns the base address in *pbase and size in *psize of the allocation ... that
 * contains the input pointer dptr. Both parameters pbase and psize are optional." Any
 * addressable allocation answers (mapped VMM ranges: the mapping); CUDA_ERROR_NOT_FOUND else. */
CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    SIM_ENTER(cuMemGetAddressRange_v2);
    struct sim_range r;
    struct sim_vmm_info v;
    if (sim_reg_find(dptr, 0, SIM_MEM_ALL, &r)) {
        v.map_base = r.base;
        v.map_size = r.size;
    } else if (!sim_vmm_describe(dptr, &v) || !v.mapped) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (pbase)
        *pbase = v.map_base;
    if (psize)
        *psize = v.map_size;
    return CUDA_SUCCESS;
}
