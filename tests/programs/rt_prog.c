/* rt_prog SCENARIO: CUDA runtime API programs with known allocations, for the summary tests
 * (tests/test_core.c). Built twice: against the shared and the static simulated runtime.
 * Each scenario prints "key=value" lines, ending with the simulated device's own counters. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <malloc.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)

static int scenario_malloc(void)
{
    void *a, *b, *c, *d;
    CHECK(cudaMalloc(&a, 1));
    CHECK(cudaMalloc(&b, 255));
    CHECK(cudaMalloc(&c, MiB));
    CHECK(cudaMalloc(&d, GiB));
    CHECK(cudaFree(b));
    CHECK(cudaFree(d));
    CHECK(cudaFree(NULL));
    return 0;
}

/* The second allocation's driver call raises SIGUSR1 (SIMCUDA_INJECT=cuMemAlloc_v2:2:raise=N),
 * whose handler ends the process: an exit() from inside a CUDA call. */
static void exit_from_handler(int sig)
{
    (void)sig;
    exit(0);
}

static int scenario_exit_in_call(void)
{
    void *a, *b;
    signal(SIGUSR1, exit_from_handler);
    CHECK(cudaMalloc(&a, MiB));
    CHECK(cudaMalloc(&b, 2 * MiB));
    return 1; /* not reached: the handler exits */
}

/* A handler that jumps out of a CUDA call (SIMCUDA_INJECT=cuMemAlloc_v2:2:raise=N,
 * cuMemAlloc_v2:5:raise=N, ...:8:..., ...:11:...): the 2nd allocation is left with siglongjmp, the
 * 5th with longjmp, the 8th with _longjmp, the 11th with __longjmp_chk (what _FORTIFY_SOURCE
 * builds call); after each the thread goes on allocating, from a deeper frame than the call it
 * left. */
extern void __longjmp_chk(sigjmp_buf env, int val) __attribute__((noreturn));
static sigjmp_buf jump_target;
static volatile sig_atomic_t jump_kind;
static void jump_from_handler(int sig)
{
    (void)sig;
    switch (jump_kind) {
    case 0:
        siglongjmp(jump_target, 1);
    case 1:
        longjmp(jump_target, 1);
    case 2:
        _longjmp(jump_target, 1);
    default:
        __longjmp_chk(jump_target, 1);
    }
}

static __attribute__((noinline)) void *allocate_deeper(size_t bytes, int depth)
{
    char pad[512]; /* a deeper frame */
    pad[0] = (char)depth;
    __asm__ volatile("" : : "r"(pad) : "memory");
    if (depth > 0)
        return allocate_deeper(bytes, depth - 1);
    void *p = NULL;
    CHECK(cudaMalloc(&p, bytes));
    return p;
}

static int scenario_jump_out_of_call(void)
{
    void *kept[4], *b;
    struct sigaction sa = {.sa_handler = jump_from_handler, .sa_flags = SA_NODEFER};
    sigaction(SIGUSR1, &sa, NULL);
    for (jump_kind = 0; jump_kind < 4; jump_kind++) {
        CHECK(cudaMalloc(&kept[jump_kind], MiB)); /* the 1st, 4th, 7th, 10th allocation */
        if (sigsetjmp(jump_target, 1) == 0) {
            (void)cudaMalloc(&b, 64 * MiB); /* raises: the handler jumps */
            return 1;
        }
        void *p = allocate_deeper(2 * MiB, 4 + jump_kind);
        CHECK(cudaFree(p));
    }
    CHECK(cudaFree(kept[0]));
    printf("jumped=%d\n", (int)jump_kind);
    return 0;
}

static int scenario_pitch(void)
{
    void *p;
    size_t pitch = 0;
    CHECK(cudaMallocPitch(&p, &pitch, 1000, 10));
    printf("pitch=%zu\n", pitch);
    return 0;
}

static int scenario_host(void)
{
    void *a, *b;
    CHECK(cudaMallocHost(&a, 4096));
    CHECK(cudaHostAlloc(&b, 8192, cudaHostAllocMapped));
    CHECK(cudaFreeHost(a));
    void *mem = aligned_alloc(4096, 65536);
    CHECK(cudaHostRegister(mem, 65536, cudaHostRegisterDefault));
    CHECK(cudaHostUnregister(mem));
    free(mem);
    return 0;
}

static int scenario_managed(void)
{
    void *m;
    CHECK(cudaMallocManaged(&m, 3 * MiB, cudaMemAttachGlobal));
    return 0;
}

static int scenario_async(void)
{
    cudaStream_t s;
    void *a, *b, *c;
    cudaMemPool_t pool;
    struct cudaMemPoolProps props = device_pool_props(0);
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocAsync(&a, MiB, s));
    CHECK(cudaMallocAsync(&b, 2 * MiB, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaMallocFromPoolAsync(&c, 4 * MiB, pool, s));
    CHECK(cudaStreamSynchronize(s));
    /* The pools' own figures, summed over the default pool and the created one. */
    cudaMemPool_t def;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    static const struct {
        enum cudaMemPoolAttr attr;
        const char *name;
    } attrs[] = {{cudaMemPoolAttrReservedMemCurrent, "reserved"}, {cudaMemPoolAttrReservedMemHigh, "reserved_high"},
                 {cudaMemPoolAttrUsedMemCurrent, "used"}, {cudaMemPoolAttrUsedMemHigh, "used_high"}};
    for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
        uint64_t x = 0, y = 0;
        CHECK(cudaMemPoolGetAttribute(def, attrs[i].attr, &x));
        CHECK(cudaMemPoolGetAttribute(pool, attrs[i].attr, &y));
        printf("sim.pools.%s=%llu\n", attrs[i].name, (unsigned long long)(x + y));
    }
    /* Through cushim.h after cudaMemGetInfo (which reads the pools): version 2 fields, and a
     * caller that knows only version 1's size gets nothing past it. */
    int (*get)(int, struct cushim_device_stats *) =
        (int (*)(int, struct cushim_device_stats *))cushim_fn("cushim_get_device_stats");
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    struct cushim_device_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (!get || get(0, &st) != 0)
        return 21;
    printf("api.version=%u\napi.pools.reserved=%llu\napi.pools.reserved_high=%llu\napi.pools.used=%llu\n"
           "api.pools.used_high=%llu\napi.pools.sampled=%d\n", st.version,
           (unsigned long long)st.async_pool_reserved_current_bytes, (unsigned long long)st.async_pool_reserved_high_bytes,
           (unsigned long long)st.async_pool_used_current_bytes, (unsigned long long)st.async_pool_used_high_bytes,
           st.async_pool_sampled_ns != 0);
    printf("api.untracked.sampled=%d\napi.graph_pool.sampled=%d\napi.graph_pool.reserved=%llu\n",
           st.untracked_sampled_ns != 0, st.graph_pool_sampled_ns != 0,
           (unsigned long long)st.graph_pool_reserved_current_bytes);
    /* A version 2 caller: nothing written past its size. */
    memset(&st, 0xab, sizeof st);
    st.size = offsetof(struct cushim_device_stats, untracked_sampled_ns);
    if (get(0, &st) != 0)
        return 23;
    printf("api.v2.untouched=%d\napi.v2.sampled=%d\n", st.untracked_sampled_ns == 0xababababababababull,
           st.async_pool_sampled_ns != 0);
    memset(&st, 0xab, sizeof st);
    st.size = offsetof(struct cushim_device_stats, async_pool_used_current_bytes);
    if (get(0, &st) != 0)
        return 22;
    printf("api.v1.untouched=%d\napi.v1.total=%llu\n", st.async_pool_used_current_bytes == 0xababababababababull,
           (unsigned long long)st.device_total_current_bytes);
    return 0;
}

static int scenario_vmm(void)
{
    CHECK(cudaFree(NULL));
    struct vmm_api v = vmm_api();
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g = 0;
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
        return 12;
    CUmemGenericAllocationHandle h1, h2;
    CUdeviceptr va;
    if (v.create(&h1, g, &prop, 0) || v.create(&h2, 2 * g, &prop, 0) || v.reserve(&va, 4 * g, 0, 0, 0) ||
        v.map(va, g, 0, h1, 0) || v.map(va + g, 2 * g, 0, h2, 0))
        return 13;
    /* Released before unmapped: the memory lives until the unmap (cuda.h, cuMemRelease). */
    if (v.release(h1))
        return 14;
    printf("after_release_vmm=%llu\n", (unsigned long long)sim_api().live(0, 2));
    if (v.unmap(va, g))
        return 15;
    printf("granularity=%zu\n", g);
    return 0;
}

/* Handles released on three threads while the main thread makes, checks and releases its own:
 * a driver that gives a freed handle's value to the next cuMemCreate (glibc reuses the
 * simulator's handle memory with GLIBC_TUNABLES=glibc.malloc.tcache_count=0 and
 * MALLOC_ARENA_MAX=1) must not have the shim count the new handle freed. The workers release
 * half their handles while mapped, so that the unmap frees them. ROUNDS main-thread handles
 * (default 20000); prints uncounted=<rounds in which the main thread's live 8 MiB handle was not
 * in the device's current bytes> and busy=<rounds whose reading found the counters changing for
 * 200 ms, cushim.h's -3, and was made again: on a loaded machine the workers can keep them busy>. */
static struct vmm_api race_vmm;
static atomic_bool race_stop;

static void *vmm_race_worker(void *arg)
{
    (void)arg;
    CUmemAllocationProp prop = vmm_prop(0);
    CUdeviceptr va;
    CHECK(cudaSetDevice(0));
    if (race_vmm.reserve(&va, 2 << 20, 0, 0, 0))
        exit(13);
    for (unsigned i = 0; !atomic_load(&race_stop); i++) {
        CUmemGenericAllocationHandle h;
        if (race_vmm.create(&h, 2 << 20, &prop, 0))
            continue;
        if (i & 1) {
            if (race_vmm.map(va, 2 << 20, 0, h, 0) || race_vmm.release(h) || race_vmm.unmap(va, 2 << 20))
                exit(14);
        } else if (race_vmm.release(h)) {
            exit(14);
        }
    }
    return NULL;
}

/* One cuMemUnmap of UNMAP_RACE_N contiguous mappings (more than the shim's stack batch of 64)
 * while another thread maps the last page again as soon as the driver lets it (cuda.h cuMemUnmap:
 * the range becomes "an address reservation" when the call returns), then unmaps it; 600
 * rounds. After each round the vmm figure must be what it was before (a review: mappings past
 * the first 64 were settled after the call, and took the racing mapping's count with them).
 * Prints rounds_off=N. */
#define UNMAP_RACE_N 100
static struct vmm_api race_vmm;
static CUdeviceptr race_base;
static size_t race_gran;
static CUmemAllocationProp race_prop;
static CUcontext race_ctx;
static atomic_int race_phase; /* 0 idle, 1 go, 2 done, 3 stop */

static void *unmap_racer(void *arg)
{
    (void)arg;
    PFN_cuCtxSetCurrent_v4000 set_current = entry("cuCtxSetCurrent", 4000);
    if (set_current(race_ctx) != CUDA_SUCCESS)
        return (void *)1;
    for (;;) {
        int ph;
        while ((ph = atomic_load(&race_phase)) == 0 || ph == 2)
            sched_yield();
        if (ph == 3)
            return NULL;
        CUmemGenericAllocationHandle h;
        if (race_vmm.create(&h, race_gran, &race_prop, 0) != CUDA_SUCCESS)
            return (void *)1;
        CUdeviceptr last = race_base + (UNMAP_RACE_N - 1) * race_gran;
        while (race_vmm.map(last, race_gran, 0, h, 0) != CUDA_SUCCESS)
            sched_yield();
        if (race_vmm.release(h) != CUDA_SUCCESS || race_vmm.unmap(last, race_gran) != CUDA_SUCCESS)
            return (void *)1;
        atomic_store(&race_phase, 2);
    }
}

