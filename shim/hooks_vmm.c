/* Virtual memory management (DESIGN.md, kind `vmm`; PyTorch's expandable segments). Physical
 * memory made by cuMemCreate lives until its handle is released (cuMemRelease, once per
 * cuMemCreate and per cuMemRetainAllocationHandle) *and* every mapping of it is unmapped (cuda.h
 * doc of cuMemRelease and cuMemUnmap), so the shim counts it from creation until both hold.
 * Handles imported from another process (cuMemImportFromShareableHandle) count as `imported`,
 * sized by their first mapping, unless they are multicast objects (hooks_multicast.c). */
#include <string.h>

#include "shim/account.h"
#include "shim/arena.h"
#include "shim/budget.h"
#include "shim/capture.h"
#include "shim/shim.h"
#include "shim/track.h"

/* ---- handle table updates (run under the shard lock: arithmetic only) ---- */
static bool ref_add(struct shim_entry *e, void *arg)
{
    e->refs += (uint32_t)(uintptr_t)arg;
    return true;
}

/* arg (if not NULL): a bool set when a reference was there to drop (handle_drop_after undoes
 * only a drop that happened). */
static bool ref_drop(struct shim_entry *e, void *arg)
{
    if (e->refs > 0) {
        e->refs--;
        if (arg)
            *(bool *)arg = true;
    }
    return e->refs > 0 || e->maps > 0;
}

static void import_ref(struct shim_entry *e, void *arg)
{
    (void)arg;
    e->refs++;
}

struct map_arg {
    uint64_t size;
    int first_size; /* out: this mapping sized an imported handle */
};

static bool map_add(struct shim_entry *e, void *arg)
{
    struct map_arg *m = arg;
    e->maps++;
    if (e->kind == CUSHIM_KIND_IMPORTED && e->size == 0 && !(e->flags & SHIM_F_MULTICAST)) {
        e->size = m->size;
        m->first_size = 1;
    }
    return true;
}

static bool map_drop(struct shim_entry *e, void *arg)
{
    if (e->maps > 0) {
        e->maps--;
        if (arg)
            *(bool *)arg = true;
    }
    return e->refs > 0 || e->maps > 0;
}

static bool map_undo(struct shim_entry *e, void *arg)
{
    (void)arg;
    e->maps++;
    return true;
}

/* A reference or a mapping of `handle` dropped (fn: ref_drop or map_drop) before the real call
 * that ends it: once the driver has freed the handle, another thread's cuMemCreate may get the
 * same value, and an update made after would land on that new handle's entry. A handle that
 * leaves the table so is counted freed before the call too (account.h account_free_early). */
struct handle_drop {
    bool found, removed;    /* the entry was there; it left the table (no reference, no mapping) */
    bool dropped;           /* a reference or mapping was there to drop, and was */
    struct shim_entry left; /* the entry as the drop left it */
};

static struct handle_drop handle_drop_before(uint64_t handle, bool (*fn)(struct shim_entry *, void *))
{
    struct handle_drop d = {0};
    d.found = table_update(&shim.vmm_handles, handle, fn, &d.dropped, &d.left);
    d.removed = d.found && d.left.refs == 0 && d.left.maps == 0;
    if (d.removed && d.left.size)
        account_free_early(d.left.device, (enum cushim_kind)d.left.kind, d.left.size, d.left.flags);
    return d;
}

/* A handle's entry put back after a refused call. One the table cannot take back (out of
 * memory) is counted freed, as its release will not be seen. */
static void handle_put_back(const struct shim_entry *e)
{
    if (table_put_back(&shim.vmm_handles, e, NULL) >= 0)
        return;
    track_table_full();
    if (e->size)
        account_free(e->device, (enum cushim_kind)e->kind, e->size, e->flags);
}

/* After the real call: a handle that left the table gives the budget its share back if the call
 * succeeded; else the drop is undone (the handle is still alive: its value cannot have been
 * reused), and a handle counted freed is counted back. `is_map`: the drop was a mapping's. */
