/* rt_check SCENARIO: runtime programs for test_sim.c. Each prints "key=value" lines: runtime
 * return codes and the simulated driver's own counters (simcuda.h, found through the
 * libcuda.so.1 the runtime loaded). Declares the _ptsz entry points it calls itself, since they
 * are only declared for per-thread-default-stream builds. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                             size_t height, enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p);

static void *sim(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return h ? dlsym(h, name) : NULL;
}

static unsigned long long calls(const char *symbol)
{
    uint64_t (*fn)(const char *) = (uint64_t(*)(const char *))sim("simcuda_call_count");
    return fn ? (unsigned long long)fn(symbol) : 0;
}

static unsigned long long live(simcuda_kind kind)
{
    uint64_t (*fn)(int, simcuda_kind) = (uint64_t(*)(int, simcuda_kind))sim("simcuda_live_bytes");
    return fn ? (unsigned long long)fn(0, kind) : 0;
}

static unsigned long long used(void)
{
    uint64_t (*fn)(int) = (uint64_t(*)(int))sim("simcuda_used_bytes");
    return fn ? (unsigned long long)fn(0) : 0;
}

/* Only initialization: the lookups cudart makes. */
static void scenario_init(void)
{
    printf("free_null=%d\n", cudaFree(NULL));
}

/* cudaMalloc(0) and cudaFree(NULL) succeed without a driver allocation or free. */
static void scenario_zero(void)
{
    void *p = &p;
    cudaError_t e = cudaMalloc(&p, 0);
    printf("malloc0=%d null=%d\n", e, p == NULL);
    printf("free_null=%d\n", cudaFree(NULL));
    printf("cuMemAlloc_v2=%llu cuMemFree_v2=%llu\n", calls("cuMemAlloc_v2"), calls("cuMemFree_v2"));
}

/* With SIMCUDA_HIDE=cuMemAllocAsync the runtime has no driver function: cudaErrorNotSupported,
 * kept as the last error until cudaGetLastError. */
static void scenario_hide(void)
{
    cudaStream_t s;
    void *p;
    cudaStreamCreate(&s);
    printf("malloc_async=%d\n", cudaMallocAsync(&p, 4096, s));
    printf("peek=%d\n", cudaPeekAtLastError());
    printf("last=%d\n", cudaGetLastError());
    printf("last_again=%d\n", cudaGetLastError());
}

/* cudaDeviceReset frees the context's memory, not stream-ordered allocations (cuda_runtime_api.h:
 * "will not destroy memory allocations by cudaMallocAsync()"); the next call binds a fresh primary
 * context, and the async allocation is freed there. */
static void scenario_reset(void)
{
    void *a, *b;
    cudaStream_t s;
    cudaStreamCreate(&s);
    printf("malloc=%d\n", cudaMalloc(&a, 1 << 20));
    printf("malloc_async=%d\n", cudaMallocAsync(&b, 1 << 20, s));
    printf("before.device=%llu before.async=%llu\n", live(SIMCUDA_DEVICE), live(SIMCUDA_ASYNC));
    printf("reset=%d\n", cudaDeviceReset());
    printf("after.device=%llu after.async=%llu after.pool=%llu after.used=%llu\n", live(SIMCUDA_DEVICE),
           live(SIMCUDA_ASYNC), live(SIMCUDA_POOL_RESERVED), used());
    printf("malloc_again=%d\n", cudaMalloc(&a, 4096));
    printf("again.device=%llu\n", live(SIMCUDA_DEVICE));
    printf("free_async=%d\n", cudaFreeAsync(b, 0));
    printf("sync=%d\n", cudaDeviceSynchronize());
    printf("freed.async=%llu freed.pool=%llu\n", live(SIMCUDA_ASYNC), live(SIMCUDA_POOL_RESERVED));
}

/* Per-thread entry points reach the per-thread driver variants. */
static void scenario_ptsz(void)
{
    void *p, *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    printf("malloc_async_ptsz=%d\n", cudaMallocAsync_ptsz(&p, 4096, NULL));
    cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &fn, 11020, cudaEnablePerThreadDefaultStream, &st);
    printf("entry=%d status=%d\n", e, (int)st);
    printf("same=%d\n", fn == sim("cuMemAllocAsync_ptsz"));
    printf("cuMemAllocAsync_ptsz=%llu cuMemAllocAsync=%llu\n", calls("cuMemAllocAsync_ptsz"),
           calls("cuMemAllocAsync"));
}

/* Bytes i of a test pattern. */
static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 7 + 3);
}

