/* Issue 4 acceptance on the simulated device: offload in the compile phase, budgets and spill,
 * capture safety, deferred async frees, and `cushim phase` on a live process. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)

static json_t *offload_run(struct run_result *r, const char *scenario, const char *const *extra)
{
    const char *argv[] = {program("offload_prog"), scenario, NULL};
    json_t *j = run_under_cushim(r, argv, sim_env(extra));
    cr_assert_eq(r->status, 0, "offload_prog %s exited %d\n%s\n%s", scenario, r->status, r->out, r->err);
    return j;
}

Test(offload, compile_phase_intermediates_go_to_host_memory)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "compile_run", extra);
    /* The policy shows in the summary (JSON and the text's first line). */
    cr_expect_str_eq(json_string_value(jpath(j, "offload")), "compile");
    cr_expect(json_is_false(jpath(j, "spill")));
    cr_expect(strstr(r.err, "`: 1 device, phase run, offload compile\n") != NULL, "%s", r.err);
    /* Weights before the compile phase: on the device, whatever their size. */
    cr_expect_eq(kv_u64(r.out, "set_compile"), 0, "was in the run phase");
    cr_expect_eq(kv_u64(r.out, "set_run"), 1, "was in the compile phase");
    /* Compile-phase device peak: the weights plus the compile allocations below the threshold. */
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.compile_device_peak_bytes"), 5 * MiB + 256 * KiB);
    /* Offloaded peak: the intermediates at or above it. */
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.peak_bytes"), 6 * MiB + 512 * KiB);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.compile_offloaded_peak_bytes"), 6 * MiB + 512 * KiB);
    cr_expect(strstr(r.err, "\n    phase peaks: compile device_total 5.25 MiB offloaded 6.50 MiB; run device_total 10.0 MiB "
                            "offloaded 1.50 MiB\n") != NULL, "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 1536 * KiB);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 3);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.spill_count"), 0);
    /* Run-phase allocations on the device; device_total never includes offloaded bytes. */
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 10 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 10 * MiB + KiB);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_device_peak_bytes"), 10 * MiB + KiB);
    /* The compile-phase allocation still alive in the run phase stays in host memory. */
    cr_expect_eq(jpath_u64(j, "devices.0.offload_resident.count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_resident.bytes"), 1536 * KiB);
    /* ... and the end of the compile phase says so, at the default log level (a fresh-user trial). */
    cr_expect(strstr(r.err, "] warn: compile phase ended with 1 offloaded allocation alive (1572864 bytes): they "
                            "stay in pinned host memory for the rest of the run (README, \"Compiling a model on "
                            "a card that can only just run it\": allocate weights before the compile phase, or "
                            "raise CUSHIM_OFFLOAD_MIN)\n") != NULL, "%s", r.err);
    /* Every offloaded free reached cuMemFreeHost; the simulated device agrees. */
    cr_expect_eq(kv_u64(r.out, "host_alloc_calls"), 3);
    cr_expect_eq(kv_u64(r.out, "free_host_calls"), 2);
    cr_expect_eq(kv_u64(r.out, "offloaded_host_live"), 6 * MiB + 512 * KiB);
    cr_expect_eq(kv_u64(r.out, "offloaded_host_live_end"), 1536 * KiB);
    cr_expect_eq(kv_u64(r.out, "sim.device.0"), 10 * MiB);
    /* Data in and out of offloaded buffers comes back byte-exact, through every copy. */
    cr_expect_eq(kv_u64(r.out, "copy_roundtrip"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_dtoh"), 0, "explicit DtoH routed through cuMemcpy");
    cr_expect_eq(kv_u64(r.out, "dtoh_roundtrip"), 1);
    cr_expect_eq(kv_u64(r.out, "memset_seen"), 1);
    cr_expect_eq(kv_u64(r.out, "device_copy"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_range"), 0);
    cr_expect_eq(kv_u64(r.out, "range_ok"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_ipc"), 1, "CUDA_ERROR_INVALID_VALUE for an IPC handle");
    cr_expect(strstr(r.err, "offloaded in compile, still in host memory: 1 allocation, 1.50 MiB") != NULL,
              "%s", r.err);
    json_decref(j);
    run_free(&r);
}

/* A phase's peaks start at what is in use when it begins. */
Test(offload, a_phase_peak_counts_memory_in_use_when_it_began)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "phase_idle", extra);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.compile_device_peak_bytes"), 1 * MiB,
                 "the weights, in use during the whole compile phase");
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.compile_offloaded_peak_bytes"), 2 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_device_peak_bytes"), 1 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_offloaded_peak_bytes"), 0);
    json_decref(j);
    run_free(&r);
    /* Offloaded memory still alive when the run phase begins counts in the run phase's peak. */
    const char *extra2[] = {"CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    j = offload_run(&r, "compile_run", extra2);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_offloaded_peak_bytes"), 1536 * KiB);
    json_decref(j);
    run_free(&r);
}

Test(offload, off_by_default)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "compile_run", extra);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 0);
    cr_expect_eq(kv_u64(r.out, "host_alloc_calls"), 0);
    cr_expect_eq(kv_u64(r.out, "copy_roundtrip"), 1);
    json_decref(j);
    run_free(&r);
}

/* Under SIMCUDA_STRICT_COPIES=1 (a driver that takes only device memory as such, which cuda.h
 * allows; the real one took pinned memory on an H200): the copies naming offloaded memory as
 * device memory work because the shim reroutes them. */