static int scenario_vmm_unmap_race(void)
{
    race_vmm = vmm_api();
    PFN_cuCtxGetCurrent_v4000 get_current = entry("cuCtxGetCurrent", 4000);
    CHECK(cudaFree(0));
    if (get_current(&race_ctx) != CUDA_SUCCESS)
        return 2;
    race_prop = vmm_prop(0);
    if (race_vmm.granularity(&race_gran, &race_prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
        race_vmm.reserve(&race_base, UNMAP_RACE_N * race_gran, 0, 0, 0) != CUDA_SUCCESS)
        return 3;
    pthread_t t;
    if (pthread_create(&t, NULL, unmap_racer, NULL) != 0)
        return 4;
    int off = 0;
    for (int round = 0; round < 600; round++) {
        struct cushim_device_stats before, after;
        if (cushim_stats(0, &before, 0) != 0) /* no activity on the device yet: none counted */
            memset(&before, 0, sizeof before);
        for (int i = 0; i < UNMAP_RACE_N; i++) {
            CUmemGenericAllocationHandle h;
            if (race_vmm.create(&h, race_gran, &race_prop, 0) != CUDA_SUCCESS ||
                race_vmm.map(race_base + i * race_gran, race_gran, 0, h, 0) != CUDA_SUCCESS ||
                race_vmm.release(h) != CUDA_SUCCESS)
                return 6;
        }
        atomic_store(&race_phase, 1);
        if (race_vmm.unmap(race_base, UNMAP_RACE_N * race_gran) != CUDA_SUCCESS)
            return 7;
        while (atomic_load(&race_phase) != 2)
            sched_yield();
        atomic_store(&race_phase, 0);
        if (cushim_stats(0, &after, 0) != 0)
            return 8;
        off += after.kind[CUSHIM_MEM_VMM].current_bytes != before.kind[CUSHIM_MEM_VMM].current_bytes;
    }
    atomic_store(&race_phase, 3);
    void *rc;
    pthread_join(t, &rc);
    printf("rounds_off=%d\nracer=%d\n", off, rc != NULL);
    return 0;
}

static int scenario_vmm_release_race(void)
{
    CHECK(cudaFree(NULL));
    race_vmm = vmm_api();
    if (!cushim_fn("cushim_get_device_stats"))
        return 12;
    const char *rounds_s = getenv("ROUNDS");
    long rounds = rounds_s ? atol(rounds_s) : 20000, uncounted = 0, busy = 0;
    CUmemAllocationProp prop = vmm_prop(0);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, vmm_race_worker, NULL);
    for (long i = 0; i < rounds; i++) {
        CUmemGenericAllocationHandle h;
        if (race_vmm.create(&h, 8 << 20, &prop, 0))
            return 13;
        struct cushim_device_stats st;
        int rc;
        while ((rc = cushim_stats(0, &st, 0)) == -3)
            busy++;
        uncounted += rc != 0 || st.device_total_current_bytes < (8u << 20);
        if (race_vmm.release(h))
            return 14;
    }
    atomic_store(&race_stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("rounds=%ld\nuncounted=%ld\nbusy=%ld\n", rounds, uncounted, busy);
    return 0;
}

/* Failed releases and unmaps undo exactly what they took: a second cuMemRelease of a released
 * handle still mapped (the driver refuses it), then a cuMemUnmap of a range holding the handle
 * twice that fails (SIMCUDA_INJECT=cuMemUnmap:1:...), then the unmap that works. Prints the
 * device's current bytes (cushim.h) after each step. */
static int scenario_vmm_undo(void)
{
    CHECK(cudaFree(NULL));
    struct vmm_api v = vmm_api();
    uint64_t (*current)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g = 0;
    CUmemGenericAllocationHandle h, k;
    CUdeviceptr va, vb;
    if (!current || v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || v.create(&h, g, &prop, 0) ||
        v.create(&k, g, &prop, 0) || v.reserve(&va, g, 0, 0, 0) || v.reserve(&vb, 2 * g, 0, 0, 0) ||
        v.map(va, g, 0, h, 0) || v.map(vb, g, 0, k, 0) || v.map(vb + g, g, 0, k, 0))
        return 13;
    if (v.release(h) || v.release(k))
        return 14;
    printf("released=%llu\n", (unsigned long long)current(0));
    printf("second_release_rc=%d\n", (int)v.release(h));
    printf("after_second_release=%llu\n", (unsigned long long)current(0));
    if (v.unmap(va, g))
        return 15;
    printf("after_unmap=%llu\n", (unsigned long long)current(0));
    printf("failed_unmap_rc=%d\n", (int)v.unmap(vb, 2 * g)); /* the injected failure */
    printf("after_failed_unmap=%llu\n", (unsigned long long)current(0));
    if (v.unmap(vb, 2 * g))
        return 16;
    printf("after_unmaps=%llu\n", (unsigned long long)current(0));
    printf("granularity=%zu\n", g);
    return 0;
}

static int scenario_array(void)
{
    PFN_cuArrayCreate_v3020 create = entry("cuArrayCreate", 3020);
    PFN_cuArrayDestroy_v2000 destroy = entry("cuArrayDestroy", 2000);
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 256, .Height = 256, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    CUarray a, b;
    CHECK(cudaFree(NULL));
    if (create(&a, &d) || create(&b, &d) || destroy(a))
        return 13;
    return 0;
}

/* Arrays of packed and block-compressed formats, a layered mipmapped array, and sparse /
 * deferred-mapping arrays (no memory of their own). */
static int scenario_array_formats(void)
{
    PFN_cuArray3DCreate_v3020 create = entry("cuArray3DCreate", 3020);
    PFN_cuMipmappedArrayCreate_v5000 create_mipmapped = entry("cuMipmappedArrayCreate", 5000);
    CUDA_ARRAY3D_DESCRIPTOR d[] = {
        {.Width = 100, .Format = CU_AD_FORMAT_UNORM_INT8X4, .NumChannels = 4},
        {.Width = 100, .Height = 10, .Format = CU_AD_FORMAT_SNORM_INT16X2, .NumChannels = 2},
        {.Width = 16, .Height = 16, .Format = CU_AD_FORMAT_UNORM_INT_101010_2, .NumChannels = 4},
        {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1, .Flags = CUDA_ARRAY3D_SPARSE},
        {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1, .Flags = CUDA_ARRAY3D_DEFERRED_MAPPING},
        {.Width = 10, .Height = 6, .Format = CU_AD_FORMAT_BC1_UNORM, .NumChannels = 4},
        {.Width = 4, .Height = 4, .Format = CU_AD_FORMAT_BC4_SNORM, .NumChannels = 1},
    };
    CUarray a;
    CUmipmappedArray m;
    CHECK(cudaFree(NULL));
    for (unsigned i = 0; i < sizeof d / sizeof d[0]; i++)
        if (create(&a, &d[i]))
            return 13;
    CUDA_ARRAY3D_DESCRIPTOR layered = {.Width = 64, .Height = 64, .Depth = 4, .Format = CU_AD_FORMAT_FLOAT,
                                       .NumChannels = 1, .Flags = CUDA_ARRAY3D_LAYERED};
    if (create_mipmapped(&m, &layered, 3))
        return 14;
    /* 20 levels asked of a 1024 x 1024 array: clamped to 11. */
    CUDA_ARRAY3D_DESCRIPTOR big = {.Width = 1024, .Height = 1024, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    if (create_mipmapped(&m, &big, 20))
        return 15;
    /* 12 levels of 16 x 16 with 2048 layers: 5 (the layer count is not a dimension). */
    CUDA_ARRAY3D_DESCRIPTOR deep = {.Width = 16, .Height = 16, .Depth = 2048, .Format = CU_AD_FORMAT_FLOAT,
                                    .NumChannels = 1, .Flags = CUDA_ARRAY3D_LAYERED};
    if (create_mipmapped(&m, &deep, 12))
        return 16;
    /* BC7, 3 levels of 16 x 16 (the last a single partial block of 4 x 4). */
    CUDA_ARRAY3D_DESCRIPTOR bc7 = {.Width = 16, .Height = 16, .Format = CU_AD_FORMAT_BC7_UNORM, .NumChannels = 4};
    if (create_mipmapped(&m, &bc7, 3))
        return 17;
    print_sim(1);
    return 0;
}

/* VMM across devices (run with SIMCUDA_DEVICE_COUNT=2): a handle made on device 1, exported and
 * imported again while device 0 is current, and mapped; a create naming a device that does not
 * exist. */
static int scenario_vmm_devices(void)
{
    struct vmm_api v = vmm_api();
    PFN_cuMemExportToShareableHandle_v10020 export_ = entry("cuMemExportToShareableHandle", 10020);
    PFN_cuMemImportFromShareableHandle_v10020 import_ = entry("cuMemImportFromShareableHandle", 10020);
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(NULL));
    CUmemAllocationProp prop = vmm_prop(1);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g;
    CUmemGenericAllocationHandle h, imported, none;
    CUdeviceptr va;
    int fd = -1;
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || v.create(&h, g, &prop, 0) ||
        export_(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ||
        import_(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        v.reserve(&va, g, 0, 0, 0) || v.map(va, g, 0, imported, 0))
        return 13;
    CUmemAllocationProp nowhere = vmm_prop(5);
    printf("rc_create_device_5=%d\n", (int)v.create(&none, g, &nowhere, 0));
    printf("granularity=%zu\n", g);
    return 0;
}

/* Host-located cuMemCreate from a thread with no current context (cuda.h cuMemCreate's memory
 * is "not associated with any CUDA context"; the location id "is ignored for HOST
 * allocations"): 2 granules made, then released. Prints rc_create, rc_release. */
static struct vmm_api host_vmm;
static void *host_create_without_context(void *arg)
{
    (void)arg;
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    size_t g;
    CUmemGenericAllocationHandle h;
    if (host_vmm.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
        return (void *)1;
    int rc = (int)host_vmm.create(&h, 2 * g, &prop, 0);
    printf("rc_create=%d\ngranularity=%zu\n", rc, g);
    printf("rc_release=%d\n", rc == 0 ? (int)host_vmm.release(h) : -1);
    return NULL;
}

static int scenario_vmm_host_no_context(void)
{
    host_vmm = vmm_api();
    pthread_t t;
    void *rc;
    if (pthread_create(&t, NULL, host_create_without_context, NULL) != 0 || pthread_join(t, &rc) != 0 || rc)
        return 2;
    return 0;
}

/* A pool that keeps freed memory (release threshold UINT64_MAX): 4 MiB allocated and freed, then
 * cudaMemPoolTrimTo(0) (PyTorch's empty_cache on its cudaMallocAsync backend) and a reset of the
 * reserve's high-water mark; what cushim.h says after each. */
/* A stream and a pool of device 0 that keeps what is freed to it (release threshold UINT64_MAX). */
static cudaMemPool_t keeping_pool(cudaStream_t *s)
{
    struct cudaMemPoolProps props = device_pool_props(0);
    uint64_t keep = UINT64_MAX;
    cudaMemPool_t pool;
    CHECK(cudaStreamCreate(s));
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    return pool;
}

static int scenario_pool_trim(void)
{
    cudaStream_t s;
    uint64_t zero = 0;
    void *a;
    cudaMemPool_t pool = keeping_pool(&s);
    CHECK(cudaMallocFromPoolAsync(&a, 4 * MiB, pool, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    struct cushim_device_stats st;
    if (cushim_stats(0, &st, 0) != 0)
        return 2;
    printf("kept.reserved=%llu\nkept.reserved_high=%llu\n", (unsigned long long)st.async_pool_reserved_current_bytes,
           (unsigned long long)st.async_pool_reserved_high_bytes);
    CHECK(cudaMemPoolTrimTo(pool, 0));
    if (cushim_stats(0, &st, 0) != 0)
        return 3;
    printf("trimmed.reserved=%llu\ntrimmed.reserved_high=%llu\n", (unsigned long long)st.async_pool_reserved_current_bytes,
           (unsigned long long)st.async_pool_reserved_high_bytes);
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
    if (cushim_stats(0, &st, 0) != 0)
        return 4;
    printf("reset.reserved_high=%llu\n", (unsigned long long)st.async_pool_reserved_high_bytes);
    uint64_t x = 0;
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &x));
    printf("sim.reserved_high=%llu\n", (unsigned long long)x);
    return 0;
}

/* A reset of a pool's high-water mark racing readings of the pools on another thread (its
 * cudaMemGetInfo): a reading begun before the reset must not leave the old mark in the figures.
 * Each round: 8 MiB from the pool and back, trimmed, RESERVED_MEM_HIGH reset; the other thread
 * held still; a reading of this thread's own; the shim's mark against the pool's. Prints
 * race.stuck (rounds they differed) of race.rounds (ROUNDS, default 1000; a review: 15 to 20 in
 * 100 at first), and race.overlapped (rounds whose reset returned with the other thread in a
 * reading: the race happened). */
static _Atomic int race_state, race_in; /* state: 0 read, 1 stop, 2 hold still */

static void *race_reader(void *arg)
{
    (void)arg;
    while (atomic_load(&race_state) != 1) {
        size_t f, t;
        atomic_store(&race_in, 1);
        cudaMemGetInfo(&f, &t);
        atomic_store(&race_in, 0);
        while (atomic_load(&race_state) == 2)
            ;
    }
    return NULL;
}

static int scenario_high_reset_race(void)
{
    cudaStream_t s;
    uint64_t zero = 0;
    void *a;
    pthread_t t;
    cudaMemPool_t pool = keeping_pool(&s);
    if (pthread_create(&t, NULL, race_reader, NULL) != 0)
        return 2;
    const char *rounds_s = getenv("ROUNDS");
    int stuck = 0, overlapped = 0, rounds = rounds_s ? atoi(rounds_s) : 1000;
    for (int i = 0; i < rounds; i++) {
        CHECK(cudaMallocFromPoolAsync(&a, 8 * MiB, pool, s));
        CHECK(cudaFreeAsync(a, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemPoolTrimTo(pool, 0));
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
        overlapped += atomic_load(&race_in); /* the reader in a reading as the reset returned */
        atomic_store(&race_state, 2);
        while (atomic_load(&race_in))
            ;
        size_t f, tot;
        uint64_t mark = 0;
        struct cushim_device_stats st;
        CHECK(cudaMemGetInfo(&f, &tot));
        CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &mark));
        if (cushim_stats(0, &st, 0) != 0)
            return 3;
        stuck += st.async_pool_reserved_high_bytes != mark;
        atomic_store(&race_state, 0);
    }
    atomic_store(&race_state, 1);
    pthread_join(t, NULL);
    printf("race.stuck=%d\nrace.rounds=%d\nrace.overlapped=%d\n", stuck, rounds, overlapped);
    return 0;
}

/* Pools made current and destroyed on two threads while two others ask for the current pool
 * (cuDeviceGetMemPool): a pool handed out as its destroy ran must not stay among the pools the
 * shim reads (a stress trial: every later reading failed on it, its figures frozen, with a warning).
 * Then a reading of this thread's own; prints whether it was made (got.read_now), and whether the
 * getters were handed a made pool at all (got.made: the race overlapped). ROUNDS pools per
 * destroying thread (default 500). */
static _Atomic int getters_stop;
static _Atomic long getters_made; /* handles got that were a made pool's, not the default's */
static cudaMemPool_t default_pool;

static void *pool_destroyer(void *arg)
{
    (void)arg;
    cudaStream_t s;
    struct cudaMemPoolProps props = device_pool_props(0);
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreate(&s));
    const char *rounds_s = getenv("ROUNDS");
    long rounds = rounds_s ? atol(rounds_s) : 500;
    for (long i = 0; i < rounds; i++) {
        cudaMemPool_t pool;
        void *x;
        CHECK(cudaMemPoolCreate(&pool, &props));
        CHECK(cudaDeviceSetMemPool(0, pool));
        CHECK(cudaMallocAsync(&x, MiB, s));
        CHECK(cudaFreeAsync(x, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemPoolDestroy(pool));
    }
    return NULL;
}

static void *pool_getter(void *arg)
{
    (void)arg;
    PFN_cuDeviceGetMemPool_v11020 get = entry("cuDeviceGetMemPool", 11020);
    CHECK(cudaSetDevice(0));
    while (!atomic_load(&getters_stop)) {
        CUmemoryPool p;
        if (get(&p, 0) != CUDA_SUCCESS)
            abort();
        if (p != (CUmemoryPool)default_pool)
            atomic_fetch_add(&getters_made, 1);
    }
    return NULL;
}

static int scenario_pool_got_destroyed(void)
{
    pthread_t d[2], g[2];
    CHECK(cudaFree(NULL));
    CHECK(cudaDeviceGetDefaultMemPool(&default_pool, 0));
    for (int i = 0; i < 2; i++)
        if (pthread_create(&d[i], NULL, pool_destroyer, NULL) || pthread_create(&g[i], NULL, pool_getter, NULL))
            return 2;
    for (int i = 0; i < 2; i++)
        pthread_join(d[i], NULL);
    atomic_store(&getters_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(g[i], NULL);
    size_t f, t;
    struct timespec before;
    struct cushim_device_stats st;
    clock_gettime(CLOCK_REALTIME, &before);
    CHECK(cudaMemGetInfo(&f, &t));
    if (cushim_stats(0, &st, 0) != 0)
        return 3;
    uint64_t ns = (uint64_t)before.tv_sec * 1000000000ull + (uint64_t)before.tv_nsec;
    printf("got.read_now=%d\ngot.made=%d\n", st.async_pool_sampled_ns >= ns, atomic_load(&getters_made) > 0);
    return 0;
}

/* Bytes of the process's anonymous mappings that are not the heap or a stack: where the shim's
 * tables live (its arena maps them), and nothing else of this program's. */
static uint64_t anonymous_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    uint64_t sum = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, inode;
        char perms[8], path[256] = "";
        if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %255s", &lo, &hi, perms, &inode, path) >= 4 &&
            inode == 0 && path[0] == 0 && perms[0] == 'r' && perms[1] == 'w')
            sum += hi - lo;
    }
    if (f)
        fclose(f);
    return sum;
}

/* Pools made and destroyed forever, the driver handing out a new handle value each time (a block
 * the size of the destroyed pool's is kept, so the simulated driver's next pool cannot reuse its
 * address): the shim's memory for them stays bounded (a soak trial: one tombstone per pool
 * destroyed, never dropped). Prints the anonymous mappings' growth over the last cycles. */
static int scenario_pool_churn(void)
{
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    uint64_t before = 0;
    CHECK(cudaFree(NULL));
    for (int i = 0; i < 24000; i++) {
        if (i == 4000)
            before = anonymous_mapped();
        cudaMemPool_t pool;
        CHECK(cudaMemPoolCreate(&pool, &props));
        size_t size = malloc_usable_size(pool);
        CHECK(cudaMemPoolDestroy(pool));
        void *volatile keep = malloc(size);
        (void)keep;
    }
    uint64_t after = anonymous_mapped();
    printf("churn.growth=%llu\n", (unsigned long long)(after > before ? after - before : 0));
    return 0;
}

/* A created pool that reserved 8 MiB after its last reading, then destroyed (XLA's allocator at
 * shutdown): its high-water marks stay in the async_pool figures. Prints the pool's own before the
 * destroy (sim.destroyed.*; the program's reads are not the shim's samples). */
static int scenario_pool_destroyed(void)
{
    cudaStream_t s;
    uint64_t reserved_high = 0, used_high = 0;
    void *a;
    cudaMemPool_t pool = keeping_pool(&s);
    CHECK(cudaMallocFromPoolAsync(&a, MiB, pool, s)); /* a thread's first: read after it */
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaMallocFromPoolAsync(&a, 8 * MiB, pool, s)); /* not read: within 100 ms */
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reserved_high));
    CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_high));
    printf("sim.destroyed.reserved_high=%llu\nsim.destroyed.used_high=%llu\n", (unsigned long long)reserved_high,
           (unsigned long long)used_high);
    CHECK(cudaMemPoolDestroy(pool));
    return 0;
}

/* A second thread that runs one job when a SIGUSR1 handler of this thread asks, the handler
 * waiting until it is done: the job runs while this thread is inside the driver call whose entry
 * raised the signal (SIMCUDA_INJECT=SYMBOL:N:raise=SIGUSR1). Not async-signal-safe (a mutex and a
 * condition variable): the tests raise the signal at one known point, where this thread holds no
 * lock. job_thread_start makes the thread and sets the handler; 0, or pthread_create's error. */
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_cond = PTHREAD_COND_INITIALIZER;
static volatile int job_go, job_done;
static void (*job_fn)(void);

static void *job_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&job_lock);
    while (!job_go)
        pthread_cond_wait(&job_cond, &job_lock);
    pthread_mutex_unlock(&job_lock);
    job_fn();
    pthread_mutex_lock(&job_lock);
    job_done = 1;
    pthread_cond_broadcast(&job_cond);
    pthread_mutex_unlock(&job_lock);
    return NULL;
}

