/* Executable graphs: cuGraphInstantiate (10000 ABI), cuGraphInstantiate_v2 (11000 ABI),
 * cuGraphInstantiateWithFlags, cuGraphInstantiateWithParams(+_ptsz), cuGraphUpload(+_ptsz),
 * cuGraphLaunch(+_ptsz), cuGraphExecUpdate (10020 and 12000 ABIs), cuGraphExecDestroy.
 *
 * Graph memory (cuda.h, cuGraphAddMemAllocNode / cuGraphLaunch / cuGraphUpload): memory is
 * attached to an allocation node's fixed address when the executable graph is uploaded ("Uses
 * memory cached by stream to back the allocations owned by hGraphExec") or launched, and
 * released by a free node, cuMemFreeAsync, cuMemFree_v2 or a relaunch with
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH ("each launch behave as though it called
 * cuMemFreeAsync for every unfreed allocation"). "If any allocations created by hGraphExec remain
 * unfreed (from a previous launch) and hGraphExec was not instantiated with
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, the launch will fail with
 * CUDA_ERROR_INVALID_VALUE." Destroying a graph or an executable graph frees nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "exec.h"
#include "stream.h"

#define EXEC_MAGIC 0x45584543u
#define KNOWN_FLAGS                                                                                          \
    (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |                  \
     CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY)

static CUresult check(CUgraphExec exec)
{
    return exec && exec->magic == EXEC_MAGIC ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Caller holds the lock. Appends g's work in order, child graphs inline. */
static CUresult flatten(CUgraph g, CUgraphExec exec, size_t *cap)
{
    for (size_t i = 0; i < g->count; i++) {
        const CUgraphNode node = g->nodes[i];
        CUresult rc = CUDA_SUCCESS;
        if (node->spec.type == CU_GRAPH_NODE_TYPE_GRAPH)
            rc = flatten(node->spec.u.child.graph, exec, cap);
        if (rc != CUDA_SUCCESS)
            return rc;
        if (node->spec.type == CU_GRAPH_NODE_TYPE_GRAPH || node->spec.type == CU_GRAPH_NODE_TYPE_EMPTY)
            continue;
        if (exec->count == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            struct sim_op *ops = realloc(exec->ops, *cap * sizeof *ops);
            if (!ops)
                return CUDA_ERROR_OUT_OF_MEMORY;
            exec->ops = ops;
        }
        exec->ops[exec->count++] = (struct sim_op){node->spec, node->galloc ? sim_galloc_ref(node->galloc) : NULL};
    }
    return CUDA_SUCCESS;
}

/* Caller holds the lock. */
static void exec_free(CUgraphExec exec)
{
    for (size_t i = 0; i < exec->count; i++)
        if (exec->ops[i].galloc)
            sim_galloc_unref(exec->ops[i].galloc);
    if (exec->graph)
        exec->graph->mem_exec = NULL;
    exec->magic = 0;
    free(exec->ops);
    free(exec);
}

/* cuGraphInstantiateWithParams: "If hGraph contains any allocation or free nodes, there can be at
 * most one executable graph in existence for that graph at a time." DEVICE_LAUNCH "cannot be used
 * in conjunction with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH"; device launch itself is not
 * modelled. Moved child graphs "Cannot be independently instantiated". */
static CUresult instantiate(CUgraphExec *out, CUgraph g, unsigned long long flags)
{
    CUresult rc = out ? sim_graph_check(g) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && ((flags & ~(unsigned long long)KNOWN_FLAGS) ||
                               (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)))
        rc = CUDA_ERROR_INVALID_VALUE;
    CUgraphExec exec = rc == CUDA_SUCCESS ? calloc(1, sizeof *exec) : NULL;
    if (rc == CUDA_SUCCESS && !exec)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS)
        return rc;
    *exec = (struct CUgraphExec_st){.magic = EXEC_MAGIC, .flags = flags};
    size_t cap = 0;
    pthread_mutex_lock(&sim_graph_lock);
    if (g->moved || (g->mem_nodes && g->mem_exec))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = flatten(g, exec, &cap);
    if (rc == CUDA_SUCCESS && g->mem_nodes) {
        exec->graph = g;
        g->mem_exec = exec;
    }
    if (rc != CUDA_SUCCESS)
        exec_free(exec);
    pthread_mutex_unlock(&sim_graph_lock);
    if (rc == CUDA_SUCCESS)
        *out = exec;
    return rc;
}

/* Caller holds the lock. Attaches an allocation node's memory, or fails with nothing changed. */
static CUresult attach(struct sim_galloc *g, CUcontext ctx, bool by_upload)
{
    CUresult rc = sim_galloc_attach(g, ctx);
    if (rc == CUDA_SUCCESS) {
        g->by_upload = by_upload;
        g->attaching = true;
    }
    return rc;
}

/* Caller holds the lock. Ends an upload or launch: when it failed, what it attached is detached
 * again, so a failed call allocates nothing. */
