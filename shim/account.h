/* Counters in the segment (DESIGN.md): one current per device and kind, one for the device total,
 * peaks raised by compare-and-swap, each update inside the device record's seqlock bracket so a
 * reader never sees current > peak. Inline: these run on every intercepted allocation and free
 * and cost a handful of atomics; no lock, no system call, no driver call (except the one-time
 * identification of a new device, account_record_slow). Thread-safe. */
#ifndef CUSHIM_ACCOUNT_H
#define CUSHIM_ACCOUNT_H

#include "common/seqlock.h"
#include "shim/budget.h"
#include "shim/shim.h"

/* The record of a device seen for the first time: marks it live, identifies it (UUID, total
 * memory) through the driver. NULL for an ordinal outside 0..CUSHIM_MAX_DEVICES-1, without a
 * segment (shim.seg NULL), or for a device the driver cannot describe (cuDeviceTotalMem_v2
 * fails: an ordinal it does not know, a call before cuInit), asked again at the next use. */
struct cushim_device_record *account_record_slow(int device);
/* Logs a would-be underflow (a bug) once. */
void account_underflow(uint64_t have, uint64_t bytes);

static inline __attribute__((always_inline)) struct cushim_device_record *account_record(int device)
{
    struct cushim_segment *seg = shim.seg;
    if (likely((unsigned)device < CUSHIM_MAX_DEVICES && seg != NULL &&
               atomic_load_explicit(&seg->devices[device].state, memory_order_acquire) != 0))
        return &seg->devices[device];
    return account_record_slow(device);
}

/* Raises *peak to v by compare-and-swap (a new high-water mark: out of line). p: *peak as the
 * caller last read it. Never lowers it: a racing raise to more than v wins. Relaxed
 * compare-and-swap. Thread-safe. */
void raise_peak_slow(_Atomic uint64_t *peak, uint64_t p, uint64_t v);

static inline __attribute__((always_inline)) void raise_peak(_Atomic uint64_t *peak, uint64_t v)
{
    /* seq_cst with the current-adds: a concurrent peak reset (common/peaks.c) then always sees
     * either our add or our raise (store->load order matters on weakly-ordered CPUs). */
    uint64_t p = atomic_load_explicit(peak, memory_order_seq_cst);
    if (unlikely(p < v))
        raise_peak_slow(peak, p, v);
}

/* Subtracts without wrapping; a free larger than the counter is a bug, logged once. */
static inline __attribute__((always_inline)) void sub_clamped(_Atomic uint64_t *v, uint64_t bytes)
{
    uint64_t old = atomic_fetch_sub_explicit(v, bytes, memory_order_relaxed);
    if (unlikely(old < bytes)) {
        atomic_fetch_add_explicit(v, bytes - old, memory_order_relaxed);
        account_underflow(old, bytes);
    }
}

/* Whether the process is in the compile phase, read after the add it is for: with phase_set's
 * order (phase stored, then the currents read, all seq_cst), an add the switch does not see is
 * read here with the new phase, so each phase's peak covers every byte in use during it. */
static inline __attribute__((always_inline)) bool account_phase_compile(void)
{
    return atomic_load_explicit(&shim.seg->h.phase, memory_order_seq_cst) == CUSHIM_PHASE_COMPILE;
}

/* The same as an index, 0 (run) or 1 (compile), for the phase peaks that follow run_peak. Its low
 * bit: a value that is no phase (another process of the user wrote it) may raise the compile
 * phase's peak, a wrong figure in the user's own tampered segment and nothing worse, where a
 * compare to CUSHIM_PHASE_COMPILE cost 2 instructions on every counted call (callgrind, device
 * pair 2450 -> 2452). */
_Static_assert(CUSHIM_PHASE_RUN == 0 && CUSHIM_PHASE_COMPILE == 1 &&
               CUSHIM_DEV_compile_peak == CUSHIM_DEV_run_peak + 1, "phase peaks indexed by phase");
static inline __attribute__((always_inline)) unsigned account_phase_index(void)
{
    return atomic_load_explicit(&shim.seg->h.phase, memory_order_seq_cst) & 1u;
}

/* Device memory kinds count in the device total (stats.h in_device_total). */
#define ACCOUNT_IN_TOTAL(kind)                                                                   \
    ((kind) == CUSHIM_KIND_DEVICE || (kind) == CUSHIM_KIND_ASYNC || (kind) == CUSHIM_KIND_VMM || \
     (kind) == CUSHIM_KIND_ARRAY)

/* A free's capture and resident bytes counted off (flags SHIM_F_CAPTURE, SHIM_F_RESIDENT), inside
 * the record's write bracket. */
