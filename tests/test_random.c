/* Randomized differential test: threads making random allocations and frees of every runtime
 * kind; cushim's summary must equal both what the program holds and the simulated device's own
 * counters, for several seeds. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "harness.h"

static void one_seed(const char *seed)
{
    struct run_result r;
    const char *argv[] = {program("random_prog"), seed, "8", "3000", NULL};
    json_t *j = run_under_cushim(&r, argv, sim_env(NULL));
    cr_assert_eq(r.status, 0, "seed %s: %s", seed, r.err);
    uint64_t dev = kv_u64(r.out, "held.device") + kv_u64(r.out, "held.pitch");
    uint64_t ndev = kv_u64(r.out, "live.device") + kv_u64(r.out, "live.pitch");
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), dev, "seed %s", seed);
    cr_expect_eq(jpath_u64(j, "devices.0.device.current_bytes"), kv_u64(r.out, "sim.device.0"), "seed %s", seed);
    cr_expect_eq(jpath_u64(j, "devices.0.device.alloc_count") - jpath_u64(j, "devices.0.device.free_count"), ndev);
    cr_expect_eq(jpath_u64(j, "devices.0.async.current_bytes"), kv_u64(r.out, "held.async"), "seed %s", seed);
    cr_expect_eq(jpath_u64(j, "devices.0.async.current_bytes"), kv_u64(r.out, "sim.async.0"), "seed %s", seed);
    cr_expect_eq(jpath_u64(j, "devices.0.async.alloc_count") - jpath_u64(j, "devices.0.async.free_count"),
                 kv_u64(r.out, "live.async"));
    cr_expect_eq(jpath_u64(j, "devices.0.pinned_host.current_bytes"), kv_u64(r.out, "held.pinned_host"));
    cr_expect_eq(jpath_u64(j, "devices.0.pinned_host.current_bytes"), kv_u64(r.out, "sim.pinned_host.0"));
    cr_expect_eq(jpath_u64(j, "devices.0.managed.current_bytes"), kv_u64(r.out, "held.managed"));
    cr_expect_eq(jpath_u64(j, "devices.0.managed.current_bytes"), kv_u64(r.out, "sim.managed.0"));
    cr_expect_eq(jpath_u64(j, "devices.0.device_total.current_bytes"), dev + kv_u64(r.out, "held.async"));
    cr_expect_geq(jpath_u64(j, "devices.0.device_total.peak_bytes"), jpath_u64(j, "devices.0.device_total.current_bytes"));
    json_decref(j);
    run_free(&r);
}

Test(random, seeds_1_to_4, .timeout = 300)
{
    const char *seeds[] = {"1", "2", "3", "4"};
    for (unsigned i = 0; i < 4; i++)
        one_seed(seeds[i]);
}
