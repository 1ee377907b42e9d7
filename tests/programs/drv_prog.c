/* drv_prog SCENARIO: a program linked directly to libcuda (door 1: the shim's exported driver
 * symbols). Prints "key=value" lines. */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

uint64_t simcuda_call_count(const char *symbol); /* tests/sim/simcuda.h */

/* newer_abi (2 devices): the program's first lookups of functions the shim only calls are at
 * versions whose ABI is newer than the one the shim calls (cuCtxGetDevice_v2(CUdevice *, CUcontext)
 * at 13000, cuCtxSynchronize_v2, the per-thread cuStreamSynchronize); then a cuMemAlloc on device 1
 * (the shim asks cuCtxGetDevice for the context's device). The shim must never call one of those
 * with its own prototype. */
static int newer_abi(void)
{
    CUcontext c1;
    CUdeviceptr p;
    void *fn;
    CUdriverProcAddressQueryResult st;
    if (cuInit(0))
        return 10;
    printf("rc_lookup_getdevice=%d\n", (int)cuGetProcAddress_v2("cuCtxGetDevice", &fn, 13000, 0, &st));
    printf("rc_lookup_sync=%d\n", (int)cuGetProcAddress_v2("cuCtxSynchronize", &fn, 13000, 0, &st));
    printf("rc_lookup_stream_sync=%d\n", (int)cuGetProcAddress_v2("cuStreamSynchronize", &fn, 12000,
                                                                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    if (cuDevicePrimaryCtxRetain(&c1, 1) || cuCtxSetCurrent(c1) || cuMemAlloc(&p, 1 << 20) || cuMemFree(p))
        return 11;
    printf("calls_getdevice_v2=%llu\n", (unsigned long long)simcuda_call_count("cuCtxGetDevice_v2"));
    printf("calls_sync_v2=%llu\n", (unsigned long long)simcuda_call_count("cuCtxSynchronize_v2"));
    printf("calls_stream_sync_ptsz=%llu\n", (unsigned long long)simcuda_call_count("cuStreamSynchronize_ptsz"));
    return 0;
}

/* cancel_start: the first CUDA call (which starts the shim: segment file, system calls that are
 * cancellation points) comes from a thread with a cancellation pending; then main allocates. */
static CUcontext cancel_ctx;

static void *cancelled_worker(void *arg)
{
    CUdeviceptr *p = arg;
    if (cuCtxSetCurrent(cancel_ctx))
        return NULL;
    pthread_cancel(pthread_self());
    cuMemAlloc(p, 4096); /* deferred cancellation acts at the next cancellation point */
    pthread_testcancel();
    return NULL;
}

static int cancel_start(void)
{
    CUcontext ctx;
    CUdeviceptr p = 0, q;
    pthread_t t;
    void *ret;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 10;
    cancel_ctx = ctx;
    if (pthread_create(&t, NULL, cancelled_worker, &p) || pthread_join(t, &ret))
        return 11;
    printf("worker_cancelled=%d\n", ret == PTHREAD_CANCELED);
    printf("rc_main=%d\n", (int)cuMemAlloc(&q, 1 << 20));
    return 0;
}

/* detach: a created context ended with cuCtxDetach (deprecated), through the shim's exported
 * symbol; prints how often the driver was asked cuCtxGetApiVersion. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int detach(void)
{
    CUcontext c;
    CUdeviceptr p;
    if (cuInit(0) || cuCtxCreate(&c, NULL, 0, 0) || cuMemAlloc(&p, 4096))
        return 10;
    printf("rc_detach=%d\n", (int)cuCtxDetach(c));
    printf("api_version_asks=%llu\n", (unsigned long long)simcuda_call_count("cuCtxGetApiVersion"));
    return 0;
}
#pragma GCC diagnostic pop

int main(int argc, char **argv)
{
    CUdeviceptr p = 0;
    if (argc == 2 && strcmp(argv[1], "detach") == 0)
        return detach();
    if (argc == 2 && strcmp(argv[1], "cancel_start") == 0)
        return cancel_start();
    CUcontext ctx;
    size_t free_b, total_b;
    if (argc == 2 && strcmp(argv[1], "newer_abi") == 0)
        return newer_abi();
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "before_init") != 0)) {
        fprintf(stderr, "usage: %s [before_init|newer_abi|cancel_start|detach] (cuMemAlloc/cuMemFree through the shim's exported "
                "driver symbols; before_init: calls before cuInit first)\n", argv[0]);
        return 2;
    }
    if (argc == 2 && strcmp(argv[1], "before_init") == 0) {
        /* Calls before cuInit return what the driver returns (CUDA_ERROR_NOT_INITIALIZED). */
        printf("rc_alloc=%d\n", (int)cuMemAlloc(&p, 4096));
        printf("rc_free=%d\n", (int)cuMemFree(p));
        printf("rc_info=%d\n", (int)cuMemGetInfo(&free_b, &total_b));
        printf("rc_host=%d\n", (int)cuMemFreeHost(NULL));
    }
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 10;
    if (cuMemAlloc(&p, 4096))
        return 11;
    CUdeviceptr q;
    if (cuMemAlloc(&q, 1 << 20) || cuMemFree(q))
        return 12;
    printf("alloc=ok\n");
    return 0;
}
