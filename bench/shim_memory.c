/* shim_memory N: N rounds of allocate/free cycles of every kind the shim tracks, one of each kind
 * per round, then prints the process's memory: "rss_kb R anon_kb A" (/proc/self/status VmRSS,
 * /proc/self/smaps_rollup Anonymous). scripts/bench runs it with two values of N, with and without
 * the shim: the difference is the shim's own memory, and whether it grows with the number of
 * cycles (a long-running server must not see it grow: a soak trial found tombstones of destroyed
 * pools kept forever, one table entry per pool).
 *
 * A round: cudaMalloc / cudaFree; cudaMallocAsync / cudaFreeAsync; a created pool: create,
 * allocate from it, make it the device's current pool and allocate from that, free, destroy;
 * a stream capture of cudaMallocAsync, cudaMemsetAsync, cudaFreeAsync, instantiated, launched,
 * destroyed; cuMemCreate / cuMemAddressReserve / cuMemMap / cuMemUnmap / cuMemRelease /
 * cuMemAddressFree; cudaMallocHost / cudaFreeHost; cudaHostRegister / cudaHostUnregister;
 * cudaMallocManaged / cudaFree; cuArrayCreate_v2 / cuArrayDestroy; a stream created, allocated on,
 * destroyed. The block that held each destroyed pool is taken by a malloc of its size, so that
 * the next pool gets a new handle (the simulator's handles are heap addresses: a driver owes no
 * reuse of handle values). Sizes vary from round to round.
 * Exit status: 0, 2 for a failed call, 10/11 as tests/programs/common.h. */
#include <cudaTypedefs.h>
#include <malloc.h>

#include "common.h"

#define CK(x)                                                                          \
    do {                                                                               \
        int r_ = (int)(x);                                                             \
        if (r_) {                                                                      \
            fprintf(stderr, "shim_memory: %s: error %d (round %ld)\n", #x, r_, round); \
            exit(2);                                                                   \
        }                                                                              \
    } while (0)

static size_t vsize(long i)
{
    return 256 + ((unsigned long)i * 2654435761u) % (1u << 20);
}

static long status_kb(const char *file, const char *key)
{
    FILE *f = fopen(file, "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n))
            v = strtol(line + n, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 1000, round = 0;
    struct vmm_api v = vmm_api();
    PFN_cuMemAddressFree_v10020 address_free = entry("cuMemAddressFree", 10020);
    PFN_cuMemSetAccess_v10020 set_access = entry("cuMemSetAccess", 10020);
    PFN_cuArrayCreate_v3020 array_create = entry("cuArrayCreate", 3020);
    PFN_cuArrayDestroy_v2000 array_destroy = entry("cuArrayDestroy", 2000);
    CUmemAllocationProp prop = vmm_prop(0);
    size_t gran = 0;
    CK(v.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaMemPool_t device_pool;
    CK(cudaDeviceGetDefaultMemPool(&device_pool, 0));
    static char host[4 * 4096] __attribute__((aligned(4096)));
    for (round = 0; round < rounds; round++) {
        void *p, *q;
        CK(cudaMalloc(&p, vsize(round)));
        CK(cudaFree(p));
        CK(cudaMallocAsync(&p, vsize(round), s));
        CK(cudaFreeAsync(p, s));

        struct cudaMemPoolProps props = device_pool_props(0);
        cudaMemPool_t pool;
        CK(cudaMemPoolCreate(&pool, &props));
        CK(cudaMallocFromPoolAsync(&p, vsize(round + 1), pool, s));
        CK(cudaDeviceSetMemPool(0, pool));
        CK(cudaMallocAsync(&q, vsize(round + 2), s));
        CK(cudaFreeAsync(q, s));
        CK(cudaFreeAsync(p, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaDeviceSetMemPool(0, device_pool));
        size_t held = malloc_usable_size((void *)pool);
        CK(cudaMemPoolDestroy(pool));
        void *volatile keep = malloc(held); /* the next pool's handle is a new address */
        (void)keep;

        cudaGraph_t g;
        cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        CK(cudaMallocAsync(&p, vsize(round + 3), s));
        CK(cudaMemsetAsync(p, 0, 64, s));
        CK(cudaFreeAsync(p, s));
        CK(cudaStreamEndCapture(s, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));

        size_t sz = gran * (size_t)(1 + round % 3);
        CUmemGenericAllocationHandle h;
        CUdeviceptr va;
        CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        CK(v.create(&h, sz, &prop, 0));
        CK(v.reserve(&va, sz, 0, 0, 0));
        CK(v.map(va, sz, 0, h, 0));
        CK(set_access(va, sz, &access, 1));
        CK(v.unmap(va, sz));
        CK(v.release(h));
        CK(address_free(va, sz));

        CK(cudaMallocHost(&p, 4096 + (size_t)round % 8192));
        CK(cudaFreeHost(p));
        CK(cudaHostRegister(host, 4096 * (size_t)(1 + round % 4), 0));
        CK(cudaHostUnregister(host));
        CK(cudaMallocManaged(&p, vsize(round), cudaMemAttachGlobal));
        CK(cudaFree(p));

        CUarray a;
        CUDA_ARRAY_DESCRIPTOR d = {0};
        d.Width = 16 + (size_t)round % 100;
        d.Height = 1 + (size_t)round % 7;
        d.Format = CU_AD_FORMAT_FLOAT;
        d.NumChannels = 1;
        CK(array_create(&a, &d));
        CK(array_destroy(a));

        cudaStream_t t;
        CK(cudaStreamCreate(&t));
        CK(cudaMallocAsync(&p, vsize(round), t));
        CK(cudaFreeAsync(p, t));
        CK(cudaStreamDestroy(t));
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaStreamDestroy(s));
    printf("rounds %ld rss_kb %ld anon_kb %ld\n", rounds, status_kb("/proc/self/status", "VmRSS:"),
           status_kb("/proc/self/smaps_rollup", "Anonymous:"));
    return 0;
}
