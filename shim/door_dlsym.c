/* Door 2: dlsym (DESIGN.md). dlsym(handle, ...) on libcuda's handle never looks at preloaded
 * libraries, so the shim exports its own dlsym. Only names cu[A-Z]... with a handle other than
 * RTLD_NEXT are touched; everything else, and every RTLD_NEXT lookup, is a tail call to the real
 * dlsym, so glibc still sees the caller's return address (RTLD_NEXT is relative to the caller).
 * A wrapped name's non-NULL answer is the wrapper when the shim calls that function
 * (shim_real_offer), else the function itself. The file also holds the dlclose door.
 * This file is compiled with -O2 -foptimize-sibling-calls whatever the build type (meson.build);
 * tests/test_doors.c checks the RTLD_NEXT behaviour. The work that is not a tail call lives in
 * functions of its own (noinline), so the exported dlsym has no local whose address escapes (GCC
 * makes no tail call from a function that has one). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "shim/shim.h"

static int cmp_symbol(const void *key, const void *elem)
{
    return strcmp((const char *)key, shim_fns[*(const unsigned short *)elem].symbol);
}

/* Rows of SHIM_HOOKS sorted by symbol, built once on first use (dlsym can be called before the
 * shim's constructor, so not there). */
static unsigned short sorted[SHIM_HOOK_COUNT];
static pthread_once_t sorted_once = PTHREAD_ONCE_INIT;

static int cmp_rows(const void *a, const void *b)
{
    return strcmp(shim_fns[*(const unsigned short *)a].symbol,
                  shim_fns[*(const unsigned short *)b].symbol);
}

static void sort_rows(void)
{
    for (unsigned i = 0; i < SHIM_HOOK_COUNT; i++)
        sorted[i] = (unsigned short)i;
    qsort(sorted, SHIM_HOOK_COUNT, sizeof sorted[0], cmp_rows);
}

int shim_hook_by_symbol(const char *symbol)
{
    pthread_once(&sorted_once, sort_rows);
    const unsigned short *row = bsearch(symbol, sorted, SHIM_HOOK_COUNT, sizeof sorted[0], cmp_symbol);
    return row ? *row : -1;
}

/* Whether code addresses a and b are in one loaded object (dladdr). */
static bool shim_same_object(const void *a, const void *b)
{
    Dl_info x, y;
    return dladdr(a, &x) && dladdr(b, &y) && x.dli_fbase == y.dli_fbase;
}

static inline SHIM_EARLY bool is_cu_name(const char *name)
{
    return name && name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
}

/* The door's answer for a non-NULL p, the real function of row `row`: the wrapper when the shim
 * calls p (or another entry point of its library), else p itself (shim_real_offer). The shim's
 * own loader calls leave no error for the program's dlerror(): its lookup succeeded. */
static void *answer(int row, void *p)
{
    void *out = shim_real_offer((enum shim_fn)row, p) ? shim_fns[row].wrapper : p;
    dlerror();
    return out;
}

/* A wrapped name looked up in `handle` (not RTLD_NEXT), from `caller`. */
static SHIM_EARLY __attribute__((noinline)) void *lookup_wrapped(shim_dlsym_fn real, void *handle,
                                                                const char *name, int row,
                                                                const void *caller)
{
    void *p = real(handle, name);
    if (!p)
        return NULL;
    if (p == shim_fns[row].wrapper) {
        /* The shim's own export (RTLD_DEFAULT, or the program's handle, finds it first): only if
         * the driver has the function, as dlsym would answer without the shim; a probe such as
         * dlsym(RTLD_DEFAULT, "cuMemGetMemPool") must not find a function the driver lacks. */
        bool real_there = atomic_load_explicit(&shim_real_slot[row], memory_order_relaxed) != NULL ||
                          shim_real_resolve((enum shim_fn)row) != NULL;
        if (real_there)
            return p;
        /* NULL with dlerror() set, as glibc answers: the lookup again, after the shim (nothing
         * there: the driver has no such function), whose error is the caller's to read (the
         * resolve's dlopen and dlclose cleared the first one). */
        p = real(RTLD_NEXT, name);
        if (!p)
            return NULL;
    }
    /* A driver stub in front (a library whose cu* functions look the driver's up with
     * dlsym(dlopen("libcuda.so.1"), ...) and forward to them) asking for the function the shim
     * already calls as its real one: the stub gets the driver's own, or the wrapper and the stub
     * would call each other for ever. */
    void *slot = atomic_load_explicit(&shim_real_slot[row], memory_order_relaxed);
    if (slot && slot != p && shim_same_object(caller, slot))
        return p;
    return answer(row, p);
}

/* The body of both exported versions; inlined so that each forwards with its own tail call. */
static inline __attribute__((always_inline)) SHIM_EARLY void *dlsym_body(void *handle, const char *name)
{
    shim_dlsym_fn real = shim_real_dlsym();
    if (handle == RTLD_NEXT || !is_cu_name(name) || shim.cfg.disable)
        return real(handle, name); /* tail call: the caller stays the caller */
    /* A name the shim does not wrap: a tail call too. glibc searches RTLD_DEFAULT in the caller's
     * scope (dlsym(3)), and a library loaded with RTLD_LOCAL (a Python extension module) has
     * libcuda in its own scope only: looked up from here it would not be found. */
    int row = shim_hook_by_symbol(name);
    if (row < 0 || !shim_fns[row].wrapper)
        return real(handle, name);
    void *caller = __builtin_return_address(0);
    return lookup_wrapped(real, handle, name, row, caller);
}

/* The dlclose door: after a dlclose that unloaded something, no slot keeps a function of an
 * unloaded library (shim_real_check_unloads): a program that unloads libcuda and loads it again
 * elsewhere, or unloads it before it exits (the exit report asks the driver), would have the
 * shim call unmapped code. Not a tail call: nothing in dlclose depends on its caller. */
SHIM_EXPORT SHIM_EARLY int dlclose(void *handle)
{
    shim_dlclose_fn real = shim_real_dlclose();
    if (!real)
        return -1;
    int r = real(handle);
    if (r == 0)
        shim_real_check_unloads();
    return r;
}

/* dlsym is exported with glibc's versions (dlsym@@GLIBC_2.34 and the architecture's base version,
 * shim/dlsym-*.map): another interposer that looks up "the real dlsym" with dlvsym(RTLD_NEXT,
 * "dlsym", "GLIBC_2.34") then finds the shim, not libc, so the chain goes through both of us. */
void *cushim_dlsym_current(void *handle, const char *name);
void *cushim_dlsym_base(void *handle, const char *name);

SHIM_EXPORT SHIM_EARLY void *cushim_dlsym_current(void *handle, const char *name)
{
    return dlsym_body(handle, name);
}

SHIM_EXPORT SHIM_EARLY void *cushim_dlsym_base(void *handle, const char *name)
{
    return dlsym_body(handle, name);
}

__asm__(".symver cushim_dlsym_current, dlsym@@GLIBC_2.34");
#if defined(__aarch64__)
__asm__(".symver cushim_dlsym_base, dlsym@GLIBC_2.17");
#else
__asm__(".symver cushim_dlsym_base, dlsym@GLIBC_2.2.5");
#endif
