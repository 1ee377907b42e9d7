/* demo: what a model server does with device memory, in a few seconds. Loads weights, runs a
 * compile step with a large temporary workspace (marked as cushim's compile phase through
 * cushim.h: with CUSHIM_OFFLOAD=compile the workspace is host memory), resets the peak and runs one profiling step
 * (as vLLM does to size its KV cache), reads the peak through cushim.h, then serves for a while
 * with a KV cache, pinned staging buffers and stream-ordered allocations. Uses only the CUDA
 * runtime API: it runs on a real GPU and on the simulated device alike. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define MiB (1024ull * 1024)

static void *dev(size_t bytes)
{
    void *p;
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaMemset(p, 0, bytes));
    return p;
}

int main(void)
{
    void *weights[8], *workspace, *activations, *kv, *staging, *batch;
    cudaStream_t s;
    size_t free_b, total_b;
    int (*reset)(int) = (int (*)(int))cushim_fn("cushim_reset_peak");
    int (*push_phase)(int) = (int (*)(int))cushim_fn("cushim_push_phase");
    int (*pop_phase)(void) = (int (*)(void))cushim_fn("cushim_pop_phase");
    uint64_t (*peak)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_peak_bytes");
    uint64_t (*current)(int) = (uint64_t(*)(int))cushim_fn("cushim_device_current_bytes");

    CHECK(cudaStreamCreate(&s));
    for (int i = 0; i < 8; i++)
        weights[i] = dev(128 * MiB);
    printf("demo: loaded 1 GiB of weights\n");

    int compiling = push_phase && pop_phase && push_phase(CUSHIM_COMPILE) >= 0;
    workspace = dev(1536 * MiB);
    CHECK(cudaFree(workspace));
    if (compiling)
        pop_phase();
    printf("demo: compiled with a 1.5 GiB temporary workspace%s\n",
           compiling ? " (cushim's compile phase: its peak is the summary's compile phase peak)" : "");

    if (reset) {
        reset(-1);
        printf("demo: peaks reset before the profiling step (cushim_reset_peak, as a server does "
               "before sizing its KV cache): the peaks in the summary below are since then\n");
    }
    activations = dev(384 * MiB);
    CHECK(cudaFree(activations));
    CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (peak && current) {
        /* As vLLM sizes its KV cache: what is free now, less what the step's peak needed above
         * what is in use now (the activations come back at every step). */
        uint64_t p = peak(0), c = current(0), headroom = p > c ? p - c : 0;
        printf("demo: profiling step peak %llu MiB (weights + activations); %llu MiB free, %llu MiB of it "
               "for the KV cache once the activations' peak is kept free\n",
               (unsigned long long)(p / MiB), (unsigned long long)(free_b / MiB),
               (unsigned long long)((free_b > headroom ? free_b - headroom : 0) / MiB));
    }
    else
        printf("demo: not running under cushim\n");

    kv = dev(512 * MiB);
    CHECK(cudaMallocHost(&staging, 64 * MiB));
    const char *pidfile = getenv("DEMO_PIDFILE");
    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (f) {
            fprintf(f, "%d\n", (int)getpid());
            fclose(f);
        }
    }
    printf("demo: serving (pid %d): a 512 MiB KV cache, then 30 steps of 16 to 64 MiB batches "
           "(cudaMallocAsync): the summary's peak adds them to the weights\n", (int)getpid());
    fflush(stdout);
    for (int step = 0; step < 30; step++) {
        CHECK(cudaMallocAsync(&batch, (size_t)(16 + step % 4 * 16) * MiB, s));
        CHECK(cudaMemsetAsync(batch, 1, 16 * MiB, s));
        CHECK(cudaFreeAsync(batch, s));
        CHECK(cudaStreamSynchronize(s));
        usleep(100000);
    }
    CHECK(cudaFree(kv));
    CHECK(cudaFreeHost(staging));
    for (int i = 0; i < 8; i++)
        CHECK(cudaFree(weights[i]));
    printf("demo: done\n");
    return 0;
}
