/* Graphs (graph.c, graph_node.c), executable graphs (graph_exec.c) and graph memory
 * (graph_mem.c). One lock guards all of them. */
#ifndef SIM_GRAPH_H
#define SIM_GRAPH_H

#include <pthread.h>

#include "sim.h"

extern pthread_mutex_t sim_graph_lock;

/* A graph allocation: the address an allocation node fixed at creation, and whether memory is
 * attached to it (between an upload/launch and the free). */
struct sim_galloc {
    uintptr_t addr;
    size_t size;
    int dev;
    unsigned refs;   /* nodes and executable graphs naming it, plus one while attached */
    bool live;       /* attached: counted in the device's graph memory, in the registry */
    bool by_upload;  /* attached by cuGraphUpload, not yet consumed by a launch */
    bool attaching;  /* attached by the upload or launch in progress (undone if it fails) */
    bool has_free;   /* a free node exists for it (at most one, cuGraphAddMemFreeNode) */
    struct sim_galloc *next;
};

/* What a node does; the parameters of the node types the simulator models. */
struct sim_node_spec {
    CUgraphNodeType type;
    union {
        CUDA_MEMSET_NODE_PARAMS_v2 memset;
        struct {
            CUdeviceptr dst, src;
            size_t bytes;
        } memcpy;
        struct {
            CUhostFn fn;
            void *data;
        } host;
        CUDA_MEM_ALLOC_NODE_PARAMS_v2 alloc; /* dptr is set when the node is added */
        CUdeviceptr free;
        CUDA_CHILD_GRAPH_NODE_PARAMS child;
    } u;
};

struct CUgraphNode_st {
    uint32_t magic;
    CUgraph graph;
    struct sim_node_spec spec; /* alloc.accessDescs points into access[] */
    CUmemAccessDesc *access;
    struct sim_galloc *galloc; /* MEM_ALLOC and MEM_FREE nodes */
};

struct CUgraph_st {
    uint32_t magic;
    CUgraphNode *nodes; /* in creation order, which is a topological order */
    size_t count, cap;
    bool mem_nodes;       /* holds allocation or free nodes (itself or in a moved child) */
    bool moved;           /* owned by a parent's child-graph node (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) */
    CUgraphExec mem_exec; /* with mem_nodes: its one executable graph */
};

CUresult sim_graph_new(CUgraph *out);
CUresult sim_graph_check(CUgraph g);
void sim_graph_destroy(CUgraph g);
/* Adds a node (taking the graph lock). For MEM_ALLOC, spec->u.alloc.dptr is set. */
CUresult sim_graph_add(CUgraph g, const CUgraphNode *deps, size_t ndeps, struct sim_node_spec *spec,
                       CUgraphNode *out);
/* Validation that needs no lock (memset targets). */
CUresult sim_graph_check_spec(const struct sim_node_spec *spec);
/* Caller holds the graph lock. */
CUresult sim_node_fill(CUgraphNode node, CUgraph g, struct sim_node_spec *spec);
void sim_node_clear(CUgraphNode node);
CUresult sim_node_check(CUgraphNode node);

/* Graph memory (graph_mem.c); the caller holds the graph lock unless stated. */
struct sim_galloc *sim_galloc_new(int dev, size_t size);
struct sim_galloc *sim_galloc_find(uintptr_t addr);
struct sim_galloc *sim_galloc_ref(struct sim_galloc *g);
void sim_galloc_unref(struct sim_galloc *g);
CUresult sim_galloc_attach(struct sim_galloc *g, CUcontext ctx);
void sim_galloc_detach(struct sim_galloc *g);
/* cuMemFree_v2 / cuMemFreeAsync of a graph allocation (takes the lock). */
CUresult sim_graph_mem_free(CUdeviceptr addr);
/* Whether [p, p+n) lies in a graph allocation's address range, attached or not (takes the lock). */
bool sim_graph_mem_contains(uintptr_t p, size_t n);

/* Runs a memset or memcpy node's work. */
void sim_node_run_memset(const CUDA_MEMSET_NODE_PARAMS_v2 *p);

#endif
