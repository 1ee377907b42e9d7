/* graph_prog SCENARIO: CUDA graph programs for tests/test_graphs.c (runtime API only).
 * Prints "key=value" lines, ending with the simulated device's own counters. */
#include <string.h>

#include "common.h"

#define KiB 1024ull
#define MiB (1024ull * KiB)

/* A graph of one allocation node of `bytes` on device 0, instantiated and launched on s (its
 * memory stays attached: the node has no free). */
static int one_node_graph(size_t bytes, cudaStream_t s)
{
    struct cudaMemAllocNodeParams params;
    memset(&params, 0, sizeof params);
    params.poolProps.allocType = cudaMemAllocationTypePinned;
    params.poolProps.location.type = cudaMemLocationTypeDevice;
    params.poolProps.location.id = 0;
    params.bytesize = bytes;
    cudaGraph_t g;
    cudaGraphExec_t x;
    cudaGraphNode_t node;
    CHECK(cudaGraphCreate(&g, 0));
    CHECK(cudaGraphAddMemAllocNode(&node, g, NULL, 0, &params));
    CHECK(cudaGraphInstantiateWithFlags(&x, g, 0));
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

static const struct scenario scenarios[] = {
    {"nodes", scenario_nodes, 1},
    {"capture_malloc", scenario_capture_malloc, 1},
    {"decoder_new", scenario_decoder_new, 1},
    {"decoder_pool", scenario_decoder_pool, 1},
    {"meminfo_after_launch", scenario_meminfo_after_launch, 1},
};

int main(int argc, char **argv)
{
    return scenario_main(argc, argv, scenarios, sizeof scenarios / sizeof scenarios[0]);
}
