#include "shim/budget.h"

#include <sched.h>

#include "common/units.h"
#include "shim/capture.h"
#include "shim/graph.h"
#include "shim/pools.h"

int budget_any;
_Atomic uint64_t budget_used[CUSHIM_MAX_DEVICES];
_Atomic uint64_t budget_graph[CUSHIM_MAX_DEVICES];
_Atomic unsigned char budget_graph_stale[CUSHIM_MAX_DEVICES];
_Atomic uint64_t budget_pool_idle[CUSHIM_MAX_DEVICES];
_Atomic uint64_t budget_pool_changes[CUSHIM_MAX_DEVICES];
_Atomic uint64_t budget_async[CUSHIM_MAX_DEVICES];
_Atomic uint64_t budget_pool_buried[CUSHIM_MAX_DEVICES];
_Atomic uint32_t budget_pool_unread[CUSHIM_MAX_DEVICES];
static _Atomic uint64_t pool_changes_read[CUSHIM_MAX_DEVICES]; /* budget_pool_changes at the last read */
/* The idle reserve this thread's last reading of a device's pools found, published or not
 * (budget_pool_read): a refusal's second look decides with it (budget_reserve_limited). */
static SHIM_TLS struct {
    int device; /* -1: none */
    uint64_t idle;
} own_reading = {-1, 0};
/* Idle bytes claimed by stream-ordered requests in flight (budget_reserve_limited's *served), by
 * pool: a pool's claims are in the bucket its handle hashes to (pools sharing a bucket are
 * counted as one: a request may then be refused, never served twice). */
#define CLAIM_BUCKETS 16u
_Static_assert(CLAIM_BUCKETS == 1u << 4, "claims_of takes the hash's top 4 bits");
static _Atomic uint64_t pool_claimed[CUSHIM_MAX_DEVICES][CLAIM_BUCKETS];

static _Atomic uint64_t *claims_of(int device, uint64_t pool)
{
    uint64_t h = pool * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing: handles are aligned pointers */
    return &pool_claimed[device][h >> 60];
}


static _Atomic uint64_t launches_read[CUSHIM_MAX_DEVICES]; /* the process's launches at the device's last read */

/* The process's graph launches so far, on every device: a launch counts on the device its graph
 * was instantiated on, but attaches memory on the device(s) of its allocation nodes' pools, which
 * may be any (graph.c). Counted here, on the budget's path, so the launch path adds nothing. */
uint64_t budget_graph_launches(void)
{
    struct cushim_segment *seg = shim.seg;
    if (!seg)
        return 0;
    uint64_t sum = 0;
    uint32_t n = atomic_load(&seg->h.device_count);
    for (uint32_t d = 0; d < n && d < CUSHIM_MAX_DEVICES; d++)
        if (atomic_load(&seg->devices[d].state) != 0)
            sum += atomic_load(&seg->devices[d].dev[CUSHIM_DEV_graph_launches]);
    return sum;
}

/* The (launches, reserve) pair of each device is published as one, by the reading that began
 * last: two readings racing (a forced one beside a launch's, a trim's beside cuMemGetInfo's) must
 * not leave an older reserve under a newer launch count, which no refresh would look at again
 * until the next launch. */
static atomic_flag read_lock[CUSHIM_MAX_DEVICES];
static _Atomic uint64_t tickets[CUSHIM_MAX_DEVICES];   /* handed out */
static _Atomic uint64_t published[CUSHIM_MAX_DEVICES]; /* the ticket of the reading kept */

uint64_t budget_graph_ticket(int device)
{
    return atomic_fetch_add(&tickets[device], 1) + 1;
}

