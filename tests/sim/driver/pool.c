/* Memory pools: cuDeviceGetDefaultMemPool, cuDeviceGetMemPool, cuDeviceSetMemPool,
 * cuMemPoolCreate, cuMemPoolDestroy, cuMemPoolGetAttribute, cuMemPoolSetAttribute,
 * cuMemPoolTrimTo, and CUDA 13's location-based cuMemGetDefaultMemPool, cuMemGetMemPool,
 * cuMemSetMemPool (pinned pools of a device, the host or a host NUMA node; the simulator has no
 * managed pools: CUDA_ERROR_NOT_SUPPORTED, one of cuMemGetDefaultMemPool's documented results).
 *
 * A pool's USED_MEM counts its live allocations rounded to SIMCUDA_GRANULARITY; its reserve
 * (RESERVED_MEM) grows in 2 MiB chunks to cover them and keeps freed memory until
 * cuMemPoolTrimTo, or until a stream, event or context synchronize applies the release threshold
 * (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: "When more than the release threshold bytes of memory are
 * held by the memory pool, the allocator will try to release memory back to the OS on the next
 * call to stream, event or context synchronize. (default 0)"). The reserve of a device pool is
 * used device memory (SIMCUDA_POOL_RESERVED); host pools (CU_MEM_LOCATION_TYPE_HOST /
 * HOST_NUMA) do not touch device capacity.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx.h"
#include "mem.h"
#include "pool.h"

#define POOL_MAGIC 0x504f4f4cu

struct CUmemPoolHandle_st {
    uint32_t magic;
    CUmemPoolProps props;
    int dev; /* a device pool's device; -1 for host pools */
    bool is_default, destroyed;
    int reuse[3]; /* the CU_MEMPOOL_ATTR_REUSE_* switches, stored only */
    bool imported; /* cuMemPoolImportFromShareableHandle: another process's pool, no memory here */
    int export_fd; /* the memfd its exports duplicate (cuMemPoolExportToShareableHandle); 0: none */
    uint64_t threshold, reserved, reserved_high, used, used_high, outstanding;
    struct CUmemPoolHandle_st *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUmemoryPool pools; /* every pool not yet released */
static CUmemoryPool defaults[SIM_MAX_DEVICES], current[SIM_MAX_DEVICES];
/* Host pools by location (CUDA 13): [0] CU_MEM_LOCATION_TYPE_HOST, [1 + n] HOST_NUMA node n. */
#define SIM_HOST_LOCATIONS 9
static CUmemoryPool host_defaults[SIM_HOST_LOCATIONS], host_current[SIM_HOST_LOCATIONS];

/* Caller holds the lock. */
static CUmemoryPool pool_new(const CUmemPoolProps *props, int dev)
{
    CUmemoryPool p = calloc(1, sizeof *p);
    if (p) {
        *p = (struct CUmemPoolHandle_st){.magic = POOL_MAGIC, .props = *props, .dev = dev, .reuse = {1, 1, 1},
                                         .next = pools};
        pools = p;
    }
    return p;
}

/* Caller holds the lock. */
static CUresult default_pool(int dev, CUmemoryPool *out)
{
    if (!defaults[dev]) {
        CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
        defaults[dev] = pool_new(&props, dev);
        if (!defaults[dev])
            return CUDA_ERROR_OUT_OF_MEMORY;
        defaults[dev]->is_default = true;
    }
    *out = defaults[dev];
    return CUDA_SUCCESS;
}

CUresult sim_pool_check(CUmemoryPool pool)
{
    for (CUmemoryPool p = pools; pool && p; p = p->next)
        if (p == pool)
            return pool->magic == POOL_MAGIC && !pool->destroyed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    return CUDA_ERROR_INVALID_VALUE;
}

static void release_if_done(CUmemoryPool p); /* below */

CUresult sim_pool_hold(CUmemoryPool *pool, int dev)
{
    pthread_mutex_lock(&lock);
    CUresult rc = *pool                 ? sim_pool_check(*pool)
                  : current[dev] != NULL ? (*pool = current[dev], CUDA_SUCCESS)
                                         : default_pool(dev, pool);
    if (rc == CUDA_SUCCESS)
        (*pool)->outstanding++;
    pthread_mutex_unlock(&lock);
    return rc;
}

