/* offload_prog SCENARIO: programs for the offload tests (tests/test_offload.c). Run with
 * CUSHIM_OFFLOAD / CUSHIM_OFFLOAD_MIN / CUSHIM_DEVICE_LIMIT / CUSHIM_SPILL set by the test.
 * Prints "key=value" lines. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "common/segment.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)

static int (*set_phase)(int);
static int (*get_phase)(void);

static void *dev(size_t bytes)
{
    void *p;
    CHECK(cudaMalloc(&p, bytes));
    return p;
}

static int check_bytes(const unsigned char *a, unsigned char v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != v)
            return 0;
    return 1;
}

/* Prints KEY=<pinned host bytes the simulated device holds on device 0> (offloaded blocks). */
static void print_host_live(const char *key)
{
    struct sim_api sim = sim_api();
    printf("%s=%llu\n", key, (unsigned long long)sim.live(0, 5));
}

/* Weights before the compile phase, compile intermediates (small ones stay on the device, large
 * ones are offloaded), data through every kind of copy, then the run phase. */
static int scenario_compile_run(void)
{
    PFN_cuMemcpyDtoH_v3020 dtoh = NULL;
    enum cudaDriverEntryPointQueryResult st;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemcpyDtoH", (void **)&dtoh, 3020, cudaEnableDefault, &st));
    struct sim_api sim = sim_api();

    void *w1 = dev(512 * KiB), *w2 = dev(512 * KiB), *w3 = dev(4 * MiB); /* run phase: device */
    printf("set_compile=%d\n", set_phase(1));
    void *small = dev(256 * KiB);              /* below the threshold: device */
    void *big1 = dev(2 * MiB), *big2 = dev(3 * MiB); /* offloaded */
    void *kept = dev(1536 * KiB);              /* offloaded, still alive in the run phase */
    printf("offloaded_host_live=%llu\n", (unsigned long long)sim.live(0, 5));

    /* Data in and out of an offloaded buffer, byte-exact. */
    static unsigned char in[2 * MiB], out[2 * MiB];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    CHECK(cudaMemcpy(big1, in, sizeof in, cudaMemcpyHostToDevice));
    memset(out, 0, sizeof out);
    CHECK(cudaMemcpy(out, big1, sizeof out, cudaMemcpyDeviceToHost));
    printf("copy_roundtrip=%d\n", memcmp(in, out, sizeof in) == 0);
    /* An explicit-kind driver copy from offloaded memory (routed through cuMemcpy). */
    memset(out, 0, sizeof out);
    printf("rc_dtoh=%d\n", (int)dtoh(out, (CUdeviceptr)big1, sizeof out));
    printf("dtoh_roundtrip=%d\n", memcmp(in, out, sizeof in) == 0);
    /* Device to offloaded and back, and a memset on offloaded memory. */
    CHECK(cudaMemcpy(w3, big1, 2 * MiB, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemset(big2, 0x5a, 3 * MiB));
    CHECK(cudaMemcpy(big1, big2, 2 * MiB, cudaMemcpyDefault));
    memset(out, 0, sizeof out);
    CHECK(cudaMemcpy(out, big1, sizeof out, cudaMemcpyDeviceToHost));
    printf("memset_seen=%d\n", check_bytes(out, 0x5a, sizeof out));
    memset(out, 0, sizeof out);
    CHECK(cudaMemcpy(out, w3, sizeof out, cudaMemcpyDeviceToHost));
    printf("device_copy=%d\n", memcmp(in, out, sizeof in) == 0);

    /* cudaMemGetInfo-style range query on an interior pointer. */
    PFN_cuMemGetAddressRange_v3020 range = NULL;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", (void **)&range, 3020, cudaEnableDefault, &st));
    CUdeviceptr base = 0;
    size_t size = 0;
    printf("rc_range=%d\n", (int)range(&base, &size, (CUdeviceptr)big2 + 100));
    printf("range_ok=%d\n", base == (CUdeviceptr)big2 && size == 3 * MiB);
    PFN_cuIpcGetMemHandle_v4010 ipc = NULL;
    CHECK(cudaGetDriverEntryPointByVersion("cuIpcGetMemHandle", (void **)&ipc, 4010, cudaEnableDefault, &st));
    CUipcMemHandle h;
    printf("rc_ipc=%d\n", (int)ipc(&h, (CUdeviceptr)big1));

    CHECK(cudaFree(big1));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaFreeAsync(big2, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(small));
    printf("set_run=%d\n", set_phase(0));
    void *run = dev(5 * MiB); /* run phase: device, whatever its size */
    (void)run;
    (void)w1;
    (void)w2;
    /* Let the shim release the deferred free (it polls from later calls). */
    CHECK(cudaFree(dev(KiB)));
    printf("free_host_calls=%llu\n", (unsigned long long)sim.calls("cuMemFreeHost"));
    printf("host_alloc_calls=%llu\n", (unsigned long long)sim.calls("cuMemHostAlloc"));
    printf("offloaded_host_live_end=%llu\n", (unsigned long long)sim.live(0, 5));
    (void)kept;
    return 0;
}

static int scenario_budget(void)
{
    size_t free_b, total_b;
    void *a, *b = NULL;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("total=%zu\nfree=%zu\n", total_b, free_b);
    CHECK(cudaMalloc(&a, 768 * MiB));
    cudaError_t e = cudaMalloc(&b, 512 * MiB);
    printf("rc_over=%d\n", (int)e);
    cudaGetLastError();
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("free_after=%zu\n", free_b);
    /* The budget through cushim.h (version 4). */
    struct cushim_device_stats st;
    if (cushim_stats(0, &st, 0) == 0)
        printf("api.limit=%llu\n", (unsigned long long)st.limit_bytes);
    if (e == cudaSuccess) {
        memset(b, 0x11, 4096); /* spilled memory is host memory the program can use */
        CHECK(cudaMemset(b, 0, 4096));
        CHECK(cudaFree(b));
    }
    return 0;
}

struct capture_arg {
    cudaStream_t s;
    int rc_begin, rc_end;
};

static int scenario_capture(void)
{
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    void *p, *q;
    CHECK(cudaStreamCreate(&s));
    /* cudaMallocAsync inside a capture still becomes a graph node. */
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync(&p, 2 * MiB, s));
    CHECK(cudaMemsetAsync(p, 0, 2 * MiB, s));
    CHECK(cudaFreeAsync(p, s));
    printf("rc_end_global=%d\n", (int)cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    /* cudaMalloc inside a relaxed capture: allowed, not offloaded. */
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    printf("rc_malloc_relaxed=%d\n", (int)cudaMalloc(&q, 2 * MiB));
    printf("rc_end_relaxed=%d\n", (int)cudaStreamEndCapture(s, &g));
    return 0;
}

/* PyTorch's pattern: a global-mode capture on one thread while another thread, in relaxed mode,
 * allocates. The capture must stay valid. */
static pthread_barrier_t bar;
static void *allocating_thread(void *arg)
{
    (void)arg;
    void *p;
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    pthread_barrier_wait(&bar);
    cudaThreadExchangeStreamCaptureMode(&mode);
    printf("rc_malloc_other_thread=%d\n", (int)cudaMalloc(&p, 2 * MiB));
    cudaThreadExchangeStreamCaptureMode(&mode);
    pthread_barrier_wait(&bar);
    return NULL;
}

static int scenario_pytorch_capture(void)
{
    cudaStream_t s;
    cudaGraph_t g;
    pthread_t t;
    CHECK(cudaStreamCreate(&s));
    pthread_barrier_init(&bar, NULL, 2);
    pthread_create(&t, NULL, allocating_thread, NULL);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    printf("rc_end=%d\n", (int)cudaStreamEndCapture(s, &g));
    pthread_join(t, NULL);
    return 0;
}

/* An async free of an offloaded range waits for the stream's earlier work (SIMCUDA_LAZY_EVENTS=1
 * keeps work "pending" until a synchronize). */
static int scenario_async_free(void)
{
    cudaStream_t s;
    void *p;
    CHECK(cudaStreamCreate(&s));
    struct sim_api sim = sim_api(); /* libcuda is loaded by now */
    CHECK(cudaMalloc(&p, 2 * MiB));
    CHECK(cudaMemsetAsync(p, 1, 2 * MiB, s));
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaFree(dev(KiB)));
    printf("host_live_before_sync=%llu\n", (unsigned long long)sim.live(0, 5));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(dev(KiB)));
    printf("host_live_after_sync=%llu\n", (unsigned long long)sim.live(0, 5));
    return 0;
}

/* A cudaFreeAsync of an offloaded block that cannot be deferred (run with cuEventCreate
 * failing), with the cache on: prints the thread's cancellation state afterwards
 * (cancel_enabled=1: as it was). */
static int scenario_free_async_cancel_state(void)
{
    cudaStream_t s;
    void *p;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc(&p, 2 * MiB));
    CHECK(cudaFreeAsync(p, s));
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
    printf("cancel_enabled=%d\n", old == PTHREAD_CANCEL_ENABLE);
    return 0;
}

/* Four rounds of a 512 MiB cudaMalloc and its cudaFree: prints rc.N=<cudaError> for each. */
static int scenario_budget_rounds(void)
{
    for (int i = 0; i < 4; i++) {
        void *p;
        cudaError_t e = cudaMalloc(&p, 512 * MiB);
        printf("rc.%d=%d\n", i, (int)e);
        if (e == cudaSuccess)
            CHECK(cudaFree(p));
    }
    return 0;
}

