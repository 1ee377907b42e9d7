/* Device memory: cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemAllocManaged, cuMemFree_v2,
 * cuMemGetInfo_v2 (DESIGN.md "Kinds of memory"), with the offload policy, the device budget and
 * spill (offload.h, budget.h) on cuMemAlloc_v2. */
#include "shim/budget.h"
#include "shim/capture.h"
#include "shim/graph.h"
#include "shim/offload.h"
#include "shim/pools.h"
#include "shim/shim.h"
#include "shim/track.h"

/* Spill (CUSHIM_SPILL): a device request refused for lack of memory is served from pinned host
 * memory instead, unless a capture is live (no potentially unsafe call then). */
static bool spill(CUresult r, CUdeviceptr *dptr, uint64_t bytes)
{
    return r == CUDA_ERROR_OUT_OF_MEMORY && shim.cfg.spill && !capture_any_live() &&
           offload_alloc(dptr, bytes, SHIM_F_SPILLED, -1, NULL) == CUDA_SUCCESS;
}

/* cuMemAlloc_v2 with a policy at work (offload, budget, spill) or something to apply first
 * (a phase request from the CLI, deferred frees). */
static CUresult alloc_with_policy(__typeof__(&cuMemAlloc_v2) real_, CUdeviceptr *dptr, size_t bytesize)
{
    phase_poll();
    offload_poll();
    /* A NULL output is the driver's to refuse (CUDA_ERROR_INVALID_VALUE), before any budget or
     * offload decision: nothing is reserved, offloaded or spilled for it. */
    if (unlikely(!dptr)) {
        CUresult r = real_(dptr, bytesize);
        if (r != CUDA_SUCCESS) /* counted as the plain path counts it */
            account_fail(shim_current_device(NULL), CUSHIM_KIND_DEVICE);
        return r;
    }
    unsigned want = offload_wanted(bytesize);
    if (unlikely(want) && offload_alloc(dptr, bytesize, want, -1, NULL) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    CUcontext ctx;
    int device = shim_current_device(&ctx);
    CUresult r;
    /* A live capture that prohibits this call here (cuda.h cuThreadExchangeStreamCaptureMode:
     * "potentially unsafe" calls): the driver's refusal comes first, which invalidates the capture
     * as the program expects; a budget's out of memory in its place left the capture valid and
     * its graph made (a stress trial). Reserved past the budget, kept if it succeeds (no spill:
     * a capture is live). */
    bool prohibited = budget_limited(device) && capture_prohibits_here();
    if (unlikely(prohibited))
        budget_reserve_always(device, bytesize);
    if (unlikely(!prohibited && !budget_reserve(device, bytesize))) {
        /* Over this process's budget: out of memory, as a full device would say. */
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        r = real_(dptr, bytesize);
        if (likely(r == CUDA_SUCCESS)) {
            track_alloc_on(&shim.ptrs, CUSHIM_KIND_DEVICE, *dptr, bytesize, device, ctx,
                           SHIM_F_PLACED | (budget_any ? SHIM_F_RESERVED : 0));
            return r;
        }
        budget_release(device, bytesize);
    }
    if (spill(r, dptr, bytesize))
        return CUDA_SUCCESS;
    account_fail(device, CUSHIM_KIND_DEVICE);
    return r;
}

/* cuMemAlloc_v2 in every case but the plain one (below). */
static __attribute__((noinline)) CUresult alloc_full(CUdeviceptr *dptr, size_t bytesize)
{
    REAL_OR_FAIL(cuMemAlloc_v2);
    if (!shim_enter())
        return real_(dptr, bytesize);
    CUresult r;
    if (unlikely(shim_policy_active())) {
        r = alloc_with_policy(real_, dptr, bytesize);
    } else {
        CUcontext ctx;
        int device = shim_current_device(&ctx);
        r = real_(dptr, bytesize);
        if (likely(r == CUDA_SUCCESS))
            track_alloc_on(&shim.ptrs, CUSHIM_KIND_DEVICE, *dptr, bytesize, device, ctx, 0);
        else
            account_fail(device, CUSHIM_KIND_DEVICE);
    }
    shim_leave();
    return r;
}

/* The plain case with more than one device (or before the count is known): the allocation's
 * device is the current context's (one cuCtxGetCurrent). */
static __attribute__((noinline)) CUresult alloc_plain_devices(__typeof__(&cuMemAlloc_v2) real_,
                                                              CUdeviceptr *dptr, size_t bytesize)
{
    CUcontext ctx;
    struct cushim_device_record *rec;
    int device = shim_current_device_rec(&ctx, &rec);
    CUresult r = real_(dptr, bytesize);
    track_plain_result(r, dptr, bytesize, CUSHIM_KIND_DEVICE, device, ctx, rec);
    shim_leave();
    return r;
}

/* A failed allocation in the one-device plain case: counted on the current context's device,
 * asked now (a thread with no context counts nowhere, as with more devices). */
static __attribute__((noinline, cold)) void alloc_plain_failed(void)
{
    account_fail(shim_current_device(NULL), CUSHIM_KIND_DEVICE);
}

/* The hottest wrapper: the plain case (shim_enter_plain_alloc) is kept to the checks, the real
 * call, one table insert and the counters; with one device it asks no context
 * (docs/BENCHMARKS.md). */
SHIM_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    __typeof__(&cuMemAlloc_v2) real_ = atomic_load_explicit(&shim_real_slot[SHIM_FN_cuMemAlloc_v2],
                                                            memory_order_relaxed);
    if (unlikely(real_ == NULL) || !shim_enter_plain_alloc())
        return alloc_full(dptr, bytesize);
    struct cushim_device_record *rec = atomic_load_explicit(&shim_sole_record, memory_order_acquire);
    if (unlikely(rec == NULL))
        return alloc_plain_devices(real_, dptr, bytesize);
    CUresult r = real_(dptr, bytesize);
    if (likely(r == CUDA_SUCCESS))
        track_alloc_plain(&shim.ptrs, CUSHIM_KIND_DEVICE, *dptr, bytesize, 0, NULL, rec);
    else
        alloc_plain_failed();
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
                                                size_t WidthInBytes, size_t Height,
                                                unsigned int ElementSizeBytes)
{
    REAL_OR_FAIL(cuMemAllocPitch_v2);
    if (!shim_enter())
        return real_(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    /* What the outputs held, given back with a refusal below: the caller's error path sees what
     * an out-of-memory failure of the driver leaves, not a pointer the shim freed (a review). */
    CUdeviceptr dptr_was = dptr ? *dptr : 0;
    size_t pitch_was = pPitch ? *pPitch : 0;
    CUresult r = real_(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    CUcontext ctx;
    int device = shim_current_device(&ctx);
    if (r == CUDA_SUCCESS) {
        /* Requested bytes of a pitched allocation: pitch x height (DESIGN.md). The pitch is the
         * driver's choice, so the budget is checked after the call. The shim's own free of a
         * refused one is a call a capture begun meanwhile on another thread may prohibit: then
         * the allocation is the program's, counted past the budget (budget_reserve_always). */
        uint64_t bytes;
        if (__builtin_mul_overflow((uint64_t)*pPitch, (uint64_t)Height, &bytes))
            bytes = UINT64_MAX; /* no driver grants it; never a wrapped few bytes */
        __typeof__(&cuMemFree_v2) release = REAL(cuMemFree_v2);
        bool refused = !budget_reserve(device, bytes);
        if (refused && release && capture_unsafe_begin()) {
            release(*dptr);
            capture_unsafe_end();
            *dptr = dptr_was;
            *pPitch = pitch_was;
            r = CUDA_ERROR_OUT_OF_MEMORY;
            account_fail(device, CUSHIM_KIND_DEVICE);
        } else {
            if (refused)
                budget_reserve_always(device, bytes);
            track_alloc_on(&shim.ptrs, CUSHIM_KIND_DEVICE, *dptr, bytes, device, ctx,
                           budget_any ? SHIM_F_RESERVED : 0);
        }
    } else {
        account_fail(device, CUSHIM_KIND_DEVICE);
    }
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
                                               unsigned int flags)
{
    REAL_OR_FAIL(cuMemAllocManaged);
    if (!shim_enter())
        return real_(dptr, bytesize, flags);
    CUresult r = real_(dptr, bytesize, flags);
    if (r == CUDA_SUCCESS)
        track_alloc(&shim.ptrs, CUSHIM_KIND_MANAGED, *dptr, bytesize, 0);
    else
        track_fail(CUSHIM_KIND_MANAGED);
    shim_leave();
    return r;
}

/* cuMemFree_v2 in every case but the plain one (below). */
static __attribute__((noinline)) CUresult free_full(CUdeviceptr dptr)
{
    REAL_OR_FAIL(cuMemFree_v2);
    struct shim_entry e;
    if (!shim_enter())
        return real_(dptr);
    offload_poll();
    if (!track_take(&shim.ptrs, dptr, &e)) {
        /* Never seen (or NULL): forwarded, result returned unchanged. */
        shim_leave();
        return real_(dptr);
    }
    CUresult r;
    if (unlikely(e.kind == CUSHIM_KIND_OFFLOADED)) {
        r = offload_free(&e);
        if (r != CUDA_SUCCESS && table_put_back(&shim.ptrs, &e, NULL) < 0)
            track_table_full();
    } else {
        track_free_begin(&e);
        r = real_(dptr);
        track_free_done(&shim.ptrs, &e, r == CUDA_SUCCESS);
    }
    shim_leave();
    return r;
}

/* An entry of another kind than device memory taken out by the plain path: an offloaded one's
 * free goes to the pinned memory (a failed one keeps the entry, as for device memory); any other
 * (managed, imported) is freed by the driver and counted as its kind. */
static __attribute__((noinline)) CUresult free_other_kind(__typeof__(&cuMemFree_v2) real_,
                                                          const struct shim_entry *e)
{
    CUresult r;
    if (e->kind == CUSHIM_KIND_OFFLOADED) {
        r = offload_free(e);
        if (r != CUDA_SUCCESS && table_put_back(&shim.ptrs, e, NULL) < 0)
            track_table_full();
    } else {
        track_free_begin(e);
        r = real_(e->key);
        track_free_done(&shim.ptrs, e, r == CUDA_SUCCESS);
    }
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    __typeof__(&cuMemFree_v2) real_ = atomic_load_explicit(&shim_real_slot[SHIM_FN_cuMemFree_v2],
                                                           memory_order_relaxed);
    if (unlikely(real_ == NULL) || !shim_enter_plain_free())
        return free_full(dptr);
    struct shim_entry e;
    if (!track_take(&shim.ptrs, dptr, &e)) {
        /* Never seen (or NULL): forwarded, result returned unchanged. */
        shim_leave();
        return real_(dptr);
    }
    if (unlikely(e.kind != CUSHIM_KIND_DEVICE))
        return free_other_kind(real_, &e);
    track_free_plain_begin(&e, CUSHIM_KIND_DEVICE, true);
    CUresult r = real_(dptr);
    track_free_plain_end(&shim.ptrs, &e, r == CUDA_SUCCESS);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    REAL_OR_FAIL(cuMemGetInfo_v2);
    if (!shim_enter())
        return real_(free, total);
    int device = shim_current_device(NULL);
    bool limited = budget_any && device >= 0 && shim.cfg.device_limit[device];
    size_t f = 0, t = 0;
    /* With a budget, NULL outputs are tolerated: the real call gets our own. */
    CUresult r = limited ? real_(&f, &t) : real_(free, total);
    /* The program is looking at its memory (vLLM after profiling, torch.cuda.mem_get_info): the
     * pools are worth reading now, the graph pool first, since the untracked bytes below leave
     * its reserve out. Not while a capture is live (no call the shim adds may be one the capture
     * prohibits), and then the untracked bytes are not sampled either: with a stale reserve,
     * graph memory attached since the last read would count as untracked. */
    bool pool_read = r == CUDA_SUCCESS && device >= 0 && !capture_any_live() &&
                     graph_pool_sample(device, true);
    /* docs/SUMMARY-JSON.md async_pool; before the budget's figures, which count their idle
     * reserve. */
    if (r == CUDA_SUCCESS && device >= 0 && !capture_any_live())
        async_pool_sample(device);
    if (r == CUDA_SUCCESS && limited) {
        if (pool_read)
            shim_sample_untracked(device, f, t);
        budget_mem_info(device, &f, &t);
        if (free)
            *free = f;
        if (total)
            *total = t;
    } else if (pool_read && free && total) {
        /* A free sample of untracked memory for the live view. */
        shim_sample_untracked(device, *free, *total);
    }
    shim_leave();
    return r;
}
