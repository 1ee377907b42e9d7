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
