/* Stream-ordered allocation: cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync (legacy and
 * per-thread variants) and the pools they draw from. On a capturing stream an allocation becomes
 * a graph node (its memory comes from the graph pool at launch: graph accounting), so it is not
 * counted here. A pool's allocations count by the pool's location (DESIGN.md: in CUDA 13 a pool
 * can hold host memory). */
#include "shim/account.h"
#include "shim/budget.h"
#include "shim/capture.h"
#include "shim/offload.h"
#include "shim/pools.h"
#include "shim/shim.h"
#include "shim/track.h"

/* shim.pools' aux for a pool destroyed (cuMemPoolDestroy): kept as a tombstone, so that its handle
 * handed out to another thread as the destroy ran (cuDeviceGetMemPool of the device's current
 * pool) is not put back (a stress trial: it stayed in the table, and every later reading of the
 * device's pools failed on it, their figures frozen). A pool made with that handle replaces it;
 * readings (pools.c) skip it, as any entry of another kind. The last TOMBSTONES pools destroyed
 * keep theirs (tombstone_add; pools_destroyed covers a call that outlives them). */
#define POOL_DESTROYED UINT64_MAX

/* Kind and device of allocations from `pool`; the defaults for pools the shim did not see made
 * (device default pools), or saw destroyed. */
static inline enum cushim_kind pool_kind(CUmemoryPool pool, int *device)
{
    struct shim_entry e;
    if (pool && table_get(&shim.pools, (uint64_t)(uintptr_t)pool, &e) && e.aux != POOL_DESTROYED) {
        if (e.device >= 0)
            *device = e.device;
        return (enum cushim_kind)e.aux;
    }
    return CUSHIM_KIND_ASYNC;
}

/* ASYNC_NO_CONTEXT: a stream-ordered allocation is tracked with no context, so that
 * shim_drop_context (cuCtxDestroy, cudaDeviceReset, the last primary release) leaves it counted
 * until its own free: cuda.h cuCtxDestroy, "will not destroy memory allocations by cuMemCreate(),
 * cuMemAllocAsync() and cuMemAllocFromPoolAsync(). These memory allocations are not associated
 * with any CUDA context and need to be destroyed explicitly"; cuda_runtime_api.h says the same of
 * cudaDeviceReset. (Offloaded ones are pinned host memory of a context: offload.c.) */

/* Where a stream-ordered allocation goes and what it counts as. */
struct async_req {
    CUcontext ctx;
    int device;
    enum cushim_kind kind;
    CUmemoryPool pool; /* the pool named, or NULL: the stream's device's current pool */
    bool capturing;  /* a graph node: its memory is the graph pool's, not counted here */
    CUstream stream; /* the request's stream, and whether by a _ptsz call (capture_made_node) */
    bool pt;
    bool reserved;   /* budget reserved (device pools only) */
    uint64_t served; /* bytes of its pool's idle reserve claimed for it (budget.h) */
    bool spillable;  /* cuMemAllocAsync (the stream's current pool): CUSHIM_SPILL may serve it; a
                      * request from a pool the program names keeps that pool's properties, or fails */
    unsigned placed; /* SHIM_F_PLACED: a phase request was taken before the placement */
};

/* Each device's current pool as the program set it (cuDeviceSetMemPool, cuMemSetMemPool of a
 * device location), 0 for its default pool: cuda.h, cuDeviceSetMemPool: "By default, a device's
 * current memory pool is its default memory pool"; cuMemPoolDestroy: "Destroying the current
 * mempool of a device sets the default mempool of that device as the current mempool". Read
 * without asking the driver (not even during a capture). */
static _Atomic uint64_t current_pool[CUSHIM_MAX_DEVICES];

/* Before the real call: classify, reserve the budget. False when over the budget. */
static inline __attribute__((always_inline)) void async_begin(struct async_req *q, CUmemoryPool pool, CUstream stream, bool pt)
{
    q->placed = 0;
    if (unlikely(shim_policy_active())) {
        phase_poll();
        offload_poll();
        q->placed = SHIM_F_PLACED;
    }
    /* cuda.h cuMemAllocAsync: "The allocation comes from the memory pool current to the stream's
     * device"; a pool names its own (pool_kind). One on no device (a host or host-NUMA pool, or a
     * pool never seen made) counts on the stream's device, which a stream has also when no
     * context is current (cuda.h cuMemAllocFromPoolAsync refuses only a "default stream specified
     * with no current context"; a review: the current context's device was taken, and with none
     * the allocation went uncounted). */
    q->kind = CUSHIM_KIND_ASYNC;
    q->device = -1;
    if (pool)
        q->kind = pool_kind(pool, &q->device);
    if (q->device >= 0)
        (void)shim_current_device(&q->ctx);
    else
        q->device = shim_stream_device(stream, &q->ctx);
    q->capturing = capture_stream_is_capturing(stream, pt);
    q->stream = stream;
    q->pt = pt;
    q->pool = pool;
    q->reserved = false;
    q->served = 0;
    /* A pool the program made current (cuDeviceSetMemPool) is its choice of properties as much as
     * one it names (an IPC-capable pool: cuMemPoolExportPointer of the allocation must work, cuda.h):
     * its requests are neither offloaded nor spilled (a review). The default pool set back by its
     * handle counts as such a choice too: the shim cannot tell it apart without asking. */
    q->spillable = pool == NULL && (unsigned)q->device < CUSHIM_MAX_DEVICES &&
                   atomic_load_explicit(&current_pool[q->device], memory_order_relaxed) == 0;
}

