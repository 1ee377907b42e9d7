/* Executable graphs (graph_exec.c): a graph flattened into the operations a launch runs. */
#ifndef SIM_EXEC_H
#define SIM_EXEC_H

#include "graph.h"

struct sim_op {
    struct sim_node_spec spec;
    struct sim_galloc *galloc; /* MEM_ALLOC and MEM_FREE */
};

struct CUgraphExec_st {
    uint32_t magic;
    struct sim_op *ops;
    size_t count;
    unsigned long long flags; /* CUDA_GRAPH_INSTANTIATE_FLAG_* */
    CUgraph graph;            /* the graph with memory nodes it was made from, while it exists */
};

#endif
