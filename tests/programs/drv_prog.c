/* drv_prog SCENARIO: a program linked directly to libcuda (door 1: the shim's exported driver
 * symbols). Prints "key=value" lines. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
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

/* instantiate_lookup / instantiate_v2_first: "cuGraphInstantiate" looked up at 12000 is
 * cuGraphInstantiate_v2 (five arguments, the real driver's answer) or, under
 * SIMCUDA_INSTANTIATE_LOOKUP=withflags, the three-argument cuGraphInstantiateWithFlags (cuda.h has
 * `#define cuGraphInstantiate cuGraphInstantiateWithFlags` since 12.0). A graph with one 1 MiB
 * allocation node and no free node is instantiated through the lookup and through the v2 ABI
 * directly, in either order, and the lookup's executable graph launched twice: with
 * AUTO_FREE_ON_LAUNCH through WithFlags, with a cuMemFree between the launches through v2. */
CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize);

static CUresult instantiate_v2(CUgraph g)
{
    CUgraphExec e;
    CUgraphNode err = (CUgraphNode)1;
    char log[64] = "unchanged";
    CUresult rc = cuGraphInstantiate_v2(&e, g, &err, log, sizeof log);
    printf("v2_error_node_cleared=%d\n", err == NULL);
    return rc == CUDA_SUCCESS ? cuGraphExecDestroy(e) : rc;
}

/* cudaTypedefs.h declares PFN_cuGraphInstantiate_v11000 only for __CUDA_API_VERSION_INTERNAL. */
typedef CUresult(CUDAAPI *instantiate_v11000)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);

static int instantiate_lookup(int v2_first)
{
    CUcontext ctx;
    CUgraph g;
    CUgraphNode node;
    CUDA_MEM_ALLOC_NODE_PARAMS ap = {0};
    ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.poolProps.location.id = 0;
    ap.bytesize = 1 << 20;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) || cuGraphCreate(&g, 0) ||
        cuGraphAddMemAllocNode(&node, g, NULL, 0, &ap))
        return 10;
    if (v2_first)
        printf("rc_v2=%d\n", (int)instantiate_v2(g));
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    printf("rc_lookup=%d\n", (int)cuGetProcAddress_v2("cuGraphInstantiate", &fn, 12000, 0, &st));
    if (!fn)
        return 11;
    const char *answer = getenv("SIMCUDA_INSTANTIATE_LOOKUP");
    bool with_flags = answer && strcmp(answer, "withflags") == 0;
    CUgraphExec e;
    CUgraphNode err;
    char log[64];
    CUresult rc = with_flags
                      ? ((PFN_cuGraphInstantiateWithFlags_v11040)fn)(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)
                      : ((instantiate_v11000)fn)(&e, g, &err, log, sizeof log);
    printf("rc_instantiate=%d\n", (int)rc);
    printf("rc_launch1=%d\n", (int)cuGraphLaunch(e, NULL));
    if (!with_flags) /* no AUTO_FREE_ON_LAUNCH: the allocation freed before the second launch */
        printf("rc_free_between=%d\n", (int)(cuStreamSynchronize(NULL) || cuMemFree(ap.dptr)));
    printf("rc_launch2=%d\n", (int)cuGraphLaunch(e, NULL));
    printf("rc_sync=%d\n", (int)cuStreamSynchronize(NULL));
    printf("rc_exec_destroy=%d\n", (int)cuGraphExecDestroy(e));
    if (!v2_first)
        printf("rc_v2=%d\n", (int)instantiate_v2(g));
    return 0;
}

/* ctx_churn (2 devices): 300 contexts made, on devices 0 and 1 in turn, given an allocation and
 * destroyed, then a new context of device 1 with a stream, on which the primary context's thread
 * (device 0) allocates 1000 times: counted on device 1, whose context took the slot of a
 * destroyed context of device 0 in the shim's cache. Prints the
 * cuCtxPushCurrent_v2 calls of those allocations: the shim's shared context cache, full of
 * forgotten contexts after 256 destroys, had no room for the new one, and every allocation on its
 * stream asked the driver its device (push, cuCtxGetDevice, pop; a soak trial). */
static int ctx_churn(void)
{
    CUcontext prim, c, x;
    CUdeviceptr p;
    CUstream s;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&prim, 0))
        return 10;
    for (int i = 0; i < 300; i++)
        if (cuCtxCreate(&x, NULL, 0, i & 1) || cuMemAlloc(&p, 4096) || cuMemFree(p) || cuCtxDestroy(x))
            return 11;
    if (cuCtxCreate(&c, NULL, 0, 1) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuCtxSetCurrent(prim))
        return 12;
    uint64_t before = simcuda_call_count("cuCtxPushCurrent_v2");
    for (int i = 0; i < 1000; i++)
        if (cuMemAllocAsync(&p, 4096, s) || cuMemFreeAsync(p, s))
            return 13;
    printf("churn_pushes=%llu\n", (unsigned long long)(simcuda_call_count("cuCtxPushCurrent_v2") - before));
    return cuStreamSynchronize(s) || cuStreamDestroy(s) || cuCtxDestroy(c) ? 14 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "ctx_churn") == 0)
        return ctx_churn();
    CUdeviceptr p = 0;
    if (argc == 2 && strcmp(argv[1], "detach") == 0)
        return detach();
    if (argc == 2 && strcmp(argv[1], "cancel_start") == 0)
        return cancel_start();
    if (argc == 2 && strcmp(argv[1], "instantiate_lookup") == 0)
        return instantiate_lookup(0);
    if (argc == 2 && strcmp(argv[1], "instantiate_v2_first") == 0)
        return instantiate_lookup(1);
    CUcontext ctx;
    size_t free_b, total_b;
    if (argc == 2 && strcmp(argv[1], "newer_abi") == 0)
        return newer_abi();
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "before_init") != 0)) {
        fprintf(stderr, "usage: %s [before_init|newer_abi|cancel_start|detach|instantiate_lookup|instantiate_v2_first] (cuMemAlloc/cuMemFree through the shim's exported "
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
