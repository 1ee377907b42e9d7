/* drv_prog SCENARIO: a program linked directly to libcuda (door 1: the shim's exported driver
 * symbols). Prints "key=value" lines. */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    CUdeviceptr p = 0;
    CUcontext ctx;
    size_t free_b, total_b;
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "before_init") != 0)) {
        fprintf(stderr, "usage: %s [before_init] (cuMemAlloc/cuMemFree through the shim's exported driver "
                "symbols; before_init: calls before cuInit first)\n", argv[0]);
        return 2;
    }
    if (argc == 2 && strcmp(argv[1], "before_init") == 0) {
        /* Calls before cuInit return what the driver returns (CUDA_ERROR_NOT_INITIALIZED). */
        printf("rc_alloc=%d\n", (int)cuMemAlloc(&p, 4096));
        printf("rc_free=%d\n", (int)cuMemFree(p));
        printf("rc_info=%d\n", (int)cuMemGetInfo(&free_b, &total_b));
        printf("rc_host=%d\n", (int)cuMemFreeHost(NULL));
    }
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 10;
    if (cuMemAlloc(&p, 4096))
        return 11;
    CUdeviceptr q;
    if (cuMemAlloc(&q, 1 << 20) || cuMemFree(q))
        return 12;
    printf("alloc=ok\n");
    return 0;
}
