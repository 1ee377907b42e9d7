/* Created contexts and the per-thread context stack (cuCtx*). Primary contexts: primary.c.
 *
 * Teardown (cuCtxDestroy_v2, cuCtxDetach at a usage count of 0, cuDevicePrimaryCtxReset(_v2), the
 * last primary release) frees every allocation made in the context: device, managed, pinned host,
 * registered host, arrays and imported IPC mappings, then gives back SIMCUDA_CTX_OVERHEAD. When
 * no active context is left on the device, the pools' and the graph allocator's unused reserve
 * is released too. VMM handles, graph allocations and stream-ordered allocations survive: cuda.h
 * cuCtxDestroy, "will not destroy memory allocations by cuMemCreate(), cuMemAllocAsync() and
 * cuMemAllocFromPoolAsync(). These memory allocations are not associated with any CUDA context".
 */
#include <pthread.h>
#include <stdlib.h>

#include "capture.h"
#include "ctx.h"
#include "pool.h"
#include "stream.h"

#define CTX_MAGIC 0x43545831u
#define STACK_MAX 32

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Every context ever made: handles stay readable after cuCtxDestroy (CONTEXT_IS_DESTROYED). */
static struct CUctx_st *contexts;
static unsigned active_count[SIM_MAX_DEVICES];
/* initial-exec: a few bytes of static TLS, read without __tls_get_addr on every call. */
static __thread CUcontext stack[STACK_MAX] __attribute__((tls_model("initial-exec")));
static __thread unsigned depth __attribute__((tls_model("initial-exec")));

void sim_ctx_lock(void)
{
    pthread_mutex_lock(&lock);
}

void sim_ctx_unlock(void)
{
    pthread_mutex_unlock(&lock);
}

static bool valid(CUcontext ctx)
{
    return ctx && ctx->magic == CTX_MAGIC;
}

/* `ctx`, or the current context when NULL, checked like sim_ctx_current. */
static CUresult resolve(CUcontext ctx, CUcontext *out)
{
    if (!ctx)
        return sim_ctx_current(out);
    if (!valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&ctx->active))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = ctx;
    return CUDA_SUCCESS;
}

/* cuda.h, cuCtxDestroy: "If ctx is current to other threads, then ctx will remain current to
 * those threads, and attempting to access ctx from those threads will result in the error
 * CUDA_ERROR_CONTEXT_IS_DESTROYED." */
CUresult sim_ctx_current(CUcontext *ctx)
{
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&stack[depth - 1]->active))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *ctx = stack[depth - 1];
    return CUDA_SUCCESS;
}

CUresult sim_ctx_check(CUcontext ctx)
{
    if (!valid(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return atomic_load(&ctx->active) ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* Caller holds the context lock. */
CUresult sim_ctx_new(int dev, bool primary, unsigned flags, CUcontext *out)
{
    CUcontext ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ctx = (struct CUctx_st){.magic = CTX_MAGIC, .dev = dev, .primary = primary, .flags = flags};
    CUresult rc = sim_stream_builtin(ctx, SIM_STREAM_LEGACY, &ctx->legacy);
    if (rc != CUDA_SUCCESS) {
        free(ctx);
        return rc;
    }
    ctx->next = contexts;
    contexts = ctx;
    *out = ctx;
    return CUDA_SUCCESS;
}

/* Caller holds the context lock. An active context holds SIMCUDA_CTX_OVERHEAD of its device. */
CUresult sim_ctx_activate(CUcontext ctx)
{
    CUresult rc = sim_account(ctx->dev, SIM_NO_KIND, 0, (int64_t)sim_cfg.ctx_overhead);
    if (rc == CUDA_SUCCESS) {
        atomic_store(&ctx->active, true);
        active_count[ctx->dev]++;
    }
    return rc;
}

/* Caller holds the context lock. */
void sim_ctx_teardown(CUcontext ctx)
{
    atomic_store(&ctx->active, false);
    sim_mem_release_ctx(ctx);
    sim_array_release_ctx(ctx);
    sim_ipc_release_ctx(ctx);
    sim_account(ctx->dev, SIM_NO_KIND, 0, -(int64_t)sim_cfg.ctx_overhead);
    if (--active_count[ctx->dev] == 0) {
        sim_pool_device_idle(ctx->dev);
        sim_graph_mem_device_idle(ctx->dev);
    }
}

static void push(CUcontext ctx, bool replace_top)
{
    if (replace_top && depth > 0)
        stack[depth - 1] = ctx;
    else if (depth < STACK_MAX)
        stack[depth++] = ctx;
}

static CUcontext pop(void)
{
    return depth > 0 ? stack[--depth] : NULL;
}

/* cuCtxSynchronize completes the context's work and applies the pools' release thresholds. */
static void sync_ctx(CUcontext ctx)
{
    atomic_store(&ctx->synced_at, sim_epoch_next());
    sim_pool_apply_thresholds(ctx->dev);
}

static CUresult create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    if (depth == STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUcontext ctx;
    pthread_mutex_lock(&lock);
    CUresult rc = sim_ctx_new(dev, false, flags, &ctx);
    if (rc == CUDA_SUCCESS) {
        ctx->usage = 1;
        rc = sim_ctx_activate(ctx);
        ctx->destroyed = rc != CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    if (rc == CUDA_SUCCESS) {
        push(ctx, false); /* cuda.h: the new context is made current (pushed) */
        *pctx = ctx;
    }
    return rc;
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v2);
    return create(pctx, flags, dev);
}

/* Execution affinity is not modelled. */
CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                unsigned int flags, CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v3);
    (void)paramsArray;
    (void)numParams;
    return create(pctx, flags, dev);
}

/* Affinity and CIG parameters are not modelled. */
CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                                CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v4);
    (void)ctxCreateParams;
    return create(pctx, flags, dev);
}