void sim_pool_unhold(CUmemoryPool p)
{
    pthread_mutex_lock(&lock);
    p->outstanding--;
    release_if_done(p);
    pthread_mutex_unlock(&lock);
}

CUresult sim_pool_current(int dev, CUmemoryPool *out)
{
    pthread_mutex_lock(&lock);
    CUresult rc = current[dev] ? (*out = current[dev], CUDA_SUCCESS) : default_pool(dev, out);
    pthread_mutex_unlock(&lock);
    return rc;
}

int sim_pool_device(CUmemoryPool pool, int dev)
{
    return pool->dev >= 0 ? pool->dev : dev;
}

bool sim_pool_is_host(CUmemoryPool pool)
{
    return pool->dev < 0;
}

void sim_pool_props(CUmemoryPool pool, CUmemPoolProps *out)
{
    *out = pool->props;
}

/* Caller holds the lock. Moves the reserve to `reserved`; growth of a device pool must fit. */
static CUresult set_reserved(CUmemoryPool p, uint64_t reserved)
{
    int64_t delta = (int64_t)reserved - (int64_t)p->reserved;
    CUresult rc = p->dev >= 0 ? sim_account(p->dev, SIMCUDA_POOL_RESERVED, delta, delta) : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        p->reserved = reserved;
        if (reserved > p->reserved_high)
            p->reserved_high = reserved;
    }
    return rc;
}

/* Caller holds the lock. cuMemPoolTrimTo: "If the pool has less than minBytesToKeep reserved, the
 * TrimTo operation is a no-op. Otherwise the pool will be guaranteed to have at least
 * minBytesToKeep bytes reserved after the operation"; "The allocator cannot release OS allocations
 * that back outstanding asynchronous allocations." */
static void trim_to(CUmemoryPool p, uint64_t keep)
{
    if (p->reserved < keep)
        return;
    uint64_t floor = sim_round_to(p->used, SIM_POOL_CHUNK), wanted = sim_round_to(keep, SIM_POOL_CHUNK);
    uint64_t target = floor > wanted ? floor : wanted;
    if (target < p->reserved)
        set_reserved(p, target);
}

/* Caller holds the lock. cuMemPoolDestroy: resources "will be released automatically once there
 * are no more outstanding allocations". */
static void release_if_done(CUmemoryPool p)
{
    if (!p->destroyed || p->outstanding > 0)
        return;
    set_reserved(p, 0);
    if (p->export_fd > 0)
        close(p->export_fd);
    for (CUmemoryPool *q = &pools; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            break;
        }
    p->magic = 0;
    free(p);
}

/* Caller holds the lock. The reserve that holds `used` bytes (grown by whole chunks), or false
 * where it cannot be had: past the pool's maxSize, past the device's capacity (a device pool), or
 * past 2^63 (more than any address space holds; also keeps set_reserved's signed delta exact). */
static bool reserve_for(CUmemoryPool p, uint64_t used, uint64_t *reserved)
{
    *reserved = p->reserved;
    if (used <= p->reserved)
        return true;
    uint64_t growth = sim_round_to(used - p->reserved, SIM_POOL_CHUNK);
    return !__builtin_add_overflow(p->reserved, growth, reserved) && *reserved <= INT64_MAX &&
           !(p->props.maxSize && *reserved > p->props.maxSize) && !(p->dev >= 0 && *reserved > sim_cfg.capacity[p->dev]);
}

/* cuda.h cuMemAllocAsync returns CUDA_ERROR_OUT_OF_MEMORY; a request whose rounded size or reserve
 * overflows, or cannot fit, changes nothing: neither the counters nor the high marks. */
