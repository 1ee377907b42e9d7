/* CUDA graphs (issue 5): instantiation (every ABI), update, launch, upload, destruction, and the
 * graph memory pool's attributes and trim. Results are returned unchanged; counting happens only
 * after success. Allocation nodes are counted at instantiation, and again at an update, by walking
 * the graph, so nodes from any source (stream capture, cuGraphAddMemAllocNode, cuGraphAddNode_v2,
 * cuGraphNodeSetParams, child graphs, cuStreamBeginCaptureToGraph) are seen the same way. */
#include "shim/graph.h"
#include "shim/track.h"

static CUresult instantiated(CUresult r, CUgraphExec *exec, CUgraph graph)
{
    if (r == CUDA_SUCCESS && exec && shim_enter()) {
        CUcontext ctx;
        int device = shim_current_device(&ctx);
        graph_instantiated(*exec, graph, device, ctx);
        shim_leave();
    }
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                CUgraphNode *phErrorNode, char *logBuffer,
                                                size_t bufferSize)
{
    REAL_OR_FAIL(cuGraphInstantiate);
    return instantiated(real_(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize), phGraphExec, hGraph);
}

SHIM_EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                   CUgraphNode *phErrorNode, char *logBuffer,
                                                   size_t bufferSize)
{
    REAL_OR_FAIL(cuGraphInstantiate_v2);
    return instantiated(real_(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize), phGraphExec, hGraph);
}

SHIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                         unsigned long long flags)
{
    REAL_OR_FAIL(cuGraphInstantiateWithFlags);
    return instantiated(real_(phGraphExec, hGraph, flags), phGraphExec, hGraph);
}

/* cuda.h, cuGraphInstantiateWithParams: CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD "will perform an
 * upload of the graph into hUploadStream once the graph has been instantiated": an upload, so
 * the pool is read as after cuGraphUpload. The flags are read before the call (the driver writes
 * only the _out fields). */
static CUresult instantiated_with_params(CUresult r, CUgraphExec *exec, CUgraph graph, bool upload)
{
    r = instantiated(r, exec, graph);
    if (r == CUDA_SUCCESS && upload && exec && shim_enter()) {
        graph_exec_uploaded(*exec, budget_any); /* a budget needs the reserve now (budget.h) */
        shim_leave();
    }
    return r;
}

static bool upload_flag(const CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    return params && (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
}

SHIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                          CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    REAL_OR_FAIL(cuGraphInstantiateWithParams);
    bool upload = upload_flag(params);
    return instantiated_with_params(real_(phGraphExec, hGraph, params), phGraphExec, hGraph, upload);
}

SHIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                               CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    REAL_OR_FAIL(cuGraphInstantiateWithParams_ptsz);
    bool upload = upload_flag(params);
    return instantiated_with_params(real_(phGraphExec, hGraph, params), phGraphExec, hGraph, upload);
}

/* cuGraphExecUpdate: on success the executable graph runs hGraph's nodes, allocation nodes of
 * other sizes included (graph.h graph_exec_updated). Both ABIs: 10020 (error node and result
 * through two pointers) and 12000 (CUgraphExecUpdateResultInfo). */
static CUresult updated(CUresult r, CUgraphExec exec, CUgraph graph)
{
    if (r == CUDA_SUCCESS && exec && shim_enter()) {
        graph_exec_updated(exec, graph);
        shim_leave();
    }
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                               CUgraphExecUpdateResult *updateResult_out)
{
    REAL_OR_FAIL(cuGraphExecUpdate);
    return updated(real_(hGraphExec, hGraph, hErrorNode_out, updateResult_out), hGraphExec, hGraph);
}

SHIM_EXPORT CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                                  CUgraphExecUpdateResultInfo *resultInfo)
{
    REAL_OR_FAIL(cuGraphExecUpdate_v2);
    return updated(real_(hGraphExec, hGraph, resultInfo), hGraphExec, hGraph);
}

SHIM_EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    REAL_OR_FAIL(cuGraphExecDestroy);
    if (!hGraphExec || !shim_enter()) /* NULL: the driver's to refuse (no key of the tables) */
        return real_(hGraphExec);
    struct graph_exec_taken t;
    graph_exec_take(hGraphExec, &t);
    CUresult r = real_(hGraphExec);
    graph_exec_settle(&t, r == CUDA_SUCCESS);
    shim_leave();
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    REAL_OR_FAIL(cuGraphDestroy);
    if (!hGraph || !shim_enter())
        return real_(hGraph);
    struct graph_taken taken;
    graph_take(hGraph, &taken);
    CUresult r = real_(hGraph);
    graph_settle(&taken, r == CUDA_SUCCESS);
    shim_leave();
    return r;
}

#define LAUNCH(sym)                                                              \
    SHIM_EXPORT CUresult CUDAAPI sym(CUgraphExec hGraphExec, CUstream hStream)   \
    {                                                                            \
        REAL_OR_FAIL(sym);                                                       \
        CUresult r = real_(hGraphExec, hStream);                                 \
        if (likely(r == CUDA_SUCCESS) && shim_enter()) {                         \
            graph_launched(hGraphExec);                                          \
            shim_leave();                                                        \
        }                                                                        \
        return r;                                                                \
    }
LAUNCH(cuGraphLaunch)
LAUNCH(cuGraphLaunch_ptsz)

/* Upload attaches graph memory (cuda.h, cuGraphUpload): a moment to read the pool, of the
 * device(s) the graph's allocation nodes are on. */
#define UPLOAD(sym)                                                              \
    SHIM_EXPORT CUresult CUDAAPI sym(CUgraphExec hGraphExec, CUstream hStream)   \
    {                                                                            \
        REAL_OR_FAIL(sym);                                                       \
        CUresult r = real_(hGraphExec, hStream);                                 \
        if (r == CUDA_SUCCESS && shim_enter()) {                                 \
            /* A budget needs the reserve now: read whatever the last read's age. */ \
            graph_exec_uploaded(hGraphExec, budget_any);                         \
            shim_leave();                                                        \
        }                                                                        \
        return r;                                                                \
    }
UPLOAD(cuGraphUpload)
UPLOAD(cuGraphUpload_ptsz)

/* The program reads the pool: a moment to read all of it (one attribute alone would leave the
 * others, and sampled_ns, out of step with it). */
SHIM_EXPORT CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                                          void *value)
{
    REAL_OR_FAIL(cuDeviceGetGraphMemAttribute);
    CUresult r = real_(device, attr, value);
    if (r == CUDA_SUCCESS && value && shim_enter()) {
        graph_pool_sample(device, true);
        shim_leave();
    }
    return r;
}

/* cuda.h cuDeviceSetGraphMemAttribute: CU_GRAPH_MEM_ATTR_USED_MEM_HIGH and RESERVED_MEM_HIGH "can
 * only be reset to zero": the pool is read again, so the live view shows the reset at once. */
SHIM_EXPORT CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                                          void *value)
{
    REAL_OR_FAIL(cuDeviceSetGraphMemAttribute);
    CUresult r = real_(device, attr, value);
    if (r == CUDA_SUCCESS && shim_enter()) {
        graph_pool_sample(device, true);
        shim_leave();
    }
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
    REAL_OR_FAIL(cuDeviceGraphMemTrim);
    CUresult r = real_(device);
    if (r == CUDA_SUCCESS && shim_enter()) {
        graph_pool_sample(device, true);
        shim_leave();
    }
    return r;
}
