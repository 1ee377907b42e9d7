/* Contexts: which device a context belongs to (cached: one driver call per new context), and
 * context teardown, which frees memory without any free call (DESIGN.md). */
#include "shim/capture.h"
#include "shim/graph.h"
#include "shim/offload.h"
#include "shim/track.h"

#define CTX_CACHE 256

struct ctx_slot {
    _Atomic uint64_t ctx;     /* CUcontext, 0 = empty, UINT64_MAX = forgotten */
    _Atomic int32_t device1;  /* ordinal + 1, 0 = not yet published */
};
static struct ctx_slot ctx_cache[CTX_CACHE];
/* Bumped when a context is forgotten, so per-thread caches revalidate. */
_Atomic uint32_t shim_ctx_generation;

/* Writers (cache_insert, shim_context_forget) take this lock: both are cold (after a driver
 * query; at a context's destroy) and never hold it across a driver call. Lookups take no lock. */
static atomic_flag ctx_cache_lock = ATOMIC_FLAG_INIT;

/* A slot's device is read between two reads of its context: a slot forgotten and reused for
 * another context as it is read (cache_insert stores the new device, with release, after the
 * forget's store of UINT64_MAX) shows a context changed on the second read, and misses. */
static int cache_lookup(uint64_t c)
{
    for (unsigned i = 0; i < CTX_CACHE; i++) {
        uint64_t v = atomic_load_explicit(&ctx_cache[i].ctx, memory_order_acquire);
        if (v == c) {
            int d = atomic_load_explicit(&ctx_cache[i].device1, memory_order_acquire) - 1;
            return atomic_load_explicit(&ctx_cache[i].ctx, memory_order_relaxed) == c ? d : -1;
        }
        if (v == 0)
            break;
    }
    return -1;
}

/* Into the first empty slot, or the first of a context forgotten (UINT64_MAX): a program that
 * creates and destroys contexts forever (a soak trial: 256 cuCtxDestroy) otherwise filled every
 * slot with forgotten ones, and from then on each lookup of a newer context scanned them all and
 * asked the driver (cuCtxPushCurrent, cuCtxGetDevice, cuCtxPopCurrent for every stream-ordered
 * allocation on another context's stream). Under ctx_cache_lock, device before context: a lookup
 * that reads the new context reads its device (a review: claimed by compare-and-swap and the
 * device stored after, a store late by a preemption, or an insert of the same context racing its
 * forget, landed on the slot once reused for another context, which read the old one's device). */
static void cache_insert(uint64_t c, int device)
{
    shim_spin_take(&ctx_cache_lock);
    int free_slot = -1;
    uint64_t v = 0;
    unsigned i = 0;
    for (; i < CTX_CACHE; i++) {
        v = atomic_load_explicit(&ctx_cache[i].ctx, memory_order_relaxed);
        if (v == c || v == 0)
            break;
        if (v == UINT64_MAX && free_slot < 0)
            free_slot = (int)i;
    }
    if (i == CTX_CACHE || v != c) {
        if (free_slot < 0 && i < CTX_CACHE)
            free_slot = (int)i;
        if (free_slot >= 0) {
            atomic_store_explicit(&ctx_cache[free_slot].device1, device + 1, memory_order_release);
            atomic_store_explicit(&ctx_cache[free_slot].ctx, c, memory_order_release);
        }
    }
    shim_spin_drop(&ctx_cache_lock);
}

static void sole_decide(int device, struct cushim_device_record *rec);

int shim_context_device(CUcontext ctx)
{
    uint64_t c = (uint64_t)(uintptr_t)ctx;
    if (!c)
        return -1;
    int d = cache_lookup(c);
    if (d >= 0)
        return d;
    /* Ask the driver with ctx pushed current: cuCtxGetDevice works on the current context. */
    CUdevice dev;
    CUcontext popped;
    __typeof__(&cuCtxPushCurrent_v2) push = REAL(cuCtxPushCurrent_v2);
    __typeof__(&cuCtxPopCurrent_v2) pop = REAL(cuCtxPopCurrent_v2);
    __typeof__(&cuCtxGetDevice) get = REAL(cuCtxGetDevice);
    if (!push || !pop || !get || push(ctx) != CUDA_SUCCESS)
        return -1;
    CUresult r = get(&dev);
    pop(&popped);
    if (r != CUDA_SUCCESS || dev < 0 || dev >= (int)CUSHIM_MAX_DEVICES)
        return -1;
    cache_insert(c, dev);
    /* A program whose first context is met through a stream (stream-ordered allocations only)
     * learns here too whether there is one device. */
    struct cushim_device_record *rec = account_record(dev);
    if (rec)
        sole_decide(dev, rec);
    return dev;
}

