#include "shim/capture.h"

#include "shim/shim.h"

struct thread_capture {
    int mode_set;                 /* 0: the default mode (GLOBAL) */
    CUstreamCaptureMode mode;
    _Atomic int own_strict;       /* live captures begun here not in RELAXED mode */
    _Atomic int own_global;       /* live captures begun here in GLOBAL mode */
};

static SHIM_TLS struct thread_capture tc;
_Atomic int capture_live;         /* captures begun and not ended, process-wide */
static _Atomic int live_global;   /* of which begun in GLOBAL mode */

/* Live captures are in shim.captures: stream key -> begin mode (aux), beginning thread's record
 * (ctx). */

static uint64_t stream_key(CUstream stream, bool per_thread)
{
    /* Every thread's per-thread default stream has the same handle: key it by thread. */
    if (stream == CU_STREAM_PER_THREAD || (per_thread && stream == NULL))
        return (uint64_t)(uintptr_t)&tc | 1u;
    return (uint64_t)(uintptr_t)stream;
}

bool capture_stream_is_capturing(CUstream stream, bool per_thread)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (likely(!capture_any_live()))
        return false;
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
    struct shim_entry e = {
        .key = stream_key(stream, per_thread),
        .aux = (uint64_t)mode,
        .ctx = (uint64_t)(uintptr_t)&tc,
        .device = -1,
    };
    struct shim_entry old;
    if (table_put(&shim.captures, &e, &old) == 1)
        LOG_DEBUG("capture begun on stream %p twice", (void *)stream);
    atomic_fetch_add(&capture_live, 1);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        atomic_fetch_add(&tc.own_strict, 1);
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
        atomic_fetch_add(&live_global, 1);
        atomic_fetch_add(&tc.own_global, 1);
    }
}

void capture_ended(CUstream stream, bool per_thread)
{
    struct shim_entry e;
    if (!table_take(&shim.captures, stream_key(stream, per_thread), &e))
        return;
    struct thread_capture *owner = (struct thread_capture *)(uintptr_t)e.ctx;
    CUstreamCaptureMode mode = (CUstreamCaptureMode)e.aux;
    atomic_fetch_sub(&capture_live, 1);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        atomic_fetch_sub(&owner->own_strict, 1);
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) {
        atomic_fetch_sub(&live_global, 1);
        atomic_fetch_sub(&owner->own_global, 1);
    }
}

void capture_thread_mode_set(CUstreamCaptureMode mode)
{
    tc.mode = mode;
    tc.mode_set = 1;
}
