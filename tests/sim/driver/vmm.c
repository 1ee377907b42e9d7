/* Physical VMM allocations: cuMemGetAllocationGranularity, cuMemCreate, cuMemRelease,
 * cuMemGetAllocationPropertiesFromHandle, cuMemExportToShareableHandle,
 * cuMemImportFromShareableHandle (POSIX file descriptors). Handles are device-level: context
 * teardown leaves them alone. A handle is a memfd named "simcuda-vmm-dev<N>" (or
 * "simcuda-vmm-host"), so an importer, in this process or another, finds its device. Imported
 * handles are another owner's memory: never counted. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm.h"

pthread_mutex_t sim_vmm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_vmm_handle *handles;

struct sim_vmm_handle *sim_vmm_handle_find(CUmemGenericAllocationHandle handle)
{
    for (struct sim_vmm_handle *h = handles; h; h = h->next)
        if ((CUmemGenericAllocationHandle)(uintptr_t)h == handle && h->refs > 0)
            return h;
    return NULL;
}

static CUmemGenericAllocationHandle handle_of(struct sim_vmm_handle *h)
{
    return (CUmemGenericAllocationHandle)(uintptr_t)h;
}

/* cuda.h, cuMemRelease: "The memory allocation will be freed when all outstanding mappings to the
 * memory are unmapped and when all outstanding references to the handle (including it's shareable
 * counterparts) are also released." Deviation: a descriptor exported from the handle and still open
 * is not waited for (the simulator cannot see its close); the capacity comes back here. */