/* The request's bytes against the device budget (device memory from a device pool, not while
 * capturing): false when over it. After the offload decision: offloaded memory is host memory
 * and never uses the budget. `say`: a refusal is said and counted here (budget.h). */
static inline __attribute__((always_inline)) bool async_reserve(struct async_req *q, size_t bytes, bool say)
{
    if (q->capturing || q->kind != CUSHIM_KIND_ASYNC)
        return true;
    /* Under a limit, with idle reserve on the device: how much of it is this pool's own (another
     * pool's keeps serving that pool only). Not asked while a capture is live. */
    uint64_t own = 0;
    if (budget_limited(q->device) && atomic_load_explicit(&budget_pool_idle[q->device], memory_order_relaxed) &&
        !capture_any_live())
        own = async_pool_idle_of(&q->pool, q->device);
    if (!budget_reserve_in(q->device, bytes, own, (uint64_t)(uintptr_t)q->pool, &q->served, say))
        return false;
    q->reserved = budget_any && (unsigned)q->device < CUSHIM_MAX_DEVICES; /* else nothing was reserved */
    return true;
}

/* The pool a request in the budget was made from, for its entry (cuMemPoolDestroy): the one it
 * named or was served from, else its device's current pool (cuda.h cuMemAllocAsync: "The
 * allocation comes from the memory pool current to the stream's device"); 0: the default pool,
 * which is never destroyed. */
static uint64_t async_request_pool(const struct async_req *q)
{
    if (q->pool)
        return (uint64_t)(uintptr_t)q->pool;
    return (unsigned)q->device < CUSHIM_MAX_DEVICES
               ? atomic_load_explicit(&current_pool[q->device], memory_order_relaxed)
               : 0;
}

static inline __attribute__((always_inline)) CUresult async_end(const struct async_req *q, CUresult r, CUdeviceptr *dptr, size_t bytes)
{
    if (r == CUDA_SUCCESS) {
        /* In the pools' figures from now on (budget_async counts only requests whose call is
         * done: a reading during the call, its growth not yet in the reserve, must not take its
         * bytes off the reserve), before its entry is in the table: a destroy of its pool that
         * finds the entry takes them out again (pool_gone). One not kept gave its budget back
         * (track_not_kept) and its free is never seen: out again at once. */
        if (q->reserved) /* a served request's are in already (budget_reserve_limited) */
            budget_async_add(q->device, bytes - q->served);
        /* A capture of its stream begun during the call (another thread) made it a node. */
        bool node = q->capturing ||
                    (unlikely(capture_any_live()) && capture_made_node(q->stream, q->pt, *dptr));
        if (node && q->reserved)
            budget_release(q->device, bytes); /* as track_not_kept */
        bool kept = !node && /* no context: a teardown leaves it alone (ASYNC_NO_CONTEXT) */
                    track_alloc_on_aux(&shim.ptrs, q->kind, *dptr, bytes, q->device, NULL,
                                       q->placed | (q->reserved ? SHIM_F_RESERVED : 0),
                                       q->reserved ? async_request_pool(q) : 0);
        if (q->reserved) {
            if (!kept)
                budget_async_sub(q->device, bytes);
            budget_pool_served_done(q->device, (uint64_t)(uintptr_t)q->pool, q->served, false);
            budget_pool_changed(q->device, 0);
        }
        if (!capture_any_live()) /* the pools are not read while a capture could be disturbed */
            async_pool_tick(q->device);
    } else {
        if (q->reserved) {
            /* The served bytes back to the idle estimate before the request leaves the budget,
             * so that no decision in between finds them in neither. */
            budget_pool_served_done(q->device, (uint64_t)(uintptr_t)q->pool, q->served, true);
            budget_release(q->device, bytes);
        }
        if (r == CUDA_ERROR_OUT_OF_MEMORY && shim.cfg.spill && q->spillable && !q->capturing &&
            !capture_any_live() && q->kind == CUSHIM_KIND_ASYNC && offload_alloc(dptr, bytes, SHIM_F_SPILLED, q->device, q->ctx) == CUDA_SUCCESS)
            r = CUDA_SUCCESS;
        else
            account_fail(q->device, q->kind);
    }
    shim_leave();
    return r;
}

/* A request its pool's idle reserve was to serve, made from that pool by name, refused as if the
 * pool were gone (destroyed meanwhile by another thread; cuda.h cuMemPoolDestroy: the default pool
 * is current again): the program's own cuMemAllocAsync is made instead, from whatever pool is
 * current now, which may grow it (a review: failing it was the shim's doing). The reserve's claim
 * goes back, and under a budget the growth must fit as any other request's: over it, out of
 * memory (spilled if CUSHIM_SPILL serves it). */
