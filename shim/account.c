/* Counters in the segment (DESIGN.md): one current per device and kind, one for the device total,
 * peaks raised by compare-and-swap, each update inside the device record's seqlock bracket so a
 * reader never sees current > peak. Only atomics: no lock, no system call, no driver call except
 * the one-time identification of a new device. */
#include <string.h>

#include "common/seqlock.h"
#include "shim/shim.h"

static const unsigned char in_total[CUSHIM_KIND_COUNT] = {
#define SHIM_X_TOTAL(e, name, total, desc) [CUSHIM_KIND_##e] = total,
    CUSHIM_KINDS(SHIM_X_TOTAL)
#undef SHIM_X_TOTAL
};

static inline void raise_peak(_Atomic uint64_t *peak, uint64_t v)
{
    /* seq_cst with the current-adds: a concurrent peak reset (common/peaks.c) then always sees
     * either our add or our raise (store->load order matters on weakly-ordered CPUs). */
    uint64_t p = atomic_load_explicit(peak, memory_order_seq_cst);
    while (p < v && !atomic_compare_exchange_weak_explicit(peak, &p, v, memory_order_relaxed,
                                                           memory_order_relaxed))
        ;
}

/* Subtracts without wrapping; a free larger than the counter is a bug, logged once. */
static inline uint64_t sub_clamped(_Atomic uint64_t *v, uint64_t bytes)
{
    uint64_t old = atomic_fetch_sub_explicit(v, bytes, memory_order_relaxed);
    if (unlikely(old < bytes)) {
        atomic_fetch_add_explicit(v, bytes - old, memory_order_relaxed);
        LOG_ONCE(CUSHIM_LOG_ERROR, "counter underflow avoided (%llu - %llu): please report",
                 (unsigned long long)old, (unsigned long long)bytes);
        return 0;
    }
    return old - bytes;
}

static void identify(struct cushim_device_record *r, int device)
{
    CUuuid uuid;
    size_t total = 0;
    __typeof__(&cuDeviceGetUuid_v2) get_uuid = REAL(cuDeviceGetUuid_v2);
    __typeof__(&cuDeviceTotalMem_v2) get_total = REAL(cuDeviceTotalMem_v2);
    if (!get_uuid)
        get_uuid = REAL(cuDeviceGetUuid);
    if (get_total && get_total(&total, device) == CUDA_SUCCESS)
        atomic_store_explicit(&r->total_bytes, total, memory_order_relaxed);
    if (get_uuid && get_uuid(&uuid, device) == CUDA_SUCCESS) {
        memcpy(r->uuid, uuid.bytes, sizeof r->uuid);
        atomic_store_explicit(&r->state, 2, memory_order_release);
    }
}

struct cushim_device_record *account_record(int device)
{
    if (unlikely(device < 0 || device >= (int)CUSHIM_MAX_DEVICES || !shim.seg))
        return NULL;
    struct cushim_device_record *r = &shim.seg->devices[device];
    if (likely(atomic_load_explicit(&r->state, memory_order_acquire) != 0))
        return r;
    uint32_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(&r->state, &expected, 1, memory_order_acq_rel,
                                                memory_order_acquire)) {
        r->ordinal = device;
        uint32_t n = atomic_load_explicit(&shim.seg->h.device_count, memory_order_relaxed);
        while (n < (uint32_t)device + 1 &&
               !atomic_compare_exchange_weak_explicit(&shim.seg->h.device_count, &n,
                                                      (uint32_t)device + 1, memory_order_release,
                                                      memory_order_relaxed))
            ;
        identify(r, device);
    }
    return r;
}

