/* Phases (issue 4): `run` or `compile`, process-wide, kept in the segment header so the CLI shows
 * it. Changed by cushim_set_phase / push / pop (api.c), by `cushim phase PID` through the control
 * area (applied at the next allocation), and by CUSHIM_COMPILE_END=graph-launch. When the compile
 * phase ends, offloaded allocations made during it that are still alive stay in host memory: they
 * are counted as resident (count and bytes) until freed. */
#include <pthread.h>

#include "common/snapshot.h"
#include "shim/offload.h"
#include "shim/track.h"

/* arg: the bytes marked so far (uint64_t). */
static bool mark_resident(struct shim_entry *e, void *arg)
{
    if (e->kind != CUSHIM_KIND_OFFLOADED || !(e->flags & SHIM_F_COMPILE) || (e->flags & SHIM_F_RESIDENT))
        return false;
    *(uint64_t *)arg += e->size;
    e->flags |= SHIM_F_RESIDENT;
    account_device_stat_add(e->device, CUSHIM_DEV_resident_offloaded_count, 1);
    account_device_stat_add(e->device, CUSHIM_DEV_resident_offloaded_bytes, (int64_t)e->size);
    return true;
}

/* A phase's peaks start at what is in use when it begins: memory allocated before and alive
 * during the phase counts in it (account.h, account_phase_compile, for the allocations racing
 * with the switch). */
static void start_phase_peaks(struct cushim_segment *seg, int phase)
{
    bool compile = phase == CUSHIM_PHASE_COMPILE;
    for (unsigned d = 0; d < CUSHIM_MAX_DEVICES; d++) {
        struct cushim_device_record *r = &seg->devices[d];
        if (!atomic_load_explicit(&r->state, memory_order_acquire))
            continue;
        cushim_seq_write_begin(&r->seq_begin);
        raise_peak(&r->dev[compile ? CUSHIM_DEV_compile_peak : CUSHIM_DEV_run_peak],
                   atomic_load(&r->dev[CUSHIM_DEV_total_current]));
        raise_peak(&r->dev[compile ? CUSHIM_DEV_compile_offloaded_peak : CUSHIM_DEV_run_offloaded_peak],
                   atomic_load(&r->kinds[CUSHIM_KIND_OFFLOADED].v[CUSHIM_STAT_current_bytes]));
        cushim_seq_write_end(&r->seq_end);
    }
}

/* Every phase change is made under this lock, so that taking a `cushim phase` request and
 * applying it is one step against the program's own changes: a request the program's newer call
 * dropped (phase_set_own) is never applied after that call. Never held across a driver call;
 * only the slow paths take it (a request waiting, a phase call, the compile phase's end). */
static pthread_mutex_t change_lock = PTHREAD_MUTEX_INITIALIZER;

/* The scopes of cushim_push_phase / cushim_pop_phase: one stack for the process, like the
 * phase itself (scopes opened on several threads close in last-in, first-out order whatever the
 * thread); under change_lock. */
#define PHASE_STACK 64
static int phase_stack[PHASE_STACK];
static int phase_depth;

/* fork: the lock is held across it (no thread is changing the phase then), so the child never
 * inherits it taken; the child, a new process with its own phase (CUSHIM_PHASE at its first
 * CUDA activity), starts with an empty stack. */
static void change_fork_prepare(void)
{
    pthread_mutex_lock(&change_lock);
}

static void change_fork_parent(void)
{
    pthread_mutex_unlock(&change_lock);
}

static void change_fork_child(void)
{
    phase_depth = 0;
    pthread_mutex_unlock(&change_lock); /* taken by this thread in prepare */
}

__attribute__((constructor)) static void change_fork_handlers(void)
{
    pthread_atfork(change_fork_prepare, change_fork_parent, change_fork_child);
}

static int set_locked(struct cushim_segment *seg, int phase)
{
    int old = phase_of((uint32_t)atomic_exchange(&seg->h.phase, (uint32_t)phase));
    if (old != phase)
        start_phase_peaks(seg, phase);
    if (old == CUSHIM_PHASE_COMPILE && phase == CUSHIM_PHASE_RUN) {
        /* A warning (a fresh-user trial: at info, a run served its weights from host memory
         * without a word): the run phase reads them across the bus. */
        uint64_t bytes = 0;
        /* As inside a CUDA call while the walk holds shard locks: a signal handler's exit() here
         * (cushim_set_phase is called at depth 0) must not walk the tables (live_at_exit.c) nor count
         * the runtime's teardown, which would wait on a lock this thread holds. */
        int depth = shim_depth;
        shim_depth = 1;
        unsigned n = table_for_each(&shim.ptrs, mark_resident, &bytes);
        shim_depth = depth;
        if (n)
            LOG_WARN("compile phase ended with %u offloaded allocation%s alive (%llu bytes): they stay in "
                     "pinned host memory for the rest of the run (README, \"Compiling a model on a card "
                     "that can only just run it\": allocate weights before the compile phase, or raise "
                     "CUSHIM_OFFLOAD_MIN)", n, n == 1 ? "" : "s", (unsigned long long)bytes);
    }
    if (old != phase)
        LOG_INFO("phase %s -> %s", cushim_phase_name((uint32_t)old), cushim_phase_name((uint32_t)phase));
    return old;
}

