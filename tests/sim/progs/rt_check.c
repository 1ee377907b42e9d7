/* rt_check SCENARIO: runtime programs for test_sim.c. Each prints "key=value" lines: runtime
 * return codes and the simulated driver's own counters (simcuda.h, found through the
 * libcuda.so.1 the runtime loaded). Declares the _ptsz entry points it calls itself, since they
 * are only declared for per-thread-default-stream builds. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "simcuda.h"

cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);

static void *sim(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? dlsym(h, name) : NULL;
}

static unsigned long long calls(const char *symbol)
{
    uint64_t (*fn)(const char *) = (uint64_t(*)(const char *))sim("simcuda_call_count");
    return fn ? (unsigned long long)fn(symbol) : 0;
}

static unsigned long long live(simcuda_kind kind)
{
    uint64_t (*fn)(int, simcuda_kind) = (uint64_t(*)(int, simcuda_kind))sim("simcuda_live_bytes");
    return fn ? (unsigned long long)fn(0, kind) : 0;
}

static unsigned long long used(void)
{
    uint64_t (*fn)(int) = (uint64_t(*)(int))sim("simcuda_used_bytes");
    return fn ? (unsigned long long)fn(0) : 0;
}

/* Only initialization: the lookups cudart makes. */
static void scenario_init(void)
{
    printf("free_null=%d\n", cudaFree(NULL));
}

/* cudaMalloc(0) and cudaFree(NULL) succeed without a driver allocation or free. */
static void scenario_zero(void)
{
    void *p = &p;
    cudaError_t e = cudaMalloc(&p, 0);
    printf("malloc0=%d null=%d\n", e, p == NULL);
    printf("free_null=%d\n", cudaFree(NULL));
    printf("cuMemAlloc_v2=%llu cuMemFree_v2=%llu\n", calls("cuMemAlloc_v2"), calls("cuMemFree_v2"));
}

/* With SIMCUDA_HIDE=cuMemAllocAsync the runtime has no driver function: cudaErrorNotSupported,
 * kept as the last error until cudaGetLastError. */
static void scenario_hide(void)
{
    cudaStream_t s;
    void *p;
    cudaStreamCreate(&s);
    printf("malloc_async=%d\n", cudaMallocAsync(&p, 4096, s));
    printf("peek=%d\n", cudaPeekAtLastError());
    printf("last=%d\n", cudaGetLastError());
    printf("last_again=%d\n", cudaGetLastError());
}

/* cudaDeviceReset frees the context's memory, not stream-ordered allocations (cuda_runtime_api.h:
 * "will not destroy memory allocations by cudaMallocAsync()"); the next call binds a fresh primary
 * context, and the async allocation is freed there. */
static void scenario_reset(void)
{
    void *a, *b;
    cudaStream_t s;
    cudaStreamCreate(&s);
    printf("malloc=%d\n", cudaMalloc(&a, 1 << 20));
    printf("malloc_async=%d\n", cudaMallocAsync(&b, 1 << 20, s));
    printf("before.device=%llu before.async=%llu\n", live(SIMCUDA_DEVICE), live(SIMCUDA_ASYNC));
    printf("reset=%d\n", cudaDeviceReset());
    printf("after.device=%llu after.async=%llu after.pool=%llu after.used=%llu\n", live(SIMCUDA_DEVICE),
           live(SIMCUDA_ASYNC), live(SIMCUDA_POOL_RESERVED), used());
    printf("malloc_again=%d\n", cudaMalloc(&a, 4096));
    printf("again.device=%llu\n", live(SIMCUDA_DEVICE));
    printf("free_async=%d\n", cudaFreeAsync(b, 0));
    printf("sync=%d\n", cudaDeviceSynchronize());
    printf("freed.async=%llu freed.pool=%llu\n", live(SIMCUDA_ASYNC), live(SIMCUDA_POOL_RESERVED));
}

/* Per-thread entry points reach the per-thread driver variants. */
static void scenario_ptsz(void)
{
    void *p, *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    printf("malloc_async_ptsz=%d\n", cudaMallocAsync_ptsz(&p, 4096, NULL));
    cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &fn, 11020, cudaEnablePerThreadDefaultStream, &st);
    printf("entry=%d status=%d\n", e, (int)st);
    printf("same=%d\n", fn == sim("cuMemAllocAsync_ptsz"));
    printf("cuMemAllocAsync_ptsz=%llu cuMemAllocAsync=%llu\n", calls("cuMemAllocAsync_ptsz"),
           calls("cuMemAllocAsync"));
}

static const struct {
    const char *name;
    void (*fn)(void);
} scenarios[] = {
    {"init", scenario_init}, {"zero", scenario_zero}, {"hide", scenario_hide},
    {"reset", scenario_reset}, {"ptsz", scenario_ptsz},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; argc == 2 && i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(argv[1], scenarios[i].name) == 0) {
            scenarios[i].fn();
            return 0;
        }
    fprintf(stderr, "usage: rt_check init|zero|hide|reset|ptsz\n");
    return 2;
}
