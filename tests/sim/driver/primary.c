/* Per-device primary contexts (cuDevicePrimaryCtx*). */
#include "ctx.h"

static CUcontext primaries[SIM_MAX_DEVICES];

/* Caller holds the context lock. */
static CUresult primary(CUdevice dev, CUcontext *out)
{
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = primaries[dev] ? CUDA_SUCCESS : sim_ctx_new(dev, true, 0, &primaries[dev]);
    *out = primaries[dev];
    return rc;
}

/* cuda.h: "Once the user successfully retains the primary context, the primary context will be
 * active and available to the user until the user releases it with cuDevicePrimaryCtxRelease()
 * or resets it with cuDevicePrimaryCtxReset(). Unlike cuCtxCreate() the newly retained context is
 * not pushed onto the stack." */
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_ENTER(cuDevicePrimaryCtxRetain);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    sim_ctx_lock();
    CUresult rc = primary(dev, &ctx);
    if (rc == CUDA_SUCCESS && !atomic_load(&ctx->active))
        rc = sim_ctx_activate(ctx);
    if (rc == CUDA_SUCCESS) {
        ctx->retains++;
        *pctx = ctx;
    }
    sim_ctx_unlock();
    return rc;
}

/* cuda.h: "The context is automatically reset once the last reference to it is released."
 * "Releasing a primary context that has not been previously retained will fail with
 * CUDA_ERROR_INVALID_CONTEXT." cuDevicePrimaryCtxReset: "it is safe for other modules to call
 * cuDevicePrimaryCtxRelease() even after resetting the device": releases of retains that a reset
 * dropped succeed and do nothing. */
static CUresult release(CUdevice dev)
{
    CUcontext ctx;
    sim_ctx_lock();
    CUresult rc = primary(dev, &ctx);
    if (rc == CUDA_SUCCESS) {
        if (ctx->retains > 0) {
            if (--ctx->retains == 0)
                sim_ctx_teardown(ctx);
        } else if (ctx->owed > 0) {
            ctx->owed--;
        } else {
            rc = CUDA_ERROR_INVALID_CONTEXT;
        }
    }
    sim_ctx_unlock();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    SIM_ENTER(cuDevicePrimaryCtxRelease);
    return release(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    SIM_ENTER(cuDevicePrimaryCtxRelease_v2);
    return release(dev);
}

/* cuda.h: "Explicitly destroys and cleans up all resources associated with the current device in
 * the current process." "Resetting the primary context does not release it, an application that
 * has retained the primary context should explicitly release its usage." The context is
 * inactive afterwards until the next cuDevicePrimaryCtxRetain. */
static CUresult reset(CUdevice dev)
{
    CUcontext ctx;
    sim_ctx_lock();
    CUresult rc = primary(dev, &ctx);
    if (rc == CUDA_SUCCESS && atomic_load(&ctx->active)) {
        sim_ctx_teardown(ctx);
        ctx->owed += ctx->retains;
        ctx->retains = 0;
    }
    sim_ctx_unlock();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    SIM_ENTER(cuDevicePrimaryCtxReset);
    return reset(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    SIM_ENTER(cuDevicePrimaryCtxReset_v2);
    return reset(dev);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_ENTER(cuDevicePrimaryCtxGetState);
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    sim_ctx_lock();
    CUresult rc = primary(dev, &ctx);
    if (rc == CUDA_SUCCESS) {
        *flags = ctx->flags;
        *active = atomic_load(&ctx->active);
    }
    sim_ctx_unlock();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    SIM_ENTER(cuDevicePrimaryCtxSetFlags_v2);
    CUcontext ctx;
    sim_ctx_lock();
    CUresult rc = primary(dev, &ctx);
    if (rc == CUDA_SUCCESS)
        ctx->flags = flags;
    sim_ctx_unlock();
    return rc;
}