static inline void account_free_flagged(struct cushim_device_record *r, uint64_t bytes, unsigned flags)
{
    if (flags & SHIM_F_CAPTURE) {
        _Atomic uint64_t *c = r->kinds[CUSHIM_KIND_CAPTURE].v;
        sub_clamped(&c[CUSHIM_STAT_current_bytes], bytes);
        atomic_fetch_add_explicit(&c[CUSHIM_STAT_free_count], 1, memory_order_relaxed);
    }
    if (flags & SHIM_F_RESIDENT) {
        sub_clamped(&r->dev[CUSHIM_DEV_resident_offloaded_bytes], bytes);
        sub_clamped(&r->dev[CUSHIM_DEV_resident_offloaded_count], 1);
    }
}

/* `bytes` of `kind` up in record r, inside its write bracket: the device total first for a kind
 * in it (and a free takes from the kind first: the device total's current is never below one of
 * its kinds', so its peak is never below theirs either), then the kind's current; each high-water
 * mark they pass raised (the phase's too; an offloaded kind's phase peak). Returns the kind's
 * current after the add. An allocation's bytes (account_alloc_to), or a refused free's counted
 * back (account_unfree). */
static inline __attribute__((always_inline)) uint64_t account_bytes_up(struct cushim_device_record *r,
                                                                       enum cushim_kind kind, uint64_t bytes)
{
    _Atomic uint64_t *k = r->kinds[kind].v;
    if (ACCOUNT_IN_TOTAL(kind)) {
        uint64_t t = atomic_fetch_add_explicit(&r->dev[CUSHIM_DEV_total_current], bytes,
                                               memory_order_seq_cst) + bytes;
        raise_peak(&r->dev[CUSHIM_DEV_total_peak], t);
        raise_peak(&r->dev[CUSHIM_DEV_run_peak + account_phase_index()], t);
    }
    uint64_t cur = atomic_fetch_add_explicit(&k[CUSHIM_STAT_current_bytes], bytes, memory_order_seq_cst) + bytes;
    raise_peak(&k[CUSHIM_STAT_peak_bytes], cur);
    if (kind == CUSHIM_KIND_OFFLOADED) {
        raise_peak(&r->dev[account_phase_compile() ? CUSHIM_DEV_compile_offloaded_peak
                                                   : CUSHIM_DEV_run_offloaded_peak], cur);
    }
    return cur;
}

/* `bytes` up in record r's `capture` kind (flags SHIM_F_CAPTURE), inside its write bracket, its
 * high-water mark raised. */
static inline void account_capture_up(struct cushim_device_record *r, uint64_t bytes)
{
    _Atomic uint64_t *c = r->kinds[CUSHIM_KIND_CAPTURE].v;
    uint64_t cc = atomic_fetch_add_explicit(&c[CUSHIM_STAT_current_bytes], bytes, memory_order_seq_cst) + bytes;
    raise_peak(&c[CUSHIM_STAT_peak_bytes], cc);
}

/* An allocation of `bytes` of `kind` counted in record r (device's, live). plain: no budget is
 * configured (shim_policy is 0), so there is nothing to charge; a compile-time constant. */
static inline __attribute__((always_inline)) void account_alloc_to(struct cushim_device_record *r,
                                                                   int device, enum cushim_kind kind,
                                                                   uint64_t bytes, unsigned flags,
                                                                   bool plain)
{
    /* A phase the CLI asked for applies from this allocation on, whatever its kind (the plain
     * path never runs while a request waits: shim_enter_plain_alloc), unless the request was
     * taken when the allocation was placed (SHIM_F_PLACED). */
    if (!plain && !(flags & SHIM_F_PLACED))
        phase_poll();
    _Atomic uint64_t *k = r->kinds[kind].v;
    cushim_seq_write_begin(&r->seq_begin);
    /* Device bytes not reserved by the wrapper still count against the budget. */
    if (ACCOUNT_IN_TOTAL(kind) && !plain && unlikely(budget_any) && !(flags & SHIM_F_RESERVED)) {
        atomic_fetch_add_explicit(&budget_used[device], bytes, memory_order_relaxed);
        budget_mirror(device, bytes);
    }
    account_bytes_up(r, kind, bytes);
    atomic_fetch_add_explicit(&k[CUSHIM_STAT_alloc_count], 1, memory_order_relaxed);
    if (unlikely(flags & (SHIM_F_SPILLED | SHIM_F_CAPTURE))) {
        if (flags & SHIM_F_SPILLED)
            atomic_fetch_add_explicit(&k[CUSHIM_STAT_spill_count], 1, memory_order_relaxed);
        if (flags & SHIM_F_CAPTURE) {
            account_capture_up(r, bytes);
            atomic_fetch_add_explicit(&r->kinds[CUSHIM_KIND_CAPTURE].v[CUSHIM_STAT_alloc_count], 1,
                                      memory_order_relaxed);
        }
    }
    cushim_seq_write_end(&r->seq_end);
}

