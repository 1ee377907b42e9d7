/* What the shim allocated: table entries plus counters. An allocation is counted only after the
 * real call succeeded (DESIGN.md); a free is counted before its real call and counted back if the
 * call fails (account.h account_free_early), so that once each call has returned the figures are
 * those of the calls that succeeded, as DESIGN.md asks, and meanwhile an allocation another thread
 * gets is never counted beside the memory being freed. Address reuse: a free takes its entry out
 * *before* the real free and puts it back if the free fails, so another thread handed the same
 * address sees no stale entry. Inline: these run on every intercepted allocation and free.
 * Thread-safe. */
#ifndef CUSHIM_TRACK_H
#define CUSHIM_TRACK_H

#include "shim/account.h"
#include "shim/capture.h"
#include "shim/shim.h"

/* Per-thread cache of the current context's device and that device's live record in the
 * segment (context.c fills it; a context forgotten or a fork bumps shim_ctx_generation, which
 * invalidates every thread's copy). */
struct shim_ctx_cache {
    uint64_t ctx;
    struct cushim_device_record *record;
    int32_t device;
    uint32_t generation;
};
extern SHIM_HIDDEN SHIM_TLS struct shim_ctx_cache shim_tls_ctx;
extern SHIM_HIDDEN _Atomic uint32_t shim_ctx_generation;
/* shim_current_device's miss (context.c): the device of ctx, which must be the calling thread's
 * current context (the driver is asked cuCtxGetDevice, of the current one), from the shared
 * context cache or the driver. Returns the ordinal, or -1 when the driver will not say or says
 * one beyond CUSHIM_MAX_DEVICES (logged once unless the context is destroyed). Makes the
 * device's record live (account_record) and fills this thread's shim_tls_ctx only when it has
 * one. Thread-safe. */
int shim_current_device_slow(CUcontext ctx);

/* Whether the calling thread's cached context is ctx, still valid (no context forgotten since). */
static inline __attribute__((always_inline)) bool shim_ctx_cached(CUcontext ctx)
{
    return (uint64_t)(uintptr_t)ctx == shim_tls_ctx.ctx &&
           atomic_load_explicit(&shim_ctx_generation, memory_order_relaxed) == shim_tls_ctx.generation;
}

/* Device ordinal of the calling thread's current context, -1 if none; *ctx_out = the context. */
static inline __attribute__((always_inline)) int shim_current_device(CUcontext *ctx_out)
{
    CUcontext ctx = NULL;
    __typeof__(&cuCtxGetCurrent) getcur = REAL(cuCtxGetCurrent);
    if (unlikely(!getcur || getcur(&ctx) != CUDA_SUCCESS))
        ctx = NULL;
    if (ctx_out)
        *ctx_out = ctx;
    if (unlikely(!ctx))
        return -1;
    if (likely(shim_ctx_cached(ctx)))
        return shim_tls_ctx.device;
    return shim_current_device_slow(ctx);
}

/* Device 0's live record when the driver counts one device, else NULL (context.c). With one
 * device, every context is device 0's: the plain cuMemAlloc_v2 path asks for none, and counts
 * the allocation with no context (ctx 0), which is asked for only before a call that may tear a
 * context down (shim_resolve_contexts). */
extern SHIM_HIDDEN struct cushim_device_record *_Atomic shim_sole_record;

/* The same, also giving the device's live record (*rec; NULL when the device is not counted). */
static inline __attribute__((always_inline)) int shim_current_device_rec(CUcontext *ctx_out,
                                                                        struct cushim_device_record **rec)
{
    CUcontext ctx = NULL;
    __typeof__(&cuCtxGetCurrent) getcur = REAL(cuCtxGetCurrent);
    *rec = NULL;
    if (unlikely(!getcur || getcur(&ctx) != CUDA_SUCCESS))
        ctx = NULL;
    *ctx_out = ctx;
    if (unlikely(!ctx))
        return -1;
    if (unlikely(!shim_ctx_cached(ctx))) {
        int d = shim_current_device_slow(ctx);
        if (d < 0 || (uint64_t)(uintptr_t)ctx != shim_tls_ctx.ctx)
            return d;
    }
    *rec = shim_tls_ctx.record;
    return shim_tls_ctx.device;
}