CUresult sim_pool_take(CUmemoryPool p, size_t bytes, struct sim_pool_undo *undo)
{
    uint64_t need = sim_round(bytes), used, reserved;
    CUresult rc = CUDA_SUCCESS;
    /* cuda.h cuMemPoolImportFromShareableHandle: "Imported memory pools do not support creating
     * new allocations." */
    if (p->imported)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    *undo = (struct sim_pool_undo){need, p->reserved, p->reserved_high, p->used_high};
    if (__builtin_add_overflow(p->used, need, &used) || !reserve_for(p, used, &reserved))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else if (reserved != p->reserved)
        rc = set_reserved(p, reserved);
    if (rc == CUDA_SUCCESS) {
        p->used = used;
        if (used > p->used_high)
            p->used_high = used;
        p->outstanding++;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* The reserve shrinks back (to what the remaining allocations need, at least the reserve before)
 * and the high marks to what they were, unless the pool's current values are higher: a mark set
 * by another allocation made and freed between the take and this cancel is lost, a simplification
 * (the simulator's failures after a take are of sizes no host memory can back). */
void sim_pool_cancel(CUmemoryPool p, const struct sim_pool_undo *undo)
{
    pthread_mutex_lock(&lock);
    p->used -= undo->need;
    p->outstanding--;
    uint64_t target = sim_round_to(p->used, SIM_POOL_CHUNK);
    if (target < undo->reserved)
        target = undo->reserved;
    if (target < p->reserved)
        set_reserved(p, target);
    p->reserved_high = undo->reserved_high > p->reserved ? undo->reserved_high : p->reserved;
    p->used_high = undo->used_high > p->used ? undo->used_high : p->used;
    release_if_done(p);
    pthread_mutex_unlock(&lock);
}

void sim_pool_give(CUmemoryPool p, size_t bytes)
{
    pthread_mutex_lock(&lock);
    if (!p->imported) /* an imported allocation is the exporter's memory */
        p->used -= sim_round(bytes);
    p->outstanding--;
    release_if_done(p);
    pthread_mutex_unlock(&lock);
}

void sim_pool_apply_thresholds(int dev)
{
    pthread_mutex_lock(&lock);
    for (CUmemoryPool p = pools; p; p = p->next)
        if ((p->dev == dev || p->dev < 0) && p->reserved > p->threshold)
            trim_to(p, p->threshold);
    pthread_mutex_unlock(&lock);
}

void sim_pool_device_idle(int dev)
{
    pthread_mutex_lock(&lock);
    for (CUmemoryPool p = pools; p; p = p->next)
        if (p->dev == dev)
            trim_to(p, 0);
    pthread_mutex_unlock(&lock);
}

/* cuda.h: "The default mempool of a device contains device memory from that device." */
CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetDefaultMemPool);
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    CUresult rc = default_pool(dev, pool_out);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* cuda.h: "Returns the last pool provided to cuDeviceSetMemPool for this device or the device's
 * default memory pool if cuDeviceSetMemPool has never been called." */
CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetMemPool);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    return sim_pool_current(dev, pool);
}

/* cuda.h: "The memory pool must be local to the specified device." */
CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    SIM_ENTER(cuDeviceSetMemPool);
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    CUresult rc = sim_pool_check(pool);
    if (rc == CUDA_SUCCESS && pool->dev != dev)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        current[dev] = pool;
    pthread_mutex_unlock(&lock);
    return rc;
}

/* CUmemPoolProps: allocType "Currently must be specified as CU_MEM_ALLOCATION_TYPE_PINNED";
 * cuMemPoolCreate: "Pools created with the type CU_MEM_LOCATION_TYPE_HOST are not IPC capable and
 * CUmemPoolProps::handleTypes must be 0"; "Specifying CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT as the
 * CUmemPoolProps::CUmemLocation::type will result in CUDA_ERROR_INVALID_VALUE." */
CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    SIM_ENTER(cuMemPoolCreate);
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    CUmemLocationType type = poolProps->location.type;
    bool device = type == CU_MEM_LOCATION_TYPE_DEVICE;
    if (device && !sim_device_valid(poolProps->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!device && (poolProps->handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
                    (type != CU_MEM_LOCATION_TYPE_HOST && type != CU_MEM_LOCATION_TYPE_HOST_NUMA)))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    *pool = pool_new(poolProps, device ? poolProps->location.id : -1);
    pthread_mutex_unlock(&lock);
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* cuda.h (cuMemPoolDestroy): "A device's default memory pool cannot be destroyed." "Destroying the
 * current mempool of a device sets the default mempool of that device as the current mempool for
 * that device." */
CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    SIM_ENTER(cuMemPoolDestroy);
    pthread_mutex_lock(&lock);
    CUresult rc = sim_pool_check(pool);
    if (rc == CUDA_SUCCESS && pool->is_default)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        if (pool->dev >= 0 && current[pool->dev] == pool)
            current[pool->dev] = NULL;
        for (int k = 0; k < SIM_HOST_LOCATIONS; k++)
            if (host_current[k] == pool)
                host_current[k] = NULL; /* the location's default is current again */
        pool->destroyed = true;
        trim_to(pool, 0);
        release_if_done(pool);
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_ENTER(cuMemPoolGetAttribute);
    pthread_mutex_lock(&lock);
    CUresult rc = value ? sim_pool_check(pool) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            *(cuuint64_t *)value = pool->threshold;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
            *(cuuint64_t *)value = pool->reserved;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            *(cuuint64_t *)value = pool->reserved_high;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
            *(cuuint64_t *)value = pool->used;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            *(cuuint64_t *)value = pool->used_high;
            break;
        default:
            rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

/* cuda.h, cuMemPoolSetAttribute: RESERVED_MEM_HIGH / USED_MEM_HIGH "Reset the high watermark";
 * "It is illegal to set this attribute to a non-zero value." */
CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_ENTER(cuMemPoolSetAttribute);
    pthread_mutex_lock(&lock);
    CUresult rc = value ? sim_pool_check(pool) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            pool->reuse[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value;
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            pool->threshold = *(cuuint64_t *)value;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0)
                rc = CUDA_ERROR_INVALID_VALUE;
            else if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
                pool->reserved_high = pool->reserved;
            else
                pool->used_high = pool->used;
            break;
        default:
            rc = CUDA_ERROR_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    SIM_ENTER(cuMemPoolTrimTo);
    pthread_mutex_lock(&lock);
    CUresult rc = sim_pool_check(pool);
    if (rc == CUDA_SUCCESS)
        trim_to(pool, minBytesToKeep);
    pthread_mutex_unlock(&lock);
    return rc;
}

#if CUDA_VERSION >= 13000
/* Index into host_defaults/host_current of a pinned host location, -1 if none. */
static int host_slot(const CUmemLocation *l)
{
    if (l->type == CU_MEM_LOCATION_TYPE_HOST)
        return 0;
    if (l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA && l->id >= 0 && l->id < SIM_HOST_LOCATIONS - 1)
        return 1 + l->id;
    return -1;
}

/* Caller holds the lock. */
static CUresult host_default(int slot, const CUmemLocation *l, CUmemoryPool *out)
{
    if (!host_defaults[slot]) {
        CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED, .location = *l};
        host_defaults[slot] = pool_new(&props, -1);
        if (!host_defaults[slot])
            return CUDA_ERROR_OUT_OF_MEMORY;
        host_defaults[slot]->is_default = true;
    }
    *out = host_defaults[slot];
    return CUDA_SUCCESS;
}

/* Checks (location, type) as cuda.h's cuMemGetDefaultMemPool does: "The memory location can be of
 * one of CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_HOST or CU_MEM_LOCATION_TYPE_HOST_NUMA.
 * The allocation type can be one of CU_MEM_ALLOCATION_TYPE_PINNED or CU_MEM_ALLOCATION_TYPE_MANAGED.
 * When the allocation type is CU_MEM_ALLOCATION_TYPE_MANAGED, the location type can also be
 * CU_MEM_LOCATION_TYPE_NONE ... In all other cases, the call returns CUDA_ERROR_INVALID_VALUE."
 * Sets *slot to the host slot, or -1 for a device (then *dev). */
