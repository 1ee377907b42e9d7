/* VMM address space: cuMemAddressReserve, cuMemAddressFree, cuMemMap, cuMemUnmap, cuMemSetAccess,
 * cuMemGetAccess, cuMemRetainAllocationHandle. A reservation is a PROT_NONE mapping; cuMemMap maps
 * the handle's memfd MAP_SHARED|MAP_FIXED over it (inaccessible: cuda.h, cuMemMap: "calling
 * cuMemMap does not make the address accessible"); cuMemSetAccess is mprotect. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vmm.h"

struct reservation {
    uintptr_t base;
    size_t size;
    struct reservation *next;
};

struct mapping {
    uintptr_t base;
    size_t size;
    struct sim_vmm_handle *handle;
    unsigned long long access; /* CUmemAccess_flags */
    struct mapping *next;
};

static struct reservation *reservations;
static struct mapping *mappings;

/* Caller holds the lock (for both finders). */
static struct reservation *reservation_at(uintptr_t p)
{
    for (struct reservation *r = reservations; r; r = r->next)
        if (p - r->base < r->size)
            return r;
    return NULL;
}

static struct mapping *mapping_at(uintptr_t p)
{
    for (struct mapping *m = mappings; m; m = m->next)
        if (p - m->base < m->size)
            return m;
    return NULL;
}

/* Caller holds the lock. Whether [p, p+size) is exactly a run of whole, contiguous mappings. */
static bool whole_mappings(uintptr_t p, size_t size)
{
    uintptr_t end = p + size;
    while (p < end) {
        struct mapping *m = mapping_at(p);
        if (!m || m->base != p || m->size > end - p)
            return false;
        p += m->size;
    }
    return size > 0;
}

bool sim_vmm_describe(uintptr_t p, struct sim_vmm_info *out)
{
    pthread_mutex_lock(&sim_vmm_lock);
    struct reservation *r = reservation_at(p);
    struct mapping *m = r ? mapping_at(p) : NULL;
    if (r)
        *out = (struct sim_vmm_info){.res_base = r->base, .res_size = r->size, .mapped = m != NULL,
                                     .map_base = m ? m->base : 0, .map_size = m ? m->size : 0,
                                     .dev = m ? m->handle->dev : -1};
    pthread_mutex_unlock(&sim_vmm_lock);
    return r != NULL;
}

bool sim_vmm_reaches(uintptr_t p, size_t n, bool resident_only)
{
    uintptr_t end;
    if (__builtin_add_overflow(p, n ? n : 1, &end))
        return false; /* a wrapped end would end the walk below at once, with ok still true */
    bool ok = true;
    pthread_mutex_lock(&sim_vmm_lock);
    while (ok && p < end) {
        struct mapping *m = mapping_at(p);
        ok = m && m->access != CU_MEM_ACCESS_FLAGS_PROT_NONE && (!resident_only || m->handle->dev >= 0);
        if (ok)
            p = m->base + m->size;
    }
    pthread_mutex_unlock(&sim_vmm_lock);
    return ok;
}

/* cuda.h: "The size and address parameters must be a multiple of the host page size and the
 * alignment must be a power of two or zero for default alignment"; addr is only a hint; "flags -
 * Currently unused, must be zero". */
CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                     unsigned long long flags)
{
    SIM_ENTER(cuMemAddressReserve);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!alignment)
        alignment = sim_cfg.vmm_granularity;
    if (!ptr || size == 0 || size % page || addr % page || flags != 0 || (alignment & (alignment - 1)))
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < page)
        alignment = page;
    struct reservation *r = malloc(sizeof *r);
    void *p = r ? mmap((void *)addr, size + alignment, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(r);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uintptr_t start = (uintptr_t)p, base = sim_round_to(start, alignment);
    if (base > start)
        munmap(p, base - start);
    if (alignment > base - start)
        munmap((void *)(base + size), alignment - (base - start));
    *r = (struct reservation){.base = base, .size = size};
    pthread_mutex_lock(&sim_vmm_lock);
    r->next = reservations;
    reservations = r;
    pthread_mutex_unlock(&sim_vmm_lock);
    *ptr = base;
    return CUDA_SUCCESS;
}

/* cuda.h: "The size must match what was given to memAddressReserve and the ptr given must match
 * what was returned from memAddressReserve." A reservation that still holds mappings is refused. */
CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_ENTER(cuMemAddressFree);
    pthread_mutex_lock(&sim_vmm_lock);
    struct reservation **p = &reservations;
    while (*p && ((*p)->base != ptr || (*p)->size != size))
        p = &(*p)->next;
    struct reservation *r = *p;
    for (struct mapping *m = mappings; r && m; m = m->next)
        if (m->base - r->base < r->size)
            r = NULL;
    if (r) {
        *p = r->next;
        munmap((void *)r->base, r->size);
        free(r);
    }
    pthread_mutex_unlock(&sim_vmm_lock);
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuda.h: the range "must be an address reservation previously reserved with
 * cuMemAddressReserve, and offset + size must be less than the size of the memory allocation.
 * Both ptr, size, and offset must be a multiple of the value given via
 * cuMemGetAllocationGranularity"; offset "currently must be zero"; "cuMemMap can only create
 * mappings on VA range reservations that are not currently mapped." */
CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                          unsigned long long flags)
{
    SIM_ENTER(cuMemMap);
    uint64_t g = sim_cfg.vmm_granularity;
    if (size == 0 || ptr % g || size % g || offset != 0 || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    struct mapping *m = malloc(sizeof *m);
    pthread_mutex_lock(&sim_vmm_lock);
    struct sim_vmm_handle *h = sim_vmm_handle_find(handle);
    struct reservation *r = reservation_at(ptr);
    bool free_range = r && size <= r->size - (ptr - r->base);
    for (struct mapping *o = mappings; free_range && o; o = o->next)
        free_range = o->base + o->size <= ptr || ptr + size <= o->base;
    if (!m)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if (h && free_range && size <= h->size &&
             mmap((void *)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0) != MAP_FAILED)
        rc = CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        *m = (struct mapping){.base = ptr, .size = size, .handle = h, .access = CU_MEM_ACCESS_FLAGS_PROT_NONE,
                              .next = mappings};
        mappings = m;
        h->maps++;
    }
    pthread_mutex_unlock(&sim_vmm_lock);
    if (rc != CUDA_SUCCESS)
        free(m);
    return rc;
}

/* cuda.h: "The range must be the entire contiguous address range that was mapped to. In other
 * words, cuMemUnmap cannot unmap a sub-range of an address range mapped by cuMemCreate /
 * cuMemMap. Any backing memory allocations will be freed if there are no existing mappings and
 * there are no unreleased memory handles. When cuMemUnmap returns successfully the address range
 * is converted to an address reservation". One call may unmap several contiguous mappings. */
CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_ENTER(cuMemUnmap);
    pthread_mutex_lock(&sim_vmm_lock);
    bool whole = whole_mappings(ptr, size);
    for (struct mapping **p = &mappings; whole && *p;) {
        struct mapping *m = *p;
        if (m->base - ptr >= size) {
            p = &m->next;
            continue;
        }
        *p = m->next;
        mmap((void *)m->base, m->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        m->handle->maps--;
        sim_vmm_handle_put(m->handle);
        free(m);
    }
    pthread_mutex_unlock(&sim_vmm_lock);
    return whole ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static int prot_of(unsigned long long access)
{
    return access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
           : access == CU_MEM_ACCESS_FLAGS_PROT_READ   ? PROT_READ
                                                        : PROT_NONE;
}

/* cuda.h: "The range must be a fully mapped address range containing all allocations created by
 * cuMemMap / cuMemCreate." The host sees what the most permissive descriptor grants (device and
 * host share the memory here). */
CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    SIM_ENTER(cuMemSetAccess);
    unsigned long long access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        const CUmemLocation *l = &desc[i].location;
        if ((l->type == CU_MEM_LOCATION_TYPE_DEVICE && !sim_device_valid(l->id)) ||
            (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
             desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].flags > access)
            access = desc[i].flags;
    }
    pthread_mutex_lock(&sim_vmm_lock);
    bool whole = whole_mappings(ptr, size);
    for (struct mapping *m = mappings; whole && m; m = m->next)
        if (m->base - ptr < size) {
            mprotect((void *)m->base, m->size, prot_of(access));
            m->access = access;
        }
    pthread_mutex_unlock(&sim_vmm_lock);
    return whole ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    SIM_ENTER(cuMemGetAccess);
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_vmm_lock);
    struct mapping *m = mapping_at(ptr);
    if (m)
        *flags = m->access;
    pthread_mutex_unlock(&sim_vmm_lock);
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuda.h: "The handle is guaranteed to be the same handle value used to map the memory. If the
 * address requested is not mapped, the function will fail. The returned handle must be released
 * with corresponding number of calls to cuMemRelease." */
CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    SIM_ENTER(cuMemRetainAllocationHandle);
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_vmm_lock);
    struct mapping *m = mapping_at((uintptr_t)addr);
    if (m) {
        m->handle->refs++;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->handle;
    }
    pthread_mutex_unlock(&sim_vmm_lock);
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
