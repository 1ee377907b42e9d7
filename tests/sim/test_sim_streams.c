/* Streams, events (SIMCUDA_LAZY_EVENTS) and the stream capture rules of
 * cuThreadExchangeStreamCaptureMode. */
#include <pthread.h>

#include "test_sim.h"

Test(events, lazy_events_complete_at_a_synchronize)
{
    const char *const env[] = {"SIMCUDA_LAZY_EVENTS=1", NULL};
    CUstream s;
    CUevent e;
    start(env);
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    OK(cuEventQuery(e)); /* never recorded: an empty set of work */
    OK(cuEventRecord(e, s));
    cr_assert_eq(cuEventQuery(e), CUDA_ERROR_NOT_READY);
    cr_assert_eq(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    OK(cuStreamSynchronize(s));
    OK(cuEventQuery(e));
    OK(cuStreamQuery(s));
    OK(cuEventRecord(e, s));
    OK(cuEventSynchronize(e));
    OK(cuEventQuery(e));
    OK(cuEventRecord(e, s));
    OK(cuCtxSynchronize());
    OK(cuEventQuery(e));
    OK(cuEventDestroy_v2(e));
    OK(cuStreamDestroy_v2(s));
}

Test(events, eager_by_default)
{
    CUstream s;
    CUevent e;
    start(NULL);
    OK(cuStreamCreate(&s, 0));
    OK(cuEventCreate(&e, 0));
    OK(cuEventRecord(e, s));
    OK(cuEventQuery(e));
    OK(cuStreamQuery(s));
}

struct other {
    CUcontext ctx;
    CUstreamCaptureMode mode;
    CUresult rc;
};

/* cuMemAlloc_v2 (potentially unsafe) on another thread in capture mode `mode`. */
static void *allocate(void *arg)
{
    struct other *o = arg;
    CUstreamCaptureMode mode = o->mode;
    CUdeviceptr p;
    cuCtxSetCurrent(o->ctx);
    cuThreadExchangeStreamCaptureMode(&mode);
    o->rc = cuMemAlloc_v2(&p, 4096);
    if (o->rc == CUDA_SUCCESS)
        cuMemFree_v2(p);
    return NULL;
}

static CUresult from_other_thread(CUcontext ctx, CUstreamCaptureMode mode)
{
    struct other o = {ctx, mode, CUDA_ERROR_UNKNOWN};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, allocate, &o), 0);
    pthread_join(t, NULL);
    return o.rc;
}

Test(capture, global_capture_prohibits_unsafe_calls_of_global_mode_threads)
{
    CUcontext ctx = start(NULL);
    CUstream s;
    CUstreamCaptureStatus status;
    CUgraph graph = (CUgraph)&graph;
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    cr_assert_eq(from_other_thread(ctx, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuStreamIsCapturing(s, &status));
    cr_assert_eq(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    cr_assert_eq(cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    cr_assert_null(graph);
    cr_assert_eq(live(SIMCUDA_DEVICE), 0);
}

Test(capture, relaxed_and_thread_local_threads_may_allocate)
{
    CUcontext ctx = start(NULL);
    CUstream s;
    CUgraph graph;
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(from_other_thread(ctx, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(from_other_thread(ctx, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(cuStreamEndCapture(s, &graph));
    cr_assert_not_null(graph);
    OK(cuGraphDestroy(graph));
}

Test(capture, own_capture_prohibits_own_unsafe_calls_unless_relaxed)
{
    CUcontext ctx = start(NULL);
    CUstream s;
    CUgraph graph;
    CUdeviceptr p;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    OK(from_other_thread(ctx, CU_STREAM_CAPTURE_MODE_GLOBAL)); /* not a global capture */
    cr_assert_eq(cuMemAlloc_v2(&p, 16), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuMemAlloc_v2(&p, 16));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    cr_assert_eq(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(cuMemFree_v2(p)); /* relaxed thread */
    OK(cuStreamEndCapture(s, &graph));
}

Test(capture, legacy_stream_cannot_capture_and_work_becomes_nodes)
{
    CUstream s;
    CUgraph graph;
    CUdeviceptr d;
    unsigned char host[16] = {0};
    size_t count = 0;
    start(NULL);
    OK(cuMemAlloc_v2(&d, 16));
    OK(cuMemsetD8_v2(d, 1, 16));
    cr_assert_eq(cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
                 CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemsetD8Async(d, 2, 16, s));
    OK(cuMemcpyDtoHAsync_v2(host, d, 16, s));
    cr_assert_eq(host[0], 0); /* captured, not run */
    cr_assert_eq(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    cr_assert_eq(cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemsetD8Async(d, 2, 16, s));
    OK(cuMemcpyDtoHAsync_v2(host, d, 16, s));
    OK(cuStreamEndCapture(s, &graph));
    OK(cuGraphGetNodes(graph, NULL, &count));
    cr_assert_eq(count, 2);
    CUgraphExec exec;
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    OK(cuGraphLaunch(exec, s));
    cr_assert_eq(host[15], 2);
}

/* Driver API, "Stream synchronization behavior": the per-thread default stream "is an implicit
 * stream local to both the thread and the CUcontext": a capture on one context's is not on
 * another's, and each ends on its own. */
Test(capture, per_thread_stream_is_per_context)
{
    const char *const env[] = {"SIMCUDA_DEVICE_COUNT=2", NULL};
    CUcontext c0 = start(env), c1;
    CUstreamCaptureStatus st;
    CUgraph g0, g1;
    OK(cuDevicePrimaryCtxRetain(&c1, 1));
    OK(cuStreamBeginCapture_v2(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuCtxSetCurrent(c1));
    OK(cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_NONE);
    OK(cuStreamBeginCapture_v2(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g1));
    OK(cuCtxSetCurrent(c0));
    OK(cuStreamIsCapturing(CU_STREAM_PER_THREAD, &st));
    cr_assert_eq(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(cuStreamEndCapture(CU_STREAM_PER_THREAD, &g0));
    cr_assert_neq(g0, g1);
}
