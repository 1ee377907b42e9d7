/* graph_prog SCENARIO: CUDA graph programs for tests/test_graphs.c (runtime API only).
 * Prints "key=value" lines, ending with the simulated device's own counters. */
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)

/* A graph of one allocation node of `bytes` whose pool is on `device`; *dptr (if not NULL)
 * receives the address its launches give. */
/* Adds an allocation node of `bytes` on `device` to g, with no dependency; its address in *dptr
 * (if dptr). Exits the program (CHECK) on failure. */
static void add_alloc_node(cudaGraph_t g, size_t bytes, int device, void **dptr)
{
    struct cudaMemAllocNodeParams params;
    memset(&params, 0, sizeof params);
    params.poolProps.allocType = cudaMemAllocationTypePinned;
    params.poolProps.location.type = cudaMemLocationTypeDevice;
    params.poolProps.location.id = device;
    params.bytesize = bytes;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddMemAllocNode(&node, g, NULL, 0, &params));
    if (dptr)
        *dptr = params.dptr;
}

static cudaGraph_t node_graph_at(size_t bytes, int device, void **dptr)
{
    cudaGraph_t g;
    CHECK(cudaGraphCreate(&g, 0));
    add_alloc_node(g, bytes, device, dptr);
    return g;
}

static cudaGraph_t node_graph(size_t bytes, int device)
{
    return node_graph_at(bytes, device, NULL);
}

/* A graph of one allocation node of `bytes` on device 0, instantiated and launched on s (its
 * memory stays attached: the node has no free). */
static int one_node_graph(size_t bytes, cudaStream_t s)
{
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiateWithFlags(&x, node_graph(bytes, 0), 0));
    CHECK(cudaGraphLaunch(x, s));
    return 0;
}

/* Allocation nodes from a capture and from cudaGraphAddMemAllocNode; launches; destroy. */
static int scenario_nodes(void)
{
    cudaStream_t s;
    cudaGraph_t g1;
    cudaGraphExec_t x1;
    void *p;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync(&p, 3 * MiB, s));
    CHECK(cudaMemsetAsync(p, 0, 3 * MiB, s));
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamEndCapture(s, &g1));
    CHECK(cudaGraphInstantiate(&x1, g1, 0));
    for (int i = 0; i < 5; i++)
        CHECK(cudaGraphLaunch(x1, s));
    CHECK(cudaStreamSynchronize(s));

    /* A graph whose allocation outlives it: memory stays attached after the launch. */
    if (one_node_graph(MiB, s))
        return 1;
    CHECK(cudaStreamSynchronize(s));
    printf("attached_used=%llu\n", (unsigned long long)sim_api().live(0, 7));
    CHECK(cudaGraphExecDestroy(x1)); /* lowers the live count; frees nothing (cuda.h) */
    CHECK(cudaGraphDestroy(g1));
    return 0;
}

/* cudaMalloc inside captures: counted as capture bytes in relaxed mode; refused in global mode. */
static int scenario_capture_malloc(void)
{
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    void *a, *b = NULL;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMalloc(&a, 2 * MiB));
    CHECK(cudaMemsetAsync(a, 0, 2 * MiB, s));
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    printf("rc_global=%d\n", (int)cudaMalloc(&b, MiB));
    printf("rc_end_global=%d\n", (int)cudaStreamEndCapture(s, &g));
    cudaGetLastError();
    return 0;
}

/* A decoder that captures one graph per sequence length. NEW: each capture allocates its
 * per-shape buffers; POOL: buffers for the largest shape come first and every capture reuses
 * them. */
static int scenario_decoder(int recycled)
{
    static const unsigned lens[] = {16, 32, 64, 128};
    cudaStream_t s;
    void *pool_in = NULL, *pool_out = NULL;
    CHECK(cudaStreamCreate(&s));
    if (recycled) {
        CHECK(cudaMalloc(&pool_in, 128 * 64 * KiB));
        CHECK(cudaMalloc(&pool_out, 128 * 64 * KiB));
    }
    for (unsigned i = 0; i < 4; i++) {
        size_t bytes = lens[i] * 64 * KiB;
        void *in = pool_in, *out = pool_out;
        cudaGraph_t g;
        cudaGraphExec_t x;
        /* PyTorch captures in global mode and allocates in relaxed mode: relaxed here too. */
        CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
        if (!recycled) {
            CHECK(cudaMalloc(&in, bytes));
            CHECK(cudaMalloc(&out, bytes));
        }
        CHECK(cudaMemsetAsync(in, 1, bytes, s));
        CHECK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, s));
        CHECK(cudaStreamEndCapture(s, &g));
        CHECK(cudaGraphInstantiate(&x, g, 0));
        for (int step = 0; step < 3; step++)
            CHECK(cudaGraphLaunch(x, s));
    }
    CHECK(cudaStreamSynchronize(s));
    return 0;
}

static int scenario_decoder_new(void) { return scenario_decoder(0); }
static int scenario_decoder_pool(void) { return scenario_decoder(1); }

/* Graph memory attached by two launches in quick succession (the second within the launch-time
 * sampling interval), then cudaMemGetInfo: the graph pool's reserve is read before the untracked
 * bytes are worked out, so it never shows as untracked. */
static int scenario_meminfo_after_launch(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    if (one_node_graph(MiB, s) || one_node_graph(64 * MiB, s))
        return 1;
    CHECK(cudaStreamSynchronize(s));
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    int (*get)(int, struct cushim_device_stats *) =
        (int (*)(int, struct cushim_device_stats *))cushim_fn("cushim_get_device_stats");
    struct cushim_device_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (!get || get(0, &st) != 0)
        return 2;
    printf("api.untracked=%llu\napi.graph_reserved=%llu\napi.graph_used=%llu\napi.graph_sampled=%d\n",
           (unsigned long long)st.untracked_bytes, (unsigned long long)st.graph_pool_reserved_current_bytes,
           (unsigned long long)st.graph_pool_used_current_bytes, st.graph_pool_sampled_ns != 0);
    return 0;
}

