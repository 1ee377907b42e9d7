/* Live at exit: the allocations the process made and had not freed when it wrote its exit report,
 * counted and the largest listed into the segment (segment.h struct cushim_live_at_exit), as
 * compute-sanitizer --leak-check lists leaks. Cold: once, from the exit path. */
#include "shim/shim.h"
#include "shim/table.h"

struct live_walk {
    struct cushim_live_record top[CUSHIM_LIVE_MAX]; /* largest first */
    uint32_t listed;
    uint64_t count, bytes;
    uint16_t flags; /* CUSHIM_LIVE_F_HANDLE for the walk of a handle table */
};

/* Whether record a goes before b: more bytes first, then the lower device, then the lower key
 * (the order never depends on the tables' hashing). */
static bool live_before(const struct cushim_live_record *a, const struct cushim_live_record *b)
{
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes;
    if (a->device != b->device)
        return a->device < b->device;
    return a->key < b->key;
}

/* table_for_each callback (under a shard lock: arithmetic only). An entry counted on a device
 * (device >= 0) is memory of the process: every kind of the pointer, array and handle tables, but
 * for an imported multicast object, which has none of its own (table.h SHIM_F_MULTICAST), and an
 * imported VMM handle not mapped yet (size 0: counted by its first mapping, hooks_vmm.c). */
static bool live_one(struct shim_entry *e, void *arg)
{
    struct live_walk *w = arg;
    if (e->device < 0 || e->device >= (int32_t)CUSHIM_MAX_DEVICES || (e->flags & SHIM_F_MULTICAST) ||
        e->kind >= CUSHIM_KIND_COUNT || e->kind == CUSHIM_KIND_CAPTURE || e->size == 0)
        return false;
    w->count++;
    w->bytes += e->size;
    struct cushim_live_record r = {
        .key = e->key, .bytes = e->size, .device = e->device, .kind = e->kind,
        .flags = (uint16_t)(w->flags | (e->flags & SHIM_F_CAPTURE ? CUSHIM_LIVE_F_CAPTURE : 0)),
    };
    uint32_t i;
    if (w->listed < CUSHIM_LIVE_MAX)
        i = w->listed++;
    else if (live_before(&r, &w->top[CUSHIM_LIVE_MAX - 1]))
        i = CUSHIM_LIVE_MAX - 1; /* takes the smallest one's place */
    else
        return true;
    for (; i > 0 && live_before(&r, &w->top[i - 1]); i--)
        w->top[i] = w->top[i - 1];
    w->top[i] = r;
    return true;
}

/* table_for_each callback on the mappings (under a shard lock: arithmetic only): a mapping (key
 * its address, aux its handle) of a listed VMM handle, the lowest kept. */
static bool mapped_at(struct shim_entry *e, void *arg)
{
    struct live_walk *w = arg;
    if (e->flags & SHIM_F_UNTRACKED)
        return false;
    for (uint32_t i = 0; i < w->listed; i++) {
        struct cushim_live_record *r = &w->top[i];
        if ((r->flags & CUSHIM_LIVE_F_VMM) && r->key == e->aux && (!r->mapped || e->key < r->mapped))
            r->mapped = e->key;
    }
    return false;
}

void shim_live_at_exit_write(struct cushim_segment *seg)
{
    struct cushim_live_at_exit *h = &seg->live_at_exit;
    uint32_t zero = 0;
    if (!atomic_compare_exchange_strong(&h->state, &zero, 1))
        return; /* written once */
    struct live_walk w = {.listed = 0};
    table_for_each(&shim.ptrs, live_one, &w);
    w.flags = CUSHIM_LIVE_F_HANDLE;
    table_for_each(&shim.arrays, live_one, &w);
    w.flags = CUSHIM_LIVE_F_HANDLE | CUSHIM_LIVE_F_VMM;
    table_for_each(&shim.vmm_handles, live_one, &w);
    /* Where the VMM handles listed are mapped: the address the program uses (its handle may be
     * released, memory kept by the mapping). */
    bool any_vmm = false;
    for (uint32_t i = 0; i < w.listed; i++)
        any_vmm = any_vmm || (w.top[i].flags & CUSHIM_LIVE_F_VMM);
    if (any_vmm)
        table_for_each(&shim.vmm_maps, mapped_at, &w);
    h->listed = w.listed;
    h->count = w.count;
    h->bytes = w.bytes;
    for (uint32_t i = 0; i < w.listed; i++)
        h->rec[i] = w.top[i];
    atomic_store_explicit(&h->state, 2, memory_order_release);
}
