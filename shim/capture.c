#include "shim/capture.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "shim/graph.h"
#include "shim/shim.h"
#include "shim/track.h"

#define PT_SLOTS 8 /* contexts whose per-thread stream a thread tells apart (stream_key) */

/* The calling thread's view. Only its own thread reads or writes it: a capture ended on another
 * thread (relaxed mode), by stream destruction or by context teardown leaves own_key stale, which
 * the begin number (own_seq) detects. */
struct thread_capture {
    uint64_t id;      /* this thread's number, 1, 2, ... (0: none given yet) */
    uint64_t own_key; /* the capture this thread began last, 0 if none */
    uint64_t own_seq; /* its begin number */
    CUcontext pt_ctx[PT_SLOTS]; /* the contexts of its per-thread streams, by slot */
};

static SHIM_TLS struct thread_capture tc;
_Atomic int capture_global;            /* of which (or being begun) GLOBAL */
_Atomic int capture_thread_local;      /* of which THREAD_LOCAL */
_Atomic int capture_unsafe_inflight;
static _Atomic uint64_t next_thread;   /* thread numbers given */
static _Atomic uint64_t next_seq;      /* captures begun, process-wide: the begin number */

/* Live captures are in shim.captures: stream key -> bytes allocated while live (size), the
 * beginning thread's number (ctx), the stream's CUDA context (aux) and device, the begin mode
 * (kind) and the begin number (refs: low half, maps: high half). Nothing in an entry points into
 * a thread's storage, so ending a capture never touches another thread's TLS (the beginning thread
 * may have exited). */
static uint64_t entry_seq(const struct shim_entry *e)
{
    return (uint64_t)e->refs | (uint64_t)e->maps << 32;
}

/* Spare slots for captures shim.captures cannot take (out of memory: the arena exhausted), so
 * that such a capture is still seen. Static; one spin lock over all (arithmetic only inside);
 * spares_used lets the common case (none used) skip them with one load. The cap_* functions
 * below are the table's counterparts over the table and the spares together. */
#define CAPTURE_SPARES 64
static struct shim_entry spares[CAPTURE_SPARES];
static atomic_flag spares_lock = ATOMIC_FLAG_INIT;
static _Atomic unsigned spares_used;

static bool spares_any(void)
{
    return atomic_load_explicit(&spares_used, memory_order_acquire) != 0;
}

/* e into a spare slot (replacing one of the same key: 1, *old); 0 when stored, -1 when none is
 * free. */
static int spare_put(const struct shim_entry *e, struct shim_entry *old)
{
    int rc = -1;
    shim_spin_take(&spares_lock);
    struct shim_entry *free_slot = NULL;
    for (unsigned i = 0; i < CAPTURE_SPARES; i++) {
        if (spares[i].key == e->key) {
            *old = spares[i];
            spares[i] = *e;
            rc = 1;
            break;
        }
        if (!spares[i].key && !free_slot)
            free_slot = &spares[i];
    }
    if (rc < 0 && free_slot) {
        *free_slot = *e;
        atomic_fetch_add_explicit(&spares_used, 1, memory_order_release);
        rc = 0;
    }
    shim_spin_drop(&spares_lock);
    return rc;
}

/* The spare slot holding key, or NULL; spares_lock held. */
static struct shim_entry *spare_slot(uint64_t key)
{
    for (unsigned i = 0; i < CAPTURE_SPARES; i++)
        if (spares[i].key == key)
            return &spares[i];
    return NULL;
}

/* The spare slot of key copied to out, and emptied when `take`; false when none holds it. */
static bool spare_find(uint64_t key, struct shim_entry *out, bool take)
{
    if (!spares_any())
        return false;
    shim_spin_take(&spares_lock);
    struct shim_entry *slot = spare_slot(key);
    if (slot) {
        *out = *slot;
        if (take) {
            slot->key = 0;
            atomic_fetch_sub_explicit(&spares_used, 1, memory_order_release);
        }
    }
    shim_spin_drop(&spares_lock);
    return slot != NULL;
}

static bool cap_take(uint64_t key, struct shim_entry *out)
{
    return table_take(&shim.captures, key, out) || spare_find(key, out, true);
}

