/* libinterposer.so: another preloaded library that wraps dlsym the way HAMi-core does, plus
 * open() through dlsym(RTLD_NEXT, ...), to test cushim in front of and behind it. It counts the
 * cuMemAlloc_v2 calls that pass through it and prints the count at exit. */
#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

typedef void *(*dlsym_fn)(void *, const char *);
typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);

static dlsym_fn real_dlsym;
static gpa_fn real_gpa;
static alloc_fn real_alloc;
static atomic_long allocs;

static dlsym_fn get_real_dlsym(void)
{
    if (!real_dlsym)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym)
        real_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return real_dlsym;
}

static CUresult my_alloc(CUdeviceptr *p, size_t n)
{
    atomic_fetch_add(&allocs, 1);
    return real_alloc(p, n);
}

static CUresult my_gpa(const char *sym, void **pfn, int ver, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *st)
{
    CUresult r = real_gpa(sym, pfn, ver, flags, st);
    if (r == CUDA_SUCCESS && pfn && *pfn && strcmp(sym, "cuMemAlloc") == 0 && ver >= 3020) {
        real_alloc = (alloc_fn)*pfn;
        *pfn = (void *)my_alloc;
    }
    return r;
}

void *dlsym(void *handle, const char *name)
{
    void *p = get_real_dlsym()(handle, name);
    if (p && handle != RTLD_NEXT && strcmp(name, "cuGetProcAddress_v2") == 0) {
        real_gpa = (gpa_fn)p;
        return (void *)my_gpa;
    }
    return p;
}

typedef int (*open_fn)(const char *, int, ...);

int open(const char *path, int flags, ...)
{
    static open_fn next;
    mode_t mode = 0;
    va_list ap;
    va_start(ap, flags);
    if (flags & O_CREAT)
        mode = (mode_t)va_arg(ap, int);
    va_end(ap);
    if (!next)
        next = (open_fn)dlsym(RTLD_NEXT, "open");
    return next(path, flags, mode);
}

__attribute__((destructor)) static void report(void)
{
    if (atomic_load(&allocs))
        fprintf(stdout, "interposer.allocs=%ld\n", atomic_load(&allocs));
}
