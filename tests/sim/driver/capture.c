/* Stream capture state, following cuda.h's cuStreamBeginCapture and
 * cuThreadExchangeStreamCaptureMode. Entry points: capture_api.c.
 *
 * cuThreadExchangeStreamCaptureMode: "CU_STREAM_CAPTURE_MODE_GLOBAL: This is the default mode. If
 * the local thread has an ongoing capture sequence that was not initiated with
 * CU_STREAM_CAPTURE_MODE_RELAXED at cuStreamBeginCapture, or if any other thread has a concurrent
 * capture sequence initiated with CU_STREAM_CAPTURE_MODE_GLOBAL, this thread is prohibited from
 * potentially unsafe API calls. CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: If the local thread has an
 * ongoing capture sequence not initiated with CU_STREAM_CAPTURE_MODE_RELAXED, it is prohibited
 * from potentially unsafe API calls. Concurrent capture sequences in other threads are ignored.
 * CU_STREAM_CAPTURE_MODE_RELAXED: The local thread is not prohibited from potentially unsafe API
 * calls." A prohibited call fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the
 * captures concerned; cuStreamEndCapture: "If capture was invalidated, due to a violation of the
 * rules of stream capture, then a NULL graph will be returned" (with
 * CUDA_ERROR_STREAM_CAPTURE_INVALIDATED). A capture belongs to the thread that began it.
 */
#include <stdlib.h>
#include <string.h>

#include "capture_state.h"
#include "graph.h"
#include "stream.h"

pthread_mutex_t sim_capture_lock = PTHREAD_MUTEX_INITIALIZER;
struct sim_capture *sim_captures;
__thread CUstreamCaptureMode sim_capture_thread_mode; /* 0: CU_STREAM_CAPTURE_MODE_GLOBAL */

CUresult sim_capture_unsafe(void)
{
    CUstreamCaptureMode mode = sim_capture_thread_mode;
    bool prohibited = false;
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    pthread_mutex_lock(&sim_capture_lock);
    for (struct sim_capture *c = sim_captures; c; c = c->next) {
        bool own = pthread_equal(c->thread, pthread_self());
        if ((own && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!own && mode == CU_STREAM_CAPTURE_MODE_GLOBAL && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            c->invalidated = true;
            prohibited = true;
        }
    }
    pthread_mutex_unlock(&sim_capture_lock);
    return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* Caller holds the capture lock. The next captured node depends on `nodes`. */
CUresult sim_capture_set_deps(struct sim_capture *c, const CUgraphNode *nodes, size_t n)
{
    if (n > c->cap) {
        CUgraphNode *deps = realloc(c->deps, n * sizeof *deps);
        if (deps)
            c->deps = deps;
        CUgraphEdgeData *edges = realloc(c->edges, n * sizeof *edges);
        if (edges)
            c->edges = edges;
        if (!deps || !edges)
            return CUDA_ERROR_OUT_OF_MEMORY;
        c->cap = n;
    }
    if (n) {
        memcpy(c->deps, nodes, n * sizeof *nodes);
        memset(c->edges, 0, n * sizeof *c->edges);
    }
    c->ndeps = n;
    return CUDA_SUCCESS;
}

bool sim_capture_add(struct CUstream_st *s, struct sim_node_spec *spec, CUresult *rc)
{
    pthread_mutex_lock(&sim_capture_lock);
    struct sim_capture *c = s->cap;
    if (c && c->invalidated) {
        *rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c) {
        CUgraphNode node;
        *rc = sim_graph_add(c->graph, c->deps, c->ndeps, spec, &node);
        if (*rc == CUDA_SUCCESS)
            *rc = sim_capture_set_deps(c, &node, 1);
        c->invalidated = *rc != CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_capture_lock);
    return c != NULL;
}

bool sim_capture_ongoing(struct CUstream_st *s)
{
    pthread_mutex_lock(&sim_capture_lock);
    bool ongoing = s->cap != NULL;
    pthread_mutex_unlock(&sim_capture_lock);
    return ongoing;
}

CUresult sim_capture_forbid(struct CUstream_st *s)
{
    pthread_mutex_lock(&sim_capture_lock);
    struct sim_capture *c = s->cap;
    if (c)
        c->invalidated = true;
    pthread_mutex_unlock(&sim_capture_lock);
    return c ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* Caller holds the capture lock. */
void sim_capture_unlink(struct sim_capture *c)
{
    for (struct sim_capture **p = &sim_captures; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    c->stream->cap = NULL;
}

void sim_capture_free(struct sim_capture *c)
{
    if (c->owns_graph)
        sim_graph_destroy(c->graph);
    free(c->deps);
    free(c->edges);
    free(c);
}

void sim_capture_abandon(struct CUstream_st *s)
{
    pthread_mutex_lock(&sim_capture_lock);
    struct sim_capture *c = s->cap;
    if (c)
        sim_capture_unlink(c);
    pthread_mutex_unlock(&sim_capture_lock);
    if (c)
        sim_capture_free(c);
}