static CUresult finish(CUgraphExec exec, CUresult rc)
{
    for (size_t i = 0; i < exec->count; i++) {
        struct sim_galloc *g = exec->ops[i].galloc;
        if (exec->ops[i].spec.type != CU_GRAPH_NODE_TYPE_MEM_ALLOC)
            continue;
        if (rc != CUDA_SUCCESS && g->attaching && g->live)
            sim_galloc_detach(g);
        g->attaching = false;
    }
    return rc;
}

static CUresult upload(CUgraphExec exec, CUstream h, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = check(exec);
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&sim_graph_lock);
    for (size_t i = 0; i < exec->count && rc == CUDA_SUCCESS; i++)
        if (exec->ops[i].spec.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && !exec->ops[i].galloc->live)
            rc = attach(exec->ops[i].galloc, s->ctx, true);
    rc = finish(exec, rc);
    pthread_mutex_unlock(&sim_graph_lock);
    if (rc == CUDA_SUCCESS)
        sim_stream_enqueue(s);
    return rc;
}

/* Caller holds the lock. Runs one operation of a launch, in node order. Host functions run under
 * the lock: cuda.h, cuLaunchHostFunc: "The host function must not make any CUDA API calls." */
static CUresult run(const struct sim_op *op, CUcontext ctx)
{
    switch (op->spec.type) {
    case CU_GRAPH_NODE_TYPE_MEMSET:
        sim_node_run_memset(&op->spec.u.memset);
        break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        memmove((void *)op->spec.u.memcpy.dst, (const void *)op->spec.u.memcpy.src, op->spec.u.memcpy.bytes);
        break;
    case CU_GRAPH_NODE_TYPE_HOST:
        op->spec.u.host.fn(op->spec.u.host.data);
        break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        if (!op->galloc->live)
            return attach(op->galloc, ctx, false);
        op->galloc->by_upload = false;
        break;
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        if (op->galloc->live)
            sim_galloc_detach(op->galloc);
        break;
    default:
        break;
    }
    return CUDA_SUCCESS;
}

/* Launching into a capturing stream (embedding the graph) is not modelled. */
static CUresult launch(CUgraphExec exec, CUstream h, bool per_thread_api)
{
    struct CUstream_st *s;
    CUresult rc = check(exec);
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(h, per_thread_api, &s);
    if (rc == CUDA_SUCCESS && sim_capture_ongoing(s))
        rc = CUDA_ERROR_NOT_SUPPORTED;
    if (rc != CUDA_SUCCESS)
        return rc;
    bool auto_free = exec->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
    pthread_mutex_lock(&sim_graph_lock);
    for (size_t i = 0; i < exec->count && rc == CUDA_SUCCESS; i++) {
        struct sim_galloc *g = exec->ops[i].galloc;
        if (exec->ops[i].spec.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && g->live && !g->by_upload && !auto_free)
            rc = CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < exec->count && rc == CUDA_SUCCESS; i++) {
        struct sim_galloc *g = exec->ops[i].galloc;
        if (exec->ops[i].spec.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && g->live && !g->by_upload)
            sim_galloc_detach(g);
    }
    for (size_t i = 0; i < exec->count && rc == CUDA_SUCCESS; i++)
        rc = run(&exec->ops[i], s->ctx);
    rc = finish(exec, rc);
    pthread_mutex_unlock(&sim_graph_lock);
    if (rc == CUDA_SUCCESS)
        sim_stream_enqueue(s);
    return rc;
}

/* The 10000/11000 ABIs report errors in a log buffer. */
static CUresult instantiate_logged(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                   char *logBuffer, size_t bufferSize)
{
    CUresult rc = instantiate(phGraphExec, hGraph, 0);
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        snprintf(logBuffer, bufferSize, "%s", rc == CUDA_SUCCESS ? "" : "simcuda: graph cannot be instantiated");
    return rc;
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                    char *logBuffer, size_t bufferSize)
{
    SIM_ENTER(cuGraphInstantiate);
    return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
    SIM_ENTER(cuGraphInstantiate_v2);
    return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

/* CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD: "Only supported by cuGraphInstantiateWithParams". */
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    SIM_ENTER(cuGraphInstantiateWithFlags);
    return flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD ? CUDA_ERROR_INVALID_VALUE
                                                      : instantiate(phGraphExec, hGraph, flags);
}

/* cuda.h: "If instantiation is successful, result_out will be set to
 * CUDA_GRAPH_INSTANTIATE_SUCCESS, and hErrNode_out will be set to NULL"; CUDA_GRAPH_INSTANTIATE_ERROR
 * for "an invalid value or if an unexpected error occurred". CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD
 * "will perform an upload of the graph into hUploadStream once the graph has been instantiated". */
static CUresult instantiate_with_params(CUgraphExec *phGraphExec, CUgraph hGraph,
                                        CUDA_GRAPH_INSTANTIATE_PARAMS *params, bool per_thread_api)
{
    if (!params)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = instantiate(phGraphExec, hGraph, params->flags);
    if (rc == CUDA_SUCCESS && (params->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
        rc = upload(*phGraphExec, params->hUploadStream, per_thread_api);
    params->hErrNode_out = NULL;
    params->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SIM_ENTER(cuGraphInstantiateWithParams);
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams, false);
}

CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SIM_ENTER(cuGraphInstantiateWithParams_ptsz);
    return instantiate_with_params(phGraphExec, hGraph, instantiateParams, true);
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphUpload);
    return upload(hGraphExec, hStream, false);
}

CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphUpload_ptsz);
    return upload(hGraphExec, hStream, true);
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphLaunch);
    return launch(hGraphExec, hStream, false);
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_ENTER(cuGraphLaunch_ptsz);
    return launch(hGraphExec, hStream, true);
}

/* cuda.h cuGraphExecUpdate: "Updates the node parameters in the instantiated graph specified by
 * hGraphExec with the node parameters in a topologically identical graph specified by hGraph";
 * CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE "if the graph update was not performed", the result saying
 * why. Here a graph is topologically identical when it flattens (child graphs inline, empty nodes
 * left out) to as many operations (else TOPOLOGY_CHANGED) of the same types in the same order
 * (else NODE_TYPE_CHANGED, the error node NULL: the flattened operations keep no node); edges are
 * not compared. Allocation nodes take their new parameters: the real driver updated a graph
 * allocating 32 MiB to one allocating 96 MiB, and the launch after allocated 96 MiB (H200, driver
 * 580.159.04, 2026-12-04: docs/GPU-VALIDATION.md sim_model), so the executable graph takes the
 * new graph's operations, and their memory, from then on. Our choices where cuda.h is silent: a
 * graph with memory nodes that already has another executable graph (cuGraphInstantiate: "at most
 * one executable graph in existence for that graph at a time"), or an executable graph whose
 * memory from an upload or a launch is still attached, is not updated (result
 * CU_GRAPH_EXEC_UPDATE_ERROR). An invalid handle: CUDA_ERROR_INVALID_VALUE, result ERROR. */
static CUresult exec_update(CUgraphExec exec, CUgraph g, CUgraphExecUpdateResult *result)
{
    *result = CU_GRAPH_EXEC_UPDATE_ERROR;
    CUresult rc = check(exec);
    if (rc == CUDA_SUCCESS)
        rc = sim_graph_check(g);
    if (rc != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUgraphExec_st fresh = {.magic = EXEC_MAGIC};
    size_t cap = 0;
    pthread_mutex_lock(&sim_graph_lock);
    if (g->moved) {
        pthread_mutex_unlock(&sim_graph_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    rc = flatten(g, &fresh, &cap);
    if (rc == CUDA_SUCCESS) {
        rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
        bool attached = false;
        for (size_t i = 0; i < exec->count; i++)
            if (exec->ops[i].spec.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC && exec->ops[i].galloc->live)
                attached = true;
        if (fresh.count != exec->count) {
            *result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        } else if (attached || (g->mem_nodes && g->mem_exec && g->mem_exec != exec)) {
            *result = CU_GRAPH_EXEC_UPDATE_ERROR;
        } else {
            *result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
            for (size_t i = 0; i < fresh.count; i++)
                if (fresh.ops[i].spec.type != exec->ops[i].spec.type)
                    *result = CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        }
        if (*result == CU_GRAPH_EXEC_UPDATE_SUCCESS) {
            /* The executable graph takes the new operations; the old ones go as exec_free's. */
            struct sim_op *old_ops = exec->ops;
            size_t old_count = exec->count;
            exec->ops = fresh.ops, exec->count = fresh.count;
            fresh.ops = old_ops, fresh.count = old_count;
            if (exec->graph)
                exec->graph->mem_exec = NULL;
            exec->graph = g->mem_nodes ? g : NULL;
            if (g->mem_nodes)
                g->mem_exec = exec;
            rc = CUDA_SUCCESS;
        }
    }
    for (size_t i = 0; i < fresh.count; i++)
        if (fresh.ops[i].galloc)
            sim_galloc_unref(fresh.ops[i].galloc);
    free(fresh.ops);
    pthread_mutex_unlock(&sim_graph_lock);
    return rc;
}

/* The 10020 ABI: the error node and the result through two pointers (the node always NULL here). */
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                                   CUgraphExecUpdateResult *updateResult_out)
{
    SIM_ENTER(cuGraphExecUpdate);
    CUgraphExecUpdateResult result;
    if (!hErrorNode_out || !updateResult_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = exec_update(hGraphExec, hGraph, &result);
    *hErrorNode_out = NULL;
    *updateResult_out = result;
    return rc;
}

/* The 12000 ABI: CUgraphExecUpdateResultInfo (result, errorNode, errorFromNode; the nodes NULL). */
CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo *resultInfo)
{
    SIM_ENTER(cuGraphExecUpdate_v2);
    CUgraphExecUpdateResult result;
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = exec_update(hGraphExec, hGraph, &result);
    memset(resultInfo, 0, sizeof *resultInfo);
    resultInfo->result = result;
    return rc;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    SIM_ENTER(cuGraphExecDestroy);
    CUresult rc = check(hGraphExec);
    if (rc == CUDA_SUCCESS) {
        pthread_mutex_lock(&sim_graph_lock);
        exec_free(hGraphExec);
        pthread_mutex_unlock(&sim_graph_lock);
    }
    return rc;
}
