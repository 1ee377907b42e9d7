/* alloc_pairs N [KIND]: N allocate/free cycles of one kind of memory, on whatever CUDA is there.
 * scripts/bench runs it under callgrind with two values of N, with and without the shim: the
 * difference of differences is what the shim adds per cycle (issue 6: "callgrind instruction
 * counts per intercepted call kind").
 *
 * KIND (default device):
 *   device     cudaMalloc / cudaFree, 256 B
 *   pitch      cudaMallocPitch (64 x 4 B) / cudaFree
 *   managed    cudaMallocManaged / cudaFree, 256 B
 *   pinned     cudaMallocHost / cudaFreeHost, 256 B
 *   mapped     cudaHostAlloc(cudaHostAllocMapped) / cudaFreeHost, 256 B
 *   registered cudaHostRegister / cudaHostUnregister of a 4 KiB static buffer
 *   async      cudaMallocAsync / cudaFreeAsync, 256 B
 *   pool       cudaMallocFromPoolAsync (a created pool) / cudaFreeAsync, 256 B
 *   vmm        cuMemCreate, cuMemMap, cuMemUnmap, cuMemRelease of one granule (driver entry
 *              points from cudaGetDriverEntryPointByVersion), into one reserved range
 *   array      cuArrayCreate_v2 (64 x 64 bytes) / cuArrayDestroy
 * Exit status: 0, 1 for a set-up failure, 2 for a failed cycle, 3 for an unknown KIND, 10 for a
 * failed set-up call and 11 for a missing driver entry point (tests/programs/common.h). */
#include <cudaTypedefs.h>

#include "common.h"

static int vmm(long n)
{
    struct vmm_api v = vmm_api();
    CUmemAllocationProp prop = vmm_prop(0);
    size_t g = 0;
    CUdeviceptr va;
    if (v.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) || v.reserve(&va, g, 0, 0, 0))
        return 1;
    for (long i = 0; i < n; i++) {
        CUmemGenericAllocationHandle h;
        if (v.create(&h, g, &prop, 0) || v.map(va, g, 0, h, 0) || v.unmap(va, g) || v.release(h))
            return 2;
    }
    return 0;
}

static int array(long n)
{
    PFN_cuArrayCreate_v3020 create = entry("cuArrayCreate", 3020);
    PFN_cuArrayDestroy_v2000 destroy = entry("cuArrayDestroy", 2000);
    CUDA_ARRAY_DESCRIPTOR d = {.Width = 64, .Height = 64, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1};
    for (long i = 0; i < n; i++) {
        CUarray a;
        if (create(&a, &d) || destroy(a))
            return 2;
    }
    return 0;
}

static char host_buffer[4096] __attribute__((aligned(4096)));

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    const char *kind = argc > 2 ? argv[2] : "device";
    cudaStream_t s;
    cudaMemPool_t pool;
    struct cudaMemPoolProps props = device_pool_props(0);
    void *p;
    size_t pitch;
    if (cudaStreamCreate(&s) != cudaSuccess || cudaMemPoolCreate(&pool, &props) != cudaSuccess)
        return 1;
    if (strcmp(kind, "vmm") == 0)
        return vmm(n);
    if (strcmp(kind, "array") == 0)
        return array(n);
    for (long i = 0; i < n; i++) {
        cudaError_t a, f;
        if (strcmp(kind, "device") == 0) {
            a = cudaMalloc(&p, 256), f = a ? a : cudaFree(p);
        } else if (strcmp(kind, "pitch") == 0) {
            a = cudaMallocPitch(&p, &pitch, 64 * 4, 4), f = a ? a : cudaFree(p);
        } else if (strcmp(kind, "managed") == 0) {
            a = cudaMallocManaged(&p, 256, cudaMemAttachGlobal), f = a ? a : cudaFree(p);
        } else if (strcmp(kind, "pinned") == 0) {
            a = cudaMallocHost(&p, 256), f = a ? a : cudaFreeHost(p);
        } else if (strcmp(kind, "mapped") == 0) {
            a = cudaHostAlloc(&p, 256, cudaHostAllocMapped), f = a ? a : cudaFreeHost(p);
        } else if (strcmp(kind, "registered") == 0) {
            a = cudaHostRegister(host_buffer, sizeof host_buffer, cudaHostRegisterDefault);
            f = a ? a : cudaHostUnregister(host_buffer);
        } else if (strcmp(kind, "async") == 0) {
            a = cudaMallocAsync(&p, 256, s), f = a ? a : cudaFreeAsync(p, s);
        } else if (strcmp(kind, "pool") == 0) {
            a = cudaMallocFromPoolAsync(&p, 256, pool, s), f = a ? a : cudaFreeAsync(p, s);
        } else {
            fprintf(stderr, "alloc_pairs: unknown kind \"%s\"\n", kind);
            return 3;
        }
        if (a != cudaSuccess || f != cudaSuccess)
            return 2;
    }
    return cudaStreamSynchronize(s) != cudaSuccess ? 2 : 0;
}
