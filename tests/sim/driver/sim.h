/* Core internals of the simulated CUDA driver (libcuda.so.1): configuration, the entry macro and
 * per-device accounting.
 *
 * Every exported cu* function starts with SIM_ENTER(itself) and is a thin wrapper over static or
 * hidden helpers: the driver never calls its own exported cu* symbols, because a library
 * preloaded in front of it (cushim) intercepts exported symbols. Everything not exported is
 * hidden (-fvisibility=hidden).
 */
#ifndef SIM_H
#define SIM_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

/* The cu* declarations of cuda.h are exported through __CUDA_API_PUSH_VISIBILITY_DEFAULT
 * (meson.build); the introspection API likewise. */
#pragma GCC visibility push(default)
#include "simcuda.h"
#pragma GCC visibility pop
#include "symbols.h"

#define SIM_MAX_DEVICES 16
#define SIM_DRIVER_VERSION 13000 /* cuDriverGetVersion; cuGetProcAddress refuses newer requests */
#define SIM_NO_KIND SIMCUDA_KIND_COUNT

/* The environment (README.md), read once on the first entry into the driver. */
struct sim_config {
    int device_count;                   /* visible devices (CUDA_VISIBLE_DEVICES), ordinals 0.. */
    int physical[SIM_MAX_DEVICES];      /* each visible ordinal's device of SIMCUDA_DEVICE_COUNT */
    uint64_t capacity[SIM_MAX_DEVICES]; /* by visible ordinal */
    char name[256];
    uint64_t ctx_overhead;
    uint64_t granularity;
    uint64_t vmm_granularity;
    bool lazy_events;
    bool instantiate_with_flags; /* SIMCUDA_INSTANTIATE_LOOKUP=withflags: "cuGraphInstantiate" at
                                  * 12000+ answers cuGraphInstantiateWithFlags (cuda.h's #define)
                                  * instead of cuGraphInstantiate_v2 (the real driver's answer) */
    bool strict_copies; /* SIMCUDA_STRICT_COPIES: an explicit copy's "D" side must be device
                         * memory (page-locked host memory refused, as a stricter driver may) */
    bool import_same_handle; /* SIMCUDA_IMPORT_SAME_HANDLE: an import of a live handle's memory
                              * returns that handle, one reference more */
    uint64_t begin_capture_ms; /* SIMCUDA_BEGIN_CAPTURE_MS: a begin returns this long after the
                                  stream is capturing (a driver call that takes time) */
    const char *log_lookups; /* SIMCUDA_LOG_LOOKUPS path, or NULL */
    const char *hide;        /* SIMCUDA_HIDE comma list, or NULL */
    const char *inject;      /* SIMCUDA_INJECT rules, or NULL */
};
extern struct sim_config sim_cfg;

/* Reads the configuration (once, thread-safe); every entry point and simcuda_* calls it. */
void sim_setup(void);
void sim_config_load(void);
void sim_procaddr_load(void);

/* Counts the call of `sym`, applies SIMCUDA_INJECT and, when `needs_init`, refuses calls made
 * before cuInit succeeded. Returns true with *rc set when the entry point must return *rc. */
bool sim_enter(enum sim_sym sym, bool needs_init, CUresult *rc);
void sim_set_initialized(void);

/* The common case inline (set up, no injection rules, initialized): count the call and go on.
 * A real driver's entry costs little; cushim's benchmarks count the instructions of every
 * driver call the shim adds, so the simulator should not inflate them. */
extern _Atomic uint64_t sim_calls[];
extern atomic_bool sim_fast_entry; /* set up, no SIMCUDA_INJECT rules, cuInit done */

#define SIM_ENTER_(sym, needs_init)                                                    \
    do {                                                                               \
        CUresult sim_enter_rc_;                                                        \
        if (__builtin_expect(atomic_load_explicit(&sim_fast_entry, memory_order_acquire), 1)) \
            atomic_fetch_add_explicit(&sim_calls[SIM_SYM_##sym], 1, memory_order_relaxed); \
        else if (sim_enter(SIM_SYM_##sym, needs_init, &sim_enter_rc_))                 \
            return sim_enter_rc_;                                                      \
    } while (0)
/* "If cuInit() has not been called, any function from the driver API will return
 * CUDA_ERROR_NOT_INITIALIZED" (cuda.h, cuInit). */
#define SIM_ENTER(sym) SIM_ENTER_(sym, true)
/* cuInit, cuDriverGetVersion, cuGetProcAddress(_v2), cuGetErrorString/Name work before cuInit. */
#define SIM_ENTER_PREINIT(sym) SIM_ENTER_(sym, false)

/* Error names and strings generated from cuda.h (errors_table.py). */
struct sim_error_row {
    int value;
    const char *name;
    const char *text;
};
extern const struct sim_error_row sim_error_rows[];
extern const unsigned sim_error_row_count;
bool sim_error_by_name(const char *name, CUresult *code);

/* Accounting (account.c). bytes: requested bytes added to simcuda_live_bytes(dev, kind)
 * (kind SIM_NO_KIND: none). charge: bytes added to the device's used memory (what
 * cuMemGetInfo_v2 reports as total - free); a positive charge that does not fit in the
 * capacity fails with CUDA_ERROR_OUT_OF_MEMORY and changes nothing. */
CUresult sim_account(int dev, simcuda_kind kind, int64_t bytes, int64_t charge);
uint64_t sim_round(uint64_t bytes); /* up to SIMCUDA_GRANULARITY */
uint64_t sim_round_to(uint64_t bytes, uint64_t unit); /* UINT64_MAX where the round-up wraps */
bool sim_device_valid(CUdevice dev);
/* The device named by the memfd behind descriptor fd, made by the simulator as
 * "<prefix>-dev<N>" (N) or "<prefix>-host" (-1); -2 for anything else (vmm.c). Exported handles
 * (VMM handles, pools) are such memfds, so that an importer knows their device. */
int sim_memfd_device(int fd, const char *prefix);
uint64_t sim_device_used(int dev);

/* A process-wide monotonic counter ordering enqueued work and synchronizations. */
uint64_t sim_epoch_next(void);

#endif