void sim_vmm_handle_put(struct sim_vmm_handle *h)
{
    if (h->refs > 0 || h->maps > 0)
        return;
    for (struct sim_vmm_handle **p = &handles; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    close(h->fd);
    if (h->counted)
        sim_account(h->dev, SIMCUDA_VMM, -(int64_t)h->size, -(int64_t)sim_round(h->size));
    free(h);
}

CUresult sim_vmm_handle_new(int fd, size_t size, const CUmemAllocationProp *prop, int dev, bool counted,
                            CUmemGenericAllocationHandle *out)
{
    struct sim_vmm_handle *h = calloc(1, sizeof *h);
    CUresult rc = h ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    if (rc == CUDA_SUCCESS && counted)
        rc = sim_account(dev, SIMCUDA_VMM, (int64_t)size, (int64_t)sim_round(size));
    if (rc != CUDA_SUCCESS) {
        free(h);
        close(fd);
        return rc;
    }
    *h = (struct sim_vmm_handle){.fd = fd, .size = size, .prop = *prop, .dev = dev, .counted = counted, .refs = 1};
    pthread_mutex_lock(&sim_vmm_lock);
    h->next = handles;
    handles = h;
    pthread_mutex_unlock(&sim_vmm_lock);
    *out = handle_of(h);
    return CUDA_SUCCESS;
}

/* cuda.h: "Calculates either the minimal or recommended granularity": SIMCUDA_VMM_GRANULARITY. */
CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags option)
{
    SIM_ENTER(cuMemGetAllocationGranularity);
    if (!granularity || !prop || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                                  option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = sim_cfg.vmm_granularity;
    return CUDA_SUCCESS;
}

/* cuda.h, cuMemCreate: "The size of this allocation must be a multiple of the the value given via
 * cuMemGetAllocationGranularity"; "HOST allocations are not IPC capable and
 * CUmemAllocationProp::requestedHandleTypes must be 0"; "Specifying
 * CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT as the CUmemLocation::type will result in
 * CUDA_ERROR_INVALID_VALUE"; "flags for future use, must be zero now". A device location counts
 * as SIMCUDA_VMM and against the device's capacity. */
CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                             unsigned long long flags)
{
    SIM_ENTER(cuMemCreate);
    if (!handle || !prop || flags != 0 || size == 0 || size % sim_cfg.vmm_granularity != 0 ||
        prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    CUmemLocationType type = prop->location.type;
    bool device = type == CU_MEM_LOCATION_TYPE_DEVICE;
    if (device && !sim_device_valid(prop->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!device && (type != CU_MEM_LOCATION_TYPE_HOST_NUMA &&
                    (type != CU_MEM_LOCATION_TYPE_HOST || prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE)))
        return CUDA_ERROR_INVALID_VALUE;
    char name[32] = "simcuda-vmm-host";
    if (device)
        snprintf(name, sizeof name, "simcuda-vmm-dev%d", prop->location.id);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        if (fd >= 0)
            close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return sim_vmm_handle_new(fd, size, prop, device ? prop->location.id : -1, device, handle);
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SIM_ENTER(cuMemRelease);
    pthread_mutex_lock(&sim_vmm_lock);
    struct sim_vmm_handle *h = sim_vmm_handle_find(handle);
    if (h) {
        h->refs--;
        sim_vmm_handle_put(h);
    }
    pthread_mutex_unlock(&sim_vmm_lock);
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle)
{
    SIM_ENTER(cuMemGetAllocationPropertiesFromHandle);
    pthread_mutex_lock(&sim_vmm_lock);
    struct sim_vmm_handle *h = prop ? sim_vmm_handle_find(handle) : NULL;
    if (h)
        *prop = h->prop;
    pthread_mutex_unlock(&sim_vmm_lock);
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Only CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, and only for handles created with it in
 * CUmemAllocationProp::requestedHandleTypes; each export is a new descriptor. */
CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
                                              CUmemAllocationHandleType handleType, unsigned long long flags)
{
    SIM_ENTER(cuMemExportToShareableHandle);
    if (!shareableHandle || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&sim_vmm_lock);
    struct sim_vmm_handle *h = sim_vmm_handle_find(handle);
    int fd = h && (h->prop.requestedHandleTypes & handleType) ? fcntl(h->fd, F_DUPFD_CLOEXEC, 0) : -1;
    pthread_mutex_unlock(&sim_vmm_lock);
    if (fd < 0)
        return CUDA_ERROR_INVALID_VALUE;
    *(int *)shareableHandle = fd;
    return CUDA_SUCCESS;
}

int sim_memfd_device(int fd, const char *prefix)
{
    char path[64], target[160], want[96];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    int dev, len = 0;
    if (n < 0)
        return -2;
    target[n] = '\0';
    snprintf(want, sizeof want, "/memfd:%s-dev%%d%%n", prefix);
    if (sscanf(target, want, &dev, &len) == 1 && len > 0)
        return dev;
    snprintf(want, sizeof want, "/memfd:%s-host", prefix);
    return strncmp(target, want, strlen(want)) == 0 ? -1 : -2;
}

/* The device of a VMM handle's descriptor: -1 for host handles, -3 for a multicast object, -2 if
 * it is not one of the simulator's. */
static int device_of(int fd)
{
    char path[64], target[128];
    int dev = sim_memfd_device(fd, "simcuda-vmm");
    if (dev != -2)
        return dev;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0)
        return -2;
    target[n] = '\0';
    return strncmp(target, "/memfd:" SIM_MULTICAST_MEMFD, strlen("/memfd:" SIM_MULTICAST_MEMFD)) == 0 ? -3 : -2;
}

/* The live handle of this process whose memory the descriptor `fd` is (same memfd), or NULL.
 * Caller holds the lock. */
static struct sim_vmm_handle *handle_of_fd(int fd)
{
    struct stat a, b;
    if (fstat(fd, &a) != 0)
        return NULL;
    for (struct sim_vmm_handle *h = handles; h; h = h->next)
        if (h->refs > 0 && fstat(h->fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
            return h;
    return NULL;
}

/* cuda.h: "There is no guarantee that the contents of handle will be the same CUDA memory handle
 * for the same given OS shareable handle": every import is a new handle, released with
 * cuMemRelease ("Each time a recipient process imports a shareable handle, it needs to pair it
 * with cuMemRelease"); with SIMCUDA_IMPORT_SAME_HANDLE=1, the import of memory a live handle of
 * this process holds is that handle, one reference more (the other reading the header allows).
 * For POSIX descriptors osHandle is the descriptor itself. */
CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
                                                CUmemAllocationHandleType shHandleType)
{
    SIM_ENTER(cuMemImportFromShareableHandle);
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    int fd = (int)(intptr_t)osHandle, dev = device_of(fd);
    struct stat st;
    if (dev == -2 || fstat(fd, &st) != 0 || st.st_size <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_cfg.import_same_handle) {
        pthread_mutex_lock(&sim_vmm_lock);
        struct sim_vmm_handle *h = handle_of_fd(fd);
        if (h) {
            h->refs++;
            *handle = handle_of(h);
        }
        pthread_mutex_unlock(&sim_vmm_lock);
        if (h)
            return CUDA_SUCCESS;
    }
    int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                .location = {dev >= 0 ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST,
                                             dev >= 0 ? dev : 0}};
    if (dev == -3) /* a multicast object: no location of its own (multicast.c) */
        prop.location = (CUmemLocation){CU_MEM_LOCATION_TYPE_INVALID, 0};
    CUresult rc = sim_vmm_handle_new(mine, (size_t)st.st_size, &prop, dev == -3 ? -1 : dev, false, handle);
    if (rc == CUDA_SUCCESS && dev == -3) {
        char path[64], target[128];
        unsigned team = 0;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        sscanf(target, "/memfd:" SIM_MULTICAST_MEMFD "-n%u", &team);
        pthread_mutex_lock(&sim_vmm_lock);
        struct sim_vmm_handle *h = sim_vmm_handle_find(*handle);
        h->multicast = true;
        h->mc_team = team;
        pthread_mutex_unlock(&sim_vmm_lock);
    }
    return rc;
}
