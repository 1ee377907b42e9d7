/* door_prog: a program that finds the driver itself with dlopen and dlsym, as loaders and binding
 * generators do, to test the dlsym door when a process has more than one library with the
 * driver's functions, or loads the driver twice. Prints key=value lines.
 *
 *   door_prog stub_first STUB DRIVER [close|again]
 *     tries STUB first (cuInit fails with CUDA_ERROR_STUB_LIBRARY), as loaders that walk a list
 *     of candidates do, then DRIVER, by path: 1 MiB and 4 KiB allocated, 1 MiB freed. `close`:
 *     STUB is dlclose()d before DRIVER is loaded; `again`: the stub's cuMemAlloc_v2, looked up
 *     before DRIVER was loaded, is called once more at the end (it is still the stub's).
 *   door_prog reload DRIVER [close]
 *     loads DRIVER, allocates 1 MiB, asks cuMemGetInfo, frees, dlclose()s it (it is unloaded),
 *     maps a page where it was so that it loads elsewhere next, then the same with 2 MiB.
 *     `close`: the second load is dlclose()d before the program exits (the shim's exit report
 *     asks the driver for its figures).
 *   door_prog unload_unseen DRIVER deep LIB | vsym
 *     loads DRIVER, allocates 1 MiB (kept), then unloads DRIVER where the shim's dlclose door is
 *     not called by name: through LIB (libdeepclose.so) loaded with RTLD_DEEPBIND, whose dlclose
 *     binds to glibc's, or through dlvsym(RTLD_DEFAULT, "dlclose", "GLIBC_2.34"); then exits (the
 *     shim's exit report asks the driver).
 *   door_prog deep_runtime RUNTIME
 *     loads the runtime RUNTIME (libcudart.so.13) by path with RTLD_DEEPBIND, as a framework
 *     that loads its CUDA libraries itself may, and through it allocates 1 MiB and frees it.
 *   door_prog deep_user LIB
 *     loads LIB (libdeepcudauser.so, linked to the runtime) by path with RTLD_DEEPBIND, as a
 *     plugin loader may, and through it allocates 1 MiB and frees it.
 *   door_prog bare NAME [deep]
 *     loads NAME by bare name (with RTLD_DEEPBIND after "deep"), which only door_prog's own
 *     RUNPATH ($ORIGIN) finds: glibc's dlopen searches its caller's, so the shim's dlopen door
 *     must leave door_prog the caller. Prints "loaded" or "not found".
 *   door_prog deep_where LIB [DIRS]
 *     (after setting LD_LIBRARY_PATH to DIRS, which ld.so does not see any more, and moving to
 *     LIB's directory, which an empty entry of a search path names) loads LIB (absolute), linked
 *     to the runtime, by path with RTLD_DEEPBIND and prints which runtime it got:
 *     "runtime=beside" when the one in LIB's own directory, else "runtime=elsewhere"; then goes on
 *     as deep_user. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);

struct driver {
    void *handle;
    init_fn init;
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set_current)(CUcontext);
    alloc_fn alloc;
    free_fn free;
    CUresult (*get_info)(size_t *, size_t *);
};

/* dlopen()s path and looks its functions up; false (said) when one is missing. */
static bool open_driver(struct driver *d, const char *path)
{
    memset(d, 0, sizeof *d);
    d->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!d->handle) {
        printf("dlopen=%s\n", dlerror());
        return false;
    }
    d->init = (init_fn)dlsym(d->handle, "cuInit");
    d->device_get = (CUresult(*)(CUdevice *, int))dlsym(d->handle, "cuDeviceGet");
    d->retain = (CUresult(*)(CUcontext *, CUdevice))dlsym(d->handle, "cuDevicePrimaryCtxRetain");
    d->set_current = (CUresult(*)(CUcontext))dlsym(d->handle, "cuCtxSetCurrent");
    d->alloc = (alloc_fn)dlsym(d->handle, "cuMemAlloc_v2");
    d->free = (free_fn)dlsym(d->handle, "cuMemFree_v2");
    d->get_info = (CUresult(*)(size_t *, size_t *))dlsym(d->handle, "cuMemGetInfo_v2");
    if (!d->init || !d->device_get || !d->retain || !d->set_current || !d->alloc || !d->free ||
        !d->get_info) {
        printf("dlsym=missing\n");
        return false;
    }
    return true;
}

