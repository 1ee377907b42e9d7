/* Issue 5 acceptance on the simulated device: allocation nodes, capture bytes, launches, live
 * executable graphs, the graph pool, and the decoder with and without recycled buffers. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)

static json_t *graph_run_env(struct run_result *r, const char *scenario, const char *const *extra)
{
    const char *argv[] = {program("graph_prog"), scenario, NULL};
    json_t *j = run_under_cushim(r, argv, sim_env(extra));
    cr_assert_eq(r->status, 0, "graph_prog %s exited %d\n%s\n%s", scenario, r->status, r->out, r->err);
    return j;
}

static json_t *graph_run(struct run_result *r, const char *scenario)
{
    return graph_run_env(r, scenario, NULL);
}

/* Two simulated devices. */
static json_t *graph_run2(struct run_result *r, const char *scenario)
{
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", NULL};
    return graph_run_env(r, scenario, extra);
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
    /* The graph pool is not in device_total: the text adds it beside it (3 MiB reserved). */
    cr_expect(strstr(r.err, "    device_total              0 B          0 B\n"
                            "    + graph pool         3.00 MiB  <= 3.00 MiB  (with the graph pool's reserve; its peak an "
                            "upper bound)\n") != NULL, "%s", r.err);
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
    /* Still live at exit, and said to be made during the capture (counted once). */
    cr_expect_eq(jpath_u64(j, "live_at_exit.count"), 1);
    cr_expect_eq(jpath_u64(j, "live_at_exit.bytes"), 2 * MiB);
    cr_expect_str_eq(json_string_value(jpath(j, "live_at_exit.largest.0.kind")), "device");
    cr_expect(json_is_true(jpath(j, "live_at_exit.largest.0.capture")));
    cr_expect(strstr(r.err, " 2.00 MiB  0x") != NULL && strstr(r.err, "  (made during a stream capture)\n") != NULL,
              "%s", r.err);
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

/* Graph memory on another device's pool (allocation nodes on device 1, graphs instantiated and
 * launched from device 0) counts against device 1's budget: before, the launches were counted on
 * device 0 and device 1's budget never read its pool again, so 800 MiB more were given past a
 * 1 GiB budget holding 416 MiB of graph memory (found by an attack helper). */
Test(graphs, graph_memory_on_another_devices_pool_counts_against_that_budget)
{
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", "CUSHIM_DEVICE_LIMIT=1:1GiB", NULL};
    json_t *j = graph_run_env(&r, "budget_other_device_pool", extra);
    cr_expect_eq(kv_u64(r.out, "rc_800"), 2, "cudaErrorMemoryAllocation: %s", r.out);
    /* The text summary shows device 1's allocation nodes and pool although no graph was
     * instantiated there (before: the pool line was only for a device with captured or
     * instantiated graphs; then the nodes were in the JSON only, a fresh-user trial). */
    cr_expect(strstr(r.err, "    device_total              0 B          0 B\n"
                            "    + graph pool          416 MiB   <= 416 MiB  (with the graph pool's reserve; its peak an upper bound)\n"
                            "    graphs: 0 captured, 0 instantiated, 0 alive, launches 0; alloc nodes 416 MiB\n"
                            "    graph pool: reserved 416 MiB (high 416 MiB), in use 416 MiB (high 416 MiB)\n") != NULL,
              "%s", r.err);
    cr_expect_eq(jpath_u64(device_of(j, 1), "device_total.limit_held_bytes"), 416 * MiB, "the pool's reserve");
    cr_expect_eq(jpath_u64(device_of(j, 0), "device_total.limit_held_bytes"), 0, "no limit, nothing held");
    json_decref(j);
    run_free(&r);
}

/* cudaGraphUpload attaches graph memory: under a budget the pool is read at once, whatever the
 * last read's age (before: within 100 ms of a cudaMemGetInfo, 800 MiB more were given past a
 * 1 GiB budget holding 400 MiB of graph memory; found by an attack helper). */
Test(graphs, an_upload_counts_against_the_budget_at_once)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=1GiB", NULL};
    json_t *j = graph_run_env(&r, "budget_upload", extra);
    cr_expect_eq(kv_u64(r.out, "rc_800"), 2, "cudaErrorMemoryAllocation: %s", r.out);
    cr_expect_eq(kv_u64(r.out, "free"), 624 * MiB, "1 GiB less the 400 MiB attached");
    json_decref(j);
    run_free(&r);
}

