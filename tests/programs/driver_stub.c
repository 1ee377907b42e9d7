/* libdriverstub.so: a lazy driver stub, as libraries ship them: each cu* function looks the real
 * one up in libcuda.so.1 (dlopen + dlsym by handle) at its first call and forwards to it. Preloaded
 * behind the shim, the shim's real function for cuMemAlloc_v2 is the stub's, and the stub's lookup
 * of the driver's own must not come back as the shim's wrapper. */
#include <cuda.h>
#include <dlfcn.h>
#include <stddef.h>

static void *driver(void)
{
    static void *h;
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h;
}

#define FORWARD(name, params, args)                                          \
    CUresult CUDAAPI name params;                                            \
    CUresult CUDAAPI name params                                             \
    {                                                                        \
        static CUresult(CUDAAPI * f) params;                                 \
        if (!f)                                                              \
            f = (CUresult(CUDAAPI *) params)dlsym(driver(), #name);          \
        return f ? f args : CUDA_ERROR_NOT_INITIALIZED;                      \
    }

FORWARD(cuInit, (unsigned flags), (flags))
FORWARD(cuDevicePrimaryCtxRetain, (CUcontext * c, CUdevice d), (c, d))
FORWARD(cuCtxSetCurrent, (CUcontext c), (c))
FORWARD(cuMemAlloc_v2, (CUdeviceptr * p, size_t n), (p, n))
FORWARD(cuMemFree_v2, (CUdeviceptr p), (p))
#ifdef WITH_VERSION
/* libdriverstubv.so: a full forwarder (HAMi's libvgpu.so, say) forwards this one too. */
FORWARD(cuDriverGetVersion, (int *v), (v))
#endif
