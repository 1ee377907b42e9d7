/* Contexts: teardown frees what the context allocated; thread safety. */
#include <pthread.h>
#include <stdlib.h>

#include "test_sim.h"

Test(contexts, primary_reset_frees_every_allocation_of_the_context)
{
    static char registered[8192] __attribute__((aligned(4096)));
    CUdeviceptr d, m, a;
    void *h;
    CUarray array;
    CUmemGenericAllocationHandle vmm;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUDA_ARRAY_DESCRIPTOR desc = {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    unsigned flags;
    int active;
    start(no_overhead);
    OK(cuMemAlloc_v2(&d, MiB));
    OK(cuMemAllocManaged(&m, MiB, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemHostAlloc(&h, 4096, 0));
    OK(cuMemHostRegister_v2(registered, sizeof registered, 0));
    OK(cuArrayCreate_v2(&array, &desc));
    OK(cuMemAllocAsync(&a, MiB, NULL));
    OK(cuMemCreate(&vmm, 2 * MiB, &prop, 0));
    cr_assert_eq(live(SIMCUDA_ARRAY), 64 * 64 * 4);
    cr_assert_eq(simcuda_used_bytes(0), MiB + 64 * 64 * 4 + 2 * MiB + 2 * MiB);
    OK(cuDevicePrimaryCtxReset_v2(0));
    /* The VMM handle and the stream-ordered allocation (with its pool's 2 MiB chunk) are not the
     * context's: cuda.h cuCtxDestroy, "will not destroy memory allocations by cuMemCreate(),
     * cuMemAllocAsync() and cuMemAllocFromPoolAsync()". */
    for (int k = 0; k < SIMCUDA_KIND_COUNT; k++)
        cr_expect_eq(live((simcuda_kind)k),
                     k == SIMCUDA_VMM || k == SIMCUDA_POOL_RESERVED ? 2 * MiB : k == SIMCUDA_ASYNC ? MiB : 0,
                     "kind %d", k);
    cr_assert_eq(simcuda_used_bytes(0), 4 * MiB);
    OK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    cr_assert_eq(active, 0);
    cr_assert_eq(cuMemAlloc_v2(&d, 16), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    OK(cuDevicePrimaryCtxRelease_v2(0)); /* "safe ... even after resetting the device" */
    cr_assert_eq(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuMemRelease(vmm));
    cr_assert_eq(simcuda_used_bytes(0), 2 * MiB);
    /* Freed explicitly in a new primary context. */
    CUcontext again;
    OK(cuDevicePrimaryCtxRetain(&again, 0));
    OK(cuCtxSetCurrent(again));
    OK(cuMemFreeAsync(a, NULL));
    OK(cuCtxSynchronize());
    cr_assert_eq(live(SIMCUDA_ASYNC), 0);
    cr_assert_eq(simcuda_used_bytes(0), 0);
    OK(cuDevicePrimaryCtxRelease_v2(0));
}

Test(contexts, last_primary_release_and_ctx_destroy_tear_down)
{
    const char *const env[] = {"SIMCUDA_CTX_OVERHEAD=1MiB", NULL};
    CUcontext primary = start(env), created, current;
    CUdeviceptr d;
    OK(cuMemAlloc_v2(&d, 100));
    cr_assert_eq(simcuda_used_bytes(0), MiB + 512);
    OK(cuCtxCreate(&created, NULL, 0, 0)); /* cuCtxCreate_v4 */
    OK(cuCtxGetCurrent(&current));
    cr_assert_eq(current, created);
    OK(cuMemAlloc_v2(&d, 1000));
    cr_assert_eq(simcuda_used_bytes(0), 2 * MiB + 512 + 1024);
    OK(cuCtxDestroy_v2(created));
    OK(cuCtxGetCurrent(&current));
    cr_assert_eq(current, primary);
    cr_assert_eq(simcuda_used_bytes(0), MiB + 512);
    cr_assert_eq(live(SIMCUDA_DEVICE), 100);
    OK(cuDevicePrimaryCtxRelease_v2(0));
    cr_assert_eq(simcuda_used_bytes(0), 0);
    cr_assert_eq(live(SIMCUDA_DEVICE), 0);
}

#define THREADS 16
#define PAIRS 10000

static void *churn(void *ctx)
{
    unsigned seed = (unsigned)(uintptr_t)&seed;
    if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return ctx;
    for (int i = 0; i < PAIRS; i++) {
        CUdeviceptr p;
        if (cuMemAlloc_v2(&p, 1 + (size_t)(rand_r(&seed) % (128 * KiB))) != CUDA_SUCCESS ||
            cuMemFree_v2(p) != CUDA_SUCCESS)
            return ctx;
    }
    return NULL;
}

Test(contexts, sixteen_threads_allocate_and_free, .timeout = 60)
{
    CUcontext ctx = start(NULL);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&threads[i], NULL, churn, ctx), 0);
    for (int i = 0; i < THREADS; i++) {
        void *failed;
        pthread_join(threads[i], &failed);
        cr_expect_null(failed, "thread %d failed", i);
    }
    cr_assert_eq(simcuda_call_count("cuMemAlloc_v2"), THREADS * PAIRS);
    cr_assert_eq(live(SIMCUDA_DEVICE), 0);
    cr_assert_eq(simcuda_used_bytes(0), 300 * MiB);
}

/* cuda.h, cuCtxAttach / cuCtxDetach (deprecated): the usage count starts at 1 (cuCtxCreate), an
 * attach raises it, and the detach that brings it to 0 destroys the context (popped, its memory
 * freed); the context must be current to the detaching thread. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* cuCtxAttach, cuCtxDetach */
Test(contexts, detach_destroys_at_a_usage_count_of_zero)
{
    CUcontext primary = start(no_overhead), created, attached, current;
    CUdeviceptr d;
    OK(cuCtxCreate(&created, NULL, 0, 0));
    OK(cuMemAlloc_v2(&d, 1000));
    cr_assert_eq(cuCtxAttach(&attached, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cuCtxAttach(&attached, 0));
    cr_assert_eq(attached, created);
    cr_assert_eq(cuCtxDetach(primary), CUDA_ERROR_INVALID_CONTEXT); /* not current */
    OK(cuCtxDetach(created));
    cr_assert_eq(live(SIMCUDA_DEVICE), 1000);
    OK(cuCtxGetCurrent(&current));
    cr_assert_eq(current, created);
    OK(cuCtxDetach(created));
    cr_assert_eq(live(SIMCUDA_DEVICE), 0);
    OK(cuCtxGetCurrent(&current));
    cr_assert_eq(current, primary);
    unsigned version;
    cr_assert_eq(cuCtxGetApiVersion(created, &version), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    OK(cuCtxPushCurrent_v2(primary));
    cr_assert_eq(cuCtxDetach(created), CUDA_ERROR_INVALID_CONTEXT);
    /* The primary context: an attach and its detach end nothing; a second detach is refused. */
    cr_assert_eq(cuCtxDetach(primary), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuCtxAttach(&attached, 0));
    cr_assert_eq(attached, primary);
    OK(cuCtxDetach(primary));
    cr_assert_eq(cuCtxDetach(primary), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuMemAlloc_v2(&d, 100));
    cr_assert_eq(live(SIMCUDA_DEVICE), 100);
    OK(cuDevicePrimaryCtxRelease_v2(0));
}
