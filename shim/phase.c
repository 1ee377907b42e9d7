/* Phases (issue 4): `run` or `compile`, process-wide, kept in the segment header so the CLI shows
 * it. Changed by cushim_set_phase / push / pop (api.c), by `cushim phase PID` through the control
 * area (applied at the next allocation), and by CUSHIM_COMPILE_END=graph-launch. When the compile
 * phase ends, offloaded allocations made during it that are still alive stay in host memory: they
 * are counted as resident (count and bytes) until freed. */
#include "common/snapshot.h"
#include "shim/offload.h"
#include "shim/track.h"

static bool mark_resident(struct shim_entry *e, void *arg)
{
    (void)arg;
    if (e->kind != CUSHIM_KIND_OFFLOADED || !(e->flags & SHIM_F_COMPILE) || (e->flags & SHIM_F_RESIDENT))
        return false;
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

int phase_set(int phase)
{
    struct cushim_segment *seg = shim.seg;
    if (!seg || phase < 0 || phase >= CUSHIM_PHASE_COUNT)
        return -1;
    int old = (int)atomic_exchange(&seg->h.phase, (uint32_t)phase);
    if (old != phase)
        start_phase_peaks(seg, phase);
    if (old == CUSHIM_PHASE_COMPILE && phase == CUSHIM_PHASE_RUN) {
        unsigned n = table_for_each(&shim.ptrs, mark_resident, NULL);
        if (n)
            LOG_INFO("compile phase ended with %u offloaded allocations alive: they stay in host "
                     "memory (see README, \"Offload\")", n);
    }
    if (old != phase)
        LOG_INFO("phase %s -> %s", cushim_phase_name((uint32_t)old), cushim_phase_name((uint32_t)phase));
    return old;
}

void phase_apply_request_slow(void)
{
    uint32_t req = atomic_exchange(&shim.seg->control.phase_request, 0);
    if (req >= 1 && req <= CUSHIM_PHASE_COUNT)
        phase_set((int)req - 1);
}
