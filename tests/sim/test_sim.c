/* The simulated CUDA device's own tests (suite files test_sim*.c, helpers in test_sim.h):
 * initialization, memory, injection, cuGetProcAddress and the runtime. Linked directly against
 * the simulated libcuda.so.1; runtime behaviour is checked through progs/rt_check
 * ($SIM_RT_CHECK). Criterion runs every test in its own process, so each test sets its SIMCUDA_*
 * variables before its first CUDA call. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_sim.h"

#include <criterion/redirect.h>

const char *const no_overhead[] = {"SIMCUDA_CTX_OVERHEAD=0", NULL};

/* The simulated driver follows CUDA_VISIBLE_DEVICES as the real one does: an inherited one (a GPU
 * node's scheduler sets it) must not change what these tests count on. Before any test process
 * starts; a test that wants it sets it. */
ReportHook(PRE_ALL)(struct criterion_test_set *tests)
{
    (void)tests;
    unsetenv("CUDA_VISIBLE_DEVICES");
}

CUcontext start(const char *const *env)
{
    CUcontext ctx;
    for (; env && *env; env++)
        putenv((char *)*env);
    OK(cuInit(0));
    OK(cuDevicePrimaryCtxRetain(&ctx, 0));
    OK(cuCtxSetCurrent(ctx));
    return ctx;
}

uint64_t live(simcuda_kind kind)
{
    return simcuda_live_bytes(0, kind);
}

void *proc(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    OK(cuGetProcAddress_v2(name, &fn, version, flags, NULL));
    return fn;
}

/* Output of `rt_check scenario` (with the current environment); $SIM_RT_CHECK links the shared
 * runtime, $SIM_RT_CHECK_STATIC the static one. */
static char *run_program(const char *variable, const char *scenario)
{
    const char *prog = getenv(variable);
    char cmd[4096];
    static char out[8192];
    cr_assert_not_null(prog, "%s is not set", variable);
    snprintf(cmd, sizeof cmd, "'%s' %s", prog, scenario);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    cr_assert_eq(pclose(f), 0, "%s %s failed:\n%s", prog, scenario, out);
    return out;
}

char *run_rt_check(const char *scenario)
{
    return run_program("SIM_RT_CHECK", scenario);
}