Test(offload, pitched_copies_of_offloaded_memory)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "SIMCUDA_STRICT_COPIES=1", NULL};
    json_t *j = offload_run(&r, "pitched", extra);
    cr_expect_eq(kv_u64(r.out, "offloaded_host_live"), 2 * MiB, "the 2 MiB buffer is host memory");
    cr_expect_eq(kv_u64(r.out, "rc_2d_in"), 0, "2D copy into offloaded memory named as device memory");
    cr_expect_eq(kv_u64(r.out, "rc_2d_out"), 0, "and out of it, asynchronously");
    cr_expect_eq(kv_u64(r.out, "roundtrip_2d"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_2d_to_device"), 0, "offloaded to device memory");
    cr_expect_eq(kv_u64(r.out, "rc_3d"), 0);
    cr_expect_eq(kv_u64(r.out, "roundtrip_3d"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_rt_2d_in"), 0, "the runtime's cudaMemcpy2D into it");
    cr_expect_eq(kv_u64(r.out, "rc_rt_2d_out"), 0, "and out");
    cr_expect_eq(kv_u64(r.out, "roundtrip_rt_2d"), 1);
    /* Memory the shim does not own is passed as it was: the (strict) driver's own error. */
    cr_expect_eq(kv_u64(r.out, "rc_2d_pinned_as_device"), 1 /* CUDA_ERROR_INVALID_VALUE */);
    json_decref(j);
    run_free(&r);
    /* The real driver's reading (docs/GPU-VALIDATION.md): pinned memory named as device memory is
     * taken; every copy works and the shim passes the pinned one as it was. */
    const char *lenient[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    j = offload_run(&r, "pitched", lenient);
    cr_expect_eq(kv_u64(r.out, "roundtrip_2d"), 1);
    cr_expect_eq(kv_u64(r.out, "roundtrip_3d"), 1);
    cr_expect_eq(kv_u64(r.out, "roundtrip_rt_2d"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_2d_pinned_as_device"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, peer_copies_of_offloaded_memory)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "SIMCUDA_STRICT_COPIES=1", NULL};
    json_t *j = offload_run(&r, "peer", extra);
    cr_expect_eq(kv_u64(r.out, "offloaded_host_live"), 2 * MiB, "the 2 MiB buffer is host memory");
    cr_expect_eq(kv_u64(r.out, "rc_peer_in"), 0, "cuMemcpyPeer into offloaded memory");
    cr_expect_eq(kv_u64(r.out, "peer_in_driver_peer_calls"), 0, "made with cuMemcpy");
    cr_expect_eq(kv_u64(r.out, "rc_peer_out"), 0, "cuMemcpyPeerAsync out of it");
    cr_expect_eq(kv_u64(r.out, "roundtrip_peer"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_3d_peer"), 0, "cuMemcpy3DPeer naming it as device memory");
    cr_expect_eq(kv_u64(r.out, "roundtrip_3d_peer"), 1);
    /* Pinned memory the shim does not own goes to the driver's cuMemcpyPeer as it was (the strict
     * driver refuses it). */
    cr_expect_eq(kv_u64(r.out, "rc_peer_pinned"), 1 /* CUDA_ERROR_INVALID_VALUE */);
    cr_expect_eq(kv_u64(r.out, "peer_pinned_driver_peer_calls"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_peer_no_context"), 201 /* CUDA_ERROR_INVALID_CONTEXT */);
    json_decref(j);
    run_free(&r);
}

Test(offload, peer_copies_need_the_shim)
{
    /* The same program with offload off: every copy is between device memory and succeeds, so the
     * scenario itself is sound, and each reaches the driver's cuMemcpyPeer as it was; the strict
     * driver refuses pinned memory named as device memory, as it would offloaded memory without
     * the shim's rerouting. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=off", "SIMCUDA_STRICT_COPIES=1", NULL};
    json_t *j = offload_run(&r, "peer", extra);
    cr_expect_eq(kv_u64(r.out, "offloaded_host_live"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_peer_in"), 0);
    cr_expect_eq(kv_u64(r.out, "roundtrip_peer"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_3d_peer"), 0);
    cr_expect_eq(kv_u64(r.out, "peer_in_driver_peer_calls"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_peer_pinned"), 1);
    cr_expect_eq(kv_u64(r.out, "peer_pinned_driver_peer_calls"), 1);
    json_decref(j);
    run_free(&r);
}

Test(offload, budget_limits_what_the_program_sees_and_gets)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=1GiB", "SIMCUDA_DEVICE_MEMORY=4GiB", NULL};
    json_t *j = offload_run(&r, "budget", extra);
    cr_expect_eq(kv_u64(r.out, "total"), 1ull << 30);
    cr_expect_eq(kv_u64(r.out, "free"), 1ull << 30);
    cr_expect_eq(kv_u64(r.out, "rc_over"), 2, "cudaErrorMemoryAllocation");
    cr_expect_eq(kv_u64(r.out, "free_after"), 256 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 768 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_bytes"), 1ull << 30, "the budget is shown");
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 768 * MiB, "and what it holds");
    cr_expect_eq(kv_u64(r.out, "api.limit"), 1ull << 30, "and read through cushim.h");
    cr_expect(strstr(r.err, "  memory 4.00 GiB  untracked 0 B  limit 1.00 GiB, held 768 MiB (1 request refused)\n") != NULL,
              "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 1,
                 "the failure is the budget's, not the device's: said without CUSHIM_LOG");
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 0);
    cr_expect_eq(kv_u64(r.out, "sim.device.0"), 768 * MiB);
    json_decref(j);
    run_free(&r);
}

/* rt_prog SCENARIO under cushim run with CUSHIM_DEVICE_LIMIT=LIMIT: its summary (NULL if none
 * was written), r its output; the program's exit status 0 is expected. */
static json_t *rt_under_limit(struct run_result *r, const char *limit, const char *scenario)
{
    char env[64];
    snprintf(env, sizeof env, "CUSHIM_DEVICE_LIMIT=%s", limit);
    const char *extra[] = {env, NULL};
    const char *argv[] = {program("rt_prog"), scenario, NULL};
    json_t *j = run_under_cushim(r, argv, sim_env(extra));
    cr_expect_eq(r->status, 0, "%s", r->err);
    return j;
}

/* rt_prog SCENARIO under CUSHIM_DEVICE_LIMIT=LIMIT with SIGUSR1 raised on the Nth call of the
 * driver's SYMBOL (its handler runs another thread's job inside that call: rt_prog
 * job_thread_start); the summary, the run's status checked. */
static json_t *rt_under_limit_signalled(struct run_result *r, const char *limit, const char *symbol, int n,
                                        const char *scenario)
{
    char env[64], inject[96];
    snprintf(env, sizeof env, "CUSHIM_DEVICE_LIMIT=%s", limit);
    snprintf(inject, sizeof inject, "SIMCUDA_INJECT=%s:%d:raise=%d", symbol, n, SIGUSR1);
    const char *extra[] = {env, inject, NULL};
    const char *argv[] = {program("rt_prog"), scenario, NULL};
    json_t *j = run_under_cushim(r, argv, sim_env(extra));
    cr_assert_eq(r->status, 0, "%s", r->err);
    return j;
}

/* A free of an offloaded range counts from its call, before the pinned block goes back, as a
 * device free does (account.h account_free_early): another thread's offloaded allocation made
 * during the release (its job runs inside cuMemFreeHost: a signal raised on the driver's entry)
 * is never counted beside the block being freed. Counted after the release, the offloaded peak
 * read 128 MiB while the program never held more than 64 MiB at once (a review). */
Test(offload, an_offloaded_free_counts_from_its_call)
{
    struct run_result r;
    char inject[64];
    snprintf(inject, sizeof inject, "SIMCUDA_INJECT=cuMemFreeHost:1:raise=%d", SIGUSR1);
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", inject, NULL};
    const char *argv[] = {program("rt_prog"), "free_while_other_allocates", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 2, "the job allocated inside the release");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 64 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.peak_bytes"), 64 * MiB);
    cr_expect(json_is_array(jpath(j, "incomplete")) && json_array_size(jpath(j, "incomplete")) == 0,
              "nothing left out of the figures");
    json_decref(j);
    run_free(&r);
}

/* An offloaded free the driver refuses (cuMemFreeHost fails) leaves the block counted as it was
 * (the free counted from its call is counted back: account.h account_unfree); the second free
 * counts. */
Test(offload, a_refused_offloaded_free_leaves_the_block_counted)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB",
                           "SIMCUDA_INJECT=cuMemFreeHost:1:CUDA_ERROR_UNKNOWN", NULL};
    const char *argv[] = {program("rt_prog"), "free_refused_once", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(kv_u64(r.out, "rc_first"), 999, "cudaErrorUnknown");
    cr_expect_eq(kv_u64(r.out, "rc_second"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.peak_bytes"), 4 * MiB);
    json_decref(j);
    run_free(&r);
}

/* A request its pool's idle reserve serves is in the stream-ordered bytes from its grant: a reading
 * of the pools during its call (another thread's cudaMemGetInfo, made from the signal raised on
 * the driver's entry) finds the reserve in use. Counted only after the call, the reading found the
 * 8 MiB idle as well as in use and published it: the budget held 16 MiB for 8, during and after
 * (a trial: a cudaMalloc beside a served cudaMallocAsync loop was refused thousands of times under a
 * budget it fitted). */
Test(offload, a_pool_read_during_a_served_request_counts_it_once)
{
    struct run_result r;
    json_t *j = rt_under_limit_signalled(&r, "100MiB", "cuMemAllocFromPoolAsync", 1, "budget_pools_read_during_served");
    cr_expect_eq(kv_u64(r.out, "during.held"), 8 * MiB, "8 MiB in use, none idle");
    cr_expect_eq(kv_u64(r.out, "after.held"), 8 * MiB, "8 MiB idle");
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 8 * MiB);
    json_decref(j);
    run_free(&r);
}

/* A refusal's second look decides with the thread's own reading of the pools only while no
 * stream-ordered event came since before it: here another thread frees 64 MiB into the pool and
 * takes 64 MiB with cudaMalloc inside that reading, the bytes in use as before. Decided with the
 * reading, the 100 MiB cudaMalloc was granted and the budget held 228 MiB of 200 (a review). */
Test(offload, a_second_look_is_not_taken_across_a_free_into_a_pool)
{
    struct run_result r;
    json_t *j = rt_under_limit_signalled(&r, "200MiB", "cuDeviceGetDefaultMemPool", 3, "budget_second_look_aba");
    cr_expect_eq(kv_u64(r.out, "job_ran"), 1, "the other thread's free and cudaMalloc ran inside the reading");
    cr_expect_eq(kv_u64(r.out, "rc_malloc"), 2, "cudaErrorMemoryAllocation: 64 in use + 64 idle + 100 > 200");
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 128 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 1);
    json_decref(j);
    run_free(&r);
}

/* A pool destroyed with an allocation still out leaves the readings of the pools before its
 * allocation leaves the stream-ordered bytes (pool_gone, after the call): a reading in between
 * took those bytes off the other pools' reserve (the default pool's 60 MiB idle read as 0 inside
 * the destroy, and another thread's 80 MiB cudaMalloc was granted: 240 MiB held of 200; a
 * review). The destroyed pool's reserve now counts in such a reading, which is used when right:
 * with the default pool trimmed to 0 inside the destroy, the 80 MiB fit (refused when every
 * reading during a destroy was dropped; a review: a thread destroying pools without pause
 * starved the readings). */
Test(offload, a_reading_during_a_pool_destroy_counts_its_reserve)
{
    static const struct {
        const char *scenario;
        int rc;
        const char *why;
    } runs[] = {
        {"budget_read_while_pool_destroyed", 2, "cudaErrorMemoryAllocation: 100 in use + 60 idle + 80 > 200"},
        {"budget_trim_while_pool_destroyed", 0, "trimmed inside the destroy: 100 in use + 0 idle + 80 <= 200"},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        struct run_result r;
        json_t *j = rt_under_limit_signalled(&r, "200MiB", "cuMemPoolDestroy", 1, runs[k].scenario);
        cr_expect_eq(kv_u64(r.out, "job_ran"), 1, "%s: the other thread's steps ran inside the destroy", runs[k].scenario);
        cr_expect_eq(kv_u64(r.out, "rc_malloc"), runs[k].rc, "%s", runs[k].why);
        json_decref(j);
        run_free(&r);
    }
}

/* A stream-ordered pool's idle reserve (freed memory it keeps below its release threshold: what
 * PyTorch's cudaMallocAsync backend keeps) counts in the budget: a cudaMalloc beside a pool that
 * keeps 6 MiB of an 8 MiB budget is refused, a request the reserve serves is not, cudaMemGetInfo
 * counts the reserve; a reserve a synchronize released is read again before a refusal; another
 * pool's reserve does not serve a request (found by an attack trial: the device's sum did). Before,
 * the reserve was outside the budget: the cudaMalloc got 4 MiB more than the budget allowed. */
Test(offload, a_pools_idle_reserve_counts_in_the_budget)
{
    struct run_result r;
    json_t *j = rt_under_limit(&r, "8MiB", "budget_pool_idle");
    cr_expect_eq(kv_u64(r.out, "kept.malloc"), 2, "cudaErrorMemoryAllocation: 6 MiB idle + 4 > 8");
    cr_expect_eq(kv_u64(r.out, "kept.pool"), 0, "5 MiB served by the pool's reserve");
    cr_expect_eq(kv_u64(r.out, "kept.free"), 2 * MiB, "8 MiB less 5 in use and 1 idle");
    /* What the budget holds, as published for cushim.h and the CLI: the limit less that free. */
    cr_expect_eq(kv_u64(r.out, "kept.held"), 6 * MiB);
    cr_expect_eq(kv_u64(r.out, "freed.held"), 6 * MiB, "5 MiB freed to the pool, which keeps them");
    cr_expect_eq(kv_u64(r.out, "kept.total"), 8 * MiB);
    cr_expect_eq(kv_u64(r.out, "trimmed.malloc"), 0, "the trimmed pool keeps nothing");
    cr_expect_eq(kv_u64(r.out, "freed.free"), 2 * MiB, "freed, not yet released: still the pool's");
    cr_expect_eq(kv_u64(r.out, "released.malloc"), 0, "released by the synchronize: read again, not refused");
    cr_expect_eq(kv_u64(r.out, "cross.pool"), 2, "another pool's 6 MiB serve only that pool: refused");
    cr_expect_eq(kv_u64(r.out, "pending.malloc"), 2, "the freed 6 MiB are still the pool's");
    cr_expect_eq(kv_u64(r.out, "retry.malloc"), 0,
                 "released by the synchronize: a retry at once finds it (found by an attack trial: "
                 "the reading a refusal forces was once per clock tick)");
    cr_assert(j);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 3);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 0, "the pools trimmed and released");
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.async.failed_count"), 1);
    json_decref(j);
    run_free(&r);
}

/* Held over the limit by a pool's growth (whole chunks): what that pool's idle reserve serves
 * still passes, as it grows nothing; a cudaMalloc is refused; a 0-byte request gets the driver's
 * cudaErrorInvalidValue (a fresh-user trial: all three were refused, out of memory). */
Test(offload, a_pool_over_the_limit_still_serves_from_its_reserve)
{
    struct run_result r;
    json_t *j = rt_under_limit(&r, "4MiB", "budget_pool_over");
    cr_expect_eq(kv_u64(r.out, "over.one"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "over.page"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "over.zero"), 1, "cudaErrorInvalidValue, as without a budget");
    cr_expect_eq(kv_u64(r.out, "over.malloc"), 2, "cudaErrorMemoryAllocation");
    cr_assert(j);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 3);
    cr_expect_eq(jpath_u64(j, "devices.0.async.peak_bytes"), 1000 + 1 + 4096);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 2 * MiB + 512 + 1000 + 1 + 4096);
    json_decref(j);
    run_free(&r);
    /* The request the reserve serves is made from that pool by name (cuMemAllocFromPoolAsync);
     * should the pool have been destroyed meanwhile (the driver's answer injected here), the
     * program's own cuMemAllocAsync is made: it does not fail for the shim (a review). */
    const char *gone[] = {"CUSHIM_DEVICE_LIMIT=8MiB", "SIMCUDA_INJECT=cuMemAllocFromPoolAsync:1:CUDA_ERROR_INVALID_VALUE",
                          NULL};
    const char *argv[] = {program("rt_prog"), "budget_pool_over", NULL};
    j = run_under_cushim(&r, argv, sim_env(gone));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(kv_u64(r.out, "over.one"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "sim_calls_from_pool"), 2, "the shim's, then page's: %s", r.out);
    json_decref(j);
    run_free(&r);
    /* The program's own call may grow the pool: under a budget held past its limit (4 MiB),
     * that is refused as any growth is (a review: the fallback went past the budget). */
    const char *gone_full[] = {"CUSHIM_DEVICE_LIMIT=4MiB",
                               "SIMCUDA_INJECT=cuMemAllocFromPoolAsync:1:CUDA_ERROR_INVALID_VALUE", NULL};
    j = run_under_cushim(&r, argv, sim_env(gone_full));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(kv_u64(r.out, "over.one"), 2, "cudaErrorMemoryAllocation: %s", r.out);
    cr_expect_eq(kv_u64(r.out, "over.page"), 0, "served by the reserve: %s", r.out);
    cr_assert(j);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 2, "this one and the malloc");
    cr_expect_eq(jpath_u64(j, "devices.0.async.failed_count"), 2, "this one and the 0-byte one (the driver's)");
    json_decref(j);
    run_free(&r);
}

/* A request the pool's idle reserve could serve is still refused when it would take the device's
 * bytes in use past the limit (held was past it from the pool's chunk growth). */
Test(offload, a_request_the_reserve_serves_stays_within_the_limit)
{
    struct run_result r;
    json_t *j = rt_under_limit(&r, "3MiB", "budget_served_over");
    cr_expect_eq(kv_u64(r.out, "served.rc2"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "served.rc3"), 2, "cudaErrorMemoryAllocation: %s", r.out);
    cr_expect_eq(kv_u64(r.out, "served.current"), 3 * MiB);
    cr_assert(j);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 3 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 1);
    json_decref(j);
    run_free(&r);
}

/* A pitched allocation the budget refuses after the driver made it: out of memory, the outputs
 * as they were (a review: the caller got back the pointer the shim had freed), nothing counted
 * but the failure. */
Test(offload, a_refused_pitched_allocation_leaves_its_outputs)
{
    struct run_result r;
    json_t *j = rt_under_limit(&r, "4MiB", "budget_pitch");
    cr_expect_eq(kv_u64(r.out, "pitch.rc"), 2, "cudaErrorMemoryAllocation:\n%s", r.out);
    cr_expect_eq(kv_u64(r.out, "pitch.ptr"), 0x1234);
    cr_expect_eq(kv_u64(r.out, "pitch.pitch"), 77);
    /* The driver's call itself: the simulated runtime never writes the pointer of a failure. */
    cr_expect_eq(kv_u64(r.out, "drv.rc"), 2 /* CUDA_ERROR_OUT_OF_MEMORY */, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "drv.ptr"), 0x5678);
    cr_expect_eq(kv_u64(r.out, "drv.pitch"), 99);
    cr_expect_eq(kv_u64(r.out, "fits.pitch"), 1024);
    cr_assert(j);
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 2 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 2);
    json_decref(j);
    run_free(&r);
}

/* A pool destroyed while allocations from it are live: the budget still counts the other pools'
 * idle reserve in full (a documented limit before: their reserve was read less the destroyed
 * pool's live bytes, and a cudaMalloc passed 9 MiB under 8). */
Test(offload, a_pool_destroyed_with_live_allocations_hides_no_reserve)
{
    struct run_result r;
    json_t *j = rt_under_limit(&r, "8MiB", "budget_pool_destroyed");
    cr_expect_eq(kv_u64(r.out, "orphan.free"), 2 * MiB, "8 MiB less A's 4 live and B's 2 idle");
    cr_expect_eq(kv_u64(r.out, "orphan.held"), 6 * MiB);
    cr_expect_eq(kv_u64(r.out, "freed.held"), 2 * MiB);
    cr_expect_eq(kv_u64(r.out, "current.held"), 6 * MiB);
    cr_expect_eq(kv_u64(r.out, "captured0.held"), 6 * MiB);
    cr_expect_eq(kv_u64(r.out, "captured1.held"), 6 * MiB);
    cr_expect_eq(kv_u64(r.out, "orphan.malloc"), 2, "cudaErrorMemoryAllocation: 4 + 2 + 3 > 8");
    cr_expect_eq(kv_u64(r.out, "freed.free"), 6 * MiB, "B's 2 idle");
    cr_expect_eq(kv_u64(r.out, "freed.malloc"), 0);
    cr_expect_eq(kv_u64(r.out, "current.free"), 2 * MiB, "the current pool's 4 live and B's 2 idle");
    cr_expect_eq(kv_u64(r.out, "current.malloc"), 2);
    for (int k = 0; k < 2; k++) { /* set with cudaDeviceSetMemPool, then cuMemSetMemPool */
        char key[32];
        snprintf(key, sizeof key, "captured%d.free", k);
        cr_expect_eq(kv_u64(r.out, key), 2 * MiB,
                     "%s: made while another stream captured, its pool known all the same (found by an "
                     "attack trial: 6 MiB)", key);
        snprintf(key, sizeof key, "captured%d.malloc", k);
        cr_expect_eq(kv_u64(r.out, key), 2, "%s", key);
    }
    cr_assert(j);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 4);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 2 * MiB, "B's 2 idle, kept to the end");
    cr_expect_eq(jpath_u64(j, "devices.0.async.current_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.async.peak_bytes"), 6 * MiB, "A's 4 and B's 2");
    json_decref(j);
    run_free(&r);
}