static CUresult location_check(const CUmemLocation *l, CUmemAllocationType type, int *slot, int *dev)
{
    if (!l)
        return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_MEM_ALLOCATION_TYPE_MANAGED)
        return l->type == CU_MEM_LOCATION_TYPE_DEVICE || l->type == CU_MEM_LOCATION_TYPE_HOST ||
                       l->type == CU_MEM_LOCATION_TYPE_HOST_NUMA || l->type == CU_MEM_LOCATION_TYPE_NONE
                   ? CUDA_ERROR_NOT_SUPPORTED
                   : CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    *slot = -1;
    if (l->type == CU_MEM_LOCATION_TYPE_DEVICE) {
        *dev = l->id;
        return sim_device_valid(l->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    }
    *slot = host_slot(l);
    return *slot >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The location's default pool, or its current one (`want_current`), for the two getters below. */
static CUresult location_pool(CUmemoryPool *out, CUmemLocation *location, CUmemAllocationType type,
                              bool want_current)
{
    int slot, dev = 0;
    CUresult rc = out ? location_check(location, type, &slot, &dev) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    if (slot < 0 && want_current)
        return sim_pool_current(dev, out);
    pthread_mutex_lock(&lock);
    if (slot < 0)
        rc = default_pool(dev, out);
    else if (want_current && host_current[slot])
        *out = host_current[slot];
    else
        rc = host_default(slot, location, out);
    pthread_mutex_unlock(&lock);
    return rc;
}

/* cuda.h: "Returns the default memory pool for a given location and allocation type". */
CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location, CUmemAllocationType type)
{
    SIM_ENTER(cuMemGetDefaultMemPool);
    return location_pool(pool_out, location, type, false);
}

/* cuda.h: "Returns the last pool provided to cuMemSetMemPool or cuDeviceSetMemPool for this
 * location and allocation type or the location's default memory pool if cuMemSetMemPool or
 * cuDeviceSetMemPool for that allocType and location has never been called." */
CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
    SIM_ENTER(cuMemGetMemPool);
    return location_pool(pool, location, type, true);
}

/* cuda.h: "When a memory pool is set as the current memory pool, the location parameter should be
 * the same as the location of the pool. The location and allocation type specified must match
 * those of the pool otherwise CUDA_ERROR_INVALID_VALUE is returned." "If the location type is
 * CU_MEM_LOCATION_TYPE_DEVICE and the allocation type is CU_MEM_ALLOCATION_TYPE_PINNED, then this
 * API is the equivalent of calling cuDeviceSetMemPool with the location id as the device." */
CUresult CUDAAPI cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    SIM_ENTER(cuMemSetMemPool);
    int slot, dev = 0;
    CUresult rc = location_check(location, type, &slot, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    rc = sim_pool_check(pool);
    if (rc == CUDA_SUCCESS && (pool->props.allocType != type || pool->props.location.type != location->type ||
                               (location->type != CU_MEM_LOCATION_TYPE_HOST &&
                                pool->props.location.id != location->id)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        if (slot < 0)
            current[dev] = pool;
        else
            host_current[slot] = pool;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}
#endif

/* ---- pool IPC: cuMemPoolExportToShareableHandle, cuMemPoolImportFromShareableHandle,
 * cuMemPoolExportPointer, cuMemPoolImportPointer (POSIX file descriptors only). A pool's export is a
 * memfd named "simcuda-pool-dev<N>" (or "simcuda-pool-host"), so that an importer knows the
 * device; an imported pool makes no allocations of its own. An imported pointer, as an opened IPC
 * handle, is a fresh zeroed mapping of the allocation's size (data is NOT shared between
 * processes), never counted, a stream-ordered allocation of the imported pool: it outlives any
 * context (cuda.h cuCtxDestroy) and is freed with cuMemFree or cuMemFreeAsync (cuda.h
 * cuMemPoolImportPointer). */

/* cuda.h cuMemPoolExportToShareableHandle: "Given an IPC capable mempool" ("a mempool with a
 * CUmemAllocationHandleType other than CU_MEM_HANDLE_TYPE_NONE"); flags "must be 0". */
CUresult CUDAAPI cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                  CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_ENTER(cuMemPoolExportToShareableHandle);
    if (!handle_out || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&lock);
    CUresult rc = sim_pool_check(pool);
    if (rc == CUDA_SUCCESS && (pool->imported || !(pool->props.handleTypes & handleType)))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && pool->export_fd <= 0) {
        char name[32] = "simcuda-pool-host";
        if (pool->dev >= 0)
            snprintf(name, sizeof name, "simcuda-pool-dev%d", pool->dev);
        int fd = memfd_create(name, MFD_CLOEXEC);
        if (fd <= 0) {
            if (fd == 0)
                close(fd);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            pool->export_fd = fd;
        }
    }
    int fd = rc == CUDA_SUCCESS ? fcntl(pool->export_fd, F_DUPFD_CLOEXEC, 0) : -1;
    pthread_mutex_unlock(&lock);
    if (rc == CUDA_SUCCESS && fd < 0)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS)
        *(int *)handle_out = fd;
    return rc;
}

