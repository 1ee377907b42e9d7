/* Internal interface shared by the shim's files (not installed).
 *
 * The shim is compiled with __CUDA_API_VERSION_INTERNAL so cuda.h declares every ABI variant
 * (cuMemAlloc_v2, cuMemAllocAsync_ptsz, cuDevicePrimaryCtxReset, ...) with its real prototype;
 * each wrapper is defined with exactly that prototype.
 */
#ifndef CUSHIM_SHIM_H
#define CUSHIM_SHIM_H

#include <cuda.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/config.h"
#include "common/segment.h"
#include "shim/hooks.h"
#include "shim/log.h"
#include "shim/table.h"
#include "shim/visibility.h"


/* Nanoseconds on `clock` (CLOCK_REALTIME for times shown to people, a monotonic one for rates). */
static inline uint64_t shim_clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* A short spin lock for cold writers (a few stores under it, never a driver call, no I/O):
 * takes `lock` (acquire), spinning while another thread holds it; shim_spin_drop releases it.
 * Thread-safe; not reentrant. A forked child whose parent held one clears it (atomic_flag_clear). */
static inline void shim_spin_take(atomic_flag *lock)
{
    while (atomic_flag_test_and_set_explicit(lock, memory_order_acquire))
        ;
}

static inline void shim_spin_drop(atomic_flag *lock)
{
    atomic_flag_clear_explicit(lock, memory_order_release);
}

#define SHIM_TLS __attribute__((tls_model("initial-exec"))) _Thread_local
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- driver entry points (real.c) ---- */
enum shim_fn {
#define SHIM_X_ENUM(sym, base, ver, pt) SHIM_FN_##sym,
    SHIM_HOOKS(SHIM_X_ENUM) SHIM_REAL_ONLY(SHIM_X_ENUM)
#undef SHIM_X_ENUM
    SHIM_FN_COUNT
};
#define SHIM_HOOK_COUNT SHIM_FN_cuCtxGetCurrent /* first SHIM_REAL_ONLY row */

struct shim_fn_info {
    const char *symbol;   /* exported ABI variant, e.g. "cuMemAllocAsync_ptsz" */
    const char *base;     /* cuGetProcAddress name, e.g. "cuMemAllocAsync" */
    int version;          /* CUDA version that introduced this ABI */
    int pt;               /* 1: per-thread default-stream variant */
    void *wrapper;        /* the shim's function, NULL for SHIM_REAL_ONLY rows */
};
extern SHIM_HIDDEN const struct shim_fn_info shim_fns[SHIM_FN_COUNT];
extern SHIM_HIDDEN _Atomic(void *) shim_real_slot[SHIM_FN_COUNT];

/* The real driver function of row `id`: from the slot, else resolved now (RTLD_NEXT from the
 * shim, then the driver a door last bound, then libcuda.so.1's handle). NULL if the driver lacks
 * it. Thread-safe. A slot, once set, always holds a function of a loaded object: it changes only
 * from one callable function to another (real.c), or to NULL when its object was unloaded and no
 * loaded one has the function (the next use resolves it again). */
void *shim_real_resolve(enum shim_fn id);
static inline void *shim_real(enum shim_fn id)
{
    void *p = atomic_load_explicit(&shim_real_slot[id], memory_order_relaxed);
    return likely(p != NULL) ? p : shim_real_resolve(id);
}
/* Typed real pointer: REAL(cuMemAlloc_v2)(dptr, size). */
#define REAL(sym) ((__typeof__(&sym))shim_real(SHIM_FN_##sym))

/* Declares `real_`, the real function of `sym`; returns CUDA_ERROR_NOT_INITIALIZED from the
 * wrapper when the driver lacks it (DESIGN.md: never call a NULL real pointer). */
#define REAL_OR_FAIL(sym)                      \
    __typeof__(&sym) real_ = REAL(sym);        \
    if (unlikely(real_ == NULL))               \
        return CUDA_ERROR_NOT_INITIALIZED

