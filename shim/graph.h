/* CUDA graphs as the shim sees them (issue 5): the per-graph table in the segment, per-device
 * graph counters, and the driver's graph memory pool read after uploads and launches (at most
 * every 100 ms), after a trim or a high-water-mark reset (hooks_graph.c), and at exit. Thread-safe. */
#ifndef CUSHIM_GRAPH_H
#define CUSHIM_GRAPH_H

#include "shim/shim.h"

/* An executable graph was made from `graph` on `device`: records it (alloc-node bytes by walking
 * the graph and its child graphs at any depth, each counted on the device of its node's pool;
 * capture bytes from the captures that made `graph` or a graph moved into it, if any). `device`
 * and `ctx`: the current context and its device at instantiation (shim_current_device: device
 * -1 counts on no device); ctx ties its entries to that context for graph_context_gone. Inside
 * the shim (shim_enter). Nothing is returned: with more than CUSHIM_MAX_GRAPHS alive it is left
 * out of the segment's per-graph table (logged once; device totals stay exact); a table that
 * cannot grow (out of memory) leaves its alloc-node bytes or its entry out, silently. */
void graph_instantiated(CUgraphExec exec, CUgraph graph, int device, CUcontext ctx);
/* cuGraphExecDestroy, in two steps around the real call: its entries are taken out of the
 * tables before it (once the driver has destroyed it, another thread's instantiation may get the
 * same handle value and its entries), then counted gone if it succeeded, or put back. Any
 * thread; no lock held in between. */
struct graph_exec_taken {
    bool found;
    unsigned n;                    /* nodes[] used */
    struct shim_entry e;           /* the executable graph's entry */
    struct shim_entry nodes[64];   /* its allocation-node bytes, one per device */
};
void graph_exec_take(CUgraphExec exec, struct graph_exec_taken *t);
void graph_exec_settle(const struct graph_exec_taken *t, bool destroyed);
/* cuGraphExecUpdate of exec to `graph` succeeded: exec's allocation nodes are graph's from now on
 * (the real driver took an update to a graph whose allocation node asks another size, and the next
 * launch allocated the new size: docs/GPU-VALIDATION.md sim_model, H200, 2026-12-04), so its
 * alloc-node bytes are walked again from graph, per device, and its row's `alloc_node_bytes` and
 * `capture_bytes` become graph's; its id, launches and context stay. An exec the shim does not
 * hold is left alone. The program must not use exec on another thread meanwhile (cuda.h: graph
 * objects are not thread safe). Inside the shim (shim_enter). */
void graph_exec_updated(CUgraphExec exec, CUgraph graph);
/* The executable graphs of a context that was torn down are gone with it. */
void graph_context_gone(uint64_t ctx);
/* cuGraphDestroy, the same way: its capture bytes, and those of the child graphs moved into it
 * (destroyed with it), taken out before the real call, forgotten if it succeeded, put back if not.
 * graph_settle frees what graph_take took from the arena. */
struct graph_taken {
    bool had;                /* the graph's own capture bytes: e */
    struct shim_entry e;
    unsigned n, cap;         /* kids[] used and allocated */
    struct shim_entry *kids; /* child graphs' capture bytes (arena) */
};
/* When the arena cannot hold another child's entry, that child's capture bytes are forgotten
 * (logged once): not put back if the destroy fails. */
void graph_take(CUgraph graph, struct graph_taken *t);
void graph_settle(struct graph_taken *t, bool destroyed);
/* A capture ended into `graph` having allocated `bytes` (non-node allocations) while live; the
 * bytes of several captures into one graph add up. */
void graph_captured(CUgraph graph, int device, uint64_t bytes);
/* cuGraphLaunch succeeded on exec: launch counters, CUSHIM_COMPILE_END, pool sampling. */
void graph_launched(CUgraphExec exec);
/* Reads the graph memory pool of `device` now if the last read is 100 ms old (force: now).
 * Returns true if the figures are current: read now, or a driver without graph memory. */
bool graph_pool_sample(int device, bool force);
/* Reads the pool of the device(s) exec's allocation nodes are on (its device if it has none), as
 * graph_pool_sample. */
void graph_exec_pool_sample(CUgraphExec exec, bool force);
/* After an upload of exec (cuGraphUpload, or instantiation with the upload flag), which attaches
 * its memory: its pool read (forced if force, or if exec had not been read since its memory
 * attached: then its first launch need not read it again). */
void graph_exec_uploaded(CUgraphExec exec, bool force);
/* In a child after fork(): forget the parent's executable graphs. */
void graph_after_fork_child(void);
/* At exit: every device's pool. */
void graph_pool_sample_all(void);
/* When no capture is live any more: the pools whose read was due during one (graph_pool_sample
 * with force). One load when none is owed. */
void graph_pool_sample_owed(void);

#endif