/* What the budget holds, as published for the CLI and cushim.h (device_total.limit_held_bytes),
 * stays exact under 8 threads allocating, freeing and being refused at once: each change of the
 * budget's figures is mirrored by its own change, never by a store that a racing thread could
 * overwrite with an older sum. */
Test(offload, what_the_budget_holds_is_exact_under_threads)
{
    struct run_result r;
    json_t *j = rt_under_limit(&r, "8MiB", "budget_threads");
    cr_expect_eq(kv_u64(r.out, "threads.held"), 3 * MiB, "the 3 MiB kept; the pools released at the synchronize");
    cr_expect_eq(kv_u64(r.out, "threads.free"), 5 * MiB, "cudaMemGetInfo: the limit less what the budget holds");
    cr_assert(j);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_held_bytes"), 3 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.current_bytes"), 3 * MiB);
    json_decref(j);
    run_free(&r);
}

/* Pools past the 64 the shim copies per pass over its table count too, in the budget and in the
 * pools' figures (found by an attack trial: 70 pools keeping 2 MiB each were read as 64). */
Test(offload, every_pool_counts_however_many)
{
    struct run_result r;
    json_t *j = rt_under_limit(&r, "160MiB", "budget_many_pools");
    cr_expect_eq(kv_u64(r.out, "many.free"), 20 * MiB);
    cr_expect_eq(kv_u64(r.out, "many.held"), 140 * MiB);
    cr_expect_eq(kv_u64(r.out, "many.reserved"), 140 * MiB);
    json_decref(j);
    run_free(&r);
}

/* A per-device limit for an ordinal the process does not have is said (found by a fresh-user
 * trial: `--device-limit 5:1MiB` on two devices ran with no budget, without a word); a size for
 * every device and a limit for a device that exists say nothing. */
Test(offload, a_limit_for_a_device_the_process_does_not_see_is_said)
{
    static const char *const limits[] = {"CUSHIM_DEVICE_LIMIT=0:2GiB,5:1MiB,6:1KiB,63:1GiB",
                                         "CUSHIM_DEVICE_LIMIT=2GiB", "CUSHIM_DEVICE_LIMIT=1:2GiB"};
    for (unsigned i = 0; i < 3; i++) {
        struct run_result r;
        const char *extra[] = {limits[i], "SIMCUDA_DEVICE_COUNT=2", NULL};
        const char *argv[] = {program("rt_prog"), "malloc", NULL};
        json_t *j = run_under_cushim(&r, argv, sim_env(extra));
        cr_expect_eq(r.status, 0, "%s", r.err);
        /* Every such ordinal in one line (a fresh-user trial: a line each); CUDA_VISIBLE_DEVICES
         * is named only where it is set. */
        const char *said = "cushim: the device limit (CUSHIM_DEVICE_LIMIT, `cushim run --device-limit`) "
                           "names devices 5, 6 and 63, but this process sees 2 devices (ordinals 0-1): those "
                           "limits apply to no device\n";
        cr_expect_eq(strstr(r.err, said) != NULL, i == 0, "%s: %s", limits[i], r.err);
        /* Once: one line for the first, none for the others. */
        unsigned lines = 0;
        for (const char *at = r.err; (at = strstr(at, "apply to no device")) != NULL; at++)
            lines++;
        for (const char *at = r.err; (at = strstr(at, "applies to no device")) != NULL; at++)
            lines++;
        cr_expect_eq(lines, i == 0 ? 1u : 0u, "%s", r.err);
        json_decref(j);
        run_free(&r);
    }
}

/* The same typed as `cushim run --device-limit`, on one device: "1 device (ordinal 0)"; with
 * CUDA_VISIBLE_DEVICES set, the renumbering is named. */