/* Under a device budget (CUSHIM_DEVICE_LIMIT=512MiB): two graphs whose allocation nodes attach
 * 16 MiB and 256 MiB of graph memory at their launches (the second within the launch-time sampling
 * interval); whether 300 MiB and then 200 MiB can be had with cudaMalloc, then what cudaMemGetInfo
 * says. */
static int scenario_budget_and_graph_memory(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    if (one_node_graph(16 * MiB, s) || one_node_graph(256 * MiB, s))
        return 1;
    CHECK(cudaStreamSynchronize(s));
    void *a = NULL, *b = NULL;
    int over = (int)cudaMalloc(&a, 300 * MiB);
    int fits = (int)cudaMalloc(&b, 200 * MiB);
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    printf("free=%zu\ntotal=%zu\nrc_over=%d\nrc_fits=%d\n", f, t, over, fits);
    return 0;
}

/* Under a budget on device 1 (SIMCUDA_DEVICE_COUNT=2, CUSHIM_DEVICE_LIMIT=1:1GiB): two graphs
 * instantiated while device 0 is current, whose allocation nodes draw on device 1's pool (16 MiB,
 * then 400 MiB, the second launch within the sampling interval), launched on a device-0 stream;
 * then whether device 1 gives 800 MiB more. */
static int scenario_budget_other_device_pool(void)
{
    cudaStream_t s;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreate(&s));
    cudaGraphExec_t x1, x2;
    CHECK(cudaGraphInstantiateWithFlags(&x1, node_graph(16 * MiB, 1), 0));
    CHECK(cudaGraphInstantiateWithFlags(&x2, node_graph(400 * MiB, 1), 0));
    CHECK(cudaGraphLaunch(x1, s));
    CHECK(cudaGraphLaunch(x2, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaSetDevice(1));
    void *a = NULL;
    printf("rc_800=%d\n", (int)cudaMalloc(&a, 800 * MiB));
    return 0;
}

/* Under a device budget (CUSHIM_DEVICE_LIMIT=1GiB): a graph of one 400 MiB allocation node,
 * instantiated, the pool read (cudaMemGetInfo), then uploaded (cudaGraphUpload attaches its
 * memory) within the sampling interval; then whether 800 MiB can be had. */
static int scenario_budget_upload(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiateWithFlags(&x, node_graph(400 * MiB, 0), 0));
    size_t f, t;
    CHECK(cudaMemGetInfo(&f, &t));
    CHECK(cudaGraphUpload(x, s));
    CHECK(cudaStreamSynchronize(s));
    void *a = NULL;
    printf("rc_800=%d\n", (int)cudaMalloc(&a, 800 * MiB));
    CHECK(cudaMemGetInfo(&f, &t));
    printf("free=%zu\n", f);
    return 0;
}

/* Under a device budget (CUSHIM_DEVICE_LIMIT=512MiB): 400 MiB of graph memory attached by a
 * launch, freed, its graph destroyed, then the pool trimmed while another stream captures (the
 * shim cannot read the pool then); after the capture, whether 300 MiB can be had. */
static int scenario_budget_after_trim_during_capture(void)
{
    cudaStream_t s, c;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamCreate(&c));
    void *p;
    cudaGraph_t g = node_graph_at(400 * MiB, 0, &p), cg;
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiateWithFlags(&x, g, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(p));
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamBeginCapture(c, cudaStreamCaptureModeRelaxed));
    CHECK(cudaDeviceGraphMemTrim(0));
    CHECK(cudaStreamEndCapture(c, &cg));
    void *a = NULL;
    printf("rc_after_trim=%d\n", (int)cudaMalloc(&a, 300 * MiB));
    return 0;
}

/* Under a device budget (CUSHIM_DEVICE_LIMIT=512MiB): 400 MiB of graph memory attached by a
 * launch and freed (the pool keeps its reserve), then cudaDeviceReset, which ends the context and
 * with it the pool's reserve (cuda_runtime_api.h cudaDeviceReset: "Destroy all allocations and
 * reset all state on the current device"); then whether 300 MiB can be had. */
static int scenario_budget_after_reset(void)
{
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));
    void *p;
    cudaGraphExec_t x;
    CHECK(cudaGraphInstantiateWithFlags(&x, node_graph_at(400 * MiB, 0, &p), 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(p));
    CHECK(cudaDeviceReset());
    void *a = NULL;
    printf("rc_after_reset=%d\n", (int)cudaMalloc(&a, 300 * MiB));
    return 0;
}

/* The device's counters through the cushim API, printed as api.TAG.FIELD=value. */
static int print_stats(const char *tag, int device)
{
    int (*get)(int, struct cushim_device_stats *) =
        (int (*)(int, struct cushim_device_stats *))cushim_fn("cushim_get_device_stats");
    struct cushim_device_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (!get || get(device, &st) != 0)
        return 2;
    printf("api.%s.untracked=%llu\napi.%s.untracked_sampled=%d\napi.%s.graph_used=%llu\n"
           "api.%s.graph_reserved=%llu\napi.%s.graph_sampled=%d\n",
           tag, (unsigned long long)st.untracked_bytes, tag, st.untracked_sampled_ns != 0, tag,
           (unsigned long long)st.graph_pool_used_current_bytes, tag,
           (unsigned long long)st.graph_pool_reserved_current_bytes, tag, st.graph_pool_sampled_ns != 0);
    return 0;
}