/* Whether the first `width` bytes of `height` rows `pitch` apart are equal. */
static int rows_same(const unsigned char *a, const unsigned char *b, size_t pitch, size_t width, size_t height)
{
    for (size_t y = 0; y < height; y++)
        if (memcmp(a + y * pitch, b + y * pitch, width) != 0)
            return 0;
    return 1;
}

/* Whether the first `width` bytes of `height` rows `pitch` apart all hold `value`. */
static int rows_hold(const unsigned char *a, size_t pitch, size_t width, size_t height, unsigned char value)
{
    for (size_t y = 0; y < height; y++)
        for (size_t x = 0; x < width; x++)
            if (a[y * pitch + x] != value)
                return 0;
    return 1;
}

/* cudaMemcpy2D host (pitch 1024) -> device (pitch 2048) -> host (pitch 1024), 1000 x 16 bytes:
 * each row's 1000 bytes come back, the padding of the destination rows stays as it was; a width
 * past either pitch and an unknown kind are refused before any driver call. */
static void scenario_copy2d(void)
{
    enum { W = 1000, H = 16, HP = 1024, DP = 2048 };
    unsigned char *src = malloc(HP * H), *back = malloc(HP * H);
    void *dev;
    for (size_t i = 0; i < HP * H; i++)
        src[i] = pattern(i), back[i] = 0xee;
    printf("malloc=%d\n", cudaMalloc(&dev, DP * H));
    printf("h2d=%d\n", cudaMemcpy2D(dev, DP, src, HP, W, H, cudaMemcpyHostToDevice));
    printf("d2h=%d\n", cudaMemcpy2D(back, HP, dev, DP, W, H, cudaMemcpyDeviceToHost));
    printf("same=%d padding=%d\n", rows_same(back, src, HP, W, H), rows_hold(back + W, HP, HP - W, H, 0xee));
    memset(back, 0, HP * H);
    printf("async_ptsz=%d\n", cudaMemcpy2DAsync_ptsz(back, HP, dev, DP, W, H, cudaMemcpyDefault, NULL));
    printf("sync=%d same_async=%d\n", cudaStreamSynchronize(NULL), rows_same(back, src, HP, W, H));
    printf("wide_src=%d\n", cudaMemcpy2D(dev, DP, src, HP, HP + 1, H, cudaMemcpyHostToDevice));
    printf("wide_dst=%d\n", cudaMemcpy2D(back, HP, dev, DP, HP + 1, H, cudaMemcpyDeviceToHost));
    printf("kind=%d\n", cudaMemcpy2D(dev, DP, src, HP, W, H, (enum cudaMemcpyKind)7));
    printf("last=%d\n", cudaGetLastError());
    printf("cuMemcpy2DUnaligned_v2=%llu cuMemcpy2DAsync_v2_ptsz=%llu cuMemcpy2DAsync_v2=%llu\n",
           calls("cuMemcpy2DUnaligned_v2"), calls("cuMemcpy2DAsync_v2_ptsz"), calls("cuMemcpy2DAsync_v2"));
    free(src);
    free(back);
}

/* cudaMemcpy3D of a 100 x 8 x 4 box from host (pitch 100, 8 rows a slice) into a device volume
 * (pitch 128, 10 rows a slice) at position (4, 1, 0), and back with cudaMemcpy3D_ptds and
 * cudaMemcpyDefault; a side naming both an array and a pointer, or neither, is cudaErrorInvalidValue,
 * an array cudaErrorNotSupported. */
static void scenario_copy3d(void)
{
    enum { W = 100, H = 8, D = 4, DP = 128, DH = 10 };
    unsigned char *src = malloc(W * H * D), *back = calloc(W * H * D, 1);
    void *dev;
    for (size_t i = 0; i < W * H * D; i++)
        src[i] = pattern(i);
    printf("malloc=%d\n", cudaMalloc(&dev, DP * DH * D));
    struct cudaMemcpy3DParms p = {0};
    p.srcPtr = (struct cudaPitchedPtr){src, W, W, H};
    p.dstPtr = (struct cudaPitchedPtr){dev, DP, W, DH};
    p.dstPos = (struct cudaPos){4, 1, 0};
    p.extent = (struct cudaExtent){W, H, D};
    p.kind = cudaMemcpyHostToDevice;
    printf("h2d=%d\n", cudaMemcpy3D(&p));
    struct cudaMemcpy3DParms q = {0};
    q.srcPtr = p.dstPtr, q.srcPos = p.dstPos;
    q.dstPtr = (struct cudaPitchedPtr){back, W, W, H};
    q.extent = p.extent;
    q.kind = cudaMemcpyDefault;
    printf("d2h_ptds=%d\n", cudaMemcpy3D_ptds(&q));
    printf("same=%d\n", memcmp(back, src, W * H * D) == 0);
    q.srcArray = (cudaArray_t)dev;
    printf("array_and_ptr=%d\n", cudaMemcpy3D(&q));
    q.srcPtr.ptr = NULL;
    printf("array=%d\n", cudaMemcpy3D(&q));
    q.srcArray = NULL;
    printf("neither=%d\n", cudaMemcpy3D(&q));
    printf("cuMemcpy3D_v2=%llu cuMemcpy3D_v2_ptds=%llu\n", calls("cuMemcpy3D_v2"), calls("cuMemcpy3D_v2_ptds"));
    free(src);
    free(back);
}

