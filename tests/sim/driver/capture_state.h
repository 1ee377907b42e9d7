/* Capture state shared by capture.c and capture_api.c. */
#ifndef SIM_CAPTURE_STATE_H
#define SIM_CAPTURE_STATE_H

#include <pthread.h>

#include "capture.h"

struct sim_capture {
    struct CUstream_st *stream;
    CUgraph graph;
    bool owns_graph;          /* made by cuStreamBeginCapture (not ...ToGraph) */
    CUstreamCaptureMode mode;
    pthread_t thread;         /* the thread that began it */
    uint64_t id;
    bool invalidated;
    CUgraphNode *deps;        /* what the next captured node depends on */
    CUgraphEdgeData *edges;   /* zeroed edge data parallel to deps */
    size_t ndeps, cap;
    struct sim_capture *next;
};

extern pthread_mutex_t sim_capture_lock;
extern struct sim_capture *sim_captures; /* every ongoing capture */
extern __thread CUstreamCaptureMode sim_capture_thread_mode;

CUresult sim_capture_set_deps(struct sim_capture *c, const CUgraphNode *nodes, size_t n);
void sim_capture_unlink(struct sim_capture *c);
void sim_capture_free(struct sim_capture *c);

#endif