void budget_graph_read(int device, uint64_t reserve, uint64_t launches, uint64_t ticket)
{
    while (atomic_flag_test_and_set_explicit(&read_lock[device], memory_order_acquire))
        sched_yield();
    if (ticket == 0 || ticket > atomic_load_explicit(&published[device], memory_order_relaxed)) {
        atomic_store_explicit(&published[device], ticket, memory_order_relaxed);
        atomic_store(&launches_read[device], launches);
        atomic_store(&budget_graph_stale[device], 0);
        uint64_t old = atomic_exchange_explicit(&budget_graph[device], reserve, memory_order_relaxed);
        budget_mirror(device, reserve - old);
    }
    atomic_flag_clear_explicit(&read_lock[device], memory_order_release);
}

void budget_graph_refresh(int device)
{
    if ((unsigned)device >= CUSHIM_MAX_DEVICES)
        return;
    /* No call the capture prohibits while one is live: the last reading stands until it ends. */
    if ((atomic_load_explicit(&budget_graph_stale[device], memory_order_relaxed) ||
         budget_graph_launches() != atomic_load_explicit(&launches_read[device], memory_order_relaxed)) &&
        !capture_any_live())
        graph_pool_sample(device, true); /* calls budget_graph_read */
}

void budget_pool_read(int device, uint64_t reserved, uint64_t changes, uint64_t async)
{
    if ((unsigned)device >= CUSHIM_MAX_DEVICES)
        return;
    uint64_t idle = reserved > async ? reserved - async : 0;
    own_reading.device = device;
    own_reading.idle = idle;
    /* Published only if no stream-ordered event came since the reading began: an event bumps the
     * count before it changes the idle estimate (budget_pool_changed), so a reading is either
     * in place before the event's change or not published at all. Not published, the estimate
     * kept by the events stands, and the next decision reads again. */
    uint64_t cur = atomic_load_explicit(&budget_pool_idle[device], memory_order_seq_cst);
    do {
        if (atomic_load_explicit(&budget_pool_changes[device], memory_order_seq_cst) != changes)
            return;
    } while (!atomic_compare_exchange_weak_explicit(&budget_pool_idle[device], &cur, idle, memory_order_seq_cst,
                                                    memory_order_seq_cst));
    budget_mirror(device, idle - cur);
    atomic_store_explicit(&pool_changes_read[device], changes, memory_order_seq_cst);
}

void budget_pool_refresh(int device, bool force)
{
    if ((unsigned)device >= CUSHIM_MAX_DEVICES || capture_any_live())
        return;
    if (!force && atomic_load_explicit(&budget_pool_changes[device], memory_order_relaxed) ==
                      atomic_load_explicit(&pool_changes_read[device], memory_order_relaxed))
        return;
    async_pool_sample(device); /* calls budget_pool_read */
}

/* Claims `want` idle bytes of `pool` (all of them, or none: returns what it claimed), whose own
 * idle reserve was read as `own`, against the claims of other requests in flight on it. The reserve is asked again once the claim is made: a
 * request that was served, and gave its claim back once its real call was done, between our first
 * reading and our claim took bytes that reading still counted (its claim is given back only after
 * the driver's figures show its allocation, so the second reading does). */
static uint64_t claim_idle(int device, uint64_t pool, uint64_t want, uint64_t own)
{
    _Atomic uint64_t *c = claims_of(device, pool);
    uint64_t claimed = atomic_load_explicit(c, memory_order_relaxed), take;
    /* All or nothing: a pool serves a request from one free stretch of its reserve, or grows by
     * the whole request (part of it cannot come from the reserve). */
    do {
        uint64_t avail = own > claimed ? own - claimed : 0;
        take = want;
        if (!take || avail < want)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(c, &claimed, claimed + take, memory_order_seq_cst,
                                                    memory_order_seq_cst));
    /* `claimed`: the others' claims when ours was made (their bytes still idle in the driver's
     * figures while their calls run). No query once a capture began: not served. */
    if (capture_any_live()) {
        budget_sub_saturating(c, take);
        return 0;
    }
    CUmemoryPool handle = (CUmemoryPool)(uintptr_t)pool;
    uint64_t fresh = async_pool_idle_of(&handle, device);
    uint64_t avail = fresh > claimed ? fresh - claimed : 0;
    if (avail < take) {
        budget_sub_saturating(c, take);
        take = 0;
    }
    return take;
}