static void job_from_handler(int sig)
{
    (void)sig;
    pthread_mutex_lock(&job_lock);
    job_go = 1;
    pthread_cond_broadcast(&job_cond);
    while (!job_done)
        pthread_cond_wait(&job_cond, &job_lock);
    pthread_mutex_unlock(&job_lock);
}

static int job_thread_start(pthread_t *t, void (*fn)(void))
{
    job_fn = fn;
    signal(SIGUSR1, job_from_handler);
    return pthread_create(t, NULL, job_thread, NULL);
}

/* Prints TAG.held=<device 0's limit_held_bytes through cushim.h> (what the budget holds; under
 * the limit cudaMemGetInfo's free just printed is the limit less it). */
static void print_held(const char *tag)
{
    struct cushim_device_stats st;
    if (cushim_stats(0, &st, 0) == 0)
        printf("%s.held=%llu\n", tag, (unsigned long long)st.limit_held_bytes);
}

/* A reading of the pools while a request its pool's idle reserve serves is in its call (the
 * signal SIMCUDA_INJECT=cuMemAllocFromPoolAsync:1:raise=SIGUSR1 raises on that call's entry has
 * another thread call cudaMemGetInfo, which reads the pools for the budget): the default pool
 * keeps 8 MiB (release threshold UINT64_MAX), an 8 MiB cudaMallocAsync is served from it.
 * Prints during.held (the request's memory alive) and after.held (freed, synchronized). */
static void read_pools(void)
{
    size_t f, t;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess)
        exit(20);
}

static int scenario_budget_pools_read_during_served(void)
{
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t keep = UINT64_MAX;
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    void *p;
    CHECK(cudaMallocAsync(&p, 8 * MiB, 0));
    CHECK(cudaFreeAsync(p, 0));
    CHECK(cudaStreamSynchronize(0));
    pthread_t t;
    if (job_thread_start(&t, read_pools))
        return 12;
    CHECK(cudaMallocAsync(&p, 8 * MiB, 0));
    pthread_join(t, NULL);
    print_held("during");
    CHECK(cudaFreeAsync(p, 0));
    CHECK(cudaStreamSynchronize(0));
    print_held("after");
    return 0;
}

/* A refusal's second look (budget.c) whose own reading of the pools another thread's
 * stream-ordered free and cudaMalloc of as many bytes overtake (the job runs inside the reading's
 * cuDeviceGetDefaultMemPool: SIMCUDA_INJECT=cuDeviceGetDefaultMemPool:3:raise=SIGUSR1): under a
 * 200 MiB budget, a (64 MiB) kept, b (64 MiB) freed and read idle, then trimmed by a synchronize
 * (threshold 0) with no event the budget sees; the job frees a (64 MiB idle now) and takes 64 MiB
 * with cudaMalloc: the bytes in use are as before, but the reading found a in use. Prints
 * rc_malloc=<the main thread's cudaMalloc of 100 MiB> and job_ran. (From a review: granted, the
 * budget then held 228 MiB of 200.) */
static void *aba_a;
static cudaStream_t aba_stream;
static int aba_ran;
static void aba_job(void)
{
    void *c;
    aba_ran = cudaFreeAsync(aba_a, aba_stream) == cudaSuccess && cudaMalloc(&c, 64 * MiB) == cudaSuccess;
}

static int scenario_budget_second_look_aba(void)
{
    void *b, *x;
    size_t f, t;
    CHECK(cudaStreamCreate(&aba_stream));
    CHECK(cudaMallocAsync(&aba_a, 64 * MiB, aba_stream));
    CHECK(cudaMallocAsync(&b, 64 * MiB, aba_stream));
    CHECK(cudaFreeAsync(b, aba_stream));
    CHECK(cudaMemGetInfo(&f, &t));
    CHECK(cudaStreamSynchronize(aba_stream));
    pthread_t th;
    if (job_thread_start(&th, aba_job))
        return 12;
    int rc = (int)cudaMalloc(&x, 100 * MiB);
    if (!aba_ran)
        job_from_handler(SIGUSR1); /* the job never ran: let its thread end */
    pthread_join(th, NULL);
    printf("rc_malloc=%d\njob_ran=%d\n", rc, aba_ran);
    return 0;
}

/* A reading of the pools while a pool is being destroyed (the job runs inside the real
 * cuMemPoolDestroy: SIMCUDA_INJECT=cuMemPoolDestroy:1:raise=SIGUSR1): under a 200 MiB budget the
 * default pool keeps 60 MiB idle, a pool made here holds a 100 MiB allocation the program keeps
 * (the destroy leaves it and the pool's reserve until its free: cuda.h cuMemPoolDestroy). The
 * destroyed pool has left the table, so a reading no longer sees its reserve, while its 100 MiB
 * are still in the stream-ordered bytes that the reading takes off the reserve: the default pool's
 * 60 MiB read as 0 idle. The job's cudaMalloc of 80 MiB must be refused (100 + 60 + 80 > 200).
 * Prints rc_malloc and job_ran. (From a review: granted, 240 MiB held of 200.) */
static int destroying_ran, destroying_rc = -1;
static bool destroying_trim;
static cudaMemPool_t destroying_def;
static void destroying_job(void)
{
    void *c;
    if (destroying_trim && cudaMemPoolTrimTo(destroying_def, 0) != cudaSuccess)
        exit(21);
    destroying_rc = (int)cudaMalloc(&c, 80 * MiB);
    destroying_ran = 1;
    if (destroying_rc == 0)
        (void)cudaFree(c);
}