static void handle_drop_after(const struct handle_drop *d, CUresult r, bool is_map)
{
    if (!d->found)
        return;
    const struct shim_entry *g = &d->left;
    if (r == CUDA_SUCCESS) {
        /* Only under a budget; a handle kept without a record (cuMemCreate gave its reservation
         * back then) has none to give back. */
        if (d->removed && g->size && unlikely(budget_any) && account_record(g->device))
            account_free_budget(g->device, (enum cushim_kind)g->kind, g->size, g->flags);
        return;
    }
    if (d->removed && g->size)
        account_unfree(g->device, (enum cushim_kind)g->kind, g->size, g->flags);
    if (!d->dropped) {
        /* Nothing was dropped (a second release of a handle still mapped): nothing to undo; an
         * entry the drop found empty and took out goes back as it was. */
        if (d->removed)
            handle_put_back(&d->left);
        return;
    }
    if (d->removed) {
        struct shim_entry e = d->left;
        if (is_map)
            e.maps = 1;
        else
            e.refs = 1;
        handle_put_back(&e);
    } else if (is_map) {
        table_update(&shim.vmm_handles, d->left.key, map_undo, NULL, NULL);
    } else {
        table_update(&shim.vmm_handles, d->left.key, ref_add, (void *)(uintptr_t)1, NULL);
    }
}

/* A mapping (an entry of shim.vmm_maps) unmapped unseen, or one the table could not keep (its
 * unmap will not be seen): its handle's mapping goes now. Nothing for an untracked one's (a
 * multicast object's). */
static void mapping_gone(const struct shim_entry *m)
{
    if (m->flags & SHIM_F_UNTRACKED)
        return;
    struct handle_drop d = handle_drop_before(m->aux, map_drop);
    handle_drop_after(&d, CUDA_SUCCESS, true);
}

