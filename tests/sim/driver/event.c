/* Events: cuEventCreate, cuEventRecord(+_ptsz), cuEventRecordWithFlags(+_ptsz), cuEventQuery,
 * cuEventSynchronize, cuEventDestroy(_v2), cuStreamWaitEvent(+_ptsz). Work completes when it is
 * enqueued; with SIMCUDA_LAZY_EVENTS=1 an event recorded on a stream reads CUDA_ERROR_NOT_READY
 * until cuEventSynchronize, a synchronize of that stream or cuCtxSynchronize. Recording on a
 * capturing stream, and waiting, have no effect (one stream per capture is modelled). */
#include <pthread.h>
#include <stdlib.h>

#include "capture.h"
#include "ctx.h"
#include "pool.h"
#include "stream.h"

#define EVENT_MAGIC 0x45564e54u
#define EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

struct CUevent_st {
    uint32_t magic;
    CUcontext ctx;
    unsigned flags;
    struct sim_timeline *tl; /* of the stream it was last recorded on, or NULL */
    uint64_t at;             /* epoch of that record */
    bool synced;             /* cuEventSynchronize since */
    struct CUevent_st *prev, *next;
};

/* Guards the events and the list of live ones (reachable after their context's teardown). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUevent_st *events;

static CUresult valid(CUevent ev)
{
    return ev && ev->magic == EVENT_MAGIC ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    SIM_ENTER(cuEventCreate);
    if (!phEvent || (Flags & ~(unsigned)EVENT_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult rc = sim_ctx_current(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    CUevent ev = calloc(1, sizeof *ev);
    if (!ev)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ev = (struct CUevent_st){.magic = EVENT_MAGIC, .ctx = ctx, .flags = Flags};
    pthread_mutex_lock(&lock);
    ev->next = events;
    if (events)
        events->prev = ev;
    events = ev;
    pthread_mutex_unlock(&lock);
    *phEvent = ev;
    return CUDA_SUCCESS;
}

/* cuda.h, cuEventRecordWithFlags: "hEvent and hStream must be from the same context otherwise
 * CUDA_ERROR_INVALID_HANDLE is returned." */
static CUresult record(CUevent ev, CUstream h, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = valid(ev);
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc == CUDA_SUCCESS && s->ctx != ev->ctx)
        rc = CUDA_ERROR_INVALID_HANDLE;
    if (rc != CUDA_SUCCESS || sim_capture_ongoing(s))
        return rc;
    uint64_t at = sim_epoch_next();
    atomic_store(&s->tl->work, at);
    pthread_mutex_lock(&lock);
    if (ev->tl)
        sim_timeline_unref(ev->tl);
    ev->tl = sim_timeline_ref(s->tl);
    ev->at = at;
    ev->synced = false;
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    SIM_ENTER(cuEventRecord);
    return record(hEvent, hStream, false);
}

CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    SIM_ENTER(cuEventRecord_ptsz);
    return record(hEvent, hStream, true);
}

/* cuda.h, cuEventRecordWithFlags: flags CU_EVENT_RECORD_DEFAULT or CU_EVENT_RECORD_EXTERNAL. */
CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    SIM_ENTER(cuEventRecordWithFlags);
    return flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL ? CUDA_ERROR_INVALID_VALUE : record(hEvent, hStream, false);
}

CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    SIM_ENTER(cuEventRecordWithFlags_ptsz);
    return flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL ? CUDA_ERROR_INVALID_VALUE : record(hEvent, hStream, true);
}

/* cuda.h, cuEventQuery: "Returns CUDA_SUCCESS if all captured work has been completed, or
 * CUDA_ERROR_NOT_READY if any captured work is incomplete"; cuEventRecordWithFlags: "Before the
 * first call ..., an event represents an empty set of work". */
CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    SIM_ENTER(cuEventQuery);
    CUresult rc = valid(hEvent);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    if (hEvent->tl && !hEvent->synced && !sim_timeline_done(hEvent->tl, hEvent->ctx, hEvent->at))
        rc = CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&lock);
    return rc;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    SIM_ENTER(cuEventSynchronize);
    CUresult rc = valid(hEvent);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    hEvent->synced = true;
    pthread_mutex_unlock(&lock);
    sim_pool_apply_thresholds(hEvent->ctx->dev);
    return CUDA_SUCCESS;
}

static CUresult destroy(CUevent ev)
{
    CUresult rc = valid(ev);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    if (ev->prev)
        ev->prev->next = ev->next;
    else
        events = ev->next;
    if (ev->next)
        ev->next->prev = ev->prev;
    pthread_mutex_unlock(&lock);
    if (ev->tl)
        sim_timeline_unref(ev->tl);
    ev->magic = 0;
    free(ev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
    SIM_ENTER(cuEventDestroy);
    return destroy(hEvent);
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    SIM_ENTER(cuEventDestroy_v2);
    return destroy(hEvent);
}

static CUresult wait_event(CUstream h, CUevent ev, unsigned int flags, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = valid(ev);
    if (rc == CUDA_SUCCESS && (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(h, per_thread_api, &s);
    return rc;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    SIM_ENTER(cuStreamWaitEvent);
    return wait_event(hStream, hEvent, Flags, false);
}

CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    SIM_ENTER(cuStreamWaitEvent_ptsz);
    return wait_event(hStream, hEvent, Flags, true);
}
