/* Offload: pinned device-mapped host memory in place of device memory (offload.h). */
#include "shim/offload.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "shim/arena.h"
#include "shim/capture.h"
#include "shim/track.h"

int shim_policy;
_Atomic uint32_t offload_live;

/* ---- live ranges: a small sorted array (offloaded allocations are few and large) ---- */
struct range {
    uint64_t base, size;
    uint64_t ctx; /* the context of the block (its entry's): whose drop may remove the range */
};
static atomic_flag ranges_lock = ATOMIC_FLAG_INIT;
static struct range *ranges;
static uint32_t nranges, cap_ranges;

static void ranges_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&ranges_lock, memory_order_acquire))
        ;
}

static void ranges_release(void)
{
    atomic_flag_clear_explicit(&ranges_lock, memory_order_release);
}

/* Index of the first range with base > addr. Lock held. */
static uint32_t upper(uint64_t addr)
{
    uint32_t lo = 0, hi = nranges;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (ranges[mid].base <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool ranges_add(uint64_t base, uint64_t size, uint64_t ctx)
{
    bool ok = true;
    ranges_acquire();
    if (nranges == cap_ranges) {
        uint32_t cap = cap_ranges ? cap_ranges * 2 : 64;
        struct range *r = arena_alloc(cap * sizeof *r);
        if (r) {
            if (ranges)
                memcpy(r, ranges, nranges * sizeof *r);
            arena_free(ranges, cap_ranges * sizeof *r);
            ranges = r;
            cap_ranges = cap;
        } else {
            ok = false;
        }
    }
    uint32_t i = upper(base);
    if (i > 0 && ranges[i - 1].base == base) {
        /* A range still here at this base: its block was freed where the shim could not see it
         * (a teardown on another thread: the driver gave the address back first); one range per
         * base, this block's, with its context, so that the late drop of the old block's entry
         * (ranges_remove with the old context) leaves it. */
        ranges[i - 1].size = size;
        ranges[i - 1].ctx = ctx;
        ok = true;
    } else if (ok) {
        memmove(&ranges[i + 1], &ranges[i], (nranges - i) * sizeof *ranges);
        ranges[i] = (struct range){base, size, ctx};
        nranges++;
        atomic_store_explicit(&offload_live, nranges, memory_order_relaxed);
    }
    ranges_release();
    return ok;
}

/* Removes the range at `base` if it is of context `ctx` (that of the entry going: another
 * context's range there is a newer block's, ranges_add). */
static void ranges_remove(uint64_t base, uint64_t ctx)
{
    ranges_acquire();
    uint32_t i = upper(base);
    if (i > 0 && ranges[i - 1].base == base && ranges[i - 1].ctx == ctx) {
        memmove(&ranges[i - 1], &ranges[i], (nranges - i) * sizeof *ranges);
        nranges--;
        atomic_store_explicit(&offload_live, nranges, memory_order_relaxed);
    }
    ranges_release();
}

bool offload_find(uint64_t addr, uint64_t *base, uint64_t *size)
{
    bool found = false;
    ranges_acquire();
    uint32_t i = upper(addr);
    if (i > 0 && addr < ranges[i - 1].base + ranges[i - 1].size) {
        *base = ranges[i - 1].base;
        *size = ranges[i - 1].size;
        found = true;
    }
    ranges_release();
    return found;
}

/* ---- a bounded cache of freed pinned blocks (CUSHIM_OFFLOAD_CACHE bytes) ---- */
#define CACHE_SLOTS 64
/* Pinned memory belongs to the context that allocated it (the driver frees it when that context
 * goes), so a block is reused only in its own context. */
struct cached {
    void *host;
    uint64_t size;   /* the block's real size */
    uint64_t ctx;
    int device;
};
static struct cached cache[CACHE_SLOTS];
static uint64_t cache_bytes;
static atomic_flag cache_lock = ATOMIC_FLAG_INIT;

static void cache_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&cache_lock, memory_order_acquire))
        ;
}

static void cache_release(void)
{
    atomic_flag_clear_explicit(&cache_lock, memory_order_release);
}

/* A cached block of this context of at least `bytes` and at most twice that, or NULL. */
static void *cache_take(uint64_t bytes, uint64_t ctx, int device, uint64_t *size)
{
    void *p = NULL;
    int cached_on = device;
    if (!shim.cfg.offload_cache)
        return NULL;
    cache_acquire();
    for (unsigned i = 0; i < CACHE_SLOTS && !p; i++) {
        if (cache[i].host && cache[i].ctx == ctx && cache[i].size >= bytes && cache[i].size / 2 <= bytes) {
            p = cache[i].host;
            *size = cache[i].size;
            cached_on = cache[i].device;
            cache_bytes -= cache[i].size;
            cache[i].host = NULL;
        }
    }
    cache_release();
    /* Taken off the device it was counted on when cached (a block is reused by context, and a
     * stream-ordered request of another device's stream may have cached it). */
    if (p)
        account_device_stat_add(cached_on, CUSHIM_DEV_offload_cached_bytes, -(int64_t)*size);
    return p;
}

