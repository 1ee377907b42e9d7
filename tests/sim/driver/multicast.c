/* Multicast objects (cuda.h "Multicast Object Management", CUDA 12.1): cuMulticastCreate,
 * cuMulticastAddDevice, cuMulticastBindMem, cuMulticastBindAddr, cuMulticastUnbind,
 * cuMulticastGetGranularity. A multicast object is a VMM handle (vmm.h, `multicast`) with no memory
 * of its own: never counted, mapped with cuMemMap, released with cuMemRelease, exported and
 * imported as a POSIX file descriptor like any handle (cuda.h cuMulticastCreate). Deviations: every
 * device supports multicast; binds and mappings do not wait for the team to be complete (the
 * driver blocks until all devices are added); data written through a multicast mapping lands in
 * the object's own backing, not in the memory bound to it. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vmm.h"

/* cuda.h cuMulticastGetGranularity: "the minimal or recommended granularity for multicast
 * object": SIMCUDA_VMM_GRANULARITY, as for cuMemCreate. */
CUresult CUDAAPI cuMulticastGetGranularity(size_t *granularity, const CUmulticastObjectProp *prop,
                                           CUmulticastGranularity_flags option)
{
    SIM_ENTER(cuMulticastGetGranularity);
    if (!granularity || !prop || (option != CU_MULTICAST_GRANULARITY_MINIMUM &&
                                  option != CU_MULTICAST_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = sim_cfg.vmm_granularity;
    return CUDA_SUCCESS;
}

/* cuda.h cuMulticastCreate: "This size must be a multiple of the value returned by
 * cuMulticastGetGranularity"; CUmulticastObjectProp::flags "must be zero now". */
CUresult CUDAAPI cuMulticastCreate(CUmemGenericAllocationHandle *mcHandle, const CUmulticastObjectProp *prop)
{
    SIM_ENTER(cuMulticastCreate);
    if (!mcHandle || !prop || prop->numDevices == 0 || prop->size == 0 ||
        prop->size % sim_cfg.vmm_granularity != 0 || prop->flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    char name[64];
    snprintf(name, sizeof name, SIM_MULTICAST_MEMFD "-n%u", prop->numDevices);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)prop->size) != 0) {
        if (fd >= 0)
            close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUmemAllocationProp p = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .requestedHandleTypes = (CUmemAllocationHandleType)prop->handleTypes,
                             .location = {CU_MEM_LOCATION_TYPE_INVALID, 0}};
    CUresult rc = sim_vmm_handle_new(fd, prop->size, &p, -1, false, mcHandle);
    if (rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&sim_vmm_lock);
        struct sim_vmm_handle *h = sim_vmm_handle_find(*mcHandle);
        h->multicast = true;
        h->mc_team = prop->numDevices;
        pthread_mutex_unlock(&sim_vmm_lock);
    }
    return rc;
}

/* A live multicast object (kind 1) or memory handle (kind 0) covering [offset, offset + size). */
static bool handle_ok(CUmemGenericAllocationHandle handle, bool multicast, size_t offset, size_t size)
{
    pthread_mutex_lock(&sim_vmm_lock);
    struct sim_vmm_handle *h = sim_vmm_handle_find(handle);
    bool ok = h && h->multicast == multicast && offset <= h->size && size <= h->size - offset &&
              offset % sim_cfg.vmm_granularity == 0 && size % sim_cfg.vmm_granularity == 0;
    pthread_mutex_unlock(&sim_vmm_lock);
    return ok;
}

/* cuda.h cuMulticastAddDevice: "The added device will be a part of the multicast team of size
 * specified by CUmulticastObjectProp::numDevices"; "The association of the device to the multicast
 * object is permanent": a device added twice, or one more than the team's size, is refused
 * (CUDA_ERROR_INVALID_VALUE; the header names no error for it). The simulator keeps the team per
 * handle: an imported object's team starts empty in the importer. */
CUresult CUDAAPI cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev)
{
    SIM_ENTER(cuMulticastAddDevice);
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_vmm_lock);
    struct sim_vmm_handle *h = sim_vmm_handle_find(mcHandle);
    uint64_t bit = 1ull << dev;
    bool ok = h && h->multicast && !(h->mc_added & bit) &&
              (unsigned)__builtin_popcountll(h->mc_added) < h->mc_team;
    if (ok)
        h->mc_added |= bit;
    pthread_mutex_unlock(&sim_vmm_lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuda.h cuMulticastBindMem: memHandle "created via cuMemCreate"; size and both offsets multiples
 * of the multicast granularity; "flags for future use, must be zero now". */
CUresult CUDAAPI cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                    CUmemGenericAllocationHandle memHandle, size_t memOffset, size_t size,
                                    unsigned long long flags)
{
    SIM_ENTER(cuMulticastBindMem);
    if (flags != 0 || size == 0 || !handle_ok(mcHandle, true, mcOffset, size) ||
        !handle_ok(memHandle, false, memOffset, size))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* cuda.h cuMulticastBindAddr: memptr "a valid virtual address backed by memory allocated via
 * cuMemCreate". */
CUresult CUDAAPI cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle, size_t mcOffset, CUdeviceptr memptr,
                                     size_t size, unsigned long long flags)
{
    SIM_ENTER(cuMulticastBindAddr);
    struct sim_vmm_info info;
    if (flags != 0 || size == 0 || !handle_ok(mcHandle, true, mcOffset, size) ||
        !sim_vmm_describe((uintptr_t)memptr, &info) || !info.mapped || !sim_vmm_reaches((uintptr_t)memptr, size, false))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset, size_t size)
{
    SIM_ENTER(cuMulticastUnbind);
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    return size != 0 && handle_ok(mcHandle, true, mcOffset, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