/* A door found p, a real function of row id. True when the door hands out the wrapper: the slot
 * now holds p, or keeps a function that serves for it (another entry point of p's library, an
 * interposer's hook in a chain to it). False when the door hands out p as it is, uncounted: a
 * stub library's, a second library's while the slot's is still loaded, the shim's own wrapper.
 * The slot moves to p when its function's library was unloaded, or is a true stub (its
 * cuDriverGetVersion fails) and p's is not: real.c. Thread-safe; makes loader calls (never on the hot
 * paths). */
bool shim_real_offer(enum shim_fn id, void *p);

/* After something was unloaded since the last check (dlclose, anywhere in the process): every
 * slot whose function's object is gone is looked up again, or emptied. Cheap when nothing was
 * unloaded (one dl_iterate_phdr step). */
void shim_real_check_unloads(void);

/* dlclose of a handle the shim opened itself (dlopen RTLD_NOLOAD: it only counts a reference and
 * unloads nothing), past the shim's own dlclose door. NULL is ignored. real.c. */
void shim_close_own(void *h);
/* The function `name` as the loaded object that holds code address `in` defines it itself (not
 * one of its dependencies'), or NULL (no such definition, no loaded object holds `in`, or it is
 * the main program, which has no name to open). Loader calls (dladdr, dlopen RTLD_NOLOAD, dlsym);
 * never on a hot path. real.c. */
void *shim_own_definition(const void *in, const char *name);

/* dl_iterate_phdr under the shim's lock that fork waits for (real.c): the shim's every call of it
 * goes through here, so a forked child never starts with the loader's lock held by the shim.
 * Returns dl_iterate_phdr's result (dl_iterate_phdr(3)): the last value cb returned (nonzero
 * stops the walk), 0 when cb always returned 0. Thread-safe; cb runs under that lock (a plain
 * mutex, not recursive) and must not call shim_iterate_phdr itself. */
struct dl_phdr_info;
int shim_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *), void *data);
/* The fork handlers of the shim's loader and slot locks registered (once; the constructor, and
 * every first use before it). */
void shim_real_fork_setup(void);

/* The next dlsym after the shim: another interposer's, else libc's (real.c). */
typedef void *(*shim_dlsym_fn)(void *, const char *);
/* This copy of the shim stands aside for another loaded before it (init.c another_copy_first):
 * it passes CUDA calls through and forwards the cushim.h API to that copy (api.c). Set once at
 * load. */
extern SHIM_HIDDEN bool shim_aside;
/* NULL when not even libc's dlsym can be found (dlvsym by version fails); callers check. A
 * non-NULL answer is kept for the process's life; NULL is asked again at the next call.
 * Thread-safe. */
shim_dlsym_fn shim_real_dlsym(void);
/* The next dlclose after the shim's own (door_dlsym.c): another interposer's, else libc's. */
typedef int (*shim_dlclose_fn)(void *);
shim_dlclose_fn shim_real_dlclose(void);
/* The next dlopen after the shim's own (door_dlsym.c): another interposer's, else libc's. */
typedef void *(*shim_dlopen_fn)(const char *, int);
shim_dlopen_fn shim_real_dlopen(void);

/* ---- doors (door_dlsym.c, door_procaddr.c) ---- */
/* Row of the wrapped export named `symbol`, or -1. */
int shim_hook_by_symbol(const char *symbol);
/* The pointer to hand out for a cuGetProcAddress result `real_fn` of (base, version, flags):
 * the shim's wrapper when it counts that ABI of `base` and shim_real_offer takes real_fn; else
 * real_fn itself, uncounted (NULL base or real_fn, CUSHIM_DISABLE, a name or ABI the shim does
 * not wrap, a version above the headers' CUDA_VERSION whose function differs from the one at
 * CUDA_VERSION, a function of another library: door_procaddr.c). Never NULL unless real_fn is.
 * Thread-safe; loader and driver calls (cuGetProcAddress) on the rare paths. */
void *shim_wrap_proc(const char *base, int version, cuuint64_t flags, void *real_fn);

/* ---- state (init.c) ---- */
/* SHIM_QUIET: started by the in-process API before any CUDA call counted anything; the exit
 * handler is registered at the first counting CUDA call (so it runs before the runtime's own
 * teardown, registered at its initialisation), else an ELF destructor reports at the very end. */
