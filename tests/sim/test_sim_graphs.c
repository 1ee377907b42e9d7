/* Graph memory (cuda.h, cuGraphAddMemAllocNode / cuDeviceGetGraphMemAttribute). */
#include "test_sim.h"

static cuuint64_t graph_attr(CUgraphMem_attribute attr)
{
    cuuint64_t value;
    OK(cuDeviceGetGraphMemAttribute(0, attr, &value));
    return value;
}

static CUDA_MEM_ALLOC_NODE_PARAMS alloc_params(size_t bytes)
{
    CUDA_MEM_ALLOC_NODE_PARAMS p = {.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                  .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}},
                                    .bytesize = bytes};
    return p;
}

Test(graphs, captured_allocation_is_attached_at_launch)
{
    CUstream s;
    CUgraph graph;
    CUgraphExec exec, second;
    CUdeviceptr p;
    CUgraphNode nodes[2];
    CUgraphNodeType type;
    size_t count = 2;
    start(no_overhead);
    OK(cuStreamCreate(&s, 0));
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemAllocAsync(&p, MiB, s));
    OK(cuMemsetD8Async(p, 7, MiB, s));
    OK(cuStreamEndCapture(s, &graph));
    cr_assert_eq(live(SIMCUDA_ASYNC) + live(SIMCUDA_POOL_RESERVED), 0); /* no pool memory */
    OK(cuGraphGetNodes(graph, nodes, &count));
    OK(cuGraphNodeGetType(nodes[0], &type));
    cr_assert_eq(type, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    cr_assert_eq(cuGraphInstantiateWithFlags(&second, graph, 0), CUDA_ERROR_INVALID_VALUE); /* one at a time */
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    OK(cuGraphLaunch(exec, s));
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), MiB);
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), MiB);
    cr_assert_eq(live(SIMCUDA_GRAPH_USED), MiB);
    cr_assert_eq(simcuda_used_bytes(0), MiB);
    cr_assert_eq(((unsigned char *)p)[MiB - 1], 7);
    cr_assert_eq(cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_VALUE); /* its allocation is still live */
    OK(cuMemFreeAsync(p, s));
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), MiB);
    cr_assert_eq(simcuda_used_bytes(0), MiB); /* reserved graph memory is used device memory */
    OK(cuGraphLaunch(exec, s));
    OK(cuMemFree_v2(p));
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(graph));
    OK(cuDeviceGraphMemTrim(0));
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), MiB);
    cr_assert_eq(simcuda_used_bytes(0), 0);
}

Test(graphs, upload_auto_free_and_free_nodes)
{
    CUgraph graph, freeing, parent;
    CUgraphExec exec, exec2;
    CUgraphNode alloc, node;
    CUDA_MEM_ALLOC_NODE_PARAMS p = alloc_params(2 * MiB);
    start(no_overhead);
    OK(cuGraphCreate(&graph, 0));
    OK(cuGraphAddMemAllocNode(&alloc, graph, NULL, 0, &p));
    cr_assert_neq(p.dptr, 0);
    OK(cuGraphInstantiateWithFlags(&exec, graph, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH));
    OK(cuGraphUpload(exec, NULL));
    cr_assert_eq(live(SIMCUDA_GRAPH_USED), 2 * MiB);
    OK(cuGraphLaunch(exec, NULL));
    OK(cuGraphLaunch(exec, NULL)); /* frees the previous launch's allocation first */
    cr_assert_eq(live(SIMCUDA_GRAPH_USED), 2 * MiB);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(graph));
    cr_assert_eq(live(SIMCUDA_GRAPH_USED), 2 * MiB); /* destroying frees nothing */
    /* A free node in another graph releases it. */
    OK(cuGraphCreate(&freeing, 0));
    OK(cuGraphAddMemFreeNode(&node, freeing, NULL, 0, p.dptr));
    cr_assert_eq(cuGraphAddMemFreeNode(&node, freeing, NULL, 0, p.dptr), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphInstantiateWithFlags(&exec2, freeing, 0));
    OK(cuGraphLaunch(exec2, NULL));
    cr_assert_eq(live(SIMCUDA_GRAPH_USED), 0);
    cr_assert_eq(live(SIMCUDA_GRAPH_RESERVED), 2 * MiB);
    /* A child graph with memory nodes cannot be cloned into a parent. */
    OK(cuGraphCreate(&parent, 0));
    cr_assert_eq(cuGraphAddChildGraphNode(&node, parent, NULL, 0, freeing), CUDA_ERROR_INVALID_VALUE);
    CUgraphNodeParams moved = {.type = CU_GRAPH_NODE_TYPE_GRAPH,
                               .graph = {freeing, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE}};
    cr_assert_eq(cuGraphAddNode_v2(&node, parent, NULL, NULL, 0, &moved), CUDA_ERROR_INVALID_VALUE); /* instantiated */
    OK(cuGraphExecDestroy(exec2));
    OK(cuGraphAddNode_v2(&node, parent, NULL, NULL, 0, &moved));
    cr_assert_eq(cuGraphDestroy(freeing), CUDA_ERROR_INVALID_VALUE); /* owned by the parent now */
    OK(cuGraphDestroy(parent));
}