/* cuInit, device 0's primary context made current: the first error, or CUDA_SUCCESS. */
static CUresult start(struct driver *d)
{
    CUdevice dev;
    CUcontext ctx;
    CUresult r = d->init(0);
    if (r == CUDA_SUCCESS)
        r = d->device_get(&dev, 0);
    if (r == CUDA_SUCCESS)
        r = d->retain(&ctx, dev);
    if (r == CUDA_SUCCESS)
        r = d->set_current(ctx);
    return r;
}

static bool unloaded(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (h)
        dlclose(h);
    return h == NULL;
}

static int stub_first(const char *stub, const char *driver, const char *mode)
{
    void *s = dlopen(stub, RTLD_NOW | RTLD_LOCAL);
    if (!s) {
        printf("dlopen_stub=%s\n", dlerror());
        return 1;
    }
    /* looked up front, as binding generators do */
    alloc_fn stub_alloc = (alloc_fn)dlsym(s, "cuMemAlloc_v2");
    init_fn stub_init = (init_fn)dlsym(s, "cuInit");
    if (!stub_alloc || !stub_init)
        return 2;
    CUdeviceptr p = 0;
    printf("stub_init=%d\n", (int)stub_init(0));
    printf("stub_alloc=%d\n", (int)stub_alloc(&p, 1 << 20));
    if (strcmp(mode, "close") == 0) {
        printf("stub_close=%d\n", dlclose(s));
        printf("stub_unloaded=%d\n", unloaded(stub));
    }
    struct driver d;
    if (!open_driver(&d, driver))
        return 3;
    CUdeviceptr big = 0, small = 0;
    size_t free_b = 0, total_b = 0;
    printf("rc_start=%d\n", (int)start(&d));
    printf("rc_alloc=%d\n", (int)d.alloc(&big, 1 << 20));
    printf("rc_alloc_small=%d\n", (int)d.alloc(&small, 4096));
    printf("rc_info=%d\n", (int)d.get_info(&free_b, &total_b));
    printf("rc_free=%d\n", (int)d.free(big));
    if (strcmp(mode, "again") == 0)
        printf("stub_alloc_again=%d\n", (int)stub_alloc(&p, 1 << 20));
    return 0;
}

/* One round of reload: load, start, allocate `bytes`, ask, free, leave it loaded. */
static bool round_of(struct driver *d, const char *path, int round, size_t bytes, void **base)
{
    if (!open_driver(d, path))
        return false;
    CUdeviceptr p = 0;
    size_t free_b = 0, total_b = 0;
    CUresult r_start = start(d);
    CUresult r_alloc = d->alloc(&p, bytes);
    CUresult r_info = d->get_info(&free_b, &total_b);
    CUresult r_free = d->free(p);
    printf("round%d=%d,%d,%d,%d\n", round, (int)r_start, (int)r_alloc, (int)r_info, (int)r_free);
    Dl_info info;
    *base = dladdr((void *)d->init, &info) ? info.dli_fbase : NULL;
    return true;
}