static CUresult async_pool_gone_meanwhile(struct async_req *q, size_t bytes, CUresult (*real)(CUdeviceptr *, size_t, CUstream),
                                          CUdeviceptr *dptr, CUstream stream)
{
    budget_pool_served_done(q->device, (uint64_t)(uintptr_t)q->pool, q->served, true);
    q->served = 0;
    q->pool = NULL; /* the entry's pool: the device's current one (async_request_pool) */
    return budget_held_within(q->device, bytes) ? real(dptr, bytes, stream) : CUDA_ERROR_OUT_OF_MEMORY;
}

/* cuMemAllocAsync draws from the device's current pool; offloaded like cuMemAlloc_v2 when the
 * policy says so and the stream is not capturing (a capture makes it a graph node). The plain
 * case (shim_enter_plain_alloc: no policy, no capture live) has its own short path, as
 * cuMemAlloc_v2 has (docs/BENCHMARKS.md). */
#define ALLOC_ASYNC(sym, pt)                                                                 \
    static __attribute__((noinline)) CUresult sym##_full(CUdeviceptr *dptr, size_t bytesize, \
                                                         CUstream hStream)                   \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        struct async_req q;                                                                  \
        if (!dptr || !shim_enter()) /* a NULL output is the driver's to refuse */            \
            return real_(dptr, bytesize, hStream);                                           \
        async_begin(&q, NULL, hStream, pt);                                                  \
        unsigned want_ = q.capturing || !q.spillable ? 0 : offload_wanted(bytesize);         \
        if (unlikely(want_) && offload_alloc(dptr, bytesize, want_, q.device, q.ctx) == CUDA_SUCCESS) { \
            shim_leave();                                                                    \
            return CUDA_SUCCESS;                                                             \
        }                                                                                    \
        if (!async_reserve(&q, bytesize, true))                                              \
            return async_end(&q, CUDA_ERROR_OUT_OF_MEMORY, dptr, bytesize);                  \
        /* Served by the current pool's reserve (budget.h): made from that very pool, which   \
         * another thread may make no longer current meanwhile (cuDeviceSetMemPool). */       \
        __typeof__(&cuMemAllocFromPoolAsync) from_pool_ =                                    \
            q.served && q.pool ? (pt ? REAL(cuMemAllocFromPoolAsync_ptsz) : REAL(cuMemAllocFromPoolAsync)) \
                               : NULL;                                                       \
        CUresult r_ = from_pool_ ? from_pool_(dptr, bytesize, q.pool, hStream)               \
                                 : real_(dptr, bytesize, hStream);                           \
        if (from_pool_ && (r_ == CUDA_ERROR_INVALID_VALUE || r_ == CUDA_ERROR_INVALID_HANDLE)) \
            r_ = async_pool_gone_meanwhile(&q, bytesize, real_, dptr, hStream);            \
        return async_end(&q, r_, dptr, bytesize);                                            \
    }                                                                                        \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)  \
    {                                                                                        \
        __typeof__(&sym) real_ = atomic_load_explicit(&shim_real_slot[SHIM_FN_##sym],        \
                                                      memory_order_relaxed);                 \
        if (unlikely(real_ == NULL) || !shim_enter_plain_alloc())                            \
            return sym##_full(dptr, bytesize, hStream);                                      \
        CUresult r = real_(dptr, bytesize, hStream);                                         \
        /* Entered with no capture live: one begun on the stream during the call (another   \
         * thread) may have made it a graph node, not memory. */                             \
        if (unlikely(capture_any_live()) && r == CUDA_SUCCESS &&                             \
            capture_made_node(hStream, pt, *dptr)) {                                         \
            shim_leave();                                                                    \
            return r;                                                                        \
        }                                                                                    \
        /* One device (track.h shim_sole_record): every stream is device 0's, nothing to ask  \
         * (the entry keeps no context, as the plain cuMemAlloc_v2's). Else the stream's      \
         * device, asked once the driver has accepted the stream. */                         \
        struct cushim_device_record *rec =                                                   \
            atomic_load_explicit(&shim_sole_record, memory_order_acquire);                   \
        int device = 0;                                                                      \
        if (unlikely(rec == NULL) || unlikely(r != CUDA_SUCCESS)) {                          \
            CUcontext ctx = NULL;                                                            \
            device = r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY                      \
                         ? shim_stream_device(hStream, &ctx) : shim_current_device(&ctx);   \
            rec = device >= 0 ? account_record(device) : NULL;                               \
        }                                                                                    \
        track_plain_result(r, dptr, bytesize, CUSHIM_KIND_ASYNC, device, NULL, rec);         \
        if (likely(r == CUDA_SUCCESS))                                                       \
            async_pool_tick(device);                                                         \
        shim_leave();                                                                        \
        return r;                                                                            \
    }
ALLOC_ASYNC(cuMemAllocAsync, false)
ALLOC_ASYNC(cuMemAllocAsync_ptsz, true)

/* A request from a pool the program names, over the budget: the driver's refusal of the pool
 * comes first (one destroyed, or no pool: CUDA_ERROR_INVALID_VALUE, not the budget's out of
 * memory; a numeric-extremes trial). The pool is asked for an attribute (only here, and not while
 * a capture is live): if it has none, the request goes to the driver as it is (its out of memory
 * is the budget's refusal too); else the refusal is said and out of memory it is. Should the
 * driver serve it after all (a pool made meanwhile at the destroyed one's address), it is kept,
 * counted past the budget: freeing it would be a second call on the program's stream, which a
 * capture begun meanwhile on another thread could take (a review). */
static CUresult async_refused_from(struct async_req *q, CUmemoryPool pool, size_t bytes,
                                   CUresult (*real)(CUdeviceptr *, size_t, CUmemoryPool, CUstream), CUdeviceptr *dptr,
                                   CUstream stream)
{
    __typeof__(&cuMemPoolGetAttribute) get = REAL(cuMemPoolGetAttribute);
    cuuint64_t threshold;
    if (get && !capture_any_live() && get(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) != CUDA_SUCCESS) {
        CUresult r = real(dptr, bytes, pool, stream);
        if (r == CUDA_SUCCESS && budget_any && (unsigned)q->device < CUSHIM_MAX_DEVICES) {
            budget_reserve_always(q->device, bytes);
            q->reserved = true;
        } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            budget_say_refused(q->device, bytes);
        }
        return async_end(q, r, dptr, bytes);
    }
    budget_say_refused(q->device, bytes);
    return async_end(q, CUDA_ERROR_OUT_OF_MEMORY, dptr, bytes);
}

