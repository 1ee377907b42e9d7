/* Sizes whose size_t arithmetic overflows: the simulator refuses them (as the real driver does)
 * and its counters do not change. Each test starts with no context overhead, so every counter is
 * 0 before its first allocation. */
#include <stdint.h>

#include "test_sim.h"

/* Every simcuda_live_bytes kind of device 0 and its used bytes are 0. */
static void nothing_counted(void)
{
    for (int k = 0; k < SIMCUDA_KIND_COUNT; k++)
        cr_assert_eq(live((simcuda_kind)k), 0, "kind %d counts %llu", k, (unsigned long long)live((simcuda_kind)k));
    cr_assert_eq(simcuda_used_bytes(0), 0);
}

Test(overflow, pitched_allocations_whose_pitch_or_bytes_overflow_are_invalid)
{
    CUdeviceptr d = 0;
    size_t pitch = 12345;
    start(no_overhead);
    /* The pitch's round-up to 512 wraps to 0. */
    cr_assert_eq(cuMemAllocPitch_v2(&d, &pitch, SIZE_MAX - 10, 1, 4), CUDA_ERROR_INVALID_VALUE);
    /* pitch x Height wraps: 2^62 x 4 = 2^64, 1 MiB x (2^44 + 1) = 2^64 + 1 MiB. */
    cr_assert_eq(cuMemAllocPitch_v2(&d, &pitch, 1ull << 62, 4, 4), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemAllocPitch_v2(&d, &pitch, MiB, (1ull << 44) + 1, 4), CUDA_ERROR_INVALID_VALUE);
    /* No overflow but more than the device (16 GiB): out of memory. */
    cr_assert_eq(cuMemAllocPitch_v2(&d, &pitch, MiB, 1ull << 15, 4), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(cuMemAllocPitch_v2(&d, &pitch, 1ull << 62, 2, 4), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(d, 0);
    cr_assert_eq(pitch, 12345);
    nothing_counted();
}

Test(overflow, unpitched_allocations_larger_than_the_device_are_out_of_memory)
{
    CUdeviceptr d = 0;
    void *h = NULL;
    start(no_overhead);
    cr_assert_eq(cuMemAlloc_v2(&d, SIZE_MAX), CUDA_ERROR_OUT_OF_MEMORY); /* its round-up wraps */
    cr_assert_eq(cuMemAlloc_v2(&d, (1ull << 63) + 1), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(cuMemHostAlloc(&h, SIZE_MAX, 0), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(d, 0);
    nothing_counted();
}

Test(overflow, arrays_whose_bytes_overflow_are_invalid_and_larger_than_the_device_out_of_memory)
{
    CUarray a = NULL;
    CUmipmappedArray m = NULL;
    start(no_overhead);
    /* 2^32 x 2^32 texels of 16 bytes: 2^68 bytes. */
    CUDA_ARRAY_DESCRIPTOR flat = {.Width = 1ull << 32, .Height = 1ull << 32, .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 4};
    cr_assert_eq(cuArrayCreate_v2(&a, &flat), CUDA_ERROR_INVALID_VALUE);
    /* 2^21 x 2^21 x 2^22 x 16 bytes = 2^68. */
    CUDA_ARRAY3D_DESCRIPTOR cube = {.Width = 1ull << 21, .Height = 1ull << 21, .Depth = 1ull << 22,
                                    .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    cr_assert_eq(cuArray3DCreate_v2(&a, &cube), CUDA_ERROR_INVALID_VALUE);
    /* Width 2^62 of 16-byte texels, 64 levels (clamped to 63): level 0 alone is 2^66 bytes. */
    CUDA_ARRAY3D_DESCRIPTOR wide = {.Width = 1ull << 62, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4};
    cr_assert_eq(cuMipmappedArrayCreate(&m, &wide, 64), CUDA_ERROR_INVALID_VALUE);
    /* Block-compressed: (2^62 / 4)^2 blocks. */
    CUDA_ARRAY3D_DESCRIPTOR bc = {.Width = 1ull << 62, .Height = 1ull << 62, .Format = CU_AD_FORMAT_BC1_UNORM,
                                  .NumChannels = 4};
    cr_assert_eq(cuArray3DCreate_v2(&a, &bc), CUDA_ERROR_INVALID_VALUE);
    /* No overflow but more than the device: 2^20 x 2^20 x 16 bytes = 16 TiB; 2^59 bytes. */
    flat.Width = flat.Height = 1ull << 20;
    cr_assert_eq(cuArrayCreate_v2(&a, &flat), CUDA_ERROR_OUT_OF_MEMORY);
    wide.Width = 1ull << 55;
    cr_assert_eq(cuMipmappedArrayCreate(&m, &wide, 1), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_null(a);
    cr_assert_null(m);
    nothing_counted();
}

Test(overflow, host_registration_whose_end_wraps_is_invalid)
{
    static char buf[2 * 4096] __attribute__((aligned(4096)));
    start(no_overhead);
    cr_assert_eq(cuMemHostRegister_v2(buf, SIZE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemHostRegister_v2(buf, UINTPTR_MAX - (uintptr_t)buf + 1, 0), CUDA_ERROR_INVALID_VALUE); /* ends at 2^64 */
    nothing_counted();
    OK(cuMemHostRegister_v2(buf, 8192, 0));
    /* Over the range just registered: refused for the wrap, not accepted past the overlap check. */
    cr_assert_eq(cuMemHostRegister_v2(buf, SIZE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemHostRegister_v2(buf + 4096, SIZE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(live(SIMCUDA_REGISTERED_HOST), 8192);
    OK(cuMemHostUnregister(buf));
    nothing_counted();
}

Test(overflow, memsets_whose_range_wraps_are_invalid)
{
    CUdeviceptr d;
    start(no_overhead);
    OK(cuMemAlloc_v2(&d, 64));
    cr_assert_eq(cuMemsetD8_v2(d + 1, 7, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemsetD16_v2(d + 2, 7, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemsetD16_v2(d, 7, SIZE_MAX / 2 + 1), CUDA_ERROR_INVALID_VALUE); /* N x 2 = 2^64 */
    cr_assert_eq(cuMemsetD32_v2(d + 4, 7, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemsetD32_v2(d, 7, SIZE_MAX / 4 + 1), CUDA_ERROR_INVALID_VALUE); /* N x 4 = 2^64 */
    cr_assert_eq(cuMemsetD8Async(d + 1, 7, SIZE_MAX, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemsetD16Async(d + 2, 7, SIZE_MAX, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemsetD32Async(d + 4, 7, SIZE_MAX, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(live(SIMCUDA_DEVICE), 64);
    OK(cuMemFree_v2(d));
    nothing_counted();
}

Test(overflow, memset_nodes_whose_range_wraps_are_invalid)
{
    CUcontext ctx = start(no_overhead);
    CUdeviceptr d;
    CUgraph g;
    CUgraphNode n;
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuGraphCreate(&g, 0));
    /* width x elementSize = 2^64 (wraps to 0); (height - 1) x pitch = 2^64. */
    CUDA_MEMSET_NODE_PARAMS p = {.dst = d, .value = 7, .elementSize = 2, .width = SIZE_MAX / 2 + 1, .height = 1};
    cr_assert_eq(cuGraphAddMemsetNode(&n, g, NULL, 0, &p, ctx), CUDA_ERROR_INVALID_VALUE);
    p = (CUDA_MEMSET_NODE_PARAMS){.dst = d, .pitch = 1ull << 63, .value = 7, .elementSize = 1, .width = 1, .height = 3};
    cr_assert_eq(cuGraphAddMemsetNode(&n, g, NULL, 0, &p, ctx), CUDA_ERROR_INVALID_VALUE);
    OK(cuGraphDestroy(g));
    OK(cuMemFree_v2(d));
    nothing_counted();
}

Test(overflow, copies_whose_range_wraps_are_invalid)
{
    CUdeviceptr d;
    static unsigned char buf[64];
    start(no_overhead);
    OK(cuMemAlloc_v2(&d, 64));
    cr_assert_eq(cuMemcpyDtoH_v2(buf, d + 1, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyHtoD_v2(d, buf, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyHtoD_v2(d + 1, buf, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyDtoD_v2(d, d, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyDtoHAsync_v2(buf, d + 1, SIZE_MAX, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyHtoDAsync_v2(d, buf, SIZE_MAX, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyDtoDAsync_v2(d, d, SIZE_MAX, NULL), CUDA_ERROR_INVALID_VALUE);
    /* cuMemcpy takes any address, but no memory ends past the end of the address space. */
    cr_assert_eq(cuMemcpy((CUdeviceptr)buf, d + 1, SIZE_MAX), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyAsync(d, (CUdeviceptr)buf, SIZE_MAX, NULL), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(live(SIMCUDA_DEVICE), 64);
    OK(cuMemFree_v2(d));
    nothing_counted();
}

Test(overflow, pitched_copies_whose_rows_wrap_are_invalid)
{
    CUdeviceptr d;
    static unsigned char buf[1024];
    start(no_overhead);
    OK(cuMemAlloc_v2(&d, 1024));
    /* A device side with pitch 2^63: its second row starts at d + 2^63, the last byte wraps. */
    CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = buf, .srcPitch = 64,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = 1ull << 63,
                       .WidthInBytes = 64, .Height = 2};
    cr_assert_eq(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpy2DUnaligned_v2(&c), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpy2DAsync_v2(&c, NULL), CUDA_ERROR_INVALID_VALUE);
    c.Height = 3; /* 2 x 2^63 wraps to 0 */
    cr_assert_eq(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
    /* Host and unified sides too: their rows past the end of the address space are no memory. */
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = buf;
    cr_assert_eq(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
    c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.dstDevice = d;
    cr_assert_eq(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
    /* A position whose row offset wraps. */
    c = (CUDA_MEMCPY2D){.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = buf, .srcPitch = 64,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = 64,
                        .dstY = SIZE_MAX / 64 + 1, .WidthInBytes = 64, .Height = 1};
    cr_assert_eq(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
    /* 3D: slices of 2^62 rows of 4 bytes; the fourth starts 3 x 2^64 bytes on, wrapped to d ... */
    CUDA_MEMCPY3D c3 = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = buf, .srcPitch = 4, .srcHeight = 1,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = 4,
                        .dstHeight = 1ull << 62, .WidthInBytes = 4, .Height = 1, .Depth = 4};
    cr_assert_eq(cuMemcpy3D_v2(&c3), CUDA_ERROR_INVALID_VALUE);
    /* ... and a width that passes the pitch check by wrapping: x + width = 32 + (2^64 - 32). */
    c3 = (CUDA_MEMCPY3D){.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = buf, .srcXInBytes = 32, .srcPitch = 64,
                         .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstXInBytes = 32, .dstPitch = 64,
                         .WidthInBytes = SIZE_MAX - 31, .Height = 1, .Depth = 1};
    cr_assert_eq(cuMemcpy3D_v2(&c3), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(live(SIMCUDA_DEVICE), 1024);
    OK(cuMemFree_v2(d));
    nothing_counted();
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr)
{
    cuuint64_t value;
    OK(cuMemPoolGetAttribute(pool, attr, &value));
    return value;
}

static void pool_is_empty(CUmemoryPool pool)
{
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
}

Test(overflow, failed_pool_allocations_change_no_counter_or_high_mark)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_HOST, 0}};
    CUmemoryPool pool, host_pool;
    CUdeviceptr d = 0;
    start(no_overhead);
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    cr_assert_eq(cuMemAllocAsync(&d, 1ull << 63, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(cuMemAllocAsync(&d, SIZE_MAX, NULL), CUDA_ERROR_OUT_OF_MEMORY); /* its round-up wraps */
    cr_assert_eq(cuMemAllocAsync(&d, 17 * GiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(cuMemAllocFromPoolAsync(&d, 1ull << 63, pool, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    pool_is_empty(pool);
    /* A host pool has no capacity; a size no host memory can back fails the same way. */
    OK(cuMemPoolCreate(&host_pool, &props));
    cr_assert_eq(cuMemAllocFromPoolAsync(&d, 1ull << 63, host_pool, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(cuMemAllocFromPoolAsync(&d, SIZE_MAX, host_pool, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    /* 2^62: the pool takes it, the host backing fails after; the take is undone. */
    cr_assert_eq(cuMemAllocFromPoolAsync(&d, 1ull << 62, host_pool, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    pool_is_empty(host_pool);
    cr_assert_eq(d, 0);
    nothing_counted();
    OK(cuMemPoolDestroy(host_pool));
}