/* The context stream s belongs to (cuda.h cuStreamGetCtx: the context "that was active in the
 * calling thread when the stream was created"; the special handles NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD stand for the calling thread's current context, so a _ptsz call's stream
 * needs no _ptsz query); the current context when the driver does not say. An invalid handle is
 * undefined behaviour there, so callers ask only about a stream the driver has just accepted (an
 * allocation on it succeeded or ran out of memory, a capture on it began), or one the program is
 * about to use anyway (the policy path). Not a call a capture prohibits. */
static inline CUcontext shim_stream_context(CUstream s)
{
    CUcontext ctx = NULL;
    __typeof__(&cuStreamGetCtx) getctx = REAL(cuStreamGetCtx);
    if ((uintptr_t)s > (uintptr_t)CU_STREAM_PER_THREAD) {
        if (likely(getctx != NULL) && getctx(s, &ctx) == CUDA_SUCCESS && ctx)
            return ctx;
        LOG_ONCE(CUSHIM_LOG_WARN, "cuStreamGetCtx failed for a stream: its allocations count on "
                 "the current context's device, which may not be the stream's");
    }
    __typeof__(&cuCtxGetCurrent) getcur = REAL(cuCtxGetCurrent);
    ctx = NULL;
    if (unlikely(!getcur || getcur(&ctx) != CUDA_SUCCESS))
        ctx = NULL;
    return ctx;
}

/* Device of the context stream s belongs to (shim_stream_context), -1 if none; *ctx_out = that
 * context. */
static inline int shim_stream_device(CUstream s, CUcontext *ctx_out)
{
    if ((uintptr_t)s <= (uintptr_t)CU_STREAM_PER_THREAD)
        return shim_current_device(ctx_out);
    CUcontext ctx = shim_stream_context(s);
    if (ctx_out)
        *ctx_out = ctx;
    if (unlikely(!ctx))
        return -1;
    if (likely(shim_ctx_cached(ctx)))
        return shim_tls_ctx.device;
    return shim_context_device(ctx);
}

/* An entry taken out for a free that failed, put back in t (track.c). Returns true when t kept
 * it; false when t could not take it (out of memory: logged once), and the caller then counts
 * the allocation freed, as its next free will not be seen. A kept entry whose context is not
 * known (shim_context_unknown) is noted for shim_resolve_contexts. Thread-safe. */
bool track_put_back(struct shim_table *t, const struct shim_entry *e);

/* A replaced live entry: the driver handed out an address again whose free the shim did not see. */
void track_replaced(const struct shim_entry *old);
/* A table could not take an entry (out of memory: table_put returned -1): logged once, at error
 * level. Nothing else; the caller leaves the allocation uncounted. Thread-safe. */
void track_table_full(void);

/* Puts a new allocation's entry in t. False when the table is full (logged once; the allocation
 * is then not counted). An entry it replaces was freed without the shim seeing it: counted as
 * freed (track_replaced). */
static inline __attribute__((always_inline)) bool track_put(struct shim_table *t, const struct shim_entry *e)
{
    struct shim_entry old;
    int rc = table_put(t, e, &old);
    if (likely(rc == 0))
        return true;
    if (rc < 0) {
        track_table_full();
        return false;
    }
    track_replaced(&old);
    return true;
}

/* An allocation track_alloc_on does not keep (its device has no record, or the table is full):
 * never freed as far as the shim knows, so the budget its caller reserved for it (flags
 * SHIM_F_RESERVED) is given back now, or it would stay charged for ever. track.c. */
void track_not_kept(int device, uint64_t bytes, unsigned flags);