/* Run with SIMCUDA_DEVICE_COUNT=2: 64 KiB from device 0 to device 1 with cudaMemcpyPeer and back
 * to a second buffer on device 0 with cudaMemcpyPeerAsync; a device past the count is
 * cudaErrorInvalidDevice. */
static void scenario_peer(void)
{
    enum { N = 64 << 10 };
    unsigned char *src = malloc(N), *back = calloc(N, 1);
    void *a, *b, *c;
    for (size_t i = 0; i < N; i++)
        src[i] = pattern(i);
    printf("set1=%d malloc_b=%d\n", cudaSetDevice(1), cudaMalloc(&b, N));
    printf("set0=%d malloc_a=%d malloc_c=%d\n", cudaSetDevice(0), cudaMalloc(&a, N), cudaMalloc(&c, N));
    printf("h2d=%d\n", cudaMemcpy(a, src, N, cudaMemcpyHostToDevice));
    printf("peer=%d\n", cudaMemcpyPeer(b, 1, a, 0, N));
    printf("peer_async=%d\n", cudaMemcpyPeerAsync(c, 0, b, 1, N, NULL));
    printf("sync=%d\n", cudaDeviceSynchronize());
    printf("d2h=%d\n", cudaMemcpy(back, c, N, cudaMemcpyDeviceToHost));
    printf("same=%d\n", memcmp(back, src, N) == 0);
    printf("bad_dst=%d bad_src=%d\n", cudaMemcpyPeer(b, 2, a, 0, N), cudaMemcpyPeer(b, 1, a, -1, N));
    printf("cuMemcpyPeer=%llu cuMemcpyPeerAsync=%llu\n", calls("cuMemcpyPeer"), calls("cuMemcpyPeerAsync"));
    free(src);
    free(back);
}

/* cudaGetDeviceProperties and cudaDeviceGetAttribute of every device and one past the count. */
static void scenario_props(void)
{
    int count = 0;
    cudaGetDeviceCount(&count);
    for (int d = 0; d <= count; d++) {
        struct cudaDeviceProp p;
        memset(&p, 0x5a, sizeof p);
        cudaError_t e = cudaGetDeviceProperties(&p, d);
        printf("dev%d=%d name=%s total=%zu cc=%d.%d\n", d, e, e ? "" : p.name, p.totalGlobalMem, p.major, p.minor);
        printf("dev%d uuid0=%d uuid15=%d pci=%d:%d:%d sm=%d\n", d, p.uuid.bytes[0], p.uuid.bytes[15], p.pciDomainID,
               p.pciBusID, p.pciDeviceID, p.multiProcessorCount);
        printf("dev%d uva=%d map=%d managed=%d concurrent_managed=%d pools=%d warp=%d mem_pitch=%zu\n", d,
               p.unifiedAddressing, p.canMapHostMemory, p.managedMemory, p.concurrentManagedAccess,
               p.memoryPoolsSupported, p.warpSize, p.memPitch);
        int v = -1;
        e = cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, d);
        printf("dev%d attr=%d major=%d\n", d, e, v);
    }
    printf("null=%d\n", cudaGetDeviceProperties(NULL, 0));
    printf("last=%d\n", cudaGetLastError());
}

static const struct {
    const char *name;
    void (*fn)(void);
} scenarios[] = {
    {"init", scenario_init}, {"zero", scenario_zero}, {"hide", scenario_hide},
    {"reset", scenario_reset}, {"ptsz", scenario_ptsz}, {"copy2d", scenario_copy2d},
    {"copy3d", scenario_copy3d}, {"peer", scenario_peer}, {"props", scenario_props},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; argc == 2 && i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(argv[1], scenarios[i].name) == 0) {
            scenarios[i].fn();
            return 0;
        }
    fprintf(stderr, "usage: rt_check init|zero|hide|reset|ptsz|copy2d|copy3d|peer|props\n");
    return 2;
}
