/* The slow parts of accounting (account.h has the hot ones): a device's first record,
 * per-device scalar counters. */
#include <stdio.h>
#include <string.h>

#include "shim/account.h"

/* ACCOUNT_IN_TOTAL must agree with stats.h's in_device_total column. */
#define SHIM_X_TOTAL(e, name, total, desc) \
    _Static_assert(ACCOUNT_IN_TOTAL(CUSHIM_KIND_##e) == (total), "in_device_total of " #name);
CUSHIM_KINDS(SHIM_X_TOTAL)
#undef SHIM_X_TOTAL

void account_underflow(uint64_t have, uint64_t bytes)
{
    LOG_ONCE(CUSHIM_LOG_ERROR, "counter underflow avoided (%llu - %llu): please report",
             (unsigned long long)have, (unsigned long long)bytes);
}

/* total: cuDeviceTotalMem_v2's answer, asked by the caller. */
static void identify(struct cushim_device_record *r, int device, size_t total)
{
    /* The budget the process runs under on this device (budget.h), for readers. */
    if (budget_any)
        atomic_store_explicit(&r->dev[CUSHIM_DEV_limit], shim.cfg.device_limit[device], memory_order_relaxed);
    CUuuid uuid;
    __typeof__(&cuDeviceGetUuid_v2) get_uuid = REAL(cuDeviceGetUuid_v2);
    if (!get_uuid)
        get_uuid = REAL(cuDeviceGetUuid);
    atomic_store_explicit(&r->total_bytes, total, memory_order_relaxed);
    if (get_uuid && get_uuid(&uuid, device) == CUDA_SUCCESS) {
        memcpy(r->uuid, uuid.bytes, sizeof r->uuid);
        atomic_store_explicit(&r->state, 2, memory_order_release);
    }
}

/* Once the driver is known to work (a device's first record): a per-device budget
 * (CUSHIM_DEVICE_LIMIT=ORDINAL:SIZE,...) naming an ordinal this process does not see would limit
 * nothing, without a word; said in one line where the log goes, like a bad CUSHIM_* value. A size
 * for every device is left alone. */
static void check_limit_ordinals(void)
{
    static atomic_flag checked = ATOMIC_FLAG_INIT;
    __typeof__(&cuDeviceGetCount) get_count = REAL(cuDeviceGetCount);
    int count = 0;
    if (!budget_any || atomic_flag_test_and_set(&checked) || !get_count ||
        get_count(&count) != CUDA_SUCCESS || count < 0)
        return;
    bool every = true;
    for (unsigned i = 1; i < CUSHIM_MAX_DEVICES; i++)
        every = every && shim.cfg.device_limit[i] == shim.cfg.device_limit[0];
    /* Every such ordinal in the one line (a fresh-user trial: a line each). */
    char names[CUSHIM_MAX_DEVICES * 4 + 16] = "";
    size_t len = 0;
    unsigned unseen = 0, last = 0;
    for (unsigned i = (unsigned)count; !every && i < CUSHIM_MAX_DEVICES; i++) {
        if (!shim.cfg.device_limit[i])
            continue;
        if (unseen++)
            len += (size_t)snprintf(names + len, sizeof names - len, ", ");
        len += (size_t)snprintf(names + len, sizeof names - len, "%u", i);
        last = i;
    }
    if (!unseen)
        return;
    if (unseen > 1) { /* "5, 6, 7" -> "5, 6 and 7" */
        char tail[8];
        int n = snprintf(tail, sizeof tail, ", %u", last);
        snprintf(names + len - (size_t)n, sizeof names - (len - (size_t)n), " and %u", last);
    }
    char seen[48], line[512];
    if (count == 0)
        snprintf(seen, sizeof seen, "no device");
    else if (count == 1)
        snprintf(seen, sizeof seen, "1 device (ordinal 0)");
    else
        snprintf(seen, sizeof seen, "%d devices (ordinals 0-%d)", count, count - 1);
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    snprintf(line, sizeof line, "cushim: the device limit (CUSHIM_DEVICE_LIMIT, `cushim run --device-limit`) "
             "names device%s %s, but this process sees %s%s: %s no device", unseen > 1 ? "s" : "", names,
             seen, visible ? " (CUDA_VISIBLE_DEVICES renumbers them)" : "",
             unseen > 1 ? "those limits apply to" : "that limit applies to");
    shim_log_line(line);
}

struct cushim_device_record *account_record_slow(int device)
{
    if (device < 0 || device >= (int)CUSHIM_MAX_DEVICES || !shim.seg)
        return NULL;
    struct cushim_device_record *r = &shim.seg->devices[device];
    uint32_t expected = 0;
    /* A device the driver cannot describe (an ordinal it does not know, such as a cuMemCreate
     * location naming device 5 of 2, or any call before cuInit) gets no record: the summary
     * lists only devices that exist. */
    __typeof__(&cuDeviceTotalMem_v2) get_total = REAL(cuDeviceTotalMem_v2);
    size_t total = 0;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == 0 && get_total &&
        get_total(&total, device) != CUDA_SUCCESS)
        return NULL;
    if (atomic_compare_exchange_strong_explicit(&r->state, &expected, 1, memory_order_acq_rel,
                                                memory_order_acquire)) {
        uint32_t n = atomic_load_explicit(&shim.seg->h.device_count, memory_order_relaxed);
        while (n < (uint32_t)device + 1 &&
               !atomic_compare_exchange_weak_explicit(&shim.seg->h.device_count, &n,
                                                      (uint32_t)device + 1, memory_order_release,
                                                      memory_order_relaxed))
            ;
        identify(r, device, total);
        check_limit_ordinals();
    }
    return r;
}

void account_device_stat_add(int device, enum cushim_device_stat stat, int64_t delta)
{
    if (delta >= 0) {
        account_dev_inc(device, stat, (uint64_t)delta);
        return;
    }
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    cushim_seq_write_begin(&r->seq_begin);
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

void account_device_stat_raise(int device, enum cushim_device_stat stat, uint64_t value)
{
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    cushim_seq_write_begin(&r->seq_begin);
    raise_peak_slow(&r->dev[stat], atomic_load_explicit(&r->dev[stat], memory_order_relaxed), value);
    cushim_seq_write_end(&r->seq_end);
}

void raise_peak_slow(_Atomic uint64_t *peak, uint64_t p, uint64_t v)
{
    while (p < v && !atomic_compare_exchange_weak_explicit(peak, &p, v, memory_order_relaxed,
                                                          memory_order_relaxed))
        ;
}

void account_raise_peaks(struct cushim_device_record *r, enum cushim_kind kind, unsigned ph,
                         uint64_t t, uint64_t cur)
{
    raise_peak(&r->dev[CUSHIM_DEV_total_peak], t);
    raise_peak(&r->dev[CUSHIM_DEV_run_peak + ph], t);
    raise_peak(&r->kinds[kind].v[CUSHIM_STAT_peak_bytes], cur);
    cushim_seq_write_end(&r->seq_end);
}

void account_unfree(int device, enum cushim_kind kind, uint64_t bytes, unsigned flags)
{
    struct cushim_device_record *r = account_record(device);
    if (!r)
        return;
    cushim_seq_write_begin(&r->seq_begin);
    account_bytes_up(r, kind, bytes);
    sub_clamped(&r->kinds[kind].v[CUSHIM_STAT_free_count], 1);
    if (flags & SHIM_F_CAPTURE) {
        account_capture_up(r, bytes);
        sub_clamped(&r->kinds[CUSHIM_KIND_CAPTURE].v[CUSHIM_STAT_free_count], 1);
    }
    if (flags & SHIM_F_RESIDENT) {
        atomic_fetch_add_explicit(&r->dev[CUSHIM_DEV_resident_offloaded_bytes], bytes, memory_order_relaxed);
        atomic_fetch_add_explicit(&r->dev[CUSHIM_DEV_resident_offloaded_count], 1, memory_order_relaxed);
    }
    cushim_seq_write_end(&r->seq_end);
}

/* What sub_clamped does after its subtraction. */
static void unwrap(_Atomic uint64_t *v, uint64_t old, uint64_t bytes)
{
    if (old < bytes) {
        atomic_fetch_add_explicit(v, bytes - old, memory_order_relaxed);
        account_underflow(old, bytes);
    }
}

void account_free_rare(struct cushim_device_record *r, enum cushim_kind kind, uint64_t bytes,
                       unsigned flags, uint64_t old_kind, uint64_t old_total)
{
    unwrap(&r->kinds[kind].v[CUSHIM_STAT_current_bytes], old_kind, bytes);
    unwrap(&r->dev[CUSHIM_DEV_total_current], old_total, bytes);
    account_free_flagged(r, bytes, flags);
    cushim_seq_write_end(&r->seq_end);
}