/* A graph's first launch reads the pool, however recent the last read (a fresh-user trial: a
 * graph launched once after another was never read while the program ran): graph A (no nodes)
 * is launched, then at once graph B with a 64 MiB allocation node, once. */
/* CAPTURE_END=thread: the capture, on a thread's per-thread default stream, ends with the thread. */
static atomic_int capture_thread_state; /* 1: capturing; 2: may exit */
static void *capture_then_exit(void *arg)
{
    (void)arg;
    if (cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed) != cudaSuccess)
        return (void *)1;
    atomic_store(&capture_thread_state, 1);
    while (atomic_load(&capture_thread_state) != 2)
        sched_yield();
    return NULL; /* still capturing: the thread's exit ends it */
}

static int scenario_first_launch_read(void)
{
    cudaStream_t s;
    cudaGraph_t ga;
    cudaGraphExec_t xa, xb;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaGraphCreate(&ga, 0));
    CHECK(cudaGraphInstantiate(&xa, ga, 0));
    CHECK(cudaGraphLaunch(xa, s));
    CHECK(cudaGraphInstantiate(&xb, node_graph(64 * MiB, 0), 0));
    CHECK(cudaGraphLaunch(xb, s));
    CHECK(cudaStreamSynchronize(s));
    if (print_stats("first", 0))
        return 2;
    /* C's first launch comes while another stream captures: the read is owed, and made when the
     * capture ends (a review: it was lost). */
    cudaStream_t s2;
    cudaGraph_t cg;
    cudaGraphExec_t xc;
    /* However the last capture ends (CAPTURE_END: unset, its end; destroy, its stream destroyed;
     * reset, its context reset; thread, its thread's exit): a review found the read lost but for
     * the end. */
    const char *end = getenv("CAPTURE_END");
    end = end ? end : "";
    pthread_t t;
    CHECK(cudaStreamCreate(&s2));
    CHECK(cudaGraphInstantiate(&xc, node_graph(8 * MiB, 0), 0));
    if (!strcmp(end, "thread")) {
        if (pthread_create(&t, NULL, capture_then_exit, NULL) != 0)
            return 1;
        while (atomic_load(&capture_thread_state) != 1)
            sched_yield();
    } else {
        CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
    }
    CHECK(cudaGraphLaunch(xc, s));
    CHECK(cudaStreamSynchronize(s));
    if (print_stats("during", 0))
        return 2;
    if (!strcmp(end, "thread")) {
        void *rc;
        atomic_store(&capture_thread_state, 2);
        pthread_join(t, &rc);
        if (rc)
            return 1;
    } else if (!strcmp(end, "destroy")) {
        CHECK(cudaStreamDestroy(s2));
    } else if (!strcmp(end, "reset")) {
        CHECK(cudaDeviceReset());
    } else {
        CHECK(cudaStreamEndCapture(s2, &cg));
    }
    return print_stats("after", 0);
}

/* A capture on a stream of device 1 begun while device 0 is current belongs to device 1's context
 * (cuStreamGetCtx): resetting device 1 ends it, so a later allocation is not `capture`. */
static int scenario_capture_other_device_reset(void)
{
    cudaStream_t s1;
    void *p;
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
    CHECK(cudaSetDevice(1));
    CHECK(cudaDeviceReset()); /* destroys s1 and its capture */
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&p, MiB));
    return 0;
}

/* The converse: resetting device 0 leaves the capture on device 1's stream live; what is allocated
 * meanwhile is its capture's. */
static int scenario_capture_current_device_reset(void)
{
    cudaStream_t s1;
    cudaGraph_t g;
    cudaGraphExec_t x;
    void *p, *buf;
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaMalloc(&buf, 4096));
    CHECK(cudaSetDevice(0));
    CHECK(cudaFree(0));
    CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
    CHECK(cudaDeviceReset()); /* device 0 only */
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&p, 2 * MiB));
    CHECK(cudaMemsetAsync(buf, 0, 64, s1));
    CHECK(cudaSetDevice(0)); /* ended with device 0 current: still device 1's capture */
    CHECK(cudaStreamEndCapture(s1, &g));
    CHECK(cudaSetDevice(1));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    return 0;
}

/* A worker thread that runs jobs on request, so that one thread can act several times. */
static void (*job)(void);
static pthread_barrier_t job_go, job_done;

static void *worker(void *arg)
{
    CHECK(cudaSetDevice(0));
    for (;;) {
        pthread_barrier_wait(&job_go);
        if (!job)
            return arg;
        job();
        pthread_barrier_wait(&job_done);
    }
}

static void on_worker(void (*fn)(void))
{
    job = fn;
    pthread_barrier_wait(&job_go);
    if (fn)
        pthread_barrier_wait(&job_done);
}

static size_t outsider_bytes;
static void *outsider(void *arg)
{
    void *p;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&p, outsider_bytes));
    return arg;
}

/* An allocation by a thread that began no live capture. */
static void outsider_malloc(size_t bytes)
{
    pthread_t t;
    outsider_bytes = bytes;
    pthread_create(&t, NULL, outsider, NULL);
    pthread_join(t, NULL);
}

static cudaStream_t ov_s3;
static cudaGraph_t ov_g3;
static void *ov_buf;
static void ov_begin(void) { CHECK(cudaStreamBeginCapture(ov_s3, cudaStreamCaptureModeRelaxed)); }
static void ov_malloc(void)
{
    void *p;
    CHECK(cudaMalloc(&p, 4 * 64 * KiB));
}
static void ov_end(void)
{
    CHECK(cudaMemsetAsync(ov_buf, 0, 64, ov_s3));
    CHECK(cudaStreamEndCapture(ov_s3, &ov_g3));
}