/* A device budget holds the graph pool's reserve too: 272 MiB attached by two launches (read for
 * the budget although the second came within the sampling interval) leave 240 of a 512 MiB
 * budget to cudaMalloc; cudaMemGetInfo then says 40 MiB are free. */
Test(graphs, graph_memory_counts_against_the_device_budget)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=512MiB", NULL};
    json_t *j = graph_run_env(&r, "budget_and_graph_memory", extra);
    cr_expect_eq(kv_u64(r.out, "total"), 512 * MiB);
    cr_expect_eq(kv_u64(r.out, "free"), 40 * MiB, "the budget less the graph pool's 272 MiB and 200 MiB");
    cr_expect_eq(kv_u64(r.out, "rc_over"), 2, "300 MiB: cudaErrorMemoryAllocation");
    cr_expect_eq(kv_u64(r.out, "rc_fits"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 200 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.graph_pool.reserved_current_bytes"), 272 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 472 * MiB,
                 "what the budget holds: the 200 MiB and the graph pool's 272 MiB");
    json_decref(j);
    run_free(&r);
}

/* Graph memory trimmed while a capture kept the shim from reading the pool: read before the budget
 * next decides, so the 400 MiB given back are not held against it. */
Test(graphs, a_trim_during_a_capture_gives_the_budget_back)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=512MiB", NULL};
    json_t *j = graph_run_env(&r, "budget_after_trim_during_capture", extra);
    cr_expect_eq(kv_u64(r.out, "rc_after_trim"), 0, "%s", r.out);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 300 * MiB);
    json_decref(j);
    run_free(&r);
}

/* Graph memory given back by a cudaDeviceReset: the pool is read again before the budget next
 * decides, so the 400 MiB it held are not held against the next request (found by an attack
 * trial: an 8 MiB budget on an empty device refused 7 MiB after a reset; only a launch made the
 * budget read the graph pool again). */
Test(graphs, a_reset_gives_the_graph_pools_reserve_back_to_the_budget)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=512MiB", NULL};
    json_t *j = graph_run_env(&r, "budget_after_reset", extra);
    cr_expect_eq(kv_u64(r.out, "rc_after_reset"), 0, "%s", r.out);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 300 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 300 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 0);
    json_decref(j);
    run_free(&r);
}

/* A capture belongs to its stream's context (cuStreamGetCtx), not to the context current when it
 * began: resetting the stream's device ends it, so later allocations are not `capture`. */
Test(graphs, capture_on_another_devices_stream_ends_with_that_device)
{
    struct run_result r;
    json_t *j = graph_run2(&r, "capture_other_device_reset");
    json_t *d0 = device_of(j, 0);
    cr_expect_eq(jpath_u64(d0, "device.current_bytes"), MiB);
    cr_expect_eq(jpath_u64(d0, "capture.current_bytes"), 0, "no capture was live any more");
    json_decref(j);
    run_free(&r);
}

/* ... and resetting the device current when it began does not end it. */
Test(graphs, capture_outlives_reset_of_the_current_device)
{
    struct run_result r;
    json_t *j = graph_run2(&r, "capture_current_device_reset");
    json_t *d1 = device_of(j, 1);
    cr_expect_eq(jpath_u64(d1, "device.current_bytes"), 2 * MiB + 4096);
    cr_expect_eq(jpath_u64(d1, "capture.current_bytes"), 2 * MiB, "made while s1 captured");
    cr_expect_eq(jpath_u64(d1, "graphs.captured"), 1, "the stream's device, though device 0 was current at the end");
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 1);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.device"), 1);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.capture_bytes"), 2 * MiB);
    json_decref(j);
    run_free(&r);
}

/* Overlapping captures (two live on one thread, one on another): every allocation is credited to
 * a live capture, the allocating thread's own innermost, else the one begun last. */