/* An offloaded block freed by cudaFreeAsync, then the end: the shim's exit waits for it. */
static int scenario_async_free_exit(void)
{
    cudaStream_t s;
    void *p;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc(&p, 2 * MiB));
    CHECK(cudaMemsetAsync(p, 1, 2 * MiB, s));
    CHECK(cudaFreeAsync(p, s));
    return 0;
}

/* Allocates every 10 ms until $HOLD_FILE exists, printing phase changes: `cushim phase PID`
 * takes effect at the next allocation. */
static int scenario_phase_loop(void)
{
    const char *hold_file = getenv("HOLD_FILE");
    CHECK(cudaFree(dev(KiB)));
    ready();
    int last = get_phase();
    printf("phase=%d\n", last);
    for (int i = 0; i < 6000 && hold_file && access(hold_file, F_OK) != 0; i++) {
        CHECK(cudaFree(dev(KiB)));
        if (get_phase() != last) {
            last = get_phase();
            printf("phase=%d\n", last);
            fflush(stdout);
        }
        usleep(10000);
    }
    return 0;
}

/* The request word of this process's own segment, mapped read-write as `cushim phase` maps it
 * (tools/cmd_phase.c). Exits 12 when it cannot be found. */
static _Atomic uint32_t *own_phase_request(void)
{
    const char *dir = getenv("CUSHIM_SEGMENT_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/" CUSHIM_SEGMENT_PREFIX "%u-%d", dir ? dir : "/dev/shm",
             (unsigned)getuid(), (int)getpid());
    int fd = open(path, O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(struct cushim_segment)) {
        fprintf(stderr, "no segment at %s\n", path);
        exit(12);
    }
    struct cushim_segment *s = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED)
        exit(12);
    return &s->control.phase_request;
}

static atomic_bool race_stop;
static _Atomic uint64_t race_allocs;

static void *race_allocator(void *arg)
{
    (void)arg;
    while (!atomic_load(&race_stop)) {
        CHECK(cudaFree(dev(KiB)));
        atomic_fetch_add(&race_allocs, 1);
    }
    return NULL;
}

/* A `cushim phase compile` request, then the program's own newer cushim_set_phase(run), while
 * another thread allocates (and so takes requests) all the time: once the program's call
 * returns, the phase is run, whatever the allocating thread was doing. Repeated ROUNDS times
 * (default 20000), or for ROUNDS_SECONDS (default 60) if that comes first: on a loaded machine
 * each round may wait a time slice for the other thread, and 2 million of them outran the test's
 * timeout; prints rounds=<rounds made> overtaken=<rounds that ended in compile>. */
static int scenario_phase_race(void)
{
    const char *rounds_s = getenv("ROUNDS"), *seconds_s = getenv("ROUNDS_SECONDS");
    long rounds = rounds_s ? atol(rounds_s) : 20000, seconds = seconds_s ? atol(seconds_s) : 60;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(cudaFree(dev(KiB)));
    _Atomic uint32_t *request = own_phase_request();
    pthread_t t;
    pthread_create(&t, NULL, race_allocator, NULL);
    long overtaken = 0, i;
    for (i = 0; i < rounds; i++) {
        if (i % 64 == 63) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - t0.tv_sec >= seconds)
                break;
        }
        atomic_store(request, 1 + 1); /* 1 + compile, as cmd_phase writes it */
        set_phase(0);
        /* Two allocations of the other thread begin and end after the call. */
        uint64_t seen = atomic_load(&race_allocs);
        while (atomic_load(&race_allocs) < seen + 2)
            sched_yield(); /* on a busy machine the allocating thread may share this core */
        if (get_phase() != 0) {
            overtaken++;
            set_phase(0);
        }
    }
    atomic_store(&race_stop, true);
    pthread_join(t, NULL);
    printf("rounds=%ld\novertaken=%ld\n", i, overtaken);
    return 0;
}

/* A `cushim phase` request made while the program is in compile is overtaken by the program's
 * own later changes: it ends its compile phase and starts a new one before allocating again;
 * the new compile phase holds (the old request would have ended it). */
static int scenario_phase_stale(void)
{
    set_phase(1);
    ready();
    hold();
    set_phase(0);
    set_phase(1);
    dev(2 * MiB);
    printf("phase=%d\n", get_phase());
    return 0;
}

/* A phase asked for by `cushim phase` applies at the next allocation of any kind: in the compile
 * phase, after READY_DIR/PID and HOLD_FILE, a VMM handle of 2 MiB (cuMemCreate, what PyTorch's
 * expandable segments use) and 1 MiB of managed memory; prints the phase then. */
static int scenario_phase_other_kinds(void)
{
    PFN_cuMemCreate_v10020 create = NULL;
    enum cudaDriverEntryPointQueryResult st;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemCreate", (void **)&create, 10020, cudaEnableDefault, &st));
    set_phase(1);
    void *small = dev(4096);
    (void)small;
    ready();
    hold();
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h;
    printf("rc_create=%d phase=%d\n", (int)create(&h, 2 * MiB, &prop, 0), get_phase());
    void *m;
    CHECK(cudaMallocManaged(&m, MiB, cudaMemAttachGlobal));
    printf("phase=%d\n", get_phase());
    return 0;
}

/* `cushim phase` requests that land while an allocation is in its driver call (made by the
 * SIGUSR1 handler: the test runs with SIMCUDA_INJECT=cuMemHostAlloc:1:raise=10,
 * cuMemAlloc_v2:3:raise=10, so the signal comes inside the offloaded 4 MiB's cuMemHostAlloc, then
 * inside the run phase's 4 MiB cudaMalloc): each allocation counts in the phase it was placed in,
 * and the request applies from the next one. Starts in compile (CUSHIM_PHASE); prints the phase
 * after each step. */
static _Atomic uint32_t *during_request;
static atomic_int during_signals;
static void request_during_call(int sig)
{
    (void)sig;
    /* 1 + run, then 1 + compile, as cmd_phase writes them */
    atomic_store(during_request, atomic_fetch_add(&during_signals, 1) == 0 ? 1 : 2);
}

static int scenario_phase_during_call(void)
{
    dev(KiB); /* cuMemAlloc_v2 call 1: the segment exists from here */
    during_request = own_phase_request();
    signal(SIGUSR1, request_during_call);
    dev(4 * MiB); /* offloaded; the run request comes during it */
    printf("phase.offloaded=%d\n", get_phase());
    dev(64 * KiB); /* call 2: the run phase from here */
    printf("phase.next=%d\n", get_phase());
    dev(4 * MiB); /* call 3, on the device; the compile request comes during it */
    printf("phase.device=%d\n", get_phase());
    dev(KiB); /* call 4: compile from here */
    printf("phase.last=%d\nsignals=%d\n", get_phase(), atomic_load(&during_signals));
    return 0;
}

/* The same for a stream-ordered allocation: in the run phase, a `cushim phase compile` request
 * lands during a cudaMallocAsync of 4 MiB (SIMCUDA_INJECT=cuMemAllocAsync:1:raise=10); the 4 MiB
 * count in the run phase, the next allocation (1 KiB) starts the compile phase. */
static int scenario_phase_during_async(void)
{
    dev(KiB);
    during_request = own_phase_request();
    atomic_store(&during_signals, 1); /* the handler's second request: compile */
    signal(SIGUSR1, request_during_call);
    void *p;
    CHECK(cudaMallocAsync(&p, 4 * MiB, 0));
    printf("phase.async=%d\n", get_phase());
    dev(KiB);
    printf("phase.last=%d\n", get_phase());
    CHECK(cudaFreeAsync(p, 0));
    CHECK(cudaStreamSynchronize(0));
    return 0;
}

/* The program's own switch to the run phase while an offloaded compile-phase allocation is in its
 * cuMemHostAlloc (SIGUSR1 raised there: SIMCUDA_INJECT=cuMemHostAlloc:1:raise=10): the 4 MiB were
 * placed under the compile rule and are alive in the run phase, so resident (a stress trial: the
 * entry's phase was read again after the host allocation, and it was never resident). */
static void switch_to_run(int sig)
{
    (void)sig;
    set_phase(0);
}

static int scenario_switch_during_offload(void)
{
    dev(KiB);
    signal(SIGUSR1, switch_to_run);
    dev(4 * MiB);
    printf("phase=%d\n", get_phase());
    return 0;
}

/* The phase set before any CUDA call still applies to the first allocation. */
static int scenario_phase_first(void)
{
    printf("set_compile=%d\n", set_phase(1));
    void *p = dev(2 * MiB);
    (void)p;
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    printf("total=%zu\n", t);
    return 0;
}

/* CUSHIM_OFFLOAD_CACHE: a freed pinned block serves the next offload of a size it fits. */
static int scenario_cache(void)
{
    void *a = dev(4 * MiB);
    CHECK(cudaFree(a));
    void *b = dev(3 * MiB); /* fits the cached 4 MiB block (at most twice its size) */
    CHECK(cudaFree(b));
    void *c = dev(1 * MiB + 1); /* too small for it: a fresh block */
    CHECK(cudaFree(c));
    struct sim_api sim = sim_api();
    printf("host_alloc_calls=%llu\n", (unsigned long long)sim.calls("cuMemHostAlloc"));
    printf("free_host_calls=%llu\n", (unsigned long long)sim.calls("cuMemFreeHost"));
    printf("ctx_sync_calls=%llu\n", (unsigned long long)sim.calls("cuCtxSynchronize"));
    return 0;
}