/* Overlapping relaxed captures on two threads: an allocation is credited to the allocating
 * thread's own innermost live capture, else to the live one begun last. Sizes in 64 KiB units:
 * s1 gets 2 + 64, s2 1 + 16, s3 4 + 32. */
static int scenario_overlapping_captures(void)
{
    cudaStream_t s1, s2;
    cudaGraph_t g1, g2;
    cudaGraphExec_t x1, x2, x3;
    void *a, *d;
    pthread_t w;
    CHECK(cudaStreamCreate(&s1));
    CHECK(cudaStreamCreate(&s2));
    CHECK(cudaStreamCreate(&ov_s3));
    CHECK(cudaMalloc(&ov_buf, 4096));
    pthread_barrier_init(&job_go, NULL, 2);
    pthread_barrier_init(&job_done, NULL, 2);
    pthread_create(&w, NULL, worker, NULL);
    CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeRelaxed));
    on_worker(ov_begin);
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMalloc(&a, 1 * 64 * KiB));  /* main's innermost: s2 */
    on_worker(ov_malloc);                 /* the worker's own: s3, not s2 begun after it */
    outsider_malloc(16 * 64 * KiB);       /* the live one begun last: s2 */
    CHECK(cudaMemsetAsync(ov_buf, 0, 64, s2));
    CHECK(cudaStreamEndCapture(s2, &g2));
    CHECK(cudaMalloc(&d, 2 * 64 * KiB));  /* main's innermost live one now: s1 */
    outsider_malloc(32 * 64 * KiB);       /* s3 (begun after s1) */
    on_worker(ov_end);
    outsider_malloc(64 * 64 * KiB);       /* s1, the only one live */
    CHECK(cudaMemsetAsync(ov_buf, 0, 64, s1));
    CHECK(cudaStreamEndCapture(s1, &g1));
    on_worker(NULL);
    pthread_join(w, NULL);
    CHECK(cudaGraphInstantiate(&x1, g1, 0));
    CHECK(cudaGraphInstantiate(&x2, g2, 0));
    CHECK(cudaGraphInstantiate(&x3, ov_g3, 0));
    return 0;
}

/* Two captures into one graph (cuStreamBeginCaptureToGraph): its capture bytes are both's. */
static int scenario_capture_twice_to_graph(void)
{
    cudaStream_t s;
    cudaGraph_t g, out;
    cudaGraphExec_t x;
    void *a, *b;
    PFN_cuStreamBeginCaptureToGraph_v12030 to_graph = entry("cuStreamBeginCaptureToGraph", 12030);
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaGraphCreate(&g, 0));
    for (int i = 0; i < 2; i++) {
        if (to_graph(s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS)
            return 3;
        CHECK(cudaMalloc(i ? &b : &a, (i + 1) * MiB));
        CHECK(cudaMemsetAsync(i ? b : a, 0, 4096, s));
        CHECK(cudaStreamEndCapture(s, &out));
        printf("same_graph.%d=%d\n", i, out == g);
    }
    CHECK(cudaGraphInstantiate(&x, g, 0));
    return 0;
}

/* Child graphs moved into their parent (cuda.h, CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE): a captured
 * graph with 4 MiB of cudaMalloc made during its capture, and a chain of 12 graphs, each moved
 * into the next, whose innermost holds a 1 MiB allocation node, both moved into one top graph,
 * which is instantiated and launched. Then the top graph is destroyed (the moved ones with it)
 * and new graphs are made until one gets the captured graph's handle (the simulator hands out
 * destroyed graphs' handles again), which is instantiated: it made no capture. */