Test(graphs, overlapping_captures_lose_no_bytes)
{
    struct run_result r;
    json_t *j = graph_run(&r, "overlapping_captures");
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 3);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.capture_bytes"), (2 + 64) * 64 * KiB, "s1 (id 1)");
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.capture_bytes"), (1 + 16) * 64 * KiB, "s2 (id 2)");
    cr_expect_eq(jpath_u64(j, "executable_graphs.2.capture_bytes"), (4 + 32) * 64 * KiB, "s3 (id 3)");
    cr_expect_eq(jpath_u64(j, "devices.0.capture.current_bytes"), 119 * 64 * KiB);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.captured"), 3);
    json_decref(j);
    run_free(&r);
}

/* Two captures into one graph (cuStreamBeginCaptureToGraph): the graph's capture bytes add up. */
Test(graphs, captures_into_one_graph_add_up)
{
    struct run_result r;
    json_t *j = graph_run(&r, "capture_twice_to_graph");
    cr_expect_eq(kv_u64(r.out, "same_graph.1"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.captured"), 2);
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 1);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.capture_bytes"), 3 * MiB);
    json_decref(j);
    run_free(&r);
}

/* Graphs moved into a parent (CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) at any depth: the allocation
 * node 13 graphs down counts (found by an attack trial: nodes past 8 levels counted 0), the moved
 * captured graph's bytes are the parent's, and a new graph given the captured graph's handle after
 * the parent's destruction made no capture (the trial: it showed the moved graph's 4 MiB). */
Test(graphs, moved_child_graphs_count_at_any_depth_and_go_with_their_parent)
{
    struct run_result r;
    json_t *j = graph_run(&r, "moved_children");
    cr_assert_eq(kv_u64(r.out, "handle_reused"), 1, "the simulator hands the handle out again");
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 2);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.alloc_node_bytes"), MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.capture_bytes"), 4 * MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.alloc_node_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.capture_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.captured"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.launches"), 2);
    cr_expect_eq(kv_u64(r.out, "sim.graph_used.0"), MiB);
    json_decref(j);
    run_free(&r);
}

/* cudaMemGetInfo during a live capture cannot read the graph pool: the untracked bytes are left
 * as they were (never sampled here) instead of counting 64 MiB of graph memory as untracked. */
Test(graphs, meminfo_during_capture_leaves_untracked_alone)
{
    struct run_result r;
    json_t *j = graph_run(&r, "meminfo_during_capture");
    cr_expect_eq(kv_u64(r.out, "used_during"), 65 * MiB);
    cr_expect_eq(kv_u64(r.out, "api.during.graph_reserved"), MiB, "read at the trim, not at the second launch");
    cr_expect_eq(kv_u64(r.out, "api.during.untracked_sampled"), 0);
    cr_expect_eq(kv_u64(r.out, "api.during.untracked"), 0);
    cr_expect_eq(kv_u64(r.out, "api.after.untracked_sampled"), 1);
    cr_expect_eq(kv_u64(r.out, "api.after.graph_reserved"), 65 * MiB);
    cr_expect_eq(kv_u64(r.out, "api.after.untracked"), 0);
    json_decref(j);
    run_free(&r);
}

/* Allocation nodes count on the device of their pool (poolProps.location), and that device's pool
 * is read after launches and uploads. */
Test(graphs, allocation_nodes_count_on_their_pools_device)
{
    struct run_result r;
    json_t *j = graph_run2(&r, "nodes_on_other_device");
    cr_expect_eq(kv_u64(r.out, "api.launch.dev1.graph_sampled"), 1, "device 1's pool read at the launch");
    cr_expect_eq(kv_u64(r.out, "api.launch.dev1.graph_used"), 7 * MiB);
    cr_expect_eq(kv_u64(r.out, "api.upload.dev0.graph_used"), MiB, "both pools read at the upload");
    cr_expect_eq(kv_u64(r.out, "api.upload.dev1.graph_used"), 9 * MiB);
    cr_expect_eq(kv_u64(r.out, "api.upload.dev1.graph_reserved"), kv_u64(r.out, "sim.graph_reserved.1"));
    json_t *d0 = device_of(j, 0), *d1 = device_of(j, 1);
    cr_expect_eq(jpath_u64(d0, "graphs.alloc_node_bytes"), MiB);
    cr_expect_eq(jpath_u64(d1, "graphs.alloc_node_bytes"), 2 * MiB, "7 MiB went with the destroyed graph");
    cr_expect_eq(jpath_u64(d0, "graphs.instantiated"), 2, "instantiated on device 0");
    cr_expect_eq(jpath_u64(d1, "graph_pool.used_current_bytes"), 9 * MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.alloc_node_bytes"), 7 * MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.alloc_node_bytes"), 3 * MiB);
    json_decref(j);
    run_free(&r);
}

