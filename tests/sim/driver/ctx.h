/* Contexts: per-device primary contexts, created contexts, the per-thread context stack. */
#ifndef SIM_CTX_H
#define SIM_CTX_H

#include <stdatomic.h>

#include "sim.h"

struct CUstream_st;

struct CUctx_st {
    uint32_t magic;
    int dev;
    bool primary;
    atomic_bool active;     /* holds SIMCUDA_CTX_OVERHEAD; false once reset/destroyed */
    bool destroyed;         /* a created context after cuCtxDestroy (the handle stays readable) */
    unsigned flags;
    unsigned usage;         /* created: cuCtxCreate's 1 + cuCtxAttach - cuCtxDetach */
    unsigned retains;       /* primary: outstanding cuDevicePrimaryCtxRetain */
    unsigned owed;          /* primary: retains a reset dropped; their releases still succeed */
    struct CUstream_st *legacy; /* this context's NULL / CU_STREAM_LEGACY stream */
    _Atomic uint64_t synced_at; /* epoch of the last cuCtxSynchronize (SIMCUDA_LAZY_EVENTS) */
    struct CUctx_st *next;
};

/* The calling thread's current context: CUDA_ERROR_INVALID_CONTEXT without one,
 * CUDA_ERROR_CONTEXT_IS_DESTROYED when it was reset or destroyed meanwhile. */
CUresult sim_ctx_current(CUcontext *ctx);

/* A context named by a call (cuMemcpyPeer's dstContext/srcContext): CUDA_ERROR_INVALID_CONTEXT
 * for NULL or a handle that is no context, CUDA_ERROR_CONTEXT_IS_DESTROYED once reset/destroyed. */
CUresult sim_ctx_check(CUcontext ctx);

CUresult sim_ctx_new(int dev, bool primary, unsigned flags, CUcontext *out);
CUresult sim_ctx_activate(CUcontext ctx);
void sim_ctx_teardown(CUcontext ctx);
void sim_ctx_lock(void);
void sim_ctx_unlock(void);

/* Teardown hooks of the areas that own per-context objects (allocations, arrays, IPC mappings),
 * and of the device-level caches released when a device has no active context left. */
void sim_mem_release_ctx(CUcontext ctx);
void sim_array_release_ctx(CUcontext ctx);
void sim_ipc_release_ctx(CUcontext ctx);
void sim_pool_device_idle(int dev);
void sim_graph_mem_device_idle(int dev);

#endif
