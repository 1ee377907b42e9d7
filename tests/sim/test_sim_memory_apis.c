/* The virtual memory management API, memory pools and IPC handles. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_sim.h"

static CUmemGenericAllocationHandle create(size_t size)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemGenericAllocationHandle h;
    OK(cuMemCreate(&h, size, &prop, 0));
    return h;
}

Test(vmm, physical_memory_lives_until_released_and_unmapped)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemAccessDesc rw = {.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemGenericAllocationHandle h1, h2, again, bad;
    CUdeviceptr va;
    size_t g;
    start(no_overhead);
    OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    cr_assert_eq(g, 2 * MiB);
    cr_assert_eq(cuMemCreate(&bad, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    h1 = create(2 * MiB);
    h2 = create(4 * MiB);
    cr_assert_eq(live(SIMCUDA_VMM), 6 * MiB);
    OK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    OK(cuMemMap(va, 2 * MiB, 0, h1, 0));
    OK(cuMemMap(va + 2 * MiB, 4 * MiB, 0, h2, 0));
    cr_assert_eq(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h1, 0), CUDA_ERROR_INVALID_VALUE); /* already mapped */
    OK(cuMemSetAccess(va, 6 * MiB, &rw, 1));
    memset((void *)va, 1, 6 * MiB);
    OK(cuMemRelease(h1));
    cr_assert_eq(live(SIMCUDA_VMM), 6 * MiB); /* still mapped */
    OK(cuMemRetainAllocationHandle(&again, (void *)(va + 100)));
    cr_assert_eq(again, h1);
    OK(cuMemRelease(again));
    OK(cuMemRelease(h2));
    cr_assert_eq(cuMemUnmap(va + 2 * MiB, 2 * MiB), CUDA_ERROR_INVALID_VALUE); /* a sub-range */
    OK(cuMemUnmap(va, 6 * MiB)); /* two contiguous mappings at once */
    cr_assert_eq(live(SIMCUDA_VMM), 0);
    cr_assert_eq(simcuda_used_bytes(0), 0);
    OK(cuMemAddressFree(va, 8 * MiB));
}

Test(vmm, export_and_import)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemGenericAllocationHandle h, imported;
    CUmemAllocationProp got;
    int fd;
    start(no_overhead);
    OK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    OK(cuMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    OK(cuMemGetAllocationPropertiesFromHandle(&got, imported));
    cr_assert_eq(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
    cr_assert_eq(live(SIMCUDA_VMM), 2 * MiB); /* an import is not counted again */
    OK(cuMemRelease(h));
    OK(cuMemRelease(imported));
    cr_assert_eq(live(SIMCUDA_VMM), 0);
    close(fd);
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr)
{
    cuuint64_t value;
    OK(cuMemPoolGetAttribute(pool, attr, &value));
    return value;
}

Test(pools, reserve_grows_in_chunks_and_is_trimmed)
{
    CUmemoryPool pool;
    CUstream s;
    CUdeviceptr a, b, c;
    cuuint64_t threshold = 2 * MiB, zero = 0;
    start(no_overhead);
    OK(cuStreamCreate(&s, 0));
    OK(cuDeviceGetDefaultMemPool(&pool, 0));
    OK(cuMemAllocAsync(&a, MiB, s));
    OK(cuMemAllocAsync(&b, MiB + MiB / 2, s));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 2 * MiB + MiB / 2);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
    cr_assert_eq(live(SIMCUDA_ASYNC), 2 * MiB + MiB / 2);
    cr_assert_eq(live(SIMCUDA_POOL_RESERVED), 4 * MiB);
    cr_assert_eq(simcuda_used_bytes(0), 4 * MiB);
    OK(cuMemFreeAsync(a, s));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB); /* freed stays reserved */
    OK(cuMemPoolTrimTo(pool, 0));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB); /* b is outstanding */
    OK(cuMemFree_v2(b));
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    OK(cuStreamSynchronize(s));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB); /* within the threshold */
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    OK(cuCtxSynchronize());
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 4 * MiB);
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 2 * MiB + MiB / 2);
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    cr_assert_eq(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
    OK(cuMemAllocFromPoolAsync(&c, 100, pool, s));
    cr_assert_eq(live(SIMCUDA_ASYNC), 100);
    cr_assert_eq(simcuda_used_bytes(0), 2 * MiB);
}

