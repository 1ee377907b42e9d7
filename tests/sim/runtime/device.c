/* Devices and versions: cudaGetDeviceCount, cudaSetDevice, cudaGetDevice, cudaDeviceSynchronize,
 * cudaDeviceReset, cudaRuntimeGetVersion, cudaDriverGetVersion. */
#include "rt.h"

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    if (!count)
        return simrt_ret(cudaErrorInvalidValue);
    *count = 0;
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceGetCount, 2000), count);
    return simrt_ret(e);
}

/* cuda_runtime_api.h: "This call will bind the primary context of the specified device to the
 * calling thread" and "will also immediately initialize the runtime state on the primary
 * context". */
cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    int count = 0;
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceGetCount, 2000), &count);
    if (e == cudaSuccess && (device < 0 || device >= count))
        e = cudaErrorInvalidDevice;
    if (e == cudaSuccess)
        e = simrt_bind(device);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    if (!device)
        return simrt_ret(cudaErrorInvalidValue);
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        *device = simrt_device();
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuCtxSynchronize, 2000));
    return simrt_ret(e);
}

/* cuda_runtime_api.h: "Explicitly destroys and cleans up all resources associated with the
 * current device in the current process." = cuDevicePrimaryCtxReset (the v1 symbol, looked up at
 * 7000); the next runtime call retains the primary context again. */
cudaError_t CUDARTAPI cudaDeviceReset(void)
{
    cudaError_t e = simrt_init();
    int device = simrt_device();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDevicePrimaryCtxReset, 7000), device);
    if (e == cudaSuccess)
        simrt_forget(device);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return simrt_ret(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

/* cuda_runtime_api.h: "If no driver is installed, then 0 is returned as the driver version". */
cudaError_t CUDARTAPI cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return simrt_ret(cudaErrorInvalidValue);
    *driverVersion = 0;
    if (simrt_init() == cudaErrorInsufficientDriver)
        return cudaSuccess;
    return simrt_ret(SIMRT_CALL(DRV(cuDriverGetVersion, 2020), driverVersion));
}