/* For POSIX descriptors `handle` is the descriptor itself; flags "must be 0". */
CUresult CUDAAPI cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                    CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_ENTER(cuMemPoolImportFromShareableHandle);
    if (!pool_out || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    int dev = sim_memfd_device((int)(intptr_t)handle, "simcuda-pool");
    if (dev == -2 || (dev >= 0 && !sim_device_valid(dev)))
        return CUDA_ERROR_INVALID_VALUE;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                            .location = {dev >= 0 ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST,
                                         dev >= 0 ? dev : 0}};
    pthread_mutex_lock(&lock);
    CUmemoryPool p = pool_new(&props, dev);
    if (p)
        p->imported = true;
    pthread_mutex_unlock(&lock);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool_out = p;
    return CUDA_SUCCESS;
}

static const char pool_ptr_magic[8] = "simpool";

struct pool_ptr_payload {
    char magic[8];
    int32_t pid, dev;
    uint64_t addr, size, id;
};
_Static_assert(sizeof(struct pool_ptr_payload) <= sizeof(CUmemPoolPtrExportData),
               "payload fits a CUmemPoolPtrExportData");

/* cuda.h cuMemPoolExportPointer: "a specific allocation from an already shared memory pool": one
 * whose cuMemPoolExportToShareableHandle has succeeded. The real driver (580.159, CUDA 13.0, an
 * H200: docs/GPU-VALIDATION.md offload_edges, 2026-12-04) refused an exportable pool's allocation
 * before that export (CUDA_ERROR_INVALID_VALUE) and took it after. */
CUresult CUDAAPI cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
    SIM_ENTER(cuMemPoolExportPointer);
    struct sim_range r;
    if (!shareData_out || !sim_reg_find(ptr, 0, SIM_MEM(ASYNC), &r) || r.base != ptr || !r.pool)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    bool shareable = r.pool->magic == POOL_MAGIC && !r.pool->imported &&
                     (r.pool->props.handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) &&
                     r.pool->export_fd > 0;
    pthread_mutex_unlock(&lock);
    if (!shareable)
        return CUDA_ERROR_INVALID_VALUE;
    struct pool_ptr_payload p = {.pid = getpid(), .dev = r.dev, .addr = r.base, .size = r.size, .id = r.id};
    memcpy(p.magic, pool_ptr_magic, sizeof p.magic);
    memset(shareData_out, 0, sizeof *shareData_out);
    memcpy(shareData_out->reserved, &p, sizeof p);
    return CUDA_SUCCESS;
}

/* cuda.h cuMemPoolImportPointer: from an imported pool, of another process's allocation (this
 * process's own: CUDA_ERROR_INVALID_VALUE here). */
CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *shareData)
{
    SIM_ENTER(cuMemPoolImportPointer);
    struct pool_ptr_payload p;
    if (!ptr_out || !shareData)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&p, shareData->reserved, sizeof p);
    if (memcmp(p.magic, pool_ptr_magic, sizeof p.magic) != 0 || p.pid == getpid() || p.size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult rc = sim_pool_check(pool);
    if (rc == CUDA_SUCCESS && !pool->imported)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        pool->outstanding++;
    pthread_mutex_unlock(&lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUcontext ctx = NULL;
    sim_ctx_current(&ctx);
    struct sim_range r = {.size = p.size, .kind = SIM_MEM_ASYNC, .ctx = ctx,
                          .dev = pool->dev >= 0 ? pool->dev : (ctx ? ctx->dev : 0),
                          .counted = SIM_NO_KIND, .pool = pool};
    rc = sim_mem_new(&r);
    if (rc != CUDA_SUCCESS) {
        sim_pool_give(pool, p.size);
        return rc;
    }
    *ptr_out = r.base;
    return CUDA_SUCCESS;
}
