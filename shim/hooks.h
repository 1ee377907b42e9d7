/* Every driver entry point the shim wraps or calls, one row each (DESIGN.md "Where interception
 * happens").
 *
 * SHIM_HOOKS rows are wrapped: the shim exports a function named `symbol` with the driver's
 * prototype (door 1), returns it from dlsym on any handle when the real symbol exists (door 2), and
 * from cuGetProcAddress / cuGetProcAddress_v2 for (base, version, flags) (door 3). `version` is the
 * CUDA version that introduced this ABI (cudaTypedefs.h: PFN_<base>_v<version>[_ptsz|_ptds];
 * tests/test_hooks_table.c checks every row against that header). `pt` is 1 for the per-thread
 * default-stream variant (_ptsz/_ptds), returned for flags CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
 * SHIM_REAL_ONLY rows are only called by the shim (never exported). A base name's rows list every
 * ABI variant from the oldest one here up to the newest in cudaTypedefs.h, the ones the shim never
 * calls too (cuCtxGetDevice_v2, ...): door 3 offers a looked-up function to the row of its own ABI,
 * never to an older ABI's slot that the shim calls with the old prototype (tests/test_hooks_table.c
 * checks that no newer variant is missing).
 *
 * X(symbol, base, version, pt)
 */
#ifndef CUSHIM_HOOKS_H
#define CUSHIM_HOOKS_H

#include <cuda.h> /* CUDA_VERSION, for the rows that need newer headers */

