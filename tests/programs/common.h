/* Helpers for the test programs: they use only the CUDA runtime API (plus driver entry points
 * fetched through it), so they run the same on the simulated device and, where noted, on a GPU.
 * Output is "key=value" lines on stdout that the Criterion suites parse. */
#ifndef TEST_PROGRAMS_COMMON_H
#define TEST_PROGRAMS_COMMON_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "%s:%d: %s -> %d (%s)\n", __FILE__, __LINE__, #call, (int)e_,    \
                    cudaGetErrorString(e_));                                                 \
            exit(10);                                                                        \
        }                                                                                    \
    } while (0)

/* The simulated driver's own counters (tests/sim/simcuda.h), found through libcuda.so.1. NULL
 * functions when the driver is not the simulator (a real GPU). */
struct sim_api {
    uint64_t (*live)(int ordinal, int kind);
    uint64_t (*used)(int ordinal);
    uint64_t (*calls)(const char *symbol);
};

static inline struct sim_api sim_api(void)
{
    struct sim_api a = {0};
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        a.live = (uint64_t(*)(int, int))dlsym(h, "simcuda_live_bytes");
        a.used = (uint64_t(*)(int))dlsym(h, "simcuda_used_bytes");
        a.calls = (uint64_t(*)(const char *))dlsym(h, "simcuda_call_count");
    }
    return a;
}

/* Prints sim.<kind>.<ordinal>=bytes for every kind of the first `devices` devices. */
static inline void print_sim(int devices)
{
    static const char *names[] = {"device", "async", "vmm", "array", "managed", "pinned_host",
                                  "registered_host", "graph_used", "graph_reserved", "pool_reserved"};
    struct sim_api a = sim_api();
    if (!a.live)
        return;
    for (int d = 0; d < devices; d++) {
        for (int k = 0; k < 10; k++)
            printf("sim.%s.%d=%llu\n", names[k], d, (unsigned long long)a.live(d, k));
        printf("sim.used.%d=%llu\n", d, (unsigned long long)a.used(d));
    }
}

#include "cushim.h"

/* A driver entry point through the runtime (cudaGetDriverEntryPointByVersion, as PyTorch fetches
 * the VMM API); exits 11 when the driver has none. */
static inline void *entry(const char *name, unsigned version)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    CHECK(cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &st));
    if (!fn) {
        fprintf(stderr, "no driver entry point %s@%u\n", name, version);
        exit(11);
    }
    return fn;
}

/* The virtual memory management entry points (fetched as PyTorch's expandable segments do). */
struct vmm_api {
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
};

static inline struct vmm_api vmm_api(void)
{
    struct vmm_api v = {entry("cuMemCreate", 10020), entry("cuMemRelease", 10020),
                        entry("cuMemAddressReserve", 10020), entry("cuMemMap", 10020),
                        entry("cuMemUnmap", 10020), entry("cuMemGetAllocationGranularity", 10020)};
    return v;
}

/* A stream-ordered pool of device memory on `device`, for cudaMemPoolCreate. */
static inline struct cudaMemPoolProps device_pool_props(int device)
{
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    return props;
}

/* Pinned device memory on `device`, for cuMemCreate. */
static inline CUmemAllocationProp vmm_prop(int device)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
}

/* The cushim.h API, if preloaded. */
static inline void *cushim_fn(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

/* cushim_get_device_stats(ordinal) into *st (its whole size; the rest set to `fill` first):
 * 0, or nonzero when the shim is not preloaded or says no. */
static inline int cushim_stats(int ordinal, struct cushim_device_stats *st, int fill)
{
    int (*get)(int, struct cushim_device_stats *) =
        (int (*)(int, struct cushim_device_stats *))cushim_fn("cushim_get_device_stats");
    memset(st, fill, sizeof *st);
    st->size = sizeof *st;
    return get ? get(ordinal, st) : -1;
}

/* A program's scenarios: `PROGRAM NAME` runs one, then prints the simulated device's counters
 * for its first `devices` devices. */
struct scenario {
    const char *name;
    int (*fn)(void);
    int devices;
};

static inline int scenario_main(int argc, char **argv, const struct scenario *s, size_t n)
{
    for (size_t i = 0; argc == 2 && i < n; i++) {
        if (strcmp(argv[1], s[i].name) != 0)
            continue;
        int rc = s[i].fn();
        print_sim(s[i].devices ? s[i].devices : 1);
        fflush(stdout);
        return rc;
    }
    fprintf(stderr, "usage: %s SCENARIO (one of:", argv[0]);
    int several = 0;
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, " %s%s", s[i].name, s[i].devices > 1 ? "*" : "");
        several |= s[i].devices > 1;
    }
    fprintf(stderr, ")\n%s", several ? "  * needs two devices: on the simulated device, SIMCUDA_DEVICE_COUNT=2\n" : "");
    return 2;
}

/* Waits until the file named by $HOLD_FILE exists (the test's go-ahead), at most 60 s, or until
 * its directory is gone (a test that let it go and removed its directory before it looked). */
static inline void hold(void)
{
    const char *path = getenv("HOLD_FILE");
    char dir[1024] = ".";
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (slash && slash != path)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    for (int i = 0; path && i < 6000 && access(path, F_OK) != 0 && access(dir, F_OK) == 0; i++)
        usleep(10000);
}

/* Announces readiness by creating $READY_DIR/<pid> (written atomically). */
static inline void ready(void)
{
    const char *dir = getenv("READY_DIR");
    char tmp[1024], path[1024];
    if (!dir)
        return;
    snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
    snprintf(tmp, sizeof tmp, "%s/.%d.tmp", dir, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        rename(tmp, path);
    }
}

#endif
