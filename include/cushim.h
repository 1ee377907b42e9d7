/* cushim.h: the in-process API of libcushim.so.
 *
 * The shim is preloaded (LD_PRELOAD or `cushim run`), so a program calls these without linking
 * anything: look them up with dlsym(RTLD_DEFAULT, "cushim_...") (or ctypes.CDLL(None) in Python,
 * setting restype: c_char_p for cushim_version, c_uint64 for the two byte functions), or declare
 * them weak (`#pragma weak cushim_set_phase`, then `if (cushim_set_phase) ...`), and treat a
 * missing symbol as "not running under cushim". Linking -lcushim instead makes the shim count
 * whenever the program runs, and the program not start without the library. All functions are
 * thread-safe and make no CUDA call; none may be called from a signal handler. The statistics
 * and the peak reset are lock-free; the phase functions (set, push, pop) take a process-wide
 * lock (ending the compile phase walks the allocation table under it). A child made by fork()
 * starts in CUSHIM_PHASE's phase (run by default) with an empty phase stack, whatever its parent's
 * was. Byte counts are requested bytes. In C++, zero a struct with `{}` (`= {0}` trips
 * -Wmissing-field-initializers).
 *
 * Kinds of memory are those of the summary JSON (docs/SUMMARY-JSON.md); the device total is
 * device + async + vmm + array, and its peak is the peak of the sum.
 */
#ifndef CUSHIM_H
#define CUSHIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUSHIM_STATS_VERSION 6 /* 2: the async_pool fields; 3: untracked_sampled_ns, graph_pool;
                                  4: limit, peak resets, phase peaks; 5: lifetime peak;
                                  6: limit_held_bytes */

enum cushim_public_kind {
    CUSHIM_MEM_DEVICE = 0,       /* cudaMalloc, cudaMallocPitch (cuMemAlloc_v2, cuMemAllocPitch_v2) */
    CUSHIM_MEM_ASYNC,            /* cudaMallocAsync and pools on a device */
    CUSHIM_MEM_VMM,              /* cuMemCreate physical memory on a device */
    CUSHIM_MEM_ARRAY,            /* CUDA arrays */
    CUSHIM_MEM_MANAGED,          /* cudaMallocManaged, managed pools */
    CUSHIM_MEM_PINNED_HOST,      /* cudaMallocHost, cudaHostAlloc, host pools, host cuMemCreate */
    CUSHIM_MEM_REGISTERED_HOST,  /* cudaHostRegister */
    CUSHIM_MEM_IMPORTED,         /* CUDA IPC, shareable handles, pool imports (another process's) */
    CUSHIM_MEM_OFFLOADED,        /* device requests served from pinned host memory */
    CUSHIM_MEM_CAPTURE,          /* allocated while a stream was capturing (also in its own kind) */
    CUSHIM_MEM_KIND_COUNT
};

/* One kind's counters (the summary JSON's per-kind object, docs/SUMMARY-JSON.md "kinds"):
 * bytes are requested bytes, counts are calls. */
struct cushim_kind_stats {
    uint64_t current_bytes;      /* in use now */
    uint64_t peak_bytes;         /* high-water mark since the last reset */
    uint64_t alloc_count;        /* successful allocations */
    uint64_t free_count;         /* frees: explicit, or by the teardown of the allocation's context */
    uint64_t failed_count;       /* allocations refused: by the driver, or over CUSHIM_DEVICE_LIMIT */
    uint64_t spill_count;        /* offloaded only: moved to host by an out-of-memory failure */
};

/* One device's counters in this process, filled by cushim_get_device_stats (the caller owns it;
 * no pointers inside). Versioned: a field exists when version and size say so (each group below
 * says its version); later versions only append. */
