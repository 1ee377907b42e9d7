/* Addressable allocations: the range registry (registry.c), host backing (backing.c) and the
 * shared allocate/release/validate helpers (memory.c). */
#ifndef SIM_MEM_H
#define SIM_MEM_H

#include "sim.h"

enum sim_mem_kind {
    SIM_MEM_DEVICE,     /* cuMemAlloc_v2, cuMemAllocPitch_v2 */
    SIM_MEM_ASYNC,      /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
    SIM_MEM_MANAGED,    /* cuMemAllocManaged */
    SIM_MEM_PINNED,     /* cuMemHostAlloc, cuMemAllocHost_v2 */
    SIM_MEM_REGISTERED, /* cuMemHostRegister_v2 (the caller's memory) */
    SIM_MEM_GRAPH,      /* a graph allocation while attached (graph_mem.c) */
    SIM_MEM_IMPORTED,   /* cuIpcOpenMemHandle(_v2) */
};
#define SIM_MEM(kind) (1u << SIM_MEM_##kind)
#define SIM_MEM_ALL 0x7fu
/* Memory on the device: the "D" side of explicit-kind copies. (Mapped VMM ranges of device
 * handles and graph allocations being captured count as well, see sim_mem_check.) */
#define SIM_MEM_RESIDENT (SIM_MEM(DEVICE) | SIM_MEM(ASYNC) | SIM_MEM(MANAGED) | SIM_MEM(GRAPH) | SIM_MEM(IMPORTED))
/* What the "D" side of an explicit-kind copy may name: device memory and page-locked host memory
 * (cuMemHostAlloc and cuMemAllocHost with any flags, cuMemHostRegister'd), by the address the
 * host uses. cuda.h "Unified Addressing" leaves write-combined and registered memory out of its
 * same-address promise; the real driver (580.159, CUDA 13.0, an H200: docs/GPU-VALIDATION.md
 * sim_model, 2026-12-04) took a cuMemcpyDtoD naming mapped, write-combined or registered memory
 * by its host address, and a cuMemcpy2D naming pinned memory as CU_MEMORYTYPE_DEVICE, and
 * refused pageable memory (CUDA_ERROR_INVALID_VALUE). */
#define SIM_MEM_DEVICE_SIDE (SIM_MEM_RESIDENT | SIM_MEM(PINNED) | SIM_MEM(REGISTERED))

struct sim_range {
    uintptr_t base;
    size_t size;            /* requested bytes */
    enum sim_mem_kind kind;
    CUcontext ctx;          /* the context that allocated, registered or imported it */
    int dev;
    simcuda_kind counted;   /* simcuda_live_bytes kind (SIM_NO_KIND: none) */
    uint64_t charge;        /* bytes charged to the device's used memory */
    unsigned flags;         /* cuMemHostAlloc / cuMemHostRegister flags */
    CUmemoryPool pool;      /* SIM_MEM_ASYNC */
    uint64_t id;            /* CU_POINTER_ATTRIBUTE_BUFFER_ID, unique over the process */
};

/* Registry of disjoint ranges. sim_reg_add assigns r->id; it fails with
 * CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED when r overlaps a range whose kind is in `exclusive`. */
CUresult sim_reg_add(struct sim_range *r, unsigned exclusive);
bool sim_reg_take(uintptr_t base, unsigned kinds, struct sim_range *out);
bool sim_reg_find(uintptr_t addr, size_t len, unsigned kinds, struct sim_range *out);
/* Removes every range of `ctx` whose kind is in `kinds`; returns them in a malloc'd array. */
size_t sim_reg_take_ctx(CUcontext ctx, unsigned kinds, struct sim_range **out);

/* Host memory standing in for device memory: 256-byte aligned, large sizes mmap'd NORESERVE. */
void *sim_backing_alloc(size_t size);
void sim_backing_free(void *p, size_t size);

/* Accounts r (r->counted, r->charge on r->dev), backs it with fresh memory, registers it and sets
 * r->base. CUDA_ERROR_OUT_OF_MEMORY with nothing allocated when the charge does not fit. */
CUresult sim_mem_new(struct sim_range *r);
/* Undoes sim_mem_new (or a registration) for a range already taken out of the registry. */
void sim_mem_release(const struct sim_range *r);
/* CUDA_SUCCESS when [p, p+n) lies in one allocation the device can reach: with resident_only
 * (an explicit copy's "D" side) device memory, page-locked host memory (SIM_MEM_DEVICE_SIDE) and
 * VMM ranges of device handles; without, also host-located VMM memory. A range whose end wraps is
 * CUDA_ERROR_INVALID_VALUE. */
CUresult sim_mem_check(CUdeviceptr p, size_t n, bool resident_only);

/* Whether [p, p+n) ends within the address space: p + n does not wrap (one ending at exactly
 * 2^64 is refused too: no user memory reaches the top of the address space). */
static inline bool sim_range_fits(uintptr_t p, size_t n)
{
    uintptr_t end;
    return !__builtin_add_overflow(p, n, &end);
}

#endif
