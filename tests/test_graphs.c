/* Issue 5 acceptance on the simulated device: allocation nodes, capture bytes, launches, live
 * executable graphs, the graph pool, and the decoder with and without recycled buffers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)

static json_t *graph_run(struct run_result *r, const char *scenario)
{
    const char *argv[] = {program("graph_prog"), scenario, NULL};
    json_t *j = run_under_cushim(r, argv, sim_env(NULL));
    cr_assert_eq(r->status, 0, "graph_prog %s exited %d\n%s\n%s", scenario, r->status, r->out, r->err);
    return j;
}

Test(graphs, allocation_nodes_launches_and_the_pool)
{
    struct run_result r;
    json_t *j = graph_run(&r, "nodes");
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.captured"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.instantiated"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.execs_alive"), 1, "one executable graph destroyed");
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.launches"), 6);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.alloc_node_bytes"), MiB, "nodes of live execs");
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 0, "a node is not a pool allocation");
    /* Per-graph table. */
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 2);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.id"), 1);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.alloc_node_bytes"), 3 * MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.launches"), 5);
    cr_expect(json_is_false(jpath(j, "executable_graphs.0.alive")));
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.alloc_node_bytes"), MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.launches"), 1);
    cr_expect(json_is_true(jpath(j, "executable_graphs.1.alive")));
    cr_expect(jpath_u64(j, "executable_graphs.0.instantiated_ns") > 1700000000ull * 1000000000ull);
    /* The pool figures equal the simulated device's own (read at exit). */
    cr_expect_eq(kv_u64(r.out, "attached_used"), MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.graph_pool.used_current_bytes"), kv_u64(r.out, "sim.graph_used.0"));
    cr_expect_eq(jpath_u64(j, "devices.0.graph_pool.reserved_current_bytes"), kv_u64(r.out, "sim.graph_reserved.0"));
    cr_expect_eq(jpath_u64(j, "devices.0.graph_pool.used_current_bytes"), MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.graph_pool.used_high_bytes"), 3 * MiB, "the first graph freed its 3 MiB before the second attached 1 MiB");
    cr_expect_gt(jpath_u64(j, "devices.0.graph_pool.sampled_ns"), 1700000000ull * 1000000000ull, "read at exit");
    cr_expect(strstr(r.err, "    graphs: 1 captured, 2 instantiated, 1 alive, launches 6; alloc nodes 1.00 MiB\n") != NULL,
              "%s", r.err);
    cr_expect(strstr(r.err, "in use 1.00 MiB (high 3.00 MiB)\n") != NULL, "exited: no age; %s", r.err);
    json_decref(j);
    run_free(&r);
}

Test(graphs, cudaMalloc_in_capture)
{
    struct run_result r;
    json_t *j = graph_run(&r, "capture_malloc");
    /* Relaxed mode: allowed and counted as capture bytes (and as device memory). */
    cr_expect_eq(jpath_u64(j, "devices.0.capture.current_bytes"), 2 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 2 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.current_bytes"), 2 * MiB, "not counted twice");
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.capture_bytes"), 2 * MiB);
    /* Global mode: the driver's error comes back unchanged. */
    cr_expect_eq(kv_u64(r.out, "rc_global"), 900, "cudaErrorStreamCaptureUnsupported");
    cr_expect_eq(kv_u64(r.out, "rc_end_global"), 901, "cudaErrorStreamCaptureInvalidated");
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 1);
    json_decref(j);
    run_free(&r);
}

Test(graphs, decoder_capture_bytes_grow_per_graph_unless_recycled)
{
    struct run_result r;
    json_t *j = graph_run(&r, "decoder_new");
    static const unsigned lens[] = {16, 32, 64, 128};
    uint64_t total = 0;
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 4);
    for (unsigned i = 0; i < 4; i++) {
        char p[64];
        uint64_t per = 2 * lens[i] * 64 * KiB;
        total += per;
        snprintf(p, sizeof p, "executable_graphs.%u.capture_bytes", i);
        cr_expect_eq(jpath_u64(j, p), per, "graph %u", i);
        snprintf(p, sizeof p, "executable_graphs.%u.launches", i);
        cr_expect_eq(jpath_u64(j, p), 3);
    }
    cr_expect_eq(jpath_u64(j, "devices.0.capture.current_bytes"), total);
    cr_expect_eq(total, 2 * 240 * 64 * KiB);
    json_decref(j);
    run_free(&r);

    j = graph_run(&r, "decoder_pool");
    for (unsigned i = 0; i < 4; i++) {
        char p[64];
        snprintf(p, sizeof p, "executable_graphs.%u.capture_bytes", i);
        cr_expect_eq(jpath_u64(j, p), 0, "graph %u", i);
    }
    cr_expect_eq(jpath_u64(j, "devices.0.capture.current_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 2 * 128 * 64 * KiB);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.launches"), 12);
    json_decref(j);
    run_free(&r);
}

Test(graphs, compile_phase_ends_at_the_first_graph_launch)
{
    struct run_result r;
    const char *argv[] = {program("graph_prog"), "nodes", NULL};
    const char *extra[] = {"CUSHIM_PHASE=compile", "CUSHIM_COMPILE_END=graph-launch", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(json_string_value(jpath(j, "phase")), "run");
    json_decref(j);
    run_free(&r);
}

/* cudaMemGetInfo reads the graph pool before it works out the untracked bytes: graph memory
 * attached since the last read never shows as untracked (SIMCUDA_CTX_OVERHEAD=0: nothing is). */
Test(graphs, graph_memory_is_never_untracked_at_meminfo)
{
    struct run_result r;
    json_t *j = graph_run(&r, "meminfo_after_launch");
    cr_expect_eq(kv_u64(r.out, "api.graph_used"), 65 * MiB);
    cr_expect_eq(kv_u64(r.out, "api.graph_reserved"), kv_u64(r.out, "sim.graph_reserved.0"));
    cr_expect_eq(kv_u64(r.out, "api.graph_sampled"), 1);
    cr_expect_eq(kv_u64(r.out, "api.untracked"), 0, "the 64 MiB attached by the second launch is the pool's");
    json_decref(j);
    run_free(&r);
}