SHIM_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                         const CUmemAllocationProp *prop, unsigned long long flags)
{
    REAL_OR_FAIL(cuMemCreate);
    /* A NULL output or property struct is the driver's to refuse, before any budget decision. */
    if (!handle || !prop || !shim_enter())
        return real_(handle, size, prop, flags);
    CUcontext ctx;
    int device = shim_current_device(&ctx);
    enum cushim_kind kind = CUSHIM_KIND_VMM;
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        device = prop->location.id; /* DESIGN.md: prop->location.id, not the current device */
    } else if (prop) {
        /* Host memory counts on the current device, or on device 0 from a thread with none
         * (cuda.h cuMemCreate: "not associated with any CUDA context"; the location id "is
         * ignored for HOST allocations"): it was in no figure (a review). */
        kind = CUSHIM_KIND_PINNED_HOST;
        if (device < 0)
            device = 0;
    }
    /* Physical device memory counts against the budget (CUSHIM_DEVICE_LIMIT), reserved before the
     * call (its memory is in the budget before the driver makes it; a trial that saw the device
     * total pass the limit under VMM and pool churn with the check after the call had hit a
     * served pool request's race, budget.c, which the later check only made likelier). Over it,
     * the refusal is not said yet: the driver's refusal of the arguments comes first (a size not
     * a multiple of the granularity, an unknown device, a bad type or flags: its
     * CUDA_ERROR_INVALID_VALUE or _INVALID_DEVICE, not a budget's out of memory; a
     * numeric-extremes trial), so the request is made all the same, and a handle the driver
     * grants is released at once and refused (kept, counted past the budget, if a capture that
     * prohibits the shim's own calls is live or the release fails). */
    bool reserved = kind == CUSHIM_KIND_VMM && budget_any;
    uint64_t served;
    bool over = kind == CUSHIM_KIND_VMM && !budget_reserve_in(device, size, 0, 0, &served, false);
    CUmemGenericAllocationHandle handle_was = *handle; /* given back with a refusal */
    CUresult r = real_(handle, size, prop, flags);
    if (over && r == CUDA_SUCCESS) {
        __typeof__(&cuMemRelease) release = REAL(cuMemRelease);
        CUresult released = CUDA_ERROR_NOT_PERMITTED;
        if (release && capture_unsafe_begin()) {
            released = release(*handle);
            capture_unsafe_end();
        }
        if (released == CUDA_SUCCESS) {
            *handle = handle_was;
            r = CUDA_ERROR_OUT_OF_MEMORY;
            budget_say_refused(device, size);
        } else {
            budget_reserve_always(device, size);
            over = false; /* in the budget now */
        }
    } else if (over && r == CUDA_ERROR_OUT_OF_MEMORY) {
        budget_say_refused(device, size); /* the budget's refusal too */
    }
    if (r == CUDA_SUCCESS) {
        unsigned eflags = reserved ? SHIM_F_RESERVED : 0;
        struct shim_entry e = {.key = *handle, .size = size, .device = device,
                               .kind = (uint16_t)kind, .flags = (uint16_t)eflags, .refs = 1};
        struct shim_entry old;
        int put = table_put(&shim.vmm_handles, &e, &old);
        if (put == 1 && old.size)
            account_free(old.device, (enum cushim_kind)old.kind, old.size, old.flags);
        /* Without a record (account_alloc counts nothing) its release frees nothing from the
         * budget either: given back now, as when the table is full. */
        struct cushim_device_record *rec = put >= 0 ? account_record(device) : NULL;
        if (rec)
            account_alloc_to(rec, device, kind, size, eflags, false);
        else if (reserved)
            budget_release(device, size);
    } else {
        if (reserved && !over)
            budget_release(device, size);
        account_fail(device, kind);
    }
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    REAL_OR_FAIL(cuMemRelease);
    if (handle == 0 || !shim_enter()) /* 0: the driver's to refuse (and is no key of the table) */
        return real_(handle);
    struct handle_drop d = handle_drop_before(handle, ref_drop);
    CUresult r = real_(handle);
    handle_drop_after(&d, r, false);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
                                                         void *addr)
{
    REAL_OR_FAIL(cuMemRetainAllocationHandle);
    if (!shim_enter())
        return real_(handle, addr);
    CUresult r = real_(handle, addr);
    if (r == CUDA_SUCCESS)
        table_update(&shim.vmm_handles, *handle, ref_add, (void *)(uintptr_t)1, NULL);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                            void *osHandle,
                                                            CUmemAllocationHandleType shHandleType)
{
    REAL_OR_FAIL(cuMemImportFromShareableHandle);
    if (!shim_enter())
        return real_(handle, osHandle, shHandleType);
    CUresult r = real_(handle, osHandle, shHandleType);
    if (r == CUDA_SUCCESS) {
        /* The device the memory is on is the handle's (cuda.h
         * cuMemGetAllocationPropertiesFromHandle: "the properties used to create the handle"),
         * which need not be the current one, and the import needs no context; host memory
         * counts on the current context's device. */
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        __typeof__(&cuMemGetAllocationPropertiesFromHandle) props = REAL(cuMemGetAllocationPropertiesFromHandle);
        int device = props && props(&prop, *handle) == CUDA_SUCCESS &&
                             prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE
                         ? prop.location.id
                         : shim_current_device(NULL);
        /* cuda.h: "There is no guarantee that the contents of handle will be the same CUDA
         * memory handle for the same given OS shareable handle": it may be one this process
         * already holds (its own export, or a second import), which is then one reference more. */
        struct shim_entry e = {.key = *handle, .size = 0, .device = device,
                               .kind = CUSHIM_KIND_IMPORTED, .refs = 1};
        table_upsert(&shim.vmm_handles, &e, import_ref, NULL);
    } else {
        track_fail(CUSHIM_KIND_IMPORTED);
    }
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                      CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    REAL_OR_FAIL(cuMemMap);
    if (!shim_enter())
        return real_(ptr, size, offset, handle, flags);
    CUresult r = real_(ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS) {
        struct map_arg m = {.size = size};
        struct shim_entry h;
        struct shim_entry e = {.key = ptr, .size = size, .aux = handle};
        if (table_update(&shim.vmm_handles, handle, map_add, &m, &h)) {
            e.device = h.device;
            if (m.first_size)
                account_alloc(h.device, CUSHIM_KIND_IMPORTED, size, 0);
        } else {
            /* A handle in no table (a multicast object made here): its mapping is kept too,
             * marked, so that an unmap of it and of counted mappings after it in one call
             * (cuda.h cuMemUnmap: several contiguous mappings) walks past it. */
            e.device = -1;
            e.flags = SHIM_F_UNTRACKED;
        }
        struct shim_entry old;
        int put = table_put(&shim.vmm_maps, &e, &old);
        if (put < 0) {
            track_table_full();
            /* Not kept: it must not hold its handle's memory counted for ever. */
            mapping_gone(&e);
        } else if (put == 1) {
            /* A mapping still listed where the driver just mapped: it was unmapped unseen. */
            mapping_gone(&old);
        }
    }
    shim_leave();
    return r;
}

