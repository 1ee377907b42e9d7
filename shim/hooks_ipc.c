/* Memory of another process opened through CUDA IPC (kind `imported`: reported, never in the
 * device total): cuIpcOpenMemHandle (4010 and 11000 ABIs), cuIpcCloseMemHandle. The size is the
 * allocation's, from cuMemGetAddressRange_v2. cuda.h cuIpcOpenMemHandle: a handle opened again in
 * the same context gives the same pointer and increments a reference count, which
 * cuIpcCloseMemHandle decrements, unmapping at 0: one allocation, counted until its last close
 * (entry refs: opens, 0 meaning 1). Counted on the device that holds the memory; torn down with
 * the context that opened it. */
#include "shim/shim.h"
#include "shim/track.h"

/* An open, under the entry's lock (table_upsert): the address already open is one more
 * reference; an entry of another kind there was freed without the shim seeing it (the driver
 * handed the address out again) and is replaced. */
struct open_arg {
    const struct shim_entry *fresh;
    struct shim_entry old;
    bool replaced;
};

static void open_ref(struct shim_entry *e, void *arg)
{
    struct open_arg *a = arg;
    if (e->kind == CUSHIM_KIND_IMPORTED) {
        e->refs = (e->refs ? e->refs : 1) + 1;
        return;
    }
    a->old = *e;
    *e = *a->fresh;
    a->replaced = true;
}

static void opened(CUresult r, CUdeviceptr p)
{
    if (r != CUDA_SUCCESS) {
        track_fail(CUSHIM_KIND_IMPORTED);
        shim_leave();
        return;
    }
    CUdeviceptr base = 0;
    size_t size = 0;
    CUcontext ctx;
    __typeof__(&cuMemGetAddressRange_v2) range = REAL(cuMemGetAddressRange_v2);
    int device = shim_current_device(&ctx);
    /* Counted on the device that holds the memory (the exporter's), as a VMM import is, not on
     * the one current here (each rank of a custom all-reduce opens its peers' buffers with its
     * own device current): cuda.h CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "a device ordinal of a
     * device on which a pointer was allocated". The current device if the driver will not say. */
    device = shim_pointer_device(p, device);
    if (p && device >= 0 && range && range(&base, &size, p) == CUDA_SUCCESS) {
        /* Opened while a stream of the process was capturing: also counted as `capture`. */
        unsigned flags = capture_any_live() ? SHIM_F_CAPTURE : 0;
        struct shim_entry fresh = {.key = p, .size = size, .ctx = (uint64_t)(uintptr_t)ctx,
                                   .device = device, .kind = CUSHIM_KIND_IMPORTED, .refs = 1,
                                   .flags = (uint16_t)flags};
        struct open_arg a = {.fresh = &fresh};
        int rc = table_upsert(&shim.ptrs, &fresh, open_ref, &a);
        if (rc < 0)
            track_table_full();
        if (a.replaced)
            track_replaced(&a.old);
        if (rc == 0 || a.replaced) {
            if (flags)
                capture_note_bytes(size);
            account_alloc(device, CUSHIM_KIND_IMPORTED, size, flags);
        }
    }
    shim_leave();
}

/* A close, under the entry's lock: not the last reference, one fewer (the mapping stays), else
 * the entry comes out (the real close then counts as the free, or puts it back). */
static bool close_ref(struct shim_entry *e, void *arg)
{
    if (e->kind == CUSHIM_KIND_IMPORTED && e->refs > 1) {
        e->refs--;
        *(bool *)arg = true;
        return true;
    }
    return false;
}

/* A reference a failed close still holds, put back (under the entry's lock): onto the entry if
 * one is there (a concurrent open may have made it, and counted it), else as the entry again. */
static void ref_merge(struct shim_entry *e, void *arg)
{
    const struct shim_entry *back = arg;
    if (e->kind == CUSHIM_KIND_IMPORTED)
        e->refs = (e->refs ? e->refs : 1) + (back->refs ? back->refs : 1);
}

/* `counted`: its bytes are still in the counters (the last reference's entry, taken out); else
 * another close took the entry out and counted the free. */
static void put_back(const struct shim_entry *back, bool counted)
{
    struct shim_entry cur;
    bool there = table_get(&shim.ptrs, back->key, &cur) && cur.kind == CUSHIM_KIND_IMPORTED;
    int rc = table_upsert(&shim.ptrs, back, ref_merge, (void *)back);
    if (rc < 0)
        track_table_full();
    else if (rc == 1 && there && counted) /* counted by us and by the concurrent open: once */
        account_free(back->device, CUSHIM_KIND_IMPORTED, back->size, back->flags);
    else if (rc == 0 && !counted)
        account_alloc(back->device, CUSHIM_KIND_IMPORTED, back->size, back->flags);
}

SHIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                                   unsigned int Flags)
{
    REAL_OR_FAIL(cuIpcOpenMemHandle_v2);
    if (!shim_enter())
        return real_(pdptr, handle, Flags);
    CUresult r = real_(pdptr, handle, Flags);
    opened(r, r == CUDA_SUCCESS ? *pdptr : 0);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                                unsigned int Flags)
{
    REAL_OR_FAIL(cuIpcOpenMemHandle);
    if (!shim_enter())
        return real_(pdptr, handle, Flags);
    CUresult r = real_(pdptr, handle, Flags);
    opened(r, r == CUDA_SUCCESS ? *pdptr : 0);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    REAL_OR_FAIL(cuIpcCloseMemHandle);
    if (!shim_enter())
        return real_(dptr);
    struct shim_entry e;
    bool dropped = false;
    if (!dptr || !table_update(&shim.ptrs, dptr, close_ref, &dropped, &e)) {
        /* Never seen: forwarded, result returned unchanged. */
        shim_leave();
        return real_(dptr);
    }
    CUresult r = real_(dptr);
    if (r == CUDA_SUCCESS && !dropped) {
        track_free_late(&shim.ptrs, &e, true);
    } else if (r != CUDA_SUCCESS && e.kind != CUSHIM_KIND_IMPORTED) {
        track_free_late(&shim.ptrs, &e, false); /* not an IPC mapping: as it was */
    } else if (r != CUDA_SUCCESS) {
        struct shim_entry back = e;
        back.refs = dropped ? 1 : (e.refs ? e.refs : 1);
        put_back(&back, !dropped);
    }
    shim_leave();
    return r;
}
