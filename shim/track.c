/* The rare paths of track.h. */
#include "shim/track.h"

void track_replaced(const struct shim_entry *old)
{
    /* The driver handed out a live address again: its free happened where the shim could not
     * see it (e.g. a teardown it does not intercept). Count that free now. */
    LOG_DEBUG("address 0x%llx reused without a seen free", (unsigned long long)old->key);
    account_free(old->device, (enum cushim_kind)old->kind, old->size, old->flags);
}

void track_free_counted(const struct shim_entry *e)
{
    if ((unsigned)e->device < CUSHIM_MAX_DEVICES)
        account_free_to(account_record_of_entry(e->device), e->device, (enum cushim_kind)e->kind,
                        e->size, e->flags, true);
}

void track_table_full(void)
{
    LOG_ONCE(CUSHIM_LOG_ERROR, "out of memory for the allocation table: some allocations are "
             "not counted");
}