enum shim_run_state { SHIM_IDLE = 0, SHIM_STARTING, SHIM_ACTIVE, SHIM_OFF, SHIM_QUIET };

/* The shim's one state (init.c). cfg and run_id are set once at load (shim_ensure_loaded) and
 * read-only after; top also, except that a forked child clears it. seg, owner and seg_path are
 * set once by the start (shim_start_slow, before run is published with release order: read them
 * after shim_started()) and reset in a forked child, which starts again. The tables are
 * thread-safe themselves (table.h). */
struct shim_state {
    struct cushim_config cfg;
    _Atomic int run;                 /* enum shim_run_state */
    struct cushim_segment *seg;      /* counters: the segment file mapping, or anonymous memory;
                                        never unmapped by the process that made it */
    pid_t owner;                     /* pid that created seg (fork safety) */
    char seg_path[CUSHIM_PATH_MAX + 64]; /* its file, "" for anonymous memory */
    int top;                         /* launched image of `cushim run` */
    uint64_t run_id;                 /* CUSHIM_RUN_ID (hex), 0 when not under a run */
    struct shim_table ptrs;          /* device/host pointers -> allocation */
    struct shim_table arrays;        /* CUarray / CUmipmappedArray handles */
    struct shim_table vmm_handles;   /* CUmemGenericAllocationHandle -> physical allocation */
    struct shim_table vmm_maps;      /* mapped virtual address -> handle (aux) */
    struct shim_table pools;         /* CUmemoryPool -> kind its allocations count as (aux) */
    struct shim_table captures;      /* capturing stream -> its capture (capture.c) */
    struct shim_table execs;         /* CUgraphExec -> per-graph slot (aux), alloc-node bytes */
    struct shim_table graph_nodes;   /* (CUgraphExec, device) -> its alloc-node bytes there */
    struct shim_table graph_caps;    /* CUgraph made by a capture -> bytes allocated during it */
};
extern SHIM_HIDDEN struct shim_state shim;

/* Thread-local "inside the shim" depth: exactly-once counting. */
extern SHIM_HIDDEN SHIM_TLS int shim_depth;

/* Starts the shim at the first CUDA activity (segment, exit handler). Returns false when the
 * shim is off (CUSHIM_DISABLE, another copy first, or a failed start: no memory even for
 * private counters): the caller passes through. from_api: the in-process API, which creates the
 * segment but leaves the exit handler to the first CUDA call. Thread-safe: of concurrent
 * callers one starts (compare-and-swap to SHIM_STARTING) and the others spin (sched_yield)
 * until it is done, then return whether it succeeded. */
bool shim_start_slow(bool from_api);
/* The configuration loaded (init.c): what the constructor does, done first by whichever comes
 * first, the constructor, a CUDA call or a cushim.h call (a library of the program may make
 * either from its own constructor, which glibc runs before a preloaded library's). Thread-safe. */
void shim_ensure_loaded(void);
static inline bool shim_started(void)
{
    int r = atomic_load_explicit(&shim.run, memory_order_acquire);
    return likely(r == SHIM_ACTIVE) || (r != SHIM_OFF && shim_start_slow(false));
}

/* What the figures leave out (CUSHIM_INCOMPLETE_* bits, segment.h), noted before the segment
 * exists too: the start copies it into the new segment's header. 0 in a forked child. */
extern SHIM_HIDDEN _Atomic uint32_t shim_incomplete;

/* Notes that the figures leave something out (a CUSHIM_INCOMPLETE_* bit): in shim_incomplete
 * and, once the shim has started, its segment's header `incomplete`, for the summary and the
 * CLI. Two atomic ors and a load; cold (out-of-memory paths). Thread-safe. */
static inline void shim_note_incomplete(uint32_t bit)
{
    atomic_fetch_or_explicit(&shim_incomplete, bit, memory_order_relaxed);
    int r = atomic_load_explicit(&shim.run, memory_order_acquire);
    if (r == SHIM_ACTIVE || r == SHIM_QUIET)
        atomic_fetch_or_explicit(&shim.seg->h.incomplete, bit, memory_order_relaxed);
}

