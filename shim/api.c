/* cushim.h: the in-process API, reading the same counters as the segment. */
#include "cushim.h"

#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "common/peaks.h"
#include "common/snapshot.h"
#include "shim/offload.h"
#include "shim/shim.h"

#ifndef CUSHIM_VERSION
#define CUSHIM_VERSION "unknown"
#endif

/* The public kinds are the X-macro kinds, in the same order. */
#define SHIM_X_CHECK(e, name, total, desc) \
    _Static_assert((int)CUSHIM_MEM_##e == (int)CUSHIM_KIND_##e, "cushim.h kind order");
CUSHIM_KINDS(SHIM_X_CHECK)
#undef SHIM_X_CHECK
_Static_assert((int)CUSHIM_MEM_KIND_COUNT == (int)CUSHIM_KIND_COUNT, "cushim.h kind count");
_Static_assert(sizeof(struct cushim_kind_stats) == CUSHIM_STAT_COUNT * sizeof(uint64_t),
               "cushim.h kind stats");

/* The function `name` of the copy of the shim that counts, when this one stands aside
 * (shim_aside): a program that dlopen()s its own copy while another is preloaded reaches this
 * one's API, and its phase must reach the counting copy. Found through that copy's marker
 * (init.c), not by name in the global scope, where a program's own stubs of the API may come
 * first. NULL when it cannot be found. */
static void *counting_copy(const char *name)
{
    static void *_Atomic handle;
    void *h = atomic_load_explicit(&handle, memory_order_acquire);
    shim_dlsym_fn lookup = shim_real_dlsym();
    if (!lookup)
        return NULL;
    if (!h) {
        Dl_info info;
        const void *marker = lookup(RTLD_DEFAULT, "cushim_copy_marker_v1");
        if (!marker || !dladdr(marker, &info) || !info.dli_fname)
            return NULL;
        h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            return NULL;
        atomic_store_explicit(&handle, h, memory_order_release);
    }
    return lookup(h, name);
}

/* At the top of an API function: when this copy stands aside, the counting copy's answers. */
#define FORWARD(name, ret_type, params, args)                                 \
    do {                                                                     \
        shim_ensure_loaded(); /* a call from a constructor before the shim's */ \
        if (__builtin_expect(shim_aside, 0)) {                               \
            ret_type(*f_) params = (ret_type(*) params)counting_copy(#name); \
            if (f_)                                                          \
                return f_ args;                                              \
        }                                                                    \
    } while (0)

/* The API is cushim activity too: it starts the shim (segment, exit report) if no CUDA call
 * counted anything yet, so a phase set before the first allocation takes effect. */
static struct cushim_segment *live_segment(void)
{
    int r = atomic_load_explicit(&shim.run, memory_order_acquire);
    if (r == SHIM_ACTIVE || r == SHIM_QUIET)
        return shim.seg;
    return r != SHIM_OFF && shim_start_slow(true) ? shim.seg : NULL;
}

/* The segment if the shim has started; the readers do not start it: a process (a forked child)
 * that only looks would otherwise leave a segment behind. */
static struct cushim_segment *started_segment(void)
{
    int r = atomic_load_explicit(&shim.run, memory_order_acquire);
    return r == SHIM_ACTIVE || r == SHIM_QUIET ? shim.seg : NULL;
}

/* How far open (seq_begin - seq_end) each record's bracket stayed through a whole patience, 0
 * when it did not: one left open for good by another process (a `cushim reset-peak` killed inside
 * it, or a write into the file, which the user's processes may make) never settles, and every read
 * would wait the patience again. */
static _Atomic uint64_t stuck_open[CUSHIM_MAX_DEVICES];

static uint64_t record_open(struct cushim_device_record *r)
{
    return atomic_load_explicit(&r->seq_begin, memory_order_relaxed) -
           atomic_load_explicit(&r->seq_end, memory_order_relaxed);
}

/* Copies one of our own records under its seqlock (the same copy the CLI makes): 0, -1 no such
 * device, -3 busy (cushim.h). A record still as open as one that never settled is tried without
 * the wait. */
static int read_device(int ordinal, struct cushim_device_snapshot *out)
{
    struct cushim_segment *seg = started_segment();
    if (!seg || ordinal < 0 || ordinal >= (int)CUSHIM_MAX_DEVICES ||
        atomic_load_explicit(&seg->devices[ordinal].state, memory_order_acquire) == 0)
        return -1;
    struct cushim_device_record *r = &seg->devices[ordinal];
    uint64_t stuck = atomic_load_explicit(&stuck_open[ordinal], memory_order_relaxed);
    bool hopeless = stuck && record_open(r) >= stuck;
    if (cushim_record_copy(r, out, 1000, hopeless ? 0 : CUSHIM_COPY_PATIENCE_NS) == 0) {
        atomic_store_explicit(&stuck_open[ordinal], 0, memory_order_relaxed);
        return 0;
    }
    if (!hopeless) {
        uint64_t open = record_open(r);
        atomic_store_explicit(&stuck_open[ordinal], open ? open : 1, memory_order_relaxed);
    }
    return -3;
}

SHIM_EXPORT int cushim_get_device_stats(int ordinal, struct cushim_device_stats *out)
{
    FORWARD(cushim_get_device_stats, int, (int, struct cushim_device_stats *), (ordinal, out));
    struct cushim_device_stats full;
    struct cushim_device_snapshot d;
    if (!out || out->size < offsetof(struct cushim_device_stats, total_bytes))
        return -2;
    int rc = read_device(ordinal, &d);
    if (rc != 0)
        return rc;
    memset(&full, 0, sizeof full);
    full.size = out->size;
    full.version = CUSHIM_STATS_VERSION;
    full.ordinal = ordinal; /* the record's slot: its own ordinal field is the user's to overwrite */
    full.uuid_valid = d.identified;
    memcpy(full.uuid, d.uuid, sizeof full.uuid);
    full.total_bytes = d.total_bytes;
    full.untracked_bytes = d.untracked_bytes;
    memcpy(full.kind, d.kinds, sizeof full.kind);
    full.device_total_current_bytes = d.dev[CUSHIM_DEV_total_current];
    full.device_total_peak_bytes = d.dev[CUSHIM_DEV_total_peak];
    full.async_pool_used_current_bytes = d.dev[CUSHIM_DEV_async_pool_used_current];
    full.async_pool_used_high_bytes = d.dev[CUSHIM_DEV_async_pool_used_high];
    full.async_pool_reserved_current_bytes = d.dev[CUSHIM_DEV_async_pool_reserved_current];
    full.async_pool_reserved_high_bytes = d.dev[CUSHIM_DEV_async_pool_reserved_high];
    full.async_pool_sampled_ns = d.dev[CUSHIM_DEV_async_pool_sampled_ns];
    full.untracked_sampled_ns = d.untracked_sampled_ns;
    full.graph_pool_used_current_bytes = d.dev[CUSHIM_DEV_graph_pool_used_current];
    full.graph_pool_used_high_bytes = d.dev[CUSHIM_DEV_graph_pool_used_high];
    full.graph_pool_reserved_current_bytes = d.dev[CUSHIM_DEV_graph_pool_reserved_current];
    full.graph_pool_reserved_high_bytes = d.dev[CUSHIM_DEV_graph_pool_reserved_high];
    full.graph_pool_sampled_ns = d.dev[CUSHIM_DEV_graph_pool_sampled_ns];
    full.limit_bytes = d.dev[CUSHIM_DEV_limit];
    full.peak_reset_count = d.dev[CUSHIM_DEV_peak_reset_count];
    full.peak_reset_last_ns = d.dev[CUSHIM_DEV_peak_reset_ns];
    full.run_device_peak_bytes = d.dev[CUSHIM_DEV_run_peak];
    full.compile_device_peak_bytes = d.dev[CUSHIM_DEV_compile_peak];
    full.device_total_lifetime_peak_bytes = d.dev[CUSHIM_DEV_lifetime_peak];
    full.limit_held_bytes = d.dev[CUSHIM_DEV_limit_held];
    memcpy(out, &full, out->size < sizeof full ? out->size : sizeof full);
    return 0;
}

SHIM_EXPORT uint64_t cushim_device_current_bytes(int ordinal)
{
    FORWARD(cushim_device_current_bytes, uint64_t, (int), (ordinal));
    struct cushim_device_snapshot d;
    return read_device(ordinal, &d) == 0 ? d.dev[CUSHIM_DEV_total_current] : 0;
}

SHIM_EXPORT uint64_t cushim_device_peak_bytes(int ordinal)
{
    FORWARD(cushim_device_peak_bytes, uint64_t, (int), (ordinal));
    struct cushim_device_snapshot d;
    return read_device(ordinal, &d) == 0 ? d.dev[CUSHIM_DEV_total_peak] : 0;
}

SHIM_EXPORT int cushim_reset_peak(int ordinal)
{
    FORWARD(cushim_reset_peak, int, (int), (ordinal));
    struct cushim_segment *seg = started_segment();
    int n = 0;
    if (!seg)
        return 0;
    uint32_t count = atomic_load_explicit(&seg->h.device_count, memory_order_acquire);
    for (uint32_t i = 0; i < count && i < CUSHIM_MAX_DEVICES; i++) {
        if ((ordinal >= 0 && (int)i != ordinal) ||
            atomic_load_explicit(&seg->devices[i].state, memory_order_acquire) == 0)
            continue;
        cushim_reset_record_peaks(&seg->devices[i], atomic_load(&seg->h.phase));
        n++;
    }
    return n;
}

_Static_assert(CUSHIM_RUN == (int)CUSHIM_PHASE_RUN && CUSHIM_COMPILE == (int)CUSHIM_PHASE_COMPILE, "phases");

SHIM_EXPORT int cushim_set_phase(int phase)
{
    FORWARD(cushim_set_phase, int, (int), (phase));
    if (phase < 0 || phase >= CUSHIM_PHASE_COUNT)
        return -1; /* refused before anything starts: a wrong call leaves no segment */
    /* The program's own change: a `cushim phase` request not applied yet, made before it, is
     * dropped (applied at the next allocation, it would undo the program's newer choice). */
    return live_segment() ? phase_set_own(phase) : -1;
}

SHIM_EXPORT int cushim_get_phase(void)
{
    FORWARD(cushim_get_phase, int, (void), ());
    struct cushim_segment *seg = started_segment();
    if (seg)
        return phase_of(atomic_load(&seg->h.phase));
    /* Not started: the phase it will start in. */
    return atomic_load(&shim.run) == SHIM_OFF ? -1 : shim.cfg.phase;
}

SHIM_EXPORT int cushim_push_phase(int phase)
{
    FORWARD(cushim_push_phase, int, (int), (phase));
    if (phase < 0 || phase >= CUSHIM_PHASE_COUNT)
        return -1; /* refused before anything starts: a wrong call leaves no segment */
    return live_segment() ? phase_push_own(phase) : -1;
}

SHIM_EXPORT int cushim_pop_phase(void)
{
    FORWARD(cushim_pop_phase, int, (void), ());
    if (!phase_pushed())
        return -1; /* nothing pushed: nothing starts for it */
    return live_segment() ? phase_pop_own() : -1;
}

SHIM_EXPORT const char *cushim_version(void)
{
    FORWARD(cushim_version, const char *, (void), ());
    return CUSHIM_VERSION;
}

/* What `cushim run` looks for in a file before preloading it (tools/libpath.c): a path that
 * names some other library would run the program uncounted. */
__attribute__((used)) static const char library_marker[] = "cushim-preload-library " CUSHIM_VERSION;
