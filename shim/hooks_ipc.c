/* Memory of another process opened through CUDA IPC (kind `imported`: reported, never in the
 * device total): cuIpcOpenMemHandle (4010 and 11000 ABIs), cuIpcCloseMemHandle. The size is the
 * allocation's, from cuMemGetAddressRange_v2. cuda.h cuIpcOpenMemHandle: a handle opened again in
 * the same context gives the same pointer and increments a reference count, which
 * cuIpcCloseMemHandle decrements, unmapping at 0: one allocation, counted until its last close
 * (entry refs: opens, 0 meaning 1). */
#include "shim/shim.h"
#include "shim/track.h"

static bool ref_add(struct shim_entry *e, void *arg)
{
    (void)arg;
    if (e->kind == CUSHIM_KIND_IMPORTED)
        e->refs = (e->refs ? e->refs : 1) + 1;
    return true;
}

static bool ref_drop(struct shim_entry *e, void *arg)
{
    (void)arg;
    if (e->refs > 1)
        e->refs--;
    return true;
}

static void opened(CUresult r, CUdeviceptr p)
{
    struct shim_entry e;
    if (r == CUDA_SUCCESS && table_update(&shim.ptrs, p, ref_add, NULL, &e) &&
        e.kind == CUSHIM_KIND_IMPORTED) {
        /* Opened again: the same mapping, one more reference. */
    } else if (r == CUDA_SUCCESS) {
        CUdeviceptr base = 0;
        size_t size = 0;
        __typeof__(&cuMemGetAddressRange_v2) range = REAL(cuMemGetAddressRange_v2);
        if (range && range(&base, &size, p) == CUDA_SUCCESS)
            track_alloc(&shim.ptrs, CUSHIM_KIND_IMPORTED, p, size, 0);
    } else {
        track_fail(CUSHIM_KIND_IMPORTED);
    }
    shim_leave();
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
    if (table_get(&shim.ptrs, dptr, &e) && e.kind == CUSHIM_KIND_IMPORTED && e.refs > 1) {
        /* Not the last close: the mapping stays, one reference fewer. */
        CUresult r = real_(dptr);
        if (r == CUDA_SUCCESS)
            table_update(&shim.ptrs, dptr, ref_drop, NULL, NULL);
        shim_leave();
        return r;
    }
    FREE_TRACKED(&shim.ptrs, dptr, real_(dptr));
}
