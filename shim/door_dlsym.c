/* Door 2: dlsym (DESIGN.md). dlsym(handle, ...) on libcuda's handle never looks at preloaded
 * libraries, so the shim exports its own dlsym. Only names cu[A-Z]... that the shim wraps are
 * touched; everything else is a tail call to the real dlsym, so glibc still sees the caller's
 * return address (RTLD_NEXT is relative to the caller), and so is an RTLD_NEXT lookup of a wrapped
 * name unless glibc would answer it with the shim's own export. A wrapped name's answer is NULL
 * exactly when it would be NULL without the shim; a non-NULL one is the wrapper when the shim
 * calls that function (shim_real_offer), else the function itself. The file also holds the
 * dlclose and dlopen doors.
 * This file is compiled with -O2 -foptimize-sibling-calls whatever the build type (meson.build);
 * tests/test_doors.c checks the RTLD_NEXT behaviour. The work that is not a tail call lives in
 * functions of its own (noinline), so the exported dlsym has no local whose address escapes (GCC
 * makes no tail call from a function that has one). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <link.h>

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

/* Whether the loaded object described by `info` holds address a (one of its PT_LOAD segments). */
static bool object_holds(const struct dl_phdr_info *info, const void *a)
{
    uintptr_t x = (uintptr_t)a;
    for (int k = 0; k < info->dlpi_phnum; k++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && x >= start && x - start < ph->p_memsz)
            return true;
    }
    return false;
}

/* The objects loaded between a caller and the shim, in the loader's order: an address in each
 * (its first loaded segment), BETWEEN_MAX at a time, from the `skip`th on (more, any number of
 * preloads, are taken in further passes). */
#define BETWEEN_MAX 32
struct between {
    const void *caller, *self;
    bool caller_seen, self_seen;
    unsigned skip, seen, n;
    const void *in[BETWEEN_MAX];
};

static int collect_between(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct between *b = data;
    if (object_holds(info, b->self)) {
        b->self_seen = true;
        return 1;
    }
    if (b->caller_seen) {
        if (b->seen++ < b->skip || b->n >= BETWEEN_MAX)
            return 0;
        for (int k = 0; k < info->dlpi_phnum; k++)
            if (info->dlpi_phdr[k].p_type == PT_LOAD) {
                b->in[b->n++] = (const void *)(info->dlpi_addr + info->dlpi_phdr[k].p_vaddr);
                break;
            }
    } else if (object_holds(info, b->caller)) {
        b->caller_seen = true;
    }
    return 0;
}

/* Whether glibc answers dlsym(RTLD_NEXT, name) from `caller` with the shim's own export: the
 * caller's object comes before the shim (the program, an interposer preloaded in front of it) and
 * no object between them defines name. Objects are taken in the loader's order
 * (dl_iterate_phdr, under the shim's fork-safe lock: shim_iterate_phdr), which is the order of
 * the global scope for the program and its preloads. */
