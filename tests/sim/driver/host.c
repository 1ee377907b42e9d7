/* Page-locked host memory: cuMemHostAlloc, cuMemAllocHost_v2, cuMemFreeHost,
 * cuMemHostGetDevicePointer_v2, cuMemHostGetFlags, cuMemHostRegister_v2, cuMemHostUnregister.
 * Counted as SIMCUDA_PINNED_HOST / SIMCUDA_REGISTERED_HOST on the device of the current context,
 * never against its capacity. */
#include "capture.h"
#include "ctx.h"
#include "mem.h"

#define HOST_ALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)
#define REGISTER_FLAGS                                                                               \
    (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |    \
     CU_MEMHOSTREGISTER_READ_ONLY)

/* Potentially unsafe during stream capture; needs a current context. */
static CUresult host_range(struct sim_range *r, enum sim_mem_kind kind, simcuda_kind counted, size_t size,
                           unsigned flags)
{
    CUresult rc = sim_capture_unsafe();
    CUcontext ctx;
    if (rc == CUDA_SUCCESS)
        rc = sim_ctx_current(&ctx);
    if (rc == CUDA_SUCCESS)
        *r = (struct sim_range){.size = size, .kind = kind, .ctx = ctx, .dev = ctx->dev, .counted = counted,
                                .flags = flags};
    return rc;
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int flags)
{
    struct sim_range r;
    if (!pp || bytesize == 0 || (flags & ~HOST_ALLOC_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = host_range(&r, SIM_MEM_PINNED, SIMCUDA_PINNED_HOST, bytesize, flags);
    if (rc == CUDA_SUCCESS)
        rc = sim_mem_new(&r);
    if (rc == CUDA_SUCCESS)
        *pp = (void *)r.base;
    return rc;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    SIM_ENTER(cuMemHostAlloc);
    return host_alloc(pp, bytesize, Flags);
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    SIM_ENTER(cuMemAllocHost_v2);
    return host_alloc(pp, bytesize, 0);
}

/* cuda.h: p "must have been returned by a previous call to cuMemAllocHost()" (or cuMemHostAlloc). */
CUresult CUDAAPI cuMemFreeHost(void *p)
{
    SIM_ENTER(cuMemFreeHost);
    CUresult rc = sim_capture_unsafe();
    struct sim_range r;
    if (rc == CUDA_SUCCESS && !sim_reg_take((uintptr_t)p, SIM_MEM(PINNED), &r))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        sim_mem_release(&r);
    return rc;
}

/* cuda.h, cuMemHostAlloc: "all host memory allocated using cuMemHostAlloc() will automatically be
 * immediately accessible to all contexts on all devices which support unified addressing"; the
 * device reports CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, so "the device pointer returned by
 * cuMemHostGetDevicePointer() will match the original pointer p". "Flags ... must be 0". */
CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    SIM_ENTER(cuMemHostGetDevicePointer_v2);
    if (!pdptr || Flags != 0 || !sim_reg_find((uintptr_t)p, 0, SIM_MEM(PINNED) | SIM_MEM(REGISTERED), NULL))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

/* cuda.h: "cuMemHostGetFlags() will fail if the pointer does not reside in an allocation performed
 * by cuMemAllocHost() or cuMemHostAlloc()." */
CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    SIM_ENTER(cuMemHostGetFlags);
    struct sim_range r;
    if (!pFlags || !sim_reg_find((uintptr_t)p, 0, SIM_MEM(PINNED), &r))
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = r.flags;
    return CUDA_SUCCESS;
}

/* A range overlapping any known allocation or registration fails with
 * CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED. cuda.h: "Page-locks the memory range specified by p
 * and bytesize": a range whose end p + bytesize wraps past the end of the address space is no
 * memory range, CUDA_ERROR_INVALID_VALUE (a parameter "not within an acceptable range of values"),
 * and so is a size past 2^63 (more than the user half of the address space holds; it would also
 * overflow the signed accounting). */
CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    SIM_ENTER(cuMemHostRegister_v2);
    struct sim_range r;
    if (!p || bytesize == 0 || (Flags & ~REGISTER_FLAGS) || !sim_range_fits((uintptr_t)p, bytesize) ||
        bytesize > INT64_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = host_range(&r, SIM_MEM_REGISTERED, SIMCUDA_REGISTERED_HOST, bytesize, Flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    r.base = (uintptr_t)p;
    rc = sim_reg_add(&r, SIM_MEM_ALL);
    if (rc == CUDA_SUCCESS)
        sim_account(r.dev, r.counted, (int64_t)r.size, 0);
    return rc;
}

/* cuda.h: "The base address must be the same one specified to cuMemHostRegister()"; otherwise
 * CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED. */
CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    SIM_ENTER(cuMemHostUnregister);
    struct sim_range r;
    if (!sim_reg_take((uintptr_t)p, SIM_MEM(REGISTERED), &r))
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    sim_mem_release(&r);
    return CUDA_SUCCESS;
}