void account_alloc(int device, enum cushim_kind kind, uint64_t bytes, unsigned flags)
{
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    struct cushim_kind_counters *k = &r->kinds[kind];
    unsigned phase = atomic_load_explicit(&shim.seg->h.phase, memory_order_relaxed);
    cushim_seq_write_begin(&r->seq_begin);
    uint64_t cur = atomic_fetch_add_explicit(&k->v[CUSHIM_STAT_current_bytes], bytes,
                                             memory_order_seq_cst) + bytes;
    raise_peak(&k->v[CUSHIM_STAT_peak_bytes], cur);
    atomic_fetch_add_explicit(&k->v[CUSHIM_STAT_alloc_count], 1, memory_order_relaxed);
    if (flags & SHIM_F_SPILLED)
        atomic_fetch_add_explicit(&k->v[CUSHIM_STAT_spill_count], 1, memory_order_relaxed);
    if (in_total[kind]) {
        uint64_t t = atomic_fetch_add_explicit(&r->dev[CUSHIM_DEV_total_current], bytes,
                                               memory_order_seq_cst) + bytes;
        raise_peak(&r->dev[CUSHIM_DEV_total_peak], t);
        raise_peak(&r->dev[phase == CUSHIM_PHASE_COMPILE ? CUSHIM_DEV_compile_peak
                                                         : CUSHIM_DEV_run_peak], t);
    } else if (kind == CUSHIM_KIND_OFFLOADED) {
        raise_peak(&r->dev[phase == CUSHIM_PHASE_COMPILE ? CUSHIM_DEV_compile_offloaded_peak
                                                         : CUSHIM_DEV_run_offloaded_peak], cur);
    }
    if (flags & SHIM_F_CAPTURE) {
        struct cushim_kind_counters *c = &r->kinds[CUSHIM_KIND_CAPTURE];
        uint64_t cc = atomic_fetch_add_explicit(&c->v[CUSHIM_STAT_current_bytes], bytes,
                                                memory_order_seq_cst) + bytes;
        raise_peak(&c->v[CUSHIM_STAT_peak_bytes], cc);
        atomic_fetch_add_explicit(&c->v[CUSHIM_STAT_alloc_count], 1, memory_order_relaxed);
    }
    cushim_seq_write_end(&r->seq_end);
}

void account_free(int device, enum cushim_kind kind, uint64_t bytes, unsigned flags)
{
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    struct cushim_kind_counters *k = &r->kinds[kind];
    cushim_seq_write_begin(&r->seq_begin);
    sub_clamped(&k->v[CUSHIM_STAT_current_bytes], bytes);
    atomic_fetch_add_explicit(&k->v[CUSHIM_STAT_free_count], 1, memory_order_relaxed);
    if (in_total[kind])
        sub_clamped(&r->dev[CUSHIM_DEV_total_current], bytes);
    if (flags & SHIM_F_CAPTURE) {
        struct cushim_kind_counters *c = &r->kinds[CUSHIM_KIND_CAPTURE];
        sub_clamped(&c->v[CUSHIM_STAT_current_bytes], bytes);
        atomic_fetch_add_explicit(&c->v[CUSHIM_STAT_free_count], 1, memory_order_relaxed);
    }
    if (flags & SHIM_F_RESIDENT) {
        sub_clamped(&r->dev[CUSHIM_DEV_resident_offloaded_bytes], bytes);
        sub_clamped(&r->dev[CUSHIM_DEV_resident_offloaded_count], 1);
    }
    cushim_seq_write_end(&r->seq_end);
}

void account_fail(int device, enum cushim_kind kind)
{
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    cushim_seq_write_begin(&r->seq_begin);
    atomic_fetch_add_explicit(&r->kinds[kind].v[CUSHIM_STAT_failed_count], 1, memory_order_relaxed);
    cushim_seq_write_end(&r->seq_end);
}

void account_device_stat_add(int device, enum cushim_device_stat stat, int64_t delta)
{
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    cushim_seq_write_begin(&r->seq_begin);
    if (delta >= 0)
        atomic_fetch_add_explicit(&r->dev[stat], (uint64_t)delta, memory_order_relaxed);
    else
        sub_clamped(&r->dev[stat], (uint64_t)-delta);
    cushim_seq_write_end(&r->seq_end);
}

void account_device_stat_set(int device, enum cushim_device_stat stat, uint64_t value)
{
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    cushim_seq_write_begin(&r->seq_begin);
    atomic_store_explicit(&r->dev[stat], value, memory_order_relaxed);
    cushim_seq_write_end(&r->seq_end);
}
