/* Introspection API of the simulated CUDA driver (tests/sim/driver, exported by libcuda.so.1).
 *
 * Tests and test programs use it to compare cushim's counters with the simulated device's own
 * view. Names start with "simcuda_" so cushim's dlsym door (which only touches cu[A-Z]...) passes
 * them through. All functions are thread-safe; byte counts are requested bytes (pitch x height for
 * pitch allocations), not rounded to SIMCUDA_GRANULARITY unless stated. Programs that are not
 * linked to the simulated libcuda can fetch them with dlsym(dlopen("libcuda.so.1", RTLD_NOW), ...).
 */
#ifndef SIMCUDA_H
#define SIMCUDA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum simcuda_kind {
    SIMCUDA_DEVICE = 0,        /* cuMemAlloc_v2 / cuMemAllocPitch_v2, live */
    SIMCUDA_ASYNC,             /* cuMemAllocAsync / cuMemAllocFromPoolAsync on device pools, live (not capturing) */
    SIMCUDA_VMM,               /* cuMemCreate with a device location, physical bytes alive (handle unreleased or still mapped) */
    SIMCUDA_ARRAY,             /* cuArrayCreate_v2 / cuArray3DCreate_v2 / cuMipmappedArrayCreate texel bytes, live */
    SIMCUDA_MANAGED,           /* cuMemAllocManaged, live */
    SIMCUDA_PINNED_HOST,       /* cuMemHostAlloc / cuMemAllocHost_v2 (and host-located pools), live */
    SIMCUDA_REGISTERED_HOST,   /* cuMemHostRegister_v2, live */
    SIMCUDA_GRAPH_USED,        /* graph memory pool: USED_MEM_CURRENT */
    SIMCUDA_GRAPH_RESERVED,    /* graph memory pool: RESERVED_MEM_CURRENT */
    SIMCUDA_POOL_RESERVED,     /* sum over this device's memory pools of RESERVED_MEM_CURRENT */
    SIMCUDA_KIND_COUNT
} simcuda_kind;

/* Live bytes of one kind on device `ordinal` (host kinds count on the device of the context that
 * made them). 0 for a bad ordinal or kind. */
uint64_t simcuda_live_bytes(int ordinal, simcuda_kind kind);

/* total - free, exactly as cuMemGetInfo_v2 would report it for `ordinal` right now: context
 * overhead of active contexts + every device-resident allocation rounded to SIMCUDA_GRANULARITY
 * + pool and graph reserves. */
uint64_t simcuda_used_bytes(int ordinal);

/* How many times the exported symbol `symbol` (an ABI variant, e.g. "cuMemAllocAsync_ptsz") has
 * been entered, whether reached by its export or through cuGetProcAddress. */
uint64_t simcuda_call_count(const char *symbol);

#ifdef __cplusplus
}
#endif
#endif
