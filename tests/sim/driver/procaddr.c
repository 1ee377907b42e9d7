/* cuGetProcAddress (4 arguments, the 11030 ABI) and cuGetProcAddress_v2 (5 arguments, 12000).
 *
 * cuda.h, cuGetProcAddress: "For a requested driver symbol, if the specified CUDA version is
 * greater than or equal to the CUDA version in which the driver symbol was introduced, this API
 * will return the function pointer to the corresponding versioned function. If the specified
 * CUDA version is greater than the driver version, the API will return CUDA_ERROR_INVALID_VALUE."
 * "The API will return CUDA_SUCCESS and set the returned pfn to NULL if the requested driver
 * function is not supported on the platform, no ABI compatible driver function exists for the
 * specified cudaVersion or if the driver symbol is invalid", with symbolStatus SYMBOL_NOT_FOUND
 * or VERSION_NOT_SUFFICIENT. "CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: ... If a per-thread
 * version is not found, the API will return the legacy version"; DEFAULT and LEGACY_STREAM give
 * the legacy versions (the driver is not compiled for per-thread default streams).
 *
 * "cuGraphInstantiate" requested at 12000 or later is cuGraphInstantiate_v2 (the 11000 ABI, five
 * arguments), as the table gives and as the real driver answered (580.159, CUDA 13.0, an H200:
 * docs/GPU-VALIDATION.md instantiate_lookup, 2026-12-04), although cuda.h has `#define
 * cuGraphInstantiate cuGraphInstantiateWithFlags` since CUDA 12.0; SIMCUDA_INSTANTIATE_LOOKUP=
 * withflags answers cuGraphInstantiateWithFlags (the 11040 ABI) instead, a driver that follows the
 * #define, which the shim must handle too.
 *
 * SIMCUDA_HIDE names are reported as not found (an older driver); SIMCUDA_LOG_LOOKUPS appends
 * every call as "NAME ver=V flags=F" (the empty-name probe as "ver=V flags=F status=P", the
 * format of the reference cudart13-driver-lookups.txt).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procaddr.h"

#define SIM_MAX_HIDDEN 64

static char *hidden[SIM_MAX_HIDDEN];
static unsigned nhidden;
static int log_fd = -1;

void sim_procaddr_load(void)
{
    if (sim_cfg.hide) {
        char *copy = strdup(sim_cfg.hide), *save = NULL;
        for (char *name = strtok_r(copy, ",", &save); name && nhidden < SIM_MAX_HIDDEN;
             name = strtok_r(NULL, ",", &save))
            hidden[nhidden++] = strdup(name);
        free(copy);
    }
    if (sim_cfg.log_lookups) {
        log_fd = open(sim_cfg.log_lookups, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (log_fd < 0)
            perror("simcuda: SIMCUDA_LOG_LOOKUPS");
    }
}

static void log_lookup(const char *symbol, int version, cuuint64_t flags, const void *status)
{
    if (log_fd < 0)
        return;
    char line[512];
    int n = symbol && !*symbol
                ? snprintf(line, sizeof line, "ver=%d flags=%llu status=%p\n", version,
                           (unsigned long long)flags, status)
                : snprintf(line, sizeof line, "%s ver=%d flags=%llu\n", symbol ? symbol : "(null)",
                           version, (unsigned long long)flags);
    if (n > 0 && write(log_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
        perror("simcuda: SIMCUDA_LOG_LOOKUPS");
}

static bool is_hidden(const char *symbol)
{
    for (unsigned i = 0; i < nhidden; i++)
        if (strcmp(hidden[i], symbol) == 0)
            return true;
    return false;
}

/* Newest row of `base` introduced at or before `version` with the given twin (0: legacy). */
static const struct sim_proc *newest(const char *base, int version, int twin, bool *base_known)
{
    const struct sim_proc *best = NULL;
    for (unsigned i = 0; i < sim_proc_count; i++) {
        const struct sim_proc *p = &sim_procs[i];
        if (strcmp(p->base, base) != 0)
            continue;
        *base_known = true;
        if (p->twin == twin && p->version <= version && (!best || p->version > best->version))
            best = p;
    }
    return best;
}

static CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    log_lookup(symbol, version, flags, status);
    if (!symbol || !pfn || version > SIM_DRIVER_VERSION ||
        (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    const char *base = symbol;
    if (strcmp(symbol, "cuGraphInstantiate") == 0 && version >= 12000 && sim_cfg.instantiate_with_flags)
        base = "cuGraphInstantiateWithFlags";
    bool known = false;
    const struct sim_proc *found = is_hidden(symbol) ? NULL : newest(base, version, 0, &known);
    if (found && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
        const struct sim_proc *pt = newest(base, version, found->version, &known);
        if (pt)
            found = pt;
    }
    if (found)
        *pfn = (void *)found->fn;
    if (status)
        *status = found ? CU_GET_PROC_ADDRESS_SUCCESS
                  : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    SIM_ENTER_PREINIT(cuGetProcAddress);
    return lookup(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus)
{
    SIM_ENTER_PREINIT(cuGetProcAddress_v2);
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