Test(offload, a_typed_limit_for_a_device_not_seen_is_said)
{
    struct run_result r;
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--device-limit=3:1MiB", "--", program("rt_prog"),
                          "malloc", NULL};
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=4", "CUDA_VISIBLE_DEVICES=3", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "cushim: the device limit (CUSHIM_DEVICE_LIMIT, `cushim run --device-limit`) names "
                            "device 3, but this process sees 1 device (ordinal 0) (CUDA_VISIBLE_DEVICES renumbers "
                            "them): that limit applies to no device\n") != NULL, "%s", r.err);
    run_free(&r);
}

Test(offload, a_budget_above_the_device_says_so)
{
    /* cudaMemGetInfo's total is then the device's own memory; the summary's limit says why the
     * two differ. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=8GiB", "SIMCUDA_DEVICE_MEMORY=4GiB", NULL};
    json_t *j = offload_run(&r, "budget", extra);
    cr_expect_eq(kv_u64(r.out, "total"), 4ull << 30);
    cr_expect(strstr(r.err, "  memory 4.00 GiB  untracked 0 B  limit 8.00 GiB (above the device's memory), held 768 MiB\n") != NULL,
              "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_bytes"), 8ull << 30, "the budget as set");
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 0, "the device's own refusal");
    json_decref(j);
    run_free(&r);
}

Test(offload, spill_serves_the_request_from_host_memory)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=1GiB", "SIMCUDA_DEVICE_MEMORY=4GiB",
                           "CUSHIM_SPILL=on", NULL};
    json_t *j = offload_run(&r, "budget", extra);
    cr_expect_str_eq(json_string_value(jpath(j, "offload")), "off");
    cr_expect(json_is_true(jpath(j, "spill")));
    cr_expect(strstr(r.err, "`: 1 device, phase run, spill on\n") != NULL, "%s", r.err);
    cr_expect_eq(kv_u64(r.out, "rc_over"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.spill_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.peak_bytes"), 512 * MiB);
    cr_expect(strstr(r.err, "phase peaks") == NULL, "no compile phase, no phase peaks line:\n%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 768 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 1, "refused by the budget, then spilled");
    cr_expect(strstr(r.err, ", held 768 MiB (1 request refused, spilled where spill serves them)\n") != NULL,
              "the text says the refusal was spilled:\n%s", r.err);
    /* Said once, when it begins (a fresh-user trial: spill was silent until the summary). */
    const char *said = "] warn: device 0 had no memory for a request of 536870912 bytes (the device, or its "
                       "CUSHIM_DEVICE_LIMIT): served from pinned host memory (CUSHIM_SPILL), which kernels reach over "
                       "the bus; later spills are counted (the summary's \"spilled\"), not said\n";
    const char *at = strstr(r.err, said);
    cr_expect(at != NULL && strstr(at + strlen(said), "had no memory") == NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

Test(offload, real_out_of_memory_spills_too)
{
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_MEMORY=1GiB", "CUSHIM_SPILL=on", NULL};
    json_t *j = offload_run(&r, "budget", extra);
    cr_expect_eq(kv_u64(r.out, "total"), 1ull << 30, "no budget: the device's own total");
    cr_expect_eq(kv_u64(r.out, "rc_over"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.spill_count"), 1);
    json_decref(j);
    run_free(&r);
}

Test(offload, never_during_capture)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "capture", extra);
    cr_expect_eq(kv_u64(r.out, "rc_end_global"), 0, "cudaMallocAsync in capture still a graph node");
    cr_expect_eq(kv_u64(r.out, "rc_malloc_relaxed"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_end_relaxed"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 2 * MiB, "not redirected");
    cr_expect_eq(jpath_u64(j, "devices.0.capture.current_bytes"), 2 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 0, "the node's memory is the graph pool's");
    json_decref(j);
    run_free(&r);
}

Test(offload, pytorch_capture_pattern_stays_valid)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "pytorch_capture", extra);
    cr_expect_eq(kv_u64(r.out, "rc_malloc_other_thread"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_end"), 0, "the global capture on the other thread is still valid");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 2 * MiB);
    json_decref(j);
    run_free(&r);
}

Test(offload, async_free_waits_for_the_stream)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "SIMCUDA_LAZY_EVENTS=1", NULL};
    json_t *j = offload_run(&r, "async_free", extra);
    cr_expect_eq(kv_u64(r.out, "host_live_before_sync"), 2 * MiB, "released before the stream's work");
    cr_expect_eq(kv_u64(r.out, "host_live_after_sync"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    json_decref(j);
    run_free(&r);
    /* An event query refused for a capture is no answer: the block waits (it was released at
     * once, before the stream's work). */
    const char *refused[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "SIMCUDA_LAZY_EVENTS=1",
                             "SIMCUDA_INJECT=cuEventQuery:1:CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", NULL};
    j = offload_run(&r, "async_free", refused);
    cr_expect_eq(kv_u64(r.out, "host_live_before_sync"), 2 * MiB, "not released on a refused query");
    cr_expect_eq(kv_u64(r.out, "host_live_after_sync"), 0);
    json_decref(j);
    run_free(&r);
    /* One error of an earlier launch is no answer either: the next query says. */
    const char *passing[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "SIMCUDA_LAZY_EVENTS=1",
                             "SIMCUDA_INJECT=cuEventQuery:1:CUDA_ERROR_LAUNCH_FAILED", NULL};
    j = offload_run(&r, "async_free", passing);
    cr_expect_eq(kv_u64(r.out, "host_live_before_sync"), 2 * MiB, "not released on one error");
    cr_expect_eq(kv_u64(r.out, "host_live_after_sync"), 0);
    json_decref(j);
    run_free(&r);
}

/* A context's lasting error (every event call answers it): the block is released after three
 * answers in a row, once, and the program ends (before, its exit waited on the event for ever). */
Test(offload, an_async_free_under_a_lasting_error_is_released, .timeout = 30)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "SIMCUDA_LAZY_EVENTS=1",
                           "SIMCUDA_INJECT=cuEventQuery:*:CUDA_ERROR_ILLEGAL_ADDRESS,"
                           "cuEventSynchronize:*:CUDA_ERROR_ILLEGAL_ADDRESS", NULL};
    json_t *j = offload_run(&r, "async_free", extra);
    cr_expect_eq(kv_u64(r.out, "host_live_after_sync"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_host.pending_free_bytes"), 0);
    cr_expect(strstr(r.err, "] warn: the event of an offloaded block's cuMemFreeAsync answered CUresult 700 "
                            "3 times in a row: the context's lasting error, its work over; the block is "
                            "released\n") != NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
    /* The same at exit: the program ends before the shim polls three times. */
    const char *at_exit[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "SIMCUDA_LAZY_EVENTS=1",
                             "SIMCUDA_INJECT=cuEventQuery:*:CUDA_ERROR_ILLEGAL_ADDRESS,"
                             "cuEventSynchronize:*:CUDA_ERROR_ILLEGAL_ADDRESS", NULL};
    j = offload_run(&r, "async_free_exit", at_exit);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_host.pending_free_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    json_decref(j);
    run_free(&r);
}

Test(offload, cushim_phase_switches_a_live_process)
{
    const char *segdir = fresh_dir("seg-phase"), *ready = fresh_dir("ready-phase");
    char seg[700], rd[700], hd[800], hold[700];
    snprintf(hold, sizeof hold, "%s/go", ready);
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hd, sizeof hd, "HOLD_FILE=%s", hold);
    const char *extra[] = {preload_env(), seg, rd, hd, "CUSHIM_PHASE=compile", NULL};
    const char *argv[] = {program("offload_prog"), "phase_loop", NULL};
    pid_t pid = spawn_bg(argv, sim_env(extra));
    pid_t rp;
    wait_ready(ready, 1, &rp);
    char p[32];
    snprintf(p, sizeof p, "%d", (int)pid);
    const char *env[] = {seg, NULL};
    struct run_result r;
    const char *stat[] = {cushim_bin(), "stat", p, "--json", NULL};
    run_cmd(&r, stat, env);
    cr_expect(strstr(r.out, "\"phase\": \"compile\"") != NULL, "%s", r.out);
    run_free(&r);
    const char *phase[] = {cushim_bin(), "phase", p, "run", NULL};
    run_cmd(&r, phase, env);
    cr_expect_eq(r.status, 0, "%s", r.err);
    char said[400];
    snprintf(said, sizeof said, "pid %d: run phase requested; it takes effect at the process's next allocation\n"
             "pid %d: its offload is off (CUSHIM_OFFLOAD): the phase only marks its phase peaks\n", (int)pid, (int)pid);
    cr_expect_str_eq(r.out, said);
    run_free(&r);
    int switched = 0;
    for (int i = 0; i < 500 && !switched; i++) {
        run_cmd(&r, stat, env);
        switched = strstr(r.out, "\"phase\": \"run\"") != NULL;
        run_free(&r);
        if (!switched)
            usleep(10000);
    }
    cr_expect(switched, "cushim stat never showed the run phase");
    const char *bad[] = {cushim_bin(), "phase", p, "warmup", NULL};
    run_cmd(&r, bad, env);
    cr_expect_eq(r.status, 2);
    cr_expect_str_eq(r.err, "cushim: \"warmup\" is not a phase (expected compile or run)\n");
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(pid), 0);
}

/* Runs offload_prog `scenario` under `cushim run --json` (with `extra` in its environment); once
 * the program says it is ready, asks `cushim phase PID run`, then lets it go on. Returns the
 * summary. e1, e2: NAME=value settings, or NULL. */
static json_t *with_run_requested(const char *scenario, const char *e1, const char *e2)
{
    const char *ready = fresh_dir(scenario);
    char rd[700], hd[800], hold[700], json[700];
    snprintf(hold, sizeof hold, "%s/go", ready);
    snprintf(rd, sizeof rd, "READY_DIR=%s", ready);
    snprintf(hd, sizeof hd, "HOLD_FILE=%s", hold);
    snprintf(json, sizeof json, "%s/%s.json", test_dir(), scenario);
    const char *extra[] = {rd, hd, e1, e2, NULL};
    const char *argv[] = {cushim_bin(), "run", "--quiet", "--json", json, "--", program("offload_prog"),
                          scenario, NULL};
    pid_t run = spawn_bg(argv, sim_env(extra));
    pid_t pid;
    wait_ready(ready, 1, &pid);
    char p[32];
    snprintf(p, sizeof p, "%d", (int)pid);
    struct run_result r;
    const char *phase[] = {cushim_bin(), "phase", p, "run", NULL};
    run_cmd(&r, phase, sim_env(NULL));
    cr_expect_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    touch(hold);
    cr_expect_eq(wait_bg(run), 0);
    return json_load(json);
}

/* A request taken by one thread's allocation at the moment the program sets its own phase on
 * another never wins over the program's newer choice. A race: the code before the fix (taking
 * the request without the lock the program's change holds) lost 27 to 88 rounds in each of 4
 * runs of 4 million here; 2 million keep the test short, and at most 60 s of them on a loaded
 * machine (one core shared with 6 busy loops made about 20 rounds a second). */
Test(offload, a_phase_request_racing_the_programs_own_change_never_wins, .timeout = 240)
{
    struct run_result r;
    const char *extra[] = {"ROUNDS=2000000", "ROUNDS_SECONDS=60", NULL};
    json_t *j = offload_run(&r, "phase_race", extra);
    uint64_t rounds = kv_u64(r.out, "rounds");
    cr_assert_eq(kv_u64(r.out, "overtaken"), 0, "rounds in which a request made before the "
                 "program's own cushim_set_phase(run) was applied after it (of %llu)", (unsigned long long)rounds);
    json_decref(j);
    run_free(&r);
    /* With the request taken outside the lock again, 2 million rounds lost 774 to 2201 here (about
     * one in 2000): under 100000 rounds in the 60 s the race may go unseen, and a pass says
     * nothing (was: any number of rounds above 0 passed). */
    if (rounds < 100000) {
        printf("not run: only %llu rounds in 60 s (a loaded machine); 100000 needed to see the race\n",
               (unsigned long long)rounds);
        cr_skip_test("not run: only %llu rounds in 60 s", (unsigned long long)rounds);
    }
}

Test(offload, a_phase_request_applies_at_an_allocation_of_any_kind)
{
    /* `cushim phase PID run` while the program is in its compile phase; its next allocation is a
     * cuMemCreate (not cudaMalloc): the run phase applies from it, and its 2 MiB count in the run
     * phase's device peak. */
    json_t *j = with_run_requested("phase_other_kinds", NULL, NULL);
    cr_expect_str_eq(json_string_value(jpath(j, "phase")), "run");
    cr_expect(json_is_null(jpath(j, "phase_requested")), "no request left waiting");
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.compile_device_peak_bytes"), 4096);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_device_peak_bytes"), 4096 + 2 * MiB);
    json_decref(j);
}

Test(offload, the_programs_own_phase_change_replaces_a_pending_request)
{
    json_t *j = with_run_requested("phase_stale", "CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB");
    cr_expect_str_eq(json_string_value(jpath(j, "phase")), "compile", "the program's newer compile phase");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1, "its 2 MiB offloaded");
    json_decref(j);
}