bool budget_held_within(int device, uint64_t bytes)
{
    if (!budget_limited(device))
        return true;
    uint64_t limit = shim.cfg.device_limit[device];
    uint64_t held = budget_held(device, atomic_load_explicit(&budget_used[device], memory_order_relaxed));
    if (held <= limit)
        return true;
    budget_refused(device, bytes, held, limit);
    return false;
}

void budget_pool_served_done(int device, uint64_t pool, uint64_t served, bool failed)
{
    if (!served || (unsigned)device >= CUSHIM_MAX_DEVICES)
        return;
    budget_sub_saturating(claims_of(device, pool), served);
    if (failed) { /* the pool did not use them: out of the stream-ordered bytes, back to the idle */
        budget_async_sub(device, served);
        budget_pool_changed(device, served);
    }
}

bool budget_reserve_limited(int device, uint64_t bytes, uint64_t own_idle, uint64_t pool, uint64_t *served_out,
                            bool say)
{
    uint64_t limit = shim.cfg.device_limit[device];
    budget_graph_refresh(device);
    budget_pool_refresh(device, false);
    *served_out = 0;
    /* A refusal's second look: the pools read by this thread after `used_before` was read
     * (own_reading, `seen`). Its idle reserve may be lower than the published estimate, which a
     * reading published just before a stream-ordered event's change over-counts until a later
     * reading is published, and another thread's stream of such events can keep every reading
     * from being published (a trial: a cudaMalloc beside a served cudaMallocAsync loop refused up
     * to 1,742 times of 20,000 under a budget it fitted). Used only while no stream-ordered event
     * has come since before the reading (`changes_before`: a free into a pool, the only way the
     * idle reserve grows, bumps the count, and so does a pool's destroy before its call, whose
     * allocations leave the stream-ordered bytes only after it) and the bytes in use are still
     * `used_before`, which the compare-and-swap below commits from: a free whose bytes the
     * reading found in use still holds them in budget_used until after its bump. Both, for an ABA of budget_used alone (a
     * pool free's release and another thread's cudaMalloc of as many bytes between the reading
     * and the decision) would pair the reading's idle, without the freed bytes, with bytes in
     * use without them either. */
    bool second_look = false;
    uint64_t used_before = 0, changes_before = 0, seen = 0;
    for (int attempt = 0;; attempt++) {
        uint64_t idle = atomic_load_explicit(&budget_pool_idle[device], memory_order_relaxed);
        uint64_t served = own_idle && idle >= bytes ? claim_idle(device, pool, bytes, own_idle) : 0;
        uint64_t used = atomic_load_explicit(&budget_used[device], memory_order_relaxed), held;
        bool fits, by_mine;
        do {
            uint64_t pub_idle = atomic_load_explicit(&budget_pool_idle[device], memory_order_relaxed);
            by_mine = second_look && !served && seen < pub_idle && used == used_before &&
                      atomic_load_explicit(&budget_pool_changes[device], memory_order_seq_cst) == changes_before;
            held = budget_held_idle(device, used, by_mine ? seen : pub_idle);
            /* `bytes - served <= limit - held`, never a sum that could wrap (a request near
             * SIZE_MAX, which the driver then refuses). A request that grows nothing (its pool's
             * idle reserve serves it, or 0 bytes, which the driver refuses with its own code)
             * fits even when held is past the limit, as long as the bytes in use stay within it:
             * a pool grows by whole chunks, which can take held past it (a fresh-user trial:
             * every later request was refused), but the device total never goes past the
             * limit (a stress trial: served requests took it 20 MiB past a 256 MiB budget).
             * That bound holds for every request, a served one too: held is read again here,
             * after the claim (a driver query), and another thread may have taken the idle
             * reserve out of it meanwhile (a served request, a trim's reading), so held within
             * the limit no longer means used + bytes within it (a stress trial: 8 MiB served
             * with idle read as 8 MiB, then 0, took the total to the limit + 512 B;
             * offload_prog served_idle_taken). */
            fits = used <= limit && bytes <= limit - used &&
                   (bytes == served || (held <= limit && bytes - served <= limit - held));
        } while (fits && !atomic_compare_exchange_weak_explicit(&budget_used[device], &used, used + bytes,
                                                                memory_order_seq_cst, memory_order_relaxed));
        /* Decided by this thread's reading: a stream-ordered event between that decision and
         * the commit (a free's bump, its release and another thread's allocation of as many
         * bytes, the commit's value then the same) could pair the reading with bytes in use
         * that no longer hold what it left out: taken back, decided again without it. */
        if (fits && by_mine &&
            atomic_load_explicit(&budget_pool_changes[device], memory_order_seq_cst) != changes_before) {
            budget_sub_saturating(&budget_used[device], bytes);
            second_look = false;
            continue;
        }
        if (fits) {
            budget_mirror(device, bytes);
            /* The reserve that serves it is in use now: in the stream-ordered bytes (its pool's
             * reserve does not grow, so a reading of the pools during its call takes them off the
             * reserve; counted after the call, as a growing request's are, a reading then found
             * them idle as well as in use and published held twice over: a trial's cudaMalloc
             * beside a served cudaMallocAsync loop was refused thousands of times under a budget
             * it fitted), and taken off the idle (after the count, as every change of the
             * estimate). In that order: count, idle, then budget_async, an input of the reading
             * (async_pool_sample takes the count, then budget_async). A reading that took
             * budget_async with the served bytes in it took them off the reserve itself, so it
             * must not publish before the idle change that takes them off again: with
             * budget_async raised first, a reading that took the count before the bump (or
             * after it, before the idle change) and published before the idle change had them
             * taken off twice, the idle estimate low by `served`, and a cudaMalloc was granted
             * past the limit (a stress trial with a stall injected before the idle change: a
             * 73 MiB cudaMalloc beside a 128 MiB pool serving 64 MiB under a 200 MiB budget,
             * granted 28 times of 20,000). Raised last, a reading that misses it finds the
             * served bytes idle (held high by them: conservative), and the count is bumped again
             * after it, so that the next decision reads again rather than wait for the call's
             * end. */
            if (served) {
                atomic_fetch_add_explicit(&budget_pool_changes[device], 1, memory_order_seq_cst);
                budget_mirror(device, 0 - budget_sub_saturating(&budget_pool_idle[device], served));
                atomic_fetch_add_explicit(&budget_async[device], served, memory_order_seq_cst);
                atomic_fetch_add_explicit(&budget_pool_changes[device], 1, memory_order_seq_cst);
            }
            *served_out = served;
            return true;
        }
        if (served)
            budget_sub_saturating(claims_of(device, pool), served);
        /* Over the limit while the pools' idle reserve counts: a synchronize may have released it
         * since it was read (a release threshold below it, which no event of ours shows); read
         * again before refusing, each refusal (a program that synchronizes and retries after
         * out-of-memory must find what the synchronize released), up to three times: a reading
         * another thread's stream-ordered event overtook is not published. */
        if (attempt < 3 && atomic_load_explicit(&budget_pool_idle[device], memory_order_relaxed) &&
            !capture_any_live()) {
            changes_before = atomic_load_explicit(&budget_pool_changes[device], memory_order_seq_cst);
            used_before = atomic_load_explicit(&budget_used[device], memory_order_seq_cst);
            own_reading.device = -1;
            budget_pool_refresh(device, true); /* the request's own pool's reserve is capped by it too */
            second_look = own_reading.device == device;
            seen = own_reading.idle;
            continue;
        }
        if (say)
            budget_refused(device, bytes, held, limit);
        return false;
    }
}

