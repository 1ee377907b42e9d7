/* Real driver entry points: one slot per row of hooks.h, filled by whichever door sees the real
 * function first (dlsym, cuGetProcAddress), else resolved lazily here. */
#include <dlfcn.h>
#include <stddef.h>

#include "shim/shim.h"

const struct shim_fn_info shim_fns[SHIM_FN_COUNT] = {
#define SHIM_X_HOOK(sym, base, ver, pt) [SHIM_FN_##sym] = {#sym, #base, ver, pt, (void *)&sym},
#define SHIM_X_REAL(sym, base, ver, pt) [SHIM_FN_##sym] = {#sym, #base, ver, pt, NULL},
    SHIM_HOOKS(SHIM_X_HOOK) SHIM_REAL_ONLY(SHIM_X_REAL)
#undef SHIM_X_HOOK
#undef SHIM_X_REAL
};

_Atomic(void *) shim_real_slot[SHIM_FN_COUNT];

static _Atomic(shim_dlsym_fn) next_dlsym;

SHIM_EARLY shim_dlsym_fn shim_real_dlsym(void)
{
    shim_dlsym_fn f = atomic_load_explicit(&next_dlsym, memory_order_acquire);
    if (likely(f != NULL))
        return f;
    /* DESIGN.md: never the plain dlsym (that is the shim itself): libc's by version first... */
    shim_dlsym_fn libc = (shim_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
#if defined(__x86_64__)
    if (!libc)
        libc = (shim_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
#elif defined(__aarch64__)
    if (!libc)
        libc = (shim_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.17");
#endif
    /* ...then, through it, the next dlsym after the shim without a version: another interposer
     * behind us that wraps dlsym unversioned (dlvsym would skip it) stays in the chain. */
    f = libc ? (shim_dlsym_fn)libc(RTLD_NEXT, "dlsym") : NULL;
    if (!f)
        f = libc;
    atomic_store_explicit(&next_dlsym, f, memory_order_release);
    return f;
}

void shim_real_offer(enum shim_fn id, void *p)
{
    void *expected = NULL;
    if (!p || p == shim_fns[id].wrapper)
        return;
    atomic_compare_exchange_strong_explicit(&shim_real_slot[id], &expected, p,
                                            memory_order_relaxed, memory_order_relaxed);
}

void *shim_real_resolve(enum shim_fn id)
{
    shim_dlsym_fn sym = shim_real_dlsym();
    void *p = NULL;
    if (!sym)
        return NULL;
    /* The next definition after the shim (another interposer behind us, or libcuda when it is in
     * the global scope), else libcuda's own, loaded by the runtime with RTLD_LOCAL. */
    p = sym(RTLD_NEXT, shim_fns[id].symbol);
    if (!p || p == shim_fns[id].wrapper) {
        void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        p = h ? sym(h, shim_fns[id].symbol) : NULL;
        if (h)
            dlclose(h);
    }
    if (!p || p == shim_fns[id].wrapper) {
        LOG_ONCE(CUSHIM_LOG_DEBUG, "driver has no %s", shim_fns[id].symbol);
        return NULL;
    }
    shim_real_offer(id, p);
    return atomic_load_explicit(&shim_real_slot[id], memory_order_relaxed);
}