#define SHIM_HOOKS(X)                                                  \
    X(cuGetProcAddress, cuGetProcAddress, 11030, 0)                    \
    X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0)                 \
    X(cuMemAlloc_v2, cuMemAlloc, 3020, 0)                              \
    X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0)                    \
    X(cuMemFree_v2, cuMemFree, 3020, 0)                                \
    X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0)                   \
    X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0)                          \
    X(cuMemHostAlloc, cuMemHostAlloc, 2020, 0)                         \
    X(cuMemAllocHost_v2, cuMemAllocHost, 3020, 0)                      \
    X(cuMemFreeHost, cuMemFreeHost, 2000, 0)                           \
    X(cuMemHostRegister, cuMemHostRegister, 4000, 0)                   \
    X(cuMemHostRegister_v2, cuMemHostRegister, 6050, 0)                \
    X(cuMemHostUnregister, cuMemHostUnregister, 4000, 0)               \
    X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0)                      \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 1)                 \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0)      \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, 1) \
    X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0)                        \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 1)                   \
    X(cuMemPoolCreate, cuMemPoolCreate, 11020, 0)                      \
    X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0)                    \
    X(cuMemPoolImportPointer, cuMemPoolImportPointer, 11020, 0)        \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0)                      \
    X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020, 0)          \
    X(cuMemCreate, cuMemCreate, 10020, 0)                              \
    X(cuMemRelease, cuMemRelease, 10020, 0)                            \
    X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0) \
    X(cuMemMap, cuMemMap, 10020, 0)                                    \
    X(cuMemUnmap, cuMemUnmap, 10020, 0)                                \
    X(cuMemImportFromShareableHandle, cuMemImportFromShareableHandle, 10020, 0) \
    X(cuArrayCreate_v2, cuArrayCreate, 3020, 0)                        \
    X(cuArray3DCreate_v2, cuArray3DCreate, 3020, 0)                    \
    X(cuArrayDestroy, cuArrayDestroy, 2000, 0)                         \
    X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, 0)         \
    X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, 0)       \
    X(cuIpcOpenMemHandle, cuIpcOpenMemHandle, 4010, 0)                 \
    X(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle, 11000, 0)             \
    X(cuIpcCloseMemHandle, cuIpcCloseMemHandle, 4010, 0)               \
    X(cuCtxDestroy, cuCtxDestroy, 2000, 0)                             \
    X(cuCtxDestroy_v2, cuCtxDestroy, 4000, 0)                          \
    X(cuCtxDetach, cuCtxDetach, 2000, 0)                               \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0)   \
    X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, 0) \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0)       \
    X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, 0)   \
    X(cuStreamBeginCapture, cuStreamBeginCapture, 10000, 0)            \
    X(cuStreamBeginCapture_ptsz, cuStreamBeginCapture, 10000, 1)       \
    X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, 0)         \
    X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, 1)    \
    X(cuStreamEndCapture, cuStreamEndCapture, 10000, 0)                \
    X(cuStreamEndCapture_ptsz, cuStreamEndCapture, 10000, 1)           \
    X(cuStreamDestroy, cuStreamDestroy, 2000, 0)                       \
    X(cuStreamDestroy_v2, cuStreamDestroy, 4000, 0)                    \
    X(cuMemGetAddressRange_v2, cuMemGetAddressRange, 3020, 0)          \
    X(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010, 0)                   \
    X(cuMemcpyHtoD_v2, cuMemcpyHtoD, 3020, 0)                          \
    X(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD, 7000, 1)                     \
    X(cuMemcpyDtoH_v2, cuMemcpyDtoH, 3020, 0)                          \
    X(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH, 7000, 1)                     \
    X(cuMemcpyDtoD_v2, cuMemcpyDtoD, 3020, 0)                          \
    X(cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD, 7000, 1)                     \
    X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync, 3020, 0)                \
    X(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync, 7000, 1)           \
    X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync, 3020, 0)                \
    X(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync, 7000, 1)           \
    X(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync, 3020, 0)                \
    X(cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync, 7000, 1)         \
    X(cuMemcpy2D_v2, cuMemcpy2D, 3020, 0)                              \
    X(cuMemcpy2D_v2_ptds, cuMemcpy2D, 7000, 1)                         \
    X(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned, 3020, 0)            \
    X(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned, 7000, 1)       \
    X(cuMemcpy2DAsync_v2, cuMemcpy2DAsync, 3020, 0)                    \
    X(cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync, 7000, 1)               \
    X(cuMemcpy3D_v2, cuMemcpy3D, 3020, 0)                              \
    X(cuMemcpy3D_v2_ptds, cuMemcpy3D, 7000, 1)                         \
    X(cuMemcpy3DAsync_v2, cuMemcpy3DAsync, 3020, 0)                    \
    X(cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync, 7000, 1)               \
    X(cuMemcpyPeer, cuMemcpyPeer, 4000, 0)                             \
    X(cuMemcpyPeer_ptds, cuMemcpyPeer, 7000, 1)                        \
    X(cuMemcpyPeerAsync, cuMemcpyPeerAsync, 4000, 0)                   \
    X(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, 7000, 1)              \
    X(cuMemcpy3DPeer, cuMemcpy3DPeer, 4000, 0)                         \
    X(cuMemcpy3DPeer_ptds, cuMemcpy3DPeer, 7000, 1)                    \
    X(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, 4000, 0)               \
    X(cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync, 7000, 1)          \
    X(cuGraphInstantiate, cuGraphInstantiate, 10000, 0)                \
    X(cuGraphInstantiate_v2, cuGraphInstantiate, 11000, 0)             \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0) \
    X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, 0) \
    X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, 1) \
    X(cuGraphExecUpdate, cuGraphExecUpdate, 10020, 0)                  \
    X(cuGraphExecUpdate_v2, cuGraphExecUpdate, 12000, 0)               \
    X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0)                \
    X(cuGraphDestroy, cuGraphDestroy, 10000, 0)                        \
    X(cuGraphLaunch, cuGraphLaunch, 10000, 0)                          \
    X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 1)                     \
    X(cuGraphUpload, cuGraphUpload, 11010, 0)                          \
    X(cuGraphUpload_ptsz, cuGraphUpload, 11010, 1)                     \
    X(cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute, 11040, 0) \
    X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0)           \
    X(cuDeviceSetGraphMemAttribute, cuDeviceSetGraphMemAttribute, 11040, 0) \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0)  \
    X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, 0)                \
    X(cuDeviceSetMemPool, cuDeviceSetMemPool, 11020, 0)                \
    SHIM_HOOKS_CUDA121(X)                                              \
    SHIM_HOOKS_CUDA123(X)                                              \
    SHIM_HOOKS_CUDA13(X)

/* Rows that need CUDA 12.1 headers: multicast objects (hooks_multicast.c). */
#if CUDA_VERSION >= 12010
#define SHIM_HOOKS_CUDA121(X)                                          \
    X(cuMulticastAddDevice, cuMulticastAddDevice, 12010, 0)            \
    X(cuMulticastBindMem, cuMulticastBindMem, 12010, 0)                \
    X(cuMulticastBindAddr, cuMulticastBindAddr, 12010, 0)              \
    X(cuMulticastUnbind, cuMulticastUnbind, 12010, 0)
#else
#define SHIM_HOOKS_CUDA121(X)
#endif

/* Captures into an existing graph (hooks_capture.c), CUDA 12.3's. With older headers they are
 * declared here, as 12.3's cuda.h declares them (the edge data only passed through, never read):
 * a capture the shim did not see would be taken for none, and an allocation made in it served as
 * outside any capture (budget checks, spills: calls a global-mode capture forbids; a review). */
#if CUDA_VERSION < 12030
typedef struct CUgraphEdgeData_st CUgraphEdgeData;
CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                             const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                             CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
                                                  const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                                  CUstreamCaptureMode mode);
#endif
#define SHIM_HOOKS_CUDA123(X)                                          \
    X(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, 12030, 0) \
    X(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, 12030, 1)