/* A pool not in shim.pools, neither live nor destroyed: once pools_lost, possibly one the table
 * could not take, whose kind and device are unknown (pools.h). */
static bool pool_unrecorded(CUmemoryPool pool)
{
    return pool && !table_get(&shim.pools, (uint64_t)(uintptr_t)pool, NULL);
}

#define ALLOC_FROM_POOL(sym, pt)                                                             \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, \
                                     CUstream hStream)                                       \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        struct async_req q;                                                                  \
        if (!dptr || !shim_enter()) /* a NULL output is the driver's to refuse */            \
            return real_(dptr, bytesize, pool, hStream);                                     \
        if (unlikely(atomic_load_explicit(&pools_lost, memory_order_relaxed)) &&             \
            pool_unrecorded(pool)) {                                                         \
            shim_leave();                                                                    \
            return real_(dptr, bytesize, pool, hStream);                                     \
        }                                                                                    \
        async_begin(&q, pool, hStream, pt);                                                  \
        if (!async_reserve(&q, bytesize, false))                                             \
            return async_refused_from(&q, pool, bytesize, real_, dptr, hStream);             \
        return async_end(&q, real_(dptr, bytesize, pool, hStream), dptr, bytesize);          \
    }
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync, false)
ALLOC_FROM_POOL(cuMemAllocFromPoolAsync_ptsz, true)