void expect_line(const char *out, const char *line)
{
    char needle[256];
    snprintf(needle, sizeof needle, "%s\n", line);
    cr_expect(strstr(out, needle) != NULL, "missing \"%s\" in:\n%s", line, out);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot read %s", path);
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

Test(init, everything_but_a_few_entry_points_needs_cuInit)
{
    CUdeviceptr p;
    int version;
    const char *s;
    cr_assert_eq(cuMemAlloc_v2(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuDriverGetVersion(&version));
    cr_assert_eq(version, 13000);
    OK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    cr_assert_str_eq(s, "CUDA_ERROR_OUT_OF_MEMORY");
    cr_assert_eq(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(s);
    cr_assert_not_null(proc("cuMemAlloc", 3020, 0));
    OK(cuInit(0));
    cr_assert_eq(cuMemAlloc_v2(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
}

Test(init, devices_come_from_the_environment)
{
    const char *const env[] = {"SIMCUDA_DEVICE_COUNT=2", "SIMCUDA_DEVICE_MEMORY=0:4GiB,1:512M",
                               "SIMCUDA_DEVICE_NAME=test gpu", NULL};
    int n, value;
    size_t total;
    char name[64];
    CUuuid uuid;
    CUdevice dev;
    start(env);
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 2);
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_assert_eq(total, 4 * GiB);
    OK(cuDeviceTotalMem_v2(&total, 1));
    cr_assert_eq(total, 512 * MiB);
    OK(cuDeviceGetName(name, sizeof name, 1));
    cr_assert_str_eq(name, "test gpu");
    OK(cuDeviceGetUuid_v2(&uuid, 1));
    cr_assert_eq((unsigned char)uuid.bytes[3], 0x13);
    OK(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    cr_assert_eq(value, 9);
    OK(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1));
    cr_assert_eq(value, 1);
    OK(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
    cr_assert_eq(value, 0);
    cr_assert_eq(cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
}

/* A bad SIMCUDA_ value is one line naming the variable, the value, what was expected and the
 * default used (README.md, "Environment"; the project's rule for bad input): "(bad value)" alone
 * left a reader guessing what the variable takes. */
Test(init, a_bad_value_says_what_was_expected_and_the_default, .init = cr_redirect_stderr)
{
    putenv("SIMCUDA_DEVICE_COUNT=20");
    putenv("SIMCUDA_GRANULARITY=abc");
    putenv("SIMCUDA_LAZY_EVENTS=2");
    putenv("SIMCUDA_BEGIN_CAPTURE_MS=20000");
    putenv("SIMCUDA_DEVICE_MEMORY=1.5G");
    OK(cuInit(0));
    fflush(stderr);
    FILE *err = cr_get_redirected_stderr();
    char text[4096];
    size_t n = fread(text, 1, sizeof text - 1, err);
    text[n] = '\0';
    /* The whole of it, in the order the values are read: each line is known in full. */
    cr_expect_str_eq(text,
                     "simcuda: SIMCUDA_DEVICE_COUNT=\"20\" is not a whole number 0..16; using the default 1\n"
                     "simcuda: SIMCUDA_DEVICE_MEMORY=\"1.5G\" is not a size (a whole number of bytes, or with a binary "
                     "unit: 512M, 64MiB, 1g) nor ORDINAL:SIZE,... with ordinals 0..15; using the default 16GiB\n"
                     "simcuda: SIMCUDA_GRANULARITY=\"abc\" is not a size above 0 (a whole number of bytes, or with a "
                     "binary unit: 512M, 64MiB, 1g); using the default 512\n"
                     "simcuda: SIMCUDA_LAZY_EVENTS=\"2\" is not 0 or 1; using the default 0\n"
                     "simcuda: SIMCUDA_BEGIN_CAPTURE_MS=\"20000\" is not a whole number of milliseconds 0..10000; "
                     "using the default 0\n");
}

Test(init, a_bad_inject_rule_says_what_a_rule_is, .init = cr_redirect_stderr)
{
    putenv("SIMCUDA_INJECT=foo,cuMemAlloc_v2:0:1");
    OK(cuInit(0));
    fflush(stderr);
    char text[2048];
    size_t n = fread(text, 1, sizeof text - 1, cr_get_redirected_stderr());
    text[n] = '\0';
    cr_expect_str_eq(text, "simcuda: SIMCUDA_INJECT rule \"foo\" is not SYMBOL:N:CODE; ignored\n"
                           "simcuda: SIMCUDA_INJECT rule \"cuMemAlloc_v2:0:1\" is not SYMBOL:N:CODE (an exported "
                           "symbol, N 1 or more or *, CODE a CUresult number or name, or raise=SIGNUM 1..64); "
                           "ignored\n");
}

/* A rule past the 64 kept is said so, alone (the other message of a bad rule). */
Test(init, an_inject_rule_past_the_rules_kept_says_so, .init = cr_redirect_stderr)
{
    static char env[2048] = "SIMCUDA_INJECT=";
    for (int i = 0; i < 64; i++)
        strcat(env, "cuMemFree_v2:999:1,");
    strcat(env, "cuMemAlloc_v2:5:2");
    putenv(env);
    OK(cuInit(0));
    fflush(stderr);
    char text[2048];
    size_t n = fread(text, 1, sizeof text - 1, cr_get_redirected_stderr());
    text[n] = '\0';
    cr_expect_str_eq(text, "simcuda: SIMCUDA_INJECT rule \"cuMemAlloc_v2:5:2\" is past the 64 rules kept; ignored\n");
}

/* CUDA_VISIBLE_DEVICES (CUDA C++ Programming Guide, "CUDA Environment Variables"): indices or
 * UUID prefixes, numbered in the list's order; the list ends at an entry that names no device. */
Test(init, cuda_visible_devices_picks_and_orders_the_devices)
{
    const char *const env[] = {"SIMCUDA_DEVICE_COUNT=3", "SIMCUDA_DEVICE_MEMORY=0:1GiB,1:2GiB,2:3GiB",
                               "CUDA_VISIBLE_DEVICES=2,GPU-00010203,-1,1", NULL};
    int n;
    size_t total;
    CUuuid uuid;
    start(env);
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 2);
    OK(cuDeviceTotalMem_v2(&total, 0));
    cr_expect_eq(total, 3 * GiB);
    OK(cuDeviceGetUuid_v2(&uuid, 0));
    cr_expect_eq((unsigned char)uuid.bytes[0], 0x20);
    OK(cuDeviceTotalMem_v2(&total, 1));
    cr_expect_eq(total, 1 * GiB);
    OK(cuDeviceGetUuid_v2(&uuid, 1));
    cr_expect_eq((unsigned char)uuid.bytes[15], 0x0f);
}

Test(init, cuda_visible_devices_invalid_leaves_no_device)
{
    putenv("SIMCUDA_DEVICE_COUNT=2");
    putenv("CUDA_VISIBLE_DEVICES=-1");
    cr_expect_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

Test(init, cuda_visible_devices_empty_leaves_no_device)
{
    putenv("SIMCUDA_DEVICE_COUNT=2");
    putenv("CUDA_VISIBLE_DEVICES=");
    cr_expect_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

Test(init, cuda_visible_devices_listing_a_device_twice_leaves_none)
{
    putenv("SIMCUDA_DEVICE_COUNT=2");
    putenv("CUDA_VISIBLE_DEVICES=1,0,1");
    cr_expect_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

/* A repeat past the 16th entry counts too (a trial: the 17th entry was never read). */
Test(init, cuda_visible_devices_repeat_after_every_device_leaves_none)
{
    putenv("SIMCUDA_DEVICE_COUNT=16");
    putenv("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,0");
    cr_expect_eq(cuInit(0), CUDA_ERROR_NO_DEVICE);
}

Test(init, cuda_visible_devices_ignores_blanks_around_an_entry)
{
    const char *const env[] = {"SIMCUDA_DEVICE_COUNT=2", "CUDA_VISIBLE_DEVICES= GPU-1011 , 0 ", NULL};
    int n;
    CUuuid uuid;
    start(env);
    OK(cuDeviceGetCount(&n));
    cr_assert_eq(n, 2);
    OK(cuDeviceGetUuid_v2(&uuid, 0));
    cr_expect_eq((unsigned char)uuid.bytes[0], 0x10);
}

Test(memory, mem_get_info_is_capacity_minus_overhead_and_rounded_allocations)
{
    CUdeviceptr a, b, c, d;
    size_t free, total, pitch;
    start(NULL);
    OK(cuMemGetInfo_v2(&free, &total));
    cr_assert_eq(total, 16 * GiB);
    cr_assert_eq(total - free, 300 * MiB);
    OK(cuMemAlloc_v2(&a, 1));
    OK(cuMemAlloc_v2(&b, 513));
    OK(cuMemAlloc_v2(&c, MiB));
    OK(cuMemAllocPitch_v2(&d, &pitch, 1000, 3, 4));
    cr_assert_eq(pitch, 1024);
    OK(cuMemGetInfo_v2(&free, &total));
    cr_assert_eq(total - free, 300 * MiB + 512 + 1024 + MiB + 3072);
    cr_assert_eq(simcuda_used_bytes(0), total - free);
    cr_assert_eq(live(SIMCUDA_DEVICE), 1 + 513 + MiB + 3072);
    OK(cuMemFree_v2(a));
    OK(cuMemFree_v2(b));
    OK(cuMemFree_v2(c));
    OK(cuMemFree_v2(d));
    cr_assert_eq(cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemGetInfo_v2(NULL, NULL));
    cr_assert_eq(live(SIMCUDA_DEVICE), 0);
    cr_assert_eq(simcuda_used_bytes(0), 300 * MiB);
}

Test(memory, exceeding_the_capacity_allocates_nothing)
{
    const char *const env[] = {"SIMCUDA_DEVICE_MEMORY=1MiB", "SIMCUDA_CTX_OVERHEAD=0", NULL};
    CUdeviceptr a, b;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    start(env);
    OK(cuMemAlloc_v2(&a, 768 * KiB));
    cr_assert_eq(cuMemAlloc_v2(&b, 512 * KiB), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    cr_assert_eq(cuMemAllocAsync(&b, 100, NULL), CUDA_ERROR_OUT_OF_MEMORY); /* a 2 MiB pool chunk */
    cr_assert_eq(live(SIMCUDA_DEVICE), 768 * KiB);
    cr_assert_eq(live(SIMCUDA_ASYNC) + live(SIMCUDA_VMM) + live(SIMCUDA_POOL_RESERVED), 0);
    cr_assert_eq(simcuda_used_bytes(0), 768 * KiB);
    OK(cuMemAllocManaged(&b, 4 * MiB, CU_MEM_ATTACH_GLOBAL)); /* managed memory oversubscribes */
    cr_assert_eq(live(SIMCUDA_MANAGED), 4 * MiB);
}

/* The "D" side of an explicit copy: device memory or page-locked host memory (pinned, also
 * write-combined, or registered) by its host address, as the real driver took them on an H200
 * (mem.h SIM_MEM_DEVICE_SIDE); pageable memory is refused. */
Test(memory, explicit_copies_need_device_or_page_locked_memory_on_their_device_side)
{
    CUdeviceptr d;
    void *h, *wc;
    static unsigned char reg[4096] __attribute__((aligned(4096)));
    unsigned char buf[64] = {1, 2, 3}, back[64];
    static unsigned char pageable[64];
    start(NULL);
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuMemHostAlloc(&h, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    OK(cuMemHostAlloc(&wc, 64, CU_MEMHOSTALLOC_WRITECOMBINED));
    OK(cuMemHostRegister_v2(reg, sizeof reg, 0));
    OK(cuMemcpyHtoD_v2(d, buf, 64));
    OK(cuMemcpyDtoH_v2(back, d, 64));
    cr_assert_eq(memcmp(buf, back, 64), 0);
    OK(cuMemcpyDtoD_v2((CUdeviceptr)h, d, 64));
    cr_assert_eq(((unsigned char *)h)[2], 3);
    OK(cuMemcpyDtoD_v2((CUdeviceptr)wc, (CUdeviceptr)h, 64));
    OK(cuMemcpyDtoD_v2((CUdeviceptr)reg, (CUdeviceptr)wc, 64));
    cr_assert_eq(reg[1], 2);
    memset(h, 0, 64);
    OK(cuMemcpyDtoH_v2(back, (CUdeviceptr)reg, 64));
    cr_assert_eq(back[2], 3);
    cr_assert_eq(cuMemcpyDtoH_v2(back, (CUdeviceptr)pageable, 64), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyDtoD_v2(d, (CUdeviceptr)pageable, 64), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyDtoD_v2((CUdeviceptr)h + 32, d, 64), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyHtoD_v2(d + 32, buf, 64), CUDA_ERROR_INVALID_VALUE);
    OK(cuMemcpy((CUdeviceptr)h, d, 64));
    cr_assert_eq(((unsigned char *)h)[2], 3);
    OK(cuMemsetD8_v2((CUdeviceptr)h, 9, 64));
    cr_assert_eq(((unsigned char *)h)[63], 9);
    OK(cuMemsetD32_v2(d, 0x01020304, 16));
    OK(cuMemcpyDtoH_v2(back, d, 4));
    cr_assert_eq(back[0], 4);
    cr_assert_eq(cuMemsetD32_v2(d + 1, 0, 1), CUDA_ERROR_INVALID_VALUE);
}

/* SIMCUDA_STRICT_COPIES=1: the stricter reading cuda.h leaves room for, device memory only on a
 * "D" side (the offload tests' way to show the shim's rerouting at work). */
Test(memory, strict_copies_refuse_page_locked_memory_on_a_device_side)
{
    const char *env[] = {"SIMCUDA_STRICT_COPIES=1", NULL};
    CUdeviceptr d;
    void *h;
    unsigned char buf[64] = {5};
    start(env);
    OK(cuMemAlloc_v2(&d, 64));
    OK(cuMemHostAlloc(&h, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    cr_assert_eq(cuMemcpyDtoD_v2((CUdeviceptr)h, d, 64), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemcpyHtoD_v2((CUdeviceptr)h, buf, 64), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = buf, .srcPitch = 16,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = (CUdeviceptr)h, .dstPitch = 16,
                       .WidthInBytes = 16, .Height = 4};
    cr_assert_eq(cuMemcpy2D_v2(&c), CUDA_ERROR_INVALID_VALUE);
    c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    OK(cuMemcpy2D_v2(&c));
    OK(cuMemcpy((CUdeviceptr)h, (CUdeviceptr)buf, 64));
    OK(cuMemcpyHtoD_v2(d, buf, 64));
}

Test(memory, host_registration)
{
    static char buf[3 * 4096] __attribute__((aligned(4096)));
    CUdeviceptr dptr;
    unsigned flags;
    start(no_overhead);
    OK(cuMemHostRegister_v2(buf, 8192, CU_MEMHOSTREGISTER_DEVICEMAP));
    cr_assert_eq(cuMemHostRegister_v2(buf + 4096, 8192, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(cuMemHostGetDevicePointer_v2(&dptr, buf + 10, 0));
    cr_assert_eq(dptr, (CUdeviceptr)(buf + 10));
    cr_assert_eq(cuMemHostGetFlags(&flags, buf), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(live(SIMCUDA_REGISTERED_HOST), 8192);
    cr_assert_eq(cuMemHostUnregister(buf + 4096), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    OK(cuMemHostUnregister(buf));
    cr_assert_eq(live(SIMCUDA_REGISTERED_HOST), 0);
    cr_assert_eq(simcuda_used_bytes(0), 0);
}

Test(memory, pointer_attributes)
{
    CUcontext ctx = start(NULL), c;
    CUdeviceptr d, m, a, start_addr;
    void *h, *hp;
    unsigned type;
    int managed;
    size_t size;
    CUmemoryPool pool, default_pool;
    OK(cuMemAlloc_v2(&d, 1000));
    OK(cuMemAllocManaged(&m, 100, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemAllocHost_v2(&h, 100));
    OK(cuMemAllocAsync(&a, 100, NULL));
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    cr_assert_eq(type, CU_MEMORYTYPE_DEVICE);
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h));
    cr_assert_eq(type, CU_MEMORYTYPE_HOST);
    cr_assert_eq(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d), CUDA_ERROR_INVALID_VALUE);
    OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    cr_assert_eq(managed, 1);
    OK(cuPointerGetAttribute(&start_addr, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 10));
    cr_assert_eq(start_addr, d);
    OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 10));
    cr_assert_eq(size, 1000);
    OK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, d));
    cr_assert_eq(c, ctx);
    /* cuda.h cuCtxDestroy: stream-ordered allocations "are not associated with any CUDA context" */
    cr_assert_eq(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, a), CUDA_ERROR_INVALID_VALUE);
    cr_assert_null(c);
    OK(cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
    OK(cuDeviceGetDefaultMemPool(&default_pool, 0));
    cr_assert_eq(pool, default_pool);
    cr_assert_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)&type),
                 CUDA_ERROR_INVALID_VALUE);
    CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_HOST_POINTER};
    void *data[] = {&type, &hp};
    OK(cuPointerGetAttributes(2, which, data, (CUdeviceptr)&type));
    cr_assert_eq(type, 0);
    cr_assert_null(hp);
}

Test(inject, nth_call_fails_and_does_nothing)
{
    const char *const env[] = {"SIMCUDA_INJECT=cuMemAlloc_v2:2:2", "SIMCUDA_CTX_OVERHEAD=0", NULL};
    CUdeviceptr a, b, c;
    start(env);
    OK(cuMemAlloc_v2(&a, 16));
    cr_assert_eq(cuMemAlloc_v2(&b, 16), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cuMemAlloc_v2(&c, 16));
    cr_assert_eq(simcuda_call_count("cuMemAlloc_v2"), 3);
    cr_assert_eq(live(SIMCUDA_DEVICE), 32);
}

Test(inject, every_call_and_codes_by_name)
{
    putenv("SIMCUDA_INJECT=cuMemFree_v2:*:CUDA_ERROR_INVALID_VALUE,cuDeviceGetCount:1:100");
    int n;
    CUdeviceptr a;
    cr_assert_eq(cuDeviceGetCount(&n), CUDA_ERROR_NO_DEVICE); /* injected before the cuInit check */
    start(NULL);
    OK(cuDeviceGetCount(&n));
    OK(cuMemAlloc_v2(&a, 16));
    cr_assert_eq(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
    cr_assert_eq(live(SIMCUDA_DEVICE), 16);
}

Test(procaddr, versions_and_flags_select_the_abi_variant)
{
    CUdriverProcAddressQueryResult st;
    void *fn = (void *)1;
    CUdeviceptr p;
    start(NULL);
    OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 2000, 0, &st)); /* the 32-bit ABI is not simulated */
    cr_assert_null(fn);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, &st));
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
    OK(((PFN_cuMemAlloc_v3020)fn)(&p, 64));
    cr_assert_eq(simcuda_call_count("cuMemAlloc_v2"), 1);
    OK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    OK(((PFN_cuMemAllocAsync_v11020_ptsz)fn)(&p, 64, NULL));
    cr_assert_eq(simcuda_call_count("cuMemAllocAsync_ptsz"), 1);
    cr_assert_eq(simcuda_call_count("cuMemAllocAsync"), 0);
    OK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
    OK(((PFN_cuMemAllocAsync_v11020)fn)(&p, 64, NULL));
    cr_assert_eq(simcuda_call_count("cuMemAllocAsync"), 1);
    /* A per-thread request without a per-thread variant gives the legacy one. */
    cr_assert_eq(proc("cuMemcpyHtoD", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                 proc("cuMemcpyHtoD", 3020, 0));
    cr_assert_neq(proc("cuMemcpyHtoD", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM),
                  proc("cuMemcpyHtoD", 7000, 0));
    fn = (void *)1;
    cr_assert_eq(cuGetProcAddress_v2("cuMemAlloc", &fn, 99999, 0, &st), CUDA_ERROR_INVALID_VALUE);
    OK(cuGetProcAddress_v2("cuNoSuchFunction", &fn, 13000, 0, &st));
    cr_assert_null(fn);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

/* The 11000 ABI, which cuda.h declares only for __CUDA_API_VERSION_INTERNAL. */
CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize);

/* SIMCUDA_INSTANTIATE_LOOKUP=withflags: a driver that follows cuda.h's #define. */
Test(procaddr, instantiate_lookup_following_the_define)
{
    const char *env[] = {"SIMCUDA_INSTANTIATE_LOOKUP=withflags", NULL};
    start(env);
    cr_assert_eq(proc("cuGraphInstantiate", 12000, 0), (void *)cuGraphInstantiateWithFlags);
    cr_assert_eq(proc("cuGraphInstantiate", 11000, 0), (void *)cuGraphInstantiate_v2);
}

Test(procaddr, special_names)
{
    start(NULL);
    /* "cuGraphInstantiate" at 12000: cuGraphInstantiate_v2, as the real driver answered (an H200),
     * though cuda.h has #define cuGraphInstantiate cuGraphInstantiateWithFlags (since 12.0). */
    cr_assert_eq(proc("cuGraphInstantiate", 12000, 0), (void *)cuGraphInstantiate_v2);
    cr_assert_eq(proc("cuGraphInstantiate", 11000, 0), (void *)cuGraphInstantiate_v2);
    PFN_cuGetProcAddress_v11030 v1 = proc("cuGetProcAddress", 11030, 0);
    cr_assert_eq(proc("cuGetProcAddress", 12000, 0), (void *)cuGetProcAddress_v2);
    void *fn = NULL;
    OK(v1("cuMemFree", &fn, 3020, 0));
    cr_assert_eq(fn, (void *)cuMemFree_v2);
    cr_assert_eq(simcuda_call_count("cuGetProcAddress"), 1);
}

Test(procaddr, hidden_names_are_not_found)
{
    CUdriverProcAddressQueryResult st;
    void *fn = (void *)1;
    putenv("SIMCUDA_HIDE=cuMemAllocAsync,cuMemFreeAsync");
    OK(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, 0, &st));
    cr_assert_null(fn);
    cr_assert_eq(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    cr_assert_not_null(proc("cuMemAllocFromPoolAsync", 11020, 0));
}

Test(procaddr, lookups_are_logged)
{
    char path[] = "/tmp/simcuda-lookups-XXXXXX", env[64];
    void *fn;
    close(mkstemp(path));
    snprintf(env, sizeof env, "SIMCUDA_LOG_LOOKUPS=%s", path);
    putenv(env);
    OK(cuGetProcAddress_v2("", &fn, 0, 0, NULL));
    OK(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 2, NULL));
    cr_expect_str_eq(slurp(path), "ver=0 flags=0 status=(nil)\ncuMemAlloc ver=3020 flags=2\n");
    unlink(path);
}

/* The runtime (shared and static alike) replays exactly the lookups the real cudart 13.0 makes at
 * init. */
static void check_lookups(const char *variable)
{
    char path[] = "/tmp/simcuda-lookups-XXXXXX", env[64];
    close(mkstemp(path));
    snprintf(env, sizeof env, "SIMCUDA_LOG_LOOKUPS=%s", path);
    putenv(env);
    expect_line(run_program(variable, "init"), "free_null=0");
    char *log = strdup(slurp(path));
    char *reference = slurp(getenv("SIM_LOOKUPS_REF"));
    char *line, *save = NULL, *expected = calloc(1, strlen(reference) + 1);
    for (line = strtok_r(reference, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        if (line[0] != '#')
            strcat(strcat(expected, line), "\n");
    cr_expect_str_eq(log, expected);
    free(log);
    free(expected);
    unlink(path);
}

/* The runtime's symbols carry the real libcudart.so.13's version node: a program linked against
 * the real runtime asks for cudaMalloc@libcudart.so.13 (dlvsym: glibc's lookup of one version). */
Test(runtime, symbols_have_the_real_runtimes_version)
{
    void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    cr_assert(h, "%s", dlerror());
    cr_expect(dlvsym(h, "cudaMalloc", "libcudart.so.13") != NULL, "%s", dlerror());
    cr_expect(dlvsym(h, "cudaGraphLaunch", "libcudart.so.13") != NULL, "%s", dlerror());
    cr_expect(dlvsym(h, "cudaMalloc", "libcudart.so.12") == NULL);
    dlclose(h);
}

Test(runtime, lookups_match_the_reference)
{
    check_lookups("SIM_RT_CHECK");
}

Test(runtime, static_runtime_lookups_match_the_reference)
{
    check_lookups("SIM_RT_CHECK_STATIC");
}

Test(runtime, zero_sized_malloc_and_null_free_call_no_driver_allocator)
{
    char *out = run_rt_check("zero");
    expect_line(out, "malloc0=0 null=1");
    expect_line(out, "free_null=0");
    expect_line(out, "cuMemAlloc_v2=0 cuMemFree_v2=0");
}

Test(runtime, missing_driver_function_is_not_supported_and_sticks_as_last_error)
{
    putenv("SIMCUDA_HIDE=cuMemAllocAsync");
    char *out = run_rt_check("hide");
    expect_line(out, "malloc_async=801");
    expect_line(out, "peek=801");
    expect_line(out, "last=801");
    expect_line(out, "last_again=0");
}

Test(runtime, device_reset_frees_the_context_memory_not_stream_ordered)
{
    putenv("SIMCUDA_CTX_OVERHEAD=0");
    char *out = run_rt_check("reset");
    expect_line(out, "before.device=1048576 before.async=1048576");
    expect_line(out, "reset=0");
    /* the pool keeps the chunk the async allocation is in */
    expect_line(out, "after.device=0 after.async=1048576 after.pool=2097152 after.used=2097152");
    expect_line(out, "malloc_again=0");
    expect_line(out, "again.device=4096");
    expect_line(out, "free_async=0");
    expect_line(out, "sync=0");
    expect_line(out, "freed.async=0 freed.pool=0");
}

Test(runtime, per_thread_entry_points_use_per_thread_driver_variants)
{
    char *out = run_rt_check("ptsz");
    expect_line(out, "malloc_async_ptsz=0");
    expect_line(out, "entry=0 status=0");
    expect_line(out, "same=1");
    expect_line(out, "cuMemAllocAsync_ptsz=1 cuMemAllocAsync=0");
}