/* Rows that need CUDA 13 headers (cudaTypedefs.h PFN_..._v13000). */
#if CUDA_VERSION >= 13000
#define SHIM_HOOKS_CUDA13(X)                                           \
    X(cuMemGetDefaultMemPool, cuMemGetDefaultMemPool, 13000, 0)        \
    X(cuMemGetMemPool, cuMemGetMemPool, 13000, 0)                      \
    X(cuMemSetMemPool, cuMemSetMemPool, 13000, 0)
#else
#define SHIM_HOOKS_CUDA13(X)
#endif

/* cuStreamGetCaptureInfo's newer ABI (its rows list every variant: test_hooks_table.c). */
#if CUDA_VERSION >= 12030
#define SHIM_REAL_CUDA123(X)                                           \
    X(cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo, 12030, 0)    \
    X(cuStreamGetCaptureInfo_v3_ptsz, cuStreamGetCaptureInfo, 12030, 1)
#else
#define SHIM_REAL_CUDA123(X)
#endif

#define SHIM_REAL_ONLY(X)                                              \
    X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, 0)                       \
    X(cuCtxGetDevice, cuCtxGetDevice, 2000, 0)                         \
    X(cuCtxGetDevice_v2, cuCtxGetDevice, 13000, 0)                     \
    X(cuCtxGetApiVersion, cuCtxGetApiVersion, 3020, 0)                 \
    X(cuCtxSynchronize, cuCtxSynchronize, 2000, 0)                     \
    X(cuCtxSynchronize_v2, cuCtxSynchronize, 13000, 0)                 \
    X(cuDeviceGetCount, cuDeviceGetCount, 2000, 0)                     \
    X(cuPointerGetAttribute, cuPointerGetAttribute, 4000, 0)           \
    X(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, 0)                  \
    X(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, 0)                    \
    X(cuDeviceGetUuid_v2, cuDeviceGetUuid, 11040, 0)                   \
    X(cuDeviceGetUuid, cuDeviceGetUuid, 9020, 0)                       \
    X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0)                  \
    X(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000, 0) \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0)     \
    X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, 0)         \
    X(cuMemGetAllocationPropertiesFromHandle, cuMemGetAllocationPropertiesFromHandle, 10020, 0) \
    X(cuStreamIsCapturing, cuStreamIsCapturing, 10000, 0)              \
    X(cuStreamIsCapturing_ptsz, cuStreamIsCapturing, 10000, 1)        \
    X(cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo, 11030, 0)    \
    X(cuStreamGetCaptureInfo_v2_ptsz, cuStreamGetCaptureInfo, 11030, 1) \
    SHIM_REAL_CUDA123(X)                                               \
    X(cuMemcpy, cuMemcpy, 4000, 0)                                     \
    X(cuMemcpy_ptds, cuMemcpy, 7000, 1)                                \
    X(cuMemcpyAsync, cuMemcpyAsync, 4000, 0)                           \
    X(cuMemcpyAsync_ptsz, cuMemcpyAsync, 7000, 1)                      \
    X(cuMemHostGetDevicePointer_v2, cuMemHostGetDevicePointer, 3020, 0) \
    X(cuEventCreate, cuEventCreate, 2000, 0)                           \
    X(cuEventRecord, cuEventRecord, 2000, 0)                           \
    X(cuEventRecord_ptsz, cuEventRecord, 7000, 1)                      \
    X(cuEventQuery, cuEventQuery, 2000, 0)                             \
    X(cuEventSynchronize, cuEventSynchronize, 2000, 0)                 \
    X(cuEventDestroy_v2, cuEventDestroy, 4000, 0)                      \
    X(cuStreamSynchronize, cuStreamSynchronize, 2000, 0)              \
    X(cuStreamSynchronize_ptsz, cuStreamSynchronize, 7000, 1)         \
    X(cuStreamQuery, cuStreamQuery, 2000, 0)                           \
    X(cuStreamQuery_ptsz, cuStreamQuery, 7000, 1)                      \
    X(cuGraphGetNodes, cuGraphGetNodes, 10000, 0)                      \
    X(cuGraphNodeGetType, cuGraphNodeGetType, 10000, 0)                \
    X(cuGraphMemAllocNodeGetParams, cuGraphMemAllocNodeGetParams, 11040, 0) \
    X(cuGraphChildGraphNodeGetGraph, cuGraphChildGraphNodeGetGraph, 10000, 0) \
    X(cuStreamGetCtx, cuStreamGetCtx, 9020, 0)                         \
    X(cuStreamGetCtx_ptsz, cuStreamGetCtx, 9020, 1)                    \
    X(cuStreamGetCtx_v2, cuStreamGetCtx, 12050, 0)                     \
    X(cuStreamGetCtx_v2_ptsz, cuStreamGetCtx, 12050, 1)

#endif
