/* Streams: cuStreamCreate, cuStreamCreateWithPriority, cuStreamDestroy(_v2), cuStreamSynchronize,
 * cuStreamQuery, cuStreamGetCtx, cuStreamAddCallback, cuLaunchHostFunc (+ _ptsz variants).
 * Work runs when it is enqueued, so callbacks and host functions run inside the call. */
#include <pthread.h>
#include <stdlib.h>

#include "capture.h"
#include "ctx.h"
#include "graph.h"
#include "pool.h"
#include "stream.h"

#define STREAM_MAGIC 0x5354524du

/* Live user streams: they stay reachable (and destroyable) after their context is torn down
 * (cuda.h, cuCtxDestroy: the context's streams are its resources; using them is the caller's
 * business). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *streams;
static pthread_key_t per_thread_key;
static pthread_once_t per_thread_once = PTHREAD_ONCE_INIT;
static __thread struct CUstream_st *per_thread_streams; /* the thread's, one per context */

struct sim_timeline *sim_timeline_ref(struct sim_timeline *tl)
{
    atomic_fetch_add(&tl->refs, 1);
    return tl;
}

void sim_timeline_unref(struct sim_timeline *tl)
{
    if (atomic_fetch_sub(&tl->refs, 1) == 1)
        free(tl);
}

/* Complete unless SIMCUDA_LAZY_EVENTS=1 and neither the stream nor its context has been
 * synchronized since epoch `at`. */
bool sim_timeline_done(const struct sim_timeline *tl, CUcontext ctx, uint64_t at)
{
    return !sim_cfg.lazy_events || atomic_load(&tl->synced) >= at || atomic_load(&ctx->synced_at) >= at;
}

static CUresult stream_new(CUcontext ctx, enum sim_stream_role role, unsigned flags, int priority,
                           struct CUstream_st **out)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    struct sim_timeline *tl = calloc(1, sizeof *tl);
    if (!s || !tl) {
        free(s);
        free(tl);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    atomic_init(&tl->refs, 1);
    *s = (struct CUstream_st){.magic = STREAM_MAGIC, .role = role, .ctx = ctx, .flags = flags,
                              .priority = priority, .tl = tl};
    *out = s;
    return CUDA_SUCCESS;
}

/* cuda.h, cuStreamDestroy: "In case the device is still doing work in the stream hStream when
 * cuStreamDestroy() is called, the function will return immediately and the resources associated
 * with hStream will be released automatically once the device has completed all work": events
 * recorded on it complete. */
static void stream_free(struct CUstream_st *s)
{
    if (s->role == SIM_STREAM_USER) {
        pthread_mutex_lock(&lock);
        if (s->prev)
            s->prev->next = s->next;
        else
            streams = s->next;
        if (s->next)
            s->next->prev = s->prev;
        pthread_mutex_unlock(&lock);
    }
    sim_capture_abandon(s);
    atomic_store(&s->tl->synced, UINT64_MAX);
    sim_timeline_unref(s->tl);
    s->magic = 0;
    free(s);
}

CUresult sim_stream_builtin(CUcontext ctx, enum sim_stream_role role, struct CUstream_st **out)
{
    return stream_new(ctx, role, 0, 0, out);
}

static void per_thread_free(void *s)
{
    for (struct CUstream_st *next; s; s = next) {
        next = ((struct CUstream_st *)s)->pt_next;
        stream_free(s);
    }
}

static void per_thread_key_create(void)
{
    pthread_key_create(&per_thread_key, per_thread_free);
}

/* Contexts are never freed (context.c), so a context's address names it for the whole run. */
static CUresult per_thread(CUcontext ctx, struct CUstream_st **out)
{
    struct CUstream_st *s = per_thread_streams;
    while (s && s->ctx != ctx)
        s = s->pt_next;
    if (!s) {
        pthread_once(&per_thread_once, per_thread_key_create);
        CUresult rc = sim_stream_builtin(ctx, SIM_STREAM_PER_THREAD, &s);
        if (rc != CUDA_SUCCESS)
            return rc;
        s->pt_next = per_thread_streams;
        per_thread_streams = s;
        pthread_setspecific(per_thread_key, per_thread_streams);
    }
    *out = s;
    return CUDA_SUCCESS;
}

