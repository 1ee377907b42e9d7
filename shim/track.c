/* The rare paths of track.h. */
#include "shim/track.h"

#include "shim/offload.h"

void track_replaced(const struct shim_entry *old)
{
    /* The driver handed out a live address again: its free happened where the shim could not
     * see it (e.g. a teardown it does not intercept). Count that free now. */
    LOG_DEBUG("address 0x%llx reused without a seen free", (unsigned long long)old->key);
    /* An offloaded block's range goes with it: the new allocation there is not offloaded (an
     * offloaded one replaces in phase_offloaded_put, and keeps the range). */
    if (old->kind == CUSHIM_KIND_OFFLOADED)
        offload_range_gone(old->key, old->ctx);
    account_free(old->device, (enum cushim_kind)old->kind, old->size, old->flags);
}

void track_free_other(const struct shim_entry *e)
{
    account_free(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
}

void track_free_other_early(const struct shim_entry *e)
{
    account_free_early(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
}

/* Whether the driver says pointer key names no memory any more (cuda.h cuPointerGetAttribute:
 * "If ptr is not a valid CUDA pointer then CUDA_ERROR_INVALID_VALUE is returned"). Any other
 * answer, or no cuPointerGetAttribute, says nothing: the memory is taken to be there. */
static bool pointer_gone(uint64_t key)
{
    __typeof__(&cuPointerGetAttribute) attr = REAL(cuPointerGetAttribute);
    CUcontext c = NULL;
    return attr && attr(&c, CU_POINTER_ATTRIBUTE_CONTEXT, (CUdeviceptr)key) == CUDA_ERROR_INVALID_VALUE;
}

void track_free_failed(struct shim_table *t, const struct shim_entry *e)
{
    /* A free that failed because another thread destroyed the allocation's context inside the
     * call (cuda.h cuCtxDestroy: destroyed "regardless of how many threads it is current to", its
     * allocations with it; the teardown's own pass did not see the entry, taken out for the
     * free): the memory is gone, so the free stands. Asked only here, on a failure (cold).
     * Only memory of a context can vanish so: a stream-ordered allocation (and an imported pool
     * pointer) is kept with no context (hooks_async.c ASYNC_NO_CONTEXT) because cuCtxDestroy does
     * not free it, and the CONTEXT query answers CUDA_ERROR_INVALID_VALUE for it while it lives
     * (cuda.h cuCtxDestroy: such allocations "are not associated with any CUDA context";
     * cuPointerGetAttribute: not "allocated by, mapped by, or registered with a CUcontext" ->
     * CUDA_ERROR_INVALID_VALUE): a refused free of one keeps it counted. Device entries are asked
     * whatever their ctx (0 on the one-device plain path: not yet known, not none). */
    if (t == &shim.ptrs && (e->kind == CUSHIM_KIND_DEVICE || e->ctx != 0) && pointer_gone(e->key)) {
        account_free_budget(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
        return;
    }
    account_unfree(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
    /* Counted back first, so that a teardown that drains the entry once it is back counts its
     * free from the right figure. Not kept: its next free will not be seen, so this one stands. */
    if (!track_put_back(t, e))
        account_free(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
}

bool track_put_new_slow(struct shim_table *t, uint64_t key, uint64_t bytes, CUcontext ctx,
                        int device, enum cushim_kind kind)
{
    struct shim_entry old;
    int rc = table_put_new_slow(t, key, bytes, (uint64_t)(uintptr_t)ctx,
                                table_dkf(device, (uint16_t)kind, 0), &old);
    if (rc > 0)
        track_replaced(&old);
    else if (rc < 0)
        track_table_full();
    return rc >= 0;
}

bool track_put_back(struct shim_table *t, const struct shim_entry *e)
{
    if (table_put_back(t, e, NULL) < 0) {
        track_table_full();
        return false;
    }
    if (e->kind == CUSHIM_KIND_DEVICE && shim_context_unknown(e->ctx))
        shim_context_unknown_returned();
    return true;
}

_Atomic uint32_t shim_incomplete;

void track_table_full(void)
{
    shim_note_incomplete(CUSHIM_INCOMPLETE_TABLE);
    LOG_ONCE(CUSHIM_LOG_ERROR, "out of memory for the allocation table: some allocations are "
             "not counted");
}

void track_not_kept(int device, uint64_t bytes, unsigned flags)
{
    if (flags & SHIM_F_RESERVED)
        budget_release(device, bytes);
}
