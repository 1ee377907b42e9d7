/* Graphs and their nodes: creation, validation, cloning, destruction; cuGraphCreate,
 * cuGraphDestroy, cuGraphGetNodes, cuGraphNodeGetType. Node-adding entry points: graph_node.c.
 * Modelled node types: MEM_ALLOC, MEM_FREE, EMPTY, MEMSET, GRAPH (child), and MEMCPY / HOST
 * nodes made by stream capture; others are CUDA_ERROR_NOT_SUPPORTED. Edges are not stored: nodes
 * run in creation order, which respects every dependency given when they were added. */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "graph.h"
#include "mem.h"

#define GRAPH_MAGIC 0x47525048u
#define NODE_MAGIC 0x4e4f4445u

pthread_mutex_t sim_graph_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult clone_graph(CUgraph src, CUgraph *out);
static void free_graph(CUgraph g);

CUresult sim_graph_check(CUgraph g)
{
    return g && g->magic == GRAPH_MAGIC ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult sim_node_check(CUgraphNode node)
{
    return node && node->magic == NODE_MAGIC ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Destroyed graphs' objects, given to the next graphs made, newest first: a driver's handles are
 * the addresses of its objects, which its allocator hands out again, so a new graph may get the
 * handle of one destroyed before it (cushim must not take it for the old one). A leaf lock. */
#define RECYCLED_MAX 64
static CUgraph recycled[RECYCLED_MAX];
static unsigned recycled_n;
static pthread_mutex_t recycled_lock = PTHREAD_MUTEX_INITIALIZER;

CUresult sim_graph_new(CUgraph *out)
{
    CUgraph g = NULL;
    pthread_mutex_lock(&recycled_lock);
    if (recycled_n)
        g = recycled[--recycled_n];
    pthread_mutex_unlock(&recycled_lock);
    if (g)
        memset(g, 0, sizeof *g);
    else
        g = calloc(1, sizeof *g);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = GRAPH_MAGIC;
    *out = g;
    return CUDA_SUCCESS;
}

/* cuGraphAddMemAllocNode: "poolProps ... location where the allocation should reside";
 * "handleTypes must be CU_MEM_HANDLE_TYPE_NONE. IPC is not supported"; "accessDescCount ... Must not
 * exceed the number of GPUs". Device allocations only. */
static CUresult fill_alloc(CUgraphNode node, CUDA_MEM_ALLOC_NODE_PARAMS_v2 *p)
{
    const CUmemPoolProps *props = &p->poolProps;
    if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->handleTypes != CU_MEM_HANDLE_TYPE_NONE ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || !sim_device_valid(props->location.id) ||
        p->bytesize == 0 || p->accessDescCount > (size_t)sim_cfg.device_count || (p->accessDescCount && !p->accessDescs))
        return CUDA_ERROR_INVALID_VALUE;
    node->access = calloc(p->accessDescCount ? p->accessDescCount : 1, sizeof *node->access);
    node->galloc = node->access ? sim_galloc_new(props->location.id, p->bytesize) : NULL;
    if (!node->galloc) {
        free(node->access);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (p->accessDescCount)
        memcpy(node->access, p->accessDescs, p->accessDescCount * sizeof *node->access);
    p->dptr = node->galloc->addr;
    return CUDA_SUCCESS;
}

/* cuGraphAddMemFreeNode "will return CUDA_ERROR_INVALID_VALUE if the user attempts to free: an
 * allocation twice in the same graph; an address that was not returned by an allocation node; an
 * invalid address"; cuGraphAddMemAllocNode: "It is not possible to free an allocation in both the
 * owning graph and another graph." */
static CUresult fill_free(CUgraphNode node, CUdeviceptr dptr)
{
    struct sim_galloc *g = sim_galloc_find(dptr);
    if (!g || g->has_free)
        return CUDA_ERROR_INVALID_VALUE;
    g->has_free = true;
    node->galloc = sim_galloc_ref(g);
    return CUDA_SUCCESS;
}

/* CUDA_CHILD_GRAPH_NODE_PARAMS: "Graphs containing memory allocation or memory free nodes must set
 * the ownership to be moved to the parent"; CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE: moved graphs
 * "Cannot be independently instantiated or destroyed; Cannot be added as a child graph of a
 * separate parent graph". */
static CUresult fill_child(CUgraph parent, CUDA_CHILD_GRAPH_NODE_PARAMS *p)
{
    CUgraph child = p->graph;
    if (sim_graph_check(child) != CUDA_SUCCESS || child == parent || child->moved)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
        return child->mem_nodes ? CUDA_ERROR_INVALID_VALUE : clone_graph(child, &p->graph);
    if (p->ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE || child->mem_exec)
        return CUDA_ERROR_INVALID_VALUE;
    child->moved = true;
    parent->mem_nodes |= child->mem_nodes;
    return CUDA_SUCCESS;
}

/* Caller holds the lock. Validates `spec` for graph g and makes `node` of it. Graphs moved into a
 * parent "Cannot have additional memory allocation or free nodes added" (CUgraphChildGraphNodeOwnership). */
CUresult sim_node_fill(CUgraphNode node, CUgraph g, struct sim_node_spec *spec)
{
    CUresult rc = CUDA_SUCCESS;
    bool mem = spec->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || spec->type == CU_GRAPH_NODE_TYPE_MEM_FREE;
    if (mem && g->moved)
        return CUDA_ERROR_INVALID_VALUE;
    switch (spec->type) {
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        rc = fill_alloc(node, &spec->u.alloc);
        break;
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        rc = fill_free(node, spec->u.free);
        break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
        rc = fill_child(g, &spec->u.child);
        break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_HOST:
    case CU_GRAPH_NODE_TYPE_EMPTY:
        break;
    default:
        rc = CUDA_ERROR_NOT_SUPPORTED;
    }
    if (rc != CUDA_SUCCESS)
        return rc;
    node->magic = NODE_MAGIC;
    node->graph = g;
    node->spec = *spec;
    if (spec->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        node->spec.u.alloc.accessDescs = node->access;
    g->mem_nodes |= mem;
    return CUDA_SUCCESS;
}

void sim_node_clear(CUgraphNode node)
{
    if (node->spec.type == CU_GRAPH_NODE_TYPE_MEM_FREE)
        node->galloc->has_free = false;
    if (node->galloc)
        sim_galloc_unref(node->galloc);
    if (node->spec.type == CU_GRAPH_NODE_TYPE_GRAPH)
        free_graph(node->spec.u.child.graph);
    free(node->access);
    node->galloc = NULL;
    node->access = NULL;
}

static CUresult append(CUgraph g, CUgraphNode node)
{
    if (g->count == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        CUgraphNode *nodes = realloc(g->nodes, cap * sizeof *nodes);
        if (!nodes)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->nodes = nodes;
        g->cap = cap;
    }
    g->nodes[g->count++] = node;
    return CUDA_SUCCESS;
}

/* Caller holds the lock. Graphs with memory nodes cannot be cloned (cuGraphAddMemAllocNode). */
static CUresult clone_graph(CUgraph src, CUgraph *out)
{
    CUgraph g = NULL;
    CUresult rc = sim_graph_new(&g);
    for (size_t i = 0; rc == CUDA_SUCCESS && i < src->count; i++) {
        CUgraphNode node = calloc(1, sizeof *node);
        if (!node) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        *node = (struct CUgraphNode_st){.magic = NODE_MAGIC, .graph = g, .spec = src->nodes[i]->spec};
        if (node->spec.type == CU_GRAPH_NODE_TYPE_GRAPH)
            rc = clone_graph(src->nodes[i]->spec.u.child.graph, &node->spec.u.child.graph);
        if (rc == CUDA_SUCCESS)
            rc = append(g, node);
        if (rc != CUDA_SUCCESS)
            free(node);
    }
    if (rc == CUDA_SUCCESS)
        *out = g;
    else if (g)
        free_graph(g);
    return rc;
}

/* Caller holds the lock. cuGraphDestroy: "Destroys the graph specified by hGraph, as well as all
 * of its nodes"; graph allocations stay as they are (cuGraphAddMemAllocNode: allocations not
 * freed in the graph outlive it). */
static void free_graph(CUgraph g)
{
    for (size_t i = 0; i < g->count; i++) {
        sim_node_clear(g->nodes[i]);
        g->nodes[i]->magic = 0;
        free(g->nodes[i]);
    }
    if (g->mem_exec)
        g->mem_exec->graph = NULL;
    free(g->nodes);
    g->magic = 0;
    pthread_mutex_lock(&recycled_lock);
    if (recycled_n < RECYCLED_MAX) {
        recycled[recycled_n++] = g;
        g = NULL;
    }
    pthread_mutex_unlock(&recycled_lock);
    free(g);
}

void sim_graph_destroy(CUgraph g)
{
    pthread_mutex_lock(&sim_graph_lock);
    free_graph(g);
    pthread_mutex_unlock(&sim_graph_lock);
}

/* CUDA_MEMSET_NODE_PARAMS: elementSize "Must be 1, 2, or 4"; the target must be memory the device
 * can reach. A row's bytes or the span that overflow size_t are out of range
 * (CUDA_ERROR_INVALID_VALUE, as a target outside memory). Checked before taking the lock. */
CUresult sim_graph_check_spec(const struct sim_node_spec *spec)
{
    if (spec->type != CU_GRAPH_NODE_TYPE_MEMSET)
        return CUDA_SUCCESS;
    const CUDA_MEMSET_NODE_PARAMS_v2 *p = &spec->u.memset;
    unsigned es = p->elementSize;
    size_t row, span;
    if ((es != 1 && es != 2 && es != 4) || p->width == 0 || p->height == 0 ||
        __builtin_mul_overflow(p->width, (size_t)es, &row) || (p->height > 1 && p->pitch < row) ||
        __builtin_mul_overflow(p->height - 1, p->pitch, &span) || __builtin_add_overflow(span, row, &span))
        return CUDA_ERROR_INVALID_VALUE;
    return sim_mem_check(p->dst, span, false);
}

CUresult sim_graph_add(CUgraph g, const CUgraphNode *deps, size_t ndeps, struct sim_node_spec *spec,
                       CUgraphNode *out)
{
    CUresult rc = sim_graph_check(g);
    if (rc == CUDA_SUCCESS && ndeps && !deps)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = sim_graph_check_spec(spec);
    CUgraphNode node = rc == CUDA_SUCCESS ? calloc(1, sizeof *node) : NULL;
    if (rc == CUDA_SUCCESS && !node)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&sim_graph_lock);
    for (size_t i = 0; i < ndeps && rc == CUDA_SUCCESS; i++)
        if (sim_node_check(deps[i]) != CUDA_SUCCESS || deps[i]->graph != g)
            rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = sim_node_fill(node, g, spec);
    if (rc == CUDA_SUCCESS && (rc = append(g, node)) != CUDA_SUCCESS)
        sim_node_clear(node);
    pthread_mutex_unlock(&sim_graph_lock);
    if (rc == CUDA_SUCCESS)
        *out = node;
    else
        free(node);
    return rc;
}

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    SIM_ENTER(cuGraphCreate);
    return phGraph && flags == 0 ? sim_graph_new(phGraph) : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    SIM_ENTER(cuGraphDestroy);
    CUresult rc = sim_graph_check(hGraph);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&sim_graph_lock);
    if (hGraph->moved)
        rc = CUDA_ERROR_INVALID_VALUE;
    else
        free_graph(hGraph);
    pthread_mutex_unlock(&sim_graph_lock);
    return rc;
}

/* cuda.h, cuGraphGetNodes: "If nodes is NULL, this function will return the number of nodes in
 * numNodes. Otherwise, numNodes entries will be filled in. If numNodes is higher than the actual
 * number of nodes, the remaining entries in nodes will be set to NULL, and the number of nodes
 * actually obtained will be returned in numNodes." */
CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    SIM_ENTER(cuGraphGetNodes);
    CUresult rc = numNodes ? sim_graph_check(hGraph) : CUDA_ERROR_INVALID_VALUE;
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&sim_graph_lock);
    if (nodes) {
        for (size_t i = 0; i < *numNodes; i++)
            nodes[i] = i < hGraph->count ? hGraph->nodes[i] : NULL;
        if (*numNodes > hGraph->count)
            *numNodes = hGraph->count;
    } else {
        *numNodes = hGraph->count;
    }
    pthread_mutex_unlock(&sim_graph_lock);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    SIM_ENTER(cuGraphNodeGetType);
    CUresult rc = type ? sim_node_check(hNode) : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        *type = hNode->spec.type;
    return rc;
}