static int scenario_moved_children(void)
{
    PFN_cuGraphAddNode_v12030 add_node = entry("cuGraphAddNode", 12030);
    cudaStream_t s;
    cudaGraph_t captured, chain, top, fresh;
    cudaGraphExec_t x;
    void *p;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMalloc(&p, 4 * MiB));
    CHECK(cudaMemsetAsync(p, 0, 4 * MiB, s));
    CHECK(cudaStreamEndCapture(s, &captured));
    CUgraphNodeParams np;
    CUgraphNode n;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_GRAPH;
    np.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    chain = node_graph(MiB, 0);
    for (int i = 0; i < 12; i++) {
        cudaGraph_t parent;
        CHECK(cudaGraphCreate(&parent, 0));
        np.graph.graph = (CUgraph)chain;
        if (add_node(&n, (CUgraph)parent, NULL, NULL, 0, &np) != CUDA_SUCCESS)
            return 3;
        chain = parent;
    }
    CHECK(cudaGraphCreate(&top, 0));
    np.graph.graph = (CUgraph)captured;
    if (add_node(&n, (CUgraph)top, NULL, NULL, 0, &np) != CUDA_SUCCESS)
        return 4;
    np.graph.graph = (CUgraph)chain;
    if (add_node(&n, (CUgraph)top, NULL, NULL, 0, &np) != CUDA_SUCCESS)
        return 5;
    CHECK(cudaGraphInstantiate(&x, top, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaGraphExecDestroy(x));
    CHECK(cudaGraphDestroy(top));
    int made = 0;
    do {
        CHECK(cudaGraphCreate(&fresh, 0));
    } while (fresh != captured && ++made < 64);
    printf("handle_reused=%d\n", fresh == captured);
    CHECK(cudaGraphInstantiate(&x, fresh, 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    return 0;
}

/* cudaMemGetInfo while a capture is live cannot read the graph pool, so it leaves the untracked
 * bytes as they were: the 64 MiB attached by the second launch (not read then: a thread reads the
 * pool on its 1st, 17th, ... launch) never shows as untracked. */
static int scenario_meminfo_during_capture(void)
{
    cudaStream_t s, s2;
    cudaGraph_t g;
    cudaGraphExec_t x1, x2;
    size_t f, t;
    void *p2;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamCreate(&s2));
    CHECK(cudaGraphInstantiate(&x1, node_graph(MiB, 0), 0));
    CHECK(cudaGraphLaunch(x1, s));
    /* x2's first launch is read (65 MiB); freed and trimmed (read: 1 MiB), its second launch
     * attaches 64 MiB again, not read (within 100 ms, the thread's third launch). */
    CHECK(cudaGraphInstantiate(&x2, node_graph_at(64 * MiB, 0, &p2), 0));
    CHECK(cudaGraphLaunch(x2, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaFree(p2));
    CHECK(cudaDeviceGraphMemTrim(0));
    CHECK(cudaGraphLaunch(x2, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamBeginCapture(s2, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMemGetInfo(&f, &t));
    printf("used_during=%llu\n", (unsigned long long)(t - f));
    if (print_stats("during", 0))
        return 2;
    CHECK(cudaStreamEndCapture(s2, &g));
    CHECK(cudaMemGetInfo(&f, &t));
    return print_stats("after", 0);
}

/* Allocation nodes whose pool is on device 1 while device 0 is current: their bytes are device
 * 1's, and device 1's pool is read after the launch and the upload. */
static int scenario_nodes_on_other_device(void)
{
    cudaStream_t s;
    cudaGraphExec_t x1, x2;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaGraphInstantiate(&x1, node_graph(7 * MiB, 1), 0));
    CHECK(cudaGraphLaunch(x1, s));
    CHECK(cudaStreamSynchronize(s));
    if (print_stats("launch.dev0", 0) || print_stats("launch.dev1", 1))
        return 2;
    /* One graph, nodes on both devices: 1 MiB on device 0, 2 MiB on device 1. */
    cudaGraph_t g = node_graph(MiB, 0);
    add_alloc_node(g, 2 * MiB, 1, NULL);
    CHECK(cudaGraphInstantiate(&x2, g, 0));
    usleep(150000); /* past the 100 ms between two reads of a pool */
    CHECK(cudaGraphUpload(x2, s));
    CHECK(cudaStreamSynchronize(s));
    if (print_stats("upload.dev0", 0) || print_stats("upload.dev1", 1))
        return 2;
    CHECK(cudaGraphExecDestroy(x1));
    return 0;
}

/* cudaGraphExecUpdate (the 12000 ABI) of an executable graph instantiated on device 0 from a
 * capture (a 1 MiB allocation node on device 0, 2 MiB of cudaMalloc during it) to a graph of one
 * 3 MiB allocation node on device 1: then launched, which reads device 1's pool. An update to a
 * graph of two nodes is refused (topology); one through the 10020 ABI to a 5 MiB node on device 1
 * succeeds. Prints each code and the stats after the launch. */
static int scenario_exec_update(void)
{
    PFN_cuGraphExecUpdate_v10020 update_v1 = entry("cuGraphExecUpdate", 10020);
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    void *a, *b;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMallocAsync(&a, MiB, s));
    CHECK(cudaMalloc(&b, 2 * MiB));
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&x, g, 0));
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    int rc = (int)cudaGraphExecUpdate(x, node_graph(3 * MiB, 1), &info);
    printf("rc_update=%d\nresult=%d\n", rc, (int)info.result);
    cudaGraph_t two = node_graph(MiB, 0);
    add_alloc_node(two, MiB, 0, NULL);
    rc = (int)cudaGraphExecUpdate(x, two, &info);
    printf("rc_update_two=%d\nresult_two=%d\n", rc, (int)info.result);
    cudaGetLastError();
    CUgraphNode error_node;
    CUgraphExecUpdateResult result;
    printf("rc_update_v1=%d\n", (int)update_v1((CUgraphExec)x, (CUgraph)node_graph(5 * MiB, 1), &error_node, &result));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    return print_stats("launch.dev1", 1);
}

/* Run with libfailmmap.so (FAIL_MMAP_AFTER=1) so that the shim's tables fill up: an executable
 * graph with a 1 MiB allocation node on device 0 is instantiated first (counted), then $GRAPHS
 * more (default 20000), each with a 4 KiB allocation node on every device, fill the shim's table
 * of per-device node bytes (eight entries an executable graph on eight devices, one in the table
 * of executable graphs, so that one fills first); the first is updated to a graph of a 3 MiB node
 * on device 0, then every executable graph is destroyed. Prints rc_update. */
static int scenario_exec_update_table_full(void)
{
    enum { N = 20000 };
    cudaGraphExec_t x, *more = malloc(N * sizeof *more);
    if (!more)
        return 2;
    CHECK(cudaGraphInstantiateWithFlags(&x, node_graph(MiB, 0), 0));
    int devices = 0;
    CHECK(cudaGetDeviceCount(&devices));
    const char *n_env = getenv("GRAPHS");
    int n = n_env ? atoi(n_env) : N;
    for (int i = 0; i < n; i++) {
        cudaGraph_t g = node_graph(4096, 0);
        for (int d = 1; d < devices; d++)
            add_alloc_node(g, 4096, d, NULL);
        CHECK(cudaGraphInstantiateWithFlags(&more[i], g, 0));
    }
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    printf("rc_update=%d\n", (int)cudaGraphExecUpdate(x, node_graph(3 * MiB, 0), &info));
    CHECK(cudaGraphExecDestroy(x));
    for (int i = 0; i < n; i++)
        CHECK(cudaGraphExecDestroy(more[i]));
    free(more);
    return 0;
}

/* A graph allocating and freeing `bytes`, captured on s. */
static cudaGraph_t alloc_free_graph(cudaStream_t s, size_t bytes)
{
    cudaGraph_t g;
    void *p;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK(cudaMallocAsync(&p, bytes, s));
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamEndCapture(s, &g));
    return g;
}