/* cudaGraphExecUpdate to a graph whose allocation nodes differ: the executable graph's alloc-node
 * bytes, per device and in its row, and its capture bytes are the new graph's (the real driver
 * allocates the new sizes at the next launch: docs/GPU-VALIDATION.md sim_model); its id, launches
 * and instantiation device stay; a refused update changes nothing; both ABIs. */
Test(graphs, an_update_takes_the_new_graphs_allocation_nodes)
{
    struct run_result r;
    json_t *j = graph_run2(&r, "exec_update");
    cr_expect_eq(kv_u64(r.out, "rc_update"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "result"), 0 /* cudaGraphExecUpdateSuccess */);
    cr_expect_eq(kv_u64(r.out, "rc_update_two"), 910 /* cudaErrorGraphExecUpdateFailure */);
    cr_expect_eq(kv_u64(r.out, "result_two"), 2 /* cudaGraphExecUpdateErrorTopologyChanged */);
    cr_expect_eq(kv_u64(r.out, "rc_update_v1"), 0);
    cr_expect_eq(kv_u64(r.out, "api.launch.dev1.graph_sampled"), 1, "device 1's pool read at the launch");
    cr_expect_eq(kv_u64(r.out, "api.launch.dev1.graph_used"), 5 * MiB);
    json_t *d0 = device_of(j, 0), *d1 = device_of(j, 1);
    cr_expect_eq(jpath_u64(d0, "graphs.alloc_node_bytes"), 0, "the 1 MiB node went with the update");
    cr_expect_eq(jpath_u64(d1, "graphs.alloc_node_bytes"), 5 * MiB);
    cr_expect_eq(jpath_u64(d0, "graphs.instantiated"), 1);
    cr_expect_eq(jpath_u64(d0, "graphs.execs_alive"), 1);
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 1);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.id"), 1);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.device"), 0);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.alloc_node_bytes"), 5 * MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.capture_bytes"), 0, "the new graph was made by no capture");
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.launches"), 1);
    json_decref(j);
    run_free(&r);
}

/* An update with the shim's tables full (libfailmmap.so, one arena chunk; eight devices, 3000
 * executable graphs): whatever the tables could hold, once every executable graph is destroyed no
 * allocation-node bytes stay counted. Before: the put of the updated graph's new entry for device
 * 0 failed (a full shard that cannot grow refuses even a key it holds), the old 1 MiB entry
 * stayed, device 0 left the graph's mask, and its destroy never took the entry: 1 MiB counted for
 * ever (found in a review; 1 MiB left with 1000 to 10000 graphs, none with 500). */
Test(graphs, an_update_in_a_full_table_leaves_nothing_counted)
{
    struct failmmap_env f;
    failmmap_env(&f);
    const char *extra[] = {f.pre, f.lib, "FAIL_MMAP_AFTER=1", "SIMCUDA_DEVICE_COUNT=8", "GRAPHS=3000", NULL};
    struct run_result r;
    json_t *j = graph_run_env(&r, "exec_update_table_full", extra);
    cr_expect_eq(kv_u64(r.out, "rc_update"), 0, "%s", r.out);
    cr_expect(kv_u64(r.out, "failmmap.refused") > 0, "the shim's mappings were refused");
    json_t *d0 = device_of(j, 0);
    cr_expect_eq(jpath_u64(d0, "graphs.alloc_node_bytes"), 0, "%s", r.err);
    cr_expect_eq(jpath_u64(d0, "graphs.execs_alive"), 0);
    json_decref(j);
    run_free(&r);
}

/* After an update the next launch attaches the new nodes' memory: the pool is read at it, however
 * recent the last read (a graph launched, updated and launched again within 100 ms). */
