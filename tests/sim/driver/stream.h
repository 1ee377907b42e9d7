/* Streams and the completion model. Work runs synchronously when it is enqueued; with
 * SIMCUDA_LAZY_EVENTS=1 a stream's work (and the events recorded on it) only reads as complete
 * once the stream, its context or the event has been synchronized. */
#ifndef SIM_STREAM_H
#define SIM_STREAM_H

#include <stdatomic.h>

#include "sim.h"

enum sim_stream_role {
    SIM_STREAM_USER,       /* cuStreamCreate* */
    SIM_STREAM_LEGACY,     /* a context's NULL / CU_STREAM_LEGACY stream */
    SIM_STREAM_PER_THREAD, /* a thread's CU_STREAM_PER_THREAD stream (NULL for _ptsz/_ptds calls) */
};

/* Completion state shared by a stream and the events recorded on it (refcounted, so events may
 * outlive the stream). */
struct sim_timeline {
    _Atomic uint64_t work;   /* epoch of the last enqueued work */
    _Atomic uint64_t synced; /* epoch of the last synchronize (UINT64_MAX once destroyed) */
    _Atomic unsigned refs;
};

struct sim_capture;

struct CUstream_st {
    uint32_t magic;
    enum sim_stream_role role;
    CUcontext ctx;
    unsigned flags;
    int priority;
    struct sim_timeline *tl;
    struct sim_capture *cap; /* ongoing capture; guarded by the capture lock (capture.c) */
    struct CUstream_st *prev, *next; /* live user streams */
    struct CUstream_st *pt_next;     /* the thread's other per-thread streams (one per context) */
};

CUresult sim_stream_builtin(CUcontext ctx, enum sim_stream_role role, struct CUstream_st **out);
/* The stream a handle names: NULL is the current context's legacy stream, or with `per_thread`
 * (the _ptsz/_ptds entry points) the calling thread's per-thread stream of the current context
 * (one per thread and context: the driver API's "Stream synchronization behavior": the per-thread
 * default stream "is an implicit stream local to both the thread and the CUcontext"). Needs a current context
 * for NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD. */
CUresult sim_stream_resolve(CUstream h, bool per_thread, struct CUstream_st **out);
void sim_stream_enqueue(struct CUstream_st *s);
bool sim_timeline_done(const struct sim_timeline *tl, CUcontext ctx, uint64_t at);
struct sim_timeline *sim_timeline_ref(struct sim_timeline *tl);
void sim_timeline_unref(struct sim_timeline *tl);

#endif