static int reload(const char *driver, bool close_at_end)
{
    struct driver d;
    void *base1 = NULL, *base2 = NULL;
    if (!round_of(&d, driver, 1, 1 << 20, &base1))
        return 1;
    printf("close1=%d\n", dlclose(d.handle));
    printf("unloaded1=%d\n", unloaded(driver));
    /* a page where the driver was: the next load cannot land at the same address */
    void *page = mmap(base1, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (page != base1)
        return 2;
    if (!round_of(&d, driver, 2, 2 << 20, &base2))
        return 3;
    printf("moved=%d\n", base2 != base1);
    if (close_at_end) {
        printf("close2=%d\n", dlclose(d.handle));
        printf("unloaded2=%d\n", unloaded(driver));
    }
    fflush(stdout);
    return 0;
}

static int unload_unseen(const char *driver, const char *how, const char *lib)
{
    struct driver d;
    if (!open_driver(&d, driver))
        return 1;
    CUdeviceptr p = 0;
    printf("rc_start=%d\n", (int)start(&d));
    printf("rc_alloc=%d\n", (int)d.alloc(&p, 1 << 20));
    int (*close_fn)(void *) = NULL;
    if (strcmp(how, "deep") == 0 && lib) {
        void *x = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
        close_fn = x ? (int (*)(void *))dlsym(x, "deep_close") : NULL;
    } else if (strcmp(how, "vsym") == 0) {
        close_fn = (int (*)(void *))dlvsym(RTLD_DEFAULT, "dlclose", "GLIBC_2.34");
    }
    if (!close_fn)
        return 2;
    printf("close=%d\n", close_fn(d.handle));
    printf("unloaded=%d\n", unloaded(driver));
    fflush(stdout);
    return 0;
}

static int deep_runtime(const char *lib, bool user)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    int (*alloc)(void **, size_t) =
        h ? (int (*)(void **, size_t))dlsym(h, user ? "deep_user_alloc" : "cudaMalloc") : NULL;
    int (*release)(void *) = h ? (int (*)(void *))dlsym(h, user ? "deep_user_free" : "cudaFree") : NULL;
    if (!alloc || !release) {
        printf("dlopen=%s\n", h ? "missing" : dlerror());
        return 1;
    }
    void *p = NULL;
    printf("rc_alloc=%d\n", alloc(&p, 1 << 20));
    printf("rc_free=%d\n", release(p));
    fflush(stdout);
    return 0;
}

static int deep_where(const char *lib, const char *dirs)
{
    if (dirs)
        setenv("LD_LIBRARY_PATH", dirs, 1);
    char dir[4096];
    const char *slash = strrchr(lib, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - lib) : 1, slash ? lib : ".");
    if (chdir(dir) != 0)
        return 1;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    void *f = h ? dlsym(h, "cudaMalloc") : NULL;
    Dl_info info;
    if (!f || !dladdr(f, &info) || !info.dli_fname) {
        printf("dlopen=%s\n", h ? "missing" : dlerror());
        return 1;
    }
    /* The runtime's name as loaded may be relative (an empty search path entry): to the working
     * directory, LIB's. */
    char lp[4096], rp[4096];
    if (!realpath(lib, lp) || !realpath(info.dli_fname, rp))
        return 1;
    const char *ls = strrchr(lp, '/'), *rs = strrchr(rp, '/');
    bool beside = ls && rs && ls - lp == rs - rp && strncmp(lp, rp, (size_t)(ls - lp)) == 0;
    printf("runtime=%s\n", beside ? "beside" : "elsewhere");
    return deep_runtime(lib, true);
}

static int bare(const char *name, bool deep)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL | (deep ? RTLD_DEEPBIND : 0));
    printf("%s\n", h ? "loaded" : "not found");
    if (!h)
        fprintf(stderr, "%s\n", dlerror());
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "stub_first") == 0)
        return stub_first(argv[2], argv[3], argc == 5 ? argv[4] : "");
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "reload") == 0)
        return reload(argv[2], argc == 4 && strcmp(argv[3], "close") == 0);
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "unload_unseen") == 0)
        return unload_unseen(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    if (argc == 3 && (strcmp(argv[1], "deep_runtime") == 0 || strcmp(argv[1], "deep_user") == 0))
        return deep_runtime(argv[2], strcmp(argv[1], "deep_user") == 0);
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "deep_where") == 0)
        return deep_where(argv[2], argc == 4 ? argv[3] : NULL);
    if ((argc == 3 || (argc == 4 && strcmp(argv[3], "deep") == 0)) && strcmp(argv[1], "bare") == 0)
        return bare(argv[2], argc == 4);
    fprintf(stderr, "usage: %s stub_first STUB DRIVER [close|again] | reload DRIVER [close] | "
            "unload_unseen DRIVER deep LIB | vsym | deep_runtime RUNTIME | deep_user LIB | deep_where LIB [DIRS] | bare NAME [deep]\n", argv[0]);
    return 2;
}