/* cudaDeviceReset with an offloaded range alive and a freed pinned block in the cache: the
 * driver frees both with the context, so the next offload must take a fresh block and work. */
static int scenario_reset(void)
{
    void *a = dev(2 * MiB);
    CHECK(cudaFree(dev(4 * MiB))); /* cached */
    (void)a;
    CHECK(cudaDeviceReset());
    struct sim_api sim = sim_api();
    printf("host_live_after_reset=%llu\n", (unsigned long long)sim.live(0, 5));
    void *c = dev(3 * MiB);
    static unsigned char out[3 * MiB];
    CHECK(cudaMemset(c, 0x3c, 3 * MiB));
    CHECK(cudaMemcpy(out, c, sizeof out, cudaMemcpyDeviceToHost));
    printf("memset_seen=%d\n", check_bytes(out, 0x3c, sizeof out));
    printf("host_alloc_calls=%llu\n", (unsigned long long)sim.calls("cuMemHostAlloc"));
    printf("free_host_calls=%llu\n", (unsigned long long)sim.calls("cuMemFreeHost"));
    printf("host_live_end=%llu\n", (unsigned long long)sim.live(0, 5));
    return 0;
}

/* CUSHIM_DEVICE_LIMIT applies to cuMemCreate (virtual memory management) too. */
static int scenario_vmm_budget(void)
{
    PFN_cuMemCreate_v10020 create = NULL;
    PFN_cuMemRelease_v10020 release = NULL;
    enum cudaDriverEntryPointQueryResult st;
    CHECK(cudaFree(0));
    CHECK(cudaGetDriverEntryPointByVersion("cuMemCreate", (void **)&create, 10020, cudaEnableDefault, &st));
    CHECK(cudaGetDriverEntryPointByVersion("cuMemRelease", (void **)&release, 10020, cudaEnableDefault, &st));
    CUmemAllocationProp prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h1, h2;
    printf("rc_first=%d\n", (int)create(&h1, 768 * MiB, &prop, 0));
    h2 = 12345;
    printf("rc_over=%d\n", (int)create(&h2, 512 * MiB, &prop, 0));
    printf("handle_after_over=%llu\n", (unsigned long long)h2);
    /* Over the budget and refused by the driver for its arguments: the driver's error. */
    printf("rc_over_unaligned=%d\n", (int)create(&h2, 512 * MiB + 1, &prop, 0));
    printf("rc_over_flags=%d\n", (int)create(&h2, 512 * MiB, &prop, 1));
    prop.location.id = 63;
    printf("rc_over_no_device=%d\n", (int)create(&h2, 512 * MiB, &prop, 0));
    prop.location.id = 0;
    /* None of those gave back budget they never took: still over it. */
    printf("rc_over_again=%d\n", (int)create(&h2, 512 * MiB, &prop, 0));
    printf("rc_release=%d\n", (int)release(h1));
    printf("rc_after_release=%d\n", (int)create(&h2, 512 * MiB, &prop, 0));
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    printf("free=%zu\n", f);
    return 0;
}

/* The phase stack is the process's: a phase pushed on one thread is popped on another. */
static int (*push_phase)(int);
static int (*pop_phase)(void);
static void *pushing_thread(void *arg)
{
    (void)arg;
    printf("push=%d\n", push_phase(1));
    return NULL;
}

static int scenario_phase_stack(void)
{
    pthread_t t;
    push_phase = (int (*)(int))cushim_fn("cushim_push_phase");
    pop_phase = (int (*)(void))cushim_fn("cushim_pop_phase");
    pthread_create(&t, NULL, pushing_thread, NULL);
    pthread_join(t, NULL);
    printf("phase_after_push=%d\n", get_phase());
    void *p = dev(2 * MiB); /* offloaded: the compile phase pushed on the other thread applies */
    (void)p;
    printf("pop=%d\n", pop_phase());
    printf("phase_after_pop=%d\n", get_phase());
    printf("pop_empty=%d\n", pop_phase());
    printf("push_bad=%d\n", push_phase(7));
    int full = 0;
    for (int i = 0; i < 65; i++)
        full = push_phase(1);
    printf("push_65th=%d\n", full);
    return 0;
}

/* fork while another thread pushes and pops phases: each child starts with an empty stack and
 * never finds the stack's lock taken (a child stuck on it is killed by its alarm). */
static _Atomic int stop_pushing;
static void *push_pop_loop(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_pushing)) {
        push_phase(1);
        pop_phase();
    }
    return NULL;
}

static int scenario_phase_fork(void)
{
    pthread_t t;
    push_phase = (int (*)(int))cushim_fn("cushim_push_phase");
    pop_phase = (int (*)(void))cushim_fn("cushim_pop_phase");
    pthread_create(&t, NULL, push_pop_loop, NULL);
    int ok = 0, hung = 0;
    for (int i = 0; i < 30; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            alarm(10);
            int empty = pop_phase();
            int pushed = push_phase(1);
            exit(empty == -1 && pushed == 0 ? 0 : 3);
        }
        int status;
        waitpid(pid, &status, 0);
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
        hung += WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM;
    }
    atomic_store(&stop_pushing, 1);
    pthread_join(t, NULL);
    printf("children_ok=%d\nchildren_hung=%d\n", ok, hung);
    return 0;
}

/* Near the device budget, a stream-ordered request the policy offloads: host memory, which the
 * budget does not count, so it succeeds (and is not a spill). */
static int scenario_async_budget(void)
{
    void *d, *a;
    CHECK(cudaMalloc(&d, 2999999));
    printf("rc_async=%d\n", (int)cudaMallocAsync(&a, 3000000, NULL));
    return 0;
}

/* A request over the budget from a pool the program destroyed: the driver's refusal of the pool
 * (CUDA_ERROR_INVALID_VALUE), not the budget's out of memory. */
static int scenario_destroyed_pool_budget(void)
{
    cudaMemPool_t pool;
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    void *a;
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaMemPoolDestroy(pool));
    printf("rc_destroyed_over=%d\n", (int)cudaMallocFromPoolAsync(&a, 8 * MiB, pool, NULL));
    printf("rc_destroyed_within=%d\n", (int)cudaMallocFromPoolAsync(&a, MiB, pool, NULL));
    /* A live pool's request over the budget is the budget's to refuse. */
    CHECK(cudaMemPoolCreate(&pool, &props));
    printf("rc_live_over=%d\n", (int)cudaMallocFromPoolAsync(&a, 8 * MiB, pool, NULL));
    CHECK(cudaMemPoolDestroy(pool));
    return 0;
}

/* A request its pool's idle reserve serves, whose budget check comes after another thread took the
 * room that reserve stood for (SIMCUDA_INJECT=cuMemPoolGetAttribute:*:raise=10: the 4th query of the
 * pools this thread makes once armed is the USED_MEM_CURRENT of the shim's second look at the pool's
 * reserve, budget.c claim_idle; the SIGUSR1 handler runs the other thread's steps there). Under a
 * 16 MiB budget: 10 MiB cudaMalloc, 4 MiB idle in pool P (freed). The request: 4 MiB from P. During
 * its claim the other thread trims P (its idle reserve goes back: the budget's idle estimate reads
 * 0) and takes 4 MiB with cudaMalloc (10 + 4 within 16). The pool's reserve was read as 4 MiB before
 * the trim and its use as 0 after, so the request is served, and the check found held (14 MiB, no
 * idle left) within the budget: the device total went to 18 MiB. Prints rc_request, rc_other,
 * fired (1: the other thread's steps ran inside the request), current (the device total after both). */
static pthread_t idle_taken_main;
static atomic_int idle_taken_armed, idle_taken_queries, idle_taken_fired, idle_taken_go, idle_taken_done, idle_taken_rc;
static cudaMemPool_t idle_taken_pool;
static void *idle_taken_z;

static void idle_taken_signal(int sig)
{
    (void)sig;
    if (!atomic_load(&idle_taken_armed) || !pthread_equal(pthread_self(), idle_taken_main))
        return;
    if (atomic_fetch_add(&idle_taken_queries, 1) + 1 != 4)
        return;
    atomic_store(&idle_taken_fired, 1);
    atomic_store(&idle_taken_go, 1);
    while (!atomic_load(&idle_taken_done))
        sched_yield();
}

static void *idle_taken_other(void *arg)
{
    (void)arg;
    while (!atomic_load(&idle_taken_go))
        sched_yield();
    int rc = (int)cudaMemPoolTrimTo(idle_taken_pool, 0);
    atomic_store(&idle_taken_rc, rc ? rc : (int)cudaMalloc(&idle_taken_z, 4 * MiB));
    atomic_store(&idle_taken_done, 1);
    return NULL;
}