/* account_alloc_to on device's record. Without a record (account_record NULL: an ordinal
 * outside 0..CUSHIM_MAX_DEVICES-1, no segment, a device the driver cannot describe) nothing is
 * counted, nor charged to the budget. bytes: bytes; flags: SHIM_F_*. */
static inline __attribute__((always_inline)) void account_alloc(int device, enum cushim_kind kind,
                                                                uint64_t bytes, unsigned flags)
{
    struct cushim_device_record *r = account_record(device);
    if (likely(r != NULL))
        account_alloc_to(r, device, kind, bytes, flags, false);
}

/* What the budget (budget.h) holds for a freed allocation of `bytes` of `kind` on `device`,
 * given back: called once the driver has freed it (a free is counted in the figures before its
 * driver call, the budget after: the budget stands for memory the driver still holds). Nothing
 * for a kind outside the device total, or without a budget. */
static inline __attribute__((always_inline)) void account_free_budget(int device, enum cushim_kind kind,
                                                                      uint64_t bytes, unsigned flags)
{
    if (!ACCOUNT_IN_TOTAL(kind))
        return;
    /* The freed bytes go back to their pool, which may keep them (budget.h): counted idle before
     * they leave the budget's used bytes, so that no decision in between finds them in neither. */
    if (kind == CUSHIM_KIND_ASYNC && unlikely(budget_any) && !(flags & SHIM_F_POOL_GONE)) {
        budget_async_sub(device, bytes);
        budget_pool_changed(device, bytes);
    }
    budget_release(device, bytes);
}

/* A free counted in record r (device's, live): current bytes down, free_count up. plain: the
 * figures only, the budget left to account_free_budget (a free counted before its driver call,
 * or no budget configured); else the budget's share given back as well (a free the driver has
 * made already). */
static inline __attribute__((always_inline)) void account_free_to(struct cushim_device_record *r,
                                                                  int device, enum cushim_kind kind,
                                                                  uint64_t bytes, unsigned flags,
                                                                  bool plain)
{
    _Atomic uint64_t *k = r->kinds[kind].v;
    cushim_seq_write_begin(&r->seq_begin);
    sub_clamped(&k[CUSHIM_STAT_current_bytes], bytes);
    atomic_fetch_add_explicit(&k[CUSHIM_STAT_free_count], 1, memory_order_relaxed);
    if (ACCOUNT_IN_TOTAL(kind))
        sub_clamped(&r->dev[CUSHIM_DEV_total_current], bytes);
    if (unlikely(flags & (SHIM_F_CAPTURE | SHIM_F_RESIDENT)))
        account_free_flagged(r, bytes, flags);
    cushim_seq_write_end(&r->seq_end);
    if (!plain)
        account_free_budget(device, kind, bytes, flags);
}

/* account_free_to on device's record; without one nothing is counted, and nothing is released
 * from the budget either (an entry's device always has one: track.h track_alloc_on). For a free
 * the driver has made already (a teardown's, one seen late). */
static inline __attribute__((always_inline)) void account_free(int device, enum cushim_kind kind,
                                                               uint64_t bytes, unsigned flags)
{
    struct cushim_device_record *r = account_record(device);
    if (likely(r != NULL))
        account_free_to(r, device, kind, bytes, flags, false);
}

/* A free counted before its driver call (the figures only: account_free_to with plain): the
 * bytes leave the figures when the program gives the memory up, so that an allocation another
 * thread gets meanwhile, possibly of the same memory, is never counted beside it (a framework
 * trial: four threads freeing and allocating 64 MiB on a device that holds one read a peak of
 * 192 MiB when frees were counted after the call). The peaks are then what the program held at
 * once, between each allocation's return and its free's call: never more than the device held.
 * Then account_free_budget once the driver has freed it, or account_unfree if it refused. */
static inline __attribute__((always_inline)) void account_free_early(int device, enum cushim_kind kind,
                                                                     uint64_t bytes, unsigned flags)
{
    struct cushim_device_record *r = account_record(device);
    if (likely(r != NULL))
        account_free_to(r, device, kind, bytes, flags, true);
}

/* A free counted early (account_free_early, account_free_plain) whose driver call failed: the
 * allocation is the program's still, counted back: current bytes up again (raising the peaks
 * they may have held beside allocations counted meanwhile), free_count down. Readers may have
 * seen the free for the length of the call. Cold (account.c); nothing without a record. */
void account_unfree(int device, enum cushim_kind kind, uint64_t bytes, unsigned flags);

/* ---- the plain case (no budget, no flags but capture/resident on a free): every test first,
 * every rare consequence in one out-of-line call at the end, so the wrappers keep few values
 * in registers across calls (docs/BENCHMARKS.md). ---- */