static int read_while_pool_destroyed(bool trim)
{
    destroying_trim = trim;
    cudaStream_t s;
    cudaMemPool_t def, pool;
    struct cudaMemPoolProps props = device_pool_props(0);
    uint64_t keep = UINT64_MAX;
    void *a, *x;
    size_t f, t;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    destroying_def = def;
    CHECK(cudaMemPoolSetAttribute(def, cudaMemPoolAttrReleaseThreshold, &keep));
    CHECK(cudaMallocAsync(&a, 60 * MiB, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaMallocFromPoolAsync(&x, 100 * MiB, pool, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemGetInfo(&f, &t));
    pthread_t th;
    if (job_thread_start(&th, destroying_job))
        return 12;
    CHECK(cudaMemPoolDestroy(pool));
    if (!destroying_ran)
        job_from_handler(SIGUSR1); /* the job never ran: let its thread end */
    pthread_join(th, NULL);
    printf("rc_malloc=%d\njob_ran=%d\n", destroying_rc, destroying_ran);
    CHECK(cudaFreeAsync(x, s));
    CHECK(cudaStreamSynchronize(s));
    return 0;
}

static int scenario_budget_read_while_pool_destroyed(void)
{
    return read_while_pool_destroyed(false);
}

/* The same, with the job trimming the default pool to 0 first (cudaMemPoolTrimTo: its 60 MiB
 * released, an event that reads the pools again): the reading inside the destroy is right now
 * (the destroyed pool's reserve counts in it until its allocations leave the stream-ordered
 * bytes), so the 80 MiB fit (100 + 0 + 80 <= 200). A first fix dropped every reading while a
 * destroy was under way, and the stale 60 MiB refused it (a review: a thread destroying pools
 * without pause starved the readings). */
static int scenario_budget_trim_while_pool_destroyed(void)
{
    return read_while_pool_destroyed(true);
}

/* Under CUSHIM_DEVICE_LIMIT=8MiB, a pool's idle reserve counts in the budget. A pool that keeps
 * freed memory (release threshold UINT64_MAX) holds 6 MiB idle after a free: a cudaMalloc of 4 MiB
 * does not fit (6 + 4 > 8), a cudaMallocFromPoolAsync of 5 MiB does (its reserve serves it),
 * cudaMemGetInfo then says 2 MiB free (5 in use, 1 idle); after that free and cudaMemPoolTrimTo(0)
 * the 4 MiB fit. With the threshold 0: 6 MiB allocated and freed, read idle by cudaMemGetInfo,
 * then released by a synchronize: the 4 MiB fit (the budget reads the pools again before it
 * refuses). Last, 6 MiB kept by a second pool do not serve a request of 6 MiB from the first.
 * Prints each call's code and the free figures. */
static int scenario_budget_pool_idle(void)
{
    cudaStream_t s;
    cudaMemPool_t pool;
    struct cudaMemPoolProps props = device_pool_props(0);
    uint64_t keep = UINT64_MAX, none = 0;
    void *a, *b, *c;
    size_t free_b = 0, total_b = 0;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CHECK(cudaMallocFromPoolAsync(&a, 6 * MiB, pool, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    printf("kept.malloc=%d\n", (int)cudaMalloc(&b, 4 * MiB));
    int r = (int)cudaMallocFromPoolAsync(&c, 5 * MiB, pool, s);
    printf("kept.pool=%d\n", r);
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("kept.free=%zu\nkept.total=%zu\n", free_b, total_b);
    print_held("kept");
    if (r == 0)
        CHECK(cudaFreeAsync(c, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolTrimTo(pool, 0));
    r = (int)cudaMalloc(&b, 4 * MiB);
    printf("trimmed.malloc=%d\n", r);
    if (r == 0)
        CHECK(cudaFree(b));
    CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &none));
    CHECK(cudaMallocFromPoolAsync(&a, 6 * MiB, pool, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("freed.free=%zu\n", free_b);
    print_held("freed");
    CHECK(cudaStreamSynchronize(s));
    r = (int)cudaMalloc(&b, 4 * MiB);
    printf("released.malloc=%d\n", r);
    if (r == 0)
        CHECK(cudaFree(b));
    /* Another pool's reserve serves only that pool: 6 MiB kept by pool B leave 2 MiB for pool A. */
    cudaMemPool_t other;
    CHECK(cudaMemPoolCreate(&other, &props));
    CHECK(cudaMemPoolSetAttribute(other, cudaMemPoolAttrReleaseThreshold, &keep));
    CHECK(cudaMallocFromPoolAsync(&a, 6 * MiB, other, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    r = (int)cudaMallocFromPoolAsync(&c, 6 * MiB, pool, s);
    printf("cross.pool=%d\n", r);
    if (r == 0)
        CHECK(cudaFreeAsync(c, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolTrimTo(other, 0));
    /* Out of memory, synchronize, retry (at once: in the same clock tick): the retry finds what
     * the synchronize released (threshold 0). */
    CHECK(cudaMallocFromPoolAsync(&a, 6 * MiB, pool, s));
    CHECK(cudaFreeAsync(a, s));
    r = (int)cudaMalloc(&b, 4 * MiB);
    printf("pending.malloc=%d\n", r);
    if (r == 0)
        CHECK(cudaFree(b));
    CHECK(cudaStreamSynchronize(s));
    r = (int)cudaMalloc(&b, 4 * MiB);
    printf("retry.malloc=%d\n", r);
    if (r == 0)
        CHECK(cudaFree(b));
    return 0;
}

/* Under CUSHIM_DEVICE_LIMIT=4MiB: 2 MiB + 512 by cudaMalloc, then 1000 bytes stream-ordered,
 * for which the current pool grows by a 2 MiB chunk (the simulated pool's, as a driver's): the
 * budget holds 4 MiB + 512, over the limit. Requests that pool's idle reserve serves grow nothing
 * and pass (1 byte, 4 KiB); one of 0 bytes gets the driver's answer (cudaErrorInvalidValue); a
 * cudaMalloc (no reserve serves it) is refused. Before, every request was refused once held passed
 * the limit (a fresh-user trial), the 0-byte one as out of memory. Prints each code. */
static int scenario_budget_pool_over(void)
{
    cudaStream_t s;
    void *big, *first, *one = NULL, *page = NULL, *zero = NULL, *more;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc(&big, 2 * MiB + 512));
    CHECK(cudaMallocAsync(&first, 1000, s));
    int r = (int)cudaMallocAsync(&one, 1, s);
    printf("over.one=%d\n", r);
    r = (int)cudaMallocAsync(&page, 4096, s);
    printf("over.page=%d\n", r);
    printf("over.zero=%d\n", (int)cudaMallocAsync(&zero, 0, s));
    r = (int)cudaMalloc(&more, 4096);
    printf("over.malloc=%d\n", r);
    struct sim_api sim = sim_api();
    if (sim.calls)
        printf("sim_calls_from_pool=%llu\n", (unsigned long long)sim.calls("cuMemAllocFromPoolAsync"));
    if (r == 0)
        CHECK(cudaFree(more));
    if (one)
        CHECK(cudaFreeAsync(one, s));
    if (page)
        CHECK(cudaFreeAsync(page, s));
    CHECK(cudaFreeAsync(first, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(big));
    return 0;
}

/* Under CUSHIM_DEVICE_LIMIT=3MiB, 1 MiB stream-ordered requests from the default pool (2 MiB
 * chunks): the third grows the pool to 4 MiB, past the limit; the fourth, which the pool's idle
 * reserve could serve, would take the device's bytes in use past the limit too: refused (a stress
 * trial: served requests passed whatever was in use, device_total went 20 MiB over a 256 MiB
 * budget). Prints each code and the device total in use. */
static int scenario_budget_served_over(void)
{
    cudaStream_t s;
    void *p[4] = {NULL, NULL, NULL, NULL};
    CHECK(cudaStreamCreate(&s));
    size_t free_b, total_b;
    for (int i = 0; i < 4; i++) {
        if (i == 3) /* the pools read: their idle reserve known to the budget */
            CHECK(cudaMemGetInfo(&free_b, &total_b));
        printf("served.rc%d=%d\n", i, (int)cudaMallocAsync(&p[i], MiB, s));
    }
    struct cushim_device_stats st;
    if (cushim_stats(0, &st, 0) != 0)
        return 2;
    printf("served.current=%llu\n", (unsigned long long)st.device_total_current_bytes);
    for (int i = 0; i < 4; i++)
        if (p[i])
            CHECK(cudaFreeAsync(p[i], s));
    CHECK(cudaStreamSynchronize(s));
    return 0;
}

/* Under CUSHIM_DEVICE_LIMIT=4MiB: a pitched allocation of 8 MiB is refused after the driver made
 * it (the pitch is the driver's choice), and the outputs keep what they held, as the driver's own
 * out-of-memory failure leaves them (a review: they held the pointer the shim had freed). Then
 * one of 2 MiB passes. Prints the code and the outputs, of cudaMallocPitch (pitch.*; the
 * simulated runtime writes the pointer only on success, the pitch always) and of the driver's
 * cuMemAllocPitch itself (drv.*: the pointer as the shim leaves it). */
static int scenario_budget_pitch(void)
{
    void *p = (void *)0x1234;
    size_t pitch = 77;
    printf("pitch.rc=%d\n", (int)cudaMallocPitch(&p, &pitch, 1024, 8192));
    printf("pitch.ptr=%zu\npitch.pitch=%zu\n", (size_t)(uintptr_t)p, pitch);
    PFN_cuMemAllocPitch_v3020 alloc_pitch = entry("cuMemAllocPitch", 3020);
    CUdeviceptr d = 0x5678;
    size_t dpitch = 99;
    printf("drv.rc=%d\n", (int)alloc_pitch(&d, &dpitch, 1024, 8192, 4));
    printf("drv.ptr=%llu\ndrv.pitch=%zu\n", (unsigned long long)d, dpitch);
    CHECK(cudaMallocPitch(&p, &pitch, 1024, 2048));
    printf("fits.pitch=%zu\n", pitch);
    CHECK(cudaFree(p));
    return 0;
}

/* Under CUSHIM_DEVICE_LIMIT=8MiB: 4 MiB from pool A, which is destroyed while they are live
 * (cuda.h cuMemPoolDestroy: released once no allocation is outstanding), then pool B keeps 2 MiB
 * idle: 2 MiB free, and 3 MiB are refused (before, A's live bytes were taken off B's reserve in
 * the pools' figures: 4 MiB free, and the 3 MiB passed, 9 MiB held under 8). Once the 4 MiB are
 * freed, 6 MiB free and the 3 MiB fit. The last request is served from the current pool, made a
 * created one and destroyed as well. Prints each code and the free figures. */
static int scenario_budget_pool_destroyed(void)
{
    cudaStream_t s;
    cudaMemPool_t a_pool, b_pool, c_pool;
    struct cudaMemPoolProps props = device_pool_props(0);
    uint64_t keep = UINT64_MAX;
    void *a, *b, *c;
    size_t free_b = 0, total_b = 0;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMemPoolCreate(&a_pool, &props));
    CHECK(cudaMallocFromPoolAsync(&a, 4 * MiB, a_pool, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolDestroy(a_pool));
    CHECK(cudaMemPoolCreate(&b_pool, &props));
    CHECK(cudaMemPoolSetAttribute(b_pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CHECK(cudaMallocFromPoolAsync(&b, 2 * MiB, b_pool, s));
    CHECK(cudaFreeAsync(b, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("orphan.free=%zu\n", free_b);
    print_held("orphan");
    int r = (int)cudaMalloc(&c, 3 * MiB);
    printf("orphan.malloc=%d\n", r);
    if (r == 0)
        CHECK(cudaFree(c));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("freed.free=%zu\n", free_b);
    print_held("freed");
    r = (int)cudaMalloc(&c, 3 * MiB);
    printf("freed.malloc=%d\n", r);
    if (r == 0)
        CHECK(cudaFree(c));
    /* The device's current pool, destroyed with 4 MiB of cudaMallocAsync live. */
    CHECK(cudaMemPoolCreate(&c_pool, &props));
    CHECK(cudaDeviceSetMemPool(0, c_pool));
    CHECK(cudaMallocAsync(&a, 4 * MiB, s));
    CHECK(cudaStreamSynchronize(s));
    cudaMemPool_t def;
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    CHECK(cudaDeviceSetMemPool(0, def));
    CHECK(cudaMemPoolDestroy(c_pool));
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("current.free=%zu\n", free_b);
    print_held("current");
    r = (int)cudaMalloc(&c, 3 * MiB);
    printf("current.malloc=%d\n", r);
    if (r == 0)
        CHECK(cudaFree(c));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    /* The same, the 4 MiB made while another stream captures (the pool is known without asking
     * the driver, which is not asked during a capture): made current with cudaDeviceSetMemPool,
     * then with CUDA 13's cuMemSetMemPool where the headers have it. */
    cudaStream_t s2;
    cudaGraph_t g;
    CHECK(cudaStreamCreate(&s2));
    for (int k = 0; k < 2; k++) {
        CHECK(cudaMemPoolCreate(&c_pool, &props));
        if (k == 0) {
            CHECK(cudaDeviceSetMemPool(0, c_pool));
        } else {
#if CUDA_VERSION >= 13000
            PFN_cuMemSetMemPool_v13000 set_pool = entry("cuMemSetMemPool", 13000);
            CUmemLocation here = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
            if (set_pool(&here, CU_MEM_ALLOCATION_TYPE_PINNED, (CUmemoryPool)c_pool) != CUDA_SUCCESS)
                return 3;
#else
            CHECK(cudaDeviceSetMemPool(0, c_pool));
#endif
        }
        CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
        CHECK(cudaMallocAsync(&a, 4 * MiB, s));
        CHECK(cudaStreamEndCapture(s2, &g));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemPoolDestroy(c_pool)); /* the default pool is current again (cuda.h) */
        CHECK(cudaMemGetInfo(&free_b, &total_b));
        printf("captured%d.free=%zu\n", k, free_b);
        char tag[16];
        snprintf(tag, sizeof tag, "captured%d", k);
        print_held(tag);
        r = (int)cudaMalloc(&c, 3 * MiB);
        printf("captured%d.malloc=%d\n", k, r);
        if (r == 0)
            CHECK(cudaFree(c));
        CHECK(cudaFreeAsync(a, s));
        CHECK(cudaStreamSynchronize(s));
    }
    return 0;
}

/* 70 pools that keep 2 MiB each (more than the 64 the shim copies per pass over its table): under
 * CUSHIM_DEVICE_LIMIT=160MiB cudaMemGetInfo says 20 MiB free, and the pools' figures count all 70
 * (before, pools past the first 64 were left out: 32 MiB free). */
static int scenario_budget_many_pools(void)
{
    cudaStream_t s;
    struct cudaMemPoolProps props = device_pool_props(0);
    uint64_t keep = UINT64_MAX;
    CHECK(cudaStreamCreate(&s));
    for (int i = 0; i < 70; i++) {
        cudaMemPool_t pool;
        void *a;
        CHECK(cudaMemPoolCreate(&pool, &props));
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
        CHECK(cudaMallocFromPoolAsync(&a, 2 * MiB, pool, s));
        CHECK(cudaFreeAsync(a, s));
    }
    CHECK(cudaStreamSynchronize(s));
    size_t free_b = 0, total_b = 0;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("many.free=%zu\n", free_b);
    print_held("many");
    struct cushim_device_stats st;
    if (cushim_stats(0, &st, 0) != 0)
        return 2;
    printf("many.reserved=%llu\n", (unsigned long long)st.async_pool_reserved_current_bytes);
    return 0;
}

/* VMM import of this process's own memory (run with SIMCUDA_IMPORT_SAME_HANDLE=1, where the
 * import returns the handle that holds it): a handle made, exported, imported twice, mapped,
 * unmapped and released three times (once per create and per import, cuda.h). */
static int scenario_vmm_import_own(void)
{
    struct vmm_api v = vmm_api();
    PFN_cuMemExportToShareableHandle_v10020 export_ = entry("cuMemExportToShareableHandle", 10020);
    PFN_cuMemImportFromShareableHandle_v10020 import_ = entry("cuMemImportFromShareableHandle", 10020);
    CHECK(cudaFree(NULL));
    CUmemAllocationProp prop = vmm_prop(0);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t g;
    CUmemGenericAllocationHandle h, i1, i2;
    CUdeviceptr va;
    int fd = -1;
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || v.create(&h, g, &prop, 0) ||
        export_(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ||
        import_(&i1, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        import_(&i2, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
        v.reserve(&va, g, 0, 0, 0))
        return 13;
    printf("same_handle=%d\n", i1 == h && i2 == h);
    printf("rc_map=%d\n", (int)v.map(va, g, 0, i1, 0));
    printf("rc_unmap=%d\n", (int)v.unmap(va, g));
    printf("rc_release1=%d\n", (int)v.release(h));
    printf("rc_release2=%d\n", (int)v.release(i1));
    printf("rc_release3=%d\n", (int)v.release(i2));
    printf("rc_release4=%d\n", (int)v.release(h));
    printf("granularity=%zu\n", g);
    print_sim(1);
    return 0;
}

/* Multicast objects (NCCL's NVLS buffers), two devices: one made here (in no table) for a team of
 * two, device 0 added and device 0's memory bound; exported and imported four times, as other
 * team members would: the first import adds device 1 before it is mapped (never memory); the
 * others are mapped before their first multicast call (counted as imported by the mapping, then
 * taken back): a bind, a bind by address, an unbind. Then an unmap of the local object's mapping
 * and of a counted mapping after it in one call: the counted one's handle, released, is freed.
 * Granularity g; the object is 4 g. */
static int scenario_multicast(void)
{
    struct vmm_api v = vmm_api();
    PFN_cuMemExportToShareableHandle_v10020 export_ = entry("cuMemExportToShareableHandle", 10020);
    PFN_cuMemImportFromShareableHandle_v10020 import_ = entry("cuMemImportFromShareableHandle", 10020);
    PFN_cuMemSetAccess_v10020 access = entry("cuMemSetAccess", 10020);
    PFN_cuMulticastCreate_v12010 mc_create = entry("cuMulticastCreate", 12010);
    PFN_cuMulticastAddDevice_v12010 mc_add = entry("cuMulticastAddDevice", 12010);
    PFN_cuMulticastBindMem_v12010 mc_bind = entry("cuMulticastBindMem", 12010);
    PFN_cuMulticastBindAddr_v12010 mc_bind_addr = entry("cuMulticastBindAddr", 12010);
    PFN_cuMulticastUnbind_v12010 mc_unbind = entry("cuMulticastUnbind", 12010);
    CHECK(cudaFree(NULL));
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g;
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
        return 13;
    CUmulticastObjectProp mp = {.numDevices = 2, .size = 4 * g,
                                .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR};
    CUmemGenericAllocationHandle mc, uc, uc2, imc[4];
    CUdeviceptr va[4], va_uc, va3;
    int fd = -1;
    if (mc_create(&mc, &mp) || mc_add(mc, 0) || v.create(&uc, g, &prop, 0) || mc_bind(mc, 0, uc, 0, g, 0) ||
        export_(&fd, mc, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) || v.reserve(&va_uc, g, 0, 0, 0) ||
        v.reserve(&va3, 2 * g, 0, 0, 0))
        return 14;
    for (int i = 0; i < 4; i++)
        if (import_(&imc[i], (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) ||
            v.reserve(&va[i], 4 * g, 0, 0, 0))
            return 15;
    CUmemAccessDesc ad = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (v.map(va_uc, g, 0, uc, 0) || access(va_uc, g, &ad, 1))
        return 16;
    printf("rc_add_again=%d\n", (int)mc_add(mc, 0)); /* device 0 is in the team already */
    printf("rc_add1=%d\n", (int)mc_add(imc[0], 1));
    printf("rc_map1=%d\n", (int)v.map(va[0], 4 * g, 0, imc[0], 0));
    printf("rc_map2=%d\n", (int)v.map(va[1], 4 * g, 0, imc[1], 0));
    printf("rc_bind2=%d\n", (int)mc_bind(imc[1], g, uc, 0, g, 0));
    printf("rc_map3=%d\n", (int)v.map(va[2], 4 * g, 0, imc[2], 0));
    printf("rc_bind_addr3=%d\n", (int)mc_bind_addr(imc[2], 2 * g, va_uc, g, 0));
    printf("rc_map4=%d\n", (int)v.map(va[3], 4 * g, 0, imc[3], 0));
    printf("rc_unbind4=%d\n", (int)mc_unbind(imc[3], 0, 0, g));
    for (int i = 0; i < 4; i++) {
        printf("rc_unmap_import%d=%d\n", i + 1, (int)v.unmap(va[i], 4 * g));
        printf("rc_release_import%d=%d\n", i + 1, (int)v.release(imc[i]));
    }
    /* The local object's mapping, then a counted one right after it, unmapped in one call. */
    if (v.create(&uc2, g, &prop, 0))
        return 17;
    printf("rc_map_local=%d\n", (int)v.map(va3, g, 0, mc, 0));
    printf("rc_map_after=%d\n", (int)v.map(va3 + g, g, 0, uc2, 0));
    printf("rc_release_uc2=%d\n", (int)v.release(uc2));
    printf("rc_unmap_both=%d\n", (int)v.unmap(va3, 2 * g));
    printf("rc_unmap_uc=%d\n", (int)v.unmap(va_uc, g));
    printf("granularity=%zu\n", g);
    print_sim(1);
    return 0;
}

/* Pool IPC: the parent's pool on device 1 (POSIX descriptor handles) exports itself and a 3 MiB
 * allocation; its child (this program again: the pool's descriptor number in POOL_FD, the pointer's
 * export data as hex in POOL_PTR) imports both with device 0 current, resets device 0's primary
 * context, then frees the pointer. */
static int scenario_pool_ipc_parent(void)
{
    PFN_cuMemPoolExportToShareableHandle_v11020 export_pool = entry("cuMemPoolExportToShareableHandle", 11020);
    PFN_cuMemPoolExportPointer_v11020 export_ptr = entry("cuMemPoolExportPointer", 11020);
    struct cudaMemPoolProps props = device_pool_props(1);
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    cudaMemPool_t pool;
    cudaStream_t st;
    void *a;
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&st));
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaMallocFromPoolAsync(&a, 3 * MiB, pool, st));
    CHECK(cudaStreamSynchronize(st));
    int fd = -1;
    CUmemPoolPtrExportData data;
    if (export_pool(&fd, (CUmemoryPool)pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ||
        export_ptr(&data, (CUdeviceptr)a))
        return 13;
    char hex[2 * sizeof data.reserved + 1], num[16];
    for (size_t i = 0; i < sizeof data.reserved; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)data.reserved[i]);
    snprintf(num, sizeof num, "%d", fd);
    setenv("POOL_PTR", hex, 1);
    setenv("POOL_FD", num, 1);
    fcntl(fd, F_SETFD, 0); /* the child inherits the descriptor */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "rt_prog", "pool_ipc_child", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(cudaFreeAsync(a, st));
    CHECK(cudaStreamSynchronize(st));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int scenario_pool_ipc_child(void)
{
    PFN_cuMemPoolImportFromShareableHandle_v11020 import_pool = entry("cuMemPoolImportFromShareableHandle", 11020);
    PFN_cuMemPoolImportPointer_v11020 import_ptr = entry("cuMemPoolImportPointer", 11020);
    PFN_cuMemFree_v3020 free_ = entry("cuMemFree", 3020);
    const char *hex = getenv("POOL_PTR"), *num = getenv("POOL_FD");
    CUmemPoolPtrExportData data;
    if (!hex || !num || strlen(hex) != 2 * sizeof data.reserved)
        return 14;
    for (size_t i = 0; i < sizeof data.reserved; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        data.reserved[i] = (unsigned char)v;
    }
    CUmemoryPool pool;
    CUdeviceptr p;
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(NULL));
    printf("rc_import_pool=%d\n", (int)import_pool(&pool, (void *)(intptr_t)atoi(num),
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    printf("rc_import_ptr=%d\n", (int)import_ptr(&p, pool, &data));
    CHECK(cudaDeviceReset()); /* device 0's primary context: the imported memory is in none */
    CHECK(cudaFree(NULL));
    struct cushim_device_stats st;
    if (cushim_stats(1, &st, 0) != 0)
        return 15;
    printf("imported_after_reset=%llu\n", (unsigned long long)st.kind[CUSHIM_MEM_IMPORTED].current_bytes);
    printf("rc_free=%d\n", (int)free_(p));
    return 0;
}

/* CUDA IPC: the parent exports 1,000,000 bytes of device memory; its child (this program again,
 * the handle in CUDA_IPC_HANDLE as hex) opens the handle twice (the same mapping, cuda.h: a
 * reference count) and closes it once, leaving it open at exit. */
static int scenario_ipc_parent(void)
{
    CUdeviceptr d;
    CUipcMemHandle h;
    PFN_cuMemAlloc_v3020 alloc = entry("cuMemAlloc", 3020);
    PFN_cuIpcGetMemHandle_v4010 get = entry("cuIpcGetMemHandle", 4010);
    CHECK(cudaSetDevice(getenv("IPC_PARENT_DEVICE") ? atoi(getenv("IPC_PARENT_DEVICE")) : 0));
    CHECK(cudaFree(NULL));
    if (alloc(&d, 1000000) || get(&h, d))
        return 13;
    char hex[2 * sizeof h.reserved + 1];
    for (size_t i = 0; i < sizeof h.reserved; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)h.reserved[i]);
    setenv("CUDA_IPC_HANDLE", hex, 1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", "rt_prog", "ipc_child", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* The parent's memory on device 1, opened by the child with device 0 current (each rank of a
 * custom all-reduce opens its peers' buffers so). */
static int scenario_ipc_parent_other_device(void)
{
    setenv("IPC_PARENT_DEVICE", "1", 1);
    return scenario_ipc_parent();
}

static int scenario_ipc_parent_threads(void)
{
    setenv("IPC_THREADS", "1", 1);
    return scenario_ipc_parent();
}

static int scenario_ipc_parent_capture(void)
{
    setenv("IPC_CAPTURE", "1", 1);
    return scenario_ipc_parent();
}

static int scenario_ipc_parent_fails(void)
{
    setenv("IPC_FAILS", "1", 1);
    setenv("SIMCUDA_INJECT", "cuIpcCloseMemHandle:1:CUDA_ERROR_INVALID_CONTEXT,cuIpcCloseMemHandle:4:CUDA_ERROR_INVALID_CONTEXT", 1);
    return scenario_ipc_parent();
}

/* The child's threaded form: 8 threads open the handle at once, then close it at once, 200
 * rounds; then 8 open and 7 close. */
static CUipcMemHandle ipc_handle;
static PFN_cuIpcOpenMemHandle_v11000 ipc_open;
static PFN_cuIpcCloseMemHandle_v4010 ipc_close;
static pthread_barrier_t ipc_barrier;
static atomic_int ipc_bad;

static void *ipc_thread(void *arg)
{
    const int rounds = 200;
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(NULL) != cudaSuccess) /* the primary context current here */
        atomic_fetch_add(&ipc_bad, 1);
    for (int i = 0; i <= rounds; i++) {
        CUdeviceptr p;
        pthread_barrier_wait(&ipc_barrier);
        if (ipc_open(&p, ipc_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS)
            atomic_fetch_add(&ipc_bad, 1);
        pthread_barrier_wait(&ipc_barrier);
        /* In the last round thread 0 keeps its reference. */
        if ((i < rounds || arg != NULL) && ipc_close(p) != CUDA_SUCCESS)
            atomic_fetch_add(&ipc_bad, 1);
    }
    return NULL;
}

static int ipc_threads(void)
{
    pthread_t t[8];
    pthread_barrier_init(&ipc_barrier, NULL, 8);
    CHECK(cudaFree(NULL));
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, ipc_thread, (void *)(intptr_t)i);
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    printf("ipc_bad=%d\n", atomic_load(&ipc_bad));
    return 0;
}

static int scenario_ipc_child(void)
{
    PFN_cuIpcOpenMemHandle_v11000 open_ = entry("cuIpcOpenMemHandle", 11000);
    PFN_cuIpcCloseMemHandle_v4010 close_ = entry("cuIpcCloseMemHandle", 4010);
    const char *hex = getenv("CUDA_IPC_HANDLE");
    CUipcMemHandle h;
    if (!hex || strlen(hex) != 2 * sizeof h.reserved)
        return 14;
    for (size_t i = 0; i < sizeof h.reserved; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        h.reserved[i] = (char)v;
    }
    if (getenv("IPC_THREADS")) {
        ipc_handle = h, ipc_open = open_, ipc_close = close_;
        return ipc_threads();
    }
    if (getenv("IPC_CAPTURE")) {
        /* Opened while a stream captures (relaxed): counted as capture bytes too. */
        CUdeviceptr a;
        cudaStream_t st;
        cudaGraph_t g;
        CHECK(cudaStreamCreate(&st));
        CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
        printf("rc_open_in_capture=%d\n", (int)open_(&a, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
        printf("rc_end=%d\n", (int)cudaStreamEndCapture(st, &g));
        return 0;
    }
    if (getenv("IPC_FAILS")) {
        /* Run with the 1st and 4th closes failing (SIMCUDA_INJECT): a failed close keeps its
         * reference, the last one or not. */
        CUdeviceptr a, b, c;
        CHECK(cudaFree(NULL));
        int rc = open_(&a, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) | open_(&b, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        printf("rc_close_fails=%d\n", (int)close_(a));
        rc |= close_(a) | close_(b) | open_(&c, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        printf("rc_last_close_fails=%d\n", (int)close_(c));
        printf("mapped_before_last=%d\n", rc == 0);
        printf("rc_last_close=%d\n", (int)close_(c));
        return 0;
    }
    CUdeviceptr a, b;
    CHECK(cudaFree(NULL));
    printf("rc_open1=%d\n", (int)open_(&a, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    printf("rc_open2=%d\n", (int)open_(&b, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    printf("same=%d\n", a == b);
    printf("rc_close1=%d\n", (int)close_(a));
    return 0;
}

static int scenario_reset(void)
{
    void *a, *b, *c;
    CHECK(cudaMalloc(&a, MiB));
    CHECK(cudaMalloc(&b, MiB));
    CHECK(cudaDeviceReset());
    CHECK(cudaMalloc(&c, MiB));
    printf("reused=%d\n", c == a || c == b);
    return 0;
}

/* Stream-ordered allocations outlive a device reset (cuda_runtime_api.h cudaDeviceReset: "will
 * not destroy memory allocations by cudaMallocAsync() and cudaMallocFromPoolAsync()"): they stay
 * counted until their own frees, which succeed after the reset. */
static int scenario_async_reset(void)
{
    void *a, *b, *c;
    cudaMemPool_t pool;
    struct cushim_device_stats st;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cudaMallocAsync(&a, MiB, 0));
    CHECK(cudaMallocFromPoolAsync(&b, MiB / 2, pool, 0));
    CHECK(cudaMalloc(&c, 2 * MiB));
    CHECK(cudaStreamSynchronize(0));
    CHECK(cudaDeviceReset());
    if (cushim_stats(0, &st, 0) != 0)
        return 20;
    printf("after_reset.device_total=%llu\nafter_reset.sim_async=%llu\n",
           (unsigned long long)st.device_total_current_bytes, (unsigned long long)sim_api().live(0, 1));
    printf("rc_free_a=%d\n", (int)cudaFreeAsync(a, 0));
    printf("rc_free_b=%d\n", (int)cudaFreeAsync(b, 0));
    CHECK(cudaStreamSynchronize(0));
    if (cushim_stats(0, &st, 0) != 0)
        return 21;
    printf("after_free.device_total=%llu\n", (unsigned long long)st.device_total_current_bytes);
    return 0;
}

/* A thread cancelled while it sets the phase (CUSHIM_LOG=info logs the change with the phase lock
 * held; write(2) is a cancellation point), then a fork: the lock must not be left held. */
static void *set_phase_cancelled(void *arg)
{
    (void)arg;
    int (*set)(int) = (int (*)(int))cushim_fn("cushim_set_phase");
    pthread_cancel(pthread_self());
    if (set)
        set(1);
    pthread_testcancel();
    return NULL;
}

static int scenario_cancel_phase(void)
{
    void *p;
    pthread_t t;
    CHECK(cudaMalloc(&p, MiB));
    if (pthread_create(&t, NULL, set_phase_cancelled, NULL) || pthread_join(t, NULL))
        return 20;
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    int status = -1;
    printf("forked=%d\n", child > 0 && waitpid(child, &status, 0) == child && status == 0);
    int (*get)(void) = (int (*)(void))cushim_fn("cushim_get_phase");
    printf("phase=%d\n", get ? get() : -1);
    return 0;
}

static int scenario_peaks(void)
{
    void *a, *b, *c, *d;
    CHECK(cudaMalloc(&a, 100));
    CHECK(cudaMalloc(&b, 200));
    CHECK(cudaFree(a));
    CHECK(cudaMalloc(&c, 50));
    CHECK(cudaFree(b));
    CHECK(cudaMalloc(&d, 300));
    return 0;
}

/* The driver's cuMemAlloc_v2 looked up through dlsym before the runtime's first call: with a
 * forwarder preloaded behind the shim, the lookup fills the shim's slot with the forwarder's
 * function (the next one after the shim); then the peaks scenario through the runtime. */
static int scenario_lookup_first(void)
{
    printf("lookup=%s\n", dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") ? "found" : "none");
    return scenario_peaks();
}

/* Two threads look driver functions up (RTLD_NEXT, RTLD_DEFAULT) and close a library (the
 * dlclose door; it stays loaded: the main thread holds it, as the loader's own list changing
 * would hang a child without the shim too) while the main thread forks 200 children, each of which walks the loaded objects
 * (dl_iterate_phdr, as C++ exception unwinding does) within 5 seconds. */
static atomic_int fork_stop;

static void *fork_looker(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !atomic_load(&fork_stop); i++) {
        dlsym(RTLD_NEXT, "cuMemAlloc_v2");
        dlsym(RTLD_DEFAULT, "cuMemFree_v2");
        if (i % 8 == 0) {
            void *m = dlopen("libm.so.6", RTLD_NOW);
            if (m)
                dlclose(m);
        }
    }
    return NULL;
}

static int count_objects(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    ++*(int *)data;
    return 0;
}

static int scenario_fork_lookups(void)
{
    void *a;
    CHECK(cudaMalloc(&a, 100));
    if (!dlopen("libm.so.6", RTLD_NOW))
        return 1;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, fork_looker, NULL);
    int hung = 0, failed = 0;
    for (int i = 0; i < 200; i++) {
        pid_t c = fork();
        if (c == 0) {
            alarm(5);
            int n = 0;
            dl_iterate_phdr(count_objects, &n);
            _exit(n > 0 ? 0 : 1);
        }
        int st = 0;
        if (c < 0 || waitpid(c, &st, 0) != c)
            failed++;
        else if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
            hung++;
        else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            failed++;
    }
    atomic_store(&fork_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("children_hung=%d\nchildren_failed=%d\n", hung, failed);
    return 0;
}

static int scenario_reset_peak(void)
{
    void *a, *b, *c;
    int (*reset)(int) = (int (*)(int))cushim_fn("cushim_reset_peak");
    uint64_t (*peak)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_peak_bytes");
    if (!reset || !peak)
        return 20;
    CHECK(cudaMalloc(&a, 1000));
    CHECK(cudaMalloc(&b, 2000));
    CHECK(cudaFree(b));
    printf("peak_before=%llu\n", (unsigned long long)peak(0));
    printf("reset=%d\n", reset(-1));
    printf("peak_after_reset=%llu\n", (unsigned long long)peak(0));
    CHECK(cudaMalloc(&c, 500));
    printf("peak_after_alloc=%llu\n", (unsigned long long)peak(0));
    /* cushim.h version 4: the reset, the run phase's peak since it, the budget (none here);
     * version 5: the whole life's peak, which the reset did not lower. */
    struct cushim_device_stats st;
    if (cushim_stats(0, &st, 0xab) != 0)
        return 21;
    printf("api.version=%u\napi.peak_reset_count=%llu\napi.peak_reset_last_set=%d\n"
           "api.run_device_peak=%llu\napi.compile_device_peak=%llu\napi.limit=%llu\n"
           "api.lifetime_peak=%llu\n", st.version,
           (unsigned long long)st.peak_reset_count, st.peak_reset_last_ns != 0,
           (unsigned long long)st.run_device_peak_bytes, (unsigned long long)st.compile_device_peak_bytes,
           (unsigned long long)st.limit_bytes, (unsigned long long)st.device_total_lifetime_peak_bytes);
    return 0;
}

static int scenario_two_devices(void)
{
    void *a, *b;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&a, MiB));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&b, 2 * MiB));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(b)); /* device 1's memory freed while device 0 is current */
    return 0;
}

/* 1 MiB on device 0 and 2 MiB on device 1, then held (ready/hold): a process using two devices,
 * for the live views (a budget on one of them: top's "+"). Asks device 1 for 4 MiB more too: under
 * a budget of 4 MiB there it is refused (top's "!"); printed as rc_refused. */
static int scenario_hold_two_devices(void)
{
    void *a, *b, *c;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&a, MiB));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&b, 2 * MiB));
    printf("rc_refused=%d\n", (int)cudaMalloc(&c, 4 * MiB));
    fflush(stdout);
    ready();
    hold();
    return 0;
}

/* A context made with cuCtxCreate beside device 0's primary one (cuda.h cuCtxDestroy: the
 * allocations of a destroyed context are freed with it): destroying it drops its two allocations
 * and only those. With one device the shim counts them without asking for their context (the
 * plain path), so it asks just before the teardown; with two (SIMCUDA_DEVICE_COUNT=2), device 1's
 * primary context holds 16 MiB through it. Driver entry points through cudaGetDriverEntryPoint.
 * ctx_destroy_thread: cuCtxDestroy is called from a thread with no current context. */
struct destroy_call {
    PFN_cuCtxDestroy_v4000 destroy;
    CUcontext ctx;
    int rc;
};

static void *destroy_elsewhere(void *arg)
{
    struct destroy_call *c = arg;
    c->rc = (int)c->destroy(c->ctx);
    return NULL;
}

/* 1 MiB in device 0's primary context, then a context made with cuCtxCreate holding 2 MiB and
 * 4 MiB; the primary context is current again on return. 0, or nonzero if a driver call failed. */
static int memory_in_created_context(CUcontext *mine)
{
    PFN_cuCtxCreate_v3020 create = entry("cuCtxCreate", 3020);
    PFN_cuCtxGetCurrent_v4000 get = entry("cuCtxGetCurrent", 4000);
    PFN_cuCtxSetCurrent_v4000 set = entry("cuCtxSetCurrent", 4000);
    PFN_cuMemAlloc_v3020 alloc = entry("cuMemAlloc", 3020);
    void *a;
    CUcontext primary;
    CUdeviceptr p, q;
    CHECK(cudaMalloc(&a, MiB));
    return get(&primary) || create(mine, 0, 0) || alloc(&p, 2 * MiB) || alloc(&q, 4 * MiB) ||
           set(primary);
}

/* cuCtxDetach (deprecated, looked up by cudart 13.0): an attach raises the context's usage count,
 * so the first detach ends nothing and the second destroys the context with its 6 MiB. */
static int scenario_ctx_detach(void)
{
    PFN_cuCtxAttach_v2000 attach = entry("cuCtxAttach", 2000);
    PFN_cuCtxDetach_v2000 detach = entry("cuCtxDetach", 2000);
    PFN_cuCtxSetCurrent_v4000 set = entry("cuCtxSetCurrent", 4000);
    PFN_cuCtxGetCurrent_v4000 get = entry("cuCtxGetCurrent", 4000);
    struct cushim_device_stats st;
    CUcontext mine, again, primary;
    if (get(&primary) != CUDA_SUCCESS || memory_in_created_context(&mine) || set(mine) != CUDA_SUCCESS)
        return 20;
    CUresult rc_attach = attach(&again, 0);
    printf("rc_attach=%d\nsame=%d\n", (int)rc_attach, again == mine);
    printf("rc_detach1=%d\n", (int)detach(mine));
    if (cushim_stats(0, &st, 0) == 0)
        printf("after_detach1=%llu\n", (unsigned long long)st.kind[CUSHIM_MEM_DEVICE].current_bytes);
    printf("rc_detach2=%d\n", (int)detach(mine));
    if (cushim_stats(0, &st, 0) == 0)
        printf("after_detach2=%llu\n", (unsigned long long)st.kind[CUSHIM_MEM_DEVICE].current_bytes);
    printf("api_version_asks=%llu\n", (unsigned long long)sim_api().calls("cuCtxGetApiVersion"));
    return set(primary) != CUDA_SUCCESS;
}

static int ctx_destroy(bool other_thread)
{
    PFN_cuCtxDestroy_v4000 destroy = entry("cuCtxDestroy", 4000);
    int n = 0;
    void *b, *c;
    CUcontext mine;
    CHECK(cudaGetDeviceCount(&n));
    if (memory_in_created_context(&mine))
        return 20;
    CHECK(cudaMalloc(&b, 8 * MiB));
    if (n > 1) {
        CHECK(cudaSetDevice(1));
        CHECK(cudaMalloc(&c, 16 * MiB));
        CHECK(cudaSetDevice(0));
    }
    struct destroy_call call = {destroy, mine, -1};
    pthread_t t;
    if (other_thread) {
        if (pthread_create(&t, NULL, destroy_elsewhere, &call) || pthread_join(t, NULL))
            return 21;
    } else {
        destroy_elsewhere(&call);
    }
    printf("rc_destroy=%d\n", call.rc);
    CHECK(cudaFree(b));
    return 0;
}

static int scenario_ctx_destroy(void)
{
    return ctx_destroy(false);
}

static int scenario_ctx_destroy_thread(void)
{
    return ctx_destroy(true);
}

/* A context created here and current on this thread, destroyed by another thread: the
 * allocation that follows fails (CUDA_ERROR_CONTEXT_IS_DESTROYED), as without the shim. */
static PFN_cuCtxDestroy_v4000 destroyed_by_thread_fn;
static CUcontext destroyed_by_thread_ctx;

static void *destroy_other(void *arg)
{
    (void)arg;
    printf("rc_destroy=%d\n", (int)destroyed_by_thread_fn(destroyed_by_thread_ctx));
    return NULL;
}

static int scenario_destroyed_current(void)
{
    PFN_cuCtxCreate_v3020 create = entry("cuCtxCreate", 3020);
    PFN_cuMemAlloc_v3020 alloc = entry("cuMemAlloc", 3020);
    destroyed_by_thread_fn = entry("cuCtxDestroy", 4000);
    CUdeviceptr p;
    pthread_t t;
    if (create(&destroyed_by_thread_ctx, 0, 0))
        return 20;
    printf("rc_alloc=%d\n", (int)alloc(&p, MiB));
    pthread_create(&t, NULL, destroy_other, NULL);
    pthread_join(t, NULL);
    printf("rc_alloc_after_destroy=%d\n", (int)alloc(&p, MiB));
    return 0;
}

/* A free in its call while another thread destroys the allocation's context (cuda.h
 * cuCtxDestroy: "The context ctx will be destroyed regardless of how many threads it is current
 * to"; its allocations go with it, a misuse the header leaves to the caller): the free fails and
 * the memory is gone. Run with SIMCUDA_INJECT=cuMemFree_v2:1:raise=SIGUSR1, which has the job
 * destroy the context at the free's entry. 1 MiB stays in the primary context; prints rc_free,
 * rc_destroy and after.held. */
static PFN_cuCtxDestroy_v4000 racing_destroy_fn;
static CUcontext racing_ctx;

static void destroy_racing(void)
{
    printf("rc_destroy=%d\n", (int)racing_destroy_fn(racing_ctx));
}

static int scenario_free_racing_destroy(void)
{
    PFN_cuCtxCreate_v3020 create = entry("cuCtxCreate", 3020);
    PFN_cuMemAlloc_v3020 alloc = entry("cuMemAlloc", 3020);
    PFN_cuMemFree_v3020 free_ = entry("cuMemFree", 3020);
    racing_destroy_fn = entry("cuCtxDestroy", 4000);
    CUdeviceptr p;
    pthread_t t;
    void *a;
    CHECK(cudaMalloc(&a, MiB));
    if (create(&racing_ctx, 0, 0) || alloc(&p, 2 * MiB))
        return 20;
    if (job_thread_start(&t, destroy_racing))
        return 12;
    printf("rc_free=%d\n", (int)free_(p));
    pthread_join(t, NULL);
    print_held("after");
    return 0;
}

/* A context's allocations, then its teardown and a device reset: everything is gone. Run with
 * one cuPointerGetAttribute failing (a transient error), the allocation asked about is asked again
 * at the reset and does not stay counted for the rest of the process. */
static int scenario_teardown_then_reset(void)
{
    PFN_cuCtxDestroy_v4000 destroy = entry("cuCtxDestroy", 4000);
    CUcontext mine;
    if (memory_in_created_context(&mine))
        return 20;
    printf("rc_destroy=%d\n", (int)destroy(mine));
    CHECK(cudaDeviceReset());
    return 0;
}

/* Primary-context retain/release pairs that end nothing (the runtime holds its own reference):
 * the shim asks each allocation's context once (at the first release), then not again until a
 * new allocation is made, and then only that one's. */
static int scenario_release_cycles(void)
{
    PFN_cuDevicePrimaryCtxRetain_v7000 retain = entry("cuDevicePrimaryCtxRetain", 7000);
    PFN_cuDevicePrimaryCtxRelease_v11000 release = entry("cuDevicePrimaryCtxRelease", 11000);
    struct sim_api sim = sim_api();
    void *p;
    CUcontext c;
    for (int i = 0; i < 100; i++)
        CHECK(cudaMalloc(&p, 4096));
    uint64_t q0 = sim.calls("cuPointerGetAttribute");
    for (int i = 0; i < 10; i++)
        if (retain(&c, 0) || release(0))
            return 20;
    uint64_t q1 = sim.calls("cuPointerGetAttribute");
    CHECK(cudaMalloc(&p, 4096));
    for (int i = 0; i < 10; i++)
        if (retain(&c, 0) || release(0))
            return 21;
    uint64_t q2 = sim.calls("cuPointerGetAttribute");
    printf("queries_first=%llu\nqueries_after_one_more=%llu\n", (unsigned long long)(q1 - q0),
           (unsigned long long)(q2 - q1));
    return 0;
}

/* 300,000 live allocations, then cudaDeviceReset: every one goes with the context. With one
 * device the shim asks each one's context just before the reset, in one pass over its table
 * (a first version gave up after 4096 batches of 64 and rescanned the table for each batch). */
static int scenario_many_reset(void)
{
    void *p;
    for (int i = 0; i < 300000; i++)
        CHECK(cudaMalloc(&p, 512));
    CHECK(cudaDeviceReset());
    return 0;
}

/* 20,000 live allocations of 512 bytes, all freed, then one of 4 KiB kept: enough entries to
 * grow the shim's allocation table many times. */
static int scenario_many_live(void)
{
    enum { N = 20000 };
    void **p = malloc(N * sizeof *p);
    if (!p)
        return 2;
    for (int i = 0; i < N; i++)
        CHECK(cudaMalloc(&p[i], 512));
    for (int i = 0; i < N; i++)
        CHECK(cudaFree(p[i]));
    free(p);
    void *keep;
    CHECK(cudaMalloc(&keep, 4096));
    return 0;
}

/* Run with libfailmmap.so (FAIL_MMAP_AFTER=1) so that the shim's tables fill up. One 64 KiB
 * (SIMCUDA_VMM_GRANULARITY) handle mapped at MAPS_FULL places, more than the shim's mapping table
 * holds then. With REFUSE=1 the first mapping's unmap is refused once (SIMCUDA_INJECT=
 * cuMemUnmap:1:raise=SIGUSR1,cuMemUnmap:1:CODE) while the signal's job maps the handle at 1000
 * more places. Then every mapping is unmapped and the handle released. Prints rc_unmap (REFUSE)
 * and after_release=<device total cushim counts then>. */
#define MAPS_FULL 16000
#define MAPS_MORE 1000
static CUdeviceptr full_va;
static size_t full_g;
static CUmemGenericAllocationHandle full_h;

static void map_more(void)
{
    struct vmm_api v = vmm_api();
    for (int i = 0; i < MAPS_MORE; i++)
        if (v.map(full_va + (MAPS_FULL + i) * full_g, full_g, 0, full_h, 0))
            exit(20);
}

static int scenario_vmm_maps_full(void)
{
    CHECK(cudaFree(NULL));
    struct vmm_api v = vmm_api();
    uint64_t (*current)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");
    CUmemAllocationProp prop = vmm_prop(0);
    bool refuse = getenv("REFUSE") && atoi(getenv("REFUSE"));
    if (!current || v.granularity(&full_g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ||
        v.create(&full_h, full_g, &prop, 0) || v.reserve(&full_va, (MAPS_FULL + MAPS_MORE) * full_g, 0, 0, 0))
        return 12;
    int maps = MAPS_FULL;
    for (int i = 0; i < MAPS_FULL; i++)
        if (v.map(full_va + i * full_g, full_g, 0, full_h, 0))
            return 13;
    if (refuse) {
        pthread_t t;
        if (job_thread_start(&t, map_more))
            return 14;
        printf("rc_unmap=%d\n", (int)v.unmap(full_va, full_g));
        pthread_join(t, NULL);
        maps += MAPS_MORE;
    }
    for (int i = 0; i < maps; i++)
        if (v.unmap(full_va + i * full_g, full_g))
            return 15;
    if (v.release(full_h))
        return 16;
    printf("after_release=%llu\ngranularity=%zu\n", (unsigned long long)current(0), full_g);
    return 0;
}

/* Run with libfailmmap.so (FAIL_MMAP_AFTER=1): 20,000 live allocations of 512 bytes fill the
 * shim's table; the free of the last one it counted is refused (SIMCUDA_INJECT=
 * cuMemFree_v2:1:raise=SIGUSR1,cuMemFree_v2:1:CODE) while the signal's job makes 1000 more,
 * then freed again; then everything is freed. Prints rc_free, after_refusal and end=<device total
 * cushim counts after the refusal and at the end>. */
#define FREE_FULL_N 20000
#define FREE_FULL_MORE 1000
static void *free_full_more[FREE_FULL_MORE];

static void allocate_more(void)
{
    for (int i = 0; i < FREE_FULL_MORE; i++)
        if (cudaMalloc(&free_full_more[i], 512) != cudaSuccess)
            exit(20);
}

static int scenario_free_refused_table_full(void)
{
    uint64_t (*current)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");
    void **p = malloc(FREE_FULL_N * sizeof *p);
    if (!p || !current)
        return 2;
    CHECK(cudaFree(NULL));
    int counted = -1;
    for (int i = 0; i < FREE_FULL_N; i++) {
        uint64_t before = current(0);
        CHECK(cudaMalloc(&p[i], 512));
        if (current(0) == before + 512)
            counted = i;
    }
    if (counted < 0)
        return 3;
    pthread_t t;
    if (job_thread_start(&t, allocate_more))
        return 4;
    printf("rc_free=%d\n", (int)cudaFree(p[counted]));
    pthread_join(t, NULL);
    printf("after_refusal=%llu\n", (unsigned long long)current(0));
    for (int i = 0; i < FREE_FULL_N; i++)
        CHECK(cudaFree(p[i]));
    for (int i = 0; i < FREE_FULL_MORE; i++)
        CHECK(cudaFree(free_full_more[i]));
    free(p);
    printf("end=%llu\n", (unsigned long long)current(0));
    return 0;
}

/* Pools by location: a pool of device 1 used on a stream of device 0 holds device 1's memory
 * (cuda.h, cuMemAllocFromPoolAsync: "The specified memory pool may be from a device different
 * than that of the specified hStream"); CUDA 13's default host pool holds pinned host memory. */
static int scenario_pool_locations(void)
{
    cudaStream_t s;
    cudaMemPool_t p1;
    void *a;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaDeviceGetDefaultMemPool(&p1, 1));
    CHECK(cudaMallocFromPoolAsync(&a, 2 * MiB, p1, s));
#if CUDA_VERSION >= 13000
    PFN_cuMemGetDefaultMemPool_v13000 get = entry("cuMemGetDefaultMemPool", 13000);
    CUmemLocation host = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    CUmemoryPool hp;
    void *b;
    if (get(&hp, &host, CU_MEM_ALLOCATION_TYPE_PINNED) != CUDA_SUCCESS)
        return 20;
    CHECK(cudaMallocFromPoolAsync(&b, MiB, (cudaMemPool_t)hp, s));
    /* A pool on no device counts on the stream's (a review: it took the current context's
     * device, and none with no context current, cuda.h cuMemAllocFromPoolAsync refusing only
     * "default stream specified with no current context"): 3 MiB on a stream of device 1 while
     * device 0 is current; 4 MiB on device 0's stream with no context current. */
    cudaStream_t s1;
    void *c;
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaMallocFromPoolAsync(&c, 3 * MiB, (cudaMemPool_t)hp, s1));
    PFN_cuCtxGetCurrent_v4000 get_current = entry("cuCtxGetCurrent", 4000);
    PFN_cuCtxSetCurrent_v4000 set_current = entry("cuCtxSetCurrent", 4000);
    PFN_cuMemAllocFromPoolAsync_v11020 from_pool = entry("cuMemAllocFromPoolAsync", 11020);
    CUcontext ctx;
    CUdeviceptr dp;
    if (get_current(&ctx) != CUDA_SUCCESS || set_current(NULL) != CUDA_SUCCESS)
        return 21;
    if (from_pool(&dp, 4 * MiB, hp, (CUstream)s) != CUDA_SUCCESS)
        return 22;
    if (set_current(ctx) != CUDA_SUCCESS)
        return 23;
    CHECK(cudaStreamSynchronize(s1));
#endif
    CHECK(cudaStreamSynchronize(s));
    return 0;
}

/* Run with libfailmmap.so (FAIL_MMAP_AFTER=0: the shim has no table at all) and a device limit
 * of 1 MiB: a host pool made (which the shim cannot record), 4 MiB from it on the default stream,
 * freed; then a 4 MiB cudaMalloc, which the limit refuses. Prints rc_host_pool, rc_malloc. */
static int scenario_host_pool_unrecorded(void)
{
#if CUDA_VERSION >= 13000
    PFN_cuMemPoolCreate_v11020 create = entry("cuMemPoolCreate", 11020);
    PFN_cuMemAllocFromPoolAsync_v11020 from_pool = entry("cuMemAllocFromPoolAsync", 11020);
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CUmemoryPool hp;
    CUdeviceptr dp;
    CHECK(cudaFree(NULL));
    if (create(&hp, &props) != CUDA_SUCCESS)
        return 20;
    CUresult r = from_pool(&dp, 4 * MiB, hp, NULL);
    printf("rc_host_pool=%d\n", (int)r);
    if (r == CUDA_SUCCESS) {
        CHECK(cudaFreeAsync((void *)(uintptr_t)dp, 0));
        CHECK(cudaStreamSynchronize(0));
    }
    void *p;
    printf("rc_malloc=%d\n", (int)cudaMalloc(&p, 4 * MiB));
#endif
    return 0;
}

/* Run with libfailmmap.so (FAIL_MMAP_AFTER=0: the shim has no table at all) and a device limit
 * of 1 MiB: a capture (global mode) on a stream, in which a 4 MiB cudaMallocAsync and its free
 * are graph nodes (no device memory now, none of the limit's business). Prints rc_alloc, rc_end. */
static int scenario_capture_no_table(void)
{
    cudaStream_t s;
    cudaGraph_t g;
    void *p = NULL;
    CHECK(cudaFree(NULL));
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    cudaError_t r = cudaMallocAsync(&p, 4 * MiB, s);
    printf("rc_alloc=%d\n", (int)r);
    if (r == cudaSuccess)
        CHECK(cudaFreeAsync(p, s));
    printf("rc_end=%d\n", (int)cudaStreamEndCapture(s, &g));
    return 0;
}

/* Run as capture_no_table: CAPTURES streams (default 64) begin relaxed captures; a 4 MiB
 * cudaMallocAsync on the last one; all end; then a 4 MiB cudaMallocAsync on the default stream,
 * with no capture live, and a cudaMemGetInfo. Prints rc_in_capture, rc_ends (how many ends
 * failed), rc_after, untracked_in_run (cushim.h, after the cudaMemGetInfo). */
static int scenario_many_captures_no_table(void)
{
    const char *n_s = getenv("CAPTURES");
    int n = n_s ? atoi(n_s) : 64, bad = 0;
    cudaStream_t *s = calloc((size_t)n, sizeof *s);
    void *p = NULL;
    if (!s || n < 1)
        return 2;
    CHECK(cudaFree(NULL));
    for (int i = 0; i < n; i++) {
        CHECK(cudaStreamCreate(&s[i]));
        CHECK(cudaStreamBeginCapture(s[i], cudaStreamCaptureModeRelaxed));
    }
    cudaError_t r = cudaMallocAsync(&p, 4 * MiB, s[n - 1]);
    printf("rc_in_capture=%d\n", (int)r);
    if (r == cudaSuccess)
        CHECK(cudaFreeAsync(p, s[n - 1]));
    for (int i = 0; i < n; i++) {
        cudaGraph_t g;
        bad += cudaStreamEndCapture(s[i], &g) != cudaSuccess;
    }
    printf("rc_ends=%d\n", bad);
    printf("rc_after=%d\n", (int)cudaMallocAsync(&p, 4 * MiB, 0));
    size_t f, t; /* the untracked bytes are sampled here only with no capture live */
    CHECK(cudaMemGetInfo(&f, &t));
    struct cushim_device_stats st;
    printf("untracked_in_run=%llu\n",
           cushim_stats(0, &st, 0) == 0 ? (unsigned long long)st.untracked_bytes : 1ull);
    free(s);
    return 0;
}

/* Run with libfailmmap.so (FAIL_MMAP_AFTER=0: the shim has no table at all) and a device limit
 * of 1 MiB: device 0's default pool (which the shim cannot record), 4 MiB from it on the default
 * stream, which the limit refuses as it refuses a cudaMalloc. Prints rc_default_pool, then
 * rc_malloc. */
static int scenario_device_pool_unrecorded(void)
{
    cudaMemPool_t def;
    void *p;
    CHECK(cudaFree(NULL));
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    cudaError_t e = cudaMallocFromPoolAsync(&p, 4 * MiB, def, 0);
    printf("rc_default_pool=%d\n", (int)e);
    if (e == cudaSuccess) {
        CHECK(cudaFreeAsync(p, 0));
        CHECK(cudaStreamSynchronize(0));
    }
    printf("rc_malloc=%d\n", (int)cudaMalloc(&p, 4 * MiB));
    return 0;
}

static int scenario_oom(void)
{
    void *a, *b;
    CHECK(cudaMalloc(&a, MiB));
    cudaError_t e = cudaMalloc(&b, 2 * MiB);
    printf("rc=%d\n", (int)e);
    cudaGetLastError();
    return 0;
}

static int scenario_unknown_free(void)
{
    PFN_cuMemFree_v3020 dfree = entry("cuMemFree", 3020);
    CHECK(cudaFree(NULL));
    printf("rc_unknown=%d\n", (int)dfree((CUdeviceptr)0x12345600));
    printf("rc_null=%d\n", (int)cudaFree(NULL));
    return 0;
}

static int scenario_no_async(void)
{
    void *a, *b = NULL;
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    printf("rc_async=%d\n", (int)cudaMallocAsync(&b, MiB, s));
    cudaGetLastError();
    CHECK(cudaMalloc(&a, MiB));
    return 0;
}

/* async_stream_only: stream-ordered allocations only, on a created stream (no cudaMalloc, whose
 * context query tells the shim the device count first): 100 pairs of 1 MiB, then 2 MiB kept. Says
 * how often the stream's context was asked (cuStreamGetCtx). */
static int scenario_async_stream_only(void)
{
    cudaStream_t s;
    void *p;
    CHECK(cudaStreamCreate(&s));
    for (int i = 0; i < 100; i++) {
        CHECK(cudaMallocAsync(&p, MiB, s));
        CHECK(cudaFreeAsync(p, s));
    }
    CHECK(cudaMallocAsync(&p, 2 * MiB, s));
    CHECK(cudaStreamSynchronize(s));
    struct sim_api a = sim_api();
    if (a.calls)
        printf("calls.cuStreamGetCtx=%llu\n", (unsigned long long)a.calls("cuStreamGetCtx"));
    return 0;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static int scenario_entry_points(void)
{
    void *fn = NULL, *fn_pt = NULL;
    enum cudaDriverEntryPointQueryResult st;
    CUdeviceptr p1, p2, p3;
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &st));
    if (!fn || ((PFN_cuMemAlloc_v3020)fn)(&p1, 4096))
        return 13;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 3020, cudaEnableDefault, &st));
    if (!fn || ((PFN_cuMemAlloc_v3020)fn)(&p2, 8192))
        return 14;
    CHECK(cudaGetDriverEntryPoint("cuMemAllocAsync", &fn_pt, cudaEnablePerThreadDefaultStream, &st));
    if (!fn_pt || ((PFN_cuMemAllocAsync_v11020_ptsz)fn_pt)(&p3, 16384, NULL))
        return 15;
    struct sim_api a = sim_api();
    if (a.calls) {
        printf("calls.cuMemAllocAsync_ptsz=%llu\n", (unsigned long long)a.calls("cuMemAllocAsync_ptsz"));
        printf("calls.cuMemAllocAsync=%llu\n", (unsigned long long)a.calls("cuMemAllocAsync"));
        printf("calls.cuMemAlloc_v2=%llu\n", (unsigned long long)a.calls("cuMemAlloc_v2"));
    }
    return 0;
}
#pragma GCC diagnostic pop

#define THREADS 16
#define PAIRS 10000

static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < PAIRS; i++) {
        void *p;
        size_t size = 1 + (size_t)(rand_r(&seed) % (1 << 20));
        if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess)
            return (void *)1;
    }
    return NULL;
}

static int scenario_threads(void)
{
    pthread_t t[THREADS];
    int bad = 0;
    CHECK(cudaFree(NULL));
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < THREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    return bad ? 16 : 0;
}

/* One of 8 threads under a budget: 2000 rounds of a cudaMalloc and a cudaMallocAsync on its own
 * stream (sizes up to 1 MiB; some refused), each freed, the async ones by cudaFreeAsync. */
static void *budget_churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess)
        return (void *)1;
    for (int i = 0; i < 2000; i++) {
        void *p = NULL, *q = NULL;
        if (cudaMalloc(&p, 1 + (size_t)(rand_r(&seed) % MiB)) != cudaSuccess)
            p = NULL;
        if (cudaMallocAsync(&q, 1 + (size_t)(rand_r(&seed) % MiB), s) != cudaSuccess)
            q = NULL;
        cudaGetLastError();
        if ((p && cudaFree(p) != cudaSuccess) || (q && cudaFreeAsync(q, s) != cudaSuccess))
            return (void *)2;
    }
    return cudaStreamSynchronize(s) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess ? NULL : (void *)3;
}

/* 8 threads churning under the budget (budget_churn), then 3 MiB kept: the budget's held bytes
 * as published (print_held) against cudaMemGetInfo's free, which the budget computes itself. */
static int scenario_budget_threads(void)
{
    pthread_t t[8];
    void *keep;
    CHECK(cudaFree(NULL));
    for (uintptr_t i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, budget_churn, (void *)(i + 1));
    int bad = 0;
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    if (bad)
        return 16;
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMalloc(&keep, 3 * MiB));
    size_t free_b, total_b;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("threads.free=%zu\n", free_b);
    print_held("threads");
    return 0;
}

/* Holds 1 MiB + 4 KiB (peak 1 MiB + 4 KiB + 3 MiB) until told to exit. */
static int scenario_hold(void)
{
    void *a, *b, *c;
    CHECK(cudaMalloc(&a, MiB));
    CHECK(cudaMalloc(&b, 3 * MiB));
    CHECK(cudaMalloc(&c, 4096));
    CHECK(cudaFree(b));
    ready();
    hold();
    return 0;
}

/* Frees the driver refuses (SIMCUDA_INJECT=cuMemFree_v2:1:..., cuMemFreeAsync:1:...,
 * cuMemRelease:1:..., cuArrayDestroy:1:...) leave the allocations the program's: each is freed
 * once more, then succeeds. Prints rc_* of the failed calls and live_after_failures=<device total
 * cushim counts after them>. */
static int scenario_free_fails(void)
{
    uint64_t (*current)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");
    void *a, *b;
    CHECK(cudaMalloc(&a, MiB));
    CHECK(cudaMallocAsync(&b, 2 * MiB, 0));
    struct vmm_api v = vmm_api();
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g = 0;
    CUmemGenericAllocationHandle h;
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || v.create(&h, g, &prop, 0))
        return 12;
    PFN_cuArrayCreate_v3020 create = entry("cuArrayCreate", 3020);
    PFN_cuArrayDestroy_v2000 destroy = entry("cuArrayDestroy", 2000);
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 256, .Height = 256, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    CUarray arr;
    if (create(&arr, &d))
        return 13;
    printf("rc_free=%d\nrc_free_async=%d\nrc_release=%d\nrc_destroy=%d\n", (int)cudaFree(a),
           (int)cudaFreeAsync(b, 0), (int)v.release(h), (int)destroy(arr));
    printf("live_after_failures=%llu\ngranularity=%zu\n", (unsigned long long)(current ? current(0) : 0), g);
    CHECK(cudaFree(a));
    CHECK(cudaFreeAsync(b, 0));
    CHECK(cudaStreamSynchronize(0));
    if (v.release(h) || destroy(arr))
        return 14;
    return 0;
}