static int scenario_served_idle_taken(void)
{
    uint64_t (*current)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");
    if (!current)
        return 20;
    idle_taken_main = pthread_self();
    signal(SIGUSR1, idle_taken_signal);
    struct cudaMemPoolProps props = {0};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    void *x, *y = dev(10 * MiB), *a = NULL;
    CHECK(cudaMemPoolCreate(&idle_taken_pool, &props));
    CHECK(cudaMallocFromPoolAsync(&x, 4 * MiB, idle_taken_pool, NULL));
    CHECK(cudaFreeAsync(x, NULL)); /* 4 MiB idle in the pool */
    size_t free_b, total_b;
    CHECK(cudaMemGetInfo(&free_b, &total_b)); /* the pools read: nothing stale before the request */
    pthread_t t;
    pthread_create(&t, NULL, idle_taken_other, NULL);
    atomic_store(&idle_taken_armed, 1);
    int rc = (int)cudaMallocFromPoolAsync(&a, 4 * MiB, idle_taken_pool, NULL);
    atomic_store(&idle_taken_armed, 0);
    atomic_store(&idle_taken_go, 1); /* the handler never ran: let the thread go anyway */
    pthread_join(t, NULL);
    printf("rc_request=%d\nrc_other=%d\nfired=%d\ncurrent=%llu\n", rc, atomic_load(&idle_taken_rc),
           atomic_load(&idle_taken_fired), (unsigned long long)current(0));
    if (rc == 0)
        CHECK(cudaFreeAsync(a, NULL));
    if (idle_taken_z)
        CHECK(cudaFree(idle_taken_z));
    CHECK(cudaFree(y));
    CHECK(cudaStreamSynchronize(NULL));
    CHECK(cudaMemPoolDestroy(idle_taken_pool));
    return 0;
}

/* A forked child that only reads (getters, the phase) and ends with _exit leaves no segment:
 * reading does not start the shim in it. */
static int scenario_fork_reader(void)
{
    uint64_t (*peak)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_peak_bytes");
    int (*reset)(int) = (int (*)(int))cushim_fn("cushim_reset_peak");
    CHECK(cudaFree(dev(KiB)));
    pid_t pid = fork();
    if (pid == 0)
        _exit(peak(0) == 0 && reset(-1) == 0 && get_phase() == 0 ? 0 : 3);
    int status;
    waitpid(pid, &status, 0);
    printf("child_status=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}

/* A stream destroyed while capturing abandons the capture: later allocations offload again. */
static int scenario_capture_destroyed(void)
{
    cudaStream_t s;
    void *p;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    printf("rc_destroy=%d\n", (int)cudaStreamDestroy(s));
    printf("rc_malloc=%d\n", (int)cudaMalloc(&p, 2 * MiB));
    print_host_live("host_live");
    return 0;
}

/* Pitched copies (cuMemcpy2D/3D) naming offloaded memory as device memory: the shim passes that
 * side as unified memory (the same address), so the copy happens; data byte-exact both ways. */
static int scenario_pitched(void)
{
    PFN_cuMemcpy2D_v3020 copy2d = entry("cuMemcpy2D", 3020);
    PFN_cuMemcpy2DAsync_v3020 copy2d_async = entry("cuMemcpy2DAsync", 3020);
    PFN_cuMemcpy3D_v3020 copy3d = entry("cuMemcpy3D", 3020);
    struct sim_api sim = sim_api();
    unsigned char *off = dev(2 * MiB);        /* offloaded (CUSHIM_OFFLOAD=always, 1 MiB) */
    unsigned char *small = dev(512 * KiB);   /* device */
    printf("offloaded_host_live=%llu\n", (unsigned long long)sim.live(0, 5));
    static unsigned char in[256 * 1024], out[256 * 1024];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 13 + 1);

    /* Host rows of 1024 bytes into offloaded rows of pitch 2048, and back. */
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = in, c.srcPitch = 1024;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = (CUdeviceptr)off, c.dstPitch = 2048;
    c.WidthInBytes = 1024, c.Height = 256;
    printf("rc_2d_in=%d\n", (int)copy2d(&c));
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = (CUdeviceptr)off, c.srcPitch = 2048;
    c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = out, c.dstPitch = 1024;
    c.WidthInBytes = 1024, c.Height = 256;
    memset(out, 0, sizeof out);
    printf("rc_2d_out=%d\n", (int)copy2d_async(&c, 0));
    CHECK(cudaDeviceSynchronize());
    printf("roundtrip_2d=%d\n", memcmp(in, out, sizeof in) == 0);

    /* Offloaded (as device) to real device memory, then 3D back to the host: 2 slices of 64 rows. */
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = (CUdeviceptr)off, c.srcPitch = 2048;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = (CUdeviceptr)small, c.dstPitch = 1024;
    c.WidthInBytes = 1024, c.Height = 128;
    printf("rc_2d_to_device=%d\n", (int)copy2d(&c));
    CUDA_MEMCPY3D d;
    memset(&d, 0, sizeof d);
    d.srcMemoryType = CU_MEMORYTYPE_DEVICE, d.srcDevice = (CUdeviceptr)small, d.srcPitch = 1024, d.srcHeight = 64;
    d.dstMemoryType = CU_MEMORYTYPE_HOST, d.dstHost = out, d.dstPitch = 1024, d.dstHeight = 64;
    d.WidthInBytes = 1024, d.Height = 64, d.Depth = 2;
    memset(out, 0, sizeof out);
    printf("rc_3d=%d\n", (int)copy3d(&d));
    printf("roundtrip_3d=%d\n", memcmp(in, out, 128 * 1024) == 0);

    /* The runtime's cudaMemcpy2D (cuMemcpy2DUnaligned underneath, as cudart 13 looks it up) with
     * an explicit kind into and out of the offloaded buffer: rerouted the same way. */
    memset(out, 0, sizeof out);
    printf("rc_rt_2d_in=%d\n", (int)cudaMemcpy2D(off, 2048, in, 1024, 1024, 128, cudaMemcpyHostToDevice));
    printf("rc_rt_2d_out=%d\n", (int)cudaMemcpy2D(out, 1024, off, 2048, 1024, 128, cudaMemcpyDeviceToHost));
    printf("roundtrip_rt_2d=%d\n", memcmp(in, out, 128 * 1024) == 0);

    /* Pinned host memory the shim does not own, named as device memory: the driver's answer. */
    void *pinned;
    CHECK(cudaMallocHost(&pinned, 4096));
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = in, c.srcPitch = 64;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = (CUdeviceptr)pinned, c.dstPitch = 64;
    c.WidthInBytes = 64, c.Height = 4;
    printf("rc_2d_pinned_as_device=%d\n", (int)copy2d(&c));
    return 0;
}

/* Peer copies (cuMemcpyPeer, cuMemcpy3DPeer) with offloaded memory on one side: the shim makes
 * them with cuMemcpy / as unified memory, so they happen; data byte-exact both ways. */
static int scenario_peer(void)
{
    PFN_cuMemcpyPeer_v4000 peer = entry("cuMemcpyPeer", 4000);
    PFN_cuMemcpyPeerAsync_v4000 peer_async = entry("cuMemcpyPeerAsync", 4000);
    PFN_cuMemcpy3DPeer_v4000 peer3d = entry("cuMemcpy3DPeer", 4000);
    PFN_cuCtxGetCurrent_v4000 get_current = entry("cuCtxGetCurrent", 4000);
    struct sim_api sim = sim_api();
    unsigned char *off = dev(2 * MiB);       /* offloaded (CUSHIM_OFFLOAD=always, 1 MiB) */
    unsigned char *small = dev(512 * KiB);  /* device */
    printf("offloaded_host_live=%llu\n", (unsigned long long)sim.live(0, 5));
    CUcontext ctx = NULL;
    CHECK((cudaError_t)get_current(&ctx));
    static unsigned char in[64 * 1024], out[64 * 1024];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7 + 3);

    /* Device -> offloaded, then offloaded -> device (async), then back to the host. */
    CHECK(cudaMemcpy(small, in, sizeof in, cudaMemcpyHostToDevice));
    uint64_t peer_calls = sim.calls ? sim.calls("cuMemcpyPeer") : 0;
    printf("rc_peer_in=%d\n", (int)peer((CUdeviceptr)off, ctx, (CUdeviceptr)small, ctx, sizeof in));
    /* Made with cuMemcpy when the shim reroutes it: the driver's cuMemcpyPeer not called. */
    printf("peer_in_driver_peer_calls=%llu\n",
           (unsigned long long)((sim.calls ? sim.calls("cuMemcpyPeer") : 0) - peer_calls));
    CHECK(cudaMemset(small, 0, sizeof in));
    printf("rc_peer_out=%d\n",
           (int)peer_async((CUdeviceptr)small, ctx, (CUdeviceptr)off, ctx, sizeof in, NULL));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(out, small, sizeof out, cudaMemcpyDeviceToHost));
    printf("roundtrip_peer=%d\n", memcmp(in, out, sizeof in) == 0);

    /* Offloaded (as device memory) to the host, 3D: 2 slices of 32 rows of 1024 bytes. */
    CUDA_MEMCPY3D_PEER d;
    memset(&d, 0, sizeof d);
    d.srcMemoryType = CU_MEMORYTYPE_DEVICE, d.srcDevice = (CUdeviceptr)off, d.srcContext = ctx;
    d.srcPitch = 1024, d.srcHeight = 32;
    d.dstMemoryType = CU_MEMORYTYPE_HOST, d.dstHost = out, d.dstContext = ctx;
    d.dstPitch = 1024, d.dstHeight = 32;
    d.WidthInBytes = 1024, d.Height = 32, d.Depth = 2;
    memset(out, 0, sizeof out);
    printf("rc_3d_peer=%d\n", (int)peer3d(&d));
    printf("roundtrip_3d_peer=%d\n", memcmp(in, out, sizeof in) == 0);

    /* Memory the shim does not own passes as it was: the driver's own errors. */
    void *pinned;
    CHECK(cudaMallocHost(&pinned, 4096));
    peer_calls = sim.calls ? sim.calls("cuMemcpyPeer") : 0;
    printf("rc_peer_pinned=%d\n", (int)peer((CUdeviceptr)small, ctx, (CUdeviceptr)pinned, ctx, 64));
    printf("peer_pinned_driver_peer_calls=%llu\n",
           (unsigned long long)((sim.calls ? sim.calls("cuMemcpyPeer") : 0) - peer_calls));
    printf("rc_peer_no_context=%d\n", (int)peer((CUdeviceptr)small, NULL, (CUdeviceptr)small + 4096, ctx, 64));
    return 0;
}