Test(graphs, a_launch_after_an_update_reads_the_pool)
{
    struct run_result r;
    json_t *j = graph_run(&r, "exec_update_after_launch");
    cr_expect_eq(kv_u64(r.out, "api.first.graph_reserved"), MiB, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "api.relaunch.graph_reserved"), 3 * MiB, "read at the launch after the update");
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.alloc_node_bytes"), 3 * MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.launches"), 2);
    json_decref(j);
    run_free(&r);
}

/* cudaGraphInstantiateWithParams(cudaGraphInstantiateFlagUpload) uploads: the pool is read. */
Test(graphs, instantiate_with_upload_reads_the_pool)
{
    struct run_result r;
    json_t *j = graph_run(&r, "instantiate_with_upload");
    cr_expect_eq(kv_u64(r.out, "sim_graph_used"), 9 * MiB);
    cr_expect_eq(kv_u64(r.out, "api.upload.graph_sampled"), 1);
    cr_expect_eq(kv_u64(r.out, "api.upload.graph_used"), 9 * MiB);
    cr_expect_eq(kv_u64(r.out, "api.upload.graph_reserved"), 9 * MiB);
    json_decref(j);
    run_free(&r);
}

/* A child forked during a capture has none live: its allocation is not `capture`. */
Test(graphs, forked_child_has_no_live_capture)
{
    struct run_result r;
    json_t *j = graph_run(&r, "fork_during_capture");
    cr_expect_eq(kv_u64(r.out, "child_status"), 0);
    cr_assert_eq(json_array_size(jpath(j, "descendants")), 1);
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.device.current_bytes"), 5 * MiB);
    cr_expect_eq(jpath_u64(j, "descendants.0.devices.0.capture.current_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.captured"), 1, "the parent's capture still ends");
    json_decref(j);
    run_free(&r);
}

/* Ids follow instantiation order, whether or not an executable graph got a row. */
Test(graphs, exec_ids_follow_instantiation_order)
{
    struct run_result r;
    json_t *j = graph_run(&r, "many_execs");
    json_t *rows = jpath(j, "executable_graphs");
    cr_assert_eq(json_array_size(rows), 256);
    uint64_t max = 0, alive = 0, min_alive = UINT64_MAX;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        uint64_t id = (uint64_t)json_integer_value(json_object_get(row, "id"));
        cr_expect(id <= 256 || id > 300, "id %llu: graphs 257..300 had no row", (unsigned long long)id);
        max = id > max ? id : max;
        if (json_is_true(json_object_get(row, "alive"))) {
            alive++;
            min_alive = id < min_alive ? id : min_alive;
        }
    }
    cr_expect_eq(alive, 10);
    cr_expect_eq(min_alive, 301);
    cr_expect_eq(max, 310);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.instantiated"), 310);
    /* The text's table (20 rows) shows the live graphs first (a fresh-user trial: 20 destroyed
     * ones hid them), then destroyed ones. */
    char first[200], eleventh[200];
    snprintf(first, sizeof first, "\n  %-6s %-6s %-9s %10s %14s %14s\n  %-6d %-6d %-9s %10d %14s %14s\n", "graph",
             "device", "state", "launches", "alloc nodes", "capture", 301, 0, "alive", 0, "0 B", "0 B");
    snprintf(eleventh, sizeof eleventh, "  %-6d %-6d %-9s %10d %14s %14s\n  %-6d %-6d %-9s", 310, 0, "alive", 0,
             "0 B", "0 B", 11, 0, "destroyed");
    cr_expect(strstr(r.err, first) != NULL, "%s", r.err);
    cr_expect(strstr(r.err, eleventh) != NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

/* A graph's first launch reads the pool whatever the last read's age (a fresh-user trial: stale
 * for minutes at a few launches a second). */
Test(graphs, a_graphs_first_launch_reads_the_pool)
{
    struct run_result r;
    json_t *j = graph_run(&r, "first_launch_read");
    cr_expect_eq(kv_u64(r.out, "api.first.graph_used"), 64 * MiB, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "api.during.graph_used"), 64 * MiB, "not read while a capture is live");
    cr_expect_eq(kv_u64(r.out, "api.after.graph_used"), 72 * MiB, "read when it ended");
    cr_expect_eq(kv_u64(r.out, "api.after.graph_reserved"), kv_u64(r.out, "sim.graph_reserved.0"));
    json_decref(j);
    run_free(&r);
    /* The same when the capture ends otherwise: its stream destroyed, its context reset, its
     * thread gone (a review: the read was lost until the 17th launch or the exit). */
    const char *ends[] = {"CAPTURE_END=destroy", "CAPTURE_END=reset", "CAPTURE_END=thread"};
    for (int i = 0; i < 3; i++) {
        const char *extra[] = {ends[i], NULL};
        j = graph_run_env(&r, "first_launch_read", extra);
        cr_expect_eq(kv_u64(r.out, "api.during.graph_used"), 64 * MiB, "%s: %s", ends[i], r.out);
        cr_expect_eq(kv_u64(r.out, "api.after.graph_used"), 72 * MiB, "%s: read when it ended", ends[i]);
        json_decref(j);
        run_free(&r);
    }
}

