/* CUDA graphs as the shim sees them (issue 5): the per-graph table in the segment, per-device
 * graph counters, and the driver's graph memory pool read after uploads and launches (at most
 * every 100 ms, and at exit). Thread-safe. */
#ifndef CUSHIM_GRAPH_H
#define CUSHIM_GRAPH_H

#include "shim/shim.h"

/* An executable graph was made from `graph` on `device`: records it (alloc-node bytes by walking
 * the graph, capture bytes from the capture that made `graph`, if any). */
void graph_instantiated(CUgraphExec exec, CUgraph graph, int device, CUcontext ctx);
/* cuGraphExecDestroy succeeded. */
void graph_exec_destroyed(CUgraphExec exec);
/* The executable graphs of a context that was torn down are gone with it. */
void graph_context_gone(uint64_t ctx);
/* cuGraphDestroy succeeded: forget its capture bytes. */
void graph_destroyed(CUgraph graph);
/* A capture ended into `graph` having allocated `bytes` (non-node allocations) while live. */
void graph_captured(CUgraph graph, int device, uint64_t bytes);
/* cuGraphLaunch succeeded on exec: launch counters, CUSHIM_COMPILE_END, pool sampling. */
void graph_launched(CUgraphExec exec);
/* Reads the graph memory pool of `device` now if the last read is 100 ms old (force: now). */
void graph_pool_sample(int device, bool force);
/* At exit: every device's pool. */
void graph_pool_sample_all(void);

#endif