/* A compile phase with no device allocation of its own: the weights in use throughout it are its
 * device peak all the same. */
static int scenario_phase_idle(void)
{
    void *w = dev(1 * MiB);         /* run phase: device */
    printf("set_compile=%d\n", set_phase(1));
    void *big = dev(2 * MiB);       /* offloaded */
    CHECK(cudaFree(big));
    printf("set_run=%d\n", set_phase(0));
    CHECK(cudaFree(w));
    return 0;
}

/* The budget's edges: a request near SIZE_MAX (the budget must not wrap), and NULL outputs, which
 * are the driver's to refuse (CUDA_ERROR_INVALID_VALUE) before any budget or spill decision. Run
 * with CUSHIM_DEVICE_LIMIT=10MiB (and CUSHIM_SPILL=on). */
static int scenario_budget_edges(void)
{
    PFN_cuMemAlloc_v3020 alloc = entry("cuMemAlloc", 3020);
    PFN_cuMemAllocAsync_v11020 alloc_async = entry("cuMemAllocAsync", 11020);
    void *a, *b, *c;
    size_t free_b, total_b;
    printf("rc_first=%d\n", (int)cudaMalloc(&a, 8 * MiB));
    printf("rc_huge=%d\n", (int)cudaMalloc(&b, (size_t)-1));
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("free_after_huge=%llu\n", (unsigned long long)free_b);
    printf("rc_again=%d\n", (int)cudaMalloc(&c, 8 * MiB));
    printf("rc_null=%d\n", (int)alloc(NULL, 20 * MiB));
    printf("rc_null_async=%d\n", (int)alloc_async(NULL, 20 * MiB, NULL));
    print_host_live("host_live");
    /* The budget's edge: what is left of it, exactly, then one byte more. */
    void *d, *e;
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    printf("rc_exact=%d\n", (int)cudaMalloc(&d, free_b));
    printf("rc_one_byte_more=%d\n", (int)cudaMalloc(&e, 1));
    return 0;
}

/* Misuse of offloaded memory (CUSHIM_OFFLOAD=always, CUSHIM_OFFLOAD_MIN=1MiB): copies that run
 * past its end get the driver's answer for device memory instead of reaching past the pinned
 * block; cudaFreeHost is refused as for device memory; a free a global-mode capture prohibits
 * fails and keeps the memory the program's. */
static int scenario_offload_misuse(void)
{
    PFN_cuMemcpyHtoD_v3020 htod = entry("cuMemcpyHtoD", 3020);
    PFN_cuMemcpyDtoH_v3020 dtoh = entry("cuMemcpyDtoH", 3020);
    PFN_cuMemcpyDtoD_v3020 dtod = entry("cuMemcpyDtoD", 3020);
    PFN_cuMemcpy2D_v3020 copy2d = entry("cuMemcpy2D", 3020);
    PFN_cuMemcpy3D_v3020 copy3d = entry("cuMemcpy3D", 3020);
    struct sim_api sim = sim_api();
    static unsigned char h[16384];
    memset(h, 7, sizeof h);
    unsigned char *p = dev(4 * MiB);   /* offloaded */
    unsigned char *small = dev(64 * KiB); /* device */
    CUdeviceptr end = (CUdeviceptr)p + 4 * MiB;
    printf("rc_htod_last=%d\n", (int)htod(end - 16, h, 16));
    printf("rc_htod_over=%d\n", (int)htod(end - 16, h, 8192));
    printf("rc_dtoh_over=%d\n", (int)dtoh(h, end - 16, 8192));
    printf("rc_dtod_over=%d\n", (int)dtod(end - 16, (CUdeviceptr)small, 8192));
    printf("rc_async_over=%d\n", (int)cudaMemcpyAsync((void *)(end - 16), h, 8192, cudaMemcpyHostToDevice, 0));
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = h, c.srcPitch = 1024;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = end - 4096, c.dstPitch = 1024;
    c.WidthInBytes = 1024, c.Height = 4;
    printf("rc_2d_last=%d\n", (int)copy2d(&c));
    c.Height = 8;
    printf("rc_2d_over=%d\n", (int)copy2d(&c));
    c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    printf("rc_2d_unified_over=%d\n", (int)copy2d(&c));
    CUDA_MEMCPY3D d;
    memset(&d, 0, sizeof d);
    d.srcMemoryType = CU_MEMORYTYPE_DEVICE, d.srcDevice = end - 8192, d.srcPitch = 1024, d.srcHeight = 4;
    d.dstMemoryType = CU_MEMORYTYPE_HOST, d.dstHost = h, d.dstPitch = 1024, d.dstHeight = 4;
    d.WidthInBytes = 1024, d.Height = 4, d.Depth = 2;
    printf("rc_3d_last=%d\n", (int)copy3d(&d));
    d.Depth = 3;
    printf("rc_3d_over=%d\n", (int)copy3d(&d));

    printf("rc_freehost=%d\n", (int)cudaFreeHost(p));
    printf("rc_free_after_freehost=%d\n", (int)cudaFree(p));

    /* A block smaller than the cached one it may be served from: its own size is the limit. */
    unsigned char *q = dev(3 * MiB);
    printf("rc_smaller_over=%d\n", (int)htod((CUdeviceptr)q + 3 * MiB - 16, h, 8192));

    cudaStream_t s;
    cudaGraph_t g;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    printf("rc_free_in_capture=%d\n", (int)cudaFree(q));
    printf("rc_free_async_invalidated=%d\n", (int)cudaFreeAsync(q, s));
    printf("rc_end=%d\n", (int)cudaStreamEndCapture(s, &g));
    printf("host_live_before=%llu\n", (unsigned long long)sim.live(0, 5));
    printf("rc_free_after_capture=%d\n", (int)cudaFree(q));
    printf("host_live_after=%llu\n", (unsigned long long)sim.live(0, 5));
    return 0;
}

/* cudaMallocAsync on a stream of device 1 while device 0 is current: the memory is device 1's
 * (run with SIMCUDA_DEVICE_COUNT=2). */
static int scenario_async_other_device(void)
{
    cudaStream_t s1;
    void *a;
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaSetDevice(0));
    printf("rc_async=%d\n", (int)cudaMallocAsync(&a, 6 * MiB, s1));
    CHECK(cudaStreamSynchronize(s1));
    print_sim(2);
    return 0;
}

/* Offloaded stream-ordered memory of device 1's stream while device 0 is current (run with
 * SIMCUDA_DEVICE_COUNT=2): pinned memory of the stream's context (device 1's); its asynchronous
 * free waits on an event of that context (no blocking stream synchronize), and the block is
 * cached for that context: device 0's cudaMalloc then takes a block of its own. */
static int scenario_offload_other_device(void)
{
    cudaStream_t s1;
    void *a, *b;
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&s1));
    struct sim_api sim = sim_api(); /* once the runtime has loaded the driver */
    CHECK(cudaSetDevice(0));
    printf("rc_async=%d\n", (int)cudaMallocAsync(&a, MiB, s1));
    uint64_t syncs = sim.calls("cuStreamSynchronize");
    printf("rc_free_async=%d\n", (int)cudaFreeAsync(a, s1));
    printf("stream_syncs=%llu\n", (unsigned long long)(sim.calls("cuStreamSynchronize") - syncs));
    CHECK(cudaStreamSynchronize(s1));
    printf("rc_malloc=%d\n", (int)cudaMalloc(&b, MiB));
    return 0;
}

/* Run with SIMCUDA_DEVICE_COUNT=2: offloaded cudaMallocAsync on a stream of device 1 while device
 * 0 is current, data written, device 0 reset (cudaDeviceReset), data read back, freed on its
 * stream: the memory is device 1's context's, which the reset leaves alone. */
static int scenario_async_reset_other_device(void)
{
    cudaStream_t s1;
    char *d;
    static char in[4096], out[4096];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (char)(i * 7 + 1);
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(NULL));
    CHECK(cudaMallocAsync((void **)&d, 8 * MiB, s1));
    CHECK(cudaStreamSynchronize(s1));
    CHECK(cudaMemcpy(d, in, sizeof in, cudaMemcpyHostToDevice));
    CHECK(cudaDeviceReset());
    printf("rc_read=%d\n", (int)cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost));
    printf("same=%d\n", memcmp(in, out, sizeof in) == 0);
    printf("rc_free_async=%d\n", (int)cudaFreeAsync(d, s1));
    CHECK(cudaStreamSynchronize(s1));
    return 0;
}