Test(pools, host_pools_count_as_pinned_host_memory)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_HOST, 0}};
    CUmemoryPool pool, default_pool;
    CUdeviceptr p;
    start(no_overhead);
    OK(cuMemPoolCreate(&pool, &props));
    OK(cuMemAllocFromPoolAsync(&p, 4096, pool, NULL));
    cr_assert_eq(live(SIMCUDA_PINNED_HOST), 4096);
    cr_assert_eq(live(SIMCUDA_POOL_RESERVED), 0);
    cr_assert_eq(simcuda_used_bytes(0), 0);
    OK(cuMemFreeAsync(p, NULL));
    cr_assert_eq(cuDeviceSetMemPool(0, pool), CUDA_ERROR_INVALID_VALUE); /* not local to the device */
    OK(cuMemPoolDestroy(pool));
    OK(cuDeviceGetDefaultMemPool(&default_pool, 0));
    cr_assert_eq(cuMemPoolDestroy(default_pool), CUDA_ERROR_INVALID_VALUE);
}

/* cuda.h cuMemPoolExportPointer: "a specific allocation from an already shared memory pool": an
 * exportable pool's allocation exports once the pool itself has (pool.c, as the real driver
 * answered on an H200); a pool that is not exportable never. */
Test(pools, pointers_export_from_a_shared_pool_only)
{
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                            .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemoryPool pool, plain;
    CUdeviceptr p, q;
    CUmemPoolPtrExportData data;
    int fd = -1;
    start(no_overhead);
    OK(cuMemPoolCreate(&pool, &props));
    OK(cuMemAllocFromPoolAsync(&p, 4096, pool, NULL));
    cr_assert_eq(cuMemPoolExportPointer(&data, p), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    cr_assert_geq(fd, 0);
    OK(cuMemPoolExportPointer(&data, p));
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    OK(cuMemPoolCreate(&plain, &props));
    OK(cuMemAllocFromPoolAsync(&q, 4096, plain, NULL));
    cr_assert_eq(cuMemPoolExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                 CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemPoolExportPointer(&data, q), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemFreeAsync(p, NULL));
    OK(cuMemFreeAsync(q, NULL));
    OK(cuMemPoolDestroy(pool));
    OK(cuMemPoolDestroy(plain));
}

Test(ipc, handles_open_in_other_processes_only)
{
    CUdeviceptr d, p;
    CUipcMemHandle handle;
    int status;
    start(NULL);
    OK(cuMemAlloc_v2(&d, 4096));
    OK(cuMemsetD8_v2(d, 0xab, 4096));
    OK(cuIpcGetMemHandle(&handle, d));
    cr_assert_eq(cuIpcOpenMemHandle_v2(&p, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_ERROR_INVALID_CONTEXT);
    pid_t pid = fork();
    if (pid == 0) {
        CUdeviceptr q, r;
        size_t size = 0;
        int bad = cuIpcOpenMemHandle_v2(&q, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS ||
                  cuIpcOpenMemHandle_v2(&r, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != CUDA_SUCCESS || q != r ||
                  *(unsigned char *)q != 0 || /* fresh memory: data is not shared */
                  cuMemGetAddressRange_v2(NULL, &size, q) != CUDA_SUCCESS || size != 4096 ||
                  cuIpcCloseMemHandle(q) != CUDA_SUCCESS || cuIpcCloseMemHandle(q) != CUDA_SUCCESS ||
                  cuIpcCloseMemHandle(q) != CUDA_ERROR_INVALID_VALUE;
        _exit(bad);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
