/* alloc_pairs N [async|graph]: N cudaMalloc/cudaFree pairs of 256 bytes (or N cudaMallocAsync/
 * cudaFreeAsync pairs) on whatever CUDA is there. Run under callgrind with two values of N, with
 * and without the shim: the difference of differences is the shim's cost per pair
 * (scripts/bench). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    int async = argc > 2 && strcmp(argv[2], "async") == 0;
    cudaStream_t s;
    void *p;
    if (cudaStreamCreate(&s) != cudaSuccess)
        return 1;
    for (long i = 0; i < n; i++) {
        if (async) {
            if (cudaMallocAsync(&p, 256, s) != cudaSuccess || cudaFreeAsync(p, s) != cudaSuccess)
                return 2;
        } else if (cudaMalloc(&p, 256) != cudaSuccess || cudaFree(p) != cudaSuccess) {
            return 2;
        }
    }
    cudaStreamSynchronize(s);
    return 0;
}