/* Explicit copies touching offloaded memory (CUSHIM_OFFLOAD=always, CUSHIM_OFFLOAD_MIN=1MiB): what
 * the explicit calls refuse stays refused when the shim makes them unified copies: a device side
 * that is not one device allocation (past its end, or host memory), a peer context that is none,
 * and, for a copy past an offloaded range, the driver's own refusal first (no current context, a
 * destroyed stream, a synchronous copy during a global capture, which it invalidates). */
static int scenario_reroute_checks(void)
{
    PFN_cuMemcpyDtoD_v3020 dtod = entry("cuMemcpyDtoD", 3020);
    PFN_cuMemcpyHtoD_v3020 htod = entry("cuMemcpyHtoD", 3020);
    PFN_cuMemcpyHtoDAsync_v3020 htod_async = entry("cuMemcpyHtoDAsync", 3020);
    PFN_cuMemcpyPeer_v4000 peer = entry("cuMemcpyPeer", 4000);
    PFN_cuMemcpyPeerAsync_v4000 peer_async = entry("cuMemcpyPeerAsync", 4000);
    PFN_cuCtxGetCurrent_v4000 getcur = entry("cuCtxGetCurrent", 4000);
    PFN_cuCtxSetCurrent_v4000 setcur = entry("cuCtxSetCurrent", 4000);
    PFN_cuStreamBeginCapture_v10010 begin = entry("cuStreamBeginCapture", 10010);
    PFN_cuStreamEndCapture_v10000 end = entry("cuStreamEndCapture", 10000);
    CUdeviceptr off = (CUdeviceptr)(uintptr_t)dev(2 * MiB);     /* offloaded */
    CUdeviceptr small = (CUdeviceptr)(uintptr_t)dev(512 * KiB); /* device */
    static unsigned char host[2 * MiB + 1];
    void *heap = malloc(64);
    CUcontext ctx;
    if (!heap || getcur(&ctx))
        return 20;
    printf("rc_dtod_ok=%d\n", (int)dtod(off, small, 4096));
    printf("rc_dtod_read_past=%d\n", (int)dtod(off, small, MiB));
    printf("rc_dtod_write_past=%d\n", (int)dtod(small, off, MiB));
    printf("rc_dtod_heap=%d\n", (int)dtod(off, (CUdeviceptr)(uintptr_t)heap, 64));
    /* Two VMM handles mapped back to back (PyTorch's expandable segments): a copy across their
     * boundary is one the explicit call takes; past the second mapping's end, not. */
    struct vmm_api v = vmm_api();
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g;
    CUmemGenericAllocationHandle h1, h2;
    CUdeviceptr va;
    CUmemAccessDesc access = {.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    PFN_cuMemSetAccess_v10020 set_access = entry("cuMemSetAccess", 10020);
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || v.create(&h1, g, &prop, 0) ||
        v.create(&h2, g, &prop, 0) || v.reserve(&va, 2 * g, 0, 0, 0) || v.map(va, g, 0, h1, 0) ||
        v.map(va + g, g, 0, h2, 0) || set_access(va, 2 * g, &access, 1))
        return 24;
    printf("rc_dtod_across_vmm_mappings=%d\n", (int)dtod(va + g - 4096, off, 8192));
    printf("rc_dtod_past_vmm_mappings=%d\n", (int)dtod(va + 2 * g - 4096, off, 8192));
    printf("rc_peer_null_dst_ctx=%d\n", (int)peer(off, NULL, small, ctx, 16));
    printf("rc_peer_async_null_src_ctx=%d\n", (int)peer_async(off, ctx, small, NULL, 16, NULL));
    if (setcur(NULL))
        return 21;
    printf("rc_htod_past_no_context=%d\n", (int)htod(off, host, sizeof host));
    /* Pitched copies past the offloaded range too (a review: they gave the shim's INVALID_VALUE). */
    PFN_cuMemcpy2D_v3020 copy2d = entry("cuMemcpy2D", 3020);
    PFN_cuMemcpy2DAsync_v3020 copy2d_async = entry("cuMemcpy2DAsync", 3020);
    PFN_cuMemcpy3D_v3020 copy3d = entry("cuMemcpy3D", 3020);
    CUDA_MEMCPY2D c2 = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = MiB,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = off, .dstPitch = MiB,
                        .WidthInBytes = MiB, .Height = 3};
    CUDA_MEMCPY3D c3 = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = off, .srcPitch = MiB, .srcHeight = 1,
                        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = host, .dstPitch = MiB, .dstHeight = 1,
                        .WidthInBytes = MiB, .Height = 1, .Depth = 3};
    printf("rc_2d_past_no_context=%d\n", (int)copy2d(&c2));
    printf("rc_3d_past_no_context=%d\n", (int)copy3d(&c3));
    if (setcur(ctx))
        return 22;
    printf("rc_2d_past=%d\n", (int)copy2d(&c2));
    printf("rc_3d_past=%d\n", (int)copy3d(&c3));
    cudaStream_t gone, s;
    CHECK(cudaStreamCreate(&gone));
    CHECK(cudaStreamDestroy(gone));
    printf("rc_htod_async_past_destroyed_stream=%d\n", (int)htod_async(off, host, sizeof host, (CUstream)gone));
    printf("rc_2d_async_past_destroyed_stream=%d\n", (int)copy2d_async(&c2, (CUstream)gone));
    PFN_cuMemcpy3DPeerAsync_v4000 peer3d_async = entry("cuMemcpy3DPeerAsync", 4000);
    CUDA_MEMCPY3D_PEER p3 = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = off, .srcContext = ctx,
                             .srcPitch = MiB, .srcHeight = 1, .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = host,
                             .dstContext = ctx, .dstPitch = MiB, .dstHeight = 1, .WidthInBytes = MiB, .Height = 1,
                             .Depth = 3};
    printf("rc_3d_peer_async_past_destroyed_stream=%d\n", (int)peer3d_async(&p3, (CUstream)gone));
    printf("rc_3d_peer_async_past=%d\n", (int)peer3d_async(&p3, NULL));
    CHECK(cudaStreamCreate(&s));
    if (begin((CUstream)s, CU_STREAM_CAPTURE_MODE_GLOBAL))
        return 23;
    printf("rc_htod_past_in_capture=%d\n", (int)htod(off, host, sizeof host));
    CUgraph graph = NULL;
    printf("rc_end_capture=%d\n", (int)end((CUstream)s, &graph));
    free(heap);
    return 0;
}

/* Offloaded memory freed with cuMemFreeAsync on the default stream while no context is current
 * (cuda.h cuMemFreeAsync: CUDA_ERROR_INVALID_CONTEXT), then with the context back: the first is
 * refused, nothing freed; the memory is still the program's to free. */
static int scenario_free_async_no_context(void)
{
    PFN_cuCtxGetCurrent_v4000 getcur = entry("cuCtxGetCurrent", 4000);
    PFN_cuCtxSetCurrent_v4000 setcur = entry("cuCtxSetCurrent", 4000);
    PFN_cuMemFreeAsync_v11020 free_async = entry("cuMemFreeAsync", 11020);
    void *a;
    CUcontext ctx;
    CHECK(cudaMalloc(&a, 2 * MiB));
    if (getcur(&ctx) || setcur(NULL))
        return 20;
    printf("rc_free_async_no_context=%d\n", (int)free_async((CUdeviceptr)(uintptr_t)a, NULL));
    if (setcur(ctx))
        return 21;
    printf("rc_free=%d\n", (int)cudaFree(a));
    return 0;
}

/* Run with CUSHIM_SPILL=on CUSHIM_DEVICE_LIMIT=1GiB: 900 MiB twice from a pool the program made
 * (cudaMallocFromPoolAsync): the second is over the budget and fails; spill serves the stream's
 * current pool only (a named pool's properties would be lost on host memory). */
static int scenario_spill_from_pool(void)
{
    cudaStream_t s;
    cudaMemPool_t pool;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    void *a, *b = NULL;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaMallocFromPoolAsync(&a, 900 * MiB, pool, s));
    printf("rc_second=%d\n", (int)cudaMallocFromPoolAsync(&b, 900 * MiB, pool, s));
    CHECK(cudaFreeAsync(a, s));
    CHECK(cudaStreamSynchronize(s));
    return 0;
}

/* Teardown against polls: one thread offloads 2 MiB blocks on device 1 and frees them with
 * cudaFreeAsync, then resets the device (cudaDeviceReset: the driver frees the blocks with the
 * context), TEARDOWN_ROUNDS times; meanwhile the main thread, on device 0, pins 2 MiB of its own,
 * makes the shim poll (a cudaMalloc and cudaFree) and frees its block. The shim must never
 * release a block the reset freed: the driver may have handed that address to the main thread's
 * block (a review: its own cudaFreeHost then failed, in a few runs of 16). Prints bad=N, the
 * main thread's failed frees. */
#define TEARDOWN_ROUNDS 1000
static atomic_bool teardown_over;
static void *teardown_thread(void *arg)
{
    (void)arg;
    if (cudaSetDevice(1) != cudaSuccess)
        return (void *)1;
    for (int i = 0; i < TEARDOWN_ROUNDS; i++) {
        cudaStream_t s;
        if (cudaStreamCreate(&s) != cudaSuccess)
            break;
        for (int k = 0; k < 4; k++) {
            void *p;
            if (cudaMalloc(&p, 2 * MiB) == cudaSuccess)
                cudaFreeAsync(p, s);
        }
        cudaStreamDestroy(s);
        cudaDeviceReset();
    }
    atomic_store(&teardown_over, true);
    return NULL;
}

