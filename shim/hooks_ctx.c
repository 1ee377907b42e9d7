/* Context teardown frees memory without any free call (DESIGN.md): cuCtxDestroy (and _v2), the
 * cuCtxDetach that ends a context,
 * cuDevicePrimaryCtxReset (and _v2; cudaDeviceReset), and the last cuDevicePrimaryCtxRelease
 * (cuda.h: "the context is automatically reset once the last reference to it is released") drop
 * every tracked allocation of that context. */
#include "shim/offload.h"
#include "shim/shim.h"

/* Before a call that may end ctx: allocations counted without their context learn it
 * (shim_resolve_contexts), while the driver can still say; offloaded frees of the context are
 * held back until its teardown is settled (offload_context_closing). Returns whether they are. */
static bool before_teardown(CUcontext ctx)
{
    bool held = false;
    if (shim_enter()) {
        shim_resolve_contexts(ctx);
        held = offload_context_closing((uint64_t)(uintptr_t)ctx);
        shim_leave();
    }
    return held;
}

static CUresult destroyed(CUresult r, CUcontext ctx, bool held)
{
    if (r == CUDA_SUCCESS && shim_enter()) {
        shim_drop_context(ctx);
        shim_context_forget(ctx);
        shim_leave();
    }
    if (held)
        offload_context_settled((uint64_t)(uintptr_t)ctx);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    REAL_OR_FAIL(cuCtxDestroy_v2);
    bool held = before_teardown(ctx);
    return destroyed(real_(ctx), ctx, held);
}

SHIM_EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
    REAL_OR_FAIL(cuCtxDestroy);
    bool held = before_teardown(ctx);
    return destroyed(real_(ctx), ctx, held);
}

/* cuda.h cuCtxDetach (deprecated, and looked up by cudart 13.0: ../shared/reference/): "Decrements
 * the usage count of the context ctx, and destroys the context if the usage count goes to 0". No
 * call tells the count: whether it ended is asked of the handle afterwards (cuCtxGetApiVersion:
 * the driver answers CUDA_ERROR_CONTEXT_IS_DESTROYED for a destroyed context, cuda.h cuCtxDestroy:
 * "attempting to access ctx from those threads will result in the error
 * CUDA_ERROR_CONTEXT_IS_DESTROYED"; INVALID_CONTEXT is taken the same way). A context another
 * thread creates meanwhile under the same handle would answer for it: the ended one's allocations
 * then stay counted (the API leaves no way to tell). Nothing is asked when the shim is off. */
SHIM_EXPORT CUresult CUDAAPI cuCtxDetach(CUcontext ctx)
{
    REAL_OR_FAIL(cuCtxDetach);
    if (!shim_enter()) /* off (CUSHIM_DISABLE, a copy standing aside) or nested: nothing added */
        return real_(ctx);
    shim_resolve_contexts(ctx);
    bool held = offload_context_closing((uint64_t)(uintptr_t)ctx);
    shim_leave();
    CUresult r = real_(ctx);
    if (r == CUDA_SUCCESS && shim_enter()) {
        __typeof__(&cuCtxGetApiVersion) ask = REAL(cuCtxGetApiVersion);
        unsigned version;
        CUresult q = ask ? ask(ctx, &version) : CUDA_SUCCESS;
        if (q == CUDA_ERROR_CONTEXT_IS_DESTROYED || q == CUDA_ERROR_INVALID_CONTEXT) {
            shim_drop_context(ctx);
            shim_context_forget(ctx);
        }
        shim_leave();
    }
    if (held)
        offload_context_settled((uint64_t)(uintptr_t)ctx);
    return r;
}

/* The primary context of dev, looked up before the call that may end it (its offloaded frees
 * held back meanwhile: *held, as before_teardown). */
static CUcontext primary_before(CUdevice dev, bool *counting, bool *held)
{
    *held = false;
    *counting = shim_enter();
    if (!*counting)
        return NULL;
    CUcontext ctx = shim_primary_context(dev); /* NULL when not active: nothing to end */
    if (ctx) {
        shim_resolve_contexts(ctx);
        *held = offload_context_closing((uint64_t)(uintptr_t)ctx);
    }
    return ctx;
}

static CUresult reset_done(CUresult r, CUcontext ctx, bool counting, bool held)
{
    if (counting) {
        if (r == CUDA_SUCCESS && ctx)
            shim_drop_context(ctx);
        shim_leave();
    }
    if (held)
        offload_context_settled((uint64_t)(uintptr_t)ctx);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    REAL_OR_FAIL(cuDevicePrimaryCtxReset_v2);
    bool counting, held;
    CUcontext ctx = primary_before(dev, &counting, &held);
    return reset_done(real_(dev), ctx, counting, held);
}

SHIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    REAL_OR_FAIL(cuDevicePrimaryCtxReset);
    bool counting, held;
    CUcontext ctx = primary_before(dev, &counting, &held);
    return reset_done(real_(dev), ctx, counting, held);
}

/* After a release, the context is gone only if the primary context is no longer active. */
static CUresult release_done(CUresult r, CUdevice dev, CUcontext ctx, bool counting, bool held)
{
    unsigned flags;
    int active = 1;
    __typeof__(&cuDevicePrimaryCtxGetState) state = REAL(cuDevicePrimaryCtxGetState);
    if (counting && r == CUDA_SUCCESS && ctx && state && state(dev, &flags, &active) == CUDA_SUCCESS &&
        !active)
        shim_drop_context(ctx);
    if (counting)
        shim_leave();
    if (held)
        offload_context_settled((uint64_t)(uintptr_t)ctx);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    REAL_OR_FAIL(cuDevicePrimaryCtxRelease_v2);
    bool counting, held;
    CUcontext ctx = primary_before(dev, &counting, &held);
    return release_done(real_(dev), dev, ctx, counting, held);
}

SHIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    REAL_OR_FAIL(cuDevicePrimaryCtxRelease);
    bool counting, held;
    CUcontext ctx = primary_before(dev, &counting, &held);
    return release_done(real_(dev), dev, ctx, counting, held);
}
