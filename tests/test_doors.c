/* The three doors and dlsym's transparency (DESIGN.md "Where interception happens"). */
#include <fcntl.h>
#include <criterion/criterion.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

Test(doors, program_linked_to_libcuda)
{
    struct run_result r;
    const char *argv[] = {program("drv_prog"), NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 4096);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 4096 + (1 << 20));
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.device.free_count"), 1);
    json_decref(j);
    run_free(&r);
}

Test(doors, calls_before_cuInit_return_the_driver_result)
{
    struct run_result r;
    const char *argv[] = {program("drv_prog"), "before_init", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(kv_u64(r.out, "rc_alloc"), 3, "CUDA_ERROR_NOT_INITIALIZED");
    cr_expect_eq(kv_u64(r.out, "rc_free"), 3);
    cr_expect_eq(kv_u64(r.out, "rc_info"), 3);
    cr_expect_eq(kv_u64(r.out, "rc_host"), 3);
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 0,
                 "no context: the failure has no device to count on");
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 2);
    json_decref(j);
    run_free(&r);
}

/* After 256 contexts destroyed the shared context cache had no free slot: each stream-ordered
 * allocation on a newer context's stream, from a thread where another context is current, asked
 * the driver (push, cuCtxGetDevice, pop). Forgotten slots are reused now. */
Test(doors, contexts_made_and_destroyed_forever_keep_the_context_cache_working)
{
    struct run_result r;
    const char *argv[] = {program("drv_prog"), "ctx_churn", NULL};
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    /* One: the first allocation's lookup asks the driver, the other 999 find the context cached
     * (every allocation asked with the cache full: 1000). */
    cr_expect_eq(kv_u64(r.out, "churn_pushes"), 1, "%s", r.out);
    /* The contexts of device 0 and 1 in turn; the last, of device 1, in a reused slot. */
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 150);
    cr_expect_eq(jpath_u64(j, "devices.1.device.alloc_count"), 150);
    cr_expect_eq(jpath_u64(j, "devices.1.device.current_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.1.async.alloc_count"), 1000);
    cr_expect_eq(jpath_u64(j, "devices.1.async.free_count"), 1000);
    cr_expect_eq(jpath_u64(j, "devices.1.async.current_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count"), 0);
    json_decref(j);
    run_free(&r);
}

/* A driver-API program whose first lookup of cuCtxGetDevice is at 13000 gets cuCtxGetDevice_v2
 * (CUdevice *, CUcontext): before, door 3 put it in the slot of the cuCtxGetDevice the shim calls
 * with one argument (a garbage context: the allocation on device 1 was counted wrong or not at
 * all). Now each ABI has its own row, and the shim never calls the newer ones. */
