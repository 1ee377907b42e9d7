/* Graph memory: allocation-node addresses, attach/detach, cuDeviceGetGraphMemAttribute,
 * cuDeviceSetGraphMemAttribute, cuDeviceGraphMemTrim.
 *
 * cuda.h, cuDeviceGetGraphMemAttribute: USED_MEM_CURRENT is the "Amount of memory, in bytes,
 * currently associated with graphs", RESERVED_MEM_CURRENT the "Amount of memory, in bytes,
 * currently allocated for use by the CUDA graphs asynchronous allocator"; HIGH marks "can only be
 * reset to zero". Attaching adds the allocation's bytes to used and grows reserved to cover used
 * (the growth is charged to the device: reserved graph memory is used device memory); freeing
 * lowers used only; cuDeviceGraphMemTrim ("Free unused memory that was cached on the specified
 * device for use with graphs back to the OS") drops reserved to used.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "ctx.h"
#include "graph.h"
#include "mem.h"

static struct sim_galloc *gallocs;
static struct {
    uint64_t used, reserved, used_high, reserved_high;
} pools[SIM_MAX_DEVICES];

/* The address is reserved (MAP_NORESERVE) when the node is made and stays fixed until the last
 * node, executable graph or attachment naming it is gone. */
struct sim_galloc *sim_galloc_new(int dev, size_t size)
{
    struct sim_galloc *g = calloc(1, sizeof *g);
    void *p = g ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                : MAP_FAILED;
    if (p == MAP_FAILED) {
        free(g);
        return NULL;
    }
    *g = (struct sim_galloc){.addr = (uintptr_t)p, .size = size, .dev = dev, .refs = 1, .next = gallocs};
    gallocs = g;
    return g;
}

struct sim_galloc *sim_galloc_find(uintptr_t addr)
{
    for (struct sim_galloc *g = gallocs; g; g = g->next)
        if (g->addr == addr)
            return g;
    return NULL;
}

struct sim_galloc *sim_galloc_ref(struct sim_galloc *g)
{
    g->refs++;
    return g;
}

void sim_galloc_unref(struct sim_galloc *g)
{
    if (--g->refs > 0)
        return;
    for (struct sim_galloc **p = &gallocs; *p; p = &(*p)->next)
        if (*p == g) {
            *p = g->next;
            break;
        }
    munmap((void *)g->addr, g->size);
    free(g);
}

CUresult sim_galloc_attach(struct sim_galloc *g, CUcontext ctx)
{
    int d = g->dev;
    uint64_t used = pools[d].used + g->size;
    uint64_t grow = used > pools[d].reserved ? used - pools[d].reserved : 0;
    CUresult rc = sim_account(d, SIMCUDA_GRAPH_RESERVED, (int64_t)grow, (int64_t)grow);
    struct sim_range r = {.base = g->addr, .size = g->size, .kind = SIM_MEM_GRAPH, .ctx = ctx, .dev = d,
                          .counted = SIM_NO_KIND};
    if (rc == CUDA_SUCCESS && (rc = sim_reg_add(&r, 0)) != CUDA_SUCCESS)
        sim_account(d, SIMCUDA_GRAPH_RESERVED, -(int64_t)grow, -(int64_t)grow);
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_account(d, SIMCUDA_GRAPH_USED, (int64_t)g->size, 0);
    pools[d].reserved += grow;
    pools[d].used = used;
    if (used > pools[d].used_high)
        pools[d].used_high = used;
    if (pools[d].reserved > pools[d].reserved_high)
        pools[d].reserved_high = pools[d].reserved;
    g->live = true;
    sim_galloc_ref(g);
    return CUDA_SUCCESS;
}

void sim_galloc_detach(struct sim_galloc *g)
{
    sim_reg_take(g->addr, SIM_MEM(GRAPH), NULL);
    sim_account(g->dev, SIMCUDA_GRAPH_USED, -(int64_t)g->size, 0);
    pools[g->dev].used -= g->size;
    g->live = false;
    g->by_upload = false;
    sim_galloc_unref(g);
}

CUresult sim_graph_mem_free(CUdeviceptr addr)
{
    pthread_mutex_lock(&sim_graph_lock);
    struct sim_galloc *g = sim_galloc_find(addr);
    bool live = g && g->live;
    if (live)
        sim_galloc_detach(g);
    pthread_mutex_unlock(&sim_graph_lock);
    return live ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

bool sim_graph_mem_contains(uintptr_t p, size_t n)
{
    bool hit = false;
    pthread_mutex_lock(&sim_graph_lock);
    for (struct sim_galloc *g = gallocs; g && !hit; g = g->next)
        hit = p >= g->addr && p - g->addr < g->size && n <= g->size - (p - g->addr);
    pthread_mutex_unlock(&sim_graph_lock);
    return hit;
}

/* Caller holds the lock. */
static void trim(int dev)
{
    uint64_t unused = pools[dev].reserved - pools[dev].used;
    sim_account(dev, SIMCUDA_GRAPH_RESERVED, -(int64_t)unused, -(int64_t)unused);
    pools[dev].reserved = pools[dev].used;
}

void sim_graph_mem_device_idle(int dev)
{
    pthread_mutex_lock(&sim_graph_lock);
    trim(dev);
    pthread_mutex_unlock(&sim_graph_lock);
}

CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
    SIM_ENTER(cuDeviceGraphMemTrim);
    if (!sim_device_valid(device))
        return CUDA_ERROR_INVALID_DEVICE;
    sim_graph_mem_device_idle(device);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SIM_ENTER(cuDeviceGetGraphMemAttribute);
    if (!sim_device_valid(device))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_graph_lock);
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = pools[device].used;
        break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = pools[device].used_high;
        break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
        *(cuuint64_t *)value = pools[device].reserved;
        break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
        *(cuuint64_t *)value = pools[device].reserved_high;
        break;
    default:
        rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&sim_graph_lock);
    return rc;
}

/* cuda.h: valid attributes are the two HIGH marks, which "can only be reset to zero"; the mark
 * then follows the current value again. */
CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void *value)
{
    SIM_ENTER(cuDeviceSetGraphMemAttribute);
    if (!sim_device_valid(device))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!value || *(cuuint64_t *)value != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_graph_lock);
    if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        pools[device].used_high = pools[device].used;
    else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        pools[device].reserved_high = pools[device].reserved;
    else
        rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&sim_graph_lock);
    return rc;
}
