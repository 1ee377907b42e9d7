/* Graphs: cudaGraphCreate, cudaGraphDestroy, cudaGraphAddMemAllocNode, cudaGraphAddMemFreeNode,
 * cudaGraphInstantiate and cudaGraphInstantiateWithFlags (cuGraphInstantiateWithFlags, looked up
 * at 11040), cudaGraphInstantiateWithParams(_ptsz) (cuGraphInstantiateWithParams at 12000),
 * cudaGraphUpload(_ptsz), cudaGraphLaunch(_ptsz), cudaGraphExecDestroy,
 * cudaDeviceGetGraphMemAttribute, cudaDeviceSetGraphMemAttribute, cudaDeviceGraphMemTrim. The
 * cudaGraphMemAttributeType and instantiate flag values equal the driver's. */
#include <string.h>
#include "rt.h"

cudaError_t CUDARTAPI cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuGraphCreate, 10000), pGraph, flags);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuGraphDestroy, 10000), graph);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGraphAddMemAllocNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                               const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                               struct cudaMemAllocNodeParams *nodeParams)
{
    if (!nodeParams)
        return simrt_ret(cudaErrorInvalidValue);
    const struct cudaMemPoolProps *pp = &nodeParams->poolProps;
    CUDA_MEM_ALLOC_NODE_PARAMS p = {
        .poolProps = {.allocType = (CUmemAllocationType)pp->allocType,
                      .handleTypes = (CUmemAllocationHandleType)pp->handleTypes,
                      .location = {(CUmemLocationType)pp->location.type, pp->location.id},
                      .win32SecurityAttributes = pp->win32SecurityAttributes,
                      .maxSize = pp->maxSize,
                      .usage = pp->usage},
        .accessDescs = (const CUmemAccessDesc *)nodeParams->accessDescs,
        .accessDescCount = nodeParams->accessDescCount,
        .bytesize = nodeParams->bytesize};
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuGraphAddMemAllocNode, 11040), pGraphNode, graph, pDependencies, numDependencies, &p);
    if (e == cudaSuccess)
        nodeParams->dptr = (void *)p.dptr;
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGraphAddMemFreeNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                              const cudaGraphNode_t *pDependencies, size_t numDependencies,
                                              void *dptr)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuGraphAddMemFreeNode, 11040), pGraphNode, graph, pDependencies, numDependencies,
                       (CUdeviceptr)dptr);
    return simrt_ret(e);
}

static cudaError_t instantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuGraphInstantiateWithFlags, 11040), pGraphExec, graph, flags);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags)
{
    return instantiate(pGraphExec, graph, flags);
}

cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                    unsigned long long flags)
{
    return instantiate(pGraphExec, graph, flags);
}

static cudaError_t instantiate_with_params(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                           cudaGraphInstantiateParams *params, bool pt)
{
    if (!params)
        return simrt_ret(cudaErrorInvalidValue);
    CUDA_GRAPH_INSTANTIATE_PARAMS p = {.flags = params->flags, .hUploadStream = params->uploadStream};
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuGraphInstantiateWithParams, 12000, 12000, pt), pGraphExec, graph, &p);
    params->errNode_out = p.hErrNode_out;
    params->result_out = (cudaGraphInstantiateResult)p.result_out;
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                     cudaGraphInstantiateParams *instantiateParams)
{
    return instantiate_with_params(pGraphExec, graph, instantiateParams, false);
}

cudaError_t CUDARTAPI cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                          cudaGraphInstantiateParams *instantiateParams)
{
    return instantiate_with_params(pGraphExec, graph, instantiateParams, true);
}

static cudaError_t upload(cudaGraphExec_t graphExec, cudaStream_t stream, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuGraphUpload, 11010, 11010, pt), graphExec, stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGraphUpload(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return upload(graphExec, stream, false);
}

cudaError_t CUDARTAPI cudaGraphUpload_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return upload(graphExec, stream, true);
}

static cudaError_t launch(cudaGraphExec_t graphExec, cudaStream_t stream, bool pt)
{
    cudaError_t e = simrt_ctx();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV_PT(cuGraphLaunch, 10000, 10000, pt), graphExec, stream);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return launch(graphExec, stream, false);
}

cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return launch(graphExec, stream, true);
}

cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuGraphExecDestroy, 10000), graphExec);
    return simrt_ret(e);
}

/* cuda_runtime_api.h cudaGraphExecUpdate: cuGraphExecUpdate at 12000 (the real cudart 13's lookup,
 * ../cudart13-driver-lookups.txt), its result info copied field by field. */
cudaError_t CUDARTAPI cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                          cudaGraphExecUpdateResultInfo *resultInfo)
{
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    info.result = CU_GRAPH_EXEC_UPDATE_ERROR; /* what an update not made says */
    cudaError_t e = simrt_init();
    if (e == cudaSuccess) /* a NULL resultInfo is the driver's to refuse */
        e = SIMRT_CALL(DRV(cuGraphExecUpdate, 12000), hGraphExec, hGraph, resultInfo ? &info : NULL);
    if (resultInfo) {
        resultInfo->result = (enum cudaGraphExecUpdateResult)info.result;
        resultInfo->errorNode = info.errorNode;
        resultInfo->errorFromNode = info.errorFromNode;
    }
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaDeviceGetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceGetGraphMemAttribute, 11040), device, (CUgraphMem_attribute)attr, value);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaDeviceSetGraphMemAttribute(int device, enum cudaGraphMemAttributeType attr, void *value)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceSetGraphMemAttribute, 11040), device, (CUgraphMem_attribute)attr, value);
    return simrt_ret(e);
}

cudaError_t CUDARTAPI cudaDeviceGraphMemTrim(int device)
{
    cudaError_t e = simrt_init();
    if (e == cudaSuccess)
        e = SIMRT_CALL(DRV(cuDeviceGraphMemTrim, 11040), device);
    return simrt_ret(e);
}