/* A block of at most CUSHIM_OFFLOAD_CACHE bytes (cache_put_after_work checks) into the cache:
 * false when it is full. */
static bool cache_put(void *host, uint64_t size, uint64_t ctx, int device)
{
    bool kept = false;
    /* Counted before the block is published: cache_take may take it (and count it off) as soon
     * as the lock is released. */
    account_device_stat_add(device, CUSHIM_DEV_offload_cached_bytes, (int64_t)size);
    cache_acquire();
    if (cache_bytes + size <= shim.cfg.offload_cache) {
        for (unsigned i = 0; i < CACHE_SLOTS && !kept; i++) {
            if (!cache[i].host) {
                cache[i] = (struct cached){host, size, ctx, device};
                cache_bytes += size;
                kept = true;
            }
        }
    }
    cache_release();
    if (!kept)
        account_device_stat_add(device, CUSHIM_DEV_offload_cached_bytes, -(int64_t)size);
    return kept;
}

/* ---- policy, allocation, free ---- */

unsigned offload_wanted_slow(uint64_t bytes)
{
    int mode = shim.cfg.offload;
    if (mode == CUSHIM_OFFLOAD_OFF || bytes < shim.cfg.offload_min || !bytes)
        return 0;
    bool compile = atomic_load_explicit(&shim.seg->h.phase, memory_order_relaxed) == CUSHIM_PHASE_COMPILE;
    if ((mode == CUSHIM_OFFLOAD_COMPILE && !compile) || capture_any_live())
        return 0;
    return SHIM_F_OFFLOADED | (compile ? SHIM_F_COMPILE : 0);
}

static CUresult offload_alloc_in_section(CUdeviceptr *dptr, uint64_t bytes, unsigned flags,
                                         int device, CUcontext ctx);

