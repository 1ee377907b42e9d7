/* Device properties: cudaGetDeviceProperties and cudaDeviceGetAttribute. CUDA 13's
 * cuda_runtime_api.h declares cudaGetDeviceProperties itself (no #define to a _v2 symbol; the real
 * libcudart.so.13 exports cudaGetDeviceProperties), so that is the name exported here.
 *
 * cudaGetDeviceProperties fills, from the driver's lookups: name (cuDeviceGetName at 2000), uuid
 * (cuDeviceGetUuid at 9020), totalGlobalMem (cuDeviceTotalMem at 3020 = cuDeviceTotalMem_v2), and
 * the int fields of `attributes` below (cuDeviceGetAttribute at 2000). Everything else stays 0:
 * luid, luidDeviceNodeMask, the size_t fields but totalGlobalMem (sharedMemPerBlock, memPitch,
 * totalConstMem, textureAlignment, texturePitchAlignment, surfaceAlignment,
 * sharedMemPerMultiprocessor, sharedMemPerBlockOptin, reservedSharedMemPerBlock), the dimension
 * arrays (maxThreadsDim, maxGridSize, maxTexture*, maxSurface*), the unsigned bitmasks
 * (gpuDirectRDMAFlushWritesOptions, memoryPoolSupportedHandleTypes, gpuPciDeviceID,
 * gpuPciSubsystemID), tccDriver, mpsEnabled, hostNumaMultinodeIpcSupported and reserved. The
 * simulated driver answers 0 for most attributes itself (README.md, "devices"). */
#include <stddef.h>
#include <string.h>

#include "rt.h"

/* cudaDeviceAttr and CUdevice_attribute number their attributes alike (driver_types.h and cuda.h
 * give each pair the same value); cudaDeviceGetAttribute passes the value through. */
_Static_assert((int)cudaDevAttrMaxThreadsPerBlock == CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "attr");
_Static_assert((int)cudaDevAttrComputeCapabilityMajor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "attr");
_Static_assert((int)cudaDevAttrMemoryPoolsSupported == CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "attr");
_Static_assert((int)cudaDevAttrMax == CU_DEVICE_ATTRIBUTE_MAX, "attr");

/* An int field of cudaDeviceProp and the attribute it reports (driver_types.h's comment on the
 * field names the same quantity as cuda.h's on the attribute). */