/* An update after a launch: the executable graph (1 MiB allocated and freed) is launched, which
 * reads the pool, updated to a graph allocating 3 MiB, and launched again at once (well within
 * the 100 ms between two reads): that launch attaches new memory, so the pool is read again. */
static int scenario_exec_update_after_launch(void)
{
    cudaStream_t s;
    cudaGraphExec_t x;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaGraphInstantiate(&x, alloc_free_graph(s, MiB), 0));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    if (print_stats("first", 0))
        return 2;
    cudaGraphExecUpdateResultInfo info;
    CHECK(cudaGraphExecUpdate(x, alloc_free_graph(s, 3 * MiB), &info));
    CHECK(cudaGraphLaunch(x, s));
    CHECK(cudaStreamSynchronize(s));
    return print_stats("relaunch", 0);
}

/* cudaGraphInstantiateWithParams with cudaGraphInstantiateFlagUpload uploads: the pool is read. */
static int scenario_instantiate_with_upload(void)
{
    cudaStream_t s;
    cudaGraphExec_t x;
    CHECK(cudaStreamCreate(&s));
    cudaGraphInstantiateParams ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = cudaGraphInstantiateFlagUpload;
    ip.uploadStream = s;
    CHECK(cudaGraphInstantiateWithParams(&x, node_graph(9 * MiB, 0), &ip));
    CHECK(cudaStreamSynchronize(s));
    printf("sim_graph_used=%llu\n", (unsigned long long)sim_api().live(0, 7));
    return print_stats("upload", 0);
}

/* A child forked while the parent captures has no live capture: its allocation is plain device
 * memory. */
static int scenario_fork_during_capture(void)
{
    cudaStream_t s;
    cudaGraph_t g;
    void *buf;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaMalloc(&buf, 4096));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        void *p;
        CHECK(cudaMalloc(&p, 5 * MiB));
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("child_status=%d\n", st);
    CHECK(cudaMemsetAsync(buf, 0, 64, s));
    CHECK(cudaStreamEndCapture(s, &g));
    return 0;
}

/* 300 executable graphs alive (the table keeps rows for 256), destroyed, then 10 more: ids follow
 * instantiation order, rows or not (the last ten are 301..310). */
static int scenario_many_execs(void)
{
    cudaGraph_t g;
    static cudaGraphExec_t x[300];
    CHECK(cudaGraphCreate(&g, 0));
    for (int i = 0; i < 300; i++)
        CHECK(cudaGraphInstantiate(&x[i], g, 0));
    for (int i = 0; i < 300; i++)
        CHECK(cudaGraphExecDestroy(x[i]));
    for (int i = 0; i < 10; i++)
        CHECK(cudaGraphInstantiate(&x[i], g, 0));
    return 0;
}

/* A capture begun on a thread that exited (thread-local mode: only that thread could end it),
 * then a device reset ends it: the shim must not write into the dead thread's storage. Threads
 * with large stacks are started and joined first so that glibc unmaps the dead thread's stack. */
static cudaStream_t dead_s;
static void *dead_begin(void *arg)
{
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamBeginCapture(dead_s, cudaStreamCaptureModeThreadLocal));
    return arg;
}
static void *big_stack(void *arg)
{
    char buf[1 << 16];
    memset(buf, 1, sizeof buf);
    __asm__ volatile("" : : "r"(buf) : "memory");
    return arg;
}
static int scenario_capture_of_exited_thread_reset(void)
{
    pthread_t t;
    void *p;
    CHECK(cudaStreamCreate(&dead_s));
    pthread_create(&t, NULL, dead_begin, NULL);
    pthread_join(t, NULL);
    for (int i = 0; i < 16; i++) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, (size_t)(16 + i) << 20);
        pthread_create(&t, &at, big_stack, NULL);
        pthread_join(t, NULL);
        pthread_attr_destroy(&at);
    }
    CHECK(cudaDeviceReset());
    CHECK(cudaMalloc(&p, MiB)); /* no capture live: plain device memory */
    printf("reset_done=1\n");
    return 0;
}

/* A thread has one per-thread default stream per context (driver API, "Stream synchronization
 * behavior": "local to both the thread and the CUcontext"): captures on device 0's and device 1's
 * at once are two captures, each ending with its own bytes; and a thread that exits with both
 * live leaves neither live. */
static void *capture_both_and_exit(void *arg)
{
    (void)arg;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
    return NULL;
}

/* Captures on device da's and db's per-thread streams at once: 1 MiB allocated in the first, 2 MiB
 * in the second; db's ends first; both instantiated (db's first). */
static int two_per_thread_captures(int da, int db)
{
    void *a, *b;
    cudaGraph_t ga, gb;
    cudaGraphExec_t xa, xb;
    CHECK(cudaSetDevice(da));
    CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMalloc(&a, MiB));
    CHECK(cudaMemsetAsync(a, 0, 64, cudaStreamPerThread));
    CHECK(cudaSetDevice(db));
    CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
    CHECK(cudaMalloc(&b, 2 * MiB));
    CHECK(cudaMemsetAsync(b, 0, 64, cudaStreamPerThread));
    CHECK(cudaStreamEndCapture(cudaStreamPerThread, &gb));
    CHECK(cudaGraphInstantiate(&xb, gb, 0));
    CHECK(cudaSetDevice(da));
    CHECK(cudaStreamEndCapture(cudaStreamPerThread, &ga));
    CHECK(cudaGraphInstantiate(&xa, ga, 0));
    return 0;
}

