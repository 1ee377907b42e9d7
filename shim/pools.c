/* Reading the stream-ordered pools' reserve (pools.h). */
#include "shim/pools.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "shim/account.h"
#include "shim/budget.h"
#include "shim/shim.h"

SHIM_TLS uint32_t async_pool_allocs_here;
_Atomic bool pools_lost;
static _Atomic uint64_t last_read_ns[CUSHIM_MAX_DEVICES];
/* Samplers between taking pool handles from the table (or asking for the current pool) and their
 * last driver query: async_pool_sample, async_pool_idle_of. */
static _Atomic int sampling[2];
/* Which of the two counts a sampler joins: async_pool_quiesce flips it and waits for the other to
 * drain, so it waits only for the samplers already in a query, never for ones that keep coming
 * (under a budget each stream-ordered request asks its pool). */
static _Atomic unsigned epoch;
static pthread_mutex_t quiesce_lock = PTHREAD_MUTEX_INITIALIZER; /* one waiter flips at a time */

/* Joins the current epoch's count: returns it, for sampler_leave. */
static unsigned sampler_enter(void)
{
    for (;;) {
        unsigned e = atomic_load(&epoch) & 1u;
        atomic_fetch_add(&sampling[e], 1);
        if ((atomic_load(&epoch) & 1u) == e)
            return e;
        atomic_fetch_sub(&sampling[e], 1); /* flipped meanwhile: join the new one */
    }
}

static void sampler_leave(unsigned e)
{
    atomic_fetch_sub(&sampling[e], 1);
}


#define POOLS_READ 64 /* pool handles copied per pass over the table */

/* One pass's pools of a device: the `skip` first are left (read by earlier passes). */
struct device_pools {
    int device;
    unsigned skip, seen, n;
    uint64_t default_pool; /* the device's default pool, or 0 */
    bool default_seen;
    uint64_t pool[POOLS_READ];
};

/* table_for_each callback (under a shard lock: arithmetic only). */
static bool collect(struct shim_entry *e, void *arg)
{
    struct device_pools *p = arg;
    if (e->device != p->device || e->aux != CUSHIM_KIND_ASYNC)
        return false;
    if (e->key == p->default_pool)
        p->default_seen = true;
    if (p->seen++ >= p->skip && p->n < POOLS_READ)
        p->pool[p->n++] = e->key;
    return false;
}

/* Per device: resets of a pool's high-water mark so far (async_pool_high_restart), the count the
 * _HIGH sums were last set at, and a lock over deciding and writing them (no driver call inside).
 * A reading begun before a reset may hold the old marks: it leaves the _HIGH sums alone, and the
 * first reading begun after it sets them (a review: a flag taken by such a stale reading kept
 * the old mark for good). */
static struct {
    _Atomic uint64_t resets, applied;
    atomic_flag writing;
} highs[CUSHIM_MAX_DEVICES];

void async_pool_high_restart(int device)
{
    for (unsigned d = 0; d < CUSHIM_MAX_DEVICES; d++)
        if (device < 0 || (unsigned)device == d)
            atomic_fetch_add(&highs[d].resets, 1);
}

void async_pool_sample(int device)
{
    static const struct {
        CUmemPool_attribute attr;
        enum cushim_device_stat stat;
        bool high; /* a high-water mark: kept as one (pools.h) */
    } attrs[] = {
        {CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, CUSHIM_DEV_async_pool_reserved_current, false},
        {CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, CUSHIM_DEV_async_pool_reserved_high, true},
        {CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CUSHIM_DEV_async_pool_used_current, false},
        {CU_MEMPOOL_ATTR_USED_MEM_HIGH, CUSHIM_DEV_async_pool_used_high, true},
    };
    __typeof__(&cuMemPoolGetAttribute) get = REAL(cuMemPoolGetAttribute);
    __typeof__(&cuDeviceGetDefaultMemPool) get_default = REAL(cuDeviceGetDefaultMemPool);
    if (!get || device < 0 || device >= (int)CUSHIM_MAX_DEVICES)
        return;
    /* Taken before the driver is asked: a change during the reading makes the budget read again. */
    uint64_t changes = atomic_load_explicit(&budget_pool_changes[device], memory_order_seq_cst);
    uint64_t resets = atomic_load_explicit(&highs[device].resets, memory_order_seq_cst);
    uint64_t async = atomic_load_explicit(&budget_async[device], memory_order_seq_cst);
    CUmemoryPool def = NULL;
    if (!get_default || get_default(&def, device) != CUDA_SUCCESS)
        def = NULL;
    uint64_t sum[sizeof attrs / sizeof attrs[0]] = {0};
    bool all_read = true, default_read = false;
    /* Every pool of the device, POOLS_READ at a time (the budget counts them all); the default
     * pool last, unless the table holds it. */
    struct device_pools p = {.device = device, .default_pool = (uint64_t)(uintptr_t)def};
    do {
        p.seen = p.n = 0;
        unsigned ep = sampler_enter();
        table_for_each(&shim.pools, collect, &p);
        if (p.n < POOLS_READ && def && !p.default_seen && !default_read) {
            p.pool[p.n++] = (uint64_t)(uintptr_t)def;
            default_read = true;
        }
        for (unsigned i = 0; i < p.n; i++)
            for (unsigned a = 0; a < sizeof attrs / sizeof attrs[0]; a++) {
                cuuint64_t v = 0;
                /* No pool is destroyed while we query it (async_pool_quiesce). */
                if (get((CUmemoryPool)(uintptr_t)p.pool[i], attrs[a].attr, &v) == CUDA_SUCCESS)
                    sum[a] += v;
                else
                    all_read = false;
            }
        sampler_leave(ep);
        p.skip += POOLS_READ;
    } while (p.n == POOLS_READ && p.skip < 1u << 20);
    /* A reading the driver did not give in full is no reading: the last one stands, and so does
     * its time (sampled_ns would date zeros as the driver's figures). */
    if (!all_read) {
        LOG_ONCE(CUSHIM_LOG_WARN, "cuMemPoolGetAttribute failed for a pool of device %d: its pools' "
                 "figures are left as last read", device);
        return;
    }
    shim_spin_take(&highs[device].writing);
    /* A reset since this reading began: its marks may predate it, the high sums are left. */
    bool stale = atomic_load_explicit(&highs[device].resets, memory_order_seq_cst) != resets;
    bool restart = !stale && atomic_load_explicit(&highs[device].applied, memory_order_relaxed) != resets;
    if (restart)
        atomic_store_explicit(&highs[device].applied, resets, memory_order_relaxed);
    for (unsigned a = 0; a < sizeof attrs / sizeof attrs[0]; a++) {
        if (attrs[a].high && stale)
            continue;
        if (attrs[a].high && !restart)
            account_device_stat_raise(device, attrs[a].stat, sum[a]);
        else
            account_device_stat_set(device, attrs[a].stat, sum[a]);
    }
    shim_spin_drop(&highs[device].writing);
    /* What they reserve (sum[0]) and the reserve of pools in their destroy, which this reading
     * may have missed (budget.h budget_pool_buried: added before such a pool leaves the table,
     * read here after the walks), less the budget's stream-ordered bytes. One read both here
     * and in the table counts it twice: too much idle, refusing rather than over-granting, and
     * the destroy's bumps drop the reading. */
    if (budget_any) {
        uint64_t buried = atomic_load_explicit(&budget_pool_unread[device], memory_order_seq_cst)
                              ? UINT64_MAX
                              : atomic_load_explicit(&budget_pool_buried[device], memory_order_seq_cst);
        budget_pool_read(device, sum[0] > UINT64_MAX - buried ? UINT64_MAX : sum[0] + buried, changes, async);
    }
    account_device_stat_set(device, CUSHIM_DEV_async_pool_sampled_ns, shim_clock_ns(CLOCK_REALTIME));
}

