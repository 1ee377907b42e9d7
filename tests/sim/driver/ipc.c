/* Legacy IPC: cuIpcGetMemHandle, cuIpcOpenMemHandle (4010 ABI), cuIpcOpenMemHandle_v2,
 * cuIpcCloseMemHandle. A handle encodes the exporter's pid, device, address, size and the
 * allocation's unique id. Another process opening it gets a fresh zeroed mapping of that size
 * (SIM_MEM_IMPORTED, never counted): data is NOT shared between processes. Opening a handle of
 * the calling process fails with CUDA_ERROR_INVALID_CONTEXT, as IPC between contexts of one
 * process is not supported. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ctx.h"
#include "mem.h"

static const char magic[8] = "simcuda";

struct payload {
    char magic[8];
    int32_t pid, dev;
    uint64_t addr, size, id;
};
_Static_assert(sizeof(struct payload) <= CU_IPC_HANDLE_SIZE, "payload fits a CUipcMemHandle");

struct import {
    CUcontext ctx;
    int32_t pid;
    uint64_t id;
    uintptr_t base;
    size_t size;
    unsigned refs;
    struct import *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct import *imports;

/* cuda.h: "Takes a pointer to the base of an existing device memory allocation created with
 * cuMemAlloc and exports it for use in another process"; after a free and a new allocation at the
 * same address, "cuIpcGetMemHandle will return a unique handle for the new memory". */
CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    SIM_ENTER(cuIpcGetMemHandle);
    struct sim_range r;
    if (!pHandle || !sim_reg_find(dptr, 0, SIM_MEM(DEVICE), &r) || r.base != dptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct payload p = {.pid = getpid(), .dev = r.dev, .addr = r.base, .size = r.size, .id = r.id};
    memcpy(p.magic, magic, sizeof magic);
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, &p, sizeof p);
    return CUDA_SUCCESS;
}

/* cuda.h: "If the memory handle has already been opened by the current context, the reference
 * count on the handle is incremented by 1 and the existing device pointer is returned." Flags:
 * "Must be specified as CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS" (0 is accepted too). */
static CUresult open_handle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    struct payload p;
    memcpy(&p, handle.reserved, sizeof p);
    if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) || memcmp(p.magic, magic, sizeof magic))
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult rc = sim_ctx_current(&ctx);
    if (rc == CUDA_SUCCESS && p.pid == getpid())
        rc = CUDA_ERROR_INVALID_CONTEXT;
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    struct import *im = imports;
    while (im && (im->ctx != ctx || im->pid != p.pid || im->id != p.id))
        im = im->next;
    if (im) {
        im->refs++;
    } else if ((im = malloc(sizeof *im))) {
        void *mem = mmap(NULL, p.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        struct sim_range r = {.base = (uintptr_t)mem, .size = p.size, .kind = SIM_MEM_IMPORTED, .ctx = ctx,
                              .dev = sim_device_valid(p.dev) ? p.dev : ctx->dev, .counted = SIM_NO_KIND};
        rc = mem == MAP_FAILED ? CUDA_ERROR_MAP_FAILED : sim_reg_add(&r, 0);
        if (rc == CUDA_SUCCESS) {
            *im = (struct import){ctx, p.pid, p.id, r.base, p.size, 1, imports};
            imports = im;
        } else {
            if (mem != MAP_FAILED)
                munmap(mem, p.size);
            free(im);
            im = NULL;
        }
    } else {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (im)
        *pdptr = im->base;
    pthread_mutex_unlock(&lock);
    return rc;
}

CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    SIM_ENTER(cuIpcOpenMemHandle);
    return open_handle(pdptr, handle, Flags);
}

CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    SIM_ENTER(cuIpcOpenMemHandle_v2);
    return open_handle(pdptr, handle, Flags);
}

/* Caller holds the lock. */
static void unmap(struct import **link)
{
    struct import *im = *link;
    *link = im->next;
    sim_reg_take(im->base, SIM_MEM(IMPORTED), NULL);
    munmap((void *)im->base, im->size);
    free(im);
}

/* cuda.h: "Decrements the reference count of the memory returned by cuIpcOpenMemHandle by 1. When
 * the reference count reaches 0, this API unmaps the memory." */
CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    SIM_ENTER(cuIpcCloseMemHandle);
    pthread_mutex_lock(&lock);
    struct import **p = &imports;
    while (*p && (*p)->base != dptr)
        p = &(*p)->next;
    bool found = *p != NULL;
    if (found && --(*p)->refs == 0)
        unmap(p);
    pthread_mutex_unlock(&lock);
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void sim_ipc_release_ctx(CUcontext ctx)
{
    pthread_mutex_lock(&lock);
    for (struct import **p = &imports; *p;)
        if ((*p)->ctx == ctx)
            unmap(p);
        else
            p = &(*p)->next;
    pthread_mutex_unlock(&lock);
}