/* A `cushim phase` request that lands while an allocation is in its driver call applies from the
 * next allocation; the one under way counts in the phase it was placed in (found by a fresh-user
 * trial: an offloaded compile allocation went to the run phase's offloaded peak, and a run
 * phase's device allocation to the compile phase's peak alone). */
Test(offload, a_phase_request_during_an_allocation_applies_from_the_next)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_PHASE=compile", "CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB",
                           "SIMCUDA_INJECT=cuMemHostAlloc:1:raise=10,cuMemAlloc_v2:3:raise=10", NULL};
    json_t *j = offload_run(&r, "phase_during_call", extra);
    cr_expect_eq(kv_u64(r.out, "phase.offloaded"), 1, "still compile after the allocation under way");
    cr_expect_eq(kv_u64(r.out, "phase.next"), 0);
    cr_expect_eq(kv_u64(r.out, "phase.device"), 0);
    cr_expect_eq(kv_u64(r.out, "phase.last"), 1);
    cr_expect_eq(kv_u64(r.out, "signals"), 2, "%s", r.out);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.compile_offloaded_peak_bytes"), 4 * MiB,
                 "the offloaded 4 MiB in its own compile phase");
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_offloaded_peak_bytes"), 4 * MiB, "and resident in run");
    cr_expect_eq(jpath_u64(j, "devices.0.offload_resident.count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_device_peak_bytes"), KiB + 64 * KiB + 4 * MiB,
                 "the device 4 MiB in the run phase it was placed in");
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.compile_device_peak_bytes"), KiB + 64 * KiB + 4 * MiB + KiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 4);
    json_decref(j);
    run_free(&r);
    /* A stream-ordered allocation under way (on the device, in the run phase). */
    const char *async_extra[] = {"CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB",
                                 "SIMCUDA_INJECT=cuMemAllocAsync:1:raise=10", NULL};
    j = offload_run(&r, "phase_during_async", async_extra);
    cr_expect_eq(kv_u64(r.out, "phase.async"), 0, "still run after the allocation under way");
    cr_expect_eq(kv_u64(r.out, "phase.last"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_device_peak_bytes"), KiB + 4 * MiB,
                 "the 4 MiB in the run phase it was placed in");
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.compile_device_peak_bytes"), KiB + 4 * MiB + KiB);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 1);
    json_decref(j);
    run_free(&r);
}

/* The program's own switch to run while an offloaded compile-phase allocation is made: the
 * allocation is resident (a stress trial: offloaded, never counted resident). */
Test(offload, an_allocation_placed_in_compile_and_alive_in_run_is_resident)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_PHASE=compile", "CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB",
                           "SIMCUDA_INJECT=cuMemHostAlloc:1:raise=10", NULL};
    json_t *j = offload_run(&r, "switch_during_offload", extra);
    cr_expect_eq(kv_u64(r.out, "phase"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_resident.count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_resident.bytes"), 4 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.phase_peaks.run_offloaded_peak_bytes"), 4 * MiB);
    json_decref(j);
    run_free(&r);
}

/* A device the driver cannot describe gets no record, so its allocations are not counted: the
 * budget they reserved is given back at once (before, it stayed charged for ever and the third
 * 512 MiB round under a 1 GiB budget failed; found by a review helper). */
Test(offload, an_uncounted_allocation_gives_its_budget_back)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=1GiB",
                           "SIMCUDA_INJECT=cuDeviceTotalMem_v2:*:CUDA_ERROR_INVALID_DEVICE", NULL};
    json_t *j = offload_run(&r, "budget_rounds", extra);
    for (int i = 0; i < 4; i++) {
        char key[16];
        snprintf(key, sizeof key, "rc.%d", i);
        cr_expect_eq(kv_u64(r.out, key), 0, "round %d", i);
    }
    json_decref(j);
    run_free(&r);
}

/* The shim's sections around its own calls nest (a free that cannot be deferred, releasing its
 * block to the cache): the thread's cancellation state is as it was afterwards (before, the
 * inner section saved the outer one's "disabled" and the thread could never be cancelled again;
 * found by a review helper). */