void budget_say_refused(int device, uint64_t bytes)
{
    if (!budget_limited(device))
        return;
    budget_refused(device, bytes, budget_held(device, atomic_load_explicit(&budget_used[device], memory_order_relaxed)),
                   shim.cfg.device_limit[device]);
}

void budget_context_gone(void)
{
    if (!budget_any)
        return;
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++) {
        if (!shim.cfg.device_limit[i])
            continue;
        atomic_store(&budget_graph_stale[i], 1);
        atomic_fetch_add_explicit(&budget_pool_changes[i], 1, memory_order_seq_cst);
    }
}

void budget_after_fork_child(void)
{
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++) {
        atomic_store(&budget_pool_buried[i], 0); /* a parent's thread may have been destroying one */
        atomic_store(&budget_pool_unread[i], 0);
        atomic_store(&budget_used[i], 0);
        atomic_store(&budget_graph[i], 0);
        atomic_store(&budget_graph_stale[i], 0);
        atomic_store(&budget_pool_idle[i], 0);
        atomic_store(&budget_pool_changes[i], 0);
        atomic_store(&pool_changes_read[i], 0);
        atomic_store(&budget_async[i], 0);
        for (unsigned b = 0; b < CLAIM_BUCKETS; b++)
            atomic_store(&pool_claimed[i][b], 0);
        atomic_store(&launches_read[i], 0);
        atomic_store(&tickets[i], 0);
        atomic_store(&published[i], 0);
        atomic_flag_clear(&read_lock[i]);
    }
}

