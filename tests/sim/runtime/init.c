/* Runtime initialization and contexts, as cudart 13.0 does it (README.md): on the first call
 * (pthread_once) an atexit handler is registered, then dlopen("libcuda.so.1", RTLD_NOW),
 * dlsym(h, "cuGetProcAddress_v2"), one probe with an empty name (version 0, flags 0, NULL
 * status), every lookup of cudart13-driver-lookups.txt in order, then cuInit(0). Contexts are the
 * primary ones (cuDevicePrimaryCtxRetain + cuCtxSetCurrent), made lazily; the atexit handler
 * releases those still retained. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "rt.h"

#define SIMRT_MAX_DEVICES 64

void *simrt_fn[SIMRT_LK_COUNT];

static pthread_once_t once = PTHREAD_ONCE_INIT;
static cudaError_t init_error;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[SIMRT_MAX_DEVICES];
static bool retained[SIMRT_MAX_DEVICES];
static __thread int thread_device;

static void release_primaries(void)
{
    pthread_mutex_lock(&lock);
    for (int d = 0; d < SIMRT_MAX_DEVICES; d++)
        if (retained[d]) {
            SIMRT_CALL(DRV(cuDevicePrimaryCtxRelease, 7000), d);
            retained[d] = false;
        }
    pthread_mutex_unlock(&lock);
}

static void load(void)
{
    atexit(release_primaries);
    void *driver = dlopen("libcuda.so.1", RTLD_NOW);
    PFN_cuGetProcAddress_v12000 get_proc = driver ? (PFN_cuGetProcAddress_v12000)dlsym(driver, "cuGetProcAddress_v2")
                                                  : NULL;
    if (!get_proc) {
        init_error = cudaErrorInsufficientDriver;
        return;
    }
    void *probe;
    get_proc("", &probe, 0, 0, NULL);
    for (int i = 0; i < SIMRT_LK_COUNT; i++)
        get_proc(simrt_lookups[i].name, &simrt_fn[i], simrt_lookups[i].version, simrt_lookups[i].flags, NULL);
    init_error = SIMRT_CALL(DRV(cuInit, 2000), 0);
}

cudaError_t simrt_init(void)
{
    pthread_once(&once, load);
    return init_error;
}

/* Caller holds the lock. */
static cudaError_t retain(int device)
{
    if (device < 0 || device >= SIMRT_MAX_DEVICES)
        return cudaErrorInvalidDevice;
    if (retained[device])
        return cudaSuccess;
    cudaError_t e = SIMRT_CALL(DRV(cuDevicePrimaryCtxRetain, 7000), &primary[device], device);
    retained[device] = e == cudaSuccess;
    return e;
}

cudaError_t simrt_primary(int device, CUcontext *ctx)
{
    pthread_mutex_lock(&lock);
    cudaError_t e = retain(device);
    *ctx = e == cudaSuccess ? primary[device] : NULL;
    pthread_mutex_unlock(&lock);
    return e;
}

cudaError_t simrt_bind(int device)
{
    CUcontext ctx;
    cudaError_t e = simrt_primary(device, &ctx);
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuCtxSetCurrent, 4000), ctx);
    if (e == cudaSuccess)
        thread_device = device;
    return e;
}

void simrt_forget(int device)
{
    pthread_mutex_lock(&lock);
    if (device >= 0 && device < SIMRT_MAX_DEVICES)
        retained[device] = false;
    pthread_mutex_unlock(&lock);
}

/* A context current on the thread is used as it is (one made with the driver API, or a primary
 * context); a primary context that cudaDeviceReset reset, or no context, binds the primary
 * context of the thread's device. */
cudaError_t simrt_ctx(void)
{
    cudaError_t e = simrt_init();
    CUcontext current = NULL;
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuCtxGetCurrent, 4000), &current);
    if (e != cudaSuccess)
        return e;
    int device = thread_device;
    bool bind = current == NULL;
    pthread_mutex_lock(&lock);
    for (int d = 0; d < SIMRT_MAX_DEVICES && current; d++)
        if (current == primary[d] && !retained[d]) {
            bind = true;
            device = d;
        }
    pthread_mutex_unlock(&lock);
    return bind ? simrt_bind(device) : cudaSuccess;
}

int simrt_device(void)
{
    CUcontext current = NULL;
    CUdevice device;
    if (simrt_init() == cudaSuccess && SIMRT_CALL(DRV(cuCtxGetCurrent, 4000), &current) == cudaSuccess && current &&
        SIMRT_CALL(DRV(cuCtxGetDevice, 2000), &device) == cudaSuccess)
        return device;
    return thread_device;
}
