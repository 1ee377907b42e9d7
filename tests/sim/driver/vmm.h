/* The virtual memory management API: physical handles (vmm.c), address reservations and
 * mappings (vmm_map.c). One lock guards both. */
#ifndef SIM_VMM_H
#define SIM_VMM_H

#include <pthread.h>

#include "sim.h"

/* A cuMemCreate (or imported) allocation, backed by a memfd. Its physical memory lives while the
 * handle is unreleased or any mapping of it remains (cuda.h, cuMemRelease). */
struct sim_vmm_handle {
    int fd;
    size_t size;
    CUmemAllocationProp prop;
    int dev;        /* device of a device-located handle; -1 for host locations */
    bool counted;   /* made here with a device location: SIMCUDA_VMM and capacity */
    unsigned refs;  /* cuMemCreate / cuMemImportFromShareableHandle / cuMemRetainAllocationHandle */
    unsigned maps;  /* live cuMemMap mappings */
    bool multicast; /* a multicast object (multicast.c): no memory of its own */
    unsigned mc_team;   /* its CUmulticastObjectProp::numDevices */
    uint64_t mc_added;  /* the devices cuMulticastAddDevice added through this handle (bits) */
    struct sim_vmm_handle *next;
};

extern pthread_mutex_t sim_vmm_lock;

/* Caller holds the lock. */
struct sim_vmm_handle *sim_vmm_handle_find(CUmemGenericAllocationHandle handle);
/* Caller holds the lock. Frees the handle once it is released and unmapped. */
void sim_vmm_handle_put(struct sim_vmm_handle *h);
/* A new handle (one reference) of the memfd `fd` (owned from here, closed on failure); device
 * handles made here (`counted`) count as SIMCUDA_VMM against the device's capacity. Takes the
 * lock. */
CUresult sim_vmm_handle_new(int fd, size_t size, const CUmemAllocationProp *prop, int dev, bool counted,
                            CUmemGenericAllocationHandle *out);
/* The memfd name of multicast objects, so that an importer knows one: SIM_MULTICAST_MEMFD "-n<numDevices>". */
#define SIM_MULTICAST_MEMFD "simcuda-vmm-multicast"

struct sim_vmm_info {
    uintptr_t res_base, map_base;
    size_t res_size, map_size;
    bool mapped;
    int dev; /* of the mapped handle (-1: host) */
};

/* The reservation (and mapping, if any) containing p. */
bool sim_vmm_describe(uintptr_t p, struct sim_vmm_info *out);
/* Whether [p, p+n) is covered by contiguous accessible mappings (of device handles only, when
 * resident_only). */
bool sim_vmm_reaches(uintptr_t p, size_t n, bool resident_only);

#endif