CUresult sim_stream_resolve(CUstream h, bool per_thread_api, struct CUstream_st **out)
{
    if (h && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
        if (h->magic != STREAM_MAGIC)
            return CUDA_ERROR_INVALID_HANDLE;
        if (!atomic_load(&h->ctx->active))
            return CUDA_ERROR_CONTEXT_IS_DESTROYED;
        *out = h;
        return CUDA_SUCCESS;
    }
    CUcontext ctx;
    CUresult rc = sim_ctx_current(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (h == CU_STREAM_PER_THREAD || (!h && per_thread_api))
        return per_thread(ctx, out);
    *out = ctx->legacy;
    return CUDA_SUCCESS;
}

void sim_stream_enqueue(struct CUstream_st *s)
{
    atomic_store(&s->tl->work, sim_epoch_next());
}

static CUresult create(CUstream *phStream, unsigned int flags, int priority)
{
    if (!phStream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult rc = sim_ctx_current(&ctx);
    if (rc == CUDA_SUCCESS)
        rc = stream_new(ctx, SIM_STREAM_USER, flags, priority, phStream);
    if (rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&lock);
        (*phStream)->next = streams;
        if (streams)
            streams->prev = *phStream;
        streams = *phStream;
        pthread_mutex_unlock(&lock);
    }
    return rc;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    SIM_ENTER(cuStreamCreate);
    return create(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    SIM_ENTER(cuStreamCreateWithPriority);
    return create(phStream, flags, priority);
}

/* Only user streams; their context may be gone already. */
static CUresult destroy(CUstream h)
{
    if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || h->magic != STREAM_MAGIC ||
        h->role != SIM_STREAM_USER)
        return CUDA_ERROR_INVALID_HANDLE;
    stream_free(h);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    SIM_ENTER(cuStreamDestroy);
    return destroy(hStream);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    SIM_ENTER(cuStreamDestroy_v2);
    return destroy(hStream);
}

/* Potentially unsafe during capture; a capturing stream cannot be synchronized. Applies the
 * pools' release thresholds (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: "the allocator will try to release
 * memory back to the OS on the next call to stream, event or context synchronize"). */
static CUresult synchronize(CUstream h, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = sim_capture_unsafe();
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_forbid(s);
    if (rc == CUDA_SUCCESS) {
        atomic_store(&s->tl->synced, sim_epoch_next());
        sim_pool_apply_thresholds(s->ctx->dev);
    }
    return rc;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    SIM_ENTER(cuStreamSynchronize);
    return synchronize(hStream, false);
}

CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
    SIM_ENTER(cuStreamSynchronize_ptsz);
    return synchronize(hStream, true);
}

static CUresult query(CUstream h, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_forbid(s);
    if (rc == CUDA_SUCCESS && !sim_timeline_done(s->tl, s->ctx, atomic_load(&s->tl->work)))
        rc = CUDA_ERROR_NOT_READY;
    return rc;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    SIM_ENTER(cuStreamQuery);
    return query(hStream, false);
}

CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
    SIM_ENTER(cuStreamQuery_ptsz);
    return query(hStream, true);
}

/* cuda.h, cuStreamGetCtx: a created stream gives "the context that was active in the calling thread
 * when the stream was created"; "Specifying any of the special handles will return the context
 * current to the calling thread. If no context is current to the calling thread,
 * CUDA_ERROR_INVALID_CONTEXT is returned" (sim_ctx_current's error). */
static CUresult get_ctx(CUstream h, CUcontext *pctx, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = pctx ? sim_stream_resolve(h, per_thread_api, &s) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *pctx = s->ctx;
    return rc;
}

CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    SIM_ENTER(cuStreamGetCtx);
    return get_ctx(hStream, pctx, false);
}

CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    SIM_ENTER(cuStreamGetCtx_ptsz);
    return get_ctx(hStream, pctx, true);
}

/* cuda.h, cuStreamAddCallback: "flags: Reserved for future use, must be 0". Callbacks cannot be
 * captured (cuLaunchHostFunc is the capturable form). */
static CUresult add_callback(CUstream h, CUstreamCallback callback, void *userData, unsigned int flags,
                             bool per_thread_api)
{
    struct CUstream_st *s;
    if (!callback || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_forbid(s);
    if (rc == CUDA_SUCCESS) {
        callback(h, CUDA_SUCCESS, userData);
        sim_stream_enqueue(s);
    }
    return rc;
}

CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                     unsigned int flags)
{
    SIM_ENTER(cuStreamAddCallback);
    return add_callback(hStream, callback, userData, flags, false);
}

CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData,
                                          unsigned int flags)
{
    SIM_ENTER(cuStreamAddCallback_ptsz);
    return add_callback(hStream, callback, userData, flags, true);
}

/* On a capturing stream the function becomes a host node. */
static CUresult launch_host_func(CUstream h, CUhostFn fn, void *userData, bool per_thread_api)
{
    struct CUstream_st *s;
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_HOST, .u.host = {fn, userData}};
    if (sim_capture_add(s, &spec, &rc))
        return rc;
    fn(userData);
    sim_stream_enqueue(s);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    SIM_ENTER(cuLaunchHostFunc);
    return launch_host_func(hStream, fn, userData, false);
}

CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    SIM_ENTER(cuLaunchHostFunc_ptsz);
    return launch_host_func(hStream, fn, userData, true);
}
