/* Multicast objects (cuda.h "Multicast Object Management", CUDA 12.1; NCCL's NVLS buffers): a
 * multicast object has no memory of its own; the memory bound to it (cuMulticastBindMem,
 * cuMulticastBindAddr) is its devices' cuMemCreate allocations, counted as `vmm` where they were
 * made. One made here (cuMulticastCreate, not wrapped) is in no table. One imported from another
 * process comes through cuMemImportFromShareableHandle, which cannot tell it from memory, and would
 * count as `imported` by its first mapping (hooks_vmm.c): it is known for a multicast object by its
 * first use as one (cuMulticastAddDevice, which every team member calls before mapping it, the
 * binds, cuMulticastUnbind). From then its mappings size nothing, and what an earlier mapping
 * counted as imported memory is counted freed. */
#include "shim/account.h"
#include "shim/shim.h"

#if CUDA_VERSION >= 12010
/* Under the entry's lock: an imported handle marked multicast, its size (if a mapping had sized
 * it) handed back in *arg. */
static bool mark(struct shim_entry *e, void *arg)
{
    if (e->kind == CUSHIM_KIND_IMPORTED && !(e->flags & SHIM_F_MULTICAST)) {
        e->flags |= SHIM_F_MULTICAST;
        *(uint64_t *)arg = e->size;
        e->size = 0;
    }
    return true;
}

/* After a multicast call the driver accepted: mcHandle is a multicast object. */
static void multicast_seen(CUmemGenericAllocationHandle mc)
{
    if (!shim_enter())
        return;
    uint64_t sized = 0;
    struct shim_entry e;
    if (table_update(&shim.vmm_handles, mc, mark, &sized, &e) && sized)
        account_free(e.device, CUSHIM_KIND_IMPORTED, sized, 0);
    shim_leave();
}

SHIM_EXPORT CUresult CUDAAPI cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev)
{
    REAL_OR_FAIL(cuMulticastAddDevice);
    CUresult r = real_(mcHandle, dev);
    if (r == CUDA_SUCCESS)
        multicast_seen(mcHandle);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                                CUmemGenericAllocationHandle memHandle, size_t memOffset,
                                                size_t size, unsigned long long flags)
{
    REAL_OR_FAIL(cuMulticastBindMem);
    CUresult r = real_(mcHandle, mcOffset, memHandle, memOffset, size, flags);
    if (r == CUDA_SUCCESS)
        multicast_seen(mcHandle);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                                 CUdeviceptr memptr, size_t size, unsigned long long flags)
{
    REAL_OR_FAIL(cuMulticastBindAddr);
    CUresult r = real_(mcHandle, mcOffset, memptr, size, flags);
    if (r == CUDA_SUCCESS)
        multicast_seen(mcHandle);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev,
                                               size_t mcOffset, size_t size)
{
    REAL_OR_FAIL(cuMulticastUnbind);
    CUresult r = real_(mcHandle, dev, mcOffset, size);
    if (r == CUDA_SUCCESS)
        multicast_seen(mcHandle);
    return r;
}
#endif