/* A 4 MiB cudaMalloc freed twice (the tests make the driver refuse the first free:
 * SIMCUDA_INJECT). Prints rc_first and rc_second. */
static int scenario_free_refused_once(void)
{
    void *a;
    CHECK(cudaMalloc(&a, 4 * MiB));
    int first = (int)cudaFree(a);
    int second = (int)cudaFree(a);
    printf("rc_first=%d\nrc_second=%d\n", first, second);
    return 0;
}

/* A free and another thread's allocation at once: the handler of the signal that
 * SIMCUDA_INJECT=cuMemFree_v2:1:raise=SIGUSR1 raises inside the free (before the driver frees
 * anything) has the second thread make its 64 MiB allocation and waits for it. Prints
 * current_in_free=<device total cushim counted then> and peak=<its peak at the end>. */
static uint64_t other_seen;
static void other_allocates(void)
{
    uint64_t (*current)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");
    void *p;
    if (cudaMalloc(&p, 64 * MiB) != cudaSuccess)
        exit(20);
    other_seen = current ? current(0) : 0;
}

static int scenario_free_while_other_allocates(void)
{
    uint64_t (*peak)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_peak_bytes");
    void *a;
    pthread_t t;
    CHECK(cudaMalloc(&a, 64 * MiB));
    if (job_thread_start(&t, other_allocates))
        return 12;
    CHECK(cudaFree(a));
    pthread_join(t, NULL);
    printf("current_in_free=%llu\npeak=%llu\n", (unsigned long long)other_seen,
           (unsigned long long)(peak ? peak(0) : 0));
    return 0;
}