uint64_t async_pool_idle_of(CUmemoryPool *poolp, int device)
{
    CUmemoryPool pool = *poolp;
    __typeof__(&cuMemPoolGetAttribute) get = REAL(cuMemPoolGetAttribute);
    __typeof__(&cuDeviceGetMemPool) current = REAL(cuDeviceGetMemPool);
    if (!get)
        return 0;
    cuuint64_t reserved = 0, used = 0;
    /* Counted as a sampler before the current pool is asked: a destroy of it waits until the
     * queries are over (async_pool_quiesce). A pool the program names is its own to keep alive
     * during its request. */
    unsigned ep = sampler_enter();
    bool ok = (pool || (current && current(&pool, device) == CUDA_SUCCESS && pool)) &&
              get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS &&
              get(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS;
    sampler_leave(ep);
    *poolp = pool;
    return ok && reserved > used ? reserved - used : 0;
}

void pools_note_lost(void)
{
    atomic_store_explicit(&pools_lost, true, memory_order_relaxed);
    shim_note_incomplete(CUSHIM_INCOMPLETE_POOLS);
    LOG_ONCE(CUSHIM_LOG_WARN, "a memory pool could not be recorded (out of memory for the shim's "
             "tables): requests from it pass through uncounted and outside any device limit, and "
             "the pools' figures leave out its reserve");
}

void async_pool_after_fork_child(void)
{
    atomic_store(&pools_lost, false);
    atomic_store(&sampling[0], 0);
    atomic_store(&sampling[1], 0);
    atomic_store(&epoch, 0);
    pthread_mutex_init(&quiesce_lock, NULL); /* a parent's waiter may have held it */
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++) {
        atomic_store(&last_read_ns[i], 0);
        atomic_flag_clear(&highs[i].writing); /* a parent's thread may have been writing */
    }
}

void async_pool_quiesce(void)
{
    /* Samplers that join after the flip took their handles after the pool left the table (or
     * ask for a current pool, which a destroyed pool cannot be: cuda.h cuMemPoolDestroy); those
     * of the old epoch are waited for, and two flips never overlap. */
    pthread_mutex_lock(&quiesce_lock);
    unsigned old = atomic_fetch_add(&epoch, 1) & 1u;
    while (atomic_load(&sampling[old]) != 0)
        sched_yield();
    pthread_mutex_unlock(&quiesce_lock);
}

void async_pool_sample_slow(int device)
{
    if ((unsigned)device >= CUSHIM_MAX_DEVICES)
        return;
    uint64_t now = shim_clock_ns(CLOCK_MONOTONIC_COARSE);
    uint64_t last = atomic_load_explicit(&last_read_ns[device], memory_order_relaxed);
    if (last && now - last < 100000000ull)
        return;
    if (atomic_compare_exchange_strong(&last_read_ns[device], &last, now)) /* else another thread reads */
        async_pool_sample(device);
}

void async_pool_sample_all(void)
{
    struct cushim_segment *seg = shim.seg;
    uint32_t n = seg ? atomic_load(&seg->h.device_count) : 0;
    for (uint32_t d = 0; d < n && d < CUSHIM_MAX_DEVICES; d++)
        if (atomic_load(&seg->devices[d].state) != 0)
            async_pool_sample((int)d);
}
