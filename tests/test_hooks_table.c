/* Every hooked ABI variant (shim/hooks.h) is a real one: cudaTypedefs.h has
 * PFN_<base>_v<version>[_ptsz|_ptds] for it, and the symbol name follows cuda.h's versioning. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim/hooks.h"

static char *typedefs;

static void load(void)
{
    FILE *f = fopen(CUDA_INCLUDE "/cudaTypedefs.h", "r");
    cr_assert(f, "cudaTypedefs.h");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    typedefs = malloc((size_t)n + 1);
    typedefs[fread(typedefs, 1, (size_t)n, f)] = '\0';
    fclose(f);
}

static int has_pfn(const char *base, int version, int pt)
{
    char name[256];
    const char *sfx[] = {"", "_ptsz", "_ptds"};
    for (int k = pt ? 1 : 0; k < (pt ? 3 : 1); k++) {
        snprintf(name, sizeof name, "PFN_%s_v%d%s)", base, version, sfx[k]);
        if (strstr(typedefs, name))
            return 1;
    }
    return 0;
}

Test(hooks, every_row_is_a_real_abi_variant)
{
    load();
#define CHECK_ROW(sym, base, ver, pt)                                                      \
    cr_expect(has_pfn(#base, ver, pt), "%s: no PFN_%s_v%d%s in cudaTypedefs.h", #sym, #base, \
              ver, pt ? "_pt*" : "");                                                      \
    cr_expect(strncmp(#sym, #base, strlen(#base)) == 0, "%s does not start with %s", #sym, #base);
    SHIM_HOOKS(CHECK_ROW)
    SHIM_REAL_ONLY(CHECK_ROW)
#undef CHECK_ROW
    free(typedefs);
}

/* Door 3 hands a looked-up function to the row of the newest ABI at or below the requested version
 * (shim/door_procaddr.c): a newer ABI of a base name missing from the table would land in an older
 * row's slot, and the shim would call it with the old prototype (cuCtxGetDevice_v2 called as
 * cuCtxGetDevice: a garbage context argument). So every PFN_<base>_v<version>[_ptsz|_ptds] of
 * cudaTypedefs.h newer than a base's oldest row, legacy and per-thread alike, has a row. */
static int has_row(const char *base, int version, int pt)
{
    int found = 0;
#define FIND_ROW(sym, b, ver, p) found |= !strcmp(#b, base) && ver == version && p == pt;
    SHIM_HOOKS(FIND_ROW)
    SHIM_REAL_ONLY(FIND_ROW)
#undef FIND_ROW
    return found;
}

static void expect_no_newer_abi_missing(const char *base, int oldest)
{
    char needle[200];
    snprintf(needle, sizeof needle, "PFN_%s_v", base);
    for (const char *p = strstr(typedefs, needle); p; p = strstr(p + 1, needle)) {
        const char *v = p + strlen(needle);
        char *end;
        long version = strtol(v, &end, 10);
        if (end == v || (*end != ')' && *end != '_'))
            continue;
        int pt = !strncmp(end, "_ptsz)", 6) || !strncmp(end, "_ptds)", 6);
        if (!pt && *end != ')')
            continue;
        if (version >= oldest)
            cr_expect(has_row(base, (int)version, pt), "%s: no row for PFN_%s_v%ld%s, a newer ABI than the "
                      "table's oldest (%d)", base, base, version, pt ? "_pt*" : "", oldest);
    }
}

Test(hooks, no_newer_abi_variant_is_missing)
{
    load();
#define CHECK_BASE(sym, base, ver, pt) expect_no_newer_abi_missing(#base, ver);
    SHIM_HOOKS(CHECK_BASE)
    SHIM_REAL_ONLY(CHECK_BASE)
#undef CHECK_BASE
    free(typedefs);
}