int phase_set(int phase)
{
    struct cushim_segment *seg = shim.seg;
    if (!seg || phase < 0 || phase >= CUSHIM_PHASE_COUNT)
        return -1;
    pthread_mutex_lock(&change_lock);
    int old = set_locked(seg, phase);
    pthread_mutex_unlock(&change_lock);
    return old;
}

/* The program's own change: a `cushim phase` request not applied yet was made before it and is
 * dropped (applied at the next allocation, it would undo the program's newer choice). */
static int set_own_locked(struct cushim_segment *seg, int phase)
{
    atomic_store(&seg->control.phase_request, 0);
    return set_locked(seg, phase);
}

int phase_set_own(int phase)
{
    struct cushim_segment *seg = shim.seg;
    if (!seg || phase < 0 || phase >= CUSHIM_PHASE_COUNT)
        return -1;
    pthread_mutex_lock(&change_lock);
    int old = set_own_locked(seg, phase);
    pthread_mutex_unlock(&change_lock);
    return old;
}

int phase_push_own(int phase)
{
    struct cushim_segment *seg = shim.seg;
    int rc = -1;
    if (!seg || phase < 0 || phase >= CUSHIM_PHASE_COUNT)
        return -1;
    pthread_mutex_lock(&change_lock);
    if (phase_depth < PHASE_STACK) {
        phase_stack[phase_depth++] = set_own_locked(seg, phase);
        rc = 0;
    }
    pthread_mutex_unlock(&change_lock);
    return rc;
}

int phase_pop_own(void)
{
    struct cushim_segment *seg = shim.seg;
    int restored = -1;
    if (!seg)
        return -1;
    pthread_mutex_lock(&change_lock);
    if (phase_depth > 0) {
        restored = phase_stack[--phase_depth];
        set_own_locked(seg, restored);
    }
    pthread_mutex_unlock(&change_lock);
    return restored;
}

bool phase_pushed(void)
{
    pthread_mutex_lock(&change_lock);
    bool any = phase_depth > 0;
    pthread_mutex_unlock(&change_lock);
    return any;
}

bool phase_offloaded_put(struct shim_entry *e)
{
    struct cushim_segment *seg = shim.seg;
    account_record(e->device); /* made now if need be: it may ask the driver, never under the lock */
    pthread_mutex_lock(&change_lock);
    bool compile = atomic_load(&seg->h.phase) == CUSHIM_PHASE_COMPILE;
    if ((e->flags & SHIM_F_SPILLED) && compile)
        e->flags |= SHIM_F_COMPILE;
    if ((e->flags & SHIM_F_COMPILE) && !compile)
        e->flags |= SHIM_F_RESIDENT; /* mark_resident ran before it was in the table */
    /* A live entry at this address: freed where the shim could not see it yet (a teardown on
     * another thread, whose entries are dropped after the driver's call, gave the address back
     * first): counted freed now, as track_put does (a stress trial: it stayed counted); an
     * offloaded range of the old one at this base is this block's now (ranges_add). */
    struct shim_entry old;
    int rc = table_put(&shim.ptrs, e, &old);
    bool put = rc >= 0;
    if (rc > 0)
        track_free_other(&old);
    if (put) {
        if (e->flags & SHIM_F_RESIDENT) {
            account_device_stat_add(e->device, CUSHIM_DEV_resident_offloaded_count, 1);
            account_device_stat_add(e->device, CUSHIM_DEV_resident_offloaded_bytes, (int64_t)e->size);
        }
        /* SHIM_F_PLACED: the caller took any request (the lock is held: no poll under it). */
        account_alloc(e->device, CUSHIM_KIND_OFFLOADED, e->size, e->flags | SHIM_F_PLACED);
    }
    pthread_mutex_unlock(&change_lock);
    return put;
}

void phase_apply_request_slow(void)
{
    struct cushim_segment *seg = shim.seg;
    pthread_mutex_lock(&change_lock);
    uint32_t req = atomic_exchange(&seg->control.phase_request, 0);
    if (req >= 1 && req <= CUSHIM_PHASE_COUNT)
        set_locked(seg, (int)req - 1);
    pthread_mutex_unlock(&change_lock);
}