/* Over a budget, a cudaMalloc a global-mode capture prohibits gets the driver's refusal, which
 * invalidates the capture, as without the shim (a stress trial: the budget answered out of memory
 * first, and the capture went on to make a graph). */
Test(graphs, a_prohibited_malloc_over_the_budget_still_invalidates_the_capture)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=16MiB", NULL};
    json_t *j = graph_run_env(&r, "budget_malloc_in_capture", extra);
    cr_expect_eq(kv_u64(r.out, "rc_malloc"), 900, "cudaErrorStreamCaptureUnsupported: %s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_end"), 901, "cudaErrorStreamCaptureInvalidated");
    cr_expect_eq(kv_u64(r.out, "graph"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 0, "not the budget's refusal");
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 1);
    json_decref(j);
    run_free(&r);
}

/* A thread's per-thread default stream is one per context: captures on device 0's and device 1's
 * at once keep their own bytes and devices; a thread exiting with both live leaves none live. */
Test(graphs, per_thread_captures_on_two_devices_are_two)
{
    struct run_result r;
    json_t *j = graph_run2(&r, "per_thread_captures_on_two_devices");
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 2);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.device"), 1);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.capture_bytes"), 2 * MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.device"), 0);
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.capture_bytes"), MiB);
    json_t *d0 = device_of(j, 0), *d1 = device_of(j, 1);
    cr_expect_eq(jpath_u64(d0, "device.current_bytes"), MiB + 4 * KiB);
    cr_expect_eq(jpath_u64(d0, "capture.current_bytes"), MiB, "the 4 KiB came after every capture");
    cr_expect_eq(jpath_u64(d0, "graphs.captured"), 1);
    cr_expect_eq(jpath_u64(d1, "device.current_bytes"), 2 * MiB + 8 * KiB);
    cr_expect_eq(jpath_u64(d1, "capture.current_bytes"), 2 * MiB);
    cr_expect_eq(jpath_u64(d1, "graphs.captured"), 1);
    json_decref(j);
    run_free(&r);
}

/* A thread through more contexts than the shim's 8 slots reuses the slots of captures that are
 * over: two captures at once on the 9th and 10th contexts' per-thread streams stay two. */
Test(graphs, per_thread_captures_on_many_contexts_are_kept_apart)
{
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=10", NULL};
    json_t *j = graph_run_env(&r, "per_thread_captures_on_many_contexts", extra);
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 2);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.device"), 9);
    cr_expect_eq(jpath_u64(j, "executable_graphs.0.capture_bytes"), 2 * MiB);
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.device"), 8);
    cr_expect_eq(jpath_u64(j, "executable_graphs.1.capture_bytes"), MiB);
    json_decref(j);
    run_free(&r);
}

/* A capture whose beginning thread has exited ends at a device reset without the shim touching
 * that thread's storage. */
