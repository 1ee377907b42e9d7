/* libfailmmap.so: preloaded beside the shim to test its out-of-memory paths. Anonymous mmap()
 * calls made from the library named by $FAIL_MMAP_LIB (compared by file name, without the
 * directory) succeed $FAIL_MMAP_AFTER times (default 0), then fail with ENOMEM; every other
 * mmap() is passed on. The shim takes the memory for its tables from such mappings (shim/arena.c), never
 * from malloc, so this is how its tables run out of memory while the program's do not. At exit
 * it prints `failmmap.refused=N` (mappings refused) on stdout. */
#ifndef _GNU_SOURCE /* meson.build passes -D_GNU_SOURCE to the whole project */
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

static _Atomic long allowed_left = -1; /* -1: not read yet */
static _Atomic long refused;

static const char *base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static __attribute__((destructor)) void say_refused(void)
{
    printf("failmmap.refused=%ld\n", atomic_load(&refused));
    fflush(stdout);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static _Atomic(mmap_fn) real;
    mmap_fn r = atomic_load(&real);
    if (!r) {
        r = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
        atomic_store(&real, r);
    }
    const char *lib = getenv("FAIL_MMAP_LIB");
    Dl_info info;
    if ((flags & MAP_ANONYMOUS) && lib && dladdr(__builtin_return_address(0), &info) &&
        info.dli_fname && strcmp(base(info.dli_fname), base(lib)) == 0) {
        long left = atomic_load(&allowed_left);
        if (left < 0) {
            const char *after = getenv("FAIL_MMAP_AFTER");
            long n = after ? strtol(after, NULL, 10) : 0;
            long unset = -1;
            atomic_compare_exchange_strong(&allowed_left, &unset, n < 0 ? 0 : n);
        }
        while ((left = atomic_load(&allowed_left)) > 0)
            if (atomic_compare_exchange_weak(&allowed_left, &left, left - 1))
                return r(addr, len, prot, flags, fd, off);
        atomic_fetch_add(&refused, 1);
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return r(addr, len, prot, flags, fd, off);
}