static bool cap_get(uint64_t key, struct shim_entry *out)
{
    return table_get(&shim.captures, key, out) || spare_find(key, out, false);
}

/* table_update over both; fn keeps the entry (true) in every use here. */
static bool cap_update(uint64_t key, bool (*fn)(struct shim_entry *, void *), void *arg)
{
    if (table_update(&shim.captures, key, fn, arg, NULL))
        return true;
    if (!spares_any())
        return false;
    shim_spin_take(&spares_lock);
    struct shim_entry *slot = spare_slot(key);
    if (slot)
        fn(slot, arg);
    shim_spin_drop(&spares_lock);
    return slot != NULL;
}

static unsigned cap_for_each(bool (*fn)(struct shim_entry *, void *), void *arg)
{
    unsigned n = table_for_each(&shim.captures, fn, arg);
    if (!spares_any())
        return n;
    shim_spin_take(&spares_lock);
    for (unsigned i = 0; i < CAPTURE_SPARES; i++)
        if (spares[i].key && fn(&spares[i], arg))
            n++;
    shim_spin_drop(&spares_lock);
    return n;
}

static unsigned cap_drain_if(bool (*pred)(const struct shim_entry *, void *),
                             void (*done)(const struct shim_entry *, void *), void *arg)
{
    unsigned n = table_drain_if(&shim.captures, pred, done, arg);
    if (!spares_any())
        return n;
    shim_spin_take(&spares_lock);
    for (unsigned i = 0; i < CAPTURE_SPARES; i++)
        if (spares[i].key && pred(&spares[i], arg)) {
            struct shim_entry e = spares[i];
            spares[i].key = 0;
            atomic_fetch_sub_explicit(&spares_used, 1, memory_order_release);
            done(&e, arg);
            n++;
        }
    shim_spin_drop(&spares_lock);
    return n;
}

static uint64_t thread_number(void)
{
    if (!tc.id)
        tc.id = atomic_fetch_add_explicit(&next_thread, 1, memory_order_relaxed) + 1;
    return tc.id;
}

/* The key of the calling thread's per-thread stream in slot `slot` (stream_key). */
static uint64_t pt_key(uint64_t slot)
{
    return (thread_number() * PT_SLOTS + slot) << 1 | 1u;
}

/* The slot of ctx among the calling thread's per-thread streams: the one it already has, else a
 * free one, else one whose capture is over (a thread that goes through many contexts, one per
 * job, reuses slots); only with PT_SLOTS captures live at once on as many other contexts' streams
 * is the last slot shared (two of those captures would then be one to the shim). */
static uint64_t pt_slot(CUcontext ctx)
{
    for (unsigned i = 0; i < PT_SLOTS; i++) {
        if (tc.pt_ctx[i] == ctx)
            return i;
        if (!tc.pt_ctx[i]) {
            tc.pt_ctx[i] = ctx;
            return i;
        }
    }
    struct shim_entry e;
    for (unsigned i = 0; i < PT_SLOTS; i++)
        if (!cap_get(pt_key(i), &e)) {
            tc.pt_ctx[i] = ctx;
            return i;
        }
    return PT_SLOTS - 1;
}