Test(graphs, add_node_and_set_params)
{
    CUgraph graph;
    CUgraphNode alloc, memset_node;
    CUdeviceptr d;
    start(no_overhead);
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuGraphCreate(&graph, 0));
    CUgraphNodeParams a = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC};
    a.alloc.poolProps = alloc_params(4096).poolProps;
    a.alloc.bytesize = 4096;
    PFN_cuGraphAddNode_v12020 add_node_v1 = proc("cuGraphAddNode", 12020, 0); /* no edge data */
    OK(add_node_v1(&alloc, graph, NULL, 0, &a));
    cr_assert_neq(a.alloc.dptr, 0);
    CUgraphNodeParams m = {.type = CU_GRAPH_NODE_TYPE_MEMSET,
                           .memset = {.dst = d, .value = 5, .elementSize = 1, .width = 64, .height = 1}};
    OK(cuGraphAddNode_v2(&memset_node, graph, &alloc, NULL, 1, &m));
    cr_assert_eq(cuGraphNodeSetParams(alloc, &a), CUDA_ERROR_NOT_SUPPORTED);
    m.memset.value = 6;
    OK(cuGraphNodeSetParams(memset_node, &m));
    CUDA_MEM_ALLOC_NODE_PARAMS out;
    OK(cuGraphMemAllocNodeGetParams(alloc, &out));
    cr_assert_eq(out.dptr, a.alloc.dptr);
    cr_assert_eq(out.bytesize, 4096);
    CUgraphExec exec;
    OK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    OK(cuGraphLaunch(exec, NULL));
    cr_assert_eq(((unsigned char *)d)[63], 6);
    cr_assert_eq(live(SIMCUDA_GRAPH_USED), 4096);
}

/* Captures a graph allocating `bytes` and freeing it (and, with memset, setting it in between). */
static CUgraph alloc_free_graph(CUstream s, size_t bytes, bool memset)
{
    CUgraph g;
    CUdeviceptr p;
    OK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemAllocAsync(&p, bytes, s));
    if (memset)
        OK(cuMemsetD8Async(p, 1, bytes, s));
    OK(cuMemFreeAsync(p, s));
    OK(cuStreamEndCapture(s, &g));
    return g;
}

/* cuGraphExecUpdate (graph_exec.c): an executable graph updated to a graph whose allocation node
 * asks 3 MiB instead of 1 allocates 3 MiB at its next launch, as the real driver did; a graph of
 * another shape is refused (TOPOLOGY_CHANGED) and changes nothing; the first graph, no longer the
 * executable graph's, can be instantiated again. Both ABIs. */
Test(graphs, exec_update_takes_the_new_allocation_sizes)
{
    CUstream s;
    CUgraphExec exec, again;
    CUgraphExecUpdateResultInfo info;
    CUgraphExecUpdateResult result;
    CUgraphNode error_node = (CUgraphNode)1;
    start(no_overhead);
    PFN_cuGraphExecUpdate_v10020 update_v1 = proc("cuGraphExecUpdate", 10020, 0);
    cr_assert_eq(proc("cuGraphExecUpdate", 12000, 0), (void *)cuGraphExecUpdate_v2);
    OK(cuStreamCreate(&s, 0));
    CUgraph g1 = alloc_free_graph(s, MiB, false), g2 = alloc_free_graph(s, 3 * MiB, false);
    CUgraph g3 = alloc_free_graph(s, 2 * MiB, true);
    OK(cuGraphInstantiateWithFlags(&exec, g1, 0));
    OK(cuGraphExecUpdate_v2(exec, g2, &info));
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    OK(cuGraphLaunch(exec, s));
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 3 * MiB);
    cr_assert_eq(cuGraphExecUpdate_v2(exec, g3, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    cr_assert_eq(update_v1(exec, g3, &error_node, &result), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    cr_assert_null(error_node);
    cr_assert_eq(cuGraphExecUpdate_v2(exec, g1, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphInstantiateWithFlags(&again, g1, 0)); /* g1 has no executable graph any more */
    cr_assert_eq(update_v1(exec, g1, &error_node, &result), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    cr_assert_eq(result, CU_GRAPH_EXEC_UPDATE_ERROR); /* g1's one executable graph is `again` */
    OK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &(cuuint64_t){0}));
    OK(cuGraphLaunch(exec, s));
    cr_assert_eq(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 3 * MiB, "still g2's");
    OK(cuGraphExecDestroy(again));
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(g1));
    OK(cuGraphDestroy(g2));
    OK(cuGraphDestroy(g3));
}
