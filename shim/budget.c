#include "shim/budget.h"

#include <sched.h>

#include "shim/capture.h"
#include "shim/graph.h"
#include "shim/pools.h"

int budget_any;
_Atomic uint64_t budget_used[CUSHIM_MAX_DEVICES];
_Atomic uint64_t budget_graph[CUSHIM_MAX_DEVICES];
_Atomic unsigned char budget_graph_stale[CUSHIM_MAX_DEVICES];
_Atomic uint64_t budget_pool_idle[CUSHIM_MAX_DEVICES];
_Atomic uint64_t budget_pool_changes[CUSHIM_MAX_DEVICES];
static _Atomic uint64_t pool_changes_read[CUSHIM_MAX_DEVICES]; /* budget_pool_changes at the last read */

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
        atomic_store_explicit(&budget_graph[device], reserve, memory_order_relaxed);
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

void budget_pool_read(int device, uint64_t idle, uint64_t changes)
{
    if ((unsigned)device >= CUSHIM_MAX_DEVICES)
        return;
    /* Two readings racing may publish out of order: an older one leaves its older count, which
     * differs from the changes since, so the next decision reads again. */
    atomic_store_explicit(&budget_pool_idle[device], idle, memory_order_relaxed);
    atomic_store_explicit(&pool_changes_read[device], changes, memory_order_relaxed);
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

bool budget_reserve_limited(int device, uint64_t bytes, uint64_t own_idle)
{
    uint64_t limit = shim.cfg.device_limit[device];
    budget_graph_refresh(device);
    budget_pool_refresh(device, false);
    for (int attempt = 0;; attempt++) {
        uint64_t used = atomic_load_explicit(&budget_used[device], memory_order_relaxed);
        uint64_t held, served;
        do {
            held = budget_held(device, used);
            uint64_t idle = atomic_load_explicit(&budget_pool_idle[device], memory_order_relaxed);
            served = bytes < own_idle ? bytes : own_idle;
            if (served > idle)
                served = idle;
            /* `bytes - served <= limit - held`, never a sum that could wrap (a request near
             * SIZE_MAX, which the driver then refuses). */
            if (held > limit || bytes - served > limit - held)
                break;
            if (atomic_compare_exchange_weak_explicit(&budget_used[device], &used, used + bytes,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                if (served) { /* the reserve that serves it is in use now: taken off the idle */
                    uint64_t idle_now = atomic_load_explicit(&budget_pool_idle[device], memory_order_relaxed);
                    while (!atomic_compare_exchange_weak_explicit(&budget_pool_idle[device], &idle_now,
                                                                  idle_now > served ? idle_now - served : 0,
                                                                  memory_order_relaxed, memory_order_relaxed))
                        ;
                }
                return true;
            }
        } while (1);
        /* Over the limit while the pools' idle reserve counts: a synchronize may have released it
         * since it was read (a release threshold below it); read again once before refusing. */
        if (attempt == 0 && atomic_load_explicit(&budget_pool_idle[device], memory_order_relaxed) &&
            !capture_any_live()) {
            budget_pool_refresh(device, true);
            continue;
        }
        budget_refused(device, bytes, held, limit);
        return false;
    }
}

void budget_after_fork_child(void)
{
    for (unsigned i = 0; i < CUSHIM_MAX_DEVICES; i++) {
        atomic_store(&budget_used[i], 0);
        atomic_store(&budget_graph[i], 0);
        atomic_store(&budget_graph_stale[i], 0);
        atomic_store(&budget_pool_idle[i], 0);
        atomic_store(&budget_pool_changes[i], 0);
        atomic_store(&pool_changes_read[i], 0);
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
    int level = atomic_exchange_explicit(&said, 1, memory_order_relaxed) ? CUSHIM_LOG_DEBUG : CUSHIM_LOG_INFO;
    shim_log(level, "device %d: a request of %llu bytes refused by the budget (CUSHIM_DEVICE_LIMIT): "
             "%llu of its %llu bytes held: %s%s", device, (unsigned long long)bytes, (unsigned long long)held,
             (unsigned long long)limit,
             shim.cfg.spill ? "served from host memory where it can be (CUSHIM_SPILL), else CUDA_ERROR_OUT_OF_MEMORY"
                            : "CUDA_ERROR_OUT_OF_MEMORY",
             level == CUSHIM_LOG_INFO ? " (later refusals at CUSHIM_LOG=debug)" : "");
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