/* Enter a wrapper that counts: false = pass through (nested call, or shim off). */
static inline bool shim_enter(void)
{
    if (unlikely(shim_depth != 0))
        return false;
    if (unlikely(!shim_started()))
        return false;
    shim_depth = 1;
    return true;
}
/* Leaves a wrapper shim_enter let in (only then: it resets the depth to 0, it does not count
 * down). */
static inline void shim_leave(void)
{
    shim_depth = 0;
}

/* Phase changes (phase.c): the process-wide phase, from the API, the CLI's control area
 * (`cushim phase`: applied at the process's next allocation of any kind, phase_poll) or
 * CUSHIM_COMPILE_END. Returns the previous phase, or -1 (no segment, or not a phase).
 * phase_set_own is the program's own change (cushim.h): it also drops a `cushim phase` request
 * not applied yet, made before it. phase_push_own does that and keeps the previous phase on the
 * process's one stack of scopes (64 deep: -1 beyond, 0 done); phase_pop_own restores the last
 * kept one and returns it (-1: none kept); phase_pushed says whether any is kept. Thread-safe:
 * changes, the stack and the taking of a request are serialized by one lock (phase.c), never
 * held across a driver call; a forked child starts with an empty stack. */
int phase_set(int phase);
int phase_set_own(int phase);
/* The phase the segment's header says, as the shim acts on it: another process of the user may
 * have written anything there (the file is theirs to write), and a value that is no phase is the
 * run phase, as offload.c and account.h take it (only CUSHIM_PHASE_COMPILE compiles). What the
 * program is handed (cushim.h: CUSHIM_RUN or CUSHIM_COMPILE) goes through it. */
static inline int phase_of(uint32_t value)
{
    return value < CUSHIM_PHASE_COUNT ? (int)value : CUSHIM_PHASE_RUN;
}
int phase_push_own(int phase);
int phase_pop_own(void);
bool phase_pushed(void);
void phase_apply_request_slow(void);
/* An offloaded allocation's entry put in the pointer table and counted (account_alloc), as one
 * step against phase changes (under their lock, which is never held across a driver call): a
 * spill gets SHIM_F_COMPILE when the phase is compile; an entry with SHIM_F_COMPILE put once the
 * compile phase has ended is resident at once (a stress trial: one switch between the decision
 * and the put missed it). False when the table cannot hold it (nothing counted). */
struct shim_entry;
bool phase_offloaded_put(struct shim_entry *e);
static inline void phase_poll(void)
{
    struct cushim_segment *seg = shim.seg;
    if (unlikely(seg && atomic_load_explicit(&seg->control.phase_request, memory_order_relaxed)))
        phase_apply_request_slow();
}

/* ---- accounting: account.h (inline, hot) and account.c ---- */
/* One per-device counter (stats.h CUSHIM_DEV_*: bytes or a count, as the stat says) changed by
 * delta (a decrease stops at 0, logged once as a bug: account.h sub_clamped), or set to value,
 * inside the record's seqlock bracket. A device without a record (account_record: outside
 * 0..CUSHIM_MAX_DEVICES-1, no segment, or one the driver cannot describe) is ignored, silently.
 * Thread-safe; no peak is raised. */
void account_device_stat_add(int device, enum cushim_device_stat stat, int64_t delta);
void account_device_stat_set(int device, enum cushim_device_stat stat, uint64_t value);
/* The same, raised to value if below it (never lowered), for a figure kept as a high-water mark. */
void account_device_stat_raise(int device, enum cushim_device_stat stat, uint64_t value);

/* ---- contexts (context.c; the hot lookup is track.h's shim_current_device) ---- */
/* Device of an arbitrary context (cached), -1 if unknown. */
int shim_context_device(CUcontext ctx);
/* Forget a destroyed context. */
void shim_context_forget(CUcontext ctx);
/* The ordinal of the device holding the memory at `p` (memory another process exported: an IPC
 * handle, a pool pointer), as the driver says (cuda.h CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, "a
 * device on which a pointer was allocated"), when it is a device of this process with a record;
 * else `fallback` (cuda_runtime_api.h cudaIpcOpenMemHandle: a handle "to devices that may not be
 * visible in the process calling the API" opens too). Two driver calls; inside the shim. */