/* cuda.h, cuCtxDestroy: "Destroys and cleans up all resources associated with the context."
 * "If ctx is current to the calling thread then ctx will also be popped from the current
 * thread's context stack". Primary contexts are released or reset, not destroyed. */
CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    SIM_ENTER(cuCtxDestroy_v2);
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid(ctx) || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    CUresult rc = ctx->destroyed ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        ctx->destroyed = true;
        sim_ctx_teardown(ctx);
    }
    pthread_mutex_unlock(&lock);
    if (rc == CUDA_SUCCESS && depth > 0 && stack[depth - 1] == ctx)
        depth--;
    return rc;
}

/* cuda.h, cuCtxAttach (deprecated): "Increments the usage count of the context and passes back a
 * context handle in *pctx that must be passed to cuCtxDetach() when the application is done with
 * the context. cuCtxAttach() fails if there is no context current to the thread. Currently, the
 * flags parameter must be 0." */
CUresult CUDAAPI cuCtxAttach(CUcontext *pctx, unsigned int flags)
{
    SIM_ENTER(cuCtxAttach);
    if (!pctx || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx;
    CUresult rc = sim_ctx_current(&ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&lock);
    ctx->usage++;
    pthread_mutex_unlock(&lock);
    *pctx = ctx;
    return CUDA_SUCCESS;
}

/* cuda.h, cuCtxDetach (deprecated): "Decrements the usage count of the context ctx, and destroys
 * the context if the usage count goes to 0. The context must be a handle that was passed back by
 * cuCtxCreate() or cuCtxAttach(), and must be current to the calling thread." Destroyed, it is
 * popped as cuCtxDestroy pops it. A primary context (cuCtxAttach passed it back) counts its
 * attaches here, its life being the retains' (cuDevicePrimaryCtxRelease): a detach takes one back
 * and ends nothing; one more than the attaches is CUDA_ERROR_INVALID_CONTEXT. */
CUresult CUDAAPI cuCtxDetach(CUcontext ctx)
{
    SIM_ENTER(cuCtxDetach);
    if (!valid(ctx) || depth == 0 || stack[depth - 1] != ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&lock);
    CUresult rc = ctx->destroyed || (ctx->primary && ctx->usage == 0) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
    bool ended = false;
    if (rc == CUDA_SUCCESS && ctx->primary) {
        ctx->usage--;
    } else if (rc == CUDA_SUCCESS && --ctx->usage == 0) {
        ctx->destroyed = ended = true;
        sim_ctx_teardown(ctx);
    }
    pthread_mutex_unlock(&lock);
    if (ended)
        depth--;
    return rc;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    SIM_ENTER(cuCtxPushCurrent_v2);
    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!valid(ctx) || ctx->destroyed)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == STACK_MAX)
        return CUDA_ERROR_OUT_OF_MEMORY;
    push(ctx, false);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    SIM_ENTER(cuCtxPopCurrent_v2);
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext ctx = pop();
    if (pctx)
        *pctx = ctx;
    return CUDA_SUCCESS;
}

/* cuda.h, cuCtxSetCurrent: "If there exists a CUDA context stack on the calling CPU thread, this
 * will replace the top of that stack with ctx. If ctx is NULL then this will be equivalent to
 * popping the top of the calling CPU thread's CUDA context stack". */
CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    SIM_ENTER(cuCtxSetCurrent);
    if (!ctx) {
        pop();
        return CUDA_SUCCESS;
    }
    if (!valid(ctx) || ctx->destroyed)
        return CUDA_ERROR_INVALID_CONTEXT;
    push(ctx, true);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_ENTER(cuCtxGetCurrent);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = depth > 0 ? stack[depth - 1] : NULL;
    return CUDA_SUCCESS;
}

static CUresult get_device(CUdevice *device, CUcontext ctx)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUcontext c;
    CUresult rc = resolve(ctx, &c);
    if (rc == CUDA_SUCCESS)
        *device = c->dev;
    return rc;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    SIM_ENTER(cuCtxGetDevice);
    return get_device(device, NULL);
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    SIM_ENTER(cuCtxGetDevice_v2);
    return get_device(device, ctx);
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    SIM_ENTER(cuCtxGetFlags);
    CUcontext ctx;
    CUresult rc = flags ? sim_ctx_current(&ctx) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *flags = ctx->flags;
    return rc;
}

/* cuda.h, cuCtxGetApiVersion: "Returns a version number in version corresponding to the
 * capabilities of the context (e.g. 3010 or 3020)". */
CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    SIM_ENTER(cuCtxGetApiVersion);
    CUcontext c;
    CUresult rc = version ? resolve(ctx, &c) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *version = 3020;
    return rc;
}

/* Synchronization is potentially unsafe during stream capture (cuThreadExchangeStreamCaptureMode). */
static CUresult synchronize(CUcontext ctx)
{
    CUresult rc = sim_capture_unsafe();
    CUcontext c;
    if (rc == CUDA_SUCCESS)
        rc = resolve(ctx, &c);
    if (rc == CUDA_SUCCESS)
        sync_ctx(c);
    return rc;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    SIM_ENTER(cuCtxSynchronize);
    return synchronize(NULL);
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    SIM_ENTER(cuCtxSynchronize_v2);
    return synchronize(ctx);
}