Test(offload, nested_sections_give_back_the_cancellation_state)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "CUSHIM_OFFLOAD_CACHE=8MiB",
                           "SIMCUDA_INJECT=cuEventCreate:*:CUDA_ERROR_OUT_OF_MEMORY", NULL};
    json_t *j = offload_run(&r, "free_async_cancel_state", extra);
    cr_expect_eq(kv_u64(r.out, "cancel_enabled"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_host.cached_bytes"), 2 * MiB);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_bounded_cache_reuses_freed_pinned_blocks)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "CUSHIM_OFFLOAD_CACHE=4MiB", NULL};
    json_t *j = offload_run(&r, "cache", extra);
    cr_expect_eq(kv_u64(r.out, "host_alloc_calls"), 2, "4 MiB fresh, 3 MiB from the cache, 1 MiB+1 fresh");
    cr_expect_eq(kv_u64(r.out, "free_host_calls"), 1, "the 1 MiB+1 block does not fit in the 4 MiB cache beside the 4 MiB one");
    /* Each free waited for the context's work before its block could be kept, as cuMemFree
     * would (a kernel queued before the free may still use it; the next allocation gets it). */
    cr_expect_eq(kv_u64(r.out, "ctx_sync_calls"), 3);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 3);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 0);
    /* The pinned memory the cache holds at exit, in JSON and in the text summary. */
    cr_expect_eq(jpath_u64(j, "devices.0.offload_host.cached_bytes"), 4 * MiB);
    cr_expect(strstr(r.err, "    offload host memory beyond live allocations: cached for reuse 4.00 MiB, "
                            "pending free 0 B\n") != NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
    const char *none[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    j = offload_run(&r, "cache", none);
    cr_expect_eq(kv_u64(r.out, "host_alloc_calls"), 3, "no cache by default");
    cr_expect_eq(kv_u64(r.out, "free_host_calls"), 3);
    cr_expect_eq(kv_u64(r.out, "ctx_sync_calls"), 0, "cuMemFreeHost synchronizes itself");
    json_decref(j);
    run_free(&r);
}

Test(offload, phase_set_before_any_cuda_call_applies)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB", "CUSHIM_DEVICE_LIMIT=1TiB", NULL};
    json_t *j = offload_run(&r, "phase_first", extra);
    cr_expect_eq(kv_u64(r.out, "set_compile"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    /* A budget above the device's memory is the device's memory. */
    cr_expect_eq(kv_u64(r.out, "total"), 16ull << 30);
    json_decref(j);
    run_free(&r);
}

Test(offload, device_reset_forgets_offloaded_ranges_and_cached_blocks)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "CUSHIM_OFFLOAD_CACHE=8MiB", NULL};
    json_t *j = offload_run(&r, "reset", extra);
    cr_expect_eq(kv_u64(r.out, "host_live_after_reset"), 0, "the driver freed the context's pinned memory");
    cr_expect_eq(kv_u64(r.out, "memset_seen"), 1);
    cr_expect_eq(kv_u64(r.out, "host_alloc_calls"), 3, "the block cached before the reset is not reused");
    cr_expect_eq(kv_u64(r.out, "free_host_calls"), 0, "nothing the driver freed is freed again");
    cr_expect_eq(kv_u64(r.out, "host_live_end"), 3 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 3 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.peak_bytes"), 6 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 3);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_host.cached_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_host.pending_free_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, device_limit_applies_to_cuMemCreate)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=1GiB", "SIMCUDA_DEVICE_MEMORY=4GiB", NULL};
    json_t *j = offload_run(&r, "vmm_budget", extra);
    cr_expect_eq(kv_u64(r.out, "rc_first"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_over"), 2, "CUDA_ERROR_OUT_OF_MEMORY");
    cr_expect_eq(kv_u64(r.out, "handle_after_over"), 12345, "the output as the program left it");
    /* Requests the driver refuses for their arguments get its error, not the budget's, and are
     * no refusal of the budget (a numeric-extremes trial). */
    cr_expect_eq(kv_u64(r.out, "rc_over_unaligned"), 1, "CUDA_ERROR_INVALID_VALUE: not a multiple of the granularity");
    cr_expect_eq(kv_u64(r.out, "rc_over_flags"), 1, "CUDA_ERROR_INVALID_VALUE: flags must be 0");
    cr_expect_eq(kv_u64(r.out, "rc_over_no_device"), 101, "CUDA_ERROR_INVALID_DEVICE");
    cr_expect_eq(kv_u64(r.out, "rc_over_again"), 2, "still over the budget (a review: each failure gave back bytes never reserved)");
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 2);
    cr_expect_eq(kv_u64(r.out, "rc_release"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_after_release"), 0, "the released handle returned its budget");
    cr_expect_eq(kv_u64(r.out, "free"), 512 * MiB);
    cr_expect_eq(kv_u64(r.out, "sim.vmm.0"), 512 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.vmm.peak_bytes"), 768 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.vmm.failed_count"), 4, "the budget's two refusals and the driver's two on device 0");
    json_decref(j);
    run_free(&r);
}

Test(offload, the_phase_stack_belongs_to_the_process)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=compile", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "phase_stack", extra);
    cr_expect_eq(kv_u64(r.out, "push"), 0);
    cr_expect_eq(kv_u64(r.out, "phase_after_push"), 1, "pushed on another thread");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(kv_u64(r.out, "pop"), 0, "restored the run phase");
    cr_expect_eq(kv_u64(r.out, "phase_after_pop"), 0);
    cr_expect_eq(kv_i64(r.out, "pop_empty"), -1);
    cr_expect_eq(kv_i64(r.out, "push_bad"), -1);
    cr_expect_eq(kv_i64(r.out, "push_65th"), -1, "the stack holds 64 phases");
    json_decref(j);
    run_free(&r);
}

Test(offload, a_forked_child_starts_with_an_empty_phase_stack)
{
    struct run_result r;
    json_t *j = offload_run(&r, "phase_fork", NULL);
    cr_expect_eq(kv_u64(r.out, "children_ok"), 30, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "children_hung"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_forked_child_that_only_reads_leaves_no_segment)
{
    const char *segdir = fresh_dir("seg-fork-reader");
    char seg[700];
    snprintf(seg, sizeof seg, "CUSHIM_SEGMENT_DIR=%s", segdir);
    const char *extra[] = {preload_env(), seg, NULL};
    const char *argv[] = {program("offload_prog"), "fork_reader", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(kv_u64(r.out, "child_status"), 0, "the child read 0s: nothing counted in it");
    run_free(&r);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls -A %s | wc -l", segdir);
    const char *ls[] = {"sh", "-c", cmd, NULL};
    run_cmd(&r, ls, NULL);
    cr_expect_str_eq(r.out, "0\n", "no segment left by the child");
    run_free(&r);
}

Test(offload, a_stream_ordered_request_is_offloaded_before_the_budget_is_asked)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=3000000", "CUSHIM_DEVICE_LIMIT=5M", NULL};
    json_t *j = offload_run(&r, "async_budget", extra);
    cr_expect_eq(kv_u64(r.out, "rc_async"), 0, "offloaded, not refused for a budget it does not use");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.spill_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.async.failed_count"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_destroyed_pool_gets_the_drivers_error_not_the_budgets)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=4MiB", NULL};
    json_t *j = offload_run(&r, "destroyed_pool_budget", extra);
    cr_expect_eq(kv_u64(r.out, "rc_destroyed_over"), 1, "cudaErrorInvalidValue, as without a budget");
    cr_expect_eq(kv_u64(r.out, "rc_destroyed_within"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_live_over"), 2, "cudaErrorMemoryAllocation: the budget's");
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 1, "the live pool's request only");
    cr_expect_eq(jpath_u64(j, "devices.0.async.failed_count"), 3);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

/* A request its pool's idle reserve serves, while another thread trims that pool and takes the
 * room its reserve stood for (the other thread's steps run inside the shim's second look at the
 * pool's reserve: offload_prog served_idle_taken). The budget's held was read after that, within
 * the limit with no idle left, and the served request was granted: the device total went to
 * 18 MiB under a 16 MiB budget (a stress trial: the total read as the limit + 512 B). A served
 * request must keep the device total within the limit too: refused. */
Test(offload, a_served_request_keeps_the_device_total_within_the_budget)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=16MiB", "SIMCUDA_INJECT=cuMemPoolGetAttribute:*:raise=10", NULL};
    json_t *j = offload_run(&r, "served_idle_taken", extra);
    cr_assert_eq(kv_u64(r.out, "fired"), 1, "the other thread ran during the request\n%s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_other"), 0, "10 + 4 MiB of cudaMalloc within 16 MiB");
    cr_expect_eq(kv_u64(r.out, "rc_request"), 2, "cudaErrorMemoryAllocation: 14 + 4 MiB would pass 16 MiB");
    cr_expect_eq(kv_u64(r.out, "current"), 14 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 14 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.async.failed_count"), 1);
    json_decref(j);
    run_free(&r);
}

/* Threads making and freeing device, VMM and pool memory under a 16 MiB budget while pools are
 * replaced and the device total is read without a pause (race_prog budget_churn): no reading
 * past the budget, every request granted or refused with out of memory, nothing left. (A
 * budget-stress trial's program saw the total pass the limit with cuMemCreate's budget checked
 * after its call; this scenario, smaller, did not catch that in 20 runs: it guards the
 * invariants, not that race.) */
Test(offload, churn_under_a_budget_never_passes_it)
{
    struct run_result r;
    const char *argv[] = {program("race_prog"), "budget_churn", NULL};
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=16MiB", "BUDGET_BYTES=16777216", "ROUNDS=2000", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_expect_eq(kv_u64(r.out, "over"), 0, "readings of the device total past the budget");
    cr_expect_eq(kv_u64(r.out, "end_current"), 0);
    uint64_t refused = kv_u64(r.out, "refused");
    cr_expect_gt(refused, 0, "the budget was reached");
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_refused_count"), refused);
    cr_expect_leq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 16 * MiB);
    cr_expect_eq(kv_u64(r.out, "sim.vmm.0"), 0);
    cr_expect_eq(kv_u64(r.out, "sim.device.0"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_stream_destroyed_while_capturing_ends_its_capture)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "capture_destroyed", extra);
    cr_expect_eq(kv_u64(r.out, "rc_destroy"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_malloc"), 0);
    cr_expect_eq(kv_u64(r.out, "host_live"), 2 * MiB, "offloaded: no capture is live any more");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, the_budget_survives_a_request_near_size_max)
{
    /* used + SIZE_MAX wrapped: the request passed the budget, its release then zeroed the count,
     * and the next 8 MiB went over the 10 MiB budget. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=10MiB", NULL};
    json_t *j = offload_run(&r, "budget_edges", extra);
    cr_expect_eq(kv_u64(r.out, "rc_first"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_huge"), 2 /* cudaErrorMemoryAllocation */);
    /* A refusal by the budget is said, the first at warn, the default level (before: nothing,
     * even at debug, to tell it from a real shortage; found by a fresh-user helper; then at info,
     * unseen by default: a bad-input trial). */
    cr_expect(strstr(r.err, "warn: device 0: a request of 16.0 EiB (18446744073709551615 bytes) refused by the "
                            "device limit (CUSHIM_DEVICE_LIMIT): 8.00 MiB of its 10.0 MiB held: "
                            "CUDA_ERROR_OUT_OF_MEMORY (CUSHIM_SPILL=on tries pinned host memory instead) "
                            "(later refusals at CUSHIM_LOG=debug)\n") != NULL, "%s", r.err);
    cr_expect(strstr(r.err, "(8388608 bytes) refused") == NULL, "the second only at debug:\n%s", r.err);
    cr_expect_eq(kv_u64(r.out, "free_after_huge"), 2 * MiB, "8 of the 10 MiB still in use");
    cr_expect_eq(kv_u64(r.out, "rc_again"), 2, "8 MiB more is over the budget");
    cr_expect_eq(kv_u64(r.out, "rc_null"), 1 /* CUDA_ERROR_INVALID_VALUE, the driver's */);
    cr_expect_eq(kv_u64(r.out, "rc_null_async"), 1);
    /* The 2 MiB left fit exactly; one byte more does not (found untested by a test audit helper). */
    cr_expect_eq(kv_u64(r.out, "rc_exact"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_one_byte_more"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.peak_bytes"), 10 * MiB, "the whole budget");
    /* The huge request, the second 8 MiB, the NULL output and the byte: failures, as without a
     * budget. */
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 4);
    json_decref(j);
    run_free(&r);
}

Test(offload, spill_never_writes_through_a_null_output)
{
    /* It did: a NULL dptr over the budget crashed the program (SIGSEGV) with spill on. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=10MiB", "CUSHIM_SPILL=on", NULL};
    json_t *j = offload_run(&r, "budget_edges", extra);
    cr_expect_eq(kv_u64(r.out, "rc_null"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_null_async"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_again"), 0, "spilled");
    cr_expect_eq(kv_u64(r.out, "host_live"), 8 * MiB, "only the spilled request is pinned");
    cr_expect_eq(kv_u64(r.out, "rc_exact"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_one_byte_more"), 0, "spilled too");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.spill_count"), 2);
    json_decref(j);
    run_free(&r);
}

static void expect_misuse_answers(const char *out)
{
    cr_expect_eq(kv_u64(out, "rc_htod_last"), 0, "the last 16 bytes are the program's");
    cr_expect_eq(kv_u64(out, "rc_htod_over"), 1 /* CUDA_ERROR_INVALID_VALUE */);
    cr_expect_eq(kv_u64(out, "rc_dtoh_over"), 1);
    cr_expect_eq(kv_u64(out, "rc_dtod_over"), 1);
    cr_expect_eq(kv_u64(out, "rc_async_over"), 1 /* cudaErrorInvalidValue */);
    cr_expect_eq(kv_u64(out, "rc_2d_last"), 0);
    cr_expect_eq(kv_u64(out, "rc_2d_over"), 1);
    cr_expect_eq(kv_u64(out, "rc_2d_unified_over"), 1);
    cr_expect_eq(kv_u64(out, "rc_3d_last"), 0);
    cr_expect_eq(kv_u64(out, "rc_3d_over"), 1);
    cr_expect_eq(kv_u64(out, "rc_freehost"), 1, "cudaFreeHost of device memory is refused");
    cr_expect_eq(kv_u64(out, "rc_free_after_freehost"), 0, "and the memory is still the program's");
    cr_expect_eq(kv_u64(out, "rc_smaller_over"), 1, "a 3 MiB block ends at 3 MiB");
    cr_expect_eq(kv_u64(out, "rc_free_in_capture"), 900 /* cudaErrorStreamCaptureUnsupported */);
    cr_expect_eq(kv_u64(out, "rc_free_async_invalidated"), 901 /* cudaErrorStreamCaptureInvalidated */);
    cr_expect_eq(kv_u64(out, "rc_end"), 901);
    cr_expect_eq(kv_u64(out, "rc_free_after_capture"), 0, "the failed free kept it");
}

