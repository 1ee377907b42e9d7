/* graph_launch N: N launches of a small captured graph (a memset) on whatever CUDA is there;
 * scripts/bench runs it under callgrind with and without the shim (instructions per launch). */
#include <cuda_runtime_api.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t x;
    void *p;
    if (cudaStreamCreate(&s) || cudaMalloc(&p, 4096) || cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) ||
        cudaMemsetAsync(p, 0, 4096, s) || cudaStreamEndCapture(s, &g) || cudaGraphInstantiate(&x, g, 0))
        return 1;
    for (long i = 0; i < n; i++)
        if (cudaGraphLaunch(x, s) != cudaSuccess)
            return 2;
    return cudaStreamSynchronize(s) != cudaSuccess;
}