CUresult offload_alloc(CUdeviceptr *dptr, uint64_t bytes, unsigned flags, int for_device, CUcontext in_ctx)
{
    __typeof__(&cuMemHostAlloc) host_alloc = REAL(cuMemHostAlloc);
    __typeof__(&cuMemHostGetDevicePointer_v2) devptr = REAL(cuMemHostGetDevicePointer_v2);
    __typeof__(&cuMemFreeHost) free_host = REAL(cuMemFreeHost);
    if (!dptr) /* the callers forward a NULL output to the driver; never written through */
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    int device = shim_current_device(&ctx);
    if (for_device >= 0 && device >= 0)
        device = for_device;
    if (!host_alloc || !devptr || !free_host || device < 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    /* The shim's own cuMemHostAlloc (and cuMemFreeHost on the failure paths): not while a capture
     * that prohibits them is live or beginning (the caller then asks the device, as the program
     * did). */
    if (!capture_unsafe_begin())
        return CUDA_ERROR_NOT_SUPPORTED;
    /* The stream's context, when it is not the current one (a stream of another device): its
     * memory, freed by its teardown only. */
    __typeof__(&cuCtxPushCurrent_v2) push = REAL(cuCtxPushCurrent_v2);
    __typeof__(&cuCtxPopCurrent_v2) pop = REAL(cuCtxPopCurrent_v2);
    bool pushed = false;
    if (in_ctx && in_ctx != ctx) {
        if (!push || !pop || push(in_ctx) != CUDA_SUCCESS) {
            capture_unsafe_end();
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        pushed = true;
        ctx = in_ctx;
    }
    CUresult r = offload_alloc_in_section(dptr, bytes, flags, device, ctx);
    if (pushed) {
        CUcontext popped;
        pop(&popped);
    }
    capture_unsafe_end();
    return r;
}

static CUresult offload_alloc_in_section(CUdeviceptr *dptr, uint64_t bytes, unsigned flags,
                                         int device, CUcontext ctx)
{
    __typeof__(&cuMemHostAlloc) host_alloc = REAL(cuMemHostAlloc);
    __typeof__(&cuMemHostGetDevicePointer_v2) devptr = REAL(cuMemHostGetDevicePointer_v2);
    __typeof__(&cuMemFreeHost) free_host = REAL(cuMemFreeHost);
    uint64_t size = bytes;
    void *host = cache_take(bytes, (uint64_t)(uintptr_t)ctx, device, &size);
    CUresult r = CUDA_SUCCESS;
    if (!host)
        r = host_alloc(&host, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    if (r != CUDA_SUCCESS)
        return r;
    CUdeviceptr d = 0;
    r = devptr(&d, host, 0);
    if (r == CUDA_SUCCESS && d != (CUdeviceptr)(uintptr_t)host) {
        /* DESIGN.md: under unified addressing the device address is the host address; anything
         * else is a platform the shim does not offload on. */
        LOG_ONCE(CUSHIM_LOG_WARN, "no unified addressing (device address of pinned memory differs "
                 "from its host address): offload is off");
        r = CUDA_ERROR_NOT_SUPPORTED;
    }
    if (r != CUDA_SUCCESS || !ranges_add(d, bytes, (uint64_t)(uintptr_t)ctx)) {
        free_host(host);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct shim_entry e = {
        .key = d, .size = bytes, .ctx = (uint64_t)(uintptr_t)ctx, .aux = size, /* the block's size */
        .device = device, .kind = CUSHIM_KIND_OFFLOADED, .flags = (uint16_t)(flags | SHIM_F_OFFLOADED),
    };
    if (!phase_offloaded_put(&e)) {
        ranges_remove(d, e.ctx);
        free_host(host);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = d;
    if (flags & SHIM_F_SPILLED) /* a user relying on spill learns when it began (a fresh-user trial) */
        LOG_ONCE(CUSHIM_LOG_WARN, "device %d had no memory for a request of %llu byte%s (the device, or its "
                 "CUSHIM_DEVICE_LIMIT): served from pinned host memory (CUSHIM_SPILL), which kernels reach "
                 "over the bus; later spills are counted (the summary's \"spilled\"), not said", device,
                 (unsigned long long)bytes, bytes == 1 ? "" : "s");
    LOG_DEBUG("offloaded %llu bytes at 0x%llx%s", (unsigned long long)bytes, (unsigned long long)d,
              (flags & SHIM_F_SPILLED) ? " (spill)" : "");
    return CUDA_SUCCESS;
}

/* Host memory (at the entry's address: unified addressing) back to the cache or the driver, for
 * the program's own free. While a capture that prohibits potentially unsafe calls is live the
 * driver decides: a free is one of them (cuda.h cuThreadExchangeStreamCaptureMode), and the cache
 * would let it pass where a device free fails and invalidates the capture. The shim's own
 * releases (deferred frees) go through capture_unsafe_begin first. */
/* `idle`: the device's work on the block is known to be over (a deferred free's event). Else,
 * before the block is kept for reuse, the context's work is waited for, as cuMemFree would
 * (cuda.h cuMemFree: "this API may perform implicit synchronization"; cuMemFreeHost does): a
 * kernel queued before the free may still use it, and the next offloaded allocation would get
 * it. Only with no capture live at all (a synchronization is prohibited during one, and would
 * invalidate it) and in the block's own context; otherwise the driver frees the block. */
static bool cache_put_after_work(const struct shim_entry *e, bool idle)
{
    if (!shim.cfg.offload_cache || e->aux > shim.cfg.offload_cache)
        return false;
    if (!idle) {
        __typeof__(&cuCtxSynchronize) sync = REAL(cuCtxSynchronize);
        __typeof__(&cuCtxGetCurrent) getcur = REAL(cuCtxGetCurrent);
        CUcontext cur = NULL;
        if (!sync || !getcur || getcur(&cur) != CUDA_SUCCESS || (uint64_t)(uintptr_t)cur != e->ctx ||
            !capture_unsafe_begin())
            return false;
        /* Looked at inside the section: a capture that began before it is seen. */
        CUresult r = capture_any_live() ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : sync();
        capture_unsafe_end();
        if (r != CUDA_SUCCESS)
            return false;
    }
    return cache_put((void *)(uintptr_t)e->key, e->aux, e->ctx, e->device);
}

static CUresult release_host(const struct shim_entry *e, bool idle)
{
    __typeof__(&cuMemFreeHost) free_host = REAL(cuMemFreeHost);
    void *host = (void *)(uintptr_t)e->key;
    if (!capture_prohibits_here() && cache_put_after_work(e, idle))
        return CUDA_SUCCESS;
    return free_host ? free_host(host) : CUDA_ERROR_NOT_INITIALIZED;
}

/* offload_free; `idle`: the work on the block is known to be over (release_host). */
static CUresult free_block(const struct shim_entry *e, bool idle)
{
    /* The range goes first (the driver may hand the address out again as soon as it is freed)
     * and comes back if the free fails: the block is still the program's then, and so is the
     * entry, which the caller puts back. The free counts from here too, as a device free does
     * (account.h account_free_early): an allocation another thread makes during the release, of
     * this block perhaps, is never counted beside it. */
    ranges_remove(e->key, e->ctx);
    account_free_early(e->device, CUSHIM_KIND_OFFLOADED, e->size, e->flags);
    CUresult r = release_host(e, idle);
    if (r == CUDA_SUCCESS) {
        account_free_budget(e->device, CUSHIM_KIND_OFFLOADED, e->size, e->flags);
        return r;
    }
    account_unfree(e->device, CUSHIM_KIND_OFFLOADED, e->size, e->flags);
    if (!ranges_add(e->key, e->size, e->ctx))
        LOG_ONCE(CUSHIM_LOG_WARN, "offloaded range table full: a range whose free failed is not "
                 "rerouted any more");
    return r;
}

CUresult offload_free(const struct shim_entry *e)
{
    return free_block(e, false);
}

/* ---- deferred frees: an event per cuMemFreeAsync of an offloaded range ---- */
/* A slot's life: FREE -> CLAIMED (offload_free_async fills it) -> PENDING (its event waits) ->
 * POLLING (a poll asks the event, or releases the block, with no lock held) -> PENDING again (not
 * ready, or the release must wait for a capture) or FREE. offload_context_gone marks slots in any
 * state: block_gone (the block's context went: the driver freed it) or event_gone (the event's
 * context went: the driver destroyed the event, and the stream's work with it). */
enum slot_state { SLOT_FREE, SLOT_CLAIMED, SLOT_PENDING, SLOT_POLLING, SLOT_ORPHAN_EVENT };
struct deferred {
    struct shim_entry e;  /* e.ctx: the context the pinned block belongs to */
    CUevent event;
    uint64_t event_ctx;   /* the context the event was made in (the stream's) */
    uint8_t state;        /* enum slot_state */
    bool block_gone, event_gone;
    uint8_t errors;       /* answers in a row that were errors (event_done) */
    uint64_t gone_ctx;    /* CLAIMED: a context that went while the slot was being filled */
};
#define DEFERRED_MAX 1024
static struct deferred deferred[DEFERRED_MAX];
static unsigned poll_cursor; /* where the next poll starts (under the lock): every slot gets its turn */
/* Contexts whose teardown call is in flight (offload_context_closing), with how many such calls
 * each (two threads may release one primary context); under the lock. A poll takes no slot of
 * theirs (block or event). */
#define CLOSING_MAX 8
static struct {
    uint64_t ctx;
    unsigned calls;
} closing[CLOSING_MAX];
static unsigned closing_n; /* entries in use at the front */
static bool slots_used;    /* a deferred free was ever queued: else nothing to hold back */
static atomic_flag deferred_lock = ATOMIC_FLAG_INIT;

static void deferred_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&deferred_lock, memory_order_acquire))
        ;
}

static void deferred_release(void)
{
    atomic_flag_clear_explicit(&deferred_lock, memory_order_release);
}

/* A free slot, claimed, or -1 when all are in use. */
static int slot_claim(void)
{
    int k = -1;
    deferred_acquire();
    for (unsigned i = 0; i < DEFERRED_MAX && k < 0; i++)
        if (deferred[i].state == SLOT_FREE) {
            slots_used = true;
            deferred[i].state = SLOT_CLAIMED;
            deferred[i].block_gone = deferred[i].event_gone = false;
            deferred[i].gone_ctx = 0;
            k = (int)i;
        }
    deferred_release();
    return k;
}

/* A deferred free counted as pending (+1) or no longer (-1): the count poll and the drain go by,
 * and the device's pending_free_bytes gauge (the block's size). */
static void pending_count(const struct shim_entry *e, int sign)
{
    account_device_stat_add(e->device, CUSHIM_DEV_offload_pending_free_bytes, sign * (int64_t)e->aux);
    if (sign > 0)
        atomic_fetch_add_explicit(&shim_gate, SHIM_GATE_PENDING, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&shim_gate, SHIM_GATE_PENDING, memory_order_relaxed);
}

/* A slot done with (under the lock): free. The caller counts it off the pending figures. */
static void slot_done(struct deferred *d)
{
    d->state = SLOT_FREE;
    d->event = NULL;
    d->errors = 0;
}

static void slot_unclaim(int k)
{
    deferred_acquire();
    deferred[k].state = SLOT_FREE;
    deferred_release();
}

/* An event recorded on `stream`, made in the stream's context (cuda.h cuEventRecord: "hEvent and
 * hStream must be from the same context otherwise CUDA_ERROR_INVALID_HANDLE is returned"; a stream
 * of another device than the current one); NULL if none could be. *ctx_out: that context. */
static CUevent stream_event(CUstream stream, bool pt, uint64_t *ctx_out)
{
    __typeof__(&cuEventCreate) create = REAL(cuEventCreate);
    __typeof__(&cuEventRecord) record = pt ? REAL(cuEventRecord_ptsz) : REAL(cuEventRecord);
    __typeof__(&cuEventDestroy_v2) destroy = REAL(cuEventDestroy_v2);
    __typeof__(&cuCtxGetCurrent) getcur = REAL(cuCtxGetCurrent);
    __typeof__(&cuCtxPushCurrent_v2) push = REAL(cuCtxPushCurrent_v2);
    __typeof__(&cuCtxPopCurrent_v2) pop = REAL(cuCtxPopCurrent_v2);
    CUcontext sctx = shim_stream_context(stream), cur = NULL, popped;
    CUevent ev = NULL;
    if (!create || !record || !destroy || !sctx)
        return NULL;
    bool pushed = getcur && push && pop && getcur(&cur) == CUDA_SUCCESS && cur != sctx &&
                  push(sctx) == CUDA_SUCCESS;
    if (create(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        ev = NULL;
    if (pushed)
        pop(&popped);
    if (ev && record(ev, stream) != CUDA_SUCCESS) {
        destroy(ev);
        ev = NULL;
    }
    *ctx_out = (uint64_t)(uintptr_t)sctx;
    return ev;
}

/* An answer that refuses the call itself (cuda.h cuMemFreeAsync: CUDA_ERROR_INVALID_CONTEXT for
 * the default stream with no current context; a stream handle the driver does not know), not one
 * about earlier work: the free is refused the same way, nothing freed. */
static bool call_refused(CUresult r)
{
    return r == CUDA_ERROR_INVALID_CONTEXT || r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_VALUE ||
           r == CUDA_ERROR_CONTEXT_IS_DESTROYED || r == CUDA_ERROR_NOT_INITIALIZED || r == CUDA_ERROR_DEINITIALIZED;
}

CUresult offload_free_async(const struct shim_entry *e, CUstream stream, bool pt)
{
    if (capture_any_live()) {
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        __typeof__(&cuStreamIsCapturing) is = pt ? REAL(cuStreamIsCapturing_ptsz) : REAL(cuStreamIsCapturing);
        CUresult q = is ? is(stream, &st) : CUDA_ERROR_NOT_SUPPORTED;
        /* The driver's own answer about this stream (cuda.h cuStreamIsCapturing: e.g.
         * CUDA_ERROR_STREAM_CAPTURE_IMPLICIT for the legacy stream while a blocking stream of its
         * context captures, when the status is not set) is what the program gets, nothing done. */
        if (q != CUDA_SUCCESS)
            return q;
        if (st == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
            /* cuda.h: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "the current capture sequence on
             * the stream has been invalidated due to a previous error": what any stream-ordered
             * call on it gets. */
            return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        if (st == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            /* A free node cannot release host memory: keep it live rather than guess. */
            LOG_ONCE(CUSHIM_LOG_WARN, "cuMemFreeAsync of offloaded memory on a capturing stream: "
                     "refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)");
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    /* A slot and an event first: nothing is changed until the free is sure to be deferred. */
    uint64_t event_ctx = 0;
    int k = slot_claim();
    CUevent ev = k >= 0 ? stream_event(stream, pt, &event_ctx) : NULL;
    if (!ev) {
        if (k >= 0)
            slot_unclaim(k);
        /* Wait for the stream's work the slow way, then free as cuMemFree does. Both are calls
         * a capture may prohibit, so each query of the stream (the per-thread one for a _ptsz
         * call) and the free is a handshake section of one call (capture.h); while a capture that
         * prohibits them is live the free is refused and the memory stays the program's (rare:
         * no event could be made, or 1024 frees are pending). */
        __typeof__(&cuStreamQuery) query = pt ? REAL(cuStreamQuery_ptsz) : REAL(cuStreamQuery);
        /* Unless a capture that prohibits it is live, one synchronize of the stream (what
         * cudaFree does to the whole device): a loop of queries would spin for ever on a stream
         * whose work completes only when the program synchronizes it, as the simulator's
         * SIMCUDA_LAZY_EVENTS models. The one section that blocks on the program's work, as the
         * offload cache's synchronize does (capture.h): a GLOBAL capture beginning meanwhile
         * waits for it, 5 s at most. */
        __typeof__(&cuStreamSynchronize) sync = pt ? REAL(cuStreamSynchronize_ptsz) : REAL(cuStreamSynchronize);
        CUresult synced = CUDA_ERROR_NOT_READY;
        if (sync && capture_unsafe_begin()) {
            synced = sync(stream);
            capture_unsafe_end();
        }
        if (call_refused(synced))
            return synced;
        for (CUresult q = synced == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; q == CUDA_ERROR_NOT_READY;) {
            if (!capture_unsafe_begin()) {
                LOG_ONCE(CUSHIM_LOG_WARN, "cuMemFreeAsync of offloaded memory could not be deferred "
                         "while a capture is live: refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)");
                return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
            }
            q = query ? query(stream) : CUDA_SUCCESS;
            capture_unsafe_end();
            /* A capture's answer about the stream (e.g. CUDA_ERROR_STREAM_CAPTURE_IMPLICIT for the
             * legacy stream while a blocking stream captures) tells nothing about its work. */
            if (q >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && q <= CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
                return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
            if (call_refused(q))
                return q;
            if (q == CUDA_ERROR_NOT_READY)
                sched_yield();
        }
        if (!capture_unsafe_begin())
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        CUresult r = free_block(e, true); /* the stream has reached the free */
        capture_unsafe_end();
        return r;
    }
    /* Counted as freed, and as pending, before the slot is published for poll to take. */
    ranges_remove(e->key, e->ctx);
    account_free(e->device, CUSHIM_KIND_OFFLOADED, e->size, e->flags);
    pending_count(e, +1);
    deferred_acquire();
    struct deferred *d = &deferred[k];
    /* A teardown while the slot was being filled marked it: the block's context went (the
     * driver freed the block: nothing pending), or the event's (the driver destroyed it). */
    bool block_gone = d->block_gone || (d->gone_ctx && d->gone_ctx == e->ctx);
    bool event_gone = d->event_gone || (d->gone_ctx && d->gone_ctx == event_ctx);
    d->e = *e;
    d->event = ev;
    d->event_ctx = event_ctx;
    d->event_gone = event_gone;
    if (block_gone)
        slot_done(d);
    else
        d->state = SLOT_PENDING;
    deferred_release();
    if (block_gone) {
        pending_count(e, -1);
        __typeof__(&cuEventDestroy_v2) destroy = REAL(cuEventDestroy_v2);
        if (!event_gone && destroy)
            destroy(ev);
    }
    return CUDA_SUCCESS;
}

/* Whether an event's answer (q, for slot d, under the lock) means its work is done:
 * CUDA_SUCCESS, or an error that says the event is no more (its context went, or it is not a
 * handle the driver knows), which no wait would change. Not ready, and a capture's refusal, mean
 * later. Any other error is one of an earlier asynchronous launch (cuda.h, cuEventQuery: "may
 * also return error codes from previous, asynchronous launches"): once, it may be a passing one,
 * and the next answer says; ERRORS_DONE in a row, it is the context's lasting error (an illegal
 * address, say), after which no work of the context runs again: done, or the block would wait
 * for ever (an exit would wait on it for ever). */
#define ERRORS_DONE 3
static bool event_done(struct deferred *d, CUresult q, bool *lasting)
{
    if (q == CUDA_SUCCESS || q == CUDA_ERROR_INVALID_HANDLE || q == CUDA_ERROR_INVALID_CONTEXT ||
        q == CUDA_ERROR_CONTEXT_IS_DESTROYED || q == CUDA_ERROR_DEINITIALIZED)
        return true;
    if (q == CUDA_ERROR_NOT_READY || q == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ||
        q == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || q == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ||
        q == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) {
        d->errors = 0;
        return false;
    }
    if (++d->errors < ERRORS_DONE)
        return false;
    *lasting = true; /* said by the caller, after the lock */
    return true;
}

/* Whether slot d's block or event is of context ctx. */
static bool slot_of(const struct deferred *d, uint64_t ctx)
{
    return d->e.ctx == ctx || d->event_ctx == ctx;
}

/* Whether slot d's block or event is of a context whose teardown is in flight (under the lock). */
static bool slot_closing(const struct deferred *d)
{
    for (unsigned c = 0; c < closing_n; c++)
        if (slot_of(d, closing[c].ctx))
            return true;
    return false;
}

/* One PENDING slot (index k, taken as POLLING): its event asked, the block released if done. The
 * query and the release are each a handshake section (capture.h): event queries and
 * cuMemFreeHost are calls a global-mode capture prohibits. */
static void poll_one(unsigned k, bool wait)
{
    __typeof__(&cuEventQuery) query = REAL(cuEventQuery);
    __typeof__(&cuEventSynchronize) sync = REAL(cuEventSynchronize);
    __typeof__(&cuEventDestroy_v2) destroy = REAL(cuEventDestroy_v2);
    struct deferred *d = &deferred[k];
    deferred_acquire();
    CUevent ev = d->event_gone ? NULL : d->event;
    deferred_release();
    CUresult q = CUDA_SUCCESS;
    if (ev) {
        if (!capture_unsafe_begin()) {
            q = CUDA_ERROR_NOT_READY;
        } else {
            q = wait ? sync(ev) : query(ev);
            capture_unsafe_end();
        }
    }
    deferred_acquire();
    if (d->block_gone) {
        /* The block's context went meanwhile (counted off there): only the event is left. */
        ev = d->event_gone ? NULL : d->event;
        slot_done(d);
        deferred_release();
        if (ev)
            destroy(ev);
        return;
    }
    bool lasting = false;
    if (!d->event_gone && !event_done(d, q, &lasting)) {
        d->state = SLOT_PENDING;
        deferred_release();
        return;
    }
    /* Done (or the event is gone): the event is destroyed now, the block released next. */
    ev = d->event_gone ? NULL : d->event;
    d->event_gone = true;
    d->event = NULL;
    struct shim_entry e = d->e;
    deferred_release();
    if (lasting)
        LOG_ONCE(CUSHIM_LOG_WARN, "the event of an offloaded block's cuMemFreeAsync answered "
                 "CUresult %d %d times in a row: the context's lasting error, its work over; the "
                 "block is released", (int)q, ERRORS_DONE);
    if (ev)
        destroy(ev);
    /* The shim's own free: not while a capture that prohibits it is live (the slot waits). */
    if (!capture_unsafe_begin()) {
        deferred_acquire();
        if (d->block_gone)
            slot_done(d);
        else
            d->state = SLOT_PENDING;
        deferred_release();
        return;
    }
    deferred_acquire();
    bool gone = d->block_gone;
    if (gone)
        slot_done(d);
    deferred_release();
    if (gone) {
        capture_unsafe_end();
        return;
    }
    /* The slot stays POLLING through the release: a teardown of its context waits for it
     * (offload_context_closing), so that the driver never frees the block first. */
    CUresult r = release_host(&e, true);
    capture_unsafe_end();
    deferred_acquire();
    bool counted_off = d->block_gone; /* by a teardown not held back (offload_context_gone) */
    slot_done(d);
    deferred_release();
    if (!counted_off)
        pending_count(&e, -1);
    if (r != CUDA_SUCCESS)
        LOG_ONCE(CUSHIM_LOG_WARN, "cuMemFreeHost of an offloaded block freed by cuMemFreeAsync "
                 "failed (CUresult %d): its pinned memory stays allocated", (int)r);
}

/* Takes up to 32 PENDING slots at a time, round robin from where the last poll stopped, and polls
 * each with no lock held; with `wait`, until nothing is pending. */
static void poll(bool wait)
{
    if (!REAL(cuEventQuery) || !REAL(cuEventSynchronize) || !REAL(cuEventDestroy_v2))
        return;
    unsigned idle = 0;
    do {
        unsigned taken[32], n = 0;
        deferred_acquire();
        for (unsigned s = 0; s < DEFERRED_MAX && n < 32; s++) {
            unsigned i = (poll_cursor + s) % DEFERRED_MAX;
            if (deferred[i].state == SLOT_PENDING && !slot_closing(&deferred[i])) {
                deferred[i].state = SLOT_POLLING;
                taken[n++] = i;
            }
        }
        poll_cursor = n ? (taken[n - 1] + 1) % DEFERRED_MAX : poll_cursor;
        deferred_release();
        /* Slots taken are POLLING until poll_one gives them back: the thread is not cancelled
         * in between (a driver call may be a cancellation point), or they would stay taken and
         * every later teardown of their context would wait its full 5 s (a review). */
        int cancel_state;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
        for (unsigned i = 0; i < n; i++)
            poll_one(taken[i], wait);
        pthread_setcancelstate(cancel_state, NULL);
        if (!n && wait && gate_pending() != 0) {
            /* Another thread holds the rest as POLLING: a while, not for ever. */
            if (++idle > 1000)
                break;
            sched_yield();
        }
        if (wait && capture_prohibits_here())
            break; /* a capture began: what is left stays pending */
    } while (wait && gate_pending() != 0);
}

void offload_poll_slow(void)
{
    /* Not while a capture that prohibits the shim's own frees is live (each release also checks,
     * capture_unsafe_begin: one may begin meanwhile). */
    if (!capture_prohibits_here())
        poll(false);
}

void offload_drain(void)
{
    if (!gate_pending())
        return;
    /* At exit: waiting on events and freeing are calls a live global-mode capture prohibits; the
     * driver frees the blocks with the process anyway. */
    if (!capture_prohibits_here())
        poll(true);
    uint64_t left = gate_pending();
    if (left)
        LOG_ONCE(CUSHIM_LOG_INFO, "%llu offloaded frees still pending at exit (a capture is live): "
                 "their blocks go with the process", (unsigned long long)left);
}

void offload_range_gone(uint64_t base, uint64_t ctx)
{
    ranges_remove(base, ctx);
}

bool offload_context_closing(uint64_t ctx)
{
    if (!ctx)
        return false;
    deferred_acquire();
    if (!slots_used) {
        deferred_release();
        return false;
    }
    unsigned c = 0;
    while (c < closing_n && closing[c].ctx != ctx)
        c++;
    if (c == closing_n) {
        if (closing_n == CLOSING_MAX) { /* eight teardowns at once: this one is not held back */
            deferred_release();
            LOG_ONCE(CUSHIM_LOG_WARN, "more than %d context teardowns at once: offloaded frees of "
                     "one are not held back during it", CLOSING_MAX);
            return false;
        }
        closing[closing_n++] = (__typeof__(closing[0])){ctx, 0};
    }
    closing[c].calls++;
    /* A poll that took one of its slots before: its event query or release is one driver call;
     * waited for (up to 5 s: an exit's drain may be synchronizing that event). */
    uint64_t until = shim_clock_ns(CLOCK_MONOTONIC) + 5000000000ull;
    for (;;) {
        bool busy = false;
        for (unsigned i = 0; i < DEFERRED_MAX && !busy; i++)
            busy = deferred[i].state == SLOT_POLLING && slot_of(&deferred[i], ctx);
        if (!busy || shim_clock_ns(CLOCK_MONOTONIC) > until)
            break;
        deferred_release();
        sched_yield();
        deferred_acquire();
    }
    deferred_release();
    return true;
}

void offload_context_settled(uint64_t ctx)
{
    deferred_acquire();
    for (unsigned c = 0; c < closing_n; c++)
        if (closing[c].ctx == ctx) {
            if (--closing[c].calls == 0)
                closing[c] = closing[--closing_n];
            break;
        }
    deferred_release();
}

void offload_context_gone(uint64_t ctx)
{
    /* The driver freed the context's pinned memory and destroyed its events: forget them, never
     * free them again. */
    cache_acquire();
    for (unsigned i = 0; i < CACHE_SLOTS; i++)
        if (cache[i].host && cache[i].ctx == ctx) {
            cache_bytes -= cache[i].size;
            cache[i].host = NULL;
            account_device_stat_add(cache[i].device, CUSHIM_DEV_offload_cached_bytes,
                                    -(int64_t)cache[i].size);
        }
    cache_release();
    /* A deferred free whose block was the context's: gone with it (counted off now; its event,
     * if of another context, destroyed below, after the lock). One whose event was the
     * context's (a stream of that context): the event and the stream's work are gone, the block
     * is still ours: released at the next poll, with no event call. A slot a poll holds
     * (POLLING) is only marked: the poll sees the mark before it frees anything. */
    bool orphans = false;
    deferred_acquire();
    for (unsigned i = 0; i < DEFERRED_MAX; i++) {
        struct deferred *d = &deferred[i];
        if (d->state == SLOT_CLAIMED) {
            /* Being filled: the filler sees this when it publishes. */
            d->gone_ctx = ctx;
            continue;
        }
        if (d->state == SLOT_FREE)
            continue;
        if (d->event_ctx == ctx)
            d->event_gone = true;
        if (d->state == SLOT_ORPHAN_EVENT || d->e.ctx != ctx || d->block_gone)
            continue;
        d->block_gone = true;
        pending_count(&d->e, -1);
        if (d->state == SLOT_PENDING) {
            if (d->event_gone) {
                slot_done(d);
            } else {
                d->state = SLOT_ORPHAN_EVENT;
                orphans = true;
            }
        }
    }
    deferred_release();
    /* Orphaned events of live contexts, destroyed one at a time with no lock held (unless their
     * own context went meanwhile, which destroyed them). */
    __typeof__(&cuEventDestroy_v2) destroy = REAL(cuEventDestroy_v2);
    for (unsigned i = 0; orphans && i < DEFERRED_MAX; i++) {
        CUevent ev = NULL;
        deferred_acquire();
        if (deferred[i].state == SLOT_ORPHAN_EVENT) {
            ev = deferred[i].event_gone ? NULL : deferred[i].event;
            slot_done(&deferred[i]);
        }
        deferred_release();
        if (ev && destroy)
            destroy(ev);
    }
}

void offload_after_fork_child(void)
{
    atomic_flag_clear(&ranges_lock);
    atomic_flag_clear(&cache_lock);
    atomic_flag_clear(&deferred_lock);
    ranges = NULL;
    nranges = cap_ranges = 0;
    memset(cache, 0, sizeof cache);
    cache_bytes = 0;
    memset(deferred, 0, sizeof deferred);
    poll_cursor = 0;
    closing_n = 0;
    slots_used = false;
    atomic_store(&offload_live, 0);
    atomic_fetch_and(&shim_gate, ~SHIM_GATE_PENDINGS);
}