/* track_alloc_on with the entry's aux (table.h) set. */
static inline __attribute__((always_inline)) bool track_alloc_on_aux(struct shim_table *t,
                                                                     enum cushim_kind kind, uint64_t key,
                                                                     uint64_t bytes, int device,
                                                                     CUcontext ctx, unsigned flags,
                                                                     uint64_t aux)
{
    /* A device with no live record (no context, beyond CUSHIM_MAX_DEVICES, or one the driver
     * could not describe) is not counted, so its allocations are not kept either: every entry
     * made here has a device with a live record. */
    struct cushim_device_record *rec;
    if (unlikely(key == 0 || (rec = account_record(device)) == NULL)) {
        track_not_kept(device, bytes, flags);
        return false;
    }
    /* Made while a stream of the process was capturing: also counted as `capture`. */
    if (unlikely(capture_any_live())) {
        flags |= SHIM_F_CAPTURE;
        capture_note_bytes(bytes);
    }
    struct shim_entry e = {
        .key = key, .size = bytes, .ctx = (uint64_t)(uintptr_t)ctx, .aux = aux, .device = device,
        .kind = (uint16_t)kind, .flags = (uint16_t)(flags & ~SHIM_F_PLACED),
    };
    if (likely(track_put(t, &e))) {
        account_alloc_to(rec, device, kind, bytes, flags, false);
        return true;
    }
    track_not_kept(device, bytes, flags);
    return false;
}

/* A new allocation of `bytes` of `kind` at `key` on `device` (made in ctx): its entry put in t
 * and the allocation counted (account_alloc_to; also as `capture` while a capture is live).
 * True when kept and counted. False, with nothing counted and the caller's budget reservation
 * given back (track_not_kept), when key is 0, the device has no record (account_record) or the
 * table is full (logged once). Thread-safe. */
static inline __attribute__((always_inline)) bool track_alloc_on(struct shim_table *t,
                                                                 enum cushim_kind kind, uint64_t key,
                                                                 uint64_t bytes, int device,
                                                                 CUcontext ctx, unsigned flags)
{
    return track_alloc_on_aux(t, kind, key, bytes, device, ctx, flags, 0);
}

/* track_alloc_plain's insert when table_put_new could not do it at once (track.c): the whole
 * put; an entry it replaced was freed without the shim seeing it (track_replaced). False when the
 * table cannot hold it (logged once): the allocation is then not counted (its free would not be
 * seen), as on the full path. */
bool track_put_new_slow(struct shim_table *t, uint64_t key, uint64_t bytes, CUcontext ctx,
                        int device, enum cushim_kind kind);

/* track_alloc_on for the plain case (shim_enter_plain_alloc): no capture live, no flags, no
 * budget; rec is the device's live record (shim_current_device_rec). */
static inline __attribute__((always_inline)) void track_alloc_plain(struct shim_table *t,
                                                                    enum cushim_kind kind, uint64_t key,
                                                                    uint64_t bytes, int device,
                                                                    CUcontext ctx,
                                                                    struct cushim_device_record *rec)
{
    if (unlikely(key == 0))
        return;
    /* In the table before it is counted: a context resolve that sees the count sees the entry
     * (shim_resolve_contexts goes by the allocation count). */
    if (likely(table_put_new(t, key, bytes, (uint64_t)(uintptr_t)ctx, device, (uint16_t)kind, 0)) ||
        track_put_new_slow(t, key, bytes, ctx, device, kind))
        account_alloc_plain(rec, kind, bytes);
}

/* The real allocation's result r in the plain case: a success is tracked (when the device is
 * counted: rec), a failure counted on the device. */
static inline __attribute__((always_inline)) void track_plain_result(CUresult r, const CUdeviceptr *dptr,
                                                                     uint64_t bytes, enum cushim_kind kind,
                                                                     int device, CUcontext ctx,
                                                                     struct cushim_device_record *rec)
{
    if (likely(r == CUDA_SUCCESS)) {
        if (likely(rec != NULL))
            track_alloc_plain(&shim.ptrs, kind, *dptr, bytes, device, ctx, rec);
    } else {
        account_fail(device, kind);
    }
}