#define UNMAP_BATCH 64 /* on the caller's stack: about 7 KiB; more from the arena */

/* One mapping an unmap takes out before its real call, and its handle's drop. */
struct unmap_item {
    struct shim_entry e;
    struct handle_drop d;
};

SHIM_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    REAL_OR_FAIL(cuMemUnmap);
    if (ptr == 0 || !shim_enter()) /* 0 maps nothing (and is no key of the tables) */
        return real_(ptr, size);
    /* cuda.h (cuMemUnmap): the range is whole mappings, possibly several contiguous ones. Every
     * one is taken out before the real call and put back if it fails: once the call returns, "the
     * address range is converted to an address reservation" (cuda.h) that another thread may map
     * again at once, so a mapping still in the table then would be taken for that new one (a
     * review: mappings past the first 64 were settled after the call, and a racing cuMemMap's
     * count went with them). Past UNMAP_BATCH the list grows in the arena; only if it cannot are
     * the rest settled after the call. */
    struct unmap_item stack_items[UNMAP_BATCH], *items = stack_items;
    unsigned n = 0, cap = UNMAP_BATCH;
    uint64_t at = ptr, end = ptr + size;
    while (at < end) {
        if (n == cap) {
            struct unmap_item *more = items == stack_items ? arena_alloc(2 * cap * sizeof *more)
                                                           : arena_grow(items, n * sizeof *items, cap * sizeof *items,
                                                                        2 * cap * sizeof *items);
            if (!more)
                break;
            if (items == stack_items)
                memcpy(more, stack_items, n * sizeof *more);
            items = more;
            cap *= 2;
        }
        if (!table_take(&shim.vmm_maps, at, &items[n].e))
            break;
        at += items[n].e.size ? items[n].e.size : end;
        n++;
    }
    /* Their handles' mappings too: a handle already released is freed by this unmap, and its
     * value may be another thread's new handle as soon as the call returns. */
    for (unsigned i = 0; i < n; i++)
        items[i].d = items[i].e.flags & SHIM_F_UNTRACKED ? (struct handle_drop){0}
                                                          : handle_drop_before(items[i].e.aux, map_drop);
    CUresult r = real_(ptr, size);
    /* Settled last first: undone, a handle mapped twice in the range gets back its later drop
     * (on the entry the earlier one put back) after its earlier one. */
    for (unsigned i = n; i-- > 0;) {
        handle_drop_after(&items[i].d, r, true);
        if (r != CUDA_SUCCESS && table_put_back(&shim.vmm_maps, &items[i].e, NULL) < 0) {
            /* Lost, its unmap will not be seen: its handle's mapping goes now (as in cuMemMap). */
            track_table_full();
            mapping_gone(&items[i].e);
        }
    }
    if (items != stack_items)
        arena_free(items, cap * sizeof *items);
    /* Mappings the arena had no room for, settled after the call. */
    struct shim_entry m;
    while (r == CUDA_SUCCESS && at < end && table_take(&shim.vmm_maps, at, &m)) {
        mapping_gone(&m);
        at += m.size ? m.size : end;
    }
    shim_leave();
    return r;
}