Test(offload, misused_offloaded_memory_gets_the_answers_device_memory_gets)
{
    /* Copies past the end crashed the program (the rerouted copy ran past the pinned block),
     * cudaFreeHost freed it, and a free a capture refused lost it (the second free failed). */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "offload_misuse", extra);
    expect_misuse_answers(r.out);
    cr_expect_eq(kv_u64(r.out, "host_live_before"), 3 * MiB);
    cr_expect_eq(kv_u64(r.out, "host_live_after"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_cached_block_is_not_a_way_around_a_capture)
{
    /* With the cache, the free in a global-mode capture returned 0 and left the capture valid. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", "CUSHIM_OFFLOAD_CACHE=64MiB", NULL};
    json_t *j = offload_run(&r, "offload_misuse", extra);
    expect_misuse_answers(r.out);
    cr_expect_eq(kv_u64(r.out, "host_live_before"), 4 * MiB, "the 3 MiB came from the cached 4 MiB block");
    cr_expect_eq(kv_u64(r.out, "host_live_after"), 4 * MiB, "back in the cache");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_stream_ordered_allocation_counts_on_the_streams_device)
{
    /* It counted on the current device (0), and under a budget of 4 MiB there was refused. */
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", "CUSHIM_DEVICE_LIMIT=0:4MiB,1:8MiB", NULL};
    json_t *j = offload_run(&r, "async_other_device", extra);
    cr_expect_eq(kv_u64(r.out, "rc_async"), 0, "device 1 has 8 MiB of budget");
    cr_expect_eq(kv_u64(r.out, "sim.async.1"), 6 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.1.async.current_bytes"), 6 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 0);
    json_decref(j);
    run_free(&r);
    /* Without a budget: the plain path asks the stream too. */
    const char *plain[] = {"SIMCUDA_DEVICE_COUNT=2", NULL};
    j = offload_run(&r, "async_other_device", plain);
    cr_expect_eq(jpath_u64(j, "devices.1.async.current_bytes"), 6 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 0);
    json_decref(j);
    run_free(&r);
    /* Offloaded, it is device 1's request still. */
    const char *off[] = {"SIMCUDA_DEVICE_COUNT=2", "CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    j = offload_run(&r, "async_other_device", off);
    cr_expect_eq(jpath_u64(j, "devices.1.offloaded.current_bytes"), 6 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.1.async.alloc_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, another_devices_stream_frees_without_blocking_and_caches_on_the_right_device)
{
    /* The event was made in the current context and could not be recorded on the stream of
     * another one: the free fell back to a blocking cuStreamSynchronize. The cached block was
     * counted on device 1 and taken off device 0 (underflow logged, device 1 kept 1 MiB). */
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", "CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1B",
                           "CUSHIM_OFFLOAD_CACHE=4MiB", NULL};
    json_t *j = offload_run(&r, "offload_other_device", extra);
    cr_expect_eq(kv_u64(r.out, "rc_async"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_free_async"), 0);
    cr_expect_eq(kv_u64(r.out, "stream_syncs"), 0, "an event, not a blocking synchronize");
    cr_expect_eq(kv_u64(r.out, "rc_malloc"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offload_host.cached_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.1.offload_host.cached_bytes"), MiB,
                 "cached for device 1's context, whose memory it is (not reused by device 0's)");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), MiB);
    cr_expect_eq(jpath_u64(j, "devices.1.offloaded.free_count"), 1);
    cr_expect(strstr(r.err, "underflow") == NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_pending_free_waits_for_the_end_of_a_capture)
{
    /* The shim released the block (cuMemFreeHost) at the capture's first allocation, which
     * invalidated the program's global-mode capture (900/901) and leaked the block. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=64KiB", NULL};
    json_t *j = offload_run(&r, "poll_during_capture", extra);
    cr_expect_eq(kv_u64(r.out, "rc_malloc_in_capture"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_free_in_capture"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_end"), 0);
    cr_expect_eq(kv_u64(r.out, "host_live_after_capture"), MiB, "still pending");
    cr_expect_eq(kv_u64(r.out, "host_live_later"), 0, "released after the capture");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    json_decref(j);
    run_free(&r);
}

Test(offload, frees_that_cannot_be_deferred_during_a_capture_keep_the_memory_and_the_capture)
{
    /* Past 1024 pending frees the shim waited and freed at once: cuMemFreeHost invalidated the
     * other stream's global capture (901), and the failed free was counted and put back, so the
     * later cudaFree counted it again (1036 frees of 1030 allocations, an underflow logged). */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1B", NULL};
    json_t *j = offload_run(&r, "many_frees_during_capture", extra);
    cr_expect_eq(kv_u64(r.out, "refused"), 6, "1024 deferred, 6 refused");
    cr_expect_eq(kv_u64(r.out, "first_refusal"), 900 /* cudaErrorStreamCaptureUnsupported */);
    cr_expect_eq(kv_u64(r.out, "rc_end"), 0, "the capture is still valid");
    cr_expect_eq(kv_u64(r.out, "freed_after"), 6);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1030);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1030);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 0);
    cr_expect(strstr(r.err, "underflow") == NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

static void frees_during_other_capture(const char *mode, uint64_t refused)
{
    struct run_result r;
    char env[64];
    snprintf(env, sizeof env, "CAPTURE_MODE=%s", mode);
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1B", env, NULL};
    json_t *j = offload_run(&r, "frees_during_other_capture", extra);
    cr_expect_eq(kv_u64(r.out, "refused"), refused, "%s", mode);
    cr_expect_eq(kv_u64(r.out, "rc_end"), 0, "%s: the capture is valid", mode);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1100, "%s", mode);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 0, "%s", mode);
    json_decref(j);
    run_free(&r);
}

Test(offload, only_a_global_capture_elsewhere_holds_back_the_shims_own_frees)
{
    /* A relaxed or thread-local capture on another thread prohibits nothing here (cuda.h
     * cuThreadExchangeStreamCaptureMode): pending frees are released meanwhile and none is
     * refused (76 were, past 1024 pending). A global one holds them back. */
    frees_during_other_capture("relaxed", 0);
    frees_during_other_capture("thread_local", 0);
    frees_during_other_capture("global", 1100 - 1024);
}

Test(offload, pending_frees_take_turns)
{
    /* Each poll took the first 32 pending slots and put the unready ones back in place: 32 frees
     * waiting on a stream nobody synchronizes kept every later block from being released. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1B", "SIMCUDA_LAZY_EVENTS=1", NULL};
    json_t *j = offload_run(&r, "pending_frees_take_turns", extra);
    cr_expect_eq(kv_u64(r.out, "host_live"), 32 * 8192, "only stream a's blocks still pinned");
    json_decref(j);
    run_free(&r);
}

/* Every deferred-free slot taken (1,024 frees pending on a stream whose work completes only when
 * it is synchronized: SIMCUDA_LAZY_EVENTS): before, the 1,025th cudaFreeAsync spun on the stream's
 * query for ever (the program never got to its synchronize), and for a while after that whenever
 * any capture was live (a relaxed one of another stream here). Now it synchronizes the stream once
 * and frees, as cudaFree would. */
Test(offload, a_free_with_every_slot_taken_does_not_wait_for_ever)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1B", "SIMCUDA_LAZY_EVENTS=1", NULL};
    const char *argv[] = {"timeout", "30", program("offload_prog"), "deferred_frees_full", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(kv_u64(r.out, "done"), 1);
    json_t *d = json_array_get(jpath(j, "descendants"), 0);
    cr_assert(d, "the program is timeout's descendant");
    /* 1,200 blocks and the cudaMalloc of 256 B (offloaded too: CUSHIM_OFFLOAD_MIN=1B) */
    cr_expect_eq(jpath_u64(d, "devices.0.offloaded.alloc_count"), 1201);
    cr_expect_eq(jpath_u64(d, "devices.0.offloaded.free_count"), 1201);
    cr_expect_eq(jpath_u64(d, "devices.0.offloaded.current_bytes"), 0);
    cr_expect_eq(jpath_u64(d, "devices.0.offload_host.pending_free_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_reset_destroys_every_event_left_in_another_context)
{
    /* Only 64 were destroyed; the rest leaked in device 1's live context. */
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", "SIMCUDA_LAZY_EVENTS=1", "CUSHIM_OFFLOAD=always",
                           "CUSHIM_OFFLOAD_MIN=1B", NULL};
    json_t *j = offload_run(&r, "events_of_another_context", extra);
    cr_expect_eq(kv_u64(r.out, "events_made"), 200);
    cr_expect_eq(kv_u64(r.out, "events_destroyed_at_reset"), 200);
    cr_expect_eq(json_array_size(jpath(j, "devices")), 1, "the blocks are device 0's");
    cr_expect_eq(jpath_u64(j, "devices.0.offload_host.pending_free_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 200);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_failed_deferred_release_is_said)
{
    /* cuMemFreeHost's failure was dropped without a word. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=4KiB",
                           "SIMCUDA_INJECT=cuMemFreeHost:*:CUDA_ERROR_UNKNOWN", "CUSHIM_LOG=warn", NULL};
    json_t *j = offload_run(&r, "pending_frees_take_turns", extra);
    cr_expect(strstr(r.err, "cuMemFreeHost of an offloaded block freed by cuMemFreeAsync failed "
                            "(CUresult 999): its pinned memory stays allocated") != NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_free_that_cannot_be_deferred_waits_on_its_own_stream)
{
    /* The fallback synchronized the legacy stream for a _ptsz free: the per-thread stream's work
     * could still use the block it then freed. With no capture live it synchronizes the stream
     * once (it queried it until done, which could spin for ever). */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB",
                           "SIMCUDA_INJECT=cuEventCreate:*:CUDA_ERROR_OUT_OF_MEMORY", NULL};
    json_t *j = offload_run(&r, "fallback_per_thread", extra);
    cr_expect_eq(kv_u64(r.out, "rc_free"), 0);
    cr_expect_eq(kv_u64(r.out, "legacy_queries"), 0);
    cr_expect_eq(kv_u64(r.out, "per_thread_queries"), 0);
    cr_expect_eq(kv_u64(r.out, "legacy_syncs"), 0);
    cr_expect_eq(kv_u64(r.out, "per_thread_syncs"), 1);
    cr_expect_eq(kv_u64(r.out, "host_live"), 0, "freed once the stream was done");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    json_decref(j);
    run_free(&r);
}

Test(offload, a_capture_left_by_an_exited_thread_is_over)
{
    /* It stayed live in the shim for ever: every later allocation counted as capture and offload
     * never applied again. */
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "capture_thread_exits", extra);
    cr_expect_eq(kv_u64(r.out, "rc_begin"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_malloc"), 0);
    cr_expect_eq(kv_u64(r.out, "host_live"), 8 * MiB, "offloaded");
    cr_expect_eq(jpath_u64(j, "devices.0.capture.alloc_count"), 0);
    json_decref(j);
    run_free(&r);
}

/* An offloaded cudaMallocAsync is pinned memory of its stream's context (README Limits): before,
 * it was the current context's, and a reset of the current device (0) freed the memory of a
 * stream of device 1: the read-back and the free failed (found by an attack helper). */
Test(offload, offloaded_stream_ordered_memory_is_its_streams_contexts)
{
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", "CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "async_reset_other_device", extra);
    cr_expect_eq(kv_u64(r.out, "rc_read"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "same"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_free_async"), 0);
    cr_expect_eq(jpath_u64(j, "devices.1.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.1.offloaded.free_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.1.offloaded.current_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

/* CUSHIM_SPILL serves cudaMalloc and cudaMallocAsync (the stream's current pool): a request from
 * a pool the program made fails as the budget says (before, it came back as host memory, without
 * the pool's properties; found by an attack helper). */
Test(offload, spill_leaves_a_named_pools_requests_alone)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_SPILL=on", "CUSHIM_DEVICE_LIMIT=1GiB", NULL};
    json_t *j = offload_run(&r, "spill_from_pool", extra);
    cr_expect_eq(kv_u64(r.out, "rc_second"), 2, "cudaErrorMemoryAllocation: %s", r.out);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.async.failed_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.async.peak_bytes"), 900 * MiB);
    json_decref(j);
    run_free(&r);
}

/* A context torn down (cudaDeviceReset) while another thread's calls poll the offloaded frees
 * still waiting on its streams: the shim never releases a block the driver freed with the context
 * (before, most runs said "cuMemFreeHost of an offloaded block ... failed": the shim had freed
 * an address the driver may have given the other thread meanwhile; a review saw that thread's
 * own cudaFreeHost fail). */
Test(offload, a_teardown_is_not_raced_by_another_threads_poll)
{
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", "CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "teardown_race", extra);
    cr_expect_eq(kv_u64(r.out, "bad"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "thread"), 0);
    cr_expect_eq(kv_u64(r.out, "rounds_positive"), 1);
    cr_expect(strstr(r.err, "failed (CUresult") == NULL, "%s", r.err);
    cr_assert(j);
    cr_expect_eq(jpath_u64(j, "devices.1.offloaded.alloc_count"), 4000);
    cr_expect_eq(jpath_u64(j, "devices.1.offloaded.current_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

/* A reset's allocations whose addresses the driver hands to another thread's offloaded block
 * before the shim drops them are counted freed: device 1 ends with nothing counted (a stress
 * trial: the offloaded block's entry replaced theirs silently, and hundreds stayed counted). */
Test(offload, a_resets_allocations_are_freed_when_an_offloaded_block_takes_their_address)
{
    struct run_result r;
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", "CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1KiB", NULL};
    json_t *j = offload_run(&r, "reset_vs_offload", extra);
    cr_expect_eq(kv_u64(r.out, "thread"), 0, "%s", r.out);
    cr_assert(j);
    json_t *d1 = device_of(j, 1);
    const char *kinds[] = {"offloaded", "pinned_host", "managed"};
    for (int k = 0; k < 3; k++) {
        char path[64];
        snprintf(path, sizeof path, "%s.current_bytes", kinds[k]);
        cr_expect_eq(jpath_u64(d1, path), 0, "%s", kinds[k]);
        snprintf(path, sizeof path, "%s.alloc_count", kinds[k]);
        cr_expect_eq(jpath_u64(d1, path), 1500, "%s: one a round", kinds[k]);
        snprintf(path, sizeof path, "%s.free_count", kinds[k]);
        cr_expect_eq(jpath_u64(d1, path), 1500, "%s: every allocation counted freed", kinds[k]);
    }
    /* The other thread's offloaded blocks on device 0, made while the resets ran (until they end). */
    uint64_t churned = jpath_u64(j, "devices.0.offloaded.alloc_count");
    cr_expect_gt(churned, 0, "the other thread offloaded nothing: no race");
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), churned);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 0);
    cr_expect_eq(jpath_u64(d1, "device_total.current_bytes"), 0);
    cr_expect_eq(kv_u64(r.out, "sim.pinned_host.1"), 0);
    cr_expect_eq(kv_u64(r.out, "sim.managed.1"), 0);
    json_decref(j);
    run_free(&r);
}

/* A pool the program made current is its choice, as a pool it names: its requests are neither
 * offloaded nor spilled, and the allocation exports (a review: an exportable pool made current
 * got host memory, and cuMemPoolExportPointer failed). The default pool made current again:
 * offloaded, or spilled, as before. */
Test(offload, a_pool_made_current_is_neither_offloaded_nor_spilled)
{
    struct run_result r;
    const char *offload[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "current_pool", offload);
    cr_expect_eq(kv_u64(r.out, "rc_current"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_export"), 0, "the allocation is the pool's: %s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_default"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.async.peak_bytes"), 4 * MiB);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1, "the default pool's request");
    json_decref(j);
    run_free(&r);
    const char *spill[] = {"CUSHIM_SPILL=on", "CUSHIM_DEVICE_LIMIT=2MiB", NULL};
    j = offload_run(&r, "current_pool", spill);
    cr_expect_eq(kv_u64(r.out, "rc_current"), 2, "cudaErrorMemoryAllocation, not spilled: %s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_default"), 0, "spilled");
    cr_expect_eq(jpath_u64(j, "devices.0.async.failed_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.spill_count"), 1);
    json_decref(j);
    run_free(&r);
}

/* cuMemFreeAsync of offloaded memory that the driver would refuse (no current context: cuda.h,
 * CUDA_ERROR_INVALID_CONTEXT) is refused the same way, nothing freed: before, it was freed and
 * CUDA_SUCCESS returned, and the program's later cudaFree failed (found by a review helper). */
Test(offload, a_refused_async_free_frees_nothing)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "free_async_no_context", extra);
    cr_expect_eq(kv_u64(r.out, "rc_free_async_no_context"), 201 /* CUDA_ERROR_INVALID_CONTEXT */, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_free"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.free_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.current_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

/* Explicit copies the shim makes unified because they touch offloaded memory refuse what the
 * explicit call refuses, with its code (the values a program gets without offload, which the
 * simulated driver gives; found by a review helper). Before: the non-offloaded device side was
 * not bounded (a write 512 KiB past a device allocation succeeded), peer contexts were ignored,
 * and a copy past an offloaded range got CUDA_ERROR_INVALID_VALUE before the driver's own
 * refusal, which left a global capture valid. */
Test(offload, rerouted_copies_refuse_what_the_explicit_ones_refuse)
{
    struct run_result r;
    const char *extra[] = {"CUSHIM_OFFLOAD=always", "CUSHIM_OFFLOAD_MIN=1MiB", NULL};
    json_t *j = offload_run(&r, "reroute_checks", extra);
    cr_expect_eq(jpath_u64(j, "devices.0.offloaded.alloc_count"), 1, "the 2 MiB one is offloaded");
    cr_expect_eq(kv_u64(r.out, "rc_dtod_ok"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_dtod_read_past"), 1 /* CUDA_ERROR_INVALID_VALUE */, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_dtod_write_past"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_dtod_heap"), 1);
    /* Across two VMM mappings back to back: taken, as the explicit call takes it (a first version
     * of the check, one cuMemGetAddressRange, refused it; found by a review helper). */
    cr_expect_eq(kv_u64(r.out, "rc_dtod_across_vmm_mappings"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_dtod_past_vmm_mappings"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_peer_null_dst_ctx"), 201 /* CUDA_ERROR_INVALID_CONTEXT */);
    cr_expect_eq(kv_u64(r.out, "rc_peer_async_null_src_ctx"), 201);
    cr_expect_eq(kv_u64(r.out, "rc_htod_past_no_context"), 201);
    cr_expect_eq(kv_u64(r.out, "rc_2d_past_no_context"), 201 /* CUDA_ERROR_INVALID_CONTEXT */);
    cr_expect_eq(kv_u64(r.out, "rc_3d_past_no_context"), 201);
    cr_expect_eq(kv_u64(r.out, "rc_2d_past"), 1 /* CUDA_ERROR_INVALID_VALUE */);
    cr_expect_eq(kv_u64(r.out, "rc_3d_past"), 1);
    cr_expect_eq(kv_u64(r.out, "rc_htod_async_past_destroyed_stream"), 400 /* CUDA_ERROR_INVALID_HANDLE */);
    cr_expect_eq(kv_u64(r.out, "rc_2d_async_past_destroyed_stream"), 400);
    cr_expect_eq(kv_u64(r.out, "rc_3d_peer_async_past_destroyed_stream"), 400);
    cr_expect_eq(kv_u64(r.out, "rc_3d_peer_async_past"), 1 /* CUDA_ERROR_INVALID_VALUE */);
    cr_expect_eq(kv_u64(r.out, "rc_htod_past_in_capture"), 900 /* CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED */);
    cr_expect_eq(kv_u64(r.out, "rc_end_capture"), 901 /* CUDA_ERROR_STREAM_CAPTURE_INVALIDATED */);
    json_decref(j);
    run_free(&r);
}