/* account_free of entry e, out of line: the rare case of track_free_plain (an entry of another
 * kind than the wrapper's), kept out of the wrapper's body so that it does not crowd the common
 * case's registers (inlined, it cost cudaMallocAsync/cudaFreeAsync pairs 11 instructions: docs/
 * BENCHMARKS.md). track.c. */
void track_free_other(const struct shim_entry *e);

/* account_free_early of entry e, out of line (track.c): track_free_plain_begin's rare case, as
 * track_free_other. */
void track_free_other_early(const struct shim_entry *e);

/* A free whose driver call failed, of entry e counted freed before it (track_free_begin,
 * track_free_plain_begin): counted back (account_unfree) and the entry put back in t; if t
 * cannot keep it, counted freed after all (account_free: figures and budget), since the
 * allocation's next free will not be seen. Cold (track.c). */
void track_free_failed(struct shim_table *t, const struct shim_entry *e);

/* Before the real free in the plain case (shim_enter_plain_free: no budget): the entry taken
 * out counted freed (account.h account_free_early says why before). `kind`: the kind the
 * wrapper's entries usually are (a constant, so that case is counted inline with fixed offsets);
 * kind_checked: the caller has already seen that e->kind is `kind`, a kind whose entries are made
 * only by track_alloc_on and track_alloc_plain, so e->device is a device with a record. */
static inline __attribute__((always_inline)) void track_free_plain_begin(const struct shim_entry *e,
                                                                         enum cushim_kind kind,
                                                                         bool kind_checked)
{
    if (likely(kind_checked || (e->kind == kind && (unsigned)e->device < CUSHIM_MAX_DEVICES)))
        account_free_plain(account_record_of_entry(e->device), kind, e->size, e->flags);
    else
        track_free_other_early(e);
}

/* After the real free in the plain case: nothing more when it succeeded (no budget); counted
 * back and the entry put back when it failed. */
static inline __attribute__((always_inline)) void track_free_plain_end(struct shim_table *t,
                                                                       const struct shim_entry *e, bool ok)
{
    if (unlikely(!ok))
        track_free_failed(t, e);
}

/* Records a successful allocation at key, counted on the current context's device. */
static inline __attribute__((always_inline)) void track_alloc(struct shim_table *t,
                                                              enum cushim_kind kind, uint64_t key,
                                                              uint64_t bytes, unsigned flags)
{
    CUcontext ctx;
    int device = shim_current_device(&ctx);
    track_alloc_on(t, kind, key, bytes, device, ctx, flags);
}

/* A failed allocation of `kind` on the current context's device. */
static inline void track_fail(enum cushim_kind kind)
{
    account_fail(shim_current_device(NULL), kind);
}

/* Removes key before a free; *out receives the entry. False if the shim never saw it. */
static inline __attribute__((always_inline)) bool track_take(struct shim_table *t, uint64_t key,
                                                             struct shim_entry *out)
{
    return key != 0 && table_take(t, key, out);
}

/* Before the real free of entry e (taken out with track_take): counted freed now, the figures
 * only (account.h account_free_early). Then track_free_done with the call's result. */
static inline __attribute__((always_inline)) void track_free_begin(const struct shim_entry *e)
{
    account_free_early(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
}

/* After the real free of an entry counted by track_free_begin: the budget's share given back
 * (ok), or the free counted back and the entry put back (it failed). */
static inline __attribute__((always_inline)) void track_free_done(struct shim_table *t,
                                                                  const struct shim_entry *e, bool ok)
{
    if (likely(ok))
        account_free_budget(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
    else
        track_free_failed(t, e);
}

/* After a real free that was not counted before it (an IPC close, whose entry may stay for
 * other references: hooks_ipc.c): count it whole (ok) or put the entry back (it failed); an
 * entry t cannot keep is counted freed too (its next free will not be seen). */
static inline void track_free_late(struct shim_table *t, const struct shim_entry *e, bool ok)
{
    if (ok || !track_put_back(t, e))
        account_free(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
}

#endif