static int scenario_teardown_race(void)
{
    pthread_t t;
    long bad = 0, rounds = 0;
    CHECK(cudaSetDevice(0));
    if (pthread_create(&t, NULL, teardown_thread, NULL) != 0)
        return 1;
    while (!atomic_load(&teardown_over)) {
        void *h, *q;
        if (cudaHostAlloc(&h, 2 * MiB, 0) != cudaSuccess)
            continue;
        ((volatile char *)h)[0] = 1;
        if (cudaMalloc(&q, 64) == cudaSuccess)
            cudaFree(q);
        if (cudaFreeHost(h) != cudaSuccess)
            bad++;
        rounds++;
    }
    void *rc;
    pthread_join(t, &rc);
    printf("bad=%ld\nthread=%d\nrounds_positive=%d\n", bad, rc != NULL, rounds > 0);
    return 0;
}

/* A reset against another thread's offloaded allocations: one thread offloads and frees 4000-byte
 * blocks on device 0 while the main thread, on device 1, leaves a 64 KiB device allocation, 4 KiB
 * pinned and 4 KiB managed to cudaDeviceReset, RESET_ROUNDS times. The driver hands an address the
 * reset freed to the offloaded block before the shim has dropped the context's entries: the new
 * entry replaced the old without counting it freed (a stress trial: hundreds of device 1's
 * allocations stayed counted). */
#define RESET_ROUNDS 1500
static atomic_bool reset_rounds_over;
static void *offload_churn(void *arg)
{
    (void)arg;
    if (cudaSetDevice(0) != cudaSuccess)
        return (void *)1;
    static char in[4000];
    while (!atomic_load(&reset_rounds_over)) {
        void *p;
        /* An explicit-kind copy into the block: rerouted only while its offload range is there
         * (a review: a teardown's late drop of the old entry at that address took the new
         * block's range away). */
        if (cudaMalloc(&p, 4000) != cudaSuccess || cudaMemcpy(p, in, sizeof in, cudaMemcpyHostToDevice) != cudaSuccess ||
            cudaFree(p) != cudaSuccess)
            return (void *)1;
    }
    return NULL;
}

static int scenario_reset_vs_offload(void)
{
    pthread_t t;
    CHECK(cudaFree(0));
    if (pthread_create(&t, NULL, offload_churn, NULL) != 0)
        return 1;
    CHECK(cudaSetDevice(1));
    for (int i = 0; i < RESET_ROUNDS; i++) {
        void *d, *h, *m;
        CHECK(cudaMalloc(&d, 64 * KiB));
        CHECK(cudaMallocHost(&h, 4 * KiB));
        CHECK(cudaMallocManaged(&m, 4 * KiB, cudaMemAttachGlobal));
        CHECK(cudaDeviceReset());
    }
    atomic_store(&reset_rounds_over, true);
    void *rc;
    pthread_join(t, &rc);
    printf("thread=%d\n", rc != NULL);
    CHECK(cudaSetDevice(0));
    return 0;
}

/* A pool the program made current (cudaDeviceSetMemPool), exportable (POSIX descriptors): a 4 MiB
 * cudaMallocAsync comes from it, whatever CUSHIM_OFFLOAD or CUSHIM_SPILL say (cuda.h
 * cuMemAllocAsync: "from the current mempool of the provided stream's device"), so that
 * cuMemPoolExportPointer works (a review: it was offloaded, and the export failed). The default
 * pool made current again: a 4 MiB request is the policy's once more. Prints each code. */
static int scenario_current_pool(void)
{
    PFN_cuMemPoolExportPointer_v11020 export_ptr = entry("cuMemPoolExportPointer", 11020);
    cudaStream_t s;
    cudaMemPool_t pool, def;
    struct cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    void *a = NULL, *b = NULL;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMemPoolCreate(&pool, &props));
    CHECK(cudaDeviceSetMemPool(0, pool));
    int rc = (int)cudaMallocAsync(&a, 4 * MiB, s);
    printf("rc_current=%d\n", rc);
    if (rc == 0) {
        /* cuda.h cuMemPoolExportPointer: from "an already shared memory pool" (the real driver
         * refuses the allocation of a pool not exported yet): the pool's own export first. */
        CUmemPoolPtrExportData data;
        int fd = -1;
        PFN_cuMemPoolExportToShareableHandle_v11020 share = entry("cuMemPoolExportToShareableHandle", 11020);
        CHECK((cudaError_t)share(&fd, (CUmemoryPool)pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        printf("rc_export=%d\n", (int)export_ptr(&data, (CUdeviceptr)a));
        close(fd);
        CHECK(cudaFreeAsync(a, s));
    }
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaDeviceGetDefaultMemPool(&def, 0));
    CHECK(cudaDeviceSetMemPool(0, def));
    rc = (int)cudaMallocAsync(&b, 4 * MiB, s);
    printf("rc_default=%d\n", rc);
    if (rc == 0)
        CHECK(cudaFreeAsync(b, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolDestroy(pool));
    return 0;
}

/* An asynchronous free of offloaded memory pending while another stream captures in global
 * mode: the shim must not release it (cuMemFreeHost, a prohibited call) inside the capture. */
static int scenario_poll_during_capture(void)
{
    cudaStream_t s1, s2;
    cudaGraph_t g;
    void *a, *b;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreate(&s2));
    struct sim_api sim = sim_api();
    CHECK(cudaMallocAsync(&a, MiB, s1)); /* offloaded */
    CHECK(cudaFreeAsync(a, s1));         /* pending until a later allocation sees s1 done */
    CHECK(cudaStreamSynchronize(s1));
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal));
    printf("rc_malloc_in_capture=%d\n", (int)cudaMallocAsync(&b, MiB, s2));
    printf("rc_free_in_capture=%d\n", (int)cudaFreeAsync(b, s2));
    printf("rc_end=%d\n", (int)cudaStreamEndCapture(s2, &g));
    printf("host_live_after_capture=%llu\n", (unsigned long long)sim.live(0, 5));
    CHECK(cudaMalloc(&b, 4096)); /* below the offload minimum: device memory; releases a */
    printf("host_live_later=%llu\n", (unsigned long long)sim.live(0, 5));
    return 0;
}

/* 1030 asynchronous frees of offloaded memory on a stream that is not capturing while another
 * stream captures in global mode: 1024 are deferred; the rest cannot be without a call the capture
 * prohibits, so they are refused and the memory stays the program's (freed again after). */
static int scenario_many_frees_during_capture(void)
{
    enum { N = 1030 };
    static void *p[N];
    cudaStream_t s, s2;
    cudaGraph_t g;
    for (int i = 0; i < N; i++)
        CHECK(cudaMalloc(&p[i], 4096));
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    int refused = 0, first_refusal = 0;
    for (int i = 0; i < N; i++) {
        cudaError_t r = cudaFreeAsync(p[i], s2);
        if (r != cudaSuccess && !refused++)
            first_refusal = (int)r;
        if (r == cudaSuccess)
            p[i] = NULL;
    }
    cudaGetLastError();
    printf("refused=%d\nfirst_refusal=%d\n", refused, first_refusal);
    printf("rc_end=%d\n", (int)cudaStreamEndCapture(s, &g));
    CHECK(cudaStreamSynchronize(s2));
    int again = 0;
    for (int i = 0; i < N; i++)
        if (p[i] && cudaFree(p[i]) == cudaSuccess)
            again++;
    printf("freed_after=%d\n", again);
    return 0;
}

/* 1100 asynchronous frees of offloaded memory while another thread captures in the mode named
 * by CAPTURE_MODE (global, thread_local, relaxed): only a global capture keeps the shim from
 * releasing blocks meanwhile, so only then do frees past 1024 pending get refused. */
static pthread_barrier_t cap_bar;
static void *capturing_thread(void *arg)
{
    cudaStream_t cs;
    cudaGraph_t g;
    enum cudaStreamCaptureMode mode = *(enum cudaStreamCaptureMode *)arg;
    CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    CHECK(cudaStreamBeginCapture(cs, mode));
    pthread_barrier_wait(&cap_bar);
    pthread_barrier_wait(&cap_bar);
    printf("rc_end=%d\n", (int)cudaStreamEndCapture(cs, &g));
    return NULL;
}

static int scenario_frees_during_other_capture(void)
{
    enum { N = 1100 };
    static void *p[N];
    const char *m = getenv("CAPTURE_MODE");
    enum cudaStreamCaptureMode mode = !m || !strcmp(m, "global") ? cudaStreamCaptureModeGlobal
                                      : !strcmp(m, "thread_local") ? cudaStreamCaptureModeThreadLocal
                                                                   : cudaStreamCaptureModeRelaxed;
    cudaStream_t s2;
    pthread_t t;
    for (int i = 0; i < N; i++)
        CHECK(cudaMalloc(&p[i], 4096));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    pthread_barrier_init(&cap_bar, NULL, 2);
    pthread_create(&t, NULL, capturing_thread, &mode);
    pthread_barrier_wait(&cap_bar);
    int refused = 0;
    for (int i = 0; i < N; i++)
        if (cudaFreeAsync(p[i], s2) != cudaSuccess)
            refused++;
        else
            p[i] = NULL;
    cudaGetLastError();
    printf("refused=%d\n", refused);
    pthread_barrier_wait(&cap_bar);
    pthread_join(t, NULL);
    for (int i = 0; i < N; i++)
        if (p[i])
            CHECK(cudaFree(p[i]));
    return 0;
}

