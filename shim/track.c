/* What the shim allocated: table entries plus counters, updated only after the real call
 * succeeded. Address reuse (DESIGN.md): a free takes its entry out *before* the real free and
 * puts it back if the free fails, so another thread handed the same address sees no stale entry. */
#include "shim/shim.h"

void track_alloc_on(struct shim_table *t, enum cushim_kind kind, uint64_t key, uint64_t bytes,
                    int device, CUcontext ctx, unsigned flags)
{
    struct shim_entry e = {
        .key = key, .size = bytes, .ctx = (uint64_t)(uintptr_t)ctx, .device = device,
        .kind = (uint16_t)kind, .flags = (uint16_t)flags,
    };
    struct shim_entry old;
    if (unlikely(key == 0 || device < 0))
        return;
    int rc = table_put(t, &e, &old);
    if (unlikely(rc < 0)) {
        LOG_ONCE(CUSHIM_LOG_ERROR, "out of memory for the allocation table: some allocations "
                 "are not counted");
        return;
    }
    if (unlikely(rc == 1)) {
        /* The driver handed out a live address again: its free happened where the shim could
         * not see it (e.g. a teardown it does not intercept). Count that free now. */
        LOG_DEBUG("address 0x%llx reused without a seen free", (unsigned long long)key);
        account_free(old.device, (enum cushim_kind)old.kind, old.size, old.flags);
    }
    account_alloc(device, kind, bytes, flags);
}

void track_alloc(struct shim_table *t, enum cushim_kind kind, uint64_t key, uint64_t bytes,
                 unsigned flags)
{
    CUcontext ctx;
    int device = shim_current_device(&ctx);
    track_alloc_on(t, kind, key, bytes, device, ctx, flags);
}

void track_fail(enum cushim_kind kind)
{
    account_fail(shim_current_device(NULL), kind);
}

bool track_take(struct shim_table *t, uint64_t key, struct shim_entry *out)
{
    return key != 0 && table_take(t, key, out);
}

void track_free_done(struct shim_table *t, const struct shim_entry *e, bool ok)
{
    if (ok) {
        account_free(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
    } else if (table_put(t, e, NULL) < 0) {
        LOG_ONCE(CUSHIM_LOG_ERROR, "out of memory for the allocation table after a failed free");
    }
}