void budget_refused(int device, uint64_t bytes, uint64_t held, uint64_t limit)
{
    account_device_stat_add(device, CUSHIM_DEV_limit_refused, 1);
    static _Atomic int said;
    /* The first at warn, the default level: a program's out-of-memory error with no word of the
     * budget behind it misleads (a bad-input trial: HAMi users expect the line). */
    int level = atomic_exchange_explicit(&said, 1, memory_order_relaxed) ? CUSHIM_LOG_DEBUG : CUSHIM_LOG_WARN;
    if (!shim_log_enabled(level))
        return;
    /* In the units of every other figure, with the bytes of the request (a fresh-user trial: bytes
     * alone, and no next step). */
    char b[32], h[32], l[32];
    cushim_format_bytes(bytes, b, sizeof b);
    cushim_format_bytes(held, h, sizeof h);
    cushim_format_bytes(limit, l, sizeof l);
    shim_log(level, "device %d: a request of %s (%llu byte%s) refused by the device limit (CUSHIM_DEVICE_LIMIT): "
             "%s of its %s held: %s%s", device, b, (unsigned long long)bytes, bytes == 1 ? "" : "s", h, l,
             shim.cfg.spill ? "served from host memory where it can be (CUSHIM_SPILL), else CUDA_ERROR_OUT_OF_MEMORY"
                            : "CUDA_ERROR_OUT_OF_MEMORY (CUSHIM_SPILL=on tries pinned host memory instead)",
             level == CUSHIM_LOG_WARN ? " (later refusals at CUSHIM_LOG=debug)" : "");
}

void budget_mem_info(int device, size_t *free_bytes, size_t *total_bytes)
{
    if (!budget_any || (unsigned)device >= CUSHIM_MAX_DEVICES || !shim.cfg.device_limit[device])
        return;
    /* A budget above the device's memory is the device's memory. */
    uint64_t limit = shim.cfg.device_limit[device];
    if (total_bytes && *total_bytes < limit)
        limit = *total_bytes;
    budget_graph_refresh(device);
    budget_pool_refresh(device, false);
    uint64_t used = budget_held(device, atomic_load_explicit(&budget_used[device], memory_order_relaxed));
    uint64_t left = used < limit ? limit - used : 0;
    if (free_bytes && *free_bytes > left)
        *free_bytes = (size_t)left;
    if (total_bytes)
        *total_bytes = (size_t)limit;
}