/* Run with SIMCUDA_LAZY_EVENTS=1: 32 frees pending on stream a, which never gets synchronized,
 * then 200 rounds of an allocation and free on stream b, synchronized each time: b's blocks are
 * released meanwhile, whatever a's wait. */
static int scenario_pending_frees_take_turns(void)
{
    cudaStream_t a, b;
    void *p;
    CHECK(cudaStreamCreate(&a));
    CHECK(cudaStreamCreate(&b));
    for (int i = 0; i < 32; i++) {
        CHECK(cudaMallocAsync(&p, 8192, a));
        CHECK(cudaFreeAsync(p, a));
    }
    for (int i = 0; i < 200; i++) {
        CHECK(cudaMallocAsync(&p, 8192, b));
        CHECK(cudaFreeAsync(p, b));
        CHECK(cudaStreamSynchronize(b));
    }
    CHECK(cudaMalloc(&p, 256));
    CHECK(cudaFree(p));
    print_host_live("host_live");
    return 0;
}

/* Run with SIMCUDA_LAZY_EVENTS=1 (work completes only at a synchronize): 1,200 offloaded
 * cudaMallocAsync blocks freed on one stream, never synchronized meanwhile: the 1,025th free finds
 * every deferred-free slot taken, while a relaxed capture of another stream is live. */
static int scenario_deferred_frees_full(void)
{
    cudaStream_t s, s2;
    cudaGraph_t g;
    void *p;
    static void *q[1200];
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamCreate(&s2));
    for (int i = 0; i < 1200; i++)
        CHECK(cudaMallocAsync(&q[i], 4096, s));
    for (int i = 0; i < 1024; i++) /* every slot taken, none done */
        CHECK(cudaFreeAsync(q[i], s));
    /* with a relaxed capture live on another stream (it prohibits nothing here) */
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
    for (int i = 1024; i < 1100; i++)
        CHECK(cudaFreeAsync(q[i], s));
    CHECK(cudaStreamEndCapture(s2, &g));
    CHECK(cudaGraphDestroy(g));
    for (int i = 1100; i < 1200; i++)
        CHECK(cudaFreeAsync(q[i], s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMalloc(&p, 256));
    CHECK(cudaFree(p));
    printf("done=1\n");
    return 0;
}

/* Run with SIMCUDA_DEVICE_COUNT=2 SIMCUDA_LAZY_EVENTS=1: 200 offloaded blocks of the current
 * device's context (cudaMalloc) freed on a stream of device 1 (cudaFreeAsync: their events are
 * device 1's), then device 0 reset: every one of those events is destroyed. */
static int scenario_events_of_another_context(void)
{
    enum { N = 200 };
    static void *a[N];
    cudaStream_t s1;
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(NULL));
    struct sim_api sim = sim_api();
    for (int i = 0; i < N; i++)
        CHECK(cudaMalloc(&a[i], 16 * KiB));
    for (int i = 0; i < N; i++)
        CHECK(cudaFreeAsync(a[i], s1));
    uint64_t destroyed = sim.calls("cuEventDestroy_v2");
    CHECK(cudaDeviceReset());
    printf("events_made=%llu\n", (unsigned long long)sim.calls("cuEventCreate"));
    printf("events_destroyed_at_reset=%llu\n", (unsigned long long)(sim.calls("cuEventDestroy_v2") - destroyed));
    return 0;
}

/* Run with cuEventCreate failing: an asynchronous free of offloaded memory on the per-thread
 * default stream (the _ptsz entry point, NULL stream) waits on that stream, not the legacy one. */
static int scenario_fallback_per_thread(void)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    CHECK(cudaGetDriverEntryPointByVersion("cuMemFreeAsync", &fn, 11020, cudaEnablePerThreadDefaultStream, &st));
    PFN_cuMemFreeAsync_v11020 free_async = (PFN_cuMemFreeAsync_v11020)fn;
    void *p = dev(2 * MiB); /* offloaded */
    struct sim_api sim = sim_api();
    uint64_t q = sim.calls("cuStreamQuery"), qpt = sim.calls("cuStreamQuery_ptsz");
    uint64_t y = sim.calls("cuStreamSynchronize"), ypt = sim.calls("cuStreamSynchronize_ptsz");
    printf("rc_free=%d\n", (int)free_async((CUdeviceptr)p, NULL));
    printf("legacy_queries=%llu\n", (unsigned long long)(sim.calls("cuStreamQuery") - q));
    printf("per_thread_queries=%llu\n", (unsigned long long)(sim.calls("cuStreamQuery_ptsz") - qpt));
    printf("legacy_syncs=%llu\n", (unsigned long long)(sim.calls("cuStreamSynchronize") - y));
    printf("per_thread_syncs=%llu\n", (unsigned long long)(sim.calls("cuStreamSynchronize_ptsz") - ypt));
    printf("host_live=%llu\n", (unsigned long long)sim.live(0, 5));
    return 0;
}

/* A thread begins a capture on its per-thread default stream and exits without ending it: no
 * one can end it now, so it is not live for the shim any more (later allocations are offloaded
 * again and not counted as capture). */
static void *capture_and_exit(void *arg)
{
    (void)arg;
    CHECK(cudaFree(NULL));
    printf("rc_begin=%d\n", (int)cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
    return NULL;
}

static int scenario_capture_thread_exits(void)
{
    pthread_t t;
    void *p;
    pthread_create(&t, NULL, capture_and_exit, NULL);
    pthread_join(t, NULL);
    printf("rc_malloc=%d\n", (int)cudaMalloc(&p, 8 * MiB));
    print_host_live("host_live");
    return 0;
}

static const struct scenario scenarios[] = {
    {"cache", scenario_cache, 1},                 {"phase_first", scenario_phase_first, 1},
    {"compile_run", scenario_compile_run, 1}, {"deferred_frees_full", scenario_deferred_frees_full, 1},     {"budget", scenario_budget, 1},
    {"capture", scenario_capture, 1},             {"pytorch_capture", scenario_pytorch_capture, 1},
    {"async_free", scenario_async_free, 1},       {"phase_loop", scenario_phase_loop, 1},
    {"reset", scenario_reset, 1},                 {"vmm_budget", scenario_vmm_budget, 1},
    {"phase_stack", scenario_phase_stack, 1},     {"capture_destroyed", scenario_capture_destroyed, 1},
    {"phase_fork", scenario_phase_fork, 1},       {"phase_stale", scenario_phase_stale, 1},
    {"phase_other_kinds", scenario_phase_other_kinds, 1}, {"phase_race", scenario_phase_race, 1},
    {"phase_during_call", scenario_phase_during_call, 1},
    {"phase_during_async", scenario_phase_during_async, 1},
    {"switch_during_offload", scenario_switch_during_offload, 1}, {"budget_rounds", scenario_budget_rounds, 1},
    {"free_async_cancel_state", scenario_free_async_cancel_state, 1},
    {"async_free_exit", scenario_async_free_exit, 1},
    {"fork_reader", scenario_fork_reader, 1},     {"async_budget", scenario_async_budget, 1},
    {"destroyed_pool_budget", scenario_destroyed_pool_budget, 1},
    {"pitched", scenario_pitched, 1},             {"peer", scenario_peer, 1},
    {"current_pool", scenario_current_pool, 1}, {"teardown_race", scenario_teardown_race, 2}, {"reset_vs_offload", scenario_reset_vs_offload, 2},
    {"phase_idle", scenario_phase_idle, 1},       {"budget_edges", scenario_budget_edges, 1},
    {"offload_misuse", scenario_offload_misuse, 1}, {"async_other_device", scenario_async_other_device, 1},
    {"offload_other_device", scenario_offload_other_device, 2},
    {"poll_during_capture", scenario_poll_during_capture, 1},
    {"many_frees_during_capture", scenario_many_frees_during_capture, 1},
    {"frees_during_other_capture", scenario_frees_during_other_capture, 1},
    {"pending_frees_take_turns", scenario_pending_frees_take_turns, 1},
    {"events_of_another_context", scenario_events_of_another_context, 2},
    {"fallback_per_thread", scenario_fallback_per_thread, 1},
    {"capture_thread_exits", scenario_capture_thread_exits, 1},
    {"async_reset_other_device", scenario_async_reset_other_device, 1},
    {"spill_from_pool", scenario_spill_from_pool, 1},
    {"free_async_no_context", scenario_free_async_no_context, 1},
    {"reroute_checks", scenario_reroute_checks, 1},
    {"served_idle_taken", scenario_served_idle_taken, 1},
};

int main(int argc, char **argv)
{
    set_phase = (int (*)(int))cushim_fn("cushim_set_phase");
    get_phase = (int (*)(void))cushim_fn("cushim_get_phase");
    if (argc != 2) /* the usage, with its scenarios */
        return scenario_main(argc, argv, scenarios, sizeof scenarios / sizeof scenarios[0]);
    if (!set_phase || !get_phase) {
        fprintf(stderr, "offload_prog: not running under cushim\n");
        return 3;
    }
    return scenario_main(argc, argv, scenarios, sizeof scenarios / sizeof scenarios[0]);
}
