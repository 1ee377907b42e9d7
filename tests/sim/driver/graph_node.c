/* Node entry points: cuGraphAddMemAllocNode, cuGraphAddMemFreeNode, cuGraphAddEmptyNode,
 * cuGraphAddMemsetNode, cuGraphAddChildGraphNode, cuGraphAddNode (12020 ABI), cuGraphAddNode_v2
 * (12030, edge data), cuGraphNodeSetParams, cuGraphMemAllocNodeGetParams,
 * cuGraphMemFreeNodeGetParams. */
#include <string.h>

#include "graph.h"

static CUresult add(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                    size_t numDependencies, struct sim_node_spec *spec)
{
    return phGraphNode ? sim_graph_add(hGraph, dependencies, numDependencies, spec, phGraphNode)
                       : CUDA_ERROR_INVALID_VALUE;
}

/* cuda.h: "When cuGraphAddMemAllocNode creates an allocation node, it returns the address of the
 * allocation in nodeParams.dptr. The allocation's address remains fixed across instantiations and
 * launches." */
CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                        size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    SIM_ENTER(cuGraphAddMemAllocNode);
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC,
                                 .u.alloc = {nodeParams->poolProps, nodeParams->accessDescs,
                                             nodeParams->accessDescCount, nodeParams->bytesize, 0}};
    CUresult rc = add(phGraphNode, hGraph, dependencies, numDependencies, &spec);
    if (rc == CUDA_SUCCESS)
        nodeParams->dptr = spec.u.alloc.dptr;
    return rc;
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                       size_t numDependencies, CUdeviceptr dptr)
{
    SIM_ENTER(cuGraphAddMemFreeNode);
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_MEM_FREE, .u.free = dptr};
    return add(phGraphNode, hGraph, dependencies, numDependencies, &spec);
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                     size_t numDependencies)
{
    SIM_ENTER(cuGraphAddEmptyNode);
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
    return add(phGraphNode, hGraph, dependencies, numDependencies, &spec);
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                      size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                      CUcontext ctx)
{
    SIM_ENTER(cuGraphAddMemsetNode);
    if (!memsetParams)
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_MEMSET_NODE_PARAMS *p = memsetParams;
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_MEMSET,
                                 .u.memset = {p->dst, p->pitch, p->value, p->elementSize, p->width, p->height, ctx}};
    return add(phGraphNode, hGraph, dependencies, numDependencies, &spec);
}

/* cuda.h: "If childGraph contains allocation nodes, free nodes, or conditional nodes, this call
 * will return an error." "The child graph is cloned in this call." */
CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                          size_t numDependencies, CUgraph childGraph)
{
    SIM_ENTER(cuGraphAddChildGraphNode);
    struct sim_node_spec spec = {.type = CU_GRAPH_NODE_TYPE_GRAPH,
                                 .u.child = {childGraph, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE}};
    return add(phGraphNode, hGraph, dependencies, numDependencies, &spec);
}

/* cuda.h, cuGraphAddNode: "All unused bytes - that is, reserved0 and all bytes past the utilized
 * union member - must be set to zero." (Only the reserved fields are checked.) */
static CUresult spec_of(const CUgraphNodeParams *p, struct sim_node_spec *spec)
{
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2)
        return CUDA_ERROR_INVALID_VALUE;
    *spec = (struct sim_node_spec){.type = p->type};
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        spec->u.alloc = p->alloc;
        break;
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        spec->u.free = p->free.dptr;
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
        spec->u.memset = p->memset;
        break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        spec->u.child = p->graph;
        break;
    case CU_GRAPH_NODE_TYPE_EMPTY:
        break;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

/* CUgraphEdgeData: only kernel nodes define ports and non-default dependency types, so edge data
 * into the modelled node types must be all zero. */
static CUresult add_node(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                         const CUgraphEdgeData *dependencyData, size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    static const CUgraphEdgeData zero;
    struct sim_node_spec spec;
    for (size_t i = 0; dependencyData && i < numDependencies; i++)
        if (memcmp(&dependencyData[i], &zero, sizeof zero) != 0)
            return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = spec_of(nodeParams, &spec);
    if (rc == CUDA_SUCCESS)
        rc = add(phGraphNode, hGraph, dependencies, numDependencies, &spec);
    if (rc == CUDA_SUCCESS && spec.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        nodeParams->alloc.dptr = spec.u.alloc.dptr;
    return rc;
}

CUresult CUDAAPI cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    SIM_ENTER(cuGraphAddNode);
    return add_node(phGraphNode, hGraph, dependencies, NULL, numDependencies, nodeParams);
}

CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,
                                   const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                   CUgraphNodeParams *nodeParams)
{
    SIM_ENTER(cuGraphAddNode_v2);
    return add_node(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}

/* cuda.h: "The node type specified by nodeParams->type must match the type of hNode." "Modifying
 * parameters is not supported for node types CU_GRAPH_NODE_TYPE_MEM_ALLOC and
 * CU_GRAPH_NODE_TYPE_MEM_FREE." */
CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    SIM_ENTER(cuGraphNodeSetParams);
    struct sim_node_spec spec;
    CUresult rc = sim_node_check(hNode);
    if (rc == CUDA_SUCCESS)
        rc = spec_of(nodeParams, &spec);
    if (rc == CUDA_SUCCESS && spec.type != hNode->spec.type)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && (spec.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || spec.type == CU_GRAPH_NODE_TYPE_MEM_FREE))
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc == CUDA_SUCCESS)
        rc = sim_graph_check_spec(&spec);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUgraphNode_st fresh = {0};
    pthread_mutex_lock(&sim_graph_lock);
    rc = sim_node_fill(&fresh, hNode->graph, &spec);
    if (rc == CUDA_SUCCESS) {
        sim_node_clear(hNode);
        *hNode = fresh;
    }
    pthread_mutex_unlock(&sim_graph_lock);
    return rc;
}

CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode hNode, CUDA_MEM_ALLOC_NODE_PARAMS *params_out)
{
    SIM_ENTER(cuGraphMemAllocNodeGetParams);
    CUresult rc = params_out ? sim_node_check(hNode) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && hNode->spec.type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS) {
        const CUDA_MEM_ALLOC_NODE_PARAMS_v2 *p = &hNode->spec.u.alloc;
        *params_out = (CUDA_MEM_ALLOC_NODE_PARAMS){p->poolProps, p->accessDescs, p->accessDescCount, p->bytesize,
                                                   p->dptr};
    }
    return rc;
}

CUresult CUDAAPI cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out)
{
    SIM_ENTER(cuGraphMemFreeNodeGetParams);
    CUresult rc = dptr_out ? sim_node_check(hNode) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && hNode->spec.type != CU_GRAPH_NODE_TYPE_MEM_FREE)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *dptr_out = hNode->spec.u.free;
    return rc;
}

/* cuda.h, cuGraphChildGraphNodeGetGraph: "Gets a handle to the embedded graph in a child graph
 * node. This call does not clone the graph." */
CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph)
{
    SIM_ENTER(cuGraphChildGraphNodeGetGraph);
    CUresult rc = phGraph ? sim_node_check(hNode) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && hNode->spec.type != CU_GRAPH_NODE_TYPE_GRAPH)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *phGraph = hNode->spec.u.child.graph;
    return rc;
}