static const struct {
    size_t offset;
    CUdevice_attribute attr;
} attributes[] = {
#define FIELD(field, attr) {offsetof(struct cudaDeviceProp, field), CU_DEVICE_ATTRIBUTE_##attr}
    FIELD(regsPerBlock, MAX_REGISTERS_PER_BLOCK),
    FIELD(warpSize, WARP_SIZE),
    FIELD(maxThreadsPerBlock, MAX_THREADS_PER_BLOCK),
    FIELD(major, COMPUTE_CAPABILITY_MAJOR),
    FIELD(minor, COMPUTE_CAPABILITY_MINOR),
    FIELD(multiProcessorCount, MULTIPROCESSOR_COUNT),
    FIELD(integrated, INTEGRATED),
    FIELD(canMapHostMemory, CAN_MAP_HOST_MEMORY),
    FIELD(concurrentKernels, CONCURRENT_KERNELS),
    FIELD(ECCEnabled, ECC_ENABLED),
    FIELD(pciBusID, PCI_BUS_ID),
    FIELD(pciDeviceID, PCI_DEVICE_ID),
    FIELD(pciDomainID, PCI_DOMAIN_ID),
    FIELD(asyncEngineCount, ASYNC_ENGINE_COUNT),
    FIELD(unifiedAddressing, UNIFIED_ADDRESSING),
    FIELD(memoryBusWidth, GLOBAL_MEMORY_BUS_WIDTH),
    FIELD(l2CacheSize, L2_CACHE_SIZE),
    FIELD(persistingL2CacheMaxSize, MAX_PERSISTING_L2_CACHE_SIZE),
    FIELD(maxThreadsPerMultiProcessor, MAX_THREADS_PER_MULTIPROCESSOR),
    FIELD(streamPrioritiesSupported, STREAM_PRIORITIES_SUPPORTED),
    FIELD(globalL1CacheSupported, GLOBAL_L1_CACHE_SUPPORTED),
    FIELD(localL1CacheSupported, LOCAL_L1_CACHE_SUPPORTED),
    FIELD(regsPerMultiprocessor, MAX_REGISTERS_PER_MULTIPROCESSOR),
    FIELD(managedMemory, MANAGED_MEMORY),
    FIELD(isMultiGpuBoard, MULTI_GPU_BOARD),
    FIELD(multiGpuBoardGroupID, MULTI_GPU_BOARD_GROUP_ID),
    FIELD(hostNativeAtomicSupported, HOST_NATIVE_ATOMIC_SUPPORTED),
    FIELD(pageableMemoryAccess, PAGEABLE_MEMORY_ACCESS),
    FIELD(concurrentManagedAccess, CONCURRENT_MANAGED_ACCESS),
    FIELD(computePreemptionSupported, COMPUTE_PREEMPTION_SUPPORTED),
    FIELD(canUseHostPointerForRegisteredMem, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM),
    FIELD(cooperativeLaunch, COOPERATIVE_LAUNCH),
    FIELD(pageableMemoryAccessUsesHostPageTables, PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES),
    FIELD(directManagedMemAccessFromHost, DIRECT_MANAGED_MEM_ACCESS_FROM_HOST),
    FIELD(maxBlocksPerMultiProcessor, MAX_BLOCKS_PER_MULTIPROCESSOR),
    FIELD(accessPolicyMaxWindowSize, MAX_ACCESS_POLICY_WINDOW_SIZE),
    FIELD(hostRegisterSupported, HOST_REGISTER_SUPPORTED),
    FIELD(sparseCudaArraySupported, SPARSE_CUDA_ARRAY_SUPPORTED),
    FIELD(hostRegisterReadOnlySupported, READ_ONLY_HOST_REGISTER_SUPPORTED),
    FIELD(timelineSemaphoreInteropSupported, TIMELINE_SEMAPHORE_INTEROP_SUPPORTED),
    FIELD(memoryPoolsSupported, MEMORY_POOLS_SUPPORTED),
    FIELD(gpuDirectRDMASupported, GPU_DIRECT_RDMA_SUPPORTED),
    FIELD(gpuDirectRDMAWritesOrdering, GPU_DIRECT_RDMA_WRITES_ORDERING),
    FIELD(deferredMappingCudaArraySupported, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED),
    FIELD(ipcEventSupported, IPC_EVENT_SUPPORTED),
    FIELD(clusterLaunch, CLUSTER_LAUNCH),
    FIELD(unifiedFunctionPointers, UNIFIED_FUNCTION_POINTERS),
    FIELD(deviceNumaConfig, NUMA_CONFIG),
    FIELD(deviceNumaId, NUMA_ID),
    FIELD(hostNumaId, HOST_NUMA_ID),
#undef FIELD
};

/* cuda_runtime_api.h, cudaGetDeviceProperties: "Returns in \p *prop the properties of device
 * \p dev", cudaErrorInvalidDevice for a device that does not exist (the driver's
 * CUDA_ERROR_INVALID_DEVICE, the same number). */
static cudaError_t fill(struct cudaDeviceProp *prop, int device)
{
    cudaError_t e = SIMRT_CALL(DRV(cuDeviceGetName, 2000), prop->name, (int)sizeof prop->name, device);
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceGetUuid, 9020), (CUuuid *)&prop->uuid, device);
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceTotalMem, 3020), &prop->totalGlobalMem, device);
    for (size_t i = 0; e == cudaSuccess && i < sizeof attributes / sizeof attributes[0]; i++)
        e = SIMRT_CALL(DRV(cuDeviceGetAttribute, 2000), (int *)((char *)prop + attributes[i].offset),
                       attributes[i].attr, device);
    return e;
}

cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return simrt_ret(cudaErrorInvalidValue);
    cudaError_t e = simrt_init();
    if (e == cudaSuccess) {
        memset(prop, 0, sizeof *prop);
        e = fill(prop, device);
    }
    if (e != cudaSuccess)
        memset(prop, 0, sizeof *prop);
    return simrt_ret(e);
}

/* cuda_runtime_api.h, cudaDeviceGetAttribute: "Returns in \p *value the integer value of the
 * attribute \p attr on device \p device"; cudaErrorInvalidDevice and cudaErrorInvalidValue come
 * from the driver's checks (an ordinal it does not have, a NULL value or an attribute past
 * cudaDevAttrMax). */
cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceGetAttribute, 2000), value, (CUdevice_attribute)attr, device);
    return simrt_ret(e);
}