/* An allocation's new high-water marks: raises the device total's (t), the phase's (phase
 * index ph) and the kind's (cur) peaks as needed, then ends the record's write bracket
 * (account.c). */
void account_raise_peaks(struct cushim_device_record *r, enum cushim_kind kind, unsigned ph,
                         uint64_t t, uint64_t cur);
/* A free's rare consequences: a counter that would have gone below zero (old_kind, old_total:
 * the values before the subtraction) is set back and logged; capture and resident bytes are
 * counted off; then ends the record's write bracket (account.c). */
void account_free_rare(struct cushim_device_record *r, enum cushim_kind kind, uint64_t bytes,
                       unsigned flags, uint64_t old_kind, uint64_t old_total);

/* account_alloc_to for the plain case of a kind in the device total (device, async), no flags:
 * the same counts; the peaks are read after both adds (each still after its own add, which is
 * what a concurrent peak reset needs: raise_peak). */
static inline __attribute__((always_inline)) void account_alloc_plain(struct cushim_device_record *r,
                                                                      enum cushim_kind kind,
                                                                      uint64_t bytes)
{
    _Atomic uint64_t *k = r->kinds[kind].v;
    cushim_seq_write_begin(&r->seq_begin);
    uint64_t t = atomic_fetch_add_explicit(&r->dev[CUSHIM_DEV_total_current], bytes,
                                           memory_order_seq_cst) + bytes;
    unsigned ph = account_phase_index();
    uint64_t cur = atomic_fetch_add_explicit(&k[CUSHIM_STAT_current_bytes], bytes,
                                             memory_order_seq_cst) + bytes;
    atomic_fetch_add_explicit(&k[CUSHIM_STAT_alloc_count], 1, memory_order_relaxed);
    /* seq_cst peak reads after the adds, as raise_peak's. */
    if (unlikely(atomic_load_explicit(&r->dev[CUSHIM_DEV_total_peak], memory_order_seq_cst) < t ||
                 atomic_load_explicit(&r->dev[CUSHIM_DEV_run_peak + ph], memory_order_seq_cst) < t ||
                 atomic_load_explicit(&k[CUSHIM_STAT_peak_bytes], memory_order_seq_cst) < cur))
        account_raise_peaks(r, kind, ph, t, cur);
    else
        cushim_seq_write_end(&r->seq_end);
}

/* account_free_to for the plain case of a kind in the device total (no budget). */
static inline __attribute__((always_inline)) void account_free_plain(struct cushim_device_record *r,
                                                                     enum cushim_kind kind,
                                                                     uint64_t bytes, unsigned flags)
{
    _Atomic uint64_t *k = r->kinds[kind].v;
    cushim_seq_write_begin(&r->seq_begin);
    uint64_t ok = atomic_fetch_sub_explicit(&k[CUSHIM_STAT_current_bytes], bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&k[CUSHIM_STAT_free_count], 1, memory_order_relaxed);
    uint64_t ot = atomic_fetch_sub_explicit(&r->dev[CUSHIM_DEV_total_current], bytes, memory_order_relaxed);
    if (unlikely((ok < bytes) | (ot < bytes) | ((flags & (SHIM_F_CAPTURE | SHIM_F_RESIDENT)) != 0)))
        account_free_rare(r, kind, bytes, flags, ok, ot);
    else
        cushim_seq_write_end(&r->seq_end);
}

/* The record of a device an entry of the shim's tables was counted on: device is 0..
 * CUSHIM_MAX_DEVICES-1 and its record was made live before the entry's allocation returned, in
 * the segment the shim is running with (never unmapped while active). */
static inline __attribute__((always_inline)) struct cushim_device_record *account_record_of_entry(int device)
{
    return &shim.seg->devices[device];
}

/* One per-device counter up by `n` (hot: graph launches). */
static inline __attribute__((always_inline)) void account_dev_inc(int device, enum cushim_device_stat stat,
                                                                 uint64_t n)
{
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    cushim_seq_write_begin(&r->seq_begin);
    atomic_fetch_add_explicit(&r->dev[stat], n, memory_order_relaxed);
    cushim_seq_write_end(&r->seq_end);
}

/* A failed allocation of `kind` counted (failed_count); nothing without a record, as
 * account_alloc. */
static inline void account_fail(int device, enum cushim_kind kind)
{
    struct cushim_device_record *r = account_record(device);
    if (unlikely(!r))
        return;
    cushim_seq_write_begin(&r->seq_begin);
    atomic_fetch_add_explicit(&r->kinds[kind].v[CUSHIM_STAT_failed_count], 1, memory_order_relaxed);
    cushim_seq_write_end(&r->seq_end);
}

#endif