/* Memory of four kinds left for the exit report's live-at-exit list: 3 MiB of device memory
 * (and 5 MiB freed), a VMM handle of two granules (mapped, then released; its export imported, not
 * mapped: no memory of its own), a 256x256 float4 array (1 MiB),
 * 64 KiB pinned host memory and 20 device allocations of 1 KiB. Prints each address (or
 * handle) as key=value lines. */
static int scenario_live_at_exit_mix(void)
{
    void *dev, *gone, *host, *small[20];
    CHECK(cudaMalloc(&dev, 3 * MiB));
    CHECK(cudaMalloc(&gone, 5 * MiB));
    CHECK(cudaFree(gone));
    CHECK(cudaMallocHost(&host, 64 * 1024));
    for (int i = 0; i < 20; i++) {
        CHECK(cudaMalloc(&small[i], 1024));
        printf("small%d=%llu\n", i, (unsigned long long)(uintptr_t)small[i]);
    }
    struct vmm_api v = vmm_api();
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g = 0;
    CUmemGenericAllocationHandle h;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || v.create(&h, 2 * g, &prop, 0))
        return 12;
    /* Its own export imported and never mapped: a reference, no memory counted (none listed). */
    PFN_cuMemExportToShareableHandle_v10020 export_ = entry("cuMemExportToShareableHandle", 10020);
    PFN_cuMemImportFromShareableHandle_v10020 import_ = entry("cuMemImportFromShareableHandle", 10020);
    int fd = -1;
    CUmemGenericAllocationHandle imported;
    if (export_(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) ||
        import_(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return 14;
    /* Mapped, then released: the mapping keeps it (cuda.h cuMemRelease), listed at its address. */
    CUdeviceptr va;
    if (v.reserve(&va, 2 * g, 0, 0, 0) || v.map(va, 2 * g, 0, h, 0) || v.release(h))
        return 15;
    PFN_cuArrayCreate_v3020 create = entry("cuArrayCreate", 3020);
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 256, .Height = 256, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    CUarray a;
    if (create(&a, &d))
        return 13;
    printf("dev=%llu\nhost=%llu\nvmm=%llu\nvmm_va=%llu\narray=%llu\ngranularity=%zu\n",
           (unsigned long long)(uintptr_t)dev, (unsigned long long)(uintptr_t)host, (unsigned long long)h,
           (unsigned long long)va, (unsigned long long)(uintptr_t)a, g);
    return 0;
}

/* hold, having made a new time namespace for its children (unshare(CLONE_NEWTIME), boottime +1000 s)
 * without exec'ing: it stays in its own, while /proc/PID/timens_offsets shows the children's
 * (time_namespaces(7)). Needs root; exits 3 when it cannot. */
static int scenario_hold_new_timens(void)
{
    void *a;
    CHECK(cudaMalloc(&a, MiB));
    if (unshare(CLONE_NEWTIME) != 0)
        return 3;
    int fd = open("/proc/self/timens_offsets", O_WRONLY);
    if (fd < 0 || write(fd, "boottime 1000 0", 15) != 15)
        return 3;
    close(fd);
    ready();
    hold();
    return 0;
}

/* 1 MiB from cudaMallocHost and 64 KiB of the program's own memory pinned with cudaHostRegister,
 * beside 4 KiB of device memory; held. */
static int scenario_hold_pinned(void)
{
    void *host, *dev;
    static char own[64 * 1024] __attribute__((aligned(4096)));
    CHECK(cudaMalloc(&dev, 4096));
    CHECK(cudaMallocHost(&host, MiB));
    CHECK(cudaHostRegister(own, sizeof own, cudaHostRegisterDefault));
    ready();
    hold();
    CHECK(cudaHostUnregister(own));
    return 0;
}

/* Under a budget of 2 MiB (CUSHIM_DEVICE_LIMIT): 1 MiB kept, a request of 3 MiB refused; held. */
static int scenario_hold_refused(void)
{
    void *a, *b;
    CHECK(cudaMalloc(&a, MiB));
    printf("rc_refused=%d\n", (int)cudaMalloc(&b, 3 * MiB));
    fflush(stdout);
    ready();
    hold();
    return 0;
}

/* The shim started through its API (a phase set before any CUDA call), then held: a process under
 * cushim with no device activity yet. */
static int scenario_hold_api(void)
{
    int (*set_phase)(int) = (int (*)(int))cushim_fn("cushim_set_phase");
    if (!set_phase || set_phase(0) < 0)
        return 20;
    ready();
    hold();
    return 0;
}

/* hold, then cushim.h's phase calls (the segment's phase may have been overwritten meanwhile by
 * another process of the user): get, set, push and pop must each return a phase, CUSHIM_RUN or
 * CUSHIM_COMPILE, as cushim.h promises. Exits 30 + the call that did not. */
static int scenario_hold_phase_calls(void)
{
    int (*get_phase)(void) = (int (*)(void))cushim_fn("cushim_get_phase");
    int (*set_phase)(int) = (int (*)(int))cushim_fn("cushim_set_phase");
    int (*push_phase)(int) = (int (*)(int))cushim_fn("cushim_push_phase");
    int (*pop_phase)(void) = (int (*)(void))cushim_fn("cushim_pop_phase");
    void *a;
    if (!get_phase || !set_phase || !push_phase || !pop_phase)
        return 20;
    CHECK(cudaMalloc(&a, 4096));
    ready();
    hold();
    int got = get_phase();
    if (got != CUSHIM_RUN && got != CUSHIM_COMPILE)
        return 30;
    if (push_phase(CUSHIM_COMPILE) != 0)
        return 31;
    int popped = pop_phase();
    if (popped != CUSHIM_RUN && popped != CUSHIM_COMPILE)
        return 32;
    int was = set_phase(CUSHIM_RUN);
    if (was != CUSHIM_RUN && was != CUSHIM_COMPILE)
        return 33;
    CHECK(cudaFree(a));
    return 0;
}

/* hold, then device 0's counters through cushim_get_device_stats (its record may have been
 * overwritten meanwhile by another process of the user): they must say device 0. Exits 30 when
 * the call fails, 31 when it names another ordinal. */
static int scenario_hold_stats_call(void)
{
    struct cushim_device_stats st;
    void *a;
    CHECK(cudaMalloc(&a, 4096));
    ready();
    hold();
    if (cushim_stats(0, &st, 0) != 0)
        return 30;
    if (st.ordinal != 0)
        return 31;
    CHECK(cudaFree(a));
    return 0;
}

/* hold, then 20 reads of device 0's current bytes through cushim.h, timed (a record's bracket
 * may have been left open meanwhile by another process of the user, for good). Exits 30 when they
 * took more than 2 s in all (each waits at most 200 ms for a record that never settles). */
static int scenario_hold_timed_reads(void)
{
    uint64_t (*current)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");
    struct timespec t0, t1;
    void *a;
    if (!current)
        return 20;
    CHECK(cudaMalloc(&a, 4096));
    ready();
    hold();
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 20; i++)
        current(0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(cudaFree(a));
    return t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9 > 2 ? 30 : 0;
}

/* cushim.h's phase calls made wrongly before any CUDA call (a phase out of range, a pop with
 * nothing pushed): each returns -1; prints what they returned. */
static int scenario_api_misuse(void)
{
    int (*set_phase)(int) = (int (*)(int))cushim_fn("cushim_set_phase");
    int (*push_phase)(int) = (int (*)(int))cushim_fn("cushim_push_phase");
    int (*pop_phase)(void) = (int (*)(void))cushim_fn("cushim_pop_phase");
    if (!set_phase || !push_phase || !pop_phase)
        return 20;
    printf("set=%d push=%d pop=%d\n", set_phase(5), push_phase(99), pop_phase());
    return 0;
}

/* The main thread ends (pthread_exit) while another one holds memory: the process lives on. Its
 * first CUDA call comes after the main thread has ended (its state Z: /proc/PID/cmdline empty). */
static void *holder(void *arg)
{
    (void)arg;
    void *p;
    char path[64], state[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    for (int i = 0; i < 500; i++) {
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(state, 1, sizeof state - 1, f) : 0;
        if (f)
            fclose(f);
        state[n] = '\0';
        const char *close_paren = strrchr(state, ')');
        if (!f || (close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z'))
            break;
        usleep(10000);
    }
    CHECK(cudaMalloc(&p, MiB));
    ready();
    hold();
    return NULL;
}

static int scenario_main_exits(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, holder, NULL) != 0)
        return 30;
    pthread_exit(NULL);
}

/* Holds stream-ordered memory: the live view reads the pool's reserve without any cudaMemGetInfo. */
static int scenario_hold_async(void)
{
    cudaStream_t s;
    void *a;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocAsync(&a, MiB, s));
    CHECK(cudaStreamSynchronize(s));
    ready();
    hold();
    return 0;
}

/* Graph memory: 8 MiB attached by a launch, freed with cudaFree, then the graph pool's in-use
 * high-water mark reset (cudaDeviceSetGraphMemAttribute: "can only be reset to zero"); held for
 * the live view. */
static int scenario_hold_graph_reset(void)
{
    struct cudaMemAllocNodeParams params;
    memset(&params, 0, sizeof params);
    params.poolProps.allocType = cudaMemAllocationTypePinned;
    params.poolProps.location.type = cudaMemLocationTypeDevice;
    params.poolProps.location.id = 0;
    params.bytesize = 8 * MiB;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphNode_t node;
    cudaGraphExec_t x;
    uint64_t zero = 0;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaGraphCreate(&g, 0));
    CHECK(cudaGraphAddMemAllocNode(&node, g, NULL, 0, &params));
    CHECK(cudaGraphInstantiateWithFlags(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(params.dptr));
    CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero));
    ready();
    hold();
    return 0;
}