static int scenario_per_thread_captures_on_two_devices(void)
{
    void *c, *d;
    pthread_t t;
    two_per_thread_captures(0, 1);
    pthread_create(&t, NULL, capture_both_and_exit, NULL);
    pthread_join(t, NULL);
    CHECK(cudaMalloc(&c, 4 * KiB)); /* device 0; no capture live: plain device memory */
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&d, 8 * KiB));
    return 0;
}

/* A thread that goes through more contexts than the shim keeps slots for (8): captures on devices
 * 0..8's per-thread streams one after another, then on 8's and 9's at once, which must still be
 * two captures. */
static int scenario_per_thread_captures_on_many_contexts(void)
{
    void *p;
    cudaGraph_t g;
    for (int d = 0; d < 9; d++) {
        CHECK(cudaSetDevice(d));
        CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed));
        CHECK(cudaMalloc(&p, 64 * KiB));
        CHECK(cudaMemsetAsync(p, 0, 64, cudaStreamPerThread));
        CHECK(cudaStreamEndCapture(cudaStreamPerThread, &g));
    }
    return two_per_thread_captures(8, 9);
}

/* Executable graphs destroyed on three threads while the main thread instantiates and destroys
 * its own: a driver that gives a destroyed exec's handle value to the next instantiation
 * (glibc reuses the simulator's handle memory with GLIBC_TUNABLES=glibc.malloc.tcache_count=0
 * and MALLOC_ARENA_MAX=1) must not have the shim lose count. ROUNDS (default 20000) per
 * thread; each exec has one 64 KiB allocation node. */
static long reuse_rounds;

static void *exec_reuse_worker(void *arg)
{
    (void)arg;
    CHECK(cudaSetDevice(0));
    /* Its own graph: one with an allocation node has one executable graph at a time. */
    cudaGraph_t g = node_graph(64 * KiB, 0);
    for (long i = 0; i < reuse_rounds; i++) {
        cudaGraphExec_t x;
        CHECK(cudaGraphInstantiateWithFlags(&x, g, 0));
        CHECK(cudaGraphExecDestroy(x));
    }
    CHECK(cudaGraphDestroy(g));
    return NULL;
}

static int scenario_exec_handle_reuse(void)
{
    const char *rounds_s = getenv("ROUNDS");
    reuse_rounds = rounds_s ? atol(rounds_s) : 20000;
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, exec_reuse_worker, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    printf("instantiations=%ld\n", 4 * reuse_rounds);
    return 0;
}

/* A thread allocates on a stream while another thread's begin of a relaxed capture on it is still
 * in the driver (SIMCUDA_BEGIN_CAPTURE_MS=300: the stream is capturing 300 ms before the begin
 * returns): the allocation is a graph node, not memory. */
static cudaStream_t begin_stream;
static int begin_rc = -1;

/* After the begin's thread joined: prints its result and the capture's end, then destroys the
 * graph and begin_stream. */
static int end_begin_stream(void)
{
    cudaGraph_t g;
    printf("rc_begin=%d\n", begin_rc);
    printf("rc_end=%d\n", (int)cudaStreamEndCapture(begin_stream, &g));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(begin_stream));
    return 0;
}

static void *begin_relaxed(void *arg)
{
    (void)arg;
    begin_rc = (int)cudaStreamBeginCapture(begin_stream, cudaStreamCaptureModeRelaxed);
    return NULL;
}

static int scenario_alloc_during_begin(void)
{
    pthread_t t;
    void *p = NULL;
    CHECK(cudaStreamCreate(&begin_stream));
    if (pthread_create(&t, NULL, begin_relaxed, NULL))
        return 20;
    /* Until the begin has made the stream capturing (it then sleeps SIMCUDA_BEGIN_CAPTURE_MS before
     * returning), at most 30 s: a fixed 100 ms was too short for a thread not yet run on a loaded
     * machine. */
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    for (int i = 0; i < 3000; i++) {
        CHECK(cudaStreamIsCapturing(begin_stream, &st));
        if (st == cudaStreamCaptureStatusActive)
            break;
        usleep(10000);
    }
    printf("capturing_before_alloc=%d\n", st == cudaStreamCaptureStatusActive);
    printf("rc_alloc=%d\n", (int)cudaMallocAsync(&p, MiB, begin_stream));
    pthread_join(t, NULL);
    return end_begin_stream();
}

/* A capture that begins while an allocation on its stream is in the driver: the signal
 * SIMCUDA_INJECT=cuMemAllocAsync:2:raise=SIGUSR1 raises on the allocation's entry has another
 * thread begin a relaxed capture on the stream, and waits for the begin to return; the driver
 * then makes the allocation a graph node. A 4 KiB allocation made and freed before it. Prints
 * rc_alloc, rc_begin, rc_end. */
static pthread_mutex_t in_call_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t in_call_cond = PTHREAD_COND_INITIALIZER;
static int in_call_go, in_call_done;

static void *begin_when_told(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&in_call_lock);
    while (!in_call_go)
        pthread_cond_wait(&in_call_cond, &in_call_lock);
    pthread_mutex_unlock(&in_call_lock);
    begin_rc = (int)cudaStreamBeginCapture(begin_stream, cudaStreamCaptureModeRelaxed);
    pthread_mutex_lock(&in_call_lock);
    in_call_done = 1;
    pthread_cond_broadcast(&in_call_cond);
    pthread_mutex_unlock(&in_call_lock);
    return NULL;
}

static void begin_from_handler(int sig)
{
    (void)sig;
    pthread_mutex_lock(&in_call_lock);
    in_call_go = 1;
    pthread_cond_broadcast(&in_call_cond);
    while (!in_call_done)
        pthread_cond_wait(&in_call_cond, &in_call_lock);
    pthread_mutex_unlock(&in_call_lock);
}