/* A free of an offloaded range releases its host memory after the stream's earlier work. */
#define FREE_ASYNC(sym, pt)                                                                  \
    static __attribute__((noinline)) CUresult sym##_taken(__typeof__(&sym) real_,            \
                                                          const struct shim_entry *e,        \
                                                          CUdeviceptr dptr, CUstream hStream) \
    {                                                                                        \
        CUresult r;                                                                          \
        if (unlikely(e->kind == CUSHIM_KIND_OFFLOADED)) {                                    \
            r = offload_free_async(e, hStream, pt);                                          \
            if (r != CUDA_SUCCESS)                                                           \
                if (table_put_back(&shim.ptrs, e, NULL) < 0)                                 \
                    track_table_full();                                                      \
        } else {                                                                             \
            track_free_begin(e);                                                             \
            r = real_(dptr, hStream);                                                        \
            track_free_done(&shim.ptrs, e, r == CUDA_SUCCESS);                               \
        }                                                                                    \
        shim_leave();                                                                        \
        return r;                                                                            \
    }                                                                                        \
    static __attribute__((noinline)) CUresult sym##_full(CUdeviceptr dptr, CUstream hStream) \
    {                                                                                        \
        REAL_OR_FAIL(sym);                                                                   \
        struct shim_entry e;                                                                 \
        if (!shim_enter())                                                                   \
            return real_(dptr, hStream);                                                     \
        offload_poll();                                                                      \
        if (!track_take(&shim.ptrs, dptr, &e)) {                                             \
            shim_leave();                                                                    \
            return real_(dptr, hStream);                                                     \
        }                                                                                    \
        return sym##_taken(real_, &e, dptr, hStream);                                        \
    }                                                                                        \
    SHIM_EXPORT CUresult CUDAAPI sym(CUdeviceptr dptr, CUstream hStream)                     \
    {                                                                                        \
        __typeof__(&sym) real_ = atomic_load_explicit(&shim_real_slot[SHIM_FN_##sym],        \
                                                      memory_order_relaxed);                 \
        if (unlikely(real_ == NULL) || !shim_enter_plain_free())                             \
            return sym##_full(dptr, hStream);                                                \
        struct shim_entry e;                                                                 \
        if (!track_take(&shim.ptrs, dptr, &e)) {                                             \
            shim_leave();                                                                    \
            return real_(dptr, hStream);                                                     \
        }                                                                                    \
        if (unlikely(e.kind == CUSHIM_KIND_OFFLOADED))                                       \
            return sym##_taken(real_, &e, dptr, hStream);                                    \
        track_free_plain_begin(&e, CUSHIM_KIND_ASYNC, false);                                \
        CUresult r = real_(dptr, hStream);                                                   \
        track_free_plain_end(&shim.ptrs, &e, r == CUDA_SUCCESS);                             \
        shim_leave();                                                                        \
        return r;                                                                            \
    }
FREE_ASYNC(cuMemFreeAsync, false)
FREE_ASYNC(cuMemFreeAsync_ptsz, true)

#define TOMBSTONES 256 /* destroyed pools kept as tombstones: tombstone_add */

/* Pools destroyed so far (bumped before a destroy's entry becomes a tombstone). A call handing a
 * pool out reads it before its driver call. A pool destroyed during that call may be the one it
 * got: its tombstone, while there, keeps the call from putting it back; only the last TOMBSTONES
 * stay, and a thread preempted between its driver call and its table update can see hundreds of
 * pools destroyed meanwhile (the race test lost one in 1000 rounds so). So a call during which
 * TOMBSTONES / 2 or more pools were destroyed adds nothing: its pool's tombstone may be gone
 * (that takes TOMBSTONES later destroys, fewer than TOMBSTONES / 2 of them under way when the
 * call began). One with fewer adds its pool: a destroyed one would still have its tombstone. */
static _Atomic uint64_t pools_destroyed;

static bool destroyed_since(void *arg)
{
    return atomic_load(&pools_destroyed) - *(const uint64_t *)arg >= TOMBSTONES / 2;
}

/* Remembers what allocations from `pool` count as: the kind by its location and allocation type,
 * and the device for a device pool (so a pool of device 1 used on a stream of device 0 counts on
 * device 1, cuMemAllocFromPoolAsync: "The specified memory pool may be from a device different
 * than that of the specified hStream"). Pools the shim never saw count as `async` on the
 * current context's device (pool_kind).
 * `made`: cuMemPoolCreate's new pool, which replaces whatever the table held under its handle;
 * else a pool handed out (a default or current pool) by a call begun when `destroyed` pools had
 * been destroyed, added only if the table has no entry for it, neither a live pool's nor a
 * destroyed one's (POOL_DESTROYED), and destroyed_since allows it (`destroyed` is not read for a
 * pool made). */
static void pool_remember(CUmemoryPool pool, const CUmemLocation *location, int alloc_type, bool made,
                          uint64_t destroyed)
{
    /* cuda.h CUmemLocationType: a pool on a device holds device memory; host and host-NUMA
     * locations hold page-locked host memory. */
    enum cushim_kind kind = CUSHIM_KIND_ASYNC;
    int device = -1;
    switch ((int)location->type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        device = location->id;
        break;
    /* By value, so that a shim built with older headers counts them alike (a host pool's
     * allocations as device memory would meet a device budget): cuda.h 12.2's
     * CU_MEM_LOCATION_TYPE_HOST = 0x2, _HOST_NUMA = 0x3, _HOST_NUMA_CURRENT = 0x4. */
    case 0x2:
    case 0x3:
    case 0x4:
        kind = CUSHIM_KIND_PINNED_HOST;
        break;
    default:
        break;
    }
    /* cuda.h 13.0 (cuMemPoolCreate, cuMemGetDefaultMemPool): pools may hold managed memory,
     * CU_MEM_ALLOCATION_TYPE_MANAGED = 0x2 (by value, as above). */
    if (alloc_type == 0x2)
        kind = CUSHIM_KIND_MANAGED;
    struct shim_entry e = {.key = (uint64_t)(uintptr_t)pool, .aux = kind, .device = device};
    int rc = made ? table_put(&shim.pools, &e, NULL) : table_add_unless(&shim.pools, &e, destroyed_since, &destroyed);
    /* A pool of device memory not in the table counts as a pool never seen (pool_kind: async, on
     * the stream's device, held to the device limit), which it is: only a pool of another kind
     * makes the pools' accounting incomplete. */
    if (rc < 0 && kind != CUSHIM_KIND_ASYNC)
        pools_note_lost();
    else if (rc < 0)
        LOG_ONCE(CUSHIM_LOG_WARN, "a device memory pool could not be recorded (out of memory for "
                 "the shim's tables): its requests count as device memory of their stream's device, "
                 "and the pools' figures leave out its reserve");
}

SHIM_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    REAL_OR_FAIL(cuMemPoolCreate);
    CUresult r = real_(pool, poolProps);
    if (r != CUDA_SUCCESS || !poolProps || !shim_enter())
        return r;
    pool_remember(*pool, &poolProps->location, (int)poolProps->allocType, true, 0);
    /* A reading of the pools paged through the table while it changed may have left one out. */
    if (poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE && unlikely(budget_any))
        budget_pool_changed(poolProps->location.id, 0);
    shim_leave();
    return r;
}

/* A pool handed out by the driver, by a call begun when `destroyed` pools had been destroyed:
 * remembered as pool_remember says. */
static CUresult pool_got(CUresult r, const CUmemoryPool *pool, const CUmemLocation *location, int type,
                         uint64_t destroyed)
{
    if (r == CUDA_SUCCESS && pool && *pool && location && shim_enter()) {
        pool_remember(*pool, location, type, false, destroyed);
        shim_leave();
    }
    return r;
}

