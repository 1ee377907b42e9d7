/* cuPointerGetAttribute and cuPointerGetAttributes over the registry and VMM reservations.
 * Modelled attributes: CONTEXT, MEMORY_TYPE, DEVICE_POINTER, HOST_POINTER, SYNC_MEMOPS, BUFFER_ID,
 * IS_MANAGED, DEVICE_ORDINAL, IS_LEGACY_CUDA_IPC_CAPABLE, RANGE_START_ADDR, RANGE_SIZE, MAPPED,
 * MEMPOOL_HANDLE (others: CUDA_ERROR_INVALID_VALUE). Boolean attributes are written as int.
 * Device-resident memory (device, async, graph, imported) has no host pointer; pinned and
 * registered memory has both (unified addressing, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: the
 * device pointer is the host pointer); managed memory reads as device memory with IS_MANAGED. VMM
 * ranges are not bound to a context (CONTEXT is NULL). Stream-ordered allocations are not either
 * (cuda.h cuCtxDestroy: "not associated with any CUDA context"): CONTEXT is
 * CUDA_ERROR_INVALID_VALUE for them (cuPointerGetAttribute: not "allocated by, mapped by, or
 * registered with a CUcontext"), NULL from cuPointerGetAttributes. */
#include "mem.h"
#include "vmm.h"

struct info {
    bool known;       /* allocated, registered, imported, or a VMM reservation */
    bool no_ctx;      /* a stream-ordered allocation: no context to answer */
    bool has_dptr, has_hptr;
    CUmemorytype type;
    CUcontext ctx;
    uintptr_t ptr;
    int managed, ordinal, mapped, ipc_capable;
    uintptr_t start;
    size_t size;
    CUmemoryPool pool;
    uint64_t id;
};

static void describe(uintptr_t p, struct info *in)
{
    struct sim_range r;
    struct sim_vmm_info v;
    *in = (struct info){.ptr = p, .ordinal = -2};
    if (sim_reg_find(p, 0, SIM_MEM_ALL, &r)) {
        bool host = r.kind == SIM_MEM_PINNED || r.kind == SIM_MEM_REGISTERED;
        *in = (struct info){.known = true, .has_dptr = true, .has_hptr = host || r.kind == SIM_MEM_MANAGED,
                            .type = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE, .ctx = r.ctx, .ptr = p,
                            .managed = r.kind == SIM_MEM_MANAGED, .ordinal = r.dev, .mapped = 1,
                            .ipc_capable = r.kind == SIM_MEM_DEVICE, .start = r.base, .size = r.size,
                            .pool = r.pool, .id = r.id};
        if (r.kind == SIM_MEM_ASYNC) {
            in->no_ctx = true;
            in->ctx = NULL;
        }
    } else if (sim_vmm_describe(p, &v)) {
        /* cuda.h: RANGE_START_ADDR / RANGE_SIZE: "the address of the mappable address range ptr
         * references (e.g. from cuMemAddressReserve)". */
        *in = (struct info){.known = true, .has_dptr = v.mapped, .has_hptr = v.mapped && v.dev < 0,
                            .type = !v.mapped ? 0 : v.dev >= 0 ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST,
                            .ptr = p, .ordinal = v.dev >= 0 ? v.dev : -2, .mapped = v.mapped,
                            .start = v.res_base, .size = v.res_size};
    }
}

/* Writes one attribute: CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE when the pointer has no such value
 * (the zero default is written), CUDA_ERROR_NOT_SUPPORTED for attributes not modelled. */
static CUresult read_attribute(const struct info *in, CUpointer_attribute attr, void *data)
{
    bool ok = in->known;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        ok = ok && !in->no_ctx;
        *(CUcontext *)data = ok ? in->ctx : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        ok = ok && in->type != 0;
        *(unsigned int *)data = ok ? in->type : 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        ok = ok && in->has_dptr;
        *(CUdeviceptr *)data = ok ? in->ptr : 0;
        break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        ok = ok && in->has_hptr;
        *(void **)data = ok ? (void *)in->ptr : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(int *)data = ok;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        ok = ok && in->id;
        *(unsigned long long *)data = in->id;
        break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = in->managed;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = in->ordinal;
        break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = in->ipc_capable;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = in->start;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = in->size;
        break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = in->mapped;
        break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        ok = ok && in->pool;
        *(CUmemoryPool *)data = in->pool;
        break;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuda.h: "If ptr was not allocated by, mapped by, or registered with a CUcontext which uses
 * unified virtual addressing then CUDA_ERROR_INVALID_VALUE is returned"; likewise when "there
 * exists no device pointer value" / "no host pointer value" for the pointer. */
CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SIM_ENTER(cuPointerGetAttribute);
    struct info in;
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    describe(ptr, &in);
    CUresult rc = read_attribute(&in, attribute, data);
    return rc == CUDA_SUCCESS ? rc : CUDA_ERROR_INVALID_VALUE;
}

/* cuda.h: "Unlike cuPointerGetAttribute, this function will not return an error when the ptr
 * encountered is not a valid CUDA pointer. Instead, the attributes are assigned default NULL
 * values and CUDA_SUCCESS is returned." */
CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                        CUdeviceptr ptr)
{
    SIM_ENTER(cuPointerGetAttributes);
    struct info in;
    if (numAttributes && (!attributes || !data))
        return CUDA_ERROR_INVALID_VALUE;
    describe(ptr, &in);
    for (unsigned i = 0; i < numAttributes; i++)
        if (!data[i] || read_attribute(&in, attributes[i], data[i]) == CUDA_ERROR_NOT_SUPPORTED)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}
