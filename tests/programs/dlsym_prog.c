/* dlsym_prog: prints what dlsym answers for lookups the shim must not change, so a test can
 * compare runs with and without the shim. Symbols are named by the object that defines them.
 * Modes (argv[1]): none, copy, local, local_driver, global_driver (each function says what it
 * does). */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *where(void *p)
{
    Dl_info info;
    if (!p)
        return "NULL";
    if (!dladdr(p, &info) || !info.dli_fname)
        return "?";
    return info.dli_sname ? info.dli_sname : info.dli_fname;
}

static void show(const char *what, void *p)
{
    Dl_info info;
    const char *file = p && dladdr(p, &info) && info.dli_fname ? info.dli_fname : "NULL";
    const char *base = file;
    for (const char *c = file; *c; c++)
        if (*c == '/')
            base = c + 1;
    printf("%s=%s@%s\n", what, where(p), base);
}

/* dlsym_prog copy PATH: the program dlopen()s its own copy of the shim (RTLD_LOCAL) while
 * another is preloaded, and sets the phase through that copy's API: the counting copy must see
 * it. */
static int through_a_copy(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen=%s\n", dlerror());
        return 1;
    }
    int (*set)(int) = (int (*)(int))dlsym(h, "cushim_set_phase");
    int (*get_copy)(void) = (int (*)(void))dlsym(h, "cushim_get_phase");
    int (*get_first)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "cushim_get_phase");
    if (!set || !get_copy || !get_first)
        return 2;
    printf("set_rc=%d\n", set(1));
    printf("phase_first=%d\nphase_copy=%d\n", get_first(), get_copy());
    return 0;
}

/* dlsym_prog local PATH: dlopen()s a library linked to libcuda with RTLD_LOCAL (as Python loads
 * extension modules) and has it look driver functions up with dlsym(RTLD_DEFAULT, ...). */
static int local_library(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen=%s\n", dlerror());
        return 1;
    }
    int (*probe)(void) = (int (*)(void))dlsym(h, "cudauser_probe");
    if (!probe)
        return 2;
    printf("global_cuInit=%s\n", dlsym(RTLD_DEFAULT, "cuInit") ? "found" : "NULL");
    printf("probe_rc=%d\n", probe());
    return 0;
}

/* found or NULL, and whether dlerror() then has an error to read: set or (none). */
static void probe(const char *what, void *p)
{
    const char *e = dlerror();
    printf("%s=%s,dlerror=%s\n", what, p ? "found" : "NULL", e ? "set" : "(none)");
}

/* dlsym_prog local_driver PATH: the driver loaded RTLD_LOCAL, as the runtime loads it: the program
 * finds its functions through the handle only, not with RTLD_DEFAULT, RTLD_NEXT or the program's
 * own handle. */
static int local_driver(const char *path)
{
    static const char *const names[] = {"cuMemAlloc_v2", "cuGetProcAddress_v2", "cuMemCreate",
                                         "cuInit"};
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    void *self = dlopen(NULL, RTLD_NOW);
    if (!h || !self)
        return 1;
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        char what[128];
        dlerror();
        snprintf(what, sizeof what, "default_%s", names[i]);
        probe(what, dlsym(RTLD_DEFAULT, names[i]));
        snprintf(what, sizeof what, "next_%s", names[i]);
        probe(what, dlsym(RTLD_NEXT, names[i]));
        snprintf(what, sizeof what, "program_%s", names[i]);
        probe(what, dlsym(self, names[i]));
        snprintf(what, sizeof what, "handle_%s", names[i]);
        probe(what, dlsym(h, names[i]));
    }
    return 0;
}

/* dlsym_prog global_driver PATH: the driver loaded RTLD_GLOBAL: RTLD_DEFAULT and RTLD_NEXT find
 * cuMemAlloc_v2, and what they answer allocates (1 MiB through RTLD_NEXT's, 4 KiB through
 * RTLD_DEFAULT's), both counted under the shim. */
static int global_driver(const char *path)
{
    typedef int (*alloc_fn)(unsigned long long *, size_t);
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        return 1;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "cuInit");
    int (*device_get)(int *, int) = (int (*)(int *, int))dlsym(RTLD_DEFAULT, "cuDeviceGet");
    int (*retain)(void **, int) = (int (*)(void **, int))dlsym(RTLD_DEFAULT, "cuDevicePrimaryCtxRetain");
    int (*set_current)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "cuCtxSetCurrent");
    dlerror();
    alloc_fn by_default = (alloc_fn)dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    probe("default_cuMemAlloc_v2", (void *)by_default);
    alloc_fn by_next = (alloc_fn)dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    probe("next_cuMemAlloc_v2", (void *)by_next);
    if (!init || !device_get || !retain || !set_current || !by_default || !by_next)
        return 2;
    int dev = -1;
    void *ctx = NULL;
    unsigned long long a = 0, b = 0;
    int r = init(0);
    r = r ? r : device_get(&dev, 0);
    r = r ? r : retain(&ctx, dev);
    r = r ? r : set_current(ctx);
    printf("rc_start=%d\n", r);
    printf("rc_alloc_next=%d\n", by_next(&a, 1 << 20));
    printf("rc_alloc_default=%d\n", by_default(&b, 4096));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "copy") == 0)
        return through_a_copy(argv[2]);
    if (argc == 3 && strcmp(argv[1], "local") == 0)
        return local_library(argv[2]);
    if (argc == 3 && strcmp(argv[1], "local_driver") == 0)
        return local_driver(argv[2]);
    if (argc == 3 && strcmp(argv[1], "global_driver") == 0)
        return global_driver(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [copy PATH-OF-A-SHIM-COPY | local PATH-OF-LIBCUDAUSER | "
                "local_driver PATH-OF-LIBCUDA | global_driver PATH-OF-LIBCUDA]\n", argv[0]);
        return 2;
    }
    show("next_open_1", dlsym(RTLD_NEXT, "open"));
    show("next_open_2", dlsym(RTLD_NEXT, "open"));
    show("default_cudnnCreate", dlsym(RTLD_DEFAULT, "cudnnCreate"));
    dlerror();
    show("default_no_such_symbol", dlsym(RTLD_DEFAULT, "no_such_symbol"));
    const char *e = dlerror();
    printf("dlerror=%s\n", e ? e : "(none)");
    show("default_malloc", dlsym(RTLD_DEFAULT, "malloc"));
    /* No driver loaded: a probe for a driver function finds nothing, wrapped or not. */
    dlerror();
    show("default_cuMemAlloc_v2", dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    /* and the error to read, as glibc leaves it (a program that builds its message from it) */
    printf("dlerror_cuMemAlloc_v2=%s\n", dlerror() ? "set" : "(none)");
    show("default_cuGetProcAddress_v2", dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2"));
    /* the same from the program with RTLD_NEXT: the next object after it is the preloaded shim */
    dlerror();
    show("next_cuMemAlloc_v2", dlsym(RTLD_NEXT, "cuMemAlloc_v2"));
    printf("dlerror_next_cuMemAlloc_v2=%s\n", dlerror() ? "set" : "(none)");
    show("default_cuInit", dlsym(RTLD_DEFAULT, "cuInit"));
    /* open() through whatever interposers are loaded: must not recurse. */
    int fd = open("/dev/null", O_RDONLY);
    printf("open=%s\n", fd >= 0 ? "ok" : "failed");
    if (fd >= 0)
        close(fd);
    return 0;
}