static uint64_t stream_key(CUstream stream, bool per_thread)
{
    /* Every thread's per-thread default stream has the same handle, and a thread has one per
     * context (driver API, "Stream synchronization behavior": it "is an implicit stream local to
     * both the thread and the CUcontext"): key it by thread and the current context's slot (odd,
     * so no stream handle, an aligned pointer, and not CU_STREAM_LEGACY (0x1), since numbers
     * start at 1). */
    if (stream == CU_STREAM_PER_THREAD || (per_thread && stream == NULL))
        return pt_key(pt_slot(shim_stream_context(stream)));
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

bool capture_made_node(CUstream stream, bool per_thread, CUdeviceptr dptr)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode *deps = NULL;
    size_t n = 0;
    CUresult r;
    if (per_thread) {
        __typeof__(&cuStreamGetCaptureInfo_v2_ptsz) info = REAL(cuStreamGetCaptureInfo_v2_ptsz);
        r = info ? info(stream, &status, NULL, NULL, &deps, &n) : CUDA_ERROR_NOT_FOUND;
    } else {
        __typeof__(&cuStreamGetCaptureInfo_v2) info = REAL(cuStreamGetCaptureInfo_v2);
        r = info ? info(stream, &status, NULL, NULL, &deps, &n) : CUDA_ERROR_NOT_FOUND;
    }
    __typeof__(&cuGraphNodeGetType) get_type = REAL(cuGraphNodeGetType);
    __typeof__(&cuGraphMemAllocNodeGetParams) get_alloc = REAL(cuGraphMemAllocNodeGetParams);
    if (r != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_ACTIVE || !deps || !get_type || !get_alloc)
        return false;
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType type;
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        if (get_type(deps[i], &type) == CUDA_SUCCESS && type == CU_GRAPH_NODE_TYPE_MEM_ALLOC &&
            get_alloc(deps[i], &p) == CUDA_SUCCESS && p.dptr == dptr)
            return true;
    }
    return false;
}

/* The counter a capture of `mode` is in (NULL: none). */
static _Atomic int *mode_counter(unsigned mode)
{
    return mode == CU_STREAM_CAPTURE_MODE_GLOBAL         ? &capture_global
           : mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ? &capture_thread_local
                                                         : NULL;
}

/* The thread's cancellation state before its outermost section, and how deep it is in sections
 * (one may open inside another: a free that releases a block to the cache): only the outermost
 * sets and restores the state. */
static SHIM_TLS int unsafe_cancel_state;
static SHIM_TLS int unsafe_depth;

bool capture_unsafe_begin(void)
{
    if (unsafe_depth++ == 0)
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &unsafe_cancel_state);
    atomic_fetch_add_explicit(&capture_unsafe_inflight, 1, memory_order_seq_cst);
    if (__builtin_expect(!capture_prohibits_here(), 1))
        return true;
    capture_unsafe_end();
    return false;
}

void capture_unsafe_end(void)
{
    atomic_fetch_sub_explicit(&capture_unsafe_inflight, 1, memory_order_release);
    if (--unsafe_depth == 0)
        pthread_setcancelstate(unsafe_cancel_state, NULL);
}

void capture_begin_announce(CUstreamCaptureMode mode)
{
    /* Live from before the begin (taken back in capture_begin_done): the driver makes the stream
     * capturing inside the call, and an allocation another thread makes on it from then on is a
     * graph node (cuda.h cuMemAllocAsync: "During stream capture, this function results in the
     * creation of an allocation node"), which the plain path, taken while no capture is live,
     * would count as memory. */
    atomic_fetch_add(&shim_gate, SHIM_GATE_CAPTURE);
    /* A THREAD_LOCAL capture prohibits only its own thread's calls, and this thread is not in
     * one of the shim's now: counted once recorded. */
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL)
        return;
    atomic_fetch_add_explicit(&capture_global, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&capture_unsafe_inflight, memory_order_seq_cst) == 0)
        return;
    uint64_t until = shim_clock_ns(CLOCK_MONOTONIC) + 5000000000ull;
    while (atomic_load_explicit(&capture_unsafe_inflight, memory_order_seq_cst) != 0) {
        if (shim_clock_ns(CLOCK_MONOTONIC) > until) {
            LOG_ONCE(CUSHIM_LOG_WARN, "a capture began while one of cushim's own pinned-memory "
                     "calls had run for 5 s: not waited for any longer");
            return;
        }
        sched_yield();
    }
}

static bool own_strict_fn(struct shim_entry *e, void *arg)
{
    return e->ctx == *(uint64_t *)arg && e->kind == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
}

bool capture_own_strict_live(void)
{
    uint64_t me = tc.id;
    return me && cap_for_each(own_strict_fn, &me) != 0;
}

static bool capture_begun(CUstream stream, bool per_thread, CUstreamCaptureMode mode);

