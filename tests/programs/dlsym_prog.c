/* dlsym_prog: prints what dlsym answers for lookups the shim must not change, so a test can
 * compare runs with and without the shim. Symbols are named by the object that defines them. */
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

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "copy") == 0)
        return through_a_copy(argv[2]);
    if (argc == 3 && strcmp(argv[1], "local") == 0)
        return local_library(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [copy PATH-OF-A-SHIM-COPY | local PATH-OF-LIBCUDAUSER]\n", argv[0]);
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
    show("default_cuInit", dlsym(RTLD_DEFAULT, "cuInit"));
    /* open() through whatever interposers are loaded: must not recurse. */
    int fd = open("/dev/null", O_RDONLY);
    printf("open=%s\n", fd >= 0 ? "ok" : "failed");
    if (fd >= 0)
        close(fd);
    return 0;
}