Test(doors, a_lookup_of_a_newer_abi_never_reaches_the_shims_own_calls)
{
    struct run_result r;
    const char *argv[] = {program("drv_prog"), "newer_abi", NULL};
    const char *extra[] = {"SIMCUDA_DEVICE_COUNT=2", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(kv_u64(r.out, "rc_lookup_getdevice"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_lookup_sync"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_lookup_stream_sync"), 0);
    cr_expect_eq(kv_u64(r.out, "calls_getdevice_v2"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "calls_sync_v2"), 0);
    cr_expect_eq(kv_u64(r.out, "calls_stream_sync_ptsz"), 0);
    cr_expect_eq(json_array_size(jpath(j, "devices")), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.ordinal"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 1 << 20);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 0);
    json_decref(j);
    run_free(&r);
}

/* "cuGraphInstantiate" looked up at 12000: the real driver answers the five-argument
 * cuGraphInstantiate_v2 (docs/GPU-VALIDATION.md instantiate_lookup, an H200), a driver following
 * cuda.h's `#define cuGraphInstantiate cuGraphInstantiateWithFlags` (since 12.0) the three-argument
 * function (SIMCUDA_INSTANTIATE_LOOKUP=withflags). Door 3 wraps whichever the driver answers. Before,
 * it chose the v2 row for the lookup whatever the answer: the program got the v2 wrapper for
 * WithFlags (its flags taken for an error-node pointer: a crash when the v2 slot was already
 * filled), or the v2 slot got the three-argument function (a later direct cuGraphInstantiate_v2
 * passed its error-node pointer as flags). Both orders, both answers. */
static void instantiate_both_abis(const char *scenario, uint64_t lookup_exec_id, const char *answer)
{
    struct run_result r;
    const char *argv[] = {program("drv_prog"), scenario, NULL};
    char var[64];
    snprintf(var, sizeof var, "SIMCUDA_INSTANTIATE_LOOKUP=%s", answer);
    const char *extra[] = {var, NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s: %s%s", scenario, r.out, r.err);
    cr_expect_eq(kv_u64(r.out, "rc_lookup"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_instantiate"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_launch1"), 0);
    if (strcmp(answer, "v2") == 0)
        cr_expect_eq(kv_u64(r.out, "rc_free_between"), 0, "%s", r.out);
    else
        cr_expect_null(strstr(r.out, "rc_free_between"), "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "rc_launch2"), 0, "AUTO_FREE_ON_LAUNCH (WithFlags) or the free (v2) reached the driver: %s",
                 r.out);
    cr_expect_eq(kv_u64(r.out, "rc_sync"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_exec_destroy"), 0);
    cr_expect_eq(kv_u64(r.out, "rc_v2"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "v2_error_node_cleared"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.instantiated"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.launches"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.graphs.execs_alive"), 0);
    cr_assert_eq(json_array_size(jpath(j, "executable_graphs")), 2);
    for (uint64_t k = 0; k < 2; k++) {
        json_t *e = json_array_get(jpath(j, "executable_graphs"), k);
        cr_expect_eq(json_integer_value(json_object_get(e, "id")), (json_int_t)k + 1);
        cr_expect_eq(json_integer_value(json_object_get(e, "alloc_node_bytes")), 1 << 20);
        cr_expect_eq(json_integer_value(json_object_get(e, "launches")), k + 1 == lookup_exec_id ? 2 : 0);
    }
    json_decref(j);
    run_free(&r);
}

Test(doors, cuGraphInstantiate_looked_up_at_12000_is_the_three_argument_abi)
{
    instantiate_both_abis("instantiate_lookup", 1, "withflags");
}

Test(doors, cuGraphInstantiate_v2_called_first_keeps_its_five_argument_abi)
{
    instantiate_both_abis("instantiate_v2_first", 2, "withflags");
}

Test(doors, cuGraphInstantiate_looked_up_at_12000_as_v2_like_the_real_driver)
{
    instantiate_both_abis("instantiate_lookup", 1, "v2");
    instantiate_both_abis("instantiate_v2_first", 2, "v2");
}

/* dlsym_prog prints what dlsym answers; with the shim it must be the same, line for line. */
static void dlsym_output(char *buf, size_t len, const char *preload)
{
    struct run_result r;
    char pre[2048];
    const char *argv[] = {program("dlsym_prog"), NULL};
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", preload);
    const char *env[] = {preload[0] ? pre : "LD_PRELOAD", NULL};
    run_cmd(&r, argv, env);
    cr_assert_eq(r.status, 0, "dlsym_prog with LD_PRELOAD=%s: %s%s", preload, r.out, r.err);
    snprintf(buf, len, "%s", r.out);
    run_free(&r);
}

Test(doors, dlsym_is_transparent)
{
    char plain[4096], shimmed[4096];
    dlsym_output(plain, sizeof plain, "");
    dlsym_output(shimmed, sizeof shimmed, shim_lib());
    cr_expect_str_eq(shimmed, plain);
    cr_expect(strstr(plain, "next_open_1=__open64@libc.so.6\n") != NULL, "%s", plain);
    cr_expect(strstr(plain, "next_open_2=__open64@libc.so.6\n") != NULL, "%s", plain);
    cr_expect(strstr(plain, "default_cudnnCreate=NULL") != NULL, "%s", plain);
    cr_expect(strstr(plain, "default_no_such_symbol=NULL") != NULL, "%s", plain);
    /* Before, the shim answered its own wrappers with no driver loaded (a probe that said
     * "available", then CUDA_ERROR_NOT_INITIALIZED). */
    cr_expect(strstr(plain, "default_cuMemAlloc_v2=NULL@NULL\ndlerror_cuMemAlloc_v2=set\n") != NULL, "%s", plain);
    cr_expect(strstr(plain, "default_cuGetProcAddress_v2=NULL@NULL\n") != NULL, "%s", plain);
    /* Before, RTLD_NEXT from the program found the shim's export next (calling it returned
     * CUDA_ERROR_NOT_INITIALIZED). */
    cr_expect(strstr(plain, "next_cuMemAlloc_v2=NULL@NULL\ndlerror_next_cuMemAlloc_v2=set\n") != NULL, "%s", plain);
}

/* A library loaded with RTLD_LOCAL (a Python extension module) that links libcuda and looks its
 * functions up with dlsym(RTLD_DEFAULT, ...): glibc searches the caller's scope, where libcuda is.
 * Before, the shim made the lookup itself (its own scope: the global one) and the library got
 * NULL for every driver function the shim does not wrap. Wrapped ones come back wrapped. */
Test(doors, rtld_default_from_a_local_library_finds_its_driver)
{
    char lib[1024];
    snprintf(lib, sizeof lib, "%s", program("libcudauser.so"));
    const char *argv[] = {program("dlsym_prog"), "local", lib, NULL};
    for (int shimmed = 0; shimmed < 2; shimmed++) {
        char pre[1100], ld[1100];
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s", shimmed ? shim_lib() : "");
        snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", sim_libdir());
        const char *env[] = {pre, ld, "CUDA_VISIBLE_DEVICES", NULL}; /* unset: sim_env's rule */
    struct run_result r;
        run_cmd(&r, argv, env);
        cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
        cr_expect_str_eq(r.out, "global_cuInit=NULL\nlocal_default_cuInit=found\n"
                                "local_default_cuDeviceGetCount=found\nlocal_default_cuMemAlloc_v2=found\n"
                                "probe_rc=0\n", "shim %d", shimmed);
        run_free(&r);
    }
}

/* Another dlsym-wrapping interposer (HAMi-style) in front of the shim and behind it: both work,
 * its open() (which uses dlsym(RTLD_NEXT)) does not recurse, and the counts stay exact. */
static void with_interposer(int shim_first)
{
    char pre[4096], lib[2048];
    snprintf(lib, sizeof lib, "%s", program("libinterposer.so"));
    if (shim_first)
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s:%s", shim_lib(), lib);
    else
        snprintf(pre, sizeof pre, "LD_PRELOAD=%s:%s", lib, shim_lib());
    char report[512];
    snprintf(report, sizeof report, "CUSHIM_REPORT=%s/interposer.%d.json", test_dir(), shim_first);
    const char *extra[] = {pre, report, "CUSHIM_REPORT_FORMAT=json", NULL};
    struct run_result r;
    const char *argv[] = {program("rt_prog"), "peaks", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(kv_u64(r.out, "interposer.allocs"), 4, "the interposer saw every cudaMalloc");
    json_t *j = json_load(strchr(report, '=') + 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 4);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 350);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), kv_u64(r.out, "sim.device.0"));
    json_decref(j);
    run_free(&r);

    const char *argv2[] = {program("dlsym_prog"), NULL};
    const char *env2[] = {pre, NULL};
    run_cmd(&r, argv2, env2);
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "open=ok") != NULL, "%s%s", r.out, r.err);
    run_free(&r);
}

Test(doors, interposer_in_front_of_the_shim) { with_interposer(0); }
Test(doors, interposer_behind_the_shim) { with_interposer(1); }

/* LD_PRELOAD naming the shim twice (two builds, or one under two names): the copy loaded first
 * counts, the other passes every call through and says so once: one report, exact counts. */
Test(doors, a_second_copy_of_the_shim_stands_aside)
{
    char copy[700], cmd[1600], pre[2000];
    snprintf(copy, sizeof copy, "%s/copy", test_dir());
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/shim-copy.so", copy, shim_lib(), copy);
    cr_assert_eq(system(cmd), 0);
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s %s/shim-copy.so", shim_lib(), copy);
    const char *extra[] = {pre, "CUSHIM_REPORT=stderr", NULL};
    struct run_result r;
    const char *argv[] = {program("rt_prog"), "peaks", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    int reports = 0;
    for (const char *p = r.err; (p = strstr(p, "cushim: pid ")) != NULL; p++)
        reports++;
    cr_expect_eq(reports, 1, "%s", r.err);
    char said[2000];
    snprintf(said, sizeof said, "] warn: another copy of cushim, %s, was loaded first and counts: this one, "
             "%s/shim-copy.so, passes every call through\n", shim_lib(), copy);
    const char *at = strstr(r.err, said);
    cr_expect(at != NULL && strstr(at + 1, said) == NULL, "said once: %s", r.err);
    cr_expect(strstr(r.err, "\n    device                  350 B        350 B          4          2        0\n") != NULL, "%s", r.err);
    run_free(&r);
}

/* A program that dlopen()s its own copy of the shim while another is preloaded, and sets its phase
 * through that copy's API: the copy forwards it to the counting one. */
Test(doors, the_api_of_a_copy_that_stands_aside_reaches_the_counting_one)
{
    char copy[700], cmd[1600], pre[1000];
    snprintf(copy, sizeof copy, "%s/copy-api", test_dir());
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/shim-copy.so", copy, shim_lib(), copy);
    cr_assert_eq(system(cmd), 0);
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", shim_lib());
    snprintf(copy + strlen(copy), sizeof copy - strlen(copy), "/shim-copy.so");
    const char *extra[] = {pre, NULL};
    struct run_result r;
    const char *argv[] = {program("dlsym_prog"), "copy", copy, NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(kv_i64(r.out, "set_rc"), 0, "%s", r.out);
    cr_expect_eq(kv_i64(r.out, "phase_first"), 1, "the counting copy is in the compile phase: %s", r.out);
    cr_expect_eq(kv_i64(r.out, "phase_copy"), 1, "%s", r.out);
    run_free(&r);
}

/* A library of the program whose constructor allocates runs before the shim's constructor (glibc
 * initializes the program's own libraries before preloaded ones). Before, that first call started
 * the shim with an empty configuration: the segment went to "/" instead of CUSHIM_SEGMENT_DIR,
 * the run got no summary ("no CUDA memory activity"), and CUSHIM_DEVICE_LIMIT was not applied. */
Test(doors, a_cuda_call_before_the_shims_constructor_uses_the_configuration)
{
    struct run_result r;
    const char *argv[] = {program("early_prog"), NULL};
    const char *extra[] = {"CUSHIM_DEVICE_LIMIT=32MiB", "CUSHIM_PHASE=compile", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    /* cushim_get_phase from that constructor said 0 (run) before the configuration was loaded */
    cr_expect_str_eq(r.out, "early_phase=1\nearly_rc=0\nrc_big=2\nrc_free_early=0\n", "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 1 << 20);
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.limit_bytes"), 32 << 20);
    cr_expect(strstr(r.err, "no CUDA memory activity") == NULL, "%s", r.err);
    json_decref(j);
    run_free(&r);
}

/* The first CUDA call, which starts the shim, made by a thread with a cancellation pending: before,
 * the thread was cancelled inside the start (open(2) is a cancellation point), the shim stayed
 * "starting", and every later CUDA call of every thread waited for it for ever. */
Test(doors, a_thread_cancelled_while_starting_the_shim_blocks_nobody)
{
    struct run_result r;
    const char *argv[] = {"timeout", "20", program("drv_prog"), "cancel_start", NULL};
    const char *extra[] = {preload_env(), "CUSHIM_REPORT=stderr", NULL};
    run_cmd(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_str_eq(r.out, "worker_cancelled=1\nrc_main=0\n");
    cr_expect(strstr(r.err, "\n    device               1.00 MiB     1.00 MiB          2          0        0\n"),
              "%s", r.err);
    run_free(&r);
}

/* A lazy driver stub preloaded behind the shim (its cu* functions look the driver's up by handle
 * and forward): the shim's real cuMemAlloc_v2 is the stub's, and the stub's own lookup came back
 * as the shim's wrapper: wrapper and stub called each other until the stack overflowed (SIGSEGV).
 * Now the stub gets the driver's function, and each allocation is counted once. */
Test(doors, a_driver_stub_behind_the_shim_does_not_recurse)
{
    char pre[2100];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s %s", shim_lib(), program("libdriverstub.so"));
    const char *extra[] = {pre, "CUSHIM_REPORT=stderr", NULL};
    /* (the two could also call each other in a loop of tail calls, without end: bounded here) */
    const char *argv[] = {"timeout", "20", program("drv_prog"), NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_str_eq(r.out, "alloc=ok\n");
    cr_expect(strstr(r.err, "\n    device               4.00 KiB     1.00 MiB          2          1        0\n"),
              "%s", r.err);
    run_free(&r);
}

/* cuCtxDetach through the shim's exported symbol (door 1): with the shim counting, the driver is
 * asked once afterwards whether the context ended (and its 4 KiB dropped); with CUSHIM_DISABLE=1
 * nothing is added to what the program calls (before, the question was asked either way). */
Test(doors, cuCtxDetach_asks_the_driver_only_when_counting)
{
    const char *argv[] = {program("drv_prog"), "detach", NULL};
    for (int disabled = 0; disabled < 2; disabled++) {
        const char *extra[] = {preload_env(), "CUSHIM_REPORT=stderr", disabled ? "CUSHIM_DISABLE=1" : NULL, NULL};
    struct run_result r;
        run_cmd(&r, argv, sim_env(extra));
        cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
        cr_expect_str_eq(r.out, disabled ? "rc_detach=0\napi_version_asks=0\n" : "rc_detach=0\napi_version_asks=1\n");
        if (!disabled)
            cr_expect(strstr(r.err, "\n    device                    0 B     4.00 KiB          1          1        0\n"),
                      "%s", r.err);
        run_free(&r);
    }
}

/* The simulated driver's path, and door_prog's output with and without the shim (compared). */
static const char *sim_driver(void)
{
    static char path[1100];
    snprintf(path, sizeof path, "%s/libcuda.so.1", sim_libdir());
    return path;
}

/* door_prog `argv` run plainly on the simulated device: the output the shim must not change. */
static void door_prog_plain(char *out, size_t len, const char *const *argv)
{
    struct run_result r;
    run_cmd(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    snprintf(out, len, "%s", r.out);
    run_free(&r);
}

/* door_prog stub_first under `cushim run`: the same output as without the shim (`expected`), and
 * the driver's allocations counted: 1 MiB and 4 KiB, the 1 MiB freed, no failure. */
static void stub_first(const char *stub, const char *mode, const char *expected)
{
    const char *argv[] = {program("door_prog"), "stub_first", stub, sim_driver(), mode, NULL};
    char plain[2048];
    door_prog_plain(plain, sizeof plain, argv);
    cr_expect_str_eq(plain, expected);
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "%s: %s%s", mode, r.out, r.err);
    cr_expect_str_eq(r.out, expected, "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 2, "%s", mode);
    cr_expect_eq(jpath_u64(j, "devices.0.device.free_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 0);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 4096);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), (1 << 20) + 4096);
    json_decref(j);
    run_free(&r);
}

#define STUB_DRIVER_OK "rc_start=0\nrc_alloc=0\nrc_alloc_small=0\nrc_info=0\nrc_free=0\n"

/* A program that tries a stub libcuda (the toolkit's stubs/libcuda.so: every call returns
 * CUDA_ERROR_STUB_LIBRARY, 34) before the driver, looking up cuMemAlloc_v2 in each. Before, the
 * shim's slot kept the stub's function (first come): the driver's cuMemAlloc_v2 returned 34 for
 * ever; with the stub dlclose()d first, the wrapper called unmapped code (SIGSEGV). Now a stub's
 * function is handed out as it is (the stub's pointer still says 34 afterwards) and the driver's
 * is counted. */
Test(doors, a_stub_libcuda_tried_first_leaves_the_driver_counted)
{
    stub_first(SIM_CUDA_STUB, "again", "stub_init=34\nstub_alloc=34\n" STUB_DRIVER_OK "stub_alloc_again=34\n");
    stub_first(SIM_CUDA_STUB, "close", "stub_init=34\nstub_alloc=34\nstub_close=0\nstub_unloaded=1\n" STUB_DRIVER_OK);
}

/* The same with a hand-made stub that has no cuDriverGetVersion (three functions returning 34):
 * it cannot be told from a tracer or a forwarder (tests/programs/driver_stub.c), so the slot keeps
 * its function (first come) and the driver's cuMemAlloc_v2 is handed out as the wrapper, which
 * calls the stub's (README Limits). The rework that let the driver's take the slot bypassed a
 * tracer looked up first; dlclose()d before the driver is loaded, the stub leaves nothing behind
 * and the driver is counted. */
Test(doors, a_partial_stub_tried_first_keeps_its_slot_until_unloaded)
{
    stub_first(program("libpartialstub.so"), "close", "stub_init=34\nstub_alloc=34\nstub_close=0\nstub_unloaded=1\n" STUB_DRIVER_OK);
    const char *argv[] = {program("door_prog"), "stub_first", program("libpartialstub.so"), sim_driver(), NULL};
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_str_eq(r.out, "stub_init=34\nstub_alloc=34\nrc_start=0\nrc_alloc=34\nrc_alloc_small=34\nrc_info=0\nrc_free=1\n",
                     "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 0);
    json_decref(j);
    run_free(&r);
}

/* A forwarder with cuDriverGetVersion (HAMi-like: it answers like a driver) preloaded behind the
 * shim fills the slot first (a dlsym lookup), then the runtime's cuGetProcAddress offers the
 * driver's own function. The rework handed that out as it was, so every cudaMalloc went
 * uncounted; the slot keeps what the shim's exports stand in front of, and the runtime gets the
 * wrapper (through the forwarder to the driver). */
Test(doors, a_forwarder_behind_the_shim_keeps_the_runtime_counted)
{
    char pre[2100];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s %s", shim_lib(), program("libdriverstubv.so"));
    char report[512];
    snprintf(report, sizeof report, "CUSHIM_REPORT=%s/forwarder.json", test_dir());
    const char *extra[] = {pre, report, "CUSHIM_REPORT_FORMAT=json", NULL};
    const char *argv[] = {"timeout", "20", program("rt_prog"), "lookup_first", NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(strstr(r.out, "lookup=found\n"), r.out, "%s", r.out);
    cr_expect_null(strstr(r.err, "second library"), "%s", r.err);
    json_t *j = json_load(strchr(report, '=') + 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 4);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 350);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 350);
    json_decref(j);
    run_free(&r);
}

/* Forked children walk the loaded objects (dl_iterate_phdr: C++ unwinding) while other threads
 * look driver functions up and close libraries through the doors. The rework's checks called
 * dl_iterate_phdr there, and glibc 2.36 does not reset its lock in a child: 8 of 200 children
 * hung. The shim's calls of it now run under a lock that fork waits for. Bounded: 60 s. */
Test(doors, forked_children_never_hang_in_the_loader, .timeout = 120)
{
    const char *argv[] = {"timeout", "60", program("rt_prog"), "fork_lookups", NULL};
    const char *extra[] = {preload_env(), NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(extra));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_eq(kv_u64(r.out, "children_hung"), 0, "%s", r.out);
    cr_expect_eq(kv_u64(r.out, "children_failed"), 0, "%s", r.out);
    run_free(&r);
}

/* A program that dlclose()s libcuda (it is unloaded) and loads it again at another address, and
 * one that unloads it before it exits. Before, the slots (the program's functions and those the
 * shim calls itself) still pointed into the unloaded image: the second round crashed (SIGSEGV),
 * and so did the exit report. Now the dlclose door finds them again or empties them. */
Test(doors, libcuda_unloaded_and_loaded_again_elsewhere)
{
    for (int close_at_end = 0; close_at_end < 2; close_at_end++) {
        const char *argv[] = {program("door_prog"), "reload", sim_driver(), close_at_end ? "close" : NULL, NULL};
        const char *expected = close_at_end
            ? "round1=0,0,0,0\nclose1=0\nunloaded1=1\nround2=0,0,0,0\nmoved=1\nclose2=0\nunloaded2=1\n"
            : "round1=0,0,0,0\nclose1=0\nunloaded1=1\nround2=0,0,0,0\nmoved=1\n";
        char plain[2048];
        door_prog_plain(plain, sizeof plain, argv);
        cr_expect_str_eq(plain, expected);
    struct run_result r;
        json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
        cr_assert_eq(r.status, 0, "close %d: %s%s", close_at_end, r.out, r.err);
        cr_expect_str_eq(r.out, expected, "%s", r.err);
        cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 2);
        cr_expect_eq(jpath_u64(j, "devices.0.device.free_count"), 2);
        cr_expect_eq(jpath_u64(j, "devices.0.device.failed_count"), 0);
        cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 0);
        cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 2 << 20);
        json_decref(j);
        run_free(&r);
    }
}

/* libcuda unloaded past the dlclose door's name (a library loaded with RTLD_DEEPBIND, whose
 * dlclose binds to glibc's; dlvsym(RTLD_DEFAULT, "dlclose", "GLIBC_2.34")) with 1 MiB still
 * allocated, then the program exits. Before, the exit report called the unloaded driver (SIGSEGV);
 * now the report looks for unloads first, and the versioned dlclose is the door. */
Test(doors, an_unload_the_door_does_not_see_leaves_the_exit_report_whole)
{
    for (int vsym = 0; vsym < 2; vsym++) {
        const char *argv[] = {program("door_prog"), "unload_unseen", sim_driver(), vsym ? "vsym" : "deep",
                              vsym ? NULL : program("libdeepclose.so"), NULL};
        const char *expected = "rc_start=0\nrc_alloc=0\nclose=0\nunloaded=1\n";
        char plain[2048];
        door_prog_plain(plain, sizeof plain, argv);
        cr_expect_str_eq(plain, expected);
        struct run_result r;
        json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
        cr_assert_eq(r.status, 0, "vsym %d: %s%s", vsym, r.out, r.err);
        cr_expect_str_eq(r.out, expected, "%s", r.err);
        cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 1);
        cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), 1 << 20, "kept until exit");
        json_decref(j);
        run_free(&r);
    }
}

/* door_prog deep_runtime / deep_user with `lib`: the 1 MiB counted, the output the same as
 * without the shim. */
static void deep_loaded(const char *scenario, const char *lib)
{
    const char *argv[] = {program("door_prog"), scenario, lib, NULL};
    const char *expected = "rc_alloc=0\nrc_free=0\n";
    char plain[2048];
    door_prog_plain(plain, sizeof plain, argv);
    cr_expect_str_eq(plain, expected);
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_str_eq(r.out, expected, "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 1, "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device.free_count"), 1);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), 1 << 20);
    json_decref(j);
    run_free(&r);
}

/* The runtime loaded with RTLD_DEEPBIND by a program that loads its CUDA libraries itself: its
 * dlsym bound to glibc's, it got the driver's own cuGetProcAddress and nothing was counted (the
 * run said it saw no CUDA memory activity). Found by a trial of frameworks' loading patterns. Now
 * the dlopen door clears the flag for the runtime and the driver. */
Test(doors, a_runtime_loaded_with_deepbind_is_counted)
{
    char runtime[4096];
    snprintf(runtime, sizeof runtime, "%s/libcudart.so.13", sim_libdir());
    deep_loaded("deep_runtime", runtime);
}

/* A plugin linked to the runtime loaded with RTLD_DEEPBIND: the runtime comes in with it, bound
 * the same way, uncounted (README, Limits); the door changes nothing for it: the same output as
 * without the shim. */
Test(doors, a_deepbind_plugin_linked_to_the_runtime_runs_as_without_the_shim)
{
    const char *argv[] = {program("door_prog"), "deep_user", program("libdeepcudauser.so"), NULL};
    char plain[2048];
    door_prog_plain(plain, sizeof plain, argv);
    cr_expect_str_eq(plain, "rc_alloc=0\nrc_free=0\n");
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_expect_str_eq(r.out, plain, "%s", r.err);
    if (j)
        json_decref(j);
    run_free(&r);
}

/* A library loaded by bare name that only the calling program's RUNPATH finds (as the runtime
 * finds libcuda.so.1, or a framework its plugins): glibc's dlopen searches its caller's RUNPATH,
 * so the dlopen door forwards with a tail call; had it made the call itself, the shim would be the
 * caller, with no RUNPATH, and the library would not be found: the program broken. With
 * RTLD_DEEPBIND too (the door reads the mode first). */
Test(doors, a_bare_name_found_through_the_callers_runpath_still_loads)
{
    for (int deep = 0; deep < 2; deep++) {
        const char *argv[] = {program("door_prog"), "bare", "libdeepclose.so", deep ? "deep" : NULL, NULL};
        char plain[2048];
        door_prog_plain(plain, sizeof plain, argv);
        cr_expect_str_eq(plain, "loaded\n", "deep=%d", deep);
    struct run_result r;
        json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
        cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
        cr_expect_str_eq(r.out, "loaded\n", "deep=%d: %s", deep, r.err);
        json_decref(j);
        run_free(&r);
    }
}

/* libcuda loaded RTLD_LOCAL (as the runtime loads it): RTLD_DEFAULT, RTLD_NEXT and the program's
 * own handle do not find its functions, and the error is there to read; its handle does. Before,
 * RTLD_DEFAULT and the program's handle found the wrapped ones (the check asked for libcuda.so.1
 * by name, which finds local loads too) and RTLD_NEXT answered the shim's own export for every
 * wrapped name. The same lines with and without the shim. */
Test(doors, probes_of_a_locally_loaded_driver_find_what_dlsym_finds)
{
    const char *argv[] = {program("dlsym_prog"), "local_driver", sim_driver(), NULL};
    static const char *const names[] = {"cuMemAlloc_v2", "cuGetProcAddress_v2", "cuMemCreate", "cuInit"};
    char expected[2048] = "";
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
        snprintf(expected + strlen(expected), sizeof expected - strlen(expected),
                 "default_%s=NULL,dlerror=set\nnext_%s=NULL,dlerror=set\nprogram_%s=NULL,dlerror=set\n"
                 "handle_%s=found,dlerror=(none)\n", names[i], names[i], names[i], names[i]);
    /* 2: nine libraries preloaded in front of the shim (the rework looked at 8 at most, then let
     * RTLD_NEXT answer the shim's own export: "found") */
    char many[4096];
    snprintf(many, sizeof many, "LD_PRELOAD=libm.so.6 libdl.so.2 librt.so.1 libutil.so.1 libanl.so.1 "
             "libresolv.so.2 libpthread.so.0 libnss_files.so.2 %s %s", program("libdeepclose.so"), shim_lib());
    for (int shimmed = 0; shimmed < 3; shimmed++) {
        const char *extra[] = {shimmed == 2 ? many : shimmed ? preload_env() : "LD_PRELOAD", NULL};
    struct run_result r;
        run_cmd(&r, argv, sim_env(extra));
        cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
        cr_expect_str_eq(r.out, expected, "shim %d", shimmed);
        run_free(&r);
    }
}

/* libcuda loaded RTLD_GLOBAL: RTLD_DEFAULT and RTLD_NEXT (from the program, the shim next) find
 * cuMemAlloc_v2, with no error left to read, and what they answer is counted: 1 MiB through
 * RTLD_NEXT's, 4 KiB through RTLD_DEFAULT's. */
Test(doors, probes_of_a_global_driver_answer_counted_functions)
{
    const char *argv[] = {program("dlsym_prog"), "global_driver", sim_driver(), NULL};
    const char *expected = "default_cuMemAlloc_v2=found,dlerror=(none)\nnext_cuMemAlloc_v2=found,dlerror=(none)\n"
                           "rc_start=0\nrc_alloc_next=0\nrc_alloc_default=0\n";
    struct run_result r;
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_str_eq(r.out, expected, "%s", r.err);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count"), 2);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), (1 << 20) + 4096);
    cr_expect_eq(jpath_u64(j, "devices.0.device.peak_bytes"), (1 << 20) + 4096);
    json_decref(j);
    run_free(&r);
}

/* Copies file `from` to `to` (mode 0755); fails the test when it cannot. */
static void copy_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC), out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    cr_assert(in >= 0 && out >= 0, "copy %s to %s", from, to);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        cr_assert_eq(write(out, buf, (size_t)n), n);
    cr_assert_eq(n, 0);
    close(in);
    close(out);
}

/* door_prog deep_where on `libname` copied into a directory of its own with a copy of the runtime
 * beside it (with that directory for DIRS when `set_dirs`): the runtime the library gets is the
 * one it gets without the shim (`expected`). */
static void deep_where(const char *libname, bool set_dirs, const char *const *env, const char *expected)
{
    const char *dir = fresh_dir(set_dirs ? "where_dirs" : env ? "where_env" : "where");
    char lib[4096], runtime[4096], from[4096];
    snprintf(lib, sizeof lib, "%s/%s", dir, libname);
    snprintf(runtime, sizeof runtime, "%s/libcudart.so.13", dir);
    snprintf(from, sizeof from, "%s/libcudart.so.13", sim_libdir());
    copy_file(program(libname), lib);
    copy_file(from, runtime);
    const char *argv[] = {program("door_prog"), "deep_where", lib, set_dirs ? dir : NULL, NULL};
    struct run_result r;
    run_cmd(&r, argv, sim_env(env));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_str_eq(r.out, expected, "%s", r.out);
    run_free(&r);
    json_t *j = run_under_cushim(&r, argv, sim_env(env));
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect_str_eq(r.out, expected, "%s", r.out);
    if (j)
        json_decref(j);
    run_free(&r);
}

/* A plugin loaded with RTLD_DEEPBIND whose DT_RPATH is "$ORIGIN" (the usual -rpath,$ORIGIN), its
 * runtime beside it: glibc gives it that runtime (RPATH before LD_LIBRARY_PATH). The door took
 * "$ORIGIN" alone for a directory named so, found nothing there and loaded the runtime by name
 * first, from LD_LIBRARY_PATH: the plugin ran on another runtime than without the shim. */
Test(doors, a_deepbind_plugin_gets_the_runtime_its_origin_rpath_names)
{
    deep_where("libdeeporigin.so", false, NULL, "runtime=beside\nrc_alloc=0\nrc_free=0\n");
}

/* A plugin with a DT_RUNPATH loaded with RTLD_DEEPBIND after the program changed LD_LIBRARY_PATH
 * (as Python code that sets os.environ may): ld.so searches the LD_LIBRARY_PATH the program
 * started with, so the plugin gets the runtime found there, not the one in the new directories.
 * The door read the variable as it is now and loaded the runtime from the new directories
 * first. */
Test(doors, a_deepbind_plugin_gets_the_runtime_of_the_starting_library_path)
{
    deep_where("libdeepcudauser.so", true, NULL, "runtime=elsewhere\nrc_alloc=0\nrc_free=0\n");
}

/* A plugin with a DT_RUNPATH that does not hold the runtime, loaded with RTLD_DEEPBIND by a
 * program with a DT_RPATH that does: ld.so does not search the program's RPATH for a library
 * with a RUNPATH, so the plugin gets the runtime from the cache or the default directories (or
 * fails to load where there is none). The door loaded the runtime by name first, itself the
 * caller, with no RUNPATH, so from the program's RPATH: another runtime than without the shim.
 * The door now loads the runtime only from the directories it can search as ld.so does. */
Test(doors, a_deepbind_plugin_gets_no_runtime_from_the_programs_rpath)
{
    const char *dir = fresh_dir("prog_rpath");
    char prog[4096], lib[4096], runtime[4096], from[4096], ld[4096];
    snprintf(prog, sizeof prog, "%s/door_prog_rpath", dir);
    snprintf(lib, sizeof lib, "%s/libdeepcudauser.so", dir);
    snprintf(runtime, sizeof runtime, "%s/libcudart.so.13", dir);
    snprintf(from, sizeof from, "%s/libcudart.so.13", sim_libdir());
    copy_file(program("door_prog_rpath"), prog);
    copy_file(program("libdeepcudauser.so"), lib);
    copy_file(from, runtime);
    /* The simulated driver only: no runtime on LD_LIBRARY_PATH. */
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s/stub", sim_libdir());
    const char *extra[] = {ld, NULL};
    const char *argv[] = {prog, "deep_where", lib, NULL};
    struct run_result plain, r;
    run_cmd(&plain, argv, sim_env(extra));
    cr_expect(strstr(plain.out, "runtime=beside") == NULL, "%s", plain.out);
    json_t *j = run_under_cushim(&r, argv, sim_env(extra));
    cr_expect_str_eq(r.out, plain.out, "%s", r.out);
    if (j)
        json_decref(j);
    run_free(&r);
    run_free(&plain);
}

/* LD_LIBRARY_PATH with an empty entry (":DIR", as `export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:DIR`
 * makes where it was unset): ld.so takes it for the working directory, and finds a plugin's
 * runtime there first. The door skipped the entry and loaded the runtime of the next one
 * first: another runtime than without the shim. */
Test(doors, a_deepbind_plugin_gets_the_runtime_an_empty_library_path_entry_names)
{
    char ld[4096];
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=:%s", sim_libdir());
    const char *env[] = {ld, NULL};
    deep_where("libdeepcudauser.so", false, env, "runtime=beside\nrc_alloc=0\nrc_free=0\n");
}