/* A device's default or current pool: device memory of that device (cuda.h,
 * cuDeviceGetDefaultMemPool: "The default mempool of a device contains device memory from that
 * device"; cuDeviceSetMemPool: "The memory pool must be local to the specified device"). */
SHIM_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    REAL_OR_FAIL(cuDeviceGetDefaultMemPool);
    CUmemLocation l = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
    uint64_t destroyed = atomic_load(&pools_destroyed);
    return pool_got(real_(pool_out, dev), pool_out, &l, CU_MEM_ALLOCATION_TYPE_PINNED, destroyed);
}

SHIM_EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    REAL_OR_FAIL(cuDeviceGetMemPool);
    CUmemLocation l = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev};
    uint64_t destroyed = atomic_load(&pools_destroyed);
    return pool_got(real_(pool, dev), pool, &l, CU_MEM_ALLOCATION_TYPE_PINNED, destroyed);
}

/* A device's current pool set: remembered (current_pool); the device's default pool set back is
 * remembered as 0 (asked of the driver, not while a capture is live: then it stays the handle,
 * which only keeps offload and spill off its requests). */
static CUresult pool_set(CUresult r, int device, CUmemoryPool pool)
{
    if (r != CUDA_SUCCESS || (unsigned)device >= CUSHIM_MAX_DEVICES)
        return r;
    uint64_t set = (uint64_t)(uintptr_t)pool;
    __typeof__(&cuDeviceGetDefaultMemPool) get_default = REAL(cuDeviceGetDefaultMemPool);
    CUmemoryPool def = NULL;
    if (set && get_default && shim_enter()) {
        if (!capture_any_live() && get_default(&def, device) == CUDA_SUCCESS && def == pool)
            set = 0;
        shim_leave();
    }
    atomic_store_explicit(&current_pool[device], set, memory_order_relaxed);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    REAL_OR_FAIL(cuDeviceSetMemPool);
    return pool_set(real_(dev, pool), (int)dev, pool);
}

#if CUDA_VERSION >= 13000
/* CUDA 13's pools by location (cuda.h, cuMemGetDefaultMemPool / cuMemGetMemPool): the host's and
 * host NUMA nodes' pinned pools, whose allocations through cuMemAllocFromPoolAsync are page-locked
 * host memory, not device memory. */
SHIM_EXPORT CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
                                                    CUmemAllocationType type)
{
    REAL_OR_FAIL(cuMemGetDefaultMemPool);
    uint64_t destroyed = atomic_load(&pools_destroyed);
    return pool_got(real_(pool_out, location, type), pool_out, location, (int)type, destroyed);
}

SHIM_EXPORT CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location,
                                             CUmemAllocationType type)
{
    REAL_OR_FAIL(cuMemGetMemPool);
    uint64_t destroyed = atomic_load(&pools_destroyed);
    return pool_got(real_(pool, location, type), pool, location, (int)type, destroyed);
}

/* cuda.h cuMemSetMemPool: for a device location and pinned allocations "the equivalent of
 * calling cuDeviceSetMemPool with the location id as the device". */
SHIM_EXPORT CUresult CUDAAPI cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
                                             CUmemoryPool pool)
{
    REAL_OR_FAIL(cuMemSetMemPool);
    bool device = location && location->type == CU_MEM_LOCATION_TYPE_DEVICE &&
                  type == CU_MEM_ALLOCATION_TYPE_PINNED;
    int id = device ? location->id : -1;
    return pool_set(real_(location, type, pool), id, pool);
}
#endif

static void pool_changed(CUmemoryPool pool, bool high_reset); /* below */

/* table_for_each callback: a live allocation in the budget from the destroyed pool arg[0] leaves
 * the pools' figures (its bytes summed in arg[1]; under the shard lock, arithmetic only). */
static bool pool_gone(struct shim_entry *e, void *arg)
{
    uint64_t *a = arg;
    if (e->kind != CUSHIM_KIND_ASYNC || e->aux != a[0] || !(e->flags & SHIM_F_RESERVED) ||
        (e->flags & SHIM_F_POOL_GONE))
        return false;
    e->flags |= SHIM_F_POOL_GONE;
    a[1] += e->size;
    return true;
}

/* table_update callback: a tombstone leaves the table (a pool made since under its handle stays). */
static bool unbury(struct shim_entry *e, void *arg)
{
    (void)arg;
    return e->aux != POOL_DESTROYED;
}

/* The handles of the last TOMBSTONES pools destroyed. A tombstone only has to outlive the calls
 * that were handing its pool out as it was destroyed (microseconds, or a preemption: then
 * destroyed_since), not the process: a program
 * that makes and destroys pools forever, the driver handing out new handle values, grew the table
 * by one entry per pool destroyed, and every reading of the pools (each destroy, cudaMemGetInfo,
 * the 100 ms samples) walked them all (a soak trial: 1e5 pools, +33 MiB and 40x slower per cycle).
 * So the oldest tombstone goes when a new one comes. 256: a reading of the pools walks them (at
 * 1024, 35% of a pool's make-use-destroy cycle); a call handing a pool out that stays between its
 * driver call and its table update while they go adds nothing (destroyed_since). */