void capture_begin_done(CUresult r, CUstream stream, bool per_thread, CUstreamCaptureMode mode)
{
    bool recorded = r == CUDA_SUCCESS && atomic_load_explicit(&shim.run, memory_order_relaxed) != SHIM_OFF &&
                    capture_begun(stream, per_thread, mode);
    if (!recorded && mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
        atomic_fetch_sub_explicit(&capture_global, 1, memory_order_seq_cst);
    else if (recorded && mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        atomic_fetch_add_explicit(&capture_thread_local, 1, memory_order_seq_cst);
    /* The announce's count, now that the capture's own is in (capture_begun) or not needed. */
    atomic_fetch_sub(&shim_gate, SHIM_GATE_CAPTURE);
}

/* A capture on a thread's per-thread default stream can only be ended by that thread (no other
 * can name the stream): when the thread exits with ones live, the shim forgets them, or they would
 * count as live for the rest of the process (every later allocation `capture`, offload off). */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static bool exit_key_made;

static void forget(const struct shim_entry *e, void *arg);

/* A capture on one of thread `arg`'s per-thread streams (stream_key). */
static bool on_per_thread_stream_of(const struct shim_entry *e, void *arg)
{
    return (e->key & 1u) && (e->key >> 1) / PT_SLOTS == *(uint64_t *)arg;
}

static void thread_gone(void *value)
{
    uint64_t id = (uint64_t)(uintptr_t)value;
    /* If the thread's were the last captures: the pool reads that were due during them. */
    if (cap_drain_if(on_per_thread_stream_of, forget, &id) && shim_enter()) {
        graph_pool_sample_owed();
        shim_leave();
    }
}

static void make_exit_key(void)
{
    exit_key_made = pthread_key_create(&exit_key, thread_gone) == 0;
}

static void forget_at_thread_exit(void)
{
    pthread_once(&exit_key_once, make_exit_key);
    if (exit_key_made)
        pthread_setspecific(exit_key, (void *)(uintptr_t)tc.id);
}

/* Records a capture begun (its strict count already taken); false if it could not be. */
static bool capture_begun(CUstream stream, bool per_thread, CUstreamCaptureMode mode)
{
    CUcontext ctx = shim_stream_context(stream);
    uint64_t seq = atomic_fetch_add_explicit(&next_seq, 1, memory_order_relaxed) + 1;
    struct shim_entry e = {
        .key = stream_key(stream, per_thread),
        .kind = (uint16_t)mode,
        .ctx = thread_number(),
        .aux = (uint64_t)(uintptr_t)ctx,
        .device = ctx ? shim_context_device(ctx) : -1,
        .refs = (uint32_t)seq,
        .maps = (uint32_t)(seq >> 32),
    };
    struct shim_entry old = {0};
    /* Counted live before the entry can be seen: another thread may end the capture (and count it
     * off) as soon as the entry is in the table, and the count must never go below zero (gate.h). */
    atomic_fetch_add(&shim_gate, SHIM_GATE_CAPTURE);
    int rc = table_put(&shim.captures, &e, &old);
    if (rc < 0) {
        /* No room in the table: an entry of the key there (an end the shim missed) makes room
         * for it, else a spare slot takes it. */
        if (table_take(&shim.captures, e.key, &old))
            rc = table_put_back(&shim.captures, &e, NULL) < 0 ? -1 : 1;
        else
            rc = spare_put(&e, &old);
        if (rc < 0 && old.key == e.key) {
            /* Neither could take it back: the missed capture's count goes with its entry. */
            _Atomic int *c = mode_counter(old.kind);
            if (c)
                atomic_fetch_sub_explicit(c, 1, memory_order_seq_cst);
            atomic_fetch_sub(&shim_gate, SHIM_GATE_CAPTURE);
        }
    }
    if (rc != 0) /* not a new capture: counted once already, or not at all */
        atomic_fetch_sub(&shim_gate, SHIM_GATE_CAPTURE);
    if (rc < 0) {
        shim_note_incomplete(CUSHIM_INCOMPLETE_CAPTURES);
        LOG_ONCE(CUSHIM_LOG_WARN, "out of memory for the capture table and its %d spare slots: a "
                 "capture goes unseen", CAPTURE_SPARES);
        return false; /* no memory: the capture goes unseen */
    }
    if (e.key & 1u) /* the calling thread's per-thread default stream (stream_key) */
        forget_at_thread_exit();
    tc.own_key = e.key;
    tc.own_seq = seq;
    /* A stream cannot begin a capture while capturing (cuda.h, cuStreamBeginCaptureToGraph: "it may
     * only be initiated if the stream is not already in capture mode"): an entry already there is
     * one whose end the shim missed; it is replaced and still counts once. */
    if (rc == 1) {
        LOG_DEBUG("capture begun on stream %p twice", (void *)stream);
        _Atomic int *c = mode_counter(old.kind);
        if (c)
            atomic_fetch_sub_explicit(c, 1, memory_order_seq_cst);
    }
    return true;
}

struct credit {
    uint64_t seq, bytes;
    bool done;
};

static bool credit_fn(struct shim_entry *e, void *arg)
{
    struct credit *c = arg;
    if (entry_seq(e) == c->seq) { /* the same capture, not a later one on the same stream */
        e->size += c->bytes;
        c->done = true;
    }
    return true;
}

static bool credit(uint64_t key, uint64_t seq, uint64_t bytes)
{
    struct credit c = {seq, bytes, false};
    cap_update(key, credit_fn, &c);
    return c.done;
}

struct pick {
    uint64_t me;
    uint64_t mine_key, mine_seq; /* this thread's live capture begun last */
    uint64_t any_key, any_seq;   /* the process's live capture begun last */
};

static bool pick_fn(struct shim_entry *e, void *arg)
{
    struct pick *p = arg;
    uint64_t seq = entry_seq(e);
    if (e->ctx == p->me && seq > p->mine_seq) {
        p->mine_seq = seq;
        p->mine_key = e->key;
    }
    if (seq > p->any_seq) {
        p->any_seq = seq;
        p->any_key = e->key;
    }
    return false;
}

void capture_note_bytes(uint64_t bytes)
{
    /* The calling thread's own innermost live capture, else the one begun last in the process
     * (PyTorch allocates on another thread in relaxed mode while one thread captures). The
     * thread's last-begun capture, when still live, is its innermost: no scan. */
    if (tc.own_key && credit(tc.own_key, tc.own_seq, bytes))
        return;
    /* A capture that ends between the scan and the credit: scan again. */
    for (int tries = 0; tries < 4; tries++) {
        struct pick p = {.me = tc.id};
        cap_for_each(pick_fn, &p);
        uint64_t key = p.mine_key ? p.mine_key : p.any_key;
        uint64_t seq = p.mine_key ? p.mine_seq : p.any_seq;
        if (!key || credit(key, seq, bytes))
            return;
    }
}

/* The counters of a capture that is over (its entry already out of the table). */
static void forget(const struct shim_entry *e, void *arg)
{
    (void)arg;
    _Atomic int *c = mode_counter(e->kind);
    if (c)
        atomic_fetch_sub_explicit(c, 1, memory_order_seq_cst);
    atomic_fetch_sub(&shim_gate, SHIM_GATE_CAPTURE);
}

uint64_t capture_ended(CUstream stream, bool per_thread, int *device)
{
    struct shim_entry e;
    uint64_t key = stream_key(stream, per_thread);
    if (device)
        *device = -1;
    if (!cap_take(key, &e))
        return 0;
    if (tc.own_key == key)
        tc.own_key = 0;
    forget(&e, NULL);
    if (device)
        *device = e.device;
    return e.size;
}

static bool in_context(const struct shim_entry *e, void *arg)
{
    return e->aux == *(uint64_t *)arg;
}

void capture_context_gone(uint64_t ctx)
{
    /* The captures of a context that was torn down ended with it. */
    cap_drain_if(in_context, forget, &ctx);
}

void capture_after_fork_child(void)
{
    atomic_fetch_and(&shim_gate, ~SHIM_GATE_CAPTURES);
    atomic_store(&capture_global, 0);
    atomic_store(&capture_thread_local, 0);
    atomic_store(&capture_unsafe_inflight, 0);
    tc.own_key = 0;
    tc.own_seq = 0;
    atomic_flag_clear(&spares_lock); /* a parent's thread may have held it */
    memset(spares, 0, sizeof spares);
    atomic_store(&spares_used, 0);
}