int shim_pointer_device(CUdeviceptr p, int fallback);
/* Drops every tracked allocation of `ctx` (teardown), counting frees. */
void shim_drop_context(CUcontext ctx);
/* Before a call that may tear down context `ending` (hooks_ctx.c; made current for the queries
 * if the thread has none): the device allocations the one-device plain path counted without
 * their context (track.h shim_sole_record) learn it from the driver (cuda.h
 * cuPointerGetAttribute, CU_POINTER_ATTRIBUTE_CONTEXT: "the CUcontext in which ptr was
 * allocated"), so that shim_drop_context finds them. One driver call per such allocation, and
 * one pass over the pointer table, only when device allocations were counted (or entries of
 * unknown context put back) since the last pass that left every entry answered; one the driver
 * could not answer is asked again at the next teardown.
 * A no-op with more than one device, and once this process's summary is written. Inside the
 * shim (shim_enter). */
void shim_resolve_contexts(CUcontext ending);
/* Whether a pointer-table entry's ctx is no context yet: 0 (the one-device plain path's), or a
 * mark shim_resolve_contexts left while asking or when the driver could not say. */
bool shim_context_unknown(uint64_t ctx);
/* A device entry with no context known was put back in the table (a failed free, possibly taken
 * out while a resolve was asking about it): the next shim_resolve_contexts looks again. */
void shim_context_unknown_returned(void);
/* In a child after fork(): the one-device record points into the parent's segment. */
void shim_context_after_fork_child(void);
/* The primary context of `device` if it is active, else NULL (retain+release, no creation). */
CUcontext shim_primary_context(int device);

/* The free path of a wrapper (after shim_enter succeeded): take the entry of `key` out of table
 * `t`, count the free (track.h track_free_begin), make the real call expression `call`, give the
 * budget its share back or, if the call failed, count the allocation back and put the entry
 * back, leave, return the real result. A key the shim never saw is forwarded unchanged (track.h). */
#define FREE_TRACKED(t, key, call)                                  \
    do {                                                            \
        struct shim_entry e_;                                       \
        if (!track_take((t), (key), &e_)) {                         \
            shim_leave();                                           \
            return (call);                                          \
        }                                                           \
        track_free_begin(&e_);                                      \
        CUresult r_ = (call);                                       \
        track_free_done((t), &e_, r_ == CUDA_SUCCESS);              \
        shim_leave();                                               \
        return r_;                                                  \
    } while (0)

/* ---- exit (exit.c) ---- */
/* Counts the allocations the process holds (made, not freed: the pointer, array and VMM handle
 * tables' entries counted on a device) into seg->live_at_exit and lists the CUSHIM_LIVE_MAX largest
 * (live_at_exit.c), once per segment: a second call does nothing. Cold: walks the tables, taking each
 * shard's lock in turn, so not from a thread that may hold one (an exit from inside a CUDA call).
 * Thread-safe. */
void shim_live_at_exit_write(struct cushim_segment *seg);
/* The atexit handler: sample, report, copy for `cushim run`, remove the segment. Once. */
void shim_exit_report(void);
/* The same; without the driver (from the ELF destructor, libcuda may be gone) when !driver_alive. */
void shim_exit_finish(bool driver_alive);
/* At load: the segment this process left before an exec (same pid, start time and pid
 * namespace, its summary not written) is finished as at an exit: handed to its `cushim run`,
 * reported (CUSHIM_REPORT), removed, so that it does not show as live with memory the exec
 * freed. One open() when there is none. */
void shim_exit_previous_image(void);
/* Stores the untracked bytes of `device` from one cuMemGetInfo_v2 answer (free_bytes, total_bytes,
 * bytes): (total - free) - device total - graph pool reserve, 0 if negative; nothing for a device
 * without a record or an answer with free > total. Called at exit and from cuMemGetInfo; thread-safe
 * (relaxed stores: a reader may see the bytes of one sample with the time of another). */
void shim_sample_untracked(int device, uint64_t free_bytes, uint64_t total_bytes);

#endif
