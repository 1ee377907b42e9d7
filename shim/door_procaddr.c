/* Door 3: cuGetProcAddress / cuGetProcAddress_v2 (DESIGN.md). The real lookup runs first and its
 * result is returned unchanged unless the shim wraps that ABI variant: the variant is chosen from
 * (base name, requested version, flags) by the same rule as cuda.h's doc of cuGetProcAddress
 * ("the newest version <= the requested one; per-thread variants with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, else legacy"), never a newer ABI than asked. */
#include <string.h>

#include "shim/shim.h"

/* Row for (base, version, flags) among all rows (hooks and real-only), or -1. */
static int select_row(const char *base, int version, cuuint64_t flags)
{
    int per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    int best = -1;
    for (int i = 0; i < SHIM_FN_COUNT; i++) {
        const struct shim_fn_info *f = &shim_fns[i];
        if (f->version > version || (f->pt && !per_thread) || strcmp(f->base, base) != 0)
            continue;
        if (best < 0 || f->version > shim_fns[best].version ||
            (f->version == shim_fns[best].version && f->pt))
            best = i;
    }
    return best;
}

/* The real driver's function at (name, version): NULL when it has none. */
static void *real_lookup(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
        REAL(cuGetProcAddress_v2);
    if (!gpa || gpa(name, &fn, version, flags, NULL) != CUDA_SUCCESS)
        return NULL;
    return fn;
}

/* The one name whose ABI changed without a version suffix: cuda.h has
 * `#define cuGraphInstantiate cuGraphInstantiateWithFlags` since CUDA 12.0, so a lookup of
 * "cuGraphInstantiate" at 12000 or later may answer the three-argument cuGraphInstantiateWithFlags
 * (cudaTypedefs.h PFN_cuGraphInstantiateWithFlags_v11040) where the rule above picks the
 * five-argument cuGraphInstantiate_v2 (PFN_cuGraphInstantiate_v11000); the H200's driver 580.159
 * answered v2 (docs/GPU-VALIDATION.md instantiate_lookup). The driver's answer decides: whichever
 * of the two it is, by identity; neither: -1, passed through. */
static int instantiate_row(int version, cuuint64_t flags, void *real_fn)
{
    if (real_fn == real_lookup("cuGraphInstantiateWithFlags", 11040, flags))
        return SHIM_FN_cuGraphInstantiateWithFlags;
    if (real_fn == real_lookup("cuGraphInstantiate", 11000, flags))
        return SHIM_FN_cuGraphInstantiate_v2;
    LOG_ONCE(CUSHIM_LOG_WARN, "cuGraphInstantiate at version %d is neither cuGraphInstantiate_v2 nor "
             "cuGraphInstantiateWithFlags: passed through uncounted", version);
    return -1;
}

void *shim_wrap_proc(const char *base, int version, cuuint64_t flags, void *real_fn)
{
    if (!base || !real_fn || shim.cfg.disable)
        return real_fn;
    int row = version >= 12000 && strcmp(base, "cuGraphInstantiate") == 0
                  ? instantiate_row(version, flags, real_fn)
                  : select_row(base, version, flags);
    if (row < 0)
        return real_fn;
    /* The newest version whose ABI of this name the shim knows: its headers', or the row's own
     * when the row was declared beyond them (hooks.h SHIM_HOOKS_CUDA123 with older headers). */
    int known = shim_fns[row].version > CUDA_VERSION ? shim_fns[row].version : CUDA_VERSION;
    if (version > known) {
        /* A driver newer than that may know a newer ABI of this name: wrap only if it returns
         * the same function at the newest version we know. */
        if (real_lookup(base, known, flags) != real_fn) {
            LOG_ONCE(CUSHIM_LOG_WARN, "%s at version %d may have an ABI newer than cushim's "
                     "headers (%d): passed through uncounted", base, version, known);
            return real_fn;
        }
    }
    if (real_fn == shim_fns[row].wrapper)
        return real_fn;
    /* A function of a library other than the one the shim calls (a stub's, a second driver's) is
     * handed out as it is. */
    if (!shim_real_offer((enum shim_fn)row, real_fn))
        return real_fn;
    return shim_fns[row].wrapper ? shim_fns[row].wrapper : real_fn;
}

SHIM_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                                 cuuint64_t flags,
                                                 CUdriverProcAddressQueryResult *symbolStatus)
{
    __typeof__(&cuGetProcAddress_v2) real = REAL(cuGetProcAddress_v2);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn && symbol)
        *pfn = shim_wrap_proc(symbol, cudaVersion, flags, *pfn);
    return r;
}

SHIM_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                              cuuint64_t flags)
{
    __typeof__(&cuGetProcAddress) real = REAL(cuGetProcAddress);
    if (!real)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn && symbol)
        *pfn = shim_wrap_proc(symbol, cudaVersion, flags, *pfn);
    return r;
}