SHIM_TLS struct shim_ctx_cache shim_tls_ctx;

/* ---- one device ---- */
struct cushim_device_record *_Atomic shim_sole_record;
static _Atomic int sole_known; /* the driver's device count has been read */

/* Once a context exists (the driver is initialized and the count fixed: cuda.h cuDeviceGetCount
 * counts the devices of this process, CUDA_VISIBLE_DEVICES included), a count of one makes every
 * context one of device 0's: the record is published for the plain allocation path. */
static void sole_decide(int device, struct cushim_device_record *rec)
{
    if (atomic_load_explicit(&sole_known, memory_order_acquire))
        return;
    int n = 0;
    __typeof__(&cuDeviceGetCount) count = REAL(cuDeviceGetCount);
    if (!count || count(&n) != CUDA_SUCCESS)
        return;
    if (n == 1 && device == 0)
        atomic_store_explicit(&shim_sole_record, rec, memory_order_release);
    atomic_store_explicit(&sole_known, 1, memory_order_release);
}

int shim_current_device_slow(CUcontext ctx)
{
    uint64_t c = (uint64_t)(uintptr_t)ctx;
    /* Acquire: read before the shared cache (a relaxed load may be satisfied after it on a weakly
     * ordered CPU, pairing a slot forgotten meanwhile with the generation that forgot it). */
    uint32_t gen = atomic_load_explicit(&shim_ctx_generation, memory_order_acquire);
    shim_tls_ctx.ctx = 0; /* filled again below only when complete */
    int d = cache_lookup(c);
    if (d < 0) {
        CUdevice dev = -1;
        __typeof__(&cuCtxGetDevice) get = REAL(cuCtxGetDevice);
        CUresult r = get ? get(&dev) : CUDA_ERROR_NOT_FOUND;
        if (r != CUDA_SUCCESS || dev < 0 || dev >= (int)CUSHIM_MAX_DEVICES) {
            /* A context is current and the driver will not say its device: what is allocated in
             * it goes uncounted, said once (with none current, or a destroyed one current, the
             * program's own call fails: nothing to say). */
            if (ctx && r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
                LOG_ONCE(CUSHIM_LOG_WARN, "cannot tell the device of the current context (cuCtxGetDevice: "
                         "error %d, device %d): what it allocates is not counted", (int)r, (int)dev);
            return -1;
        }
        d = dev;
        cache_insert(c, d);
    }
    /* The device's record, made live now (account.h); cached only when there is one. */
    struct cushim_device_record *rec = account_record(d);
    if (!rec)
        return d;
    sole_decide(d, rec);
    shim_tls_ctx.ctx = c;
    shim_tls_ctx.record = rec;
    shim_tls_ctx.device = d;
    shim_tls_ctx.generation = gen;
    return d;
}

int shim_pointer_device(CUdeviceptr p, int fallback)
{
    __typeof__(&cuPointerGetAttribute) attr = REAL(cuPointerGetAttribute);
    __typeof__(&cuDeviceGetCount) count = REAL(cuDeviceGetCount);
    int holder = -1, n = 0;
    if (p && attr && count && attr(&holder, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS &&
        count(&n) == CUDA_SUCCESS && holder >= 0 && holder < n && holder < (int)CUSHIM_MAX_DEVICES &&
        account_record(holder))
        return holder;
    return fallback;
}

void shim_context_forget(CUcontext ctx)
{
    uint64_t c = (uint64_t)(uintptr_t)ctx;
    /* Keep the slot (lookups stop at the first empty one) but make it match nothing; its device
     * stays until a reuse stores the new one first (cache_insert). */
    shim_spin_take(&ctx_cache_lock);
    for (unsigned i = 0; i < CTX_CACHE; i++) {
        uint64_t v = atomic_load_explicit(&ctx_cache[i].ctx, memory_order_relaxed);
        if (v == 0)
            break;
        if (v == c) {
            atomic_store_explicit(&ctx_cache[i].ctx, UINT64_MAX, memory_order_release);
            break; /* once in the cache (cache_insert, under the lock) */
        }
    }
    shim_spin_drop(&ctx_cache_lock);
    /* Release: a thread that reads the new generation sees the slot forgotten. */
    atomic_fetch_add_explicit(&shim_ctx_generation, 1, memory_order_release);
}

CUcontext shim_primary_context(int device)
{
    unsigned flags;
    int active = 0;
    CUcontext ctx = NULL;
    __typeof__(&cuDevicePrimaryCtxGetState) state = REAL(cuDevicePrimaryCtxGetState);
    __typeof__(&cuDevicePrimaryCtxRetain) retain = REAL(cuDevicePrimaryCtxRetain);
    __typeof__(&cuDevicePrimaryCtxRelease_v2) release = REAL(cuDevicePrimaryCtxRelease_v2);
    if (!release)
        release = REAL(cuDevicePrimaryCtxRelease);
    if (!state || !retain || !release || state(device, &flags, &active) != CUDA_SUCCESS || !active)
        return NULL;
    if (retain(&ctx, device) != CUDA_SUCCESS)
        return NULL;
    release(device);
    return ctx;
}

/* The table needs no pass while no device allocation was counted or an entry of unknown
 * context put back since the last pass that left every entry answered: the count of device
 * allocations plus such put-backs then, or UINT64_MAX for "look". A plain allocation is in the
 * table before it is counted (track_alloc_plain), so a pass that reads the count sees it. */
static _Atomic uint64_t resolved_at = UINT64_MAX;
static _Atomic uint64_t unknown_returned;
static _Atomic uint64_t next_token;

void shim_context_after_fork_child(void)
{
    shim_spin_drop(&ctx_cache_lock); /* held by a parent's thread at the fork: no thread of its is here */
    atomic_store(&shim_sole_record, NULL); /* it points into the parent's segment */
    atomic_store(&sole_known, 0);
    atomic_store(&resolved_at, UINT64_MAX);
}

/* The context field of a one-device plain entry (ctx 0: not asked yet) while a resolve asks the
 * driver about it (ASKING), and once the driver could not say (UNSAID: asked again by a later
 * pass), each with the token of the resolve that set it, so that an answer is applied only to
 * the allocation its own resolve asked about, never to a later one at the same address that
 * another resolve claimed. The top two bits tell them from a context (a user-space pointer). */
#define CTX_ASKING (2ull << 62)
#define CTX_UNSAID (3ull << 62)
#define CTX_MARK(v) ((v) >> 62)
#define CTX_TOKEN(v) ((v) & ((1ull << 62) - 1))

bool shim_context_unknown(uint64_t ctx)
{
    return ctx == 0 || CTX_MARK(ctx) >= 2;
}

/* Claims for resolve `token` an entry whose context is not known: not asked yet, claimed by
 * another resolve (that one's answer will not apply), or left unanswered by an earlier pass. */
static bool claim_unknown(struct shim_entry *e, void *arg)
{
    uint64_t token = *(uint64_t *)arg;
    if (e->kind != CUSHIM_KIND_DEVICE || !shim_context_unknown(e->ctx) ||
        e->ctx == (CTX_ASKING | token) || e->ctx == (CTX_UNSAID | token))
        return false;
    e->ctx = CTX_ASKING | token;
    return true;
}

struct answer {
    uint64_t mine; /* CTX_ASKING | the resolve's token */
    uint64_t ctx;  /* the context, CTX_UNSAID | token, or 0: the pointer is not valid */
    bool dropped;
};

static bool apply_answer(struct shim_entry *e, void *arg)
{
    struct answer *a = arg;
    if (e->ctx != a->mine)
        return true; /* not the allocation this resolve asked about (freed and reused, or
                        claimed again by another resolve) */
    if (a->ctx == 0) {
        a->dropped = true;
        return false;
    }
    e->ctx = a->ctx;
    return true;
}

/* Asks the driver for the context of each key claimed with `token`; applies the answers.
 * Returns how many it could not answer. */
static unsigned ask(__typeof__(&cuPointerGetAttribute) attr, const uint64_t *keys, unsigned n,
                    uint64_t token)
{
    unsigned unsaid = 0;
    for (unsigned i = 0; i < n; i++) {
        CUcontext c = NULL;
        CUresult r = attr(&c, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)keys[i]);
        struct answer a = {.mine = CTX_ASKING | token, .ctx = (uint64_t)(uintptr_t)c};
        if (r == CUDA_ERROR_INVALID_VALUE) {
            /* cuda.h cuPointerGetAttribute: not a valid pointer: freed without the shim seeing
             * it. Counted as freed now, as a reused address is (track_replaced). */
            a.ctx = 0;
        } else if (r != CUDA_SUCCESS || !c || !(CTX_MARK(a.ctx) < 2)) {
            LOG_ONCE(CUSHIM_LOG_WARN, "cuPointerGetAttribute(CONTEXT) returned %d for a device "
                     "allocation: if its context is torn down now, it stays counted until the "
                     "driver answers at a later teardown", (int)r);
            a.ctx = CTX_UNSAID | token; /* matches no context; asked again by a later pass */
            unsaid++;
        }
        struct shim_entry e;
        table_update(&shim.ptrs, keys[i], apply_answer, &a, &e);
        if (a.dropped)
            account_free(e.device, (enum cushim_kind)e.kind, e.size, e.flags);
    }
    return unsaid;
}

void shim_context_unknown_returned(void)
{
    atomic_fetch_add(&unknown_returned, 1);
}

void shim_resolve_contexts(CUcontext ending)
{
    struct cushim_device_record *sole = atomic_load_explicit(&shim_sole_record, memory_order_acquire);
    /* Once the summary is written (the runtime's own exit handler releases the primary context
     * after the shim's), the figures are final: no driver call per allocation then. */
    if (!sole || atomic_load(&shim.seg->h.exited))
        return;
    uint64_t epoch = atomic_load(&sole->kinds[CUSHIM_KIND_DEVICE].v[CUSHIM_STAT_alloc_count]) +
                     atomic_load(&unknown_returned);
    if (epoch == atomic_load(&resolved_at))
        return;
    __typeof__(&cuPointerGetAttribute) attr = REAL(cuPointerGetAttribute);
    if (!attr) {
        LOG_ONCE(CUSHIM_LOG_WARN, "the driver has no cuPointerGetAttribute: allocations torn down "
                 "with their context stay counted");
        return;
    }
    /* cuda.h does not say whether the query needs a current context: with none, the one about to
     * end (still alive) is made current for it. */
    CUcontext cur = NULL;
    __typeof__(&cuCtxGetCurrent) getcur = REAL(cuCtxGetCurrent);
    __typeof__(&cuCtxPushCurrent_v2) push = REAL(cuCtxPushCurrent_v2);
    __typeof__(&cuCtxPopCurrent_v2) pop = REAL(cuCtxPopCurrent_v2);
    bool pushed = ending && getcur && push && pop && getcur(&cur) == CUDA_SUCCESS && !cur &&
                  push(ending) == CUDA_SUCCESS;
    uint64_t keys[64];
    /* Shard by shard from a cursor, a batch of keys at a time (the driver is never called under a
     * lock): one pass over the table. Entries another thread's free moves back past the cursor,
     * or a shard's growth moves, are found by the next sweep of that shard; a sweep that claims
     * nothing ends it (the bound only matters while other threads keep allocating). */
    unsigned unsaid = 0;
    bool complete = true;
    uint64_t token = CTX_TOKEN(atomic_fetch_add(&next_token, 1) + 1);
    for (unsigned k = 0; k < SHIM_TABLE_SHARDS; k++) {
        unsigned sweep;
        for (sweep = 0; sweep < 8; sweep++) {
            uint32_t slot = 0, cap = 0, seen = 0;
            unsigned claimed = 0, n;
            do {
                n = table_collect_from(&shim.ptrs, k, &slot, claim_unknown, &token, keys, 64, &cap);
                if (seen && cap != seen)
                    slot = 0;
                seen = cap;
                claimed += n;
                unsaid += ask(attr, keys, n, token);
            } while (slot < cap);
            if (!claimed)
                break;
        }
        complete = complete && sweep < 8;
    }
    if (complete && !unsaid)
        atomic_store(&resolved_at, epoch);
    if (pushed) {
        CUcontext popped;
        pop(&popped);
    }
}

struct drop_arg {
    uint64_t ctx;
};

static bool drop_pred(const struct shim_entry *e, void *arg)
{
    return e->ctx == ((struct drop_arg *)arg)->ctx;
}

static void drop_done(const struct shim_entry *e, void *arg)
{
    (void)arg;
    if (e->kind == CUSHIM_KIND_OFFLOADED)
        offload_range_gone(e->key, e->ctx);
    /* After the exit report (the runtime's own exit handler releases the primary context after
     * the shim's) the figures are final, as shim_resolve_contexts has them: a segment kept for the
     * run to read (its copy could not be written) says what the report said. */
    if (!atomic_load(&shim.seg->h.exited))
        account_free(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
}

void shim_drop_context(CUcontext ctx)
{
    struct drop_arg a = {(uint64_t)(uintptr_t)ctx};
    if (!a.ctx)
        return;
    unsigned n = table_drain_if(&shim.ptrs, drop_pred, drop_done, &a);
    n += table_drain_if(&shim.arrays, drop_pred, drop_done, &a);
    offload_context_gone(a.ctx);
    capture_context_gone(a.ctx);
    graph_context_gone(a.ctx);
    budget_context_gone();
    /* If the context's were the last captures: the pool reads that were due (not after the exit
     * report, whose figures are final). */
    if (!atomic_load(&shim.seg->h.exited))
        graph_pool_sample_owed();
    if (n)
        LOG_DEBUG("context %p torn down: %u allocation%s dropped", (void *)ctx, n, n == 1 ? "" : "s");
}
