/* Stream capture: begin and end, so allocation hooks know when a stream is capturing and which
 * capture to credit (capture.h). Results are returned unchanged. */
#include <pthread.h>

#include "shim/capture.h"
#include "shim/graph.h"
#include "shim/shim.h"
#include "shim/track.h"

static CUresult begun(CUresult r, CUstream s, bool pt, CUstreamCaptureMode mode)
{
    capture_begin_done(r, s, pt, mode);
    return r;
}

/* A thread cancelled inside the driver's begin (a cancellation point there) takes the announce
 * back, or the shim would take a capture to be live for the rest of the process (every later
 * allocation counted as capture, offload off). */
static void begin_cancelled(void *mode)
{
    capture_begin_done(CUDA_ERROR_UNKNOWN, NULL, false, *(CUstreamCaptureMode *)mode);
}

#define CAPTURE_BEGIN_CALL(r, call, mode)                          \
    do {                                                           \
        CUstreamCaptureMode mode_ = (mode);                        \
        pthread_cleanup_push(begin_cancelled, &mode_);             \
        r = (call);                                                \
        pthread_cleanup_pop(0);                                    \
    } while (0)

/* The 10000 ABI has no mode: such captures behave as GLOBAL (the mode's default). */
SHIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
    REAL_OR_FAIL(cuStreamBeginCapture);
    capture_begin_announce(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUresult r;
    CAPTURE_BEGIN_CALL(r, real_(hStream), CU_STREAM_CAPTURE_MODE_GLOBAL);
    return begun(r, hStream, false, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

SHIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
    REAL_OR_FAIL(cuStreamBeginCapture_ptsz);
    capture_begin_announce(CU_STREAM_CAPTURE_MODE_GLOBAL);
    CUresult r;
    CAPTURE_BEGIN_CALL(r, real_(hStream), CU_STREAM_CAPTURE_MODE_GLOBAL);
    return begun(r, hStream, true, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

SHIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    REAL_OR_FAIL(cuStreamBeginCapture_v2);
    capture_begin_announce(mode);
    CUresult r;
    CAPTURE_BEGIN_CALL(r, real_(hStream, mode), mode);
    return begun(r, hStream, false, mode);
}

SHIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    REAL_OR_FAIL(cuStreamBeginCapture_v2_ptsz);
    capture_begin_announce(mode);
    CUresult r;
    CAPTURE_BEGIN_CALL(r, real_(hStream, mode), mode);
    return begun(r, hStream, true, mode);
}

SHIM_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                                         const CUgraphNode *dependencies,
                                                         const CUgraphEdgeData *dependencyData,
                                                         size_t numDependencies,
                                                         CUstreamCaptureMode mode)
{
    REAL_OR_FAIL(cuStreamBeginCaptureToGraph);
    capture_begin_announce(mode);
    CUresult r;
    CAPTURE_BEGIN_CALL(r, real_(hStream, hGraph, dependencies, dependencyData, numDependencies, mode), mode);
    return begun(r, hStream, false, mode);
}

SHIM_EXPORT CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                              const CUgraphNode *dependencies,
                                                              const CUgraphEdgeData *dependencyData,
                                                              size_t numDependencies,
                                                              CUstreamCaptureMode mode)
{
    REAL_OR_FAIL(cuStreamBeginCaptureToGraph_ptsz);
    capture_begin_announce(mode);
    CUresult r;
    CAPTURE_BEGIN_CALL(r, real_(hStream, hGraph, dependencies, dependencyData, numDependencies, mode), mode);
    return begun(r, hStream, true, mode);
}

static CUresult ended(CUresult r, CUstream s, bool pt, CUgraph *graph)
{
    /* cuda.h (cuStreamEndCapture): an invalidated capture also ends, returning
     * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; other errors (wrong thread, not capturing) leave it. */
    uint64_t bytes = 0;
    int device = -1;
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        bytes = capture_ended(s, pt, &device);
    if ((r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) && shim_enter()) {
        /* Counted on the device of the stream that captured. */
        if (r == CUDA_SUCCESS && graph && *graph)
            graph_captured(*graph, device >= 0 ? device : shim_current_device(NULL), bytes);
        graph_pool_sample_owed(); /* if the last capture ended: the reads that were due */
        shim_leave();
    }
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    REAL_OR_FAIL(cuStreamEndCapture);
    return ended(real_(hStream, phGraph), hStream, false, phGraph);
}

SHIM_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    REAL_OR_FAIL(cuStreamEndCapture_ptsz);
    return ended(real_(hStream, phGraph), hStream, true, phGraph);
}

/* A stream destroyed while capturing abandons its capture (cuda.h, cuStreamDestroy: the stream's
 * work is done; a capture cannot outlive its stream). */
static CUresult stream_destroyed(CUresult r, CUstream s)
{
    if (r == CUDA_SUCCESS && capture_any_live()) {
        capture_ended(s, false, NULL);
        if (shim_enter()) {
            graph_pool_sample_owed(); /* if that was the last capture: the reads that were due */
            shim_leave();
        }
    }
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    REAL_OR_FAIL(cuStreamDestroy_v2);
    return stream_destroyed(real_(hStream), hStream);
}

SHIM_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    REAL_OR_FAIL(cuStreamDestroy);
    return stream_destroyed(real_(hStream), hStream);
}