struct cushim_device_stats {
    uint32_t size;               /* in: sizeof(struct cushim_device_stats) as the caller knows it */
    uint32_t version;            /* out: CUSHIM_STATS_VERSION */
    int32_t ordinal;             /* out: CUDA device ordinal */
    int32_t uuid_valid;          /* out: 1 when uuid holds cuDeviceGetUuid's bytes */
    uint8_t uuid[16];            /* out: cuDeviceGetUuid_v2's bytes (nvidia-smi's GPU-...) */
    uint64_t total_bytes;        /* cuDeviceTotalMem_v2: the card's memory, bytes */
    uint64_t untracked_bytes;    /* (total - free) - tracked device bytes - graph pool reserve, at the
                                    last sample (untracked_sampled_ns) */
    struct cushim_kind_stats kind[CUSHIM_MEM_KIND_COUNT]; /* indexed by enum cushim_public_kind */
    uint64_t device_total_current_bytes; /* device + async + vmm + array in use, bytes */
    uint64_t device_total_peak_bytes;    /* peak of that sum since the last peak reset, bytes */
    /* Version 2. The device's stream-ordered pools as the driver last reported them
     * (cuMemPoolGetAttribute, summed over the device's pools; read at cudaMemGetInfo, from
     * cudaMallocAsync at most every 100 ms, after cudaMemPoolTrimTo or a high-water-mark reset,
     * and at exit: docs/SUMMARY-JSON.md "async_pool"). The reserve is device memory the pools
     * hold, freed memory kept for reuse included. The _high fields are the highest the sum of the
     * pools' own marks has been read at (never lowered by a reading, so a pool destroyed since is
     * in them: its device's pools are read just before cuMemPoolDestroy, unless a capture is live);
     * the program's reset of a pool's mark (cudaMemPoolSetAttribute) makes the next reading set
     * them as found. */
    uint64_t async_pool_used_current_bytes;
    uint64_t async_pool_used_high_bytes;
    uint64_t async_pool_reserved_current_bytes;
    uint64_t async_pool_reserved_high_bytes;
    uint64_t async_pool_sampled_ns;   /* CLOCK_REALTIME of that read; 0 = never read */
    /* Version 3. When untracked_bytes was sampled (CLOCK_REALTIME ns; 0 = never, it is then 0),
     * and the device's graph memory pool as the driver last reported it
     * (cuDeviceGetGraphMemAttribute; read at graph launches at most every 100 ms, at
     * cudaMemGetInfo, when the program reads it, after cudaDeviceGraphMemTrim and
     * cudaDeviceSetGraphMemAttribute, and at exit). */
    uint64_t untracked_sampled_ns;
    uint64_t graph_pool_used_current_bytes;
    uint64_t graph_pool_used_high_bytes;
    uint64_t graph_pool_reserved_current_bytes;
    uint64_t graph_pool_reserved_high_bytes;
    uint64_t graph_pool_sampled_ns;   /* CLOCK_REALTIME of that read; 0 = never read */
    /* Version 4. The device's budget (CUSHIM_DEVICE_LIMIT, bytes; 0 = none), the peak resets done
     * (cushim_reset_peak, `cushim reset-peak`: how many, and the last one's CLOCK_REALTIME ns; 0 =
     * none: the peaks above are then the whole run's), and the device-total peak reached in each
     * phase (CUSHIM_RUN, CUSHIM_COMPILE; a phase's peak starts at what is in use when it begins;
     * a peak reset restarts the current phase's). The summary JSON's device_total.limit_bytes,
     * peak_reset and phase_peaks (docs/SUMMARY-JSON.md). */
    uint64_t limit_bytes;
    uint64_t peak_reset_count;
    uint64_t peak_reset_last_ns;
    uint64_t run_device_peak_bytes;
    uint64_t compile_device_peak_bytes;
    /* Version 5. The device-total high-water mark over the process's whole life, bytes: a peak
     * reset does not lower it (the true peak of a run that reset its peaks to measure a part of
     * it). The summary JSON's device_total.lifetime_peak_bytes. */
    uint64_t device_total_lifetime_peak_bytes;
    /* Version 6. What the budget counts as held, bytes (0 without a limit): what a request must
     * fit beside under CUSHIM_DEVICE_LIMIT. The device total, plus requests and frees still in
     * their call (a free leaves the device total as it is called, the budget once the driver has
     * freed the memory), the graph memory pool's reserve and the stream-ordered pools' idle reserve
     * (their whole reserve, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT summed, less the stream-ordered
     * bytes requested from them: freed memory a pool keeps below its release threshold, and also
     * the rest of the whole chunks a pool grew by), the reserves as last read; more
     * than device_total_current_bytes by those reserves. The budget reads the reserves again before it
     * next decides and at cudaMemGetInfo (whose free under a limit is then limit_bytes less this,
     * or the device's own free if lower), so between two such calls this may still count a reserve
     * a synchronize, trim or reset has given back. It may pass limit_bytes: a pool grows by whole
     * chunks of the driver's choosing, and a free of stream-ordered memory counts its bytes idle a
     * moment before they leave the budget's used bytes. The summary JSON's
     * device_total.limit_held_bytes. */
    uint64_t limit_held_bytes;
};

