#include "shim/capture.h"

#include "shim/shim.h"

struct thread_capture {
    uint64_t own_key;             /* the live capture this thread began last, 0 if none */
    int mode_set;                 /* 0: the default mode (GLOBAL) */
    CUstreamCaptureMode mode;
    _Atomic int own_strict;       /* live captures begun here not in RELAXED mode */
    _Atomic int own_global;       /* live captures begun here in GLOBAL mode */
};

static SHIM_TLS struct thread_capture tc;
_Atomic int capture_live;         /* captures begun and not ended, process-wide */
static _Atomic int live_global;   /* of which begun in GLOBAL mode */
static _Atomic uint64_t last_key;  /* the capture begun last, process-wide */

/* Live captures are in shim.captures: stream key -> begin mode (aux), beginning thread's record
 * (ctx). */

static uint64_t stream_key(CUstream stream, bool per_thread)
{
    /* Every thread's per-thread default stream has the same handle: key it by thread. */
    if (stream == CU_STREAM_PER_THREAD || (per_thread && stream == NULL))
        return (uint64_t)(uintptr_t)&tc | 1u;
    return (uint64_t)(uintptr_t)stream;
}

bool capture_stream_query(CUstream stream, bool per_thread)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (per_thread) {
        __typeof__(&cuStreamIsCapturing_ptsz) q = REAL(cuStreamIsCapturing_ptsz);
        if (!q || q(stream, &status) != CUDA_SUCCESS)
            return false;
    } else {
        __typeof__(&cuStreamIsCapturing) q = REAL(cuStreamIsCapturing);
        if (!q || q(stream, &status) != CUDA_SUCCESS)
            return false;
    }
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool capture_thread_prohibited(void)
{
    CUstreamCaptureMode mode = tc.mode_set ? tc.mode : CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return false;
    if (atomic_load_explicit(&tc.own_strict, memory_order_relaxed) > 0)
        return true;
    if (mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        return false;
    return atomic_load_explicit(&live_global, memory_order_relaxed) -
               atomic_load_explicit(&tc.own_global, memory_order_relaxed) > 0;
}

void capture_begun(CUstream stream, bool per_thread, CUstreamCaptureMode mode)
{
    CUcontext ctx = NULL;
    __typeof__(&cuCtxGetCurrent) getcur = REAL(cuCtxGetCurrent);
    if (getcur)
        getcur(&ctx);
    /* kind: the begin mode; ctx: the beginning thread's record; aux: the CUDA context. */
    struct shim_entry e = {
        .key = stream_key(stream, per_thread),
        .kind = (uint16_t)mode,
        .ctx = (uint64_t)(uintptr_t)&tc,
        .aux = (uint64_t)(uintptr_t)ctx,
        .device = -1,
    };
    struct shim_entry old;
    if (table_put(&shim.captures, &e, &old) == 1)
        LOG_DEBUG("capture begun on stream %p twice", (void *)stream);
    tc.own_key = e.key;
    atomic_store_explicit(&last_key, e.key, memory_order_relaxed);
    atomic_fetch_add(&capture_live, 1);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        atomic_fetch_add(&tc.own_strict, 1);
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
        atomic_fetch_add(&live_global, 1);
        atomic_fetch_add(&tc.own_global, 1);
    }
}

static bool add_bytes(struct shim_entry *e, void *arg)
{
    e->size += *(uint64_t *)arg;
    return true;
}

void capture_note_bytes(uint64_t bytes)
{
    /* The calling thread's own capture, else the one begun last (PyTorch allocates on another
     * thread in relaxed mode while one thread captures). */
    if (tc.own_key && table_update(&shim.captures, tc.own_key, add_bytes, &bytes, NULL))
        return;
    uint64_t key = atomic_load_explicit(&last_key, memory_order_relaxed);
    if (key)
        table_update(&shim.captures, key, add_bytes, &bytes, NULL);
}

/* The counters of a capture that is over (its entry already out of the table). */
static void forget(const struct shim_entry *e, void *arg)
{
    (void)arg;
    uint64_t expected = e->key;
    atomic_compare_exchange_strong(&last_key, &expected, 0);
    struct thread_capture *owner = (struct thread_capture *)(uintptr_t)e->ctx;
    CUstreamCaptureMode mode = (CUstreamCaptureMode)e->kind;
    atomic_fetch_sub(&capture_live, 1);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        atomic_fetch_sub(&owner->own_strict, 1);
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
        atomic_fetch_sub(&live_global, 1);
        atomic_fetch_sub(&owner->own_global, 1);
    }
}

uint64_t capture_ended(CUstream stream, bool per_thread)
{
    struct shim_entry e;
    uint64_t key = stream_key(stream, per_thread);
    if (!table_take(&shim.captures, key, &e))
        return 0;
    if (tc.own_key == key)
        tc.own_key = 0;
    forget(&e, NULL);
    return e.size;
}

static bool in_context(const struct shim_entry *e, void *arg)
{
    return e->aux == *(uint64_t *)arg;
}

void capture_context_gone(uint64_t ctx)
{
    /* The captures of a context that was torn down ended with it. */
    table_drain_if(&shim.captures, in_context, forget, &ctx);
}

void capture_thread_mode_set(CUstreamCaptureMode mode)
{
    tc.mode = mode;
    tc.mode_set = 1;
}