static uint64_t tombstones[TOMBSTONES];
static unsigned tombstone_next;
static atomic_flag tombstone_lock = ATOMIC_FLAG_INIT;

static void tombstone_add(uint64_t key)
{
    shim_spin_take(&tombstone_lock);
    /* A handle once in the ring: its earlier place goes, or that place leaving would take out
     * the tombstone of this, its latest destroy, early (the simulator, as a driver may, hands a
     * destroyed pool's handle to the next pool). */
    for (unsigned i = 0; i < TOMBSTONES; i++)
        if (tombstones[i] == key)
            tombstones[i] = 0;
    uint64_t old = tombstones[tombstone_next];
    tombstones[tombstone_next] = key;
    tombstone_next = (tombstone_next + 1) % TOMBSTONES;
    /* Under the ring's lock (then the shard's; nothing takes them the other way): a handle whose
     * place left the ring, made again and destroyed again meanwhile, is back in the ring with a
     * new tombstone, which a removal after the unlock would take out (a review). */
    if (old)
        table_update(&shim.pools, old, unbury, NULL, NULL);
    shim_spin_drop(&tombstone_lock);
}

void pool_tombstones_after_fork_child(void)
{
    /* Held by a parent's thread at the fork: no thread of its is here. The table is emptied
     * (init.c), so the ring's handles are the parent's. */
    shim_spin_drop(&tombstone_lock);
    for (unsigned i = 0; i < TOMBSTONES; i++)
        tombstones[i] = 0;
    tombstone_next = 0;
}

/* table_update callback: the pool's entry, copied to arg, becomes its tombstone. */
static bool bury(struct shim_entry *e, void *arg)
{
    *(struct shim_entry *)arg = *e;
    e->aux = POOL_DESTROYED;
    e->device = -1;
    return true;
}

/* A pool in its destroy into (add) or out of the readings' reserve of `device` (budget.h
 * budget_pool_buried, budget_pool_unread). */
static void buried_change(int device, uint64_t bytes, bool unread, bool add)
{
    if (unread && add)
        atomic_fetch_add(&budget_pool_unread[device], 1);
    else if (unread)
        atomic_fetch_sub(&budget_pool_unread[device], 1);
    else if (add)
        atomic_fetch_add(&budget_pool_buried[device], bytes);
    else
        atomic_fetch_sub(&budget_pool_buried[device], bytes);
}

/* The pool leaves the table before the real destroy, and no sampler (pools.c) may still hold
 * its handle then; a failed destroy puts it back. cuda.h cuMemPoolDestroy: a pool destroyed with
 * allocations not freed yet is released "once there are no more outstanding allocations": under
 * a budget those allocations leave the pools' figures (budget_async), which no longer read that
 * pool, and their frees add nothing to the idle reserve; they stay in the budget's used bytes
 * until freed. */
