/* Driver entry points: cudaGetDriverEntryPoint(_ptsz) calls the driver's cuGetProcAddress looked
 * up at 12000 (cuGetProcAddress_v2) with version CUDART_VERSION; cudaGetDriverEntryPointByVersion
 * (_ptsz) passes the caller's version. The flag and status values equal the driver's. The _ptsz
 * entry points make the default search per-thread, like cuda.h's cuGetProcAddress_v2_ptsz. */
#include "rt.h"

static cudaError_t entry_point(const char *symbol, void **funcPtr, unsigned int version, unsigned long long flags,
                               enum cudaDriverEntryPointQueryResult *driverStatus, bool pt)
{
    if (pt && !(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
        flags |= cudaEnablePerThreadDefaultStream;
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuGetProcAddress, 12000), symbol, funcPtr, (int)version, flags,
                       (CUdriverProcAddressQueryResult *)driverStatus);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *symbol, void **funcPtr, unsigned long long flags,
                                              enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, false);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags,
                                                   enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus, true);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                       unsigned long long flags,
                                                       enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, false);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr,
                                                            unsigned int cudaVersion, unsigned long long flags,
                                                            enum cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus, true);
}