/* Copies device `ordinal`'s counters (one consistent snapshot) into *out; out->size must be set.
 * Fields beyond out->size are not written. Returns 0; -1 when the device has no activity in this
 * process (or cushim is disabled); -2 when out is NULL or out->size is too small for the header
 * (below offsetof(struct cushim_device_stats, total_bytes), 32 bytes);
 * -3 when the counters kept changing for 200 ms without a pause to copy them in (threads
 * updating them without a break, e.g. resetting peaks in a loop): try again. After such a -3, a
 * device whose counters are still held as busy (left so by a process killed while it reset them)
 * answers -3 at once, without the wait, until they can be copied again. */
int cushim_get_device_stats(int ordinal, struct cushim_device_stats *out);

/* Device-total current and peak bytes of `ordinal` (0 when unknown, or when the counters were
 * too busy to copy: cushim_get_device_stats says which): the two numbers most callers want, easy
 * to call from ctypes. */
uint64_t cushim_device_current_bytes(int ordinal);
uint64_t cushim_device_peak_bytes(int ordinal);

/* Sets every peak of device `ordinal` (every device when ordinal < 0) to its current value, like
 * torch.cuda.reset_peak_memory_stats: each kind's, the device total's and the peaks of the phase
 * the process is in (the other phase's keep their record).
 * Returns the number of devices reset. The async_pool_* and graph_pool_* high-water marks come
 * from the driver's own (cuMemPoolGetAttribute, cuDeviceGetGraphMemAttribute) and are not reset:
 * the driver resets them only for everyone, the program's own readings included. */
int cushim_reset_peak(int ordinal);

/* Phases (offload policy, CUSHIM_OFFLOAD=compile): allocations made in the compile phase may be
 * served from pinned host memory; the summary keeps each phase's peak. Process-wide. */
#define CUSHIM_RUN 0     /* phase: running (the default) */
#define CUSHIM_COMPILE 1 /* phase: compiling (offload policy) */

/* Sets the process's phase; returns the previous one, or -1 for a bad value or when cushim is
 * disabled (CUSHIM_DISABLE). Works before any CUDA call (the live-stats segment is created then).
 * Ending the compile phase keeps offloaded allocations in host memory (counted as resident). */
int cushim_set_phase(int phase);
/* The current phase, -1 when cushim is disabled. */
int cushim_get_phase(void);
/* Scoped phases: push sets `phase` and remembers the previous one on a stack (one for the
 * process, like the phase; depth 64); pop restores the last one pushed, from any thread. push
 * returns 0 (-1: bad phase, cushim disabled, stack full); pop returns the restored phase (-1:
 * nothing pushed). */
int cushim_push_phase(int phase);
int cushim_pop_phase(void);

/* The library version, e.g. "0.1.0". Static storage. */
const char *cushim_version(void);

#ifdef __cplusplus
}
#endif
#endif