static int scenario_begin_during_alloc(void)
{
    pthread_t t;
    void *p = NULL;
    CHECK(cudaStreamCreate(&begin_stream));
    signal(SIGUSR1, begin_from_handler);
    if (pthread_create(&t, NULL, begin_when_told, NULL))
        return 20;
    /* A first 4 KiB allocation, freed: the shim is active by the second. */
    CHECK(cudaMallocAsync(&p, 4096, begin_stream));
    CHECK(cudaFreeAsync(p, begin_stream));
    CHECK(cudaStreamSynchronize(begin_stream));
    printf("rc_alloc=%d\n", (int)cudaMallocAsync(&p, MiB, begin_stream));
    pthread_join(t, NULL);
    return end_begin_stream();
}

/* A thread cancelled inside its capture's begin (SIMCUDA_BEGIN_CAPTURE_MS: the simulator's begin
 * sleeps, a cancellation point, with the stream capturing); the stream is destroyed (its capture
 * ends with it), then an allocation of 8 MiB: no capture is live. */
static void *begin_to_be_cancelled(void *arg)
{
    (void)arg;
    cudaStreamBeginCapture(begin_stream, cudaStreamCaptureModeGlobal);
    return NULL;
}

static int scenario_cancel_in_begin(void)
{
    pthread_t t;
    void *p;
    CHECK(cudaStreamCreate(&begin_stream));
    if (pthread_create(&t, NULL, begin_to_be_cancelled, NULL))
        return 20;
    /* Cancelled once inside the begin (the stream capturing; the begin sleeps 2 s more), at most
     * 30 s on: not after a fixed 200 ms, which a loaded machine may not have started it in. */
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    for (int i = 0; i < 3000 && st != cudaStreamCaptureStatusActive; i++) {
        if (cudaStreamIsCapturing(begin_stream, &st) != cudaSuccess)
            st = cudaStreamCaptureStatusNone;
        if (st != cudaStreamCaptureStatusActive)
            usleep(10000);
    }
    pthread_cancel(t);
    void *ret = NULL;
    pthread_join(t, &ret);
    printf("cancelled=%d\n", ret == PTHREAD_CANCELED);
    CHECK(cudaStreamDestroy(begin_stream));
    CHECK(cudaMalloc(&p, 8 * MiB));
    CHECK(cudaFree(p));
    return 0;
}

/* Under CUSHIM_DEVICE_LIMIT=16MiB, a cudaMalloc of 64 MiB inside a global-mode capture: the
 * driver refuses it (cudaErrorStreamCaptureUnsupported) and the capture is invalidated, as without
 * the shim, rather than the budget answering out of memory and the capture making its graph (a
 * stress trial). Prints each code and whether a graph came back. */
static int scenario_budget_malloc_in_capture(void)
{
    cudaStream_t s;
    cudaGraph_t g = NULL;
    void *p = NULL;
    CHECK(cudaStreamCreate(&s));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    printf("rc_malloc=%d\n", (int)cudaMalloc(&p, 64 * MiB));
    printf("rc_end=%d\ngraph=%d\n", (int)cudaStreamEndCapture(s, &g), g != NULL);
    if (g)
        CHECK(cudaGraphDestroy(g));
    CHECK(cudaStreamDestroy(s));
    return 0;
}

static const struct scenario scenarios[] = {
    {"nodes", scenario_nodes, 1},
    {"capture_malloc", scenario_capture_malloc, 1},
    {"decoder_new", scenario_decoder_new, 1},
    {"decoder_pool", scenario_decoder_pool, 1},
    {"meminfo_after_launch", scenario_meminfo_after_launch, 1},
    {"budget_and_graph_memory", scenario_budget_and_graph_memory, 1},
    {"budget_other_device_pool", scenario_budget_other_device_pool, 1},
    {"budget_upload", scenario_budget_upload, 1},
    {"budget_after_trim_during_capture", scenario_budget_after_trim_during_capture, 1}, {"budget_after_reset", scenario_budget_after_reset, 1},
    {"capture_other_device_reset", scenario_capture_other_device_reset, 2},
    {"capture_current_device_reset", scenario_capture_current_device_reset, 2},
    {"overlapping_captures", scenario_overlapping_captures, 1},
    {"capture_twice_to_graph", scenario_capture_twice_to_graph, 1},
    {"moved_children", scenario_moved_children, 1},
    {"meminfo_during_capture", scenario_meminfo_during_capture, 1},
    {"nodes_on_other_device", scenario_nodes_on_other_device, 2},
    {"exec_update", scenario_exec_update, 2},
    {"exec_update_after_launch", scenario_exec_update_after_launch, 1},
    {"exec_update_table_full", scenario_exec_update_table_full, 1},
    {"instantiate_with_upload", scenario_instantiate_with_upload, 1},
    {"fork_during_capture", scenario_fork_during_capture, 1},
    {"many_execs", scenario_many_execs, 1},
    {"first_launch_read", scenario_first_launch_read, 1},
    {"budget_malloc_in_capture", scenario_budget_malloc_in_capture, 1},
    {"exec_handle_reuse", scenario_exec_handle_reuse, 1},
    {"alloc_during_begin", scenario_alloc_during_begin, 1},
    {"begin_during_alloc", scenario_begin_during_alloc, 1},
    {"cancel_in_begin", scenario_cancel_in_begin, 1},
    {"capture_of_exited_thread_reset", scenario_capture_of_exited_thread_reset, 1},
    {"per_thread_captures_on_two_devices", scenario_per_thread_captures_on_two_devices, 2},
    {"per_thread_captures_on_many_contexts", scenario_per_thread_captures_on_many_contexts, 10},
};

int main(int argc, char **argv)
{
    return scenario_main(argc, argv, scenarios, sizeof scenarios / sizeof scenarios[0]);
}