/* A forked child that exits normally must leave the parent's segment alone. */
static int scenario_fork(void)
{
    void *a;
    CHECK(cudaMalloc(&a, 2 * MiB));
    pid_t pid = fork();
    if (pid == 0)
        exit(0);
    int status;
    waitpid(pid, &status, 0);
    ready();
    hold();
    return 0;
}

/* A forked child that uses CUDA itself (whatever the result: the shim starts for it and says so
 * in its log), then a parent that allocates after it. */
static int scenario_fork_child_cuda(void)
{
    void *a;
    CHECK(cudaMalloc(&a, 2 * MiB));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        void *b;
        (void)cudaMalloc(&b, MiB);
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(cudaFree(a));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Closes every descriptor above 2 (as a daemon does), opens `path` (it gets the lowest number,
 * the one the shim's log file had), writes `text` there, then makes the shim log a line
 * (cudaDeviceReset: a context torn down, at debug level). */
static void daemon_like(const char *path, const char *text)
{
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        _exit(40);
    void *p;
    CHECK(cudaMalloc(&p, MiB));
    CHECK(cudaDeviceReset());
    if (write(fd, "end\n", 4) != 4)
        _exit(41);
    close(fd);
}

/* A parent and its forked child that each close the descriptors they did not open and open files
 * of their own ($DATA_DIR/parent, $DATA_DIR/child): the shim's log lines must go elsewhere. */
static int scenario_daemon_fds(void)
{
    const char *dir = getenv("DATA_DIR");
    char child[900], parent[900];
    snprintf(child, sizeof child, "%s/child", dir ? dir : ".");
    snprintf(parent, sizeof parent, "%s/parent", dir ? dir : ".");
    void *a;
    CHECK(cudaMalloc(&a, 2 * MiB));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        daemon_like(child, "child data\n");
        _exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 50;
    daemon_like(parent, "parent data\n");
    return 0;
}

/* Started with stdout and stderr closed: after its first CUDA call the program opens a data file
 * ($DATA_DIR/data), which takes descriptor 1, and another ($DATA_DIR/data2), descriptor 2; it
 * writes one line to each and frees. Nothing of the shim's may land in them. */
static int scenario_data_on_closed_outputs(void)
{
    const char *dir = getenv("DATA_DIR");
    char path[900], path2[900];
    snprintf(path, sizeof path, "%s/data", dir ? dir : ".");
    snprintf(path2, sizeof path2, "%s/data2", dir ? dir : ".");
    void *a;
    CHECK(cudaMalloc(&a, 2 * MiB));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int fd2 = open(path2, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd != 1 || fd2 != 2)
        return 40;
    if (write(fd, "DATA\n", 5) != 5 || write(fd2, "DATA2\n", 6) != 6)
        return 41;
    CHECK(cudaFree(a));
    return 0;
}

/* 16 threads allocating and freeing without a pause until $HOLD_FILE exists (more threads than
 * cores: some are preempted in the middle of an update), for readers of the live counters. */
static _Atomic int busy_stop;
static void *busy_thread(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    while (!atomic_load(&busy_stop)) {
        void *p[8];
        for (int k = 0; k < 8; k++)
            CHECK(cudaMalloc(&p[k], 4096 * (size_t)(1 + (i++ % 16))));
        for (int k = 0; k < 8; k++)
            CHECK(cudaFree(p[k]));
    }
    return NULL;
}

static int scenario_busy(void)
{
    pthread_t t[16];
    /* One allocation before the threads start and ready() says so: the segment exists by then
     * (a flaky failure: a reader came before any thread's first call made it). */
    void *first;
    CHECK(cudaMalloc(&first, 4096));
    CHECK(cudaFree(first));
    for (uintptr_t i = 0; i < 16; i++)
        pthread_create(&t[i], NULL, busy_thread, (void *)i);
    ready();
    hold();
    atomic_store(&busy_stop, 1);
    for (int i = 0; i < 16; i++)
        pthread_join(t[i], NULL);
    return 0;
}

/* 16 threads allocating and freeing 4 KiB without a pause (errors ignored: the process is ending
 * around them) while main calls exit(0) after 50 ms: the summary is taken while they count. */
static void *exit_busy_thread(void *arg)
{
    (void)arg;
    for (;;) {
        void *p;
        if (cudaMalloc(&p, 4096) == cudaSuccess)
            cudaFree(p);
    }
    return NULL;
}

static int scenario_exit_while_busy(void)
{
    void *keep;
    CHECK(cudaMalloc(&keep, MiB));
    pthread_t t;
    for (int i = 0; i < 16; i++)
        if (pthread_create(&t, NULL, exit_busy_thread, NULL) != 0)
            return 20;
    struct timespec pause = {0, 50000000};
    nanosleep(&pause, NULL);
    exit(0);
}

/* 1 MiB from the default pool, freed, synchronized: nothing read of the pools by the program. */
static int scenario_async_plain(void)
{
    cudaStream_t s;
    void *a;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMallocAsync(&a, MiB, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    return 0;
}

/* An array and a VMM handle asked for through the driver, results printed (the tests make the
 * driver refuse them: SIMCUDA_INJECT). */
static int scenario_refused_array_vmm(void)
{
    PFN_cuArrayCreate_v3020 array_create = entry("cuArrayCreate", 3020);
    struct vmm_api v = vmm_api();
    CHECK(cudaFree(NULL));
    CUarray arr = (CUarray)(uintptr_t)0x5ca1ab1e; /* left as it is by a refused create */
    CUDA_ARRAY_DESCRIPTOR ad = {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    printf("rc_array=%d\n", (int)array_create(&arr, &ad));
    printf("array_output_kept=%d\n", arr == (CUarray)(uintptr_t)0x5ca1ab1e);
    PFN_cuArray3DCreate_v3020 array3d_create = entry("cuArray3DCreate", 3020);
    PFN_cuMipmappedArrayCreate_v5000 mipmapped_create = entry("cuMipmappedArrayCreate", 5000);
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUarray arr3 = (CUarray)(uintptr_t)0x5ca1ab1e;
    CUmipmappedArray mip = (CUmipmappedArray)(uintptr_t)0x5ca1ab1e;
    printf("rc_array3d=%d\n", (int)array3d_create(&arr3, &d3));
    printf("array3d_output_kept=%d\n", arr3 == (CUarray)(uintptr_t)0x5ca1ab1e);
    printf("rc_mipmapped=%d\n", (int)mipmapped_create(&mip, &d3, 2));
    printf("mipmapped_output_kept=%d\n", mip == (CUmipmappedArray)(uintptr_t)0x5ca1ab1e);
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g;
    CUmemGenericAllocationHandle h;
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM))
        return 20;
    printf("rc_vmm=%d\n", (int)v.create(&h, g, &prop, 0));
    return 0;
}

/* Real and effective uid set to $SET_RUID and $SET_EUID (saved: this process's), then the first
 * CUDA call: 3 MiB kept. */
static int scenario_ids_differ(void)
{
    const char *r = getenv("SET_RUID"), *e = getenv("SET_EUID");
    if (!r || !e || setresuid((uid_t)atoi(r), (uid_t)atoi(e), geteuid()) != 0)
        return 20;
    void *a;
    CHECK(cudaMalloc(&a, 3 * MiB));
    return 0;
}

/* 1 MiB kept, then every uid set to $SET_UID (a server dropping privileges after its start),
 * then a normal exit. */
static int scenario_drop_after(void)
{
    const char *u = getenv("SET_UID");
    void *a;
    CHECK(cudaMalloc(&a, MiB));
    if (!u || setresuid((uid_t)atoi(u), (uid_t)atoi(u), (uid_t)atoi(u)) != 0)
        return 20;
    return 0;
}

/* 1000 B kept, then exec of `sh -c "$EXEC_CMD"` (same pid; the memory goes with the old image). */
static int scenario_exec(void)
{
    void *a;
    const char *cmd = getenv("EXEC_CMD"), *gone = getenv("EXEC_UNLINK");
    CHECK(cudaMalloc(&a, 1000));
    if (gone) /* a file that goes away before the exec (one that held the segment's name) */
        unlink(gone);
    fflush(stdout);
    execl("/bin/sh", "sh", "-c", cmd ? cmd : "exit 97", (char *)NULL);
    return 98;
}

/* cudaMalloc/cudaFree pairs of multiples of 4 KiB while something reads the segment, until
 * $HOLD_FILE exists (looked for every 4096 pairs) or 120 s have passed; 10^6 pairs without
 * HOLD_FILE. The reader decides when it has seen enough, so a descheduled program cannot end
 * before the reader starts, nor stall through all of its reads unnoticed. */
static int scenario_churn(void)
{
    void *keep;
    const char *stop = getenv("HOLD_FILE");
    struct timespec t0, t;
    CHECK(cudaMalloc(&keep, 4096));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ready();
    for (long i = 0; stop || i < 1000000; i++) {
        void *p;
        CHECK(cudaMalloc(&p, 4096 * (size_t)(1 + i % 64)));
        CHECK(cudaFree(p));
        if (stop && i % 4096 == 4095) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (access(stop, F_OK) == 0 || t.tv_sec - t0.tv_sec > 120)
                break;
        }
    }
    return 0;
}

static const struct scenario scenarios[] = {
    {"budget_pools_read_during_served", scenario_budget_pools_read_during_served, 1},
    {"budget_second_look_aba", scenario_budget_second_look_aba, 1},
    {"budget_read_while_pool_destroyed", scenario_budget_read_while_pool_destroyed, 1},
    {"budget_trim_while_pool_destroyed", scenario_budget_trim_while_pool_destroyed, 1},
    {"free_fails", scenario_free_fails, 1},
    {"free_refused_once", scenario_free_refused_once, 1},
    {"free_while_other_allocates", scenario_free_while_other_allocates, 1},
    {"live_at_exit_mix", scenario_live_at_exit_mix, 1},
    {"hold", scenario_hold, 1},             {"fork", scenario_fork, 1}, {"hold_refused", scenario_hold_refused, 1},
    {"hold_pinned", scenario_hold_pinned, 1},
    {"fork_child_cuda", scenario_fork_child_cuda, 1}, {"daemon_fds", scenario_daemon_fds, 1},
    {"hold_api", scenario_hold_api, 1},     {"api_misuse", scenario_api_misuse, 1},
    {"hold_phase_calls", scenario_hold_phase_calls, 1}, {"hold_stats_call", scenario_hold_stats_call, 1},
    {"hold_timed_reads", scenario_hold_timed_reads, 1},
    {"hold_async", scenario_hold_async, 1}, {"hold_new_timens", scenario_hold_new_timens, 1}, {"hold_graph_reset", scenario_hold_graph_reset, 1},
    {"exit_while_busy", scenario_exit_while_busy, 1}, {"ids_differ", scenario_ids_differ, 1},
    {"drop_after", scenario_drop_after, 1}, {"async_plain", scenario_async_plain, 1},
    {"refused_array_vmm", scenario_refused_array_vmm, 1}, {"main_exits", scenario_main_exits, 1},
    {"churn", scenario_churn, 1},           {"exec", scenario_exec, 1},
    {"busy", scenario_busy, 1},
    {"malloc", scenario_malloc, 1},         {"pitch", scenario_pitch, 1},
    {"host", scenario_host, 1},             {"managed", scenario_managed, 1},
    {"async", scenario_async, 1},           {"vmm", scenario_vmm, 1}, {"vmm_release_race", scenario_vmm_release_race, 1},
    {"vmm_undo", scenario_vmm_undo, 1},
    {"array", scenario_array, 1},           {"array_formats", scenario_array_formats, 1},
    {"vmm_devices", scenario_vmm_devices, 1}, {"vmm_import_own", scenario_vmm_import_own, 1}, {"pool_trim", scenario_pool_trim, 1}, {"ipc_parent", scenario_ipc_parent, 1},
    {"ipc_child", scenario_ipc_child, 1},   {"ipc_parent_threads", scenario_ipc_parent_threads, 1},
    {"ipc_parent_fails", scenario_ipc_parent_fails, 1}, {"multicast", scenario_multicast, 2},
    {"pool_ipc_parent", scenario_pool_ipc_parent, 2}, {"pool_ipc_child", scenario_pool_ipc_child, 2},
    {"ipc_parent_other_device", scenario_ipc_parent_other_device, 2},
    {"ipc_parent_capture", scenario_ipc_parent_capture, 1},           {"reset", scenario_reset, 1}, {"cancel_phase", scenario_cancel_phase, 1},
    {"async_reset", scenario_async_reset, 1},
    {"peaks", scenario_peaks, 1},           {"lookup_first", scenario_lookup_first, 1},
    {"fork_lookups", scenario_fork_lookups, 1},           {"reset_peak", scenario_reset_peak, 1},
    {"two_devices", scenario_two_devices, 2}, {"hold_two_devices", scenario_hold_two_devices, 2},
    {"oom", scenario_oom, 1},
    {"ctx_destroy", scenario_ctx_destroy, 2}, {"ctx_detach", scenario_ctx_detach, 1}, {"many_reset", scenario_many_reset, 1},
    {"many_live", scenario_many_live, 1},
    {"vmm_maps_full", scenario_vmm_maps_full, 1},
    {"capture_no_table", scenario_capture_no_table, 1},
    {"many_captures_no_table", scenario_many_captures_no_table, 1},
    {"host_pool_unrecorded", scenario_host_pool_unrecorded, 1},
    {"device_pool_unrecorded", scenario_device_pool_unrecorded, 1},
    {"free_refused_table_full", scenario_free_refused_table_full, 1},
    {"ctx_destroy_thread", scenario_ctx_destroy_thread, 2},
    {"teardown_then_reset", scenario_teardown_then_reset, 1}, {"destroyed_current", scenario_destroyed_current, 1},
    {"free_racing_destroy", scenario_free_racing_destroy, 1},
    {"release_cycles", scenario_release_cycles, 1},
    {"pool_locations", scenario_pool_locations, 2},
    {"pool_destroyed", scenario_pool_destroyed, 1}, {"high_reset_race", scenario_high_reset_race, 1},
    {"pool_got_destroyed", scenario_pool_got_destroyed, 1}, {"pool_churn", scenario_pool_churn, 1},
    {"unknown_free", scenario_unknown_free, 1}, {"no_async", scenario_no_async, 1},
    {"budget_pool_idle", scenario_budget_pool_idle, 1}, {"budget_many_pools", scenario_budget_many_pools, 1},
    {"budget_pool_over", scenario_budget_pool_over, 1}, {"budget_served_over", scenario_budget_served_over, 1}, {"vmm_unmap_race", scenario_vmm_unmap_race, 1}, {"vmm_host_no_context", scenario_vmm_host_no_context, 1}, {"budget_pitch", scenario_budget_pitch, 1},
    {"budget_threads", scenario_budget_threads, 1},
    {"entry_points", scenario_entry_points, 1}, {"threads", scenario_threads, 1},
    {"async_stream_only", scenario_async_stream_only, 1},
    {"exit_in_call", scenario_exit_in_call, 1}, {"data_on_closed_outputs", scenario_data_on_closed_outputs, 1}, {"jump_out_of_call", scenario_jump_out_of_call, 1}, {"budget_pool_destroyed", scenario_budget_pool_destroyed, 1},
};

int main(int argc, char **argv)
{
    return scenario_main(argc, argv, scenarios, sizeof scenarios / sizeof scenarios[0]);
}