static SHIM_EARLY __attribute__((noinline)) bool next_is_shim(const void *caller, const char *name)
{
    for (unsigned skip = 0;; skip += BETWEEN_MAX) {
        struct between b = {.caller = caller, .self = (const void *)&next_is_shim, .skip = skip};
        shim_iterate_phdr(collect_between, &b);
        if (!b.caller_seen || !b.self_seen)
            return false;
        for (unsigned k = 0; k < b.n; k++)
            if (shim_own_definition(b.in[k], name))
                return false;
        if (b.seen <= skip + BETWEEN_MAX)
            return true;
    }
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

/* dlsym(RTLD_NEXT, name) from a caller that glibc would answer with the shim's export: the
 * lookup goes on after the shim, as it would without it (NULL with dlerror() set when nothing
 * after the shim has the function, e.g. no libcuda in the global scope). */
static SHIM_EARLY __attribute__((noinline)) void *next_after_shim(shim_dlsym_fn real, int row,
                                                                 const char *name)
{
    void *p = real(RTLD_NEXT, name); /* from here: the objects after the shim */
    return p ? answer(row, p) : NULL;
}

/* RTLD_DEFAULT from a library loaded with RTLD_LOCAL searches its own scope after the global one
 * (dlsym(3)): name in the caller's object and its dependencies, or NULL (and for the program
 * itself, whose scope is the global one). */
static void *caller_scope(shim_dlsym_fn real, const void *caller, int row, const char *name)
{
    Dl_info i;
    struct link_map *lm = NULL;
    if (!caller || !dladdr1(caller, &i, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_prev ||
        !i.dli_fname || !i.dli_fname[0])
        return NULL;
    void *h = dlopen(i.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *p = real(h, name);
    shim_close_own(h);
    return p == shim_fns[row].wrapper ? NULL : p;
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
        /* The shim's own export (RTLD_DEFAULT, or the program's handle, finds it first): what the
         * search finds after the shim is the answer, as dlsym gives it without the shim. For
         * RTLD_DEFAULT the global scope after the shim, then the caller's own scope (libcuda
         * loaded RTLD_LOCAL, as the runtime loads it, is found from a library that links it and
         * not from the program); a probe such as dlsym(RTLD_DEFAULT, "cuMemGetMemPool") must not
         * find a function the driver lacks. */
        p = real(RTLD_NEXT, name);
        if (!p && handle == RTLD_DEFAULT && (p = caller_scope(real, caller, row, name)) == NULL)
            p = real(RTLD_NEXT, name); /* NULL again, its error the caller's to read */
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
    /* A copy of the shim that stands aside (shim_aside) passes lookups through too: the copy that
     * counts may reach it as its next dlsym, and its wrappers' addresses are that copy's. */
    if (!is_cu_name(name) || shim.cfg.disable || shim_aside)
        return real(handle, name); /* tail call: the caller stays the caller */
    /* A name the shim does not wrap: a tail call too. glibc searches RTLD_DEFAULT in the caller's
     * scope (dlsym(3)), and a library loaded with RTLD_LOCAL (a Python extension module) has
     * libcuda in its own scope only: looked up from here it would not be found. */
    int row = shim_hook_by_symbol(name);
    if (row < 0 || !shim_fns[row].wrapper)
        return real(handle, name);
    void *caller = __builtin_return_address(0);
    if (handle == RTLD_NEXT) {
        /* Relative to the caller: a tail call, unless glibc would answer the shim's own export
         * (the program asking with no libcuda in the global scope got a wrapper that returned
         * CUDA_ERROR_NOT_INITIALIZED, where dlsym says NULL without the shim). */
        if (!next_is_shim(caller, name))
            return real(handle, name);
        return next_after_shim(real, row, name);
    }
    return lookup_wrapped(real, handle, name, row, caller);
}

/* The dlclose door: after a dlclose that unloaded something, no slot keeps a function of an
 * unloaded library (shim_real_check_unloads, which first asks, in one dl_iterate_phdr step,
 * whether anything was unloaded since it last looked): a program that unloads libcuda and loads
 * it again elsewhere, or unloads it before it exits (the exit report asks the driver), would have
 * the shim call unmapped code. Not a tail call: nothing in dlclose depends on its caller.
 * Exported with glibc's versions, as dlsym is (below): dlvsym(RTLD_DEFAULT, "dlclose",
 * "GLIBC_2.34") finds the door too. */
static inline __attribute__((always_inline)) SHIM_EARLY int dlclose_body(void *handle)
{
    shim_dlclose_fn real = shim_real_dlclose();
    if (!real)
        return -1;
    int r = real(handle);
    if (r == 0)
        shim_real_check_unloads();
    return r;
}

int cushim_dlclose_current(void *handle);
int cushim_dlclose_base(void *handle);

SHIM_EXPORT SHIM_EARLY int cushim_dlclose_current(void *handle)
{
    return dlclose_body(handle);
}

SHIM_EXPORT SHIM_EARLY int cushim_dlclose_base(void *handle)
{
    return dlclose_body(handle);
}

__asm__(".symver cushim_dlclose_current, dlclose@@GLIBC_2.34");
#if defined(__aarch64__)
__asm__(".symver cushim_dlclose_base, dlclose@GLIBC_2.17");
#else
__asm__(".symver cushim_dlclose_base, dlclose@GLIBC_2.2.5");
#endif

static bool is_cuda_lib(const char *base)
{
    return strncmp(base, "libcudart.so", 12) == 0 || strncmp(base, "libcuda.so", 10) == 0;
}

/* The dlopen door (DESIGN.md, known holes): an object loaded with RTLD_DEEPBIND binds its own
 * references to the libraries it depends on before the global scope, so the CUDA runtime loaded
 * that way finds glibc's dlsym instead of the door, gets the driver's own cuGetProcAddress, and
 * nothing it allocates is counted (the run says it saw no CUDA activity). The flag is cleared for
 * the runtime and the driver themselves (libcudart.so*, libcuda.so*, by file name), whose
 * references are glibc's functions and CUDA's own: nothing else in them binds differently. Any
 * other object keeps its flag, and the runtime it brings in with it is not counted (README,
 * Limits): loading it first from where ld.so would find it for that object cannot be done
 * faithfully from here (the caller's RPATHs, ld.so --library-path, hwcaps directories), and a
 * runtime so loaded outlives a failed or closed load of the object, so a later library of the same
 * soname would get it. Forwarded with a tail call: glibc's dlopen searches the caller's
 * RUNPATH. */
static SHIM_EARLY __attribute__((noinline)) int dlopen_mode(const char *file, int mode)
{
    if (!(mode & RTLD_DEEPBIND) || !file || shim.cfg.disable || shim_aside)
        return mode;
    const char *base = strrchr(file, '/');
    return is_cuda_lib(base ? base + 1 : file) ? mode & ~RTLD_DEEPBIND : mode;
}

static inline __attribute__((always_inline)) SHIM_EARLY void *dlopen_body(const char *file, int mode)
{
    shim_dlopen_fn real = shim_real_dlopen();
    if (!real)
        return NULL;
    return real(file, dlopen_mode(file, mode)); /* tail call: the caller stays the caller */
}

void *cushim_dlopen_current(const char *file, int mode);
void *cushim_dlopen_base(const char *file, int mode);

SHIM_EXPORT SHIM_EARLY void *cushim_dlopen_current(const char *file, int mode)
{
    return dlopen_body(file, mode);
}

SHIM_EXPORT SHIM_EARLY void *cushim_dlopen_base(const char *file, int mode)
{
    return dlopen_body(file, mode);
}

__asm__(".symver cushim_dlopen_current, dlopen@@GLIBC_2.34");
#if defined(__aarch64__)
__asm__(".symver cushim_dlopen_base, dlopen@GLIBC_2.17");
#else
__asm__(".symver cushim_dlopen_base, dlopen@GLIBC_2.2.5");
#endif

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
