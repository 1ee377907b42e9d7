/* Stream capture entry points: cuStreamBeginCapture (10000 ABI), cuStreamBeginCapture_v2 (mode),
 * cuStreamBeginCaptureToGraph, cuStreamEndCapture, cuStreamIsCapturing, cuStreamGetCaptureInfo
 * (v1, _v2, _v3), each with its _ptsz twin, and cuThreadExchangeStreamCaptureMode. */
#include <stdlib.h>
#include <time.h>

#include "capture_state.h"
#include "graph.h"
#include "stream.h"

static uint64_t next_id;

/* cuda.h, cuStreamBeginCapture: "Capture may not be initiated if stream is CU_STREAM_LEGACY."
 * "it may only be initiated if the stream is not already in capture mode". */
static CUresult begin(CUstream h, bool per_thread_api, CUgraph graph, const CUgraphNode *deps, size_t ndeps,
                      CUstreamCaptureMode mode)
{
    struct CUstream_st *s;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED || (ndeps && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (s->role == SIM_STREAM_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct sim_capture *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (struct sim_capture){.stream = s, .graph = graph, .mode = mode, .thread = pthread_self()};
    rc = graph ? sim_graph_check(graph) : sim_graph_new(&c->graph);
    c->owns_graph = !graph && rc == CUDA_SUCCESS;
    pthread_mutex_lock(&sim_capture_lock);
    if (rc == CUDA_SUCCESS && s->cap)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_set_deps(c, deps, ndeps);
    if (rc == CUDA_SUCCESS) {
        c->id = ++next_id;
        c->next = sim_captures;
        sim_captures = c;
        s->cap = c;
    }
    pthread_mutex_unlock(&sim_capture_lock);
    if (rc != CUDA_SUCCESS)
        sim_capture_free(c);
    else if (sim_cfg.begin_capture_ms) /* capturing already, as other threads see it */
        nanosleep(&(struct timespec){(time_t)(sim_cfg.begin_capture_ms / 1000),
                                     (long)(sim_cfg.begin_capture_ms % 1000) * 1000000L}, NULL);
    return rc;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
    SIM_ENTER(cuStreamBeginCapture);
    return begin(hStream, false, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
    SIM_ENTER(cuStreamBeginCapture_ptsz);
    return begin(hStream, true, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL);
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    SIM_ENTER(cuStreamBeginCapture_v2);
    return begin(hStream, false, NULL, NULL, 0, mode);
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    SIM_ENTER(cuStreamBeginCapture_v2_ptsz);
    return begin(hStream, true, NULL, NULL, 0, mode);
}

/* Edge data is not modelled (only default edges exist here). */
CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                             CUstreamCaptureMode mode)
{
    SIM_ENTER(cuStreamBeginCaptureToGraph);
    (void)dependencyData;
    return hGraph ? begin(hStream, false, hGraph, dependencies, numDependencies, mode) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                  CUstreamCaptureMode mode)
{
    SIM_ENTER(cuStreamBeginCaptureToGraph_ptsz);
    (void)dependencyData;
    return hGraph ? begin(hStream, true, hGraph, dependencies, numDependencies, mode) : CUDA_ERROR_INVALID_VALUE;
}

/* cuda.h, cuStreamEndCapture: "If the mode argument to cuStreamBeginCapture was not
 * CU_STREAM_CAPTURE_MODE_RELAXED, this call must be from the same thread as cuStreamBeginCapture"
 * (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD); "If capture was invalidated ... then a NULL graph will
 * be returned." */
static CUresult end(CUstream h, bool per_thread_api, CUgraph *phGraph)
{
    struct CUstream_st *s;
    CUresult rc = phGraph ? sim_stream_resolve(h, per_thread_api, &s) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&sim_capture_lock);
    struct sim_capture *c = s->cap;
    if (!c)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (c->mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(c->thread, pthread_self()))
        rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    else
        sim_capture_unlink(c);
    pthread_mutex_unlock(&sim_capture_lock);
    if (rc != CUDA_SUCCESS)
        return rc;
    *phGraph = c->invalidated ? NULL : c->graph;
    rc = c->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
    c->owns_graph = c->owns_graph && c->invalidated;
    sim_capture_free(c);
    return rc;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    SIM_ENTER(cuStreamEndCapture);
    return end(hStream, false, phGraph);
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    SIM_ENTER(cuStreamEndCapture_ptsz);
    return end(hStream, true, phGraph);
}

/* Caller holds the capture lock. cuda.h, cuStreamIsCapturing: "if this is called on
 * CU_STREAM_LEGACY (the "null stream") while a blocking stream in the same context is capturing,
 * it will return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT". */
static CUresult status_of(struct CUstream_st *s, CUstreamCaptureStatus *status)
{
    if (s->role == SIM_STREAM_LEGACY)
        for (struct sim_capture *c = sim_captures; c; c = c->next)
            if (c->stream->ctx == s->ctx && !(c->stream->flags & CU_STREAM_NON_BLOCKING))
                return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    *status = !s->cap                ? CU_STREAM_CAPTURE_STATUS_NONE
              : s->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                    : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return CUDA_SUCCESS;
}

struct capture_info {
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
    const CUgraphNode **deps;
    const CUgraphEdgeData **edges;
    size_t *ndeps;
};

/* cuda.h, cuStreamGetCaptureInfo: "Valid data (other than capture status) is returned only if
 * ... the returned capture status is CU_STREAM_CAPTURE_STATUS_ACTIVE"; "If edgeData_out is
 * non-NULL then dependencies_out must be as well." The dependency array is the stream's own,
 * valid until the next call that operates on the stream. */
static CUresult capture_info(CUstream h, bool per_thread_api, struct capture_info out)
{
    struct CUstream_st *s;
    if (!out.status || (out.edges && !out.deps))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&sim_capture_lock);
    rc = status_of(s, out.status);
    if (rc == CUDA_SUCCESS && *out.status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        if (out.id)
            *out.id = s->cap->id;
        if (out.graph)
            *out.graph = s->cap->graph;
        if (out.deps)
            *out.deps = s->cap->deps;
        if (out.edges)
            *out.edges = s->cap->edges;
        if (out.ndeps)
            *out.ndeps = s->cap->ndeps;
    }
    pthread_mutex_unlock(&sim_capture_lock);
    return rc;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    SIM_ENTER(cuStreamIsCapturing);
    return capture_info(hStream, false, (struct capture_info){.status = captureStatus});
}

CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    SIM_ENTER(cuStreamIsCapturing_ptsz);
    return capture_info(hStream, true, (struct capture_info){.status = captureStatus});
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                        cuuint64_t *id_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo);
    return capture_info(hStream, false, (struct capture_info){captureStatus_out, id_out, NULL, NULL, NULL, NULL});
}

CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                             cuuint64_t *id_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo_ptsz);
    return capture_info(hStream, true, (struct capture_info){captureStatus_out, id_out, NULL, NULL, NULL, NULL});
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out,
                                           const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo_v2);
    return capture_info(hStream, false, (struct capture_info){captureStatus_out, id_out, graph_out,
                                                              dependencies_out, NULL, numDependencies_out});
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                cuuint64_t *id_out, CUgraph *graph_out,
                                                const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo_v2_ptsz);
    return capture_info(hStream, true, (struct capture_info){captureStatus_out, id_out, graph_out,
                                                             dependencies_out, NULL, numDependencies_out});
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out,
                                           const CUgraphNode **dependencies_out, const CUgraphEdgeData **edgeData_out,
                                           size_t *numDependencies_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo_v3);
    return capture_info(hStream, false, (struct capture_info){captureStatus_out, id_out, graph_out,
                                                              dependencies_out, edgeData_out, numDependencies_out});
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                cuuint64_t *id_out, CUgraph *graph_out,
                                                const CUgraphNode **dependencies_out,
                                                const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    SIM_ENTER(cuStreamGetCaptureInfo_v3_ptsz);
    return capture_info(hStream, true, (struct capture_info){captureStatus_out, id_out, graph_out,
                                                             dependencies_out, edgeData_out, numDependencies_out});
}

/* cuda.h: "Sets the calling thread's stream capture interaction mode to the value contained in
 * *mode, and overwrites *mode with the previous mode for the thread." */
CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    SIM_ENTER(cuThreadExchangeStreamCaptureMode);
    if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode previous = sim_capture_thread_mode;
    sim_capture_thread_mode = *mode;
    *mode = previous;
    return CUDA_SUCCESS;
}