SHIM_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    REAL_OR_FAIL(cuMemPoolDestroy);
    struct shim_entry e, before;
    bool listed = pool && table_get(&shim.pools, (uint64_t)(uintptr_t)pool, &before) &&
                  before.aux != POOL_DESTROYED;
    /* Its device's pools read while it is one of them: its high-water marks stay in the _HIGH
     * sums (pools.h), which no later reading has. */
    if (listed && shim_enter()) {
        pool_changed(pool, false);
        shim_leave();
    }
    /* Its entry becomes a tombstone (POOL_DESTROYED), put back as it was if the destroy fails. */
    if (pool)
        atomic_fetch_add(&pools_destroyed, 1);
    /* Its reserve leaves the readings with its entry, its allocations the stream-ordered bytes
     * only after the call (pool_gone): in between, a reading would take them off the other pools'
     * reserve (a review: 60 MiB idle read as 0, a cudaMalloc granted past the limit). So its
     * reserve, read now, counts in the readings from before its entry leaves until after
     * (budget_pool_buried); one that cannot be read (the query failed; a capture live, when
     * no pool is queried) counts as all the memory there is (budget_pool_unread), refusing
     * rather than over-granting for that time. */
    int buried_on = -1;
    uint64_t buried = 0;
    bool unread = false;
    if (listed && unlikely(budget_any) && before.aux == CUSHIM_KIND_ASYNC &&
        (unsigned)before.device < CUSHIM_MAX_DEVICES) {
        __typeof__(&cuMemPoolGetAttribute) get = REAL(cuMemPoolGetAttribute);
        cuuint64_t v = 0;
        unread = capture_any_live() || !get || get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS;
        buried = unread ? 0 : v;
        buried_on = before.device;
        buried_change(buried_on, buried, unread, true);
    }
    bool known = pool && table_update(&shim.pools, (uint64_t)(uintptr_t)pool, bury, &e, NULL) &&
                 e.aux != POOL_DESTROYED;
    if (buried_on >= 0 && !(known && e.aux == CUSHIM_KIND_ASYNC && e.device == buried_on)) {
        buried_change(buried_on, buried, unread, false); /* not the pool read: another's destroy */
        buried_on = -1;
    }
    if (known)
        async_pool_quiesce();
    /* Counted as an event before the call too, so that a refusal's second look whose count
     * predates it is not used (budget.c budget_reserve_limited; a review: a cudaMalloc granted
     * past the limit). */
    if (known && e.aux == CUSHIM_KIND_ASYNC && unlikely(budget_any))
        budget_pool_changed(e.device, 0);
    CUresult r = real_(pool);
    if (!known)
        return r;
    if (r != CUDA_SUCCESS) {
        table_put(&shim.pools, &e, NULL);
        if (buried_on >= 0) { /* back in the table: read there again */
            /* Bumped between (as below): a reading whose walk missed the entry put back and that
             * finds its reserve out of budget_pool_buried is not published. */
            budget_pool_changed(buried_on, 0);
            buried_change(buried_on, buried, unread, false);
            budget_pool_changed(buried_on, 0);
        }
        return r;
    }
    tombstone_add((uint64_t)(uintptr_t)pool);
    if ((unsigned)e.device < CUSHIM_MAX_DEVICES) {
        uint64_t was = (uint64_t)(uintptr_t)pool;
        atomic_compare_exchange_strong(&current_pool[e.device], &was, 0);
    }
    if (e.aux == CUSHIM_KIND_ASYNC && unlikely(budget_any)) {
        uint64_t gone[2] = {(uint64_t)(uintptr_t)pool, 0};
        if (table_for_each(&shim.ptrs, pool_gone, gone))
            budget_async_sub(e.device, gone[1]);
        /* Its allocations out of the stream-ordered bytes first, then the count bumped, then its
         * reserve out of the readings. A reading takes budget_async before its walk and
         * budget_pool_buried after it (async_pool_sample): one that took budget_async with the
         * allocations in it and budget_pool_buried without the reserve found the other pools'
         * idle less those allocations, and with no bump between, it was published and decided
         * with before the last one (a review, the threads ordered under gdb: 100 MiB in use, 60
         * idle, an 80 MiB cudaMalloc granted under 200 MiB; no driver call in that window for a
         * test's SIMCUDA_INJECT to open it). Now any reading that finds the reserve out began
         * before this bump and is not published; one that began after it took budget_async
         * without the allocations. */
        budget_pool_changed(e.device, 0);
        if (buried_on >= 0) {
            buried_change(buried_on, buried, unread, false);
            budget_pool_changed(e.device, 0); /* its reserve went with it; read again */
        }
    }
    /* buried_on >= 0 only for a pool of stream-ordered memory under a limit: taken out above. */
    return r;
}

/* After a call that changes what a pool holds or its high-water marks (cuMemPoolTrimTo: "Releases
 * memory back to the OS"; cuMemPoolSetAttribute of RESERVED_MEM_HIGH / USED_MEM_HIGH, which "can
 * only be reset to zero"; a new release threshold frees nothing until a synchronize), the pools of
 * its device are read again, so the live view
 * shows PyTorch's empty_cache (cudaMemPoolTrimTo) at once rather than at the next sample. A pool
 * the shim does not know: every device's. Not while a capture is live (no query may disturb it). */
static void pool_changed(CUmemoryPool pool, bool high_reset)
{
    int device = -1;
    if (pool_kind(pool, &device) != CUSHIM_KIND_ASYNC) /* a host or managed pool: not in the sums */
        return;
    if (high_reset) /* the next reading sets the high sums as read, now or after the capture */
        async_pool_high_restart(device);
    if (capture_any_live())
        return;
    if (device >= 0)
        async_pool_sample(device);
    else
        async_pool_sample_all();
}

SHIM_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    REAL_OR_FAIL(cuMemPoolTrimTo);
    CUresult r = real_(pool, minBytesToKeep);
    if (r == CUDA_SUCCESS && shim_enter()) {
        pool_changed(pool, false);
        shim_leave();
    }
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    REAL_OR_FAIL(cuMemPoolSetAttribute);
    CUresult r = real_(pool, attr, value);
    if (r == CUDA_SUCCESS &&
        (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH || attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH) &&
        shim_enter()) {
        pool_changed(pool, true);
        shim_leave();
    }
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                                    CUmemPoolPtrExportData *shareData)
{
    REAL_OR_FAIL(cuMemPoolImportPointer);
    if (!shim_enter())
        return real_(ptr_out, pool, shareData);
    CUresult r = real_(ptr_out, pool, shareData);
    if (r == CUDA_SUCCESS) {
        /* Another process's pool allocation: counted on the device holding it, as an opened IPC
         * handle is, and in no context (cuda.h cuCtxDestroy: memory of cuMemAllocAsync "not
         * associated with any CUDA context"), so that no teardown here counts it freed; it leaves
         * with its cuMemFree or cuMemFreeAsync. */
        CUdeviceptr base = 0;
        size_t size = 0;
        __typeof__(&cuMemGetAddressRange_v2) range = REAL(cuMemGetAddressRange_v2);
        if (range && range(&base, &size, *ptr_out) == CUDA_SUCCESS)
            track_alloc_on(&shim.ptrs, CUSHIM_KIND_IMPORTED, *ptr_out, size,
                           shim_pointer_device(*ptr_out, shim_current_device(NULL)), NULL, 0);
    } else {
        track_fail(CUSHIM_KIND_IMPORTED);
    }
    shim_leave();
    return r;
}
