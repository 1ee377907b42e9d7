#include "common/peaks.h"

#include <time.h>

#include "common/seqlock.h"

/* Sets *peak to *current; returns the peak it replaced. */
static uint64_t reset_one(_Atomic uint64_t *peak, _Atomic uint64_t *current)
{
    uint64_t p = atomic_load_explicit(peak, memory_order_seq_cst);
    uint64_t c = atomic_load_explicit(current, memory_order_seq_cst);
    while (!atomic_compare_exchange_weak_explicit(peak, &p, c, memory_order_seq_cst,
                                                  memory_order_seq_cst))
        c = atomic_load_explicit(current, memory_order_seq_cst);
    uint64_t replaced = p;
    /* An allocation that added to current before our swap but raised the peak before it too
     * would leave peak < current: raise again from a fresh read. */
    c = atomic_load_explicit(current, memory_order_seq_cst);
    p = atomic_load_explicit(peak, memory_order_seq_cst);
    while (p < c && !atomic_compare_exchange_weak_explicit(peak, &p, c, memory_order_seq_cst,
                                                           memory_order_seq_cst))
        ;
    return replaced;
}

void cushim_reset_record_peaks(struct cushim_device_record *r, uint32_t phase)
{
    cushim_seq_write_begin(&r->seq_begin);
    /* The total before its kinds: an allocation adds to the total before its kind and a free
     * takes from its kind first, so a kind's current, read later, is at most the total's then,
     * which the total's peak covers (never below a kind's peak after a reset either). */
    uint64_t before = reset_one(&r->dev[CUSHIM_DEV_total_peak], &r->dev[CUSHIM_DEV_total_current]);
    /* The peak the reset took away (the very value it replaced) stays the whole life's: the
     * segment keeps the highest such, and a reader takes the larger of it and the peak since
     * (common/snapshot.c). */
    uint64_t kept = atomic_load_explicit(&r->dev[CUSHIM_DEV_lifetime_peak], memory_order_relaxed);
    while (kept < before && !atomic_compare_exchange_weak_explicit(&r->dev[CUSHIM_DEV_lifetime_peak], &kept,
                                                                   before, memory_order_relaxed,
                                                                   memory_order_relaxed))
        ;
    for (unsigned k = 0; k < CUSHIM_KIND_COUNT; k++)
        reset_one(&r->kinds[k].v[CUSHIM_STAT_peak_bytes], &r->kinds[k].v[CUSHIM_STAT_current_bytes]);
    _Atomic uint64_t *off = &r->kinds[CUSHIM_KIND_OFFLOADED].v[CUSHIM_STAT_current_bytes];
    if (phase == CUSHIM_PHASE_COMPILE) {
        reset_one(&r->dev[CUSHIM_DEV_compile_peak], &r->dev[CUSHIM_DEV_total_current]);
        reset_one(&r->dev[CUSHIM_DEV_compile_offloaded_peak], off);
    } else {
        reset_one(&r->dev[CUSHIM_DEV_run_peak], &r->dev[CUSHIM_DEV_total_current]);
        reset_one(&r->dev[CUSHIM_DEV_run_offloaded_peak], off);
    }
    atomic_fetch_add_explicit(&r->dev[CUSHIM_DEV_peak_reset_count], 1, memory_order_relaxed);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_store_explicit(&r->dev[CUSHIM_DEV_peak_reset_ns],
                          (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, memory_order_relaxed);
    cushim_seq_write_end(&r->seq_end);
}