Test(graphs, capture_of_an_exited_thread_ends_at_reset)
{
    struct run_result r;
    json_t *j = graph_run(&r, "capture_of_exited_thread_reset");
    cr_expect_eq(kv_u64(r.out, "reset_done"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.capture.current_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

/* Executable graphs made and destroyed on four threads at once, with a driver that gives a
 * destroyed exec's handle value to the next instantiation: every one is counted once, and the
 * per-graph table always has a row (before: the shim updated its tables after the real destroy,
 * on the new exec's entries, and 54 of 80000 stayed "alive"; and threads racing for the oldest
 * destroyed row gave up, saying more than 256 were alive). */
Test(graphs, exec_handle_values_reused_at_once)
{
    struct run_result r;
    const char *extra[] = {"ROUNDS=20000", "GLIBC_TUNABLES=glibc.malloc.tcache_count=0", "MALLOC_ARENA_MAX=1", NULL};
    json_t *j = graph_run_env(&r, "exec_handle_reuse", extra);
    cr_expect_eq(kv_u64(r.out, "instantiations"), 80000);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.instantiated"), 80000);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.execs_alive"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.alloc_node_bytes"), 0);
    cr_expect(strstr(r.err, "executable graphs alive") == NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

/* An allocation on a stream whose capture another thread is beginning (the driver has made it
 * capturing; the begin has not returned): a graph allocation node, not async memory. Before, no
 * capture was counted live until the begin returned, and the plain path counted 1 MiB of async
 * memory that was never allocated (and never freed). */
Test(graphs, an_allocation_during_another_threads_begin_is_a_node)
{
    struct run_result r;
    const char *extra[] = {"SIMCUDA_BEGIN_CAPTURE_MS=300", NULL};
    json_t *j = graph_run_env(&r, "alloc_during_begin", extra);
    cr_assert_eq(kv_u64(r.out, "capturing_before_alloc"), 1, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_alloc"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_begin"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_end"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.async.current_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 0);
    cr_expect_eq(kv_u64(r.out, "sim.async.0"), 0);
    json_decref(j);
    run_free(&r);
}

/* A capture begun by another thread while a cudaMallocAsync on its stream is in the driver
 * (SIMCUDA_INJECT=cuMemAllocAsync:2:raise=SIGUSR1): the driver makes the allocation a graph node,
 * which is not counted as memory held (before: the allocation, entered with no capture live, was
 * counted as 1 MiB of async memory that was never allocated, and never freed). On the plain path
 * and, under a device limit, the full one, whose reservation is given back (held 0). A 4 KiB
 * allocation made and freed before it is counted. */
static void expect_async(json_t *j, int limited)
{
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 1, "limited %d", limited);
    cr_expect_eq(jpath_u64(j, "devices.0.async.free_count"), 1, "limited %d", limited);
    cr_expect_eq(jpath_u64(j, "devices.0.async.current_bytes"), 0, "limited %d", limited);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 4096, "limited %d", limited);
}

Test(graphs, an_allocation_whose_stream_begins_capturing_in_the_call_is_a_node)
{
    for (int limited = 0; limited < 2; limited++) {
        struct run_result r;
        char inject[64];
        snprintf(inject, sizeof inject, "SIMCUDA_INJECT=cuMemAllocAsync:2:raise=%d", SIGUSR1);
        const char *extra[] = {inject, limited ? "CUSHIM_DEVICE_LIMIT=1GiB" : NULL, NULL};
        json_t *j = graph_run_env(&r, "begin_during_alloc", extra);
        cr_expect_eq(kv_u64(r.out, "rc_alloc"), 0, "limited %d", limited);
        cr_expect_eq(kv_u64(r.out, "rc_begin"), 0, "limited %d", limited);
        cr_expect_eq(kv_u64(r.out, "rc_end"), 0, "limited %d", limited);
        expect_async(j, limited);
        if (limited)
            cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 0, "held %llu",
                         (unsigned long long)jpath_u64(j, "devices.0.device_total.limit_held_bytes"));
        cr_expect_eq(kv_u64(r.out, "sim.async.0"), 0, "limited %d", limited);
        json_decref(j);
        run_free(&r);
    }
}

/* A thread cancelled inside its global capture's begin: before, the shim's count of live captures
 * kept the begin's announce for ever: every later allocation was counted as capture memory and
 * none was offloaded. */
Test(graphs, a_thread_cancelled_in_a_begin_leaves_no_capture_live)
{
    struct run_result r;
    const char *extra[] = {"SIMCUDA_BEGIN_CAPTURE_MS=2000", "CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = graph_run_env(&r, "cancel_in_begin", extra);
    cr_assert_eq(kv_u64(r.out, "cancelled"), 1, "%s", r.out);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.capture.alloc_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 0);
    json_decref(j);
    run_free(&r);
}
